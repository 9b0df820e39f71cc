/* The pipeline: where a call goes next.
 *
 * A call walks the fixed stage order:
 *   identity → policy → limits → audit "allowed" → backend → audit
 *   "completed"/"failed" (or "denied") → the transport's complete().
 * Each op answers CONTINUE, DENY or PENDING; a PENDING op finishes later with
 * host->call_resume from any thread, and the call continues on its own loop
 * (dispatch.c brings the answer back, then calls pipeline_continue).
 *
 * run() runs the current phase's ops until one is pending or the call is
 * answered; on_status() decides, from an op's answer, where the call goes. */
#include "call_internal.h"

#include <string.h>

static bool identity_only(const mcpg_call *c);

/* ---- audit ---- */

static void audit_result(mcpg_call *c, mcpg_audit_event *ev);

static const char *audit_event_name(mcpg_call *c) {
    if (c->phase == PH_AUDIT_ALLOWED) return "mcpg.tool.call.allowed";
    if (c->denied) return "mcpg.tool.call.denied";
    return c->backend_failed ? "mcpg.tool.call.failed" : "mcpg.tool.call.completed";
}

/* The outcome's share of the "completed"/"failed"/"denied" event. */
static void audit_outcome(mcpg_call *c, mcpg_audit_event *ev) {
    if (!call_error_of(c, &ev->error_code, &ev->error_message)) {
        ev->error_code = 0;
        ev->error_message = NULL;
    }
    if (c->idx == 0) c->event_latency_us = mono_us() - c->t0; /* one for every sink */
    ev->latency_us = c->event_latency_us;
    ev->backend_us = c->tb1 > c->tb0 ? c->tb1 - c->tb0 : 0;
    audit_result(c, ev);
}

/* The arguments as the manifest's gateway.audit.arguments shows them, made
 * once per call (both events share them). Malformed arguments never reach
 * a backend, but are hidden whole here rather than shown raw. */
static void audit_args(mcpg_call *c, mcpg_audit_event *ev) {
    const redactor *r = c->gen->m->redact;
    int mode = redactor_args_mode(r);
    if (!c->d.args_json || mode == AUDIT_ARGS_OMITTED) return;
    if (!c->audit_args_made) {
        c->audit_args_made = true;
        c->audit_args.len = 0;
        int rc = mode == AUDIT_ARGS_HASHED
                     ? redact_hash(c->d.args_json, c->d.args_len, &c->audit_args)
                     : c->args_judged ? redact_json_valid(r, c->d.args_json, c->d.args_len, &c->audit_args)
                                      : redact_json(r, c->d.args_json, c->d.args_len, &c->audit_args);
        if (rc) {
            c->audit_args.len = 0;
            mcpg_buf_puts(&c->audit_args, "\"[REDACTED]\"");
        }
    }
    ev->args_json = c->audit_args.data;
    ev->args_len = c->audit_args.len;
}

/* The result, redacted, when gateway.audit.results asks for it: redacted
 * once, for the first sink; the others get the same text. */
static void audit_result(mcpg_call *c, mcpg_audit_event *ev) {
    mcpg_buf *shown = &c->audit_shown;
    const redactor *r = c->gen->m->redact;
    if (!redactor_results(r) || c->is_error || c->pool.detached) return;
    if (c->idx == 0) {
        const char *res = c->borrowed ? c->borrowed->data : c->result.data;
        size_t n = c->borrowed ? c->borrowed->len : c->result.len;
        shown->len = 0;
        if (res && n && redact_json(r, res, n, shown) != 0) shown->len = 0;
    }
    if (!shown->len) return;
    ev->result_json = shown->data;
    ev->result_len = shown->len;
}

/* The W3C traceparent header, as the request carried it when it is well
 * formed (a header lookup on the loop: the transport's request is alive
 * until the answer); one that is not is ignored, as W3C asks. */
static const char *traceparent_of(mcpg_call *c) {
    static __thread char tp[128];
    size_t n = 0;
    const char *v = c->d.header ? c->d.header(c->d.transport_ctx, "traceparent", &n) : NULL;
    if (!v || !n || n >= sizeof tp || !mcpg_traceparent_valid(v, n)) return NULL;
    memcpy(tp, v, n);
    tp[n] = '\0';
    return tp;
}

static mcpg_status emit_audit(mcpg_call *c, mcpg_instance *sink) {
    mcpg_audit_event ev = {.size = sizeof ev};
    ev.name = audit_event_name(c);
    if (c->idx == 0) { /* the first sink: the event is created here */
        c->event_seq = atomic_fetch_add(&kernel.audit_seq, 1) + 1;
        c->event_time_us = wall_us();
    }
    ev.seq = c->event_seq;
    ev.time_us = c->event_time_us;
    ev.id_json = c->d.id_json;
    ev.id_len = c->d.id_len;
    ev.method = mcpg_method_name(c->method);
    ev.backend = c->route ? c->route->backend->name : NULL;
    ev.tool = call_client_name_of(c);
    ev.principal = c->ident ? c->ident->principal : NULL;
    ev.tenant = c->ident ? c->ident->tenant : NULL;
    ev.roles_json = c->ident ? c->ident->roles_json : NULL;
    ev.auth_method = c->ident ? c->ident->method : NULL;
    ev.session = c->session.len ? c->session.data : NULL;
    ev.wire = c->d.wire;
    ev.generation = c->gen->id;
    ev.peer = c->peer[0] ? c->peer : NULL;
    ev.gateway_id = c->gen->m->id;
    ev.server = c->srv->name[0] ? c->srv->name : NULL;
    ev.traceparent = traceparent_of(c);
    if (c->denied) {
        ev.denied_stage = c->denied_stage;
        ev.denied_by = c->denied_by ? c->denied_by->name : NULL;
    }
    audit_args(c, &ev);
    if (c->phase == PH_AUDIT_DONE) audit_outcome(c, &ev);
    const mcpg_audit_ops *ops = sink->desc->ops;
    mcpg_call *h = loop_op_begin(c, CALL_STAGE_AUDIT);
    return op_settle(&c->loop_op, ops->emit(sink->state, h, &ev));
}

/* ---- the answer ---- */

void pipeline_release_limits(mcpg_call *c) {
    mcpg_instance **lim = c->srv->stage[STAGE_LIMITS];
    for (size_t i = 0; i < c->limits_acquired; i++) {
        const mcpg_limits_ops *ops = lim[i]->desc->ops;
        if (MCPG_HAS(ops, release)) ops->release(lim[i]->state, call_handle(c, CALL_STAGE_LIMITS));
    }
    c->limits_acquired = 0;
}

static void finish(mcpg_call *c) {
    if (c->trace) trace_finish(c);
    call_life_answer(c);
    /* before the answer: a scrape after it sees the call. A transport's
     * identity check for a request it answers itself (ABI 1.6) is no call of
     * its own: counted only when it refuses */
    if (!identity_only(c) || c->denied) metrics_count_call(c);
    c->phase = PH_COMPLETE;
    /* a backend still on the pool (timed out) holds its limits until it
     * ends: dispatch.c releases them then */
    if (!call_held_by(c, HOLD_BACKEND)) pipeline_release_limits(c);
    atomic_fetch_sub(&c->w->calls_in_flight, 1);
    /* detached: the backend may be looking up a header */
    if (call_held_by(c, HOLD_BACKEND)) pool_request_gone(c);
    msgs_close(c); /* what the backend sent goes out before the answer */
    c->d.complete(c->d.transport_ctx, call_handle(c, CALL_STAGE_TRANSPORT));
}

/* params.cursor of a list call: 1 with its text, 0 without, -1 malformed. */
static int list_cursor(mcpg_call *c, const char **p, size_t *n) {
    mcpg_json_span cur;
    if (!c->d.params_json) return 0;
    int r = mcpg_json_object_get(c->d.params_json, c->d.params_len, "cursor", &cur);
    if (r != 1 || cur.type == MCPG_JSON_NULL) return r < 0 ? -1 : 0;
    if (cur.type != MCPG_JSON_STRING || cur.escaped) return -1;
    *p = cur.p;
    *n = cur.n;
    return 1;
}

/* Whether any policy instance filters lists (has visible()). */
static bool lists_filtered(const mcpg_call *c) {
    for (size_t i = 0; i < c->srv->n_stage[STAGE_POLICY]; i++) {
        const mcpg_policy_ops *ops = c->srv->stage[STAGE_POLICY][i]->desc->ops;
        if (MCPG_HAS(ops, visible)) return true;
    }
    return false;
}

/* An item is shown when every policy instance that filters shows it. */
static int item_visible(void *arg, const char *kind, const char *name) {
    mcpg_call *c = arg;
    for (size_t i = 0; i < c->srv->n_stage[STAGE_POLICY]; i++) {
        mcpg_instance *p = c->srv->stage[STAGE_POLICY][i];
        const mcpg_policy_ops *ops = p->desc->ops;
        if (MCPG_HAS(ops, visible) &&
            !ops->visible(p->state, call_handle(c, CALL_STAGE_POLICY), kind, name))
            return 0;
    }
    return 1;
}

/* A merged list: the whole answer the generation keeps (borrowed while the
 * call pins it) when it fits one page and no policy filters it, else the
 * page the cursor names, of the items the caller may see. */
static void answer_list(mcpg_call *c) {
    const catalog *cat = &c->lists[c->list_kind];
    const char *cur = NULL;
    size_t cur_n = 0;
    int has = list_cursor(c, &cur, &cur_n);
    size_t page = kernel.list_page_size ? (size_t)kernel.list_page_size : 500;
    bool filtered = lists_filtered(c);
    if (has == 0 && cat->n_items <= page && !filtered) {
        c->borrowed = &cat->answer;
        return;
    }
    if (has < 0 || catalog_page(c->lists, c->list_kind, cur, cur_n, page,
                                filtered ? item_visible : NULL, c, &c->result) != 0)
        call_set_error(c, MCPG_RPC_INVALID_PARAMS, 0, "Invalid params: unknown cursor");
}

/* subscriptions/listen, submitted by the transport only to ask which of its
 * resourceSubscriptions the caller may watch. */
static bool is_listen(const mcpg_call *c) {
    static const char m[] = "subscriptions/listen";
    return c->method == MCPG_METHOD_OTHER && c->d.method_len == sizeof m - 1 &&
           memcmp(c->d.method, m, sizeof m - 1) == 0;
}

/* A virtual server's session hears only of what its server serves: a uri
 * its lists do not route is another server's (or nobody's). /mcp keeps its
 * rule: any uri its policy shows. */
static bool subscribable(const mcpg_call *c, const char *uri, size_t n) {
    return c->srv == &c->gen->servers[0] || catalog_find_resource(c->lists, uri, n) != NULL;
}

/* {"resourceSubscriptions":[the uris every policy shows the caller]}: the
 * transport subscribes those only. */
static void answer_listen(mcpg_call *c) {
    mcpg_json_span notif, uris, u;
    mcpg_buf *out = &c->result;
    out->len = 0;
    int rc = mcpg_buf_puts(out, "{\"resourceSubscriptions\":[");
    bool filtered = lists_filtered(c), first = true;
    if (c->d.params_json &&
        mcpg_json_object_get(c->d.params_json, c->d.params_len, "notifications", &notif) == 1 &&
        notif.type == MCPG_JSON_OBJECT &&
        mcpg_json_object_get(notif.p, notif.n, "resourceSubscriptions", &uris) == 1 &&
        uris.type == MCPG_JSON_ARRAY) {
        size_t it = 0;
        char uri[1024];
        size_t n;
        while (!rc && mcpg_json_array_next(uris.p, uris.n, &it, &u) == 1) {
            if (u.type != MCPG_JSON_STRING || mcpg_json_string_decode(&u, uri, sizeof uri, &n) != 0)
                continue;
            if ((filtered && !item_visible(c, "resource", uri)) || !subscribable(c, uri, n))
                continue;
            if (!first) rc |= mcpg_buf_append(out, ",", 1);
            first = false;
            rc |= mcpg_buf_append(out, u.p - 1, u.n + 2);
        }
    }
    rc |= mcpg_buf_puts(out, "]}");
    if (rc) call_set_error(c, MCPG_RPC_INTERNAL_ERROR, 503, "out of memory");
}

static void seal_result(mcpg_call *c);

/* tasks/list (legacy wire): every task backend's tasks of this client. */
static void answer_task_list(mcpg_call *c) {
    mcpg_buf *out = &c->result;
    out->len = 0;
    int rc = mcpg_buf_puts(out, "{\"tasks\":[");
    size_t first = out->len;
    mcpg_buf one = {0};
    for (size_t i = 0; i < c->gen->n_task_backends && !rc; i++) {
        mcpg_instance *be = c->gen->task_backends[i].backend;
        const mcpg_backend_ops *ops = be->desc->ops;
        one.len = 0;
        if (!MCPG_HAS(ops, list_tasks) ||
            ops->list_tasks(be->state, call_handle(c, CALL_STAGE_BACKEND), &one) != 0 ||
            one.len < 2 || one.data[0] != '[' || one.data[one.len - 1] != ']' || one.len == 2)
            continue;
        if (out->len > first) rc |= mcpg_buf_append(out, ",", 1);
        rc |= mcpg_buf_append(out, one.data + 1, one.len - 2);
    }
    mcpg_buf_free(&one);
    rc |= mcpg_buf_puts(out, "]}");
    if (rc) call_set_error(c, MCPG_RPC_INTERNAL_ERROR, 503, "out of memory");
    else seal_result(c);
}

static void answer_locally(mcpg_call *c) {
    if (c->list_kind >= 0) {
        answer_list(c);
        return;
    }
    if (c->method == MCPG_METHOD_RESOURCES_SUBSCRIBE ||
        c->method == MCPG_METHOD_RESOURCES_UNSUBSCRIBE) {
        /* identity and policy let it through: the transport, which keeps
         * subscriptions, makes the change */
        /* params.uri as the judge decoded it (judge.c): the one reading */
        if (c->method == MCPG_METHOD_RESOURCES_SUBSCRIBE &&
            !subscribable(c, c->d.name ? c->d.name : "", c->d.name ? c->d.name_len : 0)) {
            call_set_error(c, MCPG_RPC_INVALID_PARAMS, 0, "Invalid params: no such resource");
            return;
        }
        mcpg_buf_puts(&c->result, "{}");
        return;
    }
    if (is_listen(c)) {
        answer_listen(c);
        return;
    }
    if (c->method == MCPG_METHOD_TASKS_LIST && c->d.wire != MCPG_WIRE_STATELESS) {
        answer_task_list(c);
        return;
    }
    int http = c->d.wire == MCPG_WIRE_STATELESS ? 404 : 0;
    call_set_error(c, MCPG_RPC_METHOD_NOT_FOUND, http, "Method not found: %s",
                   c->method ? mcpg_method_name(c->method) : "(unknown)");
}

/* Methods a backend answers (the others the kernel answers itself). */
static bool dispatched(uint32_t method) {
    switch (method) {
    case MCPG_METHOD_TOOLS_CALL:
    case MCPG_METHOD_PROMPTS_GET:
    case MCPG_METHOD_RESOURCES_READ:
    case MCPG_METHOD_COMPLETION_COMPLETE:
    case MCPG_METHOD_TASKS_GET:
    case MCPG_METHOD_TASKS_RESULT:
    case MCPG_METHOD_TASKS_CANCEL:
    case MCPG_METHOD_TASKS_UPDATE:
    case MCPG_METHOD_EVENTS_LIST:
    case MCPG_METHOD_EVENTS_POLL:
    case MCPG_METHOD_EVENTS_STREAM:
    case MCPG_METHOD_EVENTS_SUBSCRIBE:
    case MCPG_METHOD_EVENTS_UNSUBSCRIBE: return true;
    default: return false;
    }
}

static bool is_events_method(uint32_t method) {
    return method >= MCPG_METHOD_EVENTS_LIST && method <= MCPG_METHOD_EVENTS_UNSUBSCRIBE;
}

/* The answer for a name no backend offers. */
static void not_found(mcpg_call *c) {
    int n = (int)(c->d.name ? c->d.name_len : 0);
    const char *name = c->d.name ? c->d.name : "";
    if (is_events_method(c->method)) {
        call_set_error(c, MCPG_RPC_METHOD_NOT_FOUND, c->d.wire == MCPG_WIRE_STATELESS ? 404 : 0,
                       "Method not found: %s (this gateway runs no events pipeline: the "
                       "manifest has no \"events\" section)", mcpg_method_name(c->method));
        return;
    }
    switch (c->method) {
    case MCPG_METHOD_TOOLS_CALL:
        call_set_error(c, MCPG_RPC_INVALID_PARAMS, 0, "Unknown tool: %.*s", n, name);
        break;
    case MCPG_METHOD_PROMPTS_GET:
        call_set_error(c, MCPG_RPC_INVALID_PARAMS, 0, "Unknown prompt: %.*s", n, name);
        break;
    case MCPG_METHOD_RESOURCES_READ:
        call_set_error(c, MCPG_RPC_INVALID_PARAMS, 0, "Resource not found: %.*s", n, name);
        break;
    case MCPG_METHOD_TASKS_GET:
    case MCPG_METHOD_TASKS_RESULT:
    case MCPG_METHOD_TASKS_CANCEL:
    case MCPG_METHOD_TASKS_UPDATE:
        call_set_error(c, MCPG_RPC_INVALID_PARAMS, 0, "Invalid params: unknown task: %.*s", n, name);
        break;
    default:
        call_set_error(c, MCPG_RPC_INVALID_PARAMS, 0,
                       "Invalid params: ref names no prompt or resource this server offers");
    }
}

/* ---- running the current phase ---- */

static mcpg_status stage_op(mcpg_call *c, int stage, mcpg_instance *inst) {
    switch (stage) {
    case STAGE_IDENTITY: {
        const mcpg_identity_ops *o = inst->desc->ops;
        mcpg_call *h = loop_op_begin(c, CALL_STAGE_IDENTITY);
        return op_settle(&c->loop_op, o->authenticate(inst->state, h));
    }
    case STAGE_POLICY: {
        const mcpg_policy_ops *o = inst->desc->ops;
        mcpg_call *h = loop_op_begin(c, CALL_STAGE_POLICY);
        return op_settle(&c->loop_op, o->check(inst->state, h));
    }
    default: {
        const mcpg_limits_ops *o = inst->desc->ops;
        mcpg_call *h = loop_op_begin(c, CALL_STAGE_LIMITS);
        return op_settle(&c->loop_op, o->acquire(inst->state, h));
    }
    }
}

/* A tools/call on the 2026-07-28 wire carries each argument its tool
 * annotates with x-mcp-header in an Mcp-Param header (param_headers.c).
 * One that does not is refused as the transport refuses its other header
 * mismatches (HTTP 400, -32020), here because only the catalog knows the
 * annotations; after policy, as an unknown tool is. True when refused. */
static bool param_headers_refused(mcpg_call *c) {
    if (c->method != MCPG_METHOD_TOOLS_CALL || c->d.wire != MCPG_WIRE_STATELESS || !c->route ||
        !c->route->params.n)
        return false;
    char msg[300];
    if (param_headers_verdict(&c->route->params, c->d.args_json, c->d.args_len, c->d.header,
                              c->d.transport_ctx, msg, sizeof msg) == MCPG_PARAM_OK)
        return false;
    call_set_error(c, MCPG_RPC_HEADER_MISMATCH, 400, "%s", msg);
    return true;
}

/* A tool, prompt or resource template whose definition differs from its
 * pin is held (pins.c): listed to no one, called by no one, until an
 * operator approves it. After policy, as an unknown tool is. */
static bool held_refused(mcpg_call *c) {
    if (!c->route || !c->route->held) return false;
    metrics_count(KM.pin_refused, 0, 1);
    int n = (int)(c->d.name ? c->d.name_len : 0);
    call_set_error(c, MCPG_RPC_INVALID_PARAMS, 0,
                   "%.*s is held: its definition changed since an operator approved it (or "
                   "was never approved); mcpg pins diff shows how, mcpg pins approve accepts it",
                   n, c->d.name ? c->d.name : "");
    return true;
}

/* Where a call goes once identity, policy or limits has let it through. */
static void after_stage(mcpg_call *c) {
    bool to_backend = dispatched(c->method);
    if (to_backend && c->phase == PH_POLICY && !c->route) {
        not_found(c);
        c->phase = PH_COMPLETE;
    } else if (c->phase == PH_POLICY && (held_refused(c) || param_headers_refused(c))) {
        c->phase = PH_COMPLETE;
    } else if (c->method == MCPG_METHOD_TOOLS_CALL) {
        c->phase++; /* tool calls are limited, then audited */
    } else if (to_backend && c->phase == PH_POLICY) {
        c->phase = PH_AUDIT_ALLOWED; /* every call that reaches a backend is audited */
    } else if (c->phase == PH_IDENTITY && identity_only(c)) {
        c->phase = PH_COMPLETE;
        if (mcpg_buf_puts(&c->result, "{}")) call_set_error(c, MCPG_RPC_INTERNAL_ERROR, 503, "out of memory");
    } else if (c->phase == PH_IDENTITY) {
        c->phase = PH_POLICY; /* lists are filtered by policy, not limited */
    } else {
        c->phase = PH_COMPLETE;
        answer_locally(c);
    }
}

static void deny(mcpg_call *c, const char *stage, const mcpg_instance *by);

/* The identity stage ran and nobody took the call: it is anonymous, which
 * the manifest must allow (an empty identity stage serves everyone, and
 * main.c warns about that beyond loopback). False when refused. */
static bool anonymous_allowed(mcpg_call *c) {
    if (c->ident || !c->srv->n_stage[STAGE_IDENTITY] || c->gen->m->anonymous) return true;
    call_set_error(c, MCPG_RPC_UNAUTHENTICATED, 401,
                   "Unauthenticated: no credentials this gateway accepts were given");
    deny(c, "identity", NULL);
    return false;
}

/* A request on a session comes from the caller who opened it (ABI 1.6,
 * desc.session_owner). Anyone else is told what an unknown session id is
 * told, so a session id learned elsewhere neither works nor says whose it
 * is; the attempt is audited. */
static bool session_owner_ok(mcpg_call *c) {
    const mcpg_call_desc *d = &c->d;
    if (!d->session_owner) return true;
    size_t n = 0;
    const char *me = call_owner_of(c, &n);
    if (me && n == d->session_owner_len && !memcmp(me, d->session_owner, n)) return true;
    call_set_error(c, MCPG_RPC_SESSION_NOT_FOUND, 404, "Session not found");
    deny(c, "identity", NULL);
    return false;
}

/* A retry's requestState was sealed for this caller and this request
 * (state_seal.c); anything else is refused, and audited, as an unknown one. */
static bool request_state_ok(mcpg_call *c) {
    if (state_seal_check(c)) return true;
    deny(c, "identity", NULL);
    return false;
}

/* A task named by a caller it was not made for is unknown to that caller:
 * answered as an id nobody made (not_found, after policy). */
static void task_owner_check(mcpg_call *c) {
    bool tasked = c->method >= MCPG_METHOD_TASKS_GET && c->method <= MCPG_METHOD_TASKS_UPDATE &&
                  c->method != MCPG_METHOD_TASKS_LIST;
    if (tasked && c->route && !task_seal_matches(c, c->d.name, c->task_plain_len, c->task_seal))
        c->route = NULL;
}

/* Whatever a client is shown carries task ids, and an input_required
 * result's requestState, sealed for it. */
static void seal_result(mcpg_call *c) {
    if (state_seal_result(c)) {
        call_set_error(c, MCPG_RPC_INTERNAL_ERROR, 503, "out of memory");
        return;
    }
    mcpg_buf out = {0};
    int rc = c->result.len ? task_seal_json(c, c->result.data, c->result.len, &out) : 1;
    if (rc == 0) {
        mcpg_buf_free(&c->result);
        c->result = out;
        return;
    }
    mcpg_buf_free(&out);
    if (rc < 0) call_set_error(c, MCPG_RPC_INTERNAL_ERROR, 503, "out of memory");
}

/* The methods a transport submits only to pass a request on a session
 * through identity (ABI 1.6: "initialize", MCPG_SESSION_METHOD): answered
 * {} once it has. */
static bool identity_only(const mcpg_call *c) {
    static const char init[] = "initialize", sess[] = MCPG_SESSION_METHOD;
    size_t n = c->d.method_len;
    return c->method == MCPG_METHOD_OTHER &&
           ((n == sizeof init - 1 && !memcmp(c->d.method, init, n)) ||
            (n == sizeof sess - 1 && !memcmp(c->d.method, sess, n)));
}

/* Identity, policy or limits: run the stage's next instance into *st, or,
 * when the stage is done, move the call on and return false. The identity
 * chain stops at the first instance that identifies the call. */
static bool stage_next(mcpg_call *c, mcpg_status *st) {
    int stage = c->phase - PH_IDENTITY;
    bool applies = stage != STAGE_LIMITS || c->method == MCPG_METHOD_TOOLS_CALL;
    bool identified = stage == STAGE_IDENTITY && c->ident;
    if (!applies || identified || c->idx >= c->srv->n_stage[stage]) {
        c->idx = 0;
        if (stage == STAGE_IDENTITY) {
            c->identity_ran = true;
            if (!anonymous_allowed(c) || !session_owner_ok(c) || !request_state_ok(c))
                return false;
            task_owner_check(c);
        }
        after_stage(c);
        return false;
    }
    *st = stage_op(c, stage, c->srv->stage[stage][c->idx]);
    return true;
}

/* Either audit phase: emit to the next sink into *st, or, when every sink
 * has it, move the call on and return false. */
static bool audit_next(mcpg_call *c, mcpg_status *st) {
    if (c->idx >= c->srv->n_stage[STAGE_AUDIT]) {
        c->idx = 0;
        c->outcome_audited = c->phase == PH_AUDIT_DONE;
        c->phase = c->phase == PH_AUDIT_ALLOWED ? PH_BACKEND : PH_COMPLETE;
        return false;
    }
    *st = emit_audit(c, c->srv->stage[STAGE_AUDIT][c->idx]);
    return true;
}

static void on_status(mcpg_call *c, mcpg_status st);

static void run(mcpg_call *c) {
    for (;;) {
        mcpg_status st;
        if (c->trace) trace_phase(c);
        switch (c->phase) {
        case PH_IDENTITY:
        case PH_POLICY:
        case PH_LIMITS:
            if (!stage_next(c, &st)) continue;
            break;
        case PH_AUDIT_ALLOWED:
        case PH_AUDIT_DONE:
            if (!audit_next(c, &st)) continue;
            break;
        case PH_BACKEND:
            st = dispatch_backend(c);
            break;
        default:
            finish(c);
            return;
        }
        if (st == MCPG_PENDING) return;
        on_status(c, st);
    }
}

/* ---- what an op's answer means for where the call goes next ---- */

/* The instance whose op answered for the call's current phase. */
static mcpg_instance *answering_instance(mcpg_call *c) {
    switch (c->phase) {
    case PH_IDENTITY:
    case PH_POLICY:
    case PH_LIMITS: return c->srv->stage[c->phase - PH_IDENTITY][c->idx];
    case PH_AUDIT_ALLOWED:
    case PH_AUDIT_DONE: return c->srv->stage[STAGE_AUDIT][c->idx];
    default: return c->route->backend;
    }
}

/* DENY must come with an error (call_error). One without is a module bug,
 * and the call fails as the gateway's own failure: never an empty success
 * (an audit sink that could not record would otherwise let the client
 * believe the call went through). */
static void deny_needs_error(mcpg_call *c) {
    int64_t code;
    const char *msg;
    if (call_error_of(c, &code, &msg)) return;
    mcpg_instance *who = answering_instance(c);
    klog(MCPG_LOG_ERROR, who->stamp, "answered DENY without setting an error (module bug)");
    call_set_error(c, MCPG_RPC_SERVER_ERROR, 503,
                   "%s \"%s\" refused the call without saying why (module bug)",
                   kind_name(who->desc->kind), who->name);
}

/* Refused at identity, policy or limits (`by` NULL: the kernel's own rule):
 * every method's refusal is audited, as mcpg.tool.call.denied. */
static void deny(mcpg_call *c, const char *stage, const mcpg_instance *by) {
    c->denied = true;
    c->denied_stage = stage;
    c->denied_by = by;
    c->phase = c->srv->n_stage[STAGE_AUDIT] ? PH_AUDIT_DONE : PH_COMPLETE;
    c->idx = 0;
}

static void on_stage_status(mcpg_call *c, mcpg_status st) {
    static const char *const stage_name[] = {"identity", "policy", "limits"};
    if (st == MCPG_DENY) {
        deny(c, stage_name[c->phase - PH_IDENTITY], answering_instance(c));
        return;
    }
    if (c->phase == PH_LIMITS) c->limits_acquired++;
    c->idx++;
}

/* A sink that cannot record answers DENY, and the call fails closed: at
 * "allowed" the backend never runs; at "completed"/"failed"/"denied" the
 * record of the outcome failed. */
static void on_audit_status(mcpg_call *c, mcpg_status st) {
    if (st == MCPG_DENY) {
        c->phase = PH_COMPLETE;
        return;
    }
    c->idx++;
}

/* events/list as its module answered it ({"events":[{"name":...},...]}),
 * less the types a policy instance's visible() hides from the caller (kind
 * "event"), as the merged lists are filtered. */
static void filter_event_list(mcpg_call *c) {
    mcpg_json_span arr, e, name;
    if (!lists_filtered(c) || !c->result.len ||
        mcpg_json_object_get(c->result.data, c->result.len, "events", &arr) != 1 ||
        arr.type != MCPG_JSON_ARRAY)
        return;
    mcpg_buf out = {0};
    int rc = mcpg_buf_puts(&out, "{\"events\":[");
    bool first = true;
    size_t it = 0;
    char nm[256];
    size_t n;
    while (!rc && mcpg_json_array_next(arr.p, arr.n, &it, &e) == 1) {
        if (e.type != MCPG_JSON_OBJECT || mcpg_json_object_get(e.p, e.n, "name", &name) != 1 ||
            mcpg_json_string_decode(&name, nm, sizeof nm, &n) != 0 || !item_visible(c, "event", nm))
            continue;
        if (!first) rc |= mcpg_buf_append(&out, ",", 1);
        first = false;
        rc |= mcpg_buf_append(&out, e.p, e.n);
    }
    rc |= mcpg_buf_puts(&out, "]}");
    if (rc) {
        mcpg_buf_free(&out);
        call_set_error(c, MCPG_RPC_INTERNAL_ERROR, 503, "out of memory");
        return;
    }
    mcpg_buf_free(&c->result);
    c->result = out;
}

static void on_backend_status(mcpg_call *c, mcpg_status st) {
    c->tb1 = mono_us();
    if (st == MCPG_DENY) c->backend_failed = true;
    if (st == MCPG_CONTINUE && c->method == MCPG_METHOD_EVENTS_LIST) filter_event_list(c);
    if (st == MCPG_CONTINUE && !c->borrowed) seal_result(c);
    bool audited = dispatched(c->method) && c->srv->n_stage[STAGE_AUDIT];
    c->phase = audited ? PH_AUDIT_DONE : PH_COMPLETE;
    c->idx = 0;
}

static void on_status(mcpg_call *c, mcpg_status st) {
    if (st != MCPG_CONTINUE && st != MCPG_DENY) { /* not an mcpg_status: a module bug */
        klog(MCPG_LOG_ERROR, answering_instance(c)->stamp,
             "answered %d, which is not CONTINUE, DENY or PENDING (module bug)", (int)st);
        st = MCPG_DENY;
    }
    if (st == MCPG_DENY) deny_needs_error(c);
    switch (c->phase) {
    case PH_IDENTITY:
    case PH_POLICY:
    case PH_LIMITS:
        on_stage_status(c, st);
        return;
    case PH_AUDIT_ALLOWED:
    case PH_AUDIT_DONE:
        on_audit_status(c, st);
        return;
    case PH_BACKEND:
        on_backend_status(c, st);
        return;
    default:
        return;
    }
}

/* ---- entry points (call.c, dispatch.c) ---- */

void pipeline_run(mcpg_call *c) { run(c); }

void pipeline_continue(mcpg_call *c, mcpg_status st) {
    assert(c->life == LIFE_RUNNING && c->holds);
    msgs_flush(c); /* sent before the op answered: delivered before what follows */
    on_status(c, st);
    run(c);
}
