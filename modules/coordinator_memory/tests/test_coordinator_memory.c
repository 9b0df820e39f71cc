/* coordinator_memory through the SDK's fake host: the built .so, its ops
 * called on the worker's loop as the kernel's modules call them: the shared
 * contract (coord_contract.c), then what only this store has (its sweep,
 * bounds, backlog, how many subscriptions a publish reached).
 * Usage: test_coordinator_memory path/to/coordinator_memory.so
 *
 * Every answer must come on a later turn of the loop, never inside the op:
 * each check below looks at the callback's record right after the op
 * returned, then turns the loop. Prints ops/s for get, put and incr; never
 * fails on them. */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include "coord_contract.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static mcpg_fakehost *fh;
static const mcpg_module *mod;
static const mcpg_coordinator_ops *ops;
static mcpg_worker *W;

/* ---- the contract's helpers, on the instance under test ------------------ */

static contract C;

static int answered(void *arg) { return ((answer *)arg)->calls > 0; }
#define on_answer contract_on_answer
#define K(s) s, strlen(s)

static answer get(void *st, const char *key) {
    C.st = st;
    return contract_get(&C, key);
}

static answer put(void *st, const char *key, const char *val, uint64_t ttl) {
    C.st = st;
    return contract_put(&C, key, val, ttl);
}

static answer incr(void *st, const char *key, int64_t d, uint64_t ttl) {
    C.st = st;
    return contract_incr(&C, key, d, ttl);
}

static answer pia(void *st, const char *key, const char *val, uint64_t ttl) {
    C.st = st;
    return contract_pia(&C, key, val, ttl);
}

static answer del(void *st, const char *key) {
    C.st = st;
    return contract_del(&C, key);
}

static answer *settle(int rc, answer *a, const char *what) { return contract_settle(&C, rc, a, what); }

/* ---- loading ------------------------------------------------------------- */

static mcpg_instance *load(const char *config) { return contract_load(fh, mod, config); }

static void unload(mcpg_instance *inst) {
    mcpg_fakehost_run_for(fh, 2); /* answers still queued run before the instance goes */
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

/* ---- tests ----------------------------------------------------------------- */

/* The shared contract (coord_contract.c), on a fresh instance. */
static void test_contract(void) {
    mcpg_instance *inst = load(NULL);
    C.st = mcpg_fakehost_state(inst);
    contract_all(&C);
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

/* ---- pub/sub ------------------------------------------------------------------ */

static void publish(void *st, const char *subject, const char *data, answer *a) {
    MCPG_CHECK(ops->publish(st, W, subject, K(data), on_answer, a) == 0, "publish %s", subject);
}

/* What only this store says: how many subscriptions a publish reached (the
 * contract checks delivery), counted when it was queued; and messages
 * queued when an unsubscribe comes on the subscriber's loop are never
 * delivered. */
static void test_pubsub(void) {
    mcpg_instance *inst = load(NULL);
    void *st = mcpg_fakehost_state(inst);
    contract_inbox exact = {0}, wild = {0}, star = {0};
    mcpg_coord_sub *se, *sw, *ss;
    MCPG_REQUIRE(ops->subscribe(st, W, "sess.1", contract_on_msg, &exact, &se) == 0, "sub");
    MCPG_REQUIRE(ops->subscribe(st, W, "sess.>", contract_on_msg, &wild, &sw) == 0, "sub >");
    MCPG_REQUIRE(ops->subscribe(st, W, "*.1", contract_on_msg, &star, &ss) == 0, "sub *");
    answer p = {0};
    publish(st, "sess.1", "0", &p);
    mcpg_fakehost_run_until(fh, answered, &p, 2000);
    MCPG_CHECK(p.status == 0 && p.number == 3, "publish reached %lld", (long long)p.number);

    answer q = {0};
    publish(st, "sess.1", "late", &q);
    ops->unsubscribe(st, se);
    mcpg_fakehost_run_until(fh, answered, &q, 2000);
    mcpg_fakehost_run_for(fh, 5);
    MCPG_CHECK(strcmp(exact.seq, "0") == 0, "delivered after unsubscribe: %s", exact.seq);
    MCPG_CHECK(q.number == 3, "the late one reached %lld", (long long)q.number);
    ops->unsubscribe(st, sw);
    ops->unsubscribe(st, ss);
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
    contract_inbox b = {0};
    mcpg_coord_sub *s;
    MCPG_REQUIRE(ops->subscribe(st, W, "q", contract_on_msg, &b, &s) == 0, "sub");
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

/* ---- the journal (config "path") ---------------------------------------------------- */

static char jdir[64];
static char jpath[128];
static char jcfg[256];

static off_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static const char *jconfig(const char *extra) {
    snprintf(jcfg, sizeof jcfg, "{\"path\":\"%s\"%s%s}", jpath, extra ? "," : "",
             extra ? extra : "");
    return jcfg;
}

/* The shared contract on a file-backed store: every answer still on a later
 * turn, in the loop's order, now after the disk. */
static void test_journal_contract(void) {
    unlink(jpath);
    mcpg_instance *inst = load(jconfig(NULL));
    C.st = mcpg_fakehost_state(inst);
    contract_all(&C);
    unload(inst);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "syncs"), "the stop line counts syncs:\n%s",
               mcpg_fakehost_log_text(fh));
    unlink(jpath);
}

/* Every kind of change survives an unload and a load on the same path:
 * values, revisions (and the counter: a new write goes above every old one),
 * expiries (a key past its TTL at replay is absent), deletes. */
static void test_journal_replay(void) {
    unlink(jpath);
    mcpg_instance *inst = load(jconfig(NULL));
    void *st = mcpg_fakehost_state(inst);
    answer a = put(st, "k", "v1", 0);
    uint64_t r1 = a.revision;
    MCPG_CHECK(a.status == 0, "put");
    MCPG_CHECK(put(st, "k", "v2", 0).status == 0, "put again");
    MCPG_CHECK(incr(st, "n", 5, 0).number == 5 && incr(st, "n", 2, 0).number == 7, "incr");
    MCPG_CHECK(pia(st, "once", "x", 0).status == 0, "put_if_absent");
    MCPG_CHECK(put(st, "short", "s", 30).status == 0, "put ttl 30 ms");
    MCPG_CHECK(put(st, "long", "l", 3600000).status == 0, "put ttl 1 h");
    MCPG_CHECK(put(st, "gone", "g", 0).status == 0 && del(st, "gone").status == 0, "del");
    answer cas = {0};
    settle(ops->compare_and_set(st, W, K("k"), get(st, "k").revision, K("v3"), 0, on_answer,
                                &cas),
           &cas, "cas");
    MCPG_CHECK(cas.status == 0, "cas: %d", cas.status);
    answer rt = {0};
    settle(ops->rate_take(st, W, K("rate"), 1000000, 1000000000, 5000000000, on_answer, &rt), &rt,
           "rate_take");
    MCPG_CHECK(rt.status == 0 && rt.number == 1001000000, "rate_take: %d %lld", rt.status,
               (long long)rt.number);
    uint64_t last = get(st, "rate").revision;
    unload(inst);
    mcpg_fakehost_run_for(fh, 40); /* "short" expires meanwhile */

    inst = load(jconfig(NULL));
    st = mcpg_fakehost_state(inst);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "replayed"), "replay logged");
    a = get(st, "k");
    MCPG_CHECK(a.status == 0 && strcmp(a.data, "v3") == 0 && a.revision == cas.revision,
               "k after replay: %d %s @%llu (want @%llu)", a.status, a.data,
               (unsigned long long)a.revision, (unsigned long long)cas.revision);
    MCPG_CHECK(a.revision > r1, "revisions kept");
    MCPG_CHECK(get(st, "n").number == 7, "counter after replay");
    MCPG_CHECK(pia(st, "once", "y", 0).status == MCPG_EEXIST, "put_if_absent after replay");
    MCPG_CHECK(get(st, "short").status == MCPG_ENOENT, "expired while stopped: absent");
    MCPG_CHECK(get(st, "long").status == 0, "a live TTL survives");
    MCPG_CHECK(get(st, "gone").status == MCPG_ENOENT, "a delete survives");
    MCPG_CHECK(get(st, "rate").number == 1001000000, "rate_take's paid-until survives");
    a = put(st, "gone", "again", 0);
    MCPG_CHECK(a.revision > last, "the revision counter survives: %llu > %llu",
               (unsigned long long)a.revision, (unsigned long long)last);
    unload(inst);
    unlink(jpath);
}

static void write_at(const char *path, off_t off, const void *p, size_t n) {
    int fd = open(path, O_WRONLY);
    MCPG_REQUIRE(fd >= 0 && pwrite(fd, p, n, off) == (ssize_t)n, "write %s", path);
    close(fd);
}

/* A torn last record is cut off with a warning naming the file and the
 * offset, and only it is lost; a bad record before the end refuses the
 * start, naming both. */
static void test_journal_damage(void) {
    unlink(jpath);
    mcpg_instance *inst = load(jconfig(NULL));
    void *st = mcpg_fakehost_state(inst);
    char k[16];
    for (int i = 0; i < 10; i++) {
        snprintf(k, sizeof k, "d%d", i);
        put(st, k, "value", 0);
    }
    unload(inst);
    off_t size = file_size(jpath);
    MCPG_REQUIRE(size > 100, "journal written: %lld", (long long)size);
    MCPG_REQUIRE(truncate(jpath, size - 3) == 0, "truncate");

    mcpg_fakehost_log_clear(fh);
    inst = load(jconfig(NULL));
    st = mcpg_fakehost_state(inst);
    char want[256];
    snprintf(want, sizeof want, "journal %s: torn last record at offset", jpath);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, want), "torn tail logged:\n%s",
               mcpg_fakehost_log_text(fh));
    MCPG_CHECK(get(st, "d8").status == 0 && get(st, "d9").status == MCPG_ENOENT,
               "only the torn record is lost");
    MCPG_CHECK(put(st, "d9", "again", 0).status == 0, "writes after the cut");
    unload(inst);
    inst = load(jconfig(NULL));
    st = mcpg_fakehost_state(inst);
    MCPG_CHECK(get(st, "d9").status == 0 && strcmp(get(st, "d9").data, "again") == 0,
               "appended after the cut: whole");
    unload(inst);

    /* one byte changed in the middle: not a torn tail */
    write_at(jpath, 60, "\xff", 1);
    mcpg_fakehost_log_clear(fh);
    mcpg_instance *bad = NULL;
    int rc = mcpg_fakehost_load(fh, mod, "coord", jconfig(NULL), &bad);
    MCPG_CHECK(rc != 0, "a bad record in the middle refuses the start");
    snprintf(want, sizeof want, "journal %s: bad record at offset", jpath);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, want), "named:\n%s", mcpg_fakehost_log_text(fh));
    MCPG_CHECK(file_size(jpath) > 100, "and the file is left as it was");

    /* not a journal at all */
    write_at(jpath, 0, "hello", 5);
    MCPG_CHECK(mcpg_fakehost_load(fh, mod, "coord", jconfig(NULL), &bad) != 0 &&
                   mcpg_fakehost_log_contains(fh, "not a coordinator journal"),
               "a foreign file refuses the start");
    unlink(jpath);
}

/* The journal is rewritten as a snapshot once it is 4x the live data and
 * over compact_min_bytes; writes during and after it are kept. */
static void test_journal_compaction(void) {
    unlink(jpath);
    mcpg_instance *inst = load(jconfig("\"compact_min_bytes\":8192"));
    void *st = mcpg_fakehost_state(inst);
    char v[64];
    for (int i = 0; i < 2000; i++) {
        snprintf(v, sizeof v, "value-%d", i);
        answer a = {0};
        MCPG_REQUIRE(ops->put(st, W, K("hot"), K(v), 0, on_answer, &a) == 0, "put");
        if (i % 100 == 99) mcpg_fakehost_run_until(fh, answered, &a, 5000);
    }
    MCPG_CHECK(incr(st, "n", 1, 0).status == 0, "incr");
    mcpg_fakehost_run_for(fh, 20);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "compacted"), "compacted:\n%s",
               mcpg_fakehost_log_text(fh));
    off_t size = file_size(jpath);
    MCPG_CHECK(size > 0 && size < 16384, "journal after compaction: %lld bytes", (long long)size);
    unload(inst);
    inst = load(jconfig("\"compact_min_bytes\":8192"));
    st = mcpg_fakehost_state(inst);
    answer a = get(st, "hot");
    MCPG_CHECK(a.status == 0 && strcmp(a.data, "value-1999") == 0, "the last value: %s", a.data);
    MCPG_CHECK(get(st, "n").number == 1, "the key after it");
    unload(inst);
    unlink(jpath);
}

/* A write that fails (here: past RLIMIT_FSIZE) answers the ops waiting
 * MCPG_EUNAVAIL, logged once; the next write that works ends the episode, and
 * the failed bytes are written then too. */
static void test_journal_write_failure(void) {
    unlink(jpath);
    mcpg_instance *inst = load(jconfig(NULL));
    void *st = mcpg_fakehost_state(inst);
    MCPG_CHECK(put(st, "a", "1", 0).status == 0, "put");
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = (rlim_t)file_size(jpath);
    setrlimit(RLIMIT_FSIZE, &lim);
    mcpg_fakehost_log_clear(fh);
    MCPG_CHECK(put(st, "b", "2", 0).status == MCPG_EUNAVAIL, "a failed write: MCPG_EUNAVAIL");
    MCPG_CHECK(put(st, "c", "3", 0).status == MCPG_EUNAVAIL, "still failing");
    MCPG_CHECK(get(st, "b").status == 0, "the change stays in memory");
    setrlimit(RLIMIT_FSIZE, &old);
    MCPG_CHECK(put(st, "d", "4", 0).status == 0, "writing again");
    const char *log = mcpg_fakehost_log_text(fh);
    const char *first = strstr(log, "write or sync failed");
    MCPG_CHECK(first && !strstr(first + 1, "write or sync failed"), "logged once:\n%s", log);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "the episode is over"), "its end logged");
    unload(inst);
    inst = load(jconfig(NULL));
    st = mcpg_fakehost_state(inst);
    MCPG_CHECK(get(st, "b").status == 0 && get(st, "c").status == 0 && get(st, "d").status == 0,
               "the failed bytes were written with the next batch");
    unload(inst);
    unlink(jpath);
}

static void test_journal(void) {
    snprintf(jdir, sizeof jdir, "/tmp/cmjournal.XXXXXX");
    MCPG_REQUIRE(mkdtemp(jdir), "mkdtemp");
    snprintf(jpath, sizeof jpath, "%s/coord.journal", jdir);
    char bad[256];
    snprintf(bad, sizeof bad, "{\"path\":\"%s/no/such/dir/j\"}", jdir);
    MCPG_CHECK(mcpg_fakehost_check(fh, mod, bad) == MCPG_ECONFIG &&
                   strstr(mcpg_fakehost_report_text(fh), "path"),
               "an unwritable path is a --check error naming the key: %s",
               mcpg_fakehost_report_text(fh));
    test_journal_contract();
    test_journal_replay();
    test_journal_damage();
    test_journal_compaction();
    test_journal_write_failure();
    rmdir(jdir);
}

/* ---- a micro-benchmark: printed, never asserted ------------------------------------ */

typedef struct bench {
    void *st;
    int which; /* 0 get, 1 put, 2 incr */
    long left, done, per;
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

/* every op answered, not only issued: a late answer would issue into the next round */
static int bench_done(void *arg) {
    const bench *b = arg;
    return b->left <= 0 && b->done >= b->per;
}

static void bench_run(const char *config, long per, const char *what) {
    mcpg_instance *inst = load(config);
    void *st = mcpg_fakehost_state(inst);
    static const char *names[] = {"get", "put", "incr"};
    const int order[] = {1, 0, 2}; /* put first, so get finds keys */
    for (int j = 0; j < 3; j++) {
        /* 64 ops in flight, each answer issuing the next */
        bench b[64];
        double t0 = mcpg_fakehost_now_s();
        for (int i = 0; i < 64; i++) {
            b[i] = (bench){.st = st, .which = order[j], .left = per, .per = per};
            bench_issue(&b[i]);
        }
        for (int i = 0; i < 64; i++) mcpg_fakehost_run_until(fh, bench_done, &b[i], 10000);
        mcpg_fakehost_run_for(fh, 1);
        double dt = mcpg_fakehost_now_s() - t0;
        long total = 0;
        for (int i = 0; i < 64; i++) total += b[i].done;
        printf("bench: %-4s %8.0f ops/s on the loop (%ld ops, 64 in flight%s)\n",
               names[order[j]], (double)total / dt, total, what);
    }
    unload(inst);
}

static void test_bench(void) {
    bench_run(NULL, 3000, "");
    /* with a journal: each put and incr waits for its batch's fdatasync (64 share one) */
    unlink(jpath);
    MCPG_REQUIRE(mkdir(jdir, 0700) == 0, "mkdir");
    bench_run(jconfig(NULL), 100, ", journaled");
    unlink(jpath);
    rmdir(jdir);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: %s coordinator_memory.so", argv[0]);
    void *dl;
    mod = contract_open(argv[1], &dl);
    ops = mod->ops;
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fakehost");
    mcpg_fakehost_set_quiet(fh, 1);
    W = mcpg_fakehost_worker(fh);
    MCPG_CHECK(mcpg_fakehost_check(fh, mod, "{\"max_keys\":0}") == MCPG_ECONFIG, "config bounds");
    C = (contract){.fh = fh, .ops = ops, .w = W};
    test_contract();
    test_ttl();
    test_bounds();
    test_pubsub();
    test_backlog();
    test_journal();
    test_bench();
    int left = mcpg_fakehost_free(fh);
    MCPG_CHECK(left == 0, "fake host: %d problem(s)", left);
    dlclose(dl);
    return MCPG_CHECK_EXIT("test_coordinator_memory");
}
