/* transport_http: one client connection. Reads into the worker's shared
 * buffer and parses at once (keeping only what the parser could not take
 * yet), answers in request order, writes once per loop turn, and closes
 * gracefully (FIN, then drain unread input) or hard (cancel calls in flight).
 *
 * Nothing here runs inside llhttp_execute except through the parser
 * callbacks, and nothing closes or frees a connection from inside them:
 * closing is decided in the read/write callbacks, the sweep, drain, or the
 * once-per-turn service pass. */
#include "http/http.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#if defined(__linux__)
#include <linux/sockios.h> /* SIOCOUTQ */
#endif

static void update_reading(th_conn *c);

int th_conn_can_take_more(const th_conn *c) {
    return !c->close_after && !c->closing && !c->ws->draining && c->qlen < TH_MAX_PIPELINE &&
           c->out.len + c->wbuf.len < TH_OUT_HIGH_WATER;
}

/* Move every answered request at the head of the queue into `out`. */
void th_conn_advance(th_conn *c) {
    th_worker_state *ws = c->ws;
    const mcpg_host *host = ws->mod->host;
    th_req *r;
    int moved = 0;
    while ((r = c->qhead) && r->state == TH_REQ_DONE) {
        if (r->resp.len) {
            if (host->buf_append(&c->out, r->resp.data, r->resp.len)) c->close_after = 1;
            r->resp.len = 0;
        }
        c->qhead = r->next;
        if (!c->qhead) c->qtail = NULL;
        c->qlen--;
        th_alog_request(ws, r);
        th_req_put(ws, r);
        moved = 1;
    }
    /* a stream now first in line: what it wrote while waiting goes out */
    if ((r = c->qhead) && r->sse && r->resp.len) {
        if (host->buf_append(&c->out, r->resp.data, r->resp.len)) c->close_after = 1;
        r->resp.len = 0;
        moved = 1;
    }
    if (moved) th_mark_dirty(c);
}

/* ---- closing ---------------------------------------------------------------- */

static void conn_free(th_conn *c) {
    th_worker_state *ws = c->ws;
    const mcpg_host *host = ws->mod->host;
    if (c->dirty) { /* closed after being marked this turn: unlink */
        th_conn **pp = &ws->dirty;
        while (*pp && *pp != c) pp = &(*pp)->dirty_next;
        if (*pp) *pp = c->dirty_next;
    }
    if (c->cur) th_req_put(ws, c->cur);
    while (c->qhead) {
        th_req *r = c->qhead;
        c->qhead = r->next;
        ws->mod->wire->request_dropped(ws, r);
        th_req_put(ws, r);
    }
    host->buf_free(&c->out);
    host->buf_free(&c->wbuf);
    host->buf_free(&c->saved);
    th_tls_conn_free(host, &c->tls);
    if (c->prev) c->prev->next = c->next;
    else ws->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    ws->nconns--;
    th_metric_add(ws, ws->mod->m_conns, -1);
    host->free(c);
    th_worker_maybe_stop(ws);
}

/* At exit, after the kernel has ended the loops: a connection still open
 * (the drain deadline passed) can no longer be called back, so it is freed
 * as it stands. Its unanswered calls belong to the kernel. */
void th_conn_free_abandoned(th_conn *c) {
    c->ws->draining = 0; /* its handles went with the loop: nothing to close */
    conn_free(c);
}

void th_conn_maybe_free(th_conn *c) {
    if (c->handle_closed && c->inflight == 0) conn_free(c);
}

int th_conn_answer_back(th_conn *c, th_req *r) {
    c->inflight--;
    if (!c->closing) return 1;
    r->state = TH_REQ_DONE;
    th_conn_maybe_free(c);
    return 0;
}

static void on_close(uv_handle_t *h) {
    th_conn *c = h->data;
    c->handle_closed = 1;
    th_conn_maybe_free(c);
}

/* Close now. Calls still in flight are cancelled (a closed stream cancels
 * the call); the struct stays until each has completed. */
void th_conn_close(th_conn *c) {
    if (c->closing) return;
    c->closing = 1;
    c->reading = 0;
    c->ws->mod->wire->conn_closing(c); /* resumable calls carry on without it */
    for (th_req *r = c->qhead; r; r = r->next)
        if (r->state == TH_REQ_INFLIGHT && r->call) c->ws->mod->host->call_cancel(r->call);
    /* At shutdown past its drain deadline the kernel closes every handle on
     * the loop itself (no callback): then the struct is simply left behind. */
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    th_conn *c = req->handle->data;
    if (status < 0) th_conn_close(c); /* also UV_ECANCELED once closing: a no-op */
}

/* Everything is answered and written: send FIN, then keep reading (and
 * discarding) until the peer closes. Closing with unread input would make
 * the kernel send RST, which can destroy the last response in flight. */
static void start_linger(th_conn *c) {
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shutdown)) {
        th_conn_close(c);
        return;
    }
    c->lingering = 1;
    c->last_ms = uv_now(c->ws->loop);
    update_reading(c);
}

static void flush(th_conn *c);

static void maybe_finish(th_conn *c) {
    if (c->closing || c->lingering || !c->close_after) return;
    if (c->qhead || c->out.len || c->writing) return;
    if (c->tls.ssl && th_tls_bye(c)) { /* close_notify (or an alert) before the FIN */
        flush(c);
        if (c->closing || c->writing || c->out.len) return; /* on_write comes back here */
    }
    start_linger(c);
}

/* ---- writing ------------------------------------------------------------------ */

/* Bytes of this connection's answers the peer has not taken yet: libuv's
 * queue plus, on Linux, the socket's send queue (SIOCOUTQ: not yet
 * acknowledged). libuv's queue alone moves only at writable events, which
 * come once a large part of the send buffer has drained: a reader draining
 * a large answer steadily can go longer than the idle timeout without one. */
static size_t unsent_bytes(th_conn *c) {
    size_t q = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
#ifdef SIOCOUTQ
    uv_os_fd_t fd;
    int outq = 0;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 && ioctl(fd, SIOCOUTQ, &outq) == 0 && outq > 0)
        q += (size_t)outq;
#endif
    return q;
}

static void on_write(uv_write_t *req, int status) {
    th_conn *c = req->handle->data;
    c->writing = 0;
    c->wbuf.len = 0;
    if (c->closing) return;
    if (status < 0) {
        th_conn_close(c);
        return;
    }
    c->last_ms = uv_now(c->ws->loop);
    c->wq_seen = unsent_bytes(c); /* what the socket still holds: see th_conn_sweep */
    th_mark_dirty(c); /* more may be queued; reading may resume */
}

/* One write for everything answered so far: try it at once, hand the rest
 * to libuv, and keep collecting new answers in the other buffer. */
static void flush(th_conn *c) {
    if (c->closing || c->writing) return;
    if (c->tls.ssl && th_tls_seal(c)) {
        th_conn_close(c);
        return;
    }
    if (!c->out.len) return;
    uv_buf_t b = uv_buf_init(c->out.data, (unsigned)c->out.len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n >= 0 && (size_t)n == c->out.len) {
        c->out.len = 0;
        c->last_ms = uv_now(c->ws->loop);
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        th_conn_close(c);
        return;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    mcpg_buf t = c->wbuf;
    c->wbuf = c->out;
    c->out = t;
    c->out.len = 0;
    b = uv_buf_init(c->wbuf.data + done, (unsigned)(c->wbuf.len - done));
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write)) {
        th_conn_close(c);
        return;
    }
    c->writing = 1;
    c->wq_seen = unsent_bytes(c);
}

/* ---- reading ------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    th_conn *c = h->data;
    (void)suggested;
    *buf = uv_buf_init(c->ws->rbuf, TH_READ_BUF);
}

void th_conn_peer_closed(th_conn *c) {
    if (!c->writing && (!c->tls.ssl || !th_tls_seal(c)) && c->out.len) {
        uv_buf_t b = uv_buf_init(c->out.data, (unsigned)c->out.len);
        (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    }
    th_conn_close(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    th_conn *c = s->data;
    if (nread == 0 || c->closing) return;
    if (nread < 0) { /* EOF or error: answer what is ready, cancel the rest */
        th_conn_peer_closed(c);
        return;
    }
    /* discarding until the peer closes, for at most TH_LINGER_MS from
     * start_linger: input must not extend it (a client that kept sending,
     * e.g. the rest of a body refused with 413, held the connection open
     * and the loop busy for as long as it liked) */
    if (c->lingering) return;
    c->last_ms = uv_now(c->ws->loop);
    if (c->tls.ssl) th_tls_input(c, buf->base, (size_t)nread);
    else th_conn_feed(c, buf->base, (size_t)nread);
    update_reading(c);
    if (c->out.len || c->close_after) th_mark_dirty(c);
}

static void update_reading(th_conn *c) {
    if (c->closing) return;
    int want = c->lingering || (!c->paused && th_conn_can_take_more(c));
    if (want && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read)) {
            th_conn_close(c);
            return;
        }
        c->reading = 1;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = 0;
    }
}

/* Unpause the parser once the connection can take more, and parse what was
 * kept. Never called from inside llhttp_execute (see th_conn_service). */
static void resume(th_conn *c) {
    if (!c->paused || c->closing || c->in_execute || !th_conn_can_take_more(c)) return;
    th_conn_parse_saved(c);
    if (c->tls.ssl) th_tls_pump(c); /* records that arrived with the ones parsed */
}

/* Once per loop turn for each connection that changed: parse what waited,
 * write what is answered, close when done, read again when there is room. */
void th_conn_service(th_conn *c) {
    if (c->closing) return;
    if (c->handover) {
        if (c->qhead == c->handover && !c->out.len && !c->writing) {
            c->ws->mod->wire->conn_handover(c);
            return;
        }
        flush(c); /* the answers before it go first */
        return;
    }
    resume(c);
    flush(c);
    /* A flush that wrote everything at once makes room a paused parser is
     * waiting for, and nothing else would wake this connection: parse and
     * write again (a few rounds per turn, then the next turn, for fairness). */
    for (int round = 0; c->paused && !c->closing && th_conn_can_take_more(c); round++) {
        if (round == 8) {
            /* Not th_mark_dirty(): c is still marked while serviced, so that
             * would be a no-op and the paused connection would never be
             * serviced again (a stall). on_prepare requeues it. */
            c->again = 1;
            break;
        }
        resume(c);
        flush(c);
    }
    maybe_finish(c);
    update_reading(c);
    /* a connection that went quiet gives back an outsized output buffer;
     * both of them: after an answer written through uv_write the large one
     * is wbuf (the buffers swap in flush), which was kept for the life of
     * the connection */
    if (!c->out.len && c->out.cap > TH_CONN_KEEP_CAP) c->ws->mod->host->buf_free(&c->out);
    if (!c->writing && c->wbuf.cap > TH_CONN_KEEP_CAP) c->ws->mod->host->buf_free(&c->wbuf);
}

/* ---- adopt, sweep, drain ------------------------------------------------------- */

/* The address the client reached: a loopback one means the client runs on
 * this machine (a browser page too), whatever the listener was bound to. */
static int local_is_loopback(uv_tcp_t *t) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getsockname(t, (struct sockaddr *)&ss, &len)) return 1; /* unknown: the strict default */
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a)) return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 1; /* a unix socket: local */
}

/* The client's address, once: every call of the connection names it. */
static void note_peer(th_conn *c) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
        c->peer_len = (uint8_t)th_peer_format((struct sockaddr *)&ss, c->peer, sizeof c->peer);
}

/* A connection's TLS: the one it had on its old loop, or a new handshake. */
static int tls_begin(th_conn *c, th_tls_conn *carry) {
    if (carry && carry->ssl) {
        c->tls = *carry;
        memset(carry, 0, sizeof *carry);
        return 0;
    }
    if (!c->ws->mod->tls_ctx) return 0;
    c->tls.ssl = th_tls_accept(c->ws->mod);
    return c->tls.ssl ? 0 : MCPG_ENOMEM;
}

/* A failed adopt gives a carried TLS state back to its caller; a new one
 * is freed. */
static void tls_undo(th_conn *c, th_tls_conn *carry) {
    if (carry && !carry->ssl) *carry = c->tls;
    else th_tls_conn_free(c->ws->mod->host, &c->tls);
    memset(&c->tls, 0, sizeof c->tls);
}

int th_conn_adopt(th_worker_state *ws, int fd, th_tls_conn *carry, th_conn **c_out) {
    const mcpg_host *host = ws->mod->host;
    th_conn *c = host->calloc(1, sizeof *c);
    if (c_out) *c_out = NULL;
    if (!c) return MCPG_ENOMEM;
    c->ws = ws;
    if (tls_begin(c, carry)) {
        host->free(c);
        return MCPG_ENOMEM;
    }
    if (uv_tcp_init(ws->loop, &c->tcp)) {
        tls_undo(c, carry);
        host->free(c);
        return MCPG_EIO;
    }
    c->tcp.data = c;
    c->next = ws->conns;
    if (ws->conns) ws->conns->prev = c;
    ws->conns = c;
    ws->nconns++;
    if (ws->nconns > ws->nconns_peak) ws->nconns_peak = ws->nconns;
    th_metric_add(ws, ws->mod->m_conns, 1);
    if (uv_tcp_open(&c->tcp, fd)) {
        /* the handle never took the fd: the kernel closes it on our error */
        tls_undo(c, carry);
        th_conn_close(c);
        return MCPG_EIO;
    }
    (void)uv_tcp_nodelay(&c->tcp, 1);
    c->loopback = (uint8_t)local_is_loopback(&c->tcp);
    note_peer(c);
    c->accepted_ms = uv_now(ws->loop);
    th_conn_parser_init(c);
    c->last_ms = uv_now(ws->loop);
    update_reading(c);
    if (c_out) *c_out = c;
    return 0;
}

/* ---- refusing a connection ------------------------------------------------------ */

static const char k_full_body[] =
    "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,\"message\":"
    "\"Too many connections (gateway.server.max_connections_per_worker): retry later\"}}";
static const char k_draining_body[] =
    "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,\"message\":"
    "\"The gateway is shutting down: retry later\"}}";

/* Refusing must cost less than serving, or a flood of connections beyond the
 * cap would still take the loop: no connection struct, no parser, no timer;
 * the answer is fixed and written before the client's request is read (it
 * does not depend on it). A fresh socket's send buffer is empty, so one
 * non-blocking send takes the whole answer; if it does not, the client just
 * sees the close. Then the FIN, and what the client already sent is read
 * off: a close with unread input sends a reset, which can destroy the
 * answer before the client reads it. Over TLS nothing cheap can be said (a
 * handshake first): the socket is only closed. */
void th_conn_refuse(th_worker_state *ws, int fd, th_refusal why) {
    if (th_tls_enabled(ws->mod->cfg)) return;
    const char *body = why == TH_REFUSE_FULL ? k_full_body : k_draining_body;
    size_t blen = why == TH_REFUSE_FULL ? sizeof k_full_body - 1 : sizeof k_draining_body - 1;
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                     "Retry-After: 1\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     blen, body);
    if (n > 0 && (size_t)n < sizeof msg)
        (void)send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)shutdown(fd, SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {
    }
}

void th_conn_sweep(th_worker_state *ws, uint64_t now) {
    uint64_t idle = (uint64_t)ws->mod->cfg->idle_timeout_ms;
    uint64_t header = (uint64_t)ws->mod->cfg->header_timeout_ms;
    uint64_t handshake = (uint64_t)ws->mod->cfg->tls_handshake_timeout_ms;
    for (th_conn *c = ws->conns, *next; c; c = next) {
        next = c->next; /* closing never frees synchronously */
        if (c->closing) continue;
        if (c->lingering) {
            if (now - c->last_ms >= TH_LINGER_MS) th_conn_close(c);
            continue;
        }
        if (c->tls.ssl && !c->tls.ready) { /* a handshake: its own deadline, nothing to answer */
            if (now - c->accepted_ms >= handshake) th_conn_close(c);
            continue;
        }
        if (c->inflight || c->nstreams) continue; /* the kernel times calls out; streams live */
        /* a request must arrive whole within the idle timeout of its first
         * byte, and its header section within the (shorter) header timeout,
         * so trickling bytes cannot hold a connection forever: a slowloris
         * costs a slot for seconds, not a minute */
        uint64_t since = c->cur ? c->cur_start_ms : c->last_ms;
        uint64_t limit = c->cur && !c->cur->headers_done && header < idle ? header : idle;
        if (now - since < limit) continue;
        /* An answer still on its way to a slow reader is traffic, not
         * idleness: a uv_write's callback comes only at its end, and the
         * socket's send buffer drains after that. Progress is the unsent
         * count having moved since the last look; a reader that stops is
         * still closed, one reading steadily never is, however long the
         * answer outlasts the idle timeout. The count falling
         * to zero is progress too: idleness starts when the peer has taken
         * the last byte, not at the look before. */
        if (!c->cur) {
            size_t q = unsent_bytes(c);
            if (q != c->wq_seen) {
                c->wq_seen = q;
                c->last_ms = now;
                continue;
            }
        }
        th_conn_close(c);
    }
}

/* An events/stream call waits for nothing but its client: at a drain it is
 * ended now (the events module answers its final result), as a listening
 * stream is, rather than holding the drain to its deadline. */
static void end_event_streams(th_conn *c) {
    for (th_req *r = c->qhead; r; r = r->next)
        if (r->call && r->desc.method_len == 13 && !memcmp(r->desc.method, "events/stream", 13))
            c->ws->mod->host->call_cancel(r->call);
}

void th_conn_drain(th_conn *c, int force) {
    if (c->closing) return;
    c->ws->mod->wire->conn_draining(c); /* a listening stream ends with its result */
    end_event_streams(c);
    if (force || (!c->qhead && !c->out.len && !c->writing)) {
        th_conn_close(c);
        return;
    }
    c->close_after = 1;
    update_reading(c);
    th_mark_dirty(c);
}
