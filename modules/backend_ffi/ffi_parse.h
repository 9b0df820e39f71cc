/* backend_ffi: the pieces of config parsing the function and the parameter
 * parsers share. Problems go to validate()'s report or create()'s log
 * (the SDK's reporter), each naming its key path. */
#ifndef BACKEND_FFI_PARSE_H
#define BACKEND_FFI_PARSE_H

#include "ffi_decl.h"

typedef mcpg_config_problems pctx;

/* Which types a "type", "returns" or "of" key accepts. */
typedef enum ffi_kinds { KINDS_PARAM, KINDS_RETURN, KINDS_ELEMENT } ffi_kinds;

ffi_kind ffi_parse_kind(pctx *c, const char *path, const mcpg_json_span *v, ffi_kinds which);
/* A tool or parameter name into out (FFI_NAME_MAX + 1 bytes), "" after an error. */
void ffi_parse_name(pctx *c, const char *path, const mcpg_json_span *v, char *out);
/* A decoded copy of a string (the caller frees), or NULL after an error. */
char *ffi_parse_string(pctx *c, const char *path, const mcpg_json_span *v);
/* An object key as NUL-terminated text, for paths and comparisons. */
void ffi_key_text(pctx *c, const mcpg_json_span *k, char *key, size_t cap);

/* One parameter object (base is its path, "functions[0].params[1]"). */
void ffi_param_parse(pctx *c, const char *base, const mcpg_json_span *obj, ffi_param *p);
/* After all of f's parameters: resolve size_of/length_of and check the
 * outputs (base is the function's path). */
void ffi_params_link(pctx *c, const char *base, ffi_fn *f);

#endif
