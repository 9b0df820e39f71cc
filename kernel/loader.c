/* The module loader: copy-on-load, dlopen, ABI and mandatory-op checks.
 *
 * Each module file is copied into the private runtime folder under a name
 * made of its content hash (<name>.<hash>.so) and that copy is dlopen'd with
 * RTLD_NOW|RTLD_LOCAL: dlopen of a path already loaded would hand back the old
 * image, and a rebuilt file must never replace code that is running. */
#include "kernel.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *kind_name(uint32_t kind) {
    switch (kind) {
    case MCPG_KIND_TRANSPORT: return "transport";
    case MCPG_KIND_IDENTITY: return "identity";
    case MCPG_KIND_POLICY: return "policy";
    case MCPG_KIND_LIMITS: return "limits";
    case MCPG_KIND_AUDIT: return "audit";
    case MCPG_KIND_COORDINATOR: return "coordinator";
    case MCPG_KIND_EVENTS: return "events";
    case MCPG_KIND_BACKEND: return "backend";
    case MCPG_KIND_METRICS: return "metrics";
    default: return NULL;
    }
}

/* Copy src to dst while hashing it (FNV-1a 64): the hash names the copy. */
static int copy_hashed(const char *src, const char *runtime_dir, const char *name,
                       char *dst, size_t dstcap, char *err, size_t errcap) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf(err, errcap, "%s: cannot open: %s", src, strerror(errno));
        return -1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/.%s.%d.tmp", runtime_dir, name, (int)getpid());
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    if (out < 0) {
        snprintf(err, errcap, "%s: cannot write %s: %s", src, tmp, strerror(errno));
        close(in);
        return -1;
    }
    uint64_t h = 1469598103934665603ull;
    char buf[65536];
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
        if (write(out, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
    }
    if (n < 0) rc = -1;
    close(in);
    if (close(out) != 0) rc = -1;
    if (rc) {
        snprintf(err, errcap, "%s: copy to %s failed: %s", src, runtime_dir, strerror(errno));
        unlink(tmp);
        return -1;
    }
    snprintf(dst, dstcap, "%s/%s.%016llx.so", runtime_dir, name, (unsigned long long)h);
    if (rename(tmp, dst) != 0) {
        snprintf(err, errcap, "%s: cannot place %s: %s", src, dst, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
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

/* The kernel allocates config_size bytes and the schema's parser writes at
 * each field's offset: a field outside the struct (a module that forgot to
 * set config_size) would overwrite the kernel's heap. */
static int check_config_schema(const char *file, const mcpg_module *d, char *err,
                               size_t errcap) {
    for (const mcpg_config_field *f = d->config; f && f->key; f++) {
        size_t n = config_type_size(f->type);
        if (!n) {
            snprintf(err, errcap, "%s: config field \"%s\" has unknown type %u", file, f->key,
                     f->type);
            return -1;
        }
        if (f->offset > d->config_size || n > d->config_size - f->offset) {
            snprintf(err, errcap,
                     "%s: config field \"%s\" (offset %zu, %zu bytes) lies outside config_size %u",
                     file, f->key, f->offset, n, d->config_size);
            return -1;
        }
    }
    return 0;
}

static int check_descriptor(const char *file, const char *stem, const mcpg_module *d,
                            char *err, size_t errcap) {
    if (d->magic != MCPG_MODULE_MAGIC) {
        snprintf(err, errcap, "%s: bad magic 0x%08x (expected 0x%08x)", file, d->magic,
                 MCPG_MODULE_MAGIC);
        return -1;
    }
    if (d->abi_major != MCPG_ABI_MAJOR) {
        snprintf(err, errcap, "%s: ABI major %u, this kernel is %u: rebuild the module against ABI %u.x",
                 file, d->abi_major, MCPG_ABI_MAJOR, MCPG_ABI_MAJOR);
        return -1;
    }
    if (d->abi_minor > MCPG_ABI_MINOR) {
        snprintf(err, errcap, "%s: built for ABI %u.%u, this kernel is %u.%u (minor too new)", file,
                 d->abi_major, d->abi_minor, MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
        return -1;
    }
    if (d->size < sizeof(mcpg_module)) {
        snprintf(err, errcap, "%s: descriptor is %u bytes, ABI 1.0 needs at least %zu", file,
                 d->size, sizeof(mcpg_module));
        return -1;
    }
    if (!kind_name(d->kind)) {
        snprintf(err, errcap, "%s: unknown module kind %u", file, d->kind);
        return -1;
    }
    if (!d->name || strcmp(d->name, stem) != 0) {
        snprintf(err, errcap, "%s: declares name \"%s\", expected \"%s\" (the file name)", file,
                 d->name ? d->name : "(null)", stem);
        return -1;
    }
    const mcpg_lifecycle_ops *lc = d->lifecycle;
    if (!lc || lc->size < sizeof(mcpg_lifecycle_ops) || !lc->create || !lc->destroy) {
        snprintf(err, errcap, "%s: mandatory op lifecycle.%s is missing", file,
                 !lc ? "(table)" : (!lc->create ? "create" : "destroy"));
        return -1;
    }
    const op_rule *rules;
    size_t need = kind_ops_size(d->kind, &rules);
    const mcpg_ops_header *h = d->ops;
    if (!h || h->size < need) {
        snprintf(err, errcap, "%s: %s ops table is %s (ABI 1.0 needs %zu bytes)", file,
                 kind_name(d->kind), h ? "too small" : "missing", need);
        return -1;
    }
    for (const op_rule *r = rules; r->name; r++) {
        void *fn;
        memcpy(&fn, (const char *)h + r->offset, sizeof fn);
        if (!fn) {
            snprintf(err, errcap, "%s: mandatory op %s.%s is missing", file, kind_name(d->kind),
                     r->name);
            return -1;
        }
    }
    return check_config_schema(file, d, err, errcap);
}

image *image_load(const char *dir, const char *name, const char *runtime_dir, char *err,
                  size_t errcap) {
    char src[4096], run[4096];
    snprintf(src, sizeof src, "%s/%s.so", dir, name);
    struct stat st;
    if (stat(src, &st) != 0) {
        snprintf(err, errcap, "no module \"%s\" in %s", name, dir);
        return NULL;
    }
    if (copy_hashed(src, runtime_dir, name, run, sizeof run, err, errcap)) return NULL;
    void *dl = dlopen(run, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        snprintf(err, errcap, "%s: dlopen failed: %s", src, dlerror());
        unlink(run);
        return NULL;
    }
    mcpg_module_entry_fn entry;
    void *sym = dlsym(dl, MCPG_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    if (!entry) {
        snprintf(err, errcap, "%s: no symbol %s (not an mcpg module)", src, MCPG_ENTRY_SYMBOL);
        dlclose(dl);
        unlink(run);
        return NULL;
    }
    const mcpg_module *d = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);
    if (!d) {
        snprintf(err, errcap, "%s: %s returned no descriptor", src, MCPG_ENTRY_SYMBOL);
    } else if (check_descriptor(src, name, d, err, errcap) == 0) {
        image *im = calloc(1, sizeof *im);
        if (im) {
            im->name = strdup(name);
            im->src_path = strdup(src);
            im->run_path = strdup(run);
            im->dl = dl;
            im->desc = d;
            return im;
        }
        snprintf(err, errcap, "%s: out of memory", src);
    }
    dlclose(dl);
    unlink(run);
    return NULL;
}

/* dlclose, then prove the image is gone (RTLD_NOLOAD) before deleting the
 * copy: a copy deleted while mapped leaves core files without symbols. */
void image_unload(image *im) {
    if (!im) return;
    dlclose(im->dl);
    void *still = dlopen(im->run_path, RTLD_NOW | RTLD_NOLOAD);
    if (still) {
        klog(MCPG_LOG_WARN, "kernel", "module image %s is still mapped after dlclose (pinned)",
             im->run_path);
        dlclose(still);
    } else {
        unlink(im->run_path);
    }
    free(im->name);
    free(im->src_path);
    free(im->run_path);
    free(im);
}
