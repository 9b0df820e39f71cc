/* identity_jwt: JWKS parsing into OpenSSL 3 public keys (see jwt_keys.h). */
#define _GNU_SOURCE
#include "jwt_keys.h"

#include <mcpg/sdk.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>

#include "jwt_b64.h"

#define JWK_FIELD_MAX 1024 /* decoded bytes of n (8192-bit RSA), x, y, e */

static const struct {
    const char *name;
    unsigned bit;
} ALGS[] = {{"RS256", JWT_RS256}, {"ES256", JWT_ES256}, {"EdDSA", JWT_EDDSA}};

const char *jwt_alg_name(unsigned alg) {
    for (size_t i = 0; i < sizeof ALGS / sizeof ALGS[0]; i++)
        if (ALGS[i].bit == alg) return ALGS[i].name;
    return NULL;
}

unsigned jwt_alg_of(const char *s, size_t n) {
    for (size_t i = 0; i < sizeof ALGS / sizeof ALGS[0]; i++)
        if (strlen(ALGS[i].name) == n && memcmp(ALGS[i].name, s, n) == 0) return ALGS[i].bit;
    return 0;
}

/* ---- one JWK ------------------------------------------------------------ */

typedef struct jwk_text {
    const char *obj;
    size_t n;
    char why[160]; /* why the key is skipped */
} jwk_text;

static int skip(jwk_text *j, const char *fmt, ...) MCPG_PRINTF(2, 3);
static int skip(jwk_text *j, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->why, sizeof j->why, fmt, ap);
    va_end(ap);
    return -1;
}

/* A string member, decoded: 1 found (into dst, cap bytes), 0 absent, -1 not a
 * string or too long. */
static int member_str(jwk_text *j, const char *key, char *dst, size_t cap, size_t *len) {
    mcpg_json_span v;
    if (mcpg_json_object_get(j->obj, j->n, key, &v) != 1) return 0;
    if (v.type != MCPG_JSON_STRING || mcpg_json_string_decode(&v, dst, cap, len) != 0)
        return skip(j, "\"%s\" is not a string of at most %zu bytes", key, cap - 1);
    return 1;
}

/* A base64url member, decoded into dst (cap bytes). */
static int member_b64(jwk_text *j, const char *key, unsigned char *dst, size_t cap, size_t *len) {
    char text[JWK_FIELD_MAX * 4 / 3 + 8];
    size_t tl;
    int rc = member_str(j, key, text, sizeof text, &tl);
    if (rc == 0) return skip(j, "no \"%s\"", key);
    if (rc < 0) return -1;
    if (jwt_b64url_decode(text, tl, dst, cap, len) != 0 || *len == 0)
        return skip(j, "\"%s\" is not base64url (unpadded) of at most %zu bytes", key, cap);
    return 0;
}

static EVP_PKEY *from_params(const char *type, OSSL_PARAM_BLD *bld) {
    EVP_PKEY *pk = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params && ctx && EVP_PKEY_fromdata_init(ctx) == 1 &&
        EVP_PKEY_fromdata(ctx, &pk, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pk = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pk;
}

/* The key is what it claims: a point on its curve, a sane RSA modulus. */
static int public_ok(EVP_PKEY *pk) {
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pk, NULL);
    int ok = ctx && EVP_PKEY_public_check(ctx) == 1;
    EVP_PKEY_CTX_free(ctx);
    return ok;
}

static EVP_PKEY *rsa_key(jwk_text *j) {
    unsigned char n[JWK_FIELD_MAX], e[16];
    size_t nl, el;
    if (member_b64(j, "n", n, sizeof n, &nl) || member_b64(j, "e", e, sizeof e, &el)) return NULL;
    BIGNUM *bn = BN_bin2bn(n, (int)nl, NULL), *be = BN_bin2bn(e, (int)el, NULL);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pk = NULL;
    if (bn && be && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
        pk = from_params("RSA", bld);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    if (!pk) {
        skip(j, "not a valid RSA public key");
    } else if (EVP_PKEY_get_bits(pk) < JWT_RSA_MIN_BITS) {
        skip(j, "RSA key of %d bits (at least %d)", EVP_PKEY_get_bits(pk), JWT_RSA_MIN_BITS);
        EVP_PKEY_free(pk);
        pk = NULL;
    }
    return pk;
}

static EVP_PKEY *p256_key(jwk_text *j) {
    unsigned char x[JWK_FIELD_MAX], y[JWK_FIELD_MAX], point[65];
    size_t xl, yl;
    if (member_b64(j, "x", x, sizeof x, &xl) || member_b64(j, "y", y, sizeof y, &yl)) return NULL;
    if (xl != 32 || yl != 32) {
        skip(j, "P-256 coordinates must be 32 bytes each");
        return NULL;
    }
    point[0] = 0x04; /* uncompressed */
    memcpy(point + 1, x, 32);
    memcpy(point + 33, y, 32);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pk = NULL;
    if (bld && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) &&
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point))
        pk = from_params("EC", bld);
    OSSL_PARAM_BLD_free(bld);
    if (pk && !public_ok(pk)) {
        EVP_PKEY_free(pk);
        pk = NULL;
    }
    if (!pk) skip(j, "not a point on P-256");
    return pk;
}

static EVP_PKEY *ed25519_key(jwk_text *j) {
    unsigned char x[JWK_FIELD_MAX];
    size_t xl;
    if (member_b64(j, "x", x, sizeof x, &xl)) return NULL;
    EVP_PKEY *pk = xl == 32 ? EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, x, xl) : NULL;
    if (!pk) skip(j, "not an Ed25519 public key (32 bytes)");
    return pk;
}

/* "use" (sig) and "key_ops" (verify), when present, must allow signatures. */
static int for_signatures(jwk_text *j) {
    char use[16];
    size_t ul;
    int rc = member_str(j, "use", use, sizeof use, &ul);
    if (rc < 0) return -1;
    if (rc == 1 && strcmp(use, "sig") != 0) return skip(j, "\"use\" is not \"sig\"");
    mcpg_json_span ops, op;
    if (mcpg_json_object_get(j->obj, j->n, "key_ops", &ops) != 1) return 0;
    size_t it = 0;
    while (ops.type == MCPG_JSON_ARRAY && mcpg_json_array_next(ops.p, ops.n, &it, &op) == 1)
        if (op.type == MCPG_JSON_STRING && mcpg_json_string_eq(&op, "verify", 6) == 1) return 0;
    return skip(j, "\"key_ops\" does not include \"verify\"");
}

/* The algorithm the key's type and curve mean, and its public key. */
static int jwk_parse(jwk_text *j, jwt_key *k) {
    char kty[8], crv[16], alg[16];
    size_t len;
    int rc = member_str(j, "kty", kty, sizeof kty, &len);
    if (rc <= 0) return rc ? -1 : skip(j, "no \"kty\"");
    if (for_signatures(j)) return -1;
    int has_crv = member_str(j, "crv", crv, sizeof crv, &len);
    if (has_crv < 0) return -1;
    if (strcmp(kty, "RSA") == 0) {
        k->alg = JWT_RS256;
    } else if (strcmp(kty, "EC") == 0 && has_crv && strcmp(crv, "P-256") == 0) {
        k->alg = JWT_ES256;
    } else if (strcmp(kty, "OKP") == 0 && has_crv && strcmp(crv, "Ed25519") == 0) {
        k->alg = JWT_EDDSA;
    } else {
        return skip(j, "kty \"%s\"%s%s%s is not supported (RSA, EC P-256, OKP Ed25519)", kty,
                    has_crv ? " crv \"" : "", has_crv ? crv : "", has_crv ? "\"" : "");
    }
    rc = member_str(j, "alg", alg, sizeof alg, &len);
    if (rc < 0) return -1;
    if (rc == 1 && jwt_alg_of(alg, len) != k->alg)
        return skip(j, "alg \"%s\" does not fit its key type (%s expected)", alg,
                    jwt_alg_name(k->alg));
    rc = member_str(j, "kid", k->kid, sizeof k->kid, &k->kid_len);
    if (rc < 0) return -1;
    k->has_kid = rc;
    k->pkey = k->alg == JWT_RS256 ? rsa_key(j) : k->alg == JWT_ES256 ? p256_key(j) : ed25519_key(j);
    return k->pkey ? 0 : -1;
}

/* ---- the set ------------------------------------------------------------ */

static void note(char *notes, size_t cap, size_t i, const char *why) {
    size_t used = strlen(notes);
    if (used < cap)
        snprintf(notes + used, cap - used, "%skeys[%zu]: %s", used ? "; " : "", i, why);
}

static int fail(char *err, size_t cap, const char *msg) {
    snprintf(err, cap, "%s", msg);
    return -1;
}

int jwt_keyset_parse(const char *json, size_t len, jwt_keyset **out, char *err, size_t errcap,
                     char *notes, size_t notescap) {
    mcpg_json_span keys, el;
    if (notescap) notes[0] = '\0';
    if (len > JWT_JWKS_MAX_BYTES) return fail(err, errcap, "the JWKS is larger than 1 MiB");
    if (mcpg_json_validate(json, len) != 0) return fail(err, errcap, "the JWKS is not valid JSON");
    if (mcpg_json_object_get(json, len, "keys", &keys) != 1 || keys.type != MCPG_JSON_ARRAY)
        return fail(err, errcap, "the JWKS is not an object with a \"keys\" array");
    jwt_keyset *ks = calloc(1, sizeof *ks + JWT_KEYS_MAX * sizeof(jwt_key));
    if (!ks) return fail(err, errcap, "out of memory");
    atomic_init(&ks->refs, 1);
    size_t it = 0, i = 0;
    for (; mcpg_json_array_next(keys.p, keys.n, &it, &el) == 1; i++) {
        jwk_text j = {el.p, el.n, ""};
        if (el.type != MCPG_JSON_OBJECT) {
            note(notes, notescap, i, "not an object");
        } else if (ks->n == JWT_KEYS_MAX) {
            note(notes, notescap, i, "more than 64 keys: the rest are ignored");
            break;
        } else if (jwk_parse(&j, &ks->keys[ks->n]) == 0) {
            ks->n++;
        } else {
            note(notes, notescap, i, j.why);
        }
    }
    if (ks->n == 0) {
        snprintf(err, errcap, "the JWKS has no usable signing key (%zu key(s)%s%s)", i,
                 notescap && notes[0] ? ": " : "", notescap ? notes : "");
        jwt_keyset_unref(ks);
        return -1;
    }
    *out = ks;
    return 0;
}

void jwt_keyset_ref(jwt_keyset *ks) {
    atomic_fetch_add_explicit(&ks->refs, 1, memory_order_relaxed);
}

void jwt_keyset_unref(jwt_keyset *ks) {
    if (!ks || atomic_fetch_sub_explicit(&ks->refs, 1, memory_order_acq_rel) != 1) return;
    for (size_t i = 0; i < ks->n; i++) EVP_PKEY_free(ks->keys[i].pkey);
    free(ks);
}

static int same_kid(const jwt_key *k, const char *kid, size_t kid_len) {
    return k->has_kid && k->kid_len == kid_len && memcmp(k->kid, kid, kid_len) == 0;
}

const jwt_key *jwt_keyset_next(const jwt_keyset *ks, unsigned alg, const char *kid,
                               size_t kid_len, int has_kid, size_t *iter) {
    for (; ks && *iter < ks->n; (*iter)++) {
        const jwt_key *k = &ks->keys[*iter];
        if (k->alg == alg && (!has_kid || same_kid(k, kid, kid_len))) {
            (*iter)++;
            return k;
        }
    }
    return NULL;
}

int jwt_keyset_has_kid(const jwt_keyset *ks, const char *kid, size_t kid_len) {
    for (size_t i = 0; ks && i < ks->n; i++)
        if (same_kid(&ks->keys[i], kid, kid_len)) return 1;
    return 0;
}
