/* backend_everything: the MCP conformance suite's server fixtures, and the
 * SDK's showcase of every backend feature (see README.md). Each op hands
 * the call to the file of its concern (everything.h). Every op answers on
 * the thread it runs on without blocking, so the module is inline-safe;
 * the tools that wait for the client answer PENDING and resume from the
 * reply, on the call's loop. */
#include "everything.h"

#include <stdlib.h>
#include <string.h>

static const mcpg_config_field ev_config[] = {
    MCPG_CFG_INT_FIELD(ev_cfg, request_timeout_ms, "request_timeout_ms", "60000", 100,
                       3600000, "how long sampling/elicitation wait for the client (ms)"),
    MCPG_CONFIG_END};

static int ev_op_list_tools(void *instance, mcpg_buf *out) {
    ev *e = instance;
    return e->host->buf_append(out, e->tools.data, e->tools.len);
}

static mcpg_status ev_op_call_tool(void *instance, mcpg_call *call) {
    return ev_call_tool(instance, call);
}

static int ev_op_list_resources(void *instance, mcpg_buf *out) {
    return ev_list_resources(instance, out);
}

static int ev_op_list_templates(void *instance, mcpg_buf *out) {
    return ev_list_templates(instance, out);
}

static mcpg_status ev_op_read_resource(void *instance, mcpg_call *call) {
    return ev_read_resource(instance, call);
}

static int ev_op_list_prompts(void *instance, mcpg_buf *out) {
    return ev_list_prompts(instance, out);
}

static mcpg_status ev_op_get_prompt(void *instance, mcpg_call *call) {
    return ev_get_prompt(instance, call);
}

static mcpg_status ev_op_complete(void *instance, mcpg_call *call) {
    return ev_complete(instance, call);
}

static void ev_op_cancel(void *instance, mcpg_call *call) { ev_waiting_cancel(instance, call); }

/* Subscribers are the kernel's to count; the watched resource reports its
 * changes whether or not anyone listens. */
static void ev_op_subscribe(void *instance, const char *uri, int on) {
    ev *e = instance;
    e->host->log(e->self, MCPG_LOG_DEBUG, "%s %s", on ? "subscribed to" : "unsubscribed from",
                 uri);
}

/* The key that signs requestState: per instance, so a state made by one
 * gateway run is not taken by the next. */
static void ev_key(ev *e) {
    uint64_t t = e->host->mono_us() ^ (uint64_t)e->host->wall_us();
    e->key[0] = t ^ (uint64_t)(uintptr_t)e;
    e->key[1] = (t << 17 | t >> 47) ^ 0x9e3779b97f4a7c15ull;
}

static void ev_destroy(void *instance) {
    ev *e = instance;
    e->host->buf_free(&e->tools);
    ev_tasks_destroy(e);
    free(e);
}

static int ev_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **instance_out) {
    ev *e = calloc(1, sizeof *e);
    if (!e) return MCPG_ENOMEM;
    e->host = host;
    e->self = self;
    e->cfg = config;
    ev_key(e);
    int rc = ev_tasks_create(e);
    if (!rc) rc = ev_tools_build(e);
    if (rc) {
        ev_destroy(e);
        return rc;
    }
    *instance_out = e;
    return 0;
}

static const mcpg_lifecycle_ops ev_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .create = ev_create,
    .destroy = ev_destroy,
};

/* The kernel routes tasks/... here by the id's "<instance>." head. */
static mcpg_status ev_op_task(void *instance, mcpg_call *call) {
    ev *e = instance;
    switch (e->host->call_method(call)) {
    case MCPG_METHOD_TASKS_GET: return ev_task_request(e, call, EV_TASKS_GET);
    case MCPG_METHOD_TASKS_UPDATE: return ev_task_request(e, call, EV_TASKS_UPDATE);
    case MCPG_METHOD_TASKS_CANCEL: return ev_task_request(e, call, EV_TASKS_CANCEL);
    default: return ev_task_request(e, call, EV_TASKS_RESULT);
    }
}

static int ev_op_list_tasks(void *instance, mcpg_call *call, mcpg_buf *out) {
    return ev_tasks_append(instance, call, out);
}

static const mcpg_backend_ops ev_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = ev_op_list_tools,
    .call_tool = ev_op_call_tool,
    .list_resources = ev_op_list_resources,
    .list_resource_templates = ev_op_list_templates,
    .read_resource = ev_op_read_resource,
    .list_prompts = ev_op_list_prompts,
    .get_prompt = ev_op_get_prompt,
    .complete = ev_op_complete,
    .cancel = ev_op_cancel,
    .subscribe = ev_op_subscribe,
    .task = ev_op_task,
    .list_tasks = ev_op_list_tasks,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "backend_everything", "1.0.0",
                   .description = "the MCP conformance suite's fixtures: every backend feature",
                   .flags = MCPG_MOD_INLINE_SAFE | MCPG_MOD_NEVER_BLOCKS,
                   .config = ev_config, .config_size = sizeof(ev_cfg),
                   .lifecycle = &ev_lifecycle, .ops = &ev_ops);
