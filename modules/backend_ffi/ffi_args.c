/* backend_ffi: the JSON arguments checked against the declaration and
 * turned into C values: numbers narrowed to their width, strings decoded,
 * arrays laid out contiguously, buffers allocated, sizes filled in. */
#include "ffi_args.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -32602 with the argument at fault; returns MCPG_DENY. */
#define bad(a, ...) mcpg_result_errorf((a)->h, (a)->call, MCPG_RPC_INVALID_PARAMS, __VA_ARGS__)

static mcpg_status out_of_memory(ffi_args *a) {
    a->h->call_error(a->call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    return MCPG_DENY;
}

/* The number's text, NUL-terminated, or 0 when it does not fit. */
static int number_text(const mcpg_json_span *v, char *buf, size_t cap) {
    if (v->type != MCPG_JSON_NUMBER || v->n >= cap) return 0;
    memcpy(buf, v->p, v->n);
    buf[v->n] = '\0';
    return 1;
}

/* Narrow i64/u64 into the member libffi reads for k. */
static void narrow(ffi_kind k, ffi_value *v) {
    switch (k) {
    case FK_I8: v->i8 = (int8_t)v->i64; break;
    case FK_I16: v->i16 = (int16_t)v->i64; break;
    case FK_I32: v->i32 = (int32_t)v->i64; break;
    case FK_U8: v->u8 = (uint8_t)v->u64; break;
    case FK_U16: v->u16 = (uint16_t)v->u64; break;
    case FK_U32: v->u32 = (uint32_t)v->u64; break;
    default: break;
    }
}

static int read_int(const mcpg_json_span *v, ffi_kind k, ffi_value *out) {
    char t[64];
    if (!number_text(v, t, sizeof t) || strpbrk(t, ".eE")) return 0;
    int64_t lo;
    uint64_t hi;
    ffi_int_bounds(k, &lo, &hi);
    char *end;
    errno = 0;
    if (t[0] == '-') {
        long long x = strtoll(t, &end, 10);
        if (errno || *end || x < lo) return 0;
        out->i64 = x;
    } else {
        unsigned long long x = strtoull(t, &end, 10);
        if (errno || *end || x > hi) return 0;
        out->u64 = x;
    }
    narrow(k, out);
    return 1;
}

/* One number of kind k (an integer width, float or double); what names
 * the argument ("x", or "xs[3]" for an array's element). */
static mcpg_status read_number(ffi_args *a, const char *what, ffi_kind k,
                               const mcpg_json_span *v, ffi_value *out) {
    if (ffi_is_int(k)) {
        if (read_int(v, k, out)) return MCPG_CONTINUE;
        int64_t lo;
        uint64_t hi;
        ffi_int_bounds(k, &lo, &hi);
        return bad(a, "Invalid params: argument \"%s\": expected an integer from %" PRId64
                   " to %" PRIu64, what, lo, hi);
    }
    char t[400];
    if (!number_text(v, t, sizeof t))
        return bad(a, "Invalid params: argument \"%s\": expected a number", what);
    double d = strtod(t, NULL);
    if (!isfinite(d) || (k == FK_FLOAT && fabs(d) > FLT_MAX)) /* C would get an infinity */
        return bad(a, "Invalid params: argument \"%s\": expected a number within the range of %s",
                   what, ffi_kind_name(k));
    if (k == FK_FLOAT) out->f = (float)d;
    else out->d = d;
    return MCPG_CONTINUE;
}

/* A JSON array into a contiguous C array of p->of, at most max_length. */
static mcpg_status read_array(ffi_args *a, size_t i, const ffi_param *p,
                              const mcpg_json_span *v) {
    if (v->type != MCPG_JSON_ARRAY)
        return bad(a, "Invalid params: argument \"%s\": expected an array of %s", p->name,
                   ffi_kind_name(p->of));
    size_t n = 0, iter = 0;
    mcpg_json_span e;
    while (a->h->json_array_next(v->p, v->n, &iter, &e) == 1)
        if (++n > p->max_length)
            return bad(a, "Invalid params: argument \"%s\": expected at most %zu items", p->name,
                       p->max_length);
    size_t unit = ffi_kind_type(p->of)->size;
    char *m = a->h->calloc(n ? n : 1, unit); /* never NULL for an empty array */
    if (!m) return out_of_memory(a);
    a->mem[i] = m;
    a->count[i] = n;
    iter = 0;
    for (size_t j = 0; a->h->json_array_next(v->p, v->n, &iter, &e) == 1; j++) {
        char what[FFI_NAME_MAX + 24];
        snprintf(what, sizeof what, "%s[%zu]", p->name, j);
        ffi_value x;
        if (read_number(a, what, p->of, &e, &x) != MCPG_CONTINUE) return MCPG_DENY;
        memcpy(m + j * unit, &x, unit); /* every member sits at the union's start */
    }
    a->vals[i].p = m;
    return MCPG_CONTINUE;
}

static mcpg_status read_string(ffi_args *a, size_t i, const ffi_param *p,
                               const mcpg_json_span *v) {
    if (v->type != MCPG_JSON_STRING)
        return bad(a, "Invalid params: argument \"%s\": expected a string", p->name);
    char *d = a->h->alloc(v->n + 1); /* decoding never lengthens a string */
    size_t n;
    if (!d) return out_of_memory(a);
    a->mem[i] = d;
    if (a->h->json_string_decode(v, d, v->n + 1, &n) < 0 || strlen(d) != n) /* C would cut it */
        return bad(a, "Invalid params: argument \"%s\": expected a string without NUL characters",
                   p->name);
    a->vals[i].s = d;
    return MCPG_CONTINUE;
}

static mcpg_status read_arg(ffi_args *a, size_t i, const ffi_param *p,
                            const mcpg_json_span *v) {
    switch (p->kind) {
    case FK_ARRAY: return read_array(a, i, p, v);
    case FK_STRING: return read_string(a, i, p, v);
    case FK_BOOL:
        if (v->type != MCPG_JSON_TRUE && v->type != MCPG_JSON_FALSE)
            return bad(a, "Invalid params: argument \"%s\": expected a boolean", p->name);
        a->vals[i].b = v->type == MCPG_JSON_TRUE;
        return MCPG_CONTINUE;
    default: return read_number(a, p->name, p->kind, v, &a->vals[i]);
    }
}

/* Only the parameters the caller gives can be named in the arguments. */
static int find_param(const ffi_fn *f, const mcpg_host *h, const mcpg_json_span *k) {
    for (size_t i = 0; i < f->nparams; i++)
        if (ffi_param_given(&f->params[i]) &&
            h->json_string_eq(k, f->params[i].name, strlen(f->params[i].name)) == 1)
            return (int)i;
    return -1;
}

static mcpg_status read_given(ffi_args *a, const ffi_fn *f) {
    const mcpg_host *h = a->h;
    size_t n = 0;
    const char *args = h->call_args(a->call, &n);
    if (!args || n == 0 || args[0] != '{')
        return bad(a, "Invalid params: arguments must be an object");
    size_t iter = 0;
    mcpg_json_span k, v;
    int rc;
    while ((rc = h->json_object_next(args, n, &iter, &k, &v)) == 1) {
        int i = find_param(f, h, &k);
        if (i < 0) {
            char key[FFI_NAME_MAX + 1];
            snprintf(key, sizeof key, "%.*s", (int)(k.n < FFI_NAME_MAX ? k.n : FFI_NAME_MAX), k.p);
            return bad(a, "Invalid params: unknown argument \"%s\"", key);
        }
        if (a->seen[i])
            return bad(a, "Invalid params: argument \"%s\" given twice", f->params[i].name);
        a->seen[i] = 1;
        if (read_arg(a, (size_t)i, &f->params[i], &v) != MCPG_CONTINUE) return MCPG_DENY;
    }
    if (rc < 0) return bad(a, "Invalid params: malformed arguments");
    for (size_t i = 0; i < f->nparams; i++)
        if (!a->seen[i] && ffi_param_given(&f->params[i]))
            return bad(a, "Invalid params: missing argument \"%s\"", f->params[i].name);
    return MCPG_CONTINUE;
}

/* Zeroed memory for the buffers and output arrays, then the sizes the
 * module fills in (their targets may come later in C order). */
static mcpg_status make_outputs(ffi_args *a, const ffi_fn *f) {
    for (size_t i = 0; i < f->nparams; i++) {
        const ffi_param *p = &f->params[i];
        if (ffi_param_given(p) || p->fill != FILL_NONE) continue;
        a->count[i] = p->size;
        a->mem[i] = a->vals[i].p = a->h->calloc(p->size, ffi_param_unit(p));
        if (!a->mem[i]) return out_of_memory(a);
    }
    for (size_t i = 0; i < f->nparams; i++) {
        const ffi_param *p = &f->params[i];
        if (p->fill == FILL_NONE) continue;
        const ffi_param *t = &f->params[p->from];
        a->vals[i].u64 = a->count[p->from] * (p->fill == FILL_SIZE ? ffi_param_unit(t) : 1);
        narrow(p->kind, &a->vals[i]); /* it fits: checked against the most at config */
    }
    return MCPG_CONTINUE;
}

mcpg_status ffi_args_read(ffi_args *a, const ffi_fn *f) {
    if (read_given(a, f) != MCPG_CONTINUE || make_outputs(a, f) != MCPG_CONTINUE)
        return MCPG_DENY;
    for (size_t i = 0; i < f->nparams; i++) a->ptrs[i] = &a->vals[i];
    return MCPG_CONTINUE;
}

void ffi_args_free(ffi_args *a, const ffi_fn *f) {
    for (size_t i = 0; i < f->nparams; i++) a->h->free(a->mem[i]);
}
