/* The manifest: read, expand ${VAR}, parse, and validate everything before
 * anything starts. Every problem is reported (not just the first) as
 * "FILE: path.to.key: what is wrong". Module configs are checked against each
 * module's declared schema and its validate() op, so --check sees exactly what
 * a start would. */
#include "kernel.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct mctx {
    const char *file;
    errlist *errs;
    manifest *m;
    char *module_dir_written; /* gateway.module_dir as the manifest says it, or NULL */
} mctx;

struct mcpg_report {
    errlist *errs;
    const char *file;
    char prefix[160];
};

static void err(mctx *c, const char *path, const char *fmt, ...) MCPG_PRINTF(3, 4);
static void err(mctx *c, const char *path, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    errlist_add(c->errs, c->file, path, "%s", msg);
}

static void join(char *out, size_t cap, const char *base, const char *key) {
    snprintf(out, cap, "%s%s%s", base, *base ? "." : "", key);
}

/* Unknown keys are errors, with a hint when a known key is close. */
static void check_keys(mctx *c, json_t *obj, const char *path, const char *const *known,
                       size_t n) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        size_t i;
        for (i = 0; i < n; i++)
            if (strcmp(key, known[i]) == 0) break;
        if (i < n) continue;
        char p[256];
        join(p, sizeof p, path, key);
        const char *hint = mcpg_did_you_mean(key, known, n);
        if (hint)
            err(c, p, "unknown key (did you mean \"%s\"?)", hint);
        else
            err(c, p, "unknown key");
    }
}

static json_t *get_object(mctx *c, json_t *parent, const char *key, const char *path) {
    json_t *v = json_object_get(parent, key);
    if (!v) return NULL;
    if (!json_is_object(v)) {
        err(c, path, "expected an object");
        return NULL;
    }
    return v;
}

static int64_t get_int(mctx *c, json_t *obj, const char *key, const char *base, int64_t dflt,
                       int64_t min, int64_t max) {
    json_t *v = json_object_get(obj, key);
    if (!v) return dflt;
    char p[256];
    join(p, sizeof p, base, key);
    if (!json_is_integer(v)) {
        err(c, p, "expected an integer");
        return dflt;
    }
    int64_t x = json_integer_value(v);
    if (x < min || x > max) {
        err(c, p, "must be between %lld and %lld", (long long)min, (long long)max);
        return dflt;
    }
    return x;
}

static char *get_string(mctx *c, json_t *obj, const char *key, const char *base,
                        const char *dflt) {
    json_t *v = json_object_get(obj, key);
    if (!v) return dflt ? strdup(dflt) : NULL;
    if (!json_is_string(v)) {
        char p[256];
        join(p, sizeof p, base, key);
        err(c, p, "expected a string");
        return dflt ? strdup(dflt) : NULL;
    }
    return strdup(json_string_value(v));
}

static bool get_bool(mctx *c, json_t *obj, const char *key, const char *base, bool dflt) {
    json_t *v = json_object_get(obj, key);
    if (!v) return dflt;
    if (!json_is_boolean(v)) {
        char p[256];
        join(p, sizeof p, base, key);
        err(c, p, "expected a boolean");
        return dflt;
    }
    return json_is_true(v);
}

/* The list of strings v (at path p); NULL/0 when v is NULL. */
static char **strings_of(mctx *c, json_t *v, const char *p, size_t *n) {
    *n = 0;
    if (!v) return NULL;
    if (!json_is_array(v)) {
        err(c, p, "expected a list of strings");
        return NULL;
    }
    char **out = calloc(json_array_size(v) + 1, sizeof *out);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e)) {
            char pi[300];
            snprintf(pi, sizeof pi, "%s[%zu]", p, i);
            err(c, pi, "expected a string");
            continue;
        }
        out[(*n)++] = strdup(json_string_value(e));
    }
    return out;
}

static char **get_strings(mctx *c, json_t *obj, const char *key, const char *base, size_t *n) {
    char p[256];
    join(p, sizeof p, base, key);
    return strings_of(c, json_object_get(obj, key), p, n);
}

/* A value the settings tables kept as JSON text (NULL when absent). */
static json_t *setting_value(const char *text) {
    return text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
}

static bool valid_hostport(const char *s) {
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) return false;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    return *end == '\0' && colon[1] != '\0' && port > 0 && port < 65536;
}

/* gateway.log_level's words (the settings table's enum) in MCPG_LOG_* order. */
static int parse_log_level(const char *s) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return MCPG_LOG_INFO;
}

static char *resolve_dir(const char *base_dir, const char *p) {
    if (p[0] == '/') return strdup(p);
    size_t n = strlen(base_dir) + strlen(p) + 2;
    char *out = malloc(n);
    snprintf(out, n, "%s/%s", base_dir, p);
    return out;
}

/* gateway.listen (its default is the settings table's), or --listen. */
static void parse_listen(mctx *c, const char *listen_override) {
    manifest *m = c->m;
    if (listen_override) {
        m->listen = calloc(2, sizeof *m->listen);
        m->listen[0] = strdup(listen_override);
        m->n_listen = 1;
        if (!valid_hostport(listen_override))
            errlist_add(c->errs, "--listen", "", "expected HOST:PORT, got \"%s\"", listen_override);
        return;
    }
    json_t *list = setting_value(m->json.listen);
    m->listen = strings_of(c, list, "gateway.listen", &m->n_listen);
    json_decref(list);
    if (m->n_listen > 16) err(c, "gateway.listen", "at most 16 addresses");
    if (m->n_listen == 0) err(c, "gateway.listen", "needs at least one HOST:PORT");
    for (size_t i = 0; i < m->n_listen; i++)
        if (!valid_hostport(m->listen[i])) {
            char p[64];
            snprintf(p, sizeof p, "gateway.listen[%zu]", i);
            err(c, p, "expected HOST:PORT");
        }
}

/* gateway.secret_env: the variable holding the secret every replica of a
 * fleet shares, from which the task key comes (task_seal.c); unset, the key
 * is random per process. */
static void parse_secret(mctx *c) {
    const char *var = c->m->secret_env;
    if (!var) {
        task_seal_configure(NULL, 0);
        return;
    }
    const char *v = getenv(var);
    if (!v || strlen(v) < 16) {
        err(c, "gateway.secret_env", "the variable %s is %s: it must hold at least 16 bytes of "
            "secret (the same on every replica)", var, v ? "shorter than 16 bytes" : "not set");
    } else {
        task_seal_configure(v, strlen(v));
    }
}

static void compile_redactor(mctx *c) {
    manifest *m = c->m;
    json_t *redact = setting_value(m->json.redact), *audit = setting_value(m->json.audit);
    m->redact = redactor_compile(redact, audit, c->file, c->errs);
    json_decref(redact);
    json_decref(audit);
}

/* gateway.module_dir as written must name a folder: say where it led when it
 * does not (-1: then no module is loaded from it, each would say the same). */
static int check_module_dir(mctx *c, const char *written, const char *resolved) {
    if (!written) return 0; /* the default folder: each module's error names it */
    struct stat st;
    bool exists = stat(resolved, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) return 0;
    char cwd[PATH_MAX] = "", shown[PATH_MAX * 2];
    if (resolved[0] != '/' && getcwd(cwd, sizeof cwd))
        snprintf(shown, sizeof shown, "%s/%s", cwd,
                 strncmp(resolved, "./", 2) == 0 ? resolved + 2 : resolved);
    else
        snprintf(shown, sizeof shown, "%s", resolved);
    err(c, "gateway.module_dir", "\"%s\" (resolved to %s): %s", written, shown,
        exists ? "not a folder" : "no such folder");
    return -1;
}

/* Where an installed gateway keeps its modules (make install, the Debian
 * package), then where a build tree does, each from the binary's folder. */
static const char *const module_dir_layouts[] = {"../lib/mcpg/modules", "../modules"};

static char *module_dir_default(const char *exe_dir) {
    char dir[PATH_MAX], real[PATH_MAX];
    size_t n = sizeof module_dir_layouts / sizeof module_dir_layouts[0];
    for (size_t i = 0; i < n; i++) {
        snprintf(dir, sizeof dir, "%s/%s", exe_dir, module_dir_layouts[i]);
        if (realpath(dir, real)) return strdup(real);
    }
    return strdup(dir); /* neither exists: the load error names the last one tried */
}

/* gateway.module_dir from the manifest's folder; unset or "": beside the
 * binary (module_dir_default). */
static void resolve_module_dir(manifest *m, const char *exe_dir) {
    char *written = m->module_dir;
    if (written && *written)
        m->module_dir = resolve_dir(m->dir, written);
    else
        m->module_dir = module_dir_default(exe_dir);
    free(written);
}

/* A module pin: 64 hex digits (kept lowercase, as sha256sum and
 * `mcpg modules --hash` print them), or an error at key and NULL. */
static char *parse_pin(mctx *c, char *text, const char *key) {
    if (!text) return NULL;
    size_t n = strlen(text);
    if (n != 64 || strspn(text, "0123456789abcdefABCDEF") != 64) {
        err(c, key, "expected the module file's SHA-256: 64 hexadecimal digits "
            "(mcpg modules --hash shows it)");
        free(text);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) text[i] = (char)tolower((unsigned char)text[i]);
    return text;
}

/* gateway.server goes to the transport as its config, which must be an
 * object: compact JSON text starts with '{' for an object and for no other
 * value. */
static void check_server(mctx *c) {
    decl_instance *t = &c->m->transport;
    if (!t->config_json || t->config_json[0] == '{') return;
    err(c, "gateway.server", "expected an object");
    free(t->config_json);
    t->config_json = NULL;
}

/* gateway.pins: the file made absolute (relative to the manifest's folder). */
static void parse_pins(mctx *c) {
    manifest *m = c->m;
    m->pins_on_change = pins_mode_of(m->pins_on_change_name);
    if (!m->pins_file) return;
    if (!*m->pins_file) {
        err(c, "gateway.pins.file", "is empty");
        return;
    }
    if (m->pins_file[0] == '/' || !m->dir) return;
    size_t n = strlen(m->dir) + strlen(m->pins_file) + 2;
    char *abs = malloc(n);
    if (!abs) return;
    snprintf(abs, n, "%s/%s", m->dir, m->pins_file);
    free(m->pins_file);
    m->pins_file = abs;
}

static void on_setting_error(void *ctx, const char *path, const char *message) {
    err(ctx, path, "%s", message);
}

/* gateway.*: the settings tables (kernel/settings.c) read every key; what
 * follows is what their values mean beyond their type and bounds. */
static void parse_gateway(mctx *c, json_t *root, const char *listen_override,
                          const char *exe_dir) {
    manifest *m = c->m;
    settings_parse(m, root, "gateway", on_setting_error, c);
    if (!m->id) {
        char host[256] = "mcpg";
        gethostname(host, sizeof host - 1);
        m->id = strdup(host);
    }
    m->log_level = parse_log_level(m->log_level_name);
    parse_secret(c);
    compile_redactor(c);
    parse_listen(c, listen_override);
    parse_pins(c);
    if (m->module_dir && *m->module_dir) c->module_dir_written = strdup(m->module_dir);
    resolve_module_dir(m, exe_dir);
    m->transport.name = strdup("http");
    m->transport.sha256 = parse_pin(c, m->transport.sha256, "gateway.transport_sha256");
    check_server(c);
}

static void parse_instance(mctx *c, json_t *obj, size_t i, decl_instance *d) {
    static const char *const keys[] = {"name", "module", "config", "inline_dispatch",
                                       "timeout_ms", "wait_for_lists", "sha256"};
    char base[64];
    snprintf(base, sizeof base, "modules[%zu]", i);
    if (!json_is_object(obj)) {
        err(c, base, "expected an object");
        return;
    }
    check_keys(c, obj, base, keys, sizeof keys / sizeof *keys);
    char p[96];
    d->name = get_string(c, obj, "name", base, NULL);
    d->module = get_string(c, obj, "module", base, NULL);
    snprintf(p, sizeof p, "%s.name", base);
    if (!d->name)
        err(c, p, "is required");
    else if (!mcpg_name_valid(d->name, strlen(d->name)))
        err(c, p, "must match ^[a-zA-Z0-9_-]{1,64}$");
    snprintf(p, sizeof p, "%s.module", base);
    if (!d->module)
        err(c, p, "is required");
    else if (!mcpg_name_valid(d->module, strlen(d->module)))
        err(c, p, "must match ^[a-zA-Z0-9_-]{1,64}$");
    json_t *cfg = json_object_get(obj, "config");
    snprintf(p, sizeof p, "%s.config", base);
    if (cfg && !json_is_object(cfg))
        err(c, p, "expected an object");
    else if (cfg)
        d->config_json = json_dumps(cfg, JSON_COMPACT);
    d->inline_choice = json_object_get(obj, "inline_dispatch")
                           ? get_bool(c, obj, "inline_dispatch", base, false)
                           : -1;
    d->lists_later = !get_bool(c, obj, "wait_for_lists", base, true);
    d->timeout_ms = get_int(c, obj, "timeout_ms", base, 30000, 1, 86400000);
    snprintf(p, sizeof p, "%s.sha256", base);
    d->sha256 = parse_pin(c, get_string(c, obj, "sha256", base, NULL), p);
}

static void parse_modules(mctx *c, json_t *root) {
    json_t *mods = json_object_get(root, "modules");
    if (!mods) return;
    if (!json_is_array(mods)) {
        err(c, "modules", "expected a list of instances");
        return;
    }
    manifest *m = c->m;
    m->instances = calloc(json_array_size(mods) + 1, sizeof *m->instances);
    size_t i;
    json_t *e;
    json_array_foreach(mods, i, e) {
        decl_instance *d = &m->instances[m->n_instances++];
        parse_instance(c, e, i, d);
        for (size_t j = 0; d->name && j < i; j++)
            if (m->instances[j].name && strcmp(m->instances[j].name, d->name) == 0) {
                char p[64];
                snprintf(p, sizeof p, "modules[%zu].name", i);
                err(c, p, "duplicate instance name \"%s\"", d->name);
            }
    }
}

/* The top-level "events" section: the events pipeline's instance, named
 * "events", running the module its "module" names (default "events") with
 * the section's other keys as its config (so a setting reads
 * events.inbox_max_rows). */
static void parse_events(mctx *c, json_t *root) {
    json_t *ev = json_object_get(root, "events");
    if (!ev) return;
    if (!json_is_object(ev)) {
        err(c, "events", "expected an object");
        return;
    }
    manifest *m = c->m;
    for (size_t i = 0; i < m->n_instances; i++)
        if (m->instances[i].name && strcmp(m->instances[i].name, "events") == 0) {
            char p[64];
            snprintf(p, sizeof p, "modules[%zu].name", i);
            err(c, p, "\"events\" is the name of the events pipeline's instance (the "
                "top-level \"events\" section): choose another");
            return;
        }
    json_t *cfg = json_deep_copy(ev);
    json_t *module = json_object_get(cfg, "module");
    if (module && !json_is_string(module)) err(c, "events.module", "expected a string");
    char *pin = get_string(c, cfg, "sha256", "events", NULL);
    m->instances = realloc(m->instances, (m->n_instances + 1) * sizeof *m->instances);
    decl_instance *d = &m->instances[m->n_instances++];
    memset(d, 0, sizeof *d);
    d->name = strdup("events");
    d->module = strdup(json_is_string(module) ? json_string_value(module) : "events");
    d->section = "events";
    d->timeout_ms = 30000;
    if (!mcpg_name_valid(d->module, strlen(d->module)))
        err(c, "events.module", "must match ^[a-zA-Z0-9_-]{1,64}$");
    d->sha256 = parse_pin(c, pin, "events.sha256");
    json_object_del(cfg, "module");
    json_object_del(cfg, "sha256");
    d->config_json = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
}

static const char *const stage_names[STAGE_COUNT] = {"identity", "policy", "limits", "audit"};
static const uint32_t stage_kinds[STAGE_COUNT] = {MCPG_KIND_IDENTITY, MCPG_KIND_POLICY,
                                                  MCPG_KIND_LIMITS, MCPG_KIND_AUDIT};

/* A pipeline object at parent.key (key path `at`) into its stage lists:
 * false when there is none. */
static bool parse_stages(mctx *c, json_t *parent, const char *at, char **stage[STAGE_COUNT],
                         size_t n_stage[STAGE_COUNT]) {
    json_t *pl = get_object(c, parent, "pipeline", at);
    if (!pl) return false;
    check_keys(c, pl, at, stage_names, STAGE_COUNT);
    for (int s = 0; s < STAGE_COUNT; s++) stage[s] = get_strings(c, pl, stage_names[s], at, &n_stage[s]);
    return true;
}

static void parse_pipeline(mctx *c, json_t *root) {
    parse_stages(c, root, "pipeline", c->m->stage, c->m->n_stage);
}

/* An object of strings ({"from": "to", ...}) at obj.key into pairs. */
static void get_pairs(mctx *c, json_t *obj, const char *key, const char *base, name_pairs *out) {
    json_t *o = json_object_get(obj, key);
    if (!o) return;
    char p[128];
    snprintf(p, sizeof p, "%s.%s", base, key);
    if (!json_is_object(o)) {
        err(c, p, "expected an object of strings");
        return;
    }
    size_t n = json_object_size(o);
    out->from = calloc(n + 1, sizeof *out->from);
    out->to = calloc(n + 1, sizeof *out->to);
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (!json_is_string(v)) {
            char kp[256];
            snprintf(kp, sizeof kp, "%s.%s", p, k);
            err(c, kp, "expected a string");
            continue;
        }
        out->from[out->n] = strdup(k);
        out->to[out->n++] = strdup(json_string_value(v));
    }
}

/* bindings[i].watch: {"interval_ms": N, "resources": [uri, ...]} (kernel/watch.c) */
static void parse_binding_watch(mctx *c, json_t *e, const char *base, decl_binding *b) {
    char p[128];
    snprintf(p, sizeof p, "%s.watch", base);
    json_t *w = get_object(c, e, "watch", p);
    if (!w) return;
    static const char *const keys[] = {"interval_ms", "resources"};
    check_keys(c, w, p, keys, 2);
    if (!json_object_get(w, "interval_ms")) {
        char q[160];
        snprintf(q, sizeof q, "%s.interval_ms", p);
        err(c, q, "is required");
    }
    b->watch_interval_ms = get_int(c, w, "interval_ms", p, 10000, 100, 86400000);
    b->watch_uris = get_strings(c, w, "resources", p, &b->n_watch_uris);
    b->watch = true;
}

/* bindings[].pins: how this binding's backend is held to its pins. */
static void parse_binding_pins(mctx *c, json_t *e, const char *base, decl_binding *b) {
    b->pins_name = get_string(c, e, "pins", base, NULL);
    if (!b->pins_name) return;
    char p[128];
    snprintf(p, sizeof p, "%s.pins", base);
    b->pins_mode = pins_mode_of(b->pins_name);
    if (b->pins_mode < 0) err(c, p, "expected warn, hide, block or off, not \"%s\"", b->pins_name);
    else if (!c->m->pins_file) err(c, p, "needs gateway.pins.file (the pins to hold it to)");
}

/* The bindings at key path `at` (an array, or absent: *all set, one per
 * backend) into *out. A server's may not watch: a watched resource is the
 * gateway's, told to every subscriber, so it is watched at the top level. */
static void parse_binding_list(mctx *c, json_t *bs, const char *at, bool top,
                               decl_binding **out, size_t *n_out, bool *all) {
    if (!bs) {
        *all = true;
        return;
    }
    if (!json_is_array(bs)) {
        err(c, at, "expected a list of bindings");
        return;
    }
    static const char *const keys[] = {"backend", "prefix", "separator", "allow", "deny",
                                       "allow_resources", "deny_resources", "rename",
                                       "describe", "pins", "watch"};
    *out = calloc(json_array_size(bs) + 1, sizeof **out);
    size_t i;
    json_t *e;
    json_array_foreach(bs, i, e) {
        char base[96];
        snprintf(base, sizeof base, "%s[%zu]", at, i);
        if (!json_is_object(e)) {
            err(c, base, "expected an object");
            continue;
        }
        check_keys(c, e, base, keys, sizeof keys / sizeof *keys);
        if (!top && json_object_get(e, "watch")) {
            char p[128];
            snprintf(p, sizeof p, "%s.watch", base);
            err(c, p, "a server's binding does not watch: watch the backend's resources in "
                "the top-level bindings (every server's subscribers are told)");
        }
        decl_binding *b = &(*out)[(*n_out)++];
        b->backend = get_string(c, e, "backend", base, NULL);
        b->prefix = get_string(c, e, "prefix", base, "");
        b->separator = get_string(c, e, "separator", base, "_");
        b->allow = get_strings(c, e, "allow", base, &b->n_allow);
        b->deny = get_strings(c, e, "deny", base, &b->n_deny);
        b->allow_resources = get_strings(c, e, "allow_resources", base, &b->n_allow_resources);
        b->deny_resources = get_strings(c, e, "deny_resources", base, &b->n_deny_resources);
        get_pairs(c, e, "rename", base, &b->rename);
        get_pairs(c, e, "describe", base, &b->describe);
        if (top) parse_binding_watch(c, e, base, b);
        parse_binding_pins(c, e, base, b);
        for (size_t k = 0; k < b->rename.n; k++)
            if (!mcpg_name_valid(b->rename.to[k], strlen(b->rename.to[k]))) {
                char p[160];
                snprintf(p, sizeof p, "%s.rename.%s", base, b->rename.from[k]);
                err(c, p, "\"%s\" does not match ^[a-zA-Z0-9_-]{1,64}$", b->rename.to[k]);
            }
        if (!b->backend) {
            char p[128];
            snprintf(p, sizeof p, "%s.backend", base);
            err(c, p, "is required");
        }
    }
}

static void parse_bindings(mctx *c, json_t *root) {
    manifest *m = c->m;
    parse_binding_list(c, json_object_get(root, "bindings"), "bindings", true, &m->bindings,
                       &m->n_bindings, &m->default_bindings);
}

/* ---- virtual servers ---- */

/* The paths the transport answers itself: a server there would never be reached. */
static bool path_reserved(const char *p) {
    static const char *const fixed[] = {"/mcp", "/metrics", "/healthz", "/readyz",
                                        "/admin/reload"};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (strcmp(p, fixed[i]) == 0) return true;
    return strncmp(p, "/webhooks/", 10) == 0 || strncmp(p, "/.well-known/", 13) == 0;
}

static bool path_valid(const char *p) {
    if (p[0] != '/' || strlen(p) > 200) return false;
    for (const char *q = p; *q; q++)
        if (*q <= ' ' || *q == '?' || *q == '#' || *q == '%' || *q == 0x7f) return false;
    return true;
}

static void parse_server_info(mctx *c, json_t *e, const char *base, decl_server *sv) {
    char p[128];
    snprintf(p, sizeof p, "%s.server_info", base);
    json_t *info = get_object(c, e, "server_info", p);
    if (!info) return;
    static const char *const keys[] = {"name", "version", "title"};
    check_keys(c, info, p, keys, 3);
    const char *k;
    json_t *v;
    json_object_foreach(info, k, v) if (!json_is_string(v)) {
        char q[160];
        snprintf(q, sizeof q, "%s.%s", p, k);
        err(c, q, "expected a string");
    }
    if (!json_object_get(info, "name") || !json_object_get(info, "version")) {
        err(c, p, "needs \"name\" and \"version\"");
        return;
    }
    sv->info_json = json_dumps(info, JSON_COMPACT | JSON_SORT_KEYS);
}

static void parse_server(mctx *c, json_t *e, const char *base, decl_server *sv) {
    static const char *const keys[] = {"name", "path", "host", "bindings", "pipeline",
                                       "instructions", "server_info"};
    check_keys(c, e, base, keys, sizeof keys / sizeof *keys);
    sv->name = get_string(c, e, "name", base, NULL);
    char p[160];
    snprintf(p, sizeof p, "%s.name", base);
    if (!sv->name) err(c, p, "is required");
    else if (!mcpg_server_name_valid(sv->name, strlen(sv->name)))
        err(c, p, "\"%s\" does not match " MCPG_SERVER_NAME_PATTERN, sv->name);
    sv->path = get_string(c, e, "path", base, NULL);
    if (!sv->path && sv->name && mcpg_server_name_valid(sv->name, strlen(sv->name))) {
        char dflt[80];
        snprintf(dflt, sizeof dflt, "/mcp/%s", sv->name);
        sv->path = strdup(dflt);
    }
    snprintf(p, sizeof p, "%s.path", base);
    if (sv->path && !path_valid(sv->path))
        err(c, p, "\"%s\" is not a path (\"/\" then at most 200 characters, no space, ?, # or %%)",
            sv->path);
    else if (sv->path && path_reserved(sv->path))
        err(c, p, "\"%s\" is a path the gateway serves itself", sv->path);
    sv->host = get_string(c, e, "host", base, NULL);
    sv->instructions = get_string(c, e, "instructions", base, NULL);
    parse_server_info(c, e, base, sv);
    snprintf(p, sizeof p, "%s.bindings", base);
    parse_binding_list(c, json_object_get(e, "bindings"), p, false, &sv->bindings,
                       &sv->n_bindings, &sv->default_bindings);
    snprintf(p, sizeof p, "%s.pipeline", base);
    sv->own_pipeline = parse_stages(c, e, p, sv->stage, sv->n_stage);
}

/* Two servers at one path need different host names, each set. */
static void check_server_paths(mctx *c) {
    manifest *m = c->m;
    for (size_t i = 0; i < m->n_servers; i++)
        for (size_t j = 0; j < i; j++) {
            const decl_server *a = &m->servers[j], *b = &m->servers[i];
            char p[64];
            snprintf(p, sizeof p, "servers[%zu].name", i);
            if (a->name && b->name && strcmp(a->name, b->name) == 0)
                err(c, p, "\"%s\" is the name of servers[%zu] too", b->name, j);
            snprintf(p, sizeof p, "servers[%zu].path", i);
            bool same_host = !a->host || !b->host || strcasecmp(a->host, b->host) == 0;
            if (a->path && b->path && strcmp(a->path, b->path) == 0 && same_host)
                err(c, p, "\"%s\" is served by servers[%zu] too (give each a different host)",
                    b->path, j);
        }
}

static void parse_servers(mctx *c, json_t *root) {
    json_t *list = json_object_get(root, "servers");
    if (!list) return;
    if (!json_is_array(list)) {
        err(c, "servers", "expected a list of servers");
        return;
    }
    manifest *m = c->m;
    m->servers = calloc(json_array_size(list) + 1, sizeof *m->servers);
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        char base[32];
        snprintf(base, sizeof base, "servers[%zu]", i);
        if (!json_is_object(e)) err(c, base, "expected an object");
        else parse_server(c, e, base, &m->servers[m->n_servers++]);
    }
    check_server_paths(c);
}

static decl_instance *find_instance(manifest *m, const char *name) {
    for (size_t i = 0; i < m->n_instances; i++)
        if (m->instances[i].name && strcmp(m->instances[i].name, name) == 0)
            return &m->instances[i];
    return NULL;
}

/* ---- resolving modules and their configs ---- */

static const char *reuse_runtime_dir;

void manifest_use_runtime_dir(const char *dir) { reuse_runtime_dir = dir; }

static int prepare_runtime_dir(mctx *c) {
    manifest *m = c->m;
    if (reuse_runtime_dir) { /* a reload: the running gateway's folder */
        free(m->runtime_dir);
        m->runtime_dir = strdup(reuse_runtime_dir);
        m->borrowed_runtime_dir = true;
        return 0;
    }
    if (m->runtime_dir && *m->runtime_dir) {
        if (mkdir(m->runtime_dir, 0700) != 0 && errno != EEXIST) {
            err(c, "gateway.runtime_dir", "cannot create %s: %s", m->runtime_dir, strerror(errno));
            return -1;
        }
        return 0;
    }
    free(m->runtime_dir);
    const char *tmp = getenv("TMPDIR");
    runtime_dirs_sweep(tmp && *tmp ? tmp : "/tmp");
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/mcpg-%d-XXXXXX", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    if (!mkdtemp(tmpl)) {
        err(c, "gateway.runtime_dir", "cannot create a folder in %s: %s", tmp ? tmp : "/tmp",
            strerror(errno));
        m->runtime_dir = NULL;
        return -1;
    }
    m->runtime_dir = strdup(tmpl);
    return 0;
}

typedef struct cfg_err_ctx {
    mctx *c;
    const char *prefix;
} cfg_err_ctx;

static void on_config_error(void *ctx, const char *key, const char *message) {
    cfg_err_ctx *e = ctx;
    char p[320];
    snprintf(p, sizeof p, "%s%s%s", e->prefix, *key ? "." : "", key);
    err(e->c, p, "%s", message);
}

/* " (did you mean "NAME"?)" when the folder has a module file whose name is
 * close to the one asked for and none of that name; else "". */
static void module_hint(const char *dir, const char *name, char *out, size_t cap) {
    *out = '\0';
    DIR *d = opendir(dir);
    if (!d) return;
    char *stems[512];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < sizeof stems / sizeof *stems) {
        size_t len = strlen(de->d_name);
        if (len > 3 && strcmp(de->d_name + len - 3, ".so") == 0)
            stems[n++] = strndup(de->d_name, len - 3);
    }
    closedir(d);
    const char *close = mcpg_did_you_mean(name, (const char *const *)stems, n);
    if (close && strcmp(close, name) != 0) snprintf(out, cap, " (did you mean \"%s\"?)", close);
    for (size_t i = 0; i < n; i++) free(stems[i]);
}

/* Load the instance's module (once per file) and parse its config. */
static void resolve_instance(mctx *c, decl_instance *d, const char *pin_path,
                             const char *module_path, const char *config_path) {
    manifest *m = c->m;
    if (!d->module || !mcpg_name_valid(d->module, strlen(d->module)) || !m->runtime_dir) return;
    image *shared = NULL;
    if (m->transport.image && strcmp(m->transport.module, d->module) == 0)
        shared = m->transport.image;
    for (size_t i = 0; !shared && i < m->n_instances; i++)
        if (&m->instances[i] != d && m->instances[i].image && m->instances[i].module &&
            strcmp(m->instances[i].module, d->module) == 0)
            shared = m->instances[i].image;
    char e[1024];
    if (shared && !image_pin_matches(d->module, shared->src_path, shared->sha256, d->sha256, e,
                                     sizeof e)) {
        err(c, pin_path, "%s", e);
        return;
    }
    if (shared) {
        d->image = shared;
    } else {
        bool pin_refused = false;
        d->image = image_load(m->module_dir, d->module, m->runtime_dir, d->sha256, &pin_refused,
                              e, sizeof e);
        if (!d->image && pin_refused) {
            err(c, pin_path, "%s", e);
            return;
        }
        if (!d->image) {
            char hint[128];
            module_hint(m->module_dir, d->module, hint, sizeof hint);
            err(c, module_path, "%s%s", e, hint);
            return;
        }
    }
    d->image->users++;
    if (d->name) crash_image_used_by(d->image, d->name);
    const mcpg_module *desc = d->image->desc;
    d->config = calloc(1, desc->config_size ? desc->config_size : 1);
    cfg_err_ctx ec = {c, config_path};
    size_t len = d->config_json ? strlen(d->config_json) : 0;
    int bad = mcpg_config_parse(desc->config, d->config_json, len, d->config, on_config_error, &ec);
    if (!bad && MCPG_HAS(desc->lifecycle, validate)) {
        struct mcpg_report rep = {c->errs, c->file, ""};
        snprintf(rep.prefix, sizeof rep.prefix, "%s", config_path);
        desc->lifecycle->validate(&HOST, d->config, &rep);
    }
}

/* The first instance of `kind` before instance i, or NULL: a gateway has one
 * coordinator, one metrics instance (one /metrics) and one telemetry instance. */
static const decl_instance *first_of_kind_before(const manifest *m, size_t i, uint32_t kind) {
    for (size_t j = 0; j < i; j++)
        if (m->instances[j].image && m->instances[j].image->desc->kind == kind)
            return &m->instances[j];
    return NULL;
}

static void check_instance_kind(mctx *c, decl_instance *d, size_t i) {
    if (!d->image) return;
    uint32_t kind = d->image->desc->kind;
    char p[96];
    snprintf(p, sizeof p, "modules[%zu].module", i);
    if (kind == MCPG_KIND_TRANSPORT)
        err(c, p, "\"%s\" is a transport: choose it with gateway.transport", d->module);
    else if (kind == MCPG_KIND_COORDINATOR && first_of_kind_before(c->m, i, kind))
        err(c, p, "\"%s\" is a second coordinator: a gateway has one (cluster.kind)", d->module);
    else if (kind == MCPG_KIND_METRICS && first_of_kind_before(c->m, i, kind))
        err(c, p, "\"%s\" is a second metrics instance: a gateway serves one /metrics (\"%s\" is "
            "the first)", d->name, first_of_kind_before(c->m, i, kind)->name);
    else if (kind == MCPG_KIND_TELEMETRY && first_of_kind_before(c->m, i, kind))
        err(c, p, "\"%s\" is a second telemetry instance: a gateway exports its spans through "
            "one (\"%s\" is the first)", d->name, first_of_kind_before(c->m, i, kind)->name);
    else if (kind == MCPG_KIND_EVENTS && !d->section)
        err(c, p, "\"%s\" is an events module: the events pipeline is declared in the top-level "
            "\"events\" section (\"events\": {\"module\": \"%s\", ...})", d->module, d->module);
    else if (kind != MCPG_KIND_EVENTS && d->section)
        err(c, "events.module", "\"%s\" is a %s module, not an events module", d->module,
            kind_name(kind));
    snprintf(p, sizeof p, "modules[%zu].wait_for_lists", i);
    if (d->lists_later && kind != MCPG_KIND_BACKEND)
        err(c, p, "only a backend has lists to wait for");
    snprintf(p, sizeof p, "modules[%zu].inline_dispatch", i);
    d->inline_dispatch = d->inline_choice >= 0 ? d->inline_choice == 1
                                               : (d->image->desc->flags & MCPG_MOD_NEVER_BLOCKS) != 0;
    if (d->inline_dispatch && kind != MCPG_KIND_BACKEND)
        err(c, p, "only backends can be dispatched inline");
    else if (d->inline_dispatch && !(d->image->desc->flags & MCPG_MOD_INLINE_SAFE))
        err(c, p, "module \"%s\" does not declare itself safe for inline dispatch", d->module);
}

/* Each stage's instances (the pipeline at key path `at`) exist and are of its kind. */
static void check_stage_refs(mctx *c, const char *at, char **stage[STAGE_COUNT],
                             const size_t n_stage[STAGE_COUNT]) {
    for (int s = 0; s < STAGE_COUNT; s++)
        for (size_t i = 0; i < n_stage[s]; i++) {
            char p[128];
            snprintf(p, sizeof p, "%s.%s[%zu]", at, stage_names[s], i);
            decl_instance *d = find_instance(c->m, stage[s][i]);
            if (!d)
                err(c, p, "no instance named \"%s\"", stage[s][i]);
            else if (d->image && d->image->desc->kind != stage_kinds[s])
                err(c, p, "instance \"%s\" is a %s, not %s %s module", d->name,
                    kind_name(d->image->desc->kind), (s == STAGE_IDENTITY || s == STAGE_AUDIT) ? "an" : "a",
                    stage_names[s]);
        }
}

static void check_binding_refs(mctx *c, const char *at, const decl_binding *bs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const decl_binding *b = &bs[i];
        if (!b->backend) continue;
        char p[128];
        snprintf(p, sizeof p, "%s[%zu].backend", at, i);
        decl_instance *d = find_instance(c->m, b->backend);
        if (!d)
            err(c, p, "no instance named \"%s\"", b->backend);
        else if (d->image && d->image->desc->kind != MCPG_KIND_BACKEND)
            err(c, p, "instance \"%s\" is a %s, not a backend", d->name,
                kind_name(d->image->desc->kind));
    }
}

static void check_references(mctx *c) {
    manifest *m = c->m;
    check_stage_refs(c, "pipeline", m->stage, m->n_stage);
    check_binding_refs(c, "bindings", m->bindings, m->n_bindings);
    for (size_t i = 0; i < m->n_servers; i++) {
        char at[64];
        snprintf(at, sizeof at, "servers[%zu].pipeline", i);
        check_stage_refs(c, at, m->servers[i].stage, m->servers[i].n_stage);
        snprintf(at, sizeof at, "servers[%zu].bindings", i);
        check_binding_refs(c, at, m->servers[i].bindings, m->servers[i].n_bindings);
    }
}

/* A fleet kind's coordinator is declared in "modules" (its config says where
 * the store is): one of module coordinator_<kind>. */
static void check_fleet_coordinator(mctx *c, const decl_instance *coordinator) {
    manifest *m = c->m;
    char want[64];
    snprintf(want, sizeof want, "coordinator_%s", m->cluster_kind);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.so", m->module_dir, want);
    if (!coordinator && access(path, R_OK) != 0)
        err(c, "cluster.kind", "\"%s\" needs the %s module, which this build does not have",
            m->cluster_kind, want);
    else if (!coordinator)
        err(c, "cluster.kind", "\"%s\" needs a %s instance in modules (its config says where "
            "the store is)", m->cluster_kind, want);
    else if (strcmp(coordinator->module, want) != 0)
        err(c, "cluster.kind", "\"%s\" needs its coordinator to be %s, not \"%s\" (instance "
            "\"%s\")", m->cluster_kind, want, coordinator->module, coordinator->name);
}

/* The gateway's coordinator (host->coordinator): one declared in "modules",
 * else, on a single node, coordinator_memory when the build has it, as the
 * instance "cluster". */
static void add_default_coordinator(mctx *c) {
    manifest *m = c->m;
    const decl_instance *declared = NULL;
    for (size_t i = 0; i < m->n_instances && !declared; i++)
        if (m->instances[i].image && m->instances[i].image->desc->kind == MCPG_KIND_COORDINATOR)
            declared = &m->instances[i];
    if (m->cluster_kind && strcmp(m->cluster_kind, "single_node") != 0) {
        if (m->cluster_path)
            err(c, "cluster.path", "is the single-node store's journal: cluster.kind \"%s\" "
                "keeps its state in the fleet's store", m->cluster_kind);
        check_fleet_coordinator(c, declared);
        return;
    }
    if (declared) {
        if (m->cluster_path)
            err(c, "cluster.path", "configures the default coordinator, but modules declares "
                "\"%s\": give that one config.path instead", declared->name);
        return;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/coordinator_memory.so", m->module_dir);
    if (access(path, R_OK) != 0 || find_instance(m, "cluster")) {
        if (m->cluster_path)
            err(c, "cluster.path", "needs the default coordinator (coordinator_memory, in %s, "
                "as the instance \"cluster\")", m->module_dir);
        return;
    }
    m->instances = realloc(m->instances, (m->n_instances + 1) * sizeof *m->instances);
    decl_instance *d = &m->instances[m->n_instances++];
    memset(d, 0, sizeof *d);
    d->name = strdup("cluster");
    d->module = strdup("coordinator_memory");
    d->section = "cluster";
    if (m->cluster_path) { /* its config: {"path": ...}, errors named cluster.path */
        json_t *cfg = json_pack("{s:s}", "path", m->cluster_path);
        d->config_json = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
        json_decref(cfg);
    }
    resolve_instance(c, d, "cluster.sha256", "cluster.kind", "cluster");
}

static void resolve_all(mctx *c) {
    manifest *m = c->m;
    if (check_module_dir(c, c->module_dir_written, m->module_dir) || prepare_runtime_dir(c))
        return;
    resolve_instance(c, &m->transport, "gateway.transport_sha256", "gateway.transport",
                     "gateway.server");
    if (m->transport.image && m->transport.image->desc->kind != MCPG_KIND_TRANSPORT)
        err(c, "gateway.transport", "\"%s\" is a %s module, not a transport", m->transport.module,
            kind_name(m->transport.image->desc->kind));
    for (size_t i = 0; i < m->n_instances; i++) {
        char mp[64], cp[64], bp[64];
        if (m->instances[i].section) {
            snprintf(bp, sizeof bp, "%s.sha256", m->instances[i].section);
            snprintf(mp, sizeof mp, "%s.module", m->instances[i].section);
            snprintf(cp, sizeof cp, "%s", m->instances[i].section);
        } else {
            snprintf(bp, sizeof bp, "modules[%zu].sha256", i);
            snprintf(mp, sizeof mp, "modules[%zu].module", i);
            snprintf(cp, sizeof cp, "modules[%zu].config", i);
        }
        resolve_instance(c, &m->instances[i], bp, mp, cp);
        check_instance_kind(c, &m->instances[i], i);
    }
    add_default_coordinator(c);
    check_references(c);
}

/* ---- reading the file ---- */

static char *read_file(const char *path, mctx *c) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        err(c, "", "cannot read: %s", strerror(errno));
        return NULL;
    }
    mcpg_buf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) mcpg_buf_append(&b, chunk, n);
    fclose(f);
    if (!b.data) mcpg_buf_append(&b, "", 0);
    return b.data;
}

static char *dir_of(const char *path) {
    char *copy = strdup(path);
    char *slash = strrchr(copy, '/');
    if (!slash) {
        free(copy);
        return strdup(".");
    }
    if (slash == copy) slash[1] = '\0';
    else *slash = '\0';
    return copy;
}

static json_t *parse_root(mctx *c, const char *text) {
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        err(c, "", "invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        err(c, "", "expected a JSON object");
        json_decref(root);
        return NULL;
    }
    static const char *const keys[] = {"gateway", "cluster", "modules", "events", "pipeline",
                                       "bindings", "servers", "$schema", "description"};
    check_keys(c, root, "", keys, sizeof keys / sizeof *keys);
    return root;
}

static manifest *manifest_new(const char *path) {
    manifest *m = calloc(1, sizeof *m);
    m->refs = 1;
    m->path = strdup(path);
    m->dir = dir_of(path);
    return m;
}

/* Parse the text, expand its ${VAR}s and read it into c->m checking every
 * key; -1 when the text is not a JSON object or a reference failed (nothing
 * more was read). */
static int parse_text(mctx *c, const char *raw, const char *listen_override, const char *exe_dir) {
    json_t *root = parse_root(c, raw);
    if (!root) return -1;
    if (expand_env_json(root, c->file, c->errs)) {
        json_decref(root);
        return -1;
    }
    parse_gateway(c, root, listen_override, exe_dir);
    settings_parse(c->m, root, "cluster", on_setting_error, c);
    parse_modules(c, root);
    parse_events(c, root);
    parse_pipeline(c, root);
    parse_bindings(c, root);
    parse_servers(c, root);
    json_decref(root);
    return 0;
}

/* m, or NULL (m freed) when errs grew beyond `before`. */
static manifest *unless_errors(manifest *m, const errlist *errs, size_t before) {
    if (errs->count > before) {
        manifest_free(m);
        return NULL;
    }
    return m;
}

manifest *manifest_load(const char *path, const char *listen_override, const char *exe_dir,
                        errlist *errs) {
    manifest *m = manifest_new(path);
    mctx c = {path, errs, m, NULL};
    size_t before = errs->count;
    char *raw = read_file(path, &c);
    if (raw && parse_text(&c, raw, listen_override, exe_dir) == 0) resolve_all(&c);
    free(raw);
    free(c.module_dir_written);
    return unless_errors(m, errs, before);
}

manifest *manifest_parse(const char *path, const char *text, const char *exe_dir, errlist *errs) {
    manifest *m = manifest_new(path);
    mctx c = {path, errs, m, NULL};
    size_t before = errs->count;
    (void)parse_text(&c, text, NULL, exe_dir);
    free(c.module_dir_written);
    return unless_errors(m, errs, before);
}

/* The manifest at path read and checked, no module loaded: NULL with errs. */
static manifest *read_unloaded(const char *path, const char *exe_dir, errlist *errs) {
    manifest *m = manifest_new(path);
    mctx c = {path, errs, m, NULL};
    size_t before = errs->count;
    char *raw = read_file(path, &c);
    if (raw) (void)parse_text(&c, raw, NULL, exe_dir);
    free(raw);
    free(c.module_dir_written);
    return unless_errors(m, errs, before);
}

char *manifest_module_dir(const char *path, const char *exe_dir, errlist *errs) {
    if (!path) {
        manifest none = {0};
        resolve_module_dir(&none, exe_dir);
        return none.module_dir;
    }
    manifest *m = read_unloaded(path, exe_dir, errs);
    char *dir = m && m->module_dir ? strdup(m->module_dir) : NULL;
    manifest_free(m);
    return dir;
}

char *manifest_pins_file(const char *path, const char *exe_dir, errlist *errs) {
    manifest *m = read_unloaded(path, exe_dir, errs);
    char *file = m && m->pins_file ? strdup(m->pins_file) : NULL;
    if (m && !file)
        errlist_add(errs, path, "gateway.pins.file", "is not set: this manifest pins nothing");
    manifest_free(m);
    return file;
}

static void free_strings(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

static void free_instance(decl_instance *d) {
    if (d->config && d->image) mcpg_config_free(d->image->desc->config, d->config);
    free(d->config);
    if (d->image && --d->image->users == 0) image_unload(d->image);
    free(d->name);
    free(d->module);
    free(d->config_json);
    free(d->sha256);
    memset(d, 0, sizeof *d); /* the transport's module and config are the settings' too */
}

const char *manifest_scheme(const manifest *m) {
    json_t *server = m->transport.config_json ? json_loads(m->transport.config_json, 0, NULL) : NULL;
    json_t *cert = server ? json_object_get(server, "tls_cert_file") : NULL;
    bool tls = cert && json_is_string(cert) && json_string_length(cert) > 0;
    json_decref(server);
    return tls ? "https" : "http";
}

static void free_bindings(decl_binding *bs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        decl_binding *b = &bs[i];
        free(b->backend);
        free(b->prefix);
        free(b->separator);
        free_strings(b->allow, b->n_allow);
        free_strings(b->deny, b->n_deny);
        free_strings(b->allow_resources, b->n_allow_resources);
        free_strings(b->deny_resources, b->n_deny_resources);
        free_strings(b->rename.from, b->rename.n);
        free_strings(b->rename.to, b->rename.n);
        free_strings(b->describe.from, b->describe.n);
        free_strings(b->describe.to, b->describe.n);
        free_strings(b->watch_uris, b->n_watch_uris);
        free(b->pins_name);
    }
    free(bs);
}

static void free_server(decl_server *sv) {
    free(sv->name);
    free(sv->path);
    free(sv->host);
    free(sv->instructions);
    free(sv->info_json);
    free_bindings(sv->bindings, sv->n_bindings);
    for (int s = 0; s < STAGE_COUNT; s++) free_strings(sv->stage[s], sv->n_stage[s]);
}

void manifest_free(manifest *m) {
    if (!m || --m->refs > 0) return;
    for (size_t i = 0; i < m->n_instances; i++) free_instance(&m->instances[i]);
    free(m->instances);
    free_instance(&m->transport);
    redactor_free(m->redact);
    for (int s = 0; s < STAGE_COUNT; s++) free_strings(m->stage[s], m->n_stage[s]);
    free_bindings(m->bindings, m->n_bindings);
    for (size_t i = 0; i < m->n_servers; i++) free_server(&m->servers[i]);
    free(m->servers);
    free_strings(m->listen, m->n_listen);
    if (m->runtime_dir && !m->borrowed_runtime_dir)
        rmdir(m->runtime_dir); /* only succeeds once our copies are gone */
    settings_free(m);
    free(m->dir);
    free(m->path);
    free(m);
}

void manifest_config_key(const manifest *m, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "(root)");
    if (m->transport.name && strcmp(m->transport.name, name) == 0)
        snprintf(out, cap, "gateway.server");
    for (size_t i = 0; i < m->n_instances; i++) {
        const decl_instance *d = &m->instances[i];
        if (!d->name || strcmp(d->name, name) != 0) continue;
        if (d->section) snprintf(out, cap, "%s", d->section);
        else snprintf(out, cap, "modules[%zu].config", i);
    }
}

void host_report_error(mcpg_report *rep, const char *key_path, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char p[512];
    snprintf(p, sizeof p, "%s%s%s", rep->prefix, key_path && *key_path ? "." : "",
             key_path ? key_path : "");
    errlist_add(rep->errs, rep->file, p, "%s", msg);
}
