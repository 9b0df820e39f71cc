/* backend_ffi: one call's arguments, read from the JSON arguments against
 * the declaration into the values and memory libffi passes. */
#ifndef BACKEND_FFI_ARGS_H
#define BACKEND_FFI_ARGS_H

#include "ffi_decl.h"

typedef union ffi_value {
    int8_t i8; int16_t i16; int32_t i32; int64_t i64;
    uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
    float f; double d; _Bool b; const char *s; void *p;
    ffi_arg ra; ffi_sarg rs; /* libffi widens small integral returns */
} ffi_value;

typedef struct ffi_args {
    const mcpg_host *h;
    mcpg_call *call;
    ffi_value vals[FFI_MAX_PARAMS];
    void *ptrs[FFI_MAX_PARAMS];   /* &vals[i], as ffi_call takes them */
    void *mem[FFI_MAX_PARAMS];    /* a string's copy, an array, a buffer */
    size_t count[FFI_MAX_PARAMS]; /* elements of an array, bytes of a buffer */
    int seen[FFI_MAX_PARAMS];
} ffi_args;

/* Fill a (zeroed but for h and call) for f: MCPG_CONTINUE, or MCPG_DENY
 * after answering -32602 naming the argument at fault. */
mcpg_status ffi_args_read(ffi_args *a, const ffi_fn *f);
/* Free what read allocated (after the result is written: a returned
 * string may point into a buffer). */
void ffi_args_free(ffi_args *a, const ffi_fn *f);

#endif
