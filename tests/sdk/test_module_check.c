/* Unit tests of mcpg_module_check (sdk/src/module_check.c), the one check of
 * a descriptor the loader and the fake host share: every table is accepted
 * at exactly its ABI 1.0 size and refused one byte short, with a message
 * naming the table and both sizes. The tables here are heap blocks of exactly
 * the size they declare, so under AddressSanitizer a check that read one
 * byte past a table would fail the test. */
#include <mcpg/check.h>
#include <mcpg/sdk.h>

#include <stdlib.h>
#include <string.h>

static void noop(void) {}

/* A heap table of `size` bytes: {size, version 1}, every slot after the
 * header set to a function. */
static void *table_new(size_t size) {
    unsigned char *t = calloc(1, size);
    MCPG_REQUIRE(t != NULL, "calloc %zu", size);
    uint32_t head[2] = {(uint32_t)size, 1};
    memcpy(t, head, sizeof head);
    void (*fn)(void) = noop;
    for (size_t at = sizeof head; at + sizeof fn <= size; at += sizeof fn)
        memcpy(t + at, &fn, sizeof fn);
    return t;
}

typedef struct fixture {
    mcpg_module *d;
    mcpg_lifecycle_ops *lc;
    void *ops;
    char err[256];
} fixture;

/* A descriptor of kind `kind` whose three tables are their kind's 1.0 sizes
 * (or `ops_size` for the ops table). */
static fixture make(uint32_t kind, size_t ops_size) {
    fixture f = {0};
    f.d = calloc(1, MCPG_MODULE_SIZE_1_0);
    MCPG_REQUIRE(f.d != NULL, "calloc");
    f.d->magic = MCPG_MODULE_MAGIC;
    f.d->abi_major = MCPG_ABI_MAJOR;
    f.d->abi_minor = MCPG_ABI_MINOR;
    f.d->size = (uint32_t)MCPG_MODULE_SIZE_1_0;
    f.d->kind = kind;
    f.d->name = "backend_t";
    f.lc = table_new(MCPG_LIFECYCLE_OPS_SIZE_1_0);
    f.ops = table_new(ops_size);
    f.d->lifecycle = f.lc;
    f.d->ops = f.ops;
    return f;
}

static void drop(fixture *f) {
    free(f->d);
    free(f->lc);
    free(f->ops);
}

static int check(fixture *f) {
    f->err[0] = '\0';
    return mcpg_module_check(f->d, f->err, sizeof f->err);
}

static const struct {
    uint32_t kind;
    size_t size_1_0;
} kinds[] = {
    {MCPG_KIND_TRANSPORT, MCPG_TRANSPORT_OPS_SIZE_1_0},
    {MCPG_KIND_IDENTITY, MCPG_IDENTITY_OPS_SIZE_1_0},
    {MCPG_KIND_POLICY, MCPG_POLICY_OPS_SIZE_1_0},
    {MCPG_KIND_LIMITS, MCPG_LIMITS_OPS_SIZE_1_0},
    {MCPG_KIND_AUDIT, MCPG_AUDIT_OPS_SIZE_1_0},
    {MCPG_KIND_COORDINATOR, MCPG_COORDINATOR_OPS_SIZE_1_0},
    {MCPG_KIND_EVENTS, MCPG_EVENTS_OPS_SIZE_1_0},
    {MCPG_KIND_BACKEND, MCPG_BACKEND_OPS_SIZE_1_0},
    {MCPG_KIND_METRICS, MCPG_METRICS_OPS_SIZE_1_0},
};

static void test_every_kind_at_its_1_0_size(void) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const char *name = mcpg_kind_name(kinds[i].kind);
        fixture f = make(kinds[i].kind, kinds[i].size_1_0);
        MCPG_CHECK(check(&f) == 0, "%s ops at %zu bytes: %s", name, kinds[i].size_1_0, f.err);
        ((mcpg_ops_header *)f.ops)->size = (uint32_t)kinds[i].size_1_0 - 1;
        char want[128];
        snprintf(want, sizeof want, "%s ops table is %zu bytes, ABI 1.0 needs at least %zu", name,
                 kinds[i].size_1_0 - 1, kinds[i].size_1_0);
        MCPG_CHECK(check(&f) == MCPG_EABI && strcmp(f.err, want) == 0, "%s: \"%s\"", name, f.err);
        drop(&f);
    }
}

static void test_slots_past_1_0(void) {
    fixture f = make(MCPG_KIND_BACKEND, MCPG_BACKEND_OPS_SIZE_1_0);
    const mcpg_backend_ops *ops = f.ops;
    MCPG_CHECK(check(&f) == 0, "%s", f.err);
    MCPG_CHECK(MCPG_HAS(f.lc, destroy) && !MCPG_HAS_FIELD(f.lc, worker_start) &&
                   !MCPG_HAS(f.lc, worker_stop),
               "a 1.0 lifecycle has no worker_start/worker_stop");
    MCPG_CHECK(MCPG_HAS(ops, call_tool) && !MCPG_HAS_FIELD(ops, list_resources) &&
                   !MCPG_HAS(ops, cancel),
               "a 1.0 backend table ends at call_tool");
    memset(&f.lc->create, 0, sizeof f.lc->create);
    MCPG_CHECK(check(&f) == MCPG_EABI && !strcmp(f.err, "mandatory op lifecycle.create is missing"),
               "%s", f.err);
    drop(&f);
}

static void test_short_tables(void) {
    fixture f = make(MCPG_KIND_BACKEND, MCPG_BACKEND_OPS_SIZE_1_0);
    char want[128];
    f.lc->size = (uint32_t)MCPG_LIFECYCLE_OPS_SIZE_1_0 - 1;
    snprintf(want, sizeof want, "lifecycle table is %zu bytes, ABI 1.0 needs at least %zu",
             (size_t)MCPG_LIFECYCLE_OPS_SIZE_1_0 - 1, (size_t)MCPG_LIFECYCLE_OPS_SIZE_1_0);
    MCPG_CHECK(check(&f) == MCPG_EABI && !strcmp(f.err, want), "\"%s\"", f.err);
    f.lc->size = (uint32_t)MCPG_LIFECYCLE_OPS_SIZE_1_0;
    f.d->size = (uint32_t)MCPG_MODULE_SIZE_1_0 - 1;
    snprintf(want, sizeof want, "descriptor is %zu bytes, ABI 1.0 needs at least %zu",
             (size_t)MCPG_MODULE_SIZE_1_0 - 1, (size_t)MCPG_MODULE_SIZE_1_0);
    MCPG_CHECK(check(&f) == MCPG_EABI && !strcmp(f.err, want), "\"%s\"", f.err);
    f.d->size = (uint32_t)MCPG_MODULE_SIZE_1_0;
    f.d->abi_minor = MCPG_ABI_MINOR + 1;
    snprintf(want, sizeof want, "built for ABI %d.%d, this kernel is %d.%d (minor too new)",
             MCPG_ABI_MAJOR, MCPG_ABI_MINOR + 1, MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    MCPG_CHECK(check(&f) == MCPG_EABI && !strcmp(f.err, want), "\"%s\"", f.err);
    drop(&f);
}

typedef struct cfg {
    int64_t n;
    double x;
} cfg;

static void test_schema_entries(void) {
    mcpg_config_field schema[] = {
        MCPG_CFG_INT_FIELD(cfg, n, "n", "1", 0, 9, "an int"),
        MCPG_CFG_DOUBLE_FIELD(cfg, x, "x", "0.5", 0.25, 0.75, "a double"), MCPG_CONFIG_END};
    fixture f = make(MCPG_KIND_BACKEND, MCPG_BACKEND_OPS_SIZE_1_0);
    f.d->config = schema;
    f.d->config_size = sizeof(cfg);
    MCPG_CHECK(check(&f) == 0, "%s", f.err);
    char want[256];
    snprintf(want, sizeof want,
             "config field \"x\" has size 0, ABI 1.0 needs at least %zu in steps of %zu",
             (size_t)MCPG_CONFIG_FIELD_SIZE_1_0, (size_t)_Alignof(mcpg_config_field));
    schema[1].size = 0; /* a hand-written entry that left it out */
    MCPG_CHECK(check(&f) == MCPG_EABI && strncmp(f.err, want, strlen(want)) == 0, "\"%s\"",
               f.err);
    schema[1].size = (uint32_t)sizeof(mcpg_config_field) + 1; /* would misalign the next */
    MCPG_CHECK(check(&f) == MCPG_EABI && strstr(f.err, "config field \"x\" has size"), "\"%s\"",
               f.err);
    schema[1].size = (uint32_t)sizeof(mcpg_config_field);
    schema[1].type = 99;
    MCPG_CHECK(check(&f) == MCPG_EABI && !strcmp(f.err, "config field \"x\" has unknown type 99"),
               "\"%s\"", f.err);
    drop(&f);
}

/* MCPG_MOD_NEVER_BLOCKS puts a backend on the loop by default: only a
 * backend that is also inline-safe may say it. */
static void test_never_blocks_flag(void) {
    fixture f = make(MCPG_KIND_BACKEND, MCPG_BACKEND_OPS_SIZE_1_0);
    f.d->flags = MCPG_MOD_INLINE_SAFE | MCPG_MOD_NEVER_BLOCKS;
    MCPG_CHECK(check(&f) == 0, "an inline-safe backend that never blocks: %s", f.err);
    f.d->flags = MCPG_MOD_NEVER_BLOCKS;
    MCPG_CHECK(check(&f) == MCPG_EABI &&
                   strstr(f.err, "MCPG_MOD_NEVER_BLOCKS without MCPG_MOD_INLINE_SAFE"),
               "NEVER_BLOCKS alone: \"%s\"", f.err);
    drop(&f);
    f = make(MCPG_KIND_AUDIT, MCPG_AUDIT_OPS_SIZE_1_0);
    f.d->flags = MCPG_MOD_INLINE_SAFE | MCPG_MOD_NEVER_BLOCKS;
    MCPG_CHECK(check(&f) == MCPG_EABI && strstr(f.err, "but is a module of kind audit (backends only)"),
               "an audit sink that says NEVER_BLOCKS: \"%s\"", f.err);
    drop(&f);
}

int main(void) {
    test_every_kind_at_its_1_0_size();
    test_never_blocks_flag();
    test_slots_past_1_0();
    test_short_tables();
    test_schema_entries();
    return MCPG_CHECK_EXIT("test_module_check");
}
