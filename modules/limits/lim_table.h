/* limits: one counter per (limit, key), found without a lock.
 *
 * Open addressing over a fixed power-of-two array of atomic pointers:
 * entries are only ever added (freed with the table), so a lookup is plain
 * loads and an insert one compare-and-swap on an empty slot. The table is
 * bounded by max_keys; when it is full, lim_table_get answers NULL and the
 * module refuses the call rather than grow without bound. */
#ifndef LIM_TABLE_H
#define LIM_TABLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lim_entry {
    uint64_t hash;
    uint32_t limit;                /* index of the limit */
    uint32_t key_len;
    _Atomic int64_t counter;       /* concurrency: in flight; rate: paid-until */
    _Atomic uint64_t budget;       /* budget: window << 32 | calls */
    _Atomic int64_t refused_until; /* mono us: a remembered refusal (global) */
    _Atomic uint32_t next_slot;    /* global caps: where to try a slot key first */
    char key[];                    /* NUL-terminated */
} lim_entry;

typedef struct lim_table {
    _Atomic(lim_entry *) *slots;
    size_t mask;
    _Atomic size_t used, max_keys;
} lim_table;

int lim_table_init(lim_table *t, size_t max_keys);
void lim_table_fini(lim_table *t);
/* The entry of (limit, key[0..n)), created at zero when new; NULL when the
 * table is full or out of memory. */
lim_entry *lim_table_get(lim_table *t, uint32_t limit, const char *key, size_t n);

#endif
