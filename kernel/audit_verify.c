/* mcpg audit verify [--anchor FILE] FILE...: check an audit trail's hash chain.
 *
 * The files are one chain, oldest first (a rotated set: path.N .. path.1,
 * path). Exit 0 when the chain is intact; 1 naming the file and the first
 * line that was edited, deleted, reordered or inserted; 2 when a file cannot
 * be read or the command is wrong. With --anchor (audit_file's anchor_path:
 * the head kept off the file), the chain must also hold the anchored line
 * with its hash: a tail cut off, or a file emptied, then fails (1). The
 * rules are lib/audit's (audit_chain.h, audit_anchor.h),
 * the same the audit_file sink writes by; docs/audit.md states them. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "audit_anchor.h"
#include "audit_verify.h"

int audit_command(int argc, char **argv); /* main.c: mcpg audit ... */

static int usage(void) {
    fprintf(stderr, "usage: mcpg audit verify [--anchor ANCHOR_FILE] FILE...   (a rotated set "
                    "oldest first: audit.jsonl.2 audit.jsonl.1 audit.jsonl; ANCHOR_FILE is "
                    "audit_file's anchor_path)\n"
                    "       mcpg audit cat FILE...   (the whole lines, without the room "
                    "audit_file writes ahead)\n"
                    "       mcpg audit tail [-n LINES] [-f] FILE   (the last lines; -f: follow "
                    "the live file, across rotation)\n");
    return 2;
}

static void print_intact(const char *const *files, size_t n, const audit_verify_result *r) {
    char hex[2 * AUDIT_HASH_LEN + 1];
    audit_hash_hex(r->head.hash, hex);
    if (r->lines == 0)
        printf("intact: no chain lines in %zu file%s\n", n, n == 1 ? "" : "s");
    else
        printf("intact: lines %" PRIu64 "..%" PRIu64 " (%" PRIu64 " lines in %zu file%s); "
               "last line sha256 %s\n",
               r->first_line, r->last_line, r->lines, n, n == 1 ? "" : "s", hex);
    if (r->first_line > 1)
        printf("note: the chain starts at line %" PRIu64 ": its earlier lines are in files "
               "not given (removed by rotation?)\n",
               r->first_line);
    if (r->twice)
        printf("note: %s is %s under another name (a rotation a crash cut short; audit_file "
               "removes that name at its next start): read once\n",
               files[r->twice_file], files[r->twice_of]);
    if (r->torn_tail)
        printf("note: %s ends with a torn line (a write cut short by a crash; its call never "
               "continued): not part of the chain, audit_file removes it at its next start\n",
               files[n - 1]);
}

static int verify(int argc, char **argv) {
    const char *anchor_path = NULL;
    if (argc >= 2 && !strcmp(argv[0], "--anchor")) {
        anchor_path = argv[1];
        argc -= 2, argv += 2;
    }
    if (argc < 1) return usage();
    audit_chain_head anchor = {0};
    if (anchor_path && audit_anchor_read(anchor_path, &anchor) != 0) {
        fprintf(stderr, "mcpg audit verify: --anchor %s: %s\n", anchor_path,
                errno == EINVAL ? "not an anchor ({\"line\":N,\"sha256\":\"...\"})" : strerror(errno));
        return 2;
    }
    const char *const *files = (const char *const *)argv;
    size_t n = (size_t)argc;
    audit_verify_result r;
    audit_break what = anchor_path ? audit_verify_anchored(files, n, &anchor, &r)
                                   : audit_verify_files(files, n, &r);
    if (what == AUDIT_IO) {
        fprintf(stderr, "mcpg audit verify: %s: %s\n", files[r.file], strerror(r.err));
        return 2;
    }
    if (what == AUDIT_INTACT) {
        print_intact(files, n, &r);
        if (anchor_path) printf("anchored: line %" PRIu64 " is the one %s holds\n", anchor.line, anchor_path);
        return 0;
    }
    printf("%s:%" PRIu64 ": %s: %s\n", files[r.file], r.file_line, audit_break_name(what),
           r.detail);
    return 1;
}

int audit_cat_command(int argc, char **argv);  /* audit_cat.c */
int audit_tail_command(int argc, char **argv); /* audit_cat.c */

int audit_command(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "verify") == 0) return verify(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "cat") == 0) return audit_cat_command(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "tail") == 0) return audit_tail_command(argc - 2, argv + 2);
    return usage();
}
