/* Metrics: the host table's registry slots (ABI 1.4), the kernel's own
 * series, and GET /metrics through the generation's metrics instance.
 *
 * The registry (lib/hostcore/metrics_registry.c) is made once the loops are
 * counted, before any instance is created; each worker loop writes its own
 * row of every family. The kernel's series are made then too, with every
 * label set fixed: a call is counted by index, never by name. Tools are the
 * one set that grows, and its names come from upstreams (a server that
 * lists tools dynamically says what they are called): each name the
 * catalog routes gets its series the first time a catalog holding it is
 * built, and its route keeps the index. A name's series are never taken
 * back (a scrape must not see a counter vanish and come back at 0), so the
 * cap counts every name seen since the start, across rebuilds: at most
 * gateway.metrics.max_tools of them, each at most 64 bytes; every later
 * name is counted as "(other)". An upstream renaming its tools forever
 * fills the cap once, then costs nothing more. */
#include "call_internal.h"
#include "metrics_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kmetrics KM;

static mreg *REG;
static pthread_mutex_t tools_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t max_tools = METRICS_MAX_TOOLS_DEFAULT; /* set by metrics_init */

static const char *const OUTCOMES[CALL_OUTCOMES] = {"ok", "error", "denied", "failed"};
static const char *const WIRES[METRICS_WIRES] = {"stateless", "legacy"};

/* Upper bounds in microseconds: 10 µs to 10 s. */
static const uint64_t LATENCY_BUCKETS_US[] = {10,    25,    50,     100,    250,    500,
                                              1000,  2500,  5000,   10000,  25000,  50000,
                                              100000, 250000, 500000, 1000000, 2500000,
                                              5000000, 10000000};
#define N_LATENCY_BUCKETS (sizeof LATENCY_BUCKETS_US / sizeof LATENCY_BUCKETS_US[0])

/* ---- the host slots ---- */

static mreg *registry(void) {
    if (!REG) REG = mreg_new(kernel.n_workers); /* a kernel test that never called metrics_init */
    return REG;
}

int host_metric_new(mcpg_instance *self, const mcpg_metric_desc *d, mcpg_metric **out) {
    char why[256] = "";
    mreg *r = registry();
    if (!r) return MCPG_ENOMEM;
    if (!self) { /* a family no instance owns would outlive the module's code */
        klog(MCPG_LOG_ERROR, "kernel", "metric_new without an instance: refused (module bug)");
        return MCPG_EINVAL;
    }
    int rc = mreg_metric_new(r, self, self->name, d, 0, out, why, sizeof why);
    if (rc == MCPG_EINVAL || rc == MCPG_EEXIST)
        klog(MCPG_LOG_ERROR, self->stamp, "metric refused: %s", why);
    return rc;
}

void host_metric_add(mcpg_metric *m, uint32_t series, int64_t delta) {
    mreg_add(m, series, delta);
}
void host_metric_set(mcpg_metric *m, uint32_t series, int64_t v) { mreg_set(m, series, v); }
void host_metric_observe(mcpg_metric *m, uint32_t series, uint64_t v) {
    mreg_observe(m, series, v);
}

int host_metrics_each(void (*fn)(void *, const mcpg_metric_view *), void *arg) {
    mreg *r = registry();
    return r ? mreg_each(r, fn, arg) : MCPG_ENOMEM;
}

/* On w's loop its generation is stable: the metrics instance of the
 * generation that loop serves answers. */
int host_metrics_render(mcpg_worker *w, mcpg_buf *out, char *ct, size_t ct_cap) {
    const generation *g = w ? w->gen : kernel.gen;
    mcpg_instance *mi = g ? g->metrics : NULL;
    return mi ? mreg_render(mi->desc->ops, mi->state, out, ct, ct_cap) : MCPG_ENOENT;
}

void metrics_forget(const mcpg_instance *inst) {
    if (REG) mreg_forget(REG, inst);
}

void metrics_thread_row(int row) { mreg_thread_row(row); }

void metrics_count(mcpg_metric *m, uint32_t series, int64_t delta) { mreg_add(m, series, delta); }

/* ---- the kernel's series ---- */

static int64_t read_in_flight(void *arg, uint32_t series) {
    (void)arg;
    (void)series;
    long n = 0;
    for (uint32_t i = 0; kernel.workers && i < kernel.n_workers; i++)
        n += atomic_load(&kernel.workers[i].calls_in_flight);
    return n;
}
static int64_t read_pool_depth(void *arg, uint32_t series) {
    (void)arg;
    return series == 0 ? (int64_t)pool_queued() : (int64_t)pool_busy();
}
static int64_t read_pinned(void *arg, uint32_t series) {
    (void)arg;
    (void)series;
    return (int64_t)atomic_load(&kernel.pinned_images);
}
static int64_t read_generation(void *arg, uint32_t series) {
    (void)arg;
    (void)series;
    return kernel.gen ? kernel.gen->id : 0;
}
static int64_t read_one(void *arg, uint32_t series) {
    (void)arg;
    (void)series;
    return 1;
}

static mcpg_metric *family(const mcpg_metric_desc *d, uint32_t cap) {
    mcpg_metric *m = NULL;
    char why[256] = "";
    if (mreg_metric_new(REG, NULL, NULL, d, cap, &m, why, sizeof why) != 0)
        klog(MCPG_LOG_ERROR, "kernel", "metric %s not registered: %s", d->name, why);
    return m;
}

static mcpg_metric *simple(uint32_t type, const char *name, const char *help,
                           int64_t (*read)(void *, uint32_t)) {
    mcpg_metric_desc d = {.size = sizeof d, .type = type, .name = name, .help = help,
                          .n_series = 1, .read = read};
    if (type == MCPG_METRIC_HISTOGRAM) {
        d.buckets = LATENCY_BUCKETS_US;
        d.n_buckets = N_LATENCY_BUCKETS;
    }
    return family(&d, 0);
}

static mcpg_metric *labelled(uint32_t type, const char *name, const char *help,
                             const char *const *labels, uint32_t n_labels,
                             const char *const *values, uint32_t n_series,
                             int64_t (*read)(void *, uint32_t)) {
    mcpg_metric_desc d = {.size = sizeof d, .type = type, .name = name, .help = help,
                          .label_names = labels, .n_labels = n_labels, .label_values = values,
                          .n_series = n_series, .read = read};
    return family(&d, 0);
}

/* method x wire x outcome, in that order (metrics_count_call's index). */
static void register_calls(void) {
    static const char *const labels[] = {"method", "wire", "outcome"};
    const char *values[METRICS_METHODS * METRICS_WIRES * CALL_OUTCOMES * 3];
    size_t k = 0;
    for (uint32_t m = 0; m < METRICS_METHODS; m++)
        for (uint32_t w = 0; w < METRICS_WIRES; w++)
            for (uint32_t o = 0; o < CALL_OUTCOMES; o++) {
                values[k++] = m ? mcpg_method_name(m) : "other";
                values[k++] = WIRES[w];
                values[k++] = OUTCOMES[o];
            }
    KM.calls = labelled(MCPG_METRIC_COUNTER, "mcpg_calls_total",
                        "Calls answered, by MCP method, wire and outcome", labels, 3, values,
                        (uint32_t)(k / 3), NULL);
}

/* Cells for every tool name there may be; labels for the two fixed ones. */
static void register_tools(void) {
    static const char *const labels[] = {"tool", "outcome"};
    const char *values[2 * CALL_OUTCOMES * 2];
    size_t k = 0;
    /* not names a tool may have ([a-zA-Z0-9_-]): they cannot meet a real one */
    static const char *const fixed[2] = {"(unknown)", "(other)"};
    for (int t = 0; t < 2; t++)
        for (uint32_t o = 0; o < CALL_OUTCOMES; o++) {
            values[k++] = fixed[t];
            values[k++] = OUTCOMES[o];
        }
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_COUNTER,
                          .name = "mcpg_tool_calls_total",
                          .help = "tools/call answered, by the tool's client name and outcome",
                          .label_names = labels, .n_labels = 2, .label_values = values,
                          .n_series = (uint32_t)(k / 2)};
    KM.tool_calls = family(&d, (max_tools + METRICS_FIRST_TOOL) * CALL_OUTCOMES);
}

/* Cells for METRICS_MAX_SERVERS names, registered with the first name a
 * generation serves (a gateway without servers has no such family); each
 * later name's labels are set the first time it is served. */
static void register_servers(const char *first) {
    static const char *const labels[] = {"server", "outcome"};
    const char *values[2 * CALL_OUTCOMES];
    for (uint32_t o = 0; o < CALL_OUTCOMES; o++) values[2 * o] = first, values[2 * o + 1] = OUTCOMES[o];
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_COUNTER,
                          .name = "mcpg_server_calls_total",
                          .help = "Calls answered by each virtual server (servers[]), by outcome",
                          .label_names = labels, .n_labels = 2, .label_values = values,
                          .n_series = CALL_OUTCOMES};
    KM.server_calls = family(&d, METRICS_MAX_SERVERS * CALL_OUTCOMES);
}

static char *server_names[METRICS_MAX_SERVERS];
static uint32_t n_server_names;
static pthread_mutex_t servers_lock = PTHREAD_MUTEX_INITIALIZER;

static bool server_labelled(uint32_t i, const char *name) {
    if (i == 0) {
        register_servers(name);
        return KM.server_calls != NULL;
    }
    for (uint32_t o = 0; o < CALL_OUTCOMES; o++) {
        const char *values[2] = {name, OUTCOMES[o]};
        if (mreg_series_labels(REG, KM.server_calls, i * CALL_OUTCOMES + o, values) != 0)
            return false;
    }
    return true;
}

uint32_t metrics_server_index(const char *name) {
    if (!REG || !name || !name[0]) return METRICS_SERVER_NONE;
    pthread_mutex_lock(&servers_lock);
    uint32_t i = 0;
    while (i < n_server_names && strcmp(server_names[i], name) != 0) i++;
    if (i == n_server_names && i < METRICS_MAX_SERVERS && server_labelled(i, name))
        server_names[n_server_names++] = strdup(name);
    pthread_mutex_unlock(&servers_lock);
    return i < n_server_names ? i : METRICS_SERVER_NONE;
}

static void metrics_servers_free(void) {
    for (uint32_t i = 0; i < n_server_names; i++) free(server_names[i]);
    n_server_names = 0;
}

static void register_kernel_series(void) {
    register_calls();
    register_tools();
    KM.overhead = simple(MCPG_METRIC_HISTOGRAM, "mcpg_call_overhead_seconds",
                         "Time a call spent in the gateway: its whole time less its backend's",
                         NULL);
    KM.backend = simple(MCPG_METRIC_HISTOGRAM, "mcpg_backend_seconds",
                        "Time a call's backend took, for calls that reached one", NULL);
    simple(MCPG_METRIC_GAUGE, "mcpg_calls_in_flight", "Calls submitted and not yet answered",
           read_in_flight);
    static const char *const state_label[] = {"state"};
    static const char *const pool_states[] = {"queued", "running"};
    labelled(MCPG_METRIC_GAUGE, "mcpg_pool_jobs",
             "The worker pool's jobs: waiting in its bounded queue, and running", state_label, 1,
             pool_states, 2, read_pool_depth);
    KM.pool_refused = simple(MCPG_METRIC_COUNTER, "mcpg_pool_refused_total",
                             "Jobs refused because the worker pool's queue was full", NULL);
    KM.left_out = simple(MCPG_METRIC_COUNTER, "mcpg_catalog_left_out_total",
                         "Items a backend listed that the merged lists leave out (a name "
                         "another backend serves, an invalid name or x-mcp-header annotation), "
                         "counted once when first left out", NULL);
    static const char *const action_label[] = {"action"};
    static const char *const actions[] = {"warn", "hide", "block"}; /* PINS_WARN.. in order */
    KM.pin_changes = labelled(MCPG_METRIC_COUNTER, "mcpg_pin_changes_total",
                              "Tool, prompt and resource template definitions found to differ "
                              "from their pins (or without one), by what was done",
                              action_label, 1, actions, 3, NULL);
    KM.pin_refused = simple(MCPG_METRIC_COUNTER, "mcpg_pin_refused_total",
                            "Calls refused because their tool or prompt is held by its pin", NULL);
    static const char *const result_label[] = {"result"};
    static const char *const results[] = {"ok", "refused"};
    KM.reloads = labelled(MCPG_METRIC_COUNTER, "mcpg_reloads_total",
                          "Reloads asked for, by result (ok: the new generation serves)",
                          result_label, 1, results, 2, NULL);
    simple(MCPG_METRIC_GAUGE, "mcpg_pinned_images",
           "Module images still mapped after they were unloaded", read_pinned);
    simple(MCPG_METRIC_GAUGE, "mcpg_generation", "The generation serving new calls",
           read_generation);
    static const char *const build_labels[] = {"version", "abi"};
    static char abi[16];
    snprintf(abi, sizeof abi, "%d.%d", MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    const char *build_values[] = {MCPG_VERSION, abi};
    labelled(MCPG_METRIC_GAUGE, "mcpg_build_info", "The gateway's version and ABI (always 1)",
             build_labels, 2, build_values, 1, read_one);
}

static int tools_table_new(uint32_t cap);

int metrics_init(uint32_t n_loops) {
    metrics_tools_free(); /* names index the family made here: none from before */
    max_tools = kernel.m ? (uint32_t)kernel.m->metrics_max_tools : METRICS_MAX_TOOLS_DEFAULT;
    REG = mreg_new(n_loops);
    if (!REG || tools_table_new(max_tools) != 0) return MCPG_ENOMEM;
    register_kernel_series();
    return 0;
}

void metrics_shutdown(void) {
    mreg_free(REG);
    REG = NULL;
    memset(&KM, 0, sizeof KM);
}

/* ---- tools: a series per name, made when a catalog is built ---- */

/* Names seen so far, open addressing, never more than half full. */
static char **tool_names;
static uint32_t *tool_index;
static size_t tool_slots;
static uint32_t n_tools;
static bool cap_told; /* the log said once that the cap was reached */

static int tools_table_new(uint32_t cap) {
    if (cap == 0) return 0; /* every tool is "(other)": no table */
    tool_slots = 2 * (size_t)cap;
    tool_names = calloc(tool_slots, sizeof *tool_names);
    tool_index = calloc(tool_slots, sizeof *tool_index);
    if (tool_names && tool_index) return 0;
    metrics_tools_free();
    return MCPG_ENOMEM;
}

static size_t tool_hash(const char *s) {
    size_t h = 5381;
    while (*s) h = h * 33 + (unsigned char)*s++;
    return h % tool_slots;
}

static uint32_t tool_label(uint32_t index, const char *name) {
    for (uint32_t o = 0; o < CALL_OUTCOMES; o++) {
        const char *values[2] = {name, OUTCOMES[o]};
        if (mreg_series_labels(REG, KM.tool_calls, index * CALL_OUTCOMES + o, values) != 0)
            return METRICS_TOOL_OTHER;
    }
    return index;
}

/* Once per process: a gateway whose upstreams name more tools than the cap
 * should know why some have no series of their own. */
static void tell_cap_reached(const char *name) {
    if (cap_told || max_tools == 0) return; /* 0: the operator asked for none */
    cap_told = true;
    klog(MCPG_LOG_WARN, "kernel",
         "mcpg_tool_calls_total: %u tool names have series of their own "
         "(gateway.metrics.max_tools); \"%.64s\" and every later new name are counted as "
         "tool=\"(other)\"", max_tools, name);
}

uint32_t metrics_tool_index(const char *name) {
    /* the catalog routes only valid names; checked here too, since the
     * table's size bound and the two fixed values rely on it */
    if (!KM.tool_calls || !name || !mcpg_name_valid(name, strlen(name)))
        return METRICS_TOOL_OTHER;
    pthread_mutex_lock(&tools_lock);
    uint32_t index = METRICS_TOOL_OTHER;
    size_t h = tool_slots ? tool_hash(name) : 0;
    while (tool_slots && tool_names[h] && strcmp(tool_names[h], name) != 0)
        h = (h + 1) % tool_slots;
    if (tool_slots && tool_names[h]) {
        index = tool_index[h];
    } else if (n_tools >= max_tools) {
        tell_cap_reached(name);
    } else if ((tool_names[h] = strdup(name))) {
        tool_index[h] = tool_label(METRICS_FIRST_TOOL + n_tools, name);
        n_tools++;
        index = tool_index[h];
    }
    pthread_mutex_unlock(&tools_lock);
    return index;
}

void metrics_tools_free(void) {
    for (size_t i = 0; tool_names && i < tool_slots; i++) free(tool_names[i]);
    free(tool_names);
    free(tool_index);
    tool_names = NULL;
    tool_index = NULL;
    tool_slots = 0;
    n_tools = 0;
    cap_told = false;
    metrics_servers_free();
}

/* ---- counting a call, as it is answered ---- */

static uint32_t outcome_of(const mcpg_call *c) {
    if (c->denied) return CALL_DENIED;
    if (c->pool.detached || c->pool.skipped) return CALL_FAILED; /* timed out, or never ran */
    if (!c->is_error) return CALL_OK;
    /* the gateway's own failures (a full pool, an audit sink that cannot
     * record, out of memory) ask for 503; a backend's error does not */
    return c->http_status >= 500 ? CALL_FAILED : CALL_ERROR;
}

void metrics_count_call(const mcpg_call *c) {
    uint32_t outcome = outcome_of(c);
    uint32_t method = c->method < METRICS_METHODS ? c->method : 0;
    uint32_t wire = c->d.wire == MCPG_WIRE_STATELESS ? 0 : 1;
    mreg_add(KM.calls, (method * METRICS_WIRES + wire) * CALL_OUTCOMES + outcome, 1);
    if (c->srv && c->srv->metric_series != METRICS_SERVER_NONE)
        mreg_add(KM.server_calls, c->srv->metric_series * CALL_OUTCOMES + outcome, 1);
    if (c->method == MCPG_METHOD_TOOLS_CALL) {
        uint32_t tool = c->route ? c->route->tool_series : METRICS_TOOL_UNKNOWN;
        mreg_add(KM.tool_calls, tool * CALL_OUTCOMES + outcome, 1);
    }
    uint64_t total = mono_us() - c->t0;
    uint64_t backend = c->tb1 > c->tb0 ? c->tb1 - c->tb0 : 0;
    if (c->tb0) mreg_observe(KM.backend, 0, backend);
    mreg_observe(KM.overhead, 0, total > backend ? total - backend : 0);
}
