/* audit_file through the SDK's fake host: the built .so, loaded as the kernel
 * would. Usage: test_audit_file path/to/audit_file.so
 *
 * Every file a test writes is also checked with lib/audit's verifier (the
 * code behind `mcpg audit verify`): the hash chain must be intact.
 *
 * Prints figures (events per batch, CPU per event); it never fails on them. */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit_verify.h"

static const char *so_path;
static mcpg_fakehost *fh;
static char dir[64];

static mcpg_instance *load(const char *config) {
    return mcpg_fakehost_load_file_or_exit(fh, so_path, "audit", config);
}

static char *config_for(const char *path, const char *extra) {
    static char buf[512];
    snprintf(buf, sizeof buf, "{\"path\":\"%s\"%s%s}", path, extra ? "," : "", extra ? extra : "");
    return buf;
}

static mcpg_audit_event event_for(uint64_t seq, char *id_buf, size_t id_cap) {
    int n = snprintf(id_buf, id_cap, "%llu", (unsigned long long)seq);
    return (mcpg_audit_event){.size = sizeof(mcpg_audit_event),
                              .name = seq % 2 ? "mcpg.tool.call.completed" : "mcpg.tool.call.allowed",
                              .seq = seq, .time_us = 1785196800000000LL + (int64_t)seq,
                              .id_json = id_buf, .id_len = (size_t)n, .method = "tools/call",
                              .tool = "echo", .backend = "mock", .principal = "al\"ice",
                              .wire = MCPG_WIRE_STATELESS, .generation = 1,
                              .latency_us = seq % 2 ? 100 : 0, .backend_us = seq % 2 ? 7 : 0};
}

static int emit(mcpg_instance *inst, mcpg_call *c, uint64_t seq) {
    char id[24];
    mcpg_audit_event ev = event_for(seq, id, sizeof id);
    return mcpg_fakehost_emit(fh, inst, c, &ev);
}

static mcpg_call *new_call(void) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", "{}", "1");
    MCPG_REQUIRE(c, "call_new");
    return c;
}

/* The module's ops called directly, as a loop would (no call: CONTINUE once
 * queued), from any thread. */
typedef struct direct {
    void *image;
    const mcpg_audit_ops *ops;
    void *state;
} direct;

static direct direct_open(mcpg_instance *inst) {
    direct d = {.image = dlopen(so_path, RTLD_NOW | RTLD_NOLOAD)}; /* the fake host's copy */
    MCPG_REQUIRE(d.image, "the module's image");
    mcpg_module_entry_fn entry = (mcpg_module_entry_fn)dlsym(d.image, MCPG_ENTRY_SYMBOL);
    d.ops = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR)->ops;
    d.state = mcpg_fakehost_state(inst);
    return d;
}

static void direct_emit(const direct *d, uint64_t seq) {
    char id[24];
    mcpg_audit_event ev = event_for(seq, id, sizeof id);
    MCPG_REQUIRE(d->ops->emit(d->state, NULL, &ev) == MCPG_CONTINUE, "emit %llu",
                 (unsigned long long)seq);
}

static void direct_close(direct *d) { dlclose(d->image); }

/* The chain of files[0..n) (oldest first) is intact and ends at line `last`
 * (0: any); returns its first line. */
static uint64_t verify_chain(const char *const *files, size_t n, uint64_t last) {
    audit_verify_result r;
    audit_break what = audit_verify_files(files, n, &r);
    MCPG_CHECK(what == AUDIT_INTACT, "%s (of %zu files): %s at line %llu: %s",
               files[what == AUDIT_INTACT ? 0 : r.file], n, audit_break_name(what),
               (unsigned long long)r.file_line, r.detail);
    MCPG_CHECK(!r.torn_tail, "%s ends torn", files[n - 1]);
    MCPG_CHECK(last == 0 || r.last_line == last, "the chain ends at line %llu, want %llu",
               (unsigned long long)r.last_line, (unsigned long long)last);
    return r.first_line;
}

static uint64_t verify_file(const char *path, uint64_t last) {
    return verify_chain(&path, 1, last);
}

/* path.K .. path.1, path: the rotated set that exists, oldest first. */
typedef struct fileset {
    char names[64][160];
    const char *files[64];
    size_t n;
} fileset;

static void fileset_of(fileset *fs, const char *path) {
    fs->n = 0;
    for (int k = 63; k >= 1; k--) {
        snprintf(fs->names[fs->n], sizeof fs->names[0], "%s.%d", path, k);
        if (access(fs->names[fs->n], F_OK) == 0) {
            fs->files[fs->n] = fs->names[fs->n];
            fs->n++;
        }
    }
    snprintf(fs->names[fs->n], sizeof fs->names[0], "%s", path);
    fs->files[fs->n] = fs->names[fs->n];
    fs->n++;
}

static void fileset_unlink(fileset *fs) {
    for (size_t i = 0; i < fs->n; i++) unlink(fs->files[i]);
}

/* Every line is one JSON object with the fields of event_for(first + i). */
static size_t check_file(const char *path, uint64_t first) {
    FILE *f = fopen(path, "r");
    MCPG_REQUIRE(f, "open %s", path);
    char *line = NULL;
    size_t cap = 0, n = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[0] == AUDIT_ROOM_BYTE) break; /* the room written ahead: the lines end here */
        MCPG_REQUIRE(line[len - 1] == '\n', "%s:%zu: no newline", path, n + 1);
        json_error_t e;
        json_t *o = json_loadb(line, (size_t)len - 1, 0, &e);
        MCPG_REQUIRE(json_is_object(o), "%s:%zu: not a JSON object (%s)\n%s", path, n + 1,
                     o ? "" : e.text, line);
        uint64_t seq = first + n;
        MCPG_REQUIRE((uint64_t)json_integer_value(json_object_get(o, "seq")) == seq,
                     "%s:%zu: seq, want %llu", path, n + 1, (unsigned long long)seq);
        MCPG_REQUIRE((uint64_t)json_integer_value(json_object_get(o, "id")) == seq, "%s:%zu: id",
                     path, n + 1);
        MCPG_REQUIRE(strcmp(json_string_value(json_object_get(o, "event")),
                            seq % 2 ? "mcpg.tool.call.completed" : "mcpg.tool.call.allowed") == 0,
                     "%s:%zu: event", path, n + 1);
        MCPG_REQUIRE(strcmp(json_string_value(json_object_get(o, "principal")), "al\"ice") == 0,
                     "%s:%zu: principal", path, n + 1);
        MCPG_REQUIRE(strcmp(json_string_value(json_object_get(o, "wire")), "2026-07-28") == 0,
                     "%s:%zu: wire", path, n + 1);
        MCPG_REQUIRE(
            strncmp(json_string_value(json_object_get(o, "ts")), "2026-07-28T00:00:", 17) == 0,
            "%s:%zu: ts", path, n + 1);
        MCPG_REQUIRE(!json_object_get(o, "tenant"), "%s:%zu: no tenant", path, n + 1);
        MCPG_REQUIRE((json_object_get(o, "latency_us") != NULL) == (seq % 2 == 1),
                     "%s:%zu: latency_us on completed events only", path, n + 1);
        json_decref(o);
        n++;
    }
    free(line);
    fclose(f);
    return n;
}

static double cpu_s(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double process_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The writer's summary line: "... N events in M batches (X per batch, max Y) ..." */
static void print_batches(const char *label) {
    const char *log = mcpg_fakehost_log_text(fh);
    const char *p = strstr(log, "closed ");
    const char *end = p ? strchr(p, '\n') : NULL;
    MCPG_REQUIRE(p && end, "the writer's summary in the log:\n%s", log);
    printf("%s: %.*s\n", label, (int)(end - p), p);
}

/* `inflight` calls in flight, like `inflight` connections of a load
 * generator: each resumed call is replaced by a new one. Resumes arrive in
 * emit order (the file is written in order), so waiting for the oldest is
 * waiting for the next. */
static void run_window(mcpg_instance *inst, uint64_t total, int inflight, uint64_t *seq,
                       double *emit_cpu) {
    mcpg_call **ring = calloc((size_t)inflight, sizeof *ring);
    MCPG_REQUIRE(ring, "calloc");
    uint64_t sent = 0, done = 0;
    while (done < total) {
        /* make the burst's calls first, so only emit() itself is timed */
        uint64_t from = sent;
        for (; sent < total && sent - done < (uint64_t)inflight; sent++)
            ring[sent % (uint64_t)inflight] = new_call();
        double t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
        for (uint64_t i = from; i < sent; i++) {
            int st = emit(inst, ring[i % (uint64_t)inflight], (*seq)++);
            MCPG_REQUIRE(st == MCPG_PENDING || st == MCPG_CONTINUE, "emit: status %d", st);
        }
        if (sent > from) *emit_cpu += cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0;
        mcpg_call *c = ring[done++ % (uint64_t)inflight];
        MCPG_REQUIRE(mcpg_fakehost_wait(fh, c, 10000) == MCPG_CONTINUE, "call answered");
        mcpg_fakehost_call_free(fh, c);
    }
    free(ring);
}

static void test_group_commit(int fsync_on, int inflight, uint64_t total) {
    char path[128];
    snprintf(path, sizeof path, "%s/gc-%d-%d.jsonl", dir, fsync_on, inflight);
    mcpg_fakehost_log_clear(fh);
    mcpg_instance *inst = load(config_for(path, fsync_on ? NULL : "\"fsync\":false"));
    uint64_t seq = 1;
    double emit_cpu = 0, main0 = cpu_s(CLOCK_THREAD_CPUTIME_ID), all0 = process_cpu_s();
    double wall0 = cpu_s(CLOCK_MONOTONIC);
    run_window(inst, total, inflight, &seq, &emit_cpu);
    double wall = cpu_s(CLOCK_MONOTONIC) - wall0;
    double main_cpu = cpu_s(CLOCK_THREAD_CPUTIME_ID) - main0, all = process_cpu_s() - all0;
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    MCPG_CHECK(check_file(path, 1) == total, "every event in %s", path);
    verify_file(path, total);
    char label[96];
    snprintf(label, sizeof label, "fsync=%d, %d in flight", fsync_on, inflight);
    print_batches(label);
    printf("  %llu events in %.2f s (%.0f/s); emit() %.2f us/event on the loop (fake host's share included); "
           "other threads (writer) %.2f us/event; whole process %.2f us/event\n",
           (unsigned long long)total, wall, (double)total / wall, emit_cpu / (double)total * 1e6,
           (all - main_cpu) / (double)total * 1e6, all / (double)total * 1e6);
    unlink(path);
}

static void test_unwritable(void) {
    mcpg_fakehost_log_clear(fh);
    mcpg_instance *inst = NULL;
    char folder[128], path[160], link[160];
    snprintf(folder, sizeof folder, "%s/no-such-dir", dir);
    snprintf(path, sizeof path, "%s/audit.jsonl", folder);
    int rc = mcpg_fakehost_load_file(fh, so_path, "audit", config_for(path, NULL), &inst);
    MCPG_CHECK(rc == MCPG_ECONFIG && inst == NULL, "a missing folder is refused: rc %d", rc);
    MCPG_CHECK(strstr(mcpg_fakehost_report_text(fh), "path") &&
               strstr(mcpg_fakehost_report_text(fh), folder) &&
               strstr(mcpg_fakehost_report_text(fh), "does not exist"),
               "validate names the key and the folder: %s", mcpg_fakehost_report_text(fh));
    /* a link into that folder passes validate (its own folder exists); the open fails */
    snprintf(link, sizeof link, "%s/dangling.jsonl", dir);
    MCPG_CHECK(symlink(path, link) == 0, "symlink: %s", strerror(errno));
    rc = mcpg_fakehost_load_file(fh, so_path, "audit", config_for(link, NULL), &inst);
    MCPG_CHECK(rc != 0 && inst == NULL, "an unopenable file is refused at start: rc %d", rc);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, link), "the log names the path");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, strerror(ENOENT)), "the log names the error");
    unlink(link);
    /* path is required */
    MCPG_CHECK(mcpg_fakehost_load_file(fh, so_path, "audit", "{}", &inst) == MCPG_ECONFIG,
               "path is required");
    MCPG_CHECK(strstr(mcpg_fakehost_report_text(fh), "path"), "report: %s",
               mcpg_fakehost_report_text(fh));
}

/* A disk that refuses: every call of the batch fails closed with 503. */
static void test_write_failure(void) {
    mcpg_fakehost_log_clear(fh);
    mcpg_instance *inst = load(config_for("/dev/full", NULL));
    for (int round = 0; round < 4; round++) { /* separate batches, every one failing */
        mcpg_call *c[3];
        for (int i = 0; i < 3; i++) {
            c[i] = new_call();
            int st = emit(inst, c[i], (uint64_t)i + 1);
            MCPG_REQUIRE(st == MCPG_PENDING || st == MCPG_DENY, "emit %d: status %d", i, st);
        }
        for (int i = 0; i < 3; i++) {
            MCPG_REQUIRE(mcpg_fakehost_wait(fh, c[i], 5000) == MCPG_DENY, "call %d denied", i);
            mcpg_call_outcome out = {.size = sizeof out};
            mcpg_fakehost_outcome(c[i], &out);
            MCPG_REQUIRE(out.is_error && out.error_code == MCPG_RPC_SERVER_ERROR,
                         "call %d: a server error", i);
            MCPG_CHECK(strcmp(out.error_message, "audit write failed") == 0, "call %d: %s", i,
                       out.error_message);
            MCPG_CHECK(out.http_status == 503, "call %d: HTTP %d", i, out.http_status);
            mcpg_fakehost_call_free(fh, c[i]);
        }
    }
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "write to /dev/full failed"), "the log says why");
    /* once per run of failures, not once per batch (that flooded the log with
     * tens of thousands of lines a second on a full disk) */
    size_t lines = 0;
    for (const char *p = mcpg_fakehost_log_text(fh); (p = strstr(p, "write to /dev/full failed"));
         p++)
        lines++;
    MCPG_CHECK(lines == 1, "%zu error lines for 4+ failed batches in a row:\n%s", lines,
               mcpg_fakehost_log_text(fh));
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

typedef struct reader {
    int fd;
    size_t lines;
} reader;

static void *read_fifo(void *arg) {
    reader *r = arg;
    char buf[65536];
    for (;;) {
        ssize_t n = read(r->fd, buf, sizeof buf);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                usleep(1000);
                continue;
            }
            break;
        }
        for (ssize_t i = 0; i < n; i++) r->lines += buf[i] == '\n';
    }
    return NULL;
}

/* A writer stuck on a full pipe holds its batch; the queue fills behind it
 * and the next call is refused with 503, none dropped. */
static void test_queue_full(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/fifo", dir);
    MCPG_REQUIRE(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    reader r = {open(path, O_RDONLY | O_NONBLOCK), 0};
    MCPG_REQUIRE(r.fd >= 0, "open %s", path);
    fcntl(r.fd, F_SETPIPE_SZ, 4096);
    /* fsync on a pipe is EINVAL, so this sink only writes */
    mcpg_instance *inst = load(config_for(path, "\"fsync\":false,\"queue_max\":4"));
    char big[16384];
    memset(big, 'm', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mcpg_call *c[5];
    for (int i = 0; i < 5; i++) {
        char id[24];
        mcpg_audit_event ev = event_for((uint64_t)i + 1, id, sizeof id);
        ev.error_message = big; /* bigger than the pipe: the first writev blocks */
        c[i] = new_call();
        int st = mcpg_fakehost_emit(fh, inst, c[i], &ev);
        MCPG_REQUIRE(st == (i < 4 ? MCPG_PENDING : MCPG_DENY), "emit %d: status %d", i, st);
    }
    mcpg_call_outcome out = {.size = sizeof out};
    mcpg_fakehost_outcome(c[4], &out);
    MCPG_REQUIRE(out.is_error && out.error_code == MCPG_RPC_SERVER_ERROR, "a server error");
    MCPG_CHECK(strcmp(out.error_message, "audit queue full") == 0, "%s", out.error_message);
    MCPG_CHECK(out.http_status == 503 && out.retry_after_s == 1, "HTTP %d", out.http_status);
    mcpg_fakehost_call_free(fh, c[4]);

    pthread_t t;
    MCPG_REQUIRE(pthread_create(&t, NULL, read_fifo, &r) == 0, "reader thread");
    for (int i = 0; i < 4; i++) {
        MCPG_REQUIRE(mcpg_fakehost_wait(fh, c[i], 10000) == MCPG_CONTINUE, "call %d answered", i);
        mcpg_fakehost_call_free(fh, c[i]);
    }
    /* unload closes the pipe: the reader sees EOF */
    MCPG_REQUIRE(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    pthread_join(t, NULL);
    close(r.fd);
    MCPG_CHECK(r.lines == 4, "%zu lines read", r.lines);
    unlink(path);
}

/* A full disk. RLIMIT_FSIZE gives what ENOSPC gives on a full filesystem
 * (a short write up to the limit, then an error: EFBIG here) without root or
 * a mount. The calls of a chunk that did not fit fail closed, and the file
 * must hold exactly the events whose calls continued, in seq order, every
 * line whole: before the fix it kept the torn half line of the chunk, and the
 * whole lines before it of calls that had been failed (so it said "allowed"
 * for calls that never ran). */
/* Where the lines end: the file's size less the room written ahead. */
static off_t lines_end(const char *path) {
    int fd = open(path, O_RDONLY);
    MCPG_REQUIRE(fd >= 0, "open %s", path);
    struct stat sb;
    MCPG_REQUIRE(fstat(fd, &sb) == 0, "fstat %s", path);
    off_t end = sb.st_size;
    char c;
    while (end > 0 && pread(fd, &c, 1, end - 1) == 1 && c == AUDIT_ROOM_BYTE) end--;
    close(fd);
    return end;
}

/* With room written ahead (`room`), the limit falls inside the room: a write
 * there fails the same way, and its bytes are given back as room. */
static void test_disk_full(int room) {
    char path[128];
    snprintf(path, sizeof path, "%s/full-%d.jsonl", dir, room);
    mcpg_fakehost_log_clear(fh);
    mcpg_instance *inst = load(config_for(path, room ? "\"max_batch_bytes\":4096"
                                                     : "\"max_batch_bytes\":4096,"
                                                       "\"preallocate_bytes\":0"));
    struct rlimit old;
    MCPG_REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0, "getrlimit");
    signal(SIGXFSZ, SIG_IGN); /* the writer blocks it anyway; this process must not die of it */
    char msg[700];
    memset(msg, 'm', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    enum { N = 45 };
    int st[N], denied = 0;
    for (int phase = 0; phase < 3; phase++) {
        int from = phase * 15, to = from + 15;
        if (phase == 1) { /* room for about 3 more lines */
            struct rlimit lim = {(rlim_t)lines_end(path) + 3000, old.rlim_max};
            MCPG_REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
        }
        mcpg_call *c[15];
        for (int i = from; i < to; i++) { /* one burst: several events per chunk */
            char id[24];
            mcpg_audit_event ev = event_for((uint64_t)i + 1, id, sizeof id);
            ev.error_message = msg;
            c[i - from] = new_call();
            st[i] = mcpg_fakehost_emit(fh, inst, c[i - from], &ev);
        }
        for (int i = from; i < to; i++) {
            if (st[i] == MCPG_PENDING) st[i] = mcpg_fakehost_wait(fh, c[i - from], 5000);
            MCPG_REQUIRE(st[i] == MCPG_CONTINUE || st[i] == MCPG_DENY, "call %d: status %d", i,
                         st[i]);
            if (st[i] == MCPG_DENY)
                MCPG_CHECK(strcmp(mcpg_fakehost_error_message(c[i - from]),
                                  "audit write failed") == 0,
                           "call %d: %s", i, mcpg_fakehost_error_message(c[i - from]));
            denied += st[i] == MCPG_DENY;
            MCPG_CHECK(phase == 1 || st[i] == MCPG_CONTINUE, "call %d (phase %d) continued", i,
                       phase);
            mcpg_fakehost_call_free(fh, c[i - from]);
        }
        if (phase == 1) MCPG_REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0, "restore the limit");
    }
    MCPG_CHECK(denied > 0, "the limit failed some calls");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "failed: File too large"), "the log says why");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "succeed again after"), "and when it recovered");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    signal(SIGXFSZ, SIG_DFL);

    FILE *f = fopen(path, "r");
    MCPG_REQUIRE(f, "open %s", path);
    char *line = NULL;
    size_t cap = 0, lines = 0, continued = 0;
    ssize_t len;
    uint64_t last = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        lines++;
        json_t *o = json_loadb(line, (size_t)len - 1, 0, NULL);
        MCPG_CHECK(o && line[len - 1] == '\n', "line %zu is whole JSON: %.60s", lines, line);
        if (!o) continue;
        uint64_t seq = (uint64_t)json_integer_value(json_object_get(o, "seq"));
        json_decref(o);
        MCPG_CHECK(seq > last && seq <= N, "line %zu: seq %llu after %llu", lines,
                   (unsigned long long)seq, (unsigned long long)last);
        last = seq;
        MCPG_CHECK(seq >= 1 && seq <= N && st[seq - 1] == MCPG_CONTINUE,
                   "line %zu: seq %llu is of a call that was failed closed", lines,
                   (unsigned long long)seq);
    }
    free(line);
    fclose(f);
    for (int i = 0; i < N; i++) continued += st[i] == MCPG_CONTINUE;
    MCPG_CHECK(lines == continued, "%zu lines for %zu calls that continued", lines, continued);
    /* the failed chunks' lines were taken back with their place in the chain */
    verify_file(path, continued);
    unlink(path);
}

/* flush() returns once everything queued is on disk; stop() drains too. */
static void test_flush_and_stop(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/flush.jsonl", dir);
    mcpg_instance *inst = load(config_for(path, NULL));
    direct d = direct_open(inst);
    enum { N = 500 };
    mcpg_call *c[N];
    for (int i = 0; i < N; i++) {
        c[i] = new_call();
        emit(inst, c[i], (uint64_t)i + 1);
    }
    d.ops->flush(d.state); /* without turning the loop */
    MCPG_CHECK(check_file(path, 1) == N, "flush wrote every event");
    for (int i = 0; i < N; i++) {
        MCPG_REQUIRE(mcpg_fakehost_wait(fh, c[i], 5000) == MCPG_CONTINUE, "call %d answered", i);
        mcpg_fakehost_call_free(fh, c[i]);
    }
    for (int i = 0; i < N; i++) {
        c[i] = new_call();
        emit(inst, c[i], (uint64_t)N + (uint64_t)i + 1);
    }
    d.ops->flush(d.state);
    for (int i = 0; i < N; i++) {
        MCPG_REQUIRE(mcpg_fakehost_wait(fh, c[i], 5000) == MCPG_CONTINUE, "call %d answered", i);
        mcpg_fakehost_call_free(fh, c[i]);
    }
    /* events still queued when stop comes are written before it returns (no
     * flush first; no calls, since none may be pending across an unload) */
    for (uint64_t i = 0; i < N; i++) direct_emit(&d, 2 * N + i + 1);
    direct_close(&d);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    MCPG_CHECK(check_file(path, 1) == 3 * N, "stop wrote every event");
    verify_file(path, 3 * N);
    struct stat st;
    MCPG_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode 0600");
    unlink(path);
}

/* ---- the chain across restarts, rotation and other writers ---- */

/* Each seq in the files exactly once; returns how many lines they hold. */
static size_t collect_seqs(const fileset *fs, unsigned char *seen, uint64_t max) {
    size_t lines = 0;
    for (size_t i = 0; i < fs->n; i++) {
        FILE *f = fopen(fs->files[i], "r");
        MCPG_REQUIRE(f, "open %s", fs->files[i]);
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        while ((len = getline(&line, &cap, f)) > 0) {
            json_t *o = json_loadb(line, (size_t)len - 1, 0, NULL);
            MCPG_REQUIRE(o, "%s: a JSON line: %.80s", fs->files[i], line);
            uint64_t seq = (uint64_t)json_integer_value(json_object_get(o, "seq"));
            json_decref(o);
            MCPG_REQUIRE(seq >= 1 && seq <= max, "%s: seq %llu", fs->files[i],
                         (unsigned long long)seq);
            MCPG_CHECK(!seen[seq], "seq %llu twice", (unsigned long long)seq);
            seen[seq] = 1;
            lines++;
        }
        free(line);
        fclose(f);
    }
    return lines;
}

/* A stop and a start: the second instance's first line chains to the
 * first's last (read back from the file). A torn last line left by a crash
 * is cut at start and said so; a file that is not chained is refused. */
static void test_restart(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/restart.jsonl", dir);
    for (int round = 0; round < 2; round++) {
        mcpg_fakehost_log_clear(fh);
        mcpg_instance *inst = load(config_for(path, NULL));
        MCPG_CHECK(round == 0 ? mcpg_fakehost_log_contains(fh, "a new chain starts")
                              : mcpg_fakehost_log_contains(fh, "goes on after line 50"),
                   "round %d: the log says where the chain stands:\n%s", round,
                   mcpg_fakehost_log_text(fh));
        direct d = direct_open(inst);
        for (uint64_t i = 1; i <= 50; i++) direct_emit(&d, (uint64_t)round * 50 + i);
        direct_close(&d);
        MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    }
    MCPG_CHECK(verify_file(path, 100) == 1, "one chain over two runs");

    /* a crash cut the last write short */
    FILE *f = fopen(path, "a");
    fputs("{\"line\":101,\"prev\":\"00", f);
    fclose(f);
    mcpg_fakehost_log_clear(fh);
    mcpg_instance *inst = load(config_for(path, NULL));
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "removed a torn last line (22 bytes)"),
               "the cut is logged:\n%s", mcpg_fakehost_log_text(fh));
    direct d = direct_open(inst);
    for (uint64_t i = 101; i <= 110; i++) direct_emit(&d, i);
    direct_close(&d);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    verify_file(path, 110);
    MCPG_CHECK(check_file(path, 1) == 110, "every event once, in order");
    unlink(path);

    /* a file from before the chain */
    f = fopen(path, "w");
    fputs("{\"ts\":\"2026-01-01T00:00:00.000000Z\",\"event\":\"mcpg.tool.call.allowed\"}\n", f);
    fclose(f);
    mcpg_fakehost_log_clear(fh);
    inst = NULL;
    MCPG_CHECK(mcpg_fakehost_load_file(fh, so_path, "audit", config_for(path, NULL), &inst) != 0 &&
                   !inst,
               "an unchained file is refused");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "carries no hash chain") &&
                   mcpg_fakehost_log_contains(fh, path),
               "the log names the file and why:\n%s", mcpg_fakehost_log_text(fh));
    unlink(path);
}

typedef struct emitter {
    direct d;
    uint64_t from, count;
} emitter;

static void *emit_thread(void *arg) {
    emitter *e = arg;
    for (uint64_t i = 0; i < e->count; i++) {
        direct_emit(&e->d, e->from + i);
        if (i % 64 == 63) usleep(200); /* several batches, interleaved */
    }
    return NULL;
}

/* Two threads emit (events reach the writer out of seq order, as from two
 * loops) into `insts` (one instance, or two sharing the file as a reload's
 * old and new generation do); the file rotates many times. Every event is in
 * the set once and the chain runs intact across every file. */
static void rotate_with(const char *path, mcpg_instance **insts, size_t n_inst, uint64_t per) {
    enum { ROTATE = 16384 };
    emitter e[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        e[i] = (emitter){direct_open(insts[i % n_inst]), (uint64_t)i * per + 1, per};
        MCPG_REQUIRE(pthread_create(&t[i], NULL, emit_thread, &e[i]) == 0, "thread");
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) direct_close(&e[i].d);
    for (size_t i = 0; i < n_inst; i++)
        MCPG_CHECK(mcpg_fakehost_unload(fh, insts[i]) == 0, "unload");
    fileset fs;
    fileset_of(&fs, path);
    unsigned char *seen = calloc(2 * per + 1, 1);
    size_t lines = collect_seqs(&fs, seen, 2 * per);
    MCPG_CHECK(lines == 2 * per, "%zu lines for %llu events", lines,
               (unsigned long long)(2 * per));
    MCPG_CHECK(fs.n > 5, "rotated: %zu files", fs.n);
    MCPG_CHECK(verify_chain(fs.files, fs.n, 2 * per) == 1, "one chain from line 1");
    /* one line more at most; a writer sharing the file knows its size only
     * as it left it, so each of two may fill the room once */
    off_t most = (off_t)n_inst * ROTATE + 1024;
    for (size_t i = 0; i + 1 < fs.n; i++) {
        struct stat st;
        MCPG_CHECK(stat(fs.files[i], &st) == 0 && st.st_size >= ROTATE && st.st_size <= most,
                   "%s: %lld bytes for rotate_bytes %d (%lld at most)", fs.files[i],
                   (long long)st.st_size, ROTATE, (long long)most);
    }
    free(seen);
    fileset_unlink(&fs);
}

static void test_rotation(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/rot.jsonl", dir);
    mcpg_fakehost_log_clear(fh);
    const char *cfg = "\"rotate_bytes\":16384,\"rotate_keep\":60";
    mcpg_instance *inst = load(config_for(path, cfg));
    rotate_with(path, &inst, 1, 1000);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "rotated "), "rotations are logged");

    /* two instances on one file, as during a reload */
    mcpg_instance *two[2] = {load(config_for(path, cfg)), load(config_for(path, cfg))};
    rotate_with(path, two, 2, 1000);

    /* rotate_keep: only the newest N rotated files stay */
    inst = load(config_for(path, "\"rotate_bytes\":4096,\"rotate_keep\":2"));
    direct d = direct_open(inst);
    for (uint64_t i = 1; i <= 600; i++) {
        direct_emit(&d, i);
        if (i % 50 == 0) d.ops->flush(d.state); /* one batch at a time */
    }
    direct_close(&d);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    fileset fs;
    fileset_of(&fs, path);
    MCPG_CHECK(fs.n == 3, "path, path.1, path.2: %zu files", fs.n);
    MCPG_CHECK(verify_chain(fs.files, fs.n, 600) > 1, "the oldest files are gone");
    fileset_unlink(&fs);
}

/* logrotate's way: the file renamed away under the sink. The next batch
 * goes to a new file at the path, chained to the renamed one's last line. */
static void test_renamed_away(void) {
    char path[128], old[160];
    snprintf(path, sizeof path, "%s/moved.jsonl", dir);
    snprintf(old, sizeof old, "%s.1", path);
    mcpg_instance *inst = load(config_for(path, NULL));
    direct d = direct_open(inst);
    for (uint64_t i = 1; i <= 100; i++) direct_emit(&d, i);
    d.ops->flush(d.state);
    MCPG_REQUIRE(rename(path, old) == 0, "rename");
    for (uint64_t i = 101; i <= 200; i++) direct_emit(&d, i);
    direct_close(&d);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    MCPG_CHECK(check_file(old, 1) == 100 && check_file(path, 101) == 100, "100 and 100");
    const char *files[] = {old, path};
    MCPG_CHECK(verify_chain(files, 2, 200) == 1, "one chain over both");
    unlink(old);
    unlink(path);
}

/* The module's own cost per emit() on the loop thread, without the fake
 * host's per-call work: emit() called directly with no call to resume. */
static void bench_emit(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/bench.jsonl", dir);
    mcpg_fakehost_log_clear(fh);
    /* a queue as deep as the burst: a slow disk must not refuse any of it */
    mcpg_instance *inst = load(config_for(path, "\"queue_max\":262144"));
    direct d = direct_open(inst);
    enum { N = 200000 };
    double t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    for (uint64_t i = 1; i <= N; i++) direct_emit(&d, i);
    double dt = cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0;
    d.ops->flush(d.state);
    direct_close(&d);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    MCPG_CHECK(check_file(path, 1) == N, "every event written");
    verify_file(path, N);
    printf("emit() alone: %.3f us/event on the loop thread\n", dt / N * 1e6);
    print_batches("  bench");
    unlink(path);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: test_audit_file path/to/audit_file.so");
    so_path = argv[1];
    snprintf(dir, sizeof dir, "/tmp/mcpg-audit-test-XXXXXX");
    MCPG_REQUIRE(mkdtemp(dir), "mkdtemp %s", dir);
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    test_unwritable();
    test_write_failure();
    test_queue_full();
    test_disk_full(0);
    test_disk_full(1);
    test_flush_and_stop();
    test_restart();
    test_rotation();
    test_renamed_away();
    bench_emit();
    test_group_commit(1, 1, 2000);
    test_group_commit(1, 64, 50000);
    test_group_commit(1, 256, 50000);
    test_group_commit(0, 64, 50000);
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    rmdir(dir);
    return MCPG_CHECK_EXIT("audit_file");
}
