/* transport_http: a connection's bytes into its parser. Everything between
 * the bytes a read (or TLS) delivered and the requests and refusals the
 * llhttp callbacks (http_parse.c) produce: pausing at a message boundary
 * with the rest kept, parsing the kept rest again, and answering a framing
 * error. No socket is touched here, so the fuzzers drive exactly this code
 * (tests/fuzz/fuzz_http.c). */
#include "http/http.h"

#include <string.h>

/* A parsed request (or a refused one) takes its place in the answer order. */
void th_conn_enqueue(th_conn *c, th_req *r) {
    r->next = NULL;
    if (c->qtail) c->qtail->next = r;
    else c->qhead = r;
    c->qtail = r;
    c->qlen++;
}

/* Answer a request the parser rejected, after everything before it, then
 * close: after a framing error the rest of the stream cannot be trusted. */
static void parse_error(th_conn *c) {
    th_worker_state *ws = c->ws;
    int status = c->err_status ? c->err_status : 400;
    th_req *r = c->cur;
    c->cur = NULL;
    if (!r) {
        r = th_req_get(ws);
        if (!r) {
            th_conn_close(c);
            return;
        }
        r->conn = c;
    }
    c->close_after = 1;
    r->keep_alive = 0;
    th_conn_enqueue(c, r);
    th_respond_status_error(c, r, status);
    th_conn_advance(c);
}

/* Keep what the paused parser did not take. from_saved: data is c->saved. */
static void keep_rest(th_conn *c, const char *data, size_t n, int from_saved) {
    const char *pos = llhttp_get_error_pos(&c->parser);
    size_t rest = pos && pos >= data && pos <= data + n ? (size_t)(data + n - pos) : 0;
    if (from_saved) {
        memmove(c->saved.data, pos, rest);
        c->saved.len = rest;
    } else if (rest && c->ws->mod->host->buf_append(&c->saved, pos, rest)) {
        th_conn_close(c);
    }
}

static void feed(th_conn *c, const char *data, size_t n, int from_saved) {
    c->in_execute = 1;
    th_parse_read_begin(c, data);
    llhttp_errno_t e = llhttp_execute(&c->parser, data, n);
    c->in_execute = 0;
    if (from_saved && e == HPE_OK) c->saved.len = 0;
    if (e == HPE_OK) {
        /* a header section still open at the end of the read counts up to here */
        if (th_parse_read_end(c, data, n)) parse_error(c);
        return;
    }
    if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
        c->paused = 1;
        if (e == HPE_PAUSED_UPGRADE) c->close_after = 1;
        if (c->close_after) c->saved.len = 0; /* nothing after this will be read */
        else keep_rest(c, data, n, from_saved);
        return;
    }
    if (from_saved) c->saved.len = 0;
    parse_error(c);
}

void th_conn_feed(th_conn *c, const char *data, size_t n) { feed(c, data, n, 0); }

/* Parse what a paused parser kept, once the connection can take more. */
void th_conn_parse_saved(th_conn *c) {
    c->paused = 0;
    llhttp_resume(&c->parser);
    if (c->saved.len) feed(c, c->saved.data, c->saved.len, 1);
    if (!c->saved.len && c->saved.cap) c->ws->mod->host->buf_free(&c->saved);
}

void th_conn_parser_init(th_conn *c) {
    llhttp_init(&c->parser, HTTP_REQUEST, &th_parser_settings);
    c->parser.data = c;
}
