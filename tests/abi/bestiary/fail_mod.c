/* A backend whose create (FIXTURE_FAIL_IN_START undefined) or start
 * (defined) fails when its config says "fail": true, so one module serves in
 * a good manifest and breaks a bad one. Tool FIXTURE_TOOL answers "ok". */
#include "beast.h"

#include <stdbool.h>

#ifndef FIXTURE_NAME
#error "FIXTURE_NAME must be defined"
#endif
#ifndef FIXTURE_TOOL
#error "FIXTURE_TOOL must be defined"
#endif

typedef struct fail_cfg {
    int fail;
} fail_cfg;

static const mcpg_config_field fail_config[] = {
    MCPG_CFG_BOOL_FIELD(fail_cfg, fail, "fail", "false", "refuse to come up"),
    MCPG_CONFIG_END};

typedef struct fail_state {
    const mcpg_host *host;
    mcpg_instance *self;
    const fail_cfg *cfg;
} fail_state;

static int fail_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                       void **instance_out) {
    const fail_cfg *cfg = config;
#ifndef FIXTURE_FAIL_IN_START
    if (cfg->fail) return MCPG_EUNAVAIL;
#endif
    fail_state *s = host->calloc(1, sizeof *s);
    if (!s) return MCPG_ENOMEM;
    s->host = host;
    s->self = self;
    s->cfg = cfg;
    *instance_out = s;
    return 0;
}

static void fail_destroy(void *instance) {
    fail_state *s = instance;
    s->host->free(s);
}

static int fail_start(void *instance) {
    fail_state *s = instance;
#ifdef FIXTURE_FAIL_IN_START
    if (s->cfg->fail) return MCPG_EUNAVAIL;
#else
    (void)s;
#endif
    return 0;
}

static const mcpg_lifecycle_ops fail_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .create = fail_create,
    .start = fail_start,
    .destroy = fail_destroy,
};

static int fail_list_tools(void *instance, mcpg_buf *out) {
    fail_state *s = instance;
    return beast_list_one(s->host, out, FIXTURE_TOOL);
}

static mcpg_status fail_call_tool(void *instance, mcpg_call *call) {
    fail_state *s = instance;
    return beast_answer(s->host, call, FIXTURE_TOOL, "ok");
}

static const mcpg_backend_ops fail_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = fail_list_tools,
    .call_tool = fail_call_tool,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, FIXTURE_NAME, "0.0.1",
                   .description = "ABI test fixture: create or start fails on request",
                   .flags = MCPG_MOD_INLINE_SAFE,
                   .config = fail_config, .config_size = sizeof(fail_cfg),
                   .lifecycle = &fail_lifecycle,
                   .ops = &fail_ops)
