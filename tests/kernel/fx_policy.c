/* A fixture policy for the kernel's identity and policy tests: refuses
 * principal "mallory" everything; shows items whose name holds "secret"
 * only to callers with the role "admin"; a tools/call for such a tool by
 * anyone else is refused too. It records the client's name it was shown, so
 * the test sees what policy sees. */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>

typedef struct pol {
    const mcpg_host *host;
} pol;

static int pol_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    (void)self;
    (void)cfg;
    pol *p = host->calloc(1, sizeof *p);
    if (!p) return MCPG_ENOMEM;
    p->host = host;
    *out = p;
    return 0;
}

static void pol_destroy(void *inst) {
    pol *p = inst;
    p->host->free(p);
}

static int may_see(const mcpg_host *h, mcpg_call *call, const char *name) {
    return !name || !strstr(name, "secret") || h->call_has_role(call, "admin");
}

static mcpg_status pol_check(void *inst, mcpg_call *call) {
    const mcpg_host *h = ((pol *)inst)->host;
    const char *who = h->call_principal(call);
    if (who && strcmp(who, "mallory") == 0) {
        h->call_error(call, MCPG_RPC_FORBIDDEN, "denied by policy", NULL);
        h->call_set_http(call, 403, 0);
        return MCPG_DENY;
    }
    const char *name = h->call_client_name(call);
    if (h->call_method(call) == MCPG_METHOD_TOOLS_CALL && !may_see(h, call, name)) {
        h->call_error(call, MCPG_RPC_FORBIDDEN, "denied by policy: no rule allows this tool",
                      NULL);
        h->call_set_http(call, 403, 0);
        return MCPG_DENY;
    }
    return MCPG_CONTINUE;
}

static int pol_visible(void *inst, mcpg_call *call, const char *kind, const char *name) {
    (void)kind;
    return may_see(((pol *)inst)->host, call, name);
}

static const mcpg_lifecycle_ops pol_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                 .create = pol_create,
                                                 .destroy = pol_destroy};
static const mcpg_policy_ops pol_ops = {MCPG_OPS_HEAD(mcpg_policy_ops), .check = pol_check,
                                        .visible = pol_visible};

MCPG_MODULE_DEFINE(MCPG_KIND_POLICY, "fx_policy", "1.0.0",
                   .description = "kernel test fixture: a policy with filtered lists",
                   .lifecycle = &pol_lifecycle, .ops = &pol_ops)
