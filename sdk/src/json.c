/* The non-allocating JSON scanner (RFC 8259), in place over (ptr, len) text.
 *
 * Every request's envelope goes through here, so the scanner is iterative
 * (no recursion: depth is a 64-bit stack of "is this level an object" bits),
 * classifies bytes with one table, and skips plain string bytes eight at a
 * time. Nothing is allocated and nothing is written outside the caller's
 * output arguments; the input need not be NUL-terminated.
 *
 * Strictness, on purpose (a gateway must not read a body differently from the
 * server behind it): UTF-8 is validated (no overlongs, no surrogates, nothing
 * above U+10FFFF), \u escapes must pair surrogates correctly, control bytes
 * inside strings are refused, numbers follow the grammar exactly, and there is
 * no BOM, comment or trailing comma.
 */
#include <mcpg/sdk.h>

#include <string.h>

#include "json_names.h"

/* Byte classes inside a string. 0 is "copy as is", so the hot loop tests for
 * zero; the UTF-8 lead classes index u8rules[] below. */
enum {
    C_PLAIN = 0,
    C_QUOTE,
    C_BSLASH,
    C_CTRL,
    C_BAD, /* never valid in UTF-8: continuation as lead, C0, C1, F5..FF */
    C_U2,  /* C2..DF */
    C_E0,
    C_U3,  /* E1..EC, EE..EF */
    C_ED,
    C_F0,
    C_U4,  /* F1..F3 */
    C_F4
};

static const unsigned char cls[256] = {
    [0x00 ... 0x1f] = C_CTRL, ['"'] = C_QUOTE,        ['\\'] = C_BSLASH,
    [0x80 ... 0xc1] = C_BAD,  [0xc2 ... 0xdf] = C_U2, [0xe0] = C_E0,
    [0xe1 ... 0xec] = C_U3,   [0xed] = C_ED,          [0xee ... 0xef] = C_U3,
    [0xf0] = C_F0,            [0xf1 ... 0xf3] = C_U4, [0xf4] = C_F4,
    [0xf5 ... 0xff] = C_BAD,
};

/* Per lead class: sequence length and the allowed range of the second byte
 * (the one place overlongs, surrogates and > U+10FFFF are excluded). The
 * third and fourth bytes are plain continuations (80..BF). */
static const struct {
    unsigned char len, lo, hi;
} u8rules[] = {
    [C_U2 - C_U2] = {2, 0x80, 0xbf}, [C_E0 - C_U2] = {3, 0xa0, 0xbf},
    [C_U3 - C_U2] = {3, 0x80, 0xbf}, [C_ED - C_U2] = {3, 0x80, 0x9f},
    [C_F0 - C_U2] = {4, 0x90, 0xbf}, [C_U4 - C_U2] = {4, 0x80, 0xbf},
    [C_F4 - C_U2] = {4, 0x80, 0x8f},
};

/* The UTF-8 sequence at p (lead class c >= C_U2, avail >= 1 bytes): its length
 * when valid, else minus the length of its maximal invalid prefix (the bytes
 * one U+FFFD replaces, as the Unicode standard recommends). */
static inline int utf8_seq(const unsigned char *p, size_t avail, unsigned c) {
    unsigned len = u8rules[c - C_U2].len;
    if (avail < 2 || p[1] < u8rules[c - C_U2].lo || p[1] > u8rules[c - C_U2].hi) return -1;
    if (len == 2) return 2;
    if (avail < 3 || (p[2] & 0xc0) != 0x80) return -2;
    if (len == 3) return 3;
    if (avail < 4 || (p[3] & 0xc0) != 0x80) return -3;
    return 4;
}

/* Eight bytes at p as a mask with bit 7 of a byte set for each byte that
 * needs attention inside a string (a quote, a backslash, a control byte or a
 * non-ASCII byte). A subtraction borrows into the next byte only from a byte
 * that is itself flagged, so flags above the first real one may be spurious
 * but the lowest flag is exact: that is the only one we use. The load is made
 * little-endian so "lowest" means "first in the text". */
static inline uint64_t special8(const unsigned char *p) {
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t v;
    memcpy(&v, p, 8); /* one unaligned load */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    uint64_t q = v ^ (ones * '"'), b = v ^ (ones * '\\');
    return (v | (v - ones * 0x20) | (q - ones) | (b - ones)) & high;
}

/* The offset of the first byte at or after i that is not C_PLAIN, or n. */
static inline size_t plain_run(const unsigned char *s, size_t n, size_t i) {
    while (i + 8 <= n) {
        uint64_t m = special8(s + i);
        if (m) return i + ((size_t)__builtin_ctzll(m) >> 3);
        i += 8;
    }
    while (i < n && cls[s[i]] == C_PLAIN) i++;
    return i;
}

static inline int hexval(unsigned char c) {
    if ((unsigned)(c - '0') < 10) return c - '0';
    c |= 0x20;
    if ((unsigned)(c - 'a') < 6) return c - 'a' + 10;
    return -1;
}

static inline int hex4(const unsigned char *p) {
    int a = hexval(p[0]), b = hexval(p[1]), c = hexval(p[2]), d = hexval(p[3]);
    if ((a | b | c | d) < 0) return -1;
    return (a << 12) | (b << 8) | (c << 4) | d;
}

/* The escape at p (p[0] is the backslash, end bounds it): sets *cp to the code
 * point and returns the bytes consumed, or 0 when malformed. A high surrogate
 * must be followed by an escaped low one; a lone surrogate is refused because
 * it has no UTF-8 form. */
static inline size_t read_escape(const unsigned char *p, const unsigned char *end,
                                 uint32_t *cp) {
    if (end - p < 2) return 0;
    switch (p[1]) {
    case '"': *cp = '"'; return 2;
    case '\\': *cp = '\\'; return 2;
    case '/': *cp = '/'; return 2;
    case 'b': *cp = '\b'; return 2;
    case 'f': *cp = '\f'; return 2;
    case 'n': *cp = '\n'; return 2;
    case 'r': *cp = '\r'; return 2;
    case 't': *cp = '\t'; return 2;
    case 'u': break;
    default: return 0;
    }
    if (end - p < 6) return 0;
    int hi = hex4(p + 2);
    if (hi < 0 || (hi >= 0xdc00 && hi <= 0xdfff)) return 0;
    if (hi < 0xd800 || hi > 0xdbff) {
        *cp = (uint32_t)hi;
        return 6;
    }
    if (end - p < 12 || p[6] != '\\' || p[7] != 'u') return 0;
    int lo = hex4(p + 8);
    if (lo < 0xdc00 || lo > 0xdfff) return 0;
    *cp = 0x10000 + (((uint32_t)hi - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
    return 12;
}

static inline size_t utf8_put(unsigned char *d, uint32_t cp) {
    if (cp < 0x80) {
        d[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (unsigned char)(0xc0 | (cp >> 6));
        d[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (unsigned char)(0xe0 | (cp >> 12));
        d[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        d[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    d[0] = (unsigned char)(0xf0 | (cp >> 18));
    d[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    d[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    d[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* ---- the scanner ------------------------------------------------------- */

typedef struct scan {
    const unsigned char *s;
    size_t n;
    size_t i;
    json_names *names; /* told of each object's names, or NULL */
} scan;

static inline void skip_ws(scan *sc) {
    while (sc->i < sc->n) {
        unsigned char c = sc->s[sc->i];
        if (c > ' ' || (c != ' ' && c != '\n' && c != '\r' && c != '\t')) break;
        sc->i++;
    }
}

/* The rest of a string from s[i], a byte that is not plain: escapes and
 * non-ASCII text. Kept out of line so the common case (a short ASCII string)
 * stays small. Returns the offset of the closing quote, or 0 if malformed
 * (0 is never a closing quote's offset). */
static __attribute__((noinline)) size_t string_tail(const unsigned char *s, size_t n, size_t i,
                                                   uint32_t *escaped) {
    for (;;) {
        if (i >= n) return 0;
        unsigned c = cls[s[i]];
        if (c == C_QUOTE) return i;
        if (c == C_BSLASH) {
            uint32_t cp;
            size_t k = read_escape(s + i, s + n, &cp);
            if (!k) return 0;
            i += k;
            *escaped = 1;
        } else {
            if (c < C_U2) return 0; /* a control byte or an invalid lead */
            int k = utf8_seq(s + i, n - i, c);
            if (k < 0) return 0;
            i += (size_t)k;
        }
        i = plain_run(s, n, i);
    }
}

/* s[i] is the opening quote. On success i is past the closing quote and the
 * span holds the text between them. */
static inline int scan_string(scan *sc, mcpg_json_span *out) {
    const unsigned char *s = sc->s;
    size_t n = sc->n, i = plain_run(s, n, sc->i + 1);
    uint32_t escaped = 0;
    if (i >= n) return MCPG_EPROTO;
    if (s[i] != '"' && !(i = string_tail(s, n, i, &escaped))) return MCPG_EPROTO;
    out->p = (const char *)s + sc->i + 1;
    out->n = i - sc->i - 1;
    out->type = MCPG_JSON_STRING;
    out->escaped = escaped;
    sc->i = i + 1;
    return 0;
}

static inline int scan_digits(scan *sc) {
    size_t start = sc->i;
    while (sc->i < sc->n && (unsigned)(sc->s[sc->i] - '0') < 10) sc->i++;
    return sc->i > start ? 0 : MCPG_EPROTO;
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? ; what may follow it
 * is the caller's business ("01" fails there: a value cannot follow "0"). */
static int scan_number(scan *sc) {
    const unsigned char *s = sc->s;
    if (s[sc->i] == '-') sc->i++;
    if (sc->i < sc->n && s[sc->i] == '0') sc->i++;
    else if (scan_digits(sc)) return MCPG_EPROTO;
    if (sc->i < sc->n && s[sc->i] == '.') {
        sc->i++;
        if (scan_digits(sc)) return MCPG_EPROTO;
    }
    if (sc->i < sc->n && (s[sc->i] | 0x20) == 'e') {
        sc->i++;
        if (sc->i < sc->n && (s[sc->i] == '+' || s[sc->i] == '-')) sc->i++;
        if (scan_digits(sc)) return MCPG_EPROTO;
    }
    return 0;
}

static inline int scan_literal(scan *sc, const char *lit, size_t len) {
    if (sc->n - sc->i < len || memcmp(sc->s + sc->i, lit, len) != 0) return MCPG_EPROTO;
    sc->i += len;
    return 0;
}

/* A string, number or literal at s[i] (i < n). */
static int scan_scalar(scan *sc, mcpg_json_span *out) {
    size_t start = sc->i;
    int rc;
    switch (sc->s[start]) {
    case '"':
        return scan_string(sc, out);
    case 't':
        out->type = MCPG_JSON_TRUE;
        rc = scan_literal(sc, "true", 4);
        break;
    case 'f':
        out->type = MCPG_JSON_FALSE;
        rc = scan_literal(sc, "false", 5);
        break;
    case 'n':
        out->type = MCPG_JSON_NULL;
        rc = scan_literal(sc, "null", 4);
        break;
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        out->type = MCPG_JSON_NUMBER;
        rc = scan_number(sc);
        break;
    default:
        return MCPG_EPROTO;
    }
    out->p = (const char *)sc->s + start;
    out->n = sc->i - start;
    out->escaped = 0;
    return rc;
}

/* Containers are walked by a small state machine instead of recursion: the
 * nesting is a bit stack (bit 0 = innermost level, 1 = object). */
enum { ST_DONE = 0, ST_OPEN = 1, ST_MEMBER = 2, ST_AFTER = 3 };

typedef struct nest {
    uint64_t objs;
    int depth, budget;
} nest;

static inline int close_level(scan *sc, nest *ns) {
    if (sc->names && (ns->objs & 1)) json_names_close(sc->names);
    ns->objs >>= 1;
    return --ns->depth == 0 ? ST_DONE : ST_AFTER;
}

/* s[i] is '{' or '['. */
static inline int st_open(scan *sc, nest *ns) {
    int obj = sc->s[sc->i] == '{';
    if (ns->depth >= ns->budget) return MCPG_EPROTO;
    ns->objs = (ns->objs << 1) | (uint64_t)obj;
    ns->depth++;
    if (sc->names && obj) json_names_open(sc->names);
    sc->i++;
    skip_ws(sc);
    if (sc->i >= sc->n) return MCPG_EPROTO;
    if (sc->s[sc->i] != (obj ? '}' : ']')) return ST_MEMBER;
    sc->i++;
    return close_level(sc, ns);
}

/* One array element or one object member ("key": value); nested containers
 * are opened, not scanned here. */
static inline int st_member(scan *sc, nest *ns) {
    mcpg_json_span tmp;
    skip_ws(sc);
    if (ns->objs & 1) {
        if (sc->i >= sc->n || sc->s[sc->i] != '"' || scan_string(sc, &tmp)) return MCPG_EPROTO;
        if (sc->names) json_names_add(sc->names, &tmp);
        skip_ws(sc);
        if (sc->i >= sc->n || sc->s[sc->i] != ':') return MCPG_EPROTO;
        sc->i++;
        skip_ws(sc);
    }
    if (sc->i >= sc->n) return MCPG_EPROTO;
    unsigned char c = sc->s[sc->i];
    if (c == '{' || c == '[') return ST_OPEN;
    return scan_scalar(sc, &tmp) ? MCPG_EPROTO : ST_AFTER;
}

static inline int st_after(scan *sc, nest *ns) {
    skip_ws(sc);
    if (sc->i >= sc->n) return MCPG_EPROTO;
    unsigned char c = sc->s[sc->i++];
    if (c == ',') return ST_MEMBER;
    if (c != ((ns->objs & 1) ? '}' : ']')) return MCPG_EPROTO;
    return close_level(sc, ns);
}

static int scan_container(scan *sc, int budget) {
    nest ns = {0, 0, budget};
    int st = ST_OPEN;
    while (st > 0) {
        if (st == ST_OPEN) st = st_open(sc, &ns);
        else if (st == ST_MEMBER) st = st_member(sc, &ns);
        else st = st_after(sc, &ns);
    }
    return st;
}

/* One value at s[i] (whitespace already skipped, i < n), at most `budget`
 * containers deep. */
static int scan_value(scan *sc, int budget, mcpg_json_span *out) {
    unsigned char c = sc->s[sc->i];
    if (c != '{' && c != '[') return scan_scalar(sc, out);
    size_t start = sc->i;
    int rc = scan_container(sc, budget);
    out->p = (const char *)sc->s + start;
    out->n = sc->i - start;
    out->type = c == '{' ? MCPG_JSON_OBJECT : MCPG_JSON_ARRAY;
    out->escaped = 0;
    return rc;
}

/* ---- public ------------------------------------------------------------ */

int json_value_named(const char *s, size_t n, size_t *pos, mcpg_json_span *out, json_names *nm) {
    mcpg_json_span tmp;
    if (!out) out = &tmp;
    if (!s || !pos || *pos > n) return MCPG_EPROTO;
    scan sc = {(const unsigned char *)s, n, *pos, nm};
    skip_ws(&sc);
    if (sc.i >= n) {
        *pos = n;
        return 0;
    }
    if (scan_value(&sc, MCPG_JSON_MAX_DEPTH, out)) return MCPG_EPROTO;
    /* A number or literal must end at a token boundary: "12ab" is not 12. */
    if (sc.i < n && (out->type == MCPG_JSON_NUMBER || out->type >= MCPG_JSON_TRUE)) {
        unsigned char c = sc.s[sc.i];
        if (!memchr(" \t\r\n,]}", c, 7)) return MCPG_EPROTO;
    }
    *pos = sc.i;
    return 1;
}

int mcpg_json_value(const char *s, size_t n, size_t *pos, mcpg_json_span *out) {
    return json_value_named(s, n, pos, out, NULL);
}

int mcpg_json_validate(const char *s, size_t n) {
    mcpg_json_span tmp;
    if (!s) return MCPG_EPROTO;
    scan sc = {(const unsigned char *)s, n, 0, NULL};
    skip_ws(&sc);
    if (sc.i >= n || scan_value(&sc, MCPG_JSON_MAX_DEPTH, &tmp)) return MCPG_EPROTO;
    skip_ws(&sc);
    return sc.i == n ? 0 : MCPG_EPROTO;
}

/* Shared by object_next and array_next. The iterator is the offset of the
 * separator (',' or the closing bracket) after the last member returned, or
 * 0 before the first: so "[1,]" is caught (a ',' must be followed by a
 * member) and calling again after the end keeps answering 0. */
static int at_end(scan *sc, size_t *iter) {
    *iter = sc->i;
    sc->i++;
    skip_ws(sc); /* only whitespace may follow the closing bracket */
    return sc->i == sc->n ? 0 : MCPG_EPROTO;
}

/* Move to where the next member begins: 1 there is one, 0 at the end. */
static int to_member(scan *sc, size_t *iter, unsigned char open, unsigned char close) {
    if (sc->i == 0) {
        skip_ws(sc);
        if (sc->i >= sc->n || sc->s[sc->i] != open) return MCPG_EPROTO;
        sc->i++;
        skip_ws(sc);
        if (sc->i >= sc->n) return MCPG_EPROTO;
        if (sc->s[sc->i] == close) return at_end(sc, iter);
    } else if (sc->s[sc->i] == close) {
        return at_end(sc, iter);
    } else if (sc->s[sc->i] == ',') {
        sc->i++;
        skip_ws(sc);
    } else {
        return MCPG_EPROTO;
    }
    return 1;
}

static int next_member(const char *text, size_t n, size_t *iter, int obj,
                       mcpg_json_span *key, mcpg_json_span *val) {
    mcpg_json_span k = {0}, v;
    unsigned char close = obj ? '}' : ']';
    if (!text || !iter || *iter >= n) return MCPG_EPROTO;
    scan sc = {(const unsigned char *)text, n, *iter, NULL};
    int rc = to_member(&sc, iter, obj ? '{' : '[', close);
    if (rc != 1) return rc;
    if (obj) {
        if (sc.i >= n || sc.s[sc.i] != '"' || scan_string(&sc, &k)) return MCPG_EPROTO;
        skip_ws(&sc);
        if (sc.i >= n || sc.s[sc.i] != ':') return MCPG_EPROTO;
        sc.i++;
        skip_ws(&sc);
    }
    if (sc.i >= n || scan_value(&sc, MCPG_JSON_MAX_DEPTH - 1, &v)) return MCPG_EPROTO;
    skip_ws(&sc);
    if (sc.i >= n || (sc.s[sc.i] != ',' && sc.s[sc.i] != close)) return MCPG_EPROTO;
    *iter = sc.i;
    if (key && obj) *key = k;
    if (val) *val = v;
    return 1;
}

int mcpg_json_object_next(const char *obj, size_t n, size_t *iter, mcpg_json_span *key,
                          mcpg_json_span *val) {
    return next_member(obj, n, iter, 1, key, val);
}

int mcpg_json_array_next(const char *arr, size_t n, size_t *iter, mcpg_json_span *val) {
    return next_member(arr, n, iter, 0, NULL, val);
}

int mcpg_json_object_get(const char *obj, size_t n, const char *key, mcpg_json_span *out) {
    mcpg_json_span k, v;
    size_t iter = 0, klen;
    int rc;
    if (!key) return MCPG_EINVAL;
    klen = strlen(key);
    while ((rc = next_member(obj, n, &iter, 1, &k, &v)) == 1) {
        if (mcpg_json_string_eq(&k, key, klen) == 1) {
            if (out) *out = v;
            return 1;
        }
    }
    return rc;
}

/* ---- walking text that is already valid --------------------------------
 * The same members as next_member, found by following the structure only
 * (quotes, escapes, brackets): no grammar, UTF-8 or depth checks. For spans a
 * validating call has accepted, at a fraction of the cost. Every step still
 * stays inside [0, n), so invalid text gives wrong answers, never a bad read. */

static size_t skip_string_trusted(const unsigned char *s, size_t n, size_t i,
                                  uint32_t *escaped) {
    for (i = plain_run(s, n, i + 1); i < n && s[i] != '"'; i = plain_run(s, n, i)) {
        if (s[i] == '\\') { /* the escaped byte cannot end the string */
            *escaped = 1;
            i++;
        }
        i++; /* non-ASCII or control: not a quote either way */
    }
    return i; /* the closing quote, or n */
}

static size_t skip_value_trusted(const unsigned char *s, size_t n, size_t i,
                                 mcpg_json_span *out) {
    size_t start = i;
    uint32_t escaped = 0;
    unsigned char c = s[i];
    if (c == '"') {
        i = skip_string_trusted(s, n, i, &escaped);
        *out = (mcpg_json_span){(const char *)s + start + 1, i - start - 1, MCPG_JSON_STRING,
                                escaped};
        return i < n ? i + 1 : n;
    }
    if (c == '{' || c == '[') {
        size_t depth = 0;
        for (; i < n; i++) {
            unsigned char d = s[i];
            if (d == '"') i = skip_string_trusted(s, n, i, &escaped);
            else if (d == '{' || d == '[') depth++;
            else if ((d == '}' || d == ']') && --depth == 0) break;
        }
        i = i < n ? i + 1 : n;
        *out = (mcpg_json_span){(const char *)s + start, i - start,
                                c == '{' ? MCPG_JSON_OBJECT : MCPG_JSON_ARRAY, 0};
        return i;
    }
    while (i < n && !memchr(" \t\r\n,]}", s[i], 7)) i++;
    uint32_t type = c == 't' ? MCPG_JSON_TRUE : c == 'f' ? MCPG_JSON_FALSE
                  : c == 'n' ? MCPG_JSON_NULL : MCPG_JSON_NUMBER;
    *out = (mcpg_json_span){(const char *)s + start, i - start, type, 0};
    return i;
}

static size_t skip_ws_trusted(const unsigned char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    return i;
}

int mcpg_json_object_next_trusted(const char *obj, size_t n, size_t *iter, mcpg_json_span *key,
                                  mcpg_json_span *val) {
    const unsigned char *s = (const unsigned char *)obj;
    mcpg_json_span k, v;
    if (!obj || !iter || *iter >= n) return MCPG_EPROTO;
    size_t i = *iter;
    if (i == 0) i = skip_ws_trusted(s, n, 0); /* at the opening brace */
    if (i >= n || s[i] == '}') { /* past the end stays at the end */
        *iter = i < n ? i : n - 1;
        return i < n ? 0 : MCPG_EPROTO;
    }
    i = skip_ws_trusted(s, n, i + 1); /* past '{' or ',' */
    if (i >= n || s[i] == '}') {
        *iter = i < n ? i : n - 1;
        return i < n ? 0 : MCPG_EPROTO;
    }
    if (s[i] != '"') return MCPG_EPROTO;
    i = skip_ws_trusted(s, n, skip_value_trusted(s, n, i, &k));
    if (i >= n || s[i] != ':') return MCPG_EPROTO;
    i = skip_ws_trusted(s, n, i + 1);
    if (i >= n) return MCPG_EPROTO;
    i = skip_ws_trusted(s, n, skip_value_trusted(s, n, i, &v));
    if (i >= n) return MCPG_EPROTO;
    *iter = i; /* at ',' or '}' */
    if (key) *key = k;
    if (val) *val = v;
    return 1;
}

int mcpg_json_array_next_trusted(const char *arr, size_t n, size_t *iter, mcpg_json_span *val) {
    const unsigned char *s = (const unsigned char *)arr;
    mcpg_json_span v;
    if (!arr || !iter || *iter >= n) return MCPG_EPROTO;
    size_t i = *iter;
    if (i == 0) i = skip_ws_trusted(s, n, 0); /* at the opening bracket */
    if (i >= n || s[i] == ']') { /* past the end stays at the end */
        *iter = i < n ? i : n - 1;
        return i < n ? 0 : MCPG_EPROTO;
    }
    i = skip_ws_trusted(s, n, i + 1); /* past '[' or ',' */
    if (i >= n || s[i] == ']') {
        *iter = i < n ? i : n - 1;
        return i < n ? 0 : MCPG_EPROTO;
    }
    i = skip_ws_trusted(s, n, skip_value_trusted(s, n, i, &v));
    if (i >= n) return MCPG_EPROTO;
    *iter = i; /* at ',' or ']' */
    if (val) *val = v;
    return 1;
}

int mcpg_json_object_get_trusted(const char *obj, size_t n, const char *key,
                                 mcpg_json_span *out) {
    mcpg_json_span k, v;
    size_t iter = 0, klen;
    int rc;
    if (!key) return MCPG_EINVAL;
    klen = strlen(key);
    while ((rc = mcpg_json_object_next_trusted(obj, n, &iter, &k, &v)) == 1) {
        if (mcpg_json_string_eq(&k, key, klen) == 1) {
            if (out) *out = v;
            return 1;
        }
    }
    return rc;
}

/* Compare a decoded string with lit[0..n) without a buffer: plain runs by
 * memcmp, each escape through a 4-byte scratch. */
static int eq_escaped(const unsigned char *p, const unsigned char *end,
                      const unsigned char *lit, const unsigned char *lend) {
    while (p < end) {
        const unsigned char *bs = memchr(p, '\\', (size_t)(end - p));
        size_t run = (size_t)((bs ? bs : end) - p);
        if ((size_t)(lend - lit) < run || memcmp(p, lit, run) != 0) return 0;
        p += run;
        lit += run;
        if (!bs) break;
        uint32_t cp;
        unsigned char u[4];
        size_t k = read_escape(p, end, &cp);
        if (!k) return 0;
        size_t m = utf8_put(u, cp);
        if ((size_t)(lend - lit) < m || memcmp(u, lit, m) != 0) return 0;
        p += k;
        lit += m;
    }
    return lit == lend;
}

int mcpg_json_string_eq(const mcpg_json_span *s, const char *lit, size_t n) {
    if (!s || s->type != MCPG_JSON_STRING || (!lit && n)) return 0;
    if (!s->escaped) return s->n == n && (n == 0 || memcmp(s->p, lit, n) == 0);
    /* A decoded string is never longer than its escaped text. */
    if (n > s->n) return 0;
    const unsigned char *p = (const unsigned char *)s->p;
    return eq_escaped(p, p + s->n, (const unsigned char *)lit,
                      (const unsigned char *)lit + n);
}

int mcpg_json_string_decode(const mcpg_json_span *s, char *dst, size_t cap, size_t *len_out) {
    if (!s || s->type != MCPG_JSON_STRING) return MCPG_EPROTO;
    const unsigned char *p = (const unsigned char *)s->p, *end = p + s->n;
    unsigned char *d = (unsigned char *)dst, *dend = d + cap;
    if (!dst || cap == 0) return MCPG_ERANGE;
    while (p < end) {
        const unsigned char *bs = s->escaped ? memchr(p, '\\', (size_t)(end - p)) : NULL;
        size_t run = (size_t)((bs ? bs : end) - p);
        if ((size_t)(dend - d) <= run) return MCPG_ERANGE; /* keep room for the NUL */
        memcpy(d, p, run);
        d += run;
        p += run;
        if (!bs) break;
        uint32_t cp;
        size_t k = read_escape(p, end, &cp);
        if (!k) return MCPG_EPROTO;
        unsigned char u[4];
        size_t m = utf8_put(u, cp);
        if ((size_t)(dend - d) <= m) return MCPG_ERANGE;
        memcpy(d, u, m);
        d += m;
        p += k;
    }
    *d = '\0';
    if (len_out) *len_out = (size_t)(d - (unsigned char *)dst);
    return 0;
}

int mcpg_json_int64(const mcpg_json_span *s, int64_t *out) {
    if (!s || s->type != MCPG_JSON_NUMBER || !s->p || s->n == 0) return MCPG_EPROTO;
    const unsigned char *p = (const unsigned char *)s->p, *end = p + s->n;
    int neg = *p == '-';
    p += neg;
    /* "0" alone, or no leading zero; anything but digits (a fraction or an
     * exponent) makes it not an integer. */
    if (p == end || (*p == '0' && end - p > 1)) return MCPG_EPROTO;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
    int over = 0;
    for (; p < end; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (d > 9) return MCPG_EPROTO;
        if (v > (limit - d) / 10) over = 1;
        else v = v * 10 + d;
    }
    if (over) return MCPG_ERANGE;
    if (out) *out = !neg ? (int64_t)v : v > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)v;
    return 0;
}

/* ---- escaping ---------------------------------------------------------- */

static inline char *put_esc(char *d, const char *e, size_t n) {
    memcpy(d, e, n);
    return d + n;
}

/* A quote, a backslash or a control byte. */
static char *escape_ascii(char *d, unsigned char c) {
    static const char hexd[] = "0123456789abcdef";
    switch (c) {
    case '"': return put_esc(d, "\\\"", 2);
    case '\\': return put_esc(d, "\\\\", 2);
    case '\b': return put_esc(d, "\\b", 2);
    case '\f': return put_esc(d, "\\f", 2);
    case '\n': return put_esc(d, "\\n", 2);
    case '\r': return put_esc(d, "\\r", 2);
    case '\t': return put_esc(d, "\\t", 2);
    default:
        d = put_esc(d, "\\u00", 4);
        *d++ = hexd[c >> 4];
        *d++ = hexd[c & 15];
        return d;
    }
}

size_t mcpg_json_escape(char *dst, const char *src, size_t n) {
    const unsigned char *s = (const unsigned char *)src;
    char *d = dst;
    size_t i = 0;
    while (i < n) {
        size_t start = i;
        i = plain_run(s, n, i);
        memcpy(d, s + start, i - start);
        d += i - start;
        if (i >= n) break;
        unsigned c = cls[s[i]];
        if (c == C_QUOTE || c == C_BSLASH || c == C_CTRL) {
            d = escape_ascii(d, s[i++]);
            continue;
        }
        int k = c == C_BAD ? -1 : utf8_seq(s + i, n - i, c);
        if (k > 0) d = put_esc(d, (const char *)s + i, (size_t)k);
        else d = put_esc(d, "\\ufffd", 6); /* one U+FFFD per maximal invalid prefix */
        i += (size_t)(k > 0 ? k : -k);
    }
    return (size_t)(d - dst);
}
