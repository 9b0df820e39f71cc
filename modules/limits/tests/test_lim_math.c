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

/* Burst 1: strict pacing, and a late call banks no credit: the next one
 * still waits a whole interval from the late one. */
static void rate_burst_one(void) {
    _Atomic int64_t paid = 0;
    int64_t t0 = 7 * S, iv = 100 * MS;
    CHECK(lim_rate_take(&paid, t0, iv, 1) == 0);
    CHECK(lim_rate_take(&paid, t0, iv, 1) == iv);
    CHECK(lim_rate_take(&paid, t0 + iv - 1, iv, 1) == 1);
    CHECK(lim_rate_take(&paid, t0 + iv, iv, 1) == 0);
    CHECK(lim_rate_take(&paid, t0 + iv + iv / 2 + 1, iv, 1) == iv / 2 - 1);
    int64_t late = t0 + 2 * iv + iv / 2; /* half an interval late */
    CHECK(lim_rate_take(&paid, late, iv, 1) == 0);
    CHECK(lim_rate_take(&paid, late + iv - 1, iv, 1) == 1);
    CHECK(lim_rate_take(&paid, late + iv, iv, 1) == 0);
}

/* Attempts that never fall on the interval's multiples: every admission
 * happens at the first attempt at or after t0 + k x interval, so lateness
 * never adds up. Every 7 ms for 60 s at 600/min, burst 10: the 600th would
 * need an attempt at exactly t0 + 60 s (the attempts are at ...59 997 and
 * 60 004 ms), so 10 + 599 over [t0, t0 + 60 s]. A schedule restarted from
 * each late admission would lose up to 6 ms a call: ~35 calls fewer. */
static void rate_no_drift(void) {
    _Atomic int64_t paid = 0;
    int64_t t0 = 11 * S, iv = 100 * MS;
    int admitted = 0;
    for (int64_t t = t0; t <= t0 + 60 * S; t += 7 * MS) admitted += lim_rate_take(&paid, t, iv, 10) == 0;
    CHECK(admitted == 609);
}

/* A clock stepped forward refills what the step is worth, never more than
 * the burst; a step smaller than what the burst has paid ahead refills
 * floor(step / interval) calls. */
static void rate_clock_forward(void) {
    _Atomic int64_t paid = 0;
    int64_t t0 = 20 * S, iv = 100 * MS;
    for (int i = 0; i < 10; i++) CHECK(lim_rate_take(&paid, t0, iv, 10) == 0);
    int64_t t = t0 + 350 * MS; /* 3.5 intervals later */
    int admitted = 0;
    for (int i = 0; i < 10; i++) admitted += lim_rate_take(&paid, t, iv, 10) == 0;
    CHECK(admitted == 3);
    CHECK(lim_rate_take(&paid, t, iv, 10) == 50 * MS); /* the 4th: half an interval away */
    t += 24 * 3600 * S; /* a day later: the burst, whole, and not one more */
    admitted = 0;
    for (int i = 0; i < 20; i++) admitted += lim_rate_take(&paid, t, iv, 10) == 0;
    CHECK(admitted == 10);
    CHECK(lim_rate_take(&paid, t + iv, iv, 10) == 0);
    CHECK(lim_rate_take(&paid, t + iv, iv, 10) == iv);
}

/* A clock stepped back never admits more: paid stays where it was. */
static void rate_clock_back(void) {
    _Atomic int64_t paid = 0;
    int64_t t0 = 100 * S, iv = 100 * MS;
    for (int i = 0; i < 10; i++) CHECK(lim_rate_take(&paid, t0, iv, 10) == 0);
    CHECK(lim_rate_take(&paid, t0 - 10 * S, iv, 10) > 0);
    CHECK(lim_rate_take(&paid, t0 - 10 * S, iv, 10) == 10 * S + iv);
    CHECK(lim_rate_take(&paid, t0 + iv, iv, 10) == 0);
    /* an idle bucket (full) and the clock stepped back past the burst's
     * worth: refused until the clock is back where the bucket was paid to,
     * then exactly the burst, as if no step had happened */
    _Atomic int64_t idle = 0;
    CHECK(lim_rate_take(&idle, t0, iv, 10) == 0); /* paid = t0 + iv */
    int64_t back = t0 - 5 * S;
    CHECK(lim_rate_take(&idle, back, iv, 10) == 5 * S + iv - 9 * iv);
    int admitted = 0;
    for (int i = 0; i < 20; i++) admitted += lim_rate_take(&idle, t0 + iv, iv, 10) == 0;
    CHECK(admitted == 10);
    /* a step back and forth while saturated (a stale clock read by one
     * thread, then a fresh one by another): the count over the run is that
     * of the fresh clock alone */
    _Atomic int64_t mixed = 0;
    admitted = 0;
    for (int64_t t = t0; t <= t0 + 10 * S; t += MS) {
        admitted += lim_rate_take(&mixed, t, iv, 10) == 0;
        admitted += lim_rate_take(&mixed, t - 3 * S, iv, 10) == 0; /* 3 s stale */
    }
    CHECK(admitted == 10 + 100);
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
    /* a window's first us starts it with the whole window left */
    CHECK(lim_budget_window_left(1001 * win, win) == win);
    CHECK(lim_budget_window_left(1001 * win - 1, win) == 1);
}

/* Clock steps across budget windows: forward over several windows starts a
 * new one at 1; back, it counts into the newest window seen (never reopens
 * an older one, even one it had not spent), then forward again past it. */
static void budget_clock_steps(void) {
    _Atomic uint64_t w = 0;
    int64_t win = 10 * S, t = 5000 * win;
    CHECK(lim_budget_take(&w, t, win, 2) == 1);
    t += 7 * win + 3 * S; /* 7 windows later */
    CHECK(lim_budget_take(&w, t, win, 2) == 1);
    CHECK(lim_budget_take(&w, t, win, 2) == 1);
    CHECK(lim_budget_take(&w, t, win, 2) == 0);
    /* back 3 windows: those had nothing spent, but stay closed */
    CHECK(lim_budget_take(&w, t - 3 * win, win, 2) == 0);
    /* back inside the newest window: still the same count */
    CHECK(lim_budget_take(&w, t - 3 * S, win, 2) == 0);
    /* forward to the next window: a fresh count */
    int64_t next = (t / win + 1) * win;
    CHECK(lim_budget_take(&w, next - 1, win, 2) == 0);
    CHECK(lim_budget_take(&w, next, win, 2) == 1);
    CHECK(lim_budget_take(&w, next - 2 * win, win, 2) == 1); /* back: counts into next's */
    CHECK(lim_budget_take(&w, next, win, 2) == 0);
    /* a clock before the epoch counts into window 0: never newer than one seen */
    CHECK(lim_budget_take(&w, -5 * S, win, 2) == 0);
    /* forever: one window */
    _Atomic uint64_t f = 0;
    int n = 0;
    for (int i = 0; i < 1500; i++) n += lim_budget_take(&f, (int64_t)i * 3600 * S, 0, 1000);
    CHECK(n == 1000);
    CHECK(lim_budget_window_left(123 * S, 0) == 0);
}

/* Rates across threads. All at one instant: exactly the burst, then exactly
 * what 5 intervals refill. Then each thread with its own clock readings in
 * [t0, t0 + 1 s], in any order (a loop thread may read the clock, be
 * preempted, then take with a stale reading): never more than
 * burst + 1 s / interval. */
typedef struct rate_run {
    _Atomic int64_t *paid;
    int64_t t0, spread;
    unsigned seed;
    _Atomic int64_t *admitted;
} rate_run;

static void *rate_hammer(void *arg) {
    rate_run *r = arg;
    unsigned x = r->seed;
    for (int i = 0; i < 100000; i++) {
        int64_t now = r->t0;
        if (r->spread) {
            x = x * 1103515245u + 12345u;
            now += (int64_t)(x >> 8) % (r->spread + 1);
        }
        if (lim_rate_take(r->paid, now, 100 * MS, 10) == 0) atomic_fetch_add(r->admitted, 1);
    }
    return NULL;
}

static int64_t rate_threads(_Atomic int64_t *paid, int64_t t0, int64_t spread) {
    _Atomic int64_t admitted = 0;
    rate_run r[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (rate_run){paid, t0, spread, 7u + (unsigned)i * 7919u, &admitted};
        pthread_create(&t[i], NULL, rate_hammer, &r[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    return atomic_load(&admitted);
}

static void rate_across_threads(void) {
    _Atomic int64_t paid = 0;
    int64_t t0 = 50 * S;
    CHECK(rate_threads(&paid, t0, 0) == 10);
    CHECK(rate_threads(&paid, t0 + 500 * MS, 0) == 5);
    _Atomic int64_t fresh = 0;
    int64_t n = rate_threads(&fresh, t0, 1 * S);
    CHECK(n >= 10 && n <= 10 + 10);
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
    rate_burst_one();
    rate_no_drift();
    rate_clock_forward();
    rate_clock_back();
    rate_across_threads();
    budget_windows();
    budget_clock_steps();
    across_threads();
    table();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("lim_math: all checks passed\n");
    return failures != 0;
}
