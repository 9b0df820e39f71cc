/* Unit tests of the fake host (sdk/src/fakehost*.c), driven by small
 * modules defined here: a backend whose tools answer in every way the ABI
 * allows (at once, from a timer, from its own thread, from the pool, resumed
 * before returning), an identity stage, an audit sink and a transport. Plus
 * deliberately broken descriptors and misbehaviours the fake host must
 * catch, and the points where it must behave as the kernel does: call
 * handles, a DENY without an error, cancel, optional ops, sized structs.
 *
 * It reads call handles with lib/hostcore/handshake.h, which the kernel and the
 * fake host share. */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "handshake.h"

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
    mcpg_call *last_call;    /* the handle the last call_tool was given */
    int saw_cancelled;       /* what call_cancelled said inside the last "block" */
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

/* "block": hold the pool thread until the test says go, so it can act while
 * the op is running (not pending). */
static atomic_int block_entered, block_go;

static mcpg_status tb_block(tb *t, mcpg_call *call) {
    atomic_store(&block_entered, 1);
    while (!atomic_load(&block_go)) sleep_ms(1);
    t->saw_cancelled = t->host->call_cancelled(call);
    return tb_answer(t, call) ? MCPG_DENY : MCPG_CONTINUE;
}

static mcpg_status tb_call_tool(void *inst, mcpg_call *call) {
    tb *t = inst;
    const mcpg_host *h = t->host;
    t->last_call = call;
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
    if (strcmp(m, "block") == 0) return tb_block(t, call);
    if (strcmp(m, "early") == 0 || strcmp(m, "twice") == 0) {
        tb_answer(t, call);
        h->call_resume(call, MCPG_CONTINUE); /* before returning PENDING: allowed */
        if (strcmp(m, "twice") == 0) h->call_resume(call, MCPG_CONTINUE); /* a bug */
        return MCPG_PENDING;
    }
    return tb_async(t, call, m);
}

static int worker_starts, worker_stops;

static void tb_worker_start(void *inst, mcpg_worker *w) {
    (void)inst;
    (void)w;
    worker_starts++;
}

static void tb_worker_stop(void *inst, mcpg_worker *w) {
    (void)inst;
    (void)w;
    worker_stops++;
}

static const mcpg_lifecycle_ops tb_lifecycle = {
    .size = sizeof(mcpg_lifecycle_ops), .version = 1, .validate = tb_validate,
    .create = tb_create, .start = tb_start, .stop = tb_stop, .destroy = tb_destroy,
    .worker_start = tb_worker_start, .worker_stop = tb_worker_stop};
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

static mcpg_call *ti_held; /* "Bearer later": the handle, for the test to resume */

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
    if (n == 11 && memcmp(auth, "Bearer bare", 11) == 0) return MCPG_DENY; /* a bug, on purpose */
    if (n == 12 && memcmp(auth, "Bearer later", 12) == 0) {
        ti_held = call;
        return MCPG_PENDING;
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

/* ---- the test audit sink: refuses, later, without saying why (a bug) ------ */

typedef struct ta {
    const mcpg_host *host;
    mcpg_post post;
    mcpg_call *call;
} ta;

static int ta_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **out) {
    (void)self;
    (void)config;
    ta *a = host->calloc(1, sizeof *a);
    if (!a) return MCPG_ENOMEM;
    a->host = host;
    *out = a;
    return 0;
}

static void ta_destroy(void *inst) {
    ta *a = inst;
    a->host->free(a);
}

static void ta_refuse(void *arg) {
    ta *a = arg;
    a->host->call_resume(a->call, MCPG_DENY); /* no call_error first */
}

static mcpg_status ta_emit(void *inst, mcpg_call *call, const mcpg_audit_event *ev) {
    ta *a = inst;
    (void)ev;
    a->call = call;
    a->post.fn = ta_refuse;
    a->post.arg = a;
    a->host->worker_post(a->host->call_worker(call), &a->post);
    return MCPG_PENDING;
}

static const mcpg_lifecycle_ops ta_lifecycle = {.size = sizeof(mcpg_lifecycle_ops),
                                                .version = 1, .create = ta_create,
                                                .destroy = ta_destroy};
static const mcpg_audit_ops ta_ops = {MCPG_OPS_HEAD(mcpg_audit_ops), .emit = ta_emit};
static const mcpg_module ta_module = {
    .magic = MCPG_MODULE_MAGIC, .abi_major = MCPG_ABI_MAJOR, .abi_minor = MCPG_ABI_MINOR,
    .size = sizeof(mcpg_module), .kind = MCPG_KIND_AUDIT, .name = "audit_t",
    .version = "1", .build_id = "test", .lifecycle = &ta_lifecycle, .ops = &ta_ops};

/* ---- the test transport: one call per connection, its answer written back -- */

typedef struct tt {
    const mcpg_host *host;
    int open, adopted, draining;
    int news;              /* news op calls */
    char last_news[160];   /* "method uri" of the last */
} tt;

typedef struct tt_conn {
    tt *t;
    int fd;
    mcpg_call_desc d;
} tt_conn;

static int tt_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **out) {
    (void)self;
    (void)config;
    tt *t = host->calloc(1, sizeof *t);
    if (!t) return MCPG_ENOMEM;
    t->host = host;
    *out = t;
    return 0;
}

static void tt_destroy(void *inst) {
    tt *t = inst;
    t->host->free(t);
}

/* The answer's text, then the connection closes. */
static void tt_complete(void *ctx, mcpg_call *call) {
    tt_conn *k = ctx;
    const mcpg_host *h = k->t->host;
    mcpg_call_outcome o = {.size = sizeof o};
    h->call_outcome(call, &o);
    const char *text = o.is_error ? o.error_message : o.result;
    ssize_t w = write(k->fd, text, strlen(text));
    (void)w;
    close(k->fd);
    h->call_release(call);
    k->t->open--;
    h->free(k);
}

/* The name of the one tool called is the connection's number: "c1", "c2"... */
static int tt_adopt(void *inst, mcpg_worker *w, int fd) {
    static const char *const names[] = {"c1", "c2", "c3", "c4"};
    tt *t = inst;
    if (t->draining) return MCPG_EUNAVAIL;
    tt_conn *k = t->host->calloc(1, sizeof *k);
    if (!k) return MCPG_ENOMEM;
    k->t = t;
    k->fd = fd;
    k->d = (mcpg_call_desc){.size = sizeof k->d, .wire = MCPG_WIRE_STATELESS,
                            .method = "tools/call", .method_len = 10, .id_json = "1",
                            .id_len = 1, .transport_ctx = k, .complete = tt_complete};
    k->d.name = names[t->adopted++ % 4];
    k->d.name_len = 2;
    mcpg_call *c;
    t->open++;
    int rc = t->host->call_submit(w, &k->d, &c);
    if (rc) {
        t->open--;
        t->host->free(k);
    }
    return rc;
}

static void tt_drain(void *inst, mcpg_worker *w) {
    (void)w;
    ((tt *)inst)->draining = 1;
}

static uint32_t tt_conn_count(void *inst, mcpg_worker *w) {
    (void)w;
    return (uint32_t)((tt *)inst)->open;
}

static const mcpg_lifecycle_ops tt_lifecycle = {.size = sizeof(mcpg_lifecycle_ops),
                                                .version = 1, .create = tt_create,
                                                .destroy = tt_destroy};
/* News outside any call: counted, the last one kept. */
static void tt_news(void *inst, mcpg_worker *w, const char *method, const char *uri,
                    size_t uri_len) {
    tt *t = inst;
    (void)w;
    t->news++;
    snprintf(t->last_news, sizeof t->last_news, "%s %.*s", method, (int)(uri ? uri_len : 0),
             uri ? uri : "");
}

static const mcpg_transport_ops tt_ops = {MCPG_OPS_HEAD(mcpg_transport_ops),
                                          .conn_adopt = tt_adopt, .drain = tt_drain,
                                          .conn_count = tt_conn_count, .news = tt_news};
static const mcpg_module tt_module = {
    .magic = MCPG_MODULE_MAGIC, .abi_major = MCPG_ABI_MAJOR, .abi_minor = MCPG_ABI_MINOR,
    .size = sizeof(mcpg_module), .kind = MCPG_KIND_TRANSPORT, .name = "transport_t",
    .version = "1", .build_id = "test", .lifecycle = &tt_lifecycle, .ops = &tt_ops};

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
        {.key = "odd", .type = 99, .help = "a type no kernel knows",
         .size = sizeof(mcpg_config_field)},
        MCPG_CONFIG_END};
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

/* The helpers a module's test uses instead of writing its own. */
static void test_helpers(mcpg_fakehost *fh) {
    mcpg_instance *inst = mcpg_fakehost_load_or_exit(fh, &tb_module, "helpers", "{\"greeting\":\"hi\"}");
    int64_t code = -1;
    char msg[64] = "x";
    int is_error = -1;
    char *result = mcpg_fakehost_call_tool(fh, inst, "greet", "{\"who\":\"a\\\"b\"}", 5000, &code,
                                           msg, sizeof msg);
    char *text = result ? mcpg_fakehost_result_text(result, &is_error) : NULL;
    MCPG_CHECK(text && strcmp(text, "hi, a\"b") == 0 && is_error == 0, "call_tool: %s",
               result ? result : "(none)");
    MCPG_CHECK(code == 0 && msg[0] == '\0', "no error: %lld %s", (long long)code, msg);
    free(text);
    free(result);
    result = mcpg_fakehost_call_tool(fh, inst, "fail", "{}", 5000, &code, msg, sizeof msg);
    MCPG_CHECK(!result && code == MCPG_RPC_INVALID_PARAMS && strcmp(msg, "bad arguments") == 0,
               "an error: %lld %s", (long long)code, msg);
    MCPG_CHECK(mcpg_fakehost_failures(fh) == 0, "an error is an answer");
    result = mcpg_fakehost_call_tool(fh, inst, "bogus_status", "{}", 5000, &code, NULL, 0);
    MCPG_CHECK(!result && mcpg_fakehost_take_failures(fh) >= 1, "no answer is a failure");
    MCPG_CHECK(!mcpg_fakehost_result_text("{\"content\":[{\"type\":\"image\",\"text\":\"x\"}]}", NULL),
               "only a text item has text");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");

    char path[] = "/tmp/fakehost-helpers-XXXXXX";
    int fd = mkstemp(path);
    MCPG_REQUIRE(fd >= 0, "mkstemp");
    close(fd);
    char back[16] = {0};
    FILE *f = mcpg_fakehost_write_file(path, "written") == 0 ? fopen(path, "r") : NULL;
    MCPG_CHECK(f && fgets(back, sizeof back, f) && strcmp(back, "written") == 0, "write_file");
    if (f) fclose(f);
    unlink(path);
    MCPG_CHECK(mcpg_fakehost_write_file("/nonexistent-dir/x", "x") == -1, "write_file refused");
    uint64_t t0 = mcpg_fakehost_now_ms();
    MCPG_CHECK(mcpg_fakehost_now_ms() >= t0 && mcpg_fakehost_now_s() * 1e3 + 1 >= (double)t0,
               "monotonic clocks");
}

/* The greeting's call_tool ran off the loop (on a pool thread) when the
 * instance is left at its module's default dispatch. */
static int ran_off_loop_by_default(mcpg_fakehost *fh, const mcpg_module *m, int set, int on) {
    mcpg_instance *inst;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, m, "dflt", "{\"greeting\":\"hi\"}", &inst) == 0, "load");
    if (set) mcpg_fakehost_set_inline(inst, on);
    mcpg_call *c = greet(fh, "sync");
    MCPG_CHECK(mcpg_fakehost_run(fh, inst, c, 5000) == MCPG_CONTINUE, "greeting");
    mcpg_fakehost_call_free(fh, c);
    int off = ((tb *)mcpg_fakehost_state(inst))->ran_off_loop;
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    return off;
}

/* As a manifest entry without "inline_dispatch": a backend that declares
 * MCPG_MOD_NEVER_BLOCKS runs on the loop, one that does not on the pool;
 * set_inline(0) is "inline_dispatch": false. */
static void test_inline_default(mcpg_fakehost *fh) {
    MCPG_CHECK(ran_off_loop_by_default(fh, &tb_module, 0, 0), "inline-safe only: the pool");
    mcpg_module never = tb_module;
    never.flags |= MCPG_MOD_NEVER_BLOCKS;
    MCPG_CHECK(!ran_off_loop_by_default(fh, &never, 0, 0), "never blocks: the loop");
    MCPG_CHECK(ran_off_loop_by_default(fh, &never, 1, 0), "never blocks, set_inline 0: the pool");
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
    /* the transport's slots refuse the backend's handle, as the kernel does */
    tb *st = mcpg_fakehost_state(be);
    mcpg_fakehost_set_quiet(fh, 1);
    h->call_release(st->last_call);
    mcpg_fakehost_set_quiet(fh, 0);
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 1 &&
                   mcpg_fakehost_log_contains(fh, "call_release is the transport's"),
               "call_release with the backend's handle: refused, counted as a module bug");
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

/* ---- as the kernel: call handles ---- */

/* Every op gets the handle of its stage and of the call's life; the test's
 * own handle is the transport's. */
static void test_handle_stages(mcpg_fakehost *fh) {
    mcpg_instance *be, *id;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tb_module, "hs", NULL, &be) == 0, "load backend");
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &ti_module, "hid", NULL, &id) == 0, "load identity");
    tb *t = mcpg_fakehost_state(be);
    for (int inl = 0; inl < 2; inl++) {
        mcpg_fakehost_set_inline(be, inl);
        mcpg_call *c = greet(fh, "sync");
        MCPG_CHECK(call_handle_stage(c) == CALL_STAGE_TRANSPORT && call_handle_serial(c) != 0,
                   "the test's handle: the transport's stage, a live serial");
        MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE, "run");
        MCPG_CHECK(call_handle_stage(t->last_call) == CALL_STAGE_BACKEND &&
                       call_handle_object(t->last_call) == call_handle_object(c) &&
                       call_handle_serial(t->last_call) == call_handle_serial(c),
                   "inline %d: call_tool got the backend's handle of this life", inl);
        mcpg_fakehost_call_free(fh, c);
    }
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "greet", NULL, NULL);
    mcpg_fakehost_call_set_header(c, "authorization", "Bearer later");
    MCPG_CHECK(mcpg_fakehost_dispatch(fh, id, c) == MCPG_PENDING, "identity pending");
    MCPG_CHECK(call_handle_stage(ti_held) == CALL_STAGE_IDENTITY &&
                   mcpg_fakehost_op_call(id, c) == ti_held,
               "authenticate got the identity stage's handle (as op_call says)");
    mcpg_fakehost_host(fh)->call_resume(ti_held, MCPG_CONTINUE);
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 1000) == MCPG_CONTINUE, "resumed");
    mcpg_fakehost_call_free(fh, c);
    mcpg_fakehost_unload(fh, be);
    mcpg_fakehost_unload(fh, id);
}

/* Every slot refuses a handle whose call has ended, whether or not the
 * object was reused since, answering as fits the slot and counting a
 * failure each time. */
static void expect_stale(mcpg_fakehost *fh, mcpg_call *old, const char *when) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    size_t n = 99;
    mcpg_call_outcome o;
    memset(&o, 0x5a, sizeof o);
    o.size = sizeof o;
    MCPG_CHECK(h->call_target(old) == NULL && h->call_worker(old) == NULL &&
                   h->call_method(old) == 0 && h->call_principal(old) == NULL,
               "%s: getters answer nothing", when);
    MCPG_CHECK(h->call_args(old, &n) == NULL && n == 0, "%s: call_args", when);
    MCPG_CHECK(h->call_result_buf(old) == NULL && h->call_slot(old, NULL) == NULL,
               "%s: no buffer, no slot", when);
    MCPG_CHECK(h->call_result(old, "{}", 2) == MCPG_ESTATE &&
                   h->call_error(old, 1, "x", NULL) == MCPG_ESTATE &&
                   h->call_set_identity(old, "p", NULL, NULL) == MCPG_ESTATE,
               "%s: setters refused", when);
    MCPG_CHECK(h->call_cancelled(old) == 0, "%s: not cancelled", when);
    h->call_resume(old, MCPG_CONTINUE);
    h->call_outcome(old, &o);
    MCPG_CHECK(o.is_error == 0x5a5a5a5a, "%s: call_outcome wrote nothing", when);
    h->call_release(old);
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 14, "%s: every slot counted", when);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "stale call handle (module bug)"), "%s: logged",
               when);
}

static void test_stale_handles(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_call *old = greet(fh, "sync");
    uint16_t serial = call_handle_serial(old);
    mcpg_fakehost_call_free(fh, old);
    mcpg_fakehost_log_clear(fh);
    expect_stale(fh, old, "ended");
    /* the object is reused newest-first: its next life has the next serial */
    mcpg_call *c = greet(fh, "sync");
    MCPG_CHECK(call_handle_object(c) == call_handle_object(old) &&
                   call_handle_serial(c) == call_serial_next(serial),
               "the same object, serial %u after %u", call_handle_serial(c), serial);
    expect_stale(fh, old, "reused");
    MCPG_CHECK(!strcmp(h->call_target(c), "greet") && !h->call_cancelled(c),
               "the new call is untouched by the stale handle");
    for (int i = 0; i < 3; i++) { /* the serial moves on at every life, never back */
        serial = call_handle_serial(c);
        mcpg_fakehost_call_free(fh, c);
        c = greet(fh, "sync");
        MCPG_CHECK(call_handle_serial(c) == call_serial_next(serial), "life %d: serial", i);
    }
    mcpg_fakehost_call_free(fh, c);
    MCPG_CHECK(h->call_target(NULL) == NULL && mcpg_fakehost_take_failures(fh) == 1,
               "no handle at all is a failure too");
}

/* A resume finishes only the pending op of its handle's stage. */
static void test_staged_resume(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_instance *id;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &ti_module, "sr", NULL, &id) == 0, "load");
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "x", NULL, NULL);
    mcpg_fakehost_call_set_header(c, "authorization", "Bearer later");
    MCPG_CHECK(mcpg_fakehost_dispatch(fh, id, c) == MCPG_PENDING, "pending");
    MCPG_CHECK(mcpg_fakehost_pending(c), "its op awaits its resume");
    mcpg_fakehost_log_clear(fh);
    h->call_resume(c, MCPG_CONTINUE); /* the transport's handle */
    h->call_resume(call_handle_make(call_handle_object(c), CALL_STAGE_BACKEND,
                                    call_handle_serial(c)),
                   MCPG_CONTINUE);
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 2 &&
                   mcpg_fakehost_log_contains(fh, "call_resume on a call that is not pending"),
               "resumes of other stages are refused");
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 30) == MCPG_ETIMEDOUT, "and finished nothing");
    h->call_resume(ti_held, MCPG_CONTINUE);
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 1000) == MCPG_CONTINUE, "its own stage's does");
    h->call_resume(ti_held, MCPG_CONTINUE);
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 1, "once");
    mcpg_fakehost_call_free(fh, c);
    mcpg_fakehost_unload(fh, id);
}

/* ---- as the kernel: a DENY without an error ---- */

static void expect_bare_deny(mcpg_fakehost *fh, mcpg_call *c, const char *msg) {
    mcpg_call_outcome o;
    mcpg_fakehost_outcome(c, &o);
    MCPG_CHECK(o.is_error && o.error_code == MCPG_RPC_SERVER_ERROR && o.http_status == 503 &&
                   !strcmp(o.error_message, msg),
               "want -32000/503 \"%s\", got %lld/%d \"%s\"", msg, (long long)o.error_code,
               o.http_status, o.is_error ? o.error_message : "");
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 1 &&
                   mcpg_fakehost_log_contains(fh, "answered DENY without host->call_error"),
               "%s: counted and logged", msg);
    mcpg_fakehost_call_free(fh, c);
}

static void test_deny_without_error(mcpg_fakehost *fh) {
    mcpg_instance *be, *id, *au;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tb_module, "bare", NULL, &be) == 0, "load backend");
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &ti_module, "idb", NULL, &id) == 0, "load identity");
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &ta_module, "sink", NULL, &au) == 0, "load audit");
    for (int inl = 0; inl < 2; inl++) {
        mcpg_fakehost_set_inline(be, inl);
        mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "deny_bare", NULL, NULL);
        MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_DENY, "inline %d: denied", inl);
        expect_bare_deny(fh, c, "backend \"bare\" refused without an error (module bug)");
    }
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "x", NULL, NULL);
    mcpg_fakehost_call_set_header(c, "authorization", "Bearer bare");
    MCPG_CHECK(mcpg_fakehost_run(fh, id, c, 1000) == MCPG_DENY, "identity denied");
    expect_bare_deny(fh, c, "identity \"idb\" refused without an error (module bug)");
    c = mcpg_fakehost_call_new(fh, "tools/call", "x", NULL, NULL);
    MCPG_CHECK(mcpg_fakehost_run(fh, au, c, 1000) == MCPG_DENY, "audit refused by a resume");
    expect_bare_deny(fh, c, "audit sink \"sink\" refused without an error (module bug)");
    mcpg_fakehost_unload(fh, be);
    mcpg_fakehost_unload(fh, id);
    mcpg_fakehost_unload(fh, au);
}

/* ---- as the kernel: cancel ---- */

static int op_pending(void *arg) { return mcpg_fakehost_pending(arg); }

/* A pending op is told once, on the loop, whether it runs inline or on the
 * pool; the call answers on its own all the same. */
static void cancel_pending(mcpg_fakehost *fh, mcpg_instance *be, int inl, int want) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_fakehost_set_inline(be, inl);
    cancels = 0;
    mcpg_call *c = greet(fh, "slow");
    MCPG_CHECK(mcpg_fakehost_dispatch(fh, be, c) == MCPG_PENDING, "slow is pending");
    MCPG_CHECK(mcpg_fakehost_run_until(fh, op_pending, c, 5000) == 0, "its op returned PENDING");
    h->call_cancel(c);
    h->call_cancel(c);
    MCPG_CHECK(h->call_cancelled(c) == 1, "the call knows it was cancelled");
    MCPG_CHECK(cancels == want, "inline %d: cancel() called %d times, want %d", inl, cancels,
               want);
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_CONTINUE, "it still answers");
    h->call_cancel(c);
    MCPG_CHECK(cancels == want, "not once it has answered");
    mcpg_fakehost_call_free(fh, c);
}

static void test_cancel(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_instance *be;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tb_module, "cx", NULL, &be) == 0, "load");
    cancel_pending(fh, be, 0, 1);
    cancel_pending(fh, be, 1, 1);
    /* an op still running on its pool thread is not told: it can ask */
    tb *t = mcpg_fakehost_state(be);
    mcpg_fakehost_set_inline(be, 0);
    atomic_store(&block_entered, 0);
    atomic_store(&block_go, 0);
    cancels = 0;
    mcpg_call *c = greet(fh, "block");
    MCPG_CHECK(mcpg_fakehost_dispatch(fh, be, c) == MCPG_PENDING, "on the pool");
    while (!atomic_load(&block_entered)) sleep_ms(1);
    h->call_cancel(c);
    atomic_store(&block_go, 1);
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_CONTINUE, "answered");
    MCPG_CHECK(cancels == 0 && t->saw_cancelled == 1,
               "a running op is not told (cancel %d) but sees the flag (%d)", cancels,
               t->saw_cancelled);
    mcpg_fakehost_call_free(fh, c);
    mcpg_fakehost_unload(fh, be);
}

/* ---- as the kernel: optional ops only when their table has them ---- */

static mcpg_backend_ops tb_ops_short;
static mcpg_lifecycle_ops tb_lifecycle_short;

/* Tables built against older headers end earlier: what follows their size
 * is not theirs. Shrunk after load (the loader wants 1.0's size), a set slot
 * past the size must not be called. */
static void test_optional_ops(mcpg_fakehost *fh) {
    tb_ops_short = tb_ops;
    tb_lifecycle_short = tb_lifecycle;
    mcpg_module m = tb_module;
    m.ops = &tb_ops_short;
    m.lifecycle = &tb_lifecycle_short;
    mcpg_instance *be;
    worker_starts = worker_stops = 0;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &m, "short", NULL, &be) == 0, "load");
    MCPG_CHECK(worker_starts == 1, "worker_start ran at load");
    tb_ops_short.size = (uint32_t)offsetof(mcpg_backend_ops, cancel);
    cancel_pending(fh, be, 1, 0);
    tb_ops_short.size = sizeof tb_ops_short;
    tb_ops_short.cancel = NULL;
    cancel_pending(fh, be, 1, 0);
    tb_lifecycle_short.size = (uint32_t)offsetof(mcpg_lifecycle_ops, worker_stop);
    MCPG_CHECK(mcpg_fakehost_unload(fh, be) == 0, "unload");
    MCPG_CHECK(worker_stops == 0, "worker_stop past the table's size: not called");
}

/* ---- as the kernel: sized structs ---- */

typedef struct outcome_box {
    mcpg_call_outcome o;
    unsigned char after[32]; /* what a caller with newer headers knows more */
} outcome_box;

static int untouched(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

static void test_outcome_size(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "x", NULL, NULL);
    h->call_result(c, "{\"r\":1}", 7);
    h->call_set_http(c, 202, 0);
    outcome_box b;
    memset(&b, 0xab, sizeof b);
    b.o.size = sizeof b.o;
    h->call_outcome(c, &b.o);
    MCPG_CHECK(b.o.is_error == 0 && b.o.result_len == 7 && b.o.http_status == 202 &&
                   b.o.size == sizeof b.o,
               "this build's outcome filled");
    MCPG_CHECK(untouched(b.after, sizeof b.after, 0xab), "nothing written past its size");
    memset(&b, 0xab, sizeof b);
    b.o.size = sizeof b;
    h->call_outcome(c, &b.o);
    MCPG_CHECK(b.o.result_len == 7 && b.o.size == sizeof b &&
                   untouched(b.after, sizeof b.after, 0xab),
               "a newer caller: what this host does not know is left as the caller set it");
    memset(&b, 0xab, sizeof b);
    b.o.size = (uint32_t)offsetof(mcpg_call_outcome, retry_after_s);
    h->call_outcome(c, &b.o);
    MCPG_CHECK(untouched((const unsigned char *)&b.o.is_error,
                         sizeof b.o - offsetof(mcpg_call_outcome, is_error), 0xab),
               "smaller than ABI 1.0's: refused, nothing written");
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 1 &&
                   mcpg_fakehost_log_contains(fh, "smaller than the ABI 1.0 outcome"),
               "and counted");
    mcpg_fakehost_call_free(fh, c);
}

typedef struct desc_box {
    mcpg_call_desc d;
    unsigned char after[32];
} desc_box;

static void b_complete(void *ctx, mcpg_call *call) { *(mcpg_call **)ctx = call; }

static void test_desc_size(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_call *done = NULL, *c = NULL;
    desc_box b;
    memset(&b, 0xcd, sizeof b); /* a newer transport's fields this host cannot know */
    b.d = (mcpg_call_desc){.size = sizeof b, .wire = MCPG_WIRE_STATELESS, .method = "ping",
                           .method_len = 4, .transport_ctx = &done, .complete = b_complete};
    MCPG_CHECK(h->call_submit(h->worker_current(), &b.d, &c) == 0 && done == c,
               "a longer desc is read up to this host's size");
    h->call_release(c);
    b.d.size = (uint32_t)offsetof(mcpg_call_desc, complete);
    MCPG_CHECK(h->call_submit(h->worker_current(), &b.d, &c) == MCPG_EINVAL,
               "one shorter than ABI 1.0's is refused");
}

/* ---- the loop on its own thread, a transport over TCP ---- */

/* c1: at once; c2: 20 ms later, an error; c3: refused. */
static void tt_plan(void *arg, mcpg_call *call, const mcpg_call_desc *d, mcpg_fakehost_plan *plan) {
    const mcpg_host *h = arg;
    if (d->name[1] == '3') {
        plan->answer = MCPG_FAKEHOST_REFUSE;
        plan->refuse_with = MCPG_EUNAVAIL;
    } else if (d->name[1] == '2') {
        h->call_error(call, MCPG_RPC_SERVER_ERROR, "later", NULL);
        h->call_set_http(call, 503, 2);
        plan->answer = MCPG_FAKEHOST_LATER;
        plan->delay_ms = 20;
    } else {
        h->call_result(call, "now", 3);
        plan->answer = MCPG_FAKEHOST_NOW;
    }
}

/* Connect, read until the server closes: what it wrote. */
static const char *fetch(uint16_t port) {
    static char buf[256];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    size_t n = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t r = 1;
        while (r > 0 && n < sizeof buf - 1 && poll(&p, 1, 2000) == 1)
            if ((r = read(fd, buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
    }
    buf[n] = '\0';
    close(fd);
    return buf;
}

typedef struct on_loop_probe {
    mcpg_fakehost *fh;
    pthread_t caller;
    int saw_worker, other_thread;
} on_loop_probe;

static void probe_loop(void *arg) {
    on_loop_probe *p = arg;
    p->saw_worker = mcpg_fakehost_host(p->fh)->worker_current() != NULL;
    p->other_thread = !pthread_equal(p->caller, pthread_self());
}

static void test_threaded(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_fakehost_stats s0, s;
    mcpg_fakehost_get_stats(fh, &s0);
    mcpg_instance *tr;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tt_module, "tr", NULL, &tr) == 0, "load");
    mcpg_fakehost_on_submit(fh, tt_plan, (void *)h);
    uint16_t port = 0;
    MCPG_REQUIRE(mcpg_fakehost_listen(fh, tr, &port) == 0 && port, "listen");
    MCPG_REQUIRE(mcpg_fakehost_start_thread(fh) == 0, "start_thread");
    MCPG_CHECK(h->worker_current() == NULL, "this thread is no longer the loop's");
    on_loop_probe p = {fh, pthread_self(), 0, 0};
    MCPG_CHECK(mcpg_fakehost_run_on_loop(fh, probe_loop, &p) == 0 && p.saw_worker &&
                   p.other_thread,
               "run_on_loop: on the loop's own thread");
    MCPG_CHECK(!strcmp(fetch(port), "now"), "answered inside call_submit");
    MCPG_CHECK(!strcmp(fetch(port), "later"), "answered later, with its error");
    MCPG_CHECK(!strcmp(fetch(port), ""), "refused by the hook: the transport refuses, closed");
    MCPG_CHECK(mcpg_fakehost_run_until(fh, NULL, NULL, 1) == MCPG_ESTATE &&
                   mcpg_fakehost_take_failures(fh) == 1,
               "the loop cannot be turned from here meanwhile");
    MCPG_CHECK(mcpg_fakehost_conn_count(fh, tr) == 0, "conn_count, from this thread");
    mcpg_fakehost_drain(fh, tr);
    MCPG_CHECK(!strcmp(fetch(port), ""), "after drain: refused");
    MCPG_CHECK(mcpg_fakehost_stop_thread(fh) == 0, "stop_thread");
    MCPG_CHECK(h->worker_current() == mcpg_fakehost_worker(fh), "this thread turns it again");
    mcpg_fakehost_get_stats(fh, &s);
    MCPG_CHECK(s.accepted - s0.accepted == 4 && s.adopt_refused - s0.adopt_refused == 2,
               "accepted %ld, refused %ld", s.accepted - s0.accepted,
               s.adopt_refused - s0.adopt_refused);
    MCPG_CHECK(s.submitted - s0.submitted == 2 && s.refused - s0.refused == 1 &&
                   s.completed - s0.completed == 2 &&
                   s.completed_in_submit - s0.completed_in_submit == 1 &&
                   s.released - s0.released == 2,
               "calls: %ld submitted, %ld refused, %ld completed (%ld in submit), %ld released",
               s.submitted - s0.submitted, s.refused - s0.refused, s.completed - s0.completed,
               s.completed_in_submit - s0.completed_in_submit, s.released - s0.released);
    MCPG_CHECK(s.host_allocs - s0.host_allocs == 1, "the instance's state: %ld",
               s.host_allocs - s0.host_allocs);
    MCPG_CHECK(mcpg_fakehost_unload(fh, tr) == 0, "unload");
    mcpg_fakehost_get_stats(fh, &s);
    MCPG_CHECK(s.host_allocs == s0.host_allocs, "every host allocation freed");
    mcpg_fakehost_on_submit(fh, NULL, NULL);
}

/* Modules' own buffers are counted; the host's are not. */
static void test_buf_stats(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_fakehost_stats s0, s;
    mcpg_fakehost_get_stats(fh, &s0);
    mcpg_buf own = {0};
    h->buf_printf(&own, "%0*d", 1000, 7);
    mcpg_fakehost_get_stats(fh, &s);
    MCPG_CHECK(s.buf_bytes - s0.buf_bytes == (long)own.cap && own.len == 1000, "grown: %ld",
               s.buf_bytes - s0.buf_bytes);
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "x", NULL, NULL);
    h->buf_append(h->call_result_buf(c), own.data, own.len);
    h->buf_free(&own);
    mcpg_fakehost_get_stats(fh, &s);
    MCPG_CHECK(s.buf_bytes == s0.buf_bytes, "freed; a call's result not counted: %ld",
               s.buf_bytes - s0.buf_bytes);
    mcpg_fakehost_call_free(fh, c);
}

static void test_threads_off_loop(mcpg_fakehost *fh);
static void test_messages(mcpg_fakehost *fh);
static void test_message_replies(mcpg_fakehost *fh);
static void test_transport_messages(mcpg_fakehost *fh);
static void test_news(mcpg_fakehost *fh);
static void test_subscribe(mcpg_fakehost *fh);
static void test_coordinator(mcpg_fakehost *fh);
static void test_servers(mcpg_fakehost *fh);

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
    test_inline_default(fh);
    test_helpers(fh);
    test_backend_errors(fh);
    test_identity(fh);
    test_transport_side(fh);
    test_handle_stages(fh);
    test_stale_handles(fh);
    test_staged_resume(fh);
    test_deny_without_error(fh);
    test_cancel(fh);
    test_optional_ops(fh);
    test_outcome_size(fh);
    test_desc_size(fh);
    test_messages(fh);
    test_message_replies(fh);
    test_transport_messages(fh);
    test_news(fh);
    test_subscribe(fh);
    test_coordinator(fh);
    test_servers(fh);
    /* after these the fake host is draining: call_submit refuses */
    test_buf_stats(fh);
    test_threaded(fh);
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

/* ======== ABI 1.1 ========================================================= */

/* A backend that talks to its caller before answering: tool "talk" sends a
 * progress notification and, with "ask", a sampling request whose reply
 * becomes its result; "typed" answers input_required; "who" says what the
 * call says about its client; "changed" announces list changes and an
 * updated resource; "late" keeps its handle and notifies after answering. */
typedef struct tk {
    const mcpg_host *host;
    mcpg_instance *self;
    int subscribes, unsubscribes, cancelled_replies;
    char last_sub[64];
    mcpg_call *late;
} tk;

typedef struct tk_wait {
    tk *m;
    mcpg_call *call;
    int resumed; /* cancel answered for it: the reply only frees */
} tk_wait;

static int tk_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **out) {
    (void)config;
    tk *m = calloc(1, sizeof *m);
    if (!m) return MCPG_ENOMEM;
    m->host = host;
    m->self = self;
    *out = m;
    return 0;
}

static void tk_destroy(void *inst) { free(inst); }

static int tk_list_tools(void *inst, mcpg_buf *out) {
    tk *m = inst;
    return m->host->buf_printf(out, "[{\"name\":\"talk\",\"inputSchema\":{\"type\":\"object\"}}]");
}

static int tk_list_resources(void *inst, mcpg_buf *out) {
    tk *m = inst;
    return m->host->buf_printf(out, "[{\"uri\":\"test://r\",\"name\":\"r\"}]");
}

static int tk_list_templates(void *inst, mcpg_buf *out) {
    tk *m = inst;
    return m->host->buf_printf(out, "[{\"uriTemplate\":\"test://t/{id}/data\",\"name\":\"t\"}]");
}

static mcpg_status tk_text(tk *m, mcpg_call *call, const char *text) {
    return mcpg_result_text(m->host, call, text, strlen(text), 0);
}

/* On the loop: the client's answer (or why there is none) is the result. */
static void tk_replied(void *arg, const mcpg_reply *r) {
    tk_wait *w = arg;
    tk *m = w->m;
    if (r->status == MCPG_ECANCELED) m->cancelled_replies++;
    if (w->resumed) {
        free(w);
        return;
    }
    char text[256];
    snprintf(text, sizeof text, "status %d result %.*s error %lld %s", r->status,
             (int)r->result_len, r->result_json ? r->result_json : "", (long long)r->error_code,
             r->is_error ? r->error_message : "");
    *m->host->call_slot(w->call, m->self) = NULL;
    tk_text(m, w->call, text);
    mcpg_call *call = w->call;
    free(w);
    m->host->call_resume(call, MCPG_CONTINUE);
}

static mcpg_status tk_talk(tk *m, mcpg_call *call, int ask, int64_t timeout_ms) {
    const mcpg_host *h = m->host;
    static const char progress[] = "{\"progressToken\":\"p\",\"progress\":1}";
    int rc = h->call_notify(call, "notifications/progress", progress, sizeof progress - 1);
    char text[64];
    if (rc || !ask) {
        snprintf(text, sizeof text, "notify %d", rc);
        return tk_text(m, call, text);
    }
    tk_wait *w = calloc(1, sizeof *w);
    w->m = m;
    w->call = call;
    rc = h->call_request(call, "sampling/createMessage", "{\"maxTokens\":5}", 15,
                         (uint64_t)timeout_ms, tk_replied, w);
    if (rc) {
        free(w);
        snprintf(text, sizeof text, "request %d", rc);
        return tk_text(m, call, text);
    }
    *h->call_slot(call, m->self) = w;
    return MCPG_PENDING;
}

static mcpg_status tk_who(tk *m, mcpg_call *call) {
    const mcpg_host *h = m->host;
    size_t a, b, c;
    const char *s = h->call_session(call, &a), *caps = h->call_client_capabilities(call, &b),
               *v = h->call_protocol_version(call, &c);
    char text[256];
    snprintf(text, sizeof text, "%.*s|%.*s|%.*s", s ? (int)a : 1, s ? s : "-",
             caps ? (int)b : 1, caps ? caps : "-", v ? (int)c : 1, v ? v : "-");
    return tk_text(m, call, text);
}

static mcpg_status tk_call_tool(void *inst, mcpg_call *call) {
    tk *m = inst;
    const mcpg_host *h = m->host;
    size_t n;
    const char *args = h->call_args(call, &n);
    mcpg_json_span v;
    int64_t timeout = 0;
    if (h->json_object_get(args, n, "timeout", &v) == 1) h->json_int64(&v, &timeout);
    char what[16] = "talk";
    if (h->json_object_get(args, n, "what", &v) == 1)
        h->json_string_decode(&v, what, sizeof what, NULL);
    if (!strcmp(what, "typed")) {
        h->call_set_result_type(call, MCPG_RESULT_INPUT_REQUIRED);
        return tk_text(m, call, "typed");
    }
    if (!strcmp(what, "who")) return tk_who(m, call);
    if (!strcmp(what, "changed")) {
        h->lists_changed(m->self, MCPG_LIST_TOOLS | MCPG_LIST_PROMPTS);
        h->resource_updated(m->self, "test://r", 8);
        return tk_text(m, call, "changed");
    }
    if (!strcmp(what, "late")) {
        m->late = call;
        return tk_text(m, call, "late");
    }
    return tk_talk(m, call, !strcmp(what, "ask"), timeout);
}

/* The client left while the request waited: answer now; the request itself
 * is then answered MCPG_ECANCELED by the host, and frees the wait. */
static void tk_cancel(void *inst, mcpg_call *call) {
    tk *m = inst;
    void **slot = m->host->call_slot(call, m->self);
    tk_wait *w = slot ? *slot : NULL;
    if (!w) return;
    w->resumed = 1;
    *slot = NULL;
    m->host->call_error(call, MCPG_RPC_SERVER_ERROR, "cancelled", NULL);
    m->host->call_resume(call, MCPG_DENY);
}

static void tk_subscribe(void *inst, const char *uri, int on) {
    tk *m = inst;
    if (on) m->subscribes++;
    else m->unsubscribes++;
    snprintf(m->last_sub, sizeof m->last_sub, "%s", uri);
}

static const mcpg_lifecycle_ops tk_lifecycle = {.size = sizeof(mcpg_lifecycle_ops),
                                                .version = 1, .create = tk_create,
                                                .destroy = tk_destroy};
static const mcpg_backend_ops tk_ops = {MCPG_OPS_HEAD(mcpg_backend_ops),
                                        .list_tools = tk_list_tools,
                                        .call_tool = tk_call_tool,
                                        .list_resources = tk_list_resources,
                                        .list_resource_templates = tk_list_templates,
                                        .cancel = tk_cancel, .subscribe = tk_subscribe};
static const mcpg_module tk_module = {
    .magic = MCPG_MODULE_MAGIC, .abi_major = MCPG_ABI_MAJOR, .abi_minor = MCPG_ABI_MINOR,
    .size = sizeof(mcpg_module), .kind = MCPG_KIND_BACKEND, .name = "backend_talk",
    .version = "1", .build_id = "test", .flags = MCPG_MOD_INLINE_SAFE,
    .lifecycle = &tk_lifecycle, .ops = &tk_ops};

static mcpg_call *talk(mcpg_fakehost *fh, const char *args, mcpg_wire wire) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "talk", args, "3");
    MCPG_REQUIRE(c, "call_new");
    mcpg_fakehost_call_set_wire(c, wire);
    return c;
}

/* The result's one text item, decoded enough for these tests. */
static int result_has(mcpg_call *c, const char *needle) {
    const char *r = mcpg_fakehost_result(c);
    return r && strstr(r, needle) != NULL;
}

static void test_messages(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    MCPG_CHECK(MCPG_HOST_HAS(h, call_notify) && MCPG_HOST_HAS(h, coordinator),
               "the 1.1 slots are there");
    mcpg_instance *be;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tk_module, "talk", NULL, &be) == 0, "load");
    for (int inl = 0; inl < 2; inl++) {
        mcpg_fakehost_set_inline(be, inl);
        mcpg_call *c = talk(fh, "{\"what\":\"talk\"}", MCPG_WIRE_STATELESS);
        MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE && result_has(c, "notify 0"),
                   "inline %d: a notification on the stateless wire is fine", inl);
        MCPG_CHECK(mcpg_fakehost_message_count(c) == 1 &&
                       !strcmp(mcpg_fakehost_message(c, 0),
                               "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
                               "\"params\":{\"progressToken\":\"p\",\"progress\":1}}"),
                   "framed as JSON-RPC: %s", mcpg_fakehost_messages(c));
        MCPG_CHECK(mcpg_fakehost_message(c, 1) == NULL, "one only");
        mcpg_fakehost_call_free(fh, c);

        c = talk(fh, "{\"what\":\"ask\"}", MCPG_WIRE_STATELESS);
        MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE &&
                       result_has(c, "request -9"), "inline %d: no request on the stateless wire: %s",
                   inl, mcpg_fakehost_result(c));
        MCPG_CHECK(mcpg_fakehost_message_count(c) == 1, "the refused request is not kept");
        mcpg_fakehost_call_free(fh, c);
    }
    mcpg_call *c = talk(fh, "{\"what\":\"talk\"}", MCPG_WIRE_LEGACY);
    mcpg_fakehost_call_set_streaming(c, 0);
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE && result_has(c, "notify -9"),
               "an answer that cannot carry messages: ENOTSUP");
    MCPG_CHECK(mcpg_fakehost_message_count(c) == 0, "nothing kept");
    mcpg_fakehost_call_free(fh, c);

    c = talk(fh, "{\"what\":\"typed\"}", MCPG_WIRE_STATELESS);
    mcpg_call_outcome o;
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE, "typed");
    mcpg_fakehost_outcome(c, &o);
    MCPG_CHECK(o.result_type == MCPG_RESULT_INPUT_REQUIRED, "result type %u", o.result_type);
    mcpg_fakehost_call_free(fh, c);

    c = talk(fh, "{\"what\":\"who\"}", MCPG_WIRE_LEGACY);
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE && result_has(c, "-|-|-"),
               "unknown until set: %s", mcpg_fakehost_result(c));
    mcpg_fakehost_call_free(fh, c);
    c = talk(fh, "{\"what\":\"who\"}", MCPG_WIRE_LEGACY);
    MCPG_CHECK(mcpg_fakehost_call_set_caps(c, "{bad") == MCPG_EINVAL, "caps must be JSON");
    mcpg_fakehost_call_set_session(c, "s-1");
    mcpg_fakehost_call_set_caps(c, "{\"sampling\":{}}");
    mcpg_fakehost_call_set_version(c, "2025-11-25");
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE &&
                   result_has(c, "s-1|{\\\"sampling\\\":{}}|2025-11-25"),
               "as set: %s", mcpg_fakehost_result(c));
    mcpg_fakehost_call_free(fh, c);

    /* a handle kept past the op's answer: no more messages */
    mcpg_fakehost_set_inline(be, 1);
    c = talk(fh, "{\"what\":\"late\"}", MCPG_WIRE_LEGACY);
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE, "late");
    tk *m = mcpg_fakehost_state(be);
    MCPG_CHECK(h->call_notify(m->late, "notifications/message", NULL, 0) == MCPG_ESTATE,
               "a notification after the answer is refused");
    MCPG_CHECK(mcpg_fakehost_take_failures(fh) == 1, "as a module bug");
    mcpg_fakehost_call_free(fh, c);
    MCPG_CHECK(mcpg_fakehost_unload(fh, be) == 0, "unload");
}

static void test_message_replies(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_instance *be;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tk_module, "talk", NULL, &be) == 0, "load");
    tk *m = mcpg_fakehost_state(be);
    for (int inl = 0; inl < 2; inl++) {
        mcpg_fakehost_set_inline(be, inl);
        mcpg_call *c = talk(fh, "{\"what\":\"ask\"}", MCPG_WIRE_LEGACY);
        MCPG_CHECK(mcpg_fakehost_dispatch(fh, be, c) == MCPG_PENDING, "waits for its client");
        MCPG_CHECK(mcpg_fakehost_wait(fh, c, 50) == MCPG_ETIMEDOUT, "until it answers");
        const char *id = mcpg_fakehost_request_id(c, 0);
        char want[160];
        snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":"
                 "\"sampling/createMessage\",\"params\":{\"maxTokens\":5}}", id ? id : "?");
        MCPG_CHECK(id && !strncmp(id, "mcpg-0-", 7) && mcpg_fakehost_message_count(c) == 2 &&
                       !strcmp(mcpg_fakehost_message(c, 1), want),
                   "a request with a minted id after the notification: %s",
                   mcpg_fakehost_messages(c));
        MCPG_CHECK(mcpg_fakehost_reply(fh, c, 1, "{}") == MCPG_ENOENT, "no request 1");
        MCPG_CHECK(mcpg_fakehost_reply(fh, c, 0, "{\"model\":\"m\"}") == 0, "answered");
        MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_CONTINUE &&
                       result_has(c, "status 0 result {\\\"model\\\":\\\"m\\\"} error 0"),
                   "the reply reached the backend: %s", mcpg_fakehost_result(c));
        MCPG_CHECK(mcpg_fakehost_reply(fh, c, 0, "{}") == MCPG_ENOENT, "answered once");
        MCPG_CHECK(mcpg_fakehost_request_id(c, 0) == NULL, "no longer waiting");
        mcpg_fakehost_call_free(fh, c);
    }
    mcpg_call *c = talk(fh, "{\"what\":\"ask\"}", MCPG_WIRE_LEGACY);
    mcpg_fakehost_dispatch(fh, be, c);
    mcpg_fakehost_reply_error(fh, c, 0, -1, "User rejected", "{\"why\":1}");
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_CONTINUE &&
                   result_has(c, "error -1 User rejected"), "an error reply: %s",
               mcpg_fakehost_result(c));
    mcpg_fakehost_call_free(fh, c);

    c = talk(fh, "{\"what\":\"ask\",\"timeout\":30}", MCPG_WIRE_LEGACY);
    uint64_t t0 = h->mono_us();
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE &&
                   result_has(c, "status -6"), "times out: %s", mcpg_fakehost_result(c));
    /* libuv counts a timer from the loop's cached time, which can be a few
     * ms behind t0 on a busy machine: "not long before its 30 ms" */
    MCPG_CHECK(h->mono_us() - t0 >= 25000, "after its timeout");
    mcpg_fakehost_call_free(fh, c);

    c = talk(fh, "{\"what\":\"ask\"}", MCPG_WIRE_LEGACY);
    mcpg_fakehost_dispatch(fh, be, c);
    mcpg_fakehost_run_for(fh, 20);
    int before = m->cancelled_replies;
    h->call_cancel(c);
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_DENY, "cancel answered it");
    MCPG_CHECK(m->cancelled_replies == before + 1, "the request got MCPG_ECANCELED");
    MCPG_CHECK(mcpg_fakehost_reply(fh, c, 0, "{}") == MCPG_ENOENT, "nothing waits any more");
    mcpg_fakehost_call_free(fh, c);
    MCPG_CHECK(mcpg_fakehost_failures(fh) == 0, "no failures: %s", mcpg_fakehost_log_text(fh));
    MCPG_CHECK(mcpg_fakehost_unload(fh, be) == 0, "unload");
}

/* ---- the transport's side of messages ---- */

typedef struct mctx {
    int completed, seen_at_complete;
    char msgs[4][256];
    int n;
    mcpg_call_outcome o;
    char result[512];
} mctx;

static int m_message(void *ctx, mcpg_call *call, const char *json, size_t len) {
    mctx *t = ctx;
    (void)call;
    if (t->n < 4) snprintf(t->msgs[t->n], sizeof t->msgs[0], "%.*s", (int)len, json);
    t->n++;
    return 0;
}

static void m_complete(void *ctx, mcpg_call *call) {
    mctx *t = ctx;
    t->completed++;
    t->seen_at_complete = t->n;
    mcpg_fakehost_outcome(call, &t->o);
    if (t->o.result)
        snprintf(t->result, sizeof t->result, "%.*s", (int)t->o.result_len, t->o.result);
}

static int two_messages(void *arg) { return ((mctx *)arg)->n >= 2; }
static int m_completed(void *arg) { return ((mctx *)arg)->completed > 0; }

static mcpg_call *m_submit(mcpg_fakehost *fh, mctx *t, const char *method, const char *args,
                           uint32_t size) {
    mcpg_call_desc d = {.size = size, .wire = MCPG_WIRE_LEGACY, .method = method,
                        .method_len = strlen(method), .name = "talk", .name_len = 4,
                        .args_json = args, .args_len = args ? strlen(args) : 0,
                        .id_json = "9", .id_len = 1, .session_id = "s1", .session_id_len = 2,
                        .transport_ctx = t, .complete = m_complete, .message = m_message,
                        .client_caps_json = "{\"elicitation\":{}}", .client_caps_len = 18,
                        .protocol_version = "2025-11-25", .protocol_version_len = 10};
    mcpg_call *c = NULL;
    const mcpg_host *h = mcpg_fakehost_host(fh);
    int rc = h->call_submit(h->worker_current(), &d, &c);
    MCPG_CHECK(rc == 0 && c, "submit: %d", rc);
    return c;
}

static void test_transport_messages(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_worker *w = h->worker_current();
    mcpg_instance *be;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tk_module, "talk", NULL, &be) == 0, "load");
    mcpg_fakehost_route(fh, be);

    mctx t = {0};
    mcpg_call *c = m_submit(fh, &t, "tools/call", "{\"what\":\"ask\"}", sizeof(mcpg_call_desc));
    MCPG_CHECK(mcpg_fakehost_run_until(fh, two_messages, &t, 5000) == 0 && !t.completed,
               "the messages reach the transport before the outcome");
    MCPG_CHECK(!strcmp(t.msgs[0], "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
                                  "\"params\":{\"progressToken\":\"p\",\"progress\":1}}"),
               "notification: %s", t.msgs[0]);
    const char *id = mcpg_fakehost_request_id(c, 0);
    MCPG_REQUIRE(id, "a request waits");
    MCPG_CHECK(strstr(t.msgs[1], "\"method\":\"sampling/createMessage\"") &&
                   strstr(t.msgs[1], id), "request: %s", t.msgs[1]);
    char body[256];
    snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":{\"a\":1}}", id);
    MCPG_CHECK(h->reply_submit(w, "s2", 2, body, strlen(body)) == MCPG_ENOENT,
               "another session's answer does not reach it");
    static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"m\"}";
    static const char unknown[] = "{\"jsonrpc\":\"2.0\",\"id\":\"mcpg-0-0\",\"result\":{}}";
    MCPG_CHECK(h->reply_submit(w, "s1", 2, req, sizeof req - 1) == MCPG_EPROTO,
               "a request is not a response");
    MCPG_CHECK(h->reply_submit(w, "s1", 2, unknown, sizeof unknown - 1) == MCPG_ENOENT,
               "an unknown id");
    MCPG_CHECK(h->reply_submit(w, "s1", 2, body, strlen(body)) == 0, "the asker's session");
    MCPG_CHECK(mcpg_fakehost_run_until(fh, m_completed, &t, 5000) == 0 &&
                   strstr(t.result, "status 0 result {\\\"a\\\":1}") && t.seen_at_complete == 2,
               "completed with the reply: %s", t.result);
    MCPG_CHECK(h->reply_submit(w, "s1", 2, body, strlen(body)) == MCPG_ENOENT, "once");
    h->call_release(c);

    memset(&t, 0, sizeof t);
    c = m_submit(fh, &t, "tools/call", "{\"what\":\"who\"}", sizeof(mcpg_call_desc));
    MCPG_CHECK(mcpg_fakehost_run_until(fh, m_completed, &t, 5000) == 0 &&
                   strstr(t.result, "s1|{\\\"elicitation\\\":{}}|2025-11-25"),
               "the desc's session, caps and version: %s", t.result);
    h->call_release(c);

    memset(&t, 0, sizeof t);
    c = m_submit(fh, &t, "tools/call", "{\"what\":\"talk\"}", MCPG_CALL_DESC_SIZE_1_0);
    MCPG_CHECK(mcpg_fakehost_run_until(fh, m_completed, &t, 5000) == 0 &&
                   strstr(t.result, "notify -9") && t.n == 0,
               "a 1.0 transport cannot carry messages: %s", t.result);
    h->call_release(c);

    memset(&t, 0, sizeof t);
    c = m_submit(fh, &t, "resources/templates/list", NULL, sizeof(mcpg_call_desc));
    MCPG_CHECK(t.completed && strstr(t.result, "{\"resourceTemplates\":[{\"uriTemplate\""),
               "lists from the routed backend: %s", t.result);
    h->call_release(c);
    MCPG_CHECK(mcpg_fakehost_unload(fh, be) == 0, "unload");
}

static void test_news(mcpg_fakehost *fh) {
    mcpg_instance *be, *tr;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tk_module, "talk", NULL, &be) == 0, "load");
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tt_module, "tr", NULL, &tr) == 0, "load transport");
    tt *t = mcpg_fakehost_state(tr);
    mcpg_call *c = talk(fh, "{\"what\":\"changed\"}", MCPG_WIRE_STATELESS);
    MCPG_CHECK(mcpg_fakehost_run(fh, be, c, 5000) == MCPG_CONTINUE, "changed");
    mcpg_fakehost_call_free(fh, c);
    MCPG_CHECK(mcpg_fakehost_news_count(fh, "notifications/tools/list_changed", NULL) == 1 &&
                   mcpg_fakehost_news_count(fh, "notifications/prompts/list_changed", NULL) == 1 &&
                   mcpg_fakehost_news_count(fh, "notifications/resources/list_changed", NULL) == 0,
               "one entry per list named");
    MCPG_CHECK(mcpg_fakehost_news_count(fh, "notifications/resources/updated", "test://r") == 1 &&
                   mcpg_fakehost_news_count(fh, NULL, "test://x") == 0 &&
                   mcpg_fakehost_news_count(fh, NULL, NULL) == 3, "and the updated uri");
    mcpg_fakehost_run_for(fh, 10);
    MCPG_CHECK(t->news == 3 && !strcmp(t->last_news, "notifications/resources/updated test://r"),
               "the transport heard each: %d, %s", t->news, t->last_news);
    MCPG_CHECK(mcpg_fakehost_news(fh, tr, "notifications/tools/list_changed", NULL) == 0 &&
                   t->news == 4, "driven directly");
    MCPG_CHECK(mcpg_fakehost_news(fh, be, "x", NULL) == MCPG_EINVAL, "transports only");
    mcpg_fakehost_unload(fh, tr);
    mcpg_fakehost_unload(fh, be);
}

static void test_subscribe(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_worker *w = h->worker_current();
    mcpg_instance *be;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tk_module, "talk", NULL, &be) == 0, "load");
    tk *m = mcpg_fakehost_state(be);
    MCPG_CHECK(h->resource_subscribe(w, "test://r", 8, 1) == MCPG_ENOENT, "no backend routed");
    mcpg_fakehost_route(fh, be);
    MCPG_CHECK(h->resource_subscribe(w, "test://r", 8, 1) == 0 &&
                   h->resource_subscribe(w, "test://r", 8, 1) == 0, "two subscribers");
    MCPG_CHECK(m->subscribes == 1 && !strcmp(m->last_sub, "test://r"), "the backend hears once");
    h->resource_subscribe(w, "test://r", 8, 0);
    MCPG_CHECK(m->unsubscribes == 0, "one is left");
    h->resource_subscribe(w, "test://r", 8, 0);
    MCPG_CHECK(m->unsubscribes == 1, "the last one left");
    MCPG_CHECK(h->resource_subscribe(w, "test://t/5/data", 15, 1) == 0 && m->subscribes == 2 &&
                   !strcmp(m->last_sub, "test://t/5/data"), "a uri of a template");
    MCPG_CHECK(h->resource_subscribe(w, "test://t//data", 14, 1) == MCPG_ENOENT &&
                   h->resource_subscribe(w, "test://nope", 11, 1) == MCPG_ENOENT,
               "uris it does not own");
    mcpg_fakehost_unload(fh, be);
}

/* A coordinator that stores nothing: only its table matters here. */
static int tc_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **out) {
    (void)host, (void)self, (void)config;
    static int state;
    *out = &state;
    return 0;
}
static void tc_destroy(void *inst) { (void)inst; }
static int tc_get(void *i, mcpg_worker *w, const char *k, size_t n, mcpg_coord_cb cb, void *a) {
    (void)i, (void)w, (void)k, (void)n, (void)cb, (void)a;
    return MCPG_ENOTSUP;
}
static int tc_put(void *i, mcpg_worker *w, const char *k, size_t n, const char *v, size_t vn,
                  uint64_t ttl, mcpg_coord_cb cb, void *a) {
    (void)i, (void)w, (void)k, (void)n, (void)v, (void)vn, (void)ttl, (void)cb, (void)a;
    return MCPG_ENOTSUP;
}
static int tc_incr(void *i, mcpg_worker *w, const char *k, size_t n, int64_t d, uint64_t ttl,
                   mcpg_coord_cb cb, void *a) {
    (void)i, (void)w, (void)k, (void)n, (void)d, (void)ttl, (void)cb, (void)a;
    return MCPG_ENOTSUP;
}
static int tc_cas(void *i, mcpg_worker *w, const char *k, size_t n, uint64_t rev, const char *v,
                  size_t vn, uint64_t ttl, mcpg_coord_cb cb, void *a) {
    (void)rev;
    return tc_put(i, w, k, n, v, vn, ttl, cb, a);
}
static int tc_scan(void *i, mcpg_worker *w, const char *p, size_t n, mcpg_coord_cb each,
                   mcpg_coord_cb cb, void *a) {
    (void)each;
    return tc_get(i, w, p, n, cb, a);
}
static int tc_publish(void *i, mcpg_worker *w, const char *s, const char *d, size_t n,
                      mcpg_coord_cb cb, void *a) {
    (void)d;
    return tc_get(i, w, s, n, cb, a);
}
static int tc_subscribe(void *i, mcpg_worker *w, const char *s, mcpg_coord_msg_cb cb, void *a,
                        mcpg_coord_sub **out) {
    (void)i, (void)w, (void)s, (void)cb, (void)a, (void)out;
    return MCPG_ENOTSUP;
}
static void tc_unsubscribe(void *i, mcpg_coord_sub *sub) { (void)i, (void)sub; }
static const mcpg_lifecycle_ops tc_lifecycle = {.size = sizeof(mcpg_lifecycle_ops),
                                                .version = 1, .create = tc_create,
                                                .destroy = tc_destroy};
static const mcpg_coordinator_ops tc_ops = {
    MCPG_OPS_HEAD(mcpg_coordinator_ops), .get = tc_get, .put = tc_put, .incr = tc_incr,
    .put_if_absent = tc_put, .compare_and_set = tc_cas, .del = tc_get, .scan_prefix = tc_scan,
    .publish = tc_publish, .subscribe = tc_subscribe, .unsubscribe = tc_unsubscribe};
static const mcpg_module tc_module = {
    .magic = MCPG_MODULE_MAGIC, .abi_major = MCPG_ABI_MAJOR, .abi_minor = MCPG_ABI_MINOR,
    .size = sizeof(mcpg_module), .kind = MCPG_KIND_COORDINATOR, .name = "coordinator_t",
    .version = "1", .build_id = "test", .lifecycle = &tc_lifecycle, .ops = &tc_ops};

static void test_coordinator(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    void *inst = (void *)1;
    MCPG_CHECK(h->coordinator(&inst) == NULL && inst == NULL, "none by default");
    mcpg_instance *co, *be;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tc_module, "co", NULL, &co) == 0, "load");
    MCPG_REQUIRE(mcpg_fakehost_load(fh, &tk_module, "talk", NULL, &be) == 0, "load");
    MCPG_CHECK(mcpg_fakehost_set_coordinator(fh, be) == MCPG_EINVAL, "a backend is not one");
    MCPG_CHECK(mcpg_fakehost_set_coordinator(fh, co) == 0, "set");
    const mcpg_coordinator_ops *o = h->coordinator(&inst);
    MCPG_CHECK(o == &tc_ops && inst == mcpg_fakehost_state(co), "its ops and instance");
    MCPG_CHECK(o->get(inst, h->worker_current(), "k", 1, NULL, NULL) == MCPG_ENOTSUP, "callable");
    mcpg_fakehost_unload(fh, co);
    MCPG_CHECK(h->coordinator(&inst) == NULL, "gone with its instance");
    mcpg_fakehost_unload(fh, be);
}

/* ======== ABI 1.12 ======================================================== */

/* A ping submitted with desc.server (NULL: none) in a desc of `size`: the
 * server the fake host recorded for it. */
static const char *submit_server(mcpg_fakehost *fh, const char *server, uint32_t size) {
    static char seen[72];
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_call *done = NULL, *c = NULL;
    desc_box b;
    memset(&b, 0xcd, sizeof b); /* past an older desc's size: what this host must not read */
    b.d = (mcpg_call_desc){.size = size, .wire = MCPG_WIRE_STATELESS, .method = "ping",
                           .method_len = 4, .transport_ctx = &done, .complete = b_complete,
                           .server = server, .server_len = server ? strlen(server) : 0};
    if (size < sizeof b.d) memset((char *)&b.d + size, 0xcd, sizeof b.d - size);
    if (h->call_submit(h->worker_current(), &b.d, &c) != 0 || done != c) return "(refused)";
    const char *s = mcpg_fakehost_call_server(c);
    snprintf(seen, sizeof seen, "%s", s ? s : "(none)");
    h->call_release(c);
    return seen;
}

static int view_is(const mcpg_server_view *v, const char *name, const char *path) {
    return v->name && !strcmp(v->name, name) && v->path && !strcmp(v->path, path);
}

static void test_server_find(mcpg_fakehost *fh) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_worker *w = h->worker_current();
    mcpg_server_view v = {.size = sizeof v};
    MCPG_CHECK(h->server_find(w, "/mcp/a", 6, NULL, 0, &v) == 0 && view_is(&v, "a", "/mcp/a") &&
                   !v.host && !strcmp(v.info_json, "{\"name\":\"A\"}") &&
                   !strcmp(v.instructions, "hi"),
               "found at its default path, with what it sets");
    MCPG_CHECK(h->server_find(w, "/mcp/ab", 6, NULL, 0, &v) == 0 && view_is(&v, "a", "/mcp/a"),
               "the path is path[0..n)");
    MCPG_CHECK(h->server_find(w, "/mcp/b", 6, NULL, 0, &v) == MCPG_ENOENT, "none there");
    MCPG_CHECK(h->server_find(w, "/t", 2, "Tenant.EXAMPLE:8443", 19, &v) == 0 &&
                   view_is(&v, "t", "/t") && !strcmp(v.host, "tenant.example") && !v.info_json,
               "a Host-bound server for its Host, any port and case");
    MCPG_CHECK(h->server_find(w, "/t", 2, "other", 5, &v) == 0 && view_is(&v, "any", "/t"),
               "another Host: the server for any");
    MCPG_CHECK(h->server_find(w, "/t", 2, NULL, 0, &v) == 0 && view_is(&v, "any", "/t"),
               "no Host: the server for any");
    mcpg_server_view small;
    memset(&small, 0xcd, sizeof small);
    small.size = (uint32_t)offsetof(mcpg_server_view, host);
    MCPG_CHECK(h->server_find(w, "/mcp/a", 6, NULL, 0, &small) == 0 &&
                   view_is(&small, "a", "/mcp/a") &&
                   small.size == offsetof(mcpg_server_view, host) &&
                   (uintptr_t)small.host == (uintptr_t)0xcdcdcdcdcdcdcdcdull,
               "an older view is filled as far as its size");
    v.size = 4;
    MCPG_CHECK(h->server_find(w, "/mcp/a", 6, NULL, 0, &v) == MCPG_EINVAL, "a view without name");
}

static void test_servers(mcpg_fakehost *fh) {
    char last[72];
    MCPG_CHECK(mcpg_fakehost_last_server(fh, last, sizeof last) == 0 && !last[0],
               "the descs of the tests before named none");
    MCPG_CHECK(mcpg_fakehost_add_server(fh, "Bad", NULL, NULL, NULL, NULL) == MCPG_EINVAL &&
                   mcpg_fakehost_add_server(fh, "-a", NULL, NULL, NULL, NULL) == MCPG_EINVAL &&
                   mcpg_fakehost_add_server(fh, "a", "mcp", NULL, NULL, NULL) == MCPG_EINVAL &&
                   mcpg_fakehost_add_server(fh, "a", NULL, NULL, "[1]", NULL) == MCPG_EINVAL,
               "names, paths and serverInfo servers[] refuses");
    MCPG_REQUIRE(mcpg_fakehost_add_server(fh, "a", NULL, NULL, "{\"name\":\"A\"}", "hi") == 0 &&
                     mcpg_fakehost_add_server(fh, "any", "/t", NULL, NULL, NULL) == 0 &&
                     mcpg_fakehost_add_server(fh, "t", "/t", "tenant.example", NULL, NULL) == 0,
                 "servers declared");
    test_server_find(fh);
    MCPG_CHECK(!strcmp(submit_server(fh, "a", sizeof(mcpg_call_desc)), "a") &&
                   mcpg_fakehost_last_server(fh, last, sizeof last) == 1 && !strcmp(last, "a"),
               "desc.server recorded: %s", last);
    MCPG_CHECK(!strcmp(submit_server(fh, NULL, sizeof(mcpg_call_desc)), "(none)") &&
                   mcpg_fakehost_last_server(fh, last, sizeof last) == 0 && !last[0],
               "a desc without one");
    MCPG_CHECK(!strcmp(submit_server(fh, "a", (uint32_t)offsetof(mcpg_call_desc, server)),
                       "(none)") &&
                   mcpg_fakehost_last_server(fh, NULL, 0) == 0,
               "an older desc's size: nothing read past it");
}
