/* backend_zlib on the SDK's fake host: its tools against zlib's known
 * answers. With the built .so's path it tests that file too. */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <stdio.h>
#include <string.h>

/* One tools/call; the result (or error message) into out. */
static int call(mcpg_fakehost *fh, mcpg_instance *inst, const char *tool, const char *args,
                char *out, size_t cap) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", tool, args, "1");
    int st = mcpg_fakehost_run(fh, inst, c, 2000);
    const char *r = mcpg_fakehost_result(c), *e = mcpg_fakehost_error_message(c);
    snprintf(out, cap, "%s", r ? r : e ? e : "");
    mcpg_fakehost_call_free(fh, c);
    return st;
}

#define TEXT(s) "{\"content\":[{\"type\":\"text\",\"text\":\"" s "\"}]}"

static void test_tools(mcpg_fakehost *fh, mcpg_instance *inst) {
    char out[512], big[2100];
    /* CRC-32 check values: the standard's "123456789" and Python's zlib.crc32. */
    MCPG_CHECK(call(fh, inst, "crc32", "{\"text\":\"123456789\"}", out, sizeof out) ==
                       MCPG_CONTINUE &&
                   !strcmp(out, TEXT("3421780262")),
               "crc32 check value: %s", out);
    MCPG_CHECK(call(fh, inst, "crc32", "{\"text\":\"\\u00e9\"}", out, sizeof out) ==
                       MCPG_CONTINUE &&
                   !strcmp(out, TEXT("235179326")),
               "the UTF-8 bytes of an escaped character: %s", out);
    snprintf(big, sizeof big, "{\"text\":\"%01000d\"}", 0); /* 1000 zeros */
    MCPG_CHECK(call(fh, inst, "compress_ratio", big, out, sizeof out) == MCPG_CONTINUE &&
                   strstr(out, "1000 -> "),
               "ratio: %s", out);
    MCPG_CHECK(call(fh, inst, "crc32", "{\"text\":7}", out, sizeof out) == MCPG_DENY &&
                   !strcmp(out, "\"text\" must be a string"),
               "not a string: %s", out);
    snprintf(big, sizeof big, "{\"text\":\"%02000d\"}", 0);
    MCPG_CHECK(call(fh, inst, "crc32", big, out, sizeof out) == MCPG_DENY &&
                   strstr(out, "max_bytes"),
               "over max_bytes: %s", out);
    MCPG_CHECK(call(fh, inst, "gzip", "{}", out, sizeof out) == MCPG_DENY, "unknown tool");
}

int main(int argc, char **argv) {
    mcpg_fakehost *fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh != NULL, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    const mcpg_module *m = mcpg_module_entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    MCPG_CHECK(mcpg_fakehost_check(fh, m, "{\"level\":10}") == MCPG_ECONFIG, "level bounds");
    const char *cfg = "{\"max_bytes\":1024}";
    for (int i = 0; i < (argc > 1 ? 2 : 1); i++) {
        mcpg_instance *inst = NULL;
        int rc = i ? mcpg_fakehost_load_file(fh, argv[1], "zlib", cfg, &inst)
                   : mcpg_fakehost_load(fh, m, "zlib", cfg, &inst);
        MCPG_REQUIRE(rc == 0, "load: %s", mcpg_fakehost_report_text(fh));
        printf("testing backend_zlib (%s)\n", i ? argv[1] : "linked in");
        test_tools(fh, inst);
        MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    }
    MCPG_CHECK(mcpg_fakehost_free(fh) == 0, "fake host: problems left");
    return MCPG_CHECK_EXIT("test_backend_zlib");
}
