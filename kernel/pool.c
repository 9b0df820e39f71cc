/* The bounded worker pool for blocking work (backends not dispatched inline,
 * host->work_submit). A fixed number of threads, a bounded FIFO: a full queue
 * is refused at once (the caller answers 503), never waited on. */
#include "kernel.h"

#include <stdlib.h>

typedef struct pool {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    pool_job *head, *tail;
    unsigned queued, queue_max;
    unsigned waiting;  /* threads blocked in cond_wait */
    unsigned signaled; /* of those, woken but not yet running */
    pthread_t *threads;
    unsigned n_threads;
    bool stopping;
} pool;

static pool P;

static pool_job *take(void) {
    pthread_mutex_lock(&P.lock);
    while (!P.head && !P.stopping) {
        P.waiting++;
        pthread_cond_wait(&P.ready, &P.lock);
        P.waiting--;
        if (P.signaled) P.signaled--;
    }
    pool_job *j = P.head;
    if (j) {
        P.head = j->next;
        if (!P.head) P.tail = NULL;
        P.queued--;
    }
    pthread_mutex_unlock(&P.lock);
    return j;
}

static void *pool_thread(void *arg) {
    (void)arg;
    pool_job *j;
    while ((j = take()) != NULL) {
        if (j->timeout_us && j->expired && mono_us() - j->enqueued_us > j->timeout_us)
            j->expired(j);
        else
            j->run(j);
    }
    return NULL;
}

int pool_start(unsigned threads, unsigned queue_max) {
    pthread_mutex_init(&P.lock, NULL);
    pthread_cond_init(&P.ready, NULL);
    P.queue_max = queue_max;
    P.threads = calloc(threads, sizeof *P.threads);
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&P.threads[i], NULL, pool_thread, NULL) != 0) return MCPG_ENOMEM;
        P.n_threads++;
    }
    return 0;
}

int pool_submit(pool_job *job) {
    job->next = NULL;
    job->enqueued_us = mono_us();
    pthread_mutex_lock(&P.lock);
    if (P.stopping || P.queued >= P.queue_max) {
        pthread_mutex_unlock(&P.lock);
        return P.stopping ? MCPG_EUNAVAIL : MCPG_EAGAIN;
    }
    if (P.tail) P.tail->next = job;
    else P.head = job;
    P.tail = job;
    P.queued++;
    /* Wake a thread only if the ones already awake cannot take this job: on a
     * busy core, waking a thread per job costs a context switch per job,
     * while one awake thread drains a whole burst. */
    unsigned awake = P.n_threads - P.waiting + P.signaled;
    if (P.waiting > P.signaled && P.queued > awake) {
        P.signaled++;
        pthread_cond_signal(&P.ready);
    }
    pthread_mutex_unlock(&P.lock);
    return 0;
}

/* Runs what is queued, then joins every thread. */
void pool_stop(void) {
    pthread_mutex_lock(&P.lock);
    P.stopping = true;
    pthread_cond_broadcast(&P.ready);
    pthread_mutex_unlock(&P.lock);
    for (unsigned i = 0; i < P.n_threads; i++) pthread_join(P.threads[i], NULL);
    free(P.threads);
    pthread_mutex_destroy(&P.lock);
    pthread_cond_destroy(&P.ready);
}
