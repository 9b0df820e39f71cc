/* The tool label of mcpg_tool_calls_total (kernel/metrics.c): its names come
 * from upstreams, which list what they like and change it when they like.
 * At most gateway.metrics.max_tools names get series of their own, counted
 * across catalog rebuilds (a name's series are never taken back); every
 * later name is "(other)". 100 000 distinct names, presented in rounds as a
 * renaming upstream would over successive list changes, leave the family
 * at its cap's size and the kernel's memory where the cap left it. The
 * setting itself: its default, its bounds, its key path in errors. */
#define _GNU_SOURCE
#include "mcpg/check.h"
#include "kernel.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

typedef struct family_seen {
    int found;
    uint32_t n_series;
    uint32_t distinct_tools;
    int has_other, has_unknown;
} family_seen;

static void look(void *arg, const mcpg_metric_view *v) {
    family_seen *f = arg;
    if (strcmp(v->name, "mcpg_tool_calls_total") != 0) return;
    f->found = 1;
    f->n_series += v->n_series;
    for (uint32_t i = 0; i < v->n_series; i++) {
        const char *tool = v->label_values[i * v->n_labels];
        f->has_other |= strcmp(tool, "(other)") == 0;
        f->has_unknown |= strcmp(tool, "(unknown)") == 0;
        int first = 1; /* a name's first outcome: count each tool once */
        for (uint32_t k = 0; k < i && first; k++)
            first = strcmp(v->label_values[k * v->n_labels], tool) != 0;
        f->distinct_tools += (uint32_t)first;
    }
}

static family_seen tool_family(void) {
    family_seen f = {0};
    MCPG_REQUIRE(host_metrics_each(look, &f) == 0, "host_metrics_each");
    MCPG_REQUIRE(f.found, "mcpg_tool_calls_total is registered");
    return f;
}

static void name_of(char *out, size_t cap, uint32_t i) {
    snprintf(out, cap, "renamed_tool_%u", i); /* a valid tool name: [a-zA-Z0-9_-]{1,64} */
}

/* Bytes the allocator holds (0 when it cannot say, e.g. under ASan). */
static size_t heap_in_use(void) {
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks;
}

static void test_default_cap_over_many_rebuilds(void) {
    kernel.m = NULL; /* no manifest: the default */
    MCPG_REQUIRE(metrics_init(1) == 0, "metrics_init");
    const uint32_t cap = METRICS_MAX_TOOLS_DEFAULT, total = 100000, per_round = 500;
    char name[64];
    size_t heap_at_cap = 0;
    /* rounds of 500 new names, each round seeing the names of the one before
     * again (a list that changes by half each time) */
    for (uint32_t start = 0; start < total; start += per_round) {
        for (uint32_t i = start >= per_round ? start - per_round : 0; i < start + per_round; i++) {
            name_of(name, sizeof name, i);
            uint32_t idx = metrics_tool_index(name);
            uint32_t want = i < cap ? METRICS_FIRST_TOOL + i : METRICS_TOOL_OTHER;
            if (idx != want) {
                MCPG_CHECK(idx == want, "%s: index %u, expected %u", name, idx, want);
                return;
            }
        }
        if (start + per_round == 2 * cap) heap_at_cap = heap_in_use();
    }
    size_t heap_after = heap_in_use();
    /* names with series keep them, whenever they come back */
    name_of(name, sizeof name, 7);
    MCPG_CHECK(metrics_tool_index(name) == METRICS_FIRST_TOOL + 7, "an early name keeps its index");
    name_of(name, sizeof name, cap - 1);
    MCPG_CHECK(metrics_tool_index(name) == METRICS_FIRST_TOOL + cap - 1, "the last one with series");
    name_of(name, sizeof name, cap);
    MCPG_CHECK(metrics_tool_index(name) == METRICS_TOOL_OTHER, "the first past the cap");
    MCPG_CHECK(metrics_tool_index("(other)") == METRICS_TOOL_OTHER &&
                   metrics_tool_index("") == METRICS_TOOL_OTHER,
               "a name no tool can have gets no series");
    family_seen f = tool_family();
    MCPG_CHECK(f.distinct_tools == cap + 2 && f.has_other && f.has_unknown,
               "%u tool label values (the cap %u, (other), (unknown))", f.distinct_tools, cap);
    MCPG_CHECK(f.n_series == (cap + 2) * CALL_OUTCOMES, "%u series", f.n_series);
    /* 98 000 names past the cap cost nothing that stays */
    MCPG_CHECK(heap_at_cap == 0 || heap_after <= heap_at_cap + 4096,
               "heap in use %zu after %u names, %zu when the cap was reached", heap_after, total,
               heap_at_cap);
    metrics_shutdown();
    metrics_tools_free();
}

static void test_set_cap(int64_t cap) {
    manifest m = {.metrics_max_tools = cap};
    kernel.m = &m;
    MCPG_REQUIRE(metrics_init(1) == 0, "metrics_init");
    kernel.m = NULL;
    char name[80];
    /* with room left: a name no tool can have still gets none */
    memset(name, 'a', 65);
    name[65] = '\0';
    MCPG_CHECK(metrics_tool_index("(unknown)") == METRICS_TOOL_OTHER &&
                   metrics_tool_index("a b") == METRICS_TOOL_OTHER &&
                   metrics_tool_index(name) == METRICS_TOOL_OTHER,
               "cap %lld: invalid names take no slot", (long long)cap);
    for (uint32_t i = 0; i < 50; i++) {
        name_of(name, sizeof name, i);
        uint32_t idx = metrics_tool_index(name);
        uint32_t want = i < cap ? METRICS_FIRST_TOOL + i : METRICS_TOOL_OTHER;
        MCPG_CHECK(idx == want, "cap %lld, %s: index %u, expected %u", (long long)cap, name, idx,
                   want);
    }
    family_seen f = tool_family();
    MCPG_CHECK(f.n_series == ((uint32_t)cap + 2) * CALL_OUTCOMES, "cap %lld: %u series",
               (long long)cap, f.n_series);
    metrics_shutdown();
    metrics_tools_free();
}

/* gateway.metrics.max_tools as the manifest reads it. */
static manifest *parse(const char *gateway_json, errlist *errs) {
    char text[512];
    snprintf(text, sizeof text,
             "{\"gateway\":%s,\"modules\":[{\"name\":\"mock\",\"module\":\"backend_mock\"}]}",
             gateway_json);
    return manifest_parse("/tmp/m.json", text, "/tmp", errs);
}

static void expect_parsed(const char *gateway_json, int64_t want) {
    errlist errs = {0};
    manifest *m = parse(gateway_json, &errs);
    MCPG_CHECK(m && m->metrics_max_tools == want, "%s: max_tools %lld, expected %lld", gateway_json,
               m ? (long long)m->metrics_max_tools : -1LL, (long long)want);
    if (!m) errlist_print(&errs);
    if (m) manifest_free(m);
    errlist_free(&errs);
}

static void expect_refused(const char *gateway_json, const char *key) {
    errlist errs = {0};
    manifest *m = parse(gateway_json, &errs);
    int named = 0;
    for (size_t i = 0; i < errs.count; i++)
        named |= strstr(errs.lines[i], key) != NULL;
    MCPG_CHECK(!m && named, "%s: refused naming %s", gateway_json, key);
    if (m) manifest_free(m);
    errlist_free(&errs);
}

static void test_setting(void) {
    expect_parsed("{}", METRICS_MAX_TOOLS_DEFAULT);
    expect_parsed("{\"metrics\":{}}", METRICS_MAX_TOOLS_DEFAULT);
    expect_parsed("{\"metrics\":{\"max_tools\":0}}", 0);
    expect_parsed("{\"metrics\":{\"max_tools\":16384}}", METRICS_MAX_TOOLS_LIMIT);
    expect_refused("{\"metrics\":{\"max_tools\":16385}}", "gateway.metrics.max_tools");
    expect_refused("{\"metrics\":{\"max_tools\":-1}}", "gateway.metrics.max_tools");
    expect_refused("{\"metrics\":{\"max_tool\":5}}", "gateway.metrics");
    expect_refused("{\"metrics\":5}", "gateway.metrics");
}

int main(void) {
    test_default_cap_over_many_rebuilds();
    test_set_cap(3);
    test_set_cap(0);
    test_set_cap(49);
    test_setting();
    return MCPG_CHECK_EXIT("test_metrics_tools");
}
