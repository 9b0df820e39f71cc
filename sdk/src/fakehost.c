/* The fake host: a real mcpg_host table for unit tests, with no kernel.
 *
 * This file is the host itself: its life, logs and failures, the one worker
 * and its uv loop (turned in the test's thread, or on a thread of its own),
 * timers, the pool, the memory and buffer slots, instances and list ops.
 * Calls are fakehost_call.c; the transport's side is fakehost_transport.c.
 *
 * It follows the kernel wherever a module could tell the difference and
 * shares its code where it can (descriptor checks, config parsing, method
 * names, the resume handshake and call handles), and adds checks the kernel
 * cannot afford: every misuse it sees is counted as a failure, and
 * mcpg_fakehost_free reports what was left behind.
 *
 * Several host slots (worker_count, worker_at, worker_current, alloc, ...)
 * take no context, so the one live fake host is found through a process-wide
 * pointer; that is why there can be only one at a time. */
#include "fakehost_internal.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

mcpg_fakehost *_Atomic fh_the;

/* The fake host whose loop this thread runs: the test's thread, or the
 * loop's own thread while there is one. */
static _Thread_local const mcpg_fakehost *tl_loop_of;

/* The list op output buffer being filled on this thread: the caller's, not
 * counted as a module's buffer (mcpg_fakehost_stats.buf_bytes). */
static _Thread_local const mcpg_buf *tl_list_out;

/* ---- small helpers ---------------------------------------------------- */

char *fh_dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *fh_dup_or_null(const char *s) { return s ? fh_dup_n(s, strlen(s)) : NULL; }

int fh_on_loop(const mcpg_fakehost *fh) { return fh && tl_loop_of == fh; }

static uint64_t fh_mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t fh_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void fh_stat_add(atomic_long *counter, long n) { atomic_fetch_add(counter, n); }

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
    if (!atomic_load(&fh->quiet) && fh->log.data) fputs(fh->log.data + start, stderr);
    pthread_mutex_unlock(&fh->lock);
}

void fh_fail(mcpg_fakehost *fh, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    atomic_fetch_add(&fh->failures, 1);
    log_line(fh, "[fakehost]", MCPG_LOG_ERROR, msg);
}

void fh_note(mcpg_fakehost *fh, const char *fmt, ...) {
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

/* ---- host slots: logging and names --------------------------------------- */

static void host_log(mcpg_instance *self, int level, const char *fmt, ...) MCPG_PRINTF(3, 4);
static void host_log(mcpg_instance *self, int level, const char *fmt, ...) {
    mcpg_fakehost *fh = self ? self->fh : fh_the;
    if (!fh) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_line(fh, self ? self->stamp : "[module]", level, msg);
}

static int host_log_enabled(mcpg_instance *self, int level) {
    mcpg_fakehost *fh = self ? self->fh : fh_the;
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

static const char *host_gateway_version(void) {
    mcpg_fakehost *fh = fh_the;
    return fh && fh->gateway_version ? fh->gateway_version : "fakehost";
}

static const char *host_gateway_name(void) {
    mcpg_fakehost *fh = fh_the;
    return fh && fh->gateway_name ? fh->gateway_name : "mcpg-fakehost";
}

/* ABI 1.2: the gateway's id is its name here. redact_json is not offered:
 * the rules are the kernel's (gateway.redact), which a fake host has not. */
static const char *host_gateway_id(void) { return host_gateway_name(); }

int mcpg_fakehost_reloaded(mcpg_fakehost *fh, mcpg_instance *inst) {
    if (!fh || !inst || !inst->created) return MCPG_EINVAL;
    const mcpg_lifecycle_ops *lc = inst->m->lifecycle;
    if (!MCPG_HAS(lc, reloaded)) return MCPG_ENOTSUP;
    lc->reloaded(inst->state);
    return 0;
}

void mcpg_fakehost_set_gateway(mcpg_fakehost *fh, const char *name, const char *version) {
    free(fh->gateway_name);
    free(fh->gateway_version);
    fh->gateway_name = fh_dup_or_null(name);
    fh->gateway_version = fh_dup_or_null(version);
}

/* ---- host slots: memory, counted (mcpg_fakehost_stats.host_allocs) -------- */

static void count_allocs(long n) {
    mcpg_fakehost *fh = fh_the;
    if (fh) fh_stat_add(&fh->st.host_allocs, n);
}

static void *host_alloc(size_t n) {
    void *p = malloc(n);
    if (p) count_allocs(1);
    return p;
}

static void *host_calloc(size_t count, size_t n) {
    void *p = calloc(count, n);
    if (p) count_allocs(1);
    return p;
}

/* realloc of NULL allocates; glibc's realloc(p, 0) frees p and returns NULL. */
static void *host_realloc(void *p, size_t n) {
    void *q = realloc(p, n);
    if (!p && q) count_allocs(1);
    else if (p && !q && n == 0) count_allocs(-1);
    return q;
}

static void host_free(void *p) {
    if (p) count_allocs(-1);
    free(p);
}

/* ---- host slots: buffers, counted (mcpg_fakehost_stats.buf_bytes) -------- */

/* Only buffers a module owns: a call's result and a list op's output are
 * the host's (and the test's). */
static void count_growth(const mcpg_buf *b, size_t cap_before) {
    mcpg_fakehost *fh = fh_the;
    if (!fh || b->cap == cap_before || b == tl_list_out || fh_host_owned(fh, b)) return;
    fh_stat_add(&fh->st.buf_bytes, (long)b->cap - (long)cap_before);
}

static int host_buf_reserve(mcpg_buf *b, size_t extra) {
    size_t cap = b->cap;
    int rc = mcpg_buf_reserve(b, extra);
    count_growth(b, cap);
    return rc;
}

static int host_buf_append(mcpg_buf *b, const void *p, size_t n) {
    size_t cap = b->cap;
    int rc = mcpg_buf_append(b, p, n);
    count_growth(b, cap);
    return rc;
}

MCPG_PRINTF(2, 0) static int buf_vprintf(mcpg_buf *b, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    int rc = n < 0 ? MCPG_EINVAL : mcpg_buf_reserve(b, (size_t)n);
    if (rc == 0) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
    return rc;
}

static int host_buf_printf(mcpg_buf *b, const char *fmt, ...) MCPG_PRINTF(2, 3);
static int host_buf_printf(mcpg_buf *b, const char *fmt, ...) {
    size_t cap = b->cap;
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    count_growth(b, cap);
    return rc;
}

static int host_buf_append_json_string(mcpg_buf *b, const char *s, size_t n) {
    size_t cap = b->cap;
    int rc = mcpg_buf_append_json_string(b, s, n);
    count_growth(b, cap);
    return rc;
}

static void host_buf_free(mcpg_buf *b) {
    size_t cap = b->cap;
    mcpg_buf_free(b);
    count_growth(b, cap);
}

/* ---- host slots: the worker ---------------------------------------------- */

static uint32_t host_worker_count(void) { return fh_the ? 1 : 0; }

static mcpg_worker *host_worker_at(uint32_t i) {
    mcpg_fakehost *fh = fh_the;
    return fh && i == 0 ? &fh->worker : NULL;
}

static mcpg_worker *host_worker_current(void) {
    mcpg_fakehost *fh = fh_the;
    return fh_on_loop(fh) ? &fh->worker : NULL;
}

static uint32_t host_worker_index(mcpg_worker *w) {
    (void)w;
    return 0;
}

static void *host_worker_uv_loop(mcpg_worker *w) { return w ? &w->fh->loop : NULL; }

int fh_post(mcpg_worker *w, mcpg_post *node) {
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

const char *fh_whose_bug(const char *what) {
    return strncmp(what, "host->", 6) == 0 ? "module bug" : "a bug in the test";
}

int fh_loop_only(mcpg_fakehost *fh, mcpg_worker *w, const char *what) {
    if (!fh) return MCPG_ESTATE;
    if (w != &fh->worker || !fh_on_loop(fh)) {
        fh_fail(fh, "%s called off the worker's loop thread (%s)", what, fh_whose_bug(what));
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
    mcpg_fakehost *fh = fh_the;
    int rc = fh_loop_only(fh, w, "host->timer_start");
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
    mcpg_fakehost *fh = fh_the;
    if (!t || !fh) return;
    if (!fh_on_loop(fh)) {
        fh_fail(fh, "host->timer_stop called off the worker's loop thread (module bug)");
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
    mcpg_fakehost *fh = fh_the;
    int rc = fh_loop_only(fh, w, "host->work_submit");
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

/* ---- the loop, in the test's thread ---------------------------------------- */

static void on_deadline(uv_timer_t *t) {
    mcpg_fakehost *fh = t->data;
    fh->deadline_hit = 1;
}

/* The loop may be turned here: on its thread, not already turning. */
static int may_turn(mcpg_fakehost *fh, const char *what) {
    if (!fh->in_loop && fh_on_loop(fh)) return 1;
    fh_fail(fh, "%s: the loop is turning already (a callback, or its own thread) or this is "
                "not its thread",
            what);
    return 0;
}

int mcpg_fakehost_run_until(mcpg_fakehost *fh, int (*done)(void *arg), void *arg,
                            uint64_t timeout_ms) {
    if (done && done(arg)) return 0;
    if (!may_turn(fh, "mcpg_fakehost_run_until")) return MCPG_ESTATE;
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

/* ---- the loop on a thread of its own --------------------------------------- */

static void *loop_thread(void *arg) {
    mcpg_fakehost *fh = arg;
    tl_loop_of = fh;
    /* the wake handle keeps the loop alive: each turn blocks until there
     * is something to do, stop_thread included */
    while (!atomic_load(&fh->thread_stop)) uv_run(&fh->loop, UV_RUN_ONCE);
    tl_loop_of = NULL;
    return NULL;
}

int mcpg_fakehost_start_thread(mcpg_fakehost *fh) {
    if (!fh) return MCPG_EINVAL;
    if (atomic_load(&fh->threaded) || !may_turn(fh, "mcpg_fakehost_start_thread"))
        return MCPG_ESTATE;
    atomic_store(&fh->thread_stop, 0);
    atomic_store(&fh->threaded, 1);
    fh->in_loop = 1; /* turning for good: run_until is refused until stop_thread */
    tl_loop_of = NULL;
    if (pthread_create(&fh->thread, NULL, loop_thread, fh) == 0) return 0;
    atomic_store(&fh->threaded, 0);
    fh->in_loop = 0;
    tl_loop_of = fh;
    return MCPG_ENOMEM;
}

int mcpg_fakehost_stop_thread(mcpg_fakehost *fh) {
    if (!fh || !atomic_load(&fh->threaded)) return MCPG_ESTATE;
    if (fh_on_loop(fh)) {
        fh_fail(fh, "mcpg_fakehost_stop_thread called on the loop's own thread");
        return MCPG_ESTATE;
    }
    atomic_store(&fh->thread_stop, 1);
    uv_async_send(&fh->wake);
    pthread_join(fh->thread, NULL);
    atomic_store(&fh->threaded, 0);
    fh->in_loop = 0;
    tl_loop_of = fh; /* this thread turns the loop from now on */
    return 0;
}

typedef struct sync_call {
    mcpg_post node;
    mcpg_fakehost *fh;
    void (*fn)(void *arg);
    void *arg;
    int done;
} sync_call;

static void sync_call_run(void *arg) {
    sync_call *s = arg;
    s->fn(s->arg);
    pthread_mutex_lock(&s->fh->lock);
    s->done = 1;
    pthread_cond_broadcast(&s->fh->cond);
    pthread_mutex_unlock(&s->fh->lock);
}

int mcpg_fakehost_run_on_loop(mcpg_fakehost *fh, void (*fn)(void *arg), void *arg) {
    if (!fh || !fn) return MCPG_EINVAL;
    if (fh_on_loop(fh)) {
        fn(arg);
        return 0;
    }
    if (!atomic_load(&fh->threaded)) {
        fh_fail(fh, "mcpg_fakehost_run_on_loop off the loop's thread, and the loop has no "
                    "thread of its own to run it");
        return MCPG_ESTATE;
    }
    sync_call s = {.node = {.fn = sync_call_run}, .fh = fh, .fn = fn, .arg = arg};
    s.node.arg = &s;
    if (fh_post(&fh->worker, &s.node) != 0) return MCPG_ESTATE;
    pthread_mutex_lock(&fh->lock);
    while (!s.done) pthread_cond_wait(&fh->cond, &fh->lock);
    pthread_mutex_unlock(&fh->lock);
    return 0;
}

/* ---- instances ----------------------------------------------------------- */

/* The kernel's loader checks, from the SDK: a module refused here is refused
 * there, with the same words. */
static int check_descriptor(mcpg_fakehost *fh, const mcpg_module *m) {
    char why[512];
    if (mcpg_module_check(m, why, sizeof why) == 0) return 0;
    fh_note(fh, "refused module %s: %s", m && m->name ? m->name : "(unnamed)", why);
    return MCPG_EABI;
}

static int run_validate(mcpg_fakehost *fh, const mcpg_module *m, const void *cfg) {
    const mcpg_lifecycle_ops *lc = m->lifecycle;
    if (!MCPG_HAS(lc, validate)) return 0;
    mcpg_report rep = {fh};
    int rc = lc->validate(&fh->host, cfg, &rep);
    if (rc == 0 && fh->report_count)
        fh_fail(fh, "%s: validate() reported errors but returned 0 (module bug)", m->name);
    if (rc != 0 && rc != MCPG_ECONFIG)
        fh_note(fh, "%s: validate() returned %s, not MCPG_ECONFIG", m->name, mcpg_errname(rc));
    return rc != 0 || fh->report_count;
}

/* Schema, then validate(). On success *cfg_out is the parsed struct (free it
 * with config_release). */
static int parse_config(mcpg_fakehost *fh, const mcpg_module *m, const char *json,
                        void **cfg_out) {
    report_reset(fh);
    void *cfg = calloc(1, m->config_size ? m->config_size : 1);
    if (!cfg) return MCPG_ENOMEM;
    int bad = mcpg_config_parse(m->config, json, json ? strlen(json) : 0, cfg, config_error, fh);
    if (!bad) bad = run_validate(fh, m, cfg);
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
    if (!inst || !(inst->name = fh_dup_or_null(name))) {
        free(inst);
        return NULL;
    }
    inst->fh = fh;
    inst->m = m;
    inst->config = cfg;
    /* as a manifest entry without "inline_dispatch": the module's own default */
    inst->inline_dispatch = m->kind == MCPG_KIND_BACKEND && (m->flags & MCPG_MOD_NEVER_BLOCKS);
    inst->slot = fh->next_slot < FH_MAX_SLOTS ? fh->next_slot++ : UINT32_MAX;
    snprintf(inst->stamp, sizeof inst->stamp, "[%s:%s:%s]", mcpg_kind_name(m->kind), m->name,
             name);
    inst->next = fh->instances;
    if (fh->instances) fh->instances->pprev = &inst->next;
    inst->pprev = &fh->instances;
    fh->instances = inst;
    return inst;
}

static void instance_free(mcpg_instance *inst) {
    *inst->pprev = inst->next;
    if (inst->next) inst->next->pprev = inst->pprev;
    if (inst->fh->route == inst) {
        inst->fh->route = NULL;
        fh_subs_free(inst->fh); /* they were that backend's */
    }
    if (inst->fh->coordinator == inst) inst->fh->coordinator = NULL;
    fh_metrics_forget(inst->fh, inst); /* a failed create: its families go too */
    config_release(inst->m, inst->config);
    if (inst->dl) dlclose(inst->dl);
    free(inst->name);
    free(inst);
}

/* create, start, then worker_start as the kernel runs it on each loop
 * before that loop serves (this thread is the one worker's loop thread). */
static int instance_start(mcpg_fakehost *fh, mcpg_instance *inst) {
    const mcpg_lifecycle_ops *lc = inst->m->lifecycle;
    int rc = lc->create(&fh->host, inst, inst->config, &inst->state);
    inst->created = rc == 0;
    if (rc == 0 && MCPG_HAS(lc, start)) rc = lc->start(inst->state);
    if (rc) return rc;
    inst->started = 1;
    if (MCPG_HAS(lc, worker_start)) lc->worker_start(inst->state, &fh->worker);
    return 0;
}

int mcpg_fakehost_load(mcpg_fakehost *fh, const mcpg_module *m, const char *instance_name,
                       const char *config_json, mcpg_instance **inst_out) {
    if (!fh || !inst_out) return MCPG_EINVAL;
    *inst_out = NULL;
    if (fh_loop_only(fh, &fh->worker, "mcpg_fakehost_load")) return MCPG_ESTATE;
    if (!instance_name || !mcpg_name_valid(instance_name, strlen(instance_name))) {
        fh_note(fh, "instance name \"%s\" does not fit [a-zA-Z0-9_-]{1,64}",
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
    rc = instance_start(fh, inst);
    if (rc == 0) {
        *inst_out = inst;
        return 0;
    }
    fh_note(fh, "%s failed to %s: %s", inst->stamp, inst->created ? "start" : "be created",
            mcpg_errname(rc));
    mcpg_fakehost_unload(fh, inst); /* a failed start may have left timers or work */
    return rc;
}

int mcpg_fakehost_load_file(mcpg_fakehost *fh, const char *so_path, const char *instance_name,
                            const char *config_json, mcpg_instance **inst_out) {
    if (inst_out) *inst_out = NULL;
    void *dl = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fh_note(fh, "dlopen %s: %s", so_path, dlerror());
        return MCPG_ENOENT;
    }
    mcpg_module_entry_fn entry;
    void *sym = dlsym(dl, MCPG_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry); /* object to function pointer, without a cast warning */
    if (!entry) {
        fh_note(fh, "%s exports no %s", so_path, MCPG_ENTRY_SYMBOL);
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
    fh_fail(fh, "%s: pool work still running %d ms after stop", inst->stamp, FH_DRAIN_MS);
    return MCPG_ETIMEDOUT;
}

static int cancel_timers(mcpg_fakehost *fh, mcpg_instance *inst) {
    int n = 0;
    while (inst->timers) {
        timer_release(inst->timers);
        n++;
    }
    if (n)
        fh_fail(fh, "%s left %d timer(s) running after stop (module bug): cancelled",
                inst->stamp, n);
    return n;
}

/* As the kernel at shutdown: nothing more is accepted, the instance closes
 * what it keeps on the loop (worker_stop, on the loop's thread), then stop. */
static void instance_stop(mcpg_fakehost *fh, mcpg_instance *inst) {
    const mcpg_lifecycle_ops *lc = inst->m->lifecycle;
    fh_listener_close(inst);
    if (inst->started && MCPG_HAS(lc, worker_stop)) lc->worker_stop(inst->state, &fh->worker);
    if (inst->started && MCPG_HAS(lc, stop)) lc->stop(inst->state);
    inst->started = 0;
}

int mcpg_fakehost_unload(mcpg_fakehost *fh, mcpg_instance *inst) {
    if (!fh || !inst) return MCPG_EINVAL;
    if (!may_turn(fh, "mcpg_fakehost_unload")) return MCPG_EINVAL;
    fh_calls_forget(fh, inst);
    instance_stop(fh, inst);
    /* as the kernel does: closes the module began in worker_stop complete
     * (their callbacks are module code) before the image can go */
    for (int i = 0; i < 4; i++) uv_run(&fh->loop, UV_RUN_NOWAIT);
    if (drain_work(fh, inst)) return MCPG_ETIMEDOUT; /* destroy would free what work uses */
    int left = cancel_timers(fh, inst);
    fh_metrics_forget(fh, inst); /* before destroy, as in the kernel: its read callbacks */
    if (inst->created) inst->m->lifecycle->destroy(inst->state);
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
    void *s = inst->state;
    switch (which) {
    case MCPG_METHOD_TOOLS_LIST: return o->list_tools(s, out);
    case MCPG_METHOD_RESOURCES_LIST:
        return MCPG_HAS(o, list_resources) ? o->list_resources(s, out) : MCPG_ENOTSUP;
    case MCPG_METHOD_RESOURCES_TEMPLATES_LIST:
        return MCPG_HAS(o, list_resource_templates) ? o->list_resource_templates(s, out)
                                                    : MCPG_ENOTSUP;
    case MCPG_METHOD_PROMPTS_LIST:
        return MCPG_HAS(o, list_prompts) ? o->list_prompts(s, out) : MCPG_ENOTSUP;
    default: return MCPG_ENOTSUP;
    }
}

int mcpg_fakehost_list(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_method which,
                       mcpg_buf *out) {
    if (!inst || inst->m->kind != MCPG_KIND_BACKEND || !out) return MCPG_ENOTSUP;
    size_t start = out->len;
    tl_list_out = out;
    int rc = run_list_op(inst, which, out);
    tl_list_out = NULL;
    if (rc) return rc;
    const char *text = out->data ? out->data + start : "";
    size_t n = out->len - start, pos = 0;
    mcpg_json_span v;
    if (mcpg_json_value(text, n, &pos, &v) != 1 || v.type != MCPG_JSON_ARRAY ||
        mcpg_json_validate(text, n) != 0) {
        fh_fail(fh, "%s: %s appended something that is not one JSON array: %.*s", inst->stamp,
                mcpg_method_name(which), (int)(n > 200 ? 200 : n), text);
        return MCPG_EPROTO;
    }
    return 0;
}

/* ---- the host table ------------------------------------------------------ */

static void fill_host(mcpg_host *h) {
    *h = (mcpg_host){
        .size = sizeof(mcpg_host),
        .version = 1,
        .abi_major = MCPG_ABI_MAJOR,
        .abi_minor = MCPG_ABI_MINOR,
        .strerror = mcpg_strerror,
        .errname = mcpg_errname,
        .alloc = host_alloc,
        .calloc = host_calloc,
        .realloc = host_realloc,
        .free = host_free,
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
        .worker_post = fh_post,
        .mono_us = fh_mono_us,
        .wall_us = fh_wall_us,
        .timer_start = host_timer_start,
        .timer_stop = host_timer_stop,
        .work_submit = host_work_submit,
        .buf_reserve = host_buf_reserve,
        .buf_append = host_buf_append,
        .buf_printf = host_buf_printf,
        .buf_append_json_string = host_buf_append_json_string,
        .buf_free = host_buf_free,
        .json_validate = mcpg_json_validate,
        .json_object_get = mcpg_json_object_get,
        .json_object_next = mcpg_json_object_next,
        .json_array_next = mcpg_json_array_next,
        .json_string_eq = mcpg_json_string_eq,
        .json_string_decode = mcpg_json_string_decode,
        .json_int64 = mcpg_json_int64,
        .gateway_name = host_gateway_name,
        .gateway_id = host_gateway_id,
    };
    fh_call_slots(h);
    fh_transport_slots(h);
    fh_metrics_slots(h);
    fh_server_slots(h);
}

/* ---- the fake host's life ------------------------------------------------ */

static int loop_open(mcpg_fakehost *fh) {
    if (uv_loop_init(&fh->loop) != 0) return MCPG_ENOMEM;
    uv_async_init(&fh->loop, &fh->wake, on_wake);
    fh->wake.data = fh;
    uv_timer_init(&fh->loop, &fh->deadline);
    fh->deadline.data = fh;
    return 0;
}

mcpg_fakehost *mcpg_fakehost_new(void) {
    mcpg_fakehost *fh = calloc(1, sizeof *fh);
    if (!fh) return NULL;
    mcpg_fakehost *none = NULL;
    if (!atomic_compare_exchange_strong(&fh_the, &none, fh)) {
        fprintf(stderr, "[fakehost] error: another fake host is alive in this process\n");
        free(fh);
        return NULL;
    }
    /* The kernel's process ignores SIGPIPE (host.h): a module writing to a
     * socket its peer closed sees EPIPE, and must in a test too. */
    signal(SIGPIPE, SIG_IGN);
    fill_host(&fh->host);
    fh->worker.fh = fh;
    tl_loop_of = fh;
    atomic_store(&fh->log_level, MCPG_LOG_DEBUG);
    pthread_mutex_init(&fh->lock, NULL);
    pthread_cond_init(&fh->cond, NULL);
    if (fh_metrics_open(fh) != 0 || loop_open(fh) != 0) {
        fh_metrics_close(fh);
        pthread_cond_destroy(&fh->cond);
        pthread_mutex_destroy(&fh->lock);
        tl_loop_of = NULL;
        atomic_store(&fh_the, NULL);
        free(fh);
        return NULL;
    }
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
        fh_fail(fh, "a %s handle was left open on the worker's loop",
                uv_handle_type_name(h->type));
}

void fh_run_posts(mcpg_fakehost *fh) { on_wake(&fh->wake); }

static int no_orphan_work(void *arg) { return ((mcpg_fakehost *)arg)->orphan_work == NULL; }

/* Everything not tied to an instance: work and timers started with
 * self == NULL, scheduled completions, calls. 1 when a call may still be
 * touched by an op (its memory must then outlive us). */
static int free_leftovers(mcpg_fakehost *fh) {
    if (fh->orphan_work) {
        fh_fail(fh, "work submitted without an instance was still queued at free");
        mcpg_fakehost_run_until(fh, no_orphan_work, fh, FH_DRAIN_MS);
    }
    while (fh->orphan_timers) {
        fh_fail(fh, "a timer started without an instance was left running");
        timer_release(fh->orphan_timers);
    }
    fh_laters_cancel(fh);
    fh_run_posts(fh); /* posts may name calls: run them while the calls exist */
    fh_subs_free(fh);
    return fh_calls_free(fh);
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
    fh_fail(fh, "the worker's loop cannot be closed: something is still open or queued on it");
    uv_walk(&fh->loop, name_handle, fh);
    return 1;
}

/* free must turn the loop in this thread: bring a loop thread home first. */
static int free_may_run(mcpg_fakehost *fh) {
    if (atomic_load(&fh->threaded) && !fh_on_loop(fh)) mcpg_fakehost_stop_thread(fh);
    return may_turn(fh, "mcpg_fakehost_free");
}

/* Every problem found here goes through fh_fail, so the failure count is
 * the answer. */
int mcpg_fakehost_free(mcpg_fakehost *fh) {
    if (!fh) return 0;
    if (!free_may_run(fh)) return atomic_load(&fh->failures); /* left as it is */
    int stuck = 0;
    while (fh->instances && !stuck) {
        fh_fail(fh, "%s was still loaded at free: unloading it", fh->instances->stamp);
        stuck = mcpg_fakehost_unload(fh, fh->instances) == MCPG_ETIMEDOUT;
    }
    if (!stuck) stuck = free_leftovers(fh);
    int busy = stuck || close_loop(fh);
    int problems = atomic_load(&fh->failures);
    tl_loop_of = NULL;
    atomic_store(&fh_the, NULL);
    if (busy) return problems; /* leaked on purpose: the loop or an op still references memory */
    mcpg_buf_free(&fh->log);
    mcpg_buf_free(&fh->report);
    mcpg_buf_free(&fh->news);
    fh_metrics_close(fh);
    fh_servers_free(fh);
    free(fh->gateway_name);
    free(fh->gateway_version);
    pthread_cond_destroy(&fh->cond);
    pthread_mutex_destroy(&fh->lock);
    free(fh);
    return problems;
}
