/* A fixture backend for the kernel's ABI 1.1 tests: a little of everything
 * a backend can offer, each piece small enough to check exactly.
 *   tools      note3       three notifications from the op, then its result
 *              note_later  two notifications and its resume from a thread
 *              note_joined two notifications from a thread the op waits for,
 *                          then its result at once (they are still queued)
 *              ask         asks the client roots/list; answers with the reply
 *   prompts    greet, plain (no get_prompt is missing: the op exists)
 *   resources  test://a, test://b; template test://t/{id}/x
 *   complete   answers the ref's name or uri back
 *   subscribe  writes sub=<uri>:<on> to `path` */
#include <mcpg/sdk.h>

#include "fx_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rich_cfg {
    const char *path;
} rich_cfg;

static const mcpg_config_field rich_config[] = {
    MCPG_CFG_STRING_FIELD(rich_cfg, path, "path", NULL, "file for sub= lines"),
    MCPG_CONFIG_END};

typedef struct rich {
    const mcpg_host *host;
    const rich_cfg *cfg;
} rich;

static int rich_create(const mcpg_host *host, mcpg_instance *self, const void *cfg, void **out) {
    (void)self;
    rich *r = host->calloc(1, sizeof *r);
    if (!r) return MCPG_ENOMEM;
    r->host = host;
    r->cfg = cfg;
    *out = r;
    return 0;
}

static void rich_destroy(void *inst) {
    rich *r = inst;
    r->host->free(r);
}

static int append(rich *r, mcpg_buf *out, const char *text) {
    return r->host->buf_append(out, text, strlen(text));
}

static int rich_tools(void *inst, mcpg_buf *out) {
    return append(inst, out, "[{\"name\":\"note3\"},{\"name\":\"note_later\"},"
                             "{\"name\":\"note_joined\"},{\"name\":\"ask\"}]");
}
static int rich_prompts(void *inst, mcpg_buf *out) {
    return append(inst, out, "[{\"name\":\"greet\",\"description\":\"hi\"},{\"name\":\"plain\"}]");
}
static int rich_resources(void *inst, mcpg_buf *out) {
    return append(inst, out, "[{\"uri\":\"test://a\",\"name\":\"A\"},{\"uri\":\"test://b\",\"name\":\"B\"}]");
}
static int rich_templates(void *inst, mcpg_buf *out) {
    return append(inst, out, "[{\"uriTemplate\":\"test://t/{id}/x\",\"name\":\"T\"}]");
}

static mcpg_status text_result(rich *r, mcpg_call *call, const char *prefix, const char *what) {
    char text[512];
    snprintf(text, sizeof text, "%s%s", prefix, what ? what : "(null)");
    return mcpg_result_text(r->host, call, text, strlen(text), 0);
}

static mcpg_status note(rich *r, mcpg_call *call, int i) {
    char params[64];
    snprintf(params, sizeof params, "{\"progressToken\":\"t\",\"progress\":%d}", i);
    return r->host->call_notify(call, "notifications/progress", params, strlen(params)) == 0
               ? MCPG_CONTINUE : MCPG_DENY;
}

typedef struct later {
    rich *r;
    mcpg_call *call;
} later;

static void *notes_then_resume(void *arg) {
    later l = *(later *)arg;
    free(arg);
    fx_nap_ms(20);
    note(l.r, l.call, 1);
    note(l.r, l.call, 2);
    text_result(l.r, l.call, "later", "");
    l.r->host->call_resume(l.call, MCPG_CONTINUE);
    return NULL;
}

static void *notes_only(void *arg) {
    later *l = arg;
    note(l->r, l->call, 1);
    note(l->r, l->call, 2);
    return NULL;
}

/* Sent off the loop while the op runs, queued: the op answers before the
 * loop has had a turn to deliver them. */
static mcpg_status notes_joined(rich *r, mcpg_call *call) {
    later l = {r, call};
    pthread_t t;
    if (pthread_create(&t, NULL, notes_only, &l) != 0) return MCPG_DENY;
    pthread_join(t, NULL);
    return text_result(r, call, "joined", "");
}

typedef struct asking {
    rich *r;
    mcpg_call *call;
} asking;

static void on_reply(void *arg, const mcpg_reply *reply) {
    asking *a = arg;
    char text[300];
    if (reply->status != 0)
        snprintf(text, sizeof text, "status %d", reply->status);
    else if (reply->is_error)
        snprintf(text, sizeof text, "error %lld", (long long)reply->error_code);
    else
        snprintf(text, sizeof text, "reply %.*s", (int)reply->result_len, reply->result_json);
    mcpg_result_text(a->r->host, a->call, text, strlen(text), 0);
    a->r->host->call_resume(a->call, MCPG_CONTINUE);
    free(a);
}

static mcpg_status ask(rich *r, mcpg_call *call) {
    asking *a = malloc(sizeof *a);
    if (!a) return MCPG_DENY;
    *a = (asking){r, call};
    int rc = r->host->call_request(call, "roots/list", "{}", 2, 300, on_reply, a);
    if (rc == 0) return MCPG_PENDING;
    free(a);
    return text_result(r, call, "not asked: ", r->host->errname(rc));
}

static mcpg_status rich_call(void *inst, mcpg_call *call) {
    rich *r = inst;
    const char *tool = r->host->call_target(call);
    if (strcmp(tool, "note3") == 0) {
        for (int i = 1; i <= 3; i++)
            if (note(r, call, i) != MCPG_CONTINUE) return mcpg_result_errorf(r->host, call, -32603, "notify failed");
        return text_result(r, call, "noted", "");
    }
    if (strcmp(tool, "ask") == 0) return ask(r, call);
    if (strcmp(tool, "note_joined") == 0) return notes_joined(r, call);
    later *l = malloc(sizeof *l);
    if (!l) return MCPG_DENY;
    *l = (later){r, call};
    if (fx_detached(notes_then_resume, l) != 0) {
        free(l);
        return MCPG_DENY;
    }
    return MCPG_PENDING;
}

static mcpg_status rich_read(void *inst, mcpg_call *call) {
    rich *r = inst;
    return text_result(r, call, "read ", r->host->call_target(call));
}

static mcpg_status rich_get_prompt(void *inst, mcpg_call *call) {
    rich *r = inst;
    return text_result(r, call, "prompt ", r->host->call_target(call));
}

static mcpg_status rich_complete(void *inst, mcpg_call *call) {
    rich *r = inst;
    return text_result(r, call, "complete ", r->host->call_target(call));
}

static void rich_subscribe(void *inst, const char *uri, int on) {
    rich *r = inst;
    FILE *f = r->cfg->path ? fopen(r->cfg->path, "a") : NULL;
    if (!f) return;
    fprintf(f, "sub=%s:%d\n", uri, on);
    fclose(f);
}

static const mcpg_lifecycle_ops rich_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                  .create = rich_create,
                                                  .destroy = rich_destroy};
static const mcpg_backend_ops rich_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops), .list_tools = rich_tools, .call_tool = rich_call,
    .list_resources = rich_resources, .list_resource_templates = rich_templates,
    .read_resource = rich_read, .list_prompts = rich_prompts, .get_prompt = rich_get_prompt,
    .complete = rich_complete, .subscribe = rich_subscribe};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "fx_rich", "1.0.0",
                   .description = "kernel test fixture: every kind of item and message",
                   .flags = MCPG_MOD_INLINE_SAFE, .config = rich_config,
                   .config_size = sizeof(rich_cfg), .lifecycle = &rich_lifecycle,
                   .ops = &rich_ops)
