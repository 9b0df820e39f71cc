/* coordinator_nats through the SDK's fake host, against real nats-server
 * processes this test starts (free ports, a temp folder, stopped by pid).
 * Usage: test_coordinator_nats path/to/coordinator_nats.so
 *
 * The store-neutral contract (coordinator_memory/tests/coord_contract.c, the
 * same checks memory and Redis pass), then what is NATS's own:
 * expiry carried in the value, two instances (two connections, two KV
 * threads) racing on counters, rates and expired keys, the server killed
 * and started again, and a 3-node cluster (replicas 3 refused on a server
 * older than 2.9.21, naming its version; replicas 1 exact there; the node
 * holding the R1 bucket killed and back). Exits 77
 * (skipped) when there is no nats-server. */
#define _GNU_SOURCE
#include "coord_contract.h" /* coordinator_memory/tests */
#include "nats_server.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K(s) s, strlen(s)

static mcpg_fakehost *fh;
static const char *so_path;
static contract X; /* fh, ops and the loop; st set per instance */
static char base[256];

/* The contract's helpers on one of the instances (st), not X's own. */
static contract on(void *st) {
    contract c = X;
    c.st = st;
    return c;
}
static answer get_on(void *st, const char *k) { contract c = on(st); return contract_get(&c, k); }
static answer put_on(void *st, const char *k, const char *v, uint64_t ttl) {
    contract c = on(st);
    return contract_put(&c, k, v, ttl);
}
static answer pia_on(void *st, const char *k, const char *v, uint64_t ttl) {
    contract c = on(st);
    return contract_pia(&c, k, v, ttl);
}
static answer incr_on(void *st, const char *k, int64_t d, uint64_t ttl) {
    contract c = on(st);
    return contract_incr(&c, k, d, ttl);
}

/* Each step with the time since the start: a run that hangs (ctest kills
 * it at its timeout) shows which step it was in and how long each took. */
static double started_s;
static void step(const char *what) {
    printf("[%6.1f s] %s\n", mcpg_fakehost_now_s() - started_s, what);
}

static mcpg_instance *load(const char *name, const char *config) {
    return mcpg_fakehost_load_file_or_exit(fh, so_path, name, config);
}

static void unload(mcpg_instance *inst) {
    mcpg_fakehost_run_for(fh, 20); /* answers still posted run before the instance goes */
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static char *config_timeout(const char *url, const char *bucket, int timeout_ms,
                            const char *extra) {
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"url\":\"%s\",\"bucket\":\"%s\",\"op_timeout_ms\":%d,\"reconnect_min_ms\":50,"
             "\"reconnect_max_ms\":400%s%s}", url, bucket, timeout_ms, extra ? "," : "",
             extra ? extra : "");
    return buf;
}

static char *config(const char *url, const char *bucket, const char *extra) {
    return config_timeout(url, bucket, 1500, extra);
}

static void test_contract(const char *url) {
    mcpg_instance *inst = load("coord", config(url, "contract", NULL));
    contract c = on(mcpg_fakehost_state(inst));
    contract_all(&c);
    unload(inst);
}

/* ---- two instances at once ------------------------------------------------------------ */

typedef struct many {
    answer a[1000];
    int n;
} many;

static int all_answered(void *arg) {
    many *m = arg;
    for (int i = 0; i < m->n; i++)
        if (!m->a[i].calls) return 0;
    return 1;
}

static void wait_all(many *m) {
    MCPG_CHECK(mcpg_fakehost_run_until(fh, all_answered, m, 60000) == 0, "answers missing");
}

static int first_failure(const many *m) {
    for (int i = 0; i < m->n; i++)
        if (m->a[i].status) return m->a[i].status;
    return 0;
}

/* 2 x 500 increments of one counter from two connections: exactly 1000, and
 * every value from 1 to 1000 answered once. */
static void race_incr(void *a, void *b) {
    static many m;
    memset(&m, 0, sizeof m);
    m.n = 1000;
    for (int i = 0; i < 500; i++) {
        MCPG_CHECK(X.ops->incr(a, X.w, K("race.n"), 1, 0, contract_on_answer, &m.a[2 * i]) == 0, "a");
        MCPG_CHECK(X.ops->incr(b, X.w, K("race.n"), 1, 0, contract_on_answer, &m.a[2 * i + 1]) == 0,
                   "b");
    }
    wait_all(&m);
    static char seen[1001];
    memset(seen, 0, sizeof seen);
    int ok = 0, dup = 0;
    for (int i = 0; i < 1000; i++) {
        if (m.a[i].status != 0) continue;
        ok++;
        int64_t v = m.a[i].number;
        if (v >= 1 && v <= 1000 && seen[v]++) dup++;
    }
    MCPG_CHECK(ok == 1000 && dup == 0, "incr: %d ok, %d duplicates (a failure: %s)", ok, dup,
               mcpg_fakehost_host(fh)->errname(first_failure(&m)));
    MCPG_CHECK(get_on(a, "race.n").number == 1000, "2 x 500 = %lld",
               (long long)get_on(a, "race.n").number);
}

/* A burst of 50 (one call an hour after): 2 x 100 attempts admit exactly 50. */
static void race_rate(void *a, void *b) {
    static many m;
    memset(&m, 0, sizeof m);
    m.n = 200;
    const int64_t iv = 3600000000, t0 = 1700000000000000;
    for (int i = 0; i < 100; i++) {
        X.ops->rate_take(a, X.w, K("race.r"), t0, iv, 50 * iv, contract_on_answer, &m.a[2 * i]);
        X.ops->rate_take(b, X.w, K("race.r"), t0, iv, 50 * iv, contract_on_answer, &m.a[2 * i + 1]);
    }
    wait_all(&m);
    int ok = 0, refused = 0;
    for (int i = 0; i < 200; i++) {
        ok += m.a[i].status == 0;
        refused += m.a[i].status == MCPG_EAGAIN;
    }
    MCPG_CHECK(ok == 50 && refused == 150, "rate_take: %d admitted, %d refused", ok, refused);
}

/* 20 keys expire (the expiry is in the value: the server knows nothing of
 * it); then both instances try to take each one: exactly one winner each.
 * Their TTL outlasts the 21 round trips before "live" on a loaded machine. */
#define SLOT_TTL_MS 2000

static void race_expired(void *a, void *b) {
    char k[32];
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "race.slot.%d", i);
        MCPG_CHECK(put_on(a, k, "old", SLOT_TTL_MS).status == 0, "put");
    }
    double put_all = 1e3 * mcpg_fakehost_now_s(); /* every slot's expiry was set before this */
    MCPG_CHECK(pia_on(b, "race.slot.0", "x", 0).status == MCPG_EEXIST, "live: taken");
    /* past every expiry (the module's wall clock; 250 ms for the clocks) */
    for (double left; (left = put_all + SLOT_TTL_MS + 250 - 1e3 * mcpg_fakehost_now_s()) > 0;)
        mcpg_fakehost_run_for(fh, (uint64_t)left + 1);
    MCPG_CHECK(get_on(b, "race.slot.0").status == MCPG_ENOENT, "expired: absent to get");
    static many m;
    memset(&m, 0, sizeof m);
    m.n = 80;
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "race.slot.%d", i);
        for (int j = 0; j < 2; j++) {
            X.ops->put_if_absent(a, X.w, K(k), K("A"), 60000, contract_on_answer, &m.a[4 * i + 2 * j]);
            X.ops->put_if_absent(b, X.w, K(k), K("B"), 60000, contract_on_answer,
                                 &m.a[4 * i + 2 * j + 1]);
        }
    }
    wait_all(&m);
    int exact = 0;
    for (int i = 0; i < 20; i++) {
        int won = 0, lost = 0;
        for (int j = 0; j < 4; j++) {
            won += m.a[4 * i + j].status == 0;
            lost += m.a[4 * i + j].status == MCPG_EEXIST;
        }
        exact += won == 1 && lost == 3;
    }
    MCPG_CHECK(exact == 20, "one taker per expired key: %d of 20", exact);
}

static void test_two_instances(const char *url_a, const char *url_b, const char *bucket) {
    /* 500 ops queued at once on each: exactness, not latency, is the point */
    mcpg_instance *ia = load("a", config_timeout(url_a, bucket, 60000, NULL));
    mcpg_instance *ib = load("b", config_timeout(url_b, bucket, 60000, NULL));
    void *a = mcpg_fakehost_state(ia), *b = mcpg_fakehost_state(ib);
    race_incr(a, b);
    race_rate(a, b);
    race_expired(a, b);
    unload(ib);
    unload(ia);
}

/* ---- the server killed, then back --------------------------------------------------- */

static int got_one(void *arg) { return *(int *)arg > 0; }
static void count_msg(void *arg, const char *s, const char *d, size_t n) {
    (void)s, (void)d, (void)n;
    (*(int *)arg)++;
}

static void test_restart(nats_node *n) {
    mcpg_instance *inst = load("coord", config(n->url, "restart", NULL));
    void *st = mcpg_fakehost_state(inst);
    MCPG_CHECK(put_on(st, "kept", "v", 0).status == 0, "put");
    int heard = 0;
    mcpg_coord_sub *sub;
    MCPG_REQUIRE(X.ops->subscribe(st, X.w, "restart.news", count_msg, &heard, &sub) == 0, "sub");
    nats_node_kill(n);
    /* every op answers, unavailable, within op_timeout_ms: none hangs */
    static many m;
    memset(&m, 0, sizeof m);
    m.n = 20;
    for (int i = 0; i < 20; i++)
        MCPG_CHECK(X.ops->get(st, X.w, K("kept"), contract_on_answer, &m.a[i]) == 0, "get");
    MCPG_CHECK(mcpg_fakehost_run_until(fh, all_answered, &m, 10000) == 0, "answered while down");
    int unavailable = 0;
    for (int i = 0; i < 20; i++)
        unavailable += m.a[i].status == MCPG_EUNAVAIL || m.a[i].status == MCPG_ETIMEDOUT;
    MCPG_CHECK(unavailable == 20, "unavailable while down: %d of 20 (first %s)", unavailable,
               mcpg_fakehost_host(fh)->errname(m.a[0].status));
    answer a = incr_on(st, "down.n", 1, 0);
    MCPG_CHECK(a.status == MCPG_EUNAVAIL, "incr while down: %d", a.status);
    MCPG_REQUIRE(nats_node_restart(n) == 0, "restart");
    int back = 0;
    for (int i = 0; i < 200 && !back; i++) {
        a = get_on(st, "kept");
        back = a.status == 0;
        if (!back) mcpg_fakehost_run_for(fh, 100);
    }
    MCPG_CHECK(back && strcmp(a.data, "v") == 0, "back after the restart, the row kept: %d",
               a.status);
    MCPG_CHECK(incr_on(st, "down.n", 1, 0).number == 1, "incr after the restart");
    answer p = {0};
    contract_settle(&X, X.ops->publish(st, X.w, "restart.news", "x", 1, contract_on_answer, &p), &p,
                 "publish");
    MCPG_CHECK(mcpg_fakehost_run_until(fh, got_one, &heard, 5000) == 0,
               "the subscription made before the kill hears after it");
    X.ops->unsubscribe(st, sub);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "lost the NATS server"), "the loss logged");
    unload(inst);
}

/* ---- credentials from the environment -------------------------------------------- */

static void test_token(void) {
    nats_node n;
    MCPG_REQUIRE(nats_node_start_token(&n, base, "token", "s3cret-token") == 0, "nats-server");
    setenv("CN_TEST_NATS_TOKEN", "s3cret-token", 1);
    mcpg_instance *inst = load("tok", config(n.url, "tok", "\"token_env\":\"CN_TEST_NATS_TOKEN\""));
    void *st = mcpg_fakehost_state(inst);
    MCPG_CHECK(put_on(st, "k", "v", 0).status == 0, "put with the token from the env");
    MCPG_CHECK(strcmp(get_on(st, "k").data, "v") == 0, "get with the token");
    unload(inst);
    /* without it: refused at start, or every op unavailable */
    inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, so_path, "notok", config(n.url, "tok", NULL), &inst);
    if (rc == 0) {
        answer a = get_on(mcpg_fakehost_state(inst), "k");
        MCPG_CHECK(a.status == MCPG_EUNAVAIL, "without the token: unavailable: %d", a.status);
        unload(inst);
    }
    printf("without the token: %s\n", rc ? "the start is refused" : "ops answer unavailable");
    MCPG_CHECK(!mcpg_fakehost_log_contains(fh, "s3cret-token"), "the token never logged");
    nats_node_stop(&n);
}

/* ---- a 3-node cluster ------------------------------------------------------------------ */

/* The bucket's op_timeout_ms below: "at once" is under half of it, with room
 * for a loaded machine (an op may also meet the probe's 250 ms wait). */
#define HELD_TIMEOUT_MS 6000
#define AT_ONCE_MS (HELD_TIMEOUT_MS / 2)

/* An op that may wait HELD_TIMEOUT_MS (longer than the contract helpers
 * wait): its one answer, waited for with room to spare. */
static answer held_op(void *st, int incr) {
    answer a = {0};
    int rc = incr ? X.ops->incr(st, X.w, K("held.n"), 1, 0, contract_on_answer, &a)
                  : X.ops->get(st, X.w, K("kept"), contract_on_answer, &a);
    MCPG_CHECK(rc == 0 && a.calls == 0, "%s: op returned %d, %d answers inside it",
               incr ? "incr" : "get", rc, a.calls);
    if (rc) return a;
    MCPG_CHECK(mcpg_fakehost_run_until(fh, got_one, &a.calls, HELD_TIMEOUT_MS + 10000) == 0,
               "%s: no answer", incr ? "incr" : "get");
    mcpg_fakehost_run_for(fh, 1);
    MCPG_CHECK(a.calls == 1, "%s: %d answers", incr ? "incr" : "get", a.calls);
    return a;
}

/* The node holding an R1 bucket's stream killed, the instance connected to
 * another node (its connection stays up): the stream is offline, and a read
 * of it waits op_timeout_ms for a stream leader that is not there. Once one
 * op found that, the others answer MCPG_EUNAVAIL at once instead of each
 * waiting op_timeout_ms; with the node back (its port and store) ops run
 * again and the row is there. */
static void test_bucket_node_killed(nats_node c[3], const char *urls) {
    mcpg_instance *maker = load("maker", config(urls, "held", NULL));
    MCPG_CHECK(put_on(mcpg_fakehost_state(maker), "kept", "v", 0).status == 0, "put");
    unload(maker);
    int h = -1;
    static char jsz[65536];
    for (int i = 0; i < 3 && h < 0; i++)
        if (nats_http_get(c[i].http_port, "/jsz?accounts=true&streams=true", jsz, sizeof jsz) == 0 &&
            strstr(jsz, "\"KV_held\""))
            h = i;
    MCPG_REQUIRE(h >= 0, "no node holds KV_held");
    mcpg_instance *inst =
        load("held", config_timeout(c[(h + 1) % 3].url, "held", HELD_TIMEOUT_MS, NULL));
    void *st = mcpg_fakehost_state(inst);
    MCPG_CHECK(strcmp(held_op(st, 0).data, "v") == 0, "get before the kill");
    nats_node_kill(&c[h]);
    double t0 = 1e3 * mcpg_fakehost_now_s();
    answer a = held_op(st, 0);
    double first = 1e3 * mcpg_fakehost_now_s() - t0;
    MCPG_CHECK(a.status == MCPG_ETIMEDOUT || a.status == MCPG_EUNAVAIL,
               "the first get with the bucket's node down: %d", a.status);
    int unavailable = 0;
    double worst = 0;
    for (int i = 0; i < 10; i++) {
        double t1 = 1e3 * mcpg_fakehost_now_s();
        a = held_op(st, i % 2);
        double took = 1e3 * mcpg_fakehost_now_s() - t1;
        worst = took > worst ? took : worst;
        unavailable += a.status == MCPG_EUNAVAIL;
    }
    printf("bucket's node down: the first op answered in %.0f ms, the next 10 in at most "
           "%.0f ms each\n", first, worst);
    MCPG_CHECK(unavailable == 10, "unavailable at once after the first: %d of 10", unavailable);
    MCPG_CHECK(worst < AT_ONCE_MS, "an op waited %.0f ms with the bucket known down (op_timeout_ms "
               "%d)", worst, HELD_TIMEOUT_MS);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "does not answer though the connection is up"),
               "the bucket's loss logged");
    MCPG_REQUIRE(nats_node_restart(&c[h]) == 0, "the bucket's node restarted");
    t0 = 1e3 * mcpg_fakehost_now_s();
    int back = 0;
    while (!back && 1e3 * mcpg_fakehost_now_s() - t0 < 60000) {
        a = held_op(st, 0);
        back = a.status == 0;
        if (!back) mcpg_fakehost_run_for(fh, 100);
    }
    printf("bucket's node back: ops run again after %.0f ms\n", 1e3 * mcpg_fakehost_now_s() - t0);
    MCPG_CHECK(back && strcmp(a.data, "v") == 0, "the row after the node's restart: %d", a.status);
    MCPG_CHECK(held_op(st, 1).number == 1, "incr after the node's restart");
    step("unload after the node's restart");
    unload(inst);
}

static void test_cluster(void) {
    nats_node c[3];
    char urls[256];
    MCPG_REQUIRE(nats_cluster_start(c, base, urls, sizeof urls) == 0, "cluster");
    char varz[16384], version[32] = "?";
    if (nats_http_get(c[0].http_port, "/varz", varz, sizeof varz) == 0) {
        const char *v = strstr(varz, "\"version\": \"");
        if (v) sscanf(v + 12, "%31[0-9.]", version);
    }
    int major = 0, minor = 0, patch = 0;
    sscanf(version, "%d.%d.%d", &major, &minor, &patch);
    mcpg_fakehost_log_clear(fh);
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, so_path, "r3", config(urls, "r3", "\"replicas\":3"), &inst);
    if (major * 10000 + minor * 100 + patch < 20921) {
        char want[64];
        snprintf(want, sizeof want, "nats-server %s", version);
        MCPG_CHECK(rc != 0 && mcpg_fakehost_log_contains(fh, "replicas 3 refused") &&
                       mcpg_fakehost_log_contains(fh, want),
                   "replicas 3 on %s: refused naming the version (rc %d):\n%s", version, rc,
                   mcpg_fakehost_log_text(fh));
    } else {
        MCPG_CHECK(rc == 0, "replicas 3 on %s: served", version);
        if (rc == 0) unload(inst);
    }
    /* replicas 1 on the cluster: two instances on two different nodes, exact */
    test_two_instances(c[0].url, c[1].url, "r1");
    step("an R1 bucket's node killed");
    test_bucket_node_killed(c, urls);
    step("the cluster stopped");
    for (int i = 0; i < 3; i++) nats_node_stop(&c[i]);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: %s coordinator_nats.so", argv[0]);
    if (nats_server_available() != 0) {
        printf("test_coordinator_nats: no nats-server: skipped\n");
        return 77;
    }
    signal(SIGPIPE, SIG_IGN);
    /* a line at a time: a run that hangs (ctest kills it at its timeout)
     * shows how far it got */
    setvbuf(stdout, NULL, _IOLBF, 0);
    setvbuf(stderr, NULL, _IONBF, 0);
    so_path = argv[1];
    started_s = mcpg_fakehost_now_s();
    MCPG_REQUIRE(nats_tmpdir(base, sizeof base) == 0, "temp dir");
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fakehost");
    mcpg_fakehost_set_quiet(fh, getenv("CN_VERBOSE") == NULL);
    X = (contract){.fh = fh, .w = mcpg_fakehost_worker(fh)};
    void *dl;
    const mcpg_module *mod = contract_open(so_path, &dl);
    X.ops = mod->ops;
    MCPG_CHECK(mcpg_fakehost_check(fh, mod, "{\"url\":\"x\",\"replicas\":2}") == MCPG_ECONFIG,
               "replicas 2 refused");
    MCPG_CHECK(mcpg_fakehost_check(fh, mod, "{\"url\":\"x\",\"jetstream\":{\"state_bucket_max_bytes\":\"x\"}}") ==
                   MCPG_ECONFIG, "a bad state_bucket_max_bytes refused");
    MCPG_CHECK(mcpg_fakehost_check(fh, mod, "{\"url\":\"x\",\"jetstream\":{\"state_bucket_max_bytes\":1048576}}") == 0,
               "state_bucket_max_bytes");
    mcpg_instance *probe = NULL;
    MCPG_REQUIRE(mcpg_fakehost_load_file(fh, so_path, "probe", "{\"url\":\"nats://127.0.0.1:1\"}",
                                         &probe) == 0, "load with no server there");
    answer a = {0};
    contract_settle(&X, X.ops->get(mcpg_fakehost_state(probe), X.w, K("k"), contract_on_answer, &a), &a,
                 "get with no server");
    MCPG_CHECK(a.status == MCPG_EUNAVAIL, "no server: unavailable at once: %d", a.status);
    unload(probe);

    nats_node n;
    MCPG_REQUIRE(nats_node_start(&n, base, "single", 0) == 0, "nats-server");
    step("the contract on one node");
    test_contract(n.url);
    step("two instances racing");
    test_two_instances(n.url, n.url, "race");
    step("the node restarted");
    test_restart(&n);
    nats_node_stop(&n);
    step("a token");
    test_token();
    step("a cluster of three");
    test_cluster();
    step("the fake host freed");
    int left = mcpg_fakehost_free(fh);
    MCPG_CHECK(left == 0, "fake host: %d problem(s)", left);
    nats_rmdir(base);
    dlclose(dl);
    return MCPG_CHECK_EXIT("test_coordinator_nats");
}
