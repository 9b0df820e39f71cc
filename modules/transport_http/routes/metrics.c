/* transport_http's metrics: GET /metrics, and the transport's own gauges.
 *
 * The route: the kernel asks the manifest's metrics instance for its
 * exposition (host->metrics_render) on this loop; the answer is written as it
 * is. Without a metrics instance it answers 404, like a path that does not
 * exist.
 *
 * The gauges (registered at create, so the label sets are fixed then): open
 * connections, long-lived streams (legacy GET streams, stateless listens)
 * and the legacy sessions this gateway created and has
 * not yet seen end. Each loop adds and subtracts in its own cells (the
 * registry's per-loop rows): no lock, no shared line on the hot path. */
#include "routes/routes.h"

#define MSG(s) TH_LIT("\"" s "\"")

static void respond_error(th_conn *c, th_req *r, int status, th_piece msg, const char *allow) {
    th_piece body[TH_MAX_PIECES];
    char codebuf[24];
    int64_t code = status >= 500 ? MCPG_RPC_SERVER_ERROR : MCPG_RPC_INVALID_REQUEST;
    size_t n = th_rpc_error_body(body, TH_LIT("null"), codebuf, code, msg, NULL, 0);
    th_resp_head hd = {.status = status, .json = 1, .allow = allow};
    th_respond(c, r, &hd, body, n);
}

void th_metrics(th_conn *c, th_req *r) {
    const mcpg_host *h = c->ws->mod->host;
    if (r->http_method != HTTP_GET && r->http_method != HTTP_HEAD) {
        respond_error(c, r, 405, MSG("Method Not Allowed"), "GET, HEAD");
        return;
    }
    mcpg_buf text = {0};
    char type[128] = "";
    int rc = MCPG_HOST_HAS(h, metrics_render)
                 ? h->metrics_render(c->ws->w, &text, type, sizeof type)
                 : MCPG_ENOENT;
    if (rc == MCPG_ENOENT)
        respond_error(c, r, 404, MSG("Not Found: the manifest has no metrics instance"), NULL);
    else if (rc)
        respond_error(c, r, 500, MSG("Internal Server Error: the metrics could not be rendered"),
                      NULL);
    else {
        th_resp_head hd = {.status = 200, .content_type = type};
        th_piece body = {text.data, text.len};
        th_respond(c, r, &hd, &body, 1);
    }
    h->buf_free(&text);
}

/* ---- the transport's gauges ---- */

static mcpg_metric *gauge(th_mod *m, const char *name, const char *help) {
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_GAUGE, .name = name, .help = help,
                          .n_series = 1};
    mcpg_metric *g = NULL;
    return m->host->metric_new(m->self, &d, &g) == 0 ? g : NULL;
}

void th_metrics_register(th_mod *m) {
    if (!MCPG_HOST_HAS(m->host, metric_new)) return;
    m->m_conns = gauge(m, "mcpg_http_connections", "Client connections open (closing ones too)");
    m->m_streams = gauge(m, "mcpg_http_streams",
                         "Long-lived streams open: legacy GET streams (new or resumed) and "
                         "stateless subscriptions/listen");
    m->m_sessions = gauge(m, "mcpg_sessions",
                          "Legacy (2025-11-25) sessions this gateway created whose end it has not "
                          "yet seen (DELETE, expiry, or their end heard from another replica)");
}
