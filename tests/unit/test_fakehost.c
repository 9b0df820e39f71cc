/* Unit tests of the fake host (sdk/src/fakehost.c), driven by two small
 * modules defined here: a backend whose tools answer in every way the ABI
 * allows (at once, from a timer, from its own thread, from the pool, resumed
 * before returning) and an identity stage. Plus deliberately broken
 * descriptors and misbehaviours the fake host must catch. */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the test backend ----------------------------------------------------- */

typedef struct tb_config {
    const char *greeting;
    int leak_timer;
    int64_t work_items;
} tb_config;

static const mcpg_config_field tb_fields[] = {
    MCPG_CFG_STRING_FIELD(tb_config, greeting, "greeting", "\"hello\"", "what to say"),
    MCPG_CFG_BOOL_FIELD(tb_config, leak_timer, "leak_timer", "false",
                        "start a timer and forget it (a bug, on purpose)"),
    MCPG_CFG_INT_FIELD(tb_config, work_items, "work_items", "0", 0, 64,
                       "slow pool jobs to leave queued at stop"),
    MCPG_CONFIG_END};

typedef struct tb {
    const mcpg_host *host;
    mcpg_instance *self;
    const tb_config *cfg;
    mcpg_timer *leaked;
    pthread_t thr;
    int thr_live;
    int ran_off_loop;        /* the last call_tool ran with no current worker */
    int work_outstanding;
} tb;

/* State of one asynchronous answer. */
typedef struct pend {
    tb *t;
    mcpg_call *call;
    mcpg_post post;
    mcpg_timer *timer;
    long delay_ms;
} pend;

static int tb_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const tb_config *c = config;
    if (!c->greeting || !*c->greeting) {
        host->report_error(rep, "greeting", "must not be empty");
        return MCPG_ECONFIG;
    }
    return 0;
}

static int tb_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **out) {
    tb *t = host->calloc(1, sizeof *t);
    if (!t) return MCPG_ENOMEM;
    t->host = host;
    t->self = self;
    t->cfg = config;
    *out = t;
    return 0;
}

static void tb_tick(void *arg) { (void)arg; }

static int tb_start(void *inst) {
    tb *t = inst;
    t->host->log(t->self, MCPG_LOG_INFO, "started, greeting %s", t->cfg->greeting);
    if (t->cfg->leak_timer)
        return t->host->timer_start(t->self, t->host->worker_current(), 1000, 1000, tb_tick, t,
                                    &t->leaked);
    return 0;
}

static void tb_join(tb *t) {
    if (!t->thr_live) return;
    pthread_join(t->thr, NULL);
    t->thr_live = 0;
}

static void tb_slow_work(void *arg) {
    (void)arg;
    sleep_ms(30);
}

static int work_ran, work_cancelled; /* outlive the instance, for the test to read */

static void tb_work_done(void *arg, int status) {
    tb *t = arg;
    t->work_outstanding--;
    if (status == 0) work_ran++;
    else if (status == MCPG_ECANCELED) work_cancelled++;
}

static void tb_stop(void *inst) {
    tb *t = inst;
    tb_join(t);
    /* Leave slow jobs queued, so the fake host has something to cancel. */
    for (int64_t i = 0; i < t->cfg->work_items; i++)
        if (t->host->work_submit(t->self, t->host->worker_at(0), 0, tb_slow_work,
                                 tb_work_done, t) == 0)
            t->work_outstanding++;
}

static int destroyed_with_work_outstanding;

static void tb_destroy(void *inst) {
    tb *t = inst;
    if (t->work_outstanding) destroyed_with_work_outstanding = 1;
    t->host->free(t);
}

static int tb_list_tools(void *inst, mcpg_buf *out) {
    tb *t = inst;
    static const char tools[] = "[{\"name\":\"greet\",\"inputSchema\":{\"type\":\"object\"}}]";
    return t->host->buf_append(out, tools, sizeof tools - 1);
}

/* {"content":[{"type":"text","text":"<greeting>, <who>"}]} */
static int tb_answer(tb *t, mcpg_call *call) {
    const mcpg_host *h = t->host;
    size_t alen;
    const char *args = h->call_args(call, &alen);
    mcpg_json_span who;
    char name[64] = "world";
    if (h->json_object_get(args, alen, "who", &who) == 1)
        h->json_string_decode(&who, name, sizeof name, NULL);
    char text[160];
    snprintf(text, sizeof text, "%s, %s", t->cfg->greeting, name);
    mcpg_buf *b = h->call_result_buf(call);
    int rc = h->buf_printf(b, "{\"content\":[{\"type\":\"text\",\"text\":");
    rc |= h->buf_append_json_string(b, text, strlen(text));
    rc |= h->buf_printf(b, "}]}");
    return rc;
}

static void pend_timer_fired(void *arg) {
    pend *p = arg;
    tb_answer(p->t, p->call);
    p->t->host->timer_stop(p->timer); /* a fired one-shot is still ours to stop */
    mcpg_call *call = p->call;
    const mcpg_host *h = p->t->host;
    free(p);
    h->call_resume(call, MCPG_CONTINUE);
}

/* Runs on the loop (posted from the op, which may be on a pool thread). */
static void pend_arm_timer(void *arg) {
    pend *p = arg;
    const mcpg_host *h = p->t->host;
    if (h->timer_start(p->t->self, h->worker_current(), 20, 0, pend_timer_fired, p, &p->timer)) {
        mcpg_call *call = p->call;
        free(p);
        h->call_resume(call, MCPG_DENY);
    }
}

static void *pend_thread(void *arg) {
    pend *p = arg;
    sleep_ms(p->delay_ms);
    tb_answer(p->t, p->call);
    p->t->host->call_resume(p->call, MCPG_CONTINUE); /* from a thread of our own */
    free(p);
    return NULL;
}

static void pend_work(void *arg) {
    pend *p = arg;
    tb_answer(p->t, p->call); /* the blocking part, on a pool thread */
}

static void pend_work_done(void *arg, int status) {
    pend *p = arg;
    p->t->host->call_resume(p->call, status == 0 ? MCPG_CONTINUE : MCPG_DENY);
    free(p);
}

static pend *pend_new(tb *t, mcpg_call *call) {
    pend *p = calloc(1, sizeof *p);
    if (p) {
        p->t = t;
        p->call = call;
    }
    return p;
}

static mcpg_status tb_async(tb *t, mcpg_call *call, const char *mode) {
    const mcpg_host *h = t->host;
    pend *p = pend_new(t, call);
    if (!p) return MCPG_DENY;
    if (strcmp(mode, "timer") == 0) {
        p->post.fn = pend_arm_timer;
        p->post.arg = p;
        h->worker_post(h->call_worker(call), &p->post);
        return MCPG_PENDING;
    }
    if (strcmp(mode, "pool") == 0) {
        if (h->work_submit(t->self, h->call_worker(call), 0, pend_work, pend_work_done, p)) {
            free(p);
            return MCPG_DENY;
        }
        return MCPG_PENDING;
    }
    /* "thread" and "slow": our own thread, joined before the next one and in stop */
    tb_join(t);
    p->delay_ms = strcmp(mode, "slow") == 0 ? 300 : 10;
    if (pthread_create(&t->thr, NULL, pend_thread, p) != 0) {
        free(p);
        return MCPG_DENY;
    }
    t->thr_live = 1;
    return MCPG_PENDING;
}

static mcpg_status tb_call_tool(void *inst, mcpg_call *call) {
    tb *t = inst;
    const mcpg_host *h = t->host;
    const char *tool = h->call_target(call);
    t->ran_off_loop = h->worker_current() == NULL;
    size_t alen;
    const char *args = h->call_args(call, &alen);
    mcpg_json_span mode;
    char m[16] = "sync";
    if (h->json_object_get(args, alen, "mode", &mode) == 1)
        h->json_string_decode(&mode, m, sizeof m, NULL);
    if (strcmp(tool, "fail") == 0) {
        h->call_error(call, MCPG_RPC_INVALID_PARAMS, "bad arguments", "{\"field\":\"who\"}");
        return MCPG_DENY;
    }
    if (strcmp(tool, "deny_bare") == 0) return MCPG_DENY;
    if (strcmp(tool, "bogus_status") == 0) return (mcpg_status)7;
    if (strcmp(tool, "greet") != 0) {
        h->call_error(call, MCPG_RPC_INVALID_PARAMS, "Unknown tool", NULL);
        return MCPG_DENY;
    }
    if (strcmp(m, "sync") == 0) return tb_answer(t, call) ? MCPG_DENY : MCPG_CONTINUE;
    if (strcmp(m, "early") == 0 || strcmp(m, "twice") == 0) {
        tb_answer(t, call);
        h->call_resume(call, MCPG_CONTINUE); /* before returning PENDING: allowed */
        if (strcmp(m, "twice") == 0) h->call_resume(call, MCPG_CONTINUE); /* a bug */
        return MCPG_PENDING;
    }
    return tb_async(t, call, m);
}

static const mcpg_lifecycle_ops tb_lifecycle = {
    .size = sizeof(mcpg_lifecycle_ops), .version = 1, .validate = tb_validate,
    .create = tb_create, .start = tb_start, .stop = tb_stop, .destroy = tb_destroy};
static int cancels; /* how often cancel() was called */

static void tb_cancel(void *inst, mcpg_call *call) {
    (void)inst;
    (void)call;
    cancels++; /* the call still answers on its own */
}

static const mcpg_backend_ops tb_ops = {MCPG_OPS_HEAD(mcpg_backend_ops),
                                        .list_tools = tb_list_tools,
                                        .call_tool = tb_call_tool, .cancel = tb_cancel};
static const mcpg_module tb_module = {
    .magic = MCPG_MODULE_MAGIC, .abi_major = MCPG_ABI_MAJOR, .abi_minor = MCPG_ABI_MINOR,
    .size = sizeof(mcpg_module), .kind = MCPG_KIND_BACKEND, .name = "backend_t",
    .version = "1", .build_id = "test", .description = "test backend",
    .flags = MCPG_MOD_INLINE_SAFE | MCPG_MOD_OWNS_THREADS, .config = tb_fields,
    .config_size = sizeof(tb_config), .lifecycle = &tb_lifecycle, .ops = &tb_ops};

/* ---- the test identity stage --------------------------------------------- */

typedef struct ti {
    const mcpg_host *host;
    mcpg_instance *self;
} ti;

static int ti_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **out) {
    (void)config;
    ti *t = host->calloc(1, sizeof *t);
    if (!t) return MCPG_ENOMEM;
    t->host = host;
    t->self = self;
    *out = t;
    return 0;
}

static void ti_destroy(void *inst) {
    ti *t = inst;
    t->host->free(t);
}

static mcpg_status ti_authenticate(void *inst, mcpg_call *call) {
    ti *t = inst;
    const mcpg_host *h = t->host;
    size_t n;
    const char *auth = h->call_header(call, "authorization", &n);
    void **slot = h->call_slot(call, t->self);
    if (slot) *slot = t; /* proves the per-call slot is ours and writable */
    if (!auth) return MCPG_CONTINUE; /* pass: the next identity may know */
    if (n == 9 && memcmp(auth, "Bearer ok", 9) == 0) {
        h->call_set_identity(call, "alice", "t1", "admin,dev");
        return MCPG_CONTINUE;
    }
    h->call_error(call, MCPG_RPC_INVALID_REQUEST, "bad token", NULL);
    h->call_set_http(call, 401, 0);
    return MCPG_DENY;
}

static const mcpg_lifecycle_ops ti_lifecycle = {.size = sizeof(mcpg_lifecycle_ops),
                                                .version = 1, .create = ti_create,
                                                .destroy = ti_destroy};
static const mcpg_identity_ops ti_ops = {MCPG_OPS_HEAD(mcpg_identity_ops),
                                         .authenticate = ti_authenticate};
static const mcpg_module ti_module = {
    .magic = MCPG_MODULE_MAGIC, .abi_major = MCPG_ABI_MAJOR, .abi_minor = MCPG_ABI_MINOR,
    .size = sizeof(mcpg_module), .kind = MCPG_KIND_IDENTITY, .name = "identity_t",
    .version = "1", .build_id = "test", .lifecycle = &ti_lifecycle, .ops = &ti_ops};

/* ---- tests ---------------------------------------------------------------- */

static void test_descriptors(mcpg_fakehost *fh) {
    mcpg_module bad = tb_module;
    mcpg_instance *inst;
    bad.magic = 0x12345678u;
    MCPG_CHECK(mcpg_fakehost_load(fh, &bad, "x", NULL, &inst) == MCPG_EABI && !inst, "bad magic");
    bad = tb_module;
    bad.abi_major = MCPG_ABI_MAJOR + 1;
    MCPG_CHECK(mcpg_fakehost_load(fh, &bad, "x", NULL, &inst) == MCPG_EABI, "wrong major");
    bad = tb_module;
    bad.abi_minor = MCPG_ABI_MINOR + 1;
    MCPG_CHECK(mcpg_fakehost_check(fh, &bad, NULL) == MCPG_EABI, "newer minor");
    mcpg_backend_ops no_call = tb_ops;
    no_call.call_tool = NULL;
    bad = tb_module;
    bad.ops = &no_call;
    MCPG_CHECK(mcpg_fakehost_load(fh, &bad, "x", NULL, &inst) == MCPG_EABI, "missing mandatory op");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "mandatory op backend.call_tool is missing"),
               "the log names the op");
    mcpg_backend_ops small = tb_ops;
    small.size = 8;
    bad.ops = &small;
    MCPG_CHECK(mcpg_fakehost_load(fh, &bad, "x", NULL, &inst) == MCPG_EABI, "ops table too small");
    MCPG_CHECK(mcpg_fakehost_load(fh, &tb_module, "bad name!", NULL, &inst) == MCPG_EINVAL,
               "instance name");
    /* A schema outside config_size is refused as the kernel's loader does;
     * before, the fake host parsed it and wrote past the struct it allocated. */
    bad = tb_module;
    bad.config_size = offsetof(tb_config, work_items); /* the last field sticks out */
    MCPG_CHECK(mcpg_fakehost_load(fh, &bad, "x", "{\"work_items\":3}", &inst) == MCPG_EABI &&
                   !inst,
               "config field outside config_size");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "\"work_items\"") &&
                   mcpg_fakehost_log_contains(fh, "lies outside config_size"),
               "the log names the field: %s", mcpg_fakehost_log_text(fh));
    static const mcpg_config_field odd_fields[] = {
        {"odd", 99, 0, 0, NULL, 0, 0, NULL, "a type no kernel knows"}, MCPG_CONFIG_END};
    bad = tb_module;
    bad.config = odd_fields;
    MCPG_CHECK(mcpg_fakehost_check(fh, &bad, NULL) == MCPG_EABI, "unknown field type");
}

static void test_config(mcpg_fakehost *fh) {
    MCPG_CHECK(mcpg_fakehost_check(fh, &tb_module, "{\"greting\":\"x\"}") == MCPG_ECONFIG, "typo");
    MCPG_CHECK(strstr(mcpg_fakehost_report_text(fh), "did you mean \"greeting\"") != NULL,
               "did-you-mean in: %s", mcpg_fakehost_report_text(fh));
    MCPG_CHECK(mcpg_fakehost_check(fh, &tb_module, "{\"greeting\":\"\"}") == MCPG_ECONFIG, "empty");
    MCPG_CHECK(strstr(mcpg_fakehost_report_text(fh), "greeting: must not be empty") != NULL &&
                   mcpg_fakehost_report_count(fh) == 1,
               "validate's report: %s", mcpg_fakehost_report_text(fh));
    MCPG_CHECK(mcpg_fakehost_check(fh, &tb_module, "{\"work_items\":65}") == MCPG_ECONFIG,
               "bounds");
    MCPG_CHECK(mcpg_fakehost_check(fh, &tb_module, NULL) == 0 &&
                   mcpg_fakehost_report_count(fh) == 0,
               "defaults are valid");
}

static void test_host_table(mcpg_fakehost *fh) {
    mcpg_host *h = mcpg_fakehost_host(fh);
    MCPG_CHECK(h->size == sizeof(mcpg_host) && h->abi_major == MCPG_ABI_MAJOR, "table head");
    MCPG_CHECK(h->worker_count() == 1 && h->worker_at(0) == mcpg_fakehost_worker(fh) &&
                   h->worker_at(1) == NULL, "one worker");
    MCPG_CHECK(h->worker_current() == mcpg_fakehost_worker(fh), "this thread is the loop thread");
    MCPG_CHECK(h->worker_uv_loop(h->worker_at(0)) != NULL, "a real uv loop");
    MCPG_CHECK(!strcmp(h->errname(MCPG_EAGAIN), "MCPG_EAGAIN"), "errname");
    uint32_t size = h->size;
    h->size = (uint32_t)offsetof(mcpg_host, call_submit); /* play an older kernel */
    MCPG_CHECK(!MCPG_HOST_HAS(h, call_resume) && MCPG_HOST_HAS(h, json_int64), "MCPG_HOST_HAS");
    h->size = size;
}

static int post_ran;
static void on_post(void *arg) { *(int *)arg += 1; }
static void *poster(void *arg) {
    mcpg_fakehost *fh = arg;
    static mcpg_post node = {NULL, on_post, &post_ran};
    mcpg_fakehost_host(fh)->worker_post(mcpg_fakehost_worker(fh), &node);
    return NULL;
}
static int posted(void *arg) { return *(int *)arg > 0; }

static void test_post_from_thread(mcpg_fakehost *fh) {
    pthread_t t;
    pthread_create(&t, NULL, poster, fh);
    pthread_join(t, NULL);
    MCPG_CHECK(mcpg_fakehost_run_until(fh, posted, &post_ran, 2000) == 0 && post_ran == 1,
               "a post from another thread runs on the loop");
}

static mcpg_call *greet(mcpg_fakehost *fh, const char *mode) {
    char args[96];
    snprintf(args, sizeof args, "{\"who\":\"bob\",\"mode\":\"%s\"}", mode);
    return mcpg_fakehost_call_new(fh, "tools/call", "greet", args, "7");
}

static void expect_greeting(mcpg_fakehost *fh, mcpg_instance *inst, const char *mode,
                            int inline_on) {
    mcpg_fakehost_set_inline(inst, inline_on);
    mcpg_call *c = greet(fh, mode);
    int st = mcpg_fakehost_run(fh, inst, c, 5000);
    MCPG_CHECK(st == MCPG_CONTINUE, "mode %s inline %d: status %d", mode, inline_on, st);
    const char *r = mcpg_fakehost_result(c);
    MCPG_REQUIRE(r && strstr(r, "\"text\":\"hi, bob\""), "mode %s: result %s", mode,
                 r ? r : "(null)");
    MCPG_CHECK(mcpg_json_validate(r, strlen(r)) == 0, "mode %s: result is JSON", mode);
    mcpg_fakehost_call_free(fh, c);
}

static void test_backend(mcpg_fakehost *fh) {
    mcpg_instance *inst;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tb_module, "b1", "{\"greeting\":\"hi\"}", &inst) == 0,
                 "load");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "[backend:backend_t:b1] info: started, greeting hi"),
               "stamped log: %s", mcpg_fakehost_log_text(fh));
    tb *t = mcpg_fakehost_state(inst);
    MCPG_CHECK(((const tb_config *)mcpg_fakehost_config(inst))->greeting == t->cfg->greeting,
               "config");

    mcpg_buf list = {0};
    MCPG_CHECK(mcpg_fakehost_list(fh, inst, MCPG_METHOD_TOOLS_LIST, &list) == 0 &&
                   strstr(list.data, "\"greet\""), "list_tools");
    MCPG_CHECK(mcpg_fakehost_list(fh, inst, MCPG_METHOD_PROMPTS_LIST, &list) == MCPG_ENOTSUP,
               "no list_prompts");
    mcpg_buf_free(&list);

    expect_greeting(fh, inst, "sync", 0);
    MCPG_CHECK(t->ran_off_loop, "not inline: call_tool ran on a pool thread");
    expect_greeting(fh, inst, "sync", 1);
    MCPG_CHECK(!t->ran_off_loop, "inline: call_tool ran on the loop");
    const char *modes[] = {"timer", "thread", "early"};
    for (int inl = 0; inl < 2; inl++)
        for (size_t i = 0; i < 3; i++) expect_greeting(fh, inst, modes[i], inl);
    expect_greeting(fh, inst, "pool", 1); /* work_submit: on the loop thread only */

    mcpg_fakehost_set_inline(inst, 1);
    mcpg_call *c = greet(fh, "early");
    MCPG_CHECK(mcpg_fakehost_dispatch(fh, inst, c) == MCPG_CONTINUE,
               "a resume before PENDING settles");
    mcpg_fakehost_call_free(fh, c);

    c = greet(fh, "slow");
    MCPG_CHECK(mcpg_fakehost_dispatch(fh, inst, c) == MCPG_PENDING, "slow is pending");
    MCPG_CHECK(mcpg_fakehost_dispatch(fh, inst, c) == MCPG_ESTATE, "one op at a time");
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 20) == MCPG_ETIMEDOUT, "wait times out");
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_CONTINUE, "then the answer comes");
    mcpg_fakehost_call_free(fh, c);

    /* call_cancel reaches the backend's cancel op only for a call held on the
     * loop (inline), as in the kernel; before, it was also called while the op
     * ran on a pool thread */
    const mcpg_host *h = mcpg_fakehost_host(fh);
    for (int inl = 0; inl < 2; inl++) {
        mcpg_fakehost_set_inline(inst, inl);
        cancels = 0;
        c = greet(fh, "slow");
        MCPG_CHECK(mcpg_fakehost_dispatch(fh, inst, c) == MCPG_PENDING, "slow is pending");
        h->call_cancel(c);
        MCPG_CHECK(h->call_cancelled(c) == 1, "the call knows it was cancelled");
        MCPG_CHECK(cancels == inl, "inline %d: cancel() called %d times", inl, cancels);
        MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_CONTINUE, "it still answers");
        mcpg_fakehost_call_free(fh, c);
    }
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void test_backend_errors(mcpg_fakehost *fh) {
    mcpg_instance *inst;
    mcpg_call_outcome o;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tb_module, "b2", NULL, &inst) == 0, "load");
    mcpg_fakehost_set_inline(inst, 1);
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "fail", NULL, NULL);
    MCPG_CHECK(mcpg_fakehost_run(fh, inst, c, 1000) == MCPG_DENY, "fail denies");
    mcpg_fakehost_outcome(c, &o);
    MCPG_CHECK(o.is_error && o.error_code == MCPG_RPC_INVALID_PARAMS &&
                   !strcmp(o.error_message, "bad arguments") && o.error_data &&
                   !strcmp(o.error_data, "{\"field\":\"who\"}") && !mcpg_fakehost_result(c),
               "the error as set");
    mcpg_fakehost_call_free(fh, c);

    c = mcpg_fakehost_call_new(fh, "tools/call", "deny_bare", NULL, NULL);
    MCPG_CHECK(mcpg_fakehost_run(fh, inst, c, 1000) == MCPG_DENY, "bare deny");
    MCPG_CHECK(mcpg_fakehost_error_code(c) == MCPG_RPC_INTERNAL_ERROR &&
                   !strcmp(mcpg_fakehost_error_message(c), "backend failed"),
               "the kernel's default");
    mcpg_fakehost_call_free(fh, c);

    c = mcpg_fakehost_call_new(fh, "resources/read", "file:///x", NULL, NULL);
    MCPG_CHECK(mcpg_fakehost_dispatch(fh, inst, c) == MCPG_ENOTSUP, "no read_resource");
    size_t n;
    MCPG_CHECK(!strcmp(mcpg_fakehost_host(fh)->call_params(c, &n), "{\"uri\":\"file:///x\"}"),
               "params");
    mcpg_fakehost_call_free(fh, c);

    MCPG_CHECK(mcpg_fakehost_failures(fh) == 0, "no failures yet");
    c = greet(fh, "twice");
    mcpg_fakehost_run(fh, inst, c, 1000);
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 1, "a second resume is caught");
    mcpg_fakehost_call_free(fh, c);
    c = mcpg_fakehost_call_new(fh, "tools/call", "bogus_status", NULL, NULL);
    MCPG_CHECK(mcpg_fakehost_run(fh, inst, c, 1000) == MCPG_DENY, "a bogus status becomes DENY");
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 1, "and is caught");
    mcpg_fakehost_call_free(fh, c);
    MCPG_CHECK(mcpg_fakehost_set_inline(inst, 1) == 0, "inline-safe module");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void test_identity(mcpg_fakehost *fh) {
    mcpg_instance *id1, *id2;
    const mcpg_host *h = mcpg_fakehost_host(fh);
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &ti_module, "id1", NULL, &id1) == 0, "load id1");
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &ti_module, "id2", "{}", &id2) == 0, "load id2");
    MCPG_CHECK(mcpg_fakehost_load(fh, &ti_module, "id3", "{\"x\":1}", &(mcpg_instance *){0}) ==
                   MCPG_ECONFIG, "a module without keys refuses any");
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/list", NULL, NULL, NULL);
    MCPG_CHECK(mcpg_fakehost_run(fh, id1, c, 1000) == MCPG_CONTINUE && !h->call_principal(c),
               "no header: pass");
    mcpg_fakehost_call_set_header(c, "authorization", "Bearer ok");
    MCPG_CHECK(mcpg_fakehost_run(fh, id2, c, 1000) == MCPG_CONTINUE, "accepted");
    MCPG_CHECK(!strcmp(h->call_principal(c), "alice") && !strcmp(h->call_roles(c), "admin,dev"),
               "identity set");
    void **s1 = h->call_slot(c, (mcpg_instance *)id1), **s2 = h->call_slot(c, id2);
    MCPG_CHECK(s1 && s2 && s1 != s2 && *s1 == mcpg_fakehost_state(id1) &&
                   *s2 == mcpg_fakehost_state(id2), "per-instance slots");
    mcpg_fakehost_call_free(fh, c);

    c = mcpg_fakehost_call_new(fh, "tools/call", "x", NULL, NULL);
    mcpg_fakehost_call_set_header(c, "authorization", "Bearer nope");
    MCPG_CHECK(mcpg_fakehost_run(fh, id1, c, 1000) == MCPG_DENY, "refused");
    mcpg_call_outcome o;
    mcpg_fakehost_outcome(c, &o);
    MCPG_CHECK(o.is_error && o.http_status == 401 && !strcmp(o.error_message, "bad token"), "401");
    mcpg_fakehost_call_free(fh, c);
    mcpg_fakehost_unload(fh, id1);
    mcpg_fakehost_unload(fh, id2);
}

/* ---- the transport's side ---- */

typedef struct tctx {
    int completed;
    mcpg_call_outcome o;
    char result[512];
} tctx;

static void t_complete(void *ctx, mcpg_call *call) {
    tctx *t = ctx;
    t->completed++;
    mcpg_fakehost_outcome(call, &t->o);
    if (t->o.result)
        snprintf(t->result, sizeof t->result, "%.*s", (int)t->o.result_len, t->o.result);
}

static int completed(void *arg) { return ((tctx *)arg)->completed > 0; }

static mcpg_call *submit(mcpg_fakehost *fh, const char *method, const char *name,
                         const char *args, tctx *t) {
    mcpg_call_desc d = {.size = sizeof d, .wire = MCPG_WIRE_STATELESS};
    d.method = method;
    d.method_len = strlen(method);
    d.name = name;
    d.name_len = name ? strlen(name) : 0;
    d.args_json = args;
    d.args_len = args ? strlen(args) : 0;
    d.id_json = "\"a\"";
    d.id_len = 3;
    d.transport_ctx = t;
    d.complete = t_complete;
    mcpg_call *c = NULL;
    const mcpg_host *h = mcpg_fakehost_host(fh);
    MCPG_CHECK(h->call_submit(h->worker_current(), &d, &c) == 0 && c, "submit %s", method);
    return c;
}

static void test_transport_side(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_instance *be;
    MCPG_CHECK(mcpg_fakehost_load(fh, &tb_module, "routed", NULL, &be) == 0, "load");
    mcpg_fakehost_route(fh, be);

    tctx t = {0};
    mcpg_call *c = submit(fh, "tools/list", NULL, NULL, &t);
    MCPG_CHECK(t.completed == 1 && strstr(t.result, "{\"tools\":[{\"name\":\"greet\""), "list: %s",
               t.result);
    h->call_release(c);

    memset(&t, 0, sizeof t);
    c = submit(fh, "tools/call", "greet", "{\"who\":\"ann\"}", &t);
    MCPG_CHECK(t.completed == 0, "on the pool: not complete yet");
    MCPG_CHECK(mcpg_fakehost_run_until(fh, completed, &t, 5000) == 0 && t.completed == 1 &&
                   strstr(t.result, "hello, ann"), "completed later: %s", t.result);
    h->call_release(c);

    memset(&t, 0, sizeof t);
    c = submit(fh, "prompts/get", "p", NULL, &t);
    MCPG_CHECK(t.completed == 1 && t.o.is_error && t.o.error_code == MCPG_RPC_METHOD_NOT_FOUND,
               "no get_prompt: method not found");
    h->call_release(c);
    mcpg_fakehost_unload(fh, be);
}

/* ---- lifecycle: what unload and free catch ---- */

static void test_unload_checks(mcpg_fakehost *fh) {
    mcpg_instance *inst;
    MCPG_CHECK(mcpg_fakehost_load(fh, &tb_module, "leaky", "{\"leak_timer\":true}", &inst) == 0,
               "load");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == MCPG_ESTATE, "a timer left running is reported");
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 1, "as one failure");

    destroyed_with_work_outstanding = 0;
    MCPG_CHECK(mcpg_fakehost_load(fh, &tb_module, "busy", "{\"work_items\":6}", &inst) == 0,
               "load");
    work_ran = work_cancelled = 0;
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload with queued work");
    MCPG_CHECK(!destroyed_with_work_outstanding, "every done() ran before destroy");
    MCPG_CHECK(work_ran + work_cancelled == 6 && work_cancelled > 0, "ran %d, cancelled %d",
               work_ran, work_cancelled);
}

static int work_status = 1;
static void w_block(void *arg) {
    (void)arg;
    sleep_ms(100);
}
static void w_noop(void *arg) { (void)arg; }
static void w_done(void *arg, int status) { *(int *)arg = status; }
static int w_block_status = 1;
static int both_done(void *arg) {
    (void)arg;
    return work_status != 1 && w_block_status != 1;
}

static void test_work_timeout(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_worker *w = h->worker_current();
    /* The pool has one thread (UV_THREADPOOL_SIZE=1): the first job holds it,
     * so the second waits past its 10 ms and must never start. */
    MCPG_CHECK(h->work_submit(NULL, w, 0, w_block, w_done, &w_block_status) == 0, "submit");
    MCPG_CHECK(h->work_submit(NULL, w, 10, w_noop, w_done, &work_status) == 0, "submit");
    MCPG_CHECK(mcpg_fakehost_run_until(fh, both_done, NULL, 5000) == 0, "both done");
    MCPG_CHECK(w_block_status == 0 && work_status == MCPG_ETIMEDOUT, "statuses %d %d",
               w_block_status, work_status);
}

/* A second fake host, after the first is gone, that is left untidy on
 * purpose: free must say so. */
static void test_free_reports(void) {
    mcpg_fakehost *fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh != NULL, "a new fake host once the old one is freed");
    mcpg_fakehost_set_quiet(fh, 1);
    mcpg_instance *inst;
    MCPG_CHECK(mcpg_fakehost_load(fh, &ti_module, "left", NULL, &inst) == 0, "load");
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/list", NULL, NULL, NULL);
    (void)c; /* neither freed nor unloaded */
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 2, "an instance and a call left: %d problems", problems);
}

static void test_threads_off_loop(mcpg_fakehost *fh);

int main(void) {
    setenv("UV_THREADPOOL_SIZE", "1", 1); /* before libuv's pool starts */
    mcpg_fakehost *fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh != NULL, "new");
    MCPG_CHECK(mcpg_fakehost_new() == NULL, "only one fake host at a time");
    mcpg_fakehost_set_quiet(fh, getenv("MCPG_TEST_VERBOSE") == NULL);
    test_descriptors(fh);
    test_config(fh);
    test_host_table(fh);
    test_post_from_thread(fh);
    test_backend(fh);
    test_backend_errors(fh);
    test_identity(fh);
    test_transport_side(fh);
    test_unload_checks(fh);
    test_work_timeout(fh);
    test_threads_off_loop(fh);
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "free: %d problem(s)", problems);
    test_free_reports();
    return MCPG_CHECK_EXIT("test_fakehost");
}

/* Loop-thread-only slots called from another thread are module bugs. */
static void *off_loop(void *arg) {
    mcpg_fakehost *fh = arg;
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_timer *t = NULL;
    int rc = h->timer_start(NULL, h->worker_at(0), 10, 0, tb_tick, NULL, &t);
    return (void *)(intptr_t)rc;
}

static void test_threads_off_loop(mcpg_fakehost *fh) {
    pthread_t th;
    void *rc;
    pthread_create(&th, NULL, off_loop, fh);
    pthread_join(th, &rc);
    MCPG_CHECK((intptr_t)rc == MCPG_ESTATE, "timer_start off the loop refused");
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 1, "and counted");
}
