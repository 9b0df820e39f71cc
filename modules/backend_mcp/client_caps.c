/* backend_mcp: what a client may be asked.
 *
 * A server must not send sampling, elicitation or roots requests to a
 * client that did not declare the capability (and, for elicitation, the
 * mode: "elicitation":{} declares form only; url mode needs "url"). The
 * gateway shares one session with a legacy upstream among every client, so
 * the upstream cannot know who it is asking: each question is checked here
 * against the capabilities of the client whose call it came on. */
#include <stdio.h>
#include <string.h>

#include "upstream.h"

static bool member_object(const char *json, size_t n, const char *key, mcpg_json_span *v) {
    return json && mcpg_json_object_get(json, n, key, v) == 1 && v->type == MCPG_JSON_OBJECT;
}

static bool member_present(const char *json, size_t n, const char *key) {
    mcpg_json_span v;
    return json && mcpg_json_object_get(json, n, key, &v) == 1;
}

static bool method_is(const char *m, size_t n, const char *want) {
    return n == strlen(want) && memcmp(m, want, n) == 0;
}

/* An elicitation asks in url mode when params.mode says so; form otherwise
 * (the mode is optional for form). */
static bool url_mode(const char *params, size_t pn) {
    mcpg_json_span mode;
    return params && mcpg_json_object_get(params, pn, "mode", &mode) == 1 &&
           mcpg_json_string_eq(&mode, "url", 3) == 1;
}

uint32_t caps_needed(const char *caps, const char *method, size_t ml, const char *params,
                     size_t pn) {
    size_t cn = caps ? strlen(caps) : 0;
    mcpg_json_span c, unused;
    if (method_is(method, ml, "sampling/createMessage")) {
        if (!member_object(caps, cn, "sampling", &c)) return NEED_SAMPLING;
        bool tools = params && (member_present(params, pn, "tools") ||
                                member_present(params, pn, "toolChoice"));
        return tools && !member_object(c.p, c.n, "tools", &unused) ? NEED_SAMPLING_TOOLS : 0;
    }
    if (method_is(method, ml, "elicitation/create")) {
        bool url = url_mode(params, pn);
        if (!member_object(caps, cn, "elicitation", &c)) return url ? NEED_ELICIT_URL : NEED_ELICIT;
        bool has_url = member_object(c.p, c.n, "url", &unused);
        bool has_form = member_object(c.p, c.n, "form", &unused) || !has_url;
        if (url) return has_url ? 0 : NEED_ELICIT_URL | NEED_MODE;
        return has_form ? 0 : NEED_ELICIT_FORM | NEED_MODE;
    }
    if (method_is(method, ml, "roots/list"))
        return member_object(caps, cn, "roots", &unused) ? 0 : NEED_ROOTS;
    /* a 2025-11-25 client that runs requests as tasks (its "tasks"
     * capability) answers the tasks methods about them */
    if (ml > 6 && !memcmp(method, "tasks/", 6))
        return member_object(caps, cn, "tasks", &unused) ? 0 : NEED_METHOD;
    /* sampling, elicitation and roots are all else an MCP client answers (the
     * upstream's ping is answered before this); anything else would be
     * passed to a client as a question no revision defines */
    return NEED_METHOD;
}

int caps_required_json(uint32_t need, mcpg_buf *out) {
    int rc = mcpg_buf_puts(out, "{\"requiredCapabilities\":{");
    size_t first = out->len;
    if (need & (NEED_SAMPLING | NEED_SAMPLING_TOOLS))
        rc |= mcpg_buf_puts(out, need & NEED_SAMPLING_TOOLS ? "\"sampling\":{\"tools\":{}}"
                                                            : "\"sampling\":{}");
    if (need & (NEED_ELICIT | NEED_ELICIT_FORM | NEED_ELICIT_URL)) {
        if (out->len > first) rc |= mcpg_buf_puts(out, ",");
        rc |= mcpg_buf_puts(out, "\"elicitation\":{");
        if (need & NEED_ELICIT_FORM) rc |= mcpg_buf_puts(out, "\"form\":{}");
        if (need & NEED_ELICIT_URL)
            rc |= mcpg_buf_puts(out, need & NEED_ELICIT_FORM ? ",\"url\":{}" : "\"url\":{}");
        rc |= mcpg_buf_puts(out, "}");
    }
    if (need & NEED_ROOTS) {
        if (out->len > first) rc |= mcpg_buf_puts(out, ",");
        rc |= mcpg_buf_puts(out, "\"roots\":{}");
    }
    return rc | mcpg_buf_puts(out, "}}");
}

/* The error a question the client cannot take is answered with, as the
 * official TypeScript SDK's client answers it: a capability it never
 * declared has no handler there, so -32601 Method not found; elicitation
 * declared without the mode asked (or sampling without tools, for a request
 * with tools), -32602 naming what is missing. */
void caps_refusal(uint32_t need, const char *method, int64_t *code, char *msg, size_t cap) {
    *code = need & (NEED_MODE | NEED_SAMPLING_TOOLS) ? MCPG_RPC_INVALID_PARAMS
                                                     : MCPG_RPC_METHOD_NOT_FOUND;
    if (need & NEED_METHOD)
        snprintf(msg, cap, "Method not found: %s is not a request a client answers", method);
    else if (need & NEED_MODE)
        snprintf(msg, cap, "Client does not support %s-mode elicitation requests",
                 need & NEED_ELICIT_URL ? "URL" : "form");
    else if (need & NEED_SAMPLING_TOOLS)
        snprintf(msg, cap, "Client does not support tool use in sampling requests");
    else
        snprintf(msg, cap, "Method not found: the client did not declare the capability %s needs",
                 method);
}

uint32_t caps_needed_by_round(const char *caps, const char *result, size_t n) {
    mcpg_json_span reqs, k, v, m, params;
    if (mcpg_json_object_get(result, n, "inputRequests", &reqs) != 1 ||
        reqs.type != MCPG_JSON_OBJECT)
        return 0;
    uint32_t need = 0;
    size_t it = 0;
    while (mcpg_json_object_next(reqs.p, reqs.n, &it, &k, &v) == 1) {
        if (v.type != MCPG_JSON_OBJECT || mcpg_json_object_get(v.p, v.n, "method", &m) != 1 ||
            m.type != MCPG_JSON_STRING)
            continue;
        bool hp = mcpg_json_object_get(v.p, v.n, "params", &params) == 1;
        need |= caps_needed(caps, m.p, m.n, hp ? params.p : NULL, hp ? params.n : 0);
    }
    /* an input request of no defined method is the upstream's to answer for:
     * passed on as it came, not named as a missing capability */
    return need & ~(uint32_t)(NEED_MODE | NEED_METHOD);
}
