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
 * every sweep_interval_ms. */
#include <mcpg/sdk.h>

#include <stdatomic.h>
#include <string.h>

#include "coord_metrics.h"
#include "coord_pubsub.h"
#include "coord_store.h"

#define CM_OP_INLINE 96      /* value bytes a record holds without allocating */
#define CM_FREE_MAX 64       /* records kept per worker */
#define CM_SWEEP_BUDGET 65536 /* keys one tick may remove */

typedef struct cm_cfg {
    int64_t max_keys, max_bytes, max_key_bytes, max_value_bytes, max_scan_keys;
    int64_t max_subscriptions, subscriber_backlog, max_message_bytes, sweep_interval_ms;
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
    char inline_buf[CM_OP_INLINE];
} cm_op;

struct cm_worker {
    coordmem *cm;
    mcpg_worker *w;
    mcpg_timer *sweep;
    cm_op *live;   /* posted, callback not run yet */
    cm_op *free;
    size_t nfree;
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
    if (h->worker_post(w, &op->post) != 0) {
        op_recycle(op);
        return MCPG_ESTATE;
    }
    op->next = wk->live;
    if (wk->live) wk->live->prev = op;
    wk->live = op;
    *out = op;
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
    return 0;
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
    return 0;
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
    return 0;
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
    return 0;
}

static int cm_del(void *instance, mcpg_worker *w, const char *key, size_t klen, mcpg_coord_cb cb,
                  void *arg) {
    coordmem *cm = instance;
    cm_op *op;
    int rc = key_ok(cm, key, klen);
    if (rc || (rc = op_begin(cm, CMO_DEL, w, cb, arg, &op))) return rc;
    op->status = cm_store_del(cm->store, key, klen, op->t0, &op->out);
    return 0;
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
    return 0;
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
    return 0;
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
    for (uint32_t i = 0; i < cm->nworkers; i++)
        cm->workers[i] = (cm_worker){.cm = cm, .w = h->worker_at(i)};
    cm_metrics_register(&cm->metrics, h, self, cm->store);
    *instance_out = cm;
    return 0;
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
    if (i >= cm->nworkers || !cm->workers[i].sweep) return;
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
    cm_pubsub_free(cm->ps);
    cm_store_free(cm->store);
    h->free(cm);
}

static const mcpg_lifecycle_ops cm_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .create = cm_create,
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
                                  "pub/sub in this process (cluster.kind single_node)",
                   .config = cm_config, .config_size = sizeof(cm_cfg),
                   .lifecycle = &cm_lifecycle, .ops = &cm_ops);
