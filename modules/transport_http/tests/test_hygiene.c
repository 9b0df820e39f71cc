/* Unit test: Host and Origin allow-lists (hygiene.c), their defaults on
 * loopback and elsewhere, and the config's parsing. */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>
#include <string.h>

#include "http/hygiene.h"

static const mcpg_host *host;

static int host_ok(const th_names *l, int loopback, const char *v) {
    return th_host_allowed(l, loopback, v, strlen(v));
}
static int origin_ok(const th_names *l, int loopback, const char *v) {
    return th_origin_allowed(l, loopback, v, strlen(v));
}

static void test_defaults(void) {
    th_names none = {0};
    const char *good[] = {"localhost", "localhost:8787", "LOCALHOST:1", "127.0.0.1",
                          "127.0.0.1:9", "[::1]", "[::1]:8787"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        MCPG_CHECK(host_ok(&none, 1, good[i]), "loopback host %s", good[i]);
    const char *bad[] = {"evil.example.com", "evil.example.com:8787", "localhost.evil.com",
                         "127.0.0.2", "localhost:", "localhost:80x", "[::1", "", "0.0.0.0",
                         "127.0.0.1.nip.io"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        MCPG_CHECK(!host_ok(&none, 1, bad[i]), "loopback refuses host %s", bad[i]);
    MCPG_CHECK(host_ok(&none, 0, "evil.example.com"), "not loopback: any host");
    MCPG_CHECK(origin_ok(&none, 1, "http://localhost:5173"), "loopback origin");
    MCPG_CHECK(origin_ok(&none, 1, "https://127.0.0.1"), "loopback origin https");
    MCPG_CHECK(origin_ok(&none, 1, "http://[::1]:3000"), "loopback origin v6");
    MCPG_CHECK(!origin_ok(&none, 1, "http://evil.example.com"), "evil origin");
    MCPG_CHECK(!origin_ok(&none, 1, "null"), "null origin");
    MCPG_CHECK(!origin_ok(&none, 1, "file://localhost"), "file origin");
    MCPG_CHECK(!origin_ok(&none, 1, "http://localhost.evil.com"), "lookalike origin");
    /* beyond loopback, unset: every Origin is refused (a safe default) */
    MCPG_CHECK(!origin_ok(&none, 0, "http://evil.example.com"), "not loopback, unset: refused");
    MCPG_CHECK(!origin_ok(&none, 0, "http://localhost:5173"), "not loopback, unset: even a loopback name");
}

static void test_configured(void) {
    th_names l;
    MCPG_REQUIRE(th_names_parse(host, "[\"MCP.example.com\",\"api.example.com:8443\"]", &l) == 0,
                 "parse");
    MCPG_CHECK(host_ok(&l, 1, "mcp.example.com:1234"), "name, any port");
    MCPG_CHECK(host_ok(&l, 0, "api.example.com:8443"), "name:port");
    MCPG_CHECK(!host_ok(&l, 0, "api.example.com:8444"), "another port");
    MCPG_CHECK(!host_ok(&l, 1, "localhost"), "configured replaces the default");
    th_names_free(host, &l);
    MCPG_REQUIRE(th_names_parse(host, "[\"https://app.example.com\"]", &l) == 0, "parse origins");
    MCPG_CHECK(origin_ok(&l, 1, "https://APP.example.com"), "origin ci");
    MCPG_CHECK(!origin_ok(&l, 1, "http://app.example.com"), "scheme matters");
    MCPG_CHECK(!origin_ok(&l, 1, "http://localhost"), "configured replaces the default");
    th_names_free(host, &l);
    MCPG_REQUIRE(th_names_parse(host, "[\"*\"]", &l) == 0 && l.any, "star");
    MCPG_CHECK(host_ok(&l, 1, "evil.example.com") && origin_ok(&l, 1, "null"), "star allows all");
    th_names_free(host, &l);
    MCPG_REQUIRE(th_names_parse(host, "[]", &l) == 0 && l.set && !l.n, "empty list");
    MCPG_CHECK(!host_ok(&l, 0, "anything"), "an empty list allows nothing");
    th_names_free(host, &l);
    const char *bad[] = {"{}", "\"x\"", "[1]", "[\"\"]", "[\"a b\"]", "[\"a\",null]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        MCPG_CHECK(th_names_parse(host, bad[i], &l) == MCPG_EINVAL && !l.n, "refused: %s", bad[i]);
}

int main(void) {
    mcpg_fakehost *fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    host = mcpg_fakehost_host(fh);
    test_defaults();
    test_configured();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_hygiene");
}
