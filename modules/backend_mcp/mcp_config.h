/* backend_mcp: its configuration, as the manifest gives it (mcp_cfg) and as
 * the module uses it (mcp_settings). One parser serves validate() (problems
 * with key paths) and create() (problems logged). */
#ifndef BACKEND_MCP_CONFIG_H
#define BACKEND_MCP_CONFIG_H

#include <mcpg/sdk.h>

typedef struct mcp_cfg {
    const char *url;       /* http:// or https://: Streamable HTTP */
    const char *command;   /* or: an executable speaking MCP on stdio */
    const char *command_line; /* or: the program and its arguments in one string */
    const char *args;      /* JSON array of strings */
    const char *env;       /* JSON object of strings */
    const char *inherit_env; /* JSON array of variable names */
    const char *cwd;
    const char *headers;   /* JSON object of strings: sent with every HTTP request */
    const char *wire;      /* auto | stateless | legacy */
    const char *untied;    /* drop | sole_call: messages tied to no call */
    int64_t connect_timeout_ms;
    int64_t restart_min_ms, restart_max_ms;
    int64_t input_wait_ms;
    int64_t max_message_bytes;
    int64_t max_conns;
    int tls_insecure;
    const char *ca_file, *cert_file, *key_file;
    const char *credentials; /* JSON object text, or NULL: static */
    int64_t max_caller_sessions, caller_session_idle_ms;
} mcp_cfg;

extern const mcpg_config_field mcp_config_fields[];

typedef struct mcp_settings {
    const mcp_cfg *c;
    char **argv;           /* command then args, NULL-terminated */
    char **envp;           /* "K=V" from env, NULL-terminated */
    char **inherit;        /* inherit_env's names, NULL-terminated */
    char *header_lines;    /* "Name: value\r\n"... for HTTP, or "" */
    char *call_header_lines; /* the same without Authorization: a call with a
                                brokered credential carries its own */
    int cred_mode;         /* upcred_mode of credentials */
    int wire;              /* WIRE_UNKNOWN (auto), WIRE_STATELESS, WIRE_LEGACY */
    int untied;            /* UNTIED_DROP or UNTIED_SOLE_CALL */
} mcp_settings;

enum { UNTIED_DROP, UNTIED_SOLE_CALL };

/* 0, or the number of problems (reported through p). */
int mcp_settings_parse(mcpg_config_problems *p, const mcp_cfg *c, mcp_settings *out);
void mcp_settings_free(mcp_settings *s);

/* command_line's words (command_line.c): a NULL-terminated array of strings
 * (free each, then it), or NULL with why filled. */
char **command_line_split(const char *line, char *why, size_t whycap);

#endif
