/* One check of a module descriptor, used by the kernel's loader and by the
 * fake host alike, so a module that passes its unit tests loads in the
 * gateway, and the reasons it is refused read the same in both. */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>

const char *mcpg_kind_name(uint32_t kind) {
    static const char *const names[] = {NULL, "transport", "identity", "policy", "limits",
                                        "audit", "coordinator", "events", "backend", "metrics",
                                        "telemetry"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : NULL;
}

typedef struct op_rule {
    const char *name;
    size_t offset;
} op_rule;

#define OP(type, field) {#field, offsetof(type, field)}
static const op_rule transport_ops[] = {OP(mcpg_transport_ops, conn_adopt),
                                        OP(mcpg_transport_ops, drain),
                                        OP(mcpg_transport_ops, conn_count), {NULL, 0}};
static const op_rule identity_ops[] = {OP(mcpg_identity_ops, authenticate), {NULL, 0}};
static const op_rule policy_ops[] = {OP(mcpg_policy_ops, check), {NULL, 0}};
static const op_rule limits_ops[] = {OP(mcpg_limits_ops, acquire), {NULL, 0}};
static const op_rule audit_ops[] = {OP(mcpg_audit_ops, emit), {NULL, 0}};
static const op_rule coordinator_ops[] = {
    OP(mcpg_coordinator_ops, get), OP(mcpg_coordinator_ops, put),
    OP(mcpg_coordinator_ops, incr), OP(mcpg_coordinator_ops, put_if_absent),
    OP(mcpg_coordinator_ops, compare_and_set), OP(mcpg_coordinator_ops, del),
    OP(mcpg_coordinator_ops, scan_prefix), OP(mcpg_coordinator_ops, publish),
    OP(mcpg_coordinator_ops, subscribe), OP(mcpg_coordinator_ops, unsubscribe), {NULL, 0}};
static const op_rule events_ops[] = {OP(mcpg_events_ops, webhook), OP(mcpg_events_ops, request),
                                     {NULL, 0}};
static const op_rule backend_ops[] = {OP(mcpg_backend_ops, list_tools),
                                      OP(mcpg_backend_ops, call_tool), {NULL, 0}};
static const op_rule metrics_ops[] = {OP(mcpg_metrics_ops, render), {NULL, 0}};
static const op_rule telemetry_ops[] = {OP(mcpg_telemetry_ops, export_spans), {NULL, 0}};
#undef OP

/* Each kind's mandatory ops and the least size of its table (sizes.h). */
typedef struct kind_rule {
    const op_rule *ops;
    size_t size_1_0;
} kind_rule;

static const kind_rule kind_rules[] = {
    [MCPG_KIND_TRANSPORT] = {transport_ops, MCPG_TRANSPORT_OPS_SIZE_1_0},
    [MCPG_KIND_IDENTITY] = {identity_ops, MCPG_IDENTITY_OPS_SIZE_1_0},
    [MCPG_KIND_POLICY] = {policy_ops, MCPG_POLICY_OPS_SIZE_1_0},
    [MCPG_KIND_LIMITS] = {limits_ops, MCPG_LIMITS_OPS_SIZE_1_0},
    [MCPG_KIND_AUDIT] = {audit_ops, MCPG_AUDIT_OPS_SIZE_1_0},
    [MCPG_KIND_COORDINATOR] = {coordinator_ops, MCPG_COORDINATOR_OPS_SIZE_1_0},
    [MCPG_KIND_EVENTS] = {events_ops, MCPG_EVENTS_OPS_SIZE_1_0},
    [MCPG_KIND_BACKEND] = {backend_ops, MCPG_BACKEND_OPS_SIZE_1_0},
    [MCPG_KIND_METRICS] = {metrics_ops, MCPG_METRICS_OPS_SIZE_1_0},
    [MCPG_KIND_TELEMETRY] = {telemetry_ops, MCPG_TELEMETRY_OPS_SIZE_1_0},
};

/* What a config field of each type occupies in the module's config struct. */
static size_t config_type_size(uint32_t type) {
    switch (type) {
    case MCPG_CFG_BOOL: return sizeof(int);
    case MCPG_CFG_INT: return sizeof(int64_t);
    case MCPG_CFG_DOUBLE: return sizeof(double);
    case MCPG_CFG_STRING:
    case MCPG_CFG_JSON:
    case MCPG_CFG_ENUM: return sizeof(const char *);
    default: return 0;
    }
}

/* A schema is walked by each entry's own size, so a size too small to hold
 * the 1.0 fields (a table not written with the SDK's macros), or one that
 * would misalign the next entry, is refused before the walk relies on it.
 * The host allocates config_size bytes and the parser writes at each field's
 * offset: a field outside the struct (a module that forgot to set
 * config_size) would overwrite the host's heap. */
static int check_config_field(const mcpg_module *d, const mcpg_config_field *f, char *err,
                              size_t errcap) {
    const size_t align = MCPG__ALIGNOF(mcpg_config_field);
    if (f->size < MCPG_CONFIG_FIELD_SIZE_1_0 || f->size % align) {
        snprintf(err, errcap,
                 "config field \"%s\" has size %u, ABI 1.0 needs at least %zu in steps of %zu "
                 "(write the schema with the MCPG_CFG_*_FIELD macros)",
                 f->key, f->size, (size_t)MCPG_CONFIG_FIELD_SIZE_1_0, align);
        return MCPG_EABI;
    }
    size_t n = config_type_size(f->type);
    if (!n) {
        snprintf(err, errcap, "config field \"%s\" has unknown type %u", f->key, f->type);
        return MCPG_EABI;
    }
    if (f->offset > d->config_size || n > d->config_size - f->offset) {
        snprintf(err, errcap,
                 "config field \"%s\" (offset %zu, %zu bytes) lies outside config_size %u",
                 f->key, f->offset, n, d->config_size);
        return MCPG_EABI;
    }
    return 0;
}

static int check_config_schema(const mcpg_module *d, char *err, size_t errcap) {
    for (const mcpg_config_field *f = d->config; f && f->key;
         f = (const mcpg_config_field *)(const void *)((const char *)f + f->size)) {
        int rc = check_config_field(d, f, err, errcap);
        if (rc) return rc;
    }
    return 0;
}

/* A function-pointer slot at `offset` is set, read only if the table's own
 * size covers it. */
static int slot_set(const mcpg_ops_header *h, size_t offset) {
    void *fn = NULL;
    if (offset + sizeof fn > h->size) return 0;
    memcpy(&fn, (const char *)h + offset, sizeof fn);
    return fn != NULL;
}

static int check_ops(const mcpg_module *d, char *err, size_t errcap) {
    const size_t n_kinds = sizeof kind_rules / sizeof kind_rules[0];
    const kind_rule *k = d->kind < n_kinds ? &kind_rules[d->kind] : NULL;
    const mcpg_ops_header *h = d->ops;
    const char *kind = mcpg_kind_name(d->kind);
    if (!k || !k->ops) {
        snprintf(err, errcap, "no ops rules for module kind %u", d->kind);
        return MCPG_EABI;
    }
    if (!h) {
        snprintf(err, errcap, "%s ops table is missing", kind);
        return MCPG_EABI;
    }
    if (h->size < k->size_1_0) {
        snprintf(err, errcap, "%s ops table is %u bytes, ABI 1.0 needs at least %zu", kind,
                 h->size, k->size_1_0);
        return MCPG_EABI;
    }
    for (const op_rule *r = k->ops; r->name; r++) {
        if (!slot_set(h, r->offset)) {
            snprintf(err, errcap, "mandatory op %s.%s is missing", kind, r->name);
            return MCPG_EABI;
        }
    }
    return 0;
}

static int check_lifecycle(const mcpg_lifecycle_ops *lc, char *err, size_t errcap) {
    if (!lc) {
        snprintf(err, errcap, "lifecycle table is missing");
    } else if (lc->size < MCPG_LIFECYCLE_OPS_SIZE_1_0) {
        snprintf(err, errcap, "lifecycle table is %u bytes, ABI 1.0 needs at least %zu",
                 lc->size, (size_t)MCPG_LIFECYCLE_OPS_SIZE_1_0);
    } else if (!MCPG_HAS(lc, create) || !MCPG_HAS(lc, destroy)) {
        snprintf(err, errcap, "mandatory op lifecycle.%s is missing",
                 !MCPG_HAS(lc, create) ? "create" : "destroy");
    } else {
        return 0;
    }
    return MCPG_EABI;
}

/* The fields every version has (magic, the ABI version, size) first; the
 * rest only once the size says the descriptor holds them. */
static int check_head(const mcpg_module *d, char *err, size_t errcap) {
    if (!d) {
        snprintf(err, errcap, "no descriptor");
    } else if (d->magic != MCPG_MODULE_MAGIC) {
        snprintf(err, errcap, "bad magic 0x%08x (expected 0x%08x)", d->magic, MCPG_MODULE_MAGIC);
    } else if (d->abi_major != MCPG_ABI_MAJOR) {
        snprintf(err, errcap, "ABI major %u, this kernel is %u: rebuild the module against ABI %u.x",
                 d->abi_major, MCPG_ABI_MAJOR, MCPG_ABI_MAJOR);
    } else if (d->abi_minor > MCPG_ABI_MINOR) {
        snprintf(err, errcap, "built for ABI %u.%u, this kernel is %u.%u (minor too new)",
                 d->abi_major, d->abi_minor, MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    } else if (d->size < MCPG_MODULE_SIZE_1_0) {
        snprintf(err, errcap, "descriptor is %u bytes, ABI 1.0 needs at least %zu", d->size,
                 (size_t)MCPG_MODULE_SIZE_1_0);
    } else if (!mcpg_kind_name(d->kind)) {
        snprintf(err, errcap, "unknown module kind %u", d->kind);
    } else if (!d->name || !*d->name) {
        snprintf(err, errcap, "the descriptor has no name");
    } else {
        return 0;
    }
    return MCPG_EABI;
}

/* NEVER_BLOCKS puts a backend on the loop by default: only a backend that
 * also says it is safe there may declare it. */
static int check_flags(const mcpg_module *d, char *err, size_t errcap) {
    if (!(d->flags & MCPG_MOD_NEVER_BLOCKS)) return 0;
    if (d->kind != MCPG_KIND_BACKEND)
        snprintf(err, errcap, "declares MCPG_MOD_NEVER_BLOCKS but is a module of kind %s (backends only)",
                 mcpg_kind_name(d->kind));
    else if (!(d->flags & MCPG_MOD_INLINE_SAFE))
        snprintf(err, errcap, "declares MCPG_MOD_NEVER_BLOCKS without MCPG_MOD_INLINE_SAFE "
                              "(a backend that never blocks is safe on the loop: declare both)");
    else
        return 0;
    return MCPG_EABI;
}

int mcpg_module_check(const mcpg_module *d, char *err, size_t errcap) {
    int rc = check_head(d, err, errcap);
    if (!rc) rc = check_flags(d, err, errcap);
    if (!rc) rc = check_lifecycle(d->lifecycle, err, errcap);
    if (!rc) rc = check_config_schema(d, err, errcap);
    if (!rc) rc = check_ops(d, err, errcap);
    return rc;
}
