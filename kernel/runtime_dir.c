/* The private runtime folder that holds the loaded copies of modules.
 *
 * A gateway removes its copies and folder when it stops. One that was killed
 * (SIGKILL, a crash) cannot, so each start sweeps the folders of gateways
 * that are gone: named mcpg-<pid>-XXXXXX, ours, and their pid not running.
 * Only module copies are deleted; a folder with anything else is left, and
 * one holding crash.txt (kernel/crash.c) is left whole: its copies are the
 * images a core file names. A gateway that crashes in a loop (a service
 * manager restarting it) would leave a folder of copies per crash, so only
 * the CRASHED_KEPT newest are kept; the older ones are swept like the rest
 * (their crash.txt is left, with the folder: the line stays readable). */
#include "kernel.h"

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static bool is_copy(const char *name) {
    size_t n = strlen(name);
    return (n > 3 && strcmp(name + n - 3, ".so") == 0) ||
           (name[0] == '.' && n > 4 && strcmp(name + n - 4, ".tmp") == 0);
}

/* "mcpg-<pid>-XXXXXX" (a gateway) or "mcpg-help-XXXXXX"; the pid, or 0. */
static long owner_pid(const char *name) {
    if (strncmp(name, "mcpg-", 5) != 0) return 0;
    char *end;
    long pid = strtol(name + 5, &end, 10);
    return end != name + 5 && *end == '-' && pid > 0 ? pid : 0;
}

#define CRASHED_KEPT 5

/* When the gateway that left dir crashed (its crash.txt's time), or 0: it did not. */
static time_t crashed_at(const char *dir) {
    char crash[PATH_MAX + 16];
    snprintf(crash, sizeof crash, "%s/crash.txt", dir);
    struct stat st;
    return stat(crash, &st) == 0 ? (st.st_mtime ? st.st_mtime : 1) : 0;
}

/* How many crashed folders in base are newer than `when` (ties: by name). */
static int crashed_newer(const char *base, const char *name, time_t when) {
    DIR *d = opendir(base);
    if (!d) return 0;
    int newer = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!owner_pid(e->d_name) || strcmp(e->d_name, name) == 0) continue;
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/%s", base, e->d_name);
        time_t t = crashed_at(dir);
        newer += t > when || (t == when && strcmp(e->d_name, name) > 0);
    }
    closedir(d);
    return newer;
}

static void sweep_one(const char *base, const char *name) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", base, name);
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) return;
    time_t crashed = crashed_at(dir);
    if (crashed && crashed_newer(base, name, crashed) < CRASHED_KEPT) {
        klog(MCPG_LOG_INFO, "kernel", "kept %s: a gateway crashed there (crash.txt); its module "
             "copies are the images its core file names", dir);
        return;
    }
    if (crashed)
        klog(MCPG_LOG_INFO, "kernel", "%s: a gateway crashed there, and %d or more crashed since: its "
             "module copies are removed (crash.txt is kept)", dir, CRASHED_KEPT);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_copy(e->d_name)) continue;
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
    if (rmdir(dir) == 0) klog(MCPG_LOG_DEBUG, "kernel", "removed %s, left by a gateway that is gone", dir);
}

void runtime_dirs_sweep(const char *base) {
    DIR *d = opendir(base);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = owner_pid(e->d_name);
        if (pid && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            sweep_one(base, e->d_name);
    }
    closedir(d);
}
