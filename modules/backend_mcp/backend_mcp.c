/* backend_mcp: an upstream MCP server's tools, prompts and resources,
 * served as the gateway's own. See upstream.h for how the work is split:
 * this file is the module's face to the kernel. Every op is short: it
 * builds what the upstream will get, hands it to the instance's I/O thread
 * and answers PENDING, so the backend is safe inline on a loop. */
#include <stdlib.h>
#include <string.h>

#include "upstream.h"

typedef struct mcp_backend {
    upstream up;
    mcp_settings settings;
} mcp_backend;

/* MCPG_EAGAIN until the upstream's first lists came: the kernel leaves
 * this backend out of the merged lists and GET /readyz names it. */
static int list_op(void *instance, int list, mcpg_buf *out) {
    mcp_backend *b = instance;
    return atomic_load(&b->up.lists_in) ? up_list_copy(&b->up, list, out) : MCPG_EAGAIN;
}
static int mb_list_tools(void *i, mcpg_buf *out) {
    /* tools are always offered: an empty list when the upstream lists none */
    mcp_backend *b = i;
    int rc = list_op(b, LIST_TOOLS, out);
    return rc == 1 ? b->up.h->buf_append(out, "[]", 2) : rc;
}
static int mb_list_prompts(void *i, mcpg_buf *out) { return list_op(i, LIST_PROMPTS, out); }
static int mb_list_resources(void *i, mcpg_buf *out) { return list_op(i, LIST_RESOURCES, out); }
static int mb_list_templates(void *i, mcpg_buf *out) { return list_op(i, LIST_TEMPLATES, out); }

/* The call, with its credential when it has one, to the upstream: through
 * another replica, on this loop (fast.c) or by the I/O thread. */
static mcpg_status dispatch(upstream *up, client_call *pc, mcpg_call *call) {
    const mcpg_host *h = up->h;
    mcpg_status st;
    if (relay_try(up, pc, call, &st)) return st; /* another replica holds its question */
    if (fast_try(up, pc, call)) return MCPG_PENDING; /* answered on this loop */
    job *j = calloc(1, sizeof *j);
    void **slot = h->call_slot(call, up->self);
    if (!j || !slot) {
        free(j);
        calls_free(pc);
        return mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "backend \"%s\": %s",
                                  up->name, j ? "no call slot" : "out of memory");
    }
    *slot = pc;
    j->kind = JOB_CALL;
    j->pc = pc;
    if (up_post(up, j) != 0) {
        *slot = NULL;
        calls_free(pc);
        free(j);
        h->call_set_http(call, 503, 1);
        return mcpg_result_errorf(h, call, MCPG_RPC_SERVER_ERROR,
                                  "backend \"%s\": too many calls waiting for the upstream",
                                  up->name);
    }
    return MCPG_PENDING; /* the I/O thread may already have answered: allowed */
}

static mcpg_status forward(mcp_backend *b, mcpg_call *call) {
    upstream *up = &b->up;
    client_call *pc = calls_prepare(up, call, up->h->call_method(call));
    if (!pc) return MCPG_DENY;
    return up->cred ? cred_then(up, pc, call, dispatch) : dispatch(up, pc, call);
}

static mcpg_status mb_call(void *instance, mcpg_call *call) { return forward(instance, call); }

/* On the call's loop, while the op is pending: queue the cancel for the
 * I/O thread, unless the call is already being answered. */
static void mb_cancel(void *instance, mcpg_call *call) {
    mcp_backend *b = instance;
    upstream *up = &b->up;
    job *j = calloc(1, sizeof *j);
    if (!j) return; /* the call's deadline still answers it */
    pthread_mutex_lock(&up->lock);
    void **slot = up->h->call_slot(call, up->self);
    void *held = slot ? *slot : NULL;
    if (fast_is(held)) { /* the direct path: on this loop, answered now */
        pthread_mutex_unlock(&up->lock);
        free(j);
        fast_cancel(held);
        return;
    }
    if (cred_is(held)) { /* waiting for its token: answered now or once it came */
        pthread_mutex_unlock(&up->lock);
        free(j);
        cred_cancel(up, held);
        return;
    }
    if (relay_is(held)) { /* waiting for another replica: answered now */
        bool mine = relay_cancel_locked(up, held);
        pthread_mutex_unlock(&up->lock);
        free(j);
        if (mine) relay_cancelled(up, held);
        return;
    }
    client_call *pc = held;
    if (pc && pc->call && !pc->cancel_queued) {
        pc->cancel_queued = true;
        pc->holds++;
    } else {
        pc = NULL;
    }
    pthread_mutex_unlock(&up->lock);
    if (!pc) {
        free(j);
        return;
    }
    j->kind = JOB_CANCEL;
    j->pc = pc;
    if (up_post(up, j) != 0) { /* stopping: the stop fails every call */
        pthread_mutex_lock(&up->lock);
        pc->cancel_queued = false;
        pc->holds--;
        pthread_mutex_unlock(&up->lock);
        free(j);
    }
}

static void mb_subscribe(void *instance, const char *uri, int on) {
    mcp_backend *b = instance;
    job *j = calloc(1, sizeof *j);
    if (!j || !(j->text = strdup(uri))) {
        free(j);
        return;
    }
    j->kind = JOB_SUBSCRIBE;
    j->on = on;
    if (up_post(&b->up, j) != 0) {
        free(j->text);
        free(j);
    }
}

static int mb_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    mcpg_config_problems p = {host, rep, NULL, 0};
    mcp_settings s;
    int bad = mcp_settings_parse(&p, config, &s);
    mcp_settings_free(&s);
    return bad ? MCPG_ECONFIG : 0;
}

static void mb_worker_start(void *instance, mcpg_worker *w) {
    mcp_backend *b = instance;
    relay_worker_start(&b->up, w);
}

static void mb_worker_stop(void *instance, mcpg_worker *w) {
    mcp_backend *b = instance;
    relay_worker_stop(&b->up, w);
    fast_worker_stop(&b->up, b->up.h->worker_index(w));
    upcred_loop_stop(b->up.cred, b->up.h->worker_uv_loop(w));
}

static void mb_destroy(void *instance) {
    mcp_backend *b = instance;
    up_stop(&b->up);
    up_free(&b->up);
    fast_free(&b->up);
    relay_free(&b->up);
    upcred_free(b->up.cred);
    mcp_settings_free(&b->settings);
    free(b);
}

static int mb_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **out) {
    mcp_backend *b = calloc(1, sizeof *b);
    if (!b) return MCPG_ENOMEM;
    mcpg_config_problems p = {host, NULL, self, 0};
    if (mcp_settings_parse(&p, config, &b->settings)) {
        mcp_settings_free(&b->settings);
        free(b);
        return MCPG_ECONFIG;
    }
    int rc = up_init(&b->up, host, self, &b->settings);
    if (!rc) rc = fast_init(&b->up);
    if (!rc) rc = relay_init(&b->up);
    if (!rc) {
        b->up.cred = upcred_new(&p, host, self, b->settings.c->credentials);
        rc = p.errors ? MCPG_ECONFIG : 0;
    }
    if (rc) {
        upcred_free(b->up.cred);
        up_free(&b->up);
        fast_free(&b->up);
        relay_free(&b->up);
        mcp_settings_free(&b->settings);
        free(b);
        return rc;
    }
    *out = b;
    return 0;
}

static int mb_start(void *instance) {
    mcp_backend *b = instance;
    return up_start(&b->up);
}

static void mb_stop(void *instance) {
    mcp_backend *b = instance;
    up_stop(&b->up);
}

static const mcpg_lifecycle_ops mb_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = mb_validate,
    .create = mb_create,
    .destroy = mb_destroy,
    .start = mb_start,
    .stop = mb_stop,
    .worker_start = mb_worker_start,
    .worker_stop = mb_worker_stop,
};

static const mcpg_backend_ops mb_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = mb_list_tools,
    .call_tool = mb_call,
    .list_resources = mb_list_resources,
    .list_resource_templates = mb_list_templates,
    .read_resource = mb_call,
    .list_prompts = mb_list_prompts,
    .get_prompt = mb_call,
    .complete = mb_call,
    .cancel = mb_cancel,
    .subscribe = mb_subscribe,
    .task = mb_call,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "backend_mcp", "1.0.0",
                   .description = "an upstream MCP server (Streamable HTTP or stdio), federated",
                   .flags = MCPG_MOD_INLINE_SAFE | MCPG_MOD_NEVER_BLOCKS | MCPG_MOD_OWNS_THREADS |
                            MCPG_MOD_DYNAMIC_LISTS,
                   .config = mcp_config_fields, .config_size = sizeof(mcp_cfg),
                   .lifecycle = &mb_lifecycle, .ops = &mb_ops);
