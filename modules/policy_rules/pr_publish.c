/* policy_rules: publishing a policy and retiring the old one (see pr_publish.h). */
#include "pr_publish.h"

#include <stdlib.h>

typedef struct pr_retired {
    struct pr_retired *next;
    pr_publisher *owner;
    pr_published *old;
    atomic_uint left;       /* loops still to pass, plus one for the swapper */
    uint32_t n_posts;
    mcpg_post posts[];      /* one per worker, alive until this is freed */
} pr_retired;

void pr_published_free(pr_published *pub) {
    if (!pub) return;
    pr_policy_free(&pub->pol);
    free(pub);
}

int pr_publisher_init(pr_publisher *pb, const mcpg_host *host, pr_published *first_take) {
    pb->host = host;
    pb->retired = NULL;
    pb->versions = first_take->version = 1;
    atomic_init(&pb->current, first_take);
    return pthread_mutex_init(&pb->lock, NULL) == 0 ? 0 : MCPG_ENOMEM;
}

static void unlink_retired(pr_publisher *pb, pr_retired *r) {
    pthread_mutex_lock(&pb->lock);
    pr_retired **at = &pb->retired;
    while (*at && *at != r) at = &(*at)->next;
    if (*at) *at = r->next;
    pthread_mutex_unlock(&pb->lock);
}

/* One loop (or the swapper) has passed: the last one frees. */
static void passed(void *arg) {
    pr_retired *r = arg;
    if (atomic_fetch_sub(&r->left, 1) != 1) return;
    unlink_retired(r->owner, r);
    pr_published_free(r->old);
    free(r);
}

void pr_publisher_swap(pr_publisher *pb, pr_published *next_take) {
    const mcpg_host *h = pb->host;
    next_take->version = ++pb->versions;
    pr_published *old = atomic_exchange_explicit(&pb->current, next_take, memory_order_acq_rel);
    uint32_t n = h->worker_count();
    pr_retired *r = calloc(1, sizeof *r + n * sizeof *r->posts);
    if (!r) return; /* out of memory: the old policy stays allocated (safe, lost) */
    r->owner = pb;
    r->old = old;
    r->n_posts = n;
    atomic_init(&r->left, n + 1);
    pthread_mutex_lock(&pb->lock);
    r->next = pb->retired;
    pb->retired = r;
    pthread_mutex_unlock(&pb->lock);
    for (uint32_t i = 0; i < n; i++) {
        r->posts[i] = (mcpg_post){.fn = passed, .arg = r};
        mcpg_worker *w = h->worker_at(i);
        if (!w || h->worker_post(w, &r->posts[i]) != 0) passed(r); /* a stopped loop reads nothing */
    }
    passed(r);
}

void pr_publisher_fini(pr_publisher *pb) {
    for (pr_retired *r = pb->retired, *next; r; r = next) {
        next = r->next;
        pr_published_free(r->old);
        free(r);
    }
    pb->retired = NULL;
    pr_published_free(atomic_load(&pb->current));
    pthread_mutex_destroy(&pb->lock);
}
