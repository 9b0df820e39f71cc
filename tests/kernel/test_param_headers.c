/* Custom headers on their own: x-mcp-header annotations read from an
 * inputSchema (valid and invalid ones), a call's arguments judged against
 * its Mcp-Param headers (param_headers.c with the SDK's decoder), and the
 * values a client sends for arguments. */
#include "mcpg/check.h"
#include "kernel.h"

#include <stdio.h>
#include <string.h>

#define S(props) "{\"type\":\"object\",\"properties\":{" props "}}"

static int parse(const char *schema, mcpg_param_headers *ph, char *why, size_t cap) {
    return mcpg_param_headers_parse(schema, strlen(schema), ph, why, cap);
}

static void expect_invalid(const char *schema, const char *why_has) {
    mcpg_param_headers ph;
    char why[400];
    int rc = parse(schema, &ph, why, sizeof why);
    MCPG_CHECK(rc == MCPG_EINVAL && strstr(why, why_has), "%s: rc %d, why \"%s\" (want \"%s\")",
               schema, rc, why, why_has);
    MCPG_CHECK(ph.n == 0 && ph.v == NULL, "%s: nothing kept", schema);
}

static void test_parse(void) {
    mcpg_param_headers ph;
    char why[400];
    int rc = parse(S("\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
                     "\"n\":{\"type\":\"integer\",\"x-mcp-header\":\"Count\"},"
                     "\"f\":{\"type\":\"object\",\"properties\":{\"on\":{\"type\":[\"boolean\","
                     "\"null\"],\"x-mcp-header\":\"Flag\"}}},"
                     "\"plain\":{\"type\":\"number\"},"
                     "\"d\":{\"type\":\"string\",\"default\":{\"x-mcp-header\":\"data\"}}"),
                   &ph, why, sizeof why);
    MCPG_REQUIRE(rc == 0 && ph.n == 3, "valid schema: rc %d n %zu (%s)", rc, ph.n, why);
    MCPG_CHECK(!strcmp(ph.v[0].lname, "mcp-param-region") && ph.v[0].type == MCPG_PARAM_STRING &&
                   ph.v[0].depth == 1 && !strcmp(ph.v[0].path[0], "region"),
               "region: %s", ph.v[0].lname);
    MCPG_CHECK(ph.v[1].type == MCPG_PARAM_INTEGER && !strcmp(ph.v[1].name, "Count"), "count");
    MCPG_CHECK(ph.v[2].depth == 2 && !strcmp(ph.v[2].path[1], "on") &&
                   ph.v[2].type == MCPG_PARAM_BOOLEAN,
               "nested flag");
    mcpg_param_headers_free(&ph);

    rc = parse("{\"type\":\"object\"}", &ph, why, sizeof why);
    MCPG_CHECK(rc == 0 && ph.n == 0, "no annotations");

    expect_invalid(S("\"a\":{\"type\":\"number\",\"x-mcp-header\":\"A\"}"), "not integer");
    expect_invalid(S("\"a\":{\"x-mcp-header\":\"A\"}"), "not integer");
    expect_invalid(S("\"a\":{\"type\":\"string\",\"x-mcp-header\":\"\"}"), "empty");
    expect_invalid(S("\"a\":{\"type\":\"string\",\"x-mcp-header\":\"A B\"}"), "character");
    expect_invalid(S("\"a\":{\"type\":\"string\",\"x-mcp-header\":\"A\\u0001\"}"), "character");
    expect_invalid(S("\"a\":{\"type\":\"string\",\"x-mcp-header\":7}"), "not a string");
    expect_invalid(S("\"a\":{\"type\":\"string\",\"x-mcp-header\":\"Dup\"},"
                     "\"b\":{\"type\":\"string\",\"x-mcp-header\":\"dUP\"}"),
                   "declared twice");
    expect_invalid(S("\"a\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
                     "\"x-mcp-header\":\"A\"}}"),
                   "not on a property");
    expect_invalid(S("\"a\":{\"oneOf\":[{\"type\":\"string\",\"x-mcp-header\":\"A\"}]}"),
                   "not on a property");
    expect_invalid("{\"type\":\"object\",\"$defs\":{\"x\":{\"type\":\"string\","
                   "\"x-mcp-header\":\"A\"}},\"properties\":{\"a\":{\"$ref\":\"#/$defs/x\"}}}",
                   "not on a property");
    expect_invalid("{\"type\":\"string\",\"x-mcp-header\":\"Root\"}", "not on a property");
    expect_invalid(S("\"a\":{\"type\":\"string\",\"x-mcp-header\":\"A\",\"x-mcp-header\":\"B\"}"),
                   "twice");
    /* an escaped key is the annotation all the same */
    expect_invalid(S("\"a\":{\"type\":\"number\",\"x-mcp-\\u0068eader\":\"A\"}"), "not integer");
}

/* A header table for the verdicts: "lname: value" pairs. */
typedef struct hdrs {
    const char *const *kv; /* name, value, name, value, ..., NULL */
} hdrs;

static const char *lookup(void *ctx, const char *lname, size_t *len) {
    const hdrs *h = ctx;
    for (size_t i = 0; h->kv[i]; i += 2)
        if (!strcmp(h->kv[i], lname)) {
            *len = strlen(h->kv[i + 1]);
            return h->kv[i + 1];
        }
    return NULL;
}

static int verdict(const mcpg_param_headers *ph, const char *args, const char *const *kv,
                   char *msg, size_t cap) {
    hdrs h = {kv};
    msg[0] = '\0';
    return param_headers_verdict(ph, args, strlen(args), lookup, &h, msg, cap);
}

#define V(args, ...) verdict(&ph, args, (const char *const[]){__VA_ARGS__, NULL}, msg, sizeof msg)

static void test_verdict(void) {
    mcpg_param_headers ph;
    char msg[300];
    MCPG_REQUIRE(parse(S("\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
                         "\"n\":{\"type\":\"integer\",\"x-mcp-header\":\"Count\"},"
                         "\"ok\":{\"type\":\"boolean\",\"x-mcp-header\":\"Ok\"}"),
                       &ph, msg, sizeof msg) == 0,
                 "parse: %s", msg);
    const char *all = "{\"region\":\"Hello\",\"n\":42,\"ok\":true}";
    MCPG_CHECK(V(all, "mcp-param-region", "Hello", "mcp-param-count", "42", "mcp-param-ok",
                 "true") == MCPG_PARAM_OK, "plain: %s", msg);
    MCPG_CHECK(V(all, "mcp-param-region", " =?base64?SGVsbG8=?= ", "mcp-param-count", "42.0",
                 "mcp-param-ok", "true") == MCPG_PARAM_OK,
               "base64, numeric compare, OWS: %s", msg);
    MCPG_CHECK(V("{\"n\":42.000}", "mcp-param-count", "042") == MCPG_PARAM_OK, "42.000 vs 042: %s",
               msg);
    /* an exponent is applied before comparing */
    MCPG_CHECK(V("{\"n\":4.2e1}", "mcp-param-count", "42") == MCPG_PARAM_OK, "4.2e1 vs 42: %s",
               msg);
    MCPG_CHECK(V("{\"n\":1000}", "mcp-param-count", "1E+3") == MCPG_PARAM_OK, "1000 vs 1E+3: %s",
               msg);
    MCPG_CHECK(V("{\"n\":-0.0}", "mcp-param-count", "0") == MCPG_PARAM_OK, "-0.0 vs 0: %s", msg);
    MCPG_CHECK(V("{\"n\":1e3}", "mcp-param-count", "1001") == MCPG_PARAM_MISMATCH,
               "1e3 vs 1001: %s", msg);
    /* a number too long to make canonical compares by its text: what is sent is accepted */
    MCPG_CHECK(V("{\"n\":379e244}", "mcp-param-count", "379e244") == MCPG_PARAM_OK,
               "379e244 sent as it is: %s", msg);
    MCPG_CHECK(V("{\"n\":379e244}", "mcp-param-count", "3790e243") == MCPG_PARAM_MISMATCH,
               "a huge number written otherwise: %s", msg);
    MCPG_CHECK(V(all, "mcp-param-region", "=?base64?SGVsbG8?=", "mcp-param-count", "42",
                 "mcp-param-ok", "true") == MCPG_PARAM_BAD_BASE64 &&
                   strstr(msg, "Mcp-Param-Region"),
               "bad padding: %s", msg);
    MCPG_CHECK(V(all, "mcp-param-region", "=?base64?SGVs!!!bG8=?=", "mcp-param-count", "42",
                 "mcp-param-ok", "true") == MCPG_PARAM_BAD_BASE64,
               "not the alphabet: %s", msg);
    MCPG_CHECK(V(all, "mcp-param-region", "hello", "mcp-param-count", "42", "mcp-param-ok",
                 "true") == MCPG_PARAM_MISMATCH && strstr(msg, "Mcp-Param-Region"),
               "mismatch: %s", msg);
    MCPG_CHECK(V(all, "mcp-param-region", "Hello", "mcp-param-count", "43", "mcp-param-ok",
                 "true") == MCPG_PARAM_MISMATCH && strstr(msg, "Mcp-Param-Count"),
               "number mismatch: %s", msg);
    MCPG_CHECK(V(all, "mcp-param-region", "Hello", "mcp-param-count", "42", "mcp-param-ok",
                 "True") == MCPG_PARAM_MISMATCH,
               "boolean is lowercase: %s", msg);
    MCPG_CHECK(V(all, "mcp-param-count", "42", "mcp-param-ok", "true") == MCPG_PARAM_MISSING &&
                   strstr(msg, "Mcp-Param-Region"),
               "missing: %s", msg);
    MCPG_CHECK(V("{\"region\":null}", "mcp-param-other", "x") == MCPG_PARAM_OK,
               "null and absent values need no header, an unknown header is ignored: %s", msg);
    MCPG_CHECK(V("{}", "mcp-param-region", "Hello") == MCPG_PARAM_UNEXPECTED,
               "a header without its value: %s", msg);
    /* literal when either marker is missing */
    MCPG_CHECK(V("{\"region\":\"=?base64?SGVsbG8=\"}", "mcp-param-region", "=?base64?SGVsbG8=") ==
                   MCPG_PARAM_OK,
               "no suffix: literal: %s", msg);
    mcpg_param_headers_free(&ph);
}

static void expect_value(const char *args, const char *want) {
    mcpg_param_headers ph;
    char why[200];
    MCPG_REQUIRE(parse(S("\"v\":{\"type\":\"string\",\"x-mcp-header\":\"V\"}"), &ph, why,
                       sizeof why) == 0,
                 "parse");
    mcpg_buf out = {0};
    int rc = mcpg_param_header_value(&ph.v[0], args, strlen(args), &out);
    MCPG_CHECK(want ? rc == 1 && out.data && !strcmp(out.data, want) : rc == 0,
               "%s: rc %d gave \"%s\", want \"%s\"", args, rc, out.data ? out.data : "",
               want ? want : "(none)");
    /* what is sent is what a server accepts */
    if (want)
        MCPG_CHECK(mcpg_param_header_check(&ph.v[0], args, strlen(args), out.data, out.len) ==
                       MCPG_PARAM_OK,
                   "%s: its own header is refused", args);
    mcpg_buf_free(&out);
    mcpg_param_headers_free(&ph);
}

static void test_values(void) {
    expect_value("{\"v\":\"us-west\"}", "us-west");
    expect_value("{\"v\":\"a b\"}", "a b");
    expect_value("{\"v\":\" lead\"}", "=?base64?IGxlYWQ=?=");
    expect_value("{\"v\":\"caf\\u00e9\"}", "=?base64?Y2Fmw6k=?=");
    expect_value("{\"v\":\"=?base64?abc?=\"}", "=?base64?PT9iYXNlNjQ/YWJjPz0=?=");
    expect_value("{\"v\":\"line\\nbreak\"}", "=?base64?bGluZQpicmVhaw==?=");
    expect_value("{\"v\":42.0}", "42");
    expect_value("{\"v\":4.2e1}", "42");
    expect_value("{\"v\":-1.50e-2}", "-0.015");
    expect_value("{\"v\":379e244}", "379e244");
    expect_value("{\"v\":false}", "false");
    expect_value("{\"v\":null}", NULL);
    expect_value("{}", NULL);
}

int main(void) {
    test_parse();
    test_verdict();
    test_values();
    return MCPG_CHECK_EXIT("test_param_headers");
}
