/* Names: the one check of the name pattern, and "did you mean" (the closest
 * known word by edit distance). Kept apart from the config parser so a module
 * that uses them does not pull in jansson. */
#include <mcpg/sdk.h>

#include <string.h>

int mcpg_name_valid(const char *s, size_t n) {
    if (n < 1 || n > MCPG_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
        if (!ok) return 0;
    }
    return 1;
}

int mcpg_server_name_valid(const char *s, size_t n) {
    if (n < 1 || n > MCPG_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 (i && (ch == '_' || ch == '-'));
        if (!ok) return 0;
    }
    return 1;
}

size_t mcpg_host_name_len(const char *host, size_t n) {
    if (n && host[0] == '[') {
        const char *close = memchr(host, ']', n);
        return close ? (size_t)(close - host) + 1 : n;
    }
    const char *colon = memchr(host, ':', n);
    return colon ? (size_t)(colon - host) : n;
}

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = diag + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *mcpg_did_you_mean(const char *word, const char *const *candidates, size_t count) {
    const char *best = NULL;
    size_t best_d = 99;
    for (size_t i = 0; i < count; i++) {
        size_t d = edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    /* close enough: a typo or two, scaled to the word's length */
    size_t limit = strlen(word) <= 4 ? 1 : (strlen(word) <= 8 ? 2 : 3);
    return best_d <= limit ? best : NULL;
}
