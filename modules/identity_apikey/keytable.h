/* identity_apikey's key table: the keys file read into memory, and the
 * constant-time lookup of a presented key's SHA-256 in it.
 *
 * The file is a JSON array, one object per key:
 *   [{"sha256": "<64 hex digits>", "principal": "alice", "tenant": "acme",
 *     "roles": ["reader"], "comment": "laptop", "created": "2026-07-28"}]
 * sha256 and principal are required; tenant, roles, comment and created are
 * optional (comment and created are for people and are not used). A table is
 * immutable once loaded: readers share it without locks.
 */
#ifndef IDKEY_KEYTABLE_H
#define IDKEY_KEYTABLE_H

#include <mcpg/sdk.h>

#include <stddef.h>
#include <stdint.h>

#define KEYTABLE_HASH_LEN 32              /* SHA-256 */
#define KEYTABLE_MAX_FILE_BYTES (16u << 20)
#define KEYTABLE_MAX_NAME 256             /* principal, tenant: bytes */
#define KEYTABLE_MAX_ROLE 128             /* one role: bytes */
#define KEYTABLE_MAX_ROLES 64             /* roles of one key */

/* Who one key is. Strings live in the table's own block. */
typedef struct keytable_entry {
    const char *principal;
    const char *tenant;      /* or NULL */
    const char *const *roles;
    uint32_t n_roles;
    const char *roles_csv;   /* the same roles comma-separated, for ABI 1.0 hosts (or NULL) */
} keytable_entry;

typedef struct keytable {
    size_t n;
    /* The hashes apart from the entries, contiguous: the lookup reads every
     * one of them on every call, so they stay together in cache. */
    const uint8_t (*hashes)[KEYTABLE_HASH_LEN];
    const keytable_entry *entries;
} keytable;

/* Where a load reports each problem: one line that names the file, the
 * entry index and the field ("keys.json: [2].sha256: must be ..."). */
typedef void (*keytable_err_fn)(void *ctx, const char *message);

/* Read and check the file at `path`. Every problem goes to err (at most
 * KEYTABLE_MAX_ERRORS of them, then one saying how many more). On success
 * *out is a new table (free it with keytable_free) and the result is 0;
 * otherwise MCPG_ECONFIG (or MCPG_ENOMEM) and *out is NULL. */
#define KEYTABLE_MAX_ERRORS 20
int keytable_load(const mcpg_host *h, const char *path, keytable **out, keytable_err_fn err,
                  void *ctx);
void keytable_free(const mcpg_host *h, keytable *t);

/* The index of the entry whose hash is `hash`, or -1. Compares against every
 * entry with CRYPTO_memcmp and keeps going after a match, so the time taken
 * says nothing about whether or where the hash is in the table. */
long keytable_find(const keytable *t, const uint8_t hash[KEYTABLE_HASH_LEN]);

#endif
