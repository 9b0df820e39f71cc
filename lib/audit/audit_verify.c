/* lib/audit: checking a chain (see audit_verify.h).
 *
 * Lines are read in order across the files. Each one must carry the next
 * number and the previous line's hash. The first that does not is the fault;
 * what it was (edited, deleted, reordered, inserted) is told from that line,
 * the two before it and the lines after it:
 *   - its number is due but its prev is wrong: the line before it was
 *     edited, unless the line after it does not link to it either (then it
 *     is this line's own prefix that changed) or links past it to the line
 *     before (then it was inserted);
 *   - its number skips ahead: a reorder when the due number comes later,
 *     else lines were deleted;
 *   - its number goes back: an inserted copy, or, when it repeats the number
 *     of the line before it and links to the one before that, that line was
 *     inserted (forged with the right number and hash).
 * A line whose number alone changed keeps its prev, and the line after it
 * carries the number after the due one: that is an edit.
 * Without a key the chain cannot tell a line rewritten together with every
 * line after it, nor lines cut off the end: docs/audit.md says what anchors
 * them. */
#define _GNU_SOURCE /* getline */
#include "audit_verify.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One line as the verifier keeps it: no text, only what the rules need. */
typedef struct vline {
    int chained;
    uint64_t n;
    uint8_t prev[AUDIT_HASH_LEN], hash[AUDIT_HASH_LEN];
    size_t file;
    uint64_t fline;
} vline;

typedef struct verifier {
    audit_hasher *h;
    vline p1, p2;   /* the last two lines that passed, p1 the latest */
    uint64_t passed;
    uint64_t first; /* the first line's number */
    /* from the first fault on */
    int failed;
    vline bad;
    int have_next;
    vline next;     /* the line after the fault */
    int due_found;  /* a later line carries the number that was due */
    size_t due_file;
    uint64_t due_line;
    /* the anchored line, when one is asked for */
    uint64_t anchor_line;
    int anchor_seen;
    size_t anchor_file;
    uint64_t anchor_fline;
    uint8_t anchor_hash[AUDIT_HASH_LEN];
} verifier;

static const uint8_t genesis[AUDIT_HASH_LEN];

const char *audit_break_name(audit_break what) {
    switch (what) {
    case AUDIT_INTACT: return "intact";
    case AUDIT_EDITED: return "edited";
    case AUDIT_DELETED: return "deleted";
    case AUDIT_REORDERED: return "reordered";
    case AUDIT_INSERTED: return "inserted";
    case AUDIT_NOT_CHAIN: return "not a chain line";
    case AUDIT_TORN: return "torn";
    case AUDIT_IO: return "unreadable";
    case AUDIT_SHORT: return "cut short";
    case AUDIT_ANCHOR: return "not the anchored line";
    }
    return "?";
}

static int passes(const verifier *v, const vline *l) {
    if (!l->chained) return 0;
    if (v->passed == 0) /* line 1 starts at the genesis; a later one continues files not given */
        return l->n != 1 || memcmp(l->prev, genesis, AUDIT_HASH_LEN) == 0;
    return l->n == v->p1.n + 1 && memcmp(l->prev, v->p1.hash, AUDIT_HASH_LEN) == 0;
}

/* Enough seen after the fault to say what it was. */
static int decided(const verifier *v) {
    if (!v->have_next) return 0;
    if (!v->bad.chained || v->passed == 0) return 1;
    return v->bad.n <= v->p1.n + 1 || v->due_found;
}

/* One line in order. Returns 1 to go on reading, 0 when done. */
static int feed(verifier *v, const vline *l) {
    if (!v->failed) {
        if (passes(v, l)) {
            if (v->passed++ == 0) v->first = l->n;
            v->p2 = v->p1;
            v->p1 = *l;
            return 1;
        }
        v->failed = 1;
        v->bad = *l;
        return 1;
    }
    if (!v->have_next) {
        v->next = *l;
        v->have_next = 1;
    }
    if (!v->due_found && v->passed && l->chained && l->n == v->p1.n + 1) {
        v->due_found = 1;
        v->due_file = l->file;
        v->due_line = l->fline;
    }
    return !decided(v);
}

static audit_break found(audit_verify_result *out, audit_break what, const vline *at,
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static audit_break found(audit_verify_result *out, audit_break what, const vline *at,
                         const char *fmt, ...) {
    out->what = what;
    out->file = at->file;
    out->file_line = at->fline;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->detail, sizeof out->detail, fmt, ap);
    va_end(ap);
    return what;
}

static int same(const uint8_t *a, const uint8_t *b) { return memcmp(a, b, AUDIT_HASH_LEN) == 0; }

/* The line number was due, the link to the line before is broken. */
static audit_break classify_link(const verifier *v, audit_verify_result *out) {
    const vline *b = &v->bad, *n = &v->next, *p = &v->p1;
    int next_ok = v->have_next && n->chained;
    if (next_ok && n->n == b->n && same(n->prev, p->hash))
        return found(out, AUDIT_INSERTED, b,
                     "line %" PRIu64 " does not link to the line before it, and the line after "
                     "it carries the same number and does",
                     b->n);
    if (next_ok && n->n == b->n + 1 && !same(n->prev, b->hash))
        return found(out, AUDIT_EDITED, b,
                     "line %" PRIu64 " links neither to the line before it nor from the line "
                     "after it: its prefix was changed",
                     b->n);
    return found(out, AUDIT_EDITED, p,
                 "the hash of line %" PRIu64 " no longer matches the prev that line %" PRIu64
                 " carries",
                 p->n, b->n);
}

static audit_break classify(const verifier *v, audit_verify_result *out) {
    const vline *b = &v->bad, *n = &v->next, *p = &v->p1;
    if (!b->chained)
        return found(out, AUDIT_NOT_CHAIN, b,
                     "it does not start with the chain fields {\"line\":N,\"prev\":\"...\": "
                     "a line inserted, or its prefix edited");
    if (v->passed == 0)
        return found(out, AUDIT_EDITED, b,
                     "line 1 of a chain must carry the genesis prev (64 zeros)");
    uint64_t due = p->n + 1;
    if (b->n == due) return classify_link(v, out);
    if (v->have_next && n->chained && n->n == due + 1 && same(b->prev, p->hash))
        return found(out, AUDIT_EDITED, b,
                     "it carries line number %" PRIu64 " where %" PRIu64
                     " was due, between lines that are in order: its number was changed",
                     b->n, due);
    if (b->n > due && v->due_found)
        return found(out, AUDIT_REORDERED, b,
                     "it carries line %" PRIu64 " where line %" PRIu64
                     " was due; line %" PRIu64 " comes later (file %zu, line %" PRIu64 ")",
                     b->n, due, due, v->due_file + 1, v->due_line);
    const char *where =
        b->file != p->file ? " (at the start of this file: the end of the file before it, or "
                             "whole files between them)"
                           : "";
    if (b->n == due + 1)
        return found(out, AUDIT_DELETED, b, "line %" PRIu64 " is missing before it%s", due, where);
    if (b->n > due)
        return found(out, AUDIT_DELETED, b,
                     "lines %" PRIu64 "..%" PRIu64 " (%" PRIu64 " lines) are missing before it%s",
                     due, b->n - 1, b->n - due, where);
    if (b->file != p->file && b->fline == 1)
        return found(out, AUDIT_REORDERED, b,
                     "this file starts at line %" PRIu64 ", before the end of the file given "
                     "before it (line %" PRIu64 "): give the files oldest first",
                     b->n, p->n);
    if (v->passed >= 2 && b->n == p->n && same(b->prev, v->p2.hash))
        return found(out, AUDIT_INSERTED, p,
                     "line %" PRIu64 " is followed by another line %" PRIu64
                     " that links to the line before it",
                     p->n, b->n);
    return found(out, AUDIT_INSERTED, b,
                 "it carries line %" PRIu64 " after line %" PRIu64
                 ": a copy of an earlier line, or a line put here",
                 b->n, p->n);
}

static void read_line(verifier *v, vline *l, const char *text, size_t n) {
    l->chained = audit_chain_parse(text, n, &l->n, l->prev);
    if (audit_hash_line(v->h, text, n, l->hash) != 0) memset(l->hash, 0, AUDIT_HASH_LEN);
}

/* Is this run of bytes (to the file's end: room holds no '\n') all room,
 * written ahead by audit_file? Bytes after room are a torn end. */
static int all_room(const char *text, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (text[k] != AUDIT_ROOM_BYTE) return 0;
    return 1;
}

/* Feed file i's lines; 0 when done with it (or with everything), -1 on a
 * read error, 1 when the verifier has decided. */
static int feed_file(verifier *v, const char *path, size_t i, int last_file,
                     audit_verify_result *out) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char *text = NULL;
    size_t cap = 0;
    ssize_t len;
    uint64_t fline = 0;
    int rc = 0;
    errno = 0;
    while ((len = getline(&text, &cap, f)) > 0) {
        vline l = {.file = i, .fline = ++fline};
        int whole = text[len - 1] == '\n';
        if (text[0] == AUDIT_ROOM_BYTE && all_room(text, (size_t)len)) break; /* the room: the end */
        if (!whole && last_file) { /* a write a crash cut short: the file's end */
            if (!v->failed) out->torn_tail = 1;
            break;
        }
        read_line(v, &l, text, (size_t)len - (size_t)whole);
        if (v->anchor_line && l.chained && l.n == v->anchor_line && !v->anchor_seen) {
            v->anchor_seen = 1;
            v->anchor_file = i;
            v->anchor_fline = fline;
            memcpy(v->anchor_hash, l.hash, AUDIT_HASH_LEN);
        }
        if (!whole && !v->failed) {
            found(out, AUDIT_TORN, &l, "it has no final newline, and files follow it");
            v->failed = 1;
            v->have_next = 1; /* nothing more to learn */
            rc = 1;
            break;
        }
        if (!feed(v, &l)) {
            rc = 1;
            break;
        }
    }
    if (rc == 0 && ferror(f)) rc = -1;
    int err = errno;
    free(text);
    fclose(f);
    errno = err;
    return rc;
}

/* Is files[i] one of the files before it under another name? */
static int seen_before(const char *const *files, size_t i, audit_verify_result *out) {
    struct stat a, b;
    if (stat(files[i], &a) != 0) return 0;
    for (size_t k = 0; k < i; k++) {
        if (stat(files[k], &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            out->twice = 1;
            out->twice_file = i;
            out->twice_of = k;
            return 1;
        }
    }
    return 0;
}

static audit_break verify_files(const char *const *files, size_t n, const audit_chain_head *anchor,
                                audit_verify_result *out);

audit_break audit_verify_files(const char *const *files, size_t n, audit_verify_result *out) {
    return verify_files(files, n, NULL, out);
}

audit_break audit_verify_anchored(const char *const *files, size_t n, const audit_chain_head *anchor,
                                  audit_verify_result *out) {
    return verify_files(files, n, anchor, out);
}

static audit_break verify_files(const char *const *files, size_t n, const audit_chain_head *anchor,
                                audit_verify_result *out) {
    *out = (audit_verify_result){.what = AUDIT_INTACT};
    verifier v = {.h = audit_hasher_new(), .anchor_line = anchor ? anchor->line : 0};
    if (!v.h) {
        out->what = AUDIT_IO;
        out->err = ENOMEM;
        return AUDIT_IO;
    }
    size_t last = n; /* the last file that is not another's second name */
    for (size_t i = n; i-- > 0 && last == n;)
        if (!seen_before(files, i, out)) last = i;
    for (size_t i = 0; i < n; i++) {
        if (i > last || seen_before(files, i, out)) continue;
        int rc = feed_file(&v, files[i], i, i == last, out);
        if (rc < 0) {
            out->what = AUDIT_IO;
            out->file = i;
            out->err = errno ? errno : EIO;
            audit_hasher_free(v.h);
            return AUDIT_IO;
        }
        if (rc > 0) break;
    }
    audit_hasher_free(v.h);
    if (out->what == AUDIT_TORN) return out->what;
    if (v.failed) return classify(&v, out);
    out->first_line = v.passed ? v.first : 0;
    out->last_line = v.passed ? v.p1.n : 0;
    out->lines = v.passed;
    out->head.line = v.passed ? v.p1.n : 0;
    memcpy(out->head.hash, v.passed ? v.p1.hash : genesis, AUDIT_HASH_LEN);
    if (!anchor || anchor->line == 0) return AUDIT_INTACT;
    if (!v.anchor_seen) {
        out->what = AUDIT_SHORT;
        out->file = n ? n - 1 : 0;
        out->file_line = 0;
        snprintf(out->detail, sizeof out->detail,
                 "the chain ends at line %" PRIu64 " and the anchor holds line %" PRIu64
                 ": lines were cut off its end, or the file was emptied or replaced",
                 out->last_line, anchor->line);
        return AUDIT_SHORT;
    }
    if (memcmp(v.anchor_hash, anchor->hash, AUDIT_HASH_LEN) != 0) {
        out->what = AUDIT_ANCHOR;
        out->file = v.anchor_file;
        out->file_line = v.anchor_fline;
        snprintf(out->detail, sizeof out->detail,
                 "line %" PRIu64 " is not the line the anchor recorded: the chain was rewritten "
                 "from there on",
                 anchor->line);
        return AUDIT_ANCHOR;
    }
    return AUDIT_INTACT;
}
