/* events: webhook delivery. events/subscribe and events/unsubscribe (any
 * replica, any loop) and the deliveries (the replica holding the owner's
 * lease, on loop 0).
 *
 * A subscription lives in the coordinator, mcpg.ev.sub.<id>, its TTL the
 * grant, its value {"url","secret","type","principal","cursor","expiresMs"};
 * each change is announced on mcpg.ev.subs ("+<id>\n<value>" or "-<id>").
 * The delivering replica learns the set with one scan at takeover (and
 * again every RESCAN_MS, which also catches a lost announcement), then from
 * the subject. Each subscription's cursor is the last log row it has been
 * checked against: the next row of its type after it is POSTed, one at a
 * time, so nothing but the cursor is queued. A 2xx moves the cursor; any
 * other answer (or none within DELIVERY_TIMEOUT_MS) is retried with backoff
 * until the subscription expires. The cursor is written to
 * mcpg.ev.subpos.<id> at most once a second; a new owner resumes there, so
 * an event delivered after the last write is delivered again (at least
 * once). One timer (TICK_MS) drives retries, timeouts, expiry and the
 * cursor writes; the HTTP client is lib/upclient (http and https, on the
 * loop; https verified against callback_ca_file or the system's authorities),
 * each subscription's target resolved on the worker pool. */
#include "events.h"

#include <mcpg/whsig.h>

#include <jansson.h>
#include <openssl/sha.h>
#include <upclient.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define TICK_MS 100
#define RESCAN_MS 10000
#define SAVE_EVERY_MS 1000
#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS 30000
#define DELIVERY_TIMEOUT_MS 10000
#define CONNECT_TIMEOUT_MS 5000
#define TTL_DEFAULT_MS 600000
#define TTL_MIN_MS 10000
#define URL_MAX 2048
#define SECRET_MAX 128
#define TAKE 64
#define ID_LEN 20 /* "sub_" + 16 hex */

static uint64_t mono_ms(const events *ev) { return ev->host->mono_us() / 1000; }

static int64_t wall_ms(const events *ev) { return ev->host->wall_us() / 1000; }

static void iso_time(int64_t ms, char out[48]) {
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(out, 48, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

static size_t sub_key(char *out, size_t cap, const char *prefix, const char *id) {
    int n = snprintf(out, cap, "%s%s", prefix, id);
    return n > 0 ? (size_t)n : 0;
}

/* ======================================================================
 * events/subscribe, events/unsubscribe
 * ====================================================================== */

typedef struct sreq {
    events *ev;
    mcpg_call *call;
    mcpg_worker *w;
    char id[ID_LEN + 1];
    char key[64], poskey[64];
    size_t kn, pkn;
    char *url, *secret, *principal;
    const char *type;
    uint64_t ttl_ms;
    uint64_t cursor;   /* where delivery starts (a new one) or stands (a refresh) */
    bool truncated, existed;
    char *value;
} sreq;

static void sreq_free(sreq *q) {
    const mcpg_host *h = q->ev->host;
    free(q->url);
    free(q->secret);
    free(q->principal);
    free(q->value);
    h->free(q);
}

static mcpg_status fail(events *ev, mcpg_call *call, int64_t code, const char *msg, const char *data) {
    ev->host->call_error(call, code, msg, data);
    return MCPG_DENY;
}

/* Answer a pending call and let it go. */
static void finish_error(sreq *q, int64_t code, const char *msg, const char *data) {
    const mcpg_host *h = q->ev->host;
    mcpg_call *call = q->call;
    h->call_error(call, code, msg, data);
    sreq_free(q);
    h->call_resume(call, MCPG_DENY);
}

static void finish_result(sreq *q, const char *json, size_t n) {
    const mcpg_host *h = q->ev->host;
    mcpg_call *call = q->call;
    int rc = h->call_result(call, json, n);
    sreq_free(q);
    if (rc) h->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    h->call_resume(call, rc ? MCPG_DENY : MCPG_CONTINUE);
}

static void store_failed(sreq *q, int status) {
    char msg[160];
    snprintf(msg, sizeof msg, "Internal error: the coordinator did not take the subscription (%s)",
             mcpg_strerror(status));
    finish_error(q, MCPG_RPC_INTERNAL_ERROR, msg, NULL);
}

/* A decoded string member of obj; NULL with *bad when it is there and not a
 * string (or longer than cap). */
static char *str_member(const mcpg_host *h, const char *obj, size_t n, const char *name, size_t cap,
                        bool *bad) {
    mcpg_json_span s;
    if (h->json_object_get(obj, n, name, &s) != 1) return NULL;
    char *out = malloc(cap + 1);
    size_t len = 0;
    if (!out || s.type != MCPG_JSON_STRING || h->json_string_decode(&s, out, cap + 1, &len) != 0 ||
        memchr(out, '\0', len)) {
        free(out);
        *bad = true;
        return NULL;
    }
    return out;
}

/* The subscription's id: sha256 over (principal, url, name, arguments as
 * canonical JSON: keys sorted, no spaces), each part length-prefixed. */
static int derive_id(const mcpg_host *h, const char *params, size_t pn, const char *principal,
                     const char *url, const char *name, char out[ID_LEN + 1]) {
    mcpg_json_span a;
    char *canon = NULL;
    if (h->json_object_get(params, pn, "arguments", &a) == 1 && a.type != MCPG_JSON_NULL) {
        if (a.type != MCPG_JSON_OBJECT) return -1;
        json_t *j = json_loadb(a.p, a.n, 0, NULL);
        if (!j) return -1;
        canon = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        if (!canon) return -1;
    }
    const char *parts[4] = {principal, url, name, canon ? canon : "{}"};
    mcpg_buf b = {0};
    int rc = 0;
    for (int i = 0; i < 4; i++) rc |= h->buf_printf(&b, "%zu:", strlen(parts[i])) ||
                                      h->buf_append(&b, parts[i], strlen(parts[i]));
    free(canon);
    if (rc) {
        h->buf_free(&b);
        return -1;
    }
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)b.data, b.len, d);
    h->buf_free(&b);
    /* "sub_", 4 bytes of the principal's own digest, 4 of the whole: one
     * scan of "sub_<principal's>" counts a caller's subscriptions */
    unsigned char pd[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)principal, strlen(principal), pd);
    memcpy(out, "sub_", 4);
    mcpg_hex(pd, 4, out + 4);
    mcpg_hex(d, 4, out + 12);
    out[ID_LEN] = '\0';
    return 0;
}

/* The store key prefix of one principal's subscriptions ("...sub_<8 hex>"). */
static size_t principal_prefix(const char *id, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s%.12s", EV_KEY_SUB, id);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* The parts both methods share: the type, the delivery's url, the id. NULL
 * when the call was answered (an error). */
static sreq *parse_common(events *ev, mcpg_call *call, mcpg_json_span *delivery, mcpg_status *st) {
    const mcpg_host *h = ev->host;
    const char *t = h->call_target(call);
    int type = t && *t ? ev_type_index(ev, t, strlen(t)) : -1;
    if (type < 0) {
        *st = fail(ev, call, MCPG_RPC_NOT_FOUND, "Not found: no such event type", "{\"kind\":\"event\"}");
        return NULL;
    }
    size_t pn = 0;
    const char *p = h->call_params(call, &pn);
    if (!p || h->json_object_get(p, pn, "delivery", delivery) != 1 || delivery->type != MCPG_JSON_OBJECT) {
        *st = fail(ev, call, MCPG_RPC_INVALID_PARAMS, "Invalid params: delivery {mode, url, secret} is "
                   "required", NULL);
        return NULL;
    }
    bool bad = false;
    char *url = str_member(h, delivery->p, delivery->n, "url", URL_MAX, &bad);
    if (!url) {
        *st = fail(ev, call, MCPG_RPC_INVALID_PARAMS, "Invalid params: delivery.url must be a string "
                   "(an http:// or https:// URL of at most 2048 bytes)", NULL);
        return NULL;
    }
    const char *pr = h->call_principal(call);
    if (!pr && !ev->cfg->allow_anonymous_subscriptions) {
        /* the gateway would POST to a URL for someone it does not know */
        free(url);
        *st = fail(ev, call, MCPG_RPC_EVENTS_FORBIDDEN, "Forbidden: a webhook subscription needs "
                   "an authenticated caller (allow_anonymous_subscriptions is off)", NULL);
        return NULL;
    }
    sreq *q = h->calloc(1, sizeof *q);
    char *principal = strdup(pr ? pr : "");
    if (!q || !principal) {
        free(url);
        free(principal);
        h->free(q);
        *st = fail(ev, call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
        return NULL;
    }
    q->ev = ev;
    q->call = call;
    q->w = h->call_worker(call);
    q->url = url;
    q->principal = principal;
    q->type = ev->types[type].name;
    if (derive_id(h, p, pn, q->principal, url, q->type, q->id)) {
        sreq_free(q);
        *st = fail(ev, call, MCPG_RPC_INVALID_PARAMS, "Invalid params: arguments must be an object", NULL);
        return NULL;
    }
    q->kn = sub_key(q->key, sizeof q->key, EV_KEY_SUB, q->id);
    q->pkn = sub_key(q->poskey, sizeof q->poskey, EV_KEY_SUBPOS, q->id);
    return q;
}

/* The first store op is out (rc 0): the call waits for it; else answered now. */
static mcpg_status pending(sreq *q, int rc) {
    if (rc >= 0) return MCPG_PENDING;
    events *ev = q->ev;
    mcpg_call *call = q->call;
    sreq_free(q);
    return fail(ev, call, MCPG_RPC_INTERNAL_ERROR, "Internal error: the coordinator is not answering",
                NULL);
}

/* ---- events/subscribe ------------------------------------------------------ */

static void announce(events *ev, mcpg_worker *w, const char *msg, size_t n) {
    (void)ev->co->publish(ev->co_inst, w, EV_SUBJ_SUBS, msg, n, ev_noop_cb, NULL);
}

static void on_sub_put(void *arg, int status, const mcpg_coord_value *v) {
    sreq *q = arg;
    events *ev = q->ev;
    const mcpg_host *h = ev->host;
    (void)v;
    if (status) return store_failed(q, status);
    mcpg_buf m = {0};
    if (h->buf_printf(&m, "+%s\n%s", q->id, q->value) == 0) announce(ev, q->w, m.data, m.len);
    h->buf_free(&m);
    char when[48], out[256];
    iso_time(wall_ms(ev) + (int64_t)q->ttl_ms, when);
    int n = snprintf(out, sizeof out, "{\"id\":\"%s\",\"refreshBefore\":\"%s\",\"cursor\":\"%llu\","
                     "\"truncated\":%s}", q->id, when, (unsigned long long)q->cursor,
                     q->truncated ? "true" : "false");
    finish_result(q, out, (size_t)n);
}

static void put_sub(sreq *q) {
    events *ev = q->ev;
    json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I}", "url", q->url, "secret", q->secret, "type",
                          q->type, "principal", q->principal, "cursor", "", "expiresMs",
                          (json_int_t)(wall_ms(ev) + (int64_t)q->ttl_ms));
    char cur[24];
    snprintf(cur, sizeof cur, "%llu", (unsigned long long)q->cursor);
    if (j) json_object_set_new(j, "cursor", json_string(cur));
    q->value = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!q->value) return finish_error(q, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    int rc = ev->co->put(ev->co_inst, q->w, q->key, q->kn, q->value, strlen(q->value), q->ttl_ms,
                         on_sub_put, q);
    if (rc < 0) store_failed(q, rc);
}

static void on_counted(void *arg, int status, const mcpg_coord_value *v);

/* The caller's own subscriptions counted (the keys of its id prefix). */
static void on_counted_mine(void *arg, int status, const mcpg_coord_value *v) {
    sreq *q = arg;
    events *ev = q->ev;
    if (status) return store_failed(q, status);
    /* one caller cannot fill the table for everyone */
    if (v->number >= ev->cfg->subscriptions_per_principal)
        return finish_error(q, MCPG_RPC_RESOURCE_EXHAUSTED, "Resource exhausted: too many webhook "
                            "subscriptions of this caller (subscriptions_per_principal)",
                            "{\"limit\":\"subscriptions_per_principal\"}");
    int rc = ev->co->scan_prefix(ev->co_inst, q->w, EV_KEY_SUB, sizeof EV_KEY_SUB - 1, ev_noop_cb,
                                 on_counted, q);
    if (rc < 0) store_failed(q, rc);
}

static void on_counted(void *arg, int status, const mcpg_coord_value *v) {
    sreq *q = arg;
    events *ev = q->ev;
    if (status) return store_failed(q, status);
    if (v->number >= ev->cfg->subscriptions_max)
        return finish_error(q, MCPG_RPC_RESOURCE_EXHAUSTED, "Resource exhausted: too many webhook "
                            "subscriptions on this gateway", "{\"limit\":\"subscriptions\"}");
    /* a position an earlier subscription of this key left is not this one's */
    (void)ev->co->del(ev->co_inst, q->w, q->poskey, q->pkn, ev_noop_cb, NULL);
    put_sub(q);
}

static void on_pos(void *arg, int status, const mcpg_coord_value *v) {
    sreq *q = arg;
    uint64_t pos = 0;
    if (status == 0 && ev_parse_u64(v->data, v->len, &pos) == 0 && pos > q->cursor) q->cursor = pos;
    put_sub(q);
}

/* A live subscription: a refresh. Its cursor is where its delivery stands
 * (as last written), the one the client sent being at or behind it. */
static void on_existing(void *arg, int status, const mcpg_coord_value *v) {
    sreq *q = arg;
    events *ev = q->ev;
    if (status == MCPG_ENOENT) {
        char prefix[64];
        size_t pn = principal_prefix(q->id, prefix, sizeof prefix);
        int rc = pn ? ev->co->scan_prefix(ev->co_inst, q->w, prefix, pn, ev_noop_cb,
                                          on_counted_mine, q)
                    : MCPG_EINVAL;
        if (rc < 0) store_failed(q, rc);
        return;
    }
    if (status) return store_failed(q, status);
    q->existed = true;
    q->truncated = false;
    json_t *j = json_loadb(v->data, v->len, 0, NULL);
    const char *c = j ? json_string_value(json_object_get(j, "cursor")) : NULL;
    uint64_t pos = 0;
    if (c && ev_parse_u64(c, strlen(c), &pos) == 0) q->cursor = pos;
    json_decref(j);
    int rc = ev->co->get(ev->co_inst, q->w, q->poskey, q->pkn, on_pos, q);
    if (rc < 0) put_sub(q);
}

static mcpg_status subscribe(events *ev, mcpg_call *call) {
    const mcpg_host *h = ev->host;
    mcpg_json_span d, mode, c, ttl;
    mcpg_status st = MCPG_DENY;
    sreq *q = parse_common(ev, call, &d, &st);
    if (!q) return st;
    size_t pn = 0;
    const char *p = h->call_params(call, &pn);
    const char *why = NULL, *data = NULL;
    char why_buf[512];
    int64_t code = MCPG_RPC_INVALID_PARAMS;
    bool bad = false;
    char *secret = NULL;
    if (h->json_object_get(d.p, d.n, "mode", &mode) != 1 || mode.type != MCPG_JSON_STRING) {
        why = "Invalid params: delivery.mode is required (\"webhook\")";
    } else if (!h->json_string_eq(&mode, "webhook", 7)) {
        why = "Unsupported: events/subscribe offers the delivery mode \"webhook\" only (poll and push "
              "need no subscription)";
        data = "{\"feature\":\"deliveryMode\"}";
    } else if (!(secret = str_member(h, d.p, d.n, "secret", SECRET_MAX, &bad))) {
        why = "Invalid params: delivery.secret is required: whsec_ and the base64 of a 16 to 64 byte key";
    }
    if (!why) {
        unsigned char key[MCPG_WHSIG_KEY_MAX];
        size_t kl = 0;
        char err[256];
        q->secret = secret;
        if (mcpg_whsig_secret_decode(secret, strlen(secret), key, sizeof key, &kl) != 0)
            why = "Invalid params: delivery.secret is not a Standard Webhooks secret (whsec_ and the "
                  "base64 of a 16 to 64 byte key)";
        else if (up_url_check(q->url, err, sizeof err) != 0 || strlen(q->url) > URL_MAX)
            why = "Invalid params: delivery.url is not an http:// or https:// URL";
        else if (strncasecmp(q->url, "https://", 8) != 0 && !ev->cfg->allow_http_callbacks) {
            why = "Unsupported: this gateway delivers to https:// callbacks only (allow_http_callbacks "
                  "is off)";
            data = "{\"feature\":\"callbackScheme\",\"value\":\"http\"}";
        } else if (up_dest_check_url(q->url, (const char *const *)ev->cb_allow, ev->n_cb_allow, err,
                                     sizeof err) != 0) {
            /* the gateway posts only where anyone could: not to itself, its
             * machine or the network behind it (a name: judged when resolved) */
            snprintf(why_buf, sizeof why_buf, "Invalid params: delivery.url is refused: %s (callbacks "
                     "go to public addresses; the operator's callback_allow names exceptions)", err);
            why = why_buf;
        }
    }
    if (!why) {
        int64_t t = TTL_DEFAULT_MS;
        if (h->json_object_get(p, pn, "ttlMs", &ttl) == 1) {
            if (ttl.type == MCPG_JSON_NULL) t = ev->cfg->subscription_max_ttl_ms; /* no expiry asked: the most */
            else if (h->json_int64(&ttl, &t) != 0)
                why = "Invalid params: ttlMs must be an integer (milliseconds) or null";
        }
        if (t < TTL_MIN_MS) t = TTL_MIN_MS;
        if (t > ev->cfg->subscription_max_ttl_ms) t = ev->cfg->subscription_max_ttl_ms;
        q->ttl_ms = (uint64_t)t;
    }
    if (!why && !atomic_load(&ev->reader_ready)) { /* "now" not known yet: as events/poll, 503 */
        why = "Service unavailable: this gateway has not yet read where the event log is; retry";
        code = MCPG_RPC_SERVER_ERROR;
        h->call_set_http(call, 503, 1);
    } else if (!why && h->json_object_get(p, pn, "cursor", &c) == 1 && c.type != MCPG_JSON_NULL) {
        uint64_t cur = 0;
        if (c.type != MCPG_JSON_STRING || c.escaped || ev_parse_u64(c.p, c.n, &cur))
            why = "Invalid params: cursor is not one this gateway gave";
        else {
            pthread_mutex_lock(&ev->cache.lock);
            uint64_t first = ev->cache.first, last = atomic_load(&ev->head_seen);
            pthread_mutex_unlock(&ev->cache.lock);
            q->truncated = cur + 1 < first;
            q->cursor = q->truncated ? first - 1 : cur > last ? last : cur;
        }
    } else if (!why) {
        q->cursor = atomic_load(&ev->head_seen); /* "now", as readers.c has it */
    }
    if (why) {
        if (!q->secret) free(secret);
        sreq_free(q);
        return fail(ev, call, data ? MCPG_RPC_UNSUPPORTED : code, why, data);
    }
    int rc = ev->co->get(ev->co_inst, q->w, q->key, q->kn, on_existing, q);
    return pending(q, rc);
}

/* ---- events/unsubscribe ------------------------------------------------------ */

static void on_unsub_del(void *arg, int status, const mcpg_coord_value *v) {
    sreq *q = arg;
    events *ev = q->ev;
    (void)v;
    if (status == MCPG_ENOENT)
        return finish_error(q, MCPG_RPC_NOT_FOUND, "Not found: no such subscription",
                            "{\"kind\":\"subscription\"}");
    if (status) return store_failed(q, status);
    char msg[32];
    int n = snprintf(msg, sizeof msg, "-%s", q->id);
    announce(ev, q->w, msg, (size_t)n);
    (void)ev->co->del(ev->co_inst, q->w, q->poskey, q->pkn, ev_noop_cb, NULL);
    finish_result(q, "{}", 2);
}

static mcpg_status unsubscribe(events *ev, mcpg_call *call) {
    mcpg_json_span d;
    mcpg_status st = MCPG_DENY;
    sreq *q = parse_common(ev, call, &d, &st);
    if (!q) return st;
    int rc = ev->co->del(ev->co_inst, q->w, q->key, q->kn, on_unsub_del, q);
    return pending(q, rc);
}

mcpg_status ev_subscribe_request(events *ev, mcpg_call *call) {
    return ev->host->call_method(call) == MCPG_METHOD_EVENTS_SUBSCRIBE ? subscribe(ev, call)
                                                                        : unsubscribe(ev, call);
}

/* ======================================================================
 * deliveries: the lease holder, loop 0
 * ====================================================================== */

typedef struct dsub {
    struct dsub *next;
    struct ev_subs *S;
    char id[ID_LEN + 1];
    char *url;
    unsigned char key[MCPG_WHSIG_KEY_MAX];
    size_t key_len;
    uint32_t type;
    int64_t expires_ms;      /* wall clock */
    uint64_t cursor;         /* checked up to (delivered, or not of its type) */
    uint64_t saved;          /* the cursor as last written */
    uint64_t saved_at_ms;
    bool saving;
    up_target *t;
    up_pool *pool;
    bool resolving;
    uint64_t resolve_at_ms;  /* when to try resolving again */
    ev_row *row;             /* the event being delivered (in flight or to retry) */
    up_req *req;
    int http_status;
    bool timed_out;
    uint64_t deadline_ms, next_try_ms, backoff_ms;
    uint32_t attempts;
    bool seen;               /* in the scan going on */
    uint64_t added_ms;
    bool dead;               /* removed: freed once no callback of its can come */
} dsub;

typedef struct grave {
    struct grave *next;
    up_target *t;
    uint64_t at_ms;
} grave;

typedef struct ev_subs {
    events *ev;
    ev_loop *l;
    mcpg_coord_sub *sub;
    mcpg_timer *tick;
    mcpg_post kick;
    atomic_bool kick_posted;
    dsub *list;
    size_t n;
    bool active, scanning, stopped;
    uint64_t scan_started_ms, last_scan_ms;
    grave *graves;   /* targets of closed pools, freed a little later */
} ev_subs;

static void pump_all(ev_subs *S);

static void bury_target(ev_subs *S, up_target *t) {
    if (!t) return;
    grave *g = malloc(sizeof *g);
    if (!g) return; /* leaked rather than freed under a closing handle */
    g->t = t;
    g->at_ms = mono_ms(S->ev);
    g->next = S->graves;
    S->graves = g;
}

static void free_graves(ev_subs *S, bool all) {
    uint64_t now = mono_ms(S->ev);
    for (grave **pp = &S->graves; *pp;) {
        grave *g = *pp;
        if (all || now - g->at_ms >= 1000) {
            *pp = g->next;
            up_target_free(g->t);
            free(g);
        } else {
            pp = &g->next;
        }
    }
}

static void dsub_release(dsub *d) {
    ev_row_unref(d->S->ev->host, d->row);
    d->row = NULL;
    free(d->url);
    free(d);
}

static void save_cursor(dsub *d);

/* Out of the list; its request aborted, its pool closed. */
static void drop(ev_subs *S, dsub *d, const char *why) {
    events *ev = S->ev;
    for (dsub **pp = &S->list; *pp; pp = &(*pp)->next)
        if (*pp == d) {
            *pp = d->next;
            S->n--;
            break;
        }
    if (why) ev->host->log(ev->self, MCPG_LOG_INFO, "webhook subscription %s: %s", d->id, why);
    d->dead = true;
    if (d->req) up_req_abort(d->req); /* its on_done sees dead */
    if (d->pool) up_pool_close(d->pool);
    d->pool = NULL;
    bury_target(S, d->t);
    d->t = NULL;
    if (!d->resolving && !d->saving) dsub_release(d);
}

static dsub *find(ev_subs *S, const char *id, size_t n) {
    for (dsub *d = S->list; d; d = d->next)
        if (strlen(d->id) == n && !memcmp(d->id, id, n)) return d;
    return NULL;
}

/* ---- the HTTP side ------------------------------------------------------------ */

typedef struct resolve_job {
    dsub *d;
    char *url;
    const char *ca_file;
    up_target *t;
    char err[256];
} resolve_job;

static void resolve_work(void *arg) {
    resolve_job *j = arg;
    up_tls_opts tls = {.ca_file = j->ca_file};
    j->t = up_target_new(j->url, &tls, CONNECT_TIMEOUT_MS, j->err, sizeof j->err);
    /* the address resolved is the one connected to: judged here, after DNS */
    const events *ev = j->d->S->ev;
    char err[sizeof j->err - 32];
    if (j->t && up_dest_check_target(j->t, j->url, (const char *const *)ev->cb_allow,
                                     ev->n_cb_allow, err, sizeof err) != 0) {
        up_target_free(j->t);
        j->t = NULL;
        snprintf(j->err, sizeof j->err, "delivery refused: %s", err);
    }
}

static void resolve_done(void *arg, int status) {
    resolve_job *j = arg;
    dsub *d = j->d;
    ev_subs *S = d->S;
    events *ev = S->ev;
    d->resolving = false;
    if (d->dead || S->stopped) {
        if (j->t) up_target_free(j->t);
        if (d->dead && !d->saving) dsub_release(d);
    } else if (status || !j->t) {
        ev->host->log(ev->self, MCPG_LOG_WARN, "webhook subscription %s: %s", d->id,
                      status ? mcpg_strerror(status) : j->err);
        d->resolve_at_ms = mono_ms(ev) + BACKOFF_MAX_MS;
    } else {
        d->t = j->t;
        d->pool = up_pool_new(ev->host->worker_uv_loop(S->l->w), d->t, 1, 1, 2);
        if (!d->pool) {
            bury_target(S, d->t);
            d->t = NULL;
            d->resolve_at_ms = mono_ms(ev) + BACKOFF_MAX_MS;
        }
    }
    free(j->url);
    free(j);
    if (!S->stopped) pump_all(S);
}

static void resolve(dsub *d) {
    events *ev = d->S->ev;
    resolve_job *j = calloc(1, sizeof *j);
    if (!j || !(j->url = strdup(d->url))) {
        free(j);
        return;
    }
    j->d = d;
    j->ca_file = ev->cfg->callback_ca_file && *ev->cfg->callback_ca_file ? ev->cfg->callback_ca_file : NULL;
    d->resolving = true;
    if (ev->host->work_submit(ev->self, d->S->l->w, 0, resolve_work, resolve_done, j) != 0) {
        d->resolving = false;
        d->resolve_at_ms = mono_ms(ev) + BACKOFF_FIRST_MS;
        free(j->url);
        free(j);
    }
}

static int on_resp_head(void *arg, int status, const up_header *hd, size_t n) {
    (void)hd, (void)n;
    ((dsub *)arg)->http_status = status;
    return 0;
}

static int on_resp_body(void *arg, const char *p, size_t n) {
    (void)arg, (void)p, (void)n;
    return 0; /* the answer's body says nothing we use */
}

static void on_resp_done(void *arg, int err) {
    dsub *d = arg;
    ev_subs *S = d->S;
    events *ev = S->ev;
    d->req = NULL;
    if (d->dead || S->stopped) return;
    if (!err && d->http_status >= 200 && d->http_status < 300) {
        if (ev->m_hook_ok) ev->host->metric_add(ev->m_hook_ok, 0, 1);
        d->cursor = d->row->seq;
        ev_row_unref(ev->host, d->row);
        d->row = NULL;
        d->attempts = 0;
        d->backoff_ms = 0;
        d->next_try_ms = 0;
    } else {
        char why[160];
        if (ev->m_hook_failed) ev->host->metric_add(ev->m_hook_failed, 0, 1);
        if (err && !d->timed_out) snprintf(why, sizeof why, "%s", up_strerror(err));
        else if (err) snprintf(why, sizeof why, "no answer within %d ms", DELIVERY_TIMEOUT_MS);
        else snprintf(why, sizeof why, "HTTP %d", d->http_status);
        d->backoff_ms = d->backoff_ms ? d->backoff_ms * 2 : BACKOFF_FIRST_MS;
        if (d->backoff_ms > BACKOFF_MAX_MS) d->backoff_ms = BACKOFF_MAX_MS;
        d->next_try_ms = mono_ms(ev) + d->backoff_ms;
        /* the callback's origin only: its path, query or userinfo may hold a
         * token the subscriber put there; the id tells which one it is */
        ev->host->log(ev->self, d->attempts <= 3 ? MCPG_LOG_WARN : MCPG_LOG_DEBUG,
                      "webhook subscription %s: delivering log row %llu to %s://%s failed (%s); "
                      "again in %llu ms", d->id, (unsigned long long)d->row->seq,
                      up_target_is_tls(d->t) ? "https" : "http", up_target_authority(d->t), why,
                      (unsigned long long)d->backoff_ms);
    }
    d->timed_out = false;
    /* the next one goes from the loop, not from inside upclient's callback */
    if (!atomic_exchange(&S->kick_posted, true) && ev->host->worker_post(S->l->w, &S->kick) != 0)
        atomic_store(&S->kick_posted, false);
}

static const up_callbacks resp_cb = {on_resp_head, on_resp_body, on_resp_done};

/* webhook-id: the event's id when it is fit for a header line, else the row's. */
static void event_wid(const events *ev, const ev_row *r, const char *body, size_t bn, char *out,
                      size_t cap) {
    mcpg_json_span s;
    size_t n = 0;
    if (ev->host->json_object_get(body, bn, "eventId", &s) == 1 &&
        ev->host->json_string_decode(&s, out, cap, &n) == 0 && n) {
        bool fit = true;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)out[i] < 0x21 || (unsigned char)out[i] == 0x7f) fit = false;
        if (fit) return;
    }
    snprintf(out, cap, "mcpg_%llu", (unsigned long long)r->seq);
}

static void send_row(dsub *d) {
    ev_subs *S = d->S;
    events *ev = S->ev;
    const mcpg_host *h = ev->host;
    mcpg_buf body = {0}, hd = {0};
    char wid[EV_ID_MAX + 1], ts[24], sig[MCPG_WHSIG_SIG_MAX];
    int rc = h->buf_append(&body, d->row->json, d->row->len) || h->buf_append(&body, "}", 1);
    if (!rc) {
        event_wid(ev, d->row, body.data, body.len, wid, sizeof wid);
        int tn = snprintf(ts, sizeof ts, "%lld", (long long)(h->wall_us() / 1000000));
        rc = mcpg_whsig_sign(d->key, d->key_len, wid, strlen(wid), ts, (size_t)tn, body.data,
                             body.len, sig) ||
             h->buf_printf(&hd, "Content-Type: application/json\r\nwebhook-id: %s\r\n"
                           "webhook-timestamp: %s\r\nwebhook-signature: %s\r\n"
                           "X-MCP-Subscription-Id: %s\r\nUser-Agent: mcpg-events\r\n",
                           wid, ts, sig, d->id);
    }
    d->http_status = 0;
    d->timed_out = false;
    d->attempts++;
    d->req = rc ? NULL : up_send(d->pool, "POST", up_target_path(d->t), hd.data, body.data, body.len,
                                 0, &resp_cb, d);
    h->buf_free(&body);
    h->buf_free(&hd);
    if (!d->req) { /* out of memory: as a failed attempt */
        d->backoff_ms = d->backoff_ms ? d->backoff_ms * 2 : BACKOFF_FIRST_MS;
        if (d->backoff_ms > BACKOFF_MAX_MS) d->backoff_ms = BACKOFF_MAX_MS;
        d->next_try_ms = mono_ms(ev) + d->backoff_ms;
        return;
    }
    d->deadline_ms = mono_ms(ev) + DELIVERY_TIMEOUT_MS;
}

/* The next row of its type after its cursor, referenced into d->row; the
 * cursor moved over the rows of other types. */
static void next_row(dsub *d) {
    events *ev = d->S->ev;
    for (;;) {
        ev_row *rows[TAKE];
        uint64_t first = 0, next = 0;
        size_t k = ev_cache_take(ev, d->cursor, rows, TAKE, &first, &next);
        if (d->cursor + 1 < first) {
            ev->host->log(ev->self, MCPG_LOG_WARN, "webhook subscription %s: log rows %llu to %llu "
                          "are older than this replica keeps: not delivered", d->id,
                          (unsigned long long)d->cursor + 1, (unsigned long long)first - 1);
            d->cursor = first - 1;
        }
        size_t i = 0;
        for (; i < k; i++) {
            if (rows[i]->type == d->type) {
                d->row = rows[i++];
                break;
            }
            d->cursor = rows[i]->seq;
            ev_row_unref(ev->host, rows[i]);
        }
        for (; i < k; i++) ev_row_unref(ev->host, rows[i]);
        if (d->row) return;
        if (k < TAKE) {
            if (next && next - 1 > d->cursor) d->cursor = next - 1;
            return;
        }
    }
}

static void pump(dsub *d) {
    ev_subs *S = d->S;
    events *ev = S->ev;
    if (d->dead || d->req || d->resolving) return;
    uint64_t now = mono_ms(ev);
    if (!d->pool) {
        if (now >= d->resolve_at_ms) resolve(d);
        return;
    }
    if (now < d->next_try_ms) return;
    if (!d->row) next_row(d);
    if (d->row) send_row(d);
}

static void pump_all(ev_subs *S) {
    if (!S->active || S->stopped) return;
    for (dsub *d = S->list; d; d = d->next) pump(d);
}

static void on_kick(void *arg) {
    ev_subs *S = arg;
    atomic_store(&S->kick_posted, false);
    if (!S->stopped) pump_all(S);
}

void ev_subs_advance(events *ev) {
    if (ev->subs) pump_all(ev->subs);
}

/* ---- the cursor's record ------------------------------------------------------ */

typedef struct save_job {
    dsub *d;
    uint64_t cursor;
} save_job;

static void on_saved(void *arg, int status, const mcpg_coord_value *v) {
    save_job *j = arg;
    dsub *d = j->d;
    (void)v;
    d->saving = false;
    if (status == 0) d->saved = j->cursor;
    free(j);
    if (d->dead && !d->resolving) dsub_release(d);
}

static void save_cursor(dsub *d) {
    events *ev = d->S->ev;
    save_job *j = malloc(sizeof *j);
    if (!j) return;
    j->d = d;
    j->cursor = d->cursor;
    char key[64], val[24];
    size_t kn = sub_key(key, sizeof key, EV_KEY_SUBPOS, d->id);
    int vn = snprintf(val, sizeof val, "%llu", (unsigned long long)d->cursor);
    d->saving = true;
    d->saved_at_ms = mono_ms(ev);
    if (ev->co->put(ev->co_inst, d->S->l->w, key, kn, val, (size_t)vn,
                    (uint64_t)ev->cfg->subscription_max_ttl_ms, on_saved, j) < 0) {
        d->saving = false;
        free(j);
    }
}

/* ---- the set: values, announcements, scans ---------------------------------------- */

/* A subscription as the store holds it: added, or (when known) its secret
 * and expiry renewed; its cursor stands where delivery is. */
static void upsert(ev_subs *S, const char *id, size_t idn, const char *val, size_t vn,
                   uint64_t pos, bool has_pos) {
    events *ev = S->ev;
    if (idn != ID_LEN) return;
    json_t *j = json_loadb(val, vn, 0, NULL);
    const char *url = j ? json_string_value(json_object_get(j, "url")) : NULL;
    const char *secret = j ? json_string_value(json_object_get(j, "secret")) : NULL;
    const char *type = j ? json_string_value(json_object_get(j, "type")) : NULL;
    const char *cur = j ? json_string_value(json_object_get(j, "cursor")) : NULL;
    json_t *exp = j ? json_object_get(j, "expiresMs") : NULL;
    unsigned char key[MCPG_WHSIG_KEY_MAX];
    size_t kl = 0;
    uint64_t c = 0;
    int t = type ? ev_type_index(ev, type, strlen(type)) : -1;
    if (!url || !secret || t < 0 || !json_is_integer(exp) || !cur || ev_parse_u64(cur, strlen(cur), &c) ||
        mcpg_whsig_secret_decode(secret, strlen(secret), key, sizeof key, &kl) != 0) {
        ev->host->log(ev->self, MCPG_LOG_WARN, "webhook subscription %.*s: its record is not one this "
                      "gateway can deliver (a type it does not have?): skipped", (int)idn, id);
        json_decref(j);
        return;
    }
    dsub *d = find(S, id, idn);
    if (!d) {
        if (!(d = calloc(1, sizeof *d)) || !(d->url = strdup(url))) {
            free(d);
            json_decref(j);
            return;
        }
        d->S = S;
        memcpy(d->id, id, idn);
        d->type = (uint32_t)t;
        d->cursor = has_pos && pos > c ? pos : c;
        d->saved = d->cursor;
        d->added_ms = mono_ms(ev);
        d->next = S->list;
        S->list = d;
        S->n++;
    }
    d->seen = true;
    memcpy(d->key, key, kl);
    d->key_len = kl;
    d->expires_ms = (int64_t)json_integer_value(exp);
    json_decref(j);
    pump(d);
}

typedef struct load_job {
    ev_subs *S;
    char id[ID_LEN + 1];
    char *val;
    size_t vn;
} load_job;

static void on_load_pos(void *arg, int status, const mcpg_coord_value *v) {
    load_job *j = arg;
    ev_subs *S = j->S;
    uint64_t pos = 0;
    bool has = status == 0 && ev_parse_u64(v->data, v->len, &pos) == 0;
    if (!S->stopped && S->active) upsert(S, j->id, strlen(j->id), j->val, j->vn, pos, has);
    free(j->val);
    free(j);
}

static void on_load(void *arg, int status, const mcpg_coord_value *v) {
    load_job *j = arg;
    ev_subs *S = j->S;
    events *ev = S->ev;
    if (S->stopped || !S->active || status || !(j->val = malloc(v->len + 1))) {
        free(j);
        return;
    }
    memcpy(j->val, v->data, v->len);
    j->vn = v->len;
    char key[64];
    size_t kn = sub_key(key, sizeof key, EV_KEY_SUBPOS, j->id);
    if (ev->co->get(ev->co_inst, S->l->w, key, kn, on_load_pos, j) < 0) on_load_pos(j, MCPG_EIO, NULL);
}

static void load(ev_subs *S, const char *id, size_t idn) {
    events *ev = S->ev;
    if (idn != ID_LEN) return;
    load_job *j = calloc(1, sizeof *j);
    if (!j) return;
    j->S = S;
    memcpy(j->id, id, idn);
    char key[64];
    size_t kn = sub_key(key, sizeof key, EV_KEY_SUB, j->id);
    if (ev->co->get(ev->co_inst, S->l->w, key, kn, on_load, j) < 0) free(j);
}

static void on_scan_key(void *arg, int status, const mcpg_coord_value *v) {
    ev_subs *S = arg;
    if (status || S->stopped || !S->active || !v->data) return;
    /* the key as stored may carry the coordinator's own prefix */
    const char *k = v->data, *end = v->data + v->len, *at = NULL;
    for (const char *p = k; p + sizeof EV_KEY_SUB - 1 <= end; p++)
        if (!memcmp(p, EV_KEY_SUB, sizeof EV_KEY_SUB - 1)) at = p;
    if (!at) return;
    const char *id = at + sizeof EV_KEY_SUB - 1;
    size_t idn = (size_t)(end - id);
    dsub *d = find(S, id, idn);
    if (d) d->seen = true;
    else load(S, id, idn);
}

static void on_scan_done(void *arg, int status, const mcpg_coord_value *v) {
    ev_subs *S = arg;
    (void)v;
    S->scanning = false;
    if (S->stopped || !S->active || status) return;
    for (dsub *d = S->list, *nx; d; d = nx) {
        nx = d->next;
        if (!d->seen && d->added_ms < S->scan_started_ms) drop(S, d, "gone from the store");
    }
}

static void scan(ev_subs *S) {
    events *ev = S->ev;
    if (S->scanning) return;
    for (dsub *d = S->list; d; d = d->next) d->seen = false;
    S->scanning = true;
    S->scan_started_ms = S->last_scan_ms = mono_ms(ev);
    if (ev->co->scan_prefix(ev->co_inst, S->l->w, EV_KEY_SUB, sizeof EV_KEY_SUB - 1, on_scan_key,
                            on_scan_done, S) < 0)
        S->scanning = false;
}

static void on_word(void *arg, const char *subject, const char *data, size_t len) {
    ev_subs *S = arg;
    (void)subject;
    if (S->stopped || !S->active || len < 2) return;
    if (data[0] == '-') {
        dsub *d = find(S, data + 1, len - 1);
        if (d) drop(S, d, "unsubscribed");
    } else if (data[0] == '+') {
        const char *nl = memchr(data, '\n', len);
        if (nl) upsert(S, data + 1, (size_t)(nl - data - 1), nl + 1, len - (size_t)(nl + 1 - data), 0, false);
    }
}

static void drop_all(ev_subs *S) {
    while (S->list) {
        if (S->list->cursor != S->list->saved && !S->stopped) save_cursor(S->list);
        drop(S, S->list, NULL);
    }
}

static void on_tick(void *arg) {
    ev_subs *S = arg;
    events *ev = S->ev;
    bool holds = ev_owner_holds(ev);
    if (holds != S->active) {
        S->active = holds;
        if (holds) {
            ev->host->log(ev->self, MCPG_LOG_INFO, "this replica delivers the webhook subscriptions");
            scan(S);
        } else {
            drop_all(S);
        }
    }
    free_graves(S, false);
    if (!S->active) return;
    uint64_t now = mono_ms(ev);
    int64_t wall = wall_ms(ev);
    if (now - S->last_scan_ms >= RESCAN_MS) scan(S);
    for (dsub *d = S->list, *nx; d; d = nx) {
        nx = d->next;
        if (d->expires_ms <= wall) {
            if (d->cursor != d->saved) save_cursor(d);
            drop(S, d, "expired (not refreshed before its refreshBefore)");
            continue;
        }
        if (d->req && now >= d->deadline_ms) {
            d->timed_out = true;
            up_req_abort(d->req); /* on_done: a failed attempt */
            continue;
        }
        if (d->cursor != d->saved && !d->saving && now - d->saved_at_ms >= SAVE_EVERY_MS) save_cursor(d);
        pump(d);
    }
}

int ev_subs_start(events *ev, ev_loop *l0) {
    const mcpg_host *h = ev->host;
    ev_subs *S = h->calloc(1, sizeof *S);
    if (!S) return MCPG_ENOMEM;
    S->ev = ev;
    S->l = l0;
    S->kick.fn = on_kick;
    S->kick.arg = S;
    ev->subs = S;
    if (ev->co->subscribe(ev->co_inst, l0->w, EV_SUBJ_SUBS, on_word, S, &S->sub) < 0)
        S->sub = NULL; /* the rescan still finds them */
    int rc = h->timer_start(ev->self, l0->w, TICK_MS, TICK_MS, on_tick, S, &S->tick);
    return rc < 0 ? rc : 0;
}

/* Every request aborted, every pool closed. */
void ev_subs_stop(events *ev) {
    ev_subs *S = ev->subs;
    if (!S) return;
    if (S->tick) ev->host->timer_stop(S->tick);
    S->tick = NULL;
    if (S->sub) ev->co->unsubscribe(ev->co_inst, S->sub);
    S->sub = NULL;
    S->stopped = true; /* positions not yet written stay unwritten: delivered again (at least once) */
    drop_all(S);
}

void ev_subs_free(events *ev) {
    ev_subs *S = ev->subs;
    if (!S) return;
    while (S->list) {
        dsub *d = S->list;
        S->list = d->next;
        up_target_free(d->t);
        dsub_release(d);
    }
    free_graves(S, true);
    ev->host->free(S);
    ev->subs = NULL;
}
