/* backend_ffi: the declared functions, read from the "functions" config and
 * bound to their symbols. One parser serves validate() (errors reported
 * with key paths) and create() (errors logged), so both agree. */
#ifndef BACKEND_FFI_DECL_H
#define BACKEND_FFI_DECL_H

#include <mcpg/sdk.h>

#include <ffi.h>
#include <stddef.h>

#define FFI_MAX_PARAMS 16
#define FFI_NAME_MAX 64

typedef enum ffi_kind {
    FK_NONE = 0,
    FK_I8, FK_I16, FK_I32, FK_I64,
    FK_U8, FK_U16, FK_U32, FK_U64,
    FK_FLOAT, FK_DOUBLE, FK_BOOL, FK_STRING,
    FK_VOID /* returns only */
} ffi_kind;

typedef struct ffi_param {
    char name[FFI_NAME_MAX + 1];
    char *description;
    ffi_kind kind;
} ffi_param;

typedef struct ffi_fn {
    char name[FFI_NAME_MAX + 1];
    char *library, *symbol, *description;
    ffi_param params[FFI_MAX_PARAMS];
    size_t nparams;
    ffi_kind ret;
    void *handle; /* dlopen; NULL when the library did not load */
    void *sym;
    ffi_cif cif; /* prepared once, read by every call */
    ffi_type *atypes[FFI_MAX_PARAMS];
} ffi_fn;

typedef struct ffi_fn_set {
    ffi_fn *fns;
    size_t n, cap;
} ffi_fn_set;

/* Parse, check and bind `json` (the functions array) into set. Returns the
 * number of errors; each went to rep (validate) or to self's log (create). */
int ffi_decl_parse(const mcpg_host *h, const char *json, mcpg_report *rep, mcpg_instance *self,
                   ffi_fn_set *set);
/* Close the libraries and free everything parse made. */
void ffi_decl_free(const mcpg_host *h, ffi_fn_set *set);
const ffi_fn *ffi_decl_find(const ffi_fn_set *set, const char *name);
const char *ffi_kind_name(ffi_kind k);
ffi_type *ffi_kind_type(ffi_kind k);

#endif
