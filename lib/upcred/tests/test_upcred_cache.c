/* lib/upcred: the token cache alone. Bounded at its capacity: a new key
 * beyond it takes the least recently used entry's place (a find counts as
 * a use), never one whose token is being fetched; with every entry being
 * fetched there is no room, and the caller is told (NULL). Dropped entries
 * are found no more and their room is used again. A failed request backs
 * its key off: a window from the minimum, doubling with each failure in a
 * row up to the maximum, forgotten with the next token; a failure takes an
 * entry's room like a token, so failures never grow the cache. */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <stdlib.h>
#include <string.h>

#include "upcred_internal.h"

static void key(unsigned char k[32], int i) {
    memset(k, 0, 32);
    memcpy(k, &i, sizeof i);
    k[31] = (unsigned char)(i * 7); /* keys differ beyond the bucket's bytes too */
}

static upcred_entry *add(upcred_cache *c, int i) {
    unsigned char k[32];
    key(k, i);
    upcred_entry *e = upcred_cache_add(c, k);
    if (e) upcred_entry_set_line(e, strdup("Authorization: Bearer t\r\n"), 25, 1);
    return e;
}

static upcred_entry *find(upcred_cache *c, int i) {
    unsigned char k[32];
    key(k, i);
    return upcred_cache_find(c, k);
}

static void test_least_recently_used_goes(void) {
    upcred_cache c;
    MCPG_REQUIRE(upcred_cache_init(&c, 3) == 0, "init");
    for (int i = 1; i <= 3; i++) MCPG_REQUIRE(add(&c, i), "entry %d", i);
    MCPG_CHECK(find(&c, 1) != NULL, "1 is found (and so used)");
    MCPG_REQUIRE(add(&c, 4), "a fourth key takes a place");
    MCPG_CHECK(find(&c, 2) == NULL, "2, the least recently used, went");
    MCPG_CHECK(find(&c, 1) && find(&c, 3) && find(&c, 4), "the others stay");
    MCPG_CHECK(c.used == 3, "never more than the capacity (%zu)", c.used);
    upcred_cache_free(&c);
}

static void test_fetching_entries_stay(void) {
    upcred_cache c;
    MCPG_REQUIRE(upcred_cache_init(&c, 2) == 0, "init");
    upcred_entry *a = add(&c, 1), *b = add(&c, 2);
    MCPG_REQUIRE(a && b, "two entries");
    a->fetching = 1;
    MCPG_REQUIRE(add(&c, 3), "a third key takes the idle entry's place");
    MCPG_CHECK(find(&c, 1) == a, "the entry being fetched stays");
    MCPG_CHECK(find(&c, 2) == NULL, "the idle one went");
    find(&c, 3)->fetching = 1;
    MCPG_CHECK(add(&c, 4) == NULL, "every entry being fetched: no room, said so");
    upcred_cache_free(&c);
}

static void test_drop_frees_room(void) {
    upcred_cache c;
    MCPG_REQUIRE(upcred_cache_init(&c, 1) == 0, "init");
    upcred_entry *a = add(&c, 1);
    MCPG_REQUIRE(a, "an entry");
    upcred_cache_drop(&c, a);
    MCPG_CHECK(find(&c, 1) == NULL, "a dropped entry is not found");
    MCPG_CHECK(add(&c, 2) == a, "its room is used again");
    MCPG_CHECK(a->line && a->used && !a->fetching, "a fresh entry");
    upcred_cache_free(&c);
}

#define MS 1000 /* microseconds */

static void test_backoff_doubles_to_its_cap(void) {
    upcred_cache c;
    MCPG_REQUIRE(upcred_cache_init(&c, 2) == 0, "init");
    upcred_entry *e = add(&c, 1);
    MCPG_REQUIRE(e, "an entry");
    int64_t now = 1000000 * MS;
    upcred_entry_failed(e, "x: the token endpoint cannot be reached", now, 1000, 5000);
    MCPG_CHECK(!e->line, "a failure leaves no token");
    MCPG_CHECK(e->error && strcmp(e->error, "x: the token endpoint cannot be reached") == 0,
               "its message is kept");
    MCPG_CHECK(upcred_entry_backoff_left(e, now) == 1000 * MS, "first window: the minimum");
    MCPG_CHECK(upcred_entry_backoff_left(e, now + 999 * MS) == 1 * MS, "1 ms left");
    MCPG_CHECK(upcred_entry_backoff_left(e, now + 1000 * MS) == 0, "over at its end");
    static const int64_t want[] = {2000, 4000, 5000, 5000};
    for (int i = 0; i < 4; i++) {
        now += 10000 * MS;
        upcred_entry_failed(e, "again", now, 1000, 5000);
        MCPG_CHECK(upcred_entry_backoff_left(e, now) == want[i] * MS,
                   "failure %d in a row: %lld ms (want %lld)", i + 2,
                   (long long)(upcred_entry_backoff_left(e, now) / MS), (long long)want[i]);
    }
    MCPG_CHECK(e->failures == 5, "failures in a row: %u", e->failures);
    e->fetching = 1;
    MCPG_CHECK(upcred_entry_backoff_left(e, now) == 0, "a request out: waited for, not refused");
    e->fetching = 0;
    upcred_entry_set_line(e, strdup("Authorization: Bearer t\r\n"), 25, 1);
    MCPG_CHECK(e->failures == 0 && !e->error && upcred_entry_backoff_left(e, now) == 0,
               "a token forgets the failures");
    upcred_entry_failed(e, "once more", now, 1000, 5000);
    MCPG_CHECK(upcred_entry_backoff_left(e, now) == 1000 * MS, "from the minimum again");
    upcred_cache_free(&c);
}

static void test_no_backoff_at_zero(void) {
    upcred_cache c;
    MCPG_REQUIRE(upcred_cache_init(&c, 1) == 0, "init");
    upcred_entry *e = add(&c, 1);
    MCPG_REQUIRE(e, "an entry");
    for (int i = 0; i < 3; i++) upcred_entry_failed(e, "down", 5 * MS, 0, 0);
    MCPG_CHECK(upcred_entry_backoff_left(e, 5 * MS) == 0, "backoff_min_ms 0: no window");
    upcred_cache_free(&c);
}

static void test_failures_stay_in_bound(void) {
    upcred_cache c;
    MCPG_REQUIRE(upcred_cache_init(&c, 3) == 0, "init");
    for (int i = 1; i <= 50; i++) {
        upcred_entry *e = add(&c, i);
        MCPG_REQUIRE(e, "key %d has room", i);
        upcred_entry_failed(e, "refused", 0, 1000, 1000);
    }
    MCPG_CHECK(c.used == 3, "50 failed keys in 3 entries (%zu)", c.used);
    MCPG_CHECK(find(&c, 50) && find(&c, 49) && find(&c, 48), "the latest failures kept");
    MCPG_CHECK(find(&c, 1) == NULL, "the oldest went");
    upcred_cache_free(&c); /* ASan: every failure's message freed */
}

int main(void) {
    test_least_recently_used_goes();
    test_fetching_entries_stay();
    test_drop_frees_room();
    test_backoff_doubles_to_its_cap();
    test_no_backoff_at_zero();
    test_failures_stay_in_bound();
    return MCPG_CHECK_EXIT("upcred_cache");
}
