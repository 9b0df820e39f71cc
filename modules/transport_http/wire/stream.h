/* transport_http: answers that are event streams (text/event-stream).
 *
 * A request's answer becomes a stream when its call sends a message before
 * its outcome (desc->message), when it is a subscriptions/listen, or (the
 * legacy wire) by default. The head is written once; each message is one
 * SSE event (a chunk of a chunked body; HTTP/1.0 streams are delimited by
 * the close); the end writes the last event and the empty chunk. Bytes go
 * to the connection's output when the request is first in line, else to
 * the request's own buffer until it is (answers stay in request order).
 *
 * A stream whose unwritten bytes pass TH_STREAM_MAX (a client that stopped
 * reading) closes its connection: the bound on what news can queue. */
#ifndef TH_STREAM_H
#define TH_STREAM_H

#include "wire/wire.h"

#define TH_STREAM_MAX (4 * 1024 * 1024)
#define TH_KEEPALIVE_MS 15000 /* a comment line on quiet streams, as the SDKs do */

/* Write the stream's head if not yet written. 0, or MCPG_ENOMEM. */
int th_sse_begin(th_conn *c, th_req *r);
/* "<replica>_<worker>_<stream>_<seq>", an event id that says where its
 * stream lives: the gateway process (th_mod.replica), its loop, the stream's
 * number there, the event's place in it. out holds at least TH_EVENT_ID_MAX
 * bytes. Returns the length (out NUL-terminated). */
#define TH_EVENT_ID_MAX 48
size_t th_event_id(char *out, const th_worker_state *ws, unsigned stream, unsigned seq);
/* One event: `id` (may be NULL) and the JSON-RPC message. 0, MCPG_ENOMEM,
 * or MCPG_EAGAIN when the stream is over its bound (the connection closes). */
int th_sse_event(th_conn *c, th_req *r, const char *id, size_t idn, const char *json, size_t n);
/* One event's text into b ("event: message", the id if any, the JSON as
 * data lines, the blank line). 0, or MCPG_ENOMEM. */
int th_sse_format(const mcpg_host *h, mcpg_buf *b, const char *id, size_t idn, const char *json, size_t n);
/* A comment line (keep-alive or priming data-less event text). */
int th_sse_raw(th_conn *c, th_req *r, const char *text, size_t n);
/* The last event (may be NULL) and the end of the body; r is answered. */
void th_sse_end(th_conn *c, th_req *r, const char *id, size_t idn, const char *json, size_t n);

/* The worker's open listening streams (subscriptions/listen, GET). */
void th_listener_add(th_worker_state *ws, th_req *r);
void th_listener_remove(th_worker_state *ws, th_req *r);
/* Drain: each listening stream ends with its final result. */
void th_listeners_end(th_worker_state *ws, th_conn *only);
/* A reload's deadline: those that began listening before before_us end as
 * at a drain (their connections stay); how many. */
uint32_t th_listeners_end_before(th_worker_state *ws, uint64_t before_us);
/* Keep-alive comment on every stream quiet for TH_KEEPALIVE_MS. */
void th_listeners_keepalive(th_worker_state *ws, uint64_t now_ms);

#endif
