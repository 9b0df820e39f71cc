/* audit_syslog on the SDK's fake host, against a syslog socket of the test's
 * own: the line's priority, ident, pid and JSON; a daemon that is not there
 * loses the event without failing the call. With the built .so's path it
 * tests that file too. */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

/* A datagram socket bound at path, like a syslog daemon's /dev/log. */
static int bind_log(const char *path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    MCPG_REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind %s", path);
    return fd;
}

/* One audit event made from a tools/call; the emit's status. */
static int emit(mcpg_fakehost *fh, mcpg_instance *inst) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", NULL, NULL);
    int st = mcpg_fakehost_run(fh, inst, c, 2000);
    mcpg_fakehost_call_free(fh, c);
    return st;
}

static void test_sink(mcpg_fakehost *fh, const char *so, const char *dir) {
    char path[512], cfg[700], line[2048], want[64];
    snprintf(path, sizeof path, "%s/log", dir);
    int fd = bind_log(path);
    snprintf(cfg, sizeof cfg, "{\"socket\":\"%s\",\"facility\":\"local3\",\"ident\":\"t-au\"}",
             path);
    mcpg_instance *inst = NULL;
    const mcpg_module *m = mcpg_module_entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    int rc = so ? mcpg_fakehost_load_file(fh, so, "syslog", cfg, &inst)
                : mcpg_fakehost_load(fh, m, "syslog", cfg, &inst);
    MCPG_REQUIRE(rc == 0, "load: %s", mcpg_fakehost_report_text(fh));

    MCPG_CHECK(emit(fh, inst) == MCPG_CONTINUE, "emit");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    MCPG_REQUIRE(poll(&p, 1, 5000) == 1, "no syslog datagram within 5 s");
    ssize_t n = recv(fd, line, sizeof line - 1, 0);
    line[n > 0 ? n : 0] = '\0';
    snprintf(want, sizeof want, "<%d>", LOG_LOCAL3 | LOG_INFO);
    MCPG_CHECK(strncmp(line, want, strlen(want)) == 0, "priority %s: %s", want, line);
    snprintf(want, sizeof want, " t-au[%d]: {", (int)getpid());
    MCPG_CHECK(strstr(line, want) != NULL, "ident[pid]: %s", line);
    MCPG_CHECK(strstr(line, "\"event\":\"mcpg.tool.call.completed\"") &&
                   strstr(line, "\"tool\":\"echo\""),
               "the event as JSON: %s", line);

    /* The daemon goes away: the call goes on, the loss is logged. */
    close(fd);
    unlink(path);
    MCPG_CHECK(emit(fh, inst) == MCPG_CONTINUE, "not durable: no daemon is no failure");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "1 events lost so far"), "logged: %s",
               mcpg_fakehost_log_text(fh));
    mcpg_fakehost_log_clear(fh);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

int main(int argc, char **argv) {
    char dir[] = "/tmp/test_audit_syslog.XXXXXX";
    MCPG_REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    mcpg_fakehost *fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh != NULL, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    const mcpg_module *m = mcpg_module_entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    MCPG_CHECK(mcpg_fakehost_check(fh, m, "{\"socket\":\"dev/log\"}") == MCPG_ECONFIG &&
                   strstr(mcpg_fakehost_report_text(fh), "socket: must be an absolute path"),
               "a relative socket: %s", mcpg_fakehost_report_text(fh));
    MCPG_CHECK(mcpg_fakehost_check(fh, m, "{\"facility\":\"kern\"}") == MCPG_ECONFIG, "facility");
    printf("testing audit_syslog (linked in)\n");
    test_sink(fh, NULL, dir);
    if (argc > 1) {
        printf("testing audit_syslog (%s)\n", argv[1]);
        test_sink(fh, argv[1], dir);
    }
    rmdir(dir);
    MCPG_CHECK(mcpg_fakehost_free(fh) == 0, "fake host: problems left");
    return MCPG_CHECK_EXIT("test_audit_syslog");
}
