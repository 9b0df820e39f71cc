/** @file
 * mcpg ABI v1: everything a module sees of the kernel. Depends only on the C
 * standard headers <stddef.h> and <stdint.h>. */
#ifndef MCPG_ABI_H
#define MCPG_ABI_H
#include "errors.h"
#include "module.h"
#include "call.h"
#include "json.h"
#include "kinds.h"
#include "metrics.h"
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
