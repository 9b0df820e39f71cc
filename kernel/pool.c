#define _GNU_SOURCE /* pthread_timedjoin_np */
/* The bounded worker pool for blocking work (backends not dispatched inline,
 * host->work_submit). A fixed number of threads, a bounded FIFO: a full queue
 * is refused at once (the caller answers 503), never waited on.
 *
 * Wake-ups cost a context switch each, and on a loaded core every switch is
 * CPU taken from the loops. So a thread is woken only when the threads already
 * awake and idle cannot take the queued jobs, and loops hand their jobs over
 * in one batch per loop turn (pool_submit_many). */
#include "kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct pool_state {
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
} pool_state;

static pool_state pool;

/* Under the lock: how many sleeping threads the queue needs woken (counted
 * as signaled now; signal_threads sends the signals once the lock is let go). */
static unsigned wakes_for_queue(void) {
    unsigned idle_awake = pool.n_threads - pool.waiting - pool.busy + pool.signaled, wakes = 0;
    while (pool.queued > idle_awake && pool.waiting > pool.signaled) {
        pool.signaled++;
        idle_awake++;
        wakes++;
    }
    return wakes;
}

/* After the unlock: a thread woken while the lock is held, on the loop's core
 * where it runs at once, finds the lock taken and sleeps on it again (two
 * more context switches per wake, measured). The threads counted are in
 * cond_wait, so no signal is lost. */
static void signal_threads(unsigned wakes) {
    while (wakes--) pthread_cond_signal(&pool.ready);
}

/* The next job, or NULL once stopping with an empty queue. *stopping says
 * the pool is stopping: what is still queued then is expired, not run. */
static pool_job *take(bool was_busy, bool *stopping) {
    pthread_mutex_lock(&pool.lock);
    if (was_busy) pool.busy--;
    while (!pool.head && !pool.stopping) {
        pool.waiting++;
        pthread_cond_wait(&pool.ready, &pool.lock);
        pool.waiting--;
        if (pool.signaled) pool.signaled--;
    }
    pool_job *j = pool.head;
    if (j) {
        pool.head = j->next;
        if (!pool.head) pool.tail = NULL;
        pool.queued--;
        pool.busy++;
    }
    *stopping = pool.stopping;
    pthread_mutex_unlock(&pool.lock);
    return j;
}

static void *pool_thread(void *arg) {
    char name[16]; /* top -H shows who spends what */
    snprintf(name, sizeof name, "mcpg-pool-%u", (unsigned)(uintptr_t)arg);
    pthread_setname_np(pthread_self(), name);
    mcpg_thread_background(); /* a loop's wake does not preempt it */
    crash_thread_init();
    pool_job *j;
    bool busy = false, stopping;
    while ((j = take(busy, &stopping)) != NULL) {
        busy = true;
        bool late = j->timeout_us && mono_us() - j->enqueued_us > j->timeout_us;
        if (j->expired && (late || stopping))
            j->expired(j);
        else
            j->run(j);
    }
    crash_thread_end();
    return NULL;
}

int pool_start(unsigned threads, unsigned queue_max) {
    pool = (pool_state){0};
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.ready, NULL);
    pool.queue_max = queue_max;
    pool.threads = calloc(threads, sizeof *pool.threads);
    for (unsigned i = 0; pool.threads && i < threads; i++) {
        if (pthread_create(&pool.threads[i], NULL, pool_thread, (void *)(uintptr_t)i) != 0) break;
        pool.n_threads++;
    }
    if (pool.n_threads == threads) return 0;
    pool_stop(); /* join the threads that did start */
    return MCPG_ENOMEM;
}

/* Append a chain of jobs; those that do not fit are returned (in order) for
 * the caller to refuse. */
pool_job *pool_submit_many(pool_job *head) {
    uint64_t now = mono_us();
    pthread_mutex_lock(&pool.lock);
    while (head && !pool.stopping && pool.queued < pool.queue_max) {
        pool_job *j = head;
        head = j->next;
        j->next = NULL;
        j->enqueued_us = now;
        if (pool.tail) pool.tail->next = j;
        else pool.head = j;
        pool.tail = j;
        pool.queued++;
    }
    unsigned wakes = wakes_for_queue();
    pthread_mutex_unlock(&pool.lock);
    signal_threads(wakes);
    for (pool_job *j = head; j; j = j->next) metrics_count(KM.pool_refused, 0, 1);
    return head;
}

unsigned pool_queued(void) {
    pthread_mutex_lock(&pool.lock);
    unsigned n = pool.queued;
    pthread_mutex_unlock(&pool.lock);
    return n;
}

unsigned pool_busy(void) {
    pthread_mutex_lock(&pool.lock);
    unsigned n = pool.busy;
    pthread_mutex_unlock(&pool.lock);
    return n;
}

int pool_submit(pool_job *job) {
    job->next = NULL;
    if (pool_submit_many(job) == NULL) return 0;
    pthread_mutex_lock(&pool.lock);
    bool stopping = pool.stopping;
    pthread_mutex_unlock(&pool.lock);
    return stopping ? MCPG_EUNAVAIL : MCPG_EAGAIN;
}

/* Called once the loops have ended: a running job finishes (it cannot be
 * interrupted), a queued one is expired instead of run (its answer could
 * not reach a loop anyway, and a backend must not be entered after the
 * drain). The lock stays usable, and `stopping` set, so a late submit (a
 * module's stop) is refused rather than queued for no thread. */
/* Stop the pool: queued jobs are expired, running ones finish. Waits at most
 * wait_ms (0 = for ever) for the threads; returns how many are still running
 * (a backend that hangs), whose threads are then left alone. */
unsigned pool_stop_within(uint64_t wait_ms) {
    pthread_mutex_lock(&pool.lock);
    pool.stopping = true;
    pthread_cond_broadcast(&pool.ready);
    pthread_mutex_unlock(&pool.lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(wait_ms / 1000);
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    unsigned stuck = 0;
    for (unsigned i = 0; i < pool.n_threads; i++) {
        int rc = wait_ms ? pthread_timedjoin_np(pool.threads[i], NULL, &until)
                         : pthread_join(pool.threads[i], NULL);
        if (rc) stuck++;
    }
    if (stuck) return stuck; /* their memory stays: they may still use it */
    free(pool.threads);
    pool.threads = NULL;
    pool.n_threads = 0;
    return 0;
}

void pool_stop(void) { (void)pool_stop_within(0); }

bool pool_cancel(pool_job *job) {
    pthread_mutex_lock(&pool.lock);
    pool_job **pp = &pool.head, *prev = NULL;
    while (*pp && *pp != job) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    bool found = *pp != NULL;
    if (found) {
        *pp = job->next;
        if (pool.tail == job) pool.tail = prev;
        pool.queued--;
        job->next = NULL;
    }
    pthread_mutex_unlock(&pool.lock);
    return found;
}
