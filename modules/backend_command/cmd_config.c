/* backend_command: parse and check the "tools" config. One function serves
 * validate() (errors with key paths) and create() (errors logged), so both
 * agree on what is valid. The array, name, description and input_schema are
 * read by the SDK (mcpg/tools_config.h); the command's own keys here. A program that cannot be found is a config error:
 * the gateway should refuse to start rather than fail every call. */
#define _GNU_SOURCE
#include "cmd_config.h"

#include <mcpg/tools_config.h>

#include <jansson.h>
#include <stddef.h>
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
        if (push(&t->args, &t->nargs, strdup(s)) ||
            mcpg_placeholders_scan(&t->placeholders, &t->nplaceholders, s))
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
        const char *val = mcpg_config_env_value(c, path, e);
        if (!val) return;
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

static const char *const tool_keys[] = {"name",  "description", "command",    "args",
                                        "input_schema", "stdin", "timeout_ms",
                                        "max_output_bytes", "env", "inherit_env"};

/* The members of a command tool beyond name, description and input_schema:
 * 0 for a key that is not one of them. */
static int parse_member(pctx *c, const char *base, const char *path, const char *key, json_t *v,
                        void *tool) {
    cmd_tool *t = tool;
    if (strcmp(key, "command") == 0) {
        if (!json_is_string(v)) mcpg_config_problem(c, path, "expected a string");
        else if (!(t->path = resolve_program(json_string_value(v))))
            mcpg_config_problem(c, path, "no executable program \"%s\" (an absolute path, or a name in PATH)",
                 json_string_value(v));
    } else if (strcmp(key, "args") == 0) {
        parse_args(c, base, v, t);
    } else if (strcmp(key, "stdin") == 0) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "json") && strcmp(s, "none")))
            mcpg_config_problem(c, path, "must be \"json\" or \"none\"");
        else
            t->stdin_json = strcmp(s, "json") == 0;
    } else if (strcmp(key, "timeout_ms") == 0) {
        mcpg_config_int(c, path, v, 1, CMD_TIMEOUT_MAX_MS, &t->timeout_ms);
    } else if (strcmp(key, "max_output_bytes") == 0) {
        mcpg_config_int(c, path, v, 1, CMD_OUTPUT_MAX, &t->max_output_bytes);
    } else if (strcmp(key, "env") == 0) {
        parse_env(c, base, v, t);
    } else if (strcmp(key, "inherit_env") == 0) {
        parse_inherit(c, base, v, t);
    } else {
        return 0;
    }
    return 1;
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

static void tool_defaults(void *tool) {
    cmd_tool *t = tool;
    t->timeout_ms = CMD_TIMEOUT_DEFAULT_MS;
    t->max_output_bytes = CMD_OUTPUT_DEFAULT;
}

static void tool_finish(pctx *c, const char *base, void *tool) {
    if (cmd_child_env(tool)) mcpg_config_problem(c, base, "out of memory");
}

static const char *const required_keys[] = {"name", "command"};

static const mcpg_tools_spec cmd_tools_spec = {
    MCPG_TOOLS_LAYOUT(cmd_tool),
    MCPG_TOOLS_KEYS(tool_keys, required_keys),
    .init = tool_defaults,
    .member = parse_member,
    .finish = tool_finish,
};

int cmd_tools_parse(const mcpg_host *h, const char *json, mcpg_report *rep, mcpg_instance *self,
                    cmd_tool_set *set) {
    pctx c = {h, rep, self, 0};
    void *tools;
    mcpg_tools_parse(&c, json, &cmd_tools_spec, &tools, &set->n);
    set->tools = tools;
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
