/* transport_http: the stateless wire's request checks (the 2026-07-28
 * transport: required headers, the request envelope, its error codes).
 *
 * Order, as the v2 SDK does it: Accept, Content-Type, JSON, JSON-RPC shape,
 * the _meta envelope and its version, the MCP headers against the body, then
 * the method. The first failure decides the answer. Duplicate members that
 * the gateway acts on (method, id, params.name, ...) are refused rather than
 * resolved, so no later stage can read a different value than was checked. */
#include "wire/mcp_stateless.h"

#include <mcpg/sdk.h>
#include <string.h>

#define MSG(s) TH_LIT("\"" s "\"")

static void fail(th_mcp_verdict *v, int status, int64_t code, th_piece msg) {
    v->action = TH_MCP_ERROR;
    v->http_status = status;
    v->code = code;
    v->message = msg;
}

/* ---- header grammar ------------------------------------------------------ */

static int is_ows(char c) { return c == ' ' || c == '\t'; }
static int is_json_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static void trim(const char **p, size_t *n) {
    while (*n && is_ows(**p)) (*p)++, (*n)--;
    while (*n && is_ows((*p)[*n - 1])) (*n)--;
}

static int lower(int c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

static int eq_ci(const char *p, size_t n, const char *lit) {
    size_t i = 0;
    for (; i < n && lit[i]; i++)
        if (lower((unsigned char)p[i]) != lit[i]) return 0;
    return i == n && lit[i] == '\0';
}

/* Does a media-range's parameter list (after its first ';') say q=0? */
static int q_is_zero(const char *p, size_t n) {
    while (n) {
        const char *semi = memchr(p, ';', n);
        size_t len = semi ? (size_t)(semi - p) : n;
        const char *s = p;
        size_t m = len;
        trim(&s, &m);
        if (m >= 2 && lower((unsigned char)s[0]) == 'q' && s[1] == '=') {
            s += 2, m -= 2;
            if (!m || s[0] != '0') return 0;
            for (size_t i = 1; i < m; i++)
                if (s[i] != '0' && s[i] != '.') return 0;
            return 1;
        }
        if (!semi) break;
        p = semi + 1, n -= len + 1;
    }
    return 0;
}

/* Does Accept allow `type` ("application/json"), by name, its type's
 * wildcard (`wild`: application/ and a star), or star/star, without q=0? */
static int accept_allows(const char *p, size_t n, const char *type, const char *wild) {
    while (n) {
        const char *comma = memchr(p, ',', n);
        size_t len = comma ? (size_t)(comma - p) : n;
        const char *semi = memchr(p, ';', len);
        const char *t = p;
        size_t tn = semi ? (size_t)(semi - p) : len;
        trim(&t, &tn);
        if (eq_ci(t, tn, type) || eq_ci(t, tn, wild) || eq_ci(t, tn, "*/*")) {
            if (!semi || !q_is_zero(semi + 1, len - (size_t)(semi + 1 - p))) return 1;
        }
        if (!comma) break;
        p = comma + 1, n -= len + 1;
    }
    return 0;
}

int th_accept_allows_json(const char *p, size_t n) {
    return accept_allows(p, n, "application/json", "application/*");
}

int th_accept_allows_sse(const char *p, size_t n) {
    return accept_allows(p, n, "text/event-stream", "text/*");
}

int th_content_type_is_json(const char *p, size_t n) {
    const char *semi = memchr(p, ';', n);
    size_t tn = semi ? (size_t)(semi - p) : n;
    trim(&p, &tn);
    return eq_ci(p, tn, "application/json");
}

/* A header against a body string: the header's "=?base64?...?=" form
 * decoded first, by the SDK's one strict decoder (a non-canonical base64
 * never matches). */
int th_header_matches(const mcpg_host *h, const char *hv, size_t hn, const mcpg_json_span *s) {
    char buf[TH_NAME_MAX];
    const char *text;
    size_t len;
    if (mcpg_header_value_decode(hv, hn, buf, sizeof buf, &text, &len) != 0) return 0;
    return h->json_string_eq(s, text, len) == 1;
}

/* ---- the JSON-RPC envelope ----------------------------------------------- */

enum { F_JSONRPC = 1, F_ID = 2, F_METHOD = 4, F_PARAMS = 8 };

typedef struct rpc_parts {
    mcpg_json_span jsonrpc, id, method, params;
    unsigned seen;
    int dup;
} rpc_parts;

/* A member name (or short string) equal to a literal: most are not escaped
 * and are told by their length and bytes, without a call through the host
 * table; an escaped one is decoded by the SDK's compare. */
static inline int key_eq(const mcpg_host *h, const mcpg_json_span *k, const char *lit, size_t n) {
    if (!k->escaped) return k->n == n && memcmp(k->p, lit, n) == 0;
    return h->json_string_eq(k, lit, n) == 1;
}

static void take(unsigned bit, unsigned *seen, int *dup, mcpg_json_span *dst,
                 const mcpg_json_span *val) {
    if (*seen & bit) *dup = 1;
    else *dst = *val, *seen |= bit;
}

static int scan_top(const mcpg_host *h, const char *obj, size_t n, rpc_parts *r) {
    size_t iter = 0;
    mcpg_json_span k, val;
    int rc;
    while ((rc = h->json_object_next(obj, n, &iter, &k, &val)) == 1) {
        if (key_eq(h, &k, "jsonrpc", 7)) take(F_JSONRPC, &r->seen, &r->dup, &r->jsonrpc, &val);
        else if (key_eq(h, &k, "id", 2)) take(F_ID, &r->seen, &r->dup, &r->id, &val);
        else if (key_eq(h, &k, "method", 6)) take(F_METHOD, &r->seen, &r->dup, &r->method, &val);
        else if (key_eq(h, &k, "params", 6)) take(F_PARAMS, &r->seen, &r->dup, &r->params, &val);
    }
    return rc;
}

/* The raw JSON text of a value span (strings keep their quotes). */
static th_piece raw_of(const mcpg_json_span *s) {
    if (s->type == MCPG_JSON_STRING) return (th_piece){s->p - 1, s->n + 2};
    return (th_piece){s->p, s->n};
}

/* id: a string or an integer that fits int64. */
static int id_valid(const mcpg_host *h, const mcpg_json_span *id) {
    int64_t tmp;
    if (id->type == MCPG_JSON_STRING) return 1;
    return id->type == MCPG_JSON_NUMBER && h->json_int64(id, &tmp) == 0;
}

/* Checks the envelope; on success leaves v->id set and returns 1. */
static int check_envelope(const mcpg_host *h, const char *body, size_t n, rpc_parts *r,
                          th_mcp_verdict *v) {
    /* An object is validated by walking its members (the scanner checks
     * each value as it passes it, and what follows the closing brace), so
     * only a body that is not an object needs a separate validation pass to
     * tell a parse error from a wrong shape. */
    int parsed = (n && body[0] == '{') ? scan_top(h, body, n, r) >= 0 : h->json_validate(body, n) >= 0;
    if (!parsed) {
        fail(v, 400, MCPG_RPC_PARSE_ERROR, MSG("Parse error: the body is not valid JSON"));
        return 0;
    }
    if (body[0] == '[') {
        fail(v, 400, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: batches are not supported"));
        return 0;
    }
    if (body[0] != '{') {
        fail(v, 400, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: the body must be one JSON-RPC request object"));
        return 0;
    }
    int has_id = (r->seen & F_ID) != 0;
    if (has_id && id_valid(h, &r->id)) v->id = raw_of(&r->id);
    if (r->dup) {
        fail(v, 400, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: duplicate member"));
        return 0;
    }
    if (!(r->seen & F_JSONRPC) || r->jsonrpc.type != MCPG_JSON_STRING ||
        h->json_string_eq(&r->jsonrpc, "2.0", 3) != 1) {
        fail(v, 400, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: jsonrpc must be \\\"2.0\\\""));
        return 0;
    }
    if (!(r->seen & F_METHOD) || r->method.type != MCPG_JSON_STRING || r->method.n == 0) {
        fail(v, 400, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: method must be a non-empty string"));
        return 0;
    }
    if (has_id && !id_valid(h, &r->id)) {
        fail(v, 400, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: id must be a string or an integer"));
        return 0;
    }
    return 1;
}

/* ---- params, _meta and headers ------------------------------------------- */

enum { P_META = 1, P_NAME = 2, P_ARGS = 4, P_URI = 8, P_NOTIF = 16, P_TASK = 32 };

typedef struct param_parts {
    mcpg_json_span meta, name, args, uri, notif, task;
    unsigned seen;
    int dup;
    /* _meta's members the gateway reads, found in one walk of it (scan_meta);
     * each count is how often the member appeared (2 = more than once) */
    mcpg_json_span version, caps, log;
    unsigned char n_version, n_caps, n_log;
} param_parts;

/* params was validated as a whole while the envelope was walked (scan_top),
 * so its members are found by the SDK's trusted walk, not validated twice. */
static int scan_params(const mcpg_host *h, const mcpg_json_span *params, param_parts *pp) {
    size_t iter = 0;
    mcpg_json_span k, val;
    int rc;
    while ((rc = mcpg_json_object_next_trusted(params->p, params->n, &iter, &k, &val)) == 1) {
        if (key_eq(h, &k, "_meta", 5)) take(P_META, &pp->seen, &pp->dup, &pp->meta, &val);
        else if (key_eq(h, &k, "name", 4)) take(P_NAME, &pp->seen, &pp->dup, &pp->name, &val);
        else if (key_eq(h, &k, "arguments", 9)) take(P_ARGS, &pp->seen, &pp->dup, &pp->args, &val);
        else if (key_eq(h, &k, "uri", 3)) take(P_URI, &pp->seen, &pp->dup, &pp->uri, &val);
        else if (key_eq(h, &k, "notifications", 13))
            take(P_NOTIF, &pp->seen, &pp->dup, &pp->notif, &val);
        else if (key_eq(h, &k, "taskId", 6))
            take(P_TASK, &pp->seen, &pp->dup, &pp->task, &val);
    }
    return rc;
}

static const char *const k_levels[] = {"debug", "info", "notice", "warning",
                                       "error", "critical", "alert", "emergency"};

int th_log_level_of(const char *p, size_t n) {
    for (int i = 0; i < 8; i++)
        if (strlen(k_levels[i]) == n && !memcmp(k_levels[i], p, n)) return i;
    return -1;
}

static const char k_meta_version_key[] = "io.modelcontextprotocol/protocolVersion";
static const char k_meta_caps_key[] = "io.modelcontextprotocol/clientCapabilities";
static const char k_meta_log_key[] = "io.modelcontextprotocol/logLevel";

/* A member of params._meta: 1 found once (*out set), 0 absent, -1 present
 * twice. Found with a walk rather than a lookup (which stops at the first)
 * because, like the members above, a duplicate is refused: a backend whose
 * parser keeps the last one would read another value than was checked. */
static int meta_member(const mcpg_host *h, const mcpg_json_span *meta, const char *key,
                       size_t klen, mcpg_json_span *out) {
    size_t iter = 0;
    mcpg_json_span k, val;
    int found = 0;
    while (mcpg_json_object_next_trusted(meta->p, meta->n, &iter, &k, &val) == 1) {
        if (h->json_string_eq(&k, key, klen) != 1) continue;
        if (found) return -1;
        *out = val;
        found = 1;
    }
    return found;
}

static void count_member(unsigned char *count, mcpg_json_span *dst, const mcpg_json_span *val) {
    if (*count == 0) *dst = *val;
    if (*count < 2) (*count)++;
}

/* The three members of params._meta, in one walk (a duplicate of any is
 * refused, as meta_member says why). */
static void scan_meta(const mcpg_host *h, param_parts *pp) {
    if (!(pp->seen & P_META)) return;
    size_t iter = 0;
    mcpg_json_span k, val;
    while (mcpg_json_object_next_trusted(pp->meta.p, pp->meta.n, &iter, &k, &val) == 1) {
        if (key_eq(h, &k, k_meta_version_key, sizeof k_meta_version_key - 1))
            count_member(&pp->n_version, &pp->version, &val);
        else if (key_eq(h, &k, k_meta_caps_key, sizeof k_meta_caps_key - 1))
            count_member(&pp->n_caps, &pp->caps, &val);
        else if (key_eq(h, &k, k_meta_log_key, sizeof k_meta_log_key - 1))
            count_member(&pp->n_log, &pp->log, &val);
    }
}

/* meta_member's answer from a count: 1 once, 0 absent, -1 more than once. */
static int found_of(unsigned char count) { return count > 1 ? -1 : count; }

int th_meta_has_version(const mcpg_host *h, const char *params, size_t n) {
    mcpg_json_span meta, pv;
    if (!params || h->json_object_get(params, n, "_meta", &meta) != 1 ||
        meta.type != MCPG_JSON_OBJECT)
        return 0;
    return meta_member(h, &meta, k_meta_version_key, sizeof k_meta_version_key - 1, &pv) != 0;
}

/* _meta's clientCapabilities: a required member of the envelope, an object
 * (-32602 when missing, as for any envelope member; -32021 is for a call
 * that needs a capability the client did not declare, and only the backend
 * serving it knows that). */
static int check_caps(const mcpg_host *h, const param_parts *pp, th_mcp_verdict *v) {
    mcpg_json_span caps = pp->caps;
    int found = found_of(pp->n_caps);
    if (found < 0) {
        fail(v, 400, MCPG_RPC_INVALID_PARAMS, MSG("Invalid params: duplicate member"));
        return 0;
    }
    if (!found) {
        fail(v, 400, MCPG_RPC_INVALID_PARAMS,
             MSG("Invalid params: params._meta[\\\"io.modelcontextprotocol/clientCapabilities\\\"] "
                 "is required"));
        return 0;
    }
    if (caps.type != MCPG_JSON_OBJECT) {
        fail(v, 400, MCPG_RPC_INVALID_PARAMS, MSG("Invalid params: clientCapabilities must be an object"));
        return 0;
    }
    v->caps = (th_piece){caps.p, caps.n};
    return 1;
}

/* _meta's logLevel: the least severe notifications/message the client wants
 * on this request's stream; absent, it wants none (TH_LOG_NONE). */
static int check_log_level(const mcpg_host *h, const param_parts *pp, th_mcp_verdict *v) {
    mcpg_json_span lv = pp->log;
    int found = found_of(pp->n_log);
    v->log_level = TH_LOG_NONE;
    if (!found) return 1;
    int level = found > 0 && lv.type == MCPG_JSON_STRING && !lv.escaped ? th_log_level_of(lv.p, lv.n) : -1;
    if (level < 0) {
        fail(v, 400, MCPG_RPC_INVALID_PARAMS,
             MSG("Invalid params: _meta logLevel must be one logging level (debug ... emergency)"));
        return 0;
    }
    v->log_level = (int8_t)level;
    return 1;
}

/* The _meta envelope and its protocol version; 1 when it is 2026-07-28. */
static int check_meta(const mcpg_host *h, const th_mcp_headers *hd, const rpc_parts *r,
                      param_parts *pp, th_mcp_verdict *v) {
    if (r->seen & F_PARAMS) {
        if (r->params.type != MCPG_JSON_OBJECT || scan_params(h, &r->params, pp) < 0) {
            fail(v, 400, MCPG_RPC_INVALID_PARAMS, MSG("Invalid params: params must be an object"));
            return 0;
        }
        if (pp->dup) {
            fail(v, 400, MCPG_RPC_INVALID_PARAMS, MSG("Invalid params: duplicate member"));
            return 0;
        }
        if ((pp->seen & P_META) && pp->meta.type != MCPG_JSON_OBJECT) {
            fail(v, 400, MCPG_RPC_INVALID_PARAMS, MSG("Invalid params: params._meta must be an object"));
            return 0;
        }
    }
    scan_meta(h, pp);
    mcpg_json_span pv = pp->version;
    int found = found_of(pp->n_version);
    if (found < 0) {
        fail(v, 400, MCPG_RPC_INVALID_PARAMS, MSG("Invalid params: duplicate member"));
        return 0;
    }
    if (!found) {
        v->legacy = 1;
        fail(v, 400, MCPG_RPC_INVALID_PARAMS,
             MSG("Invalid params: the 2026-07-28 `_meta` envelope is required "
                 "(params._meta[\\\"io.modelcontextprotocol/protocolVersion\\\"])"));
        return 0;
    }
    /* a header that disagrees with the body is a mismatch whatever either says:
     * judged before the version itself (an intermediary routed on the header) */
    const th_hval *hv = &hd->protocol_version;
    if (!hv->present) { /* the envelope says 2026-era: its header is required, not inferred */
        fail(v, 400, MCPG_RPC_HEADER_MISMATCH,
             MSG("Header mismatch: the MCP-Protocol-Version header is required"));
        return 0;
    }
    if ((hv->dup || pv.type != MCPG_JSON_STRING || !th_header_matches(h, hv->p, hv->n, &pv))) {
        fail(v, 400, MCPG_RPC_HEADER_MISMATCH,
             MSG("Header mismatch: MCP-Protocol-Version does not match params._meta protocolVersion"));
        return 0;
    }
    if (pv.type != MCPG_JSON_STRING ||
        h->json_string_eq(&pv, TH_PROTOCOL_VERSION, sizeof TH_PROTOCOL_VERSION - 1) != 1) {
        fail(v, 400, MCPG_RPC_UNSUPPORTED_VERSION, MSG("Unsupported protocol version"));
        v->data[0] = TH_LIT("{\"supported\":[\"" TH_PROTOCOL_VERSION "\"],\"requested\":");
        v->data[1] = raw_of(&pv);
        v->data[2] = TH_LIT("}");
        v->ndata = 3;
        return 0;
    }
    v->version = TH_LIT(TH_PROTOCOL_VERSION);
    return 1;
}

/* Mcp-Method (required) against the body (MCP-Protocol-Version: check_meta). */
static int check_headers(const mcpg_host *h, const th_mcp_headers *hd, const rpc_parts *r,
                         th_mcp_verdict *v) {
    if (!hd->method.present) {
        fail(v, 400, MCPG_RPC_HEADER_MISMATCH, MSG("Header mismatch: the Mcp-Method header is required"));
        return 0;
    }
    if (hd->method.dup || !th_header_matches(h, hd->method.p, hd->method.n, &r->method)) {
        fail(v, 400, MCPG_RPC_HEADER_MISMATCH,
             MSG("Header mismatch: the Mcp-Method header does not match the body's method"));
        return 0;
    }
    return 1;
}

/* ---- methods ------------------------------------------------------------- */

enum { M_DISCOVER, M_LIST, M_CALL, M_NAMED, M_URI, M_PLAIN, M_LISTEN, M_TASK, M_EVENT };

static const struct {
    const char *name;
    size_t len;
    uint32_t method;
    int kind;
} k_methods[] = {
    {"server/discover", 15, MCPG_METHOD_OTHER, M_DISCOVER},
    {"tools/list", 10, MCPG_METHOD_TOOLS_LIST, M_LIST},
    {"tools/call", 10, MCPG_METHOD_TOOLS_CALL, M_CALL},
    {"resources/list", 14, MCPG_METHOD_RESOURCES_LIST, M_LIST},
    {"resources/templates/list", 24, MCPG_METHOD_RESOURCES_TEMPLATES_LIST, M_LIST},
    {"resources/read", 14, MCPG_METHOD_RESOURCES_READ, M_URI},
    {"prompts/list", 12, MCPG_METHOD_PROMPTS_LIST, M_LIST},
    {"prompts/get", 11, MCPG_METHOD_PROMPTS_GET, M_NAMED},
    {"completion/complete", 19, MCPG_METHOD_COMPLETION_COMPLETE, M_PLAIN},
    {"subscriptions/listen", 20, MCPG_METHOD_OTHER, M_LISTEN},
    /* the tasks extension: Mcp-Name carries params.taskId */
    {"tasks/get", 9, MCPG_METHOD_TASKS_GET, M_TASK},
    {"tasks/update", 12, MCPG_METHOD_TASKS_UPDATE, M_TASK},
    {"tasks/cancel", 12, MCPG_METHOD_TASKS_CANCEL, M_TASK},
    /* tasks/result and tasks/list are the 2025 wire's only: Method not found */
    /* the events extension: params.name is the event type (the events
     * module says when it is missing); Mcp-Name, when sent, must match it */
    {"events/list", 11, MCPG_METHOD_EVENTS_LIST, M_PLAIN},
    {"events/poll", 11, MCPG_METHOD_EVENTS_POLL, M_EVENT},
    {"events/stream", 13, MCPG_METHOD_EVENTS_STREAM, M_EVENT},
    {"events/subscribe", 16, MCPG_METHOD_EVENTS_SUBSCRIBE, M_EVENT},
    {"events/unsubscribe", 18, MCPG_METHOD_EVENTS_UNSUBSCRIBE, M_EVENT},
};

/* The client's capabilities declare the tasks extension. */
static int declares_tasks(const mcpg_host *h, const th_piece *caps) {
    mcpg_json_span ext, t;
    return caps->p &&
           h->json_object_get(caps->p, caps->n, "extensions", &ext) == 1 &&
           ext.type == MCPG_JSON_OBJECT &&
           h->json_object_get(ext.p, ext.n, "io.modelcontextprotocol/tasks", &t) == 1;
}

/* A method named by params.name (tools/call, prompts/get) or params.uri
 * (resources/read): the member a string (< 256 bytes decoded), equal to
 * Mcp-Name; `field` names it in errors. */
static int check_named(const mcpg_host *h, const th_mcp_headers *hd, const mcpg_json_span *s,
                       int present, char *name_buf, th_mcp_verdict *v) {
    if (!present || s->type != MCPG_JSON_STRING) {
        fail(v, 400, MCPG_RPC_INVALID_PARAMS, MSG("Invalid params: a string params.name (params.uri for resources/read, params.taskId for tasks/...) is required"));
        return 0;
    }
    size_t len = s->n;
    if (s->escaped) {
        if (h->json_string_decode(s, name_buf, TH_NAME_MAX, &len) < 0) len = TH_NAME_MAX;
        v->name = (th_piece){name_buf, len};
    } else {
        v->name = (th_piece){s->p, len};
    }
    if (len >= TH_NAME_MAX) {
        fail(v, 400, MCPG_RPC_INVALID_PARAMS, MSG("Invalid params: params.name is too long"));
        return 0;
    }
    if (!hd->name.present) {
        fail(v, 400, MCPG_RPC_HEADER_MISMATCH, MSG("Header mismatch: the Mcp-Name header is required for this method"));
        return 0;
    }
    if (hd->name.dup || !th_header_matches(h, hd->name.p, hd->name.n, s)) {
        fail(v, 400, MCPG_RPC_HEADER_MISMATCH, MSG("Header mismatch: the Mcp-Name header does not match params.name"));
        return 0;
    }
    return 1;
}

/* An events methods method's params.name, when it is a string: the call's name. */
static void take_event_name(const mcpg_host *h, const th_mcp_headers *hd, const param_parts *pp,
                            char *name_buf, th_mcp_verdict *v) {
    if (!(pp->seen & P_NAME) || pp->name.type != MCPG_JSON_STRING) return;
    if (!hd->name.present) {
        size_t len = pp->name.n;
        if (!pp->name.escaped) v->name = (th_piece){pp->name.p, len};
        else if (h->json_string_decode(&pp->name, name_buf, TH_NAME_MAX, &len) == 0)
            v->name = (th_piece){name_buf, len};
        return;
    }
    (void)check_named(h, hd, &pp->name, 1, name_buf, v);
}

static int check_args(const param_parts *pp, th_mcp_verdict *v) {
    if ((pp->seen & P_ARGS) && pp->args.type != MCPG_JSON_OBJECT) {
        fail(v, 400, MCPG_RPC_INVALID_PARAMS, MSG("Invalid params: params.arguments must be an object"));
        return 0;
    }
    if (pp->seen & P_ARGS) v->args = (th_piece){pp->args.p, pp->args.n};
    return 1;
}

static void route_method(const mcpg_host *h, const th_mcp_headers *hd, const rpc_parts *r,
                         const param_parts *pp, char *name_buf, th_mcp_verdict *v) {
    for (size_t i = 0; i < sizeof k_methods / sizeof k_methods[0]; i++) {
        if (!key_eq(h, &r->method, k_methods[i].name, k_methods[i].len)) continue;
        v->method = k_methods[i].method;
        v->method_name = (th_piece){k_methods[i].name, k_methods[i].len};
        if (r->seen & F_PARAMS) v->params = (th_piece){r->params.p, r->params.n};
        v->action = TH_MCP_SUBMIT;
        v->stamp = TH_STAMP_RESULT_TYPE;
        switch (k_methods[i].kind) {
        case M_DISCOVER: v->action = TH_MCP_DISCOVER; return;
        case M_LIST: v->stamp |= TH_STAMP_CACHE; return;
        case M_CALL:
            if (!check_args(pp, v) || !check_named(h, hd, &pp->name, pp->seen & P_NAME, name_buf, v))
                return;
            return;
        case M_NAMED:
            if (!check_args(pp, v)) return;
            (void)check_named(h, hd, &pp->name, pp->seen & P_NAME, name_buf, v);
            return;
        case M_URI:
            v->stamp |= TH_STAMP_CACHE;
            (void)check_named(h, hd, &pp->uri, pp->seen & P_URI, name_buf, v);
            return;
        case M_TASK:
            if (!declares_tasks(h, &v->caps)) {
                fail(v, 400, MCPG_RPC_MISSING_CLIENT_CAPABILITY,
                     MSG("Missing required client capability: extension io.modelcontextprotocol/tasks"));
                v->data[0] = TH_LIT("{\"requiredCapabilities\":{\"extensions\":"
                                    "{\"io.modelcontextprotocol/tasks\":{}}}}");
                v->ndata = 1;
                return;
            }
            (void)check_named(h, hd, &pp->task, pp->seen & P_TASK, name_buf, v);
            return;
        case M_EVENT: take_event_name(h, hd, pp, name_buf, v); return;
        case M_LISTEN:
            if ((pp->seen & P_NOTIF) && pp->notif.type != MCPG_JSON_OBJECT) {
                fail(v, 400, MCPG_RPC_INVALID_PARAMS, MSG("Invalid params: params.notifications must be an object"));
                return;
            }
            v->action = TH_MCP_LISTEN;
            if (pp->seen & P_NOTIF) v->listen = (th_piece){pp->notif.p, pp->notif.n};
            return;
        default: return; /* M_PLAIN */
        }
    }
    fail(v, 404, MCPG_RPC_METHOD_NOT_FOUND, MSG("Method not found"));
}

static int is_notification(const mcpg_host *h, const mcpg_json_span *method) {
    static const char pre[] = "notifications/";
    const size_t pl = sizeof pre - 1;
    /* compare the raw prefix; an escaped method falls back to decoding it */
    if (!method->escaped) return method->n > pl && !memcmp(method->p, pre, pl);
    char buf[TH_NAME_MAX];
    size_t len = 0;
    return h->json_string_decode(method, buf, sizeof buf, &len) == 0 && len > pl &&
           !memcmp(buf, pre, pl);
}

void th_mcp_check(const mcpg_host *h, const th_mcp_headers *hd, const char *body, size_t n,
                  char *name_buf, th_mcp_verdict *v) {
    memset(v, 0, sizeof *v);
    v->id = TH_LIT("null");
    const char *a = hd->accept.p;
    size_t an = hd->accept.n;
    trim(&a, &an);
    if (hd->accept.present && an && !th_accept_allows_json(a, an)) {
        fail(v, 406, MCPG_RPC_INVALID_REQUEST, MSG("Not Acceptable: Accept must allow application/json"));
        return;
    }
    if (!hd->content_type.present || hd->content_type.dup ||
        !th_content_type_is_json(hd->content_type.p, hd->content_type.n)) {
        fail(v, 415, MCPG_RPC_INVALID_REQUEST, MSG("Unsupported Media Type: Content-Type must be application/json"));
        return;
    }
    while (n && is_json_ws(body[0])) body++, n--;
    while (n && is_json_ws(body[n - 1])) n--;
    rpc_parts r;
    memset(&r, 0, sizeof r);
    if (!check_envelope(h, body, n, &r, v)) return;
    if (!(r.seen & F_ID)) {
        /* MCP names its notifications; any other method without an id is a
         * request that forgot its id, not something to drop silently. */
        if (is_notification(h, &r.method)) {
            v->action = TH_MCP_ACCEPTED;
            return;
        }
        fail(v, 400, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: id is required (only notifications/* may omit it)"));
        return;
    }
    param_parts pp;
    memset(&pp, 0, sizeof pp);
    if (!check_meta(h, hd, &r, &pp, v) || !check_headers(h, hd, &r, v) || !check_caps(h, &pp, v) ||
        !check_log_level(h, &pp, v))
        return;
    route_method(h, hd, &r, &pp, name_buf, v);
}
