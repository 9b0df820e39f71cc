/* Fuzzer: the manifest as the kernel reads it. ${VAR} and ${VAR:-default}
 * expansion (kernel/envexpand.c) on the raw text, then the JSON parse and
 * every key check of kernel/manifest.c (manifest_parse: what manifest_load
 * does before it loads any module).
 *
 * Checked: a failure always says why ("FILE: ..." lines) and a success
 * never does; text without '$' comes back unchanged; any expansion,
 * with its '$' doubled, expands back to itself (one pass, no value
 * expanded again); a manifest taken has what a start relies on. */
#include "fuzz.h"

#include "kernel.h"

#include <string.h>

#define FILE_NAME "fuzz.json"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    /* variables the seeds name: set, empty, and one whose value looks like a reference */
    setenv("MCPG_FZ_LISTEN", "127.0.0.1:8787", 1);
    setenv("MCPG_FZ_EMPTY", "", 1);
    setenv("MCPG_FZ_REF", "${MCPG_FZ_LISTEN}", 1);
    setenv("MCPG_FZ_SECRET", "s3cr\"et\\", 1);
    unsetenv("MCPG_FZ_UNSET");
    klog_init(-1); /* quiet */
    return 0;
}

static void check_errors(const errlist *e, size_t before, int failed) {
    FZ_CHECK(failed == (e->count > before), "failed %d with %zu new errors", failed, e->count - before);
    for (size_t i = before; i < e->count; i++)
        FZ_CHECK(!strncmp(e->lines[i], FILE_NAME ": ", sizeof FILE_NAME + 1), "error line %s", e->lines[i]);
}

static char *double_dollars(const char *s) {
    size_t n = strlen(s), k = 0;
    char *out = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) {
        out[k++] = s[i];
        if (s[i] == '$') out[k++] = '$';
    }
    out[k] = '\0';
    return out;
}

static void check_expansion(const char *text) {
    errlist e = {0};
    char *out = expand_env(text, FILE_NAME, &e);
    check_errors(&e, 0, out == NULL);
    if (out) {
        if (!strchr(text, '$')) FZ_CHECK(!strcmp(out, text), "text without $ changed");
        char *quoted = double_dollars(out);
        errlist e2 = {0};
        char *again = expand_env(quoted, FILE_NAME, &e2);
        FZ_CHECK(again && !strcmp(again, out), "expanding %s again gave %s", quoted, again ? again : "NULL");
        free(again);
        free(quoted);
        errlist_free(&e2);
    }
    free(out);
    errlist_free(&e);
}

static void check_manifest(const char *text) {
    errlist e = {0};
    manifest *m = manifest_parse(FILE_NAME, text, "/nonexistent/bin", &e);
    check_errors(&e, 0, m == NULL);
    if (m) {
        FZ_CHECK(m->n_listen >= 1 && m->n_listen <= 16, "%zu listeners", m->n_listen);
        for (size_t i = 0; i < m->n_listen; i++)
            FZ_CHECK(m->listen[i] && strrchr(m->listen[i], ':'), "listen %s", m->listen[i]);
        FZ_CHECK(m->workers >= 0 && m->workers <= MCPG_MAX_WORKERS, "workers %lld", (long long)m->workers);
        FZ_CHECK(m->log_level >= 0 && m->log_level <= 3, "log level %d", m->log_level);
        FZ_CHECK(m->module_dir && m->transport.module && m->name && m->id, "a default missing");
        for (size_t i = 0; i < m->n_instances; i++)
            FZ_CHECK(m->instances[i].name && m->instances[i].module, "modules[%zu] without name or module", i);
        manifest_free(m);
    }
    errlist_free(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0'; /* the kernel reads the file as a C string */
    check_expansion(text);
    check_manifest(text);
    free(text);
    return 0;
}
