/* backend_mcp: a call's brokered credential (credentials, lib/upcred),
 * got on the call's loop before the call goes on to the upstream: from
 * the cache at once, or after the token endpoint answered (the call waits
 * meanwhile, its slot holding a cred_call so that a cancel finds it). The
 * Authorization line goes with the call (client_call.auth_line); a call
 * that cannot have one fails closed, before anything reaches the upstream. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "upstream.h"

#define CRED_TAG 0x44455243u /* "CRED" */

typedef struct cred_call {
    uint32_t tag; /* CRED_TAG: what the call's slot holds meanwhile */
    upstream *up;
    client_call *pc;
    mcpg_call *call;
    cred_next_fn next;
    mcpg_worker *worker; /* the call's: where the answer is handled */
    mcpg_post post;
    upcred_wait wait;
    bool cancelled;
} cred_call;

bool cred_is(const void *slot_value) {
    return slot_value && *(const uint32_t *)slot_value == CRED_TAG;
}

static void set_slot(cred_call *cc, void *v) {
    void **slot = cc->up->h->call_slot(cc->call, cc->up->self);
    pthread_mutex_lock(&cc->up->lock);
    if (slot) *slot = v;
    pthread_mutex_unlock(&cc->up->lock);
}

static void cc_free(cred_call *cc, bool with_pc) {
    if (with_pc) calls_free(cc->pc);
    upcred_wait_clear(&cc->wait);
    free(cc);
}

/* The call goes on with its credential, or fails with why not. */
static mcpg_status settle(cred_call *cc) {
    upstream *up = cc->up;
    mcpg_call *call = cc->call;
    if (cc->wait.failed) {
        up->h->call_error(call, MCPG_RPC_SERVER_ERROR, cc->wait.error, cc->wait.error_data);
        cc_free(cc, true);
        return MCPG_DENY;
    }
    client_call *pc = cc->pc;
    pc->auth_line = cc->wait.auth_line; /* taken */
    cc->wait.auth_line = NULL;
    upcred_caller_key(up->cred, call, pc->caller_key, sizeof pc->caller_key);
    memcpy(pc->cred_key, cc->wait.key, sizeof pc->cred_key);
    pc->cred_keyed = cc->wait.keyed;
    cred_next_fn next = cc->next;
    cc_free(cc, false);
    return next(up, pc, call);
}

/* On the call's loop, once the token endpoint answered. */
static void answered(void *arg) {
    cred_call *cc = arg;
    set_slot(cc, NULL);
    const mcpg_host *h = cc->up->h;
    mcpg_call *call = cc->call;
    if (cc->cancelled) {
        h->call_error(call, MCPG_RPC_SERVER_ERROR, "request cancelled", NULL);
        cc_free(cc, true);
        h->call_resume(call, MCPG_DENY);
        return;
    }
    mcpg_status st = settle(cc);
    if (st != MCPG_PENDING) h->call_resume(call, st);
}

/* From the thread that got the token. */
static void notify(upcred_wait *w) {
    cred_call *cc = w->arg;
    cc->post = (mcpg_post){.fn = answered, .arg = cc};
    /* fails only once the worker has stopped, which ended the call */
    (void)cc->up->h->worker_post(cc->worker, &cc->post);
}

static mcpg_status begin(cred_call *cc) {
    const mcpg_host *h = cc->up->h;
    int rc = upcred_begin(cc->up->cred, cc->call, h->worker_uv_loop(cc->worker), &cc->wait);
    if (rc != UPCRED_PENDING) return settle(cc);
    set_slot(cc, cc);
    return MCPG_PENDING; /* notify may have run already: answered() is posted */
}

/* A call on the pool: its credential is had on its loop. */
static void hopped(void *arg) {
    cred_call *cc = arg;
    mcpg_status st = begin(cc);
    if (st != MCPG_PENDING) cc->up->h->call_resume(cc->call, st);
}

mcpg_status cred_then(upstream *up, client_call *pc, mcpg_call *call, cred_next_fn next) {
    const mcpg_host *h = up->h;
    cred_call *cc = calloc(1, sizeof *cc);
    if (!cc) {
        calls_free(pc);
        return mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "backend \"%s\": out of memory",
                                  up->name);
    }
    *cc = (cred_call){.tag = CRED_TAG,
                      .up = up,
                      .pc = pc,
                      .call = call,
                      .next = next,
                      .worker = h->call_worker(call)};
    cc->wait = (upcred_wait){.notify = notify, .arg = cc};
    if (h->worker_current()) return begin(cc);
    cc->post = (mcpg_post){.fn = hopped, .arg = cc};
    if (h->worker_post(cc->worker, &cc->post) == 0) return MCPG_PENDING;
    cc_free(cc, true);
    return mcpg_result_errorf(h, call, MCPG_RPC_SERVER_ERROR, "the gateway is stopping");
}

/* On the call's loop: the client went away while the token was fetched. */
void cred_cancel(upstream *up, void *held) {
    cred_call *cc = held;
    if (!upcred_cancel(up->cred, &cc->wait)) {
        cc->cancelled = true; /* answered() is on its way: it answers */
        return;
    }
    set_slot(cc, NULL);
    mcpg_call *call = cc->call;
    up->h->call_error(call, MCPG_RPC_SERVER_ERROR, "request cancelled", NULL);
    cc_free(cc, true);
    up->h->call_resume(call, MCPG_DENY);
}
