/* transport_http: a call's trip through the kernel. th_submit hands the
 * request's description to the kernel; its messages and its outcome come
 * back through desc.message and desc.complete, and are written as the
 * request's answer: one JSON body, or the events of its stream. A
 * subscription the pipeline is asked about comes back the same way. */
#include "wire/wire.h"
#include "wire/replay.h"
#include "wire/stream.h"

#include <stdio.h>
#include <string.h>

#define MSG(s) TH_LIT("\"" s "\"")

static const char *req_header(void *ctx, const char *lname, size_t *len_out) {
    return th_req_header(ctx, lname, len_out);
}

/* The outcome's resultType as stamp bits: a kernel older than ABI 1.1
 * fills nothing past retry_after_s (out->size says so), which is "complete". */
static unsigned result_type_stamp(const mcpg_call_outcome *oc) {
    if (!MCPG_HAS_FIELD(oc, result_type)) return 0;
    switch (oc->result_type) {
    case MCPG_RESULT_INPUT_REQUIRED: return TH_STAMP_INPUT_REQUIRED;
    case MCPG_RESULT_TASK: return TH_STAMP_TASK;
    default: return 0;
    }
}

/* Pieces joined into the worker's message buffer (a stream's events are
 * written whole; the buffer is kept warm). NULL when out of memory. */
static mcpg_buf *join(th_worker_state *ws, const th_piece *body, size_t n) {
    const mcpg_host *host = ws->mod->host;
    mcpg_buf *b = &ws->msg_body;
    b->len = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) rc |= host->buf_append(b, body[i].p, body[i].n);
    return rc ? NULL : b;
}

static void end_stream(th_conn *c, th_req *r, const th_piece *body, size_t n) {
    mcpg_buf *b = join(c->ws, body, n);
    if (!b) c->close_after = 1;
    th_sse_end(c, r, NULL, 0, b ? b->data : NULL, b ? b->len : 0);
}

/* The outcome as r's answer: the last event of its replay buffer (to
 * whichever client shows it, or kept for one that comes back), the end of
 * its stream, or one JSON body. c is NULL for a call without a connection. */
static void write_outcome(th_worker_state *ws, th_conn *c, th_req *r, const mcpg_call_outcome *oc) {
    const mcpg_host *host = ws->mod->host;
    th_piece id = {r->desc.id_json, r->desc.id_len};
    th_resp_head hd = {.status = oc->http_status ? oc->http_status : 200,
                       .retry_after_s = oc->retry_after_s,
                       .json = 1};
    th_piece body[TH_MAX_PIECES];
    size_t n;
    char codebuf[24];
    if (!c && !r->rs) return; /* nobody to tell, nothing to keep */
    /* the kernel gives a 403 one only for a step-up (insufficient_scope) */
    int challenge = (hd.status == 401 || hd.status == 403) && MCPG_HAS_FIELD(oc, www_authenticate) &&
                    oc->www_authenticate;
    if (challenge) hd.www_authenticate = oc->www_authenticate;
    /* a 401 is an HTTP answer on both wires (the client's cue to authorize),
     * unless the legacy stream has begun already; so is the 404 for a
     * session of another caller, which is answered exactly as an unknown
     * session id is (no stream, no Mcp-Session-Id) */
    int not_theirs = hd.status == 404 && oc->is_error && oc->error_code == MCPG_RPC_SESSION_NOT_FOUND &&
                     r->legacy;
    if (not_theirs) r->sid[0] = '\0';
    if (c && hd.status != 401 && !not_theirs && th_legacy_stream_due(c, r) < 0) { /* silent until now: head and result together */
        th_respond_status_error(c, r, 503);
        return;
    }
    if (oc->is_error) {
        mcpg_buf *s = &ws->scratch;
        const char *m = oc->error_message ? oc->error_message : "";
        s->len = 0;
        if (host->buf_append_json_string(s, m, strlen(m))) {
            s->len = 0;
            host->buf_append(s, "\"\"", 2);
        }
        th_piece data = {oc->error_data, oc->error_data_len};
        int64_t code = r->desc.wire == MCPG_WIRE_STATELESS ? th_stateless_code(oc->error_code) : oc->error_code;
        n = th_rpc_error_body(body, id, codebuf, code, (th_piece){s->data, s->len},
                              &data, oc->error_data && oc->error_data_len ? 1 : 0);
    } else {
        th_piece res = {oc->result, oc->result ? oc->result_len : 0};
        unsigned stamp = r->stamp ? r->stamp | result_type_stamp(oc) : 0;
        th_piece info = th_req_server_info(ws->mod, r);
        if (!stamp) info.n = 0;
        n = th_rpc_result_body(host, body, id, res, stamp, info);
    }
    if (r->rs) {
        mcpg_buf *b = join(ws, body, n);
        if (b) th_replay_finish(ws, r->rs, b->data, b->len);
        else if (c) c->close_after = 1;
        if (c && r->state != TH_REQ_DONE) th_sse_end(c, r, NULL, 0, NULL, 0); /* not its own stream any more */
    } else if (r->sse) {
        end_stream(c, r, body, n);
    } else {
        th_respond(c, r, &hd, body, n);
    }
}

/* A notifications/message below r->level (the session's logging/setLevel,
 * or the stateless request's _meta logLevel; TH_LOG_NONE: every one): drop it. */
static int log_filtered(const mcpg_host *h, const th_req *r, const char *json, size_t len) {
    mcpg_json_span m, p, lv;
    if (r->level < 0 || h->json_object_get(json, len, "method", &m) != 1 ||
        h->json_string_eq(&m, "notifications/message", 21) != 1)
        return 0;
    if (r->level >= TH_LOG_NONE) return 1;
    if (h->json_object_get(json, len, "params", &p) != 1 ||
        h->json_object_get(p.p, p.n, "level", &lv) != 1 || lv.type != MCPG_JSON_STRING)
        return 0;
    int level = th_log_level_of(lv.p, lv.n);
    return level >= 0 && level < r->level;
}

/* desc.message: a message for the call's client before its outcome. The
 * answer becomes a stream (its head once), when the client accepts one. */
static int on_call_message(void *ctx, mcpg_call *call, const char *json, size_t len) {
    th_req *r = ctx;
    th_conn *c = r->conn; /* NULL: the client dropped a resumable stream */
    (void)call;
    if (!r->sse_ok) return MCPG_ENOTSUP;
    if (log_filtered(r->ws->mod->host, r, json, len)) return 0; /* below the level asked for */
    if (c && !c->closing && r->legacy && !r->sse && th_legacy_stream_begin(c, r)) return MCPG_EAGAIN;
    if (r->rs) return th_replay_event(r->ws, r->rs, json, len) ? MCPG_EAGAIN : 0;
    if (!c || c->closing) return 0; /* the call is being cancelled: nobody to tell */
    if (c->out.len + c->wbuf.len > TH_STREAM_BACKLOG_MAX)
        return MCPG_EAGAIN; /* its client reads slower than it is told: the sender decides */
    int rc = th_sse_event(c, r, NULL, 0, json, len);
    return rc == MCPG_ENOMEM ? MCPG_EAGAIN : 0;
}

/* The call's outcome written for r (to c, or kept for a stream's return
 * when c is NULL); the call is released. */
static void deliver_outcome(th_worker_state *ws, th_conn *c, th_req *r, mcpg_call *call) {
    const mcpg_host *host = ws->mod->host;
    mcpg_call_outcome oc;
    memset(&oc, 0, sizeof oc);
    oc.size = sizeof oc;
    host->call_outcome(call, &oc);
    write_outcome(ws, c, r, &oc);
    th_alog_note_call(ws, r, call);
    host->call_release(call);
    r->call = NULL;
}

/* desc.complete: the kernel has the outcome; answer (or just let go if the
 * client is gone). Runs on the connection's loop thread. */
static void on_call_complete(void *ctx, mcpg_call *call) {
    th_req *r = ctx;
    th_conn *c = r->conn;
    th_worker_state *ws = r->ws;
    if (!c) { /* its client dropped the stream: the result is kept for its return */
        th_replay_orphan_remove(ws, r);
        deliver_outcome(ws, NULL, r, call);
        th_req_put(ws, r);
        return;
    }
    if (c->closing) { /* the client left: the answer goes nowhere */
        ws->mod->host->call_release(call);
        r->call = NULL;
    }
    if (!th_conn_answer_back(c, r)) return;
    deliver_outcome(ws, c, r, call);
    if (!r->in_submit) th_conn_advance(c); /* else the submitter advances after it returns */
}

/* A listen's allowed uris, from the kernel's answer, kept after the body
 * (the request's own spans are found again when it is handled again). */
static int keep_allowed_uris(const mcpg_host *h, th_req *r, const mcpg_call_outcome *oc) {
    mcpg_json_span a;
    if (h->json_object_get(oc->result, oc->result_len, "resourceSubscriptions", &a) != 1 ||
        a.type != MCPG_JSON_ARRAY)
        return 0;
    size_t at = r->data.len;
    if (h->buf_append(&r->data, a.p, a.n) != 0) return MCPG_ENOMEM;
    r->authz_off = (uint32_t)at;
    r->authz_len = (uint32_t)a.n;
    return 0;
}

/* A subscription the pipeline (identity, policy) was asked about: a legacy
 * resources/subscribe, or a stateless listen's resourceSubscriptions. A
 * refusal is answered like any call's error; an allowance sends the request
 * through its handler again, now to subscribe. */
static void on_authz_complete(void *ctx, mcpg_call *call) {
    th_req *r = ctx;
    th_conn *c = r->conn;
    const mcpg_host *host = r->ws->mod->host;
    mcpg_call_outcome oc = {.size = sizeof oc};
    host->call_outcome(call, &oc);
    if (oc.is_error || !c || c->closing) {
        /* a refusal names no session: one of another caller is answered
         * exactly as one the gateway does not know */
        r->sid[0] = '\0';
        on_call_complete(ctx, call);
        return;
    }
    int rc = keep_allowed_uris(host, r, &oc);
    /* ABI 1.6: who passed, for an initialize to bind its session to */
    size_t on = 0;
    const char *owner = MCPG_HOST_HAS(host, call_owner) ? host->call_owner(call, &on) : NULL;
    r->extra.len = 0;
    if (owner && host->buf_append(&r->extra, owner, on)) rc = MCPG_ENOMEM;
    host->call_release(call);
    r->call = NULL;
    r->authz = 2;
    if (rc) c->close_after = 1; /* out of memory: no subscription made */
    if (r->in_submit) {
        r->authz_again = 1;
        return;
    }
    th_legacy_again(r);
}

static void submit_failed(th_conn *c, th_req *r, int rc) {
    th_piece id = {r->desc.id_json, r->desc.id_len};
    if (rc == MCPG_EAGAIN)
        th_respond_rpc_error(c, r, 503, 1, id, MCPG_RPC_SERVER_ERROR,
                          MSG("Server busy: too many calls in flight, retry later"), NULL, 0);
    else if (rc == MCPG_EUNAVAIL)
        th_respond_rpc_error(c, r, 503, 0, id, MCPG_RPC_SERVER_ERROR,
                          MSG("Service unavailable: the gateway is draining"), NULL, 0);
    else
        th_respond_rpc_error(c, r, 500, 0, id, MCPG_RPC_INTERNAL_ERROR, MSG("Internal error"), NULL, 0);
}

/* Fill in what every call's description carries (who is on the line, how
 * the kernel answers) and hand it over: to the events pipeline for an event
 * webhook, else as an MCP call. A refusal is answered by `refused`. */
static void submit_call(th_conn *c, th_req *r, void (*complete)(void *, mcpg_call *),
                        void (*refused)(th_conn *, th_req *, int)) {
    th_worker_state *ws = c->ws;
    mcpg_call_desc *d = &r->desc;
    d->size = (uint32_t)sizeof *d;
    /* ABI 1.2: who is on the line; copied or referenced, as the call may
     * outlive its connection (a resumable legacy stream) */
    memcpy(r->peer, c->peer, c->peer_len + 1u);
    d->peer = c->peer_len ? r->peer : NULL;
    d->peer_len = c->peer_len;
    th_tls_facts_unref(ws->mod->host, r->facts);
    r->facts = th_tls_facts_ref(c->tls.facts);
    d->tls = r->facts ? &r->facts->info : NULL;
    /* ABI 1.12: the virtual server it came in on, whose bindings and
     * pipeline serve it (none: the gateway's /mcp); r keeps the name */
    d->server = r->server_len ? r->server : NULL;
    d->server_len = r->server_len;
    d->transport_ctx = r;
    d->header = req_header;
    d->complete = complete;
    d->message = on_call_message;
    r->state = TH_REQ_INFLIGHT;
    r->in_submit = 1;
    c->inflight++;
    const mcpg_host *host = ws->mod->host;
    int rc = r->event_webhook ? host->webhook_submit(ws->w, d, &r->call)
                              : host->call_submit(ws->w, d, &r->call);
    r->in_submit = 0;
    if (rc < 0) {
        c->inflight--;
        r->call = NULL;
        refused(c, r, rc);
    } else if (r->state == TH_REQ_DONE) {
        r->call = NULL; /* completed and released inside call_submit */
    }
}

void th_submit(th_conn *c, th_req *r) {
    submit_call(c, r, r->authz == 1 ? on_authz_complete : on_call_complete, submit_failed);
}

void th_submit_event(th_conn *c, th_req *r, void (*complete)(void *, mcpg_call *),
                     void (*refused)(th_conn *, th_req *, int)) {
    r->event_webhook = 1;
    submit_call(c, r, complete, refused);
}
