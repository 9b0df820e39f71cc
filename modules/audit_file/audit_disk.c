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
#include <sys/uio.h>
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

/* open(2), without access-time updates when the file is ours: this writer
 * reads the byte at its end before each batch, and on a relatime mount each
 * such read after a write dirtied the inode, which the batch's fdatasync then
 * wrote too. O_NOATIME is refused (EPERM) on a file someone else owns. */
static int open_noatime(const char *path, int flags) {
    int fd = open(path, flags | O_NOATIME, 0600);
    if (fd < 0 && errno == EPERM) fd = open(path, flags, 0600);
    return fd;
}

/* The file, created 0600. A regular file (or one to be created) is opened
 * read-write, so its last line can be read back, and written at offsets; a
 * FIFO stays write-only and appended to (read-write would make this sink a
 * reader of its own pipe). */
static int open_path(const char *path, int *regular) {
    struct stat st;
    int exists = stat(path, &st) == 0;
    int flags = O_CREAT | O_CLOEXEC | O_NOCTTY;
    flags |= exists && !S_ISREG(st.st_mode) ? O_WRONLY | O_APPEND : O_RDWR;
    int fd = open_noatime(path, flags);
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

static int cut_room(audit_disk *d);

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
    if (audit_chain_read_tail(fd, d->hasher, 0, &t) == 0 && t.kind == AUDIT_TAIL_CHAINED)
        d->head = t.head;
    close(fd);
}

/* Room bytes over [from, to) of the file, written with pwrite: the file grows
 * when `to` is past its end. 0, or -1 with errno. */
static int fill_room(int fd, off_t from, off_t to) {
    while (from < to) {
        size_t n = to - from > AUDIT_ROOM_RUN ? AUDIT_ROOM_RUN : (size_t)(to - from);
        ssize_t w = pwrite(fd, audit_room_run(), n, from);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        from += w;
    }
    return 0;
}

/* Take bytes [from, to) back: room again when the file has room after them
 * (its size stays, so later batches still flush data only), else, or when
 * that write fails too, cut off (room after them included: it is written
 * again). Like the cut, the room is not synced here: the next batch's sync
 * carries it, and until then a crash can only bring back lines whose calls
 * were failed, as a cut not yet on disk could. */
static int take_back_bytes(audit_disk *d, off_t from, off_t to, off_t file_size) {
    if (to < file_size && fill_room(d->fd, from, to) == 0) return 0;
    if (ftruncate(d->fd, from) != 0) return -1;
    d->file_size = from;
    return 0;
}

/* A last line without its '\n' is a write a crash cut short: its call never
 * continued (a line's call continues only once the whole batch is written
 * and synced), and the file must hold only events whose calls continued. */
static void cut_torn(audit_disk *d, const audit_tail *t) {
    char buf[128];
    if (take_back_bytes(d, t->whole, t->size, t->file_size) != 0) {
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

/* After cut_torn: does the file still hold a torn line's bytes at `whole`? */
static int content_after(audit_disk *d, off_t whole, off_t size) {
    char c;
    if (size <= whole) return 0;
    ssize_t got = pread(d->fd, &c, 1, whole);
    return got < 0 || (got == 1 && c != AUDIT_ROOM_BYTE); /* 0: cut off, the file ends there */
}

/* The chain is walked through this many bytes before the end at a start: a
 * power loss can leave a page of room inside the last batch only, and a
 * batch is at most max_batch_bytes (one larger event, alone). Bounded, so
 * that a start never reads more than this much of a huge max_batch_bytes. */
#define START_WINDOW_MAX ((off_t)64 << 20)

static off_t start_window(const audit_cfg *cfg) {
    off_t w = (off_t)cfg->max_batch_bytes * 2;
    return w < START_WINDOW_MAX ? w : START_WINDOW_MAX;
}

/* Read the head back from the file (under the lock). *unchained: its last
 * whole line is not a chain line. At start such a file is refused; later
 * (someone else wrote it) the chain goes on from this instance's own head,
 * and verify will name that line. 0, or -1 with errno. */
static int read_head(audit_disk *d, off_t window, int *unchained) {
    audit_tail t;
    *unchained = 0;
    if (audit_chain_read_tail(d->fd, d->hasher, window, &t) != 0) return -1;
    if (t.size > t.whole) cut_torn(d, &t);
    audit_file_id st;
    if (audit_identify(d->fd, NULL, &st) != 0) return -1;
    d->file_size = st.size;
    d->torn = content_after(d, t.whole, t.size); /* the cut failed */
    /* a torn line that stays is ended by the next write's '\n', after it */
    d->end = d->torn ? t.size : t.whole;
    if (d->end > st.size) d->end = st.size;
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
    if (rc == 0) rc = read_head(d, start_window(d->cfg), &unchained);
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
    if (d->cfg->preallocate_bytes > 0)
        d->room = audit_room_start(d->host, d->self, path);
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
    d->end = -1;
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
        audit_file_id at;
        if (audit_identify(-1, d->cfg->path, &at) == 0 && at.dev == d->dev && at.ino == d->ino)
            return 0;
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

/* Did someone else write at our end since our last batch? Their line would
 * start where ours was to go, over the room (the size alone no longer tells
 * when there is room). One byte, from the page cache, per batch. */
static int written_by_another(audit_disk *d, off_t size) {
    if (d->end < 0 || size < d->end) return 1;
    char c;
    return d->end < size && (pread(d->fd, &c, 1, d->end) != 1 || c != AUDIT_ROOM_BYTE);
}

int audit_disk_begin(audit_disk *d) {
    if (!d->regular) return 0;
    if (lock_fd(d->fd) != 0) return -1;
    d->locked = 1;
    if (follow_path(d) != 0 || !d->regular) return d->regular ? -1 : 0;
    audit_file_id file;
    if (audit_identify(d->fd, NULL, &file) != 0) return -1;
    if (!written_by_another(d, file.size)) {
        d->file_size = file.size; /* room the room thread added meanwhile, if any */
        return 0;
    }
    int unchained;
    if (read_head(d, 0, &unchained) != 0) return -1;
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
    int fd = open_noatime(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY);
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
    if (cut_room(d) != 0) return -1; /* a rotated file ends at its last line */
    if (link(d->cfg->path, first) != 0) return -1;
    int fd = make_next_file(d, tmp, sizeof tmp);
    if (fd >= 0 && rename(tmp, d->cfg->path) == 0) {
        close(d->fd); /* and its lock */
        d->fd = fd;
        remember(d);
        d->end = d->file_size = 0;
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
    off_t size = d->end;
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

/* Ask for room ahead once less than half a step is left after the next n
 * bytes: the room thread writes it meanwhile, up to the next whole step
 * past a step ahead. Whole steps keep the ask the same batch after batch
 * until the room is there: one round of the room thread a step, not one a
 * batch (each round changes the file's size, and a batch synced while the
 * size is changing writes the inode too). */
static void make_room(audit_disk *d, size_t n) {
    off_t step = (off_t)d->cfg->preallocate_bytes;
    if (step <= 0 || !d->room) return;
    off_t need = d->end + (off_t)n;
    if (need + step / 2 <= d->file_size) return;
    off_t want = (need + step) / step * step + step;
    /* a file that rotates takes one line past rotate_bytes at most */
    off_t rotate_at = (off_t)d->cfg->rotate_bytes;
    if (rotate_at > 0 && want > rotate_at + (off_t)d->cfg->max_batch_bytes)
        want = rotate_at + (off_t)d->cfg->max_batch_bytes;
    if (want <= d->file_size) return;
    audit_room_want(d->room, d->dev, d->ino, want);
}

/* The file (the room taken off it) ends at its last line. Its size is read
 * again: the room thread may have added room since the batch began. */
static int cut_room(audit_disk *d) {
    audit_file_id now;
    if (d->end < 0 || audit_identify(d->fd, NULL, &now) != 0) return -1;
    if (now.size <= d->end) return 0;
    if (ftruncate(d->fd, d->end) != 0) return -1;
    d->file_size = d->end;
    return 0;
}

static ssize_t write_at(audit_disk *d, struct iovec *iov, int cnt, off_t at) {
    return d->regular ? pwritev(d->fd, iov, cnt, at) : writev(d->fd, iov, cnt);
}

int audit_disk_write(audit_disk *d, const char *p, size_t n, size_t *written) {
    static const char nl = '\n';
    struct iovec iov[2];
    int cnt = 0;
    *written = 0;
    if (d->regular) make_room(d, n + 1);
    d->write_at = d->end;
    if (d->torn) iov[cnt++] = (struct iovec){(void *)&nl, 1};
    iov[cnt++] = (struct iovec){(void *)p, n};
    while (cnt > 0) {
        ssize_t w = write_at(d, iov, cnt, d->write_at + (off_t)*written);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO; /* no progress on a regular file: treat as a failure */
            return -1;
        }
        d->torn = 1; /* until the whole chunk is out */
        size_t done = (size_t)w;
        *written += done;
        if (d->regular) d->end = d->write_at + (off_t)*written;
        if (d->end > d->file_size) d->file_size = d->end;
        while (cnt > 0 && done >= iov[0].iov_len) {
            done -= iov[0].iov_len;
            iov[0] = iov[1];
            cnt--;
        }
        if (cnt > 0) {
            iov[0].iov_base = (char *)iov[0].iov_base + done;
            iov[0].iov_len -= done;
        }
    }
    d->torn = 0;
    return 0;
}

/* Without this a full disk (ENOSPC, EFBIG) left a torn half line in the
 * file, and complete lines of the chunk's other events, whose calls were
 * failed closed: the file then said "allowed" for calls that never ran.
 * Only a regular file: the lock keeps the other writers of a shared file
 * out meanwhile; on a pipe, or when it fails, the next chunk starts on a new
 * line (torn stays set). */
int audit_disk_take_back(audit_disk *d, size_t written) {
    if (!written) return 1;
    if (!d->regular || take_back_bytes(d, d->write_at, d->write_at + (off_t)written,
                                       d->file_size) != 0)
        return 0;
    d->end = d->write_at;
    return 1;
}

void audit_disk_end(audit_disk *d, int ok) {
    if (!d->regular || !d->locked) return;
    if (!ok) d->end = -1; /* read the head back: the file says what a failed write left */
    if (ok && d->cfg->rotate_bytes > 0 && d->end >= d->cfg->rotate_bytes) rotate(d);
    flock(d->fd, LOCK_UN);
    d->locked = 0;
}

void audit_disk_trim(audit_disk *d) {
    audit_room_stop(d->room); /* no append after the cut */
    d->room = NULL;
    if (d->fd < 0 || !d->regular || lock_fd(d->fd) != 0) return;
    audit_file_id st;
    if (audit_identify(d->fd, NULL, &st) == 0 && !written_by_another(d, st.size) && cut_room(d) == 0)
        fsync(d->fd);
    flock(d->fd, LOCK_UN);
}

void audit_disk_close(audit_disk *d) {
    audit_room_stop(d->room);
    d->room = NULL;
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
    audit_hasher_free(d->hasher);
    d->hasher = NULL;
}
