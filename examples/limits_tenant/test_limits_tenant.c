/* limits_tenant on the SDK's fake host: each tenant's bucket empties on its
 * own, the table stays bounded. With the built .so's path it tests that too. */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <stdio.h>
#include <string.h>

/* acquire for a tools/call by someone of `tenant`; the outcome into out. */
static int acquire(mcpg_fakehost *fh, mcpg_instance *inst, const char *tenant,
                   mcpg_call_outcome *out, char *msg, size_t cap) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", NULL, NULL);
    mcpg_identity id = {.size = sizeof id, .principal = "ann", .tenant = tenant};
    MCPG_REQUIRE(mcpg_fakehost_host(fh)->call_identify(c, &id) == 0, "identify");
    int st = mcpg_fakehost_run(fh, inst, c, 2000);
    mcpg_fakehost_outcome(c, out);
    snprintf(msg, cap, "%s", mcpg_fakehost_error_message(c) ? mcpg_fakehost_error_message(c) : "");
    if (st == MCPG_CONTINUE) mcpg_fakehost_release(fh, inst, c);
    mcpg_fakehost_call_free(fh, c);
    return st;
}

static mcpg_instance *load(mcpg_fakehost *fh, const char *so, const char *cfg) {
    mcpg_instance *inst = NULL;
    const mcpg_module *m = mcpg_module_entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    int rc = so ? mcpg_fakehost_load_file(fh, so, "per_tenant", cfg, &inst)
                : mcpg_fakehost_load(fh, m, "per_tenant", cfg, &inst);
    MCPG_REQUIRE(rc == 0, "load %s: %s", cfg, mcpg_fakehost_report_text(fh));
    return inst;
}

static void test_buckets(mcpg_fakehost *fh, const char *so) {
    mcpg_call_outcome out;
    char msg[256];
    mcpg_instance *inst = load(fh, so, "{\"calls\":2,\"window_s\":3600}");
    MCPG_CHECK(acquire(fh, inst, "acme", &out, msg, sizeof msg) == MCPG_CONTINUE, "1st");
    MCPG_CHECK(acquire(fh, inst, "acme", &out, msg, sizeof msg) == MCPG_CONTINUE, "2nd");
    MCPG_CHECK(acquire(fh, inst, "acme", &out, msg, sizeof msg) == MCPG_DENY, "3rd refused");
    MCPG_CHECK(out.http_status == 429 && out.retry_after_s > 0 && out.retry_after_s <= 1800,
               "429 with Retry-After (1800 s per call): %d %u", out.http_status, out.retry_after_s);
    MCPG_CHECK(strstr(msg, "tenant acme") != NULL, "names the tenant: %s", msg);
    MCPG_CHECK(acquire(fh, inst, "globex", &out, msg, sizeof msg) == MCPG_CONTINUE,
               "another tenant has its own bucket");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void test_full_table(mcpg_fakehost *fh, const char *so, const char *when_full,
                            int third_status) {
    mcpg_call_outcome out;
    char msg[256], cfg[128];
    snprintf(cfg, sizeof cfg,
             "{\"calls\":1,\"window_s\":3600,\"max_tenants\":2,"
             "\"when_full\":\"%s\"}",
             when_full);
    mcpg_instance *inst = load(fh, so, cfg);
    acquire(fh, inst, "a", &out, msg, sizeof msg);
    acquire(fh, inst, "b", &out, msg, sizeof msg);
    MCPG_CHECK(acquire(fh, inst, "c", &out, msg, sizeof msg) == third_status,
               "%s: a 3rd tenant while both entries are busy: %s", when_full, msg);
    if (third_status == MCPG_DENY)
        MCPG_CHECK(strstr(msg, "tenant table full") && out.http_status == 429, "why: %s", msg);
    else
        MCPG_CHECK(acquire(fh, inst, "d", &out, msg, sizeof msg) == MCPG_DENY,
                   "the overflow bucket is shared: %s", msg);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

int main(int argc, char **argv) {
    mcpg_fakehost *fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh != NULL, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    for (int i = 0; i < (argc > 1 ? 2 : 1); i++) {
        const char *so = i ? argv[1] : NULL;
        printf("testing limits_tenant (%s)\n", so ? so : "linked in");
        test_buckets(fh, so);
        test_full_table(fh, so, "refuse", MCPG_DENY);
        test_full_table(fh, so, "share", MCPG_CONTINUE);
    }
    MCPG_CHECK(mcpg_fakehost_free(fh) == 0, "fake host: problems left");
    return MCPG_CHECK_EXIT("test_limits_tenant");
}
