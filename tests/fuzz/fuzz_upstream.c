/* Fuzzer: the upstream side of backend_mcp, as a hostile MCP server would
 * answer it. The answer is real bytes on a loopback connection to
 * upclient (lib/upclient: the HTTP/1.1 client backend_mcp's HTTP link
 * uses), written in pieces the input chooses and then closed; the body
 * goes, as link_http.c hands it on, to backend_mcp's SSE reader (sse.c)
 * when the answer says text/event-stream, and every message is classified
 * with the JSON calls up_on_message makes.
 *
 * Checked: on_done comes exactly once, after the head when it says 0; no
 * interim (1xx) head reaches the caller; headers and body are never more
 * than was sent; the SSE reader gives the same events whatever the pieces
 * the body came in (each one whole-body pass compared with the pieces as
 * they arrived).
 *
 * Input: byte 0 seeds the split points; the rest is the answer. */
#include "fuzz.h"

#include "sse.h"
#include "upclient.h"

#include <mcpg/sdk.h>
#include <string.h>
#include <strings.h>

#define MAX_MESSAGE 65536 /* backend_mcp's max_message_bytes, small enough to be reached */
#define REQUEST_BODY "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}"

static uv_loop_t g_loop;
static uv_tcp_t g_listener;
static up_target *g_target;
static up_pool *g_pool;

/* ---- the hostile upstream: one connection at a time ----------------------- */

typedef struct upstream_side {
    uv_tcp_t conn;
    int open, closed;
    mcpg_buf got;     /* the request, until its body is in */
    int request_in;
} upstream_side;

static upstream_side g_up;

static void on_up_closed(uv_handle_t *h) {
    (void)h;
    g_up.closed = 1;
}

static void close_upstream(void) {
    if (g_up.open && !uv_is_closing((uv_handle_t *)&g_up.conn)) uv_close((uv_handle_t *)&g_up.conn, on_up_closed);
}

static void on_up_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
    static char buf[65536];
    (void)h, (void)hint;
    *b = uv_buf_init(buf, sizeof buf);
}

static void on_up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
    (void)s;
    if (n < 0) {
        close_upstream();
        return;
    }
    mcpg_buf_append(&g_up.got, b->base, (size_t)n);
    static const char tail[] = "\r\n\r\n" REQUEST_BODY;
    size_t tn = sizeof tail - 1;
    if (g_up.got.len >= tn && !memcmp(g_up.got.data + g_up.got.len - tn, tail, tn)) g_up.request_in = 1;
}

static void on_connection(uv_stream_t *l, int status) {
    FZ_CHECK(status == 0 && !g_up.open, "a second connection (status %d)", status);
    uv_tcp_init(&g_loop, &g_up.conn);
    FZ_CHECK(uv_accept(l, (uv_stream_t *)&g_up.conn) == 0, "accept");
    g_up.open = 1;
    uv_read_start((uv_stream_t *)&g_up.conn, on_up_alloc, on_up_read);
}

/* ---- the gateway's side: what the request saw ------------------------------ */

typedef struct answer {
    int heads, dones, err, status, sse;
    size_t sent, head_bytes;
    mcpg_buf body;       /* every body byte, for the one-piece SSE pass */
    sse_reader sse_r;    /* fed as the pieces came */
    mcpg_buf events;     /* each event as "<len>:<data>" */
    uint32_t nevents;
} answer;

/* as up_on_message takes a message apart before it acts on it */
static void classify(const char *msg, size_t n) {
    mcpg_json_span id, method, params;
    (void)mcpg_json_object_get(msg, n, "id", &id);
    int has_method = mcpg_json_object_get(msg, n, "method", &method) == 1 && method.type == MCPG_JSON_STRING;
    if (mcpg_json_validate(msg, n) != 0) return;
    if (has_method) {
        char name[128];
        size_t len;
        if (mcpg_json_string_decode(&method, name, sizeof name, &len) == 0)
            FZ_CHECK(len < sizeof name && name[len] == '\0', "method name");
        (void)mcpg_json_object_get(msg, n, "params", &params);
    }
}

static void on_event(void *arg, const char *data, size_t n) {
    mcpg_buf *out = arg;
    FZ_CHECK(n <= MAX_MESSAGE, "an event of %zu bytes", n);
    mcpg_buf_printf(out, "%zu:", n);
    mcpg_buf_append(out, data, n);
}

static void on_live_event(void *arg, const char *data, size_t n) {
    answer *a = arg;
    on_event(&a->events, data, n);
    a->nevents++;
    if (n) classify(data, n);
}

static int on_head(void *arg, int status, const up_header *h, size_t n) {
    answer *a = arg;
    FZ_CHECK(!a->heads++ && !a->dones, "a second head, or one after the end");
    FZ_CHECK(status >= 100 && status <= 999 && (status >= 200 || status == 101), "head with status %d", status);
    a->status = status;
    for (size_t i = 0; i < n; i++) {
        FZ_CHECK(h[i].name && h[i].name_len && (h[i].value || !h[i].value_len), "header %zu", i);
        a->head_bytes += h[i].name_len + h[i].value_len;
    }
    FZ_CHECK(a->head_bytes <= a->sent, "%zu header bytes from %zu sent", a->head_bytes, a->sent);
    const up_header *ct = up_header_find(h, n, "content-type");
    a->sse = ct && ct->value_len >= 17 && strncasecmp(ct->value, "text/event-stream", 17) == 0;
    return 0;
}

static int on_body(void *arg, const char *p, size_t n) {
    answer *a = arg;
    FZ_CHECK(a->heads == 1 && !a->dones, "body before the head or after the end");
    mcpg_buf_append(&a->body, p, n);
    FZ_CHECK(a->head_bytes + a->body.len <= a->sent, "%zu body bytes from %zu sent", a->body.len, a->sent);
    if (a->sse && a->status < 300) return sse_feed(&a->sse_r, p, n, on_live_event, a);
    return a->body.len > MAX_MESSAGE ? -1 : 0;
}

static void on_done(void *arg, int err) {
    answer *a = arg;
    FZ_CHECK(!a->dones++, "on_done twice");
    FZ_CHECK(err != 0 || a->heads == 1, "done without a head");
    a->err = err;
}

static const up_callbacks k_callbacks = {on_head, on_body, on_done};

/* The events of the whole body read in one piece equal those read as it came. */
static void check_sse(answer *a) {
    if (!a->sse || a->status >= 300 || a->err) return;
    sse_reader whole = {.max = MAX_MESSAGE};
    mcpg_buf events = {0};
    int rc = sse_feed(&whole, a->body.data ? a->body.data : "", a->body.len, on_event, &events);
    FZ_CHECK(rc == 0, "the whole body failed where its pieces did not");
    FZ_CHECK(events.len == a->events.len && (!events.len || !memcmp(events.data, a->events.data, events.len)),
             "events differ by pieces:\n%.*s\n---\n%.*s", (int)events.len, events.data,
             (int)a->events.len, a->events.data);
    mcpg_buf_free(&events);
    sse_free(&whole);
}

/* ---- driving one exchange ------------------------------------------------------ */

static uv_timer_t g_guard;
static int g_guard_fired;

static void on_guard(uv_timer_t *t) {
    (void)t;
    g_guard_fired = 1;
}

/* Run the loop until *flag; a loopback exchange takes microseconds, so 5 s
 * (a loaded machine's worst) without it means the client hangs. */
static void run_until(int *flag, const char *what) {
    g_guard_fired = 0;
    uv_timer_start(&g_guard, on_guard, 5000, 0);
    while (!*flag && !g_guard_fired) uv_run(&g_loop, UV_RUN_ONCE);
    uv_timer_stop(&g_guard);
    FZ_CHECK(*flag, "stuck waiting for %s", what);
}

/* Write the answer in pieces, letting the client read between them. */
static void answer_in_pieces(answer *a, const uint8_t *p, size_t n, uint32_t seed) {
    for (size_t off = 0; off < n && g_up.open && !uv_is_closing((uv_handle_t *)&g_up.conn);) {
        size_t take = 1 + fz_next(&seed) % (seed & 1 ? 8 : 512);
        if (take > n - off) take = n - off;
        uv_buf_t b = uv_buf_init((char *)p + off, (unsigned)take);
        int w = uv_try_write((uv_stream_t *)&g_up.conn, &b, 1);
        if (w > 0) {
            off += (size_t)w;
            a->sent += (size_t)w;
        } else if (w != UV_EAGAIN) {
            break; /* the client gave up on the connection */
        }
        for (int i = 0; i < 4; i++) uv_run(&g_loop, UV_RUN_NOWAIT);
        if (a->dones) break;
    }
    close_upstream();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    uv_loop_init(&g_loop);
    uv_timer_init(&g_loop, &g_guard);
    uv_tcp_init(&g_loop, &g_listener);
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", 0, &addr);
    FZ_CHECK(uv_tcp_bind(&g_listener, (const struct sockaddr *)&addr, 0) == 0, "bind");
    FZ_CHECK(uv_listen((uv_stream_t *)&g_listener, 16, on_connection) == 0, "listen");
    int len = sizeof addr;
    uv_tcp_getsockname(&g_listener, (struct sockaddr *)&addr, &len);
    char url[64], err[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/mcp", ntohs(addr.sin_port));
    g_target = up_target_new(url, NULL, 2000, err, sizeof err);
    FZ_CHECK(g_target, "target: %s", err);
    g_pool = up_pool_new(&g_loop, g_target, 1, 0, 4); /* no keep-alive: one connection per input */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input in = {data, size};
    uint32_t seed = ((uint32_t)fz_byte(&in) << 1 | 1) * 2654435761u;
    answer a = {.sse_r.max = MAX_MESSAGE};
    memset(&g_up, 0, sizeof g_up);
    FZ_CHECK(up_send(g_pool, "POST", "/mcp", "Accept: application/json, text/event-stream\r\n",
                     REQUEST_BODY, sizeof REQUEST_BODY - 1, 0, &k_callbacks, &a),
             "up_send");
    run_until(&g_up.request_in, "the request");
    answer_in_pieces(&a, in.p, in.n, seed);
    run_until(&a.dones, "on_done");
    run_until(&g_up.closed, "the upstream's close");
    check_sse(&a);
    for (int i = 0; i < 8; i++) uv_run(&g_loop, UV_RUN_NOWAIT); /* the client's close callbacks */
    mcpg_buf_free(&g_up.got);
    mcpg_buf_free(&a.body);
    mcpg_buf_free(&a.events);
    sse_free(&a.sse_r);
    return 0;
}
