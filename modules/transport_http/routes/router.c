/* transport_http: what each complete request gets, by its path and method.
 * Health routes and every error are answered here at once; /mcp, and a
 * virtual server's path (host->server_find), go to the wires
 * (wire/mcp_post.c, wire/mcp_legacy.c), /webhooks, /admin, /metrics and
 * /readyz to their files here. Replies are written through http/respond.c. */
#include "routes/routes.h"
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

/* The MCP endpoint: the gateway's /mcp, or a virtual server's path. */
static void mcp_endpoint(th_conn *c, th_req *r) {
    if (!hygiene_ok(c, r)) return;
    if (r->http_method == HTTP_POST) th_handle_mcp(c, r);
    else if (r->http_method == HTTP_GET) th_legacy_get(c, r);
    else if (r->http_method == HTTP_DELETE) th_legacy_delete(c, r);
    else respond_not_allowed(c, r, "GET, POST, DELETE");
}

/* The virtual server (ABI 1.12) at the request's path for its Host: 1 when
 * there is one (kept in r, for the turns that answer it), 0 when there is
 * none, -1 when r was answered here (out of memory). Asked only of paths
 * no fixed route takes, so /mcp pays nothing for it. */
static int find_server(th_conn *c, th_req *r, const char *url, size_t n) {
    const mcpg_host *h = c->ws->mod->host;
    if (!MCPG_HOST_HAS(h, server_find)) return 0;
    const char *q = memchr(url, '?', n);
    if (q) n = (size_t)(q - url);
    th_hval host;
    th_fill_header(r, TH_H_HOST, &host);
    mcpg_server_view v = {.size = sizeof v};
    if (h->server_find(c->ws->w, url, n, host.present ? host.p : NULL, host.present ? host.n : 0,
                       &v) != 0)
        return 0;
    int rc = th_req_server_keep(h, r, &v);
    if (rc == MCPG_ENOMEM) {
        th_respond_status_error(c, r, 503);
        return -1;
    }
    return rc == 0; /* a name the manifest does not allow: served nowhere */
}

static void respond_not_found(th_conn *c, th_req *r) {
    th_piece body[TH_MAX_PIECES];
    char codebuf[24];
    size_t k = th_rpc_error_body(body, TH_LIT("null"), codebuf, MCPG_RPC_INVALID_REQUEST,
                                 MSG("Not Found: no such endpoint"), NULL, 0);
    th_resp_head hd = {.status = 404, .json = 1};
    th_respond(c, r, &hd, body, k);
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
        mcp_endpoint(c, r);
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
        int found = find_server(c, r, url, n);
        if (found > 0) mcp_endpoint(c, r);
        else if (found == 0) respond_not_found(c, r);
    }
}
