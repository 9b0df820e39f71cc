/* backend_ffi: any C function in any shared library as a tool.
 *
 * The config declares each function (library, symbol, parameters, return
 * type); validate() and create() open the libraries and resolve the symbols,
 * so a missing one is a config error at `mcpg --check`. create() prepares a
 * libffi call interface per function and the tools list once; a call only
 * reads them, so calls run on the pool or, with inline_dispatch, on the loop
 * (the call is synchronous and never touches the loop).
 */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>

#include "ffi_call.h"
#include "ffi_decl.h"

typedef struct ffi_cfg {
    const char *functions; /* JSON text */
} ffi_cfg;

static const mcpg_config_field ffi_config[] = {
    MCPG_CFG_JSON_FIELD(ffi_cfg, functions, "functions", "[]",
                        "array of {name, library, symbol, description, params: [{name, type, "
                        "description, ...}], returns}; types: int8..int64, uint8..uint64, float, "
                        "double, bool, string (returns also void); params also buffer {size, "
                        "encoding} and array {of, max_length, inout | length}; an integer "
                        "param with size_of or length_of is filled by the module; a NaN or infinite "
                        "result is a tool error (isError) whose text says so"),
    MCPG_CONFIG_END};

typedef struct ffi_backend {
    const mcpg_host *host;
    mcpg_instance *self;
    ffi_fn_set set;
    mcpg_buf list; /* the tools/list array, built once */
} ffi_backend;

static int ffi_list_tools(void *instance, mcpg_buf *out) {
    ffi_backend *m = instance;
    return m->host->buf_append(out, m->list.data, m->list.len);
}

static mcpg_status ffi_call_tool(void *instance, mcpg_call *call) {
    ffi_backend *m = instance;
    const char *name = m->host->call_target(call);
    const ffi_fn *f = ffi_decl_find(&m->set, name);
    if (!f)
        return mcpg_result_errorf(m->host, call, MCPG_RPC_INVALID_PARAMS, "Unknown tool: %.64s",
                                  name ? name : "");
    return ffi_call_run(m->host, f, call);
}

static int ffi_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const ffi_cfg *c = config;
    ffi_fn_set set = {0};
    int errors = ffi_decl_parse(host, c->functions, rep, NULL, &set);
    ffi_decl_free(host, &set);
    return errors ? MCPG_ECONFIG : 0;
}

static int build_list(ffi_backend *m) {
    const mcpg_host *h = m->host;
    mcpg_buf *b = &m->list;
    int rc = h->buf_append(b, "[", 1);
    for (size_t i = 0; i < m->set.n && !rc; i++) {
        const ffi_fn *f = &m->set.fns[i];
        rc = h->buf_printf(b, "%s{\"name\":\"%s\",\"description\":", i ? "," : "", f->name);
        if (!rc && f->description)
            rc = h->buf_append_json_string(b, f->description, strlen(f->description));
        else if (!rc)
            rc = h->buf_printf(b, "\"%s from %s\"", f->symbol, f->library);
        if (!rc) rc = h->buf_append(b, ",\"inputSchema\":", 15);
        if (!rc) rc = ffi_schema_append(h, b, f);
        if (!rc) rc = h->buf_append(b, "}", 1);
    }
    return rc ? rc : h->buf_append(b, "]", 1);
}

static void ffi_destroy(void *instance) {
    ffi_backend *m = instance;
    ffi_decl_free(m->host, &m->set);
    m->host->buf_free(&m->list);
    m->host->free(m);
}

static int ffi_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                      void **instance_out) {
    ffi_backend *m = host->calloc(1, sizeof *m);
    if (!m) return MCPG_ENOMEM;
    m->host = host;
    m->self = self;
    const ffi_cfg *c = config;
    if (ffi_decl_parse(host, c->functions, NULL, self, &m->set)) {
        ffi_destroy(m);
        return MCPG_ECONFIG;
    }
    int rc = build_list(m);
    if (rc) {
        ffi_destroy(m);
        return rc;
    }
    *instance_out = m;
    return 0;
}

static const mcpg_lifecycle_ops ffi_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = ffi_validate,
    .create = ffi_create,
    .destroy = ffi_destroy,
};

static const mcpg_backend_ops ffi_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = ffi_list_tools,
    .call_tool = ffi_call_tool,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "backend_ffi", "1.0.0",
                   .description = "C functions from shared libraries as tools, through libffi",
                   .flags = MCPG_MOD_INLINE_SAFE,
                   .config = ffi_config, .config_size = sizeof(ffi_cfg),
                   .lifecycle = &ffi_lifecycle, .ops = &ffi_ops);
