/* News outside any call (ABI 1.1): a backend says its lists changed or one
 * of its resources was updated, from any thread; every loop's transport is
 * told (transport op `news`), and it tells the clients that listen. Also the
 * two slots that reach backends or the coordinator from a transport:
 * resource_subscribe and coordinator. */
#include "kernel.h"

#include <stdlib.h>
#include <string.h>

typedef struct news_item {
    mcpg_post post;
    mcpg_worker *w;
    const char *method; /* static text */
    size_t uri_len;
    char uri[];         /* NUL-terminated; empty when none */
} news_item;

static void news_on_loop(void *arg) {
    news_item *n = arg;
    generation *g = n->w->gen;
    const mcpg_transport_ops *ops = g && g->transport ? g->transport->desc->ops : NULL;
    if (ops && MCPG_HAS(ops, news))
        ops->news(g->transport->state, n->w, n->method, n->uri_len ? n->uri : NULL, n->uri_len);
    free(n);
}

/* One item per loop; a loop that has stopped drops it. */
static void broadcast(const char *method, const char *uri, size_t uri_len) {
    for (uint32_t i = 0; i < K.n_workers; i++) {
        news_item *n = malloc(sizeof *n + uri_len + 1);
        if (!n) {
            klog(MCPG_LOG_WARN, "kernel", "out of memory: %s not told to worker %u", method, i);
            continue;
        }
        n->w = &K.workers[i];
        n->method = method;
        n->uri_len = uri_len;
        if (uri_len) memcpy(n->uri, uri, uri_len);
        n->uri[uri_len] = '\0';
        n->post.fn = news_on_loop;
        n->post.arg = n;
        if (worker_post(n->w, &n->post) != 0) free(n);
    }
}

void host_lists_changed(mcpg_instance *self, uint32_t lists) {
    (void)self;
    if (lists & MCPG_LIST_TOOLS) broadcast("notifications/tools/list_changed", NULL, 0);
    if (lists & MCPG_LIST_RESOURCES) broadcast("notifications/resources/list_changed", NULL, 0);
    if (lists & MCPG_LIST_PROMPTS) broadcast("notifications/prompts/list_changed", NULL, 0);
}

void host_resource_updated(mcpg_instance *self, const char *uri, size_t len) {
    (void)self;
    if (uri && len) broadcast("notifications/resources/updated", uri, len);
}

int host_resource_subscribe(mcpg_worker *w, const char *uri, size_t len, int on) {
    generation *g = w ? w->gen : NULL;
    const route *r = g && uri ? catalog_find_resource(g, uri, len) : NULL;
    if (!r) return MCPG_ENOENT;
    const mcpg_backend_ops *ops = r->backend->desc->ops;
    if (!MCPG_HAS(ops, subscribe)) return 0;
    char *nul = malloc(len + 1);
    if (!nul) return MCPG_ENOMEM;
    memcpy(nul, uri, len);
    nul[len] = '\0';
    ops->subscribe(r->backend->state, nul, on);
    free(nul);
    return 0;
}

int host_tasks_offered(void) { return K.gen && K.gen->n_task_backends > 0; }

const mcpg_coordinator_ops *host_coordinator(void **instance_out) {
    mcpg_instance *c = K.gen ? K.gen->coordinator : NULL;
    if (instance_out) *instance_out = c ? c->state : NULL;
    return c ? c->desc->ops : NULL;
}
