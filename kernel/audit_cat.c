/* mcpg audit cat FILE... / mcpg audit tail [-n N] [-f] FILE: an audit file's
 * lines as an operator reads them.
 *
 * audit_file writes room ahead of its live file (a run of spaces: see
 * lib/audit/audit_chain.h), so the live file is longer than its lines and
 * `tail -f`, which waits for the file to grow, sees nothing new. These print
 * the whole lines only: never the room, never a line still being written.
 * `tail -f` follows the path: new lines as they are written (over the room),
 * and across a rotation it finishes the rotated file, then reads the new one
 * from its first line. */
#define _GNU_SOURCE /* memrchr */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mcpg/sdk.h>

#include "audit_chain.h"

int audit_cat_command(int argc, char **argv);
int audit_tail_command(int argc, char **argv);

#define CHUNK 65536
#define FOLLOW_POLL_MS 200

/* Write [p, p+n) to stdout; -1 when stdout is gone (a closed pipe). */
static int put(const char *p, size_t n) {
    return fwrite(p, 1, n, stdout) == n ? 0 : -1;
}

/* The chain number of the last whole line in [p, p+n) (which ends with a
 * '\n'), or 0 when it carries none. */
static uint64_t last_number(const char *p, size_t n) {
    const char *end = p + n - 1, *start = end;
    while (start > p && start[-1] != '\n') start--;
    uint64_t no = 0;
    uint8_t prev[AUDIT_HASH_LEN];
    return audit_chain_parse(start, (size_t)(end - start), &no, prev) ? no : 0;
}

static uint64_t last_printed; /* the chain number of the last line printed (0: none) */

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Is everything from `at` to the end of the file room? */
static int room_to_end(int fd, off_t at) {
    char buf[4096];
    for (;;) {
        ssize_t got = pread(fd, buf, sizeof buf, at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return 1;
        for (ssize_t i = 0; i < got; i++)
            if (buf[i] != AUDIT_ROOM_BYTE) return 0;
        at += got;
    }
}

#define SUSPECT_POLLS 50 /* a line that stays unreadable this many reads is printed as it is */

/* How many of buf's n bytes are lines to print: whole, and as written. A
 * reader can catch a batch while it is written over the room: part of the
 * read sees the batch, part the room, so a line may start with room or not
 * be JSON. Such a line ends what is printed now; it is read again, and
 * printed as it is only if it stays so (a damaged file: verify names it). */
static size_t printable(const char *buf, size_t n, int *suspect) {
    size_t start = 0;
    while (start < n && buf[start] != AUDIT_ROOM_BYTE) {
        const char *nl = memchr(buf + start, '\n', n - start);
        if (!nl) break;
        size_t len = (size_t)(nl - (buf + start));
        if (mcpg_json_validate(buf + start, len) != 0 && ++*suspect < SUSPECT_POLLS) break;
        *suspect = 0;
        start += len + 1;
    }
    return start;
}

/* Print the whole lines from *off on; *off moves past them. 0, or -1 with
 * errno (read) or EPIPE-like (write). */
static int suspect; /* reads in a row that stopped at the same unreadable line */

static int print_lines_from(int fd, off_t *off) {
    static char *buf;
    static size_t cap;
    if (!buf && !(buf = malloc(cap = CHUNK))) return -1;
    for (;;) {
        ssize_t got = pread(fd, buf, cap, *off);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        size_t n = printable(buf, (size_t)got, &suspect);
        if (n == 0) {
            /* no whole line: one being written (room after it, to the end),
             * or one longer than the buffer, read again whole */
            size_t t = (size_t)got;
            while (t > 0 && buf[t - 1] == AUDIT_ROOM_BYTE) t--;
            if ((size_t)got < cap || memchr(buf, '\n', (size_t)got) ||
                (t < (size_t)got && room_to_end(fd, *off + (off_t)got)))
                return 0;
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) return -1;
            buf = bigger, cap *= 2;
            continue;
        }
        if (put(buf, n) != 0) return -1;
        uint64_t no = last_number(buf, n);
        if (no) last_printed = no;
        *off += (off_t)n;
        /* the chunk ended inside a line: read on from it */
        if ((size_t)got == cap && buf[n] != AUDIT_ROOM_BYTE && !memchr(buf + n, '\n', (size_t)got - n))
            continue;
        return 0; /* the room, or a line read again next time */
    }
}

/* Just past the last byte that is not room. */
static off_t lines_end(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? audit_content_end(fd, st.st_size) : -1;
}

/* Where the last n whole lines start (0 when the file has fewer). */
static off_t last_lines_start(int fd, long n) {
    static char buf[CHUNK];
    off_t end = lines_end(fd);
    if (end < 0) return -1;
    /* the last '\n' ends the last whole line: bytes after it are torn */
    long seen = -1;
    while (end > 0) {
        size_t want = end > CHUNK ? CHUNK : (size_t)end;
        off_t at = end - (off_t)want;
        if (pread(fd, buf, want, at) != (ssize_t)want) return -1;
        for (size_t i = want; i-- > 0;)
            if (buf[i] == '\n' && ++seen == n) return at + (off_t)i + 1;
        end = at;
    }
    return 0;
}

static int fail(const char *cmd, const char *path) {
    fprintf(stderr, "mcpg audit %s: %s: %s\n", cmd, path, strerror(errno));
    return 2;
}

int audit_cat_command(int argc, char **argv) {
    if (argc < 1) {
        fprintf(stderr, "usage: mcpg audit cat FILE...   (the whole lines of each, in order; "
                        "a rotated set oldest first)\n");
        return 2;
    }
    for (int i = 0; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) return fail("cat", argv[i]);
        off_t off = 0, before;
        int rc;
        do { /* again while a line caught mid-write waits to be read whole */
            before = off;
            rc = print_lines_from(fd, &off);
            if (suspect) sleep_ms(1);
        } while (rc == 0 && (off != before || suspect));
        close(fd);
        if (rc != 0) return errno == EPIPE ? 0 : fail("cat", argv[i]);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

/* Is the file at path another than the one open on fd (rotated)? */
static int rotated(int fd, const char *path) {
    struct stat a, b;
    if (stat(path, &a) != 0) return 0; /* between the rename and the new file */
    return fstat(fd, &b) == 0 && (a.st_dev != b.st_dev || a.st_ino != b.st_ino);
}

/* The chain number of the first line of the file open on fd: 0 when it has
 * none (yet). */
static uint64_t first_number(int fd) {
    char buf[256];
    ssize_t got = pread(fd, buf, sizeof buf, 0);
    uint64_t no = 0;
    uint8_t prev[AUDIT_HASH_LEN];
    return got > 0 && audit_chain_parse(buf, (size_t)got, &no, prev) ? no : 0;
}

static uint64_t first_number_of(const char *name) {
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint64_t no = first_number(fd);
    close(fd);
    return no;
}

/* The chain number of the whole line that ends at `off` (0: none). */
static uint64_t number_before(int fd, off_t off) {
    char buf[4096];
    size_t want = off > (off_t)sizeof buf ? sizeof buf : (size_t)off;
    if (want == 0 || pread(fd, buf, want, off - (off_t)want) != (ssize_t)want) return 0;
    return last_number(buf, want);
}

/* Which of path.K .. path.1, path starts with the smallest chain number past
 * the last line printed: its name in `name` and that number, or 0 when none
 * does (yet). */
static uint64_t find_next(const char *path, char *name, size_t cap) {
    uint64_t best = 0;
    int best_k = -1;
    for (int k = 0; k <= 1000; k++) {
        if (k == 0)
            snprintf(name, cap, "%s", path);
        else if (snprintf(name, cap, "%s.%d", path, k) >= (int)cap || access(name, F_OK) != 0)
            break;
        uint64_t no = first_number_of(name);
        if (no > last_printed && (!best || no < best)) best = no, best_k = k;
    }
    if (best_k > 0)
        snprintf(name, cap, "%s.%d", path, best_k);
    else
        snprintf(name, cap, "%s", path);
    return best;
}

/* After a rotation, the file to read next, open: the one whose first line
 * is the chain's next, found by its number, so that files rotated twice
 * between two looks are not skipped; opened and checked again, since
 * rotations rename files meanwhile. The path itself when no numbered file
 * follows yet. Lines rotated away before they could be read are said so. */
static int open_next(const char *path) {
    char name[4096];
    for (int tries = 0; tries < 100; tries++) {
        uint64_t want = find_next(path, name, sizeof name);
        int fd = open(name, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        uint64_t got = first_number(fd);
        if (want && got != want) { /* renamed under us: look again */
            close(fd);
            continue;
        }
        if (want && last_printed && want > last_printed + 1)
            fprintf(stderr, "mcpg audit tail: lines %llu..%llu were rotated away before they "
                    "could be read\n", (unsigned long long)last_printed + 1,
                    (unsigned long long)want - 1);
        return fd;
    }
    return -1;
}

static int follow(const char *path, int fd, off_t off) {
    if (!last_printed) last_printed = number_before(fd, off);
    for (;;) {
        if (print_lines_from(fd, &off) != 0 || fflush(stdout) != 0) break;
        if (!rotated(fd, path)) {
            sleep_ms(FOLLOW_POLL_MS);
            continue;
        }
        /* the rotated file's last lines, then the file after it */
        if (print_lines_from(fd, &off) != 0) break;
        int nfd = open_next(path);
        if (nfd < 0) continue;
        close(fd);
        fd = nfd;
        off = 0;
    }
    int err = errno;
    close(fd);
    return err == EPIPE ? 0 : (errno = err, fail("tail", path));
}

int audit_tail_command(int argc, char **argv) {
    long n = 10;
    int follow_on = 0;
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-f")) {
            follow_on = 1;
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            char *end;
            n = strtol(argv[++i], &end, 10);
            if (*end || n < 0) {
                fprintf(stderr, "mcpg audit tail: -n %s: not a count of lines\n", argv[i]);
                return 2;
            }
        } else if (!path && argv[i][0] != '-') {
            path = argv[i];
        } else {
            path = NULL;
            break;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: mcpg audit tail [-n LINES] [-f] FILE   (the last lines, 10 by "
                        "default; -f: then the new ones as they are written, across rotation)\n");
        return 2;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail("tail", path);
    off_t off = last_lines_start(fd, n);
    if (off < 0) {
        close(fd);
        return fail("tail", path);
    }
    if (follow_on) return follow(path, fd, off);
    int rc = print_lines_from(fd, &off);
    close(fd);
    if (rc != 0) return errno == EPIPE ? 0 : fail("tail", path);
    return fflush(stdout) == 0 ? 0 : 1;
}
