/* transport_http: llhttp callbacks. They copy the parts of a message the
 * gateway needs (URL, headers, body) into the message's own th_req, because
 * the bytes arrive in the worker's shared read buffer and may be split
 * across reads anywhere, and enforce the header and body limits as the
 * bytes arrive, before anything is buffered beyond them. */
#include "http/http.h"

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
    r->audit_held = 0;
    r->url_off = r->url_len = r->body_off = r->body_len = r->header_bytes = 0;
    r->hmark = NULL;
    r->hmark_seq = 0;
    r->htail = 0;
    r->hstarted = 0;
    r->hlast_name = 0;
    r->stamp = 0;
    r->status = 0;
    r->resp_bytes = 0;
    r->start_us = 0;
    r->call = NULL;
    r->sse = r->sse_ok = r->listening = r->lfilter = 0;
    r->luris_off = r->luris_len = 0;
    r->lprev = r->lnext = NULL;
    r->legacy = 0;
    r->level = -1;
    r->stream_no = r->ev_seq = 0;
    r->sid[0] = r->version[0] = '\0';
    r->rs = NULL;
    r->relay = NULL;
    r->oprev = r->onext = NULL;
    r->session_op_status = 0;
    r->loaded = r->changed = r->resumable = 0;
    r->authz = r->authz_again = r->event_webhook = 0;
    r->authz_off = r->authz_len = 0;
    r->extra.len = 0;
    r->server[0] = '\0';
    r->server_len = 0;
    r->server_info_len = r->server_instr_len = 0;
    r->server_text.len = 0;
}

void th_fill_header(const th_req *r, int k, th_hval *out) {
    memset(out, 0, sizeof *out);
    if (!r->known[k]) return;
    const th_hdr *h = &r->hdrs[r->known[k] - 1];
    out->p = r->data.data + h->value_off;
    out->n = h->value_len;
    out->present = 1;
    out->dup = (r->dup_mask >> k) & 1;
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

/* The header section is counted from the raw input, not from the spans
 * alone: llhttp drops the request line's method/version separators, the
 * ": " and CRLFs, and the whitespace before a value without a callback, so
 * counting spans let a request line or value padding (any amount of it)
 * pass max_header_bytes. Every byte from the request line's first to the
 * end of the latest span is counted: r->hmark is where counting stopped,
 * valid within the read it was set in (th_parse_read_end counts a read's
 * rest when a section spans reads); the line ends after the last span are
 * counted at headers_complete as the CRLF CRLF they must be. */
static int count_span(th_conn *c, th_req *r, const char *at, size_t len, int is_name) {
    const char *from = r->hmark_seq == c->in_seq ? r->hmark : c->in_start;
    if (!r->hstarted) { /* bytes before the method (CRLFs llhttp skips) are not this request's */
        from = at;
        r->hstarted = 1;
    }
    r->hmark = at + len;
    r->hmark_seq = c->in_seq;
    r->htail = 0;
    r->hlast_name = (uint8_t)is_name;
    return count_header_bytes(c, r, (size_t)(at + len - from));
}

void th_parse_read_begin(th_conn *c, const char *data) {
    c->in_start = data;
    c->in_seq++;
}

/* After a read parsed without error: count the rest of a header section
 * still open, and note how the input ends for the obs-fold check. Returns
 * -1 (err_status set) when the section is now over the limit. */
int th_parse_read_end(th_conn *c, const char *data, size_t n) {
    const char *q = data + n;
    while (q > data && (q[-1] == ' ' || q[-1] == '\t')) q--;
    if (q > data) c->in_lf_ws = q[-1] == '\n'; /* else only whitespace: unchanged */
    th_req *r = c->cur;
    if (!r || !r->hstarted || r->headers_done) return 0;
    const char *from = r->hmark_seq == c->in_seq ? r->hmark : data;
    size_t rest = (size_t)(data + n - from);
    r->hmark = data + n;
    r->hmark_seq = c->in_seq;
    r->htail += (uint32_t)(rest > UINT32_MAX ? UINT32_MAX : rest);
    return count_header_bytes(c, r, rest);
}

/* obs-fold (a header line continued on the next line after SP/HT): llhttp
 * 8 silently joins it to the value. RFC 9112 5.2 allows rejecting it, and
 * rejecting closes the door on "\r\n Content-Length: ..." smuggling
 * through a front end that reads the line as a header (CVE-2024-27982;
 * llhttp 9.2 rejects folds by default). A value span that follows LF and
 * only SP/HT can only be a continuation: a value proper follows ':'. */
static int after_fold(const th_conn *c, const char *at) {
    const char *q = at;
    while (q > c->in_start && (q[-1] == ' ' || q[-1] == '\t')) q--;
    return q > c->in_start ? q[-1] == '\n' : c->in_lf_ws;
}

static int append(th_conn *c, th_req *r, const char *at, size_t len) {
    if (c->ws->mod->host->buf_append(&r->data, at, len)) return fail(c, 503);
    return 0;
}

static int on_message_begin(llhttp_t *p) {
    th_conn *c = conn_of(p);
    th_worker_state *ws = c->ws;
    th_req *r = th_req_get(ws);
    if (!r) return fail(c, 503);
    r->conn = c;
    c->cur = r;
    c->cur_start_ms = uv_now(ws->loop);
    if (ws->mod->alog_mode != TH_ALOG_NONE) r->start_us = ws->mod->host->mono_us();
    return 0;
}

static int on_method(llhttp_t *p, const char *at, size_t len) {
    th_conn *c = conn_of(p);
    return count_span(c, c->cur, at, len, 0);
}

static int on_version(llhttp_t *p, const char *at, size_t len) {
    th_conn *c = conn_of(p);
    return count_span(c, c->cur, at, len, 0);
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
    th_conn *c = conn_of(p);
    th_req *r = c->cur;
    if (count_span(c, r, at, len, 0) || append(c, r, at, len)) return -1;
    r->url_len += (uint32_t)len; /* the URL is the first thing stored: url_off is 0 */
    return 0;
}

/* Trailer fields of a chunked body are counted against the limit but not
 * kept: a trailer must not be able to supply a header that was checked
 * (or absent) when the headers completed. A name's bytes are counted as
 * they come (llhttp splits a name at the end of each read) and its ": "
 * and CRLF once, when the name completes: counted per span, a trailer sent
 * a byte per read once cost five times its length (found by
 * tests/fuzz/fuzz_http). */
static int on_header_field(llhttp_t *p, const char *at, size_t len) {
    th_conn *c = conn_of(p);
    th_req *r = c->cur;
    if (r->headers_done) return count_header_bytes(c, r, len);
    if (r->hstate != 1) { /* a new field; llhttp may split one name over several calls */
        if (r->nhdrs == TH_MAX_HEADERS) return fail(c, 431);
        th_hdr *h = &r->hdrs[r->nhdrs++];
        h->name_off = (uint32_t)r->data.len;
        h->name_len = h->value_len = 0;
        r->hstate = 1;
    }
    if (count_span(c, r, at, len, 1)) return -1;
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

/* RFC 9110 5.1: a field name is a token. llhttp 8 (built without its
 * strict mode) lets an empty name and spaces inside one through (": x",
 * "Content Length: 5"); a front end may read such a line otherwise, so it
 * is refused, as obs-fold is. Found by tests/fuzz/fuzz_http. */
static int is_token(const char *p, size_t n) {
    /* tchar (RFC 9110 5.6.2): ALPHA, DIGIT and "!#$%&'*+-.^_`|~", one
     * lookup a byte (names are read once per request, on the loop) */
    static const unsigned char k_tchar[256] = {
        ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1,
        ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1,
        ['~'] = 1,
        ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1,
        ['7'] = 1, ['8'] = 1, ['9'] = 1,
        ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1,
        ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1,
        ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,
        ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
        ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1,
        ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1,
        ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1,
        ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
    };
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!k_tchar[(unsigned char)p[i]]) return 0;
    return 1;
}

static int on_header_field_complete(llhttp_t *p) {
    th_conn *c = conn_of(p);
    th_req *r = c->cur;
    if (r->headers_done) return count_header_bytes(c, r, 4); /* a trailer's ": " CRLF */
    uint32_t idx = r->nhdrs - 1;
    th_hdr *h = &r->hdrs[idx];
    if (!is_token(r->data.data + h->name_off, h->name_len)) return fail(c, 400);
    /* the value (if llhttp reports one: an empty value has no callback) is
     * appended right after the name */
    h->value_off = (uint32_t)r->data.len;
    r->hstate = 2;
    int k = known_index(r->data.data + h->name_off, h->name_len);
    if (k < 0) return 0;
    if (r->known[k]) r->dup_mask |= (uint16_t)(1u << k);
    else r->known[k] = (uint8_t)(idx + 1);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
    th_conn *c = conn_of(p);
    th_req *r = c->cur;
    if (r->headers_done) return count_header_bytes(c, r, len);
    if (!len) {
        /* llhttp reports an empty value as a 0-byte span after its line's
         * CRLF: nothing to keep or to reject, but the line is counted */
        int after_lf = after_fold(c, at);
        if (count_span(c, r, at, 0, 0)) return -1;
        if (after_lf) r->htail = 2;
        r->hstate = 2;
        return 0;
    }
    if (after_fold(c, at)) return fail(c, 400);
    r->hstate = 2;
    if (count_span(c, r, at, len, 0) || append(c, r, at, len)) return -1;
    r->hdrs[r->nhdrs - 1].value_len += (uint32_t)len;
    return 0;
}

static int known_index(const char *name, size_t n) {
    switch (n) {
    case 4: return memcmp(name, "host", 4) ? -1 : TH_H_HOST;
    case 6:
        if (!memcmp(name, "accept", 6)) return TH_H_ACCEPT;
        if (!memcmp(name, "expect", 6)) return TH_H_EXPECT;
        if (!memcmp(name, "origin", 6)) return TH_H_ORIGIN;
        return -1;
    case 8: return memcmp(name, "mcp-name", 8) ? -1 : TH_H_MCP_NAME;
    case 10: return memcmp(name, "mcp-method", 10) ? -1 : TH_H_MCP_METHOD;
    case 12: return memcmp(name, "content-type", 12) ? -1 : TH_H_CONTENT_TYPE;
    case 13:
        if (!memcmp(name, "last-event-id", 13)) return TH_H_LAST_EVENT_ID;
        if (!memcmp(name, "authorization", 13)) return TH_H_AUTHORIZATION;
        return -1;
    case 14: return memcmp(name, "mcp-session-id", 14) ? -1 : TH_H_SESSION_ID;
    case 17: return memcmp(name, "transfer-encoding", 17) ? -1 : TH_H_TRANSFER_ENCODING;
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
    /* HTTP/1.0 and 1.1 only: llhttp also takes "HTTP/2.0" and "HTTP/0.9"
     * request lines, which this server does not speak (an h2 preface, a
     * client that would read the answer another way) */
    if (p->http_major != 1 || p->http_minor > 1) return fail(c, 505);
    r->body_off = (uint32_t)r->data.len;
    /* the line ends after the last span: CRLF CRLF (":" first when the last
     * field had no value), less what the end of a read already counted */
    uint32_t tail = r->hlast_name ? 5 : 4;
    if (r->htail < tail && count_header_bytes(c, r, tail - r->htail)) return -1;
    /* RFC 9112 6.1: Transfer-Encoding in HTTP/1.0 means the framing is
     * faulty (a 1.0 front end may read the body by Content-Length or to
     * the close): refuse it rather than parse it as chunked. And llhttp 8
     * takes no notice of a Transfer-Encoding with an empty value, framing
     * "Transfer-Encoding: \r\nContent-Length: 3" by the length where a
     * front end may go by the coding: a Transfer-Encoding llhttp did not
     * act on is refused too (found by tests/fuzz/fuzz_http). */
    int te_framed = (p->flags & F_TRANSFER_ENCODING) != 0;
    if ((r->known[TH_H_TRANSFER_ENCODING] || te_framed) && (r->http_10 || !te_framed))
        return fail(c, 400);
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
    .on_method = on_method,
    .on_url = on_url,
    .on_version = on_version,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};
