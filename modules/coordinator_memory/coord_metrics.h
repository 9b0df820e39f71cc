/* coordinator_memory's series (ABI 1.4): every op by its name and how it
 * ended, the time from an op to its callback, and the store's keys and
 * bytes, labelled coordinator="<instance>". */
#ifndef COORD_METRICS_H
#define COORD_METRICS_H

#include <mcpg/abi.h>

#include "coord_store.h"

typedef enum cm_opname {
    CMO_GET, CMO_PUT, CMO_PUT_IF_ABSENT, CMO_CAS, CMO_INCR, CMO_RATE_TAKE, CMO_DEL, CMO_SCAN,
    CMO_PUBLISH, CMO_SUBSCRIBE, CMO_COUNT
} cm_opname;

typedef struct cm_metrics {
    const mcpg_host *h; /* NULL: the kernel keeps no metrics */
    mcpg_metric *ops, *seconds;
} cm_metrics;

/* In create(); a family the kernel refuses is logged and left uncounted. */
void cm_metrics_register(cm_metrics *m, const mcpg_host *h, mcpg_instance *self,
                         cm_store *store);
/* One op ended with status, us after it was made (on its loop; any thread). */
void cm_metrics_op(const cm_metrics *m, cm_opname op, int status, uint64_t us);

#endif
