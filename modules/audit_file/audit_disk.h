/* audit_file: the file on disk and the hash chain in it (internal).
 *
 * Other writers may share the file: the previous generation's instance
 * during a reload, another instance naming the same path. So the chain's
 * head is never only what this instance remembers: each batch is written
 * under flock(LOCK_EX), and when the file is not where this instance left
 * it (its size changed, or it was rotated away) the head is read back from
 * the file's last line. Only regular files are locked, read back or
 * rotated; a FIFO or a device is simply written.
 *
 * A regular file is written at this instance's idea of its end with pwritev
 * (never O_APPEND): with preallocate_bytes the file is extended ahead of the
 * writes by a run of AUDIT_ROOM_BYTE (audit_chain.h), written and synced
 * once, so that a batch's fdatasync then flushes only the batch's pages: no
 * new blocks to allocate, no new size to record. Whether another writer
 * wrote meanwhile is then told by the byte at our end (room, or a line). */
#ifndef AUDIT_DISK_H
#define AUDIT_DISK_H

#include <mcpg/sdk.h>
#include <sys/types.h>
#include <time.h>

#include "audit_chain.h"
#include "audit_room.h"

typedef struct audit_cfg {
    const char *path;
    int fsync;
    int64_t queue_max;
    int64_t max_batch_bytes;
    int64_t rotate_bytes;
    int64_t rotate_keep;
    int64_t preallocate_bytes;  /* 0: no room written ahead, the file ends at its last line */
    const char *anchor_path;    /* NULL: no anchor */
    int64_t anchor_interval_ms;
} audit_cfg;

/* Writer thread only once started (start and stop run when it is not). */
typedef struct audit_disk {
    const mcpg_host *host;
    mcpg_instance *self;
    const audit_cfg *cfg;
    int fd;
    int regular;          /* a regular file: locked, read back, rotated */
    int locked;
    dev_t dev;            /* what fd is, to see a rotation by someone else */
    ino_t ino;
    off_t end;            /* where this instance's next line goes (past its last write);
                             -1: read the tail back first */
    off_t file_size;      /* the file's size as this instance left it, room included */
    off_t write_at;       /* where the last audit_disk_write started */
    int torn;             /* the file ends mid-line (a failed write that could not be
                             taken back): the next write starts on a new line */
    audit_chain_head head;
    audit_hasher *hasher;
    audit_room *room;     /* writes room ahead (preallocate_bytes), NULL: none */
    uint64_t rotations;
    time_t rotate_next_s; /* after a failed rotation, the next try (monotonic s) */
    time_t warned_s;      /* the last "not a chain line" warning (monotonic s) */
} audit_disk;

/* At start: open (create 0600), read the chain's head from the file (or from
 * path.1 when the file is empty), cut a torn last line. Refuses a file whose
 * last line carries no chain. 0, or MCPG_EIO after logging why. */
int audit_disk_open(audit_disk *d);

/* Before a batch: lock, follow a rotation done by another writer, read the
 * head back when someone else wrote. 0, or -1 with errno (the batch fails). */
int audit_disk_begin(audit_disk *d);

/* Between begin and end: write a chunk's n bytes at the file's end (room
 * made first when the file has too little). *written counts the bytes that
 * reached the file, also when it fails. 0, or -1 with errno. */
int audit_disk_write(audit_disk *d, const char *p, size_t n, size_t *written);

/* Take a failed chunk's `written` bytes back out of the file, so that it
 * holds exactly the events whose calls continued. 1 when they are gone. */
int audit_disk_take_back(audit_disk *d, size_t written);

/* After a batch (ok: it is written and synced): rotate when it is due, unlock. */
void audit_disk_end(audit_disk *d, int ok);

/* At a clean stop: cut the room off, so the file ends at its last line. */
void audit_disk_trim(audit_disk *d);

void audit_disk_close(audit_disk *d);

#endif
