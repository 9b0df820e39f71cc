/* Log-linear latency histogram (HDR-style), recording nanoseconds.
 *
 * Why this layout: a fixed array (30 KiB) indexed by a shift and a mask costs
 * a few instructions per call and never allocates, yet keeps every value
 * within 0.78 % from 1 ns to 60 s, which a fixed-width histogram cannot do
 * for both a 100 µs p50 and a 1 s outlier. */
#include <string.h>

#include "load.h"

#define SUB_COUNT (1u << LOAD_HIST_SUB_BITS) /* linear buckets per power of two */
#define EXACT_LIMIT (2u * SUB_COUNT)         /* values below this have their own bucket */

/* The array is sized by the top exponent: it must be the clamp's. */
_Static_assert(LOAD_HIST_MAX_NS >> LOAD_HIST_TOP_EXP == 1,
               "LOAD_HIST_TOP_EXP != floor(log2(LOAD_HIST_MAX_NS))");

void load_hist_reset(load_hist *h) {
    memset(h, 0, sizeof *h);
    h->min_ns = UINT64_MAX;
}

unsigned load_hist_index(uint64_t ns) {
    if (ns > LOAD_HIST_MAX_NS) ns = LOAD_HIST_MAX_NS;
    if (ns < EXACT_LIMIT) return (unsigned)ns;
    unsigned exp = 63u - (unsigned)__builtin_clzll(ns); /* >= SUB_BITS + 1 */
    unsigned shift = exp - LOAD_HIST_SUB_BITS;
    unsigned sub = (unsigned)(ns >> shift); /* in [SUB_COUNT, 2*SUB_COUNT) */
    return EXACT_LIMIT + (exp - LOAD_HIST_SUB_BITS - 1) * SUB_COUNT + (sub - SUB_COUNT);
}

uint64_t load_hist_bucket_high(unsigned idx) {
    if (idx < EXACT_LIMIT) return idx;
    unsigned k = idx - EXACT_LIMIT;
    unsigned exp = LOAD_HIST_SUB_BITS + 1 + k / SUB_COUNT;
    unsigned shift = exp - LOAD_HIST_SUB_BITS;
    uint64_t low = (uint64_t)(SUB_COUNT + k % SUB_COUNT) << shift;
    return low + ((uint64_t)1 << shift) - 1;
}

void load_hist_record(load_hist *h, uint64_t ns) {
    h->counts[load_hist_index(ns)]++;
    h->total++;
    h->sum_ns += (double)ns;
    if (ns < h->min_ns) h->min_ns = ns;
    if (ns > h->max_ns) h->max_ns = ns;
}

uint64_t load_hist_percentile(const load_hist *h, double p) {
    if (h->total == 0) return 0;
    if (p >= 100.0) return h->max_ns;
    /* The smallest value with at least p % of the samples at or below it. */
    double want = p / 100.0 * (double)h->total;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want || rank == 0) rank++;
    uint64_t seen = 0;
    for (unsigned i = 0; i < LOAD_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t v = load_hist_bucket_high(i);
            return v < h->max_ns ? v : h->max_ns;
        }
    }
    return h->max_ns;
}

void load_hist_merge(load_hist *dst, const load_hist *src) {
    for (unsigned i = 0; i < LOAD_HIST_BUCKETS; i++) dst->counts[i] += src->counts[i];
    dst->total += src->total;
    dst->sum_ns += src->sum_ns;
    if (src->total && src->min_ns < dst->min_ns) dst->min_ns = src->min_ns;
    if (src->max_ns > dst->max_ns) dst->max_ns = src->max_ns;
}
