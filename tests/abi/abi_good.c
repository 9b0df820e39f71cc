/* The positive case: a small backend built exactly like a real module
 * (mcpg/sdk.h, MCPG_MODULE_DEFINE, mcpg_add_module). It serves one tool,
 * "fixture_ping", answering "pong". */
#include <mcpg/sdk.h>
#include <string.h>

static int good_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                       void **instance_out) {
    (void)self;
    (void)config;
    *instance_out = (void *)host;
    return 0;
}

static void good_destroy(void *instance) { (void)instance; }

static const mcpg_lifecycle_ops good_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .create = good_create,
    .destroy = good_destroy,
};

static int good_list_tools(void *instance, mcpg_buf *out) {
    const mcpg_host *host = instance;
    static const char list[] =
        "[{\"name\":\"fixture_ping\",\"description\":\"answers pong\","
        "\"inputSchema\":{\"type\":\"object\"}}]";
    return host->buf_append(out, list, sizeof list - 1);
}

static mcpg_status good_call_tool(void *instance, mcpg_call *call) {
    const mcpg_host *host = instance;
    static const char result[] = "{\"content\":[{\"type\":\"text\",\"text\":\"pong\"}]}";
    if (strcmp(host->call_target(call), "fixture_ping") != 0) {
        host->call_error(call, MCPG_RPC_INVALID_PARAMS, "unknown tool", NULL);
        return MCPG_DENY;
    }
    if (host->call_result(call, result, sizeof result - 1) != 0) {
        host->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
        return MCPG_DENY;
    }
    return MCPG_CONTINUE;
}

static const mcpg_backend_ops good_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = good_list_tools,
    .call_tool = good_call_tool,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "abi_good", "0.0.1",
                   .description = "ABI test fixture: a valid backend",
                   .flags = MCPG_MOD_INLINE_SAFE,
                   .lifecycle = &good_lifecycle,
                   .ops = &good_ops)
