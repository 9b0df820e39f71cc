/* backend_mock: configurable echo tools, for benchmarks and tests.
 *
 * Every tool answers {"content":[{"type":"text","text":"Echo: <message>"}]},
 * optionally padded to payload_bytes, after latency_ms, or as an isError
 * result. The `mock_stats` tool (off unless stats_tool) reports how many
 * calls the mock has seen and the most it ever held at once, in all and per
 * tool, so tests of the limits stage can check a concurrency cap from the
 * backend's side while other tools run beside it.
 */
#include <mcpg/sdk.h>

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mock_resources.h"
#include "mock_tools.h"

typedef struct mock_cfg {
    const char *tools; /* JSON text */
    int stats_tool;
    const char *resources; /* JSON text, or NULL: none */
} mock_cfg;

static const mcpg_config_field mock_config[] = {
    MCPG_CFG_JSON_FIELD(mock_cfg, tools, "tools", "[{\"name\":\"echo\"}]",
                        "array of {name, description, latency_ms, payload_bytes, fail}"),
    MCPG_CFG_BOOL_FIELD(mock_cfg, stats_tool, "stats_tool", "false",
                        "also offer the tool mock_stats: {in_flight, max_in_flight, calls, "
                        "tools: {name: {in_flight, max_in_flight, calls}}}"),
    MCPG_CFG_JSON_FIELD(mock_cfg, resources, "resources", NULL,
                        "array of static resources {uri, text, name, mimeType, description}: "
                        "listed, read and subscribable; they change only when something "
                        "outside announces it (a resource webhook)"),
    MCPG_CONFIG_END};

/* Calls seen, in flight now, and the most ever in flight at once. */
typedef struct mock_count {
    _Atomic uint64_t in_flight, max_in_flight, calls;
} mock_count;

typedef struct mock {
    const mcpg_host *host;
    mcpg_instance *self;
    const mock_cfg *cfg;
    mock_tool_set set;
    mock_resource_set res; /* static resources (mock_resources.h) */
    mcpg_buf list;        /* the tools/list array, built once */
    mock_count all;       /* every configured tool together */
    mock_count *per_tool; /* set.n of them, in the order of set.tools */
} mock;

/* A call held on a loop timer (inline latency); found again by call_slot. */
typedef struct mock_wait {
    mock *m;
    const mock_tool *tool;
    mcpg_call *call;
    mcpg_timer *timer;
    void **slot;
} mock_wait;

static const char echo_schema[] =
    "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\"}},"
    "\"required\":[\"message\"]}";

/* ------------------------------------------------------------------ */
/* in-flight accounting                                                */

static void count_enter(mock_count *c) {
    atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
    uint64_t now = atomic_fetch_add_explicit(&c->in_flight, 1, memory_order_acq_rel) + 1;
    uint64_t max = atomic_load_explicit(&c->max_in_flight, memory_order_relaxed);
    while (now > max && !atomic_compare_exchange_weak_explicit(
                            &c->max_in_flight, &max, now, memory_order_acq_rel,
                            memory_order_relaxed)) {
    }
}

static void count_leave(mock_count *c) {
    atomic_fetch_sub_explicit(&c->in_flight, 1, memory_order_acq_rel);
}

static mock_count *count_of(mock *m, const mock_tool *t) {
    return &m->per_tool[t - m->set.tools];
}

/* A call of tool t counts in the instance's totals and in t's own. */
static void mock_enter(mock *m, const mock_tool *t) {
    count_enter(&m->all);
    count_enter(count_of(m, t));
}

static void mock_leave(mock *m, const mock_tool *t) {
    count_leave(count_of(m, t));
    count_leave(&m->all);
}

/* ------------------------------------------------------------------ */
/* answers                                                             */

static mcpg_status mock_fail(mock *m, mcpg_call *call, int64_t code, const char *msg) {
    m->host->call_error(call, code, msg, NULL);
    return MCPG_DENY;
}

/* "in_flight":N,"max_in_flight":M,"calls":C (tool names need no escaping:
 * they match ^[a-zA-Z0-9_-]{1,64}$). */
static int count_print(const mcpg_host *h, mcpg_buf *b, mock_count *c) {
    return h->buf_printf(b, "\"in_flight\":%llu,\"max_in_flight\":%llu,\"calls\":%llu",
                         (unsigned long long)atomic_load(&c->in_flight),
                         (unsigned long long)atomic_load(&c->max_in_flight),
                         (unsigned long long)atomic_load(&c->calls));
}

/* {"in_flight":..,"max_in_flight":..,"calls":..,"tools":{"<name>":{the same},...}}
 * as the result's text. */
static mcpg_status mock_stats_answer(mock *m, mcpg_call *call) {
    const mcpg_host *h = m->host;
    mcpg_buf b = {0};
    int rc = h->buf_append(&b, "{", 1) || count_print(h, &b, &m->all) ||
             h->buf_append(&b, ",\"tools\":{", 10);
    for (size_t i = 0; i < m->set.n && !rc; i++)
        rc = h->buf_printf(&b, "%s\"%s\":{", i ? "," : "", m->set.tools[i].name) ||
             count_print(h, &b, &m->per_tool[i]) || h->buf_append(&b, "}", 1);
    if (!rc) rc = h->buf_append(&b, "}}", 2);
    mcpg_status st = rc ? mock_fail(m, call, MCPG_RPC_INTERNAL_ERROR, "out of memory")
                        : mcpg_result_text(h, call, b.data, b.len, 0);
    h->buf_free(&b);
    return st;
}

/* A second build of this module answers with another prefix: the reload
 * test swaps the two files and sees which code serves. */
#ifndef MOCK_ECHO_PREFIX
#define MOCK_ECHO_PREFIX "Echo: "
#endif

/* Append the echo result: the text is "Echo: " + msg, padded with 'x' to
 * payload_bytes bytes, escaped straight into the call's buffer (no copy of
 * the whole text first). */
static int mock_write_echo(const mcpg_host *h, mcpg_buf *b, const mock_tool *t,
                           const char *msg, size_t n) {
    static const char head[] = "{\"content\":[{\"type\":\"text\",\"text\":\"" MOCK_ECHO_PREFIX;
    size_t text = sizeof MOCK_ECHO_PREFIX - 1 + n;
    size_t pad = (uint64_t)t->payload_bytes > text ? (size_t)t->payload_bytes - text : 0;
    if (h->buf_append(b, head, sizeof head - 1) || h->buf_reserve(b, 6 * n + pad + 32))
        return MCPG_ENOMEM;
    b->len += mcpg_json_escape(b->data + b->len, msg, n);
    memset(b->data + b->len, 'x', pad);
    b->len += pad;
    b->data[b->len] = '\0';
    return t->fail ? h->buf_append(b, "\"}],\"isError\":true}", 19)
                   : h->buf_append(b, "\"}]}", 4);
}

/* Read params.arguments.message and answer; DENY (-32602) when it is
 * missing or not a string. */
static mcpg_status mock_echo(mock *m, const mock_tool *t, mcpg_call *call) {
    const mcpg_host *h = m->host;
    size_t alen = 0;
    const char *args = h->call_args(call, &alen);
    mcpg_json_span v;
    if (!args || h->json_object_get(args, alen, "message", &v) != 1 ||
        v.type != MCPG_JSON_STRING)
        return mock_fail(m, call, MCPG_RPC_INVALID_PARAMS,
                         "Invalid params: 'message' must be a string");
    char stack[512];
    const char *msg = v.p;
    size_t n = v.n;
    char *heap = NULL;
    if (v.escaped) { /* decoding never lengthens: v.n + 1 bytes always fit */
        char *dst = v.n < sizeof stack ? stack : (heap = h->alloc(v.n + 1));
        if (!dst || h->json_string_decode(&v, dst, v.n + 1, &n) < 0) {
            h->free(heap);
            return mock_fail(m, call, MCPG_RPC_INVALID_PARAMS,
                             "Invalid params: 'message' must be a string");
        }
        msg = dst;
    }
    mcpg_buf *b = h->call_result_buf(call);
    int rc = b ? mock_write_echo(h, b, t, msg, n) : MCPG_ENOMEM;
    h->free(heap);
    if (rc) return mock_fail(m, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
    return MCPG_CONTINUE;
}

/* ------------------------------------------------------------------ */
/* latency                                                             */

static void mock_wait_end(mock_wait *w) {
    mock *m = w->m;
    const mock_tool *t = w->tool;
    if (w->slot) *w->slot = NULL;
    m->host->timer_stop(w->timer); /* a fired one-shot timer is still ours to free */
    m->host->free(w);
    mock_leave(m, t);
}

static void mock_timer_fired(void *arg) {
    mock_wait *w = arg;
    const mcpg_host *h = w->m->host;
    mcpg_call *call = w->call;
    mock_wait_end(w); /* before resume: the call may complete inside it */
    h->call_resume(call, MCPG_CONTINUE);
}

/* On a loop thread: hold the answer on a timer of the call's loop. */
static mcpg_status mock_delay_inline(mock *m, const mock_tool *t, mcpg_call *call) {
    const mcpg_host *h = m->host;
    mock_wait *w = h->calloc(1, sizeof *w);
    if (!w) {
        mock_leave(m, t);
        return mock_fail(m, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
    }
    *w = (mock_wait){.m = m, .tool = t, .call = call, .slot = h->call_slot(call, m->self)};
    int rc = h->timer_start(m->self, h->call_worker(call), (uint64_t)t->latency_ms, 0,
                            mock_timer_fired, w, &w->timer);
    if (rc != 0) {
        h->free(w);
        mock_leave(m, t);
        return mock_fail(m, call, MCPG_RPC_INTERNAL_ERROR, "cannot start the latency timer");
    }
    if (w->slot) *w->slot = w; /* so cancel() can find it */
    return MCPG_PENDING;
}

/* On a pool thread blocking is what the pool is for. */
static void mock_sleep_ms(int64_t ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------------ */
/* backend ops                                                         */

static int mock_list_tools(void *instance, mcpg_buf *out) {
    mock *m = instance;
    return m->host->buf_append(out, m->list.data, m->list.len);
}

static mcpg_status mock_unknown_tool(mock *m, mcpg_call *call, const char *name) {
    char msg[160];
    snprintf(msg, sizeof msg, "Unknown tool: %.64s", name ? name : "");
    return mock_fail(m, call, MCPG_RPC_INVALID_PARAMS, msg);
}

static mcpg_status mock_call_tool(void *instance, mcpg_call *call) {
    mock *m = instance;
    const mcpg_host *h = m->host;
    const char *name = h->call_target(call);
    if (m->cfg->stats_tool && name && strcmp(name, MOCK_STATS_TOOL) == 0)
        return mock_stats_answer(m, call);
    const mock_tool *t = mock_tools_find(&m->set, name);
    if (!t) return mock_unknown_tool(m, call, name);
    mock_enter(m, t);
    mcpg_status st = mock_echo(m, t, call);
    if (st != MCPG_CONTINUE || t->latency_ms == 0) {
        mock_leave(m, t);
        return st;
    }
    if (h->worker_current()) return mock_delay_inline(m, t, call);
    mock_sleep_ms(t->latency_ms);
    mock_leave(m, t);
    return MCPG_CONTINUE;
}

static int mock_list_resources(void *instance, mcpg_buf *out) {
    mock *m = instance;
    return m->host->buf_append(out, m->res.list.data, m->res.list.len);
}

static mcpg_status mock_read_resource(void *instance, mcpg_call *call) {
    mock *m = instance;
    const mcpg_host *h = m->host;
    const char *uri = h->call_target(call);
    const mock_resource *r = mock_resources_find(&m->res, uri);
    if (!r) { /* -32602 on both wires: the 2026 wire retired -32002 */
        mcpg_buf data = {0};
        int rc = h->buf_append(&data, "{\"uri\":", 7);
        rc |= h->buf_append_json_string(&data, uri ? uri : "", uri ? strlen(uri) : 0);
        rc |= h->buf_append(&data, "}", 1);
        h->call_error(call, MCPG_RPC_INVALID_PARAMS, "Resource not found", rc ? NULL : data.data);
        h->buf_free(&data);
        return MCPG_DENY;
    }
    if (h->call_result(call, r->read.data, r->read.len))
        return mock_fail(m, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
    return MCPG_CONTINUE;
}

/* The kernel counts subscribers; the mock's resources change only from
 * outside, so there is nothing to start watching: it only says so. */
static void mock_subscribe(void *instance, const char *uri, int on) {
    mock *m = instance;
    m->host->log(m->self, MCPG_LOG_DEBUG, "%s %s", on ? "subscribed to" : "unsubscribed from", uri);
}

/* The client went away while the answer waited on its timer: answer now. */
static void mock_cancel(void *instance, mcpg_call *call) {
    mock *m = instance;
    void **slot = m->host->call_slot(call, m->self);
    mock_wait *w = slot ? *slot : NULL;
    if (!w) return; /* not waiting: its answer is already on its way */
    mock_wait_end(w);
    m->host->call_error(call, MCPG_RPC_SERVER_ERROR, "request cancelled", NULL);
    m->host->call_resume(call, MCPG_DENY);
}

/* ------------------------------------------------------------------ */
/* lifecycle                                                           */

static int mock_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const mock_cfg *c = config;
    mock_tool_set set = {0};
    int errors = mock_tools_parse(host, c->tools, c->stats_tool, rep, NULL, &set);
    mock_tools_free(host, &set);
    mock_resource_set res = {0};
    errors += mock_resources_parse(host, c->resources, rep, NULL, &res);
    mock_resources_free(host, &res);
    return errors ? MCPG_ECONFIG : 0;
}

static int mock_build_list(mock *m) {
    const mcpg_host *h = m->host;
    mcpg_buf *b = &m->list;
    int rc = h->buf_append(b, "[", 1);
    for (size_t i = 0; i < m->set.n && !rc; i++) {
        const mock_tool *t = &m->set.tools[i];
        rc = h->buf_printf(b, "%s{\"name\":\"%s\",\"description\":", i ? "," : "", t->name);
        if (!rc && t->description)
            rc = h->buf_append_json_string(b, t->description, strlen(t->description));
        else if (!rc)
            rc = h->buf_printf(b, "\"Echoes the message back\"");
        if (!rc) rc = h->buf_printf(b, ",\"inputSchema\":%s}", echo_schema);
    }
    if (!rc && m->cfg->stats_tool)
        rc = h->buf_printf(b,
                           "%s{\"name\":\"" MOCK_STATS_TOOL "\",\"description\":\"The mock's "
                           "call counters as JSON text\",\"inputSchema\":{\"type\":\"object\","
                           "\"properties\":{}}}",
                           m->set.n ? "," : "");
    return rc ? rc : h->buf_append(b, "]", 1);
}

static void mock_destroy(void *instance) {
    mock *m = instance;
    m->host->free(m->per_tool);
    mock_tools_free(m->host, &m->set);
    mock_resources_free(m->host, &m->res);
    m->host->buf_free(&m->list);
    m->host->free(m);
}

static int mock_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                       void **instance_out) {
    mock *m = host->calloc(1, sizeof *m);
    if (!m) return MCPG_ENOMEM;
    m->host = host;
    m->self = self;
    m->cfg = config;
    /* validate() has run already in the kernel; a bad config here is refused
     * all the same (the errors go to the log). */
    if (mock_tools_parse(host, m->cfg->tools, m->cfg->stats_tool, NULL, self, &m->set) ||
        mock_resources_parse(host, m->cfg->resources, NULL, self, &m->res)) {
        mock_destroy(m);
        return MCPG_ECONFIG;
    }
    m->per_tool = host->calloc(m->set.n ? m->set.n : 1, sizeof *m->per_tool);
    int rc = m->per_tool ? mock_build_list(m) : MCPG_ENOMEM;
    if (rc) {
        mock_destroy(m);
        return rc;
    }
    *instance_out = m;
    return 0;
}

static const mcpg_lifecycle_ops mock_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = mock_validate,
    .create = mock_create,
    .destroy = mock_destroy,
};

static const mcpg_backend_ops mock_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = mock_list_tools,
    .call_tool = mock_call_tool,
    .list_resources = mock_list_resources,
    .read_resource = mock_read_resource,
    .cancel = mock_cancel,
    .subscribe = mock_subscribe,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "backend_mock", "1.0.0",
                   .description = "echo tools with configurable latency, payload and failure; "
                                  "optional static resources",
                   .flags = MCPG_MOD_INLINE_SAFE | MCPG_MOD_NEVER_BLOCKS,
                   .config = mock_config, .config_size = sizeof(mock_cfg),
                   .lifecycle = &mock_lifecycle, .ops = &mock_ops);
