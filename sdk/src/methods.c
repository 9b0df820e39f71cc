/* The MCP methods the kernel routes, by mcpg_method: one table for the
 * kernel, the fake host and any transport. */
#include <mcpg/sdk.h>

#include <string.h>

static const char *const method_names[] = {
    [MCPG_METHOD_OTHER] = "",
    [MCPG_METHOD_TOOLS_LIST] = "tools/list",
    [MCPG_METHOD_TOOLS_CALL] = "tools/call",
    [MCPG_METHOD_RESOURCES_LIST] = "resources/list",
    [MCPG_METHOD_RESOURCES_TEMPLATES_LIST] = "resources/templates/list",
    [MCPG_METHOD_RESOURCES_READ] = "resources/read",
    [MCPG_METHOD_RESOURCES_SUBSCRIBE] = "resources/subscribe",
    [MCPG_METHOD_RESOURCES_UNSUBSCRIBE] = "resources/unsubscribe",
    [MCPG_METHOD_PROMPTS_LIST] = "prompts/list",
    [MCPG_METHOD_PROMPTS_GET] = "prompts/get",
    [MCPG_METHOD_COMPLETION_COMPLETE] = "completion/complete",
    [MCPG_METHOD_TASKS_GET] = "tasks/get",
    [MCPG_METHOD_TASKS_RESULT] = "tasks/result",
    [MCPG_METHOD_TASKS_LIST] = "tasks/list",
    [MCPG_METHOD_TASKS_CANCEL] = "tasks/cancel",
    [MCPG_METHOD_TASKS_UPDATE] = "tasks/update",
    [MCPG_METHOD_EVENTS_LIST] = "events/list",
    [MCPG_METHOD_EVENTS_POLL] = "events/poll",
    [MCPG_METHOD_EVENTS_STREAM] = "events/stream",
    [MCPG_METHOD_EVENTS_SUBSCRIBE] = "events/subscribe",
    [MCPG_METHOD_EVENTS_UNSUBSCRIBE] = "events/unsubscribe",
    /* MCPG_METHOD_EVENTS_WEBHOOK has a name for logs, never matched from a
     * client's text (mcpg_method_of) */
    [MCPG_METHOD_EVENTS_WEBHOOK] = "events/webhook",
};

#define N_METHODS (sizeof method_names / sizeof method_names[0])

const char *mcpg_method_name(uint32_t method) {
    return method < N_METHODS ? method_names[method] : "";
}

uint32_t mcpg_method_of(const char *m, size_t n) {
    if (!m) return MCPG_METHOD_OTHER;
    for (uint32_t i = 1; i < N_METHODS; i++) {
        if (i == MCPG_METHOD_EVENTS_WEBHOOK) continue;
        if (strlen(method_names[i]) == n && memcmp(method_names[i], m, n) == 0) return i;
    }
    return MCPG_METHOD_OTHER;
}
