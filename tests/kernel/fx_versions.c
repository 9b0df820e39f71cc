/* A fixture backend whose resources change on their own and never say so:
 * the shape of an upstream that must be polled (kernel/watch.c).
 * `count` resources ver://r/0 .. ver://r/<count-1>; resource i is at version
 * floor((wall ms + i * period_ms / count) / period_ms), so versions move
 * every period_ms, the resources' moves spread evenly over the period, and
 * every replica's copy of this fixture agrees on every version at every
 * instant (the test computes the same from the clock). The tool
 * fx_versions_reads answers how many reads this process served. */
#include <mcpg/sdk.h>

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct ver_cfg {
    int64_t count, period_ms;
} ver_cfg;

static const mcpg_config_field ver_config[] = {
    MCPG_CFG_INT_FIELD(ver_cfg, count, "count", "50", 1, 10000, "how many resources"),
    MCPG_CFG_INT_FIELD(ver_cfg, period_ms, "period_ms", "25000", 10, 86400000, "each one's version moves this often"),
    MCPG_CONFIG_END};

typedef struct ver {
    const mcpg_host *host;
    const ver_cfg *cfg;
    atomic_ullong reads;
} ver;

static int ver_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    (void)self;
    ver *v = host->calloc(1, sizeof *v);
    if (!v) return MCPG_ENOMEM;
    v->host = host;
    v->cfg = cfg;
    *out = v;
    return 0;
}

static void ver_destroy(void *inst) {
    ver *v = inst;
    v->host->free(v);
}

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t version_of(const ver *v, int64_t i) {
    int64_t p = v->cfg->period_ms;
    return (wall_ms() + i * p / v->cfg->count) / p;
}

static int ver_list_tools(void *inst, mcpg_buf *out) {
    ver *v = inst;
    static const char t[] = "[{\"name\":\"fx_versions_reads\",\"inputSchema\":{\"type\":\"object\"}}]";
    return v->host->buf_append(out, t, sizeof t - 1);
}

static mcpg_status ver_call_tool(void *inst, mcpg_call *call) {
    ver *v = inst;
    char json[128];
    snprintf(json, sizeof json, "{\"content\":[{\"type\":\"text\",\"text\":\"%llu\"}]}",
             (unsigned long long)atomic_load(&v->reads));
    return v->host->call_result(call, json, strlen(json)) ? MCPG_DENY : MCPG_CONTINUE;
}

static int ver_list_resources(void *inst, mcpg_buf *out) {
    ver *v = inst;
    int rc = v->host->buf_append(out, "[", 1);
    for (int64_t i = 0; i < v->cfg->count; i++)
        rc |= v->host->buf_printf(out, "%s{\"uri\":\"ver://r/%" PRId64 "\",\"name\":\"r%" PRId64 "\"}",
                                  i ? "," : "", i, i);
    rc |= v->host->buf_append(out, "]", 1);
    return rc ? MCPG_ENOMEM : 0;
}

static mcpg_status ver_read(void *inst, mcpg_call *call) {
    ver *v = inst;
    const char *uri = v->host->call_target(call);
    int64_t i = -1;
    if (strncmp(uri, "ver://r/", 8) || sscanf(uri + 8, "%" SCNd64, &i) != 1 || i < 0 || i >= v->cfg->count) {
        v->host->call_error(call, MCPG_RPC_INVALID_PARAMS, "no such resource", NULL);
        return MCPG_DENY;
    }
    atomic_fetch_add(&v->reads, 1);
    char json[256];
    snprintf(json, sizeof json,
             "{\"contents\":[{\"uri\":\"ver://r/%" PRId64 "\",\"mimeType\":\"text/plain\",\"text\":\"v%" PRId64 "\"}]}",
             i, version_of(v, i));
    return v->host->call_result(call, json, strlen(json)) ? MCPG_DENY : MCPG_CONTINUE;
}

static const mcpg_lifecycle_ops ver_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                 .create = ver_create, .destroy = ver_destroy};
static const mcpg_backend_ops ver_ops = {MCPG_OPS_HEAD(mcpg_backend_ops), .list_tools = ver_list_tools,
                                         .call_tool = ver_call_tool, .list_resources = ver_list_resources,
                                         .read_resource = ver_read};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "fx_versions", "1.0.0",
                   .description = "kernel test fixture: resources whose versions move on the clock, never told",
                   .config = ver_config, .config_size = sizeof(ver_cfg), .lifecycle = &ver_lifecycle,
                   .ops = &ver_ops)
