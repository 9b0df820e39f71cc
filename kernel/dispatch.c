/* Dispatch: how an op's answer gets back to its call's loop, and how a
 * backend runs (inline on the loop, or on the pool with a deadline).
 *
 * The resume handshake (op_sync, lib/hostcore/handshake.h) makes "resume before
 * the op even returned PENDING" safe: the invoker sees OP_EARLY and carries
 * on itself. A call has two: one for the op the loop runs (a stage, an
 * inline backend) and one for a backend on the pool, because once a pool
 * call has timed out both are in use at once: the loop audits and answers
 * the timeout while the backend may still be running (a "detached" call).
 * Each also has its own post node. Which one a resume finishes is told by
 * the stage in the module's handle, never guessed. */
#include "call_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The handle of the instance answering the call (its backend, or the events
 * instance): the stage its kind runs at, as the fake host gives it. */
static mcpg_call *answering_handle(mcpg_call *c) {
    return call_handle(c, call_stage_of_kind(c->route->backend->desc->kind));
}

/* ---- answers back to the loop ---- */

static void pool_deadlines_remove(mcpg_call *c);

static void deliver_on_loop(void *arg) {
    mcpg_call *c = arg;
    assert(op_state_of(&c->loop_op) == OP_IDLE); /* the resume took the op */
    pipeline_continue(c, (mcpg_status)c->delivered);
}

/* The error for a backend the pool never ran. */
static void explain_skipped(mcpg_call *c) {
    if (c->pool.skipped == SKIP_EXPIRED)
        call_set_error(c, MCPG_RPC_SERVER_ERROR, 0, "backend \"%s\" timed out after %llu ms",
                       c->route->backend->name,
                       (unsigned long long)c->route->backend->timeout_ms);
    else if (c->pool.skipped == SKIP_CANCELLED)
        call_set_error(c, MCPG_RPC_SERVER_ERROR, 0, "request cancelled before the backend ran");
}

/* The backend on the pool has answered, or its job expired in the queue. */
static void pool_answer_on_loop(void *arg) {
    mcpg_call *c = arg;
    pool_deadlines_remove(c);
    if (c->pool.detached) { /* it timed out: the answer already went out */
        pipeline_release_limits(c); /* held until the backend really ended */
        call_let_go(c, HOLD_BACKEND);
        return;
    }
    call_let_go(c, HOLD_BACKEND); /* the transport still holds it */
    msgs_flush(c);
    explain_skipped(c);
    pipeline_continue(c, (mcpg_status)c->pool.delivered);
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
    c->pool.delivered = st;
    post_to_loop(c, &c->pool.post, pool_answer_on_loop);
}

/* The op a resume with handle h finishes, and how (op_resume_tagged): the
 * backend's own on the pool, else the loop's when that op is of the same
 * stage; NULL when that stage has no op outstanding. A loop op is the one
 * its handle's serial tags: another op's late or extra resume (an audit
 * sink resuming twice while the next sink's write is pending) finds none. */
static op_sync *resumed_op(mcpg_call *c, mcpg_call *h, bool *on_pool, unsigned *tag) {
    unsigned stage = call_handle_stage(h);
    *on_pool = false;
    *tag = 0;
    if (c->route && stage == call_stage_of_kind(c->route->backend->desc->kind)) {
        /* a backend or the events instance, inline or on the pool: its own op */
        *on_pool = true;
        return &c->pool.op;
    }
    if (stage == CALL_STAGE_TRANSPORT || atomic_load(&c->loop_stage) != (int)stage) return NULL;
    *tag = call_handle_serial(h);
    return &c->loop_op;
}

void host_call_resume(mcpg_call *h, mcpg_status st) {
    mcpg_call *c = call_of(h, "call_resume");
    if (!c) return;
    if (st != MCPG_CONTINUE && st != MCPG_DENY) {
        klog(MCPG_LOG_ERROR, "kernel", "call_resume with status %d: only CONTINUE or DENY "
             "finish an op (module bug); taken as DENY", (int)st);
        st = MCPG_DENY;
    }
    bool on_pool;
    unsigned tag;
    op_sync *op = resumed_op(c, h, &on_pool, &tag);
    int r = op ? op_resume_tagged(op, tag, st) : RESUME_NOT_WAITING;
    if (r == RESUME_DELIVER) {
        if (on_pool) deliver_pool(c, st);
        else deliver(c, st);
    } else if (r == RESUME_NOT_WAITING) {
        klog(MCPG_LOG_ERROR, "kernel", "call_resume with the handle of an op that is not "
             "pending (module bug: a resume after the op answered, or a second one): refused");
    }
}

/* The cancel op of the instance answering the call (a backend, or the
 * events instance), NULL when it has none. */
static void (*cancel_op(const mcpg_instance *be))(void *, mcpg_call *) {
    if (be->desc->kind == MCPG_KIND_EVENTS) {
        const mcpg_events_ops *ops = be->desc->ops;
        return MCPG_HAS(ops, cancel) ? ops->cancel : NULL;
    }
    const mcpg_backend_ops *ops = be->desc->ops;
    return MCPG_HAS(ops, cancel) ? ops->cancel : NULL;
}

/* The backend's cancel op, exactly while its op is pending: it returned
 * PENDING and its resume has not been taken. On the call's loop. */
void backend_cancel_if_pending(mcpg_call *c) {
    if (c->phase != PH_BACKEND || !c->route || c->cancel_sent || c->pool.detached) return;
    mcpg_instance *be = c->route->backend;
    void (*cancel)(void *, mcpg_call *) = cancel_op(be);
    if (!cancel) return;
    if (atomic_load(&c->pool.op.state) != OP_PENDING) return;
    c->cancel_sent = true;
    cancel(be->state, answering_handle(c));
}

/* ---- pool deadlines: the worker's list of its calls on the pool ---- */

static void on_timeouts(uv_timer_t *t);

static void pool_deadlines_add(mcpg_call *c) {
    mcpg_worker *w = c->w;
    c->pool.deadline_prev = NULL;
    c->pool.deadline_next = w->pool_deadlines;
    if (w->pool_deadlines) w->pool_deadlines->pool.deadline_prev = c;
    else uv_timer_start(&w->pool_deadline_timer, on_timeouts, 10, 10);
    w->pool_deadlines = c;
}

static void pool_deadlines_remove(mcpg_call *c) {
    mcpg_worker *w = c->w;
    if (c->pool.deadline_prev) c->pool.deadline_prev->pool.deadline_next = c->pool.deadline_next;
    else if (w->pool_deadlines == c) w->pool_deadlines = c->pool.deadline_next;
    if (c->pool.deadline_next) c->pool.deadline_next->pool.deadline_prev = c->pool.deadline_prev;
    c->pool.deadline_prev = c->pool.deadline_next = NULL;
    if (!w->pool_deadlines) uv_timer_stop(&w->pool_deadline_timer);
}

/* The deadline passed with the backend still on the pool: answer the call
 * now (audit "failed", then the timeout), from kernel-owned fields. */
/* Answer a pool call without its backend: audited as failed with `why`,
 * while the backend, if it is running, finishes on its own (the pool's
 * reference keeps the call until then). */
static int copy_request(mcpg_call *c);

static void detach(mcpg_call *c, uint64_t now, const char *why) {
    atomic_store(&c->cancelled, true);
    if (c->route->backend->inline_dispatch) {
        /* it is pending on the loop: tell it to stop, and let it read the
         * call's own copies once the transport's request is gone */
        backend_cancel_if_pending(c);
        (void)copy_request(c);
    } else {
        /* an op on the pool that answered PENDING (it waits on something
         * of its own, an upstream) is told too; one still running sees
         * call_cancelled */
        backend_cancel_if_pending(c);
    }
    c->pool.detached = true;
    c->backend_failed = true;
    c->tb1 = now;
    snprintf(c->pool.timeout_msg, sizeof c->pool.timeout_msg, "backend \"%s\" %s",
             c->route->backend->name, why);
    c->phase = PH_AUDIT_DONE;
    c->idx = 0;
    pipeline_run(c);
}

static void on_timeouts(uv_timer_t *t) {
    mcpg_worker *w = t->data;
    uint64_t now = mono_us();
    for (mcpg_call *c = w->pool_deadlines, *next; c; c = next) {
        next = c->pool.deadline_next;
        if (c->pool.detached || now < c->pool.deadline_us) continue;
        char why[64];
        snprintf(why, sizeof why, "timed out after %llu ms",
                 (unsigned long long)c->route->backend->timeout_ms);
        detach(c, now, why);
    }
}

/* The drain deadline passed: backends still working will not be waited for.
 * Their calls are answered and audited as failed now, so every "allowed"
 * event in the audit trail has an outcome; inline backends still pending
 * are told to cancel first (detach). */
void calls_give_up_backends(mcpg_worker *w) {
    uint64_t now = mono_us();
    for (mcpg_call *c = w->pool_deadlines, *next; c; c = next) {
        next = c->pool.deadline_next;
        if (!c->pool.detached) detach(c, now, "did not answer before the gateway stopped");
    }
}

/* Its generation retires (reload.c) with c unanswered at the deadline: a
 * backend still working is given up as at the drain's deadline (answered
 * and audited as failed, a pending op told to cancel); an events stream, or
 * a call waiting in another stage, is cancelled as when its client leaves
 * (the events instance ends the stream with its final result). */
void call_give_up_retiring(mcpg_call *c, const char *why) {
    if (call_held_by(c, HOLD_BACKEND) && !c->pool.detached &&
        c->route->backend->desc->kind != MCPG_KIND_EVENTS) {
        detach(c, mono_us(), why);
        return;
    }
    atomic_store(&c->cancelled, true);
    backend_cancel_if_pending(c);
}

/* ---- the backend's op for a method ---- */

typedef call_backend_op backend_op;

/* The backend's op for the call's method; NULL when it does not offer it.
 * The events instance answers events methods with its request op (its webhook
 * op, which takes the source too, is called by dispatch_events). */
static backend_op op_for(const mcpg_instance *be, uint32_t method) {
    if (be->desc->kind == MCPG_KIND_EVENTS)
        return ((const mcpg_events_ops *)be->desc->ops)->request;
    return call_backend_op_for(be->desc->ops, method);
}

/* ---- the pool job's callbacks ---- */

static mcpg_call *call_of_job(pool_job *j) {
    return (mcpg_call *)((char *)j - offsetof(mcpg_call, pool.job));
}

static void pool_run(pool_job *j) {
    mcpg_call *c = call_of_job(j);
    if (atomic_load(&c->cancelled)) {
        /* its client left while it waited: do not spend a pool thread on
         * it (clients that time out and retry would fill the pool with
         * work nobody waits for) */
        c->pool.skipped = SKIP_CANCELLED; /* published to the loop by worker_post's lock */
        deliver_pool(c, MCPG_DENY);
        return;
    }
    mcpg_instance *be = c->route->backend;
    op_begin(&c->pool.op);
    mcpg_status st = op_settle(&c->pool.op,
                               op_for(be, c->method)(be->state, answering_handle(c)));
    if (st != MCPG_PENDING) {
        deliver_pool(c, st);
        return;
    }
    /* A cancel that came while the op ran found it not yet pending and
     * could not reach it; it is sent now. (Both sides order the flag and the
     * op's state the same way: one of them sees the other.) */
    if (atomic_load(&c->cancelled)) msgs_post_cancel(c);
}

static void pool_expired(pool_job *j) {
    mcpg_call *c = call_of_job(j);
    c->pool.skipped = SKIP_EXPIRED; /* published to the loop by worker_post's lock */
    deliver_pool(c, MCPG_DENY);
}

/* On the loop: the pool's queue was full when this turn's jobs went in. */
static void pool_refused(pool_job *j) {
    mcpg_call *c = call_of_job(j);
    call_let_go(c, HOLD_BACKEND); /* the transport still holds it */
    pool_deadlines_remove(c);
    call_set_error(c, MCPG_RPC_SERVER_ERROR, 503, "worker pool is full, try again");
    c->retry_after = 1;
    pipeline_continue(c, MCPG_DENY);
}

/* ---- what a pool backend reads: copies owned by the call ---- */

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
    mcpg_buf *b = &c->pool.req_copy;
    b->len = 0;
    size_t need = d->params_len + d->args_len + d->id_len + d->session_id_len +
                  d->client_caps_len + d->protocol_version_len + 6;
    if (mcpg_buf_reserve(b, need)) return MCPG_ENOMEM;
    d->params_json = keep_copy(b, d->params_json, d->params_len);
    d->args_json = keep_copy(b, d->args_json, d->args_len);
    d->id_json = keep_copy(b, d->id_json, d->id_len);
    d->session_id = keep_copy(b, d->session_id, d->session_id_len);
    /* the 1.1 fields are zero when the transport's desc has none */
    d->client_caps_json = keep_copy(b, d->client_caps_json, d->client_caps_len);
    d->protocol_version = keep_copy(b, d->protocol_version, d->protocol_version_len);
    (void)call_client_name_of(c); /* kept for the outcome's audit event */
    d->name = NULL; /* read at submit only; the route and target_copy hold the names */
    d->method = NULL;
    return 0;
}

/* Off the call's loop (a backend on the pool) a header value is copied under
 * hdr_lock, since a call that times out is answered, and its request freed,
 * while the backend runs; after that, headers read as absent. */
const char *pool_header_copy(mcpg_call *c, const char *lname, size_t *len) {
    const char *v = NULL;
    pthread_mutex_lock(&c->pool.hdr_lock);
    size_t n = 0;
    const char *t = c->pool.answered ? NULL : c->d.header(c->d.transport_ctx, lname, &n);
    hdr_copy *h = t ? malloc(sizeof *h + n + 1) : NULL;
    if (h) {
        memcpy(h->value, t, n);
        h->value[n] = '\0';
        h->next = c->pool.hdr_copies; /* freed when the call is recycled */
        c->pool.hdr_copies = h;
        v = h->value;
        if (len) *len = n;
    }
    pthread_mutex_unlock(&c->pool.hdr_lock);
    return v;
}

void pool_request_gone(mcpg_call *c) {
    pthread_mutex_lock(&c->pool.hdr_lock);
    c->pool.answered = true;
    pthread_mutex_unlock(&c->pool.hdr_lock);
}

/* ---- dispatching the backend ---- */

/* An inline backend runs on the loop but on the backend's own op, as a
 * pool backend does: answering PENDING, it holds the call (a reference)
 * until its resume reaches the loop, and its deadline answers the call
 * without it (detach), so an inline backend that never resumes cannot hold
 * a client, or a drain, for ever. */
static mcpg_status dispatch_inline(mcpg_call *c, mcpg_instance *be, backend_op op) {
    op_begin(&c->pool.op);
    mcpg_status st = op_settle(&c->pool.op, op(be->state, answering_handle(c)));
    if (st != MCPG_PENDING) return st;
    call_hold(c, HOLD_BACKEND);
    c->pool.deadline_us = c->tb0 + be->timeout_ms * 1000;
    pool_deadlines_add(c);
    return MCPG_PENDING;
}

static mcpg_status dispatch_to_pool(mcpg_call *c, mcpg_instance *be) {
    if (copy_request(c)) {
        call_set_error(c, MCPG_RPC_INTERNAL_ERROR, 0, "out of memory");
        return MCPG_DENY;
    }
    c->pool.job.run = pool_run;
    c->pool.job.expired = pool_expired;
    c->pool.job.refused = pool_refused;
    c->pool.job.timeout_us = be->timeout_ms * 1000;
    c->pool.deadline_us = c->tb0 + c->pool.job.timeout_us;
    call_hold(c, HOLD_BACKEND);
    pool_deadlines_add(c);
    worker_defer_job(c->w, &c->pool.job);
    return MCPG_PENDING;
}

/* The events instance runs on the loop with no deadline: an events/stream
 * call is pending for as long as its client keeps it open (its cancel op
 * ends it). The call holds a reference while pending, as an inline
 * backend's does. */
static mcpg_status dispatch_events(mcpg_call *c, mcpg_instance *ev) {
    const mcpg_events_ops *ops = ev->desc->ops;
    mcpg_call *h = answering_handle(c);
    op_begin(&c->pool.op);
    mcpg_status st = op_settle(&c->pool.op, c->method == MCPG_METHOD_EVENTS_WEBHOOK
                                                ? ops->webhook(ev->state, h, c->target)
                                                : ops->request(ev->state, h));
    if (st != MCPG_PENDING) return st;
    call_hold(c, HOLD_BACKEND);
    return MCPG_PENDING;
}

mcpg_status dispatch_backend(mcpg_call *c) {
    mcpg_instance *be = c->route->backend;
    c->tb0 = mono_us();
    if (be->desc->kind == MCPG_KIND_EVENTS) return dispatch_events(c, be);
    backend_op op = op_for(be, c->method);
    if (!op) {
        call_set_error(c, MCPG_RPC_METHOD_NOT_FOUND, 0, "Method not found: %s (backend \"%s\" "
                       "does not offer it)", mcpg_method_name(c->method), be->name);
        return MCPG_DENY;
    }
    return be->inline_dispatch ? dispatch_inline(c, be, op) : dispatch_to_pool(c, be);
}
