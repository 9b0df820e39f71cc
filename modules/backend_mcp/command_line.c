/* backend_mcp: command_line, a program and its arguments in one string (so
 * one ${VAR} in a manifest can hold both), split into words the way a shell
 * splits them, but never given to a shell: no variables, globs, pipes or
 * redirections. Blanks separate words; '…' is taken as written; "…" is too,
 * but for \" and \\; outside quotes a backslash takes the next character as
 * it is. An unquoted | & ; < > or ` is refused rather than passed on as an
 * argument: whoever wrote it expected a shell. */
#include "mcp_config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

/* Inside "…": a backslash escapes only " and \ (as in a shell). */
static const char *double_quoted(const char *p, char *out, size_t *n) {
    for (; *p && *p != '"'; p++) {
        if (*p == '\\' && (p[1] == '"' || p[1] == '\\')) p++;
        out[(*n)++] = *p;
    }
    return *p ? p : NULL;
}

static const char *single_quoted(const char *p, char *out, size_t *n) {
    for (; *p && *p != '\''; p++) out[(*n)++] = *p;
    return *p ? p : NULL;
}

/* One word starting at *pp (not a blank) into out, which has room for the
 * rest of the line; *pp is left after it. 0, or -1 with why filled. */
static int next_word(const char **pp, char *out, char *why, size_t whycap) {
    const char *p = *pp;
    size_t n = 0;
    for (; *p && !is_blank(*p); p++) {
        if (*p == '\'' || *p == '"') {
            const char *end = *p == '"' ? double_quoted(p + 1, out, &n) : single_quoted(p + 1, out, &n);
            if (!end) {
                snprintf(why, whycap, "a %s quote is never closed",
                         *p == '"' ? "double" : "single");
                return -1;
            }
            p = end;
        } else if (strchr("|&;<>`", *p)) {
            snprintf(why, whycap, "holds an unquoted '%c': no shell runs the command (quote it, "
                     "or give a shell as the program: sh -c '...')", *p);
            return -1;
        } else {
            if (*p == '\\' && p[1]) p++;
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    *pp = p;
    return 0;
}

static void words_free(char **argv) {
    for (size_t i = 0; argv && argv[i]; i++) free(argv[i]);
    free(argv);
}

char **command_line_split(const char *line, char *why, size_t whycap) {
    why[0] = '\0';
    size_t len = strlen(line);
    char **argv = calloc(len / 2 + 2, sizeof *argv); /* words need a blank between them */
    char *word = malloc(len + 1);
    size_t n = 0;
    const char *p = line;
    while (argv && word) {
        while (is_blank(*p)) p++;
        if (!*p) break;
        if (next_word(&p, word, why, whycap) != 0 || !(argv[n++] = strdup(word))) {
            words_free(argv);
            argv = NULL;
        }
    }
    free(word);
    if (argv && n == 0) {
        snprintf(why, whycap, "names no program");
        words_free(argv);
        return NULL;
    }
    if (!argv && !why[0]) snprintf(why, whycap, "out of memory");
    return argv;
}
