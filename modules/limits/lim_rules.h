/* limits: the configured limits, checked and compiled. */
#ifndef LIM_RULES_H
#define LIM_RULES_H

#include <mcpg/sdk.h>
#include <stdint.h>

#include "../policy_rules/pr_glob.h"

#define LIM_MAX_LIMITS 64
#define LIM_MAX_GLOBS 64
#define LIM_MAX_NAME 64
#define LIM_BUDGET_CALLS_MAX 4000000000LL /* the counter is 32 bits */

typedef enum lim_type { LIM_CONCURRENCY, LIM_RATE, LIM_BUDGET } lim_type;
enum { LIM_KEY_TOOL = 1, LIM_KEY_PRINCIPAL = 2, LIM_KEY_TENANT = 4, LIM_KEY_SESSION = 8 };

typedef struct lim_globs {
    pr_glob *v;
    uint32_t n;  /* 0: any */
} lim_globs;

typedef struct lim_def {
    char name[LIM_MAX_NAME + 1];
    lim_globs tools, principals, tenants;
    uint32_t key_parts; /* LIM_KEY_* bits */
    int global;
    lim_type type;
    int64_t n;           /* concurrency: the cap; budget: calls per window */
    int64_t interval_us; /* rate: one call per interval */
    int64_t burst;       /* rate: calls that may come at once */
    int64_t window_us;   /* budget: 0 = forever */
} lim_def;

typedef struct lim_set {
    lim_def *v;
    uint32_t n;
} lim_set;

/* Parse the JSON text of the `limits` array (NULL: none). 0, or the number
 * of problems, each reported at its key path ("limits[1].rate.burst"). */
int lim_set_parse(lim_set *s, const char *json, mcpg_config_problems *p);
void lim_set_free(lim_set *s);

/* 1 when def's globs admit this tool, principal and tenant ("" when none). */
int lim_matches(const lim_def *d, const char *tool, const char *principal, const char *tenant);

#endif
