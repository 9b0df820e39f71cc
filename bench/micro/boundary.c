/* bench/micro: what a call costs inside one process, beside the same work
 * called directly. No HTTP: the kernel library with the real modules, a
 * call at a time submitted on the worker's loop as a transport would.
 *
 *   boundary VARIANT CALLS MODULES_DIR
 *
 * VARIANT:
 *   direct  the echo answer built by a plain C function (what backend_mock's
 *           echo does: the result object into a buffer), no kernel at all
 *   inline  tools/call echo through the kernel to backend_mock.so, inline
 *           dispatch: routing, the (empty) stages, the dlopened module's op,
 *           the outcome read back, the call released
 *   pool    the same with the backend on the worker pool (the loop hands the
 *           call to a pool thread and takes the answer back)
 *   audit   inline plus audit_stdout (stdout to /dev/null): the event made,
 *           handed to the sink's writer thread, written
 *   policy  inline plus policy_rules with one rule (anonymous callers may
 *           use echo) in the policy stage: the module's check() as the
 *           kernel calls it, beside inline
 * and the parts alone, one operation at a time: the transport's request
 * parsers (st-*, lg-*: wire.c), redaction and the policy decision (redact*,
 * policy-decide: parts.c).
 *
 * Printed: allocations per call in the whole process (malloc, calloc
 * and realloc, counted by the functions below, which stand in for the C
 * library's) and nanoseconds per call. Instructions per call come from
 * valgrind --tool=callgrind run at two CALLS (the difference cancels the
 * set-up): bench/micro.sh does that. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "micro.h"
#include "probe.h"

/* ---- allocations, counted in every thread while the calls run (the
 * pool's and the audit writer's included) ---- */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static atomic_int counting;
static atomic_uint_fast64_t allocations;

static void count_one(void) {
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
}
void *malloc(size_t n) {
    count_one();
    return __libc_malloc(n);
}
void *calloc(size_t c, size_t n) {
    count_one();
    return __libc_calloc(c, n);
}
void *realloc(void *p, size_t n) {
    count_one();
    return __libc_realloc(p, n);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the direct variant: the echo answer, no boundary ---- */
static const char ARGS[] = "{\"message\":\"hello\"}";

static void echo_direct(mcpg_buf *out, const char *args, size_t n) {
    mcpg_json_span msg;
    out->len = 0;
    mcpg_buf_puts(out, "{\"content\":[{\"type\":\"text\",\"text\":\"Echo: ");
    if (mcpg_json_object_get(args, n, "message", &msg) == 1 && msg.type == MCPG_JSON_STRING)
        mcpg_buf_append(out, msg.p, msg.n); /* already JSON-escaped */
    mcpg_buf_puts(out, "\"}]}");
}

/* ---- the kernel variants ---- */
typedef struct bench {
    uint64_t calls, submitted, completed, failed;
    unsigned in_flight, window; /* calls kept in flight (pool: the queue's bound) */
    mcpg_call_desc desc;
    mcpg_post post;
    pthread_mutex_t lock;
    pthread_cond_t done_cv;
    bool done;
} bench;

static void submit_more(bench *b);

static void on_complete(void *ctx, mcpg_call *call) {
    bench *b = ctx;
    mcpg_call_outcome o = {.size = sizeof o};
    call_outcome(call, &o);
    if (o.is_error || !o.result_len) b->failed++;
    call_release(call);
    b->completed++;
    b->in_flight--;
    if (b->completed == b->calls) {
        atomic_store(&counting, 0);
        pthread_mutex_lock(&b->lock);
        b->done = true;
        pthread_cond_signal(&b->done_cv);
        pthread_mutex_unlock(&b->lock);
    }
}

/* Keep `window` calls in flight (inline calls answer inside call_submit:
 * the loop below then submits them all one after another). A completion
 * that ran inside call_submit is picked up by this same loop; one that ran
 * later (the pool) posts the next batch. */
static void submit_more(bench *b) {
    while (b->submitted < b->calls && b->in_flight < b->window) {
        mcpg_call *c;
        b->in_flight++;
        b->submitted++;
        if (call_submit(&kernel.workers[0], &b->desc, &c) != 0) {
            b->failed++;
            b->in_flight--;
            b->completed++;
        }
    }
}

static void on_post(void *arg) {
    bench *b = arg;
    atomic_store(&counting, 1);
    submit_more(b);
}

/* The pool answers on later loop turns: a check handle refills the window. */
static uv_check_t refill;
static bench *refill_bench;
static void on_refill(uv_check_t *h) {
    (void)h;
    if (refill_bench && !refill_bench->done) submit_more(refill_bench);
}
static void start_refill(void *arg) {
    refill_bench = arg;
    uv_check_init(&kernel.workers[0].loop, &refill);
    uv_check_start(&refill, on_refill);
}
static void stop_refill(void *arg) {
    (void)arg;
    uv_check_stop(&refill);
    uv_close((uv_handle_t *)&refill, NULL);
}

/* One JSON line: the figures of `calls` operations that took ns. */
static void print_line(const char *variant, uint64_t calls, uint64_t failed, uint64_t ns) {
    printf("{\"bench\":\"micro\",\"variant\":\"%s\",\"calls\":%llu,\"failed\":%llu,"
           "\"allocs_per_call\":%.3f,\"ns_per_call\":%.0f}\n",
           variant, (unsigned long long)calls, (unsigned long long)failed,
           (double)atomic_load(&allocations) / (double)calls, (double)ns / (double)calls);
}

/* The modules and pipeline of a kernel variant. */
static const char *manifest_for(const char *variant) {
    static char text[2048];
    int inline_dispatch = strcmp(variant, "pool") != 0;
    int audit = strcmp(variant, "audit") == 0, policy = strcmp(variant, "policy") == 0;
    snprintf(text, sizeof text,
             "{\"gateway\":{\"listen\":[\"127.0.0.1:1\"],\"log_level\":\"error\"},"
             "\"modules\":[{\"name\":\"mock\",\"module\":\"backend_mock\",\"inline_dispatch\":%s,"
             "\"config\":{\"tools\":[{\"name\":\"echo\"}]}}%s%s],"
             "\"pipeline\":{\"audit\":[%s],\"policy\":[%s]}}",
             inline_dispatch ? "true" : "false",
             audit ? ",{\"name\":\"out\",\"module\":\"audit_stdout\",\"config\":{}}" : "",
             policy ? ",{\"name\":\"rules\",\"module\":\"policy_rules\",\"config\":{\"rules\":"
                      "[{\"id\":\"public\",\"anonymous\":true,\"tools\":\"echo\"}]}}" : "",
             audit ? "\"out\"" : "", policy ? "\"rules\"" : "");
    return text;
}

static int run_kernel(const char *variant, uint64_t calls, const char *modules_dir) {
    char dir[] = "/tmp/mcpg-micro.XXXXXX";
    if (!mkdtemp(dir)) return 2;
    if (!kernel_up(dir, "micro.json", manifest_for(variant), modules_dir)) return 2;
    static const char id[] = "7", method[] = "tools/call", name[] = "echo";
    bench b = {.calls = calls, .window = strcmp(variant, "pool") == 0 ? 8 : 1};
    pthread_mutex_init(&b.lock, NULL);
    pthread_cond_init(&b.done_cv, NULL);
    b.desc = (mcpg_call_desc){.size = sizeof b.desc, .wire = MCPG_WIRE_STATELESS,
                              .method = method, .method_len = sizeof method - 1,
                              .name = name, .name_len = sizeof name - 1,
                              .args_json = ARGS, .args_len = sizeof ARGS - 1,
                              .id_json = id, .id_len = sizeof id - 1,
                              .transport_ctx = &b, .complete = on_complete};
    probe_on_loop(start_refill, &b);
    b.post = (mcpg_post){.fn = on_post, .arg = &b};
    uint64_t t0 = now_ns();
    worker_post(&kernel.workers[0], &b.post);
    pthread_mutex_lock(&b.lock);
    while (!b.done) pthread_cond_wait(&b.done_cv, &b.lock);
    pthread_mutex_unlock(&b.lock);
    uint64_t t1 = now_ns();
    probe_on_loop(stop_refill, NULL);
    kernel_down();
    print_line(variant, calls, b.failed, t1 - t0);
    return b.failed ? 1 : 0;
}

static int run_direct(uint64_t calls) {
    mcpg_buf out = {0};
    echo_direct(&out, ARGS, sizeof ARGS - 1); /* the buffer's first growth, not per call */
    atomic_store(&counting, 1);
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < calls; i++) echo_direct(&out, ARGS, sizeof ARGS - 1);
    uint64_t t1 = now_ns();
    atomic_store(&counting, 0);
    int ok = out.len > 0 && memmem(out.data, out.len, "Echo: hello", 11) != NULL;
    print_line("direct", calls, !ok, t1 - t0);
    mcpg_buf_free(&out);
    return ok ? 0 : 1;
}

/* A part alone: set up (not counted), the operation `calls` times, the
 * last answer checked (not counted). */
static int run_part(const micro_variant *v, uint64_t calls) {
    if (v->setup && v->setup(v->ctx)) {
        fprintf(stderr, "%s: set-up failed\n", v->name);
        return 2;
    }
    uint64_t failed = 0;
    atomic_store(&counting, 1);
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < calls; i++) failed += v->op(v->ctx) != 0;
    uint64_t t1 = now_ns();
    atomic_store(&counting, 0);
    if (v->check && v->check(v->ctx)) failed++;
    print_line(v->name, calls, failed, t1 - t0);
    if (v->teardown) v->teardown(v->ctx);
    return failed ? 1 : 0;
}

static const micro_variant *part_named(const char *name) {
    const micro_variant *const tables[] = {MICRO_WIRE, MICRO_PARTS};
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const micro_variant *v = tables[t]; v->name; v++)
            if (strcmp(v->name, name) == 0) return v;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s VARIANT CALLS MODULES_DIR (bench/micro.sh lists them)\n", argv[0]);
        return 2;
    }
    uint64_t calls = strtoull(argv[2], NULL, 10);
    if (!calls) return 2;
    const micro_variant *part = part_named(argv[1]);
    if (part) return run_part(part, calls);
    if (strcmp(argv[1], "direct") == 0) return run_direct(calls);
    const char *const kernel_variants[] = {"inline", "pool", "audit", "policy"};
    for (size_t i = 0; i < sizeof kernel_variants / sizeof *kernel_variants; i++)
        if (strcmp(argv[1], kernel_variants[i]) == 0) return run_kernel(argv[1], calls, argv[3]);
    fprintf(stderr, "%s: unknown variant %s\n", argv[0], argv[1]);
    return 2;
}
