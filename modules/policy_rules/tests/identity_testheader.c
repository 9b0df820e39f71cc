/* TEST ONLY: an identity module that believes whatever the request says.
 *
 * X-Test-Principal names the caller (absent: pass, so the call is
 * anonymous), X-Test-Tenant its tenant and X-Test-Roles its roles (a comma
 * list). It proves nothing about anyone: it exists so test_policy.py can
 * play several principals. It is built into build/test-modules, never into
 * build/modules, so no shipped manifest can load it. */
#include <mcpg/sdk.h>

#include <stdlib.h>
#include <string.h>

#define TH_MAX 256
#define TH_MAX_ROLES 16

typedef struct th {
    const mcpg_host *host;
} th;

static int th_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    (void)self;
    (void)cfg;
    th *t = calloc(1, sizeof *t);
    if (!t) return MCPG_ENOMEM;
    t->host = host;
    host->log(self, MCPG_LOG_WARN, "identity_testheader trusts X-Test-Principal: tests only");
    *out = t;
    return 0;
}

static void th_destroy(void *inst) { free(inst); }

/* A header's value, NUL-terminated in buf; 0 when absent or too long. */
static int header(const mcpg_host *h, mcpg_call *call, const char *name, char *buf) {
    size_t n = 0;
    const char *v = h->call_header(call, name, &n);
    if (!v || n >= TH_MAX) return 0;
    memcpy(buf, v, n);
    buf[n] = '\0';
    return 1;
}

static mcpg_status th_authenticate(void *inst, mcpg_call *call) {
    const mcpg_host *h = ((th *)inst)->host;
    char principal[TH_MAX], tenant[TH_MAX], roles[TH_MAX];
    if (!header(h, call, "x-test-principal", principal)) return MCPG_CONTINUE;
    int has_tenant = header(h, call, "x-test-tenant", tenant);
    int has_roles = header(h, call, "x-test-roles", roles);
    if (!MCPG_HOST_HAS(h, call_identify)) {
        h->call_set_identity(call, principal, has_tenant ? tenant : NULL, has_roles ? roles : NULL);
        return MCPG_CONTINUE;
    }
    const char *list[TH_MAX_ROLES];
    uint32_t n = 0;
    char *save = NULL;
    for (char *r = has_roles ? strtok_r(roles, ",", &save) : NULL; r && n < TH_MAX_ROLES;
         r = strtok_r(NULL, ",", &save))
        list[n++] = r;
    mcpg_identity id = {.size = sizeof id, .n_roles = n, .principal = principal,
                        .tenant = has_tenant ? tenant : NULL, .roles = list, .method = "test-header"};
    h->call_identify(call, &id);
    return MCPG_CONTINUE;
}

static const mcpg_lifecycle_ops th_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                .create = th_create, .destroy = th_destroy};
static const mcpg_identity_ops th_ops = {MCPG_OPS_HEAD(mcpg_identity_ops),
                                         .authenticate = th_authenticate};

MCPG_MODULE_DEFINE(MCPG_KIND_IDENTITY, "identity_testheader", "1.0.0",
                   .description = "TEST ONLY: identity from X-Test-Principal/-Tenant/-Roles",
                   .lifecycle = &th_lifecycle, .ops = &th_ops)
