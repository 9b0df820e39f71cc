/* backend_http: the "tools" config, parsed and checked once. */
#ifndef HTTP_CONFIG_H
#define HTTP_CONFIG_H

#include <mcpg/sdk.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

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
    char *host;          /* "host:port" for the Host header */
    struct sockaddr_storage addr; /* resolved at create, never on a loop */
    socklen_t addrlen;
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

/* Parse json into set. For create() (self given) the hosts are looked up,
 * and errors go to the instance's log; for validate() (rep given) only the
 * URL's form is checked, and errors go to rep with key paths. Returns the
 * number of errors. */
int http_tools_parse(const mcpg_host *h, const char *json, mcpg_report *rep, mcpg_instance *self,
                     http_tool_set *set);
void http_tools_free(http_tool_set *set);
const http_tool *http_tools_find(const http_tool_set *set, const char *name);
const char *http_tool_error_message(const http_tool *t, int status);

#endif
