/* backend_ffi: one parameter's declaration: its type, the keys of buffers
 * and arrays, and the integers the module fills with their sizes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffi_parse.h"

enum { K_NAME, K_TYPE, K_DESCRIPTION, K_SIZE, K_ENCODING, K_OF, K_MAX_LENGTH, K_LENGTH,
       K_INOUT, K_SIZE_OF, K_LENGTH_OF, NKEYS };
static const char *const param_keys[NKEYS] = {
    "name", "type", "description", "size", "encoding", "of", "max_length", "length",
    "inout", "size_of", "length_of"};
#define BIT(k) (1u << (k))

/* A count from 1 to max (sizes and lengths). */
static size_t parse_count(pctx *c, const char *path, const mcpg_json_span *v, size_t max) {
    char t[32];
    unsigned long long x = 0;
    if (v->type == MCPG_JSON_NUMBER && v->n < sizeof t) {
        memcpy(t, v->p, v->n);
        t[v->n] = '\0';
        char *end = t;
        errno = 0;
        if (t[0] != '-') x = strtoull(t, &end, 10);
        if (errno || *end) x = 0;
    }
    if (x >= 1 && x <= max) return (size_t)x;
    mcpg_config_problem(c, path, "expected an integer from 1 to %zu", max);
    return 0;
}

static void parse_value(pctx *c, const char *path, int key, const mcpg_json_span *v,
                        ffi_param *p) {
    switch (key) {
    case K_NAME: return ffi_parse_name(c, path, v, p->name);
    case K_TYPE: p->kind = ffi_parse_kind(c, path, v, KINDS_PARAM); return;
    case K_DESCRIPTION:
        c->h->free(p->description);
        p->description = ffi_parse_string(c, path, v);
        return;
    case K_SIZE: p->size = parse_count(c, path, v, FFI_BUFFER_MAX); return;
    case K_LENGTH: p->size = parse_count(c, path, v, FFI_ARRAY_MAX); return;
    case K_MAX_LENGTH: p->max_length = parse_count(c, path, v, FFI_ARRAY_MAX); return;
    case K_OF: p->of = ffi_parse_kind(c, path, v, KINDS_ELEMENT); return;
    case K_ENCODING:
        p->base64 = c->h->json_string_eq(v, "base64", 6) == 1;
        if (!p->base64 && c->h->json_string_eq(v, "text", 4) != 1)
            mcpg_config_problem(c, path, "expected \"text\" or \"base64\"");
        return;
    case K_INOUT:
        p->inout = v->type == MCPG_JSON_TRUE;
        if (v->type != MCPG_JSON_TRUE && v->type != MCPG_JSON_FALSE)
            mcpg_config_problem(c, path, "expected true or false");
        return;
    default: /* size_of, length_of: resolved by ffi_params_link */
        p->fill = key == K_SIZE_OF ? FILL_SIZE : FILL_LENGTH;
        return ffi_parse_name(c, path, v, p->from_name);
    }
}

/* Keys that belong to another type are errors, not silently ignored. */
static void check_keys(pctx *c, const char *base, unsigned seen, const ffi_param *p) {
    static const struct {
        unsigned keys;
        const char *only;
    } groups[] = {
        {BIT(K_SIZE) | BIT(K_ENCODING), "a buffer"},
        {BIT(K_OF) | BIT(K_MAX_LENGTH) | BIT(K_LENGTH) | BIT(K_INOUT), "an array"},
        {BIT(K_SIZE_OF) | BIT(K_LENGTH_OF), "an integer type"},
    };
    int mine[] = {p->kind == FK_BUFFER, p->kind == FK_ARRAY, ffi_is_int(p->kind)};
    char path[192];
    for (size_t g = 0; g < 3; g++)
        for (int k = 0; k < NKEYS && p->kind != FK_NONE && !mine[g]; k++)
            if (seen & groups[g].keys & BIT(k)) {
                snprintf(path, sizeof path, "%s.%s", base, param_keys[k]);
                mcpg_config_problem(c, path, "applies only to %s, not to %s", groups[g].only,
                                    ffi_kind_name(p->kind));
            }
    const char *missing = p->kind == FK_BUFFER && !(seen & BIT(K_SIZE))  ? "size"
                          : p->kind == FK_ARRAY && !(seen & BIT(K_OF)) ? "of"
                                                                        : NULL;
    if (missing) {
        snprintf(path, sizeof path, "%s.%s", base, missing);
        mcpg_config_problem(c, path, "is required for %s", ffi_kind_name(p->kind));
    }
    snprintf(path, sizeof path, "%s.length", base);
    if ((seen & BIT(K_LENGTH)) && (seen & (BIT(K_MAX_LENGTH) | BIT(K_INOUT))))
        mcpg_config_problem(c, path, "an output array (length) takes neither max_length nor inout");
    snprintf(path, sizeof path, "%s.length_of", base);
    if ((seen & BIT(K_SIZE_OF)) && (seen & BIT(K_LENGTH_OF)))
        mcpg_config_problem(c, path, "give size_of or length_of, not both");
}

void ffi_param_parse(pctx *c, const char *base, const mcpg_json_span *obj, ffi_param *p) {
    p->from = -1;
    if (obj->type != MCPG_JSON_OBJECT) return mcpg_config_problem(c, base, "expected an object");
    size_t iter = 0;
    mcpg_json_span k, v;
    unsigned seen = 0;
    while (c->h->json_object_next(obj->p, obj->n, &iter, &k, &v) == 1) {
        char key[32], path[192];
        ffi_key_text(c, &k, key, sizeof key);
        snprintf(path, sizeof path, "%s.%s", base, key);
        int i = 0;
        while (i < NKEYS && strcmp(key, param_keys[i]) != 0) i++;
        if (i == NKEYS) {
            mcpg_config_unknown_key(c, path, key, param_keys, NKEYS);
            continue;
        }
        seen |= BIT(i);
        parse_value(c, path, i, &v, p);
    }
    char path[192];
    snprintf(path, sizeof path, "%s.%s", base, !(seen & BIT(K_NAME)) ? "name" : "type");
    if (!(seen & BIT(K_NAME)) || !(seen & BIT(K_TYPE)))
        return mcpg_config_problem(c, path, "is required");
    check_keys(c, base, seen, p);
    if (p->kind == FK_ARRAY && !p->max_length) p->max_length = FFI_ARRAY_MAX;
}

/* A filled integer: its target exists, has the right kind, and every size
 * it can have fits the integer's width. */
static void link_fill(pctx *c, const char *base, ffi_fn *f, size_t i) {
    ffi_param *p = &f->params[i];
    const char *key = p->fill == FILL_SIZE ? "size_of" : "length_of";
    char path[192];
    snprintf(path, sizeof path, "%s.params[%zu].%s", base, i, key);
    for (size_t j = 0; j < f->nparams && p->from < 0; j++)
        if (strcmp(f->params[j].name, p->from_name) == 0) p->from = (int)j;
    if (p->from < 0) return mcpg_config_problem(c, path, "no parameter \"%s\"", p->from_name);
    const ffi_param *t = &f->params[p->from];
    if (p->fill == FILL_LENGTH && t->kind != FK_ARRAY)
        return mcpg_config_problem(c, path, "\"%s\" is not an array", t->name);
    if (t->kind != FK_ARRAY && t->kind != FK_BUFFER)
        return mcpg_config_problem(c, path, "\"%s\" is neither a buffer nor an array", t->name);
    size_t most = ffi_param_count(t) * (p->fill == FILL_SIZE ? ffi_param_unit(t) : 1);
    int64_t lo;
    uint64_t hi;
    ffi_int_bounds(p->kind, &lo, &hi);
    snprintf(path, sizeof path, "%s.params[%zu].type", base, i);
    if (hi < most)
        mcpg_config_problem(c, path, "%s cannot hold %zu, the most %s of \"%s\" can take",
                            ffi_kind_name(p->kind), most,
                            p->fill == FILL_SIZE ? "bytes" : "elements", t->name);
}

void ffi_params_link(pctx *c, const char *base, ffi_fn *f) {
    size_t total = 0;
    for (size_t i = 0; i < f->nparams; i++) {
        ffi_param *p = &f->params[i];
        if (p->fill != FILL_NONE) link_fill(c, base, f, i);
        if (!ffi_param_output(p)) continue;
        total += ffi_param_count(p) * ffi_param_unit(p);
        char path[192];
        snprintf(path, sizeof path, "%s.params[%zu].name", base, i);
        if (strcmp(p->name, "result") == 0) /* the return value's member */
            mcpg_config_problem(c, path,
                                "an output cannot be named \"result\" (the return value's name)");
    }
    char path[160];
    snprintf(path, sizeof path, "%s.params", base);
    if (total > FFI_OUTPUT_MAX)
        mcpg_config_problem(c, path, "the outputs take %zu bytes, more than %zu", total,
                            FFI_OUTPUT_MAX);
}
