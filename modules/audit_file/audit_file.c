/* audit_file: a durable audit sink writing one JSON line per event.
 *
 * Shape (group commit, as in the calibration's variant b):
 *   emit()  on a loop thread: format the line on the stack, then, under the
 *           mutex, append it to the `pending` batch with the call to resume.
 *           Answers PENDING. No allocation once the batch buffers have grown.
 *   writer  one thread: swap `pending` with its own empty batch, chain its
 *           lines (number and SHA-256 of the line before: audit_chain.h),
 *           write them with one pwritev() at the file's end (audit_disk.c,
 *           over room written ahead) and one fdatasync() per
 *           max_batch_bytes chunk, then resume every call of the chunk. A
 *           failing disk fails the calls closed (DENY + 503); nothing is ever
 *           dropped silently. Between chunks it rotates the file when due
 *           (audit_disk.c, which also keeps the chain right when another
 *           writer shares the file).
 *
 * The lines are chained by the writer, not by emit(): events from several
 * loops arrive a little out of seq order, and the chain follows the file's
 * order, which only the writer knows.
 *
 * The queue is bounded by queue_max events not yet durable (pending plus the
 * batch being written): a full queue refuses the new call with 503, it never
 * drops an event.
 */
#define _GNU_SOURCE /* strerror_r returning char * */
#include <mcpg/sdk.h>

#include <errno.h>
#include <stdio.h>
#include <malloc.h> /* malloc_trim */
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "audit_anchor.h"
#include "audit_disk.h"
#include "audit_sink.h"
#include "audit_writer.h"

static const mcpg_config_field audit_config[] = {
    MCPG_CFG_REQUIRED_STRING_FIELD(audit_cfg, path, "path",
                                   "file to append JSON lines to (created 0600)"),
    MCPG_CFG_BOOL_FIELD(audit_cfg, fsync, "fsync", "true",
                        "fdatasync each batch; false = written to the page cache only: "
                        "survives a gateway crash, NOT a power loss (not durable)"),
    MCPG_CFG_INT_FIELD(audit_cfg, queue_max, "queue_max", "65536", 1, 16777216,
                       "events waiting for disk; when full, new calls get 503"),
    MCPG_CFG_INT_FIELD(audit_cfg, max_batch_bytes, "max_batch_bytes", "1048576", 4096,
                       1073741824, "largest single write+fdatasync"),
    MCPG_CFG_INT_FIELD(audit_cfg, rotate_bytes, "rotate_bytes", "0", 0, INT64_MAX / 2,
                       "rotate once the file holds this many bytes (0 = never): path is "
                       "renamed path.1 and a new one started, between batches"),
    MCPG_CFG_INT_FIELD(audit_cfg, rotate_keep, "rotate_keep", "5", 1, 1000,
                       "rotated files kept: path.1 (newest) .. path.N; the oldest is removed"),
    MCPG_CFG_INT_FIELD(audit_cfg, preallocate_bytes, "preallocate_bytes", "8388608", 0,
                       1073741824,
                       "room written ahead at the end of the live file (spaces, synced by a "
                       "thread of its own) so that a batch's fdatasync flushes only its lines; "
                       "cut off at rotation and at a clean stop (0 = none: the file always "
                       "ends at its last line)"),
    MCPG_CFG_STRING_FIELD(audit_cfg, anchor_path, "anchor_path", NULL,
                          "a file, best on another disk or host, the chain's head is written to "
                          "(replaced whole) at least every anchor_interval_ms and at a clean "
                          "stop: `mcpg audit verify --anchor` then tells a tail cut off or a "
                          "file emptied"),
    MCPG_CFG_INT_FIELD(audit_cfg, anchor_interval_ms, "anchor_interval_ms", "1000", 0, 86400000,
                       "the longest time a committed head waits to be anchored (0: after every "
                       "batch)"),
    MCPG_CONFIG_END};

/* One queued event: where its line ends in the batch text and whom to wake. */
typedef struct audit_entry {
    mcpg_call *call;
    mcpg_worker *worker; /* the call's loop, for failing it from the writer */
    size_t end;
} audit_entry;

typedef struct audit_batch {
    char *data;
    size_t len, cap;
    audit_entry *ev;
    size_t n, ncap;
} audit_batch;

typedef struct audit {
    const mcpg_host *host;
    mcpg_instance *self;
    const audit_cfg *cfg;
    audit_disk disk;
    audit_writer w;       /* w.queued counts events not yet answered: pending + being written */
    /* ---- under w.mu ---- */
    audit_batch pending;
    int running;
    /* ---- writer thread only ---- */
    audit_batch writing;
    char *out;            /* a chunk's lines with their chain fields */
    size_t out_cap;
    uint64_t n_batches, n_events, max_events, n_failures;
    uint64_t fail_streak; /* batches failed in a row; see audit_log_errno */
    int fail_errno;
    time_t fail_logged_s;
    uint64_t anchored_ms;   /* when the anchor was last written (mono ms) */
    uint64_t anchored_line; /* the line it holds */
    int anchor_failing;     /* the last anchor write failed (logged once) */
} audit;

/* A call to fail on its own loop: call_error is loop-thread-only. */
typedef struct audit_fail {
    mcpg_post post;
    const mcpg_host *host;
    mcpg_call *call;
} audit_fail;

/* ------------------------------------------------------------------ */
/* emit: on a loop thread                                              */

/* Grow a batch (under mu) to take one more line of n bytes. Amortised: once
 * the buffers have reached their working size this never allocates. */
static int batch_reserve(const mcpg_host *h, audit_batch *b, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64 * 1024;
        while (cap < b->len + n) cap *= 2;
        char *p = h->realloc(b->data, cap);
        if (!p) return MCPG_ENOMEM;
        b->data = p;
        b->cap = cap;
    }
    if (b->n == b->ncap) {
        size_t cap = b->ncap ? b->ncap * 2 : 1024;
        audit_entry *e = h->realloc(b->ev, cap * sizeof *e);
        if (!e) return MCPG_ENOMEM;
        b->ev = e;
        b->ncap = cap;
    }
    return 0;
}

static mcpg_status audit_enqueue(audit *a, mcpg_call *call, const char *line, size_t n) {
    mcpg_worker *loop = call ? a->host->call_worker(call) : NULL;
    pthread_mutex_lock(&a->w.mu);
    const char *why = NULL;
    if (!a->running || a->w.stopping)
        why = "audit sink not running";
    else if (a->w.queued >= (size_t)a->cfg->queue_max)
        why = "audit queue full";
    else if (batch_reserve(a->host, &a->pending, n))
        why = "audit queue full"; /* out of memory is a full queue too */
    if (why) {
        pthread_mutex_unlock(&a->w.mu);
        audit_writer_event_refused(&a->w);
        return audit_sink_refuse(a->host, call, why);
    }
    audit_batch *b = &a->pending;
    memcpy(b->data + b->len, line, n);
    b->len += n;
    b->ev[b->n++] = (audit_entry){call, loop, b->len};
    a->w.queued++;
    audit_writer_event_queued(&a->w);
    audit_writer_wake(&a->w);
    audit_writer_unlock(&a->w);
    /* Without a call there is nobody to resume: the event is queued, done. */
    return call ? MCPG_PENDING : MCPG_CONTINUE;
}

static mcpg_status audit_emit(void *instance, mcpg_call *call, const mcpg_audit_event *ev) {
    audit *a = instance;
    char stack[2048], *line;
    size_t n = audit_sink_format(a->host, ev, stack, sizeof stack, &line);
    if (!n) {
        audit_writer_event_refused(&a->w);
        return audit_sink_refuse(a->host, call, "audit queue full");
    }
    mcpg_status st = audit_enqueue(a, call, line, n);
    if (line != stack) a->host->free(line);
    return st;
}

/* ------------------------------------------------------------------ */
/* the writer thread                                                   */

static void audit_fail_on_loop(void *arg) {
    audit_fail *f = arg;
    const mcpg_host *h = f->host;
    h->call_error(f->call, MCPG_RPC_SERVER_ERROR, "audit write failed", NULL);
    h->call_set_http(f->call, 503, 1);
    mcpg_call *call = f->call;
    h->free(f);
    h->call_resume(call, MCPG_DENY);
}

/* Fail one call closed. The error must be set on the call's own loop, so hop
 * there; if that is impossible, resume with DENY alone (the kernel then
 * answers a generic error): the call still fails closed. */
static void audit_fail_call(audit *a, const audit_entry *e) {
    const mcpg_host *h = a->host;
    audit_fail *f = e->worker ? h->alloc(sizeof *f) : NULL;
    if (f) {
        *f = (audit_fail){.post = {.fn = audit_fail_on_loop}, .host = h, .call = e->call};
        f->post.arg = f;
        if (h->worker_post(e->worker, &f->post) == 0) return;
        h->free(f);
    }
    h->call_resume(e->call, MCPG_DENY);
}

/* A failing disk fails every batch, and with calls arriving a batch is a few
 * microseconds: one error line per batch was ~34,000 lines a second on a full
 * disk (measured), flooding the gateway's log, often on that same disk. So a
 * run of failures is logged when it starts or its error changes, then at
 * most every AUDIT_FAIL_LOG_S seconds with the count, and once when writes
 * succeed again. Writer thread only. */
#define AUDIT_FAIL_LOG_S 10

static void audit_log_errno(audit *a, const char *what, int err) {
    char buf[128];
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    a->fail_streak++;
    if (a->fail_streak > 1 && err == a->fail_errno &&
        now.tv_sec - a->fail_logged_s < AUDIT_FAIL_LOG_S)
        return;
    a->host->log(a->self, MCPG_LOG_ERROR,
                 "%s %s failed: %s; failing the calls closed (%llu failed batches in a row)",
                 what, a->cfg->path, strerror_r(err, buf, sizeof buf),
                 (unsigned long long)a->fail_streak);
    a->fail_errno = err;
    a->fail_logged_s = now.tv_sec;
}

static void audit_log_recovered(audit *a) {
    a->host->log(a->self, MCPG_LOG_WARN, "writes to %s succeed again after %llu failed batches",
                 a->cfg->path, (unsigned long long)a->fail_streak);
    a->fail_streak = 0;
}

/* Events [i, j) of the writing batch with their chain fields, into a->out;
 * the chain's head moves past them. 0, or -1 with errno. */
static int audit_chain_chunk(audit *a, size_t i, size_t j, size_t *len) {
    const mcpg_host *h = a->host;
    audit_batch *b = &a->writing;
    size_t off = i ? b->ev[i - 1].end : 0;
    size_t need = b->ev[j - 1].end - off + (j - i) * AUDIT_CHAIN_PREFIX_MAX;
    if (need > a->out_cap) {
        char *p = h->realloc(a->out, need);
        if (!p) {
            errno = ENOMEM;
            return -1;
        }
        a->out = p;
        a->out_cap = need;
    }
    size_t n = 0;
    for (size_t k = i; k < j; k++) {
        size_t from = k ? b->ev[k - 1].end : 0;
        size_t w = audit_chain_line(a->disk.hasher, &a->disk.head, a->out + n, b->data + from,
                                    b->ev[k].end - from);
        if (!w) {
            errno = EIO; /* SHA-256 failed: OpenSSL */
            return -1;
        }
        n += w;
    }
    *len = n;
    return 0;
}

/* Lock, chain, write, sync: 1 when the chunk is on disk (synced when fsync
 * is on); else the file is as it was (see audit_disk_take_back) and so is the
 * chain's head. */
static int audit_commit_chunk(audit *a, size_t i, size_t j) {
    audit_disk *d = &a->disk;
    audit_chain_head before = d->head;
    int torn_before = d->torn;
    size_t len = 0, written = 0;
    int ok = audit_disk_begin(d) == 0;
    if (!ok) audit_log_errno(a, "locking or reopening", errno);
    if (ok && audit_chain_chunk(a, i, j, &len) != 0) {
        ok = 0;
        audit_log_errno(a, "chaining the lines of", errno);
    }
    if (ok && audit_disk_write(d, a->out, len, &written) != 0) {
        ok = 0;
        audit_log_errno(a, "write to", errno);
    }
    if (ok && a->cfg->fsync && fdatasync(d->fd) != 0) {
        ok = 0;
        audit_log_errno(a, "fdatasync of", errno);
    }
    if (!ok) {
        d->head = before;
        /* the file is as it was before the chunk, '\n' of a torn line included */
        if (audit_disk_take_back(d, written)) d->torn = torn_before;
    }
    audit_disk_end(d, ok);
    return ok;
}

/* The head to the anchor file (writer thread, or stop once it has ended):
 * when it moved and `force` or the interval has passed since the last. */
static void audit_anchor(audit *a, int force) {
    const audit_cfg *cfg = a->cfg;
    if (!cfg->anchor_path || a->disk.head.line == a->anchored_line) return;
    uint64_t now = a->host->mono_us() / 1000;
    if (!force && now - a->anchored_ms < (uint64_t)cfg->anchor_interval_ms) return;
    if (audit_anchor_write(cfg->anchor_path, &a->disk.head) != 0) {
        if (!a->anchor_failing)
            a->host->log(a->self, MCPG_LOG_ERROR, "anchor_path %s: %s (the chain's head is not "
                         "anchored until it works)", cfg->anchor_path, strerror(errno));
        a->anchor_failing = 1;
        return;
    }
    if (a->anchor_failing)
        a->host->log(a->self, MCPG_LOG_WARN, "anchor_path %s: written again", cfg->anchor_path);
    a->anchor_failing = 0;
    a->anchored_ms = now;
    a->anchored_line = a->disk.head.line;
}

/* One group commit: events [i, j) of the writing batch. */
static void audit_commit(audit *a, size_t i, size_t j) {
    audit_batch *b = &a->writing;
    int ok = audit_commit_chunk(a, i, j);
    if (ok && a->fail_streak) audit_log_recovered(a);
    for (size_t k = i; k < j; k++) {
        if (!b->ev[k].call) continue;
        if (ok)
            a->host->call_resume(b->ev[k].call, MCPG_CONTINUE);
        else
            audit_fail_call(a, &b->ev[k]);
    }
    if (ok) audit_anchor(a, 0); /* after the resumes: no call waits on it */
    a->n_batches++;
    a->n_events += j - i;
    if (j - i > a->max_events) a->max_events = j - i;
    if (!ok) a->n_failures++;
}

/* Bytes the file may still take before it is due to rotate: a chunk stops
 * once it reaches them, so a file passes rotate_bytes by one line at most
 * (unless other writers share it). SIZE_MAX when it never rotates. */
static size_t bytes_before_rotation(const audit *a) {
    const audit_disk *d = &a->disk;
    if (a->cfg->rotate_bytes <= 0 || !d->regular || d->end < 0) return SIZE_MAX;
    off_t left = (off_t)a->cfg->rotate_bytes - d->end;
    return left > 0 ? (size_t)left : 0;
}

/* Write the swapped-out batch in chunks of at most max_batch_bytes (at least
 * one event each, chain fields counted), so one huge backlog does not become
 * one huge write. */
static void audit_write_batch(audit *a) {
    audit_batch *b = &a->writing;
    size_t max = (size_t)a->cfg->max_batch_bytes, i = 0;
    while (i < b->n) {
        size_t base = i ? b->ev[i - 1].end : 0, room = bytes_before_rotation(a), j = i + 1;
        while (j < b->n) {
            size_t so_far = b->ev[j - 1].end - base + (j - i) * AUDIT_CHAIN_PREFIX_MAX;
            size_t with_next = b->ev[j].end - base + (j + 1 - i) * AUDIT_CHAIN_PREFIX_MAX;
            if (with_next > max || so_far >= room) break;
            j++;
        }
        audit_commit(a, i, j);
        i = j;
    }
}

/* ---- what the writer thread (lib/audit's audit_writer) does here ---- */

static int audit_has_work(void *sink) { return ((audit *)sink)->pending.n > 0; }

static void audit_take(void *sink) {
    audit *a = sink;
    audit_batch t = a->pending;
    a->pending = a->writing;
    a->writing = t;
}

/* After a burst the writer's buffers keep the size its largest batch needed.
 * A batch that used under an eighth of a buffer bigger than 256 KiB gives
 * that buffer back; the next burst grows it again (one realloc per burst,
 * none per batch in steady state). Writer thread: `writing` and `out` are
 * its own. */
#define AUDIT_KEEP_BYTES (256u * 1024u)

static int oversized(size_t cap_bytes, size_t used_bytes) {
    return cap_bytes > AUDIT_KEEP_BYTES && used_bytes < cap_bytes / 8;
}

static void audit_give_back(audit *a) {
    const mcpg_host *h = a->host;
    audit_batch *b = &a->writing;
    int freed = 0;
    if (oversized(b->cap, b->len)) {
        h->free(b->data);
        b->data = NULL;
        b->cap = 0;
        freed = 1;
    }
    if (oversized(b->ncap * sizeof *b->ev, b->n * sizeof *b->ev)) {
        h->free(b->ev);
        b->ev = NULL;
        b->ncap = 0;
        freed = 1;
    }
    if (oversized(a->out_cap, b->len + b->n * AUDIT_CHAIN_PREFIX_MAX)) {
        h->free(a->out);
        a->out = NULL;
        a->out_cap = 0;
        freed = 1;
    }
    /* the pages go back to the system (the host allocates with the C
     * library's malloc); the writer thread may take the moment, a loop may not */
    if (freed) malloc_trim(0);
}

static size_t audit_write_taken(void *sink) {
    audit *a = sink;
    audit_write_batch(a);
    audit_give_back(a);
    size_t n = a->writing.n;
    a->writing.n = a->writing.len = 0;
    return n;
}

static const audit_writer_ops audit_writer_of_file = {audit_has_work, audit_take,
                                                      audit_write_taken};

/* ------------------------------------------------------------------ */
/* lifecycle                                                           */

/* A file the writer will append to (or create): an existing one must not be a
 * folder and must be writable; a new one's folder must exist and take files.
 * --check says so at the key instead of the start failing. */
static int report_unwritable(const mcpg_host *h, mcpg_report *rep, const char *key,
                             const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) h->report_error(rep, key, "%s is a folder, not a file", path);
        else if (access(path, W_OK) != 0) h->report_error(rep, key, "%s is not writable", path);
        else return 0;
        return MCPG_ECONFIG;
    }
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (stat(dir, &st) != 0) h->report_error(rep, key, "folder %s does not exist", dir);
    else if (!S_ISDIR(st.st_mode)) h->report_error(rep, key, "%s is not a folder", dir);
    else if (access(dir, W_OK | X_OK) != 0) h->report_error(rep, key, "folder %s is not writable", dir);
    else return 0;
    return MCPG_ECONFIG;
}

static int audit_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const audit_cfg *cfg = config;
    int rc = report_unwritable(host, rep, "path", cfg->path);
    if (cfg->anchor_path && report_unwritable(host, rep, "anchor_path", cfg->anchor_path))
        rc = MCPG_ECONFIG;
    return rc;
}

static int audit_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                        void **instance_out) {
    audit *a = host->calloc(1, sizeof *a);
    if (!a) return MCPG_ENOMEM;
    a->host = host;
    a->self = self;
    a->cfg = config;
    a->disk = (audit_disk){.host = host, .self = self, .cfg = config, .fd = -1};
    audit_writer_init(&a->w, &audit_writer_of_file, a);
    audit_writer_metrics(&a->w, host, self);
    *instance_out = a;
    return 0;
}

static int audit_start(void *instance) {
    audit *a = instance;
    char buf[128];
    int err = audit_disk_open(&a->disk);
    if (err) {
        audit_disk_close(&a->disk);
        return err;
    }
    a->running = 1;
    int rc = audit_writer_start(&a->w, "mcpg-audit");
    if (rc != 0) {
        a->host->log(a->self, MCPG_LOG_ERROR, "cannot start the audit writer thread: %s",
                     strerror_r(rc, buf, sizeof buf));
        a->running = 0;
        audit_disk_close(&a->disk);
        return MCPG_ENOMEM;
    }
    return 0;
}

/* Drain: the writer exits only once everything queued is written and synced. */
static void audit_stop(void *instance) {
    audit *a = instance;
    if (!a->w.started) return;
    audit_writer_stop(&a->w);
    a->running = 0;
    audit_anchor(a, 1); /* the writer has ended: the last head, anchored */
    audit_disk_trim(&a->disk);
    char hex[2 * AUDIT_HASH_LEN + 1];
    audit_hash_hex(a->disk.head.hash, hex);
    audit_disk_close(&a->disk);
    double avg = a->n_batches ? (double)a->n_events / (double)a->n_batches : 0.0;
    /* the head is what anchors the chain's last line: an operator may keep it */
    a->host->log(a->self, MCPG_LOG_INFO,
                 "closed %s: %llu events in %llu batches (%.1f per batch, max %llu), "
                 "%llu failed batches, %llu rotations; chain head line %llu sha256 %s",
                 a->cfg->path, (unsigned long long)a->n_events,
                 (unsigned long long)a->n_batches, avg, (unsigned long long)a->max_events,
                 (unsigned long long)a->n_failures, (unsigned long long)a->disk.rotations,
                 (unsigned long long)a->disk.head.line, hex);
}

/* Wait (bounded: flush may block only briefly) until every queued event is
 * on disk and its call resumed. */
static void audit_flush(void *instance) {
    audit *a = instance;
    size_t left = audit_writer_flush(&a->w, 10);
    if (left)
        a->host->log(a->self, MCPG_LOG_WARN, "flush gave up after 10 s with %zu events queued",
                     left);
}

static void audit_batch_free(const mcpg_host *h, audit_batch *b) {
    h->free(b->data);
    h->free(b->ev);
    *b = (audit_batch){0};
}

static void audit_destroy(void *instance) {
    audit *a = instance;
    if (a->w.started) audit_stop(a); /* never leave a thread running the unmapped code */
    audit_batch_free(a->host, &a->pending);
    audit_batch_free(a->host, &a->writing);
    a->host->free(a->out);
    audit_disk_close(&a->disk); /* started but never stopped: the hasher */
    audit_writer_destroy(&a->w);
    a->host->free(a);
}

static const mcpg_lifecycle_ops audit_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = audit_validate,
    .create = audit_create,
    .start = audit_start,
    .stop = audit_stop,
    .destroy = audit_destroy,
};

static const mcpg_audit_ops audit_ops = {
    MCPG_OPS_HEAD(mcpg_audit_ops),
    .emit = audit_emit,
    .flush = audit_flush,
};

MCPG_MODULE_DEFINE(MCPG_KIND_AUDIT, "audit_file", "1.2.0",
                   .description = "durable audit sink: hash-chained JSON lines, group-committed "
                                  "with fdatasync, rotated by size",
                   .flags = MCPG_MOD_DURABLE | MCPG_MOD_OWNS_THREADS,
                   .config = audit_config, .config_size = sizeof(audit_cfg),
                   .lifecycle = &audit_lifecycle, .ops = &audit_ops);
