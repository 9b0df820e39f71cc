/* lib/audit: a sink's writer thread (see audit_writer.h). */
#include "audit_writer.h"

#include <errno.h>
#include <sched.h>
#include <time.h>

#include <mcpg/sdk.h>

#include "audit_sink.h"

void audit_writer_init(audit_writer *w, const audit_writer_ops *ops, void *sink) {
    *w = (audit_writer){.ops = ops, .sink = sink};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* flush's deadline ignores clock jumps */
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->wake, &ca);
    pthread_cond_init(&w->idle, &ca);
    pthread_condattr_destroy(&ca);
}

/* ---- metrics ---- */

static const uint64_t BATCH_BUCKETS[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
static const uint64_t WRITE_BUCKETS_US[] = {50,    100,   250,    500,    1000,   2500,
                                            5000,  10000, 25000,  50000,  100000, 250000,
                                            500000, 1000000};

static void count_batch(audit_writer *w, size_t events, uint64_t write_us) {
    w->host->metric_add(w->m_events, 0, (int64_t)events);
    w->host->metric_observe(w->m_batch, 0, events);
    w->host->metric_observe(w->m_write, 0, write_us);
}

void audit_writer_event_refused(audit_writer *w) {
    if (w->host) w->host->metric_add(w->m_refused, 0, 1);
}

static int64_t read_waiting(void *arg, uint32_t series) {
    (void)series;
    audit_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    size_t n = w->pending_events + w->batch_events;
    pthread_mutex_unlock(&w->mu);
    return (int64_t)n;
}

static mcpg_metric *sink_metric(const mcpg_host *h, mcpg_instance *self, uint32_t type,
                                const char *name, const char *help, const uint64_t *buckets,
                                uint32_t n_buckets, audit_writer *reader) {
    static const char *const labels[] = {"sink"};
    const char *values[] = {h->instance_name(self)};
    mcpg_metric_desc d = {.size = sizeof d, .type = type, .name = name, .help = help,
                          .label_names = labels, .n_labels = 1, .label_values = values,
                          .n_series = 1, .buckets = buckets, .n_buckets = n_buckets};
    if (reader) {
        d.read = read_waiting;
        d.read_arg = reader;
    }
    mcpg_metric *m = NULL;
    return h->metric_new(self, &d, &m) == 0 ? m : NULL;
}

void audit_writer_metrics(audit_writer *w, const mcpg_host *h, mcpg_instance *self) {
    if (!MCPG_HOST_HAS(h, metric_new)) return;
    w->m_events = sink_metric(h, self, MCPG_METRIC_COUNTER, "mcpg_audit_events_total",
                              "Audit events written (and synced, for a durable sink)", NULL, 0,
                              NULL);
    w->m_batch = sink_metric(h, self, MCPG_METRIC_HISTOGRAM, "mcpg_audit_batch_events",
                             "Events per batch the writer thread wrote at once", BATCH_BUCKETS,
                             sizeof BATCH_BUCKETS / sizeof BATCH_BUCKETS[0], NULL);
    w->m_write = sink_metric(h, self, MCPG_METRIC_HISTOGRAM, "mcpg_audit_write_seconds",
                             "Time to write one batch and sync it (audit_file: fdatasync)",
                             WRITE_BUCKETS_US, sizeof WRITE_BUCKETS_US / sizeof WRITE_BUCKETS_US[0],
                             NULL);
    w->m_refused = sink_metric(h, self, MCPG_METRIC_COUNTER, "mcpg_audit_refused_total",
                               "Events the sink could not take (its queue full, or stopped)",
                               NULL, 0, NULL);
    sink_metric(h, self, MCPG_METRIC_GAUGE, "mcpg_audit_queue_events",
                "Events queued for the writer thread, the batch being written included", NULL, 0,
                w);
    w->host = h; /* the writer counts from now on (metric slots ignore a NULL metric) */
}

static void *writer_main(void *arg) {
    audit_writer *w = arg;
    mcpg_thread_background(); /* woken per batch: it must not preempt the loop */
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->ops->has_work(w->sink) && !w->stopping) {
            w->waiting = 1;
            pthread_cond_wait(&w->wake, &w->mu);
            w->waiting = 0;
        }
        if (!w->ops->has_work(w->sink)) break; /* stopping and drained */
        w->ops->take(w->sink);
        w->batch_events = w->pending_events;
        w->pending_events = 0;
        pthread_mutex_unlock(&w->mu);

        uint64_t t0 = w->host ? w->host->mono_us() : 0;
        size_t done = w->ops->write(w->sink);
        if (w->host) count_batch(w, w->batch_events, w->host->mono_us() - t0);

        pthread_mutex_lock(&w->mu);
        w->batch_events = 0;
        w->queued -= done;
        if (w->queued == 0) pthread_cond_broadcast(&w->idle);
        /* Let the loops run the calls this batch just resumed before taking
         * the next: their next events (a call's "completed", the next call's
         * "allowed") then go into that batch instead of the one after, and
         * each fdatasync carries more events. On a core the writer shares
         * with a loop, batches at 64 connections went from ~32 to ~50 events
         * and the CPU per call fell ~17 % (docs/benchmarks/cpu.md); on a core of
         * its own the yield returns at once. */
        pthread_mutex_unlock(&w->mu); /* done counted first: the queue's gauge reads true */
        sched_yield();
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int audit_writer_start(audit_writer *w, const char *name) {
    int rc = audit_sink_thread(&w->thread, writer_main, w, name);
    w->started = rc == 0;
    return rc;
}

void audit_writer_wake(audit_writer *w) {
    if (!w->waiting) return;
    w->waiting = 0; /* the next queuer does not signal it again */
    w->wake_due = 1;
}

void audit_writer_unlock(audit_writer *w) {
    int signal = w->wake_due;
    w->wake_due = 0;
    pthread_mutex_unlock(&w->mu);
    /* the thread is in cond_wait (it set waiting under mu), so this cannot
     * be lost; a wake it no longer needs only makes it check has_work again */
    if (signal) pthread_cond_signal(&w->wake);
}

size_t audit_writer_flush(audit_writer *w, int seconds) {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += seconds;
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (w->queued > 0 && w->started && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&w->idle, &w->mu, &dl);
    size_t left = w->queued;
    pthread_mutex_unlock(&w->mu);
    return left;
}

void audit_writer_stop(audit_writer *w) {
    if (!w->started) return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->started = 0;
}

void audit_writer_destroy(audit_writer *w) {
    audit_writer_stop(w);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->idle);
    pthread_mutex_destroy(&w->mu);
}
