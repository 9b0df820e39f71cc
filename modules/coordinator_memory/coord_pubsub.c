/* Publish/subscribe for coordinator_memory (see coord_pubsub.h).
 *
 * One mutex guards the registry and every subscription's queue: a publish
 * holds it while it queues one shared, reference-counted copy of the message
 * on each match, so every subscriber sees publishes in the same order. The
 * lock is never held while a subscriber's callback runs. A subscription's
 * post node is queued on its loop at most once at a time (`posted`); the
 * delivery it runs takes up to CM_BATCH messages, runs the callbacks, and
 * queues itself again while messages are left, so one busy subscription does
 * not hold its loop for long.
 *
 * Unsubscribe takes the subscription out of the registry (no publish can
 * reach it after that) and marks it cancelled; while its delivery is posted
 * or running, that delivery frees it, else it is freed at once. */
#include "coord_pubsub.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define CM_BATCH 64
#define CM_DROP_LOG_US (10 * 1000000ull)
#define CM_MIN_SUB_BUCKETS 64

typedef struct cm_msg {
    atomic_size_t refs;
    size_t slen, len;
    char bytes[]; /* subject, NUL, data, NUL */
} cm_msg;

struct cm_sub {
    mcpg_post delivery;      /* queued on w while `posted` */
    cm_pubsub *ps;
    mcpg_worker *w;
    mcpg_coord_msg_cb cb;
    void *arg;
    cm_sub *next;            /* bucket chain, or the wildcard list */
    cm_sub *all_prev, *all_next;
    uint64_t hash;
    int wildcard;
    int posted;              /* under mu */
    atomic_int cancelled;    /* written under mu, read by the delivery */
    cm_msg **ring;           /* under mu: n messages from head, cap slots */
    size_t head, n, cap;
    uint64_t dropped;
    size_t slen;
    char subject[];
};

struct cm_pubsub {
    const mcpg_host *h;
    mcpg_instance *self;
    size_t max_subs, backlog;
    uint64_t seed;
    pthread_mutex_t mu;
    /* ---- under mu ---- */
    cm_sub **buckets; /* exact subjects */
    size_t mask, nexact;
    cm_sub *wild;     /* subjects with a wildcard */
    cm_sub *all;      /* every subscription not yet freed, cancelled ones too */
    size_t count;     /* live (not cancelled) */
    uint64_t last_drop_log_us;
    atomic_uint_fast64_t dropped;
};

/* ---- subjects ------------------------------------------------------------- */

int cm_subject_valid(const char *s, size_t n, int wildcards) {
    if (!s || n == 0 || n > CM_SUBJECT_MAX) return 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            if (s[i] == '\0' || s[i] == ' ') return 0;
            continue;
        }
        size_t tl = i - start;
        if (tl == 0) return 0; /* "a..b", ".a", "a." */
        int star = tl == 1 && s[start] == '*', gt = tl == 1 && s[start] == '>';
        if ((star || gt) && !wildcards) return 0;
        if (gt && i != n) return 0; /* ">" only last */
        start = i + 1;
    }
    return 1;
}

/* Length of the token starting at p (up to '.' or end). */
static size_t token_len(const char *p, size_t left) {
    const char *dot = memchr(p, '.', left);
    return dot ? (size_t)(dot - p) : left;
}

int cm_subject_match(const char *pat, size_t plen, const char *sub, size_t slen) {
    size_t i = 0, j = 0;
    while (i < plen && j < slen) {
        size_t pt = token_len(pat + i, plen - i), st = token_len(sub + j, slen - j);
        if (pt == 1 && pat[i] == '>') return 1; /* one or more tokens left: j < slen */
        if (!(pt == 1 && pat[i] == '*') && (pt != st || memcmp(pat + i, sub + j, pt) != 0))
            return 0;
        i += pt + 1;
        j += st + 1;
    }
    return i >= plen && j >= slen; /* both used up together */
}

static int has_wildcard(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((s[i] == '*' || s[i] == '>') && (i == 0 || s[i - 1] == '.') &&
            (i + 1 == n || s[i + 1] == '.'))
            return 1;
    return 0;
}

static uint64_t subject_hash(uint64_t seed, const char *p, size_t n) {
    uint64_t x = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        x ^= (unsigned char)p[i];
        x *= 0x100000001b3ull;
    }
    return x ^ x >> 29;
}

/* ---- messages ------------------------------------------------------------- */

static void msg_release(const mcpg_host *h, cm_msg *m) {
    if (atomic_fetch_sub(&m->refs, 1) == 1) h->free(m);
}

static void sub_free(cm_pubsub *ps, cm_sub *sub) {
    for (size_t i = 0; i < sub->n; i++) msg_release(ps->h, sub->ring[(sub->head + i) % sub->cap]);
    ps->h->free(sub->ring);
    ps->h->free(sub);
}

/* ---- the registry (under mu) ---------------------------------------------- */

static void all_link(cm_pubsub *ps, cm_sub *sub) {
    sub->all_prev = NULL;
    sub->all_next = ps->all;
    if (ps->all) ps->all->all_prev = sub;
    ps->all = sub;
}

static void all_unlink(cm_pubsub *ps, cm_sub *sub) {
    if (sub->all_prev) sub->all_prev->all_next = sub->all_next;
    else ps->all = sub->all_next;
    if (sub->all_next) sub->all_next->all_prev = sub->all_prev;
}

static void exact_grow(cm_pubsub *ps) {
    if (ps->nexact <= ps->mask + 1) return;
    size_t n = (ps->mask + 1) * 2;
    cm_sub **b = ps->h->calloc(n, sizeof *b);
    if (!b) return; /* longer chains, still correct */
    for (size_t i = 0; i <= ps->mask; i++)
        for (cm_sub *s = ps->buckets[i], *next; s; s = next) {
            next = s->next;
            s->next = b[s->hash & (n - 1)];
            b[s->hash & (n - 1)] = s;
        }
    ps->h->free(ps->buckets);
    ps->buckets = b;
    ps->mask = n - 1;
}

static cm_sub **chain_of(cm_pubsub *ps, const cm_sub *sub) {
    return sub->wildcard ? &ps->wild : &ps->buckets[sub->hash & ps->mask];
}

static void registry_add(cm_pubsub *ps, cm_sub *sub) {
    cm_sub **head = chain_of(ps, sub);
    sub->next = *head;
    *head = sub;
    if (!sub->wildcard) {
        ps->nexact++;
        exact_grow(ps);
    }
}

static void registry_remove(cm_pubsub *ps, cm_sub *sub) {
    for (cm_sub **pp = chain_of(ps, sub); *pp; pp = &(*pp)->next)
        if (*pp == sub) {
            *pp = sub->next;
            if (!sub->wildcard) ps->nexact--;
            return;
        }
}

/* ---- life ----------------------------------------------------------------- */

cm_pubsub *cm_pubsub_new(const mcpg_host *h, mcpg_instance *self, size_t max_subs,
                         size_t backlog, uint64_t seed) {
    cm_pubsub *ps = h->calloc(1, sizeof *ps);
    if (!ps) return NULL;
    ps->buckets = h->calloc(CM_MIN_SUB_BUCKETS, sizeof *ps->buckets);
    if (!ps->buckets) {
        h->free(ps);
        return NULL;
    }
    ps->h = h;
    ps->self = self;
    ps->max_subs = max_subs;
    ps->backlog = backlog ? backlog : 1;
    ps->seed = seed;
    ps->mask = CM_MIN_SUB_BUCKETS - 1;
    pthread_mutex_init(&ps->mu, NULL);
    return ps;
}

void cm_pubsub_free(cm_pubsub *ps) {
    if (!ps) return;
    while (ps->all) {
        cm_sub *sub = ps->all;
        all_unlink(ps, sub);
        sub_free(ps, sub);
    }
    ps->h->free(ps->buckets);
    pthread_mutex_destroy(&ps->mu);
    ps->h->free(ps);
}

uint64_t cm_pubsub_dropped(cm_pubsub *ps) { return atomic_load(&ps->dropped); }

size_t cm_pubsub_count(cm_pubsub *ps) {
    pthread_mutex_lock(&ps->mu);
    size_t n = ps->count;
    pthread_mutex_unlock(&ps->mu);
    return n;
}

/* ---- delivery (on the subscription's loop) --------------------------------- */

static void sub_deliver(void *arg) {
    cm_sub *sub = arg;
    cm_pubsub *ps = sub->ps;
    cm_msg *batch[CM_BATCH];
    size_t n = 0;
    pthread_mutex_lock(&ps->mu);
    while (n < CM_BATCH && sub->n) {
        batch[n++] = sub->ring[sub->head];
        sub->head = (sub->head + 1) % sub->cap;
        sub->n--;
    }
    pthread_mutex_unlock(&ps->mu);
    for (size_t i = 0; i < n; i++) {
        if (!atomic_load(&sub->cancelled))
            sub->cb(sub->arg, batch[i]->bytes, batch[i]->bytes + batch[i]->slen + 1,
                    batch[i]->len);
        msg_release(ps->h, batch[i]);
    }
    pthread_mutex_lock(&ps->mu);
    if (atomic_load(&sub->cancelled)) {
        all_unlink(ps, sub);
        pthread_mutex_unlock(&ps->mu);
        sub_free(ps, sub);
        return;
    }
    /* Messages left: go round again, after what else the loop has to do. A
     * loop that stopped keeps them until unsubscribe or the end. */
    sub->posted = sub->n && ps->h->worker_post(sub->w, &sub->delivery) == 0;
    pthread_mutex_unlock(&ps->mu);
}

/* ---- subscribe / unsubscribe ------------------------------------------------ */

int cm_subscribe(cm_pubsub *ps, mcpg_worker *w, const char *subject, size_t n,
                 mcpg_coord_msg_cb cb, void *arg, cm_sub **out) {
    cm_sub *sub = ps->h->calloc(1, sizeof *sub + n + 1);
    if (!sub) return MCPG_ENOMEM;
    sub->delivery = (mcpg_post){.fn = sub_deliver, .arg = sub};
    sub->ps = ps;
    sub->w = w;
    sub->cb = cb;
    sub->arg = arg;
    sub->wildcard = has_wildcard(subject, n);
    sub->hash = subject_hash(ps->seed, subject, n);
    sub->slen = n;
    memcpy(sub->subject, subject, n);
    pthread_mutex_lock(&ps->mu);
    if (ps->count >= ps->max_subs) {
        pthread_mutex_unlock(&ps->mu);
        ps->h->free(sub);
        return MCPG_EAGAIN;
    }
    registry_add(ps, sub);
    all_link(ps, sub);
    ps->count++;
    pthread_mutex_unlock(&ps->mu);
    *out = sub;
    return 0;
}

void cm_unsubscribe(cm_pubsub *ps, cm_sub *sub) {
    pthread_mutex_lock(&ps->mu);
    if (atomic_load(&sub->cancelled)) { /* twice while its delivery holds it: a caller's bug */
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    registry_remove(ps, sub);
    atomic_store(&sub->cancelled, 1);
    ps->count--;
    int owned_by_delivery = sub->posted;
    if (!owned_by_delivery) all_unlink(ps, sub);
    pthread_mutex_unlock(&ps->mu);
    if (!owned_by_delivery) sub_free(ps, sub);
}

/* ---- publish ------------------------------------------------------------------ */

/* Make room for one more message: grow the ring up to the backlog. 0, or
 * MCPG_EAGAIN when it is full. */
static int ring_room(cm_pubsub *ps, cm_sub *sub) {
    if (sub->n < sub->cap) return 0;
    if (sub->cap >= ps->backlog) return MCPG_EAGAIN;
    size_t cap = sub->cap ? sub->cap * 2 : 8;
    if (cap > ps->backlog) cap = ps->backlog;
    cm_msg **r = ps->h->alloc(cap * sizeof *r);
    if (!r) return MCPG_EAGAIN; /* out of memory: dropped like a full backlog */
    for (size_t i = 0; i < sub->n; i++) r[i] = sub->ring[(sub->head + i) % sub->cap];
    ps->h->free(sub->ring);
    sub->ring = r;
    sub->head = 0;
    sub->cap = cap;
    return 0;
}

/* Queue m on sub; wake its loop if its delivery is not queued yet. Returns 1
 * when queued, 0 when dropped (*log set when this drop should be logged). */
static int enqueue(cm_pubsub *ps, cm_sub *sub, cm_msg *m, uint64_t now_us, cm_sub **log) {
    if (ring_room(ps, sub)) {
        sub->dropped++;
        atomic_fetch_add(&ps->dropped, 1);
        if (!ps->last_drop_log_us || now_us - ps->last_drop_log_us >= CM_DROP_LOG_US) {
            ps->last_drop_log_us = now_us;
            *log = sub;
        }
        return 0;
    }
    atomic_fetch_add(&m->refs, 1);
    sub->ring[(sub->head + sub->n++) % sub->cap] = m;
    /* worker_post only queues and wakes (it never runs fn here): safe under mu */
    if (!sub->posted) sub->posted = ps->h->worker_post(sub->w, &sub->delivery) == 0;
    return 1;
}

static size_t publish_locked(cm_pubsub *ps, cm_msg *m, uint64_t hash, uint64_t now_us,
                             char *log_subject, uint64_t *log_dropped) {
    const char *subject = m->bytes;
    size_t reached = 0;
    cm_sub *log = NULL;
    for (cm_sub *s = ps->buckets[hash & ps->mask]; s; s = s->next)
        if (s->hash == hash && s->slen == m->slen && memcmp(s->subject, subject, m->slen) == 0)
            reached += (size_t)enqueue(ps, s, m, now_us, &log);
    for (cm_sub *s = ps->wild; s; s = s->next)
        if (cm_subject_match(s->subject, s->slen, subject, m->slen))
            reached += (size_t)enqueue(ps, s, m, now_us, &log);
    if (log) {
        memcpy(log_subject, log->subject, log->slen + 1);
        *log_dropped = log->dropped;
    }
    return reached;
}

int cm_publish(cm_pubsub *ps, const char *subject, size_t n, const char *data, size_t len,
               size_t *reached) {
    cm_msg *m = ps->h->alloc(sizeof *m + n + 1 + len + 1);
    if (!m) return MCPG_ENOMEM;
    atomic_init(&m->refs, 1); /* the publisher's, until it is queued everywhere */
    m->slen = n;
    m->len = len;
    memcpy(m->bytes, subject, n);
    m->bytes[n] = '\0';
    if (len) memcpy(m->bytes + n + 1, data, len);
    m->bytes[n + 1 + len] = '\0';
    uint64_t hash = subject_hash(ps->seed, subject, n);
    char log_subject[CM_SUBJECT_MAX + 1];
    log_subject[0] = '\0';
    uint64_t log_dropped = 0;
    uint64_t now_us = ps->h->mono_us();
    pthread_mutex_lock(&ps->mu);
    size_t got = publish_locked(ps, m, hash, now_us, log_subject, &log_dropped);
    pthread_mutex_unlock(&ps->mu);
    msg_release(ps->h, m);
    if (log_subject[0])
        ps->h->log(ps->self, MCPG_LOG_WARN,
                   "subscriber backlog full (%zu messages): dropping; subscription \"%s\" has "
                   "dropped %llu, all subscriptions %llu (logged at most every 10 s)",
                   ps->backlog, log_subject, (unsigned long long)log_dropped,
                   (unsigned long long)atomic_load(&ps->dropped));
    if (reached) *reached = got;
    return 0;
}
