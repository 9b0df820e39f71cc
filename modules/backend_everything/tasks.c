/* The task store: a fixed table of the tasks this instance created, their
 * ids and lifetimes, the status as of now, and a task's JSON on each wire.
 *
 * Bounded: EV_TASKS_MAX tasks. A task is kept at least its ttl (a client
 * may poll it that long); once that has passed its slot may be reused.
 * When every slot holds a task still within its ttl, a new task is
 * refused (the caller answers -32000, HTTP 503). */
#include "tasks.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EV_TASKS_MAX 64

struct ev_tasks {
    pthread_mutex_t lock;
    uint64_t serial;
    ev_task t[EV_TASKS_MAX];
};

int ev_tasks_create(ev *e) {
    e->tasks = calloc(1, sizeof *e->tasks);
    if (!e->tasks) return MCPG_ENOMEM;
    pthread_mutex_init(&e->tasks->lock, NULL);
    return 0;
}

void ev_tasks_destroy(ev *e) {
    if (!e->tasks) return;
    pthread_mutex_destroy(&e->tasks->lock);
    free(e->tasks);
    e->tasks = NULL;
}

void ev_tasks_lock(ev *e) { pthread_mutex_lock(&e->tasks->lock); }
void ev_tasks_unlock(ev *e) { pthread_mutex_unlock(&e->tasks->lock); }

static int64_t wall_ms(const ev *e) { return e->host->wall_us() / 1000; }

/* An id no other task of this instance had, hard to guess from another
 * (the serial keyed with the instance's key), after the instance's name. */
static void new_id(ev *e, char *id) {
    const char *inst = e->host->instance_name(e->self);
    uint64_t n = ++e->tasks->serial;
    uint64_t x = (n ^ e->key[0]) * 0x9e3779b97f4a7c15ull;
    x ^= (x >> 31) ^ e->key[1];
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    snprintf(id, EV_TASK_ID_MAX, "%.64s.task-%llu-%016llx", inst ? inst : "everything",
             (unsigned long long)n, (unsigned long long)x);
}

ev_task *ev_task_add(ev *e, const ev_job *job, uint32_t wire, int64_t ttl_ms) {
    uint64_t now = e->host->mono_us();
    ev_task *t = NULL;
    for (size_t i = 0; i < EV_TASKS_MAX && !t; i++)
        if (!e->tasks->t[i].id[0] || e->tasks->t[i].expires_us <= now) t = &e->tasks->t[i];
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    new_id(e, t->id);
    t->job = job;
    t->wire = wire;
    t->created_ms = t->updated_ms = wall_ms(e);
    t->ttl_ms = ttl_ms;
    t->expires_us = now + (uint64_t)ttl_ms * 1000;
    t->due_us = now + (uint64_t)job->work_ms * 1000;
    for (int i = 0; i < EV_TASK_INPUTS && job->keys[i]; i++) t->pending |= 1u << i;
    return t;
}

ev_task *ev_task_find(ev *e, const char *id, size_t n) {
    uint64_t now = e->host->mono_us();
    for (size_t i = 0; i < EV_TASKS_MAX; i++) {
        ev_task *t = &e->tasks->t[i];
        if (t->id[0] && t->expires_us > now && strlen(t->id) == n && memcmp(t->id, id, n) == 0)
            return t;
    }
    return NULL;
}

size_t ev_tasks_slots(void) { return EV_TASKS_MAX; }

ev_task *ev_task_slot(ev *e, size_t i) {
    ev_task *t = &e->tasks->t[i];
    return t->id[0] && t->expires_us > e->host->mono_us() ? t : NULL;
}

ev_task_status ev_task_status_now(const ev *e, const ev_task *t) {
    if (t->cancelled) return EV_TASK_CANCELLED;
    if (t->pending) return EV_TASK_INPUT_REQUIRED;
    if (e->host->mono_us() < t->due_us) return EV_TASK_WORKING;
    char text[8];
    return t->job->end(t, text, sizeof text) == EV_JOB_PROTOCOL_ERROR ? EV_TASK_FAILED
                                                                       : EV_TASK_COMPLETED;
}

void ev_task_answer(ev *e, ev_task *t, int i, const char *answer) {
    snprintf(t->answers[i], sizeof t->answers[i], "%s", answer);
    t->pending &= ~(1u << i);
    t->updated_ms = wall_ms(e);
    t->due_us = e->host->mono_us() + (uint64_t)t->job->work_ms * 1000;
}

void ev_task_cancel(ev *e, ev_task *t) {
    ev_task_status s = ev_task_status_now(e, t);
    if (s == EV_TASK_COMPLETED || s == EV_TASK_FAILED || s == EV_TASK_CANCELLED) return;
    t->cancelled = 1;
    t->updated_ms = wall_ms(e);
}

uint64_t ev_task_due_in_ms(const ev *e, const ev_task *t) {
    uint64_t now = e->host->mono_us();
    return t->due_us > now ? (t->due_us - now + 999) / 1000 : 0;
}

void ev_task_summarize(const mcpg_host *h, const char *answer, size_t n, char *out,
                       size_t cap) {
    mcpg_json_span v;
    char action[32] = "", name[96] = "";
    if (ev_json_at(h, answer, n, &v, "action", (const char *)NULL))
        ev_json_str(h, &v, action, sizeof action);
    if (ev_json_at(h, answer, n, &v, "content", "name", (const char *)NULL))
        ev_json_str(h, &v, name, sizeof name);
    else if (ev_json_at(h, answer, n, &v, "content", "confirm", (const char *)NULL) &&
             v.type == MCPG_JSON_TRUE)
        snprintf(name, sizeof name, "true");
    snprintf(out, cap, "%s%s%s", action[0] ? action : "cancel", name[0] ? ":" : "", name);
}

/* ---- shapes ---- */

const char *ev_task_status_name(ev_task_status s) {
    static const char *const names[] = {"working", "input_required", "completed", "failed",
                                        "cancelled"};
    return names[s];
}

/* ISO 8601, UTC, milliseconds: 2026-07-28T10:00:00.000Z */
static int iso_time(int64_t ms, char *out, size_t cap) {
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&s, &tm)) return -1;
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    return n ? snprintf(out + n, cap - n, ".%03dZ", (int)(ms % 1000)) : -1;
}

int ev_task_members(const ev *e, const ev_task *t, mcpg_buf *out) {
    char created[40], updated[40];
    if (iso_time(t->created_ms, created, sizeof created) < 0 ||
        iso_time(t->updated_ms, updated, sizeof updated) < 0)
        return MCPG_EINVAL;
    ev_task_status s = ev_task_status_now(e, t);
    int modern = t->wire == MCPG_WIRE_STATELESS;
    return e->host->buf_printf(
        out,
        "\"taskId\":\"%s\",\"status\":\"%s\",\"statusMessage\":\"%s %s\",\"createdAt\":\"%s\","
        "\"lastUpdatedAt\":\"%s\",\"%s\":%lld,\"%s\":%d",
        t->id, ev_task_status_name(s), t->job->name, ev_task_status_name(s), created, updated,
        modern ? "ttlMs" : "ttl", (long long)t->ttl_ms, modern ? "pollIntervalMs" : "pollInterval",
        EV_TASK_POLL_MS);
}

int ev_task_outcome(const ev *e, const ev_task *t, mcpg_buf *out, ev_job_end *end) {
    const mcpg_host *h = e->host;
    char text[512];
    *end = t->job->end(t, text, sizeof text);
    if (*end == EV_JOB_PROTOCOL_ERROR) {
        int rc = h->buf_printf(out, "{\"code\":%d,\"message\":", MCPG_RPC_INTERNAL_ERROR);
        rc = rc ? rc : h->buf_append_json_string(out, text, strlen(text));
        return rc ? rc : h->buf_append(out, "}", 1);
    }
    int rc = h->buf_append(out, "{\"content\":[{\"type\":\"text\",\"text\":", 34);
    rc = rc ? rc : h->buf_append_json_string(out, text, strlen(text));
    return rc ? rc : h->buf_printf(out, "}]%s}", *end == EV_JOB_TOOL_ERROR ? ",\"isError\":true" : "");
}

int ev_task_input_requests(const ev *e, const ev_task *t, mcpg_buf *out) {
    const mcpg_host *h = e->host;
    int rc = h->buf_append(out, "{", 1);
    int first = 1;
    for (int i = 0; i < EV_TASK_INPUTS && t->job->keys[i] && !rc; i++) {
        if (!(t->pending & (1u << i))) continue;
        rc = h->buf_printf(out, "%s\"%s\":", first ? "" : ",", t->job->keys[i]);
        rc = rc ? rc : t->job->request(h, t, i, out);
        first = 0;
    }
    return rc ? rc : h->buf_append(out, "}", 1);
}
