/* What one check() costs: the ten rules of conf/policy-example.json, and
 * calls that are allowed at the first rule, at a guarded middle rule, at the
 * last rule, and denied. Not a test: it prints numbers.
 *
 *   bench_policy_check path/to/policy_rules.so [iterations [scenario]]
 *   valgrind --tool=callgrind --collect-atstart=no --toggle-collect='pr_check' \
 *       bench_policy_check build/modules/policy_rules.so 2000 1
 *
 * Under callgrind only check() and what it calls (the host's slots
 * included) are counted; divide the Ir by the calls made (printed). */
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const CONFIG =
    "{\"rules\":["
    "{\"id\":\"admins\",\"roles\":\"admin\",\"tools\":\"*\",\"prompts\":\"*\",\"resources\":\"*\"},"
    "{\"id\":\"acme-echo\",\"tenant\":\"acme\",\"roles\":[\"reader\",\"analyst-*\"],\"tools\":\"echo\"},"
    "{\"id\":\"acme-search\",\"tenant\":\"acme\",\"roles\":[\"reader\",\"analyst-*\"],\"tools\":\"search\","
    " \"arguments\":[{\"pointer\":\"/q\",\"regex\":\"[A-Za-z0-9 _-]{1,200}\",\"required\":true},"
    "                {\"pointer\":\"/limit\",\"min\":1,\"max\":50}]},"
    "{\"id\":\"acme-content\",\"tenant\":\"acme\",\"roles\":\"reader\","
    " \"prompts\":\"ev_test_simple_prompt\",\"resources\":\"test://static-*\"},"
    "{\"id\":\"analysts-db\",\"tenant\":\"acme\",\"roles\":\"analyst-*\",\"tools\":\"db_query\","
    " \"arguments\":[{\"pointer\":\"/table\",\"enum\":[\"users\",\"orders\",\"invoices\"]},"
    "                {\"pointer\":\"/columns\",\"max_length\":16}]},"
    "{\"id\":\"analysts-templates\",\"tenant\":\"acme\",\"roles\":\"analyst-*\","
    " \"resources\":\"test://template/*\"},"
    "{\"id\":\"ops-reset\",\"roles\":\"ops\",\"tools\":\"admin_reset\","
    " \"arguments\":[{\"pointer\":\"/force\",\"enum\":[false]},"
    "                {\"pointer\":\"/reason\",\"required\":true,\"max_length\":500}]},"
    "{\"id\":\"ci-bot\",\"principal\":\"svc-ci-*\",\"tools\":[\"echo\",\"db_query\"],"
    " \"arguments\":[{\"pointer\":\"/table\",\"enum\":[\"orders\"]}]},"
    "{\"id\":\"reporting\",\"principal\":[\"svc-report\",\"svc-report-*\"],\"prompts\":\"ev_*\"},"
    "{\"id\":\"public\",\"anonymous\":true,\"tools\":\"echo\","
    " \"arguments\":[{\"pointer\":\"/message\",\"max_length\":64}]}]}";

typedef struct scenario {
    const char *what, *principal, *tenant, *roles, *tool, *args;
    int expect; /* mcpg_status */
} scenario;

static const scenario SCENARIOS[] = {
    {"allowed by rule 1 (admin)", "ann", "any", "ops,admin", "echo", "{\"message\":\"hi\"}", MCPG_CONTINUE},
    {"allowed by rule 3 (regex + range guards)", "rita", "acme", "reader", "search",
     "{\"q\":\"quarterly report\",\"limit\":20}", MCPG_CONTINUE},
    {"allowed by rule 5 (enum + length guards)", "alex", "acme", "analyst-eu", "db_query",
     "{\"table\":\"orders\",\"columns\":[\"id\",\"total\"]}", MCPG_CONTINUE},
    {"allowed by rule 10 (anonymous, last)", NULL, NULL, NULL, "echo", "{\"message\":\"hi\"}",
     MCPG_CONTINUE},
    {"denied: a guard fails", "rita", "acme", "reader", "search", "{\"q\":\"x\",\"limit\":99}",
     MCPG_DENY},
    {"denied: no rule", "zed", "acme", "guest", "admin_reset", "{}", MCPG_DENY},
};

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s policy_rules.so [iterations [scenario]]\n", argv[0]);
        return 2;
    }
    int iters = argc > 2 ? atoi(argv[2]) : 20000;
    int only = argc > 3 ? atoi(argv[3]) : -1; /* one scenario (0-based), for callgrind */
    void *so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    mcpg_module_entry_fn entry = so ? (mcpg_module_entry_fn)dlsym(so, MCPG_ENTRY_SYMBOL) : NULL;
    if (!entry) {
        fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
        return 1;
    }
    const mcpg_module *mod = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    const mcpg_policy_ops *ops = mod->ops;
    mcpg_fakehost *fh = mcpg_fakehost_new();
    mcpg_fakehost_set_quiet(fh, 1);
    mcpg_host *host = mcpg_fakehost_host(fh);
    mcpg_instance *inst = NULL;
    if (mcpg_fakehost_load(fh, mod, "bench", CONFIG, &inst) != 0) {
        fprintf(stderr, "load: %s\n", mcpg_fakehost_report_text(fh));
        return 1;
    }
    void *state = mcpg_fakehost_state(inst);
    int bad = 0;
    for (size_t s = 0; s < sizeof SCENARIOS / sizeof *SCENARIOS; s++) {
        if (only >= 0 && (size_t)only != s) continue;
        const scenario *sc = &SCENARIOS[s];
        mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", sc->tool, sc->args, "1");
        if (sc->principal) host->call_set_identity(c, sc->principal, sc->tenant, sc->roles);
        mcpg_fakehost_op_begin(fh, inst, c);
        mcpg_call *h = mcpg_fakehost_op_call(inst, c);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int st = 0;
        for (int i = 0; i < iters; i++) st = ops->check(state, h);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        mcpg_fakehost_op_end(fh, c, st);
        mcpg_fakehost_call_free(fh, c);
        double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / iters;
        printf("%-45s %s  %8.0f ns/check  (%d calls)\n", sc->what,
               st == sc->expect ? "ok  " : "WRONG", ns, iters);
        bad += st != sc->expect;
    }
    mcpg_fakehost_unload(fh, inst);
    int problems = mcpg_fakehost_free(fh);
    dlclose(so);
    return bad || problems ? 1 : 0;
}
