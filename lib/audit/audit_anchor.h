/* lib/audit: the chain's anchor, a record of its head kept off the audit
 * file. The chain proves that no line was edited, removed or inserted
 * between lines that are there; it cannot tell that lines were cut off the
 * end, or that the file was emptied. The anchor can: audit_file writes
 * the head (its last line's number and hash) to a second place the operator
 * chooses, at least every anchor_interval_ms and at a clean stop, and
 * `mcpg audit verify --anchor FILE` requires the chain to hold that line with
 * that hash. The anchor file is one JSON line,
 *     {"line":N,"sha256":"<64 hex>"}
 * replaced whole (written aside, synced, renamed over). */
#ifndef AUDIT_ANCHOR_H
#define AUDIT_ANCHOR_H

#include "audit_chain.h"

/* Replace the anchor at path with head. 0, or -1 with errno. Blocks: the
 * writer thread's, never a loop's. */
int audit_anchor_write(const char *path, const audit_chain_head *head);

/* Read the anchor at path. 0; -1 with errno (EINVAL: not an anchor). */
int audit_anchor_read(const char *path, audit_chain_head *out);

#endif
