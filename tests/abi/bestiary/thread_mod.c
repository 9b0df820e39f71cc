/* A well-behaved backend with a thread of its own (MCPG_MOD_OWNS_THREADS):
 * start() starts a thread named "abi-thread-mod" that counts, stop() joins
 * it and logs "thread joined after N counts". A reload that replaces it must
 * stop (join) the old one before its image is unmapped. Tool "thread_count"
 * answers "variant=V tag=T count=N": V is the build (FIXTURE_VARIANT, so a
 * test can swap the file for one with other content), T the config's tag. */
#define _GNU_SOURCE
#include "beast.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#ifndef FIXTURE_VARIANT
#define FIXTURE_VARIANT 1
#endif

typedef struct th_cfg {
    int64_t tag;
} th_cfg;

static const mcpg_config_field th_config[] = {
    MCPG_CFG_INT_FIELD(th_cfg, tag, "tag", "1", 0, 1000000,
                       "echoed by thread_count: a changed tag makes a new instance"),
    MCPG_CONFIG_END};

typedef struct th_state {
    const mcpg_host *host;
    mcpg_instance *self;
    const th_cfg *cfg;
    pthread_t thread;
    bool running;
    atomic_bool quit;
    atomic_ulong count;
} th_state;

static int th_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **instance_out) {
    th_state *s = host->calloc(1, sizeof *s);
    if (!s) return MCPG_ENOMEM;
    s->host = host;
    s->self = self;
    s->cfg = config;
    *instance_out = s;
    return 0;
}

static void th_destroy(void *instance) {
    th_state *s = instance;
    s->host->free(s);
}

static void *th_count(void *arg) {
    th_state *s = arg;
    const struct timespec pause = {.tv_sec = 0, .tv_nsec = 5 * 1000 * 1000};
    while (!atomic_load(&s->quit)) {
        atomic_fetch_add(&s->count, 1);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static int th_start(void *instance) {
    th_state *s = instance;
    if (pthread_create(&s->thread, NULL, th_count, s) != 0) return MCPG_EAGAIN;
    pthread_setname_np(s->thread, "abi-thread-mod");
    s->running = true;
    return 0;
}

static void th_stop(void *instance) {
    th_state *s = instance;
    if (!s->running) return;
    atomic_store(&s->quit, true);
    pthread_join(s->thread, NULL);
    s->running = false;
    s->host->log(s->self, MCPG_LOG_INFO, "thread joined after %lu counts",
                 (unsigned long)atomic_load(&s->count));
}

static const mcpg_lifecycle_ops th_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .create = th_create,
    .start = th_start,
    .stop = th_stop,
    .destroy = th_destroy,
};

static int th_list_tools(void *instance, mcpg_buf *out) {
    th_state *s = instance;
    return beast_list_one(s->host, out, "thread_count");
}

static mcpg_status th_call_tool(void *instance, mcpg_call *call) {
    th_state *s = instance;
    char text[96];
    snprintf(text, sizeof text, "variant=%d tag=%lld count=%lu", FIXTURE_VARIANT,
             (long long)s->cfg->tag, (unsigned long)atomic_load(&s->count));
    return beast_answer(s->host, call, "thread_count", text);
}

static const mcpg_backend_ops th_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = th_list_tools,
    .call_tool = th_call_tool,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "abi_thread_mod", "0.0.1",
                   .description = "ABI test fixture: a counting thread, joined in stop",
                   .flags = MCPG_MOD_INLINE_SAFE | MCPG_MOD_OWNS_THREADS,
                   .config = th_config, .config_size = sizeof(th_cfg),
                   .lifecycle = &th_lifecycle,
                   .ops = &th_ops)
