/* transport_http: legacy streams shown by another replica (see relay.h). */
#include "wire/relay.h"

#include "wire/replay.h"
#include "http/response.h"
#include "wire/stream.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MSG(s) TH_LIT("\"" s "\"")
#define HEAD_MAX 128 /* a message's header line */

/* B's side: a GET shown from another replica's buffer. */
struct th_relay {
    th_relay *next;   /* the loop's relays */
    th_req *r;
    uint64_t ticket;  /* unique on this loop: the answers name it */
    uint32_t replica, worker, no;
    uint32_t got;     /* E messages taken: the next one's n */
    uint64_t asked_ms, heard_ms;
    uint8_t begun;    /* accepted: the stream's head is written */
};

static void noop_cb(void *arg, int status, const mcpg_coord_value *v) { (void)arg, (void)status, (void)v; }

static uint64_t now_ms(th_worker_state *ws) { return uv_now(ws->loop); }

/* The subject a loop hears its relay messages on. */
static void subject_of(char out[48], uint32_t replica, uint32_t worker) {
    snprintf(out, 48, "mcpg.relay.%" PRIu32 ".%" PRIu32, replica, worker);
}

static int send_to(th_worker_state *ws, uint32_t replica, uint32_t worker, const char *data, size_t n) {
    const th_mod *m = ws->mod;
    if (!m->co_ops || !ws->w || ws->stopped) return MCPG_EUNAVAIL;
    char subject[48];
    subject_of(subject, replica, worker);
    return m->co_ops->publish(m->co, ws->w, subject, data, n, noop_cb, NULL);
}

/* ---- reading a message's header: space-separated decimals ------------------------------------ */

typedef struct reader {
    const char *p, *end;
} reader;

static int take_u64(reader *rd, uint64_t *out) {
    uint64_t v = 0;
    const char *s = rd->p;
    while (rd->p < rd->end && *rd->p >= '0' && *rd->p <= '9' && v <= UINT64_MAX / 10)
        v = v * 10 + (uint64_t)(*rd->p++ - '0');
    if (rd->p == s) return 0;
    if (rd->p < rd->end && *rd->p == ' ') rd->p++;
    *out = v;
    return 1;
}

static int take_u32(reader *rd, uint32_t *out) {
    uint64_t v;
    if (!take_u64(rd, &v) || v > UINT32_MAX) return 0;
    *out = (uint32_t)v;
    return 1;
}

/* ---- B: the client's side ------------------------------------------------------------------- */

static th_relay *find_relay(th_worker_state *ws, uint64_t ticket) {
    for (th_relay *rl = ws->relays; rl; rl = rl->next)
        if (rl->ticket == ticket) return rl;
    return NULL;
}

/* Off the loop's list and off its request; the request is not answered here. */
static void relay_forget(th_worker_state *ws, th_relay *rl) {
    th_relay **pp = &ws->relays;
    while (*pp && *pp != rl) pp = &(*pp)->next;
    if (*pp) *pp = rl->next;
    th_req *r = rl->r;
    r->relay = NULL;
    if (r->conn) r->conn->nstreams--;
    th_metric_add(ws, ws->mod->m_streams, -1);
    ws->mod->host->free(rl);
}

/* Tell the stream's replica that nobody here shows it any more. */
static void say_detach(th_worker_state *ws, const th_relay *rl) {
    char msg[HEAD_MAX];
    int n = snprintf(msg, sizeof msg, "D %" PRIu32 " %" PRIu32 " %" PRIu64 " %" PRIu32, ws->mod->replica,
                     ws->index, rl->ticket, rl->no);
    (void)send_to(ws, rl->replica, rl->worker, msg, (size_t)n);
}

static void unreachable(th_conn *c, th_req *r) {
    th_respond_rpc_error(c, r, 503, 1, TH_LIT("null"), MCPG_RPC_SERVER_ERROR,
                         MSG("Service Unavailable: the stream's replica cannot be reached"), NULL, 0);
}

/* The relayed answer is over: an error (status) before the head, else the
 * stream's end. */
static void relay_finish(th_worker_state *ws, th_relay *rl, int status) {
    th_req *r = rl->r;
    th_conn *c = r->conn;
    int begun = rl->begun;
    relay_forget(ws, rl);
    if (!c || c->closing) return;
    if (!begun && status == 503)
        unreachable(c, r);
    else if (!begun)
        th_resume_refuse(c, r, status == 409 ? 409 : 400);
    else
        th_sse_end(c, r, NULL, 0, NULL, 0);
    th_conn_advance(c);
}

void th_relay_open(th_conn *c, th_req *r, const th_event_ref *ref) {
    th_worker_state *ws = c->ws;
    th_relay *rl = ws->mod->host->calloc(1, sizeof *rl);
    if (!rl) {
        th_respond_status_error(c, r, 503);
        return;
    }
    rl->r = r;
    rl->ticket = ++ws->relays_made;
    rl->replica = ref->replica, rl->worker = ref->worker, rl->no = ref->no;
    rl->asked_ms = rl->heard_ms = now_ms(ws);
    char msg[HEAD_MAX + TH_SID_LEN];
    int n = snprintf(msg, sizeof msg, "O %" PRIu32 " %" PRIu32 " %" PRIu64 " %" PRIu32 " %" PRIu32 " %s",
                     ws->mod->replica, ws->index, rl->ticket, ref->no, ref->seq, r->sid);
    if (n < 0 || (size_t)n >= sizeof msg || send_to(ws, ref->replica, ref->worker, msg, (size_t)n) < 0) {
        ws->mod->host->free(rl);
        unreachable(c, r);
        return;
    }
    rl->next = ws->relays;
    ws->relays = rl;
    r->relay = rl;
    r->state = TH_REQ_INFLIGHT;
    c->nstreams++; /* a stream (being asked for), not an idle connection */
    th_metric_add(ws, ws->mod->m_streams, 1);
}

void th_relay_drop(th_worker_state *ws, th_req *r) {
    th_relay *rl = r->relay;
    if (!rl) return;
    say_detach(ws, rl);
    relay_forget(ws, rl);
}

/* The next message in order: n must be the count of events taken. */
static int in_order(th_worker_state *ws, th_relay *rl, uint32_t n) {
    if (n == rl->got) {
        rl->heard_ms = now_ms(ws);
        return 1;
    }
    /* one was lost on the way: end here, the client resumes from what it has */
    ws->mod->host->log(ws->mod->self, MCPG_LOG_WARN,
                       "relayed stream %" PRIu32 "_%" PRIu32 "_%" PRIu32 ": message %" PRIu32
                       " came where %" PRIu32 " was due; its client's stream ends (it may resume)",
                       rl->replica, rl->worker, rl->no, n, rl->got);
    say_detach(ws, rl);
    relay_finish(ws, rl, 0);
    return 0;
}

static void on_accepted(th_worker_state *ws, th_relay *rl) {
    th_conn *c = rl->r->conn;
    rl->heard_ms = now_ms(ws);
    if (rl->begun) return;
    rl->begun = 1;
    if (!c || th_sse_begin(c, rl->r)) {
        say_detach(ws, rl);
        if (c) c->close_after = 1;
        relay_finish(ws, rl, 0);
    }
}

static void on_event(th_worker_state *ws, th_relay *rl, uint32_t n, const char *text, size_t len) {
    if (!rl->begun || !in_order(ws, rl, n)) return;
    rl->got++;
    th_req *r = rl->r;
    if (r->conn && th_sse_raw(r->conn, r, text, len) == MCPG_EAGAIN) { /* it stopped reading: closing */
        say_detach(ws, rl);
        relay_forget(ws, rl);
    }
}

static void client_side(th_worker_state *ws, char kind, reader *rd) {
    uint64_t ticket;
    uint32_t n;
    if (!take_u64(rd, &ticket)) return;
    th_relay *rl = find_relay(ws, ticket);
    if (!rl || !take_u32(rd, &n)) return; /* one that ended here already */
    switch (kind) {
    case 'K': on_accepted(ws, rl); return;
    case 'H': (void)in_order(ws, rl, n); return;
    case 'F': if (in_order(ws, rl, n)) relay_finish(ws, rl, 0); return;
    case 'X': relay_finish(ws, rl, (int)n); return;
    case 'E': {
        const char *nl = memchr(rd->p, '\n', (size_t)(rd->end - rd->p));
        if (nl) on_event(ws, rl, n, nl + 1, (size_t)(rd->end - nl - 1));
        return;
    }
    }
}

/* ---- A: the stream's side ---------------------------------------------------------------------- */

static void remote_on(th_worker_state *ws, th_rstream *rs) {
    if (!rs->remote) ws->rtable.nremote++;
    rs->remote = 1;
}

static void remote_off(th_worker_state *ws, th_rstream *rs) {
    if (rs->remote) ws->rtable.nremote--;
    rs->remote = 0;
}

static void say(th_worker_state *ws, const th_rstream *rs, char kind, uint32_t n) {
    char msg[HEAD_MAX];
    int k = snprintf(msg, sizeof msg, "%c %" PRIu64 " %" PRIu32, kind, rs->r_ticket, n);
    (void)send_to(ws, rs->r_replica, rs->r_worker, msg, (size_t)k);
}

void th_relay_event(th_worker_state *ws, th_rstream *rs, const char *text, size_t n) {
    if (!rs->remote) return;
    const mcpg_host *h = ws->mod->host;
    mcpg_buf *b = &ws->relay_msg;
    b->len = 0;
    int rc = h->buf_printf(b, "E %" PRIu64 " %" PRIu32 "\n", rs->r_ticket, rs->r_sent);
    if (!rc) rc = h->buf_append(b, text, n);
    if (!rc) rc = send_to(ws, rs->r_replica, rs->r_worker, b->data, b->len);
    if (b->cap > 64 * 1024) h->buf_free(b); /* a large event's buffer is not kept */
    if (rc < 0) { /* too large for the store, or it is down: the client's stream ends there */
        h->log(ws->mod->self, MCPG_LOG_WARN,
               "stream %" PRIu32 " of a session: an event of %zu bytes cannot be relayed to replica %" PRIu32
               " (%d); that client's stream ends",
               rs->no, n, rs->r_replica, rc);
        say(ws, rs, 'X', 502);
        remote_off(ws, rs);
        return;
    }
    rs->r_sent++;
    rs->r_last_ms = now_ms(ws);
}

void th_relay_end(th_worker_state *ws, th_rstream *rs) {
    if (!rs->remote) return;
    say(ws, rs, 'F', rs->r_sent);
    remote_off(ws, rs);
}

/* "O <replica> <worker> <ticket> <no> <after> <sid>": show that stream there. */
static void stream_side_open(th_worker_state *ws, reader *rd) {
    th_rstream probe = {0};
    uint32_t no, after;
    if (!take_u32(rd, &probe.r_replica) || !take_u32(rd, &probe.r_worker) || !take_u64(rd, &probe.r_ticket) ||
        !take_u32(rd, &no) || !take_u32(rd, &after))
        return;
    th_rstream *rs = th_replay_find(ws, no);
    int refused = th_replay_showable(rs, rd->p, (size_t)(rd->end - rd->p), after);
    if (refused) {
        say(ws, &probe, 'X', (uint32_t)refused);
        return;
    }
    remote_on(ws, rs);
    rs->r_replica = probe.r_replica, rs->r_worker = probe.r_worker, rs->r_ticket = probe.r_ticket;
    rs->r_sent = 0;
    rs->r_last_ms = now_ms(ws);
    say(ws, rs, 'K', 0);
    for (const th_revent *ev = rs->head; ev && rs->remote; ev = ev->next)
        if (ev->seq > after) th_relay_event(ws, rs, ev->text, ev->len);
    if (rs->done) th_relay_end(ws, rs);
}

/* "D <replica> <worker> <ticket> <no>": that client went; the stream waits again. */
static void stream_side_detach(th_worker_state *ws, reader *rd) {
    uint32_t replica, worker, no;
    uint64_t ticket;
    if (!take_u32(rd, &replica) || !take_u32(rd, &worker) || !take_u64(rd, &ticket) || !take_u32(rd, &no)) return;
    th_rstream *rs = th_replay_find(ws, no);
    if (rs && rs->remote && rs->r_replica == replica && rs->r_worker == worker && rs->r_ticket == ticket)
        remote_off(ws, rs);
}

/* ---- the subject ---------------------------------------------------------------------------- */

static void on_message(void *arg, const char *subject, const char *data, size_t len) {
    th_worker_state *ws = arg;
    (void)subject;
    if (len < 3 || data[1] != ' ') return;
    reader rd = {data + 2, data + len};
    switch (data[0]) {
    case 'O': stream_side_open(ws, &rd); return;
    case 'D': stream_side_detach(ws, &rd); return;
    default: client_side(ws, data[0], &rd); return;
    }
}

int th_relay_worker_start(th_worker_state *ws) {
    const th_mod *m = ws->mod;
    char subject[48];
    subject_of(subject, m->replica, ws->index);
    return m->co_ops->subscribe(m->co, ws->w, subject, on_message, ws, &ws->relay_sub);
}

void th_relay_worker_stop(th_worker_state *ws) {
    while (ws->relays) {
        say_detach(ws, ws->relays);
        relay_finish(ws, ws->relays, 503);
    }
    if (ws->relay_sub) ws->mod->co_ops->unsubscribe(ws->mod->co, ws->relay_sub);
    ws->relay_sub = NULL;
    ws->mod->host->buf_free(&ws->relay_msg);
}

void th_relay_session_end(th_worker_state *ws, const char *sid) {
    for (th_relay *rl = ws->relays, *next; rl; rl = next) {
        next = rl->next;
        if (!strcmp(rl->r->sid, sid)) relay_finish(ws, rl, 0);
    }
}

void th_relay_sweep(th_worker_state *ws, uint64_t now) {
    for (th_relay *rl = ws->relays, *next; rl; rl = next) {
        next = rl->next;
        if (!rl->begun && now - rl->asked_ms >= TH_RELAY_ANSWER_MS) {
            relay_finish(ws, rl, 400); /* nobody answered: gone, or a stale id */
        } else if (rl->begun && now - rl->heard_ms >= TH_RELAY_SILENT_MS) {
            say_detach(ws, rl);
            relay_finish(ws, rl, 0); /* its replica died: the client tries again */
        }
    }
    if (!ws->rtable.nremote) return;
    for (th_rstream *rs = ws->rtable.oldest; rs; rs = rs->anext)
        if (rs->remote && now - rs->r_last_ms >= TH_RELAY_HEARTBEAT_MS) {
            say(ws, rs, 'H', rs->r_sent);
            rs->r_last_ms = now;
        }
}
