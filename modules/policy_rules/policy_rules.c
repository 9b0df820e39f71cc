/* policy_rules: deny unless a rule allows.
 *
 * check() decides tools/call, prompts/get and resources/read (and
 * resources/subscribe, completion/complete, the rest) against the compiled
 * rules; the lists pass, and visible() filters their items. A denial is
 * JSON-RPC -32003 with HTTP 403 and a message that names the class of
 * refusal, never the rules. The rules are compiled at create() (and the
 * rules file again at reloaded()); a check allocates nothing unless it
 * denies, a role list is longer than 32, or a guard meets an unusually long
 * value (pr_guard.h). */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pr_publish.h"
#include "pr_rules.h"

#define PR_RPC_DENIED (-32003) /* implementation-defined range: -32000..-32019 */
#define PR_HTTP_DENIED 403
#define PR_STACK_ROLES 32

typedef struct pr_cfg {
    const char *rules;         /* JSON text of an array, or NULL */
    const char *rules_file;
    const char *other_methods; /* any_rule | allow | deny */
} pr_cfg;

static const mcpg_config_field pr_fields[] = {
    MCPG_CFG_JSON_FIELD(pr_cfg, rules, "rules", NULL,
                        "array of rules: {id, principal, tenant, roles, anonymous, tools, "
                        "prompts, resources, arguments}"),
    MCPG_CFG_STRING_FIELD(pr_cfg, rules_file, "rules_file", NULL,
                          "a JSON file of more rules (an array, or {\"rules\": [...]}), read "
                          "at start and again at each reload"),
    MCPG_CFG_ENUM_FIELD(pr_cfg, other_methods, "other_methods", "\"any_rule\"",
                        "any_rule|allow|deny",
                        "tasks/* and other methods naming no tool, prompt or resource: "
                        "allowed when some rule admits the caller (any_rule), always, or never"),
    MCPG_CONFIG_END};

enum { OTHER_ANY_RULE, OTHER_ALLOW, OTHER_DENY };

typedef struct pr_mod {
    const mcpg_host *host;
    mcpg_instance *self;
    const pr_cfg *cfg;
    int other;
    pr_publisher pub;
} pr_mod;

/* ---- who calls ---- */

typedef struct pr_who {
    pr_subject s;
    pr_str stack_roles[PR_STACK_ROLES];
    pr_str *heap_roles;
} pr_who;

static size_t len0(const char *s) { return s ? strlen(s) : 0; }

/* ABI 1.2's roles one by one; a 1.0/1.1 kernel's comma-separated list. */
static int roles_of(const mcpg_host *h, mcpg_call *call, pr_who *w) {
    int split = !MCPG_HOST_HAS(h, call_role_count) || !MCPG_HOST_HAS(h, call_role);
    const char *list = split ? h->call_roles(call) : NULL;
    uint32_t n = 0;
    if (split && list && *list) {
        n = 1;
        for (const char *c = list; *c; c++) n += *c == ',';
    } else if (!split) {
        n = h->call_role_count(call);
    }
    pr_str *v = w->stack_roles;
    if (n > PR_STACK_ROLES && !(v = w->heap_roles = malloc(n * sizeof *v))) return -1;
    uint32_t k = 0;
    if (split) {
        for (const char *c = list; n && c; ) {
            const char *comma = strchr(c, ',');
            size_t len = comma ? (size_t)(comma - c) : strlen(c);
            if (len) v[k++] = (pr_str){c, len};
            c = comma ? comma + 1 : NULL;
        }
    } else {
        for (uint32_t i = 0; i < n; i++) {
            const char *r = h->call_role(call, i);
            if (r) v[k++] = (pr_str){r, strlen(r)};
        }
    }
    w->s.roles = v;
    w->s.n_roles = k;
    return 0;
}

static int who_of(const mcpg_host *h, mcpg_call *call, pr_who *w) {
    memset(&w->s, 0, sizeof w->s);
    w->heap_roles = NULL;
    const char *p = h->call_principal(call);
    if (!p || !*p) return 0; /* anonymous */
    const char *t = h->call_tenant(call);
    w->s.principal = (pr_str){p, strlen(p)};
    w->s.tenant = (pr_str){t, len0(t)};
    return roles_of(h, call, w);
}

static void who_done(pr_who *w) { free(w->heap_roles); }

/* ---- denials ---- */

static const char *const kind_words[PR_KINDS] = {"tool", "prompt", "resource", "event"};

static mcpg_status deny(pr_mod *m, mcpg_call *call, const char *message, mcpg_buf *data) {
    const mcpg_host *h = m->host;
    h->call_error(call, PR_RPC_DENIED, message, data->len ? data->data : NULL);
    h->call_set_http(call, PR_HTTP_DENIED, 0);
    h->buf_free(data);
    return MCPG_DENY;
}

static mcpg_status deny_item(pr_mod *m, mcpg_call *call, pr_kind kind, const char *name,
                             size_t n) {
    const mcpg_host *h = m->host;
    char msg[400];
    int shown = n > 200 ? 200 : (int)n;
    snprintf(msg, sizeof msg, "denied by policy: no rule allows %s \"%.*s%s\" for this principal",
             kind_words[kind], shown, name, n > 200 ? "..." : "");
    mcpg_buf data = {0};
    h->buf_printf(&data, "{\"reason\":\"no_rule\",\"kind\":\"%s\",\"name\":", kind_words[kind]);
    h->buf_append_json_string(&data, name, n);
    if (h->buf_append(&data, "}", 1) != 0) data.len = 0;
    if (h->log_enabled(m->self, MCPG_LOG_DEBUG))
        h->log(m->self, MCPG_LOG_DEBUG, "%s \"%.*s\" denied to \"%s\": no rule", kind_words[kind],
               shown, name, h->call_principal(call) ? h->call_principal(call) : "(anonymous)");
    return deny(m, call, msg, &data);
}

static mcpg_status deny_guard(pr_mod *m, mcpg_call *call, const pr_guard *g) {
    const mcpg_host *h = m->host;
    const char *at = g->at.text[0] ? g->at.text : "(the whole arguments)";
    char msg[PR_MAX_PATTERN + 80];
    snprintf(msg, sizeof msg, "denied by policy: argument guard failed at %s", at);
    mcpg_buf data = {0};
    h->buf_printf(&data, "{\"reason\":\"argument_guard\",\"pointer\":");
    h->buf_append_json_string(&data, g->at.text, strlen(g->at.text));
    if (h->buf_append(&data, "}", 1) != 0) data.len = 0;
    return deny(m, call, msg, &data);
}

static mcpg_status deny_method(pr_mod *m, mcpg_call *call) {
    const mcpg_host *h = m->host;
    const char *method = mcpg_method_name(h->call_method(call));
    mcpg_buf data = {0};
    h->buf_printf(&data, "{\"reason\":\"no_rule\",\"method\":");
    h->buf_append_json_string(&data, method, strlen(method));
    if (h->buf_append(&data, "}", 1) != 0) data.len = 0;
    return deny(m, call, "denied by policy: no rule allows anything for this principal", &data);
}

static mcpg_status fail_internal(pr_mod *m, mcpg_call *call) {
    m->host->call_error(call, MCPG_RPC_INTERNAL_ERROR, "policy: out of memory", NULL);
    m->host->call_set_http(call, 503, 1);
    return MCPG_DENY;
}

/* ---- check ---- */

static pr_published *current(pr_mod *m) { return pr_publisher_current(&m->pub); }

/* The name the client used: ABI 1.2's call_client_name (with a binding's
 * prefix); an older kernel only has the backend's (call_target). */
static const char *client_name(const mcpg_host *h, mcpg_call *call) {
    const char *n = MCPG_HOST_HAS(h, call_client_name) ? h->call_client_name(call)
                                                       : h->call_target(call);
    return n ? n : "";
}

/* The resource_metadata="..." parameter of a challenge, or an empty piece. */
static pr_str metadata_param(const char *challenge) {
    static const char key[] = "resource_metadata=\"";
    const char *p = challenge ? strstr(challenge, key) : NULL;
    const char *end = p ? strchr(p + sizeof key - 1, '"') : NULL;
    return end ? (pr_str){p, (size_t)(end + 1 - p)} : (pr_str){NULL, 0};
}

/* A bearer token's caller refused for want of a role the covering rules
 * name (identity_jwt maps a token's scope claim to roles) is told which to
 * ask for: 403 with the RFC 6750 step-up challenge, naming the identity
 * stage's resource metadata as its 401 does. */
static void scope_challenge(pr_mod *m, mcpg_call *call, const pr_who *w, pr_kind kind,
                            const char *name, size_t n) {
    const mcpg_host *h = m->host;
    const char *how = MCPG_HOST_HAS(h, call_auth_method) ? h->call_auth_method(call) : NULL;
    char scopes[512], value[1024];
    if (!how || strcmp(how, "jwt") || !MCPG_HOST_HAS(h, call_set_challenge) ||
        !pr_missing_roles(&current(m)->pol, &w->s, kind, name, n, scopes, sizeof scopes))
        return;
    pr_str meta = metadata_param(MCPG_HOST_HAS(h, call_challenge) ? h->call_challenge(call) : NULL);
    int len = snprintf(value, sizeof value, "Bearer error=\"insufficient_scope\", scope=\"%s\"%s%.*s",
                       scopes, meta.n ? ", " : "", (int)meta.n, meta.p ? meta.p : "");
    if (len > 0 && (size_t)len < sizeof value) (void)h->call_set_challenge(call, value);
}

static mcpg_status check_item(pr_mod *m, mcpg_call *call, pr_kind kind, int guarded) {
    const mcpg_host *h = m->host;
    const char *name = client_name(h, call);
    size_t n = strlen(name), args_n = 0;
    const char *args = guarded ? h->call_args(call, &args_n) : NULL;
    pr_who w;
    if (who_of(h, call, &w) != 0) return fail_internal(m, call);
    const pr_guard *failed = NULL;
    pr_verdict v = pr_decide(&current(m)->pol, &w.s, kind, name, n, args, args_n, &failed);
    if (v == PR_NO_RULE) scope_challenge(m, call, &w, kind, name, n);
    who_done(&w);
    if (v == PR_ALLOW) return MCPG_CONTINUE;
    return v == PR_GUARD_FAILED ? deny_guard(m, call, failed) : deny_item(m, call, kind, name, n);
}

/* A string member of a params object, decoded into buf when it has escapes.
 * 1 found, 0 not (or not a string, or longer than cap). */
static int param_string(const mcpg_json_span *obj, const char *key, char *buf, size_t cap,
                        pr_str *out) {
    mcpg_json_span v;
    if (mcpg_json_object_get(obj->p, obj->n, key, &v) != 1 || v.type != MCPG_JSON_STRING)
        return 0;
    if (!v.escaped) {
        *out = (pr_str){v.p, v.n};
        return 1;
    }
    size_t n;
    if (mcpg_json_string_decode(&v, buf, cap, &n) != 0) return 0;
    *out = (pr_str){buf, n};
    return 1;
}

static int params_of(const mcpg_host *h, mcpg_call *call, mcpg_json_span *out) {
    size_t n = 0;
    const char *p = h->call_params(call, &n);
    size_t pos = 0;
    return p && mcpg_json_value(p, n, &pos, out) == 1 && out->type == MCPG_JSON_OBJECT;
}

static mcpg_status check_other(pr_mod *m, mcpg_call *call) {
    if (m->other == OTHER_ALLOW) return MCPG_CONTINUE;
    if (m->other == OTHER_DENY) return deny_method(m, call);
    pr_who w;
    if (who_of(m->host, call, &w) != 0) return fail_internal(m, call);
    int ok = pr_admits_any(&current(m)->pol, &w.s);
    who_done(&w);
    return ok ? MCPG_CONTINUE : deny_method(m, call);
}

/* An item named in params rather than by the call (subscribe, completion):
 * allowed when visible, since neither runs it. */
static mcpg_status check_named(pr_mod *m, mcpg_call *call, pr_kind kind, pr_str name,
                               int is_template) {
    pr_who w;
    if (who_of(m->host, call, &w) != 0) return fail_internal(m, call);
    int ok = pr_visible(&current(m)->pol, &w.s, kind, name.p, name.n, is_template);
    who_done(&w);
    return ok ? MCPG_CONTINUE : deny_item(m, call, kind, name.p, name.n);
}

/* resources/subscribe: the uri must be one the caller may read. */
static mcpg_status check_subscribe(pr_mod *m, mcpg_call *call) {
    mcpg_json_span params;
    char buf[2048];
    pr_str uri = {"", 0};
    if (params_of(m->host, call, &params)) param_string(&params, "uri", buf, sizeof buf, &uri);
    return check_named(m, call, PR_RESOURCE, uri, 0);
}

/* completion/complete: its ref names a prompt, or a resource template by
 * its uriTemplate; anything else is judged as other_methods says. */
static mcpg_status check_completion(pr_mod *m, mcpg_call *call) {
    mcpg_json_span params, ref, type;
    char buf[2048];
    pr_str id;
    if (!params_of(m->host, call, &params) ||
        mcpg_json_object_get(params.p, params.n, "ref", &ref) != 1 ||
        ref.type != MCPG_JSON_OBJECT || mcpg_json_object_get(ref.p, ref.n, "type", &type) != 1)
        return check_other(m, call);
    if (mcpg_json_string_eq(&type, "ref/prompt", 10) == 1 &&
        param_string(&ref, "name", buf, sizeof buf, &id))
        return check_named(m, call, PR_PROMPT, id, 0);
    if (mcpg_json_string_eq(&type, "ref/resource", 12) == 1 &&
        param_string(&ref, "uri", buf, sizeof buf, &id))
        return check_named(m, call, PR_RESOURCE, id, 1);
    return check_other(m, call);
}

static mcpg_status pr_check(void *instance, mcpg_call *call) {
    pr_mod *m = instance;
    switch (m->host->call_method(call)) {
    case MCPG_METHOD_TOOLS_LIST:
    case MCPG_METHOD_RESOURCES_LIST:
    case MCPG_METHOD_RESOURCES_TEMPLATES_LIST:
    case MCPG_METHOD_PROMPTS_LIST: return MCPG_CONTINUE; /* filtered by visible() */
    case MCPG_METHOD_TOOLS_CALL: return check_item(m, call, PR_TOOL, 1);
    case MCPG_METHOD_PROMPTS_GET: return check_item(m, call, PR_PROMPT, 1);
    case MCPG_METHOD_RESOURCES_READ: return check_item(m, call, PR_RESOURCE, 0);
    case MCPG_METHOD_RESOURCES_SUBSCRIBE: return check_subscribe(m, call);
    case MCPG_METHOD_RESOURCES_UNSUBSCRIBE: return MCPG_CONTINUE; /* giving up reveals nothing */
    case MCPG_METHOD_COMPLETION_COMPLETE: return check_completion(m, call);
    /* the events extension: the type is the call's name; events/list is
     * filtered by visible(), kind "event" */
    case MCPG_METHOD_EVENTS_POLL:
    case MCPG_METHOD_EVENTS_STREAM:
    case MCPG_METHOD_EVENTS_SUBSCRIBE: return check_item(m, call, PR_EVENT, 0);
    case MCPG_METHOD_EVENTS_UNSUBSCRIBE: return MCPG_CONTINUE; /* giving up reveals nothing */
    default: return check_other(m, call);
    }
}

/* ---- visible ---- */

/* The caller's admission mask, kept in the call's slot for the rest of the
 * list: bit 0 set, bits 1-8 the policy's version (a reload between two
 * items recomputes), bits 9-63 the first 55 rules (64-bit pointers only). */
#define PR_MASK_RULES 55

static int mask_of(pr_mod *m, mcpg_call *call, const pr_published *pub, pr_subject *s) {
    const mcpg_host *h = m->host;
    int fits = pub->pol.n <= PR_MASK_RULES && sizeof(uintptr_t) >= sizeof(uint64_t);
    void **slot = fits ? h->call_slot(call, m->self) : NULL;
    uintptr_t tag = 1u | (uintptr_t)(pub->version & 0xffu) << 1;
    if (slot && *slot && ((uintptr_t)*slot & 0x1ffu) == tag) {
        s->mask = (uint64_t)((uintptr_t)*slot >> 9);
        s->has_mask = 1;
        return 0;
    }
    pr_who w;
    if (who_of(h, call, &w) != 0) return -1;
    s->mask = pr_subject_mask(&pub->pol, &w.s);
    s->has_mask = 1;
    who_done(&w);
    if (slot) *slot = (void *)(tag | (uintptr_t)s->mask << 9);
    return 0;
}

static int pr_visible_op(void *instance, mcpg_call *call, const char *kind, const char *name) {
    pr_mod *m = instance;
    pr_kind k;
    int is_template = 0;
    if (!strcmp(kind, "tool")) k = PR_TOOL;
    else if (!strcmp(kind, "prompt")) k = PR_PROMPT;
    else if (!strcmp(kind, "resource")) k = PR_RESOURCE;
    else if (!strcmp(kind, "resource_template")) k = PR_RESOURCE, is_template = 1;
    else if (!strcmp(kind, "event")) k = PR_EVENT;
    else return 0; /* a kind this module does not know: not shown */
    const pr_published *pub = current(m);
    if (pub->pol.n > 64) { /* no mask covers them all: the whole caller */
        pr_who w;
        if (who_of(m->host, call, &w) != 0) return 0;
        int ok = pr_visible(&pub->pol, &w.s, k, name, strlen(name), is_template);
        who_done(&w);
        return ok;
    }
    pr_subject s = {0};
    if (mask_of(m, call, pub, &s) != 0) return 0;
    return pr_visible(&pub->pol, &s, k, name, strlen(name), is_template);
}

/* ---- lifecycle ---- */

static int other_of(const char *s) {
    if (s && !strcmp(s, "allow")) return OTHER_ALLOW;
    if (s && !strcmp(s, "deny")) return OTHER_DENY;
    return OTHER_ANY_RULE;
}

static int pr_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const pr_cfg *c = config;
    mcpg_config_problems p = {host, rep, NULL, 0};
    pr_policy pol;
    int errors = pr_policy_parse(&pol, c->rules, c->rules_file, &p);
    pr_policy_free(&pol);
    return errors ? MCPG_ECONFIG : 0;
}

static pr_published *compile(pr_mod *m) {
    pr_published *pub = calloc(1, sizeof *pub);
    if (!pub) return NULL;
    mcpg_config_problems p = {m->host, NULL, m->self, 0};
    if (pr_policy_parse(&pub->pol, m->cfg->rules, m->cfg->rules_file, &p) != 0) {
        pr_published_free(pub);
        return NULL;
    }
    return pub;
}

static int pr_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **out) {
    pr_mod *m = calloc(1, sizeof *m);
    if (!m) return MCPG_ENOMEM;
    m->host = host;
    m->self = self;
    m->cfg = config;
    m->other = other_of(m->cfg->other_methods);
    pr_published *pub = compile(m);
    if (!pub) {
        free(m);
        return MCPG_ECONFIG;
    }
    if (pr_publisher_init(&m->pub, host, pub) != 0) {
        pr_published_free(pub);
        free(m);
        return MCPG_ENOMEM;
    }
    host->log(self, MCPG_LOG_INFO, "%u rule(s)%s%s", pub->pol.n,
              m->cfg->rules_file ? " with " : "", m->cfg->rules_file ? m->cfg->rules_file : "");
    *out = m;
    return 0;
}

/* A reload kept this instance (same config): its rules file may have
 * changed. A file that no longer parses keeps the rules being served. */
static void pr_reloaded(void *instance) {
    pr_mod *m = instance;
    if (!m->cfg->rules_file) return;
    pr_published *pub = compile(m);
    if (!pub) {
        m->host->log(m->self, MCPG_LOG_ERROR, "%s: not reloaded (see above): the rules "
                     "before it still apply", m->cfg->rules_file);
        return;
    }
    uint32_t n = pub->pol.n;
    pr_publisher_swap(&m->pub, pub);
    m->host->log(m->self, MCPG_LOG_INFO, "%s reloaded: %u rule(s)", m->cfg->rules_file, n);
}

static void pr_destroy(void *instance) {
    pr_mod *m = instance;
    pr_publisher_fini(&m->pub);
    free(m);
}

static const mcpg_lifecycle_ops pr_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = pr_validate,
    .create = pr_create,
    .destroy = pr_destroy,
    .reloaded = pr_reloaded,
};

static const mcpg_policy_ops pr_ops = {
    MCPG_OPS_HEAD(mcpg_policy_ops),
    .check = pr_check,
    .visible = pr_visible_op,
};

MCPG_MODULE_DEFINE(MCPG_KIND_POLICY, "policy_rules", "1.0.0",
                   .description = "deny unless a rule allows: principals, tenants and roles "
                                  "to tools, prompts and resources, with argument guards",
                   .config = pr_fields, .config_size = sizeof(pr_cfg),
                   .lifecycle = &pr_lifecycle, .ops = &pr_ops);
