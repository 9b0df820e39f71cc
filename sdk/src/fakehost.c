/* The fake host: a real mcpg_host table for unit tests, with no kernel.
 *
 * One worker, whose loop is a real uv loop turned only inside the
 * mcpg_fakehost_* calls that say so, on the thread that created the fake host.
 * It follows the kernel's semantics wherever a module could tell the
 * difference (the resume handshake, pool dispatch of backend call ops, what a
 * DENY without an error becomes, timers that must be stopped) and adds checks
 * the kernel cannot afford: every misuse it sees is counted as a failure, and
 * mcpg_fakehost_free reports what was left behind.
 *
 * Several host slots (worker_count, worker_at, worker_current, ...) take no
 * context, so the one live fake host is found through a process-wide pointer;
 * that is why there can be only one at a time. */
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#define FH_MAX_SLOTS 64      /* instances with a per-call slot */
#define FH_WORK_MAX 256      /* queued or running work_submit items: then MCPG_EAGAIN */
#define FH_DRAIN_MS 10000    /* how long unload waits for an instance's running work */
#define FH_DEFAULT_ID "1"

typedef struct fh_work fh_work;
typedef struct fh_header fh_header;

enum op_state { OP_IDLE, OP_RUNNING, OP_PENDING, OP_EARLY };
enum op_kind { OPK_CALL_TOOL, OPK_READ_RESOURCE, OPK_GET_PROMPT, OPK_COMPLETE,
               OPK_AUTHENTICATE, OPK_CHECK, OPK_ACQUIRE, OPK_EMIT, OPK_EVENTS };

struct mcpg_worker {
    mcpg_fakehost *fh;
};

struct mcpg_report {
    mcpg_fakehost *fh;
};

struct mcpg_timer {
    uv_timer_t h;
    void (*cb)(void *arg);
    void *arg;
    mcpg_timer *next, **pprev; /* the owner's live list */
};

struct fh_work {
    uv_work_t req;
    mcpg_fakehost *fh;
    void (*work)(void *arg);
    void (*done)(void *arg, int status);
    void *arg;
    uint64_t deadline_us; /* 0: none */
    int status;
    fh_work *next, **pprev;
};

struct mcpg_instance {
    mcpg_fakehost *fh;
    const mcpg_module *m;
    char *name;
    char stamp[192]; /* "[kind:module:instance]" */
    void *config;
    void *state;
    void *dl;        /* from load_file, closed at unload */
    uint32_t slot;
    int inline_dispatch;
    int created, started;
    mcpg_timer *timers;
    fh_work *work;
    mcpg_instance *next, **pprev;
};

struct fh_header {
    fh_header *next;
    char *name, *value;
};

struct mcpg_call {
    mcpg_fakehost *fh;
    mcpg_call *next, **pprev;
    mcpg_post post;       /* resume delivery to the loop */
    uv_work_t pool_req;   /* pool dispatch of a backend op */
    uint32_t method_id, wire;
    char *method, *target, *args, *params, *id;
    size_t args_len, params_len, id_len;
    fh_header *headers;
    char *principal, *tenant, *roles;
    /* the outcome */
    mcpg_buf result;
    int is_error;
    int64_t err_code;
    char *err_msg;
    mcpg_buf err_data;
    int http_status;
    uint32_t retry_after;
    int cancelled;
    /* the op in progress */
    mcpg_instance *op_inst;
    int op_kind;
    const mcpg_audit_event *op_event;
    atomic_int op_state;
    atomic_int resume_status;
    int dispatched, answered, final_status, on_pool, pool_status;
    /* from host->call_submit */
    int submitted, completed;
    mcpg_call_desc d;
    void *slots[FH_MAX_SLOTS];
};

struct mcpg_fakehost {
    mcpg_host host;
    mcpg_worker worker;
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t deadline;
    int deadline_hit, in_loop;
    pthread_t loop_thread;
    pthread_mutex_t lock;           /* posts, logs, reports */
    mcpg_post *post_head, *post_tail;
    int posts_closed;
    mcpg_buf log, report;
    int report_count;
    atomic_int log_level, quiet, failures;
    mcpg_instance *instances;
    mcpg_call *calls;
    mcpg_timer *orphan_timers;      /* started with self == NULL */
    fh_work *orphan_work;
    int work_count;
    uint32_t next_slot;
    mcpg_instance *route;
};

static mcpg_fakehost *_Atomic the_fh;

/* ---- small helpers ---------------------------------------------------- */

static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static char *dup_or_null(const char *s) { return s ? dup_n(s, strlen(s)) : NULL; }

static int on_loop(const mcpg_fakehost *fh) {
    return pthread_equal(fh->loop_thread, pthread_self());
}

static uint64_t fh_mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int64_t fh_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static const char *kind_name(uint32_t kind) { return mcpg_kind_name(kind); }

static const char *const method_names[] = {
    [MCPG_METHOD_OTHER] = "",
    [MCPG_METHOD_TOOLS_LIST] = "tools/list",
    [MCPG_METHOD_TOOLS_CALL] = "tools/call",
    [MCPG_METHOD_RESOURCES_LIST] = "resources/list",
    [MCPG_METHOD_RESOURCES_TEMPLATES_LIST] = "resources/templates/list",
    [MCPG_METHOD_RESOURCES_READ] = "resources/read",
    [MCPG_METHOD_RESOURCES_SUBSCRIBE] = "resources/subscribe",
    [MCPG_METHOD_RESOURCES_UNSUBSCRIBE] = "resources/unsubscribe",
    [MCPG_METHOD_PROMPTS_LIST] = "prompts/list",
    [MCPG_METHOD_PROMPTS_GET] = "prompts/get",
    [MCPG_METHOD_COMPLETION_COMPLETE] = "completion/complete"};

static uint32_t method_of(const char *m) {
    for (uint32_t i = 1; i < sizeof method_names / sizeof method_names[0]; i++)
        if (strcmp(method_names[i], m) == 0) return i;
    return MCPG_METHOD_OTHER;
}

/* ---- logs, reports, failures ------------------------------------------ */

static const char *level_name(int level) {
    static const char *const names[] = {"error", "warn", "info", "debug"};
    return level >= 0 && level <= 3 ? names[level] : "debug";
}

static void log_line(mcpg_fakehost *fh, const char *stamp, int level, const char *msg) {
    if (level > atomic_load(&fh->log_level)) return;
    pthread_mutex_lock(&fh->lock);
    size_t start = fh->log.len;
    mcpg_buf_printf(&fh->log, "%s %s: %s\n", stamp, level_name(level), msg);
    if (!atomic_load(&fh->quiet) && fh->log.data)
        fputs(fh->log.data + start, stderr);
    pthread_mutex_unlock(&fh->lock);
}

static void fail(mcpg_fakehost *fh, const char *fmt, ...) MCPG_PRINTF(2, 3);
static void fail(mcpg_fakehost *fh, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    atomic_fetch_add(&fh->failures, 1);
    log_line(fh, "[fakehost]", MCPG_LOG_ERROR, msg);
}

static void note(mcpg_fakehost *fh, const char *fmt, ...) MCPG_PRINTF(2, 3);
static void note(mcpg_fakehost *fh, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_line(fh, "[fakehost]", MCPG_LOG_INFO, msg);
}

static void report_add(mcpg_fakehost *fh, const char *key, const char *msg) {
    pthread_mutex_lock(&fh->lock);
    mcpg_buf_printf(&fh->report, "%s: %s\n", key && *key ? key : "(config)", msg);
    fh->report_count++;
    pthread_mutex_unlock(&fh->lock);
}

static void report_reset(mcpg_fakehost *fh) {
    pthread_mutex_lock(&fh->lock);
    fh->report.len = 0;
    if (fh->report.data) fh->report.data[0] = '\0';
    fh->report_count = 0;
    pthread_mutex_unlock(&fh->lock);
}

/* ---- host slots: logging and identity ---------------------------------- */

static void host_log(mcpg_instance *self, int level, const char *fmt, ...) MCPG_PRINTF(3, 4);
static void host_log(mcpg_instance *self, int level, const char *fmt, ...) {
    mcpg_fakehost *fh = self ? self->fh : the_fh;
    if (!fh) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_line(fh, self ? self->stamp : "[module]", level, msg);
}

static int host_log_enabled(mcpg_instance *self, int level) {
    mcpg_fakehost *fh = self ? self->fh : the_fh;
    return fh && level <= atomic_load(&fh->log_level);
}

static void host_report_error(mcpg_report *rep, const char *key_path, const char *fmt, ...)
    MCPG_PRINTF(3, 4);
static void host_report_error(mcpg_report *rep, const char *key_path, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    report_add(rep->fh, key_path, msg);
}

static void config_error(void *ctx, const char *key, const char *message) {
    report_add(ctx, key, message);
}

static const char *host_instance_name(mcpg_instance *self) { return self ? self->name : NULL; }
static const char *host_gateway_version(void) { return "fakehost"; }
static const char *host_gateway_name(void) { return "mcpg-fakehost"; }

/* ---- host slots: the worker ---------------------------------------------- */

static uint32_t host_worker_count(void) { return the_fh ? 1 : 0; }

static mcpg_worker *host_worker_at(uint32_t i) {
    mcpg_fakehost *fh = the_fh;
    return fh && i == 0 ? &fh->worker : NULL;
}

static mcpg_worker *host_worker_current(void) {
    mcpg_fakehost *fh = the_fh;
    return fh && on_loop(fh) ? &fh->worker : NULL;
}

static uint32_t host_worker_index(mcpg_worker *w) {
    (void)w;
    return 0;
}

static void *host_worker_uv_loop(mcpg_worker *w) { return w ? &w->fh->loop : NULL; }

static int host_worker_post(mcpg_worker *w, mcpg_post *node) {
    if (!w || !node || !node->fn) return MCPG_EINVAL;
    mcpg_fakehost *fh = w->fh;
    pthread_mutex_lock(&fh->lock);
    if (fh->posts_closed) {
        pthread_mutex_unlock(&fh->lock);
        return MCPG_ESTATE;
    }
    node->next = NULL;
    if (fh->post_tail) fh->post_tail->next = node;
    else fh->post_head = node;
    fh->post_tail = node;
    uv_async_send(&fh->wake); /* thread-safe; coalesces */
    pthread_mutex_unlock(&fh->lock);
    return 0;
}

/* On the loop: run everything posted so far, in order. A node may be
 * re-posted or freed by its own fn, so next is read before fn runs. */
static void on_wake(uv_async_t *a) {
    mcpg_fakehost *fh = a->data;
    pthread_mutex_lock(&fh->lock);
    mcpg_post *node = fh->post_head;
    fh->post_head = fh->post_tail = NULL;
    pthread_mutex_unlock(&fh->lock);
    while (node) {
        mcpg_post *next = node->next;
        node->fn(node->arg);
        node = next;
    }
}

/* ---- host slots: timers ------------------------------------------------- */

/* The slot is for w's loop thread only: anything else is a module bug. */
static int loop_only(mcpg_fakehost *fh, mcpg_worker *w, const char *slot) {
    if (!fh) return MCPG_ESTATE;
    if (w != &fh->worker || !on_loop(fh)) {
        fail(fh, "host->%s called off the worker's loop thread (module bug)", slot);
        return MCPG_ESTATE;
    }
    return 0;
}

static void timer_fire(uv_timer_t *h) {
    mcpg_timer *t = h->data;
    t->cb(t->arg);
}

static void timer_link(mcpg_timer **head, mcpg_timer *t) {
    t->next = *head;
    if (*head) (*head)->pprev = &t->next;
    t->pprev = head;
    *head = t;
}

static int host_timer_start(mcpg_instance *self, mcpg_worker *w, uint64_t timeout_ms,
                            uint64_t repeat_ms, void (*cb)(void *arg), void *arg,
                            mcpg_timer **timer_out) {
    mcpg_fakehost *fh = the_fh;
    int rc = loop_only(fh, w, "timer_start");
    if (rc) return rc;
    if (!cb) return MCPG_EINVAL;
    mcpg_timer *t = calloc(1, sizeof *t);
    if (!t) return MCPG_ENOMEM;
    t->cb = cb;
    t->arg = arg;
    uv_timer_init(&fh->loop, &t->h);
    t->h.data = t;
    timer_link(self ? &self->timers : &fh->orphan_timers, t);
    /* The loop's clock is only refreshed when it turns, and here it may have
     * been idle for long: count the timeout from now, not from then. */
    uv_update_time(&fh->loop);
    uv_timer_start(&t->h, timer_fire, timeout_ms, repeat_ms);
    if (timer_out) *timer_out = t;
    return 0;
}

static void timer_closed(uv_handle_t *h) { free(h->data); }

/* Unlink, stop and close: the callback never runs again. */
static void timer_release(mcpg_timer *t) {
    *t->pprev = t->next;
    if (t->next) t->next->pprev = t->pprev;
    uv_timer_stop(&t->h);
    uv_close((uv_handle_t *)&t->h, timer_closed);
}

static void host_timer_stop(mcpg_timer *t) {
    mcpg_fakehost *fh = the_fh;
    if (!t || !fh) return;
    if (!on_loop(fh)) {
        fail(fh, "host->timer_stop called off the worker's loop thread (module bug)");
        return;
    }
    timer_release(t);
}

/* ---- host slots: the worker pool ---------------------------------------- */

static void work_link(fh_work **head, fh_work *wk) {
    wk->next = *head;
    if (*head) (*head)->pprev = &wk->next;
    wk->pprev = head;
    *head = wk;
}

static void work_run(uv_work_t *req) {
    fh_work *wk = req->data;
    if (wk->deadline_us && fh_mono_us() > wk->deadline_us) {
        wk->status = MCPG_ETIMEDOUT; /* waited too long in the queue: never started */
        return;
    }
    wk->work(wk->arg);
    wk->status = 0;
}

static void work_after(uv_work_t *req, int uv_status) {
    fh_work *wk = req->data;
    if (uv_status == UV_ECANCELED) wk->status = MCPG_ECANCELED;
    *wk->pprev = wk->next;
    if (wk->next) wk->next->pprev = wk->pprev;
    wk->fh->work_count--;
    wk->done(wk->arg, wk->status); /* unlinked first: done may submit more */
    free(wk);
}

static int host_work_submit(mcpg_instance *self, mcpg_worker *w, uint64_t timeout_ms,
                            void (*work)(void *arg), void (*done)(void *arg, int status),
                            void *arg) {
    mcpg_fakehost *fh = the_fh;
    int rc = loop_only(fh, w, "work_submit");
    if (rc) return rc;
    if (!work || !done) return MCPG_EINVAL;
    if (fh->work_count >= FH_WORK_MAX) return MCPG_EAGAIN;
    fh_work *wk = calloc(1, sizeof *wk);
    if (!wk) return MCPG_ENOMEM;
    wk->fh = fh;
    wk->work = work;
    wk->done = done;
    wk->arg = arg;
    wk->deadline_us = timeout_ms ? fh_mono_us() + timeout_ms * 1000 : 0;
    wk->req.data = wk;
    if (uv_queue_work(&fh->loop, &wk->req, work_run, work_after) != 0) {
        free(wk);
        return MCPG_EAGAIN;
    }
    work_link(self ? &self->work : &fh->orphan_work, wk);
    fh->work_count++;
    return 0;
}

/* ---- the op handshake ---------------------------------------------------- */

static void complete_submitted(mcpg_call *c);

static const char *op_stamp(const mcpg_call *c) {
    return c->op_inst ? c->op_inst->stamp : "an op";
}

/* The op's answer is final: record it and, like the kernel, give a DENY
 * without an error a generic one. On the loop thread. */
static void finish(mcpg_call *c, int st) {
    c->answered = 1;
    c->final_status = st;
    if (st == MCPG_DENY && !c->is_error) {
        int backend = c->op_inst && c->op_inst->m->kind == MCPG_KIND_BACKEND;
        c->is_error = 1;
        c->err_code = backend ? MCPG_RPC_INTERNAL_ERROR : MCPG_RPC_INVALID_REQUEST;
        free(c->err_msg);
        c->err_msg = dup_or_null(backend ? "backend failed" : "request refused");
        note(c->fh, "%s answered DENY without host->call_error: \"%s\"", op_stamp(c),
             c->err_msg);
    }
    if (!c->on_pool) complete_submitted(c); /* else once the pool has let go of it */
}

/* What the op returned, against a resume that may have come first (from
 * another thread, before the op even returned). Returns the final status, or
 * MCPG_PENDING while the resume is still to come. Any thread. */
static int settle(mcpg_call *c, int st) {
    if (st != MCPG_CONTINUE && st != MCPG_DENY && st != MCPG_PENDING) {
        fail(c->fh, "%s answered %d, which is not an mcpg_status (module bug)", op_stamp(c),
             st);
        st = MCPG_DENY;
    }
    if (st != MCPG_PENDING) {
        atomic_store(&c->op_state, OP_IDLE);
        return st;
    }
    int expect = OP_RUNNING;
    if (atomic_compare_exchange_strong(&c->op_state, &expect, OP_PENDING)) return MCPG_PENDING;
    atomic_store(&c->op_state, OP_IDLE); /* resumed before it returned */
    return atomic_load(&c->resume_status);
}

static void resumed_on_loop(void *arg) {
    mcpg_call *c = arg;
    finish(c, atomic_load(&c->resume_status));
}

static void host_call_resume(mcpg_call *c, mcpg_status st) {
    mcpg_fakehost *fh = c->fh;
    if (st != MCPG_CONTINUE && st != MCPG_DENY) {
        fail(fh, "call_resume with status %d: only CONTINUE or DENY finish an op (module bug)",
             (int)st);
        st = MCPG_DENY;
    }
    atomic_store(&c->resume_status, (int)st);
    int expect = OP_RUNNING;
    if (atomic_compare_exchange_strong(&c->op_state, &expect, OP_EARLY)) return;
    expect = OP_PENDING;
    if (!atomic_compare_exchange_strong(&c->op_state, &expect, OP_IDLE)) {
        fail(fh, "call_resume on a call that is not pending (module bug)");
        return;
    }
    c->post.fn = resumed_on_loop;
    c->post.arg = c;
    if (host_worker_post(&fh->worker, &c->post) != 0)
        fail(fh, "call_resume after the fake host stopped (module bug)");
}

int mcpg_fakehost_op_begin(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call) {
    if (!fh || !inst || !call) return MCPG_EINVAL;
    if (call->dispatched && !call->answered) return MCPG_ESTATE;
    call->op_inst = inst;
    call->dispatched = 1;
    call->answered = 0;
    atomic_store(&call->op_state, OP_RUNNING);
    return 0;
}

int mcpg_fakehost_op_end(mcpg_fakehost *fh, mcpg_call *call, int status) {
    (void)fh;
    int st = settle(call, status);
    if (st != MCPG_PENDING) finish(call, st);
    return st;
}

/* ---- dispatch ------------------------------------------------------------ */

/* The table has the slot (a module built on an older minor may not) and it
 * is set. */
#define OPS_HAS(ops, type, field) \
    ((ops) && (ops)->size >= offsetof(type, field) + sizeof((ops)->field) && (ops)->field)

static int backend_op(const mcpg_backend_ops *o, uint32_t method) {
    switch (method) {
    case MCPG_METHOD_TOOLS_CALL:
        return OPS_HAS(o, mcpg_backend_ops, call_tool) ? OPK_CALL_TOOL : MCPG_ENOTSUP;
    case MCPG_METHOD_RESOURCES_READ:
        return OPS_HAS(o, mcpg_backend_ops, read_resource) ? OPK_READ_RESOURCE : MCPG_ENOTSUP;
    case MCPG_METHOD_PROMPTS_GET:
        return OPS_HAS(o, mcpg_backend_ops, get_prompt) ? OPK_GET_PROMPT : MCPG_ENOTSUP;
    case MCPG_METHOD_COMPLETION_COMPLETE:
        return OPS_HAS(o, mcpg_backend_ops, complete) ? OPK_COMPLETE : MCPG_ENOTSUP;
    default:
        return MCPG_ENOTSUP;
    }
}

/* Which op of inst serves this call, or MCPG_ENOTSUP. Mandatory ops were
 * checked at load. */
static int pick_op(const mcpg_instance *inst, const mcpg_call *c) {
    const void *ops = inst->m->ops;
    switch (inst->m->kind) {
    case MCPG_KIND_BACKEND: return backend_op(ops, c->method_id);
    case MCPG_KIND_IDENTITY: return OPK_AUTHENTICATE;
    case MCPG_KIND_POLICY: return OPK_CHECK;
    case MCPG_KIND_LIMITS: return OPK_ACQUIRE;
    case MCPG_KIND_AUDIT: return OPK_EMIT;
    case MCPG_KIND_EVENTS: return OPK_EVENTS;
    default: return MCPG_ENOTSUP;
    }
}

static int invoke(mcpg_call *c) {
    void *s = c->op_inst->state;
    const void *ops = c->op_inst->m->ops;
    const mcpg_backend_ops *b = ops;
    switch (c->op_kind) {
    case OPK_CALL_TOOL: return b->call_tool(s, c);
    case OPK_READ_RESOURCE: return b->read_resource(s, c);
    case OPK_GET_PROMPT: return b->get_prompt(s, c);
    case OPK_COMPLETE: return b->complete(s, c);
    case OPK_AUTHENTICATE: return ((const mcpg_identity_ops *)ops)->authenticate(s, c);
    case OPK_CHECK: return ((const mcpg_policy_ops *)ops)->check(s, c);
    case OPK_ACQUIRE: return ((const mcpg_limits_ops *)ops)->acquire(s, c);
    case OPK_EMIT: return ((const mcpg_audit_ops *)ops)->emit(s, c, c->op_event);
    default: return ((const mcpg_events_ops *)ops)->request(s, c);
    }
}

/* A backend op on the pool, as the kernel runs one not dispatched inline. */
static void pool_op_run(uv_work_t *req) {
    mcpg_call *c = req->data;
    c->pool_status = settle(c, invoke(c));
}

static void pool_op_after(uv_work_t *req, int uv_status) {
    mcpg_call *c = req->data;
    (void)uv_status; /* never cancelled: nothing calls uv_cancel on it */
    c->on_pool = 0;
    if (c->pool_status != MCPG_PENDING) finish(c, c->pool_status);
    else if (c->answered) complete_submitted(c); /* the resume overtook us */
}

static int dispatch_kind(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call, int kind) {
    int rc = mcpg_fakehost_op_begin(fh, inst, call);
    if (rc) return rc;
    call->op_kind = kind;
    if (inst->m->kind == MCPG_KIND_BACKEND && !inst->inline_dispatch) {
        call->on_pool = 1;
        call->pool_req.data = call;
        if (uv_queue_work(&fh->loop, &call->pool_req, pool_op_run, pool_op_after) == 0)
            return MCPG_PENDING;
        call->on_pool = 0; /* cannot happen with valid arguments; run it here */
    }
    return mcpg_fakehost_op_end(fh, call, invoke(call));
}

static void default_event(const mcpg_call *c, mcpg_audit_event *ev) {
    memset(ev, 0, sizeof *ev);
    ev->size = sizeof *ev;
    ev->name = "mcpg.tool.call.completed";
    ev->seq = 1;
    ev->time_us = fh_wall_us();
    ev->id_json = c->id;
    ev->id_len = c->id_len;
    ev->method = c->method;
    ev->tool = c->method_id == MCPG_METHOD_TOOLS_CALL ? c->target : NULL;
    ev->principal = c->principal;
    ev->tenant = c->tenant;
    ev->wire = c->wire;
    ev->generation = 1;
    ev->error_code = c->is_error ? c->err_code : 0;
    ev->error_message = c->is_error ? c->err_msg : NULL;
}

int mcpg_fakehost_emit(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call,
                       const mcpg_audit_event *event) {
    if (!inst || inst->m->kind != MCPG_KIND_AUDIT || !event) return MCPG_ENOTSUP;
    call->op_event = event; /* borrowed for the emit() call only */
    int st = dispatch_kind(fh, inst, call, OPK_EMIT);
    call->op_event = NULL;
    return st;
}

int mcpg_fakehost_dispatch(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call) {
    if (!fh || !inst || !call) return MCPG_EINVAL;
    if (inst->m->kind == MCPG_KIND_AUDIT) {
        mcpg_audit_event ev;
        default_event(call, &ev);
        return mcpg_fakehost_emit(fh, inst, call, &ev);
    }
    int kind = pick_op(inst, call);
    return kind < 0 ? kind : dispatch_kind(fh, inst, call, kind);
}

void mcpg_fakehost_release(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call) {
    (void)fh;
    const mcpg_limits_ops *o = inst ? inst->m->ops : NULL;
    if (inst && inst->m->kind == MCPG_KIND_LIMITS && OPS_HAS(o, mcpg_limits_ops, release))
        o->release(inst->state, call);
}

/* ---- the loop ------------------------------------------------------------ */

static void on_deadline(uv_timer_t *t) {
    mcpg_fakehost *fh = t->data;
    fh->deadline_hit = 1;
}

int mcpg_fakehost_run_until(mcpg_fakehost *fh, int (*done)(void *arg), void *arg,
                            uint64_t timeout_ms) {
    if (done && done(arg)) return 0;
    if (fh->in_loop || !on_loop(fh)) {
        fail(fh, "the fake host's loop was turned from inside itself or another thread");
        return MCPG_ESTATE;
    }
    fh->in_loop = 1;
    fh->deadline_hit = 0;
    uv_update_time(&fh->loop); /* idle since it last turned: see host_timer_start */
    uv_timer_start(&fh->deadline, on_deadline, timeout_ms, 0);
    while (!(done && done(arg)) && !fh->deadline_hit) uv_run(&fh->loop, UV_RUN_ONCE);
    uv_timer_stop(&fh->deadline);
    fh->in_loop = 0;
    return done && done(arg) ? 0 : MCPG_ETIMEDOUT;
}

void mcpg_fakehost_run_for(mcpg_fakehost *fh, uint64_t ms) {
    mcpg_fakehost_run_until(fh, NULL, NULL, ms);
}

/* Answered, and no pool thread still holds it: the test may free it. */
static int call_settled(void *arg) {
    const mcpg_call *c = arg;
    return c->answered && !c->on_pool;
}

int mcpg_fakehost_wait(mcpg_fakehost *fh, mcpg_call *call, uint64_t timeout_ms) {
    if (!call->dispatched) return MCPG_ESTATE;
    if (mcpg_fakehost_run_until(fh, call_settled, call, timeout_ms)) return MCPG_ETIMEDOUT;
    return call->final_status;
}

int mcpg_fakehost_run(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call,
                      uint64_t timeout_ms) {
    int st = mcpg_fakehost_dispatch(fh, inst, call);
    if (st < 0) return st;
    return mcpg_fakehost_wait(fh, call, timeout_ms);
}

/* ---- calls --------------------------------------------------------------- */

static int json_text_ok(const char *s) { return mcpg_json_validate(s, strlen(s)) == 0; }

/* params as the kernel's transports pass it (see the header). */
static int build_params(mcpg_call *c) {
    mcpg_buf b = {0};
    int rc = 0;
    uint32_t m = c->method_id;
    if (m == MCPG_METHOD_TOOLS_CALL || m == MCPG_METHOD_PROMPTS_GET) {
        rc |= mcpg_buf_puts(&b, "{\"name\":");
        const char *t = c->target ? c->target : "";
        rc |= mcpg_buf_append_json_string(&b, t, strlen(t));
        rc |= mcpg_buf_printf(&b, ",\"arguments\":%s}", c->args);
    } else if (m >= MCPG_METHOD_RESOURCES_LIST && m <= MCPG_METHOD_RESOURCES_UNSUBSCRIBE &&
               c->target) {
        rc |= mcpg_buf_puts(&b, "{\"uri\":");
        rc |= mcpg_buf_append_json_string(&b, c->target, strlen(c->target));
        rc |= mcpg_buf_puts(&b, "}");
    } else {
        rc |= mcpg_buf_puts(&b, c->args);
    }
    if (rc) {
        mcpg_buf_free(&b);
        return MCPG_ENOMEM;
    }
    c->params = b.data;
    c->params_len = b.len;
    return 0;
}

static void call_link(mcpg_fakehost *fh, mcpg_call *c) {
    c->next = fh->calls;
    if (fh->calls) fh->calls->pprev = &c->next;
    c->pprev = &fh->calls;
    fh->calls = c;
}

static void call_destroy(mcpg_call *c) {
    *c->pprev = c->next;
    if (c->next) c->next->pprev = c->pprev;
    for (fh_header *h = c->headers, *n; h; h = n) {
        n = h->next;
        free(h->name);
        free(h->value);
        free(h);
    }
    free(c->method);
    free(c->target);
    free(c->args);
    free(c->params);
    free(c->id);
    free(c->principal);
    free(c->tenant);
    free(c->roles);
    free(c->err_msg);
    mcpg_buf_free(&c->result);
    mcpg_buf_free(&c->err_data);
    free(c);
}

static mcpg_call *call_make(mcpg_fakehost *fh, const char *method, const char *target,
                            const char *args_json, const char *id_json) {
    mcpg_call *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fh = fh;
    c->wire = MCPG_WIRE_STATELESS;
    c->method = dup_or_null(method ? method : "");
    c->method_id = c->method ? method_of(c->method) : 0;
    c->target = dup_or_null(target);
    c->args = dup_or_null(args_json ? args_json : "{}");
    c->id = dup_or_null(id_json ? id_json : FH_DEFAULT_ID);
    call_link(fh, c);
    if (!c->method || (target && !c->target) || !c->args || !c->id || build_params(c)) {
        call_destroy(c);
        return NULL;
    }
    c->args_len = strlen(c->args);
    c->id_len = strlen(c->id);
    return c;
}

mcpg_call *mcpg_fakehost_call_new(mcpg_fakehost *fh, const char *method, const char *target,
                                  const char *args_json, const char *id_json) {
    if (args_json && !json_text_ok(args_json))
        fail(fh, "call_new: args_json is not valid JSON (a bug in the test): %s", args_json);
    if (id_json && !json_text_ok(id_json))
        fail(fh, "call_new: id_json is not valid JSON (a bug in the test): %s", id_json);
    return call_make(fh, method, target, args_json, id_json);
}

int mcpg_fakehost_call_set_header(mcpg_call *call, const char *lname, const char *value) {
    fh_header *h = calloc(1, sizeof *h);
    if (!h) return MCPG_ENOMEM;
    h->name = dup_or_null(lname);
    h->value = dup_or_null(value);
    if (!h->name || !h->value) {
        free(h->name);
        free(h->value);
        free(h);
        return MCPG_ENOMEM;
    }
    h->next = call->headers;
    call->headers = h;
    return 0;
}

void mcpg_fakehost_call_set_wire(mcpg_call *call, mcpg_wire wire) { call->wire = wire; }

static int call_in_flight(const mcpg_call *c) {
    return c->on_pool || (c->dispatched && !c->answered);
}

void mcpg_fakehost_call_free(mcpg_fakehost *fh, mcpg_call *call) {
    if (!call) return;
    if (call_in_flight(call)) {
        fail(fh, "a call was freed while its op is still running or pending: leaked");
        return;
    }
    call_destroy(call);
}

void mcpg_fakehost_outcome(mcpg_call *c, mcpg_call_outcome *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->http_status = c->http_status;
    o->retry_after_s = c->retry_after;
    if (c->is_error) {
        o->is_error = 1;
        o->error_code = c->err_code;
        o->error_message = c->err_msg ? c->err_msg : "";
        o->error_data = c->err_data.len ? c->err_data.data : NULL;
        o->error_data_len = c->err_data.len;
        return;
    }
    o->result = c->result.len ? c->result.data : "{}";
    o->result_len = c->result.len ? c->result.len : 2;
}

const char *mcpg_fakehost_result(mcpg_call *c) {
    if (c->is_error) return NULL;
    return c->result.len ? c->result.data : "{}";
}

int64_t mcpg_fakehost_error_code(mcpg_call *c) { return c->is_error ? c->err_code : 0; }

const char *mcpg_fakehost_error_message(mcpg_call *c) {
    return c->is_error ? (c->err_msg ? c->err_msg : "") : NULL;
}

/* ---- host slots: a call seen from a stage or a backend -------------------- */

static mcpg_worker *host_call_worker(mcpg_call *c) { return &c->fh->worker; }
static uint32_t host_call_method(mcpg_call *c) { return c->method_id; }
static uint32_t host_call_wire(mcpg_call *c) { return c->wire; }
static const char *host_call_target(mcpg_call *c) { return c->target; }

static const char *host_call_args(mcpg_call *c, size_t *len) {
    if (len) *len = c->args_len;
    return c->args;
}

static const char *host_call_params(mcpg_call *c, size_t *len) {
    if (len) *len = c->params_len;
    return c->params;
}

static const char *host_call_id(mcpg_call *c, size_t *len) {
    if (len) *len = c->id_len;
    return c->id;
}

static const char *host_call_header(mcpg_call *c, const char *lname, size_t *len) {
    if (c->submitted && c->d.header) return c->d.header(c->d.transport_ctx, lname, len);
    for (fh_header *h = c->headers; h; h = h->next)
        if (strcmp(h->name, lname) == 0) {
            if (len) *len = strlen(h->value);
            return h->value;
        }
    return NULL;
}

static void **host_call_slot(mcpg_call *c, mcpg_instance *self) {
    if (!self || self->fh != c->fh || self->slot >= FH_MAX_SLOTS) return NULL;
    return &c->slots[self->slot];
}

static int host_call_set_identity(mcpg_call *c, const char *principal, const char *tenant,
                                  const char *roles) {
    char *p = dup_or_null(principal), *t = dup_or_null(tenant), *r = dup_or_null(roles);
    if ((principal && !p) || (tenant && !t) || (roles && !r)) {
        free(p);
        free(t);
        free(r);
        return MCPG_ENOMEM;
    }
    free(c->principal);
    free(c->tenant);
    free(c->roles);
    c->principal = p;
    c->tenant = t;
    c->roles = r;
    return 0;
}

static const char *host_call_principal(mcpg_call *c) { return c->principal; }
static const char *host_call_tenant(mcpg_call *c) { return c->tenant; }
static const char *host_call_roles(mcpg_call *c) { return c->roles; }

static int host_call_result(mcpg_call *c, const char *json, size_t len) {
    c->result.len = 0;
    return mcpg_buf_append(&c->result, json, len);
}

static mcpg_buf *host_call_result_buf(mcpg_call *c) { return &c->result; }

static int host_call_error(mcpg_call *c, int64_t code, const char *message,
                           const char *data_json) {
    char *msg = dup_or_null(message ? message : "");
    if (!msg) return MCPG_ENOMEM;
    free(c->err_msg);
    c->err_msg = msg;
    c->is_error = 1;
    c->err_code = code;
    c->err_data.len = 0;
    if (data_json && mcpg_buf_puts(&c->err_data, data_json)) return MCPG_ENOMEM;
    return 0;
}

static void host_call_set_http(mcpg_call *c, int http_status, uint32_t retry_after_s) {
    c->http_status = http_status;
    c->retry_after = retry_after_s;
}

static int host_call_cancelled(mcpg_call *c) { return c->cancelled; }

/* ---- host slots: the transport's side ------------------------------------ */

static void complete_submitted(mcpg_call *c) {
    if (!c->submitted || c->completed) return;
    c->completed = 1;
    c->d.complete(c->d.transport_ctx, c);
}

/* tools/list from the routed backend's list_tools, as {"tools":[...]}. */
static void answer_tools_list(mcpg_fakehost *fh, mcpg_call *c) {
    mcpg_buf list = {0};
    int rc = fh->route ? mcpg_fakehost_list(fh, fh->route, MCPG_METHOD_TOOLS_LIST, &list) : 0;
    if (rc)
        host_call_error(c, MCPG_RPC_INTERNAL_ERROR, "list_tools failed", NULL);
    else if (mcpg_buf_printf(&c->result, "{\"tools\":%s}", list.len ? list.data : "[]"))
        host_call_error(c, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    mcpg_buf_free(&list);
    c->dispatched = 1;
    finish(c, rc ? MCPG_DENY : MCPG_CONTINUE);
}

static void route_submitted(mcpg_fakehost *fh, mcpg_call *c) {
    if (c->method_id == MCPG_METHOD_TOOLS_LIST) {
        answer_tools_list(fh, c);
        return;
    }
    int st = fh->route ? mcpg_fakehost_dispatch(fh, fh->route, c) : MCPG_ENOTSUP;
    if (st >= 0) return; /* finish() completes it, now or later */
    char msg[160];
    snprintf(msg, sizeof msg, "Method not found: %s", c->method);
    host_call_error(c, MCPG_RPC_METHOD_NOT_FOUND, msg, NULL);
    c->dispatched = 1;
    finish(c, MCPG_DENY);
}

static int host_call_submit(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **call_out) {
    mcpg_fakehost *fh = the_fh;
    int rc = loop_only(fh, w, "call_submit");
    if (rc) return rc;
    if (!d || !call_out || d->size < offsetof(mcpg_call_desc, complete) + sizeof d->complete ||
        !d->complete || !d->method)
        return MCPG_EINVAL;
    char *method = dup_n(d->method, d->method_len);
    char *target = d->name ? dup_n(d->name, d->name_len) : NULL;
    char *args = d->args_json ? dup_n(d->args_json, d->args_len) : NULL;
    char *id = d->id_json ? dup_n(d->id_json, d->id_len) : NULL;
    mcpg_call *c = method ? call_make(fh, method, target, args, id) : NULL;
    free(method);
    free(target);
    free(args);
    free(id);
    if (!c) return MCPG_ENOMEM;
    memcpy(&c->d, d, d->size < sizeof c->d ? d->size : sizeof c->d);
    c->wire = d->wire;
    c->submitted = 1;
    *call_out = c;
    route_submitted(fh, c); /* may complete before returning, as the kernel may */
    return 0;
}

/* As the kernel (call_cancel): a backend's cancel op runs only for a call it
 * holds on the loop (inline dispatch). Calling it for a call whose op runs on
 * a pool thread, as this did, raced that op in a way the kernel never does,
 * and let a module rely on a cancel that never comes in the gateway. */
static void host_call_cancel(mcpg_call *c) {
    c->cancelled = 1;
    mcpg_instance *be = c->op_inst;
    if (!be || !call_in_flight(c) || be->m->kind != MCPG_KIND_BACKEND || !be->inline_dispatch)
        return;
    const mcpg_backend_ops *o = be->m->ops;
    if (OPS_HAS(o, mcpg_backend_ops, cancel)) o->cancel(be->state, c);
}

static void host_call_outcome(mcpg_call *c, mcpg_call_outcome *out) {
    mcpg_fakehost_outcome(c, out);
}

static void host_call_release(mcpg_call *c) {
    if (!c->completed) fail(c->fh, "call_release before complete() (module bug)");
    mcpg_fakehost_call_free(c->fh, c);
}

void mcpg_fakehost_route(mcpg_fakehost *fh, mcpg_instance *backend) { fh->route = backend; }

/* ---- the host table ------------------------------------------------------ */

static const mcpg_host host_template = {
    .size = sizeof(mcpg_host),
    .version = 1,
    .abi_major = MCPG_ABI_MAJOR,
    .abi_minor = MCPG_ABI_MINOR,
    .strerror = mcpg_strerror,
    .errname = mcpg_errname,
    .alloc = malloc,
    .calloc = calloc,
    .realloc = realloc,
    .free = free,
    .log = host_log,
    .log_enabled = host_log_enabled,
    .report_error = host_report_error,
    .instance_name = host_instance_name,
    .gateway_version = host_gateway_version,
    .worker_count = host_worker_count,
    .worker_at = host_worker_at,
    .worker_current = host_worker_current,
    .worker_index = host_worker_index,
    .worker_uv_loop = host_worker_uv_loop,
    .worker_post = host_worker_post,
    .mono_us = fh_mono_us,
    .wall_us = fh_wall_us,
    .timer_start = host_timer_start,
    .timer_stop = host_timer_stop,
    .work_submit = host_work_submit,
    .buf_reserve = mcpg_buf_reserve,
    .buf_append = mcpg_buf_append,
    .buf_printf = mcpg_buf_printf,
    .buf_append_json_string = mcpg_buf_append_json_string,
    .buf_free = mcpg_buf_free,
    .json_validate = mcpg_json_validate,
    .json_object_get = mcpg_json_object_get,
    .json_object_next = mcpg_json_object_next,
    .json_array_next = mcpg_json_array_next,
    .json_string_eq = mcpg_json_string_eq,
    .json_string_decode = mcpg_json_string_decode,
    .json_int64 = mcpg_json_int64,
    .call_submit = host_call_submit,
    .call_cancel = host_call_cancel,
    .call_outcome = host_call_outcome,
    .call_release = host_call_release,
    .call_worker = host_call_worker,
    .call_method = host_call_method,
    .call_wire = host_call_wire,
    .call_target = host_call_target,
    .call_args = host_call_args,
    .call_params = host_call_params,
    .call_id = host_call_id,
    .call_header = host_call_header,
    .call_slot = host_call_slot,
    .call_set_identity = host_call_set_identity,
    .call_principal = host_call_principal,
    .call_tenant = host_call_tenant,
    .call_roles = host_call_roles,
    .call_result = host_call_result,
    .call_result_buf = host_call_result_buf,
    .call_error = host_call_error,
    .call_set_http = host_call_set_http,
    .call_resume = host_call_resume,
    .call_cancelled = host_call_cancelled,
    .gateway_name = host_gateway_name,
};

/* ---- the fake host's life ------------------------------------------------ */

mcpg_fakehost *mcpg_fakehost_new(void) {
    mcpg_fakehost *fh = calloc(1, sizeof *fh);
    if (!fh) return NULL;
    mcpg_fakehost *none = NULL;
    if (!atomic_compare_exchange_strong(&the_fh, &none, fh)) {
        fprintf(stderr, "[fakehost] error: another fake host is alive in this process\n");
        free(fh);
        return NULL;
    }
    fh->host = host_template;
    fh->worker.fh = fh;
    fh->loop_thread = pthread_self();
    atomic_store(&fh->log_level, MCPG_LOG_DEBUG);
    pthread_mutex_init(&fh->lock, NULL);
    if (uv_loop_init(&fh->loop) != 0) {
        pthread_mutex_destroy(&fh->lock);
        atomic_store(&the_fh, NULL);
        free(fh);
        return NULL;
    }
    uv_async_init(&fh->loop, &fh->wake, on_wake);
    fh->wake.data = fh;
    uv_timer_init(&fh->loop, &fh->deadline);
    fh->deadline.data = fh;
    return fh;
}

mcpg_host *mcpg_fakehost_host(mcpg_fakehost *fh) { return &fh->host; }
mcpg_worker *mcpg_fakehost_worker(mcpg_fakehost *fh) { return &fh->worker; }
int mcpg_fakehost_failures(mcpg_fakehost *fh) { return atomic_load(&fh->failures); }
int mcpg_fakehost_take_failures(mcpg_fakehost *fh) { return atomic_exchange(&fh->failures, 0); }
void mcpg_fakehost_set_log_level(mcpg_fakehost *fh, int level) {
    atomic_store(&fh->log_level, level);
}
void mcpg_fakehost_set_quiet(mcpg_fakehost *fh, int quiet) { atomic_store(&fh->quiet, quiet); }
const char *mcpg_fakehost_log_text(mcpg_fakehost *fh) { return fh->log.data ? fh->log.data : ""; }

int mcpg_fakehost_log_contains(mcpg_fakehost *fh, const char *needle) {
    pthread_mutex_lock(&fh->lock);
    int found = fh->log.data && strstr(fh->log.data, needle) != NULL;
    pthread_mutex_unlock(&fh->lock);
    return found;
}

void mcpg_fakehost_log_clear(mcpg_fakehost *fh) {
    pthread_mutex_lock(&fh->lock);
    fh->log.len = 0;
    if (fh->log.data) fh->log.data[0] = '\0';
    pthread_mutex_unlock(&fh->lock);
}

const char *mcpg_fakehost_report_text(mcpg_fakehost *fh) {
    return fh->report.data ? fh->report.data : "";
}

int mcpg_fakehost_report_count(mcpg_fakehost *fh) { return fh->report_count; }

static void name_handle(uv_handle_t *h, void *arg) {
    mcpg_fakehost *fh = arg;
    if (!uv_is_closing(h))
        fail(fh, "a %s handle was left open on the worker's loop", uv_handle_type_name(h->type));
}

static int no_orphan_work(void *arg) { return ((mcpg_fakehost *)arg)->orphan_work == NULL; }

/* Everything not tied to an instance: work and timers started with
 * self == NULL, calls not freed. */
static void free_leftovers(mcpg_fakehost *fh) {
    if (fh->orphan_work) {
        fail(fh, "work submitted without an instance was still queued at free");
        mcpg_fakehost_run_until(fh, no_orphan_work, fh, FH_DRAIN_MS);
    }
    while (fh->orphan_timers) {
        fail(fh, "a timer started without an instance was left running");
        timer_release(fh->orphan_timers);
    }
    for (mcpg_call *c = fh->calls, *next; c; c = next) {
        next = c->next;
        if (call_in_flight(c)) {
            fail(fh, "a call was still running at free: leaked");
            continue;
        }
        fail(fh, "a call was not freed (mcpg_fakehost_call_free)");
        call_destroy(c);
    }
}

/* Close our handles and the loop. 0, or 1 when a handle or request was left
 * (the loop's memory is then leaked on purpose: freeing it would be worse). */
static int close_loop(mcpg_fakehost *fh) {
    pthread_mutex_lock(&fh->lock);
    fh->posts_closed = 1;
    pthread_mutex_unlock(&fh->lock);
    on_wake(&fh->wake); /* run what was posted before the door closed */
    uv_close((uv_handle_t *)&fh->wake, NULL);
    uv_close((uv_handle_t *)&fh->deadline, NULL);
    for (int i = 0; i < 16; i++) uv_run(&fh->loop, UV_RUN_NOWAIT);
    if (uv_loop_close(&fh->loop) == 0) return 0;
    fail(fh, "the worker's loop cannot be closed: something is still open or queued on it");
    uv_walk(&fh->loop, name_handle, fh);
    return 1;
}

/* Every problem found here goes through fail(), so the failure count is the
 * answer. */
int mcpg_fakehost_free(mcpg_fakehost *fh) {
    if (!fh) return 0;
    int stuck = 0;
    while (fh->instances && !stuck) {
        fail(fh, "%s was still loaded at free: unloading it", fh->instances->stamp);
        stuck = mcpg_fakehost_unload(fh, fh->instances) == MCPG_ETIMEDOUT;
    }
    if (!stuck) free_leftovers(fh);
    int busy = stuck || close_loop(fh);
    int problems = atomic_load(&fh->failures);
    atomic_store(&the_fh, NULL);
    if (busy) return problems; /* leaked on purpose: the loop still references memory */
    mcpg_buf_free(&fh->log);
    mcpg_buf_free(&fh->report);
    pthread_mutex_destroy(&fh->lock);
    free(fh);
    return problems;
}

/* ---- instances ----------------------------------------------------------- */

/* The kernel's loader checks, from the SDK: a module refused here is refused
 * there, with the same words. */
static int check_descriptor(mcpg_fakehost *fh, const mcpg_module *m) {
    char why[512];
    if (mcpg_module_check(m, why, sizeof why) == 0) return 0;
    note(fh, "refused module %s: %s", m && m->name ? m->name : "(unnamed)", why);
    return MCPG_EABI;
}

/* Schema, then validate(). On success *cfg_out is the parsed struct (free it
 * with config_release). */
static int parse_config(mcpg_fakehost *fh, const mcpg_module *m, const char *json,
                        void **cfg_out) {
    report_reset(fh);
    void *cfg = calloc(1, m->config_size ? m->config_size : 1);
    if (!cfg) return MCPG_ENOMEM;
    int bad = mcpg_config_parse(m->config, json, json ? strlen(json) : 0, cfg, config_error, fh);
    if (!bad && m->lifecycle->validate) {
        mcpg_report rep = {fh};
        int rc = m->lifecycle->validate(&fh->host, cfg, &rep);
        if (rc == 0 && fh->report_count)
            fail(fh, "%s: validate() reported errors but returned 0 (module bug)", m->name);
        bad = rc != 0 || fh->report_count;
        if (rc != 0 && rc != MCPG_ECONFIG)
            note(fh, "%s: validate() returned %s, not MCPG_ECONFIG", m->name, mcpg_errname(rc));
    }
    if (bad) {
        mcpg_config_free(m->config, cfg);
        free(cfg);
        return MCPG_ECONFIG;
    }
    *cfg_out = cfg;
    return 0;
}

static void config_release(const mcpg_module *m, void *cfg) {
    if (!cfg) return;
    mcpg_config_free(m->config, cfg);
    free(cfg);
}

int mcpg_fakehost_check(mcpg_fakehost *fh, const mcpg_module *m, const char *config_json) {
    int rc = check_descriptor(fh, m);
    void *cfg = NULL;
    if (rc == 0) rc = parse_config(fh, m, config_json, &cfg);
    if (rc == 0) config_release(m, cfg);
    return rc;
}

static mcpg_instance *instance_new(mcpg_fakehost *fh, const mcpg_module *m, const char *name,
                                   void *cfg) {
    mcpg_instance *inst = calloc(1, sizeof *inst);
    if (!inst || !(inst->name = dup_or_null(name))) {
        free(inst);
        return NULL;
    }
    inst->fh = fh;
    inst->m = m;
    inst->config = cfg;
    inst->slot = fh->next_slot < FH_MAX_SLOTS ? fh->next_slot++ : UINT32_MAX;
    snprintf(inst->stamp, sizeof inst->stamp, "[%s:%s:%s]", kind_name(m->kind), m->name, name);
    inst->next = fh->instances;
    if (fh->instances) fh->instances->pprev = &inst->next;
    inst->pprev = &fh->instances;
    fh->instances = inst;
    return inst;
}

static void instance_free(mcpg_instance *inst) {
    *inst->pprev = inst->next;
    if (inst->next) inst->next->pprev = inst->pprev;
    if (inst->fh->route == inst) inst->fh->route = NULL;
    config_release(inst->m, inst->config);
    if (inst->dl) dlclose(inst->dl);
    free(inst->name);
    free(inst);
}

int mcpg_fakehost_load(mcpg_fakehost *fh, const mcpg_module *m, const char *instance_name,
                       const char *config_json, mcpg_instance **inst_out) {
    if (!fh || !inst_out) return MCPG_EINVAL;
    *inst_out = NULL;
    if (!instance_name || !mcpg_name_valid(instance_name, strlen(instance_name))) {
        note(fh, "instance name \"%s\" does not fit [a-zA-Z0-9_-]{1,64}",
             instance_name ? instance_name : "(null)");
        return MCPG_EINVAL;
    }
    void *cfg = NULL;
    int rc = check_descriptor(fh, m);
    if (rc == 0) rc = parse_config(fh, m, config_json, &cfg);
    if (rc) return rc;
    mcpg_instance *inst = instance_new(fh, m, instance_name, cfg);
    if (!inst) {
        config_release(m, cfg);
        return MCPG_ENOMEM;
    }
    rc = m->lifecycle->create(&fh->host, inst, inst->config, &inst->state);
    inst->created = rc == 0;
    if (rc == 0 && m->lifecycle->start) rc = m->lifecycle->start(inst->state);
    if (rc == 0) {
        inst->started = 1;
        /* as the kernel does on each loop before it serves; the test thread
         * is the one worker's loop thread */
        if (m->lifecycle->worker_start) m->lifecycle->worker_start(inst->state, &fh->worker);
        *inst_out = inst;
        return 0;
    }
    note(fh, "%s failed to %s: %s", inst->stamp, inst->created ? "start" : "be created",
         mcpg_errname(rc));
    mcpg_fakehost_unload(fh, inst); /* a failed start may have left timers or work */
    return rc;
}

int mcpg_fakehost_load_file(mcpg_fakehost *fh, const char *so_path, const char *instance_name,
                            const char *config_json, mcpg_instance **inst_out) {
    if (inst_out) *inst_out = NULL;
    void *dl = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        note(fh, "dlopen %s: %s", so_path, dlerror());
        return MCPG_ENOENT;
    }
    mcpg_module_entry_fn entry;
    void *sym = dlsym(dl, MCPG_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry); /* object to function pointer, without a cast warning */
    if (!entry) {
        note(fh, "%s exports no %s", so_path, MCPG_ENTRY_SYMBOL);
        dlclose(dl);
        return MCPG_ENOENT;
    }
    int rc = mcpg_fakehost_load(fh, entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR), instance_name,
                                config_json, inst_out);
    if (rc) dlclose(dl);
    else (*inst_out)->dl = dl;
    return rc;
}

static int no_instance_work(void *arg) { return ((mcpg_instance *)arg)->work == NULL; }

/* After stop: queued work is cancelled (its done sees MCPG_ECANCELED),
 * running work is waited for. 0, or MCPG_ETIMEDOUT. */
static int drain_work(mcpg_fakehost *fh, mcpg_instance *inst) {
    for (fh_work *wk = inst->work; wk; wk = wk->next) uv_cancel((uv_req_t *)&wk->req);
    if (mcpg_fakehost_run_until(fh, no_instance_work, inst, FH_DRAIN_MS) == 0) return 0;
    fail(fh, "%s: pool work still running %d ms after stop", inst->stamp, FH_DRAIN_MS);
    return MCPG_ETIMEDOUT;
}

static int cancel_timers(mcpg_fakehost *fh, mcpg_instance *inst) {
    int n = 0;
    while (inst->timers) {
        timer_release(inst->timers);
        n++;
    }
    if (n)
        fail(fh, "%s left %d timer(s) running after stop (module bug): cancelled", inst->stamp, n);
    return n;
}

/* The kernel stops an instance only once no call is inside it; here the test
 * decides, so say when it got that wrong, and make sure no call keeps a
 * pointer to the instance about to be freed. */
static void forget_calls(mcpg_fakehost *fh, mcpg_instance *inst) {
    for (mcpg_call *c = fh->calls; c; c = c->next) {
        if (c->op_inst != inst) continue;
        if (call_in_flight(c))
            fail(fh, "%s unloaded while a call's op is still in it", inst->stamp);
        c->op_inst = NULL;
    }
}

int mcpg_fakehost_unload(mcpg_fakehost *fh, mcpg_instance *inst) {
    if (!fh || !inst) return MCPG_EINVAL;
    const mcpg_lifecycle_ops *lc = inst->m->lifecycle;
    forget_calls(fh, inst);
    if (inst->started && lc->worker_stop) lc->worker_stop(inst->state, &fh->worker);
    if (inst->started && lc->stop) lc->stop(inst->state);
    inst->started = 0;
    if (drain_work(fh, inst)) return MCPG_ETIMEDOUT; /* destroy would free what work uses */
    int left = cancel_timers(fh, inst);
    if (inst->created) lc->destroy(inst->state);
    instance_free(inst);
    return left ? MCPG_ESTATE : 0;
}

void *mcpg_fakehost_state(mcpg_instance *inst) { return inst->state; }
const void *mcpg_fakehost_config(mcpg_instance *inst) { return inst->config; }

int mcpg_fakehost_set_inline(mcpg_instance *inst, int on) {
    if (on && !(inst->m->flags & MCPG_MOD_INLINE_SAFE)) return MCPG_EINVAL;
    inst->inline_dispatch = on != 0;
    return 0;
}

/* ---- list ops ------------------------------------------------------------ */

static int run_list_op(const mcpg_instance *inst, mcpg_method which, mcpg_buf *out) {
    const mcpg_backend_ops *o = inst->m->ops;
    switch (which) {
    case MCPG_METHOD_TOOLS_LIST: return o->list_tools(inst->state, out);
    case MCPG_METHOD_RESOURCES_LIST:
        return OPS_HAS(o, mcpg_backend_ops, list_resources) ? o->list_resources(inst->state, out)
                                                             : MCPG_ENOTSUP;
    case MCPG_METHOD_RESOURCES_TEMPLATES_LIST:
        return OPS_HAS(o, mcpg_backend_ops, list_resource_templates)
                   ? o->list_resource_templates(inst->state, out)
                   : MCPG_ENOTSUP;
    case MCPG_METHOD_PROMPTS_LIST:
        return OPS_HAS(o, mcpg_backend_ops, list_prompts) ? o->list_prompts(inst->state, out)
                                                           : MCPG_ENOTSUP;
    default: return MCPG_ENOTSUP;
    }
}

int mcpg_fakehost_list(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_method which,
                       mcpg_buf *out) {
    if (!inst || inst->m->kind != MCPG_KIND_BACKEND || !out) return MCPG_ENOTSUP;
    size_t start = out->len;
    int rc = run_list_op(inst, which, out);
    if (rc) return rc;
    const char *text = out->data ? out->data + start : "";
    size_t n = out->len - start, pos = 0;
    mcpg_json_span v;
    if (mcpg_json_value(text, n, &pos, &v) != 1 || v.type != MCPG_JSON_ARRAY ||
        mcpg_json_validate(text, n) != 0) {
        fail(fh, "%s: %s appended something that is not one JSON array: %.*s", inst->stamp,
             method_names[which], (int)(n > 200 ? 200 : n), text);
        return MCPG_EPROTO;
    }
    return 0;
}
