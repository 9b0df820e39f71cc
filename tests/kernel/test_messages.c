/* Kernel unit test, ABI 1.1: every method routed to the backend that offers
 * the item (prompts by name, resources by uri then template, completions by
 * ref), merged lists paged, a call's messages delivered in order before its
 * outcome (from the op on the loop, and from another thread), requests to
 * the client answered through reply_submit (the right session only; else
 * they time out), stateless calls refused requests, subscriptions reaching
 * the backend. The fixture is fx_rich. */
#include "probe.h"

#include <mcpg/check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/mcpg-messages-XXXXXX";
static char subs[600];

static void run(probe *p, const char *method, const char *name, const char *params,
                const char *session) {
    probe_start(p, method, name, name ? strlen(name) : 0, NULL, "1", NULL);
    p->desc.params_json = params;
    p->desc.params_len = params ? strlen(params) : 0;
    if (session) probe_legacy(p, session);
    probe_wait(p);
}

static void lists(void) {
    probe p;
    run(&p, "tools/list", NULL, NULL, NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, "\"note3\"") && strstr(p.text, "\"note_later\"") &&
                   !strstr(p.text, "\"ask\"") && strstr(p.text, "\"nextCursor\":\"2\""),
               "first page of 2: %s", p.text);
    run(&p, "tools/list", NULL, "{\"cursor\":\"2\"}", NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, "\"ask\"") && !strstr(p.text, "nextCursor"),
               "last page: %s", p.text);
    run(&p, "tools/list", NULL, "{\"cursor\":\"zz\"}", NULL);
    MCPG_CHECK(p.is_error && p.code == -32602, "bad cursor: %lld %s", (long long)p.code, p.text);
    run(&p, "prompts/list", NULL, NULL, NULL);
    MCPG_CHECK(!p.is_error && !strncmp(p.text, "{\"prompts\":[{\"name\":\"greet\"", 27) &&
                   strstr(p.text, "\"plain\"") && !strstr(p.text, "nextCursor"),
               "prompts: %s", p.text);
    run(&p, "resources/list", NULL, NULL, NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, "{\"resources\":[{\"uri\":\"test://a\""),
               "resources: %s", p.text);
    run(&p, "resources/templates/list", NULL, NULL, NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, "{\"resourceTemplates\":[{\"uriTemplate\":\"test://t/{id}/x\""),
               "templates: %s", p.text);
}

static void expect_text(const char *method, const char *name, const char *params,
                        const char *want) {
    probe p;
    run(&p, method, name, params, NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, want), "%s %s: %s (want %s)", method,
               name ? name : params, p.text, want);
}

static void expect_error(const char *method, const char *name, const char *params,
                         int64_t code, const char *want) {
    probe p;
    run(&p, method, name, params, NULL);
    MCPG_CHECK(p.is_error && p.code == code && strstr(p.text, want), "%s %s: %lld %s", method,
               name ? name : params, (long long)p.code, p.text);
}

static void routing(void) {
    expect_text("prompts/get", "greet", "{\"name\":\"greet\"}", "prompt greet");
    expect_error("prompts/get", "nope", "{\"name\":\"nope\"}", -32602, "Unknown prompt: nope");
    expect_text("resources/read", "test://a", "{\"uri\":\"test://a\"}", "read test://a");
    expect_text("resources/read", "test://t/42/x", "{\"uri\":\"test://t/42/x\"}",
                "read test://t/42/x");
    expect_error("resources/read", "test://t/4/2/x", "{\"uri\":\"test://t/4/2/x\"}", -32602,
                 "Resource not found");
    expect_error("resources/read", "test://zz", "{\"uri\":\"test://zz\"}", -32602,
                 "Resource not found: test://zz");
    expect_text("completion/complete", NULL,
                "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"greet\"},\"argument\":{\"name\":\"a\",\"value\":\"\"}}",
                "complete greet");
    expect_text("completion/complete", NULL,
                "{\"ref\":{\"type\":\"ref/resource\",\"uri\":\"test://t/{id}/x\"},\"argument\":{\"name\":\"id\",\"value\":\"\"}}",
                "complete test://t/{id}/x");
    expect_error("completion/complete", NULL, "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"no\"}}",
                 -32602, "ref names no prompt");
    expect_error("ping", NULL, NULL, -32601, "Method not found");
}

/* The lines of msgs, in order, must start with these (NULL-ended). */
static bool msgs_are(const probe *p, const char *const *want) {
    const char *s = p->msgs;
    for (size_t i = 0; want[i]; i++) {
        const char *nl = strchr(s, '\n');
        if (!nl || !strstr(s, want[i]) || strstr(s, want[i]) > nl) return false;
        s = nl + 1;
    }
    return *s == '\0';
}

static void notifications(void) {
    probe p;
    run(&p, "tools/call", "note3", "{\"name\":\"note3\"}", NULL);
    const char *const three[] = {"\"progress\":1", "\"progress\":2", "\"progress\":3", "OUTCOME",
                                 NULL};
    MCPG_CHECK(!p.is_error && msgs_are(&p, three), "from the op, in order, then the outcome:\n%s",
               p.msgs);
    MCPG_CHECK(strstr(p.msgs, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
                              "\"params\":{\"progressToken\":\"t\",\"progress\":1}}") != NULL,
               "framed as a JSON-RPC notification:\n%s", p.msgs);
    run(&p, "tools/call", "note_later", "{\"name\":\"note_later\"}", NULL);
    const char *const two[] = {"\"progress\":1", "\"progress\":2", "OUTCOME", NULL};
    MCPG_CHECK(!p.is_error && strstr(p.text, "later") && msgs_are(&p, two),
               "from another thread, in order, then the outcome:\n%s", p.msgs);
    run(&p, "tools/call", "note_joined", "{\"name\":\"note_joined\"}", NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, "joined") && msgs_are(&p, two),
               "still queued when the op answered: delivered before the outcome:\n%s", p.msgs);
}

/* At complete the call is answered: a notification then is refused. */
static int notify_after_rc;

static void notify_after_answer(probe *p, mcpg_call *call) {
    (void)p;
    notify_after_rc = HOST.call_notify(call, "notifications/progress", NULL, 0);
}

static void notification_after_answer(void) {
    probe p;
    probe_start(&p, "tools/call", "note3", 5, NULL, "5", NULL);
    p.at_complete = notify_after_answer;
    probe_wait(&p);
    const char *const three[] = {"\"progress\":1", "\"progress\":2", "\"progress\":3", "OUTCOME",
                                 NULL};
    MCPG_CHECK(notify_after_rc == MCPG_ESTATE && msgs_are(&p, three),
               "a notification after the answer: %d (want MCPG_ESTATE), not delivered:\n%s",
               notify_after_rc, p.msgs);
}

typedef struct reply_arg {
    const char *session;
    char body[256];
    int rc;
} reply_arg;

static void reply_on_loop(void *arg) {
    reply_arg *r = arg;
    r->rc = HOST.reply_submit(&kernel.workers[0], r->session, strlen(r->session), r->body,
                              strlen(r->body));
}

/* Wait for the request line, answer it from session `as`. */
static void answer_ask(probe *p, const char *as, int *rc_out) {
    const char *id = NULL;
    for (int i = 0; i < 200 && !id; i++) {
        pthread_mutex_lock(&p->lock);
        id = strstr(p->msgs, "\"id\":\"mcpg-");
        pthread_mutex_unlock(&p->lock);
        if (!id) usleep(5000);
    }
    MCPG_REQUIRE(id, "the request reached the client: %s", p->msgs);
    char mid[48] = "";
    sscanf(id, "\"id\":\"%47[^\"]", mid);
    reply_arg r = {.session = as};
    snprintf(r.body, sizeof r.body, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":{\"roots\":[]}}",
             mid);
    probe_on_loop(reply_on_loop, &r);
    *rc_out = r.rc;
}

/* An ask on session `asker`, answered from session `as`: its call's answer
 * and messages in *p. */
static void ask_answered_from(const char *asker, const char *as, const char *id, probe *p) {
    int rc;
    probe_start(p, "tools/call", "ask", 3, NULL, id, NULL);
    probe_legacy(p, asker);
    probe_submit(p);
    answer_ask(p, as, &rc);
    probe_join(p);
    MCPG_CHECK(rc == 0, "reply_submit took the body: %d", rc);
}

static void requests(void) {
    probe p;
    run(&p, "tools/call", "ask", "{\"name\":\"ask\"}", NULL);
    MCPG_CHECK(strstr(p.text, "not asked: MCPG_ENOTSUP"), "no requests on the stateless wire: %s",
               p.text);

    ask_answered_from("s-1", "s-1", "2", &p);
    MCPG_CHECK(strstr(p.text, "reply {\\\"roots\\\":[]}"), "answered: %s", p.text);
    MCPG_CHECK(strstr(p.msgs, "\"method\":\"roots/list\"") && strstr(p.msgs, "OUTCOME"),
               "request then outcome: %s", p.msgs);

    ask_answered_from("s-2", "someone-else", "3", &p);
    MCPG_CHECK(strstr(p.text, "status -6"), "another session's answer is not taken: %s (it "
               "times out)", p.text);
}

/* A reply still finds its call once the lives' serials have passed 16 bits
 * (the table of asks once kept a serial in 16 of them: no reply matched). */
static void requests_past_16_bits(void) {
    probe p;
    for (int i = 0; i < 70000; i++) run(&p, "tools/list", NULL, NULL, NULL);
    ask_answered_from("s-16", "s-16", "16", &p);
    MCPG_CHECK(strstr(p.text, "reply {\\\"roots\\\":[]}"), "answered after 70000 lives: %s", p.text);
}

/* Session ids longer than any fixed copy: the whole id routes the reply. */
static void long_sessions(void) {
    char mine[201], other[201];
    memset(mine, 'a', sizeof mine - 1);
    mine[sizeof mine - 1] = '\0';
    memcpy(mine, "s-long-", 7);
    memcpy(other, mine, sizeof other);
    other[150] = 'b'; /* the same first 150 bytes */
    probe p;
    ask_answered_from(mine, mine, "6", &p);
    MCPG_CHECK(strstr(p.text, "reply {\\\"roots\\\":[]}"),
               "a 200-byte session's own answer is taken: %s", p.text);
    ask_answered_from(mine, other, "7", &p);
    MCPG_CHECK(strstr(p.text, "status -6"),
               "the answer of a session sharing its first 150 bytes is not taken: %s", p.text);
    ask_answered_from(mine, "", "8", &p);
    MCPG_CHECK(strstr(p.text, "status -6"), "an answer with no session is not taken: %s",
               p.text);
}

/* An ask opened on a live call, the call answered before its request is
 * sent: call_request's two halves (msgs_ask_open, msgs_ask_send) with the
 * answer in between, as a pool thread can meet it. */
typedef struct late_ask {
    probe *p;
    bool opened;
    int rc_open, rc_send;
    uint64_t seq;
    int fn_calls, fn_status;
} late_ask;

static late_ask late;

static void late_fn(void *arg, const mcpg_reply *r) {
    late_ask *l = arg;
    l->fn_calls++;
    l->fn_status = r->status;
}

static void late_open(void *arg) {
    late_ask *l = arg;
    pthread_mutex_lock(&l->p->lock);
    mcpg_call *h = l->p->call;
    pthread_mutex_unlock(&l->p->lock);
    if (!h) return; /* not submitted yet */
    l->rc_open = msgs_ask_open(h, "roots/list", NULL, 0, 0, late_fn, l, &l->seq);
    l->opened = true;
}

/* At complete: the call's messages are closed, its handle still live. */
static void late_send(probe *p, mcpg_call *call) {
    (void)p;
    late.rc_send = msgs_ask_send(call, late.seq, "roots/list", NULL, 0);
}

static void request_after_close(void) {
    probe p;
    probe_start(&p, "tools/call", "ask", 3, NULL, "4", NULL);
    probe_legacy(&p, "s-3");
    p.at_complete = late_send;
    late = (late_ask){.p = &p};
    probe_submit(&p);
    for (int i = 0; i < 1000 && !late.opened; i++) probe_on_loop(late_open, &late);
    MCPG_REQUIRE(late.opened && late.rc_open == 0, "ask opened on the live call: %d",
                 late.rc_open);
    int rc;
    answer_ask(&p, "s-3", &rc); /* fx_rich's own ask: its call is then answered */
    probe_join(&p);
    MCPG_CHECK(late.fn_calls + (late.rc_send != 0) == 1,
               "exactly one of: fn ran (%d times, status %d), the send failed (%d)",
               late.fn_calls, late.fn_status, late.rc_send);
    MCPG_CHECK(late.fn_calls == 0 || late.fn_status == MCPG_ECANCELED,
               "the call ended first: fn told MCPG_ECANCELED, not %d", late.fn_status);
}

static void sub_on_loop(void *arg) {
    int *rc = arg;
    rc[0] = HOST.resource_subscribe(&kernel.workers[0], "test://t/7/x", 12, 1);
    rc[1] = HOST.resource_subscribe(&kernel.workers[0], "test://nope", 11, 1);
}

static void subscriptions(void) {
    int rc[2];
    probe_on_loop(sub_on_loop, rc);
    MCPG_CHECK(rc[0] == 0 && count_lines(subs, "sub=test://t/7/x:1", NULL) == 1,
               "subscribe reached the backend: %d", rc[0]);
    MCPG_CHECK(rc[1] == MCPG_ENOENT, "no backend owns test://nope: %d", rc[1]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_messages MODULES_DIR\n");
        return 2;
    }
    if (!mkdtemp(dir)) return 2;
    snprintf(subs, sizeof subs, "%s/subs.txt", dir);
    char text[2048];
    snprintf(text, sizeof text,
             "{\"gateway\":{\"workers\":1,\"module_dir\":\"%s\",\"log_level\":\"error\","
             "\"list_page_size\":2,\"server\":{\"access_log\":false}},"
             "\"modules\":[{\"name\":\"rich\",\"module\":\"fx_rich\",\"inline_dispatch\":true,"
             "\"config\":{\"path\":\"%s\"}}]}",
             argv[1], subs);
    MCPG_REQUIRE(kernel_up(dir, "rich.json", text, argv[1]), "kernel");
    kernel.list_page_size = 2;
    lists();
    routing();
    notifications();
    notification_after_answer();
    requests();
    long_sessions();
    requests_past_16_bits();
    request_after_close();
    subscriptions();
    kernel_down();
    remove_test_dir(dir);
    return MCPG_CHECK_EXIT("test_messages");
}
