/* Unit test of backend_template through the SDK's fake host: no kernel, no
 * network, one process. Copy it along with the module.
 *
 * Run with no argument it tests the module compiled into this program; with
 * the path of the built backend_template.so it tests that file too, loaded
 * the way the kernel loads it (dlopen, the one exported entry symbol). */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <stdio.h>
#include <string.h>

/* One tools/call; returns the final status and leaves the result in out. */
static int greet(mcpg_fakehost *fh, mcpg_instance *inst, const char *args, char *out,
                 size_t cap) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "greet", args, "1");
    int st = mcpg_fakehost_run(fh, inst, c, 2000);
    const char *r = mcpg_fakehost_result(c);
    const char *e = mcpg_fakehost_error_message(c);
    snprintf(out, cap, "%s", r ? r : e ? e : "");
    mcpg_fakehost_call_free(fh, c);
    return st;
}

static void test_config(mcpg_fakehost *fh, const mcpg_module *m) {
    MCPG_CHECK(mcpg_fakehost_check(fh, m, NULL) == 0, "defaults are valid");
    MCPG_CHECK(mcpg_fakehost_check(fh, m, "{\"greetng\":\"Hi\"}") == MCPG_ECONFIG, "typo refused");
    MCPG_CHECK(strstr(mcpg_fakehost_report_text(fh), "did you mean \"greeting\""), "hint: %s",
               mcpg_fakehost_report_text(fh));
    MCPG_CHECK(mcpg_fakehost_check(fh, m, "{\"greeting\":\"\"}") == MCPG_ECONFIG, "empty greeting");
    MCPG_CHECK(strstr(mcpg_fakehost_report_text(fh), "greeting: must not be empty"), "validate: %s",
               mcpg_fakehost_report_text(fh));
    MCPG_CHECK(mcpg_fakehost_check(fh, m, "{\"style\":\"loud\"}") == MCPG_ECONFIG, "enum");
    MCPG_CHECK(mcpg_fakehost_check(fh, m, "{\"max_name\":0}") == MCPG_ECONFIG, "bounds");
}

static void test_tools(mcpg_fakehost *fh, mcpg_instance *inst) {
    char out[512];
    mcpg_buf list = {0};
    MCPG_CHECK(mcpg_fakehost_list(fh, inst, MCPG_METHOD_TOOLS_LIST, &list) == 0 &&
                   strstr(list.data, "\"name\":\"greet\""), "tools/list");
    mcpg_buf_free(&list);

    MCPG_CHECK(greet(fh, inst, "{\"name\":\"Ann\"}", out, sizeof out) == MCPG_CONTINUE, "greet");
    MCPG_CHECK(!strcmp(out, "{\"content\":[{\"type\":\"text\",\"text\":\"Hey, Ann!\"}]}"), "got %s",
               out);
    const char *quoted = "{\"name\":\"\\\"q\\\" \\u00e9\"}";
    MCPG_CHECK(greet(fh, inst, quoted, out, sizeof out) == MCPG_CONTINUE &&
                   strstr(out, "\"Hey, \\\"q\\\" \xc3\xa9!\""), "escapes survive: %s", out);
    MCPG_CHECK(greet(fh, inst, "{}", out, sizeof out) == MCPG_DENY &&
                   !strcmp(out, "\"name\" must be a string"), "missing name: %s", out);
    MCPG_CHECK(greet(fh, inst, "{\"name\":\"abcdefghi\"}", out, sizeof out) == MCPG_DENY &&
                   !strcmp(out, "\"name\" is too long"), "max_name: %s", out);

    /* Inline, as with "inline_dispatch": true (the module says it is safe). */
    MCPG_CHECK(mcpg_fakehost_set_inline(inst, 1) == 0, "inline-safe");
    MCPG_CHECK(greet(fh, inst, "{\"name\":\"Bo\"}", out, sizeof out) == MCPG_CONTINUE, "inline");

    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "nope", NULL, NULL);
    MCPG_CHECK(mcpg_fakehost_run(fh, inst, c, 2000) == MCPG_DENY &&
                   mcpg_fakehost_error_code(c) == MCPG_RPC_INVALID_PARAMS, "unknown tool");
    mcpg_fakehost_call_free(fh, c);
}

static void test_module(mcpg_fakehost *fh, const mcpg_module *m, const char *how) {
    mcpg_instance *inst = NULL;
    printf("testing backend_template (%s)\n", how);
    test_config(fh, m);
    const char *cfg = "{\"greeting\":\"Hey\",\"style\":\"excited\",\"max_name\":8}";
    MCPG_CHECK(mcpg_fakehost_load(fh, m, "tmpl", cfg, &inst) == 0, "load: %s",
               mcpg_fakehost_report_text(fh));
    if (!inst) return;
    test_tools(fh, inst);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

int main(int argc, char **argv) {
    mcpg_fakehost *fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh != NULL, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    /* template.c is compiled into this program too: its entry is callable. */
    test_module(fh, mcpg_module_entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR), "linked in");
    if (argc > 1) {
        mcpg_instance *inst = NULL;
        MCPG_CHECK(mcpg_fakehost_load_file(fh, argv[1], "from_file", "{\"greeting\":\"Hey\","
                                           "\"style\":\"excited\",\"max_name\":8}", &inst) == 0,
                   "load %s", argv[1]);
        if (inst) {
            printf("testing backend_template (%s)\n", argv[1]);
            test_tools(fh, inst);
            MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
        }
    }
    /* Nothing leaked, no module bug seen, the loop closed cleanly. */
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_template");
}
