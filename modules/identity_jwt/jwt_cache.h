/* identity_jwt: tokens whose signature verified, remembered per loop so a
 * client sending the same token again is spared the public-key operation
 * (15 to 75 µs; see README "Cost"). An entry is the SHA-256 of the whole
 * token, the key set generation it verified under and when it stops
 * counting (exp + skew): a new key set (a refresh, a reload) makes every
 * entry of the old one miss. The claims are judged again on every call;
 * only the signature is remembered.
 *
 * One table per loop, direct-mapped (a new entry replaces whatever had its
 * slot): bounded, no lock, no allocation after create. */
#ifndef JWT_CACHE_H
#define JWT_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct jwt_caches jwt_caches;

/* Tables of `slots` entries (rounded down to a power of two) for `loops`
 * loops; NULL when slots is 0 (no cache) or out of memory. */
jwt_caches *jwt_caches_new(uint32_t loops, size_t slots);
void jwt_caches_free(jwt_caches *c);

/* On loop `loop`'s thread: the token's SHA-256, with that loop's own
 * digest context. 0, or -1 (no cache, or OpenSSL failed). */
int jwt_cache_hash(jwt_caches *c, uint32_t loop, const char *token, size_t n,
                   unsigned char out[32]);

/* On loop `loop`'s thread. 1 when the token verified under key set `gen` and
 * its entry still counts at now_s. */
int jwt_cache_hit(jwt_caches *c, uint32_t loop, const unsigned char hash[32], uint64_t gen,
                  int64_t now_s);
void jwt_cache_put(jwt_caches *c, uint32_t loop, const unsigned char hash[32], uint64_t gen,
                   int64_t until_s);

#endif
