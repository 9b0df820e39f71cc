/* A fixture audit sink for the kernel's defect tests. `mode`:
 *   deny_silent  answers DENY without setting an error (a bug)
 *   block        blocks delay_ms on the loop for outcome events, then CONTINUE
 *   async        answers PENDING for outcome events; a thread of its own
 *                writes durable_us= to `path` after delay_ms, then resumes
 *   twice        answers PENDING for outcome events; a thread of its own
 *                resumes at once, then again after delay_ms (a bug: the
 *                extra resume must finish nobody's op)
 * "allowed" events pass at once in block, async and twice modes. */
#include <mcpg/sdk.h>

#include "fx_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct sink_cfg {
    const char *mode;
    int64_t delay_ms;
    const char *path;
} sink_cfg;

static const mcpg_config_field sink_config[] = {
    MCPG_CFG_ENUM_FIELD(sink_cfg, mode, "mode", "\"block\"", "deny_silent|block|async|twice",
                        "how to misbehave"),
    MCPG_CFG_INT_FIELD(sink_cfg, delay_ms, "delay_ms", "0", 0, 10000, "how long"),
    MCPG_CFG_STRING_FIELD(sink_cfg, path, "path", NULL, "file for durable_us="),
    MCPG_CONFIG_END};

typedef struct sink {
    const mcpg_host *host;
    const sink_cfg *cfg;
} sink;

static int sink_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    (void)self;
    sink *s = host->calloc(1, sizeof *s);
    if (!s) return MCPG_ENOMEM;
    s->host = host;
    s->cfg = cfg;
    *out = s;
    return 0;
}

static void sink_destroy(void *inst) {
    sink *s = inst;
    s->host->free(s);
}

typedef struct later {
    sink *s;
    mcpg_call *call;
} later;

static void *durable_later(void *arg) {
    later l = *(later *)arg;
    free(arg);
    fx_nap_ms(l.s->cfg->delay_ms);
    FILE *f = l.s->cfg->path ? fopen(l.s->cfg->path, "a") : NULL;
    if (f) {
        fprintf(f, "durable_us=%llu\n", (unsigned long long)l.s->host->mono_us());
        fclose(f);
    }
    l.s->host->call_resume(l.call, MCPG_CONTINUE);
    return NULL;
}

static void *resume_twice(void *arg) {
    later l = *(later *)arg;
    free(arg);
    l.s->host->call_resume(l.call, MCPG_CONTINUE);
    fx_nap_ms(l.s->cfg->delay_ms);
    l.s->host->call_resume(l.call, MCPG_CONTINUE);
    return NULL;
}

static mcpg_status later_resume(sink *s, mcpg_call *call, void *(*resumer)(void *)) {
    later *l = malloc(sizeof *l);
    if (!l) return MCPG_DENY;
    *l = (later){s, call};
    if (fx_detached(resumer, l) != 0) {
        free(l);
        return MCPG_DENY;
    }
    return MCPG_PENDING;
}

static mcpg_status sink_emit(void *inst, mcpg_call *call, const mcpg_audit_event *ev) {
    sink *s = inst;
    if (strcmp(s->cfg->mode, "deny_silent") == 0) return MCPG_DENY;
    if (strstr(ev->name, ".allowed")) return MCPG_CONTINUE;
    if (strcmp(s->cfg->mode, "block") == 0) {
        fx_nap_ms(s->cfg->delay_ms);
        return MCPG_CONTINUE;
    }
    return later_resume(s, call, strcmp(s->cfg->mode, "twice") == 0 ? resume_twice
                                                                    : durable_later);
}

static const mcpg_lifecycle_ops sink_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                  .create = sink_create,
                                                  .destroy = sink_destroy};
static const mcpg_audit_ops sink_ops = {MCPG_OPS_HEAD(mcpg_audit_ops), .emit = sink_emit};

MCPG_MODULE_DEFINE(MCPG_KIND_AUDIT, "fx_sink", "1.0.0",
                   .description = "kernel test fixture: misbehaving audit sinks",
                   .config = sink_config, .config_size = sizeof(sink_cfg),
                   .lifecycle = &sink_lifecycle, .ops = &sink_ops)
