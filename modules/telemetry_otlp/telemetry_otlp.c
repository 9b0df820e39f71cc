/* telemetry_otlp: the gateway's request spans, exported over OTLP/HTTP to a
 * collector (an OpenTelemetry Collector, Jaeger, Tempo, ...).
 *
 * export_spans runs on a loop thread as each sampled request is answered:
 * it encodes every span at once (protobuf by default, OTLP/JSON with
 * "encoding": "json") and puts it in a bounded queue (queue_spans); a full
 * queue drops the new span and counts it, so no call ever waits for the
 * collector. A thread of the module's own batches and POSTs (otlp_http.c).
 *
 * The kernel samples by this module's policy: sample_ratio for a request
 * that starts a trace; one that carries a traceparent follows its sampled
 * flag. include_enduser adds who called to the server span.
 */
#include "otlp.h"

#include <stdlib.h>
#include <string.h>

static const mcpg_config_field otlp_config[] = {
    MCPG_CFG_REQUIRED_STRING_FIELD(otlp_cfg, endpoint, "endpoint",
                                   "the collector's OTLP/HTTP traces URL, "
                                   "\"http://127.0.0.1:4318/v1/traces\" (http only)"),
    MCPG_CFG_ENUM_FIELD(otlp_cfg, encoding, "encoding", "\"protobuf\"", "protobuf|json",
                        "the request body: OTLP protobuf or OTLP/JSON"),
    MCPG_CFG_STRING_FIELD(otlp_cfg, service_name, "service_name", "\"mcpg\"",
                          "the resource's service.name"),
    MCPG_CFG_DOUBLE_FIELD(otlp_cfg, sample_ratio, "sample_ratio", "1.0", 0.0, 1.0,
                          "the share of requests without a traceparent that start a trace"),
    MCPG_CFG_BOOL_FIELD(otlp_cfg, include_enduser, "include_enduser", "false",
                        "the server span names the caller (enduser.id, mcpg.tenant.id)"),
    MCPG_CFG_INT_FIELD(otlp_cfg, queue_spans, "queue_spans", "2048", 1, 1048576,
                       "spans waiting for the exporter; when full, new spans are dropped"),
    MCPG_CFG_INT_FIELD(otlp_cfg, batch_spans, "batch_spans", "512", 1, 65536,
                       "the most spans in one POST"),
    MCPG_CFG_INT_FIELD(otlp_cfg, flush_ms, "flush_ms", "1000", 1, 600000,
                       "the longest a span waits for its batch to fill"),
    MCPG_CFG_INT_FIELD(otlp_cfg, max_attempts, "max_attempts", "5", 1, 100,
                       "POSTs of one batch (connection errors, 5xx, 429) before it is dropped"),
    MCPG_CFG_INT_FIELD(otlp_cfg, backoff_ms, "backoff_ms", "200", 1, 600000,
                       "the wait before the second attempt; it doubles for each after"),
    MCPG_CFG_INT_FIELD(otlp_cfg, timeout_ms, "timeout_ms", "5000", 1, 600000,
                       "connecting, sending and waiting for the answer, each"),
    MCPG_CONFIG_END};

/* ---- validate, create ---- */

static int otlp_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const otlp_cfg *cfg = config;
    otlp_url u;
    char why[600];
    if (otlp_url_parse(cfg->endpoint, &u, why, sizeof why) != 0) {
        host->report_error(rep, "endpoint", "%s", why);
        return MCPG_ECONFIG;
    }
    if (cfg->batch_spans > cfg->queue_spans) {
        host->report_error(rep, "batch_spans", "%lld is more than queue_spans (%lld) can hold",
                           (long long)cfg->batch_spans, (long long)cfg->queue_spans);
        return MCPG_ECONFIG;
    }
    return 0;
}

static void counters(otlp *o) {
    static const char *const reason[] = {"reason"};
    static const char *const reasons[] = {"queue_full", "export_failed"};
    if (!MCPG_HOST_HAS(o->host, metric_new)) return;
    mcpg_metric_desc e = {.size = sizeof e, .type = MCPG_METRIC_COUNTER,
                          .name = "mcpg_otlp_spans_exported_total",
                          .help = "spans the collector took", .n_series = 1};
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_COUNTER,
                          .name = "mcpg_otlp_spans_dropped_total",
                          .help = "spans not exported: the queue was full, or the collector "
                                  "did not take them",
                          .label_names = reason, .n_labels = 1, .n_series = OTLP_DROP_REASONS,
                          .label_values = reasons};
    if (o->host->metric_new(o->self, &e, &o->exported) != 0) o->exported = NULL;
    if (o->host->metric_new(o->self, &d, &o->dropped) != 0) o->dropped = NULL;
}

static int otlp_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                       void **instance_out) {
    otlp *o = calloc(1, sizeof *o);
    if (!o) return MCPG_ENOMEM;
    o->host = host;
    o->self = self;
    o->cfg = config;
    o->conn = -1;
    o->json = strcmp(o->cfg->encoding, "json") == 0;
    char why[600];
    o->ring = calloc((size_t)o->cfg->queue_spans, sizeof *o->ring);
    int rc = !o->ring ? MCPG_ENOMEM
             : otlp_url_parse(o->cfg->endpoint, &o->url, why, sizeof why) ? MCPG_ECONFIG : 0;
    if (rc) {
        free(o->ring);
        free(o);
        return rc;
    }
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->wake, NULL);
    counters(o);
    *instance_out = o;
    return 0;
}

/* ---- start, stop, destroy ---- */

static int otlp_start(void *instance) {
    otlp *o = instance;
    if (pthread_create(&o->thread, NULL, otlp_thread, o) != 0) {
        o->host->log(o->self, MCPG_LOG_ERROR, "cannot start the exporter thread");
        return MCPG_ENOMEM;
    }
    o->thread_started = true;
    o->host->log(o->self, MCPG_LOG_INFO, "exporting spans to http://%s:%s%s (%s)", o->url.host,
                 o->url.port, o->url.path, o->json ? "json" : "protobuf");
    return 0;
}

/* What is queued gets one more try before the thread ends. */
static void otlp_stop(void *instance) {
    otlp *o = instance;
    if (!o->thread_started) return;
    pthread_mutex_lock(&o->mu);
    o->stopping = true;
    pthread_cond_signal(&o->wake);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->thread, NULL);
    o->thread_started = false;
}

static void otlp_destroy(void *instance) {
    otlp *o = instance;
    otlp_stop(o);
    otlp_queue_clear(o);
    free(o->ring);
    pthread_cond_destroy(&o->wake);
    pthread_mutex_destroy(&o->mu);
    free(o);
}

/* ---- the kind's ops ---- */

/* On a loop thread: encoded outside the lock, queued under it. */
static void otlp_export(void *instance, const mcpg_span *const *spans, size_t n) {
    otlp *o = instance;
    size_t cap = (size_t)o->cfg->queue_spans, dropped = 0;
    for (size_t i = 0; i < n; i++) {
        otlp_blob *b = otlp_encode_span(spans[i], o->json);
        if (!b) {
            dropped++;
            continue;
        }
        pthread_mutex_lock(&o->mu);
        bool room = o->count < cap && !o->stopping;
        if (room) o->ring[(o->head + o->count++) % cap] = b;
        if (o->count == (size_t)o->cfg->batch_spans) pthread_cond_signal(&o->wake);
        pthread_mutex_unlock(&o->mu);
        if (!room) {
            free(b);
            dropped++;
        }
    }
    if (dropped) otlp_count_dropped(o, OTLP_DROP_QUEUE_FULL, dropped);
}

static void otlp_policy(void *instance, mcpg_trace_policy *out) {
    const otlp *o = instance;
    out->sample_ratio = o->cfg->sample_ratio;
    if (o->cfg->include_enduser) out->flags |= MCPG_TRACE_ENDUSER;
}

static const mcpg_lifecycle_ops otlp_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = otlp_validate,
    .create = otlp_create,
    .start = otlp_start,
    .stop = otlp_stop,
    .destroy = otlp_destroy,
};

static const mcpg_telemetry_ops otlp_ops = {
    MCPG_OPS_HEAD(mcpg_telemetry_ops),
    .export_spans = otlp_export,
    .policy = otlp_policy,
};

MCPG_MODULE_DEFINE(MCPG_KIND_TELEMETRY, "telemetry_otlp", "1.0.0",
                   .description = "request spans exported over OTLP/HTTP (protobuf or JSON) to "
                                  "a collector, from a bounded queue and a thread of its own",
                   .flags = MCPG_MOD_OWNS_THREADS, .config = otlp_config,
                   .config_size = sizeof(otlp_cfg), .lifecycle = &otlp_lifecycle,
                   .ops = &otlp_ops);
