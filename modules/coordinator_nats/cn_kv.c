/* coordinator_nats: each op as JetStream KV calls, on the instance's KV
 * thread (every call here blocks for its round trip).
 *
 * A stored value is 16 hex digits of its expiry (wall-clock ms, 0 = none)
 * and then the caller's bytes: nats-server 2.9 has no per-key TTL, so a key
 * past its expiry is absent to every op here, and bucket MaxAge (max_age_ms)
 * only bounds how long dead keys occupy the bucket. Revisions are the
 * stream's sequence numbers: they increase across delete and re-create.
 *
 * Round trips: get 1; put 1; put_if_absent 1 (2-3 when the key exists or
 * has expired: a read, then an update on the dead entry's revision, so two
 * takers of one expired key cannot both win); compare_and_set 2 (a read for
 * the expiry, then the update on the expected revision); del 2 (a read for
 * the revision the ABI answers with, then the delete marker); incr and
 * rate_take 2 per round of a compare-and-set loop (at most CN_RETRIES rounds,
 * then MCPG_ECONFLICT); scan 1 watch (its initial values); publish none
 * (buffered, sent by nats.c's flusher). */
#define _GNU_SOURCE /* qsort_r */
#include "cn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cn_entry {
    kvEntry *e;          /* NULL: absent */
    uint64_t revision;
    uint64_t expiry_ms;  /* 0: none */
    const char *data;    /* the caller's bytes */
    size_t len;
    int expired;
} cn_entry;

static int64_t wall_ms(cn *c) { return c->h->wall_us() / 1000; }

static uint64_t expiry_of(cn *c, uint64_t ttl_ms) {
    return ttl_ms ? (uint64_t)wall_ms(c) + ttl_ms : 0;
}

/* ---- nats.c answers as coordinator statuses ------------------------------------ */

static int last_error_has(const char *needle) {
    const char *t = nats_GetLastError(NULL);
    return t && strstr(t, needle);
}

static int is_conflict(natsStatus s) {
    return s != NATS_OK && last_error_has("wrong last sequence");
}

static int connected(cn *c) {
    return atomic_load(&c->connected) && natsConnection_Status(c->nc) == NATS_CONN_STATUS_CONNECTED;
}

/* ---- the bucket unanswered while the connection is up ----------------------------
 * On a cluster an R1 bucket's stream lives on one server. With that server
 * gone the connection fails over to another and stays up, but the stream is
 * offline: a write finds no responders at once, while a read, a bind or a
 * watch is forwarded to a stream leader that does not exist and waits the
 * whole op_timeout_ms. Every session and limit op would then hold a KV thread
 * for op_timeout_ms and the queue behind it would time out too: global
 * limits and new sessions answered after seconds instead of at once.
 * So a timeout or "no responders" on an up connection marks the bucket down:
 * ops answer MCPG_EUNAVAIL at once (as when the connection is down), and
 * every CN_PROBE_EVERY_MS one KV thread asks for the stream's info with a
 * short wait; once it answers, ops run again. */

static void bucket_lost(cn *c) {
    atomic_store(&c->next_probe_us, c->h->mono_us() + CN_PROBE_EVERY_MS * 1000ull);
    if (atomic_exchange(&c->bucket_down, CN_BUCKET_DOWN) != CN_BUCKET_DOWN)
        c->h->log(c->self, MCPG_LOG_WARN,
                  "bucket \"%s\" does not answer though the connection is up (the server "
                  "holding its stream down?): ops answer unavailable at once, looked at "
                  "again every %d ms", c->cfg->bucket, CN_PROBE_EVERY_MS);
}

/* A reconnect may have followed the loss of the server holding the stream:
 * until a probe says otherwise, ops answer unavailable at once rather than
 * each waiting op_timeout_ms to find out. The next op probes at once. */
void cn_kv_unverified(cn *c) {
    atomic_store(&c->next_probe_us, 0);
    atomic_store(&c->bucket_down, CN_BUCKET_UNVERIFIED);
}

/* The stream answers (or is absent: the bind creates it). */
static int stream_answers(cn *c) {
    char stream[300];
    snprintf(stream, sizeof stream, "KV_%s", c->cfg->bucket);
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = c->cfg->op_timeout_ms < CN_PROBE_WAIT_MS ? c->cfg->op_timeout_ms : CN_PROBE_WAIT_MS;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, c->js, stream, &jo, &jerr);
    if (si) jsStreamInfo_Destroy(si);
    return s == NATS_OK || s == NATS_NOT_FOUND;
}

/* 1: answer MCPG_EUNAVAIL without a request. At most one thread probes at a
 * time (the compare-and-set on next_probe_us); the others answer at once. */
static int bucket_unanswered(cn *c) {
    if (atomic_load(&c->bucket_down) == CN_BUCKET_UP) return 0;
    uint_fast64_t now = c->h->mono_us(), next = atomic_load(&c->next_probe_us);
    if (now < next ||
        !atomic_compare_exchange_strong(&c->next_probe_us, &next,
                                        now + CN_PROBE_EVERY_MS * 1000ull))
        return 1;
    if (!stream_answers(c)) {
        bucket_lost(c);
        return 1;
    }
    if (atomic_exchange(&c->bucket_down, CN_BUCKET_UP) == CN_BUCKET_DOWN)
        c->h->log(c->self, MCPG_LOG_INFO, "bucket \"%s\" answers again", c->cfg->bucket);
    return 0;
}

static int status_of(cn *c, natsStatus s) {
    switch (s) {
    case NATS_OK: return 0;
    case NATS_NOT_FOUND: return MCPG_ENOENT;
    case NATS_TIMEOUT:
        if (connected(c)) bucket_lost(c);
        return MCPG_ETIMEDOUT;
    case NATS_NO_RESPONDERS:
        if (connected(c)) bucket_lost(c);
        return MCPG_EUNAVAIL;
    case NATS_NO_MEMORY: return MCPG_ENOMEM;
    case NATS_IO_ERROR:
    case NATS_CONNECTION_CLOSED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_NO_SERVER:
    case NATS_STALE_CONNECTION: return MCPG_EUNAVAIL;
    default: break;
    }
    if (last_error_has("maximum bytes") || last_error_has("maximum messages") ||
        last_error_has("insufficient resources"))
        return MCPG_EAGAIN;
    /* whatever a request caught by a lost server says, it is unavailability */
    if (natsConnection_Status(c->nc) != NATS_CONN_STATUS_CONNECTED) return MCPG_EUNAVAIL;
    c->h->log(c->self, MCPG_LOG_WARN, "NATS: %s (%s)", natsStatus_GetText(s),
              nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
    return MCPG_EIO;
}

/* ---- values ---------------------------------------------------------------------- */

static void entry_free(cn_entry *en) {
    if (en->e) kvEntry_Destroy(en->e);
    *en = (cn_entry){0};
}

/* Read a key: 0 (live, or expired: en->expired, en->revision set), or a status. */
static int read_entry(cn *c, const char *key, cn_entry *en) {
    *en = (cn_entry){0};
    natsStatus s = kvStore_Get(&en->e, c->kv, key);
    if (s != NATS_OK) {
        en->e = NULL;
        return status_of(c, s);
    }
    en->revision = kvEntry_Revision(en->e);
    const char *v = kvEntry_Value(en->e);
    int n = kvEntry_ValueLen(en->e);
    char hex[CN_HEADER_LEN + 1];
    char *end = NULL;
    if (n >= CN_HEADER_LEN) {
        memcpy(hex, v, CN_HEADER_LEN);
        hex[CN_HEADER_LEN] = '\0';
        en->expiry_ms = strtoull(hex, &end, 16);
    }
    if (!end || *end) { /* not written by this module: all of it is the value, no expiry */
        en->expiry_ms = 0;
        en->data = v, en->len = n > 0 ? (size_t)n : 0;
    } else {
        en->data = v + CN_HEADER_LEN, en->len = (size_t)n - CN_HEADER_LEN;
    }
    en->expired = en->expiry_ms && (int64_t)en->expiry_ms <= wall_ms(c);
    return 0;
}

/* The stored form of a value: its expiry, then the bytes. h->alloc'd. */
static char *stored(cn *c, const char *val, size_t vlen, uint64_t expiry_ms, int *len) {
    char *b = c->h->alloc(CN_HEADER_LEN + vlen + 1);
    if (!b) return NULL;
    snprintf(b, CN_HEADER_LEN + 1, "%016" PRIx64, expiry_ms);
    if (vlen) memcpy(b + CN_HEADER_LEN, val, vlen);
    *len = (int)(CN_HEADER_LEN + vlen);
    return b;
}

/* Write under a condition: on `rev` (an update), or that the key is absent
 * (rev 0: a create). 0, 1 on a conflict (someone wrote first), or a status. */
static int write_if(cn *c, cn_op *op, uint64_t rev, const char *val, size_t vlen,
                    uint64_t expiry_ms) {
    int len;
    char *b = stored(c, val, vlen, expiry_ms, &len);
    if (!b) return MCPG_ENOMEM;
    natsStatus s = rev ? kvStore_Update(&op->revision, c->kv, op->key, b, len, rev)
                       : kvStore_Create(&op->revision, c->kv, op->key, b, len);
    c->h->free(b);
    if (s == NATS_OK) return 0;
    return is_conflict(s) ? 1 : status_of(c, s);
}

/* The op's answer carries a copy of bytes (NUL-terminated). */
static int answer_data(cn *c, cn_op *op, const char *d, size_t n, uint64_t rev) {
    op->data = c->h->alloc(n + 1);
    if (!op->data) return MCPG_ENOMEM;
    if (n) memcpy(op->data, d, n);
    op->data[n] = '\0';
    op->len = n;
    op->revision = rev;
    return 0;
}

static int parse_int64(const char *d, size_t n, int64_t *out) {
    char tmp[32];
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, d, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(tmp, &end, 10);
    if (*end || errno) return -1;
    *out = v;
    return 0;
}

static int out_of_time(const cn_op *op, cn *c) { return c->h->mono_us() > op->deadline_us; }

/* ---- the ops ----------------------------------------------------------------------- */

static int op_get(cn *c, cn_op *op) {
    cn_entry en;
    int rc = read_entry(c, op->key, &en);
    if (rc == 0 && en.expired) rc = MCPG_ENOENT;
    if (rc == 0) {
        rc = answer_data(c, op, en.data, en.len, en.revision);
        int64_t v;
        if (rc == 0 && parse_int64(en.data, en.len, &v) == 0) op->number = v;
    }
    entry_free(&en);
    return rc;
}

static int op_put(cn *c, cn_op *op) {
    int len;
    char *b = stored(c, op->val, op->vlen, expiry_of(c, op->ttl_ms), &len);
    if (!b) return MCPG_ENOMEM;
    natsStatus s = kvStore_Put(&op->revision, c->kv, op->key, b, len);
    c->h->free(b);
    return status_of(c, s);
}

/* put_if_absent, and compare_and_set on revision 0: a create, or an update
 * of the dead entry when the key is there but expired. `taken` is the answer
 * when a live key is there (EEXIST or ECONFLICT), with its value. */
static int op_create(cn *c, cn_op *op, int taken) {
    uint64_t expiry = expiry_of(c, op->ttl_ms);
    for (int round = 0; round < CN_RETRIES && !out_of_time(op, c); round++) {
        int rc = write_if(c, op, 0, op->val, op->vlen, expiry);
        if (rc != 1) return rc;
        cn_entry en;
        rc = read_entry(c, op->key, &en);
        if (rc == MCPG_ENOENT) continue; /* deleted in between: create again */
        if (rc == 0 && !en.expired) rc = answer_data(c, op, en.data, en.len, en.revision) ?: taken;
        else if (rc == 0 && (rc = write_if(c, op, en.revision, op->val, op->vlen, expiry)) == 1)
            rc = -1000; /* another taker won the expired key: look again */
        entry_free(&en);
        if (rc != -1000) return rc;
    }
    return out_of_time(op, c) ? MCPG_ETIMEDOUT : MCPG_ECONFLICT;
}

static int op_cas(cn *c, cn_op *op) {
    if (op->expected == 0) return op_create(c, op, MCPG_ECONFLICT);
    cn_entry en;
    int rc = read_entry(c, op->key, &en);
    if (rc == MCPG_ENOENT || (rc == 0 && en.expired)) {
        entry_free(&en);
        return MCPG_ECONFLICT; /* absent: nothing to compare with */
    }
    if (rc == 0 && en.revision != op->expected)
        rc = answer_data(c, op, en.data, en.len, en.revision) ?: MCPG_ECONFLICT;
    entry_free(&en);
    if (rc) return rc;
    rc = write_if(c, op, op->expected, op->val, op->vlen, expiry_of(c, op->ttl_ms));
    if (rc != 1) return rc;
    /* written by someone between the read and the update: say by whom */
    if (read_entry(c, op->key, &en) == 0 && !en.expired)
        rc = answer_data(c, op, en.data, en.len, en.revision);
    entry_free(&en);
    return rc ? rc : MCPG_ECONFLICT;
}

/* One compare-and-set round of a counter: `step` turns the current number
 * (0 when absent) into the new one, or answers without writing. */
typedef int (*cn_step)(cn_op *op, int found, int64_t cur, int64_t *next, uint64_t *expiry);

static int counter_loop(cn *c, cn_op *op, cn_step step) {
    for (int round = 0; round < CN_RETRIES && !out_of_time(op, c); round++) {
        cn_entry en;
        int rc = read_entry(c, op->key, &en);
        if (rc && rc != MCPG_ENOENT) return rc;
        int live = rc == 0 && !en.expired;
        int64_t cur = 0, next;
        uint64_t expiry = live ? en.expiry_ms : 0;
        if (live && parse_int64(en.data, en.len, &cur)) rc = MCPG_EINVAL;
        else rc = step(op, live, cur, &next, &expiry);
        uint64_t rev = en.revision; /* 0 (absent): create; expired: update the dead entry */
        entry_free(&en);
        if (rc) return rc;
        if (op->kind == CN_RATE) /* kept until paid-until has passed, by the store's clock */
            expiry = (uint64_t)wall_ms(c) + (uint64_t)((next - op->now_us) / 1000) + 1;
        char num[24];
        int n = snprintf(num, sizeof num, "%" PRId64, next);
        rc = write_if(c, op, rev, num, (size_t)n, expiry);
        if (rc == 1) continue;
        if (rc == 0) {
            op->number = next;
            rc = answer_data(c, op, num, (size_t)n, op->revision);
        }
        return rc;
    }
    return out_of_time(op, c) ? MCPG_ETIMEDOUT : MCPG_ECONFLICT;
}

static int64_t now_ms_of(cn_op *op) { return op->now_us / 1000; }

static int incr_step(cn_op *op, int found, int64_t cur, int64_t *next, uint64_t *expiry) {
    if (__builtin_add_overflow(cur, op->delta, next)) return MCPG_ERANGE;
    if (!found && op->ttl_ms) *expiry = (uint64_t)now_ms_of(op) + op->ttl_ms;
    return 0;
}

/* GCRA: the key holds the time up to which calls are paid for. */
static int rate_step(cn_op *op, int found, int64_t paid, int64_t *next, uint64_t *expiry) {
    int64_t t = found && paid > op->now_us ? paid : op->now_us, end;
    if (__builtin_add_overflow(t, op->interval_us, &end)) return MCPG_ERANGE;
    if (end - op->now_us > op->burst_us) {
        op->number = end - op->burst_us;
        return MCPG_EAGAIN;
    }
    *next = end;
    *expiry = 0; /* set by op_rate: in the store's clock, not the caller's */
    return 0;
}

static int op_incr(cn *c, cn_op *op) {
    op->now_us = c->h->wall_us();
    return counter_loop(c, op, incr_step);
}

static int op_rate(cn *c, cn_op *op) { return counter_loop(c, op, rate_step); }

static int op_del(cn *c, cn_op *op) {
    cn_entry en;
    int rc = read_entry(c, op->key, &en);
    if (rc == 0 && en.expired) rc = MCPG_ENOENT;
    uint64_t rev = en.revision;
    entry_free(&en);
    if (rc) return rc;
    rc = status_of(c, kvStore_Delete(c->kv, op->key));
    if (rc == 0) op->revision = rev;
    return rc;
}

/* ---- scan: a watch over the prefix's tokens, its initial values only ---------------- */

typedef struct scan_acc {
    cn *c;
    cn_op *op;
    size_t cap, used, itcap;
} scan_acc;

static int scan_add(scan_acc *a, const char *enc, size_t n, uint64_t rev) {
    cn_op *op = a->op;
    const mcpg_host *h = a->c->h;
    if (op->nitems >= (size_t)a->c->cfg->max_scan_keys) return MCPG_ERANGE;
    if (a->used + n + 1 > a->cap) {
        size_t cap = (a->cap + n + 1) * 2;
        char *d = h->realloc(op->data, cap);
        if (!d) return MCPG_ENOMEM;
        op->data = d, a->cap = cap;
    }
    if (op->nitems == a->itcap) {
        size_t cap = a->itcap ? a->itcap * 2 : 64;
        cn_scan_item *it = h->realloc(op->items, cap * sizeof *it);
        if (!it) return MCPG_ENOMEM;
        op->items = it, a->itcap = cap;
    }
    size_t len = cn_key_decode(enc, n, op->data + a->used);
    op->items[op->nitems++] = (cn_scan_item){a->used, len, rev};
    a->used += len + 1;
    return 0;
}

static int by_key(const void *x, const void *y, void *base) {
    const cn_scan_item *a = x, *b = y;
    const char *keys = base;
    size_t n = a->len < b->len ? a->len : b->len;
    int d = memcmp(keys + a->off, keys + b->off, n);
    return d ? d : (a->len > b->len) - (a->len < b->len);
}

/* Is this watched entry one to report: the prefix, and not expired. */
static int scan_wants(cn *c, kvEntry *e, const char *enc_prefix, size_t plen) {
    const char *k = kvEntry_Key(e);
    if (strncmp(k, enc_prefix, plen) != 0) return 0;
    int n = kvEntry_ValueLen(e);
    if (n < CN_HEADER_LEN) return 1;
    char hex[CN_HEADER_LEN + 1], *end;
    memcpy(hex, kvEntry_Value(e), CN_HEADER_LEN);
    hex[CN_HEADER_LEN] = '\0';
    uint64_t exp = strtoull(hex, &end, 16);
    return *end || !exp || (int64_t)exp > wall_ms(c);
}

static int op_scan(cn *c, cn_op *op) {
    char filter[op->klen + 2];
    cn_watch_filter(op->key, op->klen, filter);
    kvWatchOptions wo;
    kvWatchOptions_Init(&wo);
    wo.IgnoreDeletes = true; /* MetaOnly is not enough: the expiry is in the value */
    kvWatcher *w = NULL;
    natsStatus s = kvStore_Watch(&w, c->kv, filter, &wo);
    if (s != NATS_OK) return status_of(c, s);
    scan_acc a = {.c = c, .op = op};
    int rc = 0;
    for (;;) {
        int64_t left = (int64_t)(op->deadline_us - c->h->mono_us()) / 1000;
        kvEntry *e = NULL;
        if (left <= 0) {
            rc = MCPG_ETIMEDOUT;
            break;
        }
        s = kvWatcher_Next(&e, w, left);
        if (s != NATS_OK) {
            /* the watch was set up, so the stream answers: a scan that outlasts its
             * deadline is a large prefix, not a lost bucket (status_of would mark it) */
            rc = s == NATS_TIMEOUT ? MCPG_ETIMEDOUT : status_of(c, s);
            break;
        }
        if (!e) break; /* the initial values are done */
        if (scan_wants(c, e, op->key, op->klen))
            rc = scan_add(&a, kvEntry_Key(e), strlen(kvEntry_Key(e)), kvEntry_Revision(e));
        kvEntry_Destroy(e);
        if (rc) break;
    }
    kvWatcher_Destroy(w);
    if (rc == 0 && op->nitems > 1) qsort_r(op->items, op->nitems, sizeof *op->items, by_key, op->data);
    if (rc) op->nitems = 0;
    op->number = (int64_t)op->nitems;
    return rc;
}

static int op_publish(cn *c, cn_op *op) {
    /* key: the subject; val: the message */
    return status_of(c, natsConnection_Publish(c->nc, op->key, op->val, (int)op->vlen));
}

/* ---- the bucket ---------------------------------------------------------------------- */

/* Compare-and-set on a replicated stream is not serialisable before
 * nats-server 2.9.21 (concurrent updates on one expected revision can both
 * succeed), and every counter, slot and session change here is one: a
 * replicated bucket is refused on an older server rather than served
 * wrongly. */
static int replicas_allowed(cn *c) {
    if (c->cfg->replicas == 1) return 1;
    char url[512];
    if (natsConnection_GetConnectedUrl(c->nc, url, sizeof url) != NATS_OK) return 0;
    int v[3];
    if (cn_server_version(url, c->cfg->op_timeout_ms, v)) {
        c->h->log(c->self, MCPG_LOG_ERROR, "replicas %d: cannot read the server's version at %s",
                  (int)c->cfg->replicas, url);
        return 0;
    }
    long ver = v[0] * 10000L + v[1] * 100L + v[2];
    if (ver >= 20921) return 1;
    c->h->log(c->self, MCPG_LOG_ERROR,
              "replicas %d refused: nats-server %d.%d.%d loses compare-and-set updates on a "
              "replicated bucket (fixed in 2.9.21), and counters, slots and sessions rely on "
              "them; use replicas 1 or nats-server 2.9.21 or later",
              (int)c->cfg->replicas, v[0], v[1], v[2]);
    atomic_store(&c->refused, 1);
    return 0;
}

/* Reads of a replicated bucket from the stream leader, never from a follower
 * that may not have our last write yet (read-your-writes). */
static int leader_reads(cn *c, const char *stream) {
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, c->js, stream, NULL, &jerr);
    if (s == NATS_OK && si->Config->AllowDirect) {
        si->Config->AllowDirect = false;
        jsStreamInfo *up = NULL;
        s = js_UpdateStream(&up, c->js, si->Config, NULL, &jerr);
        if (up) jsStreamInfo_Destroy(up);
    }
    if (si) jsStreamInfo_Destroy(si);
    return s == NATS_OK ? 0 : status_of(c, s);
}

static int create_bucket(cn *c) {
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = c->cfg->bucket;
    kc.History = 1;
    kc.StorageType = js_FileStorage;
    kc.Replicas = (int)c->cfg->replicas;
    kc.MaxBytes = c->bucket_max_bytes;
    kc.TTL = c->cfg->max_age_ms * 1000000; /* nanoseconds */
    kc.MaxValueSize = (int32_t)(c->cfg->max_value_bytes + CN_HEADER_LEN);
    natsStatus s = js_CreateKeyValue(&c->kv, c->js, &kc);
    if (s != NATS_OK) {
        c->kv = NULL;
        c->h->log(c->self, MCPG_LOG_ERROR, "cannot create bucket \"%s\": %s (%s)",
                  c->cfg->bucket, natsStatus_GetText(s),
                  nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
        return status_of(c, s);
    }
    c->h->log(c->self, MCPG_LOG_INFO, "created bucket \"%s\" (replicas %d, file storage, "
              "max %lld bytes, max age %lld ms)", c->cfg->bucket, (int)c->cfg->replicas,
              (long long)c->bucket_max_bytes, (long long)c->cfg->max_age_ms);
    return 0;
}

/* Bind the bucket (made with the configured settings when it is not there).
 * 0, MCPG_EUNAVAIL (no server yet: tried again later), MCPG_ECONFIG
 * (refused: logged). On the KV thread, or in start before it runs. */
static int bind_locked(cn *c, int at_start);

int cn_kv_bind(cn *c, int at_start) {
    pthread_mutex_lock(&c->bind_mu);
    int rc = c->kv ? 0 : bind_locked(c, at_start);
    pthread_mutex_unlock(&c->bind_mu);
    return rc;
}

static int bind_locked(cn *c, int at_start) {
    if (atomic_load(&c->refused)) return MCPG_ECONFIG;
    if (natsConnection_Status(c->nc) != NATS_CONN_STATUS_CONNECTED) return MCPG_EUNAVAIL;
    if (!replicas_allowed(c)) return atomic_load(&c->refused) ? MCPG_ECONFIG : MCPG_EUNAVAIL;
    natsStatus s = js_KeyValue(&c->kv, c->js, c->cfg->bucket);
    int rc = s == NATS_OK ? 0 : s == NATS_NOT_FOUND ? create_bucket(c) : status_of(c, s);
    if (rc == 0 && c->cfg->replicas > 1) {
        char stream[300];
        snprintf(stream, sizeof stream, "KV_%s", c->cfg->bucket);
        if ((rc = leader_reads(c, stream)) != 0) {
            kvStore_Destroy(c->kv);
            c->kv = NULL;
        }
        /* rebind so the store reads the stream's new setting */
        if (rc == 0) {
            kvStore_Destroy(c->kv);
            c->kv = NULL;
            rc = status_of(c, js_KeyValue(&c->kv, c->js, c->cfg->bucket));
        }
    }
    if (rc && rc != MCPG_EUNAVAIL && rc != MCPG_ETIMEDOUT && at_start) atomic_store(&c->refused, 1);
    return rc;
}

void cn_kv_run(cn *c, cn_op *op) {
    if (atomic_load(&c->refused)) {
        op->status = MCPG_EUNAVAIL;
        return;
    }
    if (out_of_time(op, c)) {
        op->status = MCPG_ETIMEDOUT;
        return;
    }
    /* down: answer at once, without a request that could only time out */
    if (!connected(c)) {
        op->status = MCPG_EUNAVAIL;
        return;
    }
    if (op->kind == CN_PUBLISH) { /* core NATS: needs no stream */
        op->status = op_publish(c, op);
        return;
    }
    if (bucket_unanswered(c)) {
        op->status = MCPG_EUNAVAIL;
        return;
    }
    int rc = cn_kv_bind(c, 0);
    if (rc) {
        op->status = rc == MCPG_ECONFIG ? MCPG_EUNAVAIL : rc;
        return;
    }
    switch (op->kind) {
    case CN_GET: rc = op_get(c, op); break;
    case CN_PUT: rc = op_put(c, op); break;
    case CN_PUT_IF_ABSENT: rc = op_create(c, op, MCPG_EEXIST); break;
    case CN_CAS: rc = op_cas(c, op); break;
    case CN_INCR: rc = op_incr(c, op); break;
    case CN_RATE: rc = op_rate(c, op); break;
    case CN_DEL: rc = op_del(c, op); break;
    case CN_SCAN: rc = op_scan(c, op); break;
    default: rc = MCPG_EINVAL; break;
    }
    op->status = rc;
}
