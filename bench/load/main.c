/* mcpg-load: options, the run's phases (warm-up, measured window, done),
 * the once-a-second tick and the exit status. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "load.h"

#define CONNECTIONS_MAX 10000u
#define TICK_MS 100u /* timeouts, reconnect back-off and progress share one timer */
#define EXIT_ERRORS 1
#define EXIT_USAGE 2

static void usage(FILE *out) {
    fputs("usage: mcpg-load [options]\n"
          "Closed-loop (or, with --rate, open-loop) load with MCP tools/call, every answer checked.\n"
          "  --url URL            http://IPv4:PORT/PATH or https://... (default http://127.0.0.1:8080/mcp);\n"
          "                       given up to 8 times (a fleet's replicas, same path and scheme): connection\n"
          "                       i talks to URL i % n\n"
          "  --spread S           connection (default) or call: with several URLs on the legacy wire, each\n"
          "                       of the -c slots keeps a connection to every URL and sends each call of\n"
          "                       its session to the next URL (every call on the next replica)\n"
          "  --churn              session churn instead of calls (legacy wire): each of -c clients opens\n"
          "                       a session on URL j % n, its GET stream on URL (j+1) % n, DELETEs the\n"
          "                       session on the first and waits for the stream to end; again and again\n"
          "  --stuck-after S      --churn: a stream not ended S s after its DELETE's answer is stuck (default 5)\n"
          "  --ca-file FILE       https: the CA (PEM) the server's certificate must chain to (default:\n"
          "                       the system's); the certificate must name the URL's IP address\n"
          "  --wire W             stateless (2026-07-28, default) or legacy (2025-11-25: a session\n"
          "                       per connection, opened once; answers as SSE or one JSON body)\n"
          "  -c, --connections N  keep-alive connections, one call in flight each (default 64)\n"
          "  --rate R             open loop: a call is due every 1/R s whatever the server does; it\n"
          "                       goes out on an idle connection (waits for one when all are busy)\n"
          "                       and its latency counts from when it was due (coordinated omission\n"
          "                       corrected); -c bounds the calls in flight\n"
          "  -d, --duration S     measured window in seconds (default 10)\n"
          "  -w, --warmup S       seconds of load before the window, not counted (default 2)\n"
          "  --max-calls N        end the window after N answers (good or bad)\n"
          "  --tool NAME[:W],...  tool to call (default echo); a list is a mix, each tool named by\n"
          "                       W of every sum-of-weights calls, interleaved (echo:3,lat5:1)\n"
          "  --message TEXT       arguments.message (default \"hello\")\n"
          "  --message-size N     arguments.message is N bytes of 'x' (payload-size runs)\n"
          "  --expect TEXT        an answer's body must contain TEXT\n"
          "  --header 'N: V'      add this header to every tools/call request (repeatable; e.g.\n"
          "                       an API key); not to the legacy wire's initialize\n"
          "  --no-id-check        accept any id (static baselines such as nginx cannot echo it)\n"
          "  --timeout S          a call without a complete answer after S seconds is an error (default 10)\n"
          "  --max-response BYTES largest answer body accepted (default 1048576)\n"
          "  --json               print one JSON line of the figures on stdout (the table goes to stderr)\n"
          "  --print-answer       print the first good answer's body on stdout\n"
          "  -q, --quiet          no progress lines\n"
          "Exit status: 0 all calls good, 1 any error (warm-up included) or no good call, 2 bad usage.\n",
          out);
}

static int parse_double(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* http://HOST:PORT/PATH (or https://) with an IPv4 literal ("localhost"
 * allowed): the calibration is loopback IPv4 and resolving names would only
 * add noise. */
static int parse_url(load_opts *o, const char *url) {
    const char *p = url;
    o->tls = strncmp(p, "https://", 8) == 0;
    if (!o->tls && strncmp(p, "http://", 7) != 0) return -1;
    p += o->tls ? 8 : 7;
    const char *slash = strchr(p, '/');
    size_t hp_len = slash ? (size_t)(slash - p) : strlen(p);
    if (hp_len == 0 || hp_len >= sizeof o->host_port) return -1;
    memcpy(o->host_port, p, hp_len);
    o->host_port[hp_len] = '\0';
    snprintf(o->path, sizeof o->path, "%s", slash ? slash : "/");
    if (strlen(slash ? slash : "/") >= sizeof o->path || strpbrk(o->path, " \r\n")) return -1;
    char host[64];
    uint64_t port = o->tls ? 443 : 80;
    char *colon = strrchr(o->host_port, ':');
    size_t host_len = colon ? (size_t)(colon - o->host_port) : hp_len;
    memcpy(host, o->host_port, host_len);
    host[host_len] = '\0';
    if (colon && parse_u64(colon + 1, 1, 65535, &port) < 0) return -1;
    if (strcmp(host, "localhost") == 0) strcpy(host, "127.0.0.1");
    return uv_ip4_addr(host, (int)port, &o->addr) == 0 ? 0 : -1;
}

enum {
    OPT_URL = 256,
    OPT_WIRE,
    OPT_MAX_CALLS,
    OPT_TOOL,
    OPT_MESSAGE,
    OPT_MESSAGE_SIZE,
    OPT_EXPECT,
    OPT_NO_ID,
    OPT_TIMEOUT,
    OPT_MAX_RESP,
    OPT_JSON,
    OPT_PRINT,
    OPT_HEADER,
    OPT_CA_FILE,
    OPT_RATE,
    OPT_SPREAD,
    OPT_CHURN,
    OPT_STUCK,
};

static const struct option long_opts[] = {
    {"url", required_argument, NULL, OPT_URL},
    {"wire", required_argument, NULL, OPT_WIRE},
    {"connections", required_argument, NULL, 'c'},
    {"duration", required_argument, NULL, 'd'},
    {"warmup", required_argument, NULL, 'w'},
    {"max-calls", required_argument, NULL, OPT_MAX_CALLS},
    {"tool", required_argument, NULL, OPT_TOOL},
    {"message", required_argument, NULL, OPT_MESSAGE},
    {"message-size", required_argument, NULL, OPT_MESSAGE_SIZE},
    {"expect", required_argument, NULL, OPT_EXPECT},
    {"no-id-check", no_argument, NULL, OPT_NO_ID},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"max-response", required_argument, NULL, OPT_MAX_RESP},
    {"json", no_argument, NULL, OPT_JSON},
    {"print-answer", no_argument, NULL, OPT_PRINT},
    {"header", required_argument, NULL, OPT_HEADER},
    {"ca-file", required_argument, NULL, OPT_CA_FILE},
    {"rate", required_argument, NULL, OPT_RATE},
    {"spread", required_argument, NULL, OPT_SPREAD},
    {"churn", no_argument, NULL, OPT_CHURN},
    {"stuck-after", required_argument, NULL, OPT_STUCK},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* --url: the first sets the path, scheme and Host every request carries; the
 * others (a fleet's replicas) must have the same path and scheme. */
static int add_url(load_opts *o, const char *url) {
    if (o->ntargets == 0) {
        o->url = url;
        if (parse_url(o, url) < 0) return -1;
        o->addrs[o->ntargets++] = o->addr;
        return 0;
    }
    if (o->ntargets >= LOAD_TARGETS_MAX) return -1;
    load_opts other = *o;
    if (parse_url(&other, url) < 0 || other.tls != o->tls || strcmp(other.path, o->path) != 0) return -1;
    o->addrs[o->ntargets++] = other.addr;
    return 0;
}

/* "Name: value" with a token name and no line breaks, appended as a line. */
static int add_header(load_opts *o, const char *h) {
    const char *colon = strchr(h, ':');
    size_t n = strlen(h);
    if (!colon || colon == h || strpbrk(h, "\r\n") || o->headers_len + n + 2 >= sizeof o->headers)
        return -1;
    for (const char *p = h; p < colon; p++)
        if (*p <= ' ' || *p >= 127) return -1;
    memcpy(o->headers + o->headers_len, h, n);
    memcpy(o->headers + o->headers_len + n, "\r\n", 2);
    o->headers_len += n + 2;
    return 0;
}

/* One option; returns the name of a bad one, or NULL. */
static const char *apply_opt(load_opts *o, int ch, const char *arg) {
    uint64_t u;
    switch (ch) {
    case OPT_URL: return add_url(o, arg) < 0 ? "--url" : NULL;
    case OPT_SPREAD:
        if (strcmp(arg, "connection") == 0)
            o->spread_call = false;
        else if (strcmp(arg, "call") == 0)
            o->spread_call = true;
        else
            return "--spread";
        return NULL;
    case OPT_CHURN: o->churn = true; return NULL;
    case OPT_STUCK: return parse_double(arg, 0.01, 600, &o->stuck_s) < 0 ? "--stuck-after" : NULL;
    case OPT_WIRE:
        if (strcmp(arg, "stateless") == 0)
            o->wire = LOAD_WIRE_STATELESS;
        else if (strcmp(arg, "legacy") == 0)
            o->wire = LOAD_WIRE_LEGACY;
        else
            return "--wire";
        return NULL;
    case 'c':
        if (parse_u64(arg, 1, CONNECTIONS_MAX, &u) < 0) return "--connections";
        o->connections = (unsigned)u;
        return NULL;
    case 'd': return parse_double(arg, 0.001, 86400, &o->duration_s) < 0 ? "--duration" : NULL;
    case 'w': return parse_double(arg, 0, 3600, &o->warmup_s) < 0 ? "--warmup" : NULL;
    case OPT_MAX_CALLS: return parse_u64(arg, 1, UINT64_MAX / 2, &o->max_calls) < 0 ? "--max-calls" : NULL;
    case OPT_TOOL: o->tool = arg; return NULL;
    case OPT_MESSAGE: o->message = arg; return NULL;
    case OPT_MESSAGE_SIZE:
        if (parse_u64(arg, 0, 1u << 20, &u) < 0) return "--message-size";
        o->message_size = (size_t)u;
        return NULL;
    case OPT_EXPECT: o->expect = *arg ? arg : NULL; return NULL;
    case OPT_NO_ID: o->check_id = false; return NULL;
    case OPT_TIMEOUT: return parse_double(arg, 0.001, 3600, &o->timeout_s) < 0 ? "--timeout" : NULL;
    case OPT_MAX_RESP:
        if (parse_u64(arg, 1, 256u << 20, &u) < 0) return "--max-response";
        o->max_response = (size_t)u;
        return NULL;
    case OPT_JSON: o->json = true; return NULL;
    case OPT_PRINT: o->print_answer = true; return NULL;
    case OPT_HEADER: return add_header(o, arg) < 0 ? "--header" : NULL;
    case OPT_CA_FILE: o->ca_file = arg; return NULL;
    case OPT_RATE: return parse_double(arg, 0.001, 10000000, &o->rate) < 0 ? "--rate" : NULL;
    case 'q': o->quiet = true; return NULL;
    default: return "?";
    }
}

static int parse_args(load_opts *o, int argc, char **argv) {
    *o = (load_opts){.connections = 64,
                     .duration_s = 10,
                     .warmup_s = 2,
                     .timeout_s = 10,
                     .tool = "echo",
                     .message = "hello",
                     .check_id = true,
                     .stuck_s = 5,
                     .max_response = 1u << 20};
    o->url = "http://127.0.0.1:8080/mcp";
    parse_url(o, o->url);
    o->addrs[0] = o->addr;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:d:w:qh", long_opts, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            exit(0);
        }
        const char *bad = apply_opt(o, ch, optarg);
        if (bad) {
            if (strcmp(bad, "?") != 0) fprintf(stderr, "mcpg-load: bad value for %s: %s\n", bad, optarg);
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mcpg-load: unexpected argument: %s\n", argv[optind]);
        return -1;
    }
    if (o->ntargets == 0) o->ntargets = 1; /* the default URL */
    const char *bad = NULL;
    if (o->spread_call && o->wire != LOAD_WIRE_LEGACY) bad = "--spread call needs --wire legacy";
    else if (o->spread_call && o->rate > 0) bad = "--spread call is closed loop only (no --rate)";
    else if (o->spread_call && o->tls) bad = "--spread call is http only";
    else if (o->churn && (o->tls || o->rate > 0 || o->spread_call)) bad = "--churn is http, closed loop, by client";
    else if (o->spread_call && (uint64_t)o->connections * o->ntargets > CONNECTIONS_MAX) bad = "-c times URLs is too many";
    if (bad) {
        fprintf(stderr, "mcpg-load: %s\n", bad);
        return -1;
    }
    return 0;
}

double load_cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t ms(double s) { return (uint64_t)(s * 1000.0 + 0.5); }

static void close_handle(uv_handle_t *h) {
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

void load_run_stop(load_run *run) {
    if (run->phase == LOAD_PHASE_DONE) return;
    run->t_end_ns = uv_hrtime();
    run->open_at_stop = run->open_conns;
    if (run->phase == LOAD_PHASE_MEASURE)
        run->loadgen_cpu_s = load_cpu_seconds() - run->cpu_measure_start_s;
    else
        run->t_measure_ns = run->t_end_ns; /* stopped during warm-up: an empty window */
    run->phase = LOAD_PHASE_DONE;
    if (run->opts->rate > 0) {
        run->backlog_at_end = load_sched_backlog(&run->sched, run->t_end_ns);
        close_handle((uv_handle_t *)&run->spin);
    }
    close_handle((uv_handle_t *)&run->phase_timer);
    close_handle((uv_handle_t *)&run->tick_timer);
    close_handle((uv_handle_t *)&run->sigint);
    close_handle((uv_handle_t *)&run->sigterm);
    for (unsigned i = 0; i < run->nconns; i++) load_conn_close(&run->conns[i]);
}

static void on_phase_end(uv_timer_t *t) {
    load_run *run = t->data;
    if (run->phase != LOAD_PHASE_WARMUP) {
        load_run_stop(run);
        return;
    }
    run->phase = LOAD_PHASE_MEASURE;
    run->t_measure_ns = uv_hrtime();
    run->cpu_measure_start_s = load_cpu_seconds();
    uv_timer_start(&run->phase_timer, on_phase_end, ms(run->opts->duration_s), 0);
}

static void on_tick(uv_timer_t *t) {
    load_run *run = t->data;
    uint64_t now = uv_hrtime();
    for (unsigned i = 0; i < run->nconns && run->phase != LOAD_PHASE_DONE; i++) {
        load_conn_check_timeout(&run->conns[i], now);
        load_conn_retry_if_due(&run->conns[i], now);
    }
    if (run->phase == LOAD_PHASE_DONE || now < run->next_progress_ns) return;
    run->next_progress_ns += 1000000000ull;
    load_report_progress(run, run->opts->quiet ? NULL : stderr);
}

static void on_signal(uv_signal_t *s, int signum) {
    fprintf(stderr, "mcpg-load: signal %d, ending the run early\n", signum);
    load_run_stop(s->data);
}

static void start_handles(load_run *run) {
    uv_timer_init(run->loop, &run->phase_timer);
    uv_timer_init(run->loop, &run->tick_timer);
    uv_signal_init(run->loop, &run->sigint);
    uv_signal_init(run->loop, &run->sigterm);
    run->phase_timer.data = run->tick_timer.data = run->sigint.data = run->sigterm.data = run;
    uv_signal_start(&run->sigint, on_signal, SIGINT);
    uv_signal_start(&run->sigterm, on_signal, SIGTERM);
    uv_timer_start(&run->tick_timer, on_tick, TICK_MS, TICK_MS);
}

static void on_spin(uv_idle_t *h) { load_open_loop_spin(h->data); }

/* The open loop's clock starts with the run; an idle handle keeps the loop
 * polling without sleeping, so calls leave when due, not at the next
 * millisecond timer (the load generator's core is busy all the time). */
static void start_open_loop(load_run *run) {
    load_sched_init(&run->sched, run->opts->rate, run->t_start_ns);
    uv_idle_init(run->loop, &run->spin);
    run->spin.data = run;
    uv_idle_start(&run->spin, on_spin);
}

static void start_run(load_run *run) {
    const load_opts *o = run->opts;
    start_handles(run);
    run->t_start_ns = uv_hrtime();
    if (o->rate > 0) start_open_loop(run);
    run->next_progress_ns = run->t_start_ns + 1000000000ull;
    if (o->warmup_s > 0) {
        run->phase = run->interval_phase = LOAD_PHASE_WARMUP;
        uv_timer_start(&run->phase_timer, on_phase_end, ms(o->warmup_s), 0);
    } else {
        run->phase = run->interval_phase = LOAD_PHASE_MEASURE;
        run->t_measure_ns = run->t_start_ns;
        run->cpu_measure_start_s = load_cpu_seconds();
        uv_timer_start(&run->phase_timer, on_phase_end, ms(o->duration_s), 0);
    }
    for (unsigned i = 0; i < run->nconns; i++) load_conn_start(&run->conns[i]);
}

/* Each connection is a descriptor; raise the soft limit to what -c needs. */
static void raise_fd_limit(unsigned need) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need + 64) {
        rl.rlim_cur = rl.rlim_max < need + 64 ? rl.rlim_max : need + 64;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void free_templates(load_run *run) {
    for (unsigned i = 0; i < run->mix.n; i++) load_request_tmpl_free(&run->tmpls[i]);
    load_mix_free(&run->mix);
}

/* One request template per tool of --tool; 0, or -1 with err. */
static int init_templates(load_run *run, const char *message, char *err, size_t errlen) {
    const load_opts *o = run->opts;
    if (load_mix_parse(&run->mix, o->tool, err, errlen) < 0) return -1;
    for (unsigned i = 0; i < run->mix.n; i++) {
        load_request_tmpl *t = &run->tmpls[i];
        if (load_request_tmpl_init(t, o->wire, o->host_port, o->path, run->mix.names[i], message, err,
                                   errlen) < 0) {
            run->mix.n = i; /* free the ones made */
            free_templates(run);
            return -1;
        }
        if (load_request_tmpl_add_headers(t, o->headers, o->headers_len) != 0) {
            run->mix.n = i + 1;
            free_templates(run);
            return snprintf(err, errlen, "out of memory"), -1;
        }
        if (t->max_len > run->max_request) run->max_request = t->max_len;
    }
    return 0;
}

static int init_run(load_run *run, const load_opts *o, uv_loop_t *loop) {
    memset(run, 0, sizeof *run);
    run->loop = loop;
    run->opts = o;
    run->next_id = 1;
    char err[256];
    char *generated = o->message_size ? malloc(o->message_size + 1) : NULL;
    if (generated) {
        memset(generated, 'x', o->message_size);
        generated[o->message_size] = '\0';
    }
    int rc = init_templates(run, generated ? generated : o->message, err, sizeof err);
    free(generated); /* each template holds its own escaped copy */
    if (rc == 0 && load_tls_init(run, err, sizeof err) != 0) rc = -1;
    if (rc < 0) {
        fprintf(stderr, "mcpg-load: %s\n", err);
        return -1;
    }
    load_hist_reset(&run->warmup.hist);
    load_hist_reset(&run->measure.hist);
    load_hist_reset(&run->interval.hist);
    run->conns = calloc(o->spread_call ? o->connections * o->ntargets : o->connections, sizeof *run->conns);
    if (!run->conns) return -1;
    run->nconns = o->spread_call ? o->connections * o->ntargets : o->connections;
    if (o->rate > 0 && !(run->idle_stack = calloc(o->connections, sizeof *run->idle_stack))) return -1;
    for (unsigned i = 0; i < run->nconns; i++)
        if (load_conn_init(run, &run->conns[i]) < 0) return -1;
    for (unsigned i = 0; i < run->nconns; i++) {
        load_conn *c = &run->conns[i];
        c->target = load_spread_target(i, o->ntargets);
        if (!o->spread_call) continue;
        unsigned g = i / o->ntargets;
        c->session = &run->conns[g * o->ntargets].own_session; /* one session per group */
        c->holder = i == load_spread_first(g, o->ntargets);
    }
    return 0;
}

static void free_run(load_run *run) {
    for (unsigned i = 0; run->conns && i < run->nconns; i++) load_conn_free(&run->conns[i]);
    free(run->conns);
    free(run->idle_stack);
    free_templates(run);
    load_tls_free(run);
}

int main(int argc, char **argv) {
    load_opts opts;
    if (parse_args(&opts, argc, argv) < 0) return EXIT_USAGE;
    signal(SIGPIPE, SIG_IGN); /* a peer that closes mid-write is an error we count, not a death */
    if (opts.churn) {
        raise_fd_limit(2 * opts.connections);
        return load_churn_main(&opts);
    }
    raise_fd_limit(opts.spread_call ? opts.connections * opts.ntargets : opts.connections);
    uv_loop_t loop;
    uv_loop_init(&loop);
    load_run *run = malloc(sizeof *run); /* three histograms: too big for the stack */
    if (!run || init_run(run, &opts, &loop) < 0) {
        fprintf(stderr, "mcpg-load: setup failed\n");
        return EXIT_USAGE;
    }
    start_run(run);
    uv_run(&loop, UV_RUN_DEFAULT);
    /* stdout carries only machine-read output when any is asked for */
    load_report_human(run, opts.json || opts.print_answer ? stderr : stdout);
    if (opts.json) load_report_json(run, stdout);
    uint64_t errors = load_total_errors(&run->warmup) + load_total_errors(&run->measure);
    int rc = errors || run->measure.ok == 0 ? EXIT_ERRORS : 0;
    free_run(run);
    free(run);
    if (uv_loop_close(&loop) != 0) {
        fprintf(stderr, "mcpg-load: handles left open at exit\n");
        rc = EXIT_ERRORS;
    }
    return rc;
}
