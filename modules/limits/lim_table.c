/* limits: the lock-free table of counters (lim_table.h). */
#include "lim_table.h"

#include <stdlib.h>
#include <string.h>

int lim_table_init(lim_table *t, size_t max_keys) {
    size_t cap = 16;
    while (cap < max_keys * 2) cap <<= 1; /* at most half full: short probes */
    t->slots = calloc(cap, sizeof *t->slots);
    if (!t->slots) return -1;
    t->mask = cap - 1;
    atomic_init(&t->used, 0);
    atomic_init(&t->max_keys, max_keys);
    return 0;
}

void lim_table_fini(lim_table *t) {
    if (!t->slots) return;
    for (size_t i = 0; i <= t->mask; i++) free(atomic_load(&t->slots[i]));
    free(t->slots);
    t->slots = NULL;
}

/* FNV-1a over the limit's index and the key. */
static uint64_t hash_of(uint32_t limit, const char *key, size_t n) {
    uint64_t h = 1469598103934665603ull ^ limit;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
    return h;
}

static int same(const lim_entry *e, uint64_t h, uint32_t limit, const char *key, size_t n) {
    return e->hash == h && e->limit == limit && e->key_len == n && !memcmp(e->key, key, n);
}

static lim_entry *entry_new(uint64_t h, uint32_t limit, const char *key, size_t n) {
    lim_entry *e = calloc(1, sizeof *e + n + 1);
    if (!e) return NULL;
    e->hash = h;
    e->limit = limit;
    e->key_len = (uint32_t)n;
    memcpy(e->key, key, n);
    return e;
}

/* Count one more key, unless the table already holds max_keys. */
static int reserve(lim_table *t) {
    size_t u = atomic_load(&t->used), max = atomic_load(&t->max_keys);
    do {
        if (u >= max) return 0;
    } while (!atomic_compare_exchange_weak(&t->used, &u, u + 1));
    return 1;
}

/* Give back a reserved key (and the entry made for it): NULL. */
static lim_entry *unreserve(lim_table *t, lim_entry *mine) {
    free(mine);
    atomic_fetch_sub(&t->used, 1);
    return NULL;
}

lim_entry *lim_table_get(lim_table *t, uint32_t limit, const char *key, size_t n) {
    uint64_t h = hash_of(limit, key, n);
    lim_entry *mine = NULL;
    for (size_t i = h & t->mask, probes = 0; probes <= t->mask; i = (i + 1) & t->mask, probes++) {
        lim_entry *e = atomic_load_explicit(&t->slots[i], memory_order_acquire);
        if (!e) {
            if (!mine) {
                if (!reserve(t)) return NULL;
                if (!(mine = entry_new(h, limit, key, n))) return unreserve(t, NULL);
            }
            if (atomic_compare_exchange_strong_explicit(&t->slots[i], &e, mine,
                                                        memory_order_acq_rel,
                                                        memory_order_acquire))
                return mine;
        }
        if (same(e, h, limit, key, n)) {
            if (mine) unreserve(t, mine);
            return e;
        }
    }
    return mine ? unreserve(t, mine) : NULL;
}
