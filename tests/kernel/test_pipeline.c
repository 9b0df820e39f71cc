/* Kernel unit test: the pipeline driven directly (no HTTP), with the real
 * backend_mock and audit_file modules and a fixture identity module.
 * Proves the stage order, PENDING/resume, denial with its audit event, pool
 * dispatch with its timeout, unknown tools, tools/list, and that a stopped
 * kernel leaves no loop handle open. */
#include "kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            failures++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
        }                                                                       \
    } while (0)

/* ---- one call submitted on the worker, waited for from the main thread ---- */

typedef struct probe {
    mcpg_call_desc desc;
    const char *user;
    mcpg_post post;
    pthread_mutex_t lock;
    pthread_cond_t done_cv;
    bool done;
    int submit_rc;
    int is_error;
    int64_t code;
    int http;
    char text[4096];
} probe;

static const char *probe_header(void *ctx, const char *lname, size_t *len) {
    probe *p = ctx;
    if (strcmp(lname, "x-test-user") != 0 || !p->user) return NULL;
    *len = strlen(p->user);
    return p->user;
}

static void probe_complete(void *ctx, mcpg_call *call) {
    probe *p = ctx;
    mcpg_call_outcome o;
    call_outcome(call, &o);
    pthread_mutex_lock(&p->lock);
    p->is_error = o.is_error;
    p->code = o.error_code;
    p->http = o.http_status;
    if (o.is_error)
        snprintf(p->text, sizeof p->text, "%s", o.error_message);
    else
        snprintf(p->text, sizeof p->text, "%.*s", (int)o.result_len, o.result);
    p->done = true;
    pthread_cond_signal(&p->done_cv);
    pthread_mutex_unlock(&p->lock);
    call_release(call);
}

static void submit_on_loop(void *arg) {
    probe *p = arg;
    mcpg_call *c;
    p->submit_rc = call_submit(&K.workers[0], &p->desc, &c);
    if (p->submit_rc) {
        pthread_mutex_lock(&p->lock);
        p->done = true;
        pthread_cond_signal(&p->done_cv);
        pthread_mutex_unlock(&p->lock);
    }
}

static void run_call(probe *p, const char *method, const char *tool, const char *args,
                     const char *id, const char *user) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    p->user = user;
    p->desc = (mcpg_call_desc){.size = sizeof p->desc, .wire = MCPG_WIRE_STATELESS,
                               .method = method, .method_len = strlen(method),
                               .name = tool, .name_len = tool ? strlen(tool) : 0,
                               .args_json = args, .args_len = args ? strlen(args) : 0,
                               .id_json = id, .id_len = strlen(id), .transport_ctx = p,
                               .header = probe_header, .complete = probe_complete};
    p->post.fn = submit_on_loop;
    p->post.arg = p;
    worker_post(&K.workers[0], &p->post);
    pthread_mutex_lock(&p->lock);
    while (!p->done) pthread_cond_wait(&p->done_cv, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

/* ---- reading the audit file ---- */

static int count_lines(const char *path, const char *needle1, const char *needle2) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle1) && (!needle2 || strstr(line, needle2))) n++;
    fclose(f);
    return n;
}

static char *write_manifest(const char *dir, const char *modules_dir, const char *audit) {
    static char path[512];
    snprintf(path, sizeof path, "%s/pipeline.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"gateway\":{\"workers\":1,\"module_dir\":\"%s\",\"log_level\":\"error\","
            "\"pool\":{\"threads\":2,\"queue\":8},\"server\":{\"access_log\":false}},"
            "\"modules\":["
            "{\"name\":\"who\",\"module\":\"fx_identity\"},"
            "{\"name\":\"mock\",\"module\":\"backend_mock\",\"timeout_ms\":100,\"config\":{\"tools\":["
            "{\"name\":\"echo\"},{\"name\":\"slow\",\"latency_ms\":400}]}},"
            "{\"name\":\"fast\",\"module\":\"backend_mock\",\"inline_dispatch\":true,"
            "\"config\":{\"tools\":[{\"name\":\"echo\"},{\"name\":\"nap\",\"latency_ms\":30}]}},"
            "{\"name\":\"audit\",\"module\":\"audit_file\",\"config\":{\"path\":\"%s\"}}],"
            "\"pipeline\":{\"identity\":[\"who\"],\"audit\":[\"audit\"]},"
            "\"bindings\":[{\"backend\":\"mock\"},{\"backend\":\"fast\",\"prefix\":\"fast\"}]}",
            modules_dir, audit);
    fclose(f);
    return path;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_pipeline MODULES_DIR\n");
        return 2;
    }
    char dir[] = "/tmp/mcpg-pipeline-XXXXXX";
    if (!mkdtemp(dir)) return 2;
    char audit[600];
    snprintf(audit, sizeof audit, "%s/audit.jsonl", dir);
    const char *manifest_path = write_manifest(dir, argv[1], audit);

    errlist errs = {0};
    manifest *m = manifest_load(manifest_path, NULL, argv[1], &errs);
    errlist_print(&errs);
    CHECK(m != NULL, "manifest refused");
    if (!m) return 1;
    klog_init(m->log_level);
    K.m = m;
    K.max_calls_per_worker = 64;
    K.workers = calloc(1, sizeof *K.workers);
    K.n_workers = 1;
    K.gen = generation_build(m, &errs);
    errlist_print(&errs);
    CHECK(K.gen != NULL, "generation refused");
    if (!K.gen) return 1;
    CHECK(pool_start(2, 8) == 0, "pool");
    CHECK(generation_start(K.gen) == 0, "start");
    CHECK(workers_start() == 0, "workers");

    probe p;
    run_call(&p, "tools/call", "echo", "{\"message\":\"hi\"}", "1", NULL);
    CHECK(!p.is_error && strstr(p.text, "Echo: hi"), "pool echo: %s", p.text);

    run_call(&p, "tools/call", "fast_echo", "{\"message\":\"inline\"}", "\"s-2\"", "alice");
    CHECK(!p.is_error && strstr(p.text, "Echo: inline"), "inline echo: %s", p.text);

    run_call(&p, "tools/call", "fast_nap", "{\"message\":\"later\"}", "3", "pend:bob");
    CHECK(!p.is_error && strstr(p.text, "Echo: later"), "pending identity + timer backend: %s",
          p.text);

    run_call(&p, "tools/call", "echo", "{\"message\":\"no\"}", "4", "deny");
    CHECK(p.is_error && p.code == -32001 && p.http == 403, "denied: %lld %d %s",
          (long long)p.code, p.http, p.text);

    run_call(&p, "tools/call", "slow", "{\"message\":\"zz\"}", "5", NULL);
    CHECK(p.is_error && p.code == -32000 && strstr(p.text, "timed out"), "timeout: %s", p.text);

    run_call(&p, "tools/call", "nope", "{}", "6", NULL);
    CHECK(p.is_error && p.code == -32602, "unknown tool: %lld", (long long)p.code);

    run_call(&p, "tools/list", NULL, NULL, "7", NULL);
    CHECK(!p.is_error && strstr(p.text, "\"name\":\"echo\"") &&
              strstr(p.text, "\"name\":\"fast_echo\"") && strstr(p.text, "\"name\":\"fast_nap\""),
          "tools/list: %s", p.text);

    run_call(&p, "tools/list", NULL, NULL, "8", "deny");
    CHECK(p.is_error && p.code == -32001, "tools/list passes identity: %s", p.text);

    usleep(450 * 1000); /* let the timed-out pool call return and release */
    workers_drain();
    for (int i = 0; i < 200 && !workers_idle(); i++) usleep(10000);
    CHECK(workers_idle(), "workers drained");
    workers_stop();
    generation_stop(K.gen);
    pool_stop();
    generation_free(K.gen);

    CHECK(count_lines(audit, "\"mcpg.tool.call.allowed\"", "\"id\":1,") == 1, "allowed id 1");
    CHECK(count_lines(audit, "\"mcpg.tool.call.completed\"", "\"id\":1,") == 1, "completed id 1");
    CHECK(count_lines(audit, "\"mcpg.tool.call.completed\"", "\"id\":\"s-2\"") == 1,
          "completed s-2");
    CHECK(count_lines(audit, "\"principal\":\"bob\"", NULL) == 2, "bob in both events");
    CHECK(count_lines(audit, "\"mcpg.tool.call.denied\"", "\"id\":4,") == 1, "denied id 4");
    CHECK(count_lines(audit, "\"mcpg.tool.call.allowed\"", "\"id\":4,") == 0, "no allowed id 4");
    CHECK(count_lines(audit, "\"mcpg.tool.call.failed\"", "\"id\":5,") == 1, "failed id 5");
    CHECK(count_lines(audit, "\"mcpg.tool.call\"", "\"id\":6,") == 0, "nothing for unknown");
    manifest_free(m);
    free(K.workers);
    unlink(audit);
    unlink(manifest_path);
    rmdir(dir);
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    else printf("test_pipeline: ok\n");
    return failures ? 1 : 0;
}
