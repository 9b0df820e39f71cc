/* backend_http through the SDK's fake host (inline: the fake host's loop is
 * the call's loop), against a small HTTP server this test runs on a thread.
 * Usage: test_backend_http path/to/backend_http.so */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testsrv.h"

static const char *so_path;
static mcpg_fakehost *fh;

/* ------------------------------------------------------------------ */
/* the test server: canned answers chosen by the request path           */

#define SRV_CONNS 16

static struct {
    int lfd, port;
    pthread_t th;
    atomic_int stop;
    atomic_int accepted;     /* connections accepted */
    atomic_int open;         /* connections not yet closed by both ends */
    atomic_int close_after;  /* close each connection after its answer */
    atomic_int drop_next;    /* close without answering the next request */
    atomic_int requests;     /* whole requests received */
    pthread_mutex_t lock;
    char line[1024];         /* the last request line */
    char head[2048];         /* the last request's header block */
    char body[2048];         /* the last request's body */
} srv;

/* A connection the server ended (after an answer, or instead of one) is
 * only half-closed: it stays open until the client closes its end too,
 * which tells the test the client saw the close. */
typedef struct sconn {
    int fd;
    int ended; /* our side is shut: what the client sends now is dropped */
    char buf[8192];
    size_t n;
} sconn;

static void end_conn(sconn *c) {
    c->ended = 1;
    shutdown(c->fd, SHUT_WR);
}

static void reply(int fd, int status, const char *reason, const char *body) {
    char out[8192];
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "\r\n%s", status, reason, strlen(body), body);
    (void)!write(fd, out, (size_t)n);
}

/* One whole request in c->buf: record it, answer, keep what follows. */
static int serve_one(sconn *c) {
    char *end = memmem(c->buf, c->n, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t hlen = (size_t)(end - c->buf) + 4, blen = 0;
    char *cl = strcasestr(c->buf, "Content-Length:");
    if (cl && cl < end) blen = (size_t)atoi(cl + 15);
    if (c->n < hlen + blen) return 0;
    pthread_mutex_lock(&srv.lock);
    size_t ll = strcspn(c->buf, "\r");
    snprintf(srv.line, sizeof srv.line, "%.*s", (int)ll, c->buf);
    snprintf(srv.head, sizeof srv.head, "%.*s", (int)hlen, c->buf);
    snprintf(srv.body, sizeof srv.body, "%.*s", (int)blen, c->buf + hlen);
    atomic_fetch_add(&srv.requests, 1);
    pthread_mutex_unlock(&srv.lock);
    char path[512];
    sscanf(c->buf, "%*s %511s", path);
    /* read before answering: the test changes it only once it has seen an
     * answer, so each answer goes out under the setting meant for it */
    int close_after = atomic_load(&srv.close_after);
    if (atomic_exchange(&srv.drop_next, 0)) {
        close_after = 1; /* a kept connection the upstream closes as a request arrives */
    } else if (strncmp(path, "/missing", 8) == 0) {
        reply(c->fd, 404, "Not Found", "no such item here");
    } else if (strncmp(path, "/slow", 5) == 0) {
        /* never answers: the client's timeout ends it */
    } else if (strncmp(path, "/big", 4) == 0) {
        static char big[5001];
        memset(big, 'x', 5000);
        reply(c->fd, 200, "OK", big);
    } else if (strncmp(path, "/teapot", 7) == 0) {
        reply(c->fd, 418, "I'm a teapot", "short and stout");
    } else {
        reply(c->fd, 200, "OK", "{\"ok\":true,\"n\":42}");
    }
    memmove(c->buf, c->buf + hlen + blen, c->n - hlen - blen);
    c->n -= hlen + blen;
    if (close_after) end_conn(c);
    return 1;
}

static void *srv_main(void *arg) {
    (void)arg;
    sconn conns[SRV_CONNS];
    size_t nc = 0;
    while (!atomic_load(&srv.stop)) {
        struct pollfd pf[SRV_CONNS + 1] = {{.fd = srv.lfd, .events = POLLIN}};
        for (size_t i = 0; i < nc; i++) pf[i + 1] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
        if (poll(pf, nc + 1, 20) <= 0) continue;
        if ((pf[0].revents & POLLIN) && nc < SRV_CONNS) {
            int fd = accept(srv.lfd, NULL, NULL);
            if (fd >= 0) {
                conns[nc++] = (sconn){.fd = fd};
                atomic_fetch_add(&srv.accepted, 1);
                atomic_fetch_add(&srv.open, 1);
            }
        }
        for (size_t i = nc; i-- > 0;) {
            if (!(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            sconn *c = &conns[i];
            ssize_t n = read(c->fd, c->buf + c->n, sizeof c->buf - c->n);
            if (n > 0 && !c->ended) {
                c->n += (size_t)n;
                while (!c->ended && serve_one(c)) {}
            }
            if (n <= 0) { /* the client closed its end */
                close(c->fd);
                conns[i] = conns[--nc];
                atomic_fetch_sub(&srv.open, 1);
            }
        }
    }
    for (size_t i = 0; i < nc; i++) close(conns[i].fd);
    return NULL;
}

static void srv_start(void) {
    pthread_mutex_init(&srv.lock, NULL);
    srv.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    MCPG_REQUIRE(srv.lfd >= 0 && bind(srv.lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
                     listen(srv.lfd, 16) == 0 && getsockname(srv.lfd, (struct sockaddr *)&a, &al) == 0,
                 "test server socket");
    srv.port = ntohs(a.sin_port);
    MCPG_REQUIRE(pthread_create(&srv.th, NULL, srv_main, NULL) == 0, "server thread");
}

static void srv_stop(void) {
    atomic_store(&srv.stop, 1);
    pthread_join(srv.th, NULL);
    close(srv.lfd);
}

/* Turn the loop until the client has closed every connection to the
 * server (each one the server ended included: the pool saw its close and
 * dropped it). The bound is only there to end a broken run. */
static int srv_all_closed(void) {
    for (int i = 0; i < 500 && atomic_load(&srv.open) > 0; i++) mcpg_fakehost_run_for(fh, 10);
    return atomic_load(&srv.open) == 0;
}

static void last_request(char *line, char *head, char *body) {
    pthread_mutex_lock(&srv.lock);
    if (line) strcpy(line, srv.line);
    if (head) strcpy(head, srv.head);
    if (body) strcpy(body, srv.body);
    pthread_mutex_unlock(&srv.lock);
}

/* ------------------------------------------------------------------ */
/* helpers                                                             */

/* A config with the server's port put in for each "PORT". */
static mcpg_instance *load(const char *tpl) {
    char conf[4096], port[8];
    size_t n = 0;
    snprintf(port, sizeof port, "%d", srv.port);
    for (const char *p = tpl; *p && n + 8 < sizeof conf;) {
        if (strncmp(p, "PORT", 4) == 0) {
            n += (size_t)snprintf(conf + n, sizeof conf - n, "%s", port);
            p += 4;
        } else {
            conf[n++] = *p++;
        }
    }
    conf[n] = '\0';
    mcpg_instance *inst = mcpg_fakehost_load_file_or_exit(fh, so_path, "rest", conf);
    MCPG_REQUIRE(mcpg_fakehost_set_inline(inst, 1) == 0, "set_inline");
    return inst;
}

static void unload(mcpg_instance *inst) { MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload"); }

static json_t *call(mcpg_instance *inst, const char *tool, const char *args, int64_t *code,
                    char *msg, size_t msgcap) {
    char *result = mcpg_fakehost_call_tool(fh, inst, tool, args, 10000, code, msg, msgcap);
    json_t *o = result ? json_loads(result, 0, NULL) : NULL;
    free(result);
    return o;
}

static const char *text_of(json_t *o) {
    return json_string_value(json_object_get(json_array_get(json_object_get(o, "content"), 0), "text"));
}

/* ------------------------------------------------------------------ */
/* tests                                                               */

static void test_get_templates(void) {
    setenv("MCPG_HTTP_TEST_TOKEN", "tok123", 1);
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"get\",\"method\":\"GET\","
        "\"url\":\"http://127.0.0.1:PORT/items/{id}/x\",\"query\":{\"q\":\"{q}\",\"fixed\":\"a b\"},"
        "\"headers\":{\"X-Static\":\"s1\",\"Authorization\":{\"from_env\":\"MCPG_HTTP_TEST_TOKEN\"}}}]}");
    mcpg_buf out = {0};
    MCPG_REQUIRE(mcpg_fakehost_list(fh, inst, MCPG_METHOD_TOOLS_LIST, &out) == 0, "list");
    json_t *a = json_loads(out.data, 0, NULL);
    json_t *req = json_object_get(json_object_get(json_array_get(a, 0), "inputSchema"), "required");
    MCPG_CHECK(json_array_size(req) == 2, "schema built from placeholders: %s", out.data);
    json_decref(a);
    mcpg_buf_free(&out);
    int64_t code;
    char msg[256], line[1024], head[2048];
    json_t *o = call(inst, "get", "{\"id\":\"a/b c?\",\"q\":\"x&y=z é\"}", &code, msg, sizeof msg);
    MCPG_REQUIRE(o, "get: %s", msg);
    last_request(line, head, NULL);
    MCPG_CHECK(strcmp(line, "GET /items/a%2Fb%20c%3F/x?q=x%26y%3Dz%20%C3%A9&fixed=a%20b HTTP/1.1") == 0 ||
                   strcmp(line, "GET /items/a%2Fb%20c%3F/x?fixed=a%20b&q=x%26y%3Dz%20%C3%A9 HTTP/1.1") == 0,
               "escaped path and query: %s", line);
    MCPG_CHECK(strstr(head, "\r\nX-Static: s1\r\n") && strstr(head, "\r\nAuthorization: tok123\r\n") &&
                   strstr(head, "\r\nHost: 127.0.0.1:"),
               "headers: %s", head);
    MCPG_CHECK(strcmp(text_of(o), "{\"ok\":true,\"n\":42}") == 0, "text: %s", text_of(o));
    json_t *sc = json_object_get(o, "structuredContent");
    MCPG_CHECK(json_integer_value(json_object_get(sc, "n")) == 42 && !json_object_get(o, "isError"),
               "structuredContent");
    json_decref(o);
    o = call(inst, "get", "{\"id\":7,\"q\":true}", &code, msg, sizeof msg);
    last_request(line, NULL, NULL);
    MCPG_CHECK(o && strstr(line, "/items/7/x?") && strstr(line, "q=true"), "scalars: %s", line);
    json_decref(o);
    o = call(inst, "get", "{\"id\":\"1\"}", &code, msg, sizeof msg);
    MCPG_CHECK(!o && code == MCPG_RPC_INVALID_PARAMS && strstr(msg, "'q'"), "missing q: %s", msg);
    unload(inst);
}

static void test_post_body(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"post\",\"method\":\"POST\",\"url\":\"http://127.0.0.1:PORT/items\","
        "\"body\":{\"title\":\"{title}\",\"tags\":\"{tags}\",\"note\":\"by {title}!\",\"k\":1},"
        "\"input_schema\":{\"type\":\"object\"}}]}");
    int64_t code;
    char msg[256], line[1024], head[2048], body[2048];
    json_t *o = call(inst, "post", "{\"title\":\"he said \\\"hi\\\"\",\"tags\":[\"a\",{\"b\":2}]}",
                     &code, msg, sizeof msg);
    MCPG_REQUIRE(o, "post: %s", msg);
    last_request(line, head, body);
    MCPG_CHECK(strcmp(line, "POST /items HTTP/1.1") == 0, "line: %s", line);
    MCPG_CHECK(strstr(head, "Content-Type: application/json"), "content type: %s", head);
    json_t *b = json_loads(body, 0, NULL);
    MCPG_CHECK(b && strcmp(json_string_value(json_object_get(b, "title")), "he said \"hi\"") == 0 &&
                   json_array_size(json_object_get(b, "tags")) == 2 &&
                   json_integer_value(json_object_get(json_array_get(json_object_get(b, "tags"), 1), "b")) == 2 &&
                   strcmp(json_string_value(json_object_get(b, "note")), "by he said \"hi\"!") == 0 &&
                   json_integer_value(json_object_get(b, "k")) == 1,
               "body as JSON: %s", body);
    json_decref(b);
    json_decref(o);
    unload(inst);
}

/* The client's W3C trace goes on to the REST call; an invalid traceparent
 * (and the tracestate beside it) does not. */
static int call_traced(mcpg_instance *inst, const char *traceparent, const char *tracestate,
                       char *head) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "get", "{}", "1");
    MCPG_REQUIRE(c, "call_new");
    if (traceparent) mcpg_fakehost_call_set_header(c, "traceparent", traceparent);
    if (tracestate) mcpg_fakehost_call_set_header(c, "tracestate", tracestate);
    int st = mcpg_fakehost_run(fh, inst, c, 10000);
    mcpg_fakehost_call_free(fh, c);
    last_request(NULL, head, NULL);
    return st;
}

static void test_trace_context(void) {
    static const char tp[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    mcpg_instance *inst = load("{\"tools\":[{\"name\":\"get\",\"method\":\"GET\","
                               "\"url\":\"http://127.0.0.1:PORT/t\"}]}");
    char head[2048];
    MCPG_CHECK(call_traced(inst, tp, "vendor=a1", head) == MCPG_CONTINUE, "traced call");
    MCPG_CHECK(strstr(head, "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"),
               "traceparent passed on: %s", head);
    MCPG_CHECK(strstr(head, "tracestate: vendor=a1\r\n"), "tracestate passed on: %s", head);
    MCPG_CHECK(call_traced(inst, "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "vendor=a1",
                           head) == MCPG_CONTINUE, "call with a zero trace-id");
    MCPG_CHECK(!strstr(head, "traceparent") && !strstr(head, "tracestate"), "invalid trace dropped: %s",
               head);
    MCPG_CHECK(call_traced(inst, NULL, NULL, head) == MCPG_CONTINUE, "untraced call");
    MCPG_CHECK(!strstr(head, "traceparent"), "no trace, no header: %s", head);
    unload(inst);
}

/* ------------------------------------------------------------------ */
/* arguments stay in their place                                       */

/* The call succeeds and the server saw exactly "GET <target> HTTP/1.1". */
static void expect_target(mcpg_instance *inst, const char *tool, const char *args, const char *target) {
    int64_t code;
    char msg[256], line[1024], want[1024];
    json_t *o = call(inst, tool, args, &code, msg, sizeof msg);
    last_request(line, NULL, NULL);
    snprintf(want, sizeof want, "GET %s HTTP/1.1", target);
    MCPG_CHECK(o && strcmp(line, want) == 0, "%s %s: want \"%s\", got \"%s\" (%s)", tool, args, want,
               o ? line : "no request", msg);
    json_decref(o);
}

/* The call is refused -32602 with a message holding want (and want2 unless
 * NULL), and no request reaches the server. */
static void expect_refused(mcpg_instance *inst, const char *tool, const char *args, const char *want,
                           const char *want2) {
    int64_t code;
    char msg[512];
    int before = atomic_load(&srv.requests);
    json_t *o = call(inst, tool, args, &code, msg, sizeof msg);
    MCPG_CHECK(!o && code == MCPG_RPC_INVALID_PARAMS && strstr(msg, want) && (!want2 || strstr(msg, want2)),
               "%s %s: want -32602 \"%s\"%s%s, got %lld \"%s\"", tool, args, want, want2 ? " + " : "",
               want2 ? want2 : "", (long long)code, msg);
    MCPG_CHECK(atomic_load(&srv.requests) == before, "%s %s: refused, yet the upstream got a request", tool,
               args);
    json_decref(o);
}

/* A path value is one segment: every byte outside RFC 3986's unreserved
 * set is %XX ('%' too, so "%2e%2e" arrives as text); "." and ".." alone
 * or between slashes, an empty segment, and non-scalars are refused. */
static void test_path_segments(void) {
    mcpg_instance *inst = load("{\"tools\":[{\"name\":\"user\",\"method\":\"GET\","
                               "\"url\":\"http://127.0.0.1:PORT/api/v1/users/{id}/profile\","
                               "\"input_schema\":{\"type\":\"object\"}}]}");
    static const struct {
        const char *args, *target;
    } sent[] = {
        {"{\"id\":\"a/b\"}", "/api/v1/users/a%2Fb/profile"},
        {"{\"id\":\"a?b=c\"}", "/api/v1/users/a%3Fb%3Dc/profile"},
        {"{\"id\":\"a#b\"}", "/api/v1/users/a%23b/profile"},
        {"{\"id\":\"%2e%2e\"}", "/api/v1/users/%252e%252e/profile"},
        {"{\"id\":\"%2E\"}", "/api/v1/users/%252E/profile"},
        {"{\"id\":\"a;b\\\\c&d+e=f\"}", "/api/v1/users/a%3Bb%5Cc%26d%2Be%3Df/profile"},
        {"{\"id\":\"-._~AZaz09\"}", "/api/v1/users/-._~AZaz09/profile"},
        {"{\"id\":\" \\r\\n\\t\\u0001\\u007f\"}", "/api/v1/users/%20%0D%0A%09%01%7F/profile"},
        {"{\"id\":\"\\u00e9\\u2024\"}", "/api/v1/users/%C3%A9%E2%80%A4/profile"},
        {"{\"id\":\"...\"}", "/api/v1/users/.../profile"},
        {"{\"id\":\"a..b\"}", "/api/v1/users/a..b/profile"},
        {"{\"id\":\".a\"}", "/api/v1/users/.a/profile"},
        {"{\"id\":42}", "/api/v1/users/42/profile"},
        {"{\"id\":-1.5}", "/api/v1/users/-1.5/profile"},
        {"{\"id\":true}", "/api/v1/users/true/profile"},
    };
    for (size_t i = 0; i < sizeof sent / sizeof *sent; i++)
        expect_target(inst, "user", sent[i].args, sent[i].target);
    static const struct {
        const char *args, *want;
    } refused[] = {
        {"{\"id\":\"..\"}", "argument 'id' may not be \".\" or \"..\""},
        {"{\"id\":\".\"}", "argument 'id' may not be \".\" or \"..\""},
        {"{\"id\":\"../admin\"}", "argument 'id' may not be"},
        {"{\"id\":\"a/../../admin\"}", "argument 'id' may not be"},
        {"{\"id\":\"a/./b\"}", "argument 'id' may not be"},
        {"{\"id\":\"x/..\"}", "argument 'id' may not be"},
        {"{\"id\":\"..\\\\admin\"}", "argument 'id' may not be"},
        {"{\"id\":\"\"}", "argument 'id' would leave an empty URL path segment"},
        {"{\"id\":\"a\\u0000b\"}", "argument 'id' holds a NUL byte"},
        {"{\"id\":{\"a\":1}}", "argument 'id' goes in the URL: it must be a string, number or boolean"},
        {"{\"id\":[1]}", "argument 'id' goes in the URL"},
        {"{\"id\":null}", "argument 'id' goes in the URL"},
        {"{}", "missing argument 'id'"},
        {"[\"..\"]", "arguments must be an object"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        expect_refused(inst, "user", refused[i].args, refused[i].want, NULL);
    unload(inst);
}

/* A placeholder that is only part of a segment: the segment is judged
 * once filled, so an empty value is fine beside literal text and refused
 * when the segment would be empty, "." or ".." ("%2e" counted as a dot). */
static void test_partial_segments(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"file\",\"method\":\"GET\","
        "\"url\":\"http://127.0.0.1:PORT/files/{name}.json\"},"
        "{\"name\":\"pair\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/a/{x}{y}/z\"},"
        "{\"name\":\"dot\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/d/.{x}\"},"
        "{\"name\":\"pct\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/p/%2e{x}\"},"
        "{\"name\":\"last\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/l/{x}\"},"
        "{\"name\":\"twice\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/t/{x}/{x}\"}]}");
    expect_target(inst, "file", "{\"name\":\"\"}", "/files/.json");
    expect_target(inst, "file", "{\"name\":\"a/b\"}", "/files/a%2Fb.json");
    expect_refused(inst, "file", "{\"name\":\".\"}", "argument 'name' may not be", NULL);
    expect_target(inst, "pair", "{\"x\":\"a\",\"y\":\"\"}", "/a/a/z");
    expect_target(inst, "pair", "{\"x\":\"\",\"y\":\"b\"}", "/a/b/z");
    expect_target(inst, "pair", "{\"x\":\"..\\u002e\",\"y\":\"\"}", "/a/.../z");
    expect_refused(inst, "pair", "{\"x\":\"\",\"y\":\"\"}",
                   "arguments 'x', 'y' would leave an empty URL path segment", NULL);
    expect_target(inst, "dot", "{\"x\":\"a\"}", "/d/.a");
    expect_refused(inst, "dot", "{\"x\":\"\"}", "argument 'x' would make the URL path segment \".\"", NULL);
    expect_target(inst, "pct", "{\"x\":\"%2e\"}", "/p/%2e%252e");
    expect_refused(inst, "pct", "{\"x\":\"\"}", "argument 'x' would make the URL path segment \"%2e\"", NULL);
    expect_refused(inst, "last", "{\"x\":\"\"}", "argument 'x' would leave an empty URL path segment", NULL);
    expect_target(inst, "twice", "{\"x\":\"q\"}", "/t/q/q");
    expect_refused(inst, "twice", "{\"x\":\"\"}", "argument 'x' would leave", NULL);
    unload(inst);
}

/* A query value is encoded whole, so '&', '=', '+', '#' and '%' cannot
 * start another parameter, end the query or be decoded; keys are the
 * config's, "{x}" in a key being text. Dot values are fine here. */
static void test_query_values(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"q\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/search\","
        "\"query\":{\"q\":\"{q}\"}},"
        "{\"name\":\"k\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/search\","
        "\"query\":{\"{q}\":\"v\"}}]}");
    expect_target(inst, "q", "{\"q\":\"&admin=1\"}", "/search?q=%26admin%3D1");
    expect_target(inst, "q", "{\"q\":\"a+b c#d%20\"}", "/search?q=a%2Bb%20c%23d%2520");
    expect_target(inst, "q", "{\"q\":\"x\\r\\nHost: evil\"}", "/search?q=x%0D%0AHost%3A%20evil");
    expect_target(inst, "q", "{\"q\":\"..\"}", "/search?q=..");
    expect_target(inst, "q", "{\"q\":\"\"}", "/search?q=");
    expect_refused(inst, "q", "{\"q\":[\"a\",\"b\"]}", "argument 'q' goes in the URL", NULL);
    expect_refused(inst, "q", "{\"q\":\"\\u0000\"}", "argument 'q' holds a NUL byte", NULL);
    expect_target(inst, "k", "{\"q\":\"admin\"}", "/search?%7Bq%7D=v");
    unload(inst);
}

/* The body is JSON that jansson writes: a value cannot close its string
 * or add a member; a NUL anywhere in a value is refused. */
static void test_body_values(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"post\",\"method\":\"POST\",\"url\":\"http://127.0.0.1:PORT/items\","
        "\"body\":{\"title\":\"{title}\",\"note\":\"by {title}\",\"any\":\"{any}\"},"
        "\"input_schema\":{\"type\":\"object\"}}]}");
    static const char evil[] = "\\\"},\\\"admin\\\":true,\\\"x\\\":{\\\"\\n\\u0001";
    char args[256], body[2048], line[1024];
    snprintf(args, sizeof args, "{\"title\":\"%s\",\"any\":{\"k\":[\"..\",null]}}", evil);
    int64_t code;
    char msg[256];
    json_t *o = call(inst, "post", args, &code, msg, sizeof msg);
    last_request(line, NULL, body);
    json_t *b = json_loads(body, 0, NULL);
    static const char want[] = "\"},\"admin\":true,\"x\":{\"\n\001";
    MCPG_CHECK(o && b && json_object_size(b) == 3 && !json_object_get(b, "admin") &&
                   strcmp(json_string_value(json_object_get(b, "title")), want) == 0 &&
                   strncmp(json_string_value(json_object_get(b, "note")), "by \"},", 6) == 0 &&
                   json_is_null(json_array_get(json_object_get(json_object_get(b, "any"), "k"), 1)),
               "body values stay values: %s (%s)", body, msg);
    MCPG_CHECK(strcmp(line, "POST /items HTTP/1.1") == 0, "line: %s", line);
    json_decref(b);
    json_decref(o);
    expect_refused(inst, "post", "{\"title\":\"a\",\"any\":{\"k\":\"\\u0000\"}}",
                   "argument 'any' holds a NUL byte", NULL);
    unload(inst);
}

/* Header values are the config's: a "{name}" in one is sent as written,
 * and no argument reaches a header line. */
static void test_headers_static(void) {
    mcpg_instance *inst = load("{\"tools\":[{\"name\":\"h\",\"method\":\"GET\","
                               "\"url\":\"http://127.0.0.1:PORT/h\",\"headers\":{\"X-Tenant\":\"{tenant}\","
                               "\"X-Tab\":\"a\\tb\"}}]}");
    int64_t code;
    char msg[256], head[2048];
    json_t *o = call(inst, "h", "{\"tenant\":\"t1\\r\\nX-Evil: 1\"}", &code, msg, sizeof msg);
    last_request(NULL, head, NULL);
    MCPG_CHECK(o && strstr(head, "\r\nX-Tenant: {tenant}\r\n") && strstr(head, "\r\nX-Tab: a\tb\r\n") &&
                   !strstr(head, "X-Evil") && !strstr(head, "t1"),
               "headers as configured: %s (%s)", head, msg);
    json_decref(o);
    unload(inst);
}

/* The encoded URL may be up to HTTP_TARGET_MAX (8192) bytes; beyond, the
 * call is refused naming the longest argument in the URL. */
static void test_long_values(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"long\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/l/{id}\","
        "\"query\":{\"q\":\"{q}\"}}]}");
    size_t cap = 9064;
    char *args = malloc(cap);
    MCPG_REQUIRE(args, "memory");
    int k = snprintf(args, cap, "{\"q\":\"x\",\"id\":\"");
    memset(args + k, 'a', 2000);
    snprintf(args + k + 2000, 64, "\"}");
    int64_t code;
    char msg[512];
    int before = atomic_load(&srv.requests);
    json_t *o = call(inst, "long", args, &code, msg, sizeof msg); /* the recorded line is cut at 1 KiB */
    MCPG_CHECK(o && atomic_load(&srv.requests) == before + 1, "a 2000-byte id goes out: %s", msg);
    json_decref(o);
    memset(args + k, 'a', 8190); /* "/l/" + 8190 + "?q=x": over by 3 */
    snprintf(args + k + 8190, 64, "\"}");
    expect_refused(inst, "long", args, "the URL would be 8197 bytes once encoded, over 8192",
                   "(argument 'id' is 8190 bytes)");
    k = snprintf(args, cap, "{\"id\":\"i\",\"q\":\"");
    memset(args + k, '&', 3000); /* 9000 bytes encoded */
    snprintf(args + k + 3000, 64, "\"}");
    expect_refused(inst, "long", args, "over 8192", "(argument 'q' is 3000 bytes)");
    free(args);
    unload(inst);
}

static void test_status_errors(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"miss\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/missing\"},"
        "{\"name\":\"tea\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/teapot\","
        "\"error_status\":{\"418\":\"the upstream is a teapot\"}}]}");
    int64_t code;
    char msg[256];
    json_t *o = call(inst, "miss", "{}", &code, msg, sizeof msg);
    MCPG_REQUIRE(o, "a result, not an error: %s", msg);
    MCPG_CHECK(json_is_true(json_object_get(o, "isError")) &&
                   strcmp(text_of(o), "HTTP 404: no such item here") == 0,
               "404: %s", text_of(o));
    json_decref(o);
    o = call(inst, "tea", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(o && json_is_true(json_object_get(o, "isError")) &&
                   strcmp(text_of(o), "the upstream is a teapot") == 0,
               "mapped: %s", o ? text_of(o) : msg);
    json_decref(o);
    unload(inst);
}

static void test_timeout_and_cap(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"slow\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/slow\","
        "\"timeout_ms\":200},"
        "{\"name\":\"big\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/big\","
        "\"max_response_bytes\":1000},"
        "{\"name\":\"bigok\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/big\","
        "\"max_response_bytes\":5000}]}");
    int64_t code;
    char msg[256];
    json_t *o = call(inst, "slow", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(!o && code == MCPG_RPC_SERVER_ERROR && strstr(msg, "slow") && strstr(msg, "200 ms"),
               "timeout: %lld %s", (long long)code, msg);
    o = call(inst, "big", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(!o && code == MCPG_RPC_SERVER_ERROR && strstr(msg, "exceeds 1000 bytes"), "cap: %s", msg);
    o = call(inst, "bigok", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(o && strlen(text_of(o)) == 5000, "at the cap: %s", msg);
    json_decref(o);
    unload(inst);
}

static void test_keep_alive(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"get\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/items/1\"}]}");
    int64_t code;
    char msg[256];
    int before = atomic_load(&srv.accepted);
    for (int i = 0; i < 2; i++) {
        json_t *o = call(inst, "get", "{}", &code, msg, sizeof msg);
        MCPG_CHECK(o && !json_object_get(o, "isError"), "call %d: %s", i, msg);
        json_decref(o);
    }
    MCPG_CHECK(atomic_load(&srv.accepted) - before == 1, "2 calls, %d connections",
               atomic_load(&srv.accepted) - before);
    /* The upstream closes its connections after each answer: the pool drops
     * each when the close arrives, and the next call opens a new one. */
    atomic_store(&srv.close_after, 1);
    before = atomic_load(&srv.accepted);
    for (int i = 0; i < 3; i++) { /* the first reuses the open one */
        json_t *o = call(inst, "get", "{}", &code, msg, sizeof msg);
        MCPG_CHECK(o && !json_object_get(o, "isError"), "after close %d: %s", i, msg);
        json_decref(o);
        MCPG_CHECK(srv_all_closed(), "call %d: the client kept the connection the upstream closed", i);
    }
    MCPG_CHECK(atomic_load(&srv.accepted) - before == 2, "a new connection each: %d",
               atomic_load(&srv.accepted) - before);
    atomic_store(&srv.close_after, 0);
    unload(inst);
}

/* An idle connection the upstream closed is dropped when the close
 * arrives, so the next call (even a POST, never sent twice) goes on a new
 * one. */
static void test_closed_idle_dropped(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"post\",\"method\":\"POST\",\"url\":\"http://127.0.0.1:PORT/items\","
        "\"body\":{\"k\":1}}]}");
    int64_t code;
    char msg[256];
    atomic_store(&srv.close_after, 1);
    json_t *o = call(inst, "post", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(o && !json_object_get(o, "isError"), "first post: %s", msg);
    json_decref(o);
    MCPG_CHECK(srv_all_closed(), "the client kept the connection the upstream closed");
    int before = atomic_load(&srv.accepted);
    o = call(inst, "post", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(o && !json_object_get(o, "isError"), "second post: %s", msg);
    json_decref(o);
    MCPG_CHECK(atomic_load(&srv.accepted) == before + 1, "a new connection: %d",
               atomic_load(&srv.accepted) - before);
    atomic_store(&srv.close_after, 0);
    unload(inst);
}

/* A kept connection the upstream closes as the next request arrives (no
 * byte of an answer): a GET is sent again on a new connection, a POST is
 * never sent twice and fails, naming the tool and the close. */
static void test_stale_request(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"get\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/items/1\"},"
        "{\"name\":\"post\",\"method\":\"POST\",\"url\":\"http://127.0.0.1:PORT/items\"}]}");
    int64_t code;
    char msg[256];
    json_t *o = call(inst, "get", "{}", &code, msg, sizeof msg); /* opens the connection kept */
    MCPG_CHECK(o && !json_object_get(o, "isError"), "first get: %s", msg);
    json_decref(o);
    int before = atomic_load(&srv.accepted);
    atomic_store(&srv.drop_next, 1);
    o = call(inst, "get", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(o && !json_object_get(o, "isError") && atomic_load(&srv.accepted) == before + 1,
               "GET sent again on a new connection: %s, %d connections", msg,
               atomic_load(&srv.accepted) - before);
    json_decref(o);
    before = atomic_load(&srv.accepted);
    atomic_store(&srv.drop_next, 1);
    o = call(inst, "post", "{}", &code, msg, sizeof msg); /* on the connection the GET opened */
    MCPG_CHECK(!o && code == MCPG_RPC_SERVER_ERROR && strstr(msg, "post: upstream closed the connection") &&
                   atomic_load(&srv.accepted) == before,
               "POST not sent again: %s, %d connections", msg, atomic_load(&srv.accepted) - before);
    json_decref(o);
    unload(inst);
}

static void test_cancel(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"slow\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:PORT/slow\"}]}");
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "slow", "{}", "1");
    MCPG_REQUIRE(mcpg_fakehost_dispatch(fh, inst, c) == MCPG_PENDING, "pending");
    mcpg_fakehost_run_for(fh, 100);
    mcpg_fakehost_host(fh)->call_cancel(c);
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 2000) == MCPG_DENY, "cancel answers");
    MCPG_CHECK(mcpg_fakehost_error_code(c) == MCPG_RPC_SERVER_ERROR &&
                   strstr(mcpg_fakehost_error_message(c), "cancelled"),
               "cancelled: %s", mcpg_fakehost_error_message(c));
    mcpg_fakehost_call_free(fh, c);
    unload(inst);
}

static void test_refused(void) {
    int port = tsrv_dead_port();
    MCPG_REQUIRE(port > 0, "free port");
    char conf[512];
    snprintf(conf, sizeof conf, "{\"tools\":[{\"name\":\"down\",\"method\":\"GET\","
             "\"url\":\"http://127.0.0.1:%d/\"}]}", port);
    mcpg_instance *inst = NULL;
    MCPG_REQUIRE(mcpg_fakehost_load_file(fh, so_path, "rest", conf, &inst) == 0, "load");
    MCPG_REQUIRE(mcpg_fakehost_set_inline(inst, 1) == 0, "inline");
    int64_t code;
    char msg[256];
    json_t *o = call(inst, "down", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(!o && code == MCPG_RPC_SERVER_ERROR && strstr(msg, "upstream unreachable"),
               "refused: %s", msg);
    unload(inst);
}

/* https: verified against the generated CA with ca_file; refused without
 * it, the error naming the tool and the cause; accepted with tls_insecure. */
static void test_https(void) {
    tcerts certs;
    MCPG_REQUIRE(tcerts_make(&certs) == 0, "certificates (openssl command) in %s", certs.dir);
    SSL_CTX *sctx = tcerts_server_ctx(&certs);
    tsrv *ts = sctx ? tsrv_start(sctx) : NULL;
    MCPG_REQUIRE(ts, "TLS test server");
    static const char tool[] = "{\"name\":\"sec\",\"method\":\"GET\",\"url\":\"https://127.0.0.1:%d/\"}";
    char conf[1024], t[256];
    snprintf(t, sizeof t, tool, tsrv_port(ts));
    int64_t code;
    char msg[512];
    struct {
        const char *extra;
        int ok;
    } cases[] = {{",\"ca_file\":\"CA\"", 1}, {"", 0}, {",\"tls_insecure\":true", 1}};
    for (size_t i = 0; i < 3; i++) {
        char extra[256];
        const char *ca = strstr(cases[i].extra, "CA");
        if (ca) snprintf(extra, sizeof extra, "%.*s%s\"", (int)(ca - cases[i].extra), cases[i].extra, certs.ca);
        else snprintf(extra, sizeof extra, "%s", cases[i].extra);
        snprintf(conf, sizeof conf, "{\"tools\":[%s]%s}", t, extra);
        mcpg_instance *inst = NULL;
        MCPG_REQUIRE(mcpg_fakehost_load_file(fh, so_path, "rest", conf, &inst) == 0, "load %s: %s", conf,
                     mcpg_fakehost_report_text(fh));
        MCPG_REQUIRE(mcpg_fakehost_set_inline(inst, 1) == 0, "inline");
        json_t *o = call(inst, "sec", "{}", &code, msg, sizeof msg);
        if (cases[i].ok)
            MCPG_CHECK(o && strcmp(text_of(o), "{\"ok\":true}") == 0, "case %zu: %s", i, msg);
        else
            MCPG_CHECK(!o && code == MCPG_RPC_SERVER_ERROR && strstr(msg, "sec: TLS with 127.0.0.1:") &&
                           strstr(msg, "certificate verify failed"),
                       "refused without ca_file: %s", msg);
        json_decref(o);
        unload(inst);
    }
    tsrv_stop(ts);
    SSL_CTX_free(sctx);
    tcerts_remove(&certs);
}

static void test_config_errors(void) {
    static const struct {
        const char *conf, *want;
    } cases[] = {
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"https://h/\"}],"
         "\"ca_file\":\"/nonexistent/ca.pem\"}",
         "ca_file: cannot read /nonexistent/ca.pem: No such file or directory"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"https://h/\"}],"
         "\"key_file\":\"/dev/null\"}", "cert_file: is required with key_file"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"https://h/\"}],\"ca_flie\":\"x\"}",
         "ca_flie: unknown key (did you mean \"ca_file\"?)"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"https://h/\"}],\"max_conns\":0}",
         "max_conns"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"ftp://h/\"}]}",
         "tools[0].url: expected an http:// or https:// URL"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/a?b=1\"}]}",
         "tools[0].url: the path may not hold '?'"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h:99999/\"}]}", "tools[0].url: bad port"},
        /* no argument chooses the scheme, host or port */
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/\"},"
         "{\"name\":\"y\",\"method\":\"GET\",\"url\":\"http://{host}/items/{id}\"}]}",
         "tools[1].url: no placeholder may choose the scheme, host or port (in \"http://{host}\"): "
         "arguments fill only the path, \"query\" and \"body\""},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://127.0.0.1:{port}/\"}]}",
         "tools[0].url: no placeholder may choose the scheme, host or port (in \"http://127.0.0.1:{port}\")"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"{scheme}://h/a\"}]}",
         "tools[0].url: no placeholder may choose the scheme, host or port (in \"{scheme}://h\")"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://a{x}.example/\"}]}",
         "tools[0].url: no placeholder may choose"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"{url}\"}]}",
         "tools[0].url: no placeholder may choose"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/a\\u000bb\"}]}",
         "tools[0].url: a control character in the URL"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/\","
         "\"headers\":{\"A\":\"a\\r\\nB: 1\"}}]}",
         "tools[0].headers.A: the value holds a line break"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/\","
         "\"headers\":{\"A\":\"a\\u007f\"}}]}",
         "tools[0].headers.A: the value holds a control character"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"FETCH\",\"url\":\"http://h/\"}]}", "tools[0].method"},
        {"{\"tools\":[{\"name\":\"x\",\"url\":\"http://h/\"}]}", "tools[0].method: is required"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/\",\"timout_ms\":5}]}", "timeout_ms"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/\",\"headers\":{\"A\":"
         "{\"from_env\":\"MCPG_SURELY_UNSET_VAR\"}}}]}", "tools[0].headers.A"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/\",\"headers\":{\"Bad Name\":\"v\"}}]}",
         "tools[0].headers.Bad Name"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/\",\"error_status\":{\"99\":\"m\"}}]}",
         "tools[0].error_status.99"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/\",\"query\":{\"q\":3}}]}",
         "tools[0].query.q"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/\"},"
         "{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://h/\"}]}", "tools[1].name"},
        {"{\"tools\":[{\"name\":\"x\",\"method\":\"GET\",\"url\":\"http://no-such-host.invalid/\"}]}",
         ""}, /* found at create: logged, not reported */
        {"{}", "tools"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mcpg_instance *inst = NULL;
        int rc = mcpg_fakehost_load_file(fh, so_path, "rest", cases[i].conf, &inst);
        MCPG_CHECK(rc == MCPG_ECONFIG && strstr(mcpg_fakehost_report_text(fh), cases[i].want),
                   "case %zu: rc %d, report %s", i, rc, mcpg_fakehost_report_text(fh));
        if (rc == 0) unload(inst);
    }
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: %s backend_http.so", argv[0]);
    so_path = argv[1];
    srv_start();
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fakehost");
    mcpg_fakehost_set_quiet(fh, 1);
    test_get_templates();
    test_post_body();
    test_trace_context();
    test_path_segments();
    test_partial_segments();
    test_query_values();
    test_body_values();
    test_headers_static();
    test_long_values();
    test_status_errors();
    test_timeout_and_cap();
    test_keep_alive();
    test_closed_idle_dropped();
    test_stale_request();
    test_cancel();
    test_refused();
    test_https();
    test_config_errors();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host clean: %d problems", problems);
    srv_stop();
    return MCPG_CHECK_EXIT("backend_http");
}
