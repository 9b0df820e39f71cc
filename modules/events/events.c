/* events: the module's configuration, its life on each loop, and the ops
 * table. The parts are in events.h. */
#include "events.h"

#include <mcpg/whsig.h>
#include <upclient.h>

#include <ctype.h>
#include <netinet/in.h>
#include <stdbool.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const mcpg_config_field ev_config[] = {
    MCPG_CFG_JSON_FIELD(ev_cfg, types, "types", NULL,
                        "array of {name, description, payloadSchema}: the event types clients "
                        "may read (required)"),
    MCPG_CFG_JSON_FIELD(ev_cfg, sources, "sources", NULL,
                        "object {<source>: {secret_env, types: [names]}}: who may post to "
                        "POST /webhooks/events/<source> (required)"),
    MCPG_CFG_INT_FIELD(ev_cfg, inbox_max_rows, "inbox_max_rows", "10000", 1, 100000000,
                       "events accepted and not yet in the log; past it a post is 503"),
    MCPG_CFG_INT_FIELD(ev_cfg, retention_ms, "retention_ms", "3600000", 1000, 2592000000LL,
                       "how long the store keeps an inbox row and a log row"),
    MCPG_CFG_INT_FIELD(ev_cfg, dedup_ms, "dedup_ms", "3600000", 1000, 2592000000LL,
                       "how long an event id is remembered (a copy within it is dropped)"),
    MCPG_CFG_INT_FIELD(ev_cfg, heartbeat_ms, "heartbeat_ms", "15000", 100, 300000,
                       "notifications/events/heartbeat on a quiet events/stream"),
    MCPG_CFG_INT_FIELD(ev_cfg, poll_interval_ms, "poll_interval_ms", "1000", 100, 3600000,
                       "the nextPollMs events/poll answers"),
    MCPG_CFG_INT_FIELD(ev_cfg, lease_ms, "lease_ms", "3000", 300, 600000,
                       "the owner's lease: a dead owner's work moves after it"),
    MCPG_CFG_INT_FIELD(ev_cfg, cache_rows, "cache_rows", "65536", 16, 16777216,
                       "log rows each replica keeps in memory for its readers"),
    MCPG_CFG_INT_FIELD(ev_cfg, max_streams, "max_streams", "4096", 1, 1000000,
                       "open events/stream calls per replica"),
    MCPG_CFG_INT_FIELD(ev_cfg, batch_rows, "batch_rows", "256", 1, 4096,
                       "inbox rows the owner moves in one batch"),
    MCPG_CFG_BOOL_FIELD(ev_cfg, allow_http_callbacks, "allow_http_callbacks", "false",
                        "events/subscribe may name a plain http:// callback (else https:// only)"),
    MCPG_CFG_BOOL_FIELD(ev_cfg, allow_anonymous_subscriptions, "allow_anonymous_subscriptions",
                        "false", "a caller without identity may subscribe a webhook (else "
                        "-32012: the gateway posts only for someone it knows)"),
    MCPG_CFG_INT_FIELD(ev_cfg, subscription_max_ttl_ms, "subscription_max_ttl_ms", "3600000", 10000,
                       2592000000LL, "the longest lifetime events/subscribe grants"),
    MCPG_CFG_INT_FIELD(ev_cfg, subscriptions_max, "subscriptions_max", "1024", 1, 1000000,
                       "webhook subscriptions the fleet holds; past it -32013"),
    MCPG_CFG_INT_FIELD(ev_cfg, subscriptions_per_principal, "subscriptions_per_principal", "32", 1,
                       1000000, "webhook subscriptions one principal may hold (anonymous callers "
                       "share one count); past it -32013"),
    MCPG_CFG_STRING_FIELD(ev_cfg, callback_ca_file, "callback_ca_file", NULL,
                          "a PEM bundle https:// callbacks are verified against (default: the "
                          "system's certificate authorities)"),
    MCPG_CFG_JSON_FIELD(ev_cfg, callback_allow, "callback_allow", "[]",
                        "host names and CIDR blocks (\"10.1.2.0/24\", \"hooks.internal\") "
                        "callbacks may reach though they are not public; every other loopback, "
                        "private, link-local, unique-local, multicast or unspecified address, and "
                        "every address of this machine, is refused"),
    MCPG_CONFIG_END};

/* ---- helpers the parts share ---------------------------------------------- */

int ev_type_index(const events *ev, const char *name, size_t n) {
    for (size_t i = 0; i < ev->n_types; i++)
        if (strlen(ev->types[i].name) == n && !memcmp(ev->types[i].name, name, n)) return (int)i;
    return -1;
}

size_t ev_key_u64(char *out, size_t cap, const char *prefix, uint64_t n) {
    int k = snprintf(out, cap, "%s%llu", prefix, (unsigned long long)n);
    return k > 0 ? (size_t)k : 0;
}

int ev_parse_u64(const char *p, size_t n, uint64_t *out) {
    uint64_t v = 0;
    if (!n || n > 19) return -1;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = v;
    return 0;
}

int ev_parse_head(const char *p, size_t n, uint64_t *log, uint64_t *slot) {
    const char *sp = p ? memchr(p, ' ', n) : NULL;
    if (!sp || ev_parse_u64(p, (size_t)(sp - p), log) ||
        ev_parse_u64(sp + 1, n - (size_t)(sp + 1 - p), slot))
        return -1;
    return 0;
}

/* "2026-12-02T10:00:00.123Z" */
void ev_timestamp_now(const mcpg_host *h, char out[48]) {
    int64_t us = h->wall_us();
    time_t s = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(out, 48, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(us / 1000 % 1000));
}

void ev_noop_cb(void *arg, int status, const mcpg_coord_value *v) {
    (void)arg, (void)status, (void)v;
}

/* ---- configuration ----------------------------------------------------------- */

typedef struct cfg_check {
    const mcpg_host *h;
    mcpg_report *rep;   /* validate(): errors go here */
    mcpg_instance *self; /* create(): to the log */
    int bad;
} cfg_check;

static void problem(cfg_check *k, const char *path, const char *msg) {
    k->bad = 1;
    if (k->rep) k->h->report_error(k->rep, path, "%s", msg);
    else if (k->self) k->h->log(k->self, MCPG_LOG_ERROR, "%s: %s", path, msg);
}

static char *span_dup(const mcpg_host *h, const mcpg_json_span *s) {
    char *p = h->alloc(s->n + 1);
    size_t n = 0;
    if (p && h->json_string_decode(s, p, s->n + 1, &n) != 0) {
        h->free(p);
        return NULL;
    }
    return p;
}

/* A callback_allow entry: a CIDR block, or a host name's characters. */
static bool allow_entry_valid(const char *e) {
    struct sockaddr_in any = {.sin_family = AF_INET};
    if (up_addr_in_cidr((const struct sockaddr *)&any, e) >= 0) return true;
    for (const char *p = e; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-') return false;
    return true;
}

/* One types[] entry; its events/list entry built. */
static void parse_type(cfg_check *k, const mcpg_json_span *e, size_t i, ev_type *t) {
    const mcpg_host *h = k->h;
    char path[64];
    mcpg_json_span name, desc, schema;
    snprintf(path, sizeof path, "types[%zu]", i);
    if (e->type != MCPG_JSON_OBJECT) return problem(k, path, "expected an object");
    snprintf(path, sizeof path, "types[%zu].name", i);
    if (h->json_object_get(e->p, e->n, "name", &name) != 1 || name.type != MCPG_JSON_STRING ||
        !name.n || name.n >= EV_NAME_MAX)
        return problem(k, path, "a non-empty string (at most 127 bytes) is required");
    int has_desc = h->json_object_get(e->p, e->n, "description", &desc) == 1;
    int has_schema = h->json_object_get(e->p, e->n, "payloadSchema", &schema) == 1;
    snprintf(path, sizeof path, "types[%zu].description", i);
    if (has_desc && desc.type != MCPG_JSON_STRING) return problem(k, path, "expected a string");
    snprintf(path, sizeof path, "types[%zu].payloadSchema", i);
    if (has_schema && schema.type != MCPG_JSON_OBJECT) return problem(k, path, "expected an object");
    t->name = span_dup(h, &name);
    mcpg_buf b = {0};
    int rc = h->buf_append(&b, "{\"name\":", 8) || h->buf_append(&b, name.p - 1, name.n + 2);
    if (has_desc) rc |= h->buf_append(&b, ",\"description\":", 15) ||
                        h->buf_append(&b, desc.p - 1, desc.n + 2);
    static const char modes[] = ",\"delivery\":[\"poll\",\"push\",\"webhook\"],\"inputSchema\":{\"type\":\"object\"}";
    rc |= h->buf_append(&b, modes, sizeof modes - 1);
    if (has_schema) rc |= h->buf_append(&b, ",\"payloadSchema\":", 17) ||
                          h->buf_append(&b, schema.p, schema.n);
    rc |= h->buf_append(&b, "}", 1);
    if (rc || !t->name) {
        h->buf_free(&b);
        return problem(k, "types", "out of memory");
    }
    t->entry = b.data;
}

static void parse_types(cfg_check *k, events *ev, const char *json) {
    const mcpg_host *h = k->h;
    mcpg_json_span e;
    size_t it = 0, n = 0;
    if (!json) return problem(k, "types", "is required: a list of {name, description}");
    size_t len = strlen(json);
    if (json[0] != '[') return problem(k, "types", "expected a list");
    while (h->json_array_next(json, len, &it, &e) == 1) n++;
    if (!n) return problem(k, "types", "needs at least one event type");
    ev->types = h->calloc(n, sizeof *ev->types);
    if (!ev->types) return problem(k, "types", "out of memory");
    it = 0;
    for (size_t i = 0; h->json_array_next(json, len, &it, &e) == 1; i++) {
        parse_type(k, &e, i, &ev->types[ev->n_types]);
        if (!ev->types[ev->n_types].name) continue;
        if (ev_type_index(ev, ev->types[ev->n_types].name, strlen(ev->types[ev->n_types].name)) >= 0) {
            char path[64];
            snprintf(path, sizeof path, "types[%zu].name", i);
            problem(k, path, "names a type already listed");
        }
        ev->n_types++;
    }
}

/* The secret from the environment: unset or empty turns the source off. */
static void source_secret(cfg_check *k, ev_source *s, const mcpg_json_span *var, const char *path) {
    char name[128];
    size_t n = 0;
    if (var->type != MCPG_JSON_STRING || k->h->json_string_decode(var, name, sizeof name, &n) != 0 || !n)
        return problem(k, path, "the name of an environment variable is required");
    const char *v = getenv(name);
    if (!v || !*v) {
        if (k->self) k->h->log(k->self, MCPG_LOG_WARN, "source \"%s\": %s is unset: it is off (404)",
                               s->name, name);
        return;
    }
    if (mcpg_whsig_secret_decode(v, strlen(v), s->key, sizeof s->key, &s->key_len) != 0) {
        s->key_len = 0;
        char msg[256];
        snprintf(msg, sizeof msg, "%s does not hold a Standard Webhooks secret (whsec_ and the base64 "
                 "of a %d to %d byte key)", name, MCPG_WHSIG_KEY_MIN, MCPG_WHSIG_KEY_MAX);
        problem(k, path, msg);
    }
}

static void source_types(cfg_check *k, events *ev, ev_source *s, const mcpg_json_span *arr,
                         const char *base) {
    const mcpg_host *h = k->h;
    char path[192];
    snprintf(path, sizeof path, "%s.types", base);
    if (arr->type != MCPG_JSON_ARRAY) return problem(k, path, "expected a list of type names");
    mcpg_json_span e;
    size_t it = 0, n = 0;
    while (h->json_array_next(arr->p, arr->n, &it, &e) == 1) n++;
    s->types = h->calloc(n ? n : 1, sizeof *s->types);
    it = 0;
    for (size_t i = 0; s->types && h->json_array_next(arr->p, arr->n, &it, &e) == 1; i++) {
        int t = e.type == MCPG_JSON_STRING && !e.escaped ? ev_type_index(ev, e.p, e.n) : -1;
        snprintf(path, sizeof path, "%s.types[%zu]", base, i);
        if (t < 0) problem(k, path, "names no type of \"types\"");
        else s->types[s->n_types++] = (uint32_t)t;
    }
}

static void parse_sources(cfg_check *k, events *ev, const char *json) {
    const mcpg_host *h = k->h;
    if (!json) return problem(k, "sources", "is required: {<source>: {secret_env, types}}");
    size_t len = strlen(json), it = 0, n = 0;
    mcpg_json_span key, val;
    if (json[0] != '{') return problem(k, "sources", "expected an object");
    while (h->json_object_next(json, len, &it, &key, &val) == 1) n++;
    ev->sources = h->calloc(n ? n : 1, sizeof *ev->sources);
    if (!ev->sources) return problem(k, "sources", "out of memory");
    it = 0;
    while (h->json_object_next(json, len, &it, &key, &val) == 1) {
        ev_source *s = &ev->sources[ev->n_sources++];
        s->name = span_dup(h, &key);
        char base[160], path[192];
        snprintf(base, sizeof base, "sources.%s", s->name ? s->name : "?");
        if (!s->name || !mcpg_name_valid(s->name, strlen(s->name))) {
            problem(k, base, "a source's name must match ^[a-zA-Z0-9_-]{1,64}$");
            continue;
        }
        if (val.type != MCPG_JSON_OBJECT) {
            problem(k, base, "expected an object {secret_env, types}");
            continue;
        }
        mcpg_json_span var, types;
        snprintf(path, sizeof path, "%s.secret_env", base);
        if (h->json_object_get(val.p, val.n, "secret_env", &var) != 1) problem(k, path, "is required");
        else source_secret(k, s, &var, path);
        snprintf(path, sizeof path, "%s.types", base);
        if (h->json_object_get(val.p, val.n, "types", &types) != 1) problem(k, path, "is required");
        else source_types(k, ev, s, &types, base);
    }
}

static int build_list(events *ev) {
    const mcpg_host *h = ev->host;
    mcpg_buf b = {0};
    int rc = h->buf_append(&b, "{\"events\":[", 11);
    for (size_t i = 0; i < ev->n_types; i++)
        rc |= (i ? h->buf_append(&b, ",", 1) : 0) ||
              h->buf_append(&b, ev->types[i].entry, strlen(ev->types[i].entry));
    rc |= h->buf_append(&b, "]}", 2);
    if (rc) {
        h->buf_free(&b);
        return MCPG_ENOMEM;
    }
    ev->list_json = b.data;
    return 0;
}

static void events_free(events *ev) {
    const mcpg_host *h = ev->host;
    ev_subs_free(ev);
    ev_owner_free(ev);
    ev_reader_free(ev);
    for (size_t i = 0; i < ev->n_types; i++) {
        h->free(ev->types[i].name);
        h->free(ev->types[i].entry);
    }
    for (size_t i = 0; i < ev->n_sources; i++) {
        h->free(ev->sources[i].name);
        h->free(ev->sources[i].types);
    }
    h->free(ev->types);
    h->free(ev->sources);
    for (size_t i = 0; i < ev->n_cb_allow; i++) h->free(ev->cb_allow[i]);
    h->free(ev->cb_allow);
    h->free(ev->list_json);
    if (ev->cache.ring) {
        for (uint64_t s = ev->cache.first; s < ev->cache.next; s++)
            ev_row_unref(h, ev->cache.ring[s % ev->cache.cap]);
        h->free(ev->cache.ring);
        pthread_mutex_destroy(&ev->cache.lock);
    }
    h->free(ev);
}

/* callback_allow: each entry a CIDR block or a host name. */
static void parse_callback_allow(cfg_check *k, events *ev, const char *json) {
    const mcpg_host *h = k->h;
    if (!json) return;
    size_t len = strlen(json), it = 0, n = 0;
    mcpg_json_span v;
    if (json[0] != '[') return problem(k, "callback_allow", "expected an array of strings");
    while (h->json_array_next(json, len, &it, &v) == 1) n++;
    ev->cb_allow = h->calloc(n ? n : 1, sizeof *ev->cb_allow);
    if (!ev->cb_allow) return problem(k, "callback_allow", "out of memory");
    it = 0;
    while (h->json_array_next(json, len, &it, &v) == 1) {
        char path[48];
        snprintf(path, sizeof path, "callback_allow[%zu]", ev->n_cb_allow);
        char *e = v.type == MCPG_JSON_STRING ? span_dup(h, &v) : NULL;
        if (!e || !*e || strlen(e) > 255 || !allow_entry_valid(e)) {
            h->free(e);
            problem(k, path, "expected a host name or a CIDR block (\"10.0.0.0/8\", \"fd00::/8\")");
            continue;
        }
        ev->cb_allow[ev->n_cb_allow++] = e;
    }
}

static int parse_all(cfg_check *k, events *ev, const ev_cfg *cfg) {
    parse_types(k, ev, cfg->types);
    if (!k->bad) parse_sources(k, ev, cfg->sources);
    if (!k->bad) parse_callback_allow(k, ev, cfg->callback_allow);
    return k->bad;
}

/* ---- metrics ------------------------------------------------------------------------ */

static int64_t read_streams(void *arg, uint32_t series) {
    (void)series;
    return (int64_t)atomic_load(&((events *)arg)->open_streams);
}

static int64_t read_backlog(void *arg, uint32_t series) {
    events *ev = arg;
    (void)series;
    uint64_t tail = atomic_load(&ev->inbox_tail), done = atomic_load(&ev->inbox_done);
    return tail > done ? (int64_t)(tail - done) : 0;
}

static void counter(events *ev, const char *name, const char *help, mcpg_metric **out) {
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_COUNTER, .name = name,
                          .help = help, .n_series = 1};
    if (ev->host->metric_new(ev->self, &d, out) != 0) *out = NULL; /* then nothing is counted */
}

static void gauge(events *ev, const char *name, const char *help, int64_t (*read)(void *, uint32_t)) {
    mcpg_metric_desc d = {.size = sizeof d, .type = MCPG_METRIC_GAUGE, .name = name, .help = help,
                          .n_series = 1, .read = read, .read_arg = ev};
    mcpg_metric *m;
    (void)ev->host->metric_new(ev->self, &d, &m);
}

static void register_metrics(events *ev) {
    if (!MCPG_HOST_HAS(ev->host, metric_new)) return;
    counter(ev, "mcpg_events_accepted_total", "events posted and answered 202", &ev->m_accepted);
    counter(ev, "mcpg_events_refused_total", "event posts refused (4xx, 503)", &ev->m_refused);
    counter(ev, "mcpg_events_moved_total", "events this replica moved into the log as owner",
            &ev->m_moved);
    counter(ev, "mcpg_events_delivered_total", "events sent to this replica's streams",
            &ev->m_delivered);
    counter(ev, "mcpg_events_webhook_delivered_total", "events this replica POSTed to webhook "
            "subscribers and they took (2xx)", &ev->m_hook_ok);
    counter(ev, "mcpg_events_webhook_failed_total", "webhook delivery attempts that failed (to be "
            "tried again)", &ev->m_hook_failed);
    gauge(ev, "mcpg_events_streams", "open events/stream calls", read_streams);
    gauge(ev, "mcpg_events_inbox_rows", "accepted events not yet in the log, as last heard",
          read_backlog);
}

/* ---- lifecycle ------------------------------------------------------------------ */

static int ev_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    events *ev = host->calloc(1, sizeof *ev);
    if (!ev) return MCPG_ENOMEM;
    ev->host = host;
    cfg_check k = {host, rep, NULL, 0};
    int bad = parse_all(&k, ev, config);
    events_free(ev);
    return bad ? MCPG_ECONFIG : 0;
}

static int ev_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                     void **instance_out) {
    events *ev = host->calloc(1, sizeof *ev);
    if (!ev) return MCPG_ENOMEM;
    ev->host = host;
    ev->self = self;
    ev->cfg = config;
    cfg_check k = {host, NULL, self, 0};
    if (parse_all(&k, ev, ev->cfg)) {
        events_free(ev);
        return MCPG_ECONFIG;
    }
    ev->co = MCPG_HOST_HAS(host, coordinator) ? host->coordinator(&ev->co_inst) : NULL;
    if (!ev->co) {
        host->log(self, MCPG_LOG_ERROR, "the events pipeline keeps its inbox and log in the "
                  "coordinator, and this gateway has none (cluster.kind single_node needs "
                  "coordinator_memory in the module folder)");
        events_free(ev);
        return MCPG_ECONFIG;
    }
    ev->cache.cap = (size_t)ev->cfg->cache_rows;
    ev->cache.ring = host->calloc(ev->cache.cap, sizeof *ev->cache.ring);
    pthread_mutex_init(&ev->cache.lock, NULL);
    ev->n_loops = host->worker_count();
    if (!ev->cache.ring || build_list(ev) || ev->n_loops > EV_MAX_LOOPS) {
        events_free(ev);
        return MCPG_ENOMEM;
    }
    uint64_t r = (uint64_t)host->wall_us() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)ev;
    snprintf(ev->replica, sizeof ev->replica, "%016llx", (unsigned long long)r);
    for (uint32_t i = 0; i < ev->n_loops; i++) {
        ev->loops[i].ev = ev;
        ev->loops[i].index = i;
    }
    register_metrics(ev);
    *instance_out = ev;
    return 0;
}

static void ev_destroy(void *instance) { events_free(instance); }

static void ev_worker_start(void *instance, mcpg_worker *w) {
    events *ev = instance;
    uint32_t i = ev->host->worker_index(w);
    if (i >= ev->n_loops) return;
    ev_loop *l = &ev->loops[i];
    l->w = w;
    ev_readers_loop_start(l);
    if (i == 0) {
        if (ev_reader_start(ev, l) || ev_owner_start(ev, l) || ev_subs_start(ev, l))
            ev->host->log(ev->self, MCPG_LOG_ERROR, "cannot start the events reader and owner");
    }
}

static void ev_worker_stop(void *instance, mcpg_worker *w) {
    events *ev = instance;
    uint32_t i = ev->host->worker_index(w);
    if (i >= ev->n_loops) return;
    ev_loop *l = &ev->loops[i];
    l->stopped = true;
    ev_readers_loop_stop(l);
    ev_inbound_stop(l);
    if (i == 0) {
        ev_subs_stop(ev);
        ev_owner_stop(ev);
        ev_reader_stop(ev);
    }
}

static const mcpg_lifecycle_ops ev_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = ev_validate,
    .create = ev_create,
    .destroy = ev_destroy,
    .worker_start = ev_worker_start,
    .worker_stop = ev_worker_stop,
};

/* ---- ops -------------------------------------------------------------------------- */

static mcpg_status op_webhook(void *instance, mcpg_call *call, const char *source) {
    return ev_webhook(instance, call, source);
}

static mcpg_status op_request(void *instance, mcpg_call *call) { return ev_request(instance, call); }

static void op_cancel(void *instance, mcpg_call *call) { ev_cancel(instance, call); }

static const mcpg_events_ops ev_ops = {
    MCPG_OPS_HEAD(mcpg_events_ops),
    .webhook = op_webhook,
    .request = op_request,
    .cancel = op_cancel,
};

MCPG_MODULE_DEFINE(MCPG_KIND_EVENTS, "events", "1.0.0",
                   .description = "the MCP Events pipeline: signed inbound webhooks into an "
                                  "inbox in the coordinator, one owner under a lease moving it "
                                  "into the log, events/list, events/poll, events/stream and "
                                  "webhook subscriptions (events/subscribe)",
                   .config = ev_config, .config_size = sizeof(ev_cfg),
                   .lifecycle = &ev_lifecycle, .ops = &ev_ops);
