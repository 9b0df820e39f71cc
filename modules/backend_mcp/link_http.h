/* backend_mcp: the HTTP link's parts (link_http.c) that its callers'
 * sessions (caller_sessions.c) share. I/O thread only. */
#ifndef BACKEND_MCP_LINK_HTTP_H
#define BACKEND_MCP_LINK_HTTP_H

#include "sse.h"
#include "upclient.h"
#include "upstream.h"

typedef struct link_http link_http;
typedef struct caller_session caller_session;

/* A message waiting: for the gateway's own token (client_credentials), or
 * for its caller's session to open. */
typedef struct queued {
    char *json;
    size_t n;
    up_request *r;
    struct queued *next;
} queued;

/* One POST (or the GET stream) and its answer. */
typedef struct hx {
    link_http *l;
    up_request *r; /* the request it carries (NULL: a notification, a response, GET) */
    up_req *req;
    int status;
    bool sse, is_get, is_init, is_discover;
    bool abandoned;     /* its request was cancelled: nothing of its end matters */
    bool too_big;       /* the answer (or one of its events) passed max_message_bytes */
    char *www;          /* a 401's WWW-Authenticate */
    caller_session *cs; /* the caller's session it went on, or NULL: the gateway's */
    bool cs_init;       /* ... and it is that session's initialize */
    mcpg_buf body;      /* a JSON answer (or an error's excerpt) */
    sse_reader sse_r;
    struct hx *next; /* every exchange open: stop ends them */
} hx;

struct link_http {
    mcp_link base;
    up_target *target;
    up_pool *pool;
    hx *open;
    bool stopped;
    hx *get; /* the session wire's GET stream (the gateway's session's) */
    uv_timer_t get_timer;
    bool get_timer_init;
    char url[512];
    upcred_wait own; /* client_credentials: the gateway's own token, being fetched */
    bool own_pending;
    queued *queue; /* ... and what waits for it, oldest first */
    size_t n_queued;
    caller_session *sessions; /* the session wire with credentials per caller */
    size_t n_sessions;
    uv_timer_t idle_timer;
    bool idle_timer_init;
};

hx *link_hx_open(link_http *l, up_request *r);
void link_forget_hx(link_http *l, hx *x);
/* Send method (json: its body, or NULL) on x with the header lines given.
 * 0, or MCPG_ENOMEM (x forgotten). */
int link_send(link_http *l, hx *x, const char *method, const char *headers, const char *json,
              size_t n);
int link_post(link_http *l, hx *x, const char *headers, const char *json, size_t n);
/* The session wire's GET stream on session sid (cs: a caller's, or NULL:
 * the gateway's) with the header lines given: what the upstream says there
 * outside any request comes in as on any stream. NULL when it could not
 * be sent. */
hx *link_open_get(link_http *l, caller_session *cs, const char *sid, const char *lines,
                  const char *auth_line);
/* The GET streams that ended are opened again in a while. */
void link_schedule_get(link_http *l);
int link_queue_add(queued **q, const char *json, size_t n, up_request *r);
/* Take r's message out of q: 1 when it was there. */
int link_queue_drop(queued **q, const up_request *r);

/* caller_sessions.c: on the session wire, a call whose credentials are its
 * caller's own goes on a session that caller opened, never on another's. */
/* 1 when json (for r) belongs on a caller's session: sent, queued until
 * that session opens, or refused (*rc). */
int sessions_send(link_http *l, const char *json, size_t n, up_request *r, int *rc);
/* x's head came: a session's initialize gives its id. */
void sessions_on_head(hx *x, int status, const up_header *h, size_t n);
/* A message that came on x: 1 when it was the session's initialize answer
 * (kept in x->body). */
int sessions_on_message(hx *x, const char *data, size_t n);
/* Any other message on x to the upstream's handling (up_on_message); what
 * the gateway answers at once goes back on x's session. */
void sessions_deliver(hx *x, const char *data, size_t n);
/* x ended: 1 when handled here (a session's initialize, a session lost). */
int sessions_done(link_http *l, hx *x, int err);
void sessions_hx_gone(hx *x);
void sessions_forget(link_http *l, const up_request *r);
/* The GET streams of the callers' open sessions that have none, opened. */
void sessions_open_gets(link_http *l);
/* cs's GET stream ended with status (0: no answer). */
void sessions_get_ended(link_http *l, caller_session *cs, int status);
void sessions_start(link_http *l);
void sessions_stop(link_http *l);

#endif
