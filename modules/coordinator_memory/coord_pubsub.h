/* Publish/subscribe inside one gateway process, for coordinator_memory.
 *
 * A subscription belongs to one loop (its worker): every message for it is
 * queued on the subscription and delivered by one post node on that loop, in
 * the order the publishes took the registry's lock, each exactly once. The
 * queue is bounded (backlog): a message that finds it full is dropped for
 * that subscription alone, counted, and logged at most every 10 s.
 *
 * Subjects are tokens separated by '.'. A subscription's subject may use "*"
 * for exactly one token and, as its last token, ">" for one or more; a
 * published subject may use neither.
 */
#ifndef COORD_PUBSUB_H
#define COORD_PUBSUB_H

#include <mcpg/sdk.h>

#include <stddef.h>
#include <stdint.h>

#define CM_SUBJECT_MAX 1024

typedef struct cm_pubsub cm_pubsub;
typedef struct cm_sub cm_sub;

/* NULL when out of memory. self is for logs. */
cm_pubsub *cm_pubsub_new(const mcpg_host *h, mcpg_instance *self, size_t max_subs,
                         size_t backlog, uint64_t seed);
/* Frees every subscription and queued message; no delivery may be pending
 * on a loop that still runs (the instance's loops have ended). */
void cm_pubsub_free(cm_pubsub *ps);

/* 1 when s[0..n) is a valid subject (wildcards only when allowed). */
int cm_subject_valid(const char *s, size_t n, int wildcards);
/* 1 when subject (no wildcards) matches pattern. */
int cm_subject_match(const char *pattern, size_t plen, const char *subject, size_t slen);

/* Any thread. Deliveries run cb on w's loop. 0, MCPG_EAGAIN (max_subs
 * reached) or MCPG_ENOMEM. The subject must be valid. */
int cm_subscribe(cm_pubsub *ps, mcpg_worker *w, const char *subject, size_t n,
                 mcpg_coord_msg_cb cb, void *arg, cm_sub **out);
/* Any thread. No delivery starts after it returns on sub's own loop (also
 * from inside sub's callback); on another thread one already begun may end.
 * sub is freed now or by its pending delivery. */
void cm_unsubscribe(cm_pubsub *ps, cm_sub *sub);

/* Any thread. Queue a copy for every matching subscription; *reached is how
 * many took it (not counting those whose backlog was full). 0 or
 * MCPG_ENOMEM. */
int cm_publish(cm_pubsub *ps, const char *subject, size_t n, const char *data, size_t len,
               size_t *reached);

/* Messages dropped on full backlogs so far, and live subscriptions. */
uint64_t cm_pubsub_dropped(cm_pubsub *ps);
size_t cm_pubsub_count(cm_pubsub *ps);

#endif
