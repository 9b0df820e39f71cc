/* The key-value store behind coordinator_memory: shared by every loop thread.
 *
 * Sharded: a key's hash picks one of CM_SHARDS shards, each a chained hash
 * table under its own mutex, so loops writing different keys rarely meet and
 * a table's growth rehashes one shard only. Every function here may be called
 * from any thread; none calls back into its caller or blocks beyond a shard's
 * mutex, held for one key's work (a scan holds each shard for one pass).
 *
 * Time is the caller's: `now_us` is host->mono_us(), so a test can move it. A
 * key whose expiry is <= now_us is absent to every function, swept or not.
 */
#ifndef COORD_STORE_H
#define COORD_STORE_H

#include <mcpg/sdk.h>

#include <stddef.h>
#include <stdint.h>

#define CM_SHARDS 16

typedef struct cm_store cm_store;

/* Where a function copies a value out: into `inline_buf` when it fits, else
 * a host allocation the caller frees with cm_out_release. data is
 * NUL-terminated (data[len] == 0), or NULL when nothing was copied. */
typedef struct cm_out {
    char *inline_buf;
    size_t inline_cap;
    char *heap;
    char *data;
    size_t len;
    uint64_t revision;
    int64_t number;
    uint64_t seq; /* the journal's sequence of the change this op made (0: none) */
} cm_out;

void cm_out_release(const mcpg_host *h, cm_out *out);

/* One key a scan found: its bytes at keys + off (NUL-terminated). */
typedef struct cm_scan_item {
    size_t off, len;
    uint64_t revision;
} cm_scan_item;

typedef struct cm_scan_out {
    char *keys;
    size_t len, cap;
    cm_scan_item *items;
    size_t n, ncap;
} cm_scan_out;

void cm_scan_release(const mcpg_host *h, cm_scan_out *out);

/* How a write treats a key that is there already. */
typedef enum cm_write_mode {
    CM_PUT = 0,           /* replace it */
    CM_PUT_IF_ABSENT = 1, /* leave it: MCPG_EEXIST */
    CM_CAS = 2            /* replace it only at the expected revision: else MCPG_ECONFLICT */
} cm_write_mode;

/* NULL when out of memory. max_keys and max_bytes bound the live keys and
 * their key plus value bytes. seed varies the hash from one store to the
 * next. */
cm_store *cm_store_new(const mcpg_host *h, size_t max_keys, size_t max_bytes, uint64_t seed);
void cm_store_free(cm_store *s);

/* Each returns the op's status (0 or a negative MCPG_ code) and fills `out`:
 *  get     0 with the value, its revision and its number (the value read as a
 *          decimal int64, else 0); MCPG_ENOENT.
 *  write   0 with the new revision; MCPG_EEXIST (put_if_absent) or
 *          MCPG_ECONFLICT (cas) with the current value and revision when
 *          there is one; MCPG_EAGAIN when the store is full. ttl_ms 0 = none;
 *          the write sets the key's expiry anew either way. For CM_CAS,
 *          expected 0 means "absent".
 *  incr    0 with number, revision and the decimal text; an absent key
 *          counts from 0 and takes ttl_ms, a present one keeps its expiry;
 *          MCPG_EINVAL when the value is not a decimal int64, MCPG_ERANGE on
 *          overflow, MCPG_EAGAIN when full.
 *  del     0 with the revision the key had; MCPG_ENOENT.
 * Any of them: MCPG_ENOMEM (nothing changed). */
int cm_store_get(cm_store *s, const char *key, size_t klen, uint64_t now_us, cm_out *out);
int cm_store_write(cm_store *s, cm_write_mode mode, const char *key, size_t klen,
                   const char *val, size_t vlen, uint64_t ttl_ms, uint64_t expected,
                   uint64_t now_us, cm_out *out);
int cm_store_incr(cm_store *s, const char *key, size_t klen, int64_t delta, uint64_t ttl_ms,
                  uint64_t now_us, cm_out *out);
int cm_store_del(cm_store *s, const char *key, size_t klen, uint64_t now_us, cm_out *out);

/* One GCRA step (the coordinator ABI's rate_take): now_us here is the
 * caller's clock; the store's own (for expiry) is the function's now_us. 0
 * with out->number = the new paid-until, MCPG_EAGAIN (nothing changed) with
 * out->number = the earliest caller time one call fits, MCPG_EINVAL,
 * MCPG_ERANGE, MCPG_ENOMEM. */
typedef struct cm_rate { int64_t now_us, interval_us, burst_us; } cm_rate;
int cm_store_rate_take(cm_store *s, const char *key, size_t klen, const cm_rate *q,
                       uint64_t now_us, cm_out *out);

/* The live keys starting with prefix (plen 0: all), sorted bytewise. Not a
 * snapshot: shards are visited one after the other, so a key written during
 * the scan may or may not be in it; one live throughout is, once. 0, or
 * MCPG_ERANGE when more than max_items matched (out holds the first
 * max_items found, unsorted order of shards), MCPG_ENOMEM. */
int cm_store_scan(cm_store *s, const char *prefix, size_t plen, uint64_t now_us,
                  size_t max_items, cm_scan_out *out);

/* Remove expired keys, at most `budget`; returns how many went. Short lock
 * holds: a shard is let go every few hundred keys. */
size_t cm_store_sweep(cm_store *s, uint64_t now_us, size_t budget);

/* Live keys and their bytes, expired-but-unswept ones included. */
void cm_store_usage(cm_store *s, size_t *keys, size_t *bytes);

/* ---- the journal's hooks (coord_journal.c) ----------------------------------
 * With a log function set, every change an op makes (not an expiry, not a
 * sweep) is reported under the key's shard lock, after it took effect, as the
 * key's whole new state: CM_LOG_PUT with its value, revision and expiry
 * (monotonic us, 0: none), or CM_LOG_DEL with the store's revision counter.
 * Under the lock, so the records of one key are reported in the order the
 * key changed; a record is a state, not a step, so replaying one twice is
 * harmless. The function returns the record's sequence (out->seq), 0 when it
 * could not keep it. */
enum { CM_LOG_PUT = 'P', CM_LOG_DEL = 'D', CM_LOG_REV = 'R' };
typedef uint64_t (*cm_log_fn)(void *ctx, int type, const char *key, size_t klen,
                              const char *val, size_t vlen, uint64_t revision,
                              uint64_t expires_us);
void cm_store_set_log(cm_store *s, cm_log_fn fn, void *ctx);

/* Replay: set key's state as a record says (bounds not enforced: a journal
 * written under larger bounds still loads), remove it, raise the revision
 * counter to at least rev. */
int cm_store_load(cm_store *s, const char *key, size_t klen, const char *val, size_t vlen,
                  uint64_t revision, uint64_t expires_us);
void cm_store_load_del(cm_store *s, const char *key, size_t klen);
void cm_store_note_revision(cm_store *s, uint64_t rev);
uint64_t cm_store_revision(cm_store *s);

/* Every live key of shard i (0..CM_SHARDS-1), under its lock: fn must not
 * call the store. */
typedef void (*cm_each_fn)(void *ctx, const char *key, size_t klen, const char *val,
                           size_t vlen, uint64_t revision, uint64_t expires_us);
void cm_store_each(cm_store *s, size_t shard, uint64_t now_us, cm_each_fn fn, void *ctx);

/* The whole of s[0..n) as a decimal int64: 1 and *out, else 0. */
int cm_parse_int64(const char *s, size_t n, int64_t *out);

#endif
