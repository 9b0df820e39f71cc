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

/* A stream read as it comes: where the first complete event ends (just past
 * the blank line that ends it), 0 when none is complete yet. A CR at the very
 * end may be the first half of a CRLF: wait for the next byte. */
static size_t event_end(const char *s, size_t n, size_t *start) {
    size_t i = 0;
    bool saw_line = false;
    *start = 0;
    while (i < n) {
        size_t b = i;
        while (i < n && s[i] != '\n' && s[i] != '\r') i++;
        if (i == n || (s[i] == '\r' && i + 1 == n)) return 0; /* the line is not terminated yet */
        bool empty = i == b;
        i += (s[i] == '\r' && s[i + 1] == '\n') ? 2 : 1;
        if (!empty) saw_line = true;
        else if (saw_line) return i;
        else *start = i; /* blank lines before the event */
    }
    return 0;
}

int load_sse_next(char *buf, size_t len, size_t *used, char **data, size_t *data_len) {
    size_t start, end = event_end(buf, len, &start);
    if (!end) return 0;
    sse_cursor c = {buf + start, end - start, 0};
    sse_event ev;
    read_event(&c, &ev);
    *used = end;
    *data = ev.data;
    *data_len = ev.any ? ev.len : 0;
    return 1;
}
