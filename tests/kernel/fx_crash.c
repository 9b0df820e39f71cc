/* A fixture backend whose one tool, fx_crash_now, dereferences NULL: the
 * gateway must die by SIGSEGV with a line naming this module and where in
 * it the fault is (kernel/crash.c). */
#include <mcpg/sdk.h>

#include <string.h>

static int crash_list_tools(void *inst, mcpg_buf *out) {
    static const char t[] = "[{\"name\":\"fx_crash_now\",\"inputSchema\":{\"type\":\"object\"}}]";
    (void)inst;
    return mcpg_buf_append(out, t, sizeof t - 1);
}

/* noinline: the fault is in a function of its own name, for addr2line.
 * Not instrumented: in the sanitizer build UBSan would report the load and
 * exit before the fault, and the gateway's handler is what is tested. */
__attribute__((noinline, no_sanitize("address", "undefined"))) static int fx_crash_fault(void) {
    volatile int *nowhere = NULL;
    return *nowhere;
}

static mcpg_status crash_call_tool(void *inst, mcpg_call *call) {
    (void)inst;
    (void)call;
    return fx_crash_fault() ? MCPG_DENY : MCPG_CONTINUE;
}

static int crash_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    (void)host;
    (void)self;
    (void)cfg;
    static int state;
    *out = &state;
    return 0;
}

static void crash_destroy(void *inst) { (void)inst; }

static const mcpg_lifecycle_ops crash_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                   .create = crash_create,
                                                   .destroy = crash_destroy};
static const mcpg_backend_ops crash_ops = {MCPG_OPS_HEAD(mcpg_backend_ops),
                                           .list_tools = crash_list_tools,
                                           .call_tool = crash_call_tool};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "fx_crash", "1.0.0",
                   .description = "kernel test fixture: a tool that dereferences NULL",
                   .lifecycle = &crash_lifecycle, .ops = &crash_ops)
