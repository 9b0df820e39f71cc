/* transport_http: llhttp callbacks. They copy the parts of a message the
 * gateway needs (URL, headers, body) into the message's own th_req, because
 * the bytes arrive in the worker's shared read buffer and may be split
 * across reads anywhere, and enforce the header and body limits as the
 * bytes arrive, before anything is buffered beyond them. */
#include "internal.h"

#include <string.h>
#include <strings.h>

static th_conn *conn_of(llhttp_t *p) { return (th_conn *)p->data; }

void th_req_reset(th_req *r) {
    r->data.len = 0;
    r->resp.len = 0;
    r->nhdrs = 0;
    memset(r->known, 0, sizeof r->known);
    r->dup_mask = 0;
    r->hstate = 0;
    r->state = TH_REQ_PARSING;
    r->http_method = 0;
    r->http_10 = 0;
    r->keep_alive = 0;
    r->in_submit = 0;
    r->headers_done = 0;
    r->url_off = r->url_len = r->body_off = r->body_len = r->header_bytes = 0;
    r->stamp = 0;
    r->status = 0;
    r->resp_bytes = 0;
    r->start_us = 0;
    r->call = NULL;
}

static int fail(th_conn *c, int status) {
    c->err_status = (uint16_t)status;
    return -1;
}

/* Count bytes of the header section against max_header_bytes. */
static int count_header_bytes(th_conn *c, th_req *r, size_t len) {
    r->header_bytes += (uint32_t)(len > UINT32_MAX ? UINT32_MAX : len);
    if ((int64_t)r->header_bytes > c->ws->mod->cfg->max_header_bytes) return fail(c, 431);
    return 0;
}

static int append(th_conn *c, th_req *r, const char *at, size_t len) {
    if (c->ws->mod->host->buf_append(&r->data, at, len)) return fail(c, 503);
    return 0;
}

static int on_message_begin(llhttp_t *p) {
    th_conn *c = conn_of(p);
    th_wslot *ws = c->ws;
    th_req *r = th_req_get(ws);
    if (!r) return fail(c, 503);
    r->conn = c;
    c->cur = r;
    c->cur_start_ms = uv_now(ws->loop);
    if (ws->mod->cfg->access_log) r->start_us = ws->mod->host->mono_us();
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
    th_conn *c = conn_of(p);
    th_req *r = c->cur;
    if (count_header_bytes(c, r, len) || append(c, r, at, len)) return -1;
    r->url_len += (uint32_t)len; /* the URL is the first thing stored: url_off is 0 */
    return 0;
}

/* Trailer fields of a chunked body are counted against the limit but not
 * kept: a trailer must not be able to supply a header that was checked
 * (or absent) when the headers completed. */
static int on_header_field(llhttp_t *p, const char *at, size_t len) {
    th_conn *c = conn_of(p);
    th_req *r = c->cur;
    if (r->headers_done) return count_header_bytes(c, r, len + 4);
    if (r->hstate != 1) { /* a new field; llhttp may split one name over several calls */
        if (r->nhdrs == TH_MAX_HEADERS) return fail(c, 431);
        th_hdr *h = &r->hdrs[r->nhdrs++];
        h->name_off = (uint32_t)r->data.len;
        h->name_len = h->value_len = 0;
        r->hstate = 1;
        if (count_header_bytes(c, r, 4)) return -1; /* ": " and CRLF */
    }
    if (count_header_bytes(c, r, len)) return -1;
    if (c->ws->mod->host->buf_reserve(&r->data, len)) return fail(c, 503);
    char *d = r->data.data + r->data.len;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)at[i];
        d[i] = (char)((ch >= 'A' && ch <= 'Z') ? ch + 32 : ch);
    }
    r->data.len += len;
    r->data.data[r->data.len] = '\0';
    r->hdrs[r->nhdrs - 1].name_len += (uint32_t)len;
    return 0;
}

static int known_index(const char *name, size_t n);

static int on_header_field_complete(llhttp_t *p) {
    th_req *r = conn_of(p)->cur;
    if (r->headers_done) return 0;
    uint32_t idx = r->nhdrs - 1;
    th_hdr *h = &r->hdrs[idx];
    /* the value (if llhttp reports one: an empty value has no callback) is
     * appended right after the name */
    h->value_off = (uint32_t)r->data.len;
    r->hstate = 2;
    int k = known_index(r->data.data + h->name_off, h->name_len);
    if (k < 0) return 0;
    if (r->known[k]) r->dup_mask |= (uint8_t)(1u << k);
    else r->known[k] = (uint8_t)(idx + 1);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
    th_conn *c = conn_of(p);
    th_req *r = c->cur;
    if (r->headers_done) return count_header_bytes(c, r, len);
    r->hstate = 2;
    if (count_header_bytes(c, r, len) || append(c, r, at, len)) return -1;
    r->hdrs[r->nhdrs - 1].value_len += (uint32_t)len;
    return 0;
}

static int known_index(const char *name, size_t n) {
    switch (n) {
    case 6:
        if (!memcmp(name, "accept", 6)) return TH_H_ACCEPT;
        if (!memcmp(name, "expect", 6)) return TH_H_EXPECT;
        return -1;
    case 8: return memcmp(name, "mcp-name", 8) ? -1 : TH_H_MCP_NAME;
    case 10: return memcmp(name, "mcp-method", 10) ? -1 : TH_H_MCP_METHOD;
    case 12: return memcmp(name, "content-type", 12) ? -1 : TH_H_CONTENT_TYPE;
    case 20: return memcmp(name, "mcp-protocol-version", 20) ? -1 : TH_H_PROTOCOL_VERSION;
    default: return -1;
    }
}

static int on_header_value_complete(llhttp_t *p) {
    th_req *r = conn_of(p)->cur;
    if (r->headers_done) return 0;
    th_hdr *h = &r->hdrs[r->nhdrs - 1];
    const char *v = r->data.data + h->value_off;
    /* llhttp strips leading whitespace of a value, not trailing */
    while (h->value_len && (v[h->value_len - 1] == ' ' || v[h->value_len - 1] == '\t'))
        h->value_len--;
    return 0;
}

static int expects_continue(const th_req *r) {
    if (!r->known[TH_H_EXPECT]) return 0;
    const th_hdr *h = &r->hdrs[r->known[TH_H_EXPECT] - 1];
    return h->value_len == 12 && !strncasecmp(r->data.data + h->value_off, "100-continue", 12);
}

static int on_headers_complete(llhttp_t *p) {
    th_conn *c = conn_of(p);
    th_req *r = c->cur;
    r->http_method = p->method;
    r->http_10 = p->http_major == 1 && p->http_minor == 0;
    r->headers_done = 1;
    r->body_off = (uint32_t)r->data.len;
    int has_body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length);
    if ((p->flags & F_CONTENT_LENGTH) &&
        p->content_length > (uint64_t)c->ws->mod->cfg->max_body_bytes)
        return fail(c, 413); /* decided before a byte of it is buffered */
    /* A client waiting for 100 Continue would otherwise stall for its own
     * timeout; only when nothing earlier is still to be answered, so the
     * interim response cannot overtake a final one. */
    if (has_body && !r->http_10 && !c->qhead && expects_continue(r)) {
        if (c->ws->mod->host->buf_append(&c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25))
            return fail(c, 503);
        th_mark_dirty(c);
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
    th_conn *c = conn_of(p);
    th_req *r = c->cur;
    if ((int64_t)(r->body_len + len) > c->ws->mod->cfg->max_body_bytes) return fail(c, 413);
    if (append(c, r, at, len)) return -1;
    r->body_len += (uint32_t)len;
    return 0;
}

static int on_message_complete(llhttp_t *p) {
    th_conn *c = conn_of(p);
    th_req *r = c->cur;
    c->cur = NULL;
    r->keep_alive = (uint8_t)llhttp_should_keep_alive(p);
    if (!r->keep_alive || p->upgrade) c->close_after = 1; /* no protocol switch offered */
    th_conn_enqueue(c, r);
    th_route(c, r);
    th_conn_advance(c);
    /* Stop at this message boundary when the connection must not take
     * more now; the rest of the input waits in conn->saved. */
    return th_conn_can_take_more(c) ? 0 : HPE_PAUSED;
}

const llhttp_settings_t th_parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};
