/* mcpg ABI: the ABI 1.0 size of each kind's ops table.
 *
 * The kernel accepts an ops table whose `size` is at least its kind's value
 * here: the end of the table's last mandatory 1.0 op. Slots after it (the
 * optional ops, and any op added by a later minor) are read only through
 * MCPG_HAS. Like the sizes in module.h, each is written from the 1.0 slots
 * alone and pinned to the live struct, so appending an op never changes it.
 */
#ifndef MCPG_SIZES_H
#define MCPG_SIZES_H

#include "module.h"
#include "kinds.h"

/* {size, version} and n function pointers */
#define MCPG__OPS_SIZE(n) (2 * sizeof(uint32_t) + (n) * sizeof(void (*)(void)))

#define MCPG_TRANSPORT_OPS_SIZE_1_0 MCPG__OPS_SIZE(3)   /* conn_adopt, drain, conn_count */
#define MCPG_IDENTITY_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)    /* authenticate */
#define MCPG_POLICY_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)      /* check */
#define MCPG_LIMITS_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)      /* acquire */
#define MCPG_AUDIT_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)       /* emit */
#define MCPG_COORDINATOR_OPS_SIZE_1_0 MCPG__OPS_SIZE(10) /* get ... unsubscribe */
#define MCPG_EVENTS_OPS_SIZE_1_0 MCPG__OPS_SIZE(2)      /* webhook, request */
#define MCPG_BACKEND_OPS_SIZE_1_0 MCPG__OPS_SIZE(2)     /* list_tools, call_tool */
#define MCPG_METRICS_OPS_SIZE_1_0 MCPG__OPS_SIZE(1)     /* render */

MCPG__PIN_1_0(MCPG_TRANSPORT_OPS_SIZE_1_0, mcpg_transport_ops, conn_count);
MCPG__PIN_1_0(MCPG_IDENTITY_OPS_SIZE_1_0, mcpg_identity_ops, authenticate);
MCPG__PIN_1_0(MCPG_POLICY_OPS_SIZE_1_0, mcpg_policy_ops, check);
MCPG__PIN_1_0(MCPG_LIMITS_OPS_SIZE_1_0, mcpg_limits_ops, acquire);
MCPG__PIN_1_0(MCPG_AUDIT_OPS_SIZE_1_0, mcpg_audit_ops, emit);
MCPG__PIN_1_0(MCPG_COORDINATOR_OPS_SIZE_1_0, mcpg_coordinator_ops, unsubscribe);
MCPG__PIN_1_0(MCPG_EVENTS_OPS_SIZE_1_0, mcpg_events_ops, request);
MCPG__PIN_1_0(MCPG_BACKEND_OPS_SIZE_1_0, mcpg_backend_ops, call_tool);
MCPG__PIN_1_0(MCPG_METRICS_OPS_SIZE_1_0, mcpg_metrics_ops, render);

#endif
