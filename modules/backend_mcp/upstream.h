/* backend_mcp: the internals shared by its files.
 *
 * One instance fronts one upstream MCP server. Everything that talks to the
 * upstream runs on the instance's own thread and libuv loop (the "I/O
 * thread"): the link (a child process over stdio, or HTTP), the protocol
 * state (negotiation, ids, pending requests), the lists it caches. Calls
 * reach it from the gateway's loops (or the pool) through a bounded queue
 * and an async wake-up; answers go back with host->call_resume, which any
 * thread may use. So none of the upstream's state needs a lock except what
 * other threads read: the cached lists and the hand-off of a call between
 * its op, its cancel op and the I/O thread (up->lock). */
#ifndef BACKEND_MCP_UPSTREAM_H
#define BACKEND_MCP_UPSTREAM_H

#include <mcpg/sdk.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#include "mcp_config.h"
#include "upcred.h"

#define MCP_MODERN_VERSION "2026-07-28"
#define MCP_LEGACY_VERSION "2025-11-25"

typedef struct upstream upstream;
typedef struct client_call client_call;
typedef struct up_request up_request;
typedef struct park park;
typedef struct mcp_link mcp_link;
typedef struct param_tool param_tool;

enum { WIRE_UNKNOWN, WIRE_STATELESS, WIRE_LEGACY };
enum { UP_DOWN, UP_CONNECTING, UP_READY, UP_STOPPING };
enum { LIST_TOOLS, LIST_PROMPTS, LIST_RESOURCES, LIST_TEMPLATES, LIST_COUNT };

/* ---- the link: how bytes reach the upstream ---- */
typedef struct mcp_link_ops {
    const char *what; /* "stdio" or "http": for messages */
    int (*start)(mcp_link *l);
    /* Send one JSON-RPC message. r: the request it is (NULL for a response
     * or notification); an HTTP link answers on that request's stream. */
    int (*send)(mcp_link *l, const char *json, size_t n, up_request *r);
    /* The upstream request r is abandoned (cancelled): an HTTP link closes
     * its stream; may be NULL. */
    void (*abandon)(mcp_link *l, up_request *r);
    /* r is about to be freed: drop any pointer to it; may be NULL. */
    void (*forget)(mcp_link *l, up_request *r);
    /* The handshake is done; may be NULL. */
    void (*ready)(mcp_link *l);
    /* The gateway's own token it waited for came (or did not): I/O thread. */
    void (*credential)(mcp_link *l);
    /* Stop: close everything; link_down is not called after. */
    void (*stop)(mcp_link *l);
    void (*destroy)(mcp_link *l);
} mcp_link_ops;

struct mcp_link {
    const mcp_link_ops *ops;
    upstream *up;
};

mcp_link *link_stdio_new(upstream *up);
mcp_link *link_http_new(upstream *up, char *err, size_t errcap);
/* The HTTP link's upstream (parsed URL, TLS context): immutable, any thread. */
const struct up_target *link_http_target(const mcp_link *l);
/* The headers of a stateless-wire POST carrying json (any thread), read
 * from the message, or given (name NULL: no Mcp-Name). */
void link_http_stateless_headers(const upstream *up, const client_call *pc, const char *json,
                                 size_t n, mcpg_buf *h);
void link_http_stateless_head(const upstream *up, const client_call *pc, const char *method,
                              size_t method_len, const char *name, size_t name_len, mcpg_buf *h);
/* The configured headers and, for a call (pc, or NULL) with a brokered
 * credential, its Authorization instead of a configured one. */
void link_http_credential_lines(const upstream *up, const client_call *pc, mcpg_buf *h);
/* A call's W3C trace headers as the client sent them (valid ones only),
 * ready to add to the upstream request's head; NULL when it sent none. */
char *calls_trace_lines(upstream *up, client_call *pc, mcpg_call *call);

/* From a link, on the I/O thread: one whole message from the upstream.
 * on: the request whose stream carried it (HTTP), or NULL. */
void up_on_message(upstream *up, const char *json, size_t n, up_request *on);
/* The link can carry messages now: the handshake starts. */
void up_link_up(upstream *up);
/* The link failed (child exited, connection refused, session gone). */
void up_link_down(upstream *up, const char *why);
/* An HTTP link: the request r's stream ended without its answer. */
void up_request_failed(upstream *up, up_request *r, const char *why);

/* ---- requests the gateway sent upstream ---- */
typedef enum { UR_CALL, UR_DISCOVER, UR_INIT, UR_LIST, UR_SUBSCRIBE, UR_LISTEN } up_request_kind;

struct up_request {
    int64_t id;
    up_request_kind kind;
    client_call *pc;             /* UR_CALL: the client call waiting (NULL while parked) */
    park *parked;          /* UR_CALL: waiting for a stateless client's retry */
    int list;              /* UR_LIST: which */
    void *link_ctx;        /* the link's own (an HTTP exchange) */
    uint64_t sent_ms;      /* when it was made (the I/O loop's clock) */
    bool shared;           /* UR_CALL: another call was in flight at some moment of its life */
    up_request *next;
};

/* A server-to-client request the upstream sent while one of our calls ran,
 * waiting for the client's answer. */
typedef struct asked {
    char *id_json;      /* the upstream's request id, as JSON text */
    char *method;
    char *params_json;  /* or NULL */
} asked;

/* A client call in flight to the upstream. Its first field tells it from
 * a direct-path exchange (fast.c) in the call's slot. */
#define PCALL_TAG 0x4c414350u /* "PCAL" */
struct client_call {
    uint32_t tag;
    upstream *up;
    mcpg_call *call;       /* NULL once claimed for the answer (under up->lock) */
    uint32_t method;
    bool cancel_queued;    /* under up->lock: a cancel job is queued */
    int holds;             /* under up->lock: jobs and client questions that still point at pc */
    bool orphan;           /* under up->lock: answered; the last hold frees it */
    char *method_name;     /* "tools/call" */
    char *params;          /* the upstream request's params (JSON), built on the caller's thread */
    char *meta;            /* the client's _meta members to pass on ({...}), or NULL */
    char *extra;           /* members added to params by an input_required round, or NULL */
    char *client_token;    /* the client's progressToken as JSON text, or NULL */
    char *request_state;   /* a stateless client's retry: requestState (decoded) */
    char *input_responses; /* ... and its inputResponses object (JSON) */
    char *caps;            /* the client's capabilities (JSON) or NULL */
    char *mcp_name;        /* the Mcp-Name header's value (the upstream's name or uri), or NULL */
    char *trace_lines;     /* "traceparent: ...\r\n" (and tracestate) from the client, or NULL */
    uint32_t trace_span;   /* the upstream request's client span (host->call_trace_upstream), or 0 */
    int http_status;       /* the upstream's answer's HTTP status, once its head came */
    char *param_lines;     /* "Mcp-Param-<name>: value\r\n" for the tool's annotated
                              arguments (params.c), or NULL: the stateless wire's only */
    char *owner;           /* who called (host->call_owner: principal 0x1f tenant), or NULL */
    char *relay_to;        /* a retry relayed from another replica: the subject its outcome
                              is published on (park_relay.c), else NULL; then call is NULL */
    uint64_t relay_seq;    /* ... and the number that replica waits under */
    char *auth_line;       /* "Authorization: Bearer ...\r\n" brokered for this call
                              (call_cred.c), or NULL */
    char caller_key[65];   /* whose credentials: "" when shared by every caller */
    unsigned char cred_key[32]; /* the cached token's key (upcred_refused_key) ... */
    bool cred_keyed;       /* ... when it came from the cache */
    up_request *ur;
    client_call *qnext;
};

/* ---- the upstream ---- */
typedef struct job job;

struct upstream {
    const mcpg_host *h;
    mcpg_instance *self;
    const char *name;       /* the instance's name: every error names it */
    mcp_settings cfg;

    pthread_t thread;
    bool thread_started;
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t retry_timer, park_timer, listen_timer;

    pthread_mutex_t lock;   /* jobs, lists, and the call hand-off */
    job *jobs_head, *jobs_tail;
    size_t n_jobs;
    bool stopping;          /* under lock */
    mcpg_buf lists[LIST_COUNT]; /* JSON arrays, under lock; empty: offers none */
    bool has_list[LIST_COUNT];
    atomic_bool lists_in;   /* the first lists came (set once, by the I/O thread) */
    param_tool *param_tools; /* under lock: the listed tools with x-mcp-header annotations */
    size_t n_param_tools;
    mcpg_buf fetch[LIST_COUNT]; /* I/O thread: a list's pages as they come */

    /* I/O thread only */
    mcp_link *link;
    int state, wire;
    int64_t next_id;
    up_request *pending;
    park *parks;
    char server_caps[4096];
    char last_error[800];
    uint64_t backoff_ms;
    uint64_t ready_since_ms;
    char *session_id;       /* legacy HTTP: Mcp-Session-Id */
    char protocol[32];      /* the version agreed */
    uint32_t lists_loading; /* bits (1 << LIST_*) of lists being fetched */
    uint32_t lists_told;    /* MCPG_LIST_* bits fetched, not yet told to the kernel */
    char **subs; size_t n_subs; /* resources some client subscribed to */
    mcpg_buf client_info;   /* the stateless envelope's clientInfo member, built once */
    uint64_t said_window_ms;    /* up_log_said: the second being counted */
    uint32_t said_in_window;    /* ... lines written in it */
    uint64_t said_dropped;      /* ... lines not written since the last report */
    uint64_t untied_dropped;    /* messages tied to no call that reached nobody */
    uint64_t caller_untied_dropped; /* ... on a caller's session (caller_sessions.c) */
    uint64_t undeclared_refused; /* questions a client had not declared it takes */

    /* the direct path (fast.c): any loop thread */
    atomic_bool fast_ok;    /* a stateless upstream over HTTP, ready */
    atomic_llong fast_next_id;
    struct up_pool **fast_pools; /* per loop, made on it */
    uint32_t n_fast_pools;
    up_request *listen;           /* the stateless wire's subscriptions/listen */

    /* park_relay.c: this process's name for the instance in park tokens */
    char park_tag[17];
    struct park_relay *relay; /* NULL without a coordinator */

    upcred *cred;           /* credentials (lib/upcred): NULL for static */
    const char *reply_key;  /* I/O thread: whose session a message the gateway sends without
                               a request goes to (caller_sessions.c), or NULL: the gateway's */
};

/* Jobs from other threads. */
typedef enum { JOB_CALL, JOB_CANCEL, JOB_REPLY, JOB_SUBSCRIBE, JOB_RETRY, JOB_CREDENTIAL } job_kind;
struct job {
    job_kind kind;
    client_call *pc;          /* CALL, CANCEL */
    char *text;         /* REPLY: the whole JSON-RPC response to send; SUBSCRIBE: uri;
                           RETRY: the members to add to the call's params, or NULL on failure */
    int on;             /* SUBSCRIBE */
    char caller_key[65]; /* REPLY: the caller whose session asked ("" : the gateway's) */
    job *next;
};

#define JOBS_MAX 4096

/* upstream.c */
int up_init(upstream *up, const mcpg_host *h, mcpg_instance *self, const mcp_settings *cfg);
int up_start(upstream *up);
void up_stop(upstream *up);
void up_free(upstream *up);
/* Any thread: queue a job and wake the I/O thread; non-zero when full or stopping. */
int up_post(upstream *up, job *j);
int up_send_request(upstream *up, up_request *r, const char *method, const char *params_json);
/* initialize's params on the session wire (cap >= 512). */
void up_initialize_params(const upstream *up, char *out, size_t cap);
/* A response to the upstream's request id: body is its "result":... or "error":... member. */
void up_send_response(upstream *up, const char *id_json, size_t id_len, const char *body);
/* A line of what the upstream says outside any call (its stderr, a log
 * message on no call's stream) into the gateway's log, at most UP_SAID_PER_S
 * a second: an upstream may say things for ever. The lines beyond are
 * counted, and the count logged once that second is over. I/O thread. */
#define UP_SAID_PER_S 20
void up_log_said(upstream *up, const char *fmt, ...) MCPG_PRINTF(2, 3);
up_request *up_request_new(upstream *up, up_request_kind kind);
void up_request_free(upstream *up, up_request *r);
int up_list_copy(upstream *up, int list, mcpg_buf *out);
/* The _meta every request carries on the stateless wire. */
int up_modern_meta(upstream *up, mcpg_buf *b, const char *caps);
uint64_t up_now_ms(upstream *up);

/* listen.c (I/O thread): what the upstream says outside calls */
void listen_ready(upstream *up);
void listen_ended(upstream *up, up_request *r);
void listen_forget(upstream *up);
void listen_subscribe(upstream *up, const char *uri, int on);
void listen_resubscribe(upstream *up);
void listen_free(upstream *up);

/* call_cred.c (the call's loop): a call's brokered credential, then next */
typedef mcpg_status (*cred_next_fn)(upstream *up, client_call *pc, mcpg_call *call);
/* The op's thread: get pc's credential (pc is the callee's from here: freed
 * on failure), then next(up, pc, call) on the call's loop; the op's answer. */
mcpg_status cred_then(upstream *up, client_call *pc, mcpg_call *call, cred_next_fn next);
bool cred_is(const void *slot_value);
void cred_cancel(upstream *up, void *held);

/* calls.c (I/O thread unless said) */
/* The op's thread: build the client_call for a client call; NULL with the call's error set. */
client_call *calls_prepare(upstream *up, mcpg_call *call, uint32_t method);
void calls_free(client_call *pc);
void calls_start(upstream *up, client_call *pc);
void calls_cancel(upstream *up, client_call *pc);
/* The client answered a stateless upstream's input_required round: send
 * the call again with `extra` (inputResponses and requestState members),
 * or fail it (extra NULL, why says what went wrong). */
void calls_retry(upstream *up, client_call *pc, char *extra, const char *why);
/* Any thread: pc is referenced from elsewhere (a queued job, a question). */
void calls_hold(upstream *up, client_call *pc);
/* I/O thread: that reference is gone; true when pc was freed. */
bool calls_unhold(upstream *up, client_call *pc);
/* The upstream answered r (a UR_CALL). msg is the whole response. */
void calls_answered(upstream *up, up_request *r, const char *msg, size_t n);
/* The upstream asked the client something while r ran (r may be NULL on stdio). */
void calls_asked(upstream *up, up_request *r, const char *id_json, size_t id_len, const char *method,
                 const char *params, size_t params_len);
/* A notification about a call (progress, log message). */
void calls_notify(upstream *up, up_request *r, const char *method, const char *params, size_t n);
/* The whole request for pc under id (the stateless envelope when asked). */
int calls_build_message(upstream *up, const client_call *pc, int64_t id, bool stateless, mcpg_buf *b);
/* An upstream's answer, read once: its result or error, and the result's
 * resultType member (.p NULL when absent). */
typedef struct up_answer {
    mcpg_json_span result, error;
    mcpg_json_span rt_key, rt_val;
} up_answer;
/* One pass over the answer's members (scanning, so checking, every value)
 * and one over its result's: 0, or -1 when it is not a JSON object. */
int calls_read_answer(const char *msg, size_t n, up_answer *a);
/* Set the upstream's answer as c's outcome and resume it (any one thread). */
void calls_answer(upstream *up, client_call *pc, mcpg_call *c, const up_answer *a);
/* A stateless upstream's input_required for a client that can be asked:
 * the questions go out and the retry follows on the I/O thread; false when
 * the answer is not that (or the client cannot be asked). */
bool calls_ask_round(upstream *up, client_call *pc, const up_answer *a);
/* A progress notification for pc's client, with its own token (any one thread). */
void calls_progress(upstream *up, client_call *pc, const char *params, size_t n);
/* Fail a call with a JSON-RPC error naming the instance. */
void calls_fail(upstream *up, client_call *pc, int64_t code, const char *fmt, ...) MCPG_PRINTF(4, 5);
/* The upstream refused the call's brokered credential (HTTP 401, its
 * WWW-Authenticate challenge or NULL): the token leaves the cache and the
 * call fails with the challenge in the error's data. Any thread that owns pc. */
void calls_refused(upstream *up, client_call *pc, int status, const char *www);
/* The link went down: every call waiting fails; parked ones too. */
void calls_fail_all(upstream *up, const char *why);
void calls_expire_parks(upstream *up);
void calls_mark_shared(upstream *up, up_request *started); /* a call's up_request was added */
void calls_unreadable(upstream *up, up_request *r); /* r's answer cannot be parsed: fail it now */
/* The call an untied message may reach (untied_messages "sole_call"), or NULL. */
up_request *calls_sole(upstream *up);

/* params.c: the Mcp-Param headers toward a stateless upstream */
/* I/O thread, once the tools list is replaced: its annotations are read. */
void params_index(upstream *up);
void params_free(upstream *up);
/* Any thread: the header lines for a call of the upstream's tool with
 * args (an object's text), or NULL when there are none. */
char *params_lines(upstream *up, const char *tool, const char *args, size_t n);

/* client_caps.c: what a client may be asked (any thread). caps: the
 * client's declared capabilities (JSON) or NULL (declared none). */
enum {
    NEED_SAMPLING = 1u << 0,       /* sampling undeclared */
    NEED_SAMPLING_TOOLS = 1u << 1, /* sampling with tools, sampling.tools undeclared */
    NEED_ELICIT = 1u << 2,         /* elicitation undeclared (form mode asked) */
    NEED_ELICIT_FORM = 1u << 3,    /* elicitation.form */
    NEED_ELICIT_URL = 1u << 4,     /* elicitation.url */
    NEED_ROOTS = 1u << 5,
    NEED_MODE = 1u << 6,           /* elicitation declared, not the mode asked */
    NEED_METHOD = 1u << 7,         /* not a request an MCP client answers at all */
};
/* What the client lacks for the server-to-client request method (NEED_*
 * bits), 0 when it may be asked. */
uint32_t caps_needed(const char *caps, const char *method, size_t method_len,
                     const char *params, size_t params_len);
/* ... for every question of an input_required result. */
uint32_t caps_needed_by_round(const char *caps, const char *result, size_t n);
/* -32021's data: {"requiredCapabilities":{...}} naming what need lacks. */
int caps_required_json(uint32_t need, mcpg_buf *out);
/* The error the upstream's question is answered with. */
void caps_refusal(uint32_t need, const char *method, int64_t *code, char *msg, size_t cap);

/* park_relay.c: a stateless client's retry for a question parked on
 * another replica reaches it over the coordinator's pub/sub. */
#define PARK_PREFIX "mcpg-park-"
/* create(): the tag, and the relay when the gateway has a coordinator. */
int relay_init(upstream *up);
void relay_free(upstream *up);
void relay_worker_start(upstream *up, mcpg_worker *w);
void relay_worker_stop(upstream *up, mcpg_worker *w);
/* The op's thread: pc is a retry for a park another replica holds; true
 * when the relay took it (pc is then the relay's, the call answered later
 * or already), false when pc goes on as a local retry. */
bool relay_try(upstream *up, client_call *pc, mcpg_call *call, mcpg_status *st);
/* mb_cancel, under up->lock: the slot holds a relay waiter; true when
 * this cancel took it, and then answers it with relay_cancelled after the
 * unlock (otherwise a reply or the sweep answers it, and may free it). */
bool relay_is(const void *slot_value);
bool relay_cancel_locked(upstream *up, void *waiter);
void relay_cancelled(upstream *up, void *waiter);
/* The holder's side, I/O thread: a relayed client_call's outcome goes back. */
void relay_ack(upstream *up, const client_call *pc);
void relay_error(upstream *up, const client_call *pc, int64_t code, const char *message);
void relay_answer(upstream *up, const client_call *pc, const char *msg, size_t n);
void relay_round(upstream *up, const client_call *pc, const char *req, size_t rn, const char *token);
void relay_client_call_gone(upstream *up); /* any thread: calls_free of a relayed client_call */

/* fast.c: the direct path. On a loop thread: true when it took the call
 * (its answer comes on this loop, without the I/O thread). */
bool fast_try(upstream *up, client_call *pc, mcpg_call *call);
/* The cancel op found a direct-path exchange in the call's slot. */
void fast_cancel(void *fc);
bool fast_is(const void *slot_value);
/* On w's loop as it stops: its connections close, its calls are answered. */
void fast_worker_stop(upstream *up, uint32_t worker_index);
int fast_init(upstream *up);
void fast_free(upstream *up);

/* task_ids.c: does a JSON text mention "taskId"; copy an object with every
 * taskId given the "<instance>." prefix clients use. */
bool task_ids_present(const char *json, size_t n);
int task_ids_for_client(upstream *up, const char *obj, size_t n, mcpg_buf *out);

#endif
