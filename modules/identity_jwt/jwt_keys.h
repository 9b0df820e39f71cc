/* identity_jwt: signing keys. A key set is parsed once from a JWKS document
 * (RFC 7517) and is then immutable and shared by every loop, counted by
 * references: a refresh publishes a new set while calls still verify with
 * the old one.
 *
 * Each key verifies exactly one algorithm, decided by its own type: an RSA
 * key RS256, an EC P-256 key ES256, an OKP Ed25519 key EdDSA. A JWK "alg"
 * member, when present, must name that same algorithm, so a token whose
 * header asks for another algorithm never reaches the key (the algorithm
 * confusion attacks: HS256 keyed with the RSA public key, and the like). */
#ifndef JWT_KEYS_H
#define JWT_KEYS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

/* The algorithms the module verifies (bits, for the `algorithms` setting). */
#define JWT_RS256 (1u << 0)
#define JWT_ES256 (1u << 1)
#define JWT_EDDSA (1u << 2)
#define JWT_ALGS_ALL (JWT_RS256 | JWT_ES256 | JWT_EDDSA)

#define JWT_KID_MAX 256       /* bytes of a key id */
#define JWT_KEYS_MAX 64       /* keys kept from one JWKS */
#define JWT_JWKS_MAX_BYTES (1u << 20)
#define JWT_RSA_MIN_BITS 2048

/* "RS256", "ES256", "EdDSA" for one bit; NULL otherwise. */
const char *jwt_alg_name(unsigned alg);
/* The bit of an algorithm name, 0 when it is not one of the three. */
unsigned jwt_alg_of(const char *s, size_t n);

typedef struct jwt_key {
    char kid[JWT_KID_MAX + 1];
    size_t kid_len;
    int has_kid;
    unsigned alg;   /* the one algorithm it verifies */
    EVP_PKEY *pkey; /* public key; read-only once published */
} jwt_key;

typedef struct jwt_keyset {
    atomic_uint refs;
    size_t n;
    jwt_key keys[];
} jwt_keyset;

/* Parse a JWKS document ({"keys":[...]}): keys that are unusable here (not
 * for signatures, another type, curve or algorithm, RSA under 2048 bits,
 * a point not on its curve) are skipped and each is described in `notes`
 * ("keys[2]: ..." lines separated by "; "), for the log. 0 with *out (one
 * reference, the caller's), or -1 with err: not a JWKS, or no usable key. */
int jwt_keyset_parse(const char *json, size_t len, jwt_keyset **out, char *err, size_t errcap,
                     char *notes, size_t notescap);
void jwt_keyset_ref(jwt_keyset *ks);
void jwt_keyset_unref(jwt_keyset *ks); /* NULL allowed */

/* The keys that may verify a token with this header: with a kid, the keys of
 * that kid; without, every key. The next candidate from *iter (start at 0)
 * whose algorithm is `alg`, or NULL. */
const jwt_key *jwt_keyset_next(const jwt_keyset *ks, unsigned alg, const char *kid,
                               size_t kid_len, int has_kid, size_t *iter);
/* 1 when the set has a key with this kid (of any algorithm). */
int jwt_keyset_has_kid(const jwt_keyset *ks, const char *kid, size_t kid_len);

#endif
