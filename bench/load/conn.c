/* One connection slot: connect, send a call, read and judge its answer,
 * send the next; on any failure close and connect again.
 *
 * A slot owns one request at a time (closed loop), so its buffers are reused
 * for every call and nothing is allocated per call.
 *
 * On the legacy wire a slot first opens a session (initialize, then
 * notifications/initialized answered 202) and then sends its calls with the
 * session's Mcp-Session-Id. The session outlives reconnects (it is HTTP's, not
 * TCP's); a 404 or a failed handshake ends it and the next send opens another.
 * Handshake messages are not calls: only their failures are counted. */
#define _GNU_SOURCE /* memmem */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"

#define READ_BUF_INITIAL 16384u
#define BACKOFF_NS 100000000ull /* after a failure: do not spin on a dead port */
#define ERROR_SAMPLES_MAX 5u

static void conn_connect(load_conn *c);
static void conn_send(load_conn *c);

static load_stats *current_stats(load_run *run) {
    switch (run->phase) {
    case LOAD_PHASE_WARMUP: return &run->warmup;
    case LOAD_PHASE_MEASURE: return &run->measure;
    default: return NULL; /* after the window: nothing counts */
    }
}

static void maybe_stop_at_max(load_run *run) {
    uint64_t max = run->opts->max_calls;
    if (max && run->phase == LOAD_PHASE_MEASURE && run->measure.calls >= max) load_run_stop(run);
}

/* Describe the first few errors: a failing test then says why, not only how many. */
static void describe_error(load_conn *c, load_err_kind k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void describe_error(load_conn *c, load_err_kind k, const char *fmt, ...) {
    load_run *run = c->run;
    if (run->phase == LOAD_PHASE_DONE || run->error_samples >= ERROR_SAMPLES_MAX) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char call[32] = "no call in flight";
    if (c->in_flight) snprintf(call, sizeof call, "id %llu", (unsigned long long)c->id);
    fprintf(stderr, "mcpg-load: error %s on connection %u, %s: %s\n", load_err_name(k),
            (unsigned)(c - run->conns), call, msg);
    if (++run->error_samples == ERROR_SAMPLES_MAX)
        fprintf(stderr, "mcpg-load: (further errors are only counted)\n");
}

static void count_error(load_conn *c, load_err_kind k) {
    load_stats *s = current_stats(c->run);
    if (!s) return;
    s->calls++;
    s->err[k]++;
    c->run->interval.err[k]++;
    maybe_stop_at_max(c->run);
}

static void count_ok(load_conn *c, uint64_t latency_ns) {
    load_stats *s = current_stats(c->run);
    if (!s) return;
    s->calls++;
    s->ok++;
    if (c->resp.flags & LOAD_RESP_SSE) s->ok_sse++;
    load_hist_record(&s->hist, latency_ns);
    c->run->interval.ok++;
    load_hist_record(&c->run->interval.hist, latency_ns);
    maybe_stop_at_max(c->run);
}

static void on_closed(uv_handle_t *h) {
    load_conn *c = h->data;
    c->state = CONN_CLOSED;
    if (c->run->phase == LOAD_PHASE_DONE) return;
    if (c->backoff) {
        c->state = CONN_BACKOFF;
        c->retry_at_ns = uv_hrtime() + BACKOFF_NS;
        return;
    }
    conn_connect(c);
}

/* Close the slot; it reconnects from on_closed unless the run is over. */
static void conn_drop(load_conn *c, bool backoff) {
    if (c->state == CONN_CLOSED || c->state == CONN_CLOSING || c->state == CONN_BACKOFF) return;
    if (c->state == CONN_OPEN) c->run->open_conns--;
    c->state = CONN_CLOSING;
    c->in_flight = false;
    c->send_deferred = false;
    c->idle = false; /* a stale entry on the idle stack is passed over */
    c->backoff = backoff;
    if (c->ssl) load_tls_end(c);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void fail(load_conn *c, load_err_kind k, const char *what, int uverr) {
    describe_error(c, k, "%s%s%s", what, uverr ? ": " : "", uverr ? uv_strerror(uverr) : "");
    count_error(c, k); /* may end the run (--max-calls): describe first */
    conn_drop(c, true);
}

static void on_write(uv_write_t *req, int status) {
    load_conn *c = req->data;
    c->writing = false;
    if (status == UV_ECANCELED) return; /* closed underneath: on_closed takes over */
    if (status < 0) {
        fail(c, LOAD_ERR_SOCKET, "write", status);
        return;
    }
    if (c->ssl && (status = load_tls_flush(c)) != 0) { /* records queued meanwhile */
        fail(c, LOAD_ERR_SOCKET, "write", status);
        return;
    }
    if (c->send_deferred) {
        c->send_deferred = false;
        conn_send(c);
    }
}

static bool legacy(const load_conn *c) { return c->run->opts->wire == LOAD_WIRE_LEGACY; }

static const load_request_tmpl *tmpl_of(const load_run *run, uint64_t id) {
    return &run->tmpls[load_mix_pick(&run->mix, id)];
}

/* The next message of the slot into wbuf: the call, or the handshake step
 * its session is at. */
static void format_next(load_conn *c) {
    load_run *run = c->run;
    const load_opts *o = run->opts;
    if (!legacy(c)) {
        c->wlen = load_request_format(tmpl_of(run, c->id), c->id, NULL, 0, c->wbuf);
        return;
    }
    load_session *ss = c->session;
    if (ss->len == 0) ss->stage = STAGE_INITIALIZE;
    switch (ss->stage) {
    case STAGE_INITIALIZE: c->wlen = load_initialize_format(o->host_port, o->path, c->id, c->wbuf); break;
    case STAGE_INITIALIZED:
        c->wlen = load_initialized_format(o->host_port, o->path, ss->id, ss->len, c->wbuf);
        break;
    default:
        c->wlen = load_request_format(tmpl_of(run, c->id), c->id, ss->id, ss->len, c->wbuf);
        break;
    }
}

/* ---- open loop: idle connections wait for the schedule ---- */

static bool open_loop(const load_run *run) { return run->opts->rate > 0; }

/* The slot has nothing to send until a call is due: the spin picks it. */
static void wait_for_due(load_conn *c) {
    load_run *run = c->run;
    c->idle = true;
    if (c->queued) return; /* still on the stack from an earlier wait */
    c->queued = true;
    run->idle_stack[run->n_idle++] = c;
}

/* When the next message is a call in an open loop: the due time of the
 * call it may send now, or false to wait. Handshake steps go at once. */
static bool call_allowed(load_conn *c, uint64_t now, uint64_t *due) {
    *due = now;
    if (!open_loop(c->run) || (legacy(c) && (c->session->len == 0 || c->session->stage != STAGE_CALLS))) return true;
    return load_sched_take(&c->run->sched, now, due);
}

void load_open_loop_spin(load_run *run) {
    uint64_t now = uv_hrtime();
    while (run->n_idle && load_sched_backlog(&run->sched, now)) {
        load_conn *c = run->idle_stack[--run->n_idle];
        c->queued = false;
        if (!c->idle || c->state != CONN_OPEN) continue; /* left while it waited */
        c->idle = false;
        conn_send(c);
    }
}

/* Send the next message: try the write inline (nearly always complete on
 * loopback, and no callback to wait for), queue the rest only if needed. */
static void conn_send(load_conn *c) {
    load_run *run = c->run;
    if (run->phase == LOAD_PHASE_DONE || c->state != CONN_OPEN) return;
    if (run->opts->spread_call && !c->holder) return; /* another connection of the group has the turn */
    if (c->writing) {
        c->send_deferred = true;
        return;
    }
    uint64_t now = uv_hrtime(), due;
    if (!call_allowed(c, now, &due)) {
        wait_for_due(c);
        return;
    }
    c->id = run->next_id++;
    format_next(c);
    load_resp_reset(&c->resp, run->opts->max_response, legacy(c));
    c->rlen = 0;
    c->in_flight = true;
    c->sent_ns = now;
    c->due_ns = due;
    int rc = c->ssl ? load_tls_send(c, c->wbuf, c->wlen) : load_conn_write(c, c->wbuf, c->wlen);
    if (rc < 0) fail(c, LOAD_ERR_SOCKET, "write", rc);
}

int load_conn_write(load_conn *c, const char *p, size_t len) {
    int rc = load_write((uv_stream_t *)&c->tcp, &c->write_req, p, len, on_write);
    if (rc > 0) c->writing = true;
    return rc < 0 ? rc : 0;
}

/* How much of a body an error description quotes (the body is not NUL-terminated). */
static int shown(size_t len) { return len < 200 ? (int)len : 200; }

/* The JSON-RPC response of an answer: the body itself, or the one response
 * event of an SSE body (NULL when there is none, or more than one). */
static const char *response_of(load_conn *c, char *body, size_t len, size_t *rlen) {
    *rlen = len;
    if (!(c->resp.flags & LOAD_RESP_SSE)) return body;
    const char *json;
    return load_sse_response(body, len, &json, rlen) == 1 ? json : NULL;
}

/* Judge a complete answer; returns the error kind, or LOAD_ERR_COUNT for good.
 * expect: the --expect text (NULL for handshake answers). An SSE body is
 * rewritten in place while its response is looked for. */
static load_err_kind judge(load_conn *c, char *body, size_t len, const char *expect) {
    const load_opts *o = c->run->opts;
    if (c->resp.status != 200) {
        describe_error(c, LOAD_ERR_HTTP_STATUS, "HTTP %d: %.*s", c->resp.status, shown(len), body);
        return LOAD_ERR_HTTP_STATUS;
    }
    size_t rlen;
    const char *resp = response_of(c, body, len, &rlen);
    load_rpc_reply r;
    const char *why = NULL;
    load_err_kind k = LOAD_ERR_MISMATCH;
    if (!resp)
        why = "not exactly one JSON-RPC response among the SSE events";
    else if (load_rpc_scan(resp, rlen, &r) < 0)
        why = "body is not a JSON object";
    else if (r.has_error)
        why = "JSON-RPC error", k = LOAD_ERR_RPC_ERROR;
    else if (!r.has_result)
        why = "no \"result\"";
    else if (o->check_id && (!r.has_id || !r.id_is_int || r.id != (int64_t)c->id))
        why = "id differs";
    else if (r.tool_error)
        why = "result.isError is true", k = LOAD_ERR_TOOL_ERROR;
    else if (expect && !memmem(resp, rlen, expect, strlen(expect)))
        why = "--expect text missing";
    if (!why) return LOAD_ERR_COUNT;
    describe_error(c, k, "%s: %.*s", why, shown(len), body);
    return k;
}

/* --print-answer: the first good body, so a static baseline can serve
 * exactly what the gateway answers. */
static void print_answer_once(load_conn *c) {
    load_run *run = c->run;
    if (!run->opts->print_answer || run->answer_printed) return;
    run->answer_printed = true;
    fwrite(c->rbuf + c->resp.head_len, 1, c->resp.body_len, stdout);
    fputc('\n', stdout);
}

/* A legacy handshake answer: keep the session from initialize's answer,
 * expect 202 for notifications/initialized. LOAD_ERR_COUNT when good. */
static load_err_kind handshake_answer(load_conn *c) {
    load_resp *r = &c->resp;
    load_session *ss = c->session;
    if (ss->stage == STAGE_INITIALIZED) {
        if (r->status == 202) return ss->stage = STAGE_CALLS, LOAD_ERR_COUNT;
        describe_error(c, LOAD_ERR_HTTP_STATUS, "notifications/initialized answered HTTP %d, not 202", r->status);
        return LOAD_ERR_HTTP_STATUS;
    }
    load_err_kind k = judge(c, c->rbuf + r->head_len, r->body_len, NULL);
    if (k != LOAD_ERR_COUNT) return k;
    if (r->session_len == 0) {
        describe_error(c, LOAD_ERR_MISMATCH, "initialize answered without Mcp-Session-Id");
        return LOAD_ERR_MISMATCH;
    }
    memcpy(ss->id, c->rbuf + r->session_off, r->session_len);
    ss->len = r->session_len;
    ss->stage = STAGE_INITIALIZED;
    return LOAD_ERR_COUNT;
}

/* A failed handshake: count it, end the session, reconnect after a pause. */
static void handshake_failed(load_conn *c, load_err_kind k) {
    c->session->len = 0;
    c->session->stage = STAGE_NONE;
    count_error(c, k);
    conn_drop(c, true);
}

static void on_answer(load_conn *c) {
    uint64_t now = uv_hrtime();
    size_t total = c->resp.wire_len;
    load_resp_dechunk(&c->resp, c->rbuf);
    bool is_call = !legacy(c) || c->session->stage == STAGE_CALLS;
    load_err_kind k = is_call ? judge(c, c->rbuf + c->resp.head_len, c->resp.body_len, c->run->opts->expect)
                              : handshake_answer(c);
    c->in_flight = false;
    if (!is_call && k != LOAD_ERR_COUNT) {
        handshake_failed(c, k);
        return;
    }
    if (!is_call) {
        /* the handshake's next step, or the first call */
    } else if (k == LOAD_ERR_COUNT) {
        print_answer_once(c);
        count_ok(c, now - c->due_ns);
    } else {
        count_error(c, k);
        if (legacy(c) && c->resp.status == 404) c->session->len = 0; /* the session is gone: open another */
    }
    if (is_call && c->run->opts->spread_call) { /* the group's next call goes to the next target */
        load_conn *next = &c->run->conns[load_spread_next((unsigned)(c - c->run->conns), c->run->opts->ntargets)];
        c->holder = false;
        next->holder = true;
        if (c->rlen > total) {
            fail(c, LOAD_ERR_PROTOCOL, "bytes after the answer", 0);
            return;
        }
        c->rlen = 0;
        if (c->resp.flags & LOAD_RESP_CLOSE) conn_drop(c, false);
        conn_send(next); /* sends when open; else its on_connect will */
        return;
    }
    if (c->rlen > total) {
        fail(c, LOAD_ERR_PROTOCOL, "bytes after the answer", 0);
        return;
    }
    c->rlen = 0;
    if (c->resp.flags & LOAD_RESP_CLOSE) {
        conn_drop(c, false); /* the server asked */
        return;
    }
    conn_send(c);
}

size_t load_conn_room(load_conn *c, char **at) {
    size_t limit = LOAD_RESP_HEAD_MAX + c->run->opts->max_response;
    size_t want = c->rcap;
    if (c->resp.head_len && !(c->resp.flags & LOAD_RESP_CHUNKED))
        want = c->resp.head_len + c->resp.body_len; /* exact once known */
    if (c->rlen == c->rcap && want <= c->rcap) want = c->rcap * 2;
    if (want > limit) want = limit;
    if (want > c->rcap) {
        char *p = realloc(c->rbuf, want);
        if (p) c->rbuf = p, c->rcap = want;
    }
    *at = c->rbuf + c->rlen;
    return c->rcap - c->rlen;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    char *at;
    size_t room = load_conn_room(h->data, &at);
    /* Zero room makes libuv report UV_ENOBUFS: an answer over the bound. */
    *buf = uv_buf_init(at, (unsigned)room);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    load_conn *c = s->data;
    if (nread == 0) return;
    if (nread == UV_EOF && !c->in_flight) {
        conn_drop(c, false); /* idle close: reconnect */
        return;
    }
    if (nread == UV_ENOBUFS) {
        fail(c, LOAD_ERR_PROTOCOL, "answer over --max-response", 0);
        return;
    }
    if (nread < 0) {
        fail(c, LOAD_ERR_SOCKET, "read", (int)nread);
        return;
    }
    /* https: the bytes are ciphertext; load_tls_read puts the plaintext back in
     * their place (they are copied into OpenSSL first) */
    if (c->ssl) load_tls_read(c, buf->base, (size_t)nread);
    else load_conn_plain(c, (size_t)nread);
}

void load_conn_plain(load_conn *c, size_t n) {
    c->rlen += n;
    if (!c->in_flight) {
        fail(c, LOAD_ERR_PROTOCOL, "bytes with no call in flight", 0);
        return;
    }
    int rc = load_resp_feed(&c->resp, c->rbuf, c->rlen);
    if (rc == LOAD_RESP_MORE) return;
    if (rc < 0) {
        fail(c, LOAD_ERR_PROTOCOL, load_resp_strerror(rc), 0);
        return;
    }
    on_answer(c);
}

static void on_connect(uv_connect_t *req, int status) {
    load_conn *c = req->data;
    if (c->state != CONN_CONNECTING) return; /* closed while connecting */
    if (status < 0) {
        fail(c, LOAD_ERR_SOCKET, "connect", status);
        return;
    }
    load_stats *st = current_stats(c->run);
    if (st) {
        st->connects++;
        if (c->ever_connected) st->reconnects++;
    }
    c->ever_connected = true;
    c->state = CONN_OPEN;
    c->run->open_conns++;
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0) {
        fail(c, LOAD_ERR_SOCKET, "read start", rc);
        return;
    }
    if (!c->run->tls_ctx) conn_send(c);
    else if (load_tls_begin(c) < 0) fail(c, LOAD_ERR_SOCKET, "TLS: out of memory", 0);
}

void load_conn_ready(load_conn *c) { conn_send(c); }
void load_conn_fail(load_conn *c, const char *what) { fail(c, LOAD_ERR_SOCKET, what, 0); }

void load_conn_eof(load_conn *c) {
    if (!c->in_flight) conn_drop(c, false); /* idle close: reconnect */
    else fail(c, LOAD_ERR_SOCKET, "read", UV_EOF);
}

static void conn_connect(load_conn *c) {
    load_run *run = c->run;
    uv_tcp_init(run->loop, &c->tcp);
    c->tcp.data = c;
    c->connect_req.data = c;
    c->write_req.data = c;
    c->state = CONN_CONNECTING;
    c->backoff = false;
    uv_tcp_nodelay(&c->tcp, 1); /* one small request per round trip: Nagle would only add delay */
    int rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&run->opts->addrs[c->target],
                            on_connect);
    if (rc < 0) fail(c, LOAD_ERR_SOCKET, "connect", rc);
}

int load_conn_init(load_run *run, load_conn *c) {
    memset(c, 0, sizeof *c);
    c->run = run;
    c->state = CONN_CLOSED;
    c->session = &c->own_session;
    c->wbuf = malloc(run->max_request > LOAD_HANDSHAKE_MAX ? run->max_request : LOAD_HANDSHAKE_MAX);
    c->rcap = READ_BUF_INITIAL;
    c->rbuf = malloc(c->rcap);
    return c->wbuf && c->rbuf ? 0 : -1;
}

void load_conn_start(load_conn *c) { conn_connect(c); }

/* End of run: close without reconnecting (on_closed sees LOAD_PHASE_DONE). */
void load_conn_close(load_conn *c) {
    if (c->state == CONN_BACKOFF) c->state = CONN_CLOSED;
    conn_drop(c, false);
}

void load_conn_free(load_conn *c) {
    free(c->wbuf);
    free(c->rbuf);
    free(c->tbuf);
    c->wbuf = c->rbuf = c->tbuf = NULL;
}

void load_conn_check_timeout(load_conn *c, uint64_t now_ns) {
    uint64_t limit = (uint64_t)(c->run->opts->timeout_s * 1e9);
    if (c->state == CONN_OPEN && c->in_flight && now_ns - c->sent_ns > limit)
        fail(c, LOAD_ERR_TIMEOUT, "no complete answer within --timeout", 0);
}

void load_conn_retry_if_due(load_conn *c, uint64_t now_ns) {
    if (c->state == CONN_BACKOFF && now_ns >= c->retry_at_ns) conn_connect(c);
}
