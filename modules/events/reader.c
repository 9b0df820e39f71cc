/* events: each replica's one reader of the log, on loop 0.
 *
 * It learns where the head is from the owner's word on mcpg.ev.head (and,
 * should a word be lost, from reading mcpg.ev.head every second), reads
 * each new log row once, up to READ_WINDOW at a time, and appends them in
 * log order to the cache that every stream and poll of the replica reads.
 * At start it reads the last rows before the head it finds (up to
 * BACKFILL_MAX, and no more than cache_rows), so a client whose replica
 * died resumes here from its cursor; an older cursor is told `truncated`.
 * Until it knows the head, its replica's readers are told to retry (503):
 * "from now" means nothing before that. */
#include "events.h"

#include <stdio.h>
#include <string.h>

#define READ_WINDOW 1024   /* rows between the next to append and the last asked or heard */
#define GETS_MAX 64        /* rows asked of the store at once */
#define TICK_MS 100        /* until the head is first known, it is asked this often */
#define HEAD_POLL_TICKS 10 /* then every 10th tick */
#define BACKFILL_MAX 1024  /* rows before the head read at start, for cursors of other replicas */

typedef struct rslot {
    struct ev_reader *rd;
    uint64_t seq;
    int state;     /* SLOT_* */
    ev_row *row;   /* when read; NULL for a hole (a copy, a slot given up) or a gap */
    bool gap;      /* the store no longer had it (past the retention) */
} rslot;

enum { SLOT_FREE, SLOT_ASKED, SLOT_READ, SLOT_FAILED };

typedef struct ev_reader {
    events *ev;
    ev_loop *l;
    mcpg_coord_sub *sub;
    mcpg_timer *tick;
    bool started, stopped, asking_head;
    unsigned ticks;
    size_t gets;     /* rows asked of the store, not yet answered */
    uint64_t target; /* the last log row the owner said is there */
    uint64_t next;   /* the next row to append to the cache */
    uint64_t asked;  /* the last row asked for */
    rslot win[READ_WINDOW]; /* row s in win[s % READ_WINDOW] */
    uint64_t gaps;   /* rows the store no longer had */
} ev_reader;

void ev_row_unref(const mcpg_host *h, ev_row *r) {
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) h->free(r);
}

/* ---- the cache -------------------------------------------------------------- */

static void cache_append(events *ev, uint64_t seq, ev_row *r) {
    ev_cache *c = &ev->cache;
    ev_row *evicted = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->next - c->first == c->cap) {
        evicted = c->ring[c->first % c->cap];
        c->ring[c->first % c->cap] = NULL;
        c->first++;
    }
    c->ring[seq % c->cap] = r;
    c->next = seq + 1;
    pthread_mutex_unlock(&c->lock);
    ev_row_unref(ev->host, evicted);
}

size_t ev_cache_take(events *ev, uint64_t after, ev_row **out, size_t max, uint64_t *first_out,
                     uint64_t *next_out) {
    ev_cache *c = &ev->cache;
    size_t k = 0;
    pthread_mutex_lock(&c->lock);
    uint64_t s = after + 1 > c->first ? after + 1 : c->first;
    for (; s < c->next && k < max; s++) {
        ev_row *r = c->ring[s % c->cap];
        if (!r) continue;
        atomic_fetch_add(&r->refs, 1);
        out[k++] = r;
    }
    if (first_out) *first_out = c->first;
    if (next_out) *next_out = k == max ? s : c->next;
    pthread_mutex_unlock(&c->lock);
    return k;
}

/* The log row's occurrence as the cache keeps it: without its closing brace,
 * with the cursor after it. NULL when it is not an occurrence of a type
 * this gateway has (a row another configuration wrote). */
static ev_row *row_new(events *ev, uint64_t seq, const char *occ, size_t n) {
    const mcpg_host *h = ev->host;
    mcpg_json_span name;
    if (n < 2 || occ[n - 1] != '}' || h->json_object_get(occ, n, "name", &name) != 1 ||
        name.type != MCPG_JSON_STRING)
        return NULL;
    int type = ev_type_index(ev, name.p, name.n);
    if (type < 0) return NULL;
    char tail[40];
    int tn = snprintf(tail, sizeof tail, ",\"cursor\":\"%llu\"", (unsigned long long)seq);
    ev_row *r = h->alloc(sizeof *r + n - 1 + (size_t)tn + 1);
    if (!r) return NULL;
    atomic_init(&r->refs, 1);
    r->type = (uint32_t)type;
    r->seq = seq;
    memcpy(r->json, occ, n - 1);
    memcpy(r->json + n - 1, tail, (size_t)tn + 1);
    r->len = n - 1 + (size_t)tn;
    return r;
}

/* ---- reading ------------------------------------------------------------------ */

/* One row asked of the store: its slot may have been filled from the
 * owner's word (and even reused) by the time the answer comes. */
typedef struct rget {
    struct ev_reader *rd;
    uint64_t seq;
} rget;

static void pump(ev_reader *rd);

/* Rows read in order go to the cache; the loops are told once. */
static void drain(ev_reader *rd) {
    events *ev = rd->ev;
    bool grew = false;
    for (;;) {
        rslot *s = &rd->win[rd->next % READ_WINDOW];
        if (s->state != SLOT_READ || s->seq != rd->next) break;
        cache_append(ev, s->seq, s->row); /* a hole too: the cache's slots stay in step */
        if (s->gap) rd->gaps++;
        s->row = NULL;
        s->gap = false;
        s->state = SLOT_FREE;
        rd->next++;
        grew = true;
    }
    if (grew) {
        ev_readers_advance_all(ev);
        ev_subs_advance(ev);
    }
}

static void on_row(void *arg, int status, const mcpg_coord_value *v) {
    rget *g = arg;
    ev_reader *rd = g->rd;
    uint64_t seq = g->seq;
    rd->ev->host->free(g);
    rd->gets--;
    if (rd->stopped) return;
    rslot *s = &rd->win[seq % READ_WINDOW];
    if (s->seq != seq || s->state != SLOT_ASKED) return pump(rd); /* heard meanwhile */
    if (status == 0) { /* "<id key>\n<occurrence>", or "": a hole */
        const char *nl = v->len ? memchr(v->data, '\n', v->len) : NULL;
        s->row = nl ? row_new(rd->ev, s->seq, nl + 1, v->len - (size_t)(nl + 1 - v->data)) : NULL;
        if (v->len && !s->row)
            rd->ev->host->log(rd->ev->self, MCPG_LOG_WARN, "log row %llu is not an event of a type "
                              "this gateway has: skipped", (unsigned long long)s->seq);
        s->state = SLOT_READ;
    } else if (status == MCPG_ENOENT) {
        s->row = NULL; /* past the retention: a gap its readers are told of */
        s->gap = true;
        s->state = SLOT_READ;
    } else {
        s->state = SLOT_FAILED; /* asked again on the next tick */
        return;
    }
    drain(rd);
    pump(rd);
}

static void ask(ev_reader *rd, rslot *s) {
    events *ev = rd->ev;
    char key[48];
    size_t kn = ev_key_u64(key, sizeof key, EV_KEY_IN, s->seq);
    rget *g = ev->host->alloc(sizeof *g);
    s->state = SLOT_FAILED; /* unless asked below: tried again on the next tick */
    if (!g) return;
    g->rd = rd;
    g->seq = s->seq;
    s->state = SLOT_ASKED;
    rd->gets++;
    if (ev->co->get(ev->co_inst, rd->l->w, key, kn, on_row, g) < 0) {
        ev->host->free(g);
        rd->gets--;
        s->state = SLOT_FAILED;
    }
}

static void pump(ev_reader *rd) {
    while (!rd->stopped && rd->asked < rd->target && rd->asked + 1 < rd->next + READ_WINDOW &&
           rd->gets < GETS_MAX) {
        rslot *s = &rd->win[(rd->asked + 1) % READ_WINDOW];
        if (s->state == SLOT_READ && s->seq == rd->asked + 1) { /* heard from the owner */
            rd->asked++;
            continue;
        }
        if (s->state != SLOT_FREE) break;
        s->rd = rd;
        s->seq = ++rd->asked;
        ask(rd, s);
    }
}

/* A row the owner's word carried: its slot is filled without asking the
 * store (one that is being asked keeps its answer out: see on_row). */
static void heard_row(ev_reader *rd, uint64_t seq, const char *occ, size_t n) {
    if (seq < rd->next || seq >= rd->next + READ_WINDOW) return; /* had, or asked later */
    rslot *s = &rd->win[seq % READ_WINDOW];
    if (s->state == SLOT_READ && s->seq == seq) return;
    if (s->state != SLOT_FREE && s->seq != seq) return;
    s->rd = rd;
    s->seq = seq;
    s->row = n ? row_new(rd->ev, seq, occ, n) : NULL; /* length 0: a hole */
    s->gap = false;
    s->state = SLOT_READ;
    if (seq == rd->asked + 1) rd->asked = seq;
}

/* The rows after the word's first line: "<first>" then "\n<len> <bytes>" each. */
static void heard_rows(ev_reader *rd, const char *p, size_t n) {
    const char *nl = memchr(p, '\n', n);
    uint64_t seq;
    if (!nl || ev_parse_u64(p, (size_t)(nl - p), &seq)) return;
    size_t i = (size_t)(nl + 1 - p);
    while (i < n) {
        const char *sp = memchr(p + i, ' ', n - i);
        uint64_t len;
        if (!sp || ev_parse_u64(p + i, (size_t)(sp - (p + i)), &len)) return;
        i = (size_t)(sp + 1 - p);
        if (len > n - i) return;
        heard_row(rd, seq++, p + i, (size_t)len);
        i += (size_t)len + 1; /* and its "\n" */
    }
}

static void retry_failed(ev_reader *rd) {
    for (uint64_t q = rd->next; q <= rd->asked; q++) {
        rslot *s = &rd->win[q % READ_WINDOW];
        if (s->state == SLOT_FAILED && s->seq == q) ask(rd, s);
    }
}

/* ---- where the head is ---------------------------------------------------------- */

/* "<last log row> <last inbox slot moved>" */
static void heard_head(ev_reader *rd, const char *p, size_t n) {
    uint64_t log = 0, slot = 0;
    if (ev_parse_head(p, n, &log, &slot)) return;
    events *ev = rd->ev;
    uint64_t done = atomic_load(&ev->inbox_done);
    while (slot > done && !atomic_compare_exchange_weak(&ev->inbox_done, &done, slot)) {
    }
    if (!rd->started) { /* the last rows before the head first, then on */
        uint64_t back = (uint64_t)ev->cfg->cache_rows < BACKFILL_MAX ? (uint64_t)ev->cfg->cache_rows
                                                                    : BACKFILL_MAX;
        uint64_t from = log > back ? log - back + 1 : 1;
        rd->started = true;
        rd->next = from;
        rd->asked = from - 1;
        pthread_mutex_lock(&ev->cache.lock);
        ev->cache.first = ev->cache.next = from;
        pthread_mutex_unlock(&ev->cache.lock);
    }
    if (log > rd->target) rd->target = log;
    uint64_t now = atomic_load(&ev->head_seen);
    while (log > now && !atomic_compare_exchange_weak(&ev->head_seen, &now, log)) {
    }
    if (!atomic_load(&ev->reader_ready)) atomic_store(&ev->reader_ready, true);
    pump(rd);
}

static void on_head(void *arg, int status, const mcpg_coord_value *v) {
    ev_reader *rd = arg;
    rd->asking_head = false;
    if (rd->stopped) return;
    if (status == MCPG_ENOENT) heard_head(rd, "0 0", 3);
    else if (status == 0) heard_head(rd, v->data, v->len);
}

/* "<last log row> <last inbox slot>", then the batch's rows when they fit
 * the word ("\n<first>\n<len> <row>\n..."). */
static void on_head_word(void *arg, const char *subject, const char *data, size_t len) {
    ev_reader *rd = arg;
    (void)subject;
    if (!rd->started || !data) return; /* before the first read, the read decides */
    const char *nl = memchr(data, '\n', len);
    size_t head = nl ? (size_t)(nl - data) : len;
    if (nl) heard_rows(rd, nl + 1, len - head - 1);
    heard_head(rd, data, head); /* asks for what the word did not carry */
    drain(rd);
}

static void on_tick(void *arg) {
    ev_reader *rd = arg;
    events *ev = rd->ev;
    retry_failed(rd);
    if (rd->started && ++rd->ticks % HEAD_POLL_TICKS) return;
    if (rd->asking_head) return;
    rd->asking_head = true;
    if (ev->co->get(ev->co_inst, rd->l->w, EV_KEY_HEAD, sizeof EV_KEY_HEAD - 1, on_head, rd) < 0)
        rd->asking_head = false;
}

int ev_reader_start(events *ev, ev_loop *l0) {
    const mcpg_host *h = ev->host;
    ev_reader *rd = h->calloc(1, sizeof *rd);
    if (!rd) return MCPG_ENOMEM;
    rd->ev = ev;
    rd->l = l0;
    ev->reader = rd;
    int rc = ev->co->subscribe(ev->co_inst, l0->w, EV_SUBJ_HEAD, on_head_word, rd, &rd->sub);
    if (rc < 0) rd->sub = NULL; /* the tick still finds the head */
    rc = h->timer_start(ev->self, l0->w, 0, TICK_MS, on_tick, rd, &rd->tick);
    return rc < 0 ? rc : 0;
}

void ev_reader_stop(events *ev) {
    ev_reader *rd = ev->reader;
    if (!rd) return;
    rd->stopped = true;
    if (rd->tick) ev->host->timer_stop(rd->tick);
    if (rd->sub) ev->co->unsubscribe(ev->co_inst, rd->sub);
}

void ev_reader_free(events *ev) {
    ev_reader *rd = ev->reader;
    if (!rd) return;
    for (size_t i = 0; i < READ_WINDOW; i++) ev_row_unref(ev->host, rd->win[i].row);
    ev->host->free(rd);
    ev->reader = NULL;
}
