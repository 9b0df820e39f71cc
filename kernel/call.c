/* The call object: its life from call_submit to call_release, and what
 * stages and backends read and write on it (the host table's call_* slots).
 * Where a call goes is pipeline.c; how its backend runs is dispatch.c.
 *
 * Call objects are recycled through a per-worker free list with their result
 * buffer kept, so a call in steady state allocates nothing. */
#include "call_internal.h"

#include <malloc.h> /* malloc_trim */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

/* ---- handles that outlived their call ---- */

/* A module that keeps a call handle past the op it was given to, and uses
 * it once the call object serves another request, is refused here. The log
 * is rate-limited: a module stuck in a loop must not flood it. */
/* One more refusal counted in *count: its number when it is to be logged
 * (the 1st, 2nd, 4th, 8th, ...), else 0. */
static unsigned long refusal_to_log(atomic_ulong *count) {
    unsigned long n = atomic_fetch_add(count, 1) + 1;
    return (n & (n - 1)) == 0 ? n : 0;
}

void call_handle_refused(const mcpg_call *h, const char *slot) {
    static atomic_ulong refused;
    unsigned long n = refusal_to_log(&refused);
    if (n)
        klog(MCPG_LOG_ERROR, "kernel",
             "host->%s with a call handle whose call has ended (module bug; %lu so far)",
             slot, n);
    (void)h;
}

/* ---- the transport's own slots ---- */


/* call_cancel, call_outcome and call_release speak for the client's side
 * of the call: only the handle call_submit gave the transport may use them.
 * A stage or backend that calls them with the handle its op was given
 * (cancelling its own call, releasing the transport's reference under it)
 * is refused, logged as its bug (rate-limited as stale handles are). */
static mcpg_call *transport_call_of(mcpg_call *h, const char *slot) {
    unsigned stage = call_handle_stage(h);
    if (stage == CALL_STAGE_TRANSPORT) return call_of(h, slot);
    static atomic_ulong refused;
    unsigned long n = refusal_to_log(&refused);
    if (n)
        klog(MCPG_LOG_ERROR, "kernel",
             "host->%s is the transport's; called with the handle of a call's %s stage "
             "(module bug; %lu so far): refused", slot, call_stage_name(stage), n);
    return NULL;
}

/* ---- errors set by the kernel itself ---- */

void call_set_error(mcpg_call *c, int64_t code, int http, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err_msg, sizeof c->err_msg, fmt, ap);
    va_end(ap);
    c->is_error = true;
    c->err_code = code;
    c->err_data.len = 0;
    c->http_status = http;
}

/* ---- allocation: per-worker free list ---- */

/* Every life of every call object takes its serial from this one counter,
 * the object's first life too. A serial kept per object alone restarted
 * when an object was freed and a new one allocated at its address, so a
 * handle kept from the freed call matched the new one's first lives. With
 * one counter, the lives at any address take strictly increasing values:
 * the 19 bits of it a handle carries can repeat there only when at least
 * CALL_SERIAL_MASK (524287) lives and loop ops have started in the whole
 * process in between, and then only one in 524287 reuses of the address
 * matches (the handle has no room for more; one increment per life and per
 * loop op, call_op_serial_take). */
static _Atomic uint64_t serials;

/* The serial of an object's next life, 1..CALL_SERIAL_MASK (0 is never live). */
static uint32_t call_serial_take(void) {
    uint64_t n = atomic_fetch_add_explicit(&serials, 1, memory_order_relaxed);
    return (uint32_t)(n % CALL_SERIAL_MASK + 1);
}

/* A zeroed call object on the boundary its handles need (handshake.h). */
static mcpg_call *call_object_new(uint32_t n_slots) {
    size_t n = sizeof(mcpg_call) + n_slots * sizeof(void *);
    n = (n + CALL_OBJECT_ALIGN - 1) & ~(size_t)(CALL_OBJECT_ALIGN - 1);
    mcpg_call *c = aligned_alloc(CALL_OBJECT_ALIGN, n);
    if (c) memset(c, 0, n);
    return c;
}

/* A new life's serial, for c: stored as the newest of its life first, so
 * that a reader seeing the new `serial` never pairs it with the old life's
 * range (serial_of_life). */
static void call_serial_renew(mcpg_call *c) {
    uint32_t s = call_serial_take();
    atomic_store(&c->last_serial, s);
    atomic_store(&c->serial, s);
}

/* Loop ops take their handles' serials from the same counter as lives, so
 * every serial given out at this address still comes strictly after the
 * ones before (a handle of an ended life stays refused); the window before
 * the 13 bits repeat at an address is then counted in lives and loop ops
 * (a few per call) together. */
uint32_t call_op_serial_take(mcpg_call *c) {
    uint32_t s = call_serial_take();
    atomic_store(&c->last_serial, s);
    return s;
}

/* A recycled call big enough for n_slots, else a new one. */
static mcpg_call *call_take(mcpg_worker *w, uint32_t n_slots) {
    mcpg_call *c = w->freelist.head;
    if (c && c->n_slots >= n_slots) {
        w->freelist.head = c->next_free;
        w->freelist.count--;
        return c;
    }
    c = call_object_new(n_slots);
    if (c && !call_handle_fits(c)) { /* the handle's tag would overwrite the address */
        klog(MCPG_LOG_ERROR, "kernel", "call object at %p lies above 2^48: refused", (void *)c);
        free(c);
        return NULL;
    }
    if (!c) return NULL;
    c->n_slots = n_slots;
    call_serial_renew(c);
    return c;
}

/* The buffers a call keeps across recycling: their memory stays for the
 * next call (emptied), and goes only with the call (call_free). */
static const size_t k_kept_bufs[] = {
    offsetof(mcpg_call, result),      offsetof(mcpg_call, err_data),
    offsetof(mcpg_call, pool.req_copy), offsetof(mcpg_call, target_copy),
    offsetof(mcpg_call, name_copy),   offsetof(mcpg_call, audit_args),
    offsetof(mcpg_call, audit_shown), offsetof(mcpg_call, judged_name),
    offsetof(mcpg_call, judged_ref),  offsetof(mcpg_call, judged_params),
    offsetof(mcpg_call, owner),       offsetof(mcpg_call, state_params),
    offsetof(mcpg_call, session)};
#define N_KEPT_BUFS (sizeof k_kept_bufs / sizeof *k_kept_bufs)

static mcpg_buf *kept_buf(mcpg_call *c, size_t i) {
    return (mcpg_buf *)((char *)c + k_kept_bufs[i]);
}

/* Zero every field but the kept buffers, which keep their memory (emptied). */
static void call_reset(mcpg_call *c) {
    mcpg_buf keep[N_KEPT_BUFS];
    for (size_t i = 0; i < N_KEPT_BUFS; i++) keep[i] = *kept_buf(c, i);
    uint32_t keep_slots = c->n_slots;
    uint32_t keep_serial = atomic_load_explicit(&c->serial, memory_order_relaxed);
    memset(c, 0, sizeof *c + keep_slots * sizeof(void *));
    atomic_store(&c->last_serial, keep_serial);
    atomic_store(&c->serial, keep_serial);
    for (size_t i = 0; i < N_KEPT_BUFS; i++) {
        *kept_buf(c, i) = keep[i];
        kept_buf(c, i)->len = 0;
    }
    c->list_kind = -1;
    c->n_slots = keep_slots;
    pthread_mutex_init(&c->pool.hdr_lock, NULL);
    msgs_init(c);
}

static void live_add(mcpg_call *c, mcpg_worker *w) {
    c->live_next = w->live;
    if (w->live) w->live->live_prev = c;
    w->live = c;
}

static void live_remove(mcpg_call *c, mcpg_worker *w) {
    if (c->live_prev) c->live_prev->live_next = c->live_next;
    else if (w->live == c) w->live = c->live_next;
    if (c->live_next) c->live_next->live_prev = c->live_prev;
    c->live_prev = c->live_next = NULL;
}

static mcpg_call *call_alloc(mcpg_worker *w, uint32_t n_slots) {
    mcpg_call *c = call_take(w, n_slots);
    if (!c) return NULL;
    call_reset(c);
    live_add(c, w);
    return c;
}

static void call_free(mcpg_call *c) {
    for (size_t i = 0; i < N_KEPT_BUFS; i++) mcpg_buf_free(kept_buf(c, i));
    free(c);
}

static void free_header_copies(mcpg_call *c) {
    for (hdr_copy *h = c->pool.hdr_copies, *next; h; h = next) {
        next = h->next;
        free(h);
    }
    c->pool.hdr_copies = NULL;
}

/* Let go of what a call holds beyond its reusable buffers. */
static void call_clear(mcpg_call *c) {
    live_remove(c, c->w);
    call_identity_clear(c);
    if (c->trace) trace_free(c);
    free_header_copies(c);
    pthread_mutex_destroy(&c->pool.hdr_lock);
    msgs_destroy(c);
    catalog_release(c->cats);
    c->cats = NULL;
    atomic_fetch_sub(&c->gen->refs, 1);
}

void call_recycle(mcpg_call *c) {
    mcpg_worker *w = c->w;
    call_clear(c);
    /* from here on every handle of the life that ended is refused */
    call_serial_renew(c);
    c->life = LIFE_FREE;
    /* keep a bounded number for reuse; big buffers are not kept */
    if (w->freelist.count < 1024 && c->result.cap <= 65536 && c->pool.req_copy.cap <= 65536) {
        c->next_free = w->freelist.head;
        w->freelist.head = c;
        w->freelist.count++;
        return;
    }
    call_free(c);
}

/* At exit, once the loops and the pool have ended: calls the drain deadline
 * cut short are still allocated, and nothing can reach them any more. */
void calls_free_abandoned(mcpg_worker *w) {
    size_t n = 0;
    while (w->live) {
        mcpg_call *c = w->live;
        call_clear(c);
        call_free(c);
        n++;
    }
    if (n) klog(MCPG_LOG_WARN, "kernel", "worker %u: %zu unanswered call(s) freed at exit", w->index, n);
}

static bool unanswered_on(const mcpg_call *c, const generation *g) {
    return c->gen == g && !call_answered(c) && !atomic_load(&c->cancelled);
}

/* Each call is held while the others are ended: answering one may let the
 * transport release another (an answer queued behind it is written). */
unsigned long calls_end_generation(mcpg_worker *w, generation *g, const char *why) {
    size_t n = 0, k = 0;
    for (mcpg_call *c = w->live; c; c = c->live_next) n += unanswered_on(c, g);
    mcpg_call **held = n ? malloc(n * sizeof *held) : NULL;
    if (!held) {
        if (n) klog(MCPG_LOG_ERROR, "kernel", "worker %u: out of memory: %zu call(s) of generation "
                    "%u run on past its reload deadline", w->index, n, g->id);
        return 0;
    }
    for (mcpg_call *c = w->live; c && k < n; c = c->live_next)
        if (unanswered_on(c, g)) {
            call_hold(c, HOLD_KERNEL);
            held[k++] = c;
        }
    for (size_t i = 0; i < k; i++) {
        if (!call_answered(held[i])) call_give_up_retiring(held[i], why);
        call_let_go(held[i], HOLD_KERNEL);
    }
    free(held);
    return k;
}

/* After a burst the free list holds a call object for every call that was
 * in flight at its peak (up to 1024), each with the buffers it grew. Once a
 * second (the worker's housekeeping tick) it is cut to what the calls in
 * flight now could need; when that freed a burst's worth, the heap's free
 * pages go back to the system (malloc_trim: well under a millisecond of
 * this loop for a small heap, and only after a fall, never in steady
 * state). Returns how many were freed. */
size_t calls_give_back(mcpg_worker *w) {
    size_t keep = (size_t)atomic_load(&w->calls_in_flight) + CALL_FREELIST_FLOOR, freed = 0;
    while (w->freelist.count > keep) {
        mcpg_call *c = w->freelist.head;
        w->freelist.head = c->next_free;
        w->freelist.count--;
        call_free(c);
        freed++;
    }
    if (freed >= CALL_GIVE_BACK_MIN) malloc_trim(0);
    return freed;
}

void calls_free_worker(mcpg_worker *w) {
    mcpg_call *c = w->freelist.head;
    while (c) {
        mcpg_call *next = c->next_free;
        call_free(c);
        c = next;
    }
    w->freelist.head = NULL;
    w->freelist.count = 0;
}

/* ---- the transport's side ---- */

/* ---- where a call goes ---- */

/* The item as the backend knows it, copied from the client's request: a
 * resource uri matched by a template is the backend's to read as sent. */
static void target_from_request(mcpg_call *c, const char *s, size_t n) {
    c->target_copy.len = 0;
    if (mcpg_buf_append(&c->target_copy, s, n) == 0) c->target = c->target_copy.data;
    else c->route = NULL; /* out of memory: answered as not found */
}

/* completion/complete names what it completes in params.ref: a prompt by
 * name, or a resource (template) by uri, as judged (judge.c). */
static void route_completion(mcpg_call *c) {
    if (!c->ref_judged) return;
    const char *id = c->judged_name.data;
    size_t n = c->judged_name.len;
    if (c->ref_is_prompt) {
        c->route = catalog_find(c->lists, CAT_PROMPTS, id, n);
        if (c->route) c->target = c->route->target;
        return;
    }
    c->route = catalog_find_resource(c->lists, id, n);
    if (!c->route) c->route = catalog_find(c->lists, CAT_TEMPLATES, id, n);
    if (c->route) target_from_request(c, id, n);
}

/* A task's id is "<backend instance>.<rest>": the backend that made it. Ids
 * clients hold carry a seal (task_seal.c), checked once identity has run
 * (pipeline.c); the backend is handed its own id, without it. */
static void route_task(mcpg_call *c) {
    const char *id = c->d.name;
    size_t n = id ? task_seal_split(id, c->d.name_len, c->task_seal) : 0;
    const char *dot = n ? memchr(id, '.', n) : NULL;
    if (!dot) return; /* unsealed or malformed: no task of anyone's */
    c->task_plain_len = n;
    c->route = catalog_find_task_backend(c->gen, id, (size_t)(dot - id));
    if (c->route && !server_binds(c->srv, c->route->backend)) c->route = NULL; /* another server's */
    if (c->route) target_from_request(c, dot + 1, n - (size_t)(dot + 1 - id));
}

/* events methods and event webhooks: the events instance, with the event type
 * (params.name) or the webhook's source as the target. */
static void route_events(mcpg_call *c) {
    if (!c->gen->events.backend) return;
    c->route = &c->gen->events;
    if (c->d.name) target_from_request(c, c->d.name, c->d.name_len);
    else c->target = "";
}

static int list_kind_of(uint32_t method) {
    switch (method) {
    case MCPG_METHOD_TOOLS_LIST: return CAT_TOOLS;
    case MCPG_METHOD_PROMPTS_LIST: return CAT_PROMPTS;
    case MCPG_METHOD_RESOURCES_LIST: return CAT_RESOURCES;
    case MCPG_METHOD_RESOURCES_TEMPLATES_LIST: return CAT_TEMPLATES;
    default: return -1;
    }
}

static void call_route(mcpg_call *c) {
    const mcpg_call_desc *d = &c->d;
    c->list_kind = list_kind_of(c->method);
    switch (c->method) {
    case MCPG_METHOD_TOOLS_CALL:
    case MCPG_METHOD_PROMPTS_GET:
        c->route = d->name ? catalog_find(c->lists, c->method == MCPG_METHOD_TOOLS_CALL
                                                      ? CAT_TOOLS : CAT_PROMPTS,
                                          d->name, d->name_len)
                           : NULL;
        if (c->route) c->target = c->route->target;
        return;
    case MCPG_METHOD_RESOURCES_READ:
        c->route = d->name ? catalog_find_resource(c->lists, d->name, d->name_len) : NULL;
        if (c->route) target_from_request(c, d->name, d->name_len);
        return;
    case MCPG_METHOD_COMPLETION_COMPLETE: route_completion(c); return;
    case MCPG_METHOD_TASKS_GET:
    case MCPG_METHOD_TASKS_RESULT:
    case MCPG_METHOD_TASKS_CANCEL:
    case MCPG_METHOD_TASKS_UPDATE: route_task(c); return;
    case MCPG_METHOD_EVENTS_LIST:
    case MCPG_METHOD_EVENTS_POLL:
    case MCPG_METHOD_EVENTS_STREAM:
    case MCPG_METHOD_EVENTS_SUBSCRIBE:
    case MCPG_METHOD_EVENTS_UNSUBSCRIBE:
    case MCPG_METHOD_EVENTS_WEBHOOK: route_events(c); return;
    default: return;
    }
}

static bool desc_valid(const mcpg_call_desc *d) {
    return d->size >= MCPG_CALL_DESC_SIZE_1_0 && d->complete && d->method;
}

/* Who submits a call, which decides the stages it passes. */
enum submit_kind {
    SUBMIT_CLIENT,   /* through every stage */
    SUBMIT_INTERNAL, /* the gateway's own, straight to its backend, no identity, policy,
                        limits or audit: kernel/watch.c reading a watched resource */
    SUBMIT_WEBHOOK   /* an event webhook, straight to the events instance: its
                        signature, which that instance checks, is its identity */
};

/* The session id copied whole, whatever its length: a reply is routed by
 * it. Without it the call could take the answers meant for a call with no
 * session, so a copy that fails fails the call. */
static bool session_copied(mcpg_call *c) {
    if (!c->d.session_id || !c->d.session_id_len) return true;
    if (mcpg_buf_append(&c->session, c->d.session_id, c->d.session_id_len) == 0) return true;
    call_set_error(c, MCPG_RPC_INTERNAL_ERROR, 503, "out of memory");
    return false;
}

/* A server a reload removed (or renamed) while its client still speaks to
 * it: its sessions are gone with it, and nothing else may serve the call.
 * The call runs on /mcp's stages only to be answered and audited. */
static bool server_known(mcpg_call *c) {
    if (c->srv) return true;
    c->srv = &c->gen->servers[0];
    c->lists = catset_lists(c->cats, 0);
    if (c->d.session_id) call_set_error(c, MCPG_RPC_SESSION_NOT_FOUND, 404, "Session not found");
    else call_set_error(c, MCPG_RPC_INVALID_REQUEST, 404, "Not Found: no such server");
    return false;
}

static int submit(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **out, int kind) {
    if (!w || !d || !out || !desc_valid(d)) return MCPG_EINVAL;
    if (w->draining) return MCPG_EUNAVAIL;
    if ((uint64_t)atomic_load(&w->calls_in_flight) >= kernel.max_calls_per_worker) return MCPG_EAGAIN;
    generation *g = w->gen;
    mcpg_call *c = call_alloc(w, (uint32_t)g->n_instances);
    if (!c) return MCPG_ENOMEM;
    c->w = w;
    c->gen = g;
    atomic_fetch_add(&g->refs, 1);
    c->cats = catalog_acquire(g);
    memcpy(&c->d, d, d->size < sizeof c->d ? d->size : sizeof c->d); /* the rest stays 0 */
    uint32_t server = 0;
    c->srv = server_named(g, c->d.server, c->d.server_len, &server);
    c->lists = c->srv && c->cats ? catset_lists(c->cats, server) : NULL;
    call_life_start(c);
    c->t0 = mono_us();
    c->method = kind == SUBMIT_WEBHOOK ? MCPG_METHOD_EVENTS_WEBHOOK
                                       : mcpg_method_of(d->method, d->method_len);
    if (g->telemetry && kind == SUBMIT_CLIENT) trace_begin(c);
    atomic_fetch_add(&w->calls_in_flight, 1);
    *out = call_handle(c, CALL_STAGE_TRANSPORT);
    if (c->d.peer && c->d.peer_len < sizeof c->peer) {
        memcpy(c->peer, c->d.peer, c->d.peer_len);
        c->peer[c->d.peer_len] = '\0';
    }
    /* One reading of the request for every stage and backend; a request
     * that fails it is answered at once. */
    if (!server_known(c) || !session_copied(c) ||
        (kind == SUBMIT_CLIENT && call_judge(c) != 0)) {
        c->phase = PH_COMPLETE;
        pipeline_run(c);
        return 0;
    }
    /* An unknown name is answered after identity and policy (see pipeline.c),
     * so a caller who may not call anything cannot probe what exists. */
    call_route(c);
    if (kind != SUBMIT_CLIENT && c->route) {
        c->phase = PH_BACKEND;
    } else if (kind == SUBMIT_INTERNAL) {
        call_set_error(c, MCPG_RPC_INVALID_PARAMS, 404, "no backend serves that resource");
        c->phase = PH_COMPLETE;
    }
    pipeline_run(c);
    return 0;
}

int call_submit(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **out) {
    return submit(w, d, out, SUBMIT_CLIENT);
}

int call_submit_internal(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **out) {
    return submit(w, d, out, SUBMIT_INTERNAL);
}

int host_webhook_submit(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **out) {
    if (!w || !w->gen || !w->gen->events.backend) return MCPG_ENOENT;
    return submit(w, d, out, SUBMIT_WEBHOOK);
}

void call_cancel(mcpg_call *h) {
    mcpg_call *c = transport_call_of(h, "call_cancel");
    if (!c) return;
    atomic_store(&c->cancelled, true);
    backend_cancel_if_pending(c);
}

/* A 401 carries the challenge a stage set; a 403 only a policy's step-up
 * challenge (RFC 6750 insufficient_scope): the one an identity stage leaves
 * on every call it passes says nothing about a refusal by policy. */
static bool challenge_goes_out(const mcpg_call *c) {
    if (!c->challenge) return false;
    return c->http_status == 401 ||
           (c->http_status == 403 && strstr(c->challenge, "error=\"insufficient_scope\""));
}

/* The whole outcome, as this kernel knows it. */
static void outcome_fill(mcpg_call *c, mcpg_call_outcome *o) {
    const char *msg;
    if (call_error_of(c, &o->error_code, &msg)) {
        o->is_error = 1;
        o->error_message = msg;
        if (!c->pool.detached) {
            o->http_status = c->http_status;
            o->retry_after_s = c->retry_after;
            o->error_data = c->err_data.len ? c->err_data.data : NULL;
            o->error_data_len = c->err_data.len;
            if (challenge_goes_out(c)) o->www_authenticate = c->challenge;
        }
    } else if (c->borrowed) {
        o->result = c->borrowed->data;
        o->result_len = c->borrowed->len;
    } else {
        o->http_status = c->http_status;
        o->result = c->result.len ? c->result.data : "{}";
        o->result_len = c->result.len ? c->result.len : 2;
        o->result_type = c->result_type;
    }
}

/* The transport says in out->size how much it knows of the outcome; no
 * byte past that is written, and out->size says what was filled (0 when
 * the handle is refused). */
void call_outcome(mcpg_call *h, mcpg_call_outcome *out) {
    mcpg_call *c = transport_call_of(h, "call_outcome");
    if (!out) return;
    if (!c) {
        out->size = 0;
        return;
    }
    if (out->size < MCPG_CALL_OUTCOME_SIZE_1_0) {
        klog(MCPG_LOG_ERROR, "kernel",
             "call_outcome: the caller's outcome is %u bytes, ABI 1.0 has %u (module bug)",
             out->size, (unsigned)MCPG_CALL_OUTCOME_SIZE_1_0);
        return;
    }
    mcpg_call_outcome full = {.size = sizeof full};
    outcome_fill(c, &full);
    size_t n = out->size < sizeof full ? out->size : sizeof full;
    memcpy(out, &full, n);
    out->size = (uint32_t)n;
}

void call_release(mcpg_call *h) {
    mcpg_call *c = transport_call_of(h, "call_release");
    if (c) call_let_go(c, HOLD_TRANSPORT);
}

/* ---- a call seen from a stage or backend (host table slots) ---- */

/* Each slot first turns the module's handle into the call (call_of), and
 * answers as for "nothing there" when the handle has outlived its call. */

mcpg_worker *host_call_worker(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_worker");
    return c ? c->w : NULL;
}

uint32_t host_call_method(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_method");
    return c ? c->method : MCPG_METHOD_OTHER;
}

uint32_t host_call_wire(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_wire");
    return c ? c->d.wire : 0;
}

const char *host_call_target(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_target");
    return c && c->route ? c->target : NULL;
}

const char *host_call_args(mcpg_call *h, size_t *len) {
    mcpg_call *c = call_of(h, "call_args");
    if (c && c->d.args_json) {
        if (len) *len = c->d.args_len;
        return c->d.args_json;
    }
    if (len) *len = 2;
    return "{}";
}

const char *host_call_params(mcpg_call *h, size_t *len) {
    mcpg_call *c = call_of(h, "call_params");
    const char *p = c ? c->d.params_json : NULL;
    if (len) *len = p ? c->d.params_len : 0;
    return p;
}

const char *host_call_id(mcpg_call *h, size_t *len) {
    mcpg_call *c = call_of(h, "call_id");
    if (len) *len = c ? c->d.id_len : 0;
    return c ? c->d.id_json : NULL;
}

/* On the call's loop the transport's own bytes are returned; off it (a
 * backend on the pool) a copy (see pool_header_copy). */
const char *host_call_header(mcpg_call *h, const char *lname, size_t *len) {
    mcpg_call *c = call_of(h, "call_header");
    if (!c || !c->d.header) return NULL;
    if (worker_self() == c->w) /* after the answer the transport's request is gone */
        return c->pool.answered ? NULL : c->d.header(c->d.transport_ctx, lname, len);
    return pool_header_copy(c, lname, len);
}

void **host_call_slot(mcpg_call *h, mcpg_instance *self) {
    mcpg_call *c = call_of(h, "call_slot");
    int i = c && self ? generation_slot_of(c->gen, self) : -1;
    if (i < 0 || (uint32_t)i >= c->n_slots) return NULL;
    return &c->slots[i];
}

int host_call_result(mcpg_call *h, const char *json, size_t len) {
    mcpg_call *c = call_of(h, "call_result");
    if (!c) return MCPG_ESTATE;
    c->result.len = 0;
    return mcpg_buf_append(&c->result, json, len);
}

/* A refused handle gets a buffer of its own thread's that nobody reads,
 * emptied at each refusal, so a module that appends without checking does
 * not crash the gateway. */
static __thread mcpg_buf discarded_result;

mcpg_buf *host_call_result_buf(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_result_buf");
    if (c) return &c->result;
    mcpg_buf_free(&discarded_result);
    return &discarded_result;
}

int host_call_error(mcpg_call *h, int64_t code, const char *message, const char *data_json) {
    mcpg_call *c = call_of(h, "call_error");
    if (!c) return MCPG_ESTATE;
    c->is_error = true;
    c->err_code = code;
    snprintf(c->err_msg, sizeof c->err_msg, "%s", message ? message : "");
    c->err_data.len = 0;
    if (data_json) mcpg_buf_puts(&c->err_data, data_json);
    return 0;
}

void host_call_set_http(mcpg_call *h, int http_status, uint32_t retry_after_s) {
    mcpg_call *c = call_of(h, "call_set_http");
    if (!c) return;
    c->http_status = http_status;
    c->retry_after = retry_after_s;
}

int host_call_cancelled(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_cancelled");
    return c ? atomic_load(&c->cancelled) : 1;
}

/* ---- ABI 1.1 accessors ---- */

void host_call_set_result_type(mcpg_call *h, uint32_t type) {
    mcpg_call *c = call_of(h, "call_set_result_type");
    if (c) c->result_type = type;
}

/* A 1.1 desc field, when the transport's desc has it. */
#define DESC_TEXT(c, field, lenfield, len)                                                  \
    ((MCPG_HAS_FIELD(&(c)->d, lenfield) && (c)->d.field) ? ((len) ? *(len) = (c)->d.lenfield : 0, \
                                                             (c)->d.field)                  \
                                                          : ((len) ? *(len) = 0 : 0, (const char *)NULL))

const char *host_call_session(mcpg_call *h, size_t *len) {
    mcpg_call *c = call_of(h, "call_session");
    if (len) *len = c && c->d.session_id ? c->d.session_id_len : 0;
    return c ? c->d.session_id : NULL;
}

const char *host_call_client_capabilities(mcpg_call *h, size_t *len) {
    mcpg_call *c = call_of(h, "call_client_capabilities");
    if (!c) {
        if (len) *len = 0;
        return NULL;
    }
    return DESC_TEXT(c, client_caps_json, client_caps_len, len);
}

const char *host_call_protocol_version(mcpg_call *h, size_t *len) {
    mcpg_call *c = call_of(h, "call_protocol_version");
    if (!c) {
        if (len) *len = 0;
        return NULL;
    }
    return DESC_TEXT(c, protocol_version, protocol_version_len, len);
}
