/* Readiness: a gateway is ready to take calls once every backend's first
 * lists are in the merged lists, so that the first tools/call a load
 * balancer sends finds its tool.
 *
 * A backend whose lists come later (an upstream MCP server:
 * MCPG_MOD_DYNAMIC_LISTS) answers its list ops MCPG_EAGAIN until its
 * upstream has answered them; the catalog build notes it in the merged
 * lists it builds (catset.unlisted), and the rebuild that follows its
 * lists_changed finds its lists. Reading the published set, not a flag of
 * the backend's, keeps "ready" true to what calls are routed by: a reload's
 * new generation waits for its own new upstreams the same way.
 *
 * GET /readyz asks host_backends_waiting on its loop. A backend that may
 * come later says so in its module entry ("wait_for_lists": false). One that
 * never answers would keep the gateway out of its load balancer without a
 * word: the control thread looks once a second and logs each backend still
 * without its first lists after 5 s, then again each time that wait has
 * doubled (at most every 5 minutes), and once more when they come.
 *
 * Under a service manager (NOTIFY_SOCKET), the first moment /readyz would
 * answer 200 is the moment it hears READY=1: checked on the control loop's
 * first turn, after each rebuild of the merged lists, and on each tick. */
#include "kernel.h"
#include "sd_notify.h"

#include <string.h>

#define READY_TICK_MS 1000
#define FIRST_WARN_MS 5000
#define MAX_WARN_GAP_MS 300000

/* The manifest entry that made the instance: by name, since a carried-over
 * instance's slot is its first manifest's. */
static const decl_instance *entry_of(const generation *g, const mcpg_instance *inst) {
    for (size_t i = 0; g->m && i < g->m->n_instances; i++)
        if (strcmp(g->m->instances[i].name, inst->name) == 0) return &g->m->instances[i];
    return NULL;
}

static bool ready_waits_for(const generation *g, const mcpg_instance *inst) {
    const decl_instance *d = entry_of(g, inst);
    return !d || !d->lists_later;
}

int host_backends_waiting(mcpg_worker *w, mcpg_buf *out) {
    generation *g = w && w->gen ? w->gen : kernel.gen;
    catset *cs = g ? catalog_acquire(g) : NULL;
    int n = 0, rc = mcpg_buf_puts(out, "[");
    for (size_t i = 0; cs && i < g->n_instances; i++) {
        const mcpg_instance *inst = g->instances[i];
        if (!cs->unlisted[i] || !ready_waits_for(g, inst)) continue;
        if (n++) rc |= mcpg_buf_puts(out, ",");
        rc |= mcpg_buf_append_json_string(out, inst->name, strlen(inst->name));
    }
    catalog_release(cs);
    rc |= mcpg_buf_puts(out, "]");
    return rc ? MCPG_ENOMEM : n;
}

/* ---- the log, on the control thread ---- */

static void say_still_unlisted(const generation *g, mcpg_instance *inst, uint64_t waited_ms) {
    if (ready_waits_for(g, inst))
        klog(MCPG_LOG_WARN, inst->stamp, "no first lists after %llu s (its upstream has not "
             "answered them): GET /readyz answers 503 naming it until they come; "
             "\"wait_for_lists\": false in its module entry lets it come later",
             (unsigned long long)(waited_ms / 1000));
    else
        klog(MCPG_LOG_WARN, inst->stamp, "no first lists after %llu s (its upstream has not "
             "answered them): none of its tools is served yet (GET /readyz does not wait for "
             "it: \"wait_for_lists\": false)", (unsigned long long)(waited_ms / 1000));
}

static void watch_unlisted(const generation *g, mcpg_instance *inst, bool unlisted, uint64_t now) {
    if (!unlisted) {
        if (inst->unlisted_warned)
            klog(MCPG_LOG_INFO, inst->stamp, "its first lists are in, after %.1f s",
                 (double)(now - inst->unlisted_since_ms) / 1000.0);
        inst->unlisted_since_ms = 0;
        inst->unlisted_warned = false;
        return;
    }
    if (!inst->unlisted_since_ms) {
        inst->unlisted_since_ms = now;
        inst->unlisted_log_ms = now + FIRST_WARN_MS;
        return;
    }
    if (now < inst->unlisted_log_ms) return;
    uint64_t waited = now - inst->unlisted_since_ms;
    say_still_unlisted(g, inst, waited);
    inst->unlisted_warned = true;
    inst->unlisted_log_ms = now + (waited < MAX_WARN_GAP_MS ? waited : MAX_WARN_GAP_MS);
}

/* ---- the service manager ---- */

void ready_tell_manager(void) {
    generation *g = kernel.gen;
    if (sd_notify_told_ready() || atomic_load(&kernel.draining) || !g) return;
    mcpg_buf waiting = {0};
    int n = host_backends_waiting(NULL, &waiting);
    if (n == 0)
        sd_notify_ready("serving on %s://%s/mcp (generation %u)", manifest_scheme(kernel.m),
                        kernel.m->n_listen ? kernel.m->listen[0] : "?", g->id);
    else if (n > 0)
        sd_notify_status("starting: waiting for the first lists of %.*s", (int)waiting.len,
                         waiting.data);
    mcpg_buf_free(&waiting);
}

/* The lists are pinned and instances read on the control thread, where
 * rebuilds and reloads run: nothing here races them. */
static void on_ready_tick(uv_timer_t *t) {
    (void)t;
    generation *g = kernel.gen;
    catset *cs = g ? catalog_acquire(g) : NULL;
    uint64_t now = mono_us() / 1000;
    for (size_t i = 0; cs && i < g->n_instances; i++)
        watch_unlisted(g, g->instances[i], cs->unlisted[i], now);
    catalog_release(cs);
    ready_tell_manager();
    sd_notify_watchdog(now * 1000);
}

static uv_timer_t ready_timer;

void ready_control_init(uv_loop_t *loop) {
    uv_timer_init(loop, &ready_timer);
    uv_timer_start(&ready_timer, on_ready_tick, 0, READY_TICK_MS); /* the first: as the loop starts */
}
