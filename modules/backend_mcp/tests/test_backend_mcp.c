/* backend_mcp through the SDK's fake host: its config checks, and a call
 * proxied to a small MCP server on stdio.
 * Usage: test_backend_mcp path/to/backend_mcp.so path/to/stdio_echo.py */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *so_path, *echo_py;
static mcpg_fakehost *fh;

/* A config the module must refuse at load, naming `key` in its report. */
static void expect_refused(const char *config, const char *key, const char *why) {
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, so_path, "bad", config, &inst);
    const char *report = mcpg_fakehost_report_text(fh);
    MCPG_CHECK(rc == MCPG_ECONFIG && !inst, "%s: refused (%d)", why, rc);
    MCPG_CHECK(strncmp(report, key, strlen(key)) == 0 && report[strlen(key)] == ':',
               "%s: the report names %s: %s", why, key, report);
}

static void test_config_checks(void) {
    expect_refused("{}", "url", "neither url nor command");
    expect_refused("{\"url\":\"http://127.0.0.1:1/mcp\",\"command\":\"/bin/sh\"}", "command",
                   "url and command together");
    expect_refused("{\"command\":\"/nonexistent/mcp-server\"}", "command",
                   "a command that is not executable");
    expect_refused("{\"command\":\"/bin/sh\",\"args\":[\"-c\",1]}", "args[1]",
                   "an argument that is not a string");
    expect_refused("{\"command\":\"/bin/sh\",\"restart_min_ms\":1000,\"restart_max_ms\":500}",
                   "restart_max_ms", "restart_max_ms below restart_min_ms");
    expect_refused("{\"command_line\":\"python3 'server.py\"}", "command_line",
                   "a quote never closed");
    expect_refused("{\"command_line\":\"server --stdio | tee log\"}", "command_line",
                   "a pipe, which no shell would run");
    expect_refused("{\"command_line\":\"   \"}", "command_line", "a command line of blanks");
    expect_refused("{\"command_line\":\"/nonexistent/mcp-server --stdio\"}", "command_line",
                   "a command line whose program is not executable");
    expect_refused("{\"command_line\":\"/bin/sh -c true\",\"command\":\"/bin/sh\"}",
                   "command_line", "command_line and command together");
    expect_refused("{\"command_line\":\"/bin/sh -c true\",\"args\":[\"x\"]}", "args",
                   "command_line and args together");
}

typedef struct list_wait {
    mcpg_instance *inst;
    mcpg_buf tools;
} list_wait;

static int tools_listed(void *arg) {
    list_wait *w = arg;
    w->tools.len = 0;
    return mcpg_fakehost_list(fh, w->inst, MCPG_METHOD_TOOLS_LIST, &w->tools) == 0;
}

/* The upstream is started through a shell that waits a second first, so the
 * lists are surely not there when the instance is loaded. */
static mcpg_instance *load_slow_echo(void) {
    char config[1024];
    snprintf(config, sizeof config,
             "{\"command\":\"/bin/sh\",\"args\":[\"-c\",\"sleep 1; exec python3 \\\"$0\\\"\","
             "\"%s\"]}", echo_py);
    return mcpg_fakehost_load_file_or_exit(fh, so_path, "echo", config);
}

static void test_lists_wait_for_upstream(mcpg_instance *inst) {
    list_wait w = {inst, {0}};
    int early = mcpg_fakehost_list(fh, inst, MCPG_METHOD_TOOLS_LIST, &w.tools);
    MCPG_CHECK(early == MCPG_EAGAIN, "tools/list before the upstream answered: EAGAIN (%d)", early);
    MCPG_REQUIRE(mcpg_fakehost_run_until(fh, tools_listed, &w, 20000) == 0,
                 "the upstream's tools listed in time:\n%s", mcpg_fakehost_log_text(fh));
    MCPG_CHECK(strstr(w.tools.data, "\"name\":\"echo\"") != NULL, "tools: %s", w.tools.data);
    mcpg_buf_free(&w.tools);
}

static void test_call_proxied(mcpg_instance *inst) {
    int64_t code;
    char msg[256];
    char *result = mcpg_fakehost_call_tool(fh, inst, "echo", "{\"message\":\"hi there\"}", 10000,
                                           &code, msg, sizeof msg);
    char *text = result ? mcpg_fakehost_result_text(result, NULL) : NULL;
    MCPG_CHECK(text && strcmp(text, "hi there") == 0, "echo answered: %s",
               text ? text : msg);
    free(text);
    free(result);
    /* the upstream's own refusal comes back as the call's error */
    result = mcpg_fakehost_call_tool(fh, inst, "nosuch", "{}", 10000, &code, msg, sizeof msg);
    MCPG_CHECK(!result && code == MCPG_RPC_INVALID_PARAMS && strstr(msg, "unknown tool"),
               "unknown tool: %lld %s", (long long)code, msg);
    free(result);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 3, "usage: test_backend_mcp backend_mcp.so stdio_echo.py");
    so_path = argv[1];
    echo_py = argv[2];
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, getenv("MCPG_TEST_VERBOSE") == NULL);

    test_config_checks();
    mcpg_instance *inst = load_slow_echo();
    test_lists_wait_for_upstream(inst);
    test_call_proxied(inst);

    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_backend_mcp");
}
