/* backend_mcp: a client's call on its way to the upstream and back.
 *
 * The op (on a gateway loop or the pool) builds what the upstream will get
 * and queues it; the I/O thread sends it, relays what the upstream says
 * meanwhile (progress, log messages, questions for the client) and answers
 * the call. The call changes hands under up->lock: the op stores the client_call
 * in the call's slot, the I/O thread "claims" it (clears both) before it
 * answers, and the cancel op only queues a job for a client_call it finds there.
 *
 * Questions (sampling, elicitation, roots) go to the client with
 * host->call_request. A client on the stateless wire cannot be asked in the
 * middle of a call: it gets an input_required result instead, the
 * upstream's request stays open ("parked"), and the client's retry, with
 * inputResponses and the requestState we minted, answers the upstream's
 * question and takes the parked call's answer. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "upstream.h"

#define ASK_KEY "upstream"

struct park {
    char token[64];     /* the requestState the client echoes: PARK_PREFIX tag "-" random */
    char *owner;        /* who was asked (the parked call's owner): only they may answer */
    up_request *ur;           /* the upstream's tools/call (or prompts/get...) still open */
    asked q;            /* its question, unanswered */
    uint64_t expires_ms;
    char caller_key[65]; /* the caller's session it was asked on ("": the gateway's) */
    park *next;
};

/* What the gateway sends the upstream about a question goes back on the
 * session that asked it (caller_sessions.c); the previous target is
 * returned for reply_on_done. */
static const char *reply_on(upstream *up, const char *caller_key) {
    const char *before = up->reply_key;
    if (caller_key[0]) up->reply_key = caller_key;
    return before;
}

static void reply_on_done(upstream *up, const char *before) { up->reply_key = before; }

/* ---- on the op's thread ---- */

static char *span_dup(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

static bool is_envelope_key(const mcpg_json_span *k) {
    static const char pre[] = "io.modelcontextprotocol/";
    return k->n >= sizeof pre - 1 && memcmp(k->p, pre, sizeof pre - 1) == 0;
}

static void append_member(mcpg_buf *b, const mcpg_json_span *k, const mcpg_json_span *v) {
    if (b->len > 1) mcpg_buf_append(b, ",", 1);
    mcpg_buf_append(b, "\"", 1);
    mcpg_buf_append(b, k->p, k->n);
    mcpg_buf_append(b, "\":", 2);
    if (v->type == MCPG_JSON_STRING) mcpg_buf_append(b, v->p - 1, v->n + 2);
    else mcpg_buf_append(b, v->p, v->n);
}

/* _meta without the progress token and the stateless envelope (both are
 * the gateway's to set toward the upstream): its members, no braces. */
static void split_meta(client_call *pc, const mcpg_json_span *meta, mcpg_buf *rest) {
    size_t it = 0;
    mcpg_json_span k, v;
    mcpg_buf_append(rest, "{", 1);
    while (mcpg_json_object_next(meta->p, meta->n, &it, &k, &v) == 1) {
        if (mcpg_json_string_eq(&k, "progressToken", 13)) {
            pc->client_token = v.type == MCPG_JSON_STRING ? span_dup(v.p - 1, v.n + 2)
                                                          : span_dup(v.p, v.n);
            continue;
        }
        if (is_envelope_key(&k)) continue;
        append_member(rest, &k, &v);
    }
}

/* The client's params, for the upstream: the backend's own name, its _meta
 * members kept apart (pc->meta), a bridged retry's answers taken out. */
static int rewrite_params(upstream *up, client_call *pc, mcpg_call *call) {
    const mcpg_host *h = up->h;
    size_t n = 0;
    const char *p = h->call_params(call, &n);
    if (!p || !n) p = "{}", n = 2;
    mcpg_buf out = {0}, meta = {0};
    mcpg_buf_append(&out, "{", 1);
    size_t it = 0;
    mcpg_json_span k, v;
    const char *target = h->call_target(call);
    while (mcpg_json_object_next(p, n, &it, &k, &v) == 1) {
        if (mcpg_json_string_eq(&k, "_meta", 5) && v.type == MCPG_JSON_OBJECT) {
            split_meta(pc, &v, &meta);
            continue;
        }
        if (mcpg_json_string_eq(&k, "requestState", 12) && v.type == MCPG_JSON_STRING &&
            v.n > sizeof PARK_PREFIX - 1 && memcmp(v.p, PARK_PREFIX, sizeof PARK_PREFIX - 1) == 0) {
            pc->request_state = span_dup(v.p, v.n);
            continue;
        }
        if (mcpg_json_string_eq(&k, "inputResponses", 14)) {
            pc->input_responses = span_dup(v.p, v.n);
            continue;
        }
        bool named = pc->method == MCPG_METHOD_TOOLS_CALL || pc->method == MCPG_METHOD_PROMPTS_GET;
        bool tasked = pc->method >= MCPG_METHOD_TASKS_GET && pc->method <= MCPG_METHOD_TASKS_UPDATE;
        if (target && ((named && mcpg_json_string_eq(&k, "name", 4)) ||
                       (tasked && mcpg_json_string_eq(&k, "taskId", 6)))) {
            if (out.len > 1) mcpg_buf_append(&out, ",", 1);
            mcpg_buf_append(&out, "\"", 1);
            mcpg_buf_append(&out, k.p, k.n);
            mcpg_buf_append(&out, "\":", 2);
            mcpg_buf_append_json_string(&out, target, strlen(target));
            continue;
        }
        append_member(&out, &k, &v);
    }
    if (pc->input_responses && !pc->request_state) { /* the upstream's own round: pass it on */
        mcpg_json_span ir = {.p = pc->input_responses, .n = strlen(pc->input_responses)};
        mcpg_json_span key = {.p = "inputResponses", .n = 14};
        ir.type = MCPG_JSON_OBJECT;
        append_member(&out, &key, &ir);
        free(pc->input_responses);
        pc->input_responses = NULL;
    }
    mcpg_buf_append(&out, "}", 1);
    if (meta.len > 1) {
        mcpg_buf_append(&meta, "}", 1);
        pc->meta = meta.data;
    } else {
        mcpg_buf_free(&meta);
    }
    pc->params = out.data;
    return out.data ? 0 : MCPG_ENOMEM;
}

/* A value that may go in an HTTP header as it is. */
/* Mcp-Name's value for a target: encoded as a conforming client sends it. */
static char *mcp_name_of(const char *target) {
    mcpg_buf v = {0};
    if (mcpg_header_value_encode(target, strlen(target), &v)) {
        mcpg_buf_free(&v);
        return NULL;
    }
    return v.data; /* NUL-terminated by the buf calls */
}

/* The traceparent the upstream request carries: with a telemetry module
 * tracing the call, a client span's own (the gateway's span between the
 * client's and the upstream's); otherwise the client's, unchanged. An
 * invalid traceparent is dropped, and tracestate with it; a valid
 * tracestate goes on as the client sent it. Spans are for HTTP upstreams:
 * a stdio child gets no headers. */
static size_t traceparent_for(upstream *up, client_call *pc, mcpg_call *call, char *tp, size_t cap) {
    const mcpg_host *h = up->h;
    bool http = up->link && strcmp(up->link->ops->what, "http") == 0;
    if (http && MCPG_HOST_HAS(h, call_trace_upstream)) {
        /* named as an MCP span is: "{mcp.method.name} {target}", the upstream's own name */
        const char *target = h->call_target(call);
        char name[128];
        snprintf(name, sizeof name, "%s%s%s", pc->method_name, target ? " " : "", target ? target : "");
        pc->trace_span = h->call_trace_upstream(call, name, tp, cap);
        if (pc->trace_span) return strlen(tp);
    }
    size_t n = 0;
    const char *given = h->call_header(call, "traceparent", &n);
    if (!given || !mcpg_traceparent_valid(given, n) || n >= cap) return 0;
    memcpy(tp, given, n);
    return n;
}

char *calls_trace_lines(upstream *up, client_call *pc, mcpg_call *call) {
    char tp[128];
    size_t pn = traceparent_for(up, pc, call, tp, sizeof tp), sn = 0;
    if (!pn) return NULL;
    const char *ts = up->h->call_header(call, "tracestate", &sn);
    mcpg_buf b = {0};
    mcpg_buf_puts(&b, "traceparent: ");
    mcpg_buf_append(&b, tp, pn);
    mcpg_buf_puts(&b, "\r\n");
    if (ts && mcpg_tracestate_valid(ts, sn)) {
        mcpg_buf_puts(&b, "tracestate: ");
        mcpg_buf_append(&b, ts, sn);
        mcpg_buf_puts(&b, "\r\n");
    }
    return b.data;
}

/* The upstream request's client span ends as its call is answered. */
static void trace_end(upstream *up, client_call *pc, mcpg_call *c, const char *error) {
    if (!pc->trace_span) return;
    int status = pc->http_status ? pc->http_status : error ? 0 : 200;
    up->h->call_trace_upstream_end(c, pc->trace_span, status, error);
    pc->trace_span = 0;
}

client_call *calls_prepare(upstream *up, mcpg_call *call, uint32_t method) {
    const mcpg_host *h = up->h;
    client_call *pc = calloc(1, sizeof *pc);
    if (!pc) {
        mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    pc->tag = PCALL_TAG;
    pc->up = up;
    pc->call = call;
    pc->method = method;
    pc->method_name = strdup(mcpg_method_name(method));
    size_t cn = 0;
    const char *caps = MCPG_HOST_HAS(h, call_client_capabilities)
                           ? h->call_client_capabilities(call, &cn) : NULL;
    if (caps && cn) pc->caps = span_dup(caps, cn);
    const char *target = h->call_target(call);
    if (target && (method == MCPG_METHOD_TOOLS_CALL || method == MCPG_METHOD_PROMPTS_GET ||
                   method == MCPG_METHOD_RESOURCES_READ))
        pc->mcp_name = mcp_name_of(target);
    pc->trace_lines = calls_trace_lines(up, pc, call);
    if (target && method == MCPG_METHOD_TOOLS_CALL) {
        size_t an = 0;
        const char *args = h->call_args(call, &an);
        pc->param_lines = params_lines(up, target, args, an);
    }
    size_t on = 0;
    const char *owner = MCPG_HOST_HAS(h, call_owner) ? h->call_owner(call, &on) : NULL;
    if (owner) pc->owner = span_dup(owner, on);
    if (!pc->method_name || (owner && !pc->owner) || rewrite_params(up, pc, call) != 0) {
        calls_free(pc);
        mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    return pc;
}

void calls_free(client_call *pc) {
    if (!pc) return;
    free(pc->method_name);
    free(pc->params);
    free(pc->meta);
    free(pc->extra);
    free(pc->client_token);
    free(pc->request_state);
    free(pc->input_responses);
    free(pc->caps);
    free(pc->mcp_name);
    free(pc->trace_lines);
    free(pc->param_lines);
    free(pc->owner);
    if (pc->auth_line) explicit_bzero(pc->auth_line, strlen(pc->auth_line));
    free(pc->auth_line);
    if (pc->relay_to) relay_client_call_gone(pc->up);
    free(pc->relay_to);
    free(pc);
}

/* ---- answering the call (I/O thread) ---- */

/* Take the call for answering: from here only this thread touches it, and
 * a cancel op that comes now finds nothing. */
static mcpg_call *claim(upstream *up, client_call *pc) {
    pthread_mutex_lock(&up->lock);
    mcpg_call *c = pc->call;
    pc->call = NULL;
    if (c) {
        void **slot = up->h->call_slot(c, up->self);
        if (slot) *slot = NULL;
    }
    pthread_mutex_unlock(&up->lock);
    return c;
}

void calls_hold(upstream *up, client_call *pc) {
    pthread_mutex_lock(&up->lock);
    pc->holds++;
    pthread_mutex_unlock(&up->lock);
}

bool calls_unhold(upstream *up, client_call *pc) {
    pthread_mutex_lock(&up->lock);
    bool gone = --pc->holds == 0 && pc->orphan;
    pthread_mutex_unlock(&up->lock);
    if (gone) calls_free(pc);
    return gone;
}

/* Done with pc: freed now, or by the last hold (a queued cancel job, a
 * question still out). */
static void release(upstream *up, client_call *pc) {
    if (pc->ur && pc->ur->pc == pc) pc->ur->pc = NULL;
    pc->ur = NULL;
    pthread_mutex_lock(&up->lock);
    bool later = pc->holds > 0;
    pc->orphan = true;
    pthread_mutex_unlock(&up->lock);
    if (!later) calls_free(pc);
}

void calls_fail(upstream *up, client_call *pc, int64_t code, const char *fmt, ...) {
    mcpg_call *c = claim(up, pc);
    if (c) {
        char msg[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        char full[700];
        snprintf(full, sizeof full, "backend \"%s\": %s", up->name, msg);
        trace_end(up, pc, c, msg);
        up->h->call_error(c, code, full, NULL);
        up->h->call_resume(c, MCPG_DENY);
    } else if (pc->relay_to) {
        char msg[600], full[700];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        snprintf(full, sizeof full, "backend \"%s\": %s", up->name, msg);
        relay_error(up, pc, code, full);
    }
    release(up, pc);
}

void calls_refused(upstream *up, client_call *pc, int status, const char *www) {
    if (pc->cred_keyed) upcred_refused_key(up->cred, pc->cred_key);
    mcpg_call *c = claim(up, pc);
    if (c) {
        char msg[300];
        snprintf(msg, sizeof msg, "backend \"%s\": the upstream refused the credentials (HTTP %d)",
                 up->name, status);
        mcpg_buf data = {0};
        upcred_challenge_data(up->h, c, up->name, status, www, www ? strlen(www) : 0, &data);
        trace_end(up, pc, c, msg);
        up->h->call_error(c, MCPG_RPC_SERVER_ERROR, msg, data.data);
        mcpg_buf_free(&data);
        up->h->call_resume(c, MCPG_DENY);
    } else if (pc->relay_to) {
        relay_error(up, pc, MCPG_RPC_SERVER_ERROR, "the upstream refused the credentials");
    }
    release(up, pc);
}

int calls_read_answer(const char *msg, size_t n, up_answer *a) {
    memset(a, 0, sizeof *a);
    size_t it = 0;
    mcpg_json_span k, v;
    int r;
    while ((r = mcpg_json_object_next(msg, n, &it, &k, &v)) == 1) {
        if (mcpg_json_string_eq(&k, "result", 6)) a->result = v;
        else if (mcpg_json_string_eq(&k, "error", 5)) a->error = v;
    }
    if (r < 0) return -1; /* every value was scanned: not JSON stops it here */
    if (a->result.p && a->result.type == MCPG_JSON_OBJECT) {
        it = 0;
        while (mcpg_json_object_next(a->result.p, a->result.n, &it, &k, &v) == 1)
            if (mcpg_json_string_eq(&k, "resultType", 10)) {
                a->rt_key = k;
                a->rt_val = v;
            }
    }
    return 0;
}

static uint32_t result_type_of(const mcpg_json_span *rt) {
    return !rt->p                                          ? MCPG_RESULT_COMPLETE
           : mcpg_json_string_eq(rt, "input_required", 14) ? MCPG_RESULT_INPUT_REQUIRED
           : mcpg_json_string_eq(rt, "task", 4)            ? MCPG_RESULT_TASK
                                                           : MCPG_RESULT_COMPLETE;
}

/* The result without its resultType member (the transport writes that):
 * the bytes before and after it, and one of the commas around it. */
static int result_without_type(const up_answer *a, mcpg_buf *out) {
    const char *p = a->result.p, *end = p + a->result.n;
    const char *from = a->rt_key.p - 1; /* its opening quote */
    const char *to = a->rt_val.p + a->rt_val.n + (a->rt_val.type == MCPG_JSON_STRING);
    const char *q = to;
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
    if (q < end && *q == ',') {
        to = q + 1;
    } else {
        const char *b = from;
        while (b > p && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\n' || b[-1] == '\r')) b--;
        if (b > p && b[-1] == ',') from = b - 1;
    }
    out->len = 0;
    mcpg_buf_append(out, p, (size_t)(from - p));
    return mcpg_buf_append(out, to, (size_t)(end - to));
}

/* resultType is the transport's to write: the value becomes the call's
 * result type and the member is left out of the copy. */
static uint32_t take_result_type(const mcpg_json_span *res, mcpg_buf *out) {
    mcpg_json_span rt;
    if (mcpg_json_object_get(res->p, res->n, "resultType", &rt) != 1) return MCPG_RESULT_COMPLETE;
    uint32_t type = mcpg_json_string_eq(&rt, "input_required", 14) ? MCPG_RESULT_INPUT_REQUIRED
                    : mcpg_json_string_eq(&rt, "task", 4)          ? MCPG_RESULT_TASK
                                                                   : MCPG_RESULT_COMPLETE;
    size_t it = 0;
    mcpg_json_span k, v;
    mcpg_buf_append(out, "{", 1);
    while (mcpg_json_object_next(res->p, res->n, &it, &k, &v) == 1)
        if (!mcpg_json_string_eq(&k, "resultType", 10)) append_member(out, &k, &v);
    mcpg_buf_append(out, "}", 1);
    return type;
}

/* A task made by the upstream on the session wire answers the call with
 * {"task":{...}}: the kernel is told a task was created. */
static uint32_t legacy_task_type(upstream *up, uint32_t method, const mcpg_json_span *res) {
    mcpg_json_span t;
    return up->wire == WIRE_LEGACY && method == MCPG_METHOD_TOOLS_CALL &&
                   mcpg_json_object_get(res->p, res->n, "task", &t) == 1 &&
                   t.type == MCPG_JSON_OBJECT
               ? MCPG_RESULT_TASK : MCPG_RESULT_COMPLETE;
}

/* A 2026-07-28 upstream's input_required whose questions the client did not
 * declare it takes: the client gets -32021 naming what is missing (HTTP 400
 * on the stateless wire), not questions it was never to be sent. */
static bool refuse_round(upstream *up, const client_call *pc, mcpg_call *c, const up_answer *a) {
    if (result_type_of(&a->rt_val) != MCPG_RESULT_INPUT_REQUIRED) return false;
    uint32_t need = caps_needed_by_round(pc->caps, a->result.p, a->result.n);
    if (!need) return false;
    const mcpg_host *h = up->h;
    mcpg_buf data = {0};
    caps_required_json(need, &data);
    char msg[300];
    snprintf(msg, sizeof msg, "Missing required client capability: backend \"%s\"'s upstream "
             "asks what the client did not declare", up->name);
    h->call_error(c, MCPG_RPC_MISSING_CLIENT_CAPABILITY, msg, data.data);
    mcpg_buf_free(&data);
    if (MCPG_HOST_HAS(h, call_set_http)) h->call_set_http(c, 400, 0);
    h->call_resume(c, MCPG_DENY);
    return true;
}

void calls_answer(upstream *up, client_call *pc, mcpg_call *c, const up_answer *a) {
    const mcpg_host *h = up->h;
    trace_end(up, pc, c, NULL);
    if (a->result.p && a->result.type == MCPG_JSON_OBJECT && refuse_round(up, pc, c, a)) return;
    if (a->result.p && a->result.type == MCPG_JSON_OBJECT) {
        mcpg_buf ids = {0}, copy = {0};
        uint32_t type;
        mcpg_json_span res = a->result;
        if (task_ids_present(res.p, res.n) && task_ids_for_client(up, res.p, res.n, &ids) == 0) {
            /* rare: the rewritten copy is read again */
            res = (mcpg_json_span){.p = ids.data, .n = ids.len, .type = MCPG_JSON_OBJECT};
            type = take_result_type(&res, &copy);
        } else {
            type = result_type_of(&a->rt_val);
            if (a->rt_key.p) result_without_type(a, &copy);
        }
        if (type == MCPG_RESULT_COMPLETE) type = legacy_task_type(up, pc->method, &res);
        int rc = copy.data ? h->call_result(c, copy.data, copy.len) : h->call_result(c, res.p, res.n);
        mcpg_buf_free(&copy);
        mcpg_buf_free(&ids);
        if (type != MCPG_RESULT_COMPLETE && MCPG_HOST_HAS(h, call_set_result_type))
            h->call_set_result_type(c, type);
        h->call_resume(c, rc ? MCPG_DENY : MCPG_CONTINUE);
        return;
    }
    mcpg_json_span err = a->error;
    mcpg_json_span code, message, data;
    int64_t cv = MCPG_RPC_INTERNAL_ERROR;
    char text[1024] = "the upstream's error had no message";
    size_t tl = 0;
    char *data_text = NULL;
    if (err.p && err.type == MCPG_JSON_OBJECT) {
        if (mcpg_json_object_get(err.p, err.n, "code", &code) == 1) mcpg_json_int64(&code, &cv);
        if (mcpg_json_object_get(err.p, err.n, "message", &message) == 1)
            mcpg_json_string_decode(&message, text, sizeof text, &tl);
        if (mcpg_json_object_get(err.p, err.n, "data", &data) == 1)
            data_text = data.type == MCPG_JSON_STRING ? span_dup(data.p - 1, data.n + 2)
                                                       : span_dup(data.p, data.n);
    } else {
        snprintf(text, sizeof text, "backend \"%s\": the upstream's answer has neither result "
                 "nor error", up->name);
    }
    h->call_error(c, cv, text, data_text);
    free(data_text);
    /* the upstream refused the request's headers or the client's missing
     * capability: on the 2026-07-28 wire an HTTP 400, to our client too */
    if ((cv == MCPG_RPC_HEADER_MISMATCH || cv == MCPG_RPC_MISSING_CLIENT_CAPABILITY) &&
        h->call_wire(c) == MCPG_WIRE_STATELESS)
        h->call_set_http(c, 400, 0);
    h->call_resume(c, MCPG_DENY);
}

static park *park_of_token(upstream *up, const char *token, park ***link_out);
static void park_free(upstream *up, park *p, bool answer_upstream);

static int send_call(upstream *up, client_call *pc);

void calls_answered(upstream *up, up_request *r, const char *msg, size_t n) {
    client_call *pc = r->pc;
    if (r->parked) { /* nobody to tell: the upstream gave up on its question */
        park **pp = NULL;
        if (park_of_token(up, r->parked->token, &pp)) {
            *pp = r->parked->next;
            park_free(up, r->parked, false);
        }
    }
    up_request_free(up, r);
    if (!pc) return;
    pc->ur = NULL;
    up_answer a;
    if (calls_read_answer(msg, n, &a) != 0) {
        calls_fail(up, pc, MCPG_RPC_INTERNAL_ERROR, "the upstream's answer is not valid JSON");
        return;
    }
    if (up->wire == WIRE_STATELESS && calls_ask_round(up, pc, &a)) return;
    mcpg_call *c = claim(up, pc);
    if (c) calls_answer(up, pc, c, &a);
    else if (pc->relay_to) relay_answer(up, pc, msg, n); /* its replica answers the client */
    release(up, pc);
}

/* ---- a stateless upstream's input_required, for a client that can be asked ----
 * The client is asked each question on the call's own stream; once every
 * answer is in, the call goes to the upstream again with inputResponses
 * and the upstream's requestState, as a stateless client would retry it. */

typedef struct round {
    upstream *up;
    client_call *pc;
    pthread_mutex_t lock;
    int waiting;          /* questions not answered yet */
    bool failed;
    mcpg_buf answers;     /* "key":result,... */
    char *state;          /* the upstream's requestState (JSON), or NULL */
} round;

typedef struct round_ask {
    round *rd;
    char *key;            /* JSON string text, quotes included */
} round_ask;

static void round_end(round *rd) {
    job *j = calloc(1, sizeof *j);
    char *extra = NULL;
    if (!rd->failed && asprintf(&extra, "\"inputResponses\":{%s}%s%s",
                                rd->answers.data ? rd->answers.data : "",
                                rd->state ? ",\"requestState\":" : "",
                                rd->state ? rd->state : "") < 0)
        extra = NULL;
    if (j) {
        j->kind = JOB_RETRY;
        j->pc = rd->pc;
        j->text = extra;
        if (up_post(rd->up, j) != 0) { /* stopping: the stop answers the call */
            free(j->text);
            free(j);
        }
    } else {
        free(extra);
    }
    mcpg_buf_free(&rd->answers);
    free(rd->state);
    pthread_mutex_destroy(&rd->lock);
    free(rd);
}

/* Any thread (the call's loop, or the I/O thread when asking failed). */
static void round_answer(round *rd, const char *key, const mcpg_reply *rep) {
    pthread_mutex_lock(&rd->lock);
    if (rep && rep->status == 0 && !rep->is_error) {
        if (rd->answers.len) mcpg_buf_append(&rd->answers, ",", 1);
        mcpg_buf_puts(&rd->answers, key);
        mcpg_buf_append(&rd->answers, ":", 1);
        mcpg_buf_append(&rd->answers, rep->result_json, rep->result_len);
    } else {
        rd->failed = true;
    }
    bool last = --rd->waiting == 0;
    pthread_mutex_unlock(&rd->lock);
    if (last) round_end(rd);
}

static void on_round_reply(void *arg, const mcpg_reply *rep) {
    round_ask *a = arg;
    round_answer(a->rd, a->key, rep);
    free(a->key);
    free(a);
}

bool calls_ask_round(upstream *up, client_call *pc, const up_answer *ans) {
    mcpg_json_span res = ans->result, reqs, state, k, v, m, params;
    if (!pc->call || !MCPG_HOST_HAS(up->h, call_request) || !res.p ||
        result_type_of(&ans->rt_val) != MCPG_RESULT_INPUT_REQUIRED ||
        mcpg_json_object_get(res.p, res.n, "inputRequests", &reqs) != 1 ||
        reqs.type != MCPG_JSON_OBJECT)
        return false;
    if (caps_needed_by_round(pc->caps, res.p, res.n)) return false; /* calls_answer refuses it */
    size_t it = 0, count = 0;
    while (mcpg_json_object_next(reqs.p, reqs.n, &it, &k, &v) == 1) count++;
    round *rd = calloc(1, sizeof *rd);
    if (!rd || !count) {
        free(rd);
        return false;
    }
    rd->up = up;
    rd->pc = pc;
    rd->waiting = (int)count;
    pthread_mutex_init(&rd->lock, NULL);
    if (mcpg_json_object_get(res.p, res.n, "requestState", &state) == 1 &&
        state.type == MCPG_JSON_STRING)
        rd->state = span_dup(state.p - 1, state.n + 2);
    calls_hold(up, pc); /* released by the JOB_RETRY round_end posts */
    it = 0;
    bool any_asked = false;
    while (mcpg_json_object_next(reqs.p, reqs.n, &it, &k, &v) == 1) {
        char method[64];
        size_t ml = 0;
        bool has_params = mcpg_json_object_get(v.p, v.n, "params", &params) == 1;
        round_ask *a = calloc(1, sizeof *a);
        char *key = span_dup(k.p - 1, k.n + 2);
        int rc = MCPG_ENOMEM;
        if (a && key && mcpg_json_object_get(v.p, v.n, "method", &m) == 1 &&
            mcpg_json_string_decode(&m, method, sizeof method, &ml) == 0) {
            a->rd = rd;
            a->key = key;
            rc = up->h->call_request(pc->call, method, has_params ? params.p : NULL,
                                     has_params ? params.n : 0, 0, on_round_reply, a);
        }
        if (rc == MCPG_ENOTSUP && !any_asked) { /* a stateless client: it gets the round itself */
            free(a);
            free(key);
            pthread_mutex_lock(&up->lock);
            pc->holds--;
            pthread_mutex_unlock(&up->lock);
            mcpg_buf_free(&rd->answers);
            free(rd->state);
            pthread_mutex_destroy(&rd->lock);
            free(rd);
            return false;
        }
        any_asked = true;
        if (rc != 0) {
            free(a);
            round_answer(rd, key ? key : "\"?\"", NULL);
            free(key);
        }
    }
    return true;
}

void calls_retry(upstream *up, client_call *pc, char *extra, const char *why) {
    if (calls_unhold(up, pc) || pc->orphan) { /* answered meanwhile (cancelled) */
        free(extra);
        return;
    }
    if (!extra) {
        calls_fail(up, pc, MCPG_RPC_SERVER_ERROR, "%s", why);
        return;
    }
    free(pc->extra);
    pc->extra = extra;
    if (up->state != UP_READY || send_call(up, pc) != 0)
        calls_fail(up, pc, MCPG_RPC_SERVER_ERROR, "upstream unavailable%s%s",
                   up->last_error[0] ? ": " : "", up->last_error);
}

/* ---- sending (I/O thread) ---- */

/* notifications/cancelled is how a request is cancelled on the session
 * wire and on stdio; on the stateless wire over HTTP closing the request's
 * stream is (the link's abandon). */
static bool tells_cancel(const upstream *up) {
    return up->wire == WIRE_LEGACY || !up->link->ops->abandon;
}

/* Give up an upstream request: tell the upstream (or close its stream),
 * then let go of r. */
static void cancel_upstream(upstream *up, up_request *r, const char *reason) {
    if (up->link && tells_cancel(up)) {
        char note[200];
        int n = snprintf(note, sizeof note,
                         "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                         "\"params\":{\"requestId\":%lld,\"reason\":\"%s\"}}",
                         (long long)r->id, reason);
        up->link->ops->send(up->link, note, (size_t)n, NULL);
    }
    if (up->link && up->link->ops->abandon) up->link->ops->abandon(up->link, r);
    up_request_free(up, r);
}

int calls_build_message(upstream *up, const client_call *pc, int64_t id, bool stateless, mcpg_buf *b) {
    mcpg_buf_puts(b, "{\"jsonrpc\":\"2.0\",\"id\":");
    char num[24];
    mcpg_buf_append(b, num, (size_t)snprintf(num, sizeof num, "%lld", (long long)id));
    mcpg_buf_puts(b, ",\"method\":\"");
    mcpg_buf_puts(b, pc->method_name);
    mcpg_buf_puts(b, "\",\"params\":{");
    bool meta = stateless || pc->client_token || pc->meta;
    if (meta) {
        mcpg_buf_puts(b, "\"_meta\":{");
        size_t before = b->len;
        /* only what this client declared: NULL is a client that declared none */
        if (stateless) up_modern_meta(up, b, pc->caps ? pc->caps : "{}");
        /* the upstream reports progress against our id; we map it back */
        if (pc->client_token) {
            if (b->len > before) mcpg_buf_puts(b, ",");
            mcpg_buf_puts(b, "\"progressToken\":");
            mcpg_buf_append(b, num, strlen(num));
        }
        if (pc->meta) {
            size_t ml = strlen(pc->meta);
            if (ml > 2) {
                if (b->len > before) mcpg_buf_puts(b, ",");
                mcpg_buf_append(b, pc->meta + 1, ml - 2);
            }
        }
        mcpg_buf_puts(b, "}");
    }
    size_t pl = strlen(pc->params);
    bool comma = meta;
    if (pl > 2) {
        if (comma) mcpg_buf_puts(b, ",");
        mcpg_buf_append(b, pc->params + 1, pl - 2);
        comma = true;
    }
    if (pc->extra) {
        if (comma) mcpg_buf_puts(b, ",");
        mcpg_buf_puts(b, pc->extra);
    }
    mcpg_buf_puts(b, "}");
    return mcpg_buf_puts(b, "}");
}

static int send_call(upstream *up, client_call *pc) {
    up_request *r = up_request_new(up, UR_CALL);
    if (!r) return MCPG_ENOMEM;
    r->pc = pc;
    pc->ur = r;
    calls_mark_shared(up, r);
    mcpg_buf b = {0};
    int rc = calls_build_message(up, pc, r->id, up->wire == WIRE_STATELESS, &b);
    if (!rc) rc = up->link->ops->send(up->link, b.data, b.len, r);
    mcpg_buf_free(&b);
    return rc;
}

static void resume_parked(upstream *up, client_call *pc);

void calls_start(upstream *up, client_call *pc) {
    if (up->state != UP_READY) {
        calls_fail(up, pc, MCPG_RPC_SERVER_ERROR, "upstream unavailable%s%s",
                   up->last_error[0] ? ": " : " (connecting)", up->last_error);
        return;
    }
    if (pc->request_state) {
        resume_parked(up, pc);
        return;
    }
    if (send_call(up, pc) != 0)
        calls_fail(up, pc, MCPG_RPC_SERVER_ERROR, "could not send to the upstream");
}

void calls_cancel(upstream *up, client_call *pc) {
    pthread_mutex_lock(&up->lock);
    pc->cancel_queued = false;
    pthread_mutex_unlock(&up->lock);
    if (calls_unhold(up, pc)) return; /* answered before the cancel job ran */
    if (pc->orphan) return;            /* answered; another hold frees it */
    up_request *r = pc->ur;
    if (r) {
        r->pc = NULL;
        pc->ur = NULL;
        cancel_upstream(up, r, "the client went away");
    }
    calls_fail(up, pc, MCPG_RPC_SERVER_ERROR, "request cancelled");
}

/* The upstream answered r with bytes no parser here reads (not JSON, or
 * nested beyond MCPG_JSON_MAX_DEPTH): the call fails now, naming the
 * backend, rather than wait for its timeout; the upstream is told cancelled. */
void calls_unreadable(upstream *up, up_request *r) {
    client_call *pc = r->pc;
    if (!pc) return; /* parked: its question keeps it, and it expires */
    r->pc = NULL;
    pc->ur = NULL;
    cancel_upstream(up, r, "its answer could not be read");
    calls_fail(up, pc, MCPG_RPC_SERVER_ERROR,
               "the upstream's answer is not JSON the gateway reads (malformed, or nested deeper "
               "than %d levels)", MCPG_JSON_MAX_DEPTH);
}

/* ---- the upstream's notifications about a call ---- */

static up_request *call_by_id(upstream *up, int64_t id) {
    for (up_request *r = up->pending; r; r = r->next)
        if (r->id == id && r->kind == UR_CALL) return r;
    return NULL;
}

/* A call started: from now on no call that was in flight beside it, nor it,
 * is the upstream's only call over its whole life (calls_sole). */
void calls_mark_shared(upstream *up, up_request *started) {
    if (up->cfg.untied != UNTIED_SOLE_CALL) return; /* only calls_sole reads the mark */
    for (up_request *r = up->pending; r; r = r->next)
        if (r != started && r->kind == UR_CALL && (r->pc || r->parked)) {
            r->shared = true;
            started->shared = true;
        }
}

static bool calls_in_flight(const upstream *up) {
    for (const up_request *r = up->pending; r; r = r->next)
        if (r->kind == UR_CALL && (r->pc || r->parked)) return true;
    return false;
}

/* A message the upstream did not tie to a call (no stream of its own, no
 * progress token: stdio, the HTTP GET stream) reaches nobody, unless the
 * operator allows `untied_messages: "sole_call"`: then the one call in
 * flight, if it has been the only one since it started. A guess beyond
 * that could hand one caller's question or log line to another. */
up_request *calls_sole(upstream *up) {
    if (up->cfg.untied != UNTIED_SOLE_CALL) return NULL;
    up_request *sole = NULL;
    for (up_request *r = up->pending; r; r = r->next) {
        if (r->kind != UR_CALL || !(r->pc || r->parked)) continue;
        if (sole) return NULL;
        sole = r;
    }
    return sole && !sole->shared ? sole : NULL;
}

/* Counted, and logged at 1, 2, 4, 8... so an upstream cannot fill the log. */
static void untied_dropped(upstream *up, const char *method) {
    uint64_t k = ++up->untied_dropped;
    if ((k & (k - 1)) == 0)
        up_log_said(up, "%s from the upstream tied to no call (no request stream, no progress "
                    "token; untied_messages is \"%s\"): reached nobody (%llu so far)", method,
                    up->cfg.untied == UNTIED_SOLE_CALL ? "sole_call" : "drop",
                    (unsigned long long)k);
}

void calls_progress(upstream *up, client_call *pc, const char *params, size_t n) {
    mcpg_json_span k, v;
    if (!pc || !pc->client_token || !pc->call) return;
    mcpg_buf b = {0};
    mcpg_buf_puts(&b, "{\"progressToken\":");
    mcpg_buf_puts(&b, pc->client_token);
    size_t it = 0;
    while (mcpg_json_object_next(params, n, &it, &k, &v) == 1)
        if (!mcpg_json_string_eq(&k, "progressToken", 13)) append_member(&b, &k, &v);
    if (!mcpg_buf_puts(&b, "}"))
        up->h->call_notify(pc->call, "notifications/progress", b.data, b.len);
    mcpg_buf_free(&b);
}

/* progressToken: ours (the upstream request's id) back to the client's. */
static void relay_progress(upstream *up, const char *params, size_t n) {
    mcpg_json_span tok;
    int64_t id;
    if (!params || mcpg_json_object_get(params, n, "progressToken", &tok) != 1 ||
        mcpg_json_int64(&tok, &id) != 0)
        return;
    up_request *r = call_by_id(up, id);
    calls_progress(up, r ? r->pc : NULL, params, n);
}

void calls_notify(upstream *up, up_request *on, const char *method, const char *params, size_t n) {
    if (strcmp(method, "notifications/progress") == 0) {
        relay_progress(up, params, n);
        return;
    }
    /* on another request's stream (a listen, a subscribe) it is nobody's;
     * with no stream at all (stdio, the GET stream): calls_sole */
    up_request *r = on ? (on->kind == UR_CALL ? on : NULL) : calls_sole(up);
    if (!on && !r && calls_in_flight(up))
        untied_dropped(up, method);
    if (!r || !r->pc || !r->pc->call) {
        /* nobody's: the gateway's own session with the upstream said it */
        if (strcmp(method, "notifications/message") == 0)
            up_log_said(up, "upstream log message outside any call: %.*s",
                        (int)(n > 500 ? 500 : n), params ? params : "");
        return;
    }
    mcpg_buf ids = {0};
    if (task_ids_present(params, n) && task_ids_for_client(up, params, n, &ids) == 0) {
        params = ids.data;
        n = ids.len;
    }
    up->h->call_notify(r->pc->call, method, params, n);
    mcpg_buf_free(&ids);
}

/* ---- the upstream's questions for the client ---- */

typedef struct reply_ctx {
    upstream *up;
    char *id_json;
    char caller_key[65]; /* the session that asked, when it is a caller's */
} reply_ctx;

static void reply_upstream(upstream *up, const reply_ctx *x, const char *body) {
    const char *id_json = x->id_json;
    job *j = calloc(1, sizeof *j);
    if (!j) return;
    j->kind = JOB_REPLY;
    memcpy(j->caller_key, x->caller_key, sizeof j->caller_key);
    if (asprintf(&j->text, "{\"jsonrpc\":\"2.0\",\"id\":%s,%s}", id_json, body) < 0) {
        free(j);
        return;
    }
    if (up_post(up, j)) {
        free(j->text);
        free(j);
    }
}

static void error_body(char *out, size_t cap, int64_t code, const char *message) {
    char esc[600];
    size_t n = strlen(message);
    if (n > 250) n = 250;
    esc[mcpg_json_escape(esc, message, n)] = '\0';
    snprintf(out, cap, "\"error\":{\"code\":%lld,\"message\":\"%s\"}", (long long)code, esc);
}

/* On the call's loop: the client answered (or could not). */
static void on_client_reply(void *arg, const mcpg_reply *rep) {
    reply_ctx *x = arg;
    char small[700];
    if (rep->status == 0 && !rep->is_error) {
        char *body = NULL;
        if (asprintf(&body, "\"result\":%.*s", (int)rep->result_len, rep->result_json) >= 0) {
            reply_upstream(x->up, x, body);
            free(body);
        }
    } else if (rep->status == 0) {
        error_body(small, sizeof small, rep->error_code,
                   rep->error_message ? rep->error_message : "error");
        reply_upstream(x->up, x, small);
    } else {
        char why[200];
        snprintf(why, sizeof why, "the client did not answer: %s", mcpg_strerror(rep->status));
        error_body(small, sizeof small, MCPG_RPC_INTERNAL_ERROR, why);
        reply_upstream(x->up, x, small);
    }
    free(x->id_json);
    free(x);
}

static void refuse_question(upstream *up, const char *id_json, size_t id_len, const char *why) {
    char body[700];
    error_body(body, sizeof body, MCPG_RPC_INTERNAL_ERROR, why);
    up_send_response(up, id_json, id_len, body);
}

static void park_call(upstream *up, up_request *r, const char *id_json, size_t id_len,
                      const char *method, const char *params, size_t pn);

/* A question the calling client did not declare it takes is neither relayed
 * nor parked: the upstream is answered at once, as that client would answer
 * (client_caps.c), and its call goes on. Counted, and logged at 1, 2, 4...
 * (and at most UP_SAID_PER_S lines a second) so an upstream cannot fill the
 * log. True when refused. */
static bool refuse_undeclared(upstream *up, const client_call *pc, const char *id_json, size_t id_len,
                              const char *method, const char *params, size_t pn) {
    uint32_t need = caps_needed(pc->caps, method, strlen(method), params, pn);
    if (!need) return false;
    int64_t code;
    char msg[200], body[700];
    caps_refusal(need, method, &code, msg, sizeof msg);
    error_body(body, sizeof body, code, msg);
    up_send_response(up, id_json, id_len, body);
    uint64_t k = ++up->undeclared_refused;
    if ((k & (k - 1)) == 0)
        up_log_said(up, "%s from the upstream refused: the calling client did not declare the "
                    "capability it needs (%llu so far)", method, (unsigned long long)k);
    return true;
}

/* The stateless wire answers a question with input_required only on the
 * three requests that may carry one; any other call (completion/complete,
 * a list) cannot ask its client anything. */
static bool parkable(int method) {
    return method == MCPG_METHOD_TOOLS_CALL || method == MCPG_METHOD_PROMPTS_GET ||
           method == MCPG_METHOD_RESOURCES_READ;
}

void calls_asked(upstream *up, up_request *on, const char *id_json, size_t id_len, const char *method,
                 const char *params, size_t pn) {
    /* on another request's stream (a listen, a subscribe) it is nobody's;
     * with no stream at all (stdio, the GET stream): calls_sole */
    up_request *r = on ? (on->kind == UR_CALL ? on : NULL) : calls_sole(up);
    if (!on && !r && calls_in_flight(up)) untied_dropped(up, method);
    if (!r || !r->pc || (!r->pc->call && !r->pc->relay_to)) {
        char why[200];
        snprintf(why, sizeof why, "no client call is waiting that could answer %s", method);
        refuse_question(up, id_json, id_len, why);
        return;
    }
    if (refuse_undeclared(up, r->pc, id_json, id_len, method, params, pn)) return;
    reply_ctx *x = calloc(1, sizeof *x);
    if (x) x->up = up;
    if (x) memcpy(x->caller_key, r->pc->caller_key, sizeof x->caller_key);
    if (!x || !(x->id_json = span_dup(id_json, id_len))) {
        free(x);
        refuse_question(up, id_json, id_len, "out of memory");
        return;
    }
    mcpg_buf ids = {0};
    if (task_ids_present(params, pn) && task_ids_for_client(up, params, pn, &ids) == 0) {
        params = ids.data;
        pn = ids.len;
    }
    /* a relayed retry's client is on the stateless wire: it is parked again */
    int rc = MCPG_HOST_HAS(up->h, call_request) && r->pc->call
                 ? up->h->call_request(r->pc->call, method, params, pn, 0, on_client_reply, x)
                 : MCPG_ENOTSUP;
    if (rc == MCPG_ENOTSUP && parkable(r->pc->method))
        park_call(up, r, id_json, id_len, method, params, pn);
    else if (rc == MCPG_ENOTSUP)
        refuse_question(up, id_json, id_len,
                        "the client's request cannot carry a question: on its wire only "
                        "tools/call, prompts/get and resources/read can");
    mcpg_buf_free(&ids);
    if (rc == 0) return;
    free(x->id_json);
    free(x);
    if (rc == MCPG_ENOTSUP) return; /* parked above */
    char why[200];
    snprintf(why, sizeof why, "the client cannot be asked now: %s", mcpg_strerror(rc));
    refuse_question(up, id_json, id_len, why);
}

/* ---- parking: the stateless client's side of a question ---- */

static park *park_of_token(upstream *up, const char *token, park ***link_out) {
    for (park **pp = &up->parks; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->token, token) == 0) {
            if (link_out) *link_out = pp;
            return *pp;
        }
    return NULL;
}

static void asked_free(asked *q) {
    free(q->id_json);
    free(q->method);
    free(q->params_json);
    memset(q, 0, sizeof *q);
}

/* answer_upstream: its question gets an error, and its call is cancelled. */
static void park_free(upstream *up, park *p, bool answer_upstream) {
    if (answer_upstream && p->ur) {
        const char *before = reply_on(up, p->caller_key);
        if (p->q.id_json)
            refuse_question(up, p->q.id_json, strlen(p->q.id_json),
                            "the client did not answer in time");
        reply_on_done(up, before);
        cancel_upstream(up, p->ur, "the client did not answer");
    } else if (p->ur) {
        p->ur->parked = NULL;
    }
    asked_free(&p->q);
    free(p->owner);
    free(p);
}

static void ask_parked(upstream *up, client_call *pc, const park *p);

static void park_call(upstream *up, up_request *r, const char *id_json, size_t id_len,
                      const char *method, const char *params, size_t pn) {
    client_call *pc = r->pc;
    park *p = calloc(1, sizeof *p);
    unsigned char rnd[12];
    if (!p || getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        free(p);
        refuse_question(up, id_json, id_len, "out of memory");
        return;
    }
    /* the tag names the replica (and instance) that holds it: a retry that
     * reaches another replica is relayed here (park_relay.c) */
    int off = snprintf(p->token, sizeof p->token, PARK_PREFIX "%s-", up->park_tag);
    for (size_t i = 0; i < sizeof rnd; i++)
        off += snprintf(p->token + off, sizeof p->token - (size_t)off, "%02x", rnd[i]);
    p->owner = pc->owner ? strdup(pc->owner) : NULL;
    memcpy(p->caller_key, pc->caller_key, sizeof p->caller_key);
    p->q.id_json = span_dup(id_json, id_len);
    p->q.method = strdup(method);
    p->q.params_json = params ? span_dup(params, pn) : NULL;
    p->ur = r;
    p->expires_ms = up_now_ms(up) + (uint64_t)up->cfg.c->input_wait_ms;
    p->next = up->parks;
    up->parks = p;
    r->parked = p;
    r->pc = NULL;
    pc->ur = NULL;
    ask_parked(up, pc, p);
}

/* Answer pc's client with p's question and how to come back (its token):
 * input_required, or the next round of a relayed retry. Releases pc. */
static void ask_parked(upstream *up, client_call *pc, const park *p) {
    mcpg_buf req = {0};
    mcpg_buf_puts(&req, "{\"" ASK_KEY "\":{\"method\":");
    mcpg_buf_append_json_string(&req, p->q.method, strlen(p->q.method));
    if (p->q.params_json) {
        mcpg_buf_puts(&req, ",\"params\":");
        mcpg_buf_puts(&req, p->q.params_json);
    }
    mcpg_buf_puts(&req, "}}");
    mcpg_call *c = claim(up, pc);
    if (c) {
        mcpg_status st = mcpg_result_input_required(up->h, c, req.data, req.len, p->token,
                                                    strlen(p->token));
        up->h->call_resume(c, st);
    } else if (pc->relay_to) {
        relay_round(up, pc, req.data, req.len, p->token);
    }
    mcpg_buf_free(&req);
    release(up, pc);
}

/* Only the caller who was asked may answer: another's requestState is
 * answered exactly as an unknown one, so it tells nothing. */
static bool same_owner(const char *a, const char *b) {
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static void resume_parked(upstream *up, client_call *pc) {
    park **pp = NULL;
    park *p = park_of_token(up, pc->request_state, &pp);
    if (!p || !same_owner(p->owner, pc->owner)) {
        calls_fail(up, pc, MCPG_RPC_INVALID_PARAMS,
                   "requestState is unknown or expired (questions wait %lld ms)",
                   (long long)up->cfg.c->input_wait_ms);
        return;
    }
    mcpg_json_span answer;
    const char *ir = pc->input_responses;
    if (!ir || mcpg_json_object_get(ir, strlen(ir), ASK_KEY, &answer) != 1 ||
        answer.type != MCPG_JSON_OBJECT) {
        /* a retry without the answer is asked again, not failed: the question
         * stays parked under the same token */
        ask_parked(up, pc, p);
        return;
    }
    char *body = NULL;
    if (asprintf(&body, "\"result\":%.*s", (int)answer.n, answer.p) < 0) body = NULL;
    *pp = p->next;
    up_request *r = p->ur;
    r->parked = NULL;
    r->pc = pc;
    pc->ur = r;
    if (body) {
        mcpg_buf b = {0};
        mcpg_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,%s}", p->q.id_json, body);
        const char *before = reply_on(up, p->caller_key);
        if (b.data) up->link->ops->send(up->link, b.data, b.len, NULL);
        reply_on_done(up, before);
        mcpg_buf_free(&b);
        free(body);
    }
    p->ur = NULL;
    park_free(up, p, false);
    if (pc->relay_to) relay_ack(up, pc); /* its replica now waits for the outcome */
}

void calls_expire_parks(upstream *up) {
    uint64_t now = up_now_ms(up);
    for (park **pp = &up->parks; *pp;) {
        park *p = *pp;
        if (now < p->expires_ms) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        park_free(up, p, true);
    }
}

void calls_fail_all(upstream *up, const char *why) {
    for (up_request *r = up->pending, *next; r; r = next) {
        next = r->next;
        if (r->kind == UR_CALL && r->pc) {
            client_call *pc = r->pc;
            r->pc = NULL;
            pc->ur = NULL;
            calls_fail(up, pc, MCPG_RPC_SERVER_ERROR, "upstream: %s", why);
        }
    }
    while (up->parks) {
        park *p = up->parks;
        up->parks = p->next;
        park_free(up, p, false);
    }
}
