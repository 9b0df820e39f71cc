/* backend_http: one call's request and answer through upclient, on the
 * call's loop, over the loop's pool for the tool's upstream. */
#ifndef HTTP_EXCHANGE_H
#define HTTP_EXCHANGE_H

#include <upcred.h>

#include "http_config.h"
#include "http_request.h"
#include "http_upstream.h"

typedef struct http_exchange http_exchange;

/* Any thread: take the request's parts (rq is emptied) for a call of tool
 * t. NULL with the call's error set. */
http_exchange *http_exchange_new(const mcpg_host *h, mcpg_instance *self, http_upstreams *u,
                                 upcred *cred, const http_tool *t, mcpg_call *call,
                                 http_request *rq);
/* On the call's loop: get the call's credential (cred), send, and answer
 * through call_resume later. */
void http_exchange_start(http_exchange *x);
/* Any thread: start it on the call's loop; non-zero (freed, error set)
 * when the worker has stopped. */
int http_exchange_post(http_exchange *x);
/* On the loop: the client went away: end the request, answer now. */
void http_exchange_cancel(http_exchange *x);

#endif
