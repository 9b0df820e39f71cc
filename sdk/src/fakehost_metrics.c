/* The fake host's metrics slots (ABI 1.4): the kernel's registry
 * (metrics_registry.c) with one loop row, the fake host's worker. A
 * module's families go when it is unloaded, as in the kernel;
 * host->metrics_render asks the first loaded metrics instance. */
#include "fakehost_internal.h"
#include "metrics_registry.h"


/* The fake host's loop thread writes the loop row, any other the shared one. */
static void pick_row(void) { mreg_thread_row(fh_on_loop(fh_the) ? 0 : -1); }

static int host_metric_new(mcpg_instance *self, const mcpg_metric_desc *d, mcpg_metric **out) {
    mcpg_fakehost *fh = self ? self->fh : fh_the;
    if (!fh || !fh->metrics) return MCPG_ESTATE;
    char why[256] = "";
    int rc = mreg_metric_new(fh->metrics, self, self ? self->name : NULL, d, 0, out, why,
                             sizeof why);
    if (rc == MCPG_EINVAL || rc == MCPG_EEXIST)
        fh_note(fh, "%s: metric refused: %s", self ? self->stamp : "[test]", why);
    return rc;
}

static void host_metric_add(mcpg_metric *m, uint32_t series, int64_t delta) {
    pick_row();
    mreg_add(m, series, delta);
}

static void host_metric_set(mcpg_metric *m, uint32_t series, int64_t v) { mreg_set(m, series, v); }

static void host_metric_observe(mcpg_metric *m, uint32_t series, uint64_t v) {
    pick_row();
    mreg_observe(m, series, v);
}

static int host_metrics_each(void (*fn)(void *, const mcpg_metric_view *), void *arg) {
    mcpg_fakehost *fh = fh_the;
    return fh && fh->metrics ? mreg_each(fh->metrics, fn, arg) : MCPG_ESTATE;
}

static mcpg_instance *metrics_instance(mcpg_fakehost *fh) {
    for (mcpg_instance *i = fh->instances; i; i = i->next)
        if (i->m->kind == MCPG_KIND_METRICS && i->created) return i;
    return NULL;
}

static int host_metrics_render(mcpg_worker *w, mcpg_buf *out, char *ct, size_t ct_cap) {
    mcpg_fakehost *fh = w ? w->fh : fh_the;
    if (!fh || fh_loop_only(fh, &fh->worker, "host->metrics_render")) return MCPG_ESTATE;
    mcpg_instance *mi = metrics_instance(fh);
    return mi ? mreg_render(mi->m->ops, mi->state, out, ct, ct_cap) : MCPG_ENOENT;
}

int fh_metrics_open(mcpg_fakehost *fh) {
    fh->metrics = mreg_new(1);
    return fh->metrics ? 0 : MCPG_ENOMEM;
}

void fh_metrics_forget(mcpg_fakehost *fh, mcpg_instance *inst) { mreg_forget(fh->metrics, inst); }

void fh_metrics_close(mcpg_fakehost *fh) {
    mreg_free(fh->metrics);
    fh->metrics = NULL;
}

void fh_metrics_slots(mcpg_host *h) {
    h->metric_new = host_metric_new;
    h->metric_add = host_metric_add;
    h->metric_set = host_metric_set;
    h->metric_observe = host_metric_observe;
    h->metrics_each = host_metrics_each;
    h->metrics_render = host_metrics_render;
}
