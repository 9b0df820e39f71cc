/* Generations: the immutable pipeline built from one manifest. Instances are
 * created (create), then the generation is started (start), serves, and is
 * later stopped and destroyed. A reload builds the next generation from the
 * new manifest and the one serving: an instance whose module code (the same
 * image), config and dispatch settings did not change is carried over (held
 * by both), every other one is created anew. What the backends offer is
 * merged here (kernel/catalog.c), not per call. */
#include "kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The instance takes the parsed config from the declaration (it outlives
 * the manifest when a reload carries it over) and a use of the image. */
static mcpg_instance *instance_new(decl_instance *d, uint32_t slot) {
    mcpg_instance *inst = calloc(1, sizeof *inst);
    inst->name = strdup(d->name);
    inst->config_json = strdup(d->config_json ? d->config_json : "");
    inst->image = d->image;
    inst->image->users++;
    inst->desc = d->image->desc;
    inst->config = d->config;
    d->config = NULL;
    inst->refs = 1;
    inst->inline_dispatch = d->inline_dispatch;
    inst->timeout_ms = (uint64_t)d->timeout_ms;
    inst->slot = slot;
    snprintf(inst->stamp, sizeof inst->stamp, "[%s:%s:%s]", kind_name(inst->desc->kind),
             inst->desc->name, inst->name);
    return inst;
}

static int instance_create(mcpg_instance *inst, errlist *errs, const manifest *m) {
    int rc = inst->desc->lifecycle->create(&HOST, inst, inst->config, &inst->state);
    if (rc) {
        char key[160];
        manifest_config_key(m, inst->name, key, sizeof key);
        errlist_add(errs, m->path, key, "instance \"%s\" could not be created: %s", inst->name,
                    mcpg_strerror(rc));
        inst->state = NULL;
        return -1;
    }
    return 0;
}

/* The generation whose instances this thread is creating: while create()
 * runs, host->coordinator answers from it, so a module can reach (and check)
 * the coordinator it will serve with. Thread-local: loop threads keep seeing
 * the generation serving until the swap. */
static _Thread_local const generation *building;

const generation *generation_building(void) { return building; }

/* The coordinator first, then the others in manifest order: each create()
 * already finds the gateway's coordinator created. */
static void create_instances(generation *g, errlist *errs, const manifest *m) {
    for (size_t i = 0; i < g->n_instances; i++) {
        mcpg_instance *inst = g->instances[i];
        if (inst->desc->kind != MCPG_KIND_COORDINATOR || g->coordinator) continue;
        if (g->carried[i] || instance_create(inst, errs, m) == 0) g->coordinator = inst;
    }
    building = g;
    for (size_t i = 0; i < g->n_instances; i++)
        if (!g->carried[i] && g->instances[i]->desc->kind != MCPG_KIND_COORDINATOR)
            instance_create(g->instances[i], errs, m);
    building = NULL;
}

static mcpg_instance *find(generation *g, const char *name) {
    for (size_t i = 0; i < g->n_instances; i++)
        if (strcmp(g->instances[i]->name, name) == 0) return g->instances[i];
    return NULL;
}

static void fill_stages(generation *g, manifest *m) {
    for (int s = 0; s < STAGE_COUNT; s++) {
        g->stage[s] = calloc(m->n_stage[s] + 1, sizeof *g->stage[s]);
        for (size_t i = 0; i < m->n_stage[s]; i++)
            g->stage[s][g->n_stage[s]++] = find(g, m->stage[s][i]);
    }
}

int generation_slot_of(const generation *g, const mcpg_instance *inst) {
    for (size_t i = 0; g && i < g->n_instances; i++)
        if (g->instances[i] == inst) return (int)i;
    return -1;
}

/* The last generation holding it lets it go: destroy, then its config and
 * its use of the image (the image goes with its last user). */
static void instance_release(mcpg_instance *inst) {
    if (--inst->refs > 0) return;
    /* its series go first: a scrape must not call a read callback into
     * state that destroy() frees (also when create() failed) */
    metrics_forget(inst);
    if (inst->state) inst->desc->lifecycle->destroy(inst->state);
    if (inst->config) mcpg_config_free(inst->desc->config, inst->config);
    free(inst->config);
    if (--inst->image->users == 0 && image_unload(inst->image)) atomic_fetch_add(&kernel.pinned_images, 1);
    free(inst->name);
    free(inst->config_json);
    free(inst);
}

/* The serving generation's instance that d describes unchanged, or NULL. */
static mcpg_instance *unchanged(const generation *old, const decl_instance *d) {
    for (size_t i = 0; old && i < old->n_instances; i++) {
        mcpg_instance *inst = old->instances[i];
        if (strcmp(inst->name, d->name) == 0 && inst->image == d->image &&
            strcmp(inst->config_json, d->config_json ? d->config_json : "") == 0 &&
            inst->inline_dispatch == d->inline_dispatch &&
            inst->timeout_ms == (uint64_t)d->timeout_ms && inst->state)
            return inst;
    }
    return NULL;
}

static mcpg_instance *take(generation *g, const generation *old, decl_instance *d,
                           uint32_t slot) {
    mcpg_instance *inst = unchanged(old, d);
    if (inst) {
        inst->refs++;
        g->carried[g->n_instances] = true;
        return inst;
    }
    return instance_new(d, slot);
}

/* gateway.pins.file, read at each build (a reload reads it again). */
static void load_pins(generation *g, manifest *m, errlist *errs) {
    if (!m->pins_file) return;
    char why[512];
    g->pins = pins_load(m->pins_file, why, sizeof why);
    if (!g->pins) errlist_add(errs, m->path, "gateway.pins.file", "%s: %s", m->pins_file, why);
}

generation *generation_build_from(manifest *m, const generation *old, errlist *errs) {
    static atomic_uint next_id = 1;
    generation *g = calloc(1, sizeof *g);
    g->id = atomic_fetch_add(&next_id, 1);
    g->m = m;
    m->refs++; /* the generation's: list rebuilds read its bindings */
    g->instances = calloc(m->n_instances + 1, sizeof *g->instances);
    g->carried = calloc(m->n_instances + 1, sizeof *g->carried);
    size_t before = errs->count;
    g->transport = take(g, old, &m->transport, 0);
    g->instances[g->n_instances++] = g->transport;
    for (size_t i = 0; i < m->n_instances; i++) {
        mcpg_instance *inst = take(g, old, &m->instances[i], (uint32_t)(i + 1));
        g->instances[g->n_instances++] = inst;
    }
    for (size_t i = 0; i < g->n_instances; i++) {
        g->instances[i]->gen = g;
        if (g->instances[i]->desc->kind == MCPG_KIND_METRICS) g->metrics = g->instances[i];
        if (g->instances[i]->desc->kind == MCPG_KIND_EVENTS) g->events.backend = g->instances[i];
    }
    g->events.client_name = g->events.target = (char *)"";
    create_instances(g, errs, m);
    if (errs->count == before) load_pins(g, m, errs);
    if (errs->count == before) {
        fill_stages(g, m);
        servers_fill(g, m);
        trace_policy_load(g);
        catalog_build(g, m, errs);
    }
    if (errs->count > before) {
        generation_free(g);
        return NULL;
    }
    return g;
}

generation *generation_build(manifest *m, errlist *errs) {
    return generation_build_from(m, NULL, errs);
}

/* An identity, policy, limits or audit instance that no stage lists never
 * runs: almost always a manifest mistake worth a line at start. */
static bool in_some_stage(const generation *g, const mcpg_instance *inst) {
    for (uint32_t v = 0; v < g->n_servers; v++)
        for (int s = 0; s < STAGE_COUNT; s++)
            for (size_t i = 0; i < g->servers[v].n_stage[s]; i++)
                if (g->servers[v].stage[s][i] == inst) return true;
    return false;
}

static void log_started(const generation *g, const mcpg_instance *inst) {
    const mcpg_module *d = inst->desc;
    klog(MCPG_LOG_INFO, inst->stamp, "started: %s %s (build %s), loaded from %s as %s", d->name,
         d->version ? d->version : "?", d->build_id ? d->build_id : "?", inst->image->src_path,
         inst->image->run_path);
    uint32_t k = d->kind;
    if ((k == MCPG_KIND_IDENTITY || k == MCPG_KIND_POLICY || k == MCPG_KIND_LIMITS ||
         k == MCPG_KIND_AUDIT) && !in_some_stage(g, inst))
        klog(MCPG_LOG_WARN, inst->stamp, "no pipeline stage lists this instance: it will not run");
}

int generation_start(generation *g) {
    for (size_t i = 0; i < g->n_instances; i++) {
        mcpg_instance *inst = g->instances[i];
        if (inst->started) continue; /* carried over: it serves already */
        const mcpg_lifecycle_ops *lc = inst->desc->lifecycle;
        if (MCPG_HAS(lc, start)) {
            int rc = lc->start(inst->state);
            if (rc) {
                klog(MCPG_LOG_ERROR, inst->stamp, "start failed: %s", mcpg_strerror(rc));
                g->failed = inst->name;
                g->failed_rc = rc;
                return rc;
            }
        }
        inst->started = true;
        log_started(g, inst);
    }
    return 0;
}

/* Stop in reverse order: backends and audit sinks before the transport that
 * fed them. */
void generation_stop_kind(generation *g, uint32_t kind) {
    for (size_t i = g->n_instances; i-- > 0;) {
        mcpg_instance *inst = g->instances[i];
        if (!inst->started || (kind && inst->desc->kind != kind)) continue;
        const mcpg_lifecycle_ops *lc = inst->desc->lifecycle;
        if (MCPG_HAS(lc, stop)) lc->stop(inst->state);
        inst->started = false;
        instance_timers_cancel(inst);
    }
}

void generation_stop(generation *g) { generation_stop_kind(g, 0); }

void generation_stop_fresh(generation *g) {
    for (size_t i = g->n_instances; i-- > 0;) {
        mcpg_instance *inst = g->instances[i];
        if (g->carried[i] || !inst->started) continue;
        const mcpg_lifecycle_ops *lc = inst->desc->lifecycle;
        if (MCPG_HAS(lc, stop)) lc->stop(inst->state);
        inst->started = false;
        instance_timers_cancel(inst);
    }
}

void generation_free(generation *g) {
    if (!g) return;
    catalog_free(g); /* routes point at instances: first */
    pins_free(g->pins);
    for (size_t i = g->n_instances; i-- > 0;) instance_release(g->instances[i]);
    servers_free(g); /* its servers point into the manifest: before it */
    manifest_free(g->m);
    free(g->carried);
    for (int s = 0; s < STAGE_COUNT; s++) free(g->stage[s]);
    free(g->instances);
    free(g);
}

/* HOST of "HOST:PORT" is a loopback name or address. */
static bool loopback_host(const char *hostport) {
    const char *colon = strrchr(hostport, ':');
    size_t n = colon ? (size_t)(colon - hostport) : strlen(hostport);
    return (n >= 4 && strncmp(hostport, "127.", 4) == 0) ||
           (n == 9 && strncmp(hostport, "localhost", 9) == 0) ||
           (n == 5 && strncmp(hostport, "[::1]", 5) == 0);
}

void generation_warn_open(const generation *g, char **listen, size_t n_listen) {
    bool everywhere = g->n_stage[STAGE_IDENTITY] > 0;
    for (uint32_t v = 1; v < g->n_servers; v++)
        everywhere = everywhere && g->servers[v].n_stage[STAGE_IDENTITY] > 0;
    if (everywhere) return;
    for (size_t i = 0; i < n_listen; i++) {
        if (loopback_host(listen[i])) continue;
        char key[64];
        snprintf(key, sizeof key, "gateway.listen[%zu]", i);
        klog_at(MCPG_LOG_WARN, "kernel", key,
                "WARNING: listening on %s beyond loopback with no identity stage: anyone who can "
                "reach it may call every tool (add identity modules to pipeline.identity)",
                listen[i]);
    }
}
