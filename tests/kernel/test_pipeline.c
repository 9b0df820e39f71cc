/* Kernel unit test: the pipeline driven directly (no HTTP), with the real
 * backend_mock and audit_file modules and a fixture identity module.
 * Proves the stage order, PENDING/resume, denial with its audit event, pool
 * dispatch with its timeout, unknown tools, tools/list, each call counted
 * in the kernel's series with its outcome (ok, error, denied, failed), and
 * that a stopped kernel leaves no loop handle open. */
#include "probe.h"

#include <mcpg/check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The pool timeouts against the backends' naps: each answer at its timeout
 * must come long before the backend returns, with room for a loaded machine
 * (two durable audit writes are part of each answer's time). An answer within
 * ANSWER_BOUND_MS came at the timeout, not at the nap. */
#define MOCK_TIMEOUT_MS 500
#define LATE_TIMEOUT_MS 50
#define NAP_MS 3000
#define ANSWER_BOUND_MS 1500
/* Calls submitted from the prepare phase, their median timed. */
#define PREP_CALLS 9

static char *write_manifest(const char *dir, const char *modules_dir, const char *audit,
                            const char *late) {
    static char path[512];
    snprintf(path, sizeof path, "%s/pipeline.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"gateway\":{\"workers\":1,\"module_dir\":\"%s\",\"log_level\":\"error\","
            "\"anonymous\":true,"
            "\"pool\":{\"threads\":2,\"queue\":8},\"server\":{\"access_log\":false}},"
            "\"modules\":["
            "{\"name\":\"who\",\"module\":\"fx_identity\"},"
            "{\"name\":\"mock\",\"module\":\"backend_mock\",\"timeout_ms\":%d,\"config\":{\"tools\":["
            "{\"name\":\"echo\"},{\"name\":\"slow\",\"latency_ms\":%d}]}},"
            "{\"name\":\"fast\",\"module\":\"backend_mock\",\"inline_dispatch\":true,"
            "\"config\":{\"tools\":[{\"name\":\"echo\"},{\"name\":\"nap\",\"latency_ms\":30}]}},"
            "{\"name\":\"late\",\"module\":\"fx_late\",\"timeout_ms\":%d,"
            "\"config\":{\"path\":\"%s\",\"nap_ms\":%d}},"
            "{\"name\":\"patient\",\"module\":\"fx_late\",\"config\":{\"path\":\"%s\",\"nap_ms\":1}},"
            "{\"name\":\"audit\",\"module\":\"audit_file\",\"config\":{\"path\":\"%s\"}}],"
            "\"pipeline\":{\"identity\":[\"who\"],\"audit\":[\"audit\"]},"
            "\"bindings\":[{\"backend\":\"mock\"},{\"backend\":\"fast\",\"prefix\":\"fast\"},"
            "{\"backend\":\"late\"},{\"backend\":\"patient\",\"prefix\":\"patient\"}]}",
            modules_dir, MOCK_TIMEOUT_MS, NAP_MS, LATE_TIMEOUT_MS, late, NAP_MS, late, audit);
    fclose(f);
    return path;
}

/* One series of the registry: its value, by its label values (-1: none). */
typedef struct series_q {
    const char *name;
    const char *values[3];
    int64_t value, sum;
} series_q;

static void find_series(void *arg, const mcpg_metric_view *v) {
    series_q *q = arg;
    if (strcmp(v->name, q->name) != 0) return;
    for (uint32_t s = 0; s < v->n_series; s++) {
        int64_t n = v->type == MCPG_METRIC_HISTOGRAM ? (int64_t)v->counts[s] : v->values[s];
        bool match = true;
        for (uint32_t l = 0; l < v->n_labels && l < 3; l++)
            if (q->values[l] && strcmp(v->label_values[s * v->n_labels + l], q->values[l]) != 0)
                match = false;
        q->sum += n;
        if (match) q->value = n;
    }
}

/* The series with these label values (NULL: the family's only one); all
 * of the family's series summed into *sum when asked. */
static int64_t series(const char *name, const char *a, const char *b, const char *c,
                      int64_t *sum) {
    series_q q = {name, {a, b, c}, -1, 0};
    MCPG_CHECK(HOST.metrics_each(find_series, &q) == 0, "metrics_each");
    if (sum) *sum = q.sum;
    return q.value;
}

static void check_counted(void) {
    static const struct { const char *method, *outcome; int64_t n; } calls[] = {
        {"tools/call", "ok", 4 + PREP_CALLS}, {"tools/call", "denied", 3},
        {"tools/call", "failed", 2},
        {"tools/call", "error", 2},  {"tools/list", "ok", 1},     {"tools/list", "denied", 1}};
    int64_t total = 0, all = 0;
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        int64_t n = series("mcpg_calls_total", calls[i].method, "stateless", calls[i].outcome, &all);
        MCPG_CHECK(n == calls[i].n, "%s %s: %lld, expected %lld", calls[i].method,
                   calls[i].outcome, (long long)n, (long long)calls[i].n);
        total += calls[i].n;
    }
    MCPG_CHECK(all == total, "every call counted once: %lld of %lld", (long long)all,
               (long long)total);
    static const struct { const char *tool, *outcome; int64_t n; } tools[] = {
        {"echo", "ok", 1 + PREP_CALLS}, {"fast_echo", "ok", 1},  {"fast_nap", "ok", 1},
        {"patient_late", "ok", 1}, {"echo", "denied", 1}, {"slow", "failed", 1},
        {"late", "failed", 1}, {"(unknown)", "error", 2}, {"(unknown)", "denied", 2}};
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        int64_t n = series("mcpg_tool_calls_total", tools[i].tool, tools[i].outcome, NULL, NULL);
        MCPG_CHECK(n == tools[i].n, "tool %s %s: %lld, expected %lld", tools[i].tool,
                   tools[i].outcome, (long long)n, (long long)tools[i].n);
    }
    MCPG_CHECK(series("mcpg_call_overhead_seconds", NULL, NULL, NULL, NULL) == total,
               "an overhead for every call");
    /* the calls served and the two timed out reached their backend */
    MCPG_CHECK(series("mcpg_backend_seconds", NULL, NULL, NULL, NULL) == 4 + PREP_CALLS + 2,
               "a backend time for every call that reached one: %lld",
               (long long)series("mcpg_backend_seconds", NULL, NULL, NULL, NULL));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_pipeline MODULES_DIR\n");
        return 2;
    }
    char dir[] = "/tmp/mcpg-pipeline-XXXXXX";
    if (!mkdtemp(dir)) return 2;
    char audit[600], late[600];
    snprintf(audit, sizeof audit, "%s/audit.jsonl", dir);
    snprintf(late, sizeof late, "%s/late.txt", dir);
    const char *manifest_path = write_manifest(dir, argv[1], audit, late);

    errlist errs = {0};
    manifest *m = manifest_load(manifest_path, NULL, argv[1], &errs);
    errlist_print(&errs);
    MCPG_REQUIRE(m != NULL, "manifest refused");
    klog_init(m->log_level);
    kernel.m = m;
    kernel.max_calls_per_worker = 64;
    kernel.workers = calloc(1, sizeof *kernel.workers);
    kernel.n_workers = 1;
    MCPG_REQUIRE(metrics_init(1) == 0, "metrics");
    kernel.gen = generation_build(m, &errs);
    errlist_print(&errs);
    MCPG_REQUIRE(kernel.gen != NULL, "generation refused");
    MCPG_CHECK(pool_start(2, 8) == 0, "pool");
    MCPG_CHECK(generation_start(kernel.gen) == 0, "start");
    MCPG_CHECK(workers_start() == 0, "workers");

    probe p;
    probe_run(&p, "tools/call", "echo", "{\"message\":\"hi\"}", "1", NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, "Echo: hi"), "pool echo: %s", p.text);

    probe_run(&p, "tools/call", "fast_echo", "{\"message\":\"inline\"}", "\"s-2\"", "alice");
    MCPG_CHECK(!p.is_error && strstr(p.text, "Echo: inline"), "inline echo: %s", p.text);

    probe_run(&p, "tools/call", "fast_nap", "{\"message\":\"later\"}", "3", "pend:bob");
    MCPG_CHECK(!p.is_error && strstr(p.text, "Echo: later"), "pending identity + timer backend: %s",
               p.text);

    probe_run(&p, "tools/call", "echo", "{\"message\":\"no\"}", "4", "deny");
    MCPG_CHECK(p.is_error && p.code == -32001 && p.http == 403, "denied: %lld %d %s",
               (long long)p.code, p.http, p.text);

    /* timeout_ms MOCK_TIMEOUT_MS, latency NAP_MS, a durable audit sink: the
     * answer comes at the timeout, not when the backend finally returns */
    probe_run(&p, "tools/call", "slow", "{\"message\":\"zz\"}", "5", NULL);
    MCPG_CHECK(p.is_error && p.code == -32000 && strstr(p.text, "timed out"), "timeout: %s",
               p.text);
    MCPG_CHECK(probe_elapsed_ms(&p) < ANSWER_BOUND_MS,
               "timeout answered after %llu ms (timeout_ms %d, latency %d)",
               (unsigned long long)probe_elapsed_ms(&p), MOCK_TIMEOUT_MS, NAP_MS);

    /* a backend still running after its timeout reads its request when the
     * transport has already freed it: it must see the kernel's copies */
    probe_run(&p, "tools/call", "late", "{\"k\":\"v1\"}", "9", "carol");
    MCPG_CHECK(p.is_error && strstr(p.text, "timed out") && probe_elapsed_ms(&p) < ANSWER_BOUND_MS,
               "late timeout: %s after %llu ms (timeout_ms %d, nap %d)", p.text,
               (unsigned long long)probe_elapsed_ms(&p), LATE_TIMEOUT_MS, NAP_MS);
    probe_run(&p, "tools/call", "patient_late", "{\"k\":\"v2\"}", "10", "dave");
    MCPG_CHECK(!p.is_error, "patient late: %s", p.text);

    /* without gateway.anonymous a call no identity module took is refused,
     * 401, before anything about tools is told */
    kernel.gen->m->anonymous = false;
    probe_run(&p, "tools/call", "nope", "{}", "6a", NULL);
    MCPG_CHECK(p.is_error && p.code == MCPG_RPC_UNAUTHENTICATED && p.http == 401,
               "anonymous refused: %lld %d %s", (long long)p.code, p.http, p.text);
    kernel.gen->m->anonymous = true;

    probe_run(&p, "tools/call", "nope", "{}", "6", NULL);
    MCPG_CHECK(p.is_error && p.code == -32602, "unknown tool: %lld", (long long)p.code);

    /* identity runs first: a refused caller learns nothing about tool names */
    probe_run(&p, "tools/call", "nope", "{}", "6b", "deny");
    MCPG_CHECK(p.is_error && p.code == -32001, "unknown tool, refused caller: %lld",
               (long long)p.code);

    probe_run(&p, "tools/list", NULL, NULL, "7", NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, "\"name\":\"echo\"") &&
                   strstr(p.text, "\"name\":\"fast_echo\"") &&
                   strstr(p.text, "\"name\":\"fast_nap\""),
               "tools/list: %s", p.text);

    probe_run(&p, "tools/list", NULL, NULL, "8", "deny");
    MCPG_CHECK(p.is_error && p.code == -32001, "tools/list passes identity: %s", p.text);

    /* a tool name with a NUL inside is just an unknown tool */
    probe_start(&p, "tools/call", "echo\0zzzzzzzzzzzzzzzzzzzzzzzz", 30, "{}", "11", NULL);
    probe_wait(&p);
    MCPG_CHECK(p.is_error && p.code == -32602, "name with a NUL: %lld %s", (long long)p.code,
               p.text);

    /* a call submitted from the prepare phase (a transport resuming held-back
     * pipelined requests) reaches the pool without waiting for a timer: on a
     * bare pipeline, where nothing before the backend answers PENDING */
    char bare_path[700];
    snprintf(bare_path, sizeof bare_path, "%s/bare.json", dir);
    FILE *bf = fopen(bare_path, "w");
    fprintf(bf, "{\"gateway\":{\"workers\":1,\"module_dir\":\"%s\",\"log_level\":\"error\"},"
                "\"modules\":[{\"name\":\"mock\",\"module\":\"backend_mock\"}]}", argv[1]);
    fclose(bf);
    manifest *bare_m = manifest_load(bare_path, NULL, argv[1], &errs);
    generation *bare = bare_m ? generation_build(bare_m, &errs) : NULL;
    errlist_print(&errs);
    MCPG_CHECK(bare && generation_start(bare) == 0, "bare generation");
    kernel.workers[0].gen = bare; /* read on the loop only at submit: nothing in flight now */
    uint64_t took[PREP_CALLS] = {0};
    for (int i = 0; bare && i < PREP_CALLS; i++) {
        probe_start(&p, "tools/call", "echo", 4, "{\"message\":\"prep\"}", "12", NULL);
        p.from_prepare = true;
        probe_wait(&p);
        MCPG_CHECK(!p.is_error, "prepare-phase submit: %s", p.text);
        took[i] = p.t_done - p.t_submit;
        for (int j = i; j > 0 && took[j] < took[j - 1]; j--) { /* keep it sorted */
            uint64_t t = took[j];
            took[j] = took[j - 1];
            took[j - 1] = t;
        }
    }
    kernel.workers[0].gen = kernel.gen;
    /* without the kernel's idle handle each waited for a 10 ms timer; the
     * median of PREP_CALLS, so that a few calls slowed by a loaded machine
     * do not count */
    MCPG_CHECK(took[PREP_CALLS / 2] < 5000,
               "pool calls submitted in the prepare phase took %llu us (median)",
               (unsigned long long)took[PREP_CALLS / 2]);

    check_counted();

    /* no sleep first: the drain itself waits for the timed-out backends
     * still holding their calls on the pool */
    /* the fixture identity keeps one periodic host timer per loop, from its
     * worker_start to its worker_stop: none may be left for the kernel */
    mcpg_instance *who = kernel.gen->instances[1];
    MCPG_CHECK(strcmp(who->name, "who") == 0 && atomic_load(&who->live_timers) == 1,
               "worker_start ran on the loop: %d timer(s)", atomic_load(&who->live_timers));
    workers_drain();
    /* the timed-out backends end within NAP_MS of their start: a generous
     * bound on the drain, polled */
    for (uint64_t until = mono_us() + 20000000; !workers_idle() && mono_us() < until;)
        usleep(10000);
    MCPG_CHECK(workers_idle(), "workers drained");
    workers_stop();
    MCPG_CHECK(atomic_load(&who->live_timers) == 0, "worker_stop stopped its timer: %d left",
               atomic_load(&who->live_timers));
    pool_stop();
    generation_stop(kernel.gen);
    workers_free();
    if (bare) generation_stop(bare);
    generation_free(bare);
    manifest_free(bare_m);
    unlink(bare_path);
    generation_free(kernel.gen);
    metrics_shutdown();
    metrics_tools_free();

    MCPG_CHECK(count_lines(audit, "\"mcpg.tool.call.allowed\"", "\"id\":1,") == 1, "allowed id 1");
    MCPG_CHECK(count_lines(audit, "\"mcpg.tool.call.completed\"", "\"id\":1,") == 1,
               "completed id 1");
    MCPG_CHECK(count_lines(audit, "\"mcpg.tool.call.completed\"", "\"id\":\"s-2\"") == 1,
               "completed s-2");
    MCPG_CHECK(count_lines(audit, "\"principal\":\"bob\"", NULL) == 2, "bob in both events");
    MCPG_CHECK(count_lines(audit, "\"mcpg.tool.call.denied\"", "\"id\":4,") == 1, "denied id 4");
    MCPG_CHECK(count_lines(audit, "\"mcpg.tool.call.allowed\"", "\"id\":4,") == 0,
               "no allowed id 4");
    MCPG_CHECK(count_lines(audit, "\"mcpg.tool.call.failed\"", "\"id\":5,") == 1, "failed id 5");
    MCPG_CHECK(count_lines(audit, "\"mcpg.tool.call\"", "\"id\":6,") == 0, "nothing for unknown");
    MCPG_CHECK(count_lines(late, "id=9 args={\"k\":\"v1\"} ", NULL) == 1,
               "late backend read its args");
    MCPG_CHECK(count_lines(late, "id=10 args={\"k\":\"v2\"} user=dave", NULL) == 1,
               "pool backend read its header");
    unlink(late);
    manifest_free(m);
    unlink(audit);
    unlink(manifest_path);
    rmdir(dir);
    return MCPG_CHECK_EXIT("test_pipeline");
}
