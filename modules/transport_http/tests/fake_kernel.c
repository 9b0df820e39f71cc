/* The fake kernel (see fake_kernel.h). Only what transport_http uses is
 * filled in the host table; a NULL slot it touches would crash the test,
 * which is the point. */
#define _GNU_SOURCE /* accept4 */
#include "fake_kernel.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

struct mcpg_worker {
    int index;
};
struct mcpg_instance {
    const char *name;
};

struct mcpg_call {
    mcpg_call_desc d;
    uv_timer_t timer;
    int cancelled, completed;
    int is_error, http_status;
    uint32_t retry_after;
    int64_t code;
    char message[128];
    mcpg_buf result;
};

static struct {
    void *dl;
    const mcpg_module *mod;
    void *config;
    void *inst;
    const mcpg_transport_ops *ops;
    uv_loop_t loop;
    uv_thread_t thread;
    uv_async_t async;
    uv_poll_t listen_poll;
    int listen_fd;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void (*fn)(void *);
    void *arg;
    int fn_done;
    fk_stats st;
    struct mcpg_worker worker;
    struct mcpg_instance self;
} K;

/* ---- host slots ------------------------------------------------------------- */

static void *h_alloc(size_t n) {
    K.st.host_allocs++;
    return malloc(n);
}
static void *h_calloc(size_t c, size_t n) {
    K.st.host_allocs++;
    return calloc(c, n);
}
static void *h_realloc(void *p, size_t n) { return realloc(p, n); }
static void h_free(void *p) {
    if (p) K.st.host_allocs--;
    free(p);
}
static void h_log(mcpg_instance *self, int level, const char *fmt, ...) MCPG_PRINTF(3, 4);
static void h_log(mcpg_instance *self, int level, const char *fmt, ...) {
    (void)self;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[fake-kernel log %d] ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
static void h_report_error(mcpg_report *rep, const char *key, const char *fmt, ...)
    MCPG_PRINTF(3, 4);
static void h_report_error(mcpg_report *rep, const char *key, const char *fmt, ...) {
    (void)rep;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "config %s: ", key);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
/* Buffers: the SDK's, with the module's capacity counted (it uses no
 * buf_printf, which is passed through uncounted). */
static int h_buf_reserve(mcpg_buf *b, size_t extra) {
    size_t cap = b->cap;
    int rc = mcpg_buf_reserve(b, extra);
    K.st.buf_bytes += (long)b->cap - (long)cap;
    return rc;
}
static int h_buf_append(mcpg_buf *b, const void *p, size_t n) {
    size_t cap = b->cap;
    int rc = mcpg_buf_append(b, p, n);
    K.st.buf_bytes += (long)b->cap - (long)cap;
    return rc;
}
static int h_buf_append_json_string(mcpg_buf *b, const char *s, size_t n) {
    size_t cap = b->cap;
    int rc = mcpg_buf_append_json_string(b, s, n);
    K.st.buf_bytes += (long)b->cap - (long)cap;
    return rc;
}
static void h_buf_free(mcpg_buf *b) {
    K.st.buf_bytes -= (long)b->cap;
    mcpg_buf_free(b);
}

static const char *h_instance_name(mcpg_instance *self) { return self->name; }
static const char *h_gateway_version(void) { return "9.9.9"; }
static const char *h_gateway_name(void) { return "test-gw"; }
static uint32_t h_worker_count(void) { return 1; }
static mcpg_worker *h_worker_at(uint32_t i) { return i == 0 ? &K.worker : NULL; }
static uint32_t h_worker_index(mcpg_worker *w) { return (uint32_t)w->index; }
static void *h_worker_uv_loop(mcpg_worker *w) {
    (void)w;
    return &K.loop;
}
static uint64_t h_mono_us(void) { return uv_hrtime() / 1000; }
static int64_t h_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- calls -------------------------------------------------------------------- */

static int name_is(const mcpg_call_desc *d, const char *s) {
    return d->name && d->name_len == strlen(s) && !memcmp(d->name, s, d->name_len);
}

static void finish(mcpg_call *c) {
    c->completed = 1;
    K.st.completed++;
    c->d.complete(c->d.transport_ctx, c);
}

static void on_timer(uv_timer_t *t) { finish(t->data); }

static void set_result(mcpg_call *c) {
    size_t pad = name_is(&c->d, "big") ? 300000 : name_is(&c->d, "huge") ? 4000000 : 0;
    if (pad) {
        mcpg_buf_puts(&c->result, "{\"content\":[{\"type\":\"text\",\"text\":\"");
        mcpg_buf_reserve(&c->result, pad);
        memset(c->result.data + c->result.len, 'x', pad);
        c->result.len += pad;
        mcpg_buf_puts(&c->result, "\"}]}");
        return;
    }
    if (c->d.method_len == 10 && !memcmp(c->d.method, "tools/list", 10)) {
        mcpg_buf_puts(&c->result, "{\"tools\":[{\"name\":\"echo\"}]}");
        return;
    }
    mcpg_buf_puts(&c->result, "{\"content\":[{\"type\":\"text\",\"text\":\"args\"}],\"args\":");
    if (c->d.args_json) mcpg_buf_append(&c->result, c->d.args_json, c->d.args_len);
    else mcpg_buf_puts(&c->result, "null");
    /* prove the header callback works: echo the Mcp-Name header back */
    size_t n = 0;
    const char *v = c->d.header ? c->d.header(c->d.transport_ctx, "mcp-name", &n) : NULL;
    mcpg_buf_puts(&c->result, ",\"hdr\":");
    mcpg_buf_append_json_string(&c->result, v ? v : "", v ? n : 0);
    mcpg_buf_puts(&c->result, "}");
}

static int f_call_submit(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **out) {
    (void)w;
    if (name_is(d, "busy")) return MCPG_EAGAIN;
    if (name_is(d, "draining")) return MCPG_EUNAVAIL;
    mcpg_call *c = calloc(1, sizeof *c);
    memcpy(&c->d, d, sizeof *d);
    uv_timer_init(&K.loop, &c->timer);
    c->timer.data = c;
    K.st.submitted++;
    *out = c;
    int is_list = d->method_len == 10 && !memcmp(d->method, "tools/list", 10);
    int big = name_is(d, "big") || name_is(d, "huge");
    if (is_list || big || name_is(d, "echo") || name_is(d, "async") || name_is(d, "slow")) {
        set_result(c);
    } else if (name_is(d, "limited")) {
        c->is_error = 1;
        c->code = -32000;
        c->http_status = 429;
        c->retry_after = 7;
        snprintf(c->message, sizeof c->message, "rate limited \"now\"");
    } else {
        c->is_error = 1;
        c->code = MCPG_RPC_INVALID_PARAMS;
        snprintf(c->message, sizeof c->message, "Unknown tool: %.*s", (int)d->name_len, d->name);
    }
    if (big || name_is(d, "echo") || name_is(d, "other")) {
        K.st.reentrant_completions++;
        finish(c);
    } else {
        uv_timer_start(&c->timer, on_timer, name_is(d, "slow") ? 150 : 0, 0);
    }
    return 0;
}

static void f_call_cancel(mcpg_call *c) {
    c->cancelled = 1;
    K.st.cancelled++;
}

static void f_call_outcome(mcpg_call *c, mcpg_call_outcome *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->is_error = c->is_error;
    o->http_status = c->http_status;
    o->retry_after_s = c->retry_after;
    o->error_code = c->code;
    o->error_message = c->message;
    o->result = c->result.data;
    o->result_len = c->result.len;
}

static void on_call_timer_closed(uv_handle_t *h) {
    mcpg_call *c = h->data;
    mcpg_buf_free(&c->result);
    free(c);
}

static void f_call_release(mcpg_call *c) {
    if (!c->completed) {
        fprintf(stderr, "FAIL: call released before it completed\n");
        abort();
    }
    K.st.released++;
    uv_close((uv_handle_t *)&c->timer, on_call_timer_closed);
}

static mcpg_host host = {
    .size = sizeof(mcpg_host),
    .version = 1,
    .abi_major = MCPG_ABI_MAJOR,
    .abi_minor = MCPG_ABI_MINOR,
    .strerror = mcpg_strerror,
    .errname = mcpg_errname,
    .alloc = h_alloc,
    .calloc = h_calloc,
    .realloc = h_realloc,
    .free = h_free,
    .log = h_log,
    .report_error = h_report_error,
    .instance_name = h_instance_name,
    .gateway_version = h_gateway_version,
    .gateway_name = h_gateway_name,
    .worker_count = h_worker_count,
    .worker_at = h_worker_at,
    .worker_index = h_worker_index,
    .worker_uv_loop = h_worker_uv_loop,
    .mono_us = h_mono_us,
    .wall_us = h_wall_us,
    .buf_reserve = h_buf_reserve,
    .buf_append = h_buf_append,
    .buf_printf = mcpg_buf_printf,
    .buf_append_json_string = h_buf_append_json_string,
    .buf_free = h_buf_free,
    .json_validate = mcpg_json_validate,
    .json_object_get = mcpg_json_object_get,
    .json_object_next = mcpg_json_object_next,
    .json_array_next = mcpg_json_array_next,
    .json_string_eq = mcpg_json_string_eq,
    .json_string_decode = mcpg_json_string_decode,
    .json_int64 = mcpg_json_int64,
    .call_submit = f_call_submit,
    .call_cancel = f_call_cancel,
    .call_outcome = f_call_outcome,
    .call_release = f_call_release,
};

/* ---- the loop thread ------------------------------------------------------------ */

static void on_accept(uv_poll_t *p, int status, int events) {
    (void)p;
    (void)events;
    if (status < 0) return;
    for (;;) {
        int fd = accept4(K.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (K.ops->conn_adopt(K.inst, &K.worker, fd) != 0) {
            K.st.adopt_refused++;
            close(fd);
        }
    }
}

static void on_async(uv_async_t *a) {
    (void)a;
    pthread_mutex_lock(&K.mu);
    void (*fn)(void *) = K.fn;
    void *arg = K.arg;
    K.fn = NULL;
    pthread_mutex_unlock(&K.mu);
    if (!fn) return;
    fn(arg);
    pthread_mutex_lock(&K.mu);
    K.fn_done = 1;
    pthread_cond_signal(&K.cv);
    pthread_mutex_unlock(&K.mu);
}

static void loop_main(void *arg) {
    (void)arg;
    uv_run(&K.loop, UV_RUN_DEFAULT);
}

void fk_run_on_loop(void (*fn)(void *), void *arg) {
    pthread_mutex_lock(&K.mu);
    K.fn = fn;
    K.arg = arg;
    K.fn_done = 0;
    pthread_mutex_unlock(&K.mu);
    uv_async_send(&K.async);
    pthread_mutex_lock(&K.mu);
    while (!K.fn_done) pthread_cond_wait(&K.cv, &K.mu);
    pthread_mutex_unlock(&K.mu);
}

static void cfg_err(void *ctx, const char *key, const char *msg) {
    (void)ctx;
    fprintf(stderr, "config error %s: %s\n", key, msg);
}

int fk_start(const char *module_path, const char *config_json) {
    signal(SIGPIPE, SIG_IGN); /* as the kernel does: a peer's reset must not kill us */
    K.dl = dlopen(module_path, RTLD_NOW | RTLD_LOCAL);
    if (!K.dl) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return -1;
    }
    mcpg_module_entry_fn entry = (mcpg_module_entry_fn)dlsym(K.dl, MCPG_ENTRY_SYMBOL);
    K.mod = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    if (K.mod->kind != MCPG_KIND_TRANSPORT) return -1;
    K.ops = K.mod->ops;
    K.config = calloc(1, K.mod->config_size);
    if (mcpg_config_parse(K.mod->config, config_json, strlen(config_json), K.config, cfg_err, NULL))
        return -1;
    if (K.mod->lifecycle->validate && K.mod->lifecycle->validate(&host, K.config, NULL)) return -1;
    K.self.name = "http";
    uv_loop_init(&K.loop);
    if (K.mod->lifecycle->create(&host, &K.self, K.config, &K.inst)) return -1;
    pthread_mutex_init(&K.mu, NULL);
    pthread_cond_init(&K.cv, NULL);
    uv_async_init(&K.loop, &K.async, on_async);

    K.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(K.listen_fd, (struct sockaddr *)&a, sizeof a) || listen(K.listen_fd, 512)) return -1;
    socklen_t len = sizeof a;
    getsockname(K.listen_fd, (struct sockaddr *)&a, &len);
    uv_poll_init_socket(&K.loop, &K.listen_poll, K.listen_fd);
    uv_poll_start(&K.listen_poll, UV_READABLE, on_accept);
    uv_thread_create(&K.thread, loop_main, NULL);
    return ntohs(a.sin_port);
}

static void do_drain(void *arg) {
    (void)arg;
    K.ops->drain(K.inst, &K.worker);
}
void fk_drain(void) { fk_run_on_loop(do_drain, NULL); }

static void do_count(void *arg) { *(uint32_t *)arg = K.ops->conn_count(K.inst, &K.worker); }
uint32_t fk_conn_count(void) {
    uint32_t n = 0;
    fk_run_on_loop(do_count, &n);
    return n;
}

static void do_stats(void *arg) { *(fk_stats *)arg = K.st; }
fk_stats fk_get_stats(void) {
    fk_stats s;
    fk_run_on_loop(do_stats, &s);
    return s;
}

fk_stats fk_stats_after_stop(void) { return K.st; }

static void do_stop(void *arg) {
    (void)arg;
    uv_close((uv_handle_t *)&K.listen_poll, NULL);
    uv_close((uv_handle_t *)&K.async, NULL);
    close(K.listen_fd);
}

int fk_stop(void) {
    /* the caller has drained: conn_count is 0, so no handle of the module remains */
    if (K.mod->lifecycle->stop) K.mod->lifecycle->stop(K.inst);
    K.mod->lifecycle->destroy(K.inst);
    /* do_stop closes the async that fk_run_on_loop waits on: signal by hand */
    pthread_mutex_lock(&K.mu);
    K.fn = do_stop;
    K.arg = NULL;
    K.fn_done = 0;
    pthread_mutex_unlock(&K.mu);
    uv_async_send(&K.async);
    uv_thread_join(&K.thread);
    int rc = uv_loop_close(&K.loop);
    mcpg_config_free(K.mod->config, K.config);
    free(K.config);
    dlclose(K.dl);
    return rc;
}
