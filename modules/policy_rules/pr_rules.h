/* policy_rules: the compiled policy, and the decisions made on it.
 *
 * A rule admits a caller (principal, tenant and roles globs, or anonymous)
 * and covers items (tool, prompt and resource globs on the name the client
 * used); it may carry argument guards. A call is allowed when some rule
 * admits its caller, covers its item, and all of that rule's guards pass.
 * Everything is compiled once (pr_policy_parse); deciding allocates nothing
 * in the common case (see pr_guard.h for the exceptions). */
#ifndef PR_RULES_H
#define PR_RULES_H

#include <mcpg/sdk.h>
#include <stddef.h>
#include <stdint.h>

#include "pr_glob.h"
#include "pr_guard.h"

#define PR_MAX_RULES 4096
#define PR_MAX_GLOBS 256   /* per key of a rule */
#define PR_MAX_GUARDS 64   /* per rule */
#define PR_MAX_PATTERN 1024 /* bytes of one glob, pointer or regex */

typedef enum pr_kind { PR_TOOL = 0, PR_PROMPT = 1, PR_RESOURCE = 2, PR_EVENT = 3, PR_KINDS = 4 } pr_kind;

typedef struct pr_globs {
    pr_glob *v;
    uint32_t n;
    int set; /* the key was given (an absent key places no condition / grants nothing) */
} pr_globs;

typedef struct pr_rule {
    char *label;      /* its "id", else "rules[i]": for logs, never for clients */
    int anonymous;    /* admits callers without identity, and only them */
    pr_globs principal, tenant, roles;
    pr_globs items[PR_KINDS];
    pr_guard *guards;
    uint32_t n_guards;
} pr_rule;

typedef struct pr_policy {
    pr_rule *rules;
    uint32_t n;
} pr_policy;

/* Bytes not NUL-terminated. */
typedef struct pr_str {
    const char *p;
    size_t n;
} pr_str;

/* Who calls. principal.p NULL: anonymous. tenant.p NULL: none. When
 * has_mask, mask bit i says whether rule i admits this caller (rules past
 * the 64th are always asked). */
typedef struct pr_subject {
    pr_str principal, tenant;
    const pr_str *roles;
    uint32_t n_roles;
    int has_mask;
    uint64_t mask;
} pr_subject;

typedef enum pr_verdict {
    PR_ALLOW = 0,
    PR_NO_RULE = 1,     /* no rule admits the caller and covers the item */
    PR_GUARD_FAILED = 2 /* some did, and each had a guard that failed */
} pr_verdict;

/* Parse the inline rules (a JSON array's text, or NULL) and then the rules
 * of rules_file (or NULL): its text is an array of rules or an object
 * {"rules": [...]}. Each problem goes to p with its key path ("rules[2].tools"
 * or, for the file, "rules_file" with the file and the rule's path in the
 * message). Returns the number of problems; pol is complete only when 0
 * (free it either way). */
int pr_policy_parse(pr_policy *pol, const char *rules_json, const char *rules_file,
                    mcpg_config_problems *p);
void pr_policy_free(pr_policy *pol);

/* The subject part of rule r (the mask when it has one). */
int pr_admits(const pr_policy *pol, uint32_t r, const pr_subject *s);
/* The admission mask of the first 64 rules. */
uint64_t pr_subject_mask(const pr_policy *pol, const pr_subject *s);

/* May s use item `name` of `kind`, with these arguments (args NULL: no
 * guards are looked at)? On PR_GUARD_FAILED, *failed is the first failing
 * guard of the first rule that admitted and covered. */
pr_verdict pr_decide(const pr_policy *pol, const pr_subject *s, pr_kind kind, const char *name,
                     size_t n, const char *args, size_t args_n, const pr_guard **failed);

/* Some rule lets s use the item, guards aside. A template's uriTemplate
 * (is_template) is covered by a resource glob that some uri it can produce
 * matches. */
int pr_visible(const pr_policy *pol, const pr_subject *s, pr_kind kind, const char *name,
               size_t n, int is_template);

/* Some rule admits s at all. */
int pr_admits_any(const pr_policy *pol, const pr_subject *s);

/* The roles that would have let an authenticated caller use the item: the
 * literal role patterns of the rules that cover it and admit the caller in
 * all but its roles, space-separated into out (cap bytes, NUL-terminated;
 * one that does not fit is left out). With roles taken from an OAuth
 * token's scope claim they are the scopes to ask for. Returns how many. */
int pr_missing_roles(const pr_policy *pol, const pr_subject *s, pr_kind kind, const char *name,
                     size_t n, char *out, size_t cap);

#endif
