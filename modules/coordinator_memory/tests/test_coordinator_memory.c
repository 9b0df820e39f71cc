/* coordinator_memory through the SDK's fake host: the built .so, its ops
 * called on the worker's loop as the kernel's modules call them.
 * Usage: test_coordinator_memory path/to/coordinator_memory.so
 *
 * Every answer must come on a later turn of the loop, never inside the op:
 * each check below looks at the callback's record right after the op
 * returned, then turns the loop. Prints ops/s for get, put and incr; never
 * fails on them. */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static mcpg_fakehost *fh;
static const mcpg_module *mod;
static const mcpg_coordinator_ops *ops;
static mcpg_worker *W;

/* ---- one answer ---------------------------------------------------------- */

typedef struct answer {
    int calls;
    int status;
    char data[256];
    size_t len;
    int has_data;
    uint64_t revision;
    int64_t number;
    /* scan_prefix */
    int each;
    char keys[512];
} answer;

static void on_answer(void *arg, int status, const mcpg_coord_value *v) {
    answer *a = arg;
    a->calls++;
    a->status = status;
    a->has_data = v && v->data;
    a->len = v ? v->len : 0;
    if (v && v->data) snprintf(a->data, sizeof a->data, "%.*s", (int)v->len, v->data);
    a->revision = v ? v->revision : 0;
    a->number = v ? v->number : 0;
}

static void on_each(void *arg, int status, const mcpg_coord_value *v) {
    answer *a = arg;
    a->each++;
    size_t n = strlen(a->keys);
    snprintf(a->keys + n, sizeof a->keys - n, "%s%.*s@%llu", n ? "," : "", (int)v->len, v->data,
             (unsigned long long)(v->revision > 0));
    (void)status;
}

static int answered(void *arg) { return ((answer *)arg)->calls > 0; }

/* The op returned rc; its callback must not have run yet; then turn the loop
 * until it does, once. */
static answer *settle(int rc, answer *a, const char *what) {
    MCPG_CHECK(rc == 0, "%s: op returned %d", what, rc);
    MCPG_CHECK(a->calls == 0, "%s: callback ran inside the op", what);
    if (rc) return a;
    MCPG_CHECK(mcpg_fakehost_run_until(fh, answered, a, 2000) == 0, "%s: no answer", what);
    mcpg_fakehost_run_for(fh, 1);
    MCPG_CHECK(a->calls == 1, "%s: %d answers", what, a->calls);
    return a;
}

#define K(s) s, strlen(s)

static answer get(void *st, const char *key) {
    answer a = {0};
    settle(ops->get(st, W, K(key), on_answer, &a), &a, "get");
    return a;
}

static answer put(void *st, const char *key, const char *val, uint64_t ttl) {
    answer a = {0};
    settle(ops->put(st, W, K(key), K(val), ttl, on_answer, &a), &a, "put");
    return a;
}

static answer incr(void *st, const char *key, int64_t d, uint64_t ttl) {
    answer a = {0};
    settle(ops->incr(st, W, K(key), d, ttl, on_answer, &a), &a, "incr");
    return a;
}

static answer pia(void *st, const char *key, const char *val, uint64_t ttl) {
    answer a = {0};
    settle(ops->put_if_absent(st, W, K(key), K(val), ttl, on_answer, &a), &a, "put_if_absent");
    return a;
}

static answer cas(void *st, const char *key, uint64_t rev, const char *val) {
    answer a = {0};
    settle(ops->compare_and_set(st, W, K(key), rev, K(val), 0, on_answer, &a), &a, "cas");
    return a;
}

static answer del(void *st, const char *key) {
    answer a = {0};
    settle(ops->del(st, W, K(key), on_answer, &a), &a, "del");
    return a;
}

/* ---- loading ------------------------------------------------------------- */

static mcpg_instance *load(const char *config) {
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load(fh, mod, "coord", config, &inst);
    MCPG_REQUIRE(rc == 0, "load failed: %d\n%s%s", rc, mcpg_fakehost_report_text(fh),
                 mcpg_fakehost_log_text(fh));
    return inst;
}

static void unload(mcpg_instance *inst) {
    mcpg_fakehost_run_for(fh, 2); /* answers still queued run before the instance goes */
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

/* ---- tests ----------------------------------------------------------------- */

static void test_kv(void) {
    mcpg_instance *inst = load(NULL);
    void *st = mcpg_fakehost_state(inst);
    answer a = get(st, "k");
    MCPG_CHECK(a.status == MCPG_ENOENT, "get absent: %d", a.status);
    a = put(st, "k", "v1", 0);
    MCPG_CHECK(a.status == 0 && a.revision > 0, "put: %d", a.status);
    uint64_t r1 = a.revision;
    a = get(st, "k");
    MCPG_CHECK(a.status == 0 && strcmp(a.data, "v1") == 0 && a.len == 2 && a.revision == r1,
               "get: %d %s", a.status, a.data);
    a = pia(st, "k", "x", 0);
    MCPG_CHECK(a.status == MCPG_EEXIST && strcmp(a.data, "v1") == 0 && a.revision == r1,
               "put_if_absent present: %d", a.status);
    a = pia(st, "k2", "x", 0);
    MCPG_CHECK(a.status == 0 && a.revision > r1, "put_if_absent absent: %d", a.status);
    a = cas(st, "k", r1 + 1000, "v2");
    MCPG_CHECK(a.status == MCPG_ECONFLICT && a.revision == r1 && strcmp(a.data, "v1") == 0,
               "cas conflict: %d", a.status);
    a = cas(st, "k", r1, "v2");
    MCPG_CHECK(a.status == 0 && a.revision > r1, "cas: %d", a.status);
    MCPG_CHECK(strcmp(get(st, "k").data, "v2") == 0, "cas wrote");
    a = cas(st, "k", r1, "v3");
    MCPG_CHECK(a.status == MCPG_ECONFLICT, "second cas with the old revision: %d", a.status);
    a = incr(st, "n", 3, 0);
    MCPG_CHECK(a.status == 0 && a.number == 3 && strcmp(a.data, "3") == 0, "incr: %d %lld",
               a.status, (long long)a.number);
    a = incr(st, "n", -10, 0);
    MCPG_CHECK(a.status == 0 && a.number == -7, "incr: %lld", (long long)a.number);
    MCPG_CHECK(get(st, "n").number == -7, "get counter");
    MCPG_CHECK(incr(st, "k", 1, 0).status == MCPG_EINVAL, "incr on text");
    a = del(st, "k");
    MCPG_CHECK(a.status == 0 && a.revision > r1, "del: %d", a.status);
    MCPG_CHECK(del(st, "k").status == MCPG_ENOENT, "del absent");
    MCPG_CHECK(get(st, "k").status == MCPG_ENOENT, "deleted");

    /* a value bigger than an operation record's own buffer */
    static char big[4096];
    memset(big, 'b', sizeof big - 1);
    MCPG_CHECK(put(st, "big", big, 0).status == 0, "put big");
    answer *g = calloc(1, sizeof *g);
    settle(ops->get(st, W, K("big"), on_answer, g), g, "get big");
    MCPG_CHECK(g->status == 0 && g->len == sizeof big - 1, "big: %zu", g->len);
    free(g);

    /* scan_prefix: each key once, sorted, then the final answer */
    put(st, "s/b", "1", 0);
    put(st, "s/a", "1", 0);
    put(st, "s/c", "1", 60000); /* a TTL not yet passed: listed (expiry is tested elsewhere) */
    put(st, "t/a", "1", 0);
    a = (answer){0};
    settle(ops->scan_prefix(st, W, K("s/"), on_each, on_answer, &a), &a, "scan");
    MCPG_CHECK(a.status == 0 && a.each == 3 && strcmp(a.keys, "s/a@1,s/b@1,s/c@1") == 0 &&
                   a.number == 3, "scan: %d %d %s", a.status, a.each, a.keys);

    /* arguments refused at once: no callback ever */
    a = (answer){0};
    MCPG_CHECK(ops->get(st, W, "", 0, on_answer, &a) == MCPG_EINVAL, "empty key");
    char longkey[2000];
    memset(longkey, 'k', sizeof longkey);
    MCPG_CHECK(ops->put(st, W, longkey, sizeof longkey, "v", 1, 0, on_answer, &a) == MCPG_ERANGE,
               "key over max_key_bytes");
    MCPG_CHECK(ops->publish(st, W, "a.*", "x", 1, on_answer, &a) == MCPG_EINVAL,
               "publish to a wildcard");
    MCPG_CHECK(ops->publish(st, W, "a..b", "x", 1, on_answer, &a) == MCPG_EINVAL, "bad subject");
    mcpg_fakehost_run_for(fh, 5);
    MCPG_CHECK(a.calls == 0, "a refused op answered");
    unload(inst);
}

/* An op from a thread that is not w's loop is refused (MCPG_ESTATE): the
 * answer could not be queued in order otherwise. */
typedef struct off_loop {
    void *st;
    int rc;
    answer a;
} off_loop;

static void *off_loop_thread(void *arg) {
    off_loop *o = arg;
    o->rc = ops->incr(o->st, W, K("x"), 1, 0, on_answer, &o->a);
    return NULL;
}

static void test_off_loop(void) {
    mcpg_instance *inst = load(NULL);
    off_loop o = {.st = mcpg_fakehost_state(inst)};
    pthread_t t;
    pthread_create(&t, NULL, off_loop_thread, &o);
    pthread_join(t, NULL);
    mcpg_fakehost_run_for(fh, 5);
    MCPG_CHECK(o.rc == MCPG_ESTATE && o.a.calls == 0, "off the loop: %d", o.rc);
    MCPG_CHECK(get(o.st, "x").status == MCPG_ENOENT, "and not applied");
    unload(inst);
}

static void test_ttl(void) {
    /* a sweep every 10 ms: the stop line says how many went */
    mcpg_instance *inst = load("{\"sweep_interval_ms\":10}");
    void *st = mcpg_fakehost_state(inst);
    MCPG_CHECK(put(st, "t", "v", 40).status == 0, "put ttl");
    MCPG_CHECK(get(st, "t").status == 0, "alive");
    MCPG_CHECK(incr(st, "w", 1, 40).number == 1, "window");
    char k[16];
    for (int i = 0; i < 50; i++) {
        snprintf(k, sizeof k, "e%d", i);
        put(st, k, "x", 20);
    }
    put(st, "keep", "x", 0);
    mcpg_fakehost_run_for(fh, 60);
    MCPG_CHECK(get(st, "t").status == MCPG_ENOENT, "expired");
    MCPG_CHECK(incr(st, "w", 1, 40).number == 1, "a new window counts from 0");
    MCPG_CHECK(pia(st, "t", "again", 0).status == 0, "an expired key is absent to put_if_absent");
    mcpg_fakehost_log_clear(fh);
    unload(inst);
    /* 50 + t + w (the first window): swept by the timers, not by reads */
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "stopped: 3 keys") &&
                   mcpg_fakehost_log_contains(fh, "52 expired keys swept"),
               "stop line:\n%s", mcpg_fakehost_log_text(fh));

    /* with no sweep in sight, expired keys still read as absent */
    inst = load("{\"sweep_interval_ms\":3600000}");
    st = mcpg_fakehost_state(inst);
    put(st, "t", "v", 10);
    mcpg_fakehost_run_for(fh, 20);
    MCPG_CHECK(get(st, "t").status == MCPG_ENOENT, "exact without a sweep");
    unload(inst);
}

static void test_bounds(void) {
    mcpg_instance *inst = load("{\"max_keys\":3,\"max_bytes\":1024,\"max_value_bytes\":600}");
    void *st = mcpg_fakehost_state(inst);
    put(st, "a", "1", 0);
    put(st, "b", "1", 0);
    put(st, "c", "1", 0);
    MCPG_CHECK(put(st, "d", "1", 0).status == MCPG_EAGAIN, "put: full");
    MCPG_CHECK(incr(st, "d", 1, 0).status == MCPG_EAGAIN, "incr: full");
    MCPG_CHECK(pia(st, "d", "1", 0).status == MCPG_EAGAIN, "put_if_absent: full");
    MCPG_CHECK(put(st, "a", "2", 0).status == 0, "an existing key may change");
    MCPG_CHECK(del(st, "c").status == 0 && put(st, "d", "1", 0).status == 0, "room again");
    static char v[700];
    memset(v, 'v', 599);
    MCPG_CHECK(put(st, "a", v, 0).status == 0, "599 bytes");
    MCPG_CHECK(put(st, "b", v, 0).status == MCPG_EAGAIN, "past max_bytes");
    answer a = {0};
    memset(v, 'v', 650);
    MCPG_CHECK(ops->put(st, W, K("b"), K(v), 0, on_answer, &a) == MCPG_ERANGE,
               "past max_value_bytes: refused at once");
    unload(inst);
}

/* Two loops' put_if_absent on one key, interleaved on the loop: one wins. */
static void test_put_if_absent_race(void) {
    mcpg_instance *inst = load(NULL);
    void *st = mcpg_fakehost_state(inst);
    answer a[8] = {{0}};
    for (int i = 0; i < 8; i++)
        MCPG_CHECK(ops->put_if_absent(st, W, K("lease"), K("holder"), 1000, on_answer, &a[i]) == 0,
                   "pia %d", i);
    mcpg_fakehost_run_until(fh, answered, &a[7], 2000);
    int won = 0, lost = 0;
    for (int i = 0; i < 8; i++) {
        won += a[i].calls == 1 && a[i].status == 0;
        lost += a[i].calls == 1 && a[i].status == MCPG_EEXIST;
    }
    MCPG_CHECK(won == 1 && lost == 7 && a[0].status == 0, "won %d lost %d", won, lost);
    unload(inst);
}

/* ---- pub/sub ------------------------------------------------------------------ */

typedef struct inbox {
    int n;
    char last[64];
    char seq[2048];
    void *st;
    mcpg_coord_sub *self_sub; /* unsubscribe from inside the callback after `stop_at` */
    int stop_at;
} inbox;

static void on_msg(void *arg, const char *subject, const char *data, size_t len) {
    inbox *b = arg;
    b->n++;
    snprintf(b->last, sizeof b->last, "%s=%.*s", subject, (int)len, data);
    size_t n = strlen(b->seq);
    snprintf(b->seq + n, sizeof b->seq - n, "%.*s", (int)len, data);
    if (b->self_sub && b->n == b->stop_at) {
        ops->unsubscribe(b->st, b->self_sub);
        b->self_sub = NULL;
    }
}

static void publish(void *st, const char *subject, const char *data, answer *a) {
    MCPG_CHECK(ops->publish(st, W, subject, K(data), on_answer, a) == 0, "publish %s", subject);
}

static void test_pubsub(void) {
    mcpg_instance *inst = load(NULL);
    void *st = mcpg_fakehost_state(inst);
    inbox exact = {0}, wild = {0}, star = {0}, inside = {0}, other = {0};
    mcpg_coord_sub *se, *sw, *ss, *si, *so;
    MCPG_REQUIRE(ops->subscribe(st, W, "sess.1", on_msg, &exact, &se) == 0, "sub");
    MCPG_REQUIRE(ops->subscribe(st, W, "sess.>", on_msg, &wild, &sw) == 0, "sub >");
    MCPG_REQUIRE(ops->subscribe(st, W, "*.1", on_msg, &star, &ss) == 0, "sub *");
    MCPG_REQUIRE(ops->subscribe(st, W, "sess.1", on_msg, &inside, &si) == 0, "sub 2");
    MCPG_REQUIRE(ops->subscribe(st, W, "other", on_msg, &other, &so) == 0, "sub other");
    MCPG_CHECK(ops->subscribe(st, W, "a..b", on_msg, &other, &so) == MCPG_EINVAL, "bad subject");
    inside.st = st;
    inside.self_sub = si;
    inside.stop_at = 3;
    answer p[10];
    char d[4];
    for (int i = 0; i < 10; i++) {
        p[i] = (answer){0};
        snprintf(d, sizeof d, "%d", i);
        publish(st, "sess.1", d, &p[i]);
    }
    MCPG_CHECK(exact.n == 0 && p[0].calls == 0, "nothing inside the ops");
    mcpg_fakehost_run_until(fh, answered, &p[9], 2000);
    mcpg_fakehost_run_for(fh, 5);
    MCPG_CHECK(strcmp(exact.seq, "0123456789") == 0, "exact, in order: %s", exact.seq);
    MCPG_CHECK(strcmp(wild.seq, "0123456789") == 0, "sess.>: %s", wild.seq);
    MCPG_CHECK(strcmp(star.seq, "0123456789") == 0, "*.1: %s", star.seq);
    MCPG_CHECK(strcmp(inside.seq, "012") == 0, "unsubscribed in its 3rd callback: %s", inside.seq);
    MCPG_CHECK(other.n == 0, "other subject");
    MCPG_CHECK(strcmp(exact.last, "sess.1=9") == 0, "subject given: %s", exact.last);
    MCPG_CHECK(p[0].status == 0 && p[0].number == 4, "publish reached %lld",
               (long long)p[0].number);
    MCPG_CHECK(p[9].number == 4, "published before any delivery, so before the unsubscribe: "
               "%lld", (long long)p[9].number);

    /* unsubscribe with messages queued: none of them is delivered */
    exact.n = 0;
    exact.seq[0] = '\0';
    answer q = {0};
    publish(st, "sess.1", "late", &q);
    ops->unsubscribe(st, se);
    mcpg_fakehost_run_until(fh, answered, &q, 2000);
    mcpg_fakehost_run_for(fh, 5);
    MCPG_CHECK(exact.n == 0, "delivered after unsubscribe: %s", exact.seq);
    MCPG_CHECK(q.number == 3, "the late one reached %lld", (long long)q.number);

    ops->unsubscribe(st, sw);
    ops->unsubscribe(st, ss);
    ops->unsubscribe(st, so);
    answer none = {0};
    settle(ops->publish(st, W, "sess.1", "x", 1, on_answer, &none), &none, "publish to nobody");
    MCPG_CHECK(none.status == 0 && none.number == 0, "reached nobody: %lld",
               (long long)none.number);
    unload(inst);
}

/* Backlog bound through the module: 2 per subscription, the rest dropped and
 * logged. */
static void test_backlog(void) {
    mcpg_instance *inst = load("{\"subscriber_backlog\":2}");
    void *st = mcpg_fakehost_state(inst);
    inbox b = {0};
    mcpg_coord_sub *s;
    MCPG_REQUIRE(ops->subscribe(st, W, "q", on_msg, &b, &s) == 0, "sub");
    answer p[5];
    for (int i = 0; i < 5; i++) {
        p[i] = (answer){0};
        char d[2] = {(char)('a' + i), 0};
        publish(st, "q", d, &p[i]);
    }
    mcpg_fakehost_run_until(fh, answered, &p[4], 2000);
    mcpg_fakehost_run_for(fh, 5);
    MCPG_CHECK(strcmp(b.seq, "ab") == 0, "kept the first two: %s", b.seq);
    MCPG_CHECK(p[1].number == 1 && p[2].number == 0, "reached: %lld %lld",
               (long long)p[1].number, (long long)p[2].number);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "backlog full"), "logged");
    ops->unsubscribe(st, s);
    unload(inst);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "3 messages dropped"), "counted at stop");
}

/* ---- a micro-benchmark: printed, never asserted ------------------------------------ */

typedef struct bench {
    void *st;
    int which; /* 0 get, 1 put, 2 incr */
    long left, done;
} bench;

static void bench_next(void *arg, int status, const mcpg_coord_value *v);

static void bench_issue(bench *b) {
    char k[16];
    int n = snprintf(k, sizeof k, "b%ld", b->left % 1024);
    b->left--;
    int rc = b->which == 0 ? ops->get(b->st, W, k, (size_t)n, bench_next, b)
           : b->which == 1 ? ops->put(b->st, W, k, (size_t)n, "value", 5, 0, bench_next, b)
                           : ops->incr(b->st, W, "counter", 7, 1, 0, bench_next, b);
    if (rc) b->left = 0;
}

static void bench_next(void *arg, int status, const mcpg_coord_value *v) {
    bench *b = arg;
    (void)status;
    (void)v;
    b->done++;
    if (b->left > 0) bench_issue(b);
}

static int bench_done(void *arg) { return ((bench *)arg)->left <= 0; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_bench(void) {
    mcpg_instance *inst = load(NULL);
    void *st = mcpg_fakehost_state(inst);
    static const char *names[] = {"get", "put", "incr"};
    const int order[] = {1, 0, 2}; /* put first, so get finds keys */
    for (int j = 0; j < 3; j++) {
        /* 64 ops in flight, each answer issuing the next */
        bench b[64];
        long per = 3000;
        double t0 = now_s();
        for (int i = 0; i < 64; i++) {
            b[i] = (bench){.st = st, .which = order[j], .left = per};
            bench_issue(&b[i]);
        }
        for (int i = 0; i < 64; i++) mcpg_fakehost_run_until(fh, bench_done, &b[i], 10000);
        mcpg_fakehost_run_for(fh, 1);
        double dt = now_s() - t0;
        long total = 0;
        for (int i = 0; i < 64; i++) total += b[i].done;
        printf("bench: %-4s %8.0f ops/s on the loop (%ld ops, 64 in flight)\n",
               names[order[j]], (double)total / dt, total);
    }
    unload(inst);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: %s coordinator_memory.so", argv[0]);
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    MCPG_REQUIRE(dl, "dlopen: %s", dlerror());
    mcpg_module_entry_fn entry = (mcpg_module_entry_fn)dlsym(dl, MCPG_ENTRY_SYMBOL);
    MCPG_REQUIRE(entry, "no entry symbol");
    mod = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    MCPG_REQUIRE(mod && mod->kind == MCPG_KIND_COORDINATOR, "descriptor");
    ops = mod->ops;
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fakehost");
    mcpg_fakehost_set_quiet(fh, 1);
    W = mcpg_fakehost_worker(fh);
    MCPG_CHECK(mcpg_fakehost_check(fh, mod, "{\"max_keys\":0}") == MCPG_ECONFIG, "config bounds");
    test_kv();
    test_off_loop();
    test_ttl();
    test_bounds();
    test_put_if_absent_race();
    test_pubsub();
    test_backlog();
    test_bench();
    int left = mcpg_fakehost_free(fh);
    MCPG_CHECK(left == 0, "fake host: %d problem(s)", left);
    dlclose(dl);
    return MCPG_CHECK_EXIT("test_coordinator_memory");
}
