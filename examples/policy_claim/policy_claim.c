/* policy_claim: which tools a caller may use, by one claim of its identity.
 *
 * The identity stage gives each call a claims object (identity_jwt: the
 * token's claims; examples/identity_header: {"role": <X-Role>}). This policy
 * reads one claim from it and allows a tool when its name starts with one of
 * the prefixes configured for that claim's value:
 *
 *   "config": { "claim": "role",
 *               "allow": { "reader": ["get_", "list_"], "admin": [""] } }
 *
 * "" allows every tool. A caller whose claim is missing, or has a value the
 * table does not name, may use no tool: deny unless allowed. Lists are
 * filtered the same way (the `visible` op), so a caller sees only what it may
 * call. Other methods (resources, prompts, pings) pass: this example judges
 * tools only.
 */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>

#define POLICY_DENIED (-32003) /* the policy stage's refusal code, with HTTP 403 */

typedef struct claim_config {
    const char *claim; /* the claim's name */
    const char *allow; /* JSON: {"value": ["prefix", ...], ...} */
} claim_config;

static const mcpg_config_field claim_fields[] = {
    MCPG_CFG_STRING_FIELD(claim_config, claim, "claim", "\"role\"",
                          "the claim of the caller's identity to judge by"),
    MCPG_CFG_JSON_FIELD(claim_config, allow, "allow", "{}",
                        "for each value of the claim, the tool name prefixes it may call"),
    MCPG_CONFIG_END};

typedef struct claim_policy {
    const mcpg_host *host;
    const claim_config *cfg; /* the allow table stays JSON text: scanned in place */
} claim_policy;

#define PREFIX_MAX 127 /* bytes: a prefix or claim value, as the checks decode it */

/* 1 when the value is an array of strings that each fit PREFIX_MAX bytes. */
static int prefix_list_ok(const mcpg_json_span *list) {
    mcpg_json_span prefix;
    char pre[PREFIX_MAX + 1];
    size_t it = 0, n;
    int r;
    if (list->type != MCPG_JSON_ARRAY) return 0;
    while ((r = mcpg_json_array_next(list->p, list->n, &it, &prefix)) == 1)
        if (mcpg_json_string_decode(&prefix, pre, sizeof pre, &n) != 0) return 0;
    return r == 0;
}

/* The schema says "allow" is JSON; what it must look like is checked here,
 * each problem named by its key ("allow.reader"). */
static int claim_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const claim_config *c = config;
    size_t n = strlen(c->allow), it = 0;
    mcpg_json_span key, list;
    int bad = 0, r;
    if (c->allow[0] != '{') {
        host->report_error(rep, "allow", "must be an object of arrays of prefixes");
        return MCPG_ECONFIG;
    }
    while ((r = mcpg_json_object_next(c->allow, n, &it, &key, &list)) == 1)
        if (!prefix_list_ok(&list)) {
            char path[PREFIX_MAX + 8];
            snprintf(path, sizeof path, "allow.%.*s", (int)key.n, key.p);
            host->report_error(rep, path, "must be an array of strings of at most %d bytes",
                               PREFIX_MAX);
            bad = 1;
        }
    return bad || r < 0 ? MCPG_ECONFIG : 0;
}

static int claim_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                        void **out) {
    claim_policy *p = host->calloc(1, sizeof *p);
    if (!p) return MCPG_ENOMEM;
    *p = (claim_policy){.host = host, .cfg = config};
    *out = p;
    return 0;
}

static void claim_destroy(void *instance) {
    claim_policy *p = instance;
    p->host->free(p);
}

/* The caller's claim value into dst: 1, or 0 (anonymous, no such claim, not
 * a string, too long). */
static int claim_value(claim_policy *p, mcpg_call *call, char *dst, size_t cap) {
    const mcpg_host *h = p->host;
    size_t n = 0, len;
    const char *claims = MCPG_HOST_HAS(h, call_claims) ? h->call_claims(call, &n) : NULL;
    mcpg_json_span v;
    if (!claims || mcpg_json_object_get(claims, n, p->cfg->claim, &v) != 1) return 0;
    return mcpg_json_string_decode(&v, dst, cap, &len) == 0;
}

/* 1 when a prefix listed for `value` starts `tool`. */
static int allowed(claim_policy *p, const char *value, const char *tool) {
    const char *allow = p->cfg->allow;
    mcpg_json_span list, prefix;
    size_t it = 0, plen;
    char pre[PREFIX_MAX + 1];
    if (mcpg_json_object_get(allow, strlen(allow), value, &list) != 1) return 0;
    while (mcpg_json_array_next(list.p, list.n, &it, &prefix) == 1)
        if (mcpg_json_string_decode(&prefix, pre, sizeof pre, &plen) == 0 &&
            strncmp(tool, pre, plen) == 0)
            return 1;
    return 0;
}

/* The tool's name as the client wrote it (with a binding's prefix). */
static const char *tool_name(const mcpg_host *h, mcpg_call *call) {
    const char *n =
        MCPG_HOST_HAS(h, call_client_name) ? h->call_client_name(call) : h->call_target(call);
    return n ? n : "";
}

/* Runs on the call's loop for every call that passed identity: no blocking,
 * and it only reads the instance, so it needs no lock. */
static mcpg_status claim_check(void *instance, mcpg_call *call) {
    claim_policy *p = instance;
    const mcpg_host *h = p->host;
    char value[PREFIX_MAX + 1];
    if (h->call_method(call) != MCPG_METHOD_TOOLS_CALL) return MCPG_CONTINUE;
    const char *tool = tool_name(h, call);
    if (!claim_value(p, call, value, sizeof value)) {
        h->call_set_http(call, 403, 0);
        return mcpg_result_errorf(h, call, POLICY_DENIED,
                                  "Forbidden: tool \"%s\" needs the "
                                  "claim \"%s\"",
                                  tool, p->cfg->claim);
    }
    if (allowed(p, value, tool)) return MCPG_CONTINUE;
    h->call_set_http(call, 403, 0);
    return mcpg_result_errorf(h, call, POLICY_DENIED,
                              "Forbidden: %s \"%s\" may not call "
                              "tool \"%s\"",
                              p->cfg->claim, value, tool);
}

/* tools/list shows a caller only the tools it may call. */
static int claim_visible(void *instance, mcpg_call *call, const char *kind, const char *name) {
    claim_policy *p = instance;
    char value[PREFIX_MAX + 1];
    if (strcmp(kind, "tool") != 0) return 1;
    return claim_value(p, call, value, sizeof value) && allowed(p, value, name);
}

static const mcpg_lifecycle_ops claim_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops), .validate = claim_validate, .create = claim_create,
    .destroy = claim_destroy};
static const mcpg_policy_ops claim_ops = {MCPG_OPS_HEAD(mcpg_policy_ops), .check = claim_check,
                                          .visible = claim_visible};
MCPG_MODULE_DEFINE(MCPG_KIND_POLICY, "policy_claim", "1.0.0",
                   .description = "allows tools by name prefix, per value of an identity claim",
                   .config = claim_fields, .config_size = sizeof(claim_config),
                   .lifecycle = &claim_lifecycle, .ops = &claim_ops);
