/* lib/audit: the audit file's SHA-256 hash chain. Its rules live here and
 * only here: audit_file writes by them, `mcpg audit verify` checks by them,
 * and docs/audit.md states them.
 *
 * A chained line is an event line (audit_format.h) whose leading '{' is
 * replaced by
 *     {"line":N,"prev":"<64 lower-case hex>",
 * N counts the chain's lines from 1 and goes on across rotation; prev is the
 * SHA-256 of the chain's line N-1: every byte of it, its own prefix included,
 * without its final '\n'. Line 1's prev is 64 zeros (the genesis hash). */
#ifndef AUDIT_CHAIN_H
#define AUDIT_CHAIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AUDIT_HASH_LEN 32
/* The longest prefix: {"line":<20 digits>,"prev":"<64 hex>", */
#define AUDIT_CHAIN_PREFIX_MAX (sizeof "{\"line\":,\"prev\":\"\"," - 1 + 20 + 2 * AUDIT_HASH_LEN)

/* Where a chain stands: its last line's number and hash. The genesis (no
 * line yet) is {0, all zeros}. */
typedef struct audit_chain_head {
    uint64_t line;
    uint8_t hash[AUDIT_HASH_LEN];
} audit_chain_head;

/* A reusable SHA-256 context (OpenSSL's EVP, fetched once): one per thread. */
typedef struct audit_hasher audit_hasher;
audit_hasher *audit_hasher_new(void); /* NULL when out of memory */
void audit_hasher_free(audit_hasher *h);

/* The hash of one line: `n` bytes, without its final '\n'. 0, or -1 when
 * OpenSSL fails. */
int audit_hash_line(audit_hasher *h, const char *line, size_t n, uint8_t out[AUDIT_HASH_LEN]);

/* Chain one formatted event line (`body`, body_len bytes, "{...}\n" as
 * audit_format_line writes it) into dst, which must hold AUDIT_CHAIN_PREFIX_MAX
 * + body_len bytes: the next line after *head. On success *head is that
 * line and the bytes written are returned; 0 when hashing failed (*head is
 * unchanged). */
size_t audit_chain_line(audit_hasher *h, audit_chain_head *head, char *dst, const char *body,
                        size_t body_len);

/* Read a line's chain fields: 1 when `line` (n bytes, no '\n') starts with a
 * well-formed prefix (then *line_no and prev are set), 0 when it does not. */
int audit_chain_parse(const char *line, size_t n, uint64_t *line_no, uint8_t prev[AUDIT_HASH_LEN]);

/* "abcd…" (2*AUDIT_HASH_LEN hex digits and a NUL) for logs and reports. */
void audit_hash_hex(const uint8_t hash[AUDIT_HASH_LEN], char out[2 * AUDIT_HASH_LEN + 1]);

/* ---- the end of an existing file ---- */

/* The room written ahead: audit_file may extend its live file with a run of
 * this byte before it needs it (preallocate_bytes), so that a batch's
 * fdatasync flushes the batch's data and nothing else (no new blocks, no new
 * size). The file's content ends where the room starts: at the first line
 * that starts with this byte, every byte from there on being room. A space
 * keeps the file readable as text (JSON allows whitespace between values; a
 * NUL would make grep call it binary). The room is cut off at rotation and
 * at a clean stop. */
#define AUDIT_ROOM_BYTE ' '

/* Where the lines of the file open on fd (readable, `size` bytes) end: just
 * past the last byte that is not room (0 when it is all room, or empty).
 * Reads backwards over the room only. -1 on a read error (errno). */
off_t audit_content_end(int fd, off_t size);

typedef enum audit_tail_kind {
    AUDIT_TAIL_EMPTY = 0,     /* no whole line */
    AUDIT_TAIL_CHAINED = 1,   /* the last whole line is a chain line: head is set */
    AUDIT_TAIL_UNCHAINED = 2  /* the last whole line carries no chain fields */
} audit_tail_kind;

typedef struct audit_tail {
    audit_tail_kind kind;
    audit_chain_head head; /* AUDIT_TAIL_CHAINED */
    off_t whole;           /* bytes up to and including the last '\n': where the next line goes */
    off_t size;            /* bytes up to the last one that is not room: size > whole means a
                              torn last line (or a batch a crash cut short) to take back */
    off_t file_size;       /* the file's size: file_size > size is the room */
} audit_tail;

/* Read the end of the regular file open on fd (readable): its last whole line,
 * whether bytes follow it, and the room after it. Reads backwards, never the
 * whole file. With `window` > 0 (at a start, after a crash) the chain is also
 * walked through the window's last bytes: a batch whose sync a power loss cut
 * short can leave a page of room inside its lines (the page never reached
 * the disk); its lines from the first that does not continue the chain are
 * then counted as torn. 0, or -1 with errno. */
int audit_chain_read_tail(int fd, audit_hasher *h, off_t window, audit_tail *out);

#endif
