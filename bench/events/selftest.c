/* mcpg-events-load's pure pieces, no sockets (ctest mcpg_events_load_selftest):
 * the Standard Webhooks signature against the specification's published
 * vector and one computed apart (Python's hmac), the post and stream
 * requests, the stream message reader, the sequence judge, and the shared
 * bench/load pieces it added (load_sse_next, load_chunks_take,
 * load_json_member). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"

#include "../load/check.h"

static void test_signature(void) {
    unsigned char key[EV_KEY_MAX];
    char sig[EV_SIG_MAX];
    /* github.com/standard-webhooks/standard-webhooks, the specification's example */
    int kl = ev_secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", key);
    CHECK(kl == 24);
    const char *body = "{\"test\": 2432232314}";
    ev_sign(key, (size_t)kl, "msg_p5jXN8AQM9LWM0D4loKWxJek", 28, "1614265330", 10, body, strlen(body), sig);
    CHECK(strcmp(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=") == 0);
    /* padding: 24 bytes have none, 16 bytes "==", 17 bytes "=" */
    CHECK(ev_secret_key("whsec_AAECAwQFBgcICQoLDA0ODw==", key) == 16 && key[15] == 15);
    CHECK(ev_secret_key("whsec_AAECAwQFBgcICQoLDA0ODxA=", key) == 17 && key[16] == 16);
    CHECK(ev_secret_key("AAECAwQFBgcICQoLDA0ODw==", key) < 0);  /* no whsec_ */
    CHECK(ev_secret_key("whsec_AAECAwQFBgcICQoLDA0OD", key) < 0); /* not a multiple of 4 */
    CHECK(ev_secret_key("whsec_", key) < 0);
}

/* The whole post: its headers, its body, its signature (computed apart with
 * Python: hmac.new(key, b"p3-17-t1.1700000000." + body, sha256)). */
static void test_post(void) {
    unsigned char key[EV_KEY_MAX];
    int kl = ev_secret_key("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX", key); /* bytes 0..23 */
    CHECK(kl == 24);
    char req[EV_POST_MAX + 1];
    size_t n = ev_post_format(req, "127.0.0.1:8787", "bench", "bench.tick", "t1", key, (size_t)kl, 3, 17,
                              1700000000123456ull, 1700000000ull);
    CHECK(n > 0);
    req[n] = '\0';
    const char *body = "{\"name\":\"bench.tick\",\"id\":\"p3-17-t1\",\"data\":{\"p\":3,\"n\":17,\"t\":1700000000123456}}";
    CHECK(strncmp(req, "POST /webhooks/events/bench HTTP/1.1\r\nHost: 127.0.0.1:8787\r\n", 60) == 0);
    CHECK(strstr(req, "\r\nwebhook-id: p3-17-t1\r\n") != NULL);
    CHECK(strstr(req, "\r\nwebhook-timestamp: 1700000000\r\n") != NULL);
    CHECK(strstr(req, "\r\nwebhook-signature: v1,2pzbMxBxuut+IXqN4VNa0LhvMvQW1+u1CQRWts+txTQ=\r\n") != NULL);
    const char *sep = strstr(req, "\r\n\r\n");
    CHECK(sep && strcmp(sep + 4, body) == 0);
    char cl[64];
    snprintf(cl, sizeof cl, "\r\nContent-Length: %zu\r\n", strlen(body));
    CHECK(strstr(req, cl) != NULL);
}

static void test_stream_request(void) {
    char req[EV_STREAM_REQ_MAX + 1];
    size_t n = ev_stream_format(req, "127.0.0.1:1", "bench.tick", 7, NULL, 0);
    CHECK(n > 0);
    req[n] = '\0';
    CHECK(strstr(req, "\r\nMcp-Method: events/stream\r\n") && strstr(req, "\r\nMcp-Name: bench.tick\r\n"));
    CHECK(strstr(req, "\r\nMCP-Protocol-Version: 2026-07-28\r\n"));
    const char *body = strstr(req, "\r\n\r\n") + 4;
    CHECK(strstr(body, "\"method\":\"events/stream\",\"params\":{\"name\":\"bench.tick\",\"cursor\":null,"));
    CHECK(strstr(body, "\"id\":7,"));
    CHECK(strstr(body, "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\""));
    load_rpc_reply r;
    CHECK(load_rpc_scan(body, strlen(body), &r) == 0 && r.id == 7); /* one JSON object */
    char cl[64];
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", strlen(body));
    CHECK(strstr(req, cl) != NULL);
    n = ev_stream_format(req, "127.0.0.1:1", "bench.tick", 8, "\"1042\"", 6);
    req[n] = '\0';
    CHECK(strstr(req, "\"cursor\":\"1042\",") != NULL);
}

static void read_msg(const char *s, ev_msg *m) { ev_msg_read(s, strlen(s), m); }

static void test_msg(void) {
    ev_msg m;
    read_msg("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/events/active\",\"params\":{\"cursor\":\"12\","
             "\"truncated\":false,\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":3}}}",
             &m);
    CHECK(m.kind == EV_MSG_ACTIVE && m.cursor_len == 4 && memcmp(m.cursor, "\"12\"", 4) == 0);
    read_msg("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/events/event\",\"params\":{\"eventId\":\"p3-17\","
             "\"name\":\"bench.tick\",\"timestamp\":\"2026-12-02T10:00:00.000Z\",\"data\":{\"t\":99,\"p\":3, \"n\" : 17},"
             "\"cursor\":\"13\",\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":3}}}",
             &m);
    CHECK(m.kind == EV_MSG_EVENT && m.has_pn && m.p == 3 && m.n == 17 && m.t == 99);
    CHECK(m.name_len == 10 && memcmp(m.name, "bench.tick", 10) == 0);
    CHECK(m.cursor_len == 4 && memcmp(m.cursor, "\"13\"", 4) == 0);
    read_msg("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/events/event\",\"params\":{\"name\":\"x\",\"data\":{\"n\":1}}}",
             &m);
    CHECK(m.kind == EV_MSG_EVENT && !m.has_pn); /* not one of ours */
    read_msg("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/events/heartbeat\",\"params\":{\"cursor\":\"14\"}}", &m);
    CHECK(m.kind == EV_MSG_HEARTBEAT && m.cursor_len == 4);
    read_msg("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32011,\"message\":\"no such event\"}}", &m);
    CHECK(m.kind == EV_MSG_ERROR);
    read_msg("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/events/event\"}", &m);
    CHECK(m.kind == EV_MSG_BAD); /* no params */
    read_msg("not json", &m);
    CHECK(m.kind == EV_MSG_OTHER || m.kind == EV_MSG_BAD);
    read_msg("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}", &m);
    CHECK(m.kind == EV_MSG_OTHER);
}

static void test_seq(void) {
    ev_seq s;
    uint64_t lost = 0;
    ev_seq_init(&s);
    CHECK(ev_seq_judge(&s, 0, &lost) == EV_SEQ_NEXT);
    CHECK(ev_seq_judge(&s, 1, &lost) == EV_SEQ_NEXT);
    CHECK(ev_seq_judge(&s, 1, &lost) == EV_SEQ_DUP);
    CHECK(ev_seq_judge(&s, 4, &lost) == EV_SEQ_GAP && lost == 2); /* 2 and 3 */
    CHECK(ev_seq_judge(&s, 3, &lost) == EV_SEQ_BACK && lost == 2);
    CHECK(ev_seq_judge(&s, 5, &lost) == EV_SEQ_NEXT && s.last == 5);
    ev_seq_init(&s);
    lost = 0;
    CHECK(ev_seq_judge(&s, 3, &lost) == EV_SEQ_GAP && lost == 3); /* the first heard was 3: 0..2 lost */
}

/* Events split from a stream fed one byte at a time: each comes out when its
 * blank line is in, not before; CRLF and a CR at the end of what came. */
static void test_sse_next(void) {
    const char *text = ": comment\n\nid: 1\ndata: {\"a\":1}\n\ndata: {\"b\":\r\ndata: 2}\r\n\r\nretry: 5\n\ndata: x";
    size_t len = strlen(text);
    char buf[256];
    size_t have = 0, got = 0;
    char out[4][32];
    for (size_t i = 0; i < len; i++) {
        buf[have++] = text[i];
        size_t used, dlen;
        char *data;
        while (load_sse_next(buf, have, &used, &data, &dlen)) {
            if (got < 4) snprintf(out[got], sizeof out[got], "%.*s", (int)dlen, data);
            got++;
            memmove(buf, buf + used, have - used);
            have -= used;
        }
    }
    CHECK(got == 4);
    CHECK(strcmp(out[0], "") == 0); /* the comment: no data */
    CHECK(strcmp(out[1], "{\"a\":1}") == 0);
    CHECK(strcmp(out[2], "{\"b\":\n2}") == 0);
    CHECK(strcmp(out[3], "") == 0); /* retry: only */
    CHECK(have == 7);               /* "data: x" waits for its blank line */
    char cr[] = "data: y\r\n\r";    /* the last CR may be a CRLF's */
    size_t used, dlen;
    char *data;
    CHECK(load_sse_next(cr, strlen(cr), &used, &data, &dlen) == 0);
}

static void test_chunks(void) {
    const char *wire = "5\r\nhello\r\n6;x=1\r\n world\r\n0\r\n\r\n";
    char out[64];
    size_t olen = 0, used = 0, at = 0;
    /* fed in growing prefixes: only complete chunks are taken */
    for (size_t n = 1; n <= strlen(wire); n++) {
        size_t before = at;
        int rc = load_chunks_take(wire + at, n - at, &used, out, sizeof out, &olen);
        CHECK(rc >= 0);
        at += used;
        if (rc == 1) {
            CHECK(n >= strlen(wire) - 2); /* the last chunk's line is in */
            break;
        }
        (void)before;
    }
    CHECK(olen == 11 && memcmp(out, "hello world", 11) == 0);
    olen = 0;
    CHECK(load_chunks_take("zz\r\n", 4, &used, out, sizeof out, &olen) == LOAD_RESP_EBAD);
    CHECK(load_chunks_take("5\r\nhelloXX", 10, &used, out, sizeof out, &olen) == LOAD_RESP_EBAD);
    CHECK(load_chunks_take("5\r\nhello\r\n", 10, &used, out, 3, &olen) == LOAD_RESP_ETOOBIG);
}

static void test_member(void) {
    const char *s = "{\"a\":{\"b\":[1,{\"c\":2}]},\"s\":\"x\\\"y\",\"n\":-12 }";
    const char *v;
    size_t n;
    CHECK(load_json_member(s, strlen(s), "a", &v, &n) == 1 && n == 17 && v[0] == '{');
    CHECK(load_json_member(s, strlen(s), "s", &v, &n) == 1 && n == 6);
    CHECK(load_json_member(s, strlen(s), "n", &v, &n) == 1 && n == 3 && memcmp(v, "-12", 3) == 0);
    CHECK(load_json_member(s, strlen(s), "c", &v, &n) == 0); /* not at the top */
    CHECK(load_json_member("[1]", 3, "a", &v, &n) < 0);
}

int main(void) {
    test_signature();
    test_post();
    test_stream_request();
    test_msg();
    test_seq();
    test_sse_next();
    test_chunks();
    test_member();
    if (failures) {
        fprintf(stderr, "mcpg-events-load-selftest: %d failures\n", failures);
        return 1;
    }
    puts("mcpg-events-load-selftest: ok");
    return 0;
}
