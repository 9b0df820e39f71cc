/* backend_command: spawn the program with libuv on the call's loop (never a
 * shell, never blocking), read its output under a cap, kill its process
 * group on timeout, overflow or cancel, and map how it ended to an answer. */
#define _GNU_SOURCE
#include "cmd_run.h"

#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef enum { END_EXIT, END_TIMEOUT, END_OVER, END_CANCELLED, END_SPAWN } cmd_end;

struct cmd_run {
    const mcpg_host *h;
    mcpg_instance *self;
    mcpg_call *call; /* NULL once answered */
    void **slot;
    char **argv;     /* argv[0] is the program's path; NULL-terminated */
    size_t argc;
    char **envp;     /* the tool's envp, copied; NULL-terminated, never NULL itself */
    size_t envc;
    char *input;     /* stdin text, or NULL */
    size_t input_len;
    int64_t timeout_ms, cap;
    uv_process_t proc;
    uv_pipe_t in, out, err;
    uv_timer_t timer;
    uv_write_t wr;
    mcpg_post post;
    char *obuf, *ebuf;
    size_t olen, elen;
    int open;        /* handles not yet closed */
    int eofs;        /* stdout and stderr at end */
    int exited, running;
    int64_t status;
    int signal;
    cmd_end end;
    int spawn_err;
};

/* ------------------------------------------------------------------ */
/* preparing the argv                                                  */

static void strv_free(char **v, size_t n) {
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

static void run_free(cmd_run *r) {
    strv_free(r->argv, r->argc);
    strv_free(r->envp, r->envc);
    free(r->input);
    free(r->obuf);
    free(r->ebuf);
    free(r);
}

/* The value of argument `name`: a string decoded, a number as written. */
static char *arg_value(const mcpg_host *h, mcpg_call *call, const char *name) {
    size_t alen = 0;
    const char *args = h->call_args(call, &alen);
    mcpg_json_span v;
    if (!args || h->json_object_get(args, alen, name, &v) != 1) {
        mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS,
                           "Invalid params: missing argument '%s'", name);
        return NULL;
    }
    if (v.type == MCPG_JSON_NUMBER) return strndup(v.p, v.n);
    char *s = v.type == MCPG_JSON_STRING ? malloc(v.n + 1) : NULL;
    size_t n = 0;
    if (!s || h->json_string_decode(&v, s, v.n + 1, &n) < 0 || strlen(s) != n) {
        free(s);
        mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS,
                           "Invalid params: argument '%s' must be a string or a number "
                           "(without NUL)", name);
        return NULL;
    }
    return s;
}

/* The placeholder written at p ("{name}"), or nplaceholders when p is
 * template text. */
static size_t placeholder_at(const char *p, const cmd_tool *t) {
    if (*p != '{') return t->nplaceholders;
    for (size_t i = 0; i < t->nplaceholders; i++) {
        size_t n = strlen(t->placeholders[i]);
        if (strncmp(p + 1, t->placeholders[i], n) == 0 && p[1 + n] == '}') return i;
    }
    return t->nplaceholders;
}

/* One argv element: each {placeholder} of the template replaced. */
static char *expand(const char *tpl, const cmd_tool *t, char *const *vals) {
    size_t cap = strlen(tpl) + 1, len = 0;
    for (size_t i = 0; i < t->nplaceholders; i++) cap += strlen(vals[i]) * 4;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (const char *p = tpl; *p;) {
        size_t i = placeholder_at(p, t);
        if (i < t->nplaceholders) {
            size_t vn = strlen(vals[i]);
            if (len + vn + 1 > cap) { /* more uses than the estimate allowed */
                char *nb = realloc(out, cap = (len + vn + 1) * 2);
                if (!nb) return free(out), NULL;
                out = nb;
            }
            memcpy(out + len, vals[i], vn);
            len += vn;
            p += strlen(t->placeholders[i]) + 2;
        } else {
            if (len + 2 > cap) {
                char *nb = realloc(out, cap *= 2);
                if (!nb) return free(out), NULL;
                out = nb;
            }
            out[len++] = *p++;
        }
    }
    out[len] = '\0';
    return out;
}

/* The placeholder whose value begins the element tpl expands to, or
 * nplaceholders when the template's own text does (or nothing does).
 * Empty values are stepped over: "{a}{b}" with a = "" begins with b. */
static size_t leading_placeholder(const char *tpl, const cmd_tool *t, char *const *vals) {
    for (const char *p = tpl;;) {
        size_t i = placeholder_at(p, t);
        if (i == t->nplaceholders || vals[i][0]) return i;
        p += strlen(t->placeholders[i]) + 2;
    }
}

static const char *program_name(const cmd_tool *t) {
    const char *slash = strrchr(t->path, '/');
    return slash ? slash + 1 : t->path;
}

/* A caller's value that begins an argv element with '-' ("-rf",
 * "--output=/etc/passwd", "-") would be read by the program as an option of
 * the caller's choosing, unless an earlier element of the template is "--",
 * the getopt convention for "no options after this". Refused with -32602
 * rather than run; the template's own text ("--file={path}", "./{name}")
 * puts the value out of an option's place and is never refused. */
static int refuse_option_values(const mcpg_host *h, mcpg_call *call, const cmd_tool *t,
                                char *const *vals) {
    for (size_t k = 0; k < t->nargs; k++) {
        if (strcmp(t->args[k], "--") == 0) return 0;
        size_t i = leading_placeholder(t->args[k], t, vals);
        if (i < t->nplaceholders && vals[i][0] == '-') {
            mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS,
                               "Invalid params: argument '%.64s' starts with '-', which %.64s "
                               "would read as an option; the tool's args need a \"--\" before "
                               "it", t->placeholders[i], program_name(t));
            return -1;
        }
    }
    return 0;
}

static int build_argv(cmd_run *r, const cmd_tool *t, char *const *vals) {
    r->argv = calloc(t->nargs + 2, sizeof *r->argv);
    if (!r->argv || !(r->argv[0] = strdup(t->path))) return -1;
    r->argc = 1;
    for (size_t i = 0; i < t->nargs; i++, r->argc++)
        if (!(r->argv[r->argc] = expand(t->args[i], t, vals))) return -1;
    return 0;
}

/* The tool's environment (fixed at load, never the gateway's own: see
 * cmd_child_env), copied so the run owns everything it spawns with. */
static int build_env(cmd_run *r, const cmd_tool *t) {
    r->envp = calloc(t->nenvp + 1, sizeof *r->envp);
    if (!r->envp) return -1;
    for (; r->envc < t->nenvp; r->envc++)
        if (!(r->envp[r->envc] = strdup(t->envp[r->envc]))) return -1;
    return 0;
}

cmd_run *cmd_run_prepare(const mcpg_host *h, mcpg_instance *self, const cmd_tool *t,
                         mcpg_call *call) {
    cmd_run *r = calloc(1, sizeof *r);
    char **vals = calloc(t->nplaceholders + 1, sizeof *vals);
    int ok = r && vals;
    for (size_t i = 0; ok && i < t->nplaceholders; i++)
        ok = (vals[i] = arg_value(h, call, t->placeholders[i])) != NULL;
    if (ok) ok = !refuse_option_values(h, call, t, vals); /* the call's error is set */
    if (ok && r) {
        *r = (cmd_run){.h = h, .self = self, .call = call, .slot = h->call_slot(call, self),
                       .timeout_ms = t->timeout_ms, .cap = t->max_output_bytes};
        int bad = build_argv(r, t, vals) || build_env(r, t);
        if (!bad && t->stdin_json) {
            size_t alen = 0;
            const char *args = h->call_args(call, &alen);
            bad = !(r->input = malloc(alen + 1));
            if (!bad) memcpy(r->input, args, r->input_len = alen);
        }
        if (bad) {
            h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
            ok = 0;
        }
    } else if (ok || !r || !vals) {
        h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    }
    strv_free(vals, t->nplaceholders);
    if (!ok && r) run_free(r), r = NULL;
    return r;
}

/* ------------------------------------------------------------------ */
/* answering                                                           */

static int text_result(const mcpg_host *h, mcpg_buf *b, const char *head, size_t hn,
                       const char *body, size_t bn, int is_error) {
    int rc = h->buf_append(b, "{\"content\":[{\"type\":\"text\",\"text\":\"", 35);
    if (!rc && hn) rc = h->buf_reserve(b, 6 * hn);
    if (!rc && hn) b->len += mcpg_json_escape(b->data + b->len, head, hn);
    if (!rc) rc = h->buf_reserve(b, 6 * bn + 64);
    if (!rc) {
        b->len += mcpg_json_escape(b->data + b->len, body, bn);
        b->data[b->len] = '\0';
        rc = h->buf_append(b, "\"}]", 3);
    }
    return rc ? rc : is_error ? h->buf_append(b, ",\"isError\":true", 15) : 0;
}

/* stdout that is one JSON object is the structured result too. */
static int is_json_object(const mcpg_host *h, const char *s, size_t n) {
    size_t i = 0;
    while (i < n && strchr(" \t\r\n", s[i])) i++;
    return i < n && s[i] == '{' && h->json_validate(s, n) == 0;
}

static void answer_exit(cmd_run *r) {
    const mcpg_host *h = r->h;
    mcpg_buf *b = h->call_result_buf(r->call);
    int rc = b ? 0 : MCPG_ENOMEM;
    if (!rc && !r->signal && r->status == 0) {
        rc = text_result(h, b, NULL, 0, r->obuf ? r->obuf : "", r->olen, 0);
        if (!rc && is_json_object(h, r->obuf ? r->obuf : "", r->olen)) {
            rc = h->buf_append(b, ",\"structuredContent\":", 21);
            if (!rc) rc = h->buf_append(b, r->obuf, r->olen);
        }
    } else if (!rc) {
        char head[64];
        int hn = r->signal ? snprintf(head, sizeof head, "killed by signal %d\n", r->signal)
                           : snprintf(head, sizeof head, "exit code %lld\n", (long long)r->status);
        rc = text_result(h, b, head, (size_t)hn, r->ebuf ? r->ebuf : "", r->elen, 1);
    }
    if (!rc) rc = h->buf_append(b, "}", 1);
    if (rc) h->call_error(r->call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    if (r->slot) *r->slot = NULL;
    mcpg_call *call = r->call;
    r->call = NULL;
    h->call_resume(call, rc ? MCPG_DENY : MCPG_CONTINUE);
}

static void answer_error(cmd_run *r, const char *fmt, ...) MCPG_PRINTF(2, 3);
static void answer_error(cmd_run *r, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->h->call_error(r->call, MCPG_RPC_SERVER_ERROR, msg, NULL);
    if (r->slot) *r->slot = NULL;
    mcpg_call *call = r->call;
    r->call = NULL;
    r->h->call_resume(call, MCPG_DENY);
}

static void answer(cmd_run *r) {
    if (!r->call) return;
    switch (r->end) {
    case END_TIMEOUT:
        return answer_error(r, "command timed out after %lld ms", (long long)r->timeout_ms);
    case END_OVER: return answer_error(r, "output exceeds %lld bytes", (long long)r->cap);
    case END_SPAWN:
        return answer_error(r, "cannot run %s: %s", r->argv[0], uv_strerror(r->spawn_err));
    case END_CANCELLED: return answer_error(r, "request cancelled");
    case END_EXIT: return answer_exit(r);
    }
}

/* ------------------------------------------------------------------ */
/* the process and its handles                                         */

static void on_closed(uv_handle_t *hd) {
    cmd_run *r = hd->data;
    if (--r->open == 0) run_free(r);
}

static void close_one(cmd_run *r, uv_handle_t *hd) {
    if (hd->data && !uv_is_closing(hd)) uv_close(hd, on_closed);
}

/* Everything closed once the process is gone: closing the process handle
 * earlier would leave the child unreaped. */
static void finish(cmd_run *r) {
    answer(r);
    close_one(r, (uv_handle_t *)&r->timer);
    close_one(r, (uv_handle_t *)&r->in);
    close_one(r, (uv_handle_t *)&r->out);
    close_one(r, (uv_handle_t *)&r->err);
    close_one(r, (uv_handle_t *)&r->proc);
}

static void kill_group(cmd_run *r, cmd_end why) {
    if (r->end == END_EXIT) r->end = why;
    if (r->running && !r->exited) kill(-r->proc.pid, SIGKILL); /* the whole group: setsid */
}

static void maybe_finish(cmd_run *r) {
    /* Killed: answer on exit, without waiting for pipes a stray holds. */
    if (r->exited && (r->eofs == 2 || r->end != END_EXIT)) finish(r);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig) {
    cmd_run *r = p->data;
    r->exited = 1;
    r->status = status;
    r->signal = sig;
    maybe_finish(r);
}

static void on_timeout(uv_timer_t *t) {
    cmd_run *r = t->data;
    kill_group(r, END_TIMEOUT);
    if (r->exited) finish(r); /* exited, but something kept its pipes open */
}

static void on_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *buf) {
    (void)hd;
    (void)hint;
    static _Thread_local char chunk[65536]; /* consumed inside on_read */
    *buf = uv_buf_init(chunk, sizeof chunk);
}

static int keep(cmd_run *r, char **dst, size_t *len, const char *p, size_t n) {
    if ((int64_t)(r->olen + r->elen + n) > r->cap) return -1;
    char *nb = realloc(*dst, *len + n + 1);
    if (!nb) return -1;
    memcpy(nb + *len, p, n);
    *len += n;
    nb[*len] = '\0';
    *dst = nb;
    return 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    cmd_run *r = s->data;
    int is_out = s == (uv_stream_t *)&r->out;
    if (n > 0 && r->end == END_EXIT) {
        if (keep(r, is_out ? &r->obuf : &r->ebuf, is_out ? &r->olen : &r->elen, buf->base,
                 (size_t)n) != 0) {
            kill_group(r, END_OVER);
            maybe_finish(r);
        }
        return;
    }
    if (n < 0) {
        uv_read_stop(s);
        r->eofs++;
        maybe_finish(r);
    }
}

static void on_written(uv_write_t *w, int status) {
    (void)status; /* EPIPE: the program did not read its input; its exit says the rest */
    cmd_run *r = w->data;
    close_one(r, (uv_handle_t *)&r->in); /* EOF on the program's stdin */
}

static int init_handle(cmd_run *r, uv_handle_t *hd) {
    hd->data = r;
    r->open++;
    return 0;
}

static void start_input(cmd_run *r) {
    uv_buf_t b = uv_buf_init(r->input, (unsigned)r->input_len);
    r->wr.data = r;
    if (uv_write(&r->wr, (uv_stream_t *)&r->in, &b, 1, on_written) != 0)
        close_one(r, (uv_handle_t *)&r->in);
}

void cmd_run_start(cmd_run *r) {
    const mcpg_host *h = r->h;
    uv_loop_t *loop = h->worker_uv_loop(h->call_worker(r->call));
    uv_pipe_init(loop, &r->out, 0);
    init_handle(r, (uv_handle_t *)&r->out);
    uv_pipe_init(loop, &r->err, 0);
    init_handle(r, (uv_handle_t *)&r->err);
    if (r->input) {
        uv_pipe_init(loop, &r->in, 0);
        init_handle(r, (uv_handle_t *)&r->in);
    }
    uv_timer_init(loop, &r->timer);
    init_handle(r, (uv_handle_t *)&r->timer);
    uv_stdio_container_t io[3] = {
        {.flags = r->input ? UV_CREATE_PIPE | UV_READABLE_PIPE : UV_IGNORE,
         .data.stream = (uv_stream_t *)&r->in},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->out},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->err},
    };
    uv_process_options_t o = {.exit_cb = on_exit_cb, .file = r->argv[0], .args = r->argv,
                              .env = r->envp, .flags = UV_PROCESS_DETACHED, /* setsid */
                              .stdio_count = 3, .stdio = io};
    r->proc.data = r;
    if (r->slot) *r->slot = r; /* before anything can answer: cancel finds it */
    int rc = uv_spawn(loop, &r->proc, &o);
    init_handle(r, (uv_handle_t *)&r->proc); /* initialised even when the spawn failed */
    if (rc != 0) {
        r->end = END_SPAWN;
        r->spawn_err = rc;
        r->exited = 1;
        return finish(r);
    }
    r->running = 1;
    uv_read_start((uv_stream_t *)&r->out, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&r->err, on_alloc, on_read);
    if (r->input) start_input(r);
    uv_timer_start(&r->timer, on_timeout, (uint64_t)r->timeout_ms, 0);
}

static void posted(void *arg) {
    cmd_run *r = arg;
    if (!r->call) { /* cancelled before it started */
        run_free(r);
        return;
    }
    cmd_run_start(r);
}

int cmd_run_post(cmd_run *r) {
    r->post = (mcpg_post){.fn = posted, .arg = r};
    if (r->slot) *r->slot = r;
    int rc = r->h->worker_post(r->h->call_worker(r->call), &r->post);
    if (rc != 0) {
        if (r->slot) *r->slot = NULL;
        r->h->call_error(r->call, MCPG_RPC_SERVER_ERROR, "the gateway is stopping", NULL);
        run_free(r);
    }
    return rc;
}

void cmd_run_cancel(cmd_run *r) {
    if (!r->call) return;
    kill_group(r, END_CANCELLED);
    r->end = END_CANCELLED;
    answer(r);
    if (!r->running && r->open == 0) return; /* posted, not started: posted() frees it */
    maybe_finish(r);
}
