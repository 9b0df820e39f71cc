/* audit_file: the file on disk and the hash chain in it (see audit_disk.h). */
#define _GNU_SOURCE /* strerror_r returning char * */
#include "audit_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* A failed rotation is tried again at most this often, and logged at most
 * every AUDIT_DISK_LOG_S (a stuck rename must not flood the log). */
#define AUDIT_ROTATE_RETRY_S 1
#define AUDIT_DISK_LOG_S 10

static time_t mono_s(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec;
}

static const char *err_text(int err, char *buf, size_t cap) { return strerror_r(err, buf, cap); }

/* The file, created 0600 and appended to. A regular file (or one to be
 * created) is opened read-write, so its last line can be read back; a FIFO
 * stays write-only (read-write would make this sink a reader of its own pipe). */
static int open_path(const char *path, int *regular) {
    struct stat st;
    int exists = stat(path, &st) == 0;
    int flags = O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY;
    flags |= exists && !S_ISREG(st.st_mode) ? O_WRONLY : O_RDWR;
    int fd = open(path, flags, 0600);
    if (fd < 0) return -1;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    *regular = S_ISREG(st.st_mode);
    return fd;
}

static int lock_fd(int fd) {
    int rc;
    while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
    }
    return rc;
}

static void remember(audit_disk *d) {
    struct stat st;
    if (fstat(d->fd, &st) != 0) return;
    d->dev = st.st_dev;
    d->ino = st.st_ino;
}

/* "<path>.<k>" */
static int rotated_name(const audit_disk *d, char *out, size_t cap, int64_t k) {
    int n = snprintf(out, cap, "%s.%lld", d->cfg->path, (long long)k);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* The head from path.1's last line, when the file itself is empty: the
 * first line after a rotation chains to the rotated file's last. */
static void head_from_rotated(audit_disk *d) {
    char name[PATH_MAX];
    if (rotated_name(d, name, sizeof name, 1) != 0) return;
    int fd = open(name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return;
    audit_tail t;
    if (audit_chain_read_tail(fd, d->hasher, &t) == 0 && t.kind == AUDIT_TAIL_CHAINED)
        d->head = t.head;
    close(fd);
}

/* A last line without its '\n' is a write a crash cut short: its call never
 * continued (a line's call continues only once the whole batch is written
 * and synced), and the file must hold only events whose calls continued. */
static void cut_torn(audit_disk *d, const audit_tail *t) {
    char buf[128];
    if (ftruncate(d->fd, t->whole) != 0) {
        d->host->log(d->self, MCPG_LOG_ERROR,
                     "cannot remove the torn last line of %s: %s",
                     d->cfg->path, err_text(errno, buf, sizeof buf));
        return;
    }
    d->host->log(d->self, MCPG_LOG_WARN,
                 "removed a torn last line (%lld bytes) from %s: a write cut short by a crash, "
                 "whose call never continued",
                 (long long)(t->size - t->whole), d->cfg->path);
}

/* Read the head back from the file (under the lock). *unchained: its last
 * whole line is not a chain line. At start such a file is refused; later
 * (someone else wrote it) the chain goes on from this instance's own head,
 * and verify will name that line. 0, or -1 with errno. */
static int read_head(audit_disk *d, int *unchained) {
    audit_tail t;
    *unchained = 0;
    if (audit_chain_read_tail(d->fd, d->hasher, &t) != 0) return -1;
    if (t.size > t.whole) cut_torn(d, &t);
    struct stat st;
    if (fstat(d->fd, &st) != 0) return -1;
    d->known_size = st.st_size;
    d->torn = st.st_size > t.whole; /* the cut failed */
    if (t.kind == AUDIT_TAIL_CHAINED)
        d->head = t.head;
    else if (t.kind == AUDIT_TAIL_EMPTY)
        head_from_rotated(d);
    else
        *unchained = 1;
    return 0;
}

/* A crash between rotate_files' link and its rename leaves path.1 a second
 * name of the file at the path: take it back, or the next rotation would
 * keep the same lines under two names. */
static void undo_half_rotation(audit_disk *d) {
    char first[PATH_MAX];
    struct stat a, b;
    if (rotated_name(d, first, sizeof first, 1) == 0 && stat(d->cfg->path, &a) == 0 &&
        stat(first, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
        unlink(first) == 0)
        d->host->log(d->self, MCPG_LOG_WARN, "%s was a second name of %s (a rotation a crash "
                     "cut short): removed", first, d->cfg->path);
}

int audit_disk_open(audit_disk *d) {
    char buf[128], hex[2 * AUDIT_HASH_LEN + 1];
    const char *path = d->cfg->path;
    d->hasher = audit_hasher_new();
    if (!d->hasher) {
        d->host->log(d->self, MCPG_LOG_ERROR, "cannot set up SHA-256 for %s", path);
        return MCPG_ENOMEM;
    }
    d->fd = open_path(path, &d->regular);
    if (d->fd < 0) {
        d->host->log(d->self, MCPG_LOG_ERROR, "cannot open audit file %s: %s", path,
                     err_text(errno, buf, sizeof buf));
        return MCPG_EIO;
    }
    remember(d);
    d->head = (audit_chain_head){0};
    if (!d->regular) return 0; /* a pipe or a device: written, never read back */
    int unchained = 0, rc = lock_fd(d->fd);
    if (rc == 0) undo_half_rotation(d);
    if (rc == 0) rc = read_head(d, &unchained);
    int err = errno;
    flock(d->fd, LOCK_UN);
    if (rc != 0) {
        d->host->log(d->self, MCPG_LOG_ERROR, "cannot read the end of audit file %s: %s", path,
                     err_text(err, buf, sizeof buf));
        return MCPG_EIO;
    }
    if (d->torn) return MCPG_EIO; /* cut_torn said why */
    if (unchained) {
        d->host->log(d->self, MCPG_LOG_ERROR,
                     "audit file %s ends with a line that carries no hash chain (written "
                     "before audit_file 1.1?): move it away or name another path",
                     path);
        return MCPG_EIO;
    }
    audit_hash_hex(d->head.hash, hex);
    if (d->head.line)
        d->host->log(d->self, MCPG_LOG_INFO, "%s: the chain goes on after line %llu (sha256 %s)",
                     path, (unsigned long long)d->head.line, hex);
    else
        d->host->log(d->self, MCPG_LOG_INFO, "%s: a new chain starts", path);
    return 0;
}

/* Open the path again (after a rotation, ours or someone else's), lock it,
 * then let the old file go. */
static int switch_file(audit_disk *d) {
    int regular, fd = open_path(d->cfg->path, &regular);
    if (fd < 0) return -1;
    if (regular && lock_fd(fd) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    close(d->fd); /* releases its lock */
    d->fd = fd;
    d->regular = regular;
    d->locked = regular;
    remember(d);
    d->known_size = -1;
    return 0;
}

/* Is fd still the file at path? When the path names another file (rotated
 * by another writer) or none (renamed away by logrotate), write to the one
 * there now. Each switch waits for that file's lock, whose holder may rotate
 * it again before letting go: so a few rounds, bounded. */
static int follow_path(audit_disk *d) {
    char buf[128];
    for (int tries = 0; tries < 100; tries++) {
        struct stat st;
        if (stat(d->cfg->path, &st) == 0 && st.st_dev == d->dev && st.st_ino == d->ino) return 0;
        if (switch_file(d) == 0) continue; /* and check again: it may have moved meanwhile */
        /* cannot open the path: keep the old file while it still has a name */
        int err = errno;
        if (fstat(d->fd, &st) == 0 && st.st_nlink > 0) {
            time_t now = mono_s();
            if (now - d->warned_s >= AUDIT_DISK_LOG_S) {
                d->warned_s = now;
                d->host->log(d->self, MCPG_LOG_ERROR,
                             "cannot open %s again: %s; writing on to the file it was",
                             d->cfg->path, err_text(err, buf, sizeof buf));
            }
            return 0;
        }
        errno = err;
        return -1;
    }
    errno = EAGAIN; /* the path kept moving */
    return -1;
}

int audit_disk_begin(audit_disk *d) {
    if (!d->regular) return 0;
    if (lock_fd(d->fd) != 0) return -1;
    d->locked = 1;
    if (follow_path(d) != 0 || !d->regular) return d->regular ? -1 : 0;
    struct stat st;
    if (fstat(d->fd, &st) != 0) return -1;
    if (st.st_size == d->known_size) return 0;
    int unchained;
    if (read_head(d, &unchained) != 0) return -1;
    time_t now = mono_s();
    if (unchained && now - d->warned_s >= AUDIT_DISK_LOG_S) {
        d->warned_s = now;
        d->host->log(d->self, MCPG_LOG_ERROR,
                     "another writer left a line without a hash chain at the end of %s: the "
                     "chain goes on from line %llu, and verify will name that line",
                     d->cfg->path, (unsigned long long)d->head.line);
    }
    return 0;
}

/* The renames are durable only once the folder is synced. */
static void sync_folder(const char *path) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    fsync(fd);
    close(fd);
}

/* Free the name path.1: path.(k-1) -> path.k ... up to the first free name,
 * dropping path.<keep> only when every name is taken. Filling the first free
 * name, a rotation that failed half way is finished by the next try without
 * losing a file. */
static int free_first_name(audit_disk *d) {
    char from[PATH_MAX], to[PATH_MAX];
    int64_t keep = d->cfg->rotate_keep, gap = keep;
    for (int64_t k = 1; k <= keep; k++) {
        if (rotated_name(d, from, sizeof from, k) != 0) return -1;
        if (access(from, F_OK) != 0 && errno == ENOENT) {
            gap = k;
            break;
        }
    }
    if (gap == keep && rotated_name(d, from, sizeof from, keep) == 0 && unlink(from) != 0 &&
        errno != ENOENT)
        return -1;
    for (int64_t k = gap - 1; k >= 1; k--) {
        if (rotated_name(d, from, sizeof from, k) != 0 ||
            rotated_name(d, to, sizeof to, k + 1) != 0 || rename(from, to) != 0)
            return -1;
    }
    return 0;
}

/* The next file, made under a name of its own and locked before it takes
 * the path. */
static int make_next_file(audit_disk *d, char *tmp, size_t cap) {
    int n = snprintf(tmp, cap, "%s.rotating", d->cfg->path);
    if (n < 0 || (size_t)n >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    unlink(tmp); /* one a crash left */
    int fd = open(tmp, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0) return -1;
    if (lock_fd(fd) != 0) {
        int err = errno;
        close(fd);
        unlink(tmp);
        errno = err;
        return -1;
    }
    return fd;
}

/* Between batches, under the lock: the file gets the name path.1 (a link
 * first), then a new file replaces it at the path in one rename. The path
 * never stops naming a file: another writer sharing it that found no file
 * there would make one of its own and start a second chain. And the new file
 * is locked before anyone can open it, so this writer's head is still the
 * chain's: the new file's first line chains to the rotated one's last. */
static int rotate_files(audit_disk *d) {
    char first[PATH_MAX], tmp[PATH_MAX];
    if (free_first_name(d) != 0 || rotated_name(d, first, sizeof first, 1) != 0) return -1;
    if (link(d->cfg->path, first) != 0) return -1;
    int fd = make_next_file(d, tmp, sizeof tmp);
    if (fd >= 0 && rename(tmp, d->cfg->path) == 0) {
        close(d->fd); /* and its lock */
        d->fd = fd;
        remember(d);
        d->known_size = 0;
        d->torn = 0;
        return 0;
    }
    int err = errno;
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    unlink(first); /* the file keeps its one name, the path */
    errno = err;
    return -1;
}

static void rotate(audit_disk *d) {
    char buf[128];
    time_t now = mono_s();
    if (now < d->rotate_next_s) return;
    off_t size = d->known_size;
    if (rotate_files(d) == 0) {
        d->rotations++;
        sync_folder(d->cfg->path);
        d->host->log(d->self, MCPG_LOG_INFO, "rotated %s to %s.1 after chain line %llu (%lld bytes)",
                     d->cfg->path, d->cfg->path, (unsigned long long)d->head.line,
                     (long long)size);
        return;
    }
    int err = errno;
    d->rotate_next_s = now + AUDIT_ROTATE_RETRY_S;
    if (now - d->warned_s >= AUDIT_DISK_LOG_S) {
        d->warned_s = now;
        d->host->log(d->self, MCPG_LOG_ERROR, "cannot rotate %s: %s; writing on to it",
                     d->cfg->path, err_text(err, buf, sizeof buf));
    }
}

void audit_disk_end(audit_disk *d, int ok) {
    if (!d->regular || !d->locked) return;
    struct stat st;
    /* after a failure read the head back: what the failed write left, if
     * anything, is what the file now says */
    d->known_size = ok && fstat(d->fd, &st) == 0 ? st.st_size : -1;
    if (ok && d->cfg->rotate_bytes > 0 && d->known_size >= d->cfg->rotate_bytes) rotate(d);
    flock(d->fd, LOCK_UN);
    d->locked = 0;
}

void audit_disk_close(audit_disk *d) {
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
    audit_hasher_free(d->hasher);
    d->hasher = NULL;
}
