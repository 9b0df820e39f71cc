/* A fixture backend for the kernel's defect tests: tools that behave the way
 * buggy or slow backends do, each writing what it saw as "key=value" lines
 * to `path`:
 *   keep     answers, and keeps its call handle (a bug)
 *   misuse   uses the handle "keep" kept: call_error on it; writes misuse_rc=
 *   pend     answers PENDING; a thread of its own resumes after args.ms. With
 *            args.wait_cancel it first writes running_id=<call id> and waits
 *            (up to 20 s) until call_cancelled says the client left, so a
 *            cancel lands while the op still runs. Writes
 *            pended_id=<call id> just before it answers PENDING, resumed_us=
 *            before its resume and resume_returned_id=<call id> once
 *            call_resume has returned (facts a test waits on)
 *   block    blocks args.ms (on the pool), then writes backend_end_us=
 *   transport calls the transport's slots on its own call (a bug): writes
 *            outcome_size= (what call_outcome filled), then cancels the
 *            call and writes cancelled= (call_cancelled after), then
 *            releases it, and answers
 * and a cancel op that writes cancel_after_resume=0|1. */
#include <mcpg/sdk.h>

#include "fx_common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct bugs_cfg {
    const char *path;
} bugs_cfg;

static const mcpg_config_field bugs_config[] = {
    MCPG_CFG_REQUIRED_STRING_FIELD(bugs_cfg, path, "path", "file to append what happened to"),
    MCPG_CONFIG_END};

#define MAX_PENDING 64

typedef struct pending {
    mcpg_call *call;
    atomic_int resumed;
} pending;

typedef struct bugs {
    const mcpg_host *host;
    const bugs_cfg *cfg;
    pthread_mutex_t lock;
    mcpg_call *kept; /* the bug "keep" makes */
    pending pend[MAX_PENDING];
    unsigned n_pend;
    atomic_int threads; /* resume threads not yet done with the instance */
} bugs;

/* One "key=value" line. */
static void note(bugs *b, const char *key, long long v) {
    FILE *f = fopen(b->cfg->path, "a");
    if (!f) return;
    fprintf(f, "%s=%lld\n", key, v);
    fclose(f);
}

/* The call's JSON-RPC id as a number (the tests use numbers), -1 otherwise. */
static long long call_id_num(bugs *b, mcpg_call *call) {
    size_t n = 0;
    const char *id = b->host->call_id(call, &n);
    long long v = 0;
    if (!id || n == 0 || n > 18) return -1;
    for (size_t i = 0; i < n; i++) {
        if (id[i] < '0' || id[i] > '9') return -1;
        v = v * 10 + (id[i] - '0');
    }
    return v;
}

static long long arg_ms(bugs *b, mcpg_call *call) {
    size_t n;
    const char *args = b->host->call_args(call, &n);
    mcpg_json_span v;
    int64_t ms = 0;
    if (b->host->json_object_get(args, n, "ms", &v) == 1) b->host->json_int64(&v, &ms);
    return ms;
}

static bool arg_true(bugs *b, mcpg_call *call, const char *key) {
    size_t n;
    const char *args = b->host->call_args(call, &n);
    mcpg_json_span v;
    return b->host->json_object_get(args, n, key, &v) == 1 && v.type == MCPG_JSON_TRUE;
}

static int bugs_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    (void)self;
    bugs *b = host->calloc(1, sizeof *b);
    if (!b) return MCPG_ENOMEM;
    b->host = host;
    b->cfg = cfg;
    pthread_mutex_init(&b->lock, NULL);
    *out = b;
    return 0;
}

static void bugs_destroy(void *inst) {
    bugs *b = inst;
    /* a resume thread writes its last note after call_resume, when nothing
     * holds the instance any more: it stays until they are all done */
    while (atomic_load(&b->threads) != 0) fx_nap_ms(1);
    pthread_mutex_destroy(&b->lock);
    b->host->free(b);
}

static int bugs_list(void *inst, mcpg_buf *out) {
    bugs *b = inst;
    static const char tools[] = "[{\"name\":\"keep\",\"inputSchema\":{\"type\":\"object\"}},"
                                "{\"name\":\"misuse\",\"inputSchema\":{\"type\":\"object\"}},"
                                "{\"name\":\"pend\",\"inputSchema\":{\"type\":\"object\"}},"
                                "{\"name\":\"block\",\"inputSchema\":{\"type\":\"object\"}},"
                                "{\"name\":\"transport\",\"inputSchema\":{\"type\":\"object\"}}]";
    return b->host->buf_append(out, tools, sizeof tools - 1);
}

typedef struct resumer {
    bugs *b;
    pending *p;
    long long ms, id;
} resumer;

static void *resume_later(void *arg) {
    resumer r = *(resumer *)arg;
    free(arg);
    fx_nap_ms(r.ms);
    const mcpg_host *h = r.b->host;
    static const char result[] = "{\"content\":[{\"type\":\"text\",\"text\":\"resumed\"}]}";
    h->call_result(r.p->call, result, sizeof result - 1);
    atomic_store(&r.p->resumed, 1);
    note(r.b, "resumed_us", (long long)h->mono_us());
    h->call_resume(r.p->call, MCPG_CONTINUE);
    /* the call is no longer ours; the instance is until the count drops */
    note(r.b, "resume_returned_id", r.id);
    atomic_fetch_sub(&r.b->threads, 1);
    return NULL;
}

static mcpg_status pend(bugs *b, mcpg_call *call) {
    pthread_mutex_lock(&b->lock);
    pending *p = b->n_pend < MAX_PENDING ? &b->pend[b->n_pend++] : NULL;
    pthread_mutex_unlock(&b->lock);
    resumer *r = malloc(sizeof *r);
    if (!p || !r) {
        free(r);
        return mcpg_result_errorf(b->host, call, MCPG_RPC_INTERNAL_ERROR, "no room");
    }
    p->call = call;
    atomic_store(&p->resumed, 0);
    *r = (resumer){b, p, arg_ms(b, call), call_id_num(b, call)};
    if (arg_true(b, call, "wait_cancel")) {
        note(b, "running_id", r->id);
        for (int i = 0; i < 20000 && !b->host->call_cancelled(call); i++) fx_nap_ms(1);
    }
    /* before the thread starts: written after it, it could follow resumed_us */
    note(b, "pended_id", r->id);
    atomic_fetch_add(&b->threads, 1);
    if (fx_detached(resume_later, r) != 0) {
        atomic_fetch_sub(&b->threads, 1);
        free(r);
        return mcpg_result_errorf(b->host, call, MCPG_RPC_INTERNAL_ERROR, "no thread");
    }
    return MCPG_PENDING;
}

/* What a backend must not do with its handle: speak for the transport. */
static mcpg_status play_transport(bugs *b, mcpg_call *call) {
    const mcpg_host *h = b->host;
    mcpg_call_outcome o = {.size = sizeof o};
    h->call_outcome(call, &o);
    note(b, "outcome_size", o.size);
    h->call_cancel(call);
    note(b, "cancelled", h->call_cancelled(call));
    h->call_release(call);
    return mcpg_result_text(h, call, "played", 6, 0);
}

static mcpg_status bugs_call(void *inst, mcpg_call *call) {
    bugs *b = inst;
    const mcpg_host *h = b->host;
    const char *tool = h->call_target(call);
    if (strcmp(tool, "keep") == 0) {
        b->kept = call;
        return mcpg_result_text(h, call, "kept", 4, 0);
    }
    if (strcmp(tool, "misuse") == 0) {
        int rc = h->call_error(b->kept, -32099, "hijacked by a stale handle", NULL);
        note(b, "misuse_rc", rc);
        return mcpg_result_text(h, call, "mine", 4, 0);
    }
    if (strcmp(tool, "transport") == 0) return play_transport(b, call);
    if (strcmp(tool, "block") == 0) {
        fx_nap_ms(arg_ms(b, call));
        note(b, "backend_end_us", (long long)h->mono_us());
        return mcpg_result_text(h, call, "blocked", 7, 0);
    }
    return pend(b, call);
}

static void bugs_cancel(void *inst, mcpg_call *call) {
    bugs *b = inst;
    pthread_mutex_lock(&b->lock);
    for (unsigned i = 0; i < b->n_pend; i++)
        if (b->pend[i].call == call)
            note(b, "cancel_after_resume", atomic_load(&b->pend[i].resumed));
    pthread_mutex_unlock(&b->lock);
}

static const mcpg_lifecycle_ops bugs_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                  .create = bugs_create,
                                                  .destroy = bugs_destroy};
static const mcpg_backend_ops bugs_ops = {MCPG_OPS_HEAD(mcpg_backend_ops),
                                          .list_tools = bugs_list, .call_tool = bugs_call,
                                          .cancel = bugs_cancel};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "fx_bugs", "1.0.0",
                   .description = "kernel test fixture: buggy and slow backend behaviours",
                   .flags = MCPG_MOD_INLINE_SAFE, .config = bugs_config,
                   .config_size = sizeof(bugs_cfg), .lifecycle = &bugs_lifecycle,
                   .ops = &bugs_ops)
