/* identity_apikey: who a call is, from an API key.
 *
 * The key comes in `X-API-Key: <key>` or `Authorization: Bearer <key>`; the
 * keys file (keytable.h) holds only each key's SHA-256. A call:
 *   key found   -> host->call_identify(principal, tenant, roles, "apikey"),
 *                  CONTINUE: the identity chain stops here;
 *   no key      -> CONTINUE without an identity: the next identity instance
 *                  tries (a Bearer token shaped like a JWT counts as no key,
 *                  for identity_jwt), or the kernel refuses the anonymous
 *                  call with 401;
 *   a key that matches nothing -> DENY, JSON-RPC -32001 (MCPG_RPC_UNAUTHENTICATED,
 *                  as the kernel's anonymous refusal and every identity module), HTTP 401 and
 *                  WWW-Authenticate: Bearer realm="...", error="invalid_token".
 *
 * The table is swapped whole at a reload (the `reloaded` lifecycle op, on the
 * main thread): readers on the loops load one pointer and never lock. The old
 * table is freed once every loop has come back to its event loop (a post to
 * each), which proves no authenticate that read it is still running: an
 * authenticate is synchronous and runs on a loop thread.
 */
#include <mcpg/sdk.h>

#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "keytable.h"

#define IDKEY_REALM_MAX 64
#define IDKEY_WARN_EVERY_US 1000000u /* at most one "invalid key" line a second */

typedef struct apikey_cfg {
    const char *keys_file;
    const char *headers; /* enum: both | x-api-key | authorization */
    const char *realm;
    int skip_jwt_shaped;
    int challenge_anonymous;
} apikey_cfg;

static const mcpg_config_field apikey_config[] = {
    MCPG_CFG_REQUIRED_STRING_FIELD(apikey_cfg, keys_file, "keys_file",
                                   "JSON array of {sha256, principal, tenant, roles}; "
                                   "re-read at every reload"),
    MCPG_CFG_ENUM_FIELD(apikey_cfg, headers, "headers", "\"both\"",
                        "both|x-api-key|authorization",
                        "where the key is read: X-API-Key, Authorization: Bearer, or both "
                        "(X-API-Key first)"),
    MCPG_CFG_STRING_FIELD(apikey_cfg, realm, "realm", "\"mcpg\"",
                          "the realm of the WWW-Authenticate challenge"),
    MCPG_CFG_BOOL_FIELD(apikey_cfg, skip_jwt_shaped, "skip_jwt_shaped", "true",
                        "a Bearer token shaped like a JWT is not a key: pass it on "
                        "(to identity_jwt)"),
    MCPG_CFG_BOOL_FIELD(apikey_cfg, challenge_anonymous, "challenge_anonymous", "true",
                        "a call without a key: set the challenge the kernel's anonymous "
                        "401 carries"),
    MCPG_CONFIG_END};

/* One loop's share of retiring a table: a post that says the loop has passed. */
typedef struct retire_post {
    mcpg_post post;
    struct retired *r;
} retire_post;

/* A table swapped out, freed once `waiting` loops (and the main thread) have
 * passed. The record itself is freed on the main thread once `done`. */
typedef struct retired {
    struct retired *next; /* main thread only */
    const mcpg_host *host;
    keytable *table;
    atomic_uint waiting;
    atomic_int done;
    uint32_t n_posts;
    retire_post posts[];
} retired;

typedef struct apikey {
    const mcpg_host *host;
    mcpg_instance *self;
    const apikey_cfg *cfg;
    int from_x_api_key, from_authorization;
    EVP_MD *sha256;
    EVP_MD_CTX **digest; /* one per worker, reused call after call */
    uint32_t n_digest;
    char challenge_invalid[IDKEY_REALM_MAX + 48];
    char challenge_anonymous[IDKEY_REALM_MAX + 24];
    _Atomic(keytable *) table;
    retired *retired; /* main thread only */
    _Atomic uint64_t warned_us, warn_suppressed;
} apikey;

/* ------------------------------------------------------------------ */
/* the presented key                                                   */

typedef struct presented {
    const char *key;
    size_t len;
    const char *header; /* where it came from, for the log */
} presented;

static void trim(const char **s, size_t *n) {
    while (*n && (**s == ' ' || **s == '\t')) (*s)++, (*n)--;
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t')) (*n)--;
}

static int is_b64url(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

/* What identity_jwt judges rather than passes on (its jwt_shape_of): "eyJ"
 * (a JOSE header's '{"' in base64url), then base64url parts joined by dots:
 * three with a non-empty payload (a JWS; its signature may be empty, which
 * identity_jwt refuses as alg none) or five (a JWE). Keys made by
 * scripts/mcpg-apikey have no dots. */
static int jwt_shaped(const char *s, size_t n) {
    if (n < 3 || memcmp(s, "eyJ", 3) != 0) return 0;
    size_t parts = 1, len = 0, payload = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.') {
            if (parts == 2) payload = len;
            if (++parts > 5) return 0;
            len = 0;
        } else if (is_b64url(s[i])) {
            len++;
        } else {
            return 0;
        }
    }
    return (parts == 3 && payload > 0) || parts == 5;
}

/* The token of "Bearer <token>" (scheme case-insensitive), or 0. */
static int bearer_token(const char *v, size_t n, const char **tok, size_t *tn) {
    static const char scheme[] = "bearer";
    const size_t sl = sizeof scheme - 1;
    if (n <= sl || (v[sl] != ' ' && v[sl] != '\t') || strncasecmp(v, scheme, sl) != 0) return 0;
    *tok = v + sl;
    *tn = n - sl;
    trim(tok, tn);
    return *tn > 0;
}

static int header_value(apikey *a, mcpg_call *call, const char *name, const char **v, size_t *n) {
    *v = a->host->call_header(call, name, n);
    if (!*v) return 0;
    trim(v, n);
    return *n > 0;
}

/* 1 when the call presents an API key (X-API-Key first). */
static int find_key(apikey *a, mcpg_call *call, presented *p) {
    const char *v;
    size_t n;
    if (a->from_x_api_key && header_value(a, call, "x-api-key", &v, &n)) {
        *p = (presented){v, n, "X-API-Key"};
        return 1;
    }
    if (a->from_authorization && header_value(a, call, "authorization", &v, &n) &&
        bearer_token(v, n, &p->key, &p->len)) {
        p->header = "Authorization";
        return !(a->cfg->skip_jwt_shaped && jwt_shaped(p->key, p->len));
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* answers                                                             */

static mcpg_status fail_internal(apikey *a, mcpg_call *call, const char *what) {
    a->host->log(a->self, MCPG_LOG_ERROR, "%s failed", what);
    a->host->call_error(call, MCPG_RPC_INTERNAL_ERROR, "Internal error: identity", NULL);
    a->host->call_set_http(call, 503, 1);
    return MCPG_DENY;
}

static mcpg_status pass(apikey *a, mcpg_call *call) {
    const mcpg_host *h = a->host;
    if (a->cfg->challenge_anonymous && MCPG_HOST_HAS(h, call_set_challenge))
        h->call_set_challenge(call, a->challenge_anonymous);
    return MCPG_CONTINUE;
}

/* One log line a second at most: a client trying keys must not flood it. */
static void warn_invalid(apikey *a, mcpg_call *call, const char *header) {
    const mcpg_host *h = a->host;
    uint64_t now = h->mono_us();
    uint64_t last = atomic_load_explicit(&a->warned_us, memory_order_relaxed);
    if ((last && now - last < IDKEY_WARN_EVERY_US) ||
        !atomic_compare_exchange_strong(&a->warned_us, &last, now)) {
        atomic_fetch_add_explicit(&a->warn_suppressed, 1, memory_order_relaxed);
        return;
    }
    uint64_t more = atomic_exchange_explicit(&a->warn_suppressed, 0, memory_order_relaxed);
    size_t pn = 0;
    const char *peer = MCPG_HOST_HAS(h, call_peer) ? h->call_peer(call, &pn) : NULL;
    h->log(a->self, MCPG_LOG_WARN,
           "refused an API key in %s from %.*s: no entry of %s has its hash "
           "(%llu more refused since the last line)",
           header, peer ? (int)pn : 7, peer ? peer : "unknown", a->cfg->keys_file,
           (unsigned long long)more);
}

static mcpg_status refuse(apikey *a, mcpg_call *call, const char *header) {
    const mcpg_host *h = a->host;
    /* The message never carries the key, nor anything derived from it. */
    h->call_error(call, MCPG_RPC_UNAUTHENTICATED, "Unauthenticated: invalid API key", NULL);
    h->call_set_http(call, 401, 0);
    if (MCPG_HOST_HAS(h, call_set_challenge))
        h->call_set_challenge(call, a->challenge_invalid);
    warn_invalid(a, call, header);
    return MCPG_DENY;
}

static mcpg_status identify(apikey *a, mcpg_call *call, const keytable_entry *e) {
    const mcpg_host *h = a->host;
    int rc;
    if (MCPG_HOST_HAS(h, call_identify)) {
        mcpg_identity id = {.size = sizeof id,
                            .n_roles = e->n_roles,
                            .principal = e->principal,
                            .tenant = e->tenant,
                            .roles = e->roles,
                            .method = "apikey"};
        rc = h->call_identify(call, &id);
    } else {
        rc = h->call_set_identity(call, e->principal, e->tenant, e->roles_csv);
    }
    return rc ? fail_internal(a, call, "setting the identity") : MCPG_CONTINUE;
}

/* SHA-256 with the calling loop's own context: EVP_Digest would allocate
 * and free one (two mallocs) on every call. */
static int hash_key(apikey *a, mcpg_call *call, const presented *p, uint8_t *out) {
    const mcpg_host *h = a->host;
    uint32_t i = h->worker_index(h->call_worker(call));
    if (i >= a->n_digest) return EVP_Digest(p->key, p->len, out, NULL, a->sha256, NULL);
    EVP_MD_CTX *c = a->digest[i];
    return EVP_DigestInit_ex2(c, a->sha256, NULL) && EVP_DigestUpdate(c, p->key, p->len) &&
           EVP_DigestFinal_ex(c, out, NULL);
}

static mcpg_status apikey_authenticate(void *instance, mcpg_call *call) {
    apikey *a = instance;
    presented p;
    if (!find_key(a, call, &p)) return pass(a, call);
    uint8_t hash[KEYTABLE_HASH_LEN];
    if (!hash_key(a, call, &p, hash))
        return fail_internal(a, call, "SHA-256");
    /* The table read here stays alive until this op returns (see retire). */
    const keytable *t = atomic_load_explicit(&a->table, memory_order_acquire);
    long i = keytable_find(t, hash);
    return i < 0 ? refuse(a, call, p.header) : identify(a, call, &t->entries[i]);
}

/* ------------------------------------------------------------------ */
/* loading the file                                                    */

typedef struct report_ctx {
    const mcpg_host *host;
    mcpg_report *rep;    /* validate */
    mcpg_instance *self; /* create, reloaded */
} report_ctx;

static void report_problem(void *arg, const char *message) {
    report_ctx *r = arg;
    if (r->rep)
        r->host->report_error(r->rep, "keys_file", "%s", message);
    else
        r->host->log(r->self, MCPG_LOG_ERROR, "keys_file %s", message);
}

/* Whoever can write the file can add a key: say so when that is not only
 * its owner. */
static void warn_if_writable(apikey *a) {
    struct stat st;
    if (stat(a->cfg->keys_file, &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)))
        a->host->log(a->self, MCPG_LOG_WARN,
                     "keys_file %s is writable by its group or others: anyone who can write "
                     "it can add a key (chmod 600 or 640)", a->cfg->keys_file);
}

static keytable *load_table(apikey *a) {
    report_ctx r = {a->host, NULL, a->self};
    keytable *t = NULL;
    keytable_load(a->host, a->cfg->keys_file, &t, report_problem, &r);
    if (t) warn_if_writable(a);
    return t;
}

/* The realm goes inside a quoted string: no quote, backslash or control
 * character, so nothing needs escaping. */
static const char *realm_problem(const char *realm) {
    size_t n = strlen(realm);
    if (n == 0 || n > IDKEY_REALM_MAX) return "must be 1 to 64 characters";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)realm[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return "must be printable ASCII without '\"' or '\\'";
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* retiring a table swapped out                                        */

static void retired_pass(retired *r) {
    if (atomic_fetch_sub_explicit(&r->waiting, 1, memory_order_acq_rel) != 1) return;
    keytable_free(r->host, r->table);
    r->table = NULL;
    atomic_store_explicit(&r->done, 1, memory_order_release);
}

static void retired_pass_on_loop(void *arg) {
    retired_pass(((retire_post *)arg)->r);
}

/* Free the records whose table is gone (main thread). all: the loops have
 * ended, so free every record and whatever table is left. */
static void reap_retired(apikey *a, int all) {
    retired **pp = &a->retired;
    while (*pp) {
        retired *r = *pp;
        if (!all && !atomic_load_explicit(&r->done, memory_order_acquire)) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        if (r->table) keytable_free(a->host, r->table);
        a->host->free(r);
    }
}

/* Publish `fresh` and hand the old table to every loop: each posts back once
 * it is past any op that may have read it. 0, or MCPG_ENOMEM (nothing
 * changed). */
static int swap_table(apikey *a, keytable *fresh) {
    const mcpg_host *h = a->host;
    uint32_t n = h->worker_count();
    retired *r = h->calloc(1, sizeof *r + (size_t)n * sizeof(retire_post));
    if (!r) return MCPG_ENOMEM;
    r->host = h;
    r->n_posts = n;
    r->table = atomic_exchange_explicit(&a->table, fresh, memory_order_acq_rel);
    /* One count per loop, one for this thread while it posts. */
    atomic_store_explicit(&r->waiting, n + 1, memory_order_relaxed);
    r->next = a->retired;
    a->retired = r;
    for (uint32_t i = 0; i < n; i++) {
        r->posts[i] = (retire_post){.post = {.fn = retired_pass_on_loop}, .r = r};
        r->posts[i].post.arg = &r->posts[i];
        mcpg_worker *w = h->worker_at(i);
        if (!w || h->worker_post(w, &r->posts[i].post) != 0) retired_pass(r); /* loop gone */
    }
    retired_pass(r);
    return 0;
}

/* ------------------------------------------------------------------ */
/* lifecycle                                                           */

static int apikey_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const apikey_cfg *cfg = config;
    int bad = 0;
    const char *why = realm_problem(cfg->realm);
    if (why) {
        host->report_error(rep, "realm", "%s", why);
        bad = 1;
    }
    report_ctx r = {host, rep, NULL};
    keytable *t = NULL;
    int rc = keytable_load(host, cfg->keys_file, &t, report_problem, &r);
    keytable_free(host, t);
    return bad || rc ? MCPG_ECONFIG : 0;
}

static void apikey_destroy(void *instance) {
    apikey *a = instance;
    if (!a) return;
    reap_retired(a, 1);
    keytable *t = atomic_load_explicit(&a->table, memory_order_relaxed);
    if (t) keytable_free(a->host, t);
    for (uint32_t i = 0; i < a->n_digest; i++) EVP_MD_CTX_free(a->digest[i]);
    a->host->free(a->digest);
    EVP_MD_free(a->sha256);
    a->host->free(a);
}

/* One digest context per worker (none at --check, where there are no loops). */
static int make_digests(apikey *a) {
    uint32_t n = a->host->worker_count();
    if (n && !(a->digest = a->host->calloc(n, sizeof *a->digest))) return 0;
    for (; a->n_digest < n; a->n_digest++)
        if (!(a->digest[a->n_digest] = EVP_MD_CTX_new())) return 0;
    return 1;
}

static int apikey_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                         void **out) {
    const apikey_cfg *cfg = config;
    if (realm_problem(cfg->realm)) {
        host->log(self, MCPG_LOG_ERROR, "realm %s", realm_problem(cfg->realm));
        return MCPG_ECONFIG;
    }
    apikey *a = host->calloc(1, sizeof *a);
    if (!a) return MCPG_ENOMEM;
    *a = (apikey){.host = host, .self = self, .cfg = cfg};
    a->from_x_api_key = strcmp(cfg->headers, "authorization") != 0;
    a->from_authorization = strcmp(cfg->headers, "x-api-key") != 0;
    snprintf(a->challenge_invalid, sizeof a->challenge_invalid,
             "Bearer realm=\"%s\", error=\"invalid_token\"", cfg->realm);
    snprintf(a->challenge_anonymous, sizeof a->challenge_anonymous, "Bearer realm=\"%s\"",
             cfg->realm);
    /* Fetched once: EVP_sha256() would look the algorithm up on every call. */
    a->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    int digests = a->sha256 && make_digests(a);
    keytable *t = digests ? load_table(a) : NULL;
    if (!t) {
        if (!digests) host->log(self, MCPG_LOG_ERROR, "OpenSSL: no SHA256 context");
        apikey_destroy(a);
        return MCPG_ECONFIG;
    }
    atomic_init(&a->table, t);
    host->log(self, MCPG_LOG_INFO, "%zu key(s) from %s", t->n, cfg->keys_file);
    *out = a;
    return 0;
}

/* A reload carried this instance over: read the file again. A bad file
 * keeps the keys it had. */
static void apikey_reloaded(void *instance) {
    apikey *a = instance;
    reap_retired(a, 0);
    keytable *fresh = load_table(a);
    const keytable *old = atomic_load_explicit(&a->table, memory_order_relaxed);
    if (!fresh) {
        a->host->log(a->self, MCPG_LOG_ERROR, "keys_file %s not reloaded: keeping its %zu key(s)",
                     a->cfg->keys_file, old->n);
        return;
    }
    size_t was = old->n;
    if (swap_table(a, fresh) != 0) {
        keytable_free(a->host, fresh);
        a->host->log(a->self, MCPG_LOG_ERROR, "keys_file %s not reloaded: out of memory",
                     a->cfg->keys_file);
        return;
    }
    a->host->log(a->self, MCPG_LOG_INFO, "keys_file %s reloaded: %zu key(s) (was %zu)",
                 a->cfg->keys_file, fresh->n, was);
}

static const mcpg_lifecycle_ops apikey_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = apikey_validate,
    .create = apikey_create,
    .destroy = apikey_destroy,
    .reloaded = apikey_reloaded,
};

static const mcpg_identity_ops apikey_ops = {
    MCPG_OPS_HEAD(mcpg_identity_ops),
    .authenticate = apikey_authenticate,
};

MCPG_MODULE_DEFINE(MCPG_KIND_IDENTITY, "identity_apikey", "1.0.0",
                   .description = "API keys, kept as SHA-256 hashes in a file",
                   .config = apikey_config, .config_size = sizeof(apikey_cfg),
                   .lifecycle = &apikey_lifecycle, .ops = &apikey_ops);
