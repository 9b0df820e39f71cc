/* backend_command: each configured tool runs a program per call.
 *
 * Arguments fill the tool's argv templates ({name} → the argument's value,
 * one argv element each, never through a shell), the arguments object can
 * go to the program's stdin as JSON, and the program runs in a process
 * group of its own so a timeout, an output cap or a cancel kills all of it.
 * Exit 0 answers stdout; another exit is a tool error result with stderr.
 */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>

#include "cmd_config.h"
#include "cmd_run.h"

typedef struct cmd_cfg {
    const char *tools; /* JSON text */
} cmd_cfg;

static const mcpg_config_field cmd_config[] = {
    MCPG_CFG_JSON_FIELD(cmd_cfg, tools, "tools", NULL,
                        "array of {name, description, command, args, input_schema, stdin, "
                        "timeout_ms, max_output_bytes, env, inherit_env}"),
    MCPG_CONFIG_END};

typedef struct cmd {
    const mcpg_host *host;
    mcpg_instance *self;
    cmd_tool_set set;
    mcpg_buf list; /* the tools/list array, built once */
} cmd;

static int cmd_list_tools(void *instance, mcpg_buf *out) {
    cmd *m = instance;
    return m->host->buf_append(out, m->list.data, m->list.len);
}

static mcpg_status cmd_call_tool(void *instance, mcpg_call *call) {
    cmd *m = instance;
    const mcpg_host *h = m->host;
    const char *name = h->call_target(call);
    const cmd_tool *t = cmd_tools_find(&m->set, name);
    if (!t)
        return mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS, "Unknown tool: %.64s",
                                  name ? name : "");
    cmd_run *r = cmd_run_prepare(h, m->self, t, call);
    if (!r) return MCPG_DENY;
    if (h->worker_current()) {
        cmd_run_start(r); /* may answer (resume) before we return PENDING: allowed */
        return MCPG_PENDING;
    }
    return cmd_run_post(r) == 0 ? MCPG_PENDING : MCPG_DENY;
}

static void cmd_cancel(void *instance, mcpg_call *call) {
    cmd *m = instance;
    void **slot = m->host->call_slot(call, m->self);
    if (slot && *slot) cmd_run_cancel(*slot);
}

static int cmd_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const cmd_cfg *c = config;
    cmd_tool_set set = {0};
    int errors = cmd_tools_parse(host, c->tools, rep, NULL, &set);
    cmd_tools_free(&set);
    return errors ? MCPG_ECONFIG : 0;
}

static int cmd_build_list(cmd *m) {
    const mcpg_host *h = m->host;
    mcpg_buf *b = &m->list;
    int rc = h->buf_append(b, "[", 1);
    for (size_t i = 0; i < m->set.n && !rc; i++) {
        const cmd_tool *t = &m->set.tools[i];
        rc = h->buf_printf(b, "%s{\"name\":\"%s\",\"description\":", i ? "," : "", t->name);
        const char *d = t->description ? t->description : "Runs a program";
        if (!rc) rc = h->buf_append_json_string(b, d, strlen(d));
        if (!rc) rc = h->buf_printf(b, ",\"inputSchema\":%s}", t->schema);
    }
    return rc ? rc : h->buf_append(b, "]", 1);
}

static void cmd_destroy(void *instance) {
    cmd *m = instance;
    cmd_tools_free(&m->set);
    m->host->buf_free(&m->list);
    m->host->free(m);
}

static int cmd_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                      void **instance_out) {
    const cmd_cfg *c = config;
    cmd *m = host->calloc(1, sizeof *m);
    if (!m) return MCPG_ENOMEM;
    m->host = host;
    m->self = self;
    if (cmd_tools_parse(host, c->tools, NULL, self, &m->set)) {
        cmd_destroy(m);
        return MCPG_ECONFIG;
    }
    int rc = cmd_build_list(m);
    if (rc) {
        cmd_destroy(m);
        return rc;
    }
    *instance_out = m;
    return 0;
}

static const mcpg_lifecycle_ops cmd_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = cmd_validate,
    .create = cmd_create,
    .destroy = cmd_destroy,
};

static const mcpg_backend_ops cmd_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = cmd_list_tools,
    .call_tool = cmd_call_tool,
    .cancel = cmd_cancel,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "backend_command", "1.0.0",
                   .description = "tools that run a program per call",
                   .flags = MCPG_MOD_INLINE_SAFE | MCPG_MOD_NEVER_BLOCKS,
                   .config = cmd_config, .config_size = sizeof(cmd_cfg),
                   .lifecycle = &cmd_lifecycle, .ops = &cmd_ops);
