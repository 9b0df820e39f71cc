/* identity_jwt: the per-loop cache of verified signatures (see jwt_cache.h). */
#include "jwt_cache.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

typedef struct slot {
    unsigned char hash[32];
    uint64_t gen; /* 0: empty (key set generations start at 1) */
    int64_t until_s;
} slot;

struct jwt_caches {
    uint32_t loops;
    size_t mask;
    slot *slots;          /* loops * (mask + 1) */
    EVP_MD *sha256;       /* fetched once: a fetch per call takes the provider's lock */
    EVP_MD_CTX **hashers; /* one per loop, made on first use there */
};

jwt_caches *jwt_caches_new(uint32_t loops, size_t slots) {
    if (!slots || !loops) return NULL;
    size_t n = 1;
    while (n * 2 <= slots) n *= 2;
    jwt_caches *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->slots = calloc((size_t)loops * n, sizeof(slot));
    c->hashers = calloc(loops, sizeof *c->hashers);
    c->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (!c->slots || !c->hashers || !c->sha256) {
        jwt_caches_free(c);
        return NULL;
    }
    c->loops = loops;
    c->mask = n - 1;
    return c;
}

void jwt_caches_free(jwt_caches *c) {
    if (!c) return;
    for (uint32_t i = 0; c->hashers && i < c->loops; i++) EVP_MD_CTX_free(c->hashers[i]);
    free(c->hashers);
    EVP_MD_free(c->sha256);
    free(c->slots);
    free(c);
}

int jwt_cache_hash(jwt_caches *c, uint32_t loop, const char *token, size_t n,
                   unsigned char out[32]) {
    if (!c || loop >= c->loops) return -1;
    EVP_MD_CTX **x = &c->hashers[loop];
    unsigned len = 0;
    if (!*x && !(*x = EVP_MD_CTX_new())) return -1;
    if (EVP_DigestInit_ex2(*x, c->sha256, NULL) != 1 || EVP_DigestUpdate(*x, token, n) != 1 ||
        EVP_DigestFinal_ex(*x, out, &len) != 1 || len != 32)
        return -1;
    return 0;
}

static slot *slot_of(jwt_caches *c, uint32_t loop, const unsigned char hash[32]) {
    if (!c || loop >= c->loops) return NULL;
    uint64_t h;
    memcpy(&h, hash, sizeof h);
    return &c->slots[(size_t)loop * (c->mask + 1) + (h & c->mask)];
}

int jwt_cache_hit(jwt_caches *c, uint32_t loop, const unsigned char hash[32], uint64_t gen,
                  int64_t now_s) {
    slot *s = slot_of(c, loop, hash);
    return s && s->gen == gen && now_s < s->until_s && memcmp(s->hash, hash, 32) == 0;
}

void jwt_cache_put(jwt_caches *c, uint32_t loop, const unsigned char hash[32], uint64_t gen,
                   int64_t until_s) {
    slot *s = slot_of(c, loop, hash);
    if (!s) return;
    memcpy(s->hash, hash, 32);
    s->gen = gen;
    s->until_s = until_s;
}
