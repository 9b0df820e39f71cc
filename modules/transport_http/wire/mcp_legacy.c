/* transport_http: the session-based wire, 2025-11-25 (and 2025-06-18,
 * 2025-03-26 when a client asks), on POST, GET and DELETE /mcp (the
 * Streamable HTTP transport with sessions).
 *
 * initialize mints a session (session.h); every later request names it in
 * Mcp-Session-Id (400 without, 404/-32001 when unknown or ended). A POST
 * with a request is answered as an SSE stream (event ids <worker>_<stream>
 * _<seq>, a priming event with retry: for clients at >= 2025-11-25), or as
 * one JSON body with unary_json_fast_path while the call has sent no
 * message. Notifications and client responses get 202. GET opens the
 * session's one standalone stream (409 for a second) for news. DELETE ends
 * the session. Sessions live on the coordinator (session.h): a step that
 * needs it parks the request, and the handler runs again on its answer
 * (the steps done are flagged in the request). */
#include "wire/wire.h"
#include "wire/legacy_parse.h"
#include "wire/replay.h"
#include "wire/stream.h"

#include <stdio.h>
#include <string.h>

#define MSG(s) TH_LIT("\"" s "\"")
#define TH_RETRY_MS 1000 /* the priming event's retry: */
#define TH_STR_(x) #x
#define TH_STR(x) TH_STR_(x) /* a number as string text, at compile time */

static const char *const k_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};
#define TH_LEGACY_LATEST "2025-11-25"

static int version_known(const char *p, size_t n) {
    for (size_t i = 0; i < sizeof k_versions / sizeof *k_versions; i++)
        if (strlen(k_versions[i]) == n && !memcmp(k_versions[i], p, n)) return 1;
    return 0;
}

static th_piece raw(const mcpg_json_span *s) {
    if (s->type == MCPG_JSON_STRING) return (th_piece){s->p - 1, s->n + 2};
    return (th_piece){s->p, s->n};
}

static int method_is(const mcpg_host *h, const th_lmsg *m, const char *lit) {
    return h->json_string_eq(&m->method, lit, strlen(lit)) == 1;
}

static void error(th_conn *c, th_req *r, int status, th_piece id, int64_t code, th_piece msg) {
    th_respond_rpc_error(c, r, status, 0, id, code, msg, NULL, 0);
}

static void accepted(th_conn *c, th_req *r) {
    th_resp_head hd = {.status = 202};
    th_respond(c, r, &hd, NULL, 0);
}

static void answer_body(th_conn *c, th_req *r, mcpg_buf *b);

/* A JSON-RPC error inside a 200 answer (as a handler's error is). */
static void answer_error_json(th_conn *c, th_req *r, th_piece id, int64_t code, const char *msg) {
    const mcpg_host *h = c->ws->mod->host;
    mcpg_buf *b = &c->ws->msg_body;
    b->len = 0;
    int rc = h->buf_append(b, "{\"jsonrpc\":\"2.0\",\"id\":", 22);
    rc |= h->buf_append(b, id.p, id.n);
    rc |= h->buf_printf(b, ",\"error\":{\"code\":%lld,\"message\":", (long long)code);
    rc |= h->buf_append_json_string(b, msg, strlen(msg));
    rc |= h->buf_append(b, "}}", 2);
    if (rc) th_respond_status_error(c, r, 503);
    else answer_body(c, r, b);
}

/* A result answered by the transport itself (initialize, ping, setLevel,
 * subscribe): JSON with the fast path, else a one-event stream. */
static void answer_result(th_conn *c, th_req *r, th_piece id, const char *result, size_t n) {
    th_worker_state *ws = c->ws;
    const mcpg_host *h = ws->mod->host;
    mcpg_buf *b = &ws->msg_body;
    b->len = 0;
    int rc = h->buf_append(b, "{\"jsonrpc\":\"2.0\",\"id\":", 22);
    rc |= h->buf_append(b, id.p, id.n);
    rc |= h->buf_append(b, ",\"result\":", 10);
    rc |= h->buf_append(b, result, n);
    rc |= h->buf_append(b, "}", 1);
    if (rc) th_respond_status_error(c, r, 503);
    else answer_body(c, r, b);
}

/* One whole message as the answer: JSON with the fast path, else a stream. */
static void answer_body(th_conn *c, th_req *r, mcpg_buf *b) {
    th_worker_state *ws = c->ws;
    if (ws->mod->cfg->unary_json_fast_path) {
        th_resp_head hd = {.status = 200, .json = 1};
        th_piece body = {b->data, b->len};
        th_respond(c, r, &hd, &body, 1);
        return;
    }
    if (th_legacy_stream_begin(c, r)) return;
    th_sse_end(c, r, NULL, 0, b->data, b->len);
}

int th_legacy_stream_begin(th_conn *c, th_req *r) {
    th_worker_state *ws = c->ws;
    if (r->sse) return 0;
    /* a call's stream keeps its events for a client that comes back */
    th_cached_session *e = r->resumable ? th_sess_peek(ws, r->sid, strlen(r->sid)) : NULL;
    th_rstream *rs = r->resumable == TH_RESUMABLE_CALL ? th_replay_open(ws, r, e)
                     : r->resumable == TH_RESUMABLE_NEWS ? th_replay_open_news(ws, r, e)
                                                         : NULL;
    if (!rs) {
        r->stream_no = ++ws->streams_made;
        r->ev_seq = 0;
    }
    int rc = th_sse_begin(c, r);
    /* clients at 2025-11-25 reconnect after a dropped stream; tell them when */
    if (!rc && strcmp(r->version, "2025-11-25") >= 0) {
        char prime[96];
        size_t n = 4;
        memcpy(prime, "id: ", 4);
        n += th_event_id(prime + n, ws, rs ? rs->no : r->stream_no,
                         rs ? rs->seq++ : r->ev_seq++);
        static const char tail[] = "\nretry: " TH_STR(TH_RETRY_MS) "\ndata: \n\n";
        memcpy(prime + n, tail, sizeof tail - 1);
        rc = th_sse_raw(c, r, prime, n + sizeof tail - 1);
    } else if (rs) {
        rs->seq++; /* seq 0 is the priming event's, sent or not */
    }
    return rc;
}

void th_legacy_park(th_req *r) {
    r->state = TH_REQ_INFLIGHT;
    r->conn->inflight++; /* the connection outlives the answer */
}

void th_legacy_again(th_req *r) {
    th_conn *c = r->conn;
    if (!th_conn_answer_back(c, r)) return;
    r->state = TH_REQ_PARSING;
    if (r->http_method == HTTP_POST) th_handle_mcp(c, r); /* routes it as the first time */
    else if (r->http_method == HTTP_GET) th_legacy_get(c, r);
    else th_legacy_delete(c, r);
    th_conn_advance(c);
}

/* ---- the session of a request ---------------------------------------------- */

/* The session's store did not answer (down, unreachable, its queue full). A
 * later try may find the session there: 503 with Retry-After, never the 404
 * that tells a client its session is gone and to start another (it would
 * drop a session that is still there once the store is back). */
static int store_unanswered(int rc) {
    return rc == MCPG_EUNAVAIL || rc == MCPG_ETIMEDOUT || rc == MCPG_EAGAIN;
}

static void session_unavailable(th_conn *c, th_req *r, th_piece id) {
    th_respond_rpc_error(c, r, 503, 1, id, MCPG_RPC_SERVER_ERROR,
                         MSG("Service Unavailable: the session's store (the gateway's "
                             "coordinator) does not answer: retry later"), NULL, 0);
}

/* A session r may not see: one initialized on another server's path (a
 * virtual server's, or the gateway's /mcp). A session's server never
 * changes, so the entry cached, however old, says. */
static int other_server(const th_req *r, const th_cached_session *e) {
    return e && !th_req_same_server(r, e->server);
}

/* Mcp-Session-Id: present (else 400) and known on r's server (else
 * 404/-32001); on success the request carries its id, version and level.
 * 0: answered, or parked until the coordinator has answered. */
static int session_of(th_conn *c, th_req *r, th_piece id) {
    th_worker_state *ws = c->ws;
    th_hval s;
    th_fill_header(r, TH_H_SESSION_ID, &s);
    if (!s.present || s.dup) {
        error(c, r, 400, id, MCPG_RPC_SERVER_ERROR,
              MSG("Bad Request: the Mcp-Session-Id header is required (send initialize first)"));
        return 0;
    }
    /* another server's session is answered as one that does not exist
     * (the same 404 and body below), before it is used or renewed */
    if (other_server(r, th_sess_peek(ws, s.p, s.n))) {
        error(c, r, 404, id, -32001, MSG("Session not found"));
        return 0;
    }
    th_cached_session *e = th_sess_cached(ws, s.p, s.n);
    if (!e && r->loaded && !r->session_op_status) e = th_sess_peek(ws, s.p, s.n); /* just read */
    if (!e && !r->loaded) {
        r->loaded = 1;
        int rc = th_sess_load(ws, r, s.p, s.n);
        if (rc == 0) return 0; /* parked */
        r->session_op_status = ws->mod->co_ops ? rc : MCPG_ENOENT; /* no store: no session is known */
    }
    if (!e && store_unanswered(r->session_op_status)) {
        session_unavailable(c, r, id);
        return 0;
    }
    if (!e || other_server(r, e)) { /* just read: its server known only now */
        error(c, r, 404, id, -32001, MSG("Session not found"));
        return 0;
    }
    memcpy(r->sid, e->sid, TH_SID_LEN + 1);
    memcpy(r->version, e->version, sizeof r->version);
    r->level = e->level;
    r->legacy = 1;
    return 1;
}

/* A session change (session.h) for r: 1 when its answer is known (in
 * r->session_op_status), 0 when r is parked until it is. */
static int change(th_conn *c, th_req *r, th_sess_change_kind k, int level, const char *uri, size_t un) {
    if (r->changed) return 1;
    r->changed = 1;
    int rc = th_sess_change(c->ws, r, r->sid, k, level, uri, un);
    if (rc == 1) return 0;
    r->session_op_status = rc;
    return 1;
}

/* MCP-Protocol-Version, if sent, is one this wire speaks (400 else). */
static int version_ok(th_conn *c, th_req *r, th_piece id) {
    th_hval v;
    th_fill_header(r, TH_H_PROTOCOL_VERSION, &v);
    if (!v.present || (!v.dup && version_known(v.p, v.n))) return 1;
    error(c, r, 400, id, MCPG_RPC_SERVER_ERROR,
          MSG("Bad Request: unsupported MCP-Protocol-Version (supported: 2025-11-25, 2025-06-18, "
              "2025-03-26, and 2026-07-28 with its _meta envelope)"));
    return 0;
}

/* ---- identity for what this wire answers itself (ABI 1.6) ------------------------ */

/* The session's owner, decoded into r->extra after what is there: its
 * pointer and length in *p, *n (0: none recorded, which is anonymous). The
 * caller reads r->extra's other contents before calling. */
static void owner_of_session(th_worker_state *ws, th_req *r, const char **p, size_t *n) {
    th_cached_session *e = th_sess_peek(ws, r->sid, strlen(r->sid));
    size_t at = r->extra.len;
    *p = "", *n = 0;
    if (e && th_sess_owner(ws, e, &r->extra) == 0) {
        *n = r->extra.len - at;
        *p = *n ? r->extra.data + at : "";
    }
}

/* Hand the kernel a request this wire answers itself, so that it passes the
 * identity stage (and, on a session, the owner check): `method` is
 * "initialize" or MCPG_SESSION_METHOD. The kernel answers {} or refuses;
 * on_authz_complete brings r back here (r->authz 2), or answers the refusal. */
static void submit_identity(th_conn *c, th_req *r, const char *method, th_piece id, const th_lmsg *m) {
    th_worker_state *ws = c->ws;
    mcpg_call_desc *d = &r->desc;
    memset(d, 0, sizeof *d);
    d->wire = MCPG_WIRE_LEGACY;
    d->method = method;
    d->method_len = strlen(method);
    d->id_json = id.p;
    d->id_len = id.n;
    if (m && (m->has & 4)) d->params_json = m->params.p, d->params_len = m->params.n;
    r->extra.len = 0;
    if (r->sid[0]) {
        d->session_id = r->sid;
        d->session_id_len = strlen(r->sid);
        owner_of_session(ws, r, &d->session_owner, &d->session_owner_len);
        d->protocol_version = r->version;
        d->protocol_version_len = strlen(r->version);
    }
    r->resumable = 0;
    r->sse_ok = 0; /* a refusal is one JSON body */
    th_submit(c, r);
}

/* 1 when r has passed identity (go on); 0 when it is parked on the kernel
 * or was answered (refused). */
static int identified(th_conn *c, th_req *r, const char *method, th_piece id, const th_lmsg *m) {
    if (r->authz == 2) return 1;
    r->authz = 1;
    submit_identity(c, r, method, id, m);
    if (r->authz_again) { /* passed inside call_submit */
        r->authz_again = 0;
        th_legacy_again(r);
    }
    return 0;
}

/* A request on the session r names, answered by this wire: identity first. */
static int session_caller_ok(th_conn *c, th_req *r, th_piece id, const th_lmsg *m) {
    return identified(c, r, MCPG_SESSION_METHOD, id, m);
}

/* ---- initialize ------------------------------------------------------------------ */

static void initialize(th_conn *c, th_req *r, const th_lmsg *m, th_piece id) {
    th_worker_state *ws = c->ws;
    th_mod *mod = ws->mod;
    const mcpg_host *h = mod->host;
    if (r->known[TH_H_SESSION_ID]) {
        error(c, r, 400, id, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: the session is already initialized"));
        return;
    }
    mcpg_json_span pv = {0}, caps = {0};
    if (m->has & 4) {
        h->json_object_get(m->params.p, m->params.n, "protocolVersion", &pv);
        h->json_object_get(m->params.p, m->params.n, "capabilities", &caps);
    }
    const char *version = TH_LEGACY_LATEST; /* what we answer a version we do not speak */
    for (size_t i = 0; i < sizeof k_versions / sizeof *k_versions; i++)
        if (pv.type == MCPG_JSON_STRING && h->json_string_eq(&pv, k_versions[i], strlen(k_versions[i])) == 1)
            version = k_versions[i];
    int obj = caps.type == MCPG_JSON_OBJECT;
    snprintf(r->version, sizeof r->version, "%s", version);
    /* who opens the session owns it: identity first (on_authz_complete
     * leaves the caller's owner text in r->extra) */
    if (!identified(c, r, "initialize", id, m)) return;
    int rc;
    if (!r->changed) {
        r->changed = 1;
        rc = th_sess_create(ws, r, obj ? caps.p : NULL, obj ? caps.n : 0, r->extra.data, r->extra.len);
        if (rc == 0) return; /* parked until the coordinator answers */
    } else {
        rc = r->session_op_status;
    }
    if (rc == MCPG_EAGAIN) {
        th_respond_rpc_error(c, r, 503, 5, id, MCPG_RPC_SERVER_ERROR,
                             MSG("Too many open sessions (gateway.server.max_sessions): retry later"), NULL, 0);
        return;
    }
    if (rc == MCPG_ERANGE) { /* this caller's own cap: others still get theirs */
        th_respond_rpc_error(c, r, 429, 5, id, MCPG_RPC_SERVER_ERROR,
                             MSG("Too many open sessions of this caller "
                                 "(gateway.server.max_sessions_per_principal): end one, or retry later"),
                             NULL, 0);
        return;
    }
    if (rc == MCPG_EUNAVAIL || rc == MCPG_ETIMEDOUT) {
        /* no coordinator, or a fleet's store unreachable (Redis down): a later
         * try may find it back */
        th_respond_rpc_error(c, r, 503, 1, id, MCPG_RPC_SERVER_ERROR,
                             MSG("Service Unavailable: sessions need the gateway's coordinator, "
                                 "which does not answer: retry later"), NULL, 0);
        return;
    }
    if (rc) {
        th_respond_status_error(c, r, 503);
        return;
    }
    r->legacy = 1;
    mcpg_buf *b = &ws->scratch;
    b->len = 0;
    rc = h->buf_printf(b, "{\"protocolVersion\":\"%s\",\"capabilities\":", version);
    rc |= th_caps_append(mod, r, b, 1);
    rc |= h->buf_printf(b, ",\"serverInfo\":%s", th_req_server_info(mod, r).p);
    th_piece instr = th_req_instructions(r); /* a virtual server's, for the client's model */
    if (instr.n) {
        rc |= h->buf_append(b, ",\"instructions\":", 16);
        rc |= h->buf_append(b, instr.p, instr.n);
    }
    rc |= h->buf_append(b, "}", 1);
    if (rc) th_respond_status_error(c, r, 503);
    else answer_result(c, r, id, b->data, b->len);
}

/* ---- requests handled here ------------------------------------------------------- */

static void set_level(th_conn *c, th_req *r, const th_lmsg *m, th_piece id) {
    const mcpg_host *h = c->ws->mod->host;
    mcpg_json_span lv;
    int level = -1;
    if ((m->has & 4) && h->json_object_get(m->params.p, m->params.n, "level", &lv) == 1 &&
        lv.type == MCPG_JSON_STRING)
        level = th_log_level_of(lv.p, lv.n);
    if (level < 0) {
        answer_error_json(c, r, id, MCPG_RPC_INVALID_PARAMS, "Invalid params: level must be a logging level");
        return;
    }
    if (!change(c, r, TH_SC_LEVEL, level, NULL, 0)) return;
    if (r->session_op_status < 0) answer_error_json(c, r, id, MCPG_RPC_INTERNAL_ERROR, "Internal error: the session could not be changed");
    else answer_result(c, r, id, "{}", 2);
}

static void to_kernel(th_conn *c, th_req *r, const th_lmsg *m, th_piece id);

/* A subscription passes identity and policy first, as a call of its own
 * (the kernel answers it {} when both let it through); then the request is
 * handled again (r->authz 2) to change the session. Giving one up needs no
 * leave. */
static int subscribe_allowed(th_conn *c, th_req *r, const th_lmsg *m, th_piece id) {
    if (r->authz == 2) return 1;
    r->authz = 1;
    to_kernel(c, r, m, id);
    if (r->authz_again) { /* allowed inside call_submit */
        r->authz_again = 0;
        th_legacy_again(r);
    }
    return 0;
}

static void subscribe(th_conn *c, th_req *r, const th_lmsg *m, th_piece id, int on) {
    th_worker_state *ws = c->ws;
    const mcpg_host *h = ws->mod->host;
    mcpg_json_span u;
    char uri[1024];
    size_t un = 0;
    if (!(m->has & 4) || h->json_object_get(m->params.p, m->params.n, "uri", &u) != 1 ||
        u.type != MCPG_JSON_STRING || h->json_string_decode(&u, uri, sizeof uri, &un) < 0) {
        answer_error_json(c, r, id, MCPG_RPC_INVALID_PARAMS, "Invalid params: a string params.uri is required");
        return;
    }
    if (on && !subscribe_allowed(c, r, m, id)) return;
    if (!change(c, r, on ? TH_SC_SUBSCRIBE : TH_SC_UNSUBSCRIBE, 0, uri, un)) return;
    int rc = r->session_op_status;
    if (rc == MCPG_EAGAIN) {
        answer_error_json(c, r, id, MCPG_RPC_SERVER_ERROR, "Too many subscriptions in this session");
        return;
    }
    if (rc < 0) {
        answer_error_json(c, r, id, MCPG_RPC_INTERNAL_ERROR, "Internal error: the session could not be changed");
        return;
    }
    /* the backend that owns it hears of the first subscriber and the last */
    if (rc == 1 && MCPG_HOST_HAS(h, resource_subscribe)) (void)h->resource_subscribe(ws->w, uri, un, on);
    answer_result(c, r, id, "{}", 2);
}

/* notifications/cancelled: the session's call with that request id is
 * cancelled on whichever loop runs it (its answer still comes, as an error). */
static void cancel_request(th_conn *c, th_req *r, const th_lmsg *m) {
    const mcpg_host *h = c->ws->mod->host;
    mcpg_json_span rid;
    if (!(m->has & 4) || h->json_object_get(m->params.p, m->params.n, "requestId", &rid) != 1) return;
    th_piece want = raw(&rid);
    th_sess_cancel(c->ws, r->sid, want.p, want.n);
}

static int cancel_match(const th_req *q, const char *sid, const char *id, size_t idn) {
    return q->call && q->state == TH_REQ_INFLIGHT && q->legacy && !strcmp(q->sid, sid) &&
           q->desc.id_len == idn && !memcmp(q->desc.id_json, id, idn);
}

void th_legacy_cancel_local(th_worker_state *ws, const char *sid, const char *id, size_t idn) {
    const mcpg_host *h = ws->mod->host;
    for (th_conn *k = ws->conns; k; k = k->next)
        for (th_req *q = k->qhead; q; q = q->next)
            if (cancel_match(q, sid, id, idn)) h->call_cancel(q->call);
    for (th_req *q = ws->orphans; q; q = q->onext)
        if (cancel_match(q, sid, id, idn)) h->call_cancel(q->call);
}

/* ---- everything else goes to the kernel ------------------------------------------ */

static int stream_waiting(const th_worker_state *ws, const th_req *r);

static void to_kernel(th_conn *c, th_req *r, const th_lmsg *m, th_piece id) {
    th_worker_state *ws = c->ws;
    const mcpg_host *h = ws->mod->host;
    mcpg_call_desc *d = &r->desc;
    memset(d, 0, sizeof *d);
    d->wire = MCPG_WIRE_LEGACY;
    d->method = m->method.p;
    d->method_len = m->method.n;
    d->id_json = id.p;
    d->id_len = id.n;
    th_lmsg_target(h, m, r->name_buf, TH_NAME_MAX, d);
    d->session_id = r->sid;
    d->session_id_len = strlen(r->sid);
    d->protocol_version = r->version;
    d->protocol_version_len = strlen(r->version);
    /* the capabilities live in the session row: a copy kept with the request
     * (its own buffer: the spans above point into r->data) */
    th_cached_session *e = th_sess_peek(ws, r->sid, d->session_id_len);
    r->extra.len = 0;
    size_t caps_n = 0;
    if (e && e->caps_len && !h->buf_append(&r->extra, e->row.data + e->caps_off, e->caps_len))
        caps_n = r->extra.len;
    /* ABI 1.6: the kernel lets only the session's owner use it */
    owner_of_session(ws, r, &d->session_owner, &d->session_owner_len);
    if (caps_n) {
        d->client_caps_json = r->extra.data; /* r->extra is final: the pointers hold */
        d->client_caps_len = caps_n;
    }
    if (d->session_owner_len) d->session_owner = r->extra.data + caps_n;
    /* a subscription's question has no stream to resume; an events/stream
     * is resumed by its cursor, in a new events/stream (the extension's
     * way), so a dropped one ends at once rather than buffering events */
    r->resumable = r->authz != 1 &&
                   !(d->method_len == 13 && !memcmp(d->method, "events/stream", 13));
    r->stamp = 0; /* 2025 results carry no resultType */
    r->sse_ok = r->authz != 1; /* a refused subscription is answered as one JSON body */
    /* The stream starts with the call's first message, or with its outcome
     * (head, priming event and result in one write), or after TH_PRIME_MS
     * for a call that is silent that long (prime_waiting). */
    th_submit(c, r);
    if (stream_waiting(ws, r)) th_legacy_prime_soon(ws);
}

/* A request (with a method) the kernel is handed: it passes identity
 * there. resources/subscribe is handed as its own call first. */
static int goes_to_kernel(const mcpg_host *h, const th_lmsg *m) {
    if (!(m->has & 2) || m->method.type != MCPG_JSON_STRING || !(m->has & 1)) return 0;
    return !method_is(h, m, "ping") && !method_is(h, m, "logging/setLevel") &&
           !method_is(h, m, "resources/unsubscribe");
}

void th_legacy_post(th_conn *c, th_req *r) {
    const mcpg_host *h = c->ws->mod->host;
    th_hval ct, acc;
    th_fill_header(r, TH_H_CONTENT_TYPE, &ct);
    th_fill_header(r, TH_H_ACCEPT, &acc);
    th_piece null_id = TH_LIT("null");
    if (!acc.present || !th_accept_allows_json(acc.p, acc.n) || !th_accept_allows_sse(acc.p, acc.n)) {
        error(c, r, 406, null_id, MCPG_RPC_SERVER_ERROR,
              MSG("Not Acceptable: Accept must allow both application/json and text/event-stream"));
        return;
    }
    if (!ct.present || ct.dup || !th_content_type_is_json(ct.p, ct.n)) {
        error(c, r, 415, null_id, MCPG_RPC_SERVER_ERROR, MSG("Unsupported Media Type: Content-Type must be application/json"));
        return;
    }
    th_lmsg m;
    const char *body = r->data.data + r->body_off;
    size_t n = r->body_len;
    while (n && (body[0] == ' ' || body[0] == '\n' || body[0] == '\r' || body[0] == '\t')) body++, n--;
    int pr = th_lmsg_parse(h, body, n, &m);
    if (pr < 0) {
        error(c, r, 400, null_id, MCPG_RPC_PARSE_ERROR, MSG("Parse error: the body is not valid JSON"));
        return;
    }
    th_piece id = (m.has & 1) && (m.id.type == MCPG_JSON_STRING || m.id.type == MCPG_JSON_NUMBER)
                      ? raw(&m.id) : null_id;
    if (pr == 0 || !(m.has & 32)) {
        error(c, r, 400, id, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: one JSON-RPC 2.0 message object"));
        return;
    }
    if (m.dup) {
        error(c, r, 400, id, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: duplicate member"));
        return;
    }
    if (!version_ok(c, r, id)) return;
    if ((m.has & 2) && m.method.type == MCPG_JSON_STRING && method_is(h, &m, "initialize")) {
        initialize(c, r, &m, id);
        return;
    }
    if (!session_of(c, r, id)) return;
    /* what this wire answers itself passes identity here; what goes to the
     * kernel passes it there (subscribe too, as its own call) */
    if (!goes_to_kernel(h, &m) && !session_caller_ok(c, r, id, &m)) return;
    if (!(m.has & 2)) { /* a client's response to a server-to-client request */
        if ((m.has & (8 | 16)) && MCPG_HOST_HAS(h, reply_submit))
            (void)h->reply_submit(c->ws->w, r->sid, strlen(r->sid), body, n);
        accepted(c, r);
        return;
    }
    if (m.method.type != MCPG_JSON_STRING) {
        error(c, r, 400, id, MCPG_RPC_INVALID_REQUEST, MSG("Invalid Request: method must be a string"));
        return;
    }
    if (!(m.has & 1)) { /* a notification */
        if (method_is(h, &m, "notifications/cancelled")) cancel_request(c, r, &m);
        accepted(c, r);
        return;
    }
    if (method_is(h, &m, "ping")) answer_result(c, r, id, "{}", 2);
    else if (method_is(h, &m, "logging/setLevel")) set_level(c, r, &m, id);
    else if (method_is(h, &m, "resources/subscribe")) subscribe(c, r, &m, id, 1);
    else if (method_is(h, &m, "resources/unsubscribe")) subscribe(c, r, &m, id, 0);
    else to_kernel(c, r, &m, id);
}

/* ---- GET: the session's standalone stream; DELETE ---------------------------- */


void th_legacy_get(th_conn *c, th_req *r) {
    th_hval acc, last;
    th_fill_header(r, TH_H_ACCEPT, &acc);
    th_piece null_id = TH_LIT("null");
    if (!acc.present || !th_accept_allows_sse(acc.p, acc.n)) {
        error(c, r, 406, null_id, MCPG_RPC_SERVER_ERROR, MSG("Not Acceptable: Accept must allow text/event-stream"));
        return;
    }
    if (!version_ok(c, r, null_id) || !session_of(c, r, null_id) ||
        !session_caller_ok(c, r, null_id, NULL))
        return;
    th_fill_header(r, TH_H_LAST_EVENT_ID, &last);
    if (last.present) { /* a dropped stream, resumed */
        th_resume(c, r, last.dup ? "" : last.p, last.dup ? 0 : last.n);
        return;
    }
    if (!change(c, r, TH_SC_GET_OPEN, 0, NULL, 0)) return;
    if (r->session_op_status == MCPG_EEXIST) {
        error(c, r, 409, null_id, MCPG_RPC_SERVER_ERROR, MSG("Conflict: this session already has a GET stream"));
        return;
    }
    if (store_unanswered(r->session_op_status)) {
        session_unavailable(c, r, null_id);
        return;
    }
    th_cached_session *e = th_sess_peek(c->ws, r->sid, strlen(r->sid));
    if (r->session_op_status < 0 || !e) {
        error(c, r, 404, null_id, -32001, MSG("Session not found"));
        return;
    }
    e->nget++;
    r->state = TH_REQ_INFLIGHT;
    r->desc.id_json = NULL;
    th_listener_add(c->ws, r);
    r->resumable = TH_RESUMABLE_NEWS; /* what it misses once gone is kept for a GET that resumes */
    if (th_legacy_stream_begin(c, r)) c->close_after = 1;
}

/* A legacy answer that is to be a stream and has not started. */
static int stream_waiting(const th_worker_state *ws, const th_req *r) {
    return r->legacy && r->sse_ok && !r->sse && r->state == TH_REQ_INFLIGHT &&
           !ws->mod->cfg->unary_json_fast_path;
}

int th_legacy_stream_due(th_conn *c, th_req *r) {
    if (!stream_waiting(c->ws, r) || c->closing) return 0;
    return th_legacy_stream_begin(c, r) ? -1 : 1;
}

/* From the prime timer: calls silent since it was set start their streams,
 * so their client holds an event id to resume from. A call submitted after
 * the timer was set may begin early (up to TH_PRIME_MS): harmless. */
static void prime_waiting(uv_timer_t *t) {
    th_worker_state *ws = t->data;
    for (th_conn *c = ws->conns; c; c = c->next)
        for (th_req *q = c->qhead; q && !c->closing; q = q->next)
            if (th_legacy_stream_due(c, q) < 0) c->close_after = 1;
}

/* The prime timer is the loop's (its handle opens and closes with the
 * worker's others); the legacy wire alone starts it. */
void th_legacy_prime_soon(th_worker_state *ws) {
    if (ws->started && !uv_is_active((uv_handle_t *)&ws->prime))
        uv_timer_start(&ws->prime, prime_waiting, TH_PRIME_MS, 0);
}

void th_legacy_end_streams(th_worker_state *ws, const char *sid) {
    for (th_req *q = ws->listeners, *next; q; q = next) {
        next = q->lnext;
        if (!q->legacy || strcmp(q->sid, sid)) continue;
        th_conn *qc = q->conn;
        th_listener_remove(ws, q);
        th_sse_end(qc, q, NULL, 0, NULL, 0);
        th_conn_advance(qc);
    }
}

void th_legacy_delete(th_conn *c, th_req *r) {
    th_piece null_id = TH_LIT("null");
    if (!r->changed) { /* (once deleted, the session is no longer there to look up) */
        if (!version_ok(c, r, null_id) || !session_of(c, r, null_id) ||
            !session_caller_ok(c, r, null_id, NULL))
            return;
        /* every loop hears of it (mcpg.session.end): caches, streams, buffers go */
        r->changed = 1;
        int rc = th_sess_delete(c->ws, r, r->sid);
        if (rc == 0) return; /* parked */
        r->session_op_status = rc;
    }
    if (r->session_op_status == MCPG_ENOENT) {
        error(c, r, 404, null_id, -32001, MSG("Session not found"));
        return;
    }
    if (r->session_op_status < 0) {
        th_respond_status_error(c, r, 503);
        return;
    }
    r->sid[0] = '\0'; /* the answer names no session */
    th_resp_head hd = {.status = 200};
    th_respond(c, r, &hd, NULL, 0);
}
