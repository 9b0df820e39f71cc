/* backend_http: fill a tool's templates from the call's arguments, each
 * escaped for its place: path segments and query values percent-encoded,
 * body values as JSON (a string that is exactly "{arg}" becomes the
 * argument's JSON value, of any type; placeholders inside longer strings
 * insert the value's text). */
#define _GNU_SOURCE
#include "http_request.h"

#include <jansson.h>
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

/* RFC 3986 unreserved characters stay; every other byte is %XX. */
static void put_pct(sbuf *b, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            strchr("-._~", ch)) {
            put(b, s, 1);
        } else {
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            put(b, e, 3);
        }
    }
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

/* One template: literal text as is, values through `esc` (NULL: raw). */
static void fill(sbuf *b, const char *tpl, const http_tool *t, char *const *vals,
                 void (*esc)(sbuf *, const char *)) {
    for (const char *p = tpl; *p;) {
        int i = placeholder_at(p, t);
        if (i >= 0) {
            if (esc) esc(b, vals[i]);
            else puts_(b, vals[i]);
            p += strlen(t->placeholders[i]) + 2;
        } else {
            put(b, p++, 1);
        }
    }
}

static json_t *fill_json(json_t *v, const http_tool *t, json_t *args, char *const *vals) {
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        int i = placeholder_at(s, t);
        if (i >= 0 && strlen(s) == strlen(t->placeholders[i]) + 2)
            return json_deep_copy(json_object_get(args, t->placeholders[i]));
        sbuf b = {0};
        fill(&b, s, t, vals, NULL);
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

static void target(sbuf *b, const http_tool *t, char *const *vals) {
    fill(b, t->path, t, vals, put_pct);
    for (size_t i = 0; i < t->nquery; i++) {
        put(b, i ? "&" : "?", 1);
        put_pct(b, t->query[i].key);
        put(b, "=", 1);
        sbuf v = {0}; /* the whole value encoded: its literal text too */
        fill(&v, t->query[i].value, t, vals, NULL);
        if (v.oom) b->oom = 1;
        else put_pct(b, v.p ? v.p : "");
        free(v.p);
    }
}

/* The REST call continues the client's trace (W3C Trace Context): a valid
 * traceparent, and its tracestate, go on unchanged; the gateway records no
 * span of its own. A tool that configures a traceparent header keeps its own. */
static void trace_lines(sbuf *b, const mcpg_host *h, const http_tool *t, mcpg_call *call) {
    for (size_t i = 0; i < t->nheaders; i++)
        if (strcasecmp(t->headers[i].key, "traceparent") == 0) return; /* configured: theirs */
    size_t pn = 0, sn = 0;
    const char *tp = h->call_header(call, "traceparent", &pn);
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

/* Every placeholder's argument: present, and a string, number or boolean
 * (the body may take any JSON value for an "{arg}" of its own). */
static int collect(const mcpg_host *h, const http_tool *t, mcpg_call *call, json_t *args,
                   char **vals) {
    for (size_t i = 0; i < t->nplaceholders; i++) {
        json_t *v = json_object_get(args, t->placeholders[i]);
        if (!v) {
            mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS,
                               "Invalid params: missing argument '%s'", t->placeholders[i]);
            return -1;
        }
        if (!(vals[i] = value_text(v)) || strlen(vals[i]) != (json_is_string(v) ? json_string_length(v) : strlen(vals[i]))) {
            mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS,
                               "Invalid params: argument '%s' holds a NUL byte", t->placeholders[i]);
            return -1;
        }
    }
    return 0;
}

int http_request_build(const mcpg_host *h, const http_tool *t, mcpg_call *call, http_request *out) {
    size_t alen = 0;
    const char *a = h->call_args(call, &alen);
    json_t *args = json_loadb(a ? a : "{}", a ? alen : 2, 0, NULL);
    char **vals = calloc(t->nplaceholders + 1, sizeof *vals);
    int rc = -1;
    *out = (http_request){0};
    if (!json_is_object(args) || !vals) {
        h->call_error(call, MCPG_RPC_INVALID_PARAMS, "Invalid params: arguments must be an object", NULL);
    } else if (collect(h, t, call, args, vals) == 0) {
        sbuf tg = {0}, hd = {0};
        out->body = t->body ? body_text(t, args, vals) : NULL;
        target(&tg, t, vals);
        trace_lines(&hd, h, t, call);
        header_lines(&hd, t, out->body != NULL);
        out->target = tg.p;
        out->headers = hd.p;
        out->body_len = out->body ? strlen(out->body) : 0;
        if ((t->body && !out->body) || tg.oom || hd.oom || !tg.p || !hd.p) {
            http_request_free(out);
            h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
        } else {
            rc = 0;
        }
    }
    for (size_t i = 0; vals && i < t->nplaceholders; i++) free(vals[i]);
    free(vals);
    json_decref(args);
    return rc;
}

void http_request_free(http_request *rq) {
    free(rq->target);
    free(rq->headers);
    free(rq->body);
    *rq = (http_request){0};
}
