/* Pinned definitions: what a backend says a tool, prompt or resource
 * template is, recorded once an operator approved it, so that a definition
 * changed behind the operator's back (a description or schema rewritten to
 * steer the model) is noticed and acted on before any client reads it.
 *
 * A definition is reduced to the members a model reads (pins_definition),
 * written canonically (members sorted, no spaces) and hashed with SHA-256.
 * The pins file (gateway.pins.file) holds the approved hash, and the
 * definition itself so that a change can be shown as a diff. The gateway
 * writes what it sees beside it (<file>.seen); `mcpg pins diff` compares the
 * two and `mcpg pins approve` copies what is seen into the pins file, which
 * the running gateway reads again within a second (pins_control_init).
 *
 * Catalog builds and this file's state run on the control loop only. */
#include "kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

/* ---- the definition a pin covers ---- */

static const char *const k_tool_members[] = {"name", "title", "description", "inputSchema",
                                             "outputSchema", "annotations", NULL};
static const char *const k_prompt_members[] = {"name", "title", "description", "arguments", NULL};
static const char *const k_template_members[] = {"uriTemplate", "name", "title", "description",
                                                 "mimeType", NULL};

const char *pins_kind_key(int kind) {
    switch (kind) {
    case CAT_TOOLS: return "tools";
    case CAT_PROMPTS: return "prompts";
    case CAT_TEMPLATES: return "resourceTemplates";
    default: return NULL; /* resources are data, not instructions: not pinned */
    }
}

static const char *const *members_of(int kind) {
    switch (kind) {
    case CAT_TOOLS: return k_tool_members;
    case CAT_PROMPTS: return k_prompt_members;
    case CAT_TEMPLATES: return k_template_members;
    default: return NULL;
    }
}

json_t *pins_definition(int kind, const char *item, size_t n) {
    const char *const *members = members_of(kind);
    json_t *whole = members ? json_loadb(item, n, JSON_DECODE_ANY, NULL) : NULL;
    if (!json_is_object(whole)) {
        json_decref(whole);
        return NULL;
    }
    json_t *def = json_object();
    for (const char *const *m = members; *m; m++) {
        json_t *v = json_object_get(whole, *m);
        if (v) json_object_set(def, *m, v);
    }
    json_decref(whole);
    return def;
}

char *pins_canonical(const json_t *def) {
    return json_dumps(def, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

int pins_hash(const json_t *def, char hex[65]) {
    char *text = pins_canonical(def);
    if (!text) return -1;
    unsigned char md[32];
    unsigned int n = 0;
    int ok = EVP_Digest(text, strlen(text), md, &n, EVP_sha256(), NULL) && n == 32;
    free(text);
    if (!ok) return -1;
    mcpg_hex(md, 32, hex);
    hex[64] = '\0';
    return 0;
}

static const char *const k_mode_names[] = {[PINS_OFF] = "off", [PINS_WARN] = "warn",
                                           [PINS_HIDE] = "hide", [PINS_BLOCK] = "block"};

int pins_mode_of(const char *name) {
    for (int i = PINS_OFF; i <= PINS_BLOCK; i++)
        if (name && strcmp(name, k_mode_names[i]) == 0) return i;
    return -1;
}

/* ---- the pins file ---- */

struct pins {
    json_t *root;         /* {"version":1,"pins":{backend:{kind:{name:{sha256,definition}}}}} */
    struct stat st;       /* the file as it was read (none: st_ino 0) */
};

static bool hex64(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

/* Every entry of a pins (or seen) document is {sha256, definition?}. */
static int check_entries(json_t *all, char *err, size_t cap) {
    const char *be, *kind, *name;
    json_t *kinds, *items, *e;
    json_object_foreach(all, be, kinds) {
        if (!json_is_object(kinds)) {
            snprintf(err, cap, "pins.%s: expected an object of kinds", be);
            return -1;
        }
        json_object_foreach(kinds, kind, items) {
            if (strcmp(kind, "tools") && strcmp(kind, "prompts") && strcmp(kind, "resourceTemplates")) {
                snprintf(err, cap, "pins.%s.%s: not a kind (tools, prompts, resourceTemplates)", be, kind);
                return -1;
            }
            if (!json_is_object(items)) {
                snprintf(err, cap, "pins.%s.%s: expected an object of names", be, kind);
                return -1;
            }
            json_object_foreach(items, name, e) {
                if (!json_is_object(e) || !hex64(json_string_value(json_object_get(e, "sha256")))) {
                    snprintf(err, cap, "pins.%s.%s.%s.sha256: expected 64 lowercase hex digits", be,
                             kind, name);
                    return -1;
                }
            }
        }
    }
    return 0;
}

static json_t *checked(json_t *doc, char *err, size_t cap);

json_t *pins_read_doc(const char *path, struct stat *st, char *err, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) { /* none yet: nothing is approved */
            if (st) memset(st, 0, sizeof *st);
            json_t *doc = json_pack("{s:i,s:{}}", "version", 1, "pins");
            return doc;
        }
        snprintf(err, cap, "cannot open it: %s", strerror(errno));
        return NULL;
    }
    struct stat s;
    if (fstat(fd, &s) != 0) memset(&s, 0, sizeof s);
    json_error_t je;
    json_t *doc = json_loadfd(fd, 0, &je);
    close(fd);
    if (!doc) {
        snprintf(err, cap, "line %d: %s", je.line, je.text);
        return NULL;
    }
    doc = checked(doc, err, cap);
    if (doc && st) *st = s;
    return doc;
}

/* A document's entries checked (check_entries), as pins_read_doc does. */
static json_t *checked(json_t *doc, char *err, size_t cap) {
    json_t *all = json_object_get(doc, "pins");
    if (json_integer_value(json_object_get(doc, "version")) != 1) snprintf(err, cap, "version: expected 1");
    else if (!json_is_object(all)) snprintf(err, cap, "pins: expected an object");
    else if (check_entries(all, err, cap) == 0) return doc;
    json_decref(doc);
    return NULL;
}

pins *pins_from_text(const char *text, char *err, size_t cap) {
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    if (!doc) {
        snprintf(err, cap, "line %d: %s", je.line, je.text);
        return NULL;
    }
    pins *p = calloc(1, sizeof *p);
    if (p) p->root = checked(doc, err, cap);
    else json_decref(doc);
    if (p && !p->root) {
        free(p);
        p = NULL;
    }
    return p;
}

bool pins_same(const pins *a, const pins *b) { return json_equal(a->root, b->root); }

int pins_write(const pins *p, const char *path) { return pins_write_doc(path, p->root); }

void pins_took_file(pins *p, const char *path) {
    if (stat(path, &p->st) != 0) memset(&p->st, 0, sizeof p->st);
}

pins *pins_load(const char *path, char *err, size_t cap) {
    pins *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    p->root = pins_read_doc(path, &p->st, err, cap);
    if (!p->root) {
        free(p);
        return NULL;
    }
    return p;
}

void pins_free(pins *p) {
    if (!p) return;
    json_decref(p->root);
    free(p);
}

const json_t *pins_entry(const json_t *doc, const char *backend, int kind, const char *name) {
    const json_t *kinds = json_object_get(json_object_get(doc, "pins"), backend);
    return json_object_get(json_object_get(kinds, pins_kind_key(kind)), name);
}

const char *pins_find(const pins *p, const char *backend, int kind, const char *name,
                      const json_t **definition) {
    const json_t *e = p ? pins_entry(p->root, backend, kind, name) : NULL;
    if (definition) *definition = e ? json_object_get(e, "definition") : NULL;
    return e ? json_string_value(json_object_get(e, "sha256")) : NULL;
}

bool pins_file_changed(const pins *p, const char *path) {
    struct stat now;
    if (stat(path, &now) != 0) return p->st.st_ino != 0; /* removed: nothing approved now */
    return now.st_ino != p->st.st_ino || now.st_size != p->st.st_size ||
           now.st_mtim.tv_sec != p->st.st_mtim.tv_sec || now.st_mtim.tv_nsec != p->st.st_mtim.tv_nsec;
}

/* ---- what the gateway sees ---- */

void pins_doc_put(json_t *doc, const char *backend, int kind, const char *name, const char *hex,
                  const json_t *definition) {
    json_t *all = json_object_get(doc, "pins");
    json_t *kinds = json_object_get(all, backend);
    if (!kinds) json_object_set_new(all, backend, kinds = json_object());
    json_t *items = json_object_get(kinds, pins_kind_key(kind));
    if (!items) json_object_set_new(kinds, pins_kind_key(kind), items = json_object());
    json_object_set_new(items, name, json_pack("{s:s,s:O}", "sha256", hex, "definition",
                                               definition));
}

json_t *pins_doc_new(void) { return json_pack("{s:i,s:{}}", "version", 1, "pins"); }

int pins_write_doc(const char *path, const json_t *doc) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    unlink(tmp); /* one a crash left; then a new file, never one a link points to */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    int rc = json_dumpfd(doc, fd, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (rc == 0 && write(fd, "\n", 1) != 1) rc = -1;
    if (rc == 0 && fsync(fd) != 0) rc = -1;
    int err = errno;
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0) {
        err = errno;
        rc = -1;
    }
    if (rc != 0) {
        unlink(tmp);
        errno = err;
    }
    return rc;
}

/* The file the gateway writes what it sees to: <pins file>.seen. */
void pins_seen_path(const char *file, char *out, size_t cap) { snprintf(out, cap, "%s.seen", file); }

/* ---- an item against its pin ---- */

int pins_look(const pins *p, json_t *seen, const char *backend, int kind, const char *name,
              const char *item, size_t n, pin_look *out) {
    *out = (pin_look){0};
    out->def = pins_definition(kind, item, n);
    if (!out->def || pins_hash(out->def, out->seen) != 0) {
        json_decref(out->def);
        out->def = NULL;
        return -1;
    }
    if (seen) pins_doc_put(seen, backend, kind, name, out->seen, out->def);
    const char *pinned = pins_find(p, backend, kind, name, &out->old_def);
    if (pinned) memcpy(out->pinned, pinned, 65);
    out->same = pinned && strcmp(pinned, out->seen) == 0;
    return 0;
}

void pins_look_done(pin_look *l) {
    json_decref(l->def);
    l->def = NULL;
}

/* ---- a readable diff ---- */

/* "~ PTR: OLD -> NEW", "+ PTR: NEW" or "- PTR: OLD", values as compact JSON
 * (cut at a few hundred bytes); 40 lines at most. */
static void diff_line(json_t *lines, char sign, const char *ptr, const json_t *a, const json_t *b) {
    enum { MAX_LINES = 40 };
    if (json_array_size(lines) >= MAX_LINES) return;
    char *at = a ? json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
    char *bt = b ? json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
    char line[1600];
    if (sign == '~') snprintf(line, sizeof line, "~ %s: %.600s -> %.600s", ptr, at ? at : "", bt ? bt : "");
    else snprintf(line, sizeof line, "%c %s: %.600s", sign, ptr, sign == '+' ? (bt ? bt : "") : (at ? at : ""));
    free(at);
    free(bt);
    json_array_append_new(lines, json_string(line));
}

/* One line per difference, at its JSON pointer: "~ /description: old -> new",
 * "+ /inputSchema/properties/x: value", "- /annotations: value". */
static void diff_values(json_t *lines, const char *ptr, const json_t *a, const json_t *b) {
    if (json_equal((json_t *)a, (json_t *)b)) return;
    if (json_is_object(a) && json_is_object(b)) {
        const char *k;
        json_t *v;
        char sub[1024];
        json_object_foreach((json_t *)a, k, v) {
            snprintf(sub, sizeof sub, "%s/%s", ptr, k);
            json_t *w = json_object_get(b, k);
            if (!w) diff_line(lines, '-', sub, v, NULL);
            else diff_values(lines, sub, v, w);
        }
        json_object_foreach((json_t *)b, k, v) {
            snprintf(sub, sizeof sub, "%s/%s", ptr, k);
            if (!json_object_get(a, k)) diff_line(lines, '+', sub, NULL, v);
        }
        return;
    }
    diff_line(lines, '~', *ptr ? ptr : "/", a, b);
}

json_t *pins_diff(const json_t *old_def, const json_t *new_def) {
    json_t *lines = json_array();
    if (!old_def) {
        diff_line(lines, '+', "/", NULL, new_def);
        return lines;
    }
    diff_values(lines, "", old_def, new_def);
    return lines;
}

/* ---- what the gateway sees, to a file ---- */

static bool seen_off; /* --check: a check writes nothing */

void pins_seen_off(void) { seen_off = true; }

void pins_seen_write(const char *pins_file, const json_t *seen) {
    static char *last; /* the text last written (control loop only) */
    if (seen_off) return;
    char path[PATH_MAX];
    pins_seen_path(pins_file, path, sizeof path);
    char *text = json_dumps(seen, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text || (last && strcmp(text, last) == 0)) {
        free(text);
        return;
    }
    if (pins_write_doc(path, seen) != 0) {
        klog(MCPG_LOG_WARN, "kernel", "cannot write %s: %s (mcpg pins diff and approve read it)",
             path, strerror(errno));
        free(text);
        return;
    }
    free(last);
    last = text;
}

/* ---- announcing a change ---- */

static const char *what_is_done(int mode) {
    switch (mode) {
    case PINS_WARN: return "served (warn)";
    case PINS_BLOCK: return "its backend's items left out of the lists and refused (block)";
    default: return "left out of the lists and refused (hide)";
    }
}

const char *pins_kind_noun(int kind) {
    return kind == CAT_TOOLS ? "tool" : kind == CAT_PROMPTS ? "prompt" : "resource template";
}

static const char *list_method(int kind) {
    return kind == CAT_TOOLS ? "tools/list" : kind == CAT_PROMPTS ? "prompts/list"
                                                                  : "resources/templates/list";
}

/* {"kind","name","action","pinned_sha256","sha256","diff"}: the event's detail. */
static char *notice_detail(const pin_notice *n) {
    json_t *d = json_pack("{s:s,s:s,s:s,s:s*,s:s,s:O*}", "kind", pins_kind_key(n->kind), "name",
                          n->name, "action", k_mode_names[n->mode], "pinned_sha256",
                          n->pinned[0] ? n->pinned : NULL, "sha256", n->seen, "diff", n->diff);
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    return text;
}

static bool audits_somewhere(const generation *g, const mcpg_instance *inst) {
    for (uint32_t v = 0; v < g->n_servers; v++)
        for (size_t i = 0; i < g->servers[v].n_stage[STAGE_AUDIT]; i++)
            if (g->servers[v].stage[STAGE_AUDIT][i] == inst) return true;
    return false;
}

static void audit_notice(generation *g, const pin_notice *n) {
    char *detail = notice_detail(n);
    mcpg_audit_event ev = {.size = sizeof ev};
    ev.name = n->pinned[0] ? "mcpg.pin.changed" : "mcpg.pin.unpinned";
    ev.seq = atomic_fetch_add(&kernel.audit_seq, 1) + 1;
    ev.time_us = wall_us();
    ev.id_json = "null";
    ev.id_len = 4;
    ev.method = list_method(n->kind);
    ev.tool = n->name;
    ev.backend = n->backend;
    ev.generation = g->id;
    ev.gateway_id = g->m->id;
    ev.args_json = detail;
    ev.args_len = detail ? strlen(detail) : 0;
    /* every sink of every server's pipeline, each once */
    for (size_t i = 0; i < g->n_instances; i++) {
        mcpg_instance *sink = g->instances[i];
        if (!audits_somewhere(g, sink)) continue;
        const mcpg_audit_ops *ops = sink->desc->ops;
        if (ops->emit(sink->state, NULL, &ev) != MCPG_CONTINUE)
            klog(MCPG_LOG_ERROR, sink->stamp, "could not record %s for %s \"%s\"", ev.name,
                 pins_kind_noun(n->kind), n->name);
    }
    free(detail);
}

static void log_notice(const pin_notice *n) {
    char *lines = n->diff ? json_dumps(n->diff, JSON_COMPACT) : NULL;
    klog(MCPG_LOG_WARN, "kernel", "backend \"%s\": %s \"%s\" %s: %s; %s", n->backend,
         pins_kind_noun(n->kind), n->name, n->pinned[0] ? "differs from its pin" : "has no pin",
         what_is_done(n->mode), lines ? lines : "");
    free(lines);
}

void pins_announce(generation *g) {
    catset *cs = catalog_acquire(g);
    for (size_t i = 0; cs && i < cs->n_notices; i++) {
        pin_notice *n = &cs->notices[i];
        if (!n->fresh || n->announced) continue;
        n->announced = true;
        log_notice(n);
        metrics_count(KM.pin_changes, (uint32_t)(n->mode - PINS_WARN), 1);
        audit_notice(g, n);
    }
    catalog_release(cs);
}

/* ---- the pins file read again when it changes ---- */

static uv_timer_t pins_timer;

static void on_pins_timer(uv_timer_t *t) {
    (void)t;
    generation *g = kernel.gen;
    if (!g || !g->pins || !g->m->pins_file || !pins_file_changed(g->pins, g->m->pins_file)) return;
    char why[512];
    pins *p = pins_load(g->m->pins_file, why, sizeof why);
    if (!p) {
        klog(MCPG_LOG_ERROR, "kernel", "%s: %s (the pins read before still hold)", g->m->pins_file,
             why);
        struct stat now; /* said once per change of the file, not every second */
        if (stat(g->m->pins_file, &now) == 0) g->pins->st = now;
        return;
    }
    pins_free(g->pins);
    g->pins = p;
    klog(MCPG_LOG_INFO, "kernel", "%s read again: the lists are judged against it",
         g->m->pins_file);
    news_rebuild_and_tell(g);
    pins_fleet_publish(g->m->pins_file, false); /* on a fleet: every replica's now */
}

void pins_control_init(uv_loop_t *loop) {
    uv_timer_init(loop, &pins_timer);
    uv_timer_start(&pins_timer, on_pins_timer, 1000, 1000);
    uv_unref((uv_handle_t *)&pins_timer);
}
