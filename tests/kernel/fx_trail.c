/* A fixture audit sink that writes every ABI 1.2 field of each event, one
 * line of key=value pairs per event, to `path`: what the kernel hands
 * sinks, before any sink's own formatting. */
#include <mcpg/sdk.h>

#include <pthread.h>
#include <stdio.h>

typedef struct trail_cfg { const char *path; } trail_cfg;

static const mcpg_config_field trail_config[] = {
    MCPG_CFG_STRING_FIELD(trail_cfg, path, "path", NULL, "file to append to"), MCPG_CONFIG_END};

typedef struct trail {
    const mcpg_host *host;
    FILE *f;
    pthread_mutex_t lock;
} trail;

static int trail_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    (void)self;
    const trail_cfg *c = cfg;
    trail *t = host->calloc(1, sizeof *t);
    if (!t) return MCPG_ENOMEM;
    t->host = host;
    t->f = c->path ? fopen(c->path, "a") : NULL;
    pthread_mutex_init(&t->lock, NULL);
    *out = t;
    return t->f ? 0 : MCPG_EIO;
}

static void trail_destroy(void *inst) {
    trail *t = inst;
    if (t->f) fclose(t->f);
    pthread_mutex_destroy(&t->lock);
    t->host->free(t);
}

#define S(x) ((x) ? (x) : "-")

static mcpg_status trail_emit(void *inst, mcpg_call *call, const mcpg_audit_event *ev) {
    (void)call;
    trail *t = inst;
    if (!MCPG_HAS_FIELD(ev, gateway_id)) return MCPG_CONTINUE;
    pthread_mutex_lock(&t->lock);
    fprintf(t->f,
            "event=%s id=%.*s method=%s tool=%s principal=%s roles=%s auth=%s peer=%s "
            "denied_stage=%s denied_by=%s traceparent=%s gateway_id=%s args=%.*s result=%.*s\n",
            ev->name, (int)ev->id_len, ev->id_json, S(ev->method), S(ev->tool), S(ev->principal),
            S(ev->roles_json), S(ev->auth_method), S(ev->peer), S(ev->denied_stage),
            S(ev->denied_by), S(ev->traceparent), S(ev->gateway_id),
            ev->args_json ? (int)ev->args_len : 1, ev->args_json ? ev->args_json : "-",
            ev->result_json ? (int)ev->result_len : 1, ev->result_json ? ev->result_json : "-");
    fflush(t->f);
    pthread_mutex_unlock(&t->lock);
    return MCPG_CONTINUE;
}

static const mcpg_lifecycle_ops trail_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                   .create = trail_create,
                                                   .destroy = trail_destroy};
static const mcpg_audit_ops trail_ops = {MCPG_OPS_HEAD(mcpg_audit_ops), .emit = trail_emit};

MCPG_MODULE_DEFINE(MCPG_KIND_AUDIT, "fx_trail", "1.0.0",
                   .description = "kernel test fixture: every audit event field, as given",
                   .config = trail_config, .config_size = sizeof(trail_cfg),
                   .lifecycle = &trail_lifecycle, .ops = &trail_ops)
