/* transport_http: per-worker state. Each slot belongs to one loop thread:
 * its read buffer, its request free list, the once-per-turn service pass
 * (a uv_prepare: it runs after the turn's callbacks and right before the
 * loop blocks, so coalescing never delays an answer past a poll), and the
 * timeout sweep.
 *
 * The slot's three handles are started on the first connection and closed
 * when the worker has been drained and its last connection is gone; until
 * their close callbacks have run, conn_count() stays above zero so the
 * kernel does not unload the module under them. */
#include "http/http.h"

#include <malloc.h> /* malloc_trim: the host allocates with the C library's malloc */
#include <string.h>
#include <time.h>

th_worker_state *th_slot(th_mod *m, mcpg_worker *w) {
    uint32_t i = m->host->worker_index(w);
    return i < m->nworkers ? m->slots[i] : NULL;
}

void th_mark_dirty(th_conn *c) {
    if (c->dirty || c->closing) return;
    c->dirty = 1;
    c->dirty_next = c->ws->dirty;
    c->ws->dirty = c;
}

static void on_kick(uv_idle_t *h) { uv_idle_stop(h); }

static void on_prepare(uv_prepare_t *h) {
    th_worker_state *ws = h->data;
    th_conn *c, *again = NULL;
    while ((c = ws->dirty)) {
        ws->dirty = c->dirty_next;
        c->dirty_next = NULL;
        /* still marked while serviced: what it changes is flushed below */
        th_conn_service(c);
        if (c->again && !c->closing) {
            /* It used its share of this turn with work left (a paused
             * parser, nothing else to wake it): it stays marked, so nothing
             * links it twice, and goes back on the list after this pass. It
             * cannot be freed meanwhile: it is not closing, and a close
             * callback never runs inside this one. */
            c->dirty_next = again;
            again = c;
        } else {
            c->dirty = 0;
        }
        c->again = 0;
    }
    if (again) {
        ws->dirty = again;
        uv_idle_start(&ws->kick, on_kick); /* the next poll must not block */
    }
    if (ws->alog.len) th_alog_flush(ws);
}

static void on_sweep(uv_timer_t *t) {
    th_worker_state *ws = t->data;
    uint64_t now = uv_now(ws->loop);
    th_conn_sweep(ws, now);
    if (now - ws->keepalive_ms >= 1000) {
        ws->keepalive_ms = now;
        ws->mod->wire->sweep(ws, now);
        th_worker_give_back_memory(ws);
    }
}

int th_worker_start(th_worker_state *ws) {
    const mcpg_host *host = ws->mod->host;
    if (ws->started) return 0;
    if (ws->draining) return MCPG_EUNAVAIL;
    ws->loop = host->worker_uv_loop(ws->w);
    if (!ws->loop) return MCPG_ESTATE;
    ws->rbuf = host->alloc(TH_READ_BUF);
    if (!ws->rbuf) return MCPG_ENOMEM;
    uv_prepare_init(ws->loop, &ws->prepare);
    uv_timer_init(ws->loop, &ws->sweep);
    uv_timer_init(ws->loop, &ws->prime);
    uv_idle_init(ws->loop, &ws->kick);
    ws->prepare.data = ws;
    ws->sweep.data = ws;
    ws->prime.data = ws;
    ws->kick.data = ws;
    /* The sweep's granularity is a quarter of the shortest timeout, so a
     * connection closes within 125% of it; bounded to keep tiny test
     * timeouts cheap. */
    uint64_t every = (uint64_t)ws->mod->cfg->idle_timeout_ms / 4;
    if ((uint64_t)ws->mod->cfg->header_timeout_ms / 4 < every)
        every = (uint64_t)ws->mod->cfg->header_timeout_ms / 4;
    if (ws->mod->tls_ctx && (uint64_t)ws->mod->cfg->tls_handshake_timeout_ms / 4 < every)
        every = (uint64_t)ws->mod->cfg->tls_handshake_timeout_ms / 4;
    if (every < 10) every = 10;
    if (every > 1000) every = 1000;
    uv_prepare_start(&ws->prepare, on_prepare);
    uv_timer_start(&ws->sweep, on_sweep, every, every);
    /* ours must not keep the kernel's loop alive on their own */
    uv_unref((uv_handle_t *)&ws->prepare);
    uv_unref((uv_handle_t *)&ws->sweep);
    uv_unref((uv_handle_t *)&ws->prime);
    uv_unref((uv_handle_t *)&ws->kick);
    ws->started = 1;
    ws->handles_open = 1;
    return 0;
}

static void on_handle_closed(uv_handle_t *h) {
    th_worker_state *ws = h->data;
    ws->handles_closing--;
}

void th_worker_maybe_stop(th_worker_state *ws) {
    if (!ws->draining || ws->nconns || !ws->handles_open) return;
    ws->handles_open = 0;
    if (ws->alog.len) th_alog_flush(ws);
    ws->handles_closing = 0;
    uv_handle_t *hs[4] = {(uv_handle_t *)&ws->prepare, (uv_handle_t *)&ws->sweep,
                          (uv_handle_t *)&ws->kick, (uv_handle_t *)&ws->prime};
    for (int i = 0; i < 4; i++) {
        if (uv_is_closing(hs[i])) continue; /* the kernel's shutdown walk got there first */
        ws->handles_closing++;
        uv_close(hs[i], on_handle_closed);
    }
}

/* ---- requests: a per-worker free list, so a warm worker never allocates ---- */

static void req_free(const mcpg_host *host, th_req *r) {
    host->buf_free(&r->data);
    host->buf_free(&r->resp);
    host->buf_free(&r->extra);
    host->buf_free(&r->server_text);
    host->free(r);
}

th_req *th_req_get(th_worker_state *ws) {
    th_req *r = ws->free_reqs;
    if (r) {
        ws->free_reqs = r->next;
        ws->nfree--;
    } else {
        r = ws->mod->host->calloc(1, sizeof *r);
        if (!r) return NULL;
    }
    th_req_reset(r);
    r->next = NULL;
    r->ws = ws;
    return r;
}

void th_req_put(th_worker_state *ws, th_req *r) {
    const mcpg_host *host = ws->mod->host;
    ws->mod->wire->request_freed(ws, r);
    th_tls_facts_unref(host, r->facts); /* its call is over */
    r->facts = NULL;
    /* a one-off large body must not stay cached */
    if (r->data.cap > TH_REQ_KEEP_CAP) host->buf_free(&r->data);
    if (r->resp.cap > TH_REQ_KEEP_CAP) host->buf_free(&r->resp);
    if (r->extra.cap > TH_REQ_KEEP_CAP) host->buf_free(&r->extra);
    if (r->server_text.cap > TH_REQ_KEEP_CAP) host->buf_free(&r->server_text);
    if (ws->nfree >= TH_REQ_CACHE) {
        req_free(host, r);
        return;
    }
    r->conn = NULL;
    r->next = ws->free_reqs;
    ws->free_reqs = r;
    ws->nfree++;
}


/* After a burst a loop holds memory it no longer needs: requests cached for
 * connections that have gone, and the heap pages their buffers and the
 * connections' own used. Once a second the cache is cut to what the open
 * connections can use; when that, or the connections closed since the
 * peak, freed a burst's worth, the free pages go back to the system
 * (malloc_trim walks the heap: well under a millisecond of this loop for a
 * small gateway's heap, and only after a fall, never in steady state). */
void th_worker_give_back_memory(th_worker_state *ws) {
    uint32_t keep = ws->nconns + TH_REQ_CACHE_FLOOR, freed = 0;
    while (ws->nfree > keep) {
        th_req *r = ws->free_reqs;
        ws->free_reqs = r->next;
        ws->nfree--;
        req_free(ws->mod->host, r);
        freed++;
    }
    if (freed < TH_GIVE_BACK_MIN && ws->nconns_peak - ws->nconns < TH_GIVE_BACK_MIN) return;
    ws->nconns_peak = ws->nconns;
    malloc_trim(0);
}

void th_worker_free(th_worker_state *ws) {
    const mcpg_host *host = ws->mod->host;
    /* destroy() runs once the kernel has ended the loops (abi: lifecycle),
     * so connections the drain deadline cut short can be freed as they are. */
    while (ws->conns) th_conn_free_abandoned(ws->conns); /* gives its requests back */
    ws->mod->wire->worker_freeing(ws);
    while (ws->free_reqs) {
        th_req *r = ws->free_reqs;
        ws->free_reqs = r->next;
        req_free(host, r);
    }
    host->buf_free(&ws->scratch);
    host->buf_free(&ws->scratch2);
    host->buf_free(&ws->sse_body);
    host->buf_free(&ws->msg_body);
    host->buf_free(&ws->alog);
    host->free(ws->rbuf);
    host->free(ws);
}

/* On ws's loop; g NULL: no metrics registry. */
void th_metric_add(th_worker_state *ws, mcpg_metric *g, int64_t delta) {
    if (g) ws->mod->host->metric_add(g, 0, delta);
}

/* ---- the Date header, formatted once per second ---------------------------- */

static const char k_days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char k_months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

static void put2(char *d, int v) {
    d[0] = (char)('0' + v / 10 % 10);
    d[1] = (char)('0' + v % 10);
}

const char *th_date(th_worker_state *ws) {
    time_t now = time(NULL);
    if ((int64_t)now == ws->date_sec && ws->date[0]) return ws->date;
    struct tm tm;
    gmtime_r(&now, &tm);
    /* "Sun, 06 Nov 1994 08:49:37 GMT", by hand: strftime follows the locale */
    char *d = ws->date;
    memcpy(d, k_days[tm.tm_wday % 7], 3);
    d[3] = ',';
    d[4] = ' ';
    put2(d + 5, tm.tm_mday);
    d[7] = ' ';
    memcpy(d + 8, k_months[tm.tm_mon % 12], 3);
    d[11] = ' ';
    int y = tm.tm_year + 1900;
    put2(d + 12, y / 100);
    put2(d + 14, y % 100);
    d[16] = ' ';
    put2(d + 17, tm.tm_hour);
    d[19] = ':';
    put2(d + 20, tm.tm_min);
    d[22] = ':';
    put2(d + 23, tm.tm_sec);
    memcpy(d + 25, " GMT", 5);
    ws->date_sec = (int64_t)now;
    return ws->date;
}
