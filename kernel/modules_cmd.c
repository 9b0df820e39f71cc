/* `mcpg modules`: what the module folder holds, one line per module file,
 * read from each module's own descriptor with the loader's checks, so a
 * file listed as a module is one the gateway would load. A file that is no
 * loadable module gets a line saying why, and the listing goes on.
 *
 *   mcpg modules [--module-dir DIR | --config FILE] [--hash] [--json]
 *
 * --hash adds each file's SHA-256 (what a manifest's "sha256" pins); --json
 * always carries it.
 * Each file is dlopen'd in place (RTLD_LAZY: only the entry point is
 * called) and closed once its descriptor is read. */
#include "kernel.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct modules_opts {
    const char *module_dir;
    const char *config;
    bool json;
    bool hash;
} modules_opts;

static void modules_usage(FILE *f) {
    fprintf(f, "usage: mcpg modules [--module-dir DIR | --config FILE] [--hash] [--json]\n"
               "  lists the modules in DIR, else in the manifest's gateway.module_dir,\n"
               "  else in the folder beside the binary; --hash adds each file's SHA-256\n"
               "  (the value a manifest's \"sha256\" pins)\n");
}

static int parse_modules_args(int argc, char **argv, modules_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--hash") == 0) {
            o->hash = true;
        } else if (strcmp(a, "--module-dir") == 0 && i + 1 < argc) {
            o->module_dir = argv[++i];
        } else if ((strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) && i + 1 < argc) {
            o->config = argv[++i];
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            modules_usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "mcpg modules: unknown or incomplete argument \"%s\"\n", a);
            modules_usage(stderr);
            return -1;
        }
    }
    return 0;
}

/* <name>.<16 hex digits>.so is a copy the loader made (runtime folders use
 * that name), not a module of its own. */
static bool is_runtime_copy(const char *stem) {
    const char *dot = strrchr(stem, '.');
    if (!dot || strlen(dot + 1) != 16) return false;
    return strspn(dot + 1, "0123456789abcdef") == 16;
}

/* A module file's stem (the name before .so), or false for any other entry. */
static bool module_stem(const char *file, char *stem, size_t cap) {
    size_t n = strlen(file);
    if (file[0] == '.' || n <= 3 || n - 3 >= cap || strcmp(file + n - 3, ".so") != 0) return false;
    memcpy(stem, file, n - 3);
    stem[n - 3] = '\0';
    return !is_runtime_copy(stem);
}

typedef struct module_row {
    char name[256];
    char file[4096];
    char sha256[65];      /* empty when the file cannot be read */
    const mcpg_module *d; /* NULL: not loadable, why is in err */
    char err[8192];
} module_row;

/* Where a backend's calls run when its manifest entry has no
 * "inline_dispatch" key: "loop" for one that never blocks, else "pool". */
static const char *default_dispatch(const mcpg_module *d) {
    return d->flags & MCPG_MOD_NEVER_BLOCKS ? "loop" : "pool";
}

#define NEVER_BLOCKS_NOTE "runs on the loop by default (never blocks)"

static void print_json(const module_row *r) {
    json_t *o = json_pack("{s:s, s:s}", "name", r->name, "file", r->file);
    if (r->sha256[0]) json_object_set_new(o, "sha256", json_string(r->sha256));
    if (r->d) {
        char abi[32];
        snprintf(abi, sizeof abi, "%u.%u", r->d->abi_major, r->d->abi_minor);
        json_object_set_new(o, "kind", json_string(kind_name(r->d->kind)));
        json_object_set_new(o, "abi", json_string(abi));
        json_object_set_new(o, "version", json_string(r->d->version ? r->d->version : ""));
        json_object_set_new(o, "description",
                            json_string(r->d->description ? r->d->description : ""));
        if (r->d->kind == MCPG_KIND_BACKEND)
            json_object_set_new(o, "dispatch", json_string(default_dispatch(r->d)));
    } else {
        json_object_set_new(o, "error", json_string(r->err));
    }
    char *text = json_dumps(o, JSON_COMPACT);
    if (text) puts(text);
    free(text);
    json_decref(o);
}

#define NAME_WIDTH 20
#define KIND_WIDTH 12
#define VERSION_WIDTH 8

#define SHA256_WIDTH 64

static void print_header(bool hash) {
    printf("%-*s ", NAME_WIDTH, "NAME");
    if (hash) printf("%-*s ", SHA256_WIDTH, "SHA256");
    printf("%-*s %-4s %-*s %s\n", KIND_WIDTH, "KIND", "ABI", VERSION_WIDTH, "VERSION",
           "DESCRIPTION");
}

static void print_text(const module_row *r, bool hash) {
    printf("%-*s ", NAME_WIDTH, r->name);
    if (hash) printf("%-*s ", SHA256_WIDTH, r->sha256[0] ? r->sha256 : "?");
    if (!r->d) {
        printf("not a loadable module: %s\n", r->err);
        return;
    }
    char abi[32];
    snprintf(abi, sizeof abi, "%u.%u", r->d->abi_major, r->d->abi_minor);
    printf("%-*s %-4s %-*s %s", KIND_WIDTH, kind_name(r->d->kind), abi, VERSION_WIDTH,
           r->d->version ? r->d->version : "?", r->d->description ? r->d->description : "");
    if (r->d->flags & MCPG_MOD_NEVER_BLOCKS) printf(" [%s]", NEVER_BLOCKS_NOTE);
    putchar('\n');
}

/* Open one file, read its descriptor, print its line, close it. */
static void list_one(const char *dir, const char *stem, const modules_opts *o) {
    module_row r = {0};
    snprintf(r.name, sizeof r.name, "%s", stem);
    snprintf(r.file, sizeof r.file, "%s/%s.so", dir, stem);
    if ((o->hash || o->json) && file_sha256(r.file, r.sha256) != 0) r.sha256[0] = '\0';
    void *dl = dlopen(r.file, RTLD_LAZY | RTLD_LOCAL);
    if (!dl) snprintf(r.err, sizeof r.err, "%s: dlopen failed: %s", r.file, dlerror());
    else r.d = module_descriptor(dl, r.file, stem, r.err, sizeof r.err);
    if (o->json) print_json(&r);
    else print_text(&r, o->hash);
    if (dl) dlclose(dl); /* after printing: the descriptor's strings live in the image */
}

static char *chosen_dir(const modules_opts *o, const char *exe_dir) {
    if (o->module_dir) return strdup(o->module_dir);
    errlist errs = {0};
    char *dir = manifest_module_dir(o->config, exe_dir, &errs);
    errlist_print(&errs);
    errlist_free(&errs);
    return dir;
}

int modules_command(int argc, char **argv, const char *exe_dir) {
    modules_opts o = {0};
    if (parse_modules_args(argc, argv, &o)) return 2;
    char *dir = chosen_dir(&o, exe_dir);
    if (!dir) return 2;
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "mcpg modules: cannot read the module folder %s: %s\n", dir, strerror(errno));
        free(dir);
        return 2;
    }
    if (!o.json) print_header(o.hash);
    for (int i = 0; i < n; i++) {
        char stem[256];
        if (module_stem(names[i]->d_name, stem, sizeof stem)) list_one(dir, stem, &o);
        free(names[i]);
    }
    free(names);
    free(dir);
    return 0;
}
