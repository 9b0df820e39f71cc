/* A deliberately broken (or, with no FIXTURE_* defines, plain valid) backend
 * module for the ABI tests, built straight against the ABI headers (no SDK
 * macros) so each fixture can get exactly one thing wrong:
 *
 *   FIXTURE_NAME          "abi_xxx": the descriptor's name (= the file name)
 *   FIXTURE_MAGIC         the descriptor's magic (default MCPG_MODULE_MAGIC)
 *   FIXTURE_ABI_MAJOR     default MCPG_ABI_MAJOR
 *   FIXTURE_ABI_MINOR     default MCPG_ABI_MINOR
 *   FIXTURE_NO_CALL_TOOL  the backend ops table leaves call_tool NULL
 *   FIXTURE_NO_ENTRY      mcpg_module_entry is not exported (hidden)
 *   FIXTURE_CONFIG_OVERFLOW  a config field lies outside config_size (a module
 *                         that forgot to set it)
 */
#include <mcpg/abi.h>

#ifndef FIXTURE_NAME
#error "FIXTURE_NAME must be defined"
#endif
#ifndef FIXTURE_MAGIC
#define FIXTURE_MAGIC MCPG_MODULE_MAGIC
#endif
#ifndef FIXTURE_ABI_MAJOR
#define FIXTURE_ABI_MAJOR MCPG_ABI_MAJOR
#endif
#ifndef FIXTURE_ABI_MINOR
#define FIXTURE_ABI_MINOR MCPG_ABI_MINOR
#endif

static int fx_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **instance_out) {
    (void)self;
    (void)config;
    *instance_out = (void *)host;
    return 0;
}

static void fx_destroy(void *instance) { (void)instance; }

static const mcpg_lifecycle_ops fx_lifecycle = {
    .size = (uint32_t)sizeof(mcpg_lifecycle_ops),
    .version = 1,
    .create = fx_create,
    .destroy = fx_destroy,
};

static int fx_list_tools(void *instance, mcpg_buf *out) {
    const mcpg_host *host = instance;
    static const char list[] = "[]";
    return host->buf_append(out, list, sizeof list - 1);
}

#ifndef FIXTURE_NO_CALL_TOOL
static mcpg_status fx_call_tool(void *instance, mcpg_call *call) {
    const mcpg_host *host = instance;
    host->call_error(call, MCPG_RPC_INTERNAL_ERROR, "fixture", NULL);
    return MCPG_DENY;
}
#endif

static const mcpg_backend_ops fx_ops = {
    .size = (uint32_t)sizeof(mcpg_backend_ops),
    .version = 1,
    .list_tools = fx_list_tools,
#ifndef FIXTURE_NO_CALL_TOOL
    .call_tool = fx_call_tool,
#endif
};

#ifdef FIXTURE_CONFIG_OVERFLOW
static const mcpg_config_field fx_config[] = {
    {.key = "limit", .type = MCPG_CFG_INT, .offset = 0, .default_json = "7",
     .help = "an int64 the struct has no room for", .size = sizeof(mcpg_config_field)},
    MCPG_CONFIG_END};
#endif

static const mcpg_module fx_descriptor = {
    .magic = FIXTURE_MAGIC,
    .abi_major = FIXTURE_ABI_MAJOR,
    .abi_minor = FIXTURE_ABI_MINOR,
    .size = (uint32_t)sizeof(mcpg_module),
    .kind = MCPG_KIND_BACKEND,
    .name = FIXTURE_NAME,
    .version = "0.0.1",
    .build_id = FIXTURE_NAME " fixture",
    .description = "ABI test fixture",
    .lifecycle = &fx_lifecycle,
    .ops = &fx_ops,
#ifdef FIXTURE_CONFIG_OVERFLOW
    .config = fx_config,
    .config_size = 4,
#endif
};

#ifdef FIXTURE_NO_ENTRY
#define FX_VISIBILITY __attribute__((visibility("hidden")))
#else
#define FX_VISIBILITY __attribute__((visibility("default")))
#endif

FX_VISIBILITY const mcpg_module *mcpg_module_entry(uint16_t host_abi_major,
                                                   uint16_t host_abi_minor) {
    (void)host_abi_major;
    (void)host_abi_minor;
    return &fx_descriptor;
}
