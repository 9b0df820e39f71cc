/* lib/audit: the hash chain's rules and the verifier, on files this test
 * writes and then edits in each way the verifier must name: a field
 * changed, a line deleted, two lines swapped, a line inserted (a copy, and
 * one forged with the right number and hash), a prefix changed, across two
 * files, a torn end. Prints the chain's cost per line. */
#define _GNU_SOURCE
#include "audit_chain.h"
#include "audit_verify.h"

#include <fcntl.h>
#include <mcpg/check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[64];
static audit_hasher *hasher;

enum { MAXL = 64, LINE_CAP = 512 };

/* A chain as lines of text (each with its '\n'). */
typedef struct chain {
    char line[MAXL][LINE_CAP];
    size_t n;
} chain;

static void chain_build(chain *c, size_t n, audit_chain_head *head) {
    c->n = n;
    for (size_t i = 0; i < n; i++) {
        char body[128];
        int len = snprintf(body, sizeof body, "{\"ts\":\"t\",\"event\":\"e\",\"seq\":%zu}\n",
                           i + 1);
        size_t w = audit_chain_line(hasher, head, c->line[i], body, (size_t)len);
        MCPG_REQUIRE(w > 0 && w < LINE_CAP, "chain line %zu", i);
        c->line[i][w] = '\0';
    }
}

static void write_lines(const char *path, chain *c, size_t from, size_t to) {
    FILE *f = fopen(path, "w");
    MCPG_REQUIRE(f, "open %s", path);
    for (size_t i = from; i < to; i++) fputs(c->line[i], f);
    fclose(f);
}

static void remove_line(chain *c, size_t i) {
    memmove(c->line[i], c->line[i + 1], (c->n - i - 1) * LINE_CAP);
    c->n--;
}

static void insert_line(chain *c, size_t i, const char *text) {
    memmove(c->line[i + 1], c->line[i], (c->n - i) * LINE_CAP);
    snprintf(c->line[i], LINE_CAP, "%s", text);
    c->n++;
}

static char *path_of(const char *name) {
    static char p[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* Verify `files` and expect `what` at files[file], line `line`. */
static void expect(const char *label, const char *const *files, size_t n, audit_break what,
                   size_t file, uint64_t line) {
    audit_verify_result r;
    audit_break got = audit_verify_files(files, n, &r);
    if (what == AUDIT_INTACT) {
        MCPG_CHECK(got == AUDIT_INTACT, "%s: intact, got %s at file %zu line %llu: %s", label,
                   audit_break_name(got), r.file, (unsigned long long)r.file_line, r.detail);
        return;
    }
    MCPG_CHECK(got == what && r.file == file && r.file_line == line,
               "%s: want %s at file %zu line %llu, got %s at file %zu line %llu: %s", label,
               audit_break_name(what), file, (unsigned long long)line, audit_break_name(got),
               r.file, (unsigned long long)r.file_line, r.detail);
}

static void expect1(const char *label, chain *c, audit_break what, uint64_t line) {
    const char *f = path_of("one.jsonl");
    write_lines(f, c, 0, c->n);
    expect(label, &f, 1, what, 0, line);
}

static void test_sha256(void) {
    uint8_t h[AUDIT_HASH_LEN];
    char hex[2 * AUDIT_HASH_LEN + 1];
    MCPG_REQUIRE(audit_hash_line(hasher, "abc", 3, h) == 0, "hash");
    audit_hash_hex(h, hex);
    /* FIPS 180-2's example "abc" */
    MCPG_CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0,
               "sha256(abc) = %s", hex);
}

static void test_prefix(void) {
    audit_chain_head head = {.line = UINT64_MAX - 1};
    memset(head.hash, 0xab, sizeof head.hash);
    const char body[] = "{\"ts\":\"x\"}\n";
    char line[256];
    size_t n = audit_chain_line(hasher, &head, line, body, sizeof body - 1);
    MCPG_CHECK(n == AUDIT_CHAIN_PREFIX_MAX + sizeof body - 2, "the longest prefix: %zu", n);
    line[n] = '\0';
    MCPG_CHECK(strncmp(line, "{\"line\":18446744073709551615,\"prev\":\"abab", 41) == 0, "%s",
               line);
    uint64_t no;
    uint8_t prev[AUDIT_HASH_LEN];
    MCPG_CHECK(audit_chain_parse(line, n - 1, &no, prev) == 1 && no == UINT64_MAX, "parse");
    MCPG_CHECK(prev[0] == 0xab && prev[31] == 0xab, "prev");
    MCPG_CHECK(head.line == UINT64_MAX, "the head moved");
    const char *bad[] = {"{\"ts\":1}", "{\"line\":0,\"prev\":\"", "{\"line\":01,",
                         "{\"line\":18446744073709551616,\"prev\":\"",
                         "{\"line\":1,\"prev\":\"ABAB"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        MCPG_CHECK(audit_chain_parse(bad[i], strlen(bad[i]), &no, prev) == 0, "refused: %s",
                   bad[i]);
}

static void test_single_file(void) {
    audit_chain_head head = {0};
    chain c;
    chain_build(&c, 10, &head);
    expect1("intact", &c, AUDIT_INTACT, 0);

    chain e = c;
    char *seq = strstr(e.line[4], "\"seq\":5");
    seq[6] = '7'; /* a field changed in line 5 */
    expect1("a field of line 5 changed", &e, AUDIT_EDITED, 5);

    e = c;
    e.line[4][20] = e.line[4][20] == '0' ? '1' : '0'; /* "prev" of line 5 */
    expect1("the prev of line 5 changed", &e, AUDIT_EDITED, 5);

    e = c;
    memcpy(e.line[4], "{\"line\":7,", 10); /* its number: 5 -> 7 */
    expect1("the number of line 5 changed", &e, AUDIT_EDITED, 5);

    e = c;
    remove_line(&e, 4);
    expect1("line 5 deleted", &e, AUDIT_DELETED, 5);

    e = c;
    remove_line(&e, 4);
    remove_line(&e, 4);
    expect1("lines 5 and 6 deleted", &e, AUDIT_DELETED, 5);

    e = c;
    char tmp[LINE_CAP];
    memcpy(tmp, e.line[4], LINE_CAP);
    memcpy(e.line[4], e.line[5], LINE_CAP);
    memcpy(e.line[5], tmp, LINE_CAP);
    expect1("lines 5 and 6 swapped", &e, AUDIT_REORDERED, 5);

    e = c;
    memcpy(tmp, e.line[1], LINE_CAP);
    remove_line(&e, 1);
    insert_line(&e, 7, tmp);
    expect1("line 2 moved after line 8", &e, AUDIT_REORDERED, 2);

    e = c;
    insert_line(&e, 5, c.line[2]);
    expect1("a copy of line 3 inserted after line 5", &e, AUDIT_INSERTED, 6);

    /* forged: the right number and the hash of the line before it */
    e = c;
    audit_chain_head at5 = {.line = 5};
    MCPG_REQUIRE(audit_hash_line(hasher, c.line[4], strlen(c.line[4]) - 1, at5.hash) == 0,
                 "hash");
    char forged[LINE_CAP];
    const char body[] = "{\"ts\":\"t\",\"event\":\"forged\"}\n";
    forged[audit_chain_line(hasher, &at5, forged, body, sizeof body - 1)] = '\0';
    insert_line(&e, 5, forged);
    expect1("a forged line inserted after line 5", &e, AUDIT_INSERTED, 6);

    /* the same, but with a wrong prev */
    e = c;
    forged[20] = forged[20] == '0' ? '1' : '0';
    insert_line(&e, 5, forged);
    expect1("a forged line with a wrong prev after line 5", &e, AUDIT_INSERTED, 6);

    e = c;
    insert_line(&e, 3, "{\"ts\":\"t\",\"event\":\"mcpg.tool.call.allowed\"}\n");
    expect1("an unchained line inserted", &e, AUDIT_NOT_CHAIN, 4);

    e = c;
    seq = strstr(e.line[0], "\"seq\":1");
    seq[6] = '9';
    expect1("line 1 edited", &e, AUDIT_EDITED, 1);

    e = c;
    e.line[0][40] = e.line[0][40] == '0' ? '1' : '0';
    expect1("line 1's genesis prev edited", &e, AUDIT_EDITED, 1);

    /* the documented limit: the last line has no line after it to check it;
     * the head's hash (logged at stop, printed by verify) anchors it */
    e = c;
    seq = strstr(e.line[9], "\"seq\":10");
    seq[6] = '9';
    expect1("the last line edited (not detectable by the chain alone)", &e, AUDIT_INTACT, 0);

    /* a chain whose start is in a file not given */
    e = c;
    remove_line(&e, 0);
    remove_line(&e, 0);
    const char *f = path_of("later.jsonl");
    write_lines(f, &e, 0, e.n);
    audit_verify_result r;
    MCPG_CHECK(audit_verify_files(&f, 1, &r) == AUDIT_INTACT && r.first_line == 3 &&
                   r.last_line == 10 && r.lines == 8,
               "starts at line 3: %llu..%llu", (unsigned long long)r.first_line,
               (unsigned long long)r.last_line);
}

static void test_rotated_set(void) {
    audit_chain_head head = {0};
    chain c;
    chain_build(&c, 12, &head);
    const char *files[3] = {path_of("a.jsonl.2"), path_of("a.jsonl.1"), path_of("a.jsonl")};
    write_lines(files[0], &c, 0, 4);
    write_lines(files[1], &c, 4, 8);
    write_lines(files[2], &c, 8, 12);
    expect("three files", files, 3, AUDIT_INTACT, 0, 0);
    audit_verify_result r;
    audit_verify_files(files, 3, &r);
    MCPG_CHECK(r.head.line == 12 && memcmp(r.head.hash, head.hash, AUDIT_HASH_LEN) == 0,
               "the head is the writer's");

    /* a rotation a crash cut short leaves one file under two names */
    const char *twice = path_of("a.jsonl.1-link");
    MCPG_REQUIRE(link(files[1], twice) == 0, "link");
    MCPG_CHECK(audit_verify_files((const char *[]){files[0], files[1], twice, files[2]}, 4, &r) ==
                       AUDIT_INTACT &&
                   r.twice && r.twice_file == 2 && r.twice_of == 1 && r.lines == 12,
               "a file under two names is read once: %s", r.detail);
    MCPG_CHECK(audit_verify_files((const char *[]){files[0], files[1], files[2], twice}, 4, &r) ==
                       AUDIT_INTACT &&
                   r.twice && r.twice_file == 3 && r.lines == 12,
               "wherever the second name stands");
    unlink(twice);

    expect("the middle file missing", (const char *[]){files[0], files[2]}, 2, AUDIT_DELETED, 1,
           1);
    expect("out of order", (const char *[]){files[1], files[0], files[2]}, 3, AUDIT_REORDERED, 1,
           1);

    chain e = c;
    char *seq = strstr(e.line[4], "\"seq\":5");
    seq[6] = '6';
    write_lines(files[1], &e, 4, 8);
    expect("the first line of a rotated file edited", files, 3, AUDIT_EDITED, 1, 1);

    e = c;
    e.line[4][20] = e.line[4][20] == '0' ? '1' : '0';
    write_lines(files[1], &e, 4, 8);
    expect("the prev of a rotated file's first line edited", files, 3, AUDIT_EDITED, 1, 1);

    write_lines(files[1], &c, 4, 7); /* its last line gone */
    expect("a rotated file's last line deleted", files, 3, AUDIT_DELETED, 2, 1);

    e = c;
    seq = strstr(e.line[7], "\"seq\":8");
    seq[6] = '1';
    write_lines(files[1], &e, 4, 8);
    expect("a rotated file's last line edited", files, 3, AUDIT_EDITED, 1, 4);
    write_lines(files[1], &c, 4, 8);

    /* a torn end: the last file's is a crash's, reported; any other is a break */
    FILE *f = fopen(files[2], "a");
    fputs("{\"line\":13,\"prev\":\"", f);
    fclose(f);
    MCPG_CHECK(audit_verify_files(files, 3, &r) == AUDIT_INTACT && r.torn_tail == 1 &&
                   r.last_line == 12,
               "a torn end of the last file: %s", r.detail);
    f = fopen(files[1], "a");
    fputs("{\"line\":9,", f);
    fclose(f);
    expect("a torn line in a rotated file", files, 3, AUDIT_TORN, 1, 5);

    const char *missing = path_of("no-such.jsonl");
    MCPG_CHECK(audit_verify_files(&missing, 1, &r) == AUDIT_IO && r.err != 0, "unreadable");
}

static void test_tail(void) {
    const char *p = path_of("tail.jsonl");
    audit_chain_head head = {0};
    chain c;
    chain_build(&c, 3, &head);
    write_lines(p, &c, 0, 3);
    int fd = open(p, O_RDWR | O_APPEND);
    MCPG_REQUIRE(fd >= 0, "open");
    audit_tail t;
    MCPG_CHECK(audit_chain_read_tail(fd, hasher, 0, &t) == 0 && t.kind == AUDIT_TAIL_CHAINED &&
                   t.head.line == 3 && memcmp(t.head.hash, head.hash, AUDIT_HASH_LEN) == 0 &&
                   t.whole == t.size,
               "the tail's head is the chain's");
    MCPG_REQUIRE(write(fd, "{\"line\":4,\"pr", 13) == 13, "append");
    MCPG_CHECK(audit_chain_read_tail(fd, hasher, 0, &t) == 0 && t.kind == AUDIT_TAIL_CHAINED &&
                   t.head.line == 3 && t.size == t.whole + 13,
               "a torn end is seen and skipped");
    MCPG_REQUIRE(ftruncate(fd, 0) == 0 && write(fd, "{\"ts\":1}\n", 9) == 9, "rewrite");
    MCPG_CHECK(audit_chain_read_tail(fd, hasher, 0, &t) == 0 && t.kind == AUDIT_TAIL_UNCHAINED,
               "an unchained line");
    MCPG_REQUIRE(ftruncate(fd, 0) == 0 && write(fd, "{\"li", 4) == 4, "rewrite");
    MCPG_CHECK(audit_chain_read_tail(fd, hasher, 0, &t) == 0 && t.kind == AUDIT_TAIL_EMPTY &&
                   t.whole == 0 && t.size == 4,
               "only a torn line");
    /* a long last line: read back across several of the reader's blocks */
    static char big[20000];
    memset(big, 'x', sizeof big);
    memcpy(big, "{\"ts\":\"", 7);
    memcpy(big + sizeof big - 3, "\"}\n", 3);
    char *line = malloc(sizeof big + AUDIT_CHAIN_PREFIX_MAX);
    audit_chain_head h2 = {0};
    size_t n = audit_chain_line(hasher, &h2, line, big, sizeof big);
    MCPG_REQUIRE(ftruncate(fd, 0) == 0 && write(fd, line, n) == (ssize_t)n, "rewrite");
    MCPG_CHECK(audit_chain_read_tail(fd, hasher, 0, &t) == 0 && t.kind == AUDIT_TAIL_CHAINED &&
                   t.head.line == 1 && memcmp(t.head.hash, h2.hash, AUDIT_HASH_LEN) == 0,
               "a 20 kB line");
    free(line);
    close(fd);
}

/* n bytes of room (what audit_file writes ahead) at the file's end. */
static void append_room(int fd, size_t n) {
    char buf[4096];
    memset(buf, AUDIT_ROOM_BYTE, sizeof buf);
    off_t end = lseek(fd, 0, SEEK_END);
    for (size_t done = 0; done < n;) {
        size_t k = n - done < sizeof buf ? n - done : sizeof buf;
        MCPG_REQUIRE(pwrite(fd, buf, k, end + (off_t)done) == (ssize_t)k, "room");
        done += k;
    }
}

/* The room written ahead: the end is where the lines end; a torn line in
 * the room is seen; verify stops at the room; a page of room inside the
 * last lines (a power loss) is found by walking the window. */
static void test_room(void) {
    const char *p = path_of("room.jsonl");
    audit_chain_head head = {0};
    chain c;
    chain_build(&c, 40, &head);
    write_lines(p, &c, 0, 40);
    int fd = open(p, O_RDWR);
    MCPG_REQUIRE(fd >= 0, "open");
    struct stat st;
    MCPG_REQUIRE(fstat(fd, &st) == 0, "fstat");
    off_t lines = st.st_size;
    append_room(fd, 100000);
    audit_tail t;
    MCPG_CHECK(audit_chain_read_tail(fd, hasher, 0, &t) == 0 && t.kind == AUDIT_TAIL_CHAINED &&
                   t.head.line == 40 && !memcmp(t.head.hash, head.hash, AUDIT_HASH_LEN) &&
                   t.whole == lines && t.size == lines && t.file_size == lines + 100000,
               "the end is before the room (whole %lld size %lld)", (long long)t.whole,
               (long long)t.size);
    audit_verify_result r;
    const char *files[] = {p};
    MCPG_CHECK(audit_verify_files(files, 1, &r) == AUDIT_INTACT && r.last_line == 40 &&
                   !r.torn_tail,
               "verify stops at the room: %s", r.detail);

    MCPG_REQUIRE(pwrite(fd, "{\"line\":41,\"pr", 14, lines) == 14, "torn");
    MCPG_CHECK(audit_chain_read_tail(fd, hasher, 0, &t) == 0 && t.head.line == 40 &&
                   t.whole == lines && t.size == lines + 14,
               "a torn line in the room");
    MCPG_CHECK(audit_verify_files(files, 1, &r) == AUDIT_INTACT && r.torn_tail == 1,
               "verify: a torn end in the room");

    /* lines 1..40, then a page of room where a batch's page never reached
     * the disk, then the rest of that batch (lines that cannot chain on) */
    MCPG_REQUIRE(ftruncate(fd, 0) == 0, "truncate");
    off_t at = 0;
    for (size_t i = 0; i < 20; i++) {
        size_t n = strlen(c.line[i]);
        MCPG_REQUIRE(pwrite(fd, c.line[i], n, at) == (ssize_t)n, "line");
        at += (off_t)n;
    }
    off_t good = at;
    append_room(fd, 3 * 4096);
    at = lseek(fd, 0, SEEK_END);
    for (size_t i = 30; i < 40; i++) {
        size_t n = strlen(c.line[i]);
        MCPG_REQUIRE(pwrite(fd, c.line[i], n, at) == (ssize_t)n, "line");
        at += (off_t)n;
    }
    append_room(fd, 5000);
    MCPG_CHECK(audit_chain_read_tail(fd, hasher, 0, &t) == 0 && t.head.line == 40,
               "without the window the last line is taken");
    MCPG_CHECK(audit_chain_read_tail(fd, hasher, 1 << 20, &t) == 0 &&
                   t.kind == AUDIT_TAIL_CHAINED && t.head.line == 20 && t.whole == good &&
                   t.size > good,
               "the window finds the hole: the chain ends at line 20 (got %llu at %lld)",
               (unsigned long long)t.head.line, (long long)t.whole);
    /* an unchained line after the chain, with no hole: left for verify to name */
    MCPG_REQUIRE(ftruncate(fd, good) == 0 && pwrite(fd, "{\"ts\":1}\n", 9, good) == 9, "line");
    MCPG_CHECK(audit_chain_read_tail(fd, hasher, 1 << 20, &t) == 0 &&
                   t.kind == AUDIT_TAIL_UNCHAINED && t.whole == good + 9,
               "a foreign line is not cut");
    close(fd);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What chaining costs the writer per line: prefix, copy and SHA-256. */
static void bench(void) {
    char body[400], out[400 + AUDIT_CHAIN_PREFIX_MAX];
    memset(body, 'a', sizeof body);
    body[0] = '{';
    body[sizeof body - 1] = '\n';
    for (size_t len = 200; len <= 400; len += 200) {
        body[len - 1] = '\n';
        audit_chain_head head = {0};
        const int n = 500000;
        double t0 = now_s();
        for (int i = 0; i < n; i++) audit_chain_line(hasher, &head, out, body, len);
        printf("chain: %.0f ns per %zu-byte line\n", (now_s() - t0) / n * 1e9, len);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/mcpg-chain-test-XXXXXX");
    MCPG_REQUIRE(mkdtemp(dir), "mkdtemp");
    hasher = audit_hasher_new();
    MCPG_REQUIRE(hasher, "hasher");
    test_sha256();
    test_prefix();
    test_single_file();
    test_rotated_set();
    test_tail();
    test_room();
    bench();
    audit_hasher_free(hasher);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return MCPG_CHECK_EXIT("audit_chain");
}
