/* backend_mcp: an incremental reader of a text/event-stream body: feed it
 * the bytes as they come; each complete event's data is handed on. */
#ifndef BACKEND_MCP_SSE_H
#define BACKEND_MCP_SSE_H

#include <mcpg/sdk.h>

#include <stdbool.h>

typedef struct sse_reader {
    mcpg_buf line;   /* the line being read */
    mcpg_buf data;   /* the event's data lines so far, joined by \n */
    bool has_data;
    size_t max;      /* a line or an event longer than this is an error */
} sse_reader;

typedef void (*sse_event_fn)(void *arg, const char *data, size_t n);

/* 0, or -1 when an event is over max (the stream should be dropped). */
int sse_feed(sse_reader *r, const char *p, size_t n, sse_event_fn fn, void *arg);
void sse_reset(sse_reader *r);
void sse_free(sse_reader *r);

#endif
