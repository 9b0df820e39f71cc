/* The sharded key-value store (see coord_store.h).
 *
 * Each shard: a chained hash table (power-of-two buckets, grown at one entry
 * per bucket) and a min-heap of the keys that expire, ordered by expiry, so a
 * sweep touches expired keys only. An entry is one allocation: header, key,
 * value, NUL. Revisions come from one store-wide counter, taken under the
 * key's shard lock: they increase per key and never repeat in a store, so a
 * key deleted and written again cannot be mistaken for its old self by a
 * compare-and-set.
 *
 * Bounds are store-wide atomics reserved before a write changes anything:
 * a write that would pass them first sweeps every shard's expired keys (they
 * still count until swept), then answers MCPG_EAGAIN if still full. */
#define _GNU_SOURCE /* qsort_r */
#include "coord_store.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CM_NO_HEAP UINT32_MAX
#define CM_SWEEP_CHUNK 256 /* keys per lock hold in a sweep */
#define CM_MIN_BUCKETS 64

typedef struct cm_entry {
    struct cm_entry *next;
    uint64_t hash;
    uint64_t revision;
    uint64_t expires_us; /* 0: never */
    uint32_t heap_idx;   /* CM_NO_HEAP when it does not expire */
    uint32_t klen;
    size_t vlen;
    char bytes[];        /* key, value, NUL */
} cm_entry;

typedef struct cm_shard {
    pthread_mutex_t mu;
    cm_entry **buckets;
    size_t mask;
    size_t count;
    cm_entry **heap;
    size_t heap_n, heap_cap;
} __attribute__((aligned(64))) cm_shard;

struct cm_store {
    const mcpg_host *h;
    uint64_t seed;
    size_t max_keys, max_bytes;
    atomic_size_t keys, bytes;
    atomic_uint_fast64_t revision;
    cm_log_fn log_fn; /* the journal (NULL: none), set before any op */
    void *log_ctx;
    cm_shard shards[CM_SHARDS];
};

/* A change, to the journal (under the key's shard lock). */
static void log_put(cm_store *s, const cm_entry *e, cm_out *out) {
    if (s->log_fn)
        out->seq = s->log_fn(s->log_ctx, CM_LOG_PUT, e->bytes, e->klen, e->bytes + e->klen,
                             e->vlen, e->revision, e->expires_us);
}

/* ---- small helpers ------------------------------------------------------ */

/* FNV-1a over the bytes, seeded, then a 64-bit finaliser so both the low
 * bits (bucket) and the high bits (shard) are well mixed. */
static uint64_t cm_hash(uint64_t seed, const char *p, size_t n) {
    uint64_t x = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        x ^= (unsigned char)p[i];
        x *= 0x100000001b3ull;
    }
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static cm_shard *shard_of(cm_store *s, uint64_t hash) {
    return &s->shards[hash >> 60 & (CM_SHARDS - 1)];
}

static const char *entry_val(const cm_entry *e) { return e->bytes + e->klen; }

static int entry_expired(const cm_entry *e, uint64_t now_us) {
    return e->expires_us && e->expires_us <= now_us;
}

static uint64_t expiry_for(uint64_t ttl_ms, uint64_t now_us) {
    if (!ttl_ms) return 0;
    if (ttl_ms > (UINT64_MAX - now_us) / 1000) return UINT64_MAX;
    return now_us + ttl_ms * 1000;
}

int cm_parse_int64(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    int neg = 0;
    if (n && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == n || n - i > 19) return 0;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return 0;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

void cm_out_release(const mcpg_host *h, cm_out *out) {
    h->free(out->heap);
    out->heap = NULL;
    out->data = NULL;
    out->len = 0;
}

/* Copy n bytes into out (inline when they fit). 0 or MCPG_ENOMEM. */
static int out_copy(const mcpg_host *h, cm_out *out, const char *p, size_t n) {
    char *dst = out->inline_buf;
    if (n + 1 > out->inline_cap) {
        dst = h->alloc(n + 1);
        if (!dst) return MCPG_ENOMEM;
        out->heap = dst;
    }
    if (n) memcpy(dst, p, n);
    dst[n] = '\0';
    out->data = dst;
    out->len = n;
    return 0;
}

/* The entry's value, revision and number into out. */
static int out_entry(const mcpg_host *h, cm_out *out, const cm_entry *e) {
    out->revision = e->revision;
    int64_t v;
    out->number = cm_parse_int64(entry_val(e), e->vlen, &v) ? v : 0;
    return out_copy(h, out, entry_val(e), e->vlen);
}

/* ---- the expiry heap (under the shard lock) ------------------------------ */

static void heap_set(cm_shard *sh, size_t i, cm_entry *e) {
    sh->heap[i] = e;
    e->heap_idx = (uint32_t)i;
}

static void heap_up(cm_shard *sh, size_t i) {
    cm_entry *e = sh->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (sh->heap[p]->expires_us <= e->expires_us) break;
        heap_set(sh, i, sh->heap[p]);
        i = p;
    }
    heap_set(sh, i, e);
}

static void heap_down(cm_shard *sh, size_t i) {
    cm_entry *e = sh->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= sh->heap_n) break;
        if (c + 1 < sh->heap_n && sh->heap[c + 1]->expires_us < sh->heap[c]->expires_us) c++;
        if (e->expires_us <= sh->heap[c]->expires_us) break;
        heap_set(sh, i, sh->heap[c]);
        i = c;
    }
    heap_set(sh, i, e);
}

static void heap_remove(cm_shard *sh, cm_entry *e) {
    size_t i = e->heap_idx;
    if (i == CM_NO_HEAP) return;
    e->heap_idx = CM_NO_HEAP;
    cm_entry *last = sh->heap[--sh->heap_n];
    if (last == e) return;
    heap_set(sh, i, last);
    heap_up(sh, i);
    heap_down(sh, last->heap_idx);
}

/* Give e the expiry `expires_us` (0: none), in or out of the heap. */
static int heap_update(const mcpg_host *h, cm_shard *sh, cm_entry *e, uint64_t expires_us) {
    if (!expires_us) {
        heap_remove(sh, e);
        e->expires_us = 0;
        return 0;
    }
    if (e->heap_idx == CM_NO_HEAP) {
        if (sh->heap_n == sh->heap_cap) {
            size_t cap = sh->heap_cap ? sh->heap_cap * 2 : 64;
            cm_entry **p = h->realloc(sh->heap, cap * sizeof *p);
            if (!p) return MCPG_ENOMEM;
            sh->heap = p;
            sh->heap_cap = cap;
        }
        e->expires_us = expires_us;
        heap_set(sh, sh->heap_n++, e);
        heap_up(sh, e->heap_idx);
        return 0;
    }
    e->expires_us = expires_us;
    heap_up(sh, e->heap_idx);
    heap_down(sh, e->heap_idx);
    return 0;
}

/* ---- bounds ----------------------------------------------------------------- */

static int reserve(atomic_size_t *used, size_t max, size_t n) {
    if (!n) return 0;
    size_t now = atomic_fetch_add(used, n) + n;
    if (now <= max && now >= n) return 0;
    atomic_fetch_sub(used, n);
    return MCPG_EAGAIN;
}

static void unreserve(atomic_size_t *used, size_t n) {
    if (n) atomic_fetch_sub(used, n);
}

/* ---- the table (under the shard lock) ------------------------------------ */

/* The link that points at key's entry, or at the chain's NULL end. */
static cm_entry **find_link(cm_shard *sh, uint64_t hash, const char *key, size_t klen) {
    cm_entry **pp = &sh->buckets[hash & sh->mask];
    for (cm_entry *e = *pp; e; pp = &e->next, e = *pp)
        if (e->hash == hash && e->klen == klen && memcmp(e->bytes, key, klen) == 0) return pp;
    return pp;
}

static void entry_unlink(cm_store *s, cm_shard *sh, cm_entry **pp) {
    cm_entry *e = *pp;
    *pp = e->next;
    heap_remove(sh, e);
    sh->count--;
    unreserve(&s->keys, 1);
    unreserve(&s->bytes, e->klen + e->vlen);
    s->h->free(e);
}

/* The link to key's live entry, or NULL when there is none. An expired entry
 * found on the way is removed, so the answer is the same as after a sweep. */
static cm_entry **find_live(cm_store *s, cm_shard *sh, uint64_t hash, const char *key,
                            size_t klen, uint64_t now_us) {
    cm_entry **pp = find_link(sh, hash, key, klen);
    if (!*pp) return NULL;
    if (!entry_expired(*pp, now_us)) return pp;
    entry_unlink(s, sh, pp);
    return NULL;
}

/* Double the buckets when the shard averages one entry per bucket; a failed
 * allocation just leaves the chains longer. */
static void maybe_grow(const mcpg_host *h, cm_shard *sh) {
    if (sh->count <= sh->mask + 1) return;
    size_t n = (sh->mask + 1) * 2;
    cm_entry **b = h->calloc(n, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i <= sh->mask; i++) {
        cm_entry *e = sh->buckets[i];
        while (e) {
            cm_entry *next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    h->free(sh->buckets);
    sh->buckets = b;
    sh->mask = n - 1;
}

/* A new entry, at the head of its bucket. 0, MCPG_EAGAIN (full) or
 * MCPG_ENOMEM; out gets the revision. */
static int entry_insert(cm_store *s, cm_shard *sh, uint64_t hash,
                        const char *key, size_t klen, const char *val, size_t vlen,
                        uint64_t expires_us, cm_out *out) {
    if (reserve(&s->keys, s->max_keys, 1)) return MCPG_EAGAIN;
    if (reserve(&s->bytes, s->max_bytes, klen + vlen)) {
        unreserve(&s->keys, 1);
        return MCPG_EAGAIN;
    }
    cm_entry *e = s->h->alloc(sizeof *e + klen + vlen + 1);
    if (!e) goto nomem;
    *e = (cm_entry){.hash = hash, .heap_idx = CM_NO_HEAP, .klen = (uint32_t)klen, .vlen = vlen};
    memcpy(e->bytes, key, klen);
    if (vlen) memcpy(e->bytes + klen, val, vlen);
    e->bytes[klen + vlen] = '\0';
    if (heap_update(s->h, sh, e, expires_us)) {
        s->h->free(e);
        goto nomem;
    }
    e->revision = atomic_fetch_add(&s->revision, 1) + 1;
    e->next = sh->buckets[hash & sh->mask];
    sh->buckets[hash & sh->mask] = e;
    sh->count++;
    maybe_grow(s->h, sh);
    out->revision = e->revision;
    log_put(s, e, out);
    return 0;
nomem:
    unreserve(&s->keys, 1);
    unreserve(&s->bytes, klen + vlen);
    return MCPG_ENOMEM;
}

/* Give *pp's entry a new value (and a new revision). The entry may move. */
static int entry_replace(cm_store *s, cm_shard *sh, cm_entry **pp, const char *val,
                         size_t vlen, cm_out *out) {
    cm_entry *e = *pp;
    if (vlen > e->vlen && reserve(&s->bytes, s->max_bytes, vlen - e->vlen)) return MCPG_EAGAIN;
    if (vlen != e->vlen) {
        cm_entry *n = s->h->realloc(e, sizeof *e + e->klen + vlen + 1);
        if (!n) {
            if (vlen > e->vlen) unreserve(&s->bytes, vlen - e->vlen);
            return MCPG_ENOMEM;
        }
        if (vlen < n->vlen) unreserve(&s->bytes, n->vlen - vlen);
        e = *pp = n;
        if (e->heap_idx != CM_NO_HEAP) sh->heap[e->heap_idx] = e;
    }
    if (vlen) memmove(e->bytes + e->klen, val, vlen);
    e->vlen = vlen;
    e->bytes[e->klen + vlen] = '\0';
    e->revision = atomic_fetch_add(&s->revision, 1) + 1;
    out->revision = e->revision;
    log_put(s, e, out);
    return 0;
}

/* ---- life ------------------------------------------------------------------- */

cm_store *cm_store_new(const mcpg_host *h, size_t max_keys, size_t max_bytes, uint64_t seed) {
    cm_store *s = h->calloc(1, sizeof *s);
    if (!s) return NULL;
    s->h = h;
    s->seed = seed;
    s->max_keys = max_keys;
    s->max_bytes = max_bytes;
    for (size_t i = 0; i < CM_SHARDS; i++) {
        cm_shard *sh = &s->shards[i];
        pthread_mutex_init(&sh->mu, NULL);
        sh->buckets = h->calloc(CM_MIN_BUCKETS, sizeof *sh->buckets);
        sh->mask = CM_MIN_BUCKETS - 1;
        if (!sh->buckets) {
            cm_store_free(s);
            return NULL;
        }
    }
    return s;
}

void cm_store_free(cm_store *s) {
    if (!s) return;
    for (size_t i = 0; i < CM_SHARDS; i++) {
        cm_shard *sh = &s->shards[i];
        for (size_t b = 0; sh->buckets && b <= sh->mask; b++) {
            cm_entry *e = sh->buckets[b];
            while (e) {
                cm_entry *next = e->next;
                s->h->free(e);
                e = next;
            }
        }
        s->h->free(sh->buckets);
        s->h->free(sh->heap);
        pthread_mutex_destroy(&sh->mu);
    }
    s->h->free(s);
}

void cm_store_usage(cm_store *s, size_t *keys, size_t *bytes) {
    *keys = atomic_load(&s->keys);
    *bytes = atomic_load(&s->bytes);
}

/* ---- ops -------------------------------------------------------------------- */

int cm_store_get(cm_store *s, const char *key, size_t klen, uint64_t now_us, cm_out *out) {
    uint64_t hash = cm_hash(s->seed, key, klen);
    cm_shard *sh = shard_of(s, hash);
    pthread_mutex_lock(&sh->mu);
    cm_entry **pp = find_live(s, sh, hash, key, klen, now_us);
    int rc = pp ? out_entry(s->h, out, *pp) : MCPG_ENOENT;
    pthread_mutex_unlock(&sh->mu);
    return rc;
}

static int write_locked(cm_store *s, cm_shard *sh, cm_write_mode mode, uint64_t hash,
                        const char *key, size_t klen, const char *val, size_t vlen,
                        uint64_t expires_us, uint64_t expected, uint64_t now_us, cm_out *out) {
    cm_entry **pp = find_live(s, sh, hash, key, klen, now_us);
    cm_entry *e = pp ? *pp : NULL;
    if (mode == CM_PUT_IF_ABSENT && e) {
        int rc = out_entry(s->h, out, e);
        return rc ? rc : MCPG_EEXIST;
    }
    if (mode == CM_CAS && (e ? e->revision : 0) != expected) {
        int rc = e ? out_entry(s->h, out, e) : 0;
        return rc ? rc : MCPG_ECONFLICT;
    }
    if (!e) return entry_insert(s, sh, hash, key, klen, val, vlen, expires_us, out);
    uint64_t old_expiry = e->expires_us;
    int rc = heap_update(s->h, sh, e, expires_us); /* first: it is the one step that can fail */
    if (rc) return rc;
    rc = entry_replace(s, sh, pp, val, vlen, out);
    if (rc) heap_update(s->h, sh, *pp, old_expiry); /* shrinking or in place: cannot fail */
    return rc;
}

int cm_store_write(cm_store *s, cm_write_mode mode, const char *key, size_t klen,
                   const char *val, size_t vlen, uint64_t ttl_ms, uint64_t expected,
                   uint64_t now_us, cm_out *out) {
    uint64_t hash = cm_hash(s->seed, key, klen);
    cm_shard *sh = shard_of(s, hash);
    uint64_t expires_us = expiry_for(ttl_ms, now_us);
    for (int attempt = 0;; attempt++) {
        pthread_mutex_lock(&sh->mu);
        int rc = write_locked(s, sh, mode, hash, key, klen, val, vlen, expires_us, expected,
                              now_us, out);
        pthread_mutex_unlock(&sh->mu);
        if (rc != MCPG_EAGAIN || attempt > 0 || !cm_store_sweep(s, now_us, SIZE_MAX)) return rc;
    }
}

static int incr_locked(cm_store *s, cm_shard *sh, uint64_t hash, const char *key, size_t klen,
                       int64_t delta, uint64_t ttl_ms, uint64_t now_us, cm_out *out) {
    cm_entry **pp = find_live(s, sh, hash, key, klen, now_us);
    int64_t v = 0;
    if (pp && !cm_parse_int64(entry_val(*pp), (*pp)->vlen, &v)) return MCPG_EINVAL;
    if (__builtin_add_overflow(v, delta, &v)) return MCPG_ERANGE;
    char text[24];
    int n = snprintf(text, sizeof text, "%lld", (long long)v);
    int rc = pp ? entry_replace(s, sh, pp, text, (size_t)n, out)
                : entry_insert(s, sh, hash, key, klen, text, (size_t)n,
                               expiry_for(ttl_ms, now_us), out);
    if (rc) return rc;
    out->number = v;
    return out_copy(s->h, out, text, (size_t)n); /* fits any inline buffer of 24 */
}

int cm_store_incr(cm_store *s, const char *key, size_t klen, int64_t delta, uint64_t ttl_ms,
                  uint64_t now_us, cm_out *out) {
    uint64_t hash = cm_hash(s->seed, key, klen);
    cm_shard *sh = shard_of(s, hash);
    for (int attempt = 0;; attempt++) {
        pthread_mutex_lock(&sh->mu);
        int rc = incr_locked(s, sh, hash, key, klen, delta, ttl_ms, now_us, out);
        pthread_mutex_unlock(&sh->mu);
        if (rc != MCPG_EAGAIN || attempt > 0 || !cm_store_sweep(s, now_us, SIZE_MAX)) return rc;
    }
}

/* GCRA under the shard's lock: RATE_REFUSED (not MCPG_EAGAIN, which means
 * "full" to the retry below) when the call does not fit. */
enum { RATE_REFUSED = 1 };

static int rate_take_locked(cm_store *s, cm_shard *sh, uint64_t hash, const char *key,
                            size_t klen, const cm_rate *q, uint64_t now_us, cm_out *out) {
    cm_entry **pp = find_live(s, sh, hash, key, klen, now_us);
    int64_t paid = INT64_MIN, t, next;
    if (pp && !cm_parse_int64(entry_val(*pp), (*pp)->vlen, &paid)) return MCPG_EINVAL;
    t = paid > q->now_us ? paid : q->now_us;
    if (__builtin_add_overflow(t, q->interval_us, &next)) return MCPG_ERANGE;
    if (next - q->now_us > q->burst_us) {
        out->number = next - q->burst_us;
        return RATE_REFUSED;
    }
    char text[24];
    int n = snprintf(text, sizeof text, "%lld", (long long)next);
    /* kept until paid-until has passed on the caller's clock, counted on ours */
    uint64_t ttl_ms = (uint64_t)(next - q->now_us) / 1000 + 1;
    int rc = write_locked(s, sh, CM_PUT, hash, key, klen, text, (size_t)n,
                          expiry_for(ttl_ms, now_us), 0, now_us, out);
    if (rc) return rc;
    out->number = next;
    return 0;
}

int cm_store_rate_take(cm_store *s, const char *key, size_t klen, const cm_rate *q,
                       uint64_t now_us, cm_out *out) {
    if (q->interval_us < 1 || q->burst_us < 1) return MCPG_EINVAL;
    uint64_t hash = cm_hash(s->seed, key, klen);
    cm_shard *sh = shard_of(s, hash);
    for (int attempt = 0;; attempt++) {
        pthread_mutex_lock(&sh->mu);
        int rc = rate_take_locked(s, sh, hash, key, klen, q, now_us, out);
        pthread_mutex_unlock(&sh->mu);
        if (rc == RATE_REFUSED) return MCPG_EAGAIN;
        if (rc != MCPG_EAGAIN || attempt > 0 || !cm_store_sweep(s, now_us, SIZE_MAX)) return rc;
    }
}

int cm_store_del(cm_store *s, const char *key, size_t klen, uint64_t now_us, cm_out *out) {
    uint64_t hash = cm_hash(s->seed, key, klen);
    cm_shard *sh = shard_of(s, hash);
    pthread_mutex_lock(&sh->mu);
    cm_entry **pp = find_live(s, sh, hash, key, klen, now_us);
    int rc = MCPG_ENOENT;
    if (pp) {
        out->revision = (*pp)->revision;
        if (s->log_fn)
            out->seq = s->log_fn(s->log_ctx, CM_LOG_DEL, key, klen, NULL, 0,
                                 atomic_load(&s->revision), 0);
        entry_unlink(s, sh, pp);
        rc = 0;
    }
    pthread_mutex_unlock(&sh->mu);
    return rc;
}

/* ---- sweep ------------------------------------------------------------------ */

static size_t sweep_locked(cm_store *s, cm_shard *sh, uint64_t now_us, size_t budget) {
    size_t n = 0;
    while (n < budget && sh->heap_n && sh->heap[0]->expires_us <= now_us) {
        cm_entry *e = sh->heap[0];
        entry_unlink(s, sh, find_link(sh, e->hash, e->bytes, e->klen));
        n++;
    }
    return n;
}

size_t cm_store_sweep(cm_store *s, uint64_t now_us, size_t budget) {
    size_t total = 0;
    for (size_t i = 0; i < CM_SHARDS && total < budget; i++) {
        cm_shard *sh = &s->shards[i];
        size_t got;
        do {
            size_t chunk = budget - total < CM_SWEEP_CHUNK ? budget - total : CM_SWEEP_CHUNK;
            pthread_mutex_lock(&sh->mu);
            got = sweep_locked(s, sh, now_us, chunk);
            pthread_mutex_unlock(&sh->mu);
            total += got;
        } while (got == CM_SWEEP_CHUNK && total < budget);
    }
    return total;
}

/* ---- scan ------------------------------------------------------------------- */

void cm_scan_release(const mcpg_host *h, cm_scan_out *out) {
    h->free(out->keys);
    h->free(out->items);
    *out = (cm_scan_out){0};
}

static int scan_add(const mcpg_host *h, cm_scan_out *out, const cm_entry *e) {
    if (out->n == out->ncap) {
        size_t cap = out->ncap ? out->ncap * 2 : 16;
        cm_scan_item *p = h->realloc(out->items, cap * sizeof *p);
        if (!p) return MCPG_ENOMEM;
        out->items = p;
        out->ncap = cap;
    }
    if (out->len + e->klen + 1 > out->cap) {
        size_t cap = out->cap ? out->cap : 256;
        while (cap < out->len + e->klen + 1) cap *= 2;
        char *p = h->realloc(out->keys, cap);
        if (!p) return MCPG_ENOMEM;
        out->keys = p;
        out->cap = cap;
    }
    memcpy(out->keys + out->len, e->bytes, e->klen);
    out->keys[out->len + e->klen] = '\0';
    out->items[out->n++] = (cm_scan_item){out->len, e->klen, e->revision};
    out->len += e->klen + 1;
    return 0;
}

static int scan_shard(cm_shard *sh, const mcpg_host *h, const char *prefix, size_t plen,
                      uint64_t now_us, size_t max_items, cm_scan_out *out) {
    for (size_t b = 0; b <= sh->mask; b++)
        for (const cm_entry *e = sh->buckets[b]; e; e = e->next) {
            if (e->klen < plen || (plen && memcmp(e->bytes, prefix, plen) != 0)) continue;
            if (entry_expired(e, now_us)) continue;
            if (out->n == max_items) return MCPG_ERANGE;
            int rc = scan_add(h, out, e);
            if (rc) return rc;
        }
    return 0;
}

/* Bytewise, a shorter key first on a tie; keys is the scan's key text. */
static int item_cmp(const void *a, const void *b, void *keys) {
    const cm_scan_item *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp((const char *)keys + x->off, (const char *)keys + y->off, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

int cm_store_scan(cm_store *s, const char *prefix, size_t plen, uint64_t now_us,
                  size_t max_items, cm_scan_out *out) {
    int rc = 0;
    for (size_t i = 0; i < CM_SHARDS && rc == 0; i++) {
        cm_shard *sh = &s->shards[i];
        pthread_mutex_lock(&sh->mu);
        rc = scan_shard(sh, s->h, prefix, plen, now_us, max_items, out);
        pthread_mutex_unlock(&sh->mu);
    }
    if (rc == 0 && out->n > 1) qsort_r(out->items, out->n, sizeof *out->items, item_cmp, out->keys);
    return rc;
}

/* ---- the journal's hooks ------------------------------------------------------ */

void cm_store_set_log(cm_store *s, cm_log_fn fn, void *ctx) {
    s->log_fn = fn;
    s->log_ctx = ctx;
}

void cm_store_note_revision(cm_store *s, uint64_t rev) {
    uint64_t cur = atomic_load(&s->revision);
    while (cur < rev && !atomic_compare_exchange_weak(&s->revision, &cur, rev)) {
    }
}

uint64_t cm_store_revision(cm_store *s) { return atomic_load(&s->revision); }

int cm_store_load(cm_store *s, const char *key, size_t klen, const char *val, size_t vlen,
                  uint64_t revision, uint64_t expires_us) {
    uint64_t hash = cm_hash(s->seed, key, klen);
    cm_shard *sh = shard_of(s, hash);
    cm_store_note_revision(s, revision);
    pthread_mutex_lock(&sh->mu);
    cm_entry **pp = find_link(sh, hash, key, klen);
    int rc = 0;
    if (*pp) entry_unlink(s, sh, pp); /* then as new: the bounds are not checked here */
    cm_entry *e = s->h->alloc(sizeof *e + klen + vlen + 1);
    if (!e) {
        rc = MCPG_ENOMEM;
        goto out;
    }
    *e = (cm_entry){.hash = hash, .heap_idx = CM_NO_HEAP, .klen = (uint32_t)klen, .vlen = vlen,
                    .revision = revision};
    memcpy(e->bytes, key, klen);
    if (vlen) memcpy(e->bytes + klen, val, vlen);
    e->bytes[klen + vlen] = '\0';
    if (heap_update(s->h, sh, e, expires_us)) {
        s->h->free(e);
        rc = MCPG_ENOMEM;
        goto out;
    }
    e->next = sh->buckets[hash & sh->mask];
    sh->buckets[hash & sh->mask] = e;
    sh->count++;
    atomic_fetch_add(&s->keys, 1);
    atomic_fetch_add(&s->bytes, klen + vlen);
    maybe_grow(s->h, sh);
out:
    pthread_mutex_unlock(&sh->mu);
    return rc;
}

void cm_store_load_del(cm_store *s, const char *key, size_t klen) {
    uint64_t hash = cm_hash(s->seed, key, klen);
    cm_shard *sh = shard_of(s, hash);
    pthread_mutex_lock(&sh->mu);
    cm_entry **pp = find_link(sh, hash, key, klen);
    if (*pp) entry_unlink(s, sh, pp);
    pthread_mutex_unlock(&sh->mu);
}

void cm_store_each(cm_store *s, size_t shard, uint64_t now_us, cm_each_fn fn, void *ctx) {
    cm_shard *sh = &s->shards[shard];
    pthread_mutex_lock(&sh->mu);
    for (size_t b = 0; b <= sh->mask; b++)
        for (const cm_entry *e = sh->buckets[b]; e; e = e->next)
            if (!entry_expired(e, now_us))
                fn(ctx, e->bytes, e->klen, entry_val(e), e->vlen, e->revision, e->expires_us);
    pthread_mutex_unlock(&sh->mu);
}
