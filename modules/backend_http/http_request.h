/* backend_http: the request bytes of one call, templates filled. */
#ifndef HTTP_REQUEST_H
#define HTTP_REQUEST_H

#include "http_config.h"

/* Any thread: the whole HTTP/1.1 request (keep-alive) in *out (malloc'd).
 * -1 with the call's error set (-32602 naming a missing argument). */
int http_request_build(const mcpg_host *h, const http_tool *t, mcpg_call *call, char **out,
                       size_t *len);

#endif
