/* The gateway's own settings (the manifest's "gateway" and "cluster"
 * objects), described as data: the same mcpg_config_field tables a module
 * gives for its config, read by the same parser (sdk/src/config.c). So each
 * key is written once, with its default, bounds and the line
 * `mcpg --help-module gateway` prints, and every error has the module
 * config's form: unknown keys with a "did you mean", bounds, key paths.
 *
 * The tables fill the manifest directly (their offsets are the manifest's).
 * A key whose value is an object of settings (gateway.pool) is a JSON field
 * of its parent, parsed in turn by its own table; a key holding a list or an
 * object with rules of its own (gateway.listen, gateway.redact) is a JSON
 * field too, read by the code that knows those rules (manifest.c, redact.c),
 * and gateway.server goes as it is to the transport, whose schema checks it. */
#include "kernel.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SETTING_TEXT(x) SETTING_TEXT_(x)
#define SETTING_TEXT_(x) #x

static const mcpg_config_field gateway_fields[] = {
    MCPG_CFG_STRING_FIELD(manifest, name, "name", "\"mcpg\"",
                          "the server name clients are told (serverInfo)"),
    MCPG_CFG_STRING_FIELD(manifest, id, "id", NULL,
                          "this gateway's id in audit events (gateway_id); unset: the host name"),
    MCPG_CFG_JSON_FIELD(manifest, json.listen, "listen", "[\"127.0.0.1:8787\"]",
                        "the HOST:PORT addresses to listen on, 1 to 16; --listen replaces them"),
    MCPG_CFG_INT_FIELD(manifest, workers, "workers", "0", 0, MCPG_MAX_WORKERS,
                       "event loops, one listener each (SO_REUSEPORT); 0: one per CPU"),
    MCPG_CFG_STRING_FIELD(manifest, module_dir, "module_dir", NULL,
                          "where <module>.so files are, relative to the manifest's folder; "
                          "unset: beside the binary, <binary>/../lib/mcpg/modules (installed) "
                          "or else <binary>/../modules (a build tree), the first that exists"),
    MCPG_CFG_STRING_FIELD(manifest, runtime_dir, "runtime_dir", NULL,
                          "private folder for the loaded copies of modules; unset: a new "
                          "$TMPDIR/mcpg-<pid>-XXXXXX, removed at exit"),
    MCPG_CFG_ENUM_FIELD(manifest, log_level_name, "log_level", "\"info\"",
                        "error|warn|info|debug", "the most detailed log lines written"),
    MCPG_CFG_INT_FIELD(manifest, drain_timeout_ms, "drain_timeout_ms", "10000", 0, 3600000,
                       "how long SIGTERM waits for the calls in flight"),
    MCPG_CFG_INT_FIELD(manifest, reload_drain_ms, "reload_drain_ms", "5000", 0, 3600000,
                       "how long what started on a generation may run on after a reload "
                       "replaced it"),
    MCPG_CFG_INT_FIELD(manifest, max_calls_per_worker, "max_calls_per_worker", "4096", 1,
                       1 << 24, "calls in flight per loop; beyond it: 503 and Retry-After"),
    MCPG_CFG_INT_FIELD(manifest, list_page_size, "list_page_size", "500", 1, 100000,
                       "items per page of a merged list (nextCursor beyond it)"),
    MCPG_CFG_INT_FIELD(manifest, request_state_ttl_ms, "request_state_ttl_ms", "600000", 1000,
                       86400000, "how long a requestState shown to a client stays good"),
    MCPG_CFG_BOOL_FIELD(manifest, anonymous, "anonymous", "false",
                        "with an identity stage: serve a call no identity module took"),
    MCPG_CFG_STRING_FIELD(manifest, secret_env, "secret_env", NULL,
                          "the variable holding the secret (16 bytes or more, the same on every "
                          "replica) task ids and requestStates are sealed with; unset: a random "
                          "key per process"),
    MCPG_CFG_JSON_FIELD(manifest, json.audit, "audit", NULL,
                        "how audit events show a call: {\"arguments\": \"redacted|hashed|"
                        "omitted\", \"results\": false}"),
    MCPG_CFG_JSON_FIELD(manifest, json.redact, "redact", NULL,
                        "what audit events hide: {\"keys\": [...], \"pointers\": [...], "
                        "\"patterns\": [...]}"),
    MCPG_CFG_JSON_FIELD(manifest, json.pool, "pool", NULL, "an object: gateway.pool below"),
    MCPG_CFG_JSON_FIELD(manifest, json.watch, "watch", NULL, "an object: gateway.watch below"),
    MCPG_CFG_JSON_FIELD(manifest, json.metrics, "metrics", NULL,
                        "an object: gateway.metrics below"),
    MCPG_CFG_JSON_FIELD(manifest, json.pins, "pins", NULL,
                        "an object: gateway.pins below (pinned tool, prompt and resource "
                        "template definitions)"),
    MCPG_CFG_STRING_FIELD(manifest, transport.module, "transport", "\"transport_http\"",
                          "the transport module"),
    MCPG_CFG_STRING_FIELD(manifest, transport.sha256, "transport_sha256", NULL,
                          "the transport module file's pinned SHA-256 (64 hex digits, as "
                          "mcpg modules --hash shows it): another file is refused"),
    MCPG_CFG_JSON_FIELD(manifest, transport.config_json, "server", NULL,
                        "the transport's config, an object checked against its schema "
                        "(mcpg --help-module transport_http)"),
    MCPG_CONFIG_END,
};

static const mcpg_config_field pool_fields[] = {
    MCPG_CFG_INT_FIELD(manifest, pool_threads, "threads", "4", 1, 256,
                       "threads of the bounded pool that runs blocking backend calls"),
    MCPG_CFG_INT_FIELD(manifest, pool_queue, "queue", "1024", 1, 1 << 20,
                       "calls waiting for a pool thread at most; a full queue answers 503"),
    MCPG_CONFIG_END,
};

static const mcpg_config_field watch_fields[] = {
    MCPG_CFG_INT_FIELD(manifest, watch_shards, "shards", "16", 1, 1024,
                       "shards the watched resources (bindings[].watch) fall into, each polled "
                       "by one replica of a fleet"),
    MCPG_CFG_INT_FIELD(manifest, watch_lease_ms, "lease_ms", "6000", 500, 600000,
                       "how long a replica holds a shard's lease (renewed every third of it)"),
    MCPG_CONFIG_END,
};

static const mcpg_config_field metrics_fields[] = {
    MCPG_CFG_INT_FIELD(manifest, metrics_max_tools, "max_tools",
                       SETTING_TEXT(METRICS_MAX_TOOLS_DEFAULT), 0, METRICS_MAX_TOOLS_LIMIT,
                       "tool names with series of their own in mcpg_tool_calls_total; later "
                       "ones count as tool=\"(other)\"; a reload cannot change it"),
    MCPG_CONFIG_END,
};

static const mcpg_config_field pins_fields[] = {
    MCPG_CFG_STRING_FIELD(manifest, pins_file, "file", NULL,
                          "the pins file, relative to the manifest's folder (mcpg pins approve "
                          "writes it; missing: nothing is approved yet); unset: no pins"),
    MCPG_CFG_ENUM_FIELD(manifest, pins_on_change_name, "on_change", "\"hide\"", "warn|hide|block",
                        "a definition that differs from its pin, or has none: served and "
                        "audited (warn), left out of lists and its calls refused (hide), or "
                        "the whole backend so (block); bindings[].pins overrides it"),
    MCPG_CONFIG_END,
};

static const mcpg_config_field cluster_fields[] = {
    MCPG_CFG_ENUM_FIELD(manifest, cluster_kind, "kind", "\"single_node\"", "single_node|nats|redis",
                        "where the gateway's shared state is: this process, or a fleet's store "
                        "(then modules declares its coordinator_<kind> instance)"),
    MCPG_CFG_STRING_FIELD(manifest, cluster_path, "path", NULL,
                          "single_node only: a journal file for the default coordinator; "
                          "unset: memory only"),
    MCPG_CONFIG_END,
};

const settings_section settings_sections[] = {
    {"gateway", gateway_fields, 0},
    {"gateway.pool", pool_fields, offsetof(manifest, json.pool)},
    {"gateway.watch", watch_fields, offsetof(manifest, json.watch)},
    {"gateway.metrics", metrics_fields, offsetof(manifest, json.metrics)},
    {"gateway.pins", pins_fields, offsetof(manifest, json.pins)},
    {"cluster", cluster_fields, 0},
    {NULL, NULL, 0},
};

/* Whether section lies inside top ("gateway.pool" inside "gateway"). */
static bool nested_in(const settings_section *s, const char *top) {
    size_t n = strlen(top);
    return strncmp(s->path, top, n) == 0 && s->path[n] == '.';
}

typedef struct section_report {
    const char *path;
    settings_err_fn err;
    void *ctx;
} section_report;

static void at_section_path(void *ctx, const char *key, const char *message) {
    const section_report *r = ctx;
    char p[256];
    snprintf(p, sizeof p, "%s%s%s", r->path, *key ? "." : "", key);
    r->err(r->ctx, p, message);
}

static void parse_section(manifest *m, const settings_section *s, const char *text,
                          settings_err_fn err, void *ctx) {
    section_report r = {s->path, err, ctx};
    mcpg_config_parse(s->fields, text, text ? strlen(text) : 0, m, at_section_path, &r);
}

static const settings_section *find_section(const char *path) {
    for (const settings_section *s = settings_sections; s->path; s++)
        if (strcmp(s->path, path) == 0) return s;
    return NULL;
}

void settings_parse(manifest *m, struct json_t *root, const char *top, settings_err_fn err,
                    void *ctx) {
    json_t *value = json_object_get(root, top);
    char *text = value ? json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    parse_section(m, find_section(top), text, err, ctx);
    free(text);
    for (const settings_section *s = settings_sections; s->path; s++)
        if (nested_in(s, top))
            parse_section(m, s, *(char **)(void *)((char *)m + s->text_offset), err, ctx);
}

void settings_free(manifest *m) {
    for (const settings_section *s = settings_sections; s->path; s++)
        mcpg_config_free(s->fields, m);
}
