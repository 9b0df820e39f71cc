/* The metrics registry behind the host table's metric slots (ABI 1.4,
 * mcpg/metrics.h), shared by the kernel and the SDK's fake host so a module
 * counts the same way in a unit test as in the gateway. Internal: not
 * installed, never linked into a module.
 *
 * Cells: each family's series live in rows, one per worker loop and one
 * shared row for every other thread, each row padded to whole cache lines.
 * A thread says which loop row it owns once (mreg_thread_row); a count on
 * it is then a relaxed load and store (one writer per row), elsewhere an
 * atomic add on the shared row. Readers sum the rows under the lock. */
#ifndef MCPG_METRICS_REGISTRY_H
#define MCPG_METRICS_REGISTRY_H

#include <mcpg/abi.h>

#include <stdatomic.h>
#include <stdbool.h>

#define MREG_LINE 64 /* bytes per cache line: a row starts on its own line */

typedef struct mreg mreg;

struct mcpg_metric {
    struct mcpg_metric *next;     /* the registry's families, newest first */
    const void *owner;            /* the instance that made it; NULL: the host itself */
    char *owner_name;             /* its manifest name: a successor of that name takes over */
    bool hidden;                  /* a successor has the name now; freed with its owner */
    uint32_t type;                /* mcpg_metric_type */
    char *name, *help;
    char **label_names;
    uint32_t n_labels;
    uint32_t n_series;            /* series shown (those with their labels) */
    uint32_t cap_series;          /* series the cells were made for */
    char **label_values;          /* cap_series x n_labels */
    uint64_t *buckets;
    uint32_t n_buckets;
    uint32_t per_series;          /* cells a series takes: 1, or the buckets, +Inf and sum */
    uint32_t n_rows;              /* loops + 1; the last is the shared row */
    size_t row_stride;            /* cells per row, whole cache lines */
    int64_t (*read)(void *arg, uint32_t series);
    void *read_arg;
    _Atomic int64_t *cells;       /* n_rows x row_stride, aligned to a cache line */
    void *cells_block;            /* what was allocated for them (cells is inside) */
};

/* The loop row this thread writes (-1: none, the shared row). */
extern _Thread_local int mreg_tl_row;
void mreg_thread_row(int row);

/* ---- the hot path: no lock, no allocation, no locked instruction on a loop ---- */

/* This thread's row of m: its loop's (*own: it is the one writer), else the shared one. */
static inline _Atomic int64_t *mreg_row(const mcpg_metric *m, bool *own) {
    uint32_t shared = m->n_rows - 1;
    int r = mreg_tl_row;
    *own = r >= 0 && (uint32_t)r < shared;
    return m->cells + (*own ? (uint32_t)r : shared) * m->row_stride;
}

static inline void mreg_bump(_Atomic int64_t *c, int64_t delta, bool own) {
    if (own) /* the row's one writer: a reader sees the old value or the new one */
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + delta,
                              memory_order_relaxed);
    else
        atomic_fetch_add_explicit(c, delta, memory_order_relaxed);
}

static inline void mreg_add(mcpg_metric *m, uint32_t series, int64_t delta) {
    if (!m || series >= m->cap_series || m->type == MCPG_METRIC_HISTOGRAM) return;
    bool own = false;
    mreg_bump(mreg_row(m, &own) + series, delta, own);
}

static inline void mreg_observe(mcpg_metric *m, uint32_t series, uint64_t v) {
    if (!m || series >= m->cap_series || m->type != MCPG_METRIC_HISTOGRAM) return;
    uint32_t b = 0;
    while (b < m->n_buckets && v > m->buckets[b]) b++; /* le: a value on a bound is in it */
    bool own = false;
    _Atomic int64_t *cells = mreg_row(m, &own) + (size_t)series * m->per_series;
    mreg_bump(cells + b, 1, own);
    mreg_bump(cells + m->n_buckets + 1, (int64_t)v, own);
}

/* A gauge's value, kept in the shared row (a gauge is set or added to, not both). */
void mreg_set(mcpg_metric *m, uint32_t series, int64_t value);

/* ---- families: under the registry's lock ---- */

/* n_loops loop rows plus the shared one. NULL when out of memory. */
mreg *mreg_new(uint32_t n_loops);
void mreg_free(mreg *r);
uint32_t mreg_loops(const mreg *r);

/* A family from desc (copied). owner and owner_name say whose it is (see
 * mcpg_metric.owner_name). cap_series >= desc->n_series makes cells for
 * series whose labels come later (mreg_series_labels): 0 means n_series.
 * 0, MCPG_EINVAL with why filled, MCPG_EEXIST, MCPG_ENOMEM. */
int mreg_metric_new(mreg *r, const void *owner, const char *owner_name,
                    const mcpg_metric_desc *desc, uint32_t cap_series, mcpg_metric **out,
                    char *why, size_t why_cap);
/* Label series (< cap_series) with values (n_labels of them, copied); the
 * family shows every series up to it. 0, MCPG_EINVAL, MCPG_ENOMEM. */
int mreg_series_labels(mreg *r, mcpg_metric *m, uint32_t series, const char *const *values);
/* Remove every family owner made (its instance is destroyed). */
void mreg_forget(mreg *r, const void *owner);
/* A metrics instance's exposition into out and its media type into ct
 * (the text format's when the module names none). */
int mreg_render(const mcpg_metrics_ops *ops, void *state, mcpg_buf *out, char *ct,
                size_t ct_cap);
/* fn once per family shown, with its series summed. 0 or MCPG_ENOMEM. */
int mreg_each(mreg *r, void (*fn)(void *arg, const mcpg_metric_view *v), void *arg);

#endif
