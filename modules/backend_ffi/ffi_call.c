/* backend_ffi: one call: the arguments read, the function called through
 * libffi, the return value and the outputs answered. */
#include "ffi_call.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffi_args.h"

/* libffi widens a small integral return to a full register: narrow it
 * into its own member so the value reads like any other. */
static void narrow_return(ffi_kind k, ffi_value *r) {
    ffi_value t = *r;
    switch (k) {
    case FK_I8: t.i8 = (int8_t)r->rs; break;
    case FK_I16: t.i16 = (int16_t)r->rs; break;
    case FK_I32: t.i32 = (int32_t)r->rs; break;
    case FK_U8: t.u8 = (uint8_t)r->ra; break;
    case FK_U16: t.u16 = (uint16_t)r->ra; break;
    case FK_U32: t.u32 = (uint32_t)r->ra; break;
    case FK_BOOL: t.b = (r->ra & 0xff) != 0; break;
    default: return;
    }
    *r = t;
}

/* Below this an integral value is written with all its digits (10, not
 * 1e+01): every such double is an integer exactly. */
#define PLAIN_INTEGER_MAX 1e15

/* Shortest %.Ng that reads back the same value, so sqrt(2) is not printed
 * with 17 noisy digits and 0.1 stays 0.1 (max 9 for floats, 17 for doubles). */
static int format_double(const mcpg_host *h, mcpg_buf *b, double d, int max) {
    if (!isfinite(d)) return h->buf_printf(b, "null"); /* never reached: answered as an error */
    if (d == floor(d) && fabs(d) < PLAIN_INTEGER_MAX) return h->buf_printf(b, "%.0f", d);
    char t[40];
    for (int prec = 1; prec <= max; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, d);
        if (max == 9 ? (float)strtod(t, NULL) == (float)d : strtod(t, NULL) == d) break;
    }
    return h->buf_printf(b, "%s", t);
}

/* A value as JSON: integers exact, floats shortest-faithful, strings
 * escaped, NULL and void null. */
static int format_value(const mcpg_host *h, mcpg_buf *b, ffi_kind k, const ffi_value *v) {
    switch (k) {
    case FK_I8: return h->buf_printf(b, "%d", v->i8);
    case FK_I16: return h->buf_printf(b, "%d", v->i16);
    case FK_I32: return h->buf_printf(b, "%" PRId32, v->i32);
    case FK_I64: return h->buf_printf(b, "%" PRId64, v->i64);
    case FK_U8: return h->buf_printf(b, "%u", v->u8);
    case FK_U16: return h->buf_printf(b, "%u", v->u16);
    case FK_U32: return h->buf_printf(b, "%" PRIu32, v->u32);
    case FK_U64: return h->buf_printf(b, "%" PRIu64, v->u64);
    case FK_FLOAT: return format_double(h, b, (double)v->f, 9);
    case FK_DOUBLE: return format_double(h, b, v->d, 17);
    case FK_BOOL: return h->buf_printf(b, "%s", v->b ? "true" : "false");
    case FK_STRING:
        return v->s ? h->buf_append_json_string(b, v->s, strlen(v->s)) : h->buf_printf(b, "null");
    default: return h->buf_printf(b, "null");
    }
}

static int append_base64(const mcpg_host *h, mcpg_buf *b, const unsigned char *s, size_t n) {
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char out[256]; /* a multiple of 4 */
    size_t k = 0;
    int rc = h->buf_append(b, "\"", 1);
    for (size_t i = 0; i < n && !rc; i += 3) {
        uint32_t w = (uint32_t)s[i] << 16 | (uint32_t)(i + 1 < n ? s[i + 1] : 0) << 8 |
                     (uint32_t)(i + 2 < n ? s[i + 2] : 0);
        out[k++] = digits[w >> 18 & 63];
        out[k++] = digits[w >> 12 & 63];
        out[k++] = i + 1 < n ? digits[w >> 6 & 63] : '=';
        out[k++] = i + 2 < n ? digits[w & 63] : '=';
        if (k == sizeof out) {
            rc = h->buf_append(b, out, k);
            k = 0;
        }
    }
    if (!rc && k) rc = h->buf_append(b, out, k);
    return rc ? rc : h->buf_append(b, "\"", 1);
}

/* A buffer's or an array's content after the call. */
static int format_output(const mcpg_host *h, mcpg_buf *b, const ffi_param *p, const char *m,
                         size_t count) {
    if (p->kind == FK_BUFFER)
        return p->base64 ? append_base64(h, b, (const unsigned char *)m, count)
                         : h->buf_append_json_string(b, m, strnlen(m, count));
    size_t unit = ffi_param_unit(p);
    int rc = h->buf_append(b, "[", 1);
    for (size_t j = 0; j < count && !rc; j++) {
        ffi_value x;
        memcpy(&x, m + j * unit, unit); /* every member sits at the union's start */
        if (j) rc = h->buf_append(b, ",", 1);
        if (!rc) rc = format_value(h, b, p->of, &x);
    }
    return rc ? rc : h->buf_append(b, "]", 1);
}

/* {"result":<return value>, "<output>":<content>, ...}; has_outputs says
 * whether any output followed the result. */
static int write_structured(const mcpg_host *h, mcpg_buf *sc, const ffi_fn *f,
                            const ffi_args *a, const mcpg_buf *ret, int *has_outputs) {
    int rc = h->buf_append(sc, "{\"result\":", 10);
    if (!rc) rc = h->buf_append(sc, ret->data, ret->len);
    *has_outputs = 0;
    for (size_t i = 0; i < f->nparams && !rc; i++) {
        const ffi_param *p = &f->params[i];
        if (!ffi_param_output(p)) continue;
        *has_outputs = 1;
        rc = h->buf_printf(sc, ",\"%s\":", p->name);
        if (!rc) rc = format_output(h, sc, p, a->mem[i], a->count[i]);
    }
    return rc ? rc : h->buf_append(sc, "}", 1);
}

/* The text item: the return value alone (a string as itself, not as JSON),
 * or, when there are outputs, the structured content's JSON. */
static int write_result(const mcpg_host *h, mcpg_buf *b, const ffi_fn *f, const ffi_args *a,
                        const ffi_value *r) {
    mcpg_buf v = {0}, sc = {0};
    int outputs = 0;
    int rc = format_value(h, &v, f->ret, r);
    if (!rc) rc = write_structured(h, &sc, f, a, &v, &outputs);
    if (!rc) rc = h->buf_append(b, "{\"content\":[{\"type\":\"text\",\"text\":", 34);
    if (!rc && outputs)
        rc = h->buf_append_json_string(b, sc.data, sc.len);
    else if (!rc && f->ret == FK_STRING && r->s)
        rc = h->buf_append_json_string(b, r->s, strlen(r->s));
    else if (!rc)
        rc = h->buf_append_json_string(b, v.data, v.len);
    if (!rc) rc = h->buf_append(b, "}],\"structuredContent\":", 23);
    if (!rc) rc = h->buf_append(b, sc.data, sc.len);
    if (!rc) rc = h->buf_append(b, "}", 1);
    h->buf_free(&v);
    h->buf_free(&sc);
    return rc;
}

/* ---- results JSON cannot hold ----
 * NaN and the infinities have no JSON number. Answering null would pass
 * them off as a value; the call is a tool error instead, whose text says
 * what happened, for the model that reads it: "sqrt(-1): the result is not
 * a number (NaN), which no JSON number can hold". */

typedef struct nonfinite {
    const ffi_param *p; /* the output that holds it; NULL: the return value */
    size_t index;       /* its element */
    double value;
} nonfinite;

static int is_real(ffi_kind k) { return k == FK_FLOAT || k == FK_DOUBLE; }

static double real_of(ffi_kind k, const void *v) {
    ffi_value x;
    memcpy(&x, v, k == FK_FLOAT ? sizeof x.f : sizeof x.d);
    return k == FK_FLOAT ? (double)x.f : x.d;
}

/* The first NaN or infinity in the return value or a real array output. */
static int find_nonfinite(const ffi_fn *f, const ffi_args *a, const ffi_value *r, nonfinite *nf) {
    if (is_real(f->ret) && !isfinite(real_of(f->ret, r))) {
        *nf = (nonfinite){NULL, 0, real_of(f->ret, r)};
        return 1;
    }
    for (size_t i = 0; i < f->nparams; i++) {
        const ffi_param *p = &f->params[i];
        if (p->kind != FK_ARRAY || !ffi_param_output(p) || !is_real(p->of)) continue;
        size_t unit = ffi_param_unit(p);
        for (size_t j = 0; j < a->count[i]; j++) {
            double d = real_of(p->of, (const char *)a->mem[i] + j * unit);
            if (isfinite(d)) continue;
            *nf = (nonfinite){p, j, d};
            return 1;
        }
    }
    return 0;
}

/* The argument `name` as the caller wrote it (its JSON text). */
static int append_written(const mcpg_host *h, mcpg_buf *b, const ffi_args *a, const char *name) {
    size_t n = 0, iter = 0;
    const char *args = h->call_args(a->call, &n);
    mcpg_json_span k, v;
    while (args && h->json_object_next(args, n, &iter, &k, &v) == 1)
        if (h->json_string_eq(&k, name, strlen(name)) == 1) return h->buf_append(b, v.p, v.n);
    return 0;
}

#define SHOWN_STRING_MAX 60 /* a longer string argument is shown as "..." */

/* "pow(10, 400)": the call as the caller gave it (arrays as [...]). */
static int append_call(const mcpg_host *h, mcpg_buf *b, const ffi_fn *f, const ffi_args *a) {
    int rc = h->buf_printf(b, "%s(", f->name);
    const char *sep = "";
    for (size_t i = 0; i < f->nparams && !rc; i++) {
        const ffi_param *p = &f->params[i];
        if (!ffi_param_given(p)) continue;
        rc = h->buf_printf(b, "%s", sep);
        if (rc) break;
        if (p->kind == FK_ARRAY) rc = h->buf_printf(b, "[...]");
        else if (p->kind == FK_STRING && strlen(a->vals[i].s) > SHOWN_STRING_MAX)
            rc = h->buf_printf(b, "\"...\"");
        else if (p->kind == FK_STRING) rc = format_value(h, b, p->kind, &a->vals[i]);
        else rc = append_written(h, b, a, p->name);
        sep = ", ";
    }
    return rc ? rc : h->buf_printf(b, ")");
}

static int append_nonfinite(const mcpg_host *h, mcpg_buf *b, const nonfinite *nf) {
    int rc = nf->p ? h->buf_printf(b, ": %s[%zu] is ", nf->p->name, nf->index)
                   : h->buf_printf(b, ": the result is ");
    if (!rc) rc = h->buf_printf(b, "%s, which no JSON number can hold",
                                isnan(nf->value) ? "not a number (NaN)"
                                : nf->value > 0  ? "+infinity (an overflow, or a pole of the function)"
                                                 : "-infinity (an overflow, or a pole of the function)");
    return rc;
}

/* {"content":[{"type":"text","text":"<the call>: <what>"}],"isError":true} */
static int write_nonfinite(const mcpg_host *h, mcpg_buf *b, const ffi_fn *f, const ffi_args *a,
                           const nonfinite *nf) {
    mcpg_buf text = {0};
    int rc = append_call(h, &text, f, a);
    if (!rc) rc = append_nonfinite(h, &text, nf);
    if (!rc) rc = h->buf_append(b, "{\"content\":[{\"type\":\"text\",\"text\":", 34);
    if (!rc) rc = h->buf_append_json_string(b, text.data, text.len);
    if (!rc) rc = h->buf_printf(b, "}],\"isError\":true}");
    h->buf_free(&text);
    return rc;
}

/* The answer: the value and outputs, or the tool error a NaN or an
 * infinity among them makes. */
static int write_answer(const mcpg_host *h, mcpg_buf *b, const ffi_fn *f, const ffi_args *a,
                        const ffi_value *r) {
    nonfinite nf;
    return find_nonfinite(f, a, r, &nf) ? write_nonfinite(h, b, f, a, &nf)
                                        : write_result(h, b, f, a, r);
}

mcpg_status ffi_call_run(const mcpg_host *h, const ffi_fn *f, mcpg_call *call) {
    ffi_args a = {.h = h, .call = call};
    mcpg_status st = ffi_args_read(&a, f);
    if (st == MCPG_CONTINUE) {
        ffi_value r;
        memset(&r, 0, sizeof r);
        ffi_call((ffi_cif *)&f->cif, FFI_FN(f->sym), &r, a.ptrs);
        narrow_return(f->ret, &r);
        mcpg_buf *b = h->call_result_buf(call);
        if (!b || write_answer(h, b, f, &a, &r)) {
            h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
            st = MCPG_DENY;
        }
    }
    ffi_args_free(&a, f); /* after the result: a returned string may point into a buffer */
    return st;
}
