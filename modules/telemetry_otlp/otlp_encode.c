/* A span as OTLP puts it on the wire, and the request around a batch.
 *
 * Protobuf (the default, application/x-protobuf): the messages of
 * opentelemetry/proto/collector/trace/v1 and trace/v1, written by hand:
 * varints, length-delimited fields (a nested message is measured by a
 * counting pass of the code that writes it), fixed64 times, ids as bytes.
 *   ExportTraceServiceRequest { 1: ResourceSpans }
 *   ResourceSpans { 1: Resource { 1: KeyValue service.name }, 2: ScopeSpans }
 *   ScopeSpans { 1: InstrumentationScope { 1: name }, 2: Span... }
 * Each queued span is a finished Span message, so a batch is the spans'
 * bytes concatenated behind the wrapper's lengths.
 *
 * JSON (application/json): OTLP/JSON's field names (lowerCamelCase), ids as
 * lowercase hex, 64-bit integers as decimal strings. */
#include "otlp.h"

#include <stdlib.h>
#include <string.h>

/* ---- protobuf ---- */

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

/* Writes at p, or with p NULL only counts: a nested message is measured by
 * the same code that then writes it, and a span is sized before its one
 * allocation. */
typedef struct pb {
    uint8_t *p;
    size_t n;
} pb;

static void pb_raw(pb *w, const void *src, size_t n) {
    if (w->p) memcpy(w->p + w->n, src, n);
    w->n += n;
}

static void pb_varint(pb *w, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_raw(w, tmp, n);
}

static void pb_tag(pb *w, unsigned field, unsigned wire) { pb_varint(w, (uint64_t)field << 3 | wire); }

static void pb_bytes(pb *w, unsigned field, const void *p, size_t n) {
    pb_tag(w, field, WIRE_LEN);
    pb_varint(w, n);
    pb_raw(w, p, n);
}

static void pb_string(pb *w, unsigned field, const char *s) { pb_bytes(w, field, s, strlen(s)); }

static void pb_fixed(pb *w, unsigned field, uint64_t v, unsigned width) {
    uint8_t le[8];
    for (unsigned i = 0; i < width; i++) le[i] = (uint8_t)(v >> (8 * i));
    pb_tag(w, field, width == 8 ? WIRE_FIXED64 : WIRE_FIXED32);
    pb_raw(w, le, width);
}

static void pb_uint(pb *w, unsigned field, uint64_t v) {
    pb_tag(w, field, WIRE_VARINT);
    pb_varint(w, v);
}

/* A nested message: its length (measured by a counting pass), then it. */
static void pb_nested(pb *w, unsigned field, void (*body)(pb *, const void *), const void *arg) {
    pb count = {NULL, 0};
    body(&count, arg);
    pb_tag(w, field, WIRE_LEN);
    pb_varint(w, count.n);
    body(w, arg);
}

/* AnyValue { 1: string_value | 3: int_value } */
static void pb_any(pb *w, const void *arg) {
    const mcpg_span_attr *a = arg;
    if (a->type == MCPG_ATTR_INT) pb_uint(w, 3, (uint64_t)a->num);
    else pb_bytes(w, 1, a->str ? a->str : "", a->str ? a->len : 0);
}

/* KeyValue { 1: key, 2: AnyValue } */
static void pb_key_value(pb *w, const void *arg) {
    const mcpg_span_attr *a = arg;
    pb_string(w, 1, a->key);
    pb_nested(w, 2, pb_any, a);
}

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* Status { 2: message, 3: code } */
static void pb_status(pb *w, const void *arg) {
    const mcpg_span *s = arg;
    if (s->status_message) pb_string(w, 2, s->status_message);
    pb_uint(w, 3, s->status);
}

static void pb_span(pb *w, const void *arg) {
    const mcpg_span *s = arg;
    pb_bytes(w, 1, s->trace_id, 16);
    pb_bytes(w, 2, s->span_id, 8);
    if (s->tracestate) pb_string(w, 3, s->tracestate);
    if (!all_zero(s->parent_id, 8)) pb_bytes(w, 4, s->parent_id, 8);
    pb_string(w, 5, s->name ? s->name : "");
    pb_uint(w, 6, s->kind);
    pb_fixed(w, 7, (uint64_t)s->start_ns, 8);
    pb_fixed(w, 8, (uint64_t)s->end_ns, 8);
    for (size_t i = 0; i < s->n_attrs; i++) pb_nested(w, 9, pb_key_value, &s->attrs[i]);
    if (s->status) pb_nested(w, 15, pb_status, s);
    pb_fixed(w, 16, s->flags, 4);
}

/* ---- JSON ---- */

static int js_hex(mcpg_buf *b, const char *key, const uint8_t *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    char hex[33];
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[p[i] >> 4];
        hex[2 * i + 1] = digits[p[i] & 15];
    }
    hex[2 * n] = '\0';
    return mcpg_buf_printf(b, ",\"%s\":\"%s\"", key, hex);
}

static int js_attr(mcpg_buf *b, const mcpg_span_attr *a) {
    int rc = mcpg_buf_puts(b, "{\"key\":") | mcpg_buf_append_json_string(b, a->key, strlen(a->key));
    if (a->type == MCPG_ATTR_INT)
        return rc | mcpg_buf_printf(b, ",\"value\":{\"intValue\":\"%lld\"}}", (long long)a->num);
    rc |= mcpg_buf_puts(b, ",\"value\":{\"stringValue\":");
    rc |= mcpg_buf_append_json_string(b, a->str ? a->str : "", a->str ? a->len : 0);
    return rc | mcpg_buf_puts(b, "}}");
}

static int js_string(mcpg_buf *b, const char *key, const char *s) {
    return mcpg_buf_printf(b, ",\"%s\":", key) | mcpg_buf_append_json_string(b, s, strlen(s));
}

static int js_span(mcpg_buf *b, const mcpg_span *s) {
    int rc = mcpg_buf_puts(b, "{\"kind\":") | mcpg_buf_printf(b, "%u", s->kind);
    rc |= js_hex(b, "traceId", s->trace_id, 16) | js_hex(b, "spanId", s->span_id, 8);
    if (!all_zero(s->parent_id, 8)) rc |= js_hex(b, "parentSpanId", s->parent_id, 8);
    if (s->tracestate) rc |= js_string(b, "traceState", s->tracestate);
    rc |= js_string(b, "name", s->name ? s->name : "");
    rc |= mcpg_buf_printf(b, ",\"startTimeUnixNano\":\"%lld\",\"endTimeUnixNano\":\"%lld\",\"flags\":%u",
                          (long long)s->start_ns, (long long)s->end_ns, s->flags);
    rc |= mcpg_buf_puts(b, ",\"attributes\":[");
    for (size_t i = 0; i < s->n_attrs; i++)
        rc |= (i ? mcpg_buf_puts(b, ",") : 0) | js_attr(b, &s->attrs[i]);
    rc |= mcpg_buf_printf(b, "],\"status\":{\"code\":%u", s->status);
    if (s->status_message) rc |= js_string(b, "message", s->status_message);
    return rc | mcpg_buf_puts(b, "}}");
}

/* ---- the queue's unit, and the request ---- */

/* A Span message: measured, then written into its one allocation. */
static otlp_blob *pb_blob(const mcpg_span *s) {
    pb count = {NULL, 0};
    pb_span(&count, s);
    otlp_blob *blob = malloc(sizeof *blob + count.n);
    if (!blob) return NULL;
    pb w = {(uint8_t *)blob->data, 0};
    pb_span(&w, s);
    blob->len = w.n;
    return blob;
}

otlp_blob *otlp_encode_span(const mcpg_span *s, bool json) {
    if (!json) return pb_blob(s);
    mcpg_buf b = {0};
    int rc = js_span(&b, s);
    otlp_blob *blob = rc ? NULL : malloc(sizeof *blob + b.len);
    if (blob) {
        blob->len = b.len;
        memcpy(blob->data, b.data, b.len);
    }
    mcpg_buf_free(&b);
    return blob;
}

static const char SCOPE[] = "mcpg";

static int json_request(const otlp *o, otlp_blob *const *spans, size_t n, mcpg_buf *out) {
    const char *svc = o->cfg->service_name;
    int rc = mcpg_buf_puts(out, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":"
                                "\"service.name\",\"value\":{\"stringValue\":");
    rc |= mcpg_buf_append_json_string(out, svc, strlen(svc));
    rc |= mcpg_buf_printf(out, "}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"%s\"},\"spans\":[", SCOPE);
    for (size_t i = 0; i < n; i++)
        rc |= (i ? mcpg_buf_puts(out, ",") : 0) | mcpg_buf_append(out, spans[i]->data, spans[i]->len);
    return rc | mcpg_buf_puts(out, "]}]}]}");
}

/* The request around n Span messages, in the order they nest:
 * ExportTraceServiceRequest { 1: ResourceSpans { 1: Resource, 2: ScopeSpans } } */
typedef struct pb_batch {
    const otlp *o;
    otlp_blob *const *spans;
    size_t n;
} pb_batch;

static void pb_scope(pb *w, const void *arg) {
    (void)arg;
    pb_string(w, 1, SCOPE);
}

static void pb_scope_spans(pb *w, const void *arg) {
    const pb_batch *b = arg;
    pb_nested(w, 1, pb_scope, NULL);
    for (size_t i = 0; i < b->n; i++) pb_bytes(w, 2, b->spans[i]->data, b->spans[i]->len);
}

static void pb_resource(pb *w, const void *arg) {
    const otlp *o = arg;
    mcpg_span_attr svc = {.key = "service.name", .type = MCPG_ATTR_STRING,
                          .str = o->cfg->service_name, .len = strlen(o->cfg->service_name)};
    pb_nested(w, 1, pb_key_value, &svc);
}

static void pb_resource_spans(pb *w, const void *arg) {
    const pb_batch *b = arg;
    pb_nested(w, 1, pb_resource, b->o);
    pb_nested(w, 2, pb_scope_spans, b);
}

static void pb_export_request(pb *w, const void *arg) { pb_nested(w, 1, pb_resource_spans, arg); }

static int pb_request(const otlp *o, otlp_blob *const *spans, size_t n, mcpg_buf *out) {
    pb_batch b = {o, spans, n};
    pb count = {NULL, 0};
    pb_export_request(&count, &b);
    if (mcpg_buf_reserve(out, count.n + 1)) return MCPG_ENOMEM;
    pb w = {(uint8_t *)out->data + out->len, 0};
    pb_export_request(&w, &b);
    out->len += w.n;
    return 0;
}

int otlp_encode_request(const otlp *o, otlp_blob *const *spans, size_t n, mcpg_buf *out) {
    return (o->json ? json_request : pb_request)(o, spans, n, out) ? MCPG_ENOMEM : 0;
}
