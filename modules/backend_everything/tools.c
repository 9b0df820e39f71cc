/* The tools: one list for tools/list, and the fixtures that answer at once
 * (content of every type, an isError result, notifications during the call,
 * list changes, a capability the client must have declared). The tools that
 * need the client's answer are ask.c's and input.c's; call_tool tries each
 * file in turn. Names, texts and shapes follow the MCP conformance suite. */
#include "everything.h"

#include <stdio.h>
#include <string.h>

#define EMPTY_SCHEMA "{\"type\":\"object\",\"properties\":{}}"

/* JSON Schema 2020-12 features a gateway must pass through untouched:
 * $schema, $defs (with an $anchor), $ref, additionalProperties (SEP-1613),
 * composition (allOf holding anyOf) and conditionals (if/then/else,
 * SEP-2106). A contact needs a phone or an email, and the one its
 * contactMethod names. */
#define SCHEMA_2020_12                                                                   \
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\","  \
    "\"$defs\":{\"address\":{\"$anchor\":\"addressDef\",\"type\":\"object\","            \
    "\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"}}}},"   \
    "\"properties\":{\"name\":{\"type\":\"string\"},\"address\":{\"$ref\":"                \
    "\"#/$defs/address\"},\"contactMethod\":{\"type\":\"string\",\"enum\":[\"phone\","       \
    "\"email\"]},\"phone\":{\"type\":\"string\"},\"email\":{\"type\":\"string\"}},"          \
    "\"allOf\":[{\"anyOf\":[{\"required\":[\"phone\"]},{\"required\":[\"email\"]}]}],"      \
    "\"if\":{\"properties\":{\"contactMethod\":{\"const\":\"phone\"}},\"required\":"        \
    "[\"contactMethod\"]},\"then\":{\"required\":[\"phone\"]},\"else\":{\"required\":"      \
    "[\"email\"]},\"additionalProperties\":false}"

typedef struct ev_tool {
    const char *name, *description, *schema;
    mcpg_status (*run)(ev *e, mcpg_call *call);
} ev_tool;

/* ---- content of each type ---- */

static mcpg_status simple_text(ev *e, mcpg_call *call) {
    return ev_textf(e, call, 0, "This is a simple text response for testing.");
}

static mcpg_status answer(ev *e, mcpg_call *call, const char *json) {
    if (e->host->call_result(call, json, strlen(json)) == 0) return MCPG_CONTINUE;
    return mcpg_result_errorf(e->host, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
}

static mcpg_status image_content(ev *e, mcpg_call *call) {
    return answer(e, call, "{\"content\":[{\"type\":\"image\",\"data\":\"" EV_PNG_BASE64
                           "\",\"mimeType\":\"image/png\"}]}");
}

static mcpg_status audio_content(ev *e, mcpg_call *call) {
    return answer(e, call, "{\"content\":[{\"type\":\"audio\",\"data\":\"" EV_WAV_BASE64
                           "\",\"mimeType\":\"audio/wav\"}]}");
}

static mcpg_status embedded_resource(ev *e, mcpg_call *call) {
    return answer(e, call,
                  "{\"content\":[{\"type\":\"resource\",\"resource\":{\"uri\":"
                  "\"test://embedded-resource\",\"mimeType\":\"text/plain\",\"text\":"
                  "\"This is an embedded resource content.\"}}]}");
}

static mcpg_status multiple_content(ev *e, mcpg_call *call) {
    return answer(e, call,
                  "{\"content\":[{\"type\":\"text\",\"text\":\"Multiple content types test:\"},"
                  "{\"type\":\"image\",\"data\":\"" EV_PNG_BASE64 "\",\"mimeType\":\"image/png\"},"
                  "{\"type\":\"resource\",\"resource\":{\"uri\":\"test://mixed-content-resource\","
                  "\"mimeType\":\"application/json\",\"text\":\"{\\\"test\\\":\\\"data\\\","
                  "\\\"value\\\":123}\"}}]}");
}

/* A tool that ran and failed: a result with isError, not a JSON-RPC error. */
static mcpg_status error_handling(ev *e, mcpg_call *call) {
    return ev_textf(e, call, 1, "This tool intentionally returns an error for testing");
}

static mcpg_status schema_2020_12(ev *e, mcpg_call *call) {
    size_t n;
    const char *args = e->host->call_args(call, &n);
    return ev_textf(e, call, 0, "JSON Schema 2020-12 tool called with: %.*s", (int)n, args);
}

/* ---- notifications during the call ---- */

/* A notification that cannot be carried (a unary answer, an older kernel)
 * is dropped: the result is the same without it. */
static void notify(ev *e, mcpg_call *call, const char *method, const char *params) {
    if (MCPG_HOST_HAS(e->host, call_notify))
        e->host->call_notify(call, method, params, strlen(params));
}

static mcpg_status with_logging(ev *e, mcpg_call *call) {
    static const char *const steps[] = {"Tool execution started", "Tool processing data",
                                        "Tool execution completed"};
    char params[160];
    for (size_t i = 0; i < 3; i++) {
        snprintf(params, sizeof params,
                 "{\"level\":\"info\",\"logger\":\"backend_everything\",\"data\":\"%s\"}",
                 steps[i]);
        notify(e, call, "notifications/message", params);
    }
    return ev_textf(e, call, 0, "Tool with logging executed successfully");
}

/* One notifications/message per level, debug to error: which of them the
 * client sees is the transport's to decide (the stateless wire's
 * _meta logLevel, the legacy wire's logging/setLevel); the backend says
 * everything. */
static mcpg_status logging_tool(ev *e, mcpg_call *call) {
    static const char *const levels[] = {"debug", "info", "warning", "error"};
    char params[200];
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
        snprintf(params, sizeof params,
                 "{\"level\":\"%s\",\"logger\":\"backend_everything\",\"data\":"
                 "\"A %s message from test_logging_tool\"}",
                 levels[i], levels[i]);
        notify(e, call, "notifications/message", params);
    }
    return ev_textf(e, call, 0, "Logged at debug, info, warning and error");
}

/* Progress only for a caller that asked with params._meta.progressToken;
 * the result's text is the token. */
static mcpg_status with_progress(ev *e, mcpg_call *call) {
    const mcpg_host *h = e->host;
    size_t n, tn;
    const char *params = h->call_params(call, &n);
    mcpg_json_span tok;
    if (!ev_json_at(h, params, n, &tok, "_meta", "progressToken", (const char *)NULL) ||
        (tok.type != MCPG_JSON_STRING && tok.type != MCPG_JSON_NUMBER))
        return ev_textf(e, call, 0, "0");
    const char *raw = ev_json_raw(&tok, &tn);
    char p[512];
    for (int step = 0; step <= 100; step += 50) {
        snprintf(p, sizeof p,
                 "{\"progressToken\":%.*s,\"progress\":%d,\"total\":100,\"message\":"
                 "\"Completed step %d of 100\"}",
                 (int)tn, raw, step, step);
        notify(e, call, "notifications/progress", p);
    }
    char text[256];
    return ev_textf(e, call, 0, "%s",
                    tok.type == MCPG_JSON_STRING ? ev_json_str(h, &tok, text, sizeof text)
                                                 : (snprintf(text, sizeof text, "%.*s",
                                                             (int)tok.n, tok.p), text));
}

/* ---- the rest of the host's 1.1 surface ---- */

static mcpg_status trigger_change(ev *e, mcpg_call *call, uint32_t lists, const char *what) {
    if (MCPG_HOST_HAS(e->host, lists_changed)) e->host->lists_changed(e->self, lists);
    return ev_textf(e, call, 0, "%s list change announced", what);
}

static mcpg_status tool_change(ev *e, mcpg_call *call) {
    return trigger_change(e, call, MCPG_LIST_TOOLS, "Tool");
}

static mcpg_status prompt_change(ev *e, mcpg_call *call) {
    return trigger_change(e, call, MCPG_LIST_PROMPTS, "Prompt");
}

static mcpg_status update_watched(ev *e, mcpg_call *call) {
    ev_watched_update(e);
    return ev_textf(e, call, 0, "test://watched-resource updated");
}

/* A server must not use a capability the client did not declare: -32021,
 * naming it in data.requiredCapabilities (HTTP 400). */
static mcpg_status missing_capability(ev *e, mcpg_call *call) {
    if (ev_client_has(e->host, call, "sampling"))
        return ev_textf(e, call, 0, "The client declared sampling");
    e->host->call_error(call, MCPG_RPC_MISSING_CLIENT_CAPABILITY,
                        "Missing required client capability: sampling",
                        "{\"requiredCapabilities\":{\"sampling\":{}}}");
    e->host->call_set_http(call, 400, 0);
    return MCPG_DENY;
}

/* Custom headers (2026-07-28): each argument is mirrored in an Mcp-Param
 * header, which the gateway checks against it before the call gets here;
 * the tool says what it was given. */
#define CUSTOM_HEADERS_SCHEMA                                                               \
    "{\"type\":\"object\",\"properties\":{"                                                   \
    "\"region\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"                         \
    "\"priority\":{\"type\":\"integer\",\"x-mcp-header\":\"Priority\"},"                    \
    "\"urgent\":{\"type\":\"boolean\",\"x-mcp-header\":\"Urgent\"},"                        \
    "\"note\":{\"type\":\"string\"}},\"required\":[\"region\"]}"

static mcpg_status custom_headers(ev *e, mcpg_call *call) {
    size_t n;
    const char *args = e->host->call_args(call, &n);
    return ev_textf(e, call, 0, "Custom headers tool called with: %.*s", (int)n, args);
}

static const ev_tool tools[] = {
    {"test_simple_text", "Tests simple text content response", EMPTY_SCHEMA, simple_text},
    {"test_image_content", "Tests image content response", EMPTY_SCHEMA, image_content},
    {"test_audio_content", "Tests audio content response", EMPTY_SCHEMA, audio_content},
    {"test_embedded_resource", "Tests embedded resource content response", EMPTY_SCHEMA,
     embedded_resource},
    {"test_multiple_content_types",
     "Tests response with multiple content types (text, image, resource)", EMPTY_SCHEMA,
     multiple_content},
    {"test_tool_with_logging", "Tests tool that emits log messages during execution",
     EMPTY_SCHEMA, with_logging},
    {"test_tool_with_progress", "Tests tool that reports progress notifications", EMPTY_SCHEMA,
     with_progress},
    {"test_error_handling", "Tests error response handling", EMPTY_SCHEMA, error_handling},
    {"test_logging_tool", "Sends a log message at each level; the client's level filters them",
     EMPTY_SCHEMA, logging_tool},
    {"json_schema_2020_12_tool",
     "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
     SCHEMA_2020_12, schema_2020_12},
    {"test_custom_headers",
     "Mirrors its arguments in Mcp-Param headers (x-mcp-header) and echoes what it got",
     CUSTOM_HEADERS_SCHEMA, custom_headers},
    {"test_missing_capability", "Requires the client's sampling capability (-32021 without it)",
     EMPTY_SCHEMA, missing_capability},
    {"test_trigger_tool_change", "Announces that the tool list changed", EMPTY_SCHEMA,
     tool_change},
    {"test_trigger_prompt_change", "Announces that the prompt list changed", EMPTY_SCHEMA,
     prompt_change},
    {"test_update_watched_resource", "Changes test://watched-resource; subscribers are told",
     EMPTY_SCHEMA, update_watched},
};

#define N_TOOLS (sizeof tools / sizeof *tools)

int ev_tools_build(ev *e) {
    const mcpg_host *h = e->host;
    mcpg_buf *b = &e->tools;
    int rc = h->buf_append(b, "[", 1);
    for (size_t i = 0; i < N_TOOLS && !rc; i++)
        rc = h->buf_printf(b, "%s{\"name\":\"%s\",\"description\":\"%s\",\"inputSchema\":%s}",
                           i ? "," : "", tools[i].name, tools[i].description, tools[i].schema);
    if (!rc) rc = ev_ask_list(e, b);
    if (!rc) rc = ev_input_list(e, b);
    if (!rc) rc = ev_task_tools_list(e, b);
    return rc ? rc : h->buf_append(b, "]", 1);
}

mcpg_status ev_call_tool(ev *e, mcpg_call *call) {
    const char *name = e->host->call_target(call);
    if (!name) name = "";
    for (size_t i = 0; i < N_TOOLS; i++)
        if (strcmp(tools[i].name, name) == 0) return tools[i].run(e, call);
    mcpg_status st;
    if (ev_ask_tool(e, call, name, &st) || ev_input_tool(e, call, name, &st) ||
        ev_task_tool(e, call, name, &st))
        return st;
    return mcpg_result_errorf(e->host, call, MCPG_RPC_INVALID_PARAMS, "Unknown tool: %.64s",
                              name);
}
