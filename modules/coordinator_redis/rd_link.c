/* coordinator_redis: one connection's life, on its worker's loop.
 *
 * hiredis 0.14.1 async, driven by its libuv adapter (the adapter's uv_poll
 * belongs to hiredis: it is closed by redisAsyncFree, never by us). The
 * adapter is included here and nowhere else.
 *
 *   DOWN --(attempt due)--> CONNECTING --(connected)--> HANDSHAKE --> READY
 *     ^                         |  connect_timeout_ms       |            |
 *     +---- backoff <-----------+---------------------------+------------+
 *                               (refused, timed out, an error, dropped)
 *
 * The backoff doubles from reconnect_min_ms up to reconnect_max_ms and
 * starts again once a link is ready. hiredis 0.14.1 has no timeouts of its
 * own: the worker's tick timer checks the deadlines. */
#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "rd_internal.h"

static const char *role_name(const rd_link *l) { return l->role == RD_LINK_DATA ? "" : " (pub/sub)"; }

static coordredis *cr_of(const rd_link *l) { return l->wk->cr; }

static uint64_t now_us(const rd_link *l) { return cr_of(l)->h->mono_us(); }

uint64_t rd_tick_ms(const rd_cfg *cfg) {
    int64_t m = cfg->connect_timeout_ms;
    if (cfg->op_timeout_ms < m) m = cfg->op_timeout_ms;
    if (cfg->reconnect_min_ms < m) m = cfg->reconnect_min_ms;
    m /= 4;
    return (uint64_t)(m < 5 ? 5 : m > 100 ? 100 : m);
}

void rd_link_init(rd_link *l, rd_worker *wk, rd_role role) {
    memset(l, 0, sizeof *l);
    l->wk = wk;
    l->role = role;
    l->state = RD_DOWN;
}

/* Down, with the next attempt after the backoff. The first failure after a
 * ready link (or at start) is a warning; the retries are debug lines. */
static void link_down(rd_link *l, const char *why) {
    coordredis *cr = cr_of(l);
    const rd_cfg *cfg = cr->cfg;
    l->ac = NULL;
    l->state = RD_DOWN;
    l->timed_out = 0;
    if (l->wk->stopping) return;
    l->backoff_ms = l->failures == 0 ? (uint64_t)cfg->reconnect_min_ms : l->backoff_ms * 2;
    if (l->backoff_ms > (uint64_t)cfg->reconnect_max_ms) l->backoff_ms = (uint64_t)cfg->reconnect_max_ms;
    l->failures++;
    l->deadline_us = now_us(l) + l->backoff_ms * 1000;
    cr->h->log(cr->self, l->failures == 1 ? MCPG_LOG_WARN : MCPG_LOG_DEBUG,
               "worker %u%s: Redis unavailable (%s); ops answer EUNAVAIL, retry in %llu ms",
               l->wk->index, role_name(l), why, (unsigned long long)l->backoff_ms);
}

static void link_ready(rd_link *l) {
    coordredis *cr = cr_of(l);
    l->state = RD_READY;
    if (l->failures > 1 || (l->failures == 1 && l->backoff_ms))
        cr->h->log(cr->self, MCPG_LOG_INFO, "worker %u%s: Redis connected again after %u failed "
                   "attempt(s)", l->wk->index, role_name(l), l->failures);
    l->failures = 0;
    l->backoff_ms = 0;
}

void rd_link_drop(rd_link *l, int timed_out) {
    struct redisAsyncContext *ac = l->ac;
    if (!ac) return;
    if (!l->wk->stopping) atomic_fetch_add(&cr_of(l)->drops, 1);
    l->timed_out = timed_out;
    l->state = RD_DOWN;
    /* commands waiting are answered with NULL replies inside the free; the
     * disconnect callback then sees the context is no longer ours */
    redisAsyncFree(ac);
    if (l->ac == ac) link_down(l, timed_out ? "an op went unanswered past op_timeout_ms"
                                            : "connection dropped");
}

int rd_link_send(rd_link *l, void (*fn)(struct redisAsyncContext *, void *, void *), void *priv,
                 int argc, const char **argv, const size_t *lens) {
    if (l->state != RD_READY || !l->ac) return -1;
    return redisAsyncCommandArgv(l->ac, fn, priv, argc, argv, lens) == REDIS_OK ? 0 : -1;
}

/* ---- handshake ------------------------------------------------------------- */

static int reply_is_error(const redisReply *r) { return r && r->type == REDIS_REPLY_ERROR; }

static void handshake_failed(rd_link *l, const char *what, const redisReply *r) {
    coordredis *cr = cr_of(l);
    cr->h->log(cr->self, MCPG_LOG_ERROR, "worker %u%s: %s refused by Redis: %.*s", l->wk->index,
               role_name(l), what, r ? (int)r->len : 0, r && r->str ? r->str : "");
    rd_link_drop(l, 0);
}

/* priv: -1 AUTH, -2 SELECT, else the script's index. */
static void on_handshake(redisAsyncContext *ac, void *reply, void *priv) {
    rd_link *l = ac->data;
    redisReply *r = reply;
    intptr_t what = (intptr_t)priv;
    if (!r || l->ac != ac || l->state != RD_HANDSHAKE) return; /* dropped meanwhile */
    if (reply_is_error(r)) {
        handshake_failed(l, what == -1 ? "AUTH" : what == -2 ? "SELECT" : "SCRIPT LOAD", r);
        return;
    }
    if (what >= 0 && r->type == REDIS_REPLY_STRING && r->len == 40) {
        memcpy(l->sha[what], r->str, 40);
        l->sha[what][40] = '\0';
    }
    if (--l->handshake_left == 0) link_ready(l);
}

/* Every message of the store's subjects: one pattern for all of them, the
 * exact subjects matched in the module (coord_pubsub), so a message that
 * fits several subscriptions arrives once. */
static void on_pmessage(redisAsyncContext *ac, void *reply, void *priv) {
    rd_link *l = ac->data;
    redisReply *r = reply;
    (void)priv;
    if (!r || l->ac != ac) return;
    if (reply_is_error(r)) {
        handshake_failed(l, "PSUBSCRIBE", r);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || !r->element[0]->str) return;
    const redisReply *kind = r->element[0];
    if (kind->len == 10 && memcmp(kind->str, "psubscribe", 10) == 0) {
        if (l->state == RD_HANDSHAKE && --l->handshake_left == 0) link_ready(l);
    } else if (kind->len == 8 && memcmp(kind->str, "pmessage", 8) == 0 && r->elements == 4) {
        const redisReply *ch = r->element[2], *data = r->element[3];
        if (ch->str && data->type == REDIS_REPLY_STRING)
            rd_message_in(cr_of(l), ch->str, ch->len, data->str, data->len);
    }
}

static void send_auth_select(rd_link *l) {
    coordredis *cr = cr_of(l);
    if (cr->password[0]) {
        const char *argv[] = {"AUTH", cr->password};
        size_t lens[] = {4, strlen(cr->password)};
        redisAsyncCommandArgv(l->ac, on_handshake, (void *)(intptr_t)-1, 2, argv, lens);
        l->handshake_left++;
    }
    if (cr->url.db && l->role == RD_LINK_DATA) {
        char db[16];
        int n = snprintf(db, sizeof db, "%d", cr->url.db);
        const char *argv[] = {"SELECT", db};
        size_t lens[] = {6, (size_t)n};
        redisAsyncCommandArgv(l->ac, on_handshake, (void *)(intptr_t)-2, 2, argv, lens);
        l->handshake_left++;
    }
}

static void send_handshake(rd_link *l) {
    coordredis *cr = cr_of(l);
    l->handshake_left = 0;
    send_auth_select(l);
    if (l->role == RD_LINK_PUBSUB) {
        const char *argv[] = {"PSUBSCRIBE", cr->msg_pattern};
        size_t lens[] = {10, strlen(cr->msg_pattern)};
        redisAsyncCommandArgv(l->ac, on_pmessage, NULL, 2, argv, lens);
        l->handshake_left++;
        return;
    }
    for (intptr_t i = 0; i < RD_S_COUNT; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", rd_scripts[i]};
        size_t lens[] = {6, 4, strlen(rd_scripts[i])};
        redisAsyncCommandArgv(l->ac, on_handshake, (void *)i, 3, argv, lens);
        l->handshake_left++;
    }
}

/* ---- connect ---------------------------------------------------------------- */

static void on_connect(const redisAsyncContext *ac, int status) {
    rd_link *l = ac->data;
    if (l->ac != ac) return;
    if (status != REDIS_OK) { /* hiredis frees the context after this */
        char why[160];
        snprintf(why, sizeof why, "connect: %s", ac->errstr);
        link_down(l, why);
        return;
    }
    l->state = RD_HANDSHAKE;
    l->deadline_us = now_us(l) + (uint64_t)cr_of(l)->cfg->connect_timeout_ms * 1000;
    send_handshake(l);
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    rd_link *l = ac->data;
    (void)status;
    if (l->ac != ac) return; /* our own drop: handled there */
    char why[160];
    snprintf(why, sizeof why, "connection lost: %s", ac->err ? ac->errstr : "closed by the server");
    link_down(l, why);
}

void rd_link_connect(rd_link *l) {
    coordredis *cr = cr_of(l);
    const rd_url *u = &cr->url;
    redisAsyncContext *ac = u->is_unix ? redisAsyncConnectUnix(u->path)
                                       : redisAsyncConnect(u->ip, u->port);
    if (!ac || ac->err) {
        char why[160];
        snprintf(why, sizeof why, "connect: %s", ac ? ac->errstr : "out of memory");
        if (ac) redisAsyncFree(ac);
        link_down(l, why);
        return;
    }
    ac->data = l;
    if (redisLibuvAttach(ac, cr->h->worker_uv_loop(l->wk->w)) != REDIS_OK) {
        redisAsyncFree(ac);
        link_down(l, "cannot watch the socket on the loop");
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    /* 0.14.1 watches the socket for writing only once a command is queued:
     * ask now, so a refused or completed connect is seen at once */
    ac->ev.addWrite(ac->ev.data);
    l->ac = ac;
    l->state = RD_CONNECTING;
    l->deadline_us = now_us(l) + (uint64_t)cr->cfg->connect_timeout_ms * 1000;
}

/* A refused connect shows as POLLERR, which libuv hands the adapter as an
 * error status that it ignores (and the poll stops): ask the socket. */
static int connect_refused(const rd_link *l, char *why, size_t cap) {
    int err = 0;
    socklen_t n = sizeof err;
    if (getsockopt(l->ac->c.fd, SOL_SOCKET, SO_ERROR, &err, &n) != 0 || err == 0 ||
        err == EINPROGRESS)
        return 0;
    snprintf(why, cap, "connect: %s", strerror(err));
    return 1;
}

void rd_link_tick(rd_link *l, uint64_t now) {
    char why[160];
    if (l->wk->stopping) return;
    if (l->state == RD_CONNECTING && connect_refused(l, why, sizeof why)) {
        struct redisAsyncContext *ac = l->ac;
        l->ac = NULL;
        redisAsyncFree(ac);
        link_down(l, why);
    } else if ((l->state == RD_CONNECTING || l->state == RD_HANDSHAKE) && now >= l->deadline_us) {
        struct redisAsyncContext *ac = l->ac;
        l->ac = NULL;
        redisAsyncFree(ac);
        link_down(l, "no connection within connect_timeout_ms");
    } else if (l->state == RD_DOWN && now >= l->deadline_us) {
        rd_link_connect(l);
    }
}
