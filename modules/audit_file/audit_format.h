/* audit_file: one audit event as one JSON line (internal to the module). */
#ifndef AUDIT_FORMAT_H
#define AUDIT_FORMAT_H

#include <mcpg/abi.h>
#include <stddef.h>

/* The lengths of an event's strings, measured once for both steps below. */
typedef struct audit_lens {
    size_t name, method, tool, backend, principal, tenant, session, error_message;
} audit_lens;

/* Bytes audit_format_line may write for `ev` (an upper bound); fills *lens. */
size_t audit_line_bound(const mcpg_audit_event *ev, audit_lens *lens);

/* Format `ev` into dst (audit_line_bound(ev) bytes) as one JSON object ending
 * in '\n'; returns the bytes written. Not NUL-terminated. */
size_t audit_format_line(char *dst, const mcpg_audit_event *ev, const audit_lens *lens);

/* "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" (27 bytes) for microseconds since the epoch;
 * returns 27. */
size_t audit_format_ts(char *dst, int64_t time_us);

#endif
