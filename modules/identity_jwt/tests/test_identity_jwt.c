/* identity_jwt's .so through the SDK's fake host: config errors at check;
 * with a JWKS file: pass (no header, another scheme, an API key), accept
 * (each algorithm: principal, tenant, roles, claims, method "jwt"), refuse
 * (401, -32001, an RFC 6750 challenge naming the resource metadata and what
 * failed, never the token), a file re-read by `reloaded` (a bad one keeps
 * the keys before); with a JWKS URL served by a thread of this test: the
 * first call waits for the first fetch, an unknown kid waits for one fetch
 * (key rotation) and a second unknown kid soon after does not fetch again,
 * calls held while the fetch is slow, the URL down (cached keys serve on;
 * no keys ever: 503 with Retry-After). Also the cost of a call, with and
 * without the verified-token cache.
 * Usage: test_identity_jwt path/to/identity_jwt.so */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <arpa/inet.h>
#include <stddef.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "jwt_testkeys.h"

static const char *so_path;
static mcpg_fakehost *fh;
static char dir[64];

#define ISS "https://issuer.example"
#define META "https://gw.example/.well-known/oauth-protected-resource"

/* ---- keys and tokens ------------------------------------------------------------ */

typedef struct key {
    const char *alg, *kid;
    EVP_PKEY *pk;
    char *jwk;
} key;

static key keys[4] = {{"RS256", "r1", NULL, NULL}, {"ES256", "e1", NULL, NULL},
                      {"EdDSA", "d1", NULL, NULL}, {"ES256", "e2", NULL, NULL}};

static void make_keys(void) {
    for (int i = 0; i < 4; i++) {
        keys[i].pk = tk_keygen(keys[i].alg);
        MCPG_REQUIRE(keys[i].pk, "keygen");
        keys[i].jwk = tk_jwk(keys[i].pk, keys[i].alg, keys[i].kid);
        MCPG_REQUIRE(keys[i].jwk, "jwk");
    }
}

/* {"keys":[...]} of keys[i] for each i in `which` ("012") */
static char *jwks_of(const char *which) {
    size_t cap = 16;
    for (const char *w = which; *w; w++) cap += strlen(keys[*w - '0'].jwk) + 1;
    char *out = malloc(cap);
    strcpy(out, "{\"keys\":[");
    for (const char *w = which; *w; w++) {
        if (w != which) strcat(out, ",");
        strcat(out, keys[*w - '0'].jwk);
    }
    strcat(out, "]}");
    return out;
}

static char *token_ex(int k, const char *claims_extra, long exp_in) {
    char header[96], claims[512];
    snprintf(header, sizeof header, "{\"alg\":\"%s\",\"kid\":\"%s\",\"typ\":\"JWT\"}",
             keys[k].alg, keys[k].kid);
    snprintf(claims, sizeof claims,
             "{\"iss\":\"" ISS "\",\"aud\":[\"mcp\"],\"sub\":\"alice\",\"exp\":%ld,"
             "\"org\":\"acme\",\"scope\":\"tools:read tools:call\"%s}",
             (long)time(NULL) + exp_in, claims_extra);
    char *t = tk_token(keys[k].pk, keys[k].alg, header, claims);
    MCPG_REQUIRE(t, "token");
    return t;
}

static char *token(int k) {
    return token_ex(k, "", 600);
}

static void write_file(const char *path, const char *text) {
    MCPG_REQUIRE(mcpg_fakehost_write_file(path, text) == 0, "write %s", path);
}

/* ---- calls ------------------------------------------------------------------------ */

typedef struct answer {
    int st;
    char principal[64], tenant[64], roles[128], method[16];
    int has_claims;
    int64_t code;
    char message[256];
    int http;
    uint32_t retry;
    char challenge[512];
} answer;

static void read_answer(mcpg_call *c, answer *a) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    const char *p = h->call_principal(c), *t = h->call_tenant(c), *m = h->call_auth_method(c);
    snprintf(a->principal, sizeof a->principal, "%s", p ? p : "");
    snprintf(a->tenant, sizeof a->tenant, "%s", t ? t : "");
    snprintf(a->method, sizeof a->method, "%s", m ? m : "");
    a->roles[0] = '\0';
    for (uint32_t i = 0; i < h->call_role_count(c); i++)
        snprintf(a->roles + strlen(a->roles), sizeof a->roles - strlen(a->roles), "%s%s",
                 i ? "," : "", h->call_role(c, i));
    size_t n;
    a->has_claims = h->call_claims(c, &n) != NULL;
    a->code = mcpg_fakehost_error_code(c);
    const char *msg = mcpg_fakehost_error_message(c);
    snprintf(a->message, sizeof a->message, "%s", msg ? msg : "");
    mcpg_call_outcome o = {.size = sizeof o};
    mcpg_fakehost_outcome(c, &o);
    a->http = o.http_status;
    a->retry = o.retry_after_s;
    snprintf(a->challenge, sizeof a->challenge, "%s", o.www_authenticate ? o.www_authenticate : "");
}

/* One authenticate with this Authorization header (NULL: none). */
static answer call_with(mcpg_instance *inst, const char *authorization) {
    answer a;
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", NULL, NULL);
    MCPG_REQUIRE(c, "call_new");
    if (authorization) mcpg_fakehost_call_set_header(c, "authorization", authorization);
    a.st = mcpg_fakehost_run(fh, inst, c, 10000);
    read_answer(c, &a);
    mcpg_fakehost_call_free(fh, c);
    return a;
}

static answer call_token(mcpg_instance *inst, const char *tok) {
    char *hdr;
    MCPG_REQUIRE(asprintf(&hdr, "Bearer %s", tok) > 0, "asprintf");
    answer a = call_with(inst, hdr);
    free(hdr);
    return a;
}

static void expect_refused(answer a, int http, const char *why, const char *what) {
    MCPG_CHECK(a.st == MCPG_DENY, "%s: status %d", what, a.st);
    MCPG_CHECK(a.http == http, "%s: http %d", what, a.http);
    MCPG_CHECK(strstr(a.message, why) != NULL, "%s: message %s", what, a.message);
    if (http == 401) {
        MCPG_CHECK(a.code == -32001, "%s: code %lld", what, (long long)a.code);
        MCPG_CHECK(strstr(a.challenge, "Bearer resource_metadata=\"" META "\", "
                                       "error=\"invalid_token\", error_description=\"") ==
                       a.challenge && strstr(a.challenge, why),
                   "%s: challenge %s", what, a.challenge);
    } else {
        MCPG_CHECK(a.code == -32000 && a.retry >= 1, "%s: code %lld retry %u", what,
                   (long long)a.code, a.retry);
    }
}

static void expect_accepted(answer a, const char *what) {
    MCPG_CHECK(a.st == MCPG_CONTINUE && strcmp(a.principal, "alice") == 0,
               "%s: status %d principal '%s' (%s)", what, a.st, a.principal, a.message);
    MCPG_CHECK(strcmp(a.tenant, "acme") == 0 && strcmp(a.roles, "tools:read,tools:call") == 0,
               "%s: tenant '%s' roles '%s'", what, a.tenant, a.roles);
    MCPG_CHECK(a.has_claims && strcmp(a.method, "jwt") == 0, "%s: claims %d method '%s'", what,
               a.has_claims, a.method);
}

static char *config(const char *source) {
    char *c;
    MCPG_REQUIRE(asprintf(&c,
                          "{\"issuer\":\"" ISS "\",\"audience\":\"mcp\",%s,"
                          "\"tenant_claim\":\"org\",\"roles_claim\":\"scope\","
                          "\"resource_metadata_url\":\"" META "\","
                          "\"jwks_min_refresh_ms\":300,\"jwks_timeout_ms\":2000,"
                          "\"max_waiters\":3}",
                          source) > 0,
                 "asprintf");
    return c;
}

/* An instance with config(source) loaded. */
static mcpg_instance *load_with(const char *source) {
    char *cfg = config(source);
    mcpg_instance *inst;
    MCPG_REQUIRE(mcpg_fakehost_load_file(fh, so_path, "jwt", cfg, &inst) == 0, "load: %s",
                 mcpg_fakehost_report_text(fh));
    free(cfg);
    return inst;
}

/* ---- config errors ------------------------------------------------------------------ */

static void check_bad(const char *json, const char *want) {
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, so_path, "jwt", json, &inst);
    MCPG_CHECK(rc == MCPG_ECONFIG && strstr(mcpg_fakehost_report_text(fh), want),
               "config %s: rc %d, report: %s", json, rc, mcpg_fakehost_report_text(fh));
    if (rc == 0) mcpg_fakehost_unload(fh, inst);
}

static void test_config(void) {
    char bad[128], *c;
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    write_file(bad, "{\"keys\":[{\"kty\":\"oct\",\"k\":\"AA\"}]}");
    check_bad("{\"issuer\":\"i\",\"audience\":\"a\"}", "jwks_file: is required (or jwks_url)");
    check_bad("{\"issuer\":\"i\",\"audience\":\"a\",\"jwks_file\":\"/x\",\"jwks_url\":\"http://x/\"}",
              "jwks_url: set jwks_file or jwks_url, not both");
    check_bad("{\"audience\":\"a\",\"jwks_url\":\"http://x/\"}", "issuer");
    check_bad("{\"issuer\":\"i\",\"audience\":\"a\",\"jwks_url\":\"ftp://x/\"}", "jwks_url: ");
    check_bad("{\"issuer\":\"i\",\"audience\":\"a\",\"jwks_file\":\"/nonexistent.json\"}",
              "jwks_file: cannot read /nonexistent.json");
    MCPG_REQUIRE(asprintf(&c, "{\"issuer\":\"i\",\"audience\":\"a\",\"jwks_file\":\"%s\"}", bad) > 0,
                 "asprintf");
    check_bad(c, "no usable signing key");
    free(c);
    check_bad("{\"issuer\":\"i\",\"audience\":\"a\",\"jwks_url\":\"http://x/\","
              "\"algorithms\":[\"RS256\",\"HS256\"]}", "algorithms[1]: must be");
    check_bad("{\"issuer\":\"i\",\"audience\":\"a\",\"jwks_url\":\"http://x/\",\"algorithms\":[]}",
              "algorithms: must name an algorithm");
    check_bad("{\"issuer\":\"i\",\"audience\":\"a\",\"jwks_url\":\"http://x/\","
              "\"resource_metadata_url\":\"https://x/\\\"y\"}", "resource_metadata_url: ");
    check_bad("{\"issuer\":\"i\",\"audience\":\"a\",\"jwks_url\":\"http://x/\","
              "\"jwks_refresh_ms\":1000,\"jwks_min_refresh_ms\":5000}", "jwks_min_refresh_ms: ");
}

/* ---- a JWKS file ---------------------------------------------------------------------- */

static void test_file(void) {
    char path[128], source[192];
    snprintf(path, sizeof path, "%s/jwks.json", dir);
    char *jw = jwks_of("012");
    write_file(path, jw);
    free(jw);
    snprintf(source, sizeof source, "\"jwks_file\":\"%s\"", path);
    mcpg_instance *inst = load_with(source);

    answer a = call_with(inst, NULL);
    MCPG_CHECK(a.st == MCPG_CONTINUE && !a.principal[0], "no header: passes");
    a = call_with(inst, "Basic YWxpY2U6cHc=");
    MCPG_CHECK(a.st == MCPG_CONTINUE && !a.principal[0], "another scheme: passes");
    a = call_with(inst, "Bearer sk_live_0123456789abcdef");
    MCPG_CHECK(a.st == MCPG_CONTINUE && !a.principal[0], "an API key: passes");

    for (int k = 0; k < 3; k++) {
        char *t = token(k), what[32];
        snprintf(what, sizeof what, "good %s", keys[k].alg);
        expect_accepted(call_token(inst, t), what);
        /* the second time from the cache: the same answer */
        snprintf(what, sizeof what, "good %s again", keys[k].alg);
        expect_accepted(call_token(inst, t), what);
        free(t);
    }
    char *t = token(0), *lower;
    MCPG_REQUIRE(asprintf(&lower, "bearer   %s  ", t) > 0, "asprintf");
    expect_accepted(call_with(inst, lower), "scheme in lower case, spaces around");
    free(lower);
    free(t);

    /* an ABI 1.1 kernel: no call_identify, no challenges: identity the 1.0 way */
    mcpg_host *host = mcpg_fakehost_host(fh);
    uint32_t size = host->size;
    host->size = (uint32_t)offsetof(mcpg_host, call_peer);
    t = token(2);
    a = call_token(inst, t);
    host->size = size;
    MCPG_CHECK(a.st == MCPG_CONTINUE && strcmp(a.principal, "alice") == 0 &&
                   strcmp(a.tenant, "acme") == 0 && strcmp(a.roles, "tools:read,tools:call") == 0,
               "1.1 kernel: status %d principal '%s' tenant '%s' roles '%s'", a.st, a.principal,
               a.tenant, a.roles);
    free(t);

    t = token_ex(1, "", -3600);
    a = call_token(inst, t);
    expect_refused(a, 401, "the token expired", "expired");
    MCPG_CHECK(!strstr(a.message, t) && !strstr(a.challenge, t), "the token is never echoed");
    free(t);
    t = token_ex(1, ",\"nbf\":9999999999", 600);
    expect_refused(call_token(inst, t), 401, "not valid yet", "nbf");
    free(t);
    t = token(3); /* kid e2: not in the file */
    expect_refused(call_token(inst, t), 401, "unknown key id", "unknown kid, a file");

    /* the file re-read at reload: e2 appears */
    jw = jwks_of("03");
    write_file(path, jw);
    free(jw);
    MCPG_CHECK(mcpg_fakehost_reloaded(fh, inst) == 0, "reloaded");
    expect_accepted(call_token(inst, t), "a key added to the file, after reload");
    char *t2 = token(1); /* e1 left the file */
    expect_refused(call_token(inst, t2), 401, "unknown key id", "a key removed at reload");
    free(t2);
    /* a bad file at reload: the keys before stay */
    write_file(path, "{\"keys\":");
    MCPG_CHECK(mcpg_fakehost_reloaded(fh, inst) == 0, "reloaded (bad)");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "the keys read before stay in use"), "logged");
    expect_accepted(call_token(inst, t), "old keys after a bad reload");
    free(t);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

/* ---- a JWKS URL served by this test ------------------------------------------------- */

static struct {
    int lfd, port;
    pthread_t th;
    atomic_int stop, requests, delay_ms;
    pthread_mutex_t lock;
    char *body; /* NULL: answer 503 */
} srv;

static void serve(int fd) {
    char req[4096];
    size_t n = 0;
    while (n < sizeof req - 1 && !memmem(req, n, "\r\n\r\n", 4)) {
        ssize_t r = read(fd, req + n, sizeof req - 1 - n);
        if (r <= 0) return;
        n += (size_t)r;
    }
    atomic_fetch_add(&srv.requests, 1);
    if (atomic_load(&srv.delay_ms)) usleep((useconds_t)atomic_load(&srv.delay_ms) * 1000);
    pthread_mutex_lock(&srv.lock);
    char *out = NULL;
    int len = srv.body ? asprintf(&out,
                                  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                  "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                                  strlen(srv.body), srv.body)
                       : asprintf(&out, "HTTP/1.1 503 Unavailable\r\nContent-Length: 0\r\n"
                                        "Connection: close\r\n\r\n");
    pthread_mutex_unlock(&srv.lock);
    if (len > 0) (void)!write(fd, out, (size_t)len);
    free(out);
}

static void *srv_main(void *arg) {
    while (!atomic_load(&srv.stop)) {
        struct pollfd p = {srv.lfd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int fd = accept(srv.lfd, NULL, NULL);
        if (fd < 0) continue;
        serve(fd);
        close(fd);
    }
    return NULL;
}

static void srv_set(const char *which) {
    pthread_mutex_lock(&srv.lock);
    free(srv.body);
    srv.body = which ? jwks_of(which) : NULL;
    pthread_mutex_unlock(&srv.lock);
}

static void srv_start(void) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    srv.lfd = socket(AF_INET, SOCK_STREAM, 0);
    MCPG_REQUIRE(srv.lfd >= 0 && bind(srv.lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
                     listen(srv.lfd, 16) == 0 &&
                     getsockname(srv.lfd, (struct sockaddr *)&a, &al) == 0,
                 "listen");
    srv.port = ntohs(a.sin_port);
    pthread_mutex_init(&srv.lock, NULL);
    MCPG_REQUIRE(pthread_create(&srv.th, NULL, srv_main, NULL) == 0, "thread");
}

static void srv_stop(void) {
    atomic_store(&srv.stop, 1);
    pthread_join(srv.th, NULL);
    close(srv.lfd);
    free(srv.body);
    pthread_mutex_destroy(&srv.lock);
}

static mcpg_instance *load_url(int port) {
    char source[128];
    snprintf(source, sizeof source, "\"jwks_url\":\"http://127.0.0.1:%d/jwks.json\"", port);
    return load_with(source);
}

static void test_url(void) {
    srv_start();
    srv_set("012");
    mcpg_instance *inst = load_url(srv.port);
    char *t = token(1);
    /* the first call meets no keys yet: it waits for the first fetch */
    expect_accepted(call_token(inst, t), "first call, first fetch");
    MCPG_CHECK(atomic_load(&srv.requests) == 1, "one fetch: %d", atomic_load(&srv.requests));
    free(t);

    /* rotation: e2 appears at the URL; its first token fetches once */
    srv_set("0123");
    mcpg_fakehost_run_for(fh, 350); /* past jwks_min_refresh_ms */
    t = token(3);
    expect_accepted(call_token(inst, t), "new kid after rotation");
    MCPG_CHECK(atomic_load(&srv.requests) == 2, "the unknown kid fetched once: %d",
               atomic_load(&srv.requests));
    expect_accepted(call_token(inst, t), "new kid again");
    MCPG_CHECK(atomic_load(&srv.requests) == 2, "no fetch for a known kid");
    free(t);

    /* another unknown kid at once: no second fetch within min_refresh */
    EVP_PKEY *stranger = tk_keygen("ES256");
    char *st = tk_token(stranger, "ES256", "{\"alg\":\"ES256\",\"kid\":\"zz\"}",
                        "{\"iss\":\"" ISS "\",\"aud\":\"mcp\",\"sub\":\"x\",\"exp\":9999999999}");
    expect_refused(call_token(inst, st), 401, "unknown key id", "unknown kid, too soon");
    MCPG_CHECK(atomic_load(&srv.requests) == 2, "not fetched again: %d",
               atomic_load(&srv.requests));

    /* calls arriving during a slow fetch join it: one request for all */
    mcpg_fakehost_run_for(fh, 350);
    atomic_store(&srv.delay_ms, 200);
    mcpg_call *held[3];
    for (int i = 0; i < 3; i++) {
        held[i] = mcpg_fakehost_call_new(fh, "tools/call", "echo", NULL, NULL);
        char *hdr;
        MCPG_REQUIRE(asprintf(&hdr, "Bearer %s", st) > 0, "asprintf");
        mcpg_fakehost_call_set_header(held[i], "authorization", hdr);
        free(hdr);
        MCPG_CHECK(mcpg_fakehost_dispatch(fh, inst, held[i]) == MCPG_PENDING, "held %d", i);
    }
    /* max_waiters (3) are waiting: the next is turned away at once */
    char *hdr4;
    MCPG_REQUIRE(asprintf(&hdr4, "Bearer %s", st) > 0, "asprintf");
    expect_refused(call_with(inst, hdr4), 503, "too many calls are waiting", "max_waiters");
    free(hdr4);
    for (int i = 0; i < 3; i++) {
        answer a;
        a.st = mcpg_fakehost_wait(fh, held[i], 10000);
        read_answer(held[i], &a);
        expect_refused(a, 401, "unknown key id", "held call, kid still unknown");
        mcpg_fakehost_call_free(fh, held[i]);
    }
    MCPG_CHECK(atomic_load(&srv.requests) == 3, "the held calls shared one fetch: %d",
               atomic_load(&srv.requests));
    atomic_store(&srv.delay_ms, 0);

    /* the URL down: the keys fetched before serve on */
    srv_set(NULL);
    mcpg_fakehost_run_for(fh, 350);
    expect_refused(call_token(inst, st), 401, "unknown key id", "unknown kid, URL down");
    t = token(0);
    expect_accepted(call_token(inst, t), "cached keys while the URL is down");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "answered HTTP 503; the keys fetched before"),
               "the failed fetch is logged");
    free(t);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");

    /* started with the URL down: refused with 503 until it comes up */
    mcpg_fakehost_log_clear(fh);
    inst = load_url(srv.port);
    t = token(2);
    answer a = call_token(inst, t);
    expect_refused(a, 503, "signing keys (JWKS) are not available", "no keys ever");
    a = call_token(inst, t);
    expect_refused(a, 503, "signing keys (JWKS) are not available", "no keys, too soon");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "no keys yet: tokens are refused (503)"),
               "logged as refused");
    srv_set("2");
    mcpg_fakehost_run_for(fh, 350);
    expect_accepted(call_token(inst, t), "the URL came up");
    free(t);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    free(st);
    EVP_PKEY_free(stranger);
    srv_stop();
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: test_identity_jwt path/to/identity_jwt.so");
    so_path = argv[1];
    snprintf(dir, sizeof dir, "/tmp/test_identity_jwt-XXXXXX");
    MCPG_REQUIRE(mkdtemp(dir), "mkdtemp");
    make_keys();
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fakehost");
    mcpg_fakehost_set_quiet(fh, 1);
    test_config();
    test_file();
    test_url();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    MCPG_CHECK(system(cmd) == 0, "rm");
    for (int i = 0; i < 4; i++) {
        EVP_PKEY_free(keys[i].pk);
        free(keys[i].jwk);
    }
    return MCPG_CHECK_EXIT("test_identity_jwt");
}
