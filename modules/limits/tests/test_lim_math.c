/* limits: the counters' arithmetic and the table, without a host. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lim_math.h"
#include "../lim_table.h"

static int failures;
#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                       \
        }                                                                     \
    } while (0)

#define MS 1000LL
#define S 1000000LL

/* 600/min (one per 100 ms), burst 10: 10 at once, then one exactly when
 * its interval has passed, and not 1 us before. */
static void rate_edges(void) {
    _Atomic int64_t paid = 0;
    int64_t t0 = 5 * S, iv = 100 * MS;
    for (int i = 0; i < 10; i++) CHECK(lim_rate_take(&paid, t0, iv, 10) == 0);
    CHECK(lim_rate_take(&paid, t0, iv, 10) == iv); /* the 11th waits one interval */
    CHECK(lim_rate_take(&paid, t0 + iv - 1, iv, 10) == 1);
    CHECK(lim_rate_take(&paid, t0 + iv, iv, 10) == 0);
    CHECK(lim_rate_take(&paid, t0 + iv, iv, 10) == iv);
    /* 30 s of attempts every millisecond: the burst at t0, then the k-th at
     * exactly t0 + k x 100 ms; over [t0, t0 + 30 s] that is 10 + 300 = 310,
     * counting the call at exactly t0 + 30 s */
    atomic_store(&paid, 0);
    int admitted = 0;
    for (int64_t t = t0; t <= t0 + 30 * S; t += MS) admitted += lim_rate_take(&paid, t, iv, 10) == 0;
    CHECK(admitted == 310);
    atomic_store(&paid, 0);
    admitted = 0;
    for (int64_t t = t0; t < t0 + 30 * S; t += MS) admitted += lim_rate_take(&paid, t, iv, 10) == 0;
    CHECK(admitted == 309); /* [t0, t0 + 30 s): the edge's call left out */
    /* idle long enough, the burst is whole again, never more */
    int64_t later = t0 + 3600 * S;
    admitted = 0;
    for (int i = 0; i < 20; i++) admitted += lim_rate_take(&paid, later, iv, 10) == 0;
    CHECK(admitted == 10);
}

/* A clock stepped back never admits more: paid stays where it was. */
static void rate_clock_back(void) {
    _Atomic int64_t paid = 0;
    int64_t t0 = 100 * S, iv = 100 * MS;
    for (int i = 0; i < 10; i++) CHECK(lim_rate_take(&paid, t0, iv, 10) == 0);
    CHECK(lim_rate_take(&paid, t0 - 10 * S, iv, 10) > 0);
    CHECK(lim_rate_take(&paid, t0 - 10 * S, iv, 10) == 10 * S + iv);
    CHECK(lim_rate_take(&paid, t0 + iv, iv, 10) == 0);
}

static void budget_windows(void) {
    _Atomic uint64_t w = 0;
    int64_t win = 60 * S, t = 1000 * win + 59 * S; /* 1 s before a window ends */
    for (int i = 0; i < 3; i++) CHECK(lim_budget_take(&w, t, win, 3) == 1);
    CHECK(lim_budget_take(&w, t, win, 3) == 0);
    CHECK(lim_budget_window_left(t, win) == 1 * S);
    CHECK(lim_budget_take(&w, t + S - 1, win, 3) == 0); /* the window's last us */
    CHECK(lim_budget_take(&w, t + S, win, 3) == 1);     /* the next window */
    CHECK(lim_budget_take(&w, t + S, win, 3) == 1);
    CHECK(lim_budget_take(&w, t + S, win, 3) == 1);
    CHECK(lim_budget_take(&w, t + S, win, 3) == 0);
    /* a clock stepped back to the old window counts into the newest */
    CHECK(lim_budget_take(&w, t, win, 3) == 0);
    /* forever: one window */
    _Atomic uint64_t f = 0;
    int n = 0;
    for (int i = 0; i < 1500; i++) n += lim_budget_take(&f, (int64_t)i * 3600 * S, 0, 1000);
    CHECK(n == 1000);
    CHECK(lim_budget_window_left(123 * S, 0) == 0);
}

/* Exact across threads: 4 threads x 100000 attempts on one cap, one budget. */
typedef struct shared {
    _Atomic int64_t in_flight, most;
    _Atomic uint64_t budget;
    _Atomic int64_t admitted;
} shared;

static void *hammer(void *arg) {
    shared *s = arg;
    for (int i = 0; i < 100000; i++) {
        if (lim_conc_take(&s->in_flight, 8)) {
            int64_t now = atomic_load(&s->in_flight), m = atomic_load(&s->most);
            while (now > m && !atomic_compare_exchange_weak(&s->most, &m, now)) {
            }
            lim_conc_give(&s->in_flight);
        }
        if (lim_budget_take(&s->budget, 0, 0, 12345)) atomic_fetch_add(&s->admitted, 1);
    }
    return NULL;
}

static void across_threads(void) {
    shared s = {0};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, hammer, &s);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&s.most) <= 8);
    CHECK(atomic_load(&s.in_flight) == 0);
    CHECK(atomic_load(&s.admitted) == 12345);
}

static void table(void) {
    lim_table t;
    CHECK(lim_table_init(&t, 16) == 0);
    lim_entry *a = lim_table_get(&t, 0, "x\x1f", 2), *b = lim_table_get(&t, 1, "x\x1f", 2);
    CHECK(a && b && a != b);
    CHECK(lim_table_get(&t, 0, "x\x1f", 2) == a);
    char k[16];
    int got = 2;
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "k%d", i);
        got += lim_table_get(&t, 0, k, strlen(k)) != NULL;
    }
    CHECK(got == 16); /* bounded by max_keys */
    CHECK(lim_table_get(&t, 0, "x\x1f", 2) == a); /* a full table still finds its keys */
    lim_table_fini(&t);
}

int main(void) {
    rate_edges();
    rate_clock_back();
    budget_windows();
    across_threads();
    table();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("lim_math: all checks passed\n");
    return failures != 0;
}
