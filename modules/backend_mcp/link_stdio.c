/* backend_mcp: the upstream as a child process speaking MCP on its stdin
 * and stdout, one JSON-RPC message per line. The child runs in its own
 * process group (the gateway stops all it started); its stderr goes to the
 * gateway's log, each line stamped with the instance. When it exits the
 * upstream is down and, after the backoff, started again. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "upstream.h"

#define STDERR_LINE_MAX 2048
#define WRITE_QUEUE_MAX (64u << 20) /* bytes waiting for the child's stdin */
#define KILL_AFTER_MS 2000          /* SIGTERM, then SIGKILL */

typedef struct link_stdio {
    mcp_link base;
    uv_process_t proc;
    uv_pipe_t in, out, err;
    uv_timer_t kill_timer;
    int open;        /* handles not closed yet */
    bool running;    /* the process has not exited */
    bool stopping;   /* stop() was called: the exit is expected */
    mcpg_buf line, errline;
} link_stdio;

static void on_closed(uv_handle_t *h) {
    link_stdio *l = h->data;
    l->open--;
}

static void close_one(link_stdio *l, uv_handle_t *h) {
    if (h->data == l && !uv_is_closing(h)) uv_close(h, on_closed);
}

static void close_pipes(link_stdio *l) {
    close_one(l, (uv_handle_t *)&l->in);
    close_one(l, (uv_handle_t *)&l->out);
    close_one(l, (uv_handle_t *)&l->err);
}

static void on_kill_timer(uv_timer_t *t) {
    link_stdio *l = t->data;
    if (l->running) uv_kill(-l->proc.pid, SIGKILL);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig) {
    link_stdio *l = p->data;
    l->running = false;
    uv_timer_stop(&l->kill_timer);
    close_pipes(l);
    close_one(l, (uv_handle_t *)&l->proc);
    close_one(l, (uv_handle_t *)&l->kill_timer);
    if (l->stopping) return;
    char why[128];
    if (sig) snprintf(why, sizeof why, "the upstream process was killed by signal %d", sig);
    else snprintf(why, sizeof why, "the upstream process exited with status %lld", (long long)status);
    up_link_down(l->base.up, why);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
    (void)h;
    (void)hint;
    static __thread char slab[65536]; /* one I/O thread per instance: reads never overlap */
    b->base = slab;
    b->len = sizeof slab;
}

/* Each complete line of stdout is one message. */
static void on_stdout(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
    link_stdio *l = s->data;
    upstream *up = l->base.up;
    if (n < 0) {
        close_one(l, (uv_handle_t *)s);
        return;
    }
    const char *p = b->base, *end = b->base + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t take = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (l->line.len + take > (size_t)up->cfg.c->max_message_bytes) {
            l->line.len = 0;
            char why[128];
            snprintf(why, sizeof why, "the upstream sent a message over max_message_bytes (%lld)",
                     (long long)up->cfg.c->max_message_bytes);
            up_link_down(up, why);
            return;
        }
        mcpg_buf_append(&l->line, p, take);
        p += take;
        if (!nl) break;
        p++;
        size_t len = l->line.len;
        while (len && (l->line.data[len - 1] == '\r' || l->line.data[len - 1] == ' ')) len--;
        l->line.len = 0;
        if (len) {
            l->line.data[len] = '\0';
            up_on_message(up, l->line.data, len, NULL);
            if (!l->running && !l->base.up) return;
        }
    }
}

static void log_stderr_line(link_stdio *l) {
    upstream *up = l->base.up;
    if (l->errline.len) up_log_said(up, "upstream stderr: %.*s", (int)l->errline.len,
                                    l->errline.data);
    l->errline.len = 0;
}

static void on_stderr(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
    link_stdio *l = s->data;
    if (n < 0) {
        log_stderr_line(l);
        close_one(l, (uv_handle_t *)s);
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        char c = b->base[i];
        if (c == '\n') log_stderr_line(l);
        else if (c != '\r' && l->errline.len < STDERR_LINE_MAX) mcpg_buf_append(&l->errline, &c, 1);
    }
}

static int init_handles(link_stdio *l, uv_loop_t *loop) {
    uv_pipe_init(loop, &l->in, 0);
    uv_pipe_init(loop, &l->out, 0);
    uv_pipe_init(loop, &l->err, 0);
    uv_timer_init(loop, &l->kill_timer);
    l->in.data = l->out.data = l->err.data = l->kill_timer.data = l->proc.data = l;
    l->open = 4; /* the pipes and the kill timer */
    return 0;
}

/* Not the gateway's environment: mcpg_child_env's baseline, the variables
 * inherit_env names, then env. The gateway's tokens and credentials reach
 * the upstream's program only when the operator names them. */
static char **child_env(const mcp_settings *s) {
    size_t ni = 0, ne = 0;
    while (s->inherit && s->inherit[ni]) ni++;
    while (s->envp && s->envp[ne]) ne++;
    return mcpg_child_env((const char *const *)s->inherit, ni, (const char *const *)s->envp, ne);
}

static int stdio_start(mcp_link *base) {
    link_stdio *l = (link_stdio *)base;
    upstream *up = base->up;
    if (l->open) { /* the last child's handles are still closing */
        up_link_down(up, "the previous upstream process is still being cleaned up");
        return -1;
    }
    char **env = child_env(&up->cfg);
    if (!env) {
        up_link_down(up, "out of memory building the upstream program's environment");
        return -1;
    }
    init_handles(l, &up->loop);
    uv_stdio_container_t io[3] = {
        {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&l->in},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&l->out},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&l->err},
    };
    uv_process_options_t o = {
        .exit_cb = on_exit_cb,
        .file = up->cfg.argv[0],
        .args = up->cfg.argv,
        .env = env,
        .cwd = up->cfg.c->cwd,
        .flags = UV_PROCESS_DETACHED, /* its own process group: stopped as a whole */
        .stdio_count = 3,
        .stdio = io,
    };
    l->stopping = false;
    l->line.len = l->errline.len = 0;
    int rc = uv_spawn(&up->loop, &l->proc, &o);
    mcpg_child_env_free(env);
    if (rc) { /* the four handles counted close; the process handle uncounted */
        close_pipes(l);
        close_one(l, (uv_handle_t *)&l->kill_timer);
        uv_close((uv_handle_t *)&l->proc, NULL);
        char why[512];
        snprintf(why, sizeof why, "could not start \"%s\": %s", up->cfg.argv[0], uv_strerror(rc));
        up_link_down(up, why);
        return -1;
    }
    l->running = true;
    l->open++; /* the process handle, closed once it has exited */
    uv_read_start((uv_stream_t *)&l->out, on_alloc, on_stdout);
    uv_read_start((uv_stream_t *)&l->err, on_alloc, on_stderr);
    up->h->log(up->self, MCPG_LOG_INFO, "started upstream process %d: %s", l->proc.pid,
               up->cfg.argv[0]);
    up_link_up(up);
    return 0;
}

static void on_written(uv_write_t *w, int status) {
    (void)status; /* a broken pipe shows as the child's exit */
    free(w);
}

static int stdio_send(mcp_link *base, const char *json, size_t n, up_request *r) {
    (void)r;
    link_stdio *l = (link_stdio *)base;
    if (!l->running || uv_is_closing((uv_handle_t *)&l->in)) return MCPG_EUNAVAIL;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&l->in) > WRITE_QUEUE_MAX) return MCPG_EAGAIN;
    uv_write_t *w = malloc(sizeof *w + n + 1);
    if (!w) return MCPG_ENOMEM;
    char *copy = (char *)(w + 1);
    memcpy(copy, json, n);
    copy[n] = '\n';
    uv_buf_t b = uv_buf_init(copy, (unsigned)(n + 1));
    int rc = uv_write(w, (uv_stream_t *)&l->in, &b, 1, on_written);
    if (rc) free(w);
    return rc ? MCPG_EUNAVAIL : 0;
}

/* Close stdin (a well-behaved server exits on EOF), SIGTERM the group,
 * SIGKILL it if it is still there KILL_AFTER_MS later. */
static void stdio_stop(mcp_link *base) {
    link_stdio *l = (link_stdio *)base;
    l->stopping = true;
    if (!l->running) return;
    close_one(l, (uv_handle_t *)&l->in);
    uv_kill(-l->proc.pid, SIGTERM);
    uv_timer_start(&l->kill_timer, on_kill_timer, KILL_AFTER_MS, 0);
}

static void stdio_destroy(mcp_link *base) {
    link_stdio *l = (link_stdio *)base;
    mcpg_buf_free(&l->line);
    mcpg_buf_free(&l->errline);
    free(l);
}

static const mcp_link_ops STDIO_OPS = {
    .what = "stdio",
    .start = stdio_start,
    .send = stdio_send,
    .stop = stdio_stop,
    .destroy = stdio_destroy,
};

mcp_link *link_stdio_new(upstream *up) {
    link_stdio *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->base.ops = &STDIO_OPS;
    l->base.up = up;
    return &l->base;
}
