/* What the kernel tests' fixture modules share (each is its own .so, so
 * these are static inline). */
#ifndef MCPG_FX_COMMON_H
#define MCPG_FX_COMMON_H

#include <pthread.h>
#include <time.h>

static inline void fx_nap_ms(long long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* fn(arg) on a detached thread of its own: a resume from a thread the
 * kernel does not know. 0, or pthread_create's error. */
static inline int fx_detached(void *(*fn)(void *), void *arg) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return rc;
}

#endif
