/* The store alone: coordinator_nats's ops through the fake host against a
 * nats-server it starts (a temp folder, free ports, stopped by pid), the
 * layout of the reference's coordinator-store table: 100 000 keys of 256
 * bytes (1 000 of them under one prefix), then each op alone for SECONDS
 * from 1 task (p50 / p99 latency) and from 64 tasks (ops a second).
 * A tool that prints numbers, not a test.
 * Usage: bench_coordinator_nats coordinator_nats.so [seconds] [keys] */
#define _GNU_SOURCE
#include "nats_server.h"

#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mcpg_fakehost *fh;
static const mcpg_coordinator_ops *ops;
static mcpg_worker *W;
static void *st;
static long nkeys = 100000;
static double seconds = 3;
static char value[257];

typedef enum { B_GET, B_MISS, B_PUT, B_INCR, B_PIA, B_DEL, B_SCAN, B_COUNT } bench_op;
static const char *names[] = {"get", "get missing", "put (TTL)", "incr", "put_if_absent",
                              "delete", "prefix pass (1 000 keys)"};

typedef struct task {
    bench_op op;
    long seq, done, errors;
    double started, stop_at;
    double *lat;
    size_t nlat, cap;
    int busy;
} task;

static long unique_seq, pia_first = -1, del_next;

static void issue(task *t);

static void on_done(void *arg, int status, const mcpg_coord_value *v) {
    task *t = arg;
    (void)v;
    double dt = mcpg_fakehost_now_s() - t->started;
    int fine = status == 0 || (t->op == B_MISS && status == MCPG_ENOENT) ||
               (t->op == B_DEL && status == MCPG_ENOENT);
    t->errors += !fine;
    t->done++;
    if (t->lat && t->nlat < t->cap) t->lat[t->nlat++] = dt;
    t->busy = 0;
    if (mcpg_fakehost_now_s() < t->stop_at) issue(t);
}

static void on_each(void *arg, int status, const mcpg_coord_value *v) { (void)arg, (void)status, (void)v; }

static void issue(task *t) {
    char k[64];
    long i = unique_seq++;
    int n;
    int rc;
    t->busy = 1;
    t->started = mcpg_fakehost_now_s();
    switch (t->op) {
    case B_GET:
        n = snprintf(k, sizeof k, "bench.k.%ld", i % nkeys);
        rc = ops->get(st, W, k, (size_t)n, on_done, t);
        break;
    case B_MISS:
        n = snprintf(k, sizeof k, "bench.none.%ld", i);
        rc = ops->get(st, W, k, (size_t)n, on_done, t);
        break;
    case B_PUT:
        n = snprintf(k, sizeof k, "bench.k.%ld", i % nkeys);
        rc = ops->put(st, W, k, (size_t)n, value, 256, 600000, on_done, t);
        break;
    case B_INCR:
        n = snprintf(k, sizeof k, "bench.n.%ld", i % 64);
        rc = ops->incr(st, W, k, (size_t)n, 1, 0, on_done, t);
        break;
    case B_PIA:
        if (pia_first < 0) pia_first = i;
        n = snprintf(k, sizeof k, "bench.pia.%ld", i);
        rc = ops->put_if_absent(st, W, k, (size_t)n, value, 256, 600000, on_done, t);
        break;
    case B_DEL: /* the keys put_if_absent made, in turn */
        n = snprintf(k, sizeof k, "bench.pia.%ld", pia_first + del_next++);
        rc = ops->del(st, W, k, (size_t)n, on_done, t);
        break;
    default:
        rc = ops->scan_prefix(st, W, "bench.p.", 8, on_each, on_done, t);
        break;
    }
    if (rc) {
        t->busy = 0;
        t->errors++;
    }
}

static int all_idle(void *arg) {
    task *ts = arg;
    for (int i = 0; i < 64; i++)
        if (ts[i].busy) return 0;
    return 1;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run(bench_op op, int ntasks) {
    static task ts[64];
    static double lat[1 << 20];
    double t0 = mcpg_fakehost_now_s(), secs = seconds;
    for (int i = 0; i < ntasks; i++) {
        ts[i] = (task){.op = op, .stop_at = t0 + secs};
        if (ntasks == 1) ts[i].lat = lat, ts[i].cap = sizeof lat / sizeof *lat;
    }
    for (int i = ntasks; i < 64; i++) ts[i] = (task){0};
    for (int i = 0; i < ntasks; i++) issue(&ts[i]);
    mcpg_fakehost_run_until(fh, all_idle, ts, (int)(secs * 1000) + 30000);
    double dt = mcpg_fakehost_now_s() - t0;
    long done = 0, errors = 0;
    for (int i = 0; i < ntasks; i++) done += ts[i].done, errors += ts[i].errors;
    if (ntasks == 1 && ts[0].nlat) {
        qsort(lat, ts[0].nlat, sizeof *lat, cmp_d);
        printf("%-26s 1 task : p50 %8.0f us  p99 %8.0f us  (%ld ops, %ld errors)\n", names[op],
               lat[ts[0].nlat / 2] * 1e6, lat[ts[0].nlat * 99 / 100] * 1e6, done, errors);
    } else {
        printf("%-26s %d tasks: %8.0f ops/s  (%ld ops, %ld errors)\n", names[op], ntasks,
               (double)done / dt, done, errors);
    }
    fflush(stdout);
}

/* 100 000 keys (1 000 under bench.p.), 64 puts in flight. */
typedef struct seeder {
    long next, left, busy;
} seeder;
static void seed_next(void *arg, int status, const mcpg_coord_value *v);
static void seed_issue(seeder *s) {
    char k[64];
    long i = s->next++;
    int n = i < 1000 ? snprintf(k, sizeof k, "bench.p.%ld", i)
                     : snprintf(k, sizeof k, "bench.k.%ld", i - 1000);
    s->busy++;
    if (ops->put(st, W, k, (size_t)n, value, 256, 0, seed_next, s)) s->busy--;
}
static void seed_next(void *arg, int status, const mcpg_coord_value *v) {
    seeder *s = arg;
    (void)status, (void)v;
    s->busy--;
    if (s->next < s->left) seed_issue(s);
}
static int seeded(void *arg) {
    seeder *s = arg;
    return s->next >= s->left && s->busy == 0;
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc >= 2, "usage: %s coordinator_nats.so [seconds] [keys]", argv[0]);
    if (argc > 2) seconds = atof(argv[2]);
    if (argc > 3) nkeys = atol(argv[3]);
    MCPG_REQUIRE(nats_server_available() == 0, "no nats-server");
    memset(value, 'v', 256);
    char base[256];
    MCPG_REQUIRE(nats_tmpdir(base, sizeof base) == 0, "tmp");
    nats_node n;
    MCPG_REQUIRE(nats_node_start(&n, base, "bench", 0) == 0, "nats-server");
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    MCPG_REQUIRE(dl, "dlopen: %s", dlerror());
    const mcpg_module *mod =
        ((mcpg_module_entry_fn)dlsym(dl, MCPG_ENTRY_SYMBOL))(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    ops = mod->ops;
    fh = mcpg_fakehost_new();
    mcpg_fakehost_set_quiet(fh, 1);
    W = mcpg_fakehost_worker(fh);
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{\"url\":\"%s\",\"bucket\":\"bench\",\"op_timeout_ms\":30000}", n.url);
    mcpg_instance *inst;
    MCPG_REQUIRE(mcpg_fakehost_load_file(fh, argv[1], "bench", cfg, &inst) == 0, "load");
    st = mcpg_fakehost_state(inst);
    double t0 = mcpg_fakehost_now_s();
    static seeder sd[64];
    long per = (nkeys + 1000) / 64 + 1;
    for (int i = 0; i < 64; i++) {
        sd[i] = (seeder){.next = i * per, .left = (i + 1) * per};
        if (sd[i].left > nkeys + 1000) sd[i].left = nkeys + 1000;
        if (sd[i].next < sd[i].left) seed_issue(&sd[i]);
    }
    for (int i = 0; i < 64; i++) mcpg_fakehost_run_until(fh, seeded, &sd[i], 600000);
    printf("seeded %ld keys of 256 bytes in %.1f s (nats-server at %s)\n", nkeys + 1000,
           mcpg_fakehost_now_s() - t0, n.url);
    for (int op = 0; op < B_COUNT; op++) {
        run((bench_op)op, 1);
        run((bench_op)op, 64);
    }
    mcpg_fakehost_run_for(fh, 50);
    mcpg_fakehost_unload(fh, inst);
    mcpg_fakehost_free(fh);
    nats_node_stop(&n);
    nats_rmdir(base);
    return 0;
}
