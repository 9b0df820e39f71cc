/* backend_mcp: parse and check its configuration. */
#define _GNU_SOURCE
#include "mcp_config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "upclient.h"
#include "upcred.h"
#include "upstream.h"

const mcpg_config_field mcp_config_fields[] = {
    MCPG_CFG_STRING_FIELD(mcp_cfg, url, "url", NULL,
                          "the upstream's MCP endpoint (http:// or https://); or set command"),
    MCPG_CFG_STRING_FIELD(mcp_cfg, command, "command", NULL,
                          "an executable speaking MCP on stdin/stdout; or set url"),
    MCPG_CFG_STRING_FIELD(mcp_cfg, command_line, "command_line", NULL,
                          "instead of command and args: the program and its arguments in one "
                          "string, split into words as a shell would (quotes, backslashes) "
                          "but run without one"),
    MCPG_CFG_JSON_FIELD(mcp_cfg, args, "args", "[]", "command's arguments (array of strings)"),
    MCPG_CFG_JSON_FIELD(mcp_cfg, env, "env", "{}",
                        "variables set in command's environment (object of strings)"),
    MCPG_CFG_JSON_FIELD(mcp_cfg, inherit_env, "inherit_env", "[]",
                        "the gateway's variables command also gets (array of names); beside "
                        "these and env it has only PATH, LANG, LC_ALL, LC_CTYPE and TZ"),
    MCPG_CFG_STRING_FIELD(mcp_cfg, cwd, "cwd", NULL, "command's working directory"),
    MCPG_CFG_JSON_FIELD(mcp_cfg, headers, "headers", "{}",
                        "HTTP headers sent with every request to url (object of strings)"),
    MCPG_CFG_ENUM_FIELD(mcp_cfg, wire, "wire", "\"auto\"", "auto|stateless|legacy",
                        "auto: try the stateless wire, fall back to initialize"),
    MCPG_CFG_ENUM_FIELD(mcp_cfg, untied, "untied_messages", "\"drop\"", "drop|sole_call",
                        "an upstream's question or log line tied to no call (stdio, the GET "
                        "stream): drop it, or give it to the only call in flight"),
    MCPG_CFG_INT_FIELD(mcp_cfg, connect_timeout_ms, "connect_timeout_ms", "5000", 1, 600000,
                       "connecting (or negotiating with) the upstream may take this long"),
    MCPG_CFG_INT_FIELD(mcp_cfg, restart_min_ms, "restart_min_ms", "250", 1, 600000,
                       "first wait before reconnecting (or restarting command); doubles"),
    MCPG_CFG_INT_FIELD(mcp_cfg, restart_max_ms, "restart_max_ms", "30000", 1, 3600000,
                       "longest wait between reconnection attempts"),
    MCPG_CFG_INT_FIELD(mcp_cfg, input_wait_ms, "input_wait_ms", "60000", 1, 3600000,
                       "how long a stateless client has to answer an upstream's question"),
    MCPG_CFG_INT_FIELD(mcp_cfg, max_message_bytes, "max_message_bytes", "16777216", 1024,
                       1073741824, "largest message accepted from the upstream"),
    MCPG_CFG_INT_FIELD(mcp_cfg, max_conns, "max_conns", "64", 1, 65536,
                       "HTTP connections to the upstream at most"),
    MCPG_CFG_BOOL_FIELD(mcp_cfg, tls_insecure, "tls_insecure", "false",
                        "https: do not verify the upstream's certificate"),
    MCPG_CFG_STRING_FIELD(mcp_cfg, ca_file, "ca_file", NULL,
                          "https: PEM bundle to verify the upstream against"),
    MCPG_CFG_STRING_FIELD(mcp_cfg, cert_file, "cert_file", NULL, "https: client certificate"),
    MCPG_CFG_STRING_FIELD(mcp_cfg, key_file, "key_file", NULL, "https: its private key"),
    MCPG_CFG_JSON_FIELD(mcp_cfg, credentials, "credentials", NULL,
                        "url: {mode: static|passthrough|exchange|client_credentials, audience, "
                        "scope, resource, token_url, client_id, client_secret_env, ...}: the "
                        "Authorization each call carries (docs/upstream-credentials.md)"),
    MCPG_CFG_INT_FIELD(mcp_cfg, max_caller_sessions, "max_caller_sessions", "256", 1, 100000,
                       "session wire with credentials per caller: sessions open at most (one "
                       "per caller; the least recently used idle one is closed for a new one)"),
    MCPG_CFG_INT_FIELD(mcp_cfg, caller_session_idle_ms, "caller_session_idle_ms", "300000", 1000,
                       86400000, "... and a caller's session unused this long is closed"),
    MCPG_CONFIG_END};

static char **strv_push(char **v, size_t *n, char *s) {
    char **nv = s ? realloc(v, (*n + 2) * sizeof *v) : NULL;
    if (!nv) {
        free(s);
        return NULL;
    }
    nv[(*n)++] = s;
    nv[*n] = NULL;
    return nv;
}

static void strv_free(char **v) {
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

static int parse_args(mcpg_config_problems *p, const mcp_cfg *c, mcp_settings *s) {
    size_t n = 0;
    if (!(s->argv = strv_push(NULL, &n, strdup(c->command)))) return -1;
    json_t *a = json_loads(c->args ? c->args : "[]", 0, NULL);
    if (!json_is_array(a)) {
        mcpg_config_problem(p, "args", "must be an array of strings");
        json_decref(a);
        return 1;
    }
    size_t i;
    json_t *v;
    int bad = 0;
    json_array_foreach(a, i, v) {
        char key[32];
        snprintf(key, sizeof key, "args[%zu]", i);
        if (!json_is_string(v)) {
            mcpg_config_problem(p, key, "must be a string");
            bad++;
        } else if (!(s->argv = strv_push(s->argv, &n, strdup(json_string_value(v))))) {
            bad++;
            break;
        }
    }
    json_decref(a);
    return bad;
}

/* An object of strings, each turned into "name<sep>value<end>". */
static int parse_pairs(mcpg_config_problems *p, const char *key, const char *text,
                       const char *sep, const char *end, char ***out) {
    json_t *o = json_loads(text ? text : "{}", 0, NULL);
    if (!json_is_object(o)) {
        mcpg_config_problem(p, key, "must be an object of strings");
        json_decref(o);
        return 1;
    }
    const char *k;
    json_t *v;
    int bad = 0;
    size_t n = 0;
    *out = calloc(1, sizeof **out);
    json_object_foreach(o, k, v) {
        char path[256];
        snprintf(path, sizeof path, "%s.%s", key, k);
        const char *sv = json_string_value(v);
        if (!sv || strpbrk(k, "\r\n:= ") || !k[0] || strpbrk(sv, "\r\n")) {
            mcpg_config_problem(p, path, sv ? "name or value holds a character it may not"
                                             : "must be a string");
            bad++;
            continue;
        }
        char *line = NULL;
        if (asprintf(&line, "%s%s%s%s", k, sep, sv, end) < 0) line = NULL;
        if (!*out || !(*out = strv_push(*out, &n, line))) return bad + 1;
    }
    json_decref(o);
    return bad;
}

/* inherit_env: names only, each one a variable name. */
static int parse_inherit(mcpg_config_problems *p, const char *text, char ***out) {
    json_t *a = json_loads(text ? text : "[]", 0, NULL);
    size_t n = 0, i;
    json_t *v;
    int bad = 0;
    if (!json_is_array(a)) {
        mcpg_config_problem(p, "inherit_env", "must be an array of variable names");
        json_decref(a);
        return 1;
    }
    *out = calloc(1, sizeof **out);
    json_array_foreach(a, i, v) {
        const char *name = json_string_value(v);
        if (!name || strlen(name) != json_string_length(v) || !mcpg_env_name_valid(name)) {
            char key[48];
            snprintf(key, sizeof key, "inherit_env[%zu]", i);
            mcpg_config_problem(p, key, "must be a variable name matching ^[A-Za-z_][A-Za-z0-9_]*$");
            bad++;
        } else if (!*out || !(*out = strv_push(*out, &n, strdup(name)))) {
            bad++;
            break;
        }
    }
    json_decref(a);
    return bad;
}

static int check_program(mcpg_config_problems *p, const char *key, const char *cmd) {
    if (strchr(cmd, '/')) {
        if (access(cmd, X_OK) == 0) return 0;
        mcpg_config_problem(p, key, "\"%s\" is not an executable file", cmd);
        return 1;
    }
    return 0; /* looked up in PATH when started */
}

/* command_line: the words are the argv; command and args stay unset. */
static int parse_command_line(mcpg_config_problems *p, const mcp_cfg *c, mcp_settings *s) {
    if (c->command && c->command[0]) {
        mcpg_config_problem(p, "command_line", "give command_line or command, not both");
        return 1;
    }
    if (c->args && strcmp(c->args, "[]") != 0) {
        mcpg_config_problem(p, "args", "command_line holds the arguments: give them there");
        return 1;
    }
    char why[256];
    if (!(s->argv = command_line_split(c->command_line, why, sizeof why))) {
        mcpg_config_problem(p, "command_line", "%s", why);
        return 1;
    }
    return check_program(p, "command_line", s->argv[0]);
}

/* The program to run: command and args, or command_line. */
static int parse_program(mcpg_config_problems *p, const mcp_cfg *c, mcp_settings *s) {
    if (c->command_line && c->command_line[0]) return parse_command_line(p, c, s);
    return check_program(p, "command", c->command) + parse_args(p, c, s);
}

static bool is_authorization(const char *line) {
    return strncasecmp(line, "Authorization:", 14) == 0;
}

/* The configured headers as lines: all of them for the gateway's own
 * requests, and without Authorization for a call that carries its own. */
static void join_headers(char **hdrs, mcp_settings *s) {
    size_t total = 1;
    for (size_t i = 0; hdrs && hdrs[i]; i++) total += strlen(hdrs[i]);
    s->header_lines = calloc(1, total);
    s->call_header_lines = calloc(1, total);
    for (size_t i = 0; hdrs && hdrs[i] && s->header_lines && s->call_header_lines; i++) {
        strcat(s->header_lines, hdrs[i]);
        if (!is_authorization(hdrs[i])) strcat(s->call_header_lines, hdrs[i]);
    }
}

/* Brokered credentials need an HTTP upstream; client_credentials also
 * stands for the gateway's own requests, so a configured Authorization
 * would contradict it. */
static int parse_credentials(mcpg_config_problems *p, const mcp_cfg *c, bool has_url,
                             const char *const *hdrs, mcp_settings *s) {
    int before = p->errors;
    upcred_mode mode = UPCRED_STATIC;
    upcred_check(p, c->credentials, &mode);
    s->cred_mode = (int)mode;
    if (mode != UPCRED_STATIC && !has_url)
        mcpg_config_problem(p, "credentials", "needs url: a command's upstream takes no token");
    for (size_t i = 0; mode == UPCRED_CLIENT_CREDENTIALS && hdrs && hdrs[i]; i++)
        if (is_authorization(hdrs[i]))
            mcpg_config_problem(p, "headers.Authorization",
                                "is set by credentials.mode client_credentials; remove it");
    return p->errors - before;
}

int mcp_settings_parse(mcpg_config_problems *p, const mcp_cfg *c, mcp_settings *s) {
    memset(s, 0, sizeof *s);
    s->c = c;
    int bad = 0;
    bool has_url = c->url && c->url[0];
    bool has_cmd = (c->command && c->command[0]) || (c->command_line && c->command_line[0]);
    if (has_url == has_cmd) {
        mcpg_config_problem(p, has_url ? "command" : "url",
                            has_url ? "give url or command, not both"
                                    : "give url (an MCP endpoint) or command (an executable, "
                                      "or command_line: it with its arguments)");
        return 1;
    }
    char why[300];
    if (has_url && up_url_check(c->url, why, sizeof why) != 0) {
        mcpg_config_problem(p, "url", "%s", why);
        bad++;
    }
    if (has_cmd) bad += parse_program(p, c, s);
    bad += parse_pairs(p, "env", c->env, "=", "", &s->envp);
    bad += parse_inherit(p, c->inherit_env, &s->inherit);
    char **hdrs = NULL;
    bad += parse_pairs(p, "headers", c->headers, ": ", "\r\n", &hdrs);
    bad += parse_credentials(p, c, has_url, (const char *const *)hdrs, s);
    join_headers(hdrs, s);
    strv_free(hdrs);
    if (c->restart_max_ms < c->restart_min_ms) {
        mcpg_config_problem(p, "restart_max_ms", "must be at least restart_min_ms (%lld)",
                            (long long)c->restart_min_ms);
        bad++;
    }
    s->untied = c->untied && strcmp(c->untied, "sole_call") == 0 ? UNTIED_SOLE_CALL : UNTIED_DROP;
    s->wire = !c->wire || strcmp(c->wire, "auto") == 0 ? WIRE_UNKNOWN
              : strcmp(c->wire, "stateless") == 0   ? WIRE_STATELESS
                                                     : WIRE_LEGACY;
    return bad;
}

void mcp_settings_free(mcp_settings *s) {
    strv_free(s->argv);
    strv_free(s->envp);
    strv_free(s->inherit);
    free(s->header_lines);
    free(s->call_header_lines);
    memset(s, 0, sizeof *s);
}
