/* mcpg-fsync-latency: the disk's own price of a durable write, the floor a
 * call that waits for its audit line cannot beat. In a folder (the audit
 * file's), two series of rounds, each a 4 KiB pwrite then fdatasync:
 *   append     at the end of a growing file: the sync also commits the new
 *              size and block allocation (the journal), as an audit log does;
 *   overwrite  inside a file already written and synced: data only, what a
 *              preallocated file would cost.
 * Printed per series: p50, p99, mean and max of one write+sync, and the CPU
 * time (getrusage, user+system) per sync. --json adds one JSON line. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 4096

typedef struct {
    const char *name;
    double p50_us, p99_us, mean_us, max_us, cpu_us;
} series;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double cpu_us(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 +
           (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the value below which share (0..1) of the sorted samples fall */
static double quantile(const double *sorted, int n, double share) {
    int i = (int)(share * (double)n);
    return sorted[i < n ? i : n - 1];
}

static int write_and_sync(int fd, const char *block, off_t at, const char *path) {
    if (pwrite(fd, block, BLOCK, at) != BLOCK) {
        fprintf(stderr, "mcpg-fsync-latency: write to %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (fdatasync(fd) != 0) {
        fprintf(stderr, "mcpg-fsync-latency: fdatasync of %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* rounds of write+sync at offset i*BLOCK (append) or i%span*BLOCK within a
 * file already holding span blocks (overwrite); fills s from the samples */
static int run_series(series *s, const char *path, int rounds, int overwrite, double *samples) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        fprintf(stderr, "mcpg-fsync-latency: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    char block[BLOCK];
    memset(block, 'a', sizeof block);
    int span = rounds < 256 ? rounds : 256, rc = 0;
    for (int i = 0; overwrite && i < span && rc == 0; i++)
        rc = write_and_sync(fd, block, (off_t)i * BLOCK, path);
    double c0 = cpu_us(), sum = 0;
    for (int i = 0; i < rounds && rc == 0; i++) {
        off_t at = (off_t)(overwrite ? i % span : i) * BLOCK;
        double t0 = now_us();
        rc = write_and_sync(fd, block, at, path);
        samples[i] = now_us() - t0;
        sum += samples[i];
    }
    s->cpu_us = (cpu_us() - c0) / rounds;
    close(fd);
    unlink(path);
    if (rc) return rc;
    qsort(samples, (size_t)rounds, sizeof *samples, cmp_double);
    s->p50_us = quantile(samples, rounds, 0.50);
    s->p99_us = quantile(samples, rounds, 0.99);
    s->mean_us = sum / rounds;
    s->max_us = samples[rounds - 1];
    return 0;
}

static void usage(FILE *to) {
    fprintf(to, "usage: mcpg-fsync-latency [--rounds N] [--json] [DIR]\n"
                "  time N rounds (default 1000) of a 4 KiB write + fdatasync in DIR (default /tmp):\n"
                "  appended to a growing file, and overwriting a file already synced\n");
}

int main(int argc, char **argv) {
    const char *dir = "/tmp";
    int rounds = 1000, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage(stdout), 0;
        else if (argv[i][0] == '-') return usage(stderr), 2;
        else dir = argv[i];
    }
    if (rounds < 1) return usage(stderr), 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/mcpg-fsync-latency.%ld", dir, (long)getpid());
    double *samples = malloc(sizeof *samples * (size_t)rounds);
    if (!samples) return 1;
    series s[2] = {{.name = "append"}, {.name = "overwrite"}};
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) rc = run_series(&s[k], path, rounds, k, samples);
    free(samples);
    if (rc) return 1;
    printf("%-10s %8s %9s %9s %9s %9s %12s\n", "series", "rounds", "p50_us", "p99_us", "mean_us",
           "max_us", "cpu_us/sync");
    for (int k = 0; k < 2; k++)
        printf("%-10s %8d %9.0f %9.0f %9.0f %9.0f %12.1f\n", s[k].name, rounds, s[k].p50_us,
               s[k].p99_us, s[k].mean_us, s[k].max_us, s[k].cpu_us);
    for (int k = 0; json && k < 2; k++)
        printf("{\"target\":\"fsync-%s\",\"dir\":\"%s\",\"rounds\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,"
               "\"mean_us\":%.1f,\"max_us\":%.1f,\"cpu_us_per_sync\":%.2f}\n",
               s[k].name, dir, rounds, s[k].p50_us, s[k].p99_us, s[k].mean_us, s[k].max_us,
               s[k].cpu_us);
    return 0;
}
