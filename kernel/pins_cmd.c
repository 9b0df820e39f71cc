/* mcpg pins diff|approve: what the gateway sees against what was approved.
 *
 * The running gateway writes each tool, prompt and resource template it is
 * offered to <pins file>.seen; these commands read that file and the pins
 * file (gateway.pins.file of the manifest). `diff` prints every definition
 * that differs from its pin, has none, or is pinned and no longer offered;
 * `approve` copies what is seen into the pins file (all of it, one
 * backend's, or the items named), which the gateway reads again within a
 * second. */
#include "kernel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const int k_kinds[] = {CAT_TOOLS, CAT_PROMPTS, CAT_TEMPLATES};
#define N_KINDS (sizeof k_kinds / sizeof k_kinds[0])

static void usage(FILE *f) {
    fputs("usage: mcpg pins diff --config FILE\n"
          "       mcpg pins approve --config FILE [--backend NAME] [ITEM...]\n"
          "  diff     what the gateway sees (<pins file>.seen) against the pins file\n"
          "           (gateway.pins.file): exit 0 when they agree, 1 when not\n"
          "  approve  copies what is seen into the pins file: every item, one backend's\n"
          "           (--backend), or the ITEMs named (a tool's or prompt's name, a\n"
          "           template's uriTemplate, as the backend lists it)\n",
          f);
}

#define MAX_ITEMS 256

typedef struct pins_args {
    const char *config, *backend;
    const char *items[MAX_ITEMS];
    int n_items;
} pins_args;

static int parse(int argc, char **argv, pins_args *a) {
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) a->config = argv[++i];
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) a->backend = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "mcpg pins: unknown option %s\n", argv[i]);
            return -1;
        } else if (a->n_items == MAX_ITEMS) {
            fprintf(stderr, "mcpg pins: at most %d items at once\n", MAX_ITEMS);
            return -1;
        } else {
            a->items[a->n_items++] = argv[i];
        }
    }
    if (!a->config) {
        fprintf(stderr, "mcpg pins: --config FILE is required\n");
        return -1;
    }
    return 0;
}

static json_t *read_doc(const char *path, const char *what) {
    char why[512];
    json_t *doc = pins_read_doc(path, NULL, why, sizeof why);
    if (!doc) fprintf(stderr, "%s: %s (%s)\n", path, why, what);
    return doc;
}

static void print_lines(const json_t *lines) {
    size_t i;
    const json_t *l;
    json_array_foreach(lines, i, l) printf("    %s\n", json_string_value(l));
}

/* One item seen: printed when it differs from its pin; 1 then. */
static int diff_item(const json_t *pinned_doc, const char *be, int kind, const char *name,
                     const json_t *seen) {
    const json_t *pin = pins_entry(pinned_doc, be, kind, name);
    const char *now = json_string_value(json_object_get(seen, "sha256"));
    const char *then = pin ? json_string_value(json_object_get(pin, "sha256")) : NULL;
    if (then && now && !strcmp(then, now)) return 0;
    if (then) printf("backend \"%s\": %s \"%s\" changed (pinned %.12s, now %.12s)\n", be,
                     pins_kind_noun(kind), name, then, now ? now : "?");
    else printf("backend \"%s\": %s \"%s\" has no pin (now %.12s)\n", be, pins_kind_noun(kind), name,
                now ? now : "?");
    json_t *lines = pins_diff(pin ? json_object_get(pin, "definition") : NULL,
                              json_object_get(seen, "definition"));
    print_lines(lines);
    json_decref(lines);
    return 1;
}

/* Pinned items no longer offered by a backend the gateway lists. */
static int gone_items(const json_t *pinned_doc, const json_t *seen_doc) {
    int n = 0;
    const char *be, *name;
    json_t *kinds, *e;
    json_object_foreach(json_object_get(pinned_doc, "pins"), be, kinds) {
        if (!json_object_get(json_object_get(seen_doc, "pins"), be)) continue; /* not listed yet */
        for (size_t k = 0; k < N_KINDS; k++) {
            json_object_foreach(json_object_get(kinds, pins_kind_key(k_kinds[k])), name, e) {
                if (pins_entry(seen_doc, be, k_kinds[k], name)) continue;
                printf("backend \"%s\": %s \"%s\" is pinned but no longer offered\n", be,
                       pins_kind_noun(k_kinds[k]), name);
                n++;
            }
        }
    }
    return n;
}

static int run_diff(const json_t *pinned_doc, const json_t *seen_doc) {
    int n = 0;
    const char *be, *name;
    json_t *kinds, *e;
    json_object_foreach(json_object_get(seen_doc, "pins"), be, kinds) {
        for (size_t k = 0; k < N_KINDS; k++)
            json_object_foreach(json_object_get(kinds, pins_kind_key(k_kinds[k])), name, e)
                n += diff_item(pinned_doc, be, k_kinds[k], name, e);
    }
    n += gone_items(pinned_doc, seen_doc);
    if (!n) printf("every definition the gateway sees matches its pin\n");
    return n ? 1 : 0;
}

static bool chosen(const pins_args *a, const char *be, const char *name) {
    if (a->backend && strcmp(a->backend, be) != 0) return false;
    if (!a->n_items) return true;
    for (int i = 0; i < a->n_items; i++)
        if (!strcmp(a->items[i], name)) return true;
    return false;
}

static int run_approve(const pins_args *a, const char *file, json_t *pinned_doc,
                       const json_t *seen_doc) {
    int n = 0;
    const char *be, *name;
    json_t *kinds, *e;
    json_object_foreach(json_object_get(seen_doc, "pins"), be, kinds) {
        for (size_t k = 0; k < N_KINDS; k++) {
            json_object_foreach(json_object_get(kinds, pins_kind_key(k_kinds[k])), name, e) {
                if (!chosen(a, be, name)) continue;
                const char *hex = json_string_value(json_object_get(e, "sha256"));
                pins_doc_put(pinned_doc, be, k_kinds[k], name, hex, json_object_get(e, "definition"));
                printf("approved: backend \"%s\": %s \"%s\" (%.12s)\n", be, pins_kind_noun(k_kinds[k]),
                       name, hex);
                n++;
            }
        }
    }
    if (!n) {
        fprintf(stderr, "mcpg pins approve: nothing seen matches%s%s\n", a->backend ? " --backend " : "",
                a->backend ? a->backend : "");
        return 1;
    }
    if (pins_write_doc(file, pinned_doc) != 0) {
        fprintf(stderr, "%s: cannot write: %s\n", file, strerror(errno));
        return 2;
    }
    printf("%s: %d pin(s) written; a running gateway reads them within a second\n", file, n);
    return 0;
}

int pins_command(int argc, char **argv, const char *exe_dir) {
    if (argc < 2 || (strcmp(argv[1], "diff") && strcmp(argv[1], "approve"))) {
        usage(argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ? stdout : stderr);
        return argc < 2 ? 2 : (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? 0 : 2;
    }
    bool approve = !strcmp(argv[1], "approve");
    pins_args a = {0};
    int rc = parse(argc - 2, argv + 2, &a);
    if (rc) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    errlist errs = {0};
    char *file = manifest_pins_file(a.config, exe_dir, &errs);
    if (!file) {
        errlist_print(&errs);
        errlist_free(&errs);
        return 2;
    }
    char seen_path[PATH_MAX];
    pins_seen_path(file, seen_path, sizeof seen_path);
    json_t *pinned_doc = read_doc(file, "gateway.pins.file");
    json_t *seen_doc = pinned_doc ? read_doc(seen_path, "what the gateway sees") : NULL;
    if (seen_doc && !json_object_size(json_object_get(seen_doc, "pins")))
        fprintf(stderr, "%s: nothing seen yet: the gateway writes it once it runs with "
                        "gateway.pins.file set\n", seen_path);
    rc = 2;
    if (seen_doc) rc = approve ? run_approve(&a, file, pinned_doc, seen_doc) : run_diff(pinned_doc, seen_doc);
    json_decref(pinned_doc);
    json_decref(seen_doc);
    free(file);
    return rc;
}
