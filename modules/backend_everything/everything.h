/* backend_everything: what its files share (internal to the module).
 *
 *   backend_everything.c     the descriptor, lifecycle and the ops table: each op hands
 *                the call to the file of its concern
 *   tools.c      the tools: the list and the fixtures that answer at once,
 *                with notifications, list changes or a capability check
 *   ask.c        tools that need the client's answer: a request on the
 *                legacy wire (call_request, PENDING until the reply), an
 *                input_required result on the stateless wire
 *   input.c      the input_required (SEP-2322) family: rounds, inputResponses
 *                and a requestState the backend can verify
 *   resources.c  resources, the template, reads and the watched resource
 *   prompts.c    prompts and completion
 *   json.c       small readers over the host's JSON scanner
 *   later.c      answering a call later, from a timer on its loop
 *   tasks.c      the task store: ids, lifetimes, status, and a task's JSON
 *   task_tools.c the task fixtures and how a tools/call becomes a task
 *   task_methods.c  tasks/get, /update, /cancel, /result, /list
 */
#ifndef EVERYTHING_H
#define EVERYTHING_H

#include <mcpg/sdk.h>

#include <stdatomic.h>

typedef struct ev_cfg {
    int64_t request_timeout_ms;
} ev_cfg;

typedef struct ev_tasks ev_tasks;

typedef struct ev {
    const mcpg_host *host;
    mcpg_instance *self;
    const ev_cfg *cfg;
    uint64_t key[2];              /* signs requestState: a tampered one is refused */
    atomic_uint watched_version;  /* test://watched-resource changes with each update */
    mcpg_buf tools;               /* the tools/list array, built once */
    ev_tasks *tasks;              /* the tasks this instance created */
} ev;

/* What a call PENDING on this backend waits for (kept in its call_slot):
 * cancel answers the call when the client leaves first. */
typedef struct ev_waiting ev_waiting;
struct ev_waiting {
    void (*cancel)(ev *e, ev_waiting *w); /* on the call's loop, while pending */
};

/* The same 1x1 PNG and minimal WAV the suite's reference server uses. */
#define EV_PNG_BASE64 \
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
#define EV_WAV_BASE64 "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

/* ---- tools.c ---- */
int ev_tools_build(ev *e);
mcpg_status ev_call_tool(ev *e, mcpg_call *call);

/* ---- ask.c ---- */
/* 1 when name is one of its tools (then *st is the answer). */
int ev_ask_tool(ev *e, mcpg_call *call, const char *name, mcpg_status *st);
int ev_ask_list(ev *e, mcpg_buf *out);

/* ---- later.c ---- */
/* What a wait ends with: the call's answer, or MCPG_PENDING when fn waits
 * again (it set up the next wait itself). On the call's loop. */
typedef mcpg_status (*ev_later_fn)(ev *e, mcpg_call *call);
/* Answer the call from fn after ms, never blocking: returns MCPG_PENDING,
 * or an error answer when no timer can be had. */
mcpg_status ev_later(ev *e, mcpg_call *call, uint64_t ms, ev_later_fn fn);
/* The client left: whatever the call waits for answers it now. */
void ev_waiting_cancel(ev *e, mcpg_call *call);

/* ---- tasks.c, task_tools.c, task_methods.c ---- */
/* The task methods (routed to the backend that created the task). */
typedef enum ev_task_method {
    EV_TASKS_GET,
    EV_TASKS_UPDATE, /* stateless wire (2026 extension) */
    EV_TASKS_CANCEL,
    EV_TASKS_RESULT, /* legacy wire (2025-11-25) */
    EV_TASKS_LIST    /* legacy wire */
} ev_task_method;

int ev_tasks_create(ev *e);
void ev_tasks_destroy(ev *e);
int ev_task_tools_list(ev *e, mcpg_buf *out);
int ev_task_tool(ev *e, mcpg_call *call, const char *name, mcpg_status *st);
/* One task method for the call (params.taskId, or call_target when the
 * kernel gives the task's own id). */
mcpg_status ev_task_request(ev *e, mcpg_call *call, ev_task_method method);
int ev_tasks_append(ev *e, mcpg_call *call, mcpg_buf *out); /* the session's tasks, a JSON array */

/* ---- input.c ---- */
int ev_input_tool(ev *e, mcpg_call *call, const char *name, mcpg_status *st);
int ev_input_list(ev *e, mcpg_buf *out);
mcpg_status ev_input_prompt(ev *e, mcpg_call *call);
/* Sign and check a requestState: "<tag>.<mac>". */
int ev_state_sign(const ev *e, const char *tag, char *out, size_t cap);
int ev_state_check(const ev *e, const char *state, size_t n, const char *tag);

/* ---- resources.c ---- */
int ev_list_resources(ev *e, mcpg_buf *out);
int ev_list_templates(ev *e, mcpg_buf *out);
mcpg_status ev_read_resource(ev *e, mcpg_call *call);
void ev_watched_update(ev *e);

/* ---- prompts.c ---- */
int ev_list_prompts(ev *e, mcpg_buf *out);
mcpg_status ev_get_prompt(ev *e, mcpg_call *call);
mcpg_status ev_complete(ev *e, mcpg_call *call);

/* ---- json.c ---- */
/* The value at a path of object keys (NULL-terminated), inside text[0..n):
 * 1 found, 0 not. */
int ev_json_at(const mcpg_host *h, const char *text, size_t n, mcpg_json_span *out, ...);
/* A string span decoded into dst (cap bytes); "" when it is not a string. */
const char *ev_json_str(const mcpg_host *h, const mcpg_json_span *v, char *dst, size_t cap);
/* The raw text of a value span, with the quotes of a string put back. */
const char *ev_json_raw(const mcpg_json_span *v, size_t *len);
/* Whether the client declared capability `name` (its caps object's key). */
int ev_client_has(const mcpg_host *h, mcpg_call *call, const char *name);
/* Whether the client declared extension `id` (capabilities.extensions). */
int ev_client_has_extension(const mcpg_host *h, mcpg_call *call, const char *id);
/* The result's one text item, printf-style; MCPG_CONTINUE or MCPG_DENY. */
mcpg_status ev_textf(const ev *e, mcpg_call *call, int is_error, const char *fmt, ...)
    MCPG_PRINTF(4, 5);

#endif
