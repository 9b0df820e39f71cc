/* lib/upcred: the token cache alone. Bounded at its capacity: a new key
 * beyond it takes the least recently used entry's place (a find counts as
 * a use), never one whose token is being fetched; with every entry being
 * fetched there is no room, and the caller is told (NULL). Dropped entries
 * are found no more and their room is used again. */
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

int main(void) {
    test_least_recently_used_goes();
    test_fetching_entries_stay();
    test_drop_frees_room();
    return MCPG_CHECK_EXIT("upcred_cache");
}
