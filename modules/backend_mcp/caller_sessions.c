/* backend_mcp: the session wire with credentials per caller (passthrough,
 * exchange). An upstream binds a session to the credential that opened it,
 * so the gateway's one session cannot carry every caller's calls: each
 * caller (principal and tenant) gets a session it opens itself, with its
 * own token, on its first call; its later calls, the cancellations of its
 * requests and the answers to the questions the upstream asked on it go
 * there, and nowhere else. The gateway's own requests (lists, its GET
 * stream) stay on the gateway's session. Each caller's session has a GET
 * stream of its own too, opened with the caller's token once the session
 * is, read as the gateway's is (link_open_get); what comes on it is sorted
 * by up_on_message, as a message on a caller's session outside any request.
 *
 * Bounded: at most max_caller_sessions; a new caller beyond closes the
 * least recently used idle one (HTTP DELETE), or is refused when every
 * one is busy. A session unused for caller_session_idle_ms is closed. A
 * session the upstream no longer knows is dropped: the call that found out
 * fails, the caller's next call opens a new one. A session closed closes
 * its GET stream: at most max_caller_sessions of those are open. I/O
 * thread only. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "link_http.h"

struct caller_session {
    char key[65];    /* the caller's (upcred_caller_key) */
    char *id;        /* Mcp-Session-Id, once given */
    char *auth_line; /* the credential it last carried: what closes it */
    bool open;       /* initialized: calls go straight on */
    uint64_t last_use_ms;
    size_t in_flight; /* its requests whose answers are still coming */
    queued *waiting;  /* calls waiting for it to open */
    hx *get;          /* its GET stream, while open */
    bool no_get;      /* the upstream offers none (405): never asked again */
    bool get_refused; /* its token was refused there: asked again at the next call */
    caller_session *next;
};

static bool per_caller_wire(const link_http *l) {
    const upstream *up = l->base.up;
    return up->wire == WIRE_LEGACY && upcred_per_caller(up->cred);
}

static void set_auth(caller_session *cs, const char *line) {
    if (!line || (cs->auth_line && strcmp(cs->auth_line, line) == 0)) return;
    if (cs->auth_line) explicit_bzero(cs->auth_line, strlen(cs->auth_line));
    free(cs->auth_line);
    cs->auth_line = strdup(line);
}

static caller_session *find(link_http *l, const char *key) {
    for (caller_session *cs = l->sessions; cs; cs = cs->next)
        if (strcmp(cs->key, key) == 0) return cs;
    return NULL;
}

/* ---- requests on a session ---------------------------------------------- */

static void session_headers(const upstream *up, const caller_session *cs, const up_request *r,
                            mcpg_buf *h) {
    mcpg_buf_puts(h, "Content-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\n");
    if (r && r->pc && r->pc->trace_lines) mcpg_buf_puts(h, r->pc->trace_lines);
    if (up->protocol[0]) mcpg_buf_printf(h, "MCP-Protocol-Version: %s\r\n", up->protocol);
    if (cs->id) mcpg_buf_printf(h, "Mcp-Session-Id: %s\r\n", cs->id);
    mcpg_buf_puts(h, up->cfg.call_header_lines ? up->cfg.call_header_lines : "");
    if (cs->auth_line) mcpg_buf_puts(h, cs->auth_line);
}

static int post_on(link_http *l, caller_session *cs, const char *json, size_t n, up_request *r,
                   bool init) {
    hx *x = link_hx_open(l, r);
    if (!x) return MCPG_ENOMEM;
    x->cs = cs;
    x->cs_init = init;
    if (!init) cs->in_flight++;
    mcpg_buf h = {0};
    session_headers(l->base.up, cs, r, &h);
    int rc = link_post(l, x, h.data, json, n);
    explicit_bzero(h.data, h.len);
    mcpg_buf_free(&h);
    return rc;
}

static void send_initialize(link_http *l, caller_session *cs) {
    char params[512];
    up_initialize_params(l->base.up, params, sizeof params);
    mcpg_buf b = {0};
    mcpg_buf_printf(&b,
                    "{\"jsonrpc\":\"2.0\",\"id\":\"caller-session\",\"method\":\"initialize\","
                    "\"params\":%s}",
                    params);
    if (post_on(l, cs, b.data, b.len, NULL, true) != 0) cs->open = false;
    mcpg_buf_free(&b);
}

/* ---- its GET stream ------------------------------------------------------ */

static void open_get(link_http *l, caller_session *cs) {
    if (l->stopped || !cs->open || !cs->id || cs->get || cs->no_get || cs->get_refused) return;
    cs->get = link_open_get(l, cs, cs->id, l->base.up->cfg.call_header_lines, cs->auth_line);
}

void sessions_open_gets(link_http *l) {
    for (caller_session *cs = l->sessions; cs; cs = cs->next) open_get(l, cs);
}

/* Its request is aborted: its on_done only lets go of it, now. */
static void close_get(caller_session *cs) {
    hx *g = cs->get;
    cs->get = NULL;
    if (!g) return;
    g->abandoned = true;
    if (g->req) up_req_abort(g->req);
}

/* ---- opening and closing ---------------------------------------------- */

/* The upstream is told the session ends; what it answers does not matter. */
static void send_delete(link_http *l, caller_session *cs) {
    if (!cs->id || !l->pool || l->stopped) return;
    hx *x = link_hx_open(l, NULL);
    if (!x) return;
    x->abandoned = true; /* its end is only let go of */
    mcpg_buf h = {0};
    session_headers(l->base.up, cs, NULL, &h);
    link_send(l, x, "DELETE", h.data, NULL, 0);
    explicit_bzero(h.data, h.len);
    mcpg_buf_free(&h);
}

/* why NULL: the link stops, and the upstream fails what was waiting itself. */
static void fail_waiting(upstream *up, queued *q, const hx *x, const char *why) {
    while (q) {
        queued *next = q->next;
        bool refused = why && q->r && x && x->status == 401 && q->r->pc;
        if (refused) calls_refused(up, q->r->pc, x->status, x->www);
        if (refused && !q->r->parked) up_request_free(up, q->r);
        else if (why && q->r && !refused) up_request_failed(up, q->r, why);
        free(q->json);
        free(q);
        q = next;
    }
}

static void unlink_session(link_http *l, caller_session *cs) {
    for (caller_session **pp = &l->sessions; *pp; pp = &(*pp)->next)
        if (*pp == cs) {
            *pp = cs->next;
            l->n_sessions--;
            break;
        }
    for (hx *x = l->open; x; x = x->next)
        if (x->cs == cs) x->cs = NULL;
}

/* Close cs (told to the upstream when delete) and its GET stream; its
 * waiting calls fail. */
static void drop(link_http *l, caller_session *cs, bool delete, const hx *x, const char *why) {
    unlink_session(l, cs);
    close_get(cs);
    if (delete) send_delete(l, cs);
    queued *q = cs->waiting;
    cs->waiting = NULL;
    if (cs->auth_line) explicit_bzero(cs->auth_line, strlen(cs->auth_line));
    free(cs->auth_line);
    free(cs->id);
    free(cs);
    fail_waiting(l->base.up, q, x, why);
}

static caller_session *least_recent_idle(link_http *l) {
    caller_session *best = NULL;
    for (caller_session *cs = l->sessions; cs; cs = cs->next)
        if (cs->open && !cs->in_flight && !cs->waiting &&
            (!best || cs->last_use_ms < best->last_use_ms))
            best = cs;
    return best;
}

static caller_session *open_session(link_http *l, const client_call *pc) {
    upstream *up = l->base.up;
    if (l->n_sessions >= (size_t)up->cfg.c->max_caller_sessions) {
        caller_session *old = least_recent_idle(l);
        if (!old) return NULL;
        drop(l, old, true, NULL, NULL);
    }
    caller_session *cs = calloc(1, sizeof *cs);
    if (!cs) return NULL;
    snprintf(cs->key, sizeof cs->key, "%s", pc->caller_key);
    set_auth(cs, pc->auth_line);
    cs->next = l->sessions;
    l->sessions = cs;
    l->n_sessions++;
    send_initialize(l, cs);
    return cs;
}

/* ---- which session a message belongs to ----------------------------------- */

/* A cancellation of a request one of the sessions carries; an answer to
 * a question one of them asked (up->reply_key): there and nowhere else. */
static caller_session *session_of_message(link_http *l, const char *json, size_t n, bool *gone) {
    const char *key = l->base.up->reply_key;
    mcpg_json_span method, params, rid;
    int64_t v;
    *gone = false;
    if (key) {
        caller_session *cs = find(l, key);
        *gone = !cs;
        return cs;
    }
    if (mcpg_json_object_get(json, n, "method", &method) != 1 ||
        !mcpg_json_string_eq(&method, "notifications/cancelled", 23) ||
        mcpg_json_object_get(json, n, "params", &params) != 1 ||
        mcpg_json_object_get(params.p, params.n, "requestId", &rid) != 1 ||
        mcpg_json_int64(&rid, &v) != 0)
        return NULL;
    for (hx *x = l->open; x; x = x->next)
        if (x->r && x->r->id == v) return x->cs;
    return NULL;
}

int sessions_send(link_http *l, const char *json, size_t n, up_request *r, int *rc) {
    if (!per_caller_wire(l)) return 0;
    caller_session *cs = NULL;
    *rc = 0;
    if (r && r->pc && r->pc->caller_key[0]) {
        cs = find(l, r->pc->caller_key);
        if (!cs && !(cs = open_session(l, r->pc))) {
            up_request_failed(l->base.up, r,
                              "too many callers' sessions are busy with the upstream");
            return 1;
        }
        set_auth(cs, r->pc->auth_line);
        cs->get_refused = false; /* a token that may be taken: its GET stream is asked again */
    } else if (!r) {
        bool gone;
        cs = session_of_message(l, json, n, &gone);
        if (gone) return *rc = MCPG_ENOENT, 1; /* its session closed: never another's */
    }
    if (!cs) return 0; /* the gateway's own: its own session */
    cs->last_use_ms = up_now_ms(l->base.up);
    *rc = cs->open ? post_on(l, cs, json, n, r, false) : link_queue_add(&cs->waiting, json, n, r);
    open_get(l, cs);
    return 1;
}

/* ---- answers ------------------------------------------------------------------ */

void sessions_on_head(hx *x, int status, const up_header *h, size_t n) {
    const up_header *sid = x->cs_init && x->cs ? up_header_find(h, n, "mcp-session-id") : NULL;
    if (!sid || status >= 300 || !sid->value_len || sid->value_len >= 256) return;
    free(x->cs->id);
    x->cs->id = strndup(sid->value, sid->value_len);
}

int sessions_on_message(hx *x, const char *data, size_t n) {
    if (!x->cs || !x->cs_init) return 0;
    x->body.len = 0;
    mcpg_buf_append(&x->body, data, n);
    return 1;
}

void sessions_deliver(hx *x, const char *data, size_t n) {
    upstream *up = x->l->base.up;
    char key[65];
    if (x->cs) memcpy(key, x->cs->key, sizeof key); /* x->cs may go meanwhile */
    up->reply_key = x->cs ? key : NULL;
    up_on_message(up, data, n, x->r);
    up->reply_key = NULL;
}

static bool initialized(const hx *x, int err) {
    mcpg_json_span res;
    return !err && x->status < 300 && x->cs->id && x->body.len &&
           mcpg_json_object_get(x->body.data, x->body.len, "result", &res) == 1 &&
           res.type == MCPG_JSON_OBJECT;
}

static void opened(link_http *l, caller_session *cs) {
    static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    cs->open = true;
    post_on(l, cs, note, sizeof note - 1, NULL, false);
    open_get(l, cs);
    queued *q = cs->waiting;
    cs->waiting = NULL;
    while (q) {
        queued *next = q->next;
        if (post_on(l, cs, q->json, q->n, q->r, false) != 0 && q->r)
            up_request_failed(l->base.up, q->r, "out of memory");
        free(q->json);
        free(q);
        q = next;
    }
}

static bool lost(const hx *x) {
    if (x->status == 404) return true;
    return x->status == 400 && x->body.data && strcasestr(x->body.data, "session");
}

int sessions_done(link_http *l, hx *x, int err) {
    caller_session *cs = x->cs;
    if (!cs) return 0;
    char why[300];
    if (x->cs_init) {
        if (initialized(x, err)) {
            link_forget_hx(l, x);
            opened(l, cs);
            return 1;
        }
        snprintf(why, sizeof why,
                 "the upstream did not open a session for this caller (HTTP %d%s%.120s)", x->status,
                 x->body.len ? ": " : "", x->body.data ? x->body.data : "");
        drop(l, cs, false, x, why);
        link_forget_hx(l, x);
        return 1;
    }
    if (!lost(x)) return 0;
    snprintf(why, sizeof why,
             "the upstream no longer knows this caller's session (HTTP %d); "
             "the next call opens a new one",
             x->status);
    drop(l, cs, false, NULL, NULL);
    up_request *r = x->r;
    x->r = NULL;
    if (r) r->link_ctx = NULL;
    link_forget_hx(l, x);
    if (r) up_request_failed(l->base.up, r, why);
    return 1;
}

void sessions_hx_gone(hx *x) {
    if (x->cs && x->cs->get == x) x->cs->get = NULL;
    if (!x->cs || x->cs_init || x->is_get || !x->cs->in_flight) return;
    x->cs->in_flight--;
    x->cs->last_use_ms = up_now_ms(x->l->base.up);
}

/* As the gateway's own stream: opened again in a while, unless the upstream
 * offers none (405) or no longer knows the session (400, 404: the session
 * goes, found out before the caller's next call would). A refused token
 * waits for the caller's next call, which brings a fresh one. */
void sessions_get_ended(link_http *l, caller_session *cs, int status) {
    if (status == 405) cs->no_get = true;
    else if (status == 400 || status == 404) drop(l, cs, false, NULL, NULL);
    else if (status == 401 || status == 403) cs->get_refused = true;
    else if (!l->stopped) link_schedule_get(l);
}

void sessions_forget(link_http *l, const up_request *r) {
    for (caller_session *cs = l->sessions; cs; cs = cs->next)
        if (link_queue_drop(&cs->waiting, r)) return;
}

/* ---- idle sessions ------------------------------------------------------------- */

static void on_idle_timer(uv_timer_t *t) {
    link_http *l = t->data;
    uint64_t now = up_now_ms(l->base.up),
             idle = (uint64_t)l->base.up->cfg.c->caller_session_idle_ms;
    for (caller_session *cs = l->sessions, *next; cs; cs = next) {
        next = cs->next;
        if (cs->open && !cs->in_flight && !cs->waiting && now - cs->last_use_ms >= idle)
            drop(l, cs, true, NULL, NULL);
    }
}

void sessions_start(link_http *l) {
    upstream *up = l->base.up;
    if (!upcred_per_caller(up->cred)) return;
    if (!l->idle_timer_init) {
        uv_timer_init(&up->loop, &l->idle_timer);
        l->idle_timer.data = l;
        l->idle_timer_init = true;
    }
    uint64_t every = (uint64_t)up->cfg.c->caller_session_idle_ms / 4;
    uv_timer_start(&l->idle_timer, on_idle_timer, every, every);
}

/* The link stops: the sessions end with its connections (the upstream
 * that restarts has forgotten them; one that did not lets them expire). */
void sessions_stop(link_http *l) {
    while (l->sessions) drop(l, l->sessions, false, NULL, NULL);
    if (!l->idle_timer_init) return;
    uv_timer_stop(&l->idle_timer);
    if (l->base.up->state == UP_STOPPING) {
        uv_close((uv_handle_t *)&l->idle_timer, NULL);
        l->idle_timer_init = false;
    }
}
