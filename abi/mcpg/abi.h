/** @file
 * mcpg ABI v1: everything a module sees of the kernel. Depends only on the C
 * standard headers <stddef.h> and <stdint.h>. */

/** @mainpage mcpg SDK reference
 *
 * The headers a gateway module is written against, as installed in
 * `<prefix>/include/mcpg/`. Where to start:
 *
 * - mcpg/sdk.h: what a module includes; MCPG_MODULE_DEFINE writes the
 *   descriptor (mcpg_module) and the entry symbol.
 * - mcpg_lifecycle_ops: what every module implements; then its kind's ops
 *   table in mcpg/kinds.h (mcpg_backend_ops, mcpg_identity_ops, ...).
 * - mcpg_host: the services the kernel offers, slot by slot.
 * - mcpg/call.h: calls, buffers and the structs that cross the boundary;
 *   mcpg/errors.h: the error codes.
 * - mcpg/fakehost.h and mcpg/check.h: unit tests without the kernel.
 *
 * Compatibility: each ABI minor only adds (its changelog opens
 * mcpg/module.h); a slot newer than ABI 1.0 is read only through MCPG_HAS
 * or MCPG_HOST_HAS. The policy, and how long a major is supported, is
 * docs/compatibility.md in the mcpg source tree; the guide to writing a
 * module is docs/writing-a-module.md.
 */
#ifndef MCPG_ABI_H
#define MCPG_ABI_H
#include "errors.h"
#include "module.h"
#include "call.h"
#include "json.h"
#include "kinds.h"
#include "metrics.h"
#include "trace.h"
#include "host.h"
#include "sizes.h"

#ifdef __cplusplus
extern "C" {
#endif
/** The one symbol a module exports (declared here so both sides agree). */
const mcpg_module *mcpg_module_entry(uint16_t host_abi_major, uint16_t host_abi_minor);
#ifdef __cplusplus
}
#endif
#endif
