/* Calls and the pipeline.
 *
 * A call walks the fixed stage order:
 *   identity → policy → limits → audit "allowed" → backend → audit
 *   "completed"/"failed" (or "denied") → the transport's complete().
 * Each op answers CONTINUE, DENY or PENDING; a PENDING op finishes later with
 * host->call_resume from any thread, and the call continues on its own loop.
 *
 * The resume handshake (op_sync) makes "resume before the op even returned
 * PENDING" safe: the invoker sees OP_EARLY and carries on itself. A call has
 * two: one for the op the loop runs (a stage, an inline backend) and one for
 * a backend on the pool, because once a pool call has timed out both are in
 * use at once: the loop audits and answers the timeout while the backend may
 * still be running (a "detached" call). Each also has its own post node.
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
enum { SKIP_NONE, SKIP_EXPIRED, SKIP_CANCELLED };

/* One op's resume handshake (settle on the invoking side, op_resume on the
 * resuming side). */
typedef struct op_sync {
    atomic_int state;  /* enum op_state */
    atomic_int status; /* what call_resume said, read after OP_EARLY */
} op_sync;

/* A header value a pool backend looked up, copied (see host_call_header). */
typedef struct hdr_copy {
    struct hdr_copy *next;
    char value[];
} hdr_copy;

struct mcpg_call {
    mcpg_post post;              /* a loop op's status, to the loop */
    mcpg_post pool_post;         /* the pool backend's status, to the loop */
    pool_job job;                /* backend dispatch to the pool */
    struct mcpg_call *next_free;
    struct mcpg_call *live_prev, *live_next; /* the worker's calls not yet recycled */
    struct mcpg_call *tq_prev, *tq_next; /* the worker's pool-timeout list */
    mcpg_worker *w;
    generation *gen;
    mcpg_call_desc d;
    uint32_t method;
    const tool_route *route;
    int phase;
    size_t idx;
    size_t limits_acquired;
    op_sync loop_op;             /* identity, policy, limits, audit, inline backend */
    op_sync pool_op;             /* the backend on a pool thread */
    int delivered;               /* status carried by post */
    int pool_delivered;          /* status carried by pool_post */
    int refs;                    /* loop-thread only: transport + pool */
    bool on_pool, detached, backend_failed, denied;
    uint8_t skipped;             /* SKIP_*: the pool never ran the backend */
    atomic_bool cancelled;       /* set on the loop, read by a pool backend too */
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
    /* A pool backend may outlive the transport's request (the call timed
     * out and was answered): it reads these copies instead (kept across
     * recycling, like result), and copies of the headers it looks up. */
    mcpg_buf req_copy;
    pthread_mutex_t hdr_lock;    /* header lookups off the loop vs. answering */
    bool answered;               /* under hdr_lock: the transport's request is gone */
    hdr_copy *hdr_copies;
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
    mcpg_buf keep_result = c->result, keep_data = c->err_data, keep_req = c->req_copy;
    uint32_t keep_slots = c->n_slots;
    memset(c, 0, sizeof *c + keep_slots * sizeof(void *));
    c->result = keep_result;
    c->err_data = keep_data;
    c->req_copy = keep_req;
    c->result.len = 0;
    c->err_data.len = 0;
    c->req_copy.len = 0;
    c->n_slots = keep_slots;
    pthread_mutex_init(&c->hdr_lock, NULL);
    c->live_next = w->live;
    if (w->live) w->live->live_prev = c;
    w->live = c;
    return c;
}

static void call_free(mcpg_call *c) {
    mcpg_buf_free(&c->result);
    mcpg_buf_free(&c->err_data);
    mcpg_buf_free(&c->req_copy);
    free(c);
}

/* Let go of what a call holds beyond its reusable buffers. */
static void call_clear(mcpg_call *c) {
    mcpg_worker *w = c->w;
    if (c->live_prev) c->live_prev->live_next = c->live_next;
    else if (w->live == c) w->live = c->live_next;
    if (c->live_next) c->live_next->live_prev = c->live_prev;
    c->live_prev = c->live_next = NULL;
    free(c->principal);
    free(c->tenant);
    free(c->roles);
    c->principal = c->tenant = c->roles = NULL;
    for (hdr_copy *h = c->hdr_copies, *next; h; h = next) {
        next = h->next;
        free(h);
    }
    c->hdr_copies = NULL;
    pthread_mutex_destroy(&c->hdr_lock);
    atomic_fetch_sub(&c->gen->refs, 1);
}

static void call_recycle(mcpg_call *c) {
    mcpg_worker *w = c->w;
    call_clear(c);
    /* keep a bounded number for reuse; big buffers are not kept */
    if (w->freelist.count < 1024 && c->result.cap <= 65536 && c->req_copy.cap <= 65536) {
        c->next_free = w->freelist.head;
        w->freelist.head = c;
        w->freelist.count++;
        return;
    }
    call_free(c);
}

/* At exit, once the loops and the pool have ended: calls the drain deadline
 * cut short are still allocated, and nothing can reach them any more. */
void calls_free_abandoned(mcpg_worker *w) {
    size_t n = 0;
    while (w->live) {
        mcpg_call *c = w->live;
        call_clear(c);
        call_free(c);
        n++;
    }
    if (n) klog(MCPG_LOG_WARN, "kernel", "worker %u: %zu unanswered call(s) freed at exit", w->index, n);
}

void calls_free_worker(mcpg_worker *w) {
    mcpg_call *c = w->freelist.head;
    while (c) {
        mcpg_call *next = c->next_free;
        call_free(c);
        c = next;
    }
    w->freelist.head = NULL;
    w->freelist.count = 0;
}

static void unref(mcpg_call *c) {
    if (--c->refs == 0) call_recycle(c);
}

/* ---- the resume handshake ---- */

/* The invoker, after the op returned st (the op ran with state OP_RUNNING). */
static mcpg_status settle(op_sync *op, mcpg_status st) {
    if (st != MCPG_PENDING) {
        atomic_store(&op->state, OP_IDLE);
        return st;
    }
    int expect = OP_RUNNING;
    if (atomic_compare_exchange_strong(&op->state, &expect, OP_PENDING)) return MCPG_PENDING;
    atomic_store(&op->state, OP_IDLE); /* resumed before it returned */
    return (mcpg_status)atomic_load(&op->status);
}

enum { RESUME_TAKEN, RESUME_DELIVER, RESUME_NOT_WAITING };

/* The resumer: RESUME_TAKEN when the op is still running (its invoker will
 * see OP_EARLY and carry on), RESUME_DELIVER when the op had returned
 * PENDING (the resumer must deliver st to the loop). */
static int op_resume(op_sync *op, mcpg_status st) {
    atomic_store(&op->status, st);
    int expect = OP_RUNNING;
    if (atomic_compare_exchange_strong(&op->state, &expect, OP_EARLY)) return RESUME_TAKEN;
    expect = OP_PENDING;
    if (atomic_compare_exchange_strong(&op->state, &expect, OP_IDLE)) return RESUME_DELIVER;
    return RESUME_NOT_WAITING;
}

static void tq_remove(mcpg_call *c);

static void deliver_on_loop(void *arg) {
    mcpg_call *c = arg;
    on_status(c, (mcpg_status)c->delivered);
    run(c);
}

/* The backend on the pool has answered, or its job expired in the queue. */
static void pool_answer_on_loop(void *arg) {
    mcpg_call *c = arg;
    c->on_pool = false;
    tq_remove(c);
    if (c->detached) { /* it timed out: the answer already went out */
        unref(c);
        return;
    }
    c->refs--; /* the pool's reference; the transport still holds one */
    if (c->skipped == SKIP_EXPIRED)
        set_error(c, MCPG_RPC_SERVER_ERROR, 0, "backend \"%s\" timed out after %llu ms",
                  c->route->backend->name, (unsigned long long)c->route->backend->timeout_ms);
    else if (c->skipped == SKIP_CANCELLED)
        set_error(c, MCPG_RPC_SERVER_ERROR, 0, "request cancelled before the backend ran");
    on_status(c, (mcpg_status)c->pool_delivered);
    run(c);
}

static atomic_ulong dropped; /* answers that found their loop stopped */

/* Hand a finished op's status to the call's loop. Always through the loop's
 * queue, never by re-entering the pipeline from inside a module's callback. */
static void post_to_loop(mcpg_call *c, mcpg_post *node, void (*fn)(void *)) {
    node->fn = fn;
    node->arg = c;
    if (worker_post(c->w, node) != 0) atomic_fetch_add(&dropped, 1);
}

unsigned long calls_dropped(void) { return atomic_load(&dropped); }

static void deliver(mcpg_call *c, mcpg_status st) {
    c->delivered = st;
    post_to_loop(c, &c->post, deliver_on_loop);
}

static void deliver_pool(mcpg_call *c, mcpg_status st) {
    c->pool_delivered = st;
    post_to_loop(c, &c->pool_post, pool_answer_on_loop);
}

/* Which op does a resume finish? The loop's op when one is outstanding, else
 * the pool backend's. Only a detached call has both outstanding (the audit
 * of its timeout, and a backend still running); there a pool backend that
 * answered PENDING and resumes while an audit sink is also pending cannot
 * be told apart from the sink, and the two resumes may be swapped. Neither
 * then touches the call again and the answer is the timeout either way. */
void host_call_resume(mcpg_call *c, mcpg_status st) {
    int r = op_resume(&c->loop_op, st);
    if (r == RESUME_DELIVER) deliver(c, st);
    if (r != RESUME_NOT_WAITING) return;
    r = op_resume(&c->pool_op, st);
    if (r == RESUME_DELIVER) deliver_pool(c, st);
    if (r != RESUME_NOT_WAITING) return;
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
    if (atomic_load(&c->cancelled)) {
        /* its client left while it waited: do not spend a pool thread on
         * it (clients that time out and retry would fill the pool with
         * work nobody waits for) */
        c->skipped = SKIP_CANCELLED; /* published to the loop by worker_post's lock */
        deliver_pool(c, MCPG_DENY);
        return;
    }
    mcpg_instance *be = c->route->backend;
    const mcpg_backend_ops *ops = be->desc->ops;
    atomic_store(&c->pool_op.state, OP_RUNNING);
    mcpg_status st = settle(&c->pool_op, ops->call_tool(be->state, c));
    if (st != MCPG_PENDING) deliver_pool(c, st);
}

static void pool_expired(pool_job *j) {
    mcpg_call *c = (mcpg_call *)((char *)j - offsetof(mcpg_call, job));
    c->skipped = SKIP_EXPIRED; /* published to the loop by worker_post's lock */
    deliver_pool(c, MCPG_DENY);
}

/* On the loop: the pool's queue was full when this turn's jobs went in. */
static void pool_refused(pool_job *j) {
    mcpg_call *c = (mcpg_call *)((char *)j - offsetof(mcpg_call, job));
    c->on_pool = false;
    c->refs--;
    tq_remove(c);
    set_error(c, MCPG_RPC_SERVER_ERROR, 503, "worker pool is full, try again");
    c->retry_after = 1;
    on_status(c, MCPG_DENY);
    run(c);
}

/* Append n bytes and a NUL to b (reserved beforehand: pointers stay put). */
static const char *keep_copy(mcpg_buf *b, const char *s, size_t n) {
    if (!s) return NULL;
    char *d = b->data + b->len;
    memcpy(d, s, n);
    d[n] = '\0';
    b->len += n + 1;
    return d;
}

/* A pool backend may still run after its call timed out and was answered,
 * when the transport has freed or reused the request the desc points into:
 * point the desc at call-owned copies of what a backend can read. */
static int copy_request(mcpg_call *c) {
    mcpg_call_desc *d = &c->d;
    mcpg_buf *b = &c->req_copy;
    b->len = 0;
    if (mcpg_buf_reserve(b, d->params_len + d->args_len + d->id_len + 3)) return MCPG_ENOMEM;
    d->params_json = keep_copy(b, d->params_json, d->params_len);
    d->args_json = keep_copy(b, d->args_json, d->args_len);
    d->id_json = keep_copy(b, d->id_json, d->id_len);
    d->name = NULL; /* read at submit only; the route holds the names */
    d->method = NULL;
    d->session_id = NULL;
    return 0;
}

static mcpg_status dispatch_backend(mcpg_call *c) {
    mcpg_instance *be = c->route->backend;
    const mcpg_backend_ops *ops = be->desc->ops;
    c->tb0 = mono_us();
    if (be->inline_dispatch) {
        atomic_store(&c->loop_op.state, OP_RUNNING);
        return settle(&c->loop_op, ops->call_tool(be->state, c));
    }
    if (copy_request(c)) {
        set_error(c, MCPG_RPC_INTERNAL_ERROR, 0, "out of memory");
        return MCPG_DENY;
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
    atomic_store(&c->loop_op.state, OP_RUNNING);
    return settle(&c->loop_op, ops->emit(sink->state, c, &ev));
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
    if (c->on_pool) { /* detached: the backend may be looking up a header */
        pthread_mutex_lock(&c->hdr_lock);
        c->answered = true;
        pthread_mutex_unlock(&c->hdr_lock);
    }
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
    atomic_store(&c->loop_op.state, OP_RUNNING);
    switch (stage) {
    case STAGE_IDENTITY: {
        const mcpg_identity_ops *o = inst->desc->ops;
        return settle(&c->loop_op, o->authenticate(inst->state, c));
    }
    case STAGE_POLICY: {
        const mcpg_policy_ops *o = inst->desc->ops;
        return settle(&c->loop_op, o->check(inst->state, c));
    }
    default: {
        const mcpg_limits_ops *o = inst->desc->ops;
        return settle(&c->loop_op, o->acquire(inst->state, c));
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
                if (c->method == MCPG_METHOD_TOOLS_CALL && c->phase == PH_POLICY && !c->route) {
                    set_error(c, MCPG_RPC_INVALID_PARAMS, 0, "Unknown tool: %.*s",
                              (int)(c->d.name ? c->d.name_len : 0), c->d.name ? c->d.name : "");
                    c->phase = PH_COMPLETE;
                } else if (c->method == MCPG_METHOD_TOOLS_CALL) {
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
    /* the v1.0 desc ends with complete(), which is called unconditionally */
    if (!w || !d || !out || d->size < offsetof(mcpg_call_desc, complete) + sizeof d->complete ||
        !d->complete || !d->method)
        return MCPG_EINVAL;
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
    /* An unknown tool is answered after identity and policy (see run), so a
     * caller who may not call anything cannot probe which tools exist. */
    if (c->method == MCPG_METHOD_TOOLS_CALL)
        c->route = d->name ? generation_route(g, d->name, d->name_len) : NULL;
    run(c);
    return 0;
}

void call_cancel(mcpg_call *c) {
    atomic_store(&c->cancelled, true);
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

/* On the call's loop the transport's own bytes are returned. Off it (a
 * backend on the pool) the value is copied under hdr_lock, since a call that
 * times out is answered, and its request freed, while the backend runs;
 * after that, headers read as absent. */
const char *host_call_header(mcpg_call *c, const char *lname, size_t *len) {
    if (!c->d.header) return NULL;
    if (worker_self() == c->w) return c->d.header(c->d.transport_ctx, lname, len);
    const char *v = NULL;
    pthread_mutex_lock(&c->hdr_lock);
    size_t n = 0;
    const char *t = c->answered ? NULL : c->d.header(c->d.transport_ctx, lname, &n);
    hdr_copy *h = t ? malloc(sizeof *h + n + 1) : NULL;
    if (h) {
        memcpy(h->value, t, n);
        h->value[n] = '\0';
        h->next = c->hdr_copies; /* freed when the call is recycled */
        c->hdr_copies = h;
        v = h->value;
        if (len) *len = n;
    }
    pthread_mutex_unlock(&c->hdr_lock);
    return v;
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

int host_call_cancelled(mcpg_call *c) { return atomic_load(&c->cancelled); }
