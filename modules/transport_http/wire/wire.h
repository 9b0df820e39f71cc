/* transport_http's wire layer: the two MCP wires over the http layer (the
 * stateless 2026-07-28 one, the legacy session one), their calls, streams,
 * replay, relay and fleet news. It calls down into http/ and never up into
 * routes/; the http layer reaches it only through th_wire_hooks. */
#ifndef TH_WIRE_H
#define TH_WIRE_H

#include "http/http.h"
#include "wire/mcp_stateless.h"
#include "wire/session.h"

/* A stream's bytes not yet taken by its client past which a message for it
 * is refused (MCPG_EAGAIN to its sender, which keeps or drops it). */
#define TH_STREAM_BACKLOG_MAX (4u << 20)
#define TH_RESUMABLE_CALL 1  /* a legacy call's stream */
#define TH_RESUMABLE_NEWS 2  /* a session's standalone GET stream */

/* The gateway's serverInfo, {"name":...,"version":...}, NUL-terminated:
 * every 2026-07-28 result's _meta serverInfo and initialize's. Made at
 * start and again when a reload changes gateway.name; loops read the
 * newest, and each one made stays until destroy (a response may still be
 * writing it; a reload that renames the gateway is rare), so none is freed
 * under a reader. */
typedef struct th_info {
    struct th_info *older;
    size_t len;
    char json[];
} th_info;

/* caps.c: the capabilities object both wires advertise (legacy: initialize's
 * form, else server/discover's), appended to b. 0 or MCPG_ENOMEM. */
int th_caps_append(const th_mod *m, const th_req *r, mcpg_buf *b, int legacy);
/* caps.c: the serverInfo of the gateway's name now (host->gateway_name,
 * which a reload may change), made when it differs from the newest: at
 * start and at each reload, on the main thread. 0 or MCPG_ENOMEM. */
int th_server_info_build(th_mod *m);
/* The newest serverInfo, on any loop; its bytes stay valid until destroy. */
th_piece th_server_info(const th_mod *m);
void th_server_info_free(th_mod *m);

/* servers.c: the virtual server a request came in on (ABI 1.12; none:
 * the gateway's own /mcp). */
/* Keep what r needs of v, as host->server_find gave it: 0, MCPG_EINVAL (a
 * name the manifest would not allow), MCPG_ENOMEM. */
int th_req_server_keep(const mcpg_host *h, th_req *r, const mcpg_server_view *v);
/* The serverInfo r is answered with: its server's when it sets one, else
 * the transport's own (th_server_info); NUL-terminated. */
th_piece th_req_server_info(const th_mod *m, const th_req *r);
/* Its server's instructions as a JSON string, or {NULL, 0}. */
th_piece th_req_instructions(const th_req *r);
/* 1 when r came in on the server named `server` ("": the gateway's /mcp). */
int th_req_same_server(const th_req *r, const char *server);

#define TH_LISTEN_TOOLS 1u
#define TH_LISTEN_RESOURCES 2u
#define TH_LISTEN_PROMPTS 4u

/* call.c: hand r->desc (wire, method, name, params, args, id and the 1.1 fields set)
 * to the kernel; the answer comes from complete(). */
void th_submit(th_conn *c, th_req *r);
/* The same for a call to the events pipeline (host->webhook_submit): the
 * caller's own desc.complete, and its answer when the kernel refuses. */
void th_submit_event(th_conn *c, th_req *r, void (*complete)(void *, mcpg_call *),
                     void (*refused)(th_conn *, th_req *, int));
/* mcp_post.c: POST /mcp: the wire chosen, then the request handled. */
void th_handle_mcp(th_conn *c, th_req *r);

/* mcp_legacy.c: the 2025-11-25 wire (sessions) */
void th_legacy_post(th_conn *c, th_req *r);
void th_legacy_get(th_conn *c, th_req *r);
void th_legacy_delete(th_conn *c, th_req *r);
/* Turn r's answer into a stream: head, then the priming event. */
int th_legacy_stream_begin(th_conn *c, th_req *r);
/* Start r's stream if it is a legacy answer still waiting to: 1 started,
 * 0 nothing to do, -1 failed (out of memory). */
int th_legacy_stream_due(th_conn *c, th_req *r);
/* A legacy SSE answer waits to begin: make sure the prime timer runs. */
void th_legacy_prime_soon(th_worker_state *ws);
#define TH_PRIME_MS 50 /* a call silent this long gets its stream (and an event id) */
/* A request waiting for the coordinator (session.h): parked, then resumed
 * (its handler runs again; the steps done are flagged in the request). */
void th_legacy_park(th_req *r);
/* A parked request handled again from the top (a session step answered, a
 * subscription allowed): either wire's POST, a legacy GET or DELETE. */
void th_legacy_again(th_req *r);
/* End the standalone GET streams of session sid on this loop. */
void th_legacy_end_streams(th_worker_state *ws, const char *sid);
/* notifications/cancelled: the call of session sid with that request id on this loop. */
void th_legacy_cancel_local(th_worker_state *ws, const char *sid, const char *id, size_t idn);

/* resume.c: GET with Last-Event-ID */
void th_resume(th_conn *c, th_req *r, const char *id, size_t n);
/* Its answer when the stream cannot be shown: 400 (no such stream) or 409 (shown already). */
void th_resume_refuse(th_conn *c, th_req *r, int status);
/* c's handover request is first in line and everything before it written:
 * move the connection to the stream's loop. */
void th_handover(th_conn *c);

/* wire_hooks.c: point m->wire at the wires' hooks */
void th_wire_install(th_mod *m);

/* news_sub.c: each loop's subscription to the fleet's resource news (the
 * resource webhooks publish them, routes/webhook.h) */
#define TH_NEWS_SUBJECT MCPG_FLEET_NEWS_SUBJECT /* abi/mcpg/kinds.h: the format */
int th_news_worker_start(th_worker_state *ws);
void th_news_worker_stop(th_worker_state *ws);

/* listen.c */
/* 1 when a subscriptions/listen asks for resource subscriptions. */
int th_listen_has_uris(const mcpg_host *h, const th_mcp_verdict *v);
void th_listen_start(th_conn *c, th_req *r, const th_mcp_verdict *v);
void th_listen_stop(th_worker_state *ws, th_req *r);
void th_news(th_worker_state *ws, const char *method, const char *uri, size_t uri_len);

#endif
