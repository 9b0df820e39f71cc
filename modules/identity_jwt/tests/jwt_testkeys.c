/* identity_jwt tests: keys and tokens (see jwt_testkeys.h). */
#define _GNU_SOURCE
#include "jwt_testkeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>

EVP_PKEY *tk_keygen(const char *alg) {
    if (strcmp(alg, "RS256") == 0) return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    if (strcmp(alg, "ES256") == 0) return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (strcmp(alg, "EdDSA") == 0) return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    return NULL;
}

char *tk_b64url(const void *p, size_t n) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const unsigned char *s = p;
    char *out = malloc(n / 3 * 4 + 5), *o = out;
    if (!out) return NULL;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8 | s[i + 2];
        *o++ = abc[v >> 18];
        *o++ = abc[(v >> 12) & 63];
        *o++ = abc[(v >> 6) & 63];
        *o++ = abc[v & 63];
    }
    if (n - i == 1) {
        *o++ = abc[s[i] >> 2];
        *o++ = abc[(s[i] & 3) << 4];
    } else if (n - i == 2) {
        unsigned v = (unsigned)s[i] << 8 | s[i + 1];
        *o++ = abc[v >> 10];
        *o++ = abc[(v >> 4) & 63];
        *o++ = abc[(v & 15) << 2];
    }
    *o = '\0';
    return out;
}

static char *bn_b64(const BIGNUM *bn, int pad) {
    unsigned char buf[1024];
    int n = pad ? BN_bn2binpad(bn, buf, pad) : BN_bn2bin(bn, buf);
    return n > 0 ? tk_b64url(buf, (size_t)n) : NULL;
}

/* The members that carry the key itself: "kty":...,"n":...,"e":... */
static int key_members(EVP_PKEY *key, char *out, size_t cap) {
    BIGNUM *a = NULL, *b = NULL;
    char *sa = NULL, *sb = NULL;
    int rc = -1;
    if (EVP_PKEY_is_a(key, "RSA") && EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &a) &&
        EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &b) && (sa = bn_b64(a, 0)) &&
        (sb = bn_b64(b, 0))) {
        rc = snprintf(out, cap, "\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"%s\"", sa, sb);
    } else if (EVP_PKEY_is_a(key, "EC") &&
               EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &a) &&
               EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &b) &&
               (sa = bn_b64(a, 32)) && (sb = bn_b64(b, 32))) {
        rc = snprintf(out, cap, "\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"", sa,
                      sb);
    } else if (EVP_PKEY_is_a(key, "ED25519")) {
        unsigned char raw[32];
        size_t n = sizeof raw;
        if (EVP_PKEY_get_raw_public_key(key, raw, &n) == 1 && (sa = tk_b64url(raw, n)))
            rc = snprintf(out, cap, "\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%s\"", sa);
    }
    BN_free(a);
    BN_free(b);
    free(sa);
    free(sb);
    return rc > 0 && (size_t)rc < cap ? 0 : -1;
}

char *tk_jwk(EVP_PKEY *key, const char *alg, const char *kid) {
    char members[2048], *out = NULL;
    if (key_members(key, members, sizeof members) != 0) return NULL;
    if (asprintf(&out, "{%s,\"use\":\"sig\"%s%s%s%s%s%s}", members, alg ? ",\"alg\":\"" : "",
                 alg ? alg : "", alg ? "\"" : "", kid ? ",\"kid\":\"" : "", kid ? kid : "",
                 kid ? "\"" : "") < 0)
        return NULL;
    return out;
}

/* ECDSA's DER signature as JOSE's r||s. */
static int der_to_jose(const unsigned char *der, size_t n, unsigned char out[64]) {
    ECDSA_SIG *s = d2i_ECDSA_SIG(NULL, &der, (long)n);
    if (!s) return -1;
    const BIGNUM *r, *ss;
    ECDSA_SIG_get0(s, &r, &ss);
    int ok = BN_bn2binpad(r, out, 32) == 32 && BN_bn2binpad(ss, out + 32, 32) == 32;
    ECDSA_SIG_free(s);
    return ok ? 0 : -1;
}

char *tk_sign(EVP_PKEY *key, const char *alg, const char *input, size_t n) {
    unsigned char sig[1024], jose[64];
    size_t len = sizeof sig;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    const char *md = strcmp(alg, "EdDSA") == 0 ? NULL : "SHA256";
    int ok = ctx && EVP_DigestSignInit_ex(ctx, NULL, md, NULL, NULL, key, NULL) == 1 &&
             EVP_DigestSign(ctx, sig, &len, (const unsigned char *)input, n) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok) return NULL;
    if (strcmp(alg, "ES256") == 0) {
        if (der_to_jose(sig, len, jose) != 0) return NULL;
        return tk_b64url(jose, sizeof jose);
    }
    return tk_b64url(sig, len);
}

char *tk_token(EVP_PKEY *key, const char *alg, const char *header_json, const char *claims_json) {
    char *h = tk_b64url(header_json, strlen(header_json));
    char *c = tk_b64url(claims_json, strlen(claims_json));
    char *input = NULL, *sig = NULL, *out = NULL;
    if (h && c && asprintf(&input, "%s.%s", h, c) > 0 &&
        (sig = tk_sign(key, alg, input, strlen(input))) &&
        asprintf(&out, "%s.%s", input, sig) < 0)
        out = NULL;
    free(h);
    free(c);
    free(input);
    free(sig);
    return out;
}
