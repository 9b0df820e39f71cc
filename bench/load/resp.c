/* Incremental HTTP/1.1 response framing for a closed-loop client.
 *
 * The caller keeps appending bytes to one buffer and calls load_resp_feed
 * with all of it; the search for the end of the head resumes where it
 * stopped, so a response trickling in byte by byte is scanned once. Only
 * what framing needs is parsed: the status, Content-Length, Connection,
 * Content-Type (is it SSE), Mcp-Session-Id and Transfer-Encoding. On the
 * stateless wire chunked answers are refused rather than decoded: our gateway
 * and nginx answer with Content-Length, and a streamed answer there is itself
 * a finding worth an error. On the legacy wire an SSE answer is streamed, so
 * chunks are walked as they arrive and joined once the last one is in. */
#define _GNU_SOURCE /* memmem */
#include <string.h>
#include <strings.h>

#include "load.h"

/* A chunk-size line longer than this is malformed (hex digits and extensions). */
#define CHUNK_LINE_MAX 1024u

void load_resp_reset(load_resp *r, size_t body_max, bool allow_chunked) {
    memset(r, 0, sizeof *r);
    r->body_max = body_max;
    r->allow_chunked = allow_chunked;
}

const char *load_resp_strerror(int rc) {
    switch (rc) {
    case LOAD_RESP_EBAD: return "malformed response head";
    case LOAD_RESP_ECHUNKED: return "Transfer-Encoding (chunked) response";
    case LOAD_RESP_ENOLEN: return "response without Content-Length";
    case LOAD_RESP_ETOOBIG: return "response over the size bound";
    default: return "no error";
    }
}

static bool name_is(const char *name, size_t n, const char *want) {
    return n == strlen(want) && strncasecmp(name, want, n) == 0;
}

/* "HTTP/1.x NNN[ reason]" */
static int parse_status_line(load_resp *r, const char *s, size_t n) {
    if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ')
        return LOAD_RESP_EBAD;
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (s[i] < '0' || s[i] > '9') return LOAD_RESP_EBAD;
        status = status * 10 + (s[i] - '0');
    }
    if (n > 12 && s[12] != ' ') return LOAD_RESP_EBAD;
    r->status = status;
    if (s[7] == '0') r->flags |= LOAD_RESP_CLOSE; /* HTTP/1.0 without keep-alive handling */
    return 0;
}

static int parse_content_length(load_resp *r, const char *v, size_t n, bool *seen) {
    if (n == 0 || n > 15) return n > 15 ? LOAD_RESP_ETOOBIG : LOAD_RESP_EBAD;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return LOAD_RESP_EBAD;
        len = len * 10 + (size_t)(v[i] - '0');
    }
    if (*seen && len != r->body_len) return LOAD_RESP_EBAD; /* conflicting lengths */
    if (len > r->body_max) return LOAD_RESP_ETOOBIG;
    r->body_len = len;
    *seen = true;
    return 0;
}

/* Does a comma-separated Connection value hold the token "close"? */
static bool has_close_token(const char *v, size_t n) {
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        size_t start = i;
        while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t') i++;
        if (name_is(v + start, i - start, "close")) return true;
    }
    return false;
}

/* The media type, before any parameters, is text/event-stream. */
static bool is_event_stream(const char *v, size_t n) {
    const char *semi = memchr(v, ';', n);
    size_t len = semi ? (size_t)(semi - v) : n;
    while (len && (v[len - 1] == ' ' || v[len - 1] == '\t')) len--;
    return name_is(v, len, "text/event-stream");
}

static int parse_header(load_resp *r, const char *base, const char *s, size_t n, bool *have_len) {
    const char *colon = memchr(s, ':', n);
    if (!colon || colon == s || s[0] == ' ' || s[0] == '\t') return LOAD_RESP_EBAD; /* no obs-fold */
    size_t name_len = (size_t)(colon - s);
    const char *v = colon + 1, *end = s + n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
    size_t vlen = (size_t)(end - v);
    if (name_is(s, name_len, "content-length")) return parse_content_length(r, v, vlen, have_len);
    if (name_is(s, name_len, "transfer-encoding")) {
        /* chunked must be the last coding, and we decode no other */
        if (!r->allow_chunked || !name_is(v, vlen, "chunked")) return LOAD_RESP_ECHUNKED;
        r->flags |= LOAD_RESP_CHUNKED;
    }
    if (name_is(s, name_len, "connection") && has_close_token(v, vlen)) r->flags |= LOAD_RESP_CLOSE;
    if (name_is(s, name_len, "content-type") && is_event_stream(v, vlen)) r->flags |= LOAD_RESP_SSE;
    if (name_is(s, name_len, "mcp-session-id")) {
        if (vlen == 0 || vlen > LOAD_SESSION_MAX) return LOAD_RESP_EBAD;
        r->session_off = (size_t)(v - base);
        r->session_len = vlen;
    }
    return 0;
}

/* head is the status line and headers including the final empty line. */
static int parse_head(load_resp *r, const char *head, size_t head_len) {
    const char *p = head, *end = head + head_len - 2; /* stop before the last CRLF */
    bool first = true, have_len = false;
    while (p < end) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol) return LOAD_RESP_EBAD;
        int rc = first ? parse_status_line(r, p, (size_t)(eol - p))
                       : parse_header(r, head, p, (size_t)(eol - p), &have_len);
        if (rc < 0) return rc;
        first = false;
        p = eol + 2;
    }
    if (first) return LOAD_RESP_EBAD;
    bool bodyless = (r->status >= 100 && r->status < 200) || r->status == 204 || r->status == 304;
    if (bodyless) {
        r->body_len = 0;
        r->flags &= ~LOAD_RESP_CHUNKED;
    } else if (r->flags & LOAD_RESP_CHUNKED) {
        if (have_len) return LOAD_RESP_EBAD; /* both framings: a smuggling shape */
        r->body_len = 0;
    } else if (!have_len) {
        return LOAD_RESP_ENOLEN;
    }
    return 0;
}

/* The chunk-size line at p (hex digits, optional ";ext"), up to its CRLF. */
static int parse_chunk_size(const char *p, size_t n, size_t *size) {
    size_t v = 0, i = 0;
    for (; i < n; i++) {
        char ch = p[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0'
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) break;
        if (i >= 15) return LOAD_RESP_ETOOBIG;
        v = v * 16 + (size_t)d;
    }
    if (i == 0 || (i < n && p[i] != ';' && p[i] != ' ' && p[i] != '\t')) return LOAD_RESP_EBAD;
    *size = v;
    return 0;
}

/* Walk the chunks that have arrived; DONE once the last chunk and the
 * trailer section are in (wire_len then covers the whole message). */
static int feed_chunks(load_resp *r, const char *buf, size_t len) {
    for (;;) {
        size_t at = r->chunk_at;
        const char *eol = len > at ? memmem(buf + at, len - at, "\r\n", 2) : NULL;
        if (!eol) return len - at > CHUNK_LINE_MAX ? LOAD_RESP_EBAD : LOAD_RESP_MORE;
        size_t line_len = (size_t)(eol - (buf + at));
        if (line_len > CHUNK_LINE_MAX) return LOAD_RESP_EBAD;
        size_t size;
        int rc = parse_chunk_size(buf + at, line_len, &size);
        if (rc < 0) return rc;
        size_t data = at + line_len + 2;
        if (size == 0) { /* trailers (ignored) end with an empty line */
            if (len - data >= 2 && memcmp(buf + data, "\r\n", 2) == 0) {
                r->wire_len = data + 2;
                return LOAD_RESP_DONE;
            }
            const char *end = len > data ? memmem(buf + data, len - data, "\r\n\r\n", 4) : NULL;
            if (!end) return len - data > LOAD_RESP_HEAD_MAX ? LOAD_RESP_ETOOBIG : LOAD_RESP_MORE;
            r->wire_len = (size_t)(end - buf) + 4;
            return LOAD_RESP_DONE;
        }
        if (size > r->body_max - r->body_len) return LOAD_RESP_ETOOBIG;
        if (len < data + size + 2) return LOAD_RESP_MORE;
        if (memcmp(buf + data + size, "\r\n", 2) != 0) return LOAD_RESP_EBAD;
        r->body_len += size;
        r->chunk_at = data + size + 2;
    }
}

void load_resp_dechunk(load_resp *r, char *buf) {
    if (!(r->flags & LOAD_RESP_CHUNKED)) return;
    size_t at = r->head_len, w = r->head_len;
    for (;;) { /* already validated by feed_chunks */
        const char *eol = memmem(buf + at, r->wire_len - at, "\r\n", 2);
        size_t size;
        parse_chunk_size(buf + at, (size_t)(eol - (buf + at)), &size);
        if (size == 0) break;
        size_t data = (size_t)(eol - buf) + 2;
        memmove(buf + w, buf + data, size);
        w += size;
        at = data + size + 2;
    }
    r->body_len = w - r->head_len;
}

int load_resp_feed(load_resp *r, const char *buf, size_t len) {
    if (r->head_len == 0) {
        size_t from = r->scan > 3 ? r->scan - 3 : 0; /* "\r\n\r\n" may straddle reads */
        const char *eoh = len > from ? memmem(buf + from, len - from, "\r\n\r\n", 4) : NULL;
        if (!eoh) {
            r->scan = len;
            return len > LOAD_RESP_HEAD_MAX ? LOAD_RESP_ETOOBIG : LOAD_RESP_MORE;
        }
        size_t head_len = (size_t)(eoh - buf) + 4;
        if (head_len > LOAD_RESP_HEAD_MAX) return LOAD_RESP_ETOOBIG;
        int rc = parse_head(r, buf, head_len);
        if (rc < 0) return rc;
        r->head_len = head_len;
        r->chunk_at = head_len;
    }
    if (r->flags & LOAD_RESP_CHUNKED) return feed_chunks(r, buf, len);
    if (len < r->head_len + r->body_len) return LOAD_RESP_MORE;
    r->wire_len = r->head_len + r->body_len;
    return LOAD_RESP_DONE;
}

int load_chunks_take(const char *in, size_t len, size_t *used, char *out, size_t out_cap, size_t *out_len) {
    size_t at = 0;
    int rc = 0;
    for (;;) {
        const char *eol = len > at ? memmem(in + at, len - at, "\r\n", 2) : NULL;
        if (!eol) {
            if (len - at > CHUNK_LINE_MAX) rc = LOAD_RESP_EBAD;
            break;
        }
        size_t line_len = (size_t)(eol - (in + at)), size;
        if (line_len > CHUNK_LINE_MAX || parse_chunk_size(in + at, line_len, &size) < 0) {
            rc = LOAD_RESP_EBAD;
            break;
        }
        size_t data = at + line_len + 2;
        if (size == 0) { /* the last chunk: the stream ended (trailers are not waited for) */
            at = data;
            rc = 1;
            break;
        }
        if (len < data + size + 2) break;
        if (memcmp(in + data + size, "\r\n", 2) != 0) {
            rc = LOAD_RESP_EBAD;
            break;
        }
        if (size > out_cap - *out_len) {
            rc = LOAD_RESP_ETOOBIG;
            break;
        }
        memcpy(out + *out_len, in + data, size);
        *out_len += size;
        at = data + size + 2;
    }
    *used = at;
    return rc;
}
