/* transport_http: what the wires do when the http layer lets go of a
 * connection, a request or a loop. The http layer knows nothing of streams,
 * replay buffers, relays or sessions; it calls these through m->wire, which
 * th_wire_install fills at create, so its arrows only point down. */
#include "wire/wire.h"
#include "wire/relay.h"
#include "wire/replay.h"
#include "wire/stream.h"

/* Resumable calls carry on without their client; listening streams end. */
static void conn_closing(th_conn *c) {
    th_replay_conn_closing(c);
    for (th_req *r = c->qhead; r; r = r->next) th_listener_remove(c->ws, r);
}

/* A drain: a listening stream ends with its result. */
static void conn_draining(th_conn *c) {
    if (c->nstreams) th_listeners_end(c->ws, c);
}

/* A request still queued on a connection being freed. */
static void request_dropped(th_worker_state *ws, th_req *r) { th_listener_remove(ws, r); }

/* A request going back to the free list: a relayed stream's replica hears
 * its client went. */
static void request_freed(th_worker_state *ws, th_req *r) { th_relay_drop(ws, r); }

/* Once a second on each loop: keep-alives, each loop its own session cache,
 * relays whose replica went quiet. */
static void sweep(th_worker_state *ws, uint64_t now_ms) {
    th_listeners_keepalive(ws, now_ms);
    th_sess_sweep(ws, now_ms);
    th_relay_sweep(ws, now_ms);
}

/* destroy(): calls that ran on without a connection (their handles were the
 * kernel's), then the loop's replay buffers and session cache. */
static void worker_freeing(th_worker_state *ws) {
    while (ws->orphans) {
        th_req *r = ws->orphans;
        th_replay_orphan_remove(ws, r);
        r->rs = NULL;
        th_req_put(ws, r);
    }
    th_replay_free_all(ws);
    th_sess_cache_free(ws);
}

static const th_wire_hooks k_hooks = {
    .conn_closing = conn_closing,
    .conn_draining = conn_draining,
    .conn_handover = th_handover,
    .request_dropped = request_dropped,
    .request_freed = request_freed,
    .sweep = sweep,
    .worker_freeing = worker_freeing,
};

void th_wire_install(th_mod *m) { m->wire = &k_hooks; }
