/* A fixture backend whose lists change while it serves
 * (MCPG_MOD_DYNAMIC_LISTS), the shape of an upstream MCP server:
 *   dyn_flip  moves to the next list and tells the kernel (lists_changed);
 *   dyn_slow  sleeps slow_ms on the pool, then answers with its own name as
 *             the kernel routed it (call_target), proving a call routed by
 *             the old lists keeps a valid route while they are replaced.
 * The second list adds dyn_two, drops dyn_one, and offers three tools the
 * kernel must leave out without failing: one whose name is not a valid tool
 * name, "echo", which a static backend already offers, and dyn_bad_header,
 * whose x-mcp-header annotation is not on a property.
 * For reloads, start() may also
 *   flip_at_start  move to the second list and tell the kernel, as an
 *                  upstream does once connected, before the generation that
 *                  holds it serves;
 *   gate_fifo      say "waiting at the gate" in the log, then wait (at most
 *                  gate_ms) for a byte on that FIFO: a reload held between
 *                  building its lists and publishing them. */
#include <mcpg/sdk.h>

#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct dyn_cfg {
    int64_t slow_ms;
    int flip_at_start;
    const char *gate_fifo;
    int64_t gate_ms;
} dyn_cfg;

static const mcpg_config_field dyn_config[] = {
    MCPG_CFG_INT_FIELD(dyn_cfg, slow_ms, "slow_ms", "400", 0, 10000, "how long dyn_slow takes"),
    MCPG_CFG_BOOL_FIELD(dyn_cfg, flip_at_start, "flip_at_start", "false",
                        "start() moves to the second list and tells the kernel"),
    MCPG_CFG_STRING_FIELD(dyn_cfg, gate_fifo, "gate_fifo", NULL,
                          "start() waits for a byte on this FIFO"),
    MCPG_CFG_INT_FIELD(dyn_cfg, gate_ms, "gate_ms", "20000", 0, 60000,
                       "how long start() waits at the gate at most"),
    MCPG_CONFIG_END};

typedef struct dyn {
    const mcpg_host *host;
    mcpg_instance *self;
    const dyn_cfg *cfg;
    atomic_int version; /* which list: 0 or 1 */
} dyn;

static int dyn_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    dyn *d = host->calloc(1, sizeof *d);
    if (!d) return MCPG_ENOMEM;
    d->host = host;
    d->self = self;
    d->cfg = cfg;
    *out = d;
    return 0;
}

/* Opened for reading and writing, the FIFO never reports a hang-up while
 * the test has yet to open it: poll waits for the byte or the deadline. */
static int wait_at_gate(dyn *d) {
    int fd = open(d->cfg->gate_fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return MCPG_EIO;
    d->host->log(d->self, MCPG_LOG_INFO, "waiting at the gate %s", d->cfg->gate_fifo);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ready = poll(&p, 1, (int)d->cfg->gate_ms);
    char byte;
    int rc = ready == 1 && read(fd, &byte, 1) == 1 ? 0 : MCPG_ETIMEDOUT;
    close(fd);
    d->host->log(d->self, MCPG_LOG_INFO, "through the gate: %s", rc ? "timed out" : "opened");
    return rc;
}

static int dyn_start(void *inst) {
    dyn *d = inst;
    if (d->cfg->flip_at_start) {
        atomic_store(&d->version, 1);
        d->host->lists_changed(d->self, MCPG_LIST_TOOLS);
    }
    return d->cfg->gate_fifo ? wait_at_gate(d) : 0;
}

static void dyn_destroy(void *inst) {
    dyn *d = inst;
    d->host->free(d);
}

#define TOOL(n) "{\"name\":\"" n "\",\"inputSchema\":{\"type\":\"object\"}}"

/* Any thread (the kernel's control loop rebuilds from here). */
static int dyn_list(void *inst, mcpg_buf *out) {
    dyn *d = inst;
    static const char first[] = "[" TOOL("dyn_flip") "," TOOL("dyn_slow") "," TOOL("dyn_one") "]";
    static const char second[] = "[" TOOL("dyn_flip") "," TOOL("dyn_slow") "," TOOL("dyn_two") ","
        TOOL("not valid!") "," TOOL("echo") ","
        "{\"name\":\"dyn_bad_header\",\"inputSchema\":{\"type\":\"object\",\"x-mcp-header\":\"R\"}}]";
    return atomic_load(&d->version) ? d->host->buf_append(out, second, sizeof second - 1)
                                    : d->host->buf_append(out, first, sizeof first - 1);
}

static mcpg_status answer(dyn *d, mcpg_call *call, const char *text) {
    char json[256];
    snprintf(json, sizeof json, "{\"content\":[{\"type\":\"text\",\"text\":\"%s\"}]}", text);
    return d->host->call_result(call, json, strlen(json)) ? MCPG_DENY : MCPG_CONTINUE;
}

static mcpg_status dyn_call(void *inst, mcpg_call *call) {
    dyn *d = inst;
    const char *name = d->host->call_target(call);
    if (strcmp(name, "dyn_flip") == 0) {
        atomic_store(&d->version, !atomic_load(&d->version));
        d->host->lists_changed(d->self, MCPG_LIST_TOOLS);
        return answer(d, call, "flipped");
    }
    if (strcmp(name, "dyn_slow") == 0) {
        struct timespec ts = {d->cfg->slow_ms / 1000, (d->cfg->slow_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        /* read the routed name again, after the lists may have changed */
        return answer(d, call, d->host->call_target(call));
    }
    return answer(d, call, name);
}

static const mcpg_lifecycle_ops dyn_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                 .create = dyn_create, .start = dyn_start,
                                                 .destroy = dyn_destroy};
static const mcpg_backend_ops dyn_ops = {MCPG_OPS_HEAD(mcpg_backend_ops), .list_tools = dyn_list,
                                         .call_tool = dyn_call};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "fx_dyn", "1.0.0",
                   .description = "kernel test fixture: a backend whose tool list changes",
                   .flags = MCPG_MOD_DYNAMIC_LISTS, .config = dyn_config,
                   .config_size = sizeof(dyn_cfg), .lifecycle = &dyn_lifecycle, .ops = &dyn_ops)
