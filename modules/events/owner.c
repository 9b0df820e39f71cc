/* events: the owner, one replica at a time, admits inbox rows into the log.
 *
 * The log is the inbox: a slot's row becomes log row <slot> once the owner
 * has admitted it, which it does in batches, in slot order, by moving the
 * head over them (nothing is copied). Readers read only up to the head.
 *
 * It holds mcpg.ev.lease (put_if_absent with a TTL of lease_ms, renewed
 * by compare-and-set every lease_ms / 3; a replica whose store stops
 * answering keeps going until the lease would have run out, and the head's
 * compare-and-set below stops a second owner from admitting anything).
 *
 * A batch, on loop 0: the head ("<last admitted slot> <the same>") is read
 * once per ownership. The rows after it come from the posting replicas'
 * word on mcpg.ev.inbox when it carried them, else from the store (after
 * reading the inbox's last slot). In slot order: an empty row is a slot
 * given up; a missing one is a post still being written, waited for until
 * it is older than the grace below (then its producer was never answered
 * 202 and retries; the slot is emptied so no late write shows). Each
 * event's id is claimed (put_if_absent of its id key, the value the slot
 * that carried it): a claim held by another slot makes this one a copy,
 * whose row is emptied. Then the head moves (compare-and-set: a conflict
 * means another owner, and this one stops) and the replicas are told, the
 * batch's events in the word ("<head> <head>\n<first>\n<len> <event>..."),
 * so no reader asks the store for them. A batch cut short by the store is
 * taken again from the head: a claim naming the same slot is this event's
 * own, so nothing is lost or told twice. */
#include "events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 100           /* a batch is looked for at least this often */
#define MISSING_GRACE_MS 5000 /* a slot reserved and never written is given up after */
#define HEARD_RING 8192       /* rows heard from posting replicas, by slot */
#define WORD_ROWS_MAX (256u << 10) /* the events a word carries, in bytes */
#define HEARD_BYTES_MAX (16u << 20) /* rows heard and kept, in bytes: past it, read from the store */

typedef struct orow {
    struct ev_owner *o;
    uint64_t slot;
    int status;        /* of its read, then of its claim / emptying */
    mcpg_buf row;      /* "<id key>\n<occurrence>"; empty: a slot given up */
    int state;         /* ROW_* */
} orow;

enum { ROW_READ, ROW_GIVEN_UP, ROW_MISSING, ROW_FRESH, ROW_COPY };

/* A row a posting replica's word carried (its store write done). */
typedef struct heard {
    uint64_t slot;     /* 0: none */
    mcpg_buf row;
} heard;

typedef struct ev_owner {
    events *ev;
    ev_loop *l;
    mcpg_timer *tick;
    mcpg_coord_sub *sub;
    bool held, leasing, moving, again, stopped;
    uint64_t lease_rev, renewed_ms;
    bool head_known;
    uint64_t head_rev, in_done;
    uint64_t missing_slot, missing_since_ms;
    orow *rows;
    size_t n, prefix, pending;
    uint64_t tail;     /* the inbox's last slot, as last read or heard */
    heard *heard;      /* HEARD_RING of them */
    size_t heard_bytes;
    mcpg_buf word;     /* the last word told to the replicas (kept warm) */
} ev_owner;

static uint64_t now_ms(const ev_owner *o) { return o->ev->host->mono_us() / 1000; }

static void cycle(ev_owner *o);
/* ---- the lease ------------------------------------------------------------------ */

static void on_lease(void *arg, int status, const mcpg_coord_value *v) {
    ev_owner *o = arg;
    events *ev = o->ev;
    o->leasing = false;
    if (o->stopped) return;
    if (status == 0) {
        if (!o->held) {
            ev->host->log(ev->self, MCPG_LOG_INFO, "this replica (%s) now moves the events inbox",
                          ev->replica);
            o->head_known = false;
        }
        o->held = true;
        o->lease_rev = v->revision;
        o->renewed_ms = now_ms(o);
        cycle(o);
    } else if (status == MCPG_EEXIST || status == MCPG_ECONFLICT || status == MCPG_ENOENT) {
        if (o->held) ev->host->log(ev->self, MCPG_LOG_WARN, "lost the events owner's lease");
        o->held = false;
    } else if (o->held && now_ms(o) - o->renewed_ms >= (uint64_t)ev->cfg->lease_ms) {
        o->held = false; /* the store is away: by now another may hold it */
    }
}

static void tend_lease(ev_owner *o) {
    events *ev = o->ev;
    uint64_t ttl = (uint64_t)ev->cfg->lease_ms, now = now_ms(o);
    if (o->leasing) return;
    if (o->held && now - o->renewed_ms < ttl / 3) return;
    size_t vn = strlen(ev->replica);
    o->leasing = true;
    int rc = o->held ? ev->co->compare_and_set(ev->co_inst, o->l->w, EV_KEY_LEASE, sizeof EV_KEY_LEASE - 1,
                                               o->lease_rev, ev->replica, vn, ttl, on_lease, o)
                     : ev->co->put_if_absent(ev->co_inst, o->l->w, EV_KEY_LEASE, sizeof EV_KEY_LEASE - 1,
                                             ev->replica, vn, ttl, on_lease, o);
    if (rc < 0) o->leasing = false;
}

/* ---- a batch ---------------------------------------------------------------------- */

static void batch_end(ev_owner *o) {
    const mcpg_host *h = o->ev->host;
    for (size_t i = 0; i < o->n; i++) h->buf_free(&o->rows[i].row);
    h->free(o->rows);
    o->rows = NULL;
    o->n = o->prefix = 0;
    o->moving = false;
    if (!o->stopped && o->held && (o->again || o->tail > o->in_done)) {
        o->again = false;
        cycle(o);
    }
}

static const char *occurrence(const orow *r, size_t *n) {
    const char *nl = r->row.len ? memchr(r->row.data, '\n', r->row.len) : NULL;
    *n = nl ? r->row.len - (size_t)(nl + 1 - r->row.data) : 0;
    return nl ? nl + 1 : NULL;
}

/* The replicas' word: the head, then each admitted slot's event in order
 * (length 0: a hole), while they fit. */
static void tell_head(ev_owner *o, uint64_t first) {
    events *ev = o->ev;
    const mcpg_host *h = ev->host;
    mcpg_buf *b = &o->word;
    b->len = 0;
    int rc = h->buf_printf(b, "%llu %llu\n%llu", (unsigned long long)o->in_done,
                           (unsigned long long)o->in_done, (unsigned long long)first);
    for (size_t i = 0; i < o->prefix && !rc; i++) {
        size_t on = 0;
        const char *occ = o->rows[i].state == ROW_FRESH ? occurrence(&o->rows[i], &on) : NULL;
        if (b->len + on + 24 > WORD_ROWS_MAX) break; /* the rest are read from the store */
        rc = h->buf_printf(b, "\n%zu ", on) || (on && h->buf_append(b, occ, on));
    }
    if (rc) { /* out of memory: the head alone */
        b->len = 0;
        rc = h->buf_printf(b, "%llu %llu", (unsigned long long)o->in_done,
                           (unsigned long long)o->in_done);
    }
    if (!rc) (void)ev->co->publish(ev->co_inst, o->l->w, EV_SUBJ_HEAD, b->data, b->len, ev_noop_cb, NULL);
}

static size_t count_fresh(const ev_owner *o) {
    size_t n = 0;
    for (size_t i = 0; i < o->prefix; i++) n += o->rows[i].state == ROW_FRESH;
    return n;
}

static void on_head_moved(void *arg, int status, const mcpg_coord_value *v) {
    ev_owner *o = arg;
    events *ev = o->ev;
    if (status == 0) {
        uint64_t first = o->in_done + 1;
        o->head_rev = v->revision;
        o->in_done = o->rows[o->prefix - 1].slot;
        atomic_store(&ev->inbox_done, o->in_done);
        if (ev->m_moved) ev->host->metric_add(ev->m_moved, 0, (int64_t)count_fresh(o));
        tell_head(o, first);
    } else if (status == MCPG_ECONFLICT) {
        ev->host->log(ev->self, MCPG_LOG_WARN, "the events head moved under this owner: another "
                      "replica owns the inbox now");
        o->held = false;
        o->head_known = false;
    }
    batch_end(o);
}

static void move_head(ev_owner *o) {
    events *ev = o->ev;
    char val[48];
    uint64_t last = o->rows[o->prefix - 1].slot;
    int n = snprintf(val, sizeof val, "%llu %llu", (unsigned long long)last, (unsigned long long)last);
    int rc = ev->co->compare_and_set(ev->co_inst, o->l->w, EV_KEY_HEAD, sizeof EV_KEY_HEAD - 1,
                                     o->head_rev, val, (size_t)n, 0, on_head_moved, o);
    if (rc < 0) on_head_moved(o, rc, NULL);
}

static int batch_failed(const ev_owner *o) {
    for (size_t i = 0; i < o->prefix; i++)
        if (o->rows[i].status) return 1;
    return 0;
}

static void holes_settled(ev_owner *o) {
    if (o->stopped || batch_failed(o)) return batch_end(o); /* taken again from the head */
    move_head(o);
}

static void on_emptied(void *arg, int status, const mcpg_coord_value *v) {
    orow *r = arg;
    ev_owner *o = r->o;
    (void)v;
    r->status = status;
    if (--o->pending == 0) holes_settled(o);
}

/* A copy's slot, and one given up for good, hold "" before the head moves
 * over them: no reader ever sees the copy, nor a late write. */
static void empty_holes(ev_owner *o) {
    events *ev = o->ev;
    o->pending = 1; /* held until every write is out */
    for (size_t i = 0; i < o->prefix; i++) {
        orow *r = &o->rows[i];
        r->status = 0;
        if (r->state != ROW_COPY && !(r->state == ROW_GIVEN_UP && r->row.len)) continue;
        char key[48];
        size_t kn = ev_key_u64(key, sizeof key, EV_KEY_IN, r->slot);
        o->pending++;
        if (ev->co->put(ev->co_inst, o->l->w, key, kn, "", 0, (uint64_t)ev->cfg->retention_ms,
                        on_emptied, r) < 0) {
            r->status = MCPG_EUNAVAIL;
            o->pending--;
        }
    }
    if (--o->pending == 0) holes_settled(o);
}

static void claims_settled(ev_owner *o) {
    if (o->stopped || batch_failed(o)) return batch_end(o);
    empty_holes(o);
}

static void on_claimed(void *arg, int status, const mcpg_coord_value *v) {
    orow *r = arg;
    ev_owner *o = r->o;
    char mine[24];
    int mn = snprintf(mine, sizeof mine, "%llu", (unsigned long long)r->slot);
    if (status == MCPG_EEXIST) {
        int own = v->data && v->len == (size_t)mn && !memcmp(v->data, mine, (size_t)mn);
        r->state = own ? ROW_FRESH : ROW_COPY;
        status = 0;
    }
    r->status = status;
    if (--o->pending == 0) claims_settled(o);
}

static void claim_ids(ev_owner *o) {
    events *ev = o->ev;
    o->pending = 1;
    for (size_t i = 0; i < o->prefix; i++) {
        orow *r = &o->rows[i];
        r->status = 0;
        if (r->state != ROW_FRESH) continue;
        const char *nl = memchr(r->row.data, '\n', r->row.len);
        if (!nl) { /* not a row this module wrote: emptied like a copy */
            r->state = ROW_COPY;
            continue;
        }
        char mine[24];
        int mn = snprintf(mine, sizeof mine, "%llu", (unsigned long long)r->slot);
        o->pending++;
        if (ev->co->put_if_absent(ev->co_inst, o->l->w, r->row.data, (size_t)(nl - r->row.data),
                                  mine, (size_t)mn, (uint64_t)ev->cfg->dedup_ms, on_claimed, r) < 0) {
            r->status = MCPG_EUNAVAIL;
            o->pending--;
        }
    }
    if (--o->pending == 0) claims_settled(o);
}

/* The rows known: how many from the first can be admitted now. A slot
 * missing past the grace is given up (its row.len 1 marks it to empty). */
static size_t movable_prefix(ev_owner *o) {
    uint64_t now = now_ms(o);
    for (size_t i = 0; i < o->n; i++) {
        orow *r = &o->rows[i];
        if (r->state != ROW_MISSING) continue;
        if (o->missing_slot != r->slot) {
            o->missing_slot = r->slot;
            o->missing_since_ms = now;
        }
        if (now - o->missing_since_ms < MISSING_GRACE_MS) return i;
        o->ev->host->log(o->ev->self, MCPG_LOG_WARN, "inbox slot %llu was reserved and never "
                         "written: given up", (unsigned long long)r->slot);
        r->state = ROW_GIVEN_UP;
        (void)o->ev->host->buf_append(&r->row, "-", 1); /* to be emptied */
    }
    return o->n;
}

static void rows_known(ev_owner *o) {
    for (size_t i = 0; i < o->n; i++)
        if (o->rows[i].status) return batch_end(o);
    o->prefix = o->stopped ? 0 : movable_prefix(o);
    if (!o->prefix) return batch_end(o);
    claim_ids(o);
}

static void on_row_read(void *arg, int status, const mcpg_coord_value *v) {
    orow *r = arg;
    ev_owner *o = r->o;
    if (status == 0 && v->len == 0) r->state = ROW_GIVEN_UP;
    else if (status == 0 && o->ev->host->buf_append(&r->row, v->data, v->len) == 0) r->state = ROW_FRESH;
    else if (status == MCPG_ENOENT) r->state = ROW_MISSING;
    else r->status = status ? status : MCPG_ENOMEM;
    if (--o->pending == 0) rows_known(o);
}

/* The row of slot s as a posting replica told it: 1 (taken into r), 0 not heard. */
static int take_heard(ev_owner *o, orow *r) {
    heard *e = &o->heard[r->slot % HEARD_RING];
    if (e->slot != r->slot) return 0;
    r->row = e->row;
    o->heard_bytes -= e->row.cap;
    e->row = (mcpg_buf){0};
    e->slot = 0;
    r->state = r->row.len ? ROW_FRESH : ROW_GIVEN_UP;
    return 1;
}

/* Up to batch_rows slots after the head: the heard ones at once, the
 * others read from the store. */
static void gather(ev_owner *o, uint64_t upto) {
    events *ev = o->ev;
    uint64_t n = upto - o->in_done;
    if (n > (uint64_t)ev->cfg->batch_rows) n = (uint64_t)ev->cfg->batch_rows;
    o->rows = ev->host->calloc((size_t)n, sizeof *o->rows);
    if (!o->rows) return batch_end(o);
    o->n = (size_t)n;
    o->pending = 1;
    for (size_t i = 0; i < o->n; i++) {
        orow *r = &o->rows[i];
        r->o = o;
        r->slot = o->in_done + 1 + i;
        if (take_heard(o, r)) continue;
        char key[48];
        size_t kn = ev_key_u64(key, sizeof key, EV_KEY_IN, r->slot);
        o->pending++;
        if (ev->co->get(ev->co_inst, o->l->w, key, kn, on_row_read, r) < 0) {
            r->status = MCPG_EUNAVAIL;
            o->pending--;
        }
    }
    if (--o->pending == 0) rows_known(o);
}

/* The heard rows right after the head, without a gap: their last slot. */
static uint64_t heard_run(const ev_owner *o) {
    uint64_t s = o->in_done;
    while (o->heard[(s + 1) % HEARD_RING].slot == s + 1) s++;
    return s;
}

static void on_tail(void *arg, int status, const mcpg_coord_value *v) {
    ev_owner *o = arg;
    if (status == MCPG_ENOENT) o->tail = 0;
    else if (status == 0) o->tail = (uint64_t)v->number;
    else return batch_end(o);
    uint64_t seen = atomic_load(&o->ev->inbox_tail);
    while (o->tail > seen && !atomic_compare_exchange_weak(&o->ev->inbox_tail, &seen, o->tail)) {
    }
    if (o->stopped || o->tail <= o->in_done) return batch_end(o);
    gather(o, o->tail);
}

/* What to admit next: the heard run when there is one (no store read),
 * else whatever the inbox's last slot says. */
static void next_batch(ev_owner *o) {
    uint64_t run = heard_run(o);
    if (run > o->in_done) {
        if (run > o->tail) o->tail = run;
        return gather(o, run);
    }
    events *ev = o->ev;
    if (ev->co->get(ev->co_inst, o->l->w, EV_KEY_IN_SEQ, sizeof EV_KEY_IN_SEQ - 1, on_tail, o) < 0)
        batch_end(o);
}

static void on_head(void *arg, int status, const mcpg_coord_value *v) {
    ev_owner *o = arg;
    uint64_t last; /* the same slot: the log is the admitted inbox */
    if (status == MCPG_ENOENT) {
        o->head_rev = 0;
        o->in_done = 0;
    } else if (status == 0 && ev_parse_head(v->data, v->len, &last, &o->in_done) == 0) {
        o->head_rev = v->revision;
    } else {
        if (status == 0)
            o->ev->host->log(o->ev->self, MCPG_LOG_ERROR, "%s holds \"%.*s\", not \"<slot> <slot>\"",
                             EV_KEY_HEAD, (int)v->len, v->data);
        return batch_end(o);
    }
    o->head_known = true;
    atomic_store(&o->ev->inbox_done, o->in_done);
    next_batch(o);
}

static void cycle(ev_owner *o) {
    if (o->stopped || !o->held) return;
    if (o->moving) {
        o->again = true;
        return;
    }
    o->moving = true;
    if (o->head_known) return next_batch(o);
    events *ev = o->ev;
    int rc = ev->co->get(ev->co_inst, o->l->w, EV_KEY_HEAD, sizeof EV_KEY_HEAD - 1, on_head, o);
    if (rc < 0) batch_end(o);
}

/* ---- start, stop, nudges ----------------------------------------------------------- */

/* A posting replica's word: "I\n" then "<slot> <len> <row>\n" for each post
 * of a counter step whose row is stored (length 0: a slot given up). Kept
 * while this replica owns the inbox, for the slots just after the head. */
static void on_inbox_word(void *arg, const char *subject, const char *data, size_t len) {
    ev_owner *o = arg;
    (void)subject;
    if (!o->held || !data || len < 2 || data[0] != 'I' || data[1] != '\n') return cycle(o);
    size_t i = 2;
    while (i < len) {
        const char *sp1 = memchr(data + i, ' ', len - i);
        if (!sp1) break;
        const char *sp2 = memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - data));
        uint64_t slot, n;
        if (!sp2 || ev_parse_u64(data + i, (size_t)(sp1 - (data + i)), &slot) ||
            ev_parse_u64(sp1 + 1, (size_t)(sp2 - sp1 - 1), &n))
            break;
        size_t at = (size_t)(sp2 + 1 - data);
        if (n > len - at) break;
        if (slot > o->in_done && slot <= o->in_done + HEARD_RING &&
            o->heard_bytes + (size_t)n <= HEARD_BYTES_MAX) {
            heard *e = &o->heard[slot % HEARD_RING];
            o->heard_bytes -= e->row.cap;
            e->row.len = 0;
            e->slot = o->ev->host->buf_append(&e->row, data + at, (size_t)n) == 0 ? slot : 0;
            o->heard_bytes += e->row.cap;
        }
        if (slot > o->tail) o->tail = slot;
        i = at + (size_t)n + 1;
    }
    cycle(o);
}

static void on_tick(void *arg) {
    ev_owner *o = arg;
    tend_lease(o);
    cycle(o);
}

void ev_owner_nudge(events *ev) {
    if (ev->owner) cycle(ev->owner);
}

int ev_owner_start(events *ev, ev_loop *l0) {
    const mcpg_host *h = ev->host;
    ev_owner *o = h->calloc(1, sizeof *o);
    if (!o) return MCPG_ENOMEM;
    o->ev = ev;
    o->l = l0;
    o->heard = h->calloc(HEARD_RING, sizeof *o->heard);
    ev->owner = o;
    if (!o->heard) return MCPG_ENOMEM;
    int rc = ev->co->subscribe(ev->co_inst, l0->w, EV_SUBJ_INBOX, on_inbox_word, o, &o->sub);
    if (rc < 0) o->sub = NULL; /* the tick still finds the rows */
    rc = h->timer_start(ev->self, l0->w, 0, TICK_MS, on_tick, o, &o->tick);
    return rc < 0 ? rc : 0;
}

/* The lease is given back so another replica takes over at once, not after
 * it runs out. A batch still out finishes into nothing (stopped). */
void ev_owner_stop(events *ev) {
    ev_owner *o = ev->owner;
    if (!o) return;
    o->stopped = true;
    if (o->tick) ev->host->timer_stop(o->tick);
    if (o->sub) ev->co->unsubscribe(ev->co_inst, o->sub);
    if (o->held)
        (void)ev->co->del(ev->co_inst, o->l->w, EV_KEY_LEASE, sizeof EV_KEY_LEASE - 1, ev_noop_cb, NULL);
}

/* destroy(): no loop runs, so no callback of its can come any more. */
void ev_owner_free(events *ev) {
    ev_owner *o = ev->owner;
    if (!o) return;
    if (o->rows)
        for (size_t i = 0; i < o->n; i++) ev->host->buf_free(&o->rows[i].row);
    ev->host->free(o->rows);
    ev->host->buf_free(&o->word);
    for (size_t i = 0; o->heard && i < HEARD_RING; i++) ev->host->buf_free(&o->heard[i].row);
    ev->host->free(o->heard);
    ev->host->free(o);
    ev->owner = NULL;
}

bool ev_owner_holds(events *ev) {
    ev_owner *o = ev->owner;
    return o && o->held && !o->stopped;
}
