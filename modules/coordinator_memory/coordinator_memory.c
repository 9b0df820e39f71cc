/* coordinator_memory: the embedded coordinator (cluster.kind single_node).
 *
 * One instance per gateway process, shared by every loop: the store
 * (coord_store.c) and pub/sub (coord_pubsub.c) are thread-safe; this file
 * checks arguments, applies each op at once and hands its answer back later.
 *
 * When callbacks run: never inside the op. An op called on w's loop thread
 * first queues its operation record on w (host->worker_post), then applies
 * the op and fills the record; the record's callback runs on a later turn of
 * w's loop, so callbacks of one loop's ops run in the order the ops were
 * made. A failing post (the loop is stopping) makes the op return
 * MCPG_ESTATE before it changes anything. Records come from a small free
 * list per worker, touched only on that worker's thread: an op allocates only
 * when the list is empty, or for a value too big for the record.
 *
 * Expired keys read as absent at once; a timer per loop sweeps them out
 * every sweep_interval_ms.
 *
 * With a `path` (coord_journal.h): the store is replayed from the journal at
 * start, and every change is appended to it, under the key's shard lock, as
 * the op applies itself. Memory is updated at once, as without a path: a read
 * on any loop sees a change as soon as its op returned, before the change is
 * on disk (a read on the op's own loop sees its put; a read on another loop
 * may see a value a crash would still lose: its writer has not been answered
 * yet, and is answered MCPG_EUNAVAIL if the write then fails). What waits for
 * the disk is the callback: a mutating op (put, incr, rate_take,
 * put_if_absent, compare_and_set, del, whatever its outcome) is answered only
 * once every record appended before it answered is durable. To keep "in the
 * order that loop made its ops", nothing is posted at once then: each op goes
 * to its worker's queue (wk->qhead, loop thread only) and the queue's head is
 * posted when it is ready (reads and pub/sub at once, mutations when the
 * journal's durable sequence reaches theirs; MCPG_EUNAVAIL when the writer
 * gave up on that batch). A mutation's first record in a loop turn posts a
 * kick to that loop, which runs after the turn's other work and wakes the
 * writer: the turn's records go in one write and one fdatasync. The writer
 * posts `notify` to each loop with ops waiting after each batch. */
#include <mcpg/sdk.h>

#include <stdatomic.h>
#include <string.h>

#include "coord_journal.h"
#include "coord_metrics.h"
#include "coord_pubsub.h"
#include "coord_store.h"

#define CM_OP_INLINE 96      /* value bytes a record holds without allocating */
#define CM_FREE_MAX 64       /* records kept per worker */
#define CM_SWEEP_BUDGET 65536 /* keys one tick may remove */

typedef struct cm_cfg {
    int64_t max_keys, max_bytes, max_key_bytes, max_value_bytes, max_scan_keys;
    int64_t max_subscriptions, subscriber_backlog, max_message_bytes, sweep_interval_ms;
    const char *path;
    int64_t compact_min_bytes;
} cm_cfg;

static const mcpg_config_field cm_config[] = {
    MCPG_CFG_INT_FIELD(cm_cfg, max_keys, "max_keys", "1000000", 1, 1000000000,
                       "live keys at most; a write past it answers MCPG_EAGAIN"),
    MCPG_CFG_INT_FIELD(cm_cfg, max_bytes, "max_bytes", "268435456", 1024, INT64_MAX,
                       "key plus value bytes at most; a write past it answers MCPG_EAGAIN"),
    MCPG_CFG_INT_FIELD(cm_cfg, max_key_bytes, "max_key_bytes", "1024", 1, 65536,
                       "longest key or scan prefix; a longer one is refused (MCPG_ERANGE)"),
    MCPG_CFG_INT_FIELD(cm_cfg, max_value_bytes, "max_value_bytes", "1048576", 0, 1073741824,
                       "longest value; a longer one is refused (MCPG_ERANGE)"),
    MCPG_CFG_INT_FIELD(cm_cfg, max_scan_keys, "max_scan_keys", "100000", 1, 100000000,
                       "keys one scan_prefix reports at most; past it the scan ends with "
                       "MCPG_ERANGE"),
    MCPG_CFG_INT_FIELD(cm_cfg, max_subscriptions, "max_subscriptions", "100000", 1,
                       100000000, "live subscriptions at most; past it subscribe answers "
                       "MCPG_EAGAIN"),
    MCPG_CFG_INT_FIELD(cm_cfg, subscriber_backlog, "subscriber_backlog", "1024", 1, 1048576,
                       "messages queued per subscription; when full a new message is dropped "
                       "for that subscription (counted, logged)"),
    MCPG_CFG_INT_FIELD(cm_cfg, max_message_bytes, "max_message_bytes", "1048576", 0,
                       1073741824, "largest published message; a larger one is refused "
                       "(MCPG_ERANGE)"),
    MCPG_CFG_INT_FIELD(cm_cfg, sweep_interval_ms, "sweep_interval_ms", "1000", 1, 3600000,
                       "how often each loop removes expired keys (reads never see them)"),
    MCPG_CFG_STRING_FIELD(cm_cfg, path, "path", NULL,
                          "a journal file: every change is on disk before its op is answered, "
                          "and the store is replayed from it at start (none: memory only)"),
    MCPG_CFG_INT_FIELD(cm_cfg, compact_min_bytes, "compact_min_bytes", "8388608", 4096,
                       INT64_MAX, "with a path: the journal is rewritten as a snapshot of the "
                       "live keys once it is over this size and 4x the live data"),
    MCPG_CONFIG_END};

typedef struct cm_worker cm_worker;
typedef struct coordmem coordmem;

typedef enum cm_kind { CM_OP_VALUE = 0, CM_OP_SCAN = 1 } cm_kind;

/* One operation, from its op to its callback. Owned by its worker. */
typedef struct cm_op {
    mcpg_post post;
    cm_worker *wk;
    struct cm_op *prev, *next; /* the worker's records in flight, or its free list */
    cm_kind kind;
    cm_opname name;  /* for its metrics */
    uint64_t t0;     /* when it was made: the store's "now", and its latency's start */
    int status;
    mcpg_coord_cb cb, each_cb;
    void *arg;
    cm_out out;
    cm_scan_out scan;
    uint64_t need;       /* with a journal: answered once durable reaches it (0: at once) */
    struct cm_op *qnext; /* with a journal: the worker's queue, in the order ops were made */
    char inline_buf[CM_OP_INLINE];
} cm_op;

struct cm_worker {
    coordmem *cm;
    mcpg_worker *w;
    mcpg_timer *sweep;
    cm_op *live;   /* posted, callback not run yet */
    cm_op *free;
    size_t nfree;
    /* with a journal */
    cm_op *qhead, *qtail;       /* made, not posted yet (loop thread only) */
    int stopping;               /* worker_stop ran: ops refused */
    int kick_pending;           /* loop thread only */
    mcpg_post kick, notify;
    atomic_int waiting;         /* the queue is not empty: the writer posts notify */
    atomic_int notify_pending;  /* notify is posted and has not run */
};

struct coordmem {
    const mcpg_host *h;
    mcpg_instance *self;
    const cm_cfg *cfg;
    cm_store *store;
    cm_pubsub *ps;
    cm_worker *workers;
    uint32_t nworkers;
    atomic_uint_fast64_t swept;
    cm_metrics metrics;
    cm_journal *j; /* with a path, from start() */
};

/* ---- operation records (on their worker's thread) --------------------------- */

static void op_unlink(cm_op *op) {
    if (op->prev) op->prev->next = op->next;
    else op->wk->live = op->next;
    if (op->next) op->next->prev = op->prev;
}

static void op_recycle(cm_op *op) {
    const mcpg_host *h = op->wk->cm->h;
    cm_out_release(h, &op->out);
    cm_scan_release(h, &op->scan);
    cm_worker *wk = op->wk;
    if (wk->nfree >= CM_FREE_MAX) {
        h->free(op);
        return;
    }
    op->next = wk->free;
    wk->free = op;
    wk->nfree++;
}

static void scan_answer(cm_op *op) {
    for (size_t i = 0; i < op->scan.n && op->status == 0; i++) {
        const cm_scan_item *it = &op->scan.items[i];
        mcpg_coord_value v = {.size = sizeof v, .data = op->scan.keys + it->off,
                              .len = it->len, .revision = it->revision};
        op->each_cb(op->arg, 0, &v);
    }
    mcpg_coord_value done = {.size = sizeof done, .number = (int64_t)op->scan.n};
    op->cb(op->arg, op->status, &done);
}

/* The post: the op's answer, on its loop. */
static void op_answer(void *arg) {
    cm_op *op = arg;
    const coordmem *cm = op->wk->cm;
    op_unlink(op);
    cm_metrics_op(&cm->metrics, op->name, op->status, cm->h->mono_us() - op->t0);
    if (op->kind == CM_OP_SCAN) {
        scan_answer(op);
    } else {
        mcpg_coord_value v = {.size = sizeof v, .data = op->out.data, .len = op->out.len,
                              .revision = op->out.revision, .number = op->out.number};
        op->cb(op->arg, op->status, &v);
    }
    op_recycle(op);
}

/* A record for an op on w, already queued there: MCPG_ESTATE when w is not
 * the calling thread's loop or is stopping, MCPG_ENOMEM. */
static int op_begin(coordmem *cm, cm_opname name, mcpg_worker *w, mcpg_coord_cb cb, void *arg,
                    cm_op **out) {
    const mcpg_host *h = cm->h;
    if (!w || h->worker_current() != w) return MCPG_ESTATE;
    uint32_t i = h->worker_index(w);
    if (i >= cm->nworkers) return MCPG_ESTATE;
    cm_worker *wk = &cm->workers[i];
    cm_op *op = wk->free;
    if (op) {
        wk->free = op->next;
        wk->nfree--;
    } else if (!(op = h->alloc(sizeof *op))) {
        return MCPG_ENOMEM;
    }
    *op = (cm_op){.post = {.fn = op_answer, .arg = op}, .wk = wk, .name = name,
                  .t0 = h->mono_us(), .cb = cb, .arg = arg,
                  .out = {.inline_buf = op->inline_buf, .inline_cap = CM_OP_INLINE}};
    if (cm->j ? wk->stopping : h->worker_post(w, &op->post) != 0) {
        op_recycle(op);
        return MCPG_ESTATE;
    }
    op->next = wk->live;
    if (wk->live) wk->live->prev = op;
    wk->live = op;
    *out = op;
    return 0;
}

/* ---- with a journal: answers in order, once durable (loop thread) ------------- */

static int op_ready(const coordmem *cm, cm_op *op) {
    if (op->need <= cm_journal_durable(cm->j)) return 1;
    if (op->need > cm_journal_resolved(cm->j)) return 0;
    /* the batch with its record failed: the change is in memory, not on disk */
    cm_out_release(cm->h, &op->out);
    op->out.revision = 0;
    op->out.number = 0;
    op->status = MCPG_EUNAVAIL;
    op->need = 0;
    return 1;
}

/* Post the queue's ready head, in order. A post refused (the loop is
 * stopping) leaves the record in `live`, freed by destroy. */
static void queue_drain(cm_worker *wk) {
    coordmem *cm = wk->cm;
    for (;;) {
        while (wk->qhead && op_ready(cm, wk->qhead)) {
            cm_op *op = wk->qhead;
            wk->qhead = op->qnext;
            if (!wk->qhead) wk->qtail = NULL;
            (void)cm->h->worker_post(wk->w, &op->post);
        }
        if (!wk->qhead) {
            atomic_store(&wk->waiting, 0);
            return;
        }
        atomic_store(&wk->waiting, 1);
        if (!op_ready(cm, wk->qhead)) return; /* the writer sees `waiting` after its batch */
    }
}

static void on_notify(void *arg) {
    cm_worker *wk = arg;
    atomic_store(&wk->notify_pending, 0);
    queue_drain(wk);
}

static void on_kick(void *arg) {
    cm_worker *wk = arg;
    wk->kick_pending = 0;
    cm_journal_kick(wk->cm->j);
}

/* The writer's progress (on its thread): wake the loops with ops waiting. */
static void on_progress(void *arg) {
    coordmem *cm = arg;
    for (uint32_t i = 0; i < cm->nworkers; i++) {
        cm_worker *wk = &cm->workers[i];
        if (!atomic_load(&wk->waiting) || atomic_exchange(&wk->notify_pending, 1)) continue;
        if (cm->h->worker_post(wk->w, &wk->notify) != 0) atomic_store(&wk->notify_pending, 0);
    }
}

/* The op has applied itself: without a journal its answer is posted already;
 * with one, queue it behind the loop's earlier ops. */
static int op_end(coordmem *cm, cm_op *op, int mutation) {
    if (!cm->j) return 0;
    cm_worker *wk = op->wk;
    if (mutation) {
        if (op->status == 0 && op->out.seq == 0) {
            op->status = MCPG_EUNAVAIL; /* its record could not be kept (no memory) */
            cm_out_release(cm->h, &op->out);
        }
        op->need = cm_journal_appended(cm->j);
        if (op->out.seq && !wk->kick_pending) {
            wk->kick_pending = 1;
            if (cm->h->worker_post(wk->w, &wk->kick) != 0) {
                wk->kick_pending = 0;
                cm_journal_kick(cm->j);
            }
        }
    }
    if (wk->qtail) wk->qtail->qnext = op;
    else wk->qhead = op;
    wk->qtail = op;
    queue_drain(wk);
    return 0;
}

static uint64_t now_us(const coordmem *cm) { return cm->h->mono_us(); }

static int key_ok(const coordmem *cm, const char *key, size_t klen) {
    if (!key || klen == 0) return MCPG_EINVAL;
    return klen > (size_t)cm->cfg->max_key_bytes ? MCPG_ERANGE : 0;
}

static int value_ok(const coordmem *cm, const char *val, size_t vlen) {
    if (!val && vlen) return MCPG_EINVAL;
    return vlen > (size_t)cm->cfg->max_value_bytes ? MCPG_ERANGE : 0;
}

/* ---- key-value ops ------------------------------------------------------------ */

static int cm_get(void *instance, mcpg_worker *w, const char *key, size_t klen, mcpg_coord_cb cb,
                  void *arg) {
    coordmem *cm = instance;
    cm_op *op;
    int rc = key_ok(cm, key, klen);
    if (rc || (rc = op_begin(cm, CMO_GET, w, cb, arg, &op))) return rc;
    op->status = cm_store_get(cm->store, key, klen, op->t0, &op->out);
    return op_end(cm, op, 0);
}

static int cm_write(coordmem *cm, cm_write_mode mode, mcpg_worker *w, const char *key,
                    size_t klen, uint64_t expected, const char *val, size_t vlen,
                    uint64_t ttl_ms, mcpg_coord_cb cb, void *arg) {
    cm_op *op;
    int rc = key_ok(cm, key, klen);
    cm_opname name = mode == CM_PUT ? CMO_PUT : mode == CM_PUT_IF_ABSENT ? CMO_PUT_IF_ABSENT : CMO_CAS;
    if (rc || (rc = value_ok(cm, val, vlen)) || (rc = op_begin(cm, name, w, cb, arg, &op)))
        return rc;
    op->status = cm_store_write(cm->store, mode, key, klen, val, vlen, ttl_ms, expected, op->t0,
                                &op->out);
    return op_end(cm, op, 1);
}

static int cm_put(void *instance, mcpg_worker *w, const char *key, size_t klen, const char *val,
                  size_t vlen, uint64_t ttl_ms, mcpg_coord_cb cb, void *arg) {
    return cm_write(instance, CM_PUT, w, key, klen, 0, val, vlen, ttl_ms, cb, arg);
}

static int cm_put_if_absent(void *instance, mcpg_worker *w, const char *key, size_t klen,
                            const char *val, size_t vlen, uint64_t ttl_ms, mcpg_coord_cb cb,
                            void *arg) {
    return cm_write(instance, CM_PUT_IF_ABSENT, w, key, klen, 0, val, vlen, ttl_ms, cb, arg);
}

static int cm_cas(void *instance, mcpg_worker *w, const char *key, size_t klen,
                  uint64_t expected_revision, const char *val, size_t vlen, uint64_t ttl_ms,
                  mcpg_coord_cb cb, void *arg) {
    return cm_write(instance, CM_CAS, w, key, klen, expected_revision, val, vlen, ttl_ms, cb,
                    arg);
}

static int cm_incr(void *instance, mcpg_worker *w, const char *key, size_t klen, int64_t delta,
                   uint64_t ttl_ms, mcpg_coord_cb cb, void *arg) {
    coordmem *cm = instance;
    cm_op *op;
    int rc = key_ok(cm, key, klen);
    if (rc || (rc = op_begin(cm, CMO_INCR, w, cb, arg, &op))) return rc;
    op->status = cm_store_incr(cm->store, key, klen, delta, ttl_ms, op->t0, &op->out);
    return op_end(cm, op, 1);
}

static int cm_rate_take(void *instance, mcpg_worker *w, const char *key, size_t klen,
                        int64_t caller_now_us, int64_t interval_us, int64_t burst_us,
                        mcpg_coord_cb cb, void *arg) {
    coordmem *cm = instance;
    cm_op *op;
    int rc = key_ok(cm, key, klen);
    if (!rc && (interval_us < 1 || burst_us < 1)) rc = MCPG_EINVAL;
    if (rc || (rc = op_begin(cm, CMO_RATE_TAKE, w, cb, arg, &op))) return rc;
    cm_rate q = {caller_now_us, interval_us, burst_us};
    op->status = cm_store_rate_take(cm->store, key, klen, &q, op->t0, &op->out);
    return op_end(cm, op, 1);
}

static int cm_del(void *instance, mcpg_worker *w, const char *key, size_t klen, mcpg_coord_cb cb,
                  void *arg) {
    coordmem *cm = instance;
    cm_op *op;
    int rc = key_ok(cm, key, klen);
    if (rc || (rc = op_begin(cm, CMO_DEL, w, cb, arg, &op))) return rc;
    op->status = cm_store_del(cm->store, key, klen, op->t0, &op->out);
    return op_end(cm, op, 1);
}

static int cm_scan_prefix(void *instance, mcpg_worker *w, const char *prefix, size_t plen,
                          mcpg_coord_cb each_cb, mcpg_coord_cb cb, void *arg) {
    coordmem *cm = instance;
    cm_op *op;
    if (!each_cb || (!prefix && plen)) return MCPG_EINVAL;
    if (plen > (size_t)cm->cfg->max_key_bytes) return MCPG_ERANGE;
    int rc = op_begin(cm, CMO_SCAN, w, cb, arg, &op);
    if (rc) return rc;
    op->kind = CM_OP_SCAN;
    op->each_cb = each_cb;
    op->status = cm_store_scan(cm->store, prefix, plen, op->t0,
                               (size_t)cm->cfg->max_scan_keys, &op->scan);
    return op_end(cm, op, 0);
}

/* ---- pub/sub ops ---------------------------------------------------------------- */

static int cm_pub(void *instance, mcpg_worker *w, const char *subject, const char *data,
                  size_t len, mcpg_coord_cb cb, void *arg) {
    coordmem *cm = instance;
    cm_op *op;
    size_t slen = subject ? strnlen(subject, CM_SUBJECT_MAX + 1) : 0;
    if (!cm_subject_valid(subject, slen, 0) || (!data && len)) return MCPG_EINVAL;
    if (len > (size_t)cm->cfg->max_message_bytes) return MCPG_ERANGE;
    int rc = op_begin(cm, CMO_PUBLISH, w, cb, arg, &op);
    if (rc) return rc;
    size_t reached = 0;
    op->status = cm_publish(cm->ps, subject, slen, data, len, &reached);
    op->out.number = (int64_t)reached;
    return op_end(cm, op, 0);
}

static int cm_sub_op(void *instance, mcpg_worker *w, const char *subject, mcpg_coord_msg_cb cb,
                     void *arg, mcpg_coord_sub **sub_out) {
    coordmem *cm = instance;
    size_t slen = subject ? strnlen(subject, CM_SUBJECT_MAX + 1) : 0;
    if (!cb || !sub_out || !cm_subject_valid(subject, slen, 1)) return MCPG_EINVAL;
    if (!w || cm->h->worker_current() != w) return MCPG_ESTATE;
    cm_sub *sub;
    int rc = cm_subscribe(cm->ps, w, subject, slen, cb, arg, &sub);
    cm_metrics_op(&cm->metrics, CMO_SUBSCRIBE, rc, 0);
    if (rc == 0) *sub_out = (mcpg_coord_sub *)sub;
    return rc;
}

static void cm_unsub_op(void *instance, mcpg_coord_sub *sub) {
    coordmem *cm = instance;
    if (sub) cm_unsubscribe(cm->ps, (cm_sub *)sub);
}

/* ---- lifecycle ------------------------------------------------------------------- */

static void cm_destroy(void *instance);

static uint64_t cm_seed(const mcpg_host *h, const void *p) {
    return (uint64_t)h->wall_us() ^ h->mono_us() << 17 ^ (uint64_t)(uintptr_t)p;
}

static int cm_create(const mcpg_host *h, mcpg_instance *self, const void *config,
                     void **instance_out) {
    const cm_cfg *cfg = config;
    coordmem *cm = h->calloc(1, sizeof *cm);
    if (!cm) return MCPG_ENOMEM;
    cm->h = h;
    cm->self = self;
    cm->cfg = cfg;
    /* --check builds instances before any loop exists: then there are none */
    cm->nworkers = h->worker_count();
    cm->workers = cm->nworkers ? h->calloc(cm->nworkers, sizeof *cm->workers) : NULL;
    uint64_t seed = cm_seed(h, cm);
    cm->store = cm_store_new(h, (size_t)cfg->max_keys, (size_t)cfg->max_bytes, seed);
    cm->ps = cm_pubsub_new(h, self, (size_t)cfg->max_subscriptions,
                           (size_t)cfg->subscriber_backlog, seed >> 1);
    if ((cm->nworkers && !cm->workers) || !cm->store || !cm->ps) {
        cm_destroy(cm);
        return MCPG_ENOMEM;
    }
    for (uint32_t i = 0; i < cm->nworkers; i++) {
        cm_worker *wk = &cm->workers[i];
        *wk = (cm_worker){.cm = cm, .w = h->worker_at(i), .kick = {.fn = on_kick, .arg = wk},
                          .notify = {.fn = on_notify, .arg = wk}};
    }
    cm_metrics_register(&cm->metrics, h, self, cm->store);
    *instance_out = cm;
    return 0;
}

/* With a path: replay the journal, then journal every change. Here, not in
 * create: `mcpg --check` creates instances too, and must neither take the
 * file's lock (a running gateway holds it) nor cut a torn tail. */
static int cm_start(void *instance) {
    coordmem *cm = instance;
    const char *path = cm->cfg->path;
    if (!path || !*path) return 0;
    int rc = cm_journal_open(cm->h, cm->self, path, cm->store,
                             (uint64_t)cm->cfg->compact_min_bytes, &cm->j);
    if (rc) return rc;
    cm_store_set_log(cm->store, cm_journal_log, cm->j);
    if ((rc = cm_journal_start(cm->j, on_progress, cm)) != 0) {
        cm_store_set_log(cm->store, NULL, NULL);
        cm_journal_free(cm->j);
        cm->j = NULL;
    }
    return rc;
}

static int cm_validate(const mcpg_host *h, const void *config, mcpg_report *rep) {
    const cm_cfg *cfg = config;
    if (!cfg->path) return 0;
    char why[512];
    const char *bad = cm_journal_path_problem(cfg->path, why, sizeof why);
    if (!bad) return 0;
    h->report_error(rep, "path", "%s: a journal cannot be kept there", bad);
    return MCPG_ECONFIG;
}

static void cm_sweep_tick(void *arg) {
    cm_worker *wk = arg;
    coordmem *cm = wk->cm;
    size_t n = cm_store_sweep(cm->store, now_us(cm), CM_SWEEP_BUDGET);
    if (n) atomic_fetch_add(&cm->swept, n);
}

static void cm_worker_start(void *instance, mcpg_worker *w) {
    coordmem *cm = instance;
    uint32_t i = cm->h->worker_index(w);
    if (i >= cm->nworkers) return;
    uint64_t every = (uint64_t)cm->cfg->sweep_interval_ms;
    int rc = cm->h->timer_start(cm->self, w, every, every, cm_sweep_tick, &cm->workers[i],
                                &cm->workers[i].sweep);
    if (rc)
        cm->h->log(cm->self, MCPG_LOG_WARN,
                   "worker %u: no sweep timer (%s): expired keys go when read or when full", i,
                   cm->h->strerror(rc));
}

static void cm_worker_stop(void *instance, mcpg_worker *w) {
    coordmem *cm = instance;
    uint32_t i = cm->h->worker_index(w);
    if (i >= cm->nworkers) return;
    cm->workers[i].stopping = 1; /* with a journal: ops refused from here on (MCPG_ESTATE) */
    if (!cm->workers[i].sweep) return;
    cm->h->timer_stop(cm->workers[i].sweep);
    cm->workers[i].sweep = NULL;
}

static void cm_stop(void *instance) {
    coordmem *cm = instance;
    size_t keys, bytes;
    cm_store_usage(cm->store, &keys, &bytes);
    cm->h->log(cm->self, MCPG_LOG_INFO,
               "stopped: %zu keys, %zu bytes, %llu expired keys swept, %llu messages dropped",
               keys, bytes, (unsigned long long)atomic_load(&cm->swept),
               (unsigned long long)cm_pubsub_dropped(cm->ps));
    if (!cm->j) return;
    cm_journal_stop(cm->j); /* what is appended is written and synced first */
    uint64_t records, syncs, compactions, file;
    cm_journal_stats(cm->j, &records, &syncs, &compactions, &file);
    cm->h->log(cm->self, MCPG_LOG_INFO,
               "journal %s: %llu records in %llu syncs, %llu compactions, %llu bytes",
               cm->cfg->path, (unsigned long long)records, (unsigned long long)syncs,
               (unsigned long long)compactions, (unsigned long long)file);
}

/* Records whose answer never ran (their loop ended first) and the free lists. */
static void worker_free(const mcpg_host *h, cm_worker *wk) {
    while (wk->live) {
        cm_op *op = wk->live;
        op_unlink(op);
        cm_out_release(h, &op->out);
        cm_scan_release(h, &op->scan);
        h->free(op);
    }
    while (wk->free) {
        cm_op *op = wk->free;
        wk->free = op->next;
        h->free(op);
    }
}

static void cm_destroy(void *instance) {
    coordmem *cm = instance;
    const mcpg_host *h = cm->h;
    for (uint32_t i = 0; cm->workers && i < cm->nworkers; i++) worker_free(h, &cm->workers[i]);
    h->free(cm->workers);
    cm_journal_free(cm->j);
    cm_pubsub_free(cm->ps);
    cm_store_free(cm->store);
    h->free(cm);
}

static const mcpg_lifecycle_ops cm_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = cm_validate,
    .create = cm_create,
    .start = cm_start,
    .stop = cm_stop,
    .destroy = cm_destroy,
    .worker_start = cm_worker_start,
    .worker_stop = cm_worker_stop,
};

static const mcpg_coordinator_ops cm_ops = {
    MCPG_OPS_HEAD(mcpg_coordinator_ops),
    .get = cm_get,
    .put = cm_put,
    .incr = cm_incr,
    .rate_take = cm_rate_take,
    .put_if_absent = cm_put_if_absent,
    .compare_and_set = cm_cas,
    .del = cm_del,
    .scan_prefix = cm_scan_prefix,
    .publish = cm_pub,
    .subscribe = cm_sub_op,
    .unsubscribe = cm_unsub_op,
};

MCPG_MODULE_DEFINE(MCPG_KIND_COORDINATOR, "coordinator_memory", "1.0.0",
                   .description = "the embedded coordinator: keys, TTLs, counters and "
                                  "pub/sub in this process (cluster.kind single_node), "
                                  "optionally journaled to a file",
                   .flags = MCPG_MOD_OWNS_THREADS,
                   .config = cm_config, .config_size = sizeof(cm_cfg),
                   .lifecycle = &cm_lifecycle, .ops = &cm_ops);
