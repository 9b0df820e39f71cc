/* systemd's notify protocol, by hand: each message is one datagram of
 * NEWLINE-separated KEY=VALUE lines to the AF_UNIX socket NOTIFY_SOCKET
 * names (a path, or an abstract name when it starts with '@'). No
 * libsystemd: the gateway runs the same with or without a service manager.
 *
 * The socket is opened the first time something is said, non-blocking:
 * a manager that does not read its queue makes the gateway lose a status
 * line, never wait. NOTIFY_SOCKET stays set, so that a backend's child
 * process inherits it; with NotifyAccess=main the manager ignores those. */
#include "kernel.h"
#include "sd_notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MESSAGE_MAX 1024
#define STATUS_MAX 512

typedef struct notifier {
    bool looked;       /* the environment was read */
    int fd;            /* -1: no manager to tell */
    struct sockaddr_un addr;
    socklen_t addr_len;
    uint64_t watchdog_us, last_ping_us;
    bool ready_told;
    char last_status[STATUS_MAX];
} notifier;

static notifier notify = {.fd = -1};

/* NOTIFY_SOCKET as an address; false (and why in the log) when it is not
 * one this gateway can use. */
static bool address_of(const char *name, struct sockaddr_un *addr, socklen_t *len) {
    size_t n = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || n < 2 || n >= sizeof addr->sun_path) {
        klog(MCPG_LOG_WARN, "kernel", "NOTIFY_SOCKET \"%s\" is not an absolute path or an "
             "@abstract name shorter than %zu bytes: the service manager is not told "
             "anything", name, sizeof addr->sun_path);
        return false;
    }
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path, name, n);
    if (name[0] == '@') addr->sun_path[0] = '\0'; /* abstract: no NUL at the end either */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/'));
    return true;
}

static uint64_t watchdog_interval(void) {
    const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    if (!usec || !*usec) return 0;
    if (pid && *pid && strtol(pid, NULL, 10) != (long)getpid()) return 0; /* meant for another */
    unsigned long long us = strtoull(usec, NULL, 10);
    return (uint64_t)us;
}

static bool notifier_open(void) {
    if (notify.looked) return notify.fd >= 0;
    notify.looked = true;
    const char *name = getenv("NOTIFY_SOCKET");
    if (!name || !*name || !address_of(name, &notify.addr, &notify.addr_len)) return false;
    notify.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (notify.fd < 0) {
        klog(MCPG_LOG_WARN, "kernel", "NOTIFY_SOCKET: cannot make a socket (%s): the service "
             "manager is not told anything", strerror(errno));
        return false;
    }
    notify.watchdog_us = watchdog_interval();
    return true;
}

static void send_message(const char *text, size_t len) {
    if (!notifier_open()) return;
    if (sendto(notify.fd, text, len, MSG_DONTWAIT | MSG_NOSIGNAL,
               (const struct sockaddr *)&notify.addr, notify.addr_len) < 0)
        klog(MCPG_LOG_DEBUG, "kernel", "NOTIFY_SOCKET: \"%.*s\" not sent: %s",
             (int)strcspn(text, "\n"), text, strerror(errno));
}

/* head, then STATUS=<status> (remembered as the last status sent). */
MCPG_PRINTF(2, 0)
static void say(const char *head, const char *status_fmt, va_list ap) {
    char msg[MESSAGE_MAX];
    int n = snprintf(msg, sizeof msg, "%s", head);
    if (status_fmt) {
        vsnprintf(notify.last_status, sizeof notify.last_status, status_fmt, ap);
        n += snprintf(msg + n, sizeof msg - (size_t)n, "%sSTATUS=%s", n ? "\n" : "",
                      notify.last_status);
    }
    send_message(msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

MCPG_PRINTF(1, 0)
static void say_ready(const char *status_fmt, va_list ap) {
    char head[64];
    snprintf(head, sizeof head, "READY=1\nMAINPID=%ld", (long)getpid());
    say(head, status_fmt, ap);
    notify.ready_told = true;
}

void sd_notify_ready(const char *status_fmt, ...) {
    va_list ap;
    va_start(ap, status_fmt);
    say_ready(status_fmt, ap);
    va_end(ap);
}

bool sd_notify_told_ready(void) { return notify.ready_told; }

void sd_notify_reloading(void) {
    if (!notify.ready_told) return;
    char msg[96];
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
             (unsigned long long)mono_us());
    send_message(msg, strlen(msg));
}

void sd_notify_reload_over(const char *status_fmt, ...) {
    va_list ap;
    va_start(ap, status_fmt);
    if (notify.ready_told) say_ready(status_fmt, ap);
    else say("", status_fmt, ap);
    va_end(ap);
}

void sd_notify_stopping(void) {
    static const char msg[] = "STOPPING=1\nSTATUS=draining the calls in flight";
    send_message(msg, sizeof msg - 1);
}

void sd_notify_status(const char *status_fmt, ...) {
    char status[STATUS_MAX];
    va_list ap;
    va_start(ap, status_fmt);
    vsnprintf(status, sizeof status, status_fmt, ap);
    va_end(ap);
    if (strcmp(status, notify.last_status) == 0) return;
    char msg[MESSAGE_MAX];
    int n = snprintf(msg, sizeof msg, "STATUS=%s", status);
    snprintf(notify.last_status, sizeof notify.last_status, "%s", status);
    send_message(msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

void sd_notify_watchdog(uint64_t now_us) {
    if (!notifier_open() || !notify.watchdog_us) return;
    if (notify.last_ping_us && now_us - notify.last_ping_us < notify.watchdog_us / 2) return;
    notify.last_ping_us = now_us;
    send_message("WATCHDOG=1", 10);
}
