/* The kernel tests' transport stand-in and kernel set-up (see probe.h). */
#include "probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *dup_bytes(const char *s, size_t n) {
    if (!s) return NULL;
    char *d = malloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void free_request(probe *p) {
    char *bufs[] = {p->args, p->id, p->user, p->name};
    for (size_t i = 0; i < 4; i++)
        if (bufs[i]) {
            memset(bufs[i], 'X', strlen(bufs[i])); /* a reused buffer, were it not freed */
            free(bufs[i]);
        }
    p->args = p->id = p->user = p->name = NULL;
}

static const char *probe_header(void *ctx, const char *lname, size_t *len) {
    probe *p = ctx;
    if (strcmp(lname, "x-test-user") != 0 || !p->user) return NULL;
    *len = strlen(p->user);
    return p->user;
}

static void msgs_add(probe *p, const char *s, size_t n) {
    if (p->msgs_len + n + 2 > sizeof p->msgs) return;
    memcpy(p->msgs + p->msgs_len, s, n);
    p->msgs_len += n;
    p->msgs[p->msgs_len++] = '\n';
    p->msgs[p->msgs_len] = '\0';
}

/* desc.message: on the call's loop, before the outcome. */
static int probe_message(void *ctx, mcpg_call *call, const char *json, size_t len) {
    probe *p = ctx;
    (void)call;
    pthread_mutex_lock(&p->lock);
    msgs_add(p, json, len);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

static void probe_complete(void *ctx, mcpg_call *call) {
    probe *p = ctx;
    mcpg_call_outcome o = {.size = sizeof o};
    call_outcome(call, &o);
    pthread_mutex_lock(&p->lock);
    msgs_add(p, "OUTCOME", 7);
    p->is_error = o.is_error;
    p->code = o.error_code;
    p->http = o.http_status;
    if (o.is_error)
        snprintf(p->text, sizeof p->text, "%s", o.error_message);
    else
        snprintf(p->text, sizeof p->text, "%.*s", (int)o.result_len, o.result);
    if (p->at_complete) p->at_complete(p, call);
    call_release(call);
    p->call = NULL;
    free_request(p);
    p->t_done = mono_us();
    p->done = true;
    /* answered inside call_submit: submit_now still uses p, and lets the
     * test go on once it no longer does */
    if (!p->in_submit) pthread_cond_signal(&p->done_cv);
    pthread_mutex_unlock(&p->lock);
}

static void submit_now(probe *p) {
    p->t_submit = mono_us();
    mcpg_call *c = NULL;
    pthread_mutex_lock(&p->lock);
    p->in_submit = true;
    pthread_mutex_unlock(&p->lock);
    int rc = call_submit(&kernel.workers[0], &p->desc, &c);
    pthread_mutex_lock(&p->lock);
    p->in_submit = false;
    p->submit_rc = rc;
    if (!p->done && rc == 0) p->call = c; /* else answered inside submit, already released */
    if (rc) {
        free_request(p);
        p->done = true;
    }
    if (p->done) pthread_cond_signal(&p->done_cv);
    pthread_mutex_unlock(&p->lock); /* the last touch of p on this thread */
}

/* Submitting from the prepare phase, as a transport does when it parses
 * pipelined requests it had to hold back. One handle for the whole test,
 * only started and stopped (a closing handle would itself keep the next poll
 * from blocking); the kernel's stop closes it. */
static uv_prepare_t prep;
static bool prep_ready;

static void submit_in_prepare(uv_prepare_t *h) {
    uv_prepare_stop(h);
    submit_now(h->data);
}

static void submit_on_loop(void *arg) {
    probe *p = arg;
    if (!p->from_prepare) {
        submit_now(p);
        return;
    }
    if (!prep_ready) uv_prepare_init(&kernel.workers[0].loop, &prep);
    prep_ready = true;
    prep.data = p;
    uv_prepare_start(&prep, submit_in_prepare);
}

void probe_start(probe *p, const char *method, const char *tool, size_t tool_len,
                 const char *args, const char *id, const char *user) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    p->args = dup_bytes(args, args ? strlen(args) : 0);
    p->id = dup_bytes(id, strlen(id));
    p->user = dup_bytes(user, user ? strlen(user) : 0);
    p->name = dup_bytes(tool, tool_len);
    p->desc = (mcpg_call_desc){.size = sizeof p->desc, .wire = MCPG_WIRE_STATELESS,
                               .method = method, .method_len = strlen(method),
                               .name = p->name, .name_len = tool ? tool_len : 0,
                               .args_json = p->args, .args_len = args ? strlen(args) : 0,
                               .id_json = p->id, .id_len = strlen(id), .transport_ctx = p,
                               .header = probe_header, .complete = probe_complete,
                               .message = probe_message};
    p->post.fn = submit_on_loop;
    p->post.arg = p;
}

void probe_legacy(probe *p, const char *session) {
    p->desc.wire = MCPG_WIRE_LEGACY;
    p->desc.session_id = session;
    p->desc.session_id_len = strlen(session);
}

void probe_submit(probe *p) { worker_post(&kernel.workers[0], &p->post); }

void probe_join(probe *p) {
    pthread_mutex_lock(&p->lock);
    while (!p->done || p->in_submit) pthread_cond_wait(&p->done_cv, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

void probe_wait(probe *p) {
    probe_submit(p);
    probe_join(p);
}

void probe_run(probe *p, const char *method, const char *tool, const char *args,
               const char *id, const char *user) {
    probe_start(p, method, tool, tool ? strlen(tool) : 0, args, id, user);
    probe_wait(p);
}

typedef struct on_loop {
    mcpg_post post;
    void (*fn)(void *);
    void *arg;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool done;
} on_loop;

static void on_loop_run(void *arg) {
    on_loop *o = arg;
    o->fn(o->arg);
    pthread_mutex_lock(&o->lock);
    o->done = true;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->lock);
}

void probe_on_loop(void (*fn)(void *), void *arg) {
    on_loop o = {.post = {.fn = on_loop_run}, .fn = fn, .arg = arg};
    o.post.arg = &o;
    pthread_mutex_init(&o.lock, NULL);
    pthread_cond_init(&o.cv, NULL);
    worker_post(&kernel.workers[0], &o.post);
    pthread_mutex_lock(&o.lock);
    while (!o.done) pthread_cond_wait(&o.cv, &o.lock);
    pthread_mutex_unlock(&o.lock);
    pthread_mutex_destroy(&o.lock);
    pthread_cond_destroy(&o.cv);
}

/* ---- the kernel of a test ---- */

static char *write_text(const char *dir, const char *name, const char *text) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

generation *kernel_generation(const char *dir, const char *name, const char *manifest_text,
                              const char *modules_dir, manifest **m_out) {
    errlist errs = {0};
    const char *path = write_text(dir, name, manifest_text);
    manifest *m = path ? manifest_load(path, NULL, modules_dir, &errs) : NULL;
    generation *g = m ? generation_build(m, &errs) : NULL;
    errlist_print(&errs);
    errlist_free(&errs);
    if (g && generation_start(g) != 0) {
        generation_stop(g);
        generation_free(g);
        g = NULL;
    }
    if (!g) {
        manifest_free(m);
        m = NULL;
    }
    *m_out = m;
    return g;
}

generation *kernel_up(const char *dir, const char *name, const char *manifest_text,
                      const char *modules_dir) {
    manifest *m;
    generation *g = kernel_generation(dir, name, manifest_text, modules_dir, &m);
    if (!g) return NULL;
    klog_init(m->log_level);
    kernel.m = m;
    kernel.max_calls_per_worker = 64;
    kernel.workers = calloc(1, sizeof *kernel.workers);
    kernel.n_workers = 1;
    kernel.gen = g;
    if (pool_start(2, 8) != 0 || workers_start() != 0) return NULL;
    return g;
}

void kernel_down_keep_gen(void) {
    workers_drain();
    for (int i = 0; i < 300 && !workers_idle(); i++) usleep(10000);
    workers_stop();
    pool_stop();
    generation_stop(kernel.gen);
    workers_free();
}

void kernel_free_gen(void) {
    generation_free(kernel.gen);
    manifest_free(kernel.m);
    kernel.gen = NULL;
    kernel.m = NULL;
}

void kernel_down(void) {
    kernel_down_keep_gen();
    kernel_free_gen();
}

void remove_test_dir(const char *dir) {
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int count_lines(const char *path, const char *needle1, const char *needle2) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle1) && (!needle2 || strstr(line, needle2))) n++;
    fclose(f);
    return n;
}

long long file_number(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096], pat[128];
    snprintf(pat, sizeof pat, "%s=", key);
    long long v = -1;
    while (v < 0 && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, pat);
        if (at) v = atoll(at + strlen(pat));
    }
    fclose(f);
    return v;
}
