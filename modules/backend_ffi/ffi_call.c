/* backend_ffi: arguments in, libffi call, result out. */
#include "ffi_call.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef union ffi_value {
    int8_t i8; int16_t i16; int32_t i32; int64_t i64;
    uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
    float f; double d; _Bool b; const char *s;
    ffi_arg ra; ffi_sarg rs; /* libffi widens small integral returns */
} ffi_value;

/* Integer bounds by width; unsigned ones have lo 0. */
static void int_bounds(ffi_kind k, int64_t *lo, uint64_t *hi) {
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

static int is_int_kind(ffi_kind k) { return k >= FK_I8 && k <= FK_U64; }

static const char *schema_type(ffi_kind k) {
    if (is_int_kind(k)) return "integer";
    if (k == FK_FLOAT || k == FK_DOUBLE) return "number";
    if (k == FK_BOOL) return "boolean";
    return "string";
}

static int schema_param(const mcpg_host *h, mcpg_buf *b, const ffi_param *p) {
    int rc = h->buf_printf(b, "\"%s\":{\"type\":\"%s\"", p->name, schema_type(p->kind));
    if (!rc && is_int_kind(p->kind)) {
        int64_t lo;
        uint64_t hi;
        int_bounds(p->kind, &lo, &hi);
        rc = h->buf_printf(b, ",\"minimum\":%" PRId64 ",\"maximum\":%" PRIu64, lo, hi);
    }
    if (!rc && p->description) {
        rc = h->buf_append(b, ",\"description\":", 15);
        if (!rc) rc = h->buf_append_json_string(b, p->description, strlen(p->description));
    }
    return rc ? rc : h->buf_append(b, "}", 1);
}

int ffi_schema_append(const mcpg_host *h, mcpg_buf *b, const ffi_fn *f) {
    int rc = h->buf_printf(b, "{\"type\":\"object\",\"properties\":{");
    for (size_t i = 0; i < f->nparams && !rc; i++) {
        if (i) rc = h->buf_append(b, ",", 1);
        if (!rc) rc = schema_param(h, b, &f->params[i]);
    }
    if (!rc) rc = h->buf_printf(b, "},\"required\":[");
    for (size_t i = 0; i < f->nparams && !rc; i++)
        rc = h->buf_printf(b, "%s\"%s\"", i ? "," : "", f->params[i].name);
    return rc ? rc : h->buf_printf(b, "],\"additionalProperties\":false}");
}

/* ------------------------------------------------------------------ */
/* arguments                                                           */

typedef struct call_state {
    const mcpg_host *h;
    mcpg_call *call;
    ffi_value vals[FFI_MAX_PARAMS];
    void *ptrs[FFI_MAX_PARAMS];
    char *strs[FFI_MAX_PARAMS]; /* decoded C strings, freed after the call */
    int seen[FFI_MAX_PARAMS];
} call_state;

static mcpg_status bad(call_state *s, const char *fmt, ...) MCPG_PRINTF(2, 3);
static mcpg_status bad(call_state *s, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->h->call_error(s->call, MCPG_RPC_INVALID_PARAMS, msg, NULL);
    return MCPG_DENY;
}

/* The number's text, NUL-terminated, or 0 when it does not fit. */
static int number_text(const mcpg_json_span *v, char *buf, size_t cap) {
    if (v->type != MCPG_JSON_NUMBER || v->n >= cap) return 0;
    memcpy(buf, v->p, v->n);
    buf[v->n] = '\0';
    return 1;
}

static int read_int(const mcpg_json_span *v, ffi_kind k, ffi_value *out) {
    char t[64];
    if (!number_text(v, t, sizeof t) || strpbrk(t, ".eE")) return 0;
    int64_t lo;
    uint64_t hi;
    int_bounds(k, &lo, &hi);
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
    switch (k) { /* narrow into the member libffi will read */
    case FK_I8: out->i8 = (int8_t)out->i64; break;
    case FK_I16: out->i16 = (int16_t)out->i64; break;
    case FK_I32: out->i32 = (int32_t)out->i64; break;
    case FK_U8: out->u8 = (uint8_t)out->u64; break;
    case FK_U16: out->u16 = (uint16_t)out->u64; break;
    case FK_U32: out->u32 = (uint32_t)out->u64; break;
    default: break;
    }
    return 1;
}

static mcpg_status read_arg(call_state *s, size_t i, const ffi_param *p,
                            const mcpg_json_span *v) {
    ffi_value *out = &s->vals[i];
    if (is_int_kind(p->kind)) {
        if (read_int(v, p->kind, out)) return MCPG_CONTINUE;
        char what[96];
        int64_t lo;
        uint64_t hi;
        int_bounds(p->kind, &lo, &hi);
        snprintf(what, sizeof what, "an integer from %" PRId64 " to %" PRIu64, lo, hi);
        return bad(s, "Invalid params: argument \"%s\": expected %s", p->name, what);
    }
    if (p->kind == FK_FLOAT || p->kind == FK_DOUBLE) {
        char t[400];
        if (!number_text(v, t, sizeof t)) return bad(s, "Invalid params: argument \"%s\": expected %s", p->name, "a number");
        double d = strtod(t, NULL);
        if (p->kind == FK_FLOAT) out->f = (float)d;
        else out->d = d;
        return MCPG_CONTINUE;
    }
    if (p->kind == FK_BOOL) {
        if (v->type != MCPG_JSON_TRUE && v->type != MCPG_JSON_FALSE)
            return bad(s, "Invalid params: argument \"%s\": expected %s", p->name, "a boolean");
        out->b = v->type == MCPG_JSON_TRUE;
        return MCPG_CONTINUE;
    }
    if (v->type != MCPG_JSON_STRING) return bad(s, "Invalid params: argument \"%s\": expected %s", p->name, "a string");
    char *d = s->h->alloc(v->n + 1);
    size_t n;
    if (!d) return bad(s, "Invalid params: argument \"%s\": expected %s", p->name, "a shorter string");
    s->strs[i] = d;
    if (s->h->json_string_decode(v, d, v->n + 1, &n) < 0 || strlen(d) != n)
        return bad(s, "Invalid params: argument \"%s\": expected %s", p->name, "a string without NUL characters");
    out->s = d;
    return MCPG_CONTINUE;
}

static int find_param(const ffi_fn *f, const mcpg_host *h, const mcpg_json_span *k) {
    for (size_t i = 0; i < f->nparams; i++)
        if (h->json_string_eq(k, f->params[i].name, strlen(f->params[i].name)) == 1)
            return (int)i;
    return -1;
}

static mcpg_status read_args(call_state *s, const ffi_fn *f) {
    const mcpg_host *h = s->h;
    size_t n = 0;
    const char *args = h->call_args(s->call, &n);
    if (!args || n == 0 || args[0] != '{')
        return bad(s, "Invalid params: arguments must be an object");
    size_t iter = 0;
    mcpg_json_span k, v;
    int rc;
    while ((rc = h->json_object_next(args, n, &iter, &k, &v)) == 1) {
        int i = find_param(f, h, &k);
        if (i < 0) {
            char key[FFI_NAME_MAX + 1];
            snprintf(key, sizeof key, "%.*s", (int)(k.n < FFI_NAME_MAX ? k.n : FFI_NAME_MAX), k.p);
            return bad(s, "Invalid params: unknown argument \"%s\"", key);
        }
        if (s->seen[i]) return bad(s, "Invalid params: argument \"%s\" given twice", f->params[i].name);
        s->seen[i] = 1;
        if (read_arg(s, (size_t)i, &f->params[i], &v) != MCPG_CONTINUE) return MCPG_DENY;
    }
    if (rc < 0) return bad(s, "Invalid params: malformed arguments");
    for (size_t i = 0; i < f->nparams; i++)
        if (!s->seen[i])
            return bad(s, "Invalid params: missing argument \"%s\"", f->params[i].name);
    return MCPG_CONTINUE;
}

/* ------------------------------------------------------------------ */
/* the result                                                          */

/* The return value as JSON (also the text item): integers exact, floats
 * shortest-faithful, non-finite ones null, strings escaped. */
static int format_value(const mcpg_host *h, mcpg_buf *b, ffi_kind k, const ffi_value *r) {
    switch (k) {
    case FK_I8: case FK_I16: case FK_I32:
        return h->buf_printf(b, "%" PRId64, (int64_t)r->rs);
    case FK_U8: case FK_U16: case FK_U32:
        return h->buf_printf(b, "%" PRIu64, (uint64_t)r->ra);
    case FK_I64: return h->buf_printf(b, "%" PRId64, r->i64);
    case FK_U64: return h->buf_printf(b, "%" PRIu64, r->u64);
    case FK_FLOAT:
        return isfinite(r->f) ? h->buf_printf(b, "%.9g", (double)r->f) : h->buf_printf(b, "null");
    case FK_DOUBLE:
        return isfinite(r->d) ? h->buf_printf(b, "%.17g", r->d) : h->buf_printf(b, "null");
    case FK_BOOL: return h->buf_printf(b, "%s", (r->ra & 0xff) ? "true" : "false");
    case FK_STRING:
        return r->s ? h->buf_append_json_string(b, r->s, strlen(r->s)) : h->buf_printf(b, "null");
    default: return h->buf_printf(b, "null");
    }
}

/* Shortest %.Ng that reads back the same double, so sqrt(2) is not printed
 * with 17 noisy digits and 0.1 stays 0.1. */
static int format_double(const mcpg_host *h, mcpg_buf *b, double d, int max) {
    char t[40];
    for (int prec = 1; prec <= max; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, d);
        if (max == 9 ? (float)strtod(t, NULL) == (float)d : strtod(t, NULL) == d) break;
    }
    return h->buf_printf(b, "%s", t);
}

static int write_result(const mcpg_host *h, mcpg_buf *b, const ffi_fn *f, const ffi_value *r) {
    mcpg_buf v = {0};
    int rc;
    if (f->ret == FK_DOUBLE && isfinite(r->d))
        rc = format_double(h, &v, r->d, 17);
    else if (f->ret == FK_FLOAT && isfinite(r->f))
        rc = format_double(h, &v, (double)r->f, 9);
    else
        rc = format_value(h, &v, f->ret, r);
    if (!rc) rc = h->buf_append(b, "{\"content\":[{\"type\":\"text\",\"text\":", 34);
    if (!rc) { /* a string result's text is the string itself, not its JSON */
        if (f->ret == FK_STRING && r->s)
            rc = h->buf_append_json_string(b, r->s, strlen(r->s));
        else
            rc = h->buf_append_json_string(b, v.data ? v.data : "", v.len);
    }
    if (!rc) rc = h->buf_append(b, "}],\"structuredContent\":{\"result\":", 33);
    if (!rc) rc = h->buf_append(b, v.data, v.len);
    if (!rc) rc = h->buf_append(b, "}}", 2);
    h->buf_free(&v);
    return rc;
}

mcpg_status ffi_call_run(const mcpg_host *h, const ffi_fn *f, mcpg_call *call) {
    call_state s = {.h = h, .call = call};
    mcpg_status st = read_args(&s, f);
    if (st == MCPG_CONTINUE) {
        for (size_t i = 0; i < f->nparams; i++) s.ptrs[i] = &s.vals[i];
        ffi_value r;
        memset(&r, 0, sizeof r);
        ffi_call((ffi_cif *)&f->cif, FFI_FN(f->sym), &r, s.ptrs);
        mcpg_buf *b = h->call_result_buf(call);
        if (!b || write_result(h, b, f, &r)) {
            h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
            st = MCPG_DENY;
        }
    }
    for (size_t i = 0; i < f->nparams; i++) h->free(s.strs[i]);
    return st;
}
