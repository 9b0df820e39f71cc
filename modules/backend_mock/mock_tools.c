/* backend_mock: parse and check the "tools" config. One function serves
 * validate() (errors reported with key paths) and create() (errors logged),
 * so both always agree on what is valid. */
#include "mock_tools.h"

#include <mcpg/sdk.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* problems go to validate()'s report or create()'s log (the SDK's reporter) */
typedef mcpg_config_problems pctx;

static void parse_name(pctx *c, const char *path, const mcpg_json_span *v, mock_tool *t) {
    size_t n = 0;
    int rc = v->type == MCPG_JSON_STRING
                 ? c->h->json_string_decode(v, t->name, sizeof t->name, &n)
                 : MCPG_EPROTO;
    if (rc == MCPG_EPROTO) return mcpg_config_problem(c, path, "expected a string");
    if (rc < 0 || !mcpg_name_valid(t->name, n)) {
        t->name[0] = '\0';
        return mcpg_config_problem(c, path, "must match ^[a-zA-Z0-9_-]{1,64}$");
    }
}

static void parse_description(pctx *c, const char *path, const mcpg_json_span *v,
                              mock_tool *t) {
    if (v->type != MCPG_JSON_STRING) return mcpg_config_problem(c, path, "expected a string");
    char *d = c->h->alloc(v->n + 1); /* decoding never lengthens a string */
    size_t n;
    if (!d || c->h->json_string_decode(v, d, v->n + 1, &n) < 0) {
        c->h->free(d);
        return mcpg_config_problem(c, path, "cannot decode the string");
    }
    c->h->free(t->description);
    t->description = d;
}

static void parse_int(pctx *c, const char *path, const mcpg_json_span *v, int64_t max,
                      int64_t *out) {
    int64_t x;
    if (v->type != MCPG_JSON_NUMBER || c->h->json_int64(v, &x) != 0 || x < 0 || x > max)
        return mcpg_config_problem(c, path, "must be an integer between 0 and %lld", (long long)max);
    *out = x;
}

static void parse_bool(pctx *c, const char *path, const mcpg_json_span *v, int *out) {
    if (v->type != MCPG_JSON_TRUE && v->type != MCPG_JSON_FALSE)
        return mcpg_config_problem(c, path, "expected a boolean");
    *out = v->type == MCPG_JSON_TRUE;
}

static const char *const tool_keys[] = {"name", "description", "latency_ms", "payload_bytes",
                                        "fail"};

static void parse_member(pctx *c, const char *base, const char *key, const mcpg_json_span *v,
                         mock_tool *t) {
    char path[128];
    snprintf(path, sizeof path, "%s.%s", base, key);
    if (strcmp(key, "name") == 0)
        parse_name(c, path, v, t);
    else if (strcmp(key, "description") == 0)
        parse_description(c, path, v, t);
    else if (strcmp(key, "latency_ms") == 0)
        parse_int(c, path, v, MOCK_LATENCY_MAX_MS, &t->latency_ms);
    else if (strcmp(key, "payload_bytes") == 0)
        parse_int(c, path, v, MOCK_PAYLOAD_MAX, &t->payload_bytes);
    else if (strcmp(key, "fail") == 0)
        parse_bool(c, path, v, &t->fail);
    else
        mcpg_config_unknown_key(c, path, key, tool_keys, sizeof tool_keys / sizeof *tool_keys);
}

static void parse_tool(pctx *c, size_t idx, const mcpg_json_span *obj, mock_tool *t) {
    char base[48];
    snprintf(base, sizeof base, "tools[%zu]", idx);
    if (obj->type != MCPG_JSON_OBJECT) return mcpg_config_problem(c, base, "expected an object");
    size_t iter = 0;
    mcpg_json_span k, v;
    int seen_name = 0;
    while (c->h->json_object_next(obj->p, obj->n, &iter, &k, &v) == 1) {
        char key[32];
        size_t kn;
        if (c->h->json_string_decode(&k, key, sizeof key, &kn) < 0 || strlen(key) != kn)
            snprintf(key, sizeof key, "%.*s", (int)(k.n < 31 ? k.n : 31), k.p);
        seen_name |= strcmp(key, "name") == 0;
        parse_member(c, base, key, &v, t);
    }
    if (!seen_name) {
        char path[64];
        snprintf(path, sizeof path, "%s.name", base);
        mcpg_config_problem(c, path, "is required");
    }
}

static void check_name_unique(pctx *c, const mock_tool_set *set, size_t idx, int stats_tool) {
    const char *name = set->tools[idx].name;
    if (!name[0]) return; /* already reported */
    char path[64];
    snprintf(path, sizeof path, "tools[%zu].name", idx);
    if (stats_tool && strcmp(name, MOCK_STATS_TOOL) == 0)
        return mcpg_config_problem(c, path, "\"%s\" is reserved while stats_tool is true", name);
    for (size_t i = 0; i < idx; i++)
        if (strcmp(set->tools[i].name, name) == 0)
            return mcpg_config_problem(c, path, "duplicate tool name \"%s\" (also tools[%zu])", name, i);
}

static mock_tool *set_push(const mcpg_host *h, mock_tool_set *set) {
    if (set->n == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 8;
        mock_tool *t = h->realloc(set->tools, cap * sizeof *t);
        if (!t) return NULL;
        set->tools = t;
        set->cap = cap;
    }
    mock_tool *t = &set->tools[set->n++];
    memset(t, 0, sizeof *t);
    return t;
}

int mock_tools_parse(const mcpg_host *h, const char *json, int stats_tool, mcpg_report *rep,
                     mcpg_instance *self, mock_tool_set *set) {
    pctx c = {h, rep, self, 0};
    if (!json) json = "[{\"name\":\"echo\"}]";
    size_t n = strlen(json), skip = 0;
    while (skip < n && (json[skip] == ' ' || json[skip] == '\n' || json[skip] == '\t' ||
                        json[skip] == '\r'))
        skip++;
    if (h->json_validate(json, n) < 0 || skip == n || json[skip] != '[') {
        mcpg_config_problem(&c, "tools", "expected an array of tools");
        return c.errors;
    }
    size_t iter = 0;
    mcpg_json_span v;
    while (h->json_array_next(json + skip, n - skip, &iter, &v) == 1) {
        mock_tool *t = set_push(h, set);
        if (!t) {
            mcpg_config_problem(&c, "tools", "out of memory");
            break;
        }
        parse_tool(&c, set->n - 1, &v, t);
        check_name_unique(&c, set, set->n - 1, stats_tool);
    }
    return c.errors;
}

void mock_tools_free(const mcpg_host *h, mock_tool_set *set) {
    for (size_t i = 0; i < set->n; i++) h->free(set->tools[i].description);
    h->free(set->tools);
    *set = (mock_tool_set){0};
}

const mock_tool *mock_tools_find(const mock_tool_set *set, const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->tools[i].name, name) == 0) return &set->tools[i];
    return NULL;
}
