/* backend_http: the request bytes of one call, templates filled. */
#ifndef HTTP_REQUEST_H
#define HTTP_REQUEST_H

#include "http_config.h"

/* The longest request target (path and query, encoded) a call may make:
 * common servers refuse a request line much over 8 KiB. */
#define HTTP_TARGET_MAX 8192

typedef struct http_request {
    char *target;  /* path and query, escaped */
    char *headers; /* "Name: value\r\n" lines: Accept, the tool's, Content-Type */
    char *body;    /* JSON or NULL */
    size_t body_len;
    uint32_t trace_span; /* the request's client span (host->call_trace_upstream), or 0 */
} http_request;

/* Any thread: the parts of the call's request (malloc'd), each argument
 * escaped for its place (see http_request.c). -1 with the call's error set:
 * -32602 naming the argument that is missing, holds a NUL, is not a scalar
 * in the URL, would make a path segment empty, "." or "..", or makes the
 * URL longer than HTTP_TARGET_MAX. */
int http_request_build(const mcpg_host *h, const http_tool *t, mcpg_call *call, http_request *out);
void http_request_free(http_request *rq);

#endif
