/* Unit tests for mcpg-load's pure pieces: histogram, response framing
 * (chunked too), SSE answers, answer scanning and request formatting. No
 * sockets; run by ctest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "load.h"

/* Every value maps into range, indexes never go down, and the bucket's top
 * is within 1/128 of the value: the precision the header promises. */
static void test_hist_index(void) {
    unsigned prev = 0;
    for (uint64_t v = 1; v < LOAD_HIST_MAX_NS; v = v + 1 + v / 97) {
        unsigned i = load_hist_index(v);
        CHECK(i < LOAD_HIST_BUCKETS);
        CHECK(i >= prev);
        uint64_t hi = load_hist_bucket_high(i);
        CHECK(hi >= v);
        CHECK((double)(hi - v) <= (double)v / 128.0 + 1.0);
        prev = i;
    }
    CHECK(load_hist_index(LOAD_HIST_MAX_NS) < LOAD_HIST_BUCKETS);
    CHECK(load_hist_index(UINT64_MAX) == load_hist_index(LOAD_HIST_MAX_NS)); /* clamped */
}

static void test_hist_percentiles(void) {
    load_hist *h = malloc(sizeof *h), *g = malloc(sizeof *g);
    load_hist_reset(h);
    CHECK(load_hist_percentile(h, 50) == 0);
    for (uint64_t us = 1; us <= 1000; us++) load_hist_record(h, us * 1000); /* 1..1000 µs */
    double p50 = (double)load_hist_percentile(h, 50), p99 = (double)load_hist_percentile(h, 99);
    CHECK(p50 >= 500e3 && p50 <= 500e3 * 1.008);
    CHECK(p99 >= 990e3 && p99 <= 990e3 * 1.008);
    CHECK(load_hist_percentile(h, 100) == 1000000);
    CHECK(load_hist_percentile(h, 99.99) <= 1000000); /* never above the exact max */
    CHECK(h->min_ns == 1000 && h->total == 1000);
    load_hist_reset(g);
    load_hist_record(g, 5000000000ull);
    load_hist_merge(h, g);
    CHECK(h->total == 1001 && h->max_ns == 5000000000ull);
    CHECK(load_hist_percentile(h, 100) == 5000000000ull);
    free(h);
    free(g);
}

/* Feed a response in pieces of `step` bytes, as reads would deliver it. */
static int feed_steps(const char *text, size_t step, load_resp *r, bool chunked) {
    size_t len = strlen(text);
    load_resp_reset(r, 1 << 20, chunked);
    int rc = LOAD_RESP_MORE;
    for (size_t have = step; rc == LOAD_RESP_MORE; have += step) {
        rc = load_resp_feed(r, text, have < len ? have : len);
        if (have >= len) break;
    }
    return rc;
}

static int feed_in_steps(const char *text, size_t step, load_resp *r) { return feed_steps(text, step, r, false); }

static void test_resp(void) {
    const char *ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 5\r\n\r\nhello";
    load_resp r;
    for (size_t step = 1; step < 12; step++) {
        CHECK(feed_in_steps(ok, step, &r) == LOAD_RESP_DONE);
        CHECK(r.status == 200 && r.body_len == 5 && r.head_len + 5 == strlen(ok));
        CHECK(!(r.flags & LOAD_RESP_CLOSE));
    }
    CHECK(
        feed_in_steps("HTTP/1.1 404 Not Found\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n",
                      3, &r) == LOAD_RESP_DONE);
    CHECK(r.status == 404 && (r.flags & LOAD_RESP_CLOSE));
    CHECK(feed_in_steps("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 100,
                        &r) == LOAD_RESP_ECHUNKED);
    CHECK(feed_in_steps("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n", 100, &r) ==
          LOAD_RESP_ENOLEN);
    CHECK(feed_in_steps("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 100, &r) ==
          LOAD_RESP_EBAD);
    CHECK(feed_in_steps("HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello", 100, &r) == LOAD_RESP_EBAD);
    CHECK(feed_in_steps("HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n", 100, &r) == LOAD_RESP_EBAD);
    CHECK(feed_in_steps("HTTP/1.1 204 No Content\r\n\r\n", 100, &r) == LOAD_RESP_DONE);
    load_resp_reset(&r, 4, false);
    CHECK(load_resp_feed(&r, ok, strlen(ok)) == LOAD_RESP_ETOOBIG);
    char *big = malloc(LOAD_RESP_HEAD_MAX + 64);
    memset(big, 'a', LOAD_RESP_HEAD_MAX + 64);
    load_resp_reset(&r, 1 << 20, false);
    CHECK(load_resp_feed(&r, big, LOAD_RESP_HEAD_MAX + 64) == LOAD_RESP_ETOOBIG);
    free(big);
}

/* The legacy wire's SSE answer: chunked, walked as it trickles in, joined in
 * place; the session id and the content type are seen in the head. */
static void test_resp_chunked(void) {
    const char *sse = "HTTP/1.1 200 OK\r\nContent-Type: Text/Event-Stream; charset=utf-8\r\n"
                      "Mcp-Session-Id:  s-123 \r\nTransfer-Encoding: chunked\r\n\r\n"
                      "7\r\nid: 1\n\n\r\n"
                      "A;ext=1\r\ndata: {}\n\n\r\n"
                      "0\r\n\r\n";
    load_resp r;
    for (size_t step = 1; step < 20; step++) {
        CHECK(feed_steps(sse, step, &r, true) == LOAD_RESP_DONE);
        CHECK(r.status == 200 && r.wire_len == strlen(sse) && r.body_len == 17);
        CHECK((r.flags & LOAD_RESP_SSE) && (r.flags & LOAD_RESP_CHUNKED));
        CHECK(r.session_len == 5 && memcmp(sse + r.session_off, "s-123", 5) == 0);
    }
    char *buf = strdup(sse);
    CHECK(feed_steps(buf, 1000, &r, true) == LOAD_RESP_DONE);
    load_resp_dechunk(&r, buf);
    CHECK(r.body_len == 17 && memcmp(buf + r.head_len, "id: 1\n\ndata: {}\n\n", 17) == 0);
    free(buf);
    /* trailers, then the end */
    CHECK(feed_steps("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX-T: 1\r\n\r\n", 3,
                     &r, true) == LOAD_RESP_DONE);
    CHECK(r.body_len == 1);
    /* malformed: no CRLF after the data, a non-hex size, both framings, gzip */
    CHECK(feed_steps("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n0\r\n\r\n", 100, &r,
                     true) == LOAD_RESP_EBAD);
    CHECK(feed_steps("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 100, &r, true) ==
          LOAD_RESP_EBAD);
    CHECK(feed_steps("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 100, &r,
                     true) == LOAD_RESP_EBAD);
    CHECK(feed_steps("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 100, &r, true) == LOAD_RESP_ECHUNKED);
    /* the decoded body is bounded like a Content-Length one */
    load_resp_reset(&r, 4, true);
    const char *big = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n";
    CHECK(load_resp_feed(&r, big, strlen(big)) == LOAD_RESP_ETOOBIG);
    /* a 202 (notifications/initialized) with an empty body */
    CHECK(feed_steps("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", 5, &r, true) == LOAD_RESP_DONE);
    CHECK(r.status == 202 && r.wire_len == strlen("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"));
}

/* load_sse_response on a copy of text; returns its result, the response in out. */
static int sse(const char *text, char *out, size_t outcap) {
    char *buf = strdup(text);
    const char *json = NULL;
    size_t n = 0;
    int rc = load_sse_response(buf, strlen(buf), &json, &n);
    out[0] = '\0';
    if (rc == 1 && n < outcap) memcpy(out, json, n), out[n] = '\0';
    free(buf);
    return rc;
}

static void test_sse(void) {
    char out[256];
    /* priming event, a progress notification, then the response */
    CHECK(sse("id: 7\nretry: 1000\ndata: \n\n"
              "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"
              "id: 8\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n",
              out, sizeof out) == 1);
    CHECK(strcmp(out, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}") == 0);
    /* CRLF and CR line ends, data split over lines, no space after the colon */
    CHECK(sse(": keep-alive\r\n\r\ndata:{\"id\":1,\r\ndata: \"result\":{\"ok\":true}}\r\r", out, sizeof out) == 1);
    CHECK(strcmp(out, "{\"id\":1,\n\"result\":{\"ok\":true}}") == 0);
    /* the last event may end without a blank line */
    CHECK(sse("data: {\"id\":2,\"error\":{\"code\":-32602}}", out, sizeof out) == 1);
    CHECK(strcmp(out, "{\"id\":2,\"error\":{\"code\":-32602}}") == 0);
    /* none, two, or data that is not JSON */
    CHECK(sse("id: 1\ndata: \n\n", out, sizeof out) == 0);
    CHECK(sse("", out, sizeof out) == 0);
    CHECK(sse("data: {\"id\":1,\"result\":{}}\n\ndata: {\"id\":1,\"result\":{}}\n\n", out, sizeof out) < 0);
    CHECK(sse("data: not json\n\n", out, sizeof out) < 0);
    /* "database:" is not a data line */
    CHECK(sse("database: {\"id\":1,\"result\":{}}\n\n", out, sizeof out) == 0);
}

static int scan(const char *s, load_rpc_reply *r) { return load_rpc_scan(s, strlen(s), r); }

static void test_rpc_scan(void) {
    load_rpc_reply r;
    CHECK(scan("{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"}{"
               "\\\"id\\\":1\"}]}}",
               &r) == 0);
    CHECK(r.has_id && r.id_is_int && r.id == 42 && r.has_result && !r.has_error && !r.tool_error);
    CHECK(scan(" { \"result\" : { \"isError\" : true } , \"id\" : 7 } ", &r) == 0);
    CHECK(r.tool_error && r.id == 7);
    CHECK(scan("{\"id\":7,\"result\":{\"nested\":{\"isError\":true}}}", &r) == 0);
    CHECK(!r.tool_error); /* only result's own isError counts */
    CHECK(scan("{\"id\":\"7\",\"error\":{\"code\":-32602,\"message\":\"x\"}}", &r) == 0);
    CHECK(r.has_error && !r.id_is_int);
    CHECK(scan("{\"id\":7.5,\"result\":{}}", &r) == 0 && !r.id_is_int);
    CHECK(scan("{\"id\":7,\"result\":{}", &r) < 0);
    CHECK(scan("{\"id\":7,\"result\":\"unterminated}", &r) < 0);
    CHECK(scan("{\"id\":7} trailing", &r) < 0);
    CHECK(scan("[1,2]", &r) < 0);
    CHECK(scan("", &r) < 0);
}

static void test_request(void) {
    load_request_tmpl t;
    char err[128];
    CHECK(load_request_tmpl_init(&t, LOAD_WIRE_STATELESS, "127.0.0.1:1", "/mcp", "bad tool", "m", err, sizeof err) <
          0);
    CHECK(load_request_tmpl_init(&t, LOAD_WIRE_STATELESS, "127.0.0.1:1", "/mcp", "echo", "a\"b\\c\n", err,
                                 sizeof err) == 0);
    char *buf = malloc(t.max_len);
    size_t n = load_request_format(&t, 18446744073709551615ull, NULL, 0, buf);
    CHECK(n <= t.max_len);
    buf[n - 1] = '\0'; /* the body ends with '}' */
    const char *body = strstr(buf, "\r\n\r\n") + 4;
    size_t clen = (size_t)atol(strstr(buf, "Content-Length: ") + 16);
    CHECK(clen == strlen(body) + 1);
    CHECK(strstr(buf, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:1\r\n") == buf);
    CHECK(strstr(buf, "\r\nMcp-Name: echo\r\n") && strstr(buf, "\r\nMcp-Method: tools/call\r\n"));
    CHECK(strstr(buf, "\r\nMCP-Protocol-Version: 2026-07-28\r\n"));
    CHECK(strstr(body, "{\"jsonrpc\":\"2.0\",\"id\":18446744073709551615,\"method\":\"tools/call\"") == body);
    CHECK(strstr(body, "\"arguments\":{\"message\":\"a\\\"b\\\\c\\u000a\"}"));
    CHECK(strstr(body, "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\""));
    CHECK(!strstr(buf, "Mcp-Session-Id"));
    free(buf);
    load_request_tmpl_free(&t);
}

/* A Content-Length header that matches the body after it. */
static bool length_matches(const char *req) {
    const char *body = strstr(req, "\r\n\r\n");
    const char *cl = strstr(req, "Content-Length: ");
    return body && cl && cl < body && (size_t)atol(cl + 16) == strlen(body + 4);
}

static void test_request_legacy(void) {
    load_request_tmpl t;
    char err[128];
    CHECK(load_request_tmpl_init(&t, LOAD_WIRE_LEGACY, "127.0.0.1:1", "/mcp", "echo", "hi", err, sizeof err) == 0);
    char *buf = calloc(1, t.max_len + 1);
    char sid[LOAD_SESSION_MAX];
    memset(sid, 's', sizeof sid);
    size_t n = load_request_format(&t, 5, sid, sizeof sid, buf);
    CHECK(n <= t.max_len);
    buf[n] = '\0';
    CHECK(length_matches(buf));
    CHECK(strstr(buf, "\r\nMCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: ssss"));
    CHECK(!strstr(buf, "Mcp-Method") && !strstr(buf, "_meta"));
    CHECK(!strstr(buf, "X-API-Key"));
    CHECK(strstr(buf, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
                      "\"arguments\":{\"message\":\"hi\"}}}"));
    free(buf);
    /* --header lines go into every call, inside the header section */
    static const char extra[] = "X-API-Key: k1\r\n";
    CHECK(load_request_tmpl_add_headers(&t, extra, sizeof extra - 1) == 0);
    buf = calloc(1, t.max_len + 1);
    n = load_request_format(&t, 6, sid, sizeof sid, buf);
    CHECK(n <= t.max_len);
    buf[n] = '\0';
    CHECK(length_matches(buf));
    CHECK(strstr(buf, "\r\nX-API-Key: k1\r\n") && strstr(buf, "\r\n\r\n{") > strstr(buf, "X-API-Key"));
    free(buf);
    load_request_tmpl_free(&t);

    char hs[LOAD_HANDSHAKE_MAX];
    n = load_initialize_format("127.0.0.1:1", "/mcp", 9, hs);
    hs[n] = '\0';
    CHECK(length_matches(hs) && !strstr(hs, "Mcp-Session-Id"));
    CHECK(strstr(hs, "\"id\":9,\"method\":\"initialize\"") && strstr(hs, "\"protocolVersion\":\"2025-11-25\""));
    n = load_initialized_format("127.0.0.1:1", "/mcp", "abc", 3, hs);
    hs[n] = '\0';
    CHECK(length_matches(hs) && strstr(hs, "\r\nMcp-Session-Id: abc\r\n"));
    CHECK(strstr(hs, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
}

/* The open loop's schedule: due times on the grid, a backlog while no
 * connection takes them, nothing due twice. */
static void test_sched(void) {
    load_sched s;
    const uint64_t t0 = 1000000000ull, ms = 1000000ull;
    load_sched_init(&s, 1000.0, t0); /* one call a millisecond */
    uint64_t due;
    CHECK(load_sched_due(&s, t0 - 1) == 0);
    CHECK(load_sched_due(&s, t0) == 1); /* call 0 is due at t0 */
    CHECK(load_sched_take(&s, t0, &due) && due == t0);
    CHECK(!load_sched_take(&s, t0 + ms - 1, &due)); /* call 1 is due at t0 + 1 ms, not before */
    CHECK(load_sched_take(&s, t0 + ms, &due) && due == t0 + ms);
    /* 10 ms with nobody taking: 10 calls wait, taken in order with their own due times */
    CHECK(load_sched_backlog(&s, t0 + 11 * ms) == 10);
    for (uint64_t k = 2; k <= 11; k++) CHECK(load_sched_take(&s, t0 + 11 * ms, &due) && due == t0 + k * ms);
    CHECK(!load_sched_take(&s, t0 + 11 * ms, &due));
    CHECK(s.max_backlog == 9); /* 10 were due at the first take of them, 9 after it */
    CHECK(s.issued == 12);
    /* a rate that is not a divisor of a second: 3/s over 1 s is calls 0..3 */
    load_sched_init(&s, 3.0, 0);
    CHECK(load_sched_due(&s, 1000000000ull) == 4);
    CHECK(load_sched_time_of(&s, 2) == 666666666ull);
}

/* The tool mix: exact shares per cycle, interleaved, bad specs refused. */
static void test_mix(void) {
    load_mix m;
    char err[128];
    CHECK(load_mix_parse(&m, "echo", err, sizeof err) == 0 && m.n == 1 && load_mix_pick(&m, 7) == 0);
    load_mix_free(&m);
    CHECK(load_mix_parse(&m, "a:3,b:1", err, sizeof err) == 0 && m.n == 2 && m.cycle_len == 4);
    unsigned count[2] = {0, 0}, runs_of_a = 0, run = 0;
    for (uint64_t id = 1; id <= 400; id++) {
        unsigned t = load_mix_pick(&m, id);
        count[t]++;
        run = t == 0 ? run + 1 : 0;
        if (run > runs_of_a) runs_of_a = run;
    }
    CHECK(count[0] == 300 && count[1] == 100); /* exactly 3:1 */
    CHECK(runs_of_a <= 3);                     /* never more a's in a row than one cycle holds */
    CHECK(strcmp(m.names[1], "b") == 0);
    load_mix_free(&m);
    CHECK(load_mix_parse(&m, "a:0", err, sizeof err) < 0);
    CHECK(load_mix_parse(&m, "a:1001", err, sizeof err) < 0);
    CHECK(load_mix_parse(&m, "a,,b", err, sizeof err) < 0);
    CHECK(load_mix_parse(&m, "a:x", err, sizeof err) < 0);
}

/* --url several times: connection i on target i % n; --spread call: each
 * group's turn visits every target once per n calls, never leaves the
 * group, and the groups' first calls are spread over the targets. */
static void test_spread(void) {
    CHECK(load_spread_target(0, 1) == 0 && load_spread_target(7, 1) == 0);
    CHECK(load_spread_target(5, 4) == 1 && load_spread_target(3, 2) == 1);
    for (unsigned n = 1; n <= LOAD_TARGETS_MAX; n++) {
        unsigned first_on[LOAD_TARGETS_MAX] = {0};
        for (unsigned g = 0; g < 16; g++) {
            unsigned c = load_spread_first(g, n), seen[LOAD_TARGETS_MAX] = {0};
            CHECK(c / n == g);
            first_on[load_spread_target(c, n)]++;
            for (unsigned k = 0; k < n; k++) {
                unsigned next = load_spread_next(c, n);
                CHECK(next / n == g);                                         /* stays in its group */
                CHECK(load_spread_target(next, n) == (load_spread_target(c, n) + 1) % n); /* the next replica */
                seen[load_spread_target(c, n)]++;
                c = next;
            }
            CHECK(c == load_spread_first(g, n)); /* n calls: back where it began */
            for (unsigned r = 0; r < n; r++) CHECK(seen[r] == 1);
        }
        for (unsigned r = 0; r < n; r++) CHECK(first_on[r] >= 16 / n && first_on[r] <= 16 / n + 1);
    }
}

int main(void) {
    test_spread();
    test_sched();
    test_mix();
    test_hist_index();
    test_hist_percentiles();
    test_resp();
    test_resp_chunked();
    test_sse();
    test_rpc_scan();
    test_request();
    test_request_legacy();
    if (failures)
        fprintf(stderr, "mcpg-load selftest: %d checks failed\n", failures);
    else
        printf("mcpg-load selftest: all checks passed\n");
    return failures ? 1 : 0;
}
