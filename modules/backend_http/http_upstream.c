/* backend_http: upstreams and their per-loop pools (see http_upstream.h). */
#define _GNU_SOURCE
#include "http_upstream.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct loop_pool {
    void *loop;
    size_t upstream;
    up_pool *pool;
    struct loop_pool *next;
} loop_pool;

struct http_upstreams {
    up_target **targets;
    size_t n;
    unsigned max_conns;
    pthread_mutex_t lock; /* guards the list; a pool is its loop's alone */
    loop_pool *pools;
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
    pthread_mutex_init(&u->lock, NULL);
    u->max_conns = max_conns;
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
    pthread_mutex_lock(&u->lock);
    loop_pool *lp = u->pools;
    while (lp && !(lp->loop == loop && lp->upstream == i)) lp = lp->next;
    if (!lp && (lp = calloc(1, sizeof *lp))) {
        unsigned idle = u->max_conns < HTTP_IDLE_MAX ? u->max_conns : HTTP_IDLE_MAX;
        lp->pool = up_pool_new(loop, u->targets[i], u->max_conns, idle, HTTP_QUEUE_MAX);
        if (lp->pool) {
            *lp = (loop_pool){loop, i, lp->pool, u->pools};
            u->pools = lp;
        } else {
            free(lp);
            lp = NULL;
        }
    }
    pthread_mutex_unlock(&u->lock);
    return lp ? lp->pool : NULL;
}

const char *http_upstream_authority(const http_upstreams *u, size_t i) {
    return up_target_authority(u->targets[i]);
}

void http_upstreams_worker_stop(http_upstreams *u, void *loop) {
    pthread_mutex_lock(&u->lock);
    loop_pool **pp = &u->pools, *mine = NULL;
    while (*pp) {
        loop_pool *lp = *pp;
        if (lp->loop == loop) {
            *pp = lp->next;
            lp->next = mine;
            mine = lp;
        } else {
            pp = &lp->next;
        }
    }
    pthread_mutex_unlock(&u->lock);
    while (mine) { /* outside the lock: the calls they end answer now */
        loop_pool *lp = mine;
        mine = lp->next;
        up_pool_close(lp->pool);
        free(lp);
    }
}

void http_upstreams_free(http_upstreams *u) {
    if (!u) return;
    while (u->pools) { /* a loop that never stopped: its handles are its own */
        loop_pool *lp = u->pools;
        u->pools = lp->next;
        free(lp);
    }
    for (size_t i = 0; i < u->n; i++) up_target_free(u->targets[i]);
    free(u->targets);
    pthread_mutex_destroy(&u->lock);
    free(u);
}
