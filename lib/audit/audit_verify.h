/* lib/audit: checking a chained audit trail (one file, or a rotated set
 * oldest first) by the rules of audit_chain.h. `mcpg audit verify` prints
 * what this finds; audit_file's tests check what they wrote with it. */
#ifndef AUDIT_VERIFY_H
#define AUDIT_VERIFY_H

#include "audit_chain.h"

#include <stddef.h>
#include <stdint.h>

/* What broke the chain, as far as the lines tell. Append only. */
typedef enum audit_break {
    AUDIT_INTACT = 0,
    AUDIT_EDITED,    /* a line's bytes changed */
    AUDIT_DELETED,   /* line numbers are missing */
    AUDIT_REORDERED, /* a line stands where another was due, which comes later */
    AUDIT_INSERTED,  /* a line that was not written there */
    AUDIT_NOT_CHAIN, /* a line without chain fields: inserted, or its prefix edited */
    AUDIT_TORN,      /* a line without its '\n' that is not the set's last */
    AUDIT_IO,        /* a file could not be read (errno in `err`) */
    AUDIT_SHORT,     /* intact, but it ends before the anchored line: its tail was cut */
    AUDIT_ANCHOR     /* the anchored line is there, with other bytes than were anchored */
} audit_break;

typedef struct audit_verify_result {
    audit_break what;
    /* the first line at fault (what != AUDIT_INTACT): files[file], 1-based line */
    size_t file;
    uint64_t file_line;
    char detail[320]; /* one sentence: why, and what the line numbers say */
    int err;          /* AUDIT_IO */
    /* the chain (AUDIT_INTACT) */
    uint64_t first_line, last_line, lines;
    audit_chain_head head;
    int torn_tail;    /* the last file ends in a line without '\n' (a write cut
                         short by a crash; audit_file removes it at its next
                         start): reported, not a break */
    int twice;        /* files[twice_file] is files[twice_of] under another name
                         (a rotation a crash cut short: audit_file takes the
                         extra name back at its next start): read once */
    size_t twice_file, twice_of;
} audit_verify_result;

/* Check files[0..n) (oldest first) as one chain. Returns out->what. */
audit_break audit_verify_files(const char *const *files, size_t n, audit_verify_result *out);

/* The same, and then the anchor (audit_anchor.h): the chain must hold line
 * anchor->line with hash anchor->hash. AUDIT_SHORT when it ends before it,
 * AUDIT_ANCHOR when that line differs; out->detail says which line. */
audit_break audit_verify_anchored(const char *const *files, size_t n, const audit_chain_head *anchor,
                                  audit_verify_result *out);

/* "edited", "deleted", ... */
const char *audit_break_name(audit_break what);

#endif
