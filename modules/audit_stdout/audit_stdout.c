/* audit_stdout: audit events as JSON lines on standard output, for a log
 * collector or a terminal beside a durable sink.
 *
 * Not durable (no MCPG_MOD_DURABLE): emit() formats the line (lib/audit, the
 * same formatter as audit_file), copies it into a bounded buffer and answers
 * CONTINUE at once, so no call ever waits for it. One writer thread swaps
 * the buffer out and write()s it to fd 1; a blocked pipe blocks only that
 * thread. A full buffer has a decided answer (on_full): "drop" counts the
 * event and logs the count, "refuse" fails the call closed like a durable
 * sink would (503).
 */
#define _GNU_SOURCE /* strerror_r returning char * */
#include <mcpg/sdk.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit_sink.h"
#include "audit_writer.h"

typedef struct stdout_cfg {
    int64_t buffer_bytes;
    const char *on_full;
} stdout_cfg;

static const mcpg_config_field stdout_config[] = {
    MCPG_CFG_INT_FIELD(stdout_cfg, buffer_bytes, "buffer_bytes", "1048576", 4096, 1073741824,
                       "lines waiting for stdout, in bytes; beyond it on_full decides"),
    MCPG_CFG_ENUM_FIELD(stdout_cfg, on_full, "on_full", "\"drop\"", "drop|refuse",
                        "a full buffer: drop the event (counted, logged) or refuse the call "
                        "with 503"),
    MCPG_CONFIG_END};

typedef struct text {
    char *data;
    size_t len, cap;
} text;

typedef struct sink {
    const mcpg_host *host;
    mcpg_instance *self;
    const stdout_cfg *cfg;
    int refuse_when_full;
    audit_writer w;      /* w.queued counts bytes not yet written: pending + being written */
    /* ---- under w.mu ---- */
    text pending;
    int running;
    uint64_t dropped;    /* events not written: the buffer was full */
    /* ---- writer thread only ---- */
    text writing;
    uint64_t lines, lost; /* written; lost because stdout failed */
    time_t lost_logged_s;
} sink;

/* ------------------------------------------------------------------ */
/* emit: on a loop thread                                              */

static int text_reserve(const mcpg_host *h, text *t, size_t n) {
    if (t->len + n <= t->cap) return 0;
    size_t cap = t->cap ? t->cap : 16 * 1024;
    while (cap < t->len + n) cap *= 2;
    char *p = h->realloc(t->data, cap);
    if (!p) return MCPG_ENOMEM;
    t->data = p;
    t->cap = cap;
    return 0;
}

/* Copy the line into the buffer: 1 queued, 0 full (or out of memory), -1
 * not running. Under w.mu. */
static int sink_queue(sink *s, const char *line, size_t n) {
    if (!s->running || s->w.stopping) return -1;
    if (s->w.queued + n > (size_t)s->cfg->buffer_bytes || text_reserve(s->host, &s->pending, n))
        return 0;
    memcpy(s->pending.data + s->pending.len, line, n);
    s->pending.len += n;
    s->w.queued += n;
    audit_writer_event_queued(&s->w);
    audit_writer_wake(&s->w);
    return 1;
}

static mcpg_status sink_emit(void *instance, mcpg_call *call, const mcpg_audit_event *ev) {
    sink *s = instance;
    char stack[2048], *line;
    size_t n = audit_sink_format(s->host, ev, stack, sizeof stack, &line);
    pthread_mutex_lock(&s->w.mu);
    int queued = n ? sink_queue(s, line, n) : 0;
    if (queued == 0 && !s->refuse_when_full) s->dropped++;
    audit_writer_unlock(&s->w);
    if (line != stack) s->host->free(line);
    if (queued <= 0) audit_writer_event_refused(&s->w); /* refused, or dropped */
    if (queued < 0) return audit_sink_refuse(s->host, call, "audit sink not running");
    if (queued == 0 && s->refuse_when_full)
        return audit_sink_refuse(s->host, call, "audit queue full");
    return MCPG_CONTINUE;
}

/* ------------------------------------------------------------------ */
/* the writer thread                                                   */

/* A closed or failing stdout loses what was in the buffer: logged when it
 * starts, then at most every 10 s, never once per line. */
static void sink_lost(sink *s, const text *t, int err) {
    uint64_t n = 0;
    for (size_t i = 0; i < t->len; i++) n += t->data[i] == '\n';
    s->lost += n;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (s->lost > n && now.tv_sec - s->lost_logged_s < 10) return;
    s->lost_logged_s = now.tv_sec;
    char buf[128];
    s->host->log(s->self, MCPG_LOG_ERROR, "writing to stdout failed: %s; %llu events lost so far",
                 strerror_r(err, buf, sizeof buf), (unsigned long long)s->lost);
}

static void sink_write(sink *s, const text *t) {
    size_t off = 0;
    while (off < t->len) {
        ssize_t w = write(STDOUT_FILENO, t->data + off, t->len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            sink_lost(s, t, w < 0 ? errno : EIO);
            return;
        }
        off += (size_t)w;
    }
    for (size_t i = 0; i < t->len; i++) s->lines += t->data[i] == '\n';
}

static int sink_has_work(void *arg) { return ((sink *)arg)->pending.len > 0; }

static void sink_take(void *arg) {
    sink *s = arg;
    text t = s->pending;
    s->pending = s->writing;
    s->writing = t;
}

static size_t sink_write_taken(void *arg) {
    sink *s = arg;
    sink_write(s, &s->writing);
    size_t n = s->writing.len;
    s->writing.len = 0;
    return n;
}

static const audit_writer_ops sink_writer_of_stdout = {sink_has_work, sink_take,
                                                       sink_write_taken};

/* ------------------------------------------------------------------ */
/* lifecycle                                                           */

static int sink_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                       void **instance_out) {
    sink *s = host->calloc(1, sizeof *s);
    if (!s) return MCPG_ENOMEM;
    s->host = host;
    s->self = self;
    s->cfg = config;
    s->refuse_when_full = strcmp(s->cfg->on_full, "refuse") == 0;
    audit_writer_init(&s->w, &sink_writer_of_stdout, s);
    audit_writer_metrics(&s->w, host, self);
    *instance_out = s;
    return 0;
}

static int sink_start(void *instance) {
    sink *s = instance;
    s->running = 1;
    int rc = audit_writer_start(&s->w, "mcpg-audit-out");
    if (rc != 0) {
        char buf[128];
        s->host->log(s->self, MCPG_LOG_ERROR, "cannot start the writer thread: %s",
                     strerror_r(rc, buf, sizeof buf));
        s->running = 0;
        return MCPG_ENOMEM;
    }
    return 0;
}

/* Drain: everything buffered is written before the writer ends. */
static void sink_stop(void *instance) {
    sink *s = instance;
    if (!s->w.started) return;
    audit_writer_stop(&s->w);
    s->running = 0;
    s->host->log(s->self, MCPG_LOG_INFO,
                 "stopped: %llu events written to stdout, %llu dropped (buffer full), %llu lost "
                 "(stdout failed)",
                 (unsigned long long)s->lines, (unsigned long long)s->dropped,
                 (unsigned long long)s->lost);
}

/* Wait (at most 10 s) until everything buffered is written. */
static void sink_flush(void *instance) { audit_writer_flush(&((sink *)instance)->w, 10); }

static void sink_destroy(void *instance) {
    sink *s = instance;
    if (s->w.started) sink_stop(s);
    s->host->free(s->pending.data);
    s->host->free(s->writing.data);
    audit_writer_destroy(&s->w);
    s->host->free(s);
}

static const mcpg_lifecycle_ops sink_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .create = sink_create,
    .start = sink_start,
    .stop = sink_stop,
    .destroy = sink_destroy,
};

static const mcpg_audit_ops sink_ops = {
    MCPG_OPS_HEAD(mcpg_audit_ops),
    .emit = sink_emit,
    .flush = sink_flush,
};

MCPG_MODULE_DEFINE(MCPG_KIND_AUDIT, "audit_stdout", "1.0.0",
                   .description = "audit events as JSON lines on stdout: not durable, never "
                                  "holds a call",
                   .flags = MCPG_MOD_OWNS_THREADS, .config = stdout_config,
                   .config_size = sizeof(stdout_cfg), .lifecycle = &sink_lifecycle,
                   .ops = &sink_ops);
