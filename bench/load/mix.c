/* A tool mix (--tool a:3,b:1): which tool each call names.
 *
 * The pick is a function of the call's id, so a run gives each tool exactly
 * its share (ids are consecutive across connections): of every W calls
 * (W the weights' sum) tool i takes weight_i, interleaved by a weighted
 * round-robin over one cycle rather than in runs (a:3,b:1 gives a a b a, not
 * a a a b, so a slow tool's calls do not come in bursts). Pure: the
 * selftest checks it. */
#include <stdlib.h>
#include <string.h>

#include "load.h"

/* One "name[:weight]" item into the mix; 0 or -1 with err. */
static int add_item(load_mix *m, const char *s, size_t n, char *err, size_t errlen) {
    const char *colon = memchr(s, ':', n);
    size_t name_len = colon ? (size_t)(colon - s) : n;
    unsigned long w = 1;
    if (colon) {
        char num[16];
        size_t k = n - name_len - 1;
        char *end;
        if (!k || k >= sizeof num) return snprintf(err, errlen, "a weight in --tool: 1 to 1000"), -1;
        memcpy(num, colon + 1, k);
        num[k] = '\0';
        w = strtoul(num, &end, 10);
        if (*end || w < 1 || w > 1000) return snprintf(err, errlen, "a weight in --tool: 1 to 1000"), -1;
    }
    if (!name_len || name_len >= sizeof m->names[0])
        return snprintf(err, errlen, "a tool name in --tool: 1 to %zu bytes", sizeof m->names[0] - 1), -1;
    if (m->n == LOAD_MIX_MAX) return snprintf(err, errlen, "--tool: at most %d tools", LOAD_MIX_MAX), -1;
    memcpy(m->names[m->n], s, name_len);
    m->names[m->n][name_len] = '\0';
    m->weights[m->n++] = (unsigned)w;
    return 0;
}

/* The cycle: W slots, tool i in weight_i of them, spread by smooth weighted
 * round-robin (each step every tool gains its weight, the richest is picked
 * and pays W). */
static int build_cycle(load_mix *m) {
    unsigned total = 0;
    for (unsigned i = 0; i < m->n; i++) total += m->weights[i];
    m->cycle = malloc(total * sizeof *m->cycle);
    if (!m->cycle) return -1;
    m->cycle_len = total;
    long credit[LOAD_MIX_MAX] = {0};
    for (unsigned k = 0; k < total; k++) {
        unsigned best = 0;
        for (unsigned i = 0; i < m->n; i++) {
            credit[i] += m->weights[i];
            if (credit[i] > credit[best]) best = i;
        }
        credit[best] -= (long)total;
        m->cycle[k] = (uint8_t)best;
    }
    return 0;
}

int load_mix_parse(load_mix *m, const char *spec, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    for (const char *p = spec;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (add_item(m, p, n, err, errlen) < 0) return -1;
        if (!comma) break;
        p = comma + 1;
    }
    if (build_cycle(m) < 0) return snprintf(err, errlen, "out of memory"), -1;
    return 0;
}

unsigned load_mix_pick(const load_mix *m, uint64_t id) { return m->cycle[id % m->cycle_len]; }

void load_mix_free(load_mix *m) {
    free(m->cycle);
    m->cycle = NULL;
}
