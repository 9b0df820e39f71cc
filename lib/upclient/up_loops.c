/* upclient: pools per loop (see upclient.h, up_loops). A short list under
 * a lock: a module has a few loops and a few upstreams, and a pool is
 * looked up once per request. */
#include <pthread.h>
#include <stdlib.h>

#include "upclient.h"

typedef struct loop_pool {
    void *loop;
    size_t key;
    up_pool *pool;
    struct loop_pool *next;
} loop_pool;

struct up_loops {
    pthread_mutex_t lock;
    loop_pool *pools;
};

up_loops *up_loops_new(void) {
    up_loops *s = calloc(1, sizeof *s);
    if (s) pthread_mutex_init(&s->lock, NULL);
    return s;
}

up_pool *up_loops_pool(up_loops *s, void *loop, size_t key, const up_target *t, unsigned max_conns,
                       unsigned idle_max, unsigned queue_max) {
    pthread_mutex_lock(&s->lock);
    loop_pool *lp = s->pools;
    while (lp && !(lp->loop == loop && lp->key == key)) lp = lp->next;
    if (!lp && (lp = calloc(1, sizeof *lp))) {
        lp->pool = up_pool_new(loop, t, max_conns, idle_max, queue_max);
        if (lp->pool) {
            *lp = (loop_pool){loop, key, lp->pool, s->pools};
            s->pools = lp;
        } else {
            free(lp);
            lp = NULL;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return lp ? lp->pool : NULL;
}

void up_loops_stop(up_loops *s, void *loop) {
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    loop_pool **pp = &s->pools, *mine = NULL;
    while (*pp) {
        loop_pool *lp = *pp;
        if (lp->loop == loop) {
            *pp = lp->next;
            lp->next = mine;
            mine = lp;
        } else {
            pp = &lp->next;
        }
    }
    pthread_mutex_unlock(&s->lock);
    while (mine) { /* outside the lock: the requests they end are answered now */
        loop_pool *lp = mine;
        mine = lp->next;
        up_pool_close(lp->pool);
        free(lp);
    }
}

void up_loops_free(up_loops *s) {
    if (!s) return;
    while (s->pools) { /* a loop that never stopped: its handles are its own */
        loop_pool *lp = s->pools;
        s->pools = lp->next;
        free(lp);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}
