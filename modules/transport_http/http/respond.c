/* transport_http: a request's reply written in pipelining order. A
 * response goes into the connection's output buffer when its request is
 * first in line, else into the request's own buffer until the ones before it
 * are answered. Every layer answers through these. */
#include "http/http.h"

#include <string.h>

#define MSG(s) TH_LIT("\"" s "\"")

static mcpg_buf *th_resp_target(th_conn *c, th_req *r) { return c->qhead == r ? &c->out : &r->resp; }

/* Write r's response; r is answered. */
void th_respond(th_conn *c, th_req *r, th_resp_head *hd, const th_piece *body, size_t nbody) {
    th_worker_state *ws = c->ws;
    hd->date = th_date(ws);
    /* Only the last answer a connection will give says "close": a pipelined
     * client must still read the ones queued behind an earlier response. */
    hd->close = !r->keep_alive || (c->close_after && r == c->qtail);
    hd->keep_alive_10 = r->http_10 && r->keep_alive;
    hd->head_only = r->http_method == HTTP_HEAD;
    if (r->sid[0]) hd->session = r->sid;
    size_t blen = 0;
    if (th_resp_append(ws->mod->host, th_resp_target(c, r), hd, body, nbody, &blen)) {
        c->close_after = 1; /* out of memory: give up on this connection after what is queued */
        r->keep_alive = 0;
    }
    r->status = hd->status;
    r->resp_bytes = blen;
    r->state = TH_REQ_DONE;
}

void th_respond_rpc_error(th_conn *c, th_req *r, int status, uint32_t retry_after,
                              th_piece id, int64_t code, th_piece msg, const th_piece *data,
                              size_t ndata) {
    th_piece body[TH_MAX_PIECES];
    char codebuf[24];
    size_t n = th_rpc_error_body(body, id, codebuf, code, msg, data, ndata);
    th_resp_head hd = {.status = status, .retry_after_s = retry_after, .json = 1};
    th_respond(c, r, &hd, body, n);
}

void th_respond_status_error(th_conn *c, th_req *r, int status) {
    th_piece msg;
    int64_t code = MCPG_RPC_INVALID_REQUEST;
    switch (status) {
    case 413: msg = MSG("Content Too Large: the request body exceeds max_body_bytes"); break;
    case 431: msg = MSG("Request Header Fields Too Large: the header section exceeds max_header_bytes"); break;
    case 503:
        msg = MSG("Service Unavailable: out of memory");
        code = MCPG_RPC_SERVER_ERROR;
        break;
    case 505:
        msg = MSG("HTTP Version Not Supported: this server speaks HTTP/1.1 (and 1.0)");
        code = MCPG_RPC_SERVER_ERROR;
        break;
    default:
        status = 400;
        msg = MSG("Bad Request: malformed HTTP request");
    }
    th_respond_rpc_error(c, r, status, 0, TH_LIT("null"), code, msg, NULL, 0);
}

/* mcpg_header_fn: any request header, for the stages (identity reads its
 * credentials here). Names are stored lower-cased; lname is lower-case. */
const char *th_req_header(const th_req *r, const char *lname, size_t *len_out) {
    size_t ln = strlen(lname);
    for (uint32_t i = 0; i < r->nhdrs; i++) {
        const th_hdr *h = &r->hdrs[i];
        if (h->name_len == ln && !memcmp(r->data.data + h->name_off, lname, ln)) {
            if (len_out) *len_out = h->value_len;
            return r->data.data + h->value_off;
        }
    }
    return NULL;
}
