/* transport_http: what each complete request gets. Health routes and every
 * error are answered here at once; MCP calls go to the kernel and are
 * answered from complete(). Replies are written through respond.c. */
#include "internal.h"
#include "wire/replay.h"
#include "wire/stream.h"

#include <stdio.h>
#include <string.h>

#define MSG(s) TH_LIT("\"" s "\"")

static void respond_plain_json(th_conn *c, th_req *r, int status, th_piece body,
                               const char *allow) {
    th_resp_head hd = {.status = status, .json = 1, .allow = allow};
    th_respond(c, r, &hd, &body, 1);
}

static void respond_not_allowed(th_conn *c, th_req *r, const char *allow) {
    th_piece body[TH_MAX_PIECES];
    char codebuf[24];
    size_t n = th_rpc_error_body(body, TH_LIT("null"), codebuf, MCPG_RPC_INVALID_REQUEST,
                                 MSG("Method Not Allowed"), NULL, 0);
    th_resp_head hd = {.status = 405, .json = 1, .allow = allow};
    th_respond(c, r, &hd, body, n);
}

/* ---- calls ----------------------------------------------------------------- */

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
static mcpg_buf *join(th_wslot *ws, const th_piece *body, size_t n) {
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
static void write_outcome(th_wslot *ws, th_conn *c, th_req *r, const mcpg_call_outcome *oc) {
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
        th_piece info = th_server_info(ws->mod);
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

/* desc.complete: the kernel has the outcome; answer (or just let go if the
 * client is gone). Runs on the connection's loop thread. */
static void on_call_complete(void *ctx, mcpg_call *call) {
    th_req *r = ctx;
    th_conn *c = r->conn;
    th_wslot *ws = r->ws;
    const mcpg_host *host = ws->mod->host;
    mcpg_call_outcome oc;
    if (!c) { /* its client dropped the stream: the result is kept for its return */
        th_replay_orphan_remove(ws, r);
        memset(&oc, 0, sizeof oc);
        oc.size = sizeof oc;
        host->call_outcome(call, &oc);
        write_outcome(ws, NULL, r, &oc);
        host->call_release(call);
        r->call = NULL;
        th_req_put(ws, r);
        return;
    }
    c->inflight--;
    if (c->closing) {
        host->call_release(call);
        r->call = NULL;
        r->state = TH_REQ_DONE;
        th_conn_maybe_free(c);
        return;
    }
    memset(&oc, 0, sizeof oc);
    oc.size = sizeof oc;
    host->call_outcome(call, &oc);
    write_outcome(ws, c, r, &oc);
    host->call_release(call);
    r->call = NULL;
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

static void submit_failed(th_conn *c, th_req *r, int rc, th_piece id) {
    if (rc == MCPG_EAGAIN)
        th_respond_rpc_error(c, r, 503, 1, id, MCPG_RPC_SERVER_ERROR,
                          MSG("Server busy: too many calls in flight, retry later"), NULL, 0);
    else if (rc == MCPG_EUNAVAIL)
        th_respond_rpc_error(c, r, 503, 0, id, MCPG_RPC_SERVER_ERROR,
                          MSG("Service unavailable: the gateway is draining"), NULL, 0);
    else
        th_respond_rpc_error(c, r, 500, 0, id, MCPG_RPC_INTERNAL_ERROR, MSG("Internal error"), NULL, 0);
}

static void submit(th_conn *c, th_req *r, const th_mcp_verdict *v) {
    mcpg_call_desc *d = &r->desc;
    memset(d, 0, sizeof *d);
    d->wire = MCPG_WIRE_STATELESS;
    d->method = v->method_name.p;
    d->method_len = v->method_name.n;
    d->name = v->name.p;
    d->name_len = v->name.n;
    d->params_json = v->params.p;
    d->params_len = v->params.n;
    d->args_json = v->args.p;
    d->args_len = v->args.n;
    d->id_json = v->id.p;
    d->id_len = v->id.n;
    d->client_caps_json = v->caps.p;
    d->client_caps_len = v->caps.n;
    d->protocol_version = v->version.p;
    d->protocol_version_len = v->version.n;
    r->stamp = v->stamp;
    r->level = v->log_level;
    th_submit(c, r);
}

void th_submit(th_conn *c, th_req *r) {
    th_wslot *ws = c->ws;
    mcpg_call_desc *d = &r->desc;
    th_piece id = {d->id_json, d->id_len};
    d->size = (uint32_t)sizeof *d;
    /* ABI 1.2: who is on the line; copied or referenced, as the call may
     * outlive its connection (a resumable legacy stream) */
    memcpy(r->peer, c->peer, c->peer_len + 1u);
    d->peer = c->peer_len ? r->peer : NULL;
    d->peer_len = c->peer_len;
    th_tls_facts_unref(ws->mod->host, r->facts);
    r->facts = th_tls_facts_ref(c->tls.facts);
    d->tls = r->facts ? &r->facts->info : NULL;
    d->transport_ctx = r;
    d->header = req_header;
    d->complete = r->event_webhook ? th_wh_events_complete
                  : r->authz == 1  ? on_authz_complete
                                   : on_call_complete;
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
        if (r->event_webhook) th_wh_events_failed(c, r, rc);
        else submit_failed(c, r, rc, id);
    } else if (r->state == TH_REQ_DONE) {
        r->call = NULL; /* completed and released inside call_submit */
    }
}

/* server/discover: what the gateway serves now (caps.c), and who it is. */
static void answer_discover(th_conn *c, th_req *r, th_piece id) {
    th_mod *m = c->ws->mod;
    const mcpg_host *h = m->host;
    mcpg_buf *b = &c->ws->scratch;
    b->len = 0;
    int rc = h->buf_append(b, ",\"result\":{\"supportedVersions\":[\"" TH_PROTOCOL_VERSION "\"],\"capabilities\":",
                           sizeof ",\"result\":{\"supportedVersions\":[\"" TH_PROTOCOL_VERSION "\"],\"capabilities\":" - 1);
    rc |= th_caps_append(m, b, 0);
    rc |= h->buf_printf(b, ",\"resultType\":\"complete\",\"ttlMs\":0,\"cacheScope\":\"private\","
                           "\"_meta\":{\"io.modelcontextprotocol/serverInfo\":%s}}}", th_server_info(m).p);
    if (rc) {
        th_respond_status_error(c, r, 503);
        return;
    }
    th_piece body[3] = {TH_LIT("{\"jsonrpc\":\"2.0\",\"id\":"), id, {b->data, b->len}};
    th_resp_head hd = {.status = 200, .json = 1};
    th_respond(c, r, &hd, body, 3);
}

/* What the stateless wire answers itself (server/discover, a listen without
 * resources to ask policy about) passes the identity stage first, as every
 * request does: the kernel answers MCPG_SESSION_METHOD with {} once it has
 * (ABI 1.6), and on_authz_complete sends r through here again (authz 2).
 * 1: identified, go on; 0: parked on the kernel, or refused (answered). */
static int stateless_identified(th_conn *c, th_req *r, const th_mcp_verdict *v) {
    if (r->authz == 2) return 1;
    th_mcp_verdict who = *v;
    who.method_name = TH_LIT(MCPG_SESSION_METHOD);
    who.name = who.params = who.args = (th_piece){NULL, 0};
    r->authz = 1;
    r->sse_ok = 0; /* a refusal is one JSON body */
    submit(c, r, &who);
    if (r->authz_again) { /* passed inside call_submit */
        r->authz_again = 0;
        th_legacy_again(r);
    }
    return 0;
}

/* Does the request carry one Mcp-Param-* header twice? The kernel compares
 * the first with the arguments; an intermediary that keeps the last would
 * act on a value nobody checked, so a repeat is refused like a mismatch.
 * Names are stored lower-cased; a request has at most 64 fields. */
static int repeated_param_header(const th_req *r) {
    static const char pre[] = "mcp-param-";
    const size_t pl = sizeof pre - 1;
    for (uint32_t i = 0; i < r->nhdrs; i++) {
        const th_hdr *a = &r->hdrs[i];
        const char *an = r->data.data + a->name_off;
        if (a->name_len <= pl || memcmp(an, pre, pl)) continue;
        for (uint32_t j = i + 1; j < r->nhdrs; j++) {
            const th_hdr *b = &r->hdrs[j];
            if (b->name_len == a->name_len && !memcmp(r->data.data + b->name_off, an, a->name_len))
                return 1;
        }
    }
    return 0;
}

void th_handle_mcp(th_conn *c, th_req *r) {
    th_mod *m = c->ws->mod;
    th_mcp_headers hd;
    th_fill_header(r, TH_H_CONTENT_TYPE, &hd.content_type);
    th_fill_header(r, TH_H_ACCEPT, &hd.accept);
    th_fill_header(r, TH_H_PROTOCOL_VERSION, &hd.protocol_version);
    th_fill_header(r, TH_H_MCP_METHOD, &hd.method);
    th_fill_header(r, TH_H_MCP_NAME, &hd.name);
    th_mcp_verdict v;
    if (r->known[TH_H_SESSION_ID]) { /* a session: the legacy wire */
        th_legacy_post(c, r);
        return;
    }
    th_mcp_check(m->host, &hd, r->data.data + r->body_off, r->body_len, r->name_buf, &v);
    if (v.legacy && !(hd.protocol_version.present &&
                      hd.protocol_version.n == sizeof TH_PROTOCOL_VERSION - 1 &&
                      !memcmp(hd.protocol_version.p, TH_PROTOCOL_VERSION, hd.protocol_version.n))) {
        /* no 2026-07-28 envelope, and not claiming 2026-07-28: initialize, or a legacy client */
        th_legacy_post(c, r);
        return;
    }
    switch (v.action) {
    case TH_MCP_ACCEPTED: {
        th_resp_head h = {.status = 202};
        th_respond(c, r, &h, NULL, 0);
        return;
    }
    case TH_MCP_DISCOVER:
        if (stateless_identified(c, r, &v)) answer_discover(c, r, v.id);
        return;
    case TH_MCP_SUBMIT:
        if (v.method == MCPG_METHOD_TOOLS_CALL && repeated_param_header(r)) {
            th_respond_rpc_error(c, r, 400, 0, v.id, MCPG_RPC_HEADER_MISMATCH,
                                 MSG("Header mismatch: an Mcp-Param header is sent more than "
                                     "once"), NULL, 0);
            return;
        }
        r->sse_ok = (uint8_t)(!hd.accept.present || th_accept_allows_sse(hd.accept.p, hd.accept.n));
        submit(c, r, &v);
        return;
    case TH_MCP_LISTEN:
        if (hd.accept.present && !th_accept_allows_sse(hd.accept.p, hd.accept.n)) {
            th_respond_rpc_error(c, r, 406, 0, v.id, MCPG_RPC_INVALID_REQUEST,
                              MSG("Not Acceptable: subscriptions/listen answers with "
                                  "text/event-stream"), NULL, 0);
            return;
        }
        if (!th_listen_has_uris(m->host, &v)) {
            if (!stateless_identified(c, r, &v)) return; /* list changes: identity only */
        } else if (r->authz != 2) {
            /* the uris a client may watch are the policy's to say (identity first) */
            r->authz = 1;
            r->sse_ok = 0; /* a refusal is one JSON body */
            submit(c, r, &v);
            if (r->authz_again) {
                r->authz_again = 0;
                th_legacy_again(r);
            }
            return;
        }
        th_listen_start(c, r, &v);
        return;
    default:
        th_respond_rpc_error(c, r, v.http_status, 0, v.id, v.code, v.message, v.data, v.ndata);
    }
}

/* ---- routes ---------------------------------------------------------------- */

static int path_is(const char *url, size_t n, const char *lit, size_t ln) {
    const char *q = memchr(url, '?', n);
    if (q) n = (size_t)(q - url);
    return n == ln && !memcmp(url, lit, ln);
}

/* Host and Origin (hygiene.h): 1 when the request may reach the MCP
 * endpoint, else it is answered here. */
static int hygiene_ok(th_conn *c, th_req *r) {
    th_mod *m = c->ws->mod;
    th_hval host, origin;
    th_fill_header(r, TH_H_HOST, &host);
    th_fill_header(r, TH_H_ORIGIN, &origin);
    /* A missing Host is let through: every browser sends one, so its absence
     * is not a rebinding page, and raw clients and probes often omit it. */
    if (host.dup) {
        th_respond_rpc_error(c, r, 400, 0, TH_LIT("null"), MCPG_RPC_SERVER_ERROR,
                          MSG("Bad Request: more than one Host header"), NULL, 0);
        return 0;
    }
    if (host.present && !th_host_allowed(&m->hosts, c->loopback, host.p, host.n)) {
        th_respond_rpc_error(c, r, 403, 0, TH_LIT("null"), MCPG_RPC_SERVER_ERROR,
                          MSG("Forbidden: Host not allowed (gateway.server.allowed_hosts)"), NULL, 0);
        return 0;
    }
    if (origin.present &&
        (origin.dup || !th_origin_allowed(&m->origins, c->loopback, origin.p, origin.n))) {
        th_respond_rpc_error(c, r, 403, 0, TH_LIT("null"), MCPG_RPC_SERVER_ERROR,
                          MSG("Forbidden: Origin not allowed (gateway.server.allowed_origins)"), NULL, 0);
        return 0;
    }
    return 1;
}

/* RFC 9728 metadata: where a client learns which authorization servers
 * issue tokens for this gateway (the identity stage's 401 points here),
 * at the well-known path and its path-suffixed form for /mcp: the object
 * gateway.server.oauth_protected_resource gives, served as is; unset, the
 * one the identity stage describes (an OAuth stage serves it by default);
 * false, or nobody describes one: no route. The document into *doc. */
static int is_protected_resource(th_conn *c, const char *url, size_t n, th_piece *doc) {
    static const char base[] = "/.well-known/oauth-protected-resource";
    static const char for_mcp[] = "/.well-known/oauth-protected-resource/mcp";
    const char *cfg = c->ws->mod->cfg->oauth_protected_resource;
    const mcpg_host *h = c->ws->mod->host;
    if (!path_is(url, n, base, sizeof base - 1) && !path_is(url, n, for_mcp, sizeof for_mcp - 1)) return 0;
    if (cfg) {
        *doc = (th_piece){cfg, strlen(cfg)};
        return strcmp(cfg, "false") != 0;
    }
    mcpg_buf *b = &c->ws->scratch;
    b->len = 0;
    if (!MCPG_HOST_HAS(h, protected_resource) || h->protected_resource(b) != 0) return 0;
    *doc = (th_piece){b->data, b->len};
    return 1;
}

/* /webhooks/<kind>/<source> (pre is "/webhooks/<kind>/"): the source's
 * name, else NULL. */
static const char *webhook_source(const char *url, size_t n, const char *pre, size_t *len) {
    size_t pn = strlen(pre);
    const char *q = memchr(url, '?', n);
    if (q) n = (size_t)(q - url);
    if (n <= pn || memcmp(url, pre, pn)) return NULL;
    *len = n - pn;
    return url + pn;
}

void th_route(th_conn *c, th_req *r) {
    const char *url = r->data.data + r->url_off;
    size_t n = r->url_len;
    int get = r->http_method == HTTP_GET || r->http_method == HTTP_HEAD;
    size_t wn = 0;
    const char *source;
    th_piece doc;
    if (!n || url[0] != '/') {
        /* absolute-form ("POST http://host/mcp") names a host the Host check
         * would not see; asterisk-form has nothing here */
        th_respond_rpc_error(c, r, 400, 0, TH_LIT("null"), MCPG_RPC_INVALID_REQUEST,
                          MSG("Bad Request: only origin-form request targets (/path) are served"), NULL, 0);
    } else if (path_is(url, n, "/mcp", 4)) {
        if (!hygiene_ok(c, r)) return;
        if (r->http_method == HTTP_POST) th_handle_mcp(c, r);
        else if (r->http_method == HTTP_GET) th_legacy_get(c, r);
        else if (r->http_method == HTTP_DELETE) th_legacy_delete(c, r);
        else respond_not_allowed(c, r, "GET, POST, DELETE");
    } else if ((source = webhook_source(url, n, "/webhooks/resources/", &wn))) {
        /* no Host/Origin check: a browser page cannot sign, and a sender
         * names the gateway by its public host; the signature decides */
        th_wh_route(c, r, source, wn);
    } else if ((source = webhook_source(url, n, "/webhooks/events/", &wn))) {
        th_wh_events_route(c, r, source, wn); /* the same: the events module checks it */
    } else if (path_is(url, n, "/metrics", 8)) {
        if (!hygiene_ok(c, r)) return;
        th_metrics(c, r);
    } else if (path_is(url, n, "/admin/reload", 13) && th_admin_enabled(c->ws->mod)) {
        if (!hygiene_ok(c, r)) return;
        th_admin_reload(c, r);
    } else if (is_protected_resource(c, url, n, &doc)) {
        if (get) respond_plain_json(c, r, 200, doc, NULL);
        else respond_not_allowed(c, r, "GET, HEAD");
    } else if (path_is(url, n, "/healthz", 8)) {
        if (get) respond_plain_json(c, r, 200, TH_LIT("{\"status\":\"ok\"}"), NULL);
        else respond_not_allowed(c, r, "GET, HEAD");
    } else if (path_is(url, n, "/readyz", 7)) {
        if (!get) respond_not_allowed(c, r, "GET, HEAD");
        else if (c->ws->draining) respond_plain_json(c, r, 503, TH_LIT("{\"status\":\"draining\"}"), NULL);
        else th_readyz(c, r, url, n);
    } else {
        th_piece body[TH_MAX_PIECES];
        char codebuf[24];
        size_t k = th_rpc_error_body(body, TH_LIT("null"), codebuf, MCPG_RPC_INVALID_REQUEST,
                                     MSG("Not Found: no such endpoint"), NULL, 0);
        th_resp_head hd = {.status = 404, .json = 1};
        th_respond(c, r, &hd, body, k);
    }
}
