/* A fixture backend for the kernel's pipeline test: the tool "late" blocks
 * first (nap_ms, on the pool) and only then reads its request (arguments,
 * id and the x-test-user header), appending what it saw as one line to
 * `path`. It is the shape of a real blocking backend (connect, then build the
 * upstream request), and proves that a call answered by its pool timeout
 * while the backend still runs leaves the backend readable request data. */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct late_cfg {
    const char *path;
    int64_t nap_ms;
} late_cfg;

static const mcpg_config_field late_config[] = {
    MCPG_CFG_REQUIRED_STRING_FIELD(late_cfg, path, "path", "file to append what was read to"),
    MCPG_CFG_INT_FIELD(late_cfg, nap_ms, "nap_ms", "150", 0, 10000, "block this long first"),
    MCPG_CONFIG_END};

typedef struct late {
    const mcpg_host *host;
    const late_cfg *cfg;
} late;

static int late_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    (void)self;
    late *l = host->calloc(1, sizeof *l);
    if (!l) return MCPG_ENOMEM;
    l->host = host;
    l->cfg = cfg;
    *out = l;
    return 0;
}

static void late_destroy(void *inst) {
    late *l = inst;
    l->host->free(l);
}

static int late_list(void *inst, mcpg_buf *out) {
    late *l = inst;
    static const char tools[] = "[{\"name\":\"late\",\"inputSchema\":{\"type\":\"object\"}}]";
    return l->host->buf_append(out, tools, sizeof tools - 1);
}

static mcpg_status late_call(void *inst, mcpg_call *call) {
    late *l = inst;
    const mcpg_host *h = l->host;
    struct timespec ts = {l->cfg->nap_ms / 1000, (l->cfg->nap_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    size_t alen = 0, ilen = 0, ulen = 0;
    const char *args = h->call_args(call, &alen);
    const char *id = h->call_id(call, &ilen);
    const char *user = h->call_header(call, "x-test-user", &ulen);
    /* memcpy (which ASan checks) rather than printf straight from them */
    char a[256] = "", i[64] = "", u[64] = "(none)";
    if (args) memcpy(a, args, alen < sizeof a - 1 ? alen : sizeof a - 1);
    if (id) memcpy(i, id, ilen < sizeof i - 1 ? ilen : sizeof i - 1);
    if (user) {
        memset(u, 0, sizeof u);
        memcpy(u, user, ulen < sizeof u - 1 ? ulen : sizeof u - 1);
    }
    FILE *f = fopen(l->cfg->path, "a");
    if (f) {
        fprintf(f, "id=%s args=%s user=%s\n", i, a, u);
        fclose(f);
    }
    return h->call_result(call, "{\"content\":[]}", 14) ? MCPG_DENY : MCPG_CONTINUE;
}

static const mcpg_lifecycle_ops late_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                  .create = late_create,
                                                  .destroy = late_destroy};
static const mcpg_backend_ops late_ops = {MCPG_OPS_HEAD(mcpg_backend_ops),
                                          .list_tools = late_list, .call_tool = late_call};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "fx_late", "1.0.0",
                   .description = "pipeline test fixture: reads its request after blocking",
                   .config = late_config, .config_size = sizeof(late_cfg),
                   .lifecycle = &late_lifecycle, .ops = &late_ops)
