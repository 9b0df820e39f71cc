/* A fake kernel for transport_http's socket tests: one worker loop on its
 * own thread, a TCP listener that hands accepted sockets to conn_adopt, and
 * a call_submit whose behaviour is chosen by the tool name:
 *
 *   echo     completes inside call_submit (re-entrant complete)
 *   async    completes on the next loop turn
 *   slow     completes after 150 ms (cancel is recorded, it still completes)
 *   limited  completes with an error and HTTP 429, Retry-After 7
 *   busy     call_submit fails with MCPG_EAGAIN
 *   draining call_submit fails with MCPG_EUNAVAIL
 *   other    completes with -32602 "Unknown tool" (HTTP 200), as the kernel does
 *   big      completes inside call_submit with a 300 000-byte text
 *   huge     completes inside call_submit with a 4 000 000-byte text
 *   tools/list completes with {"tools":[{"name":"echo"}]}
 */
#ifndef FAKE_KERNEL_H
#define FAKE_KERNEL_H

#include <mcpg/sdk.h>
#include <stdint.h>

typedef struct fk_stats {
    int submitted, completed, released, cancelled, adopt_refused;
    int reentrant_completions;
    long host_allocs; /* host->alloc/calloc minus host->free */
    long buf_bytes;   /* capacity of the mcpg_bufs the module holds (grown via host->buf_*) */
} fk_stats;

/* Load the module, create an instance with config_json, start the loop and
 * listener. Returns the port, or -1. */
int fk_start(const char *module_path, const char *config_json);
/* Run fn(arg) on the loop thread and wait for it. */
void fk_run_on_loop(void (*fn)(void *), void *arg);
void fk_drain(void);
uint32_t fk_conn_count(void);
fk_stats fk_get_stats(void);
/* After fk_stop: the loop is gone, read directly. */
fk_stats fk_stats_after_stop(void);
/* Destroy the instance, stop the loop; returns uv_loop_close's result. */
int fk_stop(void);

#endif
