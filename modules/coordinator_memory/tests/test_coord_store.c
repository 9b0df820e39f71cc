/* coordinator_memory's store and pub/sub, below the module: the functions
 * every loop thread shares, hammered from plain threads. Time is passed in,
 * so TTLs are checked to the microsecond. The fake host gives the allocator,
 * logs and the one worker that pub/sub deliveries run on. */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../coord_pubsub.h"
#include "../coord_store.h"

static mcpg_fakehost *fh;
static const mcpg_host *H;

#define T0 1000000000ull /* a "now" far from 0 */

typedef struct outbuf {
    cm_out out;
    char buf[32];
} outbuf;

static cm_out *fresh(outbuf *o) {
    cm_out_release(H, &o->out);
    o->out = (cm_out){.inline_buf = o->buf, .inline_cap = sizeof o->buf};
    return &o->out;
}

static int put(cm_store *s, const char *k, const char *v, uint64_t ttl, uint64_t now) {
    outbuf o = {0};
    int rc = cm_store_write(s, CM_PUT, k, strlen(k), v, strlen(v), ttl, 0, now, fresh(&o));
    cm_out_release(H, &o.out);
    return rc;
}

static int get_is(cm_store *s, const char *k, const char *want, uint64_t now) {
    outbuf o = {0};
    int rc = cm_store_get(s, k, strlen(k), now, fresh(&o));
    int ok = want ? rc == 0 && o.out.len == strlen(want) && strcmp(o.out.data, want) == 0
                  : rc == MCPG_ENOENT;
    cm_out_release(H, &o.out);
    return ok;
}

static void test_parse(void) {
    int64_t v;
    MCPG_CHECK(cm_parse_int64("42", 2, &v) && v == 42, "42");
    MCPG_CHECK(cm_parse_int64("-9223372036854775808", 20, &v) && v == INT64_MIN, "min");
    MCPG_CHECK(cm_parse_int64("9223372036854775807", 19, &v) && v == INT64_MAX, "max");
    MCPG_CHECK(!cm_parse_int64("9223372036854775808", 19, &v), "max+1");
    MCPG_CHECK(!cm_parse_int64("", 0, &v) && !cm_parse_int64("-", 1, &v), "empty");
    MCPG_CHECK(!cm_parse_int64("1x", 2, &v) && !cm_parse_int64(" 1", 2, &v), "junk");
}

static void test_subjects(void) {
    MCPG_CHECK(cm_subject_valid("a.b.c", 5, 0), "plain");
    MCPG_CHECK(!cm_subject_valid("a.*", 3, 0) && cm_subject_valid("a.*", 3, 1), "*");
    MCPG_CHECK(!cm_subject_valid("a.>.b", 5, 1) && cm_subject_valid("a.>", 3, 1), ">");
    MCPG_CHECK(!cm_subject_valid("a..b", 4, 1) && !cm_subject_valid(".a", 2, 1) &&
                   !cm_subject_valid("a.", 2, 1) && !cm_subject_valid("", 0, 1),
               "empty tokens");
    MCPG_CHECK(cm_subject_valid("a*.b", 4, 0), "a star inside a token is a plain character");
    struct { const char *p, *s; int m; } t[] = {
        {"a.b", "a.b", 1},   {"a.b", "a.c", 0},   {"a.b", "a.b.c", 0}, {"a.*", "a.b", 1},
        {"a.*", "a.b.c", 0}, {"a.*", "a", 0},     {"*.b", "x.b", 1},   {"a.>", "a.b", 1},
        {"a.>", "a.b.c", 1}, {"a.>", "a", 0},     {">", "x.y", 1},     {"*", "x", 1},
        {"*", "x.y", 0},     {"a.*.c", "a.b.c", 1}, {"a.*.c", "a.b.d", 0}, {"ab", "a", 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        MCPG_CHECK(cm_subject_match(t[i].p, strlen(t[i].p), t[i].s, strlen(t[i].s)) == t[i].m,
                   "match(%s, %s) != %d", t[i].p, t[i].s, t[i].m);
}

static void test_basic_ops(void) {
    cm_store *s = cm_store_new(H, 1000, 1 << 20, 7);
    MCPG_REQUIRE(s, "store");
    outbuf o = {0};
    MCPG_CHECK(cm_store_get(s, "k", 1, T0, fresh(&o)) == MCPG_ENOENT, "absent");
    MCPG_CHECK(cm_store_write(s, CM_PUT, "k", 1, "v1", 2, 0, 0, T0, fresh(&o)) == 0, "put");
    uint64_t r1 = o.out.revision;
    MCPG_CHECK(r1 > 0, "revision %llu", (unsigned long long)r1);
    MCPG_CHECK(cm_store_get(s, "k", 1, T0, fresh(&o)) == 0 && o.out.revision == r1 &&
                   strcmp(o.out.data, "v1") == 0 && o.out.number == 0,
               "get");
    /* put_if_absent on a present key: EEXIST with what is there */
    MCPG_CHECK(cm_store_write(s, CM_PUT_IF_ABSENT, "k", 1, "x", 1, 0, 0, T0, fresh(&o)) ==
                   MCPG_EEXIST && o.out.revision == r1 && strcmp(o.out.data, "v1") == 0,
               "put_if_absent present");
    /* cas: wrong revision, then right */
    MCPG_CHECK(cm_store_write(s, CM_CAS, "k", 1, "v2", 2, 0, r1 + 100, T0, fresh(&o)) ==
                   MCPG_ECONFLICT && o.out.revision == r1,
               "cas conflict");
    MCPG_CHECK(cm_store_write(s, CM_CAS, "k", 1, "v2", 2, 0, r1, T0, fresh(&o)) == 0 &&
                   o.out.revision > r1,
               "cas");
    uint64_t r2 = o.out.revision;
    MCPG_CHECK(cm_store_write(s, CM_CAS, "k", 1, "v3", 2, 0, r1, T0, fresh(&o)) ==
                   MCPG_ECONFLICT, "cas with a stale revision");
    MCPG_CHECK(cm_store_write(s, CM_CAS, "new", 3, "n", 1, 0, 0, T0, fresh(&o)) == 0, "cas 0 creates");
    MCPG_CHECK(cm_store_write(s, CM_CAS, "new", 3, "n", 1, 0, 0, T0, fresh(&o)) ==
                   MCPG_ECONFLICT, "cas 0 on a present key");
    MCPG_CHECK(cm_store_write(s, CM_CAS, "nope", 4, "n", 1, 0, 5, T0, fresh(&o)) ==
                   MCPG_ECONFLICT && o.out.data == NULL, "cas on an absent key");
    /* del, then the key is new again with a higher revision */
    MCPG_CHECK(cm_store_del(s, "k", 1, T0, fresh(&o)) == 0 && o.out.revision == r2, "del");
    MCPG_CHECK(cm_store_del(s, "k", 1, T0, fresh(&o)) == MCPG_ENOENT, "del absent");
    MCPG_CHECK(cm_store_write(s, CM_PUT_IF_ABSENT, "k", 1, "v", 1, 0, 0, T0, fresh(&o)) == 0 &&
                   o.out.revision > r2, "recreated: revision %llu", (unsigned long long)o.out.revision);
    /* incr */
    MCPG_CHECK(cm_store_incr(s, "c", 1, 5, 0, T0, fresh(&o)) == 0 && o.out.number == 5 &&
                   strcmp(o.out.data, "5") == 0, "incr new");
    MCPG_CHECK(cm_store_incr(s, "c", 1, -7, 0, T0, fresh(&o)) == 0 && o.out.number == -2, "incr");
    MCPG_CHECK(cm_store_get(s, "c", 1, T0, fresh(&o)) == 0 && o.out.number == -2 &&
                   strcmp(o.out.data, "-2") == 0, "get counter");
    MCPG_CHECK(cm_store_incr(s, "k", 1, 1, 0, T0, fresh(&o)) == MCPG_EINVAL, "incr text");
    MCPG_CHECK(put(s, "big", "9223372036854775807", 0, T0) == 0, "put max");
    MCPG_CHECK(cm_store_incr(s, "big", 3, 1, 0, T0, fresh(&o)) == MCPG_ERANGE, "overflow");
    /* a value too big for the inline buffer comes back whole */
    char large[5000];
    memset(large, 'z', sizeof large - 1);
    large[sizeof large - 1] = '\0';
    MCPG_CHECK(put(s, "large", large, 0, T0) == 0 && get_is(s, "large", large, T0), "large");
    MCPG_CHECK(put(s, "large", "s", 0, T0) == 0 && get_is(s, "large", "s", T0), "shrunk");
    MCPG_CHECK(put(s, "empty", "", 0, T0) == 0 && get_is(s, "empty", "", T0), "empty value");
    cm_out_release(H, &o.out);
    cm_store_free(s);
}

static void test_ttl(void) {
    cm_store *s = cm_store_new(H, 1000, 1 << 20, 7);
    outbuf o = {0};
    MCPG_CHECK(put(s, "t", "v", 10, T0) == 0, "put ttl");
    MCPG_CHECK(get_is(s, "t", "v", T0 + 9999), "alive 1 us before");
    MCPG_CHECK(get_is(s, "t", NULL, T0 + 10000), "gone at the ttl, before any sweep");
    /* put replaces the ttl: 0 means none */
    MCPG_CHECK(put(s, "t2", "v", 10, T0) == 0 && put(s, "t2", "w", 0, T0) == 0 &&
                   get_is(s, "t2", "w", T0 + 60000000), "put clears the ttl");
    /* incr: the ttl is set when the key is created, kept afterwards */
    MCPG_CHECK(cm_store_incr(s, "n", 1, 1, 10, T0, fresh(&o)) == 0, "incr ttl");
    MCPG_CHECK(cm_store_incr(s, "n", 1, 1, 1000, T0 + 5000, fresh(&o)) == 0 && o.out.number == 2,
               "incr in window");
    MCPG_CHECK(get_is(s, "n", NULL, T0 + 10000), "window kept its end");
    MCPG_CHECK(cm_store_incr(s, "n", 1, 1, 10, T0 + 10000, fresh(&o)) == 0 && o.out.number == 1,
               "expired counter starts from 0");
    /* put_if_absent on an expired key takes it */
    MCPG_CHECK(put(s, "lease", "a", 10, T0) == 0, "lease");
    MCPG_CHECK(cm_store_write(s, CM_PUT_IF_ABSENT, "lease", 5, "b", 1, 10, 0, T0 + 10000,
                              fresh(&o)) == 0, "an expired lease is free");
    /* cas renews: new ttl from now */
    uint64_t rev = o.out.revision;
    MCPG_CHECK(cm_store_write(s, CM_CAS, "lease", 5, "b", 1, 10, rev, T0 + 15000, fresh(&o)) == 0,
               "renew");
    MCPG_CHECK(get_is(s, "lease", "b", T0 + 24999) && get_is(s, "lease", NULL, T0 + 25000),
               "renewed expiry");
    /* the sweep: 500 keys expire, 10 do not */
    char k[32];
    for (int i = 0; i < 500; i++) {
        snprintf(k, sizeof k, "e%d", i);
        put(s, k, "x", 1 + (uint64_t)i % 7, T0);
    }
    for (int i = 0; i < 10; i++) {
        snprintf(k, sizeof k, "p%d", i);
        put(s, k, "x", 0, T0);
    }
    size_t keys, bytes, keys2, bytes2;
    cm_store_usage(s, &keys, &bytes);
    MCPG_CHECK(cm_store_sweep(s, T0 + 3000, SIZE_MAX) > 0, "some expired at 3 ms");
    size_t n = cm_store_sweep(s, T0 + 7000, 100);
    MCPG_CHECK(n == 100, "budget: %zu", n);
    cm_store_sweep(s, T0 + 60000000, SIZE_MAX);
    cm_store_usage(s, &keys2, &bytes2);
    MCPG_CHECK(keys2 == 11 && bytes2 < bytes, "after the sweep: %zu keys (want p0..p9 and t2), "
               "%zu bytes", keys2, bytes2);
    cm_out_release(H, &o.out);
    cm_store_free(s);
}

static void test_bounds(void) {
    cm_store *s = cm_store_new(H, 3, 100, 7);
    outbuf o = {0};
    MCPG_CHECK(put(s, "a", "1", 0, T0) == 0 && put(s, "b", "1", 0, T0) == 0 &&
                   put(s, "c", "1", 10, T0) == 0, "three");
    MCPG_CHECK(put(s, "d", "1", 0, T0) == MCPG_EAGAIN, "fourth key: full");
    MCPG_CHECK(cm_store_incr(s, "d", 1, 1, 0, T0, fresh(&o)) == MCPG_EAGAIN, "incr: full");
    MCPG_CHECK(cm_store_write(s, CM_PUT_IF_ABSENT, "d", 1, "1", 1, 0, 0, T0, fresh(&o)) ==
                   MCPG_EAGAIN, "put_if_absent: full");
    MCPG_CHECK(put(s, "a", "2", 0, T0) == 0, "replacing is fine when full");
    /* c expired: the full store sweeps it to make room */
    MCPG_CHECK(put(s, "d", "1", 0, T0 + 10000) == 0, "an expired key makes room");
    /* bytes: a=2 and b=1 hold 4 of 100, so a's value may grow to 97 */
    MCPG_CHECK(cm_store_del(s, "d", 1, T0 + 10000, fresh(&o)) == 0, "del");
    char v[128];
    memset(v, 'v', sizeof v);
    v[98] = '\0';
    MCPG_CHECK(put(s, "a", v, 0, T0) == MCPG_EAGAIN && get_is(s, "a", "2", T0),
               "growing past max_bytes: refused, value kept");
    v[97] = '\0';
    MCPG_CHECK(put(s, "a", v, 0, T0) == 0, "up to max_bytes: 1 + 97 + 1 + 1 = 100");
    size_t keys, bytes;
    cm_store_usage(s, &keys, &bytes);
    MCPG_CHECK(keys == 2 && bytes == 100, "usage %zu %zu", keys, bytes);
    cm_out_release(H, &o.out);
    cm_store_free(s);
}

static void test_scan(void) {
    cm_store *s = cm_store_new(H, 1000, 1 << 20, 7);
    const char *keys[] = {"s/b", "s/a", "s/c/1", "t/a", "s", "s/expired"};
    for (size_t i = 0; i < 6; i++) put(s, keys[i], "v", i == 5 ? 1 : 0, T0);
    cm_scan_out sc = {0};
    MCPG_CHECK(cm_store_scan(s, "s/", 2, T0 + 1000, 100, &sc) == 0 && sc.n == 3, "scan: %zu", sc.n);
    const char *want[] = {"s/a", "s/b", "s/c/1"};
    for (size_t i = 0; i < sc.n && i < 3; i++)
        MCPG_CHECK(strcmp(sc.keys + sc.items[i].off, want[i]) == 0 &&
                       sc.items[i].len == strlen(want[i]) && sc.items[i].revision > 0,
                   "scan[%zu] = %s", i, sc.keys + sc.items[i].off);
    cm_scan_release(H, &sc);
    MCPG_CHECK(cm_store_scan(s, "", 0, T0, 100, &sc) == 0 && sc.n == 6, "all: %zu", sc.n);
    MCPG_CHECK(sc.n == 6 && strcmp(sc.keys + sc.items[0].off, "s") == 0, "shortest first");
    cm_scan_release(H, &sc);
    MCPG_CHECK(cm_store_scan(s, "", 0, T0, 2, &sc) == MCPG_ERANGE && sc.n == 2, "bounded");
    cm_scan_release(H, &sc);
    MCPG_CHECK(cm_store_scan(s, "zz", 2, T0, 2, &sc) == 0 && sc.n == 0, "none");
    cm_scan_release(H, &sc);
    cm_store_free(s);
}

/* ---- threads ---------------------------------------------------------------- */

#define THREADS 4
#define INCRS 20000
#define RACE_KEYS 2000

typedef struct hammer {
    cm_store *s;
    int id;
    int bad_order;
    atomic_int *winners; /* per race key */
} hammer;

static void *incr_thread(void *arg) {
    hammer *hm = arg;
    outbuf o = {0};
    uint64_t last = 0;
    int64_t last_n = 0;
    for (int i = 0; i < INCRS; i++) {
        if (cm_store_incr(hm->s, "hot", 3, 1, 0, H->mono_us(), fresh(&o)) != 0) hm->bad_order++;
        /* what one thread sees of one key only goes up */
        if (o.out.revision <= last || o.out.number <= last_n) hm->bad_order++;
        last = o.out.revision;
        last_n = o.out.number;
    }
    char k[32];
    for (int i = 0; i < RACE_KEYS; i++) {
        snprintf(k, sizeof k, "race/%d", i);
        int rc = cm_store_write(hm->s, CM_PUT_IF_ABSENT, k, strlen(k), "me", 2, 0, 0,
                                H->mono_us(), fresh(&o));
        if (rc == 0) atomic_fetch_add(&hm->winners[i], 1);
        else if (rc != MCPG_EEXIST) hm->bad_order++;
    }
    /* churn with ttls and deletes, for the sanitizers */
    for (int i = 0; i < 20000; i++) {
        snprintf(k, sizeof k, "churn/%d", (i * 7 + hm->id) % 300);
        uint64_t now = H->mono_us();
        switch (i % 4) {
        case 0: cm_store_write(hm->s, CM_PUT, k, strlen(k), k, strlen(k), i % 3, 0, now, fresh(&o)); break;
        case 1: cm_store_get(hm->s, k, strlen(k), now, fresh(&o)); break;
        case 2: cm_store_del(hm->s, k, strlen(k), now, fresh(&o)); break;
        default: cm_store_sweep(hm->s, now, 50);
        }
    }
    cm_out_release(H, &o.out);
    return NULL;
}

static void test_threads(void) {
    cm_store *s = cm_store_new(H, 1000000, 64 << 20, 7);
    static atomic_int winners[RACE_KEYS];
    pthread_t t[THREADS];
    hammer hm[THREADS];
    for (int i = 0; i < THREADS; i++) {
        hm[i] = (hammer){.s = s, .id = i, .winners = winners};
        pthread_create(&t[i], NULL, incr_thread, &hm[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++) MCPG_CHECK(hm[i].bad_order == 0, "thread %d: %d", i, hm[i].bad_order);
    outbuf o = {0};
    MCPG_CHECK(cm_store_get(s, "hot", 3, H->mono_us(), fresh(&o)) == 0 &&
                   o.out.number == THREADS * INCRS, "hot = %lld", (long long)o.out.number);
    int dup = 0;
    for (int i = 0; i < RACE_KEYS; i++) dup += atomic_load(&winners[i]) != 1;
    MCPG_CHECK(dup == 0, "%d race keys without exactly one winner", dup);
    /* the counts add up: delete everything, nothing is left */
    cm_store_sweep(s, UINT64_MAX / 2, SIZE_MAX);
    cm_scan_out sc = {0};
    MCPG_CHECK(cm_store_scan(s, "", 0, H->mono_us(), 10000000, &sc) == 0, "scan");
    for (size_t i = 0; i < sc.n; i++)
        cm_store_del(s, sc.keys + sc.items[i].off, sc.items[i].len, H->mono_us(), fresh(&o));
    cm_scan_release(H, &sc);
    size_t keys, bytes;
    cm_store_usage(s, &keys, &bytes);
    MCPG_CHECK(keys == 0 && bytes == 0, "left: %zu keys %zu bytes", keys, bytes);
    cm_out_release(H, &o.out);
    cm_store_free(s);
}

/* ---- pub/sub across threads ------------------------------------------------------ */

#define PUBLISHERS 4
#define PER_PUB 5000

typedef struct rx {
    long got;            /* on the loop */
    int next[PUBLISHERS];
    int bad;
    atomic_long done;
} rx;

static void rx_cb(void *arg, const char *subject, const char *data, size_t len) {
    rx *r = arg;
    int p, seq;
    if (len == 0 || data[len] != '\0' || sscanf(data, "%d:%d", &p, &seq) != 2 || p < 0 ||
        p >= PUBLISHERS || strncmp(subject, "ev.", 3) != 0) {
        r->bad++;
    } else {
        if (seq != r->next[p]) r->bad++; /* each publisher's messages in order, once */
        r->next[p] = seq + 1;
    }
    r->got++;
    atomic_store(&r->done, r->got);
}

typedef struct pubber {
    cm_pubsub *ps;
    int id;
} pubber;

static void *pub_thread(void *arg) {
    pubber *p = arg;
    char msg[32], subj[16];
    for (int i = 0; i < PER_PUB; i++) {
        int n = snprintf(msg, sizeof msg, "%d:%d", p->id, i);
        snprintf(subj, sizeof subj, "ev.%d", p->id);
        size_t reached = 0;
        cm_publish(p->ps, subj, strlen(subj), msg, (size_t)n, &reached);
    }
    return NULL;
}

static int wait_count(atomic_long *c, long want) {
    for (int i = 0; i < 10000 && atomic_load(c) < want; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(c) == want;
}

typedef struct sub_req {
    cm_pubsub *ps;
    const char *subject;
    rx *r;
    cm_sub *sub;
} sub_req;

static void test_pubsub_threads(void) {
    cm_pubsub *ps = cm_pubsub_new(H, NULL, 100, PUBLISHERS * PER_PUB, 3);
    MCPG_REQUIRE(ps, "pubsub");
    mcpg_worker *w = mcpg_fakehost_worker(fh);
    rx exact = {0}, wild = {0}, star = {0};
    cm_sub *s1, *s2, *s3, *s4;
    MCPG_REQUIRE(cm_subscribe(ps, w, "ev.1", 4, rx_cb, &exact, &s1) == 0, "sub exact");
    MCPG_REQUIRE(cm_subscribe(ps, w, "ev.>", 4, rx_cb, &wild, &s2) == 0, "sub >");
    MCPG_REQUIRE(cm_subscribe(ps, w, "*.2", 3, rx_cb, &star, &s3) == 0, "sub *");
    MCPG_REQUIRE(cm_subscribe(ps, w, "other", 5, rx_cb, &star, &s4) == 0, "sub other");
    MCPG_CHECK(cm_pubsub_count(ps) == 4, "count");
    MCPG_REQUIRE(mcpg_fakehost_start_thread(fh) == 0, "loop thread");
    pthread_t t[PUBLISHERS];
    pubber pb[PUBLISHERS];
    for (int i = 0; i < PUBLISHERS; i++) {
        pb[i] = (pubber){ps, i};
        pthread_create(&t[i], NULL, pub_thread, &pb[i]);
    }
    for (int i = 0; i < PUBLISHERS; i++) pthread_join(t[i], NULL);
    MCPG_CHECK(wait_count(&wild.done, PUBLISHERS * PER_PUB), "ev.>: %ld", atomic_load(&wild.done));
    MCPG_CHECK(wait_count(&exact.done, PER_PUB), "ev.1: %ld", atomic_load(&exact.done));
    MCPG_CHECK(wait_count(&star.done, PER_PUB), "*.2: %ld", atomic_load(&star.done));
    MCPG_REQUIRE(mcpg_fakehost_stop_thread(fh) == 0, "stop loop thread");
    MCPG_CHECK(exact.bad == 0 && wild.bad == 0 && star.bad == 0, "order: %d %d %d", exact.bad,
               wild.bad, star.bad);
    MCPG_CHECK(exact.next[1] == PER_PUB && wild.next[3] == PER_PUB && star.next[2] == PER_PUB,
               "all arrived");
    MCPG_CHECK(cm_pubsub_dropped(ps) == 0, "dropped %llu", (unsigned long long)cm_pubsub_dropped(ps));
    cm_unsubscribe(ps, s1);
    cm_unsubscribe(ps, s2);
    cm_unsubscribe(ps, s3);
    cm_unsubscribe(ps, s4);
    MCPG_CHECK(cm_pubsub_count(ps) == 0, "count after");
    cm_pubsub_free(ps);
}

/* A full backlog drops, counts and logs once; a cancelled subscription with
 * messages queued is freed by its pending delivery, which runs no callback. */
static int reached(rx *r, long n) { return r->got >= n; }
static int reached_cb(void *arg) { return reached(arg, 4); }

static void test_backlog(void) {
    cm_pubsub *ps = cm_pubsub_new(H, NULL, 100, 4, 3);
    mcpg_worker *w = mcpg_fakehost_worker(fh);
    rx r = {0}, gone = {0};
    cm_sub *s, *g;
    cm_subscribe(ps, w, "ev.q", 4, rx_cb, &r, &s);
    cm_subscribe(ps, w, "ev.q", 4, rx_cb, &gone, &g);
    mcpg_fakehost_log_clear(fh);
    size_t total = 0;
    for (int i = 0; i < 10; i++) {
        char m[16];
        int n = snprintf(m, sizeof m, "0:%d", i);
        size_t got = 0;
        cm_publish(ps, "ev.q", 4, m, (size_t)n, &got);
        total += got;
    }
    MCPG_CHECK(total == 8, "queued %zu (4 each)", total);
    MCPG_CHECK(cm_pubsub_dropped(ps) == 12, "dropped %llu", (unsigned long long)cm_pubsub_dropped(ps));
    const char *log = mcpg_fakehost_log_text(fh);
    const char *first = strstr(log, "backlog full");
    MCPG_CHECK(first && !strstr(first + 1, "backlog full"), "logged once:\n%s", log);
    cm_unsubscribe(ps, g); /* its delivery is queued: it frees it */
    mcpg_fakehost_run_until(fh, reached_cb, &r, 2000);
    mcpg_fakehost_run_for(fh, 5);
    MCPG_CHECK(r.got == 4 && r.bad == 0 && r.next[0] == 4, "the first four: %ld", r.got);
    MCPG_CHECK(gone.got == 0, "no delivery after unsubscribe: %ld", gone.got);
    cm_unsubscribe(ps, s);
    cm_pubsub_free(ps);
}

/* rate_take: 600/min (interval 100 ms) with a burst of 10, at the window's
 * edges, a clock that steps back, and the key's expiry once paid-until
 * has passed. */
static int take(cm_store *s, int64_t now, uint64_t store_now, outbuf *o) {
    cm_rate q = {now, 100000, 10 * 100000};
    return cm_store_rate_take(s, "r", 1, &q, store_now, fresh(o));
}

static void test_rate_take(void) {
    cm_store *s = cm_store_new(H, 1000, 1 << 20, 7);
    outbuf o = {0};
    const int64_t now = 1700000000000000; /* the caller's wall clock, in us */
    int admitted = 0;
    while (take(s, now, T0, &o) == 0) admitted++;
    MCPG_CHECK(admitted == 10, "a burst of 10 at one instant: %d", admitted);
    MCPG_CHECK(o.out.number == now + 100000, "refused: one call fits 100 ms later (%lld)",
               (long long)(o.out.number - now));
    MCPG_CHECK(take(s, now + 99999, T0, &o) == MCPG_EAGAIN, "1 us before it fits: refused");
    MCPG_CHECK(take(s, now + 100000, T0, &o) == 0, "exactly when it fits: admitted");
    MCPG_CHECK(take(s, now + 100000, T0, &o) == MCPG_EAGAIN, "and only one");
    /* 30 s of calls as fast as they come, one attempt per ms: 10 + 10/s x 30 s */
    cm_store *s2 = cm_store_new(H, 1000, 1 << 20, 7);
    admitted = 0;
    for (int64_t t = 0; t <= 30000000; t += 1000) {
        cm_rate q = {now + t, 100000, 1000000};
        if (cm_store_rate_take(s2, "g", 1, &q, T0, fresh(&o)) == 0) admitted++;
    }
    MCPG_CHECK(admitted == 310, "30 s inclusive of both edges: 10 + 300 = 310, got %d", admitted);
    cm_store_free(s2);
    /* a clock that steps back admits nothing it had not paid for */
    MCPG_CHECK(take(s, now - 5000000, T0, &o) == MCPG_EAGAIN, "a clock 5 s behind: refused");
    /* the key lives until paid-until has passed (on the store's clock) */
    MCPG_CHECK(get_is(s, "r", NULL, T0 + 10 * 100000 + 100000 + 1000 + 1), "expired after");
    MCPG_CHECK(take(s, now + 60000000, T0 + 60000000, &o) == 0 && o.out.number == now + 60100000,
               "a minute later: a fresh start");
    /* bad input */
    cm_rate bad = {now, 0, 1};
    MCPG_CHECK(cm_store_rate_take(s, "r", 1, &bad, T0, fresh(&o)) == MCPG_EINVAL, "interval 0");
    MCPG_CHECK(put(s, "txt", "abc", 0, T0) == 0, "a text value");
    cm_rate q = {now, 1, 1};
    MCPG_CHECK(cm_store_rate_take(s, "txt", 3, &q, T0, fresh(&o)) == MCPG_EINVAL, "not a number");
    cm_store_free(s);
}

int main(void) {
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fakehost");
    mcpg_fakehost_set_quiet(fh, 1);
    H = mcpg_fakehost_host(fh);
    test_parse();
    test_subjects();
    test_basic_ops();
    test_ttl();
    test_rate_take();
    test_bounds();
    test_scan();
    test_threads();
    test_pubsub_threads();
    test_backlog();
    int left = mcpg_fakehost_free(fh);
    MCPG_CHECK(left == 0, "fake host: %d problem(s)", left);
    return MCPG_CHECK_EXIT("test_coord_store");
}
