/* backend_mcp: the upstream's life on the I/O thread. Connect (start the
 * link), agree on a wire (server/discover for the stateless wire, else
 * initialize), fetch the lists, then serve; when the link fails, fail what
 * waits, wait (doubling from restart_min_ms to restart_max_ms) and start
 * again. Messages from the upstream are sorted here: answers to our
 * requests, its requests to the client, its notifications. */
#define _GNU_SOURCE
#include "upstream.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void connect_now(upstream *up);
static void fetch_lists(upstream *up, uint32_t bits);

uint64_t up_now_ms(upstream *up) { return uv_now(&up->loop); }

/* ---- jobs from other threads ---- */

int up_post(upstream *up, job *j) {
    pthread_mutex_lock(&up->lock);
    int refused = up->stopping || up->n_jobs >= JOBS_MAX;
    if (!refused) {
        j->next = NULL;
        if (up->jobs_tail) up->jobs_tail->next = j;
        else up->jobs_head = j;
        up->jobs_tail = j;
        up->n_jobs++;
    }
    pthread_mutex_unlock(&up->lock);
    if (!refused) uv_async_send(&up->wake);
    return refused;
}

static void run_job(upstream *up, job *j) {
    switch (j->kind) {
    case JOB_CALL: calls_start(up, j->pc); break;
    case JOB_CANCEL: calls_cancel(up, j->pc); break;
    case JOB_RETRY:
        calls_retry(up, j->pc, j->text, j->text ? NULL : "the client did not answer the question");
        j->text = NULL;
        break;
    case JOB_REPLY:
        up->reply_key = j->caller_key[0] ? j->caller_key : NULL;
        if (up->link && up->state == UP_READY)
            up->link->ops->send(up->link, j->text, strlen(j->text), NULL);
        up->reply_key = NULL;
        break;
    case JOB_SUBSCRIBE: listen_subscribe(up, j->text, j->on); break;
    case JOB_CREDENTIAL:
        if (up->link && up->link->ops->credential) up->link->ops->credential(up->link);
        break;
    }
    free(j->text);
    free(j);
}

static void on_wake(uv_async_t *a) {
    upstream *up = a->data;
    pthread_mutex_lock(&up->lock);
    job *j = up->jobs_head;
    up->jobs_head = up->jobs_tail = NULL;
    up->n_jobs = 0;
    bool stopping = up->stopping;
    pthread_mutex_unlock(&up->lock);
    while (j) {
        job *next = j->next;
        run_job(up, j);
        j = next;
    }
    if (stopping && up->state != UP_STOPPING) {
        up->state = UP_STOPPING;
        atomic_store(&up->fast_ok, false);
        calls_fail_all(up, "the gateway is stopping");
        if (up->link) up->link->ops->stop(up->link);
        uv_timer_stop(&up->retry_timer);
        uv_timer_stop(&up->park_timer);
        uv_timer_stop(&up->listen_timer);
        uv_close((uv_handle_t *)&up->retry_timer, NULL);
        uv_close((uv_handle_t *)&up->park_timer, NULL);
        uv_close((uv_handle_t *)&up->listen_timer, NULL);
        uv_close((uv_handle_t *)&up->wake, NULL);
    }
}

/* ---- what the upstream says outside calls, into the log (bounded) ---- */

/* The count of lines not written in the second that ended, if any. */
static void said_report(upstream *up, uint64_t now) {
    if (now - up->said_window_ms < 1000) return;
    if (up->said_dropped)
        up->h->log(up->self, MCPG_LOG_WARN, "%llu more lines the upstream said outside any call "
                   "were not logged (at most %d a second)",
                   (unsigned long long)up->said_dropped, UP_SAID_PER_S);
    up->said_window_ms = now;
    up->said_in_window = 0;
    up->said_dropped = 0;
}

void up_log_said(upstream *up, const char *fmt, ...) {
    said_report(up, up_now_ms(up));
    if (up->said_in_window >= UP_SAID_PER_S) {
        up->said_dropped++;
        return;
    }
    up->said_in_window++;
    char line[2600]; /* a stderr line is kept up to 2048 bytes */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    up->h->log(up->self, MCPG_LOG_INFO, "%s", line);
}

/* ---- requests ---- */

up_request *up_request_new(upstream *up, up_request_kind kind) {
    up_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->id = ++up->next_id;
    r->kind = kind;
    r->sent_ms = up_now_ms(up);
    r->next = up->pending;
    up->pending = r;
    return r;
}

void up_request_free(upstream *up, up_request *r) {
    if (r->link_ctx && up->link && up->link->ops->forget) up->link->ops->forget(up->link, r);
    for (up_request **pp = &up->pending; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    free(r);
}

static up_request *find_request(upstream *up, int64_t id) {
    for (up_request *r = up->pending; r; r = r->next)
        if (r->id == id) return r;
    return NULL;
}

/* The stateless envelope's fixed part (clientInfo), built once. */
static void build_client_info(upstream *up) {
    mcpg_buf *b = &up->client_info;
    const char *gw = up->h->gateway_name ? up->h->gateway_name() : "mcpg";
    const char *v = up->h->gateway_version();
    mcpg_buf_puts(b, ",\"io.modelcontextprotocol/clientInfo\":{\"name\":");
    mcpg_buf_append_json_string(b, gw, strlen(gw));
    mcpg_buf_puts(b, ",\"version\":");
    mcpg_buf_append_json_string(b, v ? v : "", v ? strlen(v) : 0);
    mcpg_buf_puts(b, "}");
}

/* caps: the calling client's capabilities; NULL, a request the gateway
 * makes for itself (lists, discovery), which has nobody to ask and so
 * declares nothing. */
int up_modern_meta(upstream *up, mcpg_buf *b, const char *caps) {
    mcpg_buf_puts(b, "\"io.modelcontextprotocol/protocolVersion\":\"" MCP_MODERN_VERSION "\","
                     "\"io.modelcontextprotocol/clientCapabilities\":");
    mcpg_buf_puts(b, caps ? caps : "{}");
    return mcpg_buf_append(b, up->client_info.data, up->client_info.len);
}

/* params_json: the params object's text (NULL: none). On the stateless
 * wire a request the gateway makes for itself carries the _meta envelope;
 * a client's call brings its own (calls.c). */
int up_send_request(upstream *up, up_request *r, const char *method, const char *params_json) {
    mcpg_buf b = {0};
    mcpg_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":", (long long)r->id);
    mcpg_buf_append_json_string(&b, method, strlen(method));
    bool envelope = (up->wire == WIRE_STATELESS && r->kind != UR_CALL) || r->kind == UR_DISCOVER;
    if (params_json || envelope) {
        mcpg_buf_puts(&b, ",\"params\":");
        if (envelope) {
            size_t n = params_json ? strlen(params_json) : 0;
            bool empty = n <= 2;
            mcpg_buf_puts(&b, "{\"_meta\":{");
            up_modern_meta(up, &b, NULL);
            mcpg_buf_puts(&b, empty ? "}}" : "},");
            if (!empty) mcpg_buf_append(&b, params_json + 1, n - 1);
        } else {
            mcpg_buf_puts(&b, params_json);
        }
    }
    int rc = mcpg_buf_puts(&b, "}");
    if (!rc && up->link) rc = up->link->ops->send(up->link, b.data, b.len, r);
    else if (!rc) rc = MCPG_EUNAVAIL;
    mcpg_buf_free(&b);
    return rc;
}

void up_send_response(upstream *up, const char *id_json, size_t id_len, const char *body) {
    mcpg_buf b = {0};
    mcpg_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
    mcpg_buf_append(&b, id_json, id_len);
    mcpg_buf_puts(&b, ",");
    if (!mcpg_buf_puts(&b, body) && !mcpg_buf_puts(&b, "}") && up->link)
        up->link->ops->send(up->link, b.data, b.len, NULL);
    mcpg_buf_free(&b);
}

/* ---- the lists ---- */

int up_list_copy(upstream *up, int list, mcpg_buf *out) {
    pthread_mutex_lock(&up->lock);
    int rc = up->has_list[list] ? mcpg_buf_append(out, up->lists[list].data, up->lists[list].len)
                                : 1;
    pthread_mutex_unlock(&up->lock);
    return rc;
}

/* The kernel rebuilds the merged lists from the list ops when told: from
 * the first time on they answer what came (backend_mcp.c: MCPG_EAGAIN before, so
 * that the gateway is not ready while they have not come). */
static void tell_lists(upstream *up, uint32_t bits) {
    atomic_store(&up->lists_in, true);
    up->h->lists_changed(up->self, bits);
    up->lists_told = 0;
}

static const char *const LIST_METHOD[LIST_COUNT] = {"tools/list", "prompts/list",
                                                    "resources/list", "resources/templates/list"};
static const char *const LIST_KEY[LIST_COUNT] = {"tools", "prompts", "resources",
                                                 "resourceTemplates"};
static const uint32_t LIST_BIT[LIST_COUNT] = {MCPG_LIST_TOOLS, MCPG_LIST_PROMPTS,
                                              MCPG_LIST_RESOURCES, MCPG_LIST_RESOURCES};

static void fetch_page(upstream *up, int list, const char *cursor, size_t cursor_len) {
    up_request *r = up_request_new(up, UR_LIST);
    if (!r) return;
    r->list = list;
    mcpg_buf p = {0};
    if (cursor) {
        mcpg_buf_puts(&p, "{\"cursor\":");
        mcpg_buf_append(&p, cursor - 1, cursor_len + 2); /* the JSON string, quotes and all */
        mcpg_buf_puts(&p, "}");
    }
    if (up_send_request(up, r, LIST_METHOD[list], p.data) != 0) up_request_free(up, r);
    mcpg_buf_free(&p);
}

static bool server_offers(upstream *up, const char *what) {
    mcpg_json_span v;
    return mcpg_json_object_get(up->server_caps, strlen(up->server_caps), what, &v) == 1 &&
           v.type == MCPG_JSON_OBJECT;
}

static void fetch_lists(upstream *up, uint32_t bits) {
    for (int l = 0; l < LIST_COUNT; l++) {
        if (!(bits & (1u << l))) continue;
        const char *cap = l == LIST_TOOLS ? "tools" : l == LIST_PROMPTS ? "prompts" : "resources";
        if (!server_offers(up, cap)) continue;
        if (up->lists_loading & (1u << l)) continue; /* a fetch runs: its result will do */
        up->lists_loading |= 1u << l;
        up->fetch[l].len = 0;
        mcpg_buf_puts(&up->fetch[l], "[");
        fetch_page(up, l, NULL, 0);
    }
}

static void list_page(upstream *up, int l, const char *msg, size_t n) {
    mcpg_json_span res, arr, cur, item;
    up->lists_loading &= ~(1u << l);
    if (mcpg_json_object_get(msg, n, "result", &res) != 1 ||
        mcpg_json_object_get(res.p, res.n, LIST_KEY[l], &arr) != 1 ||
        arr.type != MCPG_JSON_ARRAY) {
        up->h->log(up->self, MCPG_LOG_WARN, "upstream did not answer %s with a list: %.200s",
                   LIST_METHOD[l], msg);
        return;
    }
    size_t it = 0;
    while (mcpg_json_array_next(arr.p, arr.n, &it, &item) == 1) {
        if (up->fetch[l].len > 1) mcpg_buf_puts(&up->fetch[l], ",");
        mcpg_buf_append(&up->fetch[l], item.p, item.n);
    }
    if (mcpg_json_object_get(res.p, res.n, "nextCursor", &cur) == 1 &&
        cur.type == MCPG_JSON_STRING && cur.n) {
        up->lists_loading |= 1u << l;
        fetch_page(up, l, cur.p, cur.n);
        return;
    }
    mcpg_buf_puts(&up->fetch[l], "]");
    pthread_mutex_lock(&up->lock);
    mcpg_buf tmp = up->lists[l];
    up->lists[l] = up->fetch[l];
    up->fetch[l] = tmp;
    up->has_list[l] = true;
    pthread_mutex_unlock(&up->lock);
    if (l == LIST_TOOLS) params_index(up);
    /* one notice once every list being fetched has come (the kernel
     * rebuilds the merged lists for each) */
    up->lists_told |= LIST_BIT[l];
    if (!up->lists_loading) tell_lists(up, up->lists_told);
}

/* ---- negotiation ---- */

static void became_ready(upstream *up) {
    uv_timer_stop(&up->retry_timer); /* the handshake's deadline */
    up->state = UP_READY;
    up->ready_since_ms = up_now_ms(up);
    up->h->log(up->self, MCPG_LOG_INFO, "upstream ready over %s, %s wire (protocol %s)",
               up->link->ops->what, up->wire == WIRE_STATELESS ? "stateless" : "session",
               up->protocol);
    if (up->link->ops->ready) up->link->ops->ready(up->link);
    /* no session: the loops may send calls themselves (fast.c) */
    atomic_store(&up->fast_ok, up->wire == WIRE_STATELESS && up->cfg.c->url != NULL);
    fetch_lists(up, 0xf);
    /* an upstream that offers no lists at all has its first (empty) ones now */
    if (!up->lists_loading && !up->lists_in) tell_lists(up, MCPG_LIST_TOOLS);
    listen_resubscribe(up);
    listen_ready(up);
}

/* The session wire's one session carries every client's calls, so it
 * declares every capability a client may have; each question the upstream
 * then asks is checked against the calling client's own (client_caps.c). */
void up_initialize_params(const upstream *up, char *out, size_t cap) {
    const char *gw = up->h->gateway_name ? up->h->gateway_name() : "mcpg";
    snprintf(out, cap,
             "{\"protocolVersion\":\"" MCP_LEGACY_VERSION "\",\"capabilities\":{\"sampling\":{},"
             "\"elicitation\":{\"form\":{},\"url\":{}},\"roots\":{\"listChanged\":true}},"
             "\"clientInfo\":{\"name\":\"%.64s\",\"version\":\"%s\"}}",
             gw, up->h->gateway_version());
}

static void send_initialize(upstream *up) {
    up_request *r = up_request_new(up, UR_INIT);
    if (!r) return;
    up->wire = WIRE_LEGACY;
    char params[512];
    up_initialize_params(up, params, sizeof params);
    up_send_request(up, r, "initialize", params);
}

static void keep_caps(upstream *up, const mcpg_json_span *res) {
    mcpg_json_span caps;
    up->server_caps[0] = '\0';
    if (mcpg_json_object_get(res->p, res->n, "capabilities", &caps) == 1 &&
        caps.type == MCPG_JSON_OBJECT && caps.n < sizeof up->server_caps) {
        memcpy(up->server_caps, caps.p, caps.n);
        up->server_caps[caps.n] = '\0';
    }
}

static void on_discovered(upstream *up, const char *msg, size_t n) {
    mcpg_json_span res, versions, v;
    bool modern = false;
    if (mcpg_json_object_get(msg, n, "result", &res) == 1 &&
        mcpg_json_object_get(res.p, res.n, "supportedVersions", &versions) == 1) {
        size_t it = 0;
        while (mcpg_json_array_next(versions.p, versions.n, &it, &v) == 1)
            if (mcpg_json_string_eq(&v, MCP_MODERN_VERSION, strlen(MCP_MODERN_VERSION)))
                modern = true;
    }
    if (!modern) {
        up->h->log(up->self, MCPG_LOG_INFO, "server/discover answered %.300s", msg);
        if (up->cfg.wire == WIRE_STATELESS) {
            up_link_down(up, "the upstream does not speak the stateless wire (wire: stateless)");
            return;
        }
        send_initialize(up);
        return;
    }
    up->wire = WIRE_STATELESS;
    snprintf(up->protocol, sizeof up->protocol, "%s", MCP_MODERN_VERSION);
    keep_caps(up, &res);
    became_ready(up);
}

static void on_initialized(upstream *up, const char *msg, size_t n) {
    mcpg_json_span res, ver;
    if (mcpg_json_object_get(msg, n, "result", &res) != 1 || res.type != MCPG_JSON_OBJECT) {
        mcpg_json_span err;
        char why[300];
        snprintf(why, sizeof why, "initialize refused: %.200s",
                 mcpg_json_object_get(msg, n, "error", &err) == 1 ? err.p : msg);
        up_link_down(up, why);
        return;
    }
    size_t vl = 0;
    if (mcpg_json_object_get(res.p, res.n, "protocolVersion", &ver) == 1)
        mcpg_json_string_decode(&ver, up->protocol, sizeof up->protocol, &vl);
    keep_caps(up, &res);
    static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    up->link->ops->send(up->link, note, sizeof note - 1, NULL);
    became_ready(up);
}

/* Called by a link once it can carry messages. */
static void negotiate(upstream *up) {
    if (up->cfg.wire == WIRE_LEGACY) {
        send_initialize(up);
        return;
    }
    up_request *r = up_request_new(up, UR_DISCOVER);
    if (r) up_send_request(up, r, "server/discover", NULL);
}

/* ---- messages from the upstream ---- */

static void on_response(upstream *up, const char *msg, size_t n, const mcpg_json_span *id) {
    int64_t v;
    up_request *r = mcpg_json_int64(id, &v) == 0 ? find_request(up, v) : NULL;
    if (!r) {
        up->h->log(up->self, MCPG_LOG_DEBUG, "upstream answered an unknown request: %.100s", msg);
        return;
    }
    if (r->kind == UR_CALL) {
        calls_answered(up, r, msg, n); /* frees r */
        return;
    }
    /* let go of r first: a handler may bring the link down, which frees
     * every request still pending */
    up_request_kind kind = r->kind;
    int list = r->list;
    bool was_listen = up->listen == r;
    up_request_free(up, r);
    switch (kind) {
    case UR_DISCOVER: on_discovered(up, msg, n); break;
    case UR_INIT: on_initialized(up, msg, n); break;
    case UR_LIST: list_page(up, list, msg, n); break;
    case UR_SUBSCRIBE: break;
    case UR_LISTEN:
        if (was_listen) listen_ended(up, NULL);
        break;
    case UR_CALL: break;
    }
}

static void on_notification(upstream *up, const char *method, const char *params, size_t pn,
                            up_request *on) {
    if (strcmp(method, "notifications/tools/list_changed") == 0) fetch_lists(up, 1u << LIST_TOOLS);
    else if (strcmp(method, "notifications/prompts/list_changed") == 0)
        fetch_lists(up, 1u << LIST_PROMPTS);
    else if (strcmp(method, "notifications/resources/list_changed") == 0)
        fetch_lists(up, (1u << LIST_RESOURCES) | (1u << LIST_TEMPLATES));
    else if (strcmp(method, "notifications/resources/updated") == 0) {
        mcpg_json_span uri;
        char buf[4096];
        size_t len = 0;
        if (params && mcpg_json_object_get(params, pn, "uri", &uri) == 1 &&
            mcpg_json_string_decode(&uri, buf, sizeof buf, &len) == 0)
            up->h->resource_updated(up->self, buf, len);
    } else if (strcmp(method, "notifications/progress") == 0 ||
               strcmp(method, "notifications/message") == 0) {
        calls_notify(up, on, method, params, pn);
    }
}

/* The call an unreadable message answers, if it can be told: the stream it
 * came on, or an integer id found before the parse gave up (the upstream's
 * word, but it can only fail its own calls). */
static up_request *unreadable_answer_of(upstream *up, up_request *on, const mcpg_json_span *id) {
    int64_t v;
    up_request *r = on;
    if (!r && id && mcpg_json_int64(id, &v) == 0) r = find_request(up, v);
    return r && r->kind == UR_CALL ? r : NULL;
}

/* ---- a caller's session, outside any request (its GET stream) ---- */

static bool list_changed(const char *method) {
    return strcmp(method, "notifications/tools/list_changed") == 0 ||
           strcmp(method, "notifications/prompts/list_changed") == 0 ||
           strcmp(method, "notifications/resources/list_changed") == 0;
}

/* Counted, and logged at 1, 2, 4, 8... (at debug: it says nothing an
 * operator must act on) so an upstream cannot fill the log. */
static void caller_dropped(upstream *up, const char *what) {
    uint64_t k = ++up->caller_untied_dropped;
    if ((k & (k - 1)) == 0)
        up->h->log(up->self, MCPG_LOG_DEBUG,
                   "%.128s from the upstream on a caller's session outside any request: "
                   "dropped (%llu so far)",
                   what, (unsigned long long)k);
}

/* What the upstream says on a caller's own session outside any request.
 * A list's change concerns the catalog every caller shares: handled as on
 * the gateway's session (the lists are fetched again there). A ping is
 * answered there. Anything else was meant for that caller alone, and the
 * gateway has no way to reach only that caller's clients outside a call
 * (a resource update would reach every subscriber, a log line or question
 * another caller's call): dropped, a question answered with an error so
 * that the upstream does not wait. False when the message stops here. */
static bool caller_untied(upstream *up, const char *method, bool has_id, const char *id_text,
                          size_t id_len) {
    if (!has_id && list_changed(method)) return true;
    if (has_id && strcmp(method, "ping") == 0) return true;
    caller_dropped(up, method);
    if (has_id)
        up_send_response(up, id_text, id_len,
                         "\"error\":{\"code\":-32603,\"message\":\"nothing outside a call reaches "
                         "this session's clients\"}");
    return false;
}

void up_on_message(upstream *up, const char *msg, size_t n, up_request *on) {
    mcpg_json_span id = {0}, method, params;
    bool has_id = mcpg_json_object_get(msg, n, "id", &id) == 1;
    bool has_method = mcpg_json_object_get(msg, n, "method", &method) == 1 &&
                      method.type == MCPG_JSON_STRING;
    if (mcpg_json_validate(msg, n) != 0) {
        up->h->log(up->self, MCPG_LOG_WARN, "upstream sent a message that is not JSON: %.100s",
                   msg);
        up_request *r = unreadable_answer_of(up, on, has_id && !has_method ? &id : NULL);
        if (r) calls_unreadable(up, r);
        return;
    }
    bool callers = up->reply_key && !on; /* a caller's session, outside any request */
    if (!has_method) {
        /* ids are the gateway's across sessions: one there could answer another's */
        if (has_id && callers) caller_dropped(up, "a response");
        else if (has_id) on_response(up, msg, n, &id);
        return;
    }
    char name[128];
    size_t len = 0;
    if (mcpg_json_string_decode(&method, name, sizeof name, &len) != 0) return;
    bool has_params = mcpg_json_object_get(msg, n, "params", &params) == 1;
    const char *pp = has_params ? params.p : NULL;
    size_t pn = has_params ? params.n : 0;
    const char *id_text = id.type == MCPG_JSON_STRING ? id.p - 1 : id.p;
    size_t id_len = id.type == MCPG_JSON_STRING ? id.n + 2 : id.n;
    if (callers && !caller_untied(up, name, has_id, id_text, id_len)) return;
    if (!has_id) {
        on_notification(up, name, pp, pn, on);
        return;
    }
    if (strcmp(name, "ping") == 0) {
        up_send_response(up, id_text, id_len, "\"result\":{}");
        return;
    }
    calls_asked(up, on, id_text, id_len, name, pp, pn);
}

/* ---- the link's life ---- */

static void on_retry(uv_timer_t *t) { connect_now(t->data); }

void up_link_down(upstream *up, const char *why) {
    if (up->state == UP_STOPPING) return;
    snprintf(up->last_error, sizeof up->last_error, "%s", why);
    atomic_store(&up->fast_ok, false);
    bool was_ready = up->state == UP_READY;
    up->state = UP_DOWN;
    if (up->link) up->link->ops->stop(up->link);
    calls_fail_all(up, why);
    listen_forget(up);
    while (up->pending) up_request_free(up, up->pending);
    up->lists_loading = 0;
    /* a link that served a while starts over from the shortest wait */
    if (was_ready && up_now_ms(up) - up->ready_since_ms > 10000)
        up->backoff_ms = (uint64_t)up->cfg.c->restart_min_ms;
    up->h->log(up->self, was_ready ? MCPG_LOG_WARN : MCPG_LOG_INFO,
               "upstream unavailable: %s; retrying in %llu ms", why,
               (unsigned long long)up->backoff_ms);
    uv_timer_start(&up->retry_timer, on_retry, up->backoff_ms, 0);
    up->backoff_ms *= 2;
    if (up->backoff_ms > (uint64_t)up->cfg.c->restart_max_ms)
        up->backoff_ms = (uint64_t)up->cfg.c->restart_max_ms;
}

void up_request_failed(upstream *up, up_request *r, const char *why) {
    switch (r->kind) {
    case UR_CALL:
        if (r->pc) calls_fail(up, r->pc, MCPG_RPC_SERVER_ERROR, "upstream: %s", why);
        if (r->parked) return; /* the park keeps it; it expires */
        break;
    case UR_DISCOVER:
        /* not a stateless server: a legacy one answers discover with an HTTP error */
        up->h->log(up->self, MCPG_LOG_INFO, "server/discover: %s", why);
        if (up->cfg.wire != WIRE_STATELESS) {
            up_request_free(up, r);
            send_initialize(up);
            return;
        }
        up_request_free(up, r);
        up_link_down(up, why);
        return;
    case UR_INIT:
        up_request_free(up, r);
        up_link_down(up, why);
        return;
    case UR_LIST:
        up->lists_loading &= ~(1u << r->list);
        if (!up->lists_loading && up->lists_told) tell_lists(up, up->lists_told); /* what did arrive */
        break;
    case UR_SUBSCRIBE: break;
    case UR_LISTEN: listen_ended(up, r); break;
    }
    up_request_free(up, r);
}

void up_link_up(upstream *up) { negotiate(up); }

static void on_handshake_timeout(uv_timer_t *t) {
    upstream *up = t->data;
    if (up->state == UP_CONNECTING) up_link_down(up, "no answer to the handshake in time");
}

/* The link starts, then the handshake; both within connect_timeout_ms (the
 * retry timer serves as their deadline until the upstream is ready). */
static void connect_now(upstream *up) {
    if (up->state == UP_STOPPING) return;
    up->state = UP_CONNECTING;
    up->wire = WIRE_UNKNOWN;
    free(up->session_id);
    up->session_id = NULL;
    uv_timer_start(&up->retry_timer, on_handshake_timeout, (uint64_t)up->cfg.c->connect_timeout_ms,
                   0);
    if (up->link->ops->start(up->link) != 0 && up->state == UP_CONNECTING)
        up_link_down(up, "the link could not start");
}

/* A list the gateway asked for itself has no client deadline over it: an
 * upstream that never ends its answer (an SSE stream of events only) would
 * leave the list being fetched for ever, so no later change could fetch it
 * again. Unanswered within connect_timeout_ms, the link is started again,
 * as when the handshake goes unanswered: the lists are fetched anew. */
static void expire_list_fetches(upstream *up) {
    if (up->state != UP_READY) return;
    uint64_t now = up_now_ms(up), limit = (uint64_t)up->cfg.c->connect_timeout_ms;
    for (up_request *r = up->pending; r; r = r->next) {
        if (r->kind != UR_LIST || now - r->sent_ms <= limit) continue;
        char why[200];
        snprintf(why, sizeof why, "no answer to %s within connect_timeout_ms (%llu ms)",
                 LIST_METHOD[r->list], (unsigned long long)limit);
        up_link_down(up, why); /* frees every pending request, r too */
        return;
    }
}

static void on_park_tick(uv_timer_t *t) {
    upstream *up = t->data;
    calls_expire_parks(up);
    expire_list_fetches(up);
    said_report(up, up_now_ms(up)); /* a flood that stopped is still counted */
}

static void *io_main(void *arg) {
    upstream *up = arg;
    connect_now(up);
    uv_timer_start(&up->park_timer, on_park_tick, 1000, 1000);
    uv_run(&up->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---- lifecycle (the kernel's threads) ---- */

int up_init(upstream *up, const mcpg_host *h, mcpg_instance *self, const mcp_settings *cfg) {
    memset(up, 0, sizeof *up);
    up->h = h;
    up->self = self;
    up->name = h->instance_name(self);
    up->cfg = *cfg;
    up->backoff_ms = (uint64_t)cfg->c->restart_min_ms;
    pthread_mutex_init(&up->lock, NULL);
    build_client_info(up);
    if (uv_loop_init(&up->loop) != 0) return MCPG_ENOMEM;
    uv_async_init(&up->loop, &up->wake, on_wake);
    uv_timer_init(&up->loop, &up->retry_timer);
    uv_timer_init(&up->loop, &up->park_timer);
    uv_timer_init(&up->loop, &up->listen_timer);
    up->wake.data = up->retry_timer.data = up->park_timer.data = up->listen_timer.data = up;
    char err[300] = "";
    up->link = cfg->c->url ? link_http_new(up, err, sizeof err) : link_stdio_new(up);
    if (!up->link) {
        h->log(self, MCPG_LOG_ERROR, "%s", err[0] ? err : "out of memory");
        return MCPG_ECONFIG;
    }
    return 0;
}

int up_start(upstream *up) {
    if (pthread_create(&up->thread, NULL, io_main, up) != 0) return MCPG_ENOMEM;
    up->thread_started = true;
    return 0;
}

void up_stop(upstream *up) {
    pthread_mutex_lock(&up->lock);
    up->stopping = true;
    pthread_mutex_unlock(&up->lock);
    if (!up->thread_started) return;
    uv_async_send(&up->wake);
    pthread_join(up->thread, NULL);
    up->thread_started = false;
}

static void close_walk(uv_handle_t *hd, void *arg) {
    (void)arg;
    if (!uv_is_closing(hd)) uv_close(hd, NULL);
}

void up_free(upstream *up) {
    if (up->link) up->link->ops->destroy(up->link);
    uv_walk(&up->loop, close_walk, NULL); /* what a thread that never ran left open */
    uv_run(&up->loop, UV_RUN_DEFAULT);
    uv_loop_close(&up->loop);
    for (int l = 0; l < LIST_COUNT; l++) {
        mcpg_buf_free(&up->lists[l]);
        mcpg_buf_free(&up->fetch[l]);
    }
    while (up->pending) up_request_free(up, up->pending);
    for (job *j = up->jobs_head, *next; j; j = next) {
        next = j->next;
        if (j->kind == JOB_CALL) calls_free(j->pc);
        free(j->text);
        free(j);
    }
    free(up->session_id);
    params_free(up);
    mcpg_buf_free(&up->client_info);
    listen_free(up);
    pthread_mutex_destroy(&up->lock);
}
