/* The coordinator store alone: one coordinator module loaded in the SDK's
 * fake host (one loop, as one gateway worker), without the gateway. Seeds
 * KEYS keys of VALUE bytes (PREFIX_KEYS of them under one prefix), then runs
 * each op alone for SECONDS from 1 and from 64 tasks (a task makes its next
 * op when the last one answered), and prints p50 and ops/s per row:
 *
 *   op conc p50_us ops_per_s ok_percent
 *
 * get (a seeded key), get_missing, put (a seeded key, 600 s TTL), incr (a
 * counter per task), put_if_absent (a new key each time), delete (the keys
 * put_if_absent made), prefix (scan_prefix over the PREFIX_KEYS keys, from 1
 * and 16 tasks: p50 per pass and passes/s).
 *
 *   kv_bench MODULE.so 'CONFIG JSON' [SECONDS] [KEYS] [PREFIX_KEYS] [VALUE]
 */
#define _GNU_SOURCE
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_TASKS 64
#define MAX_SAMPLES (1u << 22)

static mcpg_fakehost *fh;
static const mcpg_coordinator_ops *ops;
static void *st;
static mcpg_worker *W;
static char *value;
static size_t value_len;
static long n_keys, n_prefix;

typedef enum { OP_GET, OP_MISSING, OP_PUT, OP_INCR, OP_PIA, OP_DEL, OP_PREFIX, OP_N } op_kind;
static const char *const op_names[OP_N] = {"get", "get_missing", "put", "incr",
                                           "put_if_absent", "delete", "prefix"};

typedef struct task {
    int id;
    uint64_t started;
    long seq;
} task;

typedef struct run {
    op_kind op;
    uint64_t until;
    long done, ok, in_flight;
    uint64_t *lat;
    size_t nlat;
    long pia_made; /* put_if_absent keys made so far, for delete */
    long del_next;
    task tasks[MAX_TASKS];
} run;

static run R;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* The seeded keys: kv/p/<i> for the first n_prefix, kv/k/<i> after. */
static int seeded_key(long i, char *k, size_t cap) {
    return i < n_prefix ? snprintf(k, cap, "kv/p/%ld", i) : snprintf(k, cap, "kv/k/%ld", i);
}

static void issue(task *t);

static void on_done(void *arg, int status, const mcpg_coord_value *v) {
    task *t = arg;
    (void)v;
    uint64_t now = now_ns();
    R.in_flight--;
    R.done++;
    R.ok += status == 0;
    if (R.nlat < MAX_SAMPLES) R.lat[R.nlat++] = now - t->started;
    if (now < R.until) issue(t);
}

static void on_each(void *arg, int status, const mcpg_coord_value *v) {
    (void)arg, (void)status, (void)v;
}

static void issue(task *t) {
    char k[64];
    int n = 0;
    int rc;
    t->started = now_ns();
    switch (R.op) {
    case OP_GET:
        n = seeded_key((long)(rnd() % (uint64_t)n_keys), k, sizeof k);
        rc = ops->get(st, W, k, (size_t)n, on_done, t);
        break;
    case OP_MISSING:
        n = snprintf(k, sizeof k, "kv/missing/%llu", (unsigned long long)rnd());
        rc = ops->get(st, W, k, (size_t)n, on_done, t);
        break;
    case OP_PUT:
        n = seeded_key((long)(rnd() % (uint64_t)n_keys), k, sizeof k);
        rc = ops->put(st, W, k, (size_t)n, value, value_len, 600000, on_done, t);
        break;
    case OP_INCR:
        n = snprintf(k, sizeof k, "kv/ctr/%d", t->id);
        rc = ops->incr(st, W, k, (size_t)n, 1, 0, on_done, t);
        break;
    case OP_PIA:
        n = snprintf(k, sizeof k, "kv/pia/%ld", R.pia_made++);
        rc = ops->put_if_absent(st, W, k, (size_t)n, value, value_len, 600000, on_done, t);
        break;
    case OP_DEL:
        n = snprintf(k, sizeof k, "kv/pia/%ld", R.del_next++);
        rc = ops->del(st, W, k, (size_t)n, on_done, t);
        break;
    default:
        rc = ops->scan_prefix(st, W, "kv/p/", 5, on_each, on_done, t);
        break;
    }
    if (rc == 0) R.in_flight++;
    else fprintf(stderr, "kv_bench: %s refused: %d\n", op_names[R.op], rc);
}

static int all_answered(void *arg) {
    (void)arg;
    return R.in_flight == 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void measure(op_kind op, int conc, double seconds) {
    R.op = op;
    R.done = R.ok = R.in_flight = 0;
    R.nlat = 0;
    uint64_t t0 = now_ns();
    R.until = t0 + (uint64_t)(seconds * 1e9);
    for (int i = 0; i < conc; i++) {
        R.tasks[i] = (task){.id = i};
        issue(&R.tasks[i]);
    }
    mcpg_fakehost_run_until(fh, all_answered, NULL, (uint64_t)(seconds * 1000) + 30000);
    double dt = (double)(now_ns() - t0) / 1e9;
    qsort(R.lat, R.nlat, sizeof *R.lat, cmp_u64);
    double p50 = R.nlat ? (double)R.lat[R.nlat / 2] / 1000.0 : 0;
    printf("%-13s %3d %9.1f %10.0f %5.1f\n", op_names[op], conc, p50, (double)R.done / dt,
           R.done ? 100.0 * (double)R.ok / (double)R.done : 0);
    fflush(stdout);
}

/* Seed with 64 puts in flight. */
static long seed_next;
static void seed_issue(task *t);
static void seed_done(void *arg, int status, const mcpg_coord_value *v) {
    (void)v;
    if (status) fprintf(stderr, "kv_bench: seed put: %d\n", status);
    R.in_flight--;
    if (seed_next < n_keys) seed_issue(arg);
}
static void seed_issue(task *t) {
    char k[64];
    int n = seeded_key(seed_next++, k, sizeof k);
    if (ops->put(st, W, k, (size_t)n, value, value_len, 0, seed_done, t) == 0) R.in_flight++;
}

static int ready_status;
static void on_probe(void *arg, int status, const mcpg_coord_value *v) {
    (void)v;
    ready_status = status;
    *(int *)arg = 1;
}
static int flag_set(void *arg) { return *(int *)arg; }

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODULE.so CONFIG [SECONDS] [KEYS] [PREFIX_KEYS] [VALUE]\n",
                argv[0]);
        return 2;
    }
    double seconds = argc > 3 ? atof(argv[3]) : 5;
    n_keys = argc > 4 ? atol(argv[4]) : 100000;
    n_prefix = argc > 5 ? atol(argv[5]) : 1000;
    value_len = argc > 6 ? (size_t)atol(argv[6]) : 256;
    value = malloc(value_len);
    memset(value, 'v', value_len);
    R.lat = malloc(MAX_SAMPLES * sizeof *R.lat);
    fh = mcpg_fakehost_new();
    mcpg_fakehost_set_quiet(fh, 1);
    W = mcpg_fakehost_worker(fh);
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    mcpg_module_entry_fn entry = dl ? (mcpg_module_entry_fn)dlsym(dl, MCPG_ENTRY_SYMBOL) : NULL;
    const mcpg_module *mod = entry ? entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR) : NULL;
    mcpg_instance *inst;
    if (!mod || mod->kind != MCPG_KIND_COORDINATOR ||
        mcpg_fakehost_load(fh, mod, "kv", argv[2], &inst) != 0) {
        fprintf(stderr, "kv_bench: load %s: %s%s%s\n", argv[1], dl ? "" : dlerror(),
                mcpg_fakehost_report_text(fh), mcpg_fakehost_log_text(fh));
        return 1;
    }
    st = mcpg_fakehost_state(inst);
    ops = mod->ops;
    for (int tries = 0; tries < 500; tries++) { /* a remote store: until it answers */
        int got = 0;
        if (ops->get(st, W, "kv/probe", 8, on_probe, &got) == 0)
            mcpg_fakehost_run_until(fh, flag_set, &got, 2000);
        if (got && ready_status != MCPG_EUNAVAIL) break;
        mcpg_fakehost_run_for(fh, 10);
    }
    uint64_t t0 = now_ns();
    for (int i = 0; i < MAX_TASKS && seed_next < n_keys; i++) seed_issue(&R.tasks[i]);
    mcpg_fakehost_run_until(fh, all_answered, NULL, 600000);
    fprintf(stderr, "kv_bench: seeded %ld keys of %zu bytes (%ld under kv/p/) in %.2f s\n",
            n_keys, value_len, n_prefix, (double)(now_ns() - t0) / 1e9);
    printf("%-13s %3s %9s %10s %5s\n", "op", "conc", "p50_us", "ops_per_s", "ok%");
    for (op_kind op = OP_GET; op < OP_PREFIX; op++) {
        measure(op, 1, seconds); /* delete: the 64 tasks go on with the keys left */
        measure(op, 64, seconds);
    }
    measure(OP_PREFIX, 1, seconds);
    measure(OP_PREFIX, 16, seconds);
    mcpg_fakehost_run_for(fh, 5);
    mcpg_fakehost_unload(fh, inst);
    dlclose(dl);
    mcpg_fakehost_free(fh);
    free(R.lat);
    free(value);
    return 0;
}
