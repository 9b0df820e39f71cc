/* coordinator_nats: subscriptions on core NATS, delivered on the
 * subscriber's loop.
 *
 * nats.c calls a subscription's handler on its delivery thread (one for all
 * of the connection's subscriptions: global message delivery); the handler
 * copies the message into a record and posts it to the subscriber's loop
 * (host->worker_post), so messages keep the server's order per subscription.
 * A subscription has at most subscriber_backlog records posted and not yet
 * delivered: past that a message is dropped for it alone, counted and
 * logged (at most every 10 s).
 *
 * Lifetime: the record is shared by the loop side (until unsubscribe), the
 * nats.c side (until its completion callback: no handler runs after it) and
 * each posted message; the last one frees it. A message whose delivery runs
 * after unsubscribe on the subscriber's loop is dropped unseen. */
#include "cn.h"

#include <stdio.h>
#include <string.h>

struct cn_sub {
    cn *c;
    mcpg_worker *w;
    mcpg_coord_msg_cb cb;
    void *arg;
    natsSubscription *ns;
    atomic_int refs, closed, pending;
    struct cn_sub *prev, *next; /* the instance's list (destroy frees what is left) */
};

typedef struct cn_delivery {
    mcpg_post post;
    struct cn_sub *sub;
    size_t slen, dlen;
    char bytes[]; /* subject, NUL, data, NUL */
} cn_delivery;

static void sub_unref(struct cn_sub *s) {
    if (atomic_fetch_sub(&s->refs, 1) != 1) return;
    cn *c = s->c;
    pthread_mutex_lock(&c->sub_mu);
    if (s->prev) s->prev->next = s->next;
    else c->subs = s->next;
    if (s->next) s->next->prev = s->prev;
    c->nsubs--;
    pthread_mutex_unlock(&c->sub_mu);
    c->h->free(s);
}

static void deliver(void *arg) {
    cn_delivery *d = arg;
    struct cn_sub *s = d->sub;
    atomic_fetch_sub(&s->pending, 1);
    if (!atomic_load(&s->closed)) s->cb(s->arg, d->bytes, d->bytes + d->slen + 1, d->dlen);
    s->c->h->free(d);
    sub_unref(s);
}

static void note_drop(cn *c) {
    uint64_t n = atomic_fetch_add(&c->dropped, 1) + 1;
    uint64_t now = c->h->mono_us(), last = atomic_load(&c->last_drop_log_us);
    if (now - last < 10000000 && last) return;
    if (atomic_compare_exchange_strong(&c->last_drop_log_us, &last, now))
        c->h->log(c->self, MCPG_LOG_WARN, "a subscriber's backlog is full: messages dropped "
                  "for it (%llu so far)", (unsigned long long)n);
}

/* On nats.c's delivery thread. */
static void on_nats_msg(natsConnection *nc, natsSubscription *ns, natsMsg *msg, void *closure) {
    struct cn_sub *s = closure;
    cn *c = s->c;
    (void)nc, (void)ns;
    const char *subj = natsMsg_GetSubject(msg);
    size_t slen = strlen(subj), dlen = (size_t)natsMsg_GetDataLength(msg);
    if (atomic_load(&s->closed)) goto done;
    if (atomic_fetch_add(&s->pending, 1) >= c->cfg->subscriber_backlog) {
        atomic_fetch_sub(&s->pending, 1);
        note_drop(c);
        goto done;
    }
    cn_delivery *d = c->h->alloc(sizeof *d + slen + dlen + 2);
    if (!d) {
        atomic_fetch_sub(&s->pending, 1);
        note_drop(c);
        goto done;
    }
    *d = (cn_delivery){.post = {.fn = deliver, .arg = d}, .sub = s, .slen = slen, .dlen = dlen};
    memcpy(d->bytes, subj, slen + 1);
    if (dlen) memcpy(d->bytes + slen + 1, natsMsg_GetData(msg), dlen);
    d->bytes[slen + 1 + dlen] = '\0';
    atomic_fetch_add(&s->refs, 1);
    if (c->h->worker_post(s->w, &d->post) != 0) { /* the loop has stopped */
        atomic_fetch_sub(&s->pending, 1);
        c->h->free(d);
        sub_unref(s);
    }
done:
    natsMsg_Destroy(msg);
}

static void on_nats_complete(void *closure) { sub_unref(closure); }

int cn_sub_open(cn *c, mcpg_worker *w, const char *subject, mcpg_coord_msg_cb cb, void *arg,
                mcpg_coord_sub **out) {
    if (!c->nc) return MCPG_ESTATE;
    pthread_mutex_lock(&c->sub_mu);
    int full = c->nsubs >= (size_t)c->cfg->max_subscriptions;
    pthread_mutex_unlock(&c->sub_mu);
    if (full) return MCPG_EAGAIN;
    struct cn_sub *s = c->h->calloc(1, sizeof *s);
    if (!s) return MCPG_ENOMEM;
    *s = (struct cn_sub){.c = c, .w = w, .cb = cb, .arg = arg};
    atomic_store(&s->refs, 2); /* the loop side, the nats.c side */
    pthread_mutex_lock(&c->sub_mu);
    s->next = c->subs;
    if (c->subs) c->subs->prev = s;
    c->subs = s;
    c->nsubs++;
    pthread_mutex_unlock(&c->sub_mu);
    /* nats.c only buffers the SUB line (sent again on every reconnect): no
     * round trip on the loop */
    natsStatus st = natsConnection_Subscribe(&s->ns, c->nc, subject, on_nats_msg, s);
    if (st == NATS_OK) st = natsSubscription_SetOnCompleteCB(s->ns, on_nats_complete, s);
    if (st != NATS_OK) {
        c->h->log(c->self, MCPG_LOG_WARN, "subscribe %s: %s", subject, natsStatus_GetText(st));
        if (s->ns) {
            atomic_store(&s->closed, 1);
            natsSubscription_Unsubscribe(s->ns);
            natsSubscription_Destroy(s->ns);
            sub_unref(s); /* the completion callback drops the other */
        } else {
            atomic_store(&s->refs, 1);
            sub_unref(s);
        }
        return MCPG_EUNAVAIL;
    }
    *out = (mcpg_coord_sub *)s;
    return 0;
}

void cn_sub_close(cn *c, mcpg_coord_sub *sub) {
    struct cn_sub *s = (struct cn_sub *)sub;
    (void)c;
    atomic_store(&s->closed, 1);
    natsSubscription_Unsubscribe(s->ns);
    natsSubscription_Destroy(s->ns);
    sub_unref(s);
}

/* At stop, before the connection closes: subscriptions a loop left open
 * deliver nothing more (closing the connection ends them in nats.c). */
void cn_subs_close(cn *c) {
    pthread_mutex_lock(&c->sub_mu);
    for (struct cn_sub *s = c->subs; s; s = s->next) atomic_store(&s->closed, 1);
    size_t left = c->nsubs;
    pthread_mutex_unlock(&c->sub_mu);
    if (left) c->h->log(c->self, MCPG_LOG_WARN, "%zu subscriptions left open at stop", left);
}

/* At destroy, once the connection and its threads are gone: what no
 * completion callback freed. */
void cn_subs_free(cn *c) {
    while (c->subs) {
        struct cn_sub *s = c->subs;
        c->subs = s->next;
        c->h->free(s);
    }
    c->nsubs = 0;
}
