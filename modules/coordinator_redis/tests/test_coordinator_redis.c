/* coordinator_redis through the SDK's fake host, against a real
 * redis-server this test starts on a free port in a temp folder (and stops
 * by its pid): the shared coordinator contract (coord_contract.c), then what
 * only a remote store has: NOSCRIPT after SCRIPT FLUSH, the server killed and
 * started again, down at start, a server that stops answering (op
 * deadline), AUTH, a unix socket, max_in_flight and the order of answers,
 * two instances (two gateways) sharing counters and messages, and the
 * config errors validate gives.
 * Usage: test_coordinator_redis coordinator_redis.so [redis-server] */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../coordinator_memory/tests/coord_contract.h"

#define K(s) s, strlen(s)

static mcpg_fakehost *fh;
static const mcpg_module *mod;
static const mcpg_coordinator_ops *ops;
static mcpg_worker *W;
static const char *redis_bin = "redis-server";
static char tmpdir[] = "/tmp/mcpg-redis-test-XXXXXX";

/* ---- the server ------------------------------------------------------------- */

typedef struct server {
    pid_t pid;
    int port;
    char sock[128];
    const char *requirepass;
} server;

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &n);
    close(fd);
    return ntohs(a.sin_port);
}

static redisContext *admin(const server *s) {
    struct timeval tv = {1, 0};
    redisContext *c = s->sock[0] ? redisConnectUnixWithTimeout(s->sock, tv)
                                 : redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (c && !c->err && s->requirepass) freeReplyObject(redisCommand(c, "AUTH %s", s->requirepass));
    return c;
}

static int ping(const server *s) {
    redisContext *c = admin(s);
    int ok = 0;
    if (c && !c->err) {
        redisReply *r = redisCommand(c, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

static void server_start(server *s) {
    char port[16], dir[160];
    snprintf(port, sizeof port, "%d", s->sock[0] ? 0 : s->port);
    snprintf(dir, sizeof dir, "%s", tmpdir);
    s->pid = fork();
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that dies takes its server along */
        const char *argv[20] = {redis_bin, "--bind", "127.0.0.1", "--port", port, "--save", "",
                                "--appendonly", "no", "--dir", dir, "--logfile", "",
                                "--loglevel", "warning"};
        int n = 15;
        if (s->sock[0]) argv[n++] = "--unixsocket", argv[n++] = s->sock;
        if (s->requirepass) argv[n++] = "--requirepass", argv[n++] = s->requirepass;
        argv[n] = NULL;
        int null = open("/dev/null", 1);
        dup2(null, 1);
        dup2(null, 2);
        execvp(redis_bin, (char **)argv);
        _exit(127);
    }
    for (int i = 0; i < 500 && !ping(s); i++) usleep(10000);
    MCPG_REQUIRE(ping(s), "redis-server did not start (%s)", redis_bin);
}

static void server_stop(server *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

static void server_command(const server *s, const char *cmd) {
    redisContext *c = admin(s);
    MCPG_REQUIRE(c && !c->err, "admin connection");
    redisReply *r = redisCommand(c, cmd);
    MCPG_CHECK(r && r->type != REDIS_REPLY_ERROR, "%s: %s", cmd, r && r->str ? r->str : "?");
    freeReplyObject(r);
    redisFree(c);
}

/* ---- instances ----------------------------------------------------------------- */

static mcpg_instance *load(const char *config) { return contract_load(fh, mod, config); }

static void unload(mcpg_instance *inst) {
    mcpg_fakehost_run_for(fh, 2);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 0, "module bugs seen:\n%s", mcpg_fakehost_log_text(fh));
}

static contract contract_of(mcpg_instance *inst) {
    return (contract){.fh = fh, .ops = ops, .w = W, .st = mcpg_fakehost_state(inst)};
}

static char *config_for(const server *s, const char *extra) {
    static char buf[1024];
    if (s->sock[0])
        snprintf(buf, sizeof buf, "{\"url\":\"unix://%s\"%s%s}", s->sock, extra ? "," : "",
                 extra ? extra : "");
    else
        snprintf(buf, sizeof buf, "{\"url\":\"redis://127.0.0.1:%d\"%s%s}", s->port,
                 extra ? "," : "", extra ? extra : "");
    return buf;
}

/* A get that answers anything but EUNAVAIL: the link is ready. */
static int wait_ready(const contract *c, int ms) {
    for (int t = 0; t < ms; t += 20) {
        if (contract_get(c, "ready.probe").status != MCPG_EUNAVAIL) return 1;
        mcpg_fakehost_run_for(fh, 20);
    }
    return 0;
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_contract(server *s) {
    mcpg_instance *inst = load(config_for(s, "\"key_prefix\":\"contract:\""));
    contract c = contract_of(inst);
    MCPG_REQUIRE(wait_ready(&c, 5000), "never ready:\n%s", mcpg_fakehost_log_text(fh));
    contract_all(&c);
    unload(inst);
}

/* SCRIPT FLUSH mid-run: each op meets NOSCRIPT once and is sent again as
 * EVAL; nothing is lost and the stop line counts the retries. */
static void test_noscript(server *s) {
    mcpg_instance *inst = load(config_for(s, "\"key_prefix\":\"noscript:\""));
    contract c = contract_of(inst);
    MCPG_REQUIRE(wait_ready(&c, 5000), "ready");
    MCPG_CHECK(contract_put(&c, "a", "1", 0).status == 0, "put");
    server_command(s, "SCRIPT FLUSH");
    MCPG_CHECK(contract_put(&c, "a", "2", 0).status == 0, "put after SCRIPT FLUSH");
    MCPG_CHECK(contract_incr(&c, "n", 5, 0).number == 5, "incr after SCRIPT FLUSH");
    MCPG_CHECK(contract_pia(&c, "a", "x", 0).status == MCPG_EEXIST, "pia after SCRIPT FLUSH");
    MCPG_CHECK(strcmp(contract_get(&c, "a").data, "2") == 0, "value");
    mcpg_fakehost_log_clear(fh);
    unload(inst);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "3 NOSCRIPT retries"), "stop line:\n%s",
               mcpg_fakehost_log_text(fh));
}

/* The server killed: ops answer EUNAVAIL (never hang); started again, the
 * link comes back by itself, and what the old server held is gone. */
static void test_restart(server *s) {
    mcpg_instance *inst = load(config_for(s, "\"key_prefix\":\"restart:\",\"reconnect_min_ms\":20,"
                                             "\"reconnect_max_ms\":200"));
    contract c = contract_of(inst);
    MCPG_REQUIRE(wait_ready(&c, 5000), "ready");
    MCPG_CHECK(contract_put(&c, "kept?", "1", 0).status == 0, "put");
    server_stop(s);
    int st = contract_get(&c, "kept?").status;
    MCPG_CHECK(st == MCPG_EUNAVAIL, "the server gone: %d", st);
    for (int i = 0; i < 5; i++)
        MCPG_CHECK(contract_incr(&c, "n", 1, 0).status == MCPG_EUNAVAIL, "down: EUNAVAIL at once");
    server_start(s);
    MCPG_CHECK(wait_ready(&c, 5000), "back after the restart:\n%s", mcpg_fakehost_log_text(fh));
    MCPG_CHECK(contract_get(&c, "kept?").status == MCPG_ENOENT,
               "a server without persistence lost the key");
    MCPG_CHECK(contract_incr(&c, "n", 1, 0).number == 1, "works again");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "Redis connected again"), "recovery logged");
    unload(inst);
}

/* Down at start: ops answer EUNAVAIL; the server comes up; ops work. */
static void test_down_at_start(void) {
    server late = {.port = free_port()};
    char cfg[256];
    snprintf(cfg, sizeof cfg, "{\"url\":\"redis://127.0.0.1:%d\",\"reconnect_min_ms\":20,"
             "\"reconnect_max_ms\":100}", late.port);
    mcpg_instance *inst = load(cfg);
    contract c = contract_of(inst);
    double t0 = 1e3 * mcpg_fakehost_now_s();
    MCPG_CHECK(contract_get(&c, "x").status == MCPG_EUNAVAIL, "nothing listening: EUNAVAIL");
    MCPG_CHECK(1e3 * mcpg_fakehost_now_s() - t0 < 1000, "answered at once, not after a timeout");
    mcpg_fakehost_run_for(fh, 100);
    MCPG_CHECK(contract_get(&c, "x").status == MCPG_EUNAVAIL, "still down");
    server_start(&late);
    MCPG_CHECK(wait_ready(&c, 5000), "up once the server is");
    unload(inst);
    server_stop(&late);
}

/* A server that stops answering (SIGSTOP): the op waits op_timeout_ms, then
 * answers MCPG_ETIMEDOUT; the link reconnects once the server answers. */
static void test_op_timeout(server *s) {
    mcpg_instance *inst = load(config_for(s, "\"op_timeout_ms\":300,\"connect_timeout_ms\":300,"
                                             "\"reconnect_min_ms\":20,\"reconnect_max_ms\":100"));
    contract c = contract_of(inst);
    MCPG_REQUIRE(wait_ready(&c, 5000), "ready");
    kill(s->pid, SIGSTOP);
    answer a[3] = {{0}};
    for (int i = 0; i < 3; i++)
        MCPG_CHECK(ops->get(c.st, W, K("t"), contract_on_answer, &a[i]) == 0, "get");
    mcpg_fakehost_run_for(fh, 1500);
    for (int i = 0; i < 3; i++)
        MCPG_CHECK(a[i].calls == 1 && a[i].status == MCPG_ETIMEDOUT, "op %d: %d calls, %d", i,
                   a[i].calls, a[i].status);
    kill(s->pid, SIGCONT);
    MCPG_CHECK(wait_ready(&c, 5000), "back once the server answers");
    unload(inst);
}

/* max_in_flight 2: the third op and on answer EAGAIN, and every answer
 * comes in the order the ops were made. */
typedef struct ordered {
    int seq[16];
    int n;
} ordered;

static ordered order_log;

static void on_ordered(void *arg, int status, const mcpg_coord_value *v) {
    (void)v;
    order_log.seq[order_log.n++] = (int)(intptr_t)arg * 100 + (status == MCPG_EAGAIN);
}

static int ten_answers(void *arg) { return ((ordered *)arg)->n >= 10; }

static void test_in_flight(server *s) {
    mcpg_instance *inst = load(config_for(s, "\"max_in_flight\":2"));
    contract c = contract_of(inst);
    MCPG_REQUIRE(wait_ready(&c, 5000), "ready");
    order_log.n = 0;
    for (intptr_t i = 0; i < 10; i++)
        MCPG_CHECK(ops->incr(c.st, W, K("inflight"), 1, 0, on_ordered, (void *)i) == 0, "incr");
    mcpg_fakehost_run_until(fh, ten_answers, &order_log, 5000);
    int in_order = order_log.n == 10, refused = 0;
    for (int i = 0; i < order_log.n; i++) {
        in_order &= order_log.seq[i] / 100 == i;
        refused += order_log.seq[i] % 100;
    }
    MCPG_CHECK(in_order && refused == 8, "answers in order: %d, refused %d", in_order, refused);
    unload(inst);
}

/* Two instances on one server: two gateways of a fleet. */
static int got_four(void *arg) { return ((contract_inbox *)arg)->n >= 4; }

static void test_two_gateways(server *s) {
    mcpg_instance *ia = load(config_for(s, "\"key_prefix\":\"fleet:\""));
    mcpg_instance *ib = load(config_for(s, "\"key_prefix\":\"fleet:\""));
    contract a = contract_of(ia), b = contract_of(ib);
    MCPG_REQUIRE(wait_ready(&a, 5000) && wait_ready(&b, 5000), "ready");
    for (int i = 0; i < 50; i++) {
        contract_incr(&a, "budget", 1, 0);
        contract_incr(&b, "budget", 1, 0);
    }
    MCPG_CHECK(contract_get(&b, "budget").number == 100, "one counter for both");
    MCPG_CHECK(contract_pia(&a, "slot", "a", 60000).status == 0 &&
                   contract_pia(&b, "slot", "b", 60000).status == MCPG_EEXIST, "one slot holder");
    contract_inbox got_a = {0}, got_b = {0};
    mcpg_coord_sub *sa, *sb;
    MCPG_REQUIRE(ops->subscribe(a.st, W, "news.*", contract_on_msg, &got_a, &sa) == 0, "sub a");
    MCPG_REQUIRE(ops->subscribe(b.st, W, "news.>", contract_on_msg, &got_b, &sb) == 0, "sub b");
    answer p = {0};
    contract_settle(&a, ops->publish(a.st, W, "news.x", K("1"), contract_on_answer, &p), &p, "pub");
    MCPG_CHECK(p.status == 0 && p.number == 2, "two gateways' pub/sub connections: %lld",
               (long long)p.number);
    const char *more[] = {"2", "3", "4"};
    for (int i = 0; i < 3; i++) {
        p = (answer){0};
        contract *from = i % 2 ? &a : &b;
        contract_settle(from, ops->publish(from->st, W, "news.x", K(more[i]), contract_on_answer,
                                           &p), &p, "pub");
    }
    mcpg_fakehost_run_until(fh, got_four, &got_a, 5000);
    mcpg_fakehost_run_until(fh, got_four, &got_b, 5000);
    mcpg_fakehost_run_for(fh, 20);
    MCPG_CHECK(got_a.n == 4 && got_b.n == 4, "each message once on each gateway: %d %d (%s, %s)",
               got_a.n, got_b.n, got_a.seq, got_b.seq);
    ops->unsubscribe(a.st, sa);
    ops->unsubscribe(b.st, sb);
    unload(ia);
    unload(ib);
}

static void test_auth(void) {
    server s = {.port = free_port(), .requirepass = "s3cret"};
    server_start(&s);
    char cfg[256];
    snprintf(cfg, sizeof cfg, "{\"url\":\"redis://:s3cret@127.0.0.1:%d/2\"}", s.port);
    mcpg_instance *inst = load(cfg);
    contract c = contract_of(inst);
    MCPG_CHECK(wait_ready(&c, 5000), "AUTH and SELECT 2");
    MCPG_CHECK(contract_put(&c, "in-db-2", "1", 0).status == 0, "put");
    unload(inst);
    setenv("MCPG_TEST_REDIS_PW", "wrong", 1);
    snprintf(cfg, sizeof cfg, "{\"url\":\"redis://127.0.0.1:%d\",\"password_env\":"
             "\"MCPG_TEST_REDIS_PW\",\"reconnect_min_ms\":1000}", s.port);
    mcpg_fakehost_log_clear(fh);
    inst = load(cfg);
    c = contract_of(inst);
    mcpg_fakehost_run_for(fh, 200);
    MCPG_CHECK(contract_get(&c, "x").status == MCPG_EUNAVAIL, "a wrong password: unavailable");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "AUTH refused"), "said why:\n%s",
               mcpg_fakehost_log_text(fh));
    unload(inst);
    server_stop(&s);
}

static void test_unix_socket(void) {
    server s = {0};
    snprintf(s.sock, sizeof s.sock, "%s/redis.sock", tmpdir);
    server_start(&s);
    mcpg_instance *inst = load(config_for(&s, NULL));
    contract c = contract_of(inst);
    MCPG_CHECK(wait_ready(&c, 5000), "unix socket");
    MCPG_CHECK(contract_incr(&c, "u", 2, 0).number == 2, "incr over the socket");
    unload(inst);
    server_stop(&s);
}

static void refused(const char *config, const char *needle) {
    MCPG_CHECK(mcpg_fakehost_check(fh, mod, config) == MCPG_ECONFIG, "refused: %s", config);
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 0, "%s:\n%s", config, mcpg_fakehost_log_text(fh));
    MCPG_CHECK(strstr(mcpg_fakehost_report_text(fh), needle) != NULL, "%s: says \"%s\": %s",
               config, needle, mcpg_fakehost_report_text(fh));
}

static void test_config(void) {
    refused("{\"url\":\"redis://localhost:6379\"}", "url: host \"localhost\" is not an IP address");
    refused("{\"url\":\"rediss://127.0.0.1:6379\"}", "hiredis 0.14.1");
    refused("{\"url\":\"redis://127.0.0.1:6379\",\"tls\":{\"ca_file\":\"x\"}}", "tls: not available");
    refused("{\"url\":\"http://127.0.0.1\"}", "must start with redis:// or unix://");
    refused("{\"url\":\"redis://127.0.0.1:99999\"}", "port");
    refused("{\"url\":\"redis://:a@127.0.0.1\",\"password\":\"b\"}", "give the password once");
    refused("{\"url\":\"redis://127.0.0.1\",\"password_env\":\"MCPG_NO_SUCH_VAR\"}", "not set");
    refused("{}", "url");
    MCPG_CHECK(mcpg_fakehost_check(fh, mod, "{\"url\":\"redis://[::1]:7000/3\"}") == 0, "IPv6");
    MCPG_CHECK(mcpg_fakehost_check(fh, mod, "{\"url\":\"unix:///run/r.sock?db=1\"}") == 0, "unix");
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc >= 2, "usage: %s coordinator_redis.so [redis-server]", argv[0]);
    if (argc > 2) redis_bin = argv[2];
    MCPG_REQUIRE(mkdtemp(tmpdir), "mkdtemp");
    void *dl;
    mod = contract_open(argv[1], &dl);
    ops = mod->ops;
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fakehost");
    mcpg_fakehost_set_quiet(fh, 1);
    W = mcpg_fakehost_worker(fh);
    server s = {.port = free_port()};
    server_start(&s);
    test_config();
    test_contract(&s);
    test_noscript(&s);
    test_in_flight(&s);
    test_two_gateways(&s);
    test_op_timeout(&s);
    test_restart(&s);
    test_down_at_start();
    test_auth();
    test_unix_socket();
    server_stop(&s);
    int left = mcpg_fakehost_free(fh);
    MCPG_CHECK(left == 0, "fake host: %d problem(s)", left);
    dlclose(dl);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    MCPG_CHECK(system(cmd) == 0, "temp folder removed");
    return MCPG_CHECK_EXIT("test_coordinator_redis");
}
