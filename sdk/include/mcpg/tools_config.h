/** @file
 * mcpg module SDK: a "tools" config, the array of tools a backend module
 * declares in its own JSON setting (backend_command, backend_http).
 *
 * Every such array is read the same way, so that every such module refuses
 * the same mistakes with the same words:
 *   - the setting is a non-empty array of objects, each one tool at
 *     "tools[i]";
 *   - "name" matches ^[a-zA-Z0-9_-]{1,64}$ and is unique in the array;
 *   - "description" is a string; "input_schema" a JSON Schema object, and
 *     without one the tool's inputSchema makes every {placeholder} of its
 *     templates a required string;
 *   - the module's own keys go to its member function; any other key is
 *     "unknown key", with a "did you mean" from the keys it lists;
 *   - the required keys missing are each "is required".
 * Problems go where an mcpg_config_problems sends them (validate()'s report
 * or create()'s log, see sdk.h), each with its key path.
 *
 * The module's values arrive as jansson values: a module including this
 * header links jansson (>= 2.14) itself, as the SDK's package already
 * requires it. Startup only. */
#ifndef MCPG_TOOLS_CONFIG_H
#define MCPG_TOOLS_CONFIG_H

#include <mcpg/sdk.h>

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/** The room a tool's name takes: 64 characters and the NUL. */
#define MCPG_TOOL_NAME_CAP 65

/** How the module's tool struct holds what every tool has, by offsetof:
 *   char name[MCPG_TOOL_NAME_CAP];  char *description;  char *schema;
 *   char **placeholders;  size_t nplaceholders;
 * The helper fills name, description and schema; the module's member
 * function fills the placeholders (mcpg_placeholders_scan) from its
 * templates. */
typedef struct mcpg_tools_spec {
    size_t tool_size; /**< sizeof one of the module's tools */
    size_t name_at,          /**< offsetof the tool's name in the module's tool struct */
           description_at,   /**< offsetof its description */
           schema_at,        /**< offsetof its schema */
           placeholders_at,  /**< offsetof its placeholders */
           nplaceholders_at; /**< offsetof its nplaceholders */
    const char *const *keys; /**< every key a tool may have, for "did you mean" */
    size_t nkeys;            /**< how many keys there are */
    const char *const *required; /**< the keys a tool must have: each missing one "is required" */
    size_t nrequired;        /**< how many required keys there are */
    /** The tool's defaults, before its members are read; or NULL. */
    void (*init)(void *tool);
    /** One member other than name, description and input_schema: base is
     * "tools[i]", path "tools[i].key". Returns 0 when key is not one of the
     * module's (the helper reports it unknown), else 1. */
    int (*member)(mcpg_config_problems *c, const char *base, const char *path, const char *key,
                  json_t *v, void *tool);
    /** Once a tool has its schema: what the module derives from the whole
     * tool; or NULL. Not called for a tool refused as not an object or for
     * a duplicate name. */
    void (*finish)(mcpg_config_problems *c, const char *base, void *tool);
} mcpg_tools_spec;

/** The layout half of a spec, for a tool struct whose common fields have the
 * names above:  static const mcpg_tools_spec spec = {
 *                   MCPG_TOOLS_LAYOUT(my_tool), MCPG_TOOLS_KEYS(keys, required), ...}; */
#define MCPG_TOOLS_LAYOUT(type)                                                              \
    .tool_size = sizeof(type), .name_at = offsetof(type, name),                              \
    .description_at = offsetof(type, description), .schema_at = offsetof(type, schema),      \
    .placeholders_at = offsetof(type, placeholders), .nplaceholders_at = offsetof(type, nplaceholders)
/** The keys half, from two arrays. */
#define MCPG_TOOLS_KEYS(keys_, required_)                                                    \
    .keys = (keys_), .nkeys = sizeof(keys_) / sizeof *(keys_), .required = (required_),     \
    .nrequired = sizeof(required_) / sizeof *(required_)

/** Parse json, the "tools" setting's text, into a calloc'd array of *n
 * tools of spec->tool_size bytes at *tools (NULL when the setting is not a
 * non-empty array). *n counts every tool begun, read whole or not, so the
 * module frees all of them. Returns the problems found (also in c). */
int mcpg_tools_parse(mcpg_config_problems *c, const char *json, const mcpg_tools_spec *spec,
                     void **tools, size_t *n);

/** Add each distinct {identifier} of template s (identifier: letters, digits,
 * '_' and '-') to the malloc'd names[0..*n). 0, or -1 out of memory. */
int mcpg_placeholders_scan(char ***names, size_t *n, const char *s);

/** An integer setting at path: v an integer from lo to hi into *out, else a
 * problem ("must be an integer between lo and hi") and *out untouched. */
void mcpg_config_int(mcpg_config_problems *c, const char *path, json_t *v, int64_t lo, int64_t hi,
                     int64_t *out);

/** A value given as a string or as {"from_env": "VAR"} (read from the
 * gateway's environment now): the value, or NULL after a problem at path. */
const char *mcpg_config_env_value(mcpg_config_problems *c, const char *path, json_t *v);

#endif
