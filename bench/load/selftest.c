/* Unit tests for mcpg-load's pure pieces: histogram, response framing,
 * answer scanning and request formatting. No sockets; run by ctest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"

static int failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

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
static int feed_in_steps(const char *text, size_t step, load_resp *r) {
    size_t len = strlen(text);
    load_resp_reset(r, 1 << 20);
    int rc = LOAD_RESP_MORE;
    for (size_t have = step; rc == LOAD_RESP_MORE; have += step) {
        rc = load_resp_feed(r, text, have < len ? have : len);
        if (have >= len) break;
    }
    return rc;
}

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
    load_resp_reset(&r, 4);
    CHECK(load_resp_feed(&r, ok, strlen(ok)) == LOAD_RESP_ETOOBIG);
    char *big = malloc(LOAD_RESP_HEAD_MAX + 64);
    memset(big, 'a', LOAD_RESP_HEAD_MAX + 64);
    load_resp_reset(&r, 1 << 20);
    CHECK(load_resp_feed(&r, big, LOAD_RESP_HEAD_MAX + 64) == LOAD_RESP_ETOOBIG);
    free(big);
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
    CHECK(load_request_tmpl_init(&t, "127.0.0.1:1", "/mcp", "bad tool", "m", err, sizeof err) < 0);
    CHECK(load_request_tmpl_init(&t, "127.0.0.1:1", "/mcp", "echo", "a\"b\\c\n", err, sizeof err) == 0);
    char *buf = malloc(t.max_len);
    size_t n = load_request_format(&t, 18446744073709551615ull, buf);
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
    free(buf);
    load_request_tmpl_free(&t);
}

int main(void) {
    test_hist_index();
    test_hist_percentiles();
    test_resp();
    test_rpc_scan();
    test_request();
    if (failures)
        fprintf(stderr, "mcpg-load selftest: %d checks failed\n", failures);
    else
        printf("mcpg-load selftest: all checks passed\n");
    return failures ? 1 : 0;
}
