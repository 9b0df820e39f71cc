/* A "tools" config (mcpg/tools_config.h): the array walk, the members every
 * tool has and the checks of the whole tool, one copy for every backend
 * module that declares its tools in a setting. Startup only: jansson. */
#define _GNU_SOURCE
#include <mcpg/tools_config.h>

#include <stdlib.h>
#include <string.h>

static const char PLACEHOLDER_CHARS[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

/* The common fields of one tool, where the spec says they are. */
static char *tool_name(const mcpg_tools_spec *spec, void *t) { return (char *)t + spec->name_at; }

static char **tool_str(void *t, size_t at) { return (char **)(void *)((char *)t + at); }

int mcpg_placeholders_scan(char ***names, size_t *n, const char *s) {
    for (const char *p = strchr(s, '{'); p; p = strchr(p + 1, '{')) {
        size_t len = strspn(p + 1, PLACEHOLDER_CHARS);
        if (len == 0 || p[1 + len] != '}') continue;
        int seen = 0;
        for (size_t i = 0; i < *n && !seen; i++)
            seen = strlen((*names)[i]) == len && memcmp((*names)[i], p + 1, len) == 0;
        if (seen) continue;
        char **grown = realloc(*names, (*n + 1) * sizeof *grown);
        if (!grown) return -1;
        *names = grown;
        if (!(grown[*n] = strndup(p + 1, len))) return -1;
        (*n)++;
    }
    return 0;
}

void mcpg_config_int(mcpg_config_problems *c, const char *path, json_t *v, int64_t lo, int64_t hi,
                     int64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return mcpg_config_problem(c, path, "must be an integer between %lld and %lld", (long long)lo,
                                   (long long)hi);
    *out = json_integer_value(v);
}

const char *mcpg_config_env_value(mcpg_config_problems *c, const char *path, json_t *v) {
    if (json_is_string(v)) return json_string_value(v);
    json_t *from = json_object_get(v, "from_env");
    if (!json_is_object(v) || json_object_size(v) != 1 || !json_is_string(from)) {
        mcpg_config_problem(c, path, "expected a string or {\"from_env\": \"VAR\"}");
        return NULL;
    }
    const char *value = getenv(json_string_value(from));
    if (!value)
        mcpg_config_problem(c, path, "environment variable %s is not set", json_string_value(from));
    return value;
}

/* inputSchema when none is given: every placeholder a required string. */
static char *schema_of_placeholders(char *const *names, size_t n) {
    json_t *props = json_object(), *req = json_array();
    for (size_t i = 0; i < n; i++) {
        json_object_set_new(props, names[i], json_pack("{s:s}", "type", "string"));
        json_array_append_new(req, json_string(names[i]));
    }
    json_t *s = json_pack("{s:s,s:o,s:o}", "type", "object", "properties", props, "required", req);
    char *text = s ? json_dumps(s, JSON_COMPACT) : NULL;
    json_decref(s);
    return text;
}

/* name, description and input_schema: 1 when key is one of them. */
static int common_member(mcpg_config_problems *c, const mcpg_tools_spec *spec, const char *path,
                         const char *key, json_t *v, void *t) {
    if (strcmp(key, "name") == 0) {
        const char *s = json_string_value(v);
        if (!s || !mcpg_name_valid(s, strlen(s)) || strlen(s) >= MCPG_TOOL_NAME_CAP)
            mcpg_config_problem(c, path, "must match ^[a-zA-Z0-9_-]{1,64}$");
        else
            strcpy(tool_name(spec, t), s);
    } else if (strcmp(key, "description") == 0) {
        if (!json_is_string(v)) mcpg_config_problem(c, path, "expected a string");
        else *tool_str(t, spec->description_at) = strdup(json_string_value(v));
    } else if (strcmp(key, "input_schema") == 0) {
        if (!json_is_object(v)) mcpg_config_problem(c, path, "expected a JSON Schema object");
        else *tool_str(t, spec->schema_at) = json_dumps(v, JSON_COMPACT);
    } else {
        return 0;
    }
    return 1;
}

static void parse_member(mcpg_config_problems *c, const mcpg_tools_spec *spec, const char *base,
                         const char *key, json_t *v, void *t) {
    char path[96];
    snprintf(path, sizeof path, "%s.%s", base, key);
    if (common_member(c, spec, path, key, v, t)) return;
    if (!spec->member(c, base, path, key, v, t))
        mcpg_config_unknown_key(c, path, key, spec->keys, spec->nkeys);
}

static void check_required(mcpg_config_problems *c, const mcpg_tools_spec *spec, const char *base,
                           json_t *obj) {
    char path[96];
    for (size_t i = 0; i < spec->nrequired; i++)
        if (!json_object_get(obj, spec->required[i])) {
            snprintf(path, sizeof path, "%s.%s", base, spec->required[i]);
            mcpg_config_problem(c, path, "is required");
        }
}

/* 1 when an earlier tool has t's name (reported). */
static int duplicate_name(mcpg_config_problems *c, const mcpg_tools_spec *spec, const char *base,
                          char *tools, size_t idx) {
    const char *name = tool_name(spec, tools + idx * spec->tool_size);
    char path[96];
    for (size_t i = 0; i < idx && name[0]; i++)
        if (strcmp(tool_name(spec, tools + i * spec->tool_size), name) == 0) {
            snprintf(path, sizeof path, "%s.name", base);
            mcpg_config_problem(c, path, "duplicate tool name \"%s\" (also tools[%zu])", name, i);
            return 1;
        }
    return 0;
}

static void parse_tool(mcpg_config_problems *c, const mcpg_tools_spec *spec, char *tools, size_t idx,
                       json_t *obj) {
    void *t = tools + idx * spec->tool_size;
    char base[48];
    snprintf(base, sizeof base, "tools[%zu]", idx);
    if (spec->init) spec->init(t);
    if (!json_is_object(obj)) return mcpg_config_problem(c, base, "expected an object");
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) parse_member(c, spec, base, key, v, t);
    check_required(c, spec, base, obj);
    if (duplicate_name(c, spec, base, tools, idx)) return;
    char **schema = tool_str(t, spec->schema_at);
    char **names = *(char ***)(void *)((char *)t + spec->placeholders_at);
    size_t nnames = *(size_t *)(void *)((char *)t + spec->nplaceholders_at);
    if (!*schema && !(*schema = schema_of_placeholders(names, nnames)))
        mcpg_config_problem(c, base, "out of memory");
    if (spec->finish) spec->finish(c, base, t);
}

int mcpg_tools_parse(mcpg_config_problems *c, const char *json, const mcpg_tools_spec *spec,
                     void **tools, size_t *n) {
    int before = c->errors;
    json_error_t e;
    json_t *root = json ? json_loads(json, 0, &e) : NULL;
    char *all = NULL;
    *tools = NULL;
    *n = 0;
    if (!json_is_array(root) || json_array_size(root) == 0)
        mcpg_config_problem(c, "tools", "expected a non-empty array of tools");
    else if (!(all = calloc(json_array_size(root), spec->tool_size)))
        mcpg_config_problem(c, "tools", "out of memory");
    for (size_t i = 0; all && i < json_array_size(root); i++) {
        *n = i + 1; /* counted before it is read: the module frees what was begun */
        parse_tool(c, spec, all, i, json_array_get(root, i));
    }
    json_decref(root);
    *tools = all;
    return c->errors - before;
}
