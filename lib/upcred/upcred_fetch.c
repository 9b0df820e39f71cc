/* upcred: one request to the token endpoint (a form-encoded POST, RFC 6749
 * section 3.2) with upclient on the loop of the call that missed, bounded
 * by timeout_ms, and its answer read: an access token of type Bearer (or
 * N_A, which RFC 8693 allows for a token that is not an access token) and
 * its lifetime, or the endpoint's `error` code. The answer's text never
 * reaches a message: only its error code and status do. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "upcred_internal.h"

#define GRANT_EXCHANGE "urn:ietf:params:oauth:grant-type:token-exchange"

typedef struct fetch {
    upcred *u;
    upcred_entry *e;
    up_req *req;
    uv_timer_t timer;
    int status, timed_out, too_big;
    int64_t subject_exp_s;
    mcpg_buf body;
} fetch;

/* ---- the request ------------------------------------------------------- */

/* application/x-www-form-urlencoded: unreserved bytes as they are, every
 * other one %XX. */
void upcred_form_encode(mcpg_buf *b, const char *v, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            strchr("-._~", ch))
            mcpg_buf_append(b, v + i, 1);
        else mcpg_buf_printf(b, "%%%c%c", hex[ch >> 4], hex[ch & 15]);
    }
}

static void put_form(mcpg_buf *b, const char *key, const char *v, size_t n) {
    if (!v) return;
    mcpg_buf_printf(b, "%s%s=", b->len ? "&" : "", key);
    upcred_form_encode(b, v, n);
}

static void put_form_s(mcpg_buf *b, const char *key, const char *v) {
    put_form(b, key, v, v ? strlen(v) : 0);
}

static size_t len_of(const char *s) { return s ? strlen(s) : 0; }

/* Room for the whole form, made before the subject token goes in: a
 * buffer that grew would leave a copy of it behind, unwiped. */
static int form_room(const upcred *u, const upcred_grant *g, mcpg_buf *b) {
    const upcred_cfg *c = &u->cfg;
    size_t n = g->subject_len + len_of(c->subject_token_type) + len_of(c->requested_token_type) +
               len_of(c->audience) + len_of(c->resource) + len_of(c->scope) + len_of(c->client_id);
    return mcpg_buf_reserve(b, 3 * n + 8192); /* 8192: the names, and a client assertion */
}

static void form_body(const upcred *u, const upcred_grant *g, mcpg_buf *b) {
    const upcred_cfg *c = &u->cfg;
    if (c->mode == UPCRED_EXCHANGE) {
        put_form_s(b, "grant_type", GRANT_EXCHANGE);
        put_form(b, "subject_token", g->subject_token, g->subject_len);
        put_form_s(b, "subject_token_type", c->subject_token_type);
        put_form_s(b, "requested_token_type", c->requested_token_type);
    } else {
        put_form_s(b, "grant_type", "client_credentials");
    }
    put_form_s(b, "audience", c->audience);
    put_form_s(b, "resource", c->resource);
    put_form_s(b, "scope", c->scope);
    if (!u->basic && !u->signer) put_form_s(b, "client_id", c->client_id); /* a public client */
}

/* ---- the answer --------------------------------------------------------- */

/* A token fit for a header line: visible ASCII, no blank (RFC 6750's
 * b64token is narrower still); anything else would let the endpoint's
 * answer write headers of its own. */
int upcred_header_safe(const char *s, size_t n) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) return 0;
    return 1;
}

/* The answer is read in place, with the SDK's JSON spans, and not with
 * jansson: jansson's parser copies each string it reads (its lexer's buffer,
 * then the string's own) and frees both unwiped, which would leave the
 * access token in freed memory. Here the token's only copies are the body
 * (wiped by fetch_free), the decoded token and its header line (wiped or
 * kept by the cache, which wipes it). */
typedef struct answer {
    mcpg_json_span obj; /* the whole answer, a JSON object */
    int ok;
} answer;

static answer answer_of(const fetch *f) {
    answer a = {0};
    size_t pos = 0;
    const char *b = f->body.data;
    a.ok = b && mcpg_json_validate(b, f->body.len) == 0 &&
           mcpg_json_value(b, f->body.len, &pos, &a.obj) == 1 && a.obj.type == MCPG_JSON_OBJECT;
    return a;
}

/* A string member decoded into out (cap bytes): 1, or 0 when absent, not a
 * string or longer than cap allows. */
static int member(const answer *a, const char *key, char *out, size_t cap, size_t *len) {
    mcpg_json_span v;
    return a->ok && mcpg_json_object_get_trusted(a->obj.p, a->obj.n, key, &v) == 1 &&
           v.type == MCPG_JSON_STRING && mcpg_json_string_decode(&v, out, cap, len) == 0;
}

/* The endpoint's `error` code, as RFC 6749 spells them (NQSCHAR), else "". */
static void error_code(const answer *a, char *out, size_t cap) {
    size_t n = 0;
    if (!member(a, "error", out, cap < 65 ? cap : 65, &n)) n = 0;
    for (size_t i = 0; i < n; i++)
        if (out[i] < 0x20 || out[i] > 0x7e || out[i] == '"' || out[i] == '\\') n = 0;
    out[n] = '\0';
}

static int64_t expiry_us(const fetch *f, const answer *a) {
    mcpg_json_span ei;
    int64_t life = 0;
    if (!a->ok || mcpg_json_object_get_trusted(a->obj.p, a->obj.n, "expires_in", &ei) != 1 ||
        mcpg_json_int64(&ei, &life) != 0 || life <= 0)
        life = UPCRED_EXPIRES_DEFAULT_S;
    int64_t now_s = f->u->h->wall_us() / 1000000, until = now_s + life;
    /* an exchanged token is never used past the subject token's own end */
    if (f->subject_exp_s && f->subject_exp_s < until) until = f->subject_exp_s;
    until -= f->u->cfg.refresh_margin_s;
    return until > now_s ? until * 1000000 : 0;
}

/* The access token decoded into a buffer of its own (wiped by the caller),
 * or NULL when there is none fit for a header line. */
static char *access_token(const fetch *f, const answer *a, size_t *len) {
    char *tok = malloc(f->body.len + 1); /* a decoded string is never longer than its text */
    if (!tok) return NULL;
    if (member(a, "access_token", tok, f->body.len + 1, len) && upcred_header_safe(tok, *len))
        return tok;
    explicit_bzero(tok, f->body.len + 1);
    free(tok);
    return NULL;
}

/* The token's type is one this gateway sends as Bearer: absent, Bearer, or
 * N_A; else its name (printable) into shown. */
static int bearer_type(const answer *a, char *shown, size_t cap) {
    char type[40];
    size_t n = 0;
    mcpg_json_span v;
    if (!a->ok || mcpg_json_object_get_trusted(a->obj.p, a->obj.n, "token_type", &v) != 1 ||
        v.type != MCPG_JSON_STRING)
        return 1;
    if (!member(a, "token_type", type, sizeof type, &n)) snprintf(type, sizeof type, "?");
    if (strcasecmp(type, "Bearer") == 0 || strcasecmp(type, "N_A") == 0) return 1;
    snprintf(shown, cap, "%.32s", upcred_header_safe(type, strlen(type)) ? type : "?");
    return 0;
}

/* 200 with a usable token: its header line; else why not into why. */
static char *read_token(fetch *f, int64_t *expires_us, char *why, size_t cap) {
    const upcred *u = f->u;
    answer a = answer_of(f);
    char code[72] = "", type[40] = "";
    char *line = NULL, *tok = NULL;
    size_t len = 0;
    error_code(&a, code, sizeof code);
    if (f->status != 200) {
        snprintf(why, cap, "%s: the token endpoint %s refused the request (HTTP %d%s%s)", u->name,
                 u->cfg.token_url, f->status, code[0] ? ", error " : "", code);
    } else if (!(tok = access_token(f, &a, &len))) {
        snprintf(why, cap, "%s: the token endpoint %s answered without a usable access_token",
                 u->name, u->cfg.token_url);
    } else if (!bearer_type(&a, type, sizeof type)) {
        snprintf(why, cap, "%s: the token endpoint %s answered a token of type %s, not Bearer",
                 u->name, u->cfg.token_url, type);
    } else if (!(line = upcred_bearer_line(tok, len))) {
        snprintf(why, cap, "%s: out of memory", u->name);
    } else {
        *expires_us = expiry_us(f, &a);
    }
    if (tok) explicit_bzero(tok, len);
    free(tok);
    return line;
}

/* ---- upclient's callbacks ------------------------------------------------ */

static void fetch_free(uv_handle_t *t) {
    fetch *f = t->data;
    if (f->body.data) explicit_bzero(f->body.data, f->body.len);
    mcpg_buf_free(&f->body);
    free(f);
}

static int on_head(void *arg, int status, const up_header *h, size_t n) {
    (void)h;
    (void)n;
    ((fetch *)arg)->status = status;
    return 0;
}

static int on_body(void *arg, const char *p, size_t n) {
    fetch *f = arg;
    if (f->body.len + n > UPCRED_ANSWER_MAX) return f->too_big = 1;
    return mcpg_buf_append(&f->body, p, n) ? -1 : 0;
}

static void on_done(void *arg, int err) {
    fetch *f = arg;
    upcred *u = f->u;
    char why[400] = "";
    char *line = NULL;
    int64_t exp = 0;
    if (f->timed_out)
        snprintf(why, sizeof why, "%s: the token endpoint %s did not answer within %lld ms",
                 u->name, u->cfg.token_url, (long long)u->cfg.timeout_ms);
    else if (f->too_big)
        snprintf(why, sizeof why, "%s: the token endpoint %s answered over %d bytes", u->name,
                 u->cfg.token_url, UPCRED_ANSWER_MAX);
    else if (err)
        snprintf(why, sizeof why, "%s: the token endpoint %s cannot be reached: %s", u->name,
                 u->cfg.token_url, up_req_error_detail(f->req));
    else line = read_token(f, &exp, why, sizeof why);
    f->req = NULL;
    uv_timer_stop(&f->timer);
    upcred_finish(u, f->e, line, line ? strlen(line) : 0, exp, line ? NULL : why);
    uv_close((uv_handle_t *)&f->timer, fetch_free);
}

static const up_callbacks CALLBACKS = {on_head, on_body, on_done};

static void on_timeout(uv_timer_t *t) {
    fetch *f = t->data;
    f->timed_out = 1;
    if (f->req) up_req_abort(f->req); /* on_done answers */
}

/* ---- per loop ------------------------------------------------------------ */

void upcred_loop_stop(upcred *u, void *loop) {
    if (u) up_loops_stop(u->pools, loop); /* a request out ends: its waiters are told */
}

int upcred_fetch(upcred *u, void *loop, upcred_entry *e, const upcred_grant *g) {
    up_pool *pool = up_loops_pool(u->pools, loop, 0, u->endpoint, 4, 2, UPCRED_WAITERS_MAX);
    fetch *f = pool ? calloc(1, sizeof *f) : NULL;
    char why[200];
    snprintf(why, sizeof why, "%s: out of memory", u->name);
    if (!f) return upcred_finish(u, e, NULL, 0, 0, why), -1;
    *f = (fetch){.u = u, .e = e, .subject_exp_s = g->subject_exp_s};
    mcpg_buf body = {0}, head = {0};
    int rc = form_room(u, g, &body);
    if (!rc) form_body(u, g, &body);
    if (!rc && u->signer && (rc = upcred_assertion(u, &body)) != 0)
        snprintf(why, sizeof why, "%s: cannot sign the client assertion", u->name);
    if (rc) {
        if (body.data) explicit_bzero(body.data, body.len);
        mcpg_buf_free(&body);
        free(f);
        return upcred_finish(u, e, NULL, 0, 0, why), -1;
    }
    mcpg_buf_puts(&head, "Content-Type: application/x-www-form-urlencoded\r\n"
                         "Accept: application/json\r\n");
    if (u->basic) mcpg_buf_puts(&head, u->basic);
    uv_timer_init(loop, &f->timer);
    f->timer.data = f;
    uv_timer_start(&f->timer, on_timeout, (uint64_t)u->cfg.timeout_ms, 0);
    up_pool_wipe_reads(pool); /* its answers hold tokens */
    f->req = up_send(pool, "POST", up_target_path(u->endpoint), head.data, body.data, body.len,
                     UP_SECRET_BODY, &CALLBACKS, f);
    if (body.data) explicit_bzero(body.data, body.len); /* it held the subject token */
    mcpg_buf_free(&body);
    explicit_bzero(head.data, head.len);
    mcpg_buf_free(&head);
    if (f->req) return 0;
    uv_timer_stop(&f->timer);
    uv_close((uv_handle_t *)&f->timer, fetch_free);
    upcred_finish(u, e, NULL, 0, 0, why);
    return -1;
}
