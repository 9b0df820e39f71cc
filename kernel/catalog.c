/* The catalog: what the backends of a generation offer, merged as one MCP
 * server. For each kind (tools, prompts, resources, resource templates) the
 * bindings are applied when the generation is built, and again each time a
 * backend says its lists changed: the routes a call is sent by (name →
 * backend and the backend's own name) and the merged list clients page
 * through, all in one catset published by a pointer swap. Nothing here runs
 * per call except the pin and the lookups. */
#include "kernel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* What differs between the four kinds. */
typedef struct cat_kind {
    const char *noun;      /* in error lines: "tool" */
    const char *key;       /* the item's identifying member: "name", "uri", "uriTemplate" */
    const char *answer;    /* the list result's member: "tools" */
    const char *visible_kind; /* the policy's visible() kind: "tool" */
    bool prefixed;         /* the binding's prefix applies, and names must be valid */
    int (*list_op)(const mcpg_backend_ops *ops, void *state, mcpg_buf *out);
} cat_kind;

static int list_tools(const mcpg_backend_ops *o, void *s, mcpg_buf *b) {
    return o->list_tools(s, b);
}
static int list_prompts(const mcpg_backend_ops *o, void *s, mcpg_buf *b) {
    return MCPG_HAS(o, list_prompts) ? o->list_prompts(s, b) : 1;
}
static int list_resources(const mcpg_backend_ops *o, void *s, mcpg_buf *b) {
    return MCPG_HAS(o, list_resources) ? o->list_resources(s, b) : 1;
}
static int list_templates(const mcpg_backend_ops *o, void *s, mcpg_buf *b) {
    return MCPG_HAS(o, list_resource_templates) ? o->list_resource_templates(s, b) : 1;
}

static const cat_kind KINDS[CAT_COUNT] = {
    [CAT_TOOLS] = {"tool", "name", "tools", "tool", true, list_tools},
    [CAT_PROMPTS] = {"prompt", "name", "prompts", "prompt", true, list_prompts},
    [CAT_RESOURCES] = {"resource", "uri", "resources", "resource", false, list_resources},
    [CAT_TEMPLATES] = {"resource template", "uriTemplate", "resourceTemplates",
                       "resource_template", false, list_templates},
};

const char *catalog_answer_key(int kind) { return KINDS[kind].answer; }

/* ---- building ---- */

typedef struct build_ctx {
    generation *g;
    catset *cs;
    uint32_t srv;      /* the server whose lists are built (an index of g's servers) */
    errlist *errs;     /* NULL: a rebuild at run time, where every problem is logged */
    const char *file;
    char where[96];
    int kind;
    size_t cap;
    bool lenient;      /* this backend's lists change at run time: log and skip */
    const catset *prev; /* the lists this build replaces (a rebuild, a reload), or NULL */
    const catalog *prev_lists; /* prev's lists of the server of this name, or NULL */
    enum { TAKE_ANY, TAKE_OWNED, TAKE_UNOWNED } take; /* which names a dynamic pass takes */
} build_ctx;

static bool dynamic_lists(const mcpg_instance *be) {
    return (be->desc->flags & MCPG_MOD_DYNAMIC_LISTS) != 0;
}

/* ---- items left out: warned once ---- */

static int cmp_text(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool warned_before(const catset *prev, const char *msg) {
    return prev && prev->n_warned &&
           bsearch(&msg, prev->warned, prev->n_warned, sizeof *prev->warned, cmp_text);
}

/* In this build already: a dynamic backend's items are read in two passes
 * (owners first), and an item can be left out in both. Few items are left
 * out, so the build's own list is walked. */
static bool warned_now(const catset *cs, const char *msg) {
    for (size_t i = 0; i < cs->n_warned; i++)
        if (strcmp(cs->warned[i], msg) == 0) return true;
    return false;
}

static void remember_warning(catset *cs, const char *msg) {
    if (cs->n_warned == cs->cap_warned) {
        size_t cap = cs->cap_warned ? cs->cap_warned * 2 : 8;
        char **v = realloc(cs->warned, cap * sizeof *v);
        if (!v) return; /* the next build warns about it again */
        cs->warned = v;
        cs->cap_warned = cap;
    }
    char *copy = strdup(msg);
    if (copy) cs->warned[cs->n_warned++] = copy;
}

/* An item left out of the merged lists: logged and counted at the first
 * build that leaves it out, then carried on silently by each build that
 * still does (a backend whose lists change is rebuilt often, and would
 * repeat every warning each time). One that stops and comes back is new
 * again. The set is this build's own: never more than its lists' items. */
static void warn_left_out(build_ctx *bc, const char *msg) {
    if (warned_now(bc->cs, msg)) return;
    if (!warned_before(bc->prev, msg)) {
        klog(MCPG_LOG_WARN, "kernel", "%s", msg);
        metrics_count(KM.left_out, 0, 1);
    }
    remember_warning(bc->cs, msg);
}

/* A problem with one item: a manifest error for a static backend at build,
 * else a warning (once) and the item is left out. */
MCPG_PRINTF(2, 3)
static void problem(build_ctx *bc, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (bc->errs && !bc->lenient) {
        errlist_add(bc->errs, bc->file, bc->where, "%s", msg);
        return;
    }
    char line[1200];
    snprintf(line, sizeof line, "%s: %s: left out of the merged lists", bc->where, msg);
    warn_left_out(bc, line);
}

/* A tool's x-mcp-header annotations: true with *ph; false (warned once)
 * when they are invalid, and the tool is left out. */
static bool tool_headers(build_ctx *bc, const mcpg_instance *be, const char *target,
                         const mcpg_json_span *item, mcpg_param_headers *ph) {
    char why[400], line[4800]; /* a target may be 4 KiB */
    if (param_headers_of_tool(item, ph, why, sizeof why)) return true;
    snprintf(line, sizeof line, "backend \"%s\": tool \"%s\" is left out of the tools list "
             "(not listed, not callable): its inputSchema's x-mcp-header annotations are "
             "invalid: %s", be->name, target, why);
    warn_left_out(bc, line);
    return false;
}

static bool in_list(char **list, size_t n, const char *s, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0) return true;
    return false;
}

/* Does the binding let the item through? Tools and prompts by name
 * (allow/deny), resources and templates by uri or uriTemplate
 * (allow_resources/deny_resources). */
static bool bound(const decl_binding *b, bool named, const char *id, size_t n) {
    char **allow = named ? b->allow : b->allow_resources;
    size_t n_allow = named ? b->n_allow : b->n_allow_resources;
    if (n_allow && !in_list(allow, n_allow, id, n)) return false;
    return named ? !in_list(b->deny, b->n_deny, id, n)
                 : !in_list(b->deny_resources, b->n_deny_resources, id, n);
}

/* Append one item to the merged list, its identifying member rewritten to
 * what clients see; remember where it lies, for paging. */
static void emit_item(catalog *cat, const mcpg_json_span *item, const char *key,
                      const char *client, const char *description) {
    mcpg_buf *out = &cat->list;
    if (cat->n_items == cat->items_cap) {
        cat->items_cap = cat->items_cap ? cat->items_cap * 2 : 16;
        cat->items = realloc(cat->items, cat->items_cap * sizeof *cat->items);
    }
    size_t start = out->len + (out->len > 1 ? 1 : 0);
    mcpg_buf_puts(out, out->len > 1 ? ",{\"" : "{\"");
    mcpg_buf_puts(out, key);
    mcpg_buf_puts(out, "\":");
    mcpg_buf_append_json_string(out, client, strlen(client));
    if (description) {
        mcpg_buf_puts(out, ",\"description\":");
        mcpg_buf_append_json_string(out, description, strlen(description));
    }
    size_t it = 0;
    mcpg_json_span k, v;
    while (mcpg_json_object_next(item->p, item->n, &it, &k, &v) == 1) {
        if (mcpg_json_string_eq(&k, key, strlen(key))) continue;
        if (description && mcpg_json_string_eq(&k, "description", 11)) continue;
        mcpg_buf_append(out, ",\"", 2);
        mcpg_buf_append(out, k.p, k.n);
        mcpg_buf_append(out, "\":", 2);
        if (v.type == MCPG_JSON_STRING) mcpg_buf_append(out, v.p - 1, v.n + 2);
        else mcpg_buf_append(out, v.p, v.n);
    }
    mcpg_buf_puts(out, "}");
    cat->items[cat->n_items++] = (cat_span){start, out->len - start, strdup(client)};
}

/* The catalog this build fills: its server's, of its kind. */
static catalog *building_cat(const build_ctx *bc) {
    return &bc->cs->cat[(size_t)bc->srv * CAT_COUNT + (size_t)bc->kind];
}

static route *route_add(build_ctx *bc, mcpg_instance *be, const char *client,
                        const char *target) {
    catalog *cat = building_cat(bc);
    for (size_t i = 0; i < cat->n_routes; i++)
        if (strcmp(cat->routes[i].client_name, client) == 0) {
            problem(bc, "%s \"%s\" is offered twice (by \"%s\" and \"%s\")%s",
                    KINDS[bc->kind].noun, client, cat->routes[i].backend->name, be->name,
                    KINDS[bc->kind].prefixed ? ": use a prefix" : "");
            return NULL;
        }
    if (cat->n_routes == bc->cap) {
        bc->cap = bc->cap ? bc->cap * 2 : 16;
        cat->routes = realloc(cat->routes, bc->cap * sizeof *cat->routes);
    }
    route *r = &cat->routes[cat->n_routes++];
    *r = (route){0};
    r->client_name = strdup(client);
    r->target = strdup(target);
    r->backend = be;
    /* the tool's series are made here, at a build, never when it is called */
    r->tool_series = bc->kind == CAT_TOOLS ? metrics_tool_index(client) : 0;
    return r;
}

/* The binding's value for the backend's name, or NULL. */
static const char *pair_of(const name_pairs *p, const char *name) {
    for (size_t i = 0; p && i < p->n; i++)
        if (strcmp(p->from[i], name) == 0) return p->to[i];
    return NULL;
}

/* The name clients see for `target` (renamed, then prefixed), or false
 * (reported) when it is not a valid name. */
static bool client_name(build_ctx *bc, const decl_binding *b, const char *target, char *out,
                        size_t cap) {
    if (!KINDS[bc->kind].prefixed) {
        snprintf(out, cap, "%s", target);
        return true;
    }
    const char *renamed = b ? pair_of(&b->rename, target) : NULL;
    const char *base = renamed ? renamed : target;
    if (b && b->prefix[0]) snprintf(out, cap, "%s%s%s", b->prefix, b->separator, base);
    else snprintf(out, cap, "%s", base);
    if (mcpg_name_valid(out, strlen(out))) return true;
    problem(bc, "%s \"%s\" would be named \"%s\", which does not match ^[a-zA-Z0-9_-]{1,64}$",
            KINDS[bc->kind].noun, target, out);
    return false;
}

/* Did the lists this build replaces route `client` to a backend of this
 * name? Names, not pointers: a reload's new instance of a backend is its
 * heir. Templates keep their order (first match wins), so they are walked. */
static bool owned_before(const build_ctx *bc, const mcpg_instance *be, const char *client) {
    if (!bc->prev_lists) return false; /* a server new at this reload */
    const catalog *cat = &bc->prev_lists[bc->kind];
    const route *r = NULL;
    if (bc->kind != CAT_TEMPLATES) {
        r = catalog_find(bc->prev_lists, bc->kind, client, strlen(client));
    } else {
        for (size_t i = 0; i < cat->n_routes && !r; i++)
            if (strcmp(cat->routes[i].client_name, client) == 0) r = &cat->routes[i];
    }
    return r && strcmp(r->backend->name, be->name) == 0;
}

/* A backend whose lists change keeps the names it served: when an upstream
 * later lists a name another backend serves, the owner keeps it and the
 * newcomer's entry is left out (and reported), whatever the manifest's
 * order. Owners are bound first (TAKE_OWNED), then everything else. */
static bool taken_in_this_pass(const build_ctx *bc, const mcpg_instance *be, const char *client) {
    if (bc->take == TAKE_ANY) return true;
    return owned_before(bc, be, client) == (bc->take == TAKE_OWNED);
}

/* ---- pinned definitions (pins.c) ---- */

static int pins_mode(const build_ctx *bc, const decl_binding *b) {
    return b && b->pins_mode ? b->pins_mode : bc->g->m->pins_on_change;
}

/* A definition that differs from its pin: remembered with the build (its
 * diff only the first time a build sees this very definition), announced
 * once by pins_announce. */
static void note_pin(build_ctx *bc, const mcpg_instance *be, const char *target,
                     const pin_look *l, int mode) {
    catset *cs = bc->cs;
    char key[4400];
    snprintf(key, sizeof key, "pin %s %s %s %s", be->name, pins_kind_key(bc->kind), target, l->seen);
    if (warned_now(cs, key)) return; /* a dynamic backend's second pass */
    bool fresh = !warned_before(bc->prev, key);
    remember_warning(cs, key);
    pin_notice *v = realloc(cs->notices, (cs->n_notices + 1) * sizeof *v);
    if (!v) return;
    cs->notices = v;
    pin_notice *n = &v[cs->n_notices++];
    *n = (pin_notice){.backend = strdup(be->name), .name = strdup(target), .kind = bc->kind,
                      .mode = mode, .fresh = fresh,
                      .diff = fresh ? pins_diff(l->old_def, l->def) : NULL};
    memcpy(n->pinned, l->pinned, sizeof n->pinned);
    memcpy(n->seen, l->seen, sizeof n->seen);
}

/* Does any item the binding takes from this backend, of any pinned kind,
 * differ from its pin? Asked once per backend and build (block mode). */
static bool backend_drifts(build_ctx *bc, mcpg_instance *be, const decl_binding *b) {
    int slot = generation_slot_of(bc->g, be);
    if (slot < 0) return true;
    if (bc->cs->blocked[slot]) return bc->cs->blocked[slot] > 0;
    bool drift = false;
    for (int k = 0; k < CAT_COUNT && !drift; k++) {
        if (!pins_kind_key(k)) continue;
        mcpg_buf items = {0};
        if (KINDS[k].list_op(be->desc->ops, be->state, &items) == 0 && items.data) {
            size_t it = 0;
            mcpg_json_span item, id;
            char target[4096];
            size_t tlen;
            while (!drift && mcpg_json_array_next(items.data, items.len, &it, &item) == 1) {
                if (item.type != MCPG_JSON_OBJECT ||
                    mcpg_json_object_get(item.p, item.n, KINDS[k].key, &id) != 1 ||
                    mcpg_json_string_decode(&id, target, sizeof target, &tlen) != 0 ||
                    (b && !bound(b, KINDS[k].prefixed, target, tlen)))
                    continue;
                pin_look l;
                drift = pins_look(bc->g->pins, NULL, be->name, k, target, item.p, item.n, &l) != 0 ||
                        !l.same;
                pins_look_done(&l);
            }
        }
        mcpg_buf_free(&items);
    }
    bc->cs->blocked[slot] = drift ? 1 : -1;
    return drift;
}

/* The item as its pin judges it (recorded as seen): true when the binding
 * holds it back, out of the lists, its calls refused. One that cannot be
 * read is held unless the mode only warns. */
static bool pin_holds(build_ctx *bc, mcpg_instance *be, const decl_binding *b,
                      const char *target, const mcpg_json_span *item) {
    int mode = pins_mode(bc, b);
    if (!bc->cs->seen || !pins_kind_key(bc->kind) || mode == PINS_OFF) return false;
    pin_look l;
    if (pins_look(bc->g->pins, bc->cs->seen, be->name, bc->kind, target, item->p, item->n, &l))
        return mode != PINS_WARN;
    if (!l.same) note_pin(bc, be, target, &l, mode);
    bool same = l.same;
    pins_look_done(&l);
    if (mode == PINS_BLOCK) return backend_drifts(bc, be, b);
    return !same && mode == PINS_HIDE;
}

static void add_item(build_ctx *bc, mcpg_instance *be, const decl_binding *b,
                     const mcpg_json_span *item) {
    const cat_kind *k = &KINDS[bc->kind];
    mcpg_json_span id;
    char target[4096];
    size_t tlen;
    if (mcpg_json_object_get(item->p, item->n, k->key, &id) != 1 ||
        mcpg_json_string_decode(&id, target, sizeof target, &tlen) != 0 || tlen == 0) {
        problem(bc, "backend \"%s\" lists a %s without a valid %s", be->name, k->noun, k->key);
        return;
    }
    if (memchr(target, '\0', tlen)) { /* C strings from here on: it would be cut at the NUL */
        problem(bc, "backend \"%s\" lists a %s whose %s holds a NUL character", be->name, k->noun,
                k->key);
        return;
    }
    if (b && !bound(b, k->prefixed, target, tlen)) return;
    char client[4200];
    if (!client_name(bc, b, target, client, sizeof client)) return;
    if (!taken_in_this_pass(bc, be, client)) return;
    const char *description = k->prefixed && b ? pair_of(&b->describe, target) : NULL;
    mcpg_param_headers ph = {0};
    if (bc->kind == CAT_TOOLS && !tool_headers(bc, be, target, item, &ph)) return;
    bool held = pin_holds(bc, be, b, target, item);
    route *r = route_add(bc, be, client, target);
    if (!r) {
        mcpg_param_headers_free(&ph);
        return;
    }
    r->params = ph;
    r->held = held;
    if (!held) emit_item(building_cat(bc), item, k->key, client, description);
}

/* A backend whose lists come later has none yet: no warning, but these
 * lists are not its first (host_backends_waiting, GET /readyz). */
static void note_unlisted(build_ctx *bc, const mcpg_instance *be) {
    int i = generation_slot_of(bc->g, be);
    if (i >= 0) bc->cs->unlisted[i] = true;
}

static void bind_kind(build_ctx *bc, mcpg_instance *be, const decl_binding *b) {
    const mcpg_backend_ops *ops = be->desc->ops;
    mcpg_buf items = {0};
    bc->lenient = dynamic_lists(be);
    int rc = KINDS[bc->kind].list_op(ops, be->state, &items);
    if (rc == 1) return; /* the backend offers none of this kind */
    if (rc == MCPG_EAGAIN && bc->lenient) {
        note_unlisted(bc, be);
        mcpg_buf_free(&items);
        return;
    }
    if (rc != 0 || !items.data) {
        problem(bc, "backend \"%s\" could not list its %ss", be->name, KINDS[bc->kind].noun);
        mcpg_buf_free(&items);
        return;
    }
    size_t it = 0;
    mcpg_json_span item;
    int r;
    while ((r = mcpg_json_array_next(items.data, items.len, &it, &item)) == 1)
        if (item.type == MCPG_JSON_OBJECT) add_item(bc, be, b, &item);
    if (r < 0) problem(bc, "backend \"%s\" listed malformed %s JSON", be->name, KINDS[bc->kind].noun);
    mcpg_buf_free(&items);
}

static int cmp_route(const void *a, const void *b) {
    return strcmp(((const route *)a)->client_name, ((const route *)b)->client_name);
}

/* The whole first page, kept ready: {"tools":[...]} */
static void finish_kind(catalog *cat, int kind) {
    mcpg_buf_puts(&cat->list, "]");
    mcpg_buf_puts(&cat->answer, "{\"");
    mcpg_buf_puts(&cat->answer, KINDS[kind].answer);
    mcpg_buf_puts(&cat->answer, "\":");
    mcpg_buf_append(&cat->answer, cat->list.data, cat->list.len);
    mcpg_buf_puts(&cat->answer, "}");
    if (cat->n_routes > 1 && kind != CAT_TEMPLATES) /* templates keep their order: first match wins */
        qsort(cat->routes, cat->n_routes, sizeof *cat->routes, cmp_route);
}

/* Does the backend offer `name` as a tool or a prompt (its own name)? */
static bool offered(const catalog *lists, const mcpg_instance *be, const char *name) {
    for (int k = CAT_TOOLS; k <= CAT_PROMPTS; k++)
        for (size_t i = 0; i < lists[k].n_routes; i++)
            if (lists[k].routes[i].backend == be && strcmp(lists[k].routes[i].target, name) == 0)
                return true;
    return false;
}

/* Where a server's bindings are written: "bindings", "servers[0].bindings". */
static void bindings_key(uint32_t srv, char *out, size_t cap) {
    if (srv) snprintf(out, cap, "servers[%u].bindings", srv - 1);
    else snprintf(out, cap, "bindings");
}

/* A rename or description for a name the backend does not offer (or that
 * allow/deny left out) is a mistake worth an error, not silence; except for
 * a backend whose lists change at run time, which may offer it later. */
static void check_pairs(generation *g, const catset *cs, uint32_t srv, manifest *m,
                        errlist *errs) {
    const gen_server *gs = &g->servers[srv];
    char at[48];
    bindings_key(srv, at, sizeof at);
    for (size_t i = 0; i < gs->n_bindings; i++) {
        const decl_binding *b = &gs->bindings[i];
        const mcpg_instance *be = NULL;
        for (size_t j = 0; j < g->n_instances && !be; j++)
            if (strcmp(g->instances[j]->name, b->backend) == 0) be = g->instances[j];
        if (!be || dynamic_lists(be)) continue;
        const name_pairs *lists[2] = {&b->rename, &b->describe};
        const char *keys[2] = {"rename", "describe"};
        for (int l = 0; l < 2; l++)
            for (size_t k = 0; k < lists[l]->n; k++)
                if (!offered(catset_lists(cs, srv), be, lists[l]->from[k])) {
                    char where[200];
                    snprintf(where, sizeof where, "%s[%zu].%s.%s", at, i, keys[l],
                             lists[l]->from[k]);
                    errlist_add(errs, m->path, where,
                                "backend \"%s\" offers no tool or prompt \"%s\" through this binding",
                                b->backend, lists[l]->from[k]);
                }
    }
}

/* Static backends first, then those whose lists change at run time: a
 * name both offer stays with the static one, whatever an upstream lists;
 * among the others, with the one that served it before (taken_in_this_pass). */
static void bind_pass(build_ctx *bc, bool dynamic) {
    generation *g = bc->g;
    const gen_server *gs = &g->servers[bc->srv];
    if (gs->default_bindings)
        for (size_t i = 0; i < g->n_instances; i++) {
            mcpg_instance *be = g->instances[i];
            if (be->desc->kind != MCPG_KIND_BACKEND || dynamic_lists(be) != dynamic) continue;
            snprintf(bc->where, sizeof bc->where, "modules[%u]", be->slot - 1);
            bind_kind(bc, be, NULL);
        }
    char at[48];
    bindings_key(bc->srv, at, sizeof at);
    for (size_t i = 0; i < gs->n_bindings; i++) {
        snprintf(bc->where, sizeof bc->where, "%s[%zu]", at, i);
        for (size_t j = 0; j < g->n_instances; j++)
            if (dynamic_lists(g->instances[j]) == dynamic &&
                strcmp(g->instances[j]->name, gs->bindings[i].backend) == 0)
                bind_kind(bc, g->instances[j], &gs->bindings[i]);
    }
}

/* prev's lists of the server named as g's server srv is, or NULL. */
static const catalog *prev_lists_of(const catset *prev, const generation *g, uint32_t srv) {
    for (uint32_t i = 0; prev && i < prev->n_servers; i++)
        if (strcmp(prev->server_names[i], g->servers[srv].name) == 0) return catset_lists(prev, i);
    return NULL;
}

static void bind_all(generation *g, catset *cs, const catset *prev, uint32_t srv, manifest *m,
                     errlist *errs, int kind) {
    build_ctx bc = {.g = g, .cs = cs, .srv = srv, .errs = errs, .file = m->path, .kind = kind,
                    .prev = prev, .prev_lists = prev_lists_of(prev, g, srv)};
    catalog *cat = building_cat(&bc);
    mcpg_buf_puts(&cat->list, "[");
    bind_pass(&bc, false);
    if (prev) {
        bc.take = TAKE_OWNED;
        bind_pass(&bc, true);
        bc.take = TAKE_UNOWNED;
    }
    bind_pass(&bc, true);
    finish_kind(cat, kind);
}

/* Backends that offer tasks: routes by instance name (a task id's head). */
static void collect_task_backends(generation *g) {
    for (size_t i = 0; i < g->n_instances; i++) {
        mcpg_instance *inst = g->instances[i];
        if (inst->desc->kind != MCPG_KIND_BACKEND) continue;
        const mcpg_backend_ops *ops = inst->desc->ops;
        if (!MCPG_HAS(ops, task)) continue;
        g->task_backends = realloc(g->task_backends, (g->n_task_backends + 1) * sizeof(route));
        g->task_backends[g->n_task_backends++] =
            (route){.client_name = strdup(inst->name), .target = strdup(""), .backend = inst};
    }
}

static void catset_free(catset *cs);

static catset *catset_build(generation *g, const catset *prev, manifest *m, errlist *errs,
                            uint64_t version) {
    catset *cs = calloc(1, sizeof *cs);
    if (!cs) return NULL;
    cs->version = version;
    atomic_init(&cs->refs, 1); /* the generation's */
    cs->unlisted = calloc(g->n_instances + 1, sizeof *cs->unlisted);
    cs->blocked = calloc(g->n_instances + 1, sizeof *cs->blocked);
    cs->n_servers = g->n_servers;
    cs->cat = calloc((size_t)g->n_servers * CAT_COUNT, sizeof *cs->cat);
    cs->server_names = calloc(g->n_servers, sizeof *cs->server_names);
    for (uint32_t v = 0; cs->server_names && v < g->n_servers; v++)
        cs->server_names[v] = strdup(g->servers[v].name);
    if (!cs->unlisted || !cs->blocked || !cs->cat || !cs->server_names) {
        catset_free(cs);
        return NULL;
    }
    if (m->pins_file) cs->seen = pins_doc_new();
    for (uint32_t v = 0; v < g->n_servers; v++)
        for (int k = 0; k < CAT_COUNT; k++) bind_all(g, cs, prev, v, m, errs, k);
    if (cs->n_warned > 1) qsort(cs->warned, cs->n_warned, sizeof *cs->warned, cmp_text);
    if (cs->seen) pins_seen_write(m->pins_file, cs->seen);
    return cs;
}

static void catset_free(catset *cs) {
    for (size_t k = 0; cs->cat && k < (size_t)cs->n_servers * CAT_COUNT; k++) {
        catalog *cat = &cs->cat[k];
        for (size_t i = 0; i < cat->n_routes; i++) {
            free(cat->routes[i].client_name);
            free(cat->routes[i].target);
            mcpg_param_headers_free(&cat->routes[i].params);
        }
        free(cat->routes);
        for (size_t i = 0; i < cat->n_items; i++) free(cat->items[i].name);
        free(cat->items);
        mcpg_buf_free(&cat->list);
        mcpg_buf_free(&cat->answer);
    }
    free(cs->cat);
    for (uint32_t v = 0; cs->server_names && v < cs->n_servers; v++) free(cs->server_names[v]);
    free(cs->server_names);
    free(cs->unlisted);
    free(cs->blocked);
    json_decref(cs->seen);
    for (size_t i = 0; i < cs->n_notices; i++) {
        free(cs->notices[i].backend);
        free(cs->notices[i].name);
        json_decref(cs->notices[i].diff);
    }
    free(cs->notices);
    for (size_t i = 0; i < cs->n_warned; i++) free(cs->warned[i]);
    free(cs->warned);
    free(cs);
}

void catalog_build(generation *g, manifest *m, errlist *errs) {
    /* a reload's lists start from the serving generation's owners; a reload
     * is built on the control loop, which is also where lists are swapped
     * and retired, so this pin cannot race a retire */
    catset *prev = kernel.gen && kernel.gen != g ? catalog_acquire(kernel.gen) : NULL;
    catset *cs = catset_build(g, prev, m, errs, 1);
    catalog_release(prev);
    if (!cs) {
        errlist_add(errs, m->path, "bindings", "out of memory building the merged lists");
        return;
    }
    atomic_init(&g->cats, cs);
    for (uint32_t v = 0; v < g->n_servers; v++) check_pairs(g, cs, v, m, errs);
    collect_task_backends(g);
}

static void catalog_retire(catset *old);

void catalog_rebuild(generation *g) {
    catset *old = atomic_load(&g->cats);
    catset *cs = catset_build(g, old, g->m, NULL, old ? old->version + 1 : 1);
    if (!cs) {
        klog(MCPG_LOG_ERROR, "kernel", "out of memory: the merged lists were not rebuilt");
        return;
    }
    old = atomic_exchange(&g->cats, cs);
    klog(MCPG_LOG_INFO, "kernel", "merged lists rebuilt (version %llu): %zu tools, %zu prompts, "
         "%zu resources, %zu resource templates", (unsigned long long)cs->version,
         cs->cat[CAT_TOOLS].n_routes, cs->cat[CAT_PROMPTS].n_routes,
         cs->cat[CAT_RESOURCES].n_routes, cs->cat[CAT_TEMPLATES].n_routes);
    catalog_retire(old);
    pins_announce(g); /* the sinks run: a rebuild happens only once the generation serves */
}

/* Calls pin a set only on loop threads, between one load and one add in
 * the same callback. So once every loop has run a callback after the swap,
 * none can still be about to pin the old set: only then does the
 * generation let go of it (a quiescent point per loop, as in RCU). */
catset *catalog_acquire(generation *g) {
    catset *cs = atomic_load(&g->cats);
    if (cs) atomic_fetch_add(&cs->refs, 1);
    return cs;
}

typedef struct retire {
    catset *old;
    atomic_uint waiting; /* loops that have not passed a callback yet */
    mcpg_post posts[];   /* one per loop */
} retire;

static void retire_one(retire *r) {
    if (atomic_fetch_sub(&r->waiting, 1) == 1) {
        catalog_release(r->old);
        free(r);
    }
}

static void retire_on_loop(void *arg) { retire_one(arg); }

static void catalog_retire(catset *old) {
    uint32_t n = kernel.n_workers;
    retire *r = n ? malloc(sizeof *r + n * sizeof(mcpg_post)) : NULL;
    if (!r) { /* no loop runs (or no memory: keep it, a small leak beats a crash) */
        if (!n) catalog_release(old);
        return;
    }
    r->old = old;
    atomic_init(&r->waiting, n);
    for (uint32_t i = 0; i < n; i++) {
        r->posts[i].fn = retire_on_loop;
        r->posts[i].arg = r;
        if (worker_post(&kernel.workers[i], &r->posts[i]) != 0) retire_one(r); /* a stopped loop pins nothing */
    }
}

void catalog_release(catset *cs) {
    if (cs && atomic_fetch_sub(&cs->refs, 1) == 1) catset_free(cs);
}

const route *catalog_find_task_backend(const generation *g, const char *instance, size_t n) {
    for (size_t i = 0; i < g->n_task_backends; i++) {
        const char *name = g->task_backends[i].client_name;
        if (strlen(name) == n && memcmp(name, instance, n) == 0) return &g->task_backends[i];
    }
    return NULL;
}

void catalog_free(generation *g) {
    for (size_t i = 0; i < g->n_task_backends; i++) {
        free(g->task_backends[i].client_name);
        free(g->task_backends[i].target);
    }
    free(g->task_backends);
    catalog_release(atomic_exchange(&g->cats, NULL));
}

/* ---- lookups (per call) ---- */

/* name is (pointer, length) from a client and may hold a NUL: compare bytes
 * with the length as tie-break (the order strcmp sorted the routes in),
 * never read a route's name past its end. */
const route *catalog_find(const catalog *lists, int kind, const char *name, size_t len) {
    const catalog *cat = &lists[kind];
    size_t lo = 0, hi = cat->n_routes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *cn = cat->routes[mid].client_name;
        size_t cl = strlen(cn);
        int c = memcmp(cn, name, cl < len ? cl : len);
        if (c == 0) c = (cl > len) - (cl < len);
        if (c == 0) return &cat->routes[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* Does uri[0..n) match an RFC 6570 template (level 1 and 2 expressions)?
 * {var} matches one or more characters other than '/', '?' and '#'; {+var}
 * and {#var} match any (non-empty) run. Literal text matches itself. */
static bool template_match(const char *t, const char *u, size_t n) {
    while (*t) {
        if (*t != '{') {
            if (!n || *t != *u) return false;
            t++, u++, n--;
            continue;
        }
        const char *close = strchr(t, '}');
        if (!close) return false;
        bool reserved = t[1] == '+' || t[1] == '#';
        const char *rest = close + 1;
        for (size_t take = 1; take <= n; take++) {
            char ch = u[take - 1];
            if (!reserved && (ch == '/' || ch == '?' || ch == '#')) break;
            if (template_match(rest, u + take, n - take)) return true;
        }
        return false;
    }
    return n == 0;
}

const route *catalog_find_resource(const catalog *lists, const char *uri, size_t len) {
    const route *r = catalog_find(lists, CAT_RESOURCES, uri, len);
    if (r) return r;
    const catalog *t = &lists[CAT_TEMPLATES];
    for (size_t i = 0; i < t->n_routes; i++)
        if (template_match(t->routes[i].target, uri, len)) return &t->routes[i];
    return NULL;
}

const route *catalog_find_resource_any(const catset *cs, const char *uri, size_t len) {
    const route *r = NULL;
    for (uint32_t v = 0; !r && v < cs->n_servers; v++)
        r = catalog_find_resource(catset_lists(cs, v), uri, len);
    return r;
}

/* A page of a merged list, into out: {"tools":[items from..],"nextCursor":".."},
 * holding at most `page` of the items keep() lets through (NULL: all). The
 * cursor is the index of the first item to look at, as decimal text. */
int catalog_page(const catalog *lists, int kind, const char *cursor, size_t cursor_len,
                 size_t page, catalog_keep_fn keep, void *arg, mcpg_buf *out) {
    const catalog *cat = &lists[kind];
    size_t from = 0;
    if (cursor) {
        if (!cursor_len || cursor_len > 18) return MCPG_EINVAL;
        for (size_t i = 0; i < cursor_len; i++) {
            if (cursor[i] < '0' || cursor[i] > '9') return MCPG_EINVAL;
            from = from * 10 + (size_t)(cursor[i] - '0');
        }
        if (from > cat->n_items) return MCPG_EINVAL;
    }
    out->len = 0;
    mcpg_buf_printf(out, "{\"%s\":[", KINDS[kind].answer);
    size_t i = from, shown = 0;
    for (; i < cat->n_items && shown < page; i++) {
        if (keep && !keep(arg, KINDS[kind].visible_kind, cat->items[i].name)) continue;
        if (shown++) mcpg_buf_append(out, ",", 1);
        mcpg_buf_append(out, cat->list.data + cat->items[i].off, cat->items[i].len);
    }
    /* a full page says where to go on; the next may turn out empty when
     * filtering leaves nothing after it, which a client handles */
    mcpg_buf_append(out, "]", 1);
    if (i < cat->n_items) mcpg_buf_printf(out, ",\"nextCursor\":\"%zu\"", i);
    return mcpg_buf_append(out, "}", 1);
}
