/* lib/audit: the writer thread every sink runs the same way. Loop threads
 * append to the sink's pending batch under `mu`, call audit_writer_wake and
 * let go of `mu` with audit_writer_unlock; the thread takes the batch (swap,
 * under mu), writes it without the lock, and counts what is done. flush
 * waits, bounded, until nothing is queued; stop writes out everything
 * queued, then joins.
 *
 * The sink says what a batch is through three callbacks and what `queued`
 * counts (events, bytes): it adds to it when it queues, the writer takes
 * away what write() returns.
 *
 * Metrics (ABI 1.4, when the kernel keeps them): each sink's events
 * written, its batches' sizes (events) and write-and-sync times, the events
 * waiting, and those it could not take, labelled sink="<instance>" (one
 * family for every sink: docs/metrics.md). */
#ifndef AUDIT_WRITER_H
#define AUDIT_WRITER_H

#include <mcpg/abi.h>
#include <pthread.h>
#include <stddef.h>

typedef struct audit_writer_ops {
    int (*has_work)(void *sink);  /* under mu: the pending batch holds something */
    void (*take)(void *sink);     /* under mu: the pending batch becomes the writer's */
    size_t (*write)(void *sink);  /* without mu: write the taken batch; returns the
                                     units it held (they leave `queued`) */
} audit_writer_ops;

typedef struct audit_writer {
    pthread_mutex_t mu;
    pthread_cond_t wake;  /* the thread waits here for work or stop */
    pthread_cond_t idle;  /* flush waits here for nothing queued */
    const audit_writer_ops *ops;
    void *sink;
    pthread_t thread;
    int started;
    /* ---- under mu ---- */
    size_t queued;
    int waiting;          /* wake only a sleeping thread: one futex wake per batch */
    int wake_due;         /* a wake asked for, sent by audit_writer_unlock */
    int stopping;
    size_t pending_events, batch_events; /* queued, and in the batch being written */
    /* ---- metrics: set at create(), NULL when the kernel keeps none ---- */
    const mcpg_host *host;
    mcpg_metric *m_events, *m_batch, *m_write, *m_refused;
} audit_writer;

void audit_writer_init(audit_writer *w, const audit_writer_ops *ops, void *sink);
/* 0, or the pthread_create error. The thread has every signal blocked. */
int audit_writer_start(audit_writer *w, const char *name);
/* Under mu, after queueing: the thread is to be woken if it sleeps. */
void audit_writer_wake(audit_writer *w);
/* Let go of mu, then wake the thread if audit_writer_wake asked for it. The
 * signal comes after the unlock: the woken thread, often on the loop's own
 * core where it runs at once, would otherwise find mu still held and sleep
 * on it again (two more context switches per batch, measured). */
void audit_writer_unlock(audit_writer *w);
/* Wait at most `seconds` until nothing is queued; returns what is left. */
size_t audit_writer_flush(audit_writer *w, int seconds);
/* The sink's series, in create(); nothing when the kernel has no registry
 * (a refused series is logged, and the sink runs without it). */
void audit_writer_metrics(audit_writer *w, const mcpg_host *h, mcpg_instance *self);
/* Under mu, once per event queued. */
static inline void audit_writer_event_queued(audit_writer *w) { w->pending_events++; }
/* An event the sink could not take (refused or dropped); any thread. */
void audit_writer_event_refused(audit_writer *w);
/* Write out everything queued, then join (no-op when not started). */
void audit_writer_stop(audit_writer *w);
void audit_writer_destroy(audit_writer *w);

#endif
