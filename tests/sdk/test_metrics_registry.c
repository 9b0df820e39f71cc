/* The metrics registry (lib/hostcore/metrics_registry.c), the kernel's and the
 * fake host's: loop rows and the shared row summed right from many
 * threads, histogram buckets at their edges, names and shapes refused,
 * duplicates, a reload's successor taking a name over, an owner's families
 * removed. */
#include <mcpg/check.h>

#include <pthread.h>
#include <string.h>

#include "metrics_registry.h"

#define LOOPS 4
#define ADDS 200000

typedef struct found {
    const char *name;
    int seen;
    mcpg_metric_view v;
    int64_t values[16];
    uint64_t buckets[16], sums[4], counts[4];
} found;

static void find_one(void *arg, const mcpg_metric_view *v) {
    found *f = arg;
    if (strcmp(v->name, f->name) != 0) return;
    f->seen++;
    f->v = *v;
    for (uint32_t s = 0; s < v->n_series && s < 16; s++) {
        if (v->type != MCPG_METRIC_HISTOGRAM) {
            f->values[s] = v->values[s];
            continue;
        }
        for (uint32_t b = 0; b <= v->n_buckets && b < 16; b++)
            f->buckets[b] = v->bucket_counts[s * (v->n_buckets + 1) + b];
        f->sums[s] = v->sums[s];
        f->counts[s] = v->counts[s];
    }
}

static found look(mreg *r, const char *name) {
    found f = {.name = name};
    MCPG_CHECK(mreg_each(r, find_one, &f) == 0, "each");
    return f;
}

static mcpg_metric *make(mreg *r, const void *owner, const char *owner_name,
                         const mcpg_metric_desc *d, int expect) {
    mcpg_metric *m = NULL;
    char why[256] = "";
    int rc = mreg_metric_new(r, owner, owner_name, d, 0, &m, why, sizeof why);
    MCPG_CHECK(rc == expect, "%s: rc %d, expected %d (%s)", d->name ? d->name : "(null)", rc,
               expect, why);
    return m;
}

/* ---- rows: each loop writes its own, the rest share one ---- */

typedef struct adder {
    mcpg_metric *counter, *gauge;
    int row;
} adder;

static void *add_many(void *arg) {
    adder *a = arg;
    mreg_thread_row(a->row);
    for (int i = 0; i < ADDS; i++) {
        mreg_add(a->counter, (uint32_t)(i & 1), 1);
        mreg_add(a->gauge, 0, (i & 1) ? -1 : 2);
    }
    return NULL;
}

static void test_rows_summed(void) {
    mreg *r = mreg_new(LOOPS);
    static const char *const labels[] = {"parity"};
    static const char *const values[] = {"even", "odd"};
    mcpg_metric_desc cd = {.size = sizeof cd, .type = MCPG_METRIC_COUNTER, .name = "t_adds_total",
                           .help = "adds", .label_names = labels, .n_labels = 1,
                           .label_values = values, .n_series = 2};
    mcpg_metric_desc gd = {.size = sizeof gd, .type = MCPG_METRIC_GAUGE, .name = "t_level",
                           .n_series = 1};
    mcpg_metric *c = make(r, NULL, NULL, &cd, 0), *g = make(r, NULL, NULL, &gd, 0);
    MCPG_REQUIRE(c && g, "families");
    MCPG_CHECK(((uintptr_t)c->cells % MREG_LINE) == 0 && c->row_stride * sizeof(int64_t) % MREG_LINE == 0,
               "rows start on cache lines");
    /* four loop threads, and two more that own no row (LOOPS + 1: past the loops) */
    enum { N = LOOPS + 2 };
    pthread_t t[N];
    adder a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (adder){c, g, i < LOOPS ? i : (i == LOOPS ? -1 : LOOPS + 1)};
        pthread_create(&t[i], NULL, add_many, &a[i]);
    }
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    found f = look(r, "t_adds_total");
    MCPG_CHECK(f.seen == 1 && f.v.n_series == 2, "seen once, 2 series");
    MCPG_CHECK(f.values[0] == (int64_t)N * ADDS / 2 && f.values[1] == (int64_t)N * ADDS / 2,
               "even %lld odd %lld, expected %d each", (long long)f.values[0],
               (long long)f.values[1], N * ADDS / 2);
    MCPG_CHECK(strcmp(f.v.label_values[1], "odd") == 0 && strcmp(f.v.help, "adds") == 0,
               "labels and help copied");
    f = look(r, "t_level");
    MCPG_CHECK(f.values[0] == (int64_t)N * ADDS / 2, "gauge %lld", (long long)f.values[0]);
    mreg_thread_row(-1);
    mreg_set(g, 0, 7); /* a set gauge is the shared row's value */
    mreg_free(r);
}

/* ---- histograms: a value on a bound is in that bucket ---- */

static void test_histogram_edges(void) {
    mreg *r = mreg_new(2);
    static const uint64_t bounds[] = {10, 100, 1000};
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_HISTOGRAM, .name = "t_wait_seconds",
                          .n_series = 1, .buckets = bounds, .n_buckets = 3};
    mcpg_metric *h = make(r, NULL, NULL, &d, 0);
    MCPG_REQUIRE(h, "histogram");
    static const uint64_t seen[] = {0, 10, 11, 100, 101, 1000, 1001, UINT32_MAX};
    mreg_thread_row(1);
    for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++) mreg_observe(h, 0, seen[i]);
    mreg_thread_row(-1);
    mreg_observe(h, 0, 5);
    mreg_observe(h, 1, 5);  /* no such series: ignored */
    mreg_add(h, 0, 1);      /* not a counter: ignored */
    found f = look(r, "t_wait_seconds");
    MCPG_CHECK(f.buckets[0] == 3 && f.buckets[1] == 2 && f.buckets[2] == 2 && f.buckets[3] == 2,
               "buckets %llu %llu %llu +Inf %llu", (unsigned long long)f.buckets[0],
               (unsigned long long)f.buckets[1], (unsigned long long)f.buckets[2],
               (unsigned long long)f.buckets[3]);
    MCPG_CHECK(f.counts[0] == 9, "count %llu", (unsigned long long)f.counts[0]);
    uint64_t sum = 5;
    for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++) sum += seen[i];
    MCPG_CHECK(f.sums[0] == sum, "sum %llu, expected %llu", (unsigned long long)f.sums[0],
               (unsigned long long)sum);
    mreg_free(r);
}

/* ---- what is refused ---- */

static void test_refused(void) {
    mreg *r = mreg_new(1);
    static const char *const bad_label[] = {"le"};
    static const char *const dunder[] = {"__x"};
    static const char *const one[] = {"a"};
    static const uint64_t down[] = {10, 10};
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_COUNTER, .n_series = 1};
    const char *names[] = {"9lives", "a-b", "", "caf\xc3\xa9"};
    for (size_t i = 0; i < 4; i++) {
        d.name = names[i];
        make(r, NULL, NULL, &d, MCPG_EINVAL);
    }
    d.name = "ok:name_1";
    make(r, NULL, NULL, &d, 0);
    mcpg_metric_desc l = d;
    l.name = "t_l";
    l.n_labels = 1;
    l.label_values = one;
    l.label_names = bad_label;
    make(r, NULL, NULL, &l, MCPG_EINVAL);
    l.label_names = dunder;
    make(r, NULL, NULL, &l, MCPG_EINVAL);
    l.label_names = one;
    l.label_values = NULL;
    make(r, NULL, NULL, &l, MCPG_EINVAL);
    mcpg_metric_desc two = d;
    two.name = "t_two";
    two.n_series = 2; /* two series need labels */
    make(r, NULL, NULL, &two, MCPG_EINVAL);
    mcpg_metric_desc h = d;
    h.name = "t_h";
    h.type = MCPG_METRIC_HISTOGRAM;
    h.buckets = down;
    h.n_buckets = 2;
    make(r, NULL, NULL, &h, MCPG_EINVAL);
    h.n_buckets = 0;
    make(r, NULL, NULL, &h, MCPG_EINVAL);
    mcpg_metric_desc typ = d;
    typ.name = "t_type";
    typ.type = 9;
    make(r, NULL, NULL, &typ, MCPG_EINVAL);
    mreg_free(r);
}

/* ---- owners: duplicates, re-registration, successors, removal ---- */

static int owner_a, owner_b, owner_a2;

static void test_owners(void) {
    mreg *r = mreg_new(1);
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_COUNTER, .name = "t_hits_total",
                          .n_series = 1};
    mcpg_metric *a = make(r, &owner_a, "a", &d, 0);
    MCPG_CHECK(make(r, &owner_a, "a", &d, 0) == a, "the same instance asking again gets its family");
    make(r, &owner_b, "b", &d, MCPG_EEXIST); /* without labels: one part only */
    mcpg_metric_desc gauge = d;
    gauge.type = MCPG_METRIC_GAUGE;
    make(r, &owner_a, "a", &gauge, MCPG_EEXIST); /* same owner, another shape */
    mreg_add(a, 0, 5);
    /* a reload replaced instance "a": its successor starts at 0 and is shown */
    mcpg_metric *a2 = make(r, &owner_a2, "a", &d, 0);
    MCPG_REQUIRE(a2 && a2 != a, "successor");
    mreg_add(a, 0, 1); /* the old one may still count while it finishes */
    found f = look(r, "t_hits_total");
    MCPG_CHECK(f.seen == 1 && f.values[0] == 0, "successor shown alone, at 0 (seen %d, %lld)",
               f.seen, (long long)f.values[0]);
    mreg_forget(r, &owner_a); /* the old instance is destroyed */
    f = look(r, "t_hits_total");
    MCPG_CHECK(f.seen == 1 && f.values[0] == 0, "successor kept");
    mreg_add(a2, 0, 2);
    mreg_forget(r, &owner_a2);
    f = look(r, "t_hits_total");
    MCPG_CHECK(f.seen == 0, "removed with its owner");
    make(r, &owner_b, "b", &d, 0); /* the name is free again */
    /* a successor that goes first (a reload that failed) gives the name back */
    mcpg_metric_desc e = d;
    e.name = "t_back_total";
    mcpg_metric *old = make(r, &owner_a, "a", &e, 0);
    mreg_add(old, 0, 3);
    make(r, &owner_a2, "a", &e, 0);
    mreg_forget(r, &owner_a2);
    f = look(r, "t_back_total");
    MCPG_CHECK(f.seen == 1 && f.values[0] == 3, "the predecessor is shown again with its value");
    mreg_free(r);
}

/* ---- parts: two instances of one module, one family ---- */

typedef struct parts_seen {
    uint32_t parts[4];
    int64_t values[4];
    int n;
} parts_seen;

static void collect_parts(void *arg, const mcpg_metric_view *v) {
    parts_seen *p = arg;
    if (strcmp(v->name, "t_sent_total") != 0 || p->n >= 4) return;
    p->parts[p->n] = v->part;
    p->values[p->n++] = v->values[0];
}

static void test_parts(void) {
    mreg *r = mreg_new(1);
    static const char *const labels[] = {"sink"};
    static const char *const one[] = {"one"}, *const two[] = {"two"};
    static const char *const other_labels[] = {"queue"};
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_COUNTER, .name = "t_sent_total",
                          .label_names = labels, .n_labels = 1, .label_values = one, .n_series = 1};
    mcpg_metric *a = make(r, &owner_a, "one", &d, 0);
    mcpg_metric_desc between = {.size = sizeof between, .type = MCPG_METRIC_GAUGE,
                                .name = "t_between", .n_series = 1};
    make(r, NULL, NULL, &between, 0);
    d.label_values = two;
    mcpg_metric *b = make(r, &owner_b, "two", &d, 0);
    MCPG_REQUIRE(a && b && a != b, "two parts");
    mcpg_metric_desc gauge = d;
    gauge.type = MCPG_METRIC_GAUGE;
    make(r, &owner_a2, "three", &gauge, MCPG_EEXIST); /* another type */
    mcpg_metric_desc relabelled = d;
    relabelled.label_names = other_labels;
    make(r, &owner_a2, "three", &relabelled, MCPG_EEXIST); /* other label names */
    mreg_add(a, 0, 1);
    mreg_add(b, 0, 2);
    parts_seen p = {0};
    mreg_each(r, collect_parts, &p);
    MCPG_CHECK(p.n == 2 && p.parts[0] == 0 && p.parts[1] == 1 && p.values[0] == 1 && p.values[1] == 2,
               "one family in two parts, next to each other (%d parts)", p.n);
    mreg_forget(r, &owner_a);
    p = (parts_seen){0};
    mreg_each(r, collect_parts, &p);
    MCPG_CHECK(p.n == 1 && p.parts[0] == 0 && p.values[0] == 2, "the other part stays, now first");
    mreg_free(r);
}

/* ---- a gauge read at each pass; series labelled later ---- */

static int64_t read_depth(void *arg, uint32_t series) { return *(int *)arg * 10 + (int64_t)series; }

static void test_read_and_late_labels(void) {
    mreg *r = mreg_new(1);
    static int depth = 4;
    static const char *const labels[] = {"q"};
    static const char *const values[] = {"in", "out"};
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_GAUGE, .name = "t_depth",
                          .label_names = labels, .n_labels = 1, .label_values = values,
                          .n_series = 2, .read = read_depth, .read_arg = &depth};
    make(r, NULL, NULL, &d, 0);
    found f = look(r, "t_depth");
    MCPG_CHECK(f.values[0] == 40 && f.values[1] == 41, "read at each pass");
    mcpg_metric_desc grow = {.size = sizeof grow, .type = MCPG_METRIC_COUNTER, .name = "t_grow",
                             .label_names = labels, .n_labels = 1, .label_values = values,
                             .n_series = 1};
    mcpg_metric *g = NULL;
    char why[128];
    MCPG_REQUIRE(mreg_metric_new(r, NULL, NULL, &grow, 8, &g, why, sizeof why) == 0, "%s", why);
    mreg_add(g, 5, 2); /* cells exist before the series is shown */
    MCPG_CHECK(look(r, "t_grow").v.n_series == 1, "one series shown");
    const char *v5[] = {"five"};
    MCPG_CHECK(mreg_series_labels(r, g, 5, v5) == 0, "labels");
    f = look(r, "t_grow");
    MCPG_CHECK(f.v.n_series == 6 && f.values[5] == 2 && strcmp(f.v.label_values[5], "five") == 0,
               "series 5 shown with its count");
    MCPG_CHECK(mreg_series_labels(r, g, 8, v5) == MCPG_EINVAL, "past its cells");
    mreg_free(r);
}

int main(void) {
    test_rows_summed();
    test_histogram_edges();
    test_refused();
    test_owners();
    test_parts();
    test_read_and_late_labels();
    return MCPG_CHECK_EXIT("test_metrics_registry");
}
