/* backend_ffi: the declared functions, read from the "functions" config and
 * bound to their symbols. One parser serves validate() (errors reported
 * with key paths) and create() (errors logged), so both agree. */
#ifndef BACKEND_FFI_DECL_H
#define BACKEND_FFI_DECL_H

#include <mcpg/sdk.h>

#include <ffi.h>
#include <stddef.h>
#include <stdint.h>

#define FFI_MAX_PARAMS 16
#define FFI_NAME_MAX 64
/* Bounds on what one call allocates: the bytes of one output buffer, the
 * elements of one array, and the bytes of all of a function's outputs
 * (which the result carries back, so they bound its size too). */
#define FFI_BUFFER_MAX ((size_t)1 << 20)
#define FFI_ARRAY_MAX ((size_t)65536)
#define FFI_OUTPUT_MAX ((size_t)1 << 20)

typedef enum ffi_kind {
    FK_NONE = 0,
    FK_I8, FK_I16, FK_I32, FK_I64,
    FK_U8, FK_U16, FK_U32, FK_U64,
    FK_FLOAT, FK_DOUBLE, FK_BOOL, FK_STRING,
    FK_VOID,   /* returns only */
    FK_BUFFER, /* params only: a zeroed output buffer of `size` bytes */
    FK_ARRAY   /* params only: a pointer to a C array of `of` */
} ffi_kind;

/* An integer parameter the module fills instead of the caller. */
typedef enum ffi_fill { FILL_NONE = 0, FILL_SIZE, FILL_LENGTH } ffi_fill;

typedef struct ffi_param {
    char name[FFI_NAME_MAX + 1];
    char *description;
    ffi_kind kind;
    ffi_kind of;       /* FK_ARRAY: the element type */
    size_t size;       /* FK_BUFFER: bytes; FK_ARRAY: the fixed length of an
                          output array, 0 for an array the caller gives */
    size_t max_length; /* FK_ARRAY the caller gives: the most elements */
    int inout;         /* FK_ARRAY the caller gives: answered after the call */
    int base64;        /* FK_BUFFER: answered as base64, else text to the first NUL */
    ffi_fill fill;     /* size_of (bytes) or length_of (elements) ... */
    int from;          /* ... of this parameter (its index) */
    char from_name[FFI_NAME_MAX + 1];
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

static inline int ffi_is_int(ffi_kind k) { return k >= FK_I8 && k <= FK_U64; }
/* Integer bounds by width; unsigned ones have lo 0. */
void ffi_int_bounds(ffi_kind k, int64_t *lo, uint64_t *hi);

/* The caller passes it (it is in the inputSchema). */
static inline int ffi_param_given(const ffi_param *p) {
    return p->kind != FK_BUFFER && !(p->kind == FK_ARRAY && p->size) && p->fill == FILL_NONE;
}
/* The result carries its content after the call. */
static inline int ffi_param_output(const ffi_param *p) {
    return p->kind == FK_BUFFER || (p->kind == FK_ARRAY && (p->size || p->inout));
}
/* The most elements (arrays) or bytes (buffers) a call gives it. */
static inline size_t ffi_param_count(const ffi_param *p) {
    return p->kind == FK_ARRAY && !p->size ? p->max_length : p->size;
}
/* Bytes of one element (arrays) or 1 (buffers). */
static inline size_t ffi_param_unit(const ffi_param *p) {
    return p->kind == FK_ARRAY ? ffi_kind_type(p->of)->size : 1;
}

#endif
