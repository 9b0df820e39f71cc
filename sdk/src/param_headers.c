/* The 2026-07-28 wire's custom headers: the "=?base64?...?=" form of a
 * header value, and the Mcp-Param-* headers a tool's inputSchema asks for
 * with "x-mcp-header" annotations (mcpg/sdk.h says what each function
 * answers). The transport (Mcp-Name, Mcp-Method), the kernel (catalog and
 * call validation) and backend_mcp (headers toward an upstream) all use
 * this one copy, so a value one of them accepts the others read alike. */
#include <mcpg/sdk.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL_PRE "=?base64?"
#define SENTINEL_PRE_LEN (sizeof SENTINEL_PRE - 1)
#define NAME_MAX_LEN 200  /* an annotation longer than this is refused */
#define DEPTH_MAX 64      /* schema nesting walked before the tool is refused */

/* ---- base64 ---------------------------------------------------------------- */

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Canonical standard base64 only: a length that is a multiple of 4, '='
 * only as the last one or two characters, the alphabet otherwise, and the
 * bits the padding drops zero. Anything looser would let two different
 * header texts stand for one value, which a server comparing them would
 * not agree with. Returns the decoded length, or -1. */
static long b64_decode_strict(const char *s, size_t n, char *dst, size_t cap) {
    if (n % 4) return -1;
    size_t pad = 0;
    while (pad < 2 && pad < n && s[n - 1 - pad] == '=') pad++;
    size_t out = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n - pad; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (out >= cap) return -1;
            dst[out++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (bits && (acc & ((1u << bits) - 1))) return -1; /* bits past the last byte */
    return (long)out;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_encode(const unsigned char *s, size_t n, mcpg_buf *out) {
    int rc = mcpg_buf_reserve(out, (n + 2) / 3 * 4);
    for (size_t i = 0; i < n && !rc; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n) v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n) v |= s[i + 2];
        char q[4] = {B64[v >> 18], B64[(v >> 12) & 63], i + 1 < n ? B64[(v >> 6) & 63] : '=',
                     i + 2 < n ? B64[v & 63] : '='};
        rc = mcpg_buf_append(out, q, 4);
    }
    return rc;
}

/* ---- header values ---------------------------------------------------------- */

static bool has_sentinel(const char *v, size_t n) {
    return n >= SENTINEL_PRE_LEN + 2 && memcmp(v, SENTINEL_PRE, SENTINEL_PRE_LEN) == 0 &&
           v[n - 2] == '?' && v[n - 1] == '=';
}

int mcpg_header_value_decode(const char *hv, size_t hn, char *buf, size_t cap, const char **out,
                             size_t *out_len) {
    if (!has_sentinel(hv, hn)) { /* without both markers a value is literal */
        *out = hv;
        *out_len = hn;
        return 0;
    }
    size_t m = hn - SENTINEL_PRE_LEN - 2;
    if (m / 4 * 3 > cap) return MCPG_ERANGE;
    long len = b64_decode_strict(hv + SENTINEL_PRE_LEN, m, buf, cap);
    if (len < 0) return MCPG_EPROTO;
    *out = buf;
    *out_len = (size_t)len;
    return 0;
}

static bool is_ws(char c) { return c == ' ' || c == '\t'; }

/* Sent as it is: visible ASCII and inner spaces or tabs, no white space at
 * either end, and not a text a reader would take for the encoded form. */
static bool plain_ok(const char *v, size_t n) {
    if (n && (is_ws(v[0]) || is_ws(v[n - 1]))) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x21 || c > 0x7e) && !is_ws((char)c)) return false;
    }
    return !has_sentinel(v, n);
}

int mcpg_header_value_encode(const char *v, size_t n, mcpg_buf *out) {
    if (plain_ok(v, n)) return mcpg_buf_append(out, v, n);
    int rc = mcpg_buf_append(out, SENTINEL_PRE, SENTINEL_PRE_LEN);
    rc |= b64_encode((const unsigned char *)v, n, out);
    return rc | mcpg_buf_append(out, "?=", 2);
}

/* ---- x-mcp-header annotations ----------------------------------------------- */

static bool key_is(const mcpg_json_span *k, const char *lit) {
    size_t n = strlen(lit);
    if (!k->escaped) return k->n == n && memcmp(k->p, lit, n) == 0;
    return mcpg_json_string_eq(k, lit, n) == 1;
}

/* RFC 9110 tchar: what a header field name may hold. */
static bool is_tchar(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c; }

typedef struct walk {
    mcpg_param_headers *out;
    char *why;
    size_t why_cap;
    mcpg_json_span path[DEPTH_MAX]; /* property names from the root */
    size_t depth;
} walk;

#define REFUSE(w, ...) (snprintf((w)->why, (w)->why_cap, __VA_ARGS__), MCPG_EINVAL)

/* "a.b.c": the annotated property, for messages. */
static void path_text(const walk *w, char *dst, size_t cap) {
    size_t at = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < w->depth && at + 1 < cap; i++) {
        int n = snprintf(dst + at, cap - at, "%s%.*s", i ? "." : "", (int)w->path[i].n,
                         w->path[i].p);
        if (n < 0) break;
        at += (size_t)n;
    }
}

/* One allowed JSON type name: its MCPG_PARAM_*, else 0. */
static int type_named(const mcpg_json_span *t) {
    if (t->type != MCPG_JSON_STRING) return 0;
    if (key_is(t, "string")) return MCPG_PARAM_STRING;
    if (key_is(t, "integer")) return MCPG_PARAM_INTEGER;
    if (key_is(t, "boolean")) return MCPG_PARAM_BOOLEAN;
    return 0;
}

/* The property's type: string, integer or boolean (a ["string","null"]
 * union names one of them too); 0 for anything else, number included. */
static int property_type(const mcpg_json_span *prop) {
    mcpg_json_span t, e;
    if (mcpg_json_object_get(prop->p, prop->n, "type", &t) != 1) return 0;
    if (t.type != MCPG_JSON_ARRAY) return type_named(&t);
    int found = 0;
    size_t it = 0;
    while (mcpg_json_array_next(t.p, t.n, &it, &e) == 1) {
        if (e.type == MCPG_JSON_STRING && key_is(&e, "null")) continue;
        if (found || !(found = type_named(&e))) return 0;
    }
    return found;
}

static char *decode_dup(const mcpg_json_span *s) {
    char *d = malloc(s->n + 1);
    size_t len = 0;
    if (d && (mcpg_json_string_decode(s, d, s->n + 1, &len) != 0 || memchr(d, '\0', len))) {
        free(d);
        return NULL;
    }
    if (d) d[len] = '\0';
    return d;
}

static int check_name(walk *w, const char *name, size_t n, const char *where) {
    if (!n) return REFUSE(w, "property \"%s\": x-mcp-header is empty", where);
    if (n > NAME_MAX_LEN) return REFUSE(w, "property \"%s\": x-mcp-header is too long", where);
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)name[i]))
            return REFUSE(w, "property \"%s\": x-mcp-header \"%.*s\" holds a character a header "
                          "name may not", where, (int)n, name);
    for (size_t i = 0; i < w->out->n; i++) {
        const char *other = w->out->v[i].name;
        if (strlen(other) != n) continue;
        size_t j = 0;
        while (j < n && lower(other[j]) == lower(name[j])) j++;
        if (j == n)
            return REFUSE(w, "property \"%s\": x-mcp-header \"%.*s\" is declared twice "
                          "(names compare case-insensitively)", where, (int)n, name);
    }
    return 0;
}

/* The annotation `ann` on the property schema `prop`, reached at w->path. */
static int record(walk *w, const mcpg_json_span *prop, const mcpg_json_span *ann) {
    char where[256], name[NAME_MAX_LEN + 1];
    size_t n = 0;
    path_text(w, where, sizeof where);
    if (ann->type != MCPG_JSON_STRING)
        return REFUSE(w, "property \"%s\": x-mcp-header is not a string", where);
    if (ann->n > NAME_MAX_LEN || mcpg_json_string_decode(ann, name, sizeof name, &n) != 0)
        return REFUSE(w, "property \"%s\": x-mcp-header is too long", where);
    int rc = check_name(w, name, n, where);
    if (rc) return rc;
    int type = property_type(prop);
    if (!type)
        return REFUSE(w, "property \"%s\": x-mcp-header \"%s\" is on a property whose type is "
                      "not integer, string or boolean", where, name);
    mcpg_param_header *v = realloc(w->out->v, (w->out->n + 1) * sizeof *v);
    if (!v) return MCPG_ENOMEM;
    w->out->v = v;
    mcpg_param_header *p = &v[w->out->n];
    memset(p, 0, sizeof *p);
    p->type = type;
    p->name = malloc(n + 1);
    p->lname = malloc(n + 11);
    p->path = calloc(w->depth, sizeof *p->path);
    w->out->n++; /* from here freed with the rest on failure */
    if (!p->name || !p->lname || !p->path) return MCPG_ENOMEM;
    memcpy(p->name, name, n + 1);
    memcpy(p->lname, "mcp-param-", 10);
    for (size_t i = 0; i <= n; i++) p->lname[10 + i] = lower(name[i]);
    for (size_t i = 0; i < w->depth; i++, p->depth++)
        if (!(p->path[i] = decode_dup(&w->path[i])))
            return REFUSE(w, "property \"%s\": its name holds a NUL character", where);
    return 0;
}

/* Where a schema object lies: the root, a property reached from it through
 * "properties" only, or anywhere else (under items, a composition, $defs,
 * a conditional ...), where an annotation makes the tool invalid. */
enum { AT_ROOT, AT_PROPERTY, AT_ELSEWHERE };

static int visit(walk *w, const mcpg_json_span *obj, int at, size_t nest);

/* Any value that may hold schemas: objects and arrays are searched. */
static int descend(walk *w, const mcpg_json_span *v, size_t nest) {
    if (nest >= DEPTH_MAX) return REFUSE(w, "the inputSchema nests too deep to check");
    if (v->type == MCPG_JSON_OBJECT) return visit(w, v, AT_ELSEWHERE, nest + 1);
    if (v->type != MCPG_JSON_ARRAY) return 0;
    size_t it = 0;
    mcpg_json_span e;
    int rc = 0;
    while (!rc && mcpg_json_array_next(v->p, v->n, &it, &e) == 1) rc = descend(w, &e, nest + 1);
    return rc;
}

static int visit_properties(walk *w, const mcpg_json_span *props, size_t nest) {
    size_t it = 0;
    mcpg_json_span k, v;
    int rc = 0;
    while (!rc && mcpg_json_object_next(props->p, props->n, &it, &k, &v) == 1) {
        if (v.type != MCPG_JSON_OBJECT) continue;
        if (w->depth >= DEPTH_MAX) return REFUSE(w, "the inputSchema nests too deep to check");
        w->path[w->depth++] = k;
        rc = visit(w, &v, AT_PROPERTY, nest + 1);
        w->depth--;
    }
    return rc;
}

/* Members whose values are data, not schemas: an "x-mcp-header" key inside
 * one is a value like any other. */
static bool is_data_keyword(const mcpg_json_span *k) {
    return key_is(k, "default") || key_is(k, "const") || key_is(k, "enum") ||
           key_is(k, "examples");
}

static int visit(walk *w, const mcpg_json_span *obj, int at, size_t nest) {
    size_t it = 0;
    mcpg_json_span k, v;
    int rc = 0, seen = 0;
    char where[256];
    while (!rc && mcpg_json_object_next(obj->p, obj->n, &it, &k, &v) == 1) {
        if (key_is(&k, "x-mcp-header")) {
            path_text(w, where, sizeof where);
            if (at != AT_PROPERTY)
                rc = REFUSE(w, "x-mcp-header%s%s%s is not on a property reached from the root "
                            "through \"properties\" only", where[0] ? " near \"" : "", where,
                            where[0] ? "\"" : "");
            else if (seen++)
                rc = REFUSE(w, "property \"%s\" names x-mcp-header twice", where);
            else
                rc = record(w, obj, &v);
        } else if (key_is(&k, "properties") && at != AT_ELSEWHERE && v.type == MCPG_JSON_OBJECT) {
            rc = visit_properties(w, &v, nest);
        } else if (!is_data_keyword(&k)) {
            rc = descend(w, &v, nest);
        }
    }
    return rc;
}

void mcpg_param_headers_free(mcpg_param_headers *ph) {
    if (!ph) return;
    for (size_t i = 0; i < ph->n; i++) {
        mcpg_param_header *p = &ph->v[i];
        for (size_t j = 0; j < p->depth; j++) free(p->path[j]);
        free(p->path);
        free(p->name);
        free(p->lname);
    }
    free(ph->v);
    ph->v = NULL;
    ph->n = 0;
}

int mcpg_param_headers_parse(const char *schema, size_t n, mcpg_param_headers *out, char *why,
                             size_t why_cap) {
    static char ignored[8];
    walk w = {.out = out, .why = why ? why : ignored, .why_cap = why ? why_cap : sizeof ignored};
    out->v = NULL;
    out->n = 0;
    if (w.why_cap) w.why[0] = '\0';
    mcpg_json_span root;
    size_t pos = 0;
    if (mcpg_json_value(schema, n, &pos, &root) != 1 || root.type != MCPG_JSON_OBJECT) return 0;
    int rc = visit(&w, &root, AT_ROOT, 0);
    if (rc) mcpg_param_headers_free(out);
    if (rc == MCPG_ENOMEM && w.why_cap) snprintf(w.why, w.why_cap, "out of memory");
    return rc;
}

/* ---- arguments against headers ---------------------------------------------- */

int mcpg_param_header_arg(const mcpg_param_header *p, const char *args, size_t n,
                          mcpg_json_span *val) {
    mcpg_json_span cur = {.p = args, .n = n, .type = MCPG_JSON_OBJECT};
    if (!args || !n) return 0;
    for (size_t i = 0; i < p->depth; i++) {
        if (cur.type != MCPG_JSON_OBJECT || mcpg_json_object_get(cur.p, cur.n, p->path[i], &cur) != 1)
            return 0;
    }
    if (cur.type == MCPG_JSON_NULL) return 0;
    *val = cur;
    return 1;
}

/* A JSON-style number in canonical form: sign, integer digits without
 * leading zeros, the fraction without trailing zeros, the exponent applied
 * (so 42.0, 042, 4.2e1 and 42 are one text). False when t is not such a
 * number, or its canonical text does not fit cap (a huge exponent). */
static bool number_canon(const char *t, size_t n, char *dst, size_t cap) {
    size_t i = 0;
    bool neg = i < n && t[i] == '-';
    if (neg) i++;
    size_t int_from = i;
    while (i < n && t[i] >= '0' && t[i] <= '9') i++;
    size_t int_to = i, frac_from = i, frac_to = i;
    if (int_to == int_from) return false;
    if (i < n && t[i] == '.') {
        frac_from = ++i;
        while (i < n && t[i] >= '0' && t[i] <= '9') i++;
        frac_to = i;
        if (frac_to == frac_from) return false;
    }
    long exp = 0;
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        bool eneg = ++i < n && t[i] == '-';
        if (i < n && (t[i] == '-' || t[i] == '+')) i++;
        size_t e_from = i;
        for (; i < n && t[i] >= '0' && t[i] <= '9'; i++)
            if (exp < 100000) exp = exp * 10 + (t[i] - '0');
        if (i == e_from) return false;
        if (eneg) exp = -exp;
    }
    if (i != n) return false;
    /* the digits without the point, and where the point stands in them */
    char digits[96];
    size_t nd = 0;
    for (size_t k = int_from; k < int_to; k++)
        if (nd < sizeof digits) digits[nd++] = t[k];
    for (size_t k = frac_from; k < frac_to; k++)
        if (nd < sizeof digits) digits[nd++] = t[k];
    if (nd == sizeof digits) return false; /* longer than any canonical text kept */
    long point = (long)(int_to - int_from) + exp;
    size_t lead = 0;
    while (lead < nd && digits[lead] == '0') lead++, point--;
    while (nd > lead && digits[nd - 1] == '0') nd--;
    size_t at = 0;
    if (lead == nd) { /* zero, whatever its sign */
        if (cap < 2) return false;
        memcpy(dst, "0", 2);
        return true;
    }
    long len = (long)(nd - lead);
    size_t need = 3 + (size_t)(point > len ? point : len) + (size_t)(point < 0 ? -point : 0);
    if (point > 100000 || point < -100000 || need > cap) return false;
    if (neg) dst[at++] = '-';
    if (point <= 0) dst[at++] = '0';
    for (long k = 0; k < point; k++) dst[at++] = k < len ? digits[lead + (size_t)k] : '0';
    if (point < len) {
        dst[at++] = '.';
        for (long k = point; k < 0; k++) dst[at++] = '0';
        for (long k = point > 0 ? point : 0; k < len; k++) dst[at++] = digits[lead + (size_t)k];
    }
    dst[at] = '\0';
    return true;
}

/* Numbers compare by value; two whose canonical text is too long to make
 * (a huge exponent) compare by their text, so what a client builds from the
 * body is still what the check accepts. */
static bool numbers_equal(const char *a, size_t an, const char *b, size_t bn) {
    char ca[96], cb[96];
    bool ka = number_canon(a, an, ca, sizeof ca), kb = number_canon(b, bn, cb, sizeof cb);
    if (ka && kb) return strcmp(ca, cb) == 0;
    return !ka && !kb && an == bn && memcmp(a, b, an) == 0;
}

/* The decoded header text equals the argument's value. */
static bool value_matches(const mcpg_json_span *v, const char *t, size_t n) {
    switch (v->type) {
    case MCPG_JSON_STRING: return mcpg_json_string_eq(v, t, n) == 1;
    case MCPG_JSON_NUMBER: return numbers_equal(v->p, v->n, t, n);
    case MCPG_JSON_TRUE: return n == 4 && memcmp(t, "true", 4) == 0;
    case MCPG_JSON_FALSE: return n == 5 && memcmp(t, "false", 5) == 0;
    default: return false; /* an object or array is never mirrored */
    }
}

int mcpg_param_header_check(const mcpg_param_header *p, const char *args, size_t n,
                            const char *hv, size_t hn) {
    mcpg_json_span val;
    int present = mcpg_param_header_arg(p, args, n, &val);
    if (!hv) return present ? MCPG_PARAM_MISSING : MCPG_PARAM_OK;
    while (hn && is_ws(hv[0])) hv++, hn--;
    while (hn && is_ws(hv[hn - 1])) hn--;
    if (!present) return MCPG_PARAM_UNEXPECTED;
    char small[512];
    char *buf = hn / 4 * 3 + 3 <= sizeof small ? small : malloc(hn / 4 * 3 + 3);
    if (!buf) return MCPG_PARAM_MISMATCH;
    const char *text;
    size_t tn;
    int rc = mcpg_header_value_decode(hv, hn, buf, hn / 4 * 3 + 3, &text, &tn);
    int verdict = rc ? MCPG_PARAM_BAD_BASE64
                     : value_matches(&val, text, tn) ? MCPG_PARAM_OK : MCPG_PARAM_MISMATCH;
    if (buf != small) free(buf);
    return verdict;
}

int mcpg_param_header_value(const mcpg_param_header *p, const char *args, size_t n,
                            mcpg_buf *out) {
    mcpg_json_span val;
    if (!mcpg_param_header_arg(p, args, n, &val)) return 0;
    char canon[96];
    switch (val.type) {
    case MCPG_JSON_TRUE: return mcpg_buf_append(out, "true", 4) ? MCPG_ENOMEM : 1;
    case MCPG_JSON_FALSE: return mcpg_buf_append(out, "false", 5) ? MCPG_ENOMEM : 1;
    case MCPG_JSON_NUMBER:
        if (!number_canon(val.p, val.n, canon, sizeof canon))
            return mcpg_buf_append(out, val.p, val.n) ? MCPG_ENOMEM : 1;
        return mcpg_buf_append(out, canon, strlen(canon)) ? MCPG_ENOMEM : 1;
    case MCPG_JSON_STRING: break;
    default: return 0;
    }
    char *text = malloc(val.n + 1);
    size_t tn = 0;
    int rc = text && mcpg_json_string_decode(&val, text, val.n + 1, &tn) == 0
                 ? (mcpg_header_value_encode(text, tn, out) ? MCPG_ENOMEM : 1)
                 : MCPG_ENOMEM;
    free(text);
    return rc;
}
