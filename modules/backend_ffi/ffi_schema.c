/* backend_ffi: a tool's inputSchema, built from its declaration. Only the
 * parameters the caller gives appear: buffers, output arrays and the sizes
 * the module fills in are the module's business. */
#include "ffi_call.h"

#include <inttypes.h>
#include <string.h>

static const char *schema_type(ffi_kind k) {
    if (ffi_is_int(k)) return "integer";
    if (k == FK_FLOAT || k == FK_DOUBLE) return "number";
    if (k == FK_BOOL) return "boolean";
    if (k == FK_ARRAY) return "array";
    return "string";
}

/* {"type":...} with an integer's bounds, without the closing brace. */
static int schema_type_of(const mcpg_host *h, mcpg_buf *b, ffi_kind k) {
    int rc = h->buf_printf(b, "{\"type\":\"%s\"", schema_type(k));
    if (!rc && ffi_is_int(k)) {
        int64_t lo;
        uint64_t hi;
        ffi_int_bounds(k, &lo, &hi);
        rc = h->buf_printf(b, ",\"minimum\":%" PRId64 ",\"maximum\":%" PRIu64, lo, hi);
    }
    return rc;
}

static int schema_param(const mcpg_host *h, mcpg_buf *b, const ffi_param *p) {
    int rc = h->buf_printf(b, "\"%s\":", p->name);
    if (!rc) rc = schema_type_of(h, b, p->kind);
    if (!rc && p->kind == FK_ARRAY) {
        rc = h->buf_append(b, ",\"items\":", 9);
        if (!rc) rc = schema_type_of(h, b, p->of);
        if (!rc) rc = h->buf_printf(b, "},\"maxItems\":%zu", p->max_length);
    }
    if (!rc && p->description) {
        rc = h->buf_append(b, ",\"description\":", 15);
        if (!rc) rc = h->buf_append_json_string(b, p->description, strlen(p->description));
    }
    return rc ? rc : h->buf_append(b, "}", 1);
}

int ffi_schema_append(const mcpg_host *h, mcpg_buf *b, const ffi_fn *f) {
    int rc = h->buf_printf(b, "{\"type\":\"object\",\"properties\":{");
    const char *sep = "";
    for (size_t i = 0; i < f->nparams && !rc; i++) {
        if (!ffi_param_given(&f->params[i])) continue;
        rc = h->buf_printf(b, "%s", sep);
        if (!rc) rc = schema_param(h, b, &f->params[i]);
        sep = ",";
    }
    if (!rc) rc = h->buf_printf(b, "},\"required\":[");
    sep = "";
    for (size_t i = 0; i < f->nparams && !rc; i++) {
        if (!ffi_param_given(&f->params[i])) continue;
        rc = h->buf_printf(b, "%s\"%s\"", sep, f->params[i].name);
        sep = ",";
    }
    return rc ? rc : h->buf_printf(b, "],\"additionalProperties\":false}");
}
