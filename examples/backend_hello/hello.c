/* backend_hello: the smallest useful mcpg backend, built out of the mcpg tree
 * against an installed SDK (docs/writing-a-module.md, "Building out of tree").
 * One tool, `hello`: {"name":"Ann"} -> "Hello, Ann!"; config key `greeting`.
 * sdk/template/ adds what a real module also wants: validate, logs, a test. */
#include <mcpg/sdk.h>
#include <stdio.h>

/* Config is data: the kernel checks the instance's "config" against this table
 * (an unknown key is refused by name) and fills the struct; it owns the strings. */
typedef struct hello_config { const char *greeting; } hello_config;
static const mcpg_config_field hello_fields[] = {
    MCPG_CFG_STRING_FIELD(hello_config, greeting, "greeting", "\"Hello\"", "said before the name"),
    MCPG_CONFIG_END};

/* State lives in the instance, never in globals: during a reload two copies of
 * this module run side by side. Every kernel service comes through `host`. */
typedef struct hello { const mcpg_host *host; const hello_config *cfg; } hello;

static int hello_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                        void **out) {
    hello *h = host->calloc(1, sizeof *h);
    if (!h) return MCPG_ENOMEM;
    *h = (hello){.host = host, .cfg = config};
    *out = h;
    return 0;
}
static void hello_destroy(void *instance) { hello *h = instance; h->host->free(h); }

static int hello_list_tools(void *instance, mcpg_buf *out) {
    static const char tools[] = "[{\"name\":\"hello\",\"inputSchema\":{\"type\":\"object\","
        "\"properties\":{\"name\":{\"type\":\"string\"}},\"required\":[\"name\"]}}]";
    (void)instance;
    return mcpg_buf_append(out, tools, sizeof tools - 1);
}

/* Runs on a pool thread, so it only reads the instance. The arguments are raw
 * JSON, scanned in place; mcpg_result_text escapes the text and sets the result. */
static mcpg_status hello_call_tool(void *instance, mcpg_call *call) {
    hello *h = instance;
    size_t alen, n;
    const char *args = h->host->call_args(call, &alen);
    mcpg_json_span v;
    char name[256], text[512];
    if (mcpg_json_object_get(args, alen, "name", &v) != 1 ||
        mcpg_json_string_decode(&v, name, sizeof name, &n) != 0)
        return mcpg_result_errorf(h->host, call, MCPG_RPC_INVALID_PARAMS,
                                  "\"name\" must be a string up to %zu bytes", sizeof name - 1);
    n = (size_t)snprintf(text, sizeof text, "%s, %s!", h->cfg->greeting, name);
    return mcpg_result_text(h->host, call, text, n < sizeof text ? n : sizeof text - 1, 0);
}

/* Ops tables start with MCPG_OPS_HEAD; the module's name must be its file's name. */
static const mcpg_lifecycle_ops hello_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops), .create = hello_create, .destroy = hello_destroy};
static const mcpg_backend_ops hello_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops), .list_tools = hello_list_tools, .call_tool = hello_call_tool};
MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "backend_hello", "1.0.0", .description = "says hello",
                   .config = hello_fields, .config_size = sizeof(hello_config),
                   .lifecycle = &hello_lifecycle, .ops = &hello_ops);
