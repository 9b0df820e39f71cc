/* Answering a call later without blocking anything: a one-shot timer on
 * the call's own loop, started from a post (an op may run on a pool
 * thread, and timers are the loop's). The call waits PENDING; the timer's
 * callback writes the answer and resumes it.
 *
 * Who frees the wait: the timer's callback once it fired, or cancel when
 * the timer was started; when cancel comes before the post has run, the
 * post frees it (cancel and the post both run on the call's loop, so the
 * flags need no lock). */
#include "everything.h"

#include <stdlib.h>

typedef struct later {
    ev_waiting base; /* first: the call's slot holds it */
    ev *e;
    mcpg_call *call;
    mcpg_post post;
    mcpg_timer *timer;
    uint64_t ms;
    ev_later_fn fn;
    int started; /* the timer runs */
    int gone;    /* cancel answered the call before the timer started */
} later;

static void **slot_of(ev *e, mcpg_call *call) { return e->host->call_slot(call, e->self); }

static void fired(void *arg) {
    later *l = arg;
    ev *e = l->e;
    mcpg_call *call = l->call;
    e->host->timer_stop(l->timer);
    void **slot = slot_of(e, call);
    if (slot) *slot = NULL;
    ev_later_fn fn = l->fn;
    free(l);
    mcpg_status st = fn(e, call); /* may wait again: it set its own slot */
    if (st != MCPG_PENDING) e->host->call_resume(call, st);
}

static void start_on_loop(void *arg) {
    later *l = arg;
    ev *e = l->e;
    if (l->gone) {
        free(l);
        return;
    }
    int rc = e->host->timer_start(e->self, e->host->call_worker(l->call), l->ms, 0, fired, l,
                                  &l->timer);
    if (rc == 0) {
        l->started = 1;
        return;
    }
    mcpg_call *call = l->call;
    void **slot = slot_of(e, call);
    if (slot) *slot = NULL;
    free(l);
    mcpg_result_errorf(e->host, call, MCPG_RPC_INTERNAL_ERROR, "cannot wait: %s",
                       e->host->strerror(rc));
    e->host->call_resume(call, MCPG_DENY);
}

static void later_cancel(ev *e, ev_waiting *base) {
    later *l = (later *)base;
    mcpg_call *call = l->call;
    if (l->started) {
        e->host->timer_stop(l->timer);
        free(l);
    } else {
        l->gone = 1;
    }
    e->host->call_error(call, MCPG_RPC_SERVER_ERROR, "request cancelled", NULL);
    e->host->call_resume(call, MCPG_DENY);
}

mcpg_status ev_later(ev *e, mcpg_call *call, uint64_t ms, ev_later_fn fn) {
    const mcpg_host *h = e->host;
    void **slot = slot_of(e, call);
    later *l = calloc(1, sizeof *l);
    if (!slot || !l) {
        free(l);
        return mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "cannot wait");
    }
    *l = (later){.base = {later_cancel}, .e = e, .call = call, .ms = ms, .fn = fn};
    l->post.fn = start_on_loop;
    l->post.arg = l;
    *slot = l; /* before the post: the timer may fire before we return */
    int rc = h->worker_post(h->call_worker(call), &l->post);
    if (rc == 0) return MCPG_PENDING;
    *slot = NULL;
    free(l);
    return mcpg_result_errorf(h, call, MCPG_RPC_SERVER_ERROR, "cannot wait: %s",
                              h->strerror(rc));
}

void ev_waiting_cancel(ev *e, mcpg_call *call) {
    void **slot = slot_of(e, call);
    ev_waiting *w = slot ? *slot : NULL;
    if (!w) return;
    *slot = NULL;
    w->cancel(e, w);
}
