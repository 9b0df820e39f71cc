/* lib/audit: the line formatter alone. Every line parses as JSON with the
 * expected fields; timestamps agree with gmtime_r over a wide range; and the
 * cost of one line is printed (a figure, not a pass/fail threshold). */
#define _GNU_SOURCE
#include "audit_format.h"

#include <jansson.h>
#include <mcpg/check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static json_t *parse_line(const char *line, size_t n) {
    MCPG_REQUIRE(n > 1 && line[n - 1] == '\n', "%zu bytes, no final newline", n);
    MCPG_CHECK(memchr(line, '\n', n - 1) == NULL, "exactly one line");
    json_error_t e;
    json_t *o = json_loadb(line, n - 1, 0, &e);
    if (!o) fprintf(stderr, "bad JSON (%s): %.*s\n", e.text, (int)n, line);
    MCPG_REQUIRE(o && json_is_object(o), "one JSON object");
    return o;
}

static json_t *format(const mcpg_audit_event *ev) {
    audit_lens l;
    size_t bound = audit_line_bound(ev, &l);
    char *buf = malloc(bound);
    size_t n = audit_format_line(buf, ev, &l);
    MCPG_REQUIRE(n <= bound, "%zu bytes over a bound of %zu", n, bound);
    json_t *o = parse_line(buf, n);
    free(buf);
    return o;
}

static const char *str(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static void test_allowed(void) {
    mcpg_audit_event ev = {.size = sizeof ev, .name = "mcpg.tool.call.allowed", .seq = 42,
                           .time_us = 1785196800123456LL, .id_json = "7", .id_len = 1,
                           .method = "tools/call", .tool = "echo", .backend = "mock",
                           .principal = "alice", .wire = MCPG_WIRE_STATELESS, .generation = 3};
    json_t *o = format(&ev);
    MCPG_CHECK(strcmp(str(o, "ts"), "2026-07-28T00:00:00.123456Z") == 0, "ts %s", str(o, "ts"));
    MCPG_CHECK(strcmp(str(o, "event"), "mcpg.tool.call.allowed") == 0, "event %s", str(o, "event"));
    MCPG_CHECK(json_integer_value(json_object_get(o, "seq")) == 42, "seq");
    MCPG_CHECK(json_integer_value(json_object_get(o, "id")) == 7, "id");
    MCPG_CHECK(strcmp(str(o, "wire"), "2026-07-28") == 0, "wire %s", str(o, "wire"));
    MCPG_CHECK(json_integer_value(json_object_get(o, "generation")) == 3, "generation");
    /* null fields and the outcome of a not-yet-finished call are omitted */
    MCPG_CHECK(!json_object_get(o, "tenant") && !json_object_get(o, "session"),
               "no tenant, no session");
    MCPG_CHECK(!json_object_get(o, "latency_us") && !json_object_get(o, "error_code"),
               "no outcome yet");
    json_decref(o);
}

static void test_failed_escaped(void) {
    mcpg_audit_event ev = {.size = sizeof ev, .name = "mcpg.tool.call.failed", .seq = 1,
                           .time_us = 0, .id_json = "\"a\\\"b\"", .id_len = 6,
                           .method = "tools/call", .tool = "t\"\\\n\x01\xe2\x82\xac",
                           .tenant = "\xff bad utf8", .session = "s-1",
                           .wire = MCPG_WIRE_LEGACY, .error_code = -32000,
                           .error_message = "backend \"down\"", .latency_us = 1234,
                           .backend_us = 999};
    json_t *o = format(&ev);
    MCPG_CHECK(strcmp(str(o, "ts"), "1970-01-01T00:00:00.000000Z") == 0, "ts %s", str(o, "ts"));
    MCPG_CHECK(strcmp(str(o, "id"), "a\"b") == 0, "id %s", str(o, "id"));
    MCPG_CHECK(strcmp(str(o, "tool"), "t\"\\\n\x01\xe2\x82\xac") == 0, "tool %s", str(o, "tool"));
    MCPG_CHECK(strcmp(str(o, "tenant"), "\xef\xbf\xbd bad utf8") == 0, "tenant %s",
               str(o, "tenant"));
    MCPG_CHECK(strcmp(str(o, "wire"), "2025-11-25") == 0, "wire %s", str(o, "wire"));
    MCPG_CHECK(json_integer_value(json_object_get(o, "error_code")) == -32000, "error_code");
    MCPG_CHECK(strcmp(str(o, "error_message"), "backend \"down\"") == 0, "error_message %s",
               str(o, "error_message"));
    MCPG_CHECK(json_integer_value(json_object_get(o, "latency_us")) == 1234, "latency_us");
    MCPG_CHECK(json_integer_value(json_object_get(o, "backend_us")) == 999, "backend_us");
    json_decref(o);
}

/* An id carrying a raw control byte must not break the line. */
static void test_hostile_id(void) {
    mcpg_audit_event ev = {.size = sizeof ev, .name = "mcpg.tool.call.denied",
                           .id_json = "1\n2", .id_len = 3, .method = "tools/call"};
    json_t *o = format(&ev);
    MCPG_CHECK(strcmp(str(o, "id"), "1\n2") == 0, "id %s", str(o, "id"));
    json_decref(o);
    ev.id_json = NULL;
    ev.id_len = 0;
    o = format(&ev);
    MCPG_CHECK(!json_object_get(o, "id"), "no id");
    json_decref(o);
}

/* ABI 1.2: who, from where, denied by whom, with what; raw JSON inserted as
 * JSON, kept on one line. */
static void test_abi_1_2_fields(void) {
    const char args[] = "{\n  \"q\": \"a\\nb\",\t\"n\": [1, 2]\r\n}";
    const char result[] = "{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}";
    mcpg_audit_event ev = {.size = sizeof ev, .name = "mcpg.tool.call.denied", .seq = 9,
                           .id_json = "3", .id_len = 1, .method = "tools/call", .tool = "rm",
                           .principal = "bob", .tenant = "acme",
                           .roles_json = "[\"admin\",\"ops\"]", .auth_method = "apikey",
                           .peer = "127.0.0.1:5555", .denied_stage = "policy",
                           .denied_by = "rules", .args_json = args, .args_len = sizeof args - 1,
                           .result_json = result, .result_len = sizeof result - 1,
                           .traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                           .gateway_id = "gw-1", .error_code = -32001,
                           .error_message = "denied"};
    json_t *o = format(&ev);
    json_t *roles = json_object_get(o, "roles");
    MCPG_CHECK(json_is_array(roles) && json_array_size(roles) == 2 &&
                   strcmp(json_string_value(json_array_get(roles, 1)), "ops") == 0,
               "roles as an array");
    MCPG_CHECK(strcmp(str(o, "auth_method"), "apikey") == 0, "auth_method");
    MCPG_CHECK(strcmp(str(o, "peer"), "127.0.0.1:5555") == 0, "peer");
    MCPG_CHECK(strcmp(str(o, "denied_stage"), "policy") == 0, "denied_stage");
    MCPG_CHECK(strcmp(str(o, "denied_by"), "rules") == 0, "denied_by");
    MCPG_CHECK(strcmp(str(o, "gateway_id"), "gw-1") == 0, "gateway_id");
    MCPG_CHECK(strncmp(str(o, "traceparent"), "00-0af7", 7) == 0, "traceparent");
    json_t *a = json_object_get(o, "args");
    MCPG_CHECK(json_is_object(a) && strcmp(json_string_value(json_object_get(a, "q")), "a\nb") == 0 &&
                   json_array_size(json_object_get(a, "n")) == 2,
               "args as an object, its newlines gone from the line");
    json_t *r = json_object_get(o, "result");
    MCPG_CHECK(json_is_object(r) && json_is_array(json_object_get(r, "content")), "result");
    json_decref(o);

    /* text that is not JSON stays a string, and the line stays valid */
    ev.args_json = "{\"a\":";
    ev.args_len = 5;
    ev.roles_json = "[\"x\x01\"]";
    o = format(&ev);
    MCPG_CHECK(strcmp(str(o, "args"), "{\"a\":") == 0, "broken args kept as a string");
    MCPG_CHECK(strcmp(str(o, "roles"), "[\"x\x01\"]") == 0, "roles with a control byte");
    json_decref(o);

    /* an ABI 1.1 kernel's event ends before roles_json: nothing after it is read */
    ev.size = (uint32_t)offsetof(mcpg_audit_event, roles_json);
    o = format(&ev);
    MCPG_CHECK(!json_object_get(o, "roles") && !json_object_get(o, "peer") &&
                   !json_object_get(o, "args") && !json_object_get(o, "gateway_id"),
               "no 1.2 field from a 1.1 event");
    json_decref(o);
}

/* Numbers at their limits, checked as text (jansson stops at int64). */
static void test_numbers(void) {
    uint64_t vals[] = {0, 9, 10, 99, 100, 12345, 1000000, UINT64_MAX};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        mcpg_audit_event ev = {.size = sizeof ev, .name = "x.failed", .seq = vals[i],
                               .error_code = INT64_MIN, .latency_us = vals[i]};
        audit_lens l;
        char buf[1024], want[64];
        buf[audit_format_line(buf, &ev, (audit_line_bound(&ev, &l), &l))] = '\0';
        snprintf(want, sizeof want, "\"seq\":%llu,", (unsigned long long)vals[i]);
        MCPG_CHECK(strstr(buf, want), "%s in %s", want, buf);
        snprintf(want, sizeof want, "\"latency_us\":%llu,", (unsigned long long)vals[i]);
        MCPG_CHECK(strstr(buf, want), "%s in %s", want, buf);
        MCPG_CHECK(strstr(buf, "\"error_code\":-9223372036854775808,"),
                   "error_code INT64_MIN in %s", buf);
    }
}

static void test_timestamps(void) {
    char got[32], want[40];
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: years 1970..9999 */
        int64_t us = (int64_t)(x % 253402300800000000ull);
        if (i < 4) us = (int64_t[]){0, 951782400000000LL, 4107542399999999LL, 253402300799999999LL}[i];
        time_t s = (time_t)(us / 1000000);
        struct tm tm;
        gmtime_r(&s, &tm);
        size_t k = strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(want + k, sizeof want - k, ".%06dZ", (int)(us % 1000000));
        size_t n = audit_format_ts(got, us);
        got[n] = '\0';
        MCPG_REQUIRE(strcmp(got, want) == 0, "%lld: %s != %s", (long long)us, got, want);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void bench(void) {
    mcpg_audit_event ev = {.size = sizeof ev, .name = "mcpg.tool.call.completed", .seq = 1,
                           .time_us = 1785196800123456LL, .id_json = "12345", .id_len = 5,
                           .method = "tools/call", .tool = "echo", .backend = "mock",
                           .principal = "alice@example.com", .tenant = "acme",
                           .wire = MCPG_WIRE_STATELESS, .generation = 1,
                           .latency_us = 812, .backend_us = 20};
    char buf[2048];
    size_t total = 0;
    const int n = 2000000;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        ev.seq++;
        ev.time_us += 17;
        audit_lens l;
        MCPG_REQUIRE(audit_line_bound(&ev, &l) <= sizeof buf, "the line fits the buffer");
        total += audit_format_line(buf, &ev, &l);
    }
    double dt = now_s() - t0;
    printf("format: %.0f ns per event (%zu bytes per line)\n", dt / n * 1e9, total / n);
}

int main(void) {
    test_allowed();
    test_failed_escaped();
    test_hostile_id();
    test_abi_1_2_fields();
    test_numbers();
    test_timestamps();
    bench();
    return MCPG_CHECK_EXIT("audit_format");
}
