/* The coordinator contract, for every store (see coord_contract.h). */
#define _GNU_SOURCE
#include "coord_contract.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K(s) s, strlen(s)
#define WAIT_MS 5000
/* The TTLs the contract sets: far longer than a few round trips to a remote
 * store on a loaded machine, so a key checked alive right after its put is. */
#define TTL_MS 2000
/* Past a TTL, this much more before a key must be gone: the store's clock
 * and ours are not the same clock (Redis's, NATS's wall clock). */
#define TTL_SLACK_MS 250

/* Turn the loop until ttl_ms + TTL_SLACK_MS have passed since `since` (taken
 * once the op that set the TTL had answered, so after the store started it). */
static void run_past(const contract *c, uint64_t since, uint64_t ttl_ms) {
    uint64_t until = since + ttl_ms + TTL_SLACK_MS, now;
    while ((now = mcpg_fakehost_now_ms()) < until) mcpg_fakehost_run_for(c->fh, until - now);
}

const mcpg_module *contract_open(const char *so_path, void **dl) {
    *dl = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    MCPG_REQUIRE(*dl, "dlopen: %s", dlerror());
    mcpg_module_entry_fn entry = (mcpg_module_entry_fn)dlsym(*dl, MCPG_ENTRY_SYMBOL);
    MCPG_REQUIRE(entry, "no entry symbol");
    const mcpg_module *mod = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    MCPG_REQUIRE(mod && mod->kind == MCPG_KIND_COORDINATOR, "descriptor");
    return mod;
}

mcpg_instance *contract_load(mcpg_fakehost *fh, const mcpg_module *mod, const char *config) {
    return mcpg_fakehost_load_or_exit(fh, mod, "coord", config);
}

void contract_on_answer(void *arg, int status, const mcpg_coord_value *v) {
    answer *a = arg;
    a->calls++;
    a->status = status;
    a->has_data = v && v->data;
    a->len = v ? v->len : 0;
    if (v && v->data) snprintf(a->data, sizeof a->data, "%.*s", (int)v->len, v->data);
    a->revision = v ? v->revision : 0;
    a->number = v ? v->number : 0;
}

static void on_each(void *arg, int status, const mcpg_coord_value *v) {
    answer *a = arg;
    a->each++;
    size_t n = strlen(a->keys);
    snprintf(a->keys + n, sizeof a->keys - n, "%s%.*s@%llu", n ? "," : "", (int)v->len, v->data,
             (unsigned long long)(v->revision > 0));
    (void)status;
}

static int answered(void *arg) { return ((answer *)arg)->calls > 0; }

answer *contract_settle(const contract *c, int rc, answer *a, const char *what) {
    MCPG_CHECK(rc == 0, "%s: op returned %d", what, rc);
    MCPG_CHECK(a->calls == 0, "%s: callback ran inside the op", what);
    if (rc) return a;
    MCPG_CHECK(mcpg_fakehost_run_until(c->fh, answered, a, WAIT_MS) == 0, "%s: no answer", what);
    mcpg_fakehost_run_for(c->fh, 1);
    MCPG_CHECK(a->calls == 1, "%s: %d answers", what, a->calls);
    return a;
}

answer contract_get(const contract *c, const char *key) {
    answer a = {0};
    contract_settle(c, c->ops->get(c->st, c->w, K(key), contract_on_answer, &a), &a, "get");
    return a;
}

answer contract_put(const contract *c, const char *key, const char *val, uint64_t ttl) {
    answer a = {0};
    contract_settle(c, c->ops->put(c->st, c->w, K(key), K(val), ttl, contract_on_answer, &a), &a,
                    "put");
    return a;
}

answer contract_incr(const contract *c, const char *key, int64_t d, uint64_t ttl) {
    answer a = {0};
    contract_settle(c, c->ops->incr(c->st, c->w, K(key), d, ttl, contract_on_answer, &a), &a,
                    "incr");
    return a;
}

answer contract_pia(const contract *c, const char *key, const char *val, uint64_t ttl) {
    answer a = {0};
    contract_settle(c, c->ops->put_if_absent(c->st, c->w, K(key), K(val), ttl, contract_on_answer,
                                             &a), &a, "put_if_absent");
    return a;
}

static answer cas(const contract *c, const char *key, uint64_t rev, const char *val) {
    answer a = {0};
    contract_settle(c, c->ops->compare_and_set(c->st, c->w, K(key), rev, K(val), 0,
                                               contract_on_answer, &a), &a, "cas");
    return a;
}

answer contract_del(const contract *c, const char *key) {
    answer a = {0};
    contract_settle(c, c->ops->del(c->st, c->w, K(key), contract_on_answer, &a), &a, "del");
    return a;
}

/* ---- key-value ---------------------------------------------------------------- */

void contract_kv(const contract *c) {
    answer a = contract_get(c, "ct.k");
    MCPG_CHECK(a.status == MCPG_ENOENT, "get absent: %d", a.status);
    a = contract_put(c, "ct.k", "v1", 0);
    MCPG_CHECK(a.status == 0 && a.revision > 0, "put: %d", a.status);
    uint64_t r1 = a.revision;
    a = contract_get(c, "ct.k");
    MCPG_CHECK(a.status == 0 && strcmp(a.data, "v1") == 0 && a.len == 2 && a.revision == r1,
               "get: %d %s", a.status, a.data);
    a = contract_pia(c, "ct.k", "x", 0);
    MCPG_CHECK(a.status == MCPG_EEXIST && strcmp(a.data, "v1") == 0 && a.revision == r1,
               "put_if_absent present: %d", a.status);
    a = contract_pia(c, "ct.k2", "x", 0);
    MCPG_CHECK(a.status == 0 && a.revision > r1, "put_if_absent absent: %d", a.status);
    a = cas(c, "ct.k", r1 + 1000, "v2");
    MCPG_CHECK(a.status == MCPG_ECONFLICT && a.revision == r1 && strcmp(a.data, "v1") == 0,
               "cas conflict: %d", a.status);
    a = cas(c, "ct.k", r1, "v2");
    MCPG_CHECK(a.status == 0 && a.revision > r1, "cas: %d", a.status);
    MCPG_CHECK(strcmp(contract_get(c, "ct.k").data, "v2") == 0, "cas wrote");
    a = cas(c, "ct.k", r1, "v3");
    MCPG_CHECK(a.status == MCPG_ECONFLICT, "second cas with the old revision: %d", a.status);
    a = cas(c, "ct.k3", 0, "new");
    MCPG_CHECK(a.status == 0, "cas expecting absence on an absent key: %d", a.status);
    MCPG_CHECK(cas(c, "ct.k3", 0, "again").status == MCPG_ECONFLICT, "cas 0 on a present key");
    a = contract_incr(c, "ct.n", 3, 0);
    MCPG_CHECK(a.status == 0 && a.number == 3 && strcmp(a.data, "3") == 0, "incr: %d %lld",
               a.status, (long long)a.number);
    a = contract_incr(c, "ct.n", -10, 0);
    MCPG_CHECK(a.status == 0 && a.number == -7, "incr: %lld", (long long)a.number);
    MCPG_CHECK(contract_get(c, "ct.n").number == -7, "get counter");
    MCPG_CHECK(contract_incr(c, "ct.k", 1, 0).status == MCPG_EINVAL, "incr on text");
    contract_put(c, "ct.max", "9223372036854775807", 0);
    MCPG_CHECK(contract_incr(c, "ct.max", 1, 0).status == MCPG_ERANGE, "incr overflow");
    MCPG_CHECK(strcmp(contract_get(c, "ct.max").data, "9223372036854775807") == 0,
               "an overflow changes nothing");
    a = contract_del(c, "ct.k");
    MCPG_CHECK(a.status == 0 && a.revision > r1, "del: %d", a.status);
    MCPG_CHECK(contract_del(c, "ct.k").status == MCPG_ENOENT, "del absent");
    MCPG_CHECK(contract_get(c, "ct.k").status == MCPG_ENOENT, "deleted");
    uint64_t before = a.revision;
    MCPG_CHECK(contract_put(c, "ct.k", "again", 0).revision > before,
               "a key created again has a higher revision than before its delete");

    /* a value bigger than any record's own buffer */
    static char big[4096];
    memset(big, 'b', sizeof big - 1);
    MCPG_CHECK(contract_put(c, "ct.big", big, 0).status == 0, "put big");
    answer *g = calloc(1, sizeof *g);
    contract_settle(c, c->ops->get(c->st, c->w, K("ct.big"), contract_on_answer, g), g, "get big");
    MCPG_CHECK(g->status == 0 && g->len == sizeof big - 1, "big: %zu", g->len);
    free(g);
    /* an empty value is a value */
    contract_put(c, "ct.empty", "", 0);
    a = contract_get(c, "ct.empty");
    MCPG_CHECK(a.status == 0 && a.len == 0, "empty value: %d", a.status);
}

void contract_scan(const contract *c) {
    contract_put(c, "ct/s/b", "1", 0);
    contract_put(c, "ct/s/a", "1", 0);
    contract_put(c, "ct/s/c", "1", 50000);
    contract_put(c, "ct/t/a", "1", 0);
    contract_put(c, "ct/s*x", "1", 0); /* glob characters in a key are literal */
    answer a = {0};
    contract_settle(c, c->ops->scan_prefix(c->st, c->w, K("ct/s/"), on_each, contract_on_answer,
                                           &a), &a, "scan");
    MCPG_CHECK(a.status == 0 && a.each == 3 && strcmp(a.keys, "ct/s/a@1,ct/s/b@1,ct/s/c@1") == 0 &&
                   a.number == 3, "scan: %d %d %s", a.status, a.each, a.keys);
    a = (answer){0};
    contract_settle(c, c->ops->scan_prefix(c->st, c->w, K("ct/s*"), on_each, contract_on_answer,
                                           &a), &a, "scan with a glob character");
    MCPG_CHECK(a.status == 0 && a.each == 1 && strcmp(a.keys, "ct/s*x@1") == 0, "scan *: %s",
               a.keys);
    a = (answer){0};
    contract_settle(c, c->ops->scan_prefix(c->st, c->w, K("ct/none/"), on_each,
                                           contract_on_answer, &a), &a, "scan nothing");
    MCPG_CHECK(a.status == 0 && a.each == 0 && a.number == 0, "empty scan: %d", a.each);
}

/* Arguments refused at once: the op returns < 0 and no callback ever runs. */
void contract_refusals(const contract *c) {
    answer a = {0};
    MCPG_CHECK(c->ops->get(c->st, c->w, "", 0, contract_on_answer, &a) == MCPG_EINVAL, "empty key");
    char longkey[2000];
    memset(longkey, 'k', sizeof longkey);
    MCPG_CHECK(c->ops->put(c->st, c->w, longkey, sizeof longkey, "v", 1, 0, contract_on_answer,
                           &a) == MCPG_ERANGE, "key over max_key_bytes");
    MCPG_CHECK(c->ops->publish(c->st, c->w, "a.*", "x", 1, contract_on_answer, &a) == MCPG_EINVAL,
               "publish to a wildcard");
    MCPG_CHECK(c->ops->publish(c->st, c->w, "a..b", "x", 1, contract_on_answer, &a) ==
                   MCPG_EINVAL, "bad subject");
    MCPG_CHECK(c->ops->rate_take(c->st, c->w, K("ct.r"), 1, 0, 1, contract_on_answer, &a) ==
                   MCPG_EINVAL, "rate_take interval 0");
    mcpg_fakehost_run_for(c->fh, 5);
    MCPG_CHECK(a.calls == 0, "a refused op answered");
}

/* An op from a thread that is not w's loop is refused (MCPG_ESTATE). */
typedef struct off_loop {
    const contract *c;
    int rc;
    answer a;
} off_loop;

static void *off_loop_thread(void *arg) {
    off_loop *o = arg;
    o->rc = o->c->ops->incr(o->c->st, o->c->w, K("ct.x"), 1, 0, contract_on_answer, &o->a);
    return NULL;
}

void contract_off_loop(const contract *c) {
    off_loop o = {.c = c};
    pthread_t t;
    pthread_create(&t, NULL, off_loop_thread, &o);
    pthread_join(t, NULL);
    mcpg_fakehost_run_for(c->fh, 5);
    MCPG_CHECK(o.rc == MCPG_ESTATE && o.a.calls == 0, "off the loop: %d", o.rc);
    MCPG_CHECK(contract_get(c, "ct.x").status == MCPG_ENOENT, "and not applied");
}

/* A key past its TTL is absent to every op at once; incr keeps a window. */
void contract_ttl(const contract *c) {
    MCPG_CHECK(contract_put(c, "ct.t", "v", TTL_MS).status == 0, "put ttl");
    MCPG_CHECK(contract_get(c, "ct.t").status == 0, "alive");
    MCPG_CHECK(contract_incr(c, "ct.w", 1, TTL_MS).number == 1, "window");
    MCPG_CHECK(contract_incr(c, "ct.w", 1, 100000).number == 2, "same window");
    MCPG_CHECK(contract_pia(c, "ct.p", "v", TTL_MS).status == 0, "put_if_absent ttl");
    MCPG_CHECK(contract_put(c, "ct.keep", "v", TTL_MS).status == 0 &&
                   contract_put(c, "ct.keep", "v", 0).status == 0, "put without a ttl clears it");
    /* every TTL above started before now: past now + TTL_MS each key is gone
     * (the window's too: its second incr, 100 s, must not have moved it) */
    run_past(c, mcpg_fakehost_now_ms(), TTL_MS);
    MCPG_CHECK(contract_get(c, "ct.t").status == MCPG_ENOENT, "expired");
    MCPG_CHECK(contract_incr(c, "ct.w", 1, TTL_MS).number == 1,
               "incr kept the first expiry; a new window counts from 0");
    MCPG_CHECK(contract_pia(c, "ct.p", "again", 0).status == 0,
               "an expired key is absent to put_if_absent");
    MCPG_CHECK(contract_get(c, "ct.keep").status == 0, "a put with ttl 0 keeps the key");
}

/* Eight put_if_absent on one key in flight at once: exactly the first wins. */
void contract_put_if_absent_race(const contract *c) {
    answer a[8] = {{0}};
    for (int i = 0; i < 8; i++)
        MCPG_CHECK(c->ops->put_if_absent(c->st, c->w, K("ct.lease"), K("holder"), 60000,
                                         contract_on_answer, &a[i]) == 0, "pia %d", i);
    mcpg_fakehost_run_until(c->fh, answered, &a[7], WAIT_MS);
    mcpg_fakehost_run_for(c->fh, 1);
    int won = 0, lost = 0;
    for (int i = 0; i < 8; i++) {
        won += a[i].calls == 1 && a[i].status == 0;
        lost += a[i].calls == 1 && a[i].status == MCPG_EEXIST;
    }
    MCPG_CHECK(won == 1 && lost == 7 && a[0].status == 0, "won %d lost %d", won, lost);
}

/* ---- rate_take (GCRA), on the caller's clock ------------------------------------ */

/* As contract_settle without its extra millisecond: 30 000 of them run here. */
static answer take(const contract *c, const char *key, int64_t now, int64_t iv, int64_t burst) {
    answer a = {0};
    int rc = c->ops->rate_take(c->st, c->w, K(key), now, iv, burst, contract_on_answer, &a);
    MCPG_CHECK(rc == 0 && a.calls == 0, "rate_take: %d, %d answers inside the op", rc, a.calls);
    if (rc == 0)
        MCPG_CHECK(mcpg_fakehost_run_until(c->fh, answered, &a, WAIT_MS) == 0 && a.calls == 1,
                   "rate_take: %d answers", a.calls);
    return a;
}

void contract_rate_take(const contract *c) {
    const int64_t now = 1700000000000000; /* the caller's wall clock, in us */
    const int64_t iv = 100000, burst = 10 * 100000; /* 600/min, a burst of 10 */
    int admitted = 0;
    answer a;
    while ((a = take(c, "ct.rate", now, iv, burst)).status == 0 && admitted < 100) admitted++;
    MCPG_CHECK(admitted == 10, "a burst of 10 at one instant: %d", admitted);
    MCPG_CHECK(a.status == MCPG_EAGAIN && a.number == now + 100000,
               "refused: one call fits 100 ms later (%lld)", (long long)(a.number - now));
    MCPG_CHECK(take(c, "ct.rate", now + 99999, iv, burst).status == MCPG_EAGAIN,
               "1 us before it fits: refused");
    a = take(c, "ct.rate", now + 100000, iv, burst);
    MCPG_CHECK(a.status == 0 && a.number == now + 1100000, "exactly when it fits: admitted (%d)",
               a.status);
    MCPG_CHECK(take(c, "ct.rate", now + 100000, iv, burst).status == MCPG_EAGAIN, "and only one");
    MCPG_CHECK(take(c, "ct.rate", now - 5000000, iv, burst).status == MCPG_EAGAIN,
               "a clock 5 s behind: refused");
    /* 30 s of calls, one attempt every 10 ms (each 100 ms edge is one): 10 + 10/s x 30 s.
     * Each attempt is a round trip to a real server; 3001 of them, not 30001,
     * keep the test well inside its timeout on a loaded machine. */
    admitted = 0;
    for (int64_t t = 0; t <= 30000000; t += 10000)
        admitted += take(c, "ct.rate30", now + t, iv, burst).status == 0;
    MCPG_CHECK(admitted == 310, "30 s inclusive of both edges: 10 + 300 = 310, got %d", admitted);
    contract_put(c, "ct.rtxt", "abc", 0);
    MCPG_CHECK(take(c, "ct.rtxt", now, 1, 1).status == MCPG_EINVAL, "not a number");
    /* the key is kept until paid-until has passed (one interval, TTL_MS,
     * here), not for its burst (10 of them) */
    const int64_t iv_exp = TTL_MS * 1000;
    a = take(c, "ct.rexp", now, iv_exp, 10 * iv_exp);
    uint64_t taken = mcpg_fakehost_now_ms();
    MCPG_CHECK(a.status == 0 && contract_get(c, "ct.rexp").status == 0, "kept");
    run_past(c, taken, TTL_MS);
    MCPG_CHECK(contract_get(c, "ct.rexp").status == MCPG_ENOENT, "gone once paid-until passed");
}

/* ---- pub/sub ------------------------------------------------------------------------ */

void contract_on_msg(void *arg, const char *subject, const char *data, size_t len) {
    contract_inbox *b = arg;
    b->n++;
    snprintf(b->last, sizeof b->last, "%s=%.*s", subject, (int)len, data);
    size_t n = strlen(b->seq);
    snprintf(b->seq + n, sizeof b->seq - n, "%.*s", (int)len, data);
    if (b->self_sub && b->n == b->stop_at) {
        b->c->ops->unsubscribe(b->c->st, b->self_sub);
        b->self_sub = NULL;
    }
}

/* Every inbox that hears all of ct.sess.1 has its 10, `inside` its 3. */
typedef struct inboxes {
    contract_inbox *all[3], *inside;
} inboxes;

static int got_all(void *arg) {
    inboxes *b = arg;
    for (int i = 0; i < 3; i++)
        if (b->all[i]->n < 10) return 0;
    return b->inside->n >= 3;
}

void contract_pubsub(const contract *c) {
    const mcpg_coordinator_ops *ops = c->ops;
    contract_inbox exact = {0}, wild = {0}, star = {0}, inside = {0}, other = {0}, deep = {0};
    mcpg_coord_sub *se, *sw, *ss, *si, *so, *sd;
    MCPG_REQUIRE(ops->subscribe(c->st, c->w, "ct.sess.1", contract_on_msg, &exact, &se) == 0, "sub");
    MCPG_REQUIRE(ops->subscribe(c->st, c->w, "ct.sess.>", contract_on_msg, &wild, &sw) == 0, "sub >");
    MCPG_REQUIRE(ops->subscribe(c->st, c->w, "ct.*.1", contract_on_msg, &star, &ss) == 0, "sub *");
    MCPG_REQUIRE(ops->subscribe(c->st, c->w, "ct.sess.1", contract_on_msg, &inside, &si) == 0, "sub 2");
    MCPG_REQUIRE(ops->subscribe(c->st, c->w, "ct.other", contract_on_msg, &other, &so) == 0, "sub other");
    MCPG_REQUIRE(ops->subscribe(c->st, c->w, "ct.*", contract_on_msg, &deep, &sd) == 0, "sub ct.*");
    MCPG_CHECK(ops->subscribe(c->st, c->w, "a..b", contract_on_msg, &other, &so) == MCPG_EINVAL,
               "bad subject");
    inside.c = c;
    inside.self_sub = si;
    inside.stop_at = 3;
    answer p[10];
    for (int i = 0; i < 10; i++) {
        char d[4];
        p[i] = (answer){0};
        snprintf(d, sizeof d, "%d", i);
        MCPG_CHECK(ops->publish(c->st, c->w, "ct.sess.1", K(d), contract_on_answer, &p[i]) == 0,
                   "publish");
    }
    MCPG_CHECK(exact.n == 0 && p[0].calls == 0, "nothing inside the ops");
    mcpg_fakehost_run_until(c->fh, answered, &p[9], WAIT_MS);
    inboxes heard = {{&exact, &wild, &star}, &inside};
    mcpg_fakehost_run_until(c->fh, got_all, &heard, WAIT_MS);
    mcpg_fakehost_run_for(c->fh, 20); /* nothing more comes: none twice, none elsewhere */
    for (int i = 0; i < 10; i++) MCPG_CHECK(p[i].calls == 1 && p[i].status == 0, "published %d", i);
    MCPG_CHECK(strcmp(exact.seq, "0123456789") == 0, "exact, in order, once: %s", exact.seq);
    MCPG_CHECK(strcmp(wild.seq, "0123456789") == 0, "ct.sess.>: %s", wild.seq);
    MCPG_CHECK(strcmp(star.seq, "0123456789") == 0, "ct.*.1: %s", star.seq);
    MCPG_CHECK(strcmp(inside.seq, "012") == 0, "unsubscribed in its 3rd callback: %s", inside.seq);
    MCPG_CHECK(other.n == 0 && deep.n == 0, "other subjects: %d %d", other.n, deep.n);
    MCPG_CHECK(strcmp(exact.last, "ct.sess.1=9") == 0, "subject given: %s", exact.last);
    ops->unsubscribe(c->st, se);
    ops->unsubscribe(c->st, sw);
    ops->unsubscribe(c->st, ss);
    ops->unsubscribe(c->st, so);
    ops->unsubscribe(c->st, sd);
    /* after unsubscribe, nothing: publish and give it time to arrive */
    answer late = {0};
    contract_settle(c, ops->publish(c->st, c->w, "ct.sess.1", K("late"), contract_on_answer, &late),
                    &late, "publish after unsubscribe");
    mcpg_fakehost_run_for(c->fh, 50);
    MCPG_CHECK(exact.n == 10 && wild.n == 10, "delivered after unsubscribe: %d %d", exact.n,
               wild.n);
}

/* Answers come in the order the loop made its ops, whatever keys they touch
 * and whatever kind they are (a store that runs ops side by side, on several
 * connections or threads, must reorder its answers). */
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

void contract_order(const contract *c) {
    static int log[200];
    static order_rec recs[200];
    int n = 0;
    char k[32];
    for (int i = 0; i < 200; i++) {
        recs[i] = (order_rec){log, &n, i};
        snprintf(k, sizeof k, "ct.order.%d", i % 37);
        int rc = i % 50 == 49 ? c->ops->scan_prefix(c->st, c->w, K("ct.order."), on_order_each,
                                                    on_order, &recs[i])
               : i % 10 == 9 ? c->ops->publish(c->st, c->w, "ct.order.news", K("x"), on_order,
                                               &recs[i])
               : i % 2       ? c->ops->get(c->st, c->w, K(k), on_order, &recs[i])
                             : c->ops->put(c->st, c->w, K(k), K("v"), 0, on_order, &recs[i]);
        MCPG_CHECK(rc == 0, "op %d: %d", i, rc);
    }
    mcpg_fakehost_run_until(c->fh, order_done, &n, 10000);
    int in_order = n == 200;
    for (int i = 0; in_order && i < 200; i++) in_order = log[i] == i;
    MCPG_CHECK(in_order, "200 answers in the order of their ops (%d answered)", n);
}

void contract_all(const contract *c) {
    contract_kv(c);
    contract_scan(c);
    contract_refusals(c);
    contract_off_loop(c);
    contract_ttl(c);
    contract_put_if_absent_race(c);
    contract_rate_take(c);
    contract_pubsub(c);
    contract_order(c);
}
