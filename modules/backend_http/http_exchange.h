/* backend_http: one request/response exchange on the call's loop, over a
 * kept-alive connection from the loop's pool. */
#ifndef HTTP_EXCHANGE_H
#define HTTP_EXCHANGE_H

#include "http_config.h"

typedef struct http_pools http_pools;   /* every loop's idle connections */
typedef struct http_exchange http_exchange;

http_pools *http_pools_new(size_t ntools);
/* On w's loop: close the idle connections kept there. */
void http_pools_worker_stop(http_pools *p, void *uv_loop);
/* Any thread, once no loop runs: free what is left (no handle is open). */
void http_pools_free(http_pools *p);

/* Any thread: take the request bytes (malloc'd) for a call of tool
 * `index`. NULL with the call's error set. */
http_exchange *http_exchange_new(const mcpg_host *h, mcpg_instance *self, http_pools *p,
                                 const http_tool *t, size_t index, mcpg_call *call, char *req,
                                 size_t len);
/* On the call's loop: send, and answer through call_resume later. */
void http_exchange_start(http_exchange *x);
/* Any thread: start it on the call's loop; non-zero (freed, error set)
 * when the worker has stopped. */
int http_exchange_post(http_exchange *x);
/* On the loop: the client went away: close the connection, answer now. */
void http_exchange_cancel(http_exchange *x);

#endif
