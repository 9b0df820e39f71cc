/* backend_command: parse and check the "tools" config. One function serves
 * validate() (errors with key paths) and create() (errors logged), so both
 * agree on what is valid. A program that cannot be found is a config error:
 * the gateway should refuse to start rather than fail every call. */
#define _GNU_SOURCE
#include "cmd_config.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* problems go to validate()'s report or create()'s log (the SDK's reporter) */
typedef mcpg_config_problems pctx;

static int push(char ***v, size_t *n, char *s) {
    char **nv = s ? realloc(*v, (*n + 1) * sizeof **v) : NULL;
    if (!nv) {
        free(s);
        return -1;
    }
    *v = nv;
    nv[(*n)++] = s;
    return 0;
}

static void free_strv(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* An absolute path must be executable; a bare name is looked up in PATH. */
static char *resolve_program(const char *cmd) {
    if (cmd[0] == '/') return access(cmd, X_OK) == 0 ? strdup(cmd) : NULL;
    if (strchr(cmd, '/') || !cmd[0]) return NULL;
    const char *path = mcpg_child_path();
    while (*path) {
        size_t len = strcspn(path, ":");
        char *full = NULL;
        if (len && asprintf(&full, "%.*s/%s", (int)len, path, cmd) >= 0) {
            if (access(full, X_OK) == 0) return full;
            free(full);
        }
        path += len + (path[len] == ':');
    }
    return NULL;
}

/* Collect each distinct {identifier} of one template. */
static int scan_placeholders(cmd_tool *t, const char *s) {
    for (const char *p = strchr(s, '{'); p; p = strchr(p + 1, '{')) {
        size_t n = strspn(p + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-");
        if (n == 0 || p[1 + n] != '}') continue;
        int seen = 0;
        for (size_t i = 0; i < t->nplaceholders && !seen; i++)
            seen = strlen(t->placeholders[i]) == n && memcmp(t->placeholders[i], p + 1, n) == 0;
        if (!seen && push(&t->placeholders, &t->nplaceholders, strndup(p + 1, n))) return -1;
    }
    return 0;
}

static void parse_args(pctx *c, const char *base, json_t *v, cmd_tool *t) {
    char path[96];
    snprintf(path, sizeof path, "%s.args", base);
    if (!json_is_array(v) || json_array_size(v) > CMD_ARGS_MAX)
        return mcpg_config_problem(c, path, "expected an array of at most %d strings", CMD_ARGS_MAX);
    size_t i;
    json_t *a;
    json_array_foreach(v, i, a) {
        snprintf(path, sizeof path, "%s.args[%zu]", base, i);
        if (!json_is_string(a)) return mcpg_config_problem(c, path, "expected a string");
        const char *s = json_string_value(a);
        if (strlen(s) != json_string_length(a)) return mcpg_config_problem(c, path, "contains a NUL byte");
        if (push(&t->args, &t->nargs, strdup(s)) || scan_placeholders(t, s))
            return mcpg_config_problem(c, path, "out of memory");
    }
}

static void parse_env(pctx *c, const char *base, json_t *v, cmd_tool *t) {
    char path[160];
    snprintf(path, sizeof path, "%s.env", base);
    if (!json_is_object(v)) return mcpg_config_problem(c, path, "expected an object");
    const char *k;
    json_t *e;
    json_object_foreach(v, k, e) {
        snprintf(path, sizeof path, "%s.env.%.64s", base, k);
        if (!k[0] || strchr(k, '=')) return mcpg_config_problem(c, path, "not a valid variable name");
        const char *val = NULL;
        if (json_is_string(e)) {
            val = json_string_value(e);
        } else if (json_is_object(e) && json_is_string(json_object_get(e, "from_env")) &&
                   json_object_size(e) == 1) {
            const char *from = json_string_value(json_object_get(e, "from_env"));
            val = getenv(from);
            if (!val) return mcpg_config_problem(c, path, "environment variable %s is not set", from);
        } else {
            return mcpg_config_problem(c, path, "expected a string or {\"from_env\": \"VAR\"}");
        }
        char *kv = NULL;
        if (asprintf(&kv, "%s=%s", k, val) < 0 || push(&t->env, &t->nenv, kv))
            return mcpg_config_problem(c, path, "out of memory");
    }
}

static void parse_inherit(pctx *c, const char *base, json_t *v, cmd_tool *t) {
    char path[96];
    snprintf(path, sizeof path, "%s.inherit_env", base);
    if (!json_is_array(v) || json_array_size(v) > CMD_INHERIT_MAX)
        return mcpg_config_problem(c, path, "expected an array of at most %d variable names",
                                   CMD_INHERIT_MAX);
    size_t i;
    json_t *a;
    json_array_foreach(v, i, a) {
        snprintf(path, sizeof path, "%s.inherit_env[%zu]", base, i);
        const char *s = json_string_value(a);
        if (!s || strlen(s) != json_string_length(a) || !mcpg_env_name_valid(s)) {
            mcpg_config_problem(c, path,
                                "must be a variable name matching ^[A-Za-z_][A-Za-z0-9_]*$");
            continue;
        }
        if (push(&t->inherit, &t->ninherit, strdup(s)))
            return mcpg_config_problem(c, path, "out of memory");
    }
}

static void parse_int(pctx *c, const char *base, const char *key, json_t *v, int64_t lo,
                      int64_t hi, int64_t *out) {
    char path[96];
    snprintf(path, sizeof path, "%s.%s", base, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return mcpg_config_problem(c, path, "must be an integer between %lld and %lld", (long long)lo,
                    (long long)hi);
    *out = json_integer_value(v);
}

/* inputSchema: given as-is, or every placeholder a required string. */
static char *build_schema(const cmd_tool *t) {
    json_t *props = json_object(), *req = json_array();
    for (size_t i = 0; i < t->nplaceholders; i++) {
        json_object_set_new(props, t->placeholders[i], json_pack("{s:s}", "type", "string"));
        json_array_append_new(req, json_string(t->placeholders[i]));
    }
    json_t *s = json_pack("{s:s,s:o,s:o}", "type", "object", "properties", props, "required", req);
    char *text = s ? json_dumps(s, JSON_COMPACT) : NULL;
    json_decref(s);
    return text;
}

static const char *const tool_keys[] = {"name",  "description", "command",    "args",
                                        "input_schema", "stdin", "timeout_ms",
                                        "max_output_bytes", "env", "inherit_env"};

static void parse_member(pctx *c, const char *base, const char *key, json_t *v, cmd_tool *t) {
    char path[96];
    snprintf(path, sizeof path, "%s.%s", base, key);
    if (strcmp(key, "name") == 0) {
        const char *s = json_string_value(v);
        if (!s || !mcpg_name_valid(s, strlen(s)) || strlen(s) >= sizeof t->name)
            return mcpg_config_problem(c, path, "must match ^[a-zA-Z0-9_-]{1,64}$");
        strcpy(t->name, s);
    } else if (strcmp(key, "description") == 0) {
        if (!json_is_string(v)) return mcpg_config_problem(c, path, "expected a string");
        t->description = strdup(json_string_value(v));
    } else if (strcmp(key, "command") == 0) {
        if (!json_is_string(v)) return mcpg_config_problem(c, path, "expected a string");
        t->path = resolve_program(json_string_value(v));
        if (!t->path)
            mcpg_config_problem(c, path, "no executable program \"%s\" (an absolute path, or a name in PATH)",
                 json_string_value(v));
    } else if (strcmp(key, "args") == 0) {
        parse_args(c, base, v, t);
    } else if (strcmp(key, "input_schema") == 0) {
        if (!json_is_object(v)) return mcpg_config_problem(c, path, "expected a JSON Schema object");
        t->schema = json_dumps(v, JSON_COMPACT);
    } else if (strcmp(key, "stdin") == 0) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "json") && strcmp(s, "none")))
            return mcpg_config_problem(c, path, "must be \"json\" or \"none\"");
        t->stdin_json = strcmp(s, "json") == 0;
    } else if (strcmp(key, "timeout_ms") == 0) {
        parse_int(c, base, key, v, 1, CMD_TIMEOUT_MAX_MS, &t->timeout_ms);
    } else if (strcmp(key, "max_output_bytes") == 0) {
        parse_int(c, base, key, v, 1, CMD_OUTPUT_MAX, &t->max_output_bytes);
    } else if (strcmp(key, "env") == 0) {
        parse_env(c, base, v, t);
    } else if (strcmp(key, "inherit_env") == 0) {
        parse_inherit(c, base, v, t);
    } else {
        mcpg_config_unknown_key(c, path, key, tool_keys, sizeof tool_keys / sizeof *tool_keys);
    }
}

/* The program's whole environment, fixed at load (mcpg_child_env): the
 * baseline, then inherit_env (the gateway's values), then env. */
static int cmd_child_env(cmd_tool *t) {
    t->envp = mcpg_child_env((const char *const *)t->inherit, t->ninherit,
                             (const char *const *)t->env, t->nenv);
    for (t->nenvp = 0; t->envp && t->envp[t->nenvp]; t->nenvp++) {
    }
    return t->envp ? 0 : -1; /* never NULL on success: a NULL envp means environ to uv_spawn */
}

static void parse_tool(pctx *c, const cmd_tool_set *set, size_t idx, json_t *obj, cmd_tool *t) {
    char base[48], path[96];
    snprintf(base, sizeof base, "tools[%zu]", idx);
    t->timeout_ms = CMD_TIMEOUT_DEFAULT_MS;
    t->max_output_bytes = CMD_OUTPUT_DEFAULT;
    if (!json_is_object(obj)) return mcpg_config_problem(c, base, "expected an object");
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) parse_member(c, base, key, v, t);
    static const char *const required[] = {"name", "command"};
    for (size_t i = 0; i < 2; i++)
        if (!json_object_get(obj, required[i])) {
            snprintf(path, sizeof path, "%s.%s", base, required[i]);
            mcpg_config_problem(c, path, "is required");
        }
    for (size_t i = 0; i < idx && t->name[0]; i++)
        if (strcmp(set->tools[i].name, t->name) == 0) {
            snprintf(path, sizeof path, "%s.name", base);
            return mcpg_config_problem(c, path, "duplicate tool name \"%s\" (also tools[%zu])", t->name, i);
        }
    if (!t->schema && !(t->schema = build_schema(t))) mcpg_config_problem(c, base, "out of memory");
    if (cmd_child_env(t)) mcpg_config_problem(c, base, "out of memory");
}

int cmd_tools_parse(const mcpg_host *h, const char *json, mcpg_report *rep, mcpg_instance *self,
                    cmd_tool_set *set) {
    pctx c = {h, rep, self, 0};
    json_error_t e;
    json_t *root = json ? json_loads(json, 0, &e) : NULL;
    if (!json_is_array(root) || json_array_size(root) == 0) {
        json_decref(root);
        mcpg_config_problem(&c, "tools", "expected a non-empty array of tools");
        return c.errors;
    }
    set->tools = calloc(json_array_size(root), sizeof *set->tools);
    if (!set->tools) {
        json_decref(root);
        mcpg_config_problem(&c, "tools", "out of memory");
        return c.errors;
    }
    size_t i;
    json_t *v;
    json_array_foreach(root, i, v) {
        set->n = i + 1;
        parse_tool(&c, set, i, v, &set->tools[i]);
    }
    json_decref(root);
    return c.errors;
}

void cmd_tools_free(cmd_tool_set *set) {
    for (size_t i = 0; i < set->n; i++) {
        cmd_tool *t = &set->tools[i];
        free(t->description);
        free(t->path);
        free(t->schema);
        free_strv(t->args, t->nargs);
        free_strv(t->placeholders, t->nplaceholders);
        free_strv(t->env, t->nenv);
        free_strv(t->inherit, t->ninherit);
        free_strv(t->envp, t->nenvp);
    }
    free(set->tools);
    *set = (cmd_tool_set){0};
}

const cmd_tool *cmd_tools_find(const cmd_tool_set *set, const char *name) {
    for (size_t i = 0; name && i < set->n; i++)
        if (strcmp(set->tools[i].name, name) == 0) return &set->tools[i];
    return NULL;
}
