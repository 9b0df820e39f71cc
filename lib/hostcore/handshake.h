/* What the kernel and the SDK's fake host share about running a module's op
 * for a call, so the two cannot drift: the resume handshake, the call
 * handle, and the framing of a call's messages to its client and of the
 * client's replies (rpc_msg.c). Internal: not installed, not part of the ABI.
 *
 * The resume handshake. An op runs with its op_sync in OP_RUNNING. The
 * invoker settles what the op returned (op_settle); a resume (op_resume) may
 * come from any thread, before or after the op returned PENDING:
 *   RUNNING --op returns PENDING--> PENDING --resume--> IDLE  (resumer delivers)
 *   RUNNING --resume--> EARLY --op returns--> IDLE            (invoker carries on)
 * A resume in any other state finishes nothing: a module bug.
 *
 * The call handle. What a module holds as `mcpg_call *` is one 64-bit word:
 * the call object's address without its low 6 bits (call objects are
 * aligned to CALL_OBJECT_ALIGN, 64 bytes, so those are 0), the stage the
 * handle was given to (3 bits) and the serial of the object's current life
 * (19 bits). The host checks the serial on every slot, so a handle kept
 * past its call's life (the object since recycled for another client's
 * call) is refused and logged instead of acting on someone else's call; and
 * a resume says by its stage which op it finishes. User-space heap
 * addresses fit in 48 bits on every Linux target (higher ones only when
 * mmap is asked for them): call_handle_fits checks the address and its
 * alignment where a call object is allocated. A module sees an opaque
 * pointer and never dereferences it. */
#ifndef MCPG_HOSTCORE_HANDSHAKE_H
#define MCPG_HOSTCORE_HANDSHAKE_H

#include <mcpg/abi.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- the resume handshake ---- */

enum op_state { OP_IDLE, OP_RUNNING, OP_PENDING, OP_EARLY };

/* One op_sync can serve op after op (the kernel's loop op: each stage
 * instance, each audit sink). Such an op is begun with a tag (its handle's
 * serial), kept in the state word above the op_state bits, and a resume
 * names the tag: one meant for an earlier op finds no state of its own to
 * change, even while the next op begins. Untagged ops use tag 0. */
#define OP_STATE_BITS 3
#define OP_STATE_MASK ((1 << OP_STATE_BITS) - 1)

typedef struct op_sync {
    atomic_int state;  /* enum op_state | tag << OP_STATE_BITS */
    atomic_int status; /* what the resume said, read after OP_EARLY */
} op_sync;

static inline int op_state_of(op_sync *op) { return atomic_load(&op->state) & OP_STATE_MASK; }

static inline void op_begin_tagged(op_sync *op, unsigned tag) {
    atomic_store(&op->state, (int)(tag << OP_STATE_BITS) | OP_RUNNING);
}

static inline void op_begin(op_sync *op) { op_begin_tagged(op, 0); }

static inline bool op_outstanding(op_sync *op) {
    int s = op_state_of(op);
    return s == OP_RUNNING || s == OP_PENDING;
}

/* The invoker, once the op returned st: the op's final answer, or
 * MCPG_PENDING when the resume is still to come. */
static inline mcpg_status op_settle(op_sync *op, mcpg_status st) {
    int tag = atomic_load(&op->state) & ~OP_STATE_MASK; /* only the invoker changes it */
    if (st != MCPG_PENDING) {
        atomic_store(&op->state, tag | OP_IDLE);
        return st;
    }
    int expect = tag | OP_RUNNING;
    if (atomic_compare_exchange_strong(&op->state, &expect, tag | OP_PENDING)) return MCPG_PENDING;
    atomic_store(&op->state, tag | OP_IDLE); /* resumed before it returned */
    return (mcpg_status)atomic_load(&op->status);
}

enum { RESUME_TAKEN, RESUME_DELIVER, RESUME_NOT_WAITING };

/* The resumer of the op begun with `tag`: RESUME_TAKEN when the op is still
 * running (its invoker carries on with st), RESUME_DELIVER when it had
 * returned PENDING (the resumer hands st to the call's loop),
 * RESUME_NOT_WAITING otherwise (another op's tag: its status untouched). */
static inline int op_resume_tagged(op_sync *op, unsigned tag, mcpg_status st) {
    int t = (int)(tag << OP_STATE_BITS);
    if ((atomic_load(&op->state) & ~OP_STATE_MASK) != t) return RESUME_NOT_WAITING;
    atomic_store(&op->status, st);
    int expect = t | OP_RUNNING;
    if (atomic_compare_exchange_strong(&op->state, &expect, t | OP_EARLY)) return RESUME_TAKEN;
    expect = t | OP_PENDING;
    if (atomic_compare_exchange_strong(&op->state, &expect, t | OP_IDLE)) return RESUME_DELIVER;
    return RESUME_NOT_WAITING;
}

static inline int op_resume(op_sync *op, mcpg_status st) { return op_resume_tagged(op, 0, st); }

/* ---- call handles ---- */

/* Who a handle was given to. A resume finishes the op of its handle's stage
 * only. Append only (3 bits). */
enum call_stage {
    CALL_STAGE_TRANSPORT = 0, /* call_submit .. call_release */
    CALL_STAGE_IDENTITY = 1,
    CALL_STAGE_POLICY = 2,
    CALL_STAGE_LIMITS = 3,
    CALL_STAGE_AUDIT = 4,
    CALL_STAGE_BACKEND = 5,
    CALL_STAGE_EVENTS = 6,
    CALL_STAGE_COUNT = 7
};

#define CALL_OBJECT_ALIGN 64u     /* call objects are allocated on this boundary */
#define CALL_HANDLE_LOW_BITS 6    /* log2(CALL_OBJECT_ALIGN): always 0 in an object's address */
#define CALL_HANDLE_ADDR_BITS 42  /* a 48-bit address without its low 6 bits */
#define CALL_HANDLE_STAGE_SHIFT CALL_HANDLE_ADDR_BITS
#define CALL_HANDLE_SERIAL_SHIFT (CALL_HANDLE_ADDR_BITS + 3)
#define CALL_SERIAL_MASK 0x7ffffu /* 19 bits; 0 is never a live serial */

static inline bool call_handle_fits(const void *obj) {
    uint64_t a = (uint64_t)(uintptr_t)obj;
    return (a >> (CALL_HANDLE_ADDR_BITS + CALL_HANDLE_LOW_BITS)) == 0 &&
           (a & (CALL_OBJECT_ALIGN - 1)) == 0;
}

/* The serial of an object's next life (never 0). */
static inline uint32_t call_serial_next(uint32_t serial) {
    serial = (serial + 1u) & CALL_SERIAL_MASK;
    return serial ? serial : 1;
}

static inline mcpg_call *call_handle_make(const void *obj, unsigned stage, uint32_t serial) {
    uint64_t h = (uint64_t)(uintptr_t)obj >> CALL_HANDLE_LOW_BITS;
    h |= (uint64_t)(stage & 7u) << CALL_HANDLE_STAGE_SHIFT;
    h |= (uint64_t)(serial & CALL_SERIAL_MASK) << CALL_HANDLE_SERIAL_SHIFT;
    return (mcpg_call *)(uintptr_t)h;
}

static inline void *call_handle_object(const mcpg_call *h) {
    uint64_t a = (uint64_t)(uintptr_t)h & ((UINT64_C(1) << CALL_HANDLE_ADDR_BITS) - 1);
    return (void *)(uintptr_t)(a << CALL_HANDLE_LOW_BITS);
}

static inline unsigned call_handle_stage(const mcpg_call *h) {
    return (unsigned)((uint64_t)(uintptr_t)h >> CALL_HANDLE_STAGE_SHIFT) & 7u;
}

static inline uint32_t call_handle_serial(const mcpg_call *h) {
    return (uint32_t)((uint64_t)(uintptr_t)h >> CALL_HANDLE_SERIAL_SHIFT) & CALL_SERIAL_MASK;
}

/* ---- the rules both hosts apply (call_rules.c) ---- */

/* The handle an instance's op is given: the stage its kind runs at (the
 * events instance: CALL_STAGE_EVENTS). */
unsigned call_stage_of_kind(uint32_t kind);
const char *call_stage_name(unsigned stage); /* "transport", "identity", ... */

/* The backend op that answers method (tools/call, resources/read,
 * prompts/get, completion/complete, the tasks methods), NULL when the
 * backend does not offer it. */
struct mcpg_backend_ops;
typedef mcpg_status (*call_backend_op)(void *instance, mcpg_call *call);
call_backend_op call_backend_op_for(const struct mcpg_backend_ops *ops, uint32_t method);

/* ---- messages before the outcome ---- */

/* {"jsonrpc":"2.0",["id":"<id>",]"method":M[,"params":P]} appended to b: 0 or
 * MCPG_ENOMEM. id is a minted one (nothing to escape) or NULL. */
int mcpg__rpc_frame(mcpg_buf *b, const char *id, const char *method, const char *params,
                    size_t plen);
/* The reply a client's JSON-RPC response body carries; pointers into body,
 * the error message decoded into msg (msgcap bytes). */
void mcpg__rpc_reply(const char *body, size_t n, mcpg_reply *r, char *msg, size_t msgcap);

#endif
