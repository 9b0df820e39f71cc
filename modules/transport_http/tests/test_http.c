/* Socket test: the real transport_http.so in the SDK's fake host, its loop on
 * a thread of its own, driven by raw TCP clients from this thread. Covers
 * routes, the wire's errors, pipelining order, split writes, Connection:
 * close, HTTP/1.0, malformed input, limits, 100-continue, a client that
 * leaves with a call in flight, the idle timeout, the connection cap and
 * drain; ends by proving the module left nothing behind and the fake host
 * saw no module bug.
 *
 * Calls are answered by a submit hook (plan_call), chosen by the tool name:
 *   echo     completes inside call_submit (re-entrant complete)
 *   async    completes on a later loop turn
 *   slow     completes after 150 ms (cancel is recorded, it still completes)
 *   linger   the same after LINGER_MS: still in flight whatever the test does
 *            meanwhile on a loaded machine
 *   limited  completes with an error and HTTP 429, Retry-After 7
 *   busy     call_submit fails with MCPG_EAGAIN
 *   draining call_submit fails with MCPG_EUNAVAIL
 *   other    completes with -32602 "Unknown tool" (HTTP 200), as the kernel does
 *   big      completes inside call_submit with a 300 000-byte text
 *   huge     completes inside call_submit with a 4 000 000-byte text
 *   tools/list completes with {"tools":[{"name":"echo"}]} */
#include <stdatomic.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <mcpg/check.h>
#include <mcpg/fakehost.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef TH_MODULE_PATH
#error TH_MODULE_PATH must name transport_http.so
#endif

/* The transport's idle timeout here, and what is timed against it: a reader
 * paced every few ms is far from idle, and a check that something happens
 * "at once" (well under IDLE_MS) cannot be met by the idle timeout instead. */
#define IDLE_MS 3000
#define LINGER_MS 2000

static int port;
static mcpg_fakehost *fh;
static mcpg_instance *http; /* the transport */
/* ---- a raw client ---------------------------------------------------------------- */

static int cli_connect(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        perror("connect");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void cli_send(int fd, const char *s, size_t n) {
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0) return; /* the server may have closed: the test checks that */
        s += w;
        n -= (size_t)w;
    }
}
static void cli_sends(int fd, const char *s) { cli_send(fd, s, strlen(s)); }

typedef struct conn_in {
    int fd;
    char buf[1 << 20];
    size_t len;
    int eof;
} conn_in;

/* Read more; 0 on timeout. */
static int fill(conn_in *ci, int timeout_ms) {
    if (ci->eof) return 0;
    struct pollfd p = {ci->fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return 0;
    ssize_t n = recv(ci->fd, ci->buf + ci->len, sizeof ci->buf - ci->len - 1, 0);
    if (n <= 0) {
        ci->eof = 1;
        return 0;
    }
    ci->len += (size_t)n;
    ci->buf[ci->len] = '\0';
    return 1;
}

typedef struct resp {
    int status;
    char head[2048];
    char body[1 << 16];
    size_t body_len;
} resp;

static const char *header_of(const resp *r, const char *name) {
    static char val[256];
    size_t nl = strlen(name);
    for (const char *p = strstr(r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        if (!strncasecmp(p + 2, name, nl) && p[2 + nl] == ':') {
            const char *v = p + 3 + nl;
            while (*v == ' ') v++;
            size_t k = strcspn(v, "\r");
            if (k >= sizeof val) k = sizeof val - 1;
            memcpy(val, v, k);
            val[k] = '\0';
            return val;
        }
    }
    return NULL;
}

/* Parse one response from ci (waiting up to timeout_ms); 0 if none. */
static int next_resp(conn_in *ci, resp *r, int timeout_ms) {
    for (;;) {
        char *end = strstr(ci->buf, "\r\n\r\n");
        if (end) {
            size_t hl = (size_t)(end - ci->buf) + 4;
            memset(r, 0, sizeof *r);
            memcpy(r->head, ci->buf, hl < sizeof r->head ? hl : sizeof r->head - 1);
            r->status = atoi(ci->buf + 9);
            const char *cl = header_of(r, "Content-Length");
            size_t bl = cl ? (size_t)atol(cl) : 0;
            while (ci->len < hl + bl)
                if (!fill(ci, timeout_ms)) return 0;
            memcpy(r->body, ci->buf + hl, bl < sizeof r->body ? bl : sizeof r->body - 1);
            r->body_len = bl;
            memmove(ci->buf, ci->buf + hl + bl, ci->len - hl - bl);
            ci->len -= hl + bl;
            ci->buf[ci->len] = '\0';
            return 1;
        }
        if (!fill(ci, timeout_ms)) return 0;
    }
}

/* The server closed its side (after any responses already read). */
static int closed_by_server(conn_in *ci, int timeout_ms) {
    while (!ci->eof)
        if (!fill(ci, timeout_ms)) break;
    return ci->eof;
}

static conn_in *cin_new(int fd) {
    conn_in *ci = calloc(1, sizeof *ci);
    ci->fd = fd;
    return ci;
}
static void cin_free(conn_in *ci) {
    close(ci->fd);
    free(ci);
}

/* ---- requests ---------------------------------------------------------------------- */

#define META                                                              \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"

/* A tools/call; meta: the _meta member (NULL: META). */
static size_t post_call_meta(char *dst, size_t cap, int id, const char *tool, const char *extra_headers,
                             const char *meta) {
    char body[512];
    int bl = snprintf(body, sizeof body,
                      "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
                      "\"arguments\":{\"n\":%d},%s}}",
                      id, tool, id, meta ? meta : META);
    return (size_t)snprintf(dst, cap,
                            "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                            "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
                            "Mcp-Method: tools/call\r\nMcp-Name: %s\r\n%sContent-Length: %d\r\n\r\n%s",
                            tool, extra_headers ? extra_headers : "", bl, body);
}

static size_t post_call(char *dst, size_t cap, int id, const char *tool, const char *extra_headers) {
    return post_call_meta(dst, cap, id, tool, extra_headers, NULL);
}

static size_t post_method_headers(char *dst, size_t cap, int id, const char *method, const char *extra) {
    char body[512];
    int bl = snprintf(body, sizeof body,
                      "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\",\"params\":{" META "}}", id, method);
    return (size_t)snprintf(dst, cap,
                            "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nMcp-Method: %s\r\n"
                            "MCP-Protocol-Version: 2026-07-28\r\n%sContent-Length: %d\r\n\r\n%s",
                            method, extra, bl, body);
}

static size_t post_method(char *dst, size_t cap, int id, const char *method) {
    return post_method_headers(dst, cap, id, method, "");
}

static int body_has(const resp *r, const char *s) { return strstr(r->body, s) != NULL; }

static int body_is_json(const resp *r) { return mcpg_json_validate(r->body, r->body_len) == 0; }

/* One request on a fresh connection; returns its response. */
static resp *roundtrip(const char *req) {
    static resp r;
    int fd = cli_connect();
    conn_in *ci = cin_new(fd);
    cli_sends(fd, req);
    if (!next_resp(ci, &r, 2000)) r.status = -1;
    cin_free(ci);
    return &r;
}

/* ---- the host: the fake host, and how it answers calls ------------------------------- */

static int name_is(const mcpg_call_desc *d, const char *s) {
    return d->name && d->name_len == strlen(s) && !memcmp(d->name, s, d->name_len);
}

static int method_is(const mcpg_call_desc *d, const char *s) {
    return d->method_len == strlen(s) && !memcmp(d->method, s, d->method_len);
}

/* {"content":[{"type":"text","text":"Echo: <message>"}],"args":<arguments>,"hdr":"<Mcp-Name>"}:
 * the arguments and the Mcp-Name header (through the transport's header
 * callback) come back, and a wire_probe.py echo reads like backend_mock's. */
static void set_echo(const mcpg_host *h, mcpg_call *call) {
    size_t alen = 0, hlen = 0;
    const char *args = h->call_args(call, &alen);
    char msg[256] = "", text[300];
    mcpg_json_span v;
    if (h->json_object_get(args, alen, "message", &v) == 1 &&
        h->json_string_decode(&v, msg, sizeof msg, NULL) < 0)
        msg[0] = '\0';
    snprintf(text, sizeof text, "Echo: %s", msg);
    const char *hdr = h->call_header(call, "mcp-name", &hlen);
    mcpg_buf b = {0};
    mcpg_buf_puts(&b, "{\"content\":[{\"type\":\"text\",\"text\":");
    mcpg_buf_append_json_string(&b, text, strlen(text));
    mcpg_buf_puts(&b, "}],\"args\":");
    mcpg_buf_append(&b, args, alen);
    mcpg_buf_puts(&b, ",\"hdr\":");
    mcpg_buf_append_json_string(&b, hdr ? hdr : "", hdr ? hlen : 0);
    mcpg_buf_puts(&b, "}");
    h->call_result(call, b.data, b.len);
    mcpg_buf_free(&b);
}

/* A text of `pad` bytes, written into the call's own buffer through the host
 * (the host's, so buf_bytes must not count it). */
static void set_padded(const mcpg_host *h, mcpg_call *call, size_t pad) {
    static const char head[] = "{\"content\":[{\"type\":\"text\",\"text\":\"", tail[] = "\"}]}";
    mcpg_buf *b = h->call_result_buf(call);
    if (!b || h->buf_reserve(b, sizeof head + pad + sizeof tail)) return;
    h->buf_append(b, head, sizeof head - 1);
    memset(b->data + b->len, 'x', pad);
    b->len += pad;
    h->buf_append(b, tail, sizeof tail - 1);
}

static void set_unknown(const mcpg_host *h, mcpg_call *call, const mcpg_call_desc *d) {
    char msg[128];
    snprintf(msg, sizeof msg, "Unknown tool: %.*s", (int)(d->name ? d->name_len : 0),
             d->name ? d->name : "");
    h->call_error(call, MCPG_RPC_INVALID_PARAMS, msg, NULL);
}

/* Session-method (identity) calls of the stateless wire seen (counted on
 * the loop, read by the test's thread). */
static atomic_int discover_asked;

/* What desc->message answered for the last "notify" call (kernel's view). */
static int notify_rc[2];
static const char k_progress[] =
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1,\n\"total\":2}}";
static const char k_log_info[] =
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"L-info\"}}";
static const char k_log_error[] =
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"error\",\"data\":\"L-error\"}}";

/* The submit hook: what each tool name gets (see the top of this file). */
static void plan_call(void *arg, mcpg_call *call, const mcpg_call_desc *d, mcpg_fakehost_plan *plan) {
    const mcpg_host *h = arg;
    plan->answer = MCPG_FAKEHOST_LATER; /* delay 0: a later loop turn */
    if (method_is(d, MCPG_SESSION_METHOD) && d->wire == MCPG_WIRE_STATELESS) {
        /* the identity stage, as the kernel runs it for what the transport
         * answers itself: {} once passed; X-Test-Deny: refused with a 401 */
        size_t n = 0;
        atomic_fetch_add(&discover_asked, 1);
        if (d->header && d->header(d->transport_ctx, "x-test-deny", &n)) {
            h->call_error(call, MCPG_RPC_UNAUTHENTICATED, "Unauthenticated", NULL);
            h->call_set_http(call, 401, 0);
            h->call_set_challenge(call, "Bearer realm=\"test\"");
        } else {
            h->call_result(call, "{}", 2);
        }
    } else if (method_is(d, "subscriptions/listen") || method_is(d, "resources/subscribe")) {
        /* the transport asks the pipeline which subscriptions it may make:
         * answered as the kernel does with no policy (all of them) */
        plan->answer = MCPG_FAKEHOST_ROUTE;
    } else if (name_is(d, "notify")) {
        /* as the kernel does for a backend's call_notify: the transport's
         * message callback, before the outcome */
        notify_rc[0] = MCPG_HAS(d, message) ? d->message(d->transport_ctx, call, k_progress,
                                                          sizeof k_progress - 1)
                                            : -999;
        notify_rc[1] = d->message(d->transport_ctx, call, k_progress, sizeof k_progress - 1);
        set_echo(h, call);
        plan->delay_ms = 20;
    } else if (name_is(d, "log")) {
        (void)d->message(d->transport_ctx, call, k_log_info, sizeof k_log_info - 1);
        (void)d->message(d->transport_ctx, call, k_log_error, sizeof k_log_error - 1);
        set_echo(h, call);
    } else if (name_is(d, "busy") || name_is(d, "draining")) {
        plan->answer = MCPG_FAKEHOST_REFUSE;
        plan->refuse_with = name_is(d, "busy") ? MCPG_EAGAIN : MCPG_EUNAVAIL;
    } else if (method_is(d, "tools/list")) {
        h->call_result(call, "{\"tools\":[{\"name\":\"echo\"}]}", 27);
    } else if (name_is(d, "big") || name_is(d, "huge")) {
        set_padded(h, call, name_is(d, "big") ? 300000 : 4000000);
        plan->answer = MCPG_FAKEHOST_NOW;
    } else if (name_is(d, "limited")) {
        h->call_error(call, MCPG_RPC_SERVER_ERROR, "rate limited \"now\"", NULL);
        h->call_set_http(call, 429, 7);
    } else if (name_is(d, "echo") || name_is(d, "async") || name_is(d, "slow") ||
               name_is(d, "linger")) {
        set_echo(h, call);
        if (name_is(d, "echo")) plan->answer = MCPG_FAKEHOST_NOW;
        if (name_is(d, "slow")) plan->delay_ms = 150;
        if (name_is(d, "linger")) plan->delay_ms = LINGER_MS;
    } else {
        set_unknown(h, call, d);
        plan->answer = MCPG_FAKEHOST_NOW;
    }
}

/* Load the transport with config_json, listen, and turn the loop on its own
 * thread. Returns the port, or -1. */
static int start(const char *config_json) {
    fh = mcpg_fakehost_new();
    if (!fh) return -1;
    mcpg_fakehost_set_gateway(fh, "test-gw", "9.9.9");
    if (mcpg_fakehost_load_file(fh, TH_MODULE_PATH, "http", config_json, &http) != 0) {
        fprintf(stderr, "load: %s%s", mcpg_fakehost_report_text(fh), mcpg_fakehost_log_text(fh));
        return -1;
    }
    mcpg_fakehost_on_submit(fh, plan_call, mcpg_fakehost_host(fh));
    uint16_t p = 0;
    if (mcpg_fakehost_listen(fh, http, &p) != 0 || mcpg_fakehost_start_thread(fh) != 0) return -1;
    return p;
}

/* Bring the loop home, unload, free: the fake host's count of problems. */
static int stop(mcpg_fakehost_stats *after_unload) {
    mcpg_fakehost_stop_thread(fh);
    MCPG_CHECK(mcpg_fakehost_unload(fh, http) == 0, "unload");
    if (after_unload) mcpg_fakehost_get_stats(fh, after_unload);
    return mcpg_fakehost_free(fh);
}

static uint32_t conn_count(void) { return mcpg_fakehost_conn_count(fh, http); }

static mcpg_fakehost_stats stats(void) {
    mcpg_fakehost_stats s;
    mcpg_fakehost_get_stats(fh, &s);
    return s;
}

/* ---- tests --------------------------------------------------------------------------- */

static void wait_count(uint32_t want, int timeout_ms) {
    for (int i = 0; i < timeout_ms / 10 && conn_count() != want; i++) mcpg_fakehost_sleep_ms(10);
}

/* Wait until the fake host has taken `want` calls more than `base`. */
static int wait_submitted(long base, long want, int timeout_ms) {
    for (int i = 0; i < timeout_ms / 5 && stats().submitted - base < want; i++) mcpg_fakehost_sleep_ms(5);
    return stats().submitted - base >= want;
}


static void test_routes(void) {
    resp *r = roundtrip("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
    MCPG_CHECK(r->status == 200 && !strcmp(r->body, "{\"status\":\"ok\"}"), "healthz %d %s", r->status, r->body);
    MCPG_CHECK(header_of(r, "Date") != NULL, "Date header");
    r = roundtrip("GET /readyz HTTP/1.1\r\n\r\n");
    MCPG_CHECK(r->status == 200 && !strcmp(r->body, "{\"status\":\"ready\",\"coordinator\":\"none\"}"),
               "readyz %d %s", r->status, r->body);
    /* no coordinator is not an unavailable one: nothing is refused for want of it */
    r = roundtrip("GET /readyz?coordinator=required HTTP/1.1\r\n\r\n");
    MCPG_CHECK(r->status == 200, "readyz?coordinator=required without a coordinator %d", r->status);
    r = roundtrip("PUT /mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    MCPG_CHECK(r->status == 405 && header_of(r, "Allow") && !strcmp(header_of(r, "Allow"), "GET, POST, DELETE"),
               "PUT /mcp %d", r->status);
    MCPG_CHECK(body_is_json(r) && body_has(r, "\"error\""), "405 body %s", r->body);
    r = roundtrip("GET /mcp HTTP/1.1\r\n\r\n");
    MCPG_CHECK(r->status == 406, "GET /mcp without Accept: text/event-stream %d", r->status);
    r = roundtrip("GET /mcp HTTP/1.1\r\nAccept: text/event-stream\r\n\r\n");
    MCPG_CHECK(r->status == 400 && body_has(r, "-32000"), "GET /mcp without a session %d", r->status);
    r = roundtrip("DELETE /mcp HTTP/1.1\r\nMcp-Session-Id: 00000000000000000000000000000000\r\n\r\n");
    MCPG_CHECK(r->status == 404 && body_has(r, "-32001"), "DELETE /mcp, unknown session %d", r->status);
    r = roundtrip("GET /nope HTTP/1.1\r\n\r\n");
    MCPG_CHECK(r->status == 404 && body_is_json(r), "404 %d", r->status);
    r = roundtrip("GET /mcp/ HTTP/1.1\r\n\r\n");
    MCPG_CHECK(r->status == 404, "trailing slash %d", r->status);
    r = roundtrip("POST /healthz HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    MCPG_CHECK(r->status == 405, "POST /healthz %d", r->status);
}

static void test_calls(void) {
    char req[4096];
    post_call(req, sizeof req, 7, "echo", NULL);
    resp *r = roundtrip(req);
    MCPG_CHECK(r->status == 200 && body_is_json(r), "echo %d %s", r->status, r->body);
    MCPG_CHECK(body_has(r, "\"id\":7") && body_has(r, "\"resultType\":\"complete\","), "echo body %s", r->body);
    /* every 2026-07-28 result names the gateway */
    MCPG_CHECK(body_has(r, "\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"name\":\"test-gw\",\"version\":\"9.9.9\"}}}}"),
               "serverInfo in _meta: %s", r->body);
    MCPG_CHECK(body_has(r, "\"args\":{\"n\":7}") && body_has(r, "\"hdr\":\"echo\""), "args and header %s", r->body);
    MCPG_CHECK(!strcmp(header_of(r, "Content-Type"), "application/json"), "content type");

    post_call(req, sizeof req, 8, "async", NULL);
    r = roundtrip(req);
    MCPG_CHECK(r->status == 200 && body_has(r, "\"id\":8"), "async %d %s", r->status, r->body);

    post_call(req, sizeof req, 9, "other", NULL);
    r = roundtrip(req);
    MCPG_CHECK(r->status == 200 && body_has(r, "-32602") && body_has(r, "Unknown tool: other"), "unknown tool %d %s",
               r->status, r->body);

    post_call(req, sizeof req, 10, "limited", NULL);
    r = roundtrip(req);
    MCPG_CHECK(r->status == 429 && header_of(r, "Retry-After") && !strcmp(header_of(r, "Retry-After"), "7"),
               "429 %d", r->status);
    MCPG_CHECK(body_is_json(r) && body_has(r, "rate limited \\\"now\\\""), "escaped message %s", r->body);

    post_call(req, sizeof req, 11, "busy", NULL);
    r = roundtrip(req);
    MCPG_CHECK(r->status == 503 && !strcmp(header_of(r, "Retry-After"), "1") && body_has(r, "-32000"), "busy %d %s",
               r->status, r->body);
    post_call(req, sizeof req, 12, "draining", NULL);
    r = roundtrip(req);
    MCPG_CHECK(r->status == 503 && body_has(r, "-32000"), "unavailable %d", r->status);

    post_method(req, sizeof req, 13, "tools/list");
    r = roundtrip(req);
    MCPG_CHECK(r->status == 200 && body_has(r, "\"ttlMs\":0,\"cacheScope\":\"private\"") && body_is_json(r),
               "list %s", r->body);

    post_method(req, sizeof req, 14, "server/discover");
    r = roundtrip(req);
    MCPG_CHECK(r->status == 200 && body_is_json(r) && body_has(r, "\"supportedVersions\":[\"2026-07-28\"]") &&
                   body_has(r, "{\"name\":\"test-gw\",\"version\":\"9.9.9\"}") && body_has(r, "\"id\":14"),
               "discover %s", r->body);

    /* server/discover passes the identity stage like any request: refused
     * there, it is the stage's 401 with its challenge, and on this wire a
     * code of the 2026-07-28 revision (-32600), not the legacy -32001 */
    atomic_store(&discover_asked, 0);
    post_method_headers(req, sizeof req, 16, "server/discover", "X-Test-Deny: 1\r\n");
    r = roundtrip(req);
    MCPG_CHECK(r->status == 401 && body_has(r, "\"code\":-32600") && body_has(r, "\"id\":16") &&
                   !strcmp(header_of(r, "WWW-Authenticate"), "Bearer realm=\"test\"") &&
                   !body_has(r, "supportedVersions"),
               "discover refused at identity %d %s", r->status, r->body);
    MCPG_CHECK(atomic_load(&discover_asked) == 1, "the session method was submitted once");
    post_method(req, sizeof req, 14, "server/discover");
    r = roundtrip(req);
    MCPG_CHECK(r->status == 200 && atomic_load(&discover_asked) == 2, "discover asked identity");
    /* capabilities: the fake host has no offers slot: everything, and logging */
    MCPG_CHECK(body_has(r, "\"logging\":{}") && body_has(r, "\"tools\":{\"listChanged\":true}"),
               "discover caps %s", r->body);

    post_method(req, sizeof req, 15, "ping");
    r = roundtrip(req);
    MCPG_CHECK(r->status == 404 && body_has(r, "-32601") && body_has(r, "\"id\":15"), "unknown method %d %s",
               r->status, r->body);

    r = roundtrip("POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 44\r\n\r\n"
                  "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}");
    MCPG_CHECK(r->status == 202 && r->body_len == 0, "notification %d", r->status);

    r = roundtrip("POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n{bad}");
    MCPG_CHECK(r->status == 400 && body_has(r, "-32700") && body_has(r, "\"id\":null"), "parse error %d %s",
               r->status, r->body);
    r = roundtrip("POST /mcp HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}");
    MCPG_CHECK(r->status == 415, "415 %d", r->status);
    r = roundtrip("POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: text/html\r\n"
                  "Content-Length: 2\r\n\r\n{}");
    MCPG_CHECK(r->status == 406, "406 %d", r->status);
    r = roundtrip("POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]");
    MCPG_CHECK(r->status == 400 && body_has(r, "-32600"), "batch %d", r->status);
    r = roundtrip("POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nMcp-Method: tools/list\r\n"
                  "MCP-Protocol-Version: 2026-07-28\r\n"
                  "Content-Length: 50\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}    ");
    MCPG_CHECK(r->status == 400 && body_has(r, "-32602") && body_has(r, "_meta"), "no envelope %d %s", r->status,
               r->body);
    post_call(req, sizeof req, 16, "echo", "Mcp-Name: echo\r\n");
    r = roundtrip(req);
    MCPG_CHECK(r->status == 400 && body_has(r, "-32020"), "duplicate Mcp-Name %d %s", r->status, r->body);
}

/* Read until `needle` is in the connection's input (it stays there). */
static int wait_for_text(conn_in *ci, const char *needle, int timeout_ms) {
    while (!strstr(ci->buf, needle))
        if (!fill(ci, timeout_ms)) return 0;
    return 1;
}

static void listen_news(void *arg) {
    (void)arg;
    void *so = dlopen(TH_MODULE_PATH, RTLD_NOW | RTLD_NOLOAD);
    mcpg_module_entry_fn entry = so ? (mcpg_module_entry_fn)dlsym(so, MCPG_ENTRY_SYMBOL) : NULL;
    const mcpg_transport_ops *ops = entry ? entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR)->ops : NULL;
    if (ops && MCPG_HAS(ops, news)) {
        void *st = mcpg_fakehost_state(http);
        mcpg_worker *w = mcpg_fakehost_worker(fh);
        ops->news(st, w, "notifications/prompts/list_changed", NULL, 0); /* not asked for */
        ops->news(st, w, "notifications/tools/list_changed", NULL, 0);
        ops->news(st, w, "notifications/resources/updated", "test://other", 12);
        ops->news(st, w, "notifications/resources/updated", "test://a", 8);
    }
    if (so) dlclose(so);
}

/* Request-scoped messages turn the answer into an SSE stream (chunked, the
 * result last); a client that accepts only JSON is told the messages cannot
 * be carried; subscriptions/listen is acknowledged then fed by news. */
static void test_streams(void) {
    char req[2048];
    int fd = cli_connect();
    conn_in *ci = cin_new(fd);
    cli_send(fd, req, post_call(req, sizeof req, 41, "notify", NULL));
    MCPG_CHECK(wait_for_text(ci, "\r\n0\r\n\r\n", 2000), "stream ended: %s", ci->buf);
    MCPG_CHECK(notify_rc[0] == 0 && notify_rc[1] == 0, "messages taken: %d %d", notify_rc[0], notify_rc[1]);
    MCPG_CHECK(strstr(ci->buf, "HTTP/1.1 200 OK\r\n") == ci->buf, "200 first: %.40s", ci->buf);
    MCPG_CHECK(strstr(ci->buf, "Content-Type: text/event-stream\r\n") &&
                   strstr(ci->buf, "Transfer-Encoding: chunked\r\n") && !strstr(ci->buf, "Content-Length"),
               "an SSE head: %s", ci->buf);
    const char *p1 = strstr(ci->buf, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"");
    const char *p2 = p1 ? strstr(p1 + 1, "notifications/progress") : NULL;
    const char *res = strstr(ci->buf, "\"id\":41,\"result\"");
    MCPG_CHECK(p1 && p2 && res && p2 < res, "two progress events, then the result: %s", ci->buf);
    MCPG_CHECK(strstr(ci->buf, "params\":{\"progress\":1,\ndata: \"total\""), "a multi-line message is split into data lines");
    MCPG_CHECK(strstr(res, "\"resultType\":\"complete\""), "the result is stamped");
    /* the connection is still usable after the stream */
    ci->len = 0;
    ci->buf[0] = '\0';
    resp r;
    cli_send(fd, req, post_call(req, sizeof req, 42, "echo", NULL));
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 200 && body_has(&r, "\"id\":42"), "keep-alive after a stream");
    cin_free(ci);

    /* Accept: application/json only: no stream, the messages are refused */
    fd = cli_connect();
    ci = cin_new(fd);
    post_call(req, sizeof req, 43, "notify", NULL);
    char *acc = strstr(req, "Accept: application/json, text/event-stream");
    memcpy(acc, "Accept: application/json                   ", 43);
    cli_sends(fd, req);
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 200 && body_has(&r, "\"id\":43") &&
                   strstr(r.head, "application/json"),
               "JSON answer");
    MCPG_CHECK(notify_rc[0] == MCPG_ENOTSUP, "message refused: %d", notify_rc[0]);
    cin_free(ci);

    /* notifications/message only with _meta logLevel, and only at or above it */
    fd = cli_connect();
    ci = cin_new(fd);
    cli_send(fd, req, post_call(req, sizeof req, 44, "log", NULL));
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 200 && body_has(&r, "\"id\":44") &&
                   !strstr(r.head, "event-stream") && !body_has(&r, "L-info") && !body_has(&r, "L-error"),
               "no logLevel: no log message, a JSON answer: %s", r.body);
    cin_free(ci);
    fd = cli_connect();
    ci = cin_new(fd);
    cli_send(fd, req, post_call_meta(req, sizeof req, 45, "log", NULL,
                                     "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                                     "\"io.modelcontextprotocol/clientCapabilities\":{},"
                                     "\"io.modelcontextprotocol/logLevel\":\"warning\"}"));
    MCPG_CHECK(wait_for_text(ci, "\r\n0\r\n\r\n", 2000), "stream ended: %s", ci->buf);
    MCPG_CHECK(strstr(ci->buf, "L-error") && !strstr(ci->buf, "L-info") && strstr(ci->buf, "\"id\":45,\"result\""),
               "logLevel warning: the error only, then the result: %s", ci->buf);
    cin_free(ci);

    /* subscriptions/listen */
    fd = cli_connect();
    ci = cin_new(fd);
    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":\"sub-1\",\"method\":\"subscriptions/listen\",\"params\":{"
                       "\"notifications\":{\"toolsListChanged\":true,\"resourceSubscriptions\":[\"test://a\"]},"
                       META "}}";
    snprintf(req, sizeof req,
             "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
             "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    cli_sends(fd, req);
    MCPG_CHECK(wait_for_text(ci, "notifications/subscriptions/acknowledged", 2000), "acknowledged: %s", ci->buf);
    MCPG_CHECK(strstr(ci->buf, "\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":\"sub-1\"}"),
               "the ack carries the subscription id");
    MCPG_CHECK(strstr(ci->buf, "\"notifications\":{\"toolsListChanged\":true"), "tools honoured: %s", ci->buf);
    mcpg_fakehost_sleep_ms(IDLE_MS + IDLE_MS / 2); /* past the idle timeout: a listening stream is not idle */
    mcpg_fakehost_run_on_loop(fh, listen_news, NULL);
    MCPG_CHECK(wait_for_text(ci, "notifications/tools/list_changed", 2000), "tools news: %s", ci->buf);
    MCPG_CHECK(!strstr(ci->buf, "prompts/list_changed"), "news not asked for is not sent");
    MCPG_CHECK(!strstr(ci->buf, "test://other"), "an update of another resource is not sent");
    MCPG_CHECK(!closed_by_server(ci, 100), "still open");
    cin_free(ci);
    wait_count(0, 5000);
}

static void test_pipelining(void) {
    /* 60 requests in one write, mixing re-entrant, async, slow and local answers */
    static char all[1 << 18];
    size_t n = 0;
    const char *tools[] = {"echo", "async", "slow", "echo", "other"};
    for (int i = 0; i < 60; i++) {
        if (i % 7 == 3) n += (size_t)snprintf(all + n, sizeof all - n, "GET /healthz HTTP/1.1\r\n\r\n");
        else n += post_call(all + n, sizeof all - n, 100 + i, tools[i % 5], NULL);
    }
    int fd = cli_connect();
    conn_in *ci = cin_new(fd);
    cli_send(fd, all, n);
    for (int i = 0; i < 60; i++) {
        resp r;
        if (!next_resp(ci, &r, 3000)) {
            MCPG_CHECK(0, "pipelined response %d missing", i);
            break;
        }
        if (i % 7 == 3) {
            MCPG_CHECK(r.status == 200 && body_has(&r, "status"), "pipelined healthz %d", i);
        } else {
            char want[32];
            snprintf(want, sizeof want, "\"id\":%d,", 100 + i);
            MCPG_CHECK(body_has(&r, want), "response %d out of order: %s", i, r.body);
        }
    }
    MCPG_CHECK(!closed_by_server(ci, 100), "keep-alive after pipelining");
    cin_free(ci);

    /* the same bytes split every 7 bytes */
    fd = cli_connect();
    ci = cin_new(fd);
    size_t upto = 0;
    for (int i = 0; i < 10; i++) upto += post_call(all + upto, sizeof all - upto, 200 + i, "echo", NULL);
    for (size_t off = 0; off < upto; off += 7) {
        cli_send(fd, all + off, upto - off < 7 ? upto - off : 7);
        if (off % 70 == 0) mcpg_fakehost_sleep_ms(1);
    }
    for (int i = 0; i < 10; i++) {
        resp r;
        char want[32];
        snprintf(want, sizeof want, "\"id\":%d,", 200 + i);
        MCPG_CHECK(next_resp(ci, &r, 2000) && body_has(&r, want), "split response %d", i);
    }
    cin_free(ci);
}

/* ---- large answers: a streaming answer counter (keeps no bodies) ------------------ */

typedef struct counter {
    char head[4096];
    size_t hlen, body_left;
    int answers, ok200;
    size_t bytes;
} counter;

static void count_feed(counter *k, const char *p, size_t n) {
    k->bytes += n;
    while (n) {
        if (k->body_left) {
            size_t t = n < k->body_left ? n : k->body_left;
            k->body_left -= t;
            p += t;
            n -= t;
            if (!k->body_left) k->answers++;
            continue;
        }
        k->head[k->hlen++] = *p++;
        n--;
        if (k->hlen >= 4 && !memcmp(k->head + k->hlen - 4, "\r\n\r\n", 4)) {
            k->head[k->hlen] = '\0';
            const char *cl = strstr(k->head, "Content-Length: ");
            k->body_left = cl ? strtoul(cl + 16, NULL, 10) : 0;
            if (!strncmp(k->head, "HTTP/1.1 200 ", 13)) k->ok200++;
            k->hlen = 0;
            if (!k->body_left) k->answers++;
        } else if (k->hlen == sizeof k->head - 1) {
            k->hlen = 0;
        }
    }
}

/* Read until k->answers reaches want, EOF, or timeout_ms without a byte. With
 * pace_ms, read at most 16 KiB every pace_ms (a slow but steady reader).
 * Returns 1 on EOF. */
static int count_answers(int fd, counter *k, int want, int timeout_ms, int pace_ms) {
    static char buf[1 << 18];
    while (k->answers < want) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return 0;
        ssize_t n = recv(fd, buf, pace_ms ? 16384 : sizeof buf, 0);
        if (n <= 0) return 1;
        count_feed(k, buf, (size_t)n);
        if (pace_ms) mcpg_fakehost_sleep_ms(pace_ms);
    }
    return 0;
}

static int cli_connect_rcvbuf(int rcvbuf) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf); /* before connect: sets the window */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        perror("connect");
        exit(1);
    }
    return fd;
}

static void test_large_answers(void) {
    /* 100 pipelined 300 kB answers read as fast as possible: flushes that
     * write everything at once resume the paused parser a few rounds per
     * loop turn; the connection must come back for the rest next turn, until
     * every request is answered. */
    static char all[1 << 16];
    size_t n = 0;
    for (int i = 0; i < 100; i++) n += post_call(all + n, sizeof all - n, 300 + i, "big", NULL);
    int fd = cli_connect();
    cli_send(fd, all, n);
    counter k;
    memset(&k, 0, sizeof k);
    count_answers(fd, &k, 100, 10000, 0); /* no byte for 10 s: stalled (a loaded machine pauses for far less) */
    MCPG_CHECK(k.answers == 100 && k.ok200 == 100, "pipelined big answers: %d of 100 (%zu bytes)", k.answers,
               k.bytes);
    close(fd);

    /* A 4 MB answer to a reader that is slow but steady outlasts the idle
     * timeout (IDLE_MS here) as one uv_write: it is progress, not idleness,
     * and the answer arrives whole. At most 16 KiB every 20 ms, the reader
     * takes 5 s at least; a pause of 20 ms is far from IDLE_MS. */
    fd = cli_connect_rcvbuf(16384);
    char req[4096];
    cli_send(fd, req, post_call(req, sizeof req, 1, "huge", NULL));
    memset(&k, 0, sizeof k);
    long t0 = (long)mcpg_fakehost_now_ms();
    int eof = count_answers(fd, &k, 1, 10000, 20);
    long took = (long)mcpg_fakehost_now_ms() - t0;
    MCPG_CHECK(k.answers == 1 && k.ok200 == 1 && !eof, "huge answer to a slow reader: %d answers, %zu bytes, eof %d",
               k.answers, k.bytes, eof);
    MCPG_CHECK(took > IDLE_MS, "the slow reader outlasted the idle timeout: %ld ms of %d", took, IDLE_MS);
    /* Once quiet again, the connection gives its big output buffers back,
     * the one handed to uv_write included. */
    cli_send(fd, req, post_call(req, sizeof req, 2, "echo", NULL));
    eof = count_answers(fd, &k, 2, 10000, 0);
    MCPG_CHECK(k.answers == 2, "echo after huge: %d answers, %zu bytes, eof %d, head %.*s", k.answers, k.bytes, eof,
               (int)k.hlen, k.head);
    mcpg_fakehost_stats st = stats();
    for (int i = 0; i < 500 && st.buf_bytes >= 1024 * 1024; i++) { /* given back on the loop */
        mcpg_fakehost_sleep_ms(10);
        st = stats();
    }
    MCPG_CHECK(st.buf_bytes < 1024 * 1024, "buffers held by the module after a 4 MB answer: %ld bytes",
               st.buf_bytes);
    close(fd);
    wait_count(0, 5000);

    /* ...while a reader that stops reading is still closed after the idle timeout */
    fd = cli_connect_rcvbuf(16384);
    cli_send(fd, req, post_call(req, sizeof req, 3, "huge", NULL));
    wait_count(1, 5000);
    wait_count(0, 3 * IDLE_MS);
    MCPG_CHECK(conn_count() == 0, "a stalled reader is closed: %u open", conn_count());
    close(fd);
}

static void test_connection_handling(void) {
    char req[4096];
    /* Connection: close: answered with close, then closed; later input ignored */
    size_t n = post_call(req, sizeof req, 1, "async", "Connection: close\r\n");
    n += (size_t)snprintf(req + n, sizeof req - n, "GET /healthz HTTP/1.1\r\n\r\n");
    int fd = cli_connect();
    conn_in *ci = cin_new(fd);
    cli_send(fd, req, n);
    resp r;
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 200, "close request answered");
    MCPG_CHECK(header_of(&r, "Connection") && !strcasecmp(header_of(&r, "Connection"), "close"), "Connection: close");
    MCPG_CHECK(!next_resp(ci, &r, 200), "nothing after Connection: close");
    MCPG_CHECK(closed_by_server(ci, 2000), "closed after Connection: close");
    cin_free(ci);

    /* HTTP/1.0: closes by default, keep-alive on request */
    fd = cli_connect();
    ci = cin_new(fd);
    cli_sends(fd, "GET /healthz HTTP/1.0\r\n\r\n");
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 200, "1.0 answered");
    MCPG_CHECK(closed_by_server(ci, 2000), "1.0 closed");
    cin_free(ci);
    fd = cli_connect();
    ci = cin_new(fd);
    cli_sends(fd, "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /readyz HTTP/1.0\r\n\r\n");
    MCPG_CHECK(next_resp(ci, &r, 2000) && header_of(&r, "Connection") &&
                   !strcasecmp(header_of(&r, "Connection"), "keep-alive"),
               "1.0 keep-alive");
    MCPG_CHECK(next_resp(ci, &r, 2000) && body_has(&r, "ready"), "second 1.0 request");
    MCPG_CHECK(closed_by_server(ci, 2000), "1.0 closed after the non-keep-alive one");
    cin_free(ci);

    /* malformed HTTP: 400 after the good request before it, then close */
    fd = cli_connect();
    ci = cin_new(fd);
    n = post_call(req, sizeof req, 2, "slow", NULL);
    n += (size_t)snprintf(req + n, sizeof req - n, "GARBAGE\x01 / HTTP/9\r\n\r\n");
    cli_send(fd, req, n);
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 200 && body_has(&r, "\"id\":2"), "good one first");
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 400 && body_is_json(&r), "then 400 (%d)", r.status);
    MCPG_CHECK(closed_by_server(ci, 3000), "closed after 400");
    cin_free(ci);

    /* smuggling shapes llhttp refuses */
    r = *roundtrip("POST /mcp HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}");
    MCPG_CHECK(r.status == 400, "duplicate Content-Length %d", r.status);
    r = *roundtrip("POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n0\r\n\r\n");
    MCPG_CHECK(r.status == 400, "TE + CL %d", r.status);

    /* header section over max_header_bytes (2048 in this test): 431 */
    static char big[8192];
    n = (size_t)snprintf(big, sizeof big, "GET /healthz HTTP/1.1\r\nX-Big: ");
    memset(big + n, 'a', 4000);
    n += 4000;
    n += (size_t)snprintf(big + n, sizeof big - n, "\r\n\r\n");
    fd = cli_connect();
    ci = cin_new(fd);
    cli_send(fd, big, n);
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 431 && body_is_json(&r), "431 (%d)", r.status);
    MCPG_CHECK(closed_by_server(ci, 3000), "closed after 431");
    cin_free(ci);
    /* too many header fields */
    n = (size_t)snprintf(big, sizeof big, "GET /healthz HTTP/1.1\r\n");
    for (int i = 0; i < 70; i++) n += (size_t)snprintf(big + n, sizeof big - n, "X%d: y\r\n", i);
    n += (size_t)snprintf(big + n, sizeof big - n, "\r\n");
    r = *roundtrip(big);
    MCPG_CHECK(r.status == 431, "70 headers: %d", r.status);

    /* body over max_body_bytes (4096): decided from Content-Length, body never sent */
    fd = cli_connect();
    ci = cin_new(fd);
    cli_sends(fd, "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n");
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 413 && body_is_json(&r), "413 from Content-Length (%d)",
               r.status);
    MCPG_CHECK(closed_by_server(ci, 3000), "closed after 413");
    cin_free(ci);
    /* ...and chunked, capped as it arrives */
    fd = cli_connect();
    ci = cin_new(fd);
    cli_sends(fd, "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 10; i++) {
        char chunk[1100];
        int k = snprintf(chunk, sizeof chunk, "400\r\n");
        memset(chunk + k, ' ', 1024);
        memcpy(chunk + k + 1024, "\r\n", 2);
        cli_send(fd, chunk, (size_t)k + 1026);
    }
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 413, "413 chunked (%d)", r.status);
    MCPG_CHECK(closed_by_server(ci, 3000), "closed after chunked 413");
    cin_free(ci);

    /* a chunked body within limits works */
    char body[512];
    int bl = snprintf(body, sizeof body,
                      "{\"jsonrpc\":\"2.0\",\"id\":31,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"," META "}}");
    n = (size_t)snprintf(req, sizeof req,
                         "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
                         "Mcp-Name: echo\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%.*s\r\n%x\r\n%s\r\n0\r\n\r\n",
                         10, 10, body, bl - 10, body + 10);
    r = *roundtrip(req);
    MCPG_CHECK(r.status == 200 && body_has(&r, "\"id\":31"), "chunked body %d %s", r.status, r.body);

    /* a trailer cannot supply a checked header */
    n = (size_t)snprintf(req, sizeof req,
                         "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\nMcp-Name: echo\r\n\r\n",
                         bl, body);
    r = *roundtrip(req);
    MCPG_CHECK(r.status == 400 && body_has(&r, "-32020"), "trailer ignored %d %s", r.status, r.body);

    /* HEAD: the answer's headers, no body; the connection stays in sync */
    fd = cli_connect();
    ci = cin_new(fd);
    cli_sends(fd, "HEAD /healthz HTTP/1.1\r\n\r\nGET /readyz HTTP/1.1\r\n\r\n");
    MCPG_CHECK(fill(ci, 1000) && strstr(ci->buf, "Content-Length: 15\r\n") && !strstr(ci->buf, "\"ok\""),
               "HEAD has no body: %s", ci->buf);
    char *second = strstr(ci->buf, "\r\n\r\n");
    if (second) {
        size_t hl = (size_t)(second + 4 - ci->buf);
        memmove(ci->buf, ci->buf + hl, ci->len - hl + 1);
        ci->len -= hl;
    }
    MCPG_CHECK(next_resp(ci, &r, 1000) && body_has(&r, "ready"), "request after HEAD");
    cin_free(ci);

    /* an upgrade request is answered, not switched, and the connection closed */
    fd = cli_connect();
    ci = cin_new(fd);
    cli_sends(fd, "GET /healthz HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x05hello");
    MCPG_CHECK(next_resp(ci, &r, 1000) && r.status == 200, "upgrade answered (%d)", r.status);
    MCPG_CHECK(closed_by_server(ci, 3000), "closed after upgrade request");
    cin_free(ci);

    /* Expect: 100-continue gets the interim answer before the body is sent */
    fd = cli_connect();
    ci = cin_new(fd);
    n = (size_t)snprintf(req, sizeof req,
                         "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
                         "Mcp-Name: echo\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n",
                         bl);
    cli_send(fd, req, n);
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 100, "100 Continue (%d)", r.status);
    cli_sends(fd, body);
    MCPG_CHECK(next_resp(ci, &r, 2000) && r.status == 200, "answer after 100 (%d)", r.status);
    cin_free(ci);
}

static void test_client_leaves(void) {
    mcpg_fakehost_stats before = stats();
    char req[4096];
    size_t n = post_call(req, sizeof req, 1, "linger", NULL);
    n += post_call(req + n, sizeof req - n, 2, "linger", NULL);
    int fd = cli_connect();
    cli_send(fd, req, n);
    /* both pipelined calls in flight (they answer LINGER_MS after) */
    MCPG_CHECK(wait_submitted(before.submitted, 2, 5000), "2 calls submitted: %ld",
               stats().submitted - before.submitted);
    close(fd);
    mcpg_fakehost_stats after = stats();
    for (int i = 0; i < 1000 && after.released != after.submitted; i++) { /* LINGER_MS */
        mcpg_fakehost_sleep_ms(10);
        after = stats();
    }
    MCPG_CHECK(after.cancelled - before.cancelled == 2, "cancelled %ld", after.cancelled - before.cancelled);
    MCPG_CHECK(after.released == after.submitted, "released %ld of %ld", after.released, after.submitted);
    wait_count(0, 5000);
    MCPG_CHECK(conn_count() == 0, "connection freed after its calls completed: %u", conn_count());
}

static void test_idle_timeout(void) {
    int fd = cli_connect();
    conn_in *ci = cin_new(fd);
    wait_count(1, 5000);
    MCPG_CHECK(conn_count() == 1, "one connection: %u", conn_count());
    MCPG_CHECK(closed_by_server(ci, 3 * IDLE_MS), "idle connection closed (idle_timeout_ms %d)", IDLE_MS);
    cin_free(ci);
    /* a request trickled byte by byte must still arrive within the timeout:
     * a byte every 40 ms, for up to three timeouts */
    fd = cli_connect();
    ci = cin_new(fd);
    const char *slow = "GET /healthz HTTP/1.1\r\nX: ";
    int closed = 0;
    long t0 = (long)mcpg_fakehost_now_ms();
    for (size_t i = 0; !closed && (long)mcpg_fakehost_now_ms() - t0 < 3 * IDLE_MS; i++) {
        cli_send(fd, i < strlen(slow) ? slow + i : "a", 1);
        mcpg_fakehost_sleep_ms(40);
        struct pollfd p = {fd, POLLIN, 0};
        closed = poll(&p, 1, 0) > 0;
    }
    MCPG_CHECK(closed, "slowloris closed");
    cin_free(ci);
    wait_count(0, 5000);
}

static void test_conn_cap(void) {
    int fds[32];
    for (int i = 0; i < 32; i++) fds[i] = cli_connect();
    wait_count(32, 2000);
    MCPG_CHECK(conn_count() == 32, "32 open: %u", conn_count());
    int extra = cli_connect();
    conn_in *ci = cin_new(extra);
    MCPG_CHECK(closed_by_server(ci, IDLE_MS / 2), "33rd closed at once");
    cin_free(ci);
    /* the others still work */
    conn_in *c0 = cin_new(fds[0]);
    cli_sends(fds[0], "GET /healthz HTTP/1.1\r\n\r\n");
    resp r;
    MCPG_CHECK(next_resp(c0, &r, 2000) && r.status == 200, "existing connection unaffected");
    free(c0);
    for (int i = 0; i < 32; i++) close(fds[i]);
    wait_count(0, 5000);
    mcpg_fakehost_stats s = stats();
    MCPG_CHECK(s.adopt_refused >= 1, "refused %ld", s.adopt_refused);
}

static void test_drain(void) {
    int idle = cli_connect();
    conn_in *ci_idle = cin_new(idle);
    int busy = cli_connect();
    conn_in *ci_busy = cin_new(busy);
    char req[4096];
    /* a listen for list changes only: it passes identity (a session-method
     * call) before its stream opens, and the drain ends it with its result */
    int lfd = cli_connect();
    conn_in *ci_listen = cin_new(lfd);
    const char *lbody = "{\"jsonrpc\":\"2.0\",\"id\":\"sub-9\",\"method\":\"subscriptions/listen\",\"params\":{"
                        "\"notifications\":{\"toolsListChanged\":true}," META "}}";
    snprintf(req, sizeof req,
             "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
             "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
             "Mcp-Method: subscriptions/listen\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(lbody), lbody);
    int asked = atomic_load(&discover_asked);
    cli_sends(lfd, req);
    MCPG_CHECK(wait_for_text(ci_listen, "notifications/subscriptions/acknowledged", 2000), "listen open: %s",
               ci_listen->buf);
    MCPG_CHECK(atomic_load(&discover_asked) == asked + 1, "the listen passed identity first");
    long base = stats().submitted;
    cli_send(busy, req, post_call(req, sizeof req, 77, "linger", NULL));
    /* in flight at the drain: answered LINGER_MS after it was submitted */
    MCPG_CHECK(wait_submitted(base, 1, 5000), "the call in flight before the drain");
    mcpg_fakehost_drain(fh, http);
    /* at the drain, not at the idle timeout */
    MCPG_CHECK(closed_by_server(ci_idle, IDLE_MS / 2), "idle connection closed at drain");
    MCPG_CHECK(wait_for_text(ci_listen, "\"result\":{\"resultType\":\"complete\",\"_meta\":{"
                                        "\"io.modelcontextprotocol/subscriptionId\":\"sub-9\","
                                        "\"io.modelcontextprotocol/serverInfo\":{\"name\":\"test-gw\"",
                             2000),
               "the listen's result names its subscription: %s", ci_listen->buf);
    /* torn down by the server: notifications/cancelled names the listen, before the result */
    const char *cancelled = strstr(ci_listen->buf, "\"method\":\"notifications/cancelled\","
                                                   "\"params\":{\"requestId\":\"sub-9\"");
    MCPG_CHECK(cancelled && cancelled < strstr(ci_listen->buf, "\"result\":{\"resultType\""),
               "notifications/cancelled names the listen before its result: %s", ci_listen->buf);
    cin_free(ci_listen);
    resp r;
    MCPG_CHECK(next_resp(ci_busy, &r, LINGER_MS + 10000) && r.status == 200 && body_has(&r, "\"id\":77"),
               "in-flight answered");
    MCPG_CHECK(header_of(&r, "Connection") && !strcasecmp(header_of(&r, "Connection"), "close"),
               "last answer says close");
    MCPG_CHECK(closed_by_server(ci_busy, 2000), "busy connection closed after its answer");
    cin_free(ci_idle);
    cin_free(ci_busy);
    wait_count(0, 5000);
    MCPG_CHECK(conn_count() == 0, "drained: %u", conn_count());
    /* a new connection after drain is refused */
    int late = cli_connect();
    conn_in *ci = cin_new(late);
    MCPG_CHECK(closed_by_server(ci, IDLE_MS / 2), "refused after drain");
    cin_free(ci);
}

/* --serve [CONFIG_JSON]: keep serving on a printed port until SIGINT or
 * SIGTERM, to measure or profile the transport alone (mcpg-load against the
 * hook's inline echo) or probe it (wire_probe.py --serve). Exits 0 when the
 * fake host saw nothing wrong. */
static int serve(const char *config) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before the loop thread starts */
    port = start(config ? config : "{\"access_log\":false}");
    if (port < 0) return 1;
    printf("%d\n", port);
    fflush(stdout);
    int sig;
    sigwait(&set, &sig);
    mcpg_fakehost_drain(fh, http);
    wait_count(0, 5000);
    int problems = stop(NULL);
    if (problems) fprintf(stderr, "fake host: %d problem(s)\n", problems);
    return problems == 0 && MCPG_CHECK_EXIT("test_http --serve") == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--serve")) return serve(argc > 2 ? argv[2] : NULL);
    char cfg[256];
    snprintf(cfg, sizeof cfg,
             "{\"max_header_bytes\":2048,\"max_body_bytes\":4096,"
             "\"idle_timeout_ms\":%d,\"max_connections_per_worker\":32,\"access_log\":true}",
             IDLE_MS);
    port = start(cfg);
    if (port < 0) {
        fprintf(stderr, "the fake host did not start the transport\n");
        return 1;
    }
    test_routes();
    test_calls();
    test_streams();
    test_pipelining();
    test_large_answers();
    test_connection_handling();
    test_client_leaves();
    test_idle_timeout();
    test_conn_cap();
    test_drain();
    mcpg_fakehost_stats s = stats();
    MCPG_CHECK(s.released == s.submitted, "every call released: %ld/%ld", s.released, s.submitted);
    MCPG_CHECK(s.completed == s.submitted, "every call completed: %ld/%ld", s.completed, s.submitted);
    MCPG_CHECK(s.completed_in_submit > 0, "re-entrant completions exercised");
    int problems = stop(&s);
    MCPG_CHECK(problems == 0, "loop closed cleanly (no handle left behind), no module bug: %d problem(s)",
               problems);
    MCPG_CHECK(s.host_allocs == 0, "host allocations left: %ld", s.host_allocs);
    return MCPG_CHECK_EXIT("test_http");
}
