/* backend_ffi through the SDK's fake host: libm and libc functions of each
 * supported type, argument checks, and config errors for a missing library
 * or symbol. Usage: test_backend_ffi path/to/backend_ffi.so */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *so_path;
static mcpg_fakehost *fh;

#define P(n, t) "{\"name\":\"" n "\",\"type\":\"" t "\"}"
#define FN(name, lib, sym, ret, params)                                                      \
    "{\"name\":\"" name "\",\"library\":\"" lib "\",\"symbol\":\"" sym "\",\"returns\":\"" ret \
    "\",\"params\":[" params "]}"

static const char config[] =
    "{\"functions\":["
    FN("sqrt", "libm.so.6", "sqrt", "double", P("x", "double")) ","
    FN("pow", "libm.so.6", "pow", "double", P("x", "double") "," P("y", "double")) ","
    FN("fabsf", "libm.so.6", "fabsf", "float", P("x", "float")) ","
    FN("labs", "libc.so.6", "labs", "int64", P("n", "int64")) ","
    FN("abs", "libc.so.6", "abs", "int32", P("n", "int32")) ","
    FN("strlen", "libc.so.6", "strlen", "uint64", P("s", "string")) ","
    FN("toupper", "libc.so.6", "toupper", "int32", P("c", "int32")) ","
    FN("strtoul", "libc.so.6", "strtoul", "uint64", P("s", "string") "," P("end", "uint64") ","
       P("base", "int32")) ","
    FN("isdigit8", "libc.so.6", "isdigit", "int32", P("c", "uint8")) ","
    FN("nonzero", "libc.so.6", "abs", "bool", P("b", "bool")) ","
    FN("abs16", "libc.so.6", "abs", "int16", P("n", "int16")) ","
    FN("abs8", "libc.so.6", "abs", "int8", P("n", "int8")) ","
    FN("ldexp", "libm.so.6", "ldexp", "double", P("x", "double") "," P("e", "int32")) ","
    FN("getenv", "libc.so.6", "getenv", "string", P("name", "string")) ","
    FN("u16", "libc.so.6", "abs", "uint16", P("n", "uint16")) ","
    FN("u32", "libc.so.6", "labs", "uint32", P("n", "uint32")) ","
    FN("i64max", "libc.so.6", "labs", "uint64", P("n", "uint64")) ","
    FN("srand", "libc.so.6", "srand", "void", P("seed", "uint32")) ","
    FN("nan", "libm.so.6", "nan", "double", P("tag", "string")) "]}";

static mcpg_instance *load(const char *cfg) {
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, so_path, "ffi", cfg, &inst);
    MCPG_REQUIRE(rc == 0, "load failed: %d\n%s", rc, mcpg_fakehost_report_text(fh));
    return inst;
}

/* Call a tool; on success return the result object (decref it), else NULL
 * with *code and msg (cap 256) holding the error. */
static json_t *call(mcpg_instance *inst, const char *tool, const char *args, int64_t *code,
                    char *msg) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", tool, args, "1");
    MCPG_REQUIRE(c, "call_new");
    int st = mcpg_fakehost_run(fh, inst, c, 5000);
    json_t *o = NULL;
    *code = mcpg_fakehost_error_code(c);
    msg[0] = '\0';
    if (st == MCPG_CONTINUE) {
        o = json_loads(mcpg_fakehost_result(c), 0, NULL);
        MCPG_REQUIRE(o, "result is JSON: %s", mcpg_fakehost_result(c));
    } else {
        MCPG_CHECK(st == MCPG_DENY, "%s: status %d", tool, st);
        const char *m = mcpg_fakehost_error_message(c);
        snprintf(msg, 256, "%s", m ? m : "");
    }
    mcpg_fakehost_call_free(fh, c);
    return o;
}

/* The call succeeds, its text is `text` and structuredContent.result is
 * the JSON `value`. */
static void expect(mcpg_instance *inst, const char *tool, const char *args, const char *text,
                   const char *value) {
    int64_t code;
    char msg[256];
    json_t *o = call(inst, tool, args, &code, msg);
    MCPG_CHECK(o, "%s %s: error %lld %s", tool, args, (long long)code, msg);
    if (!o) return;
    json_t *item = json_array_get(json_object_get(o, "content"), 0);
    const char *got = json_string_value(json_object_get(item, "text"));
    MCPG_CHECK(got && strcmp(got, text) == 0, "%s %s: text [%s], want [%s]", tool, args,
               got ? got : "(none)", text);
    json_t *want = json_loads(value, JSON_DECODE_ANY, NULL);
    json_t *res = json_object_get(json_object_get(o, "structuredContent"), "result");
    MCPG_CHECK(want && res && json_equal(want, res), "%s %s: structured result differs from %s",
               tool, args, value);
    json_decref(want);
    json_decref(o);
}

static void expect_error(mcpg_instance *inst, const char *tool, const char *args,
                         const char *want) {
    int64_t code;
    char msg[256];
    json_t *o = call(inst, tool, args, &code, msg);
    MCPG_CHECK(!o && code == -32602 && strcmp(msg, want) == 0,
               "%s %s: got %lld [%s], want -32602 [%s]", tool, args, (long long)code, msg, want);
    json_decref(o);
}

static void test_calls(int inline_dispatch) {
    mcpg_instance *inst = load(config);
    if (inline_dispatch)
        MCPG_REQUIRE(mcpg_fakehost_set_inline(inst, 1) == 0, "inline refused");
    expect(inst, "sqrt", "{\"x\":9}", "3", "3");
    expect(inst, "sqrt", "{\"x\":2}", "1.4142135623730951", "1.4142135623730951");
    expect(inst, "pow", "{\"x\":2,\"y\":10}", "1024", "1024");
    expect(inst, "pow", "{\"y\":0.5,\"x\":0.01}", "0.1", "0.1");
    expect(inst, "fabsf", "{\"x\":-2.5}", "2.5", "2.5");
    expect(inst, "labs", "{\"n\":-9000000000}", "9000000000", "9000000000");
    expect(inst, "abs", "{\"n\":-2147483647}", "2147483647", "2147483647");
    expect(inst, "strlen", "{\"s\":\"h\\u00e9llo\"}", "6", "6");
    expect(inst, "toupper", "{\"c\":97}", "65", "65");
    expect(inst, "strtoul", "{\"s\":\"ff\",\"end\":0,\"base\":16}", "255", "255");
    expect(inst, "isdigit8", "{\"c\":97}", "0", "0");
    expect(inst, "nonzero", "{\"b\":true}", "true", "true");
    expect(inst, "nonzero", "{\"b\":false}", "false", "false");
    expect(inst, "abs16", "{\"n\":-300}", "300", "300");
    expect(inst, "abs8", "{\"n\":-100}", "100", "100");
    expect(inst, "ldexp", "{\"x\":1.5,\"e\":4}", "24", "24");
    expect(inst, "getenv", "{\"name\":\"MCPG_FFI_TEST\"}", "va\"lue", "\"va\\\"lue\"");
    expect(inst, "getenv", "{\"name\":\"MCPG_FFI_UNSET_VARIABLE\"}", "null", "null");
    expect(inst, "u16", "{\"n\":65535}", "65535", "65535");
    expect(inst, "u32", "{\"n\":4294967295}", "4294967295", "4294967295");
    expect(inst, "srand", "{\"seed\":1}", "null", "null");
    expect(inst, "nan", "{\"tag\":\"\"}", "null", "null");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void test_bad_arguments(void) {
    mcpg_instance *inst = load(config);
    expect_error(inst, "sqrt", "{\"x\":\"9\"}", "Invalid params: argument \"x\": expected a number");
    expect_error(inst, "sqrt", "{}", "Invalid params: missing argument \"x\"");
    expect_error(inst, "sqrt", "{\"x\":1,\"y\":2}", "Invalid params: unknown argument \"y\"");
    expect_error(inst, "pow", "{\"x\":1}", "Invalid params: missing argument \"y\"");
    expect_error(inst, "abs8", "{\"n\":128}",
                 "Invalid params: argument \"n\": expected an integer from -128 to 127");
    expect_error(inst, "abs", "{\"n\":1.5}",
                 "Invalid params: argument \"n\": expected an integer from -2147483648 to "
                 "2147483647");
    expect_error(inst, "u16", "{\"n\":-1}",
                 "Invalid params: argument \"n\": expected an integer from 0 to 65535");
    expect_error(inst, "strlen", "{\"s\":5}", "Invalid params: argument \"s\": expected a string");
    expect_error(inst, "strlen", "{\"s\":\"a\\u0000b\"}",
                 "Invalid params: argument \"s\": expected a string without NUL characters");
    expect_error(inst, "isdigit8", "{\"c\":true}",
                 "Invalid params: argument \"c\": expected an integer from 0 to 255");
    expect_error(inst, "nonzero", "{\"b\":1}", "Invalid params: argument \"b\": expected a boolean");
    expect_error(inst, "nope", "{}", "Unknown tool: nope");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void test_schema(void) {
    mcpg_instance *inst = load(config);
    mcpg_buf out = {0};
    MCPG_REQUIRE(mcpg_fakehost_list(fh, inst, MCPG_METHOD_TOOLS_LIST, &out) == 0, "list_tools");
    /* uint64 bounds exceed jansson's integers: read them as reals */
    json_t *a = json_loads(out.data, JSON_DECODE_INT_AS_REAL, NULL);
    MCPG_REQUIRE(json_is_array(a) && json_array_size(a) == 19, "19 tools: %s", out.data);
    json_t *pw = json_array_get(a, 1), *s = json_object_get(pw, "inputSchema");
    MCPG_CHECK(strcmp(json_string_value(json_object_get(pw, "name")), "pow") == 0, "pow");
    json_t *x = json_object_get(json_object_get(s, "properties"), "x");
    MCPG_CHECK(strcmp(json_string_value(json_object_get(x, "type")), "number") == 0, "x number");
    json_t *req = json_object_get(s, "required");
    MCPG_CHECK(json_array_size(req) == 2 &&
                   strcmp(json_string_value(json_array_get(req, 1)), "y") == 0, "required x, y");
    MCPG_CHECK(json_is_false(json_object_get(s, "additionalProperties")), "no extra arguments");
    json_t *n = json_object_get(json_object_get(json_object_get(json_array_get(a, 11),
                                                                "inputSchema"), "properties"), "n");
    MCPG_CHECK(strcmp(json_string_value(json_object_get(n, "type")), "integer") == 0 &&
                   json_number_value(json_object_get(n, "minimum")) == -128 &&
                   json_number_value(json_object_get(n, "maximum")) == 127, "int8 bounds");
    json_t *str = json_object_get(json_object_get(json_object_get(json_array_get(a, 5),
                                                                  "inputSchema"), "properties"), "s");
    MCPG_CHECK(strcmp(json_string_value(json_object_get(str, "type")), "string") == 0, "string");
    json_decref(a);
    mcpg_buf_free(&out);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

/* The config is refused and the report names the key. */
static void expect_config_error(const char *cfg, const char *want) {
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, so_path, "ffi", cfg, &inst);
    const char *rep = mcpg_fakehost_report_text(fh);
    MCPG_CHECK(rc != 0 && rep && strstr(rep, want), "config %s: rc %d, report [%s], want [%s]",
               cfg, rc, rep ? rep : "", want);
    if (rc == 0) mcpg_fakehost_unload(fh, inst);
}

static void test_config_errors(void) {
    expect_config_error("{\"functions\":[" FN("a", "libm.so.6", "sqrt", "double", P("x", "double"))
                        "," FN("b", "libm.so.6", "sqrt", "double", "") ","
                        FN("c", "libm.so.6", "no_such_fn", "double", "") "]}",
                        "functions[2].symbol: no symbol \"no_such_fn\" in libm.so.6");
    expect_config_error("{\"functions\":[" FN("a", "libnope.so.9", "f", "void", "") "]}",
                        "functions[0].library: cannot load \"libnope.so.9\"");
    expect_config_error("{\"functions\":[" FN("a", "libm.so.6", "sqrt", "complex", "") "]}",
                        "functions[0].returns: expected one of");
    expect_config_error("{\"functions\":[" FN("a", "libm.so.6", "sqrt", "double",
                                              P("x", "void")) "]}",
                        "functions[0].params[0].type: expected one of");
    expect_config_error("{\"functions\":[{\"name\":\"a\",\"library\":\"libm.so.6\","
                        "\"returns\":\"double\"}]}", "functions[0].symbol: is required");
    expect_config_error("{\"functions\":[" FN("a", "libm.so.6", "sqrt", "double", "") ","
                        FN("a", "libm.so.6", "cos", "double", "") "]}",
                        "functions[1].name: duplicate tool name \"a\"");
    expect_config_error("{\"functions\":[" FN("a", "libm.so.6", "pow", "double",
                                              P("x", "double") "," P("x", "double")) "]}",
                        "functions[0].params[1].name: duplicate parameter \"x\"");
    expect_config_error("{\"functions\":[{\"name\":\"a\",\"library\":\"libm.so.6\","
                        "\"symbol\":\"sqrt\",\"returns\":\"double\",\"retruns\":1}]}",
                        "functions[0].retruns: unknown key (did you mean \"returns\"?)");
    expect_config_error("{\"functions\":{}}", "functions: expected an array");
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: test_backend_ffi path/to/backend_ffi.so");
    so_path = argv[1];
    setenv("MCPG_FFI_TEST", "va\"lue", 1);
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    test_calls(0);
    test_calls(1);
    test_bad_arguments();
    test_schema();
    test_config_errors();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_backend_ffi");
}
