/* The task store and the task fixtures' shared shapes (internal to the
 * module; tasks.c, task_tools.c, task_methods.c).
 *
 * A task's state is a function of the clock and of what the client did:
 * a working task is done once its due time has passed, an input_required
 * one once every asked input was answered. Nothing runs in the background,
 * so the store needs no timer and no thread: each method reads the status
 * as of now, under the store's lock (ops run on any loop or pool thread). */
#ifndef EV_TASKS_H
#define EV_TASKS_H

#include "everything.h"

/* "<instance>.task-<serial>-<hex>": the instance's name first, so a kernel
 * can route a task method by the id alone (names never hold a '.'). */
#define EV_TASK_ID_MAX 128
#define EV_TASK_INPUTS 2
#define EV_TASK_TTL_MS 60000     /* kept this long after creation at least */
#define EV_TASK_TTL_MAX_MS 600000
#define EV_TASK_POLL_MS 200

typedef enum ev_task_status {
    EV_TASK_WORKING,
    EV_TASK_INPUT_REQUIRED,
    EV_TASK_COMPLETED,
    EV_TASK_FAILED,
    EV_TASK_CANCELLED
} ev_task_status;

/* How a finished job ended. */
typedef enum ev_job_end {
    EV_JOB_OK,             /* completed, a result */
    EV_JOB_TOOL_ERROR,     /* completed, a result with isError */
    EV_JOB_PROTOCOL_ERROR  /* failed, an error object */
} ev_job_end;

typedef struct ev_task ev_task;

/* A tool that can run as a task. */
typedef struct ev_job {
    const char *name, *description, *schema;
    const char *support; /* execution.taskSupport: "optional" or "required" */
    uint32_t work_ms;    /* from creation (or the last answer) to done */
    const char *keys[EV_TASK_INPUTS]; /* the inputs it asks, NULL-ended */
    /* The request (an elicitation/create) asked under key i. */
    int (*request)(const mcpg_host *h, const ev_task *t, int i, mcpg_buf *out);
    /* How it ended, and the text it ends with. */
    ev_job_end (*end)(const ev_task *t, char *text, size_t cap);
    /* Optional: read the call's arguments into t (arg, number, due_us):
     * 0, or -1 when they are invalid (-32602). */
    int (*start)(ev *e, mcpg_call *call, ev_task *t);
    /* Optional (taskSupport "optional"): the same work without a task. */
    mcpg_status (*sync)(ev *e, mcpg_call *call);
} ev_job;

struct ev_task {
    char id[EV_TASK_ID_MAX]; /* "" when the slot is free */
    const ev_job *job;
    uint32_t wire;
    char session[64];        /* legacy wire: tasks/list shows a session its own */
    int64_t created_ms, updated_ms; /* wall clock */
    uint64_t due_us;         /* monotonic: a working task is done then */
    uint64_t expires_us;     /* monotonic: created + ttl */
    int64_t ttl_ms;
    int cancelled;
    unsigned pending;        /* bit i: keys[i] asked, not answered */
    char arg[128];           /* what the call said (a file name, a label) */
    int number;              /* a numeric argument (seconds) */
    char answers[EV_TASK_INPUTS][128];
};

/* ---- the store (tasks.c): every function but lock/unlock wants it held ---- */
void ev_tasks_lock(ev *e);
void ev_tasks_unlock(ev *e);
/* A new task for job, working from now for work_ms; NULL when the store is
 * full of tasks still within their ttl. */
ev_task *ev_task_add(ev *e, const ev_job *job, uint32_t wire, int64_t ttl_ms);
ev_task *ev_task_find(ev *e, const char *id, size_t n);
/* Slot i's task (i < ev_tasks_slots()); NULL when free or expired. */
size_t ev_tasks_slots(void);
ev_task *ev_task_slot(ev *e, size_t i);
ev_task_status ev_task_status_now(const ev *e, const ev_task *t);
/* An answer to keys[i]: recorded, the key no longer pending; the job's
 * remaining work starts now. */
void ev_task_answer(ev *e, ev_task *t, int i, const char *answer);
void ev_task_cancel(ev *e, ev_task *t);
/* Milliseconds until a working task is done (0 when it is). */
uint64_t ev_task_due_in_ms(const ev *e, const ev_task *t);

/* What a client's answer to an elicitation says, short: "<action>", or
 * "<action>:<content.name>" or "<action>:true" for content.confirm true. */
void ev_task_summarize(const mcpg_host *h, const char *answer, size_t n, char *out,
                       size_t cap);

/* ---- shapes (tasks.c) ---- */
const char *ev_task_status_name(ev_task_status s);
/* The Task object's members (no braces) as the task's wire spells them:
 * ttlMs/pollIntervalMs (2026 extension), ttl/pollInterval (2025). */
int ev_task_members(const ev *e, const ev_task *t, mcpg_buf *out);
/* The job's result object ({"content":[...]}, isError for a tool error) or
 * error object ({"code","message"}); *end says which. */
int ev_task_outcome(const ev *e, const ev_task *t, mcpg_buf *out, ev_job_end *end);
/* {key: request, ...} for the keys still pending. */
int ev_task_input_requests(const ev *e, const ev_task *t, mcpg_buf *out);

#endif
