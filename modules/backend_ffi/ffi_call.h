/* backend_ffi: one tools/call: the arguments checked against the declared
 * parameters, the function called through libffi, the value answered. */
#ifndef BACKEND_FFI_CALL_H
#define BACKEND_FFI_CALL_H

#include "ffi_decl.h"

/* Append the tool's inputSchema object (built from the declaration). */
int ffi_schema_append(const mcpg_host *h, mcpg_buf *b, const ffi_fn *f);
/* Answer the call: CONTINUE with the result, or DENY with -32602 naming
 * the argument at fault. Safe on any thread: f is only read. */
mcpg_status ffi_call_run(const mcpg_host *h, const ffi_fn *f, mcpg_call *call);

#endif
