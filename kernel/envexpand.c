/* ${VAR} and ${VAR:-default} expansion of the manifest's string values, after
 * JSON parsing, so secrets stay in the environment and every error names the
 * key whose value holds the reference. "$$" is a literal "$". The top-level
 * "description" is prose about the manifest: it is never expanded. */
#include "kernel.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* [A-Za-z_][A-Za-z0-9_]*: what a shell would accept as a variable's name. */
static bool valid_var_name(const char *s, size_t n) {
    if (n == 0 || n > 255 || (s[0] >= '0' && s[0] <= '9')) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_';
        if (!ok) return false;
    }
    return true;
}

static int append_var(mcpg_buf *out, const char *spec, size_t len, const char *file,
                      const char *path, errlist *errs) {
    const char *sep = NULL;
    for (size_t i = 0; i + 1 < len && !sep; i++)
        if (spec[i] == ':' && spec[i + 1] == '-') sep = spec + i;
    size_t nlen = sep ? (size_t)(sep - spec) : len;
    if (!valid_var_name(spec, nlen)) {
        errlist_add(errs, file, path, "bad variable name \"%.*s\" in ${%.*s} (a name is letters, "
                    "digits and _, not starting with a digit)", (int)nlen, spec, (int)len, spec);
        return -1;
    }
    char name[256];
    memcpy(name, spec, nlen);
    name[nlen] = '\0';
    const char *val = getenv(name);
    if (val && (*val || !sep)) return mcpg_buf_puts(out, val);
    if (sep) return mcpg_buf_append(out, sep + 2, len - nlen - 2);
    errlist_add(errs, file, path, "environment variable %s is not set (use ${%s:-default})", name,
                name);
    return -1;
}

char *expand_env_at(const char *text, const char *file, const char *path, errlist *errs) {
    mcpg_buf out = {0};
    int bad = 0;
    for (const char *p = text; *p;) {
        if (p[0] == '$' && p[1] == '$') {
            mcpg_buf_append(&out, "$", 1);
            p += 2;
        } else if (p[0] == '$' && p[1] == '{') {
            const char *end = strchr(p + 2, '}');
            if (!end) {
                errlist_add(errs, file, path, "unterminated ${ (no closing }) in \"%.60s\"", p);
                bad = 1;
                break;
            }
            if (append_var(&out, p + 2, (size_t)(end - p - 2), file, path, errs)) bad = 1;
            p = end + 1;
        } else {
            const char *next = strchr(p, '$');
            size_t n = next ? (size_t)(next - p) : strlen(p);
            if (n == 0) n = 1; /* a lone '$' */
            mcpg_buf_append(&out, p, n);
            p += n;
        }
    }
    if (bad) {
        mcpg_buf_free(&out);
        return NULL;
    }
    if (!out.data) mcpg_buf_append(&out, "", 0);
    return out.data;
}

char *expand_env(const char *text, const char *file, errlist *errs) {
    return expand_env_at(text, file, "", errs);
}

static int expand_value(json_t *v, const char *path, const char *file, errlist *errs);

static int expand_members(json_t *obj, const char *path, const char *file, errlist *errs) {
    int bad = 0;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (!*path && strcmp(key, "description") == 0) continue;
        char p[512];
        snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", key);
        if (expand_value(v, p, file, errs)) bad = 1;
    }
    return bad;
}

static int expand_value(json_t *v, const char *path, const char *file, errlist *errs) {
    if (json_is_object(v)) return expand_members(v, path, file, errs);
    int bad = 0;
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            char p[512];
            snprintf(p, sizeof p, "%s[%zu]", path, i);
            if (expand_value(e, p, file, errs)) bad = 1;
        }
        return bad;
    }
    if (!json_is_string(v) || !strchr(json_string_value(v), '$')) return 0;
    char *s = expand_env_at(json_string_value(v), file, path, errs);
    if (!s) return -1;
    json_string_set(v, s);
    free(s);
    return 0;
}

int expand_env_json(json_t *root, const char *file, errlist *errs) {
    return expand_value(root, "", file, errs) ? -1 : 0;
}
