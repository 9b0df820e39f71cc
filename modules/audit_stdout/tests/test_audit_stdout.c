/* audit_stdout through the SDK's fake host, with the process's fd 1 a pipe
 * this test reads: every event comes out as the same line audit_file's
 * formatter makes; emit() answers CONTINUE at once, also while nobody
 * reads; a full buffer drops (counted) or refuses with 503, as configured;
 * a closed stdout loses lines, logged, without failing calls.
 * Usage: test_audit_stdout path/to/audit_stdout.so */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit_format.h"

static const char *so_path;
static mcpg_fakehost *fh;
static int saved_stdout = -1;

/* fd 1 becomes the write end of a new pipe; returns its read end. */
static int stdout_to_pipe(int pipe_size) {
    int p[2];
    MCPG_REQUIRE(pipe2(p, O_CLOEXEC) == 0, "pipe");
    if (pipe_size) fcntl(p[1], F_SETPIPE_SZ, pipe_size);
    fflush(stdout);
    if (saved_stdout < 0) saved_stdout = dup(STDOUT_FILENO);
    MCPG_REQUIRE(dup2(p[1], STDOUT_FILENO) == STDOUT_FILENO, "dup2");
    close(p[1]);
    return p[0];
}

static void stdout_back(void) {
    fflush(stdout);
    dup2(saved_stdout, STDOUT_FILENO);
}

typedef struct reader {
    int fd;
    char *data;
    size_t len, cap;
} reader;

static void *read_all(void *arg) {
    reader *r = arg;
    for (;;) {
        if (r->cap - r->len < 65536) {
            r->cap = r->cap ? r->cap * 2 : 1 << 20;
            r->data = realloc(r->data, r->cap);
        }
        ssize_t n = read(r->fd, r->data + r->len, r->cap - r->len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        r->len += (size_t)n;
    }
    return NULL;
}

static mcpg_instance *load(const char *config) {
    return mcpg_fakehost_load_file_or_exit(fh, so_path, "out", config);
}

static mcpg_audit_event event_for(uint64_t seq, char *id, size_t cap, const char *msg) {
    int n = snprintf(id, cap, "%llu", (unsigned long long)seq);
    return (mcpg_audit_event){.size = sizeof(mcpg_audit_event), .name = "mcpg.tool.call.completed",
                              .seq = seq, .time_us = 1785196800000000LL + (int64_t)seq,
                              .id_json = id, .id_len = (size_t)n, .method = "tools/call",
                              .tool = "echo", .backend = "mock", .principal = "alice",
                              .wire = MCPG_WIRE_STATELESS, .generation = 1,
                              .error_message = msg, .error_code = msg ? -32000 : 0,
                              .roles_json = "[\"ops\"]", .peer = "127.0.0.1:1",
                              .gateway_id = "gw", .latency_us = 5, .backend_us = 1};
}

static int emit(mcpg_instance *inst, mcpg_call *c, uint64_t seq, const char *msg) {
    char id[24];
    mcpg_audit_event ev = event_for(seq, id, sizeof id, msg);
    return mcpg_fakehost_emit(fh, inst, c, &ev);
}

/* Every event is one line, byte for byte what the shared formatter makes. */
static void test_lines(void) {
    reader r = {.fd = stdout_to_pipe(0)};
    pthread_t t;
    MCPG_REQUIRE(pthread_create(&t, NULL, read_all, &r) == 0, "reader");
    mcpg_instance *inst = load(NULL);
    enum { N = 2000 };
    double worst = 0, total = 0;
    for (uint64_t i = 1; i <= N; i++) {
        mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", "{}", "1");
        double t0 = mcpg_fakehost_now_s();
        int st = emit(inst, c, i, NULL);
        double dt = mcpg_fakehost_now_s() - t0;
        if (dt > worst) worst = dt;
        total += dt;
        MCPG_REQUIRE(st == MCPG_CONTINUE, "emit %llu: %d (never PENDING: not durable)",
                     (unsigned long long)i, st);
        mcpg_fakehost_call_free(fh, c);
    }
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    stdout_back();
    pthread_join(t, NULL);
    close(r.fd);
    size_t off = 0;
    for (uint64_t i = 1; i <= N; i++) {
        char id[24], want[2048];
        mcpg_audit_event ev = event_for(i, id, sizeof id, NULL);
        audit_lens l;
        size_t bound = audit_line_bound(&ev, &l);
        MCPG_REQUIRE(bound <= sizeof want, "bound");
        size_t n = audit_format_line(want, &ev, &l);
        MCPG_REQUIRE(off + n <= r.len && memcmp(r.data + off, want, n) == 0,
                     "line %llu is the formatter's:\n%.*s\n%.*s", (unsigned long long)i, (int)n,
                     want, (int)n, off < r.len ? r.data + off : "");
        off += n;
    }
    MCPG_CHECK(off == r.len, "nothing else on stdout: %zu of %zu bytes", off, r.len);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "2000 events written to stdout, 0 dropped"),
               "the summary:\n%s", mcpg_fakehost_log_text(fh));
    fprintf(stderr, "emit(): %.2f us per event on average, %.1f us at most (a preempted "
                    "thread included), while a reader drains\n",
            total / N * 1e6, worst * 1e6);
    free(r.data);
}

/* Nobody reads (a full 4 KiB pipe): the writer blocks, emit() does not. */
static void test_full(const char *on_full) {
    mcpg_fakehost_log_clear(fh);
    int rd = stdout_to_pipe(4096);
    char cfg[96];
    snprintf(cfg, sizeof cfg, "{\"buffer_bytes\":16384,\"on_full\":\"%s\"}", on_full);
    mcpg_instance *inst = load(cfg);
    int refuse = strcmp(on_full, "refuse") == 0, cont = 0, denied = 0;
    double t0 = mcpg_fakehost_now_s();
    for (uint64_t i = 1; i <= 400; i++) {
        mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", "{}", "1");
        int st = emit(inst, c, i, NULL);
        if (st == MCPG_DENY) {
            denied++;
            mcpg_call_outcome out = {.size = sizeof out};
            mcpg_fakehost_outcome(c, &out);
            MCPG_CHECK(out.is_error && out.http_status == 503 && out.retry_after_s == 1 &&
                           strcmp(out.error_message, "audit queue full") == 0,
                       "a refused call: 503 \"%s\"", out.error_message);
        }
        cont += st == MCPG_CONTINUE;
        mcpg_fakehost_call_free(fh, c);
    }
    double dt = mcpg_fakehost_now_s() - t0;
    MCPG_CHECK(dt < 2.0, "400 emits took %.2f s while stdout was blocked", dt);
    MCPG_CHECK(refuse ? denied > 0 && cont + denied == 400 : cont == 400,
               "on_full %s: %d continued, %d refused", on_full, cont, denied);
    /* let the writer go: read until the unload closes nothing (fd 1 stays
     * ours), so drain in a thread while the sink stops */
    reader r = {.fd = rd};
    pthread_t t;
    MCPG_REQUIRE(pthread_create(&t, NULL, read_all, &r) == 0, "reader");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    stdout_back(); /* the pipe's last write end: the reader sees EOF */
    pthread_join(t, NULL);
    close(rd);
    size_t lines = 0;
    for (size_t i = 0; i < r.len; i++) lines += r.data[i] == '\n';
    /* "stopped: N events written to stdout, M dropped (buffer full), ..." */
    unsigned long long written = 0, dropped = 0;
    const char *sum = strstr(mcpg_fakehost_log_text(fh), "stopped: ");
    MCPG_REQUIRE(sum && sscanf(sum, "stopped: %llu events written to stdout, %llu dropped",
                               &written, &dropped) == 2,
                 "the summary:\n%s", mcpg_fakehost_log_text(fh));
    MCPG_CHECK(lines == written, "%zu lines, %llu written", lines, written);
    if (refuse)
        MCPG_CHECK(lines == (size_t)cont && dropped == 0, "%zu lines for %d events taken", lines,
                   cont);
    else
        MCPG_CHECK(dropped > 0 && lines + dropped == 400, "%zu lines + %llu dropped", lines,
                   dropped);
    free(r.data);
}

/* stdout closed by its reader: lines are lost and said so, calls go on. */
static void test_closed(void) {
    mcpg_fakehost_log_clear(fh);
    int rd = stdout_to_pipe(0);
    close(rd);
    mcpg_instance *inst = load(NULL);
    for (uint64_t i = 1; i <= 50; i++) {
        mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", "{}", "1");
        MCPG_CHECK(emit(inst, c, i, NULL) == MCPG_CONTINUE, "emit %llu", (unsigned long long)i);
        mcpg_fakehost_call_free(fh, c);
    }
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    stdout_back();
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "writing to stdout failed"), "logged:\n%s",
               mcpg_fakehost_log_text(fh));
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "50 lost"), "every line counted:\n%s",
               mcpg_fakehost_log_text(fh));
}

static void test_config(void) {
    mcpg_instance *inst = NULL;
    MCPG_CHECK(mcpg_fakehost_load_file(fh, so_path, "out", "{\"on_full\":\"block\"}", &inst) ==
                   MCPG_ECONFIG,
               "on_full must be drop or refuse");
    MCPG_CHECK(strstr(mcpg_fakehost_report_text(fh), "on_full"), "report: %s",
               mcpg_fakehost_report_text(fh));
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: test_audit_stdout path/to/audit_stdout.so");
    so_path = argv[1];
    signal(SIGPIPE, SIG_IGN); /* as the gateway does */
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    test_lines();
    test_full("drop");
    test_full("refuse");
    test_closed();
    test_config();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("audit_stdout");
}
