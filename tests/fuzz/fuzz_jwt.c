/* Fuzzer: identity_jwt's parsers of what a client and a key server send.
 * A bearer token: its shape (jwt_shape_of), jwt_token_open (base64url,
 * header, algorithm rules, duplicate members), the signature against the
 * keys of a JWKS, and the claims judged and mapped (jwt_claims_check).
 * A JWKS document: jwt_keyset_parse and the key choice (jwt_keyset_next).
 *
 * Input: byte 0 says which (even: a token, odd: a JWKS); the rest is the
 * token or the document. A token is verified against the key set of the
 * last JWKS input that parsed, else against k_seed_jwks (the public keys
 * the seed tokens were signed with). */
#include "fuzz.h"

#include "jwt_claims.h"
#include "jwt_keys.h"
#include "jwt_token.h"
#include "jwt_verdict.h"

#include <mcpg/sdk.h>
#include <string.h>

#include "jwt_seed_keys.h" /* k_seed_jwks */

static jwt_keyset *g_keys;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char err[256], notes[512];
    FZ_CHECK(jwt_keyset_parse(k_seed_jwks, strlen(k_seed_jwks), &g_keys, err, sizeof err, notes,
                              sizeof notes) == 0,
             "the seed JWKS: %s", err);
    return 0;
}

/* A verdict's words go into a 401 header: printable ASCII, no quote. */
static void check_verdict(jwt_verdict v) {
    const char *text = jwt_verdict_text(v);
    FZ_CHECK(text && *text, "verdict %d without words", v);
    for (const char *p = text; *p; p++) FZ_CHECK(*p >= 0x20 && *p < 0x7f && *p != '"', "verdict %d text", v);
    int status = jwt_verdict_http(v);
    FZ_CHECK(v == JWT_OK || status == 401 || status == 503, "verdict %d as %d", v, status);
}

static int inside(const char *p, const char *base, size_t n) { return p >= base && p <= base + n; }

static void check_mapped(const jwt_mapped *m) {
    size_t cap = sizeof m->text;
    FZ_CHECK(m->principal && inside(m->principal, m->text, cap) && *m->principal, "principal");
    FZ_CHECK(!m->tenant || inside(m->tenant, m->text, cap), "tenant");
    FZ_CHECK(m->n_roles <= JWT_ROLES_MAX, "%u roles", m->n_roles);
    for (uint32_t i = 0; i < m->n_roles; i++)
        FZ_CHECK(m->roles[i] && inside(m->roles[i], m->text, cap) && *m->roles[i], "role %u", i);
}

/* The claims as the module judges them: the rules of a typical config, at
 * a fixed time (the seeds' exp lies after it). */
static void check_claims(const char *claims, size_t n) {
    static const jwt_rules rules = {.issuer = "https://issuer.example", .audience = "mcpg",
                                    .skew_s = 60, .principal_claim = "sub", .tenant_claim = "tid",
                                    .roles_claim = "realm_access.roles"};
    jwt_mapped m;
    jwt_verdict v = jwt_claims_check(&rules, claims, n, 1800000000, &m);
    check_verdict(v);
    if (v == JWT_OK) {
        check_mapped(&m);
        FZ_CHECK(m.exp > 1800000000 - 60, "exp %lld taken", (long long)m.exp);
    }
}

/* A valid signature must stop being valid when any of its bytes changes. */
static void check_signature(const jwt_token *t) {
    size_t iter = 0;
    const jwt_key *k;
    while ((k = jwt_keyset_next(g_keys, t->alg, t->kid, t->kid_len, t->has_kid, &iter))) {
        FZ_CHECK(k->alg == t->alg, "a %s key offered for %s", jwt_alg_name(k->alg), jwt_alg_name(t->alg));
        if (!jwt_token_verify(t, k) || !t->sig_len) continue;
        unsigned char *sig = (unsigned char *)t->sig;
        sig[t->sig_len / 2] ^= 0x01;
        FZ_CHECK(!jwt_token_verify(t, k), "an altered signature verified");
        sig[t->sig_len / 2] ^= 0x01;
    }
}

static void check_token(const char *text, size_t n) {
    jwt_shape shape = jwt_shape_of(text, n);
    if (shape != JWT_SHAPE_JWS) return; /* the module hands anything else on untouched */
    jwt_token t;
    jwt_verdict v = jwt_token_open(&t, text, n, JWT_ALGS_ALL);
    check_verdict(v);
    if (v == JWT_OK) {
        FZ_CHECK(jwt_alg_name(t.alg) != NULL, "alg bits %u", t.alg);
        FZ_CHECK(t.signed_len < n && text[t.signed_len] == '.', "signed part %zu of %zu", t.signed_len, n);
        FZ_CHECK(mcpg_json_validate(t.header, t.header_len) == 0 && t.header[0] == '{', "header");
        FZ_CHECK(mcpg_json_validate(t.payload, t.payload_len) == 0, "payload");
        FZ_CHECK(jwt_json_unique_members(t.header, t.header_len) == 0, "a duplicate in the header");
        FZ_CHECK(!t.has_kid || (t.kid_len <= JWT_KID_MAX && t.kid[t.kid_len] == '\0'), "kid");
        check_signature(&t);
        if (t.payload[0] == '{') check_claims(t.payload, t.payload_len);
    }
    jwt_token_close(&t);
}

static void check_key_choice(const jwt_keyset *ks) {
    static const unsigned algs[] = {JWT_RS256, JWT_ES256, JWT_EDDSA};
    for (size_t a = 0; a < 3; a++) {
        size_t iter = 0, seen = 0;
        const jwt_key *k;
        while ((k = jwt_keyset_next(ks, algs[a], NULL, 0, 0, &iter))) {
            FZ_CHECK(k->alg == algs[a] && ++seen <= ks->n, "key choice");
            if (k->has_kid)
                FZ_CHECK(jwt_keyset_has_kid(ks, k->kid, k->kid_len), "its own kid not found");
        }
    }
}

static void check_jwks(const char *json, size_t n) {
    jwt_keyset *ks = NULL;
    char err[256] = "", notes[1024] = "";
    int rc = jwt_keyset_parse(json, n, &ks, err, sizeof err, notes, sizeof notes);
    FZ_CHECK(memchr(err, '\0', sizeof err) && memchr(notes, '\0', sizeof notes), "unterminated text");
    if (rc != 0) {
        FZ_CHECK(rc == -1 && !ks && err[0], "failed with rc %d and no reason", rc);
        return;
    }
    FZ_CHECK(ks && ks->n >= 1 && ks->n <= JWT_KEYS_MAX, "%zu keys", ks ? ks->n : 0);
    for (size_t i = 0; i < ks->n; i++) {
        const jwt_key *k = &ks->keys[i];
        FZ_CHECK(jwt_alg_name(k->alg) && k->pkey, "key %zu: alg %u", i, k->alg);
        FZ_CHECK(!k->has_kid || (k->kid_len <= JWT_KID_MAX && k->kid[k->kid_len] == '\0'), "key %zu kid", i);
    }
    check_key_choice(ks);
    jwt_keyset_unref(g_keys); /* the next tokens verify against this set */
    g_keys = ks;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input in = {data, size};
    uint8_t mode = fz_byte(&in);
    char *copy = malloc(in.n ? in.n : 1); /* no read may pass the input's end */
    memcpy(copy, in.p, in.n);
    if (mode & 1) check_jwks(copy, in.n);
    else check_token(copy, in.n);
    free(copy);
    return 0;
}
