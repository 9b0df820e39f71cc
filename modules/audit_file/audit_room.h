/* audit_file: the room written ahead of the live file (internal).
 *
 * A batch written over room that is already on disk costs one fdatasync of
 * its own pages; a batch that grows the file also makes the sync write the
 * file's new size and block map, which on the disks measured here took the
 * sync from ~85 µs to ~550 µs. So a thread of its own appends room
 * (AUDIT_ROOM_BYTE) to the file ahead of the writer and syncs it, away from
 * the batches. It only ever appends, on a descriptor of its own opened
 * O_APPEND: an append lands past every byte already there, so it can never
 * cover a line, whoever wrote it (the writer of the batches, or another
 * instance sharing the file). When it falls behind, a batch simply grows the
 * file as it did without room. */
#ifndef AUDIT_ROOM_H
#define AUDIT_ROOM_H

#include <mcpg/sdk.h>
#include <sys/types.h>

typedef struct audit_room audit_room;

/* A file's identity and size, without its times. On kernels with
 * fine-grained timestamps a stat that reads the times makes the next write
 * stamp the inode anew, which a batch's fdatasync then writes as well: two
 * disk requests a sync instead of one (measured). So the checks made around
 * the batches ask for what they use only. `path` NULL: the file open on fd.
 * 0, or -1 with errno. */
typedef struct audit_file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
} audit_file_id;

int audit_identify(int fd, const char *path, audit_file_id *out);

/* Start the thread ("mcpg-audit-room") for the file at `path`: it writes the
 * room the writer asks for (audit_room_want). NULL when it cannot start
 * (logged): batches then grow the file themselves. */
audit_room *audit_room_start(const mcpg_host *host, mcpg_instance *self, const char *path);

/* AUDIT_ROOM_RUN bytes of AUDIT_ROOM_BYTE, to write room from (any thread). */
#define AUDIT_ROOM_RUN 65536
const char *audit_room_run(void);

/* The writer, after a batch: the file it writes (dev, ino) should hold room
 * up to `size` bytes. Wakes the thread; never waits for it. */
void audit_room_want(audit_room *r, dev_t dev, ino_t ino, off_t size);

/* Stop and join the thread (an append in progress finishes first). */
void audit_room_stop(audit_room *r);

#endif
