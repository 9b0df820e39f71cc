/* transport_http: response assembly. Everything is written with memcpy into
 * the caller's buffer after one reserve, because snprintf per header showed
 * up in the calibration profile and the hot path must not allocate. */
#include "http/response.h"

#include <mcpg/sdk.h>
#include <string.h>

const char *th_status_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

size_t th_fmt_u64(char *buf, uint64_t v) {
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
    return n;
}

size_t th_fmt_i64(char *buf, int64_t v) {
    if (v >= 0) return th_fmt_u64(buf, (uint64_t)v);
    buf[0] = '-';
    /* negate in unsigned space so INT64_MIN does not overflow */
    return 1 + th_fmt_u64(buf + 1, (uint64_t)0 - (uint64_t)v);
}

static char *put(char *d, const char *s, size_t n) {
    memcpy(d, s, n);
    return d + n;
}
#define PUT_LIT(d, s) put((d), (s), sizeof(s) - 1)

/* Longest header block we ever write, excluding the variable parts. */
#define TH_HEAD_FIXED 256

int th_resp_append(const mcpg_host *h, mcpg_buf *out, const th_resp_head *hd,
                   const th_piece *body, size_t nbody, size_t *body_len_out) {
    size_t blen = 0;
    for (size_t i = 0; i < nbody; i++) blen += body[i].n;
    const char *reason = th_status_reason(hd->status);
    size_t rlen = strlen(reason);
    size_t dlen = hd->date ? strlen(hd->date) : 0;
    size_t alen = hd->allow ? strlen(hd->allow) : 0;
    size_t slen = hd->session ? strlen(hd->session) : 0;
    size_t wlen = hd->www_authenticate ? strlen(hd->www_authenticate) + 24 : 0;
    size_t tlen = hd->content_type ? strlen(hd->content_type) + 16 : 0;
    if (h->buf_reserve(out, TH_HEAD_FIXED + rlen + dlen + alen + slen + wlen + tlen + blen))
        return MCPG_ENOMEM;

    char *d = out->data + out->len;
    d = PUT_LIT(d, "HTTP/1.1 ");
    d += th_fmt_u64(d, (uint64_t)hd->status);
    *d++ = ' ';
    d = put(d, reason, rlen);
    d = PUT_LIT(d, "\r\n");
    if (hd->date) {
        d = PUT_LIT(d, "Date: ");
        d = put(d, hd->date, dlen);
        d = PUT_LIT(d, "\r\n");
    }
    if (hd->json) d = PUT_LIT(d, "Content-Type: application/json\r\n");
    else if (hd->content_type) {
        d = PUT_LIT(d, "Content-Type: ");
        d = put(d, hd->content_type, tlen - 16);
        d = PUT_LIT(d, "\r\n");
    }
    d = PUT_LIT(d, "Content-Length: ");
    d += th_fmt_u64(d, blen);
    d = PUT_LIT(d, "\r\n");
    if (hd->close)
        d = PUT_LIT(d, "Connection: close\r\n");
    else if (hd->keep_alive_10)
        d = PUT_LIT(d, "Connection: keep-alive\r\n");
    if (hd->retry_after_s) {
        d = PUT_LIT(d, "Retry-After: ");
        d += th_fmt_u64(d, hd->retry_after_s);
        d = PUT_LIT(d, "\r\n");
    }
    if (hd->session) {
        d = PUT_LIT(d, "Mcp-Session-Id: ");
        d = put(d, hd->session, slen);
        d = PUT_LIT(d, "\r\n");
    }
    if (hd->allow) {
        d = PUT_LIT(d, "Allow: ");
        d = put(d, hd->allow, alen);
        d = PUT_LIT(d, "\r\n");
    }
    if (hd->www_authenticate) {
        d = PUT_LIT(d, "WWW-Authenticate: ");
        d = put(d, hd->www_authenticate, strlen(hd->www_authenticate));
        d = PUT_LIT(d, "\r\n");
    }
    d = PUT_LIT(d, "\r\n");
    for (size_t i = 0; i < nbody && !hd->head_only; i++)
        if (body[i].n) d = put(d, body[i].p, body[i].n);
    out->len = (size_t)(d - out->data);
    out->data[out->len] = '\0';
    if (body_len_out) *body_len_out = blen;
    return 0;
}

size_t th_rpc_error_body(th_piece *out, th_piece id, char *codebuf, int64_t code,
                         th_piece message, const th_piece *data, size_t ndata) {
    size_t k = 0;
    out[k++] = TH_LIT("{\"jsonrpc\":\"2.0\",\"id\":");
    out[k++] = id;
    out[k++] = TH_LIT(",\"error\":{\"code\":");
    out[k++] = (th_piece){codebuf, th_fmt_i64(codebuf, code)};
    out[k++] = TH_LIT(",\"message\":");
    out[k++] = message;
    if (ndata) {
        out[k++] = TH_LIT(",\"data\":");
        for (size_t i = 0; i < ndata && k < TH_MAX_PIECES - 1; i++) out[k++] = data[i];
    }
    out[k++] = TH_LIT("}}");
    return k;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Codes the 2026-07-28 wire does not send. The gateway's own refusals of
 * the legacy range (-32001 unauthenticated, -32003 forbidden) and the limits
 * stage's -32029 (inside the sub-range that revision keeps for codes it
 * defines) go out as -32600, the HTTP status, message and data saying why.
 * The two codes it retired are replaced as it says, also in an upstream's
 * error: -32002 (resource not found) by -32602, -32042 (URL elicitation
 * required) by -32600. Any other upstream code passes unchanged: a proxied
 * error stays the upstream's. */
#define TH_RPC_LIMITED (-32029)
#define TH_RPC_RETIRED_NOT_FOUND (-32002)
#define TH_RPC_RETIRED_URL_ELICITATION (-32042)

int64_t th_stateless_code(int64_t code) {
    switch (code) {
    case MCPG_RPC_UNAUTHENTICATED:
    case MCPG_RPC_FORBIDDEN:
    case TH_RPC_LIMITED:
    case TH_RPC_RETIRED_URL_ELICITATION: return MCPG_RPC_INVALID_REQUEST;
    case TH_RPC_RETIRED_NOT_FOUND: return MCPG_RPC_INVALID_PARAMS;
    default: return code;
    }
}

/* Which of the stamped members the result already has; *meta gets its
 * _meta value (type 0: none). */
static unsigned present_members(const mcpg_host *h, const char *obj, size_t n, int *ok,
                                mcpg_json_span *meta) {
    unsigned have = 0;
    size_t iter = 0;
    mcpg_json_span k, v;
    int rc;
    memset(meta, 0, sizeof *meta);
    while ((rc = h->json_object_next(obj, n, &iter, &k, &v)) == 1) {
        if (h->json_string_eq(&k, "resultType", 10)) have |= 1u;
        else if (h->json_string_eq(&k, "ttlMs", 5)) have |= 2u;
        else if (h->json_string_eq(&k, "cacheScope", 10)) have |= 4u;
        else if (h->json_string_eq(&k, "_meta", 5)) *meta = v;
    }
    *ok = rc == 0;
    return have;
}

#define TH_INFO_KEY "\"io.modelcontextprotocol/serverInfo\":"

/* The raw extent of a value span (a string's quotes included). */
static th_piece raw_span(const mcpg_json_span *v) {
    if (v->type == MCPG_JSON_STRING) return (th_piece){v->p - 1, v->n + 2};
    return (th_piece){v->p, v->n};
}

/* The result's first `body` bytes (all but its final '}') with the
 * gateway's serverInfo put in its _meta: the value a _meta already has
 * there is replaced in place, else the member is added first in _meta; a
 * _meta that is no object is replaced whole (a result without _meta gets
 * one from the caller). Returns the pieces written (at most 5). */
static size_t with_server_info(const mcpg_host *h, th_piece *out, const char *s, size_t body,
                               const mcpg_json_span *meta, th_piece info) {
    size_t k = 0;
    const char *end = s + body;
    if (meta->type == MCPG_JSON_OBJECT) {
        mcpg_json_span old;
        if (h->json_object_get(meta->p, meta->n, "io.modelcontextprotocol/serverInfo", &old) == 1) {
            th_piece o = raw_span(&old);
            out[k++] = (th_piece){s, (size_t)(o.p - s)};
            out[k++] = info;
            out[k++] = (th_piece){o.p + o.n, (size_t)(end - (o.p + o.n))};
            return k;
        }
        const char *open = meta->p + 1; /* after its '{' */
        size_t iter = 0;
        mcpg_json_span mk, mv;
        int members = h->json_object_next(meta->p, meta->n, &iter, &mk, &mv) == 1;
        out[k++] = (th_piece){s, (size_t)(open - s)};
        out[k++] = TH_LIT(TH_INFO_KEY);
        out[k++] = info;
        if (members) out[k++] = TH_LIT(",");
        out[k++] = (th_piece){open, (size_t)(end - open)};
        return k;
    }
    th_piece o = raw_span(meta);
    out[k++] = (th_piece){s, (size_t)(o.p - s)};
    out[k++] = TH_LIT("{" TH_INFO_KEY);
    out[k++] = info;
    out[k++] = TH_LIT("}");
    out[k++] = (th_piece){o.p + o.n, (size_t)(end - (o.p + o.n))};
    return k;
}

size_t th_rpc_result_body(const mcpg_host *h, th_piece *out, th_piece id, th_piece result,
                          unsigned stamp, th_piece server_info) {
    size_t k = 0;
    out[k++] = TH_LIT("{\"jsonrpc\":\"2.0\",\"id\":");
    out[k++] = id;
    out[k++] = TH_LIT(",\"result\":");

    const char *s = result.p;
    size_t n = result.n;
    while (n && is_ws(*s)) s++, n--;
    while (n && is_ws(s[n - 1])) n--;
    int ok = 0;
    mcpg_json_span meta = {0};
    unsigned have = (n >= 2 && s[0] == '{' && s[n - 1] == '}') ? present_members(h, s, n, &ok, &meta) : 0;
    if (!ok || !stamp) { /* not an object we can extend: pass it through */
        out[k++] = n ? (th_piece){s, n} : TH_LIT("{}");
        out[k++] = TH_LIT("}");
        return k;
    }
    size_t body = n - 1; /* up to, not including, the final '}' */
    size_t j = body;
    while (j > 1 && is_ws(s[j - 1])) j--;
    int empty = s[j - 1] == '{';
    int info = server_info.n != 0;
    if (info && meta.type) {
        k += with_server_info(h, out + k, s, body, &meta, server_info);
        info = 0;
    } else {
        out[k++] = (th_piece){s, body};
    }

    th_piece members[3] = {TH_LIT("\"resultType\":\"complete\""), TH_LIT("\"ttlMs\":0"),
                           TH_LIT("\"cacheScope\":\"private\"")};
    if (stamp & TH_STAMP_INPUT_REQUIRED) members[0] = TH_LIT("\"resultType\":\"input_required\"");
    else if (stamp & TH_STAMP_TASK) members[0] = TH_LIT("\"resultType\":\"task\"");
    unsigned want = 0;
    if (stamp & TH_STAMP_RESULT_TYPE) want |= 1u;
    if (stamp & TH_STAMP_CACHE) want |= 6u;
    want &= ~have;
    for (unsigned i = 0; i < 3; i++) {
        if (!(want & (1u << i))) continue;
        if (!empty) out[k++] = TH_LIT(",");
        out[k++] = members[i];
        empty = 0;
    }
    if (info) { /* no _meta yet: the gateway's own */
        if (!empty) out[k++] = TH_LIT(",");
        out[k++] = TH_LIT("\"_meta\":{" TH_INFO_KEY);
        out[k++] = server_info;
        out[k++] = TH_LIT("}");
    }
    out[k++] = TH_LIT("}}");
    return k;
}
