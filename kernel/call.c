/* Calls and the pipeline.
 *
 * A call walks the fixed stage order:
 *   identity → policy → limits → audit "allowed" → backend → audit
 *   "completed"/"failed" (or "denied") → the transport's complete().
 * Each op answers CONTINUE, DENY or PENDING; a PENDING op finishes later with
 * host->call_resume from any thread, and the call continues on its own loop.
 *
 * The resume handshake (op_state) makes "resume before the op even returned
 * PENDING" safe: the invoker sees OP_EARLY and carries on itself.
 *
 * Call objects are recycled through a per-worker free list with their result
 * buffer kept, so a call in steady state allocates nothing. */
#include "kernel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum phase { PH_IDENTITY, PH_POLICY, PH_LIMITS, PH_AUDIT_ALLOWED, PH_BACKEND, PH_AUDIT_DONE,
             PH_COMPLETE };
enum op_state { OP_IDLE, OP_RUNNING, OP_PENDING, OP_EARLY };

struct mcpg_call {
    mcpg_post post;              /* resume delivery to the loop */
    pool_job job;                /* backend dispatch to the pool */
    struct mcpg_call *next_free;
    struct mcpg_call *tq_prev, *tq_next; /* the worker's pool-timeout list */
    mcpg_worker *w;
    generation *gen;
    mcpg_call_desc d;
    uint32_t method;
    const tool_route *route;
    int phase;
    size_t idx;
    size_t limits_acquired;
    atomic_int op_state;
    atomic_int resume_status;
    int delivered;               /* status carried by post */
    int refs;                    /* loop-thread only: transport + pool */
    bool on_pool, detached, cancelled, backend_failed, denied, expired_in_queue;
    uint64_t deadline_us, t0, tb0, tb1;
    char *principal, *tenant, *roles;
    mcpg_buf result;
    bool is_error;
    int64_t err_code;
    char err_msg[256];
    mcpg_buf err_data;
    int http_status;
    uint32_t retry_after;
    /* A pool call that timed out is answered from here: the backend may still
     * be writing the fields above from its pool thread. */
    char timeout_msg[160];
    uint32_t n_slots;
    void *slots[];
};

static const char *method_names[] = {
    [MCPG_METHOD_OTHER] = "", [MCPG_METHOD_TOOLS_LIST] = "tools/list",
    [MCPG_METHOD_TOOLS_CALL] = "tools/call", [MCPG_METHOD_RESOURCES_LIST] = "resources/list",
    [MCPG_METHOD_RESOURCES_TEMPLATES_LIST] = "resources/templates/list",
    [MCPG_METHOD_RESOURCES_READ] = "resources/read",
    [MCPG_METHOD_RESOURCES_SUBSCRIBE] = "resources/subscribe",
    [MCPG_METHOD_RESOURCES_UNSUBSCRIBE] = "resources/unsubscribe",
    [MCPG_METHOD_PROMPTS_LIST] = "prompts/list", [MCPG_METHOD_PROMPTS_GET] = "prompts/get",
    [MCPG_METHOD_COMPLETION_COMPLETE] = "completion/complete"};

static uint32_t method_of(const char *m, size_t n) {
    for (uint32_t i = 1; i < sizeof method_names / sizeof *method_names; i++)
        if (strlen(method_names[i]) == n && memcmp(method_names[i], m, n) == 0) return i;
    return MCPG_METHOD_OTHER;
}

static void run(mcpg_call *c);
static void on_status(mcpg_call *c, mcpg_status st);

/* ---- errors set by the kernel itself ---- */

static void set_error(mcpg_call *c, int64_t code, int http, const char *fmt, ...)
    MCPG_PRINTF(4, 5);
static void set_error(mcpg_call *c, int64_t code, int http, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err_msg, sizeof c->err_msg, fmt, ap);
    va_end(ap);
    c->is_error = true;
    c->err_code = code;
    c->err_data.len = 0;
    c->http_status = http;
}

/* ---- allocation: per-worker free list ---- */

static mcpg_call *call_alloc(mcpg_worker *w, uint32_t n_slots) {
    mcpg_call *c = w->freelist.head;
    if (c && c->n_slots >= n_slots) {
        w->freelist.head = c->next_free;
        w->freelist.count--;
    } else {
        c = calloc(1, sizeof *c + n_slots * sizeof(void *));
        if (!c) return NULL;
        c->n_slots = n_slots;
    }
    mcpg_buf keep_result = c->result, keep_data = c->err_data;
    uint32_t keep_slots = c->n_slots;
    memset(c, 0, sizeof *c + keep_slots * sizeof(void *));
    c->result = keep_result;
    c->err_data = keep_data;
    c->result.len = 0;
    c->err_data.len = 0;
    c->n_slots = keep_slots;
    return c;
}

static void call_recycle(mcpg_call *c) {
    mcpg_worker *w = c->w;
    free(c->principal);
    free(c->tenant);
    free(c->roles);
    c->principal = c->tenant = c->roles = NULL;
    atomic_fetch_sub(&c->gen->refs, 1);
    /* keep a bounded number for reuse; big result buffers are not kept */
    if (w->freelist.count < 1024 && c->result.cap <= 65536) {
        c->next_free = w->freelist.head;
        w->freelist.head = c;
        w->freelist.count++;
        return;
    }
    mcpg_buf_free(&c->result);
    mcpg_buf_free(&c->err_data);
    free(c);
}

void calls_free_worker(mcpg_worker *w) {
    mcpg_call *c = w->freelist.head;
    while (c) {
        mcpg_call *next = c->next_free;
        mcpg_buf_free(&c->result);
        mcpg_buf_free(&c->err_data);
        free(c);
        c = next;
    }
    w->freelist.head = NULL;
    w->freelist.count = 0;
}

static void unref(mcpg_call *c) {
    if (--c->refs == 0) call_recycle(c);
}

/* ---- the resume handshake ---- */

static mcpg_status settle(mcpg_call *c, mcpg_status st) {
    if (st != MCPG_PENDING) {
        atomic_store(&c->op_state, OP_IDLE);
        return st;
    }
    int expect = OP_RUNNING;
    if (atomic_compare_exchange_strong(&c->op_state, &expect, OP_PENDING)) return MCPG_PENDING;
    atomic_store(&c->op_state, OP_IDLE); /* resumed before it returned */
    return (mcpg_status)atomic_load(&c->resume_status);
}

static void tq_remove(mcpg_call *c);

static void deliver_on_loop(void *arg) {
    mcpg_call *c = arg;
    if (c->on_pool) {
        c->on_pool = false;
        tq_remove(c);
        if (c->detached) { /* it timed out: the answer already went out */
            unref(c);
            return;
        }
        c->refs--; /* the pool's reference; the transport still holds one */
        if (c->expired_in_queue)
            set_error(c, MCPG_RPC_SERVER_ERROR, 0, "backend \"%s\" timed out after %llu ms",
                      c->route->backend->name,
                      (unsigned long long)c->route->backend->timeout_ms);
    }
    on_status(c, (mcpg_status)c->delivered);
    run(c);
}

/* Hand a finished op's status to the call's loop. Always through the loop's
 * queue, never by re-entering the pipeline from inside a module's callback. */
static void deliver(mcpg_call *c, mcpg_status st) {
    c->delivered = st;
    c->post.fn = deliver_on_loop;
    c->post.arg = c;
    if (worker_post(c->w, &c->post) != 0)
        klog(MCPG_LOG_WARN, "kernel", "a call resumed after its worker stopped was dropped");
}

void host_call_resume(mcpg_call *c, mcpg_status st) {
    atomic_store(&c->resume_status, st);
    int expect = OP_RUNNING;
    if (atomic_compare_exchange_strong(&c->op_state, &expect, OP_EARLY)) return;
    expect = OP_PENDING;
    if (atomic_compare_exchange_strong(&c->op_state, &expect, OP_IDLE)) {
        deliver(c, st);
        return;
    }
    klog(MCPG_LOG_ERROR, "kernel", "call_resume on a call that is not pending (module bug)");
}

/* ---- pool dispatch with a per-call timeout ---- */

static void on_timeouts(uv_timer_t *t);

static void tq_add(mcpg_call *c) {
    mcpg_worker *w = c->w;
    c->tq_prev = NULL;
    c->tq_next = w->tq_head;
    if (w->tq_head) w->tq_head->tq_prev = c;
    else uv_timer_start(&w->tq_timer, on_timeouts, 10, 10);
    w->tq_head = c;
}

static void tq_remove(mcpg_call *c) {
    mcpg_worker *w = c->w;
    if (c->tq_prev) c->tq_prev->tq_next = c->tq_next;
    else if (w->tq_head == c) w->tq_head = c->tq_next;
    if (c->tq_next) c->tq_next->tq_prev = c->tq_prev;
    c->tq_prev = c->tq_next = NULL;
    if (!w->tq_head) uv_timer_stop(&w->tq_timer);
}

static void on_timeouts(uv_timer_t *t) {
    mcpg_worker *w = t->data;
    uint64_t now = mono_us();
    for (mcpg_call *c = w->tq_head, *next; c; c = next) {
        next = c->tq_next;
        if (c->detached || now < c->deadline_us) continue;
        c->detached = true; /* the pool reference stays until the backend returns */
        c->backend_failed = true;
        c->tb1 = now;
        snprintf(c->timeout_msg, sizeof c->timeout_msg, "backend \"%s\" timed out after %llu ms",
                 c->route->backend->name, (unsigned long long)c->route->backend->timeout_ms);
        c->phase = PH_AUDIT_DONE;
        c->idx = 0;
        run(c);
    }
}

static void pool_run(pool_job *j) {
    mcpg_call *c = (mcpg_call *)((char *)j - offsetof(mcpg_call, job));
    mcpg_instance *be = c->route->backend;
    const mcpg_backend_ops *ops = be->desc->ops;
    atomic_store(&c->op_state, OP_RUNNING);
    mcpg_status st = settle(c, ops->call_tool(be->state, c));
    if (st != MCPG_PENDING) deliver(c, st);
}

static void pool_expired(pool_job *j) {
    mcpg_call *c = (mcpg_call *)((char *)j - offsetof(mcpg_call, job));
    c->expired_in_queue = true; /* published to the loop by deliver's lock */
    deliver(c, MCPG_DENY);
}

/* On the loop: the pool's queue was full when this turn's jobs went in. */
static void pool_refused(pool_job *j) {
    mcpg_call *c = (mcpg_call *)((char *)j - offsetof(mcpg_call, job));
    c->on_pool = false;
    c->refs--;
    tq_remove(c);
    atomic_store(&c->op_state, OP_IDLE);
    set_error(c, MCPG_RPC_SERVER_ERROR, 503, "worker pool is full, try again");
    c->retry_after = 1;
    on_status(c, MCPG_DENY);
    run(c);
}

static mcpg_status dispatch_backend(mcpg_call *c) {
    mcpg_instance *be = c->route->backend;
    const mcpg_backend_ops *ops = be->desc->ops;
    c->tb0 = mono_us();
    if (be->inline_dispatch) {
        atomic_store(&c->op_state, OP_RUNNING);
        return settle(c, ops->call_tool(be->state, c));
    }
    c->job.run = pool_run;
    c->job.expired = pool_expired;
    c->job.refused = pool_refused;
    c->job.timeout_us = be->timeout_ms * 1000;
    c->deadline_us = c->tb0 + c->job.timeout_us;
    c->on_pool = true;
    c->refs++;
    tq_add(c);
    worker_defer_job(c->w, &c->job);
    return MCPG_PENDING;
}

/* The error a call answers with: the kernel's own for a timed-out pool call
 * (the backend may still write its fields), else what the stages set. */
static bool call_error_of(mcpg_call *c, int64_t *code, const char **msg) {
    if (c->detached) {
        *code = MCPG_RPC_SERVER_ERROR;
        *msg = c->timeout_msg;
        return true;
    }
    *code = c->err_code;
    *msg = c->err_msg;
    return c->is_error;
}

/* ---- audit ---- */

static const char *audit_event_name(mcpg_call *c) {
    if (c->phase == PH_AUDIT_ALLOWED) return "mcpg.tool.call.allowed";
    if (c->denied) return "mcpg.tool.call.denied";
    return c->backend_failed ? "mcpg.tool.call.failed" : "mcpg.tool.call.completed";
}

static mcpg_status emit_audit(mcpg_call *c, mcpg_instance *sink) {
    mcpg_audit_event ev = {.size = sizeof ev};
    ev.name = audit_event_name(c);
    ev.seq = atomic_fetch_add(&K.audit_seq, 1) + 1;
    ev.time_us = wall_us();
    ev.id_json = c->d.id_json;
    ev.id_len = c->d.id_len;
    ev.method = method_names[c->method];
    ev.tool = c->route ? c->route->client_name : NULL;
    ev.backend = c->route ? c->route->backend->name : NULL;
    ev.principal = c->principal;
    ev.tenant = c->tenant;
    ev.wire = c->d.wire;
    ev.generation = c->gen->id;
    if (c->phase == PH_AUDIT_DONE) {
        if (!call_error_of(c, &ev.error_code, &ev.error_message)) {
            ev.error_code = 0;
            ev.error_message = NULL;
        }
        ev.latency_us = mono_us() - c->t0;
        ev.backend_us = c->tb1 > c->tb0 ? c->tb1 - c->tb0 : 0;
    }
    const mcpg_audit_ops *ops = sink->desc->ops;
    atomic_store(&c->op_state, OP_RUNNING);
    return settle(c, ops->emit(sink->state, c, &ev));
}

/* ---- the pipeline ---- */

static void finish(mcpg_call *c) {
    c->phase = PH_COMPLETE;
    mcpg_instance **lim = c->gen->stage[STAGE_LIMITS];
    for (size_t i = 0; i < c->limits_acquired; i++) {
        const mcpg_limits_ops *ops = lim[i]->desc->ops;
        if (ops->release) ops->release(lim[i]->state, c);
    }
    atomic_fetch_sub(&c->w->calls_in_flight, 1);
    c->d.complete(c->d.transport_ctx, c);
}

static void answer_locally(mcpg_call *c) {
    if (c->method == MCPG_METHOD_TOOLS_LIST) {
        /* the merged list is the generation's, borrowed while the call pins it */
        c->result.len = 0;
        return;
    }
    set_error(c, MCPG_RPC_METHOD_NOT_FOUND, 404, "Method not found: %s",
              c->method ? method_names[c->method] : "(unknown)");
}

static mcpg_status stage_op(mcpg_call *c, int stage, mcpg_instance *inst) {
    atomic_store(&c->op_state, OP_RUNNING);
    switch (stage) {
    case STAGE_IDENTITY: {
        const mcpg_identity_ops *o = inst->desc->ops;
        return settle(c, o->authenticate(inst->state, c));
    }
    case STAGE_POLICY: {
        const mcpg_policy_ops *o = inst->desc->ops;
        return settle(c, o->check(inst->state, c));
    }
    default: {
        const mcpg_limits_ops *o = inst->desc->ops;
        return settle(c, o->acquire(inst->state, c));
    }
    }
}

/* What the current op's answer means for where the call goes next. */
static void on_status(mcpg_call *c, mcpg_status st) {
    switch (c->phase) {
    case PH_IDENTITY:
    case PH_POLICY:
    case PH_LIMITS:
        if (st == MCPG_DENY) {
            if (!c->is_error) set_error(c, MCPG_RPC_INVALID_REQUEST, 0, "request refused");
            c->denied = true;
            bool audited = c->method == MCPG_METHOD_TOOLS_CALL && c->gen->n_stage[STAGE_AUDIT];
            c->phase = audited ? PH_AUDIT_DONE : PH_COMPLETE;
            c->idx = 0;
            return;
        }
        if (c->phase == PH_LIMITS) c->limits_acquired++;
        c->idx++;
        return;
    case PH_AUDIT_ALLOWED:
        if (st == MCPG_DENY) { /* cannot record: fail closed, the backend never runs */
            c->phase = PH_COMPLETE;
            return;
        }
        c->idx++;
        return;
    case PH_BACKEND:
        c->tb1 = mono_us();
        if (st == MCPG_DENY) {
            c->backend_failed = true;
            if (!c->is_error) set_error(c, MCPG_RPC_INTERNAL_ERROR, 0, "backend failed");
        }
        c->phase = c->gen->n_stage[STAGE_AUDIT] ? PH_AUDIT_DONE : PH_COMPLETE;
        c->idx = 0;
        return;
    case PH_AUDIT_DONE:
        if (st == MCPG_DENY) { /* the record of the outcome failed: fail closed */
            c->phase = PH_COMPLETE;
            return;
        }
        c->idx++;
        return;
    default:
        return;
    }
}

static void run(mcpg_call *c) {
    for (;;) {
        mcpg_status st;
        generation *g = c->gen;
        switch (c->phase) {
        case PH_IDENTITY:
        case PH_POLICY:
        case PH_LIMITS: {
            int stage = c->phase - PH_IDENTITY;
            bool applies = stage != STAGE_LIMITS || c->method == MCPG_METHOD_TOOLS_CALL;
            if (!applies || c->idx >= g->n_stage[stage]) {
                c->idx = 0;
                if (c->method == MCPG_METHOD_TOOLS_CALL) {
                    c->phase++;
                } else if (c->phase == PH_IDENTITY) {
                    c->phase = PH_POLICY; /* lists are filtered by policy, not limited */
                } else {
                    c->phase = PH_COMPLETE;
                    answer_locally(c);
                }
                continue;
            }
            st = stage_op(c, stage, g->stage[stage][c->idx]);
            break;
        }
        case PH_AUDIT_ALLOWED:
        case PH_AUDIT_DONE:
            if (c->idx >= g->n_stage[STAGE_AUDIT]) {
                c->idx = 0;
                c->phase = c->phase == PH_AUDIT_ALLOWED ? PH_BACKEND : PH_COMPLETE;
                continue;
            }
            st = emit_audit(c, g->stage[STAGE_AUDIT][c->idx]);
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

/* ---- the transport's side ---- */

int call_submit(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **out) {
    if (w->draining) return MCPG_EUNAVAIL;
    if ((uint64_t)atomic_load(&w->calls_in_flight) >= K.max_calls_per_worker) return MCPG_EAGAIN;
    generation *g = w->gen;
    mcpg_call *c = call_alloc(w, (uint32_t)g->n_instances);
    if (!c) return MCPG_ENOMEM;
    c->w = w;
    c->gen = g;
    atomic_fetch_add(&g->refs, 1);
    memcpy(&c->d, d, d->size < sizeof c->d ? d->size : sizeof c->d);
    c->refs = 1;
    c->t0 = mono_us();
    c->method = method_of(d->method, d->method_len);
    atomic_fetch_add(&w->calls_in_flight, 1);
    *out = c;
    if (c->method == MCPG_METHOD_TOOLS_CALL) {
        c->route = d->name ? generation_route(g, d->name, d->name_len) : NULL;
        if (!c->route) {
            set_error(c, MCPG_RPC_INVALID_PARAMS, 0, "Unknown tool: %.*s",
                      (int)(d->name ? d->name_len : 0), d->name ? d->name : "");
            c->phase = PH_COMPLETE;
        }
    }
    run(c);
    return 0;
}

void call_cancel(mcpg_call *c) {
    c->cancelled = true;
    if (c->phase == PH_BACKEND && c->route) {
        const mcpg_backend_ops *ops = c->route->backend->desc->ops;
        if (ops->cancel && c->route->backend->inline_dispatch) ops->cancel(c->route->backend->state, c);
    }
}

void call_outcome(mcpg_call *c, mcpg_call_outcome *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    const char *msg;
    if (call_error_of(c, &o->error_code, &msg)) {
        o->is_error = 1;
        o->error_message = msg;
        if (!c->detached) {
            o->http_status = c->http_status;
            o->retry_after_s = c->retry_after;
            o->error_data = c->err_data.len ? c->err_data.data : NULL;
            o->error_data_len = c->err_data.len;
        }
    } else if (c->method == MCPG_METHOD_TOOLS_LIST) {
        o->result = c->gen->tools_list;
        o->result_len = c->gen->tools_list_len;
    } else {
        o->http_status = c->http_status;
        o->result = c->result.len ? c->result.data : "{}";
        o->result_len = c->result.len ? c->result.len : 2;
    }
}

void call_release(mcpg_call *c) { unref(c); }

/* ---- a call seen from a stage or backend (host table slots) ---- */

mcpg_worker *host_call_worker(mcpg_call *c) { return c->w; }
uint32_t host_call_method(mcpg_call *c) { return c->method; }
uint32_t host_call_wire(mcpg_call *c) { return c->d.wire; }
const char *host_call_target(mcpg_call *c) { return c->route ? c->route->target : NULL; }

const char *host_call_args(mcpg_call *c, size_t *len) {
    if (!c->d.args_json) {
        if (len) *len = 2;
        return "{}";
    }
    if (len) *len = c->d.args_len;
    return c->d.args_json;
}

const char *host_call_params(mcpg_call *c, size_t *len) {
    if (len) *len = c->d.params_json ? c->d.params_len : 0;
    return c->d.params_json;
}

const char *host_call_id(mcpg_call *c, size_t *len) {
    if (len) *len = c->d.id_len;
    return c->d.id_json;
}

const char *host_call_header(mcpg_call *c, const char *lname, size_t *len) {
    if (!c->d.header) return NULL;
    return c->d.header(c->d.transport_ctx, lname, len);
}

void **host_call_slot(mcpg_call *c, mcpg_instance *self) {
    if (!self || self->gen != c->gen || self->slot >= c->n_slots) return NULL;
    return &c->slots[self->slot];
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

int host_call_set_identity(mcpg_call *c, const char *principal, const char *tenant,
                           const char *roles) {
    free(c->principal);
    free(c->tenant);
    free(c->roles);
    c->principal = dup_or_null(principal);
    c->tenant = dup_or_null(tenant);
    c->roles = dup_or_null(roles);
    return 0;
}

const char *host_call_principal(mcpg_call *c) { return c->principal; }
const char *host_call_tenant(mcpg_call *c) { return c->tenant; }
const char *host_call_roles(mcpg_call *c) { return c->roles; }

int host_call_result(mcpg_call *c, const char *json, size_t len) {
    c->result.len = 0;
    return mcpg_buf_append(&c->result, json, len);
}

mcpg_buf *host_call_result_buf(mcpg_call *c) { return &c->result; }

int host_call_error(mcpg_call *c, int64_t code, const char *message, const char *data_json) {
    c->is_error = true;
    c->err_code = code;
    snprintf(c->err_msg, sizeof c->err_msg, "%s", message ? message : "");
    c->err_data.len = 0;
    if (data_json) mcpg_buf_puts(&c->err_data, data_json);
    return 0;
}

void host_call_set_http(mcpg_call *c, int http_status, uint32_t retry_after_s) {
    c->http_status = http_status;
    c->retry_after = retry_after_s;
}

int host_call_cancelled(mcpg_call *c) { return c->cancelled; }
