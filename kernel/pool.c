/* The bounded worker pool for blocking work (backends not dispatched inline,
 * host->work_submit). A fixed number of threads, a bounded FIFO: a full queue
 * is refused at once (the caller answers 503), never waited on.
 *
 * Wake-ups cost a context switch each, and on a loaded core every switch is
 * CPU taken from the loops. So a thread is woken only when the threads already
 * awake and idle cannot take the queued jobs, and loops hand their jobs over
 * in one batch per loop turn (pool_submit_many). */
#include "kernel.h"

#include <stdlib.h>

typedef struct pool {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    pool_job *head, *tail;
    unsigned queued, queue_max;
    unsigned waiting;  /* threads blocked in cond_wait */
    unsigned signaled; /* of those, woken but not yet running */
    unsigned busy;     /* threads running a job */
    pthread_t *threads;
    unsigned n_threads;
    bool stopping;
} pool;

static pool P;

/* Under the lock: wake as many threads as the queue needs. */
static void wake_for_queue(void) {
    unsigned idle_awake = P.n_threads - P.waiting - P.busy + P.signaled;
    while (P.queued > idle_awake && P.waiting > P.signaled) {
        P.signaled++;
        idle_awake++;
        pthread_cond_signal(&P.ready);
    }
}

static pool_job *take(bool was_busy) {
    pthread_mutex_lock(&P.lock);
    if (was_busy) P.busy--;
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
        P.busy++;
    }
    pthread_mutex_unlock(&P.lock);
    return j;
}

static void *pool_thread(void *arg) {
    (void)arg;
    pool_job *j;
    bool busy = false;
    while ((j = take(busy)) != NULL) {
        busy = true;
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

/* Append a chain of jobs; those that do not fit are returned (in order) for
 * the caller to refuse. */
pool_job *pool_submit_many(pool_job *head) {
    uint64_t now = mono_us();
    pthread_mutex_lock(&P.lock);
    while (head && !P.stopping && P.queued < P.queue_max) {
        pool_job *j = head;
        head = j->next;
        j->next = NULL;
        j->enqueued_us = now;
        if (P.tail) P.tail->next = j;
        else P.head = j;
        P.tail = j;
        P.queued++;
    }
    wake_for_queue();
    pthread_mutex_unlock(&P.lock);
    return head;
}

int pool_submit(pool_job *job) {
    job->next = NULL;
    if (pool_submit_many(job) == NULL) return 0;
    return P.stopping ? MCPG_EUNAVAIL : MCPG_EAGAIN;
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
    P = (pool){0};
}
