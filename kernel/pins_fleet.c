/* Pins on a fleet: the coordinator holds the fleet's pins document, so an
 * approval made on one replica's pins file reaches every replica.
 *
 * The key mcpg.pins holds the document as the pins file does. Loop 0 reads
 * it every second (a get: the coordinator's revision says whether it
 * moved) and hands a new one to the control loop, which adopts it: the
 * lists are rebuilt against it, and the replica's own pins file is
 * rewritten to match, so that `mcpg pins approve` there adds to the fleet's
 * pins instead of an older copy. When a replica's pins file is changed by
 * hand (an approve), the control loop hands the file's document to loop 0,
 * which puts it: the last approval wins, whole. When the key is absent (the
 * first replica of a fleet), the replica's file is put if absent.
 *
 * Only with a fleet coordinator (cluster.kind nats or redis) and
 * gateway.pins.file set; a single node reads its file alone (pins.c). */
#include "kernel.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#define PINS_KEY "mcpg.pins"
#define POLL_MS 1000

static struct {
    /* loop 0's */
    mcpg_worker *w;
    mcpg_instance *coord;
    const mcpg_coordinator_ops *co;
    uv_timer_t tick;
    bool ticking, asking;
    uint64_t revision;         /* the document last adopted (0: none yet) */
    char *publish;             /* a document to put, handed over by the control loop */
    bool publish_if_absent;
    /* handed from loop 0 to the control loop */
    uv_async_t adopt_async;
    pthread_mutex_t mu;
    char *adopt;               /* the coordinator's document, not yet adopted */
    bool control_ready;
} F = {.mu = PTHREAD_MUTEX_INITIALIZER};

static char *document_text(const char *pins_file);

static bool fleet_pins(const generation *g) {
    return g && g->coordinator && g->m->pins_file && g->m->cluster_kind &&
           strcmp(g->m->cluster_kind, "single_node") != 0;
}

/* ---- the control loop: adopting the fleet's document ---- */

static void adopt(generation *g, const char *text) {
    char why[512];
    pins *p = pins_from_text(text, why, sizeof why);
    if (!p) {
        klog(MCPG_LOG_ERROR, "kernel", "the fleet's pins (coordinator key " PINS_KEY "): %s; "
             "the pins read before still hold", why);
        return;
    }
    if (g->pins && pins_same(g->pins, p)) {
        pins_free(p);
        return;
    }
    if (pins_write(p, g->m->pins_file) != 0)
        klog(MCPG_LOG_WARN, "kernel", "%s: cannot write the fleet's pins to it", g->m->pins_file);
    pins_took_file(p, g->m->pins_file); /* this write is not an approval to publish again */
    pins_free(g->pins);
    g->pins = p;
    klog(MCPG_LOG_INFO, "kernel", "the fleet's pins adopted (coordinator key " PINS_KEY ")");
    news_rebuild_and_tell(g);
}

static void on_adopt(uv_async_t *a) {
    (void)a;
    pthread_mutex_lock(&F.mu);
    char *text = F.adopt;
    F.adopt = NULL;
    pthread_mutex_unlock(&F.mu);
    if (text && fleet_pins(kernel.gen)) adopt(kernel.gen, text);
    free(text);
}

void pins_fleet_control_init(uv_loop_t *loop) {
    uv_async_init(loop, &F.adopt_async, on_adopt);
    uv_unref((uv_handle_t *)&F.adopt_async);
    F.control_ready = true;
}

/* ---- loop 0: the coordinator ---- */

static void *ci(void) { return F.coord->state; }

static void on_put(void *arg, int status, const mcpg_coord_value *v) {
    (void)arg;
    (void)v;
    if (status == MCPG_ERANGE)
        klog(MCPG_LOG_WARN, "kernel", "the pins are larger than the coordinator takes (its "
             "max_value_bytes): the other replicas do not have them");
    else if (status != 0 && status != MCPG_EEXIST)
        klog(MCPG_LOG_WARN, "kernel", "the pins could not be put in the coordinator (%s): "
             "the other replicas do not have them yet", mcpg_strerror(status));
}

static void put_pending(void) {
    if (!F.publish) return;
    int rc = F.publish_if_absent
                 ? F.co->put_if_absent(ci(), F.w, PINS_KEY, sizeof PINS_KEY - 1, F.publish,
                                       strlen(F.publish), 0, on_put, NULL)
                 : F.co->put(ci(), F.w, PINS_KEY, sizeof PINS_KEY - 1, F.publish,
                             strlen(F.publish), 0, on_put, NULL);
    if (rc != 0) on_put(NULL, rc, NULL);
    free(F.publish);
    F.publish = NULL;
}

static void hand_to_control(const char *data, size_t len) {
    char *copy = malloc(len + 1);
    if (!copy) return;
    memcpy(copy, data, len);
    copy[len] = '\0';
    pthread_mutex_lock(&F.mu);
    free(F.adopt);
    F.adopt = copy;
    pthread_mutex_unlock(&F.mu);
    uv_async_send(&F.adopt_async);
}

static void on_get(void *arg, int status, const mcpg_coord_value *v) {
    (void)arg;
    F.asking = false;
    if (status == 0 && v->data && v->revision != F.revision) {
        F.revision = v->revision;
        hand_to_control(v->data, v->len);
    }
    put_pending();
}

static void on_tick(uv_timer_t *t) {
    (void)t;
    if (F.asking || !F.coord) return;
    F.asking = F.co->get(ci(), F.w, PINS_KEY, sizeof PINS_KEY - 1, on_get, NULL) == 0;
}

typedef struct publish_post {
    mcpg_post post;
    bool if_absent;
    char text[];
} publish_post;

static void publish_on_loop(void *arg) {
    publish_post *pp = arg;
    free(F.publish);
    F.publish = strdup(pp->text);
    F.publish_if_absent = pp->if_absent;
    free(pp);
    if (!F.asking) put_pending(); /* else after the get in flight answers */
}

/* The pins file's document as compact text (a missing file: no pins), or NULL. */
static char *document_text(const char *pins_file) {
    char why[256];
    json_t *doc = pins_read_doc(pins_file, NULL, why, sizeof why);
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    return text;
}

void pins_fleet_publish(const char *pins_file, bool if_absent) {
    if (!fleet_pins(kernel.gen) || !F.w) return;
    char *text = document_text(pins_file);
    if (!text) return;
    size_t n = strlen(text) + 1;
    publish_post *pp = malloc(sizeof *pp + n);
    if (pp) {
        memcpy(pp->text, text, n);
        pp->if_absent = if_absent;
        pp->post = (mcpg_post){.fn = publish_on_loop, .arg = pp};
        if (worker_post(F.w, &pp->post) != 0) free(pp);
    }
    free(text);
}

/* On loop 0 when it starts serving g, and at each reload's switch. */
void pins_fleet_adopt(mcpg_worker *w, generation *g) {
    if (!fleet_pins(g) || !F.control_ready) {
        F.coord = NULL;
        return;
    }
    F.w = w;
    F.coord = g->coordinator;
    F.co = g->coordinator->desc->ops;
    if (!F.ticking) {
        uv_timer_init(&w->loop, &F.tick);
        uv_unref((uv_handle_t *)&F.tick);
        uv_timer_start(&F.tick, on_tick, 0, POLL_MS);
        F.ticking = true;
    }
}

/* Before the loops start: the file as this replica starts with it, put
 * after loop 0's first get unless the fleet has pins already (the first
 * replica of a fleet brings them; the others find them there). */
void pins_fleet_start(void) {
    generation *g = kernel.gen;
    if (!fleet_pins(g)) return;
    free(F.publish);
    F.publish = document_text(g->m->pins_file);
    F.publish_if_absent = true;
}

/* On loop 0 as it stops. */
void pins_fleet_stop(mcpg_worker *w) {
    (void)w;
    if (F.ticking) uv_timer_stop(&F.tick);
    F.coord = NULL;
    free(F.publish);
    F.publish = NULL;
}

/* After the loops end. */
void pins_fleet_free(void) {
    pthread_mutex_lock(&F.mu);
    free(F.adopt);
    F.adopt = NULL;
    pthread_mutex_unlock(&F.mu);
}
