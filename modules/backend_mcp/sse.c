/* backend_mcp: text/event-stream, read as it arrives. Only data fields
 * matter here (ids, event names and retry hints are not used: a stream the
 * upstream drops fails the request it carried). */
#include "sse.h"

#include <string.h>

static void end_line(sse_reader *r, sse_event_fn fn, void *arg) {
    const char *l = r->line.data;
    size_t n = r->line.len;
    if (n && l[n - 1] == '\r') n--;
    if (n == 0) { /* a blank line ends the event */
        if (r->has_data) fn(arg, r->data.data ? r->data.data : "", r->data.len);
        r->data.len = 0;
        r->has_data = false;
        return;
    }
    if (n >= 5 && memcmp(l, "data", 4) == 0 && (l[4] == ':' || n == 4)) {
        size_t skip = 5 + (n > 5 && l[5] == ' ');
        if (r->has_data) mcpg_buf_append(&r->data, "\n", 1);
        mcpg_buf_append(&r->data, l + skip, n - skip);
        r->has_data = true;
    }
}

int sse_feed(sse_reader *r, const char *p, size_t n, sse_event_fn fn, void *arg) {
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        /* a line, or an event's data lines together, past max: the stream is refused
         * before its bytes are kept (an endless line never grows the buffer past it) */
        if (r->line.len + take > r->max || r->data.len + r->line.len + take > r->max) return -1;
        mcpg_buf_append(&r->line, p, take);
        p += take;
        n -= take;
        if (!nl) break;
        p++;
        n--;
        end_line(r, fn, arg);
        r->line.len = 0;
    }
    return 0;
}

void sse_reset(sse_reader *r) {
    r->line.len = r->data.len = 0;
    r->has_data = false;
}

void sse_free(sse_reader *r) {
    mcpg_buf_free(&r->line);
    mcpg_buf_free(&r->data);
}
