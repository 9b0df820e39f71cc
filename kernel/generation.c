/* Generations: the immutable pipeline built from one manifest. Instances are
 * created (create), then the whole generation is started (start), serves, and
 * is later stopped and destroyed as a unit. Tool routes (bindings) and the
 * merged tools/list answer are computed once here, not per call. */
#include "kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mcpg_instance *instance_new(decl_instance *d, uint32_t slot) {
    mcpg_instance *inst = calloc(1, sizeof *inst);
    inst->name = strdup(d->name);
    inst->image = d->image;
    inst->desc = d->image->desc;
    inst->config = d->config;
    inst->inline_dispatch = d->inline_dispatch;
    inst->timeout_ms = (uint64_t)d->timeout_ms;
    inst->slot = slot;
    snprintf(inst->stamp, sizeof inst->stamp, "[%s:%s:%s]", kind_name(inst->desc->kind),
             inst->desc->name, inst->name);
    return inst;
}

static int instance_create(mcpg_instance *inst, errlist *errs, const char *file) {
    int rc = inst->desc->lifecycle->create(&HOST, inst, inst->config, &inst->state);
    if (rc) {
        errlist_add(errs, file, inst->name, "instance could not be created: %s",
                    mcpg_strerror(rc));
        inst->state = NULL;
        return -1;
    }
    return 0;
}

static mcpg_instance *find(generation *g, const char *name) {
    for (size_t i = 0; i < g->n_instances; i++)
        if (strcmp(g->instances[i]->name, name) == 0) return g->instances[i];
    return NULL;
}

static bool in_list(char **list, size_t n, const char *s, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0) return true;
    return false;
}

/* Re-emit one tool object with its client-visible name. */
static void emit_tool(mcpg_buf *out, const mcpg_json_span *tool, const char *client_name) {
    mcpg_buf_puts(out, out->data[out->len - 1] == '[' ? "{\"name\":" : ",{\"name\":");
    mcpg_buf_append_json_string(out, client_name, strlen(client_name));
    size_t it = 0;
    mcpg_json_span k, v;
    while (mcpg_json_object_next(tool->p, tool->n, &it, &k, &v) == 1) {
        if (mcpg_json_string_eq(&k, "name", 4)) continue;
        mcpg_buf_append(out, ",\"", 2);
        mcpg_buf_append(out, k.p, k.n);
        mcpg_buf_append(out, "\":", 2);
        if (v.type == MCPG_JSON_STRING) {
            mcpg_buf_append(out, v.p - 1, v.n + 2);
        } else {
            mcpg_buf_append(out, v.p, v.n);
        }
    }
    mcpg_buf_puts(out, "}");
}

typedef struct route_ctx {
    generation *g;
    errlist *errs;
    const char *file;
    mcpg_buf *list;
    size_t cap;
} route_ctx;

static void add_route(route_ctx *rc, const char *where, mcpg_instance *be, const decl_binding *b,
                      const mcpg_json_span *tool) {
    mcpg_json_span name;
    char target[MCPG_NAME_MAX * 4 + 1];
    size_t tlen;
    if (mcpg_json_object_get(tool->p, tool->n, "name", &name) != 1 ||
        mcpg_json_string_decode(&name, target, sizeof target, &tlen) != 0) {
        errlist_add(rc->errs, rc->file, where, "backend \"%s\" lists a tool without a valid name",
                    be->name);
        return;
    }
    if (b && b->n_allow && !in_list(b->allow, b->n_allow, target, tlen)) return;
    if (b && in_list(b->deny, b->n_deny, target, tlen)) return;
    char client[512];
    if (b && b->prefix[0])
        snprintf(client, sizeof client, "%s%s%s", b->prefix, b->separator, target);
    else
        snprintf(client, sizeof client, "%s", target);
    if (!mcpg_name_valid(client, strlen(client))) {
        errlist_add(rc->errs, rc->file, where,
                    "tool \"%s\" would be named \"%s\", which does not match ^[a-zA-Z0-9_-]{1,64}$",
                    target, client);
        return;
    }
    generation *g = rc->g;
    for (size_t i = 0; i < g->n_routes; i++)
        if (strcmp(g->routes[i].client_name, client) == 0) {
            errlist_add(rc->errs, rc->file, where,
                        "tool \"%s\" is offered twice (by \"%s\" and \"%s\"): use a prefix",
                        client, g->routes[i].backend->name, be->name);
            return;
        }
    if (g->n_routes == rc->cap) {
        rc->cap = rc->cap ? rc->cap * 2 : 16;
        g->routes = realloc(g->routes, rc->cap * sizeof *g->routes);
    }
    tool_route *r = &g->routes[g->n_routes++];
    r->client_name = strdup(client);
    r->target = strdup(target);
    r->backend = be;
    emit_tool(rc->list, tool, client);
}

static void bind_backend(route_ctx *rc, const char *where, mcpg_instance *be,
                         const decl_binding *b) {
    const mcpg_backend_ops *ops = be->desc->ops;
    mcpg_buf tools = {0};
    if (ops->list_tools(be->state, &tools) != 0 || !tools.data) {
        errlist_add(rc->errs, rc->file, where, "backend \"%s\" could not list its tools", be->name);
        mcpg_buf_free(&tools);
        return;
    }
    size_t it = 0;
    mcpg_json_span tool;
    int r;
    while ((r = mcpg_json_array_next(tools.data, tools.len, &it, &tool)) == 1)
        if (tool.type == MCPG_JSON_OBJECT) add_route(rc, where, be, b, &tool);
    if (r < 0)
        errlist_add(rc->errs, rc->file, where, "backend \"%s\" listed malformed tools JSON",
                    be->name);
    mcpg_buf_free(&tools);
}

static int cmp_route(const void *a, const void *b) {
    return strcmp(((const tool_route *)a)->client_name, ((const tool_route *)b)->client_name);
}

static void build_routes(generation *g, manifest *m, errlist *errs) {
    mcpg_buf list = {0};
    mcpg_buf_puts(&list, "{\"tools\":[");
    route_ctx rc = {g, errs, m->path, &list, 0};
    if (m->default_bindings) {
        for (size_t i = 0; i < g->n_instances; i++)
            if (g->instances[i]->desc->kind == MCPG_KIND_BACKEND) {
                char where[96];
                snprintf(where, sizeof where, "modules[%zu]", i - 1);
                bind_backend(&rc, where, g->instances[i], NULL);
            }
    }
    for (size_t i = 0; i < m->n_bindings; i++) {
        char where[64];
        snprintf(where, sizeof where, "bindings[%zu]", i);
        mcpg_instance *be = find(g, m->bindings[i].backend);
        if (be) bind_backend(&rc, where, be, &m->bindings[i]);
    }
    mcpg_buf_puts(&list, "]}");
    g->tools_list = list.data;
    g->tools_list_len = list.len;
    if (g->n_routes > 1) qsort(g->routes, g->n_routes, sizeof *g->routes, cmp_route);
}

/* name is (pointer, length) from a client and may hold a NUL: compare bytes
 * with the length as tie-break (the order strcmp sorted the routes in),
 * never read a route's name past its end. */
const tool_route *generation_route(const generation *g, const char *name, size_t len) {
    size_t lo = 0, hi = g->n_routes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *cn = g->routes[mid].client_name;
        size_t cl = strlen(cn);
        int c = memcmp(cn, name, cl < len ? cl : len);
        if (c == 0) c = (cl > len) - (cl < len);
        if (c == 0) return &g->routes[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static void fill_stages(generation *g, manifest *m) {
    for (int s = 0; s < STAGE_COUNT; s++) {
        g->stage[s] = calloc(m->n_stage[s] + 1, sizeof *g->stage[s]);
        for (size_t i = 0; i < m->n_stage[s]; i++)
            g->stage[s][g->n_stage[s]++] = find(g, m->stage[s][i]);
    }
}

generation *generation_build(manifest *m, errlist *errs) {
    static atomic_uint next_id = 1;
    generation *g = calloc(1, sizeof *g);
    g->id = atomic_fetch_add(&next_id, 1);
    g->instances = calloc(m->n_instances + 1, sizeof *g->instances);
    size_t before = errs->count;
    g->transport = instance_new(&m->transport, 0);
    g->instances[g->n_instances++] = g->transport;
    for (size_t i = 0; i < m->n_instances; i++)
        g->instances[g->n_instances++] = instance_new(&m->instances[i], (uint32_t)(i + 1));
    for (size_t i = 0; i < g->n_instances; i++) {
        g->instances[i]->gen = g;
        instance_create(g->instances[i], errs, m->path);
    }
    if (errs->count == before) {
        fill_stages(g, m);
        build_routes(g, m, errs);
    }
    if (errs->count > before) {
        generation_free(g);
        return NULL;
    }
    return g;
}

/* An identity, policy, limits or audit instance that no stage lists never
 * runs: almost always a manifest mistake worth a line at start. */
static bool in_some_stage(const generation *g, const mcpg_instance *inst) {
    for (int s = 0; s < STAGE_COUNT; s++)
        for (size_t i = 0; i < g->n_stage[s]; i++)
            if (g->stage[s][i] == inst) return true;
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
        const mcpg_lifecycle_ops *lc = inst->desc->lifecycle;
        if (MCPG_HAS(lc, start)) {
            int rc = lc->start(inst->state);
            if (rc) {
                klog(MCPG_LOG_ERROR, inst->stamp, "start failed: %s", mcpg_strerror(rc));
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

void generation_free(generation *g) {
    if (!g) return;
    for (size_t i = g->n_instances; i-- > 0;) {
        mcpg_instance *inst = g->instances[i];
        if (inst->state) inst->desc->lifecycle->destroy(inst->state);
        free(inst->name);
        free(inst);
    }
    for (size_t i = 0; i < g->n_routes; i++) {
        free(g->routes[i].client_name);
        free(g->routes[i].target);
    }
    for (int s = 0; s < STAGE_COUNT; s++) free(g->stage[s]);
    free(g->routes);
    free(g->instances);
    free(g->tools_list);
    free(g);
}
