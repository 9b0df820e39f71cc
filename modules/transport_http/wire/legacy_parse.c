/* transport_http: the legacy wire's pure parsers (legacy_parse.h). */
#include "wire/legacy_parse.h"

#include <string.h>

int th_lmsg_parse(const mcpg_host *h, const char *body, size_t n, th_lmsg *m) {
    memset(m, 0, sizeof *m);
    size_t iter = 0;
    mcpg_json_span k, v;
    int rc;
    if (!n || body[0] != '{') return h->json_validate(body, n) < 0 ? -1 : 0;
    unsigned seen = 0, bit;
    while ((rc = h->json_object_next(body, n, &iter, &k, &v)) == 1) {
        if (h->json_string_eq(&k, "id", 2) == 1) m->id = v, bit = 1;
        else if (h->json_string_eq(&k, "method", 6) == 1) m->method = v, bit = 2;
        else if (h->json_string_eq(&k, "params", 6) == 1) m->params = v, bit = 4;
        else if (h->json_string_eq(&k, "result", 6) == 1) m->result = v, bit = 8;
        else if (h->json_string_eq(&k, "error", 5) == 1) m->error = v, bit = 16;
        else if (h->json_string_eq(&k, "jsonrpc", 7) == 1) bit = 64;
        else continue;
        if (seen & bit) m->dup = 1;
        seen |= bit;
        if (bit == 64 && h->json_string_eq(&v, "2.0", 3) == 1) m->has |= 32;
        else if (bit != 64) m->has |= bit;
    }
    return rc < 0 ? -1 : 1;
}

void th_lmsg_target(const mcpg_host *h, const th_lmsg *m, char *name_buf, size_t name_cap,
                    mcpg_call_desc *d) {
    (void)h, (void)name_buf, (void)name_cap;
    if (!(m->has & 4)) return;
    d->params_json = m->params.p;
    d->params_len = m->params.n;
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

