/* What every fuzzer shares: the libFuzzer entry point's prototype, a check
 * that stops the run with a message (the fuzzers' invariants, not only "it
 * did not crash"), and a reader that takes the fuzzer's control bytes off
 * the front of an input. */
#ifndef MCPG_FUZZ_H
#define MCPG_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A broken invariant: say which, then abort so libFuzzer keeps the input
 * (and the replay test fails). */
#define FZ_CHECK(cond, ...)                                                          \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* The input as control bytes then payload: fz_byte takes one byte off the
 * front (0 once it is empty). */
typedef struct fz_input {
    const uint8_t *p;
    size_t n;
} fz_input;

static inline uint8_t fz_byte(fz_input *in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

/* Split points: a small generator seeded by the input, so the same input
 * always splits the same way and libFuzzer can steer it. */
static inline uint32_t fz_next(uint32_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

#endif
