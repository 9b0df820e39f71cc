/* coordinator_redis: the fleet coordinator on one Redis server
 * (cluster.kind redis), through hiredis 0.14.1 async on the gateway's loops.
 *
 * Each worker loop has its own connection (rd_link.c), so an op made on w's
 * loop is sent and answered there; worker 0 also holds the pub/sub
 * connection, whose messages go to the subscribers' loops through the same
 * registry coordinator_memory uses (coord_pubsub.c). No threads of its own.
 *
 * Every op is one round trip: HMGET for get, PUBLISH for publish, one Lua
 * script (rd_scripts.h) by EVALSHA for every write; scan_prefix is one
 * script per SCAN step. On NOSCRIPT (a SCRIPT FLUSH, a failover) the op is
 * sent once more as EVAL, which also loads the script again.
 *
 * Order: answers run in the order the loop made its ops. Redis answers one
 * connection in order; an op answered out of turn (at once, while
 * disconnected or past max_in_flight, or after a NOSCRIPT retry) keeps its
 * answer (copied) until the ops before it have run theirs. A scan answers
 * when its last step does, whatever came after it.
 *
 * Faults: while a loop's connection is not ready its ops answer
 * MCPG_EUNAVAIL at once (on a later turn, never inside the op); ops waiting
 * when it drops answer MCPG_EUNAVAIL, or MCPG_ETIMEDOUT when the drop was an
 * op past op_timeout_ms; the link reconnects with a doubling backoff. */
#define _GNU_SOURCE /* qsort_r */
#include <mcpg/sdk.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coordinator_memory/coord_pubsub.h"
#include "rd_internal.h"

#define RD_OP_INLINE 160 /* command and answer bytes a record holds without allocating */
#define RD_FREE_MAX 64   /* records kept per worker */

static const char rd_no_tls[] =
    "not available: hiredis 0.14.1, the version Debian 12 ships, has no TLS; reach Redis on "
    "loopback, a unix socket or a TLS tunnel (stunnel, spiped)";

static const mcpg_config_field rd_config[] = {
    MCPG_CFG_REQUIRED_STRING_FIELD(rd_cfg, url, "url",
                                   "redis://[:password@]IP[:PORT][/DB] or unix:///path[?db=N]; "
                                   "an IP, not a name (resolving would block the loop)"),
    MCPG_CFG_STRING_FIELD(rd_cfg, password, "password", NULL,
                          "AUTH password (prefer password_env: manifests are files)"),
    MCPG_CFG_STRING_FIELD(rd_cfg, password_env, "password_env", NULL,
                          "the environment variable holding the AUTH password"),
    MCPG_CFG_STRING_FIELD(rd_cfg, key_prefix, "key_prefix", "\"mcpg:\"",
                          "prepended to every Redis key and channel: fleets sharing a server "
                          "keep apart by it"),
    MCPG_CFG_JSON_FIELD(rd_cfg, tls, "tls", NULL, "refused: hiredis 0.14.1 has no TLS"),
    MCPG_CFG_INT_FIELD(rd_cfg, connect_timeout_ms, "connect_timeout_ms", "1000", 10, 600000,
                       "a connection (and its AUTH, SELECT, SCRIPT LOAD) must be ready within it"),
    MCPG_CFG_INT_FIELD(rd_cfg, op_timeout_ms, "op_timeout_ms", "2000", 10, 600000,
                       "an op unanswered this long drops its loop's connection: the ops "
                       "waiting answer MCPG_ETIMEDOUT, and it reconnects"),
    MCPG_CFG_INT_FIELD(rd_cfg, reconnect_min_ms, "reconnect_min_ms", "100", 1, 600000,
                       "first wait before reconnecting; doubles per failed attempt"),
    MCPG_CFG_INT_FIELD(rd_cfg, reconnect_max_ms, "reconnect_max_ms", "5000", 1, 3600000,
                       "longest wait between attempts"),
    MCPG_CFG_INT_FIELD(rd_cfg, max_in_flight, "max_in_flight", "4096", 1, 1000000,
                       "ops at Redis per loop at most; beyond it an op answers MCPG_EAGAIN"),
    MCPG_CFG_INT_FIELD(rd_cfg, scan_count, "scan_count", "1000", 10, 1000000,
                       "SCAN's COUNT: keys Redis looks at per scan_prefix step"),
    MCPG_CFG_INT_FIELD(rd_cfg, max_key_bytes, "max_key_bytes", "1024", 1, 65536,
                       "longest key or scan prefix; a longer one is refused (MCPG_ERANGE)"),
    MCPG_CFG_INT_FIELD(rd_cfg, max_value_bytes, "max_value_bytes", "1048576", 0, 536870912,
                       "longest value; a longer one is refused (MCPG_ERANGE)"),
    MCPG_CFG_INT_FIELD(rd_cfg, max_scan_keys, "max_scan_keys", "100000", 1, 100000000,
                       "keys one scan_prefix reports at most; past it the scan ends with "
                       "MCPG_ERANGE"),
    MCPG_CFG_INT_FIELD(rd_cfg, max_subscriptions, "max_subscriptions", "100000", 1, 100000000,
                       "live subscriptions in this gateway at most (subscribe: MCPG_EAGAIN)"),
    MCPG_CFG_INT_FIELD(rd_cfg, subscriber_backlog, "subscriber_backlog", "1024", 1, 1048576,
                       "messages queued per subscription; when full a message is dropped for "
                       "that subscription (counted, logged)"),
    MCPG_CFG_INT_FIELD(rd_cfg, max_message_bytes, "max_message_bytes", "1048576", 0, 536870912,
                       "largest published message (MCPG_ERANGE)"),
    MCPG_CONFIG_END};

typedef enum rd_kind { RD_K_GET, RD_K_PUBLISH, RD_K_SCRIPT, RD_K_SCAN } rd_kind;

typedef struct rd_scan_key {
    size_t off, len;
    uint64_t revision;
} rd_scan_key;

/* One op, from the op call to its callback. Owned by its worker. */
struct rd_op {
    rd_worker *wk;
    rd_op *prev, *next; /* the worker's ordered list, or its scans, or its free list */
    rd_kind kind;
    int script;
    int sent, done, retried;
    uint64_t sent_us;
    mcpg_coord_cb cb, each_cb;
    void *arg;
    int status;
    mcpg_coord_value held; /* an answer kept until its turn; data in buf */
    /* the command's arguments (a NOSCRIPT retry sends them again) */
    int argc;
    size_t off[8], len[8];
    char *buf;
    size_t cap, used;
    /* scan_prefix */
    char cursor[24];
    rd_scan_key *keys;
    size_t nkeys, keys_cap;
    char *names;
    size_t names_len, names_cap;
    char inline_buf[RD_OP_INLINE];
};

/* ---- records ------------------------------------------------------------------ */

static void op_free(rd_op *op) {
    const mcpg_host *h = op->wk->cr->h;
    if (op->buf != op->inline_buf) h->free(op->buf);
    h->free(op->keys);
    h->free(op->names);
    rd_worker *wk = op->wk;
    if (wk->nfree >= RD_FREE_MAX) {
        h->free(op);
        return;
    }
    op->next = wk->free;
    wk->free = op;
    wk->nfree++;
}

static rd_op *op_new(rd_worker *wk, rd_kind kind, mcpg_coord_cb cb, void *arg) {
    rd_op *op = wk->free;
    if (op) {
        wk->free = op->next;
        wk->nfree--;
    } else if (!(op = wk->cr->h->alloc(sizeof *op))) {
        return NULL;
    }
    memset(op, 0, offsetof(rd_op, inline_buf));
    op->wk = wk;
    op->kind = kind;
    op->cb = cb;
    op->arg = arg;
    op->buf = op->inline_buf;
    op->cap = RD_OP_INLINE;
    return op;
}

static int buf_room(rd_op *op, size_t extra) {
    if (op->used + extra <= op->cap) return 0;
    size_t cap = op->cap * 2 > op->used + extra ? op->cap * 2 : op->used + extra;
    const mcpg_host *h = op->wk->cr->h;
    char *nb = op->buf == op->inline_buf ? h->alloc(cap) : h->realloc(op->buf, cap);
    if (!nb) return MCPG_ENOMEM;
    if (op->buf == op->inline_buf) memcpy(nb, op->buf, op->used);
    op->buf = nb;
    op->cap = cap;
    return 0;
}

/* Appends one argument made of up to two pieces (a head and a tail). */
static int arg_add(rd_op *op, const char *a, size_t alen, const char *b, size_t blen) {
    if (op->argc >= 8 || buf_room(op, alen + blen)) return MCPG_ENOMEM;
    op->off[op->argc] = op->used;
    op->len[op->argc] = alen + blen;
    if (alen) memcpy(op->buf + op->used, a, alen);
    if (blen) memcpy(op->buf + op->used + alen, b, blen);
    op->used += alen + blen;
    op->argc++;
    return 0;
}

static int arg_num(rd_op *op, long long v) {
    char t[24];
    int n = snprintf(t, sizeof t, "%lld", v);
    return arg_add(op, t, (size_t)n, NULL, 0);
}

/* ---- answers, in the order the ops were made ------------------------------------- */

static void list_unlink(rd_op **head, rd_op **tail, rd_op *op) {
    if (op->prev) op->prev->next = op->next;
    else *head = op->next;
    if (op->next) op->next->prev = op->prev;
    else if (tail) *tail = op->prev;
    op->prev = op->next = NULL;
}

static void deliver(rd_op *op, int status, const mcpg_coord_value *v) {
    mcpg_coord_value none = {.size = sizeof none};
    op->cb(op->arg, status, v ? v : &none);
}

/* Ops at the head of the list that have their answer kept run it now. */
static void drain(rd_worker *wk) {
    while (wk->head && wk->head->done) {
        rd_op *op = wk->head;
        list_unlink(&wk->head, &wk->tail, op);
        deliver(op, op->status, &op->held);
        op_free(op);
    }
}

static void on_drain_post(void *arg) {
    rd_worker *wk = arg;
    wk->drain_posted = 0;
    if (!wk->stopping) drain(wk);
}

/* Keeps an answer whose turn has not come: its data copied into the record. */
static void hold(rd_op *op, int status, const mcpg_coord_value *v) {
    op->status = status;
    op->held = *v;
    op->held.size = sizeof op->held;
    op->held.data = NULL;
    if (v->data) {
        op->used = 0;
        if (buf_room(op, v->len + 1)) {
            op->status = MCPG_ENOMEM;
            op->held = (mcpg_coord_value){.size = sizeof op->held};
        } else {
            memcpy(op->buf, v->data, v->len);
            op->buf[v->len] = '\0';
            op->held.data = op->buf;
        }
    }
    op->done = 1;
}

/* An answer from Redis (or a NULL reply): run now when it is this op's turn. */
static void complete(rd_op *op, int status, const mcpg_coord_value *v) {
    rd_worker *wk = op->wk;
    if (op->sent) wk->sent--;
    op->sent = 0;
    if (wk->stopping) { /* the loop ends: as coordinator_memory, no callback runs then */
        list_unlink(&wk->head, &wk->tail, op);
        op_free(op);
        return;
    }
    if (wk->head != op) {
        hold(op, status, v);
        return;
    }
    list_unlink(&wk->head, &wk->tail, op);
    deliver(op, status, v);
    op_free(op);
    drain(wk);
}

/* An op answered without Redis: kept, and run from a post (never inside
 * the op). MCPG_ESTATE when the loop no longer takes posts. */
static int answer_later(rd_worker *wk, rd_op *op, int status) {
    if (!wk->drain_posted) {
        wk->drain = (mcpg_post){.fn = on_drain_post, .arg = wk};
        if (wk->cr->h->worker_post(wk->w, &wk->drain) != 0) return MCPG_ESTATE;
        wk->drain_posted = 1;
    }
    mcpg_coord_value none = {.size = sizeof none};
    hold(op, status, &none);
    return 0;
}

/* ---- replies ----------------------------------------------------------------------- */

static int parse_i64(const char *s, size_t n, int64_t *out) {
    char t[24];
    if (!s || n == 0 || n >= sizeof t) return 0;
    memcpy(t, s, n);
    t[n] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (errno || *end || !(t[0] == '-' || (t[0] >= '0' && t[0] <= '9'))) return 0;
    *out = v;
    return 1;
}

static uint64_t rev_of(const redisReply *r) {
    int64_t v = 0;
    if (r && r->type == REDIS_REPLY_INTEGER) return (uint64_t)r->integer;
    if (r && r->type == REDIS_REPLY_STRING) parse_i64(r->str, r->len, &v);
    return (uint64_t)v;
}

static int64_t int_of(const redisReply *r) {
    int64_t v = 0;
    if (r && r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r && r->type == REDIS_REPLY_STRING) parse_i64(r->str, r->len, &v);
    return v;
}

static int has_text(const redisReply *r) { return r && r->type == REDIS_REPLY_STRING; }

static int error_status(const redisReply *r) {
    const char *s = r->str ? r->str : "";
    if (strstr(s, "overflow")) return MCPG_ERANGE;
    if (strstr(s, "not an integer") || strncmp(s, "WRONGTYPE", 9) == 0) return MCPG_EINVAL;
    if (strncmp(s, "OOM", 3) == 0) return MCPG_EAGAIN; /* maxmemory: the store is full */
    return MCPG_EUNAVAIL;
}

/* A value answer from an array {flag, value, revision}: the store's current
 * value on EEXIST / ECONFLICT. */
static void current_value(const redisReply *r, size_t at, mcpg_coord_value *v) {
    if (r->elements > at + 1 && has_text(r->element[at])) {
        v->data = r->element[at]->str;
        v->len = r->element[at]->len;
        v->revision = rev_of(r->element[at + 1]);
    }
}

/* What a script's reply says, by the op it answers. */
static int script_answer(const rd_op *op, const redisReply *r, mcpg_coord_value *v,
                         char *num, size_t num_cap) {
    int arr = r->type == REDIS_REPLY_ARRAY && r->elements >= 1;
    int64_t flag = arr ? int_of(r->element[0]) : 0;
    switch (op->script) {
    case RD_S_PUT:
        v->revision = rev_of(r);
        return 0;
    case RD_S_DEL:
        if (r->type == REDIS_REPLY_NIL) return MCPG_ENOENT;
        v->revision = rev_of(r);
        return 0;
    case RD_S_PUT_IF_ABSENT:
    case RD_S_CAS:
        if (!arr) return MCPG_EPROTO;
        if (flag == 1) {
            v->revision = r->elements > 1 ? rev_of(r->element[1]) : 0;
            return 0;
        }
        current_value(r, 1, v);
        return op->script == RD_S_CAS ? MCPG_ECONFLICT : MCPG_EEXIST;
    case RD_S_INCR:
        if (!arr || r->elements < 2 || !parse_i64(r->element[0]->str, r->element[0]->len,
                                                  &v->number))
            return MCPG_EPROTO;
        v->revision = rev_of(r->element[1]);
        v->len = (size_t)snprintf(num, num_cap, "%lld", (long long)v->number);
        v->data = num;
        return 0;
    case RD_S_RATE:
        if (!arr || r->elements < 2) return MCPG_EPROTO;
        v->number = int_of(r->element[1]);
        if (flag != 1) return MCPG_EAGAIN;
        v->revision = r->elements > 2 ? rev_of(r->element[2]) : 0;
        return 0;
    default:
        return MCPG_EPROTO;
    }
}

static int send_op(rd_op *op);
static void scan_step_reply(rd_op *op, const redisReply *r);

static int is_noscript(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv) {
    rd_op *op = priv;
    redisReply *r = reply;
    rd_worker *wk = op->wk;
    (void)ac;
    if (r && is_noscript(r) && !op->retried && !wk->stopping) {
        /* the server forgot the script: EVAL once (loading it again) */
        op->retried = 1;
        atomic_fetch_add(&wk->cr->noscript, 1);
        wk->sent--;
        op->sent = 0;
        if (send_op(op) == 0) return;
        r = NULL;
    }
    if (op->kind == RD_K_SCAN) {
        scan_step_reply(op, r);
        return;
    }
    mcpg_coord_value v = {.size = sizeof v};
    char num[24];
    int status;
    if (!r) {
        status = wk->data.timed_out ? MCPG_ETIMEDOUT : MCPG_EUNAVAIL;
    } else if (r->type == REDIS_REPLY_ERROR) {
        status = error_status(r);
    } else if (op->kind == RD_K_PUBLISH) {
        v.number = int_of(r);
        status = 0;
    } else if (op->kind == RD_K_GET) {
        int found = r->type == REDIS_REPLY_ARRAY && r->elements == 2 && has_text(r->element[1]);
        status = found ? 0 : MCPG_ENOENT;
        if (found && has_text(r->element[0])) {
            v.data = r->element[0]->str;
            v.len = r->element[0]->len;
            if (!parse_i64(v.data, v.len, &v.number)) v.number = 0;
        } else if (found) {
            v.data = "";
        }
        if (found) v.revision = rev_of(r->element[1]);
    } else {
        status = script_answer(op, r, &v, num, sizeof num);
    }
    complete(op, status, &v);
}

/* ---- sending ------------------------------------------------------------------------ */

static int send_op(rd_op *op) {
    rd_worker *wk = op->wk;
    coordredis *cr = wk->cr;
    const char *argv[11];
    size_t lens[11];
    int n = 0;
    if (op->kind == RD_K_SCRIPT || op->kind == RD_K_SCAN) {
        const char *sha = wk->data.sha[op->script];
        int by_text = op->retried || !sha[0];
        argv[n] = by_text ? "EVAL" : "EVALSHA";
        lens[n++] = by_text ? 4 : 7;
        argv[n] = by_text ? rd_scripts[op->script] : sha;
        lens[n++] = by_text ? strlen(rd_scripts[op->script]) : 40;
        int keys = op->kind == RD_K_SCAN ? 0 : 2;
        argv[n] = keys ? "2" : "0";
        lens[n++] = 1;
        if (keys) {
            argv[n] = op->buf + op->off[0];
            lens[n++] = op->len[0];
            argv[n] = cr->rev_key;
            lens[n++] = cr->rev_len;
        }
        for (int i = keys ? 1 : 0; i < op->argc; i++) {
            argv[n] = op->buf + op->off[i];
            lens[n++] = op->len[i];
        }
    } else {
        argv[n] = op->kind == RD_K_GET ? "HMGET" : "PUBLISH";
        lens[n] = strlen(argv[n]);
        n++;
        for (int i = 0; i < op->argc; i++) {
            argv[n] = op->buf + op->off[i];
            lens[n++] = op->len[i];
        }
        if (op->kind == RD_K_GET) {
            argv[n] = "v", lens[n++] = 1;
            argv[n] = "r", lens[n++] = 1;
        }
    }
    if (rd_link_send(&wk->data, on_reply, op, n, argv, lens) != 0) return MCPG_EUNAVAIL;
    op->sent = 1;
    op->sent_us = cr->h->mono_us();
    wk->sent++;
    return 0;
}

/* The worker of the calling loop, when it is w's. */
static rd_worker *worker_for(coordredis *cr, mcpg_worker *w) {
    const mcpg_host *h = cr->h;
    if (!w || h->worker_current() != w) return NULL;
    uint32_t i = h->worker_index(w);
    if (i >= cr->nworkers || cr->workers[i].stopping) return NULL;
    return &cr->workers[i];
}

/* The op is built: send it, or answer it at once (MCPG_EUNAVAIL while the
 * connection is not ready, MCPG_EAGAIN past max_in_flight). */
static int submit(rd_worker *wk, rd_op *op) {
    int ordered = op->kind != RD_K_SCAN;
    int rc = wk->sent >= (size_t)wk->cr->cfg->max_in_flight ? MCPG_EAGAIN : send_op(op);
    if (rc == 0 && !ordered) {
        op->next = wk->scans;
        if (wk->scans) wk->scans->prev = op;
        wk->scans = op;
        return 0;
    }
    if (rc && (rc = answer_later(wk, op, rc)) != 0) { /* the loop is stopping */
        op_free(op);
        return rc;
    }
    op->prev = wk->tail;
    if (wk->tail) wk->tail->next = op;
    else wk->head = op;
    wk->tail = op;
    return 0;
}

/* ---- argument checks ----------------------------------------------------------------- */

static int key_ok(const coordredis *cr, const char *key, size_t klen) {
    if (!key || klen == 0) return MCPG_EINVAL;
    return klen > (size_t)cr->cfg->max_key_bytes ? MCPG_ERANGE : 0;
}

static int value_ok(const coordredis *cr, const char *val, size_t vlen) {
    if (!val && vlen) return MCPG_EINVAL;
    return vlen > (size_t)cr->cfg->max_value_bytes ? MCPG_ERANGE : 0;
}

/* A record for a key op on w: the Redis key is its first argument. */
static int begin_key_op(coordredis *cr, mcpg_worker *w, rd_kind kind, int script,
                        const char *key, size_t klen, mcpg_coord_cb cb, void *arg,
                        rd_worker **wk_out, rd_op **op_out) {
    int rc = cb ? key_ok(cr, key, klen) : MCPG_EINVAL;
    if (rc) return rc;
    rd_worker *wk = worker_for(cr, w);
    if (!wk) return MCPG_ESTATE;
    rd_op *op = op_new(wk, kind, cb, arg);
    if (!op) return MCPG_ENOMEM;
    op->script = script;
    if (arg_add(op, cr->key_head, cr->key_head_len, key, klen)) {
        op_free(op);
        return MCPG_ENOMEM;
    }
    *wk_out = wk;
    *op_out = op;
    return 0;
}

static int finish_build(rd_worker *wk, rd_op *op, int rc) {
    if (rc) {
        op_free(op);
        return rc;
    }
    return submit(wk, op);
}

/* ---- key-value ops --------------------------------------------------------------------- */

static int rd_get(void *instance, mcpg_worker *w, const char *key, size_t klen, mcpg_coord_cb cb,
                  void *arg) {
    rd_worker *wk;
    rd_op *op;
    int rc = begin_key_op(instance, w, RD_K_GET, 0, key, klen, cb, arg, &wk, &op);
    return rc ? rc : submit(wk, op);
}

static int rd_write(coordredis *cr, int script, mcpg_worker *w, const char *key, size_t klen,
                    uint64_t expected, const char *val, size_t vlen, uint64_t ttl_ms,
                    mcpg_coord_cb cb, void *arg) {
    rd_worker *wk;
    rd_op *op;
    int rc = value_ok(cr, val, vlen);
    if (rc || (rc = begin_key_op(cr, w, RD_K_SCRIPT, script, key, klen, cb, arg, &wk, &op)))
        return rc;
    rc = arg_add(op, val, vlen, NULL, 0);
    if (!rc) rc = arg_num(op, (long long)ttl_ms);
    if (!rc && script == RD_S_CAS) rc = arg_num(op, (long long)expected);
    return finish_build(wk, op, rc);
}

static int rd_put(void *instance, mcpg_worker *w, const char *key, size_t klen, const char *val,
                  size_t vlen, uint64_t ttl_ms, mcpg_coord_cb cb, void *arg) {
    return rd_write(instance, RD_S_PUT, w, key, klen, 0, val, vlen, ttl_ms, cb, arg);
}

static int rd_put_if_absent(void *instance, mcpg_worker *w, const char *key, size_t klen,
                            const char *val, size_t vlen, uint64_t ttl_ms, mcpg_coord_cb cb,
                            void *arg) {
    return rd_write(instance, RD_S_PUT_IF_ABSENT, w, key, klen, 0, val, vlen, ttl_ms, cb, arg);
}

static int rd_cas(void *instance, mcpg_worker *w, const char *key, size_t klen,
                  uint64_t expected_revision, const char *val, size_t vlen, uint64_t ttl_ms,
                  mcpg_coord_cb cb, void *arg) {
    return rd_write(instance, RD_S_CAS, w, key, klen, expected_revision, val, vlen, ttl_ms, cb,
                    arg);
}

static int rd_incr(void *instance, mcpg_worker *w, const char *key, size_t klen, int64_t delta,
                   uint64_t ttl_ms, mcpg_coord_cb cb, void *arg) {
    rd_worker *wk;
    rd_op *op;
    int rc = begin_key_op(instance, w, RD_K_SCRIPT, RD_S_INCR, key, klen, cb, arg, &wk, &op);
    if (rc) return rc;
    rc = arg_num(op, (long long)delta);
    if (!rc) rc = arg_num(op, (long long)ttl_ms);
    return finish_build(wk, op, rc);
}

static int rd_rate_take(void *instance, mcpg_worker *w, const char *key, size_t klen,
                        int64_t caller_now_us, int64_t interval_us, int64_t burst_us,
                        mcpg_coord_cb cb, void *arg) {
    rd_worker *wk;
    rd_op *op;
    if (interval_us < 1 || burst_us < 1) return MCPG_EINVAL;
    int rc = begin_key_op(instance, w, RD_K_SCRIPT, RD_S_RATE, key, klen, cb, arg, &wk, &op);
    if (rc) return rc;
    rc = arg_num(op, (long long)caller_now_us);
    if (!rc) rc = arg_num(op, (long long)interval_us);
    if (!rc) rc = arg_num(op, (long long)burst_us);
    return finish_build(wk, op, rc);
}

static int rd_del(void *instance, mcpg_worker *w, const char *key, size_t klen, mcpg_coord_cb cb,
                  void *arg) {
    rd_worker *wk;
    rd_op *op;
    int rc = begin_key_op(instance, w, RD_K_SCRIPT, RD_S_DEL, key, klen, cb, arg, &wk, &op);
    return rc ? rc : submit(wk, op);
}

/* ---- scan_prefix ------------------------------------------------------------------------- */

static void scan_unlink(rd_op *op) { list_unlink(&op->wk->scans, NULL, op); }

static int key_cmp(const void *a, const void *b, void *names) {
    const rd_scan_key *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp((char *)names + x->off, (char *)names + y->off, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Sorted bytewise, each key once (SCAN may return a key twice). */
static void scan_report(rd_op *op) {
    if (op->nkeys > 1) qsort_r(op->keys, op->nkeys, sizeof *op->keys, key_cmp, op->names);
    size_t reported = 0;
    for (size_t i = 0; i < op->nkeys; i++) {
        if (i && key_cmp(&op->keys[i - 1], &op->keys[i], op->names) == 0) continue;
        mcpg_coord_value v = {.size = sizeof v, .data = op->names + op->keys[i].off,
                              .len = op->keys[i].len, .revision = op->keys[i].revision};
        op->each_cb(op->arg, 0, &v);
        reported++;
    }
    mcpg_coord_value done = {.size = sizeof done, .number = (int64_t)reported};
    op->cb(op->arg, 0, &done);
}

static void scan_finish(rd_op *op, int status) {
    rd_worker *wk = op->wk;
    scan_unlink(op);
    if (!wk->stopping) {
        if (status == 0) scan_report(op);
        else deliver(op, status, NULL);
    }
    op_free(op);
}

static int scan_keep(rd_op *op, const redisReply *k, const redisReply *rev) {
    coordredis *cr = op->wk->cr;
    const mcpg_host *h = cr->h;
    if (!has_text(k) || k->len < cr->key_head_len) return 0;
    size_t len = k->len - cr->key_head_len;
    if (op->nkeys == op->keys_cap) {
        size_t cap = op->keys_cap ? op->keys_cap * 2 : 64;
        rd_scan_key *nk = h->realloc(op->keys, cap * sizeof *nk);
        if (!nk) return MCPG_ENOMEM;
        op->keys = nk;
        op->keys_cap = cap;
    }
    if (op->names_len + len + 1 > op->names_cap) {
        size_t cap = op->names_cap ? op->names_cap * 2 : 4096;
        while (cap < op->names_len + len + 1) cap *= 2;
        char *nn = h->realloc(op->names, cap);
        if (!nn) return MCPG_ENOMEM;
        op->names = nn;
        op->names_cap = cap;
    }
    memcpy(op->names + op->names_len, k->str + cr->key_head_len, len);
    op->names[op->names_len + len] = '\0';
    op->keys[op->nkeys++] = (rd_scan_key){op->names_len, len, rev_of(rev)};
    op->names_len += len + 1;
    return 0;
}

static void scan_step_reply(rd_op *op, const redisReply *r) {
    rd_worker *wk = op->wk;
    if (op->sent) wk->sent--;
    op->sent = 0;
    if (!r) return scan_finish(op, wk->data.timed_out ? MCPG_ETIMEDOUT : MCPG_EUNAVAIL);
    if (r->type == REDIS_REPLY_ERROR) return scan_finish(op, error_status(r));
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !has_text(r->element[0]))
        return scan_finish(op, MCPG_EPROTO);
    for (size_t i = 1; i + 1 < r->elements; i += 2) {
        int rc = scan_keep(op, r->element[i], r->element[i + 1]);
        if (rc) return scan_finish(op, rc);
    }
    /* duplicates count here: a bound a little early beats memory without one */
    if (op->nkeys > (size_t)wk->cr->cfg->max_scan_keys) return scan_finish(op, MCPG_ERANGE);
    const redisReply *cur = r->element[0];
    if (cur->len == 1 && cur->str[0] == '0') return scan_finish(op, 0);
    if (cur->len >= sizeof op->cursor || wk->stopping) return scan_finish(op, MCPG_EPROTO);
    memcpy(op->buf + op->off[0], cur->str, cur->len);
    op->len[0] = cur->len;
    if (send_op(op) != 0) scan_finish(op, MCPG_EUNAVAIL);
}

/* SCAN's MATCH pattern for keys starting with prefix: glob characters in
 * the prefix escaped. */
static int scan_pattern(rd_op *op, const coordredis *cr, const char *prefix, size_t plen) {
    if (buf_room(op, cr->key_head_len + 2 * plen + 1)) return MCPG_ENOMEM;
    op->off[1] = op->used;
    char *p = op->buf + op->used;
    for (size_t i = 0; i < cr->key_head_len + plen; i++) {
        char c = i < cr->key_head_len ? cr->key_head[i] : prefix[i - cr->key_head_len];
        if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') *p++ = '\\';
        *p++ = c;
    }
    *p++ = '*';
    op->len[1] = (size_t)(p - (op->buf + op->used));
    op->used += op->len[1];
    return 0;
}

static int rd_scan_prefix(void *instance, mcpg_worker *w, const char *prefix, size_t plen,
                          mcpg_coord_cb each_cb, mcpg_coord_cb cb, void *arg) {
    coordredis *cr = instance;
    if (!each_cb || !cb || (!prefix && plen)) return MCPG_EINVAL;
    if (plen > (size_t)cr->cfg->max_key_bytes) return MCPG_ERANGE;
    rd_worker *wk = worker_for(cr, w);
    if (!wk) return MCPG_ESTATE;
    rd_op *op = op_new(wk, RD_K_SCAN, cb, arg);
    if (!op) return MCPG_ENOMEM;
    op->each_cb = each_cb;
    op->script = RD_S_SCAN;
    /* argument 0 is the cursor, rewritten in place at each step */
    int rc = arg_add(op, "0", 1, NULL, 0);
    if (!rc && !(rc = buf_room(op, sizeof op->cursor))) op->used += sizeof op->cursor;
    if (!rc) {
        op->argc = 1;
        rc = scan_pattern(op, cr, prefix, plen);
    }
    if (!rc) {
        op->argc = 2;
        rc = arg_num(op, (long long)cr->cfg->scan_count);
    }
    return finish_build(wk, op, rc);
}

/* ---- pub/sub ------------------------------------------------------------------------------ */

static int rd_publish(void *instance, mcpg_worker *w, const char *subject, const char *data,
                      size_t len, mcpg_coord_cb cb, void *arg) {
    coordredis *cr = instance;
    size_t slen = subject ? strnlen(subject, CM_SUBJECT_MAX + 1) : 0;
    if (!cb || !cm_subject_valid(subject, slen, 0) || (!data && len)) return MCPG_EINVAL;
    if (len > (size_t)cr->cfg->max_message_bytes) return MCPG_ERANGE;
    rd_worker *wk = worker_for(cr, w);
    if (!wk) return MCPG_ESTATE;
    rd_op *op = op_new(wk, RD_K_PUBLISH, cb, arg);
    if (!op) return MCPG_ENOMEM;
    int rc = arg_add(op, cr->msg_head, cr->msg_head_len, subject, slen);
    if (!rc) rc = arg_add(op, data, len, NULL, 0);
    return finish_build(wk, op, rc);
}

void rd_message_in(coordredis *cr, const char *channel, size_t clen, const char *data,
                   size_t dlen) {
    if (clen <= cr->msg_head_len || memcmp(channel, cr->msg_head, cr->msg_head_len) != 0) return;
    const char *subject = channel + cr->msg_head_len;
    size_t slen = clen - cr->msg_head_len;
    if (slen > CM_SUBJECT_MAX || !cm_subject_valid(subject, slen, 0)) return;
    atomic_fetch_add(&cr->messages_in, 1);
    size_t reached;
    if (cm_publish(cr->ps, subject, slen, data, dlen, &reached) != 0)
        cr->h->log(cr->self, MCPG_LOG_WARN, "out of memory: a message for %.*s dropped",
                   (int)slen, subject);
}

static int rd_subscribe(void *instance, mcpg_worker *w, const char *subject, mcpg_coord_msg_cb cb,
                        void *arg, mcpg_coord_sub **sub_out) {
    coordredis *cr = instance;
    size_t slen = subject ? strnlen(subject, CM_SUBJECT_MAX + 1) : 0;
    if (!cb || !sub_out || !cm_subject_valid(subject, slen, 1)) return MCPG_EINVAL;
    if (!worker_for(cr, w)) return MCPG_ESTATE;
    cm_sub *sub;
    int rc = cm_subscribe(cr->ps, w, subject, slen, cb, arg, &sub);
    if (rc == 0) *sub_out = (mcpg_coord_sub *)sub;
    return rc;
}

static void rd_unsubscribe(void *instance, mcpg_coord_sub *sub) {
    coordredis *cr = instance;
    if (sub) cm_unsubscribe(cr->ps, (cm_sub *)sub);
}

/* ---- the tick: deadlines and reconnects ----------------------------------------------------- */

static int op_overdue(const rd_op *op, uint64_t now, uint64_t limit_us) {
    return op && op->sent && now - op->sent_us > limit_us;
}

static void on_tick(void *arg) {
    rd_worker *wk = arg;
    coordredis *cr = wk->cr;
    uint64_t now = cr->h->mono_us(), limit = (uint64_t)cr->cfg->op_timeout_ms * 1000;
    /* the oldest sent ordered op is the first sent one in the list */
    const rd_op *oldest = wk->head;
    while (oldest && !oldest->sent) oldest = oldest->next;
    int overdue = op_overdue(oldest, now, limit);
    for (const rd_op *s = wk->scans; s && !overdue; s = s->next) overdue = op_overdue(s, now, limit);
    if (overdue && wk->data.state == RD_READY) {
        cr->h->log(cr->self, MCPG_LOG_WARN, "worker %u: an op unanswered for %lld ms: dropping "
                   "the connection", wk->index, (long long)cr->cfg->op_timeout_ms);
        rd_link_drop(&wk->data, 1);
    }
    rd_link_tick(&wk->data, now);
    if (wk->index == 0) rd_link_tick(&wk->pubsub, now);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

/* The AUTH password from its one source; with rep (validate), each problem
 * reported and counted in *bad. */
static const char *password_of(const mcpg_host *h, const rd_cfg *c, const rd_url *u,
                               mcpg_report *rep, int *bad) {
    int sources = (c->password != NULL) + (c->password_env != NULL) + (u->password[0] != 0);
    if (sources > 1 && rep) {
        h->report_error(rep, "password", "give the password once: in url, password or "
                        "password_env");
        (*bad)++;
    }
    if (c->password_env) {
        const char *v = getenv(c->password_env);
        if (!v && rep) {
            h->report_error(rep, "password_env", "the variable %s is not set", c->password_env);
            (*bad)++;
        }
        return v ? v : "";
    }
    return c->password ? c->password : u->password;
}

static int rd_validate(const mcpg_host *h, const void *config, mcpg_report *rep) {
    const rd_cfg *c = config;
    int bad = 0;
    rd_url u;
    char why[256];
    if (rd_url_parse(c->url, &u, why, sizeof why) != 0) {
        h->report_error(rep, "url", "%s", why);
        bad = 1;
    }
    if (c->tls) {
        h->report_error(rep, "tls", "%s", rd_no_tls);
        bad = 1;
    }
    if (c->reconnect_min_ms > c->reconnect_max_ms) {
        h->report_error(rep, "reconnect_min_ms", "is above reconnect_max_ms");
        bad = 1;
    }
    const char *pw = password_of(h, c, &u, rep, &bad);
    if (pw && strlen(pw) >= RD_SECRET_MAX) {
        h->report_error(rep, "password", "is longer than %d bytes", RD_SECRET_MAX - 1);
        bad = 1;
    }
    return bad ? MCPG_ECONFIG : 0;
}

static char *join(const mcpg_host *h, const char *a, const char *b, size_t *len) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = h->alloc(la + lb + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    if (len) *len = la + lb;
    return s;
}

/* <prefix>m:* with glob characters of the prefix escaped. */
static char *message_pattern(const mcpg_host *h, const char *head) {
    size_t n = strlen(head);
    char *s = h->alloc(2 * n + 2);
    if (!s) return NULL;
    char *p = s;
    for (size_t i = 0; i < n; i++) {
        if (strchr("*?[]\\", head[i])) *p++ = '\\';
        *p++ = head[i];
    }
    *p++ = '*';
    *p = '\0';
    return s;
}

static void rd_destroy(void *instance);

static int rd_create(const mcpg_host *h, mcpg_instance *self, const void *config,
                     void **instance_out) {
    const rd_cfg *cfg = config;
    coordredis *cr = h->calloc(1, sizeof *cr);
    if (!cr) return MCPG_ENOMEM;
    cr->h = h;
    cr->self = self;
    cr->cfg = cfg;
    char why[256];
    if (rd_url_parse(cfg->url, &cr->url, why, sizeof why) != 0) {
        h->log(self, MCPG_LOG_ERROR, "url: %s", why);
        h->free(cr);
        return MCPG_ECONFIG;
    }
    snprintf(cr->password, sizeof cr->password, "%s", password_of(h, cfg, &cr->url, NULL, NULL));
    const char *prefix = cfg->key_prefix ? cfg->key_prefix : "";
    cr->rev_key = join(h, prefix, "rev", &cr->rev_len);
    cr->key_head = join(h, prefix, "k:", &cr->key_head_len);
    cr->msg_head = join(h, prefix, "m:", &cr->msg_head_len);
    cr->msg_pattern = cr->msg_head ? message_pattern(h, cr->msg_head) : NULL;
    /* --check builds instances before any loop exists: then there are none */
    cr->nworkers = h->worker_count();
    cr->workers = cr->nworkers ? h->calloc(cr->nworkers, sizeof *cr->workers) : NULL;
    cr->ps = cm_pubsub_new(h, self, (size_t)cfg->max_subscriptions,
                           (size_t)cfg->subscriber_backlog, (uint64_t)h->mono_us());
    if (!cr->rev_key || !cr->key_head || !cr->msg_head || !cr->msg_pattern || !cr->ps ||
        (cr->nworkers && !cr->workers)) {
        rd_destroy(cr);
        return MCPG_ENOMEM;
    }
    for (uint32_t i = 0; i < cr->nworkers; i++) {
        rd_worker *wk = &cr->workers[i];
        *wk = (rd_worker){.cr = cr, .w = h->worker_at(i), .index = i};
        rd_link_init(&wk->data, wk, RD_LINK_DATA);
        rd_link_init(&wk->pubsub, wk, RD_LINK_PUBSUB);
    }
    *instance_out = cr;
    return 0;
}

static void rd_worker_start(void *instance, mcpg_worker *w) {
    coordredis *cr = instance;
    uint32_t i = cr->h->worker_index(w);
    if (i >= cr->nworkers) return;
    rd_worker *wk = &cr->workers[i];
    uint64_t every = rd_tick_ms(cr->cfg);
    int rc = cr->h->timer_start(cr->self, w, every, every, on_tick, wk, &wk->tick);
    if (rc)
        cr->h->log(cr->self, MCPG_LOG_ERROR, "worker %u: no timer (%s): no reconnects, no op "
                   "deadlines", i, cr->h->strerror(rc));
    rd_link_connect(&wk->data);
    if (i == 0) rd_link_connect(&wk->pubsub);
}

/* The loop ends: its connections close, and the ops still waiting are freed
 * without their callbacks (the modules that made them are stopping too). */
static void rd_worker_stop(void *instance, mcpg_worker *w) {
    coordredis *cr = instance;
    uint32_t i = cr->h->worker_index(w);
    if (i >= cr->nworkers) return;
    rd_worker *wk = &cr->workers[i];
    wk->stopping = 1;
    if (wk->tick) cr->h->timer_stop(wk->tick);
    wk->tick = NULL;
    rd_link_drop(&wk->data, 0);
    rd_link_drop(&wk->pubsub, 0);
    while (wk->head) {
        rd_op *op = wk->head;
        list_unlink(&wk->head, &wk->tail, op);
        op_free(op);
    }
}

static void rd_stop(void *instance) {
    coordredis *cr = instance;
    cr->h->log(cr->self, MCPG_LOG_INFO,
               "stopped: %lu connections dropped, %lu NOSCRIPT retries, %lu messages in, "
               "%llu messages dropped", atomic_load(&cr->drops), atomic_load(&cr->noscript),
               atomic_load(&cr->messages_in), (unsigned long long)cm_pubsub_dropped(cr->ps));
}

static void worker_free(const mcpg_host *h, rd_worker *wk) {
    while (wk->free) {
        rd_op *op = wk->free;
        wk->free = op->next;
        h->free(op);
    }
}

static void rd_destroy(void *instance) {
    coordredis *cr = instance;
    const mcpg_host *h = cr->h;
    for (uint32_t i = 0; cr->workers && i < cr->nworkers; i++) worker_free(h, &cr->workers[i]);
    h->free(cr->workers);
    if (cr->ps) cm_pubsub_free(cr->ps);
    h->free(cr->rev_key);
    h->free(cr->key_head);
    h->free(cr->msg_head);
    h->free(cr->msg_pattern);
    h->free(cr);
}

static const mcpg_lifecycle_ops rd_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = rd_validate,
    .create = rd_create,
    .stop = rd_stop,
    .destroy = rd_destroy,
    .worker_start = rd_worker_start,
    .worker_stop = rd_worker_stop,
};

static const mcpg_coordinator_ops rd_ops = {
    MCPG_OPS_HEAD(mcpg_coordinator_ops),
    .get = rd_get,
    .put = rd_put,
    .incr = rd_incr,
    .rate_take = rd_rate_take,
    .put_if_absent = rd_put_if_absent,
    .compare_and_set = rd_cas,
    .del = rd_del,
    .scan_prefix = rd_scan_prefix,
    .publish = rd_publish,
    .subscribe = rd_subscribe,
    .unsubscribe = rd_unsubscribe,
};

MCPG_MODULE_DEFINE(MCPG_KIND_COORDINATOR, "coordinator_redis", "1.0.0",
                   .description = "the fleet coordinator on Redis (cluster.kind redis): keys, "
                                  "TTLs, counters, rates and pub/sub shared by every gateway",
                   .config = rd_config, .config_size = sizeof(rd_cfg),
                   .lifecycle = &rd_lifecycle, .ops = &rd_ops);
