/* Kernel unit test: a call handle kept past its call is refused by every
 * later call at the same address, also when the call object was freed and a
 * NEW object was allocated where it lived (not only when it was recycled
 * from the free list). A call whose result outgrows what the free list keeps
 * (64 KiB) is freed at its end; malloc then usually hands the same memory to
 * the next call object, which is what the test waits for (bounded). */
#include "probe.h"

#include "handshake.h" /* the handle's encoding, private to the kernel and the fake host */

#include <mcpg/check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 200       /* big call then small call, until one lands */
#define LIVES_CHECKED 64 /* lives of the new object the old handle is tried on */
#define SKIPPED 77       /* ctest's SKIP_RETURN_CODE for kernel_serial */

static char dir[] = "/tmp/mcpg-serial-XXXXXX";

#if defined(__SANITIZE_ADDRESS__) /* gcc; clang says it with __has_feature */
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#ifdef UNDER_ASAN
/* ASan holds freed memory back (its quarantines) so that a use after free
 * is caught, and the address this test waits for would not come back:
 * without them here, the test runs under ASan too. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "quarantine_size_mb=0:thread_local_quarantine_size_kb=0";
}
#endif

static mcpg_call *kept; /* the freed call's transport handle, kept on purpose */
static int lives_seen;  /* lives at the kept handle's address */
static int accepted;    /* of them, those the kept handle reached */

/* The object a handle names: its low 42 bits, the address without its low
 * 6 (lib/hostcore/handshake.h, which the kernel keeps private, encodes the
 * handle so): equal for two handles of one object. */
static uintptr_t object_of(const mcpg_call *h) {
    return (uintptr_t)((uint64_t)(uintptr_t)h & ((UINT64_C(1) << 42) - 1));
}

static void keep_handle(probe *p, mcpg_call *call) {
    (void)p;
    kept = call;
}

/* On the loop, the new call still live: the old handle must not reach it. */
static void try_kept(probe *p, mcpg_call *call) {
    (void)p;
    if (object_of(call) != object_of(kept)) return;
    lives_seen++;
    if (host_call_worker(kept) != NULL) accepted++;
}

static void run(const char *tool, void (*at_complete)(probe *, mcpg_call *)) {
    probe p;
    char args[64];
    snprintf(args, sizeof args, "{\"message\":\"%s\"}", tool);
    probe_start(&p, "tools/call", tool, strlen(tool), args, "1", NULL);
    p.at_complete = at_complete;
    probe_wait(&p);
    MCPG_CHECK(!p.is_error, "%s: %s", tool, p.text);
}

static void new_object_at_freed_address(void) {
    for (int round = 0; round < ROUNDS && lives_seen == 0; round++) {
        run("big", keep_handle); /* its object is freed at its end */
        run("echo", try_kept);
    }
    if (lives_seen == 0) { /* the allocator never gave an address back: nothing to try */
        fprintf(stderr, "skipped: no call object landed at a freed one's address in %d rounds\n",
                ROUNDS);
        exit(SKIPPED);
    }
    /* the new object now sits alone on the free list: each call reuses it */
    for (int i = 1; i < LIVES_CHECKED; i++) run("echo", try_kept);
    MCPG_CHECK(lives_seen >= LIVES_CHECKED, "lives at the address: %d", lives_seen);
    MCPG_CHECK(accepted == 0, "the freed call's handle reached %d of %d later calls there",
               accepted, lives_seen);
}

/* The handle keeps every bit of object, stage and serial: a serial repeats
 * at one address only after 524287 lives in the whole process. */
static void handle_layout(void) {
    MCPG_CHECK(CALL_SERIAL_MASK == 0x7ffffu, "19 serial bits: %#x", CALL_SERIAL_MASK);
    const uint64_t objs[] = {64, 0x1000, 0x7fffffffffc0ull, 0xffffffffffc0ull};
    const uint32_t serials[] = {1, 0x2000, 0x40000, CALL_SERIAL_MASK};
    for (size_t o = 0; o < sizeof objs / sizeof *objs; o++)
        for (unsigned st = 0; st < CALL_STAGE_COUNT; st++)
            for (size_t i = 0; i < sizeof serials / sizeof *serials; i++) {
                void *obj = (void *)(uintptr_t)objs[o];
                mcpg_call *h = call_handle_make(obj, st, serials[i]);
                MCPG_CHECK(call_handle_fits(obj) && call_handle_object(h) == obj &&
                               call_handle_stage(h) == st && call_handle_serial(h) == serials[i],
                           "handle of %#llx, stage %u, serial %#x round-trips",
                           (unsigned long long)objs[o], st, serials[i]);
            }
    MCPG_CHECK(!call_handle_fits((void *)(uintptr_t)0x1020) &&
                   !call_handle_fits((void *)(uintptr_t)0x1000000000000ull),
               "an object off the 64-byte boundary or above 2^48 does not fit a handle");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_serial MODULES_DIR\n");
        return 2;
    }
    handle_layout();
    if (!mkdtemp(dir)) return 2;
    char text[1024];
    snprintf(text, sizeof text,
             "{\"gateway\":{\"workers\":1,\"module_dir\":\"%s\",\"log_level\":\"error\","
             "\"anonymous\":true,\"pool\":{\"threads\":2,\"queue\":8},"
             "\"server\":{\"access_log\":false}},"
             "\"modules\":[{\"name\":\"mock\",\"module\":\"backend_mock\",\"inline_dispatch\":true,"
             "\"config\":{\"tools\":[{\"name\":\"echo\"},"
             "{\"name\":\"big\",\"payload_bytes\":100000}]}}],"
             "\"pipeline\":{},\"bindings\":[{\"backend\":\"mock\"}]}",
             argv[1]);
    MCPG_REQUIRE(kernel_up(dir, "serial.json", text, argv[1]), "kernel");
    new_object_at_freed_address();
    kernel_down();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return MCPG_CHECK_EXIT("test_serial");
}
