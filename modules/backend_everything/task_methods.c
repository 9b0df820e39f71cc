/* The task methods, for the tasks this instance created.
 *
 *   stateless (2026-07-28 extension)   legacy (2025-11-25, experimental)
 *   tasks/get: DetailedTask            tasks/get: the Task
 *     (result | error | inputRequests)
 *   tasks/update: inputResponses, {}   -
 *   tasks/cancel: {}, idempotent       tasks/cancel: the Task; -32602 once terminal
 *   -                                  tasks/result: waits for the end, then the
 *                                        result (or the error); asks the client
 *                                        on this stream for what the task needs
 *   -                                  tasks/list: the session's tasks
 *
 * An id this instance does not know (or that expired, or another session's)
 * is -32602. On the stateless wire a client that did not declare the
 * extension gets -32021. */
#include "tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TASKS_EXT "io.modelcontextprotocol/tasks"

static const char *const method_names[] = {"tasks/get", "tasks/update", "tasks/cancel",
                                           "tasks/result", "tasks/list"};

/* ---- what the call names ---- */

/* The task's id: params.taskId as the client sent it, or, when the kernel
 * routed the call by the id's "<instance>." head, call_target (the rest)
 * with the head put back. */
static int task_id(ev *e, mcpg_call *call, char *id, size_t cap, size_t *n) {
    const mcpg_host *h = e->host;
    const char *target = h->call_target(call);
    if (target && target[0]) {
        const char *inst = h->instance_name(e->self);
        int k = snprintf(id, cap, "%.64s.%s", inst ? inst : "everything", target);
        *n = k > 0 ? (size_t)k : 0;
        return k > 0 && (size_t)k < cap;
    }
    size_t pn;
    const char *params = h->call_params(call, &pn);
    mcpg_json_span v;
    return ev_json_at(h, params, pn, &v, "taskId", (const char *)NULL) &&
           v.type == MCPG_JSON_STRING && h->json_string_decode(&v, id, cap, n) == 0;
}

/* The task, found with the store locked (unlocked again when NULL). */
static ev_task *find_locked(ev *e, mcpg_call *call, const char *id, size_t n) {
    const mcpg_host *h = e->host;
    ev_tasks_lock(e);
    ev_task *t = ev_task_find(e, id, n);
    if (t && h->call_wire(call) == MCPG_WIRE_LEGACY && t->session[0]) {
        size_t sn = 0;
        const char *s = MCPG_HOST_HAS(h, call_session) ? h->call_session(call, &sn) : NULL;
        if (!s || sn != strlen(t->session) || memcmp(s, t->session, sn) != 0) t = NULL;
    }
    if (!t) ev_tasks_unlock(e);
    return t;
}

static mcpg_status unknown(ev *e, mcpg_call *call, const char *id) {
    return mcpg_result_errorf(e->host, call, MCPG_RPC_INVALID_PARAMS, "Unknown task: %.64s", id);
}

static mcpg_status answer_buf(ev *e, mcpg_call *call, int rc, mcpg_buf *b) {
    mcpg_status st = rc ? mcpg_result_errorf(e->host, call, MCPG_RPC_INTERNAL_ERROR,
                                             "out of memory")
                        : (e->host->call_result(call, b->data, b->len) == 0
                               ? MCPG_CONTINUE
                               : mcpg_result_errorf(e->host, call, MCPG_RPC_INTERNAL_ERROR,
                                                    "out of memory"));
    e->host->buf_free(b);
    return st;
}

/* ---- tasks/get ---- */

/* The stateless wire's DetailedTask: what it ended with, or what it asks. */
static int detail(ev *e, const ev_task *t, mcpg_buf *b) {
    const mcpg_host *h = e->host;
    ev_task_status s = ev_task_status_now(e, t);
    ev_job_end end;
    if (s == EV_TASK_COMPLETED || s == EV_TASK_FAILED) {
        int rc = h->buf_append(b, s == EV_TASK_FAILED ? ",\"error\":" : ",\"result\":",
                               s == EV_TASK_FAILED ? 9 : 10);
        return rc ? rc : ev_task_outcome(e, t, b, &end);
    }
    if (s == EV_TASK_INPUT_REQUIRED) {
        int rc = h->buf_append(b, ",\"inputRequests\":", 17);
        return rc ? rc : ev_task_input_requests(e, t, b);
    }
    return 0;
}

static mcpg_status get(ev *e, mcpg_call *call, ev_task *t) {
    mcpg_buf b = {0};
    int rc = e->host->buf_append(&b, "{", 1);
    rc = rc ? rc : ev_task_members(e, t, &b);
    if (!rc && t->wire == MCPG_WIRE_STATELESS) rc = detail(e, t, &b);
    rc = rc ? rc : e->host->buf_append(&b, "}", 1);
    ev_tasks_unlock(e);
    return answer_buf(e, call, rc, &b);
}

/* ---- tasks/update (stateless): answers to what the task asked ---- */

static mcpg_status update(ev *e, mcpg_call *call, ev_task *t) {
    const mcpg_host *h = e->host;
    size_t n;
    const char *params = h->call_params(call, &n);
    mcpg_json_span all, v;
    if (!ev_json_at(h, params, n, &all, "inputResponses", (const char *)NULL) ||
        all.type != MCPG_JSON_OBJECT) {
        ev_tasks_unlock(e);
        return mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS,
                                  "Invalid params: inputResponses must be an object");
    }
    char summary[128];
    for (int i = 0; i < EV_TASK_INPUTS && t->job->keys[i]; i++) /* other keys: ignored */
        if ((t->pending & (1u << i)) && !t->cancelled &&
            h->json_object_get(all.p, all.n, t->job->keys[i], &v) == 1 &&
            v.type == MCPG_JSON_OBJECT) {
            ev_task_summarize(h, v.p, v.n, summary, sizeof summary);
            ev_task_answer(e, t, i, summary);
        }
    ev_tasks_unlock(e);
    return h->call_result(call, "{}", 2) == 0
               ? MCPG_CONTINUE
               : mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
}

/* ---- tasks/cancel ---- */

static mcpg_status cancel(ev *e, mcpg_call *call, ev_task *t) {
    const mcpg_host *h = e->host;
    if (t->wire == MCPG_WIRE_STATELESS) { /* an ack, whatever the status was */
        ev_task_cancel(e, t);
        ev_tasks_unlock(e);
        return h->call_result(call, "{}", 2) == 0
                   ? MCPG_CONTINUE
                   : mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
    }
    ev_task_status s = ev_task_status_now(e, t);
    if (s == EV_TASK_COMPLETED || s == EV_TASK_FAILED || s == EV_TASK_CANCELLED) {
        ev_tasks_unlock(e);
        return mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS,
                                  "Cannot cancel task: already %s", ev_task_status_name(s));
    }
    ev_task_cancel(e, t);
    return get(e, call, t);
}

/* ---- tasks/result (legacy): wait for the end ---- */

static mcpg_status result_again(ev *e, mcpg_call *call) {
    return ev_task_request(e, call, EV_TASKS_RESULT);
}

/* The task's end as this call's answer, tagged with the task it is of. */
static mcpg_status ended(ev *e, mcpg_call *call, ev_task *t, ev_task_status s) {
    const mcpg_host *h = e->host;
    mcpg_buf b = {0};
    ev_job_end end = EV_JOB_OK;
    char text[512];
    int rc = s == EV_TASK_CANCELLED ? 0 : ev_task_outcome(e, t, &b, &end);
    t->job->end(t, text, sizeof text);
    char id[EV_TASK_ID_MAX];
    memcpy(id, t->id, sizeof id);
    ev_tasks_unlock(e);
    if (s == EV_TASK_CANCELLED || (!rc && end == EV_JOB_PROTOCOL_ERROR)) {
        h->buf_free(&b);
        return s == EV_TASK_CANCELLED
                   ? mcpg_result_errorf(h, call, MCPG_RPC_SERVER_ERROR, "Task was cancelled")
                   : mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "%s", text);
    }
    if (!rc) {
        b.len--; /* the closing brace: _meta goes in */
        rc = h->buf_printf(&b, ",\"_meta\":{\"io.modelcontextprotocol/related-task\":"
                               "{\"taskId\":\"%s\"}}}", id);
    }
    return answer_buf(e, call, rc, &b);
}

/* The task needs the client's answer: asked on this call's stream (the
 * 2025 side channel), recorded when it comes, then the wait goes on. */
typedef struct input_wait {
    ev_waiting base; /* first: the call's slot holds it */
    ev *e;
    mcpg_call *call;
    char id[EV_TASK_ID_MAX];
    int key;
    int answered; /* cancel answered the call: the reply only frees */
} input_wait;

static void input_replied(void *arg, const mcpg_reply *r) {
    input_wait *w = arg;
    ev *e = w->e;
    if (w->answered || r->status == MCPG_ECANCELED) {
        free(w);
        return;
    }
    mcpg_call *call = w->call;
    void **slot = e->host->call_slot(call, e->self);
    if (slot) *slot = NULL;
    char summary[128] = "cancel";
    if (r->status == 0 && !r->is_error)
        ev_task_summarize(e->host, r->result_json, r->result_len, summary, sizeof summary);
    ev_tasks_lock(e);
    ev_task *t = ev_task_find(e, w->id, strlen(w->id));
    if (t && (t->pending & (1u << w->key))) ev_task_answer(e, t, w->key, summary);
    ev_tasks_unlock(e);
    free(w);
    mcpg_status st = result_again(e, call);
    if (st != MCPG_PENDING) e->host->call_resume(call, st);
}

static void input_cancel(ev *e, ev_waiting *base) {
    input_wait *w = (input_wait *)base;
    w->answered = 1;
    e->host->call_error(w->call, MCPG_RPC_SERVER_ERROR, "request cancelled", NULL);
    e->host->call_resume(w->call, MCPG_DENY);
}

static mcpg_status ask_input(ev *e, mcpg_call *call, ev_task *t) {
    const mcpg_host *h = e->host;
    int key = 0;
    while (!(t->pending & (1u << key))) key++;
    mcpg_buf req = {0};
    int rc = t->job->request(h, t, key, &req);
    input_wait *w = rc ? NULL : calloc(1, sizeof *w);
    if (w) {
        *w = (input_wait){.base = {input_cancel}, .e = e, .call = call, .key = key};
        memcpy(w->id, t->id, sizeof w->id);
    }
    ev_tasks_unlock(e);
    mcpg_json_span m, p;
    void **slot = h->call_slot(call, e->self);
    if (!w || !slot || !MCPG_HOST_HAS(h, call_request) ||
        !ev_json_at(h, req.data, req.len, &m, "method", (const char *)NULL) ||
        !ev_json_at(h, req.data, req.len, &p, "params", (const char *)NULL)) {
        free(w);
        h->buf_free(&req);
        return mcpg_result_errorf(h, call, MCPG_RPC_SERVER_ERROR,
                                  "the task needs input this gateway cannot ask for");
    }
    char method[64];
    ev_json_str(h, &m, method, sizeof method);
    *slot = w; /* before the request: its reply may come before we return */
    rc = h->call_request(call, method, p.p, p.n, (uint64_t)e->cfg->request_timeout_ms,
                         input_replied, w);
    h->buf_free(&req);
    if (rc == 0) return MCPG_PENDING;
    *slot = NULL;
    free(w);
    return mcpg_result_errorf(h, call, MCPG_RPC_SERVER_ERROR,
                              "the task needs input this stream cannot carry: %s",
                              h->strerror(rc));
}

static mcpg_status result(ev *e, mcpg_call *call, ev_task *t) {
    ev_task_status s = ev_task_status_now(e, t);
    if (s == EV_TASK_INPUT_REQUIRED) return ask_input(e, call, t);
    if (s != EV_TASK_WORKING) return ended(e, call, t, s);
    uint64_t ms = ev_task_due_in_ms(e, t);
    ev_tasks_unlock(e);
    return ev_later(e, call, ms ? ms : 1, result_again);
}

/* ---- tasks/list (legacy): this session's tasks ---- */

/* Append a JSON array of the calling session's tasks to out. */
int ev_tasks_append(ev *e, mcpg_call *call, mcpg_buf *out) {
    const mcpg_host *h = e->host;
    size_t sn = 0;
    const char *s = MCPG_HOST_HAS(h, call_session) ? h->call_session(call, &sn) : NULL;
    int rc = h->buf_append(out, "[", 1);
    int first = 1;
    ev_tasks_lock(e);
    for (size_t i = 0; i < ev_tasks_slots() && !rc; i++) {
        ev_task *t = ev_task_slot(e, i);
        if (!t || t->wire != MCPG_WIRE_LEGACY || strlen(t->session) != sn ||
            (sn && memcmp(t->session, s, sn) != 0))
            continue;
        rc = h->buf_append(out, first ? "{" : ",{", first ? 1 : 2);
        rc = rc ? rc : ev_task_members(e, t, out);
        rc = rc ? rc : h->buf_append(out, "}", 1);
        first = 0;
    }
    ev_tasks_unlock(e);
    return rc ? rc : h->buf_append(out, "]", 1);
}

static mcpg_status list(ev *e, mcpg_call *call) {
    const mcpg_host *h = e->host;
    mcpg_buf b = {0};
    int rc = h->buf_append(&b, "{\"tasks\":", 9);
    rc = rc ? rc : ev_tasks_append(e, call, &b);
    rc = rc ? rc : h->buf_append(&b, "}", 1);
    return answer_buf(e, call, rc, &b);
}

/* ---- dispatch ---- */

mcpg_status ev_task_request(ev *e, mcpg_call *call, ev_task_method method) {
    const mcpg_host *h = e->host;
    int stateless = h->call_wire(call) == MCPG_WIRE_STATELESS;
    if (stateless && !ev_client_has_extension(h, call, TASKS_EXT)) {
        h->call_error(call, MCPG_RPC_MISSING_CLIENT_CAPABILITY,
                      "Missing required client capability: extension " TASKS_EXT,
                      "{\"requiredCapabilities\":{\"extensions\":{\"" TASKS_EXT "\":{}}}}");
        h->call_set_http(call, 400, 0);
        return MCPG_DENY;
    }
    int offered = stateless ? method <= EV_TASKS_CANCEL : method != EV_TASKS_UPDATE;
    if (!offered) {
        if (stateless) h->call_set_http(call, 404, 0);
        return mcpg_result_errorf(h, call, MCPG_RPC_METHOD_NOT_FOUND, "Method not found: %s",
                                  method_names[method]);
    }
    if (method == EV_TASKS_LIST) return list(e, call);
    char id[EV_TASK_ID_MAX + 16];
    size_t n = 0;
    if (!task_id(e, call, id, sizeof id, &n))
        return mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS,
                                  "Invalid params: taskId must be a string");
    ev_task *t = find_locked(e, call, id, n);
    if (!t) return unknown(e, call, id);
    switch (method) {
    case EV_TASKS_GET: return get(e, call, t);
    case EV_TASKS_UPDATE: return update(e, call, t);
    case EV_TASKS_CANCEL: return cancel(e, call, t);
    default: return result(e, call, t);
    }
}
