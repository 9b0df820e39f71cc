/* The rules of a call that the kernel and the SDK's fake host both apply
 * (declared in handshake.h): which handle an instance's op is given, and
 * which backend op answers a method. One copy, so that a module tested on
 * the fake host meets the same rules in the gateway. */
#include "handshake.h"

#include <mcpg/kinds.h>

unsigned call_stage_of_kind(uint32_t kind) {
    switch (kind) {
    case MCPG_KIND_IDENTITY: return CALL_STAGE_IDENTITY;
    case MCPG_KIND_POLICY: return CALL_STAGE_POLICY;
    case MCPG_KIND_LIMITS: return CALL_STAGE_LIMITS;
    case MCPG_KIND_AUDIT: return CALL_STAGE_AUDIT;
    case MCPG_KIND_BACKEND: return CALL_STAGE_BACKEND;
    case MCPG_KIND_EVENTS: return CALL_STAGE_EVENTS;
    default: return CALL_STAGE_TRANSPORT;
    }
}

const char *call_stage_name(unsigned stage) {
    static const char *const names[CALL_STAGE_COUNT] = {
        "transport", "identity", "policy", "limits", "audit", "backend", "events"};
    return stage < CALL_STAGE_COUNT ? names[stage] : "unknown";
}

call_backend_op call_backend_op_for(const mcpg_backend_ops *ops, uint32_t method) {
    switch (method) {
    case MCPG_METHOD_TOOLS_CALL: return ops->call_tool; /* mandatory */
    case MCPG_METHOD_RESOURCES_READ: return MCPG_HAS(ops, read_resource) ? ops->read_resource : NULL;
    case MCPG_METHOD_PROMPTS_GET: return MCPG_HAS(ops, get_prompt) ? ops->get_prompt : NULL;
    case MCPG_METHOD_COMPLETION_COMPLETE: return MCPG_HAS(ops, complete) ? ops->complete : NULL;
    case MCPG_METHOD_TASKS_GET:
    case MCPG_METHOD_TASKS_RESULT:
    case MCPG_METHOD_TASKS_CANCEL:
    case MCPG_METHOD_TASKS_UPDATE: return MCPG_HAS(ops, task) ? ops->task : NULL;
    default: return NULL;
    }
}
