/* transport_http: POST /mcp. The request's wire is chosen (the stateless
 * 2026-07-28 wire, or the legacy session wire for a 2025-era request), what
 * the stateless wire answers itself is answered here, the rest becomes a
 * call (call.c). */
#include "wire/wire.h"
#include "wire/stream.h"

#include <string.h>

#define MSG(s) TH_LIT("\"" s "\"")

/* A stateless request as a call: its verdict is its description. */
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

/* server/discover: what the gateway serves now (caps.c), and who it is: a
 * virtual server's serverInfo and instructions when the request came in on
 * one (DiscoverResult's optional instructions). */
static void answer_discover(th_conn *c, th_req *r, th_piece id) {
    th_mod *m = c->ws->mod;
    const mcpg_host *h = m->host;
    mcpg_buf *b = &c->ws->scratch;
    th_piece instr = th_req_instructions(r);
    b->len = 0;
    int rc = h->buf_append(b, ",\"result\":{\"supportedVersions\":[\"" TH_PROTOCOL_VERSION "\"],\"capabilities\":",
                           sizeof ",\"result\":{\"supportedVersions\":[\"" TH_PROTOCOL_VERSION "\"],\"capabilities\":" - 1);
    rc |= th_caps_append(m, r, b, 0);
    if (instr.n) {
        rc |= h->buf_append(b, ",\"instructions\":", 16);
        rc |= h->buf_append(b, instr.p, instr.n);
    }
    rc |= h->buf_printf(b, ",\"resultType\":\"complete\",\"ttlMs\":0,\"cacheScope\":\"private\","
                           "\"_meta\":{\"io.modelcontextprotocol/serverInfo\":%s}}}",
                        th_req_server_info(m, r).p);
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
