/* backend_http: the "tools" config, parsed and checked once. */
#ifndef HTTP_CONFIG_H
#define HTTP_CONFIG_H

#include <mcpg/sdk.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_TIMEOUT_DEFAULT_MS 30000
#define HTTP_TIMEOUT_MAX_MS 3600000
#define HTTP_RESPONSE_DEFAULT 1048576
#define HTTP_RESPONSE_MAX (256 * 1048576)

typedef struct http_kv {
    char *key, *value; /* a query value is a template; a header value is final */
} http_kv;

typedef struct http_status_msg {
    int status;
    char *message;
} http_status_msg;

typedef struct http_tool {
    char name[65];
    char *description;
    char method[8];
    int idempotent;      /* a closed kept-alive connection may be retried */
    char *origin;        /* "http[s]://host[:port]": tools sharing one share connections */
    size_t upstream;     /* its index among the instance's upstreams (http_upstream.h) */
    char *path;          /* template, begins with '/' */
    http_kv *query;
    size_t nquery;
    char *body;          /* JSON template text, or NULL */
    http_kv *headers;
    size_t nheaders;
    char **placeholders; /* each distinct {name} of path, query and body */
    size_t nplaceholders;
    char *schema;
    int64_t timeout_ms, max_response_bytes;
    http_status_msg *errors;
    size_t nerrors;
} http_tool;

typedef struct http_tool_set {
    http_tool *tools;
    size_t n;
} http_tool_set;

/* Parse json into set: errors go to validate()'s report (rep given) with
 * key paths, or create()'s log (self given). Only the URLs' form is checked
 * here; create() resolves the hosts (http_upstreams_new). Returns the
 * number of errors. */
int http_tools_parse(const mcpg_host *h, const char *json, mcpg_report *rep, mcpg_instance *self,
                     http_tool_set *set);
void http_tools_free(http_tool_set *set);
const http_tool *http_tools_find(const http_tool_set *set, const char *name);
const char *http_tool_error_message(const http_tool *t, int status);

#endif
