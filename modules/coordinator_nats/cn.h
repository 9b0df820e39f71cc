/* coordinator_nats: what its files share (see coordinator_nats.c for the
 * shape: loop ops -> one KV thread per instance -> answers posted back). */
#ifndef CN_H
#define CN_H

#include <mcpg/sdk.h>

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>

#define CN_HEADER_LEN 16   /* a stored value starts with its expiry: 16 hex digits of wall ms */
#define CN_RETRIES 200     /* compare-and-set rounds one incr/rate_take/put_if_absent may use */
/* A bucket that stopped answering while the connection is up (its stream's
 * only server down, on a cluster) is looked at again this often, by one KV
 * thread, with a request that waits at most CN_PROBE_WAIT_MS. */
#define CN_PROBE_EVERY_MS 500
#define CN_PROBE_WAIT_MS 250
/* bucket_down: the stream answers; it did not (logged); not looked at since a reconnect */
enum { CN_BUCKET_UP = 0, CN_BUCKET_DOWN = 1, CN_BUCKET_UNVERIFIED = 2 };

typedef struct cn_cfg {
    const char *url, *bucket, *jetstream, *user_env, *password_env, *token_env;
    int64_t replicas, max_age_ms, op_timeout_ms, reconnect_min_ms, reconnect_max_ms;
    int64_t queue_max, max_key_bytes, max_value_bytes, max_scan_keys, max_subscriptions;
    int64_t subscriber_backlog, max_message_bytes, kv_threads;
} cn_cfg;

typedef enum cn_kind {
    CN_GET, CN_PUT, CN_PUT_IF_ABSENT, CN_CAS, CN_INCR, CN_RATE, CN_DEL, CN_SCAN, CN_PUBLISH
} cn_kind;

typedef struct cn cn;
typedef struct cn_worker cn_worker;
typedef struct cn_thread cn_thread;

/* Where an op is: on a thread's queue or running, done (its answer posted),
 * or a barrier waiting for its turn on its loop. */
typedef enum cn_op_state { CN_OP_QUEUED, CN_OP_DONE, CN_OP_WAITING } cn_op_state;

/* One scanned key, decoded, in the op's scan buffer. */
typedef struct cn_scan_item {
    size_t off, len;
    uint64_t revision;
} cn_scan_item;

/* One op from the loop call to its callback. `key` is the key as stored
 * (encoded, NUL-terminated); `val` the caller's value bytes (or the subject
 * and message for a publish). Outputs are filled on the KV thread and read
 * on the loop after the post, never at the same time. */
typedef struct cn_op {
    mcpg_post post;
    struct cn_op *next;               /* a thread's queue */
    uint64_t seq;                     /* its loop's order */
    cn_op_state state;
    struct cn_op *live_prev, *live_next; /* every op not yet answered (destroy frees them) */
    cn *cn;
    mcpg_worker *w;
    cn_kind kind;
    mcpg_coord_cb cb, each_cb;
    void *arg;
    uint64_t deadline_us;             /* mono: past it the op answers MCPG_ETIMEDOUT */
    /* inputs */
    char *key;
    size_t klen;
    const char *val;
    size_t vlen;
    uint64_t ttl_ms, expected;
    int64_t delta, now_us, interval_us, burst_us;
    /* outputs */
    int status;
    char *data;                       /* h->alloc'd: value bytes (NUL-terminated) or scan keys */
    size_t len;
    uint64_t revision;
    int64_t number;
    cn_scan_item *items;
    size_t nitems;
    char bytes[];                     /* key, NUL, value */
} cn_op;

struct cn {
    const mcpg_host *h;
    mcpg_instance *self;
    const cn_cfg *cfg;
    int64_t bucket_max_bytes;
    /* nats.c objects: made in start, used by the KV thread (and subscribe,
     * publish through it), destroyed in stop */
    natsOptions *opts;
    natsConnection *nc;
    jsCtx *js;
    kvStore *kv;
    atomic_int connected;             /* the connection's own view, from its callbacks */
    atomic_int closing;               /* stop: a disconnect is no news */
    atomic_int conn_closed;           /* the connection's closed callback ran */
    atomic_int refused;               /* the bucket cannot be used as configured (logged) */
    atomic_int bucket_down;           /* CN_BUCKET_*: does the bucket's stream answer? */
    atomic_uint_fast64_t next_probe_us; /* mono: when a KV thread may look at it again */
    int64_t next_bind_us;             /* KV thread: when to try binding the bucket again */
    /* the queues (cn_queue.c): threads, per-loop order, what is in flight */
    pthread_mutex_t mu;
    cn_thread *threads;
    uint32_t nthreads;
    cn_worker *workers;
    uint32_t nworkers;
    cn_op *live;                      /* every op not yet answered */
    size_t inflight;
    int running, stopping, library_user;
    pthread_mutex_t bind_mu;          /* binding the bucket, from any KV thread */
    /* subscriptions */
    pthread_mutex_t sub_mu;
    struct cn_sub *subs;
    size_t nsubs;
    atomic_uint_fast64_t dropped;
    atomic_uint_fast64_t last_drop_log_us;
};

/* cn_key.c: keys and subjects */
size_t cn_key_encoded_len(const char *key, size_t klen, int as_prefix);
void cn_key_encode(const char *key, size_t klen, char *out, int as_prefix);
size_t cn_key_decode(const char *enc, size_t n, char *out);
int cn_subject_valid(const char *s, size_t n, int wildcards);
void cn_watch_filter(const char *enc_prefix, size_t n, char *out);

/* cn_kv.c: the ops as JetStream KV calls, on the KV thread */
void cn_kv_run(cn *c, cn_op *op);
/* After a reconnect the bucket's stream may be on a server that is gone: the
 * next op looks first, with a short wait, instead of waiting op_timeout_ms. */
void cn_kv_unverified(cn *c);
int cn_kv_bind(cn *c, int at_start);

/* cn_conn.c: the connection */
int cn_conn_open(cn *c);
void cn_conn_close(cn *c);
int cn_server_version(const char *url, int64_t timeout_ms, int v[3]);

/* cn_queue.c: the KV threads and each loop's order of answers */
int cn_queue_new(cn *c);
int cn_queue_start(cn *c);
int cn_queue_submit(cn *c, cn_op *op);
void cn_queue_stop(cn *c);
void cn_queue_free(cn *c);
void cn_op_free(cn *c, cn_op *op);
int cn_worker_ok(cn *c, mcpg_worker *w);
void cn_worker_stopped(cn *c, mcpg_worker *w);

/* cn_pubsub.c */
int cn_sub_open(cn *c, mcpg_worker *w, const char *subject, mcpg_coord_msg_cb cb, void *arg,
                mcpg_coord_sub **out);
void cn_sub_close(cn *c, mcpg_coord_sub *sub);
void cn_subs_close(cn *c);
void cn_subs_free(cn *c);

#endif
