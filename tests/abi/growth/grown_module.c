/* A backend built against the grown headers (grow_abi.py): its ABI minor is
 * one higher than this tree's and the slots the growth appended are set.
 * Today's kernel must refuse it, naming both versions; the growth check,
 * built against the same grown headers, accepts it and finds the new slots. */
#include <mcpg/sdk.h>

typedef struct grown_config {
    double step;
} grown_config;

static int grown_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                        void **instance_out) {
    (void)self;
    (void)config;
    *instance_out = (void *)host;
    return 0;
}

static void grown_destroy(void *instance) { (void)instance; }
static void grown_lifecycle_slot(void *instance) { (void)instance; }

static const mcpg_lifecycle_ops grown_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .create = grown_create,
    .destroy = grown_destroy,
    .grown_slot = grown_lifecycle_slot,
};

static int grown_list_tools(void *instance, mcpg_buf *out) {
    const mcpg_host *host = instance;
    return host->buf_append(out, "[]", 2);
}

static mcpg_status grown_call_tool(void *instance, mcpg_call *call) {
    const mcpg_host *host = instance;
    host->call_error(call, MCPG_RPC_INTERNAL_ERROR, "fixture", NULL);
    return MCPG_DENY;
}

static void grown_ops_slot(void *instance, mcpg_call *call) {
    (void)instance;
    (void)call;
}

static const mcpg_backend_ops grown_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = grown_list_tools,
    .call_tool = grown_call_tool,
    .grown_slot = grown_ops_slot,
};

static const mcpg_config_field grown_schema[] = {
    MCPG_CFG_DOUBLE_FIELD(grown_config, step, "step", "0.5", 0.125, 0.875, "a step"),
    MCPG_CONFIG_END};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "abi_grown_minor", "0.0.1",
                   .description = "ABI test fixture: built against grown headers",
                   .config = grown_schema, .config_size = sizeof(grown_config),
                   .lifecycle = &grown_lifecycle, .ops = &grown_ops,
                   .grown_field = "grown")
