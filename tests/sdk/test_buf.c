/* Unit tests of the SDK's growable buffers (sdk/src/buf.c), which are also
 * the kernel's host->buf_* slots: growth, the NUL terminator, and sizes so
 * large that the arithmetic would wrap. */
#include <mcpg/check.h>
#include <mcpg/sdk.h>

#include <stdint.h>
#include <string.h>
#include <unistd.h>

static void test_growth(void) {
    mcpg_buf b = {0};
    MCPG_REQUIRE(mcpg_buf_reserve(&b, 10) == 0 && b.data && b.cap >= 11, "reserve on empty");
    MCPG_CHECK(b.data[0] == '\0', "NUL-terminated after reserve alone (the ABI's promise)");
    char piece[1000];
    for (size_t i = 0; i < sizeof piece; i++) piece[i] = (char)('a' + i % 26);
    for (int i = 0; i < 1000; i++)
        MCPG_REQUIRE(mcpg_buf_append(&b, piece, sizeof piece) == 0, "append %d", i);
    MCPG_CHECK(b.len == 1000 * sizeof piece && b.cap > b.len && b.data[b.len] == '\0',
               "len %zu cap %zu", b.len, b.cap);
    MCPG_CHECK(memcmp(b.data + 999 * sizeof piece, piece, sizeof piece) == 0, "contents");
    size_t len = b.len;
    MCPG_CHECK(mcpg_buf_printf(&b, "%0600d|%s", 7, "end") == 0 && b.len == len + 604 &&
                   strcmp(b.data + b.len - 4, "|end") == 0,
               "printf past the small buffer");
    MCPG_CHECK(mcpg_buf_append_json_string(&b, "q\"\x01", 3) == 0 &&
                   strcmp(b.data + b.len - 11, "\"q\\\"\\u0001\"") == 0,
               "json string: %s", b.data + b.len - 11);
    mcpg_buf_free(&b);
    MCPG_CHECK(!b.data && !b.len && !b.cap, "free empties");
}

/* Sizes no allocation can have are MCPG_ENOMEM, with the buffer untouched.
 * Before the fix: reserve(SIZE_MAX) answered 0 with data still NULL (the
 * caller then wrote through it), reserve(SIZE_MAX / 2 + 2) never returned
 * (the doubling wrapped to 0), and append_json_string of a huge length
 * reserved a few bytes (n * 6 + 2 wrapped) and escaped n bytes into them. */
static void test_impossible_sizes(void) {
    mcpg_buf b = {0};
    MCPG_CHECK(mcpg_buf_reserve(&b, SIZE_MAX) == MCPG_ENOMEM, "reserve(SIZE_MAX) on empty");
    MCPG_CHECK(!b.data && b.cap == 0, "untouched");
    MCPG_CHECK(mcpg_buf_reserve(&b, SIZE_MAX / 2 + 2) == MCPG_ENOMEM, "reserve(SIZE_MAX/2+2)");
    MCPG_CHECK(mcpg_buf_reserve(&b, (size_t)PTRDIFF_MAX) == MCPG_ENOMEM, "reserve(PTRDIFF_MAX)");
    MCPG_REQUIRE(mcpg_buf_append(&b, "abc", 3) == 0, "append");
    size_t cap = b.cap;
    MCPG_CHECK(mcpg_buf_reserve(&b, SIZE_MAX - 2) == MCPG_ENOMEM, "len + extra + 1 wraps to 2");
    MCPG_CHECK(mcpg_buf_append(&b, "x", SIZE_MAX) == MCPG_ENOMEM, "append(SIZE_MAX)");
    MCPG_CHECK(mcpg_buf_append_json_string(&b, "x", SIZE_MAX / 6 + 1) == MCPG_ENOMEM,
               "json string whose n * 6 + 2 wraps");
    MCPG_CHECK(mcpg_buf_append_json_string(&b, "x", SIZE_MAX) == MCPG_ENOMEM,
               "json string of SIZE_MAX");
    MCPG_CHECK(b.len == 3 && b.cap == cap && strcmp(b.data, "abc") == 0, "untouched: %s", b.data);
    mcpg_buf_free(&b);
}

int main(void) {
    alarm(30); /* a growth loop that never ends fails the test, not the suite's timeout */
    test_growth();
    test_impossible_sizes();
    return MCPG_CHECK_EXIT("test_buf");
}
