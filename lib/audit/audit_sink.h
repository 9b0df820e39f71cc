/* lib/audit: what every audit sink module does the same way (audit_file,
 * audit_stdout): format an event on the loop thread, refuse a call it cannot
 * record, start its writer thread. */
#ifndef AUDIT_SINK_H
#define AUDIT_SINK_H

#include <mcpg/abi.h>
#include <pthread.h>
#include <stddef.h>

/* Format ev as one line (audit_format.h) into buf when it fits in cap bytes,
 * else into a block from h->alloc; *line is where it is (free it with
 * h->free when it is not buf). Returns its length, 0 when out of memory. No
 * allocation for a line that fits buf. */
size_t audit_sink_format(const mcpg_host *h, const mcpg_audit_event *ev, char *buf, size_t cap,
                         char **line);

/* The call fails closed: JSON-RPC -32000 `why`, HTTP 503 with Retry-After: 1.
 * Returns MCPG_DENY (MCPG_DENY without a call too: nothing to refuse). On
 * the call's loop thread. */
mcpg_status audit_sink_refuse(const mcpg_host *h, mcpg_call *call, const char *why);

/* A writer thread named `name`, with every signal blocked (SIGHUP and
 * SIGTERM are the main thread's). 0 or the pthread_create error. */
int audit_sink_thread(pthread_t *t, void *(*fn)(void *), void *arg, const char *name);

#endif
