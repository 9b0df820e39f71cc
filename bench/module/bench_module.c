/* mcpg-bench-module: what one op of a module costs its caller, measured in
 * the SDK's fake host beside the fake host's own cost with a null module of
 * the same kind (docs/writing-a-module.md, "What your module costs").
 *
 *   mcpg-bench-module MODULE.so [--config JSON | --config-file PATH]
 *                     [--tool NAME] [--args JSON] [-n CALLS] [--warmup CALLS]
 *                     [--pool] [--callgrind] [--json]
 *
 * A backend gets tools/call of --tool with --args; an identity, policy,
 * limits or audit instance its authenticate, check, acquire (then release) or
 * emit op with a synthetic tools/call of --tool. Every answer is checked: an
 * error stops the run with its text. Per call: instructions (the thread's
 * hardware counter, user space; or callgrind with --callgrind), wall and CPU
 * time, allocations (malloc, calloc and realloc calls in the whole process,
 * host->alloc included).
 */
#define _GNU_SOURCE
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <linux/perf_event.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND_H 1
#endif
#endif

#define CALL_TIMEOUT_MS 10000

/* ---- allocations: every malloc, calloc and realloc of the process ---- */

#if defined(__SANITIZE_ADDRESS__)
#define COUNTS_ALLOCATIONS 0 /* the sanitizer's allocator is not ours to wrap */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COUNTS_ALLOCATIONS 0
#endif
#endif
#ifndef COUNTS_ALLOCATIONS
#define COUNTS_ALLOCATIONS 1
#endif

static atomic_long alloc_calls;
#if COUNTS_ALLOCATIONS
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t count, size_t n);
extern void *__libc_realloc(void *p, size_t n);

void *malloc(size_t n) {
    atomic_fetch_add_explicit(&alloc_calls, 1, memory_order_relaxed);
    return __libc_malloc(n);
}
void *calloc(size_t count, size_t n) {
    atomic_fetch_add_explicit(&alloc_calls, 1, memory_order_relaxed);
    return __libc_calloc(count, n);
}
void *realloc(void *p, size_t n) {
    atomic_fetch_add_explicit(&alloc_calls, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}
#endif

/* ---- options ---- */

typedef struct options {
    const char *module_path;
    char *config;
    const char *tool;
    const char *args;
    long calls, warmup;
    int pool, callgrind, json;
    const char *phase; /* set in the child callgrind runs: "module" or "baseline" */
} options;

typedef struct figures {
    double instructions; /* per call; NAN when not measured */
    double wall_ns, cpu_ns, allocs;
    int pooled; /* a backend's ops ran on the pool threads */
} figures;

typedef struct run_ctx {
    const options *o;
    mcpg_fakehost *fh;
    mcpg_instance *inst;
    uint32_t kind;
    char error[1024];
} run_ctx;

static void usage(FILE *f) {
    fputs("usage: mcpg-bench-module MODULE.so [--config JSON | --config-file PATH]\n"
          "         [--tool NAME] [--args JSON] [-n CALLS] [--warmup CALLS]\n"
          "         [--pool] [--callgrind] [--json]\n",
          f);
}

static char *read_text_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char chunk[4096];
    size_t n;
    while (mem && (n = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, n, mem);
    if (mem) fclose(mem);
    fclose(f);
    return text;
}

static long parse_count(const char *opt, const char *v, long min) {
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < min) {
        fprintf(stderr, "mcpg-bench-module: %s wants an integer >= %ld, not \"%s\"\n", opt, min, v);
        exit(2);
    }
    return n;
}

static const char *option_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "mcpg-bench-module: %s wants a value\n", argv[*i]);
        exit(2);
    }
    return argv[++*i];
}

static void read_config_file(options *o, const char *path) {
    o->config = read_text_file(path);
    if (!o->config) {
        fprintf(stderr, "mcpg-bench-module: --config-file %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

static void parse_options(int argc, char **argv, options *o) {
    *o = (options){.tool = "echo", .args = "{}", .calls = 1000, .warmup = 100};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--config")) o->config = strdup(option_value(argc, argv, &i));
        else if (!strcmp(a, "--config-file")) read_config_file(o, option_value(argc, argv, &i));
        else if (!strcmp(a, "--tool")) o->tool = option_value(argc, argv, &i);
        else if (!strcmp(a, "--args")) o->args = option_value(argc, argv, &i);
        else if (!strcmp(a, "-n")) o->calls = parse_count(a, option_value(argc, argv, &i), 1);
        else if (!strcmp(a, "--warmup")) o->warmup = parse_count(a, option_value(argc, argv, &i), 0);
        else if (!strcmp(a, "--pool")) o->pool = 1;
        else if (!strcmp(a, "--callgrind")) o->callgrind = 1;
        else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--phase")) o->phase = option_value(argc, argv, &i);
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage(stdout), exit(0);
        else if (a[0] == '-' || o->module_path) usage(stderr), exit(2);
        else o->module_path = a;
    }
    if (!o->module_path) usage(stderr), exit(2);
}

/* ---- the null modules: the fake host's own cost, one per kind ---- */

static int null_instance;
static int null_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                       void **out) {
    (void)host, (void)self, (void)config;
    *out = &null_instance;
    return 0;
}
static void null_destroy(void *instance) { (void)instance; }
static mcpg_status null_op(void *instance, mcpg_call *call) {
    (void)instance, (void)call;
    return MCPG_CONTINUE;
}
static mcpg_status null_emit(void *instance, mcpg_call *call, const mcpg_audit_event *event) {
    (void)instance, (void)call, (void)event;
    return MCPG_CONTINUE;
}
static int null_list(void *instance, mcpg_buf *out) {
    (void)instance;
    return mcpg_buf_append(out, "[]", 2);
}

static const mcpg_lifecycle_ops null_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops), .create = null_create, .destroy = null_destroy};
static const mcpg_backend_ops null_backend = {
    MCPG_OPS_HEAD(mcpg_backend_ops), .list_tools = null_list, .call_tool = null_op};
static const mcpg_identity_ops null_identity = {MCPG_OPS_HEAD(mcpg_identity_ops),
                                                .authenticate = null_op};
static const mcpg_policy_ops null_policy = {MCPG_OPS_HEAD(mcpg_policy_ops), .check = null_op};
static const mcpg_limits_ops null_limits = {MCPG_OPS_HEAD(mcpg_limits_ops), .acquire = null_op};
static const mcpg_audit_ops null_audit = {MCPG_OPS_HEAD(mcpg_audit_ops), .emit = null_emit};

static const void *null_ops_of(uint32_t kind) {
    switch (kind) {
    case MCPG_KIND_BACKEND: return &null_backend;
    case MCPG_KIND_IDENTITY: return &null_identity;
    case MCPG_KIND_POLICY: return &null_policy;
    case MCPG_KIND_LIMITS: return &null_limits;
    case MCPG_KIND_AUDIT: return &null_audit;
    default: return NULL;
    }
}

static mcpg_module null_module_of(uint32_t kind) {
    return (mcpg_module){.magic = MCPG_MODULE_MAGIC,
                         .abi_major = MCPG_ABI_MAJOR,
                         .abi_minor = MCPG_ABI_MINOR,
                         .size = (uint32_t)sizeof(mcpg_module),
                         .kind = kind,
                         .name = "null",
                         .version = "1.0.0",
                         .build_id = "null",
                         .flags = MCPG_MOD_INLINE_SAFE,
                         .lifecycle = &null_lifecycle,
                         .ops = null_ops_of(kind)};
}

/* ---- the module under test ---- */

typedef const mcpg_module *(*entry_fn)(uint16_t major, uint16_t minor);

/* The module's descriptor, or exit 1 naming the file and why it is not one. */
static const mcpg_module *open_module(const char *path) {
    void *image = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!image) {
        fprintf(stderr, "mcpg-bench-module: %s: not a loadable module: %s\n", path, dlerror());
        exit(1);
    }
    entry_fn entry = (entry_fn)dlsym(image, "mcpg_module_entry");
    const mcpg_module *m = entry ? entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR) : NULL;
    if (!m || m->magic != MCPG_MODULE_MAGIC) {
        fprintf(stderr, "mcpg-bench-module: %s: not an mcpg module (%s)\n", path,
                entry ? "its mcpg_module_entry returned no descriptor"
                      : "it exports no mcpg_module_entry");
        exit(1);
    }
    if (!null_ops_of(m->kind)) {
        fprintf(stderr,
                "mcpg-bench-module: %s: a %s module; this program drives backend, identity, "
                "policy, limits and audit modules\n",
                path, mcpg_kind_name(m->kind));
        exit(1);
    }
    return m; /* the image stays open: the descriptor lives in it */
}

static const char *op_name(uint32_t kind) {
    switch (kind) {
    case MCPG_KIND_IDENTITY: return "authenticate";
    case MCPG_KIND_POLICY: return "check";
    case MCPG_KIND_LIMITS: return "acquire+release";
    case MCPG_KIND_AUDIT: return "emit";
    default: return "tools/call";
    }
}

/* ---- one call, checked ---- */

static int call_failed(run_ctx *r, mcpg_call *c, int st) {
    const char *msg = mcpg_fakehost_error_message(c);
    if (msg || st != MCPG_CONTINUE) {
        snprintf(r->error, sizeof r->error, "%s of \"%s\" failed (%s, code %" PRId64 "): %s",
                 op_name(r->kind), r->o->tool, st < 0 ? mcpg_strerror(st) : "denied",
                 mcpg_fakehost_error_code(c), msg ? msg : "no error message");
        return 1;
    }
    if (r->kind != MCPG_KIND_BACKEND) return 0;
    int is_error = 0;
    char *text = mcpg_fakehost_result_text(mcpg_fakehost_result(c), &is_error);
    if (is_error)
        snprintf(r->error, sizeof r->error, "tools/call of \"%s\" answered isError: %s",
                 r->o->tool, text ? text : "(no text)");
    free(text);
    return is_error;
}

static int one_call(run_ctx *r) {
    mcpg_call *c = mcpg_fakehost_call_new(r->fh, "tools/call", r->o->tool, r->o->args, "1");
    if (!c) {
        snprintf(r->error, sizeof r->error, "out of memory");
        return 1;
    }
    int st = mcpg_fakehost_run(r->fh, r->inst, c, CALL_TIMEOUT_MS);
    int failed = call_failed(r, c, st);
    if (!failed && r->kind == MCPG_KIND_LIMITS) mcpg_fakehost_release(r->fh, r->inst, c);
    mcpg_fakehost_call_free(r->fh, c);
    return failed;
}

static int run_calls(run_ctx *r, long calls) {
    int failed = 0;
    for (long i = 0; i < calls && !failed; i++) failed = one_call(r);
    return failed;
}

/* The loop callgrind counts (by name with --toggle-collect when the client
 * requests are not available). */
int measured_loop(run_ctx *r, long calls) __attribute__((noinline));
int measured_loop(run_ctx *r, long calls) {
#ifdef HAVE_CALLGRIND_H
    CALLGRIND_TOGGLE_COLLECT;
#endif
    int failed = run_calls(r, calls);
#ifdef HAVE_CALLGRIND_H
    CALLGRIND_TOGGLE_COLLECT;
#endif
    return failed;
}

/* ---- counters ---- */

static uint64_t clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* This thread's user-space instruction counter, or -1 with why in note. */
static int open_instruction_counter(char *note, size_t cap) {
    struct perf_event_attr a = {.size = sizeof a,
                                .type = PERF_TYPE_HARDWARE,
                                .config = PERF_COUNT_HW_INSTRUCTIONS,
                                .disabled = 1,
                                .exclude_kernel = 1,
                                .exclude_hv = 1};
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd >= 0) return fd;
    int err = errno;
    if (err == EACCES || err == EPERM) {
        char *p = read_text_file("/proc/sys/kernel/perf_event_paranoid");
        snprintf(note, cap, "perf_event_open refused (%s); kernel.perf_event_paranoid is %.8s",
                 strerror(err), p ? p : "?");
        free(p);
    } else {
        snprintf(note, cap, "no hardware instruction counter (%s: a VM without a PMU?)",
                 strerror(err));
    }
    char *nl = strchr(note, '\n');
    if (nl) *nl = 0;
    return -1;
}

static double read_counter(int fd) {
    uint64_t v = 0;
    return fd >= 0 && read(fd, &v, sizeof v) == sizeof v ? (double)v : NAN;
}

/* The measured calls, after the warm-up, into f. */
static int measure_calls(run_ctx *r, figures *f, char *note, size_t cap) {
    const options *o = r->o;
    if (run_calls(r, o->warmup)) return 1;
    clockid_t cpu_clock = f->pooled ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID;
    int fd = o->callgrind || o->phase ? -1 : open_instruction_counter(note, cap);
    long allocs0 = atomic_load(&alloc_calls);
    uint64_t wall0 = clock_ns(CLOCK_MONOTONIC), cpu0 = clock_ns(cpu_clock);
    if (fd >= 0) ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    int failed = measured_loop(r, o->calls);
    if (fd >= 0) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    double n = (double)o->calls;
    f->cpu_ns = (double)(clock_ns(cpu_clock) - cpu0) / n;
    f->wall_ns = (double)(clock_ns(CLOCK_MONOTONIC) - wall0) / n;
    f->allocs = COUNTS_ALLOCATIONS ? (double)(atomic_load(&alloc_calls) - allocs0) / n : NAN;
    f->instructions = read_counter(fd) / n;
    if (fd >= 0) close(fd);
    return failed;
}

/* Load m in a fresh fake host, measure, unload. 0, or 1 with r->error set. */
static int measure(const options *o, const mcpg_module *m, const char *config, figures *f,
                   char *note, size_t cap, char *error, size_t error_cap) {
    run_ctx r = {.o = o, .kind = m->kind};
    r.fh = mcpg_fakehost_new();
    if (!r.fh) return snprintf(error, error_cap, "the fake host could not start"), 1;
    mcpg_fakehost_set_quiet(r.fh, 1);
    int rc = mcpg_fakehost_load(r.fh, m, "bench", config, &r.inst);
    if (rc) {
        const char *why = rc == MCPG_ECONFIG ? mcpg_fakehost_report_text(r.fh)
                                             : mcpg_fakehost_log_text(r.fh);
        snprintf(r.error, sizeof r.error, "%s refused to load (%s): %s", m->name,
                 mcpg_strerror(rc), why);
    }
    /* A backend not declared inline-safe runs on the pool, as in the gateway. */
    f->pooled = !rc && (o->pool || (m->kind == MCPG_KIND_BACKEND &&
                                    mcpg_fakehost_set_inline(r.inst, 1)));
    if (!rc) rc = measure_calls(&r, f, note, cap);
    if (r.inst) mcpg_fakehost_unload(r.fh, r.inst);
    mcpg_fakehost_free(r.fh);
    snprintf(error, error_cap, "%s", r.error);
    return rc != 0;
}

/* ---- --callgrind: instructions counted by valgrind, one child per phase ---- */

/* The "summary:" (or "totals:") figure of a callgrind output file, or -1. */
static double callgrind_total(const char *path) {
    char *text = read_text_file(path);
    double total = -1;
    for (char *line = text; line && *line;) {
        if (!strncmp(line, "summary:", 8) || !strncmp(line, "totals:", 7))
            total = strtod(strchr(line, ':') + 1, NULL);
        char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return total;
}

/* Our own command line for the child: the options but --callgrind and --json,
 * then --phase (and --pool when the module ran there). */
static char **child_argv(int argc, char **argv, const char *out_file, const char *phase,
                         int pool) {
    char **v = calloc((size_t)argc + 8, sizeof *v);
    static char self[4096], out_opt[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    snprintf(out_opt, sizeof out_opt, "--callgrind-out-file=%s", out_file);
    int k = 0;
    v[k++] = "valgrind";
    v[k++] = "--tool=callgrind";
    v[k++] = "-q";
    v[k++] = out_opt;
#ifdef HAVE_CALLGRIND_H
    v[k++] = "--collect-atstart=no";
#else
    v[k++] = "--toggle-collect=measured_loop";
#endif
    v[k++] = self;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--callgrind") && strcmp(argv[i], "--json")) v[k++] = argv[i];
    v[k++] = "--phase";
    v[k++] = (char *)phase;
    if (pool) v[k++] = "--pool";
    return v;
}

/* Instructions per call of one phase under callgrind; exits 1 when it fails. */
static double callgrind_phase(int argc, char **argv, const options *o, const char *phase) {
    char out_file[] = "/tmp/mcpg-bench-module-XXXXXX";
    int fd = mkstemp(out_file);
    if (fd < 0) perror("mcpg-bench-module: mkstemp"), exit(1);
    close(fd);
    char **v = child_argv(argc, argv, out_file, phase, o->pool);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
        execvp(v[0], v);
        fprintf(stderr, "mcpg-bench-module: --callgrind: cannot run valgrind: %s\n", strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    double total = callgrind_total(out_file);
    unlink(out_file);
    free(v);
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || total < 0) {
        fprintf(stderr, "mcpg-bench-module: --callgrind: the %s run under valgrind failed\n", phase);
        exit(1);
    }
    return total / (double)o->calls;
}

/* ---- output ---- */

static void print_number(double v, int json) {
    if (isnan(v)) printf(json ? "null" : "%14s", "n/a");
    else printf(json ? "%.1f" : "%14.1f", v);
}

static void print_row(const char *name, const figures *f) {
    printf("%-20s", name);
    print_number(f->instructions, 0);
    print_number(f->wall_ns, 0);
    print_number(f->cpu_ns, 0);
    print_number(f->allocs, 0);
    putchar('\n');
}

static void print_json_figures(const char *name, const figures *f, const char *sep) {
    printf("\"%s\":{\"instructions\":", name);
    print_number(f->instructions, 1);
    printf(",\"wall_ns\":");
    print_number(f->wall_ns, 1);
    printf(",\"cpu_ns\":");
    print_number(f->cpu_ns, 1);
    printf(",\"allocs\":");
    print_number(f->allocs, 1);
    printf("}%s", sep);
}

static figures added_by_module(const figures *m, const figures *b) {
    return (figures){
        .instructions = m->instructions - b->instructions, /* NAN when either is */
        .wall_ns = m->wall_ns - b->wall_ns,
        .cpu_ns = m->cpu_ns - b->cpu_ns,
        .allocs = m->allocs - b->allocs};
}

typedef struct report {
    const options *o;
    const mcpg_module *m;
    figures module, baseline;
    const char *source; /* of the instructions: "perf", "callgrind" or NULL */
    const char *note;
} report;

static void json_string(const char *key, const char *v, const char *sep) {
    printf("\"%s\":\"", key);
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if ((unsigned char)*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    printf("\"%s", sep);
}

static void print_json(const report *r) {
    figures added = added_by_module(&r->module, &r->baseline);
    printf("{");
    json_string("module", r->m->name, ",");
    json_string("kind", mcpg_kind_name(r->m->kind), ",");
    json_string("op", op_name(r->m->kind), ",");
    json_string("tool", r->o->tool, ",");
    printf("\"calls\":%ld,\"warmup\":%ld,", r->o->calls, r->o->warmup);
    json_string("dispatch", r->module.pooled ? "pool" : "inline", ",");
    if (r->source) json_string("instructions_source", r->source, ",");
    else json_string("instructions_unavailable", r->note, ",");
    print_json_figures("module_per_call", &r->module, ",");
    print_json_figures("baseline_per_call", &r->baseline, ",");
    print_json_figures("added_per_call", &added, "}\n");
}

static void print_table(const report *r) {
    figures added = added_by_module(&r->module, &r->baseline);
    printf("%s (%s %s) %s \"%s\": %ld calls after %ld warm-up, %s\n", r->m->name,
           mcpg_kind_name(r->m->kind), r->m->version, op_name(r->m->kind), r->o->tool,
           r->o->calls, r->o->warmup, r->module.pooled ? "on the pool" : "inline");
    printf("%-20s%14s%14s%14s%14s\n", "per call", "instructions", "wall_ns", "cpu_ns", "allocs");
    print_row(r->m->name, &r->module);
    print_row("baseline (null op)", &r->baseline);
    print_row("module adds", &added);
    if (r->source) printf("instructions: %s\n", r->source);
    else printf("instructions: n/a: %s (try --callgrind)\n", r->note);
}

/* ---- main ---- */

static void measure_or_exit(const options *o, const mcpg_module *m, const char *config,
                            figures *f, char *note, size_t cap) {
    char error[1200];
    if (measure(o, m, config, f, note, cap, error, sizeof error)) {
        fprintf(stderr, "mcpg-bench-module: %s: %s\n", o->module_path, error);
        exit(1);
    }
}

int main(int argc, char **argv) {
    options o;
    parse_options(argc, argv, &o);
    const mcpg_module *m = open_module(o.module_path);
    mcpg_module null_module = null_module_of(m->kind);
    char note[256] = "";
    report r = {.o = &o, .m = m};
    if (!o.phase || !strcmp(o.phase, "module"))
        measure_or_exit(&o, m, o.config, &r.module, note, sizeof note);
    if (r.module.pooled) o.pool = 1; /* the baseline is dispatched as the module was */
    if (!o.phase || !strcmp(o.phase, "baseline"))
        measure_or_exit(&o, &null_module, NULL, &r.baseline, note, sizeof note);
    if (o.phase) return 0;
    r.source = !isnan(r.module.instructions) ? "perf (this thread, user space)" : NULL;
    if (!r.source && o.callgrind) {
        r.module.instructions = callgrind_phase(argc, argv, &o, "module");
        r.baseline.instructions = callgrind_phase(argc, argv, &o, "baseline");
        r.source = "callgrind";
    }
    r.note = o.callgrind && !r.source ? "" : note;
    if (o.json) print_json(&r);
    else print_table(&r);
    return 0;
}
