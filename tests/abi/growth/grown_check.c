/* The ABI can grow: this program is a kernel's side of a later minor. It is
 * compiled against the grown copy of the ABI headers (grow_abi.py: one slot
 * appended to the descriptor, the lifecycle table, the backend ops table and
 * a config schema entry; MCPG_ABI_MINOR + 1) together with the SDK's own
 * module_check.c and config.c, and it dlopens modules built against this
 * tree's headers:
 *
 *   abi_growth_check V1_0.so GOOD.so GROWN.so
 *
 * V1_0.so (tests/abi/fixture_v1_0.c: every table at its 1.0 size) and
 * GOOD.so (an SDK-built module of today) must pass mcpg_module_check, show
 * none of the new slots through MCPG_HAS, and have their schemas read at
 * their own stride. GROWN.so, built against the grown headers, must pass and
 * show them. Compiling at all proves the 1.0 sizes' pins hold after an
 * append. */
#include <mcpg/check.h>
#include <mcpg/sdk.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const mcpg_module *load(const char *path) {
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    MCPG_REQUIRE(dl != NULL, "dlopen %s: %s", path, dlerror());
    mcpg_module_entry_fn entry;
    void *sym = dlsym(dl, MCPG_ENTRY_SYMBOL);
    MCPG_REQUIRE(sym != NULL, "%s: no %s", path, MCPG_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    const mcpg_module *d = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    char err[512] = "";
    MCPG_REQUIRE(d && mcpg_module_check(d, err, sizeof err) == 0,
                 "%s must pass this kernel's check: %s", path, err);
    return d; /* the image stays mapped: the process ends soon */
}

/* A module built against the older headers: none of the appended slots. */
static void check_older(const char *path) {
    const mcpg_module *d = load(path);
    const mcpg_lifecycle_ops *lc = d->lifecycle;
    const mcpg_backend_ops *ops = d->ops;
    MCPG_CHECK(d->abi_minor < MCPG_ABI_MINOR, "%s: minor %u", path, d->abi_minor);
    MCPG_CHECK(!MCPG_HAS_FIELD(d, grown_field), "%s: descriptor of %u bytes", path, d->size);
    MCPG_CHECK(!MCPG_HAS(lc, grown_slot) && !MCPG_HAS_FIELD(lc, grown_slot),
               "%s: lifecycle of %u bytes has no grown_slot", path, lc->size);
    MCPG_CHECK(!MCPG_HAS(ops, grown_slot) && !MCPG_HAS_FIELD(ops, grown_slot),
               "%s: backend ops of %u bytes have no grown_slot", path, ops->size);
    MCPG_CHECK(MCPG_HAS(lc, create) && MCPG_HAS(ops, call_tool), "%s: its 1.0 slots", path);
    for (const mcpg_config_field *f = mcpg_config_first(d->config); f; f = mcpg_config_next(f))
        MCPG_CHECK(f->size < sizeof(mcpg_config_field) && !MCPG_HAS_FIELD(f, grown_step),
                   "%s: schema entry \"%s\" of %u bytes", path, f->key, f->size);
}

typedef struct v1_config {
    int64_t limit;
    double ratio;
} v1_config;

static void on_problem(void *ctx, const char *key, const char *message) {
    snprintf(ctx, 256, "%s: %s", key, message);
}

/* The 1.0 fixture's schema, entries smaller than ours, parsed as the grown
 * kernel would: every field found, every bound applied. */
static void check_v1_0_schema(const char *path) {
    const mcpg_module *d = load(path);
    MCPG_CHECK(d->size == MCPG_MODULE_SIZE_1_0, "%s: descriptor is the 1.0 size", path);
    const mcpg_lifecycle_ops *lc = d->lifecycle;
    MCPG_CHECK(lc->size == MCPG_LIFECYCLE_OPS_SIZE_1_0 && !MCPG_HAS(lc, worker_start),
               "%s: lifecycle ends at destroy", path);
    const mcpg_backend_ops *ops = d->ops;
    MCPG_CHECK(ops->size == MCPG_BACKEND_OPS_SIZE_1_0 && !MCPG_HAS(ops, cancel),
               "%s: backend ops end at call_tool", path);
    v1_config c = {0};
    char msg[256] = "";
    const char *json = "{\"limit\":42,\"ratio\":2.25}";
    MCPG_CHECK(mcpg_config_parse(d->config, json, strlen(json), &c, on_problem, msg) == 0 &&
                   c.limit == 42 && c.ratio == 2.25,
               "%s: limit %lld ratio %g %s", path, (long long)c.limit, c.ratio, msg);
    json = "{\"ratio\":2.75}";
    MCPG_CHECK(mcpg_config_parse(d->config, json, strlen(json), &c, on_problem, msg) == 1 &&
                   strcmp(msg, "ratio: must be between 0.5 and 2.5") == 0,
               "%s: %s", path, msg);
}

static void check_grown(const char *path) {
    const mcpg_module *d = load(path);
    const mcpg_lifecycle_ops *lc = d->lifecycle;
    const mcpg_backend_ops *ops = d->ops;
    MCPG_CHECK(d->abi_minor == MCPG_ABI_MINOR, "%s: minor %u", path, d->abi_minor);
    MCPG_CHECK(MCPG_HAS(d, grown_field) && !strcmp(d->grown_field, "grown"), "%s: grown_field",
               path);
    MCPG_CHECK(MCPG_HAS(lc, grown_slot) && MCPG_HAS(ops, grown_slot), "%s: the grown slots", path);
    const mcpg_config_field *f = mcpg_config_first(d->config);
    MCPG_CHECK(f && f->size == sizeof(mcpg_config_field) && MCPG_HAS_FIELD(f, grown_step) &&
                   !mcpg_config_next(f),
               "%s: one grown schema entry", path);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 4, "usage: %s V1_0.so GOOD.so GROWN.so", argv[0]);
    MCPG_REQUIRE(sizeof(mcpg_lifecycle_ops) > offsetof(mcpg_lifecycle_ops, worker_stop) +
                                                   sizeof(void (*)(void)),
                 "built against the grown headers");
    check_older(argv[1]);
    check_v1_0_schema(argv[1]);
    check_older(argv[2]);
    check_grown(argv[3]);
    return MCPG_CHECK_EXIT("abi_growth_check");
}
