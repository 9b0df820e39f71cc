/* A fixture identity module for the kernel's pipeline test. It reads the
 * x-test-user header: absent → pass; "deny" → refuse; "pend:<name>" → accept
 * <name> after a 20 ms timer (the PENDING path); anything else → accept it. */
#include <mcpg/sdk.h>
#include <string.h>

/* One periodic host timer per loop, started in worker_start and stopped in
 * worker_stop: the kernel's per-loop lifecycle, as a real module with
 * per-loop state (a connection pool, a cache sweep) would use it. */
#define FX_MAX_WORKERS 16

typedef struct fx {
    const mcpg_host *host;
    mcpg_instance *self;
    mcpg_timer *ticker[FX_MAX_WORKERS];
} fx;

typedef struct pending {
    fx *f;
    mcpg_call *call;
    mcpg_timer *timer;
    char name[64];
} pending;

static int fx_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    (void)cfg;
    fx *f = host->calloc(1, sizeof *f);
    if (!f) return MCPG_ENOMEM;
    f->host = host;
    f->self = self;
    *out = f;
    return 0;
}

static void fx_destroy(void *inst) {
    fx *f = inst;
    f->host->free(f);
}

static void on_tick(void *arg) { (void)arg; }

static void fx_worker_start(void *inst, mcpg_worker *w) {
    fx *f = inst;
    uint32_t i = f->host->worker_index(w);
    if (i < FX_MAX_WORKERS) f->host->timer_start(f->self, w, 5, 5, on_tick, f, &f->ticker[i]);
}

static void fx_worker_stop(void *inst, mcpg_worker *w) {
    fx *f = inst;
    uint32_t i = f->host->worker_index(w);
    if (i < FX_MAX_WORKERS && f->ticker[i]) f->host->timer_stop(f->ticker[i]);
    if (i < FX_MAX_WORKERS) f->ticker[i] = NULL;
}

static void on_timer(void *arg) {
    pending *p = arg;
    const mcpg_host *h = p->f->host;
    h->timer_stop(p->timer);
    h->call_set_identity(p->call, p->name, "fixture-tenant", NULL);
    mcpg_call *call = p->call;
    h->free(p);
    h->call_resume(call, MCPG_CONTINUE);
}

static mcpg_status fx_authenticate(void *inst, mcpg_call *call) {
    fx *f = inst;
    const mcpg_host *h = f->host;
    size_t n = 0;
    const char *user = h->call_header(call, "x-test-user", &n);
    if (!user) return MCPG_CONTINUE;
    if (n == 4 && memcmp(user, "deny", 4) == 0) {
        h->call_error(call, -32001, "fixture refuses", NULL);
        h->call_set_http(call, 403, 0);
        return MCPG_DENY;
    }
    if (n > 5 && memcmp(user, "pend:", 5) == 0 && n - 5 < 64) {
        pending *p = h->calloc(1, sizeof *p);
        p->f = f;
        p->call = call;
        memcpy(p->name, user + 5, n - 5);
        if (h->timer_start(f->self, h->call_worker(call), 20, 0, on_timer, p, &p->timer) != 0) {
            h->free(p);
            return MCPG_DENY;
        }
        return MCPG_PENDING;
    }
    char name[64];
    size_t l = n < sizeof name - 1 ? n : sizeof name - 1;
    memcpy(name, user, l);
    name[l] = '\0';
    if (strcmp(name, "root") == 0 && MCPG_HOST_HAS(h, call_identify)) {
        /* ABI 1.2: roles as a list, claims, how it was established */
        static const char *const roles[] = {"admin", "ops"};
        static const char claims[] = "{\"sub\":\"root\",\"lvl\":9}";
        mcpg_identity id = {.size = sizeof id, .principal = "root", .tenant = "t0",
                            .roles = roles, .n_roles = 2, .claims_json = claims,
                            .claims_len = sizeof claims - 1, .method = "fixture"};
        h->call_identify(call, &id);
        return MCPG_CONTINUE;
    }
    h->call_set_identity(call, name, NULL, NULL);
    return MCPG_CONTINUE;
}

static const mcpg_lifecycle_ops fx_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                .create = fx_create, .destroy = fx_destroy,
                                                .worker_start = fx_worker_start,
                                                .worker_stop = fx_worker_stop};
static const mcpg_identity_ops fx_ops = {MCPG_OPS_HEAD(mcpg_identity_ops),
                                         .authenticate = fx_authenticate};

MCPG_MODULE_DEFINE(MCPG_KIND_IDENTITY, "fx_identity", "1.0.0",
                   .description = "pipeline test fixture", .lifecycle = &fx_lifecycle,
                   .ops = &fx_ops)
