/* The one reading of a request that the gateway acts on.
 *
 * Identity, policy, limits, audit and routing judge a call by its method's
 * target (a tool or prompt name, a resource uri, a completion's ref, a task
 * id) and its arguments; the backend runs what it is handed. Both must be
 * the same request. So, before anything else looks at a call:
 *
 *   - params (when present) is an object, and no object in it, at any depth,
 *     names a member twice: a server behind the gateway may keep the other
 *     one (mcpg_json_unique);
 *   - the target is read from the method's own member only (a tools/call's
 *     name, never a uri beside it), must be a string, is decoded, and must
 *     hold no NUL (a name compared as a C string would stop there while the
 *     server reads on); its length is carried with it;
 *   - arguments, where the method has them, are an object;
 *   - what every backend reads (host->call_params) holds only the members
 *     the method defines, the target written as it was judged: members that
 *     do not belong never reach a backend.
 *
 * A request that fails any of these is answered -32602 and reaches no
 * stage and no backend. */
#include "call_internal.h"

#include <stdio.h>
#include <string.h>

/* Where a method keeps its target, and the params members it defines. NULL
 * `members`: the method's params pass as they are (after the checks). */
typedef struct method_shape {
    const char *target;           /* params member naming the item, or NULL */
    const char *target_key;       /* "params.<target>", for the messages naming it */
    const char *const *members;   /* NULL-ended */
    bool arguments;               /* params.arguments, when present, is an object */
} method_shape;

static const char *const k_tool_call[] = {"name", "arguments", "_meta", "task",
                                          "requestState", "inputResponses", NULL};
static const char *const k_prompt_get[] = {"name", "arguments", "_meta", "requestState",
                                           "inputResponses", NULL};
static const char *const k_resource_read[] = {"uri", "_meta", "requestState", "inputResponses",
                                              NULL};
static const char *const k_subscribe[] = {"uri", "_meta", NULL};
static const char *const k_complete[] = {"ref", "argument", "context", "_meta", NULL};
static const char *const k_task[] = {"taskId", "_meta", NULL};
static const char *const k_list[] = {"cursor", "_meta", NULL};

static method_shape shape_of(uint32_t method) {
    switch (method) {
    case MCPG_METHOD_TOOLS_CALL: return (method_shape){"name", "params.name", k_tool_call, true};
    case MCPG_METHOD_PROMPTS_GET: return (method_shape){"name", "params.name", k_prompt_get, true};
    case MCPG_METHOD_RESOURCES_READ: return (method_shape){"uri", "params.uri", k_resource_read, false};
    case MCPG_METHOD_RESOURCES_SUBSCRIBE:
    case MCPG_METHOD_RESOURCES_UNSUBSCRIBE: return (method_shape){"uri", "params.uri", k_subscribe, false};
    case MCPG_METHOD_COMPLETION_COMPLETE: return (method_shape){NULL, NULL, k_complete, false};
    case MCPG_METHOD_TASKS_GET:
    case MCPG_METHOD_TASKS_RESULT:
    case MCPG_METHOD_TASKS_CANCEL: return (method_shape){"taskId", "params.taskId", k_task, false};
    /* tasks/update carries the client's answers beside its id */
    case MCPG_METHOD_TASKS_UPDATE: return (method_shape){"taskId", "params.taskId", NULL, false};
    case MCPG_METHOD_TOOLS_LIST:
    case MCPG_METHOD_RESOURCES_LIST:
    case MCPG_METHOD_RESOURCES_TEMPLATES_LIST:
    case MCPG_METHOD_PROMPTS_LIST:
    case MCPG_METHOD_TASKS_LIST: return (method_shape){NULL, NULL, k_list, false};
    case MCPG_METHOD_EVENTS_LIST:
    case MCPG_METHOD_EVENTS_POLL:
    case MCPG_METHOD_EVENTS_STREAM:
    case MCPG_METHOD_EVENTS_SUBSCRIBE:
    case MCPG_METHOD_EVENTS_UNSUBSCRIBE: return (method_shape){"name", "params.name", NULL, false};
    default: return (method_shape){NULL, NULL, NULL, false};
    }
}

static bool key_is(const mcpg_json_span *k, const char *name) {
    size_t n = strlen(name);
    if (!k->escaped) return k->n == n && !memcmp(k->p, name, n); /* most names: no decoding */
    return mcpg_json_string_eq(k, name, n) == 1;
}

static bool member_defined(const method_shape *s, const mcpg_json_span *k) {
    for (const char *const *m = s->members; *m; m++)
        if (key_is(k, *m)) return true;
    return false;
}

/* "Invalid params: <what> <problem>" */
static int refuse(mcpg_call *c, const char *what, const char *problem) {
    call_set_error(c, MCPG_RPC_INVALID_PARAMS, 400, "Invalid params: %s %s", what, problem);
    return -1;
}

/* A target string, decoded into out (a NUL in it refused). 0, or -1 with
 * the error set. `what` names it for the message ("params.name"). */
static int decode_target(mcpg_call *c, const mcpg_json_span *v, const char *what, mcpg_buf *out) {
    if (v->type != MCPG_JSON_STRING) return refuse(c, what, "must be a string");
    out->len = 0;
    if (mcpg_buf_reserve(out, v->n + 1)) return refuse(c, what, "out of memory");
    size_t len = 0;
    if (mcpg_json_string_decode(v, out->data, v->n + 1, &len))
        return refuse(c, what, "is not a valid string");
    if (memchr(out->data, '\0', len))
        return refuse(c, what, "holds a NUL character");
    out->len = len;
    return 0;
}

/* completion/complete's ref: {"type":"ref/prompt","name"} or
 * {"type":"ref/resource","uri"}; its id decoded into c->judged_name.
 * *canonical: the ref as judged ({"type":..,"name"|"uri":..}), written into
 * c->judged_ref. */
static int judge_ref(mcpg_call *c, const mcpg_json_span *ref) {
    mcpg_json_span type, id;
    if (ref->type != MCPG_JSON_OBJECT)
        return refuse(c, "params.ref", "must be an object");
    if (mcpg_json_object_get(ref->p, ref->n, "type", &type) != 1 || type.type != MCPG_JSON_STRING)
        return refuse(c, "params.ref.type", "must be a string");
    bool prompt = mcpg_json_string_eq(&type, "ref/prompt", 10) == 1;
    if (!prompt && mcpg_json_string_eq(&type, "ref/resource", 12) != 1)
        return refuse(c, "params.ref.type", "must be ref/prompt or ref/resource");
    const char *key = prompt ? "name" : "uri";
    if (mcpg_json_object_get(ref->p, ref->n, key, &id) != 1)
        return refuse(c, prompt ? "params.ref.name" : "params.ref.uri", "is missing");
    if (decode_target(c, &id, prompt ? "params.ref.name" : "params.ref.uri", &c->judged_name))
        return -1;
    c->ref_is_prompt = prompt;
    c->ref_judged = true;
    mcpg_buf *b = &c->judged_ref;
    b->len = 0;
    if (mcpg_buf_printf(b, "{\"type\":\"%s\",\"%s\":", prompt ? "ref/prompt" : "ref/resource", key) ||
        mcpg_buf_append_json_string(b, c->judged_name.data, c->judged_name.len) ||
        mcpg_buf_append(b, "}", 1))
        return refuse(c, "params.ref", "out of memory");
    return 0;
}

/* params as every backend reads them: the defined members in the client's
 * order, each name spelled plainly, the target (and a completion's ref) as
 * judged. */
static int rebuild(mcpg_call *c, const method_shape *s, const char *p, size_t n) {
    mcpg_buf *b = &c->judged_params;
    b->len = 0;
    int rc = mcpg_buf_append(b, "{", 1);
    size_t iter = 0;
    mcpg_json_span k, v;
    while (!rc && mcpg_json_object_next_trusted(p, n, &iter, &k, &v) == 1) {
        if (s->members && !member_defined(s, &k)) continue;
        if (b->len > 1) rc |= mcpg_buf_append(b, ",", 1);
        size_t kn = 0;
        char name[64];
        if (k.escaped ? mcpg_json_string_decode(&k, name, sizeof name, &kn) != 0 : k.n >= sizeof name) {
            /* a name this long is never one the gateway reads: passed as written */
            rc |= mcpg_buf_append(b, k.p - 1, k.n + 2);
        } else {
            if (!k.escaped) memcpy(name, k.p, k.n), kn = k.n;
            rc |= mcpg_buf_append_json_string(b, name, kn);
        }
        rc |= mcpg_buf_append(b, ":", 1);
        if (s->target && key_is(&k, s->target))
            rc |= mcpg_buf_append_json_string(b, c->judged_name.data, c->judged_name.len);
        else if (c->method == MCPG_METHOD_COMPLETION_COMPLETE && key_is(&k, "ref"))
            rc |= mcpg_buf_append(b, c->judged_ref.data, c->judged_ref.len);
        else if (v.type == MCPG_JSON_STRING)
            rc |= mcpg_buf_append(b, v.p - 1, v.n + 2);
        else
            rc |= mcpg_buf_append(b, v.p, v.n);
    }
    rc |= mcpg_buf_append(b, "}", 1);
    if (rc) return refuse(c, "params", "out of memory");
    c->d.params_json = b->data;
    c->d.params_len = b->len;
    return 0;
}

/* text[0..n) is exactly one JSON value, whitespace around it allowed: 1
 * with its span in *v and, in *unique, mcpg_json_unique's answer for it
 * (*dup as it says), found in the same read. Anything after the value would
 * reach a backend unjudged. */
static bool one_value(const char *text, size_t n, mcpg_json_span *v, int *unique,
                      mcpg_json_span *dup) {
    size_t pos = 0;
    if (mcpg_json_value_unique(text, n, &pos, v, unique, dup) != 1) return false;
    while (pos < n && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
        pos++;
    return pos == n;
}

/* A call without params (a transport that hands the kernel its target and
 * arguments directly): those are all a backend sees, so they are what is
 * judged, under the same rules. */
static int judge_bare(mcpg_call *c) {
    mcpg_call_desc *d = &c->d;
    if (d->name && memchr(d->name, '\0', d->name_len)) return refuse(c, "the name", "holds a NUL character");
    if (!d->args_json) return 0;
    mcpg_json_span args;
    int u;
    if (!one_value(d->args_json, d->args_len, &args, &u, NULL) || args.type != MCPG_JSON_OBJECT)
        return refuse(c, "params.arguments", "must be an object");
    d->args_json = args.p, d->args_len = args.n;
    c->args_judged = u == 0;
    if (u == 1) return refuse(c, "params.arguments", "names a member twice");
    if (u == 2) return refuse(c, "a member name in params.arguments", "holds a NUL character");
    return u ? refuse(c, "params.arguments", "is not valid JSON") : 0;
}

int call_judge(mcpg_call *c) {
    mcpg_call_desc *d = &c->d;
    method_shape s = shape_of(c->method);
    const char *p = d->params_json;
    size_t n = d->params_len;
    if (!p) return judge_bare(c);
    /* with params, the transport's reading of the target and arguments is
     * not used: the ones below are the only ones */
    d->name = NULL, d->name_len = 0;
    d->args_json = NULL, d->args_len = 0;
    mcpg_json_span params, dup;
    int u;
    if (!one_value(p, n, &params, &u, &dup) || params.type != MCPG_JSON_OBJECT)
        return refuse(c, "params", "must be an object");
    d->params_json = params.p, d->params_len = params.n; /* the value itself, nothing around it */
    if (u == 1) {
        int shown = dup.n < 64 ? (int)dup.n : 64;
        call_set_error(c, MCPG_RPC_INVALID_PARAMS, 400, "Invalid params: duplicate member \"%.*s\"",
                       shown, dup.p);
        return -1;
    }
    if (u == 2) return refuse(c, "a member name in params", "holds a NUL character");
    if (u != 0) return refuse(c, "params", "is not valid JSON");
    bool foreign = false, reshaped = false;
    size_t iter = 0;
    mcpg_json_span k, v;
    while (mcpg_json_object_next_trusted(params.p, params.n, &iter, &k, &v) == 1) {
        if (s.members && !member_defined(&s, &k)) {
            foreign = true;
            continue;
        }
        reshaped |= k.escaped != 0;
        if (s.target && key_is(&k, s.target)) {
            if (decode_target(c, &v, s.target_key, &c->judged_name)) return -1;
            d->name = c->judged_name.data;
            d->name_len = c->judged_name.len;
            reshaped |= v.escaped != 0;
        } else if (s.arguments && key_is(&k, "arguments")) {
            if (v.type != MCPG_JSON_OBJECT)
                return refuse(c, "params.arguments", "must be an object");
            d->args_json = v.p;
            d->args_len = v.n;
            c->args_judged = true; /* inside params, validated whole above */
        } else if (c->method == MCPG_METHOD_COMPLETION_COMPLETE && key_is(&k, "ref")) {
            if (judge_ref(c, &v)) return -1;
            reshaped = true;
        } else if (key_is(&k, "requestState")) {
            c->has_request_state = true; /* a retry: its seal is checked after identity */
        }
    }
    if (foreign || reshaped) return rebuild(c, &s, params.p, params.n);
    return 0;
}
