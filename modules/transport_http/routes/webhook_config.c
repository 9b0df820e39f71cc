/* transport_http: gateway.server.resource_webhooks, parsed (webhook.h).
 * One parser serves validate() (problems reported at their key paths) and
 * create() (problems logged), so --check and a start agree. */
#include "routes/routes.h"

#include <mcpg/whsig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef mcpg_config_problems pctx;

static const char *const src_keys[] = {"secret_env", "uri_prefixes", "list_changed"};

static int env_name_ok(const char *s) {
    if (!*s || (*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

static void path_of(char *out, size_t cap, const char *src, const char *key) {
    snprintf(out, cap, "resource_webhooks.%s%s%s", src, key ? "." : "", key ? key : "");
}

/* The secret, read now: unset or empty is "off" (logged by create()). */
static void take_secret(pctx *c, th_whsrc *s, const char *var) {
    char path[160];
    path_of(path, sizeof path, s->name, "secret_env");
    const char *val = getenv(var);
    if (!val || !*val) {
        if (!c->rep)
            c->h->log(c->self, MCPG_LOG_WARN,
                      "resource webhook source %s is off: %s (its secret_env) is unset or empty",
                      s->name, var);
        return;
    }
    if (mcpg_whsig_secret_decode(val, strlen(val), s->key, sizeof s->key, &s->key_len) < 0) {
        s->key_len = 0; /* off, as a configuration error leaves it */
        return mcpg_config_problem(c, path,
                                   "%s does not hold a Standard Webhooks secret (whsec_ and the "
                                   "base64 of a %d to %d byte key)",
                                   var, TH_WH_KEY_MIN, TH_WH_KEY_MAX);
    }
}

static void take_env(pctx *c, th_whsrc *s, const mcpg_json_span *v) {
    char path[160], var[128];
    size_t n;
    path_of(path, sizeof path, s->name, "secret_env");
    if (v->type != MCPG_JSON_STRING || c->h->json_string_decode(v, var, sizeof var, &n) < 0 ||
        strlen(var) != n || !env_name_ok(var))
        return mcpg_config_problem(c, path, "must name an environment variable ([A-Za-z_][A-Za-z0-9_]*)");
    take_secret(c, s, var);
}

static void take_prefixes(pctx *c, th_whsrc *s, const mcpg_json_span *v) {
    char path[160];
    path_of(path, sizeof path, s->name, "uri_prefixes");
    size_t iter = 0, k = 0;
    mcpg_json_span e;
    if (v->type != MCPG_JSON_ARRAY) return mcpg_config_problem(c, path, "expected an array of strings");
    while (c->h->json_array_next(v->p, v->n, &iter, &e) == 1) k++;
    if (!k) return mcpg_config_problem(c, path, "must list at least one uri prefix");
    s->prefixes = c->h->calloc(k, sizeof *s->prefixes);
    if (!s->prefixes) return mcpg_config_problem(c, path, "out of memory");
    iter = 0;
    while (c->h->json_array_next(v->p, v->n, &iter, &e) == 1) {
        char buf[TH_WH_URI_MAX + 1];
        size_t n;
        if (e.type != MCPG_JSON_STRING || c->h->json_string_decode(&e, buf, sizeof buf, &n) < 0 ||
            strlen(buf) != n)
            return mcpg_config_problem(c, path, "item %zu: expected a string of at most %d bytes",
                                       s->nprefixes, TH_WH_URI_MAX);
        char *p = c->h->alloc(n + 1);
        if (!p) return mcpg_config_problem(c, path, "out of memory");
        memcpy(p, buf, n + 1);
        s->prefixes[s->nprefixes++] = p;
    }
}

static void parse_source(pctx *c, th_whsrc *s, const mcpg_json_span *obj) {
    char path[160];
    path_of(path, sizeof path, s->name, NULL);
    if (obj->type != MCPG_JSON_OBJECT) return mcpg_config_problem(c, path, "expected an object");
    size_t iter = 0;
    mcpg_json_span k, v;
    int seen_env = 0, seen_prefixes = 0;
    while (c->h->json_object_next(obj->p, obj->n, &iter, &k, &v) == 1) {
        char key[32];
        size_t kn;
        if (c->h->json_string_decode(&k, key, sizeof key, &kn) < 0 || strlen(key) != kn)
            snprintf(key, sizeof key, "%.*s", (int)(k.n < 31 ? k.n : 31), k.p);
        path_of(path, sizeof path, s->name, key);
        if (!strcmp(key, "secret_env")) seen_env = 1, take_env(c, s, &v);
        else if (!strcmp(key, "uri_prefixes")) seen_prefixes = 1, take_prefixes(c, s, &v);
        else if (!strcmp(key, "list_changed") && (v.type == MCPG_JSON_TRUE || v.type == MCPG_JSON_FALSE))
            s->list_changed = v.type == MCPG_JSON_TRUE;
        else if (!strcmp(key, "list_changed")) mcpg_config_problem(c, path, "expected a boolean");
        else mcpg_config_unknown_key(c, path, key, src_keys, sizeof src_keys / sizeof *src_keys);
    }
    path_of(path, sizeof path, s->name, "secret_env");
    if (!seen_env) mcpg_config_problem(c, path, "is required");
    path_of(path, sizeof path, s->name, "uri_prefixes");
    if (!seen_prefixes) mcpg_config_problem(c, path, "is required");
}

static int source_name(pctx *c, const mcpg_json_span *k, th_whsrc *s) {
    size_t n;
    if (c->h->json_string_decode(k, s->name, sizeof s->name, &n) < 0 || !mcpg_name_valid(s->name, n)) {
        mcpg_config_problem(c, "resource_webhooks", "source names must match ^[a-zA-Z0-9_-]{1,64}$ "
                                                    "(they are the route's last segment)");
        return -1;
    }
    return 0;
}

int th_wh_parse(const mcpg_host *h, const char *json, mcpg_report *rep, mcpg_instance *self,
                th_whset *out) {
    pctx c = {h, rep, self, 0};
    memset(out, 0, sizeof *out);
    if (!json) return 0;
    while (*json == ' ' || *json == '\t' || *json == '\r' || *json == '\n') json++;
    size_t n = strlen(json), iter = 0, k = 0;
    mcpg_json_span key, v;
    if (json[0] != '{' || h->json_validate(json, n) < 0) {
        mcpg_config_problem(&c, "resource_webhooks", "expected an object of sources by name");
        return c.errors;
    }
    while (h->json_object_next(json, n, &iter, &key, &v) == 1) k++;
    out->src = h->calloc(k ? k : 1, sizeof *out->src);
    if (!out->src) {
        mcpg_config_problem(&c, "resource_webhooks", "out of memory");
        return c.errors;
    }
    iter = 0;
    while (h->json_object_next(json, n, &iter, &key, &v) == 1) {
        th_whsrc *s = &out->src[out->n++];
        if (source_name(&c, &key, s) == 0) parse_source(&c, s, &v);
    }
    return c.errors;
}

void th_wh_free(const mcpg_host *h, th_whset *s) {
    for (size_t i = 0; i < s->n; i++) {
        for (size_t j = 0; j < s->src[i].nprefixes; j++) h->free(s->src[i].prefixes[j]);
        h->free(s->src[i].prefixes);
        OPENSSL_cleanse(s->src[i].key, sizeof s->src[i].key);
    }
    h->free(s->src);
    memset(s, 0, sizeof *s);
}

uint32_t th_wh_offers(const th_whset *s) {
    uint32_t bits = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!s->src[i].key_len) continue; /* off */
        bits |= MCPG_OFFER_RESOURCES | MCPG_OFFER_SUBSCRIBE;
        if (s->src[i].list_changed) bits |= MCPG_OFFER_LIST_CHANGED;
    }
    return bits;
}
