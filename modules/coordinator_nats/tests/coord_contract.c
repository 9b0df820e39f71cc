/* The coordinator contract, store-neutral (see coord_contract.h). */
#define _GNU_SOURCE
#include "coord_contract.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K(s) s, strlen(s)

void coord_on_answer(void *arg, int status, const mcpg_coord_value *v) {
    coord_answer *a = arg;
    a->calls++;
    a->status = status;
    a->has_data = v && v->data;
    a->len = v ? v->len : 0;
    if (v && v->data) snprintf(a->data, sizeof a->data, "%.*s", (int)v->len, v->data);
    a->revision = v ? v->revision : 0;
    a->number = v ? v->number : 0;
}

static void on_each(void *arg, int status, const mcpg_coord_value *v) {
    coord_answer *a = arg;
    a->each++;
    size_t n = strlen(a->keys);
    snprintf(a->keys + n, sizeof a->keys - n, "%s%.*s@%d", n ? "," : "", (int)v->len, v->data,
             v->revision > 0);
    (void)status;
}

int coord_answered(void *arg) { return ((coord_answer *)arg)->calls > 0; }

coord_answer *coord_settle(const coord_ctx *x, int rc, coord_answer *a, const char *what) {
    MCPG_CHECK(rc == 0, "%s: op returned %d", what, rc);
    MCPG_CHECK(a->calls == 0, "%s: callback ran inside the op", what);
    if (rc) return a;
    MCPG_CHECK(mcpg_fakehost_run_until(x->fh, coord_answered, a, x->answer_ms) == 0,
               "%s: no answer", what);
    mcpg_fakehost_run_for(x->fh, 1);
    MCPG_CHECK(a->calls == 1, "%s: %d answers", what, a->calls);
    return a;
}

coord_answer coord_get(const coord_ctx *x, void *st, const char *key) {
    coord_answer a = {0};
    coord_settle(x, x->ops->get(st, x->w, K(key), coord_on_answer, &a), &a, "get");
    return a;
}

coord_answer coord_put(const coord_ctx *x, void *st, const char *key, const char *val,
                       uint64_t ttl) {
    coord_answer a = {0};
    coord_settle(x, x->ops->put(st, x->w, K(key), K(val), ttl, coord_on_answer, &a), &a, "put");
    return a;
}

coord_answer coord_incr(const coord_ctx *x, void *st, const char *key, int64_t d, uint64_t ttl) {
    coord_answer a = {0};
    coord_settle(x, x->ops->incr(st, x->w, K(key), d, ttl, coord_on_answer, &a), &a, "incr");
    return a;
}

coord_answer coord_pia(const coord_ctx *x, void *st, const char *key, const char *val,
                       uint64_t ttl) {
    coord_answer a = {0};
    coord_settle(x, x->ops->put_if_absent(st, x->w, K(key), K(val), ttl, coord_on_answer, &a), &a,
                 "put_if_absent");
    return a;
}

coord_answer coord_cas(const coord_ctx *x, void *st, const char *key, uint64_t rev,
                       const char *val) {
    coord_answer a = {0};
    coord_settle(x, x->ops->compare_and_set(st, x->w, K(key), rev, K(val), 0, coord_on_answer, &a),
                 &a, "cas");
    return a;
}

coord_answer coord_del(const coord_ctx *x, void *st, const char *key) {
    coord_answer a = {0};
    coord_settle(x, x->ops->del(st, x->w, K(key), coord_on_answer, &a), &a, "del");
    return a;
}

coord_answer coord_rate(const coord_ctx *x, void *st, const char *key, int64_t now_us,
                        int64_t interval_us, int64_t burst_us) {
    coord_answer a = {0};
    coord_settle(x, x->ops->rate_take(st, x->w, K(key), now_us, interval_us, burst_us,
                                      coord_on_answer, &a), &a, "rate_take");
    return a;
}

/* ---- key-value ----------------------------------------------------------------------- */

static void check_cas(const coord_ctx *x, void *st, uint64_t r1) {
    coord_answer a = coord_cas(x, st, "k", r1 + 1000, "v2");
    MCPG_CHECK(a.status == MCPG_ECONFLICT && a.revision == r1 && strcmp(a.data, "v1") == 0,
               "cas conflict: %d", a.status);
    a = coord_cas(x, st, "k", r1, "v2");
    MCPG_CHECK(a.status == 0 && a.revision > r1, "cas: %d", a.status);
    MCPG_CHECK(strcmp(coord_get(x, st, "k").data, "v2") == 0, "cas wrote");
    a = coord_cas(x, st, "k", r1, "v3");
    MCPG_CHECK(a.status == MCPG_ECONFLICT, "second cas with the old revision: %d", a.status);
    a = coord_cas(x, st, "k", 0, "v3");
    MCPG_CHECK(a.status == MCPG_ECONFLICT && strcmp(a.data, "v2") == 0,
               "cas on 0 (must be absent) over a live key: %d", a.status);
    a = coord_cas(x, st, "cas-new", 0, "n");
    MCPG_CHECK(a.status == 0 && a.revision > 0, "cas on 0 over an absent key: %d", a.status);
}

static void check_incr(const coord_ctx *x, void *st) {
    coord_answer a = coord_incr(x, st, "n", 3, 0);
    MCPG_CHECK(a.status == 0 && a.number == 3 && strcmp(a.data, "3") == 0, "incr: %d %lld",
               a.status, (long long)a.number);
    a = coord_incr(x, st, "n", -10, 0);
    MCPG_CHECK(a.status == 0 && a.number == -7, "incr: %lld", (long long)a.number);
    MCPG_CHECK(coord_get(x, st, "n").number == -7, "get counter");
    MCPG_CHECK(coord_incr(x, st, "k", 1, 0).status == MCPG_EINVAL, "incr on text");
    coord_put(x, st, "big-n", "9223372036854775807", 0);
    MCPG_CHECK(coord_incr(x, st, "big-n", 1, 0).status == MCPG_ERANGE, "incr overflow");
    MCPG_CHECK(coord_get(x, st, "big-n").number == INT64_MAX, "unchanged by the overflow");
}

static void check_scan(const coord_ctx *x, void *st) {
    coord_put(x, st, "s/b", "1", 0);
    coord_put(x, st, "s/a", "1", 0);
    coord_put(x, st, "s/c", "1", 60000);
    coord_put(x, st, "t/a", "1", 0);
    coord_answer a = {0};
    coord_settle(x, x->ops->scan_prefix(st, x->w, K("s/"), on_each, coord_on_answer, &a), &a, "scan");
    MCPG_CHECK(a.status == 0 && a.each == 3 && strcmp(a.keys, "s/a@1,s/b@1,s/c@1") == 0 &&
                   a.number == 3, "scan: %d %d %s", a.status, a.each, a.keys);
    /* a dotted prefix, keys with bytes a store may have to escape */
    coord_put(x, st, "sess.x:1", "1", 0);
    coord_put(x, st, "sess.x:2", "1", 0);
    coord_put(x, st, "sess.y", "1", 0);
    coord_put(x, st, "sessx", "1", 0);
    a = (coord_answer){0};
    coord_settle(x, x->ops->scan_prefix(st, x->w, K("sess.x"), on_each, coord_on_answer, &a), &a,
                 "scan dotted");
    MCPG_CHECK(a.status == 0 && strcmp(a.keys, "sess.x:1@1,sess.x:2@1") == 0, "scan dotted: %s",
               a.keys);
    a = (coord_answer){0};
    coord_settle(x, x->ops->scan_prefix(st, x->w, K("nothing-here."), on_each, coord_on_answer, &a),
                 &a, "scan empty");
    MCPG_CHECK(a.status == 0 && a.each == 0 && a.number == 0, "scan of nothing: %d", a.status);
}

void contract_kv(const coord_ctx *x, void *st) {
    coord_answer a = coord_get(x, st, "k");
    MCPG_CHECK(a.status == MCPG_ENOENT, "get absent: %d", a.status);
    a = coord_put(x, st, "k", "v1", 0);
    MCPG_CHECK(a.status == 0 && a.revision > 0, "put: %d", a.status);
    uint64_t r1 = a.revision;
    a = coord_get(x, st, "k");
    MCPG_CHECK(a.status == 0 && strcmp(a.data, "v1") == 0 && a.len == 2 && a.revision == r1,
               "get: %d %s", a.status, a.data);
    a = coord_pia(x, st, "k", "x", 0);
    MCPG_CHECK(a.status == MCPG_EEXIST && strcmp(a.data, "v1") == 0 && a.revision == r1,
               "put_if_absent present: %d", a.status);
    a = coord_pia(x, st, "k2", "x", 0);
    MCPG_CHECK(a.status == 0 && a.revision > r1, "put_if_absent absent: %d", a.status);
    check_cas(x, st, r1);
    check_incr(x, st);
    uint64_t before = coord_get(x, st, "k").revision;
    a = coord_del(x, st, "k");
    MCPG_CHECK(a.status == 0 && a.revision == before, "del: %d", a.status);
    MCPG_CHECK(coord_del(x, st, "k").status == MCPG_ENOENT, "del absent");
    MCPG_CHECK(coord_get(x, st, "k").status == MCPG_ENOENT, "deleted");
    a = coord_pia(x, st, "k", "again", 0);
    MCPG_CHECK(a.status == 0 && a.revision > before, "re-created with a higher revision: %d",
               a.status);

    static char big[4096];
    memset(big, 'b', sizeof big - 1);
    MCPG_CHECK(coord_put(x, st, "big", big, 0).status == 0, "put big");
    coord_answer *g = calloc(1, sizeof *g);
    coord_settle(x, x->ops->get(st, x->w, K("big"), coord_on_answer, g), g, "get big");
    MCPG_CHECK(g->status == 0 && g->len == sizeof big - 1, "big: %zu", g->len);
    free(g);
    check_scan(x, st);
}

/* Arguments refused at once: no callback ever. */
void contract_refused(const coord_ctx *x, void *st) {
    coord_answer a = {0};
    MCPG_CHECK(x->ops->get(st, x->w, "", 0, coord_on_answer, &a) == MCPG_EINVAL, "empty key");
    char longkey[2000];
    memset(longkey, 'k', sizeof longkey);
    MCPG_CHECK(x->ops->put(st, x->w, longkey, sizeof longkey, "v", 1, 0, coord_on_answer, &a) ==
                   MCPG_ERANGE, "key over max_key_bytes");
    MCPG_CHECK(x->ops->publish(st, x->w, "a.*", "x", 1, coord_on_answer, &a) == MCPG_EINVAL,
               "publish to a wildcard");
    MCPG_CHECK(x->ops->publish(st, x->w, "a..b", "x", 1, coord_on_answer, &a) == MCPG_EINVAL,
               "bad subject");
    MCPG_CHECK(x->ops->rate_take(st, x->w, K("r"), 1, 0, 1, coord_on_answer, &a) == MCPG_EINVAL,
               "rate_take interval 0");
    mcpg_fakehost_run_for(x->fh, 5);
    MCPG_CHECK(a.calls == 0, "a refused op answered");
}

typedef struct off_loop {
    const coord_ctx *x;
    void *st;
    int rc;
    coord_answer a;
} off_loop;

static void *off_loop_thread(void *arg) {
    off_loop *o = arg;
    o->rc = o->x->ops->incr(o->st, o->x->w, K("offloop"), 1, 0, coord_on_answer, &o->a);
    return NULL;
}

/* An op from a thread that is not w's loop: MCPG_ESTATE, not applied. */
void contract_off_loop(const coord_ctx *x, void *st) {
    off_loop o = {.x = x, .st = st};
    pthread_t t;
    pthread_create(&t, NULL, off_loop_thread, &o);
    pthread_join(t, NULL);
    mcpg_fakehost_run_for(x->fh, 5);
    MCPG_CHECK(o.rc == MCPG_ESTATE && o.a.calls == 0, "off the loop: %d", o.rc);
    MCPG_CHECK(coord_get(x, st, "offloop").status == MCPG_ENOENT, "and not applied");
}

void contract_ttl(const coord_ctx *x, void *st) {
    uint64_t ttl = (uint64_t)x->ttl_ms;
    MCPG_CHECK(coord_put(x, st, "ttl.t", "v", ttl).status == 0, "put ttl");
    MCPG_CHECK(coord_get(x, st, "ttl.t").status == 0, "alive");
    MCPG_CHECK(coord_incr(x, st, "ttl.w", 1, ttl).number == 1, "window");
    MCPG_CHECK(coord_incr(x, st, "ttl.w", 1, ttl * 100).number == 2, "same window");
    coord_put(x, st, "ttl.keep", "x", 0);
    coord_put(x, st, "ttl.d", "x", ttl);
    mcpg_fakehost_run_for(x->fh, 2 * x->ttl_ms);
    MCPG_CHECK(coord_get(x, st, "ttl.t").status == MCPG_ENOENT, "expired");
    MCPG_CHECK(coord_get(x, st, "ttl.keep").status == 0, "no TTL: kept");
    MCPG_CHECK(coord_incr(x, st, "ttl.w", 1, 0).number == 1, "a new window counts from 0");
    MCPG_CHECK(coord_del(x, st, "ttl.d").status == MCPG_ENOENT, "an expired key: del finds none");
    MCPG_CHECK(coord_cas(x, st, "ttl.t", 0, "c").status == 0, "cas on 0 over an expired key");
    coord_put(x, st, "ttl.p", "v", ttl);
    coord_answer a = {0};
    mcpg_fakehost_run_for(x->fh, 2 * x->ttl_ms);
    coord_settle(x, x->ops->scan_prefix(st, x->w, K("ttl."), on_each, coord_on_answer, &a), &a,
                 "scan ttl");
    MCPG_CHECK(strcmp(a.keys, "ttl.keep@1,ttl.t@1,ttl.w@1") == 0, "expired keys not scanned: %s",
               a.keys);
    a = coord_pia(x, st, "ttl.p", "again", 0);
    MCPG_CHECK(a.status == 0, "an expired key is absent to put_if_absent: %d", a.status);
}

/* Several put_if_absent on one key in flight at once: one wins. */
void contract_put_if_absent_race(const coord_ctx *x, void *st) {
    coord_answer a[8] = {{0}};
    for (int i = 0; i < 8; i++)
        MCPG_CHECK(x->ops->put_if_absent(st, x->w, K("lease"), K("holder"), 60000,
                                         coord_on_answer, &a[i]) == 0, "pia %d", i);
    for (int i = 0; i < 8; i++) mcpg_fakehost_run_until(x->fh, coord_answered, &a[i], x->answer_ms);
    int won = 0, lost = 0;
    for (int i = 0; i < 8; i++) {
        won += a[i].calls == 1 && a[i].status == 0;
        lost += a[i].calls == 1 && a[i].status == MCPG_EEXIST;
    }
    MCPG_CHECK(won == 1 && lost == 7 && a[0].status == 0, "won %d lost %d", won, lost);
}

/* GCRA at its edges (caller's clock): a burst of 10 at 100 ms each. */
void contract_rate(const coord_ctx *x, void *st) {
    const int64_t iv = 100000, burst = 10 * iv, t0 = 1700000000000000;
    int admitted = 0;
    for (int i = 0; i < 12; i++) admitted += coord_rate(x, st, "rate.k", t0, iv, burst).status == 0;
    MCPG_CHECK(admitted == 10, "a burst of 10: %d", admitted);
    coord_answer a = coord_rate(x, st, "rate.k", t0, iv, burst);
    MCPG_CHECK(a.status == MCPG_EAGAIN && a.number == t0 + iv, "refused, fits at t0+iv: %lld",
               (long long)(a.number - t0));
    MCPG_CHECK(coord_rate(x, st, "rate.k", t0 + iv - 1, iv, burst).status == MCPG_EAGAIN,
               "1 us early");
    a = coord_rate(x, st, "rate.k", t0 + iv, iv, burst);
    MCPG_CHECK(a.status == 0 && a.number == t0 + 11 * iv, "exactly when it fits: %d", a.status);
    MCPG_CHECK(coord_put(x, st, "rate.text", "abc", 0).status == 0, "text");
    MCPG_CHECK(coord_rate(x, st, "rate.text", t0, iv, burst).status == MCPG_EINVAL,
               "not an integer");
}

/* Answers come in the order the loop made its ops, whatever keys they touch
 * (a store that runs ops side by side must reorder its answers). */
typedef struct order_rec {
    int *log, *n, me;
} order_rec;

static void on_order(void *arg, int status, const mcpg_coord_value *v) {
    order_rec *r = arg;
    (void)status, (void)v;
    r->log[(*r->n)++] = r->me;
}

static void on_order_each(void *arg, int status, const mcpg_coord_value *v) {
    (void)arg, (void)status, (void)v;
}

static int order_done(void *arg) { return *(int *)arg >= 200; }

void contract_order(const coord_ctx *x, void *st) {
    static int log[200];
    int n = 0;
    static order_rec recs[200];
    char k[32];
    for (int i = 0; i < 200; i++) {
        recs[i] = (order_rec){log, &n, i};
        snprintf(k, sizeof k, "order.%d", i % 37);
        int rc = i % 50 == 49 ? x->ops->scan_prefix(st, x->w, K("order."), on_order_each, on_order,
                                                    &recs[i])
               : i % 10 == 9 ? x->ops->publish(st, x->w, "order.news", "x", 1, on_order, &recs[i])
               : i % 2 ? x->ops->get(st, x->w, K(k), on_order, &recs[i])
                       : x->ops->put(st, x->w, K(k), K("v"), 0, on_order, &recs[i]);
        MCPG_CHECK(rc == 0, "op %d: %d", i, rc);
    }
    mcpg_fakehost_run_until(x->fh, order_done, &n, x->answer_ms);
    int in_order = n == 200;
    for (int i = 0; in_order && i < 200; i++) in_order = log[i] == i;
    MCPG_CHECK(in_order, "200 answers in the order of their ops (%d answered)", n);
}

/* ---- pub/sub ------------------------------------------------------------------------ */

typedef struct inbox {
    int n;
    char last[64];
    char seq[2048];
    const coord_ctx *x;
    void *st;
    mcpg_coord_sub *self_sub;
    int stop_at;
} inbox;

static void on_msg(void *arg, const char *subject, const char *data, size_t len) {
    inbox *b = arg;
    b->n++;
    snprintf(b->last, sizeof b->last, "%s=%.*s", subject, (int)len, data);
    size_t n = strlen(b->seq);
    snprintf(b->seq + n, sizeof b->seq - n, "%.*s", (int)len, data);
    if (b->self_sub && b->n == b->stop_at) {
        b->x->ops->unsubscribe(b->st, b->self_sub);
        b->self_sub = NULL;
    }
}

static int got_ten(void *arg) { return ((inbox *)arg)->n >= 10; }

void contract_pubsub(const coord_ctx *x, void *st) {
    inbox exact = {0}, wild = {0}, star = {0}, inside = {0}, other = {0};
    mcpg_coord_sub *se, *sw, *ss, *si, *so;
    const mcpg_coordinator_ops *ops = x->ops;
    MCPG_REQUIRE(ops->subscribe(st, x->w, "sess.1", on_msg, &exact, &se) == 0, "sub");
    MCPG_REQUIRE(ops->subscribe(st, x->w, "sess.>", on_msg, &wild, &sw) == 0, "sub >");
    MCPG_REQUIRE(ops->subscribe(st, x->w, "*.1", on_msg, &star, &ss) == 0, "sub *");
    MCPG_REQUIRE(ops->subscribe(st, x->w, "sess.1", on_msg, &inside, &si) == 0, "sub 2");
    MCPG_REQUIRE(ops->subscribe(st, x->w, "other", on_msg, &other, &so) == 0, "sub other");
    MCPG_CHECK(ops->subscribe(st, x->w, "a..b", on_msg, &other, &so) == MCPG_EINVAL, "bad subject");
    inside.x = x, inside.st = st, inside.self_sub = si, inside.stop_at = 3;
    /* a remote store's subscriptions reach its server with a round trip */
    coord_get(x, st, "sync");
    coord_answer p[10];
    for (int i = 0; i < 10; i++) {
        p[i] = (coord_answer){0};
        char d[4];
        snprintf(d, sizeof d, "%d", i);
        MCPG_CHECK(ops->publish(st, x->w, "sess.1", K(d), coord_on_answer, &p[i]) == 0, "publish");
    }
    MCPG_CHECK(exact.n == 0 && p[0].calls == 0, "nothing inside the ops");
    mcpg_fakehost_run_until(x->fh, coord_answered, &p[9], x->answer_ms);
    mcpg_fakehost_run_until(x->fh, got_ten, &exact, x->answer_ms);
    mcpg_fakehost_run_until(x->fh, got_ten, &wild, x->answer_ms);
    mcpg_fakehost_run_until(x->fh, got_ten, &star, x->answer_ms);
    mcpg_fakehost_run_for(x->fh, 50);
    MCPG_CHECK(p[0].status == 0 && p[9].status == 0, "published: %d", p[9].status);
    MCPG_CHECK(strcmp(exact.seq, "0123456789") == 0, "exact, in order: %s", exact.seq);
    MCPG_CHECK(strcmp(wild.seq, "0123456789") == 0, "sess.>: %s", wild.seq);
    MCPG_CHECK(strcmp(star.seq, "0123456789") == 0, "*.1: %s", star.seq);
    MCPG_CHECK(strcmp(inside.seq, "012") == 0, "unsubscribed in its 3rd callback: %s", inside.seq);
    MCPG_CHECK(other.n == 0, "other subject");
    MCPG_CHECK(strcmp(exact.last, "sess.1=9") == 0, "subject given: %s", exact.last);
    if (!x->remote) MCPG_CHECK(p[0].number == 4, "reached %lld", (long long)p[0].number);
    ops->unsubscribe(st, se);
    ops->unsubscribe(st, sw);
    ops->unsubscribe(st, ss);
    ops->unsubscribe(st, so);
    coord_answer q = {0};
    coord_settle(x, ops->publish(st, x->w, "sess.1", "late", 4, coord_on_answer, &q), &q, "late");
    mcpg_fakehost_run_for(x->fh, 100);
    MCPG_CHECK(exact.n == 10, "delivered after unsubscribe: %s", exact.seq);
}
