/* transport_http: the module's descriptor, config schema, lifecycle and
 * transport ops. The kernel accepts; this module serves HTTP/1.1 on the
 * sockets it is handed (see README.md for the behaviour and limits). */
#include "http/http.h"
#include "routes/routes.h"
#include "wire/wire.h"
#include "wire/relay.h"
#include "wire/stream.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static const mcpg_config_field th_schema[] = {
    MCPG_CFG_BOOL_FIELD(th_config, unary_json_fast_path, "unary_json_fast_path", "false",
                        "legacy wire: answer a call with one JSON body instead of SSE while it "
                        "has sent no message before its outcome (no session state per call)"),
    MCPG_CFG_JSON_FIELD(th_config, access_log, "access_log", "\"auto\"",
                        "one JSON line per request on stderr, written once per loop turn: "
                        "true (every request), false (none) or \"auto\" (every request whose "
                        "outcome the audit trail does not hold: with an audit sink, a call it "
                        "recorded gets no line; health checks, metrics and refusals do)"),
    MCPG_CFG_INT_FIELD(th_config, max_body_bytes, "max_body_bytes", "4194304", 1, 1073741824,
                       "larger request bodies are answered 413 and the connection closed"),
    MCPG_CFG_INT_FIELD(th_config, max_header_bytes, "max_header_bytes", "16384", 256, 1048576,
                       "larger request header sections are answered 431 and the connection closed"),
    MCPG_CFG_INT_FIELD(th_config, idle_timeout_ms, "idle_timeout_ms", "60000", 10, 86400000,
                       "close a connection idle this long (or slower than this to send a request)"),
    MCPG_CFG_INT_FIELD(th_config, header_timeout_ms, "header_timeout_ms", "10000", 10, 86400000,
                       "a request's header section must arrive whole within this long of its "
                       "first byte, else the connection is closed (the shorter of it and "
                       "idle_timeout_ms applies)"),
    MCPG_CFG_INT_FIELD(th_config, max_connections_per_worker, "max_connections_per_worker",
                       "10000", 1, 1000000,
                       "connections beyond this get one 503 (Retry-After, Connection: close) "
                       "and are closed at once; the ones open are served on"),
    MCPG_CFG_INT_FIELD(th_config, max_sessions, "max_sessions", "10000", 1, 10000000,
                       "legacy wire: open sessions at most; initialize beyond it gets 503 (-32000, "
                       "Retry-After)"),
    MCPG_CFG_INT_FIELD(th_config, max_sessions_per_principal, "max_sessions_per_principal", "1000", 1,
                       10000000, "legacy wire: open sessions of one principal (callers without "
                       "identity count as one) at most; initialize beyond it gets 429 (-32000, "
                       "Retry-After), so no caller fills max_sessions for everyone"),
    MCPG_CFG_INT_FIELD(th_config, session_ttl_ms, "session_ttl_ms", "1800000", 1000, 604800000,
                       "legacy wire: a session unused this long (and without a GET stream) ends"),
    MCPG_CFG_JSON_FIELD(th_config, allowed_hosts, "allowed_hosts", NULL,
                        "Host values /mcp accepts (403 else): an array of \"name\" (any port), "
                        "\"name:port\" or \"*\"; unset: only localhost, 127.0.0.1 and [::1] on a "
                        "loopback connection, any host otherwise"),
    MCPG_CFG_JSON_FIELD(th_config, allowed_origins, "allowed_origins", NULL,
                        "Origin values /mcp accepts (403 else; no Origin is always accepted): an "
                        "array of \"scheme://host[:port]\" or \"*\"; unset: only http(s) origins on "
                        "loopback names on a loopback connection, none otherwise (a listener beyond "
                        "loopback serves no browser page until this is set)"),
    MCPG_CFG_STRING_FIELD(th_config, admin_token_env, "admin_token_env", NULL,
                          "the environment variable holding the admin token: POST /admin/reload "
                          "with Authorization: Bearer <token> reloads the manifest; unset: no "
                          "admin routes"),
    MCPG_CFG_STRING_FIELD(th_config, tls_cert_file, "tls_cert_file", NULL,
                          "TLS: the server's certificate chain (PEM, the leaf first); set: every "
                          "listener serves https only; re-read at reload"),
    MCPG_CFG_STRING_FIELD(th_config, tls_key_file, "tls_key_file", NULL,
                          "TLS: the certificate's private key (PEM); required with tls_cert_file"),
    MCPG_CFG_STRING_FIELD(th_config, tls_client_ca_file, "tls_client_ca_file", NULL,
                          "mTLS: the CA certificate(s) (PEM) client certificates must chain to"),
    MCPG_CFG_ENUM_FIELD(th_config, tls_client_auth, "tls_client_auth", "\"none\"",
                        "none|optional|required",
                        "mTLS: none (no certificate asked for), optional (a client may present one; "
                        "one that does not verify is refused), required (no certificate: refused)"),
    MCPG_CFG_ENUM_FIELD(th_config, tls_min_version, "tls_min_version", "\"1.2\"", "1.2|1.3",
                        "TLS: the oldest protocol version accepted"),
    MCPG_CFG_INT_FIELD(th_config, tls_handshake_timeout_ms, "tls_handshake_timeout_ms", "10000", 10,
                       3600000, "TLS: a connection whose handshake is not done this long after the "
                       "accept is closed"),
    MCPG_CFG_JSON_FIELD(th_config, oauth_protected_resource, "oauth_protected_resource", NULL,
                        "RFC 9728 metadata served as is at GET /.well-known/oauth-protected-resource "
                        "(and .../mcp): an object with a string \"resource\" and a non-empty "
                        "\"authorization_servers\"; false: not served; unset: served when the "
                        "identity stage describes it (identity_jwt: its audience and issuer), else 404"),
    MCPG_CFG_JSON_FIELD(th_config, resource_webhooks, "resource_webhooks", NULL,
                        "sources of POST /webhooks/resources/{source}: {\"<source>\": {\"secret_env\": "
                        "VAR holding whsec_<base64>, \"uri_prefixes\": [...], \"list_changed\": false}}; "
                        "a source whose variable is unset or empty is off (404)"),
    MCPG_CONFIG_END};

/* The access log's "src" member, in the kernel's [kind:module:instance] form. */
static int alog_src_build(th_mod *m) {
    const mcpg_host *h = m->host;
    const char *inst = h->instance_name(m->self);
    char src[320];
    size_t n = 0;
    const char pre[] = "[transport:transport_http:";
    memcpy(src, pre, sizeof pre - 1);
    n = sizeof pre - 1;
    size_t il = inst ? strlen(inst) : 0;
    if (il > 256) il = 256;
    memcpy(src + n, inst ? inst : "", il);
    n += il;
    src[n++] = ']';
    int rc = h->buf_append(&m->alog_src, "\"src\":", 6);
    rc |= h->buf_append_json_string(&m->alog_src, src, n);
    return rc ? MCPG_ENOMEM : 0;
}

static void th_destroy(void *instance);

/* A non-empty array of non-empty strings. */
static int strings_array(const mcpg_host *host, const mcpg_json_span *a) {
    size_t iter = 0, k = 0;
    mcpg_json_span s;
    if (a->type != MCPG_JSON_ARRAY) return 0;
    while (host->json_array_next(a->p, a->n, &iter, &s) == 1) {
        if (s.type != MCPG_JSON_STRING || !s.n) return 0;
        k++;
    }
    return k > 0;
}

/* oauth_protected_resource: false (served by no one), or an object with a
 * string "resource" and the authorization servers a client asks for a
 * token: metadata without them sends a client nowhere. */
static int check_protected_resource(const mcpg_host *host, const char *json, mcpg_report *rep) {
    mcpg_json_span res, as;
    if (!json || !strcmp(json, "false")) return 0;
    size_t n = strlen(json);
    if (json[0] != '{' || host->json_object_get(json, n, "resource", &res) != 1 ||
        res.type != MCPG_JSON_STRING) {
        host->report_error(rep, "oauth_protected_resource",
                           "must be false, or an object with a string \"resource\" (the MCP endpoint's URL)");
        return MCPG_ECONFIG;
    }
    if (host->json_object_get(json, n, "authorization_servers", &as) != 1 || !strings_array(host, &as)) {
        host->report_error(rep, "oauth_protected_resource.authorization_servers",
                           "is required: a non-empty array of the authorization servers' issuer URLs");
        return MCPG_ECONFIG;
    }
    return 0;
}

/* The files are read now, so --check names a missing, unreadable or
 * mismatched one, and a start or reload with one is refused. */
static int check_tls(const mcpg_host *host, const th_config *cfg, mcpg_report *rep) {
    if (th_tls_check_keys(host, cfg, rep)) return MCPG_ECONFIG;
    if (!th_tls_enabled(cfg)) return 0;
    const char *key;
    char why[512];
    SSL_CTX *ctx = th_tls_ctx_new(cfg, &key, why, sizeof why);
    if (ctx) {
        SSL_CTX_free(ctx);
        return 0;
    }
    host->report_error(rep, key, "%s", why);
    return MCPG_ECONFIG;
}

static int th_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const th_config *cfg = config;
    int rc = 0;
    if (check_tls(host, cfg, rep)) rc = MCPG_ECONFIG;
    if (check_protected_resource(host, cfg->oauth_protected_resource, rep)) rc = MCPG_ECONFIG;
    if (th_alog_mode_parse(cfg->access_log) < 0) {
        host->report_error(rep, "access_log", "must be true, false or \"auto\"");
        rc = MCPG_ECONFIG;
    }
    th_whset wh;
    if (th_wh_parse(host, cfg->resource_webhooks, rep, NULL, &wh)) rc = MCPG_ECONFIG;
    th_wh_free(host, &wh);
    const char *keys[2] = {"allowed_hosts", "allowed_origins"};
    const char *vals[2] = {cfg->allowed_hosts, cfg->allowed_origins};
    for (int i = 0; i < 2; i++) {
        th_names tmp;
        if (th_names_parse(host, vals[i], &tmp) == MCPG_EINVAL) {
            host->report_error(rep, keys[i], "must be an array of non-empty strings without spaces");
            rc = MCPG_ECONFIG;
        }
        th_names_free(host, &tmp);
    }
    return rc;
}

/* A number for this process that the other replicas of a fleet are very
 * unlikely to have drawn (event ids carry it: relay.h); never 0. */
static uint32_t draw_replica(void) {
    uint32_t v = 0;
    while (!v)
        if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) v = (uint32_t)getpid() ^ (uint32_t)time(NULL);
    return v;
}

static int th_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **instance_out) {
    th_mod *m = host->calloc(1, sizeof *m);
    if (!m) return MCPG_ENOMEM;
    m->host = host;
    m->self = self;
    m->cfg = config;
    m->alog_mode = th_alog_mode_parse(m->cfg->access_log);
    if (m->alog_mode < 0) m->alog_mode = TH_ALOG_ALL; /* validate() refused it already */
    th_wire_install(m); /* before any slot: destroy() frees through it */
    m->nworkers = host->worker_count();
    m->replica = draw_replica();
    int trc = th_tls_init(m); /* a file changed since validate(): logged */
    if (trc) {
        th_tls_fini(m);
        host->free(m);
        return trc;
    }
    m->slots = host->calloc(m->nworkers ? m->nworkers : 1, sizeof *m->slots);
    int rc = m->slots ? 0 : MCPG_ENOMEM;
    for (uint32_t i = 0; !rc && i < m->nworkers; i++) {
        th_worker_state *ws = host->calloc(1, sizeof *ws);
        if (!ws) {
            rc = MCPG_ENOMEM;
            break;
        }
        ws->mod = m;
        ws->index = i;
        ws->iso_sec = -1;
        m->slots[i] = ws;
    }
    if (!rc) rc = th_names_parse(host, m->cfg->allowed_hosts, &m->hosts);
    if (!rc) rc = th_names_parse(host, m->cfg->allowed_origins, &m->origins);
    if (!rc) rc = alog_src_build(m);
    if (!rc) rc = th_admin_init(m);
    if (!rc && th_wh_parse(host, m->cfg->resource_webhooks, NULL, self, &m->wh)) rc = MCPG_ECONFIG;
    m->wh_offers = th_wh_offers(&m->wh);
    if (rc) {
        th_destroy(m);
        return rc;
    }
    th_metrics_register(m);
    *instance_out = m;
    return 0;
}

static void th_destroy(void *instance) {
    th_mod *m = instance;
    const mcpg_host *host = m->host;
    for (uint32_t i = 0; m->slots && i < m->nworkers; i++)
        if (m->slots[i]) th_worker_free(m->slots[i]);
    host->free(m->slots);
    th_server_info_free(m);
    host->buf_free(&m->alog_src);
    th_names_free(host, &m->hosts);
    th_names_free(host, &m->origins);
    host->free(m->admin_token);
    th_wh_free(host, &m->wh);
    th_tls_fini(m);
    host->free(m);
}

/* ABI 1.2: a reload carried this instance over: the certificates are read
 * again (the config names files, not their contents), and the serverInfo
 * follows the gateway.name the new generation serves under. */
static void th_reloaded(void *instance) {
    th_mod *m = instance;
    th_tls_reload(m);
    if (th_server_info_build(m))
        m->host->log(m->self, MCPG_LOG_ERROR, "out of memory: serverInfo keeps the name it had");
}

/* ---- transport ops ------------------------------------------------------- */

/* A cap that is reached wants an operator to know, but one line per refused
 * connection would let a flood fill the log: the first refusal is logged,
 * then at most one line per TH_REFUSED_LOG_MS with the count since. */
static void note_refused(th_worker_state *ws) {
    uint64_t now = uv_now(ws->loop);
    ws->refused++;
    if (ws->refused_log_ms && now - ws->refused_log_ms < TH_REFUSED_LOG_MS) return;
    ws->mod->host->log(ws->mod->self, MCPG_LOG_WARN,
                       "loop %u: max_connections_per_worker (%lld) reached: %llu new "
                       "connection(s) refused",
                       ws->index, (long long)ws->mod->cfg->max_connections_per_worker,
                       (unsigned long long)ws->refused);
    ws->refused = 0;
    ws->refused_log_ms = now ? now : 1;
}

static int th_conn_adopt_op(void *instance, mcpg_worker *w, int fd_take) {
    th_mod *m = instance;
    th_worker_state *ws = th_slot(m, w);
    if (!ws) return MCPG_EINVAL;
    /* refused: one fixed 503 on the socket, then the kernel closes it */
    if (ws->draining) {
        th_conn_refuse(ws, fd_take, TH_REFUSE_DRAINING);
        return MCPG_EUNAVAIL;
    }
    if ((int64_t)ws->nconns >= m->cfg->max_connections_per_worker) {
        th_conn_refuse(ws, fd_take, TH_REFUSE_FULL);
        note_refused(ws);
        return MCPG_EAGAIN;
    }
    ws->w = w;
    int rc = th_worker_start(ws);
    return rc ? rc : th_conn_adopt(ws, fd_take, NULL, NULL);
}

static void th_drain_op(void *instance, mcpg_worker *w) {
    th_worker_state *ws = th_slot(instance, w);
    if (!ws) return;
    /* A second drain of the same worker closes everything at once: the
     * kernel's way to end a drain whose deadline has passed. */
    int force = ws->draining;
    ws->draining = 1;
    ws->w = w;
    for (th_conn *c = ws->conns, *next; c; c = next) {
        next = c->next; /* closing never frees synchronously */
        th_conn_drain(c, force);
    }
    th_worker_maybe_stop(ws);
}

/* ABI 1.8: the streams a reload's old generation saw open end, so that
 * their clients come back to the one serving now. */
static uint32_t th_end_streams_op(void *instance, mcpg_worker *w, uint64_t published_us) {
    th_worker_state *ws = th_slot(instance, w);
    return ws ? th_listeners_end_before(ws, published_us) : 0;
}

static uint32_t th_conn_count_op(void *instance, mcpg_worker *w) {
    th_worker_state *ws = th_slot(instance, w);
    return ws ? ws->nconns + ws->handles_closing : 0;
}

/* News for listening clients, on each worker's loop (kinds.h). */
static void th_news_op(void *instance, mcpg_worker *w, const char *method, const char *uri,
                       size_t uri_len) {
    th_worker_state *ws = th_slot(instance, w);
    if (ws && method) th_news(ws, method, uri, uri_len);
}

/* HOST of a "HOST:PORT" listen address is a loopback name or address. */
static int loopback_listen(const char *a) {
    const char *colon = strrchr(a, ':');
    size_t n = colon ? (size_t)(colon - a) : strlen(a);
    return (n >= 4 && !strncmp(a, "127.", 4)) || (n == 9 && !strncmp(a, "localhost", 9)) ||
           (n == 5 && !strncmp(a, "[::1]", 5));
}

/* A listener beyond loopback without allowed_origins refuses every request
 * that carries an Origin (hygiene.h): an operator who serves browser pages
 * learns why at start, not from a user's 403. */
static void warn_origins(const th_mod *m) {
    const mcpg_host *h = m->host;
    const char *a;
    if (m->origins.set || !MCPG_HOST_HAS(h, listen_address)) return;
    for (size_t i = 0; (a = h->listen_address(i)); i++)
        if (!loopback_listen(a))
            h->log(m->self, MCPG_LOG_WARN,
                   "listener %s is beyond loopback and gateway.server.allowed_origins is unset: "
                   "requests carrying an Origin header are refused (403) until it names the "
                   "browser origins to serve",
                   a);
}

/* The whole generation is built: the coordinator the sessions live on, and
 * the listeners to warn about. (What the backends offer is asked per
 * server/discover and initialize: lists change while a transport serves.) */
static int th_start(void *instance) {
    th_mod *m = instance;
    if (th_server_info_build(m)) return MCPG_ENOMEM;
    warn_origins(m);
    if (MCPG_HOST_HAS(m->host, coordinator)) m->co_ops = m->host->coordinator(&m->co);
    if (!m->co_ops)
        m->host->log(m->self, MCPG_LOG_WARN,
                     "no coordinator: the legacy wire (2025-11-25 sessions) answers initialize with 503");
    return 0;
}

/* Each loop: its handles, the session subjects (session.h) and the
 * fleet's resource news (webhook.h). */
static void th_worker_start_op(void *instance, mcpg_worker *w) {
    th_worker_state *ws = th_slot(instance, w);
    if (!ws) return;
    ws->w = w;
    ws->loop = ws->mod->host->worker_uv_loop(w);
    (void)th_worker_start(ws);
    if (ws->mod->co_ops && th_sess_worker_start(ws))
        ws->mod->host->log(ws->mod->self, MCPG_LOG_ERROR,
                           "cannot subscribe to mcpg.session.*: sessions ended on other loops stay open here");
    if (ws->mod->co_ops && th_relay_worker_start(ws))
        ws->mod->host->log(ws->mod->self, MCPG_LOG_ERROR,
                           "cannot subscribe to mcpg.relay.%u.%u: this loop's streams cannot be resumed on "
                           "other replicas", ws->mod->replica, ws->index);
    if (ws->mod->co_ops && th_news_worker_start(ws))
        ws->mod->host->log(ws->mod->self, MCPG_LOG_ERROR,
                           "cannot subscribe to " TH_NEWS_SUBJECT ": the fleet's resource news (webhooks, "
                           "watches) are not told to this loop's clients");
}

static void th_worker_stop_op(void *instance, mcpg_worker *w) {
    th_worker_state *ws = th_slot(instance, w);
    if (!ws) return;
    if (ws->mod->co_ops) th_relay_worker_stop(ws);
    th_sess_worker_stop(ws);
    th_news_worker_stop(ws);
    ws->stopped = 1;
}

static const mcpg_lifecycle_ops th_lifecycle = {
    .size = (uint32_t)sizeof(mcpg_lifecycle_ops),
    .version = 1,
    .validate = th_validate,
    .create = th_create,
    .start = th_start,
    .destroy = th_destroy,
    .worker_start = th_worker_start_op,
    .worker_stop = th_worker_stop_op,
    .reloaded = th_reloaded,
};

static const mcpg_transport_ops th_ops = {
    MCPG_OPS_HEAD(mcpg_transport_ops),
    .conn_adopt = th_conn_adopt_op,
    .drain = th_drain_op,
    .conn_count = th_conn_count_op,
    .news = th_news_op,
    .end_streams = th_end_streams_op,
};

MCPG_MODULE_DEFINE(MCPG_KIND_TRANSPORT, "transport_http", "0.1.0",
                   .description = "HTTP/1.1 transport: both MCP wires on /mcp (2026-07-28 stateless, "
                                  "2025-11-25 sessions), health routes",
                   .config = th_schema, .config_size = (uint32_t)sizeof(th_config),
                   .lifecycle = &th_lifecycle, .ops = &th_ops);
