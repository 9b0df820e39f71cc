/* policy_claim on the SDK's fake host: the caller's claim decides which tools
 * it may call and see. With the built .so's path it tests that file too. */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char config[] =
    "{\"claim\":\"role\",\"allow\":{\"reader\":[\"get_\",\"list_\"],\"admin\":[\"\"]}}";

/* check() for a tools/call of `tool` by a caller with these claims (NULL:
 * anonymous). Returns the status; *code the error code, 0 when allowed. */
static int check_tool(mcpg_fakehost *fh, mcpg_instance *inst, const char *claims, const char *tool,
                      int64_t *code, int *http) {
    const mcpg_host *host = mcpg_fakehost_host(fh);
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", tool, NULL, NULL);
    if (claims) { /* as the identity stage would have set it */
        mcpg_identity id = {.size = sizeof id,
                            .principal = "ann",
                            .claims_json = claims,
                            .claims_len = strlen(claims)};
        MCPG_REQUIRE(host->call_identify(c, &id) == 0, "identify");
    }
    int st = mcpg_fakehost_run(fh, inst, c, 2000);
    mcpg_call_outcome out;
    mcpg_fakehost_outcome(c, &out);
    *code = mcpg_fakehost_error_code(c);
    *http = out.http_status;
    mcpg_fakehost_call_free(fh, c);
    return st;
}

/* The policy's visible op (of m, the instance's module), as the kernel asks it
 * while filtering tools/list. */
static int visible(mcpg_fakehost *fh, const mcpg_module *m, mcpg_instance *inst, const char *claims,
                   const char *tool) {
    const mcpg_host *host = mcpg_fakehost_host(fh);
    const mcpg_policy_ops *ops = m->ops;
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/list", NULL, NULL, NULL);
    mcpg_identity id = {
        .size = sizeof id, .principal = "ann", .claims_json = claims, .claims_len = strlen(claims)};
    host->call_identify(c, &id);
    mcpg_fakehost_op_begin(fh, inst, c);
    int v = ops->visible(mcpg_fakehost_state(inst), mcpg_fakehost_op_call(inst, c), "tool", tool);
    mcpg_fakehost_op_end(fh, c, MCPG_CONTINUE);
    mcpg_fakehost_call_free(fh, c);
    return v;
}

static void test_policy(mcpg_fakehost *fh, const mcpg_module *m, mcpg_instance *inst) {
    int64_t code;
    int http;
    const char *reader = "{\"role\":\"reader\"}", *admin = "{\"role\":\"admin\"}";
    MCPG_CHECK(check_tool(fh, inst, reader, "get_user", &code, &http) == MCPG_CONTINUE,
               "reader may get_");
    MCPG_CHECK(check_tool(fh, inst, reader, "delete_user", &code, &http) == MCPG_DENY &&
                   code == -32003 && http == 403,
               "reader may not delete_: %lld %d", (long long)code, http);
    MCPG_CHECK(check_tool(fh, inst, admin, "delete_user", &code, &http) == MCPG_CONTINUE,
               "\"\" allows every tool");
    MCPG_CHECK(check_tool(fh, inst, "{\"role\":\"guest\"}", "get_user", &code, &http) == MCPG_DENY,
               "a value the table does not name");
    MCPG_CHECK(check_tool(fh, inst, NULL, "get_user", &code, &http) == MCPG_DENY,
               "anonymous: no claim");
    MCPG_CHECK(visible(fh, m, inst, reader, "list_users") == 1, "listed");
    MCPG_CHECK(visible(fh, m, inst, reader, "drop_table") == 0, "hidden");
}

int main(int argc, char **argv) {
    mcpg_fakehost *fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh != NULL, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    const mcpg_module *m = mcpg_module_entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    MCPG_CHECK(mcpg_fakehost_check(fh, m, "{\"allow\":{\"reader\":\"get_\"}}") == MCPG_ECONFIG &&
                   strstr(mcpg_fakehost_report_text(fh), "allow.reader: must be an array"),
               "a prefix list that is not an array: %s", mcpg_fakehost_report_text(fh));
    for (int i = 0; i < (argc > 1 ? 2 : 1); i++) {
        mcpg_instance *inst = NULL;
        int rc = i ? mcpg_fakehost_load_file(fh, argv[1], "claims", config, &inst)
                   : mcpg_fakehost_load(fh, m, "claims", config, &inst);
        MCPG_REQUIRE(rc == 0, "load: %s", mcpg_fakehost_report_text(fh));
        printf("testing policy_claim (%s)\n", i ? argv[1] : "linked in");
        /* The file's own descriptor: dlopen gives the handle the fake host opened. */
        void *so = i ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
        mcpg_module_entry_fn entry = so ? (mcpg_module_entry_fn)dlsym(so, MCPG_ENTRY_SYMBOL) : NULL;
        MCPG_REQUIRE(!i || entry, "dlopen %s: %s", argv[1], dlerror());
        test_policy(fh, entry ? entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR) : m, inst);
        if (so) dlclose(so);
        MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    }
    MCPG_CHECK(mcpg_fakehost_free(fh) == 0, "fake host: problems left");
    return MCPG_CHECK_EXIT("test_policy_claim");
}
