/* policy_rules: globs on names, uris and identities.
 *
 * Syntax: `*` any run of characters (also none, also `/`), `?` exactly one
 * byte, `\` makes the next character literal; everything else is itself,
 * compared byte for byte (case matters). No character classes: names are
 * ^[a-zA-Z0-9_-]+$ and a uri glob rarely needs more.
 *
 * A glob is classified when it is compiled, so the common shapes cost one
 * comparison: a literal, `*`, or `prefix*`. */
#ifndef PR_GLOB_H
#define PR_GLOB_H

#include <stddef.h>
#include <stdint.h>

typedef enum pr_glob_shape {
    PR_GLOB_LITERAL = 0, /* no wildcard: text (unescaped) equals it */
    PR_GLOB_ANY = 1,     /* "*": anything */
    PR_GLOB_PREFIX = 2,  /* "abc*": text (unescaped) starts with it */
    PR_GLOB_GENERAL = 3  /* the rest: the matcher walks it */
} pr_glob_shape;

typedef struct pr_glob {
    char *src;      /* the glob as written (NUL-terminated) */
    char *lit;      /* LITERAL/PREFIX: the bytes to compare, unescaped; else NULL */
    uint32_t src_len, lit_len;
    uint32_t shape; /* pr_glob_shape */
} pr_glob;

/* Compile s[0..n) into g (its strings malloc'd). 0, or -1 with *why set:
 * out of memory, or a glob that ends with a lone `\`. */
int pr_glob_compile(pr_glob *g, const char *s, size_t n, const char **why);
void pr_glob_free(pr_glob *g);

/* 1 when text[0..n) matches. Allocates nothing. */
int pr_glob_match(const pr_glob *g, const char *text, size_t n);

/* 1 when some string matches both g and the RFC 6570 uri template t[0..n)
 * (each {...} expression standing for any string): the template could
 * produce a uri the glob allows. For visible("resource_template"). */
int pr_glob_meets_template(const pr_glob *g, const char *t, size_t n);

#endif
