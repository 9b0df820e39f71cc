/* backend_mock through the SDK's fake host: the built .so, loaded as the
 * kernel would. Usage: test_backend_mock path/to/backend_mock.so */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *so_path;
static mcpg_fakehost *fh;

static mcpg_instance *load(const char *config) {
    return mcpg_fakehost_load_file_or_exit(fh, so_path, "mock", config);
}

static void unload(mcpg_instance *inst) {
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

/* Call a tool and return the decoded text of its one content item (malloc'd),
 * or NULL when it answered an error (*code then holds it). */
static char *call_text(mcpg_instance *inst, const char *tool, const char *args, int64_t *code,
                       int *is_error) {
    char *result = mcpg_fakehost_call_tool(fh, inst, tool, args, 5000, code, NULL, 0);
    char *text = result ? mcpg_fakehost_result_text(result, is_error) : NULL;
    MCPG_REQUIRE(!result || text, "a text item: %s", result);
    free(result);
    return text;
}

static void test_list_and_echo(void) {
    mcpg_instance *inst = load(NULL); /* defaults: one tool, echo */
    mcpg_buf out = {0};
    MCPG_REQUIRE(mcpg_fakehost_list(fh, inst, MCPG_METHOD_TOOLS_LIST, &out) == 0, "list_tools");
    json_t *a = json_loads(out.data, 0, NULL);
    MCPG_REQUIRE(json_is_array(a) && json_array_size(a) == 1, "one tool: %s", out.data);
    json_t *t = json_array_get(a, 0);
    MCPG_CHECK(strcmp(json_string_value(json_object_get(t, "name")), "echo") == 0, "name echo");
    json_t *schema = json_object_get(t, "inputSchema");
    MCPG_CHECK(strcmp(json_string_value(json_object_get(schema, "type")), "object") == 0,
               "schema type object");
    MCPG_CHECK(json_is_object(json_object_get(json_object_get(schema, "properties"), "message")),
               "schema property message");
    MCPG_CHECK(strcmp(json_string_value(json_array_get(json_object_get(schema, "required"), 0)),
                      "message") == 0, "message required");
    json_decref(a);
    mcpg_buf_free(&out);

    /* the exact bytes of the bench answer */
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", "{\"message\":\"hi\"}", "1");
    MCPG_REQUIRE(mcpg_fakehost_run(fh, inst, c, 1000) == MCPG_CONTINUE, "echo: %s",
                 mcpg_fakehost_error_message(c));
    MCPG_CHECK(strcmp(mcpg_fakehost_result(c),
                      "{\"content\":[{\"type\":\"text\",\"text\":\"Echo: hi\"}]}") == 0,
               "got %s", mcpg_fakehost_result(c));
    mcpg_fakehost_call_free(fh, c);
    unload(inst);
}

static void test_escaping(void) {
    mcpg_instance *inst = load(NULL);
    int64_t code;
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"{\"message\":\"say \\\"hi\\\" \\\\ back\"}", "Echo: say \"hi\" \\ back"},
        {"{\"message\":\"caf\\u00e9 \\ud83d\\ude00 \xe2\x82\xac\"}",
         "Echo: caf\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82\xac"},
        {"{\"message\":\"a\\u0001b\\nc\\td\\u001f\"}", "Echo: a\x01" "b\nc\td\x1f"},
        {"{\"message\":\"</script>\\/\"}", "Echo: </script>/"},
        {"{\"other\":1,\"message\":\"\"}", "Echo: "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *text = call_text(inst, "echo", cases[i].args, &code, NULL);
        MCPG_CHECK(text && strcmp(text, cases[i].want) == 0, "case %zu: got [%s]", i,
                   text ? text : "(error)");
        free(text);
    }
    /* a NUL inside the message survives as \u0000 */
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", "{\"message\":\"a\\u0000b\"}", "1");
    MCPG_REQUIRE(mcpg_fakehost_run(fh, inst, c, 1000) == MCPG_CONTINUE, "NUL: %s",
                 mcpg_fakehost_error_message(c));
    MCPG_CHECK(strstr(mcpg_fakehost_result(c), "Echo: a\\u0000b"), "got %s",
               mcpg_fakehost_result(c));
    mcpg_fakehost_call_free(fh, c);
    unload(inst);
}

static void test_bad_arguments(void) {
    mcpg_instance *inst = load(NULL);
    static const char *const bad[] = {"{}", "{\"message\":7}", "{\"message\":null}",
                                      "{\"message\":[\"x\"]}", "{\"msg\":\"x\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", bad[i], "1");
        MCPG_REQUIRE(mcpg_fakehost_run(fh, inst, c, 1000) == MCPG_DENY, "%s denied", bad[i]);
        MCPG_CHECK(mcpg_fakehost_error_code(c) == MCPG_RPC_INVALID_PARAMS, "%s: code %lld", bad[i],
                   (long long)mcpg_fakehost_error_code(c));
        MCPG_CHECK(strstr(mcpg_fakehost_error_message(c), "message"), "%s: %s", bad[i],
                   mcpg_fakehost_error_message(c));
        mcpg_fakehost_call_free(fh, c);
    }
    /* an unknown name (the kernel routes only known ones, but if asked...) */
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "nope", "{\"message\":\"x\"}", "1");
    MCPG_REQUIRE(mcpg_fakehost_run(fh, inst, c, 1000) == MCPG_DENY, "unknown tool denied");
    MCPG_CHECK(mcpg_fakehost_error_code(c) == MCPG_RPC_INVALID_PARAMS, "code %lld",
               (long long)mcpg_fakehost_error_code(c));
    MCPG_CHECK(strstr(mcpg_fakehost_error_message(c), "nope"), "%s",
               mcpg_fakehost_error_message(c));
    mcpg_fakehost_call_free(fh, c);
    /* mock_stats is just an unknown tool unless stats_tool is on */
    int64_t code;
    MCPG_CHECK(!call_text(inst, "mock_stats", "{}", &code, NULL) && code == MCPG_RPC_INVALID_PARAMS,
               "mock_stats off: code %lld", (long long)code);
    unload(inst);
}

static void test_payload_and_fail(void) {
    mcpg_instance *inst = load("{\"tools\":[{\"name\":\"big\",\"payload_bytes\":10000},"
                               "{\"name\":\"small\",\"payload_bytes\":3},"
                               "{\"name\":\"bad\",\"fail\":true,\"description\":\"fails \\\"always\\\"\"}]}");
    int64_t code;
    int is_error = -1;
    char *text = call_text(inst, "big", "{\"message\":\"hi \\\"q\\\"\"}", &code, &is_error);
    MCPG_REQUIRE(text && strlen(text) == 10000 && strncmp(text, "Echo: hi \"q\"x", 13) == 0,
                 "big: %.40s", text ? text : "(error)");
    MCPG_CHECK(strspn(text + 12, "x") == 10000 - 12 && is_error == 0,
               "padded with x, not an error");
    free(text);
    text = call_text(inst, "small", "{\"message\":\"longer than three\"}", &code, NULL);
    MCPG_CHECK(text && strcmp(text, "Echo: longer than three") == 0, "small, never truncated: %s",
               text ? text : "(error)");
    free(text);
    text = call_text(inst, "bad", "{\"message\":\"x\"}", &code, &is_error);
    MCPG_CHECK(text && strcmp(text, "Echo: x") == 0 && is_error == 1, "bad: %s, isError %d",
               text ? text : "(error)", is_error);
    free(text);

    mcpg_buf out = {0};
    MCPG_REQUIRE(mcpg_fakehost_list(fh, inst, MCPG_METHOD_TOOLS_LIST, &out) == 0, "list_tools");
    json_t *a = json_loads(out.data, 0, NULL);
    MCPG_REQUIRE(json_array_size(a) == 3, "three tools: %s", out.data);
    MCPG_CHECK(strcmp(json_string_value(json_object_get(json_array_get(a, 2), "description")),
                      "fails \"always\"") == 0, "escaped description");
    json_decref(a);
    mcpg_buf_free(&out);
    unload(inst);
}

/* Run `n` calls of `tool` at once and wait for all; returns the elapsed ms. */
static uint64_t run_concurrent(mcpg_instance *inst, const char *tool, int n) {
    mcpg_call *calls[16];
    MCPG_REQUIRE(n <= 16, "at most 16 calls, not %d", n);
    uint64_t t0 = mcpg_fakehost_now_ms();
    for (int i = 0; i < n; i++) {
        calls[i] = mcpg_fakehost_call_new(fh, "tools/call", tool, "{\"message\":\"z\"}", "1");
        MCPG_REQUIRE(mcpg_fakehost_dispatch(fh, inst, calls[i]) == MCPG_PENDING,
                     "call %d pending", i);
    }
    for (int i = 0; i < n; i++) {
        MCPG_REQUIRE(mcpg_fakehost_wait(fh, calls[i], 5000) == MCPG_CONTINUE,
                     "call %d answered", i);
        MCPG_CHECK(strstr(mcpg_fakehost_result(calls[i]), "Echo: z"), "call %d: %s", i,
                   mcpg_fakehost_result(calls[i]));
        mcpg_fakehost_call_free(fh, calls[i]);
    }
    return mcpg_fakehost_now_ms() - t0;
}

static json_t *stats(mcpg_instance *inst) {
    int64_t code;
    char *text = call_text(inst, "mock_stats", "{}", &code, NULL);
    MCPG_REQUIRE(text, "mock_stats answered");
    json_t *o = json_loads(text, 0, NULL);
    MCPG_REQUIRE(json_is_object(o), "stats are an object: %s", text);
    free(text);
    return o;
}

#define STAT(o, k) json_integer_value(json_object_get((o), (k)))
/* A tool's own counter in the stats: {"tools":{"<tool>":{"<k>":N}}}; -1 when absent. */
static json_int_t tool_stat(json_t *o, const char *tool, const char *k) {
    json_t *v = json_object_get(json_object_get(json_object_get(o, "tools"), tool), k);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* The counters of `tool` (NULL: the instance's) are these. */
static void expect_counts(json_t *o, const char *tool, json_int_t in_flight, json_int_t max,
                          json_int_t calls, const char *what) {
    static const char *const keys[] = {"in_flight", "max_in_flight", "calls"};
    const json_int_t want[] = {in_flight, max, calls};
    for (int i = 0; i < 3; i++) {
        json_int_t got = tool ? tool_stat(o, tool, keys[i]) : STAT(o, keys[i]);
        MCPG_CHECK(got == want[i], "%s: %s %lld, wanted %lld", what, keys[i],
                   (long long)got, (long long)want[i]);
    }
}

/* "slow" answers after SLOW_MS: long enough that calls held on it are still
 * held when the stats are asked for right after, on a loaded machine. "held"
 * answers after HELD_MS unless cancelled: an answer within HELD_MS / 2 came
 * from the cancel. */
#define SLOW_MS 1000
#define HELD_MS 5000

static void test_latency(void) {
    char cfg[256];
    snprintf(cfg, sizeof cfg,
             "{\"tools\":[{\"name\":\"slow\",\"latency_ms\":%d},"
             "{\"name\":\"held\",\"latency_ms\":%d}],\"stats_tool\":true}",
             SLOW_MS, HELD_MS);
    mcpg_instance *inst = load(cfg);
    MCPG_REQUIRE(mcpg_fakehost_set_inline(inst, 1) == 0, "inline-safe");
    /* inline: 5 calls held on loop timers at once, so they overlap */
    mcpg_call *calls[5];
    uint64_t t0 = mcpg_fakehost_now_ms();
    for (int i = 0; i < 5; i++) {
        calls[i] = mcpg_fakehost_call_new(fh, "tools/call", "slow", "{\"message\":\"z\"}", "1");
        MCPG_REQUIRE(mcpg_fakehost_dispatch(fh, inst, calls[i]) == MCPG_PENDING,
                     "call %d pending", i);
    }
    json_t *s = stats(inst); /* while they wait */
    MCPG_CHECK(STAT(s, "in_flight") == 5 && STAT(s, "max_in_flight") == 5 && STAT(s, "calls") == 5,
               "stats while 5 wait");
    expect_counts(s, "slow", 5, 5, 5, "the tool's own stats while 5 wait");
    json_decref(s);
    for (int i = 0; i < 5; i++) {
        MCPG_REQUIRE(mcpg_fakehost_wait(fh, calls[i], 5000) == MCPG_CONTINUE,
                     "call %d answered", i);
        mcpg_fakehost_call_free(fh, calls[i]);
    }
    uint64_t ms = mcpg_fakehost_now_ms() - t0;
    printf("inline: 5 calls of latency %d ms took %llu ms\n", SLOW_MS, (unsigned long long)ms);
    /* libuv times from the loop's cached clock, which the fake host last
     * updated when its loop last ran: a few ms early is the loop, not us.
     * One after the other they would take 5 x SLOW_MS. */
    MCPG_CHECK(ms >= SLOW_MS - 10 && ms < 3 * SLOW_MS, "took %llu ms", (unsigned long long)ms);
    s = stats(inst);
    MCPG_CHECK(STAT(s, "in_flight") == 0 && STAT(s, "max_in_flight") == 5 && STAT(s, "calls") == 5,
               "stats after");
    json_decref(s);

    /* cancel: the held call answers at once, and its timer is gone */
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "held", "{\"message\":\"z\"}", "1");
    t0 = mcpg_fakehost_now_ms();
    MCPG_REQUIRE(mcpg_fakehost_dispatch(fh, inst, c) == MCPG_PENDING, "pending");
    mcpg_fakehost_host(fh)->call_cancel(c);
    MCPG_REQUIRE(mcpg_fakehost_wait(fh, c, 2 * HELD_MS) == MCPG_DENY, "a cancelled call is denied");
    ms = mcpg_fakehost_now_ms() - t0;
    MCPG_CHECK(ms < HELD_MS / 2, "answered at once, not after its latency (%d ms): %llu ms", HELD_MS,
               (unsigned long long)ms);
    mcpg_fakehost_call_free(fh, c);
    s = stats(inst);
    MCPG_CHECK(STAT(s, "in_flight") == 0 && tool_stat(s, "held", "in_flight") == 0,
               "nothing in flight after cancel");
    json_decref(s);

    /* on the pool: the call sleeps on its pool thread instead */
    MCPG_CHECK(mcpg_fakehost_set_inline(inst, 0) == 0, "back to the pool");
    ms = run_concurrent(inst, "slow", 2);
    printf("pool: 2 calls of latency %d ms took %llu ms\n", SLOW_MS, (unsigned long long)ms);
    MCPG_CHECK(ms >= SLOW_MS, "took %llu ms", (unsigned long long)ms);
    unload(inst);
}

/* Dispatch `n` inline calls of `tool`, held on their latency timers. */
static void hold(mcpg_instance *inst, const char *tool, int n, mcpg_call **out) {
    for (int i = 0; i < n; i++) {
        out[i] = mcpg_fakehost_call_new(fh, "tools/call", tool, "{\"message\":\"z\"}", "1");
        MCPG_REQUIRE(mcpg_fakehost_dispatch(fh, inst, out[i]) == MCPG_PENDING, "%s %d pending",
                     tool, i);
    }
}

static void answer_all(mcpg_call **calls, int n) {
    for (int i = 0; i < n; i++) {
        MCPG_REQUIRE(mcpg_fakehost_wait(fh, calls[i], 5000) == MCPG_CONTINUE, "call %d answered", i);
        mcpg_fakehost_call_free(fh, calls[i]);
    }
}

/* Each tool counts its own calls in flight beside the instance's totals: a
 * capped tool's maximum stays its own while other tools run. */
static void test_per_tool_stats(void) {
    /* held SLOW_MS: still held when the stats are asked for */
    char cfg[256];
    snprintf(cfg, sizeof cfg,
             "{\"tools\":[{\"name\":\"capped\",\"latency_ms\":%d},"
             "{\"name\":\"other\",\"latency_ms\":%d},{\"name\":\"quick\"}],"
             "\"stats_tool\":true}",
             SLOW_MS, SLOW_MS);
    mcpg_instance *inst = load(cfg);
    MCPG_REQUIRE(mcpg_fakehost_set_inline(inst, 1) == 0, "inline-safe");
    mcpg_call *calls[7];
    hold(inst, "capped", 3, calls);
    hold(inst, "other", 4, calls + 3);
    int64_t code;
    free(call_text(inst, "quick", "{\"message\":\"q\"}", &code, NULL));
    json_t *s = stats(inst);
    expect_counts(s, NULL, 7, 8, 8, "the instance: 7 held, 8 at once with quick's");
    expect_counts(s, "capped", 3, 3, 3, "capped: its own 3");
    expect_counts(s, "other", 4, 4, 4, "other: its own 4");
    expect_counts(s, "quick", 0, 1, 1, "quick: answered at once");
    MCPG_CHECK(tool_stat(s, "mock_stats", "calls") == -1, "mock_stats does not count itself");
    json_decref(s);
    answer_all(calls, 7);
    /* one more of capped alone: its maximum stays 3, the instance's 8 */
    hold(inst, "capped", 1, calls);
    answer_all(calls, 1);
    s = stats(inst);
    expect_counts(s, NULL, 0, 8, 9, "the instance after");
    expect_counts(s, "capped", 0, 3, 4, "capped after: its maximum stays its own");
    expect_counts(s, "other", 0, 4, 4, "other after");
    json_decref(s);
    unload(inst);
}

static void expect_report(const char *config, const char *needle) {
    mcpg_fakehost_log_clear(fh);
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, so_path, "mock", config, &inst);
    const char *rep = mcpg_fakehost_report_text(fh);
    MCPG_CHECK(rc == MCPG_ECONFIG && strstr(rep, needle),
               "config %s: rc %d, report:\n%s(wanted %s)", config, rc, rep, needle);
}

static void test_validate(void) {
    expect_report("{\"tools\":{}}", "tools: expected an array");
    expect_report("{\"tools\":[{\"name\":\"a\"},{\"name\":\"b\",\"latency_ms\":-1}]}",
                  "tools[1].latency_ms: must be an integer");
    expect_report("{\"tools\":[{\"name\":\"a\",\"latency_ms\":1.5}]}", "tools[0].latency_ms");
    expect_report("{\"tools\":[{\"name\":\"a b\"}]}", "tools[0].name: must match");
    expect_report("{\"tools\":[{\"name\":\"\"}]}", "tools[0].name: must match");
    expect_report("{\"tools\":[{\"name\":\"x\"},{\"description\":\"d\"}]}",
                  "tools[1].name: is required");
    expect_report("{\"tools\":[{\"name\":\"a\"},{\"name\":\"a\"}]}",
                  "tools[1].name: duplicate tool name \"a\"");
    expect_report("{\"tools\":[{\"name\":\"a\",\"latncy_ms\":1}]}",
                  "tools[0].latncy_ms: unknown key (did you mean \"latency_ms\"?)");
    expect_report("{\"tools\":[{\"name\":\"a\",\"fail\":1}]}", "tools[0].fail: expected a boolean");
    expect_report("{\"tools\":[{\"name\":\"a\",\"payload_bytes\":999999999999}]}",
                  "tools[0].payload_bytes");
    expect_report("{\"tools\":[7]}", "tools[0]: expected an object");
    expect_report("{\"tools\":[{\"name\":\"mock_stats\"}],\"stats_tool\":true}",
                  "tools[0].name: \"mock_stats\" is reserved");
    char longname[200];
    snprintf(longname, sizeof longname, "{\"tools\":[{\"name\":\"%065d\"}]}", 0);
    expect_report(longname, "tools[0].name: must match");
    /* and a good one with every key passes */
    mcpg_instance *inst = load("{\"tools\":[{\"name\":\"A-b_9\",\"description\":\"d\","
                               "\"latency_ms\":0,\"payload_bytes\":0,\"fail\":false}]}");
    unload(inst);
}

/* Static resources: listed in config order with their defaults, read back
 * exactly (escapes kept), an unknown uri -32602 with the uri as data, and
 * the config's mistakes named at their key paths. */
static void test_resources(void) {
    mcpg_instance *inst = load("{\"resources\":[{\"uri\":\"mock://fleet/notes\",\"text\":"
                               "\"line \\\"one\\\"\\n\"},{\"uri\":\"mock://b\",\"name\":\"bee\","
                               "\"mimeType\":\"text/markdown\",\"text\":\"# b\"}]}");
    mcpg_buf out = {0};
    MCPG_REQUIRE(mcpg_fakehost_list(fh, inst, MCPG_METHOD_RESOURCES_LIST, &out) == 0, "list");
    json_t *a = json_loads(out.data, 0, NULL);
    MCPG_REQUIRE(json_is_array(a) && json_array_size(a) == 2, "two resources: %s", out.data);
    json_t *r0 = json_array_get(a, 0), *r1 = json_array_get(a, 1);
    MCPG_CHECK(!strcmp(json_string_value(json_object_get(r0, "uri")), "mock://fleet/notes") &&
                   !strcmp(json_string_value(json_object_get(r0, "name")), "mock://fleet/notes") &&
                   !strcmp(json_string_value(json_object_get(r0, "mimeType")), "text/plain"),
               "first: the uri as its name, text/plain: %s", out.data);
    MCPG_CHECK(!strcmp(json_string_value(json_object_get(r1, "name")), "bee") &&
                   !strcmp(json_string_value(json_object_get(r1, "mimeType")), "text/markdown"),
               "second: its own name and type: %s", out.data);
    json_decref(a);
    mcpg_buf_free(&out);

    mcpg_call *c = mcpg_fakehost_call_new(fh, "resources/read", "mock://fleet/notes", "{}", "1");
    MCPG_REQUIRE(c && mcpg_fakehost_run(fh, inst, c, 5000) == MCPG_CONTINUE, "read");
    json_t *o = json_loads(mcpg_fakehost_result(c), 0, NULL);
    json_t *item = json_array_get(json_object_get(o, "contents"), 0);
    MCPG_CHECK(item && !strcmp(json_string_value(json_object_get(item, "text")), "line \"one\"\n") &&
                   !strcmp(json_string_value(json_object_get(item, "uri")), "mock://fleet/notes"),
               "read: the text as configured: %s", mcpg_fakehost_result(c));
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);

    c = mcpg_fakehost_call_new(fh, "resources/read", "mock://nope", "{}", "2");
    MCPG_REQUIRE(c && mcpg_fakehost_run(fh, inst, c, 5000) == MCPG_DENY, "unknown uri denied");
    MCPG_CHECK(mcpg_fakehost_error_code(c) == MCPG_RPC_INVALID_PARAMS, "unknown uri: -32602");
    mcpg_fakehost_call_free(fh, c);
    unload(inst);

    inst = load(NULL); /* none configured: an empty list, not an error */
    MCPG_REQUIRE(mcpg_fakehost_list(fh, inst, MCPG_METHOD_RESOURCES_LIST, &out) == 0, "empty list");
    MCPG_CHECK(!strcmp(out.data, "[]"), "no resources: []: %s", out.data);
    mcpg_buf_free(&out);
    unload(inst);

    expect_report("{\"resources\":{}}", "resources: expected an array");
    expect_report("{\"resources\":[{\"text\":\"t\"}]}", "resources[0].uri: is required");
    expect_report("{\"resources\":[{\"uri\":\"\",\"text\":\"t\"}]}", "resources[0].uri: must be");
    expect_report("{\"resources\":[{\"uri\":\"a://x\"}]}", "resources[0].text: is required");
    expect_report("{\"resources\":[{\"uri\":\"a://x\",\"text\":\"t\"},{\"uri\":\"a://x\",\"text\":\"u\"}]}",
                  "resources[1].uri: duplicate uri");
    expect_report("{\"resources\":[{\"uri\":\"a://x\",\"text\":1}]}", "resources[0].text: expected a string");
    expect_report("{\"resources\":[{\"uri\":\"a://x\",\"text\":\"t\",\"mime\":\"x\"}]}",
                  "resources[0].mime: unknown key");
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: test_backend_mock path/to/backend_mock.so");
    so_path = argv[1];
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    test_list_and_echo();
    test_escaping();
    test_bad_arguments();
    test_payload_and_fail();
    test_latency();
    test_per_tool_stats();
    test_validate();
    test_resources();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("backend_mock");
}
