/* The crash line: a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT)
 * is logged with the module image the faulting instruction is in, the
 * instances using it and the offset in the file, then raised again with the
 * default action so a core file is still made:
 *
 *   mcpg: fatal SIGSEGV (fault address 0x0) in module fx_crash (instances: crash),
 *   image /tmp/mcpg-1-x/fx_crash.0123456789abcdef.so, offset 0x1139: addr2line -f -e <image> 0x1139
 *
 * (one line). The handler runs on an alternate signal stack (each thread
 * that the kernel starts sets one up), so a stack overflow is reported too.
 * It does only async-signal-safe work: it reads the tables below, which the
 * main thread fills when it loads an image (no lock: each slot is published
 * by an atomic store of its range after its strings are written), formats
 * numbers itself and write(2)s the line to stderr, where the log goes. It
 * also writes the line to crash.txt in the runtime folder: a folder holding
 * anything but module copies is never swept, so the copies the core file
 * names stay for the debugger. */
#define _GNU_SOURCE
#include "kernel.h"

#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define CRASH_SLOTS 128
#define CRASH_PATH 512
#define CRASH_NAMES 256

typedef struct crash_slot {
    _Atomic uintptr_t start; /* 0: the slot is free */
    uintptr_t end, base;     /* [start, end) mapped; base: the load bias (offset = pc - base) */
    const void *owner;       /* the image, NULL for a library */
    char module[72];         /* the module's name, empty for a library */
    char path[CRASH_PATH];
    char instances[CRASH_NAMES];
} crash_slot;

static crash_slot modules[CRASH_SLOTS];
static crash_slot libraries[CRASH_SLOTS];
static char crash_file[CRASH_PATH]; /* <runtime dir>/crash.txt, or empty */

static void copy_string(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* The mapped range of the object a dl_iterate_phdr entry describes. */
static void object_range(const struct dl_phdr_info *info, uintptr_t *start, uintptr_t *end) {
    *start = UINTPTR_MAX;
    *end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (lo < *start) *start = lo;
        if (hi > *end) *end = hi;
    }
}

/* Publish one slot: its strings first, then its range (the handler reads
 * a slot only once it sees a start). */
static void slot_fill(crash_slot *s, const struct dl_phdr_info *info, const void *owner,
                      const char *module, const char *path) {
    uintptr_t start, end;
    object_range(info, &start, &end);
    if (start >= end) return;
    s->end = end;
    s->base = info->dlpi_addr;
    s->owner = owner;
    copy_string(s->module, sizeof s->module, module);
    copy_string(s->path, sizeof s->path, path);
    s->instances[0] = '\0';
    atomic_store(&s->start, start);
}

static crash_slot *free_slot(crash_slot *table) {
    for (size_t i = 0; i < CRASH_SLOTS; i++)
        if (atomic_load(&table[i].start) == 0) return &table[i];
    return NULL;
}

typedef struct image_search {
    const image *im;
    bool found;
} image_search;

static int add_image_object(struct dl_phdr_info *info, size_t size, void *arg) {
    image_search *q = arg;
    if (!info->dlpi_name || strcmp(info->dlpi_name, q->im->run_path) != 0) return 0;
    crash_slot *s = free_slot(modules);
    if (s) slot_fill(s, info, q->im, q->im->name, q->im->run_path);
    q->found = true;
    return 1;
}

static int add_library_object(struct dl_phdr_info *info, size_t size, void *arg) {
    char exe[CRASH_PATH];
    const char *path = info->dlpi_name;
    if (!path || !*path) { /* the executable itself */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        path = exe;
    }
    for (size_t i = 0; i < CRASH_SLOTS; i++)
        if (atomic_load(&modules[i].start) && strcmp(modules[i].path, path) == 0) return 0;
    crash_slot *s = free_slot(libraries);
    if (s) slot_fill(s, info, NULL, "", path);
    return 0;
}

/* The libraries mapped now (the kernel's, and those modules pulled in). */
static void snapshot_libraries(void) {
    for (size_t i = 0; i < CRASH_SLOTS; i++) atomic_store(&libraries[i].start, 0);
    dl_iterate_phdr(add_library_object, NULL);
}

void crash_image_loaded(const image *im) {
    image_search q = {im, false};
    dl_iterate_phdr(add_image_object, &q);
    snapshot_libraries();
}

void crash_image_unloaded(const image *im) {
    for (size_t i = 0; i < CRASH_SLOTS; i++)
        if (atomic_load(&modules[i].start) && modules[i].owner == im)
            atomic_store(&modules[i].start, 0);
}

void crash_image_used_by(const image *im, const char *instance) {
    for (size_t i = 0; i < CRASH_SLOTS; i++) {
        crash_slot *s = &modules[i];
        if (!atomic_load(&s->start) || s->owner != im) continue;
        size_t have = strlen(s->instances), n = strlen(instance);
        const char *seen = strstr(s->instances, instance);
        if (seen && (seen[n] == '\0' || seen[n] == ',')) return;
        if (have + n + 3 > sizeof s->instances) return; /* enough names to go on */
        if (have) memcpy(s->instances + have, ", ", 2), have += 2;
        memcpy(s->instances + have, instance, n + 1);
    }
}

/* ---- the handler: async-signal-safe from here on ---- */

typedef struct line {
    char text[2048];
    size_t len;
} line;

static void put(line *l, const char *s) {
    while (*s && l->len < sizeof l->text - 1) l->text[l->len++] = *s++;
}

static void put_hex(line *l, uintptr_t v) {
    char digits[2 + 2 * sizeof v + 1];
    size_t n = sizeof digits - 1;
    digits[n] = '\0';
    do {
        digits[--n] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    digits[--n] = 'x';
    digits[--n] = '0';
    put(l, digits + n);
}

static void put_dec(line *l, unsigned long v) {
    char digits[24];
    size_t n = sizeof digits - 1;
    digits[n] = '\0';
    do {
        digits[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(l, digits + n);
}

static const char *signal_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
    }
}

static uintptr_t faulting_pc(const void *uctx) {
    const ucontext_t *uc = uctx;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

static const crash_slot *slot_of(const crash_slot *table, uintptr_t pc) {
    for (size_t i = 0; i < CRASH_SLOTS; i++) {
        uintptr_t start = atomic_load(&table[i].start);
        if (start && pc >= start && pc < table[i].end) return &table[i];
    }
    return NULL;
}

static void put_where(line *l, uintptr_t pc) {
    const crash_slot *s = slot_of(modules, pc);
    if (s) {
        put(l, " in module ");
        put(l, s->module);
        put(l, " (instances: ");
        put(l, s->instances[0] ? s->instances : "none yet");
        put(l, "), image ");
    } else if ((s = slot_of(libraries, pc)) != NULL) {
        put(l, " in the kernel or a library it uses: ");
    } else {
        put(l, " at pc ");
        put_hex(l, pc);
        put(l, ", in no object loaded\n");
        return;
    }
    put(l, s->path);
    put(l, ", offset ");
    put_hex(l, pc - s->base);
    put(l, ": addr2line -f -e ");
    put(l, s->path);
    put(l, " ");
    put_hex(l, pc - s->base);
    put(l, "\n");
}

static void write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

static void on_fatal_signal(int sig, siginfo_t *info, void *uctx) {
    line l = {.len = 0};
    put(&l, "mcpg: fatal ");
    put(&l, signal_name(sig));
    if (info->si_code == SI_USER || info->si_code == SI_TKILL) {
        put(&l, " (sent by pid ");
        put_dec(&l, (unsigned long)info->si_pid);
        put(&l, ")");
    } else if (sig != SIGABRT) {
        put(&l, " (fault address ");
        put_hex(&l, (uintptr_t)info->si_addr);
        put(&l, ")");
    }
    put_where(&l, faulting_pc(uctx));
    write_all(STDERR_FILENO, l.text, l.len);
    if (crash_file[0]) {
        int fd = open(crash_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
            write_all(fd, l.text, l.len);
            close(fd);
        }
    }
    signal(sig, SIG_DFL); /* as SA_RESETHAND did, also where it may not (SIGILL) */
    raise(sig);           /* dies by it, with a core file, once this handler returns */
}

/* ---- setting it up ---- */

#define ALT_STACK_SIZE (64 * 1024)
static _Thread_local void *alt_stack;

void crash_thread_init(void) {
    if (alt_stack) return;
    void *p = mmap(NULL, ALT_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return; /* the handler then runs on the thread's own stack */
    stack_t ss = {.ss_sp = p, .ss_size = ALT_STACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(p, ALT_STACK_SIZE);
        return;
    }
    alt_stack = p;
}

void crash_thread_end(void) {
    if (!alt_stack) return;
    stack_t ss = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    sigaltstack(&ss, NULL);
    munmap(alt_stack, ALT_STACK_SIZE);
    alt_stack = NULL;
}

void crash_init(const char *runtime_dir) {
    if (runtime_dir && *runtime_dir)
        snprintf(crash_file, sizeof crash_file, "%s/crash.txt", runtime_dir);
    snapshot_libraries();
    crash_thread_init();
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) sigaction(fatal[i], &sa, NULL);
}
