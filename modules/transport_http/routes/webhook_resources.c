/* transport_http: POST /webhooks/resources/{source} (see webhook.h).
 *
 * The checks, in order, each with its own answer: POST (405), a source that
 * is configured and on (404), the body's size (413), the signature (401,
 * naming the header at fault), the body (400, naming the field), what the
 * source may announce (403), then the hand-over to the coordinator: 202
 * once it has the news, 503 with Retry-After when it cannot take it. A
 * refused request changes nothing and tells nobody. */
#include "routes/routes.h"

#include <mcpg/whsig.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- answers ------------------------------------------------------------- */

/* {"error": msg} (msg is text, escaped here), or the 202's
 * {"status": "accepted" | msg} (msg a fixed word then). */
static void answer(th_conn *c, th_req *r, int status, const char *msg) {
    const mcpg_host *h = c->ws->mod->host;
    mcpg_buf *b = &c->ws->scratch;
    th_resp_head hd = {.status = status, .json = 1};
    if (status == 503) hd.retry_after_s = 1;
    if (status == 405) hd.allow = "POST";
    b->len = 0;
    int rc = status == 202 ? h->buf_printf(b, "{\"status\":\"%s\"}", msg ? msg : "accepted")
                           : h->buf_append(b, "{\"error\":", 9) ||
                                 h->buf_append_json_string(b, msg, strlen(msg)) ||
                                 h->buf_append(b, "}", 1);
    th_piece body = rc ? TH_LIT("{\"error\":\"out of memory\"}") : (th_piece){b->data, b->len};
    th_respond(c, r, &hd, &body, 1);
}

static const th_whsrc *find_source(const th_mod *m, const char *name, size_t n) {
    for (size_t i = 0; i < m->wh.n; i++) {
        const th_whsrc *s = &m->wh.src[i];
        if (strlen(s->name) == n && !memcmp(s->name, name, n)) return s->key_len ? s : NULL;
    }
    return NULL;
}

/* ---- the signature ------------------------------------------------------- */

static void header(const th_req *r, const char *lname, th_hval *out) {
    size_t n = 0;
    const char *v = th_req_header(r, lname, &n);
    *out = (th_hval){.p = v, .n = v ? n : 0, .present = v != NULL};
}

/* NULL when the request is signed by the source's key, else what is wrong
 * (mcpg/whsig.h: the scheme and the texts, shared with the events module). */
static const char *verify(th_worker_state *ws, const th_whsrc *s, const th_req *r) {
    th_hval id, ts, sig;
    header(r, "webhook-id", &id);
    header(r, "webhook-timestamp", &ts);
    header(r, "webhook-signature", &sig);
    int64_t now = ws->mod->host->wall_us() / 1000000;
    return mcpg_whsig_verify(s->key, s->key_len, id.present ? id.p : NULL, id.n,
                             ts.present ? ts.p : NULL, ts.n, sig.present ? sig.p : NULL, sig.n,
                             r->data.data + r->body_off, r->body_len, now, TH_WH_TOLERANCE_S);
}

/* ---- the body -------------------------------------------------------------- */

typedef struct wh_body {
    mcpg_buf msg;    /* the news message: "u <uri>\n" per uri, "l\n" for a list change */
    int status;      /* 0 ok, else 400 / 403 with why */
    char why[TH_WH_URI_MAX + 200];
} wh_body;

static int refuse(wh_body *b, int status, const char *fmt, ...) MCPG_PRINTF(3, 4);
static int refuse(wh_body *b, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    b->status = status;
    vsnprintf(b->why, sizeof b->why, fmt, ap);
    va_end(ap);
    return -1;
}

static int allowed(const th_whsrc *s, const char *uri, size_t n) {
    for (size_t i = 0; i < s->nprefixes; i++) {
        size_t pn = strlen(s->prefixes[i]);
        if (pn <= n && !memcmp(uri, s->prefixes[i], pn)) return 1;
    }
    return 0;
}

/* One uri: a string, 1..TH_WH_URI_MAX bytes, no control characters (the
 * news message is line-based), within the source's prefixes. */
static int take_uri(const mcpg_host *h, const th_whsrc *s, const mcpg_json_span *v,
                    const char *field, wh_body *b) {
    char uri[TH_WH_URI_MAX + 1];
    size_t n = 0;
    if (v->type != MCPG_JSON_STRING) return refuse(b, 400, "%s: expected a string", field);
    if (h->json_string_decode(v, uri, sizeof uri, &n) < 0 || !n)
        return refuse(b, 400, "%s: expected a uri of 1 to 1023 bytes", field);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)uri[i] < 0x20 || uri[i] == 0x7f)
            return refuse(b, 400, "%s: control characters are not allowed in a uri", field);
    if (!allowed(s, uri, n))
        return refuse(b, 403, "%s: \"%s\" is outside the uri_prefixes of this source", field, uri);
    if (mcpg_fleet_news_updated(&b->msg, uri, n)) return refuse(b, 503, "out of memory");
    return 0;
}

static int take_uris(const mcpg_host *h, const th_whsrc *s, const mcpg_json_span *v, wh_body *b) {
    size_t iter = 0, k = 0;
    mcpg_json_span e;
    if (v->type != MCPG_JSON_ARRAY) return refuse(b, 400, "uris: expected an array of strings");
    while (h->json_array_next(v->p, v->n, &iter, &e) == 1) {
        char field[32];
        snprintf(field, sizeof field, "uris[%zu]", k);
        if (++k > TH_WH_MAX_URIS) return refuse(b, 400, "uris: at most 64 uris per webhook");
        if (take_uri(h, s, &e, field, b)) return -1;
    }
    return k ? 0 : refuse(b, 400, "uris: expected a non-empty array of strings");
}

static int take_member(const mcpg_host *h, const th_whsrc *s, const mcpg_json_span *k,
                       const mcpg_json_span *v, int *seen_uri, wh_body *b) {
    int one = h->json_string_eq(k, "uri", 3) == 1;
    if (one || h->json_string_eq(k, "uris", 4) == 1) {
        if ((*seen_uri)++) return refuse(b, 400, "uri, uris: give one of them");
        return one ? take_uri(h, s, v, "uri", b) : take_uris(h, s, v, b);
    }
    if (h->json_string_eq(k, "list_changed", 12) == 1) {
        if (v->type != MCPG_JSON_TRUE && v->type != MCPG_JSON_FALSE)
            return refuse(b, 400, "list_changed: expected a boolean");
        if (v->type == MCPG_JSON_FALSE) return 0;
        if (!s->list_changed)
            return refuse(b, 403, "list_changed: source %s may not announce list changes", s->name);
        return mcpg_fleet_news_list_changed(&b->msg) ? refuse(b, 503, "out of memory") : 0;
    }
    char key[64];
    size_t kn;
    if (h->json_string_decode(k, key, sizeof key, &kn) < 0) snprintf(key, sizeof key, "?");
    return refuse(b, 400, "%s: unknown field (expected uri, uris or list_changed)", key);
}

/* The body into b->msg, or b->status and b->why. */
static void parse_body(const mcpg_host *h, const th_whsrc *s, const char *p, size_t n, wh_body *b) {
    size_t iter = 0;
    mcpg_json_span k, v;
    int seen_uri = 0;
    while (n && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++, n--;
    if (!n || *p != '{' || h->json_validate(p, n) < 0) {
        refuse(b, 400, "body: expected a JSON object");
        return;
    }
    while (h->json_object_next(p, n, &iter, &k, &v) == 1)
        if (take_member(h, s, &k, &v, &seen_uri, b)) return;
    if (!b->msg.len) refuse(b, 400, "body: expected uri, uris or \"list_changed\": true");
}

/* ---- the hand-over ----------------------------------------------------------- *
 * First the webhook-id is claimed in the coordinator (put_if_absent of
 * "mcpg.webhook.<source>.<sha256 of the id>", for longer than a signed
 * request stays acceptable), so a sender's retry, or a copy posted to
 * another replica, is answered 202 "duplicate" and told to nobody: a
 * webhook is announced once however often it is delivered. Then the news
 * are published; when that fails the claim is dropped again, so the
 * sender's retry is taken. The steps go on when the client leaves (its
 * retry then finds the claim). */

typedef struct wh_op {
    th_worker_state *ws;
    th_req *r;
    mcpg_buf msg;   /* the news message (taken from the body's parse) */
    size_t klen;
    char key[sizeof "mcpg.webhook.." + 64 + 32];
} wh_op;

static void op_finish(wh_op *o, int status, const char *why) {
    th_req *r = o->r;
    th_conn *c = r->conn;
    o->ws->mod->host->buf_free(&o->msg);
    o->ws->mod->host->free(o);
    if (!th_conn_answer_back(c, r)) return;
    answer(c, r, status, why);
    th_conn_advance(c);
}

static void noop_cb(void *arg, int status, const mcpg_coord_value *v) { (void)arg, (void)status, (void)v; }

static void unclaim(wh_op *o) {
    th_mod *m = o->ws->mod;
    (void)m->co_ops->del(m->co, o->ws->w, o->key, o->klen, noop_cb, NULL);
}

static void on_published(void *arg, int status, const mcpg_coord_value *v) {
    wh_op *o = arg;
    (void)v;
    if (status) unclaim(o);
    op_finish(o, status ? 503 : 202, status ? "the coordinator cannot take the news now" : NULL);
}

static void on_claimed(void *arg, int status, const mcpg_coord_value *v) {
    wh_op *o = arg;
    th_mod *m = o->ws->mod;
    (void)v;
    if (status == MCPG_EEXIST) return op_finish(o, 202, "duplicate");
    if (status) return op_finish(o, 503, "the coordinator cannot take the news now");
    int rc = m->co_ops->publish(m->co, o->ws->w, TH_NEWS_SUBJECT, o->msg.data, o->msg.len,
                                on_published, o);
    if (rc < 0) {
        unclaim(o);
        op_finish(o, 503, "the coordinator refused the news");
    }
}

/* "mcpg.webhook.<source>.<hex sha256 of the id>": any id fits any store's keys. */
static size_t claim_key(const th_whsrc *s, const th_req *r, char *out, size_t cap) {
    size_t idn = 0;
    const char *id = th_req_header(r, "webhook-id", &idn);
    unsigned char d[32];
    SHA256((const unsigned char *)id, idn, d);
    int n = snprintf(out, cap, "mcpg.webhook.%s.", s->name);
    mcpg_hex(d, 16, out + n); /* 128 bits: no two ids meet */
    n += 32;
    out[n] = '\0';
    return (size_t)n;
}

/* Without a coordinator (none in the build) this loop's kernel tells every
 * loop of this process: the same delivery as a backend's news. */
static void deliver_here(const mcpg_host *h, th_mod *m, const char *msg, size_t n) {
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(msg + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - msg) : n;
        if (msg[i] == 'u' && e > i + 2 && MCPG_HOST_HAS(h, resource_updated))
            h->resource_updated(m->self, msg + i + 2, e - i - 2);
        else if (msg[i] == 'l' && MCPG_HOST_HAS(h, lists_changed))
            h->lists_changed(m->self, MCPG_LIST_RESOURCES);
        i = e + 1;
    }
}

/* msg is taken (zeroed) when the steps start. */
static void hand_over(th_conn *c, th_req *r, const th_whsrc *s, mcpg_buf *msg) {
    th_worker_state *ws = c->ws;
    th_mod *m = ws->mod;
    if (!m->co_ops) {
        deliver_here(m->host, m, msg->data, msg->len);
        return answer(c, r, 202, NULL);
    }
    wh_op *o = m->host->calloc(1, sizeof *o);
    if (!o) return answer(c, r, 503, "out of memory");
    o->ws = ws;
    o->r = r;
    o->msg = *msg;
    *msg = (mcpg_buf){0};
    o->klen = claim_key(s, r, o->key, sizeof o->key);
    r->state = TH_REQ_INFLIGHT;
    c->inflight++;
    int rc = ws->stopped ? MCPG_ESTATE
                         : m->co_ops->put_if_absent(m->co, ws->w, o->key, o->klen, "1", 1,
                                                    TH_WH_CLAIM_MS, on_claimed, o);
    if (rc < 0) op_finish(o, 503, "the coordinator refused the news");
}

void th_wh_route(th_conn *c, th_req *r, const char *source, size_t n) {
    th_worker_state *ws = c->ws;
    const mcpg_host *h = ws->mod->host;
    if (r->http_method != HTTP_POST) return answer(c, r, 405, "use POST");
    const th_whsrc *s = find_source(ws->mod, source, n);
    if (!s) return answer(c, r, 404, "no such webhook source");
    if (r->body_len > TH_WH_MAX_BODY) return answer(c, r, 413, "body: larger than 65536 bytes");
    const char *bad = verify(ws, s, r);
    if (bad) return answer(c, r, 401, bad);
    wh_body b = {0};
    parse_body(h, s, r->data.data + r->body_off, r->body_len, &b);
    if (b.status) answer(c, r, b.status, b.why);
    else hand_over(c, r, s, &b.msg);
    h->buf_free(&b.msg);
}
