/* backend_mcp: the Mcp-Param headers of a call to a stateless upstream.
 *
 * A tool whose inputSchema marks an argument with "x-mcp-header" wants
 * that argument mirrored in an Mcp-Param-<name> header, and a 2026-07-28
 * server refuses the call without it (-32020). The gateway is the client
 * toward the upstream: the body it sends is the one it judged, so the
 * headers are built from that body's arguments and the upstream's own
 * annotations (never copied from the gateway's client, whose headers
 * describe the client's request, not this one).
 *
 * The annotations are read once per tools list (params_index, on the I/O
 * thread) and kept for the tools that have any; a call looks its tool up
 * under up->lock, on the op's thread. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "upstream.h"

struct param_tool {
    char *name;               /* the upstream's own tool name */
    mcpg_param_headers headers;
};

static void free_tools(param_tool *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(t[i].name);
        mcpg_param_headers_free(&t[i].headers);
    }
    free(t);
}

/* One listed tool's annotations, appended to *v when it has any (a tool
 * whose annotations are invalid is not offered by the gateway: skipped). */
static int index_tool(const mcpg_json_span *item, param_tool **v, size_t *n) {
    mcpg_json_span name, schema;
    if (mcpg_json_object_get(item->p, item->n, "inputSchema", &schema) != 1 ||
        schema.type != MCPG_JSON_OBJECT ||
        (!memmem(schema.p, schema.n, "x-mcp-header", 12) && !memchr(schema.p, '\\', schema.n)) ||
        mcpg_json_object_get(item->p, item->n, "name", &name) != 1 ||
        name.type != MCPG_JSON_STRING)
        return 0;
    mcpg_param_headers ph;
    if (mcpg_param_headers_parse(schema.p, schema.n, &ph, NULL, 0) != 0 || !ph.n) return 0;
    param_tool *grown = realloc(*v, (*n + 1) * sizeof **v);
    char *copy = malloc(name.n + 1);
    size_t len = 0;
    if (grown) *v = grown;
    if (!grown || !copy || mcpg_json_string_decode(&name, copy, name.n + 1, &len) != 0) {
        free(copy);
        mcpg_param_headers_free(&ph);
        return grown ? 0 : MCPG_ENOMEM;
    }
    (*v)[(*n)++] = (param_tool){copy, ph};
    return 0;
}

void params_index(upstream *up) {
    param_tool *v = NULL;
    size_t n = 0;
    mcpg_buf list = {0};
    if (up_list_copy(up, LIST_TOOLS, &list) == 0 && list.data) {
        size_t it = 0;
        mcpg_json_span item;
        while (mcpg_json_array_next(list.data, list.len, &it, &item) == 1)
            if (item.type == MCPG_JSON_OBJECT && index_tool(&item, &v, &n) != 0) break;
    }
    mcpg_buf_free(&list);
    pthread_mutex_lock(&up->lock);
    param_tool *old = up->param_tools;
    size_t old_n = up->n_param_tools;
    up->param_tools = v;
    up->n_param_tools = n;
    pthread_mutex_unlock(&up->lock);
    free_tools(old, old_n);
}

void params_free(upstream *up) {
    free_tools(up->param_tools, up->n_param_tools);
    up->param_tools = NULL;
    up->n_param_tools = 0;
}

/* "Mcp-Param-<name>: <value>\r\n" for each annotated argument present. */
static int header_lines(const mcpg_param_headers *ph, const char *args, size_t n, mcpg_buf *out) {
    int rc = 0;
    for (size_t i = 0; i < ph->n && rc >= 0; i++) {
        size_t mark = out->len;
        rc = mcpg_buf_puts(out, "Mcp-Param-");
        rc |= mcpg_buf_puts(out, ph->v[i].name);
        rc |= mcpg_buf_puts(out, ": ");
        if (rc) return MCPG_ENOMEM;
        rc = mcpg_param_header_value(&ph->v[i], args, n, out);
        if (rc == 1) rc = mcpg_buf_puts(out, "\r\n");
        else out->len = mark; /* nothing to send for it */
    }
    return rc < 0 ? rc : 0;
}

char *params_lines(upstream *up, const char *tool, const char *args, size_t n) {
    mcpg_buf out = {0};
    pthread_mutex_lock(&up->lock);
    for (size_t i = 0; i < up->n_param_tools; i++)
        if (strcmp(up->param_tools[i].name, tool) == 0) {
            if (header_lines(&up->param_tools[i].headers, args, n, &out) != 0) out.len = 0;
            break;
        }
    pthread_mutex_unlock(&up->lock);
    if (!out.len) {
        mcpg_buf_free(&out);
        return NULL;
    }
    out.data[out.len] = '\0'; /* a last argument with nothing to send was cut off */
    return out.data;
}
