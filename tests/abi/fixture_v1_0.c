/* A backend module as it was built against ABI 1.0, forever: each table is
 * its own frozen copy of the 1.0 layout, ending at its last mandatory 1.0
 * slot (the lifecycle at destroy, the backend ops at call_tool, the
 * descriptor at ops, each config entry at dmax). Later minors append slots to
 * the live structs; this file must keep loading and serving without change.
 *
 * It serves one tool, "v1_ping", answering "limit=<limit> ratio=<ratio>"
 * from its config, so a test can see the schema read at its 1.0 stride.
 *
 * What follows each table in memory is the table's "tail": where a kernel
 * that read past the table's size would find its next slot. With
 * FIXTURE_TRIPWIRE_LIFECYCLE / FIXTURE_TRIPWIRE_OPS the tail holds a function
 * that aborts the process if called; otherwise it is NULL.
 *
 * With FIXTURE_METRICS it is a metrics module instead (abi_metrics_v1_0):
 * its ops table ends at render, the one 1.0 slot, so the kernel serving
 * GET /metrics must not reach for 1.4's content_type; it renders one
 * counter of its own text.
 *
 * Built straight against the ABI headers, like fixture.c. */
#include <mcpg/abi.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- the 1.0 layouts ---------------------------------------------------- */

typedef struct lifecycle_1_0 {
    uint32_t size, version;
    int (*validate)(const mcpg_host *host, const void *config, mcpg_report *rep);
    int (*create)(const mcpg_host *host, mcpg_instance *self, const void *config,
                  void **instance_out);
    int (*start)(void *instance);
    void (*stop)(void *instance);
    void (*destroy)(void *instance);
} lifecycle_1_0;

typedef struct backend_ops_1_0 {
    uint32_t size, version;
    int (*list_tools)(void *instance, mcpg_buf *out);
    mcpg_status (*call_tool)(void *instance, mcpg_call *call);
} backend_ops_1_0;

typedef struct metrics_ops_1_0 {
    uint32_t size, version;
    int (*render)(void *instance, mcpg_buf *out);
} metrics_ops_1_0;

typedef struct config_field_1_0 {
    const char *key;
    uint32_t type, flags;
    size_t offset;
    const char *default_json;
    int64_t min, max;
    const char *enum_values;
    const char *help;
    uint32_t size, reserved;
    double dmin, dmax;
} config_field_1_0;

typedef struct module_1_0 {
    uint32_t magic;
    uint16_t abi_major, abi_minor;
    uint32_t size;
    uint32_t kind;
    const char *name, *version, *build_id, *description;
    uint64_t flags;
    const config_field_1_0 *config;
    uint32_t config_size, reserved0;
    const lifecycle_1_0 *lifecycle;
    const void *ops;
} module_1_0;

/* Where each frozen table ends is the ABI's 1.0 size for it. */
#define END_OF(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))
_Static_assert(END_OF(module_1_0, ops) == MCPG_MODULE_SIZE_1_0, "descriptor 1.0");
_Static_assert(END_OF(lifecycle_1_0, destroy) == MCPG_LIFECYCLE_OPS_SIZE_1_0, "lifecycle 1.0");
_Static_assert(END_OF(backend_ops_1_0, call_tool) == MCPG_BACKEND_OPS_SIZE_1_0, "backend 1.0");
_Static_assert(END_OF(metrics_ops_1_0, render) == MCPG_METRICS_OPS_SIZE_1_0, "metrics 1.0");
_Static_assert(END_OF(config_field_1_0, dmax) == MCPG_CONFIG_FIELD_SIZE_1_0, "config field 1.0");

/* ---- tails -------------------------------------------------------------- */

typedef void (*any_fn)(void);

static void tripwire(void) {
    static const char msg[] = "abi_v1_0: the kernel called a slot past the end of a 1.0 table\n";
    if (write(2, msg, sizeof msg - 1) < 0) abort();
    abort();
}

#define TAIL_OFF {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL}
#define TAIL_ON {tripwire, tripwire, tripwire, tripwire, tripwire, tripwire, tripwire, tripwire}
#ifdef FIXTURE_TRIPWIRE_LIFECYCLE
#define LIFECYCLE_TAIL TAIL_ON
#else
#define LIFECYCLE_TAIL TAIL_OFF
#endif
#ifdef FIXTURE_TRIPWIRE_OPS
#define OPS_TAIL TAIL_ON
#else
#define OPS_TAIL TAIL_OFF
#endif

/* ---- the module --------------------------------------------------------- */

typedef struct v1_config {
    int64_t limit;
    double ratio;
} v1_config;

typedef struct v1_state {
    const mcpg_host *host;
    const v1_config *config;
} v1_state;

static int v1_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **instance_out) {
    (void)self;
    v1_state *s = host->calloc(1, sizeof *s);
    if (!s) return MCPG_ENOMEM;
    s->host = host;
    s->config = config;
    *instance_out = s;
    return 0;
}

static void v1_destroy(void *instance) {
    v1_state *s = instance;
    s->host->free(s);
}

#ifndef FIXTURE_METRICS
static int v1_list_tools(void *instance, mcpg_buf *out) {
    v1_state *s = instance;
    static const char list[] = "[{\"name\":\"v1_ping\",\"description\":\"answers its config\","
                               "\"inputSchema\":{\"type\":\"object\"}}]";
    return s->host->buf_append(out, list, sizeof list - 1);
}

static mcpg_status v1_call_tool(void *instance, mcpg_call *call) {
    v1_state *s = instance;
    char result[160];
    int n = snprintf(result, sizeof result,
                     "{\"content\":[{\"type\":\"text\",\"text\":\"limit=%lld ratio=%g\"}]}",
                     (long long)s->config->limit, s->config->ratio);
    if (n < 0 || (size_t)n >= sizeof result || s->host->call_result(call, result, (size_t)n)) {
        s->host->call_error(call, MCPG_RPC_INTERNAL_ERROR, "fixture", NULL);
        return MCPG_DENY;
    }
    return MCPG_CONTINUE;
}
#endif

static const struct {
    lifecycle_1_0 table;
    any_fn tail[8];
} v1_lifecycle = {
    .table = {.size = END_OF(lifecycle_1_0, destroy), .version = 1, .create = v1_create,
              .destroy = v1_destroy},
    .tail = LIFECYCLE_TAIL,
};

#ifdef FIXTURE_METRICS
static int v1_render(void *instance, mcpg_buf *out) {
    v1_state *s = instance;
    static const char text[] = "# TYPE abi_v1_0_renders counter\nabi_v1_0_renders 1\n";
    return s->host->buf_append(out, text, sizeof text - 1);
}

static const struct {
    metrics_ops_1_0 table;
    any_fn tail[8];
} v1_ops = {
    .table = {.size = END_OF(metrics_ops_1_0, render), .version = 1, .render = v1_render},
    .tail = OPS_TAIL,
};
#define FIXTURE_KIND MCPG_KIND_METRICS
#define FIXTURE_NAME "abi_metrics_v1_0"
#else
static const struct {
    backend_ops_1_0 table;
    any_fn tail[8];
} v1_ops = {
    .table = {.size = END_OF(backend_ops_1_0, call_tool), .version = 1,
              .list_tools = v1_list_tools, .call_tool = v1_call_tool},
    .tail = OPS_TAIL,
};
#define FIXTURE_KIND MCPG_KIND_BACKEND
#define FIXTURE_NAME "abi_v1_0"
#endif

static const config_field_1_0 v1_schema[] = {
    {.key = "limit", .type = MCPG_CFG_INT, .offset = offsetof(v1_config, limit),
     .default_json = "7", .min = 1, .max = 100, .help = "an integer, 1..100",
     .size = sizeof(config_field_1_0)},
    {.key = "ratio", .type = MCPG_CFG_DOUBLE, .offset = offsetof(v1_config, ratio),
     .default_json = "1.5", .help = "a number, 0.5..2.5",
     .size = sizeof(config_field_1_0), .dmin = 0.5, .dmax = 2.5},
    {.key = NULL, .size = sizeof(config_field_1_0)},
};

static const module_1_0 v1_descriptor = {
    .magic = MCPG_MODULE_MAGIC,
    .abi_major = 1,
    .abi_minor = 0,
    .size = END_OF(module_1_0, ops),
    .kind = FIXTURE_KIND,
    .name = FIXTURE_NAME,
    .version = "1.0.0",
    .build_id = FIXTURE_NAME " fixture",
    .description = "ABI test fixture: every table at its ABI 1.0 size",
    .flags = MCPG_MOD_INLINE_SAFE,
    .config = v1_schema,
    .config_size = sizeof(v1_config),
    .lifecycle = &v1_lifecycle.table,
    .ops = &v1_ops.table,
};

__attribute__((visibility("default"))) const mcpg_module *
mcpg_module_entry(uint16_t host_abi_major, uint16_t host_abi_minor) {
    (void)host_abi_major;
    (void)host_abi_minor;
    return (const mcpg_module *)(const void *)&v1_descriptor;
}
