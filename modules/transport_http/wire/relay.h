/* transport_http: a legacy stream shown by another replica of the fleet.
 *
 * A stream lives where its call runs (replay.h): its buffer never leaves
 * that loop. Its event ids name the replica (a number each gateway process
 * draws at start), so a GET with Last-Event-ID that reaches another replica
 * behind a load balancer is relayed over the coordinator's pub/sub, and
 * nothing is written to the coordinator per event unless a client resumes
 * elsewhere:
 *
 *   the replica asked (B)                    the stream's replica (A)
 *   GET, Last-Event-ID a_w_no_seq
 *   "O <B> <wB> <ticket> <no> <seq> <sid>"  ->  mcpg.relay.<A>.<w>
 *                                             checks the session and the stream
 *   mcpg.relay.<B>.<wB>  <-  "E <ticket> <n>\n<event>" the kept events after seq,
 *                            then each new one as the call sends it
 *                        <-  "F <ticket> <n>"  the stream is over
 *                        <-  "X <ticket> <status>"  400 unknown, 409 shown already
 *                        <-  "H <ticket> <n>"  every TH_RELAY_HEARTBEAT_MS
 *   "D <B> <wB> <ticket> <no>"  ->  B's client went: the stream waits again
 *
 * Each message's n counts the E messages before it; a gap (a store that
 * dropped one) ends B's client stream, and the client resumes again from
 * the last id it has. A replica that answers nothing within
 * TH_RELAY_ANSWER_MS (gone, or the id is stale) gets 400, as an unknown
 * stream does; a relayed stream silent for TH_RELAY_SILENT_MS (its replica
 * died) ends, so its client tries again. A session's end reaches both ends
 * (mcpg.session.end): A ends the stream, and B's client sees its end. */
#ifndef TH_RELAY_H
#define TH_RELAY_H

#include "wire/wire.h"
#include "wire/legacy_parse.h"

#define TH_RELAY_ANSWER_MS 2000
#define TH_RELAY_HEARTBEAT_MS 5000
#define TH_RELAY_SILENT_MS 15000

/* B: r (its session checked) resumes ref, a stream of another replica. */
void th_relay_open(th_conn *c, th_req *r, const th_event_ref *ref);
/* B: r is being given back while relayed (its connection closed). */
void th_relay_drop(th_worker_state *ws, th_req *r);
/* B: the session ended: its relayed streams end here at once. */
void th_relay_session_end(th_worker_state *ws, const char *sid);
/* A: one event of rs (its SSE text as kept), for a client elsewhere. */
void th_relay_event(th_worker_state *ws, th_rstream *rs, const char *text, size_t n);
/* A: rs is over or going: its client elsewhere sees the end. */
void th_relay_end(th_worker_state *ws, th_rstream *rs);

int th_relay_worker_start(th_worker_state *ws);
void th_relay_worker_stop(th_worker_state *ws); /* ends relayed streams both ways */
/* Once a second: B's unanswered and silent relays, A's heartbeats. */
void th_relay_sweep(th_worker_state *ws, uint64_t now);

#endif
