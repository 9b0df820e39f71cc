/* metrics_prometheus: GET /metrics in the Prometheus text format (0.0.4).
 *
 * Every family the kernel and the modules registered (host->metrics_each)
 * is written as it is now: # HELP, # TYPE, then one line per series; a
 * histogram as its cumulative _bucket lines (le="+Inf" last), _sum and
 * _count. Values are integers in the metric's unit; a name that ends in
 * _seconds holds microseconds and is printed in seconds, exactly (the
 * decimal digits of the integer, never a float rounding).
 *
 * The instance keeps nothing but its host and config: what it renders is
 * the registry, then (key `process`) the process's own lines (process.c).
 */
#include "prom.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct prom_cfg {
    int process;
} prom_cfg;

static const mcpg_config_field prom_config[] = {
    MCPG_CFG_BOOL_FIELD(prom_cfg, process, "process", "true",
                        "also the process's CPU time, resident memory, open descriptors and "
                        "each thread's CPU time by its name (read from /proc at each scrape)"),
    MCPG_CONFIG_END};

typedef struct prom {
    const mcpg_host *host;
    const prom_cfg *cfg;
} prom;

/* One exposition being written: the first error stops it. */
typedef struct writer {
    const mcpg_host *h;
    mcpg_buf *out;
    int rc;
} writer;

static void put(writer *w, const char *s, size_t n) {
    if (!w->rc && n) w->rc = w->h->buf_append(w->out, s, n);
}

static void puts_(writer *w, const char *s) { put(w, s, strlen(s)); }

int prom_append_escaped(const mcpg_host *h, mcpg_buf *out, const char *s, int quotes) {
    const char *run = s;
    int rc = 0;
    for (; *s && !rc; s++) {
        const char *esc = *s == '\\'            ? "\\\\"
                          : *s == '"' && quotes ? "\\\""
                          : *s == '\n'          ? "\\n"
                                                : NULL;
        if (!esc) continue;
        rc = h->buf_append(out, run, (size_t)(s - run));
        if (!rc) rc = h->buf_append(out, esc, strlen(esc));
        run = s + 1;
    }
    return rc ? rc : h->buf_append(out, run, strlen(run));
}

static void put_escaped(writer *w, const char *s, int quotes) {
    if (!w->rc) w->rc = prom_append_escaped(w->h, w->out, s, quotes);
}

static int in_seconds(const char *name) {
    size_t n = strlen(name);
    return n >= 8 && strcmp(name + n - 8, "_seconds") == 0;
}

/* v, or v / 1e6 as exact decimals ("0.000025", "1.5", "3"), into text. */
void prom_format_number(char *text, size_t cap, int64_t v, int micro) {
    if (!micro) {
        snprintf(text, cap, "%" PRId64, v);
        return;
    }
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    uint64_t whole = mag / 1000000, frac = mag % 1000000;
    int n = snprintf(text, cap, "%s%" PRIu64, v < 0 ? "-" : "", whole);
    if (!frac || n < 0 || (size_t)n >= cap) return;
    snprintf(text + n, cap - (size_t)n, ".%06" PRIu64, frac);
    size_t end = strlen(text);
    while (text[end - 1] == '0') text[--end] = '\0';
}

static void put_number(writer *w, int64_t v, int micro) {
    char text[48];
    prom_format_number(text, sizeof text, v, micro);
    puts_(w, text);
}

/* {a="x",b="y"} of series s, with le last when given; nothing when empty. */
static void put_labels(writer *w, const mcpg_metric_view *v, uint32_t s, const char *le) {
    if (!v->n_labels && !le) return;
    puts_(w, "{");
    for (uint32_t l = 0; l < v->n_labels; l++) {
        if (l) puts_(w, ",");
        puts_(w, v->label_names[l]);
        puts_(w, "=\"");
        put_escaped(w, v->label_values[(size_t)s * v->n_labels + l], 1);
        puts_(w, "\"");
    }
    if (le) {
        if (v->n_labels) puts_(w, ",");
        puts_(w, "le=\"");
        puts_(w, le);
        puts_(w, "\"");
    }
    puts_(w, "}");
}

static void put_sample(writer *w, const mcpg_metric_view *v, const char *suffix, uint32_t s,
                       const char *le, int64_t value, int micro) {
    puts_(w, v->name);
    puts_(w, suffix);
    put_labels(w, v, s, le);
    puts_(w, " ");
    put_number(w, value, micro);
    puts_(w, "\n");
}

static void put_histogram_series(writer *w, const mcpg_metric_view *v, uint32_t s, int micro) {
    const uint64_t *counts = v->bucket_counts + (size_t)s * (v->n_buckets + 1);
    uint64_t cumulative = 0;
    for (uint32_t b = 0; b <= v->n_buckets; b++) {
        cumulative += counts[b];
        char le[48] = "+Inf";
        if (b < v->n_buckets) prom_format_number(le, sizeof le, (int64_t)v->buckets[b], micro);
        put_sample(w, v, "_bucket", s, le, (int64_t)cumulative, 0);
    }
    put_sample(w, v, "_sum", s, NULL, (int64_t)v->sums[s], micro);
    put_sample(w, v, "_count", s, NULL, (int64_t)v->counts[s], 0);
}

static const char *type_name(uint32_t type) {
    switch (type) {
    case MCPG_METRIC_COUNTER: return "counter";
    case MCPG_METRIC_GAUGE: return "gauge";
    case MCPG_METRIC_HISTOGRAM: return "histogram";
    default: return "untyped";
    }
}

static void put_family(void *arg, const mcpg_metric_view *v) {
    writer *w = arg;
    int micro = in_seconds(v->name);
    int first = !MCPG_HAS_FIELD(v, part) || v->part == 0; /* later parts: more series */
    if (first && v->help && *v->help) {
        puts_(w, "# HELP ");
        puts_(w, v->name);
        puts_(w, " ");
        put_escaped(w, v->help, 0);
        puts_(w, "\n");
    }
    if (first) {
        puts_(w, "# TYPE ");
        puts_(w, v->name);
        puts_(w, " ");
        puts_(w, type_name(v->type));
        puts_(w, "\n");
    }
    for (uint32_t s = 0; s < v->n_series; s++) {
        if (v->type == MCPG_METRIC_HISTOGRAM) put_histogram_series(w, v, s, micro);
        else put_sample(w, v, "", s, NULL, v->values[s], micro);
    }
}

static int prom_render(void *instance, mcpg_buf *out) {
    prom *p = instance;
    writer w = {p->host, out, 0};
    int rc = p->host->metrics_each(put_family, &w);
    if (!rc) rc = w.rc;
    if (!rc && p->cfg->process) rc = prom_write_process(p->host, out);
    return rc;
}

static const char *prom_content_type(void *instance) {
    (void)instance;
    return "text/plain; version=0.0.4; charset=utf-8";
}

static int prom_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                       void **instance_out) {
    if (!MCPG_HOST_HAS(host, metrics_each)) {
        host->log(self, MCPG_LOG_ERROR, "this gateway has no metrics registry (ABI 1.4 needed)");
        return MCPG_ENOTSUP;
    }
    prom *p = host->calloc(1, sizeof *p);
    if (!p) return MCPG_ENOMEM;
    p->host = host;
    p->cfg = config;
    *instance_out = p;
    return 0;
}

static void prom_destroy(void *instance) {
    prom *p = instance;
    p->host->free(p);
}

static const mcpg_lifecycle_ops prom_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .create = prom_create,
    .destroy = prom_destroy,
};

static const mcpg_metrics_ops prom_ops = {
    MCPG_OPS_HEAD(mcpg_metrics_ops),
    .render = prom_render,
    .content_type = prom_content_type,
};

MCPG_MODULE_DEFINE(MCPG_KIND_METRICS, "metrics_prometheus", "1.0.0",
                   .description = "GET /metrics in the Prometheus text format (0.0.4): every "
                                  "series the kernel and the modules register",
                   .config = prom_config, .config_size = sizeof(prom_cfg),
                   .lifecycle = &prom_lifecycle, .ops = &prom_ops);
