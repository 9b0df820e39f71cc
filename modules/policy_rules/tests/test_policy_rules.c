/* policy_rules.so through the SDK's fake host: check() on every method it
 * judges (allowed, no rule, a failed guard: -32003, HTTP 403, a message and
 * data that name no rule), visible() for each kind, the config errors
 * `mcpg --check` shows, other_methods, ABI 1.2's client name and roles (and
 * a kernel without them), and the rules file read again at reloaded() (a
 * bad file keeps the rules served). Ends leak-free. */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static mcpg_fakehost *fh;
static const mcpg_module *mod;
static mcpg_host *host;

static const char *const RULES =
    "[{\"id\":\"admins\",\"roles\":\"admin\",\"tools\":\"*\",\"prompts\":\"*\",\"resources\":\"*\"},"
    " {\"id\":\"readers\",\"tenant\":\"acme\",\"roles\":\"reader\",\"tools\":[\"search\",\"echo\"],"
    "  \"prompts\":\"summary\",\"resources\":\"file:///docs/*\","
    "  \"arguments\":[{\"pointer\":\"/limit\",\"min\":1,\"max\":50},"
    "                 {\"pointer\":\"/q\",\"regex\":\"[a-z ]*\",\"required\":true}]},"
    " {\"id\":\"bob\",\"principal\":\"bob\",\"tools\":\"echo\","
    "  \"arguments\":[{\"pointer\":\"/message\",\"max_length\":10}]}]";

typedef struct who {
    const char *principal, *tenant, *roles; /* roles: a comma list */
} who;

static const who ADMIN = {"ann", "any", "ops,admin"}, READER = {"rita", "acme", "reader"},
                 BOB = {"bob", NULL, NULL}, NOBODY = {"zed", "acme", "guest"},
                 ANON = {NULL, NULL, NULL};

static mcpg_call *call_as(const who *w, const char *method, const char *target, const char *args) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, method, target, args, "7");
    MCPG_REQUIRE(c != NULL, "call_new");
    if (w->principal) host->call_set_identity(c, w->principal, w->tenant, w->roles);
    return c;
}

typedef struct verdict {
    int status;
    int64_t code;
    int http;
    char message[300];
    char data[300];
} verdict;

static verdict run(mcpg_instance *inst, mcpg_call *c) {
    verdict v = {0};
    v.status = mcpg_fakehost_run(fh, inst, c, 1000);
    mcpg_call_outcome oc = {.size = sizeof oc};
    mcpg_fakehost_outcome(c, &oc);
    if (oc.is_error) {
        v.code = oc.error_code;
        v.http = oc.http_status;
        snprintf(v.message, sizeof v.message, "%s", oc.error_message);
        snprintf(v.data, sizeof v.data, "%.*s", (int)oc.error_data_len,
                 oc.error_data ? oc.error_data : "");
    }
    mcpg_fakehost_call_free(fh, c);
    return v;
}

static verdict check(mcpg_instance *inst, const who *w, const char *method, const char *target,
                     const char *args) {
    return run(inst, call_as(w, method, target, args));
}

static int allowed(mcpg_instance *inst, const who *w, const char *method, const char *target,
                   const char *args) {
    verdict v = check(inst, w, method, target, args);
    return v.status == MCPG_CONTINUE;
}

static mcpg_instance *load(const char *name, const char *config) {
    return mcpg_fakehost_load_or_exit(fh, mod, name, config);
}

static void test_checks(void) {
    char cfg[2048];
    snprintf(cfg, sizeof cfg, "{\"rules\":%s}", RULES);
    mcpg_instance *p = load("policy", cfg);
    const char *ok_args = "{\"q\":\"hello world\",\"limit\":5}";

    MCPG_CHECK(allowed(p, &ADMIN, "tools/call", "drop_table", "{}"), "admin: any tool");
    MCPG_CHECK(allowed(p, &READER, "tools/call", "search", ok_args), "reader: search");
    MCPG_CHECK(allowed(p, &BOB, "tools/call", "echo", "{\"message\":\"hi\"}"), "bob: echo");

    verdict v = check(p, &READER, "tools/call", "drop_table", "{}");
    MCPG_CHECK(v.status == MCPG_DENY && v.code == -32003 && v.http == 403, "no rule: %d %lld %d",
               v.status, (long long)v.code, v.http);
    MCPG_CHECK(!strcmp(v.message, "denied by policy: no rule allows tool \"drop_table\" for "
                                  "this principal"), "no-rule message: %s", v.message);
    MCPG_CHECK(!strcmp(v.data, "{\"reason\":\"no_rule\",\"kind\":\"tool\",\"name\":\"drop_table\"}"),
               "no-rule data: %s", v.data);

    v = check(p, &READER, "tools/call", "search", "{\"q\":\"hello\",\"limit\":51}");
    MCPG_CHECK(v.status == MCPG_DENY && v.code == -32003 && v.http == 403 &&
                   !strcmp(v.message, "denied by policy: argument guard failed at /limit") &&
                   !strcmp(v.data, "{\"reason\":\"argument_guard\",\"pointer\":\"/limit\"}"),
               "guard: %s %s", v.message, v.data);
    v = check(p, &READER, "tools/call", "search", "{\"limit\":5}");
    MCPG_CHECK(v.status == MCPG_DENY && strstr(v.message, "at /q"), "required: %s", v.message);
    v = check(p, &READER, "tools/call", "search", "{\"q\":\"DROP TABLE\"}");
    MCPG_CHECK(v.status == MCPG_DENY && strstr(v.message, "at /q") && !strstr(v.message, "a-z"),
               "regex named by pointer, never by pattern: %s", v.message);
    v = check(p, &BOB, "tools/call", "echo", "{\"message\":\"far too long a message\"}");
    MCPG_CHECK(v.status == MCPG_DENY && strstr(v.message, "at /message") &&
                   !strstr(v.message, "10"), "max_length: %s", v.message);
    v = check(p, &ANON, "tools/call", "echo", "{}");
    MCPG_CHECK(v.status == MCPG_DENY && v.code == -32003, "anonymous: no rule admits it");
    MCPG_CHECK(!allowed(p, &NOBODY, "tools/call", "echo", "{}"), "a guest");

    MCPG_CHECK(allowed(p, &READER, "prompts/get", "summary", "{\"q\":\"x\"}"), "prompt");
    v = check(p, &READER, "prompts/get", "review", "{}");
    MCPG_CHECK(v.status == MCPG_DENY && strstr(v.message, "no rule allows prompt \"review\""),
               "prompt denied: %s", v.message);
    MCPG_CHECK(allowed(p, &READER, "resources/read", "file:///docs/a.md", NULL), "resource");
    v = check(p, &READER, "resources/read", "file:///etc/passwd", NULL);
    MCPG_CHECK(v.status == MCPG_DENY && strstr(v.message, "resource \"file:///etc/passwd\""),
               "resource denied: %s", v.message);

    /* lists always pass: visible() filters them */
    const char *lists[] = {"tools/list", "prompts/list", "resources/list",
                           "resources/templates/list"};
    for (int i = 0; i < 4; i++)
        MCPG_CHECK(allowed(p, &NOBODY, lists[i], NULL, "{}") && allowed(p, &ANON, lists[i], NULL, "{}"),
                   "%s passes", lists[i]);

    mcpg_call *c = call_as(&READER, "resources/subscribe", "file:///docs/x", NULL);
    MCPG_CHECK(run(p, c).status == MCPG_CONTINUE, "subscribe to a readable uri");
    c = call_as(&READER, "resources/subscribe", "file:///secret/x", NULL);
    MCPG_CHECK(run(p, c).status == MCPG_DENY, "subscribe to another");
    MCPG_CHECK(allowed(p, &NOBODY, "resources/unsubscribe", "file:///secret/x", NULL),
               "unsubscribe always");

    c = call_as(&READER, "completion/complete", NULL,
                "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"summary\"},"
                "\"argument\":{\"name\":\"q\",\"value\":\"a\"}}");
    MCPG_CHECK(run(p, c).status == MCPG_CONTINUE, "completion of an allowed prompt");
    c = call_as(&READER, "completion/complete", NULL,
                "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"review\"},"
                "\"argument\":{\"name\":\"q\",\"value\":\"a\"}}");
    v = run(p, c);
    MCPG_CHECK(v.status == MCPG_DENY && strstr(v.message, "prompt \"review\""),
               "completion of another: %s", v.message);
    c = call_as(&READER, "completion/complete", NULL,
                "{\"ref\":{\"type\":\"ref/resource\",\"uri\":\"file:///docs/{name}\"},"
                "\"argument\":{\"name\":\"name\",\"value\":\"a\"}}");
    MCPG_CHECK(run(p, c).status == MCPG_CONTINUE, "completion of a template it can read from");

    MCPG_CHECK(allowed(p, &READER, "tasks/get", "mock.1", NULL), "tasks: an admitted caller");
    v = check(p, &NOBODY, "tasks/get", "mock.1", NULL);
    MCPG_CHECK(v.status == MCPG_DENY && v.code == -32003 &&
                   !strcmp(v.message, "denied by policy: no rule allows anything for this "
                                      "principal") && strstr(v.data, "\"method\":\"tasks/get\""),
               "tasks: a caller no rule admits: %s %s", v.message, v.data);
    MCPG_CHECK(mcpg_fakehost_unload(fh, p) == 0, "unload");
}

/* ---- visible ---- */

static int visible(mcpg_instance *inst, mcpg_call *c, const char *kind, const char *name) {
    const mcpg_policy_ops *ops = mod->ops;
    return ops->visible(mcpg_fakehost_state(inst), mcpg_fakehost_op_call(inst, c), kind, name);
}

static void test_visible(void) {
    char cfg[2048];
    snprintf(cfg, sizeof cfg, "{\"rules\":%s}", RULES);
    mcpg_instance *p = load("policy", cfg);
    mcpg_call *c = call_as(&READER, "tools/list", NULL, "{}");
    MCPG_REQUIRE(mcpg_fakehost_op_begin(fh, p, c) == 0, "op_begin");
    MCPG_CHECK(visible(p, c, "tool", "search") && visible(p, c, "tool", "echo"), "its tools");
    MCPG_CHECK(!visible(p, c, "tool", "drop_table"), "not another");
    MCPG_CHECK(visible(p, c, "prompt", "summary") && !visible(p, c, "prompt", "review"), "prompts");
    MCPG_CHECK(visible(p, c, "resource", "file:///docs/a") &&
                   !visible(p, c, "resource", "file:///etc/x"), "resources");
    MCPG_CHECK(visible(p, c, "resource_template", "file:///docs/{path}") &&
                   visible(p, c, "resource_template", "file:///{dir}/readme") &&
                   !visible(p, c, "resource_template", "db://{table}"), "templates");
    MCPG_CHECK(!visible(p, c, "widget", "search"), "an unknown kind is hidden");
    void **slot = host->call_slot(mcpg_fakehost_op_call(p, c), p);
    MCPG_CHECK(slot && ((uintptr_t)*slot & 1u), "the caller's mask is kept for the list");
    MCPG_CHECK(mcpg_fakehost_op_end(fh, c, MCPG_CONTINUE) == MCPG_CONTINUE, "op_end");
    mcpg_fakehost_call_free(fh, c);

    c = call_as(&ANON, "tools/list", NULL, "{}");
    mcpg_fakehost_op_begin(fh, p, c);
    MCPG_CHECK(!visible(p, c, "tool", "echo"), "anonymous sees nothing");
    mcpg_fakehost_op_end(fh, c, MCPG_CONTINUE);
    mcpg_fakehost_call_free(fh, c);
    MCPG_CHECK(mcpg_fakehost_unload(fh, p) == 0, "unload");
}

/* ---- config ---- */

static void expect_refused(const char *config, const char *needle) {
    int rc = mcpg_fakehost_check(fh, mod, config);
    const char *rep = mcpg_fakehost_report_text(fh);
    MCPG_CHECK(rc == MCPG_ECONFIG && strstr(rep, needle), "%s: expected %s, got %d:\n%s", config,
               needle, rc, rep);
}

static void test_config(void) {
    MCPG_CHECK(mcpg_fakehost_check(fh, mod, "{\"rules\":[]}") == 0, "an empty policy");
    expect_refused("{}", "rules: give rules, rules_file or both");
    expect_refused("{\"rules\":[{\"tools\":\"a\",\"roles\":7}]}",
                   "rules[0].roles: expected a glob");
    expect_refused("{\"rules\":[{\"tools\":\"t\",\"arguments\":[{\"pointer\":\"/q\","
                   "\"regex\":\"[z-a]\"}]}]}", "rules[0].arguments[0].regex: not a POSIX");
    expect_refused("{\"rules\":[],\"other_methods\":\"sometimes\"}", "other_methods");
    expect_refused("{\"rules_file\":\"/nonexistent/p.json\"}", "rules_file: /nonexistent/p.json");
}

static void test_other_methods(void) {
    mcpg_instance *allow = load("allow", "{\"rules\":[],\"other_methods\":\"allow\"}");
    MCPG_CHECK(allowed(allow, &NOBODY, "tasks/get", "x.1", NULL), "allow");
    MCPG_CHECK(!allowed(allow, &NOBODY, "tools/call", "echo", "{}"), "an empty policy denies");
    mcpg_fakehost_unload(fh, allow);
    mcpg_instance *deny = load("deny", "{\"rules\":[{\"tools\":\"*\"}],\"other_methods\":\"deny\"}");
    MCPG_CHECK(!allowed(deny, &BOB, "tasks/get", "x.1", NULL), "deny");
    MCPG_CHECK(allowed(deny, &BOB, "tools/call", "echo", "{}"), "tools still by rule");
    mcpg_fakehost_unload(fh, deny);
}

/* ---- ABI 1.2: the client's own name, roles one by one; and a 1.0 kernel ---- */

static void test_identities(void) {
    mcpg_instance *p = load("ids", "{\"rules\":[{\"roles\":\"r40\",\"tools\":\"pre_search\"},"
                                   "{\"roles\":\"writer\",\"tools\":\"search\"}]}");
    /* forty roles: more than the check keeps on its stack */
    char names[40][8];
    const char *roles[40];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "r%d", i + 1);
        roles[i] = names[i];
    }
    mcpg_identity id = {.size = sizeof id, .n_roles = 40, .principal = "many", .roles = roles};
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "search", "{}", "1");
    MCPG_REQUIRE(host->call_identify(c, &id) == 0, "call_identify");
    mcpg_fakehost_call_set_client_name(c, "pre_search");
    MCPG_CHECK(run(p, c).status == MCPG_CONTINUE, "the client's name (with the prefix) is judged");
    c = mcpg_fakehost_call_new(fh, "tools/call", "search", "{}", "1");
    host->call_identify(c, &id);
    mcpg_fakehost_call_set_client_name(c, "other_search");
    verdict v = run(p, c);
    MCPG_CHECK(v.status == MCPG_DENY && strstr(v.message, "\"other_search\""),
               "not the backend's name: %s", v.message);

    /* a kernel without the 1.2 slots: roles from the comma list, the target as the name */
    mcpg_host saved = *host;
    host->call_role_count = NULL;
    host->call_role = NULL;
    host->call_client_name = NULL;
    const who writer = {"wendy", NULL, "reader,writer"};
    MCPG_CHECK(allowed(p, &writer, "tools/call", "search", "{}"), "1.0: roles split");
    MCPG_CHECK(!allowed(p, &NOBODY, "tools/call", "search", "{}"), "1.0: still denies");
    *host = saved;
    MCPG_CHECK(allowed(p, &writer, "tools/call", "search", "{}"), "1.2 again");
    MCPG_CHECK(mcpg_fakehost_unload(fh, p) == 0, "unload");
}

/* ---- the rules file at reload ---- */

static void write_file(const char *path, const char *text) {
    MCPG_REQUIRE(mcpg_fakehost_write_file(path, text) == 0, "write %s", path);
}

static void test_reloaded(void) {
    char path[] = "/tmp/pr-rules-XXXXXX";
    int fd = mkstemp(path);
    MCPG_REQUIRE(fd >= 0, "mkstemp");
    close(fd);
    write_file(path, "[{\"principal\":\"bob\",\"tools\":\"echo\"}]");
    char cfg[256];
    snprintf(cfg, sizeof cfg, "{\"rules_file\":\"%s\"}", path);
    mcpg_instance *p = load("filed", cfg);
    MCPG_CHECK(allowed(p, &BOB, "tools/call", "echo", "{}") &&
                   !allowed(p, &BOB, "tools/call", "search", "{}"), "the file's rules");
    write_file(path, "{\"rules\":[{\"principal\":\"bob\",\"tools\":\"search\"}]}");
    MCPG_CHECK(mcpg_fakehost_reloaded(fh, p) == 0, "reloaded");
    MCPG_CHECK(!allowed(p, &BOB, "tools/call", "echo", "{}") &&
                   allowed(p, &BOB, "tools/call", "search", "{}"), "the new rules");
    mcpg_fakehost_run_for(fh, 20); /* the old policy is freed once the loop passes */
    write_file(path, "{\"rules\":[{\"tols\":\"x\"}]}");
    mcpg_fakehost_log_clear(fh);
    mcpg_fakehost_reloaded(fh, p);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "rules[0].tols: unknown key") &&
                   mcpg_fakehost_log_contains(fh, "not reloaded"),
               "a bad file is logged:\n%s", mcpg_fakehost_log_text(fh));
    MCPG_CHECK(allowed(p, &BOB, "tools/call", "search", "{}"), "and the rules before it serve");
    write_file(path, "[{\"principal\":\"bob\",\"tools\":\"three\"}]");
    mcpg_fakehost_reloaded(fh, p); /* retired, not yet freed at unload: destroy frees it */
    MCPG_CHECK(allowed(p, &BOB, "tools/call", "three", "{}"), "a third version");
    MCPG_CHECK(mcpg_fakehost_unload(fh, p) == 0, "unload");
    remove(path);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: test_policy_rules path/to/policy_rules.so");
    void *so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    MCPG_REQUIRE(so != NULL, "dlopen %s: %s", argv[1], dlerror());
    mcpg_module_entry_fn entry = (mcpg_module_entry_fn)dlsym(so, MCPG_ENTRY_SYMBOL);
    MCPG_REQUIRE(entry != NULL, "no entry symbol");
    mod = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh != NULL, "fakehost");
    mcpg_fakehost_set_quiet(fh, 1);
    host = mcpg_fakehost_host(fh);
    test_checks();
    test_visible();
    test_config();
    test_other_methods();
    test_identities();
    test_reloaded();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    dlclose(so);
    return MCPG_CHECK_EXIT("test_policy_rules");
}
