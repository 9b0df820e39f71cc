/* The gateway's own settings (kernel/settings.c): a manifest that says
 * nothing gets each default the gateway has always had, one that says
 * everything gets what it says, and each problem is reported once at its
 * key path, with the manifest refused. */
#include "mcpg/check.h"
#include "kernel.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static manifest *parse(const char *sections, errlist *errs) {
    char text[2048];
    snprintf(text, sizeof text,
             "{%s%s\"modules\":[{\"name\":\"mock\",\"module\":\"backend_mock\"}]}", sections,
             *sections ? "," : "");
    return manifest_parse("/tmp/m.json", text, "/tmp", errs);
}

static void test_defaults(void) {
    errlist errs = {0};
    manifest *m = parse("", &errs);
    MCPG_REQUIRE(m, "a manifest without gateway or cluster is accepted");
    char host[256] = "mcpg";
    gethostname(host, sizeof host - 1);
    MCPG_CHECK(strcmp(m->name, "mcpg") == 0, "name %s", m->name);
    MCPG_CHECK(strcmp(m->id, host) == 0, "id %s, expected the host name %s", m->id, host);
    MCPG_CHECK(m->n_listen == 1 && strcmp(m->listen[0], "127.0.0.1:8787") == 0, "listen");
    MCPG_CHECK(m->workers == 0 && m->log_level == MCPG_LOG_INFO && !m->anonymous, "workers, log");
    MCPG_CHECK(m->runtime_dir == NULL && m->secret_env == NULL, "runtime_dir, secret_env unset");
    MCPG_CHECK(strcmp(m->module_dir, "/modules") == 0 || strstr(m->module_dir, "/../modules"),
               "module_dir beside the binary: %s", m->module_dir);
    MCPG_CHECK(m->drain_timeout_ms == 10000 && m->reload_drain_ms == 5000 &&
                   m->request_state_ttl_ms == 600000 && m->max_calls_per_worker == 4096 &&
                   m->list_page_size == 500,
               "gateway's numbers");
    MCPG_CHECK(m->pool_threads == 4 && m->pool_queue == 1024, "gateway.pool");
    MCPG_CHECK(m->watch_shards == 16 && m->watch_lease_ms == 6000, "gateway.watch");
    MCPG_CHECK(m->metrics_max_tools == METRICS_MAX_TOOLS_DEFAULT, "gateway.metrics");
    MCPG_CHECK(strcmp(m->transport.module, "transport_http") == 0 && !m->transport.config_json,
               "transport");
    MCPG_CHECK(strcmp(m->cluster_kind, "single_node") == 0 && !m->cluster_path, "cluster");
    manifest_free(m);
    errlist_free(&errs);
}

static void test_every_key(void) {
    errlist errs = {0};
    manifest *m = parse(
        "\"gateway\":{\"name\":\"gw\",\"id\":\"r1\",\"listen\":[\"0.0.0.0:1\",\"[::1]:2\"],"
        "\"workers\":3,\"module_dir\":\"mods\",\"runtime_dir\":\"/tmp/r\",\"log_level\":\"debug\","
        "\"drain_timeout_ms\":0,\"reload_drain_ms\":7,\"max_calls_per_worker\":9,"
        "\"list_page_size\":11,\"request_state_ttl_ms\":1000,\"anonymous\":true,"
        "\"pool\":{\"threads\":2,\"queue\":5},\"watch\":{\"shards\":1,\"lease_ms\":500},"
        "\"metrics\":{\"max_tools\":0},\"transport\":\"transport_x\","
        "\"server\":{\"access_log\":false}},"
        "\"cluster\":{\"kind\":\"redis\"}",
        &errs);
    MCPG_REQUIRE(m, "every key accepted");
    MCPG_CHECK(strcmp(m->name, "gw") == 0 && strcmp(m->id, "r1") == 0, "name, id");
    MCPG_CHECK(m->n_listen == 2 && strcmp(m->listen[1], "[::1]:2") == 0, "listen");
    MCPG_CHECK(strcmp(m->module_dir, "/tmp/mods") == 0, "module_dir from the manifest's folder: %s",
               m->module_dir);
    MCPG_CHECK(strcmp(m->runtime_dir, "/tmp/r") == 0 && m->log_level == MCPG_LOG_DEBUG &&
                   m->anonymous,
               "runtime_dir, log_level, anonymous");
    MCPG_CHECK(m->workers == 3 && m->drain_timeout_ms == 0 && m->reload_drain_ms == 7 &&
                   m->max_calls_per_worker == 9 && m->list_page_size == 11 &&
                   m->request_state_ttl_ms == 1000,
               "gateway's numbers");
    MCPG_CHECK(m->pool_threads == 2 && m->pool_queue == 5 && m->watch_shards == 1 &&
                   m->watch_lease_ms == 500 && m->metrics_max_tools == 0,
               "nested objects");
    MCPG_CHECK(strcmp(m->transport.module, "transport_x") == 0 &&
                   strcmp(m->transport.config_json, "{\"access_log\":false}") == 0,
               "transport and its config as text: %s", m->transport.config_json);
    MCPG_CHECK(strcmp(m->cluster_kind, "redis") == 0, "cluster.kind");
    manifest_free(m);
    errlist_free(&errs);
}

/* sections refused with exactly these lines, in any order. */
static void expect_refused(const char *sections, const char *const *lines, size_t n) {
    errlist errs = {0};
    manifest *m = parse(sections, &errs);
    MCPG_CHECK(!m && errs.count == n, "%s: refused with %zu line(s), got %zu", sections, n,
               errs.count);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (size_t j = 0; j < errs.count; j++)
            found |= strcmp(errs.lines[j], lines[i]) == 0;
        MCPG_CHECK(found, "%s: no line \"%s\"", sections, lines[i]);
    }
    if (m || errs.count != n) errlist_print(&errs);
    if (m) manifest_free(m);
    errlist_free(&errs);
}

static void test_refused(void) {
    static const char *const not_objects[] = {"/tmp/m.json: gateway: expected an object",
                                              "/tmp/m.json: cluster: expected an object"};
    expect_refused("\"gateway\":[],\"cluster\":3", not_objects, 2);
    static const char *const nested[] = {
        "/tmp/m.json: gateway.pool: expected an object",
        "/tmp/m.json: gateway.watch.shards: must be between 1 and 1024",
        "/tmp/m.json: gateway.metrics.max_tool: unknown key (did you mean \"max_tools\"?)",
        "/tmp/m.json: gateway.server: expected an object"};
    expect_refused("\"gateway\":{\"pool\":null,\"watch\":{\"shards\":0},"
                   "\"metrics\":{\"max_tool\":1},\"server\":true}",
                   nested, 4);
    static const char *const scalars[] = {
        "/tmp/m.json: gateway.workers: expected an integer",
        "/tmp/m.json: gateway.log_level: must be one of: error, warn, info, debug",
        "/tmp/m.json: gateway.anonymous: expected a boolean",
        "/tmp/m.json: gateway.wokers: unknown key (did you mean \"workers\"?)",
        "/tmp/m.json: cluster.kind: must be one of: single_node, nats, redis"};
    expect_refused("\"gateway\":{\"workers\":1.5,\"log_level\":\"loud\",\"anonymous\":1,"
                   "\"wokers\":1},\"cluster\":{\"kind\":\"etcd\"}",
                   scalars, 5);
}

int main(void) {
    test_defaults();
    test_every_key();
    test_refused();
    return MCPG_CHECK_EXIT("test_settings");
}
