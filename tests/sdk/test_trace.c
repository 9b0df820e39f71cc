/* Unit tests of the W3C Trace Context checks (sdk/src/trace.c): which
 * traceparent values the gateway records and passes on. */
#include <mcpg/check.h>
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>

static int valid(const char *s) { return mcpg_traceparent_valid(s, strlen(s)); }

static void test_traceparent(void) {
    static const char *const good[] = {
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",            /* a later version */
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes", /* ... with more */
    };
    static const char *const bad[] = {
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",    /* short */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", /* 00 with more */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   /* version ff */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   /* zero trace-id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   /* zero parent-id */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   /* upper case */
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   /* separator */
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",   /* not hex */
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  /* later version, no dash */
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        MCPG_CHECK(valid(good[i]), "valid: %s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        MCPG_CHECK(!valid(bad[i]), "invalid: %s", bad[i]);
    MCPG_CHECK(!mcpg_traceparent_valid(NULL, 0), "NULL");
    /* the length given, not the NUL, bounds it */
    MCPG_CHECK(!mcpg_traceparent_valid(good[0], 54), "cut one short");
}

static void test_tracestate(void) {
    MCPG_CHECK(mcpg_tracestate_valid("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", 39), "two members");
    MCPG_CHECK(!mcpg_tracestate_valid("a=b\r\nX-Injected: 1", 18), "a line break");
    MCPG_CHECK(!mcpg_tracestate_valid("", 0), "empty");
    char big[600];
    memset(big, 'a', sizeof big);
    MCPG_CHECK(!mcpg_tracestate_valid(big, sizeof big), "over 512 bytes");
}

int main(void) {
    test_traceparent();
    test_tracestate();
    if (mcpg_check_failures()) {
        fprintf(stderr, "test_trace: %d check(s) failed\n", mcpg_check_failures());
        return 1;
    }
    printf("test_trace: ok\n");
    return 0;
}
