/* lib/audit: a sink's writer thread (see audit_writer.h). */
#include "audit_writer.h"

#include <errno.h>
#include <time.h>

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

static void *writer_main(void *arg) {
    audit_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->ops->has_work(w->sink) && !w->stopping) {
            w->waiting = 1;
            pthread_cond_wait(&w->wake, &w->mu);
            w->waiting = 0;
        }
        if (!w->ops->has_work(w->sink)) break; /* stopping and drained */
        w->ops->take(w->sink);
        pthread_mutex_unlock(&w->mu);

        size_t done = w->ops->write(w->sink);

        pthread_mutex_lock(&w->mu);
        w->queued -= done;
        if (w->queued == 0) pthread_cond_broadcast(&w->idle);
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
    w->waiting = 0;
    pthread_cond_signal(&w->wake);
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
