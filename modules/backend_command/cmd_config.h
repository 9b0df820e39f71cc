/* backend_command: the "tools" config, parsed and checked once. */
#ifndef CMD_CONFIG_H
#define CMD_CONFIG_H

#include <mcpg/sdk.h>
#include <stddef.h>
#include <stdint.h>

#define CMD_TIMEOUT_DEFAULT_MS 30000
#define CMD_TIMEOUT_MAX_MS 3600000
#define CMD_OUTPUT_DEFAULT 1048576
#define CMD_OUTPUT_MAX (256 * 1048576)
#define CMD_ARGS_MAX 256
#define CMD_INHERIT_MAX 256
/* PATH for the program when the gateway has none (or an empty one, which
 * some shells read as "the current directory") */

typedef struct cmd_tool {
    char name[65];
    char *description;  /* may be NULL */
    char *path;         /* the program, resolved against PATH at parse time */
    char **args;        /* argv[1..]: templates with {placeholder}s */
    size_t nargs;
    char **placeholders; /* each distinct {name} in args, in order */
    size_t nplaceholders;
    char *schema;       /* inputSchema JSON text, given or built */
    int stdin_json;
    int64_t timeout_ms;
    int64_t max_output_bytes;
    char **env;         /* "K=V" from the tool's env key, values read at load */
    size_t nenv;
    char **inherit;     /* variable names of inherit_env */
    size_t ninherit;
    char **envp;        /* the program's whole environment, NULL-terminated:
                           cmd_child_env() in cmd_config.c says what is in it */
    size_t nenvp;       /* entries before the NULL */
} cmd_tool;

typedef struct cmd_tool_set {
    cmd_tool *tools;
    size_t n;
} cmd_tool_set;

/* Parse json into set. Errors go to rep (key paths) when given, else to the
 * instance's log. Returns the number of errors. */
int cmd_tools_parse(const mcpg_host *h, const char *json, mcpg_report *rep, mcpg_instance *self,
                    cmd_tool_set *set);
void cmd_tools_free(cmd_tool_set *set);
const cmd_tool *cmd_tools_find(const cmd_tool_set *set, const char *name);

#endif
