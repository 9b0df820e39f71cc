/* lib/audit: one audit event as one JSON line, the same for every sink
 * (audit_file, audit_stdout). docs/audit.md documents every field. */
#ifndef AUDIT_FORMAT_H
#define AUDIT_FORMAT_H

#include <mcpg/abi.h>
#include <stddef.h>

/* One string field of an event as the formatter uses it: its text (NULL when
 * absent) and length, measured once for both steps below. */
typedef struct audit_text {
    const char *s;
    size_t n;
} audit_text;

/* An event's text fields, resolved once: the ABI 1.2 ones are NULL when the
 * kernel's event is older (MCPG_HAS_FIELD). */
typedef struct audit_lens {
    audit_text name, method, tool, backend, principal, tenant, session, error_message;
    /* ABI 1.2 */
    audit_text roles, auth_method, peer, denied_stage, denied_by, args, result, traceparent,
        gateway_id;
    audit_text server; /* ABI 1.12 */
} audit_lens;

/* Bytes audit_format_line may write for `ev` (an upper bound); fills *lens. */
size_t audit_line_bound(const mcpg_audit_event *ev, audit_lens *lens);

/* Format `ev` into dst (audit_line_bound(ev) bytes) as one JSON object ending
 * in '\n', with no other newline; returns the bytes written. It always starts
 * with `{"ts":` (the chain's prefix replaces the '{': audit_chain.h).
 * Not NUL-terminated. */
size_t audit_format_line(char *dst, const mcpg_audit_event *ev, const audit_lens *lens);

/* "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" (27 bytes) for microseconds since the epoch;
 * returns 27. */
size_t audit_format_ts(char *dst, int64_t time_us);

#endif
