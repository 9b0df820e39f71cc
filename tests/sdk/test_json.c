/* Unit tests of the SDK's JSON scanner (sdk/src/json.c).
 *
 * Plain C: each MCPG_CHECK that fails prints where and why, and the process exits
 * nonzero. Besides the hand-written tables, a seeded mutation run compares the
 * scanner's verdict with jansson's on thousands of near-valid documents, since
 * the cases one forgets to write are the ones a differential test finds. */
#include <mcpg/check.h>
#include <mcpg/sdk.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A literal with its exact length, so cases may hold NUL bytes. */
typedef struct text {
    const char *s;
    size_t n;
} text;
#define T(lit) {lit, sizeof(lit) - 1}

/* Print a case readably when it fails: bytes outside ASCII as \xNN. */
static const char *show(const char *s, size_t n) {
    static char out[512];
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < sizeof out; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) out[o++] = (char)c;
        else o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", c);
    }
    out[o] = '\0';
    return out;
}

static const text valid[] = {
    T("0"), T("-0"), T("1"), T("-1"), T("1.5"), T("-0.0e0"), T("1e10"), T("1E+2"),
    T("1e-2"), T("123456789012345678901234567890"), T("true"), T("false"), T("null"),
    T(" \t\r\n null \n"), T("\"\""), T("\"abc\""), T("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\""),
    T("\"\\u0041\\u00e9\\u20AC\""), T("\"\\ud83d\\ude00\""), T("\"\\u0000\""),
    T("\"\xc3\xa9\""), T("\"\xe2\x82\xac\""), T("\"\xf0\x9f\x98\x80\""),
    T("\"\xf4\x8f\xbf\xbf\""), T("\"\xed\x9f\xbf\""), T("\"\xee\x80\x80\""), T("\"\x7f\""),
    T("\"a long string, longer than eight bytes, to use the word-at-a-time path\""),
    T("\"0123456\\n89abcdef\xc3\xa9xyz\""), T("{}"), T("[]"), T("[1,2,3]"), T("[[[]]]"),
    T("{\"a\":{\"b\":[true,false,null]}}"), T("{ \"a\" : 1 , \"b\" : [ ] }"),
    T("[\"x\",{\"y\":-1.25e-3},null]"), T("{\"\":0}"), T("{\"a\":1,\"a\":2}"),
};

static const text invalid[] = {
    T(""), T(" "), T("01"), T("-"), T("+1"), T("1."), T(".5"), T("1e"), T("1e+"), T("- 1"),
    T("0x10"), T("NaN"), T("Infinity"), T("-Infinity"), T("tru"), T("truee"), T("nul"),
    T("True"), T("\"abc"), T("\"\\x\""), T("\"\\u12\""), T("\"\\u12G4\""), T("\"\\ud800\""),
    T("\"\\udc00\""), T("\"\\ud800\\u0041\""), T("\"\\ud800\\n\""), T("\"\\ud83d\\ude0\""),
    T("\"a\x01" "b\""), T("\"\t\""), T("\"\x80\""), T("\"\xc0\xaf\""), T("\"\xc1\xbf\""),
    T("\"\xe0\x80\xaf\""), T("\"\xed\xa0\x80\""), T("\"\xf0\x8f\xbf\xbf\""),
    T("\"\xf4\x90\x80\x80\""), T("\"\xf5\x80\x80\x80\""), T("\"\xc3\""), T("\"\xe2\x82\""),
    T("\"\xff\""), T("[1,]"), T("[,1]"), T("{\"a\":1,}"), T("{\"a\"}"), T("{a:1}"),
    T("{\"a\":1 \"b\":2}"), T("[1 2]"), T("{1:2}"), T("["), T("]"), T("{"), T("}"), T("1 2"),
    T("[1]]"), T("\xef\xbb\xbf{}"), T("/*c*/1"), T("'a'"), T("[1\0]"), T("\0"), T("{\"a\":}"),
    T("{\"a\"::1}"), T("[\"a\",]"), T("\"\\\""), T("1\x0b"), T("\x0c" "1"), T("[-]"),
};

static void test_tables(void) {
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
        MCPG_CHECK(mcpg_json_validate(valid[i].s, valid[i].n) == 0, "valid case %zu: %s", i,
                   show(valid[i].s, valid[i].n));
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        MCPG_CHECK(mcpg_json_validate(invalid[i].s, invalid[i].n) == MCPG_EPROTO,
                   "invalid case %zu: %s", i, show(invalid[i].s, invalid[i].n));
    MCPG_CHECK(mcpg_json_validate(NULL, 0) == MCPG_EPROTO, "NULL text");
}

/* The input is (ptr, len), not a C string: bytes past n are never read. */
static void test_not_terminated(void) {
    char buf[3] = {'1', '2', 'x'};
    MCPG_CHECK(mcpg_json_validate(buf, 2) == 0, "\"12\" inside a longer buffer");
    MCPG_CHECK(mcpg_json_validate("[1]x", 3) == 0, "prefix of a buffer");
    MCPG_CHECK(mcpg_json_validate("\"ab\"", 3) == MCPG_EPROTO, "string cut by n");
}

static const char sample[] =
    "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
    "\"arguments\":{\"text\":\"h\\u00e9llo \\ud83d\\ude00 w\xc3\xb6rld\",\"n\":-12.5e3,"
    "\"ok\":true,\"none\":null,\"list\":[1,[2,[]],{}],\"no\":false}}}";

/* Every strict prefix of an object is malformed: the scanner must notice
 * wherever the text stops (and never read past n, which ASan checks). */
static void test_truncation(void) {
    size_t n = sizeof sample - 1;
    MCPG_CHECK(mcpg_json_validate(sample, n) == 0, "the sample itself");
    for (size_t k = 0; k < n; k++) {
        char *copy = malloc(k ? k : 1); /* exact size, so ASan sees overreads */
        memcpy(copy, sample, k);
        MCPG_CHECK(mcpg_json_validate(copy, k) == MCPG_EPROTO, "prefix of %zu bytes", k);
        size_t pos = 0;
        int rc = mcpg_json_value(copy, k, &pos, NULL);
        MCPG_CHECK(rc == (k == 0 ? 0 : MCPG_EPROTO), "json_value on prefix %zu: %d", k, rc);
        free(copy);
    }
}

static void nest_text(char *buf, int depth) {
    for (int i = 0; i < depth; i++) buf[i] = '[';
    for (int i = 0; i < depth; i++) buf[depth + i] = ']';
}

static void test_depth(void) {
    char buf[2 * (MCPG_JSON_MAX_DEPTH + 1)];
    nest_text(buf, MCPG_JSON_MAX_DEPTH);
    MCPG_CHECK(mcpg_json_validate(buf, 2 * MCPG_JSON_MAX_DEPTH) == 0, "depth %d",
               MCPG_JSON_MAX_DEPTH);
    nest_text(buf, MCPG_JSON_MAX_DEPTH + 1);
    MCPG_CHECK(mcpg_json_validate(buf, sizeof buf) == MCPG_EPROTO, "depth %d",
               MCPG_JSON_MAX_DEPTH + 1);

    /* Mixed objects and arrays, to exercise the level stack both ways. */
    char obj[8 * MCPG_JSON_MAX_DEPTH];
    size_t o = 0;
    for (int i = 0; i < MCPG_JSON_MAX_DEPTH; i++)
        o += (size_t)sprintf(obj + o, i % 2 ? "[" : "{\"k\":");
    obj[o++] = '1';
    for (int i = MCPG_JSON_MAX_DEPTH - 1; i >= 0; i--) obj[o++] = i % 2 ? ']' : '}';
    MCPG_CHECK(mcpg_json_validate(obj, o) == 0, "mixed nesting at the limit");

    /* A member's value inside an object has one level less to spend. */
    char wrap[2 * MCPG_JSON_MAX_DEPTH + 16];
    int w = sprintf(wrap, "{\"a\":");
    nest_text(wrap + w, MCPG_JSON_MAX_DEPTH);
    w += 2 * MCPG_JSON_MAX_DEPTH;
    wrap[w++] = '}';
    mcpg_json_span v;
    MCPG_CHECK(mcpg_json_object_get(wrap, (size_t)w, "a", &v) == MCPG_EPROTO, "member too deep");
    MCPG_CHECK(mcpg_json_validate(wrap, (size_t)w) == MCPG_EPROTO, "whole text too deep");
}

static void test_value_sequence(void) {
    const char *s = " 1 [2] {\"a\":3}\"x\" true ";
    size_t n = strlen(s), pos = 0;
    mcpg_json_span v;
    static const uint32_t types[] = {MCPG_JSON_NUMBER, MCPG_JSON_ARRAY, MCPG_JSON_OBJECT,
                                     MCPG_JSON_STRING, MCPG_JSON_TRUE};
    for (size_t i = 0; i < 5; i++) {
        MCPG_CHECK(mcpg_json_value(s, n, &pos, &v) == 1, "value %zu", i);
        MCPG_CHECK(v.type == types[i], "value %zu has type %u", i, v.type);
    }
    MCPG_CHECK(mcpg_json_value(s, n, &pos, &v) == 0 && pos == n, "end of the sequence");
    pos = 0;
    MCPG_CHECK(mcpg_json_value("12ab", 4, &pos, &v) == MCPG_EPROTO, "number not at a boundary");
    pos = 0;
    MCPG_CHECK(mcpg_json_value("nullx", 5, &pos, &v) == MCPG_EPROTO, "literal not at a boundary");
    pos = 0;
    MCPG_CHECK(mcpg_json_value("12,", 3, &pos, &v) == 1 && pos == 2 && v.n == 2, "12 then comma");
    pos = 9;
    MCPG_CHECK(mcpg_json_value("1", 1, &pos, &v) == MCPG_EPROTO, "pos past n");
}

static void test_spans(void) {
    mcpg_json_span v;
    const char *s = "{\"s\":\"a\\nb\",\"p\":\"plain\",\"o\":{\"x\":[1]},\"n\":-3.5}";
    size_t n = strlen(s);
    MCPG_CHECK(mcpg_json_object_get(s, n, "s", &v) == 1, "get s");
    MCPG_CHECK(v.type == MCPG_JSON_STRING && v.escaped == 1 && v.n == 4 && !memcmp(v.p, "a\\nb", 4),
               "string span between the quotes, escaped");
    MCPG_CHECK(mcpg_json_object_get(s, n, "p", &v) == 1 && v.escaped == 0 && v.n == 5, "plain");
    MCPG_CHECK(mcpg_json_object_get(s, n, "o", &v) == 1, "get o");
    MCPG_CHECK(v.type == MCPG_JSON_OBJECT && v.n == 9 && !memcmp(v.p, "{\"x\":[1]}", 9),
               "object span is its whole text (%zu)", v.n);
    MCPG_CHECK(mcpg_json_object_get(s, n, "n", &v) == 1 && v.type == MCPG_JSON_NUMBER && v.n == 4,
               "number span");
}

static void test_object_iteration(void) {
    const char *s = " { \"a\" : 1 , \"b\\u0063\" : [true] , \"\" : {} } \n";
    size_t n = strlen(s), iter = 0;
    mcpg_json_span k, v;
    MCPG_CHECK(mcpg_json_object_next(s, n, &iter, &k, &v) == 1 && mcpg_json_string_eq(&k, "a", 1) &&
                   v.type == MCPG_JSON_NUMBER, "member a");
    MCPG_CHECK(mcpg_json_object_next(s, n, &iter, &k, &v) == 1 &&
                   mcpg_json_string_eq(&k, "bc", 2) && v.type == MCPG_JSON_ARRAY,
               "member bc");
    MCPG_CHECK(mcpg_json_object_next(s, n, &iter, &k, &v) == 1 && k.n == 0 &&
                   v.type == MCPG_JSON_OBJECT, "member \"\"");
    MCPG_CHECK(mcpg_json_object_next(s, n, &iter, &k, &v) == 0, "end");
    MCPG_CHECK(mcpg_json_object_next(s, n, &iter, &k, &v) == 0, "still the end");

    iter = 0;
    MCPG_CHECK(mcpg_json_object_next("{}", 2, &iter, &k, &v) == 0, "empty object");
    iter = 0;
    MCPG_CHECK(mcpg_json_object_next("[1]", 3, &iter, &k, &v) == MCPG_EPROTO, "not an object");
    iter = 0;
    MCPG_CHECK(mcpg_json_object_next("{\"a\":1,}", 8, &iter, &k, &v) == 1, "first of a bad object");
    MCPG_CHECK(mcpg_json_object_next("{\"a\":1,}", 8, &iter, &k, &v) == MCPG_EPROTO,
               "trailing comma");
    iter = 0;
    MCPG_CHECK(mcpg_json_object_next("{\"a\":01}", 8, &iter, &k, &v) == MCPG_EPROTO, "bad value");
    iter = 0;
    MCPG_CHECK(mcpg_json_object_next("{} x", 4, &iter, &k, &v) == MCPG_EPROTO, "garbage after");
    iter = 0;
    MCPG_CHECK(mcpg_json_object_next("{\"a\":1}", 7, &iter, NULL, NULL) == 1, "NULL outputs");
}

static void test_array_iteration(void) {
    const char *s = "[ 1, \"two\" ,[3], {\"4\":4} ]";
    size_t n = strlen(s), iter = 0, count = 0;
    mcpg_json_span v;
    int rc;
    static const uint32_t types[] = {MCPG_JSON_NUMBER, MCPG_JSON_STRING, MCPG_JSON_ARRAY,
                                     MCPG_JSON_OBJECT};
    while ((rc = mcpg_json_array_next(s, n, &iter, &v)) == 1) {
        MCPG_CHECK(count < 4 && v.type == types[count], "element %zu type %u", count, v.type);
        count++;
    }
    MCPG_CHECK(rc == 0 && count == 4, "four elements then end (rc %d)", rc);
    iter = 0;
    MCPG_CHECK(mcpg_json_array_next("[]", 2, &iter, &v) == 0, "empty array");
    iter = 0;
    MCPG_CHECK(mcpg_json_array_next("{}", 2, &iter, &v) == MCPG_EPROTO, "not an array");
    iter = 0;
    MCPG_CHECK(mcpg_json_array_next("[1 2]", 5, &iter, &v) == MCPG_EPROTO, "missing comma");
}

static void test_object_get(void) {
    const char *s = "{\"m\\u0065thod\":\"x\",\"id\":1,\"id\":2,\"a\\u0000b\":3}";
    size_t n = strlen(s);
    mcpg_json_span v;
    MCPG_CHECK(mcpg_json_object_get(s, n, "method", &v) == 1, "escaped key matches decoded");
    MCPG_CHECK(mcpg_json_object_get(s, n, "id", &v) == 1 && v.n == 1 && v.p[0] == '1',
               "duplicate keys: the first wins");
    MCPG_CHECK(mcpg_json_object_get(s, n, "a", &v) == 0, "a NUL in a key never matches a prefix");
    MCPG_CHECK(mcpg_json_object_get(s, n, "nope", &v) == 0, "absent");
    MCPG_CHECK(mcpg_json_object_get(s, n, "metho", &v) == 0, "prefix of a key");
    MCPG_CHECK(mcpg_json_object_get("{\"a\":1", 6, "b", &v) == MCPG_EPROTO, "malformed");
    MCPG_CHECK(mcpg_json_object_get("[]", 2, "a", &v) == MCPG_EPROTO, "not an object");
    MCPG_CHECK(mcpg_json_object_get("{\"a\":1}", 7, "a", NULL) == 1, "NULL out");
}

static mcpg_json_span str_span(const char *raw, int escaped) {
    mcpg_json_span s = {raw, strlen(raw), MCPG_JSON_STRING, (uint32_t)escaped};
    return s;
}

static void test_string_eq(void) {
    mcpg_json_span s = str_span("tools/call", 0);
    MCPG_CHECK(mcpg_json_string_eq(&s, "tools/call", 10) == 1, "plain equal");
    MCPG_CHECK(mcpg_json_string_eq(&s, "tools/cal", 9) == 0, "plain shorter");
    MCPG_CHECK(mcpg_json_string_eq(&s, "tools/calL", 10) == 0, "plain differs");
    s = str_span("tools\\/call", 1);
    MCPG_CHECK(mcpg_json_string_eq(&s, "tools/call", 10) == 1, "escaped solidus");
    MCPG_CHECK(mcpg_json_string_eq(&s, "tools/cal", 9) == 0, "escaped, shorter literal");
    MCPG_CHECK(mcpg_json_string_eq(&s, "tools/calll", 11) == 0, "escaped, longer literal");
    s = str_span("\\u00e9\\ud83d\\ude00", 1);
    MCPG_CHECK(mcpg_json_string_eq(&s, "\xc3\xa9\xf0\x9f\x98\x80", 6) == 1, "escaped non-ASCII");
    s = str_span("", 0);
    MCPG_CHECK(mcpg_json_string_eq(&s, "", 0) == 1, "empty");
    s.type = MCPG_JSON_NUMBER;
    MCPG_CHECK(mcpg_json_string_eq(&s, "", 0) == 0, "not a string");
}

static void test_decode(void) {
    char dst[64];
    size_t len = 99;
    mcpg_json_span s = str_span("A\\u00e9\\u20ac\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t!", 1);
    const char want[] = "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"\\/\b\f\n\r\t!";
    MCPG_CHECK(mcpg_json_string_decode(&s, dst, sizeof dst, &len) == 0, "decode");
    MCPG_CHECK(len == sizeof want - 1 && !memcmp(dst, want, sizeof want), "decoded (len %zu)", len);
    MCPG_CHECK(mcpg_json_string_decode(&s, dst, sizeof want, &len) == 0, "exact capacity");
    MCPG_CHECK(mcpg_json_string_decode(&s, dst, sizeof want - 1, &len) == MCPG_ERANGE, "one short");
    MCPG_CHECK(mcpg_json_string_decode(&s, dst, 2, &len) == MCPG_ERANGE, "far too short");
    MCPG_CHECK(mcpg_json_string_decode(&s, dst, 0, &len) == MCPG_ERANGE, "no room at all");

    s = str_span("plain", 0);
    MCPG_CHECK(mcpg_json_string_decode(&s, dst, 6, &len) == 0 && len == 5 && !strcmp(dst, "plain"),
               "unescaped copy");
    MCPG_CHECK(mcpg_json_string_decode(&s, dst, 5, &len) == MCPG_ERANGE, "room for the NUL");

    s = str_span("a\\u0000b", 1);
    MCPG_CHECK(mcpg_json_string_decode(&s, dst, sizeof dst, &len) == 0 && len == 3 && dst[1] == 0 &&
                   dst[2] == 'b', "an escaped NUL decodes to a NUL byte, counted in len");

    s = str_span("bad\\q", 1);
    MCPG_CHECK(mcpg_json_string_decode(&s, dst, sizeof dst, &len) == MCPG_EPROTO, "bad escape");
    s.type = MCPG_JSON_NUMBER;
    MCPG_CHECK(mcpg_json_string_decode(&s, dst, sizeof dst, &len) == MCPG_EPROTO, "not a string");

    /* Spans straight from the scanner decode too. */
    mcpg_json_span v;
    MCPG_CHECK(mcpg_json_object_get(sample, sizeof sample - 1, "params", &v) == 1, "params");
    MCPG_CHECK(mcpg_json_object_get(v.p, v.n, "arguments", &v) == 1, "arguments");
    MCPG_CHECK(mcpg_json_object_get(v.p, v.n, "text", &v) == 1, "text");
    MCPG_CHECK(mcpg_json_string_decode(&v, dst, sizeof dst, &len) == 0 &&
                   !strcmp(dst, "h\xc3\xa9llo \xf0\x9f\x98\x80 w\xc3\xb6rld"),
               "sample text: %s", dst);
}

typedef struct int_case {
    const char *s;
    int rc;
    int64_t v;
} int_case;

static void test_int64(void) {
    static const int_case cases[] = {
        {"0", 0, 0}, {"-0", 0, 0}, {"7", 0, 7}, {"-42", 0, -42},
        {"9223372036854775807", 0, INT64_MAX}, {"-9223372036854775808", 0, INT64_MIN},
        {"9223372036854775808", MCPG_ERANGE, 0}, {"-9223372036854775809", MCPG_ERANGE, 0},
        {"18446744073709551616", MCPG_ERANGE, 0}, {"99999999999999999999999", MCPG_ERANGE, 0},
        {"1.0", MCPG_EPROTO, 0}, {"1e3", MCPG_EPROTO, 0}, {"01", MCPG_EPROTO, 0},
        {"-", MCPG_EPROTO, 0}, {"", MCPG_EPROTO, 0}, {"+1", MCPG_EPROTO, 0},
        {"12x", MCPG_EPROTO, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcpg_json_span s = {cases[i].s, strlen(cases[i].s), MCPG_JSON_NUMBER, 0};
        int64_t v = 12345;
        int rc = mcpg_json_int64(&s, &v);
        MCPG_CHECK(rc == cases[i].rc, "int64(%s) rc %d, want %d", cases[i].s, rc, cases[i].rc);
        if (rc == 0) MCPG_CHECK(v == cases[i].v, "int64(%s) = %lld", cases[i].s, (long long)v);
    }
    mcpg_json_span s = {"1", 1, MCPG_JSON_STRING, 0};
    int64_t v;
    MCPG_CHECK(mcpg_json_int64(&s, &v) == MCPG_EPROTO, "a string is not a number");
    mcpg_json_span id;
    MCPG_CHECK(mcpg_json_object_get(sample, sizeof sample - 1, "id", &id) == 1 &&
                   mcpg_json_int64(&id, &v) == 0 && v == 7, "id from the sample");
}

static void check_escape(const char *in, size_t n, const char *want) {
    char out[6 * 64];
    size_t got = mcpg_json_escape(out, in, n);
    MCPG_CHECK(got == strlen(want) && !memcmp(out, want, got), "escape(%s) = %.*s, want %s",
               show(in, n), (int)got, out, want);
}

static void test_escape(void) {
    check_escape("", 0, "");
    check_escape("plain text", 10, "plain text");
    check_escape("a\"b\\c/d", 7, "a\\\"b\\\\c/d");
    check_escape("\n\r\t\b\f", 5, "\\n\\r\\t\\b\\f");
    check_escape("\x01\x1f\x00", 3, "\\u0001\\u001f\\u0000");
    check_escape("\x7f", 1, "\x7f");
    check_escape("h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 12,
                 "h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"); /* valid UTF-8 passes */
    check_escape("\xff", 1, "\\ufffd");
    check_escape("a\xc3", 2, "a\\ufffd");
    check_escape("\xe2\x82" "A", 3, "\\ufffdA");           /* one U+FFFD for a cut sequence */
    check_escape("\xf0\x9f\x98", 3, "\\ufffd");
    check_escape("\xed\xa0\x80", 3, "\\ufffd\\ufffd\\ufffd"); /* a surrogate: each byte */
    check_escape("\xc0\xaf", 2, "\\ufffd\\ufffd");          /* overlong */
    check_escape("\xf4\x90\x80\x80", 4, "\\ufffd\\ufffd\\ufffd\\ufffd");
    check_escape("0123456789\"0123456789", 21, "0123456789\\\"0123456789");

    /* The 6*n bound holds in the worst case and the output always re-scans as
     * a valid string. */
    unsigned char in[256];
    char out[6 * 256 + 2];
    for (int i = 0; i < 256; i++) in[i] = (unsigned char)i;
    size_t got = mcpg_json_escape(out + 1, (const char *)in, sizeof in);
    MCPG_CHECK(got <= 6 * sizeof in, "bound: %zu", got);
    out[0] = '"';
    out[got + 1] = '"';
    MCPG_CHECK(mcpg_json_validate(out, got + 2) == 0, "escaped bytes form a valid string");
    memset(in, 1, 32);
    MCPG_CHECK(mcpg_json_escape(out, (const char *)in, 32) == 6 * 32, "all control: exactly 6n");
}

/* Escape then decode gives back any valid UTF-8 text. */
static void test_round_trip(void) {
    const char *texts[] = {"", "x", "quote \" back \\ nl \n tab \t nul",
                           "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
                           "a longer line that crosses the eight byte stride \x01 twice \x1f"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t n = strlen(texts[i]), len = 0;
        char esc[6 * 128 + 2], dec[128];
        esc[0] = '"';
        size_t m = mcpg_json_escape(esc + 1, texts[i], n);
        esc[m + 1] = '"';
        size_t pos = 0;
        mcpg_json_span s;
        MCPG_CHECK(mcpg_json_value(esc, m + 2, &pos, &s) == 1, "scan escaped %zu", i);
        MCPG_CHECK(mcpg_json_string_decode(&s, dec, sizeof dec, &len) == 0 && len == n &&
                       !memcmp(dec, texts[i], n), "round trip %zu", i);
        MCPG_CHECK(mcpg_json_string_eq(&s, texts[i], n) == 1, "eq after round trip %zu", i);
    }
}

/* ---- differential: the scanner against jansson on mutated documents ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static const char alphabet[] = "{}[]\":,\\ 0123456789-+.eEtrufalsn\x01\x1f\x80\xc3\xa9\xed\xf4\xff";

static void mutate(char *buf, size_t *n, size_t cap) {
    int edits = 1 + (int)(rnd() % 3);
    for (int e = 0; e < edits && *n > 1; e++) {
        size_t at = rnd() % *n;
        char c = alphabet[rnd() % (sizeof alphabet - 1)];
        switch (rnd() % 3) {
        case 0: buf[at] = c; break;
        case 1: /* delete */
            memmove(buf + at, buf + at + 1, *n - at - 1);
            (*n)--;
            break;
        default: /* insert */
            if (*n + 1 > cap) break;
            memmove(buf + at + 1, buf + at, *n - at);
            buf[at] = c;
            (*n)++;
        }
    }
}

/* jansson refuses numbers it cannot represent; RFC 8259 does not. */
static int jansson_range_error(const json_error_t *err) {
    return strstr(err->text, "overflow") || strstr(err->text, "too big");
}

static void test_differential(void) {
    const size_t rounds = 200000;
    size_t agree = 0, valid_seen = 0, skipped = 0;
    for (size_t r = 0; r < rounds; r++) {
        char buf[sizeof sample + 8];
        size_t n = sizeof sample - 1;
        memcpy(buf, sample, n);
        mutate(buf, &n, sizeof buf);
        json_error_t err;
        json_t *j = json_loadb(buf, n, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
                               &err);
        int ours = mcpg_json_validate(buf, n);
        if (!j && jansson_range_error(&err)) {
            skipped++;
            continue;
        }
        MCPG_CHECK((j != NULL) == (ours == 0), "mutation %zu: jansson %s (%s), ours %d: %s", r,
                   j ? "accepts" : "refuses", j ? "" : err.text, ours, show(buf, n));
        agree += (j != NULL) == (ours == 0);
        valid_seen += j != NULL;
        json_decref(j);
        if (mcpg_check_failures() > 20) break;
    }
    printf("differential: %zu/%zu agree (%zu valid, %zu skipped as range errors)\n", agree,
           rounds - skipped, valid_seen, skipped);
}

/* The trusted walk must find exactly what the validating one finds. */
static int same_span(const mcpg_json_span *a, const mcpg_json_span *b) {
    return a->p == b->p && a->n == b->n && a->type == b->type && a->escaped == b->escaped;
}

static void compare_walks(const char *s, size_t n) {
    size_t it1 = 0, it2 = 0;
    mcpg_json_span k1, v1, k2, v2;
    for (int guard = 0; guard < 64; guard++) {
        int r1 = mcpg_json_object_next(s, n, &it1, &k1, &v1);
        int r2 = mcpg_json_object_next_trusted(s, n, &it2, &k2, &v2);
        MCPG_CHECK(r1 == r2, "trusted walk of %s: %d vs %d", show(s, n), r2, r1);
        if (r1 != 1 || r2 != 1) return;
        MCPG_CHECK(same_span(&k1, &k2) && same_span(&v1, &v2), "trusted spans differ in %s",
                   show(s, n));
    }
}

static void test_trusted(void) {
    static const char *objects[] = {
        "{}", " { } ", "{\"a\":1}", "{ \"a\" : 1 , \"b\\u0063\" : [true] , \"\" : {} } \n",
        "{\"s\":\"x\\\"}y\",\"o\":{\"n\":[1,{\"d\":\"]}\"}],\"e\":-1.5e3},\"t\":true,\"f\":false,\"z\":null}",
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
        "\"arguments\":{\"message\":\"hi\"},\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":"
        "\"2026-07-28\"}}}",
    };
    for (size_t i = 0; i < sizeof objects / sizeof *objects; i++)
        compare_walks(objects[i], strlen(objects[i]));
    for (size_t i = 0; i < sizeof valid / sizeof *valid; i++) {
        size_t j = 0;
        while (j < valid[i].n && valid[i].s[j] == ' ') j++;
        if (j < valid[i].n && valid[i].s[j] == '{') compare_walks(valid[i].s, valid[i].n);
    }
    mcpg_json_span v;
    const char *o = objects[5];
    MCPG_CHECK(mcpg_json_object_get_trusted(o, strlen(o), "params", &v) == 1 &&
                   v.type == MCPG_JSON_OBJECT, "get_trusted params");
    MCPG_CHECK(mcpg_json_object_get_trusted(o, strlen(o), "nope", &v) == 0, "get_trusted missing");
    /* invalid text: any answer, but no read outside it (ASan/valgrind watch) */
    static const char *bad[] = {"{", "{\"", "{\"a", "{\"a\":", "{\"a\":\"", "{\"a\":[", "{\"a\":1,"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t n = strlen(bad[i]), it = 0;
        char *copy = malloc(n); /* exact size: no terminator to lean on */
        memcpy(copy, bad[i], n);
        mcpg_json_span k;
        for (int g = 0; g < 8 && mcpg_json_object_next_trusted(copy, n, &it, &k, &v) == 1; g++) {
        }
        free(copy);
    }
}

/* mcpg_json_unique: a name twice in any object, however deep and however
 * many containers sit beside it (an object's nested values are remembered
 * by its first walk up to a few, then walked again). */
static void test_unique(void) {
    static const struct {
        const char *text;
        int want;
        const char *dup;
    } cases[] = {
        {"{\"a\":1,\"b\":2}", 0, NULL},
        {"{\"a\":1,\"a\":2}", 1, "a"},
        {"{\"a\":1,\"\\u0061\":2}", 1, NULL},
        {"{\"x\":{\"y\":[{\"q\":1,\"q\":2}]}}", 1, "q"},
        {"{\"o1\":{},\"o2\":{\"d\":1,\"d\":1}}", 1, "d"},
        /* nine containers: the ninth is reached by the second walk */
        {"{\"o1\":{},\"o2\":[],\"o3\":{},\"o4\":[],\"o5\":{},\"o6\":[],\"o7\":{},\"o8\":[],"
         "\"o9\":{\"z\":1,\"z\":2}}", 1, "z"},
        {"{\"o1\":{},\"o2\":[],\"o3\":{},\"o4\":[],\"o5\":{},\"o6\":[],\"o7\":{},\"o8\":[],"
         "\"o9\":{\"z\":1,\"w\":2}}", 0, NULL},
        {"[{\"a\":1},{\"a\":1},{\"b\":[{\"c\":1,\"c\":1}]}]", 1, "c"},
        /* a name again after a nested object that holds other names */
        {"{\"a\":{\"x\":1,\"y\":[1,{\"z\":2}]},\"b\":2,\"a\":3}", 1, "a"},
        /* the same name at different depths, in siblings: no duplicate */
        {"{\"b\":{\"b\":1,\"c\":{\"b\":2}},\"c\":{\"b\":3},\"d\":\"b\"}", 0, NULL},
        {"{\"a\":{\"\\u0061\":1},\"\\u0062\":2,\"b\":3}", 1, NULL},
        {"{\"a\\u0000x\":1}", 2, NULL},
        /* quotes and backslashes inside names and values */
        {"{\"a\\\"\":1,\"a\\\\\":2,\"v\":\"x\\\\\\\"y\",\"a\\\"\":3}", 1, NULL},
        {"{\"a\\\"\":1,\"a\\\\\":2,\"v\":\"\\\\\",\"w\":{\"a\\\"\":1}}", 0, NULL},
        {"{\"k\":\"a \\\" } { \\\\\",\"q\":[\"}\",\"{\"],\"k2\":{}}", 0, NULL},
        /* many names (sorted, not pairwise), nested between them */
        {"{\"n1\":1,\"n2\":{\"n1\":1},\"n3\":1,\"n4\":1,\"n5\":1,\"n6\":1,\"n7\":1,"
         "\"n8\":1,\"n9\":1,\"n10\":1,\"n11\":1,\"n12\":1,\"n13\":1,\"n14\":1,\"n2\":0}",
         1, "n2"},
        {"{\"n1\":1,\"n2\":{\"n1\":1},\"n3\":1,\"n4\":1,\"n5\":1,\"n6\":1,\"n7\":1,"
         "\"n8\":1,\"n9\":1,\"n10\":1,\"n11\":1,\"n12\":1,\"n13\":1,\"n14\":1}",
         0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcpg_json_span dup = {0};
        int rc = mcpg_json_unique(cases[i].text, strlen(cases[i].text), &dup);
        MCPG_CHECK(rc == cases[i].want, "unique(%s): %d, want %d", cases[i].text, rc,
                   cases[i].want);
        if (rc == 1 && cases[i].dup)
            MCPG_CHECK(dup.n == strlen(cases[i].dup) && !memcmp(dup.p, cases[i].dup, dup.n),
                       "unique(%s): the name found is %.*s", cases[i].text, (int)dup.n, dup.p);
        /* the walk over text already validated answers the same */
        mcpg_json_span v;
        size_t pos = 0;
        MCPG_CHECK(mcpg_json_value(cases[i].text, strlen(cases[i].text), &pos, &v) == 1 &&
                       mcpg_json_unique_trusted(&v, NULL) == cases[i].want,
                   "unique_trusted(%s) disagrees", cases[i].text);
    }
}

/* mcpg_json_value_unique: mcpg_json_value's answer and span, with the name
 * check of the same read; text that is not JSON is refused as malformed
 * even when a repeated name comes before the fault. */
static void test_value_unique(void) {
    const char *t = "  {\"a\":{\"b\":1},\"c\":[true]}  ,";
    size_t pos = 0;
    int u = -9;
    mcpg_json_span v, dup;
    MCPG_CHECK(mcpg_json_value_unique(t, strlen(t), &pos, &v, &u, &dup) == 1 && u == 0,
               "value_unique: one unique object");
    MCPG_CHECK(v.type == MCPG_JSON_OBJECT && v.p == t + 2 && v.n == 24 && pos == 26,
               "value_unique: the span and the position past it");
    const char *twice = "{\"a\":1,\"a\":2}";
    pos = 0;
    MCPG_CHECK(mcpg_json_value_unique(twice, strlen(twice), &pos, &v, &u, &dup) == 1 && u == 1 &&
                   dup.n == 1 && dup.p[0] == 'a' && pos == strlen(twice),
               "value_unique: a name twice is found, and the value read to its end");
    const char *broken = "{\"a\":1,\"a\":2,\"b\":01}";
    pos = 0;
    MCPG_CHECK(mcpg_json_value_unique(broken, strlen(broken), &pos, &v, &u, &dup) == MCPG_EPROTO,
               "value_unique: malformed text after a repeated name is malformed");
    MCPG_CHECK(mcpg_json_unique(broken, strlen(broken), NULL) == MCPG_EPROTO,
               "unique: malformed text after a repeated name is malformed");
    const char *nul = "[{\"x\":{\"a\\u0000\":1}},{\"y\":1,\"y\":2}]";
    pos = 0;
    MCPG_CHECK(mcpg_json_value_unique(nul, strlen(nul), &pos, &v, &u, &dup) == 1 && u == 2 &&
                   dup.n == 7,
               "value_unique: the first verdict (a NUL in a name) is the one kept");
    pos = 0;
    MCPG_CHECK(mcpg_json_value_unique("   ", 3, &pos, &v, &u, &dup) == 0, "value_unique: no value");
}

int main(void) {
    test_tables();
    test_not_terminated();
    test_truncation();
    test_depth();
    test_value_sequence();
    test_spans();
    test_object_iteration();
    test_array_iteration();
    test_object_get();
    test_string_eq();
    test_decode();
    test_int64();
    test_escape();
    test_round_trip();
    test_differential();
    test_trusted();
    test_unique();
    test_value_unique();
    if (mcpg_check_failures()) {
        fprintf(stderr, "test_json: %d check(s) failed\n", mcpg_check_failures());
        return 1;
    }
    printf("test_json: ok (%zu valid, %zu invalid table cases)\n", sizeof valid / sizeof valid[0],
           sizeof invalid / sizeof invalid[0]);
    return 0;
}
