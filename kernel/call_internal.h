/* What the three files of a call share, and nothing else of the kernel:
 *   call.c      the call object: its life from submit to release, the
 *               per-worker free list, what stages and backends read and
 *               write on it (the host table's call_* slots)
 *   pipeline.c  where a call goes next: the stage order, audit events,
 *               the answer
 *   call_identity.c  who the call is and where it came from (the host
 *               table's identity, peer, TLS and challenge slots)
 *   dispatch.c  how an op's answer gets back to the call's loop (the resume
 *               handshake), and backends run inline or on the pool (deadlines,
 *               request and header copies)
 * The rest of the kernel sees only what kernel.h declares. */
#ifndef MCPG_CALL_INTERNAL_H
#define MCPG_CALL_INTERNAL_H

#include "kernel.h"

#include <assert.h>

/* op_sync, op_begin/op_settle/op_resume and the call handle, shared with
 * the SDK's fake host (lib/hostcore/handshake.h). */
#include "handshake.h"
#include "ident.h"

enum phase { PH_IDENTITY, PH_POLICY, PH_LIMITS, PH_AUDIT_ALLOWED, PH_BACKEND, PH_AUDIT_DONE,
             PH_COMPLETE };
enum { SKIP_NONE, SKIP_EXPIRED, SKIP_CANCELLED };

/* A header value a pool backend looked up, copied (see pool_header_copy). */
typedef struct hdr_copy {
    struct hdr_copy *next;
    char value[];
} hdr_copy;

/* What only a call whose backend runs on the pool uses. Such a call can be
 * answered ("detached") when its deadline passes while the backend still
 * runs on its pool thread: from then on the loop and that thread both touch
 * the call, and these fields are what keeps that safe. */
typedef struct call_pool {
    pool_job job;                /* backend dispatch to the pool */
    op_sync op;                  /* the backend on a pool thread */
    mcpg_post post;              /* the pool backend's status, to the loop */
    int delivered;               /* status carried by post */
    bool detached;               /* timed out and answered; the backend may run on */
    uint8_t skipped;             /* SKIP_*: the pool never ran the backend */
    uint64_t deadline_us;
    struct mcpg_call *deadline_prev, *deadline_next; /* in the worker's pool_deadlines */
    /* A pool call that timed out is answered from here: the backend may still
     * be writing the call's result and error fields from its pool thread. */
    char timeout_msg[160];
    /* A pool backend may outlive the transport's request (the call timed
     * out and was answered): it reads these copies instead (kept across
     * recycling, like result), and copies of the headers it looks up. */
    mcpg_buf req_copy;
    pthread_mutex_t hdr_lock;    /* header lookups off the loop vs. answering */
    bool answered;               /* under hdr_lock: the transport's request is gone */
    hdr_copy *hdr_copies;
} call_pool;

/* A message for the call's client before its outcome, queued when it was
 * sent off the call's loop (messages.c). */
typedef struct call_msg {
    struct call_msg *next;
    size_t len;
    char json[];
} call_msg;

/* A request the server sent the call's client, awaiting its answer. */
typedef struct call_ask {
    uint64_t seq;                /* in its minted id: "mcpg-<worker>-<seq>" */
    mcpg_reply_fn fn;
    void *arg;
    uint64_t deadline_us;
    bool active;
} call_ask;

#define CALL_MAX_ASKS 4          /* server-to-client requests outstanding per call */
#define CALL_MAX_MSGS 256        /* messages queued off the loop per call */

typedef struct call_msgs {
    pthread_mutex_t lock;        /* the queue, the asks, `closed` */
    call_msg *head, *tail;
    unsigned count;
    bool posted;                 /* post is in the loop's queue */
    bool closed;                 /* answered: no more messages */
    bool asked;                  /* a request to the client was made in this life */
    bool recycle_deferred;       /* the last holder let go while post was queued */
    bool cancel_due;             /* post also runs the backend's cancel op (msgs_post_cancel) */
    mcpg_post post;
    call_ask asks[CALL_MAX_ASKS];
} call_msgs;

typedef struct call_trace call_trace; /* trace.c: a sampled call's spans */

struct mcpg_call {
    /* This object's current life, in every handle given out for it; a new
     * one from the process-wide counter (call.c, call_serial_take) when the
     * object is made and each time it is recycled, so a handle kept too long
     * is refused (see call_of), also by a new object at a freed one's
     * address. Kept across recycling. */
    _Atomic uint32_t serial;
    /* The newest serial given out in this life: the life's own, or that of
     * the last loop op's handle (each loop op takes one from the same
     * counter, call_op_serial_take). Every serial from `serial` to it names
     * this life (see call_of); 0 while the object is being reset. */
    _Atomic uint32_t last_serial;
    mcpg_post post;              /* a loop op's status, to the loop */
    struct mcpg_call *next_free;
    struct mcpg_call *live_prev, *live_next; /* the worker's calls not yet recycled */
    mcpg_worker *w;
    generation *gen;
    catset *cats;                /* the merged lists it was routed by (pinned) */
    const gen_server *srv;       /* the server it came in on (of gen), NULL: gen has none */
    const catalog *lists;        /* its server's lists in cats */
    mcpg_call_desc d;
    uint32_t method;
    const route *route;          /* the backend and its name for the item (NULL: unknown) */
    const char *target;          /* the item as the backend knows it (route->target or target_copy) */
    int list_kind;               /* CAT_* for a list method answered by the kernel, else -1 */
    const mcpg_buf *borrowed;    /* a whole list answer the generation keeps (lists) */
    uint32_t result_type;        /* mcpg_result_type */
    int phase;
    size_t idx;
    size_t limits_acquired;
    op_sync loop_op;             /* identity, policy, limits, audit; tagged with its handle's serial */
    atomic_int loop_stage;       /* CALL_STAGE_* of the op loop_op belongs to */
    bool cancel_sent;            /* the backend's cancel op has run */
    int delivered;               /* status carried by post */
    uint8_t life;                /* enum call_life: moved by call_life.c only */
    uint8_t holds;               /* HOLD_* bits: who still holds it (call_life.c only) */
    bool backend_failed, denied;
    bool outcome_audited;        /* every audit sink took its outcome's event (call_audited) */
    atomic_bool cancelled;       /* set on the loop, read by a pool backend too */
    uint64_t t0, tb0, tb1;
    call_trace *trace;           /* sampled for the telemetry instance, else NULL (trace.c) */
    uint64_t event_seq;          /* the audit event being emitted: one seq and */
    int64_t event_time_us;       /* one time for every sink that records it */
    uint64_t event_latency_us;   /* and one latency */
    mcpg_ident *ident;           /* who the call is (call_identity.c), or NULL */
    bool identity_ran;           /* the identity stage is behind it: call_owner answers */
    mcpg_buf owner;              /* call_owner's text (kept across recycling) */
    char *challenge;             /* WWW-Authenticate for a 401, or NULL */
    char peer[64];               /* the client's address, copied at submit ("" unknown) */
    mcpg_buf name_copy;          /* call_client_name of an unrouted call (kept across recycling) */
    const char *denied_stage;    /* "identity", "policy", "limits" when a stage refused */
    const mcpg_instance *denied_by;
    mcpg_buf audit_args;         /* the arguments as events show them (kept across recycling) */
    mcpg_buf audit_shown;        /* the result as events show it (kept across recycling) */
    bool audit_args_made;
    mcpg_buf result;
    mcpg_buf target_copy;        /* a resource uri as the client sent it (kept across recycling) */
    /* the request as judged (judge.c), kept across recycling: the target
     * decoded, a completion's ref rebuilt, params rebuilt when the client's
     * held members its method does not define or escaped names */
    mcpg_buf judged_name, judged_ref, judged_params;
    mcpg_buf state_params;       /* params with a retry's requestState unsealed (state_seal.c) */
    bool ref_judged, ref_is_prompt; /* completion/complete: judged_name is the ref's id */
    bool has_request_state;      /* judge.c saw params.requestState: state_seal.c checks it */
    bool args_judged;            /* d.args_json is a span the judge validated */
    char task_seal[33];          /* tasks methods: the seal the client's task id carried (task_seal.c) */
    size_t task_plain_len;       /* ... and the id's length without it */
    /* The legacy wire's session id, whole and NUL-terminated (audit, and
     * the client's replies are routed by it); kept across recycling. */
    mcpg_buf session;
    call_msgs msgs;              /* messages before the outcome (messages.c) */
    bool is_error;
    int64_t err_code;
    char err_msg[256];
    mcpg_buf err_data;
    int http_status;
    uint32_t retry_after;
    call_pool pool;
    uint32_t n_slots;
    void *slots[];
};

/* ---- call_life.c: the call's life, and who may move it ----
 *
 * A call object lives many lives (it is recycled). In each one it goes
 *
 *     LIFE_FREE --call_submit--> LIFE_RUNNING --complete()--> LIFE_ANSWERED
 *         ^                                                        |
 *         +------------- the last holder lets go ------------------+
 *
 *   LIFE_FREE      on its worker's free list, or being made; every handle
 *                  of a past life is refused (the serial moved on)
 *   LIFE_RUNNING   its stages and then its backend run; `phase` says where
 *   LIFE_ANSWERED  the transport's complete() has run, exactly once: the
 *                  outcome is fixed, no message goes out any more
 *
 * Holders say who may still touch the object, each from one moment to
 * another, and each is let go exactly once:
 *
 *   HOLD_TRANSPORT  call_submit .. call_release (which the transport may
 *                   call only once the call is answered)
 *   HOLD_BACKEND    a backend's op that may still touch the call: its job
 *                   queued or running on the pool, or an inline backend or
 *                   the events instance answering PENDING, until its answer,
 *                   expiry or refusal reaches the loop. A pool backend past
 *                   its deadline holds the call after it is answered
 *                   (pool.detached), and keeps its limits until it ends.
 *   HOLD_KERNEL     the kernel, while it ends a retiring generation's calls
 *                   one after another (answering one may release another)
 *
 * The object is recycled when no holder is left, and no queued post points
 * at it (messages.c defers the recycle to that post). All of it happens on
 * the call's loop; no other file writes `life` or `holds`. */
enum call_life { LIFE_FREE, LIFE_RUNNING, LIFE_ANSWERED };
enum call_holder { HOLD_TRANSPORT = 1u << 0, HOLD_BACKEND = 1u << 1, HOLD_KERNEL = 1u << 2 };

void call_life_start(mcpg_call *c);           /* FREE -> RUNNING, held by the transport */
void call_life_answer(mcpg_call *c);          /* RUNNING -> ANSWERED (before complete()) */
void call_hold(mcpg_call *c, unsigned holder);
/* holder lets go; the last one recycles the call: 0, or MCPG_ESTATE when
 * holder did not hold it or may not let go yet (nothing changes) */
int call_let_go(mcpg_call *c, unsigned holder);

static inline bool call_answered(const mcpg_call *c) { return c->life == LIFE_ANSWERED; }
static inline bool call_held_by(const mcpg_call *c, unsigned holder) {
    return (c->holds & holder) != 0;
}

/* ---- call.c ---- */

/* The handle a module is given for call c at `stage` (CALL_STAGE_*). */
static inline mcpg_call *call_handle(mcpg_call *c, unsigned stage) {
    return call_handle_make(c, stage, atomic_load_explicit(&c->serial, memory_order_relaxed));
}

void call_handle_refused(const mcpg_call *h, const char *slot); /* logs the module bug */

/* How far serial s comes after `from` in the counter's order (serials run
 * 1..CALL_SERIAL_MASK, then wrap). */
static inline unsigned serial_distance(uint32_t s, uint32_t from) {
    return ((unsigned)s + CALL_SERIAL_MASK - from) % CALL_SERIAL_MASK;
}

/* Was serial s given out in c's current life (to the transport, a backend,
 * or one of its loop ops)? Read life then last: a recycle stores them the
 * other way round, so a new life is never seen with the old one's range. */
static inline bool serial_of_life(mcpg_call *c, uint32_t s) {
    uint32_t life = atomic_load(&c->serial);
    uint32_t last = atomic_load(&c->last_serial);
    if (s == life) return true;
    return life && last && serial_distance(s, life) <= serial_distance(last, life);
}

/* The call a module's handle names, or NULL when the handle has outlived
 * its call (logged as a module bug naming the host slot). */
static inline mcpg_call *call_of(mcpg_call *h, const char *slot) {
    mcpg_call *c = call_handle_object(h);
    if (c && serial_of_life(c, call_handle_serial(h))) return c;
    call_handle_refused(h, slot);
    return NULL;
}

uint32_t call_op_serial_take(mcpg_call *c); /* the serial of a new loop op's handle */

/* Start an op on the loop (a stage instance, an audit sink): the handle its
 * module is given. It names this op alone: its serial is the op's own and
 * tags the op, so a resume kept from an earlier op (another instance of the
 * same stage, the same sink's other event) finishes nothing. */
static inline mcpg_call *loop_op_begin(mcpg_call *c, unsigned stage) {
    assert(op_state_of(&c->loop_op) == OP_IDLE);
    uint32_t serial = call_op_serial_take(c);
    atomic_store(&c->loop_stage, (int)stage);
    op_begin_tagged(&c->loop_op, serial);
    return call_handle_make(c, stage, serial);
}

void call_set_error(mcpg_call *c, int64_t code, int http, const char *fmt, ...)
    MCPG_PRINTF(4, 5);

/* The error a call answers with: the kernel's own for a timed-out pool call
 * (the backend may still write its fields), else what the stages set. */
static inline bool call_error_of(mcpg_call *c, int64_t *code, const char **msg) {
    if (c->pool.detached) {
        *code = MCPG_RPC_SERVER_ERROR;
        *msg = c->pool.timeout_msg;
        return true;
    }
    *code = c->err_code;
    *msg = c->err_msg;
    return c->is_error;
}

/* ---- task_seal.c ---- */
/* The task key: from a secret (gateway.secret_env), else random once per process. */
void task_seal_configure(const char *secret, size_t n);
/* id ends in "~<seal>": the seal into seal (33 bytes) and the length before it; else 0. */
size_t task_seal_split(const char *id, size_t n, char *seal);
/* The seal is the one c's caller would have been given for id (after identity). */
bool task_seal_matches(mcpg_call *c, const char *id, size_t n, const char *seal);
/* json with every "taskId" string member sealed for c's caller, into out: 0;
 * 1 when json holds no task id (out untouched); MCPG_ENOMEM. */
int task_seal_json(mcpg_call *c, const char *json, size_t n, mcpg_buf *out);
/* The key itself (32 bytes), for the seals derived from it (state_seal.c). */
void task_seal_key(unsigned char key[32]);
/* A field of a sealed message: its length (8 bytes, big-endian), then its
 * bytes, so that no field's text can pass for another's. */
int seal_length_append(mcpg_buf *b, uint64_t n);
int seal_field_append(mcpg_buf *b, const char *p, size_t n);

/* ---- state_seal.c ---- */
/* An input_required result's requestState sealed for c's caller and request:
 * 0 (nothing to seal, or sealed in c->result), or MCPG_ENOMEM. */
int state_seal_result(mcpg_call *c);
/* A retry's requestState (after identity): true when absent, or sealed for
 * this caller and request (then taken off: params carry the state as it was
 * minted); false with the call's -32602 set. */
bool state_seal_check(mcpg_call *c);

/* ---- judge.c ---- */
/* The one reading of a client's request: 0, or -1 with the error set (the
 * call then reaches no stage and no backend). */
int call_judge(mcpg_call *c);

/* ---- call_identity.c ---- */
void call_identity_clear(mcpg_call *c);
/* Who the caller is as one string: principal 0x1f tenant, or "" (host->call_owner). */
const char *call_owner_of(mcpg_call *c, size_t *len);
/* The name of the virtual server the call came to, "" for /mcp. */
static inline const char *call_server_name(const mcpg_call *c) {
    return c->srv ? c->srv->name : "";
}
/* The name the client used for the call's item, NUL-terminated, or NULL. */
const char *call_client_name_of(mcpg_call *c);

/* ---- messages.c ---- */
void msgs_init(mcpg_call *c);     /* a new life */
void msgs_flush(mcpg_call *c);    /* on the loop: deliver what was queued, in order */
void msgs_close(mcpg_call *c);    /* on the loop, as the call is answered */
void msgs_destroy(mcpg_call *c);
/* On the loop, no holder left: true when a queued post still points at the
 * call (it recycles the call when it runs). */
bool msgs_defer_recycle(mcpg_call *c);
/* Any thread: the backend's cancel op is to run on the call's loop, through
 * the same post as queued messages (so the call is not recycled under it). */
void msgs_post_cancel(mcpg_call *c);
void call_recycle(mcpg_call *c);

/* ---- pipeline.c ---- */
void pipeline_run(mcpg_call *c); /* from the call's phase on, until an op is pending */
void pipeline_continue(mcpg_call *c, mcpg_status st); /* a pending op answered st */
/* Give back what the limits stage admitted; once per call, when its backend
 * has really stopped working (a timed-out pool backend may run on). */
void pipeline_release_limits(mcpg_call *c);

/* ---- trace.c ----
 * Each hook but trace_begin runs only for a sampled call (c->trace set):
 * an unsampled call pays the branch that guards it. */
void trace_begin(mcpg_call *c);  /* at submit, with a telemetry instance: sample, maybe trace */
void trace_phase(mcpg_call *c);  /* the pipeline is at c->phase: stage spans open and close */
void trace_finish(mcpg_call *c); /* answered: every span to the telemetry instance */
void trace_free(mcpg_call *c);   /* as the call is recycled */

/* ---- dispatch.c ---- */
mcpg_status dispatch_backend(mcpg_call *c);
/* A pool backend looking up a header off the call's loop. */
const char *pool_header_copy(mcpg_call *c, const char *lname, size_t *len);
/* The call is being answered while its backend is still on the pool. */
void pool_request_gone(mcpg_call *c);
/* The client went away: the backend's cancel op, if its op is pending. */
void backend_cancel_if_pending(mcpg_call *c);
/* Its generation retires and c is still unanswered at the deadline. */
void call_give_up_retiring(mcpg_call *c, const char *why);

#endif
