/* transport_http: the access log (gateway.server.access_log).
 *
 * One JSON line per request, in the kernel's log line shape (ts, level,
 * src, msg) plus method, path, status, bytes (response body) and
 * duration_us (first byte of the request to its response queued). Lines are
 * formatted by hand into a per-worker buffer and written to stderr once per
 * loop turn (or when 64 KiB are waiting), in chunks of at most PIPE_BUF
 * ending at a line boundary, so they interleave with the kernel's own lines
 * only between lines. Going through host->log instead would format and write
 * once per request; at ~100k requests/s per core that alone costs more than
 * the rest of the transport.
 *
 * gateway.server.access_log "auto" (the default) leaves out a request whose
 * every call the audit trail holds: the audit event says more than the line
 * would (who, which tool, the outcome), and writing both doubled the log
 * work per call. Health checks, metrics scrapes, refusals at the HTTP layer
 * and a call no sink recorded (none configured, one that failed) keep their
 * line. The choice is made before anything is formatted.
 *
 * The path is logged without its query string (queries can carry secrets)
 * and cut to 256 bytes. If stderr refuses bytes (a full non-blocking pipe),
 * the rest of the batch is dropped and counted, never retried in a loop. */
#define _GNU_SOURCE /* memrchr */
#include "http/http.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TH_ALOG_PATH_MAX 256

static size_t escape_path(char *d, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    char *start = d;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            *d++ = '\\';
            *d++ = (char)ch;
        } else if (ch < 0x20 || ch >= 0x7f) {
            memcpy(d, "\\u00", 4);
            d[4] = hex[ch >> 4];
            d[5] = hex[ch & 15];
            d += 6;
        } else {
            *d++ = (char)ch;
        }
    }
    return (size_t)(d - start);
}

static void refresh_iso(th_worker_state *ws, int64_t sec) {
    time_t t = (time_t)sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    /* digits only: no locale involved */
    strftime(ws->iso, sizeof ws->iso, "%Y-%m-%dT%H:%M:%S", &tm);
    ws->iso_sec = sec;
}

static char *put(char *d, const char *s, size_t n) {
    memcpy(d, s, n);
    return d + n;
}
#define PUT_LIT(d, s) put((d), (s), sizeof(s) - 1)

int th_alog_mode_parse(const char *json) {
    if (!json || !strcmp(json, "\"auto\"")) return TH_ALOG_AUTO;
    if (!strcmp(json, "true")) return TH_ALOG_ALL;
    if (!strcmp(json, "false")) return TH_ALOG_NONE;
    return -1;
}

void th_alog_note_call(th_worker_state *ws, th_req *r, mcpg_call *call) {
    const mcpg_host *host = ws->mod->host;
    if (ws->mod->alog_mode != TH_ALOG_AUTO || r->audit_held == TH_AUDIT_MISSED) return;
    bool held = MCPG_HOST_HAS(host, call_audited) && host->call_audited &&
                host->call_audited(call) == 1;
    r->audit_held = held ? TH_AUDIT_HELD : TH_AUDIT_MISSED;
}

void th_alog_request(th_worker_state *ws, const th_req *r) {
    int mode = ws->mod->alog_mode;
    if (mode == TH_ALOG_ALL || (mode == TH_ALOG_AUTO && r->audit_held != TH_AUDIT_HELD))
        th_alog_line(ws, r);
}

void th_alog_line(th_worker_state *ws, const th_req *r) {
    th_mod *m = ws->mod;
    const mcpg_host *host = m->host;
    uint64_t dur = r->start_us ? host->mono_us() - r->start_us : 0;
    int64_t wall = host->wall_us();
    if (wall / 1000000 != ws->iso_sec || !ws->iso[0]) refresh_iso(ws, wall / 1000000);
    const char *url = r->data.data ? r->data.data + r->url_off : "";
    size_t plen = r->url_len;
    const char *q = plen ? memchr(url, '?', plen) : NULL;
    if (q) plen = (size_t)(q - url);
    if (plen > TH_ALOG_PATH_MAX) plen = TH_ALOG_PATH_MAX;
    const char *method = r->headers_done ? llhttp_method_name((llhttp_method_t)r->http_method) : "-";
    size_t mlen = strlen(method);
    if (host->buf_reserve(&ws->alog, 256 + m->alog_src.len + mlen + 6 * plen)) {
        ws->alog_dropped++;
        return;
    }
    char *d = ws->alog.data + ws->alog.len;
    char us[8];
    uint64_t frac = (uint64_t)(wall % 1000000) + 1000000; /* leading zeros for free */
    th_fmt_u64(us, frac);
    d = PUT_LIT(d, "{\"ts\":\"");
    d = put(d, ws->iso, strlen(ws->iso));
    *d++ = '.';
    d = put(d, us + 1, 6);
    d = PUT_LIT(d, "Z\",\"level\":\"info\",");
    d = put(d, m->alog_src.data, m->alog_src.len);
    d = PUT_LIT(d, ",\"msg\":\"access\",\"worker\":");
    d += th_fmt_u64(d, ws->index);
    d = PUT_LIT(d, ",\"method\":\"");
    d = put(d, method, mlen);
    d = PUT_LIT(d, "\",\"path\":\"");
    d += escape_path(d, url, plen);
    d = PUT_LIT(d, "\",\"status\":");
    d += th_fmt_u64(d, (uint64_t)r->status);
    d = PUT_LIT(d, ",\"bytes\":");
    d += th_fmt_u64(d, r->resp_bytes);
    d = PUT_LIT(d, ",\"duration_us\":");
    d += th_fmt_u64(d, dur);
    d = PUT_LIT(d, "}\n");
    ws->alog.len = (size_t)(d - ws->alog.data);
    if (ws->alog.len >= TH_ALOG_FLUSH) th_alog_flush(ws);
}

static uint64_t count_lines(const char *p, size_t n) {
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++) k += p[i] == '\n';
    return k;
}

void th_alog_flush(th_worker_state *ws) {
    const char *p = ws->alog.data;
    size_t n = ws->alog.len;
    while (n) {
        size_t chunk = n;
        if (chunk > PIPE_BUF) { /* end the chunk at a line boundary */
            const char *nl = memrchr(p, '\n', PIPE_BUF);
            chunk = nl ? (size_t)(nl - p) + 1 : PIPE_BUF;
        }
        ssize_t w = write(STDERR_FILENO, p, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            ws->alog_dropped += count_lines(p, n);
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    ws->alog.len = 0;
    if (ws->alog_dropped) {
        ws->mod->host->log(ws->mod->self, MCPG_LOG_WARN, "access log: %llu lines dropped",
                           (unsigned long long)ws->alog_dropped);
        ws->alog_dropped = 0;
    }
}
