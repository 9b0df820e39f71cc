/* Reload: replace the serving generation with one built from the manifest
 * as it is now on disk, without stopping. On the control loop (the main
 * thread), one at a time:
 *
 *   read    the whole manifest, checked as at start (modules loaded by their
 *           content: a file that did not change is the same image)
 *   build   the next generation: unchanged instances carried over, the
 *           others created, then started; any error and nothing changes
 *   publish every loop runs worker_start for the new instances, then takes
 *           the new generation: the next call on it uses it; the lists
 *           backends told meanwhile are applied, and listeners told what
 *           changed (news.c)
 *   retire  calls that started on the old generation finish there; a
 *           replaced transport's connections are drained after
 *           gateway.reload_drain_ms; then the instances that left are
 *           worker_stop'ped on every loop (and the loop turned once more, so
 *           the closes they began have completed), stopped, waited for
 *           (their timers and work), destroyed, and their images dlclose'd
 *           and proved unmapped.
 *
 * Asked by SIGHUP or host->reload (the transport's POST /admin/reload). */
#define _GNU_SOURCE
#include "kernel.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 10
#define QUIET_WAIT_MS 5000 /* a leaving instance's timers and work, after stop() */

typedef struct asker {
    mcpg_worker *w;
    reload_done_fn done;
    void *arg;
    int status;
    char *json;
    mcpg_post post;
    struct asker *next;
} asker;

enum { IDLE, ADOPTING, WAIT_CALLS, WAIT_CONNS, LOOPS_STOP, LOOPS_FENCE, QUIET };

typedef struct reload_state {
    uv_loop_t *loop;
    uv_async_t wake;
    uv_timer_t tick;
    const char *exe_dir, *listen_override;
    pthread_mutex_t lock;
    asker *queue;        /* under lock */
    int phase;
    asker *current;      /* answered at publish */
    generation *old, *next;
    uint64_t t0, t_published, t_phase;
    atomic_uint loops_left;
    atomic_ulong conns_seen;
    bool drain_told;
    mcpg_post *posts;    /* one per loop, reused phase after phase */
    uint32_t reloads, refused;
    char summary[1024];
    generation **pinned; size_t n_pinned; /* retired but left loaded: freed at the stop */
} reload_state;

static reload_state R;

/* ---- answers ---- */

static void deliver(void *arg) {
    asker *a = arg;
    a->done(a->arg, a->status, a->json ? a->json : "{}", a->json ? strlen(a->json) : 2);
    free(a->json);
    free(a);
}

static void answer(asker *a, int status, char *json) {
    if (!a) {
        free(json);
        return;
    }
    a->status = status;
    a->json = json;
    a->post.fn = deliver;
    a->post.arg = a;
    if (worker_post(a->w, &a->post) != 0) { /* its loop has stopped */
        free(a->json);
        free(a);
    }
}

/* {"errors":["FILE: key.path: what is wrong", ...]} */
static char *errors_json(const errlist *errs) {
    mcpg_buf b = {0};
    mcpg_buf_puts(&b, "{\"errors\":[");
    for (size_t i = 0; i < errs->count; i++) {
        if (i) mcpg_buf_puts(&b, ",");
        mcpg_buf_append_json_string(&b, errs->lines[i], strlen(errs->lines[i]));
    }
    mcpg_buf_puts(&b, "]}");
    return b.data;
}

/* ---- every loop runs fn, then the control loop hears ---- */

static void loop_done(void) {
    if (atomic_fetch_sub(&R.loops_left, 1) == 1) uv_async_send(&R.wake);
}

static void on_every_loop(void (*fn)(void *)) {
    atomic_store(&R.loops_left, K.n_workers);
    for (uint32_t i = 0; i < K.n_workers; i++) {
        R.posts[i].fn = fn;
        R.posts[i].arg = &K.workers[i];
        if (worker_post(&K.workers[i], &R.posts[i]) != 0) loop_done(); /* a stopped loop */
    }
}

/* ---- what changed ---- */

static bool in_gen(const generation *g, const mcpg_instance *inst) {
    return generation_slot_of(g, inst) >= 0;
}

static void describe_change(const generation *old, const generation *g, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    n += (size_t)snprintf(out + n, cap - n, "\"started\":[");
    bool first = true;
    for (size_t i = 0; i < g->n_instances && n < cap; i++)
        if (!g->carried[i]) {
            n += (size_t)snprintf(out + n, cap - n, "%s\"%s\"", first ? "" : ",", g->instances[i]->name);
            first = false;
        }
    n += (size_t)snprintf(out + n, cap - n, "],\"carried\":[");
    first = true;
    for (size_t i = 0; i < g->n_instances && n < cap; i++)
        if (g->carried[i]) {
            n += (size_t)snprintf(out + n, cap - n, "%s\"%s\"", first ? "" : ",", g->instances[i]->name);
            first = false;
        }
    n += (size_t)snprintf(out + n, cap - n, "],\"stopping\":[");
    first = true;
    for (size_t i = 0; old && i < old->n_instances && n < cap; i++)
        if (!in_gen(g, old->instances[i])) {
            n += (size_t)snprintf(out + n, cap - n, "%s\"%s\"", first ? "" : ",",
                                  old->instances[i]->name);
            first = false;
        }
    if (n < cap) snprintf(out + n, cap - n, "]");
}

/* What a reload cannot change (the loops, the pool and the tools' metric
 * cells are made once):
 * said as errors, with the key. */
static void check_fixed(const manifest *m, errlist *errs) {
    const manifest *cur = K.m;
    if (m->workers != cur->workers)
        errlist_add(errs, m->path, "gateway.workers",
                    "a reload cannot change the number of loops (restart the gateway)");
    if (m->pool_threads != cur->pool_threads || m->pool_queue != cur->pool_queue)
        errlist_add(errs, m->path, "gateway.pool",
                    "a reload cannot change the worker pool (restart the gateway)");
    if (m->metrics_max_tools != cur->metrics_max_tools) /* the cells are made at start */
        errlist_add(errs, m->path, "gateway.metrics.max_tools",
                    "a reload cannot change how many tools have series of their own (restart "
                    "the gateway)");
}

/* What a reload cannot replace, because the transport is carried over and
 * cannot be replaced yet: the transport itself (it owns the connections and
 * their streams), and the coordinator, on which the transport keeps its
 * legacy sessions and its subscriptions, and which it (and other modules)
 * may keep from host->coordinator() for as long as they live (host.h): the
 * kernel keeps that pointer valid by never swapping the coordinator. */
static bool keeps_fixed_instances(const generation *g, const manifest *m, errlist *errs) {
    if (!g->carried[0]) {
        errlist_add(errs, m->path, "gateway.server",
                    "a reload cannot change the transport or its settings (restart the gateway)");
        return false;
    }
    if (g->coordinator != K.gen->coordinator) {
        errlist_add(errs, m->path, g->coordinator ? g->coordinator->name : "cluster",
                    "a reload cannot change the coordinator (cluster) or its settings: the "
                    "transport keeps its sessions on the one it started with (restart the "
                    "gateway)");
        return false;
    }
    return true;
}

static bool listen_changed(const manifest *m) {
    const manifest *cur = K.m;
    bool same = m->n_listen == cur->n_listen;
    for (size_t i = 0; same && i < m->n_listen; i++) same = strcmp(m->listen[i], cur->listen[i]) == 0;
    return !same;
}

/* ---- publish ---- */

/* On each loop: the new instances' per-loop set-up, then the switch. */
static void adopt_on_loop(void *arg) {
    mcpg_worker *w = arg;
    generation *g = R.next;
    for (size_t i = 0; i < g->n_instances; i++) {
        const mcpg_lifecycle_ops *lc = g->instances[i]->desc->lifecycle;
        if (!g->carried[i] && MCPG_HAS(lc, worker_start)) lc->worker_start(g->instances[i]->state, w);
    }
    w->gen = g;
    if (w->index == 0) watch_adopt(w, g);
    workers_listen_apply(w); /* new addresses accept before dropped ones close */
    loop_done();
}

static void refuse(asker *a, errlist *errs, const char *why) {
    R.refused++;
    metrics_count(KM.reloads, 1, 1); /* result="refused" */
    for (size_t i = 0; i < errs->count; i++)
        klog(MCPG_LOG_ERROR, "kernel", "reload refused: %s", errs->lines[i]);
    klog(MCPG_LOG_ERROR, "kernel", "reload refused (%s): generation %u serves on", why, K.gen->id);
    answer(a, 400, errors_json(errs));
}

static void run(asker *a) {
    errlist errs = {0};
    R.t0 = mono_us();
    manifest_use_runtime_dir(K.m->runtime_dir);
    manifest *m = manifest_load(K.m->path, R.listen_override, R.exe_dir, &errs);
    manifest_use_runtime_dir(NULL);
    uint64_t t_read = mono_us();
    if (m) check_fixed(m, &errs);
    bool relisten = m && !errs.count && listen_changed(m);
    if (relisten && workers_listen_prepare(m->listen, m->n_listen, &errs, m->path) != 0)
        relisten = false;
    generation *g = m && !errs.count ? generation_build_from(m, K.gen, &errs) : NULL;
    if (g && !keeps_fixed_instances(g, m, &errs)) {
        generation_free(g);
        g = NULL;
    }
    uint64_t t_build = mono_us();
    if (g && generation_start(g) != 0) {
        errlist_add(&errs, m->path, g->failed ? g->failed : "modules",
                    "the instance could not start: %s (see the log); nothing changed",
                    mcpg_strerror(g->failed_rc));
        generation_stop_fresh(g);
        generation_free(g);
        g = NULL;
    }
    if (!g) {
        if (relisten) workers_listen_abandon();
        refuse(a, &errs, m ? "the new generation could not be built" : "the manifest is not valid");
        manifest_free(m);
        errlist_free(&errs);
        return;
    }
    errlist_free(&errs);
    manifest_free(m); /* the loader's reference: the generation holds its own */
    uint64_t t_start = mono_us();
    R.old = K.gen;
    R.next = g;
    R.current = a;
    K.gen = g;
    K.m = g->m;
    K.max_calls_per_worker = (uint64_t)g->m->max_calls_per_worker;
    K.list_page_size = (uint64_t)g->m->list_page_size;
    char change[700];
    describe_change(R.old, g, change, sizeof change);
    snprintf(R.summary, sizeof R.summary,
             "read %.1f ms, build %.1f ms, start %.1f ms; %s", (t_read - R.t0) / 1000.0,
             (t_build - t_read) / 1000.0, (t_start - t_build) / 1000.0, change);
    R.phase = ADOPTING;
    on_every_loop(adopt_on_loop);
}

/* Carried-over instances re-read what their config names outside the
 * manifest (keys files, certificates): the new generation serves now, on
 * this control thread. */
static void tell_carried(generation *g) {
    for (size_t i = 0; i < g->n_instances; i++) {
        const mcpg_lifecycle_ops *lc = g->instances[i]->desc->lifecycle;
        if (g->carried[i] && MCPG_HAS(lc, reloaded)) lc->reloaded(g->instances[i]->state);
    }
}

static void published(void) {
    R.t_published = mono_us();
    workers_listen_done();
    tell_carried(R.next);
    news_reload_published(R.old, R.next); /* listeners: the lists that differ now */
    generation_warn_open(R.next, K.m->listen, K.m->n_listen);
    R.reloads++;
    metrics_count(KM.reloads, 0, 1); /* result="ok" */
    klog(MCPG_LOG_INFO, "kernel", "reload: generation %u serves (after %u), published in %.1f ms: %s",
         R.next->id, R.old->id, (R.t_published - R.t0) / 1000.0, R.summary);
    char *json = NULL;
    char change[700];
    describe_change(R.old, R.next, change, sizeof change);
    if (asprintf(&json, "{\"generation\":%u,\"previous\":%u,\"published_ms\":%.1f,%s}", R.next->id,
                 R.old->id, (R.t_published - R.t0) / 1000.0, change) < 0)
        json = NULL;
    for (size_t i = 0; i < K.m->n_listen; i++)
        klog(MCPG_LOG_INFO, "kernel", "listening on %s://%s/mcp (generation %u)",
             manifest_scheme(K.m), K.m->listen[i], R.next->id);
    answer(R.current, 200, json);
    R.current = NULL;
    R.phase = WAIT_CALLS;
    R.t_phase = mono_us();
    R.drain_told = false;
}

/* ---- retire ---- */

static bool transport_leaves(void) { return !in_gen(R.next, R.old->transport); }

static void count_conns_on_loop(void *arg) {
    mcpg_worker *w = arg;
    mcpg_instance *tr = R.old->transport;
    const mcpg_transport_ops *ops = tr->desc->ops;
    atomic_fetch_add(&R.conns_seen, (unsigned long)ops->conn_count(tr->state, w));
    loop_done();
}

static void drain_old_transport_on_loop(void *arg) {
    mcpg_worker *w = arg;
    mcpg_instance *tr = R.old->transport;
    const mcpg_transport_ops *ops = tr->desc->ops;
    ops->drain(tr->state, w);
    loop_done();
}

static void stop_leaving_on_loop_only(mcpg_worker *w) {
    generation *old = R.old;
    for (size_t i = old->n_instances; i-- > 0;) {
        mcpg_instance *inst = old->instances[i];
        const mcpg_lifecycle_ops *lc = inst->desc->lifecycle;
        if (!in_gen(R.next, inst) && MCPG_HAS(lc, worker_stop)) lc->worker_stop(inst->state, w);
    }
}

static void stop_leaving_on_loop(void *arg) {
    stop_leaving_on_loop_only(arg);
    loop_done();
}

/* A loop that runs this has finished the iteration in which worker_stop
 * closed its handles: their close callbacks (module code) have run. */
static void fence_on_loop(void *arg) {
    (void)arg;
    loop_done();
}

static void stop_leaving(void) {
    generation *old = R.old;
    for (size_t i = old->n_instances; i-- > 0;) {
        mcpg_instance *inst = old->instances[i];
        if (in_gen(R.next, inst) || !inst->started) continue;
        const mcpg_lifecycle_ops *lc = inst->desc->lifecycle;
        if (MCPG_HAS(lc, stop)) lc->stop(inst->state);
        inst->started = false;
    }
}

static bool leaving_quiet(bool log_stuck) {
    generation *old = R.old;
    bool quiet = true;
    for (size_t i = 0; i < old->n_instances; i++) {
        mcpg_instance *inst = old->instances[i];
        if (in_gen(R.next, inst)) continue;
        int timers = atomic_load(&inst->live_timers), work = atomic_load(&inst->work_in_flight);
        if (!timers && !work) continue;
        quiet = false;
        if (log_stuck)
            klog(MCPG_LOG_ERROR, inst->stamp,
                 "stopped %d ms ago with %d timer(s) and %d piece(s) of work still live: "
                 "its image stays loaded (pinned)", QUIET_WAIT_MS, timers, work);
    }
    return quiet;
}

static void retired(bool stuck) {
    generation *old = R.old;
    uint32_t id = old->id;
    if (stuck) {
        /* code may still run in it: nothing of it is freed or unloaded
         * while the gateway runs (the stop frees it, once the loops and
         * their timers are gone) */
        atomic_fetch_add(&K.pinned_images, 1);
        generation **v = realloc(R.pinned, (R.n_pinned + 1) * sizeof *v);
        if (v) {
            R.pinned = v;
            R.pinned[R.n_pinned++] = old;
        }
    } else {
        generation_free(old);
    }
    klog(MCPG_LOG_INFO, "kernel",
         "reload: generation %u retired %.1f ms after the publish%s; images pinned so far: %lu",
         id, (mono_us() - R.t_published) / 1000.0,
         stuck ? " (left loaded: an instance would not go quiet)" : "",
         (unsigned long)atomic_load(&K.pinned_images));
    R.old = NULL;
    R.next = NULL;
    R.phase = IDLE;
    uv_timer_stop(&R.tick);
}

static void on_tick(uv_timer_t *t) {
    (void)t;
    uint64_t now = mono_us();
    switch (R.phase) {
    case WAIT_CALLS:
        if (atomic_load(&R.old->refs) != 0) return;
        if (transport_leaves()) {
            R.phase = WAIT_CONNS;
            R.t_phase = now;
            atomic_store(&R.conns_seen, 0);
            on_every_loop(count_conns_on_loop);
            return;
        }
        R.phase = LOOPS_STOP;
        on_every_loop(stop_leaving_on_loop);
        return;
    case WAIT_CONNS:
        if (atomic_load(&R.loops_left)) return;
        if (atomic_load(&R.conns_seen) == 0) {
            R.phase = LOOPS_STOP;
            on_every_loop(stop_leaving_on_loop);
            return;
        }
        if (!R.drain_told && now - R.t_published >= (uint64_t)K.m->reload_drain_ms * 1000) {
            R.drain_told = true; /* its streams end properly; clients reconnect */
            on_every_loop(drain_old_transport_on_loop);
            return;
        }
        atomic_store(&R.conns_seen, 0);
        on_every_loop(count_conns_on_loop);
        return;
    case LOOPS_STOP:
        if (atomic_load(&R.loops_left)) return;
        R.phase = LOOPS_FENCE;
        on_every_loop(fence_on_loop);
        return;
    case LOOPS_FENCE:
        if (atomic_load(&R.loops_left)) return;
        stop_leaving();
        R.phase = QUIET;
        R.t_phase = now;
        return;
    case QUIET:
        if (leaving_quiet(false)) {
            retired(false);
        } else if (now - R.t_phase > (uint64_t)QUIET_WAIT_MS * 1000) {
            leaving_quiet(true);
            retired(true);
        }
        return;
    default: return;
    }
}

/* ---- requests ---- */

static void take_requests(void) {
    while (R.phase == IDLE) {
        pthread_mutex_lock(&R.lock);
        asker *a = R.queue;
        if (a) R.queue = a->next;
        pthread_mutex_unlock(&R.lock);
        if (!a) return;
        bool signal = !a->done;
        if (signal) {
            free(a);
            a = NULL;
        }
        run(a);
        if (R.phase != IDLE) uv_timer_start(&R.tick, on_tick, TICK_MS, TICK_MS);
    }
    /* one at a time: the others are told */
    for (;;) {
        pthread_mutex_lock(&R.lock);
        asker *a = R.queue;
        if (a) R.queue = a->next;
        pthread_mutex_unlock(&R.lock);
        if (!a) return;
        if (!a->done) {
            klog(MCPG_LOG_WARN, "kernel", "SIGHUP: a reload is in progress; this one is skipped");
            free(a);
            continue;
        }
        answer(a, 409, strdup("{\"error\":\"a reload is in progress\"}"));
    }
}

static void on_wake(uv_async_t *h) {
    (void)h;
    if (R.phase == ADOPTING && atomic_load(&R.loops_left) == 0) published();
    take_requests();
}

static void enqueue(asker *a) {
    pthread_mutex_lock(&R.lock);
    asker **pp = &R.queue;
    while (*pp) pp = &(*pp)->next;
    *pp = a;
    pthread_mutex_unlock(&R.lock);
    uv_async_send(&R.wake);
}

void reload_init(uv_loop_t *loop, const char *exe_dir, const char *listen_override) {
    R.loop = loop;
    R.exe_dir = exe_dir;
    R.listen_override = listen_override;
    pthread_mutex_init(&R.lock, NULL);
    uv_async_init(loop, &R.wake, on_wake);
    uv_timer_init(loop, &R.tick);
    R.posts = calloc(MCPG_MAX_WORKERS, sizeof *R.posts);
}

void reload_on_signal(void) {
    if (atomic_load(&K.draining)) return;
    asker *a = calloc(1, sizeof *a); /* no done: the log is the answer */
    if (a) enqueue(a);
}

int host_reload(mcpg_worker *w, reload_done_fn done, void *arg) {
    if (!w || !done) return MCPG_EINVAL;
    if (atomic_load(&K.draining) || !R.loop) return MCPG_EUNAVAIL;
    asker *a = calloc(1, sizeof *a);
    if (!a) return MCPG_ENOMEM;
    a->w = w;
    a->done = done;
    a->arg = arg;
    enqueue(a);
    return 0;
}

/* A loop stops (the gateway stops) while a generation retires: the
 * instances leaving that have not been worker_stop'ped here are now. */
void reload_worker_stopping(mcpg_worker *w) {
    if (R.old && R.phase >= WAIT_CALLS && R.phase <= LOOPS_STOP) stop_leaving_on_loop_only(w);
}

/* The gateway stops, after its loops and its pool: a generation still
 * retiring has no calls left; what leaves is stopped and freed. */
void reload_shutdown(void) {
    if (R.loop) uv_timer_stop(&R.tick);
    if (R.old && R.phase >= WAIT_CALLS && R.phase != QUIET) stop_leaving();
    if (R.old && R.phase >= WAIT_CALLS) {
        generation_free(R.old);
        R.old = NULL;
    }
    for (size_t i = 0; i < R.n_pinned; i++) generation_free(R.pinned[i]);
    free(R.pinned);
    R.pinned = NULL;
    R.n_pinned = 0;
    free(R.posts);
    R.posts = NULL;
}
