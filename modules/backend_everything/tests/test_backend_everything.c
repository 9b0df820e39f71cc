/* backend_everything through the SDK's fake host: every tool, resource and
 * prompt, on both wires where they differ (a request to the client on the
 * legacy wire, input_required on the stateless one), inline and on the
 * pool. Usage: test_backend_everything path/to/backend_everything.so */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *so_path;
static mcpg_fakehost *fh;
static mcpg_instance *be;

/* ---- helpers ---- */

static mcpg_call *call(const char *method, const char *target, const char *args,
                       mcpg_wire wire) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, method, target, args, "1");
    MCPG_REQUIRE(c, "call_new");
    mcpg_fakehost_call_set_wire(c, wire);
    return c;
}

/* Run it; the result parsed (NULL when it is an error). */
static json_t *run(mcpg_call *c, int want) {
    int st = mcpg_fakehost_run(fh, be, c, 5000);
    MCPG_CHECK(st == want, "status %d, want %d (%s)", st, want,
               mcpg_fakehost_error_message(c) ? mcpg_fakehost_error_message(c) : "");
    const char *r = mcpg_fakehost_result(c);
    if (!r) return NULL;
    json_t *o = json_loads(r, 0, NULL);
    MCPG_CHECK(o != NULL, "result is JSON: %s", r);
    return o;
}

static const char *str_at(json_t *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = o;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, ".")) {
        if (json_is_array(v)) v = json_array_get(v, (size_t)atoi(tok));
        else v = json_object_get(v, tok);
    }
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int str_is(json_t *o, const char *path, const char *want) {
    const char *s = str_at(o, path);
    return s && strcmp(s, want) == 0;
}

/* A tool's one text item. */
static char *tool_text(const char *tool, const char *args, mcpg_wire wire, int *is_error) {
    mcpg_call *c = call("tools/call", tool, args, wire);
    json_t *o = run(c, MCPG_CONTINUE);
    const char *t = o ? str_at(o, "content.0.text") : NULL;
    char *text = t ? strdup(t) : NULL;
    if (is_error) *is_error = o && json_is_true(json_object_get(o, "isError"));
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    return text;
}

static void expect_text(const char *tool, const char *args, const char *want) {
    char *t = tool_text(tool, args, MCPG_WIRE_LEGACY, NULL);
    MCPG_CHECK(t && strcmp(t, want) == 0, "%s: got [%s], want [%s]", tool, t ? t : "(none)", want);
    free(t);
}

static uint32_t result_type(mcpg_call *c) {
    mcpg_call_outcome o;
    mcpg_fakehost_outcome(c, &o);
    return o.result_type;
}

/* ---- tools answered at once ---- */

static void test_tool_list(void) {
    mcpg_buf out = {0};
    MCPG_REQUIRE(mcpg_fakehost_list(fh, be, MCPG_METHOD_TOOLS_LIST, &out) == 0, "list_tools");
    json_t *a = json_loads(out.data, 0, NULL);
    MCPG_REQUIRE(json_is_array(a), "an array: %s", out.data);
    static const char *const names[] = {
        "test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
        "test_multiple_content_types", "test_tool_with_logging", "test_tool_with_progress",
        "test_error_handling", "test_logging_tool", "test_sampling", "test_elicitation",
        "test_streaming_elicitation",
        "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums",
        "json_schema_2020_12_tool", "test_missing_capability", "test_trigger_tool_change",
        "test_input_required_result_elicitation", "test_input_required_result_sampling",
        "test_input_required_result_list_roots", "test_input_required_result_request_state",
        "test_input_required_result_multiple_inputs", "test_input_required_result_multi_round",
        "test_input_required_result_tampered_state", "test_input_required_result_capabilities"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        json_t *found = NULL, *t;
        size_t k;
        json_array_foreach(a, k, t) if (str_is(t, "name", names[i])) found = t;
        MCPG_CHECK(found && json_is_object(json_object_get(found, "inputSchema")),
                   "%s listed with an inputSchema", names[i]);
        if (found && !strcmp(names[i], "json_schema_2020_12_tool")) {
            json_t *s = json_object_get(found, "inputSchema");
            json_t *all_of = json_object_get(s, "allOf");
            MCPG_CHECK(str_is(s, "$schema", "https://json-schema.org/draft/2020-12/schema") &&
                           json_is_object(json_object_get(s, "$defs")) &&
                           str_is(s, "$defs.address.$anchor", "addressDef") &&
                           str_is(s, "properties.address.$ref", "#/$defs/address") &&
                           json_is_false(json_object_get(s, "additionalProperties")) &&
                           json_is_array(json_object_get(json_array_get(all_of, 0), "anyOf")) &&
                           json_is_object(json_object_get(s, "if")) &&
                           json_is_object(json_object_get(s, "then")) &&
                           json_is_object(json_object_get(s, "else")),
                       "2020-12 schema: $anchor, allOf/anyOf, if/then/else");
        }
    }
    json_decref(a);
    mcpg_buf_free(&out);
}

static void test_content_tools(void) {
    expect_text("test_simple_text", NULL, "This is a simple text response for testing.");
    mcpg_call *c = call("tools/call", "test_image_content", NULL, MCPG_WIRE_STATELESS);
    json_t *o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "content.0.type", "image") && str_is(o, "content.0.mimeType", "image/png") &&
                   str_at(o, "content.0.data") && strlen(str_at(o, "content.0.data")) > 20,
               "image");
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    c = call("tools/call", "test_audio_content", NULL, MCPG_WIRE_STATELESS);
    o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "content.0.type", "audio") && str_is(o, "content.0.mimeType", "audio/wav"),
               "audio");
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    c = call("tools/call", "test_embedded_resource", NULL, MCPG_WIRE_STATELESS);
    o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "content.0.type", "resource") &&
                   str_is(o, "content.0.resource.uri", "test://embedded-resource") &&
                   str_is(o, "content.0.resource.text", "This is an embedded resource content."),
               "embedded resource");
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    c = call("tools/call", "test_multiple_content_types", NULL, MCPG_WIRE_STATELESS);
    o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "content.0.type", "text") && str_is(o, "content.1.type", "image") &&
                   str_is(o, "content.2.type", "resource") &&
                   str_is(o, "content.2.resource.text", "{\"test\":\"data\",\"value\":123}"),
               "text, image, resource");
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);

    int is_error = 0;
    char *t = tool_text("test_error_handling", NULL, MCPG_WIRE_STATELESS, &is_error);
    MCPG_CHECK(t && is_error && strstr(t, "intentionally returns an error"), "isError result");
    free(t);
    expect_text("json_schema_2020_12_tool", "{\"name\":\"x\"}",
                "JSON Schema 2020-12 tool called with: {\"name\":\"x\"}");
    c = call("tools/call", "no_such_tool", NULL, MCPG_WIRE_STATELESS);
    run(c, MCPG_DENY);
    MCPG_CHECK(mcpg_fakehost_error_code(c) == -32602, "unknown tool: -32602");
    mcpg_fakehost_call_free(fh, c);
}

static void test_notifications(void) {
    mcpg_call *c = call("tools/call", "test_tool_with_logging", NULL, MCPG_WIRE_LEGACY);
    json_t *o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(mcpg_fakehost_message_count(c) == 3, "three log messages: %s",
               mcpg_fakehost_messages(c));
    json_t *m = json_loads(mcpg_fakehost_message(c, 0) ? mcpg_fakehost_message(c, 0) : "", 0, NULL);
    MCPG_CHECK(str_is(m, "method", "notifications/message") && str_is(m, "params.level", "info") &&
                   str_is(m, "params.data", "Tool execution started"), "the first: %s",
               mcpg_fakehost_message(c, 0));
    MCPG_CHECK(str_is(o, "content.0.text", "Tool with logging executed successfully"), "text");
    json_decref(m);
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);

    /* every level goes out: filtering by the client's level is the transport's */
    c = call("tools/call", "test_logging_tool", NULL, MCPG_WIRE_STATELESS);
    o = run(c, MCPG_CONTINUE);
    static const char *const levels[] = {"debug", "info", "warning", "error"};
    int each = mcpg_fakehost_message_count(c) == 4;
    for (int i = 0; i < 4 && each; i++) {
        m = json_loads(mcpg_fakehost_message(c, i), 0, NULL);
        each = str_is(m, "method", "notifications/message") &&
               str_is(m, "params.level", levels[i]) && str_at(m, "params.data");
        json_decref(m);
    }
    MCPG_CHECK(each && str_is(o, "content.0.text", "Logged at debug, info, warning and error"),
               "test_logging_tool: one message a level: %s", mcpg_fakehost_messages(c));
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);

    c = call("tools/call", "test_tool_with_progress", NULL, MCPG_WIRE_STATELESS);
    mcpg_fakehost_call_set_params(c, "{\"name\":\"test_tool_with_progress\",\"arguments\":{},"
                                     "\"_meta\":{\"progressToken\":\"pt-1\"}}");
    o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(mcpg_fakehost_message_count(c) == 3 && str_is(o, "content.0.text", "pt-1"),
               "three progress notifications: %s", mcpg_fakehost_messages(c));
    int last = -1, increasing = 1;
    for (int i = 0; i < 3; i++) {
        m = json_loads(mcpg_fakehost_message(c, i) ? mcpg_fakehost_message(c, i) : "", 0, NULL);
        json_t *p = json_object_get(json_object_get(m, "params"), "progress");
        increasing &= str_is(m, "method", "notifications/progress") &&
                      str_is(m, "params.progressToken", "pt-1") && json_integer_value(p) > last;
        last = (int)json_integer_value(p);
        json_decref(m);
    }
    MCPG_CHECK(increasing && last == 100, "for the caller's token, increasing to 100");
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);

    c = call("tools/call", "test_tool_with_progress", NULL, MCPG_WIRE_STATELESS);
    mcpg_fakehost_call_set_params(c, "{\"name\":\"test_tool_with_progress\",\"_meta\":"
                                     "{\"progressToken\":7}}");
    o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(strstr(mcpg_fakehost_message(c, 0), "\"progressToken\":7,") &&
                   str_is(o, "content.0.text", "7"), "a numeric token stays a number");
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    c = call("tools/call", "test_tool_with_progress", NULL, MCPG_WIRE_STATELESS);
    json_decref(run(c, MCPG_CONTINUE));
    MCPG_CHECK(mcpg_fakehost_message_count(c) == 0, "no token, no progress");
    mcpg_fakehost_call_free(fh, c);
}

static void test_capability_and_news(void) {
    mcpg_call *c = call("tools/call", "test_missing_capability", NULL, MCPG_WIRE_STATELESS);
    mcpg_fakehost_call_set_caps(c, "{\"elicitation\":{}}");
    run(c, MCPG_DENY);
    mcpg_call_outcome o;
    mcpg_fakehost_outcome(c, &o);
    json_t *d = o.error_data ? json_loads(o.error_data, 0, NULL) : NULL;
    MCPG_CHECK(o.error_code == -32021 && o.http_status == 400 &&
                   json_is_object(json_object_get(json_object_get(d, "requiredCapabilities"),
                                                  "sampling")),
               "-32021 naming sampling: %s", o.error_data ? o.error_data : "(no data)");
    json_decref(d);
    mcpg_fakehost_call_free(fh, c);
    c = call("tools/call", "test_missing_capability", NULL, MCPG_WIRE_STATELESS);
    mcpg_fakehost_call_set_caps(c, "{\"sampling\":{}}");
    json_decref(run(c, MCPG_CONTINUE));
    mcpg_fakehost_call_free(fh, c);

    expect_text("test_trigger_tool_change", NULL, "Tool list change announced");
    MCPG_CHECK(mcpg_fakehost_news_count(fh, "notifications/tools/list_changed", NULL) == 1,
               "tools list_changed");
    expect_text("test_trigger_prompt_change", NULL, "Prompt list change announced");
    MCPG_CHECK(mcpg_fakehost_news_count(fh, "notifications/prompts/list_changed", NULL) == 1,
               "prompts list_changed");
}

/* ---- asking the client ---- */

/* Legacy: the request goes out, the reply is the result. */
static void ask_legacy(const char *tool, const char *args, const char *method,
                       const char *in_request, const char *reply, const char *want, int inl) {
    mcpg_fakehost_set_inline(be, inl);
    mcpg_call *c = call("tools/call", tool, args, MCPG_WIRE_LEGACY);
    MCPG_CHECK(mcpg_fakehost_dispatch(fh, be, c) == MCPG_PENDING, "%s: pending", tool);
    mcpg_fakehost_wait(fh, c, 30); /* the request goes out */
    const char *m = mcpg_fakehost_message(c, 0);
    MCPG_CHECK(m && strstr(m, method) && strstr(m, in_request), "%s asks: %s", tool, m ? m : "");
    MCPG_CHECK(mcpg_fakehost_reply(fh, c, 0, reply) == 0, "%s: replied", tool);
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_CONTINUE, "%s: answered", tool);
    json_t *o = json_loads(mcpg_fakehost_result(c) ? mcpg_fakehost_result(c) : "", 0, NULL);
    MCPG_CHECK(str_is(o, "content.0.text", want), "%s: %s", tool, mcpg_fakehost_result(c));
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    mcpg_fakehost_set_inline(be, 0);
}

/* Stateless: input_required, then the retry with inputResponses. */
static void ask_stateless(const char *tool, const char *key, const char *method,
                          const char *response, const char *want) {
    mcpg_call *c = call("tools/call", tool, NULL, MCPG_WIRE_STATELESS);
    json_t *o = run(c, MCPG_CONTINUE);
    char path[128];
    snprintf(path, sizeof path, "inputRequests.%s.method", key);
    MCPG_CHECK(result_type(c) == MCPG_RESULT_INPUT_REQUIRED && str_is(o, path, method) &&
                   mcpg_fakehost_message_count(c) == 0,
               "%s: input_required: %s", tool, mcpg_fakehost_result(c));
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    char params[1024];
    snprintf(params, sizeof params, "{\"name\":\"%s\",\"arguments\":{},\"inputResponses\":"
             "{\"%s\":%s}}", tool, key, response);
    c = call("tools/call", tool, NULL, MCPG_WIRE_STATELESS);
    mcpg_fakehost_call_set_params(c, params);
    o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(result_type(c) == MCPG_RESULT_COMPLETE && str_is(o, "content.0.text", want),
               "%s retried: %s", tool, mcpg_fakehost_result(c));
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
}

#define SAMPLED "{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"Paris\"},\"model\":\"m\"}"
#define ACCEPTED "{\"action\":\"accept\",\"content\":{\"response\":\"yes\"}}"

static void test_sampling_elicitation(void) {
    for (int inl = 0; inl < 2; inl++) {
        ask_legacy("test_sampling", "{\"prompt\":\"Capital?\"}", "sampling/createMessage",
                   "\"text\":\"Capital?\"", SAMPLED, "LLM response: Paris", inl);
        ask_legacy("test_elicitation", "{\"message\":\"Yes?\"}", "elicitation/create",
                   "\"message\":\"Yes?\"", ACCEPTED,
                   "User response: action=accept, content={\"response\":\"yes\"}", inl);
    }
    ask_legacy("test_elicitation_sep1034_defaults", NULL, "elicitation/create",
               "\"default\":\"John Doe\"", "{\"action\":\"decline\"}",
               "Elicitation completed: action=decline, content={}", 0);
    ask_legacy("test_elicitation_sep1330_enums", NULL, "elicitation/create",
               "\"enumNames\":[\"Option One\"", ACCEPTED,
               "Elicitation completed: action=accept, content={\"response\":\"yes\"}", 1);
    ask_stateless("test_sampling", "sampling", "sampling/createMessage", SAMPLED,
                  "LLM response: Paris");
    ask_stateless("test_elicitation", "elicitation", "elicitation/create", ACCEPTED,
                  "User response: action=accept, content={\"response\":\"yes\"}");
    /* the stateless wire's stream never carries a request: input_required */
    ask_legacy("test_streaming_elicitation", NULL, "elicitation/create",
               "\"message\":\"Please provide your input\"", ACCEPTED,
               "User response: action=accept, content={\"response\":\"yes\"}", 0);
    ask_stateless("test_streaming_elicitation", "user_input", "elicitation/create", ACCEPTED,
                  "User response: action=accept, content={\"response\":\"yes\"}");
    ask_stateless("test_elicitation_sep1330_enums", "elicitation", "elicitation/create",
                  ACCEPTED, "Elicitation completed: action=accept, content={\"response\":\"yes\"}");

    /* the client refuses, the client leaves, the answer cannot carry requests */
    mcpg_call *c = call("tools/call", "test_sampling", "{\"prompt\":\"x\"}", MCPG_WIRE_LEGACY);
    mcpg_fakehost_dispatch(fh, be, c);
    mcpg_fakehost_wait(fh, c, 30);
    mcpg_fakehost_reply_error(fh, c, 0, -1, "User rejected sampling request", NULL);
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_CONTINUE &&
                   strstr(mcpg_fakehost_result(c), "Sampling not supported or error: User rejected"),
               "an error reply: %s", mcpg_fakehost_result(c));
    mcpg_fakehost_call_free(fh, c);
    c = call("tools/call", "test_sampling", "{\"prompt\":\"x\"}", MCPG_WIRE_LEGACY);
    mcpg_fakehost_dispatch(fh, be, c);
    mcpg_fakehost_wait(fh, c, 30);
    mcpg_fakehost_host(fh)->call_cancel(c);
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_DENY &&
                   mcpg_fakehost_error_code(c) == MCPG_RPC_SERVER_ERROR, "cancelled while asking");
    mcpg_fakehost_call_free(fh, c);
    c = call("tools/call", "test_elicitation", "{\"message\":\"x\"}", MCPG_WIRE_LEGACY);
    mcpg_fakehost_call_set_streaming(c, 0);
    json_t *o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(strstr(str_at(o, "content.0.text"), "Elicitation not supported or error"),
               "an answer that cannot carry the request: %s", mcpg_fakehost_result(c));
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
}

/* ---- the input_required family ---- */

/* One round: params beyond name/arguments (inputResponses, requestState);
 * returns the parsed result and the call's result type. */
static json_t *round_of(const char *tool, const char *extra, uint32_t *type, int want) {
    char params[2048];
    snprintf(params, sizeof params, "{\"name\":\"%s\",\"arguments\":{}%s%s}", tool,
             extra ? "," : "", extra ? extra : "");
    mcpg_call *c = call("tools/call", tool, NULL, MCPG_WIRE_STATELESS);
    mcpg_fakehost_call_set_params(c, params);
    json_t *o = run(c, want);
    *type = result_type(c);
    mcpg_fakehost_call_free(fh, c);
    return o;
}

static void test_input_required(void) {
    uint32_t type;
    const char *t = "test_input_required_result_elicitation";
    json_t *o = round_of(t, NULL, &type, MCPG_CONTINUE);
    MCPG_CHECK(type == MCPG_RESULT_INPUT_REQUIRED &&
                   str_is(o, "inputRequests.user_name.method", "elicitation/create") &&
                   str_is(o, "inputRequests.user_name.params.message", "What is your name?"),
               "round 1");
    json_decref(o);
    o = round_of(t, "\"inputResponses\":{\"user_name\":{\"action\":\"accept\",\"content\":"
                    "{\"name\":\"Alice\"}},\"extra\":{\"action\":\"accept\"}}", &type, MCPG_CONTINUE);
    MCPG_CHECK(type == MCPG_RESULT_COMPLETE && str_is(o, "content.0.text", "Hello, Alice!"),
               "round 2, extra keys ignored");
    json_decref(o);
    o = round_of(t, "\"inputResponses\":{\"wrong_key\":{}}", &type, MCPG_CONTINUE);
    MCPG_CHECK(type == MCPG_RESULT_INPUT_REQUIRED, "a missing key is asked again");
    json_decref(o);
    o = round_of(t, "\"inputResponses\":{\"user_name\":12345}", &type, MCPG_CONTINUE);
    MCPG_CHECK(type == MCPG_RESULT_INPUT_REQUIRED, "a response that is not an object: again");
    json_decref(o);
    round_of(t, "\"inputResponses\":null", &type, MCPG_DENY);

    /* requestState: signed, echoed, refused when changed */
    t = "test_input_required_result_request_state";
    o = round_of(t, NULL, &type, MCPG_CONTINUE);
    const char *state = str_at(o, "requestState");
    char *st = state ? strdup(state) : NULL;
    MCPG_CHECK(st && str_is(o, "inputRequests.confirm.method", "elicitation/create"), "a state");
    json_decref(o);
    char extra[512];
    snprintf(extra, sizeof extra, "\"inputResponses\":{\"confirm\":{\"action\":\"accept\","
             "\"content\":{\"ok\":true}}},\"requestState\":\"%s\"", st ? st : "");
    o = round_of(t, extra, &type, MCPG_CONTINUE);
    MCPG_CHECK(str_at(o, "content.0.text") && strstr(str_at(o, "content.0.text"), "state-ok"),
               "state-ok");
    json_decref(o);
    snprintf(extra, sizeof extra, "\"inputResponses\":{\"confirm\":{\"action\":\"accept\","
             "\"content\":{\"ok\":true}}},\"requestState\":\"%s-TAMPERED\"", st ? st : "");
    mcpg_call *c = call("tools/call", "test_input_required_result_tampered_state", NULL,
                        MCPG_WIRE_STATELESS);
    json_decref(run(c, MCPG_CONTINUE));
    mcpg_fakehost_call_free(fh, c);
    round_of("test_input_required_result_tampered_state", extra, &type, MCPG_DENY);
    free(st);

    /* three rounds, the state moving on */
    t = "test_input_required_result_multi_round";
    o = round_of(t, NULL, &type, MCPG_CONTINUE);
    st = str_at(o, "requestState") ? strdup(str_at(o, "requestState")) : NULL;
    MCPG_CHECK(st && str_at(o, "inputRequests.step1.method"), "step 1");
    json_decref(o);
    snprintf(extra, sizeof extra, "\"inputResponses\":{\"step1\":{\"action\":\"accept\","
             "\"content\":{\"name\":\"Al\"}}},\"requestState\":\"%s\"", st ? st : "");
    o = round_of(t, extra, &type, MCPG_CONTINUE);
    char *st2 = str_at(o, "requestState") ? strdup(str_at(o, "requestState")) : NULL;
    MCPG_CHECK(type == MCPG_RESULT_INPUT_REQUIRED && st2 && strcmp(st2, st ? st : "") != 0 &&
                   str_at(o, "inputRequests.step2.method"), "step 2, a new state");
    json_decref(o);
    snprintf(extra, sizeof extra, "\"inputResponses\":{\"step2\":{\"action\":\"accept\","
             "\"content\":{\"color\":\"red\"}}},\"requestState\":\"%s\"", st ? st : "");
    round_of(t, extra, &type, MCPG_DENY); /* the round-1 state does not fit round 3 */
    snprintf(extra, sizeof extra, "\"inputResponses\":{\"step2\":{\"action\":\"accept\","
             "\"content\":{\"color\":\"red\"}}},\"requestState\":\"%s\"", st2 ? st2 : "");
    o = round_of(t, extra, &type, MCPG_CONTINUE);
    MCPG_CHECK(type == MCPG_RESULT_COMPLETE && strstr(str_at(o, "content.0.text"), "red"),
               "complete");
    json_decref(o);
    free(st);
    free(st2);

    o = round_of("test_input_required_result_multiple_inputs", NULL, &type, MCPG_CONTINUE);
    MCPG_CHECK(str_at(o, "inputRequests.user_name.method") &&
                   str_is(o, "inputRequests.greeting.method", "sampling/createMessage") &&
                   str_is(o, "inputRequests.client_roots.method", "roots/list") &&
                   str_at(o, "requestState"), "three at once");
    json_decref(o);
    o = round_of("test_input_required_result_list_roots",
                 "\"inputResponses\":{\"client_roots\":{\"roots\":[{\"uri\":\"file:///r\"}]}}",
                 &type, MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "content.0.text", "Client roots: file:///r"), "roots");
    json_decref(o);
    ask_stateless("test_input_required_result_sampling", "capital_question",
                  "sampling/createMessage", SAMPLED, "LLM response: Paris");

    c = call("tools/call", "test_input_required_result_capabilities", NULL, MCPG_WIRE_STATELESS);
    mcpg_fakehost_call_set_caps(c, "{\"sampling\":{}}");
    o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(result_type(c) == MCPG_RESULT_INPUT_REQUIRED &&
                   str_at(o, "inputRequests.greeting.method") &&
                   !json_object_get(json_object_get(o, "inputRequests"), "user_name"),
               "only what the client declared: %s", mcpg_fakehost_result(c));
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);

    c = call("prompts/get", "test_input_required_result_prompt", NULL, MCPG_WIRE_STATELESS);
    o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(result_type(c) == MCPG_RESULT_INPUT_REQUIRED &&
                   str_at(o, "inputRequests.user_context.method"), "a prompt asks too");
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    c = call("prompts/get", "test_input_required_result_prompt", NULL, MCPG_WIRE_STATELESS);
    mcpg_fakehost_call_set_params(c, "{\"name\":\"test_input_required_result_prompt\","
                                     "\"inputResponses\":{\"user_context\":{\"action\":\"accept\","
                                     "\"content\":{\"context\":\"tests\"}}}}");
    o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "messages.0.content.text", "Context: tests"), "then the prompt");
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
}

/* ---- resources, prompts, completion ---- */

static json_t *read_uri(const char *uri, int want) {
    mcpg_call *c = call("resources/read", uri, NULL, MCPG_WIRE_STATELESS);
    json_t *o = run(c, want);
    if (want == MCPG_DENY) {
        mcpg_call_outcome oc;
        mcpg_fakehost_outcome(c, &oc);
        MCPG_CHECK(oc.error_code == -32602 && !strcmp(oc.error_message, "Resource not found") &&
                       oc.error_data && strstr(oc.error_data, uri), "%s: not found, data.uri", uri);
    }
    mcpg_fakehost_call_free(fh, c);
    return o;
}

static void test_resources(void) {
    mcpg_buf out = {0};
    MCPG_CHECK(mcpg_fakehost_list(fh, be, MCPG_METHOD_RESOURCES_LIST, &out) == 0 &&
                   strstr(out.data, "test://static-text") && strstr(out.data, "test://static-binary") &&
                   strstr(out.data, "test://watched-resource") &&
                   !strstr(out.data, "nonexistent"), "resources");
    out.len = 0;
    MCPG_CHECK(mcpg_fakehost_list(fh, be, MCPG_METHOD_RESOURCES_TEMPLATES_LIST, &out) == 0 &&
                   strstr(out.data, "\"uriTemplate\":\"test://template/{id}/data\""), "template");
    mcpg_buf_free(&out);
    json_t *o = read_uri("test://static-text", MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "contents.0.text", "This is the content of the static text resource.") &&
                   str_is(o, "contents.0.mimeType", "text/plain"), "static text");
    json_decref(o);
    o = read_uri("test://static-binary", MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "contents.0.mimeType", "image/png") && str_at(o, "contents.0.blob"),
               "static binary");
    json_decref(o);
    o = read_uri("test://template/123/data", MCPG_CONTINUE);
    json_t *inner = json_loads(str_at(o, "contents.0.text") ? str_at(o, "contents.0.text") : "", 0, NULL);
    MCPG_CHECK(str_is(o, "contents.0.uri", "test://template/123/data") && str_is(inner, "id", "123") &&
                   json_is_true(json_object_get(inner, "templateTest")) &&
                   str_is(inner, "data", "Data for ID: 123"), "template read");
    json_decref(inner);
    json_decref(o);
    read_uri("test://nonexistent-resource-for-conformance-testing", MCPG_DENY);
    read_uri("test://template//data", MCPG_DENY);

    o = read_uri("test://watched-resource", MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "contents.0.text", "Watched resource content"), "watched");
    json_decref(o);
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_fakehost_route(fh, be);
    MCPG_CHECK(h->resource_subscribe(h->worker_current(), "test://watched-resource", 23, 1) == 0 &&
                   mcpg_fakehost_log_contains(fh, "subscribed to test://watched-resource"),
               "the subscribe op");
    expect_text("test_update_watched_resource", NULL, "test://watched-resource updated");
    MCPG_CHECK(mcpg_fakehost_news_count(fh, "notifications/resources/updated",
                                        "test://watched-resource") == 1, "updated is announced");
    o = read_uri("test://watched-resource", MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "contents.0.text", "Watched resource content (update 1)"), "changed");
    json_decref(o);
    h->resource_subscribe(h->worker_current(), "test://watched-resource", 23, 0);
    mcpg_fakehost_route(fh, NULL);
}

static json_t *prompt(const char *name, const char *args, int want) {
    mcpg_call *c = call("prompts/get", name, args, MCPG_WIRE_LEGACY);
    json_t *o = run(c, want);
    if (want == MCPG_DENY) MCPG_CHECK(mcpg_fakehost_error_code(c) == -32602, "%s: -32602", name);
    mcpg_fakehost_call_free(fh, c);
    return o;
}

static void test_prompts(void) {
    mcpg_buf out = {0};
    MCPG_CHECK(mcpg_fakehost_list(fh, be, MCPG_METHOD_PROMPTS_LIST, &out) == 0 &&
                   strstr(out.data, "\"test_simple_prompt\"") &&
                   strstr(out.data, "{\"name\":\"arg2\"") &&
                   strstr(out.data, "\"resourceUri\"") && strstr(out.data, "\"test_prompt_with_image\""),
               "prompts: %s", out.data);
    mcpg_buf_free(&out);
    json_t *o = prompt("test_simple_prompt", NULL, MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "messages.0.content.text", "This is a simple prompt for testing."), "simple");
    json_decref(o);
    o = prompt("test_prompt_with_arguments", "{\"arg1\":\"a\",\"arg2\":\"b\"}", MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "messages.0.content.text", "Prompt with arguments: arg1='a', arg2='b'"),
               "arguments");
    json_decref(o);
    prompt("test_prompt_with_arguments", "{\"arg1\":\"a\"}", MCPG_DENY);
    o = prompt("test_prompt_with_embedded_resource", "{\"resourceUri\":\"test://x\"}", MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "messages.0.content.type", "resource") &&
                   str_is(o, "messages.0.content.resource.uri", "test://x") &&
                   str_is(o, "messages.1.content.type", "text"), "embedded resource");
    json_decref(o);
    o = prompt("test_prompt_with_image", NULL, MCPG_CONTINUE);
    MCPG_CHECK(str_is(o, "messages.0.content.type", "image") &&
                   str_is(o, "messages.0.content.mimeType", "image/png"), "image");
    json_decref(o);
    prompt("no_such_prompt", NULL, MCPG_DENY);

    mcpg_call *c = call("completion/complete", NULL,
                        "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"test_prompt_with_arguments\"},"
                        "\"argument\":{\"name\":\"arg1\",\"value\":\"ap\"}}", MCPG_WIRE_LEGACY);
    o = run(c, MCPG_CONTINUE);
    json_t *v = json_object_get(json_object_get(o, "completion"), "values");
    MCPG_CHECK(json_array_size(v) == 2 && str_is(o, "completion.values.0", "apple") &&
                   json_integer_value(json_object_get(json_object_get(o, "completion"), "total")) == 2 &&
                   json_is_false(json_object_get(json_object_get(o, "completion"), "hasMore")),
               "completion: %s", mcpg_fakehost_result(c));
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    c = call("completion/complete", NULL,
             "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"test_simple_prompt\"},"
             "\"argument\":{\"name\":\"x\",\"value\":\"\"}}", MCPG_WIRE_LEGACY);
    o = run(c, MCPG_CONTINUE);
    MCPG_CHECK(json_array_size(json_object_get(json_object_get(o, "completion"), "values")) == 0,
               "nothing to complete elsewhere");
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: %s backend_everything.so", argv[0]);
    so_path = argv[1];
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fake host");
    mcpg_fakehost_set_quiet(fh, getenv("MCPG_TEST_VERBOSE") == NULL);
    MCPG_REQUIRE(mcpg_fakehost_load_file(fh, so_path, "everything", NULL, &be) == 0, "load: %s",
                 mcpg_fakehost_report_text(fh));
    MCPG_CHECK(mcpg_fakehost_set_inline(be, 1) == 0, "inline-safe");
    mcpg_fakehost_set_inline(be, 0);
    test_tool_list();
    test_content_tools();
    test_notifications();
    test_capability_and_news();
    test_sampling_elicitation();
    test_input_required();
    test_resources();
    test_prompts();
    MCPG_CHECK(mcpg_fakehost_failures(fh) == 0, "no module bug seen: %s", mcpg_fakehost_log_text(fh));
    MCPG_CHECK(mcpg_fakehost_unload(fh, be) == 0, "unload");
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "free: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_backend_everything");
}
