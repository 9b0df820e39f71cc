/* metrics_prometheus through the SDK's fake host: the exact exposition of a
 * counter with labels, gauges (one read when rendered, one set), and a
 * histogram whose label and help need escaping; no instance, no /metrics.
 * Usage: test_metrics_prometheus path/to/metrics_prometheus.so */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>
#include <mcpg/sdk.h>

#include <string.h>

static mcpg_fakehost *fh;
static const mcpg_host *host;

static mcpg_metric *make(const mcpg_metric_desc *d) {
    mcpg_metric *m = NULL;
    int rc = host->metric_new(NULL, d, &m);
    MCPG_REQUIRE(rc == 0 && m, "metric_new %s: %d", d->name, rc);
    return m;
}

static int64_t read_depth(void *arg, uint32_t series) { return *(int64_t *)arg + series; }

static void register_families(void) {
    static const char *const route_labels[] = {"route", "code"};
    static const char *const routes[] = {"/a", "200", "say \"hi\"\\now\nthen", "500"};
    mcpg_metric_desc c = {.size = sizeof c, .type = MCPG_METRIC_COUNTER,
                          .name = "t_requests_total", .help = "Requests, by route",
                          .label_names = route_labels, .n_labels = 2, .label_values = routes,
                          .n_series = 2};
    mcpg_metric *requests = make(&c);
    host->metric_add(requests, 0, 2);
    host->metric_add(requests, 0, 1);
    host->metric_add(requests, 1, 1);

    static int64_t depth = 42;
    static const char *const q_labels[] = {"queue"};
    static const char *const queues[] = {"in", "out"};
    mcpg_metric_desc g = {.size = sizeof g, .type = MCPG_METRIC_GAUGE, .name = "t_queue_depth",
                          .help = "Waiting now", .label_names = q_labels, .n_labels = 1,
                          .label_values = queues, .n_series = 2, .read = read_depth,
                          .read_arg = &depth};
    make(&g);
    mcpg_metric_desc s = {.size = sizeof s, .type = MCPG_METRIC_GAUGE, .name = "t_skew_seconds",
                          .n_series = 1};
    host->metric_set(make(&s), 0, -2500000);

    static const char *const p_labels[] = {"path"};
    static const char *const paths[] = {"x\"y"};
    static const uint64_t bounds[] = {10, 1000, 1500000};
    mcpg_metric_desc h = {.size = sizeof h, .type = MCPG_METRIC_HISTOGRAM,
                          .name = "t_wait_seconds", .help = "Time waited\nin line (a \\ too)",
                          .label_names = p_labels, .n_labels = 1, .label_values = paths,
                          .n_series = 1, .buckets = bounds, .n_buckets = 3};
    mcpg_metric *wait = make(&h);
    static const uint64_t seen[] = {10, 1000, 1500000, 2000005};
    for (int i = 0; i < 4; i++) host->metric_observe(wait, 0, seen[i]);
}

static const char EXPECTED[] =
    "# HELP t_requests_total Requests, by route\n"
    "# TYPE t_requests_total counter\n"
    "t_requests_total{route=\"/a\",code=\"200\"} 3\n"
    "t_requests_total{route=\"say \\\"hi\\\"\\\\now\\nthen\",code=\"500\"} 1\n"
    "# HELP t_queue_depth Waiting now\n"
    "# TYPE t_queue_depth gauge\n"
    "t_queue_depth{queue=\"in\"} 42\n"
    "t_queue_depth{queue=\"out\"} 43\n"
    "# TYPE t_skew_seconds gauge\n"
    "t_skew_seconds -2.5\n"
    "# HELP t_wait_seconds Time waited\\nin line (a \\\\ too)\n"
    "# TYPE t_wait_seconds histogram\n"
    "t_wait_seconds_bucket{path=\"x\\\"y\",le=\"0.00001\"} 1\n"
    "t_wait_seconds_bucket{path=\"x\\\"y\",le=\"0.001\"} 2\n"
    "t_wait_seconds_bucket{path=\"x\\\"y\",le=\"1.5\"} 3\n"
    "t_wait_seconds_bucket{path=\"x\\\"y\",le=\"+Inf\"} 4\n"
    "t_wait_seconds_sum{path=\"x\\\"y\"} 3.501015\n"
    "t_wait_seconds_count{path=\"x\\\"y\"} 4\n";

/* ---- a small module whose every instance counts into one family ---- */

typedef struct counting {
    const mcpg_host *host;
    mcpg_metric *sent;
} counting;

static int counting_create(const mcpg_host *h, mcpg_instance *self, const void *config,
                           void **out) {
    (void)config;
    static const char *const labels[] = {"instance"};
    const char *values[] = {h->instance_name(self)};
    counting *c = h->calloc(1, sizeof *c);
    c->host = h;
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_COUNTER, .name = "t_sent_total",
                          .help = "Sent, by instance", .label_names = labels, .n_labels = 1,
                          .label_values = values, .n_series = 1};
    int rc = h->metric_new(self, &d, &c->sent);
    if (rc) {
        h->free(c);
        return rc;
    }
    h->metric_add(c->sent, 0, values[0][1] == '1' ? 1 : 2);
    *out = c;
    return 0;
}

static void counting_destroy(void *state) {
    counting *c = state;
    c->host->free(c);
}

static mcpg_status counting_call(void *state, mcpg_call *call) {
    (void)state;
    (void)call;
    return MCPG_CONTINUE;
}

static int counting_list(void *state, mcpg_buf *out) {
    (void)state;
    return mcpg_buf_puts(out, "[]");
}

static const mcpg_lifecycle_ops counting_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops), .create = counting_create, .destroy = counting_destroy};
static const mcpg_backend_ops counting_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops), .list_tools = counting_list, .call_tool = counting_call};
static const mcpg_module counting_module = {
    .magic = MCPG_MODULE_MAGIC, .abi_major = MCPG_ABI_MAJOR, .abi_minor = MCPG_ABI_MINOR,
    .size = sizeof(mcpg_module), .kind = MCPG_KIND_BACKEND, .name = "counting",
    .version = "1", .build_id = "test", .lifecycle = &counting_lifecycle, .ops = &counting_ops};

static const char PARTS[] =
    "# HELP t_sent_total Sent, by instance\n"
    "# TYPE t_sent_total counter\n"
    "t_sent_total{instance=\"s1\"} 1\n"
    "t_sent_total{instance=\"s2\"} 2\n";

static int render(mcpg_buf *out, char *type, size_t cap) {
    out->len = 0;
    return host->metrics_render(mcpg_fakehost_worker(fh), out, type, cap);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: test_metrics_prometheus path/to/metrics_prometheus.so");
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fake host");
    host = mcpg_fakehost_host(fh);
    mcpg_buf out = {0};
    char type[128] = "";
    MCPG_CHECK(render(&out, type, sizeof type) == MCPG_ENOENT, "no metrics instance: ENOENT");

    mcpg_instance *prom = NULL;
    MCPG_REQUIRE(mcpg_fakehost_load_file(fh, argv[1], "prom", "{\"process\":false}", &prom) == 0,
                 "load: %s", mcpg_fakehost_report_text(fh));
    MCPG_CHECK(render(&out, type, sizeof type) == 0 && out.len == 0, "an empty registry: nothing");
    register_families();
    MCPG_CHECK(render(&out, type, sizeof type) == 0, "render");
    MCPG_CHECK(strcmp(type, "text/plain; version=0.0.4; charset=utf-8") == 0, "type %s", type);
    MCPG_CHECK(out.data && strcmp(out.data, EXPECTED) == 0, "exposition:\n%s\nexpected:\n%s",
               out.data ? out.data : "", EXPECTED);

    /* two instances of one module: one family, # HELP and # TYPE once */
    mcpg_instance *s1 = NULL, *s2 = NULL;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &counting_module, "s1", NULL, &s1) == 0 &&
                 mcpg_fakehost_load(fh, &counting_module, "s2", NULL, &s2) == 0, "counting");
    MCPG_CHECK(render(&out, type, sizeof type) == 0 && strstr(out.data, PARTS),
               "two parts:\n%s", out.data);
    MCPG_CHECK(mcpg_fakehost_unload(fh, s1) == 0 && mcpg_fakehost_unload(fh, s2) == 0, "unload");
    MCPG_CHECK(render(&out, type, sizeof type) == 0 && strcmp(out.data, EXPECTED) == 0,
               "their series went with them:\n%s", out.data);

    MCPG_CHECK(mcpg_fakehost_unload(fh, prom) == 0, "unload");
    MCPG_CHECK(render(&out, type, sizeof type) == MCPG_ENOENT, "unloaded: ENOENT again");

    /* by default the process's own lines follow the registry's */
    MCPG_REQUIRE(mcpg_fakehost_load_file(fh, argv[1], "prom", NULL, &prom) == 0, "load: %s",
                 mcpg_fakehost_report_text(fh));
    MCPG_CHECK(render(&out, type, sizeof type) == 0 && strncmp(out.data, EXPECTED, strlen(EXPECTED)) == 0,
               "the registry first:\n%s", out.data);
    static const char *const process_lines[] = {
        "\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total ",
        "\nprocess_resident_memory_bytes ", "\nprocess_open_fds ",
        "\n# TYPE mcpg_thread_cpu_seconds_total counter\nmcpg_thread_cpu_seconds_total{thread=\"test_metrics_pr\"} "};
    for (int i = 0; i < 4; i++)
        MCPG_CHECK(strstr(out.data, process_lines[i]), "has %s:\n%s", process_lines[i], out.data);
    MCPG_CHECK(mcpg_fakehost_unload(fh, prom) == 0, "unload");
    mcpg_buf_free(&out);
    MCPG_CHECK(mcpg_fakehost_free(fh) == 0, "the fake host saw no module bug");
    return MCPG_CHECK_EXIT("test_metrics_prometheus");
}
