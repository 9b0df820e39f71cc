/* transport_http: POST /webhooks/events/{source} (see webhook.h).
 *
 * The transport checks only what is HTTP's (the method, the body's size);
 * the source, the signature, the body and the inbox are the events
 * module's, which answers with a status (call_set_http) and a JSON result,
 * or an error whose message becomes {"error": message}. */
#include "routes/routes.h"

#include <string.h>

/* Larger than any event the module takes, so it, not this, names the limit. */
#define TH_EV_MAX_BODY (1u << 20)

static void events_refused(th_conn *c, th_req *r, int rc);
static void events_complete(void *ctx, mcpg_call *call);

static void answer_json(th_conn *c, th_req *r, int status, uint32_t retry_after, const char *json,
                        size_t n) {
    th_resp_head hd = {.status = status, .json = 1, .retry_after_s = retry_after};
    if (status == 405) hd.allow = "POST";
    th_piece body = {json, n};
    th_respond(c, r, &hd, &body, 1);
}

static void answer_error(th_conn *c, th_req *r, int status, uint32_t retry_after, const char *msg) {
    const mcpg_host *h = c->ws->mod->host;
    mcpg_buf *b = &c->ws->scratch;
    b->len = 0;
    int rc = h->buf_append(b, "{\"error\":", 9) || h->buf_append_json_string(b, msg, strlen(msg)) ||
             h->buf_append(b, "}", 1);
    if (rc) answer_json(c, r, 503, 1, "{\"error\":\"out of memory\"}", 25);
    else answer_json(c, r, status, retry_after, b->data, b->len);
}

void th_wh_events_route(th_conn *c, th_req *r, const char *source, size_t n) {
    if (r->http_method != HTTP_POST) return answer_error(c, r, 405, 0, "use POST");
    if (r->body_len > TH_EV_MAX_BODY) return answer_error(c, r, 413, 0, "body: larger than 1 MiB");
    if (n >= TH_NAME_MAX) return answer_error(c, r, 404, 0, "no such event source");
    mcpg_call_desc *d = &r->desc;
    memset(d, 0, sizeof *d);
    d->wire = MCPG_WIRE_STATELESS;
    d->method = "events/webhook";
    d->method_len = 14;
    memcpy(r->name_buf, source, n); /* the url is not NUL-terminated at the name's end */
    r->name_buf[n] = '\0';
    d->name = r->name_buf;
    d->name_len = n;
    d->params_json = r->data.data + r->body_off;
    d->params_len = r->body_len;
    d->id_json = "null";
    d->id_len = 4;
    th_submit_event(c, r, events_complete, events_refused);
}

static void events_refused(th_conn *c, th_req *r, int rc) {
    if (rc == MCPG_ENOENT) answer_error(c, r, 404, 0, "this gateway runs no events pipeline");
    else if (rc == MCPG_EAGAIN) answer_error(c, r, 503, 1, "too many calls in flight, retry later");
    else if (rc == MCPG_EUNAVAIL) answer_error(c, r, 503, 1, "the gateway is draining");
    else answer_error(c, r, 500, 0, "internal error");
}

/* desc.complete of an event webhook's call. */
static void events_complete(void *ctx, mcpg_call *call) {
    th_req *r = ctx;
    th_conn *c = r->conn;
    const mcpg_host *h = r->ws->mod->host;
    mcpg_call_outcome oc = {.size = sizeof oc};
    if (!c || c->closing) { /* the producer left: what the module did stands */
        h->call_release(call);
        r->call = NULL;
    }
    if (!c) {
        r->state = TH_REQ_DONE;
        return;
    }
    if (!th_conn_answer_back(c, r)) return;
    h->call_outcome(call, &oc);
    int status = oc.http_status ? oc.http_status : oc.is_error ? 500 : 202;
    if (oc.is_error) answer_error(c, r, status, oc.retry_after_s, oc.error_message);
    else answer_json(c, r, status, oc.retry_after_s, oc.result, oc.result_len);
    h->call_release(call);
    r->call = NULL;
    if (!r->in_submit) th_conn_advance(c);
}
