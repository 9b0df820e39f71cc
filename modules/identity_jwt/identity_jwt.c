/* identity_jwt: OAuth 2.0 / OpenID Connect bearer tokens (RFC 6750, RFC 7519,
 * RFC 9068) as an identity stage.
 *
 * No "Authorization: Bearer" header, or a bearer credential that is not
 * JWT-shaped (an API key): pass, for the next identity instance, leaving a
 * challenge that points at the resource metadata for the kernel's 401 of an
 * anonymous call. A JWT: its signature verified with the issuer's keys
 * (jwt_jwks: a file or a URL), its claims judged (jwt_claims), and the call
 * identified from them; a bad one is refused with 401 and an RFC 6750
 * challenge saying what failed (never echoing the token). A token whose kid
 * is unknown waits (PENDING) for one fetch of the issuer's keys. */
#define _GNU_SOURCE
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "jwt_cache.h"
#include "jwt_claims.h"
#include "jwt_config.h"
#include "jwt_jwks.h"
#include "jwt_token.h"

typedef struct jwt_inst {
    const mcpg_host *h;
    mcpg_instance *self;
    const jwt_cfg *cfg;
    unsigned algs;
    jwt_rules rules;
    jwt_jwks *jwks;
    jwt_caches *cache;
    char *pass_challenge; /* "Bearer" or Bearer resource_metadata="..." */
} jwt_inst;

/* A call waiting for the keys, with its own copy of the token. */
typedef struct jwt_wait_call {
    jwt_waiter waiter;
    jwt_inst *m;
    mcpg_call *call;
    size_t len;
    char token[];
} jwt_wait_call;

/* ---- answers ------------------------------------------------------------------ */

static void challenge(jwt_inst *m, mcpg_call *call, const char *value) {
    if (MCPG_HOST_HAS(m->h, call_set_challenge)) m->h->call_set_challenge(call, value);
}

static mcpg_status pass(jwt_inst *m, mcpg_call *call) {
    challenge(m, call, m->pass_challenge);
    return MCPG_CONTINUE;
}

static mcpg_status refuse(jwt_inst *m, mcpg_call *call, jwt_verdict v, uint32_t retry_s) {
    const mcpg_host *h = m->h;
    const char *why = jwt_verdict_text(v);
    int status = jwt_verdict_http(v);
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s",
             status == 401 ? "Unauthorized" : "Service unavailable", why);
    /* -32001 as the kernel's own 401 for an anonymous call; -32000 for a 503 */
    h->call_error(call, status == 401 ? MCPG_RPC_UNAUTHENTICATED : MCPG_RPC_SERVER_ERROR, msg,
                  NULL);
    h->call_set_http(call, status, status == 503 ? (retry_s ? retry_s : 1) : 0);
    if (status == 401) {
        const char *meta = m->cfg->resource_metadata_url;
        char value[768];
        snprintf(value, sizeof value,
                 "Bearer %s%s%serror=\"invalid_token\", error_description=\"%s\"",
                 meta ? "resource_metadata=\"" : "", meta ? meta : "", meta ? "\", " : "", why);
        challenge(m, call, value);
    }
    if (h->log_enabled(m->self, MCPG_LOG_DEBUG))
        h->log(m->self, MCPG_LOG_DEBUG, "token refused (%d): %s", status, why);
    return MCPG_DENY;
}

/* The ABI 1.0 way, for an older kernel: roles as one comma-separated list
 * (no longer than the text they came from, where each ended in a NUL). */
static int identify_1_0(jwt_inst *m, mcpg_call *call, const jwt_mapped *id) {
    char roles[JWT_MAPPED_TEXT];
    size_t n = 0;
    for (uint32_t i = 0; i < id->n_roles && n < sizeof roles; i++)
        n += (size_t)snprintf(roles + n, sizeof roles - n, "%s%s", i ? "," : "", id->roles[i]);
    return m->h->call_set_identity(call, id->principal, id->tenant, id->n_roles ? roles : NULL);
}

/* The token goes with the identity (ABI 1.11's bearer): a backend may
 * forward it, or exchange it, only because its signature was checked here. */
static mcpg_status accept_token(jwt_inst *m, mcpg_call *call, const jwt_token *t,
                                const char *tok, size_t n, const jwt_mapped *id) {
    const mcpg_host *h = m->h;
    int rc;
    if (MCPG_HOST_HAS(h, call_identify)) {
        mcpg_identity who = {.size = sizeof who, .n_roles = id->n_roles,
                             .principal = id->principal, .tenant = id->tenant,
                             .roles = id->roles, .claims_json = t->payload,
                             .claims_len = t->payload_len, .method = "jwt",
                             .bearer = tok, .bearer_len = n};
        rc = h->call_identify(call, &who);
    } else {
        rc = identify_1_0(m, call, id);
    }
    if (rc != 0) return refuse(m, call, JWT_NOMEM, 1);
    /* a later 403 for want of scope (policy's step-up challenge) names the
     * same metadata as this stage's 401s */
    if (m->cfg->resource_metadata_url) challenge(m, call, m->pass_challenge);
    return MCPG_CONTINUE;
}

/* ---- judging a token -------------------------------------------------------- */

/* What the signature check found, when it is not a verdict: the keys may
 * be stale, and a fetch may tell. */
#define KEYS_WANTED (-1)

static uint32_t loop_of(jwt_inst *m, mcpg_call *call) {
    return m->h->worker_index(m->h->call_worker(call));
}

static int check_signature(jwt_inst *m, const jwt_token *t, const jwt_keyset *ks) {
    if (!ks) return KEYS_WANTED;
    if (t->has_kid && !jwt_keyset_has_kid(ks, t->kid, t->kid_len)) return KEYS_WANTED;
    size_t it = 0;
    const jwt_key *k;
    int candidates = 0;
    while ((k = jwt_keyset_next(ks, t->alg, t->kid, t->kid_len, t->has_kid, &it))) {
        candidates++;
        if (jwt_token_verify(t, k)) return JWT_OK;
    }
    if (!candidates) return t->has_kid ? JWT_KEY_MISMATCH : JWT_NO_KEY;
    return JWT_BAD_SIGNATURE;
}

static void on_keys_fetched(void *arg);

/* The token needs keys the gateway does not have (yet): wait for a fetch
 * when one may run, else say why not. */
static mcpg_status wait_for_keys(jwt_inst *m, mcpg_call *call, const char *tok, size_t n,
                                 int have_keys) {
    jwt_wait_call *wc = m->h->alloc(sizeof *wc + n);
    if (!wc) return refuse(m, call, JWT_NOMEM, 1);
    *wc = (jwt_wait_call){.m = m, .call = call, .len = n};
    memcpy(wc->token, tok, n);
    wc->waiter.post = (mcpg_post){NULL, on_keys_fetched, wc};
    wc->waiter.worker = m->h->call_worker(call);
    uint64_t retry_ms = 0;
    jwt_wait w = jwt_jwks_wait(m->jwks, &wc->waiter, &retry_ms);
    if (w == JWT_WAIT_QUEUED) return MCPG_PENDING;
    m->h->free(wc);
    uint32_t retry_s = (uint32_t)((retry_ms + 999) / 1000);
    if (w == JWT_WAIT_FULL) return refuse(m, call, JWT_BUSY, retry_s);
    return refuse(m, call, have_keys ? JWT_UNKNOWN_KID : JWT_NO_KEYS, retry_s);
}

static mcpg_status judge_opened(jwt_inst *m, mcpg_call *call, const jwt_token *t,
                                const char *tok, size_t n, int may_wait) {
    uint64_t gen;
    jwt_keyset *ks = jwt_jwks_keys(m->jwks, &gen);
    int64_t now_s = m->h->wall_us() / 1000000;
    unsigned char hash[32];
    uint32_t loop = loop_of(m, call);
    int sig = JWT_OK;
    int hashed = jwt_cache_hash(m->cache, loop, tok, n, hash) == 0;
    if (!hashed || !jwt_cache_hit(m->cache, loop, hash, gen, now_s))
        sig = check_signature(m, t, ks);
    int have_keys = ks != NULL;
    jwt_keyset_unref(ks);
    if (sig == KEYS_WANTED)
        return may_wait && jwt_jwks_is_url(m->jwks)
                   ? wait_for_keys(m, call, tok, n, have_keys)
                   : refuse(m, call, have_keys ? JWT_UNKNOWN_KID : JWT_NO_KEYS, 1);
    if (sig != JWT_OK) return refuse(m, call, (jwt_verdict)sig, 0);
    jwt_mapped id;
    jwt_verdict v = jwt_claims_check(&m->rules, t->payload, t->payload_len, now_s, &id);
    if (v != JWT_OK) return refuse(m, call, v, 0);
    if (hashed) jwt_cache_put(m->cache, loop, hash, gen, id.exp + m->rules.skew_s);
    return accept_token(m, call, t, tok, n, &id);
}

static mcpg_status judge(jwt_inst *m, mcpg_call *call, const char *tok, size_t n,
                         int may_wait) {
    jwt_token t;
    jwt_verdict v = jwt_token_open(&t, tok, n, m->algs);
    mcpg_status st = v == JWT_OK ? judge_opened(m, call, &t, tok, n, may_wait)
                                 : refuse(m, call, v, 1);
    jwt_token_close(&t);
    return st;
}

/* On the call's loop, once the fetch it waited for ended: judged again with
 * whatever keys there are now, without waiting a second time. */
static void on_keys_fetched(void *arg) {
    jwt_wait_call *wc = arg;
    mcpg_call *call = wc->call;
    const mcpg_host *h = wc->m->h;
    mcpg_status st = judge(wc->m, call, wc->token, wc->len, 0);
    h->free(wc);
    h->call_resume(call, st);
}

/* "Bearer <token>" (the scheme in any case), the token trimmed; NULL when
 * the header is absent or another scheme. */
static const char *bearer_token(const char *v, size_t len, size_t *n) {
    if (!v || len < 7 || strncasecmp(v, "Bearer ", 7) != 0) return NULL;
    size_t i = 7;
    while (i < len && (v[i] == ' ' || v[i] == '\t')) i++;
    while (len > i && (v[len - 1] == ' ' || v[len - 1] == '\t')) len--;
    *n = len - i;
    return *n ? v + i : NULL;
}

static mcpg_status jwt_authenticate(void *instance, mcpg_call *call) {
    jwt_inst *m = instance;
    size_t hlen = 0, n = 0;
    const char *hdr = m->h->call_header(call, "authorization", &hlen);
    const char *tok = bearer_token(hdr, hlen, &n);
    if (!tok) return pass(m, call);
    jwt_shape shape = jwt_shape_of(tok, n);
    if (shape == JWT_SHAPE_OTHER) return pass(m, call); /* an API key, say: not ours */
    if (n > (size_t)m->cfg->max_token_bytes) return refuse(m, call, JWT_TOO_LARGE, 0);
    if (shape == JWT_SHAPE_JWE) return refuse(m, call, JWT_JWE, 0);
    return judge(m, call, tok, n, 1);
}

/* ---- lifecycle ------------------------------------------------------------------ */

static int jwt_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    mcpg_config_problems p = {host, rep, NULL, 0};
    return jwt_config_check(&p, config) ? MCPG_ECONFIG : 0;
}

static void jwt_destroy(void *instance) {
    jwt_inst *m = instance;
    jwt_jwks_free(m->jwks);
    jwt_caches_free(m->cache);
    m->h->free(m->pass_challenge);
    m->h->free(m);
}

static char *pass_challenge(const mcpg_host *h, const char *meta) {
    size_t cap = 64 + (meta ? strlen(meta) : 0);
    char *s = h->alloc(cap);
    if (s) snprintf(s, cap, meta ? "Bearer resource_metadata=\"%s\"" : "Bearer", meta);
    return s;
}

static int jwt_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                      void **instance_out) {
    const jwt_cfg *c = config;
    jwt_inst *m = host->calloc(1, sizeof *m);
    if (!m) return MCPG_ENOMEM;
    *m = (jwt_inst){.h = host, .self = self, .cfg = c};
    mcpg_config_problems p = {host, NULL, self, 0};
    m->algs = jwt_config_algorithms(&p, c->algorithms);
    const char *roles = c->roles_claim && *c->roles_claim ? c->roles_claim : NULL;
    m->rules = (jwt_rules){c->issuer, c->audience, c->clock_skew_s, c->principal_claim,
                           c->tenant_claim, roles};
    jwt_jwks_cfg jc = {c->jwks_file, c->jwks_url, c->jwks_ca_file, c->jwks_tls_insecure,
                       (uint64_t)c->jwks_refresh_ms, (uint64_t)c->jwks_min_refresh_ms,
                       (uint64_t)c->jwks_timeout_ms, (uint32_t)c->max_waiters};
    char err[800];
    if (!(m->jwks = jwt_jwks_new(host, self, &jc, err, sizeof err)))
        mcpg_config_problem(&p, c->jwks_file ? "jwks_file" : "jwks_url", "%s", err);
    /* no loops yet (mcpg --check creates instances too): no cache needed */
    uint32_t loops = host->worker_count();
    m->cache = jwt_caches_new(loops, (size_t)c->cache_tokens);
    m->pass_challenge = pass_challenge(host, c->resource_metadata_url);
    if (p.errors || !m->pass_challenge || (c->cache_tokens && loops && !m->cache)) {
        jwt_destroy(m);
        return p.errors ? MCPG_ECONFIG : MCPG_ENOMEM;
    }
    *instance_out = m;
    return 0;
}

static void jwt_worker_start(void *instance, mcpg_worker *w) {
    jwt_inst *m = instance;
    jwt_jwks_worker_start(m->jwks, w);
}

static void jwt_worker_stop(void *instance, mcpg_worker *w) {
    jwt_inst *m = instance;
    jwt_jwks_worker_stop(m->jwks, w);
}

static void jwt_reloaded(void *instance) {
    jwt_inst *m = instance;
    jwt_jwks_reloaded(m->jwks);
}

static const mcpg_lifecycle_ops jwt_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = jwt_validate,
    .create = jwt_create,
    .destroy = jwt_destroy,
    .worker_start = jwt_worker_start,
    .worker_stop = jwt_worker_stop,
    .reloaded = jwt_reloaded,
};

/* The tokens this instance takes are for its audience and issued by its
 * issuer: what a client reads in the gateway's RFC 9728 metadata. */
static int jwt_protected_resource(void *instance, const char **resource_out, const char **issuer_out) {
    const jwt_inst *m = instance;
    *resource_out = m->cfg->audience;
    *issuer_out = m->cfg->issuer;
    return 0;
}

static const mcpg_identity_ops jwt_ops = {
    MCPG_OPS_HEAD(mcpg_identity_ops),
    .authenticate = jwt_authenticate,
    .protected_resource = jwt_protected_resource,
};

MCPG_MODULE_DEFINE(MCPG_KIND_IDENTITY, "identity_jwt", "1.0.0",
                   .description = "OAuth/OIDC bearer tokens (JWT: RS256, ES256, EdDSA)",
                   .config = jwt_config_fields, .config_size = sizeof(jwt_cfg),
                   .lifecycle = &jwt_lifecycle, .ops = &jwt_ops);
