#define _GNU_SOURCE /* pthread_setname_np */
/* mcpg: the kernel's entry point.
 *
 *   mcpg --config FILE [--listen HOST:PORT]   run (MCPG_CONFIG may name FILE)
 *   mcpg --check --config FILE                validate: exit 0, or 2 with every error
 *   mcpg --version                            the version and the ABI version
 *   mcpg audit verify FILE...                 check an audit file's hash chain
 *   mcpg audit cat FILE... / tail [-n N] [-f] FILE   read its lines (not the room)
 *   mcpg modules [--module-dir DIR]           what the module folder holds
 *   mcpg new-module KIND NAME [DIR]           write a module folder to start from
 *
 * SIGTERM/SIGINT: stop accepting, let in-flight calls finish (bounded by
 * gateway.drain_timeout_ms), flush audit, exit 0. */
#include "kernel.h"
#include "new_module.h"
#include "sd_notify.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


typedef struct options {
    const char *help_module;
    const char *config;
    const char *listen;
    bool check;
} options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: mcpg --config FILE [--listen HOST:PORT]\n"
            "       mcpg --check --config FILE\n"
            "       mcpg --version\n"
            "       mcpg --help-module NAME   a module's description and config keys\n"
            "       mcpg --help-module gateway (or cluster)   the gateway's own settings\n"
            "       mcpg audit verify [--anchor A] FILE... an audit trail's hash chain, oldest file first\n"
            "       mcpg audit cat FILE...   an audit file's whole lines\n"
            "       mcpg audit tail [-n LINES] [-f] FILE   its last lines; -f: follow it, across rotation\n"
            "       mcpg modules [--module-dir DIR | --config FILE] [--hash] [--json]   the modules a folder holds\n"
            "       mcpg new-module KIND NAME [DIR]   write a module's source, test, build and manifest\n"
            "       mcpg pins diff --config FILE   the definitions seen against their pins\n"
            "       mcpg pins approve --config FILE [--backend NAME] [ITEM...]   pin what is seen\n"
            "MCPG_CONFIG may name the manifest instead of --config.\n");
}

static int parse_args(int argc, char **argv, options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--version") == 0) {
            printf("mcpg %s (ABI %d.%d)\n", MCPG_VERSION, MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
            exit(0);
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--help-module") == 0 && i + 1 < argc) {
            o->help_module = argv[++i];
            return 0;
        } else if (strcmp(a, "--check") == 0) {
            o->check = true;
        } else if ((strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) && i + 1 < argc) {
            o->config = argv[++i];
        } else if (strcmp(a, "--listen") == 0 && i + 1 < argc) {
            o->listen = argv[++i];
        } else {
            fprintf(stderr, "mcpg: unknown or incomplete argument \"%s\"\n", a);
            usage(stderr);
            return -1;
        }
    }
    if (!o->config) o->config = getenv("MCPG_CONFIG");
    if (!o->config || !*o->config) {
        fprintf(stderr, "mcpg: no manifest: pass --config FILE or set MCPG_CONFIG\n");
        return -1;
    }
    return 0;
}

static void exe_dir(char *out, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0) {
        snprintf(out, cap, ".");
        return;
    }
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (slash) *slash = '\0';
}

/* ---- the main loop: signals and the drain ---- */

typedef struct main_loop {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t drain_check;
    uint64_t drain_deadline;
    bool forced; /* the deadline passed once: connections were told to close now */
} main_loop;

static void on_drain_check(uv_timer_t *t) {
    main_loop *ml = t->data;
    bool idle = workers_idle();
    if (!idle && mono_us() < ml->drain_deadline) return;
    if (!idle && !ml->forced) {
        /* a second drain tells the transport to close every connection now;
         * give the closes a moment to finish cleanly */
        klog(MCPG_LOG_WARN, "kernel", "drain deadline passed with calls still in flight: closing connections");
        ml->forced = true;
        workers_drain();
        ml->drain_deadline = mono_us() + 500 * 1000;
        return;
    }
    if (!idle) klog(MCPG_LOG_WARN, "kernel", "stopping with calls still in flight");
    uv_stop(&ml->loop);
}

static void on_stop_signal(uv_signal_t *s, int signum) {
    main_loop *ml = s->data;
    if (atomic_exchange(&kernel.draining, true)) return;
    klog(MCPG_LOG_INFO, "kernel", "%s: draining in-flight calls", strsignal(signum));
    sd_notify_stopping();
    workers_drain();
    ml->drain_deadline = mono_us() + (uint64_t)kernel.m->drain_timeout_ms * 1000;
    uv_timer_start(&ml->drain_check, on_drain_check, 5, 5);
}

static void on_sighup(uv_signal_t *s, int signum) {
    (void)s;
    (void)signum;
    klog(MCPG_LOG_INFO, "kernel", "SIGHUP: reloading %s", kernel.m->path);
    reload_on_signal();
}

static void close_handle(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* The stop signals are blocked from the start of main (every thread
 * inherits that), so one that arrives while the gateway is still loading
 * its modules stays pending instead of killing it with its copies left in
 * the runtime folder; the main thread takes them once its handlers exist. */
static void stop_signals(int how) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(how, &set, NULL);
}

static main_loop ml;
static const char *exe_folder, *listen_override; /* what a reload reads the manifest with */

/* Before the instances start, so that news they give at start (a backend
 * whose lists arrive) has a loop to wake. */
static void main_loop_init(void) {
    uv_loop_init(&ml.loop);
    news_control_init(&ml.loop);
    pins_control_init(&ml.loop);
    pins_fleet_control_init(&ml.loop);
    ready_control_init(&ml.loop);
    reload_init(&ml.loop, exe_folder, listen_override);
}

static void run_main_loop(void) {
    uv_signal_init(&ml.loop, &ml.sigterm);
    uv_signal_init(&ml.loop, &ml.sigint);
    uv_signal_init(&ml.loop, &ml.sighup);
    uv_timer_init(&ml.loop, &ml.drain_check);
    ml.sigterm.data = ml.sigint.data = ml.sighup.data = ml.drain_check.data = &ml;
    uv_signal_start(&ml.sigterm, on_stop_signal, SIGTERM);
    uv_signal_start(&ml.sigint, on_stop_signal, SIGINT);
    uv_signal_start(&ml.sighup, on_sighup, SIGHUP);
    stop_signals(SIG_UNBLOCK);
    uv_run(&ml.loop, UV_RUN_DEFAULT);
}

/* After the loops and the pool have stopped: nothing can wake the main
 * loop any more (a loop finishing a reload step, a backend's news). */
static void main_loop_close(void) {
    uv_walk(&ml.loop, close_handle, NULL);
    uv_run(&ml.loop, UV_RUN_DEFAULT);
    uv_loop_close(&ml.loop);
}

/* The key a log line's source is about: an instance's ("[kind:module:name]")
 * config key; the kernel's is the manifest's root. */
static void key_of_source(const void *ctx, const char *src, char *out, size_t cap) {
    const char *colon = strrchr(src, ':');
    size_t len = colon ? strlen(colon + 1) : 0;
    if (src[0] != '[' || len < 2 || colon[len] != ']') {
        snprintf(out, cap, "(root)");
        return;
    }
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(len - 1), colon + 1);
    manifest_config_key(ctx, name, out, cap);
}

static int check_only(manifest *m) {
    errlist errs = {0};
    klog_check_mode(m->path, key_of_source, m);
    pins_seen_off(); /* a check reads; it writes nothing */
    metrics_init(0); /* instances may register their series at create() */
    generation *g = generation_build(m, &errs); /* create() proves configs and bindings */
    if (g) generation_warn_open(g, m->listen, m->n_listen);
    generation_free(g);
    metrics_shutdown();
    metrics_tools_free();
    errlist_print(&errs);
    int rc = errs.count ? 2 : 0;
    errlist_free(&errs);
    return rc;
}

/* Which instance did not start, at the key its config is written at (the
 * instance logged why just before). */
static void say_start_failed(const manifest *m, const generation *g) {
    if (!g->failed) {
        klog(MCPG_LOG_ERROR, "kernel", "could not start");
        return;
    }
    char key[160];
    manifest_config_key(m, g->failed, key, sizeof key);
    fprintf(stderr, "%s: %s: instance \"%s\" could not start: %s\n", m->path, key, g->failed,
            mcpg_strerror(g->failed_rc));
}

/* How long the exit waits for a backend call still running on the pool
 * once the drain (and its deadline) is over. */
#define STUCK_BACKEND_GRACE_MS 1000

/* Everything serve() started, stopped once the drain is over (or its
 * deadline passed). Order matters: the loops end first; then the pool (a
 * backend still running finishes, queued ones are dropped), so that no
 * module code runs when the instances stop; the worker structs outlive both,
 * since pool and module threads may post to them until then; the generation
 * goes last, once no call (not even an abandoned one) pins it.
 *   loops → pool → instances → workers_free → generation_free */
static void shutdown_gateway(void) {
    workers_stop();
    if (pool_stop_within(STUCK_BACKEND_GRACE_MS) != 0) {
        /* A backend call that never returns must not hold the exit hostage.
         * Its thread may still use its module, so nothing is unloaded: the
         * audit sinks write out what they hold, and the process ends. */
        klog(MCPG_LOG_ERROR, "kernel",
             "a backend call is still running %d ms after the loops stopped: exiting without it",
             STUCK_BACKEND_GRACE_MS);
        generation_stop_kind(kernel.gen, MCPG_KIND_AUDIT);
        _exit(0);
    }
    generation_stop(kernel.gen);
    reload_shutdown(); /* a generation still retiring */
    if (calls_dropped())
        klog(MCPG_LOG_WARN, "kernel", "%lu call(s) still in flight at the stop were dropped",
             calls_dropped());
    workers_free();
    pins_fleet_free();
    reload_free(); /* the retiring generations, once no call points at them */
    generation_free(kernel.gen);
    metrics_shutdown(); /* every instance that registered a series is gone */
    metrics_tools_free();
    klog(MCPG_LOG_INFO, "kernel", "stopped");
}

/* serve owns m: the generation holds what it needs of it (a reload's
 * generation holds another), so its images go when the last instance using
 * them does. */
static int serve(manifest *m) {
    errlist errs = {0};
    kernel.m = m;
    kernel.max_calls_per_worker = (uint64_t)m->max_calls_per_worker;
    kernel.list_page_size = (uint64_t)m->list_page_size;
    char *runtime_dir = strdup(m->runtime_dir ? m->runtime_dir : "");
    pthread_setname_np(pthread_self(), "mcpg-main"); /* top -H: the control thread */
    crash_init(runtime_dir);
    if (workers_bind(m, &errs) == 0) {
        if (metrics_init(kernel.n_workers) != 0) errlist_add(&errs, m->path, "", "out of memory");
        else kernel.gen = generation_build(m, &errs);
    }
    manifest_free(m); /* the loader's reference; the generation keeps its own */
    if (errs.count) {
        errlist_print(&errs);
        errlist_free(&errs);
        metrics_shutdown();
        metrics_tools_free();
        free(runtime_dir);
        return 1;
    }
    m = kernel.m;
    generation_warn_open(kernel.gen, m->listen, m->n_listen);
    main_loop_init();
    if (pool_start((unsigned)m->pool_threads, (unsigned)m->pool_queue) != 0 ||
        generation_start(kernel.gen) != 0) {
        /* e.g. an audit file that cannot be opened: stop the instances that
         * did start (their threads) before main unloads their images */
        say_start_failed(m, kernel.gen);
        pool_stop();
        generation_stop(kernel.gen);
        generation_free(kernel.gen);
        metrics_shutdown();
        metrics_tools_free();
        free(runtime_dir);
        return 1;
    }
    pins_fleet_start(); /* before loop 0 runs: it puts the file unless the fleet has pins */
    if (workers_start() != 0) { /* threads may be running: exit without unloading */
        klog(MCPG_LOG_ERROR, "kernel", "could not start the worker threads");
        _exit(1);
    }
    pins_announce(kernel.gen); /* what the first lists found, now that the sinks run */
    for (size_t i = 0; i < m->n_listen; i++)
        klog(MCPG_LOG_INFO, "kernel", "listening on %s://%s/mcp (%u workers, generation %u)",
             manifest_scheme(m), m->listen[i], kernel.n_workers, kernel.gen->id);
    run_main_loop();
    shutdown_gateway();
    main_loop_close();
    if (*runtime_dir) rmdir(runtime_dir); /* empty once every copy is unloaded */
    free(runtime_dir);
    return 0;
}

int audit_command(int argc, char **argv); /* audit_verify.c */

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "audit") == 0) return audit_command(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "new-module") == 0)
        return new_module_command(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "pins") == 0) {
        char here[PATH_MAX];
        exe_dir(here, sizeof here);
        return pins_command(argc - 1, argv + 1, here);
    }
    if (argc > 1 && strcmp(argv[1], "modules") == 0) {
        char here[PATH_MAX];
        exe_dir(here, sizeof here);
        return modules_command(argc - 1, argv + 1, here);
    }
    options o = {0};
    if (parse_args(argc, argv, &o)) return 2;
    if (o.help_module) {
        char here[PATH_MAX];
        exe_dir(here, sizeof here);
        return module_help(o.help_module, here);
    }
    signal(SIGPIPE, SIG_IGN);
    if (!o.check) stop_signals(SIG_BLOCK);
    char dir[PATH_MAX];
    exe_dir(dir, sizeof dir);
    exe_folder = dir;
    listen_override = o.listen;
    errlist errs = {0};
    if (o.check) klog_check_mode(o.config, NULL, NULL); /* what validate() ops warn about */
    manifest *m = manifest_load(o.config, o.listen, dir, &errs);
    if (!m) {
        errlist_print(&errs);
        errlist_free(&errs);
        return 2;
    }
    klog_init(o.check ? MCPG_LOG_WARN : m->log_level); /* --check shows every warning */
    if (!o.check) return serve(m); /* it owns m */
    int rc = check_only(m);
    manifest_free(m);
    return rc;
}
