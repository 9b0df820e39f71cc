/* Unit tests of the config schema parser (sdk/src/config.c): DOUBLE fields
 * with fractional bounds, INT bounds, and schemas whose entries are larger
 * than this build's (a module built against newer headers), which the parser
 * must walk by each entry's own size. */
#include <mcpg/check.h>
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>

typedef struct cfg {
    double ratio;
    double free_number;
    int64_t count;
    const char *label;
} cfg;

static const mcpg_config_field fields[] = {
    MCPG_CFG_DOUBLE_FIELD(cfg, ratio, "ratio", "1.25", 0.5, 2.5, "a ratio"),
    MCPG_CFG_DOUBLE_FIELD(cfg, free_number, "free_number", NULL, 0, 0, "no bounds"),
    MCPG_CFG_INT_FIELD(cfg, count, "count", "3", 1, 10, "a count"),
    MCPG_CFG_STRING_FIELD(cfg, label, "label", "\"x\"", "a label"),
    MCPG_CONFIG_END};

/* The problems one parse reported, one "key: message" per line. */
typedef struct problems {
    char text[2048];
    int n;
} problems;

static void on_problem(void *ctx, const char *key, const char *message) {
    problems *p = ctx;
    size_t used = strlen(p->text);
    snprintf(p->text + used, sizeof p->text - used, "%s: %s\n", key, message);
    p->n++;
}

/* Parse json into *out (zeroed first); returns the problem count. */
static int parse(const mcpg_config_field *schema, const char *json, cfg *out, problems *p) {
    memset(out, 0, sizeof *out);
    memset(p, 0, sizeof *p);
    return mcpg_config_parse(schema, json, json ? strlen(json) : 0, out, on_problem, p);
}

static void test_double_bounds(void) {
    cfg c;
    problems p;
    MCPG_CHECK(parse(fields, NULL, &c, &p) == 0 && c.ratio == 1.25 && c.count == 3,
               "defaults: %s", p.text);
    mcpg_config_free(fields, &c);
    static const struct {
        const char *json;
        double want;
    } inside[] = {{"{\"ratio\":0.5}", 0.5}, {"{\"ratio\":2.5}", 2.5},
                  {"{\"ratio\":1.75}", 1.75}, {"{\"ratio\":2}", 2.0}};
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++) {
        MCPG_CHECK(parse(fields, inside[i].json, &c, &p) == 0 && c.ratio == inside[i].want,
                   "%s: ratio %g, %s", inside[i].json, c.ratio, p.text);
        mcpg_config_free(fields, &c);
    }
    static const char *const outside[] = {"{\"ratio\":0.49}", "{\"ratio\":2.51}",
                                          "{\"ratio\":3}", "{\"ratio\":0}", "{\"ratio\":-1.5}"};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        MCPG_CHECK(parse(fields, outside[i], &c, &p) == 1 &&
                       strstr(p.text, "ratio: must be between 0.5 and 2.5") != NULL,
                   "%s: %s", outside[i], p.text);
        mcpg_config_free(fields, &c);
    }
    MCPG_CHECK(parse(fields, "{\"ratio\":\"1\"}", &c, &p) == 1 &&
                   strstr(p.text, "ratio: expected a number") != NULL,
               "a string for a number: %s", p.text);
    mcpg_config_free(fields, &c);
    MCPG_CHECK(parse(fields, "{\"free_number\":-123456.75}", &c, &p) == 0 &&
                   c.free_number == -123456.75,
               "dmin == dmax means unbounded: %s", p.text);
    mcpg_config_free(fields, &c);
}

static void test_int_bounds(void) {
    cfg c;
    problems p;
    MCPG_CHECK(parse(fields, "{\"count\":10}", &c, &p) == 0 && c.count == 10, "%s", p.text);
    mcpg_config_free(fields, &c);
    MCPG_CHECK(parse(fields, "{\"count\":11}", &c, &p) == 1 &&
                   strstr(p.text, "count: must be between 1 and 10") != NULL,
               "%s", p.text);
    mcpg_config_free(fields, &c);
    MCPG_CHECK(parse(fields, "{\"count\":1.5}", &c, &p) == 1 &&
                   strstr(p.text, "count: expected an integer") != NULL,
               "%s", p.text);
    mcpg_config_free(fields, &c);
}

/* An entry as a later minor might lay it out: today's fields, then more.
 * Its `size` says so, and the parser must step by it. */
typedef struct newer_field {
    mcpg_config_field f;
    double added_later;
    const char *also_added;
} newer_field;

#define NEWER(entry) {.f = entry, .added_later = 42.0, .also_added = "not ours to read"}

static newer_field newer_schema[] = {
    NEWER(MCPG_CFG_DOUBLE_FIELD(cfg, ratio, "ratio", "1.5", 0.5, 2.5, "a ratio")),
    NEWER(MCPG_CFG_INT_FIELD(cfg, count, "count", NULL, 1, 10, "a count")),
    NEWER(MCPG_CFG_REQUIRED_STRING_FIELD(cfg, label, "label", "a label")),
    NEWER(MCPG_CONFIG_END)};

static void stretch(newer_field *entries, size_t n) {
    for (size_t i = 0; i < n; i++) entries[i].f.size = (uint32_t)sizeof(newer_field);
}

static void test_wider_entries(void) {
    stretch(newer_schema, sizeof newer_schema / sizeof newer_schema[0]);
    const mcpg_config_field *schema = &newer_schema[0].f;
    size_t n = 0;
    for (const mcpg_config_field *f = mcpg_config_first(schema); f; f = mcpg_config_next(f)) n++;
    MCPG_CHECK(n == 3, "walked %zu entries, want 3", n);
    MCPG_CHECK(fields[0].size == sizeof(mcpg_config_field) && MCPG_HAS_FIELD(schema, dmax),
               "each entry says its own size");
    cfg c;
    problems p;
    MCPG_CHECK(parse(schema, "{\"label\":\"y\",\"count\":4}", &c, &p) == 0 && c.ratio == 1.5 &&
                   c.count == 4 && c.label && strcmp(c.label, "y") == 0,
               "parsed at the entries' stride: ratio %g count %lld, %s", c.ratio,
               (long long)c.count, p.text);
    mcpg_config_free(schema, &c);
    MCPG_CHECK(c.label == NULL, "free walks the same stride");
    MCPG_CHECK(parse(schema, "{\"ratio\":2.6,\"lable\":\"y\"}", &c, &p) == 3 &&
                   strstr(p.text, "ratio: must be between 0.5 and 2.5") &&
                   strstr(p.text, "lable: unknown key (did you mean \"label\"?)") &&
                   strstr(p.text, "label: is required"),
               "three problems: %s", p.text);
    mcpg_config_free(schema, &c);
}

int main(void) {
    test_double_bounds();
    test_int_bounds();
    test_wider_entries();
    return MCPG_CHECK_EXIT("test_config");
}
