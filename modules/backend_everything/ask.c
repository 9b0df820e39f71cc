/* Tools that need the client's answer: sampling and elicitation.
 *
 * On the legacy wire (2025-11-25) the backend asks the client itself:
 * host->call_request sends sampling/createMessage or elicitation/create on
 * the call's stream, the op answers PENDING, and the reply fn (on the
 * call's loop) writes the result and resumes. On the stateless wire
 * (2026-07-28) there are no server-to-client requests: the first call is
 * answered input_required with the same request under inputRequests, and
 * the client's retry brings the answer in params.inputResponses.
 *
 * A wait's memory is freed by its reply fn, which the host calls exactly
 * once; when the client leaves first, cancel answers the call and the
 * reply (MCPG_ECANCELED) only frees. */
#include "everything.h"

#include <stdlib.h>
#include <string.h>

typedef struct ask_tool ask_tool;

struct ask_tool {
    const char *name, *description, *schema;
    const char *method; /* what the client is asked */
    const char *key;    /* its key in inputRequests / inputResponses */
    /* the request's params, from the call's arguments */
    int (*params)(ev *e, mcpg_call *call, mcpg_buf *out);
    /* the result, from the client's answer (a result object's text) */
    mcpg_status (*done)(ev *e, mcpg_call *call, const char *answer, size_t n);
    const char *failed; /* the text's head when the client could not answer */
};

typedef struct ask_wait {
    ev_waiting base; /* first: the call's slot holds it */
    ev *e;
    mcpg_call *call;
    const ask_tool *t;
    int answered; /* cancel answered the call: the reply only frees */
} ask_wait;

/* ---- what each tool asks and makes of the answer ---- */

/* "message"/"prompt" argument as a JSON string ("" when absent). */
static int arg_string(ev *e, mcpg_call *call, const char *name, mcpg_buf *out) {
    const mcpg_host *h = e->host;
    size_t n, rn;
    const char *args = h->call_args(call, &n);
    mcpg_json_span v;
    if (h->json_object_get(args, n, name, &v) == 1 && v.type == MCPG_JSON_STRING) {
        const char *raw = ev_json_raw(&v, &rn);
        return h->buf_append(out, raw, rn);
    }
    return h->buf_append(out, "\"\"", 2);
}

static int sampling_params(ev *e, mcpg_call *call, mcpg_buf *out) {
    const mcpg_host *h = e->host;
    int rc = h->buf_printf(out, "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":"
                                "\"text\",\"text\":");
    rc = rc ? rc : arg_string(e, call, "prompt", out);
    return rc ? rc : h->buf_printf(out, "}}],\"maxTokens\":100}");
}

static int elicitation_params(ev *e, mcpg_call *call, mcpg_buf *out) {
    const mcpg_host *h = e->host;
    int rc = h->buf_printf(out, "{\"mode\":\"form\",\"message\":");
    rc = rc ? rc : arg_string(e, call, "message", out);
    return rc ? rc
              : h->buf_printf(out, ",\"requestedSchema\":{\"type\":\"object\",\"properties\":"
                                   "{\"response\":{\"type\":\"string\",\"description\":"
                                   "\"User's response\"}},\"required\":[\"response\"]}}");
}

/* A fixed question: what matters is how it travels (a request on the
 * call's stream, or an input_required result, never a request on the
 * stateless wire's stream). */
static int streaming_params(ev *e, mcpg_call *call, mcpg_buf *out) {
    (void)call;
    return e->host->buf_printf(
        out, "{\"mode\":\"form\",\"message\":\"Please provide your input\","
             "\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"response\":"
             "{\"type\":\"string\",\"description\":\"Your input\"}},\"required\":"
             "[\"response\"]}}");
}

/* SEP-1034: a default for every primitive type. */
static int defaults_params(ev *e, mcpg_call *call, mcpg_buf *out) {
    (void)call;
    return e->host->buf_printf(
        out,
        "{\"mode\":\"form\",\"message\":\"Please review and update the form fields with "
        "defaults\",\"requestedSchema\":{\"type\":\"object\",\"properties\":{"
        "\"name\":{\"type\":\"string\",\"description\":\"User name\",\"default\":\"John Doe\"},"
        "\"age\":{\"type\":\"integer\",\"description\":\"User age\",\"default\":30},"
        "\"score\":{\"type\":\"number\",\"description\":\"User score\",\"default\":95.5},"
        "\"status\":{\"type\":\"string\",\"description\":\"User status\",\"enum\":[\"active\","
        "\"inactive\",\"pending\"],\"default\":\"active\"},"
        "\"verified\":{\"type\":\"boolean\",\"description\":\"Verification status\","
        "\"default\":true}},\"required\":[]}}");
}

/* SEP-1330: the five enum shapes. */
static int enums_params(ev *e, mcpg_call *call, mcpg_buf *out) {
    (void)call;
    return e->host->buf_printf(
        out,
        "{\"mode\":\"form\",\"message\":\"Please select options from the enum fields\","
        "\"requestedSchema\":{\"type\":\"object\",\"properties\":{"
        "\"untitledSingle\":{\"type\":\"string\",\"description\":\"Select one option\","
        "\"enum\":[\"option1\",\"option2\",\"option3\"]},"
        "\"titledSingle\":{\"type\":\"string\",\"description\":\"Select one option with titles\","
        "\"oneOf\":[{\"const\":\"value1\",\"title\":\"First Option\"},{\"const\":\"value2\","
        "\"title\":\"Second Option\"},{\"const\":\"value3\",\"title\":\"Third Option\"}]},"
        "\"legacyEnum\":{\"type\":\"string\",\"description\":\"Select one option (legacy)\","
        "\"enum\":[\"opt1\",\"opt2\",\"opt3\"],\"enumNames\":[\"Option One\",\"Option Two\","
        "\"Option Three\"]},"
        "\"untitledMulti\":{\"type\":\"array\",\"description\":\"Select multiple options\","
        "\"minItems\":1,\"maxItems\":3,\"items\":{\"type\":\"string\",\"enum\":[\"option1\","
        "\"option2\",\"option3\"]}},"
        "\"titledMulti\":{\"type\":\"array\",\"description\":\"Select multiple options with "
        "titles\",\"minItems\":1,\"maxItems\":3,\"items\":{\"anyOf\":[{\"const\":\"value1\","
        "\"title\":\"First Choice\"},{\"const\":\"value2\",\"title\":\"Second Choice\"},"
        "{\"const\":\"value3\",\"title\":\"Third Choice\"}]}}},\"required\":[]}}");
}

/* The model's text: content.text, or message.content.text. */
static mcpg_status sampling_done(ev *e, mcpg_call *call, const char *a, size_t n) {
    mcpg_json_span v;
    char text[1024] = "No response";
    if (ev_json_at(e->host, a, n, &v, "content", "text", (const char *)NULL) ||
        ev_json_at(e->host, a, n, &v, "message", "content", "text", (const char *)NULL))
        ev_json_str(e->host, &v, text, sizeof text);
    return ev_textf(e, call, 0, "LLM response: %s", text);
}

/* action=<action>, content=<the content object as sent, {} when none> */
static mcpg_status elicited(ev *e, mcpg_call *call, const char *a, size_t n, const char *head) {
    mcpg_json_span act, content;
    char action[64] = "";
    if (ev_json_at(e->host, a, n, &act, "action", (const char *)NULL))
        ev_json_str(e->host, &act, action, sizeof action);
    size_t cn = 2;
    const char *c = "{}";
    if (ev_json_at(e->host, a, n, &content, "content", (const char *)NULL))
        c = ev_json_raw(&content, &cn);
    return ev_textf(e, call, 0, "%s: action=%s, content=%.*s", head, action, (int)cn, c);
}

static mcpg_status elicitation_done(ev *e, mcpg_call *call, const char *a, size_t n) {
    return elicited(e, call, a, n, "User response");
}

static mcpg_status form_done(ev *e, mcpg_call *call, const char *a, size_t n) {
    return elicited(e, call, a, n, "Elicitation completed");
}

static const ask_tool asks[] = {
    {"test_sampling", "Tests server-initiated sampling (LLM completion request)",
     "{\"type\":\"object\",\"properties\":{\"prompt\":{\"type\":\"string\",\"description\":"
     "\"The prompt to send to the LLM\"}},\"required\":[\"prompt\"]}",
     "sampling/createMessage", "sampling", sampling_params, sampling_done,
     "Sampling not supported or error"},
    {"test_elicitation", "Tests server-initiated elicitation (user input request)",
     "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\",\"description\":"
     "\"The message to show the user\"}},\"required\":[\"message\"]}",
     "elicitation/create", "elicitation", elicitation_params, elicitation_done,
     "Elicitation not supported or error"},
    {"test_streaming_elicitation",
     "Asks the user during the call: a request on the stream (legacy), input_required "
     "(stateless)",
     "{\"type\":\"object\",\"properties\":{}}", "elicitation/create", "user_input",
     streaming_params, elicitation_done, "Elicitation not supported or error"},
    {"test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034",
     "{\"type\":\"object\",\"properties\":{}}", "elicitation/create", "elicitation",
     defaults_params, form_done, "Elicitation not supported or error"},
    {"test_elicitation_sep1330_enums",
     "Tests elicitation with enum schema improvements per SEP-1330",
     "{\"type\":\"object\",\"properties\":{}}", "elicitation/create", "elicitation",
     enums_params, form_done, "Elicitation not supported or error"},
};

#define N_ASKS (sizeof asks / sizeof *asks)

int ev_ask_list(ev *e, mcpg_buf *out) {
    int rc = 0;
    for (size_t i = 0; i < N_ASKS && !rc; i++)
        rc = e->host->buf_printf(out, ",{\"name\":\"%s\",\"description\":\"%s\",\"inputSchema\":%s}",
                                 asks[i].name, asks[i].description, asks[i].schema);
    return rc;
}

/* ---- the legacy wire: ask, wait, resume ---- */

static void **wait_slot(ev *e, mcpg_call *call) { return e->host->call_slot(call, e->self); }

/* On the call's loop, exactly once. */
static void replied(void *arg, const mcpg_reply *r) {
    ask_wait *w = arg;
    ev *e = w->e;
    /* cancel answered the call already, or the call ended without us */
    if (w->answered || r->status == MCPG_ECANCELED) {
        free(w);
        return;
    }
    void **slot = wait_slot(e, w->call);
    if (slot) *slot = NULL;
    mcpg_call *call = w->call;
    mcpg_status st;
    if (r->status != 0)
        st = ev_textf(e, call, 0, "%s: %s", w->t->failed, e->host->strerror(r->status));
    else if (r->is_error)
        st = ev_textf(e, call, 0, "%s: %s", w->t->failed, r->error_message);
    else
        st = w->t->done(e, call, r->result_json, r->result_len);
    free(w);
    e->host->call_resume(call, st);
}

static void ask_cancel(ev *e, ev_waiting *base);

static mcpg_status ask_client(ev *e, mcpg_call *call, const ask_tool *t, const mcpg_buf *p) {
    const mcpg_host *h = e->host;
    if (!MCPG_HOST_HAS(h, call_request))
        return ev_textf(e, call, 0, "%s: this gateway cannot send requests", t->failed);
    ask_wait *w = calloc(1, sizeof *w);
    if (!w) return mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
    *w = (ask_wait){.base = {ask_cancel}, .e = e, .call = call, .t = t};
    void **slot = wait_slot(e, call);
    if (slot) *slot = w; /* before the request: its reply may come before we return */
    int rc = h->call_request(call, t->method, p->data, p->len,
                             (uint64_t)e->cfg->request_timeout_ms, replied, w);
    if (rc == 0) return MCPG_PENDING; /* w is the reply's now */
    if (slot) *slot = NULL;
    free(w);
    return ev_textf(e, call, 0, "%s: %s", t->failed, h->strerror(rc));
}

/* The client left while the request waited: answer the call now. */
static void ask_cancel(ev *e, ev_waiting *base) {
    ask_wait *w = (ask_wait *)base;
    w->answered = 1;
    e->host->call_error(w->call, MCPG_RPC_SERVER_ERROR, "request cancelled", NULL);
    e->host->call_resume(w->call, MCPG_DENY);
}

/* ---- the stateless wire: input_required, then the retry ---- */

static mcpg_status ask_input(ev *e, mcpg_call *call, const ask_tool *t, const mcpg_buf *p) {
    const mcpg_host *h = e->host;
    size_t n;
    const char *params = h->call_params(call, &n);
    mcpg_json_span v;
    if (ev_json_at(h, params, n, &v, "inputResponses", t->key, (const char *)NULL) &&
        v.type == MCPG_JSON_OBJECT)
        return t->done(e, call, v.p, v.n);
    mcpg_buf req = {0};
    int rc = h->buf_printf(&req, "{\"%s\":{\"method\":\"%s\",\"params\":%.*s}}", t->key,
                           t->method, (int)p->len, p->data);
    mcpg_status st = rc ? mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory")
                        : mcpg_result_input_required(h, call, req.data, req.len, NULL, 0);
    h->buf_free(&req);
    return st;
}

int ev_ask_tool(ev *e, mcpg_call *call, const char *name, mcpg_status *st) {
    const ask_tool *t = NULL;
    for (size_t i = 0; i < N_ASKS && !t; i++)
        if (strcmp(asks[i].name, name) == 0) t = &asks[i];
    if (!t) return 0;
    const mcpg_host *h = e->host;
    mcpg_buf p = {0};
    if (t->params(e, call, &p)) {
        h->buf_free(&p);
        *st = mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
        return 1;
    }
    *st = h->call_wire(call) == MCPG_WIRE_LEGACY ? ask_client(e, call, t, &p)
                                                 : ask_input(e, call, t, &p);
    h->buf_free(&p);
    return 1;
}
