/* policy_rules: the rules from the manifest and the rules file, checked and
 * compiled. One parse serves validate() (problems with key paths) and
 * create() (problems logged), so both agree on what is valid. */
#define _GNU_SOURCE
#include "pr_rules.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where problems go: inline rules are reported at their own key path; a
 * file's at "rules_file", naming the file and the rule's path in it. */
typedef struct where {
    mcpg_config_problems *p;
    const char *file; /* NULL: the manifest's "rules" */
} where;

static void problem(const where *w, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(const where *w, const char *path, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (w->file) mcpg_config_problem(w->p, "rules_file", "%s: %s: %s", w->file, path, msg);
    else mcpg_config_problem(w->p, path, "%s", msg);
}

/* A key path (cut short rather than overflow: paths name manifest keys). */
static void path_of(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void path_of(char *dst, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

/* A string without NUL bytes, 1..PR_MAX_PATTERN long (empty allowed when
 * may_be_empty). NULL after a problem. */
static const char *pattern_text(const where *w, const char *path, json_t *v, int may_be_empty) {
    if (!json_is_string(v)) return problem(w, path, "expected a string"), NULL;
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (strlen(s) != n) return problem(w, path, "may not hold a NUL character"), NULL;
    if (n == 0 && !may_be_empty) return problem(w, path, "may not be empty"), NULL;
    if (n > PR_MAX_PATTERN)
        return problem(w, path, "longer than %d bytes", PR_MAX_PATTERN), NULL;
    return s;
}

/* ---- globs ---- */

static void glob_one(const where *w, const char *path, json_t *v, pr_globs *g) {
    const char *s = pattern_text(w, path, v, 0), *why = NULL;
    if (!s) return;
    if (pr_glob_compile(&g->v[g->n], s, strlen(s), &why) < 0) return problem(w, path, "%s", why);
    g->n++;
}

/* A glob, or a non-empty array of them. */
static void parse_globs(const where *w, const char *path, json_t *v, pr_globs *g) {
    g->set = 1;
    size_t count = json_is_array(v) ? json_array_size(v) : 1;
    if (json_is_array(v) && count == 0) return problem(w, path, "expected at least one glob");
    if (!json_is_array(v) && !json_is_string(v))
        return problem(w, path, "expected a glob (a string) or an array of globs");
    if (count > PR_MAX_GLOBS) return problem(w, path, "more than %d globs", PR_MAX_GLOBS);
    g->v = calloc(count, sizeof *g->v);
    if (!g->v) return problem(w, path, "out of memory");
    if (!json_is_array(v)) return glob_one(w, path, v, g);
    char sub[200];
    for (size_t i = 0; i < count; i++) {
        path_of(sub, sizeof sub, "%s[%zu]", path, i);
        glob_one(w, sub, json_array_get(v, i), g);
    }
}

static void globs_free(pr_globs *g) {
    for (uint32_t i = 0; i < g->n; i++) pr_glob_free(&g->v[i]);
    free(g->v);
    memset(g, 0, sizeof *g);
}

/* ---- guards ---- */

static const char *const guard_keys[] = {"pointer", "required", "regex", "enum", "max_length",
                                         "min", "max"};

static void parse_regex(const where *w, const char *path, json_t *v, pr_guard *g) {
    const char *s = pattern_text(w, path, v, 1);
    if (!s) return;
    int rc = regcomp(&g->re, s, REG_EXTENDED);
    if (rc != 0) {
        char err[160];
        regerror(rc, &g->re, err, sizeof err);
        return problem(w, path, "not a POSIX extended regex: %s", err);
    }
    g->kind = PR_GUARD_REGEX;
}

static void parse_enum(const where *w, const char *path, json_t *v, pr_guard *g) {
    if (!json_is_array(v) || json_array_size(v) == 0)
        return problem(w, path, "expected a non-empty array of values");
    g->values = calloc(json_array_size(v), sizeof *g->values);
    if (!g->values) return problem(w, path, "out of memory");
    g->kind = PR_GUARD_ENUM; /* from here pr_guard_free frees the values */
    char sub[200];
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        pr_value *val = &g->values[g->n_values];
        path_of(sub, sizeof sub, "%s[%zu]", path, i);
        switch (json_typeof(e)) {
        case JSON_STRING:
            val->type = MCPG_JSON_STRING;
            val->len = json_string_length(e);
            val->text = malloc(val->len + 1);
            if (!val->text) return problem(w, sub, "out of memory");
            memcpy(val->text, json_string_value(e), val->len + 1);
            break;
        case JSON_INTEGER:
        case JSON_REAL:
            val->type = MCPG_JSON_NUMBER;
            val->number = json_number_value(e);
            break;
        case JSON_TRUE: val->type = MCPG_JSON_TRUE; break;
        case JSON_FALSE: val->type = MCPG_JSON_FALSE; break;
        case JSON_NULL: val->type = MCPG_JSON_NULL; break;
        default: return problem(w, sub, "enum values are strings, numbers, true, false or null");
        }
        g->n_values++;
    }
}

static void parse_range(const where *w, const char *path, json_t *min, json_t *max, pr_guard *g) {
    char sub[200];
    g->kind = PR_GUARD_RANGE;
    if (min && !json_is_number(min)) {
        path_of(sub, sizeof sub, "%s.min", path);
        return problem(w, sub, "expected a number");
    }
    if (max && !json_is_number(max)) {
        path_of(sub, sizeof sub, "%s.max", path);
        return problem(w, sub, "expected a number");
    }
    g->has_min = min != NULL;
    g->has_max = max != NULL;
    g->min = min ? json_number_value(min) : 0;
    g->max = max ? json_number_value(max) : 0;
    if (min && max && g->min > g->max) {
        path_of(sub, sizeof sub, "%s.min", path);
        problem(w, sub, "greater than max (%g > %g)", g->min, g->max);
    }
}

/* What the guard asks of the value: exactly one of regex, enum, max_length
 * or min/max, or nothing but presence (required). */
static void parse_constraint(const where *w, const char *path, json_t *o, pr_guard *g) {
    json_t *re = json_object_get(o, "regex"), *en = json_object_get(o, "enum"),
           *ml = json_object_get(o, "max_length"), *min = json_object_get(o, "min"),
           *max = json_object_get(o, "max");
    int classes = !!re + !!en + !!ml + !!(min || max);
    char sub[200];
    if (classes > 1)
        return problem(w, path, "give one of regex, enum, max_length or min/max (use two "
                                "guards on the same pointer for two checks)");
    if (classes == 0 && !g->required)
        return problem(w, path, "checks nothing: give regex, enum, max_length, min/max, "
                                "or required: true");
    if (re) {
        path_of(sub, sizeof sub, "%s.regex", path);
        parse_regex(w, sub, re, g);
    } else if (en) {
        path_of(sub, sizeof sub, "%s.enum", path);
        parse_enum(w, sub, en, g);
    } else if (ml) {
        path_of(sub, sizeof sub, "%s.max_length", path);
        if (!json_is_integer(ml) || json_integer_value(ml) < 0)
            return problem(w, sub, "expected a non-negative integer");
        g->kind = PR_GUARD_LENGTH;
        g->max_length = (uint64_t)json_integer_value(ml);
    } else if (min || max) {
        parse_range(w, path, min, max, g);
    }
}

static void parse_guard(const where *w, const char *path, json_t *o, pr_guard *g) {
    char sub[200];
    if (!json_is_object(o)) return problem(w, path, "expected an object {pointer, ...}");
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        size_t nk = sizeof guard_keys / sizeof *guard_keys, i = 0;
        while (i < nk && strcmp(k, guard_keys[i]) != 0) i++;
        path_of(sub, sizeof sub, "%s.%.64s", path, k);
        if (i == nk) {
            const char *hint = mcpg_did_you_mean(k, guard_keys, nk);
            if (hint) problem(w, sub, "unknown key (did you mean \"%s\"?)", hint);
            else problem(w, sub, "unknown key");
        }
    }
    json_t *req = json_object_get(o, "required");
    if (req && !json_is_boolean(req)) {
        path_of(sub, sizeof sub, "%s.required", path);
        problem(w, sub, "expected true or false");
    }
    g->required = json_is_true(req);
    path_of(sub, sizeof sub, "%s.pointer", path);
    json_t *ptr = json_object_get(o, "pointer");
    if (!ptr) return problem(w, sub, "is required (a JSON pointer into the arguments, e.g. \"/path\")");
    const char *text = pattern_text(w, sub, ptr, 1), *why = NULL;
    if (!text) return;
    if (pr_pointer_compile(&g->at, text, &why) < 0) return problem(w, sub, "%s", why);
    parse_constraint(w, path, o, g);
}

/* ---- rules ---- */

static const char *const rule_keys[] = {"id", "principal", "tenant", "roles", "anonymous",
                                        "tools", "prompts", "resources", "events", "arguments"};
static const char *const item_keys[PR_KINDS] = {"tools", "prompts", "resources", "events"};

static void check_rule_keys(const where *w, const char *path, json_t *o) {
    const char *k;
    json_t *v;
    char sub[200];
    size_t nk = sizeof rule_keys / sizeof *rule_keys;
    json_object_foreach(o, k, v) {
        size_t i = 0;
        while (i < nk && strcmp(k, rule_keys[i]) != 0) i++;
        if (i < nk) continue;
        path_of(sub, sizeof sub, "%s.%.64s", path, k);
        const char *hint = mcpg_did_you_mean(k, rule_keys, nk);
        if (hint) problem(w, sub, "unknown key (did you mean \"%s\"?)", hint);
        else problem(w, sub, "unknown key");
    }
}

static void parse_label(const where *w, const char *path, json_t *o, pr_rule *r) {
    json_t *id = json_object_get(o, "id");
    char sub[200];
    path_of(sub, sizeof sub, "%s.id", path);
    if (id && !pattern_text(w, sub, id, 0)) return;
    if (id) r->label = strdup(json_string_value(id));
    else if (w->file && asprintf(&r->label, "%s: %s", w->file, path) < 0) r->label = NULL;
    else if (!w->file) r->label = strdup(path);
    if (!r->label) problem(w, path, "out of memory");
}

static void parse_who(const where *w, const char *path, json_t *o, pr_rule *r) {
    char sub[200];
    json_t *anon = json_object_get(o, "anonymous");
    if (anon && !json_is_boolean(anon)) {
        path_of(sub, sizeof sub, "%s.anonymous", path);
        problem(w, sub, "expected true or false");
    }
    r->anonymous = json_is_true(anon);
    static const char *const who_keys[] = {"principal", "tenant", "roles"};
    pr_globs *who[] = {&r->principal, &r->tenant, &r->roles};
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_object_get(o, who_keys[i]);
        if (!v) continue;
        path_of(sub, sizeof sub, "%s.%s", path, who_keys[i]);
        if (r->anonymous)
            problem(w, sub, "an anonymous rule admits callers without identity: it cannot "
                            "also match %s", who_keys[i]);
        else
            parse_globs(w, sub, v, who[i]);
    }
}

static void parse_items(const where *w, const char *path, json_t *o, pr_rule *r) {
    char sub[200];
    int any = 0;
    for (int k = 0; k < PR_KINDS; k++) {
        json_t *v = json_object_get(o, item_keys[k]);
        if (!v) continue;
        any = 1;
        path_of(sub, sizeof sub, "%s.%s", path, item_keys[k]);
        parse_globs(w, sub, v, &r->items[k]);
    }
    if (!any) problem(w, path, "allows nothing: give tools, prompts, resources or events (globs)");
}

static void parse_guards(const where *w, const char *path, json_t *o, pr_rule *r) {
    json_t *a = json_object_get(o, "arguments");
    if (!a) return;
    char sub[200];
    path_of(sub, sizeof sub, "%s.arguments", path);
    if (!json_is_array(a)) return problem(w, sub, "expected an array of guards");
    if (!r->items[PR_TOOL].set && !r->items[PR_PROMPT].set)
        return problem(w, sub, "only tools and prompts take arguments");
    if (json_array_size(a) > PR_MAX_GUARDS)
        return problem(w, sub, "more than %d guards", PR_MAX_GUARDS);
    r->guards = calloc(json_array_size(a) + 1, sizeof *r->guards);
    if (!r->guards) return problem(w, sub, "out of memory");
    size_t i;
    json_t *g;
    json_array_foreach(a, i, g) {
        path_of(sub, sizeof sub, "%s.arguments[%zu]", path, i);
        r->n_guards = (uint32_t)i + 1; /* pr_guard_free copes with a half-parsed one */
        parse_guard(w, sub, g, &r->guards[i]);
    }
}

static void parse_rule(const where *w, const char *path, json_t *o, pr_rule *r) {
    if (!json_is_object(o)) return problem(w, path, "expected a rule (an object)");
    check_rule_keys(w, path, o);
    parse_label(w, path, o, r);
    parse_who(w, path, o, r);
    parse_items(w, path, o, r);
    parse_guards(w, path, o, r);
}

static void rule_free(pr_rule *r) {
    free(r->label);
    globs_free(&r->principal);
    globs_free(&r->tenant);
    globs_free(&r->roles);
    for (int k = 0; k < PR_KINDS; k++) globs_free(&r->items[k]);
    for (uint32_t i = 0; i < r->n_guards; i++) pr_guard_free(&r->guards[i]);
    free(r->guards);
}

void pr_policy_free(pr_policy *pol) {
    for (uint32_t i = 0; i < pol->n; i++) rule_free(&pol->rules[i]);
    free(pol->rules);
    memset(pol, 0, sizeof *pol);
}

static void parse_rule_array(const where *w, json_t *arr, pr_policy *pol) {
    size_t add = json_array_size(arr);
    if (pol->n + add > PR_MAX_RULES)
        return problem(w, "rules", "more than %d rules in all", PR_MAX_RULES);
    pr_rule *nv = realloc(pol->rules, (pol->n + add + 1) * sizeof *nv);
    if (!nv) return problem(w, "rules", "out of memory");
    pol->rules = nv;
    memset(nv + pol->n, 0, (add + 1) * sizeof *nv);
    char path[64];
    for (size_t i = 0; i < add; i++) {
        path_of(path, sizeof path, "rules[%zu]", i);
        parse_rule(w, path, json_array_get(arr, i), &pol->rules[pol->n++]);
    }
}

static void parse_inline(mcpg_config_problems *p, const char *text, pr_policy *pol) {
    where w = {p, NULL};
    json_error_t err;
    json_t *arr = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!arr) problem(&w, "rules", "%s", err.text);
    else if (!json_is_array(arr)) problem(&w, "rules", "expected an array of rules");
    else parse_rule_array(&w, arr, pol);
    json_decref(arr);
}

static void parse_file(mcpg_config_problems *p, const char *file, pr_policy *pol) {
    where w = {p, file};
    json_error_t err;
    json_t *doc = json_load_file(file, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!doc) {
        mcpg_config_problem(p, "rules_file", "%s: %s (line %d)", file, err.text, err.line);
        return;
    }
    json_t *arr = json_is_object(doc) ? json_object_get(doc, "rules") : doc;
    if (json_is_object(doc) && json_object_size(doc) != (arr ? 1u : 0u))
        mcpg_config_problem(p, "rules_file", "%s: the file is an array of rules or an object "
                                             "with one key, \"rules\"", file);
    else if (!json_is_array(arr))
        mcpg_config_problem(p, "rules_file", "%s: expected an array of rules (or "
                                             "{\"rules\": [...]})", file);
    else
        parse_rule_array(&w, arr, pol);
    json_decref(doc);
}

int pr_policy_parse(pr_policy *pol, const char *rules_json, const char *rules_file,
                    mcpg_config_problems *p) {
    memset(pol, 0, sizeof *pol);
    int before = p->errors;
    if (!rules_json && !rules_file)
        mcpg_config_problem(p, "rules", "give rules, rules_file or both (\"rules\": [] denies "
                                        "everything)");
    if (rules_json) parse_inline(p, rules_json, pol);
    if (rules_file) parse_file(p, rules_file, pol);
    return p->errors - before;
}
