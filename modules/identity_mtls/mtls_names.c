/* Names out of a certificate's text forms (see mtls_names.h). */
#include "mtls_names.h"

#include <mcpg/sdk.h>

#include <string.h>
#include <strings.h>

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int usable(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 0;
    return 1;
}

/* A reader over one RFC 2253 string. */
typedef struct dn_reader {
    const char *s;
    size_t i, n;
} dn_reader;

/* The attribute type up to '=', blanks around it dropped. 0 if malformed. */
static int dn_type(dn_reader *r, const char **type, size_t *len) {
    while (r->i < r->n && r->s[r->i] == ' ') r->i++;
    size_t start = r->i;
    while (r->i < r->n && r->s[r->i] != '=') {
        if (r->s[r->i] == ',' || r->s[r->i] == '+' || r->s[r->i] == ';') return 0;
        r->i++;
    }
    if (r->i == r->n) return 0;
    size_t end = r->i++;
    while (end > start && r->s[end - 1] == ' ') end--;
    *type = r->s + start;
    *len = end - start;
    return *len > 0;
}

/* One escaped character after a backslash: a special character as itself,
 * or two hex digits as one byte. -1 if malformed. */
static int dn_escape(dn_reader *r) {
    if (r->i >= r->n) return -1;
    int hi = hex_value(r->s[r->i]);
    if (hi >= 0 && r->i + 1 < r->n && hex_value(r->s[r->i + 1]) >= 0) {
        int lo = hex_value(r->s[r->i + 1]);
        r->i += 2;
        return hi << 4 | lo;
    }
    if (!strchr(",+\"\\<>;=# ", r->s[r->i])) return -1;
    return (unsigned char)r->s[r->i++];
}

/* The value up to the next unescaped ',', '+' or ';', unescaped into dst
 * (when dst is not NULL). Unescaped blanks around it are not part of it
 * (RFC 2253 2.4). Returns its length, or -1 if malformed or too long (-2:
 * hex-encoded BER, which has no text form). */
static long dn_value(dn_reader *r, char *dst, size_t cap) {
    while (r->i < r->n && r->s[r->i] == ' ') r->i++;
    if (r->i < r->n && r->s[r->i] == '#') return -2;
    int quoted = r->i < r->n && r->s[r->i] == '"';
    if (quoted) r->i++;
    size_t out = 0, keep = 0; /* keep: the length up to the last non-blank */
    while (r->i < r->n) {
        char c = r->s[r->i];
        if (quoted ? c == '"' : (c == ',' || c == '+' || c == ';')) break;
        r->i++;
        int b = c == '\\' ? dn_escape(r) : (unsigned char)c;
        if (b < 0) return -1;
        if (dst) {
            if (out + 1 >= cap) return -1;
            dst[out] = (char)b;
        }
        out++;
        if (quoted || c != ' ') keep = out;
    }
    if (quoted) {
        if (r->i >= r->n) return -1;
        r->i++; /* the closing quote */
        while (r->i < r->n && r->s[r->i] == ' ') r->i++;
    }
    if (dst) dst[keep] = '\0';
    return (long)keep;
}

static int is_cn(const char *type, size_t len) {
    return (len == 2 && strncasecmp(type, "CN", 2) == 0) ||
           (len == 7 && memcmp(type, "2.5.4.3", 7) == 0);
}

int mtls_subject_cn(const char *subject, char *dst, size_t cap) {
    if (!subject || cap == 0) return 0;
    dn_reader r = {subject, 0, strlen(subject)};
    while (r.i < r.n) {
        const char *type;
        size_t tlen;
        if (!dn_type(&r, &type, &tlen)) return 0;
        int cn = is_cn(type, tlen);
        long len = dn_value(&r, cn ? dst : NULL, cap);
        if (cn) return len > 0 && usable(dst, (size_t)len);
        if (len == -1) return 0;
        if (len == -2) { /* skip #hex up to the next separator */
            while (r.i < r.n && r.s[r.i] != ',' && r.s[r.i] != '+' && r.s[r.i] != ';') r.i++;
        }
        if (r.i < r.n) r.i++; /* the separator */
    }
    return 0;
}

int mtls_san(const char *sans_json, const char *type, char *dst, size_t cap) {
    if (!sans_json) return 0;
    size_t n = strlen(sans_json), it = 0, tlen = strlen(type);
    mcpg_json_span v;
    while (mcpg_json_array_next(sans_json, n, &it, &v) == 1) {
        if (v.type != MCPG_JSON_STRING) continue;
        size_t len;
        /* a name too long for dst cannot be a principal: look further */
        if (mcpg_json_string_decode(&v, dst, cap, &len) != 0) continue;
        if (len <= tlen || dst[tlen] != ':' || strncasecmp(dst, type, tlen) != 0) continue;
        if (!usable(dst + tlen + 1, len - tlen - 1)) continue;
        memmove(dst, dst + tlen + 1, len - tlen); /* with its NUL */
        return 1;
    }
    if (cap) dst[0] = '\0';
    return 0;
}
