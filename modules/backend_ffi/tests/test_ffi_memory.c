/* backend_ffi through the SDK's fake host: output buffers (libc's
 * gethostname, getcwd, realpath, confstr, memset), fixed-length output
 * arrays (libm's sincos, frexp, modf), arrays of every numeric element type
 * in and in-out (the ffx_* functions of ffi_fixture.c), the sizes the module
 * fills in, and the errors of each.
 * Usage: test_ffi_memory path/to/backend_ffi.so path/to/libffi_fixture.so */
#include "ffi_test.h"

#include <unistd.h>

/* a parameter with more keys than name and type */
#define PX(n, t, more) "{\"name\":\"" n "\",\"type\":\"" t "\"," more "}"
#define SIZE_OF(n, t, of) PX(n, t, "\"size_of\":\"" of "\"")
#define LENGTH_OF(n, t, of) PX(n, t, "\"length_of\":\"" of "\"")
#define OUT(n, of, len) PX(n, "array", "\"of\":\"" of "\",\"length\":" #len)

static const char libc_config[] =
    "{\"functions\":["
    FN("hostname", "libc.so.6", "gethostname", "int32",
       PX("name", "buffer", "\"size\":256") "," SIZE_OF("len", "uint64", "name")) ","
    FN("getcwd", "libc.so.6", "getcwd", "string",
       PX("buf", "buffer", "\"size\":4096") "," SIZE_OF("size", "uint64", "buf")) ","
    FN("realpath", "libc.so.6", "realpath", "string",
       P("path", "string") "," PX("resolved", "buffer", "\"size\":4096")) ","
    FN("confstr", "libc.so.6", "confstr", "uint64",
       P("name", "int32") "," PX("buf", "buffer", "\"size\":64") ","
       SIZE_OF("len", "uint64", "buf")) ","
    FN("memset", "libc.so.6", "memset", "void",
       PX("bytes", "buffer", "\"size\":8,\"encoding\":\"base64\"") "," P("c", "int32") ","
       SIZE_OF("n", "uint8", "bytes")) ","
    FN("zeroed", "libc.so.6", "strlen", "uint64", PX("buf", "buffer", "\"size\":16")) ","
    FN("sincos", "libm.so.6", "sincos", "void",
       P("x", "double") "," OUT("sin", "double", 1) "," OUT("cos", "double", 1)) ","
    FN("frexp", "libm.so.6", "frexp", "double", P("x", "double") "," OUT("exp", "int32", 1)) ","
    FN("modf", "libm.so.6", "modf", "double", P("x", "double") "," OUT("int", "double", 1))
    "]}";

static void test_buffers(int inline_dispatch) {
    mcpg_instance *inst = load(libc_config);
    if (inline_dispatch) MCPG_REQUIRE(mcpg_fakehost_set_inline(inst, 1) == 0, "inline refused");
    char want[8300], host[256] = "", cwd[4096] = "", cs[64] = "";
    MCPG_REQUIRE(gethostname(host, sizeof host) == 0 && getcwd(cwd, sizeof cwd), "host, cwd");
    size_t csn = confstr(_CS_PATH, cs, sizeof cs);
    snprintf(want, sizeof want, "{\"result\":0,\"name\":\"%s\"}", host);
    expect_out(inst, "hostname", "{}", want);
    snprintf(want, sizeof want, "{\"result\":\"%s\",\"buf\":\"%s\"}", cwd, cwd);
    expect_out(inst, "getcwd", "{}", want);
    expect_out(inst, "realpath", "{\"path\":\"/usr/./lib/..\"}",
               "{\"result\":\"/usr\",\"resolved\":\"/usr\"}");
    snprintf(want, sizeof want, "{\"result\":%zu,\"buf\":\"%s\"}", csn, cs);
    expect_out(inst, "confstr", "{\"name\":0}", want); /* _CS_PATH */
    expect_out(inst, "memset", "{\"c\":65}", "{\"result\":null,\"bytes\":\"QUFBQUFBQUE=\"}");
    expect_out(inst, "zeroed", "{}", "{\"result\":0,\"buf\":\"\"}");
    expect_out(inst, "sincos", "{\"x\":0}", "{\"result\":null,\"sin\":[0],\"cos\":[1]}");
    expect_out(inst, "frexp", "{\"x\":8}", "{\"result\":0.5,\"exp\":[4]}");
    expect_out(inst, "modf", "{\"x\":-3.25}", "{\"result\":-0.25,\"int\":[-3]}");
    /* what the module fills in is not the caller's */
    expect_error(inst, "hostname", "{\"len\":5}", "Invalid params: unknown argument \"len\"");
    expect_error(inst, "realpath", "{\"path\":\"/\",\"resolved\":\"x\"}",
                 "Invalid params: unknown argument \"resolved\"");
    expect_error(inst, "frexp", "{\"x\":1,\"exp\":[1]}",
                 "Invalid params: unknown argument \"exp\"");
    expect_error(inst, "realpath", "{}", "Invalid params: missing argument \"path\"");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static const char *fixture;

/* ffx_sum_<t>(const T *xs, size_t n) and ffx_flip_<t>(T *xs, size_t n) of
 * one element type, as "sum_<t>" and "flip_<t>" (in-out, at most 4). */
static char *fixture_config(void) {
    static const char *const types[][2] = {
        {"i8", "int8"},   {"i16", "int16"},   {"i32", "int32"},   {"i64", "int64"},
        {"u8", "uint8"},  {"u16", "uint16"},  {"u32", "uint32"},  {"u64", "uint64"},
        {"f", "float"},   {"d", "double"}};
    mcpg_buf b = {0};
    int rc = mcpg_buf_printf(&b, "{\"functions\":[");
    for (size_t i = 0; i < 10 && !rc; i++)
        rc = mcpg_buf_printf(
            &b,
            "%s{\"name\":\"sum_%s\",\"library\":\"%s\",\"symbol\":\"ffx_sum_%s\",\"returns\":"
            "\"double\",\"params\":[{\"name\":\"xs\",\"type\":\"array\",\"of\":\"%s\"},"
            "{\"name\":\"n\",\"type\":\"uint64\",\"length_of\":\"xs\"}]},"
            "{\"name\":\"flip_%s\",\"library\":\"%s\",\"symbol\":\"ffx_flip_%s\",\"returns\":"
            "\"void\",\"params\":[{\"name\":\"xs\",\"type\":\"array\",\"of\":\"%s\","
            "\"max_length\":4,\"inout\":true,\"description\":\"flipped in place\"},"
            "{\"name\":\"n\",\"type\":\"uint8\",\"length_of\":\"xs\"}]}",
            i ? "," : "", types[i][0], fixture, types[i][0], types[i][1], types[i][0], fixture,
            types[i][0], types[i][1]);
    if (!rc)
        rc = mcpg_buf_printf(&b, ",{\"name\":\"fill\",\"library\":\"%s\",\"symbol\":\"ffx_fill\","
                                 "\"returns\":\"int32\",\"params\":[{\"name\":\"bytes\",\"type\":"
                                 "\"buffer\",\"size\":5,\"encoding\":\"base64\"},{\"name\":\"n\","
                                 "\"type\":\"uint16\",\"size_of\":\"bytes\"}]}]}", fixture);
    MCPG_REQUIRE(!rc, "fixture config");
    return b.data;
}

/* flip_<t> answers xs flipped; sum_<t> of the same xs answers sum. */
static void expect_flip(mcpg_instance *inst, const char *t, const char *xs, const char *flipped,
                        const char *sum) {
    char tool[16], args[160], want[200];
    snprintf(args, sizeof args, "{\"xs\":%s}", xs);
    snprintf(tool, sizeof tool, "flip_%s", t);
    snprintf(want, sizeof want, "{\"result\":null,\"xs\":%s}", flipped);
    expect_out(inst, tool, args, want);
    snprintf(tool, sizeof tool, "sum_%s", t);
    expect(inst, tool, args, sum, sum);
}

static void test_arrays(int inline_dispatch) {
    char *cfg = fixture_config();
    mcpg_instance *inst = load(cfg);
    free(cfg);
    if (inline_dispatch) MCPG_REQUIRE(mcpg_fakehost_set_inline(inst, 1) == 0, "inline refused");
    /* each element type at both ends of its range, exactly */
    expect_flip(inst, "i8", "[-128,127,5]", "[127,-128,-6]", "4");
    expect_flip(inst, "i16", "[-32768,32767]", "[32767,-32768]", "-1");
    expect_flip(inst, "i32", "[-2147483648,2147483647,0]", "[2147483647,-2147483648,-1]", "-1");
    expect_flip(inst, "i64", "[-9223372036854775808,9223372036854775807]",
                "[9223372036854775807,-9223372036854775808]", "0");
    expect_flip(inst, "u8", "[0,255,1]", "[255,0,254]", "256");
    expect_flip(inst, "u16", "[65535,0]", "[0,65535]", "65535");
    expect_flip(inst, "u32", "[4294967295,1]", "[0,4294967294]", "4294967296");
    expect_flip(inst, "u64", "[18446744073709551615,0]", "[0,18446744073709551615]",
                "1.8446744073709552e+19"); /* the sum is a double */
    expect_flip(inst, "f", "[1.5,-0.1,3.4028234663852886e38]", "[-1.5,0.1,-3.4028235e+38]",
                "3.4028234663852886e+38");
    expect_flip(inst, "d", "[2.5,1e300,-0.1]", "[-2.5,-1e+300,0.1]", "1e+300");
    expect_flip(inst, "d", "[]", "[]", "0");
    expect(inst, "sum_d", "{\"xs\":[0.5,0.25,0.125]}", "0.875", "0.875");
    expect_out(inst, "fill", "{}", "{\"result\":5,\"bytes\":\"//79/Ps=\"}");
    /* wrong types, element by element, and too many */
    expect_error(inst, "sum_d", "{\"xs\":\"1,2\"}",
                 "Invalid params: argument \"xs\": expected an array of double");
    expect_error(inst, "sum_d", "{\"xs\":[1,\"2\"]}",
                 "Invalid params: argument \"xs[1]\": expected a number");
    expect_error(inst, "sum_f", "{\"xs\":[1,1e39]}",
                 "Invalid params: argument \"xs[1]\": expected a number within the range of float");
    expect_error(inst, "sum_u8", "{\"xs\":[0,1,256]}",
                 "Invalid params: argument \"xs[2]\": expected an integer from 0 to 255");
    expect_error(inst, "sum_i64", "{\"xs\":[9223372036854775808]}",
                 "Invalid params: argument \"xs[0]\": expected an integer from "
                 "-9223372036854775808 to 9223372036854775807");
    expect_error(inst, "sum_i32", "{\"xs\":[1.5]}",
                 "Invalid params: argument \"xs[0]\": expected an integer from -2147483648 to "
                 "2147483647");
    expect_error(inst, "flip_i8", "{\"xs\":[1,2,3,4,5]}",
                 "Invalid params: argument \"xs\": expected at most 4 items");
    expect_error(inst, "sum_d", "{}", "Invalid params: missing argument \"xs\"");
    expect_error(inst, "sum_d", "{\"xs\":[1],\"n\":1}", "Invalid params: unknown argument \"n\"");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

/* The default bound: 65536 elements pass, one more does not. */
static void test_array_bound(void) {
    char *cfg = fixture_config();
    mcpg_instance *inst = load(cfg);
    free(cfg);
    mcpg_buf args = {0};
    int rc = mcpg_buf_printf(&args, "{\"xs\":[1");
    for (int i = 1; i < 65536 && !rc; i++) rc = mcpg_buf_append(&args, ",1", 2);
    MCPG_REQUIRE(!rc && mcpg_buf_append(&args, "]}", 2) == 0, "args");
    expect(inst, "sum_u8", args.data, "65536", "65536");
    args.len -= 2;
    MCPG_REQUIRE(mcpg_buf_append(&args, ",1]}", 4) == 0, "args");
    expect_error(inst, "sum_u8", args.data,
                 "Invalid params: argument \"xs\": expected at most 65536 items");
    mcpg_buf_free(&args);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

/* Only what the caller gives is in the inputSchema; arrays carry items
 * and maxItems. */
static void test_schema(void) {
    char *cfg = fixture_config();
    mcpg_instance *inst = load(cfg);
    free(cfg);
    mcpg_buf out = {0};
    MCPG_REQUIRE(mcpg_fakehost_list(fh, inst, MCPG_METHOD_TOOLS_LIST, &out) == 0, "list_tools");
    json_t *a = json_loads(out.data, JSON_DECODE_INT_AS_REAL, NULL);
    MCPG_REQUIRE(json_is_array(a) && json_array_size(a) == 21, "21 tools: %s", out.data);
    json_t *flip = json_object_get(json_array_get(a, 1), "inputSchema");
    json_t *want = json_loads("{\"type\":\"object\",\"properties\":{\"xs\":{\"type\":\"array\","
                              "\"items\":{\"type\":\"integer\",\"minimum\":-128,\"maximum\":127},"
                              "\"maxItems\":4,\"description\":\"flipped in place\"}},"
                              "\"required\":[\"xs\"],\"additionalProperties\":false}",
                              JSON_DECODE_INT_AS_REAL, NULL);
    MCPG_CHECK(json_equal(flip, want), "flip_i8 schema: %s", out.data);
    json_decref(want);
    json_t *fill = json_object_get(json_array_get(a, 20), "inputSchema");
    want = json_loads("{\"type\":\"object\",\"properties\":{},\"required\":[],"
                      "\"additionalProperties\":false}", 0, NULL);
    MCPG_CHECK(json_equal(fill, want), "fill takes no arguments: %s", out.data);
    json_decref(want);
    json_decref(a);
    mcpg_buf_free(&out);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

#define ONE(params) "{\"functions\":[" FN("f", "libc.so.6", "memset", "void", params) "]}"

static void test_config_errors(void) {
    static const char *const cases[][2] = {
        {ONE(P("buf", "buffer")),
         "functions[0].params[0].size: is required for buffer"},
        {ONE(PX("buf", "buffer", "\"size\":0")),
         "functions[0].params[0].size: expected an integer from 1 to 1048576"},
        {ONE(PX("buf", "buffer", "\"size\":1048577")),
         "functions[0].params[0].size: expected an integer from 1 to 1048576"},
        {ONE(PX("buf", "buffer", "\"size\":4,\"encoding\":\"hex\"")),
         "functions[0].params[0].encoding: expected \"text\" or \"base64\""},
        {ONE(P("xs", "array")),
         "functions[0].params[0].of: is required for array"},
        {ONE(PX("xs", "array", "\"of\":\"bool\"")),
         "functions[0].params[0].of: expected one of int8, int16, int32, int64, "
         "uint8, uint16, uint32, uint64, float, double"},
        {ONE(PX("xs", "array", "\"of\":\"double\",\"max_length\":65537")),
         "functions[0].params[0].max_length: expected an integer from 1 to 65536"},
        {ONE(PX("xs", "array", "\"of\":\"double\",\"length\":2,\"inout\":true")),
         "functions[0].params[0].length: an output array (length) takes neither "
         "max_length nor inout"},
        {ONE(PX("x", "double", "\"size\":4")),
         "functions[0].params[0].size: applies only to a buffer, not to double"},
        {ONE(PX("x", "string", "\"inout\":true")),
         "functions[0].params[0].inout: applies only to an array, not to string"},
        {ONE(PX("b", "buffer", "\"size\":4,\"size_of\":\"b\"")),
         "functions[0].params[0].size_of: applies only to an integer type, not to buffer"},
        {ONE(SIZE_OF("n", "uint64", "nope")),
         "functions[0].params[0].size_of: no parameter \"nope\""},
        {ONE(PX("b", "buffer", "\"size\":4") "," LENGTH_OF("n", "uint64", "b")),
         "functions[0].params[1].length_of: \"b\" is not an array"},
        {ONE(P("x", "double") "," SIZE_OF("n", "uint64", "x")),
         "functions[0].params[1].size_of: \"x\" is neither a buffer nor an array"},
        {ONE(PX("b", "buffer", "\"size\":1024") "," SIZE_OF("n", "uint8", "b")),
         "functions[0].params[1].type: uint8 cannot hold 1024, the most bytes of "
         "\"b\" can take"},
        {ONE(PX("xs", "array", "\"of\":\"int8\"") "," LENGTH_OF("n", "uint16", "xs")),
         "functions[0].params[1].type: uint16 cannot hold 65536, the most elements "
         "of \"xs\" can take"},
        {ONE(PX("xs", "array", "\"of\":\"double\",\"max_length\":100") ","
             SIZE_OF("n", "uint8", "xs")),
         "functions[0].params[1].type: uint8 cannot hold 800, the most bytes of "
         "\"xs\" can take"},
        {ONE(PX("n", "uint64", "\"size_of\":\"b\",\"length_of\":\"b\"")),
         "functions[0].params[0].length_of: give size_of or length_of, not both"},
        {ONE(PX("result", "buffer", "\"size\":4")),
         "functions[0].params[0].name: an output cannot be named \"result\""},
        {ONE(PX("a", "buffer", "\"size\":1048576") "," PX("b", "buffer", "\"size\":1")),
         "functions[0].params: the outputs take 1048577 bytes, more than 1048576"},
        {ONE(PX("xs", "array", "\"of\":\"double\",\"lenght\":2")),
         "functions[0].params[0].lenght: unknown key (did you mean \"length\"?)"},
        {"{\"functions\":[" FN("f", "libc.so.6", "memset", "buffer", "") "]}",
         "functions[0].returns: expected one of int8, int16, int32, int64, uint8, "
         "uint16, uint32, uint64, float, double, bool, string, void"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_config_error(cases[i][0], cases[i][1]);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 3,
                 "usage: test_ffi_memory path/to/backend_ffi.so path/to/libffi_fixture.so");
    so_path = argv[1];
    fixture = argv[2];
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    test_buffers(0);
    test_buffers(1);
    test_arrays(0);
    test_arrays(1);
    test_array_bound();
    test_schema();
    test_config_errors();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_ffi_memory");
}
