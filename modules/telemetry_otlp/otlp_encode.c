/* A span as OTLP puts it on the wire, and the request around a batch.
 *
 * Protobuf (the default, application/x-protobuf): the messages of
 * opentelemetry/proto/collector/trace/v1 and trace/v1, written by hand:
 * varints, length-delimited fields (a nested message is encoded first,
 * then written behind its length), fixed64 times, ids as bytes.
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

static int pb_varint(mcpg_buf *b, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return mcpg_buf_append(b, tmp, n);
}

static int pb_tag(mcpg_buf *b, unsigned field, unsigned wire) {
    return pb_varint(b, (uint64_t)field << 3 | wire);
}

static int pb_bytes(mcpg_buf *b, unsigned field, const void *p, size_t n) {
    return pb_tag(b, field, WIRE_LEN) | pb_varint(b, n) | mcpg_buf_append(b, p, n);
}

static int pb_string(mcpg_buf *b, unsigned field, const char *s) {
    return pb_bytes(b, field, s, strlen(s));
}

static int pb_fixed(mcpg_buf *b, unsigned field, uint64_t v, unsigned width) {
    uint8_t le[8];
    for (unsigned i = 0; i < width; i++) le[i] = (uint8_t)(v >> (8 * i));
    return pb_tag(b, field, width == 8 ? WIRE_FIXED64 : WIRE_FIXED32) | mcpg_buf_append(b, le, width);
}

static int pb_uint(mcpg_buf *b, unsigned field, uint64_t v) {
    return pb_tag(b, field, WIRE_VARINT) | pb_varint(b, v);
}

/* KeyValue { 1: key, 2: AnyValue { 1: string_value | 3: int_value } } */
static int pb_attr(mcpg_buf *b, unsigned field, const mcpg_span_attr *a) {
    mcpg_buf any = {0}, kv = {0};
    int rc = a->type == MCPG_ATTR_INT ? pb_uint(&any, 3, (uint64_t)a->num)
                                      : pb_bytes(&any, 1, a->str ? a->str : "", a->str ? a->len : 0);
    rc |= pb_string(&kv, 1, a->key) | pb_bytes(&kv, 2, any.data, any.len);
    rc |= pb_bytes(b, field, kv.data, kv.len);
    mcpg_buf_free(&any);
    mcpg_buf_free(&kv);
    return rc;
}

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* Status { 2: message, 3: code } */
static int pb_status(mcpg_buf *b, const mcpg_span *s) {
    mcpg_buf st = {0};
    int rc = s->status_message ? pb_string(&st, 2, s->status_message) : 0;
    rc |= pb_uint(&st, 3, s->status);
    rc |= pb_bytes(b, 15, st.data, st.len);
    mcpg_buf_free(&st);
    return rc;
}

static int pb_span(mcpg_buf *b, const mcpg_span *s) {
    int rc = pb_bytes(b, 1, s->trace_id, 16) | pb_bytes(b, 2, s->span_id, 8);
    if (s->tracestate) rc |= pb_string(b, 3, s->tracestate);
    if (!all_zero(s->parent_id, 8)) rc |= pb_bytes(b, 4, s->parent_id, 8);
    rc |= pb_string(b, 5, s->name ? s->name : "");
    rc |= pb_uint(b, 6, s->kind);
    rc |= pb_fixed(b, 7, (uint64_t)s->start_ns, 8) | pb_fixed(b, 8, (uint64_t)s->end_ns, 8);
    for (size_t i = 0; i < s->n_attrs; i++) rc |= pb_attr(b, 9, &s->attrs[i]);
    if (s->status) rc |= pb_status(b, s);
    return rc | pb_fixed(b, 16, s->flags, 4);
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

otlp_blob *otlp_encode_span(const mcpg_span *s, bool json) {
    mcpg_buf b = {0};
    int rc = json ? js_span(&b, s) : pb_span(&b, s);
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

static int pb_request(const otlp *o, otlp_blob *const *spans, size_t n, mcpg_buf *out) {
    mcpg_buf scope = {0}, scope_spans = {0}, resource = {0}, rs = {0};
    mcpg_span_attr svc = {.key = "service.name", .type = MCPG_ATTR_STRING,
                          .str = o->cfg->service_name, .len = strlen(o->cfg->service_name)};
    int rc = pb_string(&scope, 1, SCOPE) | pb_bytes(&scope_spans, 1, scope.data, scope.len);
    for (size_t i = 0; i < n; i++) rc |= pb_bytes(&scope_spans, 2, spans[i]->data, spans[i]->len);
    rc |= pb_attr(&resource, 1, &svc);
    rc |= pb_bytes(&rs, 1, resource.data, resource.len) | pb_bytes(&rs, 2, scope_spans.data, scope_spans.len);
    rc |= pb_bytes(out, 1, rs.data, rs.len);
    mcpg_buf_free(&scope);
    mcpg_buf_free(&scope_spans);
    mcpg_buf_free(&resource);
    mcpg_buf_free(&rs);
    return rc;
}

int otlp_encode_request(const otlp *o, otlp_blob *const *spans, size_t n, mcpg_buf *out) {
    return (o->json ? json_request : pb_request)(o, spans, n, out) ? MCPG_ENOMEM : 0;
}
