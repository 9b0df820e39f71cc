/* The private runtime folder that holds the loaded copies of modules.
 *
 * A gateway removes its copies and folder when it stops. One that was killed
 * (SIGKILL, a crash) cannot, so each start sweeps the folders of gateways
 * that are gone: named mcpg-<pid>-XXXXXX, ours, and their pid not running.
 * Only module copies are deleted; a folder with anything else is left, and
 * one holding crash.txt (kernel/crash.c) is left whole: its copies are the
 * images a core file names. */
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

static void sweep_one(const char *base, const char *name) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", base, name);
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) return;
    char crash[PATH_MAX + 16];
    snprintf(crash, sizeof crash, "%s/crash.txt", dir);
    if (access(crash, F_OK) == 0) {
        klog(MCPG_LOG_INFO, "kernel", "kept %s: a gateway crashed there (crash.txt); its module "
             "copies are the images its core file names", dir);
        return;
    }
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
