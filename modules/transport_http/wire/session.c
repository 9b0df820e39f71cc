/* transport_http: legacy-wire sessions on the coordinator (see session.h). */
#include "wire/wire.h"
#include "wire/relay.h"
#include "wire/replay.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>

#define KEY_PRE "mcpg.session."
#define COUNT_KEY "mcpg.session.count"
/* one count per owner: this prefix and the first 16 bytes of the owner's
 * SHA-256 in hex (the owner's text is not put in keys) */
#define OWNER_COUNT_PRE "mcpg.session.count.o."
#define OWNER_KEY_MAX (sizeof OWNER_COUNT_PRE + 32)
#define SUBJECTS "mcpg.session.*"
#define SUBJ_END "mcpg.session.end"
#define SUBJ_CHANGED "mcpg.session.changed"
#define SUBJ_CANCEL "mcpg.session.cancel"
#define CHANGE_TRIES 8 /* conflicting writers at once before a change gives up (MCPG_ECONFLICT) */

static const mcpg_coordinator_ops *co(th_worker_state *ws, void **inst) {
    *inst = ws->mod->co;
    return ws->mod->co_ops;
}

static uint64_t now_ms(th_worker_state *ws) { return uv_now(ws->loop); }
static uint64_t ttl(th_worker_state *ws) { return (uint64_t)ws->mod->cfg->session_ttl_ms; }

static void key_of(const char *sid, char out[sizeof KEY_PRE + TH_SID_LEN]) {
    memcpy(out, KEY_PRE, sizeof KEY_PRE - 1);
    memcpy(out + sizeof KEY_PRE - 1, sid, TH_SID_LEN + 1);
}

static void noop_cb(void *arg, int status, const mcpg_coord_value *v) { (void)arg, (void)status, (void)v; }

/* ---- the loop's cache: a chained hash table by id -------------------------------- */

static uint32_t hash_sid(const char *sid) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < TH_SID_LEN; i++) h = (h ^ (uint8_t)sid[i]) * 16777619u;
    return h;
}

th_cached_session *th_sess_peek(th_worker_state *ws, const char *sid, size_t n) {
    th_scache *t = &ws->scache;
    if (n != TH_SID_LEN || !t->nb) return NULL;
    for (th_cached_session *e = t->b[hash_sid(sid) & (t->nb - 1)]; e; e = e->hnext)
        if (!memcmp(e->sid, sid, TH_SID_LEN)) return e;
    return NULL;
}

static int cache_grow(th_worker_state *ws) {
    th_scache *t = &ws->scache;
    uint32_t nb = t->nb ? t->nb * 2 : 64;
    th_cached_session **b = ws->mod->host->calloc(nb, sizeof *b);
    if (!b) return MCPG_ENOMEM;
    for (uint32_t i = 0; i < t->nb; i++)
        for (th_cached_session *e = t->b[i], *next; e; e = next) {
            next = e->hnext;
            uint32_t k = hash_sid(e->sid) & (nb - 1);
            e->hnext = b[k];
            b[k] = e;
        }
    ws->mod->host->free(t->b);
    t->b = b;
    t->nb = nb;
    return 0;
}

static th_cached_session *cache_add(th_worker_state *ws, const char *sid) {
    th_scache *t = &ws->scache;
    if (t->n >= t->nb && cache_grow(ws)) return NULL;
    th_cached_session *e = ws->mod->host->calloc(1, sizeof *e);
    if (!e) return NULL;
    memcpy(e->sid, sid, TH_SID_LEN);
    e->level = -1;
    uint32_t k = hash_sid(sid) & (t->nb - 1);
    e->hnext = t->b[k];
    t->b[k] = e;
    t->n++;
    return e;
}

static void cache_unlink(th_worker_state *ws, th_cached_session *e) {
    th_scache *t = &ws->scache;
    th_cached_session **pp = &t->b[hash_sid(e->sid) & (t->nb - 1)];
    while (*pp && *pp != e) pp = &(*pp)->hnext;
    if (*pp) *pp = e->hnext, t->n--;
}

static void cache_remove(th_worker_state *ws, th_cached_session *e) {
    cache_unlink(ws, e);
    ws->mod->host->buf_free(&e->row);
    ws->mod->host->free(e);
}

/* At destroy: memory only (no host call is allowed any more). An op the
 * store took but never answered (a coordinator stopped with it queued) goes
 * too; its request went with its connection. */
static void session_op_free(struct th_session_op *o);

void th_sess_cache_free(th_worker_state *ws) {
    while (ws->session_ops) session_op_free(ws->session_ops);
    th_scache *t = &ws->scache;
    for (uint32_t i = 0; i < t->nb; i++)
        while (t->b[i]) cache_remove(ws, t->b[i]);
    ws->mod->host->free(t->b);
    memset(t, 0, sizeof *t);
}

/* ---- rows ---------------------------------------------------------------------------- */

/* The row's "sv" into out: none (a row of /mcp, or one written before
 * virtual servers) is "". A name longer than the manifest allows, or with
 * a NUL, is a row this transport did not write. */
static int row_server(const mcpg_host *h, const char *row, size_t n,
                      char out[TH_SERVER_NAME_MAX + 1]) {
    mcpg_json_span sv;
    size_t len = 0;
    out[0] = '\0';
    if (h->json_object_get(row, n, "sv", &sv) != 1) return 0;
    if (sv.type != MCPG_JSON_STRING ||
        h->json_string_decode(&sv, out, TH_SERVER_NAME_MAX + 1, &len) < 0 || strlen(out) != len)
        return MCPG_EPROTO;
    return 0;
}

/* Read a row's fields into e (a copy of the text is kept). */
static int row_load(th_worker_state *ws, th_cached_session *e, const char *row, size_t n, uint64_t revision) {
    const mcpg_host *h = ws->mod->host;
    mcpg_json_span v, l, g, s, c, o;
    int64_t lv = -1;
    char server[TH_SERVER_NAME_MAX + 1];
    if (h->json_object_get(row, n, "v", &v) != 1 || v.type != MCPG_JSON_STRING || v.n >= sizeof e->version)
        return MCPG_EPROTO;
    if (row_server(h, row, n, server)) return MCPG_EPROTO;
    e->row.len = 0;
    if (h->buf_append(&e->row, row, n) || h->buf_append(&e->row, "", 1)) return MCPG_ENOMEM;
    e->row.len = n;
    memcpy(e->version, v.p, v.n);
    e->version[v.n] = '\0';
    if (h->json_object_get(row, n, "l", &l) == 1) (void)h->json_int64(&l, &lv);
    e->level = (int8_t)(lv >= 0 && lv < 8 ? lv : -1);
    e->get_open = h->json_object_get(row, n, "g", &g) == 1 && g.n == 1 && g.p[0] == '1';
    e->subs_off = e->subs_len = e->caps_off = e->caps_len = 0;
    if (h->json_object_get(row, n, "s", &s) == 1 && s.type == MCPG_JSON_ARRAY)
        e->subs_off = (uint32_t)(s.p - row), e->subs_len = (uint32_t)s.n;
    if (h->json_object_get(row, n, "c", &c) == 1 && c.type == MCPG_JSON_OBJECT)
        e->caps_off = (uint32_t)(c.p - row), e->caps_len = (uint32_t)c.n;
    e->owner_off = e->owner_len = 0;
    if (h->json_object_get(row, n, "o", &o) == 1 && o.type == MCPG_JSON_STRING)
        e->owner_off = (uint32_t)(o.p - 1 - row), e->owner_len = (uint32_t)o.n + 2;
    memcpy(e->server, server, sizeof e->server);
    e->revision = revision;
    return 0;
}

/* owner: its JSON string token (quotes included), kept as written; server:
 * the virtual server's name ("" for /mcp: no "sv", as rows always had). */
static int row_build(const mcpg_host *h, mcpg_buf *b, const char *version, int level, int get_open,
                     const char *subs, size_t subs_n, const char *caps, size_t caps_n,
                     const char *owner, size_t owner_n, const char *server) {
    b->len = 0;
    int rc = h->buf_printf(b, "{\"v\":\"%s\",\"l\":%d,\"g\":%d,\"s\":", version, level, get_open ? 1 : 0);
    rc |= subs_n ? h->buf_append(b, subs, subs_n) : h->buf_append(b, "[]", 2);
    rc |= h->buf_append(b, ",\"c\":", 5);
    rc |= caps_n ? h->buf_append(b, caps, caps_n) : h->buf_append(b, "{}", 2);
    if (owner_n) {
        rc |= h->buf_append(b, ",\"o\":", 5);
        rc |= h->buf_append(b, owner, owner_n);
    }
    if (server[0]) {
        rc |= h->buf_append(b, ",\"sv\":", 6);
        rc |= h->buf_append_json_string(b, server, strlen(server));
    }
    rc |= h->buf_append(b, "}", 1);
    return rc ? MCPG_ENOMEM : 0;
}

int th_sess_owner(th_worker_state *ws, const th_cached_session *e, mcpg_buf *out) {
    const mcpg_host *h = ws->mod->host;
    if (!e->owner_len) return MCPG_ENOENT;
    mcpg_json_span o = {.p = e->row.data + e->owner_off + 1, .n = e->owner_len - 2,
                        .type = MCPG_JSON_STRING};
    o.escaped = memchr(o.p, '\\', o.n) != NULL;
    size_t at = out->len, n = 0;
    if (h->buf_reserve(out, o.n + 1)) return MCPG_ENOMEM;
    if (h->json_string_decode(&o, out->data + at, o.n + 1, &n)) return MCPG_EPROTO;
    out->len = at + n;
    return 0;
}

static int sub_eq(const mcpg_host *h, const mcpg_json_span *s, const char *uri, size_t un) {
    return s->type == MCPG_JSON_STRING && h->json_string_eq(s, uri, un) == 1;
}

int th_sess_subscribed(th_worker_state *ws, const th_cached_session *e, const char *uri, size_t un) {
    const mcpg_host *h = ws->mod->host;
    size_t iter = 0;
    mcpg_json_span s;
    while (e->subs_len && h->json_array_next(e->row.data + e->subs_off, e->subs_len, &iter, &s) == 1)
        if (sub_eq(h, &s, uri, un)) return 1;
    return 0;
}

/* ---- a change, applied to a row's text: into out; 1 written, 0 nothing to
 * write (already so), < 0 refused --------------------------------------------------- */

typedef struct change {
    th_sess_change_kind k;
    int level;
    char uri[1024];
    size_t un;
} change;

static int apply(th_worker_state *ws, const th_cached_session *cur, const change *ch, mcpg_buf *out) {
    const mcpg_host *h = ws->mod->host;
    const char *subs = cur->row.data + cur->subs_off;
    int level = cur->level, get_open = cur->get_open;
    mcpg_buf *sb = &ws->scratch2;
    sb->len = 0;
    switch (ch->k) {
    case TH_SC_LEVEL:
        if (level == ch->level) return 0;
        level = ch->level;
        break;
    case TH_SC_GET_OPEN:
        if (get_open) return MCPG_EEXIST;
        get_open = 1;
        break;
    case TH_SC_GET_CLOSED:
        if (!get_open) return 0;
        get_open = 0;
        break;
    default: { /* the subscription list, rebuilt without (or with) the uri */
        size_t iter = 0;
        mcpg_json_span s;
        int found = 0, n = 0, rc = h->buf_append(sb, "[", 1);
        while (cur->subs_len && h->json_array_next(subs, cur->subs_len, &iter, &s) == 1) {
            if (sub_eq(h, &s, ch->uri, ch->un)) {
                found = 1;
                if (ch->k == TH_SC_UNSUBSCRIBE) continue;
            }
            if (n++) rc |= h->buf_append(sb, ",", 1);
            rc |= h->buf_append(sb, s.p - 1, s.n + 2);
        }
        if (ch->k == TH_SC_SUBSCRIBE ? found : !found) return 0;
        if (ch->k == TH_SC_SUBSCRIBE) {
            if (n >= TH_SESS_MAX_SUBS) return MCPG_EAGAIN;
            if (n) rc |= h->buf_append(sb, ",", 1);
            rc |= h->buf_append_json_string(sb, ch->uri, ch->un);
        }
        rc |= h->buf_append(sb, "]", 1);
        if (rc) return MCPG_ENOMEM;
        if (row_build(h, out, cur->version, level, get_open, sb->data, sb->len,
                      cur->row.data + cur->caps_off, cur->caps_len,
                      cur->row.data + cur->owner_off, cur->owner_len, cur->server))
            return MCPG_ENOMEM;
        return 1;
    }
    }
    if (row_build(h, out, cur->version, level, get_open, subs, cur->subs_len,
                  cur->row.data + cur->caps_off, cur->caps_len,
                  cur->row.data + cur->owner_off, cur->owner_len, cur->server))
        return MCPG_ENOMEM;
    return 1;
}

/* ---- operations in flight -------------------------------------------------------------- */

enum { OP_COUNT, OP_COUNT_OWNER, OP_CREATE, OP_LOAD, OP_RENEW, OP_CHECK, OP_READ, OP_CAS,
       OP_DELETE, OP_ENDED };

typedef struct th_session_op session_op;
struct th_session_op {
    session_op *next, *prev; /* ws->session_ops: freed at destroy if the store never answers */
    th_worker_state *ws;
    th_req *r;           /* the parked request, or NULL */
    int kind;
    int tries;
    char sid[TH_SID_LEN + 1];
    change ch;
    mcpg_buf row;        /* create: the row written; cas: the row proposed */
    char okey[OWNER_KEY_MAX]; /* create: the owner's count */
};

static session_op *session_op_new(th_worker_state *ws, th_req *r, int kind, const char *sid) {
    session_op *o = ws->mod->host->calloc(1, sizeof *o);
    if (!o) return NULL;
    o->ws = ws;
    o->r = r;
    o->kind = kind;
    if (sid) memcpy(o->sid, sid, TH_SID_LEN);
    o->next = ws->session_ops;
    if (ws->session_ops) ws->session_ops->prev = o;
    ws->session_ops = o;
    return o;
}

static void session_op_free(struct th_session_op *o) {
    th_worker_state *ws = o->ws;
    if (o->prev) o->prev->next = o->next;
    else ws->session_ops = o->next;
    if (o->next) o->next->prev = o->prev;
    ws->mod->host->buf_free(&o->row);
    ws->mod->host->free(o);
}

/* The op is over: resume its request with status. */
static void session_op_done(session_op *o, int status) {
    th_req *r = o->r;
    session_op_free(o);
    if (r) {
        r->session_op_status = status;
        th_legacy_again(r);
    }
}

static void on_op(void *arg, int status, const mcpg_coord_value *v);

/* Start an op whose answer comes to on_op; on a refusal the op is over at once. */
static int issue(session_op *o, const char *sid_key_or_null, int64_t delta, uint64_t revision) {
    th_worker_state *ws = o->ws;
    void *ci;
    const mcpg_coordinator_ops *ops = co(ws, &ci);
    char key[sizeof KEY_PRE + TH_SID_LEN];
    key_of(o->sid, key);
    size_t kn = sizeof key - 1;
    (void)sid_key_or_null;
    switch (o->kind) {
    case OP_COUNT:
        return ops->incr(ci, ws->w, COUNT_KEY, sizeof COUNT_KEY - 1, delta, 0, on_op, o);
    case OP_COUNT_OWNER:
        return ops->incr(ci, ws->w, o->okey, strlen(o->okey), 1, 0, on_op, o);
    case OP_CREATE:
        return ops->put_if_absent(ci, ws->w, key, kn, o->row.data, o->row.len, ttl(ws), on_op, o);
    case OP_LOAD: case OP_CHECK: case OP_READ:
        return ops->get(ci, ws->w, key, kn, on_op, o);
    case OP_RENEW: case OP_CAS:
        return ops->compare_and_set(ci, ws->w, key, kn, revision, o->row.data, o->row.len, ttl(ws), on_op, o);
    case OP_DELETE:
        return ops->del(ci, ws->w, key, kn, on_op, o);
    default:
        return MCPG_EINVAL;
    }
}

/* Start o; when the coordinator refuses, nothing is parked: the caller answers. */
static int start(session_op *o, int64_t delta, uint64_t revision) {
    int rc = issue(o, NULL, delta, revision);
    if (rc < 0) {
        o->r = NULL;
        session_op_free(o);
        return rc;
    }
    if (o->r) th_legacy_park(o->r);
    return 0;
}

/* The owner's count key (OWNER_COUNT_PRE and a digest of the owner). */
static void owner_key(const char *owner, size_t n, char out[OWNER_KEY_MAX]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdn = 0;
    memcpy(out, OWNER_COUNT_PRE, sizeof OWNER_COUNT_PRE - 1);
    if (!EVP_Digest(owner, n, md, &mdn, EVP_sha256(), NULL)) memset(md, 0, 16);
    mcpg_hex(md, 16, out + sizeof OWNER_COUNT_PRE - 1);
    out[sizeof OWNER_COUNT_PRE - 1 + 32] = '\0';
}

/* A session counted at its creation has ended (or was not made): both
 * counts go down. okey NULL: only the whole count (the owner's was not
 * taken). */
static void uncount(th_worker_state *ws, const char *okey) {
    void *ci;
    const mcpg_coordinator_ops *ops = co(ws, &ci);
    (void)ops->incr(ci, ws->w, COUNT_KEY, sizeof COUNT_KEY - 1, -1, 0, noop_cb, NULL);
    if (okey) (void)ops->incr(ci, ws->w, okey, strlen(okey), -1, 0, noop_cb, NULL);
}

/* The count key of an entry's owner (its row's "o"; none: anonymous). */
static void entry_owner_key(th_worker_state *ws, const th_cached_session *e, char out[OWNER_KEY_MAX]) {
    mcpg_buf o = {0};
    if (th_sess_owner(ws, e, &o) != 0) o.len = 0;
    owner_key(o.len ? o.data : "", o.len, out);
    ws->mod->host->buf_free(&o);
}

static void publish(th_worker_state *ws, const char *subject, const char *data, size_t n) {
    void *ci;
    const mcpg_coordinator_ops *ops = co(ws, &ci);
    (void)ops->publish(ci, ws->w, subject, data, n, noop_cb, NULL);
}

/* The session is gone (ended elsewhere, deleted, expired): this loop drops
 * it, ends its streams, and, if it created it, counts its end. */
static void gone(th_worker_state *ws, const char *sid) {
    char id[TH_SID_LEN + 1];
    memcpy(id, sid, TH_SID_LEN); /* sid may be a message's borrowed bytes, or the entry's */
    id[TH_SID_LEN] = '\0';
    th_cached_session *e = th_sess_peek(ws, id, TH_SID_LEN);
    if (e) cache_unlink(ws, e); /* first: its streams' ends must not write the row back */
    th_legacy_end_streams(ws, id);
    th_relay_session_end(ws, id);
    if (!e) return;
    th_replay_session_end(ws, e);
    if (e->owned) {
        char okey[OWNER_KEY_MAX];
        entry_owner_key(ws, e, okey);
        uncount(ws, okey);
        th_metric_add(ws, ws->mod->m_sessions, -1);
    }
    ws->mod->host->buf_free(&e->row);
    ws->mod->host->free(e);
}

/* A DELETE's end, told to this process's other loops at once. The client's
 * next request may come on a new connection another loop takes, and the
 * end's pub/sub message reaches that loop through the store, at about the
 * time the DELETE is answered: a CI run saw that request answered from the
 * other loop's cached row. A post gets there well before the publish's
 * round trip ends; the message still comes (gone() is idempotent). */
typedef struct end_post {
    mcpg_post node;
    th_worker_state *ws;
    char sid[TH_SID_LEN];
} end_post;

static void end_on_loop(void *arg) {
    end_post *p = arg;
    gone(p->ws, p->sid);
    p->ws->mod->host->free(p);
}

static void end_on_other_loops(th_worker_state *ws, const char *sid) {
    const th_mod *m = ws->mod;
    const mcpg_host *h = m->host;
    for (uint32_t i = 0; i < m->nworkers; i++) {
        th_worker_state *other = m->slots[i];
        if (!other || other == ws || !other->w) continue;
        end_post *p = h->alloc(sizeof *p);
        if (!p) continue; /* the message still comes */
        *p = (end_post){.node = {.fn = end_on_loop}, .ws = other};
        p->node.arg = p;
        memcpy(p->sid, sid, TH_SID_LEN);
        if (h->worker_post(other->w, &p->node) != 0) h->free(p); /* that loop has stopped */
    }
}

/* A row read or written: into the cache (added when new). */
static th_cached_session *remember(th_worker_state *ws, const char *sid, const mcpg_coord_value *v, int written) {
    th_cached_session *e = th_sess_peek(ws, sid, TH_SID_LEN);
    if (!e && (!v->data || !(e = cache_add(ws, sid)))) return NULL;
    if (!v->data) {
        e->revision = v->revision; /* a renewal: the same row, a new revision */
    } else if (row_load(ws, e, v->data, v->len, v->revision)) {
        if (!e->row.len) cache_remove(ws, e);
        return NULL;
    }
    uint64_t now = now_ms(ws);
    e->valid_ms = now + (written ? ttl(ws) : ttl(ws) / 8);
    if (written) e->renewed_ms = now;
    return e;
}

static void change_next(session_op *o, th_cached_session *cur);

static void on_op(void *arg, int status, const mcpg_coord_value *v) {
    session_op *o = arg;
    th_worker_state *ws = o->ws;
    switch (o->kind) {
    case OP_COUNT:
        if (status) {
            session_op_done(o, status);
        } else if (v->number > ws->mod->cfg->max_sessions) {
            uncount(ws, NULL);
            session_op_done(o, MCPG_EAGAIN);
        } else {
            o->kind = OP_COUNT_OWNER;
            if (issue(o, NULL, 0, 0) < 0) {
                uncount(ws, NULL);
                session_op_done(o, MCPG_ENOMEM);
            }
        }
        return;
    case OP_COUNT_OWNER:
        if (status) {
            uncount(ws, NULL);
            session_op_done(o, status);
        } else if (v->number > ws->mod->cfg->max_sessions_per_principal) {
            uncount(ws, o->okey);
            session_op_done(o, MCPG_ERANGE); /* this caller's own cap */
        } else {
            o->kind = OP_CREATE;
            if (issue(o, NULL, 0, 0) < 0) {
                uncount(ws, o->okey);
                session_op_done(o, MCPG_ENOMEM);
            }
        }
        return;
    case OP_CREATE: {
        th_cached_session *e = NULL;
        if (!status) {
            mcpg_coord_value w = *v;
            w.data = o->row.data, w.len = o->row.len;
            e = remember(ws, o->sid, &w, 1);
            if (e) {
                e->owned = 1, e->used_ms = now_ms(ws);
                th_metric_add(ws, ws->mod->m_sessions, 1);
            }
        }
        if (!e) uncount(ws, o->okey); /* not created, or not kept here: nobody would uncount it */
        if (o->r && e) memcpy(o->r->sid, o->sid, sizeof o->sid);
        session_op_done(o, e ? 0 : status == MCPG_EAGAIN ? MCPG_EAGAIN : status ? status : MCPG_ENOMEM);
        return;
    }
    case OP_LOAD:
    case OP_CHECK:
    case OP_RENEW: {
        th_cached_session *e = th_sess_peek(ws, o->sid, TH_SID_LEN);
        if (e && o->kind == OP_RENEW) e->renewing = 0;
        if (e && o->kind == OP_CHECK) e->checking = 0;
        if (status == MCPG_ENOENT || (status == MCPG_ECONFLICT && !v->data)) {
            gone(ws, o->sid);
            session_op_done(o, MCPG_ENOENT);
            return;
        }
        if (!status || status == MCPG_ECONFLICT) /* a conflict: someone wrote (and renewed) it */
            e = remember(ws, o->sid, v, o->kind == OP_RENEW && !status);
        session_op_done(o, e ? 0 : status ? status : MCPG_ENOMEM);
        return;
    }
    case OP_READ:
        if (status) {
            if (status == MCPG_ENOENT) gone(ws, o->sid);
            session_op_done(o, status);
            return;
        }
        change_next(o, remember(ws, o->sid, v, 0));
        return;
    case OP_CAS:
        if (status == MCPG_ECONFLICT && v->data && ++o->tries < CHANGE_TRIES) {
            change_next(o, remember(ws, o->sid, v, 0)); /* re-read: apply again */
            return;
        }
        if (status == MCPG_ECONFLICT && !v->data) {
            gone(ws, o->sid);
            session_op_done(o, MCPG_ENOENT);
            return;
        }
        if (!status) {
            mcpg_coord_value w = *v;
            w.data = o->row.data, w.len = o->row.len;
            (void)remember(ws, o->sid, &w, 1);
            publish(ws, SUBJ_CHANGED, o->sid, TH_SID_LEN);
        }
        session_op_done(o, status ? status : 1);
        return;
    case OP_DELETE: {
        /* the DELETE is answered once the store has taken the end for every
         * replica: a client's next request elsewhere then finds it ended
         * (the other replicas' cached rows are dropped by that message) */
        void *ci;
        const mcpg_coordinator_ops *ops = co(ws, &ci);
        if (!status || status == MCPG_ENOENT) gone(ws, o->sid);
        if (!status) {
            end_on_other_loops(ws, o->sid);
            o->kind = OP_ENDED;
            if (ops->publish(ci, ws->w, SUBJ_END, o->sid, TH_SID_LEN, on_op, o) >= 0) return;
        }
        session_op_done(o, status);
        return;
    }
    case OP_ENDED:
        session_op_done(o, 0); /* deleted; the end's delivery is the store's (its status is not the DELETE's) */
        return;
    }
}

/* Apply o's change to cur and write it, or finish when nothing is to write. */
static void change_next(session_op *o, th_cached_session *cur) {
    if (!cur) {
        session_op_done(o, MCPG_ENOMEM);
        return;
    }
    int rc = apply(o->ws, cur, &o->ch, &o->row);
    if (rc <= 0) {
        session_op_done(o, rc);
        return;
    }
    o->kind = OP_CAS;
    if (issue(o, NULL, 0, cur->revision) < 0) session_op_done(o, MCPG_ENOMEM);
}

/* ---- the steps ----------------------------------------------------------------------------- */

static int have_co(th_worker_state *ws) { return ws->mod->co_ops && ws->w && !ws->stopped; }

static void renew(th_worker_state *ws, th_cached_session *e, th_req *r) {
    session_op *o = session_op_new(ws, r, OP_RENEW, e->sid);
    if (!o) return;
    if (ws->mod->host->buf_append(&o->row, e->row.data, e->row.len)) {
        session_op_free(o);
        return;
    }
    e->renewing = 1;
    if (start(o, 0, e->revision)) e->renewing = 0;
}

th_cached_session *th_sess_cached(th_worker_state *ws, const char *sid, size_t n) {
    th_cached_session *e = th_sess_peek(ws, sid, n);
    if (!e) return NULL;
    uint64_t now = now_ms(ws);
    if (now >= e->valid_ms) return NULL;
    e->used_ms = now;
    /* every request keeps the session alive; one renewal per TTL/8 per loop */
    if (now - e->renewed_ms >= ttl(ws) / 8 && !e->renewing) renew(ws, e, NULL);
    return e;
}

int th_sess_load(th_worker_state *ws, th_req *r, const char *sid, size_t n) {
    if (!have_co(ws)) return MCPG_EUNAVAIL;
    if (n != TH_SID_LEN) return MCPG_ENOENT;
    for (size_t i = 0; i < n; i++)
        if (!((sid[i] >= '0' && sid[i] <= '9') || (sid[i] >= 'a' && sid[i] <= 'f'))) return MCPG_ENOENT;
    th_cached_session *e = th_sess_peek(ws, sid, n);
    if (e && e->row.len) { /* known but stale: renewing it also proves it is there */
        session_op *o = session_op_new(ws, r, OP_RENEW, sid);
        if (!o || ws->mod->host->buf_append(&o->row, e->row.data, e->row.len)) {
            if (o) session_op_free(o);
            return MCPG_ENOMEM;
        }
        return start(o, 0, e->revision);
    }
    session_op *o = session_op_new(ws, r, OP_LOAD, sid);
    return o ? start(o, 0, 0) : MCPG_ENOMEM;
}

static int new_id(char out[TH_SID_LEN + 1]) {
    unsigned char b[TH_SID_LEN / 2];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t k = getrandom(b + got, sizeof b - got, 0);
        if (k <= 0) return MCPG_EIO;
        got += (size_t)k;
    }
    mcpg_hex(b, sizeof b, out);
    out[TH_SID_LEN] = '\0';
    return 0;
}

int th_sess_create(th_worker_state *ws, th_req *r, const char *caps, size_t caps_len, const char *owner,
                   size_t owner_len) {
    if (!have_co(ws)) return MCPG_EUNAVAIL;
    if (caps_len > TH_SESS_CAPS_MAX) caps = NULL, caps_len = 0; /* kept bounded: "{}" then */
    session_op *o = session_op_new(ws, r, OP_COUNT, NULL);
    if (!o) return MCPG_ENOMEM;
    int rc = new_id(o->sid);
    owner_key(owner ? owner : "", owner ? owner_len : 0, o->okey);
    mcpg_buf tok = {0}; /* the owner as a JSON string */
    const mcpg_host *h = ws->mod->host;
    if (!rc && h->buf_append_json_string(&tok, owner ? owner : "", owner ? owner_len : 0)) rc = MCPG_ENOMEM;
    if (!rc)
        rc = row_build(h, &o->row, r->version, -1, 0, NULL, 0, caps, caps_len, tok.data, tok.len,
                       r->server);
    h->buf_free(&tok);
    if (rc) {
        session_op_free(o);
        return rc;
    }
    return start(o, 1, 0);
}

int th_sess_change(th_worker_state *ws, th_req *r, const char *sid, th_sess_change_kind k, int level,
                   const char *uri, size_t un) {
    if (!have_co(ws)) return MCPG_EUNAVAIL;
    if (un >= sizeof ((change *)0)->uri) return MCPG_ERANGE;
    session_op *o = session_op_new(ws, r, OP_READ, sid);
    if (!o) return MCPG_ENOMEM;
    o->ch.k = k;
    o->ch.level = level;
    if (un) memcpy(o->ch.uri, uri, un);
    o->ch.un = un;
    th_cached_session *e = th_sess_peek(ws, sid, TH_SID_LEN);
    int rc;
    if (!e || !e->row.len) { /* read it first */
        rc = start(o, 0, 0);
        return rc ? rc : 1;
    }
    rc = apply(ws, e, &o->ch, &o->row);
    if (rc <= 0) {
        session_op_free(o);
        return rc; /* 0: already so, nothing to write; < 0: refused. The caller answers. */
    }
    o->kind = OP_CAS;
    rc = start(o, 0, e->revision);
    return rc ? rc : 1;
}

int th_sess_delete(th_worker_state *ws, th_req *r, const char *sid) {
    if (!have_co(ws)) return MCPG_EUNAVAIL;
    session_op *o = session_op_new(ws, r, OP_DELETE, sid);
    return o ? start(o, 0, 0) : MCPG_ENOMEM;
}

void th_sess_cancel(th_worker_state *ws, const char *sid, const char *id, size_t idn) {
    if (!have_co(ws)) {
        th_legacy_cancel_local(ws, sid, id, idn);
        return;
    }
    char msg[TH_SID_LEN + 1 + 256];
    if (idn > 256) return; /* no id that long was ever accepted for a call */
    memcpy(msg, sid, TH_SID_LEN);
    msg[TH_SID_LEN] = ' ';
    memcpy(msg + TH_SID_LEN + 1, id, idn);
    publish(ws, SUBJ_CANCEL, msg, TH_SID_LEN + 1 + idn);
}

/* ---- the subjects ---------------------------------------------------------------------- */

static void on_message(void *arg, const char *subject, const char *data, size_t len) {
    th_worker_state *ws = arg;
    if (len < TH_SID_LEN) return;
    if (!strcmp(subject, SUBJ_END)) {
        gone(ws, data);
    } else if (!strcmp(subject, SUBJ_CHANGED)) {
        th_cached_session *e = th_sess_peek(ws, data, TH_SID_LEN);
        if (!e) return;
        e->valid_ms = 0; /* re-read before it is trusted again */
        if (e->nget && !e->renewing) renew(ws, e, NULL); /* its GET stream filters by it */
    } else if (!strcmp(subject, SUBJ_CANCEL) && len > TH_SID_LEN + 1) {
        char sid[TH_SID_LEN + 1];
        memcpy(sid, data, TH_SID_LEN);
        sid[TH_SID_LEN] = '\0';
        th_legacy_cancel_local(ws, sid, data + TH_SID_LEN + 1, len - TH_SID_LEN - 1);
    }
}

int th_sess_worker_start(th_worker_state *ws) {
    void *ci;
    const mcpg_coordinator_ops *ops = co(ws, &ci);
    if (!ops) return MCPG_EUNAVAIL;
    return ops->subscribe(ci, ws->w, SUBJECTS, on_message, ws, &ws->sub);
}

void th_sess_worker_stop(th_worker_state *ws) {
    void *ci;
    const mcpg_coordinator_ops *ops = co(ws, &ci);
    if (ops && ws->sub) ops->unsubscribe(ci, ws->sub);
    ws->sub = NULL;
}

/* ---- the sweep ------------------------------------------------------------------------- */

static void check(th_worker_state *ws, th_cached_session *e) {
    session_op *o = session_op_new(ws, NULL, OP_CHECK, e->sid);
    if (!o) return;
    e->checking = 1;
    if (start(o, 0, 0)) e->checking = 0;
}

void th_sess_sweep(th_worker_state *ws, uint64_t now) {
    th_scache *t = &ws->scache;
    if (!have_co(ws)) return;
    for (uint32_t i = 0; i < t->nb; i++)
        for (th_cached_session *e = t->b[i], *next; e; e = next) {
            next = e->hnext;
            int held = e->nget || th_replay_session_live(e);
            if (held && now - e->renewed_ms >= ttl(ws) / 8 && !e->renewing) {
                renew(ws, e, NULL); /* a stream here keeps its session alive */
                continue;
            }
            if (held || now < e->valid_ms || now - e->used_ms < ttl(ws) || e->checking) continue;
            if (!e->owned && !e->streams) cache_remove(ws, e); /* idle here: forget it */
            else check(ws, e); /* does it still exist? (the owner counts its end) */
        }
}
