/* audit_file: the room written ahead of the live file (see audit_room.h). */
#define _GNU_SOURCE /* sync_file_range */
#include "audit_room.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h> /* makedev */
#include <unistd.h>

#include "audit_chain.h"
#include "audit_sink.h"

#define ROOM_WRITE AUDIT_ROOM_RUN /* bytes an append: the lock is held that long at most */
#define ROOM_SLICE 262144  /* bytes written back at a time */

struct audit_room {
    const mcpg_host *host;
    mcpg_instance *self;
    const char *path;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* ---- under mu ---- */
    dev_t dev;
    ino_t ino;
    off_t want; /* room wanted up to this size, in the file (dev, ino) */
    int stopping;
    int failing; /* the last round failed (logged once until one works) */
};

int audit_identify(int fd, const char *path, audit_file_id *out) {
    struct statx sx;
    int rc = path ? statx(AT_FDCWD, path, 0, STATX_INO | STATX_SIZE, &sx)
                  : statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_SIZE, &sx);
    if (rc != 0) return -1;
    out->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
    out->ino = sx.stx_ino;
    out->size = (off_t)sx.stx_size;
    return 0;
}

static char room_run[AUDIT_ROOM_RUN];
static pthread_once_t room_run_once = PTHREAD_ONCE_INIT;

static void room_run_init(void) { memset(room_run, AUDIT_ROOM_BYTE, sizeof room_run); }

const char *audit_room_run(void) {
    pthread_once(&room_run_once, room_run_init);
    return room_run;
}

static int stopping(audit_room *r) {
    pthread_mutex_lock(&r->mu);
    int s = r->stopping;
    pthread_mutex_unlock(&r->mu);
    return s;
}

/* One append of room, under the file's lock, while fd is still the file at the path
 * and that file is (dev, ino) and short of `want`: 1 when it appended, 0
 * when there is nothing (more) to do, -1 with errno. *from: the size before
 * the first append; *size: the size after this one. */
static int append_once(audit_room *r, int fd, dev_t dev, ino_t ino, off_t want, off_t *from,
                       off_t *size) {
    while (flock(fd, LOCK_EX) != 0)
        if (errno != EINTR) return -1;
    audit_file_id at, mine;
    int rc = 0;
    if (audit_identify(-1, r->path, &at) == 0 && audit_identify(fd, NULL, &mine) == 0 &&
        at.dev == dev && at.ino == ino && mine.dev == dev && mine.ino == ino && mine.size < want) {
        if (*from < 0) *from = mine.size;
        off_t left = want - mine.size;
        size_t len = left > ROOM_WRITE ? ROOM_WRITE : (size_t)left;
        ssize_t w;
        while ((w = write(fd, audit_room_run(), len)) < 0 && errno == EINTR) {
        }
        rc = w > 0 ? 1 : -1;
        if (w > 0) *size = mine.size + w;
        if (w == 0) errno = EIO;
    }
    flock(fd, LOCK_UN);
    return rc;
}

/* Write back [from, to) and wait for it. */
static int write_back(int fd, off_t from, off_t to) {
    return to > from ? sync_file_range(fd, from, to - from,
                                       SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                           SYNC_FILE_RANGE_WAIT_AFTER)
                     : 0;
}

/* One round: the file at path, while it is still (dev, ino), gets room up to
 * `want`, written back a slice at a time (so that a batch's sync never
 * queues behind megabytes of room on the disk), then synced: its new size. */
static int fill(audit_room *r, dev_t dev, ino_t ino, off_t want) {
    int fd = open(r->path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return errno == ENOENT ? 0 : -1; /* renamed away meanwhile */
    off_t from = -1, synced = -1, size = -1;
    int rc;
    while ((rc = append_once(r, fd, dev, ino, want, &from, &size)) == 1 && !stopping(r)) {
        if (synced < 0) synced = from;
        if (size - synced >= ROOM_SLICE) {
            if (write_back(fd, synced, size) != 0) {
                rc = -1;
                break;
            }
            synced = size;
        }
    }
    if (rc >= 0 && from >= 0 && size > from &&
        (write_back(fd, synced < 0 ? from : synced, size) != 0 || fdatasync(fd) != 0))
        rc = -1;
    int err = errno;
    close(fd);
    errno = err;
    return rc < 0 ? -1 : 0;
}

static void note_round(audit_room *r, int rc) {
    char buf[128];
    if (rc != 0 && !r->failing)
        r->host->log(r->self, MCPG_LOG_WARN, "cannot write room ahead in %s: %s; batches grow "
                     "the file themselves (each sync then also records its size)",
                     r->path, strerror_r(errno, buf, sizeof buf));
    else if (rc == 0 && r->failing)
        r->host->log(r->self, MCPG_LOG_INFO, "writing room ahead in %s again", r->path);
    r->failing = rc != 0;
}

static void *room_main(void *arg) {
    audit_room *r = arg;
    off_t done = 0;
    ino_t done_ino = 0;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stopping && r->want <= done && r->ino == done_ino)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->stopping) break;
        dev_t dev = r->dev;
        ino_t ino = r->ino;
        off_t want = r->want;
        pthread_mutex_unlock(&r->mu);
        int rc = fill(r, dev, ino, want);
        note_round(r, rc);
        done = want;
        done_ino = ino;
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

audit_room *audit_room_start(const mcpg_host *host, mcpg_instance *self, const char *path) {
    audit_room *r = host->calloc(1, sizeof *r);
    if (!r) return NULL;
    *r = (audit_room){.host = host, .self = self, .path = path};
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (audit_sink_thread(&r->thread, room_main, r, "mcpg-audit-room") != 0) {
        host->log(self, MCPG_LOG_WARN, "cannot start the thread writing room ahead in %s: "
                  "batches grow the file themselves", path);
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
        host->free(r);
        return NULL;
    }
    return r;
}

void audit_room_want(audit_room *r, dev_t dev, ino_t ino, off_t size) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    if (r->ino != ino || r->dev != dev || size > r->want) {
        r->dev = dev;
        r->ino = ino;
        r->want = size;
        pthread_cond_signal(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

void audit_room_stop(audit_room *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    r->stopping = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    r->host->free(r);
}
