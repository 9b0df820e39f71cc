/* Virtual servers: one gateway serving several MCP endpoints, each with its
 * own bindings (so its own merged lists and names) and its own pipeline.
 * The gateway's own /mcp is server 0 of every generation, built from the
 * manifest's top level exactly as without servers; the manifest's "servers"
 * follow. Modules are instances the servers share: a backend bound by two
 * servers is one instance with one upstream. A call carries its server's
 * name (mcpg_call_desc.server), resolved in the generation it pins, so a
 * reload that renames or removes a server cannot send a call to another. */
#include "kernel.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static mcpg_instance *instance_named(generation *g, const char *name) {
    for (size_t i = 0; i < g->n_instances; i++)
        if (strcmp(g->instances[i]->name, name) == 0) return g->instances[i];
    return NULL;
}

/* A server's own pipeline, resolved to g's instances. */
static void fill_own_stages(generation *g, gen_server *gs, const decl_server *d) {
    for (int s = 0; s < STAGE_COUNT; s++) {
        gs->stage[s] = calloc(d->n_stage[s] + 1, sizeof *gs->stage[s]);
        for (size_t i = 0; i < d->n_stage[s]; i++)
            gs->stage[s][gs->n_stage[s]++] = instance_named(g, d->stage[s][i]);
    }
}

void servers_fill(generation *g, manifest *m) {
    g->n_servers = (uint32_t)(1 + m->n_servers);
    g->servers = calloc(g->n_servers, sizeof *g->servers);
    gen_server *top = &g->servers[0];
    *top = (gen_server){.name = "", .bindings = m->bindings, .n_bindings = m->n_bindings,
                        .default_bindings = m->default_bindings,
                        .metric_series = METRICS_SERVER_NONE};
    for (int s = 0; s < STAGE_COUNT; s++) top->stage[s] = g->stage[s], top->n_stage[s] = g->n_stage[s];
    for (size_t i = 0; i < m->n_servers; i++) {
        const decl_server *d = &m->servers[i];
        gen_server *gs = &g->servers[i + 1];
        *gs = (gen_server){.name = d->name, .decl = d, .bindings = d->bindings,
                           .n_bindings = d->n_bindings, .default_bindings = d->default_bindings,
                           .metric_series = metrics_server_index(d->name)};
        if (d->own_pipeline) {
            fill_own_stages(g, gs, d);
        } else { /* the top level's: borrowed, not freed with the server */
            memcpy(gs->stage, top->stage, sizeof gs->stage);
            memcpy(gs->n_stage, top->n_stage, sizeof gs->n_stage);
        }
    }
}

void servers_free(generation *g) {
    for (uint32_t i = 1; i < g->n_servers; i++)
        if (g->servers[i].decl->own_pipeline)
            for (int s = 0; s < STAGE_COUNT; s++) free(g->servers[i].stage[s]);
    free(g->servers);
    g->servers = NULL;
    g->n_servers = 0;
}

const gen_server *server_named(const generation *g, const char *name, size_t n, uint32_t *index) {
    if (!name || !n) {
        if (index) *index = 0;
        return g->n_servers ? &g->servers[0] : NULL;
    }
    for (uint32_t i = 1; i < g->n_servers; i++) {
        const char *s = g->servers[i].name;
        if (strlen(s) == n && memcmp(s, name, n) == 0) {
            if (index) *index = i;
            return &g->servers[i];
        }
    }
    return NULL;
}

bool server_binds(const gen_server *s, const mcpg_instance *backend) {
    if (s->default_bindings) return true;
    for (size_t i = 0; i < s->n_bindings; i++)
        if (strcmp(s->bindings[i].backend, backend->name) == 0) return true;
    return false;
}

static bool host_matches(const decl_server *d, const char *host, size_t hn) {
    if (!d->host) return true;
    size_t n = host ? mcpg_host_name_len(host, hn) : 0;
    return n && strlen(d->host) == n && strncasecmp(d->host, host, n) == 0;
}

/* A server with its own host name wins over one at the same path for any
 * host: the manifest may declare them in either order. */
int host_server_find(mcpg_worker *w, const char *path, size_t n, const char *host, size_t hn,
                     mcpg_server_view *out) {
    const generation *g = w ? w->gen : NULL;
    if (!g || !path || !out || out->size < sizeof(uint32_t)) return MCPG_EINVAL;
    const decl_server *found = NULL;
    for (uint32_t i = 1; i < g->n_servers; i++) {
        const decl_server *d = g->servers[i].decl;
        if (strlen(d->path) != n || memcmp(d->path, path, n) != 0 || !host_matches(d, host, hn))
            continue;
        if (!found || (d->host && !found->host)) found = d;
    }
    if (!found) return MCPG_ENOENT;
    mcpg_server_view v = {.size = sizeof v, .name = found->name, .path = found->path,
                          .host = found->host, .info_json = found->info_json,
                          .instructions = found->instructions};
    uint32_t size = out->size < sizeof v ? out->size : (uint32_t)sizeof v;
    memcpy(out, &v, size);
    out->size = size;
    return 0;
}
