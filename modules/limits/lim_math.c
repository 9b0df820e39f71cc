/* limits: the counters' arithmetic (lim_math.h). */
#include "lim_math.h"

int lim_conc_take(_Atomic int64_t *in_flight, int64_t cap) {
    int64_t n = atomic_load_explicit(in_flight, memory_order_relaxed);
    do {
        if (n >= cap) return 0;
    } while (!atomic_compare_exchange_weak_explicit(in_flight, &n, n + 1, memory_order_acq_rel,
                                                    memory_order_relaxed));
    return 1;
}

void lim_conc_give(_Atomic int64_t *in_flight) {
    atomic_fetch_sub_explicit(in_flight, 1, memory_order_acq_rel);
}

int64_t lim_rate_take(_Atomic int64_t *paid, int64_t now, int64_t interval, int64_t burst) {
    int64_t p = atomic_load_explicit(paid, memory_order_relaxed);
    for (;;) {
        int64_t t = p > now ? p : now;
        int64_t over = t + interval - now - burst * interval;
        if (over > 0) return over;
        if (atomic_compare_exchange_weak_explicit(paid, &p, t + interval, memory_order_acq_rel,
                                                  memory_order_relaxed))
            return 0;
    }
}

void lim_rate_give(_Atomic int64_t *paid, int64_t interval) {
    atomic_fetch_sub_explicit(paid, interval, memory_order_acq_rel);
}

uint64_t lim_budget_window(int64_t now, int64_t window) {
    if (window <= 0 || now < 0) return 0;
    return (uint64_t)(now / window) & 0xffffffffu;
}

int lim_budget_take(_Atomic uint64_t *word, int64_t now, int64_t window, int64_t calls) {
    uint64_t idx = lim_budget_window(now, window);
    uint64_t w = atomic_load_explicit(word, memory_order_relaxed), next;
    do {
        uint64_t stored = w >> 32, count = w & 0xffffffffu;
        if (idx > stored) next = idx << 32 | 1u; /* a new window: this call is its first */
        else if ((int64_t)count >= calls) return 0;
        else next = w + 1;
    } while (!atomic_compare_exchange_weak_explicit(word, &w, next, memory_order_acq_rel,
                                                    memory_order_relaxed));
    return 1;
}

int64_t lim_budget_window_left(int64_t now, int64_t window) {
    if (window <= 0 || now < 0) return 0;
    return window - now % window;
}

void lim_budget_give(_Atomic uint64_t *word, uint64_t idx) {
    uint64_t w = atomic_load_explicit(word, memory_order_relaxed);
    do {
        if (w >> 32 != idx || (w & 0xffffffffu) == 0) return;
    } while (!atomic_compare_exchange_weak_explicit(word, &w, w - 1, memory_order_acq_rel,
                                                    memory_order_relaxed));
}
