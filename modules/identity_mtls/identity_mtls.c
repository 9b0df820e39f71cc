/* identity_mtls: who a call is, from the client certificate its TLS
 * connection verified (host->call_tls, ABI 1.2).
 *
 * The principal is the first name the certificate has among principal_from
 * (subject CN, URI, DNS or email subjectAltName, in the order given); `map`
 * gives a principal its tenant and roles, `tenant`/`roles` are the defaults.
 *   verified certificate with a name -> host->call_identify(..., "mtls"), CONTINUE;
 *   none (clear text, no certificate, not verified, no name of any source) ->
 *     pass (CONTINUE without identity), or with `require` DENY -32001 / 401;
 *   a source, before one gave a name, that finds two names (two CNs, two
 *     SANs of its type) or one it cannot take as it is (a NUL or another
 *     control character, no text form) -> DENY -32001 / 401 whatever
 *     `require` says, and a log line (at most one a second) saying why;
 *   a principal `map` does not name, with `mapped_only` -> DENY -32001 / 401.
 * The certificate's subject, issuer, SANs and fingerprint go along as claims
 * for the policy stage.
 */
#include <mcpg/sdk.h>

#include <jansson.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "mtls_names.h"

#define MTLS_MAX_FROM 4
#define MTLS_MAX_ROLES 64
#define MTLS_MAX_ROLE 128
#define MTLS_MAX_TENANT 256

typedef struct mtls_cfg {
    const char *principal_from; /* JSON: a source or a list of them */
    const char *map;            /* JSON object, or NULL */
    const char *tenant;
    const char *roles;          /* JSON array */
    int require;
    int mapped_only;
} mtls_cfg;

static const mcpg_config_field mtls_config[] = {
    MCPG_CFG_JSON_FIELD(mtls_cfg, principal_from, "principal_from", "\"subject_cn\"",
                        "where the principal comes from: subject_cn, san_uri, san_dns, "
                        "san_email, or a list of them tried in order"),
    MCPG_CFG_JSON_FIELD(mtls_cfg, map, "map", NULL,
                        "{\"<principal>\": {\"tenant\": \"...\", \"roles\": [\"...\"]}}"),
    MCPG_CFG_STRING_FIELD(mtls_cfg, tenant, "tenant", NULL,
                          "the tenant of a principal map does not give one"),
    MCPG_CFG_JSON_FIELD(mtls_cfg, roles, "roles", "[]",
                        "the roles of a principal map does not give any"),
    MCPG_CFG_BOOL_FIELD(mtls_cfg, require, "require", "false",
                        "no verified client certificate with a name: refuse (401) instead "
                        "of passing to the next identity instance"),
    MCPG_CFG_BOOL_FIELD(mtls_cfg, mapped_only, "mapped_only", "false",
                        "refuse (401) a certificate whose principal map does not name"),
    MCPG_CONFIG_END};

/* principal_from's words, in the order of their enum. */
typedef enum mtls_source { SRC_SUBJECT_CN, SRC_SAN_URI, SRC_SAN_DNS, SRC_SAN_EMAIL } mtls_source;
static const char *const source_names[] = {"subject_cn", "san_uri", "san_dns", "san_email"};
static const char *const source_san_type[] = {NULL, "URI", "DNS", "email"};

/* What a principal gets. */
typedef struct mtls_grant {
    char *principal;   /* the map's key; NULL for the defaults */
    char *tenant;      /* NULL: none given */
    char **roles;
    uint32_t n_roles;
    int has_roles;     /* the map gave roles (maybe none): the defaults do not apply */
    char *roles_csv;   /* for ABI 1.0 hosts, or NULL */
} mtls_grant;

typedef struct mtls_rules {
    mtls_source from[MTLS_MAX_FROM];
    uint32_t n_from;
    mtls_grant defaults;
    mtls_grant *map; /* sorted by principal */
    size_t n_map;
} mtls_rules;

typedef struct mtls {
    const mcpg_host *host;
    mcpg_instance *self;
    const mtls_cfg *cfg;
    mtls_rules rules;
    _Atomic uint64_t warned_us, warn_suppressed; /* the refusals' log line, rate-bounded */
} mtls;

/* At most one log line a second about refused certificates: a client
 * presenting one again and again must not flood the log. */
#define MTLS_WARN_EVERY_US 1000000

/* ------------------------------------------------------------------ */
/* config: one parse for validate (rules NULL) and create               */

static char *dup_string(const mcpg_host *h, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = h->alloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int name_ok(const char *s, size_t n, size_t max) {
    if (n == 0 || n > max || strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 0;
    return 1;
}

static void parse_from(mcpg_config_problems *p, const json_t *v, mtls_rules *r) {
    json_t *one = json_is_string(v) ? json_pack("[O]", v) : json_incref((json_t *)v);
    if (!json_is_array(one) || json_array_size(one) == 0 ||
        json_array_size(one) > MTLS_MAX_FROM) {
        mcpg_config_problem(p, "principal_from",
                            "must be one of subject_cn, san_uri, san_dns, san_email, or a "
                            "list of 1 to 4 of them");
        json_decref(one);
        return;
    }
    size_t i;
    const json_t *s;
    json_array_foreach(one, i, s) {
        char path[40];
        snprintf(path, sizeof path, json_is_string(v) ? "principal_from" : "principal_from[%zu]", i);
        int found = -1;
        for (int k = 0; k < MTLS_MAX_FROM; k++)
            if (json_is_string(s) && !strcmp(json_string_value(s), source_names[k])) found = k;
        if (found < 0) {
            mcpg_config_problem(p, path, "must be one of subject_cn, san_uri, san_dns, san_email");
            continue;
        }
        for (uint32_t k = 0; k < r->n_from; k++)
            if (r->from[k] == (mtls_source)found)
                mcpg_config_problem(p, path, "\"%s\" is listed twice", source_names[found]);
        r->from[r->n_from++] = (mtls_source)found;
    }
    json_decref(one);
}

static void grant_free(const mcpg_host *h, mtls_grant *g) {
    for (uint32_t i = 0; i < g->n_roles; i++) h->free(g->roles[i]);
    h->free(g->roles);
    h->free(g->roles_csv);
    h->free(g->tenant);
    h->free(g->principal);
    memset(g, 0, sizeof *g);
}

/* The roles into g (when not NULL), comma-joined too. */
static void parse_roles(mcpg_config_problems *p, const char *path, const json_t *v,
                        mtls_grant *g) {
    if (!json_is_array(v) || json_array_size(v) > MTLS_MAX_ROLES) {
        mcpg_config_problem(p, path, "must be an array of at most %d strings", MTLS_MAX_ROLES);
        return;
    }
    size_t n = json_array_size(v), csv = 1, i;
    const json_t *s;
    if (g && n) g->roles = p->h->calloc(n, sizeof *g->roles);
    json_array_foreach(v, i, s) {
        char at[300];
        snprintf(at, sizeof at, "%s[%zu]", path, i);
        if (!json_is_string(s) || !name_ok(json_string_value(s), json_string_length(s), MTLS_MAX_ROLE))
            mcpg_config_problem(p, at, "must be a string of 1 to %d bytes without control "
                                       "characters", MTLS_MAX_ROLE);
        else if (strchr(json_string_value(s), ','))
            mcpg_config_problem(p, at, "must not hold a comma");
        else if (g && g->roles && (g->roles[g->n_roles] = dup_string(p->h, json_string_value(s))))
            csv += json_string_length(s) + 1, g->n_roles++;
    }
    if (!g) return;
    g->has_roles = 1;
    if (g->n_roles < n) {
        if (!p->errors) mcpg_config_problem(p, path, "out of memory");
        return;
    }
    if (n && (g->roles_csv = p->h->alloc(csv))) {
        g->roles_csv[0] = '\0';
        for (uint32_t k = 0; k < g->n_roles; k++) {
            if (k) strcat(g->roles_csv, ",");
            strcat(g->roles_csv, g->roles[k]);
        }
    }
}

static void parse_tenant(mcpg_config_problems *p, const char *path, const char *s, size_t n,
                         mtls_grant *g) {
    if (!name_ok(s, n, MTLS_MAX_TENANT))
        mcpg_config_problem(p, path, "must be a string of 1 to %d bytes without control "
                                     "characters", MTLS_MAX_TENANT);
    else if (g && !(g->tenant = dup_string(p->h, s)))
        mcpg_config_problem(p, path, "out of memory");
}

static void parse_map_entry(mcpg_config_problems *p, const char *principal, const json_t *v,
                            mtls_grant *g) {
    char path[300];
    snprintf(path, sizeof path, "map.%.200s", principal);
    if (!name_ok(principal, strlen(principal), MTLS_NAME_MAX))
        mcpg_config_problem(p, path, "a principal must be 1 to %d bytes without control "
                                     "characters", MTLS_NAME_MAX);
    if (!json_is_object(v)) {
        mcpg_config_problem(p, path, "must be an object {\"tenant\": ..., \"roles\": [...]}");
        return;
    }
    static const char *const known[] = {"tenant", "roles"};
    const char *key;
    const json_t *m;
    json_object_foreach((json_t *)v, key, m) {
        char at[340];
        snprintf(at, sizeof at, "%s.%.32s", path, key);
        if (!strcmp(key, "tenant")) {
            if (!json_is_string(m)) mcpg_config_problem(p, at, "must be a string");
            else parse_tenant(p, at, json_string_value(m), json_string_length(m), g);
        } else if (!strcmp(key, "roles")) {
            parse_roles(p, at, m, g);
        } else {
            mcpg_config_unknown_key(p, at, key, known, 2);
        }
    }
    if (g && !(g->principal = dup_string(p->h, principal)))
        mcpg_config_problem(p, path, "out of memory");
}

static int grant_cmp(const void *a, const void *b) {
    return strcmp(((const mtls_grant *)a)->principal, ((const mtls_grant *)b)->principal);
}

static void parse_map(mcpg_config_problems *p, const json_t *map, mtls_rules *r) {
    if (!json_is_object(map)) {
        mcpg_config_problem(p, "map", "must be an object {\"<principal>\": {\"tenant\": ..., "
                                      "\"roles\": [...]}}");
        return;
    }
    size_t n = json_object_size(map);
    if (r && n && !(r->map = p->h->calloc(n, sizeof *r->map))) {
        mcpg_config_problem(p, "map", "out of memory");
        return;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)map, key, v) {
        parse_map_entry(p, key, v, r ? &r->map[r->n_map] : NULL);
        if (r) r->n_map++;
    }
    if (r && !p->errors) qsort(r->map, r->n_map, sizeof *r->map, grant_cmp);
}

static json_t *load_json(mcpg_config_problems *p, const char *key, const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
    if (!v) mcpg_config_problem(p, key, "%s", e.text);
    return v;
}

static void rules_free(const mcpg_host *h, mtls_rules *r) {
    for (size_t i = 0; i < r->n_map; i++) grant_free(h, &r->map[i]);
    h->free(r->map);
    grant_free(h, &r->defaults);
    memset(r, 0, sizeof *r);
}

/* Parse the config into r (validate: a scratch r, freed here). */
static int rules_parse(const mtls_cfg *cfg, mcpg_config_problems *p, mtls_rules *r) {
    mtls_rules scratch = {0};
    mtls_rules *into = r ? r : &scratch;
    json_t *from = load_json(p, "principal_from", cfg->principal_from);
    if (from) parse_from(p, from, into);
    json_decref(from);
    json_t *roles = load_json(p, "roles", cfg->roles);
    if (roles) parse_roles(p, "roles", roles, r ? &r->defaults : NULL);
    json_decref(roles);
    if (cfg->tenant)
        parse_tenant(p, "tenant", cfg->tenant, strlen(cfg->tenant), r ? &r->defaults : NULL);
    json_t *map = cfg->map ? load_json(p, "map", cfg->map) : NULL;
    if (map && !json_is_null(map)) parse_map(p, map, r);
    json_decref(map);
    if (!r) rules_free(p->h, &scratch);
    return p->errors ? MCPG_ECONFIG : 0;
}

/* ------------------------------------------------------------------ */
/* a call                                                              */

static mcpg_status refuse(mtls *m, mcpg_call *call, const char *why) {
    m->host->call_error(call, MCPG_RPC_UNAUTHENTICATED, why, NULL);
    m->host->call_set_http(call, 401, 0);
    return MCPG_DENY;
}

static const char *tls_string(const mcpg_tls_info *t, const char *const *field) {
    size_t end = (size_t)((const char *)field - (const char *)t) + sizeof *field;
    return end <= t->size ? *field : NULL;
}

/* The principal from the first source that gives one (MTLS_FOUND, *from
 * says which); MTLS_NONE when none does. A source that finds two names, or
 * one it cannot take, ends the search (*from: that source): the next one
 * must not decide for a certificate that already names someone else. */
static mtls_found principal_of(const mtls *m, const mcpg_tls_info *t, char *dst, size_t cap,
                               mtls_source *from) {
    const char *subject = tls_string(t, &t->cert_subject);
    const char *sans = tls_string(t, &t->cert_sans_json);
    for (uint32_t i = 0; i < m->rules.n_from; i++) {
        mtls_source s = m->rules.from[i];
        mtls_found got = s == SRC_SUBJECT_CN ? mtls_subject_cn(subject, dst, cap)
                                             : mtls_san(sans, source_san_type[s], dst, cap);
        if (got != MTLS_NONE) {
            *from = s;
            return got;
        }
    }
    return MTLS_NONE;
}

/* The log line for a refused certificate, at most one a second; the lines
 * left out are counted in the next one. The certificate is named by its
 * fingerprint: its names are the hostile part, kept out of the log. */
static void warn_refused(mtls *m, mcpg_call *call, const mcpg_tls_info *t, mtls_source from,
                         mtls_found why) {
    const mcpg_host *h = m->host;
    uint64_t now = h->mono_us();
    uint64_t last = atomic_load_explicit(&m->warned_us, memory_order_relaxed);
    if ((last && now - last < MTLS_WARN_EVERY_US) ||
        !atomic_compare_exchange_strong(&m->warned_us, &last, now ? now : 1)) {
        atomic_fetch_add_explicit(&m->warn_suppressed, 1, memory_order_relaxed);
        return;
    }
    uint64_t more = atomic_exchange_explicit(&m->warn_suppressed, 0, memory_order_relaxed);
    size_t pn = 0;
    const char *peer = MCPG_HOST_HAS(h, call_peer) ? h->call_peer(call, &pn) : NULL;
    const char *sha = tls_string(t, &t->cert_sha256);
    const char *what = from == SRC_SUBJECT_CN ? "CN in its subject"
                                              : source_san_type[from];
    h->log(m->self, MCPG_LOG_WARN,
           "refused a client certificate (sha256 %.64s) from %.*s: %s %s%s, so it names no "
           "one principal (%llu more refused since the last line)",
           sha ? sha : "unknown", peer ? (int)pn : 7, peer ? peer : "unknown",
           why == MTLS_AMBIGUOUS ? "more than one" : "a malformed", what,
           from == SRC_SUBJECT_CN ? "" : " subjectAltName", (unsigned long long)more);
}

static const mtls_grant *lookup(const mtls *m, const char *principal) {
    mtls_grant key = {.principal = (char *)principal};
    return m->rules.n_map ? bsearch(&key, m->rules.map, m->rules.n_map, sizeof key, grant_cmp)
                          : NULL;
}

/* {"cert_subject":...,"cert_issuer":...,"cert_sha256":...,"cert_sans":[...],
 *  "principal_from":"..."}: what the policy stage may want beyond the name. */
static int claims_of(const mcpg_host *h, const mcpg_tls_info *t, mtls_source from,
                     mcpg_buf *b) {
    static const char *const names[] = {"cert_subject", "cert_issuer", "cert_sha256"};
    const char *vals[] = {tls_string(t, &t->cert_subject), tls_string(t, &t->cert_issuer),
                          tls_string(t, &t->cert_sha256)};
    int rc = h->buf_printf(b, "{\"principal_from\":\"%s\"", source_names[from]);
    for (int i = 0; i < 3 && !rc; i++) {
        if (!vals[i]) continue;
        rc = h->buf_printf(b, ",\"%s\":", names[i]);
        if (!rc) rc = h->buf_append_json_string(b, vals[i], strlen(vals[i]));
    }
    const char *sans = tls_string(t, &t->cert_sans_json);
    if (!rc && sans && mcpg_json_validate(sans, strlen(sans)) == 0)
        rc = h->buf_printf(b, ",\"cert_sans\":%s", sans);
    return rc ? rc : h->buf_append(b, "}", 1);
}

static mcpg_status identify(mtls *m, mcpg_call *call, const mcpg_tls_info *t,
                            const char *principal, mtls_source from, const mtls_grant *g) {
    const mcpg_host *h = m->host;
    const mtls_grant *d = &m->rules.defaults;
    const char *tenant = g && g->tenant ? g->tenant : d->tenant;
    const mtls_grant *roles = g && g->has_roles ? g : d;
    int rc;
    if (MCPG_HOST_HAS(h, call_identify)) {
        mcpg_buf claims = {0};
        int no_claims = claims_of(h, t, from, &claims);
        mcpg_identity id = {.size = sizeof id,
                            .n_roles = roles->n_roles,
                            .principal = principal,
                            .tenant = tenant,
                            .roles = (const char *const *)roles->roles,
                            .claims_json = no_claims ? NULL : claims.data,
                            .claims_len = no_claims ? 0 : claims.len,
                            .method = "mtls"};
        rc = h->call_identify(call, &id);
        h->buf_free(&claims);
    } else {
        rc = h->call_set_identity(call, principal, tenant, roles->roles_csv);
    }
    if (!rc) return MCPG_CONTINUE;
    h->log(m->self, MCPG_LOG_ERROR, "setting the identity failed: %s", h->strerror(rc));
    h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "Internal error: identity", NULL);
    h->call_set_http(call, 503, 1);
    return MCPG_DENY;
}

static mcpg_status mtls_authenticate(void *instance, mcpg_call *call) {
    mtls *m = instance;
    const mcpg_host *h = m->host;
    const mcpg_tls_info *t = MCPG_HOST_HAS(h, call_tls) ? h->call_tls(call) : NULL;
    char principal[MTLS_NAME_MAX + 1];
    mtls_source from = SRC_SUBJECT_CN;
    int verified = t && MCPG_HAS_FIELD(t, client_verified) && t->client_verified;
    mtls_found got = verified ? principal_of(m, t, principal, sizeof principal, &from)
                              : MTLS_NONE;
    if (got == MTLS_AMBIGUOUS || got == MTLS_MALFORMED) {
        warn_refused(m, call, t, from, got);
        return refuse(m, call, "Unauthenticated: this client certificate does not name one "
                               "principal");
    }
    if (got == MTLS_NONE)
        return m->cfg->require
                   ? refuse(m, call, "Unauthenticated: a verified client certificate is required")
                   : MCPG_CONTINUE;
    const mtls_grant *g = lookup(m, principal);
    if (!g && m->cfg->mapped_only)
        return refuse(m, call, "Unauthenticated: this client certificate is not admitted");
    return identify(m, call, t, principal, from, g);
}

/* ------------------------------------------------------------------ */
/* lifecycle                                                           */

static int mtls_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    mcpg_config_problems p = {host, rep, NULL, 0};
    return rules_parse(config, &p, NULL);
}

static int mtls_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                       void **out) {
    mtls *m = host->calloc(1, sizeof *m);
    if (!m) return MCPG_ENOMEM;
    *m = (mtls){.host = host, .self = self, .cfg = config};
    mcpg_config_problems p = {host, NULL, self, 0};
    if (rules_parse(config, &p, &m->rules) != 0) {
        rules_free(host, &m->rules);
        host->free(m);
        return MCPG_ECONFIG;
    }
    if (!MCPG_HOST_HAS(host, call_tls))
        host->log(self, MCPG_LOG_WARN, "this gateway gives no TLS facts (ABI < 1.2): no call "
                                       "will have a verified certificate");
    *out = m;
    return 0;
}

static void mtls_destroy(void *instance) {
    mtls *m = instance;
    rules_free(m->host, &m->rules);
    m->host->free(m);
}

static const mcpg_lifecycle_ops mtls_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = mtls_validate,
    .create = mtls_create,
    .destroy = mtls_destroy,
};

static const mcpg_identity_ops mtls_ops = {
    MCPG_OPS_HEAD(mcpg_identity_ops),
    .authenticate = mtls_authenticate,
};

MCPG_MODULE_DEFINE(MCPG_KIND_IDENTITY, "identity_mtls", "1.0.0",
                   .description = "the verified TLS client certificate's subject or SAN as "
                                  "the principal",
                   .config = mtls_config, .config_size = sizeof(mtls_cfg),
                   .lifecycle = &mtls_lifecycle, .ops = &mtls_ops);
