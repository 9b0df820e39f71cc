/* The metrics registry: families, their copied descriptions and their cells
 * (metrics_registry.h). Creating, removing and reading families take the
 * lock; counting never does. */
#include "metrics_registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Thread_local int mreg_tl_row = -1;

void mreg_thread_row(int row) { mreg_tl_row = row; }

struct mreg {
    pthread_mutex_t lock;
    uint32_t n_loops;
    mcpg_metric *families;
    /* the sums handed to each()'s callback, reused family after family */
    int64_t *values;
    uint64_t *bucket_counts, *sums, *counts;
    size_t scratch_series, scratch_buckets;
};

mreg *mreg_new(uint32_t n_loops) {
    mreg *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->lock, NULL);
    r->n_loops = n_loops;
    return r;
}

uint32_t mreg_loops(const mreg *r) { return r->n_loops; }

static void free_strings(char **v, size_t n) {
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

static void family_free(mcpg_metric *m) {
    free(m->owner_name);
    free(m->name);
    free(m->help);
    free_strings(m->label_names, m->n_labels);
    free_strings(m->label_values, (size_t)m->cap_series * m->n_labels);
    free(m->buckets);
    free(m->cells_block);
    free(m);
}

void mreg_free(mreg *r) {
    if (!r) return;
    for (mcpg_metric *m = r->families, *next; m; m = next) {
        next = m->next;
        family_free(m);
    }
    free(r->values);
    free(r->bucket_counts);
    free(r->sums);
    free(r->counts);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

void mreg_set(mcpg_metric *m, uint32_t series, int64_t value) {
    if (!m || series >= m->cap_series || m->type != MCPG_METRIC_GAUGE) return;
    atomic_store_explicit(m->cells + (size_t)(m->n_rows - 1) * m->row_stride + series, value,
                          memory_order_relaxed);
}

/* ---- checking a description ---- */

static bool name_ok(const char *s, bool colons) {
    if (!s || !*s || strlen(s) > 200) return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                     (colons && c == ':');
        if (!alpha && !(p > s && c >= '0' && c <= '9')) return false;
    }
    return true;
}

/* Prometheus keeps names that start "__" for itself, and "le" for buckets. */
static bool label_name_ok(const char *s) {
    return name_ok(s, false) && strncmp(s, "__", 2) != 0 && strcmp(s, "le") != 0;
}

static int check_labels(const mcpg_metric_desc *d, char *why, size_t cap) {
    if (d->n_labels > MCPG_METRIC_MAX_LABELS || (d->n_labels && !d->label_names)) {
        snprintf(why, cap, "at most %d label names, given as an array", MCPG_METRIC_MAX_LABELS);
        return MCPG_EINVAL;
    }
    for (uint32_t i = 0; i < d->n_labels; i++)
        if (!label_name_ok(d->label_names[i])) {
            snprintf(why, cap, "label name \"%s\" is not [a-zA-Z_][a-zA-Z0-9_]* (nor __..., le)",
                     d->label_names[i] ? d->label_names[i] : "(null)");
            return MCPG_EINVAL;
        }
    if (d->n_series < 1 || d->n_series > MCPG_METRIC_MAX_SERIES || (!d->n_labels && d->n_series != 1)) {
        snprintf(why, cap, "%u series: 1 without labels, else 1..%d", d->n_series,
                 MCPG_METRIC_MAX_SERIES);
        return MCPG_EINVAL;
    }
    if (d->n_labels && !d->label_values) {
        snprintf(why, cap, "no label values for %u series", d->n_series);
        return MCPG_EINVAL;
    }
    for (size_t i = 0; i < (size_t)d->n_series * d->n_labels; i++)
        if (!d->label_values[i]) {
            snprintf(why, cap, "label value %zu is NULL", i);
            return MCPG_EINVAL;
        }
    return 0;
}

static int check_buckets(const mcpg_metric_desc *d, char *why, size_t cap) {
    if (d->type != MCPG_METRIC_HISTOGRAM) return 0;
    if (d->n_buckets < 1 || d->n_buckets > MCPG_METRIC_MAX_BUCKETS || !d->buckets) {
        snprintf(why, cap, "a histogram needs 1..%d buckets", MCPG_METRIC_MAX_BUCKETS);
        return MCPG_EINVAL;
    }
    for (uint32_t i = 1; i < d->n_buckets; i++)
        if (d->buckets[i] <= d->buckets[i - 1]) {
            snprintf(why, cap, "bucket bounds must be strictly ascending (bucket %u)", i);
            return MCPG_EINVAL;
        }
    return 0;
}

static int check_desc(const mcpg_metric_desc *d, char *why, size_t cap) {
    if (!d || d->size < offsetof(mcpg_metric_desc, read)) {
        snprintf(why, cap, "no description, or one smaller than ABI 1.4's");
        return MCPG_EINVAL;
    }
    if (d->type < MCPG_METRIC_COUNTER || d->type > MCPG_METRIC_HISTOGRAM) {
        snprintf(why, cap, "unknown metric type %u", d->type);
        return MCPG_EINVAL;
    }
    if (!name_ok(d->name, true)) {
        snprintf(why, cap, "name \"%s\" is not [a-zA-Z_:][a-zA-Z0-9_:]*", d->name ? d->name : "(null)");
        return MCPG_EINVAL;
    }
    if (MCPG_HAS(d, read) && d->type != MCPG_METRIC_GAUGE) {
        snprintf(why, cap, "only a gauge may have a read callback");
        return MCPG_EINVAL;
    }
    int rc = check_labels(d, why, cap);
    return rc ? rc : check_buckets(d, why, cap);
}

/* ---- making a family ---- */

static char **copy_strings(const char *const *v, size_t n, size_t cap) {
    char **out = calloc(cap ? cap : 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(v[i]))) {
            free_strings(out, n);
            return NULL;
        }
    return out;
}

static int make_cells(mcpg_metric *m, uint32_t n_rows) {
    m->per_series = m->type == MCPG_METRIC_HISTOGRAM ? m->n_buckets + 2 : 1;
    size_t per_line = MREG_LINE / sizeof(int64_t);
    size_t cells = (size_t)m->cap_series * m->per_series;
    m->row_stride = (cells + per_line - 1) / per_line * per_line;
    m->n_rows = n_rows;
    /* calloc, not aligned_alloc and memset: a big family (the tools') is
     * then zero pages the kernel maps, resident only where a loop counts */
    size_t bytes = m->row_stride * n_rows * sizeof(int64_t);
    m->cells_block = calloc(1, bytes + MREG_LINE);
    if (!m->cells_block) return MCPG_ENOMEM;
    uintptr_t at = ((uintptr_t)m->cells_block + MREG_LINE - 1) / MREG_LINE * MREG_LINE;
    m->cells = (_Atomic int64_t *)at;
    return 0;
}

static mcpg_metric *family_make(const mreg *r, const mcpg_metric_desc *d, uint32_t cap) {
    mcpg_metric *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->type = d->type;
    m->name = strdup(d->name);
    m->help = strdup(d->help ? d->help : "");
    m->n_labels = d->n_labels;
    m->n_series = d->n_series;
    m->cap_series = cap;
    m->label_names = copy_strings(d->label_names, d->n_labels, d->n_labels);
    m->label_values = copy_strings(d->label_values, (size_t)d->n_series * d->n_labels,
                                   (size_t)cap * d->n_labels);
    if (d->type == MCPG_METRIC_HISTOGRAM) {
        m->n_buckets = d->n_buckets;
        m->buckets = malloc(d->n_buckets * sizeof *m->buckets);
        if (m->buckets) memcpy(m->buckets, d->buckets, d->n_buckets * sizeof *m->buckets);
    }
    if (MCPG_HAS(d, read)) {
        m->read = d->read;
        m->read_arg = d->read_arg;
    }
    bool ok = m->name && m->help && m->label_names && m->label_values &&
              (d->type != MCPG_METRIC_HISTOGRAM || m->buckets);
    if (!ok || make_cells(m, r->n_loops + 1) != 0) {
        family_free(m);
        return NULL;
    }
    return m;
}

static bool same_owner_name(const char *a, const char *b) {
    return a && b && strcmp(a, b) == 0;
}

/* The part of `name` shown for that instance name, or NULL. */
static mcpg_metric *shown(mreg *r, const char *name, const char *owner_name) {
    for (mcpg_metric *m = r->families; m; m = m->next)
        if (!m->hidden && strcmp(m->name, name) == 0 && same_owner_name(m->owner_name, owner_name))
            return m;
    return NULL;
}

/* What the parts of one family must share to be printed as one. */
static bool same_family(const mcpg_metric *m, const mcpg_metric_desc *d) {
    if (m->type != d->type || m->n_labels != d->n_labels || !d->n_labels) return false;
    for (uint32_t l = 0; l < d->n_labels; l++)
        if (strcmp(m->label_names[l], d->label_names[l]) != 0) return false;
    if (d->type != MCPG_METRIC_HISTOGRAM) return true;
    return m->n_buckets == d->n_buckets &&
           memcmp(m->buckets, d->buckets, d->n_buckets * sizeof *d->buckets) == 0;
}

static bool same_shape(const mcpg_metric *m, const mcpg_metric_desc *d) {
    return m->type == d->type && m->n_labels == d->n_labels && m->n_series == d->n_series &&
           m->n_buckets == (d->type == MCPG_METRIC_HISTOGRAM ? d->n_buckets : 0);
}

/* Whether desc may join the family called desc->name: 0, or MCPG_EEXIST
 * with why. *mine is the owner's own part (asked again), *replaced the
 * part of a predecessor of the same instance name (a reload's). */
static int may_join(mreg *r, const void *owner, const char *owner_name,
                    const mcpg_metric_desc *d, mcpg_metric **mine, mcpg_metric **replaced,
                    char *why, size_t why_cap) {
    *mine = *replaced = NULL;
    for (mcpg_metric *m = r->families; m; m = m->next) {
        if (m->hidden || strcmp(m->name, d->name) != 0) continue;
        if (m->owner == owner && same_shape(m, d)) {
            *mine = m;
            return 0;
        }
        if (m->owner != owner && same_owner_name(m->owner_name, owner_name)) {
            *replaced = m; /* its predecessor's: replaced whatever its shape */
            continue;
        }
        if (m->owner == owner || !same_family(m, d)) {
            snprintf(why, why_cap, "\"%s\" is already registered by %s%s", d->name,
                     m->owner_name ? m->owner_name : "the gateway",
                     m->owner == owner ? " (this instance, in another shape)"
                                       : " (a family's parts share type, label names and "
                                         "buckets, and have labels)");
            return MCPG_EEXIST;
        }
    }
    return 0;
}

int mreg_metric_new(mreg *r, const void *owner, const char *owner_name,
                    const mcpg_metric_desc *d, uint32_t cap_series, mcpg_metric **out,
                    char *why, size_t why_cap) {
    if (!r || !out) return MCPG_EINVAL;
    *out = NULL;
    int rc = check_desc(d, why, why_cap);
    if (rc) return rc;
    if (cap_series < d->n_series) cap_series = d->n_series;
    pthread_mutex_lock(&r->lock);
    mcpg_metric *mine, *replaced, *m = NULL;
    rc = may_join(r, owner, owner_name, d, &mine, &replaced, why, why_cap);
    if (!rc && mine) {
        m = mine; /* asked again: the same family */
    } else if (!rc && (m = family_make(r, d, cap_series)) != NULL) {
        m->owner = owner;
        m->owner_name = owner_name ? strdup(owner_name) : NULL;
        if (replaced) replaced->hidden = true; /* the instance's successor takes its part */
        m->next = r->families;
        r->families = m;
    } else if (!rc) {
        rc = MCPG_ENOMEM;
    }
    pthread_mutex_unlock(&r->lock);
    *out = m;
    return rc;
}

int mreg_series_labels(mreg *r, mcpg_metric *m, uint32_t series, const char *const *values) {
    if (!m || series >= m->cap_series || !values) return MCPG_EINVAL;
    char **copy = copy_strings(values, m->n_labels, m->n_labels);
    if (!copy) return MCPG_ENOMEM;
    pthread_mutex_lock(&r->lock);
    char **slot = m->label_values + (size_t)series * m->n_labels;
    for (uint32_t l = 0; l < m->n_labels; l++) {
        free(slot[l]);
        slot[l] = copy[l];
    }
    if (series >= m->n_series) m->n_series = series + 1;
    pthread_mutex_unlock(&r->lock);
    free(copy);
    return 0;
}

/* The newest hidden part of that name and instance name gets it back: the
 * successor that took it went away first (a reload that failed after its
 * create()). */
static void unhide_predecessor(mreg *r, const char *name, const char *owner_name) {
    if (!owner_name || shown(r, name, owner_name)) return;
    for (mcpg_metric *m = r->families; m; m = m->next)
        if (m->hidden && strcmp(m->name, name) == 0 && same_owner_name(m->owner_name, owner_name)) {
            m->hidden = false;
            return;
        }
}

void mreg_forget(mreg *r, const void *owner) {
    if (!r || !owner) return;
    pthread_mutex_lock(&r->lock);
    for (mcpg_metric **pp = &r->families; *pp;) {
        mcpg_metric *m = *pp;
        if (m->owner != owner) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        if (!m->hidden) unhide_predecessor(r, m->name, m->owner_name);
        family_free(m);
    }
    pthread_mutex_unlock(&r->lock);
}

/* ---- reading ---- */

int mreg_render(const mcpg_metrics_ops *ops, void *state, mcpg_buf *out, char *ct,
                size_t ct_cap) {
    if (!out) return MCPG_EINVAL;
    const char *type = MCPG_HAS(ops, content_type) ? ops->content_type(state) : NULL;
    if (ct && ct_cap)
        snprintf(ct, ct_cap, "%s",
                 type && *type ? type : "text/plain; version=0.0.4; charset=utf-8");
    return ops->render(state, out);
}

static int scratch_fit(mreg *r, size_t series, size_t buckets) {
    if (series > r->scratch_series) {
        int64_t *v = realloc(r->values, series * sizeof *v);
        if (v) r->values = v;
        uint64_t *s = realloc(r->sums, series * sizeof *s);
        if (s) r->sums = s;
        uint64_t *c = realloc(r->counts, series * sizeof *c);
        if (c) r->counts = c;
        if (!v || !s || !c) return MCPG_ENOMEM;
        r->scratch_series = series;
    }
    if (buckets > r->scratch_buckets) {
        uint64_t *b = realloc(r->bucket_counts, buckets * sizeof *b);
        if (!b) return MCPG_ENOMEM;
        r->bucket_counts = b;
        r->scratch_buckets = buckets;
    }
    return 0;
}

static int64_t cell_sum(const mcpg_metric *m, size_t cell) {
    int64_t sum = 0;
    for (uint32_t row = 0; row < m->n_rows; row++)
        sum += atomic_load_explicit(m->cells + row * m->row_stride + cell, memory_order_relaxed);
    return sum;
}

static void sum_series(mreg *r, const mcpg_metric *m) {
    for (uint32_t s = 0; s < m->n_series; s++) {
        if (m->type != MCPG_METRIC_HISTOGRAM) {
            r->values[s] = m->read ? m->read(m->read_arg, s) : cell_sum(m, s);
            continue;
        }
        size_t base = (size_t)s * m->per_series;
        uint64_t count = 0;
        for (uint32_t b = 0; b <= m->n_buckets; b++) {
            uint64_t n = (uint64_t)cell_sum(m, base + b);
            r->bucket_counts[(size_t)s * (m->n_buckets + 1) + b] = n;
            count += n;
        }
        r->counts[s] = count;
        r->sums[s] = (uint64_t)cell_sum(m, base + m->n_buckets + 1);
    }
}

static void view_of(const mreg *r, const mcpg_metric *m, mcpg_metric_view *v) {
    *v = (mcpg_metric_view){
        .size = sizeof *v,
        .type = m->type,
        .name = m->name,
        .help = m->help,
        .label_names = (const char *const *)m->label_names,
        .n_labels = m->n_labels,
        .n_series = m->n_series,
        .label_values = (const char *const *)m->label_values,
        .buckets = m->buckets,
        .n_buckets = m->n_buckets,
    };
    if (m->type == MCPG_METRIC_HISTOGRAM) {
        v->bucket_counts = r->bucket_counts;
        v->sums = r->sums;
        v->counts = r->counts;
    } else {
        v->values = r->values;
    }
}

static int emit(mreg *r, const mcpg_metric *m, uint32_t part,
                void (*fn)(void *, const mcpg_metric_view *), void *arg) {
    if (scratch_fit(r, m->n_series, (size_t)m->n_series * (m->n_buckets + 1)) != 0)
        return MCPG_ENOMEM;
    sum_series(r, m);
    mcpg_metric_view v;
    view_of(r, m, &v);
    v.part = part;
    fn(arg, &v);
    return 0;
}

/* Families shown, oldest first (the order they were made in, so an
 * exposition reads the same from one scrape to the next), each one's parts
 * right after its first. */
static int each_family(mreg *r, mcpg_metric **all, size_t n,
                       void (*fn)(void *, const mcpg_metric_view *), void *arg) {
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!all[i]) continue;
        uint32_t part = 0;
        const char *name = all[i]->name;
        for (size_t j = i; j < n && !rc; j++) {
            if (!all[j] || strcmp(all[j]->name, name) != 0) continue;
            rc = emit(r, all[j], part++, fn, arg);
            if (j > i) all[j] = NULL;
        }
    }
    return rc;
}

int mreg_each(mreg *r, void (*fn)(void *arg, const mcpg_metric_view *v), void *arg) {
    if (!r || !fn) return MCPG_EINVAL;
    pthread_mutex_lock(&r->lock);
    size_t n = 0;
    for (mcpg_metric *m = r->families; m; m = m->next) n += !m->hidden;
    mcpg_metric **all = malloc((n ? n : 1) * sizeof *all);
    int rc = all ? 0 : MCPG_ENOMEM;
    size_t k = n;
    for (mcpg_metric *m = r->families; all && m; m = m->next)
        if (!m->hidden) all[--k] = m; /* the list is newest first */
    if (all) rc = each_family(r, all, n, fn, arg);
    pthread_mutex_unlock(&r->lock);
    free(all);
    return rc;
}
