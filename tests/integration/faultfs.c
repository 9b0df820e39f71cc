/* faultfs: an LD_PRELOAD shim that makes a disk fail on demand, for the
 * integration tests of the audit sink (test_audit_disk.py). No root, no
 * mount, no real full disk: deterministic.
 *
 *   MCPG_FAULT_PATH     the fault applies to regular files whose path starts
 *                       with this (e.g. a test's folder)
 *   MCPG_FAULT_CONTROL  a file: while it exists, its first word says the fault
 *
 * Faults (the control file's first word):
 *   enospc      write, writev, pwrite, pwritev fail with ENOSPC
 *   eio         ... with EIO
 *   eio-sync    writes succeed; fdatasync and fsync fail with EIO
 *   torn        a write of more than one byte writes half its bytes and returns
 *               that count; the write after a short one fails with ENOSPC (a
 *               disk that fills up mid-write)
 * Anything else, or no control file: every call goes through untouched.
 *
 * Each intercepted call costs an fstat (sockets and pipes stop there) and,
 * for a regular file, a look at the control file and a readlink; fine for a
 * test, not for production. Under AddressSanitizer, preload the sanitizer's
 * runtime first (LD_PRELOAD="libasan.so.N faultfs.so"): its interceptors then
 * call these, which call libc's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

enum { F_NONE, F_ENOSPC, F_EIO, F_EIO_SYNC, F_TORN };

/* the previous write under the fault path was short (torn mode) */
static atomic_int last_was_short;

static void *next_fn(const char *name) { return dlsym(RTLD_NEXT, name); }

/* The fault now in force, from the control file (read each time: a test
 * switches faults by replacing the file, and ends them by removing it). */
static int fault_now(void) {
    const char *ctl = getenv("MCPG_FAULT_CONTROL");
    if (!ctl) return F_NONE;
    int fd = open(ctl, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return F_NONE;
    char word[32] = {0};
    ssize_t n = read(fd, word, sizeof word - 1);
    close(fd);
    if (n <= 0) return F_NONE;
    word[strcspn(word, " \t\r\n")] = '\0';
    if (strcmp(word, "enospc") == 0) return F_ENOSPC;
    if (strcmp(word, "eio") == 0) return F_EIO;
    if (strcmp(word, "eio-sync") == 0) return F_EIO_SYNC;
    if (strcmp(word, "torn") == 0) return F_TORN;
    return F_NONE;
}

/* Is fd a regular file under MCPG_FAULT_PATH? errno is kept as it was. */
static int watched(int fd) {
    const char *prefix = getenv("MCPG_FAULT_PATH");
    if (!prefix || !*prefix) return 0;
    int saved = errno;
    struct stat st;
    int yes = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        char link[64], path[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n > 0) {
            path[n] = '\0';
            yes = strncmp(path, prefix, strlen(prefix)) == 0;
        }
    }
    errno = saved;
    return yes;
}

/* The fault for a write of `len` bytes to fd: -1 with errno set (fail it),
 * 0 (let it through whole) or the count of bytes to write instead (torn). */
static ssize_t write_fault(int fd, size_t len) {
    if (!watched(fd)) return 0;
    switch (fault_now()) {
    case F_ENOSPC: errno = ENOSPC; return -1;
    case F_EIO: errno = EIO; return -1;
    case F_TORN:
        if (atomic_exchange(&last_was_short, 0)) {
            errno = ENOSPC;
            return -1;
        }
        if (len < 2) return 0;
        atomic_store(&last_was_short, 1);
        return (ssize_t)(len / 2);
    default: return 0;
    }
}

/* iov cut to its first `keep` bytes, into out (at most cnt entries). */
static int iov_cut(const struct iovec *iov, int cnt, size_t keep, struct iovec *out) {
    int k = 0;
    for (int i = 0; i < cnt && keep > 0; i++, k++) {
        out[k] = iov[i];
        if (out[k].iov_len > keep) out[k].iov_len = keep;
        keep -= out[k].iov_len;
    }
    return k;
}

/* A torn write of more pieces than iov_cut takes: the disk is full at once. */
#define IOV_CUT_MAX 64
static ssize_t no_room(void) {
    atomic_store(&last_was_short, 0);
    errno = ENOSPC;
    return -1;
}

static size_t iov_len(const struct iovec *iov, int cnt) {
    size_t n = 0;
    for (int i = 0; i < cnt; i++) n += iov[i].iov_len;
    return n;
}

ssize_t write(int fd, const void *buf, size_t len) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = next_fn("write");
    ssize_t f = write_fault(fd, len);
    if (f < 0) return -1;
    return real(fd, buf, f ? (size_t)f : len);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = next_fn("pwrite");
    ssize_t f = write_fault(fd, len);
    if (f < 0) return -1;
    return real(fd, buf, f ? (size_t)f : len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off) { return pwrite(fd, buf, len, off); }

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    static ssize_t (*real)(int, const struct iovec *, int);
    if (!real) real = next_fn("writev");
    ssize_t f = write_fault(fd, iov_len(iov, cnt));
    if (f < 0) return -1;
    if (f == 0) return real(fd, iov, cnt);
    struct iovec cut[IOV_CUT_MAX];
    if (cnt > IOV_CUT_MAX) return no_room();
    return real(fd, cut, iov_cut(iov, cnt, (size_t)f, cut));
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) {
    static ssize_t (*real)(int, const struct iovec *, int, off_t);
    if (!real) real = next_fn("pwritev");
    ssize_t f = write_fault(fd, iov_len(iov, cnt));
    if (f < 0) return -1;
    if (f == 0) return real(fd, iov, cnt, off);
    struct iovec cut[IOV_CUT_MAX];
    if (cnt > IOV_CUT_MAX) return no_room();
    return real(fd, cut, iov_cut(iov, cnt, (size_t)f, cut), off);
}

static int sync_fault(int fd) {
    if (!watched(fd) || fault_now() != F_EIO_SYNC) return 0;
    errno = EIO;
    return -1;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = next_fn("fdatasync");
    return sync_fault(fd) ? -1 : real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = next_fn("fsync");
    return sync_fault(fd) ? -1 : real(fd);
}
