/* transport_http: the legacy wire's pure parsers, exposed for the fuzzers
 * (tests/fuzz/fuzz_wire.c): one JSON-RPC message's members, and a
 * Last-Event-ID. No I/O, no allocation; spans point into the input. */
#ifndef TH_LEGACY_PARSE_H
#define TH_LEGACY_PARSE_H

#include <mcpg/sdk.h>
#include <stdint.h>

/* The members of one JSON-RPC message the legacy wire acts on. A member
 * named twice sets dup (the message is refused: readers disagree on which
 * one counts). */
typedef struct th_lmsg {
    mcpg_json_span id, method, params, result, error;
    unsigned has; /* bits: 1 id, 2 method, 4 params, 8 result, 16 error, 32 jsonrpc ok */
    int dup;
} th_lmsg;

/* 1 when body is an object (members in m), 0 valid JSON but not an object
 * (a batch, a scalar), -1 not JSON. */
int th_lmsg_parse(const mcpg_host *h, const char *body, size_t n, th_lmsg *m);

/* What a request hands the kernel: its params. The kernel reads the target
 * and the arguments from them itself, with the one strict reading every
 * wire shares (each method's own member, duplicates and NULs refused), so
 * this wire reads neither. Its own function so that bench/micro can count
 * it. */
void th_lmsg_target(const mcpg_host *h, const th_lmsg *m, char *name_buf, size_t name_cap,
                    mcpg_call_desc *d);

/* An event id "<replica>_<worker>_<stream>_<seq>" (stream.h th_event_id),
 * four decimal fields that fit in 32 bits: 1 with the fields set, 0 when
 * malformed. */
typedef struct th_event_ref {
    uint32_t replica, worker, no, seq;
} th_event_ref;
int th_event_id_parse(const char *id, size_t n, th_event_ref *out);

#endif
