/** @file
 * mcpg ABI: the ABI 1.0 size of each kind's ops table.
 *
 * The kernel accepts an ops table whose `size` is at least its kind's value
 * here: the end of the table's last mandatory 1.0 op. Slots after it (the
 * optional ops, and any op added by a later minor) are read only through
 * MCPG_HAS. Like the sizes in module.h, each is written from the 1.0 slots
 * alone and pinned to the live struct, so appending an op never changes it.
 */
#ifndef MCPG_SIZES_H
#define MCPG_SIZES_H

#include "module.h"
#include "kinds.h"
#include "call.h"
#include "host.h"

/** {size, version} and n function pointers */
#define MCPG__OPS_SIZE(n) (2 * sizeof(uint32_t) + (n) * sizeof(void (*)(void)))

#define MCPG_TRANSPORT_OPS_SIZE_1_0 MCPG__OPS_SIZE(3)   /**< conn_adopt, drain, conn_count */
#define MCPG_IDENTITY_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)    /**< authenticate */
#define MCPG_POLICY_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)      /**< check */
#define MCPG_LIMITS_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)      /**< acquire */
#define MCPG_AUDIT_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)       /**< emit */
#define MCPG_COORDINATOR_OPS_SIZE_1_0 MCPG__OPS_SIZE(10) /**< get ... unsubscribe */
#define MCPG_EVENTS_OPS_SIZE_1_0 MCPG__OPS_SIZE(2)      /**< webhook, request */
#define MCPG_BACKEND_OPS_SIZE_1_0 MCPG__OPS_SIZE(2)     /**< list_tools, call_tool */
#define MCPG_METRICS_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)     /**< render */
/** export_spans (the kind came with ABI 1.10: its least size is named
 * _1_0 like the others, for the table every kind has) */
#define MCPG_TELEMETRY_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)

MCPG__PIN_1_0(MCPG_TRANSPORT_OPS_SIZE_1_0, mcpg_transport_ops, conn_count);
MCPG__PIN_1_0(MCPG_IDENTITY_OPS_SIZE_1_0, mcpg_identity_ops, authenticate);
MCPG__PIN_1_0(MCPG_POLICY_OPS_SIZE_1_0, mcpg_policy_ops, check);
MCPG__PIN_1_0(MCPG_LIMITS_OPS_SIZE_1_0, mcpg_limits_ops, acquire);
MCPG__PIN_1_0(MCPG_AUDIT_OPS_SIZE_1_0, mcpg_audit_ops, emit);
MCPG__PIN_1_0(MCPG_COORDINATOR_OPS_SIZE_1_0, mcpg_coordinator_ops, unsubscribe);
MCPG__PIN_1_0(MCPG_EVENTS_OPS_SIZE_1_0, mcpg_events_ops, request);
MCPG__PIN_1_0(MCPG_BACKEND_OPS_SIZE_1_0, mcpg_backend_ops, call_tool);
MCPG__PIN_1_0(MCPG_METRICS_OPS_SIZE_1_0, mcpg_metrics_ops, render);
MCPG__PIN_1_0(MCPG_TELEMETRY_OPS_SIZE_1_0, mcpg_telemetry_ops, export_spans);

/* ---- the structs that cross the boundary beside the ops tables ----
 * A call desc the transport hands in, an outcome it reads back, an audit
 * event a sink gets, a coordinator value, and the host table itself: each
 * side reads the other's only up to the `size` it declares, and a size below
 * these is refused. */

#define MCPG__PTR sizeof(const void *)
#define MCPG__FN sizeof(void (*)(void))
#define MCPG__I64A MCPG__ALIGNOF(int64_t)

/** The ABI 1.0 size of mcpg_call_desc, through its members size, wire; method, name, params_json, args_json, id_json, session_id,
 * transport_ctx; their six lengths; header, complete */
#define MCPG_CALL_DESC_SIZE_1_0 (2 * sizeof(uint32_t) + 7 * MCPG__PTR + 6 * sizeof(size_t) + 2 * MCPG__FN)
MCPG__PIN_1_0(MCPG_CALL_DESC_SIZE_1_0, mcpg_call_desc, complete);

/** The ABI 1.0 size of mcpg_call_outcome, through its members size, is_error; result, result_len; error_code; error_message,
 * error_data, error_data_len; http_status, retry_after_s */
#define MCPG_CALL_OUTCOME_SIZE_1_0 \
    (MCPG__ALIGN_UP(2 * sizeof(uint32_t) + MCPG__PTR + sizeof(size_t), MCPG__I64A) + \
     sizeof(int64_t) + 2 * MCPG__PTR + sizeof(size_t) + 2 * sizeof(uint32_t))
MCPG__PIN_1_0(MCPG_CALL_OUTCOME_SIZE_1_0, mcpg_call_outcome, retry_after_s);

/* The audit event's ABI 1.0 members: size; name; seq, time_us; id_json, id_len, method, tool, backend,
 * principal, tenant, session; wire, generation; error_code; error_message;
 * latency_us, backend_us */
#define MCPG__EV_HEAD (MCPG__ALIGN_UP(sizeof(uint32_t), MCPG__PTR) + MCPG__PTR)
#define MCPG__EV_IDS (MCPG__ALIGN_UP(MCPG__EV_HEAD, MCPG__I64A) + 2 * sizeof(int64_t) + \
                      7 * MCPG__PTR + sizeof(size_t) + 2 * sizeof(uint32_t))
/** The ABI 1.0 size of mcpg_audit_event, through backend_us (the members
 * listed above). */
#define MCPG_AUDIT_EVENT_SIZE_1_0                                                    \
    (MCPG__ALIGN_UP(MCPG__ALIGN_UP(MCPG__EV_IDS, MCPG__I64A) + sizeof(int64_t) +     \
                    MCPG__PTR, MCPG__I64A) + 2 * sizeof(uint64_t))
MCPG__PIN_1_0(MCPG_AUDIT_EVENT_SIZE_1_0, mcpg_audit_event, backend_us);

/** The ABI 1.0 size of mcpg_coord_value, through its members size; data,
 * len; revision, number */
#define MCPG_COORD_VALUE_SIZE_1_0                                                       \
    (MCPG__ALIGN_UP(MCPG__ALIGN_UP(sizeof(uint32_t), MCPG__PTR) + MCPG__PTR + sizeof(size_t), \
                    MCPG__I64A) + 2 * sizeof(int64_t))
MCPG__PIN_1_0(MCPG_COORD_VALUE_SIZE_1_0, mcpg_coord_value, number);

/** The ABI 1.0 size of mcpg_host, through its members size, version,
 * abi_major+abi_minor, reserved0; 58 slots, strerror to gateway_name */
#define MCPG_HOST_SIZE_1_0 (4 * sizeof(uint32_t) + 58 * MCPG__FN)
MCPG__PIN_1_0(MCPG_HOST_SIZE_1_0, mcpg_host, gateway_name);

/** The ABI 1.10 size of mcpg_span, through its members size, kind, the
 * three ids, flags, status; name, status_message, tracestate; start_ns,
 * end_ns; attrs, n_attrs. A module reads a span's later members through
 * MCPG_HAS_FIELD. */
#define MCPG_SPAN_SIZE_1_10                                                              \
    (MCPG__ALIGN_UP(MCPG__ALIGN_UP(4 * sizeof(uint32_t) + 32, MCPG__PTR) + 3 * MCPG__PTR, \
                    MCPG__I64A) + 2 * sizeof(int64_t) + MCPG__PTR + sizeof(size_t))
MCPG__PIN_1_0(MCPG_SPAN_SIZE_1_10, mcpg_span, n_attrs);

#endif
