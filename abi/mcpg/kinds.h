/** @file
 * mcpg ABI: the ops table of every module kind.
 *
 * Each kind evolves on its own: each table starts {size, version} and grows at
 * its end. A NULL optional op means "not offered"; a NULL mandatory op makes
 * the kernel refuse the module at load, naming the op.
 *
 * Threading: every op runs on a loop thread and must not block, except
 * backend call ops the kernel dispatches to the worker pool (a backend not
 * used with inline_dispatch). An op that answers MCPG_PENDING finishes later
 * with host->call_resume() (callable from any thread).
 *
 * `instance` is always the pointer create() returned. `call` is a handle
 * borrowed for the op: it stays valid until the op has answered (its resume
 * included). It names the op too: host->call_resume(call, ...) finishes the
 * op this handle was given to and no other (each op of a call, also each
 * audit sink's and each instance's of a stage, gets a handle of its own, so
 * an extra or late resume finishes nothing). A handle used after its call
 * has ended is refused by every host slot (logged as a module bug), never
 * taken for another client's call; keep per-call state in host->call_slot,
 * not in a handle kept across ops.
 */
#ifndef MCPG_KINDS_H
#define MCPG_KINDS_H

#include "call.h"
#include "json.h"
#include "trace.h"

/** The transport's ops: it owns connections and the wire.
 * The kernel owns listening sockets. On each accepted connection it calls
 * conn_adopt on the listener's worker thread. */
typedef struct mcpg_transport_ops {
    uint32_t size,    /**< sizeof the table at build time (mcpg_ops_header) */
             version; /**< 1 */
    /** Mandatory. Take ownership of a connected, non-blocking socket `fd_take`
     * on worker `w` (use host->worker_uv_loop(w)). On failure the kernel
     * closes the fd. */
    int (*conn_adopt)(void *instance, mcpg_worker *w, int fd_take);
    /** Mandatory. Graceful shutdown on worker `w` (its loop thread): close idle
     * connections now, close the others once their in-flight answers are
     * written; accept nothing new. */
    void (*drain)(void *instance, mcpg_worker *w);
    /** Mandatory. How many connections this instance still has open on `w`;
     * the kernel waits for 0 (or its drain deadline) before stopping. */
    uint32_t (*conn_count)(void *instance, mcpg_worker *w);
    /** @name ABI 1.1 */
    /** @{ */
    /** Optional: news for clients that is not part of any call, on each
     * worker's loop thread: method is notifications/tools/list_changed,
     * notifications/resources/list_changed, notifications/prompts/list_changed
     * or notifications/resources/updated (then uri is set, else NULL).
     * Borrowed for the call. The transport tells its listening streams. */
    void (*news)(void *instance, mcpg_worker *w, const char *method, const char *uri,
                 size_t uri_len);
    /** @} */
    /** @name ABI 1.8 */
    /** @{ */
    /** Optional: on each worker's loop thread, gateway.reload_drain_ms after a
     * reload published (a reload carried this instance over): end the streams
     * this instance holds on `w` without a call (a subscriptions/listen
     * stream, a legacy session's GET stream) that opened before
     * `published_us` (host->mono_us()), the way drain ends them (a listening
     * stream gets its final result, a GET stream its end), so that their
     * clients reconnect and are served by the generation serving now. The
     * connections stay open; calls are the kernel's to end. Returns how many
     * streams it ended. Without it such streams run on until their client
     * closes them. */
    uint32_t (*end_streams)(void *instance, mcpg_worker *w, uint64_t published_us);
    /** @} */
} mcpg_transport_ops;

/** The identity stage's ops: who is calling.
 * A chain: each instance accepts (sets identity with host->call_identify, or
 * 1.0's call_set_identity, and answers CONTINUE: the chain stops there),
 * rejects (call_error + DENY; for missing or bad credentials also
 * call_set_http(401) and call_set_challenge), or passes (CONTINUE without
 * setting identity, so the next one tries). A call every instance passed is
 * anonymous: the kernel refuses it with 401 unless the manifest's
 * gateway.anonymous allows it (then the policy stage sees no principal). */
typedef struct mcpg_identity_ops {
    uint32_t size,    /**< sizeof the table at build time (mcpg_ops_header) */
             version; /**< 1 */
    mcpg_status (*authenticate)(void *instance, mcpg_call *call); /**< mandatory */
    /** @name ABI 1.7 */
    /** @{ */
    /** Optional: for a stage that takes OAuth bearer tokens, what they are
     * for (the resource, RFC 8707) and who issues them (an authorization
     * server's issuer URL): both set, borrowed for the instance's life, and
     * 0; else nonzero. The transport serves RFC 9728 metadata from it
     * (host->protected_resource) unless its configuration says otherwise. */
    int (*protected_resource)(void *instance, const char **resource_out, const char **issuer_out);
    /** @} */
} mcpg_identity_ops;

/* ---- policy: may this principal do this -------------------------------- */
/** The policy stage's ops: may this principal do this. */
typedef struct mcpg_policy_ops {
    uint32_t size,    /**< sizeof the table at build time (mcpg_ops_header) */
             version; /**< 1 */
    mcpg_status (*check)(void *instance, mcpg_call *call); /**< mandatory */
    /** check() runs for every call that passed identity: tools/call,
     * prompts/get, resources/read (host->call_client_name is the name the
     * client used, host->call_target the backend's), the lists, and the
     * rest. A DENY is audited as mcpg.tool.call.denied with this stage and
     * instance named.
     * Optional: whether a listed item is visible to the call's principal:
     * for tools/list, prompts/list, resources/list and
     * resources/templates/list (both wires) the kernel asks each policy
     * instance that has it for each item, after check() let the list
     * through, and leaves out what any of them answers 0 to. kind is "tool",
     * "prompt", "resource" or "resource_template"; name is the client's
     * name (tools, prompts: with the binding's prefix), the uri or the
     * uriTemplate. ABI 1.5: also "event" (name: the event type) for
     * events/list. On the call's loop; must not block. */
    int (*visible)(void *instance, mcpg_call *call, const char *kind, const char *name);
} mcpg_policy_ops;

/** The limits stage's ops: concurrency caps, rates, budgets.
 * acquire runs for tools/call only, after identity and policy (lists,
 * reads and the other methods are not limited). A refusal is DENY with
 * call_error naming the limit and call_set_http(429, Retry-After); the kernel
 * audits it as mcpg.tool.call.denied. release runs once for every call
 * acquire admitted, whatever its outcome (an error, a timeout, a cancel, a
 * client gone, a drain), and only when its backend has really stopped (a
 * timed-out pool backend still running keeps what it holds). A limit shared
 * by gateways uses the coordinator (host->coordinator) and only its atomic
 * ops (put_if_absent with a TTL for slots, incr for budgets, rate_take for
 * rates). */
typedef struct mcpg_limits_ops {
    uint32_t size,    /**< sizeof the table at build time (mcpg_ops_header) */
             version; /**< 1 */
    mcpg_status (*acquire)(void *instance, mcpg_call *call); /**< mandatory */
    /** Optional: the call that acquire() admitted has finished (any outcome). */
    void (*release)(void *instance, mcpg_call *call);
} mcpg_limits_ops;

/** An audit sink's ops.
 * emit() answers CONTINUE when the event is as durable as the sink promises
 * (immediately for a non-durable sink), PENDING when it will say so later
 * through host->call_resume(call, CONTINUE), or DENY (with call_error) when it
 * cannot record the event: the call then fails closed. A DENY without an
 * error is a module bug: the call fails with -32000 and HTTP 503. call is
 * NULL for an event of the gateway's own that no call waits on (ABI 1.10:
 * mcpg.pin.changed, mcpg.pin.unpinned): record it, answer CONTINUE (or DENY
 * when it cannot be recorded) and resume nothing. */
typedef struct mcpg_audit_ops {
    uint32_t size,    /**< sizeof the table at build time (mcpg_ops_header) */
             version; /**< 1 */
    /** Mandatory: record one event (see above). */
    mcpg_status (*emit)(void *instance, mcpg_call *call, const mcpg_audit_event *event);
    /** Optional: write out anything buffered (shutdown); may block briefly. */
    void (*flush)(void *instance);
} mcpg_audit_ops;

/** @struct mcpg_coordinator_ops
 * The coordinator's ops: fleet state.
 *
 * Each op is called on the loop thread of the `w` it is given (unsubscribe:
 * any loop thread). Its callback runs exactly once on w's loop thread, never
 * inside the op: on a later turn, in the order that loop made its ops. An op
 * that returns < 0 never calls its callback and changed nothing: MCPG_EINVAL
 * (bad arguments), MCPG_ERANGE (a key, value or message over the store's
 * limits), MCPG_ESTATE (not on w's loop, or w stopping: a loop's ops are
 * refused from its worker_stop on), MCPG_ENOMEM; subscribe also MCPG_EAGAIN
 * (too many subscriptions). Every other outcome is the callback's status: 0,
 * MCPG_ENOENT, MCPG_EEXIST, MCPG_ECONFLICT (these two with the current value
 * and revision when the store can give them), MCPG_EAGAIN (the store is
 * full), MCPG_EINVAL/MCPG_ERANGE (incr on a non-integer / overflow),
 * MCPG_EUNAVAIL or MCPG_ETIMEDOUT (a remote store), MCPG_ENOMEM. value is
 * never NULL; value->data is borrowed for the callback, or NULL.
 * Revisions strictly increase per key, also across delete and re-create.
 * ttl_ms 0 = no expiry; a key past its TTL is absent to every op at once. put
 * and compare_and_set set the expiry anew; put_if_absent sets it on the key
 * it creates; incr sets it only when it creates the key (absent or expired
 * counts from 0) and keeps an existing key's expiry (fixed windows). */
/** What a coordinator op's callback gets (see mcpg_coordinator_ops). */
typedef struct mcpg_coord_value {
    uint32_t size;      /**< sizeof(mcpg_coord_value) as the coordinator knows it */
    const char *data;   /**< borrowed for the callback */
    size_t len;         /**< data's length */
    uint64_t revision;  /**< for compare-and-set */
    int64_t number;     /**< incr result */
} mcpg_coord_value;

/** A coordinator op's callback: once, on w's loop thread, with the status
 * and the value (never NULL; see mcpg_coordinator_ops). */
typedef void (*mcpg_coord_cb)(void *arg, int status, const mcpg_coord_value *value);
/** A subscription's callback: one message, subject and data borrowed for
 * the call, on the subscriber's loop thread. */
typedef void (*mcpg_coord_msg_cb)(void *arg, const char *subject, const char *data, size_t len);
typedef struct mcpg_coord_sub mcpg_coord_sub; /**< a subscription, the coordinator's; ended by unsubscribe */

/** The fleet's news: a resource change that one replica learns for all of
 * them (a resource webhook, a watched resource's poll) is one message on
 * this subject of the gateway's coordinator, lines "u <uri>"
 * (notifications/resources/updated) and "l" (resources/list_changed);
 * every loop of every replica subscribes and tells its own listeners, so
 * each subscriber hears it once. Lines of another kind are skipped. */
#define MCPG_FLEET_NEWS_SUBJECT "mcpg.news.resources"

/** The coordinator's ops table; what each op does and answers is above. */
typedef struct mcpg_coordinator_ops {
    uint32_t size,    /**< sizeof the table at build time (mcpg_ops_header) */
             version; /**< 1 */
    /** 0 with data, revision and number (the value as a decimal int64, else
     * 0); MCPG_ENOENT */
    int (*get)(void *instance, mcpg_worker *w, const char *key, size_t klen,
               mcpg_coord_cb cb, void *arg);
    /** 0 with the new revision */
    int (*put)(void *instance, mcpg_worker *w, const char *key, size_t klen,
               const char *val, size_t vlen, uint64_t ttl_ms, mcpg_coord_cb cb, void *arg);
    /** 0 with number = the result, and the revision */
    int (*incr)(void *instance, mcpg_worker *w, const char *key, size_t klen,
                int64_t delta, uint64_t ttl_ms, mcpg_coord_cb cb, void *arg);
    /** status MCPG_EEXIST when the key is present */
    int (*put_if_absent)(void *instance, mcpg_worker *w, const char *key, size_t klen,
                         const char *val, size_t vlen, uint64_t ttl_ms,
                         mcpg_coord_cb cb, void *arg);
    /** status MCPG_ECONFLICT when the key's revision is not expected_revision;
     * expected_revision 0 means the key must be absent */
    int (*compare_and_set)(void *instance, mcpg_worker *w, const char *key, size_t klen,
                           uint64_t expected_revision, const char *val, size_t vlen,
                           uint64_t ttl_ms, mcpg_coord_cb cb, void *arg);
    /** 0 with the revision it had; MCPG_ENOENT */
    int (*del)(void *instance, mcpg_worker *w, const char *key, size_t klen,
               mcpg_coord_cb cb, void *arg);
    /** each_cb(arg, 0, v) once per live key (v->data = the key, v->revision),
     * then cb once with the status and number = keys reported; not a
     * snapshot */
    int (*scan_prefix)(void *instance, mcpg_worker *w, const char *prefix, size_t plen,
                       mcpg_coord_cb each_cb, mcpg_coord_cb cb, void *arg);
    /** 0 with number = subscribers reached, when the store knows it */
    int (*publish)(void *instance, mcpg_worker *w, const char *subject,
                   const char *data, size_t len, mcpg_coord_cb cb, void *arg);
    /** messages arrive on w's loop until unsubscribe, each publisher's in its
     * order; subject and data borrowed for the callback; `*` (one token) and a
     * trailing `>` (the rest) are wildcards; a bounded store may drop for a
     * slow subscriber (and says so in its log). *sub_out set on success */
    int (*subscribe)(void *instance, mcpg_worker *w, const char *subject,
                     mcpg_coord_msg_cb cb, void *arg, mcpg_coord_sub **sub_out);
    /** on the subscriber's loop (also inside its callback) no callback runs
     * after it returns */
    void (*unsubscribe)(void *instance, mcpg_coord_sub *sub);
    /** @name ABI 1.3 (MCPG_HAS(ops, rate_take)) */
    /** @{ */
    /** A rate limit's one atomic step (GCRA). The key holds "paid-until", a
     * time in microseconds as a decimal int64 (absent: long past). With
     * t = max(paid_until, now_us), a call fits when
     * t + interval_us - now_us <= burst_us (burst_us = burst x interval):
     * then the store keeps t + interval_us (expiring once that time has
     * passed) and answers 0 with number = the new paid-until; else it changes
     * nothing and answers MCPG_EAGAIN with number = the earliest now_us at
     * which one call fits (t + interval_us - burst_us). now_us is the
     * caller's clock (host->wall_us), used as given: replicas sharing a key
     * should keep their clocks close. EINVAL: interval_us or burst_us < 1,
     * or a value that is not an integer. */
    int (*rate_take)(void *instance, mcpg_worker *w, const char *key, size_t klen,
                     int64_t now_us, int64_t interval_us, int64_t burst_us,
                     mcpg_coord_cb cb, void *arg);
    /** @} */
} mcpg_coordinator_ops;

/** The events module's ops: the MCP Events pipeline.
 * A manifest has at most one events instance (its top-level "events"
 * section). Its ops run on the call's loop thread, inline (they must not
 * block), without the backend deadline: an events/stream call stays
 * pending for as long as its client holds it, sending its events with
 * host->call_notify. */
typedef struct mcpg_events_ops {
    uint32_t size,    /**< sizeof the table at build time (mcpg_ops_header) */
             version; /**< 1 */
    /** Mandatory. POST /webhooks/events/{source}: the body is call_params
     * (raw bytes, not checked as JSON), the headers call_header; no stage
     * ran before it. Answer with call_result and call_set_http (202), or
     * call_error + call_set_http (400, 401, 403, 404, 413, 503): the
     * transport answers the result's JSON, or {"error": message}, with that
     * status. */
    mcpg_status (*webhook)(void *instance, mcpg_call *call, const char *source);
    /** Mandatory. events/list, events/poll, events/stream, events/subscribe,
     * events/unsubscribe (host->call_method), after identity and policy. */
    mcpg_status (*request)(void *instance, mcpg_call *call);
    /** @name ABI 1.5 */
    /** @{ */
    /** Optional: the client went away while a request or webhook op is
     * pending (an events/stream closed): as mcpg_backend_ops.cancel. The
     * call must still be resumed. On the call's loop. */
    void (*cancel)(void *instance, mcpg_call *call);
    /** @} */
} mcpg_events_ops;

/** A backend's ops: where tools, resources and prompts live.
 * List ops are synchronous and answer from the backend's memory: append a JSON
 * array of its items to `out` (e.g. [{"name":"echo",...}]). A backend that
 * learns its lists asynchronously (an upstream server) caches them, sets
 * MCPG_MOD_DYNAMIC_LISTS and calls host->lists_changed when they change: the
 * kernel then calls its list ops again from its control thread, so they must
 * be thread-safe. The kernel may call list ops after create() and before
 * start().
 * ABI 1.8: such a backend whose first lists have not come yet (its upstream
 * has not answered) answers its list ops MCPG_EAGAIN: the kernel leaves it
 * out of the merged lists without a warning and counts it as still waiting
 * for its first lists (host->backends_waiting: GET /readyz says "starting")
 * until a rebuild after its lists_changed finds its list ops answering.
 * Call ops answer CONTINUE with the result set (host->call_result or
 * call_result_buf), DENY with call_error, or PENDING. */
typedef struct mcpg_backend_ops {
    uint32_t size,    /**< sizeof the table at build time (mcpg_ops_header) */
             version; /**< 1 */
    int (*list_tools)(void *instance, mcpg_buf *out);             /**< mandatory */
    mcpg_status (*call_tool)(void *instance, mcpg_call *call);    /**< mandatory */
    int (*list_resources)(void *instance, mcpg_buf *out);          /**< optional: resources/list */
    int (*list_resource_templates)(void *instance, mcpg_buf *out); /**< optional: resources/templates/list */
    mcpg_status (*read_resource)(void *instance, mcpg_call *call); /**< optional: resources/read */
    int (*list_prompts)(void *instance, mcpg_buf *out);            /**< optional: prompts/list */
    mcpg_status (*get_prompt)(void *instance, mcpg_call *call);    /**< optional: prompts/get */
    mcpg_status (*complete)(void *instance, mcpg_call *call);      /**< optional: completion/complete */
    /** Optional: the client went away (a closed connection or stream, a
     * cancelled request). Called on the call's loop thread, at most once per
     * call, and only while the backend's op is pending: it returned PENDING
     * and has not resumed yet (on either dispatch mode). The call must still
     * be resumed, usually with DENY. An op that is still running on a pool
     * thread when the client leaves is not called here: it sees
     * host->call_cancelled(call). A backend resuming from another thread may
     * see cancel run while it resumes: after its resume it must not touch
     * the call, and cancel must not either once it knows it resumed. */
    void (*cancel)(void *instance, mcpg_call *call);
    /** @name ABI 1.1 */
    /** @{ */
    /** Optional: the first client subscribed to one of its resources (on 1),
     * or the last one left (on 0); on a loop thread. A backend that learns of
     * changes by itself (an upstream's own subscription) starts or stops
     * watching; it reports changes with host->resource_updated either way. */
    void (*subscribe)(void *instance, const char *uri, int on);
    /** Optional: tasks/get, tasks/result, tasks/cancel, tasks/update for a task
     * this backend created (host->call_method says which; call_target is the
     * task id without its "<instance>." head); answers like call_tool. A
     * backend that creates tasks mints their ids as "<its instance
     * name>.<rest>" (host->instance_name) and answers the creating call with
     * call_set_result_type(MCPG_RESULT_TASK). */
    mcpg_status (*task)(void *instance, mcpg_call *call);
    /** Optional: tasks/list (legacy wire): append a JSON array of the calling
     * client's Task objects, synchronously, from memory. */
    int (*list_tasks)(void *instance, mcpg_call *call, mcpg_buf *out);
    /** @} */
} mcpg_backend_ops;

/** A metrics exporter's ops.
 * A manifest has at most one metrics instance; while it exists the
 * transport serves GET /metrics from it (host->metrics_render). It reads
 * the registry with host->metrics_each. */
typedef struct mcpg_metrics_ops {
    uint32_t size,    /**< sizeof the table at build time (mcpg_ops_header) */
             version; /**< 1 */
    /** Mandatory. Append the exposition for GET /metrics to out; on a loop
     * thread, must not block. 0 or an error (the transport answers 500). */
    int (*render)(void *instance, mcpg_buf *out);
    /** @name ABI 1.4 */
    /** @{ */
    /** Optional: the media type of what render appends (borrowed for the
     * instance's life); without it "text/plain; version=0.0.4; charset=utf-8". */
    const char *(*content_type)(void *instance);
    /** @} */
} mcpg_metrics_ops;

/** ABI 1.10: a telemetry exporter's ops (the spans: mcpg/trace.h).
 * A manifest has at most one telemetry instance; while it exists the
 * kernel samples requests by its policy and hands it each sampled
 * request's spans. */
typedef struct mcpg_telemetry_ops {
    uint32_t size,    /**< sizeof the table at build time (mcpg_ops_header) */
             version; /**< 1 */
    /** Mandatory. One answered request's spans, n of them, the server span
     * first: on the request's loop thread, as it is answered. Everything is
     * borrowed until it returns: copy what is kept. Must not block (queue
     * the spans for a thread of the module's own, and drop them when the
     * queue is full). */
    void (*export_spans)(void *instance, const mcpg_span *const *spans, size_t n);
    /** Optional. What to sample and record, asked once when the generation
     * is built (after create): fill what differs from the defaults the
     * kernel set (ratio 1, no flags). */
    void (*policy)(void *instance, mcpg_trace_policy *out);
} mcpg_telemetry_ops;

#endif
