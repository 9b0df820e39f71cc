/* News outside any call (ABI 1.1): a backend says its lists changed or one
 * of its resources was updated, from any thread; every loop's transport is
 * told (transport op `news`), and it tells the clients that listen. A list
 * change first goes to the control loop (the main thread), which rebuilds
 * the merged lists and publishes them, so a client told "changed" lists the
 * new ones. Also the two slots that reach backends or the coordinator from
 * a transport: resource_subscribe and coordinator. */
#include "kernel.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct news_item {
    mcpg_post post;
    mcpg_worker *w;
    const char *method; /* static text */
    const char *from;   /* the backend that told it (after uri); "" for the gateway's own */
    size_t uri_len;
    char uri[];         /* NUL-terminated; empty when none; then from, NUL-terminated */
} news_item;

/* A backend speaks only for its own resources: an update for a uri the
 * merged lists route to another backend (or to none) is dropped, counted,
 * and logged at 1, 2, 4, 8... drops, so a chatty upstream cannot fill the
 * log. On a loop thread, where the lists may be pinned. */
static bool told_by_owner(generation *g, const news_item *n) {
    if (!n->from[0] || !n->uri_len) return true;
    catset *cs = catalog_acquire(g);
    const route *r = cs ? catalog_find_resource_any(cs, n->uri, n->uri_len) : NULL;
    bool owner = r && strcmp(r->backend->name, n->from) == 0;
    catalog_release(cs);
    return owner;
}

static atomic_ulong foreign_updates;

static void drop_foreign(const news_item *n) {
    unsigned long k = atomic_fetch_add(&foreign_updates, 1) + 1;
    if ((k & (k - 1)) == 0)
        klog(MCPG_LOG_WARN, "kernel", "backend \"%s\" said resource \"%.200s\" changed, which it "
             "does not serve: not told (%lu such so far)", n->from, n->uri, k);
}

static void news_on_loop(void *arg) {
    news_item *n = arg;
    generation *g = n->w->gen;
    const mcpg_transport_ops *ops = g && g->transport ? g->transport->desc->ops : NULL;
    if (g && !told_by_owner(g, n)) {
        if (n->w == &kernel.workers[0]) drop_foreign(n); /* once, not once per loop */
        ops = NULL;
    }
    if (ops && MCPG_HAS(ops, news))
        ops->news(g->transport->state, n->w, n->method, n->uri_len ? n->uri : NULL, n->uri_len);
    free(n);
}

/* One item per loop; a loop that has stopped drops it. */
static void broadcast(const char *method, const char *from, const char *uri, size_t uri_len) {
    for (uint32_t i = 0; i < kernel.n_workers; i++) {
        size_t from_len = from ? strlen(from) : 0;
        news_item *n = malloc(sizeof *n + uri_len + 1 + from_len + 1);
        if (!n) {
            klog(MCPG_LOG_WARN, "kernel", "out of memory: %s not told to worker %u", method, i);
            continue;
        }
        n->w = &kernel.workers[i];
        n->method = method;
        n->uri_len = uri_len;
        if (uri_len) memcpy(n->uri, uri, uri_len);
        n->uri[uri_len] = '\0';
        char *f = n->uri + uri_len + 1;
        if (from_len) memcpy(f, from, from_len);
        f[from_len] = '\0';
        n->from = f;
        n->post.fn = news_on_loop;
        n->post.arg = n;
        if (worker_post(n->w, &n->post) != 0) free(n);
    }
}

static uv_async_t lists_async;
static atomic_bool control_ready;

/* One notification per kind in `lists` (MCPG_LIST_* bits), to every loop. */
static void tell_lists(uint32_t lists) {
    if (lists & MCPG_LIST_TOOLS) broadcast("notifications/tools/list_changed", NULL, NULL, 0);
    if (lists & MCPG_LIST_RESOURCES) broadcast("notifications/resources/list_changed", NULL, NULL, 0);
    if (lists & MCPG_LIST_PROMPTS) broadcast("notifications/prompts/list_changed", NULL, NULL, 0);
}

/* What g's instances have told since they were last applied, taken. An
 * instance not in g (one a reload is retiring) keeps its bits: nobody
 * lists from it any more. */
static uint32_t lists_told_in(generation *g) {
    uint32_t lists = 0;
    for (size_t i = 0; i < g->n_instances; i++)
        lists |= atomic_exchange(&g->instances[i]->lists_told, 0);
    return lists;
}

/* On the control loop: however many changes were told since the last
 * turn, one rebuild of the serving generation's lists, then one
 * notification per kind that changed. A reload builds its generation on
 * this same loop, reading each backend's lists as they are then; a change
 * told while it builds stays on the instance and is applied here, to the
 * generation that serves once the reload is published (or refused). */
static void on_lists_changed(uv_async_t *a) {
    (void)a;
    generation *g = kernel.gen;
    uint32_t lists = g ? lists_told_in(g) : 0;
    if (!lists) return;
    catalog_rebuild(g);
    ready_tell_manager(); /* these may be the last first lists waited for */
    tell_lists(lists);
}

void news_control_init(uv_loop_t *loop) {
    uv_async_init(loop, &lists_async, on_lists_changed);
    atomic_store(&control_ready, true);
}

/* The news is the instance's, whichever generations hold it: a backend a
 * reload is adding may tell before it serves (an upstream that lists once
 * connected), one carried over while the next generation is built. */
void host_lists_changed(mcpg_instance *self, uint32_t lists) {
    lists &= MCPG_LIST_TOOLS | MCPG_LIST_RESOURCES | MCPG_LIST_PROMPTS;
    if (!self || !lists) return;
    atomic_fetch_or(&self->lists_told, lists);
    if (atomic_load(&control_ready)) uv_async_send(&lists_async);
}

/* Which kinds differ between two sets of merged lists (MCPG_LIST_* bits),
 * in any server's lists: a listener of any server is told (it lists again;
 * a server added or removed changes every kind). */
static uint32_t lists_differing(const catset *a, const catset *b) {
    static const uint32_t bit[CAT_COUNT] = {[CAT_TOOLS] = MCPG_LIST_TOOLS,
                                            [CAT_PROMPTS] = MCPG_LIST_PROMPTS,
                                            [CAT_RESOURCES] = MCPG_LIST_RESOURCES,
                                            [CAT_TEMPLATES] = MCPG_LIST_RESOURCES};
    uint32_t lists = 0;
    if (a->n_servers != b->n_servers) return MCPG_LIST_TOOLS | MCPG_LIST_PROMPTS | MCPG_LIST_RESOURCES;
    for (size_t k = 0; k < (size_t)a->n_servers * CAT_COUNT; k++) {
        const mcpg_buf *x = &a->cat[k].answer, *y = &b->cat[k].answer;
        if (x->len != y->len || (x->len && memcmp(x->data, y->data, x->len) != 0))
            lists |= bit[k % CAT_COUNT];
    }
    return lists;
}

/* What was told up to now is in g's lists before the reload is answered;
 * then one notification per kind told or different from old's. */
void news_reload_published(generation *old, generation *g) {
    uint32_t lists = lists_told_in(g);
    if (lists) catalog_rebuild(g);
    catset *a = catalog_acquire(old), *b = catalog_acquire(g);
    if (a && b) lists |= lists_differing(a, b);
    catalog_release(a);
    catalog_release(b);
    tell_lists(lists);
}

/* On the control loop: g's lists built again (new pins), and the kinds that
 * now differ told. */
void news_rebuild_and_tell(generation *g) {
    catset *before = catalog_acquire(g);
    catalog_rebuild(g);
    catset *after = catalog_acquire(g);
    uint32_t lists = before && after ? lists_differing(before, after) : 0;
    catalog_release(before);
    catalog_release(after);
    tell_lists(lists);
}

void host_resource_updated(mcpg_instance *self, const char *uri, size_t len) {
    if (!self || !uri || !len) return;
    /* a backend speaks for its own resources only (told_by_owner); the
     * gateway's own modules (a transport's signed webhooks) for any */
    const char *from = self->desc->kind == MCPG_KIND_BACKEND ? self->name : NULL;
    broadcast("notifications/resources/updated", from, uri, len);
}

int host_resource_subscribe(mcpg_worker *w, const char *uri, size_t len, int on) {
    generation *g = w ? w->gen : NULL;
    catset *cs = g && uri ? catalog_acquire(g) : NULL;
    const route *r = cs ? catalog_find_resource_any(cs, uri, len) : NULL;
    int rc = r ? 0 : MCPG_ENOENT;
    const mcpg_backend_ops *ops = r ? r->backend->desc->ops : NULL;
    char *nul = ops && MCPG_HAS(ops, subscribe) ? malloc(len + 1) : NULL;
    if (nul) {
        memcpy(nul, uri, len);
        nul[len] = '\0';
        ops->subscribe(r->backend->state, nul, on);
        free(nul);
    } else if (ops && MCPG_HAS(ops, subscribe)) {
        rc = MCPG_ENOMEM;
    }
    catalog_release(cs);
    return rc;
}

int host_tasks_offered(void) { return kernel.gen && kernel.gen->n_task_backends > 0; }

int host_events_offered(void) { return kernel.gen && kernel.gen->events.backend != NULL; }

static const mcpg_instance *backend_named(const generation *g, const char *name) {
    for (size_t i = 0; i < g->n_instances; i++)
        if (g->instances[i]->desc->kind == MCPG_KIND_BACKEND && !strcmp(g->instances[i]->name, name))
            return g->instances[i];
    return NULL;
}

/* What a bound backend can serve beyond what it lists now. */
static uint32_t backend_offers(const mcpg_instance *be, bool watched) {
    const mcpg_backend_ops *ops = be ? be->desc->ops : NULL;
    uint32_t bits = watched ? MCPG_OFFER_SUBSCRIBE : 0;
    if (!ops) return bits;
    if (MCPG_HAS(ops, complete)) bits |= MCPG_OFFER_COMPLETIONS;
    if (MCPG_HAS(ops, subscribe)) bits |= MCPG_OFFER_SUBSCRIBE;
    if (be->desc->flags & MCPG_MOD_DYNAMIC_LISTS) { /* what it lists may come later */
        bits |= MCPG_OFFER_LIST_CHANGED | MCPG_OFFER_TOOLS;
        if (MCPG_HAS(ops, list_resources)) bits |= MCPG_OFFER_RESOURCES;
        if (MCPG_HAS(ops, list_prompts)) bits |= MCPG_OFFER_PROMPTS;
    }
    return bits;
}

/* Every bound backend's bits: each binding's, or (no "bindings") each backend's. */
/* What server v's bindings serve beyond its lists (completions, subscribe,
 * list changes). */
static uint32_t bound_offers(const generation *g, uint32_t v) {
    uint32_t bits = 0;
    const gen_server *s = &g->servers[v];
    if (s->default_bindings)
        for (size_t i = 0; i < g->n_instances; i++)
            if (g->instances[i]->desc->kind == MCPG_KIND_BACKEND)
                bits |= backend_offers(g->instances[i], false);
    for (size_t i = 0; i < s->n_bindings; i++)
        bits |= backend_offers(backend_named(g, s->bindings[i].backend), s->bindings[i].watch);
    return bits;
}

/* What server v offers: its lists' kinds, what its bindings add. */
static uint32_t server_offers(const generation *g, const catset *cs, uint32_t v) {
    uint32_t bits = 0;
    if (cs && v < cs->n_servers) {
        const catalog *cat = catset_lists(cs, v);
        if (cat[CAT_TOOLS].n_routes) bits |= MCPG_OFFER_TOOLS;
        if (cat[CAT_PROMPTS].n_routes) bits |= MCPG_OFFER_PROMPTS;
        if (cat[CAT_RESOURCES].n_routes || cat[CAT_TEMPLATES].n_routes)
            bits |= MCPG_OFFER_RESOURCES;
    }
    bits |= bound_offers(g, v);
    /* completions and subscriptions are for what is served */
    if (!(bits & (MCPG_OFFER_PROMPTS | MCPG_OFFER_RESOURCES))) bits &= ~MCPG_OFFER_COMPLETIONS;
    if (!(bits & MCPG_OFFER_RESOURCES)) bits &= ~MCPG_OFFER_SUBSCRIBE;
    return bits;
}

uint32_t host_server_offers(mcpg_worker *w, const char *name, size_t n) {
    generation *g = w ? w->gen : NULL;
    uint32_t v = 0;
    if (!g || !server_named(g, name, n, &v)) return host_offers();
    catset *cs = catalog_acquire(g);
    uint32_t bits = server_offers(g, cs, v);
    catalog_release(cs);
    return bits;
}

const char *host_listen_address(size_t i) {
    const generation *g = generation_building();
    const manifest *m = g ? g->m : kernel.m;
    return m && i < m->n_listen ? m->listen[i] : NULL;
}

/* The identity instance i's resource and issuer (protected_resource op): 0, else nonzero. */
static int identity_describes(const generation *g, size_t i, const char **res, const char **iss) {
    const mcpg_instance *in = g->stage[STAGE_IDENTITY][i];
    const mcpg_identity_ops *ops = in->desc->ops;
    if (!ops || !MCPG_HAS(ops, protected_resource)) return 1;
    return ops->protected_resource(in->state, res, iss) || !*res || !*iss;
}

int host_protected_resource(mcpg_buf *out) {
    const generation *g = kernel.gen;
    const char *res, *iss;
    int n = 0, rc = 0;
    for (size_t i = 0; g && i < g->n_stage[STAGE_IDENTITY]; i++) {
        if (identity_describes(g, i, &res, &iss)) continue;
        if (!n++) {
            rc |= mcpg_buf_puts(out, "{\"resource\":");
            rc |= mcpg_buf_append_json_string(out, res, strlen(res));
            rc |= mcpg_buf_puts(out, ",\"authorization_servers\":[");
        } else {
            rc |= mcpg_buf_puts(out, ",");
        }
        rc |= mcpg_buf_append_json_string(out, iss, strlen(iss));
    }
    if (!n) return MCPG_ENOENT;
    rc |= mcpg_buf_puts(out, "],\"bearer_methods_supported\":[\"header\"]}");
    return rc ? MCPG_ENOMEM : 0;
}

uint32_t host_offers(void) {
    generation *g = kernel.gen;
    if (!g) return 0;
    uint32_t bits = 0;
    catset *cs = catalog_acquire(g);
    for (uint32_t v = 0; v < g->n_servers; v++) bits |= server_offers(g, cs, v); /* any server's */
    catalog_release(cs);
    return bits;
}

/* The generation being built (create), else the calling loop's own (stable
 * on its thread), else the current one. A reload never replaces the
 * coordinator (reload.c), so all of them answer the same instance once the
 * gateway serves: what a module keeps from here stays valid (host.h). */
const mcpg_coordinator_ops *host_coordinator(void **instance_out) {
    const generation *g = generation_building();
    mcpg_worker *w = g ? NULL : worker_self();
    if (!g) g = w && w->gen ? w->gen : kernel.gen;
    mcpg_instance *c = g ? g->coordinator : NULL;
    if (instance_out) *instance_out = c ? c->state : NULL;
    return c ? c->desc->ops : NULL;
}

/* ---- the fleet's news ----------------------------------------------------------
 * A change the gateway itself learns once for the whole fleet (a watched
 * resource polled by one replica: watch.c) is published on the coordinator
 * as MCPG_FLEET_NEWS_SUBJECT's "u <uri>" (abi/mcpg/kinds.h), the subject
 * resource webhooks use too: every loop of every replica hears it in its
 * transport and tells its own listeners, this replica's included, so each
 * subscriber anywhere hears it once. Without a coordinator, or when the
 * publish is refused, this replica's own loops are told directly. */

static void fleet_published(void *arg, int status, const mcpg_coord_value *v) {
    (void)arg, (void)v;
    if (status) klog(MCPG_LOG_WARN, "kernel", "a change could not be told to the fleet (%d)", status);
}

void news_fleet_resource_updated(mcpg_worker *w, const char *uri, size_t len) {
    generation *g = w ? w->gen : NULL;
    mcpg_instance *c = g ? g->coordinator : NULL;
    const mcpg_coordinator_ops *ops = c ? c->desc->ops : NULL;
    mcpg_buf msg = {0};
    int rc = MCPG_EUNAVAIL;
    if (ops && mcpg_fleet_news_updated(&msg, uri, len) == 0)
        rc = ops->publish(c->state, w, MCPG_FLEET_NEWS_SUBJECT, msg.data, msg.len, fleet_published, NULL);
    mcpg_buf_free(&msg);
    if (rc < 0) broadcast("notifications/resources/updated", NULL, uri, len); /* this replica's own, at least */
}
