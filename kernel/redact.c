/* Redaction: what the gateway hides before call data reaches an audit sink
 * (and any module that asks, host->redact_json). Rules come from the
 * manifest's gateway.redact and are compiled once per manifest:
 *   - member names whose values are always hidden, at any depth
 *     (gateway.redact.keys; default: the usual credential names), compared
 *     by their letters and digits only, case folded: "api-key", "api_key",
 *     "apiKey" and "API.KEY" are one name, since each spelling is in use;
 *   - JSON pointers into the arguments or the result (gateway.redact.pointers;
 *     "*" matches any one member or index);
 *   - POSIX extended regular expressions (gateway.redact.patterns): each match
 *     inside a string is replaced;
 *   - always, inside any string: JWT-shaped tokens; "Bearer <token>" and
 *     "Basic <base64 of user:pass>" (any case, any run of spaces or tabs
 *     after the scheme); the userinfo of a URL
 *     ("https://user:pass@host"); the value of a URL query parameter whose
 *     name is one of the keys ("?access_token=...", "&api-key=...").
 * A hidden value becomes the string "[REDACTED]"; the JSON stays valid and
 * keeps its shape, so an auditor still sees which members were there. */
#include "kernel.h"

#include <ctype.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#define HIDDEN "\"[REDACTED]\""
#define MAX_SEGMENTS 16

typedef struct seg { char *s; size_t n; } seg;
typedef struct pointer { seg segs[MAX_SEGMENTS]; size_t n; } pointer;

struct redactor {
    char **keys; size_t n_keys;
    size_t *key_lens; /* strlen of each key: compared per member of every redacted value */
    pointer *ptrs; size_t n_ptrs;
    regex_t *pats; size_t n_pats;
    int args_mode;   /* AUDIT_ARGS_* */
    bool results;
};

/* Written as documented; compared folded (fold_key). */
static const char *const DEFAULT_KEYS[] = {
    "authorization", "proxy-authorization", "cookie", "set-cookie", "password", "passwd",
    "pwd", "passphrase", "secret", "client_secret", "client-secret", "token", "access_token",
    "refresh_token", "id_token", "auth_token", "session_token", "bearer_token", "api_key",
    "x-api-key", "api_secret", "private_key", "secret_key", "access_key", "credentials",
    "signature", "sig"};

/* A name as it is compared: its ASCII letters and digits, lower case (other
 * bytes, UTF-8 included, kept as they are; '-', '_', '.', spaces dropped).
 * out holds at least n bytes; returns the length. */
static size_t fold_key(const char *k, size_t n, char *out) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)k[i];
        if (ch == '-' || ch == '_' || ch == '.' || ch == ' ') continue;
        out[m++] = (char)tolower(ch);
    }
    return m;
}

/* ---- compiling the rules ---- */

/* RFC 6901: "/a/b~1c" → ["a", "b/c"]; 0 or -1 when malformed. */
static int pointer_parse(const char *text, pointer *p) {
    memset(p, 0, sizeof *p);
    if (text[0] != '/') return -1;
    const char *s = text + 1;
    for (;;) {
        if (p->n == MAX_SEGMENTS) return -1;
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        char *d = malloc(n + 1);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i] == '~') {
                if (i + 1 >= n || (s[i + 1] != '0' && s[i + 1] != '1')) {
                    free(d);
                    return -1;
                }
                d[k++] = s[++i] == '0' ? '~' : '/';
            } else {
                d[k++] = s[i];
            }
        }
        d[k] = '\0';
        p->segs[p->n++] = (seg){d, k};
        if (!e) return 0;
        s = e + 1;
    }
}

static void pointer_free(pointer *p) {
    for (size_t i = 0; i < p->n; i++) free(p->segs[i].s);
}

void redactor_free(redactor *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_keys; i++) free(r->keys[i]);
    free(r->keys);
    free(r->key_lens);
    for (size_t i = 0; i < r->n_ptrs; i++) pointer_free(&r->ptrs[i]);
    free(r->ptrs);
    for (size_t i = 0; i < r->n_pats; i++) regfree(&r->pats[i]);
    free(r->pats);
    free(r);
}

static void add_key(redactor *r, const char *k) {
    size_t n = strlen(k);
    char *d = malloc(n + 1);
    if (!d) return;
    d[fold_key(k, n, d)] = '\0';
    if (!d[0]) { /* "-" or "_": nothing to compare */
        free(d);
        return;
    }
    r->key_lens[r->n_keys] = strlen(d);
    r->keys[r->n_keys++] = d;
}

/* An array of strings at where.key, each checked by ok(); NULL when absent. */
static json_t *string_array(json_t *obj, const char *key, const char *where, const char *file,
                            errlist *errs) {
    json_t *a = obj ? json_object_get(obj, key) : NULL;
    if (!a) return NULL;
    char path[64];
    snprintf(path, sizeof path, "%s.%s", where, key);
    if (!json_is_array(a)) {
        errlist_add(errs, file, path, "must be an array of strings");
        return NULL;
    }
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_string(v) || !json_string_length(v)) {
            snprintf(path, sizeof path, "%s.%s[%zu]", where, key, i);
            errlist_add(errs, file, path, "must be a non-empty string");
            return NULL;
        }
    }
    return a;
}

static void compile_keys(redactor *r, json_t *red, const char *file, errlist *errs) {
    json_t *keys = string_array(red, "keys", "gateway.redact", file, errs);
    size_t n = keys ? json_array_size(keys) : sizeof DEFAULT_KEYS / sizeof *DEFAULT_KEYS;
    r->keys = calloc(n ? n : 1, sizeof *r->keys);
    r->key_lens = calloc(n ? n : 1, sizeof *r->key_lens);
    if (!r->keys || !r->key_lens) { /* never redact less than asked: refuse the manifest */
        errlist_add(errs, file, "gateway.redact.keys", "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++)
        add_key(r, keys ? json_string_value(json_array_get(keys, i)) : DEFAULT_KEYS[i]);
}

static void compile_pointers(redactor *r, json_t *red, const char *file, errlist *errs) {
    json_t *a = string_array(red, "pointers", "gateway.redact", file, errs);
    size_t n = a ? json_array_size(a) : 0;
    r->ptrs = calloc(n ? n : 1, sizeof *r->ptrs);
    for (size_t i = 0; i < n; i++) {
        if (pointer_parse(json_string_value(json_array_get(a, i)), &r->ptrs[r->n_ptrs]) == 0) {
            r->n_ptrs++;
            continue;
        }
        pointer_free(&r->ptrs[r->n_ptrs]);
        char path[64];
        snprintf(path, sizeof path, "gateway.redact.pointers[%zu]", i);
        errlist_add(errs, file, path,
                    "not a JSON pointer (\"/a/b\", ~0 and ~1 escapes, at most %d segments)",
                    MAX_SEGMENTS);
    }
}

static void compile_patterns(redactor *r, json_t *red, const char *file, errlist *errs) {
    json_t *a = string_array(red, "patterns", "gateway.redact", file, errs);
    size_t n = a ? json_array_size(a) : 0;
    r->pats = calloc(n ? n : 1, sizeof *r->pats);
    for (size_t i = 0; i < n; i++) {
        int rc = regcomp(&r->pats[r->n_pats], json_string_value(json_array_get(a, i)),
                         REG_EXTENDED);
        if (rc == 0) {
            r->n_pats++;
            continue;
        }
        char msg[128], path[64];
        regerror(rc, &r->pats[r->n_pats], msg, sizeof msg);
        snprintf(path, sizeof path, "gateway.redact.patterns[%zu]", i);
        errlist_add(errs, file, path, "not a POSIX extended regular expression: %s", msg);
    }
}

static void check_keys_of(json_t *obj, const char *where, const char *const *known, size_t n,
                          const char *file, errlist *errs) {
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        size_t i = 0;
        while (i < n && strcmp(k, known[i]) != 0) i++;
        if (i == n) {
            char path[96];
            snprintf(path, sizeof path, "%s.%s", where, k);
            errlist_add(errs, file, path, "unknown key");
        }
    }
}

static void compile_audit(redactor *r, json_t *audit, const char *file, errlist *errs) {
    static const char *const keys[] = {"arguments", "results"};
    r->args_mode = AUDIT_ARGS_REDACTED;
    if (!audit) return;
    check_keys_of(audit, "gateway.audit", keys, 2, file, errs);
    json_t *a = json_object_get(audit, "arguments");
    const char *s = a ? json_string_value(a) : "redacted";
    if (s && strcmp(s, "redacted") == 0) r->args_mode = AUDIT_ARGS_REDACTED;
    else if (s && strcmp(s, "hashed") == 0) r->args_mode = AUDIT_ARGS_HASHED;
    else if (s && strcmp(s, "omitted") == 0) r->args_mode = AUDIT_ARGS_OMITTED;
    else errlist_add(errs, file, "gateway.audit.arguments", "must be one of: redacted, hashed, omitted");
    json_t *res = json_object_get(audit, "results");
    if (res && !json_is_boolean(res)) errlist_add(errs, file, "gateway.audit.results", "must be a boolean");
    r->results = res && json_is_true(res);
}

redactor *redactor_compile(json_t *redact, json_t *audit, const char *file, errlist *errs) {
    static const char *const keys[] = {"keys", "pointers", "patterns"};
    redactor *r = calloc(1, sizeof *r);
    if (redact && !json_is_object(redact)) {
        errlist_add(errs, file, "gateway.redact", "must be an object");
        redact = NULL;
    }
    if (audit && !json_is_object(audit)) {
        errlist_add(errs, file, "gateway.audit", "must be an object");
        audit = NULL;
    }
    if (redact) check_keys_of(redact, "gateway.redact", keys, 3, file, errs);
    compile_keys(r, redact, file, errs);
    compile_pointers(r, redact, file, errs);
    compile_patterns(r, redact, file, errs);
    compile_audit(r, audit, file, errs);
    return r;
}

int redactor_args_mode(const redactor *r) { return r ? r->args_mode : AUDIT_ARGS_REDACTED; }
bool redactor_results(const redactor *r) { return r && r->results; }

/* ---- hiding inside strings ---- */

typedef struct span { size_t a, b; } span;
#define MAX_SPANS 32

static bool b64url(char ch) {
    return isalnum((unsigned char)ch) || ch == '-' || ch == '_';
}

/* JWT-shaped: eyJ<b64url>.<b64url>.<b64url or empty>, from s[i]. Its end, or 0. */
static size_t jwt_at(const char *s, size_t n, size_t i) {
    if (i + 3 > n || memcmp(s + i, "eyJ", 3) != 0 || (i > 0 && b64url(s[i - 1]))) return 0;
    size_t j = i, dots = 0;
    while (j < n && (b64url(s[j]) || (s[j] == '.' && dots < 2))) {
        if (s[j] == '.') dots++;
        j++;
    }
    return dots == 2 && j - i >= 16 ? j : 0;
}

/* Does t[0..n) read as base64 of "user:password" (Basic credentials)? The
 * check keeps prose ("basic usage") apart from a credential. */
static bool basic_credentials(const char *t, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint32_t acc = 0;
    int bits = 0;
    bool colon = false;
    size_t i = 0;
    for (; i < n && t[i] != '='; i++) {
        const char *p = memchr(A, t[i], 64);
        if (!p) return false;
        acc = acc << 6 | (uint32_t)(p - A);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            colon |= ((acc >> bits) & 0xff) == ':';
        }
    }
    for (; i < n; i++)
        if (t[i] != '=') return false;
    return colon && n >= 4;
}

/* "Bearer <token>" or "Basic <base64 of user:pass>" (any case, one or more
 * spaces or tabs after the scheme, the scheme a word of its own) from s[i]:
 * its end (scheme and credentials are hidden together), or 0. */
static size_t scheme_at(const char *s, size_t n, size_t i) {
    static const char *const schemes[] = {"bearer", "basic"};
    if (i > 0 && isalnum((unsigned char)s[i - 1])) return 0;
    for (size_t k = 0; k < sizeof schemes / sizeof *schemes; k++) {
        size_t sl = strlen(schemes[k]), j = i + sl;
        if (j >= n || strncasecmp(s + i, schemes[k], sl) != 0 || (s[j] != ' ' && s[j] != '\t'))
            continue;
        while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
        size_t e = j;
        while (e < n && !isspace((unsigned char)s[e]) && s[e] != '"') e++;
        if (e > j && (k == 0 || basic_credentials(s + j, e - j))) return e;
    }
    return 0;
}

/* "scheme://user:pass@host": the userinfo from s[i] (just past "://"), or 0. */
static size_t userinfo_at(const char *s, size_t n, size_t i) {
    if (i < 3 || memcmp(s + i - 3, "://", 3) != 0) return 0;
    for (size_t j = i; j < n; j++) {
        char ch = s[j];
        if (ch == '@') return j > i ? j : 0;
        if (ch == '/' || ch == '?' || ch == '#' || isspace((unsigned char)ch) || ch == '"') return 0;
    }
    return 0;
}

static bool key_hidden(const redactor *r, const char *k, size_t n);

/* "?name=value" or "&name=value" with name one of the keys, from s[i] (the
 * '?' or '&'): the value {*a, end}, or 0. */
static size_t query_at(const redactor *r, const char *s, size_t n, size_t i, size_t *a) {
    size_t j = i + 1;
    while (j < n && s[j] != '=' && s[j] != '&' && s[j] != '#' && !isspace((unsigned char)s[j])) j++;
    if (j >= n || s[j] != '=' || j == i + 1 || !key_hidden(r, s + i + 1, j - i - 1)) return 0;
    size_t e = ++j;
    while (e < n && s[e] != '&' && s[e] != '#' && !isspace((unsigned char)s[e]) && s[e] != '"') e++;
    if (e == j) return 0;
    *a = j;
    return e;
}

static size_t add_span(span *sp, size_t k, size_t a, size_t b) {
    if (k < MAX_SPANS) sp[k++] = (span){a, b};
    return k;
}

static int span_cmp(const void *x, const void *y) {
    const span *a = x, *b = y;
    return a->a < b->a ? -1 : a->a > b->a;
}

/* What of the decoded string s must be hidden, sorted; a string with more
 * than MAX_SPANS hits is hidden whole. */
static size_t string_hits(const redactor *r, const char *s, size_t n, span *sp) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t a = i, e = 0;
        char lc = (char)(s[i] | 0x20);
        if (s[i] == 'e') e = jwt_at(s, n, i);
        if (!e && lc == 'b') e = scheme_at(s, n, i);
        if (!e && i >= 3 && s[i - 1] == '/') e = userinfo_at(s, n, i);
        if (!e && (s[i] == '?' || s[i] == '&')) e = query_at(r, s, n, i, &a);
        if (e) {
            k = add_span(sp, k, a, e);
            i = e - 1;
        }
    }
    for (size_t p = 0; p < r->n_pats; p++) {
        regmatch_t m;
        size_t off = 0;
        while (off <= n && regexec(&r->pats[p], s + off, 1, &m, off ? REG_NOTBOL : 0) == 0) {
            if (m.rm_eo == m.rm_so) break; /* an empty match hides nothing */
            k = add_span(sp, k, off + (size_t)m.rm_so, off + (size_t)m.rm_eo);
            off += (size_t)m.rm_eo;
        }
    }
    if (k >= MAX_SPANS) {
        sp[0] = (span){0, n};
        return 1;
    }
    qsort(sp, k, sizeof *sp, span_cmp);
    return k;
}

/* A string value (span: raw text between the quotes). */
static int redact_string(const redactor *r, const mcpg_json_span *v, mcpg_buf *out) {
    char stack[1024];
    char *s = stack;
    size_t n = v->n;
    if (v->escaped) {
        s = v->n < sizeof stack ? stack : malloc(v->n + 1);
        if (!s || mcpg_json_string_decode(v, s, v->n + 1, &n) != 0) {
            if (s != stack) free(s);
            return mcpg_buf_puts(out, HIDDEN); /* cannot read it: hide it */
        }
    } else {
        s = (char *)v->p; /* regexec needs NUL-terminated text: copy */
        if (r->n_pats) {
            s = n < sizeof stack ? stack : malloc(n + 1);
            if (!s) return MCPG_ENOMEM;
            memcpy(s, v->p, n);
            s[n] = '\0';
        }
    }
    span sp[MAX_SPANS];
    size_t k = string_hits(r, s, n, sp);
    int rc = 0;
    if (!k) {
        rc = mcpg_buf_append(out, v->p - 1, v->n + 2);
    } else {
        mcpg_buf tmp = {0};
        size_t at = 0;
        for (size_t i = 0; i < k && !rc; i++) {
            if (sp[i].a < at) sp[i].a = at; /* overlapping hits */
            if (sp[i].b <= at) continue;
            rc |= mcpg_buf_append(&tmp, s + at, sp[i].a - at);
            rc |= mcpg_buf_puts(&tmp, "[REDACTED]");
            at = sp[i].b;
        }
        rc |= mcpg_buf_append(&tmp, s + at, n - at);
        rc |= mcpg_buf_append_json_string(out, tmp.data ? tmp.data : "", tmp.len);
        mcpg_buf_free(&tmp);
    }
    if (s != stack && s != v->p) free(s);
    return rc;
}

/* ---- walking the JSON ---- */

typedef struct walk {
    const redactor *r;
    mcpg_buf *out;
    seg path[MCPG_JSON_MAX_DEPTH + 1];
    char keybuf[MCPG_JSON_MAX_DEPTH + 1][64];
    size_t depth;
} walk;

static bool key_hidden(const redactor *r, const char *k, size_t n) {
    char folded[256];
    if (n > sizeof folded) return false; /* no key is that long */
    size_t m = fold_key(k, n, folded);
    for (size_t i = 0; i < r->n_keys; i++)
        if (r->key_lens[i] == m && memcmp(r->keys[i], folded, m) == 0) return true;
    return false;
}

static bool pointer_hidden(const walk *wk) {
    for (size_t i = 0; i < wk->r->n_ptrs; i++) {
        const pointer *p = &wk->r->ptrs[i];
        if (p->n != wk->depth) continue;
        size_t j = 0;
        while (j < p->n && ((p->segs[j].n == 1 && p->segs[j].s[0] == '*') ||
                            (p->segs[j].n == wk->path[j].n &&
                             memcmp(p->segs[j].s, wk->path[j].s, p->segs[j].n) == 0)))
            j++;
        if (j == p->n) return true;
    }
    return false;
}

/* The walk reads text root_span validated whole: its members are found by
 * the trusted iteration, not validated again at every level. */
static int walk_value(walk *wk, const mcpg_json_span *v);

static int walk_object(walk *wk, const mcpg_json_span *v) {
    size_t it = 0;
    mcpg_json_span k, val;
    int rc = mcpg_buf_append(wk->out, "{", 1), r, first = 1;
    while (!rc && (r = mcpg_json_object_next_trusted(v->p, v->n, &it, &k, &val)) == 1) {
        if (!first) rc |= mcpg_buf_append(wk->out, ",", 1);
        first = 0;
        rc |= mcpg_buf_append(wk->out, k.p - 1, k.n + 2);
        rc |= mcpg_buf_append(wk->out, ":", 1);
        char *kb = wk->keybuf[wk->depth];
        size_t kn = 0;
        if (mcpg_json_string_decode(&k, kb, sizeof wk->keybuf[0], &kn) != 0) kn = 0, kb[0] = 0;
        wk->path[wk->depth] = (seg){kb, kn};
        wk->depth++;
        bool hide = key_hidden(wk->r, kb, kn) || pointer_hidden(wk);
        rc |= hide ? mcpg_buf_puts(wk->out, HIDDEN) : walk_value(wk, &val);
        wk->depth--;
    }
    return rc ? rc : r < 0 ? MCPG_EPROTO : mcpg_buf_append(wk->out, "}", 1);
}

static int walk_array(walk *wk, const mcpg_json_span *v) {
    size_t it = 0, i = 0;
    mcpg_json_span val;
    int rc = mcpg_buf_append(wk->out, "[", 1), r;
    while (!rc && (r = mcpg_json_array_next_trusted(v->p, v->n, &it, &val)) == 1) {
        if (i) rc |= mcpg_buf_append(wk->out, ",", 1);
        char *kb = wk->keybuf[wk->depth];
        int kn = snprintf(kb, sizeof wk->keybuf[0], "%zu", i++);
        wk->path[wk->depth] = (seg){kb, (size_t)kn};
        wk->depth++;
        rc |= pointer_hidden(wk) ? mcpg_buf_puts(wk->out, HIDDEN) : walk_value(wk, &val);
        wk->depth--;
    }
    return rc ? rc : r < 0 ? MCPG_EPROTO : mcpg_buf_append(wk->out, "]", 1);
}

static int walk_value(walk *wk, const mcpg_json_span *v) {
    if (wk->depth >= MCPG_JSON_MAX_DEPTH) return MCPG_EPROTO;
    switch (v->type) {
    case MCPG_JSON_OBJECT: return walk_object(wk, v);
    case MCPG_JSON_ARRAY: return walk_array(wk, v);
    case MCPG_JSON_STRING: return redact_string(wk->r, v, wk->out);
    default: return mcpg_buf_append(wk->out, v->p, v->n);
    }
}

/* The whole text as one span; validated first unless the caller already
 * did (`valid`). */
static int root_span(const char *json, size_t len, bool valid, mcpg_json_span *v) {
    if (!valid && mcpg_json_validate(json, len) != 0) return MCPG_EPROTO;
    size_t i = 0;
    while (i < len && isspace((unsigned char)json[i])) i++;
    size_t e = len;
    while (e > i && isspace((unsigned char)json[e - 1])) e--;
    *v = (mcpg_json_span){.p = json + i, .n = e - i};
    switch (json[i]) {
    case '{': v->type = MCPG_JSON_OBJECT; break;
    case '[': v->type = MCPG_JSON_ARRAY; break;
    case '"':
        v->type = MCPG_JSON_STRING;
        v->p++;
        v->n -= 2;
        v->escaped = memchr(v->p, '\\', v->n) != NULL;
        break;
    default: v->type = MCPG_JSON_NUMBER; /* number, true, false, null: copied as is */
    }
    return 0;
}

static int redact_text(const redactor *r, const char *json, size_t len, bool valid, mcpg_buf *out) {
    static const redactor none = {0};
    mcpg_json_span v;
    if (root_span(json, len, valid, &v) != 0) return MCPG_EPROTO;
    static __thread walk one; /* 4 KiB of path: not on the stack, not per call */
    walk *wk = &one;
    wk->r = r ? r : &none;
    wk->out = out;
    wk->depth = 0;
    size_t mark = out->len;
    int rc = walk_value(wk, &v);
    if (rc) out->len = mark;
    return rc;
}

int redact_json(const redactor *r, const char *json, size_t len, mcpg_buf *out) {
    return redact_text(r, json, len, false, out);
}

int redact_json_valid(const redactor *r, const char *json, size_t len, mcpg_buf *out) {
    return redact_text(r, json, len, true, out);
}

int redact_hash(const char *json, size_t len, mcpg_buf *out) {
    unsigned char md[32];
    unsigned int n = 0;
    if (!EVP_Digest(json, len, md, &n, EVP_sha256(), NULL)) return MCPG_ENOMEM;
    char hex[2 * sizeof md];
    mcpg_hex(md, n, hex);
    int rc = mcpg_buf_puts(out, "{\"sha256\":\"");
    rc |= mcpg_buf_append(out, hex, 2 * n);
    return rc | mcpg_buf_puts(out, "\"}");
}
