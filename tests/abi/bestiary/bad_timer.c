/* A buggy backend: worker_start starts a repeating host timer on each loop
 * and nothing ever stops it (no worker_stop, no stop). A reload that retires
 * it must find the timer still live after stop(), keep its image mapped
 * (code may still run in it) and serve on. Tool "timer_ticks" answers
 * "ticks=N", N counted by the timers on every loop. */
#include "beast.h"

#include <stdatomic.h>
#include <stdio.h>

typedef struct bt_cfg {
    int64_t period_ms;
} bt_cfg;

static const mcpg_config_field bt_config[] = {
    MCPG_CFG_INT_FIELD(bt_cfg, period_ms, "period_ms", "20", 1, 1000,
                       "how often the (never stopped) timer fires"),
    MCPG_CONFIG_END};

typedef struct bt_state {
    const mcpg_host *host;
    mcpg_instance *self;
    const bt_cfg *cfg;
    atomic_ulong ticks;
} bt_state;

static int bt_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **instance_out) {
    bt_state *s = host->calloc(1, sizeof *s);
    if (!s) return MCPG_ENOMEM;
    s->host = host;
    s->self = self;
    s->cfg = config;
    *instance_out = s;
    return 0;
}

static void bt_destroy(void *instance) {
    bt_state *s = instance;
    s->host->free(s);
}

static void bt_tick(void *arg) {
    bt_state *s = arg;
    atomic_fetch_add(&s->ticks, 1);
}

/* The bug: the timer is not even remembered, so nothing can stop it. */
static void bt_worker_start(void *instance, mcpg_worker *w) {
    bt_state *s = instance;
    uint64_t ms = (uint64_t)s->cfg->period_ms;
    int rc = s->host->timer_start(s->self, w, ms, ms, bt_tick, s, NULL);
    if (rc) s->host->log(s->self, MCPG_LOG_ERROR, "timer_start: %s", s->host->strerror(rc));
}

static const mcpg_lifecycle_ops bt_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .create = bt_create,
    .destroy = bt_destroy,
    .worker_start = bt_worker_start,
};

static int bt_list_tools(void *instance, mcpg_buf *out) {
    bt_state *s = instance;
    return beast_list_one(s->host, out, "timer_ticks");
}

static mcpg_status bt_call_tool(void *instance, mcpg_call *call) {
    bt_state *s = instance;
    char text[64];
    snprintf(text, sizeof text, "ticks=%lu", (unsigned long)atomic_load(&s->ticks));
    return beast_answer(s->host, call, "timer_ticks", text);
}

static const mcpg_backend_ops bt_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = bt_list_tools,
    .call_tool = bt_call_tool,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "abi_bad_timer", "0.0.1",
                   .description = "ABI test fixture: leaves a repeating timer running",
                   .flags = MCPG_MOD_INLINE_SAFE,
                   .config = bt_config, .config_size = sizeof(bt_cfg),
                   .lifecycle = &bt_lifecycle,
                   .ops = &bt_ops)
