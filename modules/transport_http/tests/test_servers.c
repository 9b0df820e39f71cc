/* Virtual servers (ABI 1.12): the real transport_http.so in the SDK's fake
 * host, coordinator_memory.so as the store of legacy sessions, the loop on
 * a thread of its own, driven by raw TCP clients from this thread.
 *
 * The fake host declares three servers: "a" (/mcp/a, its own serverInfo
 * and instructions), "b" (/mcp/b, neither) and "h" (/mcp/h, served only for
 * Host tenant.example). What is shown:
 *  - a call on a server's path reaches call_submit naming it (desc.server)
 *    on both wires; one on /mcp names none; an unknown path is 404, and a
 *    Host-bound server is found only with its Host;
 *  - server/discover and initialize answer the server's serverInfo and
 *    instructions, and every 2026-07-28 result carries its serverInfo;
 *  - a legacy session belongs to the path it was initialized on: used on
 *    another server's path, or on /mcp (and a session of /mcp on a server's
 *    path), POST, GET and DELETE get exactly the answer an unknown session
 *    gets; a row written before virtual servers (no "sv") is a session of
 *    /mcp, read from the store as a row of "a" is.
 *
 * Usage: test_th_servers transport_http.so coordinator_memory.so */
#include <arpa/inet.h>
#include <mcpg/check.h>
#include <mcpg/fakehost.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WAIT_MS 3000
#define INFO_A "{\"name\":\"srv-a\",\"version\":\"1.0\",\"title\":\"Server A\"}"
#define INSTR_A "Use \"a\" for invoices."
#define INSTR_A_JSON "\"Use \\\"a\\\" for invoices.\""
#define GW_INFO "{\"name\":\"test-gw\",\"version\":\"9.9.9\"}"
#define META                                                                 \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"

static int port;
static mcpg_fakehost *fh;

/* ---- a raw client: one request, one answer, on a connection of its own ------------ */

typedef struct resp {
    int status;
    char head[2048];
    char body[1 << 14];
} resp;

static int cli_connect(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    MCPG_REQUIRE(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static const char *header_of(const resp *r, const char *name) {
    static char val[256];
    size_t nl = strlen(name);
    for (const char *p = strstr(r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        if (strncasecmp(p + 2, name, nl) || p[2 + nl] != ':') continue;
        const char *v = p + 3 + nl;
        while (*v == ' ') v++;
        size_t k = strcspn(v, "\r");
        snprintf(val, sizeof val, "%.*s", (int)k, v);
        return val;
    }
    return NULL;
}

/* Read until the head is whole and Content-Length bytes of body followed (a
 * stream's head alone: it has no length). 0 when the answer did not come. */
static int read_resp(int fd, resp *r) {
    char buf[sizeof r->head + sizeof r->body];
    size_t len = 0;
    memset(r, 0, sizeof *r);
    for (;;) {
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end) {
            size_t hl = (size_t)(end - buf) + 4;
            snprintf(r->head, sizeof r->head, "%.*s", (int)hl, buf);
            const char *cl = header_of(r, "Content-Length");
            size_t bl = cl ? (size_t)atol(cl) : 0;
            if (len >= hl + bl) {
                r->status = atoi(buf + 9);
                snprintf(r->body, sizeof r->body, "%.*s", (int)bl, buf + hl);
                return 1;
            }
        }
        struct pollfd p = {fd, POLLIN, 0};
        if (len + 1 >= sizeof buf || poll(&p, 1, WAIT_MS) <= 0) return 0;
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0) return 0;
        len += (size_t)n;
    }
}

static resp *roundtrip(const char *req) {
    static resp r;
    int fd = cli_connect();
    size_t n = strlen(req);
    MCPG_REQUIRE(send(fd, req, n, MSG_NOSIGNAL) == (ssize_t)n, "send");
    if (!read_resp(fd, &r)) r.status = -1;
    close(fd);
    return &r;
}

static int has(const resp *r, const char *s) { return strstr(r->body, s) != NULL; }

/* A POST of body to path; extra: more header lines, each ending in CRLF. */
static resp *post(const char *path, const char *host, const char *extra, const char *body) {
    static char req[8192];
    snprintf(req, sizeof req,
             "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
             "Accept: application/json, text/event-stream\r\n%sContent-Length: %zu\r\n\r\n%s",
             path, host, extra, strlen(body), body);
    return roundtrip(req);
}

/* A 2026-07-28 tools/call of echo. */
static resp *stateless_call(const char *path, const char *host) {
    return post(path, host, "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
                            "Mcp-Name: echo\r\n",
                "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{"
                "\"name\":\"echo\",\"arguments\":{}," META "}}");
}

/* A legacy request on session sid ("" none). */
static resp *legacy(const char *path, const char *sid, const char *body) {
    char extra[128] = "";
    if (sid[0]) snprintf(extra, sizeof extra, "Mcp-Session-Id: %s\r\n", sid);
    return post(path, "localhost", extra, body);
}

static resp *legacy_other(const char *method, const char *path, const char *sid) {
    char req[512];
    snprintf(req, sizeof req,
             "%s %s HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n"
             "Mcp-Session-Id: %s\r\n\r\n",
             method, path, sid);
    return roundtrip(req);
}

/* ---- the host: how calls are answered, and the store --------------------------------- */

static int method_is(const mcpg_call_desc *d, const char *s) {
    return d->method_len == strlen(s) && !memcmp(d->method, s, d->method_len);
}

/* The identity calls of what the transport answers itself get {} (as the
 * kernel's pipeline with no identity stage); every other call an echo. */
static void plan_call(void *arg, mcpg_call *call, const mcpg_call_desc *d,
                      mcpg_fakehost_plan *plan) {
    const mcpg_host *h = arg;
    plan->answer = MCPG_FAKEHOST_NOW;
    static const char echoed[] = "{\"content\":[{\"type\":\"text\",\"text\":\"echoed\"}]}";
    if (method_is(d, MCPG_SESSION_METHOD) || method_is(d, "initialize"))
        h->call_result(call, "{}", 2);
    else
        h->call_result(call, echoed, sizeof echoed - 1);
}

/* The server the last call named: "" none, "-" no call yet. */
static const char *last_server(void) {
    static char s[72];
    if (mcpg_fakehost_last_server(fh, s, sizeof s) < 0) snprintf(s, sizeof s, "-");
    return s;
}

static void forget_last_server(void) {
    /* a desc of the gateway's /mcp names none: a marker a failed route leaves */
    resp *r = stateless_call("/mcp", "localhost");
    MCPG_REQUIRE(r->status == 200 && !strcmp(last_server(), ""), "marker call on /mcp: %d",
                 r->status);
}

/* A session row put straight into the store, as another replica (or a
 * transport from before virtual servers) wrote it. */
typedef struct row_put {
    const char *sid, *row;
    atomic_int done;
} row_put;

static void on_put(void *arg, int status, const mcpg_coord_value *v) {
    (void)v;
    atomic_store(&((row_put *)arg)->done, status == 0 ? 1 : -1);
}

static void put_on_loop(void *arg) {
    row_put *p = arg;
    const mcpg_host *h = mcpg_fakehost_host(fh);
    void *ci = NULL;
    const mcpg_coordinator_ops *ops = h->coordinator(&ci);
    char key[64];
    int kn = snprintf(key, sizeof key, "mcpg.session.%s", p->sid);
    if (ops->put(ci, mcpg_fakehost_worker(fh), key, (size_t)kn, p->row, strlen(p->row), 60000,
                 on_put, p) < 0)
        atomic_store(&p->done, -1);
}

static int put_row(const char *sid, const char *row) {
    row_put p = {.sid = sid, .row = row};
    mcpg_fakehost_run_on_loop(fh, put_on_loop, &p);
    for (int i = 0; i < WAIT_MS && !atomic_load(&p.done); i++) mcpg_fakehost_sleep_ms(1);
    return atomic_load(&p.done) == 1;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_routing(void) {
    resp *r = stateless_call("/mcp/a", "localhost");
    MCPG_CHECK(r->status == 200 && has(r, "echoed"), "stateless call on /mcp/a: %d %s", r->status,
               r->body);
    MCPG_CHECK(!strcmp(last_server(), "a"), "desc.server on /mcp/a: '%s'", last_server());
    MCPG_CHECK(has(r, "\"io.modelcontextprotocol/serverInfo\":" INFO_A),
               "a's serverInfo stamped on its result: %s", r->body);
    r = stateless_call("/mcp/b?trace=1", "localhost");
    MCPG_CHECK(r->status == 200 && !strcmp(last_server(), "b"), "/mcp/b with a query: %d '%s'",
               r->status, last_server());
    MCPG_CHECK(has(r, "\"io.modelcontextprotocol/serverInfo\":" GW_INFO),
               "b sets no serverInfo: the gateway's: %s", r->body);
    r = stateless_call("/mcp", "localhost");
    MCPG_CHECK(r->status == 200 && !strcmp(last_server(), ""), "/mcp names no server: %d '%s'",
               r->status, last_server());
    MCPG_CHECK(has(r, "\"io.modelcontextprotocol/serverInfo\":" GW_INFO), "/mcp's serverInfo: %s",
               r->body);

    r = stateless_call("/mcp/zzz", "localhost");
    MCPG_CHECK(r->status == 404 && has(r, "Not Found"), "unknown server path: %d", r->status);
    r = stateless_call("/mcp/a/", "localhost");
    MCPG_CHECK(r->status == 404, "a server's path is exact: %d", r->status);
    MCPG_CHECK(!strcmp(last_server(), ""), "nothing submitted for a 404: '%s'", last_server());
    r = roundtrip("PUT /mcp/a HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
    MCPG_CHECK(r->status == 405 && header_of(r, "Allow") &&
                   !strcmp(header_of(r, "Allow"), "GET, POST, DELETE"),
               "PUT on a server's path: %d", r->status);

    /* a Host-bound server: only for its Host, any port, any case */
    r = stateless_call("/mcp/h", "localhost");
    MCPG_CHECK(r->status == 404, "h without its Host: %d", r->status);
    r = stateless_call("/mcp/h", "Tenant.Example:8443");
    MCPG_CHECK(r->status == 200 && !strcmp(last_server(), "h"), "h with its Host: %d '%s'",
               r->status, last_server());
    /* the Host check (allowed_hosts) still applies on a server's path */
    r = stateless_call("/mcp/a", "evil.example");
    MCPG_CHECK(r->status == 403, "a Host not allowed on /mcp/a: %d", r->status);
}

static void test_discover(void) {
    static const char body[] =
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server/discover\",\"params\":{" META "}}";
    const char *hdrs = "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: server/discover\r\n";
    forget_last_server();
    resp *r = post("/mcp/a", "localhost", hdrs, body);
    MCPG_CHECK(r->status == 200 && has(r, "\"instructions\":" INSTR_A_JSON) &&
                   has(r, "\"io.modelcontextprotocol/serverInfo\":" INFO_A),
               "discover on /mcp/a: %d %s", r->status, r->body);
    MCPG_CHECK(!strcmp(last_server(), "a"), "discover's identity call names a: '%s'",
               last_server());
    r = post("/mcp", "localhost", hdrs, body);
    MCPG_CHECK(r->status == 200 && !has(r, "instructions") &&
                   has(r, "\"io.modelcontextprotocol/serverInfo\":" GW_INFO),
               "discover on /mcp unchanged: %d %s", r->status, r->body);
}

static const char k_init[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
    "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}";
static const char k_call[] =
    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
    "\"arguments\":{}}}";

/* initialize on path: the session id ("" when none came). */
static const char *open_session(const char *path, char sid[64]) {
    resp *r = legacy(path, "", k_init);
    const char *s = header_of(r, "Mcp-Session-Id");
    snprintf(sid, 64, "%s", r->status == 200 && s ? s : "");
    return sid;
}

/* The answer a session unknown on path gets: 404, -32001, no session header. */
static int unknown_answer(const resp *r, const resp *want) {
    return r->status == 404 && has(r, "-32001") && has(r, "Session not found") &&
           !header_of(r, "Mcp-Session-Id") && !strcmp(r->body, want->body);
}

static void test_legacy_initialize(void) {
    forget_last_server();
    resp *r = legacy("/mcp/a", "", k_init);
    MCPG_CHECK(r->status == 200 && header_of(r, "Mcp-Session-Id"), "initialize on /mcp/a: %d",
               r->status);
    MCPG_CHECK(has(r, "\"serverInfo\":" INFO_A ",\"instructions\":" INSTR_A_JSON "}"),
               "a's serverInfo and instructions in initialize: %s", r->body);
    MCPG_CHECK(!strcmp(last_server(), "a"), "initialize's identity call names a: '%s'",
               last_server());
    r = legacy("/mcp", "", k_init);
    MCPG_CHECK(r->status == 200 && has(r, "\"serverInfo\":" GW_INFO "}") && !has(r, "instructions"),
               "initialize on /mcp unchanged: %d %s", r->status, r->body);
    MCPG_CHECK(!strcmp(last_server(), ""), "/mcp's initialize names none: '%s'", last_server());
}

/* POST, GET and DELETE of session sid on a path it does not belong to. */
static void check_elsewhere(const char *sid, const char *path, const char *what) {
    static const char nobody[] = "ffffffffffffffffffffffffffffffff";
    resp want = *legacy(path, nobody, k_call);
    MCPG_CHECK(want.status == 404, "%s: unknown session on %s: %d", what, path, want.status);
    forget_last_server();
    resp *r = legacy(path, sid, k_call);
    MCPG_CHECK(unknown_answer(r, &want), "%s: POST on %s: %d %s", what, path, r->status, r->body);
    MCPG_CHECK(!strcmp(last_server(), ""), "%s: nothing submitted on %s: '%s'", what, path,
               last_server());
    r = legacy_other("GET", path, sid);
    MCPG_CHECK(r->status == 404 && has(r, "-32001"), "%s: GET on %s: %d", what, path, r->status);
    r = legacy_other("DELETE", path, sid);
    MCPG_CHECK(r->status == 404 && has(r, "-32001"), "%s: DELETE on %s: %d", what, path, r->status);
}

static void test_session_binding(void) {
    char sa[64], sm[64];
    MCPG_REQUIRE(open_session("/mcp/a", sa)[0] && open_session("/mcp", sm)[0], "sessions opened");
    resp *r = legacy("/mcp/a", sa, k_call);
    MCPG_CHECK(r->status == 200 && has(r, "echoed") && !strcmp(last_server(), "a"),
               "a call on a's session names a: %d '%s'", r->status, last_server());
    check_elsewhere(sa, "/mcp/b", "a's session");
    check_elsewhere(sa, "/mcp", "a's session");
    check_elsewhere(sm, "/mcp/a", "/mcp's session");
    /* still there where it belongs: the DELETEs elsewhere ended nothing */
    r = legacy("/mcp/a", sa, k_call);
    MCPG_CHECK(r->status == 200 && has(r, "echoed"), "a's session after: %d", r->status);
    r = legacy_other("GET", "/mcp/a", sa);
    MCPG_CHECK(r->status == 200 && header_of(r, "Content-Type") &&
                   strstr(header_of(r, "Content-Type"), "text/event-stream"),
               "a's GET stream on /mcp/a: %d", r->status);
    r = legacy_other("DELETE", "/mcp/a", sa);
    MCPG_CHECK(r->status == 200, "DELETE on /mcp/a: %d", r->status);
    r = legacy("/mcp", sm, k_call);
    MCPG_CHECK(r->status == 200 && !strcmp(last_server(), ""), "/mcp's session on /mcp: %d",
               r->status);
}

/* Rows this loop has not cached are read from the store: a row without
 * "sv" (written before virtual servers) is a session of /mcp. */
static void test_rows_from_store(void) {
    const char *old = "0123456789abcdef0123456789abcdef";
    const char *of_a = "abcdef0123456789abcdef0123456789";
    MCPG_REQUIRE(put_row(old, "{\"v\":\"2025-11-25\",\"l\":-1,\"g\":0,\"s\":[],\"c\":{}}") &&
                     put_row(of_a, "{\"v\":\"2025-11-25\",\"l\":-1,\"g\":0,\"s\":[],\"c\":{},"
                                   "\"sv\":\"a\"}"),
                 "rows put");
    check_elsewhere(old, "/mcp/a", "a row without sv");
    resp *r = legacy("/mcp", old, k_call);
    MCPG_CHECK(r->status == 200 && has(r, "echoed"), "a row without sv on /mcp: %d %s",
               r->status, r->body);
    r = legacy("/mcp/b", of_a, k_call); /* read from the store on this request */
    MCPG_CHECK(r->status == 404 && has(r, "-32001"), "a's row read on /mcp/b: %d", r->status);
    r = legacy("/mcp/a", of_a, k_call);
    MCPG_CHECK(r->status == 200 && !strcmp(last_server(), "a"), "a's row on /mcp/a: %d '%s'",
               r->status, last_server());
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 3, "usage: test_th_servers transport_http.so coordinator_memory.so");
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, getenv("MCPG_TEST_VERBOSE") == NULL);
    mcpg_fakehost_set_gateway(fh, "test-gw", "9.9.9");
    MCPG_REQUIRE(mcpg_fakehost_add_server(fh, "a", NULL, NULL, INFO_A, INSTR_A) == 0 &&
                     mcpg_fakehost_add_server(fh, "b", NULL, NULL, NULL, NULL) == 0 &&
                     mcpg_fakehost_add_server(fh, "h", NULL, "tenant.example", NULL, NULL) == 0,
                 "servers declared");
    mcpg_instance *coord = mcpg_fakehost_load_file_or_exit(fh, argv[2], "coord", NULL);
    MCPG_REQUIRE(mcpg_fakehost_set_coordinator(fh, coord) == 0, "set_coordinator");
    mcpg_instance *http = mcpg_fakehost_load_file_or_exit(
        fh, argv[1], "http",
        "{\"unary_json_fast_path\":true,\"access_log\":false,"
        "\"allowed_hosts\":[\"localhost\",\"tenant.example\"]}");
    mcpg_fakehost_on_submit(fh, plan_call, mcpg_fakehost_host(fh));
    uint16_t p = 0;
    MCPG_REQUIRE(mcpg_fakehost_listen(fh, http, &p) == 0 && mcpg_fakehost_start_thread(fh) == 0,
                 "listen");
    port = p;
    test_routing();
    test_discover();
    test_legacy_initialize();
    test_session_binding();
    test_rows_from_store();
    /* as the kernel's shutdown: drained (the GET stream's connection gone)
     * before the loop comes home and the instances go */
    mcpg_fakehost_drain(fh, http);
    for (int i = 0; i < WAIT_MS && mcpg_fakehost_conn_count(fh, http); i++)
        mcpg_fakehost_sleep_ms(1);
    MCPG_CHECK(mcpg_fakehost_conn_count(fh, http) == 0, "drained");
    mcpg_fakehost_stop_thread(fh);
    MCPG_CHECK(mcpg_fakehost_unload(fh, http) == 0, "unload the transport");
    MCPG_CHECK(mcpg_fakehost_unload(fh, coord) == 0, "unload the coordinator");
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_th_servers");
}
