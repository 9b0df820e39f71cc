/* `mcpg --help-module NAME`: a module's own description of itself, printed
 * from the same declarative table the manifest is checked against, so the
 * help can never disagree with what --check accepts. `gateway` and `cluster`
 * print the gateway's own settings, from its tables (kernel/settings.c). */
#include "kernel.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *type_name(uint32_t t) {
    switch (t) {
    case MCPG_CFG_BOOL: return "boolean";
    case MCPG_CFG_INT: return "integer";
    case MCPG_CFG_DOUBLE: return "number";
    case MCPG_CFG_STRING: return "string";
    case MCPG_CFG_JSON: return "JSON";
    case MCPG_CFG_ENUM: return "one of";
    default: return "?";
    }
}

static void print_field(const mcpg_config_field *f) {
    printf("  %s (%s", f->key, type_name(f->type));
    if (f->type == MCPG_CFG_ENUM && f->enum_values) printf(" %s", f->enum_values);
    if (f->type == MCPG_CFG_INT && f->min < f->max)
        printf(", %lld..%lld", (long long)f->min, (long long)f->max);
    if (f->type == MCPG_CFG_DOUBLE && f->dmin < f->dmax) printf(", %g..%g", f->dmin, f->dmax);
    if (f->flags & MCPG_CFG_REQUIRED) printf(", required");
    else if (f->default_json) printf(", default %s", f->default_json);
    printf(")\n      %s\n", f->help ? f->help : "");
}

static void print_module(const image *im) {
    const mcpg_module *d = im->desc;
    printf("%s %s: %s module, ABI %u.%u\n", d->name, d->version ? d->version : "?",
           kind_name(d->kind), d->abi_major, d->abi_minor);
    if (d->description) printf("  %s\n", d->description);
    if (d->flags & MCPG_MOD_NEVER_BLOCKS)
        printf("  runs on the loop by default (never blocks); \"inline_dispatch\": false puts it "
               "on the pool\n");
    else if (d->flags & MCPG_MOD_INLINE_SAFE)
        printf("  runs on the pool by default; may be dispatched inline (inline_dispatch: true)\n");
    if (d->flags & MCPG_MOD_OWNS_THREADS) printf("  starts threads of its own\n");
    if (d->flags & MCPG_MOD_DURABLE) printf("  durable: a call waits until its events are on disk\n");
    printf("  file: %s\n", im->src_path);
    const mcpg_config_field *first = mcpg_config_first(d->config);
    if (!first) {
        printf("config: no keys\n");
        return;
    }
    printf("config (%s):\n", d->kind == MCPG_KIND_TRANSPORT ? "gateway.server" : "modules[].config");
    for (const mcpg_config_field *f = first; f; f = mcpg_config_next(f)) print_field(f);
}

/* The gateway's own settings (kernel/settings.c) when name is "gateway" or
 * "cluster": that object's and those nested in it; false for any other name. */
static bool print_settings(const char *name) {
    size_t n = strlen(name);
    bool found = false;
    for (const settings_section *s = settings_sections; s->path; s++) {
        if (strncmp(s->path, name, n) != 0 || (s->path[n] && s->path[n] != '.')) continue;
        if (!found) printf("%s: the gateway's own settings, the manifest's \"%s\" object\n", name, name);
        found = true;
        printf("settings (%s):\n", s->path);
        for (const mcpg_config_field *f = mcpg_config_first(s->fields); f; f = mcpg_config_next(f))
            print_field(f);
    }
    return found;
}

int module_help(const char *name, const char *exe_dir) {
    if (print_settings(name)) return 0;
    char run[PATH_MAX];
    const char *tmp = getenv("TMPDIR");
    snprintf(run, sizeof run, "%s/mcpg-help-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(run)) {
        perror("mcpg: cannot create a temporary folder");
        return 1;
    }
    char err[1024];
    char *dir = manifest_module_dir(NULL, exe_dir, NULL); /* the gateway's default folder */
    image *im = dir ? image_load(dir, name, run, NULL, NULL, err, sizeof err) : NULL;
    if (!dir) snprintf(err, sizeof err, "out of memory");
    free(dir);
    int rc = 0;
    if (im) {
        print_module(im);
        image_unload(im);
    } else {
        fprintf(stderr, "mcpg: %s\n", err);
        rc = 2;
    }
    rmdir(run);
    return rc;
}
