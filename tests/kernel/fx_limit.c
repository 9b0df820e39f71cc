/* A fixture limits module for the kernel's defect tests: admits every call
 * and writes release_us= to `path` when the kernel gives the call back. */
#include <mcpg/sdk.h>

#include <stdio.h>

typedef struct limit_cfg {
    const char *path;
} limit_cfg;

static const mcpg_config_field limit_config[] = {
    MCPG_CFG_REQUIRED_STRING_FIELD(limit_cfg, path, "path", "file for release_us="),
    MCPG_CONFIG_END};

typedef struct limit {
    const mcpg_host *host;
    const limit_cfg *cfg;
} limit;

static int limit_create(const mcpg_host *host, mcpg_instance *self, const void *cfg,
                        void **out) {
    (void)self;
    limit *l = host->calloc(1, sizeof *l);
    if (!l) return MCPG_ENOMEM;
    l->host = host;
    l->cfg = cfg;
    *out = l;
    return 0;
}

static void limit_destroy(void *inst) {
    limit *l = inst;
    l->host->free(l);
}

static mcpg_status limit_acquire(void *inst, mcpg_call *call) {
    (void)inst;
    (void)call;
    return MCPG_CONTINUE;
}

static void limit_release(void *inst, mcpg_call *call) {
    limit *l = inst;
    (void)call;
    FILE *f = fopen(l->cfg->path, "a");
    if (!f) return;
    fprintf(f, "release_us=%llu\n", (unsigned long long)l->host->mono_us());
    fclose(f);
}

static const mcpg_lifecycle_ops limit_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                   .create = limit_create,
                                                   .destroy = limit_destroy};
static const mcpg_limits_ops limit_ops = {MCPG_OPS_HEAD(mcpg_limits_ops),
                                          .acquire = limit_acquire, .release = limit_release};

MCPG_MODULE_DEFINE(MCPG_KIND_LIMITS, "fx_limit", "1.0.0",
                   .description = "kernel test fixture: a limit that records its releases",
                   .config = limit_config, .config_size = sizeof(limit_cfg),
                   .lifecycle = &limit_lifecycle, .ops = &limit_ops)
