/* mcpg_json_unique: no object anywhere in a value names a member twice.
 *
 * JSON leaves duplicate member names to the reader, and readers disagree:
 * some keep the first, most keep the last. A gateway that judges a request
 * with one reader and forwards it to a server that uses another runs a
 * request it never judged, so what the gateway acts on has none. Names are
 * compared decoded ("n\u0061me" and "name" are one name).
 *
 * A name holding a NUL (an escaped \u0000) is refused the same way: a
 * reader that keeps names as C strings cuts it there, and "a\u0000x" and
 * "a" become one name.
 *
 * The value is read once, front to back; each object's names go on one
 * stack as they are read and are compared when the object ends: pairwise
 * for a few names, sorted for many (an object of n names costs O(n log n),
 * never O(n^2), whatever a client sends). */
#include <mcpg/sdk.h>

#include <stdlib.h>
#include <string.h>

#include "json_names.h"

typedef struct key_ref {
    const char *p; /* into the text, or NULL: decoded, at `off` in the scratch bytes */
    size_t off, n;
    mcpg_json_span src; /* the name as written */
} key_ref;

#define STACK_KEYS 32

typedef struct scratch {
    key_ref *keys;  /* on_stack until an object has more names */
    size_t nkeys, cap;
    mcpg_buf bytes; /* decoded names of this object */
    key_ref on_stack[STACK_KEYS];
} scratch;

/* Below this many names a pairwise compare beats sorting. */
#define PAIRWISE_MAX 12

static int key_cmp(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return memcmp(x->p, y->p, x->n);
}

static int push_key(scratch *s, const mcpg_json_span *k) {
    if (s->nkeys == s->cap) {
        size_t cap = s->cap * 2;
        key_ref *nk = s->keys == s->on_stack ? malloc(cap * sizeof *nk)
                                             : realloc(s->keys, cap * sizeof *nk);
        if (!nk) return MCPG_ENOMEM;
        if (s->keys == s->on_stack) memcpy(nk, s->on_stack, sizeof s->on_stack);
        s->keys = nk, s->cap = cap;
    }
    key_ref *r = &s->keys[s->nkeys++];
    if (!k->escaped) {
        *r = (key_ref){.p = k->p, .n = k->n, .src = *k};
        return 0;
    }
    /* a decoded name is never longer than its escaped text (+1: the NUL
     * mcpg_json_string_decode writes) */
    if (mcpg_buf_reserve(&s->bytes, k->n + 1)) return MCPG_ENOMEM;
    size_t len = 0;
    if (mcpg_json_string_decode(k, s->bytes.data + s->bytes.len, k->n + 1, &len))
        return MCPG_EPROTO;
    *r = (key_ref){.p = NULL, .off = s->bytes.len, .n = len, .src = *k};
    if (memchr(s->bytes.data + s->bytes.len, '\0', len)) return 2; /* a NUL in the name */
    s->bytes.len += len;
    return 0;
}

/* 1 when two of the names gathered from keys[base] on are equal (*dup: one
 * of them). */
static int has_duplicate(scratch *s, size_t base, mcpg_json_span *dup) {
    key_ref *k = s->keys + base;
    size_t n = s->nkeys - base;
    for (size_t i = 0; i < n; i++)
        if (!k[i].p) k[i].p = s->bytes.data + k[i].off;
    const key_ref *hit = NULL;
    if (n <= PAIRWISE_MAX) {
        for (size_t i = 1; i < n && !hit; i++)
            for (size_t j = 0; j < i && !hit; j++)
                if (!key_cmp(&k[i], &k[j])) hit = &k[i];
    } else {
        qsort(k, n, sizeof *k, key_cmp);
        for (size_t i = 1; i < n && !hit; i++)
            if (!key_cmp(&k[i], &k[i - 1])) hit = &k[i];
    }
    if (hit && dup) *dup = hit->src;
    return hit != NULL;
}

/* One pass over the value, every byte read once: an object's names are
 * pushed as it is read (its nested objects push theirs above them and take
 * them back when done), and compared once its closing brace is reached. The
 * text was validated (mcpg_json_value), so it is read, not checked; a
 * malformed one still ends in MCPG_EPROTO, never past its end. */

static size_t skip_ws(const unsigned char *t, size_t n, size_t i) {
    while (i < n && (t[i] == ' ' || t[i] == '\n' || t[i] == '\r' || t[i] == '\t')) i++;
    return i;
}

/* Past the closing quote of the string whose opening quote is t[i]: the
 * next quote not escaped, found with memchr (names are long here, e.g.
 * "io.modelcontextprotocol/clientCapabilities"). A quote is escaped when an
 * odd run of backslashes stands before it. */
static size_t string_end(const unsigned char *t, size_t n, size_t i, uint32_t *escaped) {
    size_t from = i + 1;
    for (i = from; i < n;) {
        const unsigned char *q = memchr(t + i, '"', n - i);
        if (!q) return n;
        size_t at = (size_t)(q - t), b = at;
        while (b > from && t[b - 1] == '\\') b--;
        if (b != at || memchr(t + from, '\\', at - from)) *escaped = 1;
        if ((at - b) % 2 == 0) return at + 1;
        i = at + 1;
    }
    return n;
}

static int walk(scratch *s, const unsigned char *t, size_t n, size_t *pos, mcpg_json_span *dup);

static int walk_members(scratch *s, const unsigned char *t, size_t n, size_t *pos,
                        mcpg_json_span *dup, int object) {
    size_t i = skip_ws(t, n, *pos + 1);
    if (i < n && t[i] == (object ? '}' : ']')) {
        *pos = i + 1;
        return 0;
    }
    for (;;) {
        if (object) {
            if (i >= n || t[i] != '"') return MCPG_EPROTO;
            uint32_t esc = 0;
            size_t end = string_end(t, n, i, &esc);
            if (end < i + 2) return MCPG_EPROTO;
            mcpg_json_span k = {(const char *)t + i + 1, end - i - 2, MCPG_JSON_STRING, esc};
            int rc = push_key(s, &k);
            if (rc) {
                if (rc == 2 && dup) *dup = k;
                return rc;
            }
            i = skip_ws(t, n, end);
            if (i >= n || t[i] != ':') return MCPG_EPROTO;
            i++;
        }
        int rc = walk(s, t, n, &i, dup);
        if (rc) return rc;
        i = skip_ws(t, n, i);
        if (i >= n) return MCPG_EPROTO;
        if (t[i] == (object ? '}' : ']')) break;
        if (t[i] != ',') return MCPG_EPROTO;
        i = skip_ws(t, n, i + 1);
    }
    *pos = i + 1;
    return 0;
}

static int walk(scratch *s, const unsigned char *t, size_t n, size_t *pos, mcpg_json_span *dup) {
    size_t i = skip_ws(t, n, *pos);
    if (i >= n) return MCPG_EPROTO;
    if (t[i] == '"') {
        uint32_t esc = 0;
        *pos = string_end(t, n, i, &esc);
        return 0;
    }
    if (t[i] == '[') {
        *pos = i;
        return walk_members(s, t, n, pos, dup, 0);
    }
    if (t[i] == '{') {
        size_t base = s->nkeys, bytes_base = s->bytes.len;
        *pos = i;
        int rc = walk_members(s, t, n, pos, dup, 1);
        if (rc) return rc;
        if (has_duplicate(s, base, dup)) return 1;
        s->nkeys = base; /* this object's names, and the bytes of the decoded ones */
        s->bytes.len = bytes_base;
        return 0;
    }
    while (i < n && !memchr(" \t\r\n,]}", t[i], 7)) i++; /* a number or a literal */
    *pos = i;
    return 0;
}

static void scratch_init(scratch *s) {
    s->keys = s->on_stack, s->nkeys = 0, s->cap = STACK_KEYS;
    s->bytes = (mcpg_buf){0};
}

static void scratch_free(scratch *s) {
    if (s->keys != s->on_stack) free(s->keys);
    mcpg_buf_free(&s->bytes);
}

/* The value was validated whole (mcpg_json_value): its members are walked
 * without validating them again. */
int mcpg_json_unique_trusted(const mcpg_json_span *value, mcpg_json_span *dup) {
    if (value->type != MCPG_JSON_OBJECT && value->type != MCPG_JSON_ARRAY) return 0;
    scratch s;
    scratch_init(&s);
    size_t pos = 0;
    int rc = walk(&s, (const unsigned char *)value->p, value->n, &pos, dup);
    scratch_free(&s);
    return rc;
}

/* ---- the same checks, told by the validating scanner (json_names.h) ---- */

struct json_names {
    scratch s;
    size_t base[MCPG_JSON_MAX_DEPTH], bytes_base[MCPG_JSON_MAX_DEPTH]; /* per open object */
    int depth;
    int verdict; /* 0 so far; then mcpg_json_unique's answer: 1, 2, MCPG_ENOMEM */
    mcpg_json_span dup;
};

void json_names_open(json_names *nm) {
    if (nm->verdict || nm->depth >= MCPG_JSON_MAX_DEPTH) return; /* deeper: the scanner refuses it */
    nm->base[nm->depth] = nm->s.nkeys;
    nm->bytes_base[nm->depth] = nm->s.bytes.len;
    nm->depth++;
}

void json_names_add(json_names *nm, const mcpg_json_span *key) {
    if (nm->verdict) return;
    int rc = push_key(&nm->s, key);
    if (!rc) return;
    nm->verdict = rc == MCPG_EPROTO ? MCPG_ENOMEM : rc; /* a scanned name always decodes */
    nm->dup = *key;
}

void json_names_close(json_names *nm) {
    if (nm->verdict || nm->depth == 0) return;
    nm->depth--;
    if (has_duplicate(&nm->s, nm->base[nm->depth], &nm->dup)) {
        nm->verdict = 1;
        return;
    }
    nm->s.nkeys = nm->base[nm->depth]; /* this object's names, and its decoded bytes */
    nm->s.bytes.len = nm->bytes_base[nm->depth];
}

int mcpg_json_value_unique(const char *s, size_t n, size_t *pos, mcpg_json_span *out,
                           int *unique, mcpg_json_span *dup) {
    json_names nm;
    scratch_init(&nm.s);
    nm.depth = 0, nm.verdict = 0;
    int rc = json_value_named(s, n, pos, out, &nm);
    *unique = nm.verdict;
    if (nm.verdict && dup) *dup = nm.dup;
    scratch_free(&nm.s);
    return rc;
}

int mcpg_json_unique(const char *text, size_t n, mcpg_json_span *dup) {
    size_t pos = 0;
    int unique = 0;
    if (mcpg_json_value_unique(text, n, &pos, NULL, &unique, dup) != 1) return MCPG_EPROTO;
    return unique;
}
