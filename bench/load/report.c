/* What a run prints: a progress line a second, the final human table, and
 * one JSON line with the same figures for scripts (bench/cpu-per-call.sh,
 * later bench/run). JSON keys are flat and append-only: scripts read them. */
#include <stdio.h>
#include <string.h>

#include "load.h"

static const char *const err_names[] = {
#define LOAD_ERR_NAME(e, s) s,
    LOAD_ERR_KINDS(LOAD_ERR_NAME)
#undef LOAD_ERR_NAME
};

const char *load_err_name(load_err_kind k) { return k < LOAD_ERR_COUNT ? err_names[k] : "unknown"; }

uint64_t load_total_errors(const load_stats *s) {
    uint64_t n = 0;
    for (int k = 0; k < LOAD_ERR_COUNT; k++) n += s->err[k];
    return n;
}

static double measured_seconds(const load_run *run) {
    uint64_t end = run->t_end_ns ? run->t_end_ns : uv_hrtime();
    return run->t_measure_ns && end > run->t_measure_ns ? (double)(end - run->t_measure_ns) / 1e9 : 0.0;
}

static double us(uint64_t ns) { return (double)ns / 1000.0; }

/* 1234567 -> "1,234,567": figures this wide are read, not parsed. */
static const char *grouped(uint64_t v, char *buf, size_t cap) {
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

void load_report_progress(load_run *run, FILE *out) {
    const char *phase = run->interval_phase == LOAD_PHASE_WARMUP ? "warm-up" : "measure";
    const load_stats *iv = &run->interval;
    uint64_t errs = load_total_errors(&run->warmup) + load_total_errors(&run->measure);
    char b1[32], b2[32];
    ++run->progress_seconds;
    if (out)
        fprintf(out,
                "mcpg-load: [%3us %-7s] %10s calls/s  p50 %7.0f us  p99 %7.0f us  errors %s  conns %u/%u\n",
                run->progress_seconds, phase, grouped(iv->ok, b1, sizeof b1),
                us(load_hist_percentile(&iv->hist, 50)), us(load_hist_percentile(&iv->hist, 99)),
                grouped(errs, b2, sizeof b2), run->open_conns, run->nconns);
    load_hist_reset(&run->interval.hist);
    memset(run->interval.err, 0, sizeof run->interval.err);
    run->interval.ok = 0;
    run->interval_phase = run->phase;
}

static void print_error_kinds(const load_stats *s, FILE *out) {
    if (!load_total_errors(s)) {
        fputs("none", out);
        return;
    }
    const char *sep = "";
    for (int k = 0; k < LOAD_ERR_COUNT; k++) {
        if (!s->err[k]) continue;
        fprintf(out, "%s%s %llu", sep, load_err_name(k), (unsigned long long)s->err[k]);
        sep = ", ";
    }
}

void load_report_human(const load_run *run, FILE *out) {
    const load_stats *m = &run->measure;
    const load_hist *h = &m->hist;
    double secs = measured_seconds(run);
    char b1[32], b2[32], b3[32], b4[32];
    fprintf(out, "mcpg-load: %s  %s wire  tool %s  %u connections  warm-up %.1f s  measured %.2f s\n",
            run->opts->url, run->opts->wire == LOAD_WIRE_LEGACY ? "legacy" : "stateless", run->opts->tool,
            run->nconns, run->opts->warmup_s, secs);
    fprintf(out, "  %12s %10s %8s %9s %9s %9s %9s %9s %9s\n", "calls/s", "ok", "errors", "p50 us", "p90 us",
            "p99 us", "p99.9 us", "max us", "mean us");
    fprintf(out, "  %12.1f %10s %8s %9.0f %9.0f %9.0f %9.0f %9.0f %9.1f\n",
            secs > 0 ? (double)m->ok / secs : 0.0, grouped(m->ok, b1, sizeof b1),
            grouped(load_total_errors(m), b2, sizeof b2), us(load_hist_percentile(h, 50)),
            us(load_hist_percentile(h, 90)), us(load_hist_percentile(h, 99)),
            us(load_hist_percentile(h, 99.9)), us(h->max_ns),
            h->total ? h->sum_ns / (double)h->total / 1000.0 : 0.0);
    fputs("  errors: ", out);
    print_error_kinds(m, out);
    if (run->opts->wire == LOAD_WIRE_LEGACY)
        fprintf(out, "\n  answers: %s as SSE, %s as one JSON body", grouped(m->ok_sse, b3, sizeof b3),
                grouped(m->ok - m->ok_sse, b4, sizeof b4));
    fprintf(out, "\n  connections: %u open when the window ended, %s connects, %s reconnects in the window\n",
            run->open_at_stop, grouped(m->connects, b3, sizeof b3), grouped(m->reconnects, b4, sizeof b4));
    fprintf(out, "  warm-up: %s calls, %s errors", grouped(run->warmup.calls, b1, sizeof b1),
            grouped(load_total_errors(&run->warmup), b2, sizeof b2));
    fprintf(out, "; load generator CPU %.0f %% of one core over the window\n",
            secs > 0 ? 100.0 * run->loadgen_cpu_s / secs : 0.0);
    if (run->opts->rate > 0)
        fprintf(out, "  open loop at %.1f calls/s offered: latency from each call's due time; at most %s "
                     "calls waited for a connection, %s were due and unsent at the end\n",
                run->opts->rate, grouped(run->sched.max_backlog, b1, sizeof b1),
                grouped(run->backlog_at_end, b2, sizeof b2));
}

static void json_string(FILE *out, const char *s) {
    char esc[6 * 256 + 1];
    size_t n = strlen(s);
    if (n > 256) n = 256; /* only names and URLs go here */
    esc[load_json_escape(esc, s, n)] = '\0';
    fprintf(out, "\"%s\"", esc);
}

void load_report_json(const load_run *run, FILE *out) {
    const load_stats *m = &run->measure;
    const load_hist *h = &m->hist;
    double secs = measured_seconds(run);
    fprintf(out, "{\"bench\":\"mcpg-load\",\"wire\":\"%s\",\"method\":\"tools/call\",\"url\":",
            run->opts->wire == LOAD_WIRE_LEGACY ? "legacy" : "stateless");
    json_string(out, run->opts->url);
    fputs(",\"mcp_tool\":", out);
    json_string(out, run->opts->tool);
    fprintf(out, ",\"connections\":%u,\"warmup_s\":%.3f,\"duration_s\":%.6f", run->opts->connections,
            run->opts->warmup_s, secs);
    fprintf(out, ",\"calls\":%llu,\"ok\":%llu,\"errors\":%llu,\"calls_per_s\":%.1f",
            (unsigned long long)m->calls, (unsigned long long)m->ok, (unsigned long long)load_total_errors(m),
            secs > 0 ? (double)m->ok / secs : 0.0);
    fprintf(
        out,
        ",\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,\"min_us\":%.1f,"
        "\"mean_us\":%.1f",
        us(load_hist_percentile(h, 50)), us(load_hist_percentile(h, 90)), us(load_hist_percentile(h, 99)),
        us(load_hist_percentile(h, 99.9)), us(h->max_ns), h->total ? us(h->min_ns) : 0.0,
        h->total ? h->sum_ns / (double)h->total / 1000.0 : 0.0);
    for (int k = 0; k < LOAD_ERR_COUNT; k++)
        fprintf(out, ",\"err_%s\":%llu", load_err_name(k), (unsigned long long)m->err[k]);
    fprintf(out, ",\"connects\":%llu,\"reconnects\":%llu,\"warmup_calls\":%llu,\"warmup_errors\":%llu",
            (unsigned long long)m->connects, (unsigned long long)m->reconnects,
            (unsigned long long)run->warmup.calls, (unsigned long long)load_total_errors(&run->warmup));
    fprintf(out, ",\"loadgen_cpu_pct\":%.1f", secs > 0 ? 100.0 * run->loadgen_cpu_s / secs : 0.0);
    fprintf(out, ",\"ok_sse\":%llu", (unsigned long long)m->ok_sse);
    fprintf(out, ",\"rate\":%.3f,\"max_backlog\":%llu,\"backlog_at_end\":%llu", run->opts->rate,
            (unsigned long long)run->sched.max_backlog, (unsigned long long)run->backlog_at_end);
    fprintf(out, ",\"targets\":%u,\"spread\":\"%s\"}\n", run->opts->ntargets,
            run->opts->spread_call ? "call" : "connection");
}
