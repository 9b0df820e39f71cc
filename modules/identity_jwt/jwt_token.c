/* identity_jwt: taking a JWS apart and checking its signature (see
 * jwt_token.h). */
#define _GNU_SOURCE
#include "jwt_token.h"

#include <mcpg/sdk.h>

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jwt_b64.h"

#define MEMBERS_MAX 128   /* header members or claims in one token */
#define MEMBER_NAME_MAX 256

/* Every JOSE header is a JSON object, whose base64url begins "eyJ" ('{"'):
 * that and the dots tell a JWT from an API key without decoding anything.
 * A JWS has three parts (the signature's may be empty: alg none), a JWE five. */
jwt_shape jwt_shape_of(const char *s, size_t n) {
    if (n < 3 || memcmp(s, "eyJ", 3) != 0) return JWT_SHAPE_OTHER;
    size_t parts = 0, pos = 0, len[5];
    for (;;) {
        size_t span = jwt_b64url_span(s + pos, n - pos);
        len[parts++] = span;
        pos += span;
        if (pos == n) break;
        if (s[pos] != '.' || parts == 5) return JWT_SHAPE_OTHER;
        pos++;
    }
    if (parts == 3 && len[1] > 0) return JWT_SHAPE_JWS;
    return parts == 5 ? JWT_SHAPE_JWE : JWT_SHAPE_OTHER;
}

/* ---- duplicate members ---------------------------------------------------
 * A token whose claims name a member twice is read differently by different
 * parsers (first wins here, last wins elsewhere): refused outright. */

static int same_name(const mcpg_json_span *a, const mcpg_json_span *b, char *scratch) {
    if (!a->escaped && !b->escaped) return a->n == b->n && memcmp(a->p, b->p, a->n) == 0;
    size_t len;
    if (mcpg_json_string_decode(b, scratch, MEMBER_NAME_MAX + 1, &len) != 0) return -1;
    return mcpg_json_string_eq(a, scratch, len) == 1;
}

int jwt_json_unique_members(const char *obj, size_t n) {
    mcpg_json_span names[MEMBERS_MAX], key, val;
    char scratch[MEMBER_NAME_MAX + 1];
    size_t it = 0, count = 0;
    int rc;
    while ((rc = mcpg_json_object_next_trusted(obj, n, &it, &key, &val)) == 1) {
        if (count == MEMBERS_MAX || key.n > MEMBER_NAME_MAX * 6) return -1;
        for (size_t i = 0; i < count; i++)
            if (same_name(&names[i], &key, scratch) != 0) return -1;
        names[count++] = key;
    }
    return rc == 0 ? 0 : -1;
}

/* ---- the header --------------------------------------------------------- */

static int is_object(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && memchr(" \t\r\n", s[i], 4)) i++;
    return i < n && s[i] == '{' && mcpg_json_validate(s, n) == 0;
}

/* A base64url part decoded into t->buf at *used, NUL-terminated. */
static int decode_part(jwt_token *t, const char *s, size_t n, size_t cap, size_t *used,
                       const char **out, size_t *out_len) {
    size_t len;
    unsigned char *dst = t->buf + *used;
    if (jwt_b64url_decode(s, n, dst, cap - *used - 1, &len) != 0) return -1;
    dst[len] = '\0';
    *out = (const char *)dst;
    *out_len = len;
    *used += len + 1;
    return 0;
}

static jwt_verdict alg_verdict(const mcpg_json_span *v, unsigned algs, unsigned *alg) {
    char name[16];
    size_t n;
    if (v->type != MCPG_JSON_STRING) return JWT_BAD_HEADER;
    if (mcpg_json_string_decode(v, name, sizeof name, &n) != 0) return JWT_ALG_UNSUPPORTED;
    if (strcasecmp(name, "none") == 0) return JWT_ALG_NONE;
    if (n == 5 && strncmp(name, "HS", 2) == 0) return JWT_ALG_HMAC;
    *alg = jwt_alg_of(name, n);
    if (!*alg) return JWT_ALG_UNSUPPORTED;
    return *alg & algs ? JWT_OK : JWT_ALG_NOT_ALLOWED;
}

static int typ_ok(const mcpg_json_span *v) {
    char typ[32];
    size_t n;
    if (v->type != MCPG_JSON_STRING || mcpg_json_string_decode(v, typ, sizeof typ, &n) != 0)
        return 0;
    const char *t = strncasecmp(typ, "application/", 12) == 0 ? typ + 12 : typ;
    return strcasecmp(t, "JWT") == 0 || strcasecmp(t, "at+jwt") == 0;
}

static jwt_verdict read_header(jwt_token *t, unsigned algs) {
    mcpg_json_span v;
    if (mcpg_json_object_get_trusted(t->header, t->header_len, "alg", &v) != 1) return JWT_BAD_HEADER;
    jwt_verdict r = alg_verdict(&v, algs, &t->alg);
    if (r != JWT_OK) return r;
    if (mcpg_json_object_get_trusted(t->header, t->header_len, "crit", &v) == 1) return JWT_CRIT;
    if (mcpg_json_object_get_trusted(t->header, t->header_len, "typ", &v) == 1 && !typ_ok(&v))
        return JWT_TYP;
    if (mcpg_json_object_get_trusted(t->header, t->header_len, "kid", &v) == 1) {
        if (v.type != MCPG_JSON_STRING ||
            mcpg_json_string_decode(&v, t->kid, sizeof t->kid, &t->kid_len) != 0)
            return JWT_BAD_HEADER;
        t->has_kid = 1;
    }
    return JWT_OK;
}

jwt_verdict jwt_token_open(jwt_token *t, const char *text, size_t n, unsigned algs) {
    memset(t, 0, sizeof *t);
    t->text = text;
    const char *d1 = memchr(text, '.', n);
    const char *d2 = d1 ? memchr(d1 + 1, '.', (size_t)(text + n - d1 - 1)) : NULL;
    if (!d1 || !d2) return JWT_MALFORMED;
    t->signed_len = (size_t)(d2 - text);
    size_t cap = JWT_B64_DECODED_MAX(n) + 3, used = 0, sig_len;
    if (!(t->buf = malloc(cap))) return JWT_NOMEM;
    const char *sig;
    if (decode_part(t, text, (size_t)(d1 - text), cap, &used, &t->header, &t->header_len) ||
        decode_part(t, d1 + 1, (size_t)(d2 - d1 - 1), cap, &used, &t->payload, &t->payload_len) ||
        decode_part(t, d2 + 1, (size_t)(text + n - d2 - 1), cap, &used, &sig, &sig_len) ||
        !is_object(t->header, t->header_len))
        return JWT_MALFORMED;
    t->sig = (const unsigned char *)sig;
    t->sig_len = sig_len;
    if (jwt_json_unique_members(t->header, t->header_len)) return JWT_DUPLICATE;
    jwt_verdict r = read_header(t, algs);
    if (r != JWT_OK) return r;
    if (!is_object(t->payload, t->payload_len)) return JWT_MALFORMED;
    return jwt_json_unique_members(t->payload, t->payload_len) ? JWT_DUPLICATE : JWT_OK;
}

void jwt_token_close(jwt_token *t) {
    free(t->buf);
    t->buf = NULL;
}

/* ---- signatures ---------------------------------------------------------- */

/* One unsigned big-endian integer of 32 bytes as a DER INTEGER at out. */
static size_t der_integer(const unsigned char *v, unsigned char *out) {
    size_t skip = 0;
    while (skip < 31 && v[skip] == 0) skip++;
    size_t len = 32 - skip, pad = v[skip] & 0x80 ? 1 : 0;
    out[0] = 0x02;
    out[1] = (unsigned char)(len + pad);
    out[2] = 0;
    memcpy(out + 2 + pad, v + skip, len);
    return 2 + pad + len;
}

/* JOSE's ES256 signature is r||s, 32 bytes each; OpenSSL verifies the DER
 * ECDSA-Sig-Value SEQUENCE { r INTEGER, s INTEGER }. */
static size_t es256_der(const unsigned char *sig, unsigned char out[72]) {
    size_t n = der_integer(sig, out + 2);
    n += der_integer(sig + 32, out + 2 + n);
    out[0] = 0x30;
    out[1] = (unsigned char)n;
    return n + 2;
}

int jwt_token_verify(const jwt_token *t, const jwt_key *k) {
    if (k->alg != t->alg) return 0;
    const unsigned char *sig = t->sig;
    size_t sig_len = t->sig_len;
    unsigned char der[72];
    if (t->alg == JWT_ES256 || t->alg == JWT_EDDSA) {
        if (sig_len != 64) return 0;
        if (t->alg == JWT_ES256) sig_len = es256_der(t->sig, der), sig = der;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    const char *md = t->alg == JWT_EDDSA ? NULL : "SHA256";
    int ok = ctx && EVP_DigestVerifyInit_ex(ctx, NULL, md, NULL, NULL, k->pkey, NULL) == 1 &&
             EVP_DigestVerify(ctx, sig, sig_len, (const unsigned char *)t->text,
                              t->signed_len) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
}
