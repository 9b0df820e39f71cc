/* policy_rules: glob compile and match (see pr_glob.h). */
#include "pr_glob.h"

#include <stdlib.h>
#include <string.h>

/* Tokens of a pattern for the template walk: a byte, or one of these. */
enum { TOK_STAR = 0x100, TOK_ONE = 0x101 };

static pr_glob_shape shape_of(const char *s, size_t n, size_t *lit_len) {
    size_t lit = 0, i = 0;
    for (; i < n; i++) {
        if (s[i] == '\\') {
            i++;
        } else if (s[i] == '?') {
            return PR_GLOB_GENERAL;
        } else if (s[i] == '*') {
            if (i + 1 != n) return PR_GLOB_GENERAL;
            *lit_len = lit;
            return lit == 0 ? PR_GLOB_ANY : PR_GLOB_PREFIX;
        }
        lit++;
    }
    *lit_len = lit;
    return PR_GLOB_LITERAL;
}

static void unescape_into(char *dst, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '*') break; /* a PREFIX's final star */
        if (s[i] == '\\') i++;
        *dst++ = s[i];
    }
}

int pr_glob_compile(pr_glob *g, const char *s, size_t n, const char **why) {
    memset(g, 0, sizeof *g);
    size_t backslashes = 0;
    while (backslashes < n && s[n - 1 - backslashes] == '\\') backslashes++;
    if (backslashes % 2) {
        *why = "ends with a lone '\\' (write '\\\\' for a backslash)";
        return -1;
    }
    size_t lit_len = 0;
    g->shape = shape_of(s, n, &lit_len);
    g->src = malloc(n + 1);
    if (g->shape == PR_GLOB_LITERAL || g->shape == PR_GLOB_PREFIX) g->lit = malloc(lit_len + 1);
    if (!g->src || ((g->shape == PR_GLOB_LITERAL || g->shape == PR_GLOB_PREFIX) && !g->lit)) {
        pr_glob_free(g);
        *why = "out of memory";
        return -1;
    }
    memcpy(g->src, s, n);
    g->src[n] = '\0';
    g->src_len = (uint32_t)n;
    if (g->lit) {
        unescape_into(g->lit, s, n);
        g->lit[lit_len] = '\0';
        g->lit_len = (uint32_t)lit_len;
    }
    return 0;
}

void pr_glob_free(pr_glob *g) {
    free(g->src);
    free(g->lit);
    memset(g, 0, sizeof *g);
}

/* The general walk: greedy, backing up to the last star on a mismatch
 * (linear in the common case, at worst len(pattern) x len(text)). */
static int match_general(const char *p, size_t pn, const char *s, size_t sn) {
    size_t pi = 0, si = 0, star_p = (size_t)-1, star_s = 0;
    while (si < sn) {
        if (pi < pn && p[pi] == '*') {
            star_p = ++pi;
            star_s = si;
            continue;
        }
        if (pi < pn && p[pi] == '?') {
            pi++;
            si++;
            continue;
        }
        if (pi < pn) {
            size_t at = p[pi] == '\\' ? pi + 1 : pi;
            if (p[at] == s[si]) {
                pi = at + 1;
                si++;
                continue;
            }
        }
        if (star_p == (size_t)-1) return 0;
        pi = star_p;
        si = ++star_s;
    }
    while (pi < pn && p[pi] == '*') pi++;
    return pi == pn;
}

int pr_glob_match(const pr_glob *g, const char *text, size_t n) {
    switch (g->shape) {
    case PR_GLOB_ANY: return 1;
    case PR_GLOB_LITERAL: return n == g->lit_len && memcmp(text, g->lit, n) == 0;
    case PR_GLOB_PREFIX: return n >= g->lit_len && memcmp(text, g->lit, g->lit_len) == 0;
    default: return match_general(g->src, g->src_len, text, n);
    }
}

/* ---- a glob against a uri template ---- */

static size_t glob_tokens(const pr_glob *g, uint16_t *out) {
    size_t k = 0;
    for (size_t i = 0; i < g->src_len; i++) {
        char c = g->src[i];
        if (c == '*') out[k++] = TOK_STAR;
        else if (c == '?') out[k++] = TOK_ONE;
        else out[k++] = (uint8_t)(c == '\\' ? g->src[++i] : c);
    }
    return k;
}

/* {...} is an expression (any string); a '{' without its '}' is itself. */
static size_t template_tokens(const char *t, size_t n, uint16_t *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *close = t[i] == '{' ? memchr(t + i, '}', n - i) : NULL;
        if (close) {
            out[k++] = TOK_STAR;
            i = (size_t)(close - t);
        } else {
            out[k++] = (uint8_t)t[i];
        }
    }
    return k;
}

/* Whether the two token strings share a match: a walk over pairs of
 * positions (i in a, j in b) that some common prefix can reach, one row of
 * a at a time. A star may stay put while the other side consumes a byte,
 * or be left behind (matching nothing more). */
static int tokens_meet(const uint16_t *a, size_t na, const uint16_t *b, size_t nb,
                       uint8_t *row, uint8_t *next) {
    memset(row, 0, nb + 1);
    row[0] = 1;
    for (size_t i = 0; i <= na; i++) {
        memset(next, 0, nb + 1);
        for (size_t j = 0; j <= nb; j++) {
            if (!row[j]) continue;
            int a_star = i < na && a[i] == TOK_STAR, b_star = j < nb && b[j] == TOK_STAR;
            if (a_star) next[j] = 1;                    /* a's star ends */
            if (b_star && j + 1 <= nb) row[j + 1] = 1;   /* b's star ends */
            if (i == na || j == nb) continue;
            if (a_star && !b_star) row[j + 1] = 1;       /* a's star eats b's byte */
            if (b_star && !a_star) next[j] = 1;          /* b's star eats a's byte */
            if (!a_star && !b_star && (a[i] == TOK_ONE || a[i] == b[j])) next[j + 1] = 1;
        }
        if (i == na) return row[nb];
        uint8_t *t = row;
        row = next;
        next = t;
    }
    return 0;
}

int pr_glob_meets_template(const pr_glob *g, const char *t, size_t n) {
    if (g->shape == PR_GLOB_ANY) return 1;
    enum { STACK = 512 };
    uint16_t ga_s[STACK], ta_s[STACK];
    uint8_t r1_s[STACK + 1], r2_s[STACK + 1];
    int big = g->src_len > STACK || n > STACK;
    uint16_t *ga = big ? malloc(sizeof *ga * (g->src_len + 1)) : ga_s;
    uint16_t *ta = big ? malloc(sizeof *ta * (n + 1)) : ta_s;
    uint8_t *r1 = big ? malloc(n + 1) : r1_s, *r2 = big ? malloc(n + 1) : r2_s;
    int meets = 0;
    if (ga && ta && r1 && r2) {
        size_t na = glob_tokens(g, ga), nb = template_tokens(t, n, ta);
        meets = tokens_meet(ga, na, ta, nb, r1, r2);
    }
    if (big) {
        free(ga);
        free(ta);
        free(r1);
        free(r2);
    }
    return meets;
}
