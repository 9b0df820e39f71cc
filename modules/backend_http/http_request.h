/* backend_http: the request bytes of one call, templates filled. */
#ifndef HTTP_REQUEST_H
#define HTTP_REQUEST_H

#include "http_config.h"

typedef struct http_request {
    char *target;  /* path and query, escaped */
    char *headers; /* "Name: value\r\n" lines: Accept, the tool's, Content-Type */
    char *body;    /* JSON or NULL */
    size_t body_len;
} http_request;

/* Any thread: the parts of the call's request (malloc'd). -1 with the
 * call's error set (-32602 naming a missing argument). */
int http_request_build(const mcpg_host *h, const http_tool *t, mcpg_call *call, http_request *out);
void http_request_free(http_request *rq);

#endif
