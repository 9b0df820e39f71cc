/* What identity_apikey's authenticate costs per call, by table size and
 * outcome. Usage: bench_identity_apikey path/to/identity_apikey.so [calls [keys [case]]]
 * (keys: one table size instead of 1, 10, 100, 1000 and 10000; case: only
 * valid, wrong, none or jwt, the others print 0)
 *
 * Each row times `calls` authenticate ops driven through the fake host
 * (op_begin / authenticate / op_end on one call with its headers set), minus
 * the same loop around an op that does nothing, so the figure is the
 * module's own work: header lookups, SHA-256, the constant-time scan, and
 * call_identify or the refusal. Run it under
 *   valgrind --tool=callgrind --toggle-collect=apikey_authenticate
 * with one keys size and one case for instruction counts (the Ir of
 * apikey_authenticate divided by calls). A tool that prints numbers, not a
 * test. */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static mcpg_fakehost *fh;
static char keys_path[] = "/tmp/bench-idkey-XXXXXX";

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void key_of(int i, char *out, size_t cap) {
    snprintf(out, cap, "mcpg_bench-key-%08d-abcdefghijklmnopqrstuvwxyz01", i);
}

/* A keys file with n entries; the key of entry i is key_of(i). */
static void write_keys(int n) {
    FILE *f = fopen(keys_path, "w");
    MCPG_REQUIRE(f, "open %s", keys_path);
    fputs("[", f);
    for (int i = 0; i < n; i++) {
        char key[80], hex[65];
        unsigned char h[32];
        key_of(i, key, sizeof key);
        EVP_Digest(key, strlen(key), h, NULL, EVP_sha256(), NULL);
        for (int k = 0; k < 32; k++) sprintf(hex + 2 * k, "%02x", h[k]);
        fprintf(f, "%s{\"sha256\":\"%s\",\"principal\":\"user%d\",\"tenant\":\"t\","
                   "\"roles\":[\"reader\",\"writer\"]}", i ? ",\n" : "", hex, i);
    }
    fputs("]\n", f);
    fclose(f);
}

static mcpg_status nothing(void *instance, mcpg_call *call) {
    (void)instance, (void)call;
    return MCPG_CONTINUE;
}

/* ns per op of `op` on a call with one header (or none). */
static double time_op(mcpg_instance *inst, mcpg_status (*op)(void *, mcpg_call *),
                      const char *header, const char *value, long calls, mcpg_status want) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", "{}", "1");
    MCPG_REQUIRE(c, "call_new");
    if (header) mcpg_fakehost_call_set_header(c, header, value);
    mcpg_fakehost_call_set_peer(c, "127.0.0.1:5555");
    void *state = mcpg_fakehost_state(inst);
    double t0 = now_ns();
    for (long i = 0; i < calls; i++) {
        mcpg_fakehost_op_begin(fh, inst, c);
        mcpg_status st = op(state, mcpg_fakehost_op_call(inst, c));
        mcpg_fakehost_op_end(fh, c, st);
        if (st != want) {
            fprintf(stderr, "status %d, expected %d\n", st, want);
            exit(1);
        }
    }
    double per = (now_ns() - t0) / (double)calls;
    mcpg_fakehost_call_free(fh, c);
    return per;
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc >= 2, "usage: bench_identity_apikey path/to/identity_apikey.so [calls]");
    long calls = argc > 2 ? atol(argv[2]) : 200000;
    int fd = mkstemp(keys_path);
    MCPG_REQUIRE(fd >= 0, "mkstemp");
    close(fd);
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    MCPG_REQUIRE(dl, "dlopen: %s", dlerror());
    mcpg_module_entry_fn entry;
    void *sym = dlsym(dl, MCPG_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    const mcpg_identity_ops *ops = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR)->ops;
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fakehost");
    mcpg_fakehost_set_quiet(fh, 1);
    mcpg_fakehost_set_log_level(fh, MCPG_LOG_ERROR); /* refusals log at warn: not timed */

    printf("%-6s %12s %12s %12s %12s   (ns per authenticate, %ld calls each, "
           "fake-host op overhead subtracted)\n", "keys", "valid", "wrong", "no key", "jwt", calls);
    static const int sizes[] = {1, 10, 100, 1000, 10000};
    int only = argc > 3 ? atoi(argv[3]) : 0;
    for (size_t s = 0; s < (only ? 1 : sizeof sizes / sizeof sizes[0]); s++) {
        int n = only ? only : sizes[s];
        write_keys(n);
        char cfg[128];
        snprintf(cfg, sizeof cfg, "{\"keys_file\":\"%s\"}", keys_path);
        mcpg_instance *inst = NULL;
        MCPG_REQUIRE(mcpg_fakehost_load_file(fh, argv[1], "keys", cfg, &inst) == 0, "load: %s",
                     mcpg_fakehost_report_text(fh));
        long k = n >= 1000 && !only ? calls / (n / 100) : calls; /* keep big tables short */
        char last[80];
        key_of(n - 1, last, sizeof last);
        double base = time_op(inst, nothing, NULL, NULL, k, MCPG_CONTINUE);
        const char *one = argc > 4 ? argv[4] : NULL;
#define ROW(name, ...) (!one || !strcmp(one, name) ? time_op(inst, __VA_ARGS__) - base : 0)
        double valid = ROW("valid", ops->authenticate, "x-api-key", last, k, MCPG_CONTINUE);
        double wrong = ROW("wrong", ops->authenticate, "x-api-key", "mcpg_wrong", k, MCPG_DENY);
        double none = ROW("none", ops->authenticate, NULL, NULL, k, MCPG_CONTINUE);
        double jwt = ROW("jwt", ops->authenticate, "authorization",
                         "Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln", k, MCPG_CONTINUE);
#undef ROW
        printf("%-6d %12.0f %12.0f %12.0f %12.0f\n", n, valid, wrong, none, jwt);
        MCPG_REQUIRE(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    }
    int problems = mcpg_fakehost_free(fh);
    dlclose(dl);
    unlink(keys_path);
    return problems != 0;
}
