/* transport_http: subscriptions/listen (2026-07-28) and the news that
 * feeds it (the transport op `news`, on each worker's loop).
 *
 * A listen request gets a stream at once: its first event acknowledges the
 * subset of params.notifications this gateway honours, each later event is
 * one change the filter asked for, and every one carries the listen
 * request's id as _meta["io.modelcontextprotocol/subscriptionId"]. The
 * stream lives until the client closes it (nothing to cancel: no call) or
 * the gateway drains (then its result ends it). */
#include "wire/wire.h"
#include "wire/replay.h"
#include "wire/stream.h"

#include <string.h>

static const char k_sub_key[] = "\"io.modelcontextprotocol/subscriptionId\":";

static int flag_true(const mcpg_host *h, const th_piece *obj, const char *key) {
    mcpg_json_span v;
    return obj->p && h->json_object_get(obj->p, obj->n, key, &v) == 1 && v.type == MCPG_JSON_TRUE;
}

/* Tell the backends about the stream's resource subscriptions (on 1 / off
 * 0); with `ack`, append the ones a backend owns (a JSON array's items). */
static int subscribe_uris(th_worker_state *ws, th_req *r, int on, mcpg_buf *ack) {
    const mcpg_host *h = ws->mod->host;
    const char *arr = r->data.data + r->luris_off;
    size_t iter = 0;
    mcpg_json_span s;
    int n = 0, rc = 0;
    while (r->luris_len && h->json_array_next(arr, r->luris_len, &iter, &s) == 1) {
        char uri[1024];
        size_t len;
        if (s.type != MCPG_JSON_STRING || h->json_string_decode(&s, uri, sizeof uri, &len) < 0)
            continue;
        int owned = MCPG_HOST_HAS(h, resource_subscribe)
                        ? h->resource_subscribe(ws->w, uri, len, on) == 0
                        : 0;
        if (!ack || !owned) continue;
        if (n++) rc |= h->buf_append(ack, ",", 1);
        rc |= h->buf_append(ack, s.p - 1, s.n + 2);
    }
    return rc;
}

int th_listen_has_uris(const mcpg_host *h, const th_mcp_verdict *v) {
    mcpg_json_span uris;
    size_t iter = 0;
    mcpg_json_span first;
    return v->listen.p &&
           h->json_object_get(v->listen.p, v->listen.n, "resourceSubscriptions", &uris) == 1 &&
           uris.type == MCPG_JSON_ARRAY && h->json_array_next(uris.p, uris.n, &iter, &first) == 1;
}

void th_listen_start(th_conn *c, th_req *r, const th_mcp_verdict *v) {
    th_worker_state *ws = c->ws;
    const mcpg_host *h = ws->mod->host;
    r->desc.id_json = v->id.p; /* the subscription id, in the request's own bytes */
    r->desc.id_len = v->id.n;
    r->state = TH_REQ_INFLIGHT;
    r->lfilter = (uint8_t)((flag_true(h, &v->listen, "toolsListChanged") ? TH_LISTEN_TOOLS : 0) |
                           (flag_true(h, &v->listen, "resourcesListChanged") ? TH_LISTEN_RESOURCES : 0) |
                           (flag_true(h, &v->listen, "promptsListChanged") ? TH_LISTEN_PROMPTS : 0));
    mcpg_json_span uris;
    if (v->listen.p && h->json_object_get(v->listen.p, v->listen.n, "resourceSubscriptions", &uris) == 1 &&
        uris.type == MCPG_JSON_ARRAY) {
        r->luris_off = (uint32_t)(uris.p - r->data.data);
        r->luris_len = (uint32_t)uris.n;
    }
    if (r->authz == 2) { /* the ones the pipeline allowed */
        r->luris_off = r->authz_off;
        r->luris_len = r->authz_len;
    }
    mcpg_buf *b = &ws->msg_body;
    b->len = 0;
    int rc = h->buf_printf(b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\","
                              "\"params\":{\"_meta\":{%s%.*s},\"notifications\":{",
                           k_sub_key, (int)v->id.n, v->id.p);
    static const char *const names[3] = {"toolsListChanged", "resourcesListChanged", "promptsListChanged"};
    int k = 0;
    for (int i = 0; i < 3; i++)
        if (r->lfilter & (1u << i)) rc |= h->buf_printf(b, "%s\"%s\":true", k++ ? "," : "", names[i]);
    if (r->luris_len) {
        rc |= h->buf_printf(b, "%s\"resourceSubscriptions\":[", k++ ? "," : "");
        rc |= subscribe_uris(ws, r, 1, b);
        rc |= h->buf_append(b, "]", 1);
    }
    rc |= h->buf_append(b, "}}}", 3);
    th_listener_add(ws, r);
    if (rc || th_sse_event(c, r, NULL, 0, b->data, b->len) == MCPG_ENOMEM) c->close_after = 1;
}

/* Called when a listening stream goes away (closed, drained). */
void th_listen_stop(th_worker_state *ws, th_req *r) {
    if (r->legacy) { /* the session's GET slot is free again (unless the session ended) */
        th_replay_news_closed(ws, r); /* its buffer keeps the news for a GET that resumes */
        th_cached_session *e = th_sess_peek(ws, r->sid, strlen(r->sid));
        if (e) {
            e->nget--;
            (void)th_sess_change(ws, NULL, r->sid, TH_SC_GET_CLOSED, 0, NULL, 0);
        }
        return;
    }
    if (r->luris_len) (void)subscribe_uris(ws, r, 0, NULL);
    r->luris_len = 0;
}

static unsigned list_bit(const char *method) {
    if (!strcmp(method, "notifications/tools/list_changed")) return TH_LISTEN_TOOLS;
    if (!strcmp(method, "notifications/resources/list_changed")) return TH_LISTEN_RESOURCES;
    if (!strcmp(method, "notifications/prompts/list_changed")) return TH_LISTEN_PROMPTS;
    return 0;
}

static int wants_uri(const mcpg_host *h, const th_req *r, const char *uri, size_t n) {
    const char *arr = r->data.data + r->luris_off;
    size_t iter = 0;
    mcpg_json_span s;
    while (r->luris_len && h->json_array_next(arr, r->luris_len, &iter, &s) == 1)
        if (s.type == MCPG_JSON_STRING && h->json_string_eq(&s, uri, n) == 1) return 1;
    return 0;
}

/* The notification a session's GET stream gets, in ws->msg_body; 0 or MCPG_ENOMEM. */
static int legacy_note(th_worker_state *ws, const char *method, int updated, const char *uri, size_t uri_len) {
    const mcpg_host *h = ws->mod->host;
    mcpg_buf *b = &ws->msg_body;
    b->len = 0;
    int rc = h->buf_printf(b, "{\"jsonrpc\":\"2.0\",\"method\":\"%s\"", method);
    if (updated) {
        rc |= h->buf_append(b, ",\"params\":{\"uri\":", 17);
        rc |= h->buf_append_json_string(b, uri, uri_len);
        rc |= h->buf_append(b, "}", 1);
    }
    rc |= h->buf_append(b, "}", 1);
    return rc ? MCPG_ENOMEM : 0;
}

/* A session's standalone stream (replay.h): every list change, the updates
 * of the resources the session subscribed to, kept in its buffer whether a
 * GET shows it now or comes back for it later. */
static void session_news(th_worker_state *ws, th_rstream *rs, const char *method, int updated, const char *uri,
                         size_t uri_len) {
    if (updated && !th_sess_subscribed(ws, rs->sess, uri, uri_len)) return;
    if (!legacy_note(ws, method, updated, uri, uri_len))
        (void)th_replay_event(ws, rs, ws->msg_body.data, ws->msg_body.len);
}

/* A session's GET stream without a buffer (there was no memory for one):
 * the news go to it live only; a session ended elsewhere ends its stream. */
static void legacy_news(th_worker_state *ws, th_req *r, const char *method, int updated, const char *uri,
                        size_t uri_len) {
    th_cached_session *e = th_sess_peek(ws, r->sid, strlen(r->sid));
    if (!e) {
        th_conn *c = r->conn;
        th_listener_remove(ws, r);
        th_sse_end(c, r, NULL, 0, NULL, 0);
        th_conn_advance(c);
        return;
    }
    if (e->news && e->news->live == r) return; /* told through its buffer */
    if (updated && !th_sess_subscribed(ws, e, uri, uri_len)) return;
    if (!legacy_note(ws, method, updated, uri, uri_len))
        (void)th_sse_event(r->conn, r, NULL, 0, ws->msg_body.data, ws->msg_body.len);
}

void th_news(th_worker_state *ws, const char *method, const char *uri, size_t uri_len) {
    const mcpg_host *h = ws->mod->host;
    unsigned bit = list_bit(method);
    int updated = !bit && uri && !strcmp(method, "notifications/resources/updated");
    if (!bit && !updated) return;
    for (th_rstream *rs = ws->rtable.news; rs; rs = rs->nnext)
        session_news(ws, rs, method, updated, uri, uri_len);
    for (th_req *r = ws->listeners, *next; r; r = next) {
        next = r->lnext; /* a stream over its bound closes (never frees) here */
        if (r->legacy) {
            legacy_news(ws, r, method, updated, uri, uri_len);
            continue;
        }
        if (bit ? !(r->lfilter & bit) : !wants_uri(h, r, uri, uri_len)) continue;
        mcpg_buf *b = &ws->msg_body;
        b->len = 0;
        int rc = h->buf_printf(b, "{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"params\":{", method);
        if (updated) {
            rc |= h->buf_append(b, "\"uri\":", 6);
            rc |= h->buf_append_json_string(b, uri, uri_len);
            rc |= h->buf_append(b, ",", 1);
        }
        rc |= h->buf_printf(b, "\"_meta\":{%s%.*s}}}", k_sub_key, (int)r->desc.id_len, r->desc.id_json);
        if (!rc) (void)th_sse_event(r->conn, r, NULL, 0, b->data, b->len);
    }
}
