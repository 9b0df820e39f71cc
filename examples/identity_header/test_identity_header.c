/* identity_header on the SDK's fake host: headers in, identity or 401 out.
 * With the path of the built .so as argument it tests that file too. */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <stdio.h>
#include <string.h>

/* One authenticate with the headers given as name/value pairs (NULL ends). */
static mcpg_call *authenticate(mcpg_fakehost *fh, mcpg_instance *inst, int *st,
                               const char *const *headers) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", NULL, NULL);
    for (int i = 0; headers[i]; i += 2)
        mcpg_fakehost_call_set_header(c, headers[i], headers[i + 1]);
    *st = mcpg_fakehost_run(fh, inst, c, 2000);
    return c;
}

static void test_identity(mcpg_fakehost *fh, mcpg_instance *inst) {
    const mcpg_host *host = mcpg_fakehost_host(fh);
    int st;
    const char *full[] = {"x-user", "ann", "x-tenant", "acme", "x-role", "reader", NULL};
    mcpg_call *c = authenticate(fh, inst, &st, full);
    size_t n = 0;
    const char *claims = host->call_claims(c, &n);
    MCPG_CHECK(st == MCPG_CONTINUE, "identified: %d", st);
    MCPG_CHECK(!strcmp(host->call_principal(c), "ann"), "principal");
    MCPG_CHECK(!strcmp(host->call_tenant(c), "acme"), "tenant");
    MCPG_CHECK(host->call_has_role(c, "reader") == 1, "role");
    MCPG_CHECK(claims && !strcmp(claims, "{\"role\":\"reader\"}"), "claims %s", claims);
    mcpg_fakehost_call_free(fh, c);

    const char *none[] = {"x-tenant", "acme", NULL};
    c = authenticate(fh, inst, &st, none);
    mcpg_call_outcome out;
    mcpg_fakehost_outcome(c, &out);
    MCPG_CHECK(st == MCPG_DENY && out.http_status == 401, "no user: %d %d", st, out.http_status);
    MCPG_CHECK(mcpg_fakehost_error_code(c) == MCPG_RPC_UNAUTHENTICATED, "code -32001");
    MCPG_CHECK(out.www_authenticate &&
                   !strcmp(out.www_authenticate, "Trusted-Proxy realm=\"tests\""),
               "challenge %s", out.www_authenticate);
    mcpg_fakehost_call_free(fh, c);

    /* A quote or backslash would break the claims' JSON: refused, not escaped. */
    const char *forged[][2] = {{"x-tenant", "ac\"me"}, {"x-role", "a\\b"}};
    for (int i = 0; i < 2; i++) {
        const char *hdrs[] = {"x-user", "ann", forged[i][0], forged[i][1], NULL};
        c = authenticate(fh, inst, &st, hdrs);
        MCPG_CHECK(st == MCPG_DENY && strstr(mcpg_fakehost_error_message(c), "malformed"),
                   "%s: %s is refused", forged[i][0], forged[i][1]);
        mcpg_fakehost_call_free(fh, c);
    }
}

static void test_module(mcpg_fakehost *fh, const mcpg_module *m, const char *so) {
    mcpg_instance *inst = NULL;
    const char *cfg = "{\"realm\":\"tests\"}";
    MCPG_CHECK(mcpg_fakehost_check(fh, m, "{\"user_header\":\"\"}") == MCPG_ECONFIG,
               "an empty header name is refused");
    MCPG_CHECK(strstr(mcpg_fakehost_report_text(fh), "user_header"), "named: %s",
               mcpg_fakehost_report_text(fh));
    int rc = so ? mcpg_fakehost_load_file(fh, so, "hdr", cfg, &inst)
                : mcpg_fakehost_load(fh, m, "hdr", cfg, &inst);
    MCPG_REQUIRE(rc == 0, "load: %s", mcpg_fakehost_report_text(fh));
    printf("testing identity_header (%s)\n", so ? so : "linked in");
    test_identity(fh, inst);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

int main(int argc, char **argv) {
    mcpg_fakehost *fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh != NULL, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    const mcpg_module *m = mcpg_module_entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    test_module(fh, m, NULL);
    if (argc > 1) test_module(fh, m, argv[1]);
    MCPG_CHECK(mcpg_fakehost_free(fh) == 0, "fake host: problems left");
    return MCPG_CHECK_EXIT("test_identity_header");
}
