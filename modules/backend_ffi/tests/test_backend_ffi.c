/* backend_ffi through the SDK's fake host: libm and libc functions of each
 * supported type, argument checks, and config errors for a missing library
 * or symbol. Buffers and arrays: test_ffi_memory.c.
 * Usage: test_backend_ffi path/to/backend_ffi.so */
#include "ffi_test.h"

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

/* The call answers a tool error (isError, no structuredContent) whose one
 * text is `text`. */
static void expect_tool_error(mcpg_instance *inst, const char *tool, const char *args,
                              const char *text) {
    int64_t code;
    char msg[256];
    json_t *o = call(inst, tool, args, &code, msg);
    MCPG_CHECK(o, "%s %.120s: error %lld %s", tool, args, (long long)code, msg);
    if (!o) return;
    const char *got = json_string_value(
        json_object_get(json_array_get(json_object_get(o, "content"), 0), "text"));
    MCPG_CHECK(json_is_true(json_object_get(o, "isError")) && got && strcmp(got, text) == 0,
               "%s %.120s: isError with text [%s], got [%s]", tool, args, text, got ? got : "(none)");
    MCPG_CHECK(!json_object_get(o, "structuredContent"), "%s: no structuredContent", tool);
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
    expect(inst, "labs", "{\"n\":-9223372036854775807}", "9223372036854775807",
           "9223372036854775807");
    expect(inst, "fabsf", "{\"x\":-3.4e38}", "3.4e+38", "3.4e38");
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
    expect_tool_error(inst, "nan", "{\"tag\":\"\"}",
                      "nan(\"\"): the result is not a number (NaN), which no JSON number can hold");
    expect(inst, "ldexp", "{\"x\":1.25,\"e\":3}", "10", "10");
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
    /* every width, one past each end */
    static const struct {
        const char *tool, *arg, *low, *high, *range;
    } widths[] = {
        {"abs8", "n", "-129", "128", "-128 to 127"},
        {"abs16", "n", "-32769", "32768", "-32768 to 32767"},
        {"abs", "n", "-2147483649", "2147483648", "-2147483648 to 2147483647"},
        {"labs", "n", "-9223372036854775809", "9223372036854775808",
         "-9223372036854775808 to 9223372036854775807"},
        {"isdigit8", "c", "-1", "256", "0 to 255"},
        {"u16", "n", "-1", "65536", "0 to 65535"},
        {"u32", "n", "-1", "4294967296", "0 to 4294967295"},
        {"i64max", "n", "-1", "18446744073709551616", "0 to 18446744073709551615"},
    };
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
        char args[64], want[160];
        snprintf(want, sizeof want, "Invalid params: argument \"%s\": expected an integer from %s",
                 widths[i].arg, widths[i].range);
        snprintf(args, sizeof args, "{\"%s\":%s}", widths[i].arg, widths[i].low);
        expect_error(inst, widths[i].tool, args, want);
        snprintf(args, sizeof args, "{\"%s\":%s}", widths[i].arg, widths[i].high);
        expect_error(inst, widths[i].tool, args, want);
    }
    expect_error(inst, "fabsf", "{\"x\":3.5e38}",
                 "Invalid params: argument \"x\": expected a number within the range of float");
    expect_error(inst, "sqrt", "{\"x\":1e999}",
                 "Invalid params: argument \"x\": expected a number within the range of double");
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
