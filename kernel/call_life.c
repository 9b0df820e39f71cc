/* The call's life (see call_internal.h for the states and the holders):
 * the only code that moves a call from one state to the next, and the only
 * writer of `life` and `holds`. On the call's loop. */
#include "call_internal.h"

static const char *holder_name(unsigned holder) {
    return holder == HOLD_TRANSPORT ? "the transport" : holder == HOLD_BACKEND ? "a backend" : "the kernel";
}

void call_life_start(mcpg_call *c) {
    assert(c->life == LIFE_FREE && !c->holds);
    c->life = LIFE_RUNNING;
    c->holds = HOLD_TRANSPORT;
}

void call_life_answer(mcpg_call *c) {
    assert(c->life == LIFE_RUNNING); /* complete() runs exactly once */
    c->life = LIFE_ANSWERED;
}

void call_hold(mcpg_call *c, unsigned holder) {
    assert(c->life != LIFE_FREE && !call_held_by(c, holder));
    c->holds |= (uint8_t)holder;
}

int call_let_go(mcpg_call *c, unsigned holder) {
    if (!call_held_by(c, holder) || (holder == HOLD_TRANSPORT && !call_answered(c))) {
        /* a transport releasing a call before its complete() (or twice)
         * would have it recycled under its stages: refused */
        klog(MCPG_LOG_ERROR, "kernel", "%s let go of a call %s (module bug): ignored",
             holder_name(holder), call_held_by(c, holder) ? "not answered yet" : "it does not hold");
        return MCPG_ESTATE;
    }
    c->holds &= (uint8_t)~holder;
    if (!c->holds && !msgs_defer_recycle(c)) call_recycle(c);
    return 0;
}
