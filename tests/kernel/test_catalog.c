/* Kernel unit test: the merged lists rebuilt while a backend's lists change
 * (fixture fx_dyn beside backend_mock). A name the static backend serves
 * stays its own when the dynamic one later lists it too, and what a rebuild
 * leaves out (that name, an invalid name, an invalid x-mcp-header tool) is
 * warned about once, not again at every rebuild that still leaves it out. */
#include "probe.h"

#include <fcntl.h>
#include <mcpg/check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/mcpg-catalog-XXXXXX";
static char log_path[600];

/* The kernel's log lines (stderr) go to log_path until log_restore. */
static int saved_stderr = -1;

static void log_capture(void) {
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    MCPG_REQUIRE(fd >= 0, "open %s", log_path);
    saved_stderr = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

static void log_restore(void) {
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
}

static void expect_echo_from_mock(const char *when) {
    probe p;
    probe_run(&p, "tools/call", "echo", "{\"message\":\"hi\"}", "1", NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, "Echo: hi"), "%s: echo reached %s", when, p.text);
}

static void rebuilds(void) {
    expect_echo_from_mock("first lists");
    probe p;
    probe_run(&p, "tools/call", "dyn_flip", "{}", "2", NULL); /* its second list, from now on */
    MCPG_REQUIRE(!p.is_error, "flip: %s", p.text);
    log_capture();
    for (int i = 0; i < 3; i++) catalog_rebuild(kernel.gen);
    log_restore();
    expect_echo_from_mock("after three rebuilds with dyn listing echo too");
    probe_run(&p, "tools/list", NULL, NULL, "3", NULL);
    MCPG_CHECK(strstr(p.text, "\"dyn_two\"") && !strstr(p.text, "dyn_bad_header") &&
                   !strstr(p.text, "not valid!"),
               "the second list, less what is left out: %s", p.text);
    int twice = count_lines(log_path, "offered twice", "echo");
    int invalid = count_lines(log_path, "not valid!", "left out");
    int header = count_lines(log_path, "dyn_bad_header", "x-mcp-header");
    MCPG_CHECK(twice == 1 && invalid == 1 && header == 1,
               "each left-out item warned once over three rebuilds: echo %d, the invalid "
               "name %d, the invalid x-mcp-header %d", twice, invalid, header);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_catalog MODULES_DIR\n");
        return 2;
    }
    if (!mkdtemp(dir)) return 2;
    snprintf(log_path, sizeof log_path, "%s/log.txt", dir);
    char text[1024];
    snprintf(text, sizeof text,
             "{\"gateway\":{\"workers\":1,\"module_dir\":\"%s\",\"log_level\":\"warn\","
             "\"server\":{\"access_log\":false}},"
             "\"modules\":[{\"name\":\"mock\",\"module\":\"backend_mock\"},"
             "{\"name\":\"dyn\",\"module\":\"fx_dyn\"}]}",
             argv[1]);
    MCPG_REQUIRE(kernel_up(dir, "catalog.json", text, argv[1]), "kernel");
    rebuilds();
    kernel_down();
    remove_test_dir(dir);
    return MCPG_CHECK_EXIT("test_catalog");
}
