/** @file
 * mcpg ABI: what a module exports.
 *
 * A module is one shared object exporting exactly one symbol, MCPG_ENTRY_SYMBOL.
 * The kernel calls it with its own ABI version; the module returns a pointer to a
 * const descriptor that lives as long as the image is mapped.
 *
 * Compatibility (checked by the kernel before anything else is read):
 *   magic == MCPG_MODULE_MAGIC, abi_major == kernel major, abi_minor <= kernel
 *   minor, and every sized table at least its ABI 1.0 size: the descriptor
 *   (MCPG_MODULE_SIZE_1_0), the lifecycle table (MCPG_LIFECYCLE_OPS_SIZE_1_0),
 *   the kind's ops table (MCPG_<KIND>_OPS_SIZE_1_0 in sizes.h) and each config
 *   schema entry (MCPG_CONFIG_FIELD_SIZE_1_0). A 1.0 size ends at the table's
 *   last mandatory 1.0 slot, so it never changes: a table built against older
 *   headers is accepted, however much the struct has grown since.
 *
 * Changelog (each minor only adds; the slots are read through MCPG_HAS or
 * MCPG_HOST_HAS, so a module built against an older minor keeps loading):
 *   1.0  the descriptor, lifecycle and per-kind ops tables, the host table
 *        (loops, timers, the pool, logging, call submit), config schemas.
 *   1.1  a call's messages before its outcome (host->call_notify,
 *        call_request, reply_submit), result types, a call's session,
 *        capabilities and version, list and resource news (transport news
 *        op, host->lists_changed, resource_updated, resource_subscribe),
 *        every MCP method routed, tasks (methods, backend task ops,
 *        host->tasks_offered), host->coordinator, MCPG_MOD_DYNAMIC_LISTS.
 *   1.2  peer address and TLS facts (mcpg_tls_info), identities with roles
 *        and claims (mcpg_identity, host->call_identify and the role and
 *        claim readers), the client's name, 401 challenges, audit event
 *        fields (roles, peer, denying stage, traceparent), gateway_id,
 *        redact_json, the `reloaded` lifecycle op.
 *   1.3  the coordinator's rate_take (one atomic GCRA step).
 *   1.4  the metrics registry (mcpg/metrics.h, host->metric_*,
 *        metrics_each, metrics_render), the metrics ops' content_type.
 *   1.5  the MCP Events extension: the events methods and error codes, the
 *        events ops' cancel, host->webhook_submit and events_offered.
 *   1.6  legacy sessions bound to who opened them (host->call_owner,
 *        mcpg_call_desc.session_owner, MCPG_RPC_SESSION_NOT_FOUND).
 *   1.7  what the bindings serve (host->offers), listen_address,
 *        protected_resource (host and identity op), call_challenge.
 *   1.8  readiness (host->backends_waiting, list ops' MCPG_EAGAIN) and the
 *        transport's end_streams op for the reload's retirement.
 *   1.9  MCPG_MOD_NEVER_BLOCKS (a backend dispatched inline unless its
 *        manifest entry says "inline_dispatch": false) and
 *        host->call_audited (the access log's "auto").
 *   1.10 request traces: MCPG_KIND_TELEMETRY (mcpg_telemetry_ops, the
 *        spans in mcpg/trace.h), host->call_trace_upstream and
 *        call_trace_upstream_end (a backend's upstream request as a
 *        client span).
 *   1.11 upstream credentials: mcpg_identity.bearer (the token an
 *        identity module verified) and host->call_bearer.
 *   1.12 virtual servers: host->server_find, host->server_offers,
 *        mcpg_call_desc.server and mcpg_audit_event.server.
 * What the gateway gained with each minor: CHANGES.md. What a minor and a
 * major may change, and how long a major is kept: docs/compatibility.md.
 *
 * Growth: structs grow only at their end; enums are append-only; no `#ifdef`
 * changes a struct in this directory. A slot past a table's 1.0 size, and
 * any optional op, is read only through MCPG_HAS(table, slot), which looks at
 * the table's own `size` first: the kernel does so with a module's tables,
 * and a module built against newer headers with the kernel's.
 *
 * Documentation: every public declaration in these headers carries a doxygen
 * comment (a block before it, or a trailing one after a member or value);
 * the test docs_sdk_reference fails on one that has none, and
 * `make sdk-reference` renders them.
 */
#ifndef MCPG_MODULE_H
#define MCPG_MODULE_H

#include <stddef.h>
#include <stdint.h>

/** The ABI major these headers describe: the kernel loads only modules of its own major. */
#define MCPG_ABI_MAJOR 1
/** The ABI minor these headers describe: the kernel loads modules of this minor or older. */
#define MCPG_ABI_MINOR 12
#define MCPG_MODULE_MAGIC 0x6d637067u /**< "mcpg" */
#define MCPG_ENTRY_SYMBOL "mcpg_module_entry" /**< the one symbol a module exports (see mcpg_module_entry_fn) */

/** Module kinds. Append only. */
typedef enum mcpg_kind {
    MCPG_KIND_TRANSPORT = 1, /**< owns connections and the wire (mcpg_transport_ops) */
    MCPG_KIND_IDENTITY = 2, /**< who is calling (mcpg_identity_ops) */
    MCPG_KIND_POLICY = 3, /**< may this principal do this (mcpg_policy_ops) */
    MCPG_KIND_LIMITS = 4, /**< concurrency caps, rates, budgets (mcpg_limits_ops) */
    MCPG_KIND_AUDIT = 5, /**< an audit sink (mcpg_audit_ops) */
    MCPG_KIND_COORDINATOR = 6, /**< fleet state (mcpg_coordinator_ops) */
    MCPG_KIND_EVENTS = 7, /**< the MCP Events pipeline (mcpg_events_ops) */
    MCPG_KIND_BACKEND = 8, /**< tools, resources and prompts (mcpg_backend_ops) */
    MCPG_KIND_METRICS = 9, /**< a metrics exporter (mcpg_metrics_ops) */
    MCPG_KIND_TELEMETRY = 10 /**< ABI 1.10: a span exporter (mcpg_telemetry_ops) */
} mcpg_kind;

/** Module flags (mcpg_module.flags). Append only. */
#define MCPG_MOD_INLINE_SAFE   (1ull << 0) /**< backend may run on the loop thread (inline_dispatch) */
#define MCPG_MOD_OWNS_THREADS  (1ull << 1) /**< starts threads in start(), joins them in stop() */
#define MCPG_MOD_DURABLE       (1ull << 2) /**< audit sink: its "done" means the event is on disk */
/** ABI 1.1: a backend whose lists change while it serves (an upstream it
 * learns them from): it reports changes with host->lists_changed, and the
 * kernel rebuilds the merged lists from its list ops then (from its control
 * thread: list ops must be thread-safe). A name of its that a binding cannot
 * show, or that another backend already offers, is logged and left out
 * rather than refused as a manifest error; a rename or description for a
 * name it does not offer (yet) is no error either. */
#define MCPG_MOD_DYNAMIC_LISTS (1ull << 3)
/** ABI 1.9: a backend whose call ops never block the calling thread (they
 * answer at once, or queue the work for threads of their own, a timer or a
 * non-blocking client and answer MCPG_PENDING). Such a backend runs on the
 * loop thread unless its manifest entry says "inline_dispatch": false; one
 * without it runs on the pool unless the entry says true. Requires
 * MCPG_MOD_INLINE_SAFE and kind backend: the loader refuses it otherwise. A
 * kernel older than 1.9 ignores the bit (the backend runs on the pool). */
#define MCPG_MOD_NEVER_BLOCKS  (1ull << 4)

/* ---- declarative configuration ---------------------------------------- */

/** Types of a config field. The kernel parses the manifest's "config" object
 * against the module's table, reports every error with its key path, fills a
 * zeroed struct of config_size bytes at the declared offsets and hands it to
 * create(). Append only. */
typedef enum mcpg_config_type {
    MCPG_CFG_BOOL = 1,   /**< int at offset: 0 or 1 */
    MCPG_CFG_INT = 2,    /**< int64_t at offset; min/max checked */
    MCPG_CFG_DOUBLE = 3, /**< double at offset; min/max checked */
    MCPG_CFG_STRING = 4, /**< const char * at offset; kernel-owned, lives as long as the instance */
    MCPG_CFG_JSON = 5,   /**< const char * at offset: the value re-serialised as compact JSON
                            text (kernel-owned); the module validates it in validate() */
    MCPG_CFG_ENUM = 6    /**< const char * at offset; must be one of the '|'-separated
                            words in enum_values */
} mcpg_config_type;

#define MCPG_CFG_REQUIRED (1u << 0) /**< the key must be present */

/** One schema entry. A schema is an array of them ended by MCPG_CONFIG_END;
 * write the entries with the SDK's MCPG_CFG_*_FIELD macros, which fill
 * `size`. The array grows like every ABI struct, at the end of each entry:
 * readers step from one entry to the next by the entry's own `size`
 * (mcpg_config_first/next below), never by their sizeof, so a schema built
 * against older or newer headers is read at its own stride. */
typedef struct mcpg_config_field {
    const char *key;           /**< e.g. "latency_ms"; must fit [a-z0-9_]+; NULL ends the table */
    uint32_t type;             /**< mcpg_config_type */
    uint32_t flags;            /**< MCPG_CFG_REQUIRED */
    size_t offset;             /**< offsetof(the module's config struct, field) */
    const char *default_json;  /**< default as JSON text ("0", "true", "\"x\""), or NULL */
    int64_t min,               /**< INT only: the inclusive lower bound, checked when min < max */
            max;               /**< INT only: the inclusive upper bound */
    const char *enum_values;   /**< MCPG_CFG_ENUM only: "a|b|c" */
    const char *help;          /**< one line for `mcpg --help-module` */
    uint32_t size;             /**< sizeof(mcpg_config_field) at build time: the stride */
    uint32_t reserved;         /**< 0 */
    double dmin,               /**< DOUBLE only: the inclusive lower bound, checked when dmin < dmax */
           dmax;               /**< DOUBLE only: the inclusive upper bound */
} mcpg_config_field;

/** A table ends with an entry whose key is NULL. */
#define MCPG_CONFIG_END { .key = NULL, .size = (uint32_t)sizeof(mcpg_config_field) }

/* ---- lifecycle, common to every kind ---------------------------------- */

typedef struct mcpg_host mcpg_host; /**< the host services table (mcpg/host.h) */
struct mcpg_worker; /**< one event loop thread: mcpg_worker in call.h */
typedef struct mcpg_instance mcpg_instance; /**< the kernel's handle for one configured instance */
typedef struct mcpg_report mcpg_report;     /**< where validate() reports errors */

/** What every module kind implements: validate, create, start, stop,
 * destroy (and, from ABI 1.2, reloaded). At least
 * MCPG_LIFECYCLE_OPS_SIZE_1_0 bytes. */
typedef struct mcpg_lifecycle_ops {
    uint32_t size;    /**< sizeof(mcpg_lifecycle_ops) at build time */
    uint32_t version; /**< 1 */

    /** Optional. Deeper checks than the schema can express. Runs at --check and
     * before any instance of a new generation is created; must not start
     * anything. Report each problem with host->report_error(rep, "key.path",
     * fmt, ...). Returns 0 when valid, MCPG_ECONFIG otherwise. */
    int (*validate)(const mcpg_host *host, const void *config, mcpg_report *rep);

    /** Mandatory. Build an instance. `host` and `self` are borrowed for the
     * instance's whole life; `config` is borrowed for the instance's life too.
     * On success *instance_out is the module's state pointer, passed back to
     * every op. Must not start threads (start does) or timers (worker_start
     * does). */
    int (*create)(const mcpg_host *host, mcpg_instance *self, const void *config,
                  void **instance_out);

    /** Optional. Called once the whole generation is built, before it serves.
     * May start threads (declare MCPG_MOD_OWNS_THREADS). It runs on the main
     * thread, where timers cannot start: per-loop timers begin in
     * worker_start. A failure refuses the generation. */
    int (*start)(void *instance);

    /** Optional. The generation has drained: no call will enter this instance
     * again. Flush, join threads, cancel what is pending. After stop returns,
     * the module makes no more host calls for this instance. */
    void (*stop)(void *instance);

    /** Mandatory. Free everything create() made. It runs after stop() and
     * after every loop the instance used has ended, so handles still open on
     * those loops can be freed without closing them. */
    void (*destroy)(void *instance);

    /** Optional. On each worker's loop thread, once, after start() and before
     * that loop serves: set up what the instance keeps per loop (connections,
     * host timers on w). */
    void (*worker_start)(void *instance, struct mcpg_worker *w);

    /** Optional. On each worker's loop thread, once that loop has drained and
     * before stop(): close what the instance keeps on w (handles, host
     * timers). The loop ends after it returns; stop() itself runs on the main
     * thread, where no loop-thread slot may be used. */
    void (*worker_stop)(void *instance, struct mcpg_worker *w);

    /** @name ABI 1.2 */
    /** @{ */
    /** Optional. A reload published a generation that carried this instance
     * over unchanged (same module image, same config): on the control (main)
     * thread, once that generation serves. Re-read what the config names
     * outside the manifest (a keys file, certificates) and swap it in; keep
     * what it had when the new copy is bad, and log why. Must not block for
     * long: the next reload waits for it. */
    void (*reloaded)(void *instance);
    /** @} */
} mcpg_lifecycle_ops;

/* ---- the descriptor ----------------------------------------------------- */

/** The module's descriptor, what MCPG_ENTRY_SYMBOL returns: const, alive as
 * long as the image is mapped. MCPG_MODULE_DEFINE (mcpg/sdk.h) fills it. */
typedef struct mcpg_module {
    uint32_t magic;               /**< MCPG_MODULE_MAGIC: checked first */
    uint16_t abi_major,           /**< the ABI major of the headers it was compiled against */
             abi_minor;           /**< and their minor */
    uint32_t size;                /**< sizeof(mcpg_module) at build time */
    uint32_t kind;                /**< mcpg_kind */
    const char *name;             /**< "backend_mock"; matches the file name */
    const char *version;          /**< the module's own version, free form */
    const char *build_id;         /**< unique per build, for logs and --help-module (the
                                     runtime copy is named by the file's content hash) */
    const char *description;      /**< one line */
    uint64_t flags;               /**< MCPG_MOD_* */
    const mcpg_config_field *config; /**< schema, ended by MCPG_CONFIG_END; NULL = no keys */
    uint32_t config_size;         /**< size of the config struct the kernel fills */
    uint32_t reserved0;           /**< 0 */
    const mcpg_lifecycle_ops *lifecycle; /**< mandatory */
    const void *ops;              /**< the kind's table (mcpg_<kind>_ops), starts {size, version} */
} mcpg_module;

/** The type of MCPG_ENTRY_SYMBOL: called once by the kernel with its own ABI
 * version (host_abi_major, host_abi_minor) right after loading the image; a
 * module built against a newer minor can see here which slots the kernel
 * has. Returns the descriptor, or NULL to refuse to load. */
typedef const mcpg_module *(*mcpg_module_entry_fn)(uint16_t host_abi_major,
                                                   uint16_t host_abi_minor);

/** Every mcpg ops table begins with this header. */
typedef struct mcpg_ops_header {
    uint32_t size;    /**< sizeof the table as the module was built: what MCPG_HAS reads */
    uint32_t version; /**< the table's own version, 1; the kernel does not read it */
} mcpg_ops_header;

/** True when the table `tbl` (any ABI struct with a uint32_t size: the
 * descriptor, an ops table, a config schema entry, the host table, a call
 * desc or outcome) is large enough to hold `slot` and, for a pointer slot, the slot
 * is set. This is the one way to ask: a table built against older headers
 * ends earlier, and reading past its size reads whatever follows it.
 *   if (MCPG_HAS(ops, cancel)) ops->cancel(state, call);
 * The slot's own bytes are read only after the size says they exist. */
#define MCPG_HAS_FIELD(tbl, slot) \
    ((size_t)((const char *)&(tbl)->slot - (const char *)(tbl)) + sizeof((tbl)->slot) <= \
     (size_t)(tbl)->size)
/** True when MCPG_HAS_FIELD(tbl, slot) and the slot is set (not NULL, not
 * 0): the test for an optional op or a slot a later minor added. */
#define MCPG_HAS(tbl, slot) (MCPG_HAS_FIELD(tbl, slot) && (tbl)->slot)

/* ---- ABI 1.0 sizes -------------------------------------------------------
 * The least `size` the kernel accepts for each table: the end of its last
 * mandatory ABI 1.0 slot. Each is written from the 1.0 slots' types alone, so
 * appending a slot cannot move it, and pinned to the live struct, so
 * inserting or retyping a 1.0 slot does not compile. The kinds' ops tables
 * have theirs in sizes.h. */

#ifdef __cplusplus
#define MCPG__STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#define MCPG__ALIGNOF(type) alignof(type)
#else
#define MCPG__STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#define MCPG__ALIGNOF(type) _Alignof(type)
#endif
#define MCPG__ALIGN_UP(n, a) (((n) + (a) - 1) / (a) * (a))

/** size_1_0 is where slot `last` of `type` ends. */
#define MCPG__PIN_1_0(size_1_0, type, last)                                          \
    MCPG__STATIC_ASSERT((size_1_0) == offsetof(type, last) + sizeof(((type *)0)->last), \
                        #type " changed before its last ABI 1.0 slot " #last           \
                        " (structs grow only at their end)")

/** The ABI 1.0 size of mcpg_module, through its members magic, abi_major+abi_minor, size, kind; name, version, build_id,
 * description; flags; config; config_size, reserved0; lifecycle, ops */
#define MCPG_MODULE_SIZE_1_0 \
    (6 * sizeof(uint32_t) + 7 * sizeof(const void *) + sizeof(uint64_t))
MCPG__PIN_1_0(MCPG_MODULE_SIZE_1_0, mcpg_module, ops);

/** The ABI 1.0 size of mcpg_lifecycle_ops, through {size, version}; validate, create, start, stop, destroy */
#define MCPG_LIFECYCLE_OPS_SIZE_1_0 (2 * sizeof(uint32_t) + 5 * sizeof(void (*)(void)))
MCPG__PIN_1_0(MCPG_LIFECYCLE_OPS_SIZE_1_0, mcpg_lifecycle_ops, destroy);

/** The ABI 1.0 size of mcpg_config_field, through its members key, type, flags, offset, default_json; min (int64_t-aligned, which 32-bit
 * ARM pads for), max, enum_values, help, size, reserved, dmin, dmax */
#define MCPG_CONFIG_FIELD_SIZE_1_0                                                      \
    (MCPG__ALIGN_UP(2 * sizeof(const char *) + 2 * sizeof(uint32_t) + sizeof(size_t), \
                    MCPG__ALIGNOF(int64_t)) +                                           \
     2 * sizeof(int64_t) + 2 * sizeof(const char *) + 2 * sizeof(uint32_t) +            \
     2 * sizeof(double))
MCPG__PIN_1_0(MCPG_CONFIG_FIELD_SIZE_1_0, mcpg_config_field, dmax);

/** Walk a schema, entry by entry:
 *   for (const mcpg_config_field *f = mcpg_config_first(schema); f; f = mcpg_config_next(f))
 * Each step is the entry's own `size`. The walk ends at MCPG_CONFIG_END, and
 * early at an entry smaller than ABI 1.0's, which mcpg_module_check refuses. */
static inline const mcpg_config_field *mcpg_config_first(const mcpg_config_field *f) {
    return f && f->key && f->size >= MCPG_CONFIG_FIELD_SIZE_1_0 ? f : NULL;
}
/** The schema entry after f, or NULL at the end (see mcpg_config_first). */
static inline const mcpg_config_field *mcpg_config_next(const mcpg_config_field *f) {
    return mcpg_config_first((const mcpg_config_field *)(const void *)((const char *)f + f->size));
}

#endif
