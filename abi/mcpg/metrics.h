/** @file
 * mcpg ABI 1.4: the metrics registry, one for the kernel and every module.
 *
 * A metric is a family (one name, one type, one help line) of series, each
 * series one fixed set of label values. Everything is decided when the
 * family is created, on the main thread at create()/start() or on a loop
 * thread: the kernel copies the description, allocates every series' cells
 * then, and never allocates when a series is counted.
 *
 * Counting (host->metric_add, _set, _observe) is any-thread and lock-free.
 * Each series keeps one row of cells per worker loop and one shared row: on
 * a loop thread a count is a plain load and store in that loop's own row
 * (one writer: no locked instruction, no cache line shared with another
 * loop); off the loops it is an atomic add on the shared row. Readers sum
 * the rows (host->metrics_each, under the registry's lock).
 *
 * Parts: one name is one family. Several instances (two of one module)
 * may each register a part of it: the same type, label names and buckets,
 * at least one label, and label values of their own (put the instance's
 * name in one: the registry does not compare series across parts). Any
 * other second registration of a name is refused.
 *
 * Life: a family belongs to the instance that created it and is removed
 * when that instance is destroyed. A reload that carries the instance over
 * keeps its families and their values; one that replaces it (new config,
 * new code) gives the name to the new instance's family, which starts at 0
 * (Prometheus reads that as a counter reset).
 *
 * Units: a value is an integer in the metric's unit. A name ending in
 * `_seconds` holds microseconds (its histogram buckets too); an exporter
 * prints it divided by 1e6. A name ending in `_bytes` holds bytes.
 */
#ifndef MCPG_METRICS_H
#define MCPG_METRICS_H

#include <stddef.h>
#include <stdint.h>

/** Metric types. Append only. */
typedef enum mcpg_metric_type {
    MCPG_METRIC_COUNTER = 1,   /**< only goes up: metric_add with delta >= 0 */
    MCPG_METRIC_GAUGE = 2,     /**< metric_add (up and down) or metric_set, or a read callback */
    MCPG_METRIC_HISTOGRAM = 3  /**< metric_observe; buckets fixed at creation */
} mcpg_metric_type;

typedef struct mcpg_metric mcpg_metric; /**< the kernel's; lives until its owner is destroyed */

#define MCPG_METRIC_MAX_LABELS 8        /**< the most labels a family may have */
#define MCPG_METRIC_MAX_SERIES 65536    /**< the most series a family may have */
#define MCPG_METRIC_MAX_BUCKETS 64      /**< the most buckets a histogram may have */

/** What a family is. Every pointer is borrowed for host->metric_new only:
 * the kernel copies it all (the module's image may be unloaded before the
 * family goes). */
typedef struct mcpg_metric_desc {
    uint32_t size;                    /**< sizeof(mcpg_metric_desc) at build time */
    uint32_t type;                    /**< mcpg_metric_type */
    const char *name;                 /**< [a-zA-Z_:][a-zA-Z0-9_:]* */
    const char *help;                 /**< one line, or NULL */
    const char *const *label_names;   /**< n_labels names, [a-zA-Z_][a-zA-Z0-9_]*, not "__..." nor "le" */
    uint32_t n_labels;                /**< 0..MCPG_METRIC_MAX_LABELS */
    uint32_t n_series;                /**< 1..MCPG_METRIC_MAX_SERIES; 1 when n_labels is 0 */
    /** n_series x n_labels values, row-major: series s has
     * label_values[s * n_labels + l]; any UTF-8 (an exporter escapes it) */
    const char *const *label_values;
    const uint64_t *buckets;          /**< histogram: upper bounds, strictly ascending (+Inf is implied) */
    uint32_t n_buckets;               /**< histogram: 1..MCPG_METRIC_MAX_BUCKETS; else 0 */
    uint32_t reserved0;               /**< 0 */
    /** Optional, gauges only: the series' value is read when the registry
     * is read (a queue's depth) instead of counted. Any thread, under the
     * registry's lock: it must be quick and must not call the metric slots. */
    int64_t (*read)(void *read_arg, uint32_t series);
    void *read_arg;                   /**< given to read */
} mcpg_metric_desc;

/** A family as the registry holds it now, for an exporter (host->metrics_each).
 * Everything is borrowed for the callback. */
typedef struct mcpg_metric_view {
    uint32_t size;                    /**< sizeof(mcpg_metric_view) in the kernel */
    uint32_t type;                    /**< mcpg_metric_type */
    const char *name;                 /**< the family's name */
    const char *help;                 /**< "" when none was given */
    const char *const *label_names;   /**< n_labels label names */
    uint32_t n_labels;                /**< how many labels each series has */
    uint32_t n_series;                /**< how many series this part holds */
    const char *const *label_values;  /**< n_series x n_labels, row-major */
    const uint64_t *buckets;          /**< histogram upper bounds */
    uint32_t n_buckets;               /**< histogram: how many bounds; else 0 */
    uint32_t reserved0;               /**< 0 */
    const int64_t *values;            /**< counter, gauge: n_series values */
    /** histogram: n_series x (n_buckets + 1) counts, per bucket (not
     * cumulative), the last one above every bound (+Inf) */
    const uint64_t *bucket_counts;
    const uint64_t *sums;             /**< histogram: n_series sums of what was observed */
    const uint64_t *counts;           /**< histogram: n_series counts (the sum of its buckets) */
    /** 0 for a family's first part; 1, 2, ... for more series of the same
     * family, registered by other instances, which follow it at once (an
     * exporter writes # HELP and # TYPE once, at part 0) */
    uint32_t part;
    uint32_t reserved1;               /**< 0 */
} mcpg_metric_view;

#endif
