/* lib/audit: what every audit sink does the same way (see audit_sink.h). */
#define _GNU_SOURCE /* pthread_setname_np */
#include "audit_sink.h"

#include <signal.h>

#include "audit_format.h"

size_t audit_sink_format(const mcpg_host *h, const mcpg_audit_event *ev, char *buf, size_t cap,
                         char **line) {
    audit_lens lens;
    size_t bound = audit_line_bound(ev, &lens);
    *line = bound <= cap ? buf : h->alloc(bound);
    if (!*line) return 0;
    return audit_format_line(*line, ev, &lens);
}

mcpg_status audit_sink_refuse(const mcpg_host *h, mcpg_call *call, const char *why) {
    if (!call) return MCPG_DENY;
    h->call_error(call, MCPG_RPC_SERVER_ERROR, why, NULL);
    h->call_set_http(call, 503, 1);
    return MCPG_DENY;
}

int audit_sink_thread(pthread_t *t, void *(*fn)(void *), void *arg, const char *name) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) pthread_setname_np(*t, name);
    return rc;
}
