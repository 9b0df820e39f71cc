/** @file
 * mcpg fake host: run a module in a unit test, without the kernel.
 *
 * @code
 *   mcpg_fakehost *fh = mcpg_fakehost_new();
 *   mcpg_instance *inst;
 *   mcpg_fakehost_load(fh, mcpg_module_entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR),
 *                      "hello", "{\"greeting\":\"hi\"}", &inst);
 *   mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "greet", "{\"who\":\"x\"}", "1");
 *   int st = mcpg_fakehost_run(fh, inst, c, 1000);   // MCPG_CONTINUE
 *   puts(mcpg_fakehost_result(c));                   // {"content":[...]}
 *   mcpg_fakehost_call_free(fh, c);
 *   mcpg_fakehost_unload(fh, inst);
 *   return mcpg_fakehost_free(fh) == 0 ? 0 : 1;      // 0: nothing leaked, no module bug seen
 * @endcode
 *
 * The host table is a real one: one worker backed by a real uv loop (posts,
 * timers, the pool through uv_queue_work, call_resume from any thread), the
 * SDK's buffers and JSON scanner, logging captured in memory. Where a module
 * could tell the difference it behaves as the kernel, with the kernel's own
 * code where they share it (descriptor checks, config parsing, method names,
 * the resume handshake and call handles):
 *  - A module's op gets a call handle naming the call and its stage; a
 *    handle kept past its call's life is refused by every slot, and
 *    call_resume finishes only the pending op of its handle's stage.
 *  - A backend's call ops run on a pool thread unless the instance is set
 *    inline (mcpg_fakehost_set_inline), so its thread-safety is exercised;
 *    call_cancel tells a backend whose op is pending (cancel op), either way.
 *  - An op that answers DENY without call_error fails the call with -32000
 *    and HTTP 503, naming the instance.
 *  - Optional ops and slots are used only when their table says it has them
 *    (MCPG_HAS); call_outcome fills only what the caller's out->size holds.
 *
 * The loop runs in one of two ways:
 *  - In the test's thread (the default): it turns only inside the calls that
 *    say so (wait, run, run_for, run_until, unload, free), on the thread that
 *    called mcpg_fakehost_new. That thread is the worker's loop thread: every
 *    mcpg_fakehost_* function is called on it, and the ones that turn the
 *    loop never from inside a callback the loop is running.
 *  - On a thread of its own, between mcpg_fakehost_start_thread and
 *    mcpg_fakehost_stop_thread: for a transport served over real sockets
 *    (mcpg_fakehost_listen), driven by clients in the test's thread.
 *    Meanwhile the test uses the functions marked "any thread", and reaches
 *    everything else through mcpg_fakehost_run_on_loop.
 *
 * A transport test routes host->call_submit to a backend
 * (mcpg_fakehost_route), or decides per call with a submit hook
 * (mcpg_fakehost_on_submit): answered inside call_submit, on a later loop
 * turn or after a delay, refused, with any result, error, HTTP status and
 * Retry-After. mcpg_fakehost_get_stats counts what crossed the table.
 *
 * The metric slots (ABI 1.4) are the kernel's registry, with the one
 * worker's loop row and a shared row: host->metric_new (self NULL: the
 * test's own families), metric_add/_set/_observe, metrics_each;
 * host->metrics_render asks the first loaded metrics instance (MCPG_ENOENT
 * when none is). An instance's families go when it is unloaded.
 *
 * What it counts as a module bug (mcpg_fakehost_failures; each is logged):
 * a stale call handle, call_resume on a call that is not pending (or with
 * MCPG_PENDING), an op answering something that is not an mcpg_status, a
 * DENY without an error, call_release before complete(), call_outcome with
 * an out->size smaller than ABI 1.0's, timers left running after stop, a
 * list op whose output is not a JSON array, loop-thread-only slots called
 * from another thread. mcpg_fakehost_free adds what was left behind
 * (instances, calls, open uv handles) and returns the total.
 *
 * Ownership: strings passed in are copied unless said otherwise; pointers
 * returned are borrowed from the fake host, valid until the object they
 * belong to is freed.
 */
#ifndef MCPG_FAKEHOST_H
#define MCPG_FAKEHOST_H

#include <mcpg/sdk.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mcpg_fakehost mcpg_fakehost; /**< a fake host: one per process at a time */

/* ---- the host ---- */

/** NULL when out of memory, when the loop cannot start, or when another fake
 * host is alive in this process: several host slots (worker_count,
 * worker_at, worker_current) take no context, so there is one per process. */
mcpg_fakehost *mcpg_fakehost_new(void);

/** Unload what is still loaded, free what is left, close the loop (a loop
 * thread is stopped first). Returns the number of problems over the fake
 * host's life: failures not taken with mcpg_fakehost_take_failures, plus one
 * per instance still loaded, call not freed or released, work still queued
 * or uv handle left open on the loop (then the loop cannot be closed and its
 * memory is deliberately leaked). 0 means clean. */
int mcpg_fakehost_free(mcpg_fakehost *fh);

/** The host table handed to modules. Writable, so a test can play an older
 * kernel: shrink ->size or NULL a slot, then check the module copes
 * (MCPG_HOST_HAS). Changes apply to instances loaded afterwards and before. */
mcpg_host *mcpg_fakehost_host(mcpg_fakehost *fh);
/** The fake host's one worker (what host->worker_at(0) gives). */
mcpg_worker *mcpg_fakehost_worker(mcpg_fakehost *fh);

/** Module bugs detected so far; take_ returns the count and resets it (for a
 * test that provokes one on purpose). Any thread. */
int mcpg_fakehost_failures(mcpg_fakehost *fh);
int mcpg_fakehost_take_failures(mcpg_fakehost *fh); /**< the count so far, reset to 0 */

/* ---- logs and reported errors ---- */

/** Lines logged through host->log at or below `level` are kept (default
 * MCPG_LOG_DEBUG: all) as "[kind:module:instance] level: message\n" and,
 * unless quiet, also written to stderr. */
void mcpg_fakehost_set_log_level(mcpg_fakehost *fh, int level);
/** 1: keep log lines in memory only, not on stderr; 0 (the default): both. */
void mcpg_fakehost_set_quiet(mcpg_fakehost *fh, int quiet);
/** Everything kept so far (never NULL); borrowed until the next log or clear. */
const char *mcpg_fakehost_log_text(mcpg_fakehost *fh);
int mcpg_fakehost_log_contains(mcpg_fakehost *fh, const char *needle); /**< any thread */
void mcpg_fakehost_log_clear(mcpg_fakehost *fh); /**< forget the lines kept so far */

/** Config problems from the last load/check: schema errors and validate()'s
 * host->report_error lines, as "key.path: message\n" (never NULL). */
const char *mcpg_fakehost_report_text(mcpg_fakehost *fh);
int mcpg_fakehost_report_count(mcpg_fakehost *fh); /**< how many problems the report text holds */

/* ---- instances ---- */

/** Check the descriptor as the kernel does (magic, ABI major/minor, sizes,
 * known kind, mandatory ops), parse config_json (an object's text; NULL means
 * {}) against its schema, run validate, create and start. On failure nothing
 * is left behind and the result says why: MCPG_EABI (the descriptor; the
 * reason is logged), MCPG_ECONFIG (see report_text), or what create/start
 * returned. instance_name must fit [a-zA-Z0-9_-]{1,64}. */
int mcpg_fakehost_load(mcpg_fakehost *fh, const mcpg_module *m, const char *instance_name,
                       const char *config_json, mcpg_instance **inst_out);
/** The same from a built module file: dlopen(RTLD_NOW|RTLD_LOCAL), the entry
 * symbol, then as above. The image is closed at unload. MCPG_ENOENT when the
 * file cannot be opened or exports no entry symbol. */
int mcpg_fakehost_load_file(mcpg_fakehost *fh, const char *so_path, const char *instance_name,
                            const char *config_json, mcpg_instance **inst_out);
/** Only the checks, schema and validate (what `mcpg --check` does): 0 or
 * MCPG_EABI / MCPG_ECONFIG. */
int mcpg_fakehost_check(mcpg_fakehost *fh, const mcpg_module *m, const char *config_json);

/** As the kernel's shutdown: a listener's socket is closed, then
 * worker_stop and stop; then the instance's queued pool work is cancelled
 * (done runs with MCPG_ECANCELED) and running work is waited for; then
 * destroy. Timers it left running are cancelled and counted as failures:
 * returns MCPG_ESTATE then, else 0; inst is freed either way. It turns the
 * loop: MCPG_EINVAL (nothing done) from inside a loop callback or while the
 * loop has its own thread. */
int mcpg_fakehost_unload(mcpg_fakehost *fh, mcpg_instance *inst);

/** ABI 1.2: run the instance's `reloaded` op (on this thread, as the kernel
 * does on its control thread after a reload carried the instance over): 0,
 * MCPG_ENOTSUP (no such op), MCPG_EINVAL. */
int mcpg_fakehost_reloaded(mcpg_fakehost *fh, mcpg_instance *inst);

void *mcpg_fakehost_state(mcpg_instance *inst);        /**< what create() returned */
const void *mcpg_fakehost_config(mcpg_instance *inst); /**< the parsed config struct */
/** Run this backend's call ops on the loop thread (on != 0, like
 * "inline_dispatch": true) or on the pool (0, like "inline_dispatch": false).
 * MCPG_EINVAL for on != 0 unless the module declares MCPG_MOD_INLINE_SAFE
 * (the kernel refuses that manifest too). An instance starts as a manifest
 * entry without the key would: inline when its module declares
 * MCPG_MOD_NEVER_BLOCKS, on the pool otherwise. */
int mcpg_fakehost_set_inline(mcpg_instance *inst, int on);

/* ---- calls ---- */

/** A call as the kernel would hand it to a stage or backend. method is the MCP
 * method ("tools/call"); target is the tool, prompt or resource uri as the
 * backend knows it (or NULL); args_json the arguments object (NULL means {});
 * id_json the JSON-RPC id's text (NULL means 1). params is built from them:
 * {"name":target,"arguments":args} for tools/call and prompts/get,
 * {"uri":target} for the resources/... methods, else args itself. NULL when
 * out of memory.
 *
 * What it returns is the test's handle to the call: pass it to these
 * functions and to host slots. An op receives a handle of its own stage
 * (mcpg_fakehost_op_call); every handle is refused, as a module bug, once
 * the call is freed, even when the object has since been reused. */
mcpg_call *mcpg_fakehost_call_new(mcpg_fakehost *fh, const char *method, const char *target,
                                  const char *args_json, const char *id_json);
/** Add a request header (lower-case name; both copied) that host->call_header
 * answers. 0, MCPG_ENOMEM, or MCPG_ESTATE for a freed call. */
int mcpg_fakehost_call_set_header(mcpg_call *call, const char *lname, const char *value);
/** Replace the params call_new built (host->call_params), e.g. to add _meta,
 * inputResponses or requestState; the arguments stay as given. 0,
 * MCPG_EINVAL when params_json is not a JSON object, MCPG_ENOMEM. */
int mcpg_fakehost_call_set_params(mcpg_call *call, const char *params_json);
/** The wire host->call_wire answers (default: the stateless wire). */
void mcpg_fakehost_call_set_wire(mcpg_call *call, mcpg_wire wire);
/** ABI 1.2: what the transport would say of the call's connection: the
 * client's address (host->call_peer; copied, NULL clears), its TLS facts
 * (host->call_tls; borrowed until the call is freed or set again), and the
 * name the client used (host->call_client_name; default: the target). */
int mcpg_fakehost_call_set_peer(mcpg_call *call, const char *peer);
void mcpg_fakehost_call_set_tls(mcpg_call *call, const mcpg_tls_info *tls);   /**< see mcpg_fakehost_call_set_peer */
int mcpg_fakehost_call_set_client_name(mcpg_call *call, const char *name);   /**< see mcpg_fakehost_call_set_peer */
/** Free a call. One still running or pending is a failure and is leaked
 * instead (an op may still hold it). */
void mcpg_fakehost_call_free(mcpg_fakehost *fh, mcpg_call *call);

/** Run inst's op for the call. Backend: call_tool, read_resource, get_prompt
 * or complete by method (on a pool thread unless inline). Identity:
 * authenticate. Policy: check. Limits: acquire. Audit: emit, with an event
 * "mcpg.tool.call.completed" made from the call. Events: request. Returns the
 * op's answer (MCPG_PENDING also while it runs on the pool), or MCPG_ENOTSUP
 * (no such op), MCPG_ESTATE (the call already has an op running). */
int mcpg_fakehost_dispatch(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call);
/** Audit with an event of the test's own (borrowed for the call). */
int mcpg_fakehost_emit(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call,
                       const mcpg_audit_event *event);
/** For ops dispatch does not cover (events webhook, a policy's visible):
 *   mcpg_fakehost_op_begin(fh, inst, call);
 *   mcpg_call *h = mcpg_fakehost_op_call(inst, call);
 *   int st = mcpg_fakehost_op_end(fh, call, ops->webhook(state, h, "src"));
 * op_end settles a PENDING answer against a call_resume that came early. */
int mcpg_fakehost_op_begin(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call);
/** End what op_begin began with the op's answer (see above); returns the
 * answer settled, or MCPG_EINVAL for a freed call. */
int mcpg_fakehost_op_end(mcpg_fakehost *fh, mcpg_call *call, int status);
/** The handle inst's op gets for call: its stage's (a resume with it
 * finishes that op, not another's). NULL for a stale call. */
mcpg_call *mcpg_fakehost_op_call(mcpg_instance *inst, mcpg_call *call);
/** 1 while the call's op has answered PENDING and its resume has not been
 * taken: the moment call_cancel reaches a backend's cancel op. */
int mcpg_fakehost_pending(mcpg_call *call);
/** Run the loop until the call's op has answered (call_resume arrived, or the
 * pool op returned), at most timeout_ms. Returns the final mcpg_status (again,
 * for an op that answered at once), MCPG_ETIMEDOUT, or MCPG_ESTATE when no op
 * was dispatched. */
int mcpg_fakehost_wait(mcpg_fakehost *fh, mcpg_call *call, uint64_t timeout_ms);
/** dispatch, then wait. */
int mcpg_fakehost_run(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call,
                      uint64_t timeout_ms);
/** A limits instance's release for a call acquire admitted (if it has one). */
void mcpg_fakehost_release(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call);

/** The call's whole outcome (out->size is set to this build's), as
 * host->call_outcome gives it to a transport built with these headers. */
void mcpg_fakehost_outcome(mcpg_call *call, mcpg_call_outcome *out);
/** The result object's text (NUL-terminated; "{}" when none was set), or
 * NULL when the call has an error. */
const char *mcpg_fakehost_result(mcpg_call *call);
int64_t mcpg_fakehost_error_code(mcpg_call *call);        /**< 0 when no error */
const char *mcpg_fakehost_error_message(mcpg_call *call); /**< NULL when no error */

/** A backend's list op (MCPG_METHOD_TOOLS_LIST, _RESOURCES_LIST,
 * _RESOURCES_TEMPLATES_LIST, _PROMPTS_LIST) appended to out. Returns the op's
 * result, MCPG_ENOTSUP without the op, or MCPG_EPROTO (a failure) when what
 * it appended is not one JSON array. */
int mcpg_fakehost_list(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_method which,
                       mcpg_buf *out);

/** ABI 1.1: what a call says about its client, and what it sends it
 *
 * host->call_session, ->call_client_capabilities and ->call_protocol_version
 * answer what the test set here (NULL until then); for a submitted call,
 * what its desc carried (session_id, client_caps_json, protocol_version).
 * Copied; 0, MCPG_EINVAL (caps that are not JSON) or MCPG_ENOMEM. */
int mcpg_fakehost_call_set_session(mcpg_call *call, const char *session_id);
int mcpg_fakehost_call_set_caps(mcpg_call *call, const char *caps_json);            /**< see mcpg_fakehost_call_set_session */
int mcpg_fakehost_call_set_version(mcpg_call *call, const char *protocol_version);  /**< see mcpg_fakehost_call_set_session */
/** 0: this call's answer cannot carry messages (a unary JSON answer):
 * call_notify and call_request answer MCPG_ENOTSUP. A submitted call can
 * carry them when its desc has a message callback. Default 1. */
void mcpg_fakehost_call_set_streaming(mcpg_call *call, int can_carry_messages);

/** host->call_notify and ->call_request behave as the kernel's: allowed
 * while the call's op runs or is pending (else a failure and MCPG_ESTATE),
 * from any thread; each message is framed as JSON-RPC, kept in order and
 * handed on the loop to a submitted call's transport (desc->message), all
 * before complete():
 *   {"jsonrpc":"2.0","method":M,"params":P}             (a notification)
 *   {"jsonrpc":"2.0","id":"mcpg-0-<n>","method":M,"params":P}  (a request)
 * ("params" left out when NULL). MCPG_ENOTSUP when the answer cannot carry
 * messages, and for call_request on the stateless wire (the default wire of
 * mcpg_fakehost_call_new: set MCPG_WIRE_LEGACY to send requests);
 * MCPG_EAGAIN past FH_MSG_MAX (256) messages or 16 waiting requests.
 * A request's reply runs once on the loop: the test's (below), a client's
 * through host->reply_submit, MCPG_ETIMEDOUT after its timeout (0: 30 s),
 * MCPG_ECANCELED when the call's op answers first (before complete()), or
 * MCPG_ENOTSUP when the transport's message callback refused it. */
int mcpg_fakehost_message_count(mcpg_call *call);
/** Message i (from 0), NUL-terminated; NULL past the end. */
const char *mcpg_fakehost_message(mcpg_call *call, int i);
/** All of them so far, one per line ("" when none); borrowed until the next
 * call of this function on the call. */
const char *mcpg_fakehost_messages(mcpg_call *call);
/** The minted id of the call's request number request_index (from 0, in the
 * order of call_request), while it waits; NULL otherwise. */
const char *mcpg_fakehost_request_id(mcpg_call *call, int request_index);
/** Answer the call's request number request_index as its client would: with
 * a result object's text, a JSON-RPC error, or a status (MCPG_EUNAVAIL: the
 * client's stream went away). The reply runs on the loop before these
 * return (any thread, through run_on_loop while the loop has its own).
 * 0, MCPG_ENOENT when that request is not waiting, MCPG_EINVAL. */
int mcpg_fakehost_reply(mcpg_fakehost *fh, mcpg_call *call, int request_index,
                        const char *result_json);
/** As mcpg_fakehost_reply, with a JSON-RPC error (data_json: JSON text or NULL). */
int mcpg_fakehost_reply_error(mcpg_fakehost *fh, mcpg_call *call, int request_index,
                              int64_t code, const char *message, const char *data_json);
/** As mcpg_fakehost_reply, with a status instead of an answer. */
int mcpg_fakehost_reply_status(mcpg_fakehost *fh, mcpg_call *call, int request_index,
                               int status);

/** ABI 1.1: news, subscriptions, the coordinator
 * host->lists_changed and ->resource_updated (any thread) are recorded, one
 * entry per list and per uri, and handed on the loop to every loaded
 * transport's news op (method notifications/tools/list_changed, ...,
 * notifications/resources/updated with the uri). Count them here: method
 * and uri NULL match any. Any thread. */
int mcpg_fakehost_news_count(mcpg_fakehost *fh, const char *method, const char *uri);
/** Drive a transport's news op directly, on the loop (any thread): 0,
 * MCPG_ENOTSUP without the op, MCPG_EINVAL. */
int mcpg_fakehost_news(mcpg_fakehost *fh, mcpg_instance *transport, const char *method,
                       const char *uri);
/* host->resource_subscribe routes to the routed backend (mcpg_fakehost_route)
 * when it lists the uri or a template matching it (else MCPG_ENOENT), and
 * calls its subscribe op for the first subscriber and when the last one
 * leaves, as the kernel does. host->reply_submit finds the waiting request
 * by its minted id among all calls, and gives its reply when the session is
 * the asking call's (else MCPG_ENOENT; MCPG_EPROTO for a body that is not a
 * JSON-RPC response). */

/** The instance host->coordinator returns (NULL: none, the default). It must
 * be a loaded coordinator-kind instance: MCPG_EINVAL otherwise. Unloading
 * it sets none again. */
int mcpg_fakehost_set_coordinator(mcpg_fakehost *fh, mcpg_instance *coordinator);

/** the transport's side
 * host->call_submit works: tools/list, resources/list,
 * resources/templates/list and prompts/list are answered from the routed
 * backend's list ops ({"tools":[...]}, {"resources":[...]},
 * {"resourceTemplates":[...]}, {"prompts":[...]}), calls go to its ops, the
 * rest is "method not found"; complete() runs on the loop as in the kernel, with the handle
 * call_submit gave out. */
void mcpg_fakehost_route(mcpg_fakehost *fh, mcpg_instance *backend);

/** How call_submit answers one call (the submit hook's choice). */
typedef enum mcpg_fakehost_answer {
    MCPG_FAKEHOST_ROUTE = 0, /**< as without a hook: the routed backend answers */
    MCPG_FAKEHOST_NOW,       /**< complete() runs inside call_submit */
    MCPG_FAKEHOST_LATER,     /**< complete() runs delay_ms later (0: on a later loop turn) */
    MCPG_FAKEHOST_REFUSE     /**< call_submit fails with refuse_with; complete() never runs */
} mcpg_fakehost_answer;

/** The submit hook's plan for one call: when and how complete() runs. */
typedef struct mcpg_fakehost_plan {
    mcpg_fakehost_answer answer; /**< MCPG_FAKEHOST_ROUTE unless the hook says */
    uint64_t delay_ms;           /**< MCPG_FAKEHOST_LATER */
    int refuse_with;             /**< MCPG_FAKEHOST_REFUSE: MCPG_EAGAIN (the default),
                                    MCPG_EUNAVAIL, ... */
} mcpg_fakehost_plan;

/** Runs inside call_submit, on the loop, once the call is made: it reads the
 * desc (borrowed for the hook), sets the outcome with the host's slots on
 * `call` (call_result, call_result_buf, call_error, call_set_http) and says
 * in plan when complete() runs. */
typedef void (*mcpg_fakehost_submit_fn)(void *arg, mcpg_call *call, const mcpg_call_desc *desc,
                                        mcpg_fakehost_plan *plan);
/** NULL fn: no hook (every call routed). */
void mcpg_fakehost_on_submit(mcpg_fakehost *fh, mcpg_fakehost_submit_fn fn, void *arg);

/** What host->gateway_name and ->gateway_version answer (copied; NULL: the
 * fake host's own, "mcpg-fakehost" and "fakehost"). */
void mcpg_fakehost_set_gateway(mcpg_fakehost *fh, const char *name, const char *version);

/** ABI 1.12: declare a virtual server (the manifest's servers[]) that
 * host->server_find finds: name as servers[].name allows it
 * ([a-z0-9][a-z0-9_-]{0,63}), path (NULL: "/mcp/<name>"), host (NULL: any
 * Host; else only a request whose Host names it, any port, any case),
 * info_json (its serverInfo, a JSON object's text, or NULL) and
 * instructions (or NULL); all copied. A server bound to the request's host
 * is found before one for any host at the same path. What server_find
 * gives out lives until the posts run on a later loop turn: a transport
 * that keeps it past its callback reads freed memory. Any thread. 0,
 * MCPG_EINVAL, MCPG_ENOMEM. */
int mcpg_fakehost_add_server(mcpg_fakehost *fh, const char *name, const char *path,
                             const char *host, const char *info_json, const char *instructions);
/** ABI 1.12: the server the last desc handed to host->call_submit named
 * (desc.server), copied into out (cap bytes, NUL-terminated; "" for none):
 * 1 when it named one, 0 when it named none, -1 before any desc. Any thread. */
int mcpg_fakehost_last_server(mcpg_fakehost *fh, char *out, size_t cap);
/** ABI 1.12: the server a submitted call's desc named (copied), or NULL:
 * none (the gateway's own endpoint). Also the audit event's server when the
 * call is emitted. On the loop (a submit hook, a backend's op). */
const char *mcpg_fakehost_call_server(mcpg_call *call);

/** Listen on 127.0.0.1 at a free port (*port_out) and hand each accepted
 * connection to the transport's conn_adopt on the worker, as the kernel does:
 * non-blocking, TCP_NODELAY; a refused one is closed. The socket is closed
 * when the instance is unloaded. On the loop's thread. */
int mcpg_fakehost_listen(mcpg_fakehost *fh, mcpg_instance *transport, uint16_t *port_out);
/** Any thread: the transport's drain op on the worker, as the kernel's drain;
 * from then on call_submit answers MCPG_EUNAVAIL. The listener stays, so a
 * test sees the transport refuse later connections. */
void mcpg_fakehost_drain(mcpg_fakehost *fh, mcpg_instance *transport);
/** Any thread: the transport's conn_count op on the worker. */
uint32_t mcpg_fakehost_conn_count(mcpg_fakehost *fh, mcpg_instance *transport);

/** What crossed the host table since mcpg_fakehost_new. */
typedef struct mcpg_fakehost_stats {
    long submitted;           /**< calls host->call_submit took */
    long refused;             /**< calls it refused (the hook's choice, draining, table full) */
    long completed;           /**< complete() callbacks made */
    long completed_in_submit; /**< of those, inside call_submit */
    long released;            /**< host->call_release */
    long cancelled;           /**< host->call_cancel */
    long accepted;            /**< connections the listener handed to conn_adopt */
    long adopt_refused;       /**< of those, refused by it (and closed) */
    long host_allocs;         /**< host->alloc, calloc, realloc(NULL) less host->free */
    long buf_bytes;           /**< capacity of the buffers modules own: grown through
                                 host->buf_*, less what host->buf_free gave back (a
                                 call's result and a list op's output are the host's
                                 and not counted) */
} mcpg_fakehost_stats;
/** Any thread. */
void mcpg_fakehost_get_stats(mcpg_fakehost *fh, mcpg_fakehost_stats *out);

/* ---- the loop ---- */

/** Turn the loop for `ms` milliseconds (timers, posts, pool completions). */
void mcpg_fakehost_run_for(mcpg_fakehost *fh, uint64_t ms);
/** Turn it until done(arg) is true or timeout_ms passed: 0 or MCPG_ETIMEDOUT
 * (MCPG_ESTATE, a failure, inside a loop callback or off the loop's thread). */
int mcpg_fakehost_run_until(mcpg_fakehost *fh, int (*done)(void *arg), void *arg,
                            uint64_t timeout_ms);

/** Run the loop on a thread of its own, until stop_thread. Called on the
 * loop's thread (the test's), not inside a callback: 0, MCPG_ESTATE, or
 * MCPG_ENOMEM when the thread cannot start. Load what the loop needs first:
 * load and unload run on the loop's thread. */
int mcpg_fakehost_start_thread(mcpg_fakehost *fh);
/** Any thread but the loop's: end the loop's thread once its current turn is
 * done; the caller's thread is the loop's thread from then on. */
int mcpg_fakehost_stop_thread(mcpg_fakehost *fh);
/** Any thread: run fn(arg) on the loop's thread and wait until it has run
 * (on the loop's thread: at once). fn may use loop-thread slots and
 * mcpg_fakehost_* functions, but not the ones that turn the loop. 0, or
 * MCPG_ESTATE when no thread turns the loop. */
int mcpg_fakehost_run_on_loop(mcpg_fakehost *fh, void (*fn)(void *arg), void *arg);

/* ---- what a module's test would otherwise write itself ----
 * The checks stay the test's (mcpg/check.h counts them per test file);
 * these do the plumbing around them. */

/** Load or end the test: mcpg_fakehost_load_file (or mcpg_fakehost_load of a
 * descriptor linked into the test), and when it fails, the code, the config,
 * the config problems and the log on stderr, then exit(1), as MCPG_REQUIRE
 * would: nothing is left to test without the instance. */
mcpg_instance *mcpg_fakehost_load_file_or_exit(mcpg_fakehost *fh, const char *so_path,
                                               const char *instance_name, const char *config_json);
/** As mcpg_fakehost_load_file_or_exit, for a descriptor linked into the test. */
mcpg_instance *mcpg_fakehost_load_or_exit(mcpg_fakehost *fh, const mcpg_module *m,
                                          const char *instance_name, const char *config_json);

/** One tools/call of tool with args_json (an object's text), run to its end
 * (timeout_ms at most) and freed. Returns the result's JSON text (malloc'd)
 * when the module answered one, NULL when it answered an error: *code is the
 * error's code (0 when none) and msg, when given, its message (msgcap bytes,
 * "" when none). Any other end (no answer in time, a result that is not
 * JSON) is a failure of the fake host (mcpg_fakehost_failures) and NULL. */
char *mcpg_fakehost_call_tool(mcpg_fakehost *fh, mcpg_instance *inst, const char *tool,
                              const char *args_json, uint64_t timeout_ms, int64_t *code, char *msg,
                              size_t msgcap);
/** The decoded text of a tools/call result's first content item when that
 * is a text item (malloc'd), else NULL; *is_error, when given, the result's
 * isError. */
char *mcpg_fakehost_result_text(const char *result_json, int *is_error);

/** CLOCK_MONOTONIC, for a test's timings. */
uint64_t mcpg_fakehost_now_ms(void);
double mcpg_fakehost_now_s(void); /**< the same clock in seconds */
/** Sleep the calling thread; the loop does not turn (mcpg_fakehost_run_for
 * lets timers fire). */
void mcpg_fakehost_sleep_ms(unsigned ms);

/** Write text to path (created or truncated): 0, or -1 with errno set. */
int mcpg_fakehost_write_file(const char *path, const char *text);

#ifdef __cplusplus
}
#endif
#endif
