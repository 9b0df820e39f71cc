/* The tools/call request (either wire), the legacy handshake, and the check
 * of an answer.
 *
 * The request is kept as three fixed pieces around the two things that
 * change per call (Content-Length and the id), so formatting one is two
 * number conversions and a few memcpys: the load generator must stay cheaper
 * than the gateway it measures, on a machine with two cores. */
#define _GNU_SOURCE /* vasprintf */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"

#define LOAD_VERSION "0.1"
#define PROTOCOL_VERSION "2026-07-28"
#define LEGACY_VERSION "2025-11-25"
#define MESSAGE_MAX (1u << 20)
#define TOOL_MAX 128u
#define JSON_DEPTH_MAX 64
#define SESSION_HEADER "Mcp-Session-Id: "
#define CONTENT_LENGTH "Content-Length: "

size_t load_u64_to_dec(uint64_t v, char *dst) {
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) dst[i] = tmp[n - 1 - i];
    return n;
}

size_t load_json_escape(char *dst, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            dst[o++] = '\\';
            dst[o++] = (char)ch;
        } else if (ch < 0x20) {
            memcpy(dst + o, "\\u00", 4);
            dst[o + 4] = hex[ch >> 4];
            dst[o + 5] = hex[ch & 15];
            o += 6;
        } else {
            dst[o++] = (char)ch; /* UTF-8 passes through: the gateway must judge it */
        }
    }
    return o;
}

/* Tool names go into a header and a JSON string unescaped, so only allow
 * characters MCP tool names use; anything else would need the =?base64?= form. */
static bool tool_name_ok(const char *t) {
    size_t n = strlen(t);
    if (n == 0 || n > TOOL_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = t[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  ch == '_' || ch == '-' || ch == '.' || ch == '/';
        if (!ok) return false;
    }
    return true;
}

static char *xasprintf_len(size_t *len, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *xasprintf_len(size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    *len = (size_t)n;
    return s;
}

/* The stateless wire: routing headers and the _meta envelope in every call. */
static void stateless_pieces(load_request_tmpl *t, const char *host_port, const char *path, const char *tool,
                             const char *esc) {
    t->head_prefix = xasprintf_len(
        &t->head_prefix_len,
        "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: " PROTOCOL_VERSION "\r\n"
        "Mcp-Method: tools/call\r\nMcp-Name: %s\r\n",
        path, host_port, tool);
    t->body_suffix = xasprintf_len(
        &t->body_suffix_len,
        ",\"method\":\"tools/call\",\"params\":{\"name\":\"%s\",\"arguments\":{\"message\":\"%s\"},"
        "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" PROTOCOL_VERSION "\","
        "\"io.modelcontextprotocol/clientCapabilities\":{},"
        "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"mcpg-load\",\"version\":\"" LOAD_VERSION "\"}}}}",
        tool, esc);
}

/* The legacy wire: the session header goes between these pieces per slot. */
static void legacy_pieces(load_request_tmpl *t, const char *host_port, const char *path, const char *tool,
                          const char *esc) {
    t->head_prefix = xasprintf_len(&t->head_prefix_len,
                                   "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                                   "Accept: application/json, text/event-stream\r\n"
                                   "MCP-Protocol-Version: " LEGACY_VERSION "\r\n",
                                   path, host_port);
    t->body_suffix = xasprintf_len(
        &t->body_suffix_len,
        ",\"method\":\"tools/call\",\"params\":{\"name\":\"%s\",\"arguments\":{\"message\":\"%s\"}}}", tool,
        esc);
}

int load_request_tmpl_init(load_request_tmpl *t, load_wire wire, const char *host_port, const char *path,
                           const char *tool, const char *message, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    size_t mlen = strlen(message);
    if (!tool_name_ok(tool)) {
        snprintf(err, errlen, "tool name '%s' is not 1-%u of [A-Za-z0-9_.-/]", tool, TOOL_MAX);
        return -1;
    }
    if (mlen > MESSAGE_MAX) {
        snprintf(err, errlen, "message longer than %u bytes", MESSAGE_MAX);
        return -1;
    }
    char *esc = malloc(6 * mlen + 1);
    if (!esc) return snprintf(err, errlen, "out of memory"), -1;
    esc[load_json_escape(esc, message, mlen)] = '\0';
    if (wire == LOAD_WIRE_LEGACY)
        legacy_pieces(t, host_port, path, tool, esc);
    else
        stateless_pieces(t, host_port, path, tool, esc);
    t->body_prefix = xasprintf_len(&t->body_prefix_len, "{\"jsonrpc\":\"2.0\",\"id\":");
    free(esc);
    if (!t->head_prefix || !t->body_prefix || !t->body_suffix) {
        load_request_tmpl_free(t);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    /* the session header, "Content-Length: ", two 20-digit numbers and "\r\n\r\n" */
    t->max_len = t->head_prefix_len + sizeof SESSION_HEADER + LOAD_SESSION_MAX + 2 + sizeof CONTENT_LENGTH +
                 t->body_prefix_len + t->body_suffix_len + 20 + 20 + 4;
    return 0;
}

int load_request_tmpl_add_headers(load_request_tmpl *t, const char *lines, size_t n) {
    if (!n) return 0;
    char *grown = realloc(t->head_prefix, t->head_prefix_len + n + 1);
    if (!grown) return -1;
    memcpy(grown + t->head_prefix_len, lines, n);
    grown[t->head_prefix_len + n] = '\0';
    t->head_prefix = grown;
    t->head_prefix_len += n;
    t->max_len += n;
    return 0;
}

void load_request_tmpl_free(load_request_tmpl *t) {
    free(t->head_prefix);
    free(t->body_prefix);
    free(t->body_suffix);
    memset(t, 0, sizeof *t);
}

/* "Mcp-Session-Id: <session>\r\n" at p; returns the bytes written (0 without a session). */
static size_t put_session(char *p, const char *session, size_t session_len) {
    if (!session) return 0;
    if (session_len > LOAD_SESSION_MAX) session_len = LOAD_SESSION_MAX; /* resp.c refuses longer */
    memcpy(p, SESSION_HEADER, sizeof SESSION_HEADER - 1);
    memcpy(p + sizeof SESSION_HEADER - 1, session, session_len);
    memcpy(p + sizeof SESSION_HEADER - 1 + session_len, "\r\n", 2);
    return sizeof SESSION_HEADER - 1 + session_len + 2;
}

size_t load_request_format(const load_request_tmpl *t, uint64_t id, const char *session, size_t session_len,
                           char *dst) {
    char idtxt[20];
    size_t idlen = load_u64_to_dec(id, idtxt);
    size_t body_len = t->body_prefix_len + idlen + t->body_suffix_len;
    char *p = dst;
    memcpy(p, t->head_prefix, t->head_prefix_len), p += t->head_prefix_len;
    p += put_session(p, session, session_len);
    memcpy(p, CONTENT_LENGTH, sizeof CONTENT_LENGTH - 1), p += sizeof CONTENT_LENGTH - 1;
    p += load_u64_to_dec(body_len, p);
    memcpy(p, "\r\n\r\n", 4), p += 4;
    memcpy(p, t->body_prefix, t->body_prefix_len), p += t->body_prefix_len;
    memcpy(p, idtxt, idlen), p += idlen;
    memcpy(p, t->body_suffix, t->body_suffix_len), p += t->body_suffix_len;
    return (size_t)(p - dst);
}

/* The whole request around a body: one handshake message, rare enough that
 * snprintf is fine. Returns the length (always below LOAD_HANDSHAKE_MAX: the
 * pieces are bounded by host_port, path and LOAD_SESSION_MAX). */
static size_t handshake(char *dst, const char *host_port, const char *path, const char *extra_headers,
                        const char *session, size_t session_len, const char *body) {
    char sess[sizeof SESSION_HEADER + LOAD_SESSION_MAX + 2];
    sess[put_session(sess, session, session_len)] = '\0';
    int n = snprintf(dst, LOAD_HANDSHAKE_MAX,
                     "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\n%s%sContent-Length: %zu\r\n\r\n%s",
                     path, host_port, extra_headers, sess, strlen(body), body);
    return n < 0 ? 0 : (size_t)n < LOAD_HANDSHAKE_MAX ? (size_t)n : LOAD_HANDSHAKE_MAX - 1;
}

size_t load_initialize_format(const char *host_port, const char *path, uint64_t id, char *dst) {
    char body[256];
    char idtxt[21];
    idtxt[load_u64_to_dec(id, idtxt)] = '\0';
    snprintf(body, sizeof body,
             "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"" LEGACY_VERSION
             "\",\"capabilities\":{},\"clientInfo\":{\"name\":\"mcpg-load\",\"version\":\"" LOAD_VERSION "\"}}}",
             idtxt);
    return handshake(dst, host_port, path, "", NULL, 0, body);
}

size_t load_initialized_format(const char *host_port, const char *path, const char *session, size_t session_len,
                               char *dst) {
    return handshake(dst, host_port, path, "MCP-Protocol-Version: " LEGACY_VERSION "\r\n", session, session_len,
                     "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

/* ---- answer scanning ----
 * Structure only: strings, nesting and the members we care about. Full JSON
 * validation is the gateway's job and conformance's, not the load loop's. */
typedef struct {
    const char *s;
    size_t n, i;
} cursor;

static bool is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

static void skip_ws(cursor *c) {
    while (c->i < c->n && is_ws(c->s[c->i])) c->i++;
}

static int peek(const cursor *c) { return c->i < c->n ? (unsigned char)c->s[c->i] : -1; }

static int skip_string(cursor *c) {
    for (c->i++; c->i < c->n; c->i++) {
        if (c->s[c->i] == '\\') {
            c->i++; /* whatever is escaped cannot end the string */
        } else if (c->s[c->i] == '"') {
            c->i++;
            return 0;
        }
    }
    return -1;
}

static int skip_scalar(cursor *c) {
    size_t start = c->i;
    while (c->i < c->n && !strchr(",}] \t\r\n", c->s[c->i])) c->i++;
    return c->i > start ? 0 : -1;
}

static int skip_value(cursor *c) {
    int ch = peek(c);
    if (ch == '"') return skip_string(c);
    if (ch != '{' && ch != '[') return skip_scalar(c);
    int depth = 0;
    do {
        ch = peek(c);
        if (ch < 0) return -1;
        if (ch == '"') {
            if (skip_string(c) < 0) return -1;
            continue;
        }
        if (ch == '{' || ch == '[') {
            if (++depth > JSON_DEPTH_MAX) return -1;
        } else if (ch == '}' || ch == ']') {
            depth--;
        }
        c->i++;
    } while (depth > 0);
    return 0;
}

static bool key_is(const char *k, size_t n, const char *want) {
    return n == strlen(want) && memcmp(k, want, n) == 0;
}

/* Called with the cursor at a member's value; must consume the value. */
typedef int (*member_fn)(void *ctx, const char *key, size_t klen, cursor *c);

static int scan_object(cursor *c, member_fn fn, void *ctx) {
    skip_ws(c);
    if (peek(c) != '{') return -1;
    c->i++;
    skip_ws(c);
    if (peek(c) == '}') {
        c->i++;
        return 0;
    }
    for (;;) {
        skip_ws(c);
        if (peek(c) != '"') return -1;
        size_t kstart = c->i + 1;
        if (skip_string(c) < 0) return -1;
        size_t klen = c->i - 1 - kstart;
        skip_ws(c);
        if (peek(c) != ':') return -1;
        c->i++;
        skip_ws(c);
        if (fn(ctx, c->s + kstart, klen, c) < 0) return -1;
        skip_ws(c);
        int ch = peek(c);
        c->i++;
        if (ch == '}') return 0;
        if (ch != ',') return -1;
    }
}

/* An id we sent is a non-negative integer; anything else is reported as
 * "not an int" so the caller counts a mismatch. */
static int scan_id(load_rpc_reply *r, cursor *c) {
    size_t start = c->i;
    int64_t v = 0;
    bool neg = peek(c) == '-';
    if (neg) c->i++;
    size_t digits = 0;
    while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9' && digits < 19) {
        v = v * 10 + (c->s[c->i++] - '0');
        digits++;
    }
    int next = peek(c);
    bool is_int = digits > 0 && !(next >= '0' && next <= '9') && next != '.' && next != 'e' && next != 'E';
    r->has_id = true;
    r->id_is_int = is_int;
    r->id = neg ? -v : v;
    c->i = start;
    return skip_value(c);
}

static int result_member(void *ctx, const char *k, size_t klen, cursor *c) {
    load_rpc_reply *r = ctx;
    if (key_is(k, klen, "isError") && c->n - c->i >= 4 && memcmp(c->s + c->i, "true", 4) == 0)
        r->tool_error = true;
    return skip_value(c);
}

static int top_member(void *ctx, const char *k, size_t klen, cursor *c) {
    load_rpc_reply *r = ctx;
    if (key_is(k, klen, "id")) return scan_id(r, c);
    if (key_is(k, klen, "error")) r->has_error = true;
    if (key_is(k, klen, "result")) {
        r->has_result = true;
        if (peek(c) == '{') return scan_object(c, result_member, r);
    }
    return skip_value(c);
}

int load_rpc_scan(const char *s, size_t n, load_rpc_reply *out) {
    memset(out, 0, sizeof *out);
    cursor c = {s, n, 0};
    if (scan_object(&c, top_member, out) < 0) return -1;
    skip_ws(&c);
    return c.i == n ? 0 : -1;
}

/* load_json_members: the values of some members of an object, in one pass (bench/events). */
typedef struct {
    const char *const *keys;
    size_t nkeys;
    load_json_value *out;
    int found;
} member_find;

static int find_member(void *ctx, const char *k, size_t klen, cursor *c) {
    member_find *f = ctx;
    size_t start = c->i;
    if (skip_value(c) < 0) return -1;
    for (size_t j = 0; j < f->nkeys; j++)
        if (!f->out[j].v && key_is(k, klen, f->keys[j])) {
            f->out[j].v = c->s + start;
            f->out[j].len = c->i - start;
            f->found++;
            break;
        }
    return 0;
}

int load_json_members(const char *s, size_t n, const char *const *keys, size_t nkeys, load_json_value *out) {
    for (size_t j = 0; j < nkeys; j++) out[j].v = NULL, out[j].len = 0;
    member_find f = {keys, nkeys, out, 0};
    cursor c = {s, n, 0};
    if (scan_object(&c, find_member, &f) < 0) return -1;
    return f.found;
}

int load_json_member(const char *s, size_t n, const char *key, const char **v, size_t *vlen) {
    load_json_value out;
    int rc = load_json_members(s, n, &key, 1, &out);
    if (rc <= 0) return rc;
    *v = out.v;
    *vlen = out.len;
    return 1;
}
