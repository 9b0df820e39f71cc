#define _GNU_SOURCE /* memmem */
/* Custom headers (2026-07-28 wire): a tool whose inputSchema marks an
 * argument with "x-mcp-header" has its client mirror that argument in an
 * Mcp-Param-<name> header, so an intermediary can route on it without
 * reading the body. The gateway reads the body, so it must hold the two to
 * agree: a proxy that trusted the header could be sent one value while the
 * backend runs another.
 *
 * The annotations are read once per catalog build (param_headers_of_tool);
 * a call compares its arguments with its headers (param_headers_verdict)
 * after identity and policy, where an unknown tool is also answered, so a
 * caller who may call nothing cannot learn from a -32020 which tools exist. */
#include "kernel.h"

#include <stdio.h>
#include <string.h>

bool param_headers_of_tool(const mcpg_json_span *item, mcpg_param_headers *out, char *why,
                           size_t why_cap) {
    mcpg_json_span schema;
    *out = (mcpg_param_headers){0};
    if (mcpg_json_object_get(item->p, item->n, "inputSchema", &schema) != 1 ||
        schema.type != MCPG_JSON_OBJECT)
        return true;
    /* most schemas never name the annotation: no walk for them (an escaped
     * spelling of the name holds a backslash, so those are walked too) */
    if (!memmem(schema.p, schema.n, "x-mcp-header", 12) && !memchr(schema.p, '\\', schema.n))
        return true;
    return mcpg_param_headers_parse(schema.p, schema.n, out, why, why_cap) == 0;
}

/* "region" or "filter.region": the argument a header mirrors, for messages. */
static void arg_path(const mcpg_param_header *p, char *dst, size_t cap) {
    size_t at = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < p->depth && at + 1 < cap; i++) {
        int n = snprintf(dst + at, cap - at, "%s%s", i ? "." : "", p->path[i]);
        if (n < 0) break;
        at += (size_t)n;
    }
}

static void say(const mcpg_param_header *p, int verdict, char *msg, size_t cap) {
    char arg[200];
    arg_path(p, arg, sizeof arg);
    switch (verdict) {
    case MCPG_PARAM_MISSING:
        snprintf(msg, cap, "Header mismatch: the Mcp-Param-%s header is required "
                 "(arguments.%s is set)", p->name, arg);
        break;
    case MCPG_PARAM_UNEXPECTED:
        snprintf(msg, cap, "Header mismatch: the Mcp-Param-%s header was sent but "
                 "arguments.%s is absent", p->name, arg);
        break;
    case MCPG_PARAM_BAD_BASE64:
        snprintf(msg, cap, "Header mismatch: the Mcp-Param-%s header's =?base64?...?= value "
                 "is not valid base64", p->name);
        break;
    default:
        snprintf(msg, cap, "Header mismatch: the Mcp-Param-%s header does not match "
                 "arguments.%s", p->name, arg);
    }
}

int param_headers_verdict(const mcpg_param_headers *ph, const char *args, size_t n,
                          param_header_fn header, void *ctx, char *msg, size_t cap) {
    for (size_t i = 0; i < ph->n; i++) {
        const mcpg_param_header *p = &ph->v[i];
        size_t hn = 0;
        const char *hv = header ? header(ctx, p->lname, &hn) : NULL;
        int verdict = mcpg_param_header_check(p, args, n, hv, hn);
        if (verdict != MCPG_PARAM_OK) {
            say(p, verdict, msg, cap);
            return verdict;
        }
    }
    return MCPG_PARAM_OK;
}
