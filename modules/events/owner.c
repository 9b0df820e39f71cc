/* events: the owner, one replica at a time, moves inbox rows into the log.
 *
 * It holds mcpg.ev.lease (put_if_absent with a TTL of lease_ms, renewed
 * by compare-and-set every lease_ms / 3; a replica whose store stops
 * answering keeps moving until the lease would have run out, and the head's
 * compare-and-set below stops a second owner from moving anything).
 *
 * A batch, on loop 0: read the head ("<last log row> <last inbox slot
 * moved>") once per ownership, read the inbox's last slot, read up to
 * batch_rows inbox rows at once, and take them in slot order: an empty row
 * is a slot given up; a missing one is a post still being written, waited
 * for until it is older than the grace below (then its producer was never
 * answered 202 and will retry). Each event's id is claimed
 * (put_if_absent of its id key, the value the slot that carried it): a
 * claim held by another slot is a copy, dropped. The rest get consecutive
 * log rows, written at once; then the head moves (compare-and-set: a
 * conflict means another owner, and this one stops), the replicas are told
 * ("<last log row> <last inbox slot>" on mcpg.ev.head) and the moved inbox
 * rows deleted. A batch cut short by the store is taken again from the
 * head: its log rows are written again, the same rows to the same places
 * (a claim naming the same slot is this event's own), so nothing is lost
 * or told twice. */
#include "events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 100          /* a batch is looked for at least this often */
#define MISSING_GRACE_MS 5000 /* a slot reserved and never written is given up after */

typedef struct orow {
    struct ev_owner *o;
    uint64_t slot;
    int status;        /* of its read, then of its claim / write */
    mcpg_buf row;      /* "<id key>\n<occurrence>"; empty: a slot given up */
    uint64_t logseq;   /* 0: not written (given up, missing, or a copy) */
    int state;         /* ROW_* */
} orow;

enum { ROW_READ, ROW_GIVEN_UP, ROW_MISSING, ROW_FRESH, ROW_COPY };

typedef struct ev_owner {
    events *ev;
    ev_loop *l;
    mcpg_timer *tick;
    mcpg_coord_sub *sub;
    bool held, leasing, moving, again, stopped;
    uint64_t lease_rev, renewed_ms;
    bool head_known;
    uint64_t head_rev, log_last, in_done;
    uint64_t missing_slot, missing_since_ms;
    orow *rows;
    size_t n, prefix, pending;
    mcpg_buf word;  /* the last word told to the replicas (kept warm) */
    uint64_t tail;
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

static void on_deleted(void *arg, int status, const mcpg_coord_value *v) { ev_noop_cb(arg, status, v); }

static void delete_moved(ev_owner *o) {
    events *ev = o->ev;
    for (size_t i = 0; i < o->prefix; i++) {
        char key[48];
        size_t kn = ev_key_u64(key, sizeof key, EV_KEY_IN, o->rows[i].slot);
        (void)ev->co->del(ev->co_inst, o->l->w, key, kn, on_deleted, NULL);
    }
}

/* The replicas' word that the head moved: "<last log row> <last inbox slot>",
 * then, while they fit WORD_ROWS_MAX, the batch's rows ("\n<first>" and
 * "\n<len> <row>" each), so no reader asks the store for them. */
#define WORD_ROWS_MAX (256u << 10)

static const char *occurrence(const struct orow *r, size_t *n);

static void tell_head(ev_owner *o, uint64_t first) {
    events *ev = o->ev;
    const mcpg_host *h = ev->host;
    mcpg_buf *b = &o->word;
    b->len = 0;
    int rc = h->buf_printf(b, "%llu %llu\n%llu", (unsigned long long)o->log_last,
                           (unsigned long long)o->in_done, (unsigned long long)first);
    for (size_t i = 0; i < o->prefix && !rc; i++) {
        if (o->rows[i].state != ROW_FRESH) continue;
        size_t on = 0;
        const char *occ = occurrence(&o->rows[i], &on);
        if (b->len + on + 24 > WORD_ROWS_MAX) break; /* the rest are read from the store */
        rc = h->buf_printf(b, "\n%zu ", on) || h->buf_append(b, occ, on);
    }
    if (rc) { /* out of memory: the head alone */
        b->len = 0;
        rc = h->buf_printf(b, "%llu %llu", (unsigned long long)o->log_last,
                           (unsigned long long)o->in_done);
    }
    if (!rc) (void)ev->co->publish(ev->co_inst, o->l->w, EV_SUBJ_HEAD, b->data, b->len, ev_noop_cb, NULL);
}

static void on_head_moved(void *arg, int status, const mcpg_coord_value *v) {
    ev_owner *o = arg;
    events *ev = o->ev;
    if (status == 0) {
        size_t moved = 0;
        for (size_t i = 0; i < o->prefix; i++) moved += o->rows[i].state == ROW_FRESH;
        uint64_t first = o->log_last + 1;
        o->head_rev = v->revision;
        o->log_last += moved;
        o->in_done = o->rows[o->prefix - 1].slot;
        atomic_store(&ev->inbox_done, o->in_done);
        if (ev->m_moved) ev->host->metric_add(ev->m_moved, 0, (int64_t)moved);
        tell_head(o, first);
        delete_moved(o);
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
    size_t moved = 0;
    for (size_t i = 0; i < o->prefix; i++) moved += o->rows[i].state == ROW_FRESH;
    char val[48];
    int n = snprintf(val, sizeof val, "%llu %llu", (unsigned long long)(o->log_last + moved),
                     (unsigned long long)o->rows[o->prefix - 1].slot);
    int rc = ev->co->compare_and_set(ev->co_inst, o->l->w, EV_KEY_HEAD, sizeof EV_KEY_HEAD - 1,
                                     o->head_rev, val, (size_t)n, 0, on_head_moved, o);
    if (rc < 0) on_head_moved(o, rc, NULL);
}

static int batch_failed(ev_owner *o) {
    for (size_t i = 0; i < o->prefix; i++)
        if (o->rows[i].status) return 1;
    return 0;
}

static void writes_settled(ev_owner *o) {
    if (o->stopped || batch_failed(o)) return batch_end(o); /* taken again from the head */
    move_head(o);
}

static void on_written(void *arg, int status, const mcpg_coord_value *v) {
    orow *r = arg;
    ev_owner *o = r->o;
    (void)v;
    r->status = status;
    if (--o->pending == 0) writes_settled(o);
}

static const char *occurrence(const orow *r, size_t *n) {
    const char *nl = memchr(r->row.data, '\n', r->row.len);
    *n = nl ? r->row.len - (size_t)(nl + 1 - r->row.data) : 0;
    return nl ? nl + 1 : NULL;
}

static void write_rows(ev_owner *o) {
    events *ev = o->ev;
    uint64_t seq = o->log_last;
    o->pending = 1; /* held until every write is out */
    for (size_t i = 0; i < o->prefix; i++) {
        orow *r = &o->rows[i];
        r->status = 0;
        if (r->state != ROW_FRESH) continue;
        r->logseq = ++seq;
        size_t on = 0;
        const char *occ = occurrence(r, &on);
        char key[48];
        size_t kn = ev_key_u64(key, sizeof key, EV_KEY_LOG, r->logseq);
        o->pending++;
        int rc = ev->co->put(ev->co_inst, o->l->w, key, kn, occ, on,
                             (uint64_t)ev->cfg->retention_ms, on_written, r);
        if (rc < 0) {
            r->status = rc;
            o->pending--;
        }
    }
    if (--o->pending == 0) writes_settled(o);
}

static void claims_settled(ev_owner *o) {
    if (o->stopped || batch_failed(o)) return batch_end(o);
    write_rows(o);
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
        if (!nl) { /* not a row this module wrote: given up */
            r->state = ROW_GIVEN_UP;
            continue;
        }
        char mine[24];
        int mn = snprintf(mine, sizeof mine, "%llu", (unsigned long long)r->slot);
        o->pending++;
        int rc = ev->co->put_if_absent(ev->co_inst, o->l->w, r->row.data, (size_t)(nl - r->row.data),
                                       mine, (size_t)mn, (uint64_t)ev->cfg->dedup_ms, on_claimed, r);
        if (rc < 0) {
            r->status = rc;
            o->pending--;
        }
    }
    if (--o->pending == 0) claims_settled(o);
}

/* The rows read: how many from the first can be moved now. */
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
    }
    return o->n;
}

static void on_row_read(void *arg, int status, const mcpg_coord_value *v) {
    orow *r = arg;
    ev_owner *o = r->o;
    if (status == 0 && v->len == 0) r->state = ROW_GIVEN_UP;
    else if (status == 0 && o->ev->host->buf_append(&r->row, v->data, v->len) == 0) r->state = ROW_FRESH;
    else if (status == MCPG_ENOENT) r->state = ROW_MISSING;
    else r->status = status ? status : MCPG_ENOMEM;
    if (--o->pending) return;
    for (size_t i = 0; i < o->n; i++)
        if (o->rows[i].status) return batch_end(o);
    o->prefix = o->stopped ? 0 : movable_prefix(o);
    if (!o->prefix) return batch_end(o);
    claim_ids(o);
}

static void read_rows(ev_owner *o) {
    events *ev = o->ev;
    uint64_t n = o->tail - o->in_done;
    if (n > (uint64_t)ev->cfg->batch_rows) n = (uint64_t)ev->cfg->batch_rows;
    o->rows = ev->host->calloc((size_t)n, sizeof *o->rows);
    if (!o->rows) return batch_end(o);
    o->n = (size_t)n;
    o->pending = o->n;
    for (size_t i = 0; i < o->n; i++) {
        orow *r = &o->rows[i];
        r->o = o;
        r->slot = o->in_done + 1 + i;
        char key[48];
        size_t kn = ev_key_u64(key, sizeof key, EV_KEY_IN, r->slot);
        int rc = ev->co->get(ev->co_inst, o->l->w, key, kn, on_row_read, r);
        if (rc < 0) on_row_read(r, rc, NULL);
    }
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
    read_rows(o);
}

static void read_tail(ev_owner *o) {
    events *ev = o->ev;
    int rc = ev->co->get(ev->co_inst, o->l->w, EV_KEY_IN_SEQ, sizeof EV_KEY_IN_SEQ - 1, on_tail, o);
    if (rc < 0) batch_end(o);
}

/* "<log> <slot>" */
static int parse_head(const char *p, size_t n, uint64_t *log, uint64_t *slot) {
    const char *sp = p ? memchr(p, ' ', n) : NULL;
    if (!sp) return -1;
    return ev_parse_u64(p, (size_t)(sp - p), log) ||
           ev_parse_u64(sp + 1, n - (size_t)(sp + 1 - p), slot) ? -1 : 0;
}

static void on_head(void *arg, int status, const mcpg_coord_value *v) {
    ev_owner *o = arg;
    if (status == MCPG_ENOENT) {
        o->head_rev = 0;
        o->log_last = o->in_done = 0;
    } else if (status == 0 && parse_head(v->data, v->len, &o->log_last, &o->in_done) == 0) {
        o->head_rev = v->revision;
    } else {
        if (status == 0)
            o->ev->host->log(o->ev->self, MCPG_LOG_ERROR, "%s holds \"%.*s\", not \"<log> <slot>\"",
                             EV_KEY_HEAD, (int)v->len, v->data);
        return batch_end(o);
    }
    o->head_known = true;
    atomic_store(&o->ev->inbox_done, o->in_done);
    read_tail(o);
}

static void cycle(ev_owner *o) {
    if (o->stopped || !o->held) return;
    if (o->moving) {
        o->again = true;
        return;
    }
    o->moving = true;
    if (o->head_known) return read_tail(o);
    events *ev = o->ev;
    int rc = ev->co->get(ev->co_inst, o->l->w, EV_KEY_HEAD, sizeof EV_KEY_HEAD - 1, on_head, o);
    if (rc < 0) batch_end(o);
}

/* ---- start, stop, nudges ----------------------------------------------------------- */

static void on_tick(void *arg) {
    ev_owner *o = arg;
    tend_lease(o);
    cycle(o);
}

static void on_inbox_hint(void *arg, const char *subject, const char *data, size_t len) {
    (void)subject, (void)data, (void)len;
    cycle(arg);
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
    ev->owner = o;
    int rc = ev->co->subscribe(ev->co_inst, l0->w, EV_SUBJ_INBOX, on_inbox_hint, o, &o->sub);
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
    ev->host->free(o);
    ev->owner = NULL;
}

bool ev_owner_holds(events *ev) {
    ev_owner *o = ev->owner;
    return o && o->held && !o->stopped;
}
