/* policy_rules: deciding on a compiled policy (see pr_rules.h). */
#include "pr_rules.h"

#include <string.h>

static int any_glob(const pr_globs *g, const char *s, size_t n) {
    for (uint32_t i = 0; i < g->n; i++)
        if (pr_glob_match(&g->v[i], s, n)) return 1;
    return 0;
}

/* Some role of the caller's matches some glob. */
static int any_role(const pr_globs *g, const pr_subject *s) {
    for (uint32_t i = 0; i < s->n_roles; i++)
        if (any_glob(g, s->roles[i].p, s->roles[i].n)) return 1;
    return 0;
}

static int rule_admits(const pr_rule *r, const pr_subject *s) {
    if (!s->principal.p) return r->anonymous;
    if (r->anonymous) return 0;
    if (r->principal.set && !any_glob(&r->principal, s->principal.p, s->principal.n)) return 0;
    if (r->tenant.set && (!s->tenant.p || !any_glob(&r->tenant, s->tenant.p, s->tenant.n)))
        return 0;
    return !r->roles.set || any_role(&r->roles, s);
}

int pr_admits(const pr_policy *pol, uint32_t r, const pr_subject *s) {
    if (s->has_mask && r < 64) return (int)((s->mask >> r) & 1u);
    return rule_admits(&pol->rules[r], s);
}

uint64_t pr_subject_mask(const pr_policy *pol, const pr_subject *s) {
    uint64_t m = 0;
    for (uint32_t i = 0; i < pol->n && i < 64; i++)
        if (rule_admits(&pol->rules[i], s)) m |= (uint64_t)1 << i;
    return m;
}

/* The first guard of r the arguments fail. *valid: 0 not yet known, 1 the
 * arguments are valid JSON (checked once per decision, so each guard can
 * walk them trusting their structure), -1 they are not (every guard fails). */
static int first_failing(const pr_rule *r, const char *args, size_t n, int *valid,
                         const pr_guard **failed) {
    if (r->n_guards && !*valid) *valid = mcpg_json_validate(args, n) == 0 ? 1 : -1;
    for (uint32_t i = 0; i < r->n_guards; i++) {
        if (*valid > 0 && pr_guard_passes(&r->guards[i], args, n)) continue;
        *failed = &r->guards[i];
        return 1;
    }
    return 0;
}

pr_verdict pr_decide(const pr_policy *pol, const pr_subject *s, pr_kind kind, const char *name,
                     size_t n, const char *args, size_t args_n, const pr_guard **failed) {
    pr_verdict v = PR_NO_RULE;
    int valid = 0;
    for (uint32_t i = 0; i < pol->n; i++) {
        const pr_rule *r = &pol->rules[i];
        /* the item first: a literal compare, usually cheaper than the caller */
        if (!any_glob(&r->items[kind], name, n) || !pr_admits(pol, i, s)) continue;
        const pr_guard *g = NULL;
        if (!args || !first_failing(r, args, args_n, &valid, &g)) return PR_ALLOW;
        if (v == PR_NO_RULE) *failed = g;
        v = PR_GUARD_FAILED;
    }
    return v;
}

static int any_glob_meets_template(const pr_globs *g, const char *t, size_t n) {
    for (uint32_t i = 0; i < g->n; i++)
        if (pr_glob_meets_template(&g->v[i], t, n)) return 1;
    return 0;
}

int pr_visible(const pr_policy *pol, const pr_subject *s, pr_kind kind, const char *name,
               size_t n, int is_template) {
    for (uint32_t i = 0; i < pol->n; i++) {
        const pr_globs *g = &pol->rules[i].items[kind];
        int covers = is_template ? any_glob_meets_template(g, name, n) : any_glob(g, name, n);
        if (covers && pr_admits(pol, i, s)) return 1;
    }
    return 0;
}

/* r admits s but for its roles: an authenticated caller whose principal
 * and tenant fit, refused only for want of a role r names. */
static int admits_but_roles(const pr_rule *r, const pr_subject *s) {
    if (!s->principal.p || r->anonymous || !r->roles.set) return 0;
    if (r->principal.set && !any_glob(&r->principal, s->principal.p, s->principal.n)) return 0;
    if (r->tenant.set && (!s->tenant.p || !any_glob(&r->tenant, s->tenant.p, s->tenant.n))) return 0;
    return !any_role(&r->roles, s);
}

/* Append word to the space-separated list out (len *k), once. */
static int add_word(char *out, size_t cap, size_t *k, const char *w, size_t wn) {
    for (const char *p = out; (p = strstr(p, w)); p += wn)
        if ((p == out || p[-1] == ' ') && (p[wn] == ' ' || p[wn] == '\0')) return 0;
    if (*k + (*k ? 1 : 0) + wn + 1 > cap) return 0;
    if (*k) out[(*k)++] = ' ';
    memcpy(out + *k, w, wn);
    *k += wn;
    out[*k] = '\0';
    return 1;
}

int pr_missing_roles(const pr_policy *pol, const pr_subject *s, pr_kind kind, const char *name,
                     size_t n, char *out, size_t cap) {
    size_t k = 0;
    int count = 0;
    if (cap) out[0] = '\0';
    for (uint32_t i = 0; cap && i < pol->n; i++) {
        const pr_rule *r = &pol->rules[i];
        if (!any_glob(&r->items[kind], name, n) || !admits_but_roles(r, s)) continue;
        for (uint32_t j = 0; j < r->roles.n; j++) {
            const pr_glob *g = &r->roles.v[j];
            /* a pattern names no scope a client could ask for; nor does a
             * word a challenge cannot quote */
            if (g->shape != PR_GLOB_LITERAL || !g->lit_len || strpbrk(g->lit, " \"\\")) continue;
            count += add_word(out, cap, &k, g->lit, g->lit_len);
        }
    }
    return count;
}

int pr_admits_any(const pr_policy *pol, const pr_subject *s) {
    for (uint32_t i = 0; i < pol->n; i++)
        if (pr_admits(pol, i, s)) return 1;
    return 0;
}
