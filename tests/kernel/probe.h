/* Kernel tests drive the kernel library directly (no HTTP): a probe plays
 * the transport for one call on worker 0 and the test's main thread waits
 * for its answer. Like a real transport, the probe owns the request's bytes
 * (heap copies) and frees them once the call has completed, so a module that
 * reads them after that is caught by ASan. */
#ifndef MCPG_TEST_PROBE_H
#define MCPG_TEST_PROBE_H

#include "kernel.h"

typedef struct probe {
    mcpg_call_desc desc;
    char *args, *id, *user, *name; /* the request's bytes, freed at complete */
    size_t name_len;
    bool from_prepare;             /* submit from a uv_prepare callback */
    mcpg_post post;
    pthread_mutex_t lock;
    pthread_cond_t done_cv;
    bool done;                     /* answered */
    bool in_submit;                /* the loop is still inside call_submit for it */
    int submit_rc;
    mcpg_call *call;               /* the transport's handle, until complete */
    /* Run on the loop at complete, before the handle is released (tests of
     * what a handle reaches while its call is live). */
    void (*at_complete)(struct probe *p, mcpg_call *call);
    int is_error;
    int64_t code;
    int http;
    uint64_t t_submit, t_done;     /* mono_us */
    char text[4096];
    char msgs[8192];               /* messages before the outcome, one a line, then "OUTCOME" */
    size_t msgs_len;
} probe;

/* Make the prepared call come in on the legacy wire with this session. */
void probe_legacy(probe *p, const char *session);

/* Prepare a call (tool may hold a NUL: tool_len says how long it is). */
void probe_start(probe *p, const char *method, const char *tool, size_t tool_len,
                 const char *args, const char *id, const char *user);
/* Submit it on worker 0 and wait for the answer. */
void probe_wait(probe *p);
/* Submit it on worker 0 and return at once; probe_join waits for the answer. */
void probe_submit(probe *p);
void probe_join(probe *p);
/* probe_start + probe_wait. */
void probe_run(probe *p, const char *method, const char *tool, const char *args,
               const char *id, const char *user);
/* Run fn(arg) on worker 0's loop and wait until it returned. */
void probe_on_loop(void (*fn)(void *), void *arg);
static inline uint64_t probe_elapsed_ms(const probe *p) {
    return (p->t_done - p->t_submit) / 1000;
}

/* The kernel of a test: manifest text written to dir/name, loaded with the
 * modules of modules_dir, one worker, a pool of 2. kernel_up returns the
 * generation (also kernel.gen), or NULL with the errors printed. */
generation *kernel_up(const char *dir, const char *name, const char *manifest_text,
                      const char *modules_dir);
/* A further generation from manifest text, started (not published). */
generation *kernel_generation(const char *dir, const char *name, const char *manifest_text,
                              const char *modules_dir, manifest **m_out);
/* Drain, stop the loops and the pool, stop and free kernel.gen and its manifest. */
void kernel_down(void);
/* The same in two steps, to look at the stopped generation in between. */
void kernel_down_keep_gen(void);
void kernel_free_gen(void);

/* Remove a test's temporary directory and all it holds (said on stderr
 * when it cannot be). */
void remove_test_dir(const char *dir);

/* Lines of the file at path holding needle (and needle2 when not NULL); -1
 * when it cannot be read. */
int count_lines(const char *path, const char *needle1, const char *needle2);
/* The number after "key=" on the first line holding it, or -1. */
long long file_number(const char *path, const char *key);

#endif
