/* Resource watches: the gateway polls the resources of upstreams that do
 * not push their changes (bindings[].watch), and tells subscribers when a
 * resource's content changed.
 *
 * On a fleet each resource is polled by one replica: the watched resources
 * fall into gateway.watch.shards shards (a hash of the uri), and a replica
 * polls a shard only while it holds the shard's lease, a coordinator key
 * (mcpg.watch.lease.<shard>, put_if_absent with a TTL of lease_ms, renewed
 * with compare_and_set every lease_ms / 3). Replicas say hello on a subject
 * every second; each takes free shards up to its fair share (shards / the
 * replicas heard from lately) and gives back what is over it, so the shards
 * spread, and a dead replica's shards move to the others once its leases
 * expire and its hellos stop.
 *
 * The fleet's last version of each resource (a hash of its content) is a
 * coordinator key too (mcpg.watch.ver.<hash of the uri>). A poll that reads
 * another version writes it with compare_and_set on the revision it last
 * saw, and only the writer that wins tells: a new owner's first poll reads
 * the key, so a change made during the hand-over is told, and two replicas
 * that both believe they own a shard for a moment tell a change once. The
 * telling goes through the fleet's news (news.c), so every subscriber on
 * every replica hears it once. Everything here uses only the coordinator
 * ABI: memory, NATS and Redis alike.
 *
 * It all runs on loop 0. A poll is the gateway's own resources/read
 * (call_submit_internal: straight to the backend, not audited), one at a
 * time per resource. */
#include "kernel.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define TICK_MS 250
#define HELLO_MS 1000
#define MEMBER_TTL_MS 3000    /* a replica unheard this long (three hellos) is gone */
#define MAX_MEMBERS 256
#define ACQUIRE_PER_TICK 2
#define VERSION_TRIES 4       /* conflicting writers before a poll gives up (the next one tries again) */
#define HELLO_SUBJECT "mcpg.watch.hello"
#define LEASE_KEY "mcpg.watch.lease."
#define VERSION_KEY "mcpg.watch.ver."

typedef struct witem {
    char *uri;
    uint32_t shard;
    uint64_t interval_ms, next_ms;
    bool busy;              /* a read or a version step in flight */
    bool known;             /* version and revision are the fleet's, as last seen */
    uint64_t version, revision;
    char key[sizeof VERSION_KEY + 16];
} witem;

typedef struct wlease {
    bool held, busy;
    uint64_t revision, renewed_ms;
} wlease;

static struct {
    mcpg_worker *w;
    uv_timer_t tick;
    bool running;
    mcpg_instance *coord;   /* the coordinator the leases are in */
    const mcpg_coordinator_ops *co;
    mcpg_coord_sub *sub;
    uint32_t epoch;         /* bumped at each rebuild: older answers are dropped */
    char replica[16];       /* this process, as its leases say */
    uint32_t replica_id;
    witem *items;
    size_t n;
    wlease *leases;
    uint32_t nshards;
    uint64_t lease_ms;
    struct { uint32_t id; uint64_t seen_ms; } members[MAX_MEMBERS];
    size_t n_members;
    uint64_t hello_ms;
    size_t alive_seen;      /* the replica count last logged */
    uint32_t acquire_from;
    uint64_t polls, told;
} W;

/* ---- small pieces ----------------------------------------------------------------------- */

static uint64_t fnv64(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t now_ms(void) { return uv_now(&W.w->loop); }

static void *ci(void) { return W.coord->state; }

static void lease_key(uint32_t shard, char *out, size_t cap) {
    snprintf(out, cap, LEASE_KEY "%" PRIu32, shard);
}

/* An op's context: which rebuild it belongs to, and what it is about. The
 * live ones are listed: an op the coordinator took but never answered (it
 * stopped with the op queued) is freed after the loops end
 * (watch_free_left). */
typedef struct wop {
    struct wop *next, *prev;
    uint32_t epoch;
    size_t idx;       /* the item, or the shard */
    uint64_t hash;    /* the content just read */
    int tries;
    char params[];    /* a read's {"uri":...}, alive as long as its call */
} wop;

static wop *g_ops; /* loop 0's live ops */

static wop *op_new(size_t idx, size_t extra) {
    wop *o = calloc(1, sizeof *o + extra);
    if (!o) return NULL;
    o->epoch = W.epoch, o->idx = idx;
    o->next = g_ops;
    if (g_ops) g_ops->prev = o;
    g_ops = o;
    return o;
}

static void op_free(wop *o) {
    if (o->prev) o->prev->next = o->next;
    else g_ops = o->next;
    if (o->next) o->next->prev = o->prev;
    free(o);
}

void watch_free_left(void) {
    while (g_ops) op_free(g_ops);
}

/* The answer is still about what we have (no rebuild since). */
static bool current(const wop *o) { return W.running && o->epoch == W.epoch; }

static void noop_cb(void *arg, int status, const mcpg_coord_value *v) { (void)arg, (void)status, (void)v; }

/* ---- members: who else polls ------------------------------------------------------------------ */

static void heard(uint32_t id) {
    uint64_t now = now_ms();
    for (size_t i = 0; i < W.n_members; i++)
        if (W.members[i].id == id) {
            W.members[i].seen_ms = now;
            return;
        }
    if (W.n_members < MAX_MEMBERS) W.members[W.n_members++] = (typeof(W.members[0])){id, now};
}

static void on_hello(void *arg, const char *subject, const char *data, size_t len) {
    (void)arg, (void)subject;
    uint64_t id = 0;
    for (size_t i = 0; i < len && i < 10 && data[i] >= '0' && data[i] <= '9'; i++) id = id * 10 + (uint64_t)(data[i] - '0');
    if (id && id <= UINT32_MAX && W.running) heard((uint32_t)id);
}

/* Replicas heard from lately, this one included. */
static size_t members_alive(void) {
    uint64_t now = now_ms();
    size_t k = 0;
    for (size_t i = 0; i < W.n_members; i++)
        if (now - W.members[i].seen_ms < MEMBER_TTL_MS) W.members[k++] = W.members[i];
    W.n_members = k;
    size_t alive = 1;
    for (size_t i = 0; i < k; i++) alive += W.members[i].id != W.replica_id;
    return alive;
}

/* ---- leases ----------------------------------------------------------------------------------- */

/* The shard's resources: read the fleet's versions again before comparing, and poll at once. */
static void forget_versions(uint32_t s) {
    for (size_t i = 0; i < W.n; i++)
        if (W.items[i].shard == s) {
            W.items[i].known = false;
            W.items[i].next_ms = now_ms();
        }
}

static void shard_changed_hands(uint32_t s, bool held) {
    W.leases[s].held = held;
    W.leases[s].renewed_ms = now_ms();
    forget_versions(s);
    klog(MCPG_LOG_INFO, "watch", "shard %" PRIu32 " %s", s, held ? "taken: its resources are polled here" : "let go");
}

static void on_acquired(void *arg, int status, const mcpg_coord_value *v) {
    wop *o = arg;
    klog(MCPG_LOG_DEBUG, "watch", "shard %zu: lease %s (%d)", o->idx, status == 0 ? "taken" : "held by another", status);
    if (current(o)) {
        wlease *l = &W.leases[o->idx];
        l->busy = false;
        if (status == 0) {
            l->revision = v->revision;
            shard_changed_hands((uint32_t)o->idx, true);
        }
    }
    op_free(o);
}

static void on_renewed(void *arg, int status, const mcpg_coord_value *v) {
    wop *o = arg;
    if (current(o)) {
        wlease *l = &W.leases[o->idx];
        l->busy = false;
        if (status == 0) {
            l->revision = v->revision;
            l->renewed_ms = now_ms();
        } else if (status == MCPG_ECONFLICT || status == MCPG_ENOENT) {
            if (l->held) shard_changed_hands((uint32_t)o->idx, false); /* it expired: someone may have it */
        } /* the store is down: keep polling until the lease would have run out */
    }
    op_free(o);
}

static void lease_op(uint32_t s, bool renew) {
    wlease *l = &W.leases[s];
    wop *o = op_new(s, 0);
    if (!o) return;
    char key[48];
    lease_key(s, key, sizeof key);
    size_t vn = strlen(W.replica);
    l->busy = true; /* before the op: a store may answer at once */
    int rc = renew ? W.co->compare_and_set(ci(), W.w, key, strlen(key), l->revision, W.replica, vn, W.lease_ms,
                                           on_renewed, o)
                   : W.co->put_if_absent(ci(), W.w, key, strlen(key), W.replica, vn, W.lease_ms, on_acquired, o);
    if (rc < 0) {
        l->busy = false;
        op_free(o);
    }
}

static void release(uint32_t s) {
    char key[48];
    lease_key(s, key, sizeof key);
    shard_changed_hands(s, false);
    (void)W.co->del(ci(), W.w, key, strlen(key), noop_cb, NULL);
}

static void tend_leases(uint64_t now) {
    size_t alive = members_alive();
    uint32_t fair = (uint32_t)((W.nshards + alive - 1) / alive), held = 0;
    if (alive != W.alive_seen)
        klog(MCPG_LOG_INFO, "watch", "%zu replicas share the watches: %" PRIu32 " shards each at most", alive, fair);
    W.alive_seen = alive;
    for (uint32_t s = 0; s < W.nshards; s++) {
        wlease *l = &W.leases[s];
        if (!l->held) continue;
        held++;
        if (now - l->renewed_ms >= W.lease_ms) { /* not renewed in time: it may be another's now */
            shard_changed_hands(s, false);
            held--;
        } else if (!l->busy && now - l->renewed_ms >= W.lease_ms / 3) {
            lease_op(s, true);
        }
    }
    if (held > fair) { /* a replica joined: give one back a tick */
        for (uint32_t s = W.nshards; s-- > 0;)
            if (W.leases[s].held && !W.leases[s].busy) {
                release(s);
                break;
            }
        return;
    }
    /* the next tick goes on after the last shard tried: every free one is reached */
    for (uint32_t k = 0, tried = 0, from = W.acquire_from; k < W.nshards && held + tried < fair &&
                                                          tried < ACQUIRE_PER_TICK; k++) {
        uint32_t s = (from + k) % W.nshards;
        if (W.leases[s].held || W.leases[s].busy) continue;
        lease_op(s, false);
        tried++;
        W.acquire_from = (s + 1) % W.nshards;
    }
}

/* ---- versions ------------------------------------------------------------------------------------ */

static void poll_done(witem *it) {
    klog(MCPG_LOG_DEBUG, "watch", "%s polled: the fleet's version %016" PRIx64 "%s", it->uri, it->version,
         it->known ? "" : " (unknown)");
    it->busy = false;
    it->next_ms = now_ms() + it->interval_ms;
}

static void tell(witem *it) {
    W.told++;
    klog(MCPG_LOG_DEBUG, "watch", "%s changed (version %016" PRIx64 "): told to the fleet", it->uri, it->version);
    news_fleet_resource_updated(W.w, it->uri, strlen(it->uri));
}

static uint64_t parse_hex(const char *s, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n && i < 16; i++) {
        char ch = s[i];
        v = v * 16 + (uint64_t)(ch >= 'a' ? ch - 'a' + 10 : ch - '0');
    }
    return v;
}

/* What the fleet last recorded for it (the store's answer to any op that carries the value). */
static void learn(witem *it, const mcpg_coord_value *v) {
    it->version = parse_hex(v->data, v->len);
    it->revision = v->revision;
    it->known = true;
}

enum { V_GET, V_CREATE, V_CAS };
static void version_next(wop *o, int stage);

static void on_version(void *arg, int status, const mcpg_coord_value *v) {
    wop *o = arg;
    if (!current(o)) {
        op_free(o);
        return;
    }
    witem *it = &W.items[o->idx];
    int stage = o->tries >> 8, next = -1;
    o->tries = (o->tries & 0xff) + 1;
    switch (stage) {
    case V_GET: /* the fleet's version: the same content is no news */
        if (status == 0 && v->data) learn(it, v), next = it->version == o->hash ? -1 : V_CAS;
        else if (status == MCPG_ENOENT) next = V_CREATE;
        break;
    case V_CREATE: /* the first version the fleet records: nothing to tell */
        if (status == 0) it->version = o->hash, it->revision = v->revision, it->known = true;
        else if (status == MCPG_EEXIST) next = V_GET;
        break;
    case V_CAS:
        if (status == 0) {
            it->version = o->hash, it->revision = v->revision;
            tell(it); /* only the writer that won tells */
        } else if (status == MCPG_ECONFLICT && v->data) { /* another wrote first */
            learn(it, v);
            next = it->version == o->hash ? -1 : V_CAS;
        } else if (status == MCPG_ECONFLICT || status == MCPG_ENOENT) {
            next = V_GET;
        }
        break;
    }
    if (next >= 0 && (o->tries & 0xff) < VERSION_TRIES) {
        version_next(o, next);
        return;
    }
    poll_done(it);
    op_free(o);
}

static void version_next(wop *o, int stage) {
    witem *it = &W.items[o->idx];
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, o->hash);
    size_t kn = strlen(it->key);
    o->tries = (o->tries & 0xff) | (stage << 8);
    int rc = stage == V_GET      ? W.co->get(ci(), W.w, it->key, kn, on_version, o)
             : stage == V_CREATE ? W.co->put_if_absent(ci(), W.w, it->key, kn, hex, 16, 0, on_version, o)
                                 : W.co->compare_and_set(ci(), W.w, it->key, kn, it->revision, hex, 16, 0,
                                                         on_version, o);
    if (rc < 0) {
        poll_done(it);
        op_free(o);
    }
}

/* The content of item o->idx hashes to o->hash: record it, and tell if it moved. */
static void version_step(wop *o) {
    witem *it = &W.items[o->idx];
    if (it->known && it->version == o->hash) {
        poll_done(it);
        op_free(o);
        return;
    }
    version_next(o, it->known ? V_CAS : V_GET);
}

/* ---- polls --------------------------------------------------------------------------------------- */

static void on_read(void *ctx, mcpg_call *call) {
    wop *o = ctx;
    mcpg_call_outcome out = {.size = sizeof out};
    call_outcome(call, &out);
    bool ok = !out.is_error && out.result;
    uint64_t h = ok ? fnv64(out.result, out.result_len) : 0;
    if (!ok && current(o))
        klog(MCPG_LOG_WARN, "watch", "%s: the read failed (%s): polled again in %" PRIu64 " ms",
             W.items[o->idx].uri, out.error_message ? out.error_message : "?", W.items[o->idx].interval_ms);
    call_release(call);
    if (!current(o)) {
        op_free(o);
        return;
    }
    witem *it = &W.items[o->idx];
    if (!ok || !W.leases[it->shard].held) { /* failed, or the shard left meanwhile */
        poll_done(it);
        op_free(o);
        return;
    }
    o->hash = h;
    version_step(o);
}

static void poll_one(size_t i) {
    witem *it = &W.items[i];
    mcpg_buf p = {0};
    if (mcpg_buf_append(&p, "{\"uri\":", 7) || mcpg_buf_append_json_string(&p, it->uri, strlen(it->uri)) ||
        mcpg_buf_append(&p, "}", 1)) {
        mcpg_buf_free(&p);
        return;
    }
    wop *o = op_new(i, p.len + 1);
    if (!o) {
        mcpg_buf_free(&p);
        return;
    }
    memcpy(o->params, p.data, p.len);
    size_t plen = p.len;
    mcpg_buf_free(&p);
    mcpg_call_desc d = {
        .size = sizeof d, .wire = MCPG_WIRE_STATELESS,
        .method = "resources/read", .method_len = 14,
        .name = it->uri, .name_len = strlen(it->uri),
        .params_json = o->params, .params_len = plen,
        .id_json = "0", .id_len = 1,
        .transport_ctx = o, .complete = on_read,
    };
    mcpg_call *call;
    it->busy = true;
    W.polls++;
    if (call_submit_internal(W.w, &d, &call) != 0) {
        it->busy = false;
        it->next_ms = now_ms() + it->interval_ms;
        op_free(o);
    }
}

static void on_tick(uv_timer_t *t) {
    (void)t;
    uint64_t now = now_ms();
    if (now - W.hello_ms >= HELLO_MS) {
        W.hello_ms = now;
        (void)W.co->publish(ci(), W.w, HELLO_SUBJECT, W.replica, strlen(W.replica), noop_cb, NULL);
    }
    tend_leases(now);
    for (size_t i = 0; i < W.n; i++) {
        witem *it = &W.items[i];
        if (!it->busy && W.leases[it->shard].held && now >= it->next_ms) poll_one(i);
    }
}

/* ---- what is watched ----------------------------------------------------------------------------- */

static void items_free(void) {
    for (size_t i = 0; i < W.n; i++) free(W.items[i].uri);
    free(W.items);
    W.items = NULL;
    W.n = 0;
}

static int item_add(size_t *cap, const char *uri, int64_t interval_ms) {
    for (size_t i = 0; i < W.n; i++)
        if (!strcmp(W.items[i].uri, uri)) return 0; /* two bindings: the first one's interval */
    if (W.n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        witem *ni = realloc(W.items, nc * sizeof *ni);
        if (!ni) return MCPG_ENOMEM;
        W.items = ni, *cap = nc;
    }
    witem *it = &W.items[W.n];
    memset(it, 0, sizeof *it);
    if (!(it->uri = strdup(uri))) return MCPG_ENOMEM;
    uint64_t h = fnv64(uri, strlen(uri));
    it->shard = (uint32_t)(h % W.nshards);
    it->interval_ms = (uint64_t)interval_ms;
    snprintf(it->key, sizeof it->key, VERSION_KEY "%016" PRIx64, h);
    W.n++;
    return 0;
}

/* Every watched uri of g's bindings: the ones a binding names, else every
 * resource its backend lists now. */
static void items_build(generation *g) {
    size_t cap = 0;
    catset *cs = catalog_acquire(g);
    for (size_t b = 0; b < g->m->n_bindings; b++) {
        const decl_binding *db = &g->m->bindings[b];
        if (!db->watch) continue;
        for (size_t u = 0; u < db->n_watch_uris; u++)
            if (item_add(&cap, db->watch_uris[u], db->watch_interval_ms)) goto oom;
        if (db->n_watch_uris) continue;
        const catalog *cat = &cs->cat[CAT_RESOURCES];
        for (size_t r = 0; r < cat->n_routes; r++)
            if (!strcmp(cat->routes[r].backend->name, db->backend) &&
                item_add(&cap, cat->routes[r].client_name, db->watch_interval_ms))
                goto oom;
    }
    catalog_release(cs);
    return;
oom:
    catalog_release(cs);
    klog(MCPG_LOG_ERROR, "watch", "out of memory: %zu resources watched, the others not", W.n);
}

static void stop_here(void) {
    if (!W.running) return;
    W.running = false;
    W.epoch++;
    uv_timer_stop(&W.tick);
    klog(MCPG_LOG_INFO, "watch", "stopping: %" PRIu64 " polls, %" PRIu64 " changes told since the start", W.polls,
         W.told);
    if (W.sub) W.co->unsubscribe(ci(), W.sub);
    W.sub = NULL;
    for (uint32_t s = 0; s < W.nshards; s++)
        if (W.leases[s].held) release(s); /* the others take them at once, not after the TTL */
    items_free();
    free(W.leases);
    W.leases = NULL;
}

/* On loop 0 when it starts serving g, and at each reload's switch. */
void watch_adopt(mcpg_worker *w, generation *g) {
    bool any = false;
    for (size_t b = 0; b < g->m->n_bindings; b++) any |= g->m->bindings[b].watch;
    mcpg_instance *coord = g->coordinator;
    if (W.running && (coord != W.coord || (uint32_t)g->m->watch_shards != W.nshards)) stop_here();
    if (W.running) { /* the same leases: only the list of resources is new */
        W.epoch++;
        items_free();
        for (uint32_t s = 0; s < W.nshards; s++) W.leases[s].busy = false;
        W.lease_ms = (uint64_t)g->m->watch_lease_ms;
        items_build(g);
        for (uint32_t s = 0; s < W.nshards; s++) forget_versions(s);
        return;
    }
    if (!any) return;
    if (!coord) {
        klog(MCPG_LOG_ERROR, "watch", "bindings watch resources but the gateway has no coordinator: nothing is polled");
        return;
    }
    if (!W.replica_id) {
        if (getrandom(&W.replica_id, sizeof W.replica_id, 0) != (ssize_t)sizeof W.replica_id || !W.replica_id)
            W.replica_id = (uint32_t)mono_us() | 1u;
        snprintf(W.replica, sizeof W.replica, "%" PRIu32, W.replica_id);
        uv_timer_init(&w->loop, &W.tick);
        uv_unref((uv_handle_t *)&W.tick);
    }
    W.w = w;
    W.coord = coord;
    W.co = coord->desc->ops;
    W.nshards = (uint32_t)g->m->watch_shards;
    W.lease_ms = (uint64_t)g->m->watch_lease_ms;
    W.leases = calloc(W.nshards, sizeof *W.leases);
    if (!W.leases) return;
    W.running = true;
    W.epoch++;
    W.n_members = 0;
    items_build(g);
    if (W.co->subscribe(ci(), w, HELLO_SUBJECT, on_hello, NULL, &W.sub) != 0)
        klog(MCPG_LOG_WARN, "watch", "cannot hear the other replicas (%s): shards are not shared out", HELLO_SUBJECT);
    klog(MCPG_LOG_INFO, "watch", "%zu resources watched in %" PRIu32 " shards (lease %" PRIu64 " ms), replica %s",
         W.n, W.nshards, W.lease_ms, W.replica);
    uv_timer_start(&W.tick, on_tick, 0, TICK_MS);
}

/* On loop 0 as it stops (drain): leases go back so the others take over. */
void watch_stop(mcpg_worker *w) {
    (void)w;
    stop_here();
}
