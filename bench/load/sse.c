/* The JSON-RPC response inside an SSE answer (the legacy wire's POST).
 *
 * An SSE answer may carry a priming event (an id, maybe retry:, no data),
 * notifications about the call (progress, log messages) and then the
 * response. Only the response is judged; anything else with data must at
 * least be a JSON object, so a garbled stream is an error, not a pass.
 *
 * Lines end with CRLF, LF or CR (the SSE grammar); an event ends at an empty
 * line, or at the end of the body. "data:" lines of one event are joined with
 * LF, in place: the joined text is never longer than the lines it came from,
 * so it is written over them. */
#include <string.h>

#include "load.h"

typedef struct {
    char *s;
    size_t n, i;
} sse_cursor;

/* The next line [*start, *start + *len) without its terminator; false at the end. */
static bool next_line(sse_cursor *c, char **start, size_t *len) {
    if (c->i >= c->n) return false;
    size_t b = c->i;
    while (c->i < c->n && c->s[c->i] != '\n' && c->s[c->i] != '\r') c->i++;
    *start = c->s + b;
    *len = c->i - b;
    if (c->i < c->n && c->s[c->i] == '\r') c->i++;
    if (c->i < c->n && c->s[c->i] == '\n') c->i++; /* LF, or the LF of CRLF */
    return true;
}

/* One event's joined data, written over the event's own bytes. */
typedef struct {
    char *data;
    size_t len;
    bool any; /* at least one data line */
} sse_event;

static bool read_event(sse_cursor *c, sse_event *ev) {
    char *line;
    size_t len;
    bool saw_line = false;
    ev->data = c->s + c->i;
    ev->len = 0;
    ev->any = false;
    while (next_line(c, &line, &len)) {
        if (len == 0) {
            if (saw_line) return true;
            ev->data = c->s + c->i; /* blank lines between events */
            continue;
        }
        saw_line = true;
        if (len < 5 || memcmp(line, "data", 4) != 0 || (len > 4 && line[4] != ':')) continue;
        size_t skip = (len > 5 && line[5] == ' ') ? 6 : 5; /* one optional space after the colon */
        if (ev->any) ev->data[ev->len++] = '\n';
        memmove(ev->data + ev->len, line + skip, len - skip);
        ev->len += len - skip;
        ev->any = true;
    }
    return saw_line;
}

int load_sse_response(char *body, size_t len, const char **json, size_t *json_len) {
    sse_cursor c = {body, len, 0};
    sse_event ev;
    int found = 0;
    while (read_event(&c, &ev)) {
        if (!ev.any || ev.len == 0) continue; /* priming event, keep-alive comment, retry: */
        load_rpc_reply r;
        if (load_rpc_scan(ev.data, ev.len, &r) < 0) return -1;
        if (!r.has_result && !r.has_error) continue; /* a notification about the call */
        if (found++) return -1;
        *json = ev.data;
        *json_len = ev.len;
    }
    return found;
}
