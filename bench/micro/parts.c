/* bench/micro: the parts of a call that are not routing, each alone.
 *
 *   redact         kernel/redact.c's redact_json, the default rules, on the
 *                  echo call's arguments: what the audit stage makes of a
 *                  call's arguments (pipeline.c audit_args) before the sink
 *   redact-secret  the same on arguments holding a password, an
 *                  Authorization header and a JWT inside a string
 *   redact-rules   the secret arguments with gateway.redact pointers and a
 *                  regular expression added to the defaults
 *   redact-hash    gateway.audit.arguments "hashed": redact_hash (SHA-256)
 *   policy-decide  policy_rules' pr_decide (its sources compiled in) with one
 *                  rule, on the anonymous echo tools/call: the decision
 *                  alone, without the module's check() around it (the
 *                  kernel variant "policy" has that)
 * Each writes into a buffer kept across operations, as a call's audit_args
 * is reused by the kernel's call pool. */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include <jansson.h>

#include "kernel.h"
#include "micro.h"
#include "pr_rules.h"

static const char ECHO_ARGS[] = "{\"message\":\"hello\"}";
static const char SECRET_ARGS[] =
    "{\"query\":\"select * from orders\",\"password\":\"hunter2\","
    "\"headers\":{\"Authorization\":\"Bearer abc123def456\",\"accept\":\"*/*\"},"
    "\"note\":\"token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJlX2hlcmU ok\","
    "\"card\":{\"number\":\"4111-1111-1111-1111\",\"holder\":\"A. Tester\"}}";

typedef struct redact_ctx {
    const char *rules;  /* gateway.redact as JSON text, or NULL: the defaults */
    const char *args;
    const char *expect; /* a piece the output must hold */
    int hashed;
    size_t n;
    redactor *r;
    mcpg_buf out;
} redact_ctx;

static int redact_op(void *arg) {
    redact_ctx *c = arg;
    c->out.len = 0;
    return c->hashed ? redact_hash(c->args, c->n, &c->out) : redact_json(c->r, c->args, c->n, &c->out);
}

static int redact_check(void *arg) {
    redact_ctx *c = arg;
    return !memmem(c->out.data, c->out.len, c->expect, strlen(c->expect));
}

static int redact_setup(void *arg) {
    redact_ctx *c = arg;
    c->n = strlen(c->args);
    json_t *rules = c->rules ? json_loads(c->rules, 0, NULL) : NULL;
    errlist errs = {0};
    c->r = redactor_compile(rules, NULL, "micro", &errs);
    json_decref(rules);
    int bad = errs.count != 0;
    errlist_print(&errs);
    errlist_free(&errs);
    return bad || redact_op(c) || redact_check(c); /* also the buffer's first growth, not per operation */
}

static void redact_teardown(void *arg) {
    redact_ctx *c = arg;
    redactor_free(c->r);
    mcpg_buf_free(&c->out);
}

static redact_ctx R_ECHO = {.args = ECHO_ARGS, .expect = "\"hello\""};
static redact_ctx R_SECRET = {.args = SECRET_ARGS, .expect = "\"password\":\"[REDACTED]\""};
static redact_ctx R_RULES = {.rules = "{\"pointers\":[\"/card/holder\"],"
                                      "\"patterns\":[\"[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{4}\"]}",
                             .args = SECRET_ARGS, .expect = "\"holder\":\"[REDACTED]\""};
static redact_ctx R_HASH = {.args = ECHO_ARGS, .expect = "{\"sha256\":\"", .hashed = 1};

/* ---- the policy decision ---- */
typedef struct policy_ctx {
    pr_policy pol;
    pr_subject anonymous;
} policy_ctx;

static const char ONE_RULE[] = "[{\"id\":\"public\",\"anonymous\":true,\"tools\":\"echo\"}]";

static int policy_op(void *arg) {
    policy_ctx *c = arg;
    const pr_guard *failed = NULL;
    return pr_decide(&c->pol, &c->anonymous, PR_TOOL, "echo", 4, ECHO_ARGS, sizeof ECHO_ARGS - 1,
                     &failed) != PR_ALLOW;
}

static int policy_setup(void *arg) {
    policy_ctx *c = arg;
    mcpg_config_problems p = {&HOST, NULL, NULL, 0};
    return pr_policy_parse(&c->pol, ONE_RULE, NULL, &p) != 0 || policy_op(c);
}

static void policy_teardown(void *arg) { pr_policy_free(&((policy_ctx *)arg)->pol); }

static policy_ctx P_ONE;

const micro_variant MICRO_PARTS[] = {
    {"redact", redact_op, &R_ECHO, redact_setup, redact_check, redact_teardown},
    {"redact-secret", redact_op, &R_SECRET, redact_setup, redact_check, redact_teardown},
    {"redact-rules", redact_op, &R_RULES, redact_setup, redact_check, redact_teardown},
    {"redact-hash", redact_op, &R_HASH, redact_setup, redact_check, redact_teardown},
    {"policy-decide", policy_op, &P_ONE, policy_setup, NULL, policy_teardown},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
