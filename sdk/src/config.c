/* Declarative config: parse an instance's "config" object against the
 * module's field table (nginx-style directives as data). The kernel, the
 * fake host and --check all use this one parser, so a manifest that passes
 * --check is exactly what create() will see. Startup only: jansson is fine.
 * The table is walked with mcpg_config_first/next: by each entry's own size,
 * which is the module's sizeof, not ours. */
#include <mcpg/sdk.h>

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct report {
    mcpg_config_err_fn fn;
    void *ctx;
    int count;
} report;

static void problem(report *r, const char *key, const char *fmt, ...) MCPG_PRINTF(3, 4);
static void problem(report *r, const char *key, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->count++;
    if (r->fn) r->fn(r->ctx, key, msg);
}

static const mcpg_config_field *find_field(const mcpg_config_field *fields, const char *key) {
    for (const mcpg_config_field *f = mcpg_config_first(fields); f; f = mcpg_config_next(f))
        if (strcmp(f->key, key) == 0) return f;
    return NULL;
}

static void unknown_key(report *r, const mcpg_config_field *fields, const char *key) {
    const char *names[128];
    size_t n = 0;
    for (const mcpg_config_field *f = mcpg_config_first(fields); f && n < 128;
         f = mcpg_config_next(f))
        names[n++] = f->key;
    const char *hint = mcpg_did_you_mean(key, names, n);
    if (hint)
        problem(r, key, "unknown key (did you mean \"%s\"?)", hint);
    else
        problem(r, key, "unknown key");
}

static int in_enum(const char *values, const char *word) {
    size_t wl = strlen(word);
    for (const char *p = values; *p;) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == wl && strncmp(p, word, l) == 0) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

static void enum_list(const char *values, char *out, size_t cap) {
    size_t o = 0;
    for (const char *p = values; *p && o + 3 < cap; p++) {
        if (*p == '|') {
            out[o++] = ',';
            out[o++] = ' ';
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

static void set_value(report *r, const mcpg_config_field *f, json_t *v, char *base) {
    char *slot = base + f->offset;
    switch (f->type) {
    case MCPG_CFG_BOOL:
        if (!json_is_boolean(v)) return problem(r, f->key, "expected a boolean");
        *(int *)(void *)slot = json_is_true(v);
        return;
    case MCPG_CFG_INT: {
        if (!json_is_integer(v)) return problem(r, f->key, "expected an integer");
        json_int_t x = json_integer_value(v);
        if (f->min < f->max && (x < f->min || x > f->max))
            return problem(r, f->key, "must be between %lld and %lld", (long long)f->min,
                           (long long)f->max);
        *(int64_t *)(void *)slot = (int64_t)x;
        return;
    }
    case MCPG_CFG_DOUBLE: {
        if (!json_is_number(v)) return problem(r, f->key, "expected a number");
        double x = json_number_value(v);
        if (f->dmin < f->dmax && (x < f->dmin || x > f->dmax))
            return problem(r, f->key, "must be between %g and %g", f->dmin, f->dmax);
        *(double *)(void *)slot = x;
        return;
    }
    case MCPG_CFG_STRING:
    case MCPG_CFG_ENUM: {
        if (!json_is_string(v)) return problem(r, f->key, "expected a string");
        const char *s = json_string_value(v);
        if (f->type == MCPG_CFG_ENUM && f->enum_values && !in_enum(f->enum_values, s)) {
            char list[256];
            enum_list(f->enum_values, list, sizeof list);
            return problem(r, f->key, "must be one of: %s", list);
        }
        char **dst = (char **)(void *)slot;
        free(*dst);
        *dst = strdup(s);
        return;
    }
    case MCPG_CFG_JSON: {
        char **dst = (char **)(void *)slot;
        free(*dst);
        *dst = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        return;
    }
    default:
        problem(r, f->key, "the module declares an unknown field type %u", f->type);
    }
}

static void apply_defaults(report *r, const mcpg_config_field *fields, char *base) {
    for (const mcpg_config_field *f = mcpg_config_first(fields); f; f = mcpg_config_next(f)) {
        if (!f->default_json) continue;
        json_error_t e;
        json_t *v = json_loads(f->default_json, JSON_DECODE_ANY, &e);
        if (!v) {
            problem(r, f->key, "the module's default is not valid JSON: %s", e.text);
            continue;
        }
        set_value(r, f, v, base);
        json_decref(v);
    }
}

int mcpg_config_parse(const mcpg_config_field *fields, const char *json, size_t len,
                      void *out, mcpg_config_err_fn err, void *ctx) {
    report r = {err, ctx, 0};
    char *base = out;
    apply_defaults(&r, fields, base);
    json_t *root = NULL;
    if (json && len) {
        json_error_t e;
        root = json_loadb(json, len, JSON_DECODE_ANY, &e);
        if (!root) {
            problem(&r, "", "invalid JSON: %s", e.text);
            return r.count;
        }
    }
    if (root && !json_is_object(root)) {
        problem(&r, "", "expected an object");
        json_decref(root);
        return r.count;
    }
    const char *key;
    json_t *v;
    if (root) {
        json_object_foreach(root, key, v) {
            const mcpg_config_field *f = find_field(fields, key);
            if (!f)
                unknown_key(&r, fields, key);
            else
                set_value(&r, f, v, base);
        }
    }
    for (const mcpg_config_field *f = mcpg_config_first(fields); f; f = mcpg_config_next(f))
        if ((f->flags & MCPG_CFG_REQUIRED) && !(root && json_object_get(root, f->key)))
            problem(&r, f->key, "is required");
    json_decref(root);
    return r.count;
}

void mcpg_config_free(const mcpg_config_field *fields, void *out) {
    char *base = out;
    for (const mcpg_config_field *f = mcpg_config_first(fields); f; f = mcpg_config_next(f)) {
        if (f->type != MCPG_CFG_STRING && f->type != MCPG_CFG_ENUM && f->type != MCPG_CFG_JSON)
            continue;
        char **dst = (char **)(void *)(base + f->offset);
        free(*dst);
        *dst = NULL;
    }
}

/* ---- problems in a module's own config ---- */

void mcpg_config_problem(mcpg_config_problems *p, const char *path, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->errors++;
    if (p->rep)
        p->h->report_error(p->rep, path, "%s", msg);
    else if (p->self)
        p->h->log(p->self, MCPG_LOG_ERROR, "config %s: %s", path, msg);
}

void mcpg_config_unknown_key(mcpg_config_problems *p, const char *path, const char *key,
                             const char *const *known, size_t n) {
    const char *hint = mcpg_did_you_mean(key, known, n);
    if (hint) mcpg_config_problem(p, path, "unknown key (did you mean \"%s\"?)", hint);
    else mcpg_config_problem(p, path, "unknown key");
}
