/* backend_http: each configured tool is one REST request per call.
 *
 * The call's arguments fill the tool's URL path, query and JSON body
 * templates (each escaped for its place); the request goes out with
 * upclient (HTTP/1.1, plain or TLS, libuv) on the call's loop over a
 * kept-alive connection, and the answer maps to
 * the result: 2xx is the body, another status a tool error, a timeout, an
 * oversized body or an unreachable upstream a JSON-RPC error.
 */
#include <mcpg/sdk.h>

#include <string.h>
#include <strings.h>
#include <upcred.h>

#include "http_config.h"
#include "http_exchange.h"
#include "http_request.h"

typedef struct http_cfg {
    const char *tools; /* JSON text */
    int tls_insecure;
    const char *ca_file, *cert_file, *key_file;
    int64_t max_conns;
    const char *credentials; /* JSON object text, or NULL: static */
} http_cfg;

static const mcpg_config_field http_config[] = {
    MCPG_CFG_JSON_FIELD(http_cfg, tools, "tools", NULL,
                        "array of {name, description, method, url, query, body, headers, "
                        "input_schema, timeout_ms, max_response_bytes, error_status}"),
    MCPG_CFG_BOOL_FIELD(http_cfg, tls_insecure, "tls_insecure", "false",
                        "https: do not verify the upstreams' certificates (tests only)"),
    MCPG_CFG_STRING_FIELD(http_cfg, ca_file, "ca_file", NULL,
                          "https: PEM bundle to verify upstreams against (default: the system's)"),
    MCPG_CFG_STRING_FIELD(http_cfg, cert_file, "cert_file", NULL,
                          "https: client certificate (PEM) for upstreams that ask for one"),
    MCPG_CFG_STRING_FIELD(http_cfg, key_file, "key_file", NULL,
                          "https: the client certificate's key (PEM)"),
    MCPG_CFG_INT_FIELD(http_cfg, max_conns, "max_conns", "64", 1, HTTP_MAX_CONNS_MAX,
                       "connections to each upstream, per loop; calls beyond wait (up to 1024)"),
    MCPG_CFG_JSON_FIELD(http_cfg, credentials, "credentials", NULL,
                        "{mode: static|passthrough|exchange|client_credentials, audience, scope, "
                        "resource, token_url, client_id, client_secret_env, ...}: the "
                        "Authorization each call carries (docs/upstream-credentials.md)"),
    MCPG_CONFIG_END};

typedef struct hb {
    const mcpg_host *host;
    mcpg_instance *self;
    http_tool_set set;
    http_upstreams *ups;
    upcred *cred;  /* NULL: static, the tools' headers only */
    mcpg_buf list; /* the tools/list array, built once */
} hb;

static int hb_list_tools(void *instance, mcpg_buf *out) {
    hb *m = instance;
    return m->host->buf_append(out, m->list.data, m->list.len);
}

static mcpg_status hb_call_tool(void *instance, mcpg_call *call) {
    hb *m = instance;
    const mcpg_host *h = m->host;
    const char *name = h->call_target(call);
    const http_tool *t = http_tools_find(&m->set, name);
    if (!t)
        return mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS, "Unknown tool: %.64s",
                                  name ? name : "");
    http_request rq;
    if (http_request_build(h, t, call, &rq)) return MCPG_DENY;
    http_exchange *x = http_exchange_new(h, m->self, m->ups, m->cred, t, call, &rq);
    if (!x) return MCPG_DENY;
    if (h->worker_current()) {
        http_exchange_start(x); /* may answer (resume) before we return PENDING: allowed */
        return MCPG_PENDING;
    }
    return http_exchange_post(x) == 0 ? MCPG_PENDING : MCPG_DENY;
}

static void hb_cancel(void *instance, mcpg_call *call) {
    hb *m = instance;
    void **slot = m->host->call_slot(call, m->self);
    if (slot && *slot) http_exchange_cancel(*slot);
}

/* With brokered credentials a tool's own Authorization header would be
 * sent beside (or instead of) the caller's: refused. */
static void check_no_authorization(mcpg_config_problems *p, const http_tool_set *set) {
    for (size_t i = 0; i < set->n; i++)
        for (size_t j = 0; j < set->tools[i].nheaders; j++)
            if (strcasecmp(set->tools[i].headers[j].key, "Authorization") == 0) {
                char path[64];
                snprintf(path, sizeof path, "tools[%zu].headers.%s", i,
                         set->tools[i].headers[j].key);
                mcpg_config_problem(p, path,
                                    "is set by credentials.mode; remove it or use mode static");
            }
}

static int check_credentials(mcpg_config_problems *p, const http_cfg *c, const http_tool_set *set) {
    int before = p->errors;
    upcred_mode mode = UPCRED_STATIC;
    if (upcred_check(p, c->credentials, &mode) == 0 && mode != UPCRED_STATIC)
        check_no_authorization(p, set);
    return p->errors - before;
}

static int hb_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const http_cfg *c = config;
    http_tool_set set = {0};
    int errors = http_tools_parse(host, c->tools, rep, NULL, &set);
    mcpg_config_problems p = {host, rep, NULL, 0};
    http_tls_check(&p, &(http_tls_cfg){c->tls_insecure, c->ca_file, c->cert_file, c->key_file});
    if (!errors) check_credentials(&p, c, &set);
    http_tools_free(&set);
    return errors || p.errors ? MCPG_ECONFIG : 0;
}

static int hb_build_list(hb *m) {
    const mcpg_host *h = m->host;
    mcpg_buf *b = &m->list;
    int rc = h->buf_append(b, "[", 1);
    for (size_t i = 0; i < m->set.n && !rc; i++) {
        const http_tool *t = &m->set.tools[i];
        rc = h->buf_printf(b, "%s{\"name\":\"%s\",\"description\":", i ? "," : "", t->name);
        const char *d = t->description ? t->description : "Calls a REST endpoint";
        if (!rc) rc = h->buf_append_json_string(b, d, strlen(d));
        if (!rc) rc = h->buf_printf(b, ",\"inputSchema\":%s}", t->schema);
    }
    return rc ? rc : h->buf_append(b, "]", 1);
}

static void hb_worker_stop(void *instance, mcpg_worker *w) {
    hb *m = instance;
    http_upstreams_worker_stop(m->ups, m->host->worker_uv_loop(w));
    upcred_loop_stop(m->cred, m->host->worker_uv_loop(w));
}

static void hb_destroy(void *instance) {
    hb *m = instance;
    http_upstreams_free(m->ups);
    upcred_free(m->cred);
    http_tools_free(&m->set);
    m->host->buf_free(&m->list);
    m->host->free(m);
}

static int hb_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **instance_out) {
    const http_cfg *c = config;
    hb *m = host->calloc(1, sizeof *m);
    if (!m) return MCPG_ENOMEM;
    m->host = host;
    m->self = self;
    /* create runs off the loops: the hosts are resolved here, once */
    mcpg_config_problems p = {host, NULL, self, 0};
    http_tls_cfg tls = {c->tls_insecure, c->ca_file, c->cert_file, c->key_file};
    if (http_tools_parse(host, c->tools, NULL, self, &m->set) ||
        !(m->ups = http_upstreams_new(&p, &m->set, &tls, (unsigned)c->max_conns))) {
        hb_destroy(m);
        return MCPG_ECONFIG;
    }
    m->cred = upcred_new(&p, host, self, c->credentials);
    if (p.errors) {
        hb_destroy(m);
        return MCPG_ECONFIG;
    }
    int rc = hb_build_list(m);
    if (rc) {
        hb_destroy(m);
        return rc;
    }
    *instance_out = m;
    return 0;
}

static const mcpg_lifecycle_ops hb_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = hb_validate,
    .create = hb_create,
    .destroy = hb_destroy,
    .worker_stop = hb_worker_stop,
};

static const mcpg_backend_ops hb_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = hb_list_tools,
    .call_tool = hb_call_tool,
    .cancel = hb_cancel,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "backend_http", "1.0.0",
                   .description = "tools that call a REST endpoint",
                   .flags = MCPG_MOD_INLINE_SAFE | MCPG_MOD_NEVER_BLOCKS,
                   .config = http_config, .config_size = sizeof(http_cfg),
                   .lifecycle = &hb_lifecycle, .ops = &hb_ops);
