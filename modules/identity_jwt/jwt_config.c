/* identity_jwt: settings (see jwt_config.h and README.md). */
#define _GNU_SOURCE
#include "jwt_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <upclient.h>

#include "jwt_jwks.h"
#include "jwt_keys.h"

const mcpg_config_field jwt_config_fields[] = {
    MCPG_CFG_REQUIRED_STRING_FIELD(jwt_cfg, issuer, "issuer",
                                   "the token issuer: iss must equal it exactly"),
    MCPG_CFG_REQUIRED_STRING_FIELD(jwt_cfg, audience, "audience",
                                   "this resource: aud (a string or an array) must contain it"),
    MCPG_CFG_STRING_FIELD(jwt_cfg, jwks_file, "jwks_file", NULL,
                          "a JWKS file with the signing keys, read again at reload "
                          "(this or jwks_url)"),
    MCPG_CFG_STRING_FIELD(jwt_cfg, jwks_url, "jwks_url", NULL,
                          "the issuer's JWKS URL, http:// or https:// (this or jwks_file)"),
    MCPG_CFG_STRING_FIELD(jwt_cfg, jwks_ca_file, "jwks_ca_file", NULL,
                          "https jwks_url: PEM bundle to verify it against (default: the system's)"),
    MCPG_CFG_BOOL_FIELD(jwt_cfg, jwks_tls_insecure, "jwks_tls_insecure", "false",
                        "https jwks_url: do not verify its certificate (tests only)"),
    MCPG_CFG_INT_FIELD(jwt_cfg, jwks_refresh_ms, "jwks_refresh_ms", "3600000", 1000, 86400000,
                       "jwks_url: fetched again this often"),
    MCPG_CFG_INT_FIELD(jwt_cfg, jwks_min_refresh_ms, "jwks_min_refresh_ms", "30000", 100,
                       86400000,
                       "jwks_url: a token with an unknown kid fetches the keys at most this often"),
    MCPG_CFG_INT_FIELD(jwt_cfg, jwks_timeout_ms, "jwks_timeout_ms", "5000", 100, 600000,
                       "jwks_url: a fetch (connect, TLS, answer) that takes longer fails"),
    MCPG_CFG_INT_FIELD(jwt_cfg, max_waiters, "max_waiters", "1024", 1, 1000000,
                       "calls waiting for a JWKS fetch at most; beyond: 503"),
    MCPG_CFG_JSON_FIELD(jwt_cfg, algorithms, "algorithms", "[\"RS256\",\"ES256\",\"EdDSA\"]",
                        "the accepted token algorithms, some of RS256, ES256, EdDSA"),
    MCPG_CFG_INT_FIELD(jwt_cfg, clock_skew_s, "clock_skew_s", "60", 0, 3600,
                       "leeway in seconds for exp, nbf and iat"),
    MCPG_CFG_STRING_FIELD(jwt_cfg, principal_claim, "principal_claim", "\"sub\"",
                          "the string claim naming the principal"),
    MCPG_CFG_STRING_FIELD(jwt_cfg, tenant_claim, "tenant_claim", NULL,
                          "the string claim naming the tenant (none by default)"),
    MCPG_CFG_STRING_FIELD(jwt_cfg, roles_claim, "roles_claim", "\"roles\"",
                          "the roles: an array of strings or a space-separated string "
                          "(\"scope\"); \"\" for none"),
    MCPG_CFG_STRING_FIELD(jwt_cfg, resource_metadata_url, "resource_metadata_url", NULL,
                          "the protected resource metadata URL a 401 points clients at "
                          "(RFC 9728)"),
    MCPG_CFG_INT_FIELD(jwt_cfg, max_token_bytes, "max_token_bytes", "8192", 256, 65536,
                       "a longer bearer token is refused"),
    MCPG_CFG_INT_FIELD(jwt_cfg, cache_tokens, "cache_tokens", "4096", 0, 1048576,
                       "verified tokens remembered per loop until they expire (0: none)"),
    MCPG_CONFIG_END};

unsigned jwt_config_algorithms(mcpg_config_problems *p, const char *json) {
    mcpg_json_span el;
    size_t it = 0, i = 0;
    unsigned algs = 0;
    size_t n = json ? strlen(json) : 0;
    int rc;
    char key[32], name[16];
    for (; (rc = mcpg_json_array_next(json, n, &it, &el)) == 1; i++) {
        snprintf(key, sizeof key, "algorithms[%zu]", i);
        size_t len;
        unsigned bit = 0;
        if (el.type == MCPG_JSON_STRING &&
            mcpg_json_string_decode(&el, name, sizeof name, &len) == 0)
            bit = jwt_alg_of(name, len);
        if (!bit)
            mcpg_config_problem(p, key, "must be \"RS256\", \"ES256\" or \"EdDSA\" (none and "
                                        "HMAC algorithms are never accepted)");
        algs |= bit;
    }
    if (rc < 0) mcpg_config_problem(p, "algorithms", "must be an array of algorithm names");
    else if (!algs && i == 0) mcpg_config_problem(p, "algorithms", "must name an algorithm");
    return algs;
}

static void check_file(mcpg_config_problems *p, const char *key, const char *path) {
    FILE *f = fopen(path, "r");
    if (f) fclose(f);
    else mcpg_config_problem(p, key, "cannot read %s: %s", path, strerror(errno));
}

/* The JWKS file is read as create will read it, so --check finds a bad one. */
static void check_jwks_file(mcpg_config_problems *p, const char *path) {
    char err[800], notes[256];
    jwt_keyset *ks = jwt_jwks_read_file(path, err, sizeof err, notes, sizeof notes);
    if (!ks) mcpg_config_problem(p, "jwks_file", "%s", err);
    jwt_keyset_unref(ks);
}

static void check_source(mcpg_config_problems *p, const jwt_cfg *c) {
    char err[512];
    if (!c->jwks_file == !c->jwks_url) {
        mcpg_config_problem(p, c->jwks_file ? "jwks_url" : "jwks_file",
                            c->jwks_file ? "set jwks_file or jwks_url, not both"
                                         : "is required (or jwks_url)");
    } else if (c->jwks_file) {
        check_jwks_file(p, c->jwks_file);
    } else if (up_url_check(c->jwks_url, err, sizeof err) != 0) {
        mcpg_config_problem(p, "jwks_url", "%s", err);
    }
    if (c->jwks_ca_file) check_file(p, "jwks_ca_file", c->jwks_ca_file);
    if (c->jwks_min_refresh_ms > c->jwks_refresh_ms)
        mcpg_config_problem(p, "jwks_min_refresh_ms", "must not exceed jwks_refresh_ms (%lld)",
                            (long long)c->jwks_refresh_ms);
}

/* It goes between quotes in WWW-Authenticate: printable ASCII, no quote or
 * backslash, and a URL. */
static void check_metadata_url(mcpg_config_problems *p, const char *url) {
    for (const char *s = url; *s; s++)
        if (*s <= ' ' || *s > '~' || *s == '"' || *s == '\\') {
            mcpg_config_problem(p, "resource_metadata_url",
                                "must be printable ASCII without spaces, quotes or backslashes");
            return;
        }
    if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)
        mcpg_config_problem(p, "resource_metadata_url", "must be an http:// or https:// URL");
}

int jwt_config_check(mcpg_config_problems *p, const jwt_cfg *c) {
    if (c->issuer && !*c->issuer) mcpg_config_problem(p, "issuer", "must not be empty");
    if (c->audience && !*c->audience) mcpg_config_problem(p, "audience", "must not be empty");
    if (!c->principal_claim || !*c->principal_claim)
        mcpg_config_problem(p, "principal_claim", "must not be empty");
    if (c->tenant_claim && !*c->tenant_claim)
        mcpg_config_problem(p, "tenant_claim", "must not be empty (leave it out for none)");
    check_source(p, c);
    jwt_config_algorithms(p, c->algorithms);
    if (c->resource_metadata_url) check_metadata_url(p, c->resource_metadata_url);
    return p->errors;
}
