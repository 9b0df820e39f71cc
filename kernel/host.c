/* The host services table handed to every module, and the services that are
 * not about calls: logging, timers, the worker pool for modules, time. */
#include "kernel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

kernel_state kernel; /* the one kernel of this process */

uint64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- logging ---- */

MCPG_PRINTF(3, 4) static void host_log(mcpg_instance *self, int level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    klog_v(level, self ? self->stamp : "[module]", fmt, ap);
    va_end(ap);
}

static int host_log_enabled(mcpg_instance *self, int level) {
    (void)self;
    return level <= klog_level();
}

static const char *host_instance_name(mcpg_instance *self) { return self->name; }
static const char *host_gateway_version(void) { return MCPG_VERSION; }
/* gateway.name and gateway.id live in the manifest, which a reload replaces
 * and frees when the old generation retires; a module may keep what these
 * slots return for as long as it likes (host.h). So each distinct value is
 * copied once into a list that lives as long as the process (one entry per
 * value a reload ever brought: a handful). */
typedef struct kept_string {
    struct kept_string *next;
    char s[];
} kept_string;

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static kept_string *kept; /* reachable until exit: never freed */

static const char *keep_string(const char *s, const char *fallback) {
    if (!s) return fallback;
    pthread_mutex_lock(&kept_lock);
    kept_string *k = kept;
    while (k && strcmp(k->s, s) != 0) k = k->next;
    if (!k && (k = malloc(sizeof *k + strlen(s) + 1))) {
        strcpy(k->s, s);
        k->next = kept;
        kept = k;
    }
    pthread_mutex_unlock(&kept_lock);
    return k ? k->s : fallback;
}

static const char *host_gateway_name(void) { return keep_string(kernel.m ? kernel.m->name : NULL, "mcpg"); }
static const char *host_gateway_id(void) { return keep_string(kernel.m ? kernel.m->id : NULL, "mcpg"); }

/* The rules of the generation the calling loop serves (stable on its
 * thread), else the current one's. */
static int host_redact_json(const char *json, size_t len, mcpg_buf *out) {
    if (!json || !out) return MCPG_EINVAL;
    mcpg_worker *w = worker_self();
    const generation *g = w ? w->gen : kernel.gen;
    return redact_json(g && g->m ? g->m->redact : NULL, json, len, out);
}

/* ---- workers ---- */

static uint32_t host_worker_count(void) { return kernel.n_workers; }
static mcpg_worker *host_worker_at(uint32_t i) { return i < kernel.n_workers ? &kernel.workers[i] : NULL; }
static uint32_t host_worker_index(mcpg_worker *w) { return w->index; }
static void *host_worker_uv_loop(mcpg_worker *w) { return &w->loop; }

/* ---- timers: kernel-owned, counted per instance so a stop can prove none
 * outlives its module ---- */

struct mcpg_timer {
    uv_timer_t handle;
    mcpg_worker *w;
    mcpg_instance *owner;
    void (*cb)(void *arg);
    void *arg;
    struct mcpg_timer *prev, *next; /* the owner's live list */
};

static pthread_mutex_t timers_lock = PTHREAD_MUTEX_INITIALIZER;
static mcpg_timer *live_timers;

static void timer_fire(uv_timer_t *h) {
    mcpg_timer *t = h->data;
    t->cb(t->arg);
}

static int host_timer_start(mcpg_instance *self, mcpg_worker *w, uint64_t timeout_ms,
                            uint64_t repeat_ms, void (*cb)(void *), void *arg,
                            mcpg_timer **out) {
    if (!w || worker_self() != w) return MCPG_ESTATE;
    mcpg_timer *t = calloc(1, sizeof *t);
    if (!t) return MCPG_ENOMEM;
    t->w = w;
    t->owner = self;
    t->cb = cb;
    t->arg = arg;
    uv_timer_init(&w->loop, &t->handle);
    t->handle.data = t;
    uv_timer_start(&t->handle, timer_fire, timeout_ms, repeat_ms);
    pthread_mutex_lock(&timers_lock);
    t->next = live_timers;
    if (live_timers) live_timers->prev = t;
    live_timers = t;
    pthread_mutex_unlock(&timers_lock);
    if (self) atomic_fetch_add(&self->live_timers, 1);
    if (out) *out = t;
    return 0;
}

static void timer_closed(uv_handle_t *h) { free(h->data); }

/* Under timers_lock. */
static void timer_unlink(mcpg_timer *t) {
    if (t->prev) t->prev->next = t->next;
    else if (live_timers == t) live_timers = t->next;
    if (t->next) t->next->prev = t->prev;
    t->prev = t->next = NULL;
}

/* On the timer's loop: it never fires again, and is freed once closed. */
static void timer_close(mcpg_timer *t) {
    if (t->owner) atomic_fetch_sub(&t->owner->live_timers, 1);
    uv_timer_stop(&t->handle);
    uv_close((uv_handle_t *)&t->handle, timer_closed);
}

static void host_timer_stop(mcpg_timer *t) {
    if (!t) return;
    pthread_mutex_lock(&timers_lock);
    timer_unlink(t);
    pthread_mutex_unlock(&timers_lock);
    timer_close(t);
}

void timers_close_left(mcpg_worker *w) {
    pthread_mutex_lock(&timers_lock);
    for (mcpg_timer *t = live_timers, *next; t; t = next) {
        next = t->next;
        if (t->w != w) continue;
        klog(MCPG_LOG_ERROR, t->owner ? t->owner->stamp : "kernel",
             "left a timer running on worker %u after worker_stop (module bug): cancelled",
             w->index);
        timer_unlink(t);
        timer_close(t);
    }
    pthread_mutex_unlock(&timers_lock);
}

/* When an instance stops: every loop has ended and closed what its modules
 * left, so a timer still counted here is a kernel bug. */
void instance_timers_cancel(mcpg_instance *inst) {
    int n = atomic_load(&inst->live_timers);
    if (n != 0)
        klog(MCPG_LOG_ERROR, inst->stamp, "%d timer(s) outlived their loops (kernel bug)", n);
}

/* ---- the worker pool for modules ----
 * Each piece of work is listed on the loop it was submitted from until its
 * done() has run there, and counted on its instance, so a stopping loop can
 * take back what has not started and an instance can tell when it is quiet. */

typedef struct module_work {
    pool_job job;
    mcpg_post post;
    mcpg_worker *w;
    mcpg_instance *owner;
    void (*work)(void *);
    void (*done)(void *, int);
    void *arg;
    int status;
    struct module_work *prev, *next; /* w->works, on w's loop only */
} module_work;

static void works_add(module_work *mw) {
    mcpg_worker *w = mw->w;
    mw->next = w->works;
    if (w->works) w->works->prev = mw;
    w->works = mw;
}

static void works_remove(module_work *mw) {
    mcpg_worker *w = mw->w;
    if (mw->prev) mw->prev->next = mw->next;
    else if (w->works == mw) w->works = mw->next;
    if (mw->next) mw->next->prev = mw->prev;
}

/* On the loop: done() runs, and the work is over. */
static void work_end(module_work *mw, int status) {
    works_remove(mw);
    mw->done(mw->arg, status);
    if (mw->owner) atomic_fetch_sub(&mw->owner->work_in_flight, 1);
    free(mw);
}

static void work_done_on_loop(void *p) {
    module_work *mw = p;
    work_end(mw, mw->status);
}

/* On the pool thread. When the loop has stopped the work stays listed on
 * it, and is freed with the worker once every pool thread has ended. */
static void work_finish(module_work *mw, int status) {
    mw->status = status;
    mw->post.fn = work_done_on_loop;
    mw->post.arg = mw;
    (void)worker_post(mw->w, &mw->post);
}

static void work_run(pool_job *j) {
    module_work *mw = (module_work *)j;
    mw->work(mw->arg);
    work_finish(mw, 0);
}

static void work_expired(pool_job *j) { work_finish((module_work *)j, MCPG_ETIMEDOUT); }

static int host_work_submit(mcpg_instance *self, mcpg_worker *w, uint64_t timeout_ms,
                            void (*work)(void *), void (*done)(void *, int), void *arg) {
    if (!w || !work || !done) return MCPG_EINVAL;
    if (worker_self() != w) { /* done() runs on w: only w's loop may list it */
        klog(MCPG_LOG_ERROR, self ? self->stamp : "kernel",
             "work_submit off worker %u's loop thread (module bug): refused", w->index);
        return MCPG_ESTATE;
    }
    if (w->stopped) return MCPG_ESTATE; /* its done() could never run */
    module_work *mw = calloc(1, sizeof *mw);
    if (!mw) return MCPG_ENOMEM;
    mw->job.run = work_run;
    mw->job.expired = work_expired;
    mw->job.timeout_us = timeout_ms * 1000;
    mw->w = w;
    mw->owner = self;
    mw->work = work;
    mw->done = done;
    mw->arg = arg;
    int rc = pool_submit(&mw->job);
    if (rc) {
        free(mw);
        return rc;
    }
    works_add(mw);
    if (self) atomic_fetch_add(&self->work_in_flight, 1);
    return 0;
}

void module_work_cancel_queued(mcpg_worker *w) {
    for (module_work *mw = w->works, *next; mw; mw = next) {
        next = mw->next;
        if (pool_cancel(&mw->job)) work_end(mw, MCPG_ECANCELED);
    }
}

/* After the pool's threads have ended: work that finished once its loop had
 * stopped could not run its done(). */
void module_work_free_left(mcpg_worker *w) {
    for (module_work *mw = w->works, *next; mw; mw = next) {
        next = mw->next;
        if (mw->owner) atomic_fetch_sub(&mw->owner->work_in_flight, 1);
        free(mw);
    }
    w->works = NULL;
}

static int host_worker_post(mcpg_worker *w, mcpg_post *node) { return worker_post(w, node); }
static mcpg_worker *host_worker_current(void) { return worker_self(); }

static int host_json_validate(const char *s, size_t n) { return mcpg_json_validate(s, n); }

const mcpg_host HOST = {
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
    .mono_us = mono_us,
    .wall_us = wall_us,
    .timer_start = host_timer_start,
    .timer_stop = host_timer_stop,
    .work_submit = host_work_submit,
    .buf_reserve = mcpg_buf_reserve,
    .buf_append = mcpg_buf_append,
    .buf_printf = mcpg_buf_printf,
    .buf_append_json_string = mcpg_buf_append_json_string,
    .buf_free = mcpg_buf_free,
    .json_validate = host_json_validate,
    .json_object_get = mcpg_json_object_get,
    .json_object_next = mcpg_json_object_next,
    .json_array_next = mcpg_json_array_next,
    .json_string_eq = mcpg_json_string_eq,
    .json_string_decode = mcpg_json_string_decode,
    .json_int64 = mcpg_json_int64,
    .call_submit = call_submit,
    .call_cancel = call_cancel,
    .call_outcome = call_outcome,
    .call_release = call_release,
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
    .call_notify = host_call_notify,
    .call_request = host_call_request,
    .call_set_result_type = host_call_set_result_type,
    .call_session = host_call_session,
    .call_client_capabilities = host_call_client_capabilities,
    .call_protocol_version = host_call_protocol_version,
    .lists_changed = host_lists_changed,
    .resource_updated = host_resource_updated,
    .reply_submit = host_reply_submit,
    .resource_subscribe = host_resource_subscribe,
    .coordinator = host_coordinator,
    .tasks_offered = host_tasks_offered,
    .reload = host_reload,
    .call_peer = host_call_peer,
    .call_tls = host_call_tls,
    .call_identify = host_call_identify,
    .call_role_count = host_call_role_count,
    .call_role = host_call_role,
    .call_has_role = host_call_has_role,
    .call_claims = host_call_claims,
    .call_auth_method = host_call_auth_method,
    .call_client_name = host_call_client_name,
    .call_set_challenge = host_call_set_challenge,
    .gateway_id = host_gateway_id,
    .redact_json = host_redact_json,
    .metric_new = host_metric_new,
    .metric_add = host_metric_add,
    .metric_set = host_metric_set,
    .metric_observe = host_metric_observe,
    .metrics_each = host_metrics_each,
    .metrics_render = host_metrics_render,
    .webhook_submit = host_webhook_submit,
    .events_offered = host_events_offered,
    .call_owner = host_call_owner,
    .offers = host_offers,
    .listen_address = host_listen_address,
    .protected_resource = host_protected_resource,
    .call_challenge = host_call_challenge,
    .backends_waiting = host_backends_waiting,
    .call_audited = host_call_audited,
    .call_trace_upstream = host_call_trace_upstream,
    .call_trace_upstream_end = host_call_trace_upstream_end,
    .call_bearer = host_call_bearer,
    .server_find = host_server_find,
    .server_offers = host_server_offers,
};
