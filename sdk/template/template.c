/* backend_template: a complete, small mcpg backend module to copy from.
 *
 * It offers one tool, `greet`, which answers
 *   {"content":[{"type":"text","text":"Hello, Ann"}]}
 * for the arguments {"name":"Ann"}, styled by its configuration.
 *
 * To start a module of your own: copy this folder, rename the file, the
 * module name below and the CMake target to the same new name (the kernel
 * loads <name>.so and checks that the descriptor's name matches), then
 * replace the tool. docs/writing-a-module.md explains every rule the comments
 * below mention.
 *
 * The rules this file follows, which every module must:
 *  - It exports exactly one symbol, mcpg_module_entry (MCPG_MODULE_DEFINE
 *    writes it; the build's version script hides everything else).
 *  - It links nothing from the kernel: every service comes through the
 *    `const mcpg_host *` handed to create(), kept in the instance.
 *  - No mutable globals: an instance's state lives in the struct create()
 *    returns, because during a reload two generations (two copies of this
 *    module, maybe two instances each) are alive at once.
 *  - Ops never block the loop thread. This one only formats text, so it
 *    declares MCPG_MOD_INLINE_SAFE and a manifest may set inline_dispatch.
 *    It could declare MCPG_MOD_NEVER_BLOCKS too (then its calls run on the
 *    loop unless the manifest says "inline_dispatch": false); a backend
 *    grown from it should add that flag only once none of its ops can wait
 *    on a file, a socket, a sleep or a lock held across I/O.
 */
#include <mcpg/sdk.h>

#include <string.h>

/* ---- configuration --------------------------------------------------------
 * The kernel parses the instance's "config" object against this table before
 * anything is created, reports every problem with its key path (with a "did
 * you mean" for typos), fills a zeroed struct at the declared offsets and
 * hands it to validate() and create(). Strings are kernel-owned and live as
 * long as the instance: keep the pointers, never free them. */
typedef struct template_config {
    const char *greeting; /* "Hello" */
    int64_t max_name;     /* bytes */
    const char *style;    /* "plain" or "excited" */
    int log_calls;        /* bool */
} template_config;

static const mcpg_config_field template_fields[] = {
    MCPG_CFG_STRING_FIELD(template_config, greeting, "greeting", "\"Hello\"",
                          "the word said before the name"),
    MCPG_CFG_INT_FIELD(template_config, max_name, "max_name", "64", 1, 1024,
                       "the longest name accepted, in bytes"),
    MCPG_CFG_ENUM_FIELD(template_config, style, "style", "\"plain\"", "plain|excited",
                        "how the greeting ends"),
    MCPG_CFG_BOOL_FIELD(template_config, log_calls, "log_calls", "false",
                        "log every call at info level"),
    MCPG_CONFIG_END};

/* ---- the instance ---------------------------------------------------------- */

typedef struct template_instance {
    const mcpg_host *host;      /* borrowed for the instance's life */
    mcpg_instance *self;        /* the kernel's handle: for log, timers, slots */
    const template_config *cfg; /* borrowed for the instance's life */
    mcpg_buf tools;             /* the tools/list array, built once in create */
} template_instance;

static const char greet_tool[] =
    "[{\"name\":\"greet\",\"description\":\"Greets someone by name\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
    "\"required\":[\"name\"]}}]";

/* ---- lifecycle --------------------------------------------------------------- */

/* What the schema cannot say. Runs for `mcpg --check` and before a new
 * generation is built: it must not start anything or keep state. Report every
 * problem (not just the first) and answer MCPG_ECONFIG. */
static int template_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const template_config *cfg = config;
    int bad = 0;
    if (!cfg->greeting || !*cfg->greeting) {
        host->report_error(rep, "greeting", "must not be empty");
        bad = 1;
    } else if (strlen(cfg->greeting) > 64) {
        host->report_error(rep, "greeting", "must be at most 64 bytes");
        bad = 1;
    }
    return bad ? MCPG_ECONFIG : 0;
}

/* Build the instance: allocate, remember host/self/config, precompute. No
 * threads or timers here (start is for that). On failure free what was made:
 * destroy is not called for an instance whose create failed. */
static int template_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                           void **instance_out) {
    template_instance *t = host->calloc(1, sizeof *t);
    if (!t) return MCPG_ENOMEM;
    t->host = host;
    t->self = self;
    t->cfg = config;
    if (mcpg_buf_append(&t->tools, greet_tool, sizeof greet_tool - 1) != 0) {
        host->free(t);
        return MCPG_ENOMEM;
    }
    *instance_out = t;
    return 0;
}

/* Free everything create made. By now stop has run (if start did) and no call
 * is inside the instance. */
static void template_destroy(void *instance) {
    template_instance *t = instance;
    mcpg_buf_free(&t->tools);
    t->host->free(t);
}

/* ---- ops ------------------------------------------------------------------------ */

/* List ops answer from memory, synchronously: append a JSON array to out. */
static int template_list_tools(void *instance, mcpg_buf *out) {
    template_instance *t = instance;
    return mcpg_buf_append(out, t->tools.data, t->tools.len);
}

/* A JSON-RPC error for the client, and DENY. The message is copied. */
static mcpg_status template_refuse(template_instance *t, mcpg_call *call, const char *msg) {
    t->host->call_error(call, MCPG_RPC_INVALID_PARAMS, msg, NULL);
    return MCPG_DENY;
}

/* The greeting as the call's result. mcpg_result_text (SDK) writes
 * {"content":[{"type":"text","text":"<greeting>, <name><end>"}]} into the
 * call's own result buffer, JSON-escaping the text (quotes, controls, bad UTF-8). */
static mcpg_status template_answer(template_instance *t, mcpg_call *call, const char *name,
                                   size_t name_len) {
    char text[64 + 2 + 1024 + 1]; /* greeting, ", ", name, "!" (bounded by config) */
    size_t glen = strlen(t->cfg->greeting), n = 0;
    memcpy(text, t->cfg->greeting, glen);
    n += glen;
    memcpy(text + n, ", ", 2);
    n += 2;
    memcpy(text + n, name, name_len);
    n += name_len;
    if (strcmp(t->cfg->style, "excited") == 0) text[n++] = '!';
    return mcpg_result_text(t->host, call, text, n, 0);
}

/* Runs on a pool thread, or on the loop thread with inline_dispatch (or by
 * default with MCPG_MOD_NEVER_BLOCKS): either
 * way it must be thread-safe (it only reads the instance) and must not keep
 * `call` after answering. Answer CONTINUE with the result set, DENY with an
 * error set, or PENDING and later host->call_resume() exactly once. */
static mcpg_status template_call_tool(void *instance, mcpg_call *call) {
    template_instance *t = instance;
    const mcpg_host *h = t->host;
    const char *tool = h->call_target(call); /* the name as this backend lists it */
    if (!tool || strcmp(tool, "greet") != 0) return template_refuse(t, call, "Unknown tool");

    /* The arguments are raw JSON text, borrowed until the call completes. The
     * scanner reads them in place; decode only what is kept. */
    size_t alen;
    const char *args = h->call_args(call, &alen);
    mcpg_json_span v;
    if (mcpg_json_object_get(args, alen, "name", &v) != 1 || v.type != MCPG_JSON_STRING)
        return template_refuse(t, call, "\"name\" must be a string");
    char name[1024 + 1];
    size_t name_len;
    size_t cap = (size_t)t->cfg->max_name + 1;
    if (mcpg_json_string_decode(&v, name, cap, &name_len) != 0)
        return template_refuse(t, call, "\"name\" is too long");
    if (name_len == 0) return template_refuse(t, call, "\"name\" must not be empty");

    if (t->cfg->log_calls && h->log_enabled(t->self, MCPG_LOG_INFO))
        h->log(t->self, MCPG_LOG_INFO, "greeting %.*s", (int)name_len, name);
    return template_answer(t, call, name, name_len);
}

/* ---- the descriptor ------------------------------------------------------------ */

/* Ops tables start with {size, version} (MCPG_OPS_HEAD): the kernel reads
 * only the slots your build knows. Optional ops left out are NULL: "not
 * offered". Mandatory ones (create, destroy, list_tools, call_tool) missing
 * make the kernel refuse the module at load, naming the op. */
static const mcpg_lifecycle_ops template_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = template_validate,
    .create = template_create,
    .destroy = template_destroy,
};

static const mcpg_backend_ops template_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops),
    .list_tools = template_list_tools,
    .call_tool = template_call_tool,
};

MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "backend_template", "1.0.0",
                   .description = "greets people: a template for new backends",
                   .flags = MCPG_MOD_INLINE_SAFE,
                   .config = template_fields,
                   .config_size = sizeof(template_config),
                   .lifecycle = &template_lifecycle,
                   .ops = &template_ops);
