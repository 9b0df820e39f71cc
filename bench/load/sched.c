/* Open loop (--rate R): when each call is due, whatever the server does.
 *
 * Call k (from 0) is due at t0 + k / R. A due call goes out on an idle
 * connection at once, or, when every connection is busy, the moment one
 * frees up; its latency is counted from when it was due, not from when it
 * could be sent. A closed loop waits for the server and so never sees the
 * stalls it would have suffered at this rate (coordinated omission); counted
 * from the due time, a stall shows in every call that should have gone out
 * during it.
 *
 * Only arithmetic here (the selftest drives it with made-up clocks); conn.c
 * and main.c do the sending. */
#include "load.h"

void load_sched_init(load_sched *s, double rate, uint64_t t0_ns) {
    *s = (load_sched){.rate = rate, .t0_ns = t0_ns};
}

/* How many calls are due by now: call k is due once k / R seconds passed. */
uint64_t load_sched_due(const load_sched *s, uint64_t now_ns) {
    if (now_ns < s->t0_ns) return 0;
    return (uint64_t)((double)(now_ns - s->t0_ns) * s->rate / 1e9) + 1;
}

uint64_t load_sched_time_of(const load_sched *s, uint64_t k) {
    return s->t0_ns + (uint64_t)((double)k * 1e9 / s->rate);
}

/* The next call, if one is due by now: its due time in *due_ns. The calls
 * still due after it are the backlog, whose high-water mark is kept. */
bool load_sched_take(load_sched *s, uint64_t now_ns, uint64_t *due_ns) {
    uint64_t due = load_sched_due(s, now_ns);
    if (s->issued >= due) return false;
    *due_ns = load_sched_time_of(s, s->issued++);
    if (due - s->issued > s->max_backlog) s->max_backlog = due - s->issued;
    return true;
}

uint64_t load_sched_backlog(const load_sched *s, uint64_t now_ns) {
    uint64_t due = load_sched_due(s, now_ns);
    return due > s->issued ? due - s->issued : 0;
}
