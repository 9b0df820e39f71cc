/* The task fixtures (the tasks-* scenarios' server: greet, slow_compute,
 * failing_job, protocol_error_job, confirm_delete, multi_input,
 * test_tool_with_task) and how a tools/call becomes a task.
 *
 * Who asks for a task: on the stateless wire (the 2026-07-28 extension
 * io.modelcontextprotocol/tasks) a client that declares the extension in
 * its request's capabilities, and the server decides; on the legacy wire
 * (2025-11-25, experimental) a client that sends params.task. A tool
 * whose taskSupport is "required" refuses the others (-32021 naming the
 * extension, or 2025's -32601); an "optional" one runs without a task. */
#include "tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TASKS_EXT "io.modelcontextprotocol/tasks"
#define ASK_NAME_SCHEMA                                                                     \
    "\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}}," \
    "\"required\":[\"name\"]}"

/* ---- arguments ---- */

static void arg_str(ev *e, mcpg_call *call, const char *key, const char *dflt, char *out,
                    size_t cap) {
    size_t n;
    const char *args = e->host->call_args(call, &n);
    mcpg_json_span v;
    snprintf(out, cap, "%s", dflt);
    if (e->host->json_object_get(args, n, key, &v) == 1 && v.type == MCPG_JSON_STRING)
        ev_json_str(e->host, &v, out, cap);
}

/* seconds: an integer 0..600 (0 when absent); -1 when it is anything else. */
static int arg_seconds(ev *e, mcpg_call *call) {
    size_t n;
    const char *args = e->host->call_args(call, &n);
    mcpg_json_span v;
    int64_t s = 0;
    if (e->host->json_object_get(args, n, "seconds", &v) != 1) return 0;
    if (v.type != MCPG_JSON_NUMBER || e->host->json_int64(&v, &s) != 0 || s < 0 || s > 600)
        return -1;
    return (int)s;
}

/* The answer to key i, with "accept:" taken off. */
static const char *answered(const ev_task *t, int i) {
    const char *a = t->answers[i];
    return strncmp(a, "accept:", 7) == 0 ? a + 7 : a;
}

/* ---- the jobs ---- */

static int slow_start(ev *e, mcpg_call *call, ev_task *t) {
    int s = arg_seconds(e, call);
    if (s < 0) return -1;
    t->number = s;
    t->due_us = e->host->mono_us() + (uint64_t)s * 1000000;
    arg_str(e, call, "label", "unlabelled", t->arg, sizeof t->arg);
    return 0;
}

static ev_job_end slow_end(const ev_task *t, char *text, size_t cap) {
    snprintf(text, cap, "Computed %s in %d s", t->arg, t->number);
    return EV_JOB_OK;
}

static mcpg_status slow_answer(ev *e, mcpg_call *call) {
    ev_task t = {0};
    slow_start(e, call, &t);
    char text[256];
    slow_end(&t, text, sizeof text);
    return ev_textf(e, call, 0, "%s", text);
}

/* Without a task: the same wait, on a timer, never blocking the loop. */
static mcpg_status slow_sync(ev *e, mcpg_call *call) {
    int s = arg_seconds(e, call);
    if (s < 0)
        return mcpg_result_errorf(e->host, call, MCPG_RPC_INVALID_PARAMS,
                                  "seconds must be an integer from 0 to 600");
    return s == 0 ? slow_answer(e, call) : ev_later(e, call, (uint64_t)s * 1000, slow_answer);
}

static ev_job_end failing_end(const ev_task *t, char *text, size_t cap) {
    (void)t;
    snprintf(text, cap, "failing_job failed, as it always does");
    return EV_JOB_TOOL_ERROR;
}

static ev_job_end protocol_end(const ev_task *t, char *text, size_t cap) {
    (void)t;
    snprintf(text, cap, "protocol_error_job hit an internal error");
    return EV_JOB_PROTOCOL_ERROR;
}

static int file_start(ev *e, mcpg_call *call, ev_task *t) {
    arg_str(e, call, "filename", "unnamed.txt", t->arg, sizeof t->arg);
    return 0;
}

static int confirm_request(const mcpg_host *h, const ev_task *t, int i, mcpg_buf *out) {
    (void)i;
    static const char head[] = "{\"method\":\"elicitation/create\",\"params\":{\"mode\":"
                               "\"form\",\"message\":";
    int rc = h->buf_append(out, head, sizeof head - 1);
    char msg[200];
    int n = snprintf(msg, sizeof msg, "Delete %s?", t->arg);
    rc = rc ? rc : h->buf_append_json_string(out, msg, (size_t)n);
    return rc ? rc
              : h->buf_printf(out, ",\"requestedSchema\":{\"type\":\"object\",\"properties\":"
                                   "{\"confirm\":{\"type\":\"boolean\"}},\"required\":"
                                   "[\"confirm\"]}}}");
}

static ev_job_end confirm_end(const ev_task *t, char *text, size_t cap) {
    int yes = strcmp(t->answers[0], "accept:true") == 0;
    snprintf(text, cap, "%s %s", yes ? "Deleted" : "Kept", t->arg);
    return EV_JOB_OK;
}

static int name_request(const mcpg_host *h, const ev_task *t, int i, mcpg_buf *out) {
    (void)t;
    return h->buf_printf(out, "{\"method\":\"elicitation/create\",\"params\":{\"mode\":\"form\","
                              "\"message\":\"%s\"," ASK_NAME_SCHEMA "}}",
                         i ? "Who else?" : "What is your name?");
}

static ev_job_end multi_end(const ev_task *t, char *text, size_t cap) {
    snprintf(text, cap, "Received %s and %s", answered(t, 0), answered(t, 1));
    return EV_JOB_OK;
}

static ev_job_end hello_end(const ev_task *t, char *text, size_t cap) {
    snprintf(text, cap, "Hello, %s! (from a task)", answered(t, 0));
    return EV_JOB_OK;
}

#define NO_ARGS "{\"type\":\"object\",\"properties\":{}}"

static const ev_job jobs[] = {
    {"slow_compute", "Waits `seconds` seconds, then answers; a task when the client asks",
     "{\"type\":\"object\",\"properties\":{\"seconds\":{\"type\":\"integer\",\"minimum\":0,"
     "\"maximum\":600},\"label\":{\"type\":\"string\"}}}",
     "optional", 0, {NULL}, NULL, slow_end, slow_start, slow_sync},
    {"failing_job", "A task that ends with a tool error after a second", NO_ARGS, "required",
     1000, {NULL}, NULL, failing_end, NULL, NULL},
    {"protocol_error_job", "A task that fails with a protocol error after a second", NO_ARGS,
     "required", 1000, {NULL}, NULL, protocol_end, NULL, NULL},
    {"confirm_delete", "A task that asks the user to confirm, then deletes (nothing)",
     "{\"type\":\"object\",\"properties\":{\"filename\":{\"type\":\"string\"}}}", "required", 0,
     {"confirm"}, confirm_request, confirm_end, file_start, NULL},
    {"multi_input", "A task that asks two questions at once", NO_ARGS, "required", 0,
     {"first", "second"}, name_request, multi_end, NULL, NULL},
    {"test_tool_with_task", "Asks the user's name (input_required), then answers as a task",
     NO_ARGS, "required", 500, {"user_name"}, name_request, hello_end, NULL, NULL},
};

#define N_JOBS (sizeof jobs / sizeof *jobs)

int ev_task_tools_list(ev *e, mcpg_buf *out) {
    int rc = e->host->buf_printf(out, ",{\"name\":\"greet\",\"description\":\"Says hello; "
                                      "never a task\",\"inputSchema\":{\"type\":\"object\","
                                      "\"properties\":{\"name\":{\"type\":\"string\"}}},"
                                      "\"execution\":{\"taskSupport\":\"forbidden\"}}");
    for (size_t i = 0; i < N_JOBS && !rc; i++)
        rc = e->host->buf_printf(out,
                                 ",{\"name\":\"%s\",\"description\":\"%s\",\"inputSchema\":%s,"
                                 "\"execution\":{\"taskSupport\":\"%s\"}}",
                                 jobs[i].name, jobs[i].description, jobs[i].schema,
                                 jobs[i].support);
    return rc;
}

/* ---- creating a task ---- */

/* The client asked for a task: the extension, or params.task (legacy). */
static int task_asked(ev *e, mcpg_call *call, mcpg_json_span *task_param) {
    const mcpg_host *h = e->host;
    if (h->call_wire(call) == MCPG_WIRE_STATELESS)
        return ev_client_has_extension(h, call, TASKS_EXT);
    size_t n;
    const char *params = h->call_params(call, &n);
    return ev_json_at(h, params, n, task_param, "task", (const char *)NULL) &&
           task_param->type == MCPG_JSON_OBJECT;
}

static mcpg_status task_required(ev *e, mcpg_call *call, const char *name) {
    const mcpg_host *h = e->host;
    if (h->call_wire(call) == MCPG_WIRE_LEGACY) /* 2025-11-25: not callable without a task */
        return mcpg_result_errorf(h, call, MCPG_RPC_METHOD_NOT_FOUND,
                                  "Tool %s requires task augmentation (taskSupport: required)",
                                  name);
    h->call_error(call, MCPG_RPC_MISSING_CLIENT_CAPABILITY,
                  "Missing required client capability: extension " TASKS_EXT,
                  "{\"requiredCapabilities\":{\"extensions\":{\"" TASKS_EXT "\":{}}}}");
    h->call_set_http(call, 400, 0);
    return MCPG_DENY;
}

/* 2025's params.task.ttl, within bounds; the default otherwise. */
static int64_t ttl_of(ev *e, const mcpg_json_span *task_param) {
    mcpg_json_span v;
    int64_t ttl = EV_TASK_TTL_MS;
    if (task_param->type == MCPG_JSON_OBJECT &&
        e->host->json_object_get(task_param->p, task_param->n, "ttl", &v) == 1 &&
        v.type == MCPG_JSON_NUMBER && e->host->json_int64(&v, &ttl) == 0) {
        if (ttl < 1000) ttl = 1000;
        if (ttl > EV_TASK_TTL_MAX_MS) ttl = EV_TASK_TTL_MAX_MS;
    }
    return ttl;
}

/* Store it and answer CreateTaskResult. `first` holds what the call said
 * (start()'s fields, an answer gathered before the task). */
static mcpg_status create(ev *e, mcpg_call *call, const ev_job *job, const ev_task *first,
                          int64_t ttl) {
    const mcpg_host *h = e->host;
    uint32_t wire = h->call_wire(call);
    mcpg_buf out = {0};
    ev_tasks_lock(e);
    ev_task *t = ev_task_add(e, job, wire, ttl);
    int rc = 0;
    if (t) {
        if (job->start) {
            memcpy(t->arg, first->arg, sizeof t->arg);
            t->number = first->number;
            t->due_us = first->due_us;
        }
        for (int i = 0; i < EV_TASK_INPUTS; i++)
            if (first->answers[i][0]) ev_task_answer(e, t, i, first->answers[i]);
        size_t sn = 0;
        const char *s = MCPG_HOST_HAS(h, call_session) ? h->call_session(call, &sn) : NULL;
        if (s && sn < sizeof t->session) memcpy(t->session, s, sn);
        rc = h->buf_append(&out, wire == MCPG_WIRE_LEGACY ? "{\"task\":{" : "{", wire == MCPG_WIRE_LEGACY ? 9 : 1);
        rc = rc ? rc : ev_task_members(e, t, &out);
        rc = rc ? rc : h->buf_append(&out, wire == MCPG_WIRE_LEGACY ? "}}" : "}", wire == MCPG_WIRE_LEGACY ? 2 : 1);
        if (rc) t->id[0] = '\0'; /* never answered: not a task */
    }
    ev_tasks_unlock(e);
    mcpg_status st;
    if (!t) {
        st = mcpg_result_errorf(h, call, MCPG_RPC_SERVER_ERROR,
                                "too many tasks: every slot holds one still within its ttl");
        h->call_set_http(call, 503, 1);
    } else {
        st = rc ? mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory")
                : mcpg_result_task(h, call, out.data, out.len);
    }
    h->buf_free(&out);
    return st;
}

/* test_tool_with_task on the stateless wire: the name comes first, by an
 * input_required round (no task yet); the round that brings it creates
 * the task. On the legacy wire the task itself asks. */
static int gathered_name(ev *e, mcpg_call *call, ev_task *first, mcpg_status *st) {
    const mcpg_host *h = e->host;
    size_t n;
    const char *params = h->call_params(call, &n);
    mcpg_json_span v;
    if (ev_json_at(h, params, n, &v, "inputResponses", "user_name", (const char *)NULL) &&
        v.type == MCPG_JSON_OBJECT) {
        ev_task_summarize(h, v.p, v.n, first->answers[0], sizeof first->answers[0]);
        return 1;
    }
    static const char ask[] = "{\"user_name\":{\"method\":\"elicitation/create\",\"params\":"
                              "{\"mode\":\"form\",\"message\":\"What is your name?\","
                              ASK_NAME_SCHEMA "}}}";
    *st = mcpg_result_input_required(h, call, ask, sizeof ask - 1, NULL, 0);
    return 0;
}

static mcpg_status greet(ev *e, mcpg_call *call) {
    char name[128];
    arg_str(e, call, "name", "World", name, sizeof name);
    return ev_textf(e, call, 0, "Hello, %s!", name);
}

int ev_task_tool(ev *e, mcpg_call *call, const char *name, mcpg_status *st) {
    if (strcmp(name, "greet") == 0) { /* a task is never asked of it: params.task is ignored */
        *st = greet(e, call);
        return 1;
    }
    const ev_job *job = NULL;
    for (size_t i = 0; i < N_JOBS && !job; i++)
        if (strcmp(jobs[i].name, name) == 0) job = &jobs[i];
    if (!job) return 0;
    mcpg_json_span task_param = {0};
    if (!task_asked(e, call, &task_param)) {
        *st = job->sync ? job->sync(e, call) : task_required(e, call, name);
        return 1;
    }
    ev_task first = {0};
    if (job->start && job->start(e, call, &first) != 0) {
        *st = mcpg_result_errorf(e->host, call, MCPG_RPC_INVALID_PARAMS,
                                 "Invalid arguments for %s", name);
        return 1;
    }
    if (job->end == hello_end && e->host->call_wire(call) == MCPG_WIRE_STATELESS &&
        !gathered_name(e, call, &first, st))
        return 1;
    *st = create(e, call, job, &first, ttl_of(e, &task_param));
    return 1;
}
