/* bench_identity_jwt: what identity_jwt costs per call, through its .so on
 * the SDK's fake host: CPU time of one authenticate for a good token of each
 * algorithm, with the verified-token cache off (every call verifies the
 * signature) and on (the same token again: the SHA-256 and the claims only),
 * beside a call without a token (what the fake host's dispatch itself costs).
 * A tool that prints numbers, not a test.
 * Usage: bench_identity_jwt path/to/identity_jwt.so [calls per case [which [alg]]]
 * (which: "hit" or "miss" runs only the cached or the uncached cases, alg only
 * that algorithm's token: for a profiler, e.g. callgrind --toggle-collect=
 * jwt_authenticate, whose count divided by the calls is instructions per call). */
#define _GNU_SOURCE
#include <mcpg/fakehost.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jwt_testkeys.h"

static double cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* CPU µs per authenticate of `auth` (NULL: no header); -1 when it did not
 * answer as expected. */
static double per_call(mcpg_fakehost *fh, mcpg_instance *inst, const char *auth, int n) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", NULL, NULL);
    if (auth) mcpg_fakehost_call_set_header(c, "authorization", auth);
    int bad = 0;
    double t0 = cpu_us();
    for (int i = 0; i < n; i++) bad |= mcpg_fakehost_run(fh, inst, c, 1000) != MCPG_CONTINUE;
    double t = (cpu_us() - t0) / n;
    if (auth && !bad) bad = mcpg_fakehost_host(fh)->call_principal(c) == NULL;
    mcpg_fakehost_call_free(fh, c);
    return bad ? -1 : t;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_identity_jwt identity_jwt.so [calls [hit|miss [alg]]]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 5000;
    int hits_only = argc > 3 && strcmp(argv[3], "hit") == 0;
    int misses_only = argc > 3 && strcmp(argv[3], "miss") == 0;
    const char *only_alg = argc > 4 ? argv[4] : NULL;
    const char *algs[3] = {"RS256", "ES256", "EdDSA"};
    char dir[] = "/tmp/bench_identity_jwt-XXXXXX", path[64], *auth[3];
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/jwks.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"keys\":[");
    for (int i = 0; i < 3; i++) {
        EVP_PKEY *k = tk_keygen(algs[i]);
        char kid[4] = {'k', (char)('0' + i), 0}, header[64], claims[256];
        char *jwk = tk_jwk(k, algs[i], kid);
        fprintf(f, "%s%s", i ? "," : "", jwk);
        snprintf(header, sizeof header, "{\"alg\":\"%s\",\"kid\":\"%s\",\"typ\":\"JWT\"}",
                 algs[i], kid);
        snprintf(claims, sizeof claims,
                 "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp\",\"sub\":\"alice\","
                 "\"exp\":%ld,\"iat\":%ld,\"scope\":\"tools:read tools:call\","
                 "\"client_id\":\"bench\",\"jti\":\"0123456789abcdef\"}",
                 (long)time(NULL) + 3600, (long)time(NULL));
        char *tok = tk_token(k, algs[i], header, claims);
        if (asprintf(&auth[i], "Bearer %s", tok) < 0) return 1;
        free(tok);
        free(jwk);
        EVP_PKEY_free(k);
    }
    fprintf(f, "]}");
    fclose(f);

    mcpg_fakehost *fh = mcpg_fakehost_new();
    mcpg_fakehost_set_quiet(fh, 1);
    printf("identity_jwt: CPU µs per authenticate, %d calls per case (fake host, one loop)\n", n);
    printf("%-8s %12s %12s\n", "token", "no cache", "cache hit");
    double t[4][2] = {{0}};
    for (int cache = hits_only; cache < 2 - misses_only; cache++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "{\"issuer\":\"https://issuer.example\",\"audience\":\"mcp\",\"jwks_file\":\"%s\","
                 "\"roles_claim\":\"scope\",\"cache_tokens\":%d}", path, cache ? 4096 : 0);
        mcpg_instance *inst;
        if (mcpg_fakehost_load_file(fh, argv[1], "jwt", cfg, &inst) != 0) {
            fprintf(stderr, "load: %s\n", mcpg_fakehost_report_text(fh));
            return 1;
        }
        t[0][cache] = per_call(fh, inst, NULL, n);
        for (int i = 0; i < 3; i++)
            if (!only_alg || strcmp(only_alg, algs[i]) == 0)
                t[i + 1][cache] = per_call(fh, inst, auth[i], n);
        mcpg_fakehost_unload(fh, inst);
    }
    for (int i = 0; i < 4; i++) {
        if (i && only_alg && strcmp(only_alg, algs[i - 1]) != 0) continue;
        char off[16] = "-", on[16] = "-";
        if (!hits_only) snprintf(off, sizeof off, "%.2f", t[i][0]);
        if (!misses_only) snprintf(on, sizeof on, "%.2f", t[i][1]);
        printf("%-8s %12s %12s\n", i ? algs[i - 1] : "(none)", off, on);
    }
    for (int i = 0; i < 3; i++) free(auth[i]);
    unlink(path);
    rmdir(dir);
    return mcpg_fakehost_free(fh) != 0;
}
