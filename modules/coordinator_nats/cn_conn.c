/* coordinator_nats: the one connection of an instance.
 *
 * A plain nats.c connection (its own reader and flusher threads), not the
 * libuv adapter: the adapter needs a connection per loop, connected by a
 * blocking call on that loop, and saves only the reader thread; its
 * subscription callbacks still run on nats.c threads, and every KV call
 * still has to leave the loop. One connection carries the KV requests (from
 * the KV thread) and core NATS pub/sub for every loop.
 *
 * It never gives up: a connect that fails at start is retried in the
 * background, and a lost server is reconnected with exponential backoff
 * between reconnect_min_ms and reconnect_max_ms (with jitter). While it is
 * down, `connected` is 0 and ops answer MCPG_EUNAVAIL without a request. */
#include "cn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void on_connected(natsConnection *nc, void *closure) {
    cn *c = closure;
    (void)nc;
    atomic_store(&c->connected, 1);
    c->h->log(c->self, MCPG_LOG_INFO, "connected to %s", c->cfg->url);
}

static void on_disconnected(natsConnection *nc, void *closure) {
    cn *c = closure;
    (void)nc;
    if (atomic_exchange(&c->connected, 0) && !atomic_load(&c->closing))
        c->h->log(c->self, MCPG_LOG_WARN, "lost the NATS server: ops answer unavailable "
                                         "until it is back");
}

static void on_reconnected(natsConnection *nc, void *closure) {
    cn *c = closure;
    (void)nc;
    cn_kv_unverified(c); /* before ops may run again */
    atomic_store(&c->connected, 1);
    c->h->log(c->self, MCPG_LOG_INFO, "reconnected to the NATS server");
}

/* The connection's last callback: nats.c calls its handlers from its own
 * thread, in order, also after natsConnection_Close returned, so the
 * instance waits for this one before its memory may go. */
static void on_closed(natsConnection *nc, void *closure) {
    cn *c = closure;
    (void)nc;
    atomic_store(&c->conn_closed, 1);
}

/* Exponential backoff: min x 2^attempts, capped at max, plus up to 1/4 jitter
 * so a fleet does not reconnect in step. */
static int64_t reconnect_delay(natsConnection *nc, int attempts, void *closure) {
    cn *c = closure;
    (void)nc;
    int64_t lo = c->cfg->reconnect_min_ms, hi = c->cfg->reconnect_max_ms;
    int64_t d = lo;
    for (int i = 1; i < attempts && d < hi; i++) d *= 2;
    if (d > hi) d = hi;
    return d + (int64_t)(c->h->mono_us() % (uint64_t)(d / 4 + 1));
}

static const char *env_or_null(const char *name) {
    return name && *name ? getenv(name) : NULL;
}

static natsStatus set_credentials(cn *c) {
    const char *user = env_or_null(c->cfg->user_env);
    const char *pass = env_or_null(c->cfg->password_env);
    const char *token = env_or_null(c->cfg->token_env);
    natsStatus s = NATS_OK;
    if (user) s = natsOptions_SetUserInfo(c->opts, user, pass ? pass : "");
    if (s == NATS_OK && token) s = natsOptions_SetToken(c->opts, token);
    return s;
}

/* "nats://a:4222,nats://b:4222": every server, for connecting and failing over. */
static natsStatus set_servers(natsOptions *o, const char *urls) {
    char *copy = strdup(urls);
    const char *list[16];
    int n = 0;
    if (!copy) return NATS_NO_MEMORY;
    for (char *save = NULL, *t = strtok_r(copy, ", ", &save); t && n < 16;
         t = strtok_r(NULL, ", ", &save))
        list[n++] = t;
    natsStatus s = n ? natsOptions_SetServers(o, list, n) : NATS_INVALID_ARG;
    free(copy);
    return s;
}

static natsStatus set_options(cn *c) {
    const cn_cfg *cfg = c->cfg;
    natsOptions *o = c->opts;
    natsStatus s = set_servers(o, cfg->url);
    if (s == NATS_OK) s = natsOptions_SetTimeout(o, cfg->op_timeout_ms);
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(o, -1);
    if (s == NATS_OK) s = natsOptions_SetCustomReconnectDelay(o, reconnect_delay, c);
    if (s == NATS_OK) s = natsOptions_SetRetryOnFailedConnect(o, true, on_connected, c);
    if (s == NATS_OK) s = natsOptions_SetDisconnectedCB(o, on_disconnected, c);
    if (s == NATS_OK) s = natsOptions_SetReconnectedCB(o, on_reconnected, c);
    if (s == NATS_OK) s = natsOptions_SetClosedCB(o, on_closed, c);
    /* every subscription's messages through one library thread, not one each */
    if (s == NATS_OK) s = natsOptions_UseGlobalMessageDelivery(o, true);
    /* a server that stops answering (not only one that closes) is noticed */
    if (s == NATS_OK) s = natsOptions_SetPingInterval(o, 5000);
    if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(o, 2);
    if (s == NATS_OK) s = set_credentials(c);
    return s;
}

/* Start the connection; 0 also while the server is not there yet (it is
 * retried), < 0 when nats.c refuses the options. */
int cn_conn_open(cn *c) {
    natsStatus s = natsOptions_Create(&c->opts);
    if (s == NATS_OK) s = set_options(c);
    if (s == NATS_OK) {
        s = natsConnection_Connect(&c->nc, c->opts);
        if (s == NATS_OK) atomic_store(&c->connected, 1);
        if (s == NATS_NOT_YET_CONNECTED) {
            c->h->log(c->self, MCPG_LOG_WARN,
                      "NATS at %s not reachable yet: retrying in the background; ops answer "
                      "unavailable until then", c->cfg->url);
            s = NATS_OK;
        }
    }
    jsOptions jo;
    if (s == NATS_OK) s = jsOptions_Init(&jo);
    if (s == NATS_OK) {
        jo.Wait = c->cfg->op_timeout_ms;
        s = natsConnection_JetStream(&c->js, c->nc, &jo);
    }
    if (s != NATS_OK) {
        c->h->log(c->self, MCPG_LOG_ERROR, "cannot set up the NATS connection to %s: %s",
                  c->cfg->url, natsStatus_GetText(s));
        return MCPG_ECONFIG;
    }
    return 0;
}

void cn_conn_close(cn *c) {
    if (c->kv) kvStore_Destroy(c->kv);
    if (c->js) jsCtx_Destroy(c->js);
    atomic_store(&c->closing, 1);
    if (c->nc) {
        natsConnection_Close(c->nc);
        for (int i = 0; i < 500 && !atomic_load(&c->conn_closed); i++) usleep(10000);
        if (!atomic_load(&c->conn_closed))
            c->h->log(c->self, MCPG_LOG_WARN, "the NATS connection did not report closed in 5 s");
        natsConnection_Destroy(c->nc);
    }
    if (c->opts) natsOptions_Destroy(c->opts);
    c->kv = NULL, c->js = NULL, c->nc = NULL, c->opts = NULL;
}

/* ---- the server's version, from its INFO line ----------------------------------
 * nats.c does not expose it, and the replicated-bucket decision depends on it
 * (see cn_kv_bind): one short TCP connection reads the greeting. */

static int split_host_port(const char *url, char *host, size_t hcap, char *port, size_t pcap) {
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *at = strchr(p, '@');
    const char *comma = strchr(p, ',');
    if (at && (!comma || at < comma)) p = at + 1;
    size_t n = strcspn(p, ",/");
    const char *colon = memchr(p, ':', n);
    size_t hn = colon ? (size_t)(colon - p) : n;
    if (hn == 0 || hn >= hcap) return -1;
    memcpy(host, p, hn);
    host[hn] = '\0';
    snprintf(port, pcap, "%.*s", colon ? (int)(n - hn - 1) : 4, colon ? colon + 1 : "4222");
    return 0;
}

static int connect_with_timeout(const char *host, const char *port, int64_t timeout_ms) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai) return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

static int read_info(int fd, int64_t timeout_ms, char *buf, size_t cap) {
    size_t n = 0;
    while (n + 1 < cap && !memchr(buf, '\n', n)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)timeout_ms) <= 0) return -1;
        ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
        if (r <= 0) return -1;
        n += (size_t)r;
        buf[n] = '\0';
    }
    return n ? 0 : -1;
}

/* 0 with v = {major, minor, patch} of the first server in url. */
int cn_server_version(const char *url, int64_t timeout_ms, int v[3]) {
    char host[256], port[16], buf[4096] = "";
    if (split_host_port(url, host, sizeof host, port, sizeof port)) return -1;
    int fd = connect_with_timeout(host, port, timeout_ms);
    if (fd < 0) return -1;
    int rc = read_info(fd, timeout_ms, buf, sizeof buf);
    close(fd);
    const char *p = rc == 0 ? strstr(buf, "\"version\":\"") : NULL;
    if (!p || sscanf(p + 11, "%d.%d.%d", &v[0], &v[1], &v[2]) != 3) return -1;
    return 0;
}
