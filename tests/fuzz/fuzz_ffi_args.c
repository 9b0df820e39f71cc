/* Fuzzer: backend_ffi's argument checker (ffi_args_read), which turns a
 * tool call's JSON arguments into the C values a declared function gets:
 * integers narrowed to their width, floats in range, strings decoded,
 * arrays laid out, buffers made and their sizes filled in.
 *
 * The declarations are fixed (k_functions, parsed by ffi_decl_parse as at
 * create; nothing is ever called). Input: byte 0 picks the function, the
 * rest is its arguments object. Arguments that are not valid JSON are not
 * run: the transport refuses such a body before any backend sees it.
 *
 * Checked: a refusal is a -32602 (or an out-of-memory -32603) on the call;
 * an acceptance has every given argument, each integer prints back as the
 * JSON text it came from, each string is its decoded text without NULs,
 * each array within its most, and every filled size is what was made. */
#include "fuzz.h"

#include "ffi_args.h"
#include "ffi_decl.h"

#include <inttypes.h>
#include <mcpg/fakehost.h>
#include <string.h>

#define P(n, t) "{\"name\":\"" n "\",\"type\":\"" t "\"}"
#define PX(n, t, more) "{\"name\":\"" n "\",\"type\":\"" t "\"," more "}"
#define FN(name, params) \
    "{\"name\":\"" name "\",\"library\":\"libc.so.6\",\"symbol\":\"abs\",\"returns\":\"int32\",\"params\":[" params "]}"

static const char k_functions[] =
    "[" FN("ints", P("a", "int8") "," P("b", "int16") "," P("c", "int32") "," P("d", "int64") ","
                   P("e", "uint8") "," P("f", "uint16") "," P("g", "uint32") "," P("h", "uint64")) ","
    FN("reals", P("x", "float") "," P("y", "double") "," P("flag", "bool") "," P("s", "string")) ","
    FN("arrays", PX("xs", "array", "\"of\":\"int16\",\"max_length\":8") ","
                 PX("n", "uint8", "\"length_of\":\"xs\"") ","
                 PX("ys", "array", "\"of\":\"double\",\"max_length\":4,\"inout\":true") ","
                 PX("ybytes", "uint16", "\"size_of\":\"ys\"") ","
                 PX("out", "array", "\"of\":\"int32\",\"length\":2") ","
                 PX("us", "array", "\"of\":\"uint64\",\"max_length\":3")) ","
    FN("buffers", PX("buf", "buffer", "\"size\":16") "," PX("len", "uint64", "\"size_of\":\"buf\"") ","
                  PX("b64", "buffer", "\"size\":8,\"encoding\":\"base64\"") "," P("tag", "string")) "]";

static mcpg_fakehost *g_fh;
static const mcpg_host *g_host;
static ffi_fn_set g_set;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    g_fh = mcpg_fakehost_new();
    g_host = mcpg_fakehost_host(g_fh);
    mcpg_fakehost_set_quiet(g_fh, 1);
    FZ_CHECK(ffi_decl_parse(g_host, k_functions, NULL, NULL, &g_set) == 0 && g_set.n == 4,
             "the declarations: %s", mcpg_fakehost_log_text(g_fh));
    return 0;
}

/* The argument's value span in the arguments object (the last one given). */
static int arg_of(const char *args, size_t n, const char *name, mcpg_json_span *out) {
    size_t iter = 0;
    mcpg_json_span k, v;
    int found = 0;
    while (mcpg_json_object_next(args, n, &iter, &k, &v) == 1)
        if (mcpg_json_string_eq(&k, name, strlen(name)) == 1) *out = v, found = 1;
    return found;
}

static int64_t signed_of(ffi_kind k, const ffi_value *v) {
    switch (k) {
    case FK_I8: return v->i8;
    case FK_I16: return v->i16;
    case FK_I32: return v->i32;
    default: return v->i64;
    }
}

static uint64_t unsigned_of(ffi_kind k, const ffi_value *v) {
    switch (k) {
    case FK_U8: return v->u8;
    case FK_U16: return v->u16;
    case FK_U32: return v->u32;
    default: return v->u64;
    }
}

/* An integer read prints back as its JSON text ("-0" aside: JSON allows no
 * other second spelling of an integer). */
static void check_int(ffi_kind k, const ffi_value *v, const mcpg_json_span *text) {
    char back[32];
    int n = k >= FK_U8 ? snprintf(back, sizeof back, "%" PRIu64, unsigned_of(k, v))
                       : snprintf(back, sizeof back, "%" PRId64, signed_of(k, v));
    if (text->n == 2 && !memcmp(text->p, "-0", 2)) return;
    FZ_CHECK((size_t)n == text->n && !memcmp(back, text->p, text->n), "%.*s read as %s",
             (int)text->n, text->p, back);
}

static void check_given(const ffi_args *a, const ffi_param *p, size_t i, const mcpg_json_span *v) {
    if (ffi_is_int(p->kind)) check_int(p->kind, &a->vals[i], v);
    if (p->kind == FK_STRING) {
        char want[4096];
        size_t len;
        if (mcpg_json_string_decode(v, want, sizeof want, &len) == 0)
            FZ_CHECK(strlen(a->vals[i].s) == len && !memcmp(a->vals[i].s, want, len), "string %s", p->name);
    }
    if (p->kind == FK_FLOAT) FZ_CHECK(a->vals[i].f == a->vals[i].f, "a NaN float taken");
    if (p->kind == FK_DOUBLE) FZ_CHECK(a->vals[i].d == a->vals[i].d, "a NaN double taken");
    if (p->kind == FK_ARRAY) {
        FZ_CHECK(a->count[i] <= p->max_length && a->mem[i] && a->vals[i].p == a->mem[i], "array %s", p->name);
        if (ffi_is_int(p->of)) { /* each element as the integers above */
            size_t iter = 0, j = 0, unit = ffi_kind_type(p->of)->size;
            mcpg_json_span e;
            while (mcpg_json_array_next(v->p, v->n, &iter, &e) == 1) {
                ffi_value x = {0};
                memcpy(&x, (const char *)a->mem[i] + j++ * unit, unit);
                check_int(p->of, &x, &e);
            }
            FZ_CHECK(j == a->count[i], "%zu of %zu elements", j, a->count[i]);
        }
    }
}

static void check_accepted(const ffi_args *a, const ffi_fn *f, const char *args, size_t n) {
    for (size_t i = 0; i < f->nparams; i++) {
        const ffi_param *p = &f->params[i];
        FZ_CHECK(a->ptrs[i] == &a->vals[i], "ptrs[%zu]", i);
        mcpg_json_span v;
        if (ffi_param_given(p)) {
            FZ_CHECK(a->seen[i] && arg_of(args, n, p->name, &v), "%s taken without being given", p->name);
            check_given(a, p, i, &v);
        } else if (p->fill == FILL_NONE) { /* made here: a buffer or an output array */
            FZ_CHECK(a->mem[i] && a->count[i] == p->size, "output %s", p->name);
        } else {
            const ffi_param *t = &f->params[p->from];
            uint64_t want = a->count[p->from] * (p->fill == FILL_SIZE ? ffi_param_unit(t) : 1);
            FZ_CHECK(unsigned_of(p->kind, &a->vals[i]) == want, "%s filled with %" PRIu64 ", not %" PRIu64,
                     p->name, unsigned_of(p->kind, &a->vals[i]), want);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input in = {data, size};
    const ffi_fn *f = &g_set.fns[fz_byte(&in) % g_set.n];
    char *args = malloc(in.n + 1);
    memcpy(args, in.p, in.n);
    args[in.n] = '\0';
    if (mcpg_json_validate(args, in.n) != 0 || strlen(args) != in.n) {
        free(args);
        return 0;
    }
    mcpg_call *call = mcpg_fakehost_call_new(g_fh, "tools/call", f->name, args, NULL);
    FZ_CHECK(call, "no call for %s", args);
    ffi_args a;
    memset(&a, 0, sizeof a);
    a.h = g_host;
    a.call = call;
    mcpg_status st = ffi_args_read(&a, f);
    int64_t code = mcpg_fakehost_error_code(call);
    if (st == MCPG_CONTINUE) {
        FZ_CHECK(code == 0, "accepted with error %lld", (long long)code);
        check_accepted(&a, f, args, in.n);
    } else {
        FZ_CHECK(st == MCPG_DENY && (code == MCPG_RPC_INVALID_PARAMS || code == MCPG_RPC_INTERNAL_ERROR),
                 "status %d, code %lld", st, (long long)code);
    }
    ffi_args_free(&a, f);
    mcpg_fakehost_call_free(g_fh, call);
    free(args);
    return 0;
}
