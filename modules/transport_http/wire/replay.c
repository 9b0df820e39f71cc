/* transport_http: replay buffers of legacy POST streams (see replay.h). */
#include "wire/replay.h"

#include "wire/relay.h"
#include "wire/stream.h"

#include <stdio.h>
#include <string.h>

/* ---- the loop's table, by number ------------------------------------------------------- */

static uint32_t slot_of(const th_rtable *t, uint32_t no) { return (no * 2654435761u) & (t->nb - 1); }

th_rstream *th_replay_find(th_worker_state *ws, uint32_t no) {
    th_rtable *t = &ws->rtable;
    if (!t->nb) return NULL;
    for (th_rstream *rs = t->b[slot_of(t, no)]; rs; rs = rs->hnext)
        if (rs->no == no) return rs;
    return NULL;
}

static int grow(th_worker_state *ws) {
    th_rtable *t = &ws->rtable;
    th_rtable nt = *t;
    nt.nb = t->nb ? t->nb * 2 : 64;
    nt.b = ws->mod->host->calloc(nt.nb, sizeof *nt.b);
    if (!nt.b) return MCPG_ENOMEM;
    for (uint32_t i = 0; i < t->nb; i++)
        for (th_rstream *rs = t->b[i], *next; rs; rs = next) {
            next = rs->hnext;
            uint32_t k = slot_of(&nt, rs->no);
            rs->hnext = nt.b[k];
            nt.b[k] = rs;
        }
    ws->mod->host->free(t->b);
    *t = nt;
    return 0;
}

/* ---- events -------------------------------------------------------------------------------- */

static void drop_oldest_event(th_worker_state *ws, th_rstream *rs) {
    th_revent *ev = rs->head;
    if (!ev) return;
    rs->head = ev->next;
    if (!rs->head) rs->tail = NULL;
    rs->nev--;
    rs->bytes -= ev->len;
    ws->rtable.bytes -= ev->len;
    ws->mod->host->free(ev);
}

static void unlink_stream(th_worker_state *ws, th_rstream *rs) {
    th_rtable *t = &ws->rtable;
    th_rstream **pp = &t->b[slot_of(t, rs->no)];
    while (*pp && *pp != rs) pp = &(*pp)->hnext;
    if (*pp) *pp = rs->hnext, t->n--;
    if (rs->aprev) rs->aprev->anext = rs->anext;
    else t->oldest = rs->anext;
    if (rs->anext) rs->anext->aprev = rs->aprev;
    else t->newest = rs->aprev;
    if (rs->sess) {
        th_rstream **sp = &rs->sess->streams;
        while (*sp && *sp != rs) sp = &(*sp)->snext;
        if (*sp) *sp = rs->snext;
        if (rs->sess->news == rs) rs->sess->news = NULL;
    }
    if (rs->standalone) {
        if (rs->nprev) rs->nprev->nnext = rs->nnext;
        else t->news = rs->nnext;
        if (rs->nnext) rs->nnext->nprev = rs->nprev;
    }
    while (rs->head) drop_oldest_event(ws, rs);
    ws->mod->host->free(rs);
}

/* The client showing rs stops (its stream ended, or it went). */
static void detach_client(th_rstream *rs) {
    th_req *g = rs->client;
    if (!g) return;
    rs->client = NULL;
    if (g != rs->caller) {
        g->rs = NULL;
        if (g->conn) g->conn->nstreams--;
        th_metric_add(g->ws, g->ws->mod->m_streams, -1); /* its connection may be gone */
    }
}

/* End the stream of a GET client attached to rs (not the call's own). */
static void end_client(th_worker_state *ws, th_rstream *rs) {
    th_relay_end(ws, rs);
    th_req *g = rs->client;
    if (!g || g == rs->caller || !g->conn) {
        detach_client(rs);
        return;
    }
    th_conn *c = g->conn;
    detach_client(rs);
    th_sse_end(c, g, NULL, 0, NULL, 0);
    th_conn_advance(c);
}

/* Free rs now; a call still feeding it goes on without it (cancelled when
 * nobody can see it any more: no connection). */
static void free_stream(th_worker_state *ws, th_rstream *rs) {
    th_req *r = rs->caller;
    end_client(ws, rs);
    rs->live = NULL; /* its GET is a listener: it ends with the session (th_legacy_end_streams) */
    if (r) {
        r->rs = NULL;
        r->stream_no = rs->no; /* an answer still being written keeps its ids going */
        r->ev_seq = rs->seq;
        rs->caller = NULL;
        if (!r->conn && r->call) ws->mod->host->call_cancel(r->call);
    }
    unlink_stream(ws, rs);
}

/* Keep the loop under its byte bound: finished streams first, oldest first. */
static void fit_loop(th_worker_state *ws, th_rstream *writing) {
    th_rtable *t = &ws->rtable;
    for (th_rstream *rs = t->oldest, *next; rs && t->bytes > TH_REPLAY_LOOP_BYTES; rs = next) {
        next = rs->anext;
        if (rs->done && rs != writing) free_stream(ws, rs);
    }
    while (t->bytes > TH_REPLAY_LOOP_BYTES && writing->nev > 1) drop_oldest_event(ws, writing);
}

static int keep(th_worker_state *ws, th_rstream *rs, uint32_t seq, const char *text, size_t n) {
    th_revent *ev = ws->mod->host->alloc(sizeof *ev + n);
    if (!ev) return MCPG_ENOMEM;
    ev->next = NULL;
    ev->seq = seq;
    ev->len = (uint32_t)n;
    memcpy(ev->text, text, n);
    if (rs->tail) rs->tail->next = ev;
    else rs->head = ev;
    rs->tail = ev;
    rs->nev++;
    rs->bytes += n;
    ws->rtable.bytes += n;
    while (rs->nev > 1 && (rs->nev > TH_REPLAY_EVENTS || rs->bytes > TH_REPLAY_STREAM_BYTES))
        drop_oldest_event(ws, rs);
    if (ws->rtable.bytes > TH_REPLAY_LOOP_BYTES) fit_loop(ws, rs);
    return 0;
}

/* ---- streams ----------------------------------------------------------------------------- */

/* A new stream of e, numbered and on the loop's lists; no request yet. */
static th_rstream *register_stream(th_worker_state *ws, th_cached_session *e) {
    th_rtable *t = &ws->rtable;
    if (!e || (t->n >= t->nb && grow(ws))) return NULL;
    th_rstream *rs = ws->mod->host->calloc(1, sizeof *rs);
    if (!rs) return NULL;
    do rs->no = ++ws->streams_made; while (!rs->no || th_replay_find(ws, rs->no));
    uint32_t k = slot_of(t, rs->no);
    rs->hnext = t->b[k];
    t->b[k] = rs;
    t->n++;
    rs->aprev = t->newest;
    if (t->newest) t->newest->anext = rs;
    else t->oldest = rs;
    t->newest = rs;
    rs->sess = e;
    rs->snext = e->streams;
    e->streams = rs;
    return rs;
}

th_rstream *th_replay_open(th_worker_state *ws, th_req *r, th_cached_session *e) {
    th_rstream *rs = register_stream(ws, e);
    if (!rs) return NULL;
    rs->caller = r;
    rs->client = r;
    r->rs = rs;
    return rs;
}

th_rstream *th_replay_open_news(th_worker_state *ws, th_req *r, th_cached_session *e) {
    if (e && e->news) free_stream(ws, e->news);
    th_rstream *rs = register_stream(ws, e);
    if (!rs) return NULL;
    th_rtable *t = &ws->rtable;
    rs->standalone = 1;
    rs->live = r;
    rs->nnext = t->news;
    if (t->news) t->news->nprev = rs;
    t->news = rs;
    e->news = rs;
    return rs;
}

void th_replay_news_closed(th_worker_state *ws, th_req *r) {
    th_cached_session *e = th_sess_peek(ws, r->sid, strlen(r->sid));
    if (e && e->news && e->news->live == r) e->news->live = NULL;
}

int th_replay_event(th_worker_state *ws, th_rstream *rs, const char *json, size_t n) {
    const mcpg_host *h = ws->mod->host;
    char id[TH_EVENT_ID_MAX];
    uint32_t seq = rs->seq++;
    size_t idn = th_event_id(id, ws, rs->no, seq);
    mcpg_buf *b = &ws->sse_body;
    b->len = 0;
    if (th_sse_format(h, b, id, idn, json, n) || keep(ws, rs, seq, b->data, b->len)) return MCPG_ENOMEM;
    th_req *g = rs->client;
    if (g && g->conn && !g->conn->closing && th_sse_raw(g->conn, g, b->data, b->len) == MCPG_EAGAIN)
        detach_client(rs); /* it stopped reading: its connection closes; it may resume */
    g = rs->live; /* a standalone stream's own GET (over its bound: it closes, and goes) */
    if (g && g->conn && !g->conn->closing) (void)th_sse_raw(g->conn, g, b->data, b->len);
    th_relay_event(ws, rs, b->data, b->len);
    return 0;
}

/* A finished stream of a session beyond the per-session bound goes. */
static void fit_session(th_worker_state *ws, th_cached_session *e) {
    uint32_t done = 0;
    th_rstream *last_done = NULL; /* the list is newest first: the last one seen is the oldest */
    for (th_rstream *rs = e->streams; rs; rs = rs->snext)
        if (rs->done) done++, last_done = rs;
    if (done > TH_REPLAY_DONE_PER_SESSION) free_stream(ws, last_done);
}

void th_replay_finish(th_worker_state *ws, th_rstream *rs, const char *json, size_t n) {
    (void)th_replay_event(ws, rs, json, n);
    rs->done = 1;
    th_req *r = rs->caller;
    if (r) r->rs = NULL;
    if (rs->client == r && r && r->conn) { /* the call's own stream: its answer ends */
        th_conn *c = r->conn;
        rs->client = NULL;
        th_sse_end(c, r, NULL, 0, NULL, 0);
    } else {
        end_client(ws, rs);
    }
    rs->caller = NULL;
    fit_session(ws, rs->sess);
}

int th_replay_showable(const th_rstream *rs, const char *sid, size_t sn, uint32_t after) {
    if (!rs || !rs->sess || sn != strlen(rs->sess->sid) || memcmp(rs->sess->sid, sid, sn) || after >= rs->seq)
        return 400;
    return rs->client || rs->remote || rs->live ? 409 : 0;
}

void th_replay_attach(th_worker_state *ws, th_rstream *rs, th_req *r, uint32_t after) {
    th_conn *c = r->conn;
    (void)ws;
    r->rs = rs;
    rs->client = r;
    r->state = TH_REQ_INFLIGHT;
    c->nstreams++; /* a stream, not an idle connection */
    if (r != rs->caller) th_metric_add(r->ws, r->ws->mod->m_streams, 1);
    if (th_sse_begin(c, r)) {
        c->close_after = 1;
        detach_client(rs);
        th_sse_end(c, r, NULL, 0, NULL, 0);
        return;
    }
    for (th_revent *ev = rs->head; ev && rs->client == r; ev = ev->next)
        if (ev->seq > after && th_sse_raw(c, r, ev->text, ev->len) == MCPG_EAGAIN) detach_client(rs);
    if (rs->done && rs->client == r) {
        detach_client(rs);
        th_sse_end(c, r, NULL, 0, NULL, 0);
    }
}

/* ---- connections that close, calls without one ------------------------------------------------ */

static void orphan_add(th_worker_state *ws, th_req *r) {
    r->oprev = NULL;
    r->onext = ws->orphans;
    if (ws->orphans) ws->orphans->oprev = r;
    ws->orphans = r;
}

void th_replay_orphan_remove(th_worker_state *ws, th_req *r) {
    if (r->oprev) r->oprev->onext = r->onext;
    else if (ws->orphans == r) ws->orphans = r->onext;
    if (r->onext) r->onext->oprev = r->oprev;
    r->oprev = r->onext = NULL;
}

void th_replay_conn_closing(th_conn *c) {
    th_worker_state *ws = c->ws;
    th_req *keep_head = NULL, *keep_tail = NULL;
    for (th_req *r = c->qhead, *next; r; r = next) {
        next = r->next;
        th_rstream *rs = r->rs;
        if (rs && rs->caller == r && r->call && r->state == TH_REQ_INFLIGHT) {
            /* the call goes on; the client may come back for it */
            if (rs->client == r) rs->client = NULL;
            r->conn = NULL;
            r->next = NULL;
            c->inflight--;
            c->qlen--;
            orphan_add(ws, r);
            continue;
        }
        if (rs && rs->client == r) detach_client(rs);
        r->next = NULL;
        if (keep_tail) keep_tail->next = r;
        else keep_head = r;
        keep_tail = r;
    }
    c->qhead = keep_head;
    c->qtail = keep_tail;
}

void th_replay_session_end(th_worker_state *ws, th_cached_session *e) {
    while (e->streams) free_stream(ws, e->streams);
}

int th_replay_session_live(const th_cached_session *e) {
    for (const th_rstream *rs = e->streams; rs; rs = rs->snext)
        if (rs->caller || rs->client || rs->remote) return 1;
    return 0;
}

void th_replay_free_all(th_worker_state *ws) {
    th_rtable *t = &ws->rtable;
    while (t->oldest) {
        th_rstream *rs = t->oldest;
        if (rs->caller) rs->caller->rs = NULL;
        if (rs->client) rs->client->rs = NULL;
        rs->sess = NULL;
        rs->remote = 0; /* memory only: no message goes at destroy */
        unlink_stream(ws, rs);
    }
    ws->mod->host->free(t->b);
    memset(t, 0, sizeof *t);
}
