/* policy_rules: argument guards.
 *
 * A guard names one place in a call's arguments with a JSON pointer
 * (RFC 6901: "/a/0/b", "~1" for '/', "~0" for '~') and says what may be
 * there: a string matching a regex (POSIX ERE, the whole value), one of a
 * set of values, at most a length, or a number in a range; and whether it
 * must be there at all. Compiled once (pr_guard_compile in pr_rules.c);
 * checked on the call's own JSON text with the SDK's scanner, allocating
 * nothing unless a string to match is over 1 KiB of escapes or a number is
 * over 63 characters long. */
#ifndef PR_GUARD_H
#define PR_GUARD_H

#include <mcpg/json.h>
#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#define PR_INDEX_NONE UINT32_MAX

typedef struct pr_token {
    char *text;     /* decoded (~0, ~1 undone), NUL-terminated */
    uint32_t len;
    uint32_t index; /* the token as an array index, or PR_INDEX_NONE */
} pr_token;

typedef struct pr_pointer {
    char *text;     /* as configured: what a denial names */
    pr_token *tokens;
    uint32_t n;
} pr_pointer;

typedef enum pr_guard_kind {
    PR_GUARD_PRESENT = 0, /* only "required" */
    PR_GUARD_REGEX = 1,
    PR_GUARD_ENUM = 2,
    PR_GUARD_LENGTH = 3,
    PR_GUARD_RANGE = 4
} pr_guard_kind;

/* One allowed value of an enum: a scalar (mcpg_json_type). */
typedef struct pr_value {
    uint32_t type;
    char *text;     /* STRING: decoded */
    size_t len;
    double number;  /* NUMBER */
} pr_value;

typedef struct pr_guard {
    pr_pointer at;
    int required;
    uint32_t kind;  /* pr_guard_kind */
    regex_t re;     /* REGEX */
    pr_value *values; /* ENUM */
    uint32_t n_values;
    uint64_t max_length; /* LENGTH: code points of a string, items of an array */
    double min, max;     /* RANGE: inclusive */
    int has_min, has_max;
} pr_guard;

/* Parse a pointer's text into p (malloc'd). 0, or -1 with *why. */
int pr_pointer_compile(pr_pointer *p, const char *text, const char **why);
void pr_pointer_free(pr_pointer *p);

typedef enum pr_found {
    PR_FOUND = 1,
    PR_ABSENT = 0,
    PR_AMBIGUOUS = -1, /* an object on the way holds the member twice */
    PR_MALFORMED = -2
} pr_found;

/* Resolve p in the JSON text doc[0..n), which the caller has validated
 * (mcpg_json_validate: the walk trusts its structure); *out is the value's
 * span. */
int pr_pointer_find(const pr_pointer *p, const char *doc, size_t n, mcpg_json_span *out);

/* 1 when the arguments args[0..n) (validated JSON text) satisfy g. */
int pr_guard_passes(const pr_guard *g, const char *args, size_t n);
void pr_guard_free(pr_guard *g);

/* Code points of a JSON string span's decoded text (escapes counted as what
 * they decode to, a surrogate pair as one). */
uint64_t pr_json_string_length(const char *raw, size_t n);

#endif
