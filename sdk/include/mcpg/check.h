/** @file
 * mcpg check: the assertions of a plain C unit test, header-only.
 *
 * @code
 *   #include <mcpg/check.h>
 *
 *   mcpg_instance *inst = NULL;
 *   MCPG_REQUIRE(mcpg_fakehost_load(fh, m, "hi", NULL, &inst) == 0, "load: %s",
 *                mcpg_fakehost_report_text(fh));       // no instance: nothing left to test
 *   MCPG_CHECK(st == MCPG_CONTINUE, "greet: status %d", st);   // counted, the test goes on
 *   ...
 *   return MCPG_CHECK_EXIT("test_hello");   // "test_hello: ok" and 0, or
 *                                           // "test_hello: N check(s) failed" and 1
 * @endcode
 *
 * MCPG_CHECK(cond, fmt, ...) evaluates cond once; when it is false it counts a
 * failure and prints "file:line: CHECK(cond) failed: <message>" on stderr,
 * then carries on, so one run reports every broken check.
 *
 * MCPG_REQUIRE(cond, fmt, ...) does the same (printing REQUIRE) and then exits
 * the process with status 1. Use it where going on makes no sense or would
 * crash: a NULL the next line dereferences, a load that failed, a setup step.
 *
 * The message is required: a printf format (checked by the compiler) and its
 * arguments, e.g. MCPG_CHECK(n == 3, "count %zu", n) or MCPG_CHECK(ok, "load").
 *
 * mcpg_check_failures() is the number of failed checks so far.
 * MCPG_CHECK_EXIT(name) prints "name: ok" on stdout when there were none, or
 * "name: N check(s) failed" on stderr, and gives the exit status (0 or 1) for
 * main to return. A test that prints its own summary line uses
 * mcpg_check_failures() instead.
 *
 * The counter is a static variable of this header's static functions, so
 * every translation unit that includes it has its own: a test is one .c file
 * (checks in other files of the same program count separately). Checks may
 * fail on any thread; the count is kept atomically.
 */
#ifndef MCPG_CHECK_H
#define MCPG_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/** @cond MCPG_INTERNAL */
#if defined(__GNUC__) || defined(__clang__)
#define MCPG_CHECK_PRINTF_(f, a) __attribute__((format(printf, f, a)))
#define MCPG_CHECK_COLD_ __attribute__((cold))
#define MCPG_CHECK_NORETURN_ __attribute__((noreturn))
#else
#define MCPG_CHECK_PRINTF_(f, a)
#define MCPG_CHECK_COLD_
#define MCPG_CHECK_NORETURN_
#endif
/** @endcond */

/** Checks cond (evaluated once); when false, counts a failure, prints
 * "file:line: CHECK(cond) failed: <message>" on stderr and carries on. The
 * arguments after cond are a printf format and its arguments (required). */
#define MCPG_CHECK(cond, ...)                                                    \
    do {                                                                         \
        if (!(cond)) mcpg_check_fail_(__FILE__, __LINE__, #cond, __VA_ARGS__);   \
    } while (0)

/** As MCPG_CHECK (printing REQUIRE), then exits the process with status 1
 * when cond is false: for a setup step the rest of the test depends on. */
#define MCPG_REQUIRE(cond, ...)                                                  \
    do {                                                                         \
        if (!(cond)) mcpg_require_fail_(__FILE__, __LINE__, #cond, __VA_ARGS__); \
    } while (0)

/** Prints "name: ok" on stdout, or "name: N check(s) failed" on stderr,
 * and gives main's exit status: 0 when no check failed, else 1. */
#define MCPG_CHECK_EXIT(name) mcpg_check_exit_(name)

/* ---- implementation: static, one copy (and one counter) per .c file ---- */

/** @cond MCPG_INTERNAL */
static inline int *mcpg_check_counter_(void) {
    static int failures;
    return &failures;
}
/** @endcond */

/** The number of failed checks so far in this translation unit. */

static inline int mcpg_check_failures(void) {
#if defined(__GNUC__) || defined(__clang__)
    return __atomic_load_n(mcpg_check_counter_(), __ATOMIC_RELAXED);
#else
    return *mcpg_check_counter_();
#endif
}

/** @cond MCPG_INTERNAL */
MCPG_CHECK_PRINTF_(5, 0)
static inline void mcpg_check_report_(const char *what, const char *file, int line,
                                      const char *cond, const char *fmt, va_list ap) {
#if defined(__GNUC__) || defined(__clang__)
    __atomic_add_fetch(mcpg_check_counter_(), 1, __ATOMIC_RELAXED);
#else
    ++*mcpg_check_counter_();
#endif
    fprintf(stderr, "%s:%d: %s(%s) failed: ", file, line, what, cond);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

MCPG_CHECK_COLD_ MCPG_CHECK_PRINTF_(4, 5)
static inline void mcpg_check_fail_(const char *file, int line, const char *cond,
                                    const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mcpg_check_report_("CHECK", file, line, cond, fmt, ap);
    va_end(ap);
}

MCPG_CHECK_COLD_ MCPG_CHECK_NORETURN_ MCPG_CHECK_PRINTF_(4, 5)
static inline void mcpg_require_fail_(const char *file, int line, const char *cond,
                                      const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mcpg_check_report_("REQUIRE", file, line, cond, fmt, ap);
    va_end(ap);
    exit(1);
}

static inline int mcpg_check_exit_(const char *name) {
    int n = mcpg_check_failures();
    if (n) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, n);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}
/** @endcond */

#endif
