/* CHECK for the bench tools' self-tests (bench/load/selftest.c,
 * bench/events/selftest.c): a failed condition is printed and counted in
 * the including file's `failures`. */
#ifndef MCPG_BENCH_CHECK_H
#define MCPG_BENCH_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

#endif
