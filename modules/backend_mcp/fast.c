/* backend_mcp: the direct path. When the upstream speaks the stateless
 * wire over HTTP (no session: any connection may carry any request) and
 * the op runs on a gateway loop (inline_dispatch), the call's POST goes out
 * on that loop's own keep-alive connections and its answer is read there:
 * no hand-off to the I/O thread and back, which is most of what a proxied
 * call costs beyond the HTTP itself. Everything else keeps the I/O thread's
 * path: stdio, the session wire, a bridged retry, a call on the pool.
 *
 * On the direct path the answer (one JSON body, or an SSE stream carrying
 * progress and log notifications first) ends the call here; an
 * input_required answer for a client that can be asked is handed to the
 * I/O thread's round (calls_ask_round), which sends the retry. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sse.h"
#include "upclient.h"
#include "upstream.h"

#define FAST_TAG 0x54534146u /* "FAST" */
#define FIRST_FAST_ID (1ll << 40) /* apart from the I/O thread's ids, for the logs */
#define EXCERPT 200


typedef struct fast_call {
    uint32_t tag;          /* FAST_TAG: what the call's slot holds */
    upstream *up;
    client_call *pc;
    mcpg_call *call;
    up_req *req;
    int64_t id;
    int status;
    bool sse, answered, cancelled;
    bool too_big;          /* the answer (or one of its events) passed max_message_bytes */
    char *www;             /* a 401's WWW-Authenticate */
    mcpg_buf body;         /* the JSON answer, or the response event's data */
    sse_reader sse_r;
} fast_call;

int fast_init(upstream *up) {
    atomic_init(&up->fast_next_id, FIRST_FAST_ID);
    up->n_fast_pools = up->h->worker_count();
    up->fast_pools = calloc(up->n_fast_pools ? up->n_fast_pools : 1, sizeof *up->fast_pools);
    return up->fast_pools ? 0 : MCPG_ENOMEM;
}

void fast_free(upstream *up) {
    free(up->fast_pools);
    up->fast_pools = NULL;
}

static void fast_free_call(fast_call *fc) {
    free(fc->www);
    mcpg_buf_free(&fc->body);
    sse_free(&fc->sse_r);
    calls_free(fc->pc);
    free(fc);
}

/* ---- the answer ---- */

static void on_event(void *arg, const char *data, size_t n) {
    fast_call *fc = arg;
    upstream *up = fc->up;
    mcpg_json_span method, params;
    bool has_method = mcpg_json_object_get(data, n, "method", &method) == 1;
    if (!has_method) { /* the response */
        fc->body.len = 0;
        mcpg_buf_append(&fc->body, data, n);
        fc->answered = true;
        return;
    }
    bool has_params = mcpg_json_object_get(data, n, "params", &params) == 1;
    if (!has_params || !fc->pc->call) return;
    if (mcpg_json_string_eq(&method, "notifications/progress", 22))
        calls_progress(up, fc->pc, params.p, params.n);
    else if (mcpg_json_string_eq(&method, "notifications/message", 21))
        up->h->call_notify(fc->pc->call, "notifications/message", params.p, params.n);
}

static int on_head(void *arg, int status, const up_header *h, size_t n) {
    fast_call *fc = arg;
    fc->status = status;
    if (fc->pc) fc->pc->http_status = status;
    const up_header *ct = up_header_find(h, n, "content-type");
    fc->sse = ct && ct->value_len >= 17 && strncasecmp(ct->value, "text/event-stream", 17) == 0;
    const up_header *www = status == 401 ? up_header_find(h, n, "www-authenticate") : NULL;
    if (www) fc->www = strndup(www->value, www->value_len < 1024 ? www->value_len : 1024);
    return 0;
}

/* An answer is read only up to max_message_bytes: past it the request is
 * aborted (its connection closed) and the call told why. */
static int on_body(void *arg, const char *p, size_t n) {
    fast_call *fc = arg;
    size_t max = (size_t)fc->up->cfg.c->max_message_bytes;
    if (fc->sse && fc->status < 300) {
        if (sse_feed(&fc->sse_r, p, n, on_event, fc) == 0) return 0;
        fc->too_big = true; /* sse_feed refuses only a line or an event over the cap */
        return -1;
    }
    if (fc->body.len + n > max) {
        fc->too_big = true;
        return -1;
    }
    return mcpg_buf_append(&fc->body, p, n) ? -1 : 0;
}

/* The call fails with an error naming the instance (calls_fail frees pc). */
static void fail(fast_call *fc, const char *msg) {
    calls_fail(fc->up, fc->pc, MCPG_RPC_SERVER_ERROR, "%s", msg);
    fc->pc = NULL;
}

static void on_done(void *arg, int err) {
    fast_call *fc = arg;
    upstream *up = fc->up;
    const char *detail = err && fc->req ? up_req_error_detail(fc->req) : NULL;
    fc->req = NULL;
    void **slot = up->h->call_slot(fc->call, up->self);
    if (slot) *slot = NULL;
    /* a JSON body cut short (an error, or over the cap) is never read as the
     * answer; a response event that came whole is, however the stream ended */
    const char *msg = fc->sse ? (fc->answered ? fc->body.data : NULL)
                      : err   ? NULL
                              : (fc->body.len && fc->body.data[0] == '{' ? fc->body.data : NULL);
    size_t n = msg ? fc->body.len : 0;
    char why[700];
    up_answer answer;
    if (fc->cancelled) {
        fail(fc, "request cancelled");
    } else if (fc->status == 401 && up->cred) {
        calls_refused(up, fc->pc, fc->status, fc->www);
        fc->pc = NULL;
    } else if (msg && calls_read_answer(msg, n, &answer) == 0) {
        client_call *pc = fc->pc;
        if (calls_ask_round(up, pc, &answer)) {
            /* the I/O thread sends the retry: the call is its now */
            pthread_mutex_lock(&up->lock);
            if (slot) *slot = pc;
            pthread_mutex_unlock(&up->lock);
            fc->pc = NULL;
        } else {
            mcpg_call *c = pc->call;
            pc->call = NULL;
            calls_answer(up, pc, c, &answer);
        }
    } else if (fc->too_big) {
        snprintf(why, sizeof why, "upstream: the answer is over max_message_bytes (%lld bytes)",
                 (long long)up->cfg.c->max_message_bytes);
        fail(fc, why);
    } else if (err == UP_EPROTO) { /* e.g. a header section past the client's bounds */
        snprintf(why, sizeof why, "upstream: the answer is not valid HTTP/1.1: %.300s",
                 detail ? detail : up_strerror(err));
        fail(fc, why);
    } else if (err && !fc->status) {
        snprintf(why, sizeof why, "upstream: cannot reach %.300s: %.300s", up->cfg.c->url,
                 detail ? detail : up_strerror(err));
        fail(fc, why);
    } else if (fc->status >= 300) {
        snprintf(why, sizeof why, "upstream: HTTP %d: %.*s", fc->status,
                 (int)(fc->body.len < EXCERPT ? fc->body.len : EXCERPT),
                 fc->body.data ? fc->body.data : "");
        fail(fc, why);
    } else {
        snprintf(why, sizeof why, "upstream: the answer ended early%s%.300s", err ? ": " : "",
                 err ? (detail ? detail : up_strerror(err)) : "");
        fail(fc, why);
    }
    fast_free_call(fc);
}

static const up_callbacks CALLBACKS = {on_head, on_body, on_done};

/* ---- starting ---- */

static up_pool *loop_pool(upstream *up, mcpg_worker *w) {
    uint32_t i = up->h->worker_index(w);
    if (i >= up->n_fast_pools) return NULL;
    if (!up->fast_pools[i]) {
        unsigned conns = (unsigned)up->cfg.c->max_conns;
        up->fast_pools[i] = up_pool_new(up->h->worker_uv_loop(w), link_http_target(up->link),
                                        conns, conns, 4096);
    }
    return up->fast_pools[i];
}

bool fast_try(upstream *up, client_call *pc, mcpg_call *call) {
    const mcpg_host *h = up->h;
    if (!atomic_load(&up->fast_ok) || pc->request_state) return false;
    mcpg_worker *w = h->worker_current();
    up_pool *pool = w ? loop_pool(up, w) : NULL;
    void **slot = pool ? h->call_slot(call, up->self) : NULL;
    fast_call *fc = slot ? calloc(1, sizeof *fc) : NULL;
    if (!fc) return false;
    fc->tag = FAST_TAG;
    fc->up = up;
    fc->pc = pc;
    fc->call = call;
    fc->id = atomic_fetch_add(&up->fast_next_id, 1);
    fc->sse_r.max = (size_t)up->cfg.c->max_message_bytes;
    mcpg_buf body = {0}, hdr = {0};
    int rc = calls_build_message(up, pc, fc->id, true, &body);
    if (!rc && pc->trace_lines) mcpg_buf_puts(&hdr, pc->trace_lines);
    if (!rc && pc->param_lines) mcpg_buf_puts(&hdr, pc->param_lines);
    if (!rc) /* the method and name are known: the message is not scanned for them */
        link_http_stateless_head(up, pc, pc->method_name, strlen(pc->method_name), pc->mcp_name,
                                 pc->mcp_name ? strlen(pc->mcp_name) : 0, &hdr);
    if (!rc && hdr.data) {
        *slot = fc;
        fc->req = up_send(pool, "POST", up_target_path(link_http_target(up->link)), hdr.data,
                          body.data, body.len, 0, &CALLBACKS, fc);
    }
    mcpg_buf_free(&body);
    if (hdr.data) explicit_bzero(hdr.data, hdr.len); /* the call's credential, or configured */
    mcpg_buf_free(&hdr);
    if (!fc->req) { /* nothing went out: the I/O thread's path takes it */
        *slot = NULL;
        fc->pc = NULL;
        fast_free_call(fc);
        return false;
    }
    return true;
}

void fast_cancel(void *p) {
    fast_call *fc = p;
    fc->cancelled = true;
    if (fc->req) up_req_abort(fc->req); /* on_done answers and frees, now */
}

void fast_worker_stop(upstream *up, uint32_t i) {
    if (i < up->n_fast_pools && up->fast_pools[i]) {
        up_pool_close(up->fast_pools[i]); /* each call in flight: on_done, answered */
        up->fast_pools[i] = NULL;
    }
}

bool fast_is(const void *slot_value) {
    return slot_value && *(const uint32_t *)slot_value == FAST_TAG;
}
