/* The journal behind a file-backed coordinator_memory (config "path").
 *
 * Every change the store makes (coord_store.h's log hook, under the key's
 * shard lock) is appended as one record, the key's whole new state, to an
 * in-memory buffer: no I/O on the loop. A writer thread (started by
 * cm_journal_start) takes everything appended so far in one go, writes it
 * with one pwrite and makes it durable with one fdatasync (group commit: the
 * records of one loop turn, and all that came while a sync was in flight,
 * share one), then advances `durable` to the last sequence it wrote and calls
 * `progress` so the loops answer the ops that waited for it.
 *
 * A failed write or sync advances `resolved` but not `durable`: the ops that
 * waited answer MCPG_EUNAVAIL (their change stays in memory), the bytes are
 * kept and written again, first, with the next batch (retried every 200 ms);
 * the first failure of an episode and its end are logged once.
 *
 * File: an 8-byte magic "MCPGJNL1", then records:
 *   u32 len | u32 crc32c(len) | u32 crc32c(payload) | payload[len]
 *   payload: u8 type ('P' put, 'D' delete, 'R' revision counter)
 *            | u64 revision | i64 expiry (wall-clock ms since the epoch, 0: none)
 *            | u32 key length | key | value
 * all little-endian. A put record is the key's whole state, so replaying the
 * journal in order (a record twice is harmless) rebuilds the store; a key
 * past its expiry at replay is left out.
 *
 * Compaction: after a batch, when the file is over 4x the live data (keys,
 * values and record headers) and over compact_min bytes, the writer writes a
 * snapshot of the live keys to "<path>.compact", fsyncs it, renames it over
 * the journal and fsyncs the directory. The writer does nothing else
 * meanwhile: records appended during the snapshot wait in the buffer and go
 * to the new file after it (a record of a key the snapshot already had is a
 * state, so the last one wins either way); their ops wait that long. */
#ifndef COORD_JOURNAL_H
#define COORD_JOURNAL_H

#include <mcpg/sdk.h>

#include <stdint.h>

#include "coord_store.h"

typedef struct cm_journal cm_journal;

/* Open (creating it when absent) and lock the journal at path, and replay it
 * into s. A torn last record (a crash mid-write) is cut off with a warning
 * naming the file and offset; any other bad record is an error naming them
 * (logged; MCPG_EIO). MCPG_EIO too when the file cannot be opened, locked (in
 * use by another process, or by an instance of this one a reload made) or
 * written. */
int cm_journal_open(const mcpg_host *h, mcpg_instance *self, const char *path, cm_store *s,
                    uint64_t compact_min, cm_journal **out);

/* The store's log hook (coord_store.h), ctx the journal. */
uint64_t cm_journal_log(void *ctx, int type, const char *key, size_t klen, const char *val,
                        size_t vlen, uint64_t revision, uint64_t expires_us);

/* Start the writer thread; progress(arg) runs on it after each batch. */
int cm_journal_start(cm_journal *j, void (*progress)(void *arg), void *arg);

/* A loop's turn is over: write what is appended (any thread). */
void cm_journal_kick(cm_journal *j);

uint64_t cm_journal_appended(cm_journal *j); /* the last sequence appended */
uint64_t cm_journal_durable(cm_journal *j);  /* every record up to it is on disk */
uint64_t cm_journal_resolved(cm_journal *j); /* ... or failed, when above durable */

/* Write and sync what is left, stop the writer. The stop line's figures. */
void cm_journal_stop(cm_journal *j);
void cm_journal_stats(cm_journal *j, uint64_t *records, uint64_t *syncs, uint64_t *compactions,
                      uint64_t *file_bytes);
void cm_journal_free(cm_journal *j);

/* For validate(): NULL when a journal could be kept at path, else why. */
const char *cm_journal_path_problem(const char *path, char *buf, size_t n);

#endif
