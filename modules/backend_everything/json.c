/* Small readers over the host's JSON scanner, and the one-text result. */
#include "everything.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ev_json_at(const mcpg_host *h, const char *text, size_t n, mcpg_json_span *out, ...) {
    va_list ap;
    va_start(ap, out);
    mcpg_json_span v = {.p = text, .n = n, .type = MCPG_JSON_OBJECT};
    int found = text != NULL;
    for (const char *key; found && (key = va_arg(ap, const char *));)
        found = v.type == MCPG_JSON_OBJECT && h->json_object_get(v.p, v.n, key, &v) == 1;
    va_end(ap);
    if (found) *out = v;
    return found;
}

const char *ev_json_str(const mcpg_host *h, const mcpg_json_span *v, char *dst, size_t cap) {
    dst[0] = '\0';
    if (v->type == MCPG_JSON_STRING && h->json_string_decode(v, dst, cap, NULL) < 0) dst[0] = '\0';
    return dst;
}

const char *ev_json_raw(const mcpg_json_span *v, size_t *len) {
    int quoted = v->type == MCPG_JSON_STRING; /* the scanner's p/n sit inside the quotes */
    *len = v->n + (quoted ? 2 : 0);
    return v->p - (quoted ? 1 : 0);
}

int ev_client_has(const mcpg_host *h, mcpg_call *call, const char *name) {
    if (!MCPG_HOST_HAS(h, call_client_capabilities)) return 0;
    size_t n = 0;
    const char *caps = h->call_client_capabilities(call, &n);
    mcpg_json_span v;
    return caps && h->json_object_get(caps, n, name, &v) == 1 && v.type == MCPG_JSON_OBJECT;
}

int ev_client_has_extension(const mcpg_host *h, mcpg_call *call, const char *id) {
    if (!MCPG_HOST_HAS(h, call_client_capabilities)) return 0;
    size_t n = 0;
    const char *caps = h->call_client_capabilities(call, &n);
    mcpg_json_span v;
    return caps && ev_json_at(h, caps, n, &v, "extensions", id, (const char *)NULL) &&
           v.type == MCPG_JSON_OBJECT;
}

mcpg_status ev_textf(const ev *e, mcpg_call *call, int is_error, const char *fmt, ...) {
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof text) n = (int)sizeof text - 1;
    return mcpg_result_text(e->host, call, text, (size_t)n, is_error);
}
