/* backend_http: connect (or reuse a kept-alive connection), write the
 * request, parse the answer with llhttp, and map it to the call's result,
 * all with libuv on the call's loop. Each loop keeps a few idle
 * connections per tool; one the upstream closed while idle is retried once
 * on a fresh connection when the method is idempotent. */
#define _GNU_SOURCE
#include "http_exchange.h"

#include <llhttp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define POOL_IDLE_MAX 8   /* idle connections kept per tool and loop */
#define EXCERPT_MAX 200   /* bytes of an error body quoted in the message */

typedef struct http_pool http_pool;

/* tcp first: the connection's memory is released by free() as the close
 * callback, so a close still completing after the module is unloaded runs
 * no code of ours. */
typedef struct hconn {
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    llhttp_t parser;
    http_exchange *x; /* NULL while idle or once closed */
    int reused;
} hconn;

struct http_pool {
    void *loop;
    size_t tool;
    hconn *idle[POOL_IDLE_MAX];
    size_t n;
    http_pool *next;
};

struct http_pools {
    pthread_mutex_t lock; /* guards the list; a pool is its loop's alone */
    http_pool *head;
};

struct http_exchange {
    const mcpg_host *h;
    mcpg_instance *self;
    http_pools *pools;
    http_pool *pool;
    const http_tool *t;
    size_t index;
    mcpg_call *call; /* NULL once answered */
    void **slot;
    char *req;
    size_t len;
    mcpg_post post;
    mcpg_timer *timer;
    hconn *conn;
    char *body;
    size_t blen;
    int status, headers_done, done, over, got_any, retried;
};

/* ------------------------------------------------------------------ */
/* pools                                                               */

http_pools *http_pools_new(size_t ntools) {
    (void)ntools;
    http_pools *p = calloc(1, sizeof *p);
    if (p) pthread_mutex_init(&p->lock, NULL);
    return p;
}

static http_pool *pool_get(http_pools *ps, void *loop, size_t tool) {
    pthread_mutex_lock(&ps->lock);
    http_pool *p = ps->head;
    while (p && !(p->loop == loop && p->tool == tool)) p = p->next;
    if (!p && (p = calloc(1, sizeof *p))) {
        p->loop = loop;
        p->tool = tool;
        p->next = ps->head;
        ps->head = p;
    }
    pthread_mutex_unlock(&ps->lock);
    return p;
}

static void conn_close(hconn *c) {
    c->x = NULL;
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
}

void http_pools_worker_stop(http_pools *ps, void *loop) {
    pthread_mutex_lock(&ps->lock);
    for (http_pool *p = ps->head; p; p = p->next)
        if (p->loop == loop)
            while (p->n) conn_close(p->idle[--p->n]);
    pthread_mutex_unlock(&ps->lock);
}

void http_pools_free(http_pools *ps) {
    if (!ps) return;
    while (ps->head) {
        http_pool *p = ps->head;
        ps->head = p->next;
        free(p); /* idle connections left here belong to a loop that never stopped */
    }
    pthread_mutex_destroy(&ps->lock);
    free(ps);
}

/* ------------------------------------------------------------------ */
/* answering                                                           */

static void x_free(http_exchange *x) {
    free(x->req);
    free(x->body);
    free(x);
}

static void detach(http_exchange *x, int keep) {
    hconn *c = x->conn;
    x->conn = NULL;
    if (!c) return;
    c->x = NULL;
    if (keep && x->pool && x->pool->n < POOL_IDLE_MAX) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        x->pool->idle[x->pool->n++] = c;
    } else {
        conn_close(c);
    }
}

static void finish(http_exchange *x, mcpg_status st) {
    if (x->timer) x->h->timer_stop(x->timer);
    x->timer = NULL;
    if (x->slot) *x->slot = NULL;
    const mcpg_host *h = x->h;
    mcpg_call *call = x->call;
    x->call = NULL;
    x_free(x);
    h->call_resume(call, st);
}

static void fail(http_exchange *x, const char *fmt, ...) MCPG_PRINTF(2, 3);
static void fail(http_exchange *x, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    detach(x, 0);
    x->h->call_error(x->call, MCPG_RPC_SERVER_ERROR, msg, NULL);
    finish(x, MCPG_DENY);
}

static int is_json_object(const mcpg_host *h, const char *s, size_t n) {
    size_t i = 0;
    while (i < n && strchr(" \t\r\n", s[i])) i++;
    return i < n && s[i] == '{' && h->json_validate(s, n) == 0;
}

static int text_result(const mcpg_host *h, mcpg_buf *b, const char *s, size_t n, int is_error) {
    static const char head[] = "{\"content\":[{\"type\":\"text\",\"text\":";
    int rc = h->buf_append(b, head, sizeof head - 1);
    if (!rc) rc = h->buf_append_json_string(b, s, n);
    if (!rc) rc = h->buf_append(b, "}]", 2);
    if (!rc && is_error) rc = h->buf_append(b, ",\"isError\":true", 15);
    return rc;
}

/* 2xx: the body (and structuredContent when it is an object); else a tool
 * error with the configured message or the status and a body excerpt. */
static void answer(http_exchange *x) {
    const mcpg_host *h = x->h;
    mcpg_buf *b = h->call_result_buf(x->call);
    const char *body = x->body ? x->body : "";
    int rc = b ? 0 : MCPG_ENOMEM;
    if (!rc && x->status >= 200 && x->status < 300) {
        rc = text_result(h, b, body, x->blen, 0);
        if (!rc && is_json_object(h, body, x->blen)) {
            rc = h->buf_append(b, ",\"structuredContent\":", 21);
            if (!rc) rc = h->buf_append(b, body, x->blen);
        }
    } else if (!rc) {
        char msg[400];
        const char *conf = http_tool_error_message(x->t, x->status);
        size_t ex = x->blen > EXCERPT_MAX ? EXCERPT_MAX : x->blen;
        int n = conf ? snprintf(msg, sizeof msg, "%s", conf)
                     : snprintf(msg, sizeof msg, "HTTP %d: %.*s", x->status, (int)ex, body);
        rc = text_result(h, b, msg, n < (int)sizeof msg ? (size_t)n : sizeof msg - 1, 1);
    }
    if (!rc) rc = h->buf_append(b, "}", 1);
    if (rc) h->call_error(x->call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    finish(x, rc ? MCPG_DENY : MCPG_CONTINUE);
}

/* ------------------------------------------------------------------ */
/* parsing the response                                                */

static int on_headers_complete(llhttp_t *p) {
    hconn *c = p->data;
    if (c->x) {
        c->x->status = p->status_code;
        c->x->headers_done = 1;
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n) {
    hconn *c = p->data;
    http_exchange *x = c->x;
    if (!x) return HPE_USER;
    if ((int64_t)(x->blen + n) > x->t->max_response_bytes) {
        x->over = 1;
        return HPE_USER;
    }
    char *nb = realloc(x->body, x->blen + n + 1);
    if (!nb) return HPE_USER;
    memcpy(nb + x->blen, at, n);
    x->blen += n;
    nb[x->blen] = '\0';
    x->body = nb;
    return 0;
}

static int on_message_complete(llhttp_t *p) {
    hconn *c = p->data;
    if (c->x) c->x->done = 1;
    return HPE_PAUSED; /* one answer per request: stop here */
}

static const llhttp_settings_t settings = {
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ------------------------------------------------------------------ */
/* the connection                                                      */

static void acquire(http_exchange *x);

/* The connection ended before an answer: a reused one may have been closed
 * by the upstream while idle; an idempotent request is sent once more. */
static void conn_lost(http_exchange *x, const char *why) {
    hconn *c = x->conn;
    int retry = c && c->reused && !x->got_any && !x->retried && x->t->idempotent;
    detach(x, 0);
    if (retry) {
        x->retried = 1;
        return acquire(x);
    }
    fail(x, "%s: upstream closed the connection (%s)", x->t->name, why);
}

static void on_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *buf) {
    (void)hd;
    (void)hint;
    static _Thread_local char chunk[65536]; /* consumed inside on_read */
    *buf = uv_buf_init(chunk, sizeof chunk);
}

static void parsed(http_exchange *x, llhttp_errno_t err) {
    if (x->over)
        return fail(x, "%s: response body exceeds %lld bytes", x->t->name,
                    (long long)x->t->max_response_bytes);
    if (x->done) {
        int keep = llhttp_should_keep_alive(&x->conn->parser);
        detach(x, keep);
        return answer(x);
    }
    if (err != HPE_OK)
        fail(x, "%s: malformed HTTP response from the upstream (%s)", x->t->name,
             llhttp_errno_name(err));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    hconn *c = s->data;
    http_exchange *x = c->x;
    if (!x) { /* not ours any more */
        if (n < 0) conn_close(c);
        return;
    }
    if (n > 0) {
        x->got_any = 1;
        return parsed(x, llhttp_execute(&c->parser, buf->base, (size_t)n));
    }
    if (n == 0) return;
    if (x->headers_done) { /* a body that ends with the connection */
        llhttp_errno_t err = llhttp_finish(&c->parser);
        if (x->done || err != HPE_OK) return parsed(x, err);
    }
    conn_lost(x, uv_strerror((int)n));
}

static void on_write(uv_write_t *w, int status) {
    hconn *c = w->data;
    if (c->x && status < 0) conn_lost(c->x, uv_strerror(status));
}

static void send_request(http_exchange *x) {
    hconn *c = x->conn;
    llhttp_init(&c->parser, HTTP_RESPONSE, &settings);
    c->parser.data = c;
    free(x->body);
    x->body = NULL;
    x->blen = 0;
    x->status = x->headers_done = x->done = x->got_any = 0;
    uv_buf_t b = uv_buf_init(x->req, (unsigned)x->len);
    c->wreq.data = c;
    int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc == 0) rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc) conn_lost(x, uv_strerror(rc));
}

static void on_connect(uv_connect_t *req, int status) {
    hconn *c = req->data;
    http_exchange *x = c->x;
    if (!x) return; /* cancelled or timed out: already closed */
    if (status < 0) {
        detach(x, 0);
        return fail(x, "%s: upstream unreachable (%s)", x->t->name, uv_strerror(status));
    }
    send_request(x);
}

static void acquire(http_exchange *x) {
    http_pool *p = x->pool;
    if (p && p->n) {
        x->conn = p->idle[--p->n];
        x->conn->x = x;
        x->conn->reused = 1;
        return send_request(x);
    }
    hconn *c = calloc(1, sizeof *c);
    if (!c) return fail(x, "%s: out of memory", x->t->name);
    uv_loop_t *loop = x->h->worker_uv_loop(x->h->call_worker(x->call));
    uv_tcp_init(loop, &c->tcp);
    c->tcp.data = c;
    c->creq.data = c;
    c->x = x;
    x->conn = c;
    uv_tcp_nodelay(&c->tcp, 1);
    int rc = uv_tcp_connect(&c->creq, &c->tcp, (const struct sockaddr *)&x->t->addr, on_connect);
    if (rc) fail(x, "%s: upstream unreachable (%s)", x->t->name, uv_strerror(rc));
}

/* ------------------------------------------------------------------ */
/* the exchange                                                        */

http_exchange *http_exchange_new(const mcpg_host *h, mcpg_instance *self, http_pools *p,
                                 const http_tool *t, size_t index, mcpg_call *call, char *req,
                                 size_t len) {
    http_exchange *x = calloc(1, sizeof *x);
    if (!x) {
        free(req);
        h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
        return NULL;
    }
    *x = (http_exchange){.h = h, .self = self, .pools = p, .t = t, .index = index, .call = call,
                         .slot = h->call_slot(call, self), .req = req, .len = len};
    return x;
}

static void on_timeout(void *arg) {
    http_exchange *x = arg;
    fail(x, "%s: timed out after %lld ms", x->t->name, (long long)x->t->timeout_ms);
}

void http_exchange_start(http_exchange *x) {
    const mcpg_host *h = x->h;
    mcpg_worker *w = h->call_worker(x->call);
    x->pool = pool_get(x->pools, h->worker_uv_loop(w), x->index); /* NULL: no reuse */
    if (x->slot) *x->slot = x;
    if (h->timer_start(x->self, w, (uint64_t)x->t->timeout_ms, 0, on_timeout, x, &x->timer))
        return fail(x, "%s: cannot start its timer", x->t->name);
    acquire(x);
}

static void posted(void *arg) {
    http_exchange *x = arg;
    if (!x->call) return x_free(x); /* cancelled before it started */
    http_exchange_start(x);
}

int http_exchange_post(http_exchange *x) {
    x->post = (mcpg_post){.fn = posted, .arg = x};
    if (x->slot) *x->slot = x;
    int rc = x->h->worker_post(x->h->call_worker(x->call), &x->post);
    if (rc != 0) {
        if (x->slot) *x->slot = NULL;
        x->h->call_error(x->call, MCPG_RPC_SERVER_ERROR, "the gateway is stopping", NULL);
        x_free(x);
    }
    return rc;
}

void http_exchange_cancel(http_exchange *x) {
    if (!x->call) return;
    if (!x->timer && !x->conn) { /* posted, not started: posted() frees it */
        if (x->slot) *x->slot = NULL;
        x->h->call_error(x->call, MCPG_RPC_SERVER_ERROR, "request cancelled", NULL);
        mcpg_call *call = x->call;
        x->call = NULL;
        x->h->call_resume(call, MCPG_DENY);
        return;
    }
    fail(x, "request cancelled");
}
