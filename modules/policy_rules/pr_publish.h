/* policy_rules: the policy the loops read, and replacing it while they do.
 *
 * Loops read the current policy with one acquire load per check and hold it
 * only inside that op (check and visible never answer PENDING). A new policy
 * (reloaded(): the rules file read again) is published with one exchange;
 * the old one is freed once every loop has run a posted no-op after the
 * exchange, i.e. once no op that could have loaded it is still running. */
#ifndef PR_PUBLISH_H
#define PR_PUBLISH_H

#include <mcpg/sdk.h>
#include <pthread.h>
#include <stdatomic.h>

#include "pr_rules.h"

typedef struct pr_published {
    pr_policy pol;
    uint32_t version; /* tags what a call caches about this policy */
} pr_published;

struct pr_retired;

typedef struct pr_publisher {
    const mcpg_host *host;
    _Atomic(pr_published *) current;
    uint32_t versions;          /* published so far */
    pthread_mutex_t lock;       /* the retired list: loops free from it */
    struct pr_retired *retired; /* old policies some loop may still be reading */
} pr_publisher;

/* first_take: the policy to serve (owned by the publisher from here). */
int pr_publisher_init(pr_publisher *pb, const mcpg_host *host, pr_published *first_take);
static inline pr_published *pr_publisher_current(pr_publisher *pb) {
    return atomic_load_explicit(&pb->current, memory_order_acquire);
}
/* On the control thread: serve next_take from now on. */
void pr_publisher_swap(pr_publisher *pb, pr_published *next_take);
/* After every loop has ended: free the current policy and any retired one. */
void pr_publisher_fini(pr_publisher *pb);

void pr_published_free(pr_published *pub);

#endif
