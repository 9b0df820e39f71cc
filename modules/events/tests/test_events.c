/* events through the SDK's fake host, with coordinator_memory as the
 * gateway's coordinator: its config checks, events/list, and posts to
 * POST /webhooks/events/{source} judged by their signature.
 * Usage: test_events path/to/events.so path/to/coordinator_memory.so */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>
#include <mcpg/whsig.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SECRET_ENV "MCPG_TEST_EVENTS_SECRET"
/* whsec_ + base64 of the 32-byte key below */
#define SECRET "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
#define KEY "0123456789abcdef0123456789abcdef"

static const char *events_so, *coord_so;
static mcpg_fakehost *fh;

static const char shop_config[] =
    "{\"types\":[{\"name\":\"order.created\",\"description\":\"A shop order was placed\","
    "\"payloadSchema\":{\"type\":\"object\"}},{\"name\":\"order.paid\"}],"
    "\"sources\":{\"shop\":{\"secret_env\":\"" SECRET_ENV "\",\"types\":[\"order.created\"]}}}";

/* The module's descriptor, for the webhook op the fake host does not dispatch. */
static const mcpg_module *events_module(void) {
    void *image = dlopen(events_so, RTLD_NOW | RTLD_LOCAL);
    MCPG_REQUIRE(image, "dlopen %s: %s", events_so, dlerror());
    mcpg_module_entry_fn entry = (mcpg_module_entry_fn)dlsym(image, MCPG_ENTRY_SYMBOL);
    MCPG_REQUIRE(entry, "%s exports no %s", events_so, MCPG_ENTRY_SYMBOL);
    const mcpg_module *m = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    MCPG_REQUIRE(m && m->kind == MCPG_KIND_EVENTS, "an events module");
    return m; /* the image stays open: the descriptor lives in it */
}

/* A config the module must refuse at load, its report starting with `path`. */
static void expect_refused(const char *config, const char *path, const char *why) {
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, events_so, "bad", config, &inst);
    const char *report = mcpg_fakehost_report_text(fh);
    MCPG_CHECK(rc == MCPG_ECONFIG && !inst, "%s: refused (%d)", why, rc);
    MCPG_CHECK(strncmp(report, path, strlen(path)) == 0, "%s: the report names %s: %s", why, path,
               report);
}

static void test_config_checks(void) {
    expect_refused("{\"sources\":{}}", "types:", "no types");
    expect_refused("{\"types\":[{\"name\":\"a\"}]}", "sources:", "no sources");
    expect_refused("{\"types\":[{\"name\":\"a\"}],\"sources\":{\"s\":{\"secret_env\":\"X\","
                   "\"types\":[\"b\"]}}}",
                   "sources.s.types[0]:", "a source posting a type not listed");
    expect_refused("{\"types\":[{\"name\":\"a\"}],\"sources\":{\"s\":{\"types\":[\"a\"]}}}",
                   "sources.s.secret_env:", "a source without its secret");
}

static void test_list(mcpg_instance *inst) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "events/list", NULL, "{}", NULL);
    MCPG_REQUIRE(c, "call_new");
    int st = mcpg_fakehost_run(fh, inst, c, 5000);
    const char *result = mcpg_fakehost_result(c);
    MCPG_CHECK(st == MCPG_CONTINUE && result, "events/list answered (%d): %s", st,
               result ? result : mcpg_fakehost_error_message(c));
    MCPG_CHECK(result && strstr(result, "{\"name\":\"order.created\",\"description\":\"A shop "
                                        "order was placed\",\"delivery\":[\"poll\",\"push\","
                                        "\"webhook\"]") &&
                   strstr(result, "\"payloadSchema\":{\"type\":\"object\"}") &&
                   strstr(result, "{\"name\":\"order.paid\""),
               "events/list holds both types: %s", result);
    mcpg_fakehost_call_free(fh, c);
}

typedef struct post {
    const char *source, *body;
    const char *signature; /* NULL: sign the body with the source's key; "": no header */
} post;

/* One POST /webhooks/events/{source} through the module's webhook op; its
 * HTTP status, and its result or error in answer. */
static int webhook(const mcpg_module *m, mcpg_instance *inst, const post *p, char *answer,
                   size_t cap) {
    char ts[24], sig[MCPG_WHSIG_SIG_MAX];
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    const char *id = "evt_1";
    mcpg_call *c = mcpg_fakehost_call_new(fh, "events/webhook", NULL, p->body, NULL);
    MCPG_REQUIRE(c, "call_new");
    mcpg_fakehost_call_set_header(c, "webhook-id", id);
    mcpg_fakehost_call_set_header(c, "webhook-timestamp", ts);
    if (!p->signature)
        MCPG_REQUIRE(mcpg_whsig_sign((const unsigned char *)KEY, strlen(KEY), id, strlen(id), ts,
                                     strlen(ts), p->body, strlen(p->body), sig) == 0,
                     "sign");
    const char *signature = p->signature ? p->signature : sig;
    if (signature[0]) mcpg_fakehost_call_set_header(c, "webhook-signature", signature);

    const mcpg_events_ops *ops = m->ops;
    mcpg_fakehost_op_begin(fh, inst, c);
    int st = mcpg_fakehost_op_end(
        fh, c, ops->webhook(mcpg_fakehost_state(inst), mcpg_fakehost_op_call(inst, c), p->source));
    if (st == MCPG_PENDING) st = mcpg_fakehost_wait(fh, c, 5000);
    mcpg_call_outcome out = {.size = sizeof out};
    mcpg_fakehost_outcome(c, &out);
    const char *text = mcpg_fakehost_result(c);
    snprintf(answer, cap, "%s", text ? text : mcpg_fakehost_error_message(c));
    mcpg_fakehost_call_free(fh, c);
    return st == MCPG_ETIMEDOUT ? -1 : out.http_status;
}

static void test_webhook(const mcpg_module *m, mcpg_instance *inst) {
    static const char body[] = "{\"name\":\"order.created\",\"data\":{\"order\":17}}";
    static const struct {
        post p;
        int status;
        const char *answer; /* a piece the answer holds */
    } cases[] = {
        {{"shop", body, ""}, 401, "webhook-signature: missing"},
        {{"shop", body, "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, 401,
         "webhook-signature: no v1 signature matches"},
        {{"nosuch", body, NULL}, 404, "no such event source"},
        {{"shop", "{\"name\":\"order.paid\",\"data\":{}}", NULL}, 403,
         "this source may not post that event type"},
        {{"shop", body, NULL}, 202, "\"status\":\"accepted\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char answer[512];
        int status = webhook(m, inst, &cases[i].p, answer, sizeof answer);
        MCPG_CHECK(status == cases[i].status && strstr(answer, cases[i].answer),
                   "post %zu to %s: want %d holding '%s', got %d: %s", i, cases[i].p.source,
                   cases[i].status, cases[i].answer, status, answer);
    }
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 3, "usage: test_events events.so coordinator_memory.so");
    events_so = argv[1];
    coord_so = argv[2];
    setenv(SECRET_ENV, SECRET, 1);
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, getenv("MCPG_TEST_VERBOSE") == NULL);

    mcpg_instance *coord = mcpg_fakehost_load_file_or_exit(fh, coord_so, "coord", NULL);
    MCPG_REQUIRE(mcpg_fakehost_set_coordinator(fh, coord) == 0, "set_coordinator");
    test_config_checks();
    const mcpg_module *m = events_module();
    mcpg_instance *inst = mcpg_fakehost_load_or_exit(fh, m, "events", shop_config);
    test_list(inst);
    test_webhook(m, inst);

    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload events");
    MCPG_CHECK(mcpg_fakehost_unload(fh, coord) == 0, "unload the coordinator");
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_events");
}
