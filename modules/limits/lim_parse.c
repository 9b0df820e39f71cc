/* limits: the `limits` array parsed into lim_defs. One parse serves
 * validate() (problems at key paths) and create() (problems logged). */
#include "lim_rules.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const limit_keys[] = {"name", "match", "key", "scope",
                                         "concurrency", "rate", "budget"};
static const char *const match_keys[] = {"tools", "principals", "tenants"};
static const char *const rate_keys[] = {"per_minute", "per_second", "burst"};
static const char *const budget_keys[] = {"calls", "window_s"};
#define COUNT(a) (sizeof(a) / sizeof *(a))

/* A key path, cut short rather than overflow (paths name manifest keys). */
static void path_of(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void path_of(char *dst, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

static void unknown_keys(mcpg_config_problems *p, const char *path, json_t *obj,
                         const char *const *known, size_t n) {
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        size_t i = 0;
        while (i < n && strcmp(k, known[i])) i++;
        char sub[200];
        path_of(sub, sizeof sub, "%s.%s", path, k);
        if (i == n) mcpg_config_unknown_key(p, sub, k, known, n);
    }
}

/* An integer in [lo, hi] at path, or -1 after a problem. */
static int64_t int_in(mcpg_config_problems *p, const char *path, json_t *v, int64_t lo,
                      int64_t hi) {
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        mcpg_config_problem(p, path, "must be an integer between %lld and %lld", (long long)lo,
                            (long long)hi);
        return -1;
    }
    return json_integer_value(v);
}

static void globs_of(mcpg_config_problems *p, const char *path, json_t *v, lim_globs *g) {
    if (!v) return;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if ((!json_is_array(v) && !json_is_string(v)) || n == 0 || n > LIM_MAX_GLOBS)
        return mcpg_config_problem(p, path, "expected a glob or an array of 1..%d globs",
                                   LIM_MAX_GLOBS);
    if (!(g->v = calloc(n, sizeof *g->v))) return mcpg_config_problem(p, path, "out of memory");
    char sub[160];
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (json_is_array(v)) path_of(sub, sizeof sub, "%s[%zu]", path, i);
        else path_of(sub, sizeof sub, "%s", path);
        const char *why = NULL;
        if (!json_is_string(e) || json_string_length(e) == 0)
            mcpg_config_problem(p, sub, "expected a non-empty string");
        else if (pr_glob_compile(&g->v[g->n], json_string_value(e), json_string_length(e),
                                 &why) < 0)
            mcpg_config_problem(p, sub, "%s", why);
        else g->n++;
    }
}

static void parse_match(mcpg_config_problems *p, const char *path, json_t *m, lim_def *d) {
    char sub[160];
    if (!json_is_object(m)) return mcpg_config_problem(p, path, "expected an object");
    unknown_keys(p, path, m, match_keys, COUNT(match_keys));
    path_of(sub, sizeof sub, "%s.tools", path);
    globs_of(p, sub, json_object_get(m, "tools"), &d->tools);
    path_of(sub, sizeof sub, "%s.principals", path);
    globs_of(p, sub, json_object_get(m, "principals"), &d->principals);
    path_of(sub, sizeof sub, "%s.tenants", path);
    globs_of(p, sub, json_object_get(m, "tenants"), &d->tenants);
}

/* key: an array of "tool", "principal", "tenant", "session" (default ["tool"]). */
static void parse_key(mcpg_config_problems *p, const char *path, json_t *k, lim_def *d) {
    static const char *const parts[] = {"tool", "principal", "tenant", "session"};
    d->key_parts = LIM_KEY_TOOL;
    if (!k) return;
    if (!json_is_array(k)) {
        mcpg_config_problem(p, path, "expected an array of tool, principal, tenant, session");
        return;
    }
    d->key_parts = 0;
    char sub[160];
    size_t i;
    json_t *e;
    json_array_foreach(k, i, e) {
        path_of(sub, sizeof sub, "%s[%zu]", path, i);
        size_t j = 0;
        while (j < COUNT(parts) && !(json_is_string(e) && !strcmp(json_string_value(e), parts[j])))
            j++;
        if (j == COUNT(parts)) mcpg_config_problem(p, sub, "expected tool, principal, tenant or session");
        else d->key_parts |= 1u << j;
    }
}

static void parse_rate(mcpg_config_problems *p, const char *path, json_t *r, lim_def *d) {
    char sub[160];
    if (!json_is_object(r)) return mcpg_config_problem(p, path, "expected an object");
    unknown_keys(p, path, r, rate_keys, COUNT(rate_keys));
    json_t *pm = json_object_get(r, "per_minute"), *ps = json_object_get(r, "per_second");
    if (!pm == !ps)
        return mcpg_config_problem(p, path, "needs exactly one of per_minute and per_second");
    path_of(sub, sizeof sub, "%s.%s", path, pm ? "per_minute" : "per_second");
    int64_t n = int_in(p, sub, pm ? pm : ps, 1, 60000000);
    if (n > 0) d->interval_us = (pm ? 60000000 : 1000000) / n;
    if (n > 0 && d->interval_us < 1) {
        mcpg_config_problem(p, sub, "more than one call per microsecond");
        n = -1;
    }
    path_of(sub, sizeof sub, "%s.burst", path);
    json_t *b = json_object_get(r, "burst");
    d->burst = b ? int_in(p, sub, b, 1, 1000000) : 1;
}

static void parse_budget(mcpg_config_problems *p, const char *path, json_t *b, lim_def *d) {
    char sub[160];
    if (!json_is_object(b)) return mcpg_config_problem(p, path, "expected an object");
    unknown_keys(p, path, b, budget_keys, COUNT(budget_keys));
    path_of(sub, sizeof sub, "%s.calls", path);
    json_t *c = json_object_get(b, "calls");
    if (!c) mcpg_config_problem(p, sub, "is required");
    else d->n = int_in(p, sub, c, 1, LIM_BUDGET_CALLS_MAX);
    path_of(sub, sizeof sub, "%s.window_s", path);
    json_t *w = json_object_get(b, "window_s");
    int64_t s = w ? int_in(p, sub, w, 0, 366LL * 86400) : 0;
    d->window_us = s > 0 ? s * 1000000 : 0;
}

/* Exactly one of concurrency, rate and budget. */
static void parse_kind(mcpg_config_problems *p, const char *path, json_t *o, lim_def *d) {
    json_t *c = json_object_get(o, "concurrency"), *r = json_object_get(o, "rate"),
           *b = json_object_get(o, "budget");
    char sub[160];
    if ((c != NULL) + (r != NULL) + (b != NULL) != 1)
        return mcpg_config_problem(p, path, "needs exactly one of concurrency, rate and budget");
    if (c) {
        d->type = LIM_CONCURRENCY;
        path_of(sub, sizeof sub, "%s.concurrency", path);
        d->n = int_in(p, sub, c, 1, 1000000);
    } else if (r) {
        d->type = LIM_RATE;
        path_of(sub, sizeof sub, "%s.rate", path);
        parse_rate(p, sub, r, d);
    } else {
        d->type = LIM_BUDGET;
        path_of(sub, sizeof sub, "%s.budget", path);
        parse_budget(p, sub, b, d);
    }
}

static int name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > LIM_MAX_NAME) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-' || *s == '.'))
            return 0;
    return 1;
}

static void parse_one(mcpg_config_problems *p, lim_set *s, size_t i, json_t *o) {
    char path[64], sub[160];
    path_of(path, sizeof path, "limits[%zu]", i);
    lim_def *d = &s->v[s->n++];
    if (!json_is_object(o)) return mcpg_config_problem(p, path, "expected an object");
    unknown_keys(p, path, o, limit_keys, COUNT(limit_keys));
    json_t *name = json_object_get(o, "name"), *scope = json_object_get(o, "scope");
    path_of(sub, sizeof sub, "%s.name", path);
    if (!json_is_string(name) || !name_ok(json_string_value(name)))
        mcpg_config_problem(p, sub, "required: 1..%d of [A-Za-z0-9_.-]", LIM_MAX_NAME);
    else snprintf(d->name, sizeof d->name, "%s", json_string_value(name));
    for (size_t j = 0; d->name[0] && j + 1 < s->n; j++)
        if (!strcmp(s->v[j].name, d->name))
            mcpg_config_problem(p, sub, "\"%s\" is also limits[%zu].name", d->name, j);
    path_of(sub, sizeof sub, "%s.scope", path);
    if (scope && !(json_is_string(scope) && (!strcmp(json_string_value(scope), "local") ||
                                             !strcmp(json_string_value(scope), "global"))))
        mcpg_config_problem(p, sub, "expected \"local\" or \"global\"");
    d->global = scope && json_is_string(scope) && !strcmp(json_string_value(scope), "global");
    json_t *match = json_object_get(o, "match");
    path_of(sub, sizeof sub, "%s.match", path);
    if (match) parse_match(p, sub, match, d);
    path_of(sub, sizeof sub, "%s.key", path);
    parse_key(p, sub, json_object_get(o, "key"), d);
    parse_kind(p, path, o, d);
}

int lim_set_parse(lim_set *s, const char *text, mcpg_config_problems *p) {
    memset(s, 0, sizeof *s);
    int before = p->errors;
    if (!text) return 0;
    json_error_t err;
    json_t *arr = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!json_is_array(arr)) {
        mcpg_config_problem(p, "limits", "expected an array of limits");
    } else if (json_array_size(arr) > LIM_MAX_LIMITS) {
        mcpg_config_problem(p, "limits", "more than %d limits", LIM_MAX_LIMITS);
    } else if (json_array_size(arr) && !(s->v = calloc(json_array_size(arr), sizeof *s->v))) {
        mcpg_config_problem(p, "limits", "out of memory");
    } else {
        size_t i;
        json_t *o;
        json_array_foreach(arr, i, o) parse_one(p, s, i, o);
    }
    json_decref(arr);
    return p->errors - before;
}

static void globs_free(lim_globs *g) {
    for (uint32_t i = 0; i < g->n; i++) pr_glob_free(&g->v[i]);
    free(g->v);
}

void lim_set_free(lim_set *s) {
    for (uint32_t i = 0; i < s->n; i++) {
        globs_free(&s->v[i].tools);
        globs_free(&s->v[i].principals);
        globs_free(&s->v[i].tenants);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int any_of(const lim_globs *g, const char *text) {
    if (!g->n) return 1;
    size_t n = strlen(text);
    for (uint32_t i = 0; i < g->n; i++)
        if (pr_glob_match(&g->v[i], text, n)) return 1;
    return 0;
}

int lim_matches(const lim_def *d, const char *tool, const char *principal, const char *tenant) {
    return any_of(&d->tools, tool) && any_of(&d->principals, principal) &&
           any_of(&d->tenants, tenant);
}
