/* sdk: threads that loops hand work to (see mcpg_thread_background). */
#define _GNU_SOURCE
#include <mcpg/sdk.h>
#include <pthread.h>
#include <sched.h>

int mcpg_thread_background(void) {
    struct sched_param p = {.sched_priority = 0};
    return pthread_setschedparam(pthread_self(), SCHED_BATCH, &p);
}
