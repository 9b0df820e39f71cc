/* upcred: the token cache. A fixed array of entries (cache_entries of
 * them, allocated once), found through a chained hash of their keys; a miss
 * with every entry taken reuses the least recently used one that is not
 * being fetched. An entry holds a token, or the failure of its key's last
 * request (its back-off): failures take the same room, so they never grow
 * the cache past its bound. The caller holds the upcred's lock. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "upcred_internal.h"

static size_t bucket_of(const upcred_cache *c, const unsigned char key[32]) {
    uint64_t h;
    memcpy(&h, key, sizeof h); /* the key is a SHA-256: its bytes are spread already */
    return (size_t)h & (c->nbuckets - 1);
}

int upcred_cache_init(upcred_cache *c, size_t cap) {
    *c = (upcred_cache){.cap = cap, .nbuckets = 16};
    while (c->nbuckets < cap * 2) c->nbuckets *= 2;
    c->entries = calloc(cap, sizeof *c->entries);
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    return c->entries && c->buckets ? 0 : -1;
}

/* The token and the last failure's message go; the count of failures
 * stays (upcred_entry_failed doubles from it). */
static void wipe_line(upcred_entry *e) {
    if (e->line) explicit_bzero(e->line, e->line_len);
    free(e->line);
    free(e->error);
    e->line = e->error = NULL;
    e->line_len = 0;
    e->expires_us = 0;
}

void upcred_cache_free(upcred_cache *c) {
    for (size_t i = 0; c->entries && i < c->used; i++) wipe_line(&c->entries[i]);
    free(c->entries);
    free(c->buckets);
    *c = (upcred_cache){0};
}

upcred_entry *upcred_cache_find(upcred_cache *c, const unsigned char key[32]) {
    for (upcred_entry *e = c->buckets[bucket_of(c, key)]; e; e = e->hnext)
        if (memcmp(e->key, key, 32) == 0) {
            e->last_use = ++c->clock;
            return e;
        }
    return NULL;
}

static void unlink_entry(upcred_cache *c, upcred_entry *e) {
    for (upcred_entry **pp = &c->buckets[bucket_of(c, e->key)]; *pp; pp = &(*pp)->hnext)
        if (*pp == e) {
            *pp = e->hnext;
            break;
        }
    e->hnext = NULL;
}

void upcred_cache_drop(upcred_cache *c, upcred_entry *e) {
    if (!e->used) return;
    unlink_entry(c, e);
    wipe_line(e);
    e->used = 0;
    e->fetching = 0;
}

static upcred_entry *free_entry(upcred_cache *c) {
    if (c->used < c->cap) return &c->entries[c->used++];
    upcred_entry *oldest = NULL;
    for (size_t i = 0; i < c->cap; i++) {
        upcred_entry *e = &c->entries[i];
        if (!e->used) return e;
        if (!e->fetching && (!oldest || e->last_use < oldest->last_use)) oldest = e;
    }
    if (oldest) upcred_cache_drop(c, oldest);
    return oldest;
}

upcred_entry *upcred_cache_add(upcred_cache *c, const unsigned char key[32]) {
    upcred_entry *e = free_entry(c);
    if (!e) return NULL;
    *e = (upcred_entry){.used = 1, .last_use = ++c->clock};
    memcpy(e->key, key, 32);
    size_t b = bucket_of(c, key);
    e->hnext = c->buckets[b];
    c->buckets[b] = e;
    return e;
}

void upcred_entry_set_line(upcred_entry *e, char *line, size_t len, int64_t expires_us) {
    wipe_line(e);
    e->line = line;
    e->line_len = len;
    e->expires_us = expires_us;
    e->failures = 0;
    e->retry_us = 0;
}

void upcred_entry_failed(upcred_entry *e, const char *why, int64_t now_us, int64_t min_ms,
                         int64_t max_ms) {
    char *copy = strdup(why); /* NULL: the calls in the window say less, still fail */
    wipe_line(e);             /* a stale token is of no use now either */
    e->error = copy;
    int64_t ms = min_ms;
    for (uint32_t i = 0; i < e->failures && ms < max_ms; i++) ms *= 2;
    if (e->failures < UINT32_MAX) e->failures++;
    e->retry_us = now_us + (ms < max_ms ? ms : max_ms) * 1000;
}

int64_t upcred_entry_backoff_left(const upcred_entry *e, int64_t now_us) {
    return !e->line && !e->fetching && e->retry_us > now_us ? e->retry_us - now_us : 0;
}
