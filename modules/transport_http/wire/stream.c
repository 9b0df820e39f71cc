/* transport_http: SSE answers and listening streams (see stream.h). */
#include "wire/stream.h"

#include <stdbool.h>

#include <stdio.h>
#include <string.h>

static const char k_sse_head[] =
    "Content-Type: text/event-stream\r\nCache-Control: no-cache, no-transform\r\n"
    "X-Accel-Buffering: no\r\n";

static mcpg_buf *target(th_conn *c, th_req *r) { return c->qhead == r ? &c->out : &r->resp; }

/* Bytes were added for r: write them this turn if it is first in line. */
static int wrote(th_conn *c, th_req *r) {
    r->last_write_ms = uv_now(c->ws->loop);
    if (c->qhead == r) th_mark_dirty(c);
    if (target(c, r)->len + c->wbuf.len > TH_STREAM_MAX) {
        c->close_after = 1; /* a reader that stopped: nothing more is queued for it */
        th_conn_close(c);
        return MCPG_EAGAIN;
    }
    return 0;
}

size_t th_event_id(char *out, const th_worker_state *ws, unsigned stream, unsigned seq) {
    size_t n = th_fmt_u64(out, ws->mod->replica);
    out[n++] = '_';
    n += th_fmt_u64(out + n, ws->index);
    out[n++] = '_';
    n += th_fmt_u64(out + n, stream);
    out[n++] = '_';
    n += th_fmt_u64(out + n, seq);
    out[n] = '\0';
    return n;
}

int th_sse_begin(th_conn *c, th_req *r) {
    if (r->sse) return 0;
    const mcpg_host *h = c->ws->mod->host;
    mcpg_buf *b = target(c, r);
    /* appends, not printf: this is every legacy call's answer */
    const char *date = th_date(c->ws);
    int rc = h->buf_append(b, "HTTP/1.1 200 OK\r\nDate: ", 23);
    rc |= h->buf_append(b, date, strlen(date));
    rc |= h->buf_append(b, "\r\n", 2);
    rc |= h->buf_append(b, k_sse_head, sizeof k_sse_head - 1);
    if (r->sid[0]) {
        rc |= h->buf_append(b, "Mcp-Session-Id: ", 16);
        rc |= h->buf_append(b, r->sid, strlen(r->sid));
        rc |= h->buf_append(b, "\r\n", 2);
    }
    if (r->http_10) {
        c->close_after = 1; /* no chunked coding in 1.0: the close ends the body */
        rc |= h->buf_append(b, "Connection: close\r\n\r\n", 21);
    } else {
        rc |= h->buf_append(b, "Transfer-Encoding: chunked\r\n\r\n", 30);
    }
    if (rc) return MCPG_ENOMEM;
    r->sse = 1;
    r->status = 200;
    return wrote(c, r);
}

/* The bytes of one event into b; JSON text may hold line breaks (between
 * tokens only): each line is a data line of its own. */
int th_sse_format(const mcpg_host *h, mcpg_buf *b, const char *id, size_t idn, const char *json,
                  size_t n) {
    int rc = h->buf_append(b, "event: message\n", 15);
    if (id) {
        rc |= h->buf_append(b, "id: ", 4);
        rc |= h->buf_append(b, id, idn);
        rc |= h->buf_append(b, "\n", 1);
    }
    while (n) {
        const char *nl = memchr(json, '\n', n);
        size_t len = nl ? (size_t)(nl - json) : n;
        size_t line = len && json[len - 1] == '\r' ? len - 1 : len;
        rc |= h->buf_append(b, "data: ", 6);
        rc |= h->buf_append(b, json, line);
        rc |= h->buf_append(b, "\n", 1);
        json += nl ? len + 1 : len;
        n -= nl ? len + 1 : len;
    }
    rc |= h->buf_append(b, "\n", 1);
    return rc ? MCPG_ENOMEM : 0;
}

/* n in hex and CRLF, the head of a chunk: the bytes written. */
static size_t chunk_head(char *out, size_t n) {
    char tmp[2 * sizeof n];
    size_t k = 0;
    do {
        tmp[k++] = "0123456789abcdef"[n & 15];
        n >>= 4;
    } while (n);
    for (size_t i = 0; i < k; i++) out[i] = tmp[k - 1 - i];
    out[k] = '\r';
    out[k + 1] = '\n';
    return k + 2;
}

/* text as one chunk of the body (as is for HTTP/1.0). */
static int chunk(th_conn *c, th_req *r, const char *text, size_t n) {
    const mcpg_host *h = c->ws->mod->host;
    mcpg_buf *b = target(c, r);
    char head[2 * sizeof n + 2];
    int rc = r->http_10 ? 0 : h->buf_append(b, head, chunk_head(head, n));
    rc |= h->buf_append(b, text, n);
    if (!r->http_10) rc |= h->buf_append(b, "\r\n", 2);
    r->resp_bytes += n;
    return rc ? MCPG_ENOMEM : 0;
}

int th_sse_event(th_conn *c, th_req *r, const char *id, size_t idn, const char *json, size_t n) {
    const mcpg_host *h = c->ws->mod->host;
    int rc = th_sse_begin(c, r);
    if (rc) return rc;
    char idbuf[48];
    if (!id && r->legacy && r->stream_no) { /* the stream is in the id, for Last-Event-ID */
        idn = th_event_id(idbuf, c->ws, r->stream_no, r->ev_seq++);
        id = idbuf;
    }
    mcpg_buf *e = &c->ws->sse_body;
    e->len = 0;
    if (th_sse_format(h, e, id, idn, json, n) || chunk(c, r, e->data, e->len)) return MCPG_ENOMEM;
    return wrote(c, r);
}

int th_sse_raw(th_conn *c, th_req *r, const char *text, size_t n) {
    int rc = th_sse_begin(c, r);
    if (rc) return rc;
    if (chunk(c, r, text, n)) return MCPG_ENOMEM;
    return wrote(c, r);
}

void th_sse_end(th_conn *c, th_req *r, const char *id, size_t idn, const char *json, size_t n) {
    const mcpg_host *h = c->ws->mod->host;
    if (json && th_sse_event(c, r, id, idn, json, n) == MCPG_EAGAIN) return;
    if (!r->sse && th_sse_begin(c, r)) c->close_after = 1;
    if (!r->http_10 && h->buf_append(target(c, r), "0\r\n\r\n", 5)) c->close_after = 1;
    if (r->listening) th_listener_remove(c->ws, r);
    r->state = TH_REQ_DONE;
    if (c->qhead == r) th_mark_dirty(c);
}

/* ---- listeners ------------------------------------------------------------ */

void th_listener_add(th_worker_state *ws, th_req *r) {
    r->lprev = NULL;
    r->lnext = ws->listeners;
    if (ws->listeners) ws->listeners->lprev = r;
    ws->listeners = r;
    r->listening = 1;
    r->listen_us = ws->mod->host->mono_us();
    r->conn->nstreams++;
    th_metric_add(ws, ws->mod->m_streams, 1);
}

void th_listener_remove(th_worker_state *ws, th_req *r) {
    if (!r->listening) return;
    th_listen_stop(ws, r);
    if (r->lprev) r->lprev->lnext = r->lnext;
    else ws->listeners = r->lnext;
    if (r->lnext) r->lnext->lprev = r->lprev;
    r->lprev = r->lnext = NULL;
    r->listening = 0;
    r->conn->nstreams--;
    th_metric_add(ws, ws->mod->m_streams, -1);
}

/* The server tearing a subscription down says so with notifications/cancelled
 * naming the listen request (the one use the 2026-07-28 revision allows a
 * server), before the graceful end's result. Best effort: the result follows
 * whatever became of it. */
static void tell_cancelled(th_worker_state *ws, th_req *r) {
    const mcpg_host *h = ws->mod->host;
    mcpg_buf *b = &ws->scratch;
    b->len = 0;
    int id = (int)r->desc.id_len;
    const char *idp = r->desc.id_json;
    int rc = h->buf_printf(b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                              "\"params\":{\"requestId\":%.*s,\"reason\":\"the gateway ended the "
                              "subscription\",\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":"
                              "%.*s}}}", id, idp, id, idp);
    if (!rc) (void)th_sse_event(r->conn, r, NULL, 0, b->data, b->len);
}

/* A graceful end is a normal result for the listen request. */
static void end_one(th_worker_state *ws, th_req *r) {
    const mcpg_host *h = ws->mod->host;
    mcpg_buf *b = &ws->scratch;
    /* a legacy GET stream answers no request: it has no id (and its desc
     * may hold a length left from the request before) */
    bool answer = !r->legacy && r->desc.id_json && r->desc.id_len;
    if (answer) tell_cancelled(ws, r);
    b->len = 0;
    int rc = 0;
    if (answer) {
        rc |= h->buf_append(b, "{\"jsonrpc\":\"2.0\",\"id\":", 22);
        rc |= h->buf_append(b, r->desc.id_json, r->desc.id_len);
        /* the result names the subscription it ends, as its events did */
        static const char head[] = ",\"result\":{\"resultType\":\"complete\",\"_meta\":{"
                                   "\"io.modelcontextprotocol/subscriptionId\":";
        rc |= h->buf_append(b, head, sizeof head - 1);
        rc |= h->buf_append(b, r->desc.id_json, r->desc.id_len);
        rc |= h->buf_printf(b, ",\"io.modelcontextprotocol/serverInfo\":%s}}}",
                            th_req_server_info(ws->mod, r).p);
    }
    th_conn *c = r->conn;
    th_listener_remove(ws, r);
    if (rc || !answer) th_sse_end(c, r, NULL, 0, NULL, 0);
    else th_sse_end(c, r, NULL, 0, b->data, b->len);
    th_conn_advance(c);
}

void th_listeners_end(th_worker_state *ws, th_conn *only) {
    for (th_req *r = ws->listeners, *next; r; r = next) {
        next = r->lnext;
        if (!only || r->conn == only) end_one(ws, r);
    }
}

uint32_t th_listeners_end_before(th_worker_state *ws, uint64_t before_us) {
    uint32_t n = 0;
    for (th_req *r = ws->listeners, *next; r; r = next) {
        next = r->lnext;
        if (r->listen_us < before_us) {
            end_one(ws, r);
            n++;
        }
    }
    return n;
}

void th_listeners_keepalive(th_worker_state *ws, uint64_t now_ms) {
    for (th_req *r = ws->listeners, *next; r; r = next) {
        next = r->lnext; /* a stream over its bound closes, never frees, here */
        if (now_ms - r->last_write_ms >= TH_KEEPALIVE_MS && !r->conn->closing)
            (void)th_sse_raw(r->conn, r, ": keepalive\n\n", 13);
    }
}
