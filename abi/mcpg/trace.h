/** @file
 * mcpg ABI 1.10: request spans for a telemetry module (MCPG_KIND_TELEMETRY).
 *
 * For each MCP request it samples, the kernel records one server span (the
 * request, in the client's W3C trace when its traceparent says so), a child
 * span per pipeline stage that ran (identity, policy, limits, the audit
 * events, the backend) and a client span per upstream request a backend
 * reported (host->call_trace_upstream). As the request is answered, on its
 * loop thread, it hands them all to the telemetry instance's export op in
 * one batch; everything is borrowed for that op alone.
 *
 * Sampling is parent-based: a request whose traceparent is sampled is
 * traced, one whose traceparent is not sampled is not, and a request
 * without one starts a trace with the probability the instance's policy op
 * gives (mcpg_trace_policy.sample_ratio). A request that is not sampled
 * costs the kernel one branch past that decision.
 */
#ifndef MCPG_TRACE_H
#define MCPG_TRACE_H

#include <stddef.h>
#include <stdint.h>

/** What a span stands for: OTLP's SpanKind values. Append only. */
typedef enum mcpg_span_kind {
    MCPG_SPAN_INTERNAL = 1, /**< a pipeline stage inside the gateway */
    MCPG_SPAN_SERVER = 2,   /**< the client's request, as the gateway served it */
    MCPG_SPAN_CLIENT = 3    /**< a backend's request to its upstream */
} mcpg_span_kind;

/** A span's status: OTLP's StatusCode values. */
typedef enum mcpg_span_status {
    MCPG_SPAN_UNSET = 0, /**< no error was seen */
    MCPG_SPAN_OK = 1,    /**< not set by the kernel (reserved for a module's own spans) */
    MCPG_SPAN_ERROR = 2  /**< the request, or the upstream request, failed */
} mcpg_span_status;

/** Attribute value types. Append only. */
typedef enum mcpg_attr_type {
    MCPG_ATTR_STRING = 1, /**< str[0..len) (UTF-8, not NUL-terminated) */
    MCPG_ATTR_INT = 2     /**< num */
} mcpg_attr_type;

/** One attribute of a span, named as the OpenTelemetry semantic
 * conventions name it (mcp.method.name, gen_ai.tool.name, ...). */
typedef struct mcpg_span_attr {
    const char *key;  /**< NUL-terminated */
    uint32_t type;    /**< mcpg_attr_type */
    uint32_t reserved0; /**< 0 */
    const char *str;  /**< MCPG_ATTR_STRING: the value */
    size_t len;       /**< MCPG_ATTR_STRING: its length */
    int64_t num;      /**< MCPG_ATTR_INT: the value */
} mcpg_span_attr;

/** One finished span. Times are Unix epoch nanoseconds. */
typedef struct mcpg_span {
    uint32_t size;          /**< sizeof(mcpg_span) in the kernel: read later members through MCPG_HAS_FIELD */
    uint32_t kind;          /**< mcpg_span_kind */
    uint8_t trace_id[16];   /**< the trace, as the traceparent carries it */
    uint8_t span_id[8];     /**< this span */
    uint8_t parent_id[8];   /**< its parent; all zero for a trace's root */
    uint32_t flags;         /**< W3C trace flags (bit 0: sampled) */
    uint32_t status;        /**< mcpg_span_status */
    const char *name;       /**< "tools/call echo", "identity", "POST upstream"; NUL-terminated */
    const char *status_message; /**< with MCPG_SPAN_ERROR: why, or NULL */
    const char *tracestate; /**< the client's W3C tracestate, or NULL */
    int64_t start_ns,       /**< when it started */
            end_ns;         /**< when it ended */
    const mcpg_span_attr *attrs; /**< n_attrs attributes */
    size_t n_attrs;         /**< how many */
} mcpg_span;

/** What the kernel samples and records for a telemetry instance (its
 * optional policy op fills it; without that op: ratio 1, no flags). */
typedef struct mcpg_trace_policy {
    uint32_t size;          /**< sizeof(mcpg_trace_policy) in the kernel */
    uint32_t flags;         /**< MCPG_TRACE_* */
    double sample_ratio;    /**< 0..1: the share of requests without a traceparent that are traced */
} mcpg_trace_policy;

/** mcpg_trace_policy.flags: the server span carries who called
 * (enduser.id, the principal, and mcpg.tenant.id). Without it, no span
 * names the caller. */
#define MCPG_TRACE_ENDUSER (1u << 0)

#endif
