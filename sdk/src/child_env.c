/* The environment a module gives a program it starts: what the program needs
 * to run and read as the operator's shell would, and nothing of the
 * gateway's own (tokens, credentials, secrets) unless the operator names it. */
#define _GNU_SOURCE
#include <mcpg/sdk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* None of these holds a secret: PATH to find what it runs, the locale and
 * time zone so its text and timestamps read as the operator's would. */
static const char *const BASELINE[] = {"LANG", "LC_ALL", "LC_CTYPE", "TZ"};

const char *mcpg_child_path(void) {
    const char *path = getenv("PATH");
    /* empty is taken as unset: some shells read an empty entry as "." */
    return path && path[0] ? path : MCPG_CHILD_DEFAULT_PATH;
}

int mcpg_env_name_valid(const char *s) {
    if (!s || !(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z'))) return 0;
    for (const char *p = s + 1; *p; p++)
        if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
              (*p >= '0' && *p <= '9')))
            return 0;
    return 1;
}

typedef struct env_list {
    char **v;
    size_t n, cap;
} env_list;

/* Takes kv ("NAME=value"), replacing an entry of the same name. */
static int put(env_list *e, char *kv) {
    if (!kv) return -1;
    size_t nl = strcspn(kv, "=") + 1;
    for (size_t i = 0; i < e->n; i++)
        if (strncmp(e->v[i], kv, nl) == 0) {
            free(e->v[i]);
            e->v[i] = kv;
            return 0;
        }
    if (e->n + 1 >= e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        char **nv = realloc(e->v, cap * sizeof *nv);
        if (!nv) {
            free(kv);
            return -1;
        }
        e->v = nv;
        e->cap = cap;
    }
    e->v[e->n++] = kv;
    e->v[e->n] = NULL;
    return 0;
}

/* One of the gateway's variables; one it does not have is left out. */
static int copy(env_list *e, const char *name, const char *value) {
    char *kv = NULL;
    if (!value) return 0;
    return asprintf(&kv, "%s=%s", name, value) < 0 ? -1 : put(e, kv);
}

char **mcpg_child_env(const char *const *inherit, size_t n_inherit, const char *const *set,
                      size_t n_set) {
    env_list e = {0};
    int rc = copy(&e, "PATH", mcpg_child_path());
    for (size_t i = 0; !rc && i < sizeof BASELINE / sizeof *BASELINE; i++)
        rc = copy(&e, BASELINE[i], getenv(BASELINE[i]));
    for (size_t i = 0; !rc && i < n_inherit; i++) rc = copy(&e, inherit[i], getenv(inherit[i]));
    for (size_t i = 0; !rc && i < n_set; i++) rc = put(&e, strdup(set[i]));
    if (rc) {
        mcpg_child_env_free(e.v);
        return NULL;
    }
    return e.v; /* never empty: PATH is always there */
}

void mcpg_child_env_free(char **env) {
    for (size_t i = 0; env && env[i]; i++) free(env[i]);
    free(env);
}
