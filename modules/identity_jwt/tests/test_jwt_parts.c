/* identity_jwt's parts without a host: strict base64url, the credential's
 * shape, JWKS parsing (and the keys it skips), the JOSE header (alg none,
 * HMAC, confusion, crit, typ, duplicates), signatures of each algorithm with
 * keys made here, the claims (times with skew, iss, aud, the mapping) and the
 * verified-token cache. */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/sdk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../jwt_b64.h"
#include "../jwt_cache.h"
#include "../jwt_claims.h"
#include "../jwt_keys.h"
#include "../jwt_token.h"
#include "jwt_testkeys.h"

#define NOW 1800000000LL

static int b64_is(const char *in, const char *want) {
    unsigned char out[64];
    size_t n;
    if (jwt_b64url_decode(in, strlen(in), out, sizeof out, &n) != 0) return want == NULL;
    return want && n == strlen(want) && memcmp(out, want, n) == 0;
}

static void test_b64(void) {
    MCPG_CHECK(b64_is("", ""), "empty");
    MCPG_CHECK(b64_is("YQ", "a"), "YQ");
    MCPG_CHECK(b64_is("YWI", "ab"), "YWI");
    MCPG_CHECK(b64_is("YWJj", "abc"), "YWJj");
    MCPG_CHECK(b64_is("-_-_", "\xfb\xff\xbf"), "url alphabet");
    MCPG_CHECK(b64_is("YQ==", NULL), "padding refused");
    MCPG_CHECK(b64_is("YR", NULL), "non-zero unused bits refused (YR also decodes to a)");
    MCPG_CHECK(b64_is("Y", NULL), "one leftover character refused");
    MCPG_CHECK(b64_is("YW+j", NULL), "standard alphabet '+' refused");
    MCPG_CHECK(b64_is("YW/j", NULL), "'/' refused");
    MCPG_CHECK(b64_is("YW j", NULL), "space refused");
    unsigned char small[2];
    size_t n;
    MCPG_CHECK(jwt_b64url_decode("YWJj", 4, small, sizeof small, &n) != 0, "capacity respected");
}

static void test_shape(void) {
    const char *jws = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln";
    MCPG_CHECK(jwt_shape_of(jws, strlen(jws)) == JWT_SHAPE_JWS, "jws");
    MCPG_CHECK(jwt_shape_of("eyJhbGciOiJub25lIn0.eyJhIjoxfQ.", 31) == JWT_SHAPE_JWS,
               "an empty signature is still a JWT (alg none)");
    MCPG_CHECK(jwt_shape_of("eyJh.b.c.d.e", 12) == JWT_SHAPE_JWE, "jwe");
    MCPG_CHECK(jwt_shape_of("sk_live_abcdef", 14) == JWT_SHAPE_OTHER, "api key");
    MCPG_CHECK(jwt_shape_of("abc.def.ghi", 11) == JWT_SHAPE_OTHER, "dotted key, no JSON header");
    MCPG_CHECK(jwt_shape_of("eyJhbGc..sig", 12) == JWT_SHAPE_OTHER, "empty payload");
    MCPG_CHECK(jwt_shape_of("eyJ a.b.c", 9) == JWT_SHAPE_OTHER, "space");
    MCPG_CHECK(jwt_shape_of("eyJhb.bb", 8) == JWT_SHAPE_OTHER, "two parts");
}

/* ---- keys --------------------------------------------------------------------- */

typedef struct keypair {
    const char *alg;
    EVP_PKEY *key;
    char *jwk;
} keypair;

static keypair kp[3];

static jwt_keyset *parse(const char *json, char *err, size_t errcap, char *notes) {
    jwt_keyset *ks = NULL;
    if (jwt_keyset_parse(json, strlen(json), &ks, err, errcap, notes, 1024) != 0) return NULL;
    return ks;
}

static jwt_keyset *parse_fmt(char *notes, const char *fmt, ...) MCPG_PRINTF(2, 3);
static jwt_keyset *parse_fmt(char *notes, const char *fmt, ...) {
    char *json, err[1024];
    va_list ap;
    va_start(ap, fmt);
    MCPG_REQUIRE(vasprintf(&json, fmt, ap) > 0, "vasprintf");
    va_end(ap);
    jwt_keyset *ks = parse(json, err, sizeof err, notes);
    if (!ks) snprintf(notes, 1024, "%s", err);
    free(json);
    return ks;
}

static void test_keys(void) {
    const char *algs[3] = {"RS256", "ES256", "EdDSA"};
    for (int i = 0; i < 3; i++) {
        char kid[8];
        snprintf(kid, sizeof kid, "k%d", i);
        kp[i].alg = algs[i];
        kp[i].key = tk_keygen(algs[i]);
        MCPG_REQUIRE(kp[i].key, "keygen %s", algs[i]);
        kp[i].jwk = tk_jwk(kp[i].key, i == 1 ? algs[i] : NULL, kid);
        MCPG_REQUIRE(kp[i].jwk, "jwk %s", algs[i]);
    }
    char notes[1024];
    jwt_keyset *ks = parse_fmt(notes, "{\"keys\":[%s,%s,%s]}", kp[0].jwk, kp[1].jwk, kp[2].jwk);
    MCPG_REQUIRE(ks && ks->n == 3, "three keys: %s", notes);
    MCPG_CHECK(ks->keys[0].alg == JWT_RS256 && ks->keys[1].alg == JWT_ES256 &&
               ks->keys[2].alg == JWT_EDDSA, "algorithms by key type");
    MCPG_CHECK(jwt_keyset_has_kid(ks, "k1", 2) && !jwt_keyset_has_kid(ks, "k9", 2), "kids");
    size_t it = 0;
    MCPG_CHECK(jwt_keyset_next(ks, JWT_ES256, "k1", 2, 1, &it) == &ks->keys[1], "next by kid");
    it = 0;
    MCPG_CHECK(jwt_keyset_next(ks, JWT_RS256, "k1", 2, 1, &it) == NULL,
               "a kid of another algorithm is no candidate");
    it = 0;
    MCPG_CHECK(jwt_keyset_next(ks, JWT_EDDSA, NULL, 0, 0, &it) == &ks->keys[2], "no kid: by alg");
    jwt_keyset_unref(ks);

    /* skipped keys, each described */
    ks = parse_fmt(notes,
                   "{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"},"
                   "{\"kty\":\"RSA\",\"use\":\"enc\",\"n\":\"AQAB\",\"e\":\"AQAB\"},"
                   "{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"AA\",\"y\":\"AA\"},"
                   "{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"},"
                   "{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"},"
                   "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"alg\":\"RS256\",\"x\":\"AAAA\"},"
                   "%s]}",
                   "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE",
                   "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE", kp[2].jwk);
    MCPG_REQUIRE(ks && ks->n == 1, "only the good key: %s", notes);
    MCPG_CHECK(strstr(notes, "keys[0]: kty \"oct\"") != NULL, "oct skipped: %s", notes);
    MCPG_CHECK(strstr(notes, "keys[1]: \"use\" is not \"sig\"") != NULL, "enc skipped: %s", notes);
    MCPG_CHECK(strstr(notes, "keys[2]: kty \"EC\" crv \"P-384\"") != NULL, "P-384: %s", notes);
    MCPG_CHECK(strstr(notes, "keys[3]: not a point on P-256") != NULL, "off-curve: %s", notes);
    MCPG_CHECK(strstr(notes, "keys[4]: ") != NULL, "tiny RSA: %s", notes);
    MCPG_CHECK(strstr(notes, "keys[5]: alg \"RS256\" does not fit") != NULL,
               "alg that does not fit the key type: %s", notes);
    jwt_keyset_unref(ks);

    char err[256];
    MCPG_CHECK(!parse("{\"keys\":[]}", err, sizeof err, notes) &&
               strstr(err, "no usable signing key"), "no keys: %s", err);
    MCPG_CHECK(!parse("[1]", err, sizeof err, notes) && strstr(err, "\"keys\" array"),
               "not a JWKS: %s", err);
    MCPG_CHECK(!parse("{\"keys\":[", err, sizeof err, notes) && strstr(err, "not valid JSON"),
               "not JSON: %s", err);
}

/* ---- tokens ------------------------------------------------------------------- */

static const char *CLAIMS = "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp\","
                            "\"sub\":\"alice\",\"exp\":1800000600,\"roles\":[\"reader\"]}";

static jwt_verdict open_text(const char *tok, unsigned algs) {
    jwt_token t;
    jwt_verdict v = jwt_token_open(&t, tok, strlen(tok), algs);
    jwt_token_close(&t);
    return v;
}

/* header.payload. with the signature given as base64url text */
static char *unsigned_token(const char *header, const char *claims, const char *sig) {
    char *h = tk_b64url(header, strlen(header)), *c = tk_b64url(claims, strlen(claims)), *out;
    MCPG_REQUIRE(asprintf(&out, "%s.%s.%s", h, c, sig) > 0, "asprintf");
    free(h);
    free(c);
    return out;
}

static void check_header(const char *header, jwt_verdict want, const char *what) {
    char *tok = unsigned_token(header, CLAIMS, "c2ln");
    jwt_verdict v = open_text(tok, JWT_ALGS_ALL);
    MCPG_CHECK(v == want, "%s: verdict %d (%s), want %d", what, v, jwt_verdict_text(v), want);
    free(tok);
}

static void test_header(void) {
    check_header("{\"alg\":\"none\"}", JWT_ALG_NONE, "alg none");
    check_header("{\"alg\":\"NONE\"}", JWT_ALG_NONE, "alg NONE");
    check_header("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", JWT_ALG_HMAC, "HS256");
    check_header("{\"alg\":\"HS512\"}", JWT_ALG_HMAC, "HS512");
    check_header("{\"alg\":\"RS384\"}", JWT_ALG_UNSUPPORTED, "RS384");
    check_header("{\"alg\":\"PS256\"}", JWT_ALG_UNSUPPORTED, "PS256");
    check_header("{\"alg\":\"rs256\"}", JWT_ALG_UNSUPPORTED, "names are case-sensitive");
    check_header("{\"alg\":5}", JWT_BAD_HEADER, "alg not a string");
    check_header("{\"typ\":\"JWT\"}", JWT_BAD_HEADER, "no alg");
    check_header("{\"alg\":\"RS256\",\"crit\":[\"exp\"]}", JWT_CRIT, "crit");
    check_header("{\"alg\":\"RS256\",\"typ\":\"JWE\"}", JWT_TYP, "typ JWE");
    check_header("{\"alg\":\"RS256\",\"typ\":\"at+jwt\"}", JWT_OK, "typ at+jwt");
    check_header("{\"alg\":\"RS256\",\"typ\":\"application/at+JWT\"}", JWT_OK, "typ media type");
    check_header("{\"alg\":\"RS256\",\"alg\":\"none\"}", JWT_DUPLICATE, "alg twice");
    check_header("{\"alg\":\"RS256\",\"a\\u006cg\":\"none\"}", JWT_DUPLICATE, "escaped twin");
    check_header("{\"alg\":\"RS256\",\"kid\":7}", JWT_BAD_HEADER, "kid not a string");
    check_header("[\"alg\"]", JWT_MALFORMED, "header an array");
    check_header("{\"alg\":\"RS256\"", JWT_MALFORMED, "header not JSON");

    char *tok = unsigned_token("{\"alg\":\"ES256\"}", CLAIMS, "c2ln");
    MCPG_CHECK(open_text(tok, JWT_RS256 | JWT_EDDSA) == JWT_ALG_NOT_ALLOWED,
               "an algorithm left out of `algorithms`");
    free(tok);
    tok = unsigned_token("{\"alg\":\"RS256\"}", "{\"sub\":\"a\",\"sub\":\"b\"}", "c2ln");
    MCPG_CHECK(open_text(tok, JWT_ALGS_ALL) == JWT_DUPLICATE, "a claim twice");
    free(tok);
    tok = unsigned_token("{\"alg\":\"RS256\"}", "\"text\"", "c2ln");
    MCPG_CHECK(open_text(tok, JWT_ALGS_ALL) == JWT_MALFORMED, "claims not an object");
    free(tok);
    MCPG_CHECK(open_text("eyJhbGciOiJSUzI1NiJ9.e30=.c2ln", JWT_ALGS_ALL) == JWT_MALFORMED,
               "padding in a part");
}

static jwt_verdict verify_with(const char *tok, const jwt_keyset *ks) {
    jwt_token t;
    jwt_verdict v = jwt_token_open(&t, tok, strlen(tok), JWT_ALGS_ALL);
    if (v == JWT_OK) {
        v = JWT_BAD_SIGNATURE;
        size_t it = 0;
        const jwt_key *k;
        while ((k = jwt_keyset_next(ks, t.alg, t.kid, t.kid_len, t.has_kid, &it)))
            if (jwt_token_verify(&t, k)) v = JWT_OK;
    }
    jwt_token_close(&t);
    return v;
}

static void test_signatures(void) {
    char notes[1024];
    jwt_keyset *ks = parse_fmt(notes, "{\"keys\":[%s,%s,%s]}", kp[0].jwk, kp[1].jwk, kp[2].jwk);
    MCPG_REQUIRE(ks, "keys: %s", notes);
    for (int i = 0; i < 3; i++) {
        char header[64];
        snprintf(header, sizeof header, "{\"alg\":\"%s\",\"kid\":\"k%d\"}", kp[i].alg, i);
        char *tok = tk_token(kp[i].key, kp[i].alg, header, CLAIMS);
        MCPG_REQUIRE(tok, "sign %s", kp[i].alg);
        MCPG_CHECK(verify_with(tok, ks) == JWT_OK, "%s verifies", kp[i].alg);
        /* one character of the payload changed: the signature no longer fits */
        char *dot = strchr(tok, '.');
        dot[3] = dot[3] == 'A' ? 'B' : 'A';
        MCPG_CHECK(verify_with(tok, ks) != JWT_OK, "%s tampered payload refused", kp[i].alg);
        free(tok);
        /* signed by another key of the same algorithm */
        EVP_PKEY *other = tk_keygen(kp[i].alg);
        tok = tk_token(other, kp[i].alg, header, CLAIMS);
        MCPG_CHECK(verify_with(tok, ks) == JWT_BAD_SIGNATURE, "%s foreign key refused",
                   kp[i].alg);
        free(tok);
        EVP_PKEY_free(other);
    }
    /* ES256 with a DER signature instead of JOSE's r||s */
    char *tok = tk_token(kp[1].key, "ES256", "{\"alg\":\"ES256\"}", CLAIMS);
    char *h = tk_b64url("{\"alg\":\"ES256\"}", 15);
    char *der_tok = NULL;
    {
        const char *last = strrchr(tok, '.') + 1;
        unsigned char jose[64], der[80];
        size_t n;
        MCPG_REQUIRE(jwt_b64url_decode(last, strlen(last), jose, sizeof jose, &n) == 0, "jose");
        /* a DER SEQUENCE of two 32-byte INTEGERs (high bits clear or not, it is the form
         * that matters: 64 bytes only) */
        der[0] = 0x30, der[1] = 68, der[2] = 2, der[3] = 32;
        memcpy(der + 4, jose, 32);
        der[36] = 2, der[37] = 32;
        memcpy(der + 38, jose + 32, 32);
        char *dsig = tk_b64url(der, 70);
        MCPG_REQUIRE(asprintf(&der_tok, "%.*s%s", (int)(last - tok), tok, dsig) > 0, "der");
        free(dsig);
    }
    MCPG_CHECK(verify_with(der_tok, ks) == JWT_BAD_SIGNATURE, "ES256 in DER form refused");
    free(der_tok);
    free(h);
    free(tok);
    /* algorithm confusion: an RS256 token presented with the EC key's kid */
    tok = tk_token(kp[0].key, "RS256", "{\"alg\":\"RS256\",\"kid\":\"k1\"}", CLAIMS);
    MCPG_CHECK(verify_with(tok, ks) == JWT_BAD_SIGNATURE,
               "an RS256 token never reaches the ES256 key its kid names");
    free(tok);
    jwt_keyset_unref(ks);
}

/* ---- claims ------------------------------------------------------------------- */

static jwt_rules RULES = {"https://issuer.example", "mcp", 60, "sub", NULL, "roles"};

static jwt_verdict claims_are(const char *claims, jwt_mapped *m) {
    static jwt_mapped scratch;
    return jwt_claims_check(&RULES, claims, strlen(claims), NOW, m ? m : &scratch);
}

#define BASE "\"iss\":\"https://issuer.example\",\"aud\":\"mcp\",\"sub\":\"alice\""

static void test_claims(void) {
    jwt_mapped m;
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1800000600,\"roles\":[\"reader\",\"writer\"]}", &m) ==
                   JWT_OK, "good");
    MCPG_CHECK(strcmp(m.principal, "alice") == 0 && !m.tenant && m.n_roles == 2 &&
               strcmp(m.roles[1], "writer") == 0 && m.exp == 1800000600, "mapped");
    MCPG_CHECK(claims_are("{" BASE "}", NULL) == JWT_NO_EXP, "no exp");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":\"soon\"}", NULL) == JWT_BAD_TIME, "exp a string");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1799999900}", NULL) == JWT_EXPIRED, "expired");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1799999970}", NULL) == JWT_OK, "within the skew");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1799999940}", NULL) == JWT_EXPIRED, "skew's edge");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1800000600.75}", NULL) == JWT_OK, "fractional exp");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1800000600,\"nbf\":1800000100}", NULL) ==
                   JWT_NOT_YET_VALID, "nbf ahead");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1800000600,\"nbf\":1800000030}", NULL) == JWT_OK,
               "nbf within the skew");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1800000600,\"iat\":1800000300}", NULL) ==
                   JWT_ISSUED_IN_FUTURE, "iat ahead");
    MCPG_CHECK(claims_are("{\"iss\":\"https://evil.example\",\"aud\":\"mcp\",\"sub\":\"a\","
                          "\"exp\":1800000600}", NULL) == JWT_ISSUER, "wrong issuer");
    MCPG_CHECK(claims_are("{\"iss\":\"https://issuer.example/\",\"aud\":\"mcp\",\"sub\":\"a\","
                          "\"exp\":1800000600}", NULL) == JWT_ISSUER, "issuer compared exactly");
    MCPG_CHECK(claims_are("{\"aud\":\"mcp\",\"sub\":\"a\",\"exp\":1800000600}", NULL) ==
                   JWT_ISSUER, "no issuer");
    MCPG_CHECK(claims_are("{\"iss\":\"https://issuer.example\",\"aud\":\"other\",\"sub\":\"a\","
                          "\"exp\":1800000600}", NULL) == JWT_AUDIENCE, "wrong audience");
    MCPG_CHECK(claims_are("{\"iss\":\"https://issuer.example\",\"aud\":[\"x\",\"mcp\"],"
                          "\"sub\":\"a\",\"exp\":1800000600}", NULL) == JWT_OK, "aud array");
    MCPG_CHECK(claims_are("{\"iss\":\"https://issuer.example\",\"aud\":[\"x\"],"
                          "\"sub\":\"a\",\"exp\":1800000600}", NULL) == JWT_AUDIENCE,
               "aud array without us");
    MCPG_CHECK(claims_are("{\"iss\":\"https://issuer.example\",\"aud\":\"mcp\","
                          "\"exp\":1800000600}", NULL) == JWT_PRINCIPAL, "no sub");
    MCPG_CHECK(claims_are("{\"iss\":\"https://issuer.example\",\"aud\":\"mcp\",\"sub\":7,"
                          "\"exp\":1800000600}", NULL) == JWT_PRINCIPAL, "sub a number");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1800000600,\"roles\":\"a  b c\"}", &m) == JWT_OK &&
                   m.n_roles == 3 && strcmp(m.roles[2], "c") == 0, "roles as a scope string");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1800000600,\"roles\":[1]}", NULL) == JWT_ROLES,
               "roles not strings");
    MCPG_CHECK(claims_are("{" BASE ",\"exp\":1800000600,\"roles\":{}}", NULL) == JWT_ROLES,
               "roles an object");

    jwt_rules r = RULES;
    r.tenant_claim = "org.id";
    r.roles_claim = "realm_access.roles";
    r.principal_claim = "email";
    const char *nested = "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp\",\"exp\":1800000600,"
                         "\"email\":\"a@b.example\",\"org\":{\"id\":\"acme\"},"
                         "\"realm_access\":{\"roles\":[\"admin\"]}}";
    MCPG_CHECK(jwt_claims_check(&r, nested, strlen(nested), NOW, &m) == JWT_OK &&
                   strcmp(m.principal, "a@b.example") == 0 && strcmp(m.tenant, "acme") == 0 &&
                   m.n_roles == 1 && strcmp(m.roles[0], "admin") == 0,
               "claims found by path");
    const char *dotted = "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp\",\"exp\":1800000600,"
                         "\"email\":\"a\",\"org.id\":\"flat\",\"org\":{\"id\":\"nested\"}}";
    MCPG_CHECK(jwt_claims_check(&r, dotted, strlen(dotted), NOW, &m) == JWT_OK &&
                   strcmp(m.tenant, "flat") == 0, "a claim named with dots wins over the path");
    const char *bad_tenant = "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp\","
                             "\"exp\":1800000600,\"email\":\"a\",\"org\":{\"id\":5}}";
    MCPG_CHECK(jwt_claims_check(&r, bad_tenant, strlen(bad_tenant), NOW, &m) == JWT_TENANT,
               "tenant not a string");
}

static void test_cache(void) {
    jwt_caches *c = jwt_caches_new(2, 8);
    MCPG_REQUIRE(c, "cache");
    unsigned char a[32], b[32];
    MCPG_REQUIRE(jwt_cache_hash(c, 0, "token-a", 7, a) == 0 &&
                     jwt_cache_hash(c, 1, "token-b", 7, b) == 0 &&
                     jwt_cache_hash(c, 2, "token-b", 7, b) != 0,
                 "hashes (loop 2 does not exist)");
    static const unsigned char sha_a[4] = {0xa7, 0x0b, 0xf5, 0x0e}; /* sha256sum's */
    MCPG_CHECK(memcmp(a, sha_a, 4) == 0, "SHA-256 of token-a");
    MCPG_CHECK(!jwt_cache_hit(c, 0, a, 1, NOW), "empty");
    jwt_cache_put(c, 0, a, 1, NOW + 10);
    MCPG_CHECK(jwt_cache_hit(c, 0, a, 1, NOW), "hit");
    MCPG_CHECK(!jwt_cache_hit(c, 1, a, 1, NOW), "another loop has its own table");
    MCPG_CHECK(!jwt_cache_hit(c, 0, a, 2, NOW), "another key set generation misses");
    MCPG_CHECK(!jwt_cache_hit(c, 0, a, 1, NOW + 10), "expired entry misses");
    MCPG_CHECK(!jwt_cache_hit(c, 0, b, 1, NOW), "another token misses");
    MCPG_CHECK(!jwt_cache_hit(c, 9, a, 1, NOW), "a loop out of range misses");
    jwt_caches_free(c);
    MCPG_CHECK(jwt_caches_new(2, 0) == NULL, "0 slots: no cache");
}

int main(void) {
    test_b64();
    test_shape();
    test_keys();
    test_header();
    test_signatures();
    test_claims();
    test_cache();
    for (int i = 0; i < 3; i++) {
        EVP_PKEY_free(kp[i].key);
        free(kp[i].jwk);
    }
    return MCPG_CHECK_EXIT("test_jwt_parts");
}
