/* backend_command through the SDK's fake host, with real programs.
 * Usage: test_backend_command path/to/backend_command.so */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *so_path;
static mcpg_fakehost *fh;

static mcpg_instance *load(const char *config, int inline_on) {
    mcpg_instance *inst = mcpg_fakehost_load_file_or_exit(fh, so_path, "cmd", config);
    MCPG_REQUIRE(mcpg_fakehost_set_inline(inst, inline_on) == 0, "set_inline");
    return inst;
}

static void unload(mcpg_instance *inst) {
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

/* Run one call; the result parsed (NULL on an error: *code, *msg set). */
static json_t *call(mcpg_instance *inst, const char *tool, const char *args, int64_t *code,
                    char *msg, size_t msgcap) {
    char *result = mcpg_fakehost_call_tool(fh, inst, tool, args, 10000, code, msg, msgcap);
    json_t *o = result ? json_loads(result, 0, NULL) : NULL;
    free(result);
    return o;
}

static int strcmp_ptrs(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *text_of(json_t *o) {
    return json_string_value(json_object_get(json_array_get(json_object_get(o, "content"), 0), "text"));
}

static void test_echo_templates(int inline_on) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"say\",\"command\":\"echo\","
        "\"args\":[\"-n\",\"a={a}\",\"{b}\",\"{a}{a}\"]}]}", inline_on);
    mcpg_buf out = {0};
    MCPG_REQUIRE(mcpg_fakehost_list(fh, inst, MCPG_METHOD_TOOLS_LIST, &out) == 0, "list");
    json_t *a = json_loads(out.data, 0, NULL);
    json_t *schema = json_object_get(json_array_get(a, 0), "inputSchema");
    MCPG_CHECK(json_is_object(json_object_get(json_object_get(schema, "properties"), "a")) &&
                   json_is_object(json_object_get(json_object_get(schema, "properties"), "b")) &&
                   json_array_size(json_object_get(schema, "required")) == 2,
               "schema built from placeholders: %s", out.data);
    json_decref(a);
    mcpg_buf_free(&out);
    int64_t code;
    char msg[256];
    /* shell metacharacters and spaces stay one argv element each */
    json_t *o = call(inst, "say", "{\"a\":\"x y\",\"b\":\"$(id); 'q' \\\"*\"}", &code, msg, sizeof msg);
    MCPG_CHECK(o && strcmp(text_of(o), "a=x y $(id); 'q' \"* x yx y") == 0, "echo: %s",
               o ? text_of(o) : msg);
    MCPG_CHECK(o && !json_object_get(o, "isError") && !json_object_get(o, "structuredContent"),
               "plain success");
    json_decref(o);
    o = call(inst, "say", "{\"a\":7.5,\"b\":2}", &code, msg, sizeof msg);
    MCPG_CHECK(o && strcmp(text_of(o), "a=7.5 2 7.57.5") == 0, "numbers: %s", o ? text_of(o) : msg);
    json_decref(o);
    /* a negative number begins "{b}": an option to echo, and no "--" before it */
    o = call(inst, "say", "{\"a\":7.5,\"b\":-1}", &code, msg, sizeof msg);
    MCPG_CHECK(!o && code == MCPG_RPC_INVALID_PARAMS && strstr(msg, "'b' starts with '-'") &&
                   strstr(msg, "echo"),
               "-1 refused: %lld %s", (long long)code, msg);
    o = call(inst, "say", "{\"a\":\"x\"}", &code, msg, sizeof msg);
    MCPG_CHECK(!o && code == MCPG_RPC_INVALID_PARAMS && strstr(msg, "'b'"), "missing b: %lld %s",
               (long long)code, msg);
    o = call(inst, "say", "{\"a\":\"x\",\"b\":[1]}", &code, msg, sizeof msg);
    MCPG_CHECK(!o && code == MCPG_RPC_INVALID_PARAMS && strstr(msg, "'b'"), "array b: %s", msg);
    unload(inst);
}

/* sh -c 'printf "%s|" "$@"' sh ARGS...: prints each argv element as received. */
#define SHOW_ARGS "\"command\":\"/bin/sh\",\"args\":[\"-c\",\"printf '%s|' \\\"$@\\\"\",\"sh\","

static void test_option_values(void) {
    mcpg_instance *inst = load(
        "{\"tools\":["
        "{\"name\":\"bare\"," SHOW_ARGS "\"{a}\"]},"
        "{\"name\":\"suffix\"," SHOW_ARGS "\"{a}.txt\"]},"
        "{\"name\":\"joined\"," SHOW_ARGS "\"{a}{b}\"]},"
        "{\"name\":\"inner\"," SHOW_ARGS "\"--file={a}\",\"./{b}\"]},"
        "{\"name\":\"ended\"," SHOW_ARGS "\"x{b}\",\"--\",\"{a}\"]}"
        "]}", 1);
    static const struct {
        const char *tool, *args, *want; /* want: the output, or NULL: refused naming ... */
        const char *refused;
    } cases[] = {
        {"bare", "{\"a\":\"-rf\"}", NULL, "'a' starts with '-'"},
        {"bare", "{\"a\":\"--output=/etc/passwd\"}", NULL, "'a' starts with '-'"},
        {"bare", "{\"a\":\"-\"}", NULL, "'a' starts with '-'"},
        {"bare", "{\"a\":-5}", NULL, "'a' starts with '-'"},
        {"bare", "{\"a\":\"a-b\"}", "a-b|", NULL},
        {"bare", "{\"a\":\"\"}", "|", NULL},
        {"suffix", "{\"a\":\"-rf\"}", NULL, "'a' starts with '-'"},
        {"joined", "{\"a\":\"\",\"b\":\"-x\"}", NULL, "'b' starts with '-'"},
        {"joined", "{\"a\":\"y\",\"b\":\"-x\"}", "y-x|", NULL},
        {"inner", "{\"a\":\"-x\",\"b\":\"-y\"}", "--file=-x|./-y|", NULL},
        {"ended", "{\"a\":\"-rf\",\"b\":\"-q\"}", "x-q|--|-rf|", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int64_t code;
        char msg[512];
        json_t *o = call(inst, cases[i].tool, cases[i].args, &code, msg, sizeof msg);
        if (cases[i].want)
            MCPG_CHECK(o && strcmp(text_of(o), cases[i].want) == 0, "case %zu (%s %s): %s", i,
                       cases[i].tool, cases[i].args, o ? text_of(o) : msg);
        else
            MCPG_CHECK(!o && code == MCPG_RPC_INVALID_PARAMS && strstr(msg, cases[i].refused) &&
                           strstr(msg, "which sh would read as an option") && strstr(msg, "\"--\""),
                       "case %zu (%s %s) refused: %lld %s", i, cases[i].tool, cases[i].args,
                       (long long)code, msg);
        json_decref(o);
    }
    unload(inst);
}

static void test_stdin_json(void) {
    mcpg_instance *inst = load("{\"tools\":[{\"name\":\"cat\",\"command\":\"/bin/cat\","
                               "\"stdin\":\"json\",\"input_schema\":{\"type\":\"object\"}}]}", 1);
    int64_t code;
    char msg[256];
    json_t *o = call(inst, "cat", "{\"k\":[1,2],\"s\":\"v\"}", &code, msg, sizeof msg);
    MCPG_REQUIRE(o, "cat: %s", msg);
    json_t *sc = json_object_get(o, "structuredContent");
    MCPG_CHECK(json_is_object(sc) && strcmp(json_string_value(json_object_get(sc, "s")), "v") == 0 &&
                   json_array_size(json_object_get(sc, "k")) == 2,
               "structuredContent from stdout");
    MCPG_CHECK(strcmp(text_of(o), "{\"k\":[1,2],\"s\":\"v\"}") == 0, "text: %s", text_of(o));
    json_decref(o);
    unload(inst);
}

static void test_exit_status(void) {
    mcpg_instance *inst = load("{\"tools\":[{\"name\":\"fail\",\"command\":\"/bin/sh\","
                               "\"args\":[\"-c\",\"echo out; echo bad thing >&2; exit 3\"]}]}", 1);
    int64_t code;
    char msg[256];
    json_t *o = call(inst, "fail", "{}", &code, msg, sizeof msg);
    MCPG_REQUIRE(o, "a result, not an error: %s", msg);
    MCPG_CHECK(json_is_true(json_object_get(o, "isError")), "isError");
    MCPG_CHECK(strstr(text_of(o), "exit code 3") && strstr(text_of(o), "bad thing") &&
                   !strstr(text_of(o), "out"),
               "exit code and stderr: %s", text_of(o));
    json_decref(o);
    unload(inst);
}

/* A process is gone when it no longer exists or is a zombie no one reaped. */
static int gone(pid_t pid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static void read_pids(const char *file, pid_t *a, pid_t *b) {
    *a = *b = 0;
    FILE *f = fopen(file, "r");
    if (!f) return;
    int x = 0, y = 0;
    if (fscanf(f, "%d %d", &x, &y) != 2) x = y = 0;
    fclose(f);
    *a = x;
    *b = y;
}

static const char sleeper[] =
    "{\"tools\":[{\"name\":\"slow\",\"command\":\"/bin/sh\",\"timeout_ms\":%d,"
    "\"args\":[\"-c\",\"sleep 30 & echo $$ $! > \\\"$1\\\"; wait\",\"sh\",\"{pidfile}\"]}]}";

static void test_timeout_kills_group(void) {
    char conf[512], pidfile[] = "/tmp/mcpg-cmd-pidXXXXXX";
    int fd = mkstemp(pidfile);
    MCPG_REQUIRE(fd >= 0, "mkstemp");
    close(fd);
    snprintf(conf, sizeof conf, sleeper, 300);
    mcpg_instance *inst = load(conf, 1);
    char args[128], msg[256];
    snprintf(args, sizeof args, "{\"pidfile\":\"%s\"}", pidfile);
    int64_t code;
    uint64_t t0 = mcpg_fakehost_now_ms();
    json_t *o = call(inst, "slow", args, &code, msg, sizeof msg);
    uint64_t took = mcpg_fakehost_now_ms() - t0;
    MCPG_CHECK(!o && code == MCPG_RPC_SERVER_ERROR && strstr(msg, "timed out after 300 ms"),
               "timeout error: %lld %s", (long long)code, msg);
    MCPG_CHECK(took >= 250 && took < 5000, "answered at the timeout: %llu ms",
               (unsigned long long)took);
    pid_t sh, sl;
    read_pids(pidfile, &sh, &sl);
    MCPG_REQUIRE(sh > 0 && sl > 0, "pids written");
    for (int i = 0; i < 100 && !gone(sl); i++) usleep(10000);
    MCPG_CHECK(gone(sh) && gone(sl), "shell %d and its sleep %d are gone", (int)sh, (int)sl);
    if (!gone(sl)) kill(sl, SIGKILL);
    unlink(pidfile);
    unload(inst);
}

static void test_output_cap(void) {
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"big\",\"command\":\"/bin/sh\",\"max_output_bytes\":1000,"
        "\"args\":[\"-c\",\"yes | head -c 1000000\"]},"
        "{\"name\":\"forever\",\"command\":\"yes\",\"max_output_bytes\":5000,\"timeout_ms\":20000},"
        "{\"name\":\"fits\",\"command\":\"/bin/sh\",\"max_output_bytes\":1000,"
        "\"args\":[\"-c\",\"yes | head -c 1000\"]}]}", 1);
    int64_t code;
    char msg[256];
    json_t *o = call(inst, "big", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(!o && code == MCPG_RPC_SERVER_ERROR && strstr(msg, "output exceeds 1000 bytes"),
               "cap: %lld %s", (long long)code, msg);
    uint64_t t0 = mcpg_fakehost_now_ms();
    o = call(inst, "forever", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(!o && strstr(msg, "output exceeds 5000 bytes") && mcpg_fakehost_now_ms() - t0 < 5000,
               "an endless writer is killed at the cap: %s", msg);
    o = call(inst, "fits", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(o && strlen(text_of(o)) == 1000, "exactly the cap fits: %s", msg);
    json_decref(o);
    unload(inst);
}

static void test_cancel(void) {
    char conf[512], pidfile[] = "/tmp/mcpg-cmd-pidXXXXXX";
    int fd = mkstemp(pidfile);
    MCPG_REQUIRE(fd >= 0, "mkstemp");
    close(fd);
    snprintf(conf, sizeof conf, sleeper, 20000);
    mcpg_instance *inst = load(conf, 1);
    char args[128];
    snprintf(args, sizeof args, "{\"pidfile\":\"%s\"}", pidfile);
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "slow", args, "1");
    MCPG_REQUIRE(mcpg_fakehost_dispatch(fh, inst, c) == MCPG_PENDING, "pending");
    pid_t sh = 0, sl = 0;
    for (int i = 0; i < 200 && !sl; i++) {
        mcpg_fakehost_run_for(fh, 10);
        read_pids(pidfile, &sh, &sl);
    }
    MCPG_REQUIRE(sl > 0, "started");
    uint64_t t0 = mcpg_fakehost_now_ms();
    mcpg_fakehost_host(fh)->call_cancel(c);
    MCPG_CHECK(mcpg_fakehost_wait(fh, c, 5000) == MCPG_DENY, "cancel answers");
    MCPG_CHECK(mcpg_fakehost_error_code(c) == MCPG_RPC_SERVER_ERROR &&
                   strstr(mcpg_fakehost_error_message(c), "cancelled"),
               "cancelled: %s", mcpg_fakehost_error_message(c));
    MCPG_CHECK(mcpg_fakehost_now_ms() - t0 < 2000, "at once");
    mcpg_fakehost_call_free(fh, c);
    for (int i = 0; i < 100 && !(gone(sh) && gone(sl)); i++) mcpg_fakehost_run_for(fh, 10);
    MCPG_CHECK(gone(sh) && gone(sl), "group killed");
    if (!gone(sl)) kill(sl, SIGKILL);
    unlink(pidfile);
    unload(inst);
}

static void test_config_errors(void) {
    static const struct {
        const char *conf, *want;
    } cases[] = {
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"no-such-program-mcpg\"}]}", "tools[0].command"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"/nonexistent/prog\"}]}", "tools[0].command"},
        {"{\"tools\":[{\"name\":\"x\"}]}", "tools[0].command: is required"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"echo\",\"stdin\":\"yes\"}]}", "tools[0].stdin"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"echo\",\"args\":[1]}]}", "tools[0].args[0]"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"echo\",\"timout_ms\":5}]}", "timeout_ms"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"echo\",\"env\":{\"A\":{\"from_env\":"
         "\"MCPG_SURELY_UNSET_VAR\"}}}]}", "tools[0].env.A"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"echo\"},{\"name\":\"x\",\"command\":\"echo\"}]}",
         "tools[1].name"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"echo\",\"inherit_env\":\"HOME\"}]}",
         "tools[0].inherit_env: expected an array"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"echo\"},{\"name\":\"y\",\"command\":\"echo\","
         "\"inherit_env\":[\"HOME\",\"_OK1\",\"1BAD\"]}]}",
         "tools[1].inherit_env[2]: must be a variable name matching ^[A-Za-z_][A-Za-z0-9_]*$"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"echo\",\"inherit_env\":[\"A=B\"]}]}",
         "tools[0].inherit_env[0]"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"echo\",\"inherit_env\":[\"\"]}]}",
         "tools[0].inherit_env[0]"},
        {"{\"tools\":[{\"name\":\"x\",\"command\":\"echo\",\"inherit_env\":[7]}]}",
         "tools[0].inherit_env[0]"},
        {"{}", "tools"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mcpg_instance *inst = NULL;
        int rc = mcpg_fakehost_load_file(fh, so_path, "cmd", cases[i].conf, &inst);
        MCPG_CHECK(rc == MCPG_ECONFIG && strstr(mcpg_fakehost_report_text(fh), cases[i].want),
                   "case %zu: rc %d, report %s", i, rc, mcpg_fakehost_report_text(fh));
        if (rc == 0) unload(inst);
    }
}

/* The program's environment as a sorted "\n"-joined list, to compare whole. */
static char *sorted_lines(const char *text) {
    char *copy = strdup(text), *lines[64], *save = NULL;
    size_t n = 0;
    for (char *l = strtok_r(copy, "\n", &save); l && n < 64; l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    qsort(lines, n, sizeof *lines, strcmp_ptrs);
    size_t cap = strlen(text) + 2, len = 0;
    char *out = calloc(1, cap);
    for (size_t i = 0; i < n; i++) len += (size_t)snprintf(out + len, cap - len, "%s\n", lines[i]);
    free(copy);
    return out;
}

static void check_env_is(mcpg_instance *inst, const char *tool, const char *const *want,
                         size_t nwant) {
    int64_t code;
    char msg[256], expect[4096] = "";
    json_t *o = call(inst, tool, "{}", &code, msg, sizeof msg);
    MCPG_REQUIRE(o, "%s: %s", tool, msg);
    size_t len = 0;
    for (size_t i = 0; i < nwant; i++)
        len += (size_t)snprintf(expect + len, sizeof expect - len, "%s\n", want[i]);
    char *got = sorted_lines(text_of(o)), *exp = sorted_lines(expect);
    MCPG_CHECK(strcmp(got, exp) == 0, "%s: the environment is exactly\n%s--- got\n%s", tool, exp,
               got);
    free(got);
    free(exp);
    json_decref(o);
}

/* The program gets PATH, the locale, TZ, inherit_env and env: nothing else
 * of the gateway's environment (here the test's: SECRET_TOKEN stands for
 * the admin token and credentials a gateway holds). */
static void test_child_env(void) {
    char path[4096];
    snprintf(path, sizeof path, "PATH=%s", getenv("PATH"));
    mcpg_instance *inst = load(
        "{\"tools\":[{\"name\":\"bare\",\"command\":\"/usr/bin/env\"},"
        "{\"name\":\"inherit\",\"command\":\"/usr/bin/env\","
        "\"inherit_env\":[\"SECRET_TOKEN\",\"MCPG_SURELY_UNSET_VAR\",\"TZ\"],"
        "\"env\":{\"LANG\":\"C\",\"A\":\"fixed\",\"TZ\":\"Europe/Paris\"}}]}", 1);
    const char *const bare[] = {path, "LANG=C.UTF-8", "LC_CTYPE=C.UTF-8", "TZ=UTC"};
    check_env_is(inst, "bare", bare, sizeof bare / sizeof *bare);
    /* env wins over inherit_env and the baseline; an unset name is left out */
    const char *const inherit[] = {path, "LANG=C", "LC_CTYPE=C.UTF-8", "TZ=Europe/Paris",
                                   "SECRET_TOKEN=t0psecret", "A=fixed"};
    check_env_is(inst, "inherit", inherit, sizeof inherit / sizeof *inherit);
    unload(inst);
    /* a gateway without PATH (or an empty one) gives a safe default, not "" */
    char *saved = strdup(getenv("PATH"));
    setenv("PATH", "", 1);
    inst = load("{\"tools\":[{\"name\":\"bare\",\"command\":\"/usr/bin/env\"}]}", 1);
    setenv("PATH", saved, 1);
    free(saved);
    const char *const nopath[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                                  "LC_CTYPE=C.UTF-8", "TZ=UTC"};
    check_env_is(inst, "bare", nopath, sizeof nopath / sizeof *nopath);
    unload(inst);
}

static void test_env(void) {
    setenv("MCPG_CMD_TEST_SECRET", "s3cret", 1);
    mcpg_instance *inst = load("{\"tools\":[{\"name\":\"env\",\"command\":\"/bin/sh\","
                               "\"args\":[\"-c\",\"printf '%s %s' \\\"$A\\\" \\\"$B\\\"\"],"
                               "\"env\":{\"A\":\"fixed\",\"B\":{\"from_env\":\"MCPG_CMD_TEST_SECRET\"}}}]}", 1);
    int64_t code;
    char msg[256];
    json_t *o = call(inst, "env", "{}", &code, msg, sizeof msg);
    MCPG_CHECK(o && strcmp(text_of(o), "fixed s3cret") == 0, "env: %s", o ? text_of(o) : msg);
    json_decref(o);
    unload(inst);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: %s backend_command.so", argv[0]);
    so_path = argv[1];
    /* set before any thread starts: the variables test_child_env expects */
    MCPG_REQUIRE(getenv("PATH") && getenv("PATH")[0], "the test needs a PATH");
    setenv("SECRET_TOKEN", "t0psecret", 1);
    setenv("LANG", "C.UTF-8", 1);
    setenv("LC_CTYPE", "C.UTF-8", 1);
    setenv("TZ", "UTC", 1);
    unsetenv("LC_ALL");
    setenv("HOME", "/nonexistent-home", 1); /* present, and not passed on */
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "fakehost");
    mcpg_fakehost_set_quiet(fh, 1);
    test_echo_templates(1);
    test_echo_templates(0); /* from a pool thread: hops to the loop */
    test_option_values();
    test_stdin_json();
    test_exit_status();
    test_timeout_kills_group();
    test_output_cap();
    test_cancel();
    test_config_errors();
    test_env();
    test_child_env();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host clean: %d problems", problems);
    return MCPG_CHECK_EXIT("backend_command");
}
