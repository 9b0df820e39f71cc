/* Request traces: the spans a telemetry instance exports (ABI 1.10,
 * mcpg/trace.h).
 *
 * A client's request is sampled as it is submitted (trace_begin): it
 * continues the trace its W3C traceparent names, sampled or not as that
 * says, or starts one with the telemetry policy's ratio. Only a sampled
 * call gets a call_trace; for every other call each hook below costs the
 * branch on c->trace that guards it.
 *
 * While the call runs, the pipeline tells trace_phase where it is, and the
 * phases whose ops ran become stage spans; a backend asks for a client span
 * per upstream request (host->call_trace_upstream, any thread its op runs
 * on). As the call is answered, trace_finish hands every span to the
 * telemetry instance, on the call's loop. */
#include "call_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

enum { TRACE_MAX_STAGES = PH_COMPLETE, SERVER_ATTRS = 12 };

typedef struct trace_stage {
    uint8_t id[8];
    int phase;
    uint64_t t_start, t_end;
} trace_stage;

/* One upstream request's client span. `t_end` is written last (release):
 * a span whose end is seen is whole, also when the backend ends it from a
 * pool thread after a timed-out call was answered. */
typedef struct trace_upstream {
    uint8_t id[8];
    char name[64];
    uint64_t t_start;
    int status;
    char error[96];
    _Atomic uint64_t t_end;
} trace_upstream;

struct call_trace {
    uint8_t trace_id[16], span_id[8], parent_id[8];
    uint8_t flags;
    int64_t wall0_ns;          /* the server span's start; mono t0 is the same moment */
    int phase;                 /* the phase last seen (trace_phase) */
    int open;                  /* the stage span being timed, or -1 */
    uint8_t backend_span[8];   /* the backend stage's id: parent of the client spans */
    bool backend_open;
    trace_stage stages[TRACE_MAX_STAGES];
    size_t n_stages;
    _Atomic uint32_t n_upstream;
    trace_upstream up[MCPG_TRACE_MAX_UPSTREAM];
};

/* ---- ids and sampling ---- */

/* splitmix64, seeded once per thread from the kernel's random source: ids
 * need to be unique, not secret. */
static uint64_t next_random(void) {
    static __thread uint64_t state;
    static __thread bool seeded;
    if (!seeded) {
        if (getrandom(&state, sizeof state, 0) != (ssize_t)sizeof state)
            state = (uint64_t)wall_us() ^ (uint64_t)(uintptr_t)&state;
        seeded = true;
    }
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool all_zero(const uint8_t *id, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (id[i]) return false;
    return true;
}

/* A non-zero id of n bytes (8 or 16), as W3C asks. */
static void new_id(uint8_t *id, size_t n) {
    do {
        for (size_t i = 0; i < n; i += 8) {
            uint64_t r = next_random();
            memcpy(id + i, &r, 8);
        }
    } while (all_zero(id, n));
}

static int hex_value(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

static void hex_decode(const char *s, uint8_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = (uint8_t)(hex_value(s[2 * i]) << 4 | hex_value(s[2 * i + 1]));
}

static int64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The telemetry instance's policy, asked once per generation. */
void trace_policy_load(generation *g) {
    for (size_t i = 0; i < g->n_instances; i++)
        if (g->instances[i]->desc->kind == MCPG_KIND_TELEMETRY) g->telemetry = g->instances[i];
    if (!g->telemetry) return;
    mcpg_trace_policy p = {.size = sizeof p, .sample_ratio = 1.0};
    const mcpg_telemetry_ops *ops = g->telemetry->desc->ops;
    if (MCPG_HAS(ops, policy)) ops->policy(g->telemetry->state, &p);
    g->trace_ratio = p.sample_ratio < 0 ? 0 : p.sample_ratio > 1 ? 1 : p.sample_ratio;
    g->trace_flags = p.flags;
}

static bool root_sampled(double ratio) {
    return ratio >= 1 || (double)(next_random() >> 11) * 0x1p-53 < ratio;
}

/* ---- the call's life ---- */

/* The transport's identity check for what it answers itself (a GET
 * stream, a notification, a DELETE): no MCP request of its own. */
static bool session_check(const mcpg_call *c) {
    static const char m[] = MCPG_SESSION_METHOD;
    return c->d.method_len == sizeof m - 1 && !memcmp(c->d.method, m, sizeof m - 1);
}

void trace_begin(mcpg_call *c) {
    if (session_check(c)) return;
    size_t n = 0;
    const char *tp = c->d.header ? c->d.header(c->d.transport_ctx, "traceparent", &n) : NULL;
    bool parent = tp && mcpg_traceparent_valid(tp, n);
    uint8_t flags = parent ? (uint8_t)(hex_value(tp[53]) << 4 | hex_value(tp[54])) : 1;
    if (parent ? !(flags & 1) : !root_sampled(c->gen->trace_ratio)) return;
    call_trace *t = calloc(1, sizeof *t);
    if (!t) return; /* untraced rather than failed */
    if (parent) {
        hex_decode(tp + 3, t->trace_id, 16);
        hex_decode(tp + 36, t->parent_id, 8);
    } else {
        new_id(t->trace_id, 16);
    }
    new_id(t->span_id, 8);
    t->flags = flags;
    t->wall0_ns = wall_ns();
    t->phase = -1;
    t->open = -1;
    c->trace = t;
}

void trace_free(mcpg_call *c) {
    free(c->trace);
    c->trace = NULL;
}

/* Whether the phase runs a module's op: its stage lists an instance, and
 * applies to the method (limits: tool calls only). */
static bool phase_runs(const mcpg_call *c, int phase) {
    const gen_server *g = c->srv;
    switch (phase) {
    case PH_IDENTITY: return g->n_stage[STAGE_IDENTITY] > 0;
    case PH_POLICY: return g->n_stage[STAGE_POLICY] > 0;
    case PH_LIMITS: return g->n_stage[STAGE_LIMITS] > 0 && c->method == MCPG_METHOD_TOOLS_CALL;
    case PH_AUDIT_ALLOWED:
    case PH_AUDIT_DONE: return g->n_stage[STAGE_AUDIT] > 0;
    case PH_BACKEND: return c->route != NULL;
    default: return false;
    }
}

static void stage_close(call_trace *t, uint64_t now) {
    if (t->open >= 0) t->stages[t->open].t_end = now;
    t->open = -1;
}

void trace_phase(mcpg_call *c) {
    call_trace *t = c->trace;
    if (c->phase == t->phase) return;
    uint64_t now = mono_us();
    stage_close(t, now);
    t->phase = c->phase;
    if (!phase_runs(c, c->phase) || t->n_stages >= TRACE_MAX_STAGES) return;
    trace_stage *s = &t->stages[t->n_stages];
    t->open = (int)t->n_stages++;
    new_id(s->id, 8);
    s->phase = c->phase;
    s->t_start = now;
    if (c->phase == PH_BACKEND) { /* before the backend runs: its client spans' parent */
        memcpy(t->backend_span, s->id, 8);
        t->backend_open = true;
    }
}

/* ---- upstream requests (host slots) ---- */

uint32_t host_call_trace_upstream(mcpg_call *h, const char *name, char *tp, size_t cap) {
    mcpg_call *c = call_of(h, "call_trace_upstream");
    if (!c || !c->trace || !tp || cap < MCPG_TRACEPARENT_CAP) return 0;
    call_trace *t = c->trace;
    uint32_t i = atomic_fetch_add(&t->n_upstream, 1);
    if (i >= MCPG_TRACE_MAX_UPSTREAM) return 0;
    trace_upstream *u = &t->up[i];
    new_id(u->id, 8);
    snprintf(u->name, sizeof u->name, "%s", name && *name ? name : "upstream");
    u->t_start = mono_us();
    memcpy(tp, "00-", 3);
    mcpg_hex(t->trace_id, 16, tp + 3);
    tp[35] = '-';
    mcpg_hex(u->id, 8, tp + 36);
    tp[52] = '-';
    mcpg_hex(&t->flags, 1, tp + 53);
    tp[55] = '\0';
    return i + 1;
}

void host_call_trace_upstream_end(mcpg_call *h, uint32_t span, int status, const char *error) {
    mcpg_call *c = call_of(h, "call_trace_upstream_end");
    if (!c || !c->trace || span == 0 || span > MCPG_TRACE_MAX_UPSTREAM) return;
    trace_upstream *u = &c->trace->up[span - 1];
    if (atomic_load(&u->t_end)) return; /* ended once */
    u->status = status;
    snprintf(u->error, sizeof u->error, "%s", error ? error : "");
    uint64_t now = mono_us();
    atomic_store_explicit(&u->t_end, now > u->t_start ? now : u->t_start + 1, memory_order_release);
}

/* ---- the spans, as the call is answered ---- */

typedef struct span_set {
    mcpg_span spans[1 + TRACE_MAX_STAGES + MCPG_TRACE_MAX_UPSTREAM];
    const mcpg_span *ptrs[1 + TRACE_MAX_STAGES + MCPG_TRACE_MAX_UPSTREAM];
    size_t n;
    mcpg_span_attr server_attrs[SERVER_ATTRS];
    mcpg_span_attr upstream_attrs[MCPG_TRACE_MAX_UPSTREAM];
    char server_name[320], backend_name[160], error_type[24], tracestate[520];
} span_set;

static int64_t at_ns(const call_trace *t, const mcpg_call *c, uint64_t mono) {
    return t->wall0_ns + (int64_t)(mono - c->t0) * 1000;
}

static mcpg_span *span_add(span_set *set, const call_trace *t, uint32_t kind, const uint8_t *id,
                           const uint8_t *parent) {
    mcpg_span *s = &set->spans[set->n];
    set->ptrs[set->n++] = s;
    *s = (mcpg_span){.size = sizeof *s, .kind = kind, .flags = t->flags};
    memcpy(s->trace_id, t->trace_id, 16);
    memcpy(s->span_id, id, 8);
    memcpy(s->parent_id, parent, 8);
    return s;
}

static void attr_str(mcpg_span_attr *a, const char *key, const char *v, size_t n) {
    *a = (mcpg_span_attr){.key = key, .type = MCPG_ATTR_STRING, .str = v, .len = n};
}

static void attr_int(mcpg_span_attr *a, const char *key, int64_t v) {
    *a = (mcpg_span_attr){.key = key, .type = MCPG_ATTR_INT, .num = v};
}

/* jsonrpc.request.id is a string: a string id without its quotes. */
static void attr_request_id(mcpg_span_attr *a, const mcpg_call *c) {
    const char *id = c->d.id_json;
    size_t n = c->d.id_len;
    if (n >= 2 && id[0] == '"' && id[n - 1] == '"') id++, n -= 2;
    attr_str(a, "jsonrpc.request.id", id, n);
}

/* What the call was about, under the conventions' name for its kind. */
static const char *target_key(uint32_t method) {
    switch (method) {
    case MCPG_METHOD_TOOLS_CALL: return "gen_ai.tool.name";
    case MCPG_METHOD_PROMPTS_GET: return "gen_ai.prompt.name";
    case MCPG_METHOD_RESOURCES_READ: return "mcp.resource.uri";
    default: return NULL;
    }
}

/* A tools/call answered with a result whose isError is true: the tool
 * failed, though the request did not. */
static bool tool_failed(const mcpg_call *c) {
    if (c->method != MCPG_METHOD_TOOLS_CALL || c->is_error) return false;
    const mcpg_buf *res = c->borrowed ? c->borrowed : &c->result;
    mcpg_json_span v;
    return res->data && res->len &&
           mcpg_json_object_get(res->data, res->len, "isError", &v) == 1 &&
           v.type == MCPG_JSON_TRUE;
}

static size_t server_attrs(span_set *set, mcpg_call *c, mcpg_span *s) {
    mcpg_span_attr *a = set->server_attrs;
    size_t n = 0;
    attr_str(&a[n++], "mcp.method.name", c->d.method, c->d.method_len);
    const char *target = call_client_name_of(c);
    const char *key = target_key(c->method);
    if (target && key) attr_str(&a[n++], key, target, strlen(target));
    if (c->method == MCPG_METHOD_TOOLS_CALL) attr_str(&a[n++], "gen_ai.operation.name", "execute_tool", 12);
    if (c->d.id_json && c->d.id_len) attr_request_id(&a[n++], c);
    if (c->session.len) attr_str(&a[n++], "mcp.session.id", c->session.data, c->session.len);
    if (c->route) attr_str(&a[n++], "mcpg.backend", c->route->backend->name, strlen(c->route->backend->name));
    if ((c->gen->trace_flags & MCPG_TRACE_ENDUSER) && c->ident) {
        attr_str(&a[n++], "enduser.id", c->ident->principal, strlen(c->ident->principal));
        if (c->ident->tenant) attr_str(&a[n++], "mcpg.tenant.id", c->ident->tenant, strlen(c->ident->tenant));
    }
    int64_t code;
    const char *msg;
    if (call_error_of(c, &code, &msg)) {
        attr_int(&a[n++], "rpc.jsonrpc.error_code", code);
        snprintf(set->error_type, sizeof set->error_type, "%lld", (long long)code);
        attr_str(&a[n++], "error.type", set->error_type, strlen(set->error_type));
        s->status = MCPG_SPAN_ERROR;
        s->status_message = msg;
    } else if (tool_failed(c)) {
        attr_str(&a[n++], "error.type", "tool_error", 10);
        s->status = MCPG_SPAN_ERROR;
    }
    return n;
}

/* The client's tracestate goes with the trace it continues (a header
 * value is no C string: copied). */
static void add_tracestate(span_set *set, mcpg_call *c, mcpg_span *s) {
    size_t n = 0;
    const char *ts = c->d.header ? c->d.header(c->d.transport_ctx, "tracestate", &n) : NULL;
    if (!ts || all_zero(c->trace->parent_id, 8) || !mcpg_tracestate_valid(ts, n)) return;
    memcpy(set->tracestate, ts, n); /* valid: at most 512 bytes */
    set->tracestate[n] = '\0';
    s->tracestate = set->tracestate;
}

static void add_server(span_set *set, mcpg_call *c, uint64_t now) {
    call_trace *t = c->trace;
    mcpg_span *s = span_add(set, t, MCPG_SPAN_SERVER, t->span_id, t->parent_id);
    /* "{mcp.method.name} {target}", as the conventions name an MCP span */
    const char *target = call_client_name_of(c);
    snprintf(set->server_name, sizeof set->server_name, "%.*s%s%s", (int)c->d.method_len,
             c->d.method, target ? " " : "", target ? target : "");
    s->name = set->server_name;
    s->start_ns = t->wall0_ns;
    s->end_ns = at_ns(t, c, now);
    s->attrs = set->server_attrs;
    s->n_attrs = server_attrs(set, c, s);
    add_tracestate(set, c, s);
}

static const char *stage_name(const mcpg_call *c, int phase, span_set *set) {
    switch (phase) {
    case PH_IDENTITY: return "identity";
    case PH_POLICY: return "policy";
    case PH_LIMITS: return "limits";
    case PH_AUDIT_ALLOWED: return "audit allowed";
    case PH_AUDIT_DONE: return "audit outcome";
    default:
        snprintf(set->backend_name, sizeof set->backend_name, "backend %s",
                 c->route ? c->route->backend->name : "");
        return set->backend_name;
    }
}

static void add_stages(span_set *set, mcpg_call *c) {
    call_trace *t = c->trace;
    for (size_t i = 0; i < t->n_stages; i++) {
        const trace_stage *st = &t->stages[i];
        mcpg_span *s = span_add(set, t, MCPG_SPAN_INTERNAL, st->id, t->span_id);
        s->name = stage_name(c, st->phase, set);
        s->start_ns = at_ns(t, c, st->t_start);
        s->end_ns = at_ns(t, c, st->t_end ? st->t_end : st->t_start);
        if (st->phase == PH_BACKEND && c->backend_failed) s->status = MCPG_SPAN_ERROR;
    }
}

static void add_upstreams(span_set *set, mcpg_call *c) {
    call_trace *t = c->trace;
    uint32_t n = atomic_load(&t->n_upstream);
    for (uint32_t i = 0; i < n && i < MCPG_TRACE_MAX_UPSTREAM; i++) {
        trace_upstream *u = &t->up[i];
        uint64_t end = atomic_load_explicit(&u->t_end, memory_order_acquire);
        if (!end) continue; /* still running (a timed-out pool backend): not exported */
        mcpg_span *s = span_add(set, t, MCPG_SPAN_CLIENT, u->id,
                                t->backend_open ? t->backend_span : t->span_id);
        s->name = u->name;
        s->start_ns = at_ns(t, c, u->t_start);
        s->end_ns = at_ns(t, c, end);
        if (u->status > 0) {
            attr_int(&set->upstream_attrs[i], "http.response.status_code", u->status);
            s->attrs = &set->upstream_attrs[i];
            s->n_attrs = 1;
        }
        if (u->status <= 0 || u->status >= 500 || u->error[0]) {
            s->status = MCPG_SPAN_ERROR;
            s->status_message = u->error[0] ? u->error : NULL;
        }
    }
}

void trace_finish(mcpg_call *c) {
    call_trace *t = c->trace;
    uint64_t now = mono_us();
    stage_close(t, now);
    t->phase = PH_COMPLETE;
    span_set set; /* a few KiB on the loop's stack, for the export op only */
    set.n = 0;
    add_server(&set, c, now);
    add_stages(&set, c);
    add_upstreams(&set, c);
    const mcpg_telemetry_ops *ops = c->gen->telemetry->desc->ops;
    ops->export_spans(c->gen->telemetry->state, set.ptrs, set.n);
}
