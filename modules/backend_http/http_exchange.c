/* backend_http: send a call's request with upclient (a kept-alive
 * connection of the loop's pool; a GET, PUT or DELETE sent again once when
 * a kept connection turns out closed), collect the body up to the tool's
 * cap, and map the answer or the failure to the call's result. */
#define _GNU_SOURCE
#include "http_exchange.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXCERPT_MAX 200 /* bytes of an error body quoted in the message */
#define CHALLENGE_MAX 1024 /* bytes of an upstream's WWW-Authenticate passed on */

enum { WHY_NONE, WHY_TIMEOUT, WHY_CANCEL };

struct http_exchange {
    const mcpg_host *h;
    mcpg_instance *self;
    http_upstreams *ups;
    upcred *cred;        /* NULL: static */
    upcred_wait wait;
    int cred_pending;    /* its notify has not run yet: x lives until it has */
    mcpg_worker *worker; /* the call's: where the notify hops to */
    char *www;           /* a 401's WWW-Authenticate */
    const http_tool *t;
    mcpg_call *call; /* NULL once answered */
    void **slot;
    http_request rq;
    mcpg_post post;
    mcpg_timer *timer;
    up_req *r;       /* while upclient has it */
    char *body;
    size_t blen;
    int status, over, why;
};

/* ------------------------------------------------------------------ */
/* answering                                                           */

static void x_free(http_exchange *x) {
    upcred_wait_clear(&x->wait);
    free(x->www);
    http_request_free(&x->rq);
    free(x->body);
    free(x);
}

/* The request's client span ends (a second end, after fail's, is ignored). */
static void trace_end(http_exchange *x, const char *error) {
    if (x->rq.trace_span) x->h->call_trace_upstream_end(x->call, x->rq.trace_span, x->status, error);
}

static void finish(http_exchange *x, mcpg_status st) {
    trace_end(x, NULL);
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
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    trace_end(x, msg);
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
/* The upstream refused the credential the gateway brokered: the token goes
 * from the cache, and the client is told with the upstream's challenge. */
static void refused(http_exchange *x) {
    const mcpg_host *h = x->h;
    const char *name = h->instance_name(x->self);
    upcred_refused(x->cred, &x->wait);
    mcpg_buf data = {0};
    upcred_challenge_data(h, x->call, name, x->status, x->www, x->www ? strlen(x->www) : 0, &data);
    char msg[200];
    snprintf(msg, sizeof msg, "%s: the upstream refused the credentials (HTTP %d)", name,
             x->status);
    trace_end(x, msg);
    h->call_error(x->call, MCPG_RPC_SERVER_ERROR, msg, data.data);
    mcpg_buf_free(&data);
    finish(x, MCPG_DENY);
}

static void answer(http_exchange *x) {
    const mcpg_host *h = x->h;
    if (x->status == 401 && x->cred) return refused(x);
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

/* A failure, named for the tool and what the client can act on. */
static void failed(http_exchange *x, int err, const char *detail) {
    const char *tool = x->t->name, *up = http_upstream_authority(x->ups, x->t->upstream);
    if (x->over)
        return fail(x, "%s: response body exceeds %lld bytes", tool, (long long)x->t->max_response_bytes);
    if (x->why == WHY_TIMEOUT)
        return fail(x, "%s: timed out after %lld ms", tool, (long long)x->t->timeout_ms);
    if (x->why == WHY_CANCEL) return fail(x, "request cancelled");
    switch (err) {
    case UP_ECANCEL: return fail(x, "%s: the gateway is stopping", tool);
    case UP_ETLS: return fail(x, "%s: TLS with %s failed: %s", tool, up, detail);
    case UP_EPROTO: return fail(x, "%s: malformed HTTP response from the upstream (%s)", tool, detail);
    case UP_EFULL:
        return fail(x, "%s: too many calls waiting for a connection to %s", tool, up);
    case UP_ECLOSED:
    case UV_ECONNRESET:
    case UV_EPIPE: return fail(x, "%s: upstream closed the connection (%s)", tool, detail);
    default: return fail(x, "%s: upstream unreachable (%s)", tool, detail);
    }
}

/* ------------------------------------------------------------------ */
/* upclient's callbacks                                                */

static int on_head(void *arg, int status, const up_header *hd, size_t n) {
    http_exchange *x = arg;
    x->status = status;
    const up_header *www = status == 401 ? up_header_find(hd, n, "www-authenticate") : NULL;
    size_t keep = www && www->value_len < CHALLENGE_MAX ? www->value_len : CHALLENGE_MAX;
    if (www && x->cred) x->www = strndup(www->value, keep);
    return 0;
}

static int on_body(void *arg, const char *p, size_t n) {
    http_exchange *x = arg;
    if ((int64_t)(x->blen + n) > x->t->max_response_bytes) return x->over = 1;
    char *nb = realloc(x->body, x->blen + n + 1);
    if (!nb) return 1;
    memcpy(nb + x->blen, p, n);
    x->blen += n;
    nb[x->blen] = '\0';
    x->body = nb;
    return 0;
}

static void on_done(void *arg, int err) {
    http_exchange *x = arg;
    up_req *r = x->r;
    x->r = NULL;
    if (err == 0) return answer(x);
    char detail[256];
    snprintf(detail, sizeof detail, "%s", up_req_error_detail(r));
    failed(x, err, detail);
}

static const up_callbacks callbacks = {on_head, on_body, on_done};

/* ------------------------------------------------------------------ */
/* the exchange                                                        */

http_exchange *http_exchange_new(const mcpg_host *h, mcpg_instance *self, http_upstreams *u,
                                 upcred *cred, const http_tool *t, mcpg_call *call,
                                 http_request *rq) {
    http_exchange *x = calloc(1, sizeof *x);
    if (!x) {
        http_request_free(rq);
        h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
        return NULL;
    }
    *x = (http_exchange){.h = h, .self = self, .ups = u, .cred = cred, .t = t,
                         .call = call, .slot = h->call_slot(call, self), .rq = *rq};
    *rq = (http_request){0};
    return x;
}

/* The call is answered while its credential is still being fetched: x
 * stays until the fetch's notify has run (cred_posted frees it then). */
static void answer_while_fetching(http_exchange *x, const char *msg) {
    if (upcred_cancel(x->cred, &x->wait)) {
        x->cred_pending = 0;
        return fail(x, "%s", msg);
    }
    trace_end(x, msg);
    x->h->call_error(x->call, MCPG_RPC_SERVER_ERROR, msg, NULL);
    if (x->timer) x->h->timer_stop(x->timer);
    x->timer = NULL;
    if (x->slot) *x->slot = NULL;
    mcpg_call *call = x->call;
    x->call = NULL;
    x->h->call_resume(call, MCPG_DENY);
}

static void on_timeout(void *arg) {
    http_exchange *x = arg;
    x->why = WHY_TIMEOUT;
    if (x->r) up_req_abort(x->r); /* its on_done answers */
    else if (x->cred_pending) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s: timed out after %lld ms waiting for the upstream's token",
                 x->t->name, (long long)x->t->timeout_ms);
        answer_while_fetching(x, msg);
    }
}

static void send_request(http_exchange *x) {
    const mcpg_host *h = x->h;
    up_pool *p = http_upstreams_pool(x->ups, h->worker_uv_loop(h->call_worker(x->call)),
                                     x->t->upstream);
    if (!p) return fail(x, "%s: out of memory", x->t->name);
    mcpg_buf hd = {0};
    if (x->wait.auth_line) {
        mcpg_buf_puts(&hd, x->rq.headers);
        mcpg_buf_puts(&hd, x->wait.auth_line);
    }
    x->r = up_send(p, x->t->method, x->rq.target, hd.data ? hd.data : x->rq.headers, x->rq.body,
                   x->rq.body_len, x->t->idempotent, &callbacks, x);
    if (hd.data) explicit_bzero(hd.data, hd.len); /* upclient copied it */
    mcpg_buf_free(&hd);
    if (!x->r) fail(x, "%s: out of memory", x->t->name);
}

/* The credential could not be had: the call fails closed, nothing sent. */
static void cred_failed(http_exchange *x) {
    trace_end(x, x->wait.error);
    x->h->call_error(x->call, MCPG_RPC_SERVER_ERROR, x->wait.error, x->wait.error_data);
    finish(x, MCPG_DENY);
}

/* On the call's loop, once the token endpoint answered. */
static void cred_posted(void *arg) {
    http_exchange *x = arg;
    x->cred_pending = 0;
    if (!x->call) return x_free(x); /* answered meanwhile (timeout, cancel) */
    if (x->wait.failed) return cred_failed(x);
    send_request(x);
}

/* From the thread that got the token. */
static void cred_notify(upcred_wait *w) {
    http_exchange *x = w->arg;
    x->post = (mcpg_post){.fn = cred_posted, .arg = x};
    /* fails only once the worker has stopped, which ended the call */
    (void)x->h->worker_post(x->worker, &x->post);
}

void http_exchange_start(http_exchange *x) {
    const mcpg_host *h = x->h;
    mcpg_worker *w = h->call_worker(x->call);
    if (x->slot) *x->slot = x;
    if (h->timer_start(x->self, w, (uint64_t)x->t->timeout_ms, 0, on_timeout, x, &x->timer))
        return fail(x, "%s: cannot start its timer", x->t->name);
    if (x->cred) {
        x->worker = w;
        x->wait = (upcred_wait){.notify = cred_notify, .arg = x};
        x->cred_pending = 1;
        int rc = upcred_begin(x->cred, x->call, h->worker_uv_loop(w), &x->wait);
        if (rc == UPCRED_PENDING) return; /* cred_notify may have run already: posted */
        x->cred_pending = 0;
        if (rc == UPCRED_FAILED) return cred_failed(x);
    }
    send_request(x);
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
    if (x->r) {
        x->why = WHY_CANCEL;
        return up_req_abort(x->r); /* its on_done answers */
    }
    if (x->cred_pending) return answer_while_fetching(x, "request cancelled");
    /* posted, not started: answer now, posted() frees it */
    if (x->slot) *x->slot = NULL;
    x->h->call_error(x->call, MCPG_RPC_SERVER_ERROR, "request cancelled", NULL);
    mcpg_call *call = x->call;
    x->call = NULL;
    x->h->call_resume(call, MCPG_DENY);
}
