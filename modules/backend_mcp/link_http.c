/* backend_mcp: the upstream over Streamable HTTP (lib/upclient: keep-alive
 * connections, TLS). Each message is one POST; a request's answer comes as
 * one JSON body or as an SSE stream that may carry the upstream's messages
 * about it first (progress, questions for the client). On the session wire
 * the session id the upstream gives at initialize goes on every POST, and a
 * GET stream carries what belongs to no request (list changes, resource
 * updates). On the stateless wire every POST carries Mcp-Method (and
 * Mcp-Name) headers. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "link_http.h"

#define ERROR_EXCERPT 200
#define GET_RETRY_MS 1000
#define OWN_QUEUE_MAX 1024 /* messages waiting for the gateway's own token */

void link_forget_hx(link_http *l, hx *x) {
    sessions_hx_gone(x);
    for (hx **pp = &l->open; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    if (l->get == x) l->get = NULL;
    if (x->r && x->r->link_ctx == x) x->r->link_ctx = NULL;
    free(x->www);
    mcpg_buf_free(&x->body);
    sse_free(&x->sse_r);
    free(x);
}

static void on_event(void *arg, const char *data, size_t n) {
    hx *x = arg;
    if (n && !sessions_on_message(x, data, n)) sessions_deliver(x, data, n);
}

static int on_head(void *arg, int status, const up_header *h, size_t n) {
    hx *x = arg;
    upstream *up = x->l->base.up;
    x->status = status;
    if (x->r && x->r->pc) x->r->pc->http_status = status;
    const up_header *ct = up_header_find(h, n, "content-type");
    x->sse = ct && ct->value_len >= 17 && strncasecmp(ct->value, "text/event-stream", 17) == 0;
    const up_header *www = status == 401 ? up_header_find(h, n, "www-authenticate") : NULL;
    if (www) x->www = strndup(www->value, www->value_len < 1024 ? www->value_len : 1024);
    sessions_on_head(x, status, h, n);
    const up_header *sid = up_header_find(h, n, "mcp-session-id");
    if (x->is_init && sid && sid->value_len && sid->value_len < 256 && status < 300) {
        free(up->session_id);
        up->session_id = strndup(sid->value, sid->value_len);
    }
    return 0;
}

/* An answer is read only up to max_message_bytes: past it the request is
 * aborted (its connection closed) and said so, whatever the upstream keeps
 * sending. */
static int on_body(void *arg, const char *p, size_t n) {
    hx *x = arg;
    upstream *up = x->l->base.up;
    if (x->sse && x->status < 300) {
        if (sse_feed(&x->sse_r, p, n, on_event, x) == 0) return 0;
        x->too_big = true; /* sse_feed refuses only a line or an event over the cap */
        return -1;
    }
    if (x->body.len + n > (size_t)up->cfg.c->max_message_bytes) {
        x->too_big = true;
        return -1;
    }
    return mcpg_buf_append(&x->body, p, n) ? -1 : 0;
}

/* Why a request's answer did not come whole, in words an operator can act on. */
static void why_unanswered(const hx *x, int err, const char *detail, char *why, size_t cap) {
    const upstream *up = x->l->base.up;
    if (x->too_big)
        snprintf(why, cap, "the answer is over max_message_bytes (%lld bytes)",
                 (long long)up->cfg.c->max_message_bytes);
    else if (x->status >= 300)
        snprintf(why, cap, "HTTP %d: %.*s", x->status,
                 (int)(x->body.len < ERROR_EXCERPT ? x->body.len : ERROR_EXCERPT),
                 x->body.data ? x->body.data : "");
    else if (err == UP_EPROTO)
        snprintf(why, cap, "the answer is not valid HTTP/1.1: %s", detail ? detail : "");
    else
        snprintf(why, cap, "the upstream's answer ended early%s%s", err ? ": " : "",
                 err ? (detail ? detail : up_strerror(err)) : "");
}

static void schedule_get(link_http *l);

/* The spec says 404 for a session the server no longer has; servers also
 * answer 400 naming the session (e.g. after a restart). Either way the
 * gateway starts a new one. */
static bool session_lost(const upstream *up, const hx *x) {
    if (!up->session_id || x->is_init) return false;
    if (x->status == 404) return true;
    return x->status == 400 && x->body.data && strcasestr(x->body.data, "session");
}

/* A call's brokered credential refused by the upstream: the call fails
 * with the challenge (calls_refused), as up_request_failed fails a call. */
static bool refused_credential(upstream *up, hx *x) {
    up_request *r = x->r;
    if (!r || x->status != 401 || !up->cred || r->kind != UR_CALL || !r->pc) return false;
    x->r = NULL;
    r->link_ctx = NULL;
    calls_refused(up, r->pc, x->status, x->www);
    if (!r->parked) up_request_free(up, r);
    return true;
}

static void on_done(void *arg, int err) {
    hx *x = arg;
    link_http *l = x->l;
    upstream *up = l->base.up;
    const char *detail = err && x->req ? up_req_error_detail(x->req) : NULL;
    x->req = NULL;
    if (l->stopped || x->abandoned) {
        link_forget_hx(l, x);
        return;
    }
    /* a body cut short (an error, or over the cap) is never read as a message */
    bool json = !err && !x->sse && x->body.len && x->body.data[0] == '{';
    if (x->is_get) {
        int status = x->status;
        caller_session *cs = x->cs;
        link_forget_hx(l, x);
        if (cs) {
            sessions_get_ended(l, cs, status);
            return;
        }
        if (err && !status) {
            char why[800];
            snprintf(why, sizeof why, "cannot reach %s: %s", l->url, detail ? detail : up_strerror(err));
            up_link_down(up, why);
        } else if (status == 400 || status == 404) {
            up_link_down(up, "the upstream no longer knows the gateway's session");
        } else if (up->state == UP_READY && status != 405) { /* 405: it offers no GET stream */
            schedule_get(l);
        }
        return;
    }
    if (sessions_done(l, x, err)) return;
    /* never reached the upstream; an answer that is not HTTP (a header
     * section past the client's bounds) did reach it: only that request fails */
    if (err && !x->status && err != UP_EPROTO) {
        char why[800];
        snprintf(why, sizeof why, "cannot reach %s: %s", l->url,
                 detail ? detail : up_strerror(err));
        link_forget_hx(l, x);
        up_link_down(up, why);
        return;
    }
    if (session_lost(up, x)) {
        char why[300];
        snprintf(why, sizeof why, "the upstream no longer knows the gateway's session (HTTP %d: %.120s)",
                 x->status, x->body.data ? x->body.data : "");
        link_forget_hx(l, x);
        up_link_down(up, why);
        return;
    }
    if (refused_credential(up, x)) {
        link_forget_hx(l, x);
        return;
    }
    if (json && x->r) sessions_deliver(x, x->body.data, x->body.len); /* may free x->r */
    if (x->r) {
        char why[400];
        why_unanswered(x, err, detail, why, sizeof why);
        up_request *r = x->r;
        x->r = NULL;
        r->link_ctx = NULL;
        up_request_failed(up, r, why);
    }
    link_forget_hx(l, x);
}

static const up_callbacks CALLBACKS = {on_head, on_body, on_done};

/* params.name or params.uri of a request, as Mcp-Name's value: as it is
 * when it is plain visible ASCII, else in the =?base64?...?= form a
 * conforming client sends (a name outside that set is only SHOULD-avoided). */
static void name_value(const char *json, size_t n, const mcpg_json_span *method, mcpg_buf *val) {
    mcpg_json_span params, v;
    const char *key = mcpg_json_string_eq(method, "resources/read", 14) ? "uri" : "name";
    if (!mcpg_json_string_eq(method, "tools/call", 10) &&
        !mcpg_json_string_eq(method, "prompts/get", 11) &&
        !mcpg_json_string_eq(method, "resources/read", 14))
        return;
    if (mcpg_json_object_get(json, n, "params", &params) != 1 ||
        mcpg_json_object_get(params.p, params.n, key, &v) != 1 || v.type != MCPG_JSON_STRING)
        return;
    mcpg_buf text = {0};
    size_t len = 0;
    if (!mcpg_buf_reserve(&text, v.n + 1) && !mcpg_json_string_decode(&v, text.data, v.n + 1, &len))
        (void)mcpg_header_value_encode(text.data, len, val);
    mcpg_buf_free(&text);
}

/* A POST of the stateless wire: its headers mirror the message (also the
 * direct path's, fast.c, from any loop: it reads only the settings). */
void link_http_credential_lines(const upstream *up, const client_call *pc, mcpg_buf *h) {
    if (pc && (pc->auth_line || upcred_per_caller(up->cred))) { /* never the gateway's own */
        mcpg_buf_puts(h, up->cfg.call_header_lines ? up->cfg.call_header_lines : "");
        if (pc->auth_line) mcpg_buf_puts(h, pc->auth_line);
        return;
    }
    mcpg_buf_puts(h, up->cfg.header_lines ? up->cfg.header_lines : "");
}

void link_http_stateless_head(const upstream *up, const client_call *pc, const char *method,
                              size_t method_len, const char *name, size_t name_len, mcpg_buf *h) {
    mcpg_buf_puts(h, "Content-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\n"
                     "MCP-Protocol-Version: " MCP_MODERN_VERSION "\r\nMcp-Method: ");
    mcpg_buf_append(h, method, method_len);
    mcpg_buf_puts(h, "\r\n");
    if (name) {
        mcpg_buf_puts(h, "Mcp-Name: ");
        mcpg_buf_append(h, name, name_len);
        mcpg_buf_puts(h, "\r\n");
    }
    link_http_credential_lines(up, pc, h);
}

void link_http_stateless_headers(const upstream *up, const client_call *pc, const char *json,
                                 size_t n, mcpg_buf *h) {
    mcpg_json_span method;
    if (mcpg_json_object_get(json, n, "method", &method) != 1 || method.type != MCPG_JSON_STRING ||
        method.escaped) {
        link_http_stateless_head(up, pc, "", 0, NULL, 0, h);
        return;
    }
    mcpg_buf name = {0};
    name_value(json, n, &method, &name);
    link_http_stateless_head(up, pc, method.p, method.n, name.len ? name.data : NULL, name.len, h);
    mcpg_buf_free(&name);
}

const up_target *link_http_target(const mcp_link *base) {
    return ((const link_http *)base)->target;
}

/* A call's request carries its client's trace headers. */
static void add_trace(const up_request *r, mcpg_buf *h) {
    if (r && r->pc && r->pc->trace_lines) mcpg_buf_puts(h, r->pc->trace_lines);
}

/* ... and on the stateless wire its tool's Mcp-Param headers (params.c). */
static void add_params(const up_request *r, mcpg_buf *h) {
    if (r && r->pc && r->pc->param_lines) mcpg_buf_puts(h, r->pc->param_lines);
}

static void build_headers(link_http *l, const char *json, size_t n, bool discover,
                          const up_request *r, const char *own_line, mcpg_buf *h) {
    upstream *up = l->base.up;
    add_trace(r, h);
    if (own_line) mcpg_buf_puts(h, own_line);
    if (up->wire == WIRE_STATELESS || discover) {
        add_params(r, h);
        link_http_stateless_headers(up, r ? r->pc : NULL, json, n, h);
        return;
    }
    mcpg_buf_puts(h, "Content-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\n");
    if (up->protocol[0]) {
        mcpg_buf_printf(h, "MCP-Protocol-Version: %s\r\n", up->protocol);
    }
    if (up->session_id) mcpg_buf_printf(h, "Mcp-Session-Id: %s\r\n", up->session_id);
    link_http_credential_lines(up, r ? r->pc : NULL, h);
}

hx *link_hx_open(link_http *l, up_request *r) {
    hx *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->l = l;
    x->r = r;
    x->sse_r.max = (size_t)l->base.up->cfg.c->max_message_bytes;
    x->next = l->open;
    l->open = x;
    if (r) r->link_ctx = x;
    return x;
}

int link_send(link_http *l, hx *x, const char *method, const char *headers, const char *json,
              size_t n) {
    x->req =
        up_send(l->pool, method, up_target_path(l->target), headers, json, n, 0, &CALLBACKS, x);
    if (x->req) return 0;
    link_forget_hx(l, x);
    return MCPG_ENOMEM;
}

int link_post(link_http *l, hx *x, const char *headers, const char *json, size_t n) {
    return link_send(l, x, "POST", headers, json, n);
}

static int send_now(link_http *l, const char *json, size_t n, up_request *r, const char *own_line) {
    hx *x = link_hx_open(l, r);
    if (!x) return MCPG_ENOMEM;
    x->is_init = r && r->kind == UR_INIT;
    x->is_discover = r && r->kind == UR_DISCOVER;
    mcpg_buf h = {0};
    build_headers(l, json, n, x->is_discover, r, own_line, &h);
    int rc = link_post(l, x, h.data, json, n);
    if (h.data) explicit_bzero(h.data, h.len); /* a credential: configured, the call's or own */
    mcpg_buf_free(&h);
    return rc;
}

/* ---- the gateway's own token (client_credentials) ---- */

/* A message the gateway sends for itself (the handshake, lists, answers to
 * the upstream's questions), or a call without a token of its own. */
static bool needs_own_token(const link_http *l, const up_request *r) {
    const upstream *up = l->base.up;
    return up->cfg.cred_mode == UPCRED_CLIENT_CREDENTIALS && !(r && r->pc && r->pc->auth_line);
}

int link_queue_add(queued **head, const char *json, size_t n, up_request *r) {
    queued *q = calloc(1, sizeof *q);
    if (!q || !(q->json = malloc(n))) {
        free(q);
        return MCPG_ENOMEM;
    }
    memcpy(q->json, json, n);
    q->n = n;
    q->r = r;
    queued **pp = head;
    while (*pp) pp = &(*pp)->next;
    *pp = q;
    return 0;
}

int link_queue_drop(queued **head, const up_request *r) {
    for (queued **pp = head; *pp; pp = &(*pp)->next)
        if ((*pp)->r == r) {
            queued *q = *pp;
            *pp = q->next;
            free(q->json);
            free(q);
            return 1;
        }
    return 0;
}

static int enqueue(link_http *l, const char *json, size_t n, up_request *r) {
    if (l->n_queued >= OWN_QUEUE_MAX) return MCPG_EAGAIN;
    int rc = link_queue_add(&l->queue, json, n, r);
    if (!rc) l->n_queued++;
    return rc;
}

static void unqueue(link_http *l, const up_request *r) {
    if (link_queue_drop(&l->queue, r)) l->n_queued--;
}

/* From the thread that got the token: on to the I/O thread. */
static void own_notify(upcred_wait *w) {
    link_http *l = w->arg;
    job *j = calloc(1, sizeof *j);
    if (!j) return;
    j->kind = JOB_CREDENTIAL;
    if (up_post(l->base.up, j) != 0) free(j); /* stopping */
}

/* The token came, or why not: what waited goes, or fails. */
static void http_credential(mcp_link *base) {
    link_http *l = (link_http *)base;
    upstream *up = base->up;
    l->own_pending = false;
    queued *q = l->queue;
    l->queue = NULL;
    l->n_queued = 0;
    while (q) {
        queued *next = q->next;
        if (!l->own.failed && !l->stopped) send_now(l, q->json, q->n, q->r, l->own.auth_line);
        else if (q->r) up_request_failed(up, q->r, l->own.failed ? l->own.error : "stopping");
        free(q->json);
        free(q);
        q = next;
    }
    if (l->own.failed) up_log_said(up, "%s", l->own.error);
    upcred_wait_clear(&l->own);
}

static int send_with_own_token(link_http *l, const char *json, size_t n, up_request *r) {
    upstream *up = l->base.up;
    if (l->own_pending) return enqueue(l, json, n, r);
    l->own = (upcred_wait){.notify = own_notify, .arg = l};
    int rc = upcred_begin(up->cred, NULL, &up->loop, &l->own);
    if (rc == UPCRED_PENDING) {
        l->own_pending = true;
        return enqueue(l, json, n, r);
    }
    if (rc == UPCRED_FAILED) {
        up_log_said(up, "%s", l->own.error);
        upcred_wait_clear(&l->own);
        return MCPG_EUNAVAIL;
    }
    rc = send_now(l, json, n, r, l->own.auth_line);
    upcred_wait_clear(&l->own);
    return rc;
}

static int http_send(mcp_link *base, const char *json, size_t n, up_request *r) {
    link_http *l = (link_http *)base;
    if (l->stopped || !l->pool) return MCPG_EUNAVAIL;
    upstream *up = base->up;
    if (r && r->pc && !r->pc->auth_line && upcred_per_caller(up->cred)) {
        /* a retry relayed from another replica: its caller's token stayed there */
        up_request_failed(up, r, "the caller's credentials are not on this replica; call again");
        return 0;
    }
    int rc;
    if (sessions_send(l, json, n, r, &rc)) return rc;
    if (needs_own_token(l, r)) return send_with_own_token(l, json, n, r);
    return send_now(l, json, n, r, NULL);
}

hx *link_open_get(link_http *l, caller_session *cs, const char *sid, const char *lines,
                  const char *auth_line) {
    upstream *up = l->base.up;
    hx *x = link_hx_open(l, NULL);
    if (!x) return NULL;
    x->is_get = true;
    x->cs = cs;
    mcpg_buf h = {0};
    mcpg_buf_printf(&h,
                    "Accept: text/event-stream\r\nMCP-Protocol-Version: %s\r\n"
                    "Mcp-Session-Id: %s\r\n%s%s",
                    up->protocol, sid, lines ? lines : "", auth_line ? auth_line : "");
    x->req = up_send(l->pool, "GET", up_target_path(l->target), h.data, NULL, 0, 0, &CALLBACKS, x);
    if (h.data) explicit_bzero(h.data, h.len);
    mcpg_buf_free(&h);
    if (x->req) return x;
    link_forget_hx(l, x);
    return NULL;
}

/* The gateway's own session's GET stream. */
static void open_get(link_http *l) {
    upstream *up = l->base.up;
    if (l->stopped || l->get || up->state != UP_READY || up->wire != WIRE_LEGACY ||
        !up->session_id)
        return;
    upcred_wait own = {.notify = own_notify, .arg = l};
    if (needs_own_token(l, NULL) &&
        (l->own_pending || upcred_begin(up->cred, NULL, &up->loop, &own) != UPCRED_READY)) {
        schedule_get(l); /* tried again once the token is had */
        return;
    }
    l->get = link_open_get(l, NULL, up->session_id, up->cfg.header_lines, own.auth_line);
    upcred_wait_clear(&own);
}

/* Every session's stream that ended is opened again: the gateway's and its
 * callers'. */
static void on_get_timer(uv_timer_t *t) {
    open_get(t->data);
    sessions_open_gets(t->data);
}

void link_schedule_get(link_http *l) { schedule_get(l); }

static void schedule_get(link_http *l) {
    if (l->get_timer_init && !l->stopped) uv_timer_start(&l->get_timer, on_get_timer, GET_RETRY_MS, 0);
}

static int http_start(mcp_link *base) {
    link_http *l = (link_http *)base;
    upstream *up = base->up;
    l->stopped = false;
    if (!l->get_timer_init) {
        uv_timer_init(&up->loop, &l->get_timer);
        l->get_timer.data = l;
        l->get_timer_init = true;
    }
    sessions_start(l);
    unsigned conns = (unsigned)up->cfg.c->max_conns;
    /* as many kept alive as may be open: calls never wait for a connect
     * the pool could have spared */
    l->pool = up_pool_new(&up->loop, l->target, conns, conns, 4096);
    if (!l->pool) {
        up_link_down(up, "out of memory");
        return -1;
    }
    up_link_up(up);
    return 0;
}

/* The upstream is ready: the session wire's GET stream opens. */
static void http_ready(mcp_link *base) { open_get((link_http *)base); }

static void http_forget(mcp_link *base, up_request *r) {
    unqueue((link_http *)base, r);
    sessions_forget((link_http *)base, r);
    hx *x = r->link_ctx;
    if (x && x->r == r) x->r = NULL;
    r->link_ctx = NULL;
}

static void http_abandon(mcp_link *base, up_request *r) {
    unqueue((link_http *)base, r);
    sessions_forget((link_http *)base, r);
    hx *x = r->link_ctx;
    if (!x) return;
    x->r = NULL;
    x->abandoned = true;
    r->link_ctx = NULL;
    if (x->req) up_req_abort(x->req); /* on_done runs now and only lets go of x */
}

static void http_stop(mcp_link *base) {
    link_http *l = (link_http *)base;
    if (l->stopped) return;
    l->stopped = true;
    for (hx *x = l->open; x; x = x->next)
        if (x->r) {
            x->r->link_ctx = NULL;
            x->r = NULL;
        }
    if (l->pool) up_pool_close(l->pool); /* each open request's on_done frees its exchange */
    l->pool = NULL;
    sessions_stop(l);
    if (l->own_pending && upcred_cancel(base->up->cred, &l->own)) http_credential(base);
    upcred_loop_stop(base->up->cred, &base->up->loop); /* a token request of this thread ends */
    if (l->get_timer_init) {
        uv_timer_stop(&l->get_timer);
        if (base->up->state == UP_STOPPING) {
            uv_close((uv_handle_t *)&l->get_timer, NULL);
            l->get_timer_init = false;
        }
    }
}

static void http_destroy(mcp_link *base) {
    link_http *l = (link_http *)base;
    while (l->open) link_forget_hx(l, l->open);
    while (l->queue) unqueue(l, l->queue->r);
    upcred_wait_clear(&l->own);
    up_target_free(l->target);
    free(l);
}

static const mcp_link_ops HTTP_OPS = {
    .what = "http",
    .start = http_start,
    .send = http_send,
    .abandon = http_abandon,
    .forget = http_forget,
    .ready = http_ready,
    .credential = http_credential,
    .stop = http_stop,
    .destroy = http_destroy,
};

mcp_link *link_http_new(upstream *up, char *err, size_t errcap) {
    const mcp_cfg *c = up->cfg.c;
    up_tls_opts tls = {.insecure = c->tls_insecure, .ca_file = c->ca_file,
                       .cert_file = c->cert_file, .key_file = c->key_file};
    link_http *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    snprintf(l->url, sizeof l->url, "%s", c->url);
    l->target = up_target_new(c->url, &tls, (uint64_t)c->connect_timeout_ms, err, errcap);
    if (!l->target) {
        free(l);
        return NULL;
    }
    l->base.ops = &HTTP_OPS;
    l->base.up = up;
    return &l->base;
}
