/* Fuzzer: transport_http's request framing and header parsing, as a
 * connection runs them: th_conn_feed (http_feed.c) and the llhttp callbacks
 * (http_parse.c), with pipelined requests, pauses at message boundaries and
 * the kept rest parsed again.
 *
 * The rest of the transport is replaced at its seams (th_route,
 * th_respond_status_error, advancing the answer order, the free list) by this file,
 * which records what the parser produced. Each input runs twice: in one
 * piece, then split at points the input chooses (every byte, or pieces of
 * 1-64 bytes); both runs must produce the same requests and the same
 * refusal. Every request is checked against the parser's own promises.
 *
 * Input: byte 0 picks the limits, byte 1 the split, bytes 2-3 seed the
 * split points and how many requests the connection takes before it pauses;
 * the rest is what the client sends. Both runs must refuse at the same
 * request; the status may differ only when one of them is a limit's (see
 * same_refusal).
 */
#include "fuzz.h"

#include "http/http.h"

#include <mcpg/fakehost.h>
#include <string.h>
#include <strings.h>

static mcpg_fakehost *g_fh;
static const mcpg_host *g_host;
static uv_loop_t g_loop;
static th_config g_cfg;
static th_mod g_mod;
static th_worker_state g_ws;

/* ---- one run's record --------------------------------------------------------- */

typedef struct transcript {
    mcpg_buf text;      /* every request, serialized; then the refusal */
    uint32_t requests;
    int refused;        /* the status of the refusal, 0 none */
    size_t fed;         /* bytes handed to the parser so far */
    size_t accounted;   /* request bytes reported: header section + body */
    uint32_t pipeline;  /* requests the connection takes before pausing */
} transcript;

static transcript *g_rec;

/* ---- the seams: what http_conn.c, worker.c and router.c provide --------------- */

th_req *th_req_get(th_worker_state *ws) {
    th_req *r = g_host->calloc(1, sizeof *r);
    if (!r) return NULL;
    th_req_reset(r);
    r->ws = ws;
    return r;
}

void th_req_put(th_worker_state *ws, th_req *r) {
    (void)ws;
    g_host->buf_free(&r->data);
    g_host->buf_free(&r->resp);
    g_host->buf_free(&r->extra);
    g_host->buf_free(&r->server_text);
    g_host->free(r);
}

void th_mark_dirty(th_conn *c) { c->dirty = 1; }

void th_conn_close(th_conn *c) { c->closing = 1; }

void th_conn_advance(th_conn *c) {
    th_req *r;
    while ((r = c->qhead) && r->state == TH_REQ_DONE) {
        c->qhead = r->next;
        if (!c->qhead) c->qtail = NULL;
        c->qlen--;
        th_req_put(c->ws, r);
    }
}

/* As the real one, with the pipeline depth the input chose. */
int th_conn_can_take_more(const th_conn *c) {
    return !c->close_after && !c->closing && c->qlen < g_rec->pipeline;
}

void th_respond_status_error(th_conn *c, th_req *r, int status) {
    (void)c;
    FZ_CHECK(status == 400 || status == 413 || status == 431 || status == 503 || status == 505,
             "refused with %d", status);
    FZ_CHECK(!g_rec->refused, "a second refusal (%d after %d)", status, g_rec->refused);
    g_rec->refused = status;
    r->state = TH_REQ_DONE;
}

/* ---- what every accepted request must look like -------------------------------- */

static const char *const k_known[TH_H_COUNT] = {
    [TH_H_CONTENT_TYPE] = "content-type",   [TH_H_ACCEPT] = "accept",
    [TH_H_PROTOCOL_VERSION] = "mcp-protocol-version",
    [TH_H_MCP_METHOD] = "mcp-method",       [TH_H_MCP_NAME] = "mcp-name",
    [TH_H_EXPECT] = "expect",               [TH_H_HOST] = "host",
    [TH_H_ORIGIN] = "origin",               [TH_H_SESSION_ID] = "mcp-session-id",
    [TH_H_LAST_EVENT_ID] = "last-event-id", [TH_H_AUTHORIZATION] = "authorization",
    [TH_H_TRANSFER_ENCODING] = "transfer-encoding",
};

static int name_is(const th_req *r, const th_hdr *h, const char *name) {
    return h->name_len == strlen(name) && !memcmp(r->data.data + h->name_off, name, h->name_len);
}

static void check_header(const th_req *r, const th_hdr *h) {
    const char *name = r->data.data + h->name_off, *value = r->data.data + h->value_off;
    FZ_CHECK(h->name_len > 0, "an empty header name");
    FZ_CHECK(h->name_off + h->name_len <= r->body_off && h->value_off + h->value_len <= r->body_off,
             "a header outside the header area");
    for (uint32_t i = 0; i < h->name_len; i++)
        FZ_CHECK(!(name[i] >= 'A' && name[i] <= 'Z') && name[i] != ':' && name[i] > ' ',
                 "header name byte 0x%02x", (unsigned char)name[i]);
    for (uint32_t i = 0; i < h->value_len; i++)
        FZ_CHECK(value[i] != '\r' && value[i] != '\n', "a line break in a header value");
    if (h->value_len)
        FZ_CHECK(value[h->value_len - 1] != ' ' && value[h->value_len - 1] != '\t',
                 "trailing whitespace kept in a value");
}

/* known[] names the first occurrence, dup_mask says whether there was another. */
static void check_known(const th_req *r) {
    for (int k = 0; k < TH_H_COUNT; k++) {
        uint32_t first = 0, count = 0;
        for (uint32_t i = 0; i < r->nhdrs; i++)
            if (name_is(r, &r->hdrs[i], k_known[k]) && count++ == 0) first = i + 1;
        FZ_CHECK(r->known[k] == first, "%s: known %u, first at %u", k_known[k], r->known[k], first);
        FZ_CHECK(((r->dup_mask >> k) & 1) == (count > 1), "%s: dup bit, %u seen", k_known[k], count);
    }
}

/* RFC 9112 6.1: a request framed by Transfer-Encoding is HTTP/1.1 and its
 * last coding (of the last header: several make one list) is chunked; any
 * other Transfer-Encoding is refused, never left for Content-Length. */
static void check_transfer_encoding(const th_req *r, const th_hdr *h) {
    FZ_CHECK(!r->http_10, "HTTP/1.0 with Transfer-Encoding");
    FZ_CHECK(h, "a Transfer-Encoding without a coding taken");
    const char *v = r->data.data + h->value_off;
    FZ_CHECK(h->value_len >= 7 && !strncasecmp(v + h->value_len - 7, "chunked", 7),
             "Transfer-Encoding \"%.*s\" taken", (int)h->value_len, v);
}

static void check_request(const th_req *r) {
    FZ_CHECK(r->headers_done && r->state == TH_REQ_PARSING, "routed before its headers");
    FZ_CHECK(strcmp(llhttp_method_name((llhttp_method_t)r->http_method), "<unknown>"),
             "method %u", r->http_method);
    FZ_CHECK(r->url_off == 0 && r->url_len > 0, "url at %u, %u bytes", r->url_off, r->url_len);
    FZ_CHECK(r->url_len <= r->body_off && r->body_off + r->body_len == r->data.len,
             "url %u, body %u+%u, data %zu", r->url_len, r->body_off, r->body_len, r->data.len);
    FZ_CHECK(r->nhdrs <= TH_MAX_HEADERS, "%u headers", r->nhdrs);
    FZ_CHECK((int64_t)r->header_bytes <= g_cfg.max_header_bytes, "header section %u", r->header_bytes);
    FZ_CHECK((int64_t)r->body_len <= g_cfg.max_body_bytes, "body %u", r->body_len);
    const th_hdr *last_te = NULL;
    int te_seen = 0;
    for (uint32_t i = 0; i < r->nhdrs; i++) {
        check_header(r, &r->hdrs[i]);
        if (!name_is(r, &r->hdrs[i], "transfer-encoding")) continue;
        te_seen = 1;
        if (r->hdrs[i].value_len) last_te = &r->hdrs[i]; /* empty list elements do not count */
    }
    if (te_seen) check_transfer_encoding(r, last_te);
    check_known(r);
    /* The header section's last line ends are counted as the CRLF CRLF
     * (":" CRLF CRLF) they should be (http_parse.c on_headers_complete);
     * llhttp also takes bare LFs and a lone CR, so a request may be counted
     * up to those 5 bytes over, never more. */
    g_rec->accounted += r->header_bytes + r->body_len;
    FZ_CHECK(g_rec->accounted <= g_rec->fed + 5 * (g_rec->requests + 1),
             "requests of %zu bytes from %zu bytes of input", g_rec->accounted, g_rec->fed);
}

static void record(transcript *t, const th_req *r) {
    char line[64];
    /* header_bytes too: the limit must not depend on how the bytes were read */
    int n = snprintf(line, sizeof line, "%u %u %u %u %u %u|", r->http_method, r->http_10, r->keep_alive,
                     r->nhdrs, r->body_len, r->header_bytes);
    g_host->buf_append(&t->text, line, (size_t)n);
    g_host->buf_append(&t->text, r->data.data, r->data.len); /* url, headers, body */
    g_host->buf_append(&t->text, "\n", 1);
    t->requests++;
}

/* Requests are answered later, as a backend would: they wait in the queue
 * until the connection is serviced, so the pipeline limit pauses the parser. */
void th_route(th_conn *c, th_req *r) {
    (void)c;
    check_request(r);
    record(g_rec, r);
    r->state = TH_REQ_INFLIGHT;
}

/* ---- driving a connection -------------------------------------------------------- */

/* What the loop does between reads: answer what is queued, then let the
 * paused parser go on with what it kept (http_conn.c resume). */
static void service(th_conn *c) {
    for (int round = 0; round < 64; round++) {
        for (th_req *r = c->qhead; r; r = r->next) r->state = TH_REQ_DONE;
        th_conn_advance(c);
        if (!c->paused || c->closing || !th_conn_can_take_more(c)) return;
        th_conn_parse_saved(c);
    }
}

/* Reading stops once the connection closes after its answers (an error,
 * Connection: close) or is closed. */
static int reading(const th_conn *c) { return !c->close_after && !c->closing; }

static void conn_init(th_conn *c) {
    memset(c, 0, sizeof *c);
    c->ws = &g_ws;
    th_conn_parser_init(c);
}

static void conn_free(th_conn *c) {
    if (c->cur) th_req_put(&g_ws, c->cur);
    for (th_req *r = c->qhead, *next; r; r = next) {
        next = r->next;
        th_req_put(&g_ws, r);
    }
    g_host->buf_free(&c->out);
    g_host->buf_free(&c->saved);
}

static void feed_piece(th_conn *c, transcript *t, const uint8_t *p, size_t n) {
    service(c);
    if (!reading(c) || c->paused) return;
    t->fed += n;
    th_conn_feed(c, (const char *)p, n);
}

/* split 0: one piece; 1: every byte; else pieces of 1..64 bytes. */
static void run(transcript *t, const uint8_t *p, size_t n, int split, uint32_t seed) {
    th_conn c;
    conn_init(&c);
    g_rec = t;
    for (size_t off = 0; off < n && reading(&c);) {
        size_t take = split == 0 ? n : split == 1 ? 1 : 1 + fz_next(&seed) % 64;
        if (take > n - off) take = n - off;
        feed_piece(&c, t, p + off, take);
        off += take;
    }
    service(&c);
    FZ_CHECK(t->requests <= t->fed / 16 + 1, "%u requests from %zu bytes", t->requests, t->fed);
    g_host->buf_append(&t->text, t->refused ? "refused\n" : "open\n", t->refused ? 8 : 5);
    conn_free(&c);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    g_fh = mcpg_fakehost_new();
    g_host = mcpg_fakehost_host(g_fh);
    uv_loop_init(&g_loop);
    g_mod.host = g_host;
    g_mod.cfg = &g_cfg;
    g_ws.mod = &g_mod;
    g_ws.loop = &g_loop;
    return 0;
}

static void pick_limits(uint8_t b) {
    static const int64_t header_limits[] = {8192, 512, 64, 65536};
    static const int64_t body_limits[] = {65536, 16, 0, 1024};
    g_cfg.max_header_bytes = header_limits[b & 3];
    g_cfg.max_body_bytes = body_limits[(b >> 2) & 3];
}

/* A request both over a limit and wrong in some other way (malformed, a
 * version refused at the end of its headers) may be refused for either,
 * depending on whether the limit is passed in a read before the one that
 * shows the fault: both close the connection after the same requests. */
static int is_limit(int status) { return status == 413 || status == 431; }

static int same_refusal(int a, int b) { return a == b || (a && b && (is_limit(a) || is_limit(b))); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input in = {data, size};
    pick_limits(fz_byte(&in));
    uint8_t split = fz_byte(&in);
    uint32_t seed = (uint32_t)fz_byte(&in) << 8 | fz_byte(&in);
    uint32_t pipeline = 1 + (seed % TH_MAX_PIPELINE);
    seed = seed * 2654435761u | 1;

    transcript whole = {.pipeline = pipeline}, pieces = {.pipeline = pipeline};
    run(&whole, in.p, in.n, 0, seed);
    run(&pieces, in.p, in.n, split & 1 ? 1 : 2, seed);
    FZ_CHECK(whole.text.len == pieces.text.len && !memcmp(whole.text.data, pieces.text.data, whole.text.len),
             "the split changed what was parsed:\n--- whole\n%.*s--- split\n%.*s", (int)whole.text.len,
             whole.text.data, (int)pieces.text.len, pieces.text.data);
    FZ_CHECK(same_refusal(whole.refused, pieces.refused),
             "refused %d in one piece, %d split", whole.refused, pieces.refused);
    g_host->buf_free(&whole.text);
    g_host->buf_free(&pieces.text);
    return 0;
}
