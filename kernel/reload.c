/* Reload: replace the serving generation with one built from the manifest
 * as it is now on disk, without stopping. On the control loop (the main
 * thread):
 *
 *   read    the whole manifest, checked as at start (modules loaded by their
 *           content: a file that did not change is the same image)
 *   build   the next generation: unchanged instances carried over, the
 *           others created, then started; any error and nothing changes
 *   publish every loop runs worker_start for the new instances, then takes
 *           the new generation: the next call on it uses it; the lists
 *           backends told meanwhile are applied, and listeners told what
 *           changed (news.c). One reload is
 *           read, built and published at a time (another asked meanwhile is
 *           answered 409, a SIGHUP skipped).
 *   retire  the generation replaced joins those retiring: any number, each
 *           with its own record, clock and posts. Calls that started on it
 *           finish there; gateway.reload_drain_ms after its publish, what
 *           still runs on it is ended as the drain ends it (a backend still
 *           working answered with an error and told to cancel, an events
 *           stream ended by its cancel op) and the carried transport ends
 *           the streams it holds without a call that opened before that
 *           publish (a replaced transport is drained instead), so their
 *           clients reconnect to the generation serving. Once no call holds
 *           it, the instances that leave (held by no generation serving, nor
 *           by one retiring whose calls are not over) are worker_stop'ped on
 *           every loop (and the loop turned once more, so the closes they
 *           began have completed), stopped, waited for (their timers and
 *           work), destroyed, and their images dlclose'd and proved
 *           unmapped.
 *
 * Asked by SIGHUP or host->reload (the transport's POST /admin/reload). */
#define _GNU_SOURCE
#include "kernel.h"
#include "sd_notify.h"

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

/* A generation on its way out, from the moment the loops start adopting
 * its successor (ADOPTING) until it is freed (RETIRED) and its deadline has
 * been met. Each has its own posts: several go round the loops at once. */
enum { ADOPTING, WAIT_CALLS, WAIT_CONNS, LOOPS_STOP, LOOPS_FENCE, QUIET, RETIRED };

typedef struct retiring retiring;

typedef struct loop_post {
    mcpg_post post;
    retiring *r;
    mcpg_worker *w;
} loop_post;

struct retiring {
    generation *gen;          /* NULL once retired (freed, or pinned) */
    uint32_t id;
    int phase;
    uint64_t t_published, t_phase, deadline_us;
    int64_t drain_ms;         /* gateway.reload_drain_ms of the generation that replaced it */
    bool deadline_met;        /* what still ran on it at the deadline was ended */
    bool ending;              /* ... by the round now going round the loops */
    bool end_calls;           /* ... which also ends calls (it still has some) */
    atomic_uint loops_left;   /* loops that have not yet run this round's post */
    atomic_ulong conns_seen, calls_ended, streams_ended;
    mcpg_instance **leaving; size_t n_leaving; /* decided once its calls are over */
    retiring *next;
    loop_post posts[];        /* one per loop, reused round after round */
};

typedef struct reload_state {
    uv_loop_t *loop;
    uv_async_t wake;
    uv_timer_t tick;
    const char *exe_dir, *listen_override;
    pthread_mutex_t lock;
    asker *queue;        /* under lock */
    retiring *adopting;  /* the record of the generation the loops are leaving now */
    asker *current;      /* answered at publish */
    generation *next;
    uint64_t t0;
    retiring *retiring;  /* every record, newest first (the adopting one too) */
    uint32_t reloads, refused;
    char summary[1024];
    generation **pinned; size_t n_pinned; /* retired but left loaded: freed at the stop */
} reload_state;

static reload_state reload;

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

static void loop_done(retiring *r) {
    if (atomic_fetch_sub(&r->loops_left, 1) == 1) uv_async_send(&reload.wake);
}

/* fn(the loop's post) on every loop; the post names the record and the loop. */
static void on_every_loop(retiring *r, void (*fn)(void *)) {
    atomic_store(&r->loops_left, kernel.n_workers);
    for (uint32_t i = 0; i < kernel.n_workers; i++) {
        loop_post *lp = &r->posts[i];
        lp->post.fn = fn;
        lp->post.arg = lp;
        lp->r = r;
        lp->w = &kernel.workers[i];
        if (worker_post(lp->w, &lp->post) != 0) loop_done(r); /* a stopped loop */
    }
}

static bool round_running(retiring *r) { return atomic_load(&r->loops_left) != 0; }

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
    const manifest *cur = kernel.m;
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
    if (g->coordinator != kernel.gen->coordinator) {
        errlist_add(errs, m->path, g->coordinator ? g->coordinator->name : "cluster",
                    "a reload cannot change the coordinator (cluster) or its settings: the "
                    "transport keeps its sessions on the one it started with (restart the "
                    "gateway)");
        return false;
    }
    return true;
}

static bool listen_changed(const manifest *m) {
    const manifest *cur = kernel.m;
    bool same = m->n_listen == cur->n_listen;
    for (size_t i = 0; same && i < m->n_listen; i++) same = strcmp(m->listen[i], cur->listen[i]) == 0;
    return !same;
}

/* ---- publish ---- */

/* On each loop: the new instances' per-loop set-up, then the switch. */
static void adopt_on_loop(void *arg) {
    loop_post *lp = arg;
    mcpg_worker *w = lp->w;
    generation *g = reload.next;
    for (size_t i = 0; i < g->n_instances; i++) {
        const mcpg_lifecycle_ops *lc = g->instances[i]->desc->lifecycle;
        if (!g->carried[i] && MCPG_HAS(lc, worker_start)) lc->worker_start(g->instances[i]->state, w);
    }
    w->gen = g;
    if (w->index == 0) watch_adopt(w, g);
    if (w->index == 0) pins_fleet_adopt(w, g);
    workers_listen_apply(w); /* new addresses accept before dropped ones close */
    loop_done(lp->r);
}

static void refuse(asker *a, errlist *errs, const char *why) {
    reload.refused++;
    metrics_count(KM.reloads, 1, 1); /* result="refused" */
    for (size_t i = 0; i < errs->count; i++)
        klog(MCPG_LOG_ERROR, "kernel", "reload refused: %s", errs->lines[i]);
    klog(MCPG_LOG_ERROR, "kernel", "reload refused (%s): generation %u serves on", why, kernel.gen->id);
    sd_notify_reload_over("reload refused (%s): generation %u serves on", why, kernel.gen->id);
    answer(a, 400, errors_json(errs));
}

/* The record of the serving generation, made before anything is built: a
 * reload that cannot have one changes nothing. */
static retiring *retiring_new(generation *old) {
    retiring *r = calloc(1, sizeof *r + kernel.n_workers * sizeof r->posts[0]);
    if (!r) return NULL;
    r->leaving = calloc(old->n_instances ? old->n_instances : 1, sizeof *r->leaving);
    if (!r->leaving) {
        free(r);
        return NULL;
    }
    r->gen = old;
    r->id = old->id;
    r->phase = ADOPTING;
    return r;
}

static void retiring_free(retiring *r) {
    free(r->leaving);
    free(r);
}

/* Read, build, start; on success the loops start adopting (reload.adopting). */
static void run(asker *a) {
    errlist errs = {0};
    reload.t0 = mono_us();
    sd_notify_reloading();
    retiring *r = retiring_new(kernel.gen);
    if (!r) {
        errlist_add(&errs, kernel.m->path, "gateway", "out of memory");
        refuse(a, &errs, "out of memory");
        errlist_free(&errs);
        return;
    }
    manifest_use_runtime_dir(kernel.m->runtime_dir);
    manifest *m = manifest_load(kernel.m->path, reload.listen_override, reload.exe_dir, &errs);
    manifest_use_runtime_dir(NULL);
    uint64_t t_read = mono_us();
    if (m) check_fixed(m, &errs);
    bool relisten = m && !errs.count && listen_changed(m);
    if (relisten && workers_listen_prepare(m->listen, m->n_listen, &errs, m->path) != 0)
        relisten = false;
    generation *g = m && !errs.count ? generation_build_from(m, kernel.gen, &errs) : NULL;
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
        retiring_free(r);
        return;
    }
    errlist_free(&errs);
    manifest_free(m); /* the loader's reference: the generation holds its own */
    uint64_t t_start = mono_us();
    reload.next = g;
    reload.current = a;
    kernel.gen = g;
    kernel.m = g->m;
    pins_announce(g); /* what its first lists found that the one before had not */
    kernel.max_calls_per_worker = (uint64_t)g->m->max_calls_per_worker;
    kernel.list_page_size = (uint64_t)g->m->list_page_size;
    char change[700];
    describe_change(r->gen, g, change, sizeof change);
    snprintf(reload.summary, sizeof reload.summary,
             "read %.1f ms, build %.1f ms, start %.1f ms; %s", (t_read - reload.t0) / 1000.0,
             (t_build - t_read) / 1000.0, (t_start - t_build) / 1000.0, change);
    r->next = reload.retiring;
    reload.retiring = r;
    reload.adopting = r;
    on_every_loop(r, adopt_on_loop);
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

/* Generations retiring: replaced, not yet freed. */
static unsigned n_retiring(void) {
    unsigned n = 0;
    for (const retiring *r = reload.retiring; r; r = r->next) n += r->gen && r->phase != ADOPTING;
    return n;
}

/* Every loop serves reload.next: the replaced generation starts retiring, on
 * the clock of the manifest that replaced it. */
static void published(void) {
    retiring *r = reload.adopting;
    uint64_t now = mono_us();
    r->t_published = r->t_phase = now;
    r->drain_ms = kernel.m->reload_drain_ms;
    r->deadline_us = now + (uint64_t)r->drain_ms * 1000;
    r->phase = WAIT_CALLS;
    reload.adopting = NULL;
    workers_listen_done();
    tell_carried(reload.next);
    news_reload_published(r->gen, reload.next); /* listeners: the lists that differ now */
    generation_warn_open(reload.next, kernel.m->listen, kernel.m->n_listen);
    reload.reloads++;
    metrics_count(KM.reloads, 0, 1); /* result="ok" */
    klog(MCPG_LOG_INFO, "kernel",
         "reload: generation %u serves (after %u), published in %.1f ms; generations retiring: %u "
         "(each ends what still runs on it %lld ms after its publish): %s",
         reload.next->id, r->id, (now - reload.t0) / 1000.0, n_retiring(), (long long)r->drain_ms, reload.summary);
    char *json = NULL;
    char change[700];
    describe_change(r->gen, reload.next, change, sizeof change);
    if (asprintf(&json, "{\"generation\":%u,\"previous\":%u,\"published_ms\":%.1f,\"retiring\":%u,%s}",
                 reload.next->id, r->id, (now - reload.t0) / 1000.0, n_retiring(), change) < 0)
        json = NULL;
    for (size_t i = 0; i < kernel.m->n_listen; i++)
        klog(MCPG_LOG_INFO, "kernel", "listening on %s://%s/mcp (generation %u)",
             manifest_scheme(kernel.m), kernel.m->listen[i], reload.next->id);
    sd_notify_reload_over("serving (generation %u, reloaded)", reload.next->id);
    answer(reload.current, 200, json);
    reload.current = NULL;
    reload.next = NULL;
}

/* ---- retire ---- */

/* inst is held by the generation serving, or by a retiring one (other than
 * r) whose calls are not over: it does not leave with r. Of two retiring
 * generations holding it, the one whose calls end last takes it out. */
static bool held_by_others(const retiring *r, const mcpg_instance *inst) {
    if (in_gen(kernel.gen, inst)) return true;
    for (const retiring *o = reload.retiring; o; o = o->next)
        if (o != r && o->phase <= WAIT_CONNS && in_gen(o->gen, inst)) return true;
    return false;
}

static void decide_leaving(retiring *r) {
    r->n_leaving = 0;
    for (size_t i = 0; i < r->gen->n_instances; i++)
        if (!held_by_others(r, r->gen->instances[i]))
            r->leaving[r->n_leaving++] = r->gen->instances[i];
}

static void count_conns_on_loop(void *arg) {
    loop_post *lp = arg;
    mcpg_instance *tr = lp->r->gen->transport;
    const mcpg_transport_ops *ops = tr->desc->ops;
    atomic_fetch_add(&lp->r->conns_seen, (unsigned long)ops->conn_count(tr->state, lp->w));
    loop_done(lp->r);
}

/* The streams a transport holds without a call, opened before r's publish:
 * a replaced transport drains (its connections end), the carried one ends
 * just those streams. */
static unsigned long end_streams(retiring *r, mcpg_worker *w) {
    mcpg_instance *tr = w->gen->transport;
    if (r->end_calls && r->gen->transport != tr) {
        const mcpg_transport_ops *old = r->gen->transport->desc->ops;
        old->drain(r->gen->transport->state, w);
        return 0;
    }
    const mcpg_transport_ops *ops = tr->desc->ops;
    return MCPG_HAS(ops, end_streams) ? ops->end_streams(tr->state, w, r->t_published) : 0;
}

static void end_on_loop(void *arg) {
    loop_post *lp = arg;
    retiring *r = lp->r;
    if (r->end_calls)
        atomic_fetch_add(&r->calls_ended,
                         calls_end_generation(lp->w, r->gen, "did not answer within "
                                              "gateway.reload_drain_ms of a reload: retry"));
    atomic_fetch_add(&r->streams_ended, end_streams(r, lp->w));
    loop_done(r);
}

static void stop_leaving_on_loop(void *arg) {
    loop_post *lp = arg;
    retiring *r = lp->r;
    for (size_t i = r->n_leaving; i-- > 0;) {
        const mcpg_lifecycle_ops *lc = r->leaving[i]->desc->lifecycle;
        if (MCPG_HAS(lc, worker_stop)) lc->worker_stop(r->leaving[i]->state, lp->w);
    }
    loop_done(r);
}

/* A loop that runs this has finished the iteration in which worker_stop
 * closed its handles: their close callbacks (module code) have run. */
static void fence_on_loop(void *arg) {
    loop_post *lp = arg;
    loop_done(lp->r);
}

static void stop_leaving(retiring *r) {
    for (size_t i = r->n_leaving; i-- > 0;) {
        mcpg_instance *inst = r->leaving[i];
        if (!inst->started) continue;
        const mcpg_lifecycle_ops *lc = inst->desc->lifecycle;
        if (MCPG_HAS(lc, stop)) lc->stop(inst->state);
        inst->started = false;
    }
}

static bool leaving_quiet(retiring *r, bool log_stuck) {
    bool quiet = true;
    for (size_t i = 0; i < r->n_leaving; i++) {
        mcpg_instance *inst = r->leaving[i];
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

static void retired(retiring *r, bool stuck) {
    if (stuck) {
        /* code may still run in it: nothing of it is freed or unloaded
         * while the gateway runs (the stop frees it, once the loops and
         * their timers are gone) */
        atomic_fetch_add(&kernel.pinned_images, 1);
        generation **v = realloc(reload.pinned, (reload.n_pinned + 1) * sizeof *v);
        if (v) {
            reload.pinned = v;
            reload.pinned[reload.n_pinned++] = r->gen;
        }
    } else {
        generation_free(r->gen);
    }
    r->gen = NULL;
    r->phase = RETIRED;
    klog(MCPG_LOG_INFO, "kernel",
         "reload: generation %u retired %.1f ms after the publish%s; generations still retiring: "
         "%u; images pinned so far: %lu",
         r->id, (mono_us() - r->t_published) / 1000.0,
         stuck ? " (left loaded: an instance would not go quiet)" : "", n_retiring(),
         (unsigned long)atomic_load(&kernel.pinned_images));
}

/* Its calls are over (and a replaced transport's connections gone): what
 * leaves with it is worker_stop'ped on every loop. */
static void begin_stop(retiring *r) {
    decide_leaving(r);
    r->phase = LOOPS_STOP;
    on_every_loop(r, stop_leaving_on_loop);
}

static void calls_over(retiring *r, uint64_t now) {
    if (in_gen(kernel.gen, r->gen->transport)) {
        begin_stop(r);
        return;
    }
    r->phase = WAIT_CONNS; /* a replaced transport: its connections first */
    r->t_phase = now;
    atomic_store(&r->conns_seen, 0);
    on_every_loop(r, count_conns_on_loop);
}

static void end_at_deadline(retiring *r) {
    r->deadline_met = true;
    r->ending = true;
    r->end_calls = r->phase <= WAIT_CONNS; /* after, it has no call and may be freed */
    on_every_loop(r, end_on_loop);
}

static void log_deadline(retiring *r) {
    r->ending = false;
    klog(MCPG_LOG_INFO, "kernel",
         "reload: generation %u, gateway.reload_drain_ms (%lld ms) after its publish: %lu call(s) "
         "still on it ended, %lu stream(s) opened before it ended (their clients reconnect)",
         r->id, (long long)r->drain_ms, atomic_load(&r->calls_ended),
         atomic_load(&r->streams_ended));
}

/* One step of one record, between two of its rounds of the loops. */
static void retire_step(retiring *r, uint64_t now) {
    if (r->phase == ADOPTING || round_running(r)) return;
    if (r->ending) log_deadline(r);
    if (!r->deadline_met && now >= r->deadline_us) {
        end_at_deadline(r);
        return;
    }
    switch (r->phase) {
    case WAIT_CALLS:
        if (atomic_load(&r->gen->refs) == 0) calls_over(r, now);
        return;
    case WAIT_CONNS:
        if (atomic_load(&r->conns_seen) == 0) {
            begin_stop(r);
            return;
        }
        atomic_store(&r->conns_seen, 0);
        on_every_loop(r, count_conns_on_loop);
        return;
    case LOOPS_STOP:
        r->phase = LOOPS_FENCE;
        on_every_loop(r, fence_on_loop);
        return;
    case LOOPS_FENCE:
        stop_leaving(r);
        r->phase = QUIET;
        r->t_phase = now;
        return;
    case QUIET:
        if (leaving_quiet(r, false)) {
            retired(r, false);
        } else if (now - r->t_phase > (uint64_t)QUIET_WAIT_MS * 1000) {
            leaving_quiet(r, true);
            retired(r, true);
        }
        return;
    default: return;
    }
}

static void on_tick(uv_timer_t *t) {
    (void)t;
    uint64_t now = mono_us();
    for (retiring **pp = &reload.retiring; *pp;) {
        retiring *r = *pp;
        retire_step(r, now);
        if (r->phase == RETIRED && r->deadline_met && !r->ending && !round_running(r)) {
            *pp = r->next;
            retiring_free(r);
            continue;
        }
        pp = &r->next;
    }
    if (!reload.retiring) uv_timer_stop(&reload.tick);
}

/* ---- requests ---- */

static asker *dequeue(void) {
    pthread_mutex_lock(&reload.lock);
    asker *a = reload.queue;
    if (a) reload.queue = a->next;
    pthread_mutex_unlock(&reload.lock);
    return a;
}

static void take_requests(void) {
    while (!reload.adopting) {
        asker *a = dequeue();
        if (!a) return;
        bool signal = !a->done;
        if (signal) {
            free(a);
            a = NULL;
        }
        run(a);
        if (reload.retiring && !uv_is_active((uv_handle_t *)&reload.tick))
            uv_timer_start(&reload.tick, on_tick, TICK_MS, TICK_MS);
    }
    /* one built at a time: the others are told (generations retiring hold
     * nothing up) */
    for (asker *a; (a = dequeue());) {
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
    if (reload.adopting && !round_running(reload.adopting)) published();
    take_requests();
}

static void enqueue(asker *a) {
    pthread_mutex_lock(&reload.lock);
    asker **pp = &reload.queue;
    while (*pp) pp = &(*pp)->next;
    *pp = a;
    pthread_mutex_unlock(&reload.lock);
    uv_async_send(&reload.wake);
}

void reload_init(uv_loop_t *loop, const char *exe_dir, const char *listen_override) {
    reload.loop = loop;
    reload.exe_dir = exe_dir;
    reload.listen_override = listen_override;
    pthread_mutex_init(&reload.lock, NULL);
    uv_async_init(loop, &reload.wake, on_wake);
    uv_timer_init(loop, &reload.tick);
}

void reload_on_signal(void) {
    if (atomic_load(&kernel.draining)) return;
    asker *a = calloc(1, sizeof *a); /* no done: the log is the answer */
    if (a) enqueue(a);
}

int host_reload(mcpg_worker *w, reload_done_fn done, void *arg) {
    if (!w || !done) return MCPG_EINVAL;
    if (atomic_load(&kernel.draining) || !reload.loop) return MCPG_EUNAVAIL;
    asker *a = calloc(1, sizeof *a);
    if (!a) return MCPG_ENOMEM;
    a->w = w;
    a->done = done;
    a->arg = arg;
    enqueue(a);
    return 0;
}

/* Another record after r, whose calls are not over, holds inst too: that
 * one's stop takes it out. */
static bool held_by_later(const retiring *r, const mcpg_instance *inst) {
    for (const retiring *o = r->next; o; o = o->next)
        if (o->phase <= WAIT_CONNS && in_gen(o->gen, inst)) return true;
    return false;
}

/* A loop stops (the gateway stops; the control loop no longer runs) with
 * generations retiring. Those past their calls had what leaves with them
 * worker_stop'ped on every loop already (their round's posts ran before
 * this); for the others, each instance no loop generation keeps is
 * worker_stop'ped here once, by the last record holding it. */
void reload_worker_stopping(mcpg_worker *w) {
    for (const retiring *r = reload.retiring; r; r = r->next) {
        if (r->phase > WAIT_CONNS) continue;
        for (size_t i = r->gen->n_instances; i-- > 0;) {
            mcpg_instance *inst = r->gen->instances[i];
            const mcpg_lifecycle_ops *lc = inst->desc->lifecycle;
            if (!in_gen(w->gen, inst) && !held_by_later(r, inst) && MCPG_HAS(lc, worker_stop))
                lc->worker_stop(inst->state, w);
        }
    }
}

/* The gateway stops, after its loops, its pool and the serving generation:
 * every instance still started in a retiring generation is stopped (once:
 * its started flag). */
void reload_shutdown(void) {
    if (reload.loop) uv_timer_stop(&reload.tick);
    for (retiring *r = reload.retiring; r; r = r->next)
        if (r->gen) generation_stop(r->gen);
}

/* After the workers' calls are freed (a call cut short at the stop still
 * points at its generation): the retiring generations go. */
void reload_free(void) {
    while (reload.retiring) {
        retiring *r = reload.retiring;
        reload.retiring = r->next;
        if (r->gen) generation_free(r->gen);
        retiring_free(r);
    }
    reload.adopting = NULL;
    for (size_t i = 0; i < reload.n_pinned; i++) generation_free(reload.pinned[i]);
    free(reload.pinned);
    reload.pinned = NULL;
    reload.n_pinned = 0;
}
