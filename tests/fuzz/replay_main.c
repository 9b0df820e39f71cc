/* The fuzzers without libFuzzer: every file named on the command line, or
 * in a folder named there, is run once through the harness. This is the
 * regression test of the Release build (ctest fuzz.<name>.replay): the seed
 * corpora and every input that once broke an invariant must pass. */
#include "fuzz.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf) return -1;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* A folder's files in name order. Returns the count, -1 on error. */
static int run_dir(const char *dir) {
    struct dirent **names;
    int k = scandir(dir, &names, NULL, by_name);
    if (k < 0) return -1;
    int ran = 0;
    for (int i = 0; i < k; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(path)) ran = -1;
            else if (ran >= 0) ran++;
        }
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) continue; /* a fuzzer with no regressions has no folder */
        int ran = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : (run_file(argv[i]) ? -1 : 1);
        if (ran < 0) return 1;
        total += ran;
    }
    printf("replayed %d inputs\n", total);
    return total ? 0 : 1; /* no input at all: the paths are wrong */
}
