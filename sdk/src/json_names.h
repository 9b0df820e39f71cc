/* The SDK's JSON scanner and mcpg_json_unique's name checks, in one pass.
 *
 * The validating scanner (json.c) reports each object's opening, each
 * member name and each closing to a json_names when it is given one
 * (json_unique.c keeps the names and compares them at the close), so a
 * value is validated and checked for repeated names in a single read of
 * its bytes, the way the gateway's judge needs every request. */
#ifndef MCPG_SDK_JSON_NAMES_H
#define MCPG_SDK_JSON_NAMES_H

#include <mcpg/sdk.h>

typedef struct json_names json_names;

/* json_unique.c: an object opens, a member name is read, the innermost open
 * object closes. Once a verdict is reached (a name twice, a name holding a
 * NUL, out of memory) the later calls do nothing: the scan goes on only to
 * validate what is left. */
void json_names_open(json_names *nm);
void json_names_add(json_names *nm, const mcpg_json_span *key);
void json_names_close(json_names *nm);

/* json.c: mcpg_json_value, reporting to nm (NULL: none). */
int json_value_named(const char *s, size_t n, size_t *pos, mcpg_json_span *out, json_names *nm);

#endif
