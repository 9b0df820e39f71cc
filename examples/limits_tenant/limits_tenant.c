/* limits_tenant: a rate limit per tenant, as a token bucket each.
 *
 * Every tenant (the identity's tenant; calls without one share the bucket
 * "-") may make `calls` tool calls at once, refilled at `calls` per
 * `window_s` seconds. The call past that is refused with HTTP 429, a
 * Retry-After, and JSON-RPC -32029 naming the limit and the tenant.
 *
 * The buckets live in the instance (never in globals: during a reload two
 * generations run side by side), in a table of at most `max_tenants`
 * entries guarded by one mutex: acquire runs on every loop thread at once.
 * When the table is full, a new tenant takes the entry of the tenant idle
 * longest if that bucket has refilled (forgetting a full bucket loses
 * nothing); if every tenant is still paying off calls, the new tenant is
 * refused with 429 too ("when_full": "refuse") or shares the one overflow
 * bucket ("when_full": "share"). Either way the table stays bounded.
 *
 * This limit is per gateway process: replicas do not share it (the in-tree
 * `limits` module shows the coordinator's rate_take for that).
 */
#include <mcpg/sdk.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LIMITED (-32029) /* mcpg's code for a refusal by a limit (server-error range) */
#define TENANT_MAX 64

typedef struct tenant_config {
    int64_t calls, window_s, max_tenants;
    const char *when_full;
} tenant_config;

static const mcpg_config_field tenant_fields[] = {
    MCPG_CFG_INT_FIELD(tenant_config, calls, "calls", "60", 1, 1000000,
                       "tool calls a tenant may make per window (also the burst)"),
    MCPG_CFG_INT_FIELD(tenant_config, window_s, "window_s", "60", 1, 86400,
                       "the window the calls refill over, in seconds"),
    MCPG_CFG_INT_FIELD(tenant_config, max_tenants, "max_tenants", "1024", 1, 65536,
                       "tenants tracked at once"),
    MCPG_CFG_ENUM_FIELD(tenant_config, when_full, "when_full", "\"refuse\"", "refuse|share",
                        "a new tenant when every entry is busy: refuse it, or let it share one "
                        "overflow bucket"),
    MCPG_CONFIG_END};

typedef struct bucket {
    char tenant[TENANT_MAX + 1]; /* "" = a free entry */
    double tokens;               /* calls it may still make now */
    uint64_t last_us;            /* when tokens was last brought up to date */
} bucket;

typedef struct tenant_limits {
    const mcpg_host *host;
    const tenant_config *cfg;
    double per_us; /* tokens refilled per microsecond */
    pthread_mutex_t mu;
    bucket overflow; /* "share": the bucket of tenants the table has no room for */
    size_t n;
    bucket table[]; /* max_tenants entries */
} tenant_limits;

static int tenant_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                         void **out) {
    const tenant_config *c = config;
    tenant_limits *l = host->calloc(1, sizeof *l + (size_t)c->max_tenants * sizeof(bucket));
    if (!l) return MCPG_ENOMEM;
    l->host = host;
    l->cfg = c;
    l->n = (size_t)c->max_tenants;
    l->per_us = (double)c->calls / ((double)c->window_s * 1e6);
    l->overflow.tokens = (double)c->calls;
    pthread_mutex_init(&l->mu, NULL);
    *out = l;
    return 0;
}

static void tenant_destroy(void *instance) {
    tenant_limits *l = instance;
    pthread_mutex_destroy(&l->mu);
    l->host->free(l);
}

/* Bring a bucket's tokens up to now, never past the burst. */
static void refill(tenant_limits *l, bucket *b, uint64_t now) {
    b->tokens += (double)(now - b->last_us) * l->per_us;
    if (b->tokens > (double)l->cfg->calls) b->tokens = (double)l->cfg->calls;
    b->last_us = now;
}

/* The tenant's bucket, a new one, or NULL when the table is full of busy
 * tenants. Under l->mu. A linear walk keeps the example short; it is why
 * max_tenants is bounded low (a real module would hash the name). */
static bucket *find_bucket(tenant_limits *l, const char *tenant, uint64_t now) {
    bucket *idlest = NULL;
    for (size_t i = 0; i < l->n; i++) {
        bucket *b = &l->table[i];
        if (strcmp(b->tenant, tenant) == 0) return b;
        if (!b->tenant[0] || !idlest || b->last_us < idlest->last_us) idlest = b;
        if (!b->tenant[0]) break; /* entries fill from the front: the rest are free */
    }
    if (idlest->tenant[0]) { /* full: reuse it only when it has nothing left to pay */
        refill(l, idlest, now);
        if (idlest->tokens < (double)l->cfg->calls) return NULL;
    }
    snprintf(idlest->tenant, sizeof idlest->tenant, "%s", tenant);
    idlest->tokens = (double)l->cfg->calls;
    idlest->last_us = now;
    return idlest;
}

/* Take one token: 0, or the microseconds until one is there. Under l->mu. */
static uint64_t take(tenant_limits *l, bucket *b, uint64_t now) {
    refill(l, b, now);
    if (b->tokens >= 1.0) {
        b->tokens -= 1.0;
        return 0;
    }
    return (uint64_t)((1.0 - b->tokens) / l->per_us) + 1;
}

static mcpg_status refuse(tenant_limits *l, mcpg_call *call, const char *tenant, uint64_t wait_us,
                          const char *why) {
    const mcpg_host *h = l->host;
    uint32_t s = (uint32_t)((wait_us + 999999) / 1000000);
    char msg[200], data[200];
    if (s < 1) s = 1;
    snprintf(msg, sizeof msg, "limit \"tenant_rate\" reached for tenant %s (%s): retry in %u s",
             tenant, why, s);
    snprintf(data, sizeof data, "{\"limit\":\"tenant_rate\",\"retry_after_s\":%u}", s);
    h->call_error(call, LIMITED, msg, data);
    h->call_set_http(call, 429, s);
    return MCPG_DENY;
}

/* Runs on a loop thread for every tools/call, after identity and policy: it
 * must not block, so the lock is held only for a table walk. */
static mcpg_status tenant_acquire(void *instance, mcpg_call *call) {
    tenant_limits *l = instance;
    const char *t = l->host->call_tenant(call);
    char tenant[TENANT_MAX + 1];
    snprintf(tenant, sizeof tenant, "%s", t && *t ? t : "-"); /* longer names are cut */
    uint64_t now = l->host->mono_us(), wait_us;
    pthread_mutex_lock(&l->mu);
    bucket *b = find_bucket(l, tenant, now);
    int share = !b && strcmp(l->cfg->when_full, "share") == 0;
    if (share) b = &l->overflow;
    wait_us = b ? take(l, b, now) : (uint64_t)(1.0 / l->per_us);
    pthread_mutex_unlock(&l->mu);
    if (!b) return refuse(l, call, tenant, wait_us, "tenant table full");
    if (wait_us) return refuse(l, call, tenant, wait_us, share ? "shared bucket" : "rate");
    return MCPG_CONTINUE;
}

static const mcpg_lifecycle_ops tenant_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops), .create = tenant_create, .destroy = tenant_destroy};
static const mcpg_limits_ops tenant_ops = {MCPG_OPS_HEAD(mcpg_limits_ops),
                                           .acquire = tenant_acquire};
MCPG_MODULE_DEFINE(MCPG_KIND_LIMITS, "limits_tenant", "1.0.0",
                   .description = "a token-bucket rate limit per tenant, in this process",
                   .config = tenant_fields, .config_size = sizeof(tenant_config),
                   .lifecycle = &tenant_lifecycle, .ops = &tenant_ops);
