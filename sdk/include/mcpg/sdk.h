/** @file
 * mcpg SDK: what a module author includes.
 *
 * @code
 *   #include <mcpg/sdk.h>
 *   MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "backend_hello", "1.0.0",
 *       .description = "says hello", .flags = MCPG_MOD_INLINE_SAFE,
 *       .config = hello_config, .config_size = sizeof(hello_config_t),
 *       .lifecycle = &hello_lifecycle, .ops = &hello_ops);
 * @endcode
 *
 * Link the SDK library (libmcpg_sdk.a, position-independent): the JSON
 * scanner, buffers, error names and the config-schema parser. It carries no
 * kernel symbols; a module still links nothing from the kernel.
 */
#ifndef MCPG_SDK_H
#define MCPG_SDK_H

#include <stddef.h>
#include <stdint.h>
#include <mcpg/abi.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Exports a symbol from a module built with hidden visibility (the entry
 * MCPG_MODULE_DEFINE defines). */
#define MCPG_EXPORT __attribute__((visibility("default")))

#ifndef MCPG_BUILD_ID
/** The build stamp in mcpg_module.build_id (after name and version): the
 * compile date and time unless the build defines its own. */
#define MCPG_BUILD_ID __DATE__ " " __TIME__
#endif

/** Define the module's descriptor and its one exported entry symbol. The
 * designated initialisers after `version` fill the rest; fields added to the
 * descriptor later default to 0/NULL. */
#define MCPG_MODULE_DEFINE(kind_, name_, version_, ...)                              \
    static const mcpg_module mcpg__descriptor = {                                     \
        .magic = MCPG_MODULE_MAGIC,                                                   \
        .abi_major = MCPG_ABI_MAJOR,                                                  \
        .abi_minor = MCPG_ABI_MINOR,                                                  \
        .size = (uint32_t)sizeof(mcpg_module),                                        \
        .kind = (kind_),                                                              \
        .name = (name_),                                                              \
        .version = (version_),                                                        \
        .build_id = name_ " " version_ " " MCPG_BUILD_ID,                             \
        __VA_ARGS__};                                                                 \
    MCPG_EXPORT const mcpg_module *mcpg_module_entry(uint16_t host_abi_major,         \
                                                     uint16_t host_abi_minor) {       \
        (void)host_abi_major;                                                         \
        (void)host_abi_minor;                                                         \
        return &mcpg__descriptor;                                                     \
    }

/** The {size, version} head of an ops table. */
#define MCPG_OPS_HEAD(type) .size = (uint32_t)sizeof(type), .version = 1

/** Config schema entries. `def` is JSON text or NULL. INT bounds are
 * integers, DOUBLE bounds doubles (0.5, 2.5); a field is bounded when
 * lo < hi. Each entry records its own size, so the kernel reads the table at
 * the stride it was built with (see mcpg_config_field); fields added to the
 * entry later default to 0/NULL. */
#define MCPG__CFG(k_, t_, fl_, off_, def_, lo_, hi_, dlo_, dhi_, values_, help_)             \
    { .key = (k_), .type = (t_), .flags = (fl_), .offset = (off_), .default_json = (def_),  \
      .min = (lo_), .max = (hi_), .enum_values = (values_), .help = (help_),                 \
      .size = (uint32_t)sizeof(mcpg_config_field), .dmin = (dlo_), .dmax = (dhi_) }
/** A boolean key, into an int member f of the config struct st. */
#define MCPG_CFG_BOOL_FIELD(st, f, key, def, help) \
    MCPG__CFG(key, MCPG_CFG_BOOL, 0, offsetof(st, f), def, 0, 0, 0, 0, NULL, help)
/** An integer key, into an int64_t member f; bounded by lo..hi when lo < hi. */
#define MCPG_CFG_INT_FIELD(st, f, key, def, lo, hi, help) \
    MCPG__CFG(key, MCPG_CFG_INT, 0, offsetof(st, f), def, lo, hi, 0, 0, NULL, help)
/** A number key, into a double member f; bounded by lo..hi when lo < hi. */
#define MCPG_CFG_DOUBLE_FIELD(st, f, key, def, lo, hi, help) \
    MCPG__CFG(key, MCPG_CFG_DOUBLE, 0, offsetof(st, f), def, 0, 0, lo, hi, NULL, help)
/** A string key, into a const char * member f. */
#define MCPG_CFG_STRING_FIELD(st, f, key, def, help) \
    MCPG__CFG(key, MCPG_CFG_STRING, 0, offsetof(st, f), def, 0, 0, 0, 0, NULL, help)
/** A string key that must be present, into a const char * member f. */
#define MCPG_CFG_REQUIRED_STRING_FIELD(st, f, key, help)                                   \
    MCPG__CFG(key, MCPG_CFG_STRING, MCPG_CFG_REQUIRED, offsetof(st, f), NULL, 0, 0, 0, 0, NULL, \
              help)
/** Any JSON value, into a const char * member f as compact JSON text. */
#define MCPG_CFG_JSON_FIELD(st, f, key, def, help) \
    MCPG__CFG(key, MCPG_CFG_JSON, 0, offsetof(st, f), def, 0, 0, 0, 0, NULL, help)
/** One of the '|'-separated words of values, into a const char * member f. */
#define MCPG_CFG_ENUM_FIELD(st, f, key, def, values, help) \
    MCPG__CFG(key, MCPG_CFG_ENUM, 0, offsetof(st, f), def, 0, 0, 0, 0, values, help)

/** The longest name a client sees (tools, prompts, instances). */
#define MCPG_NAME_MAX 64
/** What every name a client sees must fit. */
#define MCPG_NAME_PATTERN "^[a-zA-Z0-9_-]{1,64}$"
/** 1 when s[0..n) fits MCPG_NAME_PATTERN, else 0. */
int mcpg_name_valid(const char *s, size_t n);
/** What a virtual server's name (manifest servers[].name) must fit. */
#define MCPG_SERVER_NAME_PATTERN "^[a-z0-9][a-z0-9_-]{0,63}$"
/** 1 when s[0..n) fits MCPG_SERVER_NAME_PATTERN, else 0. */
int mcpg_server_name_valid(const char *s, size_t n);
/** The length of the name in a Host header's value host[0..n), without its
 * ":port" ("[::1]:8080" keeps its brackets: 5). */
size_t mcpg_host_name_len(const char *host, size_t n);

/* ---- result builders (for backends; they write through the host table) ---- */
/** The call's result becomes
 *   {"content":[{"type":"text","text":"<text, JSON-escaped>"}]}
 * (with "isError":true when is_error: a tool that ran and failed). Returns
 * MCPG_CONTINUE, or MCPG_DENY with an internal error set if memory ran out,
 * so a backend can `return mcpg_result_text(...)`. */
mcpg_status mcpg_result_text(const mcpg_host *host, mcpg_call *call, const char *text,
                             size_t n, int is_error);
/** The call's result becomes the stateless
 * wire's InputRequiredResult (2026-07-28, SEP-2322):
 *   {"inputRequests":REQUESTS,"requestState":"STATE"}
 * (REQUESTS: requests_json; STATE: state, left out when NULL), typed
 * MCPG_RESULT_INPUT_REQUIRED through host->call_set_result_type; a host
 * without that slot (ABI 1.0) gets "resultType":"input_required" in the
 * object itself. requests_json is an object's text: {key: {method, params}}.
 * The client retries the same request with params.inputResponses (the same
 * keys) and the echoed requestState. MCPG_CONTINUE, or MCPG_DENY with an
 * internal error when memory ran out. */
mcpg_status mcpg_result_input_required(const mcpg_host *host, mcpg_call *call,
                                       const char *requests_json, size_t requests_len,
                                       const char *state, size_t state_len);
/** The call's result becomes task_json, a CreateTaskResult
 * in the call's wire's shape (the 2026-07-28 tasks extension's flat
 * {"taskId","status",...,"ttlMs"}, or 2025-11-25's {"task":{...}}), typed
 * MCPG_RESULT_TASK through host->call_set_result_type: the kernel learns a
 * task was created, the stateless wire says "resultType":"task". A host
 * without that slot (ABI 1.0) gets "resultType":"task" in the object itself
 * on the stateless wire. task_json is an object's text. MCPG_CONTINUE, or
 * MCPG_DENY with an internal error when memory ran out or task_json is not
 * an object. */
mcpg_status mcpg_result_task(const mcpg_host *host, mcpg_call *call, const char *task_json,
                             size_t task_len);
/** A JSON-RPC error with a printf-style message; returns MCPG_DENY. */
mcpg_status mcpg_result_errorf(const mcpg_host *host, mcpg_call *call, int64_t code,
                               const char *fmt, ...) MCPG_PRINTF(4, 5);

/* ---- module descriptors ---- */
/** The checks the kernel's loader makes (magic, ABI major/minor, each table
 * at least its ABI 1.0 size, kind, name, lifecycle and mandatory ops, config
 * entries with a valid size and inside config_size): 0, or MCPG_EABI with one
 * line saying what is wrong, with the sizes or versions found and expected,
 * in err. Reads no slot past a table's own size. */
int mcpg_module_check(const mcpg_module *d, char *err, size_t errcap);
/** "backend", "audit", ...; NULL for an unknown kind. */
const char *mcpg_kind_name(uint32_t kind);

/* ---- methods ---- */
/** The MCP method's text for an mcpg_method ("" for MCPG_METHOD_OTHER or an
 * unknown value). */
const char *mcpg_method_name(uint32_t method);
/** The mcpg_method of method text m[0..n) (MCPG_METHOD_OTHER when unknown). */
uint32_t mcpg_method_of(const char *m, size_t n);

/* ---- the fleet's resource news (MCPG_FLEET_NEWS_SUBJECT's lines) ---- */
/** Append "u <uri>\n" (notifications/resources/updated) to a message: 0 or
 * MCPG_ENOMEM. */
int mcpg_fleet_news_updated(mcpg_buf *b, const char *uri, size_t n);
/** Append "l\n" (resources/list_changed) to a message: 0 or MCPG_ENOMEM. */
int mcpg_fleet_news_list_changed(mcpg_buf *b);

/* ---- error names ---- */
/** An error code's text ("invalid argument"); a static string, never NULL
 * ("unknown error"). */
const char *mcpg_strerror(int err);
/** An error code's name ("MCPG_EINVAL"); a static string, never NULL. */
const char *mcpg_errname(int err);

/* ---- W3C Trace Context ---- */
/** 1 when the traceparent header value s[0..n) is well formed (a version,
 * a non-zero trace-id and parent-id, flags; lowercase hex), else 0. */
int mcpg_traceparent_valid(const char *s, size_t n);
/** 1 when the tracestate value s[0..n) is fit to pass on (printable, at most
 * 512 bytes), else 0. */
int mcpg_tracestate_valid(const char *s, size_t n);

/* ---- threads ---- */
/** Call from a thread of its own that loops hand work to (a pool, a
 * writer): it becomes SCHED_BATCH, so a wake from a loop does not preempt
 * that loop; the thread runs when the loop waits or its time slice ends,
 * and finds the work of a whole loop turn queued. Placement on an idle core
 * is unchanged. 0, or errno (the thread then runs as before). */
int mcpg_thread_background(void);

/* ---- buffers (malloc-backed; the kernel's host->buf_* are these) ---- */
int mcpg_buf_reserve(mcpg_buf *b, size_t extra);            /**< make room for extra more bytes: 0 or MCPG_ENOMEM */
int mcpg_buf_append(mcpg_buf *b, const void *p, size_t n);  /**< append n bytes: 0 or MCPG_ENOMEM */
/** Append printf-formatted text: 0 or MCPG_ENOMEM. */
int mcpg_buf_printf(mcpg_buf *b, const char *fmt, ...) MCPG_PRINTF(2, 3);
/** Append s[0..n) as a JSON string, quotes included: 0 or MCPG_ENOMEM. */
int mcpg_buf_append_json_string(mcpg_buf *b, const char *s, size_t n);
void mcpg_buf_free(mcpg_buf *b); /**< free the bytes; the buffer is empty and valid again */
/** n bytes as 2n lowercase hex digits into out (no terminator written). */
void mcpg_hex(const void *bytes, size_t n, char *out);
/** Append the NUL-terminated string s: 0 or MCPG_ENOMEM. */
static inline int mcpg_buf_puts(mcpg_buf *b, const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return mcpg_buf_append(b, s, n);
}

/* ---- the JSON scanner (no allocation; see mcpg/json.h) ----
 * Returns 1 found / 0 not found or end / MCPG_EPROTO when malformed. */
/** Parse one value starting at s[*pos] (leading whitespace skipped), fully
 * validating it; on success *pos is just past it. */
int mcpg_json_value(const char *s, size_t n, size_t *pos, mcpg_json_span *out);
/** The whole text is exactly one valid JSON value (whitespace around allowed):
 * 0, else MCPG_EPROTO. */
int mcpg_json_validate(const char *s, size_t n);
/** Iterate an object's members. `obj` is the object's text ("{...}");
 * *iter starts at 0. Each member's value is validated as it is passed. */
int mcpg_json_object_next(const char *obj, size_t n, size_t *iter,
                          mcpg_json_span *key, mcpg_json_span *val);
/** The first member named `key` (NUL-terminated, compared after decoding). */
int mcpg_json_object_get(const char *obj, size_t n, const char *key, mcpg_json_span *out);
/** Iterate an array's values; *iter starts at 0. Each value is validated as
 * it is passed. */
int mcpg_json_array_next(const char *arr, size_t n, size_t *iter, mcpg_json_span *val);
/** The same as mcpg_json_object_next (and, below, mcpg_json_object_get and
 * mcpg_json_array_next), for text a validating call has already accepted (a span it
 * returned, or a body mcpg_json_validate passed): they follow the structure
 * without checking it again, at a fraction of the cost. On text that is not
 * valid their answers are meaningless, but they never read outside it. */
int mcpg_json_object_next_trusted(const char *obj, size_t n, size_t *iter,
                                  mcpg_json_span *key, mcpg_json_span *val);
/** mcpg_json_object_get for text already validated (see mcpg_json_object_next_trusted). */
int mcpg_json_object_get_trusted(const char *obj, size_t n, const char *key,
                                 mcpg_json_span *out);
/** mcpg_json_array_next for text already validated (see mcpg_json_object_next_trusted). */
int mcpg_json_array_next_trusted(const char *arr, size_t n, size_t *iter, mcpg_json_span *val);
/** A string span equals lit[0..n) once decoded: 1 yes, 0 no. */
int mcpg_json_string_eq(const mcpg_json_span *s, const char *lit, size_t n);
/** Decode a string span into dst (cap bytes, NUL-terminated; *len_out, when
 * given, its length): 0, MCPG_ERANGE if it does not fit, MCPG_EPROTO if it
 * is not a string. */
int mcpg_json_string_decode(const mcpg_json_span *s, char *dst, size_t cap, size_t *len_out);
/** An integer number span (no fraction/exponent) that fits int64: 0, else MCPG_ERANGE/EPROTO. */
int mcpg_json_int64(const mcpg_json_span *s, int64_t *out);
/** Escape s[0..n) as the inside of a JSON string into dst, which must hold
 * 6*n bytes; returns the bytes written. Control characters become `\u00XX`;
 * invalid UTF-8 bytes become U+FFFD. */
size_t mcpg_json_escape(char *dst, const char *s, size_t n);
/** No object anywhere in the value text[0..n) names a member twice, names
 * compared decoded, and no name holds a NUL once decoded (a reader keeping
 * names as C strings would cut it, making two names one): 0. 1 when one is
 * named twice, 2 when a name holds a NUL (*dup, when not NULL: that name as
 * written, a span into text); MCPG_EPROTO when text is not JSON,
 * MCPG_ENOMEM. Readers disagree on which of two equal members counts (the
 * first, the last), so what a gateway judges must have none: a server behind
 * it could read the other one. Cost O(n log n) in the members of the
 * largest object, whatever the input. */
int mcpg_json_unique(const char *text, size_t n, mcpg_json_span *dup);
/** The same for a value span a validating call has accepted (e.g. one
 * mcpg_json_value returned): not validated again. */
int mcpg_json_unique_trusted(const mcpg_json_span *value, mcpg_json_span *dup);
/** mcpg_json_value and mcpg_json_unique in one read of the text (the
 * gateway's judge reads every request's params so). Returns what
 * mcpg_json_value returns (1 with *out and *pos; 0 no value; MCPG_EPROTO
 * malformed) and, with 1, sets *unique to what mcpg_json_unique answers for
 * that value (0; 1 or 2 with *dup; MCPG_ENOMEM). */
int mcpg_json_value_unique(const char *s, size_t n, size_t *pos, mcpg_json_span *out,
                           int *unique, mcpg_json_span *dup);

/* ---- the 2026-07-28 wire's custom headers ----
 * A header value may carry any text as "=?base64?<standard base64 of its
 * UTF-8>?=" (both markers lowercase, compared case-sensitively); a value
 * without both markers is literal. */
/** hv[0..hn) as the text it stands for: 0 with *out and *out_len (hv itself, or
 * decoded into buf); MCPG_EPROTO when it has both markers and what lies
 * between is not canonical base64 (length a multiple of 4, '=' only as
 * padding at the end, the standard alphabet, unused bits zero);
 * MCPG_ERANGE when the decoded text may not fit cap. */
int mcpg_header_value_decode(const char *hv, size_t hn, char *buf, size_t cap, const char **out,
                             size_t *out_len);
/** Append v[0..n) as a header value: as it is when it is visible ASCII (inner
 * spaces and tabs allowed) with no white space at either end and does not
 * itself look encoded; else the base64 form. 0 or MCPG_ENOMEM. */
int mcpg_header_value_encode(const char *v, size_t n, mcpg_buf *out);

/** A tool's "x-mcp-header" annotations: the argument at `path` (property
 * names from the inputSchema's root) is mirrored in header `Mcp-Param-<name>`. */
enum { MCPG_PARAM_STRING = 1,  /**< the property is a string */
       MCPG_PARAM_INTEGER = 2, /**< the property is an integer */
       MCPG_PARAM_BOOLEAN = 3  /**< the property is a boolean */ };
/** One x-mcp-header annotation of a tool's inputSchema. */
typedef struct mcpg_param_header {
    char *name;   /**< as annotated: the header is "Mcp-Param-" + name */
    char *lname;  /**< "mcp-param-" + name lower-cased: a header lookup's key */
    char **path;  /**< depth property names, decoded */
    size_t depth; /**< how many names path holds */
    int type;     /**< MCPG_PARAM_* of the property */
} mcpg_param_header;
/** Every annotation of one tool (mcpg_param_headers_parse). */
typedef struct mcpg_param_headers {
    mcpg_param_header *v; /**< n annotations */
    size_t n;             /**< how many */
} mcpg_param_headers;
/** Read the annotations of an inputSchema's text: 0 (out->n 0 when none);
 * MCPG_EINVAL when one is invalid, which makes the whole tool invalid (why
 * says which and why: empty, not an HTTP token, declared twice
 * case-insensitively, on a property not of type integer, string or boolean,
 * or on one not reached from the root through "properties" alone);
 * MCPG_ENOMEM. Free out with mcpg_param_headers_free. */
int mcpg_param_headers_parse(const char *schema, size_t n, mcpg_param_headers *out, char *why,
                             size_t why_cap);
void mcpg_param_headers_free(mcpg_param_headers *ph); /**< free what parse filled; ph is empty again */
/** The annotated argument in args (an object's text): 1 with *val, 0 when
 * absent or null. */
int mcpg_param_header_arg(const mcpg_param_header *p, const char *args, size_t n,
                          mcpg_json_span *val);
/** The argument against the header a request carried (hv NULL: none), the
 * header trimmed of spaces and tabs and decoded first; numbers compare by
 * value (42.0 is 42). */
enum { MCPG_PARAM_OK = 0,      /**< the header stands for the argument */
       MCPG_PARAM_MISSING,      /**< the argument is there, the header is not */
       MCPG_PARAM_UNEXPECTED,   /**< the header is there, the argument is not */
       MCPG_PARAM_MISMATCH,     /**< both are there and differ */
       MCPG_PARAM_BAD_BASE64    /**< the header's encoded form is not canonical base64 */ };
/** Check the argument against the header (see above): one of MCPG_PARAM_OK,
 * MCPG_PARAM_MISSING, ... */
int mcpg_param_header_check(const mcpg_param_header *p, const char *args, size_t n,
                            const char *hv, size_t hn);
/** Append the header value a client sends for the argument (encoded as
 * mcpg_header_value_encode says): 1, 0 when there is none to send (absent,
 * null, an object or array), MCPG_ENOMEM. */
int mcpg_param_header_value(const mcpg_param_header *p, const char *args, size_t n,
                            mcpg_buf *out);

/* ---- config schema (used by the kernel, the fake host and --help) ---- */
/** Receives one config problem: err(ctx, key, message). */
typedef void (*mcpg_config_err_fn)(void *ctx, const char *key, const char *message);
/** Parse `json` (an object's text) against `fields` into the zeroed struct at
 * `out`: defaults applied, types and bounds checked, unknown keys refused
 * (with a "did you mean" when one is close). Each problem is passed to
 * err(ctx, key, message); returns the number of problems. Strings in `out`
 * are malloc'd: free them with mcpg_config_free. */
int mcpg_config_parse(const mcpg_config_field *fields, const char *json, size_t len,
                      void *out, mcpg_config_err_fn err, void *ctx);
void mcpg_config_free(const mcpg_config_field *fields, void *out); /**< free the strings parse put in out */
/** The candidate closest to `word` by edit distance, if close enough; else NULL. */
const char *mcpg_did_you_mean(const char *word, const char *const *candidates, size_t count);

/** problems in a module's own config (a JSON setting it parses itself)
 * One parse serves validate() and create(), so both agree on what is valid:
 * in validate() set rep (each problem goes to host->report_error with its key
 * path); in create() set self (each problem is logged on the instance).
 *   mcpg_config_problems p = {host, rep, NULL, 0};
 *   mcpg_config_problem(&p, "tools[0].name", "is required");
 *   return p.errors ? MCPG_ECONFIG : 0; */
typedef struct mcpg_config_problems {
    const mcpg_host *h;  /**< the host table */
    mcpg_report *rep;    /**< validate(): where problems are reported, else NULL */
    mcpg_instance *self; /**< create(): whose log they go to, else NULL */
    int errors;          /**< problems so far */
} mcpg_config_problems;
/** One problem at path, printf-formatted: counted in p->errors and reported
 * or logged as p says. */
void mcpg_config_problem(mcpg_config_problems *p, const char *path, const char *fmt, ...)
    MCPG_PRINTF(3, 4);
/** "unknown key", with a "did you mean" from known[0..n) when one is close. */
void mcpg_config_unknown_key(mcpg_config_problems *p, const char *path, const char *key,
                             const char *const *known, size_t n);

/* ---- a program a module starts: its environment ---- */
/** The PATH a program gets when the gateway has none. */
#define MCPG_CHILD_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
/** The environment for a program a module starts: PATH (the gateway's, or MCPG_CHILD_DEFAULT_PATH when unset or empty), LANG,
 * LC_ALL, LC_CTYPE and TZ when the gateway has them, then the gateway's values
 * of the variables `inherit` names (those it has), then `set` ("NAME=value"),
 * each later entry replacing an earlier one of the same name. Nothing else of
 * the gateway's environment: its tokens and credentials reach a program only
 * when the operator names them. NULL-terminated, never empty; NULL when out of
 * memory. Free with mcpg_child_env_free. */
char **mcpg_child_env(const char *const *inherit, size_t n_inherit, const char *const *set,
                      size_t n_set);
void mcpg_child_env_free(char **env); /**< free what mcpg_child_env returned */
/** The PATH such a program gets (and a bare command name is looked up in). */
const char *mcpg_child_path(void);
/** 1 when s is a variable name: ^[A-Za-z_][A-Za-z0-9_]*$ */
int mcpg_env_name_valid(const char *s);

#ifdef __cplusplus
}
#endif
#endif
