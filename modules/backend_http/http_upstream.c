/* backend_http: upstreams and their per-loop pools (see http_upstream.h). */
#define _GNU_SOURCE
#include "http_upstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct http_upstreams {
    up_target **targets;
    size_t n;
    unsigned max_conns;
    up_loops *pools;
};

static void check_file(mcpg_config_problems *c, const char *key, const char *path) {
    FILE *f = path ? fopen(path, "r") : NULL;
    if (f) fclose(f);
    else if (path) mcpg_config_problem(c, key, "cannot read %s: %s", path, strerror(errno));
}

void http_tls_check(mcpg_config_problems *c, const http_tls_cfg *tls) {
    check_file(c, "ca_file", tls->ca_file);
    check_file(c, "cert_file", tls->cert_file);
    check_file(c, "key_file", tls->key_file);
    if (!tls->cert_file != !tls->key_file)
        mcpg_config_problem(c, tls->cert_file ? "key_file" : "cert_file",
                            "is required with %s (a client certificate needs both)",
                            tls->cert_file ? "cert_file" : "key_file");
}

/* connect (TLS included) may take as long as the slowest of its tools allows */
static uint64_t connect_timeout(const http_tool_set *set, const char *origin) {
    int64_t ms = 0;
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->tools[i].origin, origin) == 0 && set->tools[i].timeout_ms > ms)
            ms = set->tools[i].timeout_ms;
    return (uint64_t)ms;
}

static size_t find_or_add(http_upstreams *u, mcpg_config_problems *c, const http_tool_set *set,
                          size_t ti, const up_tls_opts *o) {
    const http_tool *t = &set->tools[ti];
    for (size_t j = 0; j < ti; j++)
        if (strcmp(set->tools[j].origin, t->origin) == 0) return set->tools[j].upstream;
    char err[512], path[48];
    up_target *tg = up_target_new(t->origin, o, connect_timeout(set, t->origin), err, sizeof err);
    if (!tg) {
        snprintf(path, sizeof path, "tools[%zu].url", ti);
        mcpg_config_problem(c, path, "%s", err);
        return (size_t)-1;
    }
    u->targets[u->n] = tg;
    return u->n++;
}

http_upstreams *http_upstreams_new(mcpg_config_problems *c, http_tool_set *set,
                                   const http_tls_cfg *tls, unsigned max_conns) {
    http_upstreams *u = calloc(1, sizeof *u);
    if (u) u->targets = calloc(set->n, sizeof *u->targets);
    if (!u || !u->targets) {
        free(u);
        mcpg_config_problem(c, "tools", "out of memory");
        return NULL;
    }
    u->max_conns = max_conns;
    if (!(u->pools = up_loops_new())) {
        http_upstreams_free(u);
        mcpg_config_problem(c, "tools", "out of memory");
        return NULL;
    }
    up_tls_opts o = {.insecure = tls->insecure, .ca_file = tls->ca_file,
                     .cert_file = tls->cert_file, .key_file = tls->key_file};
    int bad = 0;
    for (size_t i = 0; i < set->n; i++) {
        set->tools[i].upstream = find_or_add(u, c, set, i, &o);
        bad |= set->tools[i].upstream == (size_t)-1;
    }
    if (bad) {
        http_upstreams_free(u);
        return NULL;
    }
    return u;
}

up_pool *http_upstreams_pool(http_upstreams *u, void *loop, size_t i) {
    unsigned idle = u->max_conns < HTTP_IDLE_MAX ? u->max_conns : HTTP_IDLE_MAX;
    return up_loops_pool(u->pools, loop, i, u->targets[i], u->max_conns, idle, HTTP_QUEUE_MAX);
}

const char *http_upstream_authority(const http_upstreams *u, size_t i) {
    return up_target_authority(u->targets[i]);
}

void http_upstreams_worker_stop(http_upstreams *u, void *loop) { up_loops_stop(u->pools, loop); }

void http_upstreams_free(http_upstreams *u) {
    if (!u) return;
    up_loops_free(u->pools);
    for (size_t i = 0; i < u->n; i++) up_target_free(u->targets[i]);
    free(u->targets);
    free(u);
}
