/* metrics_prometheus: the process's own lines, read from /proc when the
 * exposition is rendered (not registered series: they cost nothing until a
 * scrape). Threads are named by role (mcpg-main, mcpg-loop-N, mcpg-pool-N,
 * mcpg-audit...), so mcpg_thread_cpu_seconds_total says which role spends
 * the CPU, as top -H does. */
#define _GNU_SOURCE
#include "prom.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 1024

typedef struct thread_cpu {
    char name[32];
    uint64_t ticks;
} thread_cpu;

/* comm and utime + stime of one /proc stat file; 0 when it could be read. */
static int read_stat(const char *path, char *name, size_t cap, uint64_t *ticks) {
    char text[1024];
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *open = strchr(text, '('), *close = strrchr(text, ')');
    if (!open || !close || close < open) return -1;
    snprintf(name, cap, "%.*s", (int)(close - open - 1), open + 1);
    unsigned long long utime = 0, stime = 0;
    /* after ") ": state, then fields 4..13, then utime (14) and stime (15) */
    if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
               &stime) != 2)
        return -1;
    *ticks = utime + stime;
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const thread_cpu *)a)->name, ((const thread_cpu *)b)->name);
}

/* Threads of one name added up (the pool's are distinct, but a module may
 * name several alike), sorted by name so scrapes read alike. */
static size_t read_threads(thread_cpu *out, size_t cap) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < cap) {
        if (e->d_name[0] == '.') continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        thread_cpu t;
        if (read_stat(path, t.name, sizeof t.name, &t.ticks) != 0) continue;
        size_t i = 0;
        while (i < n && strcmp(out[i].name, t.name) != 0) i++;
        if (i < n) out[i].ticks += t.ticks;
        else out[n++] = t;
    }
    closedir(d);
    qsort(out, n, sizeof *out, by_name);
    return n;
}

static void seconds_of_ticks(char *text, size_t cap, uint64_t ticks) {
    long hz = sysconf(_SC_CLK_TCK);
    prom_format_number(text, cap, (int64_t)(ticks * 1000000u / (uint64_t)(hz > 0 ? hz : 100)), 1);
}

static long resident_bytes(void) {
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%*s %ld", &pages) != 1) pages = 0;
        fclose(f);
    }
    return pages * sysconf(_SC_PAGESIZE);
}

static long open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 0;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the one opendir holds */
}

int prom_write_process(const mcpg_host *h, mcpg_buf *out) {
    char num[48], name[32];
    uint64_t ticks = 0;
    int rc = 0;
    if (read_stat("/proc/self/stat", name, sizeof name, &ticks) == 0) {
        seconds_of_ticks(num, sizeof num, ticks);
        rc |= h->buf_printf(out, "# HELP process_cpu_seconds_total User and system CPU time "
                                 "of the whole process\n# TYPE process_cpu_seconds_total "
                                 "counter\nprocess_cpu_seconds_total %s\n", num);
    }
    rc |= h->buf_printf(out, "# HELP process_resident_memory_bytes Resident memory\n"
                             "# TYPE process_resident_memory_bytes gauge\n"
                             "process_resident_memory_bytes %ld\n", resident_bytes());
    rc |= h->buf_printf(out, "# HELP process_open_fds Open file descriptors\n"
                             "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n", open_fds());
    thread_cpu *threads = h->alloc(MAX_THREADS * sizeof *threads);
    if (!threads) return MCPG_ENOMEM;
    size_t n = read_threads(threads, MAX_THREADS);
    rc |= h->buf_printf(out, "# HELP mcpg_thread_cpu_seconds_total User and system CPU time "
                             "by thread name (its role)\n"
                             "# TYPE mcpg_thread_cpu_seconds_total counter\n");
    for (size_t i = 0; i < n && !rc; i++) {
        seconds_of_ticks(num, sizeof num, threads[i].ticks);
        rc |= h->buf_printf(out, "mcpg_thread_cpu_seconds_total{thread=\"");
        rc |= prom_append_escaped(h, out, threads[i].name, 1);
        rc |= h->buf_printf(out, "\"} %s\n", num);
    }
    h->free(threads);
    return rc ? MCPG_ENOMEM : 0;
}
