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
 * Each object's names are gathered and compared before its values are
 * visited, so one scratch list serves every object: pairwise for a few
 * names, sorted for many (an object of n names costs O(n log n), never
 * O(n^2), whatever a client sends). */
#include <mcpg/sdk.h>

#include <stdlib.h>
#include <string.h>

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

/* 1 when two of the gathered names are equal (*dup: one of them). */
static int has_duplicate(scratch *s, mcpg_json_span *dup) {
    for (size_t i = 0; i < s->nkeys; i++)
        if (!s->keys[i].p) s->keys[i].p = s->bytes.data + s->keys[i].off;
    size_t n = s->nkeys;
    const key_ref *hit = NULL;
    if (n <= PAIRWISE_MAX) {
        for (size_t i = 1; i < n && !hit; i++)
            for (size_t j = 0; j < i && !hit; j++)
                if (!key_cmp(&s->keys[i], &s->keys[j])) hit = &s->keys[i];
    } else {
        qsort(s->keys, n, sizeof *s->keys, key_cmp);
        for (size_t i = 1; i < n && !hit; i++)
            if (!key_cmp(&s->keys[i], &s->keys[i - 1])) hit = &s->keys[i];
    }
    if (hit && dup) *dup = hit->src;
    return hit != NULL;
}

static int check_value(scratch *s, const mcpg_json_span *v, mcpg_json_span *dup);

/* Containers among an object's values, remembered by the walk that gathers
 * its names so that they are visited without walking the object again (each
 * walk skips every value whole: walking twice made a value nested d deep be
 * skipped 2d times). More than this many: the object is walked a second time. */
#define NESTED_KEPT 8

static int check_object(scratch *s, const mcpg_json_span *v, mcpg_json_span *dup) {
    size_t iter = 0, nested = 0;
    mcpg_json_span k, val, kept[NESTED_KEPT];
    int rc;
    s->nkeys = 0;
    s->bytes.len = 0;
    while ((rc = mcpg_json_object_next_trusted(v->p, v->n, &iter, &k, &val)) == 1) {
        if ((rc = push_key(s, &k)) != 0) {
            if (rc == 2 && dup) *dup = k;
            return rc;
        }
        if (val.type == MCPG_JSON_OBJECT || val.type == MCPG_JSON_ARRAY) {
            if (nested < NESTED_KEPT) kept[nested] = val;
            nested++;
        }
    }
    if (rc < 0) return rc;
    if (has_duplicate(s, dup)) return 1;
    if (nested <= NESTED_KEPT) {
        for (size_t i = 0; i < nested; i++)
            if ((rc = check_value(s, &kept[i], dup)) != 0) return rc;
        return 0;
    }
    iter = 0;
    while ((rc = mcpg_json_object_next_trusted(v->p, v->n, &iter, &k, &val)) == 1)
        if ((val.type == MCPG_JSON_OBJECT || val.type == MCPG_JSON_ARRAY) &&
            (rc = check_value(s, &val, dup)) != 0)
            return rc;
    return rc < 0 ? rc : 0;
}

static int check_value(scratch *s, const mcpg_json_span *v, mcpg_json_span *dup) {
    if (v->type == MCPG_JSON_OBJECT) return check_object(s, v, dup);
    if (v->type != MCPG_JSON_ARRAY) return 0;
    size_t iter = 0;
    mcpg_json_span el;
    int rc;
    while ((rc = mcpg_json_array_next_trusted(v->p, v->n, &iter, &el)) == 1)
        if ((el.type == MCPG_JSON_OBJECT || el.type == MCPG_JSON_ARRAY) &&
            (rc = check_value(s, &el, dup)) != 0)
            return rc;
    return rc < 0 ? rc : 0;
}

/* The value was validated whole (mcpg_json_value): its members are walked
 * without validating them again. */
int mcpg_json_unique_trusted(const mcpg_json_span *value, mcpg_json_span *dup) {
    if (value->type != MCPG_JSON_OBJECT && value->type != MCPG_JSON_ARRAY) return 0;
    scratch s;
    s.keys = s.on_stack, s.nkeys = 0, s.cap = STACK_KEYS;
    s.bytes = (mcpg_buf){0};
    int rc = check_value(&s, value, dup);
    if (s.keys != s.on_stack) free(s.keys);
    mcpg_buf_free(&s.bytes);
    return rc;
}

int mcpg_json_unique(const char *text, size_t n, mcpg_json_span *dup) {
    size_t pos = 0;
    mcpg_json_span v;
    if (mcpg_json_value(text, n, &pos, &v) != 1) return MCPG_EPROTO;
    return mcpg_json_unique_trusted(&v, dup);
}
