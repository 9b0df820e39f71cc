/* backend_http: fill a tool's templates from the call's arguments, each
 * escaped for its place, so that no argument can change where the request
 * goes or add a part to it:
 *
 *  - path: each value percent-encoded (every byte but RFC 3986's
 *    unreserved ones), so it stays inside its segment. A value holding "."
 *    or ".." between slashes, and a segment an argument leaves empty, "." or
 *    "..", are refused: an upstream would resolve them to another path.
 *  - query: the keys are the config's; each value (its literal text and the
 *    arguments in it) is percent-encoded whole, so '&', '=', '+' and '#'
 *    stay inside it.
 *  - body: JSON built by jansson: a string that is exactly "{arg}" becomes
 *    the argument's JSON value (any type); a placeholder inside a longer
 *    string inserts the value's text, escaped as JSON.
 *  - headers: the config's alone; no argument reaches them.
 *
 * The scheme, host and port come from the config (a placeholder there is a
 * config error, http_config.c). Every refusal is -32602 naming the
 * argument, and no byte is sent for a refused call. */
#define _GNU_SOURCE
#include "http_request.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static int unreserved(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("-._~", ch));
}

/* RFC 3986 unreserved characters stay; every other byte is %XX, '%' too,
 * so a value can never spell an escape an upstream would decode. */
static void put_pct(sbuf *b, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (unreserved(ch)) {
            put(b, s, 1);
        } else {
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            put(b, e, 3);
        }
    }
}

/* The call is refused as -32602; returns -1 for the caller to pass on. */
static int refuse(const mcpg_host *h, mcpg_call *call, const char *fmt, ...) MCPG_PRINTF(3, 4);
static int refuse(const mcpg_host *h, mcpg_call *call, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS, "Invalid params: %s", msg);
    return -1;
}

/* A scalar argument as text: a string decoded, anything else as JSON. */
static char *value_text(json_t *v) {
    if (json_is_string(v)) return strndup(json_string_value(v), json_string_length(v));
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

static int placeholder_at(const char *p, const http_tool *t) {
    if (*p != '{') return -1;
    for (size_t i = 0; i < t->nplaceholders; i++) {
        size_t n = strlen(t->placeholders[i]);
        if (strncmp(p + 1, t->placeholders[i], n) == 0 && p[1 + n] == '}') return (int)i;
    }
    return -1;
}

/* len bytes of a template: literal text as is, values through `esc`
 * (NULL: raw). Returns how many placeholders it filled. A placeholder
 * never spans a '/', so a path segment can be filled on its own. */
static size_t fill(sbuf *b, const char *tpl, size_t len, const http_tool *t, char *const *vals,
                   void (*esc)(sbuf *, const char *)) {
    size_t filled = 0;
    for (const char *p = tpl, *end = tpl + len; p < end;) {
        int i = placeholder_at(p, t);
        if (i >= 0) {
            if (esc) esc(b, vals[i]);
            else puts_(b, vals[i]);
            p += strlen(t->placeholders[i]) + 2;
            filled++;
        } else {
            put(b, p++, 1);
        }
    }
    return filled;
}

static int template_uses(const char *tpl, const http_tool *t, size_t i) {
    for (const char *p = strchr(tpl, '{'); p; p = strchr(p + 1, '{'))
        if (placeholder_at(p, t) == (int)i) return 1;
    return 0;
}

static int in_path(const http_tool *t, size_t i) { return template_uses(t->path, t, i); }

static int in_url(const http_tool *t, size_t i) {
    for (size_t q = 0; q < t->nquery; q++)
        if (template_uses(t->query[q].value, t, i)) return 1;
    return in_path(t, i);
}

/* ------------------------------------------------------------------ */
/* each argument, judged for the places it fills                       */

static int holds_nul(json_t *v) {
    if (json_is_string(v)) return memchr(json_string_value(v), '\0', json_string_length(v)) != NULL;
    size_t i;
    const char *k;
    json_t *e;
    if (json_is_array(v)) json_array_foreach(v, i, e) if (holds_nul(e)) return 1;
    if (json_is_object(v)) json_object_foreach(v, k, e) if (holds_nul(e)) return 1;
    return 0;
}

/* "." or ".." alone or between slashes (or backslashes). Encoded, "../x"
 * is "..%2Fx", harmless to us; but an upstream (or a proxy before it) that
 * decodes %2F, or takes '\' for '/', before it resolves dot segments would
 * climb out of the tool's path. No id or name needs such a piece. */
static int holds_dot_piece(const char *s) {
    for (;;) {
        size_t n = strcspn(s, "/\\");
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return 1;
        if (!s[n]) return 0;
        s += n + 1;
    }
}

static int check_value(const mcpg_host *h, mcpg_call *call, const http_tool *t, size_t i, json_t *v) {
    const char *name = t->placeholders[i];
    if (!v) return refuse(h, call, "missing argument '%s'", name);
    if (holds_nul(v)) return refuse(h, call, "argument '%s' holds a NUL byte", name);
    if (!in_url(t, i)) return 0; /* the body: any JSON value, escaped by jansson */
    if (!json_is_string(v) && !json_is_number(v) && !json_is_boolean(v))
        return refuse(h, call, "argument '%s' goes in the URL: it must be a string, number or boolean",
                      name);
    if (in_path(t, i) && json_is_string(v) && holds_dot_piece(json_string_value(v)))
        return refuse(h, call,
                      "argument '%s' may not be \".\" or \"..\", nor hold one between slashes: "
                      "it is a URL path segment",
                      name);
    return 0;
}

/* Every placeholder's argument, judged, then as text in vals. */
static int collect(const mcpg_host *h, const http_tool *t, mcpg_call *call, json_t *args,
                   char **vals) {
    for (size_t i = 0; i < t->nplaceholders; i++) {
        json_t *v = json_object_get(args, t->placeholders[i]);
        if (check_value(h, call, t, i, v)) return -1;
        if (!(vals[i] = value_text(v))) {
            h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* the request target                                                  */

/* A filled segment as an upstream reads it: empty, "." or ".." ("%2e" being
 * a dot) would drop a segment or climb one. */
static int empty_or_dot_segment(const char *s, size_t n) {
    size_t dots = 0;
    for (size_t i = 0; i < n; dots++) {
        if (s[i] == '.') i++;
        else if (n - i >= 3 && s[i] == '%' && s[i + 1] == '2' && (s[i + 2] | 0x20) == 'e') i += 3;
        else return 0;
    }
    return dots <= 2;
}

/* Names each argument of the segment's template once: "'x'", "'x', 'y'". */
static void segment_names(sbuf *names, const char *tpl, size_t len, const http_tool *t) {
    for (const char *p = tpl; p < tpl + len; p++) {
        int i = placeholder_at(p, t);
        if (i < 0) continue;
        sbuf quoted = {0};
        put(&quoted, "'", 1);
        puts_(&quoted, t->placeholders[i]);
        put(&quoted, "'", 1);
        if (!quoted.oom && !(names->p && strstr(names->p, quoted.p))) {
            if (names->n) put(names, ", ", 2);
            put(names, quoted.p, quoted.n);
        }
        free(quoted.p);
    }
}

static int refuse_segment(const mcpg_host *h, mcpg_call *call, const http_tool *t, const char *tpl,
                          size_t len, const char *seg, size_t n) {
    sbuf names = {0};
    segment_names(&names, tpl, len, t);
    const char *who = names.p ? names.p : "?";
    const char *s = strchr(who, ',') ? "s" : "";
    if (n == 0) refuse(h, call, "argument%s %s would leave an empty URL path segment", s, who);
    else
        refuse(h, call,
               "argument%s %s would make the URL path segment \"%.*s\", "
               "which an upstream resolves as a dot segment",
               s, who, (int)n, seg);
    free(names.p);
    return -1;
}

/* The path, one segment at a time, so that each segment an argument
 * touched is judged once filled: "/files/{name}.json" with an empty name
 * is ".json", fine; "/a/{x}{y}" with both empty is refused. */
static int fill_path(const mcpg_host *h, mcpg_call *call, const http_tool *t, char *const *vals,
                     sbuf *b) {
    for (const char *seg = t->path; *seg == '/';) {
        size_t len = strcspn(seg + 1, "/");
        put(b, "/", 1);
        size_t from = b->n;
        size_t filled = fill(b, seg + 1, len, t, vals, put_pct);
        if (filled && !b->oom && empty_or_dot_segment(b->p + from, b->n - from))
            return refuse_segment(h, call, t, seg + 1, len, b->p + from, b->n - from);
        seg += 1 + len;
    }
    return 0;
}

static void fill_query(sbuf *b, const http_tool *t, char *const *vals) {
    for (size_t i = 0; i < t->nquery; i++) {
        put(b, i ? "&" : "?", 1);
        put_pct(b, t->query[i].key);
        put(b, "=", 1);
        sbuf v = {0}; /* the whole value encoded: its literal text too */
        fill(&v, t->query[i].value, strlen(t->query[i].value), t, vals, NULL);
        if (v.oom) b->oom = 1;
        else put_pct(b, v.p ? v.p : "");
        free(v.p);
    }
}

/* Upstreams refuse request lines much over 8 KiB (414, or a closed
 * connection): refused here, naming the longest argument in the URL. */
static int check_target_length(const mcpg_host *h, mcpg_call *call, const http_tool *t,
                               char *const *vals, size_t n) {
    if (n <= HTTP_TARGET_MAX) return 0;
    const char *longest = NULL;
    size_t most = 0;
    for (size_t i = 0; i < t->nplaceholders; i++)
        if (in_url(t, i) && strlen(vals[i]) >= most) {
            most = strlen(vals[i]);
            longest = t->placeholders[i];
        }
    if (!longest) return refuse(h, call, "the URL is %zu bytes, over %d", n, HTTP_TARGET_MAX);
    return refuse(h, call, "the URL would be %zu bytes once encoded, over %d (argument '%s' is %zu bytes)",
                  n, HTTP_TARGET_MAX, longest, most);
}

static int build_target(const mcpg_host *h, mcpg_call *call, const http_tool *t, char *const *vals,
                        sbuf *tg) {
    if (fill_path(h, call, t, vals, tg)) return -1;
    fill_query(tg, t, vals);
    if (tg->oom || !tg->p) {
        h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
        return -1;
    }
    return check_target_length(h, call, t, vals, tg->n);
}

/* ------------------------------------------------------------------ */
/* the body                                                            */

static json_t *fill_json(json_t *v, const http_tool *t, json_t *args, char *const *vals) {
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        int i = placeholder_at(s, t);
        if (i >= 0 && strlen(s) == strlen(t->placeholders[i]) + 2)
            return json_deep_copy(json_object_get(args, t->placeholders[i]));
        sbuf b = {0};
        fill(&b, s, strlen(s), t, vals, NULL);
        json_t *r = b.oom ? NULL : json_stringn(b.p ? b.p : "", b.n);
        free(b.p);
        return r;
    }
    json_t *out = json_is_array(v) ? json_array() : json_is_object(v) ? json_object() : NULL;
    if (!out) return json_deep_copy(v);
    size_t i;
    const char *k;
    json_t *e;
    if (json_is_array(v))
        json_array_foreach(v, i, e) if (json_array_append_new(out, fill_json(e, t, args, vals)))
            return json_decref(out), NULL;
    if (json_is_object(v))
        json_object_foreach(v, k, e) if (json_object_set_new(out, k, fill_json(e, t, args, vals)))
            return json_decref(out), NULL;
    return out;
}

static char *body_text(const http_tool *t, json_t *args, char *const *vals) {
    json_t *tpl = json_loads(t->body, JSON_DECODE_ANY, NULL);
    json_t *filled = tpl ? fill_json(tpl, t, args, vals) : NULL;
    char *s = filled ? json_dumps(filled, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(tpl);
    json_decref(filled);
    return s;
}

/* ------------------------------------------------------------------ */
/* headers                                                             */

/* The REST call continues the client's trace (W3C Trace Context). With a
 * telemetry module tracing the call, the traceparent is the gateway's
 * client span's (its own span id, the trace's flags); otherwise a valid
 * traceparent goes on unchanged. A valid tracestate goes on as the client
 * sent it. A tool that configures a traceparent header keeps its own. */
static void trace_lines(sbuf *b, const mcpg_host *h, const http_tool *t, mcpg_call *call,
                        uint32_t *span) {
    for (size_t i = 0; i < t->nheaders; i++)
        if (strcasecmp(t->headers[i].key, "traceparent") == 0) return; /* configured: theirs */
    size_t pn = 0, sn = 0;
    char own[MCPG_TRACEPARENT_CAP];
    const char *tp = own;
    if (MCPG_HOST_HAS(h, call_trace_upstream) && (*span = h->call_trace_upstream(call, t->method, own, sizeof own)))
        pn = strlen(own);
    else
        tp = h->call_header(call, "traceparent", &pn);
    if (!tp || !mcpg_traceparent_valid(tp, pn)) return;
    puts_(b, "traceparent: ");
    put(b, tp, pn);
    put(b, "\r\n", 2);
    const char *ts = h->call_header(call, "tracestate", &sn);
    if (!ts || !mcpg_tracestate_valid(ts, sn)) return;
    puts_(b, "tracestate: ");
    put(b, ts, sn);
    put(b, "\r\n", 2);
}

/* The config's headers, as written: checked at load (no control
 * character), never filled from the arguments. */
static void header_lines(sbuf *b, const http_tool *t, int has_body) {
    puts_(b, "Accept: application/json, */*\r\n");
    for (size_t i = 0; i < t->nheaders; i++) {
        puts_(b, t->headers[i].key);
        put(b, ": ", 2);
        puts_(b, t->headers[i].value);
        put(b, "\r\n", 2);
    }
    if (has_body) puts_(b, "Content-Type: application/json\r\n");
}

/* ------------------------------------------------------------------ */

/* The call's arguments: a JSON object. NULs are let through the parser so
 * that check_value can name the argument that holds one. */
static json_t *load_args(const mcpg_host *h, mcpg_call *call) {
    size_t alen = 0;
    const char *a = h->call_args(call, &alen);
    json_error_t e;
    json_t *args = json_loadb(a ? a : "{}", a ? alen : 2, JSON_ALLOW_NUL, &e);
    if (!args) return refuse(h, call, "arguments are not valid JSON (%s)", e.text), NULL;
    if (!json_is_object(args)) {
        json_decref(args);
        return refuse(h, call, "arguments must be an object"), NULL;
    }
    return args;
}

static int assemble(const mcpg_host *h, const http_tool *t, mcpg_call *call, json_t *args,
                    char *const *vals, sbuf *tg, http_request *out) {
    sbuf hd = {0};
    out->body = t->body ? body_text(t, args, vals) : NULL;
    trace_lines(&hd, h, t, call, &out->trace_span);
    header_lines(&hd, t, out->body != NULL);
    out->target = tg->p;
    tg->p = NULL;
    out->headers = hd.p;
    out->body_len = out->body ? strlen(out->body) : 0;
    if ((t->body && !out->body) || hd.oom || !hd.p) {
        http_request_free(out);
        h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
        return -1;
    }
    return 0;
}

int http_request_build(const mcpg_host *h, const http_tool *t, mcpg_call *call, http_request *out) {
    *out = (http_request){0};
    json_t *args = load_args(h, call);
    if (!args) return -1;
    char **vals = calloc(t->nplaceholders + 1, sizeof *vals);
    sbuf tg = {0};
    int rc = -1;
    if (!vals) h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    else if (collect(h, t, call, args, vals) == 0 && build_target(h, call, t, vals, &tg) == 0)
        rc = assemble(h, t, call, args, vals, &tg, out);
    free(tg.p);
    for (size_t i = 0; vals && i < t->nplaceholders; i++) free(vals[i]);
    free(vals);
    json_decref(args);
    return rc;
}

void http_request_free(http_request *rq) {
    free(rq->target);
    if (rq->headers) explicit_bzero(rq->headers, strlen(rq->headers)); /* configured secrets */
    free(rq->headers);
    free(rq->body);
    *rq = (http_request){0};
}
