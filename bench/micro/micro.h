/* bench/micro: what the variants share. boundary.c holds the allocation
 * counter (its malloc, calloc and realloc stand in for the C library's) and
 * the loop that times one operation; wire.c (the transport's request
 * parsers) and parts.c (redaction, the policy decision) supply operations. */
#ifndef MCPG_BENCH_MICRO_H
#define MCPG_BENCH_MICRO_H

#include <stddef.h>
#include <stdint.h>

/* One operation on ctx: 0 when it gave the expected answer (a cheap test:
 * whatever costs more is left to check, once after the loop). */
typedef int (*micro_op)(void *ctx);

typedef struct micro_variant {
    const char *name;
    micro_op op;
    void *ctx;
    int (*setup)(void *ctx);   /* once, before the loop (NULL: none); 0 ok */
    int (*check)(void *ctx);   /* once, after it: the last answer right (NULL: none); 0 ok */
    void (*teardown)(void *ctx);
} micro_variant;

/* The variants each file offers, ending with {NULL}. */
extern const micro_variant MICRO_WIRE[];
extern const micro_variant MICRO_PARTS[];

#endif
