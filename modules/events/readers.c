/* events: events/list, events/poll and events/stream, answered from the
 * replica's cache of the log (reader.c).
 *
 * A stream lives on the loop of its call, in that loop's list. When the
 * cache grows, loop 0 tells every loop (one post each, never more than one
 * outstanding); each loop takes the new rows once and hands each stream
 * those of its type after its cursor, as notifications/events/event. A
 * quiet stream gets notifications/events/heartbeat every heartbeat_ms,
 * with the cursor it has been checked up to. A stream ends when its client
 * leaves (cancel) or its loop stops. */
#include "events.h"

#include <stdio.h>
#include <string.h>

#define TAKE_MAX 512       /* rows one pass over a loop's streams takes */
#define POLL_MAX_EVENTS 1000

struct ev_stream {
    ev_stream *next, *prev;
    ev_loop *l;
    mcpg_call *call;
    void **slot;
    uint32_t type;
    uint64_t cursor;       /* the last log row it was checked against */
    uint64_t last_sent_ms;
    bool lagging;          /* its client has that much unread: sent again from its cursor */
    char id[72];           /* the request's id, JSON text: the subscriptionId */
};

static uint64_t now_ms(const events *ev) { return ev->host->mono_us() / 1000; }

static mcpg_status fail(events *ev, mcpg_call *call, int64_t code, const char *msg,
                        const char *data) {
    ev->host->call_error(call, code, msg, data);
    return MCPG_DENY;
}

static mcpg_status unknown_type(events *ev, mcpg_call *call) {
    return fail(ev, call, MCPG_RPC_NOT_FOUND, "Not found: no such event type", "{\"kind\":\"event\"}");
}

/* The call's event type (its params.name, the kernel's target). */
static int call_type(events *ev, mcpg_call *call) {
    const char *t = ev->host->call_target(call);
    return t && *t ? ev_type_index(ev, t, strlen(t)) : -1;
}

/* params.cursor: 1 with *out for a cursor, 0 for null or none ("from
 * now"), -1 for something that is not a cursor of this gateway. */
static int call_cursor(events *ev, mcpg_call *call, uint64_t *out) {
    const mcpg_host *h = ev->host;
    size_t n = 0;
    const char *p = h->call_params(call, &n);
    mcpg_json_span c;
    if (!p || h->json_object_get(p, n, "cursor", &c) != 1 || c.type == MCPG_JSON_NULL) return 0;
    if (c.type != MCPG_JSON_STRING || c.escaped || ev_parse_u64(c.p, c.n, out)) return -1;
    return 1;
}

/* "Now": the newest head this replica has heard of (rows up to it may
 * still be on their way into the cache; a reader positioned here is owed
 * only what comes after). */
static uint64_t head_now(events *ev) { return atomic_load(&ev->head_seen); }

/* 1 when the replica's reader knows the log's head; else the call is
 * refused with 503 + Retry-After (the replica has just started, or cannot
 * reach its store). */
static int reader_ready(events *ev, mcpg_call *call) {
    if (atomic_load(&ev->reader_ready)) return 1;
    ev->host->call_error(call, MCPG_RPC_SERVER_ERROR, "Service unavailable: this gateway has not "
                         "yet read where the event log is; retry", NULL);
    ev->host->call_set_http(call, 503, 1);
    return 0;
}

/* ---- events/list, events/poll ----------------------------------------------------- */

static mcpg_status answer_list(events *ev, mcpg_call *call) {
    const mcpg_host *h = ev->host;
    if (h->call_result(call, ev->list_json, strlen(ev->list_json)))
        return fail(ev, call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    return MCPG_CONTINUE;
}

/* What a poll and a stream start with: the type (params.name), the cursor
 * (*has 0 for "from now") and a replica that knows the head. 0, or -1 with
 * the call's error set. */
static int reader_args(events *ev, mcpg_call *call, int *type, uint64_t *cursor, int *has) {
    *type = call_type(ev, call);
    if (*type < 0) return unknown_type(ev, call), -1;
    *has = call_cursor(ev, call, cursor);
    if (*has < 0)
        return fail(ev, call, MCPG_RPC_INVALID_PARAMS, "Invalid params: cursor is not one this "
                    "gateway gave", NULL), -1;
    return reader_ready(ev, call) ? 0 : -1;
}

static mcpg_status answer_poll(events *ev, mcpg_call *call) {
    const mcpg_host *h = ev->host;
    int type, has;
    uint64_t cursor = 0;
    if (reader_args(ev, call, &type, &cursor, &has)) return MCPG_DENY;
    int64_t max = 100;
    size_t pn = 0;
    const char *p = h->call_params(call, &pn);
    mcpg_json_span me;
    if (p && h->json_object_get(p, pn, "maxEvents", &me) == 1 &&
        (h->json_int64(&me, &max) != 0 || max < 1))
        return fail(ev, call, MCPG_RPC_INVALID_PARAMS, "Invalid params: maxEvents must be a positive integer", NULL);
    if (max > POLL_MAX_EVENTS) max = POLL_MAX_EVENTS;
    mcpg_buf *b = h->call_result_buf(call);
    int rc = h->buf_append(b, "{\"events\":[", 11);
    bool truncated = false, more = false;
    uint64_t at = has ? cursor : head_now(ev);
    size_t found = 0;
    while (has && !rc && found < (size_t)max) {
        ev_row *rows[TAKE_MAX];
        uint64_t first = 0, next = 0;
        size_t k = ev_cache_take(ev, at, rows, TAKE_MAX, &first, &next);
        if (at + 1 < first) truncated = true;
        size_t i = 0;
        for (; i < k && found < (size_t)max; i++) {
            if (rows[i]->type == (uint32_t)type) {
                rc |= (found++ ? h->buf_append(b, ",", 1) : 0) ||
                      h->buf_append(b, rows[i]->json, rows[i]->len) || h->buf_append(b, "}", 1);
            }
            at = rows[i]->seq;
        }
        more = i < k;
        for (size_t j = 0; j < k; j++) ev_row_unref(h, rows[j]);
        if (k < TAKE_MAX) {
            if (!more && next > at + 1) at = next - 1; /* checked up to the end */
            break;
        }
    }
    rc |= h->buf_printf(b, "],\"cursor\":\"%llu\",\"hasMore\":%s,\"truncated\":%s,\"nextPollMs\":%lld}",
                        (unsigned long long)at, more ? "true" : "false", truncated ? "true" : "false",
                        (long long)ev->cfg->poll_interval_ms);
    return rc ? fail(ev, call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL) : MCPG_CONTINUE;
}

/* ---- streams ------------------------------------------------------------------------ */

static int notify(ev_stream *s, const char *method, const char *head, size_t hn) {
    events *ev = s->l->ev;
    const mcpg_host *h = ev->host;
    mcpg_buf *b = &s->l->scratch;
    b->len = 0;
    int rc = h->buf_append(b, head, hn) ||
             h->buf_printf(b, "%s\"_meta\":{\"" EV_SUB_ID "\":%s}}", hn > 1 ? "," : "", s->id);
    if (!rc) rc = h->call_notify(s->call, method, b->data, b->len);
    if (rc == 0) s->last_sent_ms = now_ms(ev);
    return rc;
}

static void set_lagging(ev_stream *s, bool lagging) {
    if (s->lagging == lagging) return;
    s->lagging = lagging;
    if (lagging) s->l->n_lagging++;
    else s->l->n_lagging--;
}

static void send_active(ev_stream *s, bool truncated) {
    char head[96];
    int n = snprintf(head, sizeof head, "{\"cursor\":\"%llu\",\"truncated\":%s",
                     (unsigned long long)s->cursor, truncated ? "true" : "false");
    (void)notify(s, "notifications/events/active", head, (size_t)n);
}

static void send_heartbeat(ev_stream *s) {
    char head[64];
    int n = snprintf(head, sizeof head, "{\"cursor\":\"%llu\"", (unsigned long long)s->cursor);
    (void)notify(s, "notifications/events/heartbeat", head, (size_t)n);
}

/* 0 when sent; else the stream keeps its cursor before r. */
static int send_event(ev_stream *s, const ev_row *r) {
    int rc = notify(s, "notifications/events/event", r->json, r->len);
    if (rc == 0 && s->l->ev->m_delivered) s->l->ev->host->metric_add(s->l->ev->m_delivered, 0, 1);
    return rc;
}

static void unlink_stream(ev_stream *s) {
    ev_loop *l = s->l;
    set_lagging(s, false);
    if (s->prev) s->prev->next = s->next;
    else l->streams = s->next;
    if (s->next) s->next->prev = s->prev;
    l->n_streams--;
    atomic_fetch_sub(&l->ev->open_streams, 1);
}

/* The stream's call is answered ({"_meta":{}}) and the stream freed. */
static void end_stream(ev_stream *s) {
    events *ev = s->l->ev;
    const mcpg_host *h = ev->host;
    unlink_stream(s);
    if (s->slot) *s->slot = NULL;
    mcpg_call *call = s->call;
    h->free(s);
    (void)h->call_result(call, "{\"_meta\":{}}", 11);
    h->call_resume(call, MCPG_CONTINUE);
}

/* Hand each stream of the loop the rows after its cursor. */
static void advance_loop(ev_loop *l) {
    events *ev = l->ev;
    if (!l->streams) return;
    uint64_t from = UINT64_MAX;
    for (ev_stream *s = l->streams; s; s = s->next)
        if (s->cursor < from) from = s->cursor;
    for (;;) {
        ev_row *rows[TAKE_MAX];
        uint64_t first = 0, next = 0;
        size_t k = ev_cache_take(ev, from, rows, TAKE_MAX, &first, &next);
        for (ev_stream *s = l->streams; s; s = s->next) {
            if (s->cursor + 1 < first) { /* behind what the replica keeps: told, and moved on */
                s->cursor = first - 1;
                send_active(s, true);
            }
            bool behind = false;
            for (size_t i = 0; i < k && !behind; i++) {
                if (rows[i]->seq <= s->cursor) continue;
                if (rows[i]->type == s->type && send_event(s, rows[i]) != 0) behind = true;
                else s->cursor = rows[i]->seq;
            }
            set_lagging(s, behind); /* the heartbeat tick sends it the rest */
            if (!behind && k < TAKE_MAX && next && next - 1 > s->cursor) s->cursor = next - 1;
        }
        for (size_t i = 0; i < k; i++) ev_row_unref(ev->host, rows[i]);
        if (k < TAKE_MAX) return;
        from = rows[k - 1]->seq;
    }
}

static void on_advance(void *arg) {
    ev_loop *l = arg;
    atomic_store(&l->advance_posted, false);
    if (!l->stopped) advance_loop(l);
}

void ev_readers_advance_all(events *ev) {
    const mcpg_host *h = ev->host;
    for (uint32_t i = 0; i < ev->n_loops; i++) {
        ev_loop *l = &ev->loops[i];
        if (!l->w || l->stopped) continue;
        if (h->worker_current() == l->w) {
            advance_loop(l);
            continue;
        }
        if (atomic_exchange(&l->advance_posted, true)) continue; /* one is on its way */
        l->advance.fn = on_advance;
        l->advance.arg = l;
        if (h->worker_post(l->w, &l->advance) != 0) atomic_store(&l->advance_posted, false);
    }
}

static mcpg_status open_stream(events *ev, mcpg_call *call) {
    const mcpg_host *h = ev->host;
    int type, has;
    uint64_t cursor = 0;
    if (reader_args(ev, call, &type, &cursor, &has)) return MCPG_DENY;
    if (atomic_load(&ev->open_streams) >= (unsigned)ev->cfg->max_streams)
        return fail(ev, call, MCPG_RPC_RESOURCE_EXHAUSTED, "Resource exhausted: too many event streams "
                    "on this gateway", "{\"limit\":\"streams\"}");
    size_t idn = 0;
    const char *id = h->call_id(call, &idn);
    ev_stream *s = h->calloc(1, sizeof *s);
    if (!s || !id || idn >= sizeof s->id) {
        h->free(s);
        return fail(ev, call, MCPG_RPC_INVALID_REQUEST, "Invalid request: an events/stream needs an "
                    "id of at most 71 bytes", NULL);
    }
    memcpy(s->id, id, idn);
    ev_loop *l = &ev->loops[h->worker_index(h->call_worker(call))];
    s->l = l;
    s->call = call;
    s->type = (uint32_t)type;
    uint64_t last = head_now(ev);
    bool truncated = false;
    if (has) {
        uint64_t first = 0;
        pthread_mutex_lock(&ev->cache.lock);
        first = ev->cache.first;
        pthread_mutex_unlock(&ev->cache.lock);
        truncated = cursor + 1 < first;
        s->cursor = truncated ? first - 1 : cursor > last ? last : cursor;
    } else {
        s->cursor = last;
    }
    s->slot = h->call_slot(call, ev->self);
    if (s->slot) *s->slot = s;
    s->next = l->streams;
    if (l->streams) l->streams->prev = s;
    l->streams = s;
    l->n_streams++;
    atomic_fetch_add(&ev->open_streams, 1);
    send_active(s, truncated);
    if (s->cursor < last) advance_loop(l); /* what it missed, from the cache */
    return MCPG_PENDING;
}

void ev_cancel(events *ev, mcpg_call *call) {
    if (ev->host->call_method(call) != MCPG_METHOD_EVENTS_STREAM) return; /* posts finish */
    void **slot = ev->host->call_slot(call, ev->self);
    if (slot && *slot) end_stream(*slot);
}

static void on_heartbeat(void *arg) {
    ev_loop *l = arg;
    events *ev = l->ev;
    if (l->n_lagging) advance_loop(l);
    uint64_t now = now_ms(ev), every = (uint64_t)ev->cfg->heartbeat_ms;
    for (ev_stream *s = l->streams; s; s = s->next)
        if (!s->lagging && now - s->last_sent_ms >= every) send_heartbeat(s);
}

void ev_readers_loop_start(ev_loop *l) {
    events *ev = l->ev;
    uint64_t every = (uint64_t)ev->cfg->heartbeat_ms / 4;
    if (every > 250) every = 250; /* also how soon a lagging stream is tried again */
    if (ev->host->timer_start(ev->self, l->w, every, every, on_heartbeat, l, &l->heartbeat) < 0)
        l->heartbeat = NULL;
}

void ev_readers_loop_stop(ev_loop *l) {
    if (l->heartbeat) l->ev->host->timer_stop(l->heartbeat);
    l->heartbeat = NULL;
    while (l->streams) end_stream(l->streams);
    l->ev->host->buf_free(&l->scratch);
}

mcpg_status ev_request(events *ev, mcpg_call *call) {
    switch (ev->host->call_method(call)) {
    case MCPG_METHOD_EVENTS_LIST: return answer_list(ev, call);
    case MCPG_METHOD_EVENTS_POLL: return answer_poll(ev, call);
    case MCPG_METHOD_EVENTS_STREAM: return open_stream(ev, call);
    case MCPG_METHOD_EVENTS_SUBSCRIBE:
    case MCPG_METHOD_EVENTS_UNSUBSCRIBE: return ev_subscribe_request(ev, call); /* subscribe.c */
    default: return fail(ev, call, MCPG_RPC_METHOD_NOT_FOUND, "Method not found", NULL);
    }
}
