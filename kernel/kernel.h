/* mcpg kernel: internal declarations shared by the kernel's files.
 * Nothing here crosses the ABI; modules see only the abi/mcpg headers. */
#ifndef MCPG_KERNEL_H
#define MCPG_KERNEL_H

#include <mcpg/abi.h>
#include <mcpg/sdk.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#ifndef MCPG_VERSION
#define MCPG_VERSION "0.0.0-unknown" /* CMake passes the project version */
#endif
#define MCPG_MAX_WORKERS 256

/* ---- errors collected while reading a manifest ---- */
typedef struct errlist {
    char **lines; /* "FILE: path: message" */
    size_t count, cap;
} errlist;
void errlist_add(errlist *e, const char *file, const char *path, const char *fmt, ...)
    MCPG_PRINTF(4, 5);
void errlist_print(const errlist *e);
void errlist_free(errlist *e);

/* ---- logging ---- */
void klog_init(int level);
int klog_level(void);
void klog(int level, const char *src, const char *fmt, ...) MCPG_PRINTF(3, 4);
void klog_v(int level, const char *src, const char *fmt, va_list ap) MCPG_PRINTF(3, 0);
/* klog about what the manifest says at key (a path such as "gateway.listen[0]"). */
void klog_at(int level, const char *src, const char *key, const char *fmt, ...)
    MCPG_PRINTF(4, 5);
/* The manifest key a log line's source ("kernel", "[kind:module:instance]") is
 * about, into out. */
typedef void (*klog_key_fn)(const void *ctx, const char *src, char *out, size_t cap);
/* --check: from now on warnings and errors logged come out as
 * "FILE: key: warning: what" (or "error:") lines on stderr, the key from
 * klog_at or key_of(ctx, src); info and debug lines are dropped. */
void klog_check_mode(const char *file, klog_key_fn key_of, const void *ctx);

/* ---- loader: one dlopen'd copy of one module file ---- */
typedef struct image {
    char *name;      /* module name == file stem */
    char *src_path;  /* where it was found */
    char *run_path;  /* the private copy that was dlopen'd */
    char sha256[65]; /* of the copy's bytes, lowercase hex */
    void *dl;
    const mcpg_module *desc;
    unsigned users;  /* declarations and instances using it */
    struct image *next; /* every image loaded (loader.c) */
} image;
/* Load <dir>/<name>.so through a private copy in runtime_dir. On failure
 * returns NULL and writes one line ("FILE: what is wrong") into err. With a
 * pin (64 lowercase hex digits, or NULL) a copy whose SHA-256 differs is
 * refused before dlopen: *pin_refused is set and err says what was found. */
image *image_load(const char *dir, const char *name, const char *runtime_dir, const char *pin,
                  bool *pin_refused, char *err, size_t errcap);
/* The SHA-256 of the file at path as lowercase hex: 0, or -1 with errno. */
int file_sha256(const char *path, char sha256_hex[65]);
/* true when pin is NULL or equals found; else false with err saying
 * 'module "NAME" file /abs/path has sha256 FOUND, the manifest pins PIN'. */
bool image_pin_matches(const char *name, const char *src_path, const char *found,
                       const char *pin, char *err, size_t errcap);
/* dlclose and prove the image unmapped: true when it stays mapped (pinned). */
bool image_unload(image *im);
/* The descriptor of an image dlopen'd from file, checked as a load checks
 * it (the entry symbol, the ABI, the tables, the name matching stem); NULL
 * with one line ("FILE: what is wrong") in err. */
const mcpg_module *module_descriptor(void *dl, const char *file, const char *stem, char *err,
                                     size_t errcap);
const char *kind_name(uint32_t kind);

/* ---- the crash line (crash.c) ---- */
/* Log a fatal signal with the module image (or library) and offset it is in;
 * crash.txt in runtime_dir keeps the line and, with it, the folder's copies. */
void crash_init(const char *runtime_dir);
/* An alternate signal stack for the calling thread (each thread the kernel
 * starts), so the handler runs even when the thread's stack overflowed. */
void crash_thread_init(void);
void crash_thread_end(void);
/* The loader's part: where an image is mapped, and which instances use it. */
void crash_image_loaded(const image *im);
void crash_image_unloaded(const image *im);
void crash_image_used_by(const image *im, const char *instance);
/* Remove the runtime folders (in base) of gateways that are no longer running. */
void runtime_dirs_sweep(const char *base);
/* mcpg --help-module NAME: 0, or 2 when the module cannot be loaded;
 * "gateway" and "cluster" print the gateway's own settings */
int module_help(const char *name, const char *exe_dir);
/* mcpg modules [--module-dir DIR] [--config FILE] [--json]: what the module
 * folder holds; 0, or 2 when the folder cannot be read */
int modules_command(int argc, char **argv, const char *exe_dir);

/* ---- manifest ---- */
enum { STAGE_IDENTITY, STAGE_POLICY, STAGE_LIMITS, STAGE_AUDIT, STAGE_COUNT };

typedef struct decl_instance {
    char *name;
    char *module;
    char *config_json; /* compact JSON text of "config", or NULL */
    char *sha256;      /* the module file's pinned SHA-256 (64 lowercase hex), or NULL */
    const char *section; /* a top-level section that declared it ("events"), or NULL
                            for one of "modules": the key path of its errors */
    int inline_choice;    /* "inline_dispatch" as written: 1 true, 0 false, -1 no key */
    bool inline_dispatch; /* the effective choice: the key, else the module's NEVER_BLOCKS */
    bool lists_later;  /* "wait_for_lists": false: GET /readyz does not wait for its first lists */
    int64_t timeout_ms;
    image *image;      /* resolved while checking */
    void *config;      /* parsed config struct (config_size bytes) */
} decl_instance;

typedef struct name_pairs {
    char **from, **to;
    size_t n;
} name_pairs;

typedef struct decl_binding {
    char *backend;
    char *prefix;
    char *separator;
    char **allow; size_t n_allow;
    char **deny; size_t n_deny;
    char **allow_resources; size_t n_allow_resources; /* uris and uriTemplates */
    char **deny_resources; size_t n_deny_resources;
    name_pairs rename;       /* the backend's tool/prompt name → what clients see (before the prefix) */
    name_pairs describe;     /* the backend's tool/prompt name → the description clients see */
    bool watch;              /* "watch": the gateway polls its resources (kernel/watch.c) */
    int64_t watch_interval_ms;
    char **watch_uris; size_t n_watch_uris; /* none given: every resource it lists */
    char *pins_name;         /* "pins": warn|hide|block|off, or NULL (gateway.pins.on_change) */
    int pins_mode;           /* ... as a PINS_* (PINS_UNSET when not given) */
} decl_binding;

/* A virtual server (manifest "servers"): its own path, bindings and
 * pipeline; the gateway's own /mcp is the top level's (kernel/servers.c). */
typedef struct decl_server {
    char *name;              /* ^[a-z0-9][a-z0-9_-]{0,63}$ */
    char *path;              /* "/mcp/<name>" unless set */
    char *host;              /* served only for this Host name, or NULL */
    char *instructions;      /* or NULL */
    char *info_json;         /* server_info as compact JSON, or NULL */
    decl_binding *bindings; size_t n_bindings;
    bool default_bindings;   /* "bindings" absent: one per backend */
    bool own_pipeline;       /* "pipeline" given; else the top level's */
    char **stage[STAGE_COUNT]; size_t n_stage[STAGE_COUNT];
} decl_server;

/* ---- redaction (redact.c) ---- */
typedef struct redactor redactor;
enum { AUDIT_ARGS_REDACTED, AUDIT_ARGS_HASHED, AUDIT_ARGS_OMITTED };
/* gateway.redact and gateway.audit compiled; problems to errs. Never NULL. */
struct json_t;
redactor *redactor_compile(struct json_t *redact, struct json_t *audit, const char *file,
                           errlist *errs);
void redactor_free(redactor *r);
int redactor_args_mode(const redactor *r);
bool redactor_results(const redactor *r);
/* json redacted by r's rules, appended to out: 0, MCPG_EPROTO (not JSON:
 * nothing appended), MCPG_ENOMEM. */
int redact_json(const redactor *r, const char *json, size_t len, mcpg_buf *out);
/* redact_json for text already validated (a span the judge checked). */
int redact_json_valid(const redactor *r, const char *json, size_t len, mcpg_buf *out);
/* {"sha256":"<hex of json>"} appended to out. */
int redact_hash(const char *json, size_t len, mcpg_buf *out);

typedef struct manifest {
    char *path;
    char *dir;               /* the manifest's folder */
    char *name;
    char *id;                /* gateway.id: in audit events (default: the host name) */
    int anonymous;           /* gateway.anonymous: a call no identity module took is served */
    redactor *redact;        /* gateway.redact and gateway.audit */
    char **listen; size_t n_listen;
    int64_t workers;
    char *module_dir;
    char *cluster_kind;      /* cluster.kind: single_node, nats, redis */
    char *cluster_path;      /* cluster.path: the default coordinator's journal, or NULL */
    char *runtime_dir;
    char *log_level_name;    /* gateway.log_level as written ... */
    int log_level;           /* ... and as its MCPG_LOG_* */
    char *secret_env;        /* gateway.secret_env: the variable holding the fleet's secret */
    char *pins_file;         /* gateway.pins.file, made absolute; NULL: no pins */
    char *pins_on_change_name; /* gateway.pins.on_change as written ... */
    int pins_on_change;      /* ... as a PINS_* */
    /* gateway's lists and objects as compact JSON text, for the code that
     * reads each (kernel/settings.c) */
    struct { char *listen, *audit, *redact, *pool, *watch, *metrics, *pins; } json;
    int64_t drain_timeout_ms;
    int64_t reload_drain_ms; /* how long a replaced transport's streams may run on */
    int64_t request_state_ttl_ms; /* how long a requestState a client is shown stays good */
    int64_t max_calls_per_worker;
    int64_t pool_threads, pool_queue;
    int64_t list_page_size;  /* items per page of a merged list */
    int64_t watch_shards;    /* gateway.watch: shards of the watched resources ... */
    int64_t watch_lease_ms;  /* ... each polled by one replica under a lease this long */
    int64_t metrics_max_tools; /* gateway.metrics.max_tools: tool names with series of their own */
    decl_instance transport; /* gateway.server is its config */
    decl_instance *instances; size_t n_instances;
    char **stage[STAGE_COUNT]; size_t n_stage[STAGE_COUNT];
    decl_binding *bindings; size_t n_bindings;
    bool default_bindings;   /* "bindings" absent: one per backend */
    decl_server *servers; size_t n_servers; /* "servers": the virtual servers */
    int refs;                /* its loader's, and each generation built from it */
    bool borrowed_runtime_dir; /* a reload's: the folder stays when it goes */
} manifest;

/* ---- the gateway's own settings (kernel/settings.c) ----
 * gateway.* and cluster as mcpg_config_field tables whose offsets are the
 * manifest's: the module config's parser fills the manifest from them. */
typedef struct settings_section {
    const char *path;                /* "gateway", "gateway.pool", "cluster" */
    const mcpg_config_field *fields;
    size_t text_offset;              /* nested: where its parent's table put its JSON text */
} settings_section;
extern const settings_section settings_sections[]; /* ended by a NULL path */
/* A problem at path ("gateway.pool.threads"); message says what is wrong. */
typedef void (*settings_err_fn)(void *ctx, const char *path, const char *message);
/* Fill m from root's object top ("gateway" or "cluster") and the objects
 * nested in it: defaults for what is absent; each problem to err. */
struct json_t;
void settings_parse(manifest *m, struct json_t *root, const char *top, settings_err_fn err,
                    void *ctx);
/* Free every string the settings tables wrote into m. */
void settings_free(manifest *m);

/* Read, expand, parse and fully validate FILE (loading the modules it names
 * into runtime_dir). Every problem goes to errs; returns NULL if any. */
manifest *manifest_load(const char *path, const char *listen_override, const char *exe_dir,
                        errlist *errs);
/* The first half of manifest_load on text already read (path names it in
 * errors and anchors relative folders): expanded, parsed, every key
 * checked; no module is loaded and no folder made, so nothing is checked
 * against a module's schema. NULL with errs when any problem. The fuzzer's
 * entry point (tests/fuzz/fuzz_manifest.c). */
manifest *manifest_parse(const char *path, const char *text, const char *exe_dir, errlist *errs);
/* The folder the gateway loads modules from for the manifest at path (NULL:
 * no manifest, the default beside the binary in exe_dir), without loading
 * any; NULL with errs grown when the manifest cannot be read (errs is not
 * used without one). */
char *manifest_module_dir(const char *path, const char *exe_dir, errlist *errs);
/* gateway.pins.file of the manifest at path, made absolute; NULL with errs
 * (the manifest is not valid, or sets none). */
char *manifest_pins_file(const char *path, const char *exe_dir, errlist *errs);
int pins_command(int argc, char **argv, const char *exe_dir); /* mcpg pins diff|approve */
/* "https" when the transport's config (gateway.server) names a certificate,
 * else "http": for the log lines that say where the gateway listens. */
const char *manifest_scheme(const manifest *m);
/* Let go of a manifest (its loader's reference, or a generation's): the
 * last one frees it. */
void manifest_free(manifest *m);
/* A reload reads its manifest into the folder the running gateway already
 * copies its modules to (NULL: a fresh one, as at start). */
void manifest_use_runtime_dir(const char *dir);
/* The key an instance's config is written at, by the instance's name
 * ("modules[2].config", "gateway.server", "events", "cluster"; "(root)" when
 * m declares no such instance): what its errors and warnings name. */
void manifest_config_key(const manifest *m, const char *name, char *out, size_t cap);
/* ${VAR} / ${VAR:-default} expansion of one string whose errors name the key
 * path (NULL + errs on an unset variable, a bad name, a missing "}");
 * expand_env is the same with the path "(root)". */
char *expand_env_at(const char *text, const char *file, const char *path, errlist *errs);
char *expand_env(const char *text, const char *file, errlist *errs);
/* Every string value of the parsed manifest, in place (not the top-level
 * "description"); -1 when any reference failed (each error once, at its key). */
struct json_t;
int expand_env_json(struct json_t *root, const char *file, errlist *errs);

/* ---- instances and generations ---- */
struct mcpg_instance {
    char *name;
    char *config_json;      /* as the manifest gave it: what a reload compares */
    image *image;
    const mcpg_module *desc;
    void *config;
    void *state;            /* what create() returned */
    char stamp[160];        /* "[kind:module:instance]" */
    bool inline_dispatch;
    uint64_t timeout_ms;
    uint32_t slot;          /* 1 + its index in the manifest that made it (messages) */
    int refs;               /* generations holding it: a reload carries it over */
    bool started;
    atomic_int live_timers;
    atomic_int work_in_flight;  /* work_submit'ed, done() not yet run */
    struct generation *gen;     /* the newest generation holding it */
    atomic_uint lists_told;     /* MCPG_LIST_* bits it told, not yet applied to the
                                   serving generation's lists (news.c) */
    uint64_t unlisted_since_ms; /* control thread (ready.c): first seen without its first
                                   lists, 0 while it has them; when to say so next; */
    uint64_t unlisted_log_ms;
    bool unlisted_warned;       /* ... and whether it was said */
};
/* Its index in g's instances (a call's slot), or -1 when g does not hold it. */
int generation_slot_of(const struct generation *g, const mcpg_instance *inst);
/* A loud warning for each listen address beyond loopback when g has no
 * identity stage. */
void generation_warn_open(const struct generation *g, char **listen, size_t n_listen);

/* Where a name a client uses goes: a tool or prompt by its client name, a
 * resource by its uri, a template by its uriTemplate. */
typedef struct route {
    char *client_name;      /* what clients call */
    char *target;           /* the backend's own name */
    mcpg_instance *backend;
    uint32_t tool_series;   /* a tool's index in mcpg_tool_calls_total (metrics_tool_index) */
    bool held;              /* its definition differs from its pin: not listed, calls refused */
    mcpg_param_headers params; /* a tool's x-mcp-header annotations, read once at the
                                  build (the call path never parses a schema) */
} route;

/* ---- pinned definitions (kernel/pins.c) ---- */
enum { PINS_UNSET, PINS_OFF, PINS_WARN, PINS_HIDE, PINS_BLOCK };
struct json_t;
struct stat;
typedef struct pins pins;
/* A definition that differs from its pin (or has none), noticed at a build. */
typedef struct pin_notice {
    char *backend, *name;    /* the instance, and the item's name as the backend lists it */
    int kind;                /* CAT_TOOLS, CAT_PROMPTS, CAT_TEMPLATES */
    int mode;                /* what the binding does about it: PINS_WARN, _HIDE, _BLOCK */
    char pinned[65], seen[65]; /* hashes; pinned "" when there is no pin */
    struct json_t *diff;     /* ["~ /description: ... -> ...", ...] */
    bool fresh;              /* not noticed by the build before: announce it */
    bool announced;          /* pins_announce told the log, the metrics and the audit */
} pin_notice;
const char *pins_kind_key(int kind); /* "tools", "prompts", "resourceTemplates"; else NULL */
const char *pins_kind_noun(int kind); /* "tool", "prompt", "resource template" */
/* The members of a listed item a pin covers, or NULL (not an object). */
struct json_t *pins_definition(int kind, const char *item, size_t n);
char *pins_canonical(const struct json_t *def); /* sorted, compact; free() it */
int pins_hash(const struct json_t *def, char hex[65]); /* SHA-256 of the canonical text */
/* The pins file; a missing file is an empty one. NULL with err on a problem. */
pins *pins_load(const char *path, char *err, size_t cap);
void pins_free(pins *p);
/* The pinned hash of an item, or NULL (*definition: the pinned one, when kept). */
const char *pins_find(const pins *p, const char *backend, int kind, const char *name,
                      const struct json_t **definition);
bool pins_file_changed(const pins *p, const char *path);
/* A pins or seen document: read (a missing file: empty), made, filled, written
 * atomically (a temporary file renamed over it). */
struct json_t *pins_read_doc(const char *path, struct stat *st, char *err, size_t cap);
struct json_t *pins_doc_new(void);
const struct json_t *pins_entry(const struct json_t *doc, const char *backend, int kind,
                                const char *name);
void pins_doc_put(struct json_t *doc, const char *backend, int kind, const char *name,
                  const char *hex, const struct json_t *definition);
int pins_write_doc(const char *path, const struct json_t *doc);
void pins_seen_path(const char *file, char *out, size_t cap);
struct json_t *pins_diff(const struct json_t *old_def, const struct json_t *new_def);
int pins_mode_of(const char *name); /* warn|hide|block|off as a PINS_*, else -1 */
/* One listed item against its pin (and, when seen is not NULL, recorded in
 * it): 0 with *out (pins_look_done after), -1 when it cannot be read. */
typedef struct pin_look {
    bool same;               /* pinned, with the same hash */
    char pinned[65], seen[65];
    struct json_t *def;      /* what it is now */
    const struct json_t *old_def; /* what was approved, when the pins file keeps it */
} pin_look;
int pins_look(const pins *p, struct json_t *seen, const char *backend, int kind,
              const char *name, const char *item, size_t n, pin_look *out);
void pins_look_done(pin_look *l);
/* What a build saw, to <pins file>.seen when it changed (not under --check). */
void pins_seen_write(const char *pins_file, const struct json_t *seen);
void pins_seen_off(void);
struct generation;
/* The notices of g's current lists not yet announced: a log line, the
 * metrics, and an audit event to every sink (mcpg.pin.changed, or
 * mcpg.pin.unpinned for an item without a pin). On the control loop, once
 * the sinks run. */
void pins_announce(struct generation *g);
/* Reads the pins file again when it changes (mcpg pins approve) and
 * rebuilds the lists: a timer on the control loop. */
void pins_control_init(uv_loop_t *loop);
pins *pins_from_text(const char *text, char *err, size_t cap); /* a document as text */
bool pins_same(const pins *a, const pins *b);
int pins_write(const pins *p, const char *path); /* the pins as a pins file (pins_write_doc) */
void pins_took_file(pins *p, const char *path); /* p is what path now holds */
/* Pins on a fleet (kernel/pins_fleet.c): the coordinator's key mcpg.pins. */
void pins_fleet_control_init(uv_loop_t *loop);
void pins_fleet_adopt(mcpg_worker *w, struct generation *g); /* loop 0, as watch_adopt */
void pins_fleet_stop(mcpg_worker *w);                          /* loop 0, as it stops */
void pins_fleet_start(void);       /* control loop, once serving: the file, unless the fleet has pins */
void pins_fleet_publish(const char *pins_file, bool if_absent); /* control loop */
void pins_fleet_free(void);        /* after the loops end */

/* What the backends offer, of one kind, merged (kernel/catalog.c). */
enum { CAT_TOOLS, CAT_PROMPTS, CAT_RESOURCES, CAT_TEMPLATES, CAT_COUNT };
typedef struct cat_span {
    size_t off, len;        /* its text in the catalog's list */
    char *name;             /* the client's name for it (policy's visible()) */
} cat_span;
typedef struct catalog {
    route *routes; size_t n_routes; /* sorted by client_name (templates: listed order) */
    mcpg_buf list;                  /* the merged items: [{...},{...}] */
    cat_span *items; size_t n_items, items_cap; /* each item's place in list */
    mcpg_buf answer;                /* the whole list as one answer: {"tools":[...]} */
} catalog;

/* The four merged lists of one moment. A generation's catalogs are
 * rebuilt when a backend says its lists changed and published with one
 * pointer swap; each call pins the set it was routed by (refs), so its
 * route stays valid however often the lists change while it runs. */
typedef struct catset {
    catalog *cat;      /* CAT_COUNT per server of the generation, /mcp's first */
    uint32_t n_servers;
    char **server_names; /* each server's name ("" for /mcp): a rebuild finds its own */
    /* The warnings this build gave about items it left out, sorted: the
     * next build logs only those not here (catalog.c, warn_left_out). */
    char **warned; size_t n_warned, cap_warned;
    uint64_t version;  /* 1 for the generation's first */
    atomic_long refs;  /* the generation's pointer holds one, each call one */
    struct json_t *seen; /* what this build saw of pinned kinds (pins.c), or NULL: no pins */
    pin_notice *notices; size_t n_notices; /* definitions that differ from their pins */
    signed char *blocked; /* per instance: 0 not yet known, 1 a definition differs, -1 none */
    bool *unlisted;    /* per instance of the generation: its list ops answered "not
                          yet" (MCPG_EAGAIN) at this build: no first lists here */
} catset;

/* One server of a generation: index 0 is the gateway's own /mcp (the top
 * level's bindings and pipeline), then each of the manifest's servers. */
typedef struct gen_server {
    const char *name;             /* "" for /mcp */
    const decl_server *decl;      /* NULL for /mcp */
    const decl_binding *bindings; size_t n_bindings;
    bool default_bindings;
    mcpg_instance **stage[STAGE_COUNT]; size_t n_stage[STAGE_COUNT];
    uint32_t metric_series;       /* in mcpg_server_calls_total; METRICS_SERVER_NONE for /mcp */
} gen_server;

typedef struct generation {
    uint32_t id;
    mcpg_instance **instances; size_t n_instances; /* every instance, transport first */
    bool *carried;                /* per instance: taken over from the generation before */
    const char *failed; int failed_rc; /* the instance whose start failed, and why */
    mcpg_instance *transport;
    mcpg_instance **stage[STAGE_COUNT]; size_t n_stage[STAGE_COUNT]; /* /mcp's */
    gen_server *servers; uint32_t n_servers; /* /mcp first, then the virtual servers */
    _Atomic(catset *) cats;       /* the current merged lists (catalog_acquire) */
    manifest *m;                  /* the bindings, for rebuilds; outlives the generation */
    route *task_backends; size_t n_task_backends; /* backends with a `task` op, by instance name */
    mcpg_instance *coordinator;   /* the gateway's (host->coordinator), or NULL */
    mcpg_instance *metrics;       /* the one metrics instance (GET /metrics), or NULL */
    mcpg_instance *telemetry;     /* the one telemetry instance (request spans), or NULL */
    double trace_ratio;           /* its policy: the share of root requests traced */
    uint32_t trace_flags;         /* and MCPG_TRACE_* */
    struct pins *pins;            /* gateway.pins.file as read (control loop only), or NULL */
    route events;                 /* events methods and event webhooks: .backend the events
                                     instance, NULL when the manifest has none */
    atomic_long refs;
} generation;

/* Build the generation's first catalogs. Problems with a static backend's
 * names are manifest errors; a backend whose lists change at run time
 * (MCPG_MOD_DYNAMIC_LISTS) has its bad names logged and skipped. */
void catalog_build(generation *g, manifest *m, errlist *errs);
/* Rebuild from what the backends list now and publish it (any thread but
 * one at a time: the control loop). Every problem is logged, none fatal. */
void catalog_rebuild(generation *g);
void catalog_free(generation *g);
/* Pin the current set (one atomic add), and let it go. */
catset *catalog_acquire(generation *g);
void catalog_release(catset *cs);
/* The lists of server s (an index of the generation's servers). */
static inline const catalog *catset_lists(const catset *cs, uint32_t s) {
    return &cs->cat[(size_t)s * CAT_COUNT];
}
const route *catalog_find(const catalog *lists, int kind, const char *name, size_t len);
/* A resource's route: its exact uri, else the first template that matches. */
const route *catalog_find_resource(const catalog *lists, const char *uri, size_t len);
/* In any server's lists (news and subscriptions, which name no server). */
const route *catalog_find_resource_any(const catset *cs, const char *uri, size_t len);
/* One page of a merged list into out (cursor NULL: the first). MCPG_EINVAL
 * for a cursor this list never gave. */
/* 1 when the item (kind: "tool", "prompt", "resource", "resource_template")
 * is shown to the caller. */
typedef int (*catalog_keep_fn)(void *arg, const char *kind, const char *name);
int catalog_page(const catalog *lists, int kind, const char *cursor, size_t cursor_len,
                 size_t page, catalog_keep_fn keep, void *arg, mcpg_buf *out);
const char *catalog_answer_key(int kind); /* "tools", "resourceTemplates", ... */
/* ---- custom headers (param_headers.c) ---- */
/* A tool's annotations from its listed item: true with *out (empty when it
 * has none); false when one is invalid, with why: the catalog leaves the
 * tool out and warns (once while it stays so). */
bool param_headers_of_tool(const mcpg_json_span *item, mcpg_param_headers *out, char *why,
                           size_t why_cap);
/* Each annotated argument of args[0..n) against its Mcp-Param header, read
 * with header(ctx, lname, &len): 0, or the first failure's MCPG_PARAM_* with
 * a message naming the header in msg. */
typedef const char *(*param_header_fn)(void *ctx, const char *lname, size_t *len);
int param_headers_verdict(const mcpg_param_headers *ph, const char *args, size_t n,
                          param_header_fn header, void *ctx, char *msg, size_t cap);

/* The backend that offers tasks (its `task` op) named instance[0..n). */
const route *catalog_find_task_backend(const generation *g, const char *instance, size_t n);

/* ---- virtual servers (servers.c) ---- */
/* g->servers from its manifest (once its instances exist). */
void servers_fill(generation *g, manifest *m);
void servers_free(generation *g);
/* The server named name[0..n) (NULL or n 0: /mcp), or NULL: g has none. */
const gen_server *server_named(const generation *g, const char *name, size_t n, uint32_t *index);
/* Does server s route calls to the backend? */
bool server_binds(const gen_server *s, const mcpg_instance *backend);
int host_server_find(mcpg_worker *w, const char *path, size_t n, const char *host, size_t hn,
                     mcpg_server_view *out);
uint32_t host_server_offers(mcpg_worker *w, const char *name, size_t n);

/* The generation this thread is creating instances of, else NULL. */
const generation *generation_building(void);
generation *generation_build(manifest *m, errlist *errs);
/* A reload's: instances of `old` that m describes unchanged are carried over. */
generation *generation_build_from(manifest *m, const generation *old, errlist *errs);
int generation_start(generation *g);
void generation_stop(generation *g);
void generation_stop_kind(generation *g, uint32_t kind);
/* Stop the instances a failed reload started (not those it carried over). */
void generation_stop_fresh(generation *g);
void generation_free(generation *g);

/* ---- workers ---- */
typedef struct worker worker;
typedef struct call_freelist { struct mcpg_call *head; size_t count; } call_freelist;

struct mcpg_worker {
    uint32_t index;
    uv_loop_t loop;
    uv_thread_t thread;
    uv_async_t wake;
    _Atomic(mcpg_post *) posts; /* other threads' posts, newest first; POSTS_CLOSED once stopped */
    bool stopped;            /* no more posts accepted (set and read on the loop) */
    atomic_int senders;      /* posters between their check of `posts` and uv_async_send */
    struct listener *listeners[16]; size_t n_listen; /* this loop's sockets, one per address */
    uv_timer_t accept_timer; /* listeners paused after EMFILE and the like */
    uv_tcp_t fd_reserve;     /* made and closed at start: see reserve_loop_fd() */
    generation *gen;         /* current generation for new calls */
    call_freelist freelist;
    mcpg_call *live;         /* calls handed out and not yet recycled */
    atomic_long calls_in_flight;
    atomic_int drained;      /* set by the worker once idle after drain */
    bool draining;
    uv_timer_t drain_timer;
    mcpg_call *pool_deadlines; /* calls whose backend is on the pool, for their timeouts */
    uv_timer_t pool_deadline_timer;
    uv_timer_t asks_timer;   /* housekeeping: unanswered requests to clients, memory */
    uint32_t housekeeping_ticks;
    struct pool_job *jobs_head, *jobs_tail; /* to hand to the pool this turn */
    struct module_work *works; /* host->work_submit'ed here, done() not yet run (loop only) */
    uv_check_t jobs_flush;
    uv_idle_t jobs_awake;    /* keeps the poll from blocking while jobs wait */
    mcpg_post *local_head, *local_tail; /* posts made on this loop: no wake-up needed */
    uv_check_t local_flush;
    uv_idle_t local_awake;
};

typedef struct kernel_state {
    manifest *m;
    generation *gen;
    mcpg_worker *workers; uint32_t n_workers;
    atomic_uint_fast64_t audit_seq;
    atomic_bool draining;
    atomic_ulong pinned_images;  /* images still mapped after their dlclose */
    uint64_t max_calls_per_worker;
    uint64_t list_page_size;   /* items per page of a merged list (0: 500) */
} kernel_state;

extern kernel_state kernel; /* the one kernel of this process (the kernel is not a module) */

int workers_bind(manifest *m, errlist *errs);
/* A reload with other listen addresses: every loop's sockets for `listen`
 * (those already open kept), opened now on the control thread. A busy
 * address fails it with an error, nothing changed; else each loop takes
 * them when it adopts the new generation (workers_listen_apply). */
int workers_listen_prepare(char **listen, size_t n, errlist *errs, const char *file);
void workers_listen_apply(mcpg_worker *w);
void workers_listen_abandon(void);
void workers_listen_done(void);
int workers_start(void);
void workers_drain(void);
bool workers_idle(void);
void workers_stop(void); /* end the loops; then pool_stop, generation_stop, workers_free */
void workers_free(void);
mcpg_worker *worker_self(void);
int worker_post(mcpg_worker *w, mcpg_post *node);

/* ---- the worker pool ---- */
typedef struct pool_job {
    struct pool_job *next;
    void (*run)(struct pool_job *job);     /* on a pool thread */
    uint64_t enqueued_us;
    uint64_t timeout_us;                   /* 0 = none */
    void (*expired)(struct pool_job *job); /* on a pool thread, instead of run */
    void (*refused)(struct pool_job *job); /* on the loop: the queue was full */
} pool_job;
int pool_start(unsigned threads, unsigned queue_max);
int pool_submit(pool_job *job); /* MCPG_EAGAIN when full */
pool_job *pool_submit_many(pool_job *head); /* returns the jobs that did not fit */
/* Queue a job from w's loop; the loop hands its jobs to the pool in one batch
 * at the end of its turn, and calls job->refused for those that do not fit. */
void worker_defer_job(mcpg_worker *w, struct pool_job *job);
/* Lets running jobs finish, expires those still queued (no loop is left to
 * take their answers), joins every thread; later submits are refused. */
void pool_stop(void);
/* Take a job out of the queue before a thread starts it: true when it was
 * still queued (it will then never run nor expire). */
bool pool_cancel(pool_job *job);
unsigned pool_stop_within(uint64_t wait_ms); /* threads still running after wait_ms */
unsigned pool_queued(void); /* jobs waiting in the queue now */
unsigned pool_busy(void);   /* threads running a job now */

/* ---- calls and the pipeline ---- */
int call_submit(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **out);
/* ---- resource watches (watch.c) and the fleet's news (news.c), on loop 0 ---- */
void watch_adopt(mcpg_worker *w, generation *g);
void watch_stop(mcpg_worker *w);
/* After the loops have ended: ops a coordinator never answered. */
void watch_free_left(void);
/* A resource changed, told once for the whole fleet: every replica's subscribers hear it. */
void news_fleet_resource_updated(mcpg_worker *w, const char *uri, size_t len);

/* The gateway's own call: straight to the backend (see call.c). */
int call_submit_internal(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **out);
void call_cancel(mcpg_call *c);
void call_outcome(mcpg_call *c, mcpg_call_outcome *o);
void call_release(mcpg_call *c);
void calls_free_worker(mcpg_worker *w);
/* The free list cut to what the calls in flight could use (once a second,
 * on w's loop); returns how many call objects were freed. */
#define CALL_FREELIST_FLOOR 16
#define CALL_GIVE_BACK_MIN 64
size_t calls_give_back(mcpg_worker *w);
void calls_give_up_backends(mcpg_worker *w); /* the forced drain: answer calls without their backend */
/* A retiring generation's gateway.reload_drain_ms passed (reload.c): w's
 * calls on g still unanswered are ended as the drain ends them, `why` in a
 * backend's error; returns how many. On w's loop. */
unsigned long calls_end_generation(mcpg_worker *w, generation *g, const char *why);
void calls_free_abandoned(mcpg_worker *w); /* after the loops and the pool ended */
unsigned long calls_dropped(void); /* answers that came back after their loop stopped */

/* ---- host table slots implemented in call.c, dispatch.c and manifest.c ---- */
void host_call_resume(mcpg_call *c, mcpg_status st);
mcpg_worker *host_call_worker(mcpg_call *c);
uint32_t host_call_method(mcpg_call *c);
uint32_t host_call_wire(mcpg_call *c);
const char *host_call_target(mcpg_call *c);
const char *host_call_args(mcpg_call *c, size_t *len);
const char *host_call_params(mcpg_call *c, size_t *len);
const char *host_call_id(mcpg_call *c, size_t *len);
const char *host_call_header(mcpg_call *c, const char *lname, size_t *len);
void **host_call_slot(mcpg_call *c, mcpg_instance *self);
int host_call_set_identity(mcpg_call *c, const char *p, const char *t, const char *r);
const char *host_call_principal(mcpg_call *c);
const char *host_call_tenant(mcpg_call *c);
const char *host_call_owner(mcpg_call *c, size_t *len);
/* task_seal.c: the task key from a secret (gateway.secret_env), else random once. */
void task_seal_configure(const char *secret, size_t n);
const char *host_call_roles(mcpg_call *c);
int host_call_identify(mcpg_call *c, const mcpg_identity *id);
uint32_t host_call_role_count(mcpg_call *c);
const char *host_call_role(mcpg_call *c, uint32_t i);
int host_call_has_role(mcpg_call *c, const char *role);
const char *host_call_claims(mcpg_call *c, size_t *len);
const char *host_call_auth_method(mcpg_call *c);
const char *host_call_peer(mcpg_call *c, size_t *len);
const mcpg_tls_info *host_call_tls(mcpg_call *c);
const char *host_call_client_name(mcpg_call *c);
int host_call_set_challenge(mcpg_call *c, const char *value);
int host_call_result(mcpg_call *c, const char *json, size_t len);
mcpg_buf *host_call_result_buf(mcpg_call *c);
int host_call_error(mcpg_call *c, int64_t code, const char *message, const char *data_json);
void host_call_set_http(mcpg_call *c, int http_status, uint32_t retry_after_s);
int host_call_cancelled(mcpg_call *c);
void host_report_error(mcpg_report *rep, const char *key_path, const char *fmt, ...)
    MCPG_PRINTF(3, 4);
/* ABI 1.1 (call.c, messages.c, news.c) */
void host_call_set_result_type(mcpg_call *c, uint32_t type);
const char *host_call_session(mcpg_call *c, size_t *len);
const char *host_call_client_capabilities(mcpg_call *c, size_t *len);
const char *host_call_protocol_version(mcpg_call *c, size_t *len);
int host_call_notify(mcpg_call *c, const char *method, const char *params, size_t plen);
int host_call_request(mcpg_call *c, const char *method, const char *params, size_t plen,
                      uint64_t timeout_ms, mcpg_reply_fn fn, void *arg);
/* call_request's two halves, each checking the handle, apart so that a
 * test can answer the call in between: the ask registered (*seq_out), then
 * its request sent (host_call_request runs both on one check). */
int msgs_ask_open(mcpg_call *c, const char *method, const char *params, size_t plen,
                  uint64_t timeout_ms, mcpg_reply_fn fn, void *arg, uint64_t *seq_out);
int msgs_ask_send(mcpg_call *c, uint64_t seq, const char *method, const char *params,
                  size_t plen);
int host_reply_submit(mcpg_worker *w, const char *session, size_t slen, const char *body,
                      size_t len);
void host_lists_changed(mcpg_instance *self, uint32_t lists);
/* The control loop that rebuilds merged lists when a backend's change */
void news_control_init(uv_loop_t *loop);
/* On the control loop, once every loop serves g: what g's backends told
 * while it was built is applied to its lists, and listeners are told each
 * kind of list told or that differs between old's merged lists and g's. */
void news_reload_published(generation *old, generation *g);
void news_rebuild_and_tell(generation *g); /* lists built again (pins), changes told */
/* Readiness (ready.c): the backends still without their first lists, for
 * GET /readyz, and a log line for each that stays so. */
void ready_control_init(uv_loop_t *loop);
int host_backends_waiting(mcpg_worker *w, mcpg_buf *out);
/* On the control loop: READY=1 to the service manager the first time no
 * backend is waiting (sd_notify.h). */
void ready_tell_manager(void);
void host_resource_updated(mcpg_instance *self, const char *uri, size_t len);
int host_resource_subscribe(mcpg_worker *w, const char *uri, size_t len, int on);
const mcpg_coordinator_ops *host_coordinator(void **instance_out);
int host_tasks_offered(void);
int host_events_offered(void);
uint32_t host_offers(void);
const char *host_listen_address(size_t i);
int host_protected_resource(mcpg_buf *out);
const char *host_call_challenge(mcpg_call *call);
int host_call_audited(mcpg_call *call);
int host_call_bearer(mcpg_call *call, const char **token, size_t *token_len, const char **claims,
                     size_t *claims_len);
/* trace.c: request spans (ABI 1.10) */
void trace_policy_load(generation *g); /* g->telemetry and its policy, once built */
uint32_t host_call_trace_upstream(mcpg_call *call, const char *name, char *tp, size_t cap);
void host_call_trace_upstream_end(mcpg_call *call, uint32_t span, int status, const char *error);
int host_webhook_submit(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **out);

/* ---- reload (kernel/reload.c), on the control loop ---- */
typedef void (*reload_done_fn)(void *arg, int http_status, const char *json, size_t len);
void reload_init(uv_loop_t *loop, const char *exe_dir, const char *listen_override);
/* SIGHUP: reload, logging the outcome. */
void reload_on_signal(void);
int host_reload(mcpg_worker *w, reload_done_fn done, void *arg);
/* Retiring generations still waiting (the stop waits for none): their
 * instances stopped, after the loops and the pool; then freed, after the
 * workers (whose calls cut short point at them). */
void reload_shutdown(void);
void reload_free(void);
void reload_worker_stopping(mcpg_worker *w);
void asks_expire(mcpg_worker *w); /* requests to clients past their deadline (messages.c) */
void asks_free(mcpg_worker *w);


/* ---- metrics (kernel/metrics.c): the registry and the kernel's series ---- */
enum { CALL_OK, CALL_ERROR, CALL_DENIED, CALL_FAILED, CALL_OUTCOMES };
#define METRICS_METHODS 16       /* mcpg_method values counted by name (the rest: "other") */
#define METRICS_WIRES 2          /* stateless, legacy */
#define METRICS_MAX_TOOLS_DEFAULT 1000 /* gateway.metrics.max_tools unset */
#define METRICS_MAX_TOOLS_LIMIT 16384  /* its largest value: cells are made for every one */
#define METRICS_TOOL_UNKNOWN 0   /* a tools/call naming no tool the gateway offers */
#define METRICS_TOOL_OTHER 1     /* a tool name past gateway.metrics.max_tools names */
#define METRICS_FIRST_TOOL 2
typedef struct kmetrics {
    mcpg_metric *calls, *tool_calls, *overhead, *backend, *pool_refused, *reloads;
    mcpg_metric *left_out; /* items the merged lists leave out, once each */
    mcpg_metric *pin_changes; /* definitions that differ from their pins, by action */
    mcpg_metric *pin_refused; /* calls refused: their item is held by its pin */
    mcpg_metric *server_calls; /* calls of each virtual server, by outcome */
} kmetrics;
extern kmetrics KM;
/* The registry with a row per loop, and the kernel's series. Before any
 * instance is created; metrics_shutdown after the last one is destroyed.
 * kernel.m's gateway.metrics.max_tools is read here (no kernel.m: the default). */
int metrics_init(uint32_t n_loops);
void metrics_shutdown(void);
void metrics_thread_row(int row);            /* a worker loop's thread: its row */
void metrics_forget(const mcpg_instance *inst); /* its families go (it is destroyed) */
/* A tool name's index (its series are made the first time): at catalog builds. */
uint32_t metrics_tool_index(const char *name);
void metrics_tools_free(void);
/* A virtual server's series in mcpg_server_calls_total (made the first time
 * its name is seen; METRICS_SERVER_NONE past METRICS_MAX_SERVERS names). */
#define METRICS_MAX_SERVERS 256
#define METRICS_SERVER_NONE UINT32_MAX
uint32_t metrics_server_index(const char *name);
struct mcpg_call;
void metrics_count_call(const struct mcpg_call *c); /* as it is answered, on its loop */
void metrics_count(mcpg_metric *m, uint32_t series, int64_t delta); /* any thread */
int host_metric_new(mcpg_instance *self, const mcpg_metric_desc *d, mcpg_metric **out);
void host_metric_add(mcpg_metric *m, uint32_t series, int64_t delta);
void host_metric_set(mcpg_metric *m, uint32_t series, int64_t v);
void host_metric_observe(mcpg_metric *m, uint32_t series, uint64_t v);
int host_metrics_each(void (*fn)(void *, const mcpg_metric_view *), void *arg);
int host_metrics_render(mcpg_worker *w, mcpg_buf *out, char *ct, size_t ct_cap);

extern const mcpg_host HOST;
uint64_t mono_us(void);
int64_t wall_us(void);
void instance_timers_cancel(mcpg_instance *inst);
/* On w's loop as it stops, after every worker_stop: timers modules left on
 * it are module bugs; they are logged, closed and freed. */
void timers_close_left(mcpg_worker *w);
/* On w's loop as it stops: module work still queued from w is taken off the
 * pool and its done() runs with MCPG_ECANCELED. */
void module_work_cancel_queued(mcpg_worker *w);
void module_work_free_left(mcpg_worker *w); /* once the pool's threads have ended */

#endif
