/* transport_http: the administration routes. POST /admin/reload asks the
 * kernel to reload the manifest (host->reload) and answers with what it
 * says: the new generation and what changed, or every error. The route
 * exists only when gateway.server.admin_token_env names a variable that
 * holds a token; the request must bring it as "Authorization: Bearer
 * <token>", compared in constant time. */
#include "routes/routes.h"

#include <stdlib.h>
#include <string.h>

#define MSG(s) TH_LIT(s)

int th_admin_init(th_mod *m) {
    const char *var = m->cfg->admin_token_env;
    if (!var || !*var) return 0;
    const char *token = getenv(var);
    if (!token || !*token) {
        m->host->log(m->self, MCPG_LOG_WARN,
                     "gateway.server.admin_token_env names %s, which is unset or empty: "
                     "the admin routes are off", var);
        return 0;
    }
    size_t n = strlen(token);
    m->admin_token = m->host->alloc(n + 1);
    if (!m->admin_token) return MCPG_ENOMEM;
    memcpy(m->admin_token, token, n + 1);
    m->admin_token_len = n;
    return 0;
}

int th_admin_enabled(const th_mod *m) { return m->admin_token != NULL; }

/* Every byte compared whatever differs, so timing tells nothing. */
static int token_ok(const th_mod *m, const th_hval *auth) {
    static const char scheme[] = "Bearer ";
    if (!auth->p || auth->n != sizeof scheme - 1 + m->admin_token_len) return 0;
    unsigned char diff = 0;
    for (size_t i = 0; i < sizeof scheme - 2; i++) /* "bearer", any case */
        diff |= (unsigned char)((auth->p[i] | 0x20) ^ (scheme[i] | 0x20));
    diff |= (unsigned char)(auth->p[sizeof scheme - 2] ^ ' ');
    for (size_t i = 0; i < m->admin_token_len; i++)
        diff |= (unsigned char)(auth->p[sizeof scheme - 1 + i] ^ m->admin_token[i]);
    return diff == 0;
}

static void on_reloaded(void *arg, int status, const char *json, size_t len) {
    th_req *r = arg;
    th_conn *c = r->conn;
    if (!th_conn_answer_back(c, r)) return;
    th_resp_head hd = {.status = status, .json = 1};
    th_piece body = {json, len};
    th_respond(c, r, &hd, &body, 1);
    th_conn_advance(c);
}

void th_admin_reload(th_conn *c, th_req *r) {
    th_mod *m = c->ws->mod;
    const mcpg_host *h = m->host;
    if (r->http_method != HTTP_POST) {
        th_resp_head hd = {.status = 405, .json = 1, .allow = "POST"};
        th_piece body = TH_LIT("{\"error\":\"use POST\"}");
        th_respond(c, r, &hd, &body, 1);
        return;
    }
    th_hval auth;
    th_fill_header(r, TH_H_AUTHORIZATION, &auth);
    if (!token_ok(m, &auth)) {
        th_resp_head hd = {.status = 401, .json = 1, .www_authenticate = "Bearer"};
        th_piece body = TH_LIT("{\"error\":\"the admin token is missing or wrong (Authorization: Bearer ...)\"}");
        th_respond(c, r, &hd, &body, 1);
        return;
    }
    if (!MCPG_HOST_HAS(h, reload)) {
        th_resp_head hd = {.status = 501, .json = 1};
        th_piece body = TH_LIT("{\"error\":\"this gateway cannot reload\"}");
        th_respond(c, r, &hd, &body, 1);
        return;
    }
    r->state = TH_REQ_INFLIGHT;
    c->inflight++;
    if (h->reload(c->ws->w, on_reloaded, r) != 0) {
        c->inflight--;
        th_resp_head hd = {.status = 503, .json = 1, .retry_after_s = 1};
        th_piece body = TH_LIT("{\"error\":\"the gateway is stopping\"}");
        th_respond(c, r, &hd, &body, 1);
    }
}
