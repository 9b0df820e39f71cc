/* `mcpg new-module`: the templates built into the binary. */
#ifndef MCPG_NEW_MODULE_H
#define MCPG_NEW_MODULE_H

#include <stddef.h>

typedef struct new_module_template {
    const char *path; /* "<kind>/<file>.in" or "common/<file>.in" below sdk/new-module */
    const char *text; /* NUL-terminated */
    size_t len;
} new_module_template;

/* Ended by an entry whose path is NULL (new_module_templates.c, generated). */
extern const new_module_template new_module_templates[];

int new_module_command(int argc, char **argv);

#endif
