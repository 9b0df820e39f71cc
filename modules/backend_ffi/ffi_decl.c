/* backend_ffi: parse the "functions" config, open the libraries and resolve
 * the symbols, so a missing one is a config error naming its key. */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ffi_parse.h"

static const struct {
    const char *name;
    ffi_kind kind;
} kinds[] = {
    {"int8", FK_I8},   {"int16", FK_I16},   {"int32", FK_I32},   {"int64", FK_I64},
    {"uint8", FK_U8},  {"uint16", FK_U16},  {"uint32", FK_U32},  {"uint64", FK_U64},
    {"float", FK_FLOAT}, {"double", FK_DOUBLE}, {"bool", FK_BOOL}, {"string", FK_STRING},
    {"void", FK_VOID}, {"buffer", FK_BUFFER}, {"array", FK_ARRAY},
};
#define NKINDS (sizeof kinds / sizeof *kinds)

const char *ffi_kind_name(ffi_kind k) {
    for (size_t i = 0; i < NKINDS; i++)
        if (kinds[i].kind == k) return kinds[i].name;
    return "?";
}

ffi_type *ffi_kind_type(ffi_kind k) {
    switch (k) {
    case FK_I8: return &ffi_type_sint8;
    case FK_I16: return &ffi_type_sint16;
    case FK_I32: return &ffi_type_sint32;
    case FK_I64: return &ffi_type_sint64;
    case FK_U8: return &ffi_type_uint8;
    case FK_U16: return &ffi_type_uint16;
    case FK_U32: return &ffi_type_uint32;
    case FK_U64: return &ffi_type_uint64;
    case FK_FLOAT: return &ffi_type_float;
    case FK_DOUBLE: return &ffi_type_double;
    case FK_BOOL: return sizeof(_Bool) == 1 ? &ffi_type_uint8 : &ffi_type_uint32;
    case FK_STRING: case FK_BUFFER: case FK_ARRAY: return &ffi_type_pointer;
    case FK_VOID: return &ffi_type_void;
    default: return NULL;
    }
}

void ffi_int_bounds(ffi_kind k, int64_t *lo, uint64_t *hi) {
    static const int bits[] = {[FK_I8] = 8, [FK_I16] = 16, [FK_I32] = 32, [FK_I64] = 64,
                               [FK_U8] = 8, [FK_U16] = 16, [FK_U32] = 32, [FK_U64] = 64};
    int n = bits[k];
    if (k >= FK_U8) {
        *lo = 0;
        *hi = n == 64 ? UINT64_MAX : ((uint64_t)1 << n) - 1;
    } else {
        *hi = n == 64 ? (uint64_t)INT64_MAX : ((uint64_t)1 << (n - 1)) - 1;
        *lo = -(int64_t)*hi - 1;
    }
}

char *ffi_parse_string(pctx *c, const char *path, const mcpg_json_span *v) {
    if (v->type != MCPG_JSON_STRING) {
        mcpg_config_problem(c, path, "expected a string");
        return NULL;
    }
    char *d = c->h->alloc(v->n + 1); /* decoding never lengthens a string */
    size_t n;
    if (!d || c->h->json_string_decode(v, d, v->n + 1, &n) < 0 || strlen(d) != n) {
        c->h->free(d);
        mcpg_config_problem(c, path, "expected a string without NUL characters");
        return NULL;
    }
    return d;
}

void ffi_parse_name(pctx *c, const char *path, const mcpg_json_span *v, char *out) {
    size_t n = 0;
    int rc = v->type == MCPG_JSON_STRING
                 ? c->h->json_string_decode(v, out, FFI_NAME_MAX + 1, &n)
                 : MCPG_EPROTO;
    if (rc == MCPG_EPROTO) return mcpg_config_problem(c, path, "expected a string");
    if (rc < 0 || !mcpg_name_valid(out, n)) {
        out[0] = '\0';
        return mcpg_config_problem(c, path, "must match ^[a-zA-Z0-9_-]{1,64}$");
    }
}

static int kind_allowed(ffi_kind k, ffi_kinds which) {
    switch (which) {
    case KINDS_PARAM: return k != FK_VOID;
    case KINDS_RETURN: return k <= FK_VOID;
    default: return ffi_is_int(k) || k == FK_FLOAT || k == FK_DOUBLE;
    }
}

ffi_kind ffi_parse_kind(pctx *c, const char *path, const mcpg_json_span *v, ffi_kinds which) {
    for (size_t i = 0; v->type == MCPG_JSON_STRING && i < NKINDS; i++)
        if (kind_allowed(kinds[i].kind, which) &&
            c->h->json_string_eq(v, kinds[i].name, strlen(kinds[i].name)) == 1)
            return kinds[i].kind;
    char list[160];
    size_t n = 0;
    for (size_t i = 0; i < NKINDS; i++)
        if (kind_allowed(kinds[i].kind, which))
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", kinds[i].name);
    mcpg_config_problem(c, path, "expected one of %s", list);
    return FK_NONE;
}

void ffi_key_text(pctx *c, const mcpg_json_span *k, char *key, size_t cap) {
    size_t kn;
    if (c->h->json_string_decode(k, key, cap, &kn) < 0 || strlen(key) != kn)
        snprintf(key, cap, "%.*s", (int)(k->n < cap - 1 ? k->n : cap - 1), k->p);
}

static void parse_params(pctx *c, const char *base, const mcpg_json_span *arr, ffi_fn *f) {
    if (arr->type != MCPG_JSON_ARRAY) return mcpg_config_problem(c, base, "expected an array");
    size_t iter = 0;
    mcpg_json_span v;
    while (c->h->json_array_next(arr->p, arr->n, &iter, &v) == 1) {
        if (f->nparams == FFI_MAX_PARAMS)
            return mcpg_config_problem(c, base, "at most %d parameters", FFI_MAX_PARAMS);
        char path[160];
        snprintf(path, sizeof path, "%s[%zu]", base, f->nparams);
        ffi_param *p = &f->params[f->nparams++];
        ffi_param_parse(c, path, &v, p);
        for (size_t i = 0; p->name[0] && i + 1 < f->nparams; i++)
            if (strcmp(f->params[i].name, p->name) == 0) {
                char np[176];
                snprintf(np, sizeof np, "%s.name", path);
                mcpg_config_problem(c, np, "duplicate parameter \"%s\" (also %s[%zu])", p->name, base, i);
            }
    }
}

static const char *const fn_keys[] = {"name", "library", "symbol", "description", "params",
                                      "returns"};

static void parse_member(pctx *c, const char *base, const char *key, const mcpg_json_span *v,
                         ffi_fn *f) {
    char path[96];
    snprintf(path, sizeof path, "%s.%s", base, key);
    if (strcmp(key, "name") == 0) {
        ffi_parse_name(c, path, v, f->name);
    } else if (strcmp(key, "library") == 0) {
        c->h->free(f->library);
        f->library = ffi_parse_string(c, path, v);
    } else if (strcmp(key, "symbol") == 0) {
        c->h->free(f->symbol);
        f->symbol = ffi_parse_string(c, path, v);
    } else if (strcmp(key, "description") == 0) {
        c->h->free(f->description);
        f->description = ffi_parse_string(c, path, v);
    } else if (strcmp(key, "params") == 0) {
        parse_params(c, path, v, f);
    } else if (strcmp(key, "returns") == 0) {
        f->ret = ffi_parse_kind(c, path, v, KINDS_RETURN);
    } else {
        mcpg_config_unknown_key(c, path, key, fn_keys, sizeof fn_keys / sizeof *fn_keys);
    }
}

static void require(pctx *c, const char *base, const char *key, int present) {
    char path[96];
    snprintf(path, sizeof path, "%s.%s", base, key);
    if (!present) mcpg_config_problem(c, path, "is required");
}

/* dlopen the library and find the symbol: errors name the key at fault. */
static void bind_symbol(pctx *c, const char *base, ffi_fn *f) {
    char path[96];
    snprintf(path, sizeof path, "%s.library", base);
    dlerror();
    f->handle = dlopen(f->library, RTLD_NOW | RTLD_LOCAL);
    if (!f->handle) {
        const char *e = dlerror();
        return mcpg_config_problem(c, path, "cannot load \"%s\": %s", f->library, e ? e : "unknown error");
    }
    snprintf(path, sizeof path, "%s.symbol", base);
    dlerror();
    f->sym = dlsym(f->handle, f->symbol);
    if (!f->sym || dlerror()) {
        f->sym = NULL;
        mcpg_config_problem(c, path, "no symbol \"%s\" in %s", f->symbol, f->library);
    }
}

static void prep_cif(pctx *c, const char *base, ffi_fn *f) {
    for (size_t i = 0; i < f->nparams; i++) f->atypes[i] = ffi_kind_type(f->params[i].kind);
    if (ffi_prep_cif(&f->cif, FFI_DEFAULT_ABI, (unsigned)f->nparams, ffi_kind_type(f->ret),
                     f->atypes) != FFI_OK)
        mcpg_config_problem(c, base, "libffi cannot describe this signature");
}

static void parse_fn(pctx *c, size_t idx, const mcpg_json_span *obj, ffi_fn *f) {
    char base[48];
    snprintf(base, sizeof base, "functions[%zu]", idx);
    if (obj->type != MCPG_JSON_OBJECT) return mcpg_config_problem(c, base, "expected an object");
    int before = c->errors, seen_ret = 0, seen_name = 0;
    size_t iter = 0;
    mcpg_json_span k, v;
    while (c->h->json_object_next(obj->p, obj->n, &iter, &k, &v) == 1) {
        char key[32];
        ffi_key_text(c, &k, key, sizeof key);
        seen_ret |= strcmp(key, "returns") == 0;
        seen_name |= strcmp(key, "name") == 0;
        parse_member(c, base, key, &v, f);
    }
    require(c, base, "name", seen_name);
    require(c, base, "library", f->library != NULL);
    require(c, base, "symbol", f->symbol != NULL);
    require(c, base, "returns", seen_ret);
    if (c->errors == before) ffi_params_link(c, base, f);
    if (c->errors != before) return; /* bind only what is fully declared */
    bind_symbol(c, base, f);
}

static void check_unique(pctx *c, const ffi_fn_set *set, size_t idx) {
    const char *name = set->fns[idx].name;
    if (!name[0]) return;
    char path[64];
    snprintf(path, sizeof path, "functions[%zu].name", idx);
    for (size_t i = 0; i < idx; i++)
        if (strcmp(set->fns[i].name, name) == 0)
            return mcpg_config_problem(c, path, "duplicate tool name \"%s\" (also functions[%zu])", name, i);
}

static ffi_fn *set_push(const mcpg_host *h, ffi_fn_set *set) {
    if (set->n == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 8;
        ffi_fn *f = h->realloc(set->fns, cap * sizeof *f);
        if (!f) return NULL;
        set->fns = f;
        set->cap = cap;
    }
    ffi_fn *f = &set->fns[set->n++];
    memset(f, 0, sizeof *f);
    return f;
}

int ffi_decl_parse(const mcpg_host *h, const char *json, mcpg_report *rep, mcpg_instance *self,
                   ffi_fn_set *set) {
    pctx c = {h, rep, self, 0};
    if (!json) json = "[]";
    size_t n = strlen(json), skip = 0;
    while (skip < n && strchr(" \t\r\n", json[skip])) skip++;
    if (h->json_validate(json, n) < 0 || skip == n || json[skip] != '[') {
        mcpg_config_problem(&c, "functions", "expected an array of functions");
        return c.errors;
    }
    size_t iter = 0;
    mcpg_json_span v;
    while (h->json_array_next(json + skip, n - skip, &iter, &v) == 1) {
        ffi_fn *f = set_push(h, set);
        if (!f) {
            mcpg_config_problem(&c, "functions", "out of memory");
            break;
        }
        parse_fn(&c, set->n - 1, &v, f);
        check_unique(&c, set, set->n - 1);
    }
    /* Only now: a cif points at its function's atypes, which the array's
     * growth above would have moved. */
    for (size_t i = 0; i < set->n; i++) {
        char base[48];
        snprintf(base, sizeof base, "functions[%zu]", i);
        if (set->fns[i].sym) prep_cif(&c, base, &set->fns[i]);
    }
    return c.errors;
}

void ffi_decl_free(const mcpg_host *h, ffi_fn_set *set) {
    for (size_t i = 0; i < set->n; i++) {
        ffi_fn *f = &set->fns[i];
        if (f->handle) dlclose(f->handle);
        for (size_t j = 0; j < f->nparams; j++) h->free(f->params[j].description);
        h->free(f->library);
        h->free(f->symbol);
        h->free(f->description);
    }
    h->free(set->fns);
    *set = (ffi_fn_set){0};
}

const ffi_fn *ffi_decl_find(const ffi_fn_set *set, const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->fns[i].name, name) == 0) return &set->fns[i];
    return NULL;
}
