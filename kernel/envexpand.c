/* ${VAR} and ${VAR:-default} expansion of the manifest text, before JSON
 * parsing, so secrets stay in the environment. "$$" is a literal "$". */
#include "kernel.h"

#include <stdlib.h>
#include <string.h>

static int append_var(mcpg_buf *out, const char *spec, size_t len, const char *file,
                      errlist *errs) {
    char name[256];
    const char *dflt = NULL;
    size_t dlen = 0, nlen = len;
    const char *sep = NULL;
    for (size_t i = 0; i + 1 < len; i++)
        if (spec[i] == ':' && spec[i + 1] == '-') {
            sep = spec + i;
            break;
        }
    if (sep) {
        nlen = (size_t)(sep - spec);
        dflt = sep + 2;
        dlen = len - nlen - 2;
    }
    if (nlen == 0 || nlen >= sizeof name) {
        errlist_add(errs, file, "", "bad variable reference ${%.*s}", (int)len, spec);
        return -1;
    }
    memcpy(name, spec, nlen);
    name[nlen] = '\0';
    const char *val = getenv(name);
    if (val && (*val || !dflt)) return mcpg_buf_puts(out, val);
    if (dflt) return mcpg_buf_append(out, dflt, dlen);
    errlist_add(errs, file, "", "environment variable %s is not set (use ${%s:-default})", name,
                name);
    return -1;
}

char *expand_env(const char *text, const char *file, errlist *errs) {
    mcpg_buf out = {0};
    int bad = 0;
    for (const char *p = text; *p;) {
        if (p[0] == '$' && p[1] == '$') {
            mcpg_buf_append(&out, "$", 1);
            p += 2;
        } else if (p[0] == '$' && p[1] == '{') {
            const char *end = strchr(p + 2, '}');
            if (!end) {
                errlist_add(errs, file, "", "unterminated ${ in the manifest");
                bad = 1;
                break;
            }
            if (append_var(&out, p + 2, (size_t)(end - p - 2), file, errs)) bad = 1;
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
