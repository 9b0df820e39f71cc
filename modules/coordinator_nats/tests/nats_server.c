/* Real nats-server processes for tests (see nats_server.h). */
#define _GNU_SOURCE
#include "nats_server.h"

#include <mcpg/fakehost.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *binary(void) {
    const char *b = getenv("NATS_SERVER");
    return b && *b ? b : "/usr/sbin/nats-server";
}

int nats_server_available(void) { return access(binary(), X_OK); }

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &len)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

int nats_http_get(int port, const char *path, char *out, size_t cap) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0) return -1;
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(fd, out + got, cap - 1 - got)) > 0) got += (size_t)r;
    close(fd);
    out[got] = '\0';
    char *body = strstr(out, "\r\n\r\n");
    if (!body || strncmp(out, "HTTP/1.", 7) || strncmp(out + 9, "200", 3)) return -1;
    memmove(out, body + 4, strlen(body + 4) + 1);
    return 0;
}

static int wait_healthy(nats_node *n, int timeout_ms) {
    char buf[4096];
    for (int t = 0; t < timeout_ms; t += 20) {
        if (nats_http_get(n->http_port, "/healthz", buf, sizeof buf) == 0 && strstr(buf, "ok"))
            return 0;
        int st;
        if (waitpid(n->pid, &st, WNOHANG) == n->pid) {
            n->pid = 0;
            return -1;
        }
        mcpg_fakehost_sleep_ms(20);
    }
    return -1;
}

/* Every node this process started, so a test that gives up early still
 * stops them (by pid) at exit. */
static pid_t started[16];

static void stop_started(void) {
    for (int i = 0; i < 16; i++)
        if (started[i] > 0) kill(started[i], SIGKILL), waitpid(started[i], NULL, 0);
}

static void remember(pid_t pid) {
    static int hooked;
    if (!hooked) hooked = atexit(stop_started) == 0;
    for (int i = 0; i < 16; i++)
        if (started[i] <= 0 || waitpid(started[i], NULL, WNOHANG) == started[i]) {
            started[i] = pid;
            return;
        }
}

static void forget(pid_t pid) {
    for (int i = 0; i < 16; i++)
        if (started[i] == pid) started[i] = 0;
}

static pid_t spawn(const char *conf, const char *log) {
    pid_t pid = fork();
    if (pid == 0) {
        /* the log, not the test's own stdout/stderr (a pipe it may hold open);
         * dup2, not freopen: that would flush the parent's buffered output */
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
        execl(binary(), binary(), "-c", conf, (char *)NULL);
        _exit(127);
    }
    if (pid > 0) remember(pid);
    return pid;
}

static int write_conf(nats_node *n, const char *name, const char *cluster) {
    char path[600];
    snprintf(path, sizeof path, "%s/nats.conf", n->dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\n"
               "jetstream { store_dir: \"%s/store\", max_mem: 64M, max_file: 1G }\n%s",
            name, n->port, n->http_port, n->dir, cluster ? cluster : "");
    return fclose(f);
}

static int launch(nats_node *n) {
    char conf[600], log[600];
    snprintf(conf, sizeof conf, "%s/nats.conf", n->dir);
    snprintf(log, sizeof log, "%s/log", n->dir);
    n->pid = spawn(conf, log);
    return n->pid > 0 ? 0 : -1;
}

static int start_with(nats_node *n, const char *base, const char *name, int port,
                      const char *extra) {
    memset(n, 0, sizeof *n);
    snprintf(n->dir, sizeof n->dir, "%s/%s", base, name);
    mkdir(n->dir, 0700);
    n->port = port ? port : free_port();
    n->http_port = free_port();
    snprintf(n->url, sizeof n->url, "nats://127.0.0.1:%d", n->port);
    if (n->port < 0 || n->http_port < 0 || write_conf(n, name, extra) || launch(n)) return -1;
    return wait_healthy(n, 10000);
}

int nats_node_start(nats_node *n, const char *base, const char *name, int port) {
    return start_with(n, base, name, port, NULL);
}

int nats_node_start_token(nats_node *n, const char *base, const char *name, const char *token) {
    char auth[256];
    snprintf(auth, sizeof auth, "authorization { token: \"%s\" }\n", token);
    return start_with(n, base, name, 0, auth);
}

int nats_node_restart(nats_node *n) {
    if (launch(n)) return -1;
    return wait_healthy(n, 15000);
}

void nats_node_kill(nats_node *n) {
    if (n->pid <= 0) return;
    kill(n->pid, SIGKILL);
    waitpid(n->pid, NULL, 0);
    forget(n->pid);
    n->pid = 0;
}

void nats_node_stop(nats_node *n) {
    if (n->pid <= 0) return;
    kill(n->pid, SIGTERM);
    for (int t = 0; t < 5000; t += 20) {
        if (waitpid(n->pid, NULL, WNOHANG) == n->pid) {
            forget(n->pid);
            n->pid = 0;
            return;
        }
        mcpg_fakehost_sleep_ms(20);
    }
    nats_node_kill(n);
}

int nats_cluster_start(nats_node n[3], const char *base, char *urls, size_t cap) {
    int routes[3];
    for (int i = 0; i < 3; i++) {
        memset(&n[i], 0, sizeof n[i]);
        snprintf(n[i].dir, sizeof n[i].dir, "%s/c%d", base, i + 1);
        mkdir(n[i].dir, 0700);
        n[i].port = free_port();
        n[i].http_port = free_port();
        routes[i] = n[i].route_port = free_port();
        snprintf(n[i].url, sizeof n[i].url, "nats://127.0.0.1:%d", n[i].port);
    }
    size_t used = 0;
    for (int i = 0; i < 3; i++) {
        char cl[512], name[8];
        snprintf(name, sizeof name, "n%d", i + 1);
        snprintf(cl, sizeof cl,
                 "cluster { name: c3, listen: 127.0.0.1:%d, routes: [nats-route://127.0.0.1:%d, "
                 "nats-route://127.0.0.1:%d, nats-route://127.0.0.1:%d] }\n",
                 routes[i], routes[0], routes[1], routes[2]);
        if (write_conf(&n[i], name, cl) || launch(&n[i])) return -1;
        used += (size_t)snprintf(urls + used, cap - used, "%s%s", i ? "," : "", n[i].url);
    }
    for (int i = 0; i < 3; i++)
        if (wait_healthy(&n[i], 20000)) return -1;
    return 0;
}

int nats_tmpdir(char *out, size_t cap) {
    const char *t = getenv("TMPDIR");
    snprintf(out, cap, "%s/mcpg-nats-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(out) ? 0 : -1;
}

void nats_rmdir(const char *dir) {
    if (!dir || !*dir || strstr(dir, "mcpg-nats-") == NULL) return;
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", dir, (char *)NULL);
        _exit(127);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
}
