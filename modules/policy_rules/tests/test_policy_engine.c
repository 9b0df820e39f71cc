/* policy_rules without a host: globs, uri templates, JSON pointers, every
 * guard, the rules' parse errors with their key paths, and decisions. */
#include <mcpg/check.h>
#include <mcpg/sdk.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../pr_rules.h"

/* ---- a host with just report_error, collecting the problems ---- */

static char reported[8192];

static void report_error(mcpg_report *rep, const char *key, const char *fmt, ...) {
    (void)rep;
    size_t n = strlen(reported);
    n += (size_t)snprintf(reported + n, sizeof reported - n, "%s: ", key);
    va_list ap;
    va_start(ap, fmt);
    n += (size_t)vsnprintf(reported + n, sizeof reported - n, fmt, ap);
    va_end(ap);
    snprintf(reported + n, sizeof reported - n, "\n");
}

static mcpg_host fake_host = {.size = sizeof(mcpg_host), .report_error = report_error};

/* Parse; 0 on success (pol filled), else the problem count (pol freed). */
static int parse(pr_policy *pol, const char *rules, const char *file) {
    reported[0] = '\0';
    mcpg_config_problems p = {&fake_host, (mcpg_report *)&fake_host, NULL, 0};
    int errors = pr_policy_parse(pol, rules, file, &p);
    if (errors) pr_policy_free(pol);
    return errors;
}

/* ---- globs ---- */

/* The glob against text, as a name (gm) or as a uri template (gt). */
static int glob_try(const char *glob, const char *text, int as_template) {
    pr_glob g;
    const char *why = NULL;
    MCPG_REQUIRE(pr_glob_compile(&g, glob, strlen(glob), &why) == 0, "compile %s", glob);
    int r = as_template ? pr_glob_meets_template(&g, text, strlen(text))
                        : pr_glob_match(&g, text, strlen(text));
    pr_glob_free(&g);
    return r;
}

static int gm(const char *glob, const char *text) { return glob_try(glob, text, 0); }
static int gt(const char *glob, const char *tmpl) { return glob_try(glob, tmpl, 1); }

static void test_globs(void) {
    MCPG_CHECK(gm("echo", "echo") && !gm("echo", "echo2") && !gm("echo", "ech"), "literal");
    MCPG_CHECK(gm("*", "") && gm("*", "anything/at all"), "any");
    MCPG_CHECK(gm("db_*", "db_read") && gm("db_*", "db_") && !gm("db_*", "db"), "prefix");
    MCPG_CHECK(gm("*_read", "db_read") && !gm("*_read", "db_write"), "suffix");
    MCPG_CHECK(gm("a*b?c", "aXXbYc") && gm("a*b?c", "abbc") && !gm("a*b?c", "abc"), "general");
    MCPG_CHECK(gm("a*a*a*b", "aaaaaaaaab") && !gm("a*a*a*b", "aaaaaaaaaa"), "backtracking");
    MCPG_CHECK(gm("file:///docs/*", "file:///docs/a/b.txt"), "star crosses '/'");
    MCPG_CHECK(gm("\\*", "*") && !gm("\\*", "x"), "escaped star is literal");
    MCPG_CHECK(gm("a\\?*", "a?bc") && !gm("a\\?*", "abc"), "escaped ? then star");
    MCPG_CHECK(gm("x\\\\", "x\\"), "escaped backslash");
    MCPG_CHECK(gm("Echo", "Echo") && !gm("Echo", "echo"), "case matters");
    pr_glob g;
    const char *why = NULL;
    MCPG_CHECK(pr_glob_compile(&g, "ab\\", 3, &why) == -1 && why && strstr(why, "lone"),
               "a lone backslash at the end is refused");

    MCPG_CHECK(gt("file:///logs/*", "file:///logs/{date}.txt"), "prefix glob over template");
    MCPG_CHECK(gt("file:///logs/2024-*.txt", "file:///logs/{date}.txt"), "narrower glob meets");
    MCPG_CHECK(!gt("file:///other/*", "file:///logs/{date}.txt"), "other prefix");
    MCPG_CHECK(!gt("*.json", "file:///{name}.txt"), "suffix differs");
    MCPG_CHECK(gt("file:///a", "file:///{x}"), "a literal the template can produce");
    MCPG_CHECK(!gt("file:///a", "file:///{x}/y"), "a literal it cannot");
    MCPG_CHECK(gt("db://?/t", "db://{a}/{b}"), "? against expressions");
    MCPG_CHECK(gt("x{y", "x{y") && !gt("x{y", "x{z"), "an unclosed brace is literal");
    MCPG_CHECK(gt("*", "anything{x}"), "any");
    MCPG_CHECK(gt("mem://a*b", "mem://{x}b{y}") && !gt("mem://a*c", "mem://b{x}"), "mixed");
}

/* ---- pointers ---- */

static int find(const char *ptr, const char *doc, char *out, size_t cap) {
    pr_pointer p;
    const char *why = NULL;
    MCPG_REQUIRE(pr_pointer_compile(&p, ptr, &why) == 0, "compile %s: %s", ptr, why);
    mcpg_json_span v;
    int r = pr_pointer_find(&p, doc, strlen(doc), &v);
    if (r == PR_FOUND && out) snprintf(out, cap, "%.*s", (int)v.n, v.p);
    pr_pointer_free(&p);
    return r;
}

static void test_pointers(void) {
    const char *doc = "{\"a\":{\"b\":[10,{\"c\":\"x\"},30]},\"m/n\":1,\"t~u\":2,\"\":3,"
                      "\"dup\":1,\"dup\":2,\"e\\u0073c\":\"yes\"}";
    char v[64];
    MCPG_CHECK(find("/a/b/0", doc, v, sizeof v) == PR_FOUND && !strcmp(v, "10"), "index 0: %s", v);
    MCPG_CHECK(find("/a/b/1/c", doc, v, sizeof v) == PR_FOUND && !strcmp(v, "x"), "nested");
    MCPG_CHECK(find("/a/b/3", doc, v, sizeof v) == PR_ABSENT, "past the end");
    MCPG_CHECK(find("/a/b/-", doc, v, sizeof v) == PR_ABSENT, "'-' names no element");
    MCPG_CHECK(find("/a/b/01", doc, v, sizeof v) == PR_ABSENT, "leading zero is no index");
    MCPG_CHECK(find("/m~1n", doc, v, sizeof v) == PR_FOUND && !strcmp(v, "1"), "~1");
    MCPG_CHECK(find("/t~0u", doc, v, sizeof v) == PR_FOUND && !strcmp(v, "2"), "~0");
    MCPG_CHECK(find("/", doc, v, sizeof v) == PR_FOUND && !strcmp(v, "3"), "the empty key");
    MCPG_CHECK(find("", doc, v, sizeof v) == PR_FOUND && v[0] == '{', "the whole document");
    MCPG_CHECK(find("/dup", doc, v, sizeof v) == PR_AMBIGUOUS, "a duplicate member");
    MCPG_CHECK(find("/esc", doc, v, sizeof v) == PR_FOUND, "an escaped key");
    MCPG_CHECK(find("/a/b/1/c/d", doc, v, sizeof v) == PR_ABSENT, "below a string");
    MCPG_CHECK(find("/nope", doc, v, sizeof v) == PR_ABSENT, "absent");
    pr_pointer p;
    const char *why = NULL;
    MCPG_CHECK(pr_pointer_compile(&p, "a/b", &why) < 0 && why, "must start with /");
    MCPG_CHECK(pr_pointer_compile(&p, "/a~2", &why) < 0 && strstr(why, "~0"), "bad escape");
    MCPG_CHECK(pr_pointer_compile(&p, "/a~", &why) < 0, "trailing ~");
}

/* ---- guards, through one-rule policies ---- */

/* The verdict for tool "t" with args under a rule whose one guard is
 * guard_json. */
static int guard(const char *guard_json, const char *args) {
    char rules[1024];
    snprintf(rules, sizeof rules, "[{\"tools\":\"t\",\"arguments\":[%s]}]", guard_json);
    pr_policy pol;
    MCPG_REQUIRE(parse(&pol, rules, NULL) == 0, "parse %s: %s", rules, reported);
    pr_subject s = {.principal = {"p", 1}};
    const pr_guard *failed = NULL;
    int v = pr_decide(&pol, &s, PR_TOOL, "t", 1, args, strlen(args), &failed);
    pr_policy_free(&pol);
    return v == PR_ALLOW;
}

static void test_guards(void) {
    const char *re = "{\"pointer\":\"/q\",\"regex\":\"[a-z]+\"}";
    MCPG_CHECK(guard(re, "{\"q\":\"abc\"}"), "regex: the whole value");
    MCPG_CHECK(!guard(re, "{\"q\":\"abc1\"}"), "regex: anchored at the end");
    MCPG_CHECK(!guard(re, "{\"q\":\"1abc\"}"), "regex: anchored at the start");
    MCPG_CHECK(!guard(re, "{\"q\":\"\"}"), "regex: empty");
    MCPG_CHECK(guard(re, "{\"q\":\"a\\u0062c\"}"), "regex: escapes decoded");
    MCPG_CHECK(!guard(re, "{\"q\":\"ab\\u0000c\"}"), "regex: a decoded NUL is a character");
    MCPG_CHECK(!guard(re, "{\"q\":\"ab\\nc\"}"), "regex: newline");
    MCPG_CHECK(!guard(re, "{\"q\":5}"), "regex: not a string");
    MCPG_CHECK(guard(re, "{}"), "regex: absent and not required");
    MCPG_CHECK(!guard(re, "{\"q\":\"ab\",\"q\":\"../etc\"}"), "regex: duplicate member fails");
    MCPG_CHECK(guard("{\"pointer\":\"/q\",\"regex\":\"^a|ab$\"}", "{\"q\":\"ab\"}"),
               "regex: leftmost-longest alternation");
    MCPG_CHECK(guard("{\"pointer\":\"/q\",\"regex\":\".*secret.*\"}", "{\"q\":\"my secret x\"}"),
               "regex: .* around for a part");
    char big[4000] = "{\"q\":\"";
    for (int i = 0; i < 600; i++) strcat(big, "\\u0061");
    strcat(big, "\"}");
    MCPG_CHECK(guard(re, big), "regex: a long escaped string (decoded on the heap)");

    const char *req = "{\"pointer\":\"/a/b\",\"required\":true}";
    MCPG_CHECK(!guard(req, "{}") && !guard(req, "{\"a\":{}}"), "required: absent");
    MCPG_CHECK(guard(req, "{\"a\":{\"b\":null}}"), "required: present (null counts)");
    MCPG_CHECK(!guard("{\"pointer\":\"/q\",\"required\":true,\"max_length\":3}", "{}"),
               "required with a constraint");

    const char *en = "{\"pointer\":\"/m\",\"enum\":[\"fast\",\"s\\u006cow\",1,true,null]}";
    MCPG_CHECK(guard(en, "{\"m\":\"fast\"}") && guard(en, "{\"m\":\"slow\"}"), "enum strings");
    MCPG_CHECK(guard(en, "{\"m\":\"f\\u0061st\"}"), "enum: escaped argument");
    MCPG_CHECK(guard(en, "{\"m\":1}") && guard(en, "{\"m\":1.0}") && guard(en, "{\"m\":1e0}"),
               "enum numbers by value");
    MCPG_CHECK(guard(en, "{\"m\":true}") && guard(en, "{\"m\":null}"), "enum literals");
    MCPG_CHECK(!guard(en, "{\"m\":false}") && !guard(en, "{\"m\":\"Fast\"}") &&
                   !guard(en, "{\"m\":\"1\"}") && !guard(en, "{\"m\":[\"fast\"]}"),
               "enum: others");

    const char *ml = "{\"pointer\":\"/s\",\"max_length\":5}";
    MCPG_CHECK(guard(ml, "{\"s\":\"h\\u00e9llo\"}") && guard(ml, "{\"s\":\"h\xc3\xa9llo\"}"),
               "max_length counts code points");
    MCPG_CHECK(guard(ml, "{\"s\":\"\\ud83d\\ude00abcd\"}"), "a surrogate pair is one");
    MCPG_CHECK(!guard(ml, "{\"s\":\"abcdef\"}") && !guard(ml, "{\"s\":\"\\n\\n\\n\\n\\n\\n\"}"),
               "max_length: six");
    MCPG_CHECK(guard(ml, "{\"s\":[1,2,3,4,5]}") && !guard(ml, "{\"s\":[1,2,3,4,5,6]}"),
               "max_length: arrays");
    MCPG_CHECK(!guard(ml, "{\"s\":5}") && !guard(ml, "{\"s\":{}}"), "max_length: other types");

    const char *rg = "{\"pointer\":\"/n\",\"min\":1,\"max\":100}";
    MCPG_CHECK(guard(rg, "{\"n\":1}") && guard(rg, "{\"n\":100}") && guard(rg, "{\"n\":5.5}"),
               "range: inclusive");
    MCPG_CHECK(!guard(rg, "{\"n\":0}") && !guard(rg, "{\"n\":100.01}") &&
                   !guard(rg, "{\"n\":1e3}") && !guard(rg, "{\"n\":\"5\"}"),
               "range: outside, or not a number");
    MCPG_CHECK(guard("{\"pointer\":\"/n\",\"min\":-2.5}", "{\"n\":1e300}") &&
                   !guard("{\"pointer\":\"/n\",\"max\":-2.5}", "{\"n\":-2}"),
               "range: one side");
    char longnum[200] = "{\"n\":0.";
    for (int i = 0; i < 120; i++) strcat(longnum, "0");
    strcat(longnum, "5}");
    MCPG_CHECK(!guard(rg, longnum) && guard("{\"pointer\":\"/n\",\"max\":1}", longnum),
               "range: a number over 63 characters");
    MCPG_CHECK(guard("{\"pointer\":\"/a/1\",\"enum\":[\"y\"]}", "{\"a\":[\"x\",\"y\"]}"),
               "a guard into an array");
}

/* ---- parse errors ---- */

static void expect_problem(const char *rules, const char *needle) {
    pr_policy pol;
    int n = parse(&pol, rules, NULL);
    MCPG_CHECK(n > 0 && strstr(reported, needle), "%s: expected %s, got:\n%s", rules, needle,
               reported);
}

static void test_parse_errors(void) {
    expect_problem("{}", "rules: expected an array of rules");
    expect_problem("[5]", "rules[0]: expected a rule");
    expect_problem("[{\"principal\":\"a\"}]", "rules[0]: allows nothing");
    expect_problem("[{\"tols\":\"x\"}]", "rules[0].tols: unknown key (did you mean \"tools\"?)");
    expect_problem("[{\"tools\":[]}]", "rules[0].tools: expected at least one glob");
    expect_problem("[{\"tools\":[\"a\",7]}]", "rules[0].tools[1]: expected a string");
    expect_problem("[{\"tools\":\"\"}]", "rules[0].tools: may not be empty");
    expect_problem("[{\"tools\":\"a\\\\\"}]", "rules[0].tools: ends with a lone");
    expect_problem("[{\"tools\":\"a\\u0000b\"}]", "may not hold a NUL");
    expect_problem("[{\"anonymous\":true,\"roles\":\"x\",\"tools\":\"t\"}]",
                   "rules[0].roles: an anonymous rule");
    expect_problem("[{\"anonymous\":1,\"tools\":\"t\"}]", "rules[0].anonymous: expected true");
    expect_problem("[{\"resources\":\"r\",\"arguments\":[]}]",
                   "rules[0].arguments: only tools and prompts take arguments");
    expect_problem("[{\"tools\":\"t\",\"arguments\":[{\"regex\":\"a\"}]}]",
                   "rules[0].arguments[0].pointer: is required");
    expect_problem("[{\"tools\":\"t\",\"arguments\":[{\"pointer\":\"q\",\"regex\":\"a\"}]}]",
                   "rules[0].arguments[0].pointer: a JSON pointer");
    expect_problem("[{\"tools\":\"t\",\"arguments\":[{\"pointer\":\"/q\",\"regex\":\"(a\"}]}]",
                   "rules[0].arguments[0].regex: not a POSIX extended regex");
    expect_problem("[{\"tools\":\"t\",\"arguments\":[{\"pointer\":\"/q\"}]}]",
                   "rules[0].arguments[0]: checks nothing");
    expect_problem("[{\"tools\":\"t\",\"arguments\":[{\"pointer\":\"/q\",\"regex\":\"a\","
                   "\"enum\":[1]}]}]", "give one of regex, enum");
    expect_problem("[{\"tools\":\"t\",\"arguments\":[{\"pointer\":\"/q\",\"enum\":[{}]}]}]",
                   "rules[0].arguments[0].enum[0]: enum values are");
    expect_problem("[{\"tools\":\"t\",\"arguments\":[{\"pointer\":\"/q\",\"max_length\":-1}]}]",
                   "rules[0].arguments[0].max_length: expected a non-negative integer");
    expect_problem("[{\"tools\":\"t\",\"arguments\":[{\"pointer\":\"/q\",\"min\":5,\"max\":1}]}]",
                   "rules[0].arguments[0].min: greater than max");
    expect_problem("[{\"tools\":\"t\",\"arguments\":[{\"pointer\":\"/q\",\"mx\":1}]}]",
                   "rules[0].arguments[0].mx: unknown key (did you mean \"max\"?)");
    expect_problem("[{\"tools\":\"t\",\"arguments\":[{\"pointer\":\"/q\",\"required\":\"yes\"}]}]",
                   "rules[0].arguments[0].required: expected true or false");
    pr_policy pol;
    MCPG_CHECK(parse(&pol, NULL, NULL) == 1 && strstr(reported, "rules: give rules, rules_file"),
               "neither key: %s", reported);
    MCPG_CHECK(parse(&pol, NULL, "/nonexistent/policy.json") == 1 &&
                   strstr(reported, "rules_file: /nonexistent/policy.json: "),
               "a missing file names it: %s", reported);
    MCPG_CHECK(parse(&pol, "[]", NULL) == 0 && pol.n == 0, "an empty policy is valid");
    pr_policy_free(&pol);
}

static void test_rules_file(void) {
    char path[] = "/tmp/pr-test-XXXXXX";
    int fd = mkstemp(path);
    MCPG_REQUIRE(fd >= 0, "mkstemp");
    FILE *f = fdopen(fd, "w");
    fputs("{\"rules\":[{\"id\":\"r1\",\"tools\":\"a\"},{\"tools\":\"b\",\"bogus\":1}]}", f);
    fclose(f);
    pr_policy pol;
    MCPG_CHECK(parse(&pol, NULL, path) == 1 && strstr(reported, "rules_file: ") &&
                   strstr(reported, ": rules[1].bogus: unknown key") && strstr(reported, path),
               "a file's problem names the file and the rule: %s", reported);
    f = fopen(path, "w");
    fputs("[{\"id\":\"r1\",\"tools\":\"a\"},{\"tools\":\"b\"}]", f);
    fclose(f);
    MCPG_CHECK(parse(&pol, "[{\"tools\":\"c\"}]", path) == 0 && pol.n == 3, "inline + file");
    if (pol.n == 3) {
        MCPG_CHECK(!strcmp(pol.rules[0].label, "rules[0]") && !strcmp(pol.rules[1].label, "r1") &&
                       strstr(pol.rules[2].label, ": rules[1]"),
                   "labels: %s %s %s", pol.rules[0].label, pol.rules[1].label, pol.rules[2].label);
    }
    pr_policy_free(&pol);
    remove(path);
}

/* ---- decisions ---- */

static const char *const POLICY =
    "[{\"id\":\"admins\",\"roles\":\"admin\",\"tools\":\"*\",\"prompts\":\"*\",\"resources\":\"*\"},"
    " {\"id\":\"acme-readers\",\"tenant\":\"acme\",\"roles\":[\"reader\",\"analyst-*\"],"
    "  \"tools\":[\"search\",\"db_read_*\"],\"resources\":\"file:///docs/*\","
    "  \"arguments\":[{\"pointer\":\"/limit\",\"max\":50},{\"pointer\":\"/q\",\"max_length\":20}]},"
    " {\"id\":\"bob\",\"principal\":\"bob\",\"tools\":\"search\","
    "  \"arguments\":[{\"pointer\":\"/limit\",\"max\":500}]},"
    " {\"id\":\"svc\",\"principal\":\"svc-*\",\"prompts\":\"summary\"},"
    " {\"id\":\"public\",\"anonymous\":true,\"tools\":\"echo\"}]";

static pr_subject subject(const char *principal, const char *tenant, const pr_str *roles,
                          uint32_t n) {
    pr_subject s = {0};
    if (principal) s.principal = (pr_str){principal, strlen(principal)};
    if (tenant) s.tenant = (pr_str){tenant, strlen(tenant)};
    s.roles = roles;
    s.n_roles = n;
    return s;
}

static pr_verdict decide(const pr_policy *pol, const pr_subject *s, pr_kind k, const char *name,
                         const char *args, const char **failed_at) {
    const pr_guard *failed = NULL;
    pr_verdict v = pr_decide(pol, s, k, name, strlen(name), args, args ? strlen(args) : 0, &failed);
    if (failed_at) *failed_at = failed ? failed->at.text : NULL;
    return v;
}

static void test_decisions(void) {
    pr_policy pol;
    MCPG_REQUIRE(parse(&pol, POLICY, NULL) == 0, "parse: %s", reported);
    pr_str admin[] = {{"ops", 3}, {"admin", 5}}, reader[] = {{"reader", 6}},
           analyst[] = {{"analyst-eu", 10}};
    pr_subject ann = subject("ann", "any", admin, 2), rita = subject("rita", "acme", reader, 1),
               alex = subject("alex", "acme", analyst, 1),
               rex = subject("rex", "globex", reader, 1), bob = subject("bob", NULL, NULL, 0),
               svc = subject("svc-build", NULL, NULL, 0), anon = subject(NULL, NULL, NULL, 0);
    const char *at = NULL;
    MCPG_CHECK(decide(&pol, &ann, PR_TOOL, "drop_table", "{}", NULL) == PR_ALLOW, "admin role");
    MCPG_CHECK(decide(&pol, &rita, PR_TOOL, "search", "{\"limit\":10}", NULL) == PR_ALLOW,
               "reader in acme");
    MCPG_CHECK(decide(&pol, &alex, PR_TOOL, "db_read_users", "{}", NULL) == PR_ALLOW,
               "a role glob");
    MCPG_CHECK(decide(&pol, &rex, PR_TOOL, "search", "{}", NULL) == PR_NO_RULE,
               "reader of another tenant");
    MCPG_CHECK(decide(&pol, &rita, PR_TOOL, "db_write", "{}", NULL) == PR_NO_RULE,
               "a tool no rule covers");
    MCPG_CHECK(decide(&pol, &rita, PR_TOOL, "search", "{\"limit\":51}", &at) == PR_GUARD_FAILED &&
                   at && !strcmp(at, "/limit"),
               "a guard names its pointer");
    MCPG_CHECK(decide(&pol, &rita, PR_TOOL, "search", "{\"limit\":5,\"q\":\"xxxxxxxxxxxxxxxxxxxxx\"}",
                      &at) == PR_GUARD_FAILED && at && !strcmp(at, "/q"),
               "the first failing guard");
    MCPG_CHECK(decide(&pol, &bob, PR_TOOL, "search", "{\"limit\":400}", NULL) == PR_ALLOW,
               "bob's own rule allows more");
    MCPG_CHECK(decide(&pol, &bob, PR_TOOL, "search", "{\"limit\":501}", &at) == PR_GUARD_FAILED,
               "and has its own limit");
    MCPG_CHECK(decide(&pol, &svc, PR_PROMPT, "summary", "{}", NULL) == PR_ALLOW, "a prompt");
    MCPG_CHECK(decide(&pol, &svc, PR_TOOL, "summary", "{}", NULL) == PR_NO_RULE,
               "a prompt's name is not a tool");
    MCPG_CHECK(decide(&pol, &rita, PR_RESOURCE, "file:///docs/a.md", NULL, NULL) == PR_ALLOW,
               "a resource");
    MCPG_CHECK(decide(&pol, &rita, PR_RESOURCE, "file:///etc/passwd", NULL, NULL) == PR_NO_RULE,
               "another resource");
    MCPG_CHECK(decide(&pol, &anon, PR_TOOL, "echo", "{}", NULL) == PR_ALLOW, "anonymous echo");
    MCPG_CHECK(decide(&pol, &anon, PR_TOOL, "search", "{}", NULL) == PR_NO_RULE,
               "anonymous, nothing else (not even the admin rule without roles)");
    MCPG_CHECK(decide(&pol, &bob, PR_TOOL, "echo", "{}", NULL) == PR_NO_RULE,
               "an anonymous rule admits only the anonymous");
    MCPG_CHECK(pr_visible(&pol, &rita, PR_TOOL, "search", 6, 0) &&
                   !pr_visible(&pol, &rita, PR_TOOL, "echo", 4, 0),
               "visible tools");
    MCPG_CHECK(pr_visible(&pol, &rita, PR_RESOURCE, "file:///docs/{name}", 19, 1) &&
                   !pr_visible(&pol, &rita, PR_RESOURCE, "file:///logs/{name}", 19, 1),
               "visible templates");
    MCPG_CHECK(pr_admits_any(&pol, &svc) && !pr_admits_any(&pol, &rex) &&
                   pr_admits_any(&pol, &anon),
               "admits any");
    /* what would have admitted a caller refused for want of a role (the
     * scopes a bearer token's step-up challenge names): literal roles of the
     * covering rules that admit it otherwise; globs and other tenants name none */
    char miss[64];
    MCPG_CHECK(pr_missing_roles(&pol, &rita, PR_TOOL, "drop_table", 10, miss, sizeof miss) == 1 &&
                   !strcmp(miss, "admin"), "rita lacks admin for drop_table: %s", miss);
    MCPG_CHECK(pr_missing_roles(&pol, &bob, PR_TOOL, "db_read_x", 9, miss, sizeof miss) == 1 &&
                   !strcmp(miss, "admin"), "bob has no tenant: only the admin rule: %s", miss);
    pr_subject alice = subject("alice", "acme", NULL, 0);
    MCPG_CHECK(pr_missing_roles(&pol, &alice, PR_TOOL, "search", 6, miss, sizeof miss) == 2 &&
                   !strcmp(miss, "admin reader"), "the literal roles, once each: %s", miss);
    MCPG_CHECK(pr_missing_roles(&pol, &anon, PR_TOOL, "search", 6, miss, sizeof miss) == 0 && !miss[0],
               "no identity: no scope to ask for");
    MCPG_CHECK(pr_missing_roles(&pol, &alice, PR_TOOL, "search", 6, miss, 8) == 1 &&
                   !strcmp(miss, "admin"), "what does not fit is left out: %s", miss);
    pr_subject masked = rita;
    masked.mask = pr_subject_mask(&pol, &rita);
    masked.has_mask = 1;
    MCPG_CHECK(masked.mask == 2u, "rita's mask: %llx", (unsigned long long)masked.mask);
    masked.principal = (pr_str){"not-rita", 8}; /* the mask, not the fields, decides */
    MCPG_CHECK(decide(&pol, &masked, PR_TOOL, "search", "{}", NULL) == PR_ALLOW, "masked");
    pr_policy_free(&pol);
}

int main(void) {
    test_globs();
    test_pointers();
    test_guards();
    test_parse_errors();
    test_rules_file();
    test_decisions();
    return MCPG_CHECK_EXIT("test_policy_engine");
}
