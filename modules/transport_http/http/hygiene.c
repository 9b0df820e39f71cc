/* transport_http: Host and Origin allow-lists (see hygiene.h). */
#include "http/hygiene.h"

#include <mcpg/sdk.h>
#include <string.h>

static int lower(int c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

static int eq_ci(const char *a, size_t an, const char *lit) {
    size_t ln = strlen(lit);
    if (an != ln) return 0;
    for (size_t i = 0; i < an; i++)
        if (lower((unsigned char)a[i]) != lit[i]) return 0;
    return 1;
}

void th_names_free(const mcpg_host *h, th_names *names) {
    for (size_t i = 0; i < names->n; i++) h->free(names->v[i]);
    h->free(names->v);
    memset(names, 0, sizeof *names);
}

static int names_add(const mcpg_host *h, th_names *out, const mcpg_json_span *s) {
    char tmp[512];
    size_t len = 0;
    if (s->type != MCPG_JSON_STRING || h->json_string_decode(s, tmp, sizeof tmp, &len) < 0 || !len)
        return MCPG_EINVAL;
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)tmp[i] <= ' ') return MCPG_EINVAL; /* no spaces, no controls */
        tmp[i] = (char)lower((unsigned char)tmp[i]);
    }
    if (len == 1 && tmp[0] == '*') out->any = 1;
    char **v = h->realloc(out->v, (out->n + 1) * sizeof *v);
    if (!v) return MCPG_ENOMEM;
    out->v = v;
    if (!(v[out->n] = h->alloc(len + 1))) return MCPG_ENOMEM;
    memcpy(v[out->n], tmp, len + 1);
    out->n++;
    return 0;
}

int th_names_parse(const mcpg_host *h, const char *json, th_names *out) {
    memset(out, 0, sizeof *out);
    if (!json) return 0;
    size_t n = strlen(json), iter = 0;
    if (h->json_validate(json, n) < 0 || json[0] != '[') return MCPG_EINVAL;
    out->set = 1;
    mcpg_json_span s;
    int rc;
    while ((rc = h->json_array_next(json, n, &iter, &s)) == 1) {
        int e = names_add(h, out, &s);
        if (e) {
            th_names_free(h, out);
            return e;
        }
    }
    return rc < 0 ? (th_names_free(h, out), MCPG_EINVAL) : 0;
}

static int in_list(const th_names *l, const char *v, size_t n) {
    if (l->any) return 1;
    for (size_t i = 0; i < l->n; i++)
        if (eq_ci(v, n, l->v[i])) return 1;
    return 0;
}

/* The host part of host[:port] (brackets kept for IPv6); -1 when the port
 * is not digits or the brackets do not close. */
static long host_part(const char *v, size_t n) {
    size_t end;
    if (n && v[0] == '[') {
        const char *rb = memchr(v, ']', n);
        if (!rb) return -1;
        end = (size_t)(rb - v) + 1;
    } else {
        const char *colon = memchr(v, ':', n);
        end = colon ? (size_t)(colon - v) : n;
    }
    if (end < n) {
        if (v[end] != ':' || end + 1 == n) return -1;
        for (size_t i = end + 1; i < n; i++)
            if (v[i] < '0' || v[i] > '9') return -1;
    }
    return (long)end;
}

static int is_loopback_name(const char *v, size_t n) {
    return eq_ci(v, n, "localhost") || eq_ci(v, n, "127.0.0.1") || eq_ci(v, n, "[::1]");
}

int th_host_allowed(const th_names *allowed, int loopback, const char *v, size_t n) {
    long hp = host_part(v, n);
    if (hp <= 0) return 0;
    if (allowed->set) return in_list(allowed, v, n) || in_list(allowed, v, (size_t)hp);
    return !loopback || is_loopback_name(v, (size_t)hp);
}

int th_origin_allowed(const th_names *allowed, int loopback, const char *v, size_t n) {
    if (allowed->set) return in_list(allowed, v, n);
    /* Reached beyond loopback, no page's origin is known to be the
     * operator's: a browser request is refused until allowed_origins names
     * the ones to serve (a client without Origin is no browser page). */
    if (!loopback) return 0;
    size_t skip;
    if (n > 7 && eq_ci(v, 7, "http://")) skip = 7;
    else if (n > 8 && eq_ci(v, 8, "https://")) skip = 8;
    else return 0; /* "null", other schemes: not a loopback page */
    long hp = host_part(v + skip, n - skip);
    return hp > 0 && is_loopback_name(v + skip, (size_t)hp);
}
