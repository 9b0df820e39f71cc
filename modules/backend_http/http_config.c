/* backend_http: parse and check the "tools" config. One function serves
 * validate() (errors with key paths) and create() (errors logged, hosts
 * resolved), so both agree on what is valid. The array, name, description
 * and input_schema are read by the SDK (mcpg/tools_config.h); the HTTP
 * tool's own keys here. */
#define _GNU_SOURCE
#include "http_config.h"

#include <mcpg/tools_config.h>

#include <upclient.h>

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* problems go to validate()'s report or create()'s log (the SDK's reporter) */
typedef mcpg_config_problems pctx;

/* Collect each distinct {identifier} of one template. */
static int scan_placeholders(http_tool *t, const char *s) {
    return mcpg_placeholders_scan(&t->placeholders, &t->nplaceholders, s);
}

/* Every string in a body template may hold placeholders. */
static int scan_json(http_tool *t, json_t *v) {
    if (json_is_string(v)) return scan_placeholders(t, json_string_value(v));
    size_t i;
    const char *k;
    json_t *e;
    if (json_is_array(v)) json_array_foreach(v, i, e) if (scan_json(t, e)) return -1;
    if (json_is_object(v)) json_object_foreach(v, k, e) if (scan_json(t, e)) return -1;
    return 0;
}

/* The scheme and authority of a URL: everything before its path. */
static size_t origin_len(const char *url) {
    const char *sep = strstr(url, "://");
    const char *a = sep ? sep + 3 : url;
    return (size_t)(a - url) + strcspn(a, "/?#");
}

/* A byte below 0x20 or DEL; a tab too unless tab_ok (header values). */
static int has_control(const char *s, int tab_ok) {
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && !(tab_ok && *s == '\t')) || *s == 0x7f) return 1;
    return 0;
}

/* http[s]://host[:port]/path: the form checked by upclient, the path ours
 * (its query comes from "query"). Only the path takes placeholders: one in
 * the scheme, host or port is refused here rather than sent as literal
 * text, so no config reads as if an argument could choose the upstream. */
static void parse_url(pctx *c, const char *path, const char *url, http_tool *t) {
    char err[320];
    size_t olen = origin_len(url);
    if (memchr(url, '{', olen) || memchr(url, '}', olen))
        return mcpg_config_problem(c, path,
                                   "no placeholder may choose the scheme, host or port (in \"%.*s\"): "
                                   "arguments fill only the path, \"query\" and \"body\"",
                                   (int)olen, url);
    if (up_url_check(url, err, sizeof err)) {
        const char *why = strstr(err, ": ");
        return mcpg_config_problem(c, path, "%s", why ? why + 2 : err);
    }
    const char *hp = strstr(url, "://") + 3, *slash = strchr(hp, '/');
    if (!slash && strchr(hp, '?'))
        return mcpg_config_problem(c, path, "put the query in \"query\", not the URL");
    if (slash && strpbrk(slash, "?#"))
        return mcpg_config_problem(c, path, "the path may not hold '?' or '#': put the query in \"query\"");
    if (has_control(url, 0)) return mcpg_config_problem(c, path, "a control character in the URL");
    t->origin = strndup(url, olen);
    t->path = strdup(slash ? slash : "/");
    if (!t->origin || !t->path || scan_placeholders(t, t->path))
        mcpg_config_problem(c, path, "out of memory");
}

static int token_ok(const char *s) {
    return s[0] && strspn(s, "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") == strlen(s);
}

static int push_kv(http_kv **v, size_t *n, const char *k, const char *val) {
    http_kv *nv = realloc(*v, (*n + 1) * sizeof **v);
    if (!nv) return -1;
    *v = nv;
    nv[*n] = (http_kv){strdup(k), strdup(val)};
    if (!nv[*n].key || !nv[*n].value) return free(nv[*n].key), free(nv[*n].value), -1;
    (*n)++;
    return 0;
}

static void parse_query(pctx *c, const char *base, json_t *v, http_tool *t) {
    char path[160];
    snprintf(path, sizeof path, "%s.query", base);
    if (!json_is_object(v)) return mcpg_config_problem(c, path, "expected an object of string templates");
    const char *k;
    json_t *e;
    json_object_foreach(v, k, e) {
        snprintf(path, sizeof path, "%s.query.%.64s", base, k);
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e))
            return mcpg_config_problem(c, path, "expected a string template");
        if (push_kv(&t->query, &t->nquery, k, json_string_value(e)) ||
            scan_placeholders(t, json_string_value(e)))
            return mcpg_config_problem(c, path, "out of memory");
    }
}

static void parse_headers(pctx *c, const char *base, json_t *v, http_tool *t) {
    char path[160];
    snprintf(path, sizeof path, "%s.headers", base);
    if (!json_is_object(v)) return mcpg_config_problem(c, path, "expected an object");
    const char *k;
    json_t *e;
    json_object_foreach(v, k, e) {
        snprintf(path, sizeof path, "%s.headers.%.64s", base, k);
        if (!token_ok(k)) return mcpg_config_problem(c, path, "not a valid header name");
        if (!strcasecmp(k, "Host") || !strcasecmp(k, "Content-Length") ||
            !strcasecmp(k, "Connection") || !strcasecmp(k, "Transfer-Encoding"))
            return mcpg_config_problem(c, path, "set by the gateway");
        const char *val = mcpg_config_env_value(c, path, e);
        if (!val) return;
        /* a header value is sent as written: a line break would start a new
         * header, another control character is refused by upstreams */
        if (strpbrk(val, "\r\n")) return mcpg_config_problem(c, path, "the value holds a line break");
        if (has_control(val, 1))
            return mcpg_config_problem(c, path, "the value holds a control character");
        if (push_kv(&t->headers, &t->nheaders, k, val)) return mcpg_config_problem(c, path, "out of memory");
    }
}

static void parse_errors(pctx *c, const char *base, json_t *v, http_tool *t) {
    char path[160];
    snprintf(path, sizeof path, "%s.error_status", base);
    if (!json_is_object(v)) return mcpg_config_problem(c, path, "expected an object of status → message");
    const char *k;
    json_t *e;
    json_object_foreach(v, k, e) {
        snprintf(path, sizeof path, "%s.error_status.%.16s", base, k);
        int st = atoi(k);
        if (strlen(k) != 3 || strspn(k, "0123456789") != 3 || st < 100 || st > 599)
            return mcpg_config_problem(c, path, "expected a status code from 100 to 599");
        if (!json_is_string(e)) return mcpg_config_problem(c, path, "expected a message string");
        http_status_msg *nv = realloc(t->errors, (t->nerrors + 1) * sizeof *nv);
        if (!nv) return mcpg_config_problem(c, path, "out of memory");
        t->errors = nv;
        nv[t->nerrors++] = (http_status_msg){st, strdup(json_string_value(e))};
    }
}

static void parse_method(pctx *c, const char *path, json_t *v, http_tool *t) {
    static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
    const char *s = json_string_value(v);
    for (size_t i = 0; s && i < 5; i++)
        if (strcmp(s, methods[i]) == 0) {
            strcpy(t->method, s);
            t->idempotent = strcmp(s, "POST") && strcmp(s, "PATCH");
            return;
        }
    mcpg_config_problem(c, path, "must be one of GET, POST, PUT, PATCH, DELETE");
}

static const char *const tool_keys[] = {"name", "description", "method", "url", "query", "body",
                                        "headers", "input_schema", "timeout_ms",
                                        "max_response_bytes", "error_status"};

/* The members of an HTTP tool beyond name, description and input_schema:
 * 0 for a key that is not one of them. */
static int parse_member(pctx *c, const char *base, const char *path, const char *key, json_t *v,
                        void *tool) {
    http_tool *t = tool;
    if (strcmp(key, "method") == 0) {
        parse_method(c, path, v, t);
    } else if (strcmp(key, "url") == 0) {
        if (!json_is_string(v)) mcpg_config_problem(c, path, "expected a string");
        else parse_url(c, path, json_string_value(v), t);
    } else if (strcmp(key, "query") == 0) {
        parse_query(c, base, v, t);
    } else if (strcmp(key, "body") == 0) {
        t->body = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!t->body || scan_json(t, v)) mcpg_config_problem(c, path, "out of memory");
    } else if (strcmp(key, "headers") == 0) {
        parse_headers(c, base, v, t);
    } else if (strcmp(key, "timeout_ms") == 0) {
        mcpg_config_int(c, path, v, 1, HTTP_TIMEOUT_MAX_MS, &t->timeout_ms);
    } else if (strcmp(key, "max_response_bytes") == 0) {
        mcpg_config_int(c, path, v, 1, HTTP_RESPONSE_MAX, &t->max_response_bytes);
    } else if (strcmp(key, "error_status") == 0) {
        parse_errors(c, base, v, t);
    } else {
        return 0;
    }
    return 1;
}

static void tool_defaults(void *tool) {
    http_tool *t = tool;
    t->timeout_ms = HTTP_TIMEOUT_DEFAULT_MS;
    t->max_response_bytes = HTTP_RESPONSE_DEFAULT;
}

static const char *const required_keys[] = {"name", "method", "url"};

static const mcpg_tools_spec http_tools_spec = {
    MCPG_TOOLS_LAYOUT(http_tool),
    MCPG_TOOLS_KEYS(tool_keys, required_keys),
    .init = tool_defaults,
    .member = parse_member,
};

int http_tools_parse(const mcpg_host *h, const char *json, mcpg_report *rep, mcpg_instance *self,
                     http_tool_set *set) {
    pctx c = {h, rep, self, 0};
    void *tools;
    mcpg_tools_parse(&c, json, &http_tools_spec, &tools, &set->n);
    set->tools = tools;
    return c.errors;
}

static void free_kv(http_kv *v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i].key), free(v[i].value);
    free(v);
}

void http_tools_free(http_tool_set *set) {
    for (size_t i = 0; i < set->n; i++) {
        http_tool *t = &set->tools[i];
        free(t->description);
        free(t->origin);
        free(t->path);
        free(t->body);
        free(t->schema);
        free_kv(t->query, t->nquery);
        free_kv(t->headers, t->nheaders);
        for (size_t j = 0; j < t->nplaceholders; j++) free(t->placeholders[j]);
        free(t->placeholders);
        for (size_t j = 0; j < t->nerrors; j++) free(t->errors[j].message);
        free(t->errors);
    }
    free(set->tools);
    *set = (http_tool_set){0};
}

const http_tool *http_tools_find(const http_tool_set *set, const char *name) {
    for (size_t i = 0; name && i < set->n; i++)
        if (strcmp(set->tools[i].name, name) == 0) return &set->tools[i];
    return NULL;
}

const char *http_tool_error_message(const http_tool *t, int status) {
    for (size_t i = 0; i < t->nerrors; i++)
        if (t->errors[i].status == status) return t->errors[i].message;
    return NULL;
}
