/* coordinator_memory's series (coord_metrics.h). Every label set is made
 * at create(): an op is counted by two indexes. */
#include "coord_metrics.h"

static const char *const OP_NAMES[CMO_COUNT] = {
    [CMO_GET] = "get", [CMO_PUT] = "put", [CMO_PUT_IF_ABSENT] = "put_if_absent",
    [CMO_CAS] = "compare_and_set", [CMO_INCR] = "incr", [CMO_RATE_TAKE] = "rate_take",
    [CMO_DEL] = "delete", [CMO_SCAN] = "scan_prefix", [CMO_PUBLISH] = "publish",
    [CMO_SUBSCRIBE] = "subscribe"};

enum { ST_OK, ST_NOT_FOUND, ST_EXISTS, ST_CONFLICT, ST_FULL, ST_ERROR, ST_COUNT };
static const char *const STATUS_NAMES[ST_COUNT] = {"ok", "not_found", "exists", "conflict",
                                                   "full", "error"};

/* Upper bounds in microseconds: an op answers on its loop's next turn. */
static const uint64_t OP_BUCKETS_US[] = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000, 100000};

static uint32_t status_index(int status) {
    switch (status) {
    case 0: return ST_OK;
    case MCPG_ENOENT: return ST_NOT_FOUND;
    case MCPG_EEXIST: return ST_EXISTS;
    case MCPG_ECONFLICT: return ST_CONFLICT;
    case MCPG_EAGAIN: return ST_FULL;
    default: return ST_ERROR;
    }
}

void cm_metrics_op(const cm_metrics *m, cm_opname op, int status, uint64_t us) {
    if (!m->h) return;
    m->h->metric_add(m->ops, (uint32_t)op * ST_COUNT + status_index(status), 1);
    if (op != CMO_SUBSCRIBE) m->h->metric_observe(m->seconds, (uint32_t)op, us);
}

static int64_t read_usage(void *arg, uint32_t series) {
    size_t keys, bytes;
    cm_store_usage(arg, &keys, &bytes);
    return (int64_t)(series == 0 ? keys : bytes);
}

static mcpg_metric *make(const mcpg_host *h, mcpg_instance *self, mcpg_metric_desc *d) {
    mcpg_metric *m = NULL;
    return h->metric_new(self, d, &m) == 0 ? m : NULL;
}

static void register_ops(cm_metrics *m, mcpg_instance *self, const char *name) {
    static const char *const labels[] = {"coordinator", "op", "status"};
    const char *values[CMO_COUNT * ST_COUNT * 3];
    size_t k = 0;
    for (uint32_t o = 0; o < CMO_COUNT; o++)
        for (uint32_t s = 0; s < ST_COUNT; s++) {
            values[k++] = name;
            values[k++] = OP_NAMES[o];
            values[k++] = STATUS_NAMES[s];
        }
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_COUNTER,
                          .name = "mcpg_coordinator_ops_total",
                          .help = "Coordinator operations, by op and how they ended",
                          .label_names = labels, .n_labels = 3, .label_values = values,
                          .n_series = CMO_COUNT * ST_COUNT};
    m->ops = make(m->h, self, &d);
}

static void register_seconds(cm_metrics *m, mcpg_instance *self, const char *name) {
    static const char *const labels[] = {"coordinator", "op"};
    const char *values[CMO_COUNT * 2];
    for (uint32_t o = 0; o < CMO_COUNT; o++) {
        values[2 * o] = name;
        values[2 * o + 1] = OP_NAMES[o];
    }
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_HISTOGRAM,
                          .name = "mcpg_coordinator_op_seconds",
                          .help = "Time from a coordinator op to its callback",
                          .label_names = labels, .n_labels = 2, .label_values = values,
                          .n_series = CMO_COUNT - 1 /* subscribe has no callback */,
                          .buckets = OP_BUCKETS_US,
                          .n_buckets = sizeof OP_BUCKETS_US / sizeof OP_BUCKETS_US[0]};
    m->seconds = make(m->h, self, &d);
}

static void register_usage(cm_metrics *m, mcpg_instance *self, const char *name,
                           cm_store *store) {
    static const char *const labels[] = {"coordinator", "what"};
    const char *values[] = {name, "keys", name, "bytes"};
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_GAUGE,
                          .name = "mcpg_coordinator_store",
                          .help = "Live keys, and their key and value bytes, in the store",
                          .label_names = labels, .n_labels = 2, .label_values = values,
                          .n_series = 2, .read = read_usage, .read_arg = store};
    make(m->h, self, &d);
}

void cm_metrics_register(cm_metrics *m, const mcpg_host *h, mcpg_instance *self,
                         cm_store *store) {
    *m = (cm_metrics){0};
    if (!MCPG_HOST_HAS(h, metric_new)) return;
    m->h = h;
    const char *name = h->instance_name(self);
    register_ops(m, self, name);
    register_seconds(m, self, name);
    register_usage(m, self, name, store);
}
