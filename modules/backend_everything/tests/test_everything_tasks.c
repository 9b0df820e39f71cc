/* backend_everything's tasks, on the SDK's fake host, with the module's
 * sources linked in: tools/call creates the tasks (as the kernel would
 * dispatch it), and the task methods run through the module's own
 * ev_task_request, the op the kernel will call once it routes the task methods by
 * id (until then no ABI slot reaches it).
 *
 * Both wires: the 2026-07-28 extension io.modelcontextprotocol/tasks
 * (tasks/get with the result inlined, tasks/update, tasks/cancel as an ack)
 * and 2025-11-25's experimental tasks (params.task, tasks/result that
 * waits and asks on its stream, tasks/list per session). */
#include "../everything.h"

#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXT_CAPS "{\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}"

static mcpg_fakehost *fh;
static mcpg_instance *be;
static ev *evi;

/* ---- helpers ---- */

static json_t *parsed(mcpg_call *c) {
    const char *r = mcpg_fakehost_result(c);
    return r ? json_loads(r, 0, NULL) : NULL;
}

static const char *str_at(json_t *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = o;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(tok)) : json_object_get(v, tok);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int str_is(json_t *o, const char *path, const char *want) {
    const char *s = str_at(o, path);
    return s && strcmp(s, want) == 0;
}

static uint32_t result_type(mcpg_call *c) {
    mcpg_call_outcome o;
    mcpg_fakehost_outcome(c, &o);
    return o.result_type;
}

/* A tools/call on a wire: params as given (name, arguments, task, ...). */
static mcpg_call *tool_call(const char *tool, const char *params, mcpg_wire wire,
                            const char *caps, const char *session) {
    json_t *pj = params ? json_loads(params, 0, NULL) : NULL;
    char *args = pj ? json_dumps(json_object_get(pj, "arguments"), JSON_COMPACT) : NULL;
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", tool, args, "1");
    free(args);
    json_decref(pj);
    MCPG_REQUIRE(c, "call_new");
    mcpg_fakehost_call_set_wire(c, wire);
    if (params) MCPG_REQUIRE(mcpg_fakehost_call_set_params(c, params) == 0, "params %s", params);
    if (caps) mcpg_fakehost_call_set_caps(c, caps);
    if (session) mcpg_fakehost_call_set_session(c, session);
    return c;
}

/* Create a task: the result, parsed; its id copied into id. */
static json_t *create(const char *tool, const char *params, mcpg_wire wire, const char *session,
                      char *id, size_t cap) {
    mcpg_call *c = tool_call(tool, params, wire, wire == MCPG_WIRE_STATELESS ? EXT_CAPS : NULL,
                             session);
    int st = mcpg_fakehost_run(fh, be, c, 5000);
    json_t *o = parsed(c);
    const char *tid = str_at(o, wire == MCPG_WIRE_STATELESS ? "taskId" : "task.taskId");
    MCPG_CHECK(st == MCPG_CONTINUE && result_type(c) == MCPG_RESULT_TASK && tid,
               "%s: a task: %s", tool, mcpg_fakehost_result(c) ? mcpg_fakehost_result(c) : "");
    snprintf(id, cap, "%s", tid ? tid : "");
    mcpg_fakehost_call_free(fh, c);
    return o;
}

/* A task method: its status; *out the parsed result (NULL on an error). */
static int method(ev_task_method m, const char *params, mcpg_wire wire, const char *session,
                  json_t **out, int64_t *code) {
    static const char *const names[] = {"tasks/get", "tasks/update", "tasks/cancel",
                                        "tasks/result", "tasks/list"};
    mcpg_call *c = mcpg_fakehost_call_new(fh, names[m], NULL, params, "1");
    MCPG_REQUIRE(c, "call_new");
    mcpg_fakehost_call_set_wire(c, wire);
    if (wire == MCPG_WIRE_STATELESS) mcpg_fakehost_call_set_caps(c, EXT_CAPS);
    if (session) mcpg_fakehost_call_set_session(c, session);
    mcpg_fakehost_op_begin(fh, be, c);
    int st = mcpg_fakehost_op_end(fh, c, ev_task_request(evi, mcpg_fakehost_op_call(be, c), m));
    if (st == MCPG_PENDING) st = mcpg_fakehost_wait(fh, c, 5000);
    if (out) *out = parsed(c);
    if (code) *code = mcpg_fakehost_error_code(c);
    mcpg_fakehost_call_free(fh, c);
    return st;
}

static json_t *get(const char *id, mcpg_wire wire) {
    char p[128];
    snprintf(p, sizeof p, "{\"taskId\":\"%s\"}", id);
    json_t *o = NULL;
    int64_t code = 0;
    MCPG_CHECK(method(EV_TASKS_GET, p, wire, NULL, &o, &code) == MCPG_CONTINUE,
               "tasks/get %s: error %lld", id, (long long)code);
    return o;
}

/* For messages: the object's text, in a buffer reused by the next call. */
static const char *dump(json_t *o) {
    static char buf[4096];
    size_t n = o ? json_dumpb(o, buf, sizeof buf - 1, JSON_COMPACT) : 0;
    buf[n < sizeof buf ? n : 0] = '\0';
    return buf;
}

static int is_iso(const char *s) {
    return s && strlen(s) == 24 && s[4] == '-' && s[10] == 'T' && s[23] == 'Z';
}

/* ---- the stateless wire: the 2026-07-28 extension ---- */

static void test_create_and_poll(void) {
    char id[64];
    json_t *o = create("slow_compute",
                       "{\"name\":\"slow_compute\",\"arguments\":{\"seconds\":1,\"label\":\"pi\"}}",
                       MCPG_WIRE_STATELESS, NULL, id, sizeof id);
    MCPG_CHECK(str_is(o, "status", "working") && is_iso(str_at(o, "createdAt")) &&
                   is_iso(str_at(o, "lastUpdatedAt")) &&
                   json_integer_value(json_object_get(o, "ttlMs")) > 0 &&
                   json_integer_value(json_object_get(o, "pollIntervalMs")) > 0 &&
                   !json_object_get(o, "task") && !json_object_get(o, "ttl") &&
                   !json_object_get(o, "pollInterval") && !json_object_get(o, "requestState") &&
                   !json_object_get(o, "result"),
               "a flat CreateTaskResult: %s", dump(o));
    json_decref(o);
    o = get(id, MCPG_WIRE_STATELESS);
    MCPG_CHECK(str_is(o, "taskId", id) && str_is(o, "status", "working") &&
                   !json_object_get(o, "result") && !json_object_get(o, "error"),
               "at once: durable and working");
    json_decref(o);
    /* routed by the id's head: the kernel gives the rest as call_target */
    MCPG_CHECK(strncmp(id, "everything.task-", 16) == 0, "the id names its instance: %s", id);
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tasks/get", id + 11, "{}", "1");
    mcpg_fakehost_call_set_caps(c, EXT_CAPS);
    mcpg_fakehost_op_begin(fh, be, c);
    mcpg_fakehost_op_end(fh, c, ev_task_request(evi, mcpg_fakehost_op_call(be, c), EV_TASKS_GET));
    o = parsed(c);
    MCPG_CHECK(str_is(o, "taskId", id), "found by call_target: %s", dump(o));
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    mcpg_fakehost_run_for(fh, 1100);
    o = get(id, MCPG_WIRE_STATELESS);
    MCPG_CHECK(str_is(o, "status", "completed") &&
                   str_is(o, "result.content.0.text", "Computed pi in 1 s") &&
                   !json_object_get(json_object_get(o, "result"), "_meta") &&
                   !json_object_get(o, "requestState"),
               "after a second: completed, the result inlined: %s", dump(o));
    json_decref(o);

    o = create("failing_job", "{\"name\":\"failing_job\",\"arguments\":{}}", MCPG_WIRE_STATELESS,
               NULL, id, sizeof id);
    json_decref(o);
    mcpg_fakehost_run_for(fh, 1100);
    o = get(id, MCPG_WIRE_STATELESS);
    MCPG_CHECK(str_is(o, "status", "completed") &&
                   json_is_true(json_object_get(json_object_get(o, "result"), "isError")),
               "a tool error: completed with isError");
    json_decref(o);

    o = create("protocol_error_job", "{\"name\":\"protocol_error_job\",\"arguments\":{}}",
               MCPG_WIRE_STATELESS, NULL, id, sizeof id);
    json_decref(o);
    mcpg_fakehost_run_for(fh, 1100);
    o = get(id, MCPG_WIRE_STATELESS);
    json_t *err = json_object_get(o, "error");
    MCPG_CHECK(str_is(o, "status", "failed") &&
                   json_integer_value(json_object_get(err, "code")) == MCPG_RPC_INTERNAL_ERROR &&
                   json_is_string(json_object_get(err, "message")) &&
                   !json_object_get(o, "result"),
               "a protocol error: failed with the error inlined");
    json_decref(o);
}

static void test_cancel_and_errors(void) {
    char id[64], p[128];
    json_decref(create("slow_compute", "{\"name\":\"slow_compute\",\"arguments\":{\"seconds\":60}}",
                       MCPG_WIRE_STATELESS, NULL, id, sizeof id));
    snprintf(p, sizeof p, "{\"taskId\":\"%s\"}", id);
    json_t *o = NULL;
    for (int i = 0; i < 2; i++) { /* and again, on a terminal task: the same ack */
        MCPG_CHECK(method(EV_TASKS_CANCEL, p, MCPG_WIRE_STATELESS, NULL, &o, NULL) ==
                           MCPG_CONTINUE &&
                       json_object_size(o) == 0,
                   "cancel %d: an empty ack", i);
        json_decref(o);
    }
    o = get(id, MCPG_WIRE_STATELESS);
    MCPG_CHECK(str_is(o, "status", "cancelled") && !json_object_get(o, "result"), "cancelled");
    json_decref(o);

    int64_t code = 0;
    MCPG_CHECK(method(EV_TASKS_GET, "{\"taskId\":\"tasks-conformance-nonexistent\"}",
                      MCPG_WIRE_STATELESS, NULL, NULL, &code) == MCPG_DENY &&
                   code == MCPG_RPC_INVALID_PARAMS,
               "an unknown task: -32602");
    MCPG_CHECK(method(EV_TASKS_RESULT, p, MCPG_WIRE_STATELESS, NULL, NULL, &code) == MCPG_DENY &&
                   code == MCPG_RPC_METHOD_NOT_FOUND,
               "no tasks/result in the extension: -32601");
    MCPG_CHECK(method(EV_TASKS_LIST, "{}", MCPG_WIRE_STATELESS, NULL, NULL, &code) == MCPG_DENY &&
                   code == MCPG_RPC_METHOD_NOT_FOUND,
               "no tasks/list in the extension: -32601");

    /* a client that did not declare the extension */
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tasks/get", NULL, p, "1");
    mcpg_fakehost_call_set_wire(c, MCPG_WIRE_STATELESS);
    mcpg_fakehost_call_set_caps(c, "{}");
    mcpg_fakehost_op_begin(fh, be, c);
    mcpg_fakehost_op_end(fh, c, ev_task_request(evi, mcpg_fakehost_op_call(be, c), EV_TASKS_GET));
    MCPG_CHECK(mcpg_fakehost_error_code(c) == MCPG_RPC_MISSING_CLIENT_CAPABILITY,
               "tasks/get without the extension: -32021");
    mcpg_fakehost_call_free(fh, c);

    c = tool_call("failing_job", "{\"name\":\"failing_job\",\"arguments\":{}}",
                  MCPG_WIRE_STATELESS, "{}", NULL);
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_DENY, "required, not declared");
    mcpg_call_outcome oc;
    mcpg_fakehost_outcome(c, &oc);
    json_t *d = oc.error_data ? json_loads(oc.error_data, 0, NULL) : NULL;
    MCPG_CHECK(oc.error_code == MCPG_RPC_MISSING_CLIENT_CAPABILITY && oc.http_status == 400 &&
                   json_is_object(json_object_get(
                       json_object_get(json_object_get(d, "requiredCapabilities"), "extensions"),
                       "io.modelcontextprotocol/tasks")),
               "-32021 naming the extension: %s", oc.error_data ? oc.error_data : "");
    json_decref(d);
    mcpg_fakehost_call_free(fh, c);

    c = tool_call("slow_compute", "{\"name\":\"slow_compute\",\"arguments\":{\"seconds\":0}}",
                  MCPG_WIRE_STATELESS, "{}", NULL);
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE &&
                   result_type(c) == MCPG_RESULT_COMPLETE &&
                   strstr(mcpg_fakehost_result(c), "Computed unlabelled in 0 s"),
               "optional, not declared: the answer itself");
    mcpg_fakehost_call_free(fh, c);
    c = tool_call("greet", "{\"name\":\"greet\",\"arguments\":{\"name\":\"Ann\"},\"task\":{\"ttl\":"
                  "60000}}", MCPG_WIRE_STATELESS, EXT_CAPS, NULL);
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE &&
                   result_type(c) == MCPG_RESULT_COMPLETE &&
                   strstr(mcpg_fakehost_result(c), "Hello, Ann!"),
               "greet is never a task");
    mcpg_fakehost_call_free(fh, c);
}

static void test_input(void) {
    char id[64], p[256];
    json_decref(create("confirm_delete",
                       "{\"name\":\"confirm_delete\",\"arguments\":{\"filename\":\"f.txt\"}}",
                       MCPG_WIRE_STATELESS, NULL, id, sizeof id));
    json_t *o = get(id, MCPG_WIRE_STATELESS);
    MCPG_CHECK(str_is(o, "status", "input_required") &&
                   str_is(o, "inputRequests.confirm.method", "elicitation/create") &&
                   str_is(o, "inputRequests.confirm.params.message", "Delete f.txt?"),
               "asks to confirm: %s", dump(o));
    json_decref(o);
    int64_t code = 0;
    snprintf(p, sizeof p, "{\"taskId\":\"%s\",\"inputResponses\":7}", id);
    MCPG_CHECK(method(EV_TASKS_UPDATE, p, MCPG_WIRE_STATELESS, NULL, NULL, &code) == MCPG_DENY &&
                   code == MCPG_RPC_INVALID_PARAMS,
               "inputResponses not an object: -32602");
    snprintf(p, sizeof p,
             "{\"taskId\":\"%s\",\"inputResponses\":{\"unknown\":{},\"confirm\":{\"action\":"
             "\"accept\",\"content\":{\"confirm\":true}}}}", id);
    MCPG_CHECK(method(EV_TASKS_UPDATE, p, MCPG_WIRE_STATELESS, NULL, &o, NULL) == MCPG_CONTINUE &&
                   json_object_size(o) == 0,
               "update: an empty ack");
    json_decref(o);
    o = get(id, MCPG_WIRE_STATELESS);
    MCPG_CHECK(str_is(o, "status", "completed") &&
                   str_is(o, "result.content.0.text", "Deleted f.txt"),
               "resumed to completed: %s", dump(o));
    json_decref(o);

    json_decref(create("multi_input", "{\"name\":\"multi_input\",\"arguments\":{}}",
                       MCPG_WIRE_STATELESS, NULL, id, sizeof id));
    snprintf(p, sizeof p, "{\"taskId\":\"%s\",\"inputResponses\":{\"first\":{\"action\":"
             "\"accept\",\"content\":{\"name\":\"Ann\"}}}}", id);
    MCPG_CHECK(method(EV_TASKS_UPDATE, p, MCPG_WIRE_STATELESS, NULL, NULL, NULL) == MCPG_CONTINUE,
               "a partial update");
    o = get(id, MCPG_WIRE_STATELESS);
    json_t *reqs = json_object_get(o, "inputRequests");
    MCPG_CHECK(str_is(o, "status", "input_required") && json_object_size(reqs) == 1 &&
                   json_object_get(reqs, "second"),
               "only the unanswered key is left: %s", dump(o));
    json_decref(o);
    snprintf(p, sizeof p, "{\"taskId\":\"%s\",\"inputResponses\":{\"second\":{\"action\":"
             "\"accept\",\"content\":{\"name\":\"Bo\"}}}}", id);
    method(EV_TASKS_UPDATE, p, MCPG_WIRE_STATELESS, NULL, NULL, NULL);
    o = get(id, MCPG_WIRE_STATELESS);
    MCPG_CHECK(str_is(o, "result.content.0.text", "Received Ann and Bo"), "both answers");
    json_decref(o);

    /* input_required first (no task), then the task with the name */
    mcpg_call *c = tool_call("test_tool_with_task", "{\"name\":\"test_tool_with_task\","
                             "\"arguments\":{}}", MCPG_WIRE_STATELESS, EXT_CAPS, NULL);
    mcpg_fakehost_run(fh, be, c, 5000);
    o = parsed(c);
    MCPG_CHECK(result_type(c) == MCPG_RESULT_INPUT_REQUIRED &&
                   str_is(o, "inputRequests.user_name.method", "elicitation/create") &&
                   !json_object_get(o, "taskId"),
               "round 1: input_required, no task");
    json_decref(o);
    mcpg_fakehost_call_free(fh, c);
    o = create("test_tool_with_task", "{\"name\":\"test_tool_with_task\",\"arguments\":{},"
               "\"inputResponses\":{\"user_name\":{\"action\":\"accept\",\"content\":{\"name\":"
               "\"Alice\"}}},\"requestState\":\"x\"}", MCPG_WIRE_STATELESS, NULL, id, sizeof id);
    MCPG_CHECK(!json_object_get(o, "requestState") && !json_object_get(o, "inputRequests"),
               "round 2: a plain CreateTaskResult");
    json_decref(o);
    mcpg_fakehost_run_for(fh, 600);
    o = get(id, MCPG_WIRE_STATELESS);
    MCPG_CHECK(str_is(o, "status", "completed") &&
                   str_is(o, "result.content.0.text", "Hello, Alice! (from a task)"),
               "the name reaches the task's result: %s", dump(o));
    json_decref(o);
}

/* ---- the legacy wire: 2025-11-25 ---- */

static void test_legacy(void) {
    char id[64], p[128];
    json_t *o = create("slow_compute", "{\"name\":\"slow_compute\",\"arguments\":{\"seconds\":1},"
                       "\"task\":{\"ttl\":5000}}", MCPG_WIRE_LEGACY, "s1", id, sizeof id);
    MCPG_CHECK(str_is(o, "task.status", "working") &&
                   json_integer_value(json_object_get(json_object_get(o, "task"), "ttl")) == 5000 &&
                   json_object_get(json_object_get(o, "task"), "pollInterval") &&
                   !json_object_get(o, "taskId"),
               "2025's CreateTaskResult: %s", dump(o));
    json_decref(o);
    snprintf(p, sizeof p, "{\"taskId\":\"%s\"}", id);
    int64_t code = 0;
    MCPG_CHECK(method(EV_TASKS_GET, p, MCPG_WIRE_LEGACY, "s2", NULL, &code) == MCPG_DENY &&
                   code == MCPG_RPC_INVALID_PARAMS,
               "another session's task is unknown");
    uint64_t t0 = mcpg_fakehost_host(fh)->mono_us();
    MCPG_CHECK(method(EV_TASKS_RESULT, p, MCPG_WIRE_LEGACY, "s1", &o, NULL) == MCPG_CONTINUE &&
                   mcpg_fakehost_host(fh)->mono_us() - t0 >= 500000 &&
                   str_is(o, "content.0.text", "Computed unlabelled in 1 s") &&
                   str_is(json_object_get(json_object_get(o, "_meta"),
                                          "io.modelcontextprotocol/related-task"),
                          "taskId", id),
               "tasks/result waits for the end: %s", dump(o));
    json_decref(o);
    MCPG_CHECK(method(EV_TASKS_CANCEL, p, MCPG_WIRE_LEGACY, "s1", NULL, &code) == MCPG_DENY &&
                   code == MCPG_RPC_INVALID_PARAMS,
               "cancelling a finished task: -32602");

    json_decref(create("confirm_delete", "{\"name\":\"confirm_delete\",\"arguments\":"
                       "{\"filename\":\"g.txt\"},\"task\":{}}", MCPG_WIRE_LEGACY, "s1", id,
                       sizeof id));
    snprintf(p, sizeof p, "{\"taskId\":\"%s\"}", id);
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tasks/result", NULL, p, "1");
    mcpg_fakehost_call_set_wire(c, MCPG_WIRE_LEGACY);
    mcpg_fakehost_call_set_session(c, "s1");
    mcpg_fakehost_op_begin(fh, be, c);
    int st = mcpg_fakehost_op_end(
        fh, c, ev_task_request(evi, mcpg_fakehost_op_call(be, c), EV_TASKS_RESULT));
    const char *m = mcpg_fakehost_message(c, 0);
    MCPG_CHECK(st == MCPG_PENDING && m && strstr(m, "elicitation/create") &&
                   strstr(m, "Delete g.txt?"),
               "tasks/result asks on its stream: %s", m ? m : "(nothing)");
    mcpg_fakehost_reply(fh, c, 0, "{\"action\":\"accept\",\"content\":{\"confirm\":true}}");
    st = mcpg_fakehost_wait(fh, c, 5000);
    MCPG_CHECK(st == MCPG_CONTINUE && strstr(mcpg_fakehost_result(c), "Deleted g.txt"),
               "then answers: %s", mcpg_fakehost_result(c) ? mcpg_fakehost_result(c) : "");
    mcpg_fakehost_call_free(fh, c);

    json_decref(create("slow_compute", "{\"name\":\"slow_compute\",\"arguments\":{\"seconds\":60},"
                       "\"task\":{}}", MCPG_WIRE_LEGACY, "s2", id, sizeof id));
    snprintf(p, sizeof p, "{\"taskId\":\"%s\"}", id);
    MCPG_CHECK(method(EV_TASKS_CANCEL, p, MCPG_WIRE_LEGACY, "s2", &o, NULL) == MCPG_CONTINUE &&
                   str_is(o, "status", "cancelled") && str_is(o, "taskId", id),
               "cancel answers the Task");
    json_decref(o);
    MCPG_CHECK(method(EV_TASKS_LIST, "{}", MCPG_WIRE_LEGACY, "s2", &o, NULL) == MCPG_CONTINUE &&
                   json_array_size(json_object_get(o, "tasks")) == 1 &&
                   str_is(o, "tasks.0.taskId", id),
               "tasks/list: the session's own: %s", dump(o));
    json_decref(o);
    MCPG_CHECK(method(EV_TASKS_UPDATE, p, MCPG_WIRE_LEGACY, "s2", NULL, &code) == MCPG_DENY &&
                   code == MCPG_RPC_METHOD_NOT_FOUND,
               "no tasks/update in 2025: -32601");

    c = tool_call("failing_job", "{\"name\":\"failing_job\",\"arguments\":{}}", MCPG_WIRE_LEGACY,
                  NULL, "s1");
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_DENY &&
                   mcpg_fakehost_error_code(c) == MCPG_RPC_METHOD_NOT_FOUND,
               "2025: a required tool without params.task is -32601");
    mcpg_fakehost_call_free(fh, c);
}

/* ---- waiting, and the store's bound ---- */

static void test_wait_and_bound(void) {
    for (int inl = 0; inl < 2; inl++) { /* no task: the wait is a timer, cancellable */
        mcpg_fakehost_set_inline(be, inl);
        mcpg_call *c = tool_call("slow_compute", "{\"name\":\"slow_compute\",\"arguments\":"
                                 "{\"seconds\":1}}", MCPG_WIRE_STATELESS, "{}", NULL);
        uint64_t t0 = mcpg_fakehost_host(fh)->mono_us();
        MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE &&
                       mcpg_fakehost_host(fh)->mono_us() - t0 >= 900000,
                   "slow_compute without a task waits a second (inline %d)", inl);
        mcpg_fakehost_call_free(fh, c);
        c = tool_call("slow_compute", "{\"name\":\"slow_compute\",\"arguments\":{\"seconds\":30}}",
                      MCPG_WIRE_STATELESS, "{}", NULL);
        MCPG_CHECK(mcpg_fakehost_dispatch(fh, be, c) == MCPG_PENDING, "pending");
        mcpg_fakehost_wait(fh, c, 20);
        mcpg_fakehost_host(fh)->call_cancel(c);
        MCPG_CHECK(mcpg_fakehost_wait(fh, c, 2000) == MCPG_DENY &&
                       mcpg_fakehost_error_code(c) == MCPG_RPC_SERVER_ERROR,
                   "the client left: answered at once (inline %d)", inl);
        mcpg_fakehost_call_free(fh, c);
    }
    mcpg_fakehost_set_inline(be, 0);

    /* full of tasks within their ttl: refused (503); once they expire, room again */
    char id[64];
    int made = 0, refused = 0;
    for (int i = 0; i < 200 && !refused; i++) {
        mcpg_call *c = tool_call("slow_compute", "{\"name\":\"slow_compute\",\"arguments\":{},"
                                 "\"task\":{\"ttl\":1000}}", MCPG_WIRE_LEGACY, NULL, "s3");
        mcpg_fakehost_run(fh, be, c, 5000);
        mcpg_call_outcome oc;
        mcpg_fakehost_outcome(c, &oc);
        if (oc.is_error) refused = oc.error_code == MCPG_RPC_SERVER_ERROR && oc.http_status == 503;
        else made++;
        mcpg_fakehost_call_free(fh, c);
    }
    MCPG_CHECK(refused && made > 0 && made <= 64, "bounded: %d made, then 503", made);
    mcpg_fakehost_run_for(fh, 1100);
    json_decref(create("slow_compute", "{\"name\":\"slow_compute\",\"arguments\":{},"
                       "\"task\":{\"ttl\":1000}}", MCPG_WIRE_LEGACY, "s3", id, sizeof id));
}

int main(void) {
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fake host");
    mcpg_fakehost_set_quiet(fh, getenv("MCPG_TEST_VERBOSE") == NULL);
    MCPG_REQUIRE(mcpg_fakehost_load(fh, mcpg_module_entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR),
                                    "everything", NULL, &be) == 0,
                 "load: %s", mcpg_fakehost_report_text(fh));
    evi = mcpg_fakehost_state(be);
    test_create_and_poll();
    test_cancel_and_errors();
    test_input();
    test_legacy();
    test_wait_and_bound();
    MCPG_CHECK(mcpg_fakehost_failures(fh) == 0, "no module bug seen: %s", mcpg_fakehost_log_text(fh));
    MCPG_CHECK(mcpg_fakehost_unload(fh, be) == 0, "unload");
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "free: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_everything_tasks");
}
