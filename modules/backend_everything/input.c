/* The input_required family (SEP-2322, the stateless wire's way to ask the
 * client): each tool answers its first call with inputRequests (and often a
 * requestState), and the client retries the same request with
 * params.inputResponses under the same keys and the state echoed back.
 *
 * The backend keeps nothing between the rounds: what it needs travels in
 * requestState, signed with the instance's key so a changed state is
 * refused (-32602). A retry whose responses miss a key is asked again;
 * inputResponses that is not an object is a protocol error (-32602). */
#include "everything.h"

#include <stdio.h>
#include <string.h>

/* What each round asks, as the suite's scenarios spell it. */
#define ASK_NAME                                                                          \
    "{\"method\":\"elicitation/create\",\"params\":{\"message\":\"What is your name?\","  \
    "\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"        \
    "\"string\"}},\"required\":[\"name\"]}}}"
#define ASK_CAPITAL                                                                        \
    "{\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[{\"role\":\"user\"," \
    "\"content\":{\"type\":\"text\",\"text\":\"What is the capital of France?\"}}],"       \
    "\"maxTokens\":100}}"
#define ASK_GREETING                                                                       \
    "{\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[{\"role\":\"user\"," \
    "\"content\":{\"type\":\"text\",\"text\":\"Generate a greeting\"}}],\"maxTokens\":50}}"
#define ASK_ROOTS "{\"method\":\"roots/list\",\"params\":{}}"
#define ASK_CONFIRM                                                                        \
    "{\"method\":\"elicitation/create\",\"params\":{\"message\":\"Please confirm\","       \
    "\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":"           \
    "\"boolean\"}},\"required\":[\"ok\"]}}}"
#define ASK_STEP(n, q, field)                                                              \
    "{\"method\":\"elicitation/create\",\"params\":{\"message\":\"Step " n ": " q "\","    \
    "\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"" field "\":{\"type\":"    \
    "\"string\"}},\"required\":[\"" field "\"]}}}"
#define ASK_CONTEXT                                                                        \
    "{\"method\":\"elicitation/create\",\"params\":{\"message\":\"What context should the " \
    "prompt use?\",\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"context\":"   \
    "{\"type\":\"string\"}},\"required\":[\"context\"]}}}"

/* ---- requestState: "<tag>.<mac>", the mac keyed by the instance ---- */

static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A keyed hash: enough to tell a state this instance made from one a
 * client changed; not a cryptographic MAC. */
static uint64_t mac_of(const ev *e, const char *s, size_t n) {
    uint64_t h = e->key[0];
    for (size_t i = 0; i < n; i++) h = mix(h ^ (unsigned char)s[i]) + e->key[1];
    return mix(h ^ n);
}

int ev_state_sign(const ev *e, const char *tag, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s.%016llx", tag,
                     (unsigned long long)mac_of(e, tag, strlen(tag)));
    return n > 0 && (size_t)n < cap ? n : -1;
}

int ev_state_check(const ev *e, const char *state, size_t n, const char *tag) {
    char want[128];
    int wn = ev_state_sign(e, tag, want, sizeof want);
    return wn > 0 && (size_t)wn == n && memcmp(want, state, n) == 0;
}

/* ---- reading a retry ---- */

typedef struct retry {
    int has;                 /* params.inputResponses is there */
    mcpg_json_span responses; /* the object */
    char state[128];         /* params.requestState, decoded ("" when none) */
    size_t state_len;
} retry;

/* 0, or MCPG_EPROTO when inputResponses is there but not an object. */
static int read_retry(ev *e, mcpg_call *call, retry *r) {
    const mcpg_host *h = e->host;
    size_t n;
    const char *params = h->call_params(call, &n);
    mcpg_json_span v;
    memset(r, 0, sizeof *r);
    if (ev_json_at(h, params, n, &v, "requestState", (const char *)NULL) &&
        v.type == MCPG_JSON_STRING &&
        h->json_string_decode(&v, r->state, sizeof r->state, &r->state_len) < 0)
        r->state_len = 0;
    if (!ev_json_at(h, params, n, &v, "inputResponses", (const char *)NULL)) return 0;
    if (v.type != MCPG_JSON_OBJECT) return MCPG_EPROTO;
    r->has = 1;
    r->responses = v;
    return 0;
}

/* The response under key, when it is an object. */
static int response(ev *e, const retry *r, const char *key, mcpg_json_span *out) {
    return r->has && ev_json_at(e->host, r->responses.p, r->responses.n, out, key,
                                (const char *)NULL) &&
           out->type == MCPG_JSON_OBJECT;
}

/* A string field of a response's content, decoded into dst. */
static const char *content_str(ev *e, const mcpg_json_span *resp, const char *field, char *dst,
                               size_t cap) {
    mcpg_json_span v;
    dst[0] = '\0';
    if (ev_json_at(e->host, resp->p, resp->n, &v, "content", field, (const char *)NULL))
        ev_json_str(e->host, &v, dst, cap);
    return dst;
}

static mcpg_status bad_responses(ev *e, mcpg_call *call) {
    return mcpg_result_errorf(e->host, call, MCPG_RPC_INVALID_PARAMS,
                              "Invalid params: inputResponses must be an object");
}

static mcpg_status bad_state(ev *e, mcpg_call *call) {
    return mcpg_result_errorf(e->host, call, MCPG_RPC_INVALID_PARAMS,
                              "Invalid params: requestState failed its integrity check");
}

/* Ask: {"key": request, ...}, with a signed state for tag (none when NULL). */
static mcpg_status ask(ev *e, mcpg_call *call, const char *requests, const char *tag) {
    char state[128];
    int sn = tag ? ev_state_sign(e, tag, state, sizeof state) : 0;
    if (sn < 0) return mcpg_result_errorf(e->host, call, MCPG_RPC_INTERNAL_ERROR, "state");
    return mcpg_result_input_required(e->host, call, requests, strlen(requests),
                                      tag ? state : NULL, (size_t)sn);
}

/* ---- the tools ---- */

static mcpg_status elicitation(ev *e, mcpg_call *call, const retry *r) {
    mcpg_json_span resp;
    char name[128];
    if (!response(e, r, "user_name", &resp))
        return ask(e, call, "{\"user_name\":" ASK_NAME "}", NULL);
    return ev_textf(e, call, 0, "Hello, %s!", content_str(e, &resp, "name", name, sizeof name));
}

static mcpg_status sampling(ev *e, mcpg_call *call, const retry *r) {
    mcpg_json_span resp, v;
    char text[512] = "No response";
    if (!response(e, r, "capital_question", &resp))
        return ask(e, call, "{\"capital_question\":" ASK_CAPITAL "}", NULL);
    if (ev_json_at(e->host, resp.p, resp.n, &v, "content", "text", (const char *)NULL))
        ev_json_str(e->host, &v, text, sizeof text);
    return ev_textf(e, call, 0, "LLM response: %s", text);
}

static mcpg_status list_roots(ev *e, mcpg_call *call, const retry *r) {
    mcpg_json_span resp, roots, root, uri;
    if (!response(e, r, "client_roots", &resp))
        return ask(e, call, "{\"client_roots\":" ASK_ROOTS "}", NULL);
    char list[1024] = "", one[256];
    size_t it = 0, used = 0;
    if (ev_json_at(e->host, resp.p, resp.n, &roots, "roots", (const char *)NULL) &&
        roots.type == MCPG_JSON_ARRAY)
        while (e->host->json_array_next(roots.p, roots.n, &it, &root) == 1 && used < 900)
            if (ev_json_at(e->host, root.p, root.n, &uri, "uri", (const char *)NULL))
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                         used ? ", " : "",
                                         ev_json_str(e->host, &uri, one, sizeof one));
    return ev_textf(e, call, 0, "Client roots: %s", used ? list : "(none)");
}

/* One round with a signed state: asked again when the response is missing,
 * refused when the state is not the one it signed. */
static mcpg_status confirmed(ev *e, mcpg_call *call, const retry *r, const char *tag,
                             const char *ok_text) {
    mcpg_json_span resp;
    if (!response(e, r, "confirm", &resp)) return ask(e, call, "{\"confirm\":" ASK_CONFIRM "}", tag);
    if (!ev_state_check(e, r->state, r->state_len, tag)) return bad_state(e, call);
    return ev_textf(e, call, 0, "%s", ok_text);
}

static mcpg_status request_state(ev *e, mcpg_call *call, const retry *r) {
    return confirmed(e, call, r, "request_state:1", "Confirmed: state-ok");
}

static mcpg_status tampered_state(ev *e, mcpg_call *call, const retry *r) {
    return confirmed(e, call, r, "tampered_state:1", "Confirmed: state-ok");
}

static mcpg_status multiple_inputs(ev *e, mcpg_call *call, const retry *r) {
    static const char tag[] = "multiple_inputs:1";
    mcpg_json_span a, b, c;
    if (!response(e, r, "user_name", &a) || !response(e, r, "greeting", &b) ||
        !response(e, r, "client_roots", &c))
        return ask(e, call,
                   "{\"user_name\":" ASK_NAME ",\"greeting\":" ASK_GREETING
                   ",\"client_roots\":" ASK_ROOTS "}",
                   tag);
    if (!ev_state_check(e, r->state, r->state_len, tag)) return bad_state(e, call);
    char name[128];
    return ev_textf(e, call, 0, "All inputs received for %s",
                    content_str(e, &a, "name", name, sizeof name));
}

/* Three rounds; the state says which one the client is in. */
static mcpg_status multi_round(ev *e, mcpg_call *call, const retry *r) {
    static const char r1[] = "multi_round:1", r2[] = "multi_round:2";
    mcpg_json_span resp;
    char name[128], color[128];
    if (response(e, r, "step2", &resp)) {
        if (!ev_state_check(e, r->state, r->state_len, r2)) return bad_state(e, call);
        return ev_textf(e, call, 0, "Multi-round complete: favorite color %s",
                        content_str(e, &resp, "color", color, sizeof color));
    }
    if (response(e, r, "step1", &resp)) {
        if (!ev_state_check(e, r->state, r->state_len, r1)) return bad_state(e, call);
        content_str(e, &resp, "name", name, sizeof name);
        return ask(e, call,
                   "{\"step2\":" ASK_STEP("2", "What is your favorite color?", "color") "}", r2);
    }
    return ask(e, call, "{\"step1\":" ASK_STEP("1", "What is your name?", "name") "}", r1);
}

/* Only what the client declared it can answer. */
static mcpg_status capabilities(ev *e, mcpg_call *call, const retry *r) {
    if (r->has) return ev_textf(e, call, 0, "Capabilities round complete");
    const mcpg_host *h = e->host;
    char req[1024];
    size_t n = 0;
    if (ev_client_has(h, call, "sampling"))
        n += (size_t)snprintf(req + n, sizeof req - n, "%s\"greeting\":" ASK_GREETING,
                              n ? "," : "");
    if (ev_client_has(h, call, "elicitation"))
        n += (size_t)snprintf(req + n, sizeof req - n, "%s\"user_name\":" ASK_NAME,
                              n ? "," : "");
    if (ev_client_has(h, call, "roots"))
        n += (size_t)snprintf(req + n, sizeof req - n, "%s\"client_roots\":" ASK_ROOTS,
                              n ? "," : "");
    if (n == 0) return ev_textf(e, call, 0, "The client declared nothing to ask");
    char all[1100];
    snprintf(all, sizeof all, "{%s}", req);
    return ask(e, call, all, NULL);
}

typedef struct input_tool {
    const char *name, *description;
    mcpg_status (*run)(ev *e, mcpg_call *call, const retry *r);
} input_tool;

static const input_tool inputs[] = {
    {"test_input_required_result_elicitation", "Asks the user's name (input_required)",
     elicitation},
    {"test_input_required_result_sampling", "Asks the client's model (input_required)", sampling},
    {"test_input_required_result_list_roots", "Asks the client's roots (input_required)",
     list_roots},
    {"test_input_required_result_request_state", "Round-trips a signed requestState",
     request_state},
    {"test_input_required_result_multiple_inputs", "Asks three inputs at once", multiple_inputs},
    {"test_input_required_result_multi_round", "Asks in two rounds, then answers", multi_round},
    {"test_input_required_result_tampered_state", "Refuses a requestState it did not sign",
     tampered_state},
    {"test_input_required_result_capabilities", "Asks only what the client declared",
     capabilities},
};

#define N_INPUTS (sizeof inputs / sizeof *inputs)

int ev_input_list(ev *e, mcpg_buf *out) {
    int rc = 0;
    for (size_t i = 0; i < N_INPUTS && !rc; i++)
        rc = e->host->buf_printf(out,
                                 ",{\"name\":\"%s\",\"description\":\"%s\",\"inputSchema\":"
                                 "{\"type\":\"object\",\"properties\":{}}}",
                                 inputs[i].name, inputs[i].description);
    return rc;
}

int ev_input_tool(ev *e, mcpg_call *call, const char *name, mcpg_status *st) {
    for (size_t i = 0; i < N_INPUTS; i++) {
        if (strcmp(inputs[i].name, name) != 0) continue;
        retry r;
        *st = read_retry(e, call, &r) ? bad_responses(e, call) : inputs[i].run(e, call, &r);
        return 1;
    }
    return 0;
}

/* prompts/get of test_input_required_result_prompt. */
mcpg_status ev_input_prompt(ev *e, mcpg_call *call) {
    retry r;
    mcpg_json_span resp;
    char context[256];
    if (read_retry(e, call, &r)) return bad_responses(e, call);
    if (!response(e, &r, "user_context", &resp))
        return ask(e, call, "{\"user_context\":" ASK_CONTEXT "}", NULL);
    content_str(e, &resp, "context", context, sizeof context);
    mcpg_buf *b = e->host->call_result_buf(call);
    int rc = e->host->buf_printf(b, "{\"description\":\"A prompt built from the user's "
                                    "context\",\"messages\":[{\"role\":\"user\",\"content\":"
                                    "{\"type\":\"text\",\"text\":");
    char text[400];
    int n = snprintf(text, sizeof text, "Context: %s", context);
    rc = rc ? rc : e->host->buf_append_json_string(b, text, (size_t)n);
    rc = rc ? rc : e->host->buf_printf(b, "}}]}");
    return rc ? mcpg_result_errorf(e->host, call, MCPG_RPC_INTERNAL_ERROR, "out of memory")
              : MCPG_CONTINUE;
}
