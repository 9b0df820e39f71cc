/* Logging: one JSON line per event on stderr, stamped with its source
 * ("kernel" or "[kind:module:instance]"). Lines are written with one write()
 * so concurrent threads never interleave within a line. Also the manifest
 * error list, which prints as plain "FILE: path: message" lines. */
#include "kernel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_int log_level = MCPG_LOG_INFO;

void klog_init(int level) { atomic_store(&log_level, level); }
int klog_level(void) { return atomic_load(&log_level); }

static const char *level_name(int level) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    return level >= 0 && level <= 3 ? names[level] : "debug";
}

static size_t format_time(char *out, size_t cap) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(out + n, cap - n, ".%06ldZ", (long)tv.tv_usec);
    return n;
}

/* --check: where warnings go instead of JSON lines (see klog_check_mode). */
static struct {
    const char *file;
    klog_key_fn key_of;
    const void *ctx;
} check_sink;

void klog_check_mode(const char *file, klog_key_fn key_of, const void *ctx) {
    check_sink.file = file;
    check_sink.key_of = key_of;
    check_sink.ctx = ctx;
}

static void check_line(int level, const char *src, const char *key, const char *msg) {
    if (level > MCPG_LOG_WARN) return; /* --check tells what is wrong, not what happens */
    char found[256] = "(root)";
    if (!key && check_sink.key_of) check_sink.key_of(check_sink.ctx, src, found, sizeof found);
    const char *loud = "WARNING: "; /* the log's own shout: the line says "warning:" already */
    if (strncmp(msg, loud, strlen(loud)) == 0) msg += strlen(loud);
    fprintf(stderr, "%s: %s: %s: %s\n", check_sink.file, key ? key : found,
            level == MCPG_LOG_WARN ? "warning" : "error", msg);
}

MCPG_PRINTF(4, 0)
static void klog_key_v(int level, const char *src, const char *key, const char *fmt,
                       va_list ap) {
    if (level > atomic_load(&log_level)) return;
    char msg[2048];
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    if (n < 0) return;
    if (check_sink.file) {
        check_line(level, src, key, msg);
        return;
    }
    size_t mlen = (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    char ts[64];
    format_time(ts, sizeof ts);
    mcpg_buf b = {0};
    mcpg_buf_printf(&b, "{\"ts\":\"%s\",\"level\":\"%s\",\"src\":", ts, level_name(level));
    mcpg_buf_append_json_string(&b, src, strlen(src));
    mcpg_buf_puts(&b, ",\"msg\":");
    mcpg_buf_append_json_string(&b, msg, mlen);
    mcpg_buf_puts(&b, "}\n");
    if (b.data) {
        ssize_t w = write(STDERR_FILENO, b.data, b.len);
        (void)w;
    }
    mcpg_buf_free(&b);
}

void klog_v(int level, const char *src, const char *fmt, va_list ap) {
    klog_key_v(level, src, NULL, fmt, ap);
}

void klog(int level, const char *src, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    klog_key_v(level, src, NULL, fmt, ap);
    va_end(ap);
}

void klog_at(int level, const char *src, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    klog_key_v(level, src, key, fmt, ap);
    va_end(ap);
}

void errlist_add(errlist *e, const char *file, const char *path, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (e->count == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 8;
        char **p = realloc(e->lines, cap * sizeof *p);
        if (!p) return;
        e->lines = p;
        e->cap = cap;
    }
    size_t len = strlen(file) + strlen(path && *path ? path : "(root)") + strlen(msg) + 8;
    char *line = malloc(len);
    if (!line) return;
    snprintf(line, len, "%s: %s: %s", file, path && *path ? path : "(root)", msg);
    e->lines[e->count++] = line;
}

void errlist_print(const errlist *e) {
    for (size_t i = 0; i < e->count; i++) fprintf(stderr, "%s\n", e->lines[i]);
}

void errlist_free(errlist *e) {
    for (size_t i = 0; i < e->count; i++) free(e->lines[i]);
    free(e->lines);
    memset(e, 0, sizeof *e);
}
