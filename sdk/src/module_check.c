/* One check of a module descriptor, used by the kernel's loader and by the
 * fake host alike, so a module that passes its unit tests loads in the
 * gateway, and the reasons it is refused read the same in both. */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>

const char *mcpg_kind_name(uint32_t kind) {
    static const char *const names[] = {NULL, "transport", "identity", "policy", "limits",
                                        "audit", "coordinator", "events", "backend", "metrics"};
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
#undef OP

/* The v1.0 size of each kind's table: a module's table must be at least this. */
static size_t kind_ops_size(uint32_t kind, const op_rule **rules) {
    switch (kind) {
    case MCPG_KIND_TRANSPORT: *rules = transport_ops; return sizeof(mcpg_transport_ops);
    case MCPG_KIND_IDENTITY: *rules = identity_ops; return sizeof(mcpg_identity_ops);
    case MCPG_KIND_POLICY: *rules = policy_ops; return sizeof(mcpg_policy_ops);
    case MCPG_KIND_LIMITS: *rules = limits_ops; return sizeof(mcpg_limits_ops);
    case MCPG_KIND_AUDIT: *rules = audit_ops; return sizeof(mcpg_audit_ops);
    case MCPG_KIND_COORDINATOR: *rules = coordinator_ops; return sizeof(mcpg_coordinator_ops);
    case MCPG_KIND_EVENTS: *rules = events_ops; return sizeof(mcpg_events_ops);
    case MCPG_KIND_BACKEND: *rules = backend_ops; return sizeof(mcpg_backend_ops);
    case MCPG_KIND_METRICS: *rules = metrics_ops; return sizeof(mcpg_metrics_ops);
    default: *rules = NULL; return 0;
    }
}

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

/* The host allocates config_size bytes and the schema's parser writes at
 * each field's offset: a field outside the struct (a module that forgot to
 * set config_size) would overwrite the host's heap. */
static int check_config_schema(const mcpg_module *d, char *err, size_t errcap) {
    for (const mcpg_config_field *f = d->config; f && f->key; f++) {
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
    }
    return 0;
}

static int check_ops(const mcpg_module *d, char *err, size_t errcap) {
    const op_rule *rules;
    size_t need = kind_ops_size(d->kind, &rules);
    const mcpg_ops_header *h = d->ops;
    if (!h || h->size < need) {
        snprintf(err, errcap, "%s ops table is %s (ABI 1.0 needs %zu bytes)",
                 mcpg_kind_name(d->kind), h ? "too small" : "missing", need);
        return MCPG_EABI;
    }
    for (const op_rule *r = rules; r->name; r++) {
        void *fn;
        memcpy(&fn, (const char *)h + r->offset, sizeof fn); /* a function pointer slot */
        if (!fn) {
            snprintf(err, errcap, "mandatory op %s.%s is missing", mcpg_kind_name(d->kind),
                     r->name);
            return MCPG_EABI;
        }
    }
    return 0;
}

int mcpg_module_check(const mcpg_module *d, char *err, size_t errcap) {
    const mcpg_lifecycle_ops *lc = d ? d->lifecycle : NULL;
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
    } else if (d->size < sizeof(mcpg_module)) {
        snprintf(err, errcap, "descriptor is %u bytes, ABI 1.0 needs at least %zu", d->size,
                 sizeof(mcpg_module));
    } else if (!mcpg_kind_name(d->kind)) {
        snprintf(err, errcap, "unknown module kind %u", d->kind);
    } else if (!d->name || !*d->name) {
        snprintf(err, errcap, "the descriptor has no name");
    } else if (!lc || lc->size < sizeof(mcpg_lifecycle_ops) || !lc->create || !lc->destroy) {
        snprintf(err, errcap, "mandatory op lifecycle.%s is missing",
                 !lc || lc->size < sizeof(mcpg_lifecycle_ops) ? "(table)"
                                                              : (!lc->create ? "create" : "destroy"));
    } else {
        int rc = check_config_schema(d, err, errcap);
        return rc ? rc : check_ops(d, err, errcap);
    }
    return MCPG_EABI;
}
