/* Prompts, and completion for test_prompt_with_arguments's arg1 and the
 * template's {id}. test_input_required_result_prompt is input.c's: it asks
 * the client first (input_required). */
#include "everything.h"

#include <stdio.h>
#include <string.h>

int ev_list_prompts(ev *e, mcpg_buf *out) {
    return e->host->buf_printf(
        out,
        "[{\"name\":\"test_simple_prompt\",\"title\":\"Simple Test Prompt\",\"description\":"
        "\"A simple prompt without arguments\"},"
        "{\"name\":\"test_prompt_with_arguments\",\"title\":\"Prompt With Arguments\","
        "\"description\":\"A prompt with required arguments\",\"arguments\":["
        "{\"name\":\"arg1\",\"description\":\"First test argument\",\"required\":true},"
        "{\"name\":\"arg2\",\"description\":\"Second test argument\",\"required\":true}]},"
        "{\"name\":\"test_prompt_with_embedded_resource\",\"title\":\"Prompt With Embedded "
        "Resource\",\"description\":\"A prompt that includes an embedded resource\","
        "\"arguments\":[{\"name\":\"resourceUri\",\"description\":\"URI of the resource to "
        "embed\",\"required\":true}]},"
        "{\"name\":\"test_prompt_with_image\",\"title\":\"Prompt With Image\",\"description\":"
        "\"A prompt that includes image content\"},"
        "{\"name\":\"test_input_required_result_prompt\",\"description\":\"A prompt that asks "
        "the user for context first (input_required)\"}]");
}

/* A required string argument, decoded; DENY (-32602) when missing. */
static int need_arg(ev *e, mcpg_call *call, const char *name, char *dst, size_t cap) {
    size_t n;
    const char *args = e->host->call_args(call, &n);
    mcpg_json_span v;
    if (e->host->json_object_get(args, n, name, &v) == 1 && v.type == MCPG_JSON_STRING &&
        e->host->json_string_decode(&v, dst, cap, NULL) >= 0)
        return 1;
    mcpg_result_errorf(e->host, call, MCPG_RPC_INVALID_PARAMS,
                       "Invalid params: missing required argument %s", name);
    return 0;
}

static mcpg_status messages(ev *e, mcpg_call *call, const char *json) {
    if (e->host->call_result(call, json, strlen(json)) == 0) return MCPG_CONTINUE;
    return mcpg_result_errorf(e->host, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
}

static mcpg_status with_arguments(ev *e, mcpg_call *call) {
    char a1[256], a2[256], text[600];
    if (!need_arg(e, call, "arg1", a1, sizeof a1) || !need_arg(e, call, "arg2", a2, sizeof a2))
        return MCPG_DENY;
    int n = snprintf(text, sizeof text, "Prompt with arguments: arg1='%s', arg2='%s'", a1, a2);
    const mcpg_host *h = e->host;
    mcpg_buf *b = h->call_result_buf(call);
    int rc = h->buf_printf(b, "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"text\","
                              "\"text\":");
    rc = rc ? rc : h->buf_append_json_string(b, text, (size_t)n);
    rc = rc ? rc : h->buf_printf(b, "}}]}");
    return rc ? mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory")
              : MCPG_CONTINUE;
}

static mcpg_status with_embedded_resource(ev *e, mcpg_call *call) {
    char uri[512];
    if (!need_arg(e, call, "resourceUri", uri, sizeof uri)) return MCPG_DENY;
    const mcpg_host *h = e->host;
    mcpg_buf *b = h->call_result_buf(call);
    int rc = h->buf_printf(b, "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":"
                              "\"resource\",\"resource\":{\"uri\":");
    rc = rc ? rc : h->buf_append_json_string(b, uri, strlen(uri));
    rc = rc ? rc
            : h->buf_printf(b, ",\"mimeType\":\"text/plain\",\"text\":\"Embedded resource "
                               "content for testing.\"}}},{\"role\":\"user\",\"content\":{"
                               "\"type\":\"text\",\"text\":\"Please process the embedded "
                               "resource above.\"}}]}");
    return rc ? mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory")
              : MCPG_CONTINUE;
}

mcpg_status ev_get_prompt(ev *e, mcpg_call *call) {
    const char *name = e->host->call_target(call);
    if (!name) name = "";
    if (!strcmp(name, "test_simple_prompt"))
        return messages(e, call, "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":"
                                 "\"text\",\"text\":\"This is a simple prompt for testing.\"}}]}");
    if (!strcmp(name, "test_prompt_with_arguments")) return with_arguments(e, call);
    if (!strcmp(name, "test_prompt_with_embedded_resource"))
        return with_embedded_resource(e, call);
    if (!strcmp(name, "test_prompt_with_image"))
        return messages(e, call,
                        "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"image\","
                        "\"data\":\"" EV_PNG_BASE64 "\",\"mimeType\":\"image/png\"}},"
                        "{\"role\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"Please "
                        "analyze the image above.\"}}]}");
    if (!strcmp(name, "test_input_required_result_prompt")) return ev_input_prompt(e, call);
    return mcpg_result_errorf(e->host, call, MCPG_RPC_INVALID_PARAMS, "Unknown prompt: %.64s",
                              name);
}

/* ---- completion/complete ---- */

static const char *const arg1_values[] = {"alpha", "apple", "apricot", "beta", "gamma"};
static const char *const id_values[] = {"1", "2", "3", "123"};

/* The candidates for ref (type, name or uri) and argument; NULL: none. */
static const char *const *candidates(const char *type, const char *ref, const char *arg,
                                     size_t *n) {
    if (!strcmp(type, "ref/prompt") && !strcmp(ref, "test_prompt_with_arguments") &&
        !strcmp(arg, "arg1")) {
        *n = sizeof arg1_values / sizeof *arg1_values;
        return arg1_values;
    }
    if (!strcmp(type, "ref/resource") && !strcmp(ref, "test://template/{id}/data") &&
        !strcmp(arg, "id")) {
        *n = sizeof id_values / sizeof *id_values;
        return id_values;
    }
    *n = 0;
    return NULL;
}

/* {"completion":{"values":[those starting with value],"total":N,"hasMore":false}} */
mcpg_status ev_complete(ev *e, mcpg_call *call) {
    const mcpg_host *h = e->host;
    size_t n, count;
    const char *p = h->call_params(call, &n);
    mcpg_json_span v;
    char type[32] = "", ref[256] = "", arg[64] = "", value[256] = "";
    if (ev_json_at(h, p, n, &v, "ref", "type", (const char *)NULL)) ev_json_str(h, &v, type, sizeof type);
    if (ev_json_at(h, p, n, &v, "ref", "name", (const char *)NULL) ||
        ev_json_at(h, p, n, &v, "ref", "uri", (const char *)NULL))
        ev_json_str(h, &v, ref, sizeof ref);
    if (ev_json_at(h, p, n, &v, "argument", "name", (const char *)NULL)) ev_json_str(h, &v, arg, sizeof arg);
    if (ev_json_at(h, p, n, &v, "argument", "value", (const char *)NULL))
        ev_json_str(h, &v, value, sizeof value);
    const char *const *c = candidates(type, ref, arg, &count);
    mcpg_buf *b = h->call_result_buf(call);
    int rc = h->buf_printf(b, "{\"completion\":{\"values\":[");
    size_t found = 0;
    for (size_t i = 0; i < count && !rc; i++)
        if (!strncmp(c[i], value, strlen(value)))
            rc = h->buf_printf(b, "%s\"%s\"", found++ ? "," : "", c[i]);
    rc = rc ? rc : h->buf_printf(b, "],\"total\":%zu,\"hasMore\":false}}", found);
    return rc ? mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory")
              : MCPG_CONTINUE;
}
