/* limits: the arithmetic of one limit's counter, on C11 atomics.
 *
 * Each step is one compare-and-swap loop on a single 64-bit word, so a
 * counter shared by every loop thread stays exact without a lock. Times are
 * microseconds on whatever clock the caller passes (the module passes the
 * monotonic clock for rates, the wall clock for budget windows, which are
 * aligned to it); a clock that steps backwards never admits more. */
#ifndef LIM_MATH_H
#define LIM_MATH_H

#include <stdatomic.h>
#include <stdint.h>

/* Concurrency: 1 and one more in flight when fewer than cap are, else 0. */
int lim_conc_take(_Atomic int64_t *in_flight, int64_t cap);
void lim_conc_give(_Atomic int64_t *in_flight);

/* Rate (GCRA): paid holds "paid-until". With t = max(paid, now), a call fits
 * when t + interval - now <= burst * interval; then paid = t + interval.
 * 0 when admitted, else the microseconds until one call fits (>= 1). */
int64_t lim_rate_take(_Atomic int64_t *paid, int64_t now, int64_t interval, int64_t burst);
/* Undo one admitted take (a later limit refused the call): paid moves back
 * by one interval, as if the call had never come. */
void lim_rate_give(_Atomic int64_t *paid, int64_t interval);

/* Budget: word = window index << 32 | calls in it. The window is
 * now / window (0 = one window forever); a window older than the stored
 * one (a clock stepped back) counts into the stored one. 1 admitted, 0 not. */
#define LIM_BUDGET_MAX 0xfffffffeLL
int lim_budget_take(_Atomic uint64_t *word, int64_t now, int64_t window, int64_t calls);
/* The window index a take at `now` counts into (the key suffix of a global
 * budget, and what lim_budget_give needs). */
uint64_t lim_budget_window(int64_t now, int64_t window);
/* Undo one admitted take of window `idx`: a call less in it, unless the
 * counter has moved on to a newer window (then there is nothing to undo). */
void lim_budget_give(_Atomic uint64_t *word, uint64_t idx);
/* Microseconds until the window of `now` ends (0 for a window of forever). */
int64_t lim_budget_window_left(int64_t now, int64_t window);

#endif
