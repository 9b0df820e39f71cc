/* coordinator_nats: the fleet coordinator on NATS (cluster.kind nats).
 *
 * Rows, counters, slots and TTLs live in one JetStream KV bucket (file
 * storage, history 1); pub/sub is core NATS. nats.c's KV calls are
 * synchronous request/reply, so no op runs one on a loop:
 *
 *   loop: op checks its arguments, copies key and value into one record,
 *         queues it (bounded: MCPG_EAGAIN when queue_max are in flight) and
 *         returns 0
 *   KV threads (kv_threads, cn_queue.c): each runs one round trip at a time
 *         (cn_kv.c); a key's ops always go to the same thread, so they take
 *         effect in the order they were made; then the answer is posted to
 *         its loop (host->worker_post)
 *   loop: answers are put back in the loop's order of ops, and each
 *         callback runs exactly once, never inside the op
 *
 * Why threads of its own rather than the kernel's pool (host->work_submit):
 * the pool is small (gateway.pool.threads, 4) and is where backends block;
 * session and limit round trips parked there would wait behind slow tools
 * and hold a pool thread each. A few threads of its own (declared with
 * MCPG_MOD_OWNS_THREADS, joined in stop) keep the pool for backends, route
 * a key to one thread (per-key order without locks), and make the bound the
 * module's own (queue_max). Their cost: kv_threads round trips in flight
 * per instance at most (measured in the README).
 *
 * The connection (cn_conn.c) reconnects by itself; while it is down every op
 * answers MCPG_EUNAVAIL at once, and no op waits longer than op_timeout_ms
 * (it answers MCPG_ETIMEDOUT instead). */
#include "cn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const mcpg_config_field cn_config[] = {
    MCPG_CFG_REQUIRED_STRING_FIELD(cn_cfg, url, "url",
                                   "NATS server URL(s), comma-separated: nats://host:4222"),
    MCPG_CFG_STRING_FIELD(cn_cfg, bucket, "bucket", "\"mcpg\"",
                          "JetStream KV bucket for rows and counters (created when absent)"),
    MCPG_CFG_INT_FIELD(cn_cfg, replicas, "replicas", "1", 1, 3,
                       "bucket replicas, 1 or 3; 3 needs nats-server 2.9.21 or later (refused "
                       "on older servers, whose replicated compare-and-set loses updates)"),
    MCPG_CFG_JSON_FIELD(cn_cfg, jetstream, "jetstream", "{}",
                        "{\"state_bucket_max_bytes\": N}: the bucket's size bound (256 MiB)"),
    MCPG_CFG_INT_FIELD(cn_cfg, max_age_ms, "max_age_ms", "0", 0, INT64_MAX / 1000000,
                       "bucket MaxAge: a key not written for this long is dropped (bounds "
                       "expired keys; also keys without a TTL); 0 = never"),
    MCPG_CFG_INT_FIELD(cn_cfg, op_timeout_ms, "op_timeout_ms", "2000", 10, 600000,
                       "an op answers MCPG_ETIMEDOUT past this (queue wait included)"),
    MCPG_CFG_INT_FIELD(cn_cfg, reconnect_min_ms, "reconnect_min_ms", "100", 1, 600000,
                       "first wait before reconnecting; doubles per attempt"),
    MCPG_CFG_INT_FIELD(cn_cfg, reconnect_max_ms, "reconnect_max_ms", "5000", 1, 3600000,
                       "longest wait between reconnect attempts"),
    MCPG_CFG_STRING_FIELD(cn_cfg, user_env, "user_env", "\"\"",
                          "environment variable holding the NATS user name"),
    MCPG_CFG_STRING_FIELD(cn_cfg, password_env, "password_env", "\"\"",
                          "environment variable holding the NATS password"),
    MCPG_CFG_STRING_FIELD(cn_cfg, token_env, "token_env", "\"\"",
                          "environment variable holding the NATS token"),
    MCPG_CFG_INT_FIELD(cn_cfg, queue_max, "queue_max", "4096", 1, 1000000,
                       "ops in flight at most (queued, running, or answered and waiting for "
                       "an earlier one); past it an op returns MCPG_EAGAIN"),
    MCPG_CFG_INT_FIELD(cn_cfg, kv_threads, "kv_threads", "4", 1, 64,
                       "threads running KV round trips (one at a time each); a key's ops "
                       "always run on the same one"),
    MCPG_CFG_INT_FIELD(cn_cfg, max_key_bytes, "max_key_bytes", "1024", 1, 65536,
                       "longest key or scan prefix (MCPG_ERANGE past it)"),
    MCPG_CFG_INT_FIELD(cn_cfg, max_value_bytes, "max_value_bytes", "1000000", 0, 64000000,
                       "longest value (MCPG_ERANGE past it); within the server's max_payload"),
    MCPG_CFG_INT_FIELD(cn_cfg, max_scan_keys, "max_scan_keys", "100000", 1, 100000000,
                       "keys one scan_prefix reports at most (then MCPG_ERANGE)"),
    MCPG_CFG_INT_FIELD(cn_cfg, max_subscriptions, "max_subscriptions", "100000", 1, 100000000,
                       "live subscriptions at most (subscribe answers MCPG_EAGAIN)"),
    MCPG_CFG_INT_FIELD(cn_cfg, subscriber_backlog, "subscriber_backlog", "1024", 1, 1048576,
                       "messages posted to a subscriber's loop and not yet delivered; past "
                       "it a message is dropped for that subscriber (counted, logged)"),
    MCPG_CFG_INT_FIELD(cn_cfg, max_message_bytes, "max_message_bytes", "1000000", 0, 64000000,
                       "largest published message (MCPG_ERANGE)"),
    MCPG_CONFIG_END};

#define CN_DEFAULT_BUCKET_BYTES 268435456 /* 256 MiB: about 480 000 keys of 256 bytes */

/* Instances of this image that use nats.c: the last one to stop closes the
 * library (its threads run library code: they must be gone before the image
 * that pulled the library in is unloaded). Per image, because that is the
 * unit the kernel unloads. */
static atomic_int cn_library_users;

/* ---- config ------------------------------------------------------------------------ */

static int bucket_bytes(const mcpg_host *h, const char *json, int64_t *out) {
    *out = CN_DEFAULT_BUCKET_BYTES;
    mcpg_json_span v;
    size_t n = strlen(json);
    int rc = h->json_object_get(json, n, "state_bucket_max_bytes", &v);
    if (rc < 0) return -1;
    size_t it = 0;
    mcpg_json_span k, val;
    while ((rc = h->json_object_next(json, n, &it, &k, &val)) == 1)
        if (!h->json_string_eq(&k, "state_bucket_max_bytes", 22)) return -2;
    if (rc < 0) return -1;
    if (h->json_object_get(json, n, "state_bucket_max_bytes", &v) == 1 &&
        (h->json_int64(&v, out) != 0 || *out < 1024))
        return -1;
    return 0;
}

static int bucket_name_ok(const char *b) {
    if (!b || !*b) return 0;
    for (; *b; b++)
        if (!((*b >= 'a' && *b <= 'z') || (*b >= 'A' && *b <= 'Z') || (*b >= '0' && *b <= '9') ||
              *b == '-' || *b == '_'))
            return 0;
    return 1;
}

static int cn_validate(const mcpg_host *h, const void *config, mcpg_report *rep) {
    const cn_cfg *cfg = config;
    int bad = 0;
    int64_t bytes;
    if (cfg->replicas != 1 && cfg->replicas != 3) {
        h->report_error(rep, "replicas", "must be 1 or 3");
        bad = 1;
    }
    if (!bucket_name_ok(cfg->bucket)) {
        h->report_error(rep, "bucket", "must be letters, digits, '-' or '_'");
        bad = 1;
    }
    int rc = bucket_bytes(h, cfg->jetstream, &bytes);
    if (rc == -2) h->report_error(rep, "jetstream", "unknown key: the one key is "
                                                    "\"state_bucket_max_bytes\"");
    else if (rc) h->report_error(rep, "jetstream.state_bucket_max_bytes",
                                 "must be an integer of at least 1024");
    if (cfg->reconnect_min_ms > cfg->reconnect_max_ms) {
        h->report_error(rep, "reconnect_min_ms", "must not exceed reconnect_max_ms");
        bad = 1;
    }
    return bad || rc ? MCPG_ECONFIG : 0;
}

/* ---- ops: from the loop to the KV threads ---------------------------------------------- */

/* A record with room for the stored key (as a key or as a scan prefix) and
 * the value. */
static int op_new(cn *c, mcpg_worker *w, cn_kind kind, const char *key, size_t klen,
                  const char *val, size_t vlen, mcpg_coord_cb cb, void *arg, cn_op **out) {
    if (!cb || (!val && vlen)) return MCPG_EINVAL;
    if (!cn_worker_ok(c, w)) return MCPG_ESTATE;
    int as_prefix = kind == CN_SCAN, raw = kind == CN_PUBLISH;
    size_t elen = raw ? klen : cn_key_encoded_len(key, klen, as_prefix);
    cn_op *op = c->h->alloc(sizeof *op + elen + 1 + vlen + 1);
    if (!op) return MCPG_ENOMEM;
    *op = (cn_op){.cn = c, .w = w, .kind = kind, .cb = cb, .arg = arg, .klen = elen,
                  .vlen = vlen};
    op->key = op->bytes;
    if (raw) memcpy(op->key, key, klen), op->key[klen] = '\0';
    else cn_key_encode(key, klen, op->key, as_prefix);
    char *v = op->bytes + elen + 1;
    if (vlen) memcpy(v, val, vlen);
    v[vlen] = '\0';
    op->val = v;
    op->deadline_us = c->h->mono_us() + (uint64_t)c->cfg->op_timeout_ms * 1000;
    *out = op;
    return 0;
}

static int op_queue(cn *c, cn_op *op) { return cn_queue_submit(c, op); }

static int key_ok(const cn *c, const char *key, size_t klen) {
    if (!key || klen == 0) return MCPG_EINVAL;
    return klen > (size_t)c->cfg->max_key_bytes ? MCPG_ERANGE : 0;
}

static int value_ok(const cn *c, size_t vlen) {
    return vlen > (size_t)c->cfg->max_value_bytes ? MCPG_ERANGE : 0;
}

/* Check, build and queue one key op; `fill` sets its kind-specific inputs. */
static int submit(cn *c, mcpg_worker *w, cn_kind kind, const char *key, size_t klen,
                  const char *val, size_t vlen, mcpg_coord_cb cb, void *arg, cn_op **out) {
    int rc = key_ok(c, key, klen);
    if (rc || (rc = value_ok(c, vlen))) return rc;
    return op_new(c, w, kind, key, klen, val, vlen, cb, arg, out);
}

static int cn_get(void *inst, mcpg_worker *w, const char *key, size_t klen, mcpg_coord_cb cb,
                  void *arg) {
    cn_op *op;
    int rc = submit(inst, w, CN_GET, key, klen, NULL, 0, cb, arg, &op);
    return rc ? rc : op_queue(inst, op);
}

static int cn_write(cn *c, cn_kind kind, mcpg_worker *w, const char *key, size_t klen,
                    uint64_t expected, const char *val, size_t vlen, uint64_t ttl_ms,
                    mcpg_coord_cb cb, void *arg) {
    cn_op *op;
    int rc = submit(c, w, kind, key, klen, val, vlen, cb, arg, &op);
    if (rc) return rc;
    op->ttl_ms = ttl_ms;
    op->expected = expected;
    return op_queue(c, op);
}

static int cn_put(void *inst, mcpg_worker *w, const char *key, size_t klen, const char *val,
                  size_t vlen, uint64_t ttl_ms, mcpg_coord_cb cb, void *arg) {
    return cn_write(inst, CN_PUT, w, key, klen, 0, val, vlen, ttl_ms, cb, arg);
}

static int cn_put_if_absent(void *inst, mcpg_worker *w, const char *key, size_t klen,
                            const char *val, size_t vlen, uint64_t ttl_ms, mcpg_coord_cb cb,
                            void *arg) {
    return cn_write(inst, CN_PUT_IF_ABSENT, w, key, klen, 0, val, vlen, ttl_ms, cb, arg);
}

static int cn_cas(void *inst, mcpg_worker *w, const char *key, size_t klen, uint64_t expected,
                  const char *val, size_t vlen, uint64_t ttl_ms, mcpg_coord_cb cb, void *arg) {
    return cn_write(inst, CN_CAS, w, key, klen, expected, val, vlen, ttl_ms, cb, arg);
}

static int cn_incr(void *inst, mcpg_worker *w, const char *key, size_t klen, int64_t delta,
                   uint64_t ttl_ms, mcpg_coord_cb cb, void *arg) {
    cn_op *op;
    int rc = submit(inst, w, CN_INCR, key, klen, NULL, 0, cb, arg, &op);
    if (rc) return rc;
    op->delta = delta;
    op->ttl_ms = ttl_ms;
    return op_queue(inst, op);
}

static int cn_rate_take(void *inst, mcpg_worker *w, const char *key, size_t klen, int64_t now_us,
                        int64_t interval_us, int64_t burst_us, mcpg_coord_cb cb, void *arg) {
    if (interval_us < 1 || burst_us < 1) return MCPG_EINVAL;
    cn_op *op;
    int rc = submit(inst, w, CN_RATE, key, klen, NULL, 0, cb, arg, &op);
    if (rc) return rc;
    op->now_us = now_us, op->interval_us = interval_us, op->burst_us = burst_us;
    return op_queue(inst, op);
}

static int cn_del(void *inst, mcpg_worker *w, const char *key, size_t klen, mcpg_coord_cb cb,
                  void *arg) {
    cn_op *op;
    int rc = submit(inst, w, CN_DEL, key, klen, NULL, 0, cb, arg, &op);
    return rc ? rc : op_queue(inst, op);
}

static int cn_scan_prefix(void *inst, mcpg_worker *w, const char *prefix, size_t plen,
                          mcpg_coord_cb each_cb, mcpg_coord_cb cb, void *arg) {
    cn *c = inst;
    if (!each_cb || (!prefix && plen)) return MCPG_EINVAL;
    if (plen > (size_t)c->cfg->max_key_bytes) return MCPG_ERANGE;
    cn_op *op;
    int rc = op_new(c, w, CN_SCAN, prefix ? prefix : "", plen, NULL, 0, cb, arg, &op);
    if (rc) return rc;
    op->each_cb = each_cb;
    return op_queue(c, op);
}

static int cn_publish(void *inst, mcpg_worker *w, const char *subject, const char *data,
                      size_t len, mcpg_coord_cb cb, void *arg) {
    cn *c = inst;
    size_t slen = subject ? strnlen(subject, 1025) : 0;
    if (!cn_subject_valid(subject, slen, 0)) return MCPG_EINVAL;
    if (len > (size_t)c->cfg->max_message_bytes) return MCPG_ERANGE;
    cn_op *op;
    int rc = op_new(c, w, CN_PUBLISH, subject, slen, data, len, cb, arg, &op);
    return rc ? rc : op_queue(c, op);
}

static int cn_subscribe(void *inst, mcpg_worker *w, const char *subject, mcpg_coord_msg_cb cb,
                        void *arg, mcpg_coord_sub **sub_out) {
    cn *c = inst;
    size_t slen = subject ? strnlen(subject, 1025) : 0;
    if (!cb || !sub_out || !cn_subject_valid(subject, slen, 1)) return MCPG_EINVAL;
    if (!cn_worker_ok(c, w)) return MCPG_ESTATE;
    return cn_sub_open(c, w, subject, cb, arg, sub_out);
}

static void cn_unsubscribe(void *inst, mcpg_coord_sub *sub) {
    if (sub) cn_sub_close(inst, sub);
}

/* ---- lifecycle ------------------------------------------------------------------------ */

static void cn_destroy(void *instance);

static int cn_create(const mcpg_host *h, mcpg_instance *self, const void *config,
                     void **instance_out) {
    cn *c = h->calloc(1, sizeof *c);
    if (!c) return MCPG_ENOMEM;
    c->h = h, c->self = self, c->cfg = config;
    if (bucket_bytes(h, c->cfg->jetstream, &c->bucket_max_bytes)) {
        h->free(c);
        return MCPG_ECONFIG;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->bind_mu, NULL);
    pthread_mutex_init(&c->sub_mu, NULL);
    /* --check builds instances before any loop exists: then there are none */
    c->nworkers = h->worker_count();
    if (cn_queue_new(c)) {
        cn_destroy(c);
        return MCPG_ENOMEM;
    }
    *instance_out = c;
    return 0;
}

static void shutdown_instance(cn *c);

/* Connect (a server not there yet is retried in the background), bind or
 * create the bucket when the server is there, start the KV thread. A
 * bucket that cannot be used as configured (replicas 3 on an older server)
 * refuses the start. */
static int cn_start(void *instance) {
    cn *c = instance;
    atomic_fetch_add(&cn_library_users, 1);
    c->library_user = 1;
    int rc = cn_conn_open(c);
    /* a replicated bucket is judged by the server's version: wait for it */
    for (int64_t t = 0; rc == 0 && c->cfg->replicas > 1 && !atomic_load(&c->connected) &&
                        t < c->cfg->op_timeout_ms; t += 10)
        usleep(10000);
    if (rc == 0 && atomic_load(&c->connected)) {
        rc = cn_kv_bind(c, 1);
        if (rc == MCPG_EUNAVAIL || rc == MCPG_ETIMEDOUT) {
            c->h->log(c->self, MCPG_LOG_WARN, "bucket \"%s\" not bound yet (%s): tried again "
                      "on the next op", c->cfg->bucket, c->h->strerror(rc));
            rc = 0;
        }
    }
    if (rc == 0) rc = cn_queue_start(c);
    if (rc) shutdown_instance(c);
    return rc;
}

static void cn_worker_stop(void *instance, mcpg_worker *w) {
    cn_worker_stopped(instance, w);
}

static void shutdown_instance(cn *c) {
    cn_queue_stop(c);
    if (!c->library_user) return;
    c->library_user = 0;
    cn_subs_close(c);
    cn_conn_close(c);
    if (atomic_fetch_sub(&cn_library_users, 1) == 1) nats_CloseAndWait(2000);
}

static void cn_stop(void *instance) {
    cn *c = instance;
    shutdown_instance(c);
    c->h->log(c->self, MCPG_LOG_INFO, "stopped: %llu messages dropped",
              (unsigned long long)atomic_load(&c->dropped));
}

static void cn_destroy(void *instance) {
    cn *c = instance;
    shutdown_instance(c);
    cn_queue_free(c);
    cn_subs_free(c);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->bind_mu);
    pthread_mutex_destroy(&c->sub_mu);
    c->h->free(c);
}

static const mcpg_lifecycle_ops cn_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = cn_validate,
    .create = cn_create,
    .start = cn_start,
    .stop = cn_stop,
    .destroy = cn_destroy,
    .worker_stop = cn_worker_stop,
};

static const mcpg_coordinator_ops cn_ops = {
    MCPG_OPS_HEAD(mcpg_coordinator_ops),
    .get = cn_get,
    .put = cn_put,
    .incr = cn_incr,
    .rate_take = cn_rate_take,
    .put_if_absent = cn_put_if_absent,
    .compare_and_set = cn_cas,
    .del = cn_del,
    .scan_prefix = cn_scan_prefix,
    .publish = cn_publish,
    .subscribe = cn_subscribe,
    .unsubscribe = cn_unsubscribe,
};

MCPG_MODULE_DEFINE(MCPG_KIND_COORDINATOR, "coordinator_nats", "1.0.0",
                   .description = "the fleet coordinator on NATS: JetStream KV rows and "
                                  "counters, core NATS pub/sub (cluster.kind nats)",
                   .flags = MCPG_MOD_OWNS_THREADS, .config = cn_config,
                   .config_size = sizeof(cn_cfg), .lifecycle = &cn_lifecycle, .ops = &cn_ops);
