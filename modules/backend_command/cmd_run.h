/* backend_command: one run of a tool's program, on the call's loop. */
#ifndef CMD_RUN_H
#define CMD_RUN_H

#include "cmd_config.h"

typedef struct cmd_run cmd_run;

/* Any thread: build the argv from the call's arguments. NULL with the
 * call's error set (-32602 for a missing or mistyped argument). */
cmd_run *cmd_run_prepare(const mcpg_host *h, mcpg_instance *self, const cmd_tool *t,
                         mcpg_call *call);
/* On the call's loop: spawn and answer through call_resume later. The run
 * frees itself once its process has exited and its handles are closed. */
void cmd_run_start(cmd_run *r);
/* Any thread: start the run on the call's loop (a pool thread's op).
 * MCPG_ESTATE (run freed, error set) when the worker has stopped. */
int cmd_run_post(cmd_run *r);
/* On the loop: the client went away: kill the group and answer now. */
void cmd_run_cancel(cmd_run *r);

#endif
