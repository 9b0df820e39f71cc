/* transport_http: the legacy wire's pure parsers (legacy_parse.h). */
#include "legacy_parse.h"

#include <string.h>

int th_lmsg_parse(const mcpg_host *h, const char *body, size_t n, th_lmsg *m) {
    memset(m, 0, sizeof *m);
    size_t iter = 0;
    mcpg_json_span k, v;
    int rc;
    if (!n || body[0] != '{') return h->json_validate(body, n) < 0 ? -1 : 0;
    while ((rc = h->json_object_next(body, n, &iter, &k, &v)) == 1) {
        if (h->json_string_eq(&k, "id", 2) == 1) m->id = v, m->has |= 1;
        else if (h->json_string_eq(&k, "method", 6) == 1) m->method = v, m->has |= 2;
        else if (h->json_string_eq(&k, "params", 6) == 1) m->params = v, m->has |= 4;
        else if (h->json_string_eq(&k, "result", 6) == 1) m->result = v, m->has |= 8;
        else if (h->json_string_eq(&k, "error", 5) == 1) m->error = v, m->has |= 16;
        else if (h->json_string_eq(&k, "jsonrpc", 7) == 1 && h->json_string_eq(&v, "2.0", 3) == 1)
            m->has |= 32;
    }
    return rc < 0 ? -1 : 1;
}

void th_lmsg_target(const mcpg_host *h, const th_lmsg *m, char *name_buf, size_t name_cap,
                    mcpg_call_desc *d) {
    if (!(m->has & 4)) return;
    const char *p = m->params.p;
    size_t n = m->params.n;
    d->params_json = p;
    d->params_len = n;
    mcpg_json_span v;
    if (h->json_object_get(p, n, "arguments", &v) == 1 && v.type == MCPG_JSON_OBJECT)
        d->args_json = v.p, d->args_len = v.n;
    if ((h->json_object_get(p, n, "name", &v) != 1 && h->json_object_get(p, n, "uri", &v) != 1 &&
         h->json_object_get(p, n, "taskId", &v) != 1) ||
        v.type != MCPG_JSON_STRING)
        return;
    size_t len = v.n;
    if (v.escaped && h->json_string_decode(&v, name_buf, name_cap, &len) == 0) d->name = name_buf;
    else if (!v.escaped) d->name = v.p;
    d->name_len = d->name ? len : 0;
}

/* One decimal field of the id, ending at `stop` (or the end). */
static int field(const char **p, const char *end, char stop, uint32_t *out) {
    uint64_t v = 0;
    const char *s = *p;
    while (*p < end && **p >= '0' && **p <= '9' && v <= UINT32_MAX) v = v * 10 + (uint64_t)(*(*p)++ - '0');
    if (*p == s || v > UINT32_MAX || (stop ? (*p >= end || **p != stop) : *p != end)) return 0;
    if (stop) (*p)++;
    *out = (uint32_t)v;
    return 1;
}

int th_event_id_parse(const char *id, size_t n, th_event_ref *out) {
    const char *p = id, *end = id + n;
    return field(&p, end, '_', &out->replica) && field(&p, end, '_', &out->worker) &&
           field(&p, end, '_', &out->no) && field(&p, end, 0, &out->seq);
}

