/* Fuzzer: the kernel's one reading of a request (kernel/judge.c), against a
 * second reader.
 *
 * The first input byte picks the method, the rest is params' text. Checked,
 * for every request the kernel takes: what a backend reads
 * (desc.params_json) names no member twice anywhere, holds only the members
 * the method defines, and a different JSON reader (jansson, which keeps the
 * last of two equal members) finds in it exactly the target and arguments
 * the kernel judged; a judged target holds no NUL. A request refused has its
 * error set. So no input can make the gateway judge one request and hand a
 * backend another. And the judge's one-pass reading (validation and the
 * repeated-name check in one scan, mcpg_json_value_unique) answers exactly
 * what the two passes it replaced answer (mcpg_json_value, then
 * mcpg_json_unique_trusted's walk). */
#define _GNU_SOURCE
#include "fuzz.h"

#include "call_internal.h"

#include <jansson.h>
#include <string.h>

static const struct {
    const char *name;
    uint32_t method;
    const char *target;            /* params member of the target, or NULL */
    const char *const members[8];  /* what the method defines; first NULL ends */
} k_methods[] = {
    {"tools/call", MCPG_METHOD_TOOLS_CALL, "name",
     {"name", "arguments", "_meta", "task", "requestState", "inputResponses"}},
    {"prompts/get", MCPG_METHOD_PROMPTS_GET, "name",
     {"name", "arguments", "_meta", "requestState", "inputResponses"}},
    {"resources/read", MCPG_METHOD_RESOURCES_READ, "uri",
     {"uri", "_meta", "requestState", "inputResponses"}},
    {"completion/complete", MCPG_METHOD_COMPLETION_COMPLETE, NULL,
     {"ref", "argument", "context", "_meta"}},
    {"tasks/get", MCPG_METHOD_TASKS_GET, "taskId", {"taskId", "_meta"}},
    {"tools/list", MCPG_METHOD_TOOLS_LIST, NULL, {"cursor", "_meta"}},
};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

#define FZ_JANSSON (JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL)

static bool reader_limit(const json_error_t *e) {
    static const char *const limits[] = {"nicode", "surrogate", "integer", "real", "number"};
    for (size_t i = 0; i < sizeof limits / sizeof *limits; i++)
        if (strstr(e->text, limits[i])) return true;
    return false;
}

static void check_judged(mcpg_call *c, size_t k) {
    const mcpg_call_desc *d = &c->d;
    FZ_CHECK(!d->name || !memchr(d->name, '\0', d->name_len), "a judged target holds a NUL");
    if (!d->params_json) return;
    FZ_CHECK(mcpg_json_unique(d->params_json, d->params_len, NULL) == 0,
             "judged params name a member twice: %.*s", (int)d->params_len, d->params_json);
    json_error_t jerr;
    json_t *p = json_loadb(d->params_json, d->params_len, FZ_JANSSON, &jerr);
    /* jansson refuses some text the kernel's reader takes (a lone surrogate
     * escape, a number past a double): a reader that refuses the text reads
     * no other request from it */
    if (!p && reader_limit(&jerr)) return;
    FZ_CHECK(p && json_is_object(p), "judged params are not an object to jansson: %s", jerr.text);
    const char *key;
    json_t *v;
    json_object_foreach(p, key, v) {
        bool defined = false;
        for (size_t i = 0; k_methods[k].members[i]; i++)
            defined |= !strcmp(key, k_methods[k].members[i]);
        FZ_CHECK(defined, "member \"%s\" reaches the backend of %s", key, k_methods[k].name);
    }
    const char *t = k_methods[k].target;
    json_t *tv = t ? json_object_get(p, t) : NULL;
    if (tv) {
        FZ_CHECK(json_is_string(tv) && d->name && json_string_length(tv) == d->name_len &&
                     !memcmp(json_string_value(tv), d->name, d->name_len),
                 "the target the backend reads is not the one judged");
    } else if (t) {
        FZ_CHECK(!d->name, "a target judged that the backend does not read");
    }
    json_t *args = json_object_get(p, "arguments");
    if (d->args_json) {
        json_t *ja = json_loadb(d->args_json, d->args_len, FZ_JANSSON, &jerr);
        FZ_CHECK(ja && args && json_equal(ja, args), "the arguments the backend reads differ");
        json_decref(ja);
    }
    json_decref(p);
}

/* One pass and two passes agree on every text. */
static void check_one_pass(const char *text, size_t n) {
    size_t p1 = 0, p2 = 0;
    mcpg_json_span v1 = {0}, v2 = {0};
    int u1 = 0;
    int r1 = mcpg_json_value_unique(text, n, &p1, &v1, &u1, NULL);
    int r2 = mcpg_json_value(text, n, &p2, &v2);
    FZ_CHECK(r1 == r2, "value_unique read %d, value %d", r1, r2);
    if (r1 != 1 || r2 != 1) return;
    FZ_CHECK(p1 == p2 && v1.p == v2.p && v1.n == v2.n && v1.type == v2.type,
             "value_unique and value read different spans");
    int u2 = mcpg_json_unique_trusted(&v2, NULL);
    FZ_CHECK(u1 == u2, "one pass says %d, two passes %d", u1, u2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input in = {data, size};
    size_t k = fz_byte(&in) % (sizeof k_methods / sizeof *k_methods);
    mcpg_call *c = calloc(1, sizeof *c);
    if (!c) return 0;
    char *text = malloc(in.n ? in.n : 1);
    if (!text) {
        free(c);
        return 0;
    }
    memcpy(text, in.p, in.n);
    c->method = k_methods[k].method;
    c->d.method = k_methods[k].name;
    c->d.method_len = strlen(k_methods[k].name);
    c->d.params_json = in.n ? text : NULL;
    c->d.params_len = in.n;
    check_one_pass(text, in.n);
    if (call_judge(c) == 0) check_judged(c, k);
    else FZ_CHECK(c->is_error && c->err_code == MCPG_RPC_INVALID_PARAMS, "a refusal without its error");
    mcpg_buf_free(&c->judged_name);
    mcpg_buf_free(&c->judged_ref);
    mcpg_buf_free(&c->judged_params);
    free(text);
    free(c);
    return 0;
}
