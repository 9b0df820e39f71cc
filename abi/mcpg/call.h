/** @file
 * mcpg ABI: calls, buffers and the other types that cross the module boundary.
 *
 * Ownership: every pointer parameter is borrowed for the duration of the call
 * it is passed to, unless its name ends in _take or _new (the callee owns it)
 * or the comment says otherwise.
 */
#ifndef MCPG_CALL_H
#define MCPG_CALL_H

#include <stddef.h>
#include <stdint.h>

/** Opaque kernel objects. Modules hold pointers, never look inside. */
typedef struct mcpg_call mcpg_call;     /**< one MCP request in the pipeline (a request: completes once) */
typedef struct mcpg_worker mcpg_worker; /**< one event loop thread */
typedef struct mcpg_timer mcpg_timer;   /**< a kernel-owned timer */

/** What a stage answers. Append only. */
typedef enum mcpg_status {
    MCPG_CONTINUE = 0, /**< done: next stage (for a backend: the result is set) */
    MCPG_DENY = 1,     /**< refused/failed: the error is set with call_error() */
    MCPG_PENDING = 2   /**< will answer later with host->call_resume(call, status) */
} mcpg_status;

/** Which MCP wire a call came in on. Append only. */
typedef enum mcpg_wire {
    MCPG_WIRE_STATELESS = 1, /**< 2026-07-28 */
    MCPG_WIRE_LEGACY = 2     /**< 2025-11-25 and earlier, with sessions */
} mcpg_wire;

/** Methods the kernel routes. Append only; MCPG_METHOD_OTHER for the rest. */
typedef enum mcpg_method {
    MCPG_METHOD_OTHER = 0, /**< a method not listed here */
    MCPG_METHOD_TOOLS_LIST = 1, /**< tools/list */
    MCPG_METHOD_TOOLS_CALL = 2, /**< tools/call */
    MCPG_METHOD_RESOURCES_LIST = 3, /**< resources/list */
    MCPG_METHOD_RESOURCES_TEMPLATES_LIST = 4, /**< resources/templates/list */
    MCPG_METHOD_RESOURCES_READ = 5, /**< resources/read */
    MCPG_METHOD_RESOURCES_SUBSCRIBE = 6, /**< resources/subscribe */
    MCPG_METHOD_RESOURCES_UNSUBSCRIBE = 7, /**< resources/unsubscribe */
    MCPG_METHOD_PROMPTS_LIST = 8, /**< prompts/list */
    MCPG_METHOD_PROMPTS_GET = 9, /**< prompts/get */
    MCPG_METHOD_COMPLETION_COMPLETE = 10, /**< completion/complete */
    /** ABI 1.1: tasks (2025-11-25 experimental; the 2026-07-28 extension
     * io.modelcontextprotocol/tasks). A task's id is "<backend instance>.<rest>":
     * the kernel routes by the head, the backend sees the rest as call_target. */
    MCPG_METHOD_TASKS_GET = 11, /**< tasks/get */
    MCPG_METHOD_TASKS_RESULT = 12, /**< tasks/result */
    MCPG_METHOD_TASKS_LIST = 13, /**< tasks/list */
    MCPG_METHOD_TASKS_CANCEL = 14, /**< tasks/cancel */
    MCPG_METHOD_TASKS_UPDATE = 15, /**< tasks/update */
    /** ABI 1.5: the MCP Events extension (io.modelcontextprotocol/events),
     * routed to the manifest's events instance (mcpg_events_ops.request);
     * params.name (the event type) is the call's name. */
    MCPG_METHOD_EVENTS_LIST = 16, /**< events/list */
    MCPG_METHOD_EVENTS_POLL = 17, /**< events/poll */
    MCPG_METHOD_EVENTS_STREAM = 18, /**< events/stream */
    MCPG_METHOD_EVENTS_SUBSCRIBE = 19, /**< events/subscribe */
    MCPG_METHOD_EVENTS_UNSUBSCRIBE = 20, /**< events/unsubscribe */
    /** A post to POST /webhooks/events/{source} (host->webhook_submit): no
     * client can name it; straight to mcpg_events_ops.webhook, without
     * identity, policy or audit (its signature is its identity). */
    MCPG_METHOD_EVENTS_WEBHOOK = 21
} mcpg_method;

/** JSON-RPC / MCP error codes the kernel and modules use. */
#define MCPG_RPC_PARSE_ERROR       (-32700) /**< the message is not JSON */
#define MCPG_RPC_INVALID_REQUEST   (-32600) /**< not a valid JSON-RPC request */
#define MCPG_RPC_METHOD_NOT_FOUND  (-32601) /**< no such method (or tool, prompt, resource) */
#define MCPG_RPC_INVALID_PARAMS    (-32602) /**< the params are wrong for the method */
#define MCPG_RPC_INTERNAL_ERROR    (-32603) /**< the gateway or a module failed */
#define MCPG_RPC_SERVER_ERROR      (-32000) /**< implementation-defined: overload, timeout */
#define MCPG_RPC_HEADER_MISMATCH   (-32020) /**< a request header disagrees with the body (HTTP 400) */
#define MCPG_RPC_MISSING_CLIENT_CAPABILITY (-32021) /**< the request needs a client capability the client did not declare */
#define MCPG_RPC_UNSUPPORTED_VERSION (-32022) /**< a protocol version the gateway does not speak (HTTP 400) */
/** ABI 1.2: refusals by the identity and policy stages (HTTP 401 and 403). */
#define MCPG_RPC_UNAUTHENTICATED   (-32001)
/** ABI 1.6: the legacy wire's answer to a session id it does not know, or
 * one that belongs to another caller (HTTP 404). */
#define MCPG_RPC_SESSION_NOT_FOUND (-32001)
#define MCPG_RPC_FORBIDDEN         (-32003) /**< the policy stage refused the call (HTTP 403) */
/** ABI 1.5: the MCP Events extension's codes (data says which thing). */
#define MCPG_RPC_NOT_FOUND          (-32011) /**< an unknown event type or subscription */
#define MCPG_RPC_EVENTS_FORBIDDEN   (-32012) /**< the caller may not make this events request (a webhook subscription without identity) */
#define MCPG_RPC_RESOURCE_EXHAUSTED (-32013) /**< data.limit names the limit */
#define MCPG_RPC_UNSUPPORTED        (-32014) /**< a feature or value the events service does not support (data names it) */
#define MCPG_RPC_CALLBACK_ERROR     (-32015) /**< a webhook subscriber's endpoint failed */

/** ABI 1.2: what a connection's TLS session established, for the identity
 * stage (the transport fills it; borrowed like the rest of the call desc).
 * Every string is NUL-terminated or NULL. */
typedef struct mcpg_tls_info {
    uint32_t size;            /**< sizeof(mcpg_tls_info) as the transport knows it */
    uint32_t client_verified; /**< 1: the client presented a certificate that verified
                                 against the transport's CA; the cert_* fields are set */
    const char *version;      /**< "TLSv1.3" */
    const char *cipher;       /**< "TLS_AES_256_GCM_SHA384" */
    const char *alpn;         /**< "http/1.1", or NULL when none was negotiated */
    const char *server_name;  /**< the SNI the client sent, or NULL */
    const char *cert_subject; /**< RFC 2253 one line: "CN=alice,O=Acme" */
    const char *cert_issuer;  /**< the same for the issuer */
    const char *cert_sans_json; /**< the subjectAltNames as a JSON array of "TYPE:value"
                                 strings: "DNS:a.example", "URI:spiffe://t/x",
                                 "email:a@b.example", "IP:10.0.0.1"; "[]" when none */
    const char *cert_sha256;  /**< the certificate's DER SHA-256, 64 lower-case hex */
} mcpg_tls_info;

/** ABI 1.2: who a call is, as an identity module sets it
 * (host->call_identify). Borrowed for that call; the kernel copies it. */
typedef struct mcpg_identity {
    uint32_t size;            /**< sizeof(mcpg_identity) as the module knows it */
    uint32_t n_roles;         /**< how many roles there are */
    const char *principal;    /**< required */
    const char *tenant;       /**< or NULL */
    const char *const *roles; /**< n_roles NUL-terminated strings */
    const char *claims_json;  /**< a JSON object the policy stage may read (a token's
                                 claims), or NULL */
    size_t claims_len;        /**< claims_json's length */
    const char *method;       /**< how it was established, for audit: "apikey", "jwt",
                                 "mtls"; or NULL */
    /** @name ABI 1.11 (read by the kernel only when `size` covers them) */
    /** @{ */
    /** The bearer token this identity was established from, set only by a
     * module that verified it (its signature, issuer, lifetime), or NULL.
     * The kernel keeps it with the identity for the call's backend
     * (host->call_bearer) and never logs, audits or answers it. */
    const char *bearer;
    size_t bearer_len;        /**< bearer's length */
    /** @} */
} mcpg_identity;

/** A growable byte buffer. Grow it only through host->buf_* (the kernel owns
 * the allocator); read data/len directly. data is NUL-terminated after any
 * host->buf_* call. */
typedef struct mcpg_buf {
    char *data;               /**< the bytes, NUL-terminated after any host->buf_* call; NULL when empty */
    size_t len;               /**< bytes used (the NUL not counted) */
    size_t cap;               /**< bytes allocated */
} mcpg_buf;

/** A caller-owned node for handing work to a loop thread without allocating
 * (see host->worker_post). The caller keeps it alive until fn has run. */
typedef struct mcpg_post {
    struct mcpg_post *next; /**< kernel use */
    void (*fn)(void *arg);   /**< runs once on the worker's loop thread */
    void *arg;              /**< given to fn */
} mcpg_post;

/** Lookup of a request header by lower-case name; returns a pointer into the
 * transport's request (borrowed until the call completes) or NULL. The kernel
 * may call it from a pool thread while the call is in flight (it copies the
 * value under the call's lock): until complete() runs, the transport must not
 * change or move the request's bytes. */
typedef const char *(*mcpg_header_fn)(void *transport_ctx, const char *lname,
                                      size_t *len_out);

/** What a transport hands the kernel to start a call. Every pointer is borrowed
 * until `complete` has been called for this call: the transport keeps the
 * request's bytes alive until then. */
typedef struct mcpg_call_desc {
    uint32_t size;            /**< sizeof(mcpg_call_desc) as the transport knows it; at
                                 least MCPG_CALL_DESC_SIZE_1_0 (sizes.h) */
    uint32_t wire;            /**< mcpg_wire */
    const char *method;       /**< "tools/call" (not NUL-terminated: method_len) */
    size_t method_len;        /**< method's length */
    const char *name;         /**< params.name (tools/call, prompts/get), params.uri
                                 (resources/read) or params.taskId (tasks/...); may be NULL */
    size_t name_len;          /**< name's length */
    const char *params_json;  /**< raw text of params, or NULL */
    size_t params_len;        /**< params_json's length */
    const char *args_json;    /**< raw text of params.arguments (an object), or NULL */
    size_t args_len;          /**< args_json's length */
    const char *id_json;      /**< raw text of the JSON-RPC id ("7", "\"a\"") */
    size_t id_len;            /**< id_json's length */
    const char *session_id;   /**< legacy wire, else NULL; any length (the kernel
                                 keeps it whole: replies are routed by it) */
    size_t session_id_len;    /**< session_id's length */
    void *transport_ctx;      /**< given back to header and complete */
    mcpg_header_fn header;    /**< may be NULL */
    /** Called exactly once, on the call's loop thread, when the outcome is
     * ready (read it with host->call_outcome), unless call_submit failed. It
     * may run before call_submit returns (a call answered at once). The
     * transport then calls host->call_release(call). */
    void (*complete)(void *transport_ctx, mcpg_call *call);

    /** @name ABI 1.1 (read only when MCPG_HAS_FIELD says the transport has it) */
    /** @{ */
    /** Optional: one JSON-RPC message for this call's client before its outcome
     * (a notification such as notifications/progress, or a request from the
     * server such as sampling/createMessage), complete and framed by the
     * kernel; on the call's loop, in the order the backend sent them. `json`
     * is borrowed for the callback. Returns 0 when it will be delivered (or
     * kept for a stream that resumes), MCPG_ENOTSUP when this call's answer
     * cannot carry messages (the sender is told so). NULL: never. */
    int (*message)(void *transport_ctx, mcpg_call *call, const char *json, size_t len);
    /** The client's capabilities object as JSON text (the stateless wire's
     * _meta clientCapabilities, the legacy wire's initialize capabilities),
     * and the protocol version the call speaks ("2026-07-28", "2025-11-25");
     * each NULL when unknown. */
    const char *client_caps_json;
    size_t client_caps_len;   /**< client_caps_json's length */
    const char *protocol_version; /**< the protocol version the call speaks, or NULL (not NUL-terminated) */
    size_t protocol_version_len;  /**< protocol_version's length */

    /** @} */
    /** @name ABI 1.2 */
    /** @{ */
    /** The client's address as text ("127.0.0.1:51234", "[::1]:51234"), or
     * NULL; and the connection's TLS facts, NULL on clear text. */
    const char *peer;
    size_t peer_len;          /**< peer's length */
    const mcpg_tls_info *tls; /**< the connection's TLS facts, or NULL on clear text */

    /** @} */
    /** @name ABI 1.6 */
    /** @{ */
    /** A request on a session (session_id set): who the session belongs to,
     * as the transport recorded it when the session was opened, in the form
     * host->call_owner gives ("" for a session opened without identity).
     * NULL: the transport binds no owner. After the identity stage the
     * kernel refuses a caller who is not the owner exactly as a session the
     * gateway does not know (HTTP 404, -32001 "Session not found"), and
     * audits it as denied at identity. Borrowed like the rest of the desc. */
    const char *session_owner;
    size_t session_owner_len; /**< session_owner's length */
    /** @} */
    /** @name ABI 1.12 */
    /** @{ */
    /** The virtual server the request came in on (the name host->server_find
     * gave), or NULL (length 0) for the gateway's own /mcp. Its bindings,
     * pipeline and lists serve the call. A name the call's generation does
     * not know (a reload removed the server): on a session the call is
     * refused as a session the gateway does not know (HTTP 404, -32001),
     * else as a method not found. Borrowed like the rest of the desc. */
    const char *server;
    size_t server_len;        /**< server's length */
    /** @} */
} mcpg_call_desc;

/** ABI 1.6: the methods a transport submits to have a request that touches a
 * session pass the identity stage (and the owner check above) when it
 * answers the request itself: "initialize" before it opens a session (the
 * caller's host->call_owner is then the owner to record), and
 * MCPG_SESSION_METHOD for anything else on a session (its GET stream, its
 * DELETE, ping, logging/setLevel, a notification, a response), and on the
 * stateless wire for what the transport answers itself (server/discover,
 * a subscriptions/listen that asks for no resources). The kernel
 * answers either with an empty result once identity has passed; no policy,
 * limits, audit or backend. */
#define MCPG_SESSION_METHOD "mcpg/session"

/** The outcome of a call, read by the transport in `complete`. Every pointer is
 * borrowed until host->call_release. */
typedef struct mcpg_call_outcome {
    uint32_t size;            /**< in: sizeof(mcpg_call_outcome) as the transport knows it;
                                 out: the bytes the kernel filled (never more) */
    int is_error;             /**< 1: the call failed (error_* below); 0: result holds its result */
    const char *result;       /**< the result object as JSON text (!is_error) */
    size_t result_len;        /**< result's length */
    int64_t error_code;       /**< JSON-RPC code (is_error) */
    const char *error_message; /**< NUL-terminated */
    const char *error_data;   /**< JSON text or NULL */
    size_t error_data_len;    /**< error_data's length */
    int http_status;          /**< 0: the wire's default; else e.g. 429, 503 */
    uint32_t retry_after_s;   /**< with 429/503: Retry-After, 0 = none */
    /** @name ABI 1.1 */
    /** @{ */
    uint32_t result_type;     /**< mcpg_result_type of `result` (!is_error) */
    /** @} */
    /** @name ABI 1.2 */
    /** @{ */
    const char *www_authenticate; /**< with 401: the WWW-Authenticate value a stage set
                                     (host->call_set_challenge), NUL-terminated, or NULL */
    /** @} */
} mcpg_call_outcome;

/** What a result is (2026-07-28 `resultType`). Append only. */
typedef enum mcpg_result_type {
    MCPG_RESULT_COMPLETE = 0,       /**< the call's final result */
    MCPG_RESULT_INPUT_REQUIRED = 1, /**< inputRequests/requestState: the client retries */
    MCPG_RESULT_TASK = 2            /**< a task was created (tasks extension) */
} mcpg_result_type;

/** A client's answer to a request the server sent it (host->call_request).
 * Borrowed for the callback. */
typedef struct mcpg_reply {
    uint32_t size;            /**< sizeof(mcpg_reply) in the kernel */
    int status;               /**< 0: the client answered (result or error below);
                                 MCPG_ETIMEDOUT, MCPG_ECANCELED (the call ended first),
                                 MCPG_EUNAVAIL (the client's stream went away), or
                                 what the transport refused the request with
                                 (MCPG_ENOTSUP: this answer cannot carry it) */
    int is_error;             /**< 1: the client answered with an error (error_* below) */
    const char *result_json;  /**< the result object's text (!is_error) */
    size_t result_len;        /**< result_json's length */
    int64_t error_code;       /**< is_error */
    const char *error_message; /**< NUL-terminated, is_error */
    const char *error_data;   /**< JSON text or NULL */
    size_t error_data_len;    /**< error_data's length */
} mcpg_reply;

/** Receives a client's answer to a request the server sent it
 * (host->call_request), on the call's loop thread. */
typedef void (*mcpg_reply_fn)(void *arg, const mcpg_reply *reply);

/** Lists a backend can announce as changed (host->lists_changed). */
#define MCPG_LIST_TOOLS     (1u << 0)
#define MCPG_LIST_RESOURCES (1u << 1) /**< the resources list (and its templates) changed */
#define MCPG_LIST_PROMPTS   (1u << 2) /**< the prompts list changed */

/** An audit event, handed to audit sinks. Borrowed for the emit() call only:
 * a sink that writes later copies (formats) it before returning. */
typedef struct mcpg_audit_event {
    uint32_t size;            /**< the kernel's sizeof: check MCPG_HAS_FIELD for fields
                                 after backend_us */
    const char *name;         /**< "mcpg.tool.call.allowed", ".completed", ".denied", ".failed" */
    uint64_t seq;             /**< unique per gateway, increasing in the order events are
                                 created; every sink gets the same seq and time for one
                                 event. A sink fed by several loops may receive events a
                                 little out of seq order (each loop emits on its own). */
    int64_t time_us;          /**< wall clock when the event was created, microseconds since the epoch */
    const char *id_json;      /**< the JSON-RPC id as raw JSON text */
    size_t id_len;            /**< id_json's length */
    const char *method;       /**< NUL-terminated */
    const char *tool;         /**< the name the client used; NULL when not a tool call */
    const char *backend;      /**< the backend instance, or NULL */
    const char *principal;    /**< NULL when anonymous */
    const char *tenant;       /**< may be NULL */
    const char *session;      /**< legacy wire session id, or NULL */
    uint32_t wire;            /**< mcpg_wire */
    uint32_t generation;      /**< the pipeline generation the call runs on */
    int64_t error_code;       /**< 0 on success */
    const char *error_message; /**< NULL on success */
    uint64_t latency_us;      /**< completed/failed: time since the call entered */
    uint64_t backend_us;      /**< completed/failed: time spent in the backend */
    /** @name ABI 1.2 (MCPG_HAS_FIELD(event, slot)); every string NUL-terminated or NULL */
    /** @{ */
    const char *roles_json;   /**< the principal's roles as a JSON array, or NULL */
    const char *auth_method;  /**< mcpg_identity.method, or NULL */
    const char *peer;         /**< the client's address, or NULL */
    const char *denied_stage; /**< .denied: "identity", "policy" or "limits" */
    const char *denied_by;    /**< .denied: the instance that refused */
    const char *args_json;    /**< params.arguments after the gateway's redaction (or
                                 {"sha256":"..."} when hashed), or NULL */
    size_t args_len;          /**< args_json's length */
    const char *result_json;  /**< .completed: the result after redaction, only when
                                 gateway.audit.results is on; else NULL */
    size_t result_len;        /**< result_json's length */
    const char *traceparent;  /**< the request's W3C traceparent header, or NULL */
    const char *gateway_id;   /**< gateway.id (default: the host name) */
    /** @} */
    /** @name ABI 1.12 */
    /** @{ */
    const char *server;       /**< the virtual server (servers[].name), or NULL: /mcp */
    /** @} */
} mcpg_audit_event;

#endif
