/* upclient: one loop's connections to one target, and the requests on them.
 *
 * Rules that keep callers and this file simple:
 * - every handle is the first member of its own allocation and libc's free
 *   is its close callback: no code of the module that links this library
 *   runs for a close, so an unload right after the last close is safe;
 * - a connection's memory lives until its socket has closed (a later loop
 *   iteration), so a stack frame still holding it after a callback aborted
 *   its request (or closed the pool) is safe; its TLS state and header
 *   buffer go at uv_close, and no frame touches them after a callback;
 *   a request leaves its connection (detach) before its on_done runs, and
 *   code re-checks c->req after every callback;
 * - nothing reached from up_send calls on_done: a failure there is deferred
 *   to the pool's zero timer;
 * - a connection counts against max_conns from its open to uv_close. */
#define _GNU_SOURCE
#include "up_internal.h"

#include <llhttp.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADERS_MAX 128       /* header lines in one answer */
#define HEAD_BYTES_MAX 65536  /* bytes of header names and values in one answer */
#define READ_CHUNK 65536

enum { R_QUEUED = 1, R_DEFERRED, R_ACTIVE, R_DONE };
enum { C_CONNECT = 0, C_HANDSHAKE, C_READY };

typedef struct up_conn up_conn;

struct up_req {
    up_pool *pool;
    up_req *next, *prev; /* in the queue or the deferred list */
    up_conn *conn;       /* while active */
    up_callbacks cb;
    void *arg;
    char *data;          /* the request's bytes */
    size_t len;
    size_t wipe_len; /* the first of them wiped when let go of: the head, or all */
    int state, err, cb_err, retry_stale, retried, got_any, is_head;
    char detail[256];
};

typedef struct req_list {
    up_req *head, *tail;
    size_t n;
} req_list;

typedef struct hspan {
    size_t name, name_len, value, value_len; /* offsets into hb */
} hspan;

struct up_conn {
    uv_tcp_t tcp;      /* first: free(c) is its close callback */
    uv_timer_t *timer; /* connect (and TLS handshake) timeout; its own allocation */
    uv_connect_t creq;
    up_pool *pool;
    up_conn *next, *prev;
    up_req *req;
    SSL *ssl;
    llhttp_t parser;
    int state, idle, reused, closing;
    int head_done, msg_done, new_field;
    char *hb;
    size_t hlen, hcap, nh;
    hspan hs[HEADERS_MAX];
};

struct up_pool {
    uv_timer_t defer; /* first: free(p) is its close callback */
    uv_loop_t *loop;
    const up_target *t;
    unsigned max_conns, idle_max, queue_max;
    unsigned nconns, nidle;
    up_conn *conns;
    req_list queue, deferred;
    int closing;
    int wipe_reads;        /* up_pool_wipe_reads */
    char rbuf[READ_CHUNK]; /* what uv_read gives, consumed inside on_read */
};

/* ------------------------------------------------------------------ */
/* lists                                                               */

static void list_push(req_list *l, up_req *r) {
    r->next = NULL;
    r->prev = l->tail;
    if (l->tail) l->tail->next = r;
    else l->head = r;
    l->tail = r;
    l->n++;
}

static void list_remove(req_list *l, up_req *r) {
    if (r->prev) r->prev->next = r->next;
    else l->head = r->next;
    if (r->next) r->next->prev = r->prev;
    else l->tail = r->prev;
    r->next = r->prev = NULL;
    l->n--;
}

static up_req *list_pop(req_list *l) {
    up_req *r = l->head;
    if (r) list_remove(l, r);
    return r;
}

/* ------------------------------------------------------------------ */
/* ending requests                                                     */

static void deliver(up_req *r, int err) {
    r->state = R_DONE;
    r->err = err;
    r->cb.on_done(r->arg, err);
    explicit_bzero(r->data, r->wipe_len); /* the head's credentials (and a secret body) */
    free(r->data);
    free(r);
}

static void on_defer(uv_timer_t *tm) {
    up_pool *p = tm->data;
    up_req *r;
    while ((r = list_pop(&p->deferred))) deliver(r, r->err);
}

/* on_done later, from the loop, never from inside the caller's call */
static void defer(up_pool *p, up_req *r, int err) {
    r->state = R_DEFERRED;
    r->err = err;
    list_push(&p->deferred, r);
    uv_timer_start(&p->defer, on_defer, 0, 0);
}

/* ------------------------------------------------------------------ */
/* connections                                                         */

static void attach(up_conn *c, up_req *r) {
    c->req = r;
    r->conn = c;
    r->state = R_ACTIVE;
}

static up_req *detach(up_conn *c) {
    up_req *r = c->req;
    c->req = NULL;
    if (r) r->conn = NULL;
    return r;
}

static void conn_close(up_conn *c) {
    if (c->closing) return;
    up_pool *p = c->pool;
    c->closing = 1;
    if (c->prev) c->prev->next = c->next;
    else p->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    p->nconns--;
    if (c->idle) p->nidle--;
    c->idle = 0;
    SSL_free(c->ssl);
    c->ssl = NULL;
    free(c->hb);
    c->hb = NULL;
    uv_close((uv_handle_t *)c->timer, (uv_close_cb)free);
    uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
}

static void conn_open(up_pool *p, up_req *r);

/* waiting requests take the room a closed connection left */
static void pump(up_pool *p) {
    while (!p->closing && p->queue.n && p->nconns < p->max_conns) conn_open(p, list_pop(&p->queue));
}

static void conn_drop(up_conn *c) {
    up_pool *p = c->pool;
    conn_close(c);
    pump(p);
}

/* the active request fails now (from a loop callback) */
static void req_fail(up_conn *c, int err) {
    up_req *r = detach(c);
    conn_drop(c);
    if (r) deliver(r, err);
}

/* ... or later, when we may be inside up_send */
static void req_fail_later(up_conn *c, int err) {
    up_pool *p = c->pool;
    up_req *r = detach(c);
    conn_drop(c);
    if (r) defer(p, r, err);
}

/* ------------------------------------------------------------------ */
/* writing                                                             */

typedef struct wbuf {
    uv_write_t w;
    up_conn *c;
    size_t n;
    char data[];
} wbuf;

/* A request's bytes the socket did not take at once may hold its head's
 * credentials: wiped as the request's own copy is. */
static void wbuf_free(wbuf *b) {
    explicit_bzero(b->data, b->n);
    free(b);
}

static void conn_ended(up_conn *c, int err);

static void on_written(uv_write_t *w, int status) {
    wbuf *b = (wbuf *)w;
    up_conn *c = b->c;
    wbuf_free(b);
    if (status < 0 && !c->closing) conn_ended(c, status);
}

/* b->data holds n bytes: write them; b is freed on every path */
static int write_buf(up_conn *c, wbuf *b, size_t n) {
    b->c = c;
    b->n = n;
    uv_buf_t buf = uv_buf_init(b->data, (unsigned)n);
    int rc = uv_write(&b->w, (uv_stream_t *)&c->tcp, &buf, 1, on_written);
    if (rc) wbuf_free(b);
    return rc;
}

/* n bytes to the socket: written at once when the socket takes them (the
 * usual case: no copy, no write request, and no epoll_ctl, which a queued
 * write costs when its queue drains), else what is left is copied and
 * queued behind whatever is queued already (uv_try_write refuses while the
 * queue holds anything, so the order holds). */
static int send_bytes(up_conn *c, const char *p, size_t n) {
    uv_buf_t now = uv_buf_init((char *)p, (unsigned)n);
    int w = uv_try_write((uv_stream_t *)&c->tcp, &now, 1);
    if (w < 0 && w != UV_EAGAIN) return w;
    size_t done = w > 0 ? (size_t)w : 0;
    if (done == n) return 0;
    wbuf *b = malloc(sizeof *b + (n - done));
    if (!b) return UV_ENOMEM;
    memcpy(b->data, p + done, n - done);
    return write_buf(c, b, n - done);
}

/* what TLS wrote into its memory BIO goes to the socket */
static int tls_flush(up_conn *c) {
    BIO *wb = SSL_get_wbio(c->ssl);
    size_t n = BIO_ctrl_pending(wb);
    if (n == 0) return 0;
    char stack[16384], *p = n <= sizeof stack ? stack : malloc(n);
    if (!p) return UV_ENOMEM;
    int rc = BIO_read(wb, p, (int)n) == (int)n ? send_bytes(c, p, n) : UP_ETLS;
    if (p != stack) free(p);
    return rc;
}

static const llhttp_settings_t settings;

static void head_reset(up_conn *c) {
    c->head_done = c->msg_done = 0;
    c->nh = c->hlen = 0;
    c->new_field = 1;
}

/* the active request goes out on a ready connection */
static void send_request(up_conn *c) {
    up_req *r = c->req;
    llhttp_init(&c->parser, HTTP_RESPONSE, &settings);
    c->parser.data = c;
    head_reset(c);
    r->got_any = 0;
    int rc;
    if (c->ssl) {
        ERR_clear_error();
        rc = SSL_write(c->ssl, r->data, (int)r->len) == (int)r->len ? tls_flush(c) : UP_ETLS;
    } else {
        rc = send_bytes(c, r->data, r->len);
    }
    if (rc) req_fail_later(c, rc);
}

/* ------------------------------------------------------------------ */
/* parsing the answer                                                  */

static int head_append(up_conn *c, const char *at, size_t n) {
    if (!n) return 0; /* llhttp reports empty spans: hb may be NULL still */
    if (c->hlen + n > HEAD_BYTES_MAX) return -1;
    if (c->hlen + n > c->hcap) {
        size_t cap = c->hcap ? c->hcap : 1024;
        while (cap < c->hlen + n) cap *= 2;
        char *nb = realloc(c->hb, cap);
        if (!nb) return -1;
        c->hb = nb;
        c->hcap = cap;
    }
    memcpy(c->hb + c->hlen, at, n);
    c->hlen += n;
    return 0;
}

static int too_big(up_conn *c) {
    if (c->req) {
        c->req->cb_err = UP_EPROTO;
        snprintf(c->req->detail, sizeof c->req->detail,
                 "the answer's header is over %d lines or %d bytes", HEADERS_MAX, HEAD_BYTES_MAX);
    }
    return HPE_USER;
}

static int on_header_field(llhttp_t *ps, const char *at, size_t n) {
    up_conn *c = ps->data;
    if (c->new_field) {
        if (c->nh == HEADERS_MAX) return too_big(c);
        c->hs[c->nh++] = (hspan){.name = c->hlen};
        c->new_field = 0;
    }
    c->hs[c->nh - 1].name_len += n;
    return head_append(c, at, n) ? too_big(c) : 0;
}

/* llhttp 8 lets a response's header line start with ':' (an empty name);
 * a field name is one token or more (RFC 9110 5.1). Found by
 * tests/fuzz/fuzz_upstream. */
static int nameless_field(up_conn *c) {
    if (c->req) {
        c->req->cb_err = UP_EPROTO;
        snprintf(c->req->detail, sizeof c->req->detail, "malformed HTTP answer: a header line without a name");
    }
    return HPE_USER;
}

static int on_header_field_complete(llhttp_t *ps) {
    up_conn *c = ps->data;
    if (c->nh && !c->hs[c->nh - 1].name_len) return nameless_field(c);
    if (c->nh) c->hs[c->nh - 1].value = c->hlen;
    return 0;
}

static int on_header_value(llhttp_t *ps, const char *at, size_t n) {
    up_conn *c = ps->data;
    if (c->nh == 0) return 0;
    c->hs[c->nh - 1].value_len += n;
    return head_append(c, at, n) ? too_big(c) : 0;
}

static int on_header_value_complete(llhttp_t *ps) {
    ((up_conn *)ps->data)->new_field = 1;
    return 0;
}

static int interim(const llhttp_t *ps) {
    return ps->status_code >= 100 && ps->status_code < 200 && ps->status_code != 101;
}

static int on_headers_complete(llhttp_t *ps) {
    up_conn *c = ps->data;
    up_req *r = c->req;
    if (!r) return -1;
    /* llhttp 8 takes a status code of fewer than three digits, even none
     * ("HTTP/1.1  200 OK" reads as 0); RFC 9112 4 wants exactly three. Such
     * an answer must not reach a caller, which would take it for a success
     * (a status under 300). Found by tests/fuzz/fuzz_upstream. */
    if (ps->status_code < 100) {
        r->cb_err = UP_EPROTO;
        snprintf(r->detail, sizeof r->detail, "malformed HTTP answer: the status code is not three digits");
        return -1;
    }
    if (interim(ps)) { /* 100 Continue and the like: the real answer follows */
        head_reset(c);
        /* A 1xx answer has no body (RFC 9112 6.3), whatever framing it
         * names: llhttp would read one and hand it to on_body before the
         * real answer's head. 1 tells llhttp there is none. Found by
         * tests/fuzz/fuzz_upstream. */
        return 1;
    }
    up_header hv[HEADERS_MAX];
    for (size_t i = 0; i < c->nh; i++)
        hv[i] = (up_header){c->hb + c->hs[i].name, c->hs[i].name_len, c->hb + c->hs[i].value,
                            c->hs[i].value_len};
    c->head_done = 1;
    int rc = r->cb.on_head ? r->cb.on_head(r->arg, ps->status_code, hv, c->nh) : 0;
    if (c->req != r) return -1; /* aborted inside the callback */
    if (rc) {
        r->cb_err = UP_ECANCEL;
        return -1;
    }
    return r->is_head ? 1 : 0; /* a HEAD answer has no body */
}

static int on_body(llhttp_t *ps, const char *at, size_t n) {
    up_conn *c = ps->data;
    up_req *r = c->req;
    if (!r) return HPE_USER;
    if (!r->cb.on_body) return 0;
    int rc = r->cb.on_body(r->arg, at, n);
    if (c->req != r) return HPE_USER;
    if (rc) r->cb_err = UP_ECANCEL;
    return rc ? HPE_USER : 0;
}

static int on_message_complete(llhttp_t *ps) {
    up_conn *c = ps->data;
    if (interim(ps)) return 0;
    c->msg_done = 1;
    return HPE_PAUSED; /* one answer per request */
}

static const llhttp_settings_t settings = {
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ------------------------------------------------------------------ */
/* answers in, connections back                                        */

/* A connection whose answer ended: the next waiting request, the idle
 * list, or closed. */
static void release(up_conn *c, int keep) {
    up_pool *p = c->pool;
    if (!keep || p->closing) return conn_drop(c);
    if (p->queue.n) {
        attach(c, list_pop(&p->queue));
        c->reused = 1;
        return send_request(c);
    }
    if (p->nidle >= p->idle_max) return conn_drop(c);
    c->idle = 1; /* still reading: an upstream close is seen at once */
    p->nidle++;
}

static void req_complete(up_conn *c, int keep) {
    up_req *r = detach(c);
    release(c, keep);
    deliver(r, 0);
}

static void conn_data(up_conn *c, const char *p, size_t n) {
    up_req *r = c->req;
    if (!r) return conn_drop(c); /* bytes nobody asked for */
    r->got_any = 1;
    llhttp_errno_t e = llhttp_execute(&c->parser, p, n);
    if (c->req != r) return; /* a callback aborted it */
    if (r->cb_err) return req_fail(c, r->cb_err);
    if (c->msg_done) {
        int extra = e == HPE_PAUSED && llhttp_get_error_pos(&c->parser) < p + n;
        return req_complete(c, !extra && llhttp_should_keep_alive(&c->parser));
    }
    if (e != HPE_OK) {
        snprintf(r->detail, sizeof r->detail, "malformed HTTP answer: %s (%s)", llhttp_errno_name(e),
                 llhttp_get_error_reason(&c->parser));
        req_fail(c, UP_EPROTO);
    }
}

/* EOF or an error reading or writing */
static void conn_ended(up_conn *c, int err) {
    up_req *r = c->req;
    if (!r) return conn_drop(c); /* an idle one the upstream closed */
    if (c->state == C_HANDSHAKE) {
        snprintf(r->detail, sizeof r->detail, "the upstream closed the connection during the TLS handshake (%s)",
                 err == UV_EOF ? "end of stream" : uv_strerror(err));
        return req_fail(c, UP_ETLS);
    }
    if (c->head_done && err == UV_EOF) { /* a body that ends with the connection */
        llhttp_finish(&c->parser);
        if (c->req != r) return;
        if (c->msg_done) return req_complete(c, 0);
    }
    if (!r->got_any && c->reused && r->retry_stale && !r->retried) {
        up_pool *p = c->pool;
        r->retried = 1; /* the kept connection was stale: once more on a fresh one */
        detach(c);
        conn_close(c);
        conn_open(p, r);
        return pump(p);
    }
    req_fail(c, err == UV_EOF ? UP_ECLOSED : err);
}

static void tls_failed(up_conn *c, int ret) {
    if (c->req) up__tls_describe(c->ssl, ret, c->req->detail, sizeof c->req->detail);
    if (c->req) return req_fail(c, UP_ETLS);
    ERR_clear_error();
    conn_drop(c);
}

static void tls_handshake(up_conn *c) {
    ERR_clear_error();
    int rc = SSL_do_handshake(c->ssl);
    int frc = tls_flush(c);
    if (rc == 1) {
        if (frc) return req_fail(c, frc);
        c->state = C_READY;
        uv_timer_stop(c->timer);
        return send_request(c);
    }
    if (SSL_get_error(c->ssl, rc) == SSL_ERROR_WANT_READ && !frc) return;
    tls_failed(c, rc);
}

static void tls_read(up_conn *c) {
    char tmp[16384];
    for (;;) {
        ERR_clear_error();
        int k = SSL_read(c->ssl, tmp, sizeof tmp);
        if (k > 0) {
            conn_data(c, tmp, (size_t)k);
            if (c->pool->wipe_reads) explicit_bzero(tmp, (size_t)k);
            if (c->closing) return;
            continue;
        }
        int e = SSL_get_error(c->ssl, k);
        if (e == SSL_ERROR_WANT_READ) break;
        if (e == SSL_ERROR_ZERO_RETURN) return conn_ended(c, UV_EOF); /* close_notify */
        return tls_failed(c, k);
    }
    int rc = tls_flush(c); /* a key update may want an answer */
    if (rc) conn_ended(c, rc);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    up_conn *c = h->data;
    *buf = uv_buf_init(c->pool->rbuf, sizeof c->pool->rbuf);
}

void up_pool_wipe_reads(up_pool *p) { p->wipe_reads = 1; }

static void read_bytes(up_conn *c, ssize_t n, const uv_buf_t *buf);

/* The pool (and so its buffer) outlives this callback: it is freed from a
 * close callback, on a later turn of the loop. */
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    up_conn *c = s->data;
    up_pool *p = c->pool;
    read_bytes(c, n, buf);
    if (p->wipe_reads && n > 0) explicit_bzero(buf->base, (size_t)n);
}

static void read_bytes(up_conn *c, ssize_t n, const uv_buf_t *buf) {
    if (c->closing || n == 0) return;
    if (n < 0) return conn_ended(c, (int)n);
    if (!c->ssl) return conn_data(c, buf->base, (size_t)n);
    if (BIO_write(SSL_get_rbio(c->ssl), buf->base, (int)n) != (int)n) return conn_ended(c, UV_ENOMEM);
    if (c->state == C_HANDSHAKE) {
        tls_handshake(c);
        if (c->closing || c->state != C_READY) return;
    }
    tls_read(c);
}

/* ------------------------------------------------------------------ */
/* opening                                                             */

static void on_connect_timeout(uv_timer_t *tm) {
    up_conn *c = tm->data;
    if (c->closing) return;
    if (c->req)
        snprintf(c->req->detail, sizeof c->req->detail, "connecting to %s timed out after %llu ms",
                 c->pool->t->authority, (unsigned long long)c->pool->t->connect_timeout_ms);
    req_fail(c, UV_ETIMEDOUT);
}

static void on_connect(uv_connect_t *creq, int status) {
    up_conn *c = creq->data;
    if (c->closing) return;
    if (status < 0) return req_fail(c, status);
    const up_target *t = c->pool->t;
    uv_tcp_nodelay(&c->tcp, 1);
    if (t->tls && !(c->ssl = up__tls_new(t))) return req_fail(c, UV_ENOMEM);
    c->state = c->ssl ? C_HANDSHAKE : C_READY;
    if (!c->ssl) uv_timer_stop(c->timer);
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc) return req_fail(c, rc);
    if (c->ssl) tls_handshake(c);
    else send_request(c);
}

static void conn_open(up_pool *p, up_req *r) {
    up_conn *c = calloc(1, sizeof *c);
    if (c && !(c->timer = malloc(sizeof *c->timer))) {
        free(c);
        c = NULL;
    }
    if (!c) return defer(p, r, UV_ENOMEM);
    uv_tcp_init(p->loop, &c->tcp);
    uv_timer_init(p->loop, c->timer);
    c->tcp.data = c->timer->data = c->creq.data = c;
    c->pool = p;
    c->next = p->conns;
    if (p->conns) p->conns->prev = c;
    p->conns = c;
    p->nconns++;
    attach(c, r);
    /* The loop's clock is refreshed only when it turns: after long work in
     * this turn (or an idle loop) it is behind, and the timeout would end early. */
    uv_update_time(p->loop);
    if (p->t->connect_timeout_ms)
        uv_timer_start(c->timer, on_connect_timeout, p->t->connect_timeout_ms, 0);
    int rc = uv_tcp_connect(&c->creq, &c->tcp, (const struct sockaddr *)&p->t->addr, on_connect);
    if (rc) req_fail_later(c, rc);
}

static void dispatch(up_pool *p, up_req *r) {
    for (up_conn *c = p->conns; c; c = c->next)
        if (c->idle) {
            c->idle = 0;
            p->nidle--;
            attach(c, r);
            c->reused = 1;
            return send_request(c);
        }
    if (p->nconns < p->max_conns) return conn_open(p, r);
    if (p->queue.n < p->queue_max) {
        r->state = R_QUEUED;
        return list_push(&p->queue, r);
    }
    defer(p, r, UP_EFULL);
}

/* ------------------------------------------------------------------ */
/* the API                                                             */

up_pool *up_pool_new(uv_loop_t *loop, const up_target *t, unsigned max_conns, unsigned idle_max,
                     unsigned queue_max) {
    up_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->loop = loop;
    p->t = t;
    p->max_conns = max_conns ? max_conns : 1;
    p->idle_max = idle_max;
    p->queue_max = queue_max;
    uv_timer_init(loop, &p->defer);
    p->defer.data = p;
    return p;
}

void up_pool_close(up_pool *p) {
    if (!p || p->closing) return;
    p->closing = 1;
    up_req *r;
    while ((r = list_pop(&p->queue))) deliver(r, UP_ECANCEL);
    while ((r = list_pop(&p->deferred))) deliver(r, UP_ECANCEL);
    while (p->conns) {
        up_conn *c = p->conns;
        r = detach(c);
        conn_close(c);
        if (r) deliver(r, UP_ECANCEL);
    }
    uv_close((uv_handle_t *)&p->defer, (uv_close_cb)free); /* no connection refers to p now */
}

static int has_body_semantics(const char *method) {
    static const char *const none[] = {"GET", "HEAD", "DELETE", "OPTIONS", "TRACE"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        if (strcmp(method, none[i]) == 0) return 0;
    return 1;
}

/* The request's bytes in one allocation of their size (no buffer grown on
 * the way, which would leave a copy of a credential behind unwiped); the
 * head's length into *head_len. */
static char *request_bytes(const up_pool *p, const char *method, const char *path,
                           const char *headers, const char *body, size_t body_len, size_t *len,
                           size_t *head_len) {
    char cl[48] = "";
    if (body_len || has_body_semantics(method))
        snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", body_len);
    static const char fmt[] = "%s %s HTTP/1.1\r\nHost: %s\r\n%s%s\r\n";
    const char *hs = headers ? headers : "";
    int n = snprintf(NULL, 0, fmt, method, path, p->t->authority, hs, cl);
    char *all = n < 0 ? NULL : malloc((size_t)n + body_len + 1);
    if (!all) return NULL;
    snprintf(all, (size_t)n + 1, fmt, method, path, p->t->authority, hs, cl);
    if (body_len) memcpy(all + n, body, body_len);
    *len = (size_t)n + body_len;
    *head_len = (size_t)n;
    return all;
}

up_req *up_send(up_pool *p, const char *method, const char *path, const char *headers,
                const char *body, size_t body_len, int flags, const up_callbacks *cb, void *arg) {
    if (p->closing) return NULL;
    up_req *r = calloc(1, sizeof *r);
    size_t head_len = 0;
    if (!r) return NULL;
    if (!(r->data = request_bytes(p, method, path, headers, body, body_len, &r->len, &head_len))) {
        free(r);
        return NULL;
    }
    r->wipe_len = flags & UP_SECRET_BODY ? r->len : head_len;
    r->pool = p;
    r->cb = *cb;
    r->arg = arg;
    r->retry_stale = flags & UP_RETRY_STALE;
    r->is_head = strcmp(method, "HEAD") == 0;
    dispatch(p, r);
    return r;
}

void up_req_abort(up_req *r) {
    up_pool *p = r->pool;
    if (r->state == R_QUEUED) {
        list_remove(&p->queue, r);
    } else if (r->state == R_DEFERRED) {
        list_remove(&p->deferred, r);
    } else if (r->state == R_ACTIVE) {
        up_conn *c = r->conn;
        detach(c);
        conn_drop(c); /* never reused mid-answer */
    } else {
        return; /* inside its own on_done: already ending */
    }
    deliver(r, UP_ECANCEL);
}

const char *up_req_error_detail(const up_req *r) {
    return r->detail[0] ? r->detail : up_strerror(r->err);
}
