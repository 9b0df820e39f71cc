/* mcpg new-module KIND NAME [DIR]: write a module folder to start from.
 *
 * The folder holds NAME.c (the descriptor and every op of the kind, the
 * mandatory ones implemented), test_NAME.c (a fake-host unit test),
 * CMakeLists.txt (out of tree, find_package(mcpg)), README.md and NAME.json
 * (a manifest that loads it). The templates are compiled into this binary
 * (sdk/new-module, embedded at build time), so an installed mcpg needs no
 * other file. */
#include "new_module.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every kind, and why the ones not generated are not: a stub of those could
 * not serve honestly (see docs/writing-a-module.md). */
static const struct kind_entry {
    const char *kind;
    const char *refused; /* NULL: generated */
} kinds[] = {
    {"backend", NULL},
    {"identity", NULL},
    {"policy", NULL},
    {"limits", NULL},
    {"audit", NULL},
    {"metrics", NULL},
    {"transport", "a transport owns the wire (HTTP parsing, sessions, streams, TLS): a stub "
                  "that loads would serve no client; start from modules/transport_http"},
    {"coordinator", "a coordinator is the fleet's store: ten asynchronous ops whose every "
                    "callback runs on a later loop turn, with revisions, TTLs and "
                    "subscriptions; a stub would break sessions and limits; start from "
                    "modules/coordinator_memory"},
    {"telemetry", "a telemetry module is a span exporter with a queue and a thread of its "
                  "own; start from modules/telemetry_otlp"},
    {"events", "the events instance is the whole MCP Events pipeline (webhooks, inbox, "
               "streams on the coordinator): a stub answering nothing is not a module to "
               "grow; start from modules/events"},
};

/* One output file: its name (NAME substituted) and the templates it joins. */
static const struct output_file {
    const char *name;
    const char *parts[2]; /* "KIND/..." is the kind's folder; NULL ends */
} outputs[] = {
    {"@NAME@.c", {"KIND/module.c.in", NULL}},
    {"test_@NAME@.c", {"KIND/test.c.in", "common/test_main.c.in"}},
    {"@NAME@.json", {"KIND/manifest.json.in", NULL}},
    {"CMakeLists.txt", {"common/CMakeLists.txt.in", NULL}},
    {"README.md", {"common/README.md.in", NULL}},
};

#define NAME_MAX_LEN 64

static void new_module_usage(FILE *f) {
    fprintf(f, "usage: mcpg new-module KIND NAME [DIR]\n"
               "  KIND: backend, identity, policy, limits, audit or metrics\n"
               "  NAME: the module's name, [a-z][a-z0-9_]{0,63}, by custom KIND_what "
               "(identity_header)\n"
               "  DIR:  the folder to write (default ./NAME); it must not hold files yet\n");
}

static const struct kind_entry *find_kind(const char *kind) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].kind, kind) == 0) return &kinds[i];
    return NULL;
}

static const new_module_template *find_template(const char *kind, const char *part) {
    char path[128];
    if (strncmp(part, "KIND/", 5) == 0) snprintf(path, sizeof path, "%s/%s", kind, part + 5);
    else snprintf(path, sizeof path, "%s", part);
    for (const new_module_template *t = new_module_templates; t->path; t++)
        if (strcmp(t->path, path) == 0) return t;
    return NULL;
}

/* The module name rule the loader applies: [a-z][a-z0-9_]{0,63}. */
static int valid_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > NAME_MAX_LEN || name[0] < 'a' || name[0] > 'z') return 0;
    for (size_t i = 1; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '_'))
            return 0;
    return 1;
}

/* 1 when path is a folder holding nothing, 0 when it holds something or is
 * not a folder, -1 when it does not exist. */
static int folder_state(const char *path) {
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? -1 : 0;
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = 0;
    closedir(d);
    return empty;
}

/* Append text to out with @NAME@, @KIND@ and @LIFECYCLE@ replaced. */
static int expand(FILE *out, const char *text, const char *kind, const char *name) {
    const char *p = text;
    while (*p) {
        const char *at = strchr(p, '@');
        if (!at) return fputs(p, out) < 0 ? -1 : 0;
        fwrite(p, 1, (size_t)(at - p), out);
        if (strncmp(at, "@NAME@", 6) == 0) {
            fputs(name, out);
            p = at + 6;
        } else if (strncmp(at, "@KIND@", 6) == 0) {
            fputs(kind, out);
            p = at + 6;
        } else if (strncmp(at, "@LIFECYCLE@", 11) == 0) {
            if (expand(out, find_template(kind, "common/lifecycle.c.in")->text, kind, name))
                return -1;
            p = at + 11;
        } else {
            fputc('@', out);
            p = at + 1;
        }
    }
    return ferror(out) ? -1 : 0;
}

/* The file's name with @NAME@ replaced, in buf. */
static void file_name(char *buf, size_t cap, const char *pattern, const char *name) {
    const char *at = strstr(pattern, "@NAME@");
    if (!at) snprintf(buf, cap, "%s", pattern);
    else snprintf(buf, cap, "%.*s%s%s", (int)(at - pattern), pattern, name, at + 6);
}

static int write_output(const char *dir, const struct output_file *o, const char *kind,
                        const char *name) {
    char base[NAME_MAX_LEN + 32], path[4096];
    file_name(base, sizeof base, o->name, name);
    snprintf(path, sizeof path, "%s/%s", dir, base);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f) {
        fprintf(stderr, "mcpg new-module: %s: %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < 2 && o->parts[i] && rc == 0; i++)
        rc = expand(f, find_template(kind, o->parts[i])->text, kind, name);
    if (fclose(f) != 0) rc = -1;
    if (rc) fprintf(stderr, "mcpg new-module: %s: write failed: %s\n", path, strerror(errno));
    else printf("  %s\n", path);
    return rc;
}

/* The kind and name given, checked: 0, or 2 with the reason on stderr. */
static int check_request(const char *kind, const char *name) {
    const struct kind_entry *k = find_kind(kind);
    if (!k) {
        fprintf(stderr, "mcpg new-module: unknown kind \"%s\"\n", kind);
        new_module_usage(stderr);
        return 2;
    }
    if (k->refused) {
        fprintf(stderr, "mcpg new-module: no %s template: %s\n", kind, k->refused);
        return 2;
    }
    if (!valid_name(name)) {
        fprintf(stderr,
                "mcpg new-module: bad module name \"%s\": it must match "
                "[a-z][a-z0-9_]{0,63} (it is also the file's name, %s.so)\n",
                name, name);
        return 2;
    }
    size_t kl = strlen(kind);
    if (strncmp(name, kind, kl) != 0 || name[kl] != '_')
        fprintf(stderr,
                "mcpg new-module: note: module names by custom say their kind, "
                "%s_<what> (e.g. %s_%s)\n",
                kind, kind, name);
    return 0;
}

/* DIR ready to fill: created, or an empty folder already there. */
static int prepare_folder(const char *dir) {
    int st = folder_state(dir);
    if (st == 0) {
        fprintf(stderr,
                "mcpg new-module: %s already exists and is not an empty folder: "
                "refusing to overwrite it\n",
                dir);
        return 2;
    }
    if (st < 0 && mkdir(dir, 0755) != 0) {
        fprintf(stderr, "mcpg new-module: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    return 0;
}

int new_module_command(int argc, char **argv) {
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        new_module_usage(stdout);
        return 0;
    }
    if (argc < 3 || argc > 4) {
        new_module_usage(stderr);
        return 2;
    }
    const char *kind = argv[1], *name = argv[2], *dir = argc > 3 ? argv[3] : argv[2];
    int rc = check_request(kind, name);
    if (rc == 0) rc = prepare_folder(dir);
    if (rc) return rc;
    printf("mcpg new-module: a %s module %s in %s:\n", kind, name, dir);
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++)
        if (write_output(dir, &outputs[i], kind, name) != 0) return 1;
    printf("next (README.md): cd %s && cmake -S . -B build -DCMAKE_PREFIX_PATH=<mcpg prefix> "
           "&& cmake --build build && ctest --test-dir build\n",
           dir);
    return 0;
}
