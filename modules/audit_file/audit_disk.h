/* audit_file: the file on disk and the hash chain in it (internal).
 *
 * Other writers may share the file: the previous generation's instance
 * during a reload, another instance naming the same path. So the chain's
 * head is never only what this instance remembers: each batch is written
 * under flock(LOCK_EX), and when the file is not where this instance left
 * it (its size changed, or it was rotated away) the head is read back from
 * the file's last line. Only regular files are locked, read back or
 * rotated; a FIFO or a device is simply written. */
#ifndef AUDIT_DISK_H
#define AUDIT_DISK_H

#include <mcpg/sdk.h>
#include <sys/types.h>
#include <time.h>

#include "audit_chain.h"

typedef struct audit_cfg {
    const char *path;
    int fsync;
    int64_t queue_max;
    int64_t max_batch_bytes;
    int64_t rotate_bytes;
    int64_t rotate_keep;
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
    off_t known_size;     /* the size after this instance's last write; -1: read the tail */
    int torn;             /* the file ends mid-line (a failed write that could not be
                             taken back): the next write starts on a new line */
    audit_chain_head head;
    audit_hasher *hasher;
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

/* After a batch (ok: it is written and synced): remember where the file
 * ends, rotate when it is due, unlock. */
void audit_disk_end(audit_disk *d, int ok);

void audit_disk_close(audit_disk *d);

#endif
