/* backend_mock: parse the "resources" config and build, once, what
 * resources/list and resources/read answer (see mock_resources.h). One
 * parser serves validate() and create(), so both agree on what is valid. */
#include "mock_resources.h"

#include <mcpg/sdk.h>
#include <stdio.h>
#include <string.h>

typedef mcpg_config_problems pctx;

/* One resource's members as found (spans into the config text). */
typedef struct res_spans {
    mcpg_json_span uri, name, mime, text, description;
    int has_uri, has_name, has_mime, has_text, has_description;
} res_spans;

static const char *const res_keys[] = {"uri", "name", "mimeType", "text", "description"};

static void take_string(pctx *c, const char *base, const char *key, const mcpg_json_span *v,
                        mcpg_json_span *out, int *has) {
    if (v->type != MCPG_JSON_STRING) {
        char path[96];
        snprintf(path, sizeof path, "%s.%s", base, key);
        mcpg_config_problem(c, path, "expected a string");
        return;
    }
    *out = *v;
    *has = 1;
}

static void collect(pctx *c, const char *base, const mcpg_json_span *obj, res_spans *s) {
    size_t iter = 0;
    mcpg_json_span k, v;
    while (c->h->json_object_next(obj->p, obj->n, &iter, &k, &v) == 1) {
        char key[32];
        size_t kn;
        if (c->h->json_string_decode(&k, key, sizeof key, &kn) < 0 || strlen(key) != kn)
            snprintf(key, sizeof key, "%.*s", (int)(k.n < 31 ? k.n : 31), k.p);
        if (!strcmp(key, "uri")) take_string(c, base, key, &v, &s->uri, &s->has_uri);
        else if (!strcmp(key, "name")) take_string(c, base, key, &v, &s->name, &s->has_name);
        else if (!strcmp(key, "mimeType")) take_string(c, base, key, &v, &s->mime, &s->has_mime);
        else if (!strcmp(key, "text")) take_string(c, base, key, &v, &s->text, &s->has_text);
        else if (!strcmp(key, "description"))
            take_string(c, base, key, &v, &s->description, &s->has_description);
        else {
            char path[96];
            snprintf(path, sizeof path, "%s.%s", base, key);
            mcpg_config_unknown_key(c, path, key, res_keys, sizeof res_keys / sizeof *res_keys);
        }
    }
}

/* A span's raw bytes are already JSON-escaped: copied as is between quotes. */
static int put_raw(const mcpg_host *h, mcpg_buf *b, const mcpg_json_span *s) {
    return h->buf_append(b, "\"", 1) || h->buf_append(b, s->p, s->n) || h->buf_append(b, "\"", 1);
}

static int build_entry(const mcpg_host *h, const res_spans *s, mock_resource_set *set,
                       mock_resource *r) {
    mcpg_buf *l = &set->list;
    int rc = h->buf_append(l, set->n ? ",{\"uri\":" : "{\"uri\":", set->n ? 8 : 7);
    rc |= put_raw(h, l, &s->uri);
    rc |= h->buf_append(l, ",\"name\":", 8);
    rc |= put_raw(h, l, s->has_name ? &s->name : &s->uri);
    if (s->has_description) {
        rc |= h->buf_append(l, ",\"description\":", 15);
        rc |= put_raw(h, l, &s->description);
    }
    rc |= h->buf_append(l, ",\"mimeType\":", 12);
    rc |= s->has_mime ? put_raw(h, l, &s->mime) : h->buf_append(l, "\"text/plain\"", 12);
    rc |= h->buf_append(l, "}", 1);
    mcpg_buf *b = &r->read;
    rc |= h->buf_append(b, "{\"contents\":[{\"uri\":", 20);
    rc |= put_raw(h, b, &s->uri);
    rc |= h->buf_append(b, ",\"mimeType\":", 12);
    rc |= s->has_mime ? put_raw(h, b, &s->mime) : h->buf_append(b, "\"text/plain\"", 12);
    rc |= h->buf_append(b, ",\"text\":", 8);
    rc |= put_raw(h, b, &s->text);
    rc |= h->buf_append(b, "}]}", 3);
    return rc ? MCPG_ENOMEM : 0;
}

static void parse_one(pctx *c, size_t idx, const mcpg_json_span *obj, mock_resource_set *set) {
    char base[48], path[64];
    snprintf(base, sizeof base, "resources[%zu]", idx);
    if (obj->type != MCPG_JSON_OBJECT) return mcpg_config_problem(c, base, "expected an object");
    res_spans s = {0};
    int before = c->errors;
    collect(c, base, obj, &s);
    snprintf(path, sizeof path, "%s.uri", base);
    char uri[MOCK_URI_MAX + 1];
    size_t un = 0;
    if (!s.has_uri) return mcpg_config_problem(c, path, "is required");
    if (c->h->json_string_decode(&s.uri, uri, sizeof uri, &un) < 0 || !un || strlen(uri) != un)
        return mcpg_config_problem(c, path, "must be a non-empty string of at most %d bytes",
                                   MOCK_URI_MAX);
    if (mock_resources_find(set, uri))
        return mcpg_config_problem(c, path, "duplicate uri \"%s\"", uri);
    snprintf(path, sizeof path, "%s.text", base);
    if (!s.has_text) return mcpg_config_problem(c, path, "is required");
    if (c->errors != before) return;
    mock_resource *r = &set->items[set->n];
    memset(r, 0, sizeof *r);
    r->uri = c->h->alloc(un + 1);
    if (!r->uri || build_entry(c->h, &s, set, r)) {
        c->h->free(r->uri);
        c->h->buf_free(&r->read);
        return mcpg_config_problem(c, base, "out of memory");
    }
    memcpy(r->uri, uri, un + 1);
    set->n++;
}

static size_t count_items(const mcpg_host *h, const char *arr, size_t n) {
    size_t iter = 0, k = 0;
    mcpg_json_span v;
    while (h->json_array_next(arr, n, &iter, &v) == 1) k++;
    return k;
}

int mock_resources_parse(const mcpg_host *h, const char *json, mcpg_report *rep,
                         mcpg_instance *self, mock_resource_set *set) {
    pctx c = {h, rep, self, 0};
    if (!json) json = "[]";
    size_t n = strlen(json), skip = 0;
    while (skip < n && strchr(" \t\r\n", json[skip])) skip++;
    if (h->json_validate(json, n) < 0 || skip == n || json[skip] != '[') {
        mcpg_config_problem(&c, "resources", "expected an array of {uri, text, name, mimeType}");
        return c.errors;
    }
    size_t total = count_items(h, json + skip, n - skip);
    set->items = h->calloc(total ? total : 1, sizeof *set->items);
    if (!set->items || h->buf_append(&set->list, "[", 1)) {
        mcpg_config_problem(&c, "resources", "out of memory");
        return c.errors;
    }
    size_t iter = 0, idx = 0;
    mcpg_json_span v;
    while (h->json_array_next(json + skip, n - skip, &iter, &v) == 1) parse_one(&c, idx++, &v, set);
    if (h->buf_append(&set->list, "]", 1)) mcpg_config_problem(&c, "resources", "out of memory");
    return c.errors;
}

void mock_resources_free(const mcpg_host *h, mock_resource_set *set) {
    for (size_t i = 0; i < set->n; i++) {
        h->free(set->items[i].uri);
        h->buf_free(&set->items[i].read);
    }
    h->free(set->items);
    h->buf_free(&set->list);
    *set = (mock_resource_set){0};
}

const mock_resource *mock_resources_find(const mock_resource_set *set, const char *uri) {
    if (!uri) return NULL;
    for (size_t i = 0; i < set->n; i++)
        if (!strcmp(set->items[i].uri, uri)) return &set->items[i];
    return NULL;
}
