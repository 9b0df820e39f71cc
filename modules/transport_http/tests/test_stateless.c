/* Unit test: the stateless wire's request checks and the response builders,
 * without sockets or a kernel: what those pure files use of the host (the
 * JSON scanner, buffers) is the SDK fake host's table. */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/mcp_stateless.h"
#include "http/response.h"

static const mcpg_host *host;

static th_hval hv(const char *s) {
    th_hval v = {0};
    if (s) {
        v.p = s;
        v.n = strlen(s);
        v.present = 1;
    }
    return v;
}

/* The headers a correct client sends for `method` (and tool `name`). */
static th_mcp_headers good_headers(const char *method, const char *name) {
    th_mcp_headers h;
    h.content_type = hv("application/json");
    h.accept = hv("application/json, text/event-stream");
    h.protocol_version = hv("2026-07-28");
    h.method = hv(method);
    h.name = hv(name);
    return h;
}

#define META                                                              \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"

static th_mcp_verdict check(const th_mcp_headers *h, const char *body) {
    static char name_buf[TH_NAME_MAX];
    th_mcp_verdict v;
    th_mcp_check(host, h, body, strlen(body), name_buf, &v);
    return v;
}

static int piece_is(th_piece p, const char *s) { return p.n == strlen(s) && !memcmp(p.p, s, p.n); }

/* Expect an error with this status and code; return the verdict. */
static th_mcp_verdict expect_error(int line, const th_mcp_headers *h, const char *body, int status,
                                   int64_t code) {
    th_mcp_verdict v = check(h, body);
    MCPG_CHECK(v.action == TH_MCP_ERROR && v.http_status == status && v.code == code,
               "line %d: body %s: got action %d status %d code %lld (%.*s), want %d %lld", line,
               body, v.action, v.http_status, (long long)v.code, (int)v.message.n,
               v.message.p ? v.message.p : "", status, (long long)code);
    return v;
}
#define EXPECT_ERROR(h, body, status, code) expect_error(__LINE__, (h), (body), (status), (code))

static void test_good_requests(void) {
    th_mcp_headers h = good_headers("tools/call", "echo");
    th_mcp_verdict v = check(&h, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
                                 "\"name\":\"echo\",\"arguments\":{\"message\":\"hi\"}," META "}}");
    MCPG_CHECK(v.action == TH_MCP_SUBMIT, "action %d", v.action);
    MCPG_CHECK(v.method == MCPG_METHOD_TOOLS_CALL, "method %u", v.method);
    MCPG_CHECK(piece_is(v.id, "7"), "id %.*s", (int)v.id.n, v.id.p);
    MCPG_CHECK(piece_is(v.name, "echo"), "name");
    MCPG_CHECK(piece_is(v.args, "{\"message\":\"hi\"}"), "args %.*s", (int)v.args.n, v.args.p);
    MCPG_CHECK(v.params.n && v.params.p[0] == '{', "params");
    MCPG_CHECK(v.stamp == TH_STAMP_RESULT_TYPE, "stamp");

    h = good_headers("tools/list", NULL);
    v = check(&h, "  {\"jsonrpc\":\"2.0\",\"id\":\"a-1\",\"method\":\"tools/list\",\"params\":{" META "}}\n");
    MCPG_CHECK(v.action == TH_MCP_SUBMIT && v.method == MCPG_METHOD_TOOLS_LIST, "list");
    MCPG_CHECK(piece_is(v.id, "\"a-1\""), "string id keeps its quotes: %.*s", (int)v.id.n, v.id.p);
    MCPG_CHECK(v.stamp == (TH_STAMP_RESULT_TYPE | TH_STAMP_CACHE), "list stamp");

    h = good_headers("server/discover", NULL);
    v = check(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{" META "}}");
    MCPG_CHECK(v.action == TH_MCP_DISCOVER, "discover");

    /* Accept is optional; name via base64 form */
    h = good_headers("tools/call", "=?base64?ZWNobw==?=");
    h.accept.present = 0;
    const char *b64call =
        "{\"jsonrpc\":\"2.0\",\"id\":-3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"," META "}}";
    v = check(&h, b64call);
    MCPG_CHECK(v.action == TH_MCP_SUBMIT, "base64 Mcp-Name, no Accept header: %d %.*s", v.action,
               (int)v.message.n, v.message.p);
    MCPG_CHECK(v.args.p == NULL, "no arguments");
    /* MCP-Protocol-Version is required on every 2026-07-28 request */
    h.protocol_version.present = 0;
    v = check(&h, b64call);
    MCPG_CHECK(v.action == TH_MCP_ERROR && v.http_status == 400 && v.code == MCPG_RPC_HEADER_MISMATCH,
               "no MCP-Protocol-Version: %d %d %lld", v.action, v.http_status, (long long)v.code);

    /* an escaped name is decoded and compared decoded */
    h = good_headers("tools/call", "a/b");
    v = check(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\\/b\"," META "}}");
    MCPG_CHECK(v.action == TH_MCP_SUBMIT && piece_is(v.name, "a/b"), "escaped name %d", v.action);

    /* notifications need no envelope: 202 */
    h = good_headers("notifications/initialized", NULL);
    v = check(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    MCPG_CHECK(v.action == TH_MCP_ACCEPTED, "notification");
    v = check(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications\\/cancelled\",\"params\":{}}");
    MCPG_CHECK(v.action == TH_MCP_ACCEPTED, "escaped notification");
}

static void test_http_level(void) {
    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META "}}";
    th_mcp_headers h = good_headers("tools/list", NULL);
    h.content_type = hv("text/plain");
    EXPECT_ERROR(&h, body, 415, MCPG_RPC_INVALID_REQUEST);
    h.content_type.present = 0;
    EXPECT_ERROR(&h, body, 415, MCPG_RPC_INVALID_REQUEST);
    h.content_type = hv("Application/JSON ; charset=utf-8");
    MCPG_CHECK(check(&h, body).action == TH_MCP_SUBMIT, "content-type parameters");
    h.content_type = hv("application/jsonx");
    EXPECT_ERROR(&h, body, 415, MCPG_RPC_INVALID_REQUEST);

    h = good_headers("tools/list", NULL);
    h.accept = hv("text/html");
    EXPECT_ERROR(&h, body, 406, MCPG_RPC_INVALID_REQUEST);
    h.accept = hv("text/event-stream");
    EXPECT_ERROR(&h, body, 406, MCPG_RPC_INVALID_REQUEST);
    h.accept = hv("application/json;q=0, text/event-stream");
    EXPECT_ERROR(&h, body, 406, MCPG_RPC_INVALID_REQUEST);
    const char *ok[] = {"*/*", "application/*", "text/event-stream, application/json",
                        "application/json;q=0.5", "text/html, */*;q=0.1", "  "};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        h.accept = hv(ok[i]);
        MCPG_CHECK(check(&h, body).action == TH_MCP_SUBMIT, "Accept %s", ok[i]);
    }
}

static void test_json_rpc_shape(void) {
    th_mcp_headers h = good_headers("tools/list", NULL);
    EXPECT_ERROR(&h, "", 400, MCPG_RPC_PARSE_ERROR);
    EXPECT_ERROR(&h, "{\"jsonrpc\":", 400, MCPG_RPC_PARSE_ERROR);
    EXPECT_ERROR(&h, "{} x", 400, MCPG_RPC_PARSE_ERROR);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"} {}", 400, MCPG_RPC_PARSE_ERROR);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"x\":[1,}}", 400,
                 MCPG_RPC_PARSE_ERROR);
    EXPECT_ERROR(&h, "{\"a\":\"\x01\"}", 400, MCPG_RPC_PARSE_ERROR);
    char deep[400] = "{\"a\":";
    for (int i = 0; i < 100; i++) strcat(deep, "[");
    for (int i = 0; i < 100; i++) strcat(deep, "]");
    strcat(deep, "}");
    EXPECT_ERROR(&h, deep, 400, MCPG_RPC_PARSE_ERROR);
    EXPECT_ERROR(&h, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}]", 400, MCPG_RPC_INVALID_REQUEST);
    EXPECT_ERROR(&h, "\"tools/list\"", 400, MCPG_RPC_INVALID_REQUEST);
    EXPECT_ERROR(&h, "42", 400, MCPG_RPC_INVALID_REQUEST);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"tools/list\"}", 400, MCPG_RPC_INVALID_REQUEST);
    EXPECT_ERROR(&h, "{\"id\":1,\"method\":\"tools/list\"}", 400, MCPG_RPC_INVALID_REQUEST);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1}", 400, MCPG_RPC_INVALID_REQUEST);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"tools/list\"}", 400, MCPG_RPC_INVALID_REQUEST);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/\"}", 400, MCPG_RPC_INVALID_REQUEST);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", 400, MCPG_RPC_INVALID_REQUEST);
    th_mcp_verdict v = EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"tools/list\"}", 400,
                                    MCPG_RPC_INVALID_REQUEST);
    MCPG_CHECK(piece_is(v.id, "null"), "null id answered with null");
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"tools/list\"}", 400, MCPG_RPC_INVALID_REQUEST);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/list\"}", 400, MCPG_RPC_INVALID_REQUEST);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,\"method\":\"tools/list\"}", 400,
                 MCPG_RPC_INVALID_REQUEST);
    v = EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\",\"method\":\"tools/call\"}", 400,
                     MCPG_RPC_INVALID_REQUEST);
    MCPG_CHECK(piece_is(v.id, "5"), "a valid id is echoed in errors");
}

static void test_envelope(void) {
    th_mcp_headers h = good_headers("tools/list", NULL);
    th_mcp_verdict v =
        EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", 400, MCPG_RPC_INVALID_PARAMS);
    MCPG_CHECK(v.message.n && strstr(v.message.p, "_meta") != NULL, "message names _meta");
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}", 400,
                 MCPG_RPC_INVALID_PARAMS);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":[]}", 400,
                 MCPG_RPC_INVALID_PARAMS);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":3}}", 400,
                 MCPG_RPC_INVALID_PARAMS);
    /* the header disagreeing with _meta is a mismatch, judged before the version */
    const char *v2099 = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
                        "\"io.modelcontextprotocol/protocolVersion\":\"2099-01-01\"}}}";
    EXPECT_ERROR(&h, v2099, 400, MCPG_RPC_HEADER_MISMATCH);
    h.protocol_version = hv("2099-01-01");
    EXPECT_ERROR(&h, v2099, 400, MCPG_RPC_UNSUPPORTED_VERSION);
    v = EXPECT_ERROR(&h, v2099, 400, MCPG_RPC_UNSUPPORTED_VERSION);
    h.protocol_version.present = 0; /* a missing header is judged before the version */
    EXPECT_ERROR(&h, v2099, 400, MCPG_RPC_HEADER_MISMATCH);
    h = good_headers("tools/list", NULL);
    char data[256] = "";
    for (size_t i = 0; i < v.ndata; i++) strncat(data, v.data[i].p, v.data[i].n);
    MCPG_CHECK(!strcmp(data, "{\"supported\":[\"2026-07-28\"],\"requested\":\"2099-01-01\"}"), "data %s", data);
    MCPG_CHECK(mcpg_json_validate(data, strlen(data)) == 0, "data is JSON");
    /* the version twice (even spelled with an escape): refused, not the first one taken, so
     * a backend keeping the last cannot read another version than was checked */
    EXPECT_ERROR(&h,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
                 "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                 "\"io.modelcontextprotocol\\/protocolVersion\":\"2099-01-01\"}}}",
                 400, MCPG_RPC_INVALID_PARAMS);

    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META "}}";
    h.protocol_version = hv("2025-11-25");
    EXPECT_ERROR(&h, body, 400, MCPG_RPC_HEADER_MISMATCH);
    h = good_headers(NULL, NULL);
    EXPECT_ERROR(&h, body, 400, MCPG_RPC_HEADER_MISMATCH);
    h = good_headers("tools/call", NULL);
    EXPECT_ERROR(&h, body, 400, MCPG_RPC_HEADER_MISMATCH);
    h = good_headers("tools/list", NULL);
    h.method.dup = 1;
    EXPECT_ERROR(&h, body, 400, MCPG_RPC_HEADER_MISMATCH);
}

/* _meta without clientCapabilities: -32602 like any missing envelope member;
 * logLevel: a level, else -32602; absent, no log messages at all. */
static void test_meta_members(void) {
    th_mcp_headers h = good_headers("tools/list", NULL);
    th_mcp_verdict v = EXPECT_ERROR(&h,
                                    "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
                                    "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}",
                                    400, MCPG_RPC_INVALID_PARAMS);
    MCPG_CHECK(piece_is(v.id, "4"), "the id is echoed");
    MCPG_CHECK(v.ndata == 0, "no data.requiredCapabilities: not a capability a call needs");
    v = check(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META "}}");
    MCPG_CHECK(v.action == TH_MCP_SUBMIT && v.log_level == TH_LOG_NONE, "no logLevel: %d", v.log_level);
    v = check(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
                  "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                  "\"io.modelcontextprotocol/clientCapabilities\":{},"
                  "\"io.modelcontextprotocol/logLevel\":\"warning\"}}}");
    MCPG_CHECK(v.action == TH_MCP_SUBMIT && v.log_level == 3, "logLevel warning: %d", v.log_level);
    EXPECT_ERROR(&h,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
                 "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                 "\"io.modelcontextprotocol/clientCapabilities\":{},"
                 "\"io.modelcontextprotocol/logLevel\":\"loud\"}}}",
                 400, MCPG_RPC_INVALID_PARAMS);
    MCPG_CHECK(th_log_level_of("emergency", 9) == 7 && th_log_level_of("debug", 5) == 0 &&
                   th_log_level_of("Debug", 5) == -1,
               "levels");
}

static void test_methods(void) {
    th_mcp_headers h = good_headers("ping", NULL);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{" META "}}", 404,
                 MCPG_RPC_METHOD_NOT_FOUND);
    h = good_headers("tools/call", "echo");
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{" META "}}", 400,
                 MCPG_RPC_INVALID_PARAMS);
    EXPECT_ERROR(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":3," META "}}", 400,
                 MCPG_RPC_INVALID_PARAMS);
    EXPECT_ERROR(&h,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
                 "\"arguments\":[1]," META "}}",
                 400, MCPG_RPC_INVALID_PARAMS);
    EXPECT_ERROR(&h,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
                 "\"name\":\"other\"," META "}}",
                 400, MCPG_RPC_INVALID_PARAMS);
    const char *call = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"," META "}}";
    h.name.present = 0;
    EXPECT_ERROR(&h, call, 400, MCPG_RPC_HEADER_MISMATCH);
    h = good_headers("tools/call", "other");
    EXPECT_ERROR(&h, call, 400, MCPG_RPC_HEADER_MISMATCH);
    h = good_headers("tools/call", "=?base64?!!!?=");
    EXPECT_ERROR(&h, call, 400, MCPG_RPC_HEADER_MISMATCH);
    /* only canonical base64 stands for "echo" (ZWNobw==): not without its
     * padding, not with bits set past the last byte, not with '=' inside,
     * and the markers are lowercase */
    static const char *const not_echo[] = {"=?base64?ZWNobw?=", "=?base64?ZWNobx==?=",
                                           "=?base64?ZW=obw==?=", "=?BASE64?ZWNobw==?=",
                                           "=?base64?ZWNo bw==?="};
    for (size_t i = 0; i < sizeof not_echo / sizeof *not_echo; i++) {
        h = good_headers("tools/call", not_echo[i]);
        EXPECT_ERROR(&h, call, 400, MCPG_RPC_HEADER_MISMATCH);
    }
    /* without both markers a value is literal: a tool may be named so */
    h = good_headers("tools/call", "=?base64?ZWNobw==");
    EXPECT_ERROR(&h, call, 400, MCPG_RPC_HEADER_MISMATCH);
    h = good_headers("tools/call", "=?base64?ZWNobw==?=");
    th_mcp_verdict ok = check(&h, call);
    MCPG_CHECK(ok.action == TH_MCP_SUBMIT, "canonical base64 Mcp-Name: %d", ok.action);
    char longname[400];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    char body[800];
    snprintf(body, sizeof body,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\"," META "}}", longname);
    h = good_headers("tools/call", longname);
    EXPECT_ERROR(&h, body, 400, MCPG_RPC_INVALID_PARAMS);
}

static void test_header_grammar(void) {
    MCPG_CHECK(th_content_type_is_json("application/json", 16), "ct");
    MCPG_CHECK(!th_content_type_is_json("application/json-seq", 20), "ct prefix");
    MCPG_CHECK(th_accept_allows_json("application/json", 16), "accept");
    MCPG_CHECK(!th_accept_allows_json("application/jsonx", 17), "accept prefix");
    MCPG_CHECK(!th_accept_allows_json("*/*;q=0.000", 11), "q zero");
    MCPG_CHECK(th_accept_allows_json("*/*;q=0.001", 11), "q small");
}

/* ---- responses ------------------------------------------------------------ */

static char *join(const th_piece *p, size_t n) {
    static char buf[4096];
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) strncat(buf, p[i].p, p[i].n);
    return buf;
}

static void expect_result_info(const char *result, unsigned stamp, th_piece info, const char *want) {
    th_piece body[TH_MAX_PIECES];
    size_t n = th_rpc_result_body(host, body, TH_LIT("1"), (th_piece){result, strlen(result)}, stamp, info);
    char *got = join(body, n);
    MCPG_CHECK(!strcmp(got, want), "result %s\n   got  %s\n   want %s", result, got, want);
    MCPG_CHECK(mcpg_json_validate(got, strlen(got)) == 0, "valid JSON: %s", got);
}

static void expect_result(const char *result, unsigned stamp, const char *want) {
    expect_result_info(result, stamp, (th_piece){NULL, 0}, want);
}

#define INFO "{\"name\":\"gw\",\"version\":\"1\"}"
#define INFO_KEY "\"io.modelcontextprotocol/serverInfo\":"

/* The gateway's serverInfo in every stateless result's _meta: added, put
 * first in a _meta that lacks it, and in place of a proxied server's own. */
static void test_server_info(void) {
    th_piece info = TH_LIT(INFO);
    expect_result_info("{\"content\":[]}", TH_STAMP_RESULT_TYPE, info,
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[],\"resultType\":\"complete\","
                       "\"_meta\":{" INFO_KEY INFO "}}}");
    expect_result_info("{}", TH_STAMP_RESULT_TYPE, info,
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"complete\","
                       "\"_meta\":{" INFO_KEY INFO "}}}");
    expect_result_info("{\"_meta\":{\"k\":1},\"x\":2}", TH_STAMP_RESULT_TYPE, info,
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"_meta\":{" INFO_KEY INFO ",\"k\":1},\"x\":2,"
                       "\"resultType\":\"complete\"}}");
    expect_result_info("{\"_meta\":{}}", TH_STAMP_RESULT_TYPE, info,
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"_meta\":{" INFO_KEY INFO "},"
                       "\"resultType\":\"complete\"}}");
    expect_result_info("{\"x\":1,\"_meta\":{\"a\":0,\"io.modelcontextprotocol/serverInfo\":{\"name\":\"upstream\"},"
                       "\"b\":1}}",
                       TH_STAMP_RESULT_TYPE, info,
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":1,\"_meta\":{\"a\":0," INFO_KEY INFO
                       ",\"b\":1},\"resultType\":\"complete\"}}");
    expect_result_info("{\"_meta\":\"odd\"}", TH_STAMP_RESULT_TYPE, info,
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"_meta\":{" INFO_KEY INFO "},"
                       "\"resultType\":\"complete\"}}");
    /* the legacy wire stamps nothing: its results pass as they came */
    expect_result_info("{\"_meta\":{\"k\":1}}", 0, info, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"_meta\":{\"k\":1}}}");
}

/* The stateless wire sends no code of the legacy range for a refusal. */
static void test_stateless_codes(void) {
    MCPG_CHECK(th_stateless_code(MCPG_RPC_UNAUTHENTICATED) == MCPG_RPC_INVALID_REQUEST, "-32001");
    MCPG_CHECK(th_stateless_code(MCPG_RPC_FORBIDDEN) == MCPG_RPC_INVALID_REQUEST, "-32003");
    MCPG_CHECK(th_stateless_code(MCPG_RPC_INVALID_PARAMS) == MCPG_RPC_INVALID_PARAMS, "-32602 kept");
    MCPG_CHECK(th_stateless_code(MCPG_RPC_HEADER_MISMATCH) == MCPG_RPC_HEADER_MISMATCH, "-32020 kept");
    MCPG_CHECK(th_stateless_code(MCPG_RPC_MISSING_CLIENT_CAPABILITY) ==
                   MCPG_RPC_MISSING_CLIENT_CAPABILITY, "-32021 kept");
    MCPG_CHECK(th_stateless_code(MCPG_RPC_UNSUPPORTED_VERSION) == MCPG_RPC_UNSUPPORTED_VERSION,
               "-32022 kept");
    /* the limits stage's code is of the spec's sub-range; retired ones are replaced */
    MCPG_CHECK(th_stateless_code(-32029) == MCPG_RPC_INVALID_REQUEST, "limits' -32029");
    MCPG_CHECK(th_stateless_code(-32042) == MCPG_RPC_INVALID_REQUEST, "retired -32042");
    MCPG_CHECK(th_stateless_code(-32002) == MCPG_RPC_INVALID_PARAMS, "retired -32002");
    /* an upstream's own code passes as it came */
    MCPG_CHECK(th_stateless_code(-32050) == -32050, "an upstream's -32050: kept");
    MCPG_CHECK(th_stateless_code(-32100) == -32100, "outside the range: kept");
}

static void test_results(void) {
    expect_result("{\"content\":[]}", TH_STAMP_RESULT_TYPE,
                  "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[],\"resultType\":\"complete\"}}");
    expect_result(" { } ", TH_STAMP_RESULT_TYPE,
                  "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{ \"resultType\":\"complete\"}}");
    expect_result("{\"tools\":[]}\n", TH_STAMP_RESULT_TYPE | TH_STAMP_CACHE,
                  "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[],\"resultType\":\"complete\","
                  "\"ttlMs\":0,\"cacheScope\":\"private\"}}");
    expect_result("{\"resultType\":\"input_required\",\"ttlMs\":5}", TH_STAMP_RESULT_TYPE | TH_STAMP_CACHE,
                  "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"input_required\",\"ttlMs\":5,"
                  "\"cacheScope\":\"private\"}}");
    expect_result("[1]", TH_STAMP_RESULT_TYPE, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1]}");
    expect_result("", TH_STAMP_RESULT_TYPE, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");

    th_piece body[TH_MAX_PIECES];
    char codebuf[24];
    th_piece data = TH_LIT("{\"x\":1}");
    size_t n = th_rpc_error_body(body, TH_LIT("null"), codebuf, -32602, TH_LIT("\"bad\""), &data, 1);
    char *got = join(body, n);
    MCPG_CHECK(!strcmp(got, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32602,\"message\":\"bad\","
                            "\"data\":{\"x\":1}}}"),
               "error %s", got);
    n = th_rpc_error_body(body, TH_LIT("1"), codebuf, INT64_MIN, TH_LIT("\"m\""), NULL, 0);
    got = join(body, n);
    MCPG_CHECK(strstr(got, "-9223372036854775808") != NULL, "INT64_MIN %s", got);

    mcpg_buf out = {0};
    th_resp_head hd = {.status = 503, .retry_after_s = 1, .json = 1, .close = 1, .date = "D"};
    th_piece b = TH_LIT("{}");
    size_t blen = 0;
    MCPG_CHECK(th_resp_append(host, &out, &hd, &b, 1, &blen) == 0, "append");
    MCPG_CHECK(!strcmp(out.data, "HTTP/1.1 503 Service Unavailable\r\nDate: D\r\nContent-Type: application/json\r\n"
                                 "Content-Length: 2\r\nConnection: close\r\nRetry-After: 1\r\n\r\n{}"),
               "head %s", out.data);
    MCPG_CHECK(blen == 2, "blen");
    mcpg_buf_free(&out);
}

int main(void) {
    mcpg_fakehost *fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    host = mcpg_fakehost_host(fh);
    test_good_requests();
    test_http_level();
    test_json_rpc_shape();
    test_envelope();
    test_methods();
    test_meta_members();
    test_header_grammar();
    test_results();
    test_server_info();
    test_stateless_codes();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_stateless");
}
