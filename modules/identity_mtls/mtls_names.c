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
           (len == 10 && strncasecmp(type, "commonName", 10) == 0) ||
           (len == 7 && memcmp(type, "2.5.4.3", 7) == 0);
}

static mtls_found none_but(char *dst, mtls_found why) {
    dst[0] = '\0';
    return why;
}

/* After a value: the next RDN or attribute, or the end. A value followed by
 * anything else (text after a closing quote) is not RFC 2253. */
static int dn_separator(dn_reader *r) {
    if (r->i == r->n) return 1;
    char c = r->s[r->i++];
    return c == ',' || c == '+' || c == ';';
}

/* Every attribute is read, so that a second CN anywhere (a later RDN, or
 * another value of a multi-valued one) is seen: which of two CNs is "the"
 * CN is a matter of order, and order is the certificate maker's choice. */
mtls_found mtls_subject_cn(const char *subject, char *dst, size_t cap) {
    if (!dst || cap == 0) return MTLS_MALFORMED;
    dst[0] = '\0';
    if (!subject) return MTLS_NONE;
    dn_reader r = {subject, 0, strlen(subject)};
    unsigned cns = 0;
    long len = 0;
    while (r.i < r.n) {
        const char *type;
        size_t tlen;
        if (!dn_type(&r, &type, &tlen)) return none_but(dst, MTLS_MALFORMED);
        int cn = is_cn(type, tlen);
        long got = dn_value(&r, cn && cns == 0 ? dst : NULL, cap);
        if (got == -1) return none_but(dst, MTLS_MALFORMED);
        if (got == -2) /* #hex: no text form; skip it up to the next separator */
            while (r.i < r.n && !strchr(",+;", r.s[r.i])) r.i++;
        if (cn && ++cns == 1) len = got;
        if (!dn_separator(&r)) return none_but(dst, MTLS_MALFORMED);
    }
    if (cns > 1) return none_but(dst, MTLS_AMBIGUOUS);
    if (cns == 0) return MTLS_NONE;
    if (len <= 0 || !usable(dst, (size_t)len)) return none_but(dst, MTLS_MALFORMED);
    return MTLS_FOUND;
}

/* IA5String names (DNS, URI, email) are printable ASCII without blanks; a
 * byte outside that is a control character (a NUL cut would make another
 * name of it), or U+FFFD standing for an invalid byte, which two different
 * names would share. */
static int usable_san(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) return 0;
    return 1;
}

/* Whether entry v is of `type`: by its decoded text in dst when it fits,
 * else by its raw text (the transport writes the type as plain ASCII). */
static int san_of_type(const mcpg_json_span *v, int decoded, const char *dst, size_t len,
                       const char *type, size_t tlen) {
    const char *s = decoded ? dst : v->p;
    size_t n = decoded ? len : v->n;
    return n > tlen && s[tlen] == ':' && strncasecmp(s, type, tlen) == 0;
}

/* Every entry is read, so that a second one of the type is seen wherever
 * it is: two URIs (or DNS names, or addresses) name two principals. */
mtls_found mtls_san(const char *sans_json, const char *type, char *dst, size_t cap) {
    if (!dst || cap == 0) return MTLS_MALFORMED;
    dst[0] = '\0';
    if (!sans_json) return MTLS_NONE;
    size_t n = strlen(sans_json), it = 0, tlen = strlen(type), len = 0;
    unsigned count = 0;
    mcpg_json_span v, match = {0};
    int rc;
    while ((rc = mcpg_json_array_next(sans_json, n, &it, &v)) == 1) {
        if (v.type != MCPG_JSON_STRING) continue;
        int decoded = mcpg_json_string_decode(&v, dst, cap, &len) == 0;
        if (san_of_type(&v, decoded, dst, len, type, tlen) && count++ == 0) match = v;
    }
    if (rc != 0) return none_but(dst, MTLS_MALFORMED); /* not an array to its end */
    if (count > 1) return none_but(dst, MTLS_AMBIGUOUS);
    if (count == 0) return none_but(dst, MTLS_NONE);
    if (mcpg_json_string_decode(&match, dst, cap, &len) != 0 ||
        !usable_san(dst + tlen + 1, len - tlen - 1))
        return none_but(dst, MTLS_MALFORMED);
    memmove(dst, dst + tlen + 1, len - tlen); /* with its NUL */
    return MTLS_FOUND;
}
