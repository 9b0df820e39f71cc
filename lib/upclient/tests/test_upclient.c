/* upclient against the test server (testsrv.c), plain and TLS, on one
 * libuv loop; ends by proving every handle closed (uv_loop_close == 0). */
#define _GNU_SOURCE
#include <mcpg/check.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testsrv.h"
#include "upclient.h"

/* How long a step may take before the test calls it hung: only a broken
 * run reaches it, never a slow one (the timeouts under test are set apart). */
#define GUARD_MS 10000

static uv_loop_t loop;
static tsrv *plain, *tls;
static tcerts certs;

/* ------------------------------------------------------------------ */
/* one request's outcome                                               */

typedef struct res {
    up_req *r;
    int status, done, err, nbody, abort_in_body, release_on_first, x_test;
    char body[4096];
    size_t blen;
    char first[64]; /* the body as the first on_body saw it */
    char detail[256];
    up_pool *send_next_on; /* on_done sends one more GET on this pool */
    struct res *next;
    int retry_next;
} res;

static int r_head(void *arg, int status, const up_header *h, size_t n) {
    res *x = arg;
    x->status = status;
    x->x_test = up_header_find(h, n, "x-TEST") != NULL;
    return 0;
}

static int r_body(void *arg, const char *p, size_t n) {
    res *x = arg;
    if (x->nbody++ == 0) {
        snprintf(x->first, sizeof x->first, "%.*s", (int)n, p);
        if (x->release_on_first) tsrv_release(plain);
    }
    if (x->blen + n < sizeof x->body) memcpy(x->body + x->blen, p, n), x->blen += n;
    return x->abort_in_body;
}

static const up_callbacks cbs;

static void r_done(void *arg, int err) {
    res *x = arg;
    x->done = 1;
    x->err = err;
    snprintf(x->detail, sizeof x->detail, "%s", up_req_error_detail(x->r));
    if (x->send_next_on)
        x->next->r = up_send(x->send_next_on, "GET", "/", NULL, NULL, 0, x->retry_next, &cbs, x->next);
}

static const up_callbacks cbs = {r_head, r_body, r_done};

static void tick(uv_timer_t *t) { (void)t; }

/* Run the loop until done(arg) or ms pass. */
static int run_until_fn(int (*done)(const void *), const void *arg, int ms) {
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    uv_timer_start(&t, tick, 5, 5);
    uint64_t end = uv_now(&loop) + (uint64_t)ms;
    while (!done(arg) && uv_now(&loop) < end) uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    return done(arg);
}

static int flag_set(const void *flag) { return *(const int *)flag; }

static int run_until(const int *flag, int ms) { return run_until_fn(flag_set, flag, ms); }

static void settle(int ms) {
    int never = 0;
    run_until(&never, ms);
}

static up_target *target(const char *scheme, int port, const up_tls_opts *o, uint64_t cto) {
    char url[128], err[256];
    snprintf(url, sizeof url, "%s://127.0.0.1:%d/base?x=1", scheme, port);
    up_target *t = up_target_new(url, o, cto, err, sizeof err);
    MCPG_REQUIRE(t, "target %s: %s", url, err);
    return t;
}

/* A pool on a fresh target; pool_end closes both. */
static up_pool *pool_at(const char *scheme, int port, const up_tls_opts *o, unsigned max_conns,
                        unsigned queue_max, up_target **t) {
    *t = target(scheme, port, o, GUARD_MS);
    up_pool *p = up_pool_new(&loop, *t, max_conns, max_conns, queue_max);
    MCPG_REQUIRE(p, "pool");
    return p;
}

static void pool_end(up_pool *p, up_target *t) {
    up_pool_close(p);
    settle(20);
    up_target_free(t);
}

static void get(up_pool *p, const char *path, res *x) {
    x->r = up_send(p, "GET", path, "Accept: */*\r\n", NULL, 0, 1, &cbs, x);
    MCPG_REQUIRE(x->r, "up_send");
    MCPG_CHECK(!x->done, "%s: on_done ran inside up_send", path);
}

/* ------------------------------------------------------------------ */
/* plain HTTP                                                          */

static void test_target(void) {
    up_target *t = target("http", tsrv_port(plain), NULL, 1000);
    MCPG_CHECK(strcmp(up_target_path(t), "/base?x=1") == 0, "path %s", up_target_path(t));
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", tsrv_port(plain));
    MCPG_CHECK(strcmp(up_target_authority(t), want) == 0 && !up_target_is_tls(t), "authority");
    up_target_free(t);
    char err[256];
    static const struct {
        const char *url, *want;
    } bad[] = {{"ftp://h/", "expected an http:// or https:// URL"}, {"http://h:0/", "bad port"},
               {"http:///x", "no host"}, {"http://u@h/", "user information"},
               {"http://[::1/", "bad IPv6"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        MCPG_CHECK(up_url_check(bad[i].url, err, sizeof err) == -1 && strstr(err, bad[i].want),
                   "%s: %s", bad[i].url, err);
    MCPG_CHECK(up_url_check("https://[::1]:8443/mcp?a=b", err, sizeof err) == 0, "ipv6: %s", err);
    MCPG_CHECK(up_url_check("https://alice:s3cr3t-pw@up.example/mcp", err, sizeof err) == -1 &&
                   strstr(err, "user information is not supported") && !strstr(err, "s3cr3t-pw") &&
                   strstr(err, "https://[REDACTED]@up.example/mcp"),
               "user information refused without repeating the password: %s", err);
    up_tls_opts o = {.ca_file = "/nonexistent/ca.pem"};
    MCPG_CHECK(!up_target_new("https://127.0.0.1:1/", &o, 0, err, sizeof err) &&
                   strstr(err, "ca_file: cannot read /nonexistent/ca.pem: No such file"),
               "missing ca_file: %s", err);
    MCPG_CHECK(!up_target_new("http://no-such-host.invalid/", NULL, 0, err, sizeof err) &&
                   strstr(err, "cannot resolve host \"no-such-host.invalid\""),
               "unresolvable: %s", err);
}

/* Where a request made for a client may go (up_dest.c). */
static void test_destinations(void) {
    static const struct { const char *ip; const char *why; } addrs[] = {
        {"127.0.0.1", "loopback"}, {"127.9.9.9", "loopback"}, {"10.1.2.3", "private"},
        {"172.16.0.1", "private"}, {"172.31.255.255", "private"}, {"192.168.1.1", "private"},
        {"169.254.169.254", "link-local"}, {"100.64.0.1", "carrier-grade NAT"},
        {"0.0.0.0", "unspecified"}, {"224.0.0.1", "multicast"}, {"255.255.255.255", "broadcast"},
        {"::1", "loopback"}, {"::", "unspecified"}, {"fe80::1", "link-local"},
        {"fd00::1", "unique-local"}, {"ff02::1", "multicast"}, {"::ffff:127.0.0.1", "loopback"},
        {"::ffff:10.0.0.1", "private"}, {"64:ff9b::a9fe:a9fe", "link-local"},
        {"8.8.8.8", NULL}, {"172.32.0.1", NULL}, {"2606:4700::1111", NULL}};
    for (size_t i = 0; i < sizeof addrs / sizeof *addrs; i++) {
        struct sockaddr_storage ss = {0};
        struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, addrs[i].ip, &v4->sin_addr) == 1) ss.ss_family = AF_INET;
        else if (inet_pton(AF_INET6, addrs[i].ip, &v6->sin6_addr) == 1) ss.ss_family = AF_INET6;
        const char *why = up_addr_not_public((struct sockaddr *)&ss);
        MCPG_CHECK(addrs[i].why ? why && strstr(why, addrs[i].why) : !why, "%s: %s (want %s)",
                   addrs[i].ip, why ? why : "public", addrs[i].why ? addrs[i].why : "public");
    }
    char err[512];
    static const char *const none[1] = {NULL};
    MCPG_CHECK(up_dest_check_url("http://localhost:9/x", none, 0, err, sizeof err) == -1 &&
                   strstr(err, "this machine"), "localhost refused: %s", err);
    MCPG_CHECK(up_dest_check_url("https://[::1]:8443/", none, 0, err, sizeof err) == -1 &&
                   strstr(err, "loopback"), "[::1] refused: %s", err);
    MCPG_CHECK(up_dest_check_url("http://127.0.0.1:9/admin/reload", none, 0, err, sizeof err) == -1 &&
                   strstr(err, "127.0.0.1") && strstr(err, "loopback"), "127.0.0.1 refused: %s", err);
    MCPG_CHECK(up_dest_check_url("https://hooks.example.com/x", none, 0, err, sizeof err) == 0,
               "a name passes until it is resolved");
    static const char *const allow[] = {"10.0.0.0/8", "hooks.internal", "::1"};
    MCPG_CHECK(up_dest_check_url("http://10.9.8.7/", allow, 3, err, sizeof err) == 0, "allowed CIDR");
    MCPG_CHECK(up_dest_check_url("http://HOOKS.internal/", allow, 3, err, sizeof err) == 0, "allowed name");
    MCPG_CHECK(up_dest_check_url("http://[::1]/", allow, 3, err, sizeof err) == 0, "allowed ::1");
    MCPG_CHECK(up_dest_check_url("http://11.0.0.1/", allow, 3, err, sizeof err) == 0, "public");
    MCPG_CHECK(up_dest_check_url("http://192.168.0.1/", allow, 3, err, sizeof err) == -1,
               "private outside the allowed blocks");
    /* a name is judged by what it resolves to, the address connected to */
    up_target *t = up_target_new("http://localhost.:9/", NULL, 0, err, sizeof err);
    if (t) {
        MCPG_CHECK(up_dest_check_target(t, "http://localhost.:9/", none, 0, err, sizeof err) == -1 &&
                       strstr(err, "loopback"), "a name resolving to loopback: %s", err);
        up_target_free(t);
    }
    struct sockaddr_in any = {.sin_family = AF_INET};
    MCPG_CHECK(up_addr_in_cidr((struct sockaddr *)&any, "10.0.0.0/33") == -1 &&
                   up_addr_in_cidr((struct sockaddr *)&any, "nope") == -1, "bad CIDR blocks");
}

static void test_plain_chunked_close(void) {
    up_target *t;
    up_pool *p = pool_at("http", tsrv_port(plain), NULL, 4, 8, &t);
    res a = {0}, b = {0}, c = {0}, g = {0};
    get(p, "/", &a);
    get(p, "/chunked", &b);
    get(p, "/close", &c);
    get(p, "/garbage", &g);
    run_until(&a.done, GUARD_MS);
    run_until(&b.done, GUARD_MS);
    run_until(&c.done, GUARD_MS);
    run_until(&g.done, GUARD_MS);
    MCPG_CHECK(a.err == 0 && a.status == 200 && a.x_test && strcmp(a.body, "{\"ok\":true}") == 0,
               "plain: %d %d %s", a.err, a.status, a.body);
    MCPG_CHECK(b.err == 0 && strcmp(b.body, "hello world") == 0, "chunked: %d %s", b.err, b.body);
    MCPG_CHECK(c.err == 0 && strcmp(c.body, "until-close") == 0, "until close: %d %s", c.err, c.body);
    MCPG_CHECK(g.err == UP_EPROTO && strstr(g.detail, "malformed"), "garbage: %d %s", g.err, g.detail);
    pool_end(p, t);
}

/* SSE-like: the first piece arrives while the server still holds the rest
 * (it sends it only once the client has seen the first). */
static void test_streamed(void) {
    up_target *t;
    up_pool *p = pool_at("http", tsrv_port(plain), NULL, 4, 8, &t);
    res s = {.release_on_first = 1};
    get(p, "/stream", &s);
    run_until(&s.done, GUARD_MS);
    MCPG_CHECK(s.err == 0 && strcmp(s.first, "part1") == 0 && strcmp(s.body, "part1part2") == 0 &&
                   s.nbody >= 2,
               "streamed: err %d first '%s' body '%s' pieces %d", s.err, s.first, s.body, s.nbody);
    pool_end(p, t);
}

static void test_keep_alive(void) {
    up_target *t;
    up_pool *p = pool_at("http", tsrv_port(plain), NULL, 4, 8, &t);
    int before = tsrv_accepted(plain);
    for (int i = 0; i < 3; i++) {
        res x = {0};
        get(p, "/", &x);
        run_until(&x.done, GUARD_MS);
        MCPG_CHECK(x.err == 0 && x.status == 200, "request %d: %d", i, x.err);
    }
    MCPG_CHECK(tsrv_accepted(plain) - before == 1, "3 requests, %d connections",
               tsrv_accepted(plain) - before);
    pool_end(p, t);
}

/* max_conns 1, queue 1: the second waits for the first's connection, the
 * third is refused (later, not inside up_send). */
static void test_queue(void) {
    up_target *t;
    up_pool *p = pool_at("http", tsrv_port(plain), NULL, 1, 1, &t);
    int before = tsrv_accepted(plain);
    res a = {0}, b = {0}, c = {0};
    get(p, "/hold", &a);
    get(p, "/hold", &b);
    get(p, "/hold", &c);
    run_until(&c.done, GUARD_MS);
    MCPG_CHECK(c.err == UP_EFULL && !a.done && !b.done, "third refused: %d (a %d b %d)", c.err,
               a.done, b.done);
    run_until(&b.done, GUARD_MS);
    MCPG_CHECK(a.err == 0 && b.err == 0 && strcmp(a.body, "held") == 0 && strcmp(b.body, "held") == 0,
               "both served: %d %d", a.err, b.err);
    MCPG_CHECK(tsrv_accepted(plain) - before == 1, "one connection: %d", tsrv_accepted(plain) - before);
    pool_end(p, t);
}

static void test_abort(void) {
    up_target *t;
    up_pool *p = pool_at("http", tsrv_port(plain), NULL, 4, 8, &t);
    res s = {0};
    get(p, "/stream", &s);
    run_until(&s.nbody, GUARD_MS);
    MCPG_CHECK(s.nbody == 1 && !s.done, "first piece: %d", s.nbody);
    up_req_abort(s.r);
    MCPG_CHECK(s.done && s.err == UP_ECANCEL, "aborted mid-answer: %d %d", s.done, s.err);
    tsrv_release(plain);
    res cb = {.abort_in_body = 1};
    get(p, "/stream", &cb);
    run_until(&cb.done, GUARD_MS);
    MCPG_CHECK(cb.err == UP_ECANCEL && cb.nbody == 1, "on_body said stop: %d", cb.err);
    tsrv_release(plain);
    res slow = {0};
    get(p, "/slow", &slow);
    settle(50);
    up_req_abort(slow.r);
    MCPG_CHECK(slow.done && slow.err == UP_ECANCEL, "slow aborted");
    /* the pool is still good */
    res ok = {0};
    get(p, "/", &ok);
    run_until(&ok.done, GUARD_MS);
    MCPG_CHECK(ok.err == 0 && ok.status == 200, "after aborts: %d", ok.err);
    pool_end(p, t);
}

static void test_refused(void) {
    int port = tsrv_dead_port();
    MCPG_REQUIRE(port > 0, "free port");
    up_target *t;
    up_pool *p = pool_at("http", port, NULL, 4, 8, &t);
    res x = {0};
    get(p, "/", &x);
    run_until(&x.done, GUARD_MS);
    MCPG_CHECK(x.err == UV_ECONNREFUSED, "refused: %s", up_strerror(x.err));
    pool_end(p, t);
}

/* The connect timeout covers the TLS handshake: a listener that accepts
 * (the kernel completes the TCP handshake) and never speaks TLS. */
static void test_connect_timeout(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    MCPG_REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 8) == 0 &&
                     getsockname(fd, (struct sockaddr *)&a, &al) == 0, "mute listener");
    up_tls_opts o = {.ca_file = certs.ca};
    up_target *t = target("https", ntohs(a.sin_port), &o, 200);
    up_pool *p = up_pool_new(&loop, t, 4, 4, 8);
    res x = {0};
    /* the loop idles longer than the timeout first: its clock is behind
     * when the request starts, and the timeout must still count from then */
    usleep(300 * 1000);
    uint64_t t0 = uv_hrtime();
    get(p, "/", &x);
    run_until(&x.done, GUARD_MS);
    uint64_t took = (uv_hrtime() - t0) / 1000000;
    MCPG_CHECK(x.err == UV_ETIMEDOUT && strstr(x.detail, "timed out after 200 ms") && took >= 150 &&
                   took < 2000,
               "timeout: %s (%s) after %llu ms", up_strerror(x.err), x.detail, (unsigned long long)took);
    up_pool_close(p);
    settle(20);
    up_target_free(t);
    close(fd);
}

/* A request sent on a kept connection the upstream has just closed: sent
 * again on a fresh one when retry_stale, UP_ECLOSED otherwise. */
static void test_stale(int retry) {
    up_target *t;
    up_pool *p = pool_at("http", tsrv_port(plain), NULL, 4, 8, &t);
    tsrv_close_after(plain, 1);
    int before = tsrv_accepted(plain);
    res second = {0};
    res first = {.send_next_on = p, .next = &second, .retry_next = retry};
    get(p, "/", &first); /* its on_done sends `second` on the same, now closing, connection */
    run_until(&second.done, GUARD_MS);
    tsrv_close_after(plain, 0);
    MCPG_CHECK(first.err == 0, "first: %d", first.err);
    if (retry)
        MCPG_CHECK(second.err == 0 && second.status == 200 && tsrv_accepted(plain) - before == 2,
                   "retried on a fresh connection: %s, %d connections", up_strerror(second.err),
                   tsrv_accepted(plain) - before);
    else
        MCPG_CHECK((second.err == UP_ECLOSED || second.err == UV_ECONNRESET) &&
                       tsrv_accepted(plain) - before == 1,
                   "not retried: %s, %d connections", up_strerror(second.err),
                   tsrv_accepted(plain) - before);
    pool_end(p, t);
}

static int closed_one(const void *srv) { return tsrv_closed(srv) >= 1; }

/* An idle connection the upstream closes is dropped when the close
 * arrives: the client closes its end with no request sent on it, and the
 * next request, one that may not be resent, goes on a new connection. */
static void test_idle_closed(void) {
    tsrv *s = tsrv_start(NULL); /* its own: its counts are this test's alone */
    MCPG_REQUIRE(s, "test server");
    up_target *t;
    up_pool *p = pool_at("http", tsrv_port(s), NULL, 4, 8, &t);
    tsrv_close_after(s, 1);
    res a = {0}, b = {0};
    get(p, "/", &a);
    run_until(&a.done, GUARD_MS);
    tsrv_close_after(s, 0);
    MCPG_CHECK(run_until_fn(closed_one, s, GUARD_MS), "the pool kept the connection the upstream closed");
    b.r = up_send(p, "GET", "/", NULL, NULL, 0, 0, &cbs, &b);
    run_until(&b.done, GUARD_MS);
    MCPG_CHECK(a.err == 0 && b.err == 0 && tsrv_accepted(s) == 2 && tsrv_requests(s) == 2,
               "%d %d, %d connections, %d requests", a.err, b.err, tsrv_accepted(s), tsrv_requests(s));
    pool_end(p, t);
    tsrv_stop(s);
}

static void test_pool_close_in_flight(void) {
    up_target *t;
    up_pool *p = pool_at("http", tsrv_port(plain), NULL, 1, 4, &t);
    res a = {0}, b = {0};
    get(p, "/slow", &a);
    get(p, "/slow", &b); /* queued */
    settle(50);
    up_pool_close(p);
    MCPG_CHECK(a.done && a.err == UP_ECANCEL && b.done && b.err == UP_ECANCEL, "cancelled: %d %d",
               a.err, b.err);
    settle(20);
    up_target_free(t);
}

/* ------------------------------------------------------------------ */
/* TLS                                                                 */

static void tls_get(const up_tls_opts *o, res *x) {
    up_target *t;
    up_pool *p = pool_at("https", tsrv_port(tls), o, 4, 8, &t);
    get(p, "/", x);
    run_until(&x->done, GUARD_MS);
    pool_end(p, t);
}

static void test_tls(void) {
    res ok = {0}, noca = {0}, insecure = {0}, wrong = {0}, byname = {0};
    up_tls_opts o = {.ca_file = certs.ca};
    tls_get(&o, &ok);
    MCPG_CHECK(ok.err == 0 && ok.status == 200 && strcmp(ok.body, "{\"ok\":true}") == 0,
               "verified with ca_file: %s (%s)", up_strerror(ok.err), ok.detail);
    tls_get(NULL, &noca);
    MCPG_CHECK(noca.err == UP_ETLS && strstr(noca.detail, "certificate verify failed"),
               "refused without ca_file: %s (%s)", up_strerror(noca.err), noca.detail);
    up_tls_opts ins = {.insecure = 1};
    tls_get(&ins, &insecure);
    MCPG_CHECK(insecure.err == 0 && insecure.status == 200, "insecure: %s (%s)",
               up_strerror(insecure.err), insecure.detail);
    up_tls_opts w = {.ca_file = certs.ca, .server_name = "other.example"};
    tls_get(&w, &wrong);
    MCPG_CHECK(wrong.err == UP_ETLS && strstr(wrong.detail, "mismatch"), "wrong name: %s (%s)",
               up_strerror(wrong.err), wrong.detail);
    up_tls_opts n = {.ca_file = certs.ca, .server_name = "localhost"};
    tls_get(&n, &byname);
    MCPG_CHECK(byname.err == 0 && byname.status == 200, "by name: %s (%s)", up_strerror(byname.err),
               byname.detail);
}

static void test_tls_keep_alive_chunked(void) {
    up_tls_opts o = {.ca_file = certs.ca};
    up_target *t;
    up_pool *p = pool_at("https", tsrv_port(tls), &o, 4, 8, &t);
    int before = tsrv_accepted(tls);
    for (int i = 0; i < 3; i++) {
        res x = {0};
        get(p, "/chunked", &x);
        run_until(&x.done, GUARD_MS);
        MCPG_CHECK(x.err == 0 && strcmp(x.body, "hello world") == 0, "tls %d: %s", i, x.detail);
    }
    MCPG_CHECK(tsrv_accepted(tls) - before == 1, "one TLS connection: %d", tsrv_accepted(tls) - before);
    pool_end(p, t);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    MCPG_REQUIRE(uv_loop_init(&loop) == 0, "loop");
    MCPG_REQUIRE(tcerts_make(&certs) == 0, "certificates (openssl command) in %s", certs.dir);
    SSL_CTX *sctx = tcerts_server_ctx(&certs);
    MCPG_REQUIRE(sctx, "server TLS context");
    plain = tsrv_start(NULL);
    tls = tsrv_start(sctx);
    MCPG_REQUIRE(plain && tls, "test servers");
    test_target();
    test_destinations();
    test_plain_chunked_close();
    test_streamed();
    test_keep_alive();
    test_queue();
    test_abort();
    test_refused();
    test_connect_timeout();
    test_stale(1);
    test_stale(0);
    test_idle_closed();
    test_pool_close_in_flight();
    test_tls();
    test_tls_keep_alive_chunked();
    settle(50);
    MCPG_CHECK(uv_loop_close(&loop) == 0, "every handle closed");
    tsrv_stop(plain);
    tsrv_stop(tls);
    SSL_CTX_free(sctx);
    tcerts_remove(&certs);
    return MCPG_CHECK_EXIT("test_upclient");
}
