/* policy_rules: JSON pointers and argument guards (see pr_guard.h). */
#include "pr_guard.h"

#include <mcpg/sdk.h>

#include <stdlib.h>
#include <string.h>

/* ---- pointers ---- */

static uint32_t index_of(const char *s, size_t n) {
    if (n == 0 || n > 9 || (n > 1 && s[0] == '0')) return PR_INDEX_NONE;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return PR_INDEX_NONE;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    return v;
}

/* One reference token, s[0..n) as written: ~1 → '/', ~0 → '~'. */
static int token_decode(pr_token *t, const char *s, size_t n, const char **why) {
    t->text = malloc(n + 1);
    if (!t->text) return *why = "out of memory", -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '~') {
            t->text[k++] = s[i];
            continue;
        }
        if (i + 1 == n || (s[i + 1] != '0' && s[i + 1] != '1'))
            return *why = "'~' must be followed by 0 or 1 (RFC 6901: ~0 is '~', ~1 is '/')", -1;
        t->text[k++] = s[++i] == '0' ? '~' : '/';
    }
    t->text[k] = '\0';
    t->len = (uint32_t)k;
    t->index = index_of(t->text, k);
    return 0;
}

int pr_pointer_compile(pr_pointer *p, const char *text, const char **why) {
    memset(p, 0, sizeof *p);
    size_t len = strlen(text);
    if (len && text[0] != '/')
        return *why = "a JSON pointer is \"\" or starts with '/' (e.g. \"/path\")", -1;
    uint32_t n = 0;
    for (size_t i = 0; i < len; i++) n += text[i] == '/';
    p->text = strdup(text);
    p->tokens = n ? calloc(n, sizeof *p->tokens) : NULL;
    if (!p->text || (n && !p->tokens)) return pr_pointer_free(p), *why = "out of memory", -1;
    const char *s = text;
    for (uint32_t i = 0; i < n; i++) {
        const char *start = s + 1, *end = strchr(start, '/');
        if (!end) end = text + len;
        p->n = i + 1;
        if (token_decode(&p->tokens[i], start, (size_t)(end - start), why) < 0)
            return pr_pointer_free(p), -1;
        s = end;
    }
    return 0;
}

void pr_pointer_free(pr_pointer *p) {
    for (uint32_t i = 0; i < p->n; i++) free(p->tokens[i].text);
    free(p->tokens);
    free(p->text);
    memset(p, 0, sizeof *p);
}

/* The member named t in an object (text the caller validated). Every member
 * is looked at: a second one of that name makes the place ambiguous (a
 * backend may read either copy, so the guard must not choose for it). */
static int member(const mcpg_json_span *obj, const pr_token *t, mcpg_json_span *out) {
    size_t it = 0;
    mcpg_json_span k, v;
    int found = PR_ABSENT, r;
    while ((r = mcpg_json_object_next_trusted(obj->p, obj->n, &it, &k, &v)) == 1) {
        if (mcpg_json_string_eq(&k, t->text, t->len) != 1) continue;
        if (found == PR_FOUND) return PR_AMBIGUOUS;
        found = PR_FOUND;
        *out = v;
    }
    return r < 0 ? PR_MALFORMED : found;
}

static int element(const mcpg_json_span *arr, uint32_t index, mcpg_json_span *out) {
    if (index == PR_INDEX_NONE) return PR_ABSENT; /* "-" or a name: no element */
    size_t it = 0;
    int r;
    for (uint32_t i = 0; (r = mcpg_json_array_next(arr->p, arr->n, &it, out)) == 1; i++)
        if (i == index) return PR_FOUND;
    return r < 0 ? PR_MALFORMED : PR_ABSENT;
}

/* The whole of a validated text as one span (no second pass over it). */
static void root_span(const char *doc, size_t n, mcpg_json_span *out) {
    while (n && (*doc == ' ' || *doc == '\t' || *doc == '\n' || *doc == '\r')) doc++, n--;
    while (n && (doc[n - 1] == ' ' || doc[n - 1] == '\t' || doc[n - 1] == '\n' ||
                 doc[n - 1] == '\r'))
        n--;
    *out = (mcpg_json_span){.p = doc, .n = n};
    switch (n ? doc[0] : 0) {
    case '{': out->type = MCPG_JSON_OBJECT; break;
    case '[': out->type = MCPG_JSON_ARRAY; break;
    case '"': /* a string span is what lies between its quotes */
        out->type = MCPG_JSON_STRING;
        out->p = doc + 1;
        out->n = n - 2;
        out->escaped = memchr(out->p, '\\', out->n) != NULL;
        break;
    case 't': out->type = MCPG_JSON_TRUE; break;
    case 'f': out->type = MCPG_JSON_FALSE; break;
    case 'n': out->type = MCPG_JSON_NULL; break;
    default: out->type = MCPG_JSON_NUMBER;
    }
}

int pr_pointer_find(const pr_pointer *p, const char *doc, size_t n, mcpg_json_span *out) {
    mcpg_json_span cur;
    root_span(doc, n, &cur);
    for (uint32_t i = 0; i < p->n; i++) {
        mcpg_json_span next;
        int r = cur.type == MCPG_JSON_OBJECT  ? member(&cur, &p->tokens[i], &next)
                : cur.type == MCPG_JSON_ARRAY ? element(&cur, p->tokens[i].index, &next)
                                              : PR_ABSENT;
        if (r != PR_FOUND) return r;
        cur = next;
    }
    *out = cur;
    return PR_FOUND;
}

/* ---- values ---- */

/* s[i] is a backslash: does "\uD800".."\uDBFF" start there (the high half
 * of a pair, which validated JSON always follows with its low half)? */
static int high_surrogate_at(const char *s, size_t n, size_t i) {
    return i + 12 <= n && s[i + 1] == 'u' && (s[i + 2] == 'd' || s[i + 2] == 'D') &&
           memchr("89abAB", s[i + 3], 6) != NULL;
}

uint64_t pr_json_string_length(const char *raw, size_t n) {
    uint64_t cps = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c == '\\') {
            size_t len = raw[i + 1] != 'u' ? 2 : high_surrogate_at(raw, n, i) ? 12 : 6;
            i += len - 1;
            cps++;
        } else if ((c & 0xC0) != 0x80) { /* not a UTF-8 continuation byte */
            cps++;
        }
    }
    return cps;
}

/* A number span as a double. Numbers are short: a copy on the stack, the
 * heap only for one over 63 characters. */
static int number_of(const mcpg_json_span *v, double *out) {
    char small[64];
    char *s = v->n < sizeof small ? small : malloc(v->n + 1);
    if (!s) return -1;
    memcpy(s, v->p, v->n);
    s[v->n] = '\0';
    *out = strtod(s, NULL);
    if (s != small) free(s);
    return 0;
}

static int regex_passes(const pr_guard *g, const mcpg_json_span *v) {
    if (v->type != MCPG_JSON_STRING) return 0;
    char small[1024];
    char *buf = NULL;
    const char *s = v->p;
    size_t n = v->n;
    if (v->escaped) { /* decoded text is never longer than its escaped form */
        buf = v->n < sizeof small ? small : malloc(v->n + 1);
        if (!buf || mcpg_json_string_decode(v, buf, v->n + 1, &n) != 0) {
            if (buf != small) free(buf);
            return 0;
        }
        s = buf;
    }
    /* The whole value must match: POSIX's leftmost-longest match spans it
     * exactly when some match does. REG_STARTEND bounds the text by length
     * (no copy of an unescaped string; a decoded \u0000 is a character). */
    regmatch_t m[1] = {{.rm_so = 0, .rm_eo = (regoff_t)n}};
    int ok = regexec(&g->re, s, 1, m, REG_STARTEND) == 0 && m[0].rm_so == 0 &&
             (size_t)m[0].rm_eo == n;
    if (buf && buf != small) free(buf);
    return ok;
}

static int value_equals(const pr_value *want, const mcpg_json_span *v) {
    if (want->type != v->type) return 0;
    double d;
    switch (v->type) {
    case MCPG_JSON_STRING: return mcpg_json_string_eq(v, want->text, want->len) == 1;
    case MCPG_JSON_NUMBER: return number_of(v, &d) == 0 && d == want->number;
    default: return 1; /* true, false, null */
    }
}

static int enum_passes(const pr_guard *g, const mcpg_json_span *v) {
    for (uint32_t i = 0; i < g->n_values; i++)
        if (value_equals(&g->values[i], v)) return 1;
    return 0;
}

static int length_passes(const pr_guard *g, const mcpg_json_span *v) {
    if (v->type == MCPG_JSON_STRING) return pr_json_string_length(v->p, v->n) <= g->max_length;
    if (v->type != MCPG_JSON_ARRAY) return 0;
    size_t it = 0;
    uint64_t items = 0;
    mcpg_json_span e;
    int r;
    while ((r = mcpg_json_array_next(v->p, v->n, &it, &e)) == 1)
        if (++items > g->max_length) return 0;
    return r == 0;
}

static int range_passes(const pr_guard *g, const mcpg_json_span *v) {
    double d;
    if (v->type != MCPG_JSON_NUMBER || number_of(v, &d) != 0) return 0;
    return (!g->has_min || d >= g->min) && (!g->has_max || d <= g->max);
}

int pr_guard_passes(const pr_guard *g, const char *args, size_t n) {
    mcpg_json_span v;
    int r = pr_pointer_find(&g->at, args, n, &v);
    if (r == PR_ABSENT) return !g->required;
    if (r != PR_FOUND) return 0;
    switch (g->kind) {
    case PR_GUARD_REGEX: return regex_passes(g, &v);
    case PR_GUARD_ENUM: return enum_passes(g, &v);
    case PR_GUARD_LENGTH: return length_passes(g, &v);
    case PR_GUARD_RANGE: return range_passes(g, &v);
    default: return 1; /* present, as required */
    }
}

void pr_guard_free(pr_guard *g) {
    pr_pointer_free(&g->at);
    if (g->kind == PR_GUARD_REGEX) regfree(&g->re);
    for (uint32_t i = 0; i < g->n_values; i++) free(g->values[i].text);
    free(g->values);
    memset(g, 0, sizeof *g);
}
