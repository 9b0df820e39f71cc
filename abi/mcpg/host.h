/** @file
 * mcpg ABI: the host services table.
 *
 * The kernel hands one const mcpg_host to every instance at create(); it lives
 * as long as the process. It is append-only: a slot is never removed or
 * moved. A module built against a newer minor checks host->size (or
 * MCPG_HOST_HAS(host, slot)) before using a slot its kernel may not have.
 *
 * Threads: unless a slot says "any thread", call it on a loop thread. The
 * process ignores SIGPIPE: a write to a closed socket returns EPIPE.
 *
 * Lifetimes: a pointer a slot returns lives as long as that slot says. The
 * ones a module may keep for its whole life, also after a reload carried it
 * over into a new generation: the host table, workers (worker_at), what
 * gateway_version, gateway_name and gateway_id return (the process), what
 * instance_name returns (the instance) and what coordinator returns (the
 * process: a reload never replaces the coordinator). Call data (call_*) is
 * borrowed as each slot says, listen_address only until the caller returns.
 */
#ifndef MCPG_HOST_H
#define MCPG_HOST_H

#include "module.h"
#include "call.h"
#include "json.h"
#include "kinds.h"
#include "metrics.h"

/** Marks a printf-like slot: argument f is the format, a the first value
 * (the compiler checks them with GCC and clang). */
#if defined(__GNUC__)
#define MCPG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MCPG_PRINTF(f, a)
#endif

/** A log line's level (host->log); a level is logged when the gateway's
 * log level is at least as verbose (host->log_enabled says). */
typedef enum mcpg_log_level {
    MCPG_LOG_ERROR = 0, /**< something failed */
    MCPG_LOG_WARN = 1,  /**< something is wrong but the work goes on */
    MCPG_LOG_INFO = 2,  /**< what an operator wants to see */
    MCPG_LOG_DEBUG = 3  /**< detail for finding a problem */
} mcpg_log_level;

/** A virtual server as host->server_find gives it (ABI 1.12). Strings are
 * NUL-terminated; each NULL when the manifest does not set it. */
typedef struct mcpg_server_view {
    uint32_t size;            /**< in: sizeof(mcpg_server_view) as the caller knows it */
    const char *name;         /**< servers[].name: what calls carry (mcpg_call_desc.server) */
    const char *path;         /**< where it is served: "/mcp/<name>" unless set */
    const char *host;         /**< the Host name it is served for, or NULL: any */
    const char *info_json;    /**< servers[].server_info as a compact JSON object
                                 ({"name":..,"version":..}), or NULL: the transport's own */
    const char *instructions; /**< servers[].instructions, or NULL */
} mcpg_server_view;

/** The host services table: what the kernel offers every instance (see the
 * file's description for threads and lifetimes). Read a slot a later minor
 * added only after MCPG_HOST_HAS(host, slot). */
struct mcpg_host {
    uint32_t size;     /**< sizeof(mcpg_host) in the kernel */
    uint32_t version;  /**< 1 */
    uint16_t abi_major, /**< the kernel's ABI major (MCPG_ABI_MAJOR it was built with) */
             abi_minor; /**< the kernel's ABI minor */
    uint32_t reserved0; /**< 0 */

    /** @name errors (any thread) */
    /** @{ */
    const char *(*strerror)(int err); /**< an error code's text ("invalid argument"); never NULL */
    const char *(*errname)(int err);  /**< an error code's name ("MCPG_EINVAL"); never NULL */

    /** @} */
    /** @name memory (any thread). free(NULL) is allowed. */
    /** @{ */
    void *(*alloc)(size_t n);                /**< as malloc: NULL when out of memory */
    void *(*calloc)(size_t count, size_t n); /**< as calloc: zeroed */
    void *(*realloc)(void *p, size_t n);     /**< as realloc */
    void (*free)(void *p);                   /**< frees what alloc, calloc or realloc gave */

    /** @} */
    /** @name logging (any thread): one line stamped [kind:module:instance] */
    /** @{ */
    /** One log line at level (mcpg_log_level), printf-formatted. */
    void (*log)(mcpg_instance *self, int level, const char *fmt, ...) MCPG_PRINTF(3, 4);
    /** 1 when a line at level would be logged: skip building costly ones. */
    int (*log_enabled)(mcpg_instance *self, int level);
    /** For validate(): one error at key path (relative to the instance's
     * "config" object); the kernel prefixes file and instance path. */
    void (*report_error)(mcpg_report *rep, const char *key_path, const char *fmt, ...)
        MCPG_PRINTF(3, 4);
    /** The instance's manifest name (lives as long as the instance), and the
     * gateway's version string (lives as long as the process). */
    const char *(*instance_name)(mcpg_instance *self);
    const char *(*gateway_version)(void); /**< the gateway's version string (lives as long as the process) */

    /** @} */
    /** @name workers (event loop threads) */
    /** @{ */
    uint32_t (*worker_count)(void);                 /**< any thread */
    mcpg_worker *(*worker_at)(uint32_t index);      /**< any thread */
    mcpg_worker *(*worker_current)(void);           /**< any thread: NULL off-loop */
    uint32_t (*worker_index)(mcpg_worker *w);       /**< any thread */
    /** The worker's uv_loop_t * (modules that do I/O link libuv themselves). */
    void *(*worker_uv_loop)(mcpg_worker *w);
    /** Any thread: run node->fn(node->arg) on w's loop soon. The node is the
     * caller's until fn runs; no allocation. Fails with MCPG_ESTATE once the
     * worker has stopped. */
    int (*worker_post)(mcpg_worker *w, mcpg_post *node);

    /** @} */
    /** @name time */
    /** @{ */
    uint64_t (*mono_us)(void);   /**< any thread: monotonic microseconds */
    int64_t (*wall_us)(void);    /**< any thread: microseconds since the epoch */

    /** @} */
    /** @name timers (on w's loop thread)
     * cb runs on w's loop after timeout_ms, then every repeat_ms if > 0.
     * timer_stop (same thread) guarantees cb never runs again and frees the
     * timer; a one-shot timer that has fired is still the module's until it
     * calls timer_stop (from its callback is fine). A timer still running
     * on w after every worker_stop has run is closed and freed by the
     * kernel and logged as a module bug. (start() runs on the main thread:
     * per-loop timers begin in worker_start.) */
    /** @{ */
    /** Start a timer (see above); 0 with *timer_out set, or an error. */
    int (*timer_start)(mcpg_instance *self, mcpg_worker *w, uint64_t timeout_ms,
                       uint64_t repeat_ms, void (*cb)(void *arg), void *arg,
                       mcpg_timer **timer_out);
    void (*timer_stop)(mcpg_timer *timer); /**< stop and free a timer: cb never runs again */

    /** @} */
    /** @name the bounded worker pool, for blocking work
     * Call it on w's loop thread (else MCPG_ESTATE). work(arg) runs on a pool
     * thread. done(arg, status) runs once on w's loop: status 0 after work
     * returned, MCPG_ETIMEDOUT if timeout_ms (0 = none) passed before work
     * started, MCPG_ECANCELED when w's loop stopped before work started (at
     * the gateway's stop, before any worker_stop). Work still running when
     * its loop stops finishes, but its done() does not run: there is no loop
     * left. Fails with MCPG_EAGAIN when the queue is full, MCPG_ESTATE once
     * w has stopped (done is then never called). The kernel counts each
     * instance's work until its done() ran. */
    /** @{ */
    /** Run work(arg) on a pool thread, then done(arg, status) on w's loop (see above). */
    int (*work_submit)(mcpg_instance *self, mcpg_worker *w, uint64_t timeout_ms,
                       void (*work)(void *arg), void (*done)(void *arg, int status),
                       void *arg);

    /** @} */
    /** @name buffers (any thread, one thread per buffer at a time)
     * A zeroed mcpg_buf is empty and valid. Each returns 0 or MCPG_ENOMEM. */
    /** @{ */
    int (*buf_reserve)(mcpg_buf *b, size_t extra);            /**< make room for extra more bytes */
    int (*buf_append)(mcpg_buf *b, const void *p, size_t n);  /**< append n bytes */
    /** Append printf-formatted text. */
    int (*buf_printf)(mcpg_buf *b, const char *fmt, ...) MCPG_PRINTF(2, 3);
    /** Appends "..." with JSON escaping; s need not be NUL-terminated. */
    int (*buf_append_json_string)(mcpg_buf *b, const char *s, size_t n);
    void (*buf_free)(mcpg_buf *b); /**< free the bytes; the buffer is empty and valid again */

    /** @} */
    /** @name JSON scanner (any thread, no allocation); see mcpg/json.h
     * json_validate: 0 valid, < 0 malformed. The others: 1 found / 0 not
     * found or end / < 0 malformed (MCPG_EPROTO). */
    /** @{ */
    int (*json_validate)(const char *s, size_t n); /**< 0 when s[0..n) is one valid JSON value */
    /** The value of key in the object obj[0..n): 1 found (into *out), 0 not. */
    int (*json_object_get)(const char *obj, size_t n, const char *key,
                           mcpg_json_span *out);
    /** Iterate an object's members: *iter starts at 0; 1 with *key and *val, 0 at the end. */
    int (*json_object_next)(const char *obj, size_t n, size_t *iter,
                            mcpg_json_span *key, mcpg_json_span *val);
    /** Iterate an array's values: *iter starts at 0; 1 with *val, 0 at the end. */
    int (*json_array_next)(const char *arr, size_t n, size_t *iter, mcpg_json_span *val);
    /** 1 when the string span, decoded, equals lit[0..n). */
    int (*json_string_eq)(const mcpg_json_span *s, const char *lit, size_t n);
    /** Decode a string span into dst (cap bytes, NUL-terminated): MCPG_ERANGE
     * if it does not fit, MCPG_EPROTO if it is not a string. */
    int (*json_string_decode)(const mcpg_json_span *s, char *dst, size_t cap,
                              size_t *len_out);
    /** A number span that is an integer, into *out: 0, or MCPG_EPROTO / MCPG_ERANGE. */
    int (*json_int64)(const mcpg_json_span *s, int64_t *out);

    /** @} */
    /** @name calls, from the transport's side (on the worker's loop)
     * call_cancel, call_outcome and call_release take only the handle
     * call_submit gave (and complete() is called with): the handle a stage
     * or backend was given for its op is refused, logged as that module's
     * bug, and nothing is done (call_outcome fills nothing: out->size 0). */
    /** @{ */
    /** Start a call on worker w. On success the desc's complete() will be
     * called exactly once, with the same handle as *call_out. Fails with
     * MCPG_EUNAVAIL while draining and MCPG_EAGAIN when the worker's call
     * table is full. */
    int (*call_submit)(mcpg_worker *w, const mcpg_call_desc *desc, mcpg_call **call_out);
    /** The client went away: call_cancelled() says so from now on, and a
     * backend whose op is pending gets its cancel op; the call still
     * completes. */
    void (*call_cancel)(mcpg_call *call);
    /** In complete(): fill *out (set out->size first) with the call's outcome. */
    void (*call_outcome)(mcpg_call *call, mcpg_call_outcome *out);
    /** After complete(): the transport is done with the call; the handle ends. */
    void (*call_release)(mcpg_call *call);

    /** @} */
    /** @name a call, from a stage or a backend
     * An op may use these slots from the thread it runs on (a pool thread for
     * a backend not dispatched inline) and, while the call is PENDING on it,
     * from any one thread at a time: the kernel does not touch the call
     * until the op resumes it. call_resume itself is any-thread. With a
     * handle whose call has ended each slot logs a module bug and does
     * nothing: pointers come back NULL (call_args "{}", call_result_buf a
     * buffer nobody reads), ints MCPG_ESTATE, call_cancelled 1. */
    /** @{ */
    mcpg_worker *(*call_worker)(mcpg_call *call);     /**< the worker whose loop runs the call */
    uint32_t (*call_method)(mcpg_call *call);         /**< mcpg_method */
    uint32_t (*call_wire)(mcpg_call *call);           /**< mcpg_wire */
    /** The tool (or prompt, or resource uri) as this backend knows it, i.e. with
     * the binding's prefix removed; NUL-terminated. */
    const char *(*call_target)(mcpg_call *call);
    /** Raw JSON text of params.arguments (or "{}"), of params, of the id. */
    const char *(*call_args)(mcpg_call *call, size_t *len_out);
    const char *(*call_params)(mcpg_call *call, size_t *len_out); /**< raw JSON text of params, or NULL */
    const char *(*call_id)(mcpg_call *call, size_t *len_out);     /**< raw JSON text of the id */
    /** A request header's value by lower-case name, or NULL (no such header,
     * or the call was already answered). On the call's loop it points into
     * the transport's request; on a pool thread it is a copy the kernel keeps
     * until the call is recycled. Use it before the op answers. */
    const char *(*call_header)(mcpg_call *call, const char *lname, size_t *len_out);
    /** A per-call pointer for this instance (NULL-initialised); NULL if the
     * instance is not in the call's pipeline. */
    void **(*call_slot)(mcpg_call *call, mcpg_instance *self);
    /** identity: copied; roles is a comma-separated list or NULL */
    int (*call_set_identity)(mcpg_call *call, const char *principal, const char *tenant,
                             const char *roles);
    const char *(*call_principal)(mcpg_call *call); /**< who the call is, or NULL when anonymous */
    const char *(*call_tenant)(mcpg_call *call);    /**< its tenant, or NULL */
    const char *(*call_roles)(mcpg_call *call);     /**< its roles, comma-separated, or NULL */
    /** The result object as JSON text (copied), or append it into the call's
     * own buffer (kernel-owned, empty at first). */
    int (*call_result)(mcpg_call *call, const char *json, size_t len);
    mcpg_buf *(*call_result_buf)(mcpg_call *call); /**< the call's own result buffer (see call_result) */
    /** A JSON-RPC error (message copied; data_json is JSON text or NULL). */
    int (*call_error)(mcpg_call *call, int64_t code, const char *message,
                      const char *data_json);
    /** Ask the transport for an HTTP status (429, 503) and Retry-After. */
    void (*call_set_http)(mcpg_call *call, int http_status, uint32_t retry_after_s);
    /** Any thread: finish the op that answered PENDING, the one this handle
     * was given to. A resume never finishes another op: not another
     * stage's, nor another instance's of the same stage (the next audit
     * sink's record, the same sink's other event): each op's handle names
     * that op alone. Exactly once per PENDING, with CONTINUE or DENY; off
     * the call's loop it is queued to that loop. A resume whose op is not
     * pending (a second one, a late one) is logged as a module bug and
     * ignored. */
    void (*call_resume)(mcpg_call *call, mcpg_status status);
    int (*call_cancelled)(mcpg_call *call); /**< 1 once the client went away (call_cancel) */

    /** @} */
    /** @name the gateway (any thread) */
    /** @{ */
    /** gateway.name from the manifest: the server name clients are told.
     * The string lives as long as the process (a reload that changes the
     * name makes a new one; the old stays valid), so it may be kept; it is
     * the name at the time of the call. */
    const char *(*gateway_name)(void);

    /* ======== ABI 1.1: check MCPG_HOST_HAS(host, slot) before use ======== */

    /** @} */
    /** @name a call's messages before its outcome (from a stage or backend)
     * Any thread, while the op is running or pending. */
    /** @{ */
    /** A notification to the call's client (notifications/progress,
     * notifications/message), framed by the kernel; params_json is the
     * params object's text or NULL; copied. 0 when queued (delivered in
     * order, before the outcome: one sent from another thread while the op
     * runs is flushed before the answer is written, never dropped),
     * MCPG_ESTATE once the call has been answered, MCPG_ENOTSUP when the
     * call's answer cannot carry messages, MCPG_EAGAIN when the call already has too many waiting
     * (the bound is the kernel's: dropping is the backend's choice) or, for
     * one sent at once on the call's loop, when the transport's client has
     * that much unread (ABI 1.5): a sender that keeps its place sends it
     * again later. */
    int (*call_notify)(mcpg_call *call, const char *method, const char *params_json,
                       size_t params_len);
    /** A request to the call's client (sampling/createMessage,
     * elicitation/create, roots/list): the kernel mints its id, sends it on
     * the call's stream and routes the client's answer back. fn(arg, reply)
     * runs exactly once on the call's loop: the answer, MCPG_ETIMEDOUT after
     * timeout_ms (0 = the call's own deadline), or MCPG_ECANCELED when the
     * call ends first. Returns 0, or MCPG_ENOTSUP (the stateless wire: answer
     * MCPG_RESULT_INPUT_REQUIRED instead; or an answer that cannot carry
     * messages), MCPG_EAGAIN (too many outstanding); then fn is never called. */
    int (*call_request)(mcpg_call *call, const char *method, const char *params_json,
                        size_t params_len, uint64_t timeout_ms, mcpg_reply_fn fn, void *arg);
    /** What the result set with call_result is (mcpg_result_type). */
    void (*call_set_result_type)(mcpg_call *call, uint32_t result_type);
    /** The legacy wire's session id, the client's capabilities (JSON object
     * text) and the call's protocol version; NULL when unknown. Borrowed
     * until the op answers. */
    const char *(*call_session)(mcpg_call *call, size_t *len_out);
    const char *(*call_client_capabilities)(mcpg_call *call, size_t *len_out); /**< see call_session */
    const char *(*call_protocol_version)(mcpg_call *call, size_t *len_out);    /**< see call_session */

    /** @} */
    /** @name a backend's news, outside any call (any thread) */
    /** @{ */
    /** Its lists changed (MCPG_LIST_* bits): clients that listen are told.
     * From start() on; told before the generation holding self serves (a
     * reload still being built), it is applied once that one serves. */
    void (*lists_changed)(mcpg_instance *self, uint32_t lists);
    /** One of its resources changed: each subscriber is told once. */
    void (*resource_updated)(mcpg_instance *self, const char *uri, size_t uri_len);

    /** @} */
    /** @name the transport's side */
    /** @{ */
    /** A client's JSON-RPC response (body: the whole response object) to a
     * request the server sent on a call's stream; on w's loop. It reaches
     * the call that asked, on whichever loop that is, when `session`
     * (the legacy wire's session id) is the asking call's, compared whole
     * whatever its length (an answer without one reaches only a call that
     * had none). 0 when taken,
     * MCPG_ENOENT when no such request is outstanding (answered, timed out,
     * or another session's), MCPG_EPROTO when body is not a response. */
    int (*reply_submit)(mcpg_worker *w, const char *session, size_t session_len,
                        const char *body, size_t len);
    /** A client subscribed to (on 1) or unsubscribed from (on 0) a resource:
     * the backend that owns it is told (mcpg_backend_ops.subscribe). On a
     * loop thread. 0, or MCPG_ENOENT when no backend owns uri. */
    int (*resource_subscribe)(mcpg_worker *w, const char *uri, size_t uri_len, int on);

    /** @} */
    /** @name fleet state (any loop thread) */
    /** @{ */
    /** The gateway's coordinator (cluster.kind): its ops and the instance to
     * pass them; NULL (and `*instance_out` NULL) when the manifest has none.
     * Also during create() (on the thread creating): the coordinator of the
     * generation being built, which the kernel creates before any other
     * instance, so a module can check at create() what it will need.
     * Lifetime: the ops and the instance live as long as the process, and
     * are the same at every call: a reload that would change the
     * coordinator (its module, its config, `cluster.*`) is refused, since the
     * transport, which a reload carries over, keeps its sessions and
     * subscriptions on it. So a module may keep them from create() or
     * start() on, also across reloads that carry it over. */
    const mcpg_coordinator_ops *(*coordinator)(void **instance_out);

    /** @} */
    /** @name tasks (any thread) */
    /** @{ */
    /** 1 when a backend of the current generation offers tasks (its `task`
     * op): the transport advertises the tasks capability then. */
    int (*tasks_offered)(void);

    /** @} */
    /** @name administration (the transport's admin routes) */
    /** @{ */
    /** Reload the manifest (POST /admin/reload). done(arg, http_status, json,
     * len) runs once, on w's loop: 200 with {"generation":N,...} once every
     * loop serves the new generation, 400 with {"errors":[...]} when the
     * new manifest is refused (the old generation serves on), 409 while
     * another is being built (read, built, published): generations replaced
     * earlier and still retiring hold no reload up. The 200 answer's
     * "retiring" counts the generations retiring, the one just replaced
     * included. 0, or MCPG_EUNAVAIL while the gateway drains. */
    int (*reload)(mcpg_worker *w,
                  void (*done)(void *arg, int http_status, const char *json, size_t len),
                  void *arg);

    /* ======== ABI 1.2 ======== */

    /** @} */
    /** @name a call's connection and identity (as the call_* slots above) */
    /** @{ */
    /** The client's address ("127.0.0.1:51234"), NULL when the transport did
     * not say; and its TLS facts, NULL on clear text. Borrowed until the op
     * answers. */
    const char *(*call_peer)(mcpg_call *call, size_t *len_out);
    const mcpg_tls_info *(*call_tls)(mcpg_call *call); /**< see call_peer */
    /** Set who the call is (copied): principal, tenant, roles, claims,
     * method. 0, MCPG_EINVAL (no principal, or claims that are not a JSON
     * object), MCPG_ENOMEM. call_set_identity (1.0) is this with its comma
     * list split into roles. */
    int (*call_identify)(mcpg_call *call, const mcpg_identity *id);
    uint32_t (*call_role_count)(mcpg_call *call); /**< how many roles the call's identity has */
    const char *(*call_role)(mcpg_call *call, uint32_t i); /**< NULL past the end */
    int (*call_has_role)(mcpg_call *call, const char *role);  /**< 1 or 0 */
    /** The identity's claims object as JSON text, or NULL. */
    const char *(*call_claims)(mcpg_call *call, size_t *len_out);
    const char *(*call_auth_method)(mcpg_call *call); /**< mcpg_identity.method, or NULL */
    /** The tool or prompt name, or the resource uri, as the client sent it
     * (before the binding's prefix was removed); NULL when the method names
     * none. NUL-terminated. */
    const char *(*call_client_name)(mcpg_call *call);
    /** The WWW-Authenticate value to answer a 401 with (copied); a later call
     * replaces it. Any stage may set it, also one that passes: the kernel's
     * own 401 for an anonymous call carries it. */
    int (*call_set_challenge)(mcpg_call *call, const char *www_authenticate);

    /** @} */
    /** @name the gateway (any thread) */
    /** @{ */
    /** gateway.id from the manifest (default: the host name): in audit events.
     * Lives as long as the process, as gateway_name's. */
    const char *(*gateway_id)(void);
    /** Redact a JSON text by the gateway's rules (gateway.redact: credential-
     * shaped strings, configured pointers and patterns) into out (appended).
     * For a sink or a log line that shows call data. 0, MCPG_EPROTO (not
     * JSON: nothing appended), MCPG_ENOMEM. */
    int (*redact_json)(const char *json, size_t len, mcpg_buf *out);

    /** @} */
    /* ======== ABI 1.4: the metrics registry (mcpg/metrics.h) ======== */

    /** @name ABI 1.4: the metrics registry (mcpg/metrics.h) */
    /** @{ */
    /** Create a family of series (the description is copied). On the main
     * thread in create() or start(), or on a loop thread; never per call.
     * `self` (never NULL) owns it: it is removed just before self's
     * destroy(), so count nothing in destroy (and, as with every slot,
     * nothing after stop); a read callback is not called once
     * destroy() has begun. 0 with *out
     * set; MCPG_EINVAL (a bad name, label, series count or bucket list),
     * MCPG_EEXIST (another instance's family has that name; the same
     * instance asking again with the same shape gets its family back),
     * MCPG_ENOMEM. */
    int (*metric_new)(mcpg_instance *self, const mcpg_metric_desc *desc, mcpg_metric **out);
    /** Any thread, lock-free, no allocation. series < n_series, else (or
     * with a NULL metric: one metric_new refused) nothing is counted.
     * add: a counter (delta >= 0) or a gauge; set: a gauge's value (a gauge
     * is either set, by one thread at a time, or added to, not both);
     * observe: one value into a histogram (its unit: see metrics.h). */
    void (*metric_add)(mcpg_metric *m, uint32_t series, int64_t delta);
    void (*metric_set)(mcpg_metric *m, uint32_t series, int64_t value);      /**< see metric_add */
    void (*metric_observe)(mcpg_metric *m, uint32_t series, uint64_t value); /**< see metric_add */
    /** For exporters: fn(arg, view) once per family, with every series'
     * value summed over its rows, under the registry's lock (fn must not
     * call metric_new). Any thread. 0, or MCPG_ENOMEM. */
    int (*metrics_each)(void (*fn)(void *arg, const mcpg_metric_view *view), void *arg);
    /** For the transport's GET /metrics, on w's loop: the current
     * generation's metrics instance appends its exposition to out, and its
     * media type goes to content_type (NUL-terminated, at most ct_cap
     * bytes). 0; MCPG_ENOENT when the manifest has no metrics instance;
     * what render returned otherwise. */
    int (*metrics_render)(mcpg_worker *w, mcpg_buf *out, char *content_type, size_t ct_cap);

    /** @} */
    /* ======== ABI 1.5: the MCP Events pipeline ======== */

    /** @name ABI 1.5: the MCP Events pipeline */
    /** @{ */
    /** The transport's POST /webhooks/events/{source}: a call straight to the
     * current generation's events instance (mcpg_events_ops.webhook, with
     * desc->name the source, desc->params_json the body, desc->header the
     * request's headers); desc->method is ignored. As call_submit
     * otherwise; MCPG_ENOENT (nothing is called) when the manifest has no
     * events pipeline. On w's loop. */
    int (*webhook_submit)(mcpg_worker *w, const mcpg_call_desc *desc, mcpg_call **call_out);
    /** Any thread: 1 when the current generation runs an events pipeline
     * (the transport advertises io.modelcontextprotocol/events then). */
    int (*events_offered)(void);

    /** @} */
    /* ======== ABI 1.6: sessions bound to who opened them ======== */

    /** @name ABI 1.6: sessions bound to who opened them */
    /** @{ */
    /** Who the call's caller is, as one string a transport can store and
     * compare: the principal and tenant the identity stage established
     * (joined by 0x1f), or "" for a caller without identity. Valid until the
     * call is released; NULL before the identity stage has run. On the
     * call's loop. See mcpg_call_desc.session_owner. */
    const char *(*call_owner)(mcpg_call *call, size_t *len_out);

    /** @} */
    /* ======== ABI 1.7: what the bindings serve ======== */

    /** @name ABI 1.7: what the bindings serve */
    /** @{ */
    /** Any thread: MCPG_OFFER_* bits for the current generation, so that a
     * transport advertises the capabilities the gateway serves (and no
     * others) in server/discover and initialize. A kind is offered when the
     * merged lists hold one of it, or a bound backend whose lists change at
     * run time (MCPG_MOD_DYNAMIC_LISTS) has its list op; its listChanged
     * then too. */
    uint32_t (*offers)(void);
    /** The manifest's i-th listen address as it gives it ("0.0.0.0:8080",
     * "[::1]:8080"), NULL past the last: of the generation being built
     * during create() and start(), else of the serving one. For a
     * transport's log lines about what each listener exposes. Borrowed until
     * the caller returns (it is the manifest's, which a reload replaces):
     * copy it to keep it. */
    const char *(*listen_address)(size_t i);
    /** RFC 9728 protected-resource metadata the current generation's
     * identity stage describes (its instances' protected_resource op):
     * {"resource": the first one's, "authorization_servers": every issuer,
     * "bearer_methods_supported": ["header"]} appended to out. 0;
     * MCPG_ENOENT when no identity instance describes one; MCPG_ENOMEM.
     * Any loop thread. */
    int (*protected_resource)(mcpg_buf *out);
    /** The WWW-Authenticate value set on the call so far (call_set_challenge),
     * or NULL: a policy that answers 403 insufficient_scope reuses the
     * identity stage's resource_metadata from it. Borrowed until the next
     * call_set_challenge. The outcome carries a challenge with a 401, and
     * with a 403 when it says error="insufficient_scope". */
    const char *(*call_challenge)(mcpg_call *call);

    /** @} */
    /* ======== ABI 1.8: readiness ======== */

    /** @name ABI 1.8: readiness */
    /** @{ */
    /** The backends of w's generation whose first lists are not yet in its
     * merged lists (their list ops answer MCPG_EAGAIN: see mcpg_backend_ops),
     * appended to out as a JSON array of their instance names
     * (["github"]); a backend whose module entry says "wait_for_lists":
     * false is left out. Returns how many were named (0: every backend has
     * its first lists, "[]" appended), or MCPG_ENOMEM. On w's loop. For
     * GET /readyz: a gateway is ready once it names none. */
    int (*backends_waiting)(mcpg_worker *w, mcpg_buf *out);
    /** @} */
    /* ======== ABI 1.9: what the audit trail holds ======== */

    /** @name ABI 1.9: what the audit trail holds */
    /** @{ */
    /** 1 when every audit sink of the call's pipeline took the event of its
     * outcome (completed, failed or denied), 0 otherwise: no audit sink, a
     * method that is not audited, a sink that could not record, or an
     * outcome not reached yet. The transport's access log leaves out a
     * request whose call answers 1 (gateway.server.access_log "auto"). On
     * the call's loop, before call_release. */
    int (*call_audited)(mcpg_call *call);
    /** @} */
    /* ======== ABI 1.10: request traces ======== */

    /** @name ABI 1.10: request traces (mcpg/trace.h) */
    /** @{ */
    /** A backend is about to send one upstream request for the call. When
     * the call is traced, the kernel opens a client span for it (a child of
     * the backend stage's span, `name` its name, copied), writes the
     * traceparent header value that request carries into tp ("00-<trace
     * id>-<the new span's id>-<flags>", NUL-terminated; cap at least
     * MCPG_TRACEPARENT_CAP) and returns the span's number, > 0, for
     * call_trace_upstream_end. 0 when the call is not traced, or traces no
     * more upstream requests (MCPG_TRACE_MAX_UPSTREAM): the backend then
     * forwards the client's traceparent as it would without telemetry.
     * Any thread the call's backend op runs on. */
    uint32_t (*call_trace_upstream)(mcpg_call *call, const char *name, char *tp, size_t cap);
    /** The upstream request `span` ended: `status` is its HTTP status, or 0
     * when it got no answer, and `error` (or NULL) what went wrong; the span
     * is an error for a status of 0 or >= 500 or an error text. A span that
     * never ends is not exported. Any thread the call's backend op runs on. */
    void (*call_trace_upstream_end)(mcpg_call *call, uint32_t span, int status, const char *error);
    /** @} */
    /* ======== ABI 1.11: upstream credentials ======== */

    /** @name ABI 1.11: upstream credentials */
    /** @{ */
    /** The bearer token the call's identity stage verified
     * (mcpg_identity.bearer) and the claims it read from it: for a backend
     * that forwards the token, or exchanges it for one scoped to its
     * upstream. 0 with the four outs set (borrowed until the call is
     * released; claims NULL when the identity has none); MCPG_ENOENT when
     * the identity was not established from a verified bearer token (no
     * identity, an API key, mTLS, a module older than 1.11): a backend
     * must never read the Authorization header itself for this. Any thread
     * the call's ops run on. */
    int (*call_bearer)(mcpg_call *call, const char **token, size_t *token_len,
                       const char **claims_json, size_t *claims_len);
    /** @} */

    /* ======== ABI 1.12: virtual servers ======== */

    /** @name ABI 1.12: virtual servers */
    /** @{ */
    /** The virtual server (manifest `servers[]`) a request for `path` (no
     * query) with Host header `host` (hn 0: none; a port after the name is
     * ignored) is served by, in the generation w's loop serves: 0 with *out
     * filled (out->size set by the caller first; its strings valid until
     * this loop callback returns: copy what a later turn needs), or
     * MCPG_ENOENT when no server is there. The gateway's own /mcp is not a
     * virtual server: a transport serves it as before. A transport passes
     * the name it found in mcpg_call_desc.server. Loop threads. */
    int (*server_find)(mcpg_worker *w, const char *path, size_t n, const char *host, size_t hn,
                       mcpg_server_view *out);
    /** host->offers() for one server: what the virtual server name[0..n)
     * serves (its own lists and bindings), in the generation w's loop
     * serves; n 0: /mcp's. A name it does not have: offers(). Loop threads. */
    uint32_t (*server_offers)(mcpg_worker *w, const char *name, size_t n);
    /** @} */
};

/** The least room host->call_trace_upstream writes a traceparent into. */
#define MCPG_TRACEPARENT_CAP 56
/** The most upstream requests of one call that become client spans. */
#define MCPG_TRACE_MAX_UPSTREAM 8

/** host->offers() bits. */
#define MCPG_OFFER_TOOLS        (1u << 0) /**< tools */
#define MCPG_OFFER_RESOURCES    (1u << 1) /**< resources or resource templates */
#define MCPG_OFFER_PROMPTS      (1u << 2) /**< prompts */
#define MCPG_OFFER_COMPLETIONS  (1u << 3) /**< a bound backend has a `complete` op */
#define MCPG_OFFER_SUBSCRIBE    (1u << 4) /**< a bound backend has a `subscribe` op, or a
                                             binding's resources are watched */
#define MCPG_OFFER_LIST_CHANGED (1u << 5) /**< a bound backend's lists change at run time */

/** True when the kernel's table has `slot` (for modules built on a newer minor). */
#define MCPG_HOST_HAS(host, slot) MCPG_HAS(host, slot)

#endif
