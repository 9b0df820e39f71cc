/* coordinator_redis: what its files share. Everything here lives on one
 * worker's loop thread (its connection, its ops, its timer), except the
 * instance's read-only settings and the pub/sub registry (thread-safe). */
#ifndef RD_INTERNAL_H
#define RD_INTERNAL_H

#include <mcpg/sdk.h>

#include <stdatomic.h>
#include <stdint.h>

#include "rd_scripts.h"
#include "rd_url.h"

struct redisAsyncContext;
struct cm_pubsub;

typedef struct rd_cfg {
    const char *url, *password, *password_env, *key_prefix, *tls;
    int64_t connect_timeout_ms, op_timeout_ms, reconnect_min_ms, reconnect_max_ms;
    int64_t max_in_flight, scan_count, max_key_bytes, max_value_bytes, max_scan_keys;
    int64_t max_subscriptions, subscriber_backlog, max_message_bytes;
} rd_cfg;

typedef enum rd_state { RD_DOWN, RD_CONNECTING, RD_HANDSHAKE, RD_READY } rd_state;
typedef enum rd_role { RD_LINK_DATA, RD_LINK_PUBSUB } rd_role;

typedef struct rd_worker rd_worker;
typedef struct coordredis coordredis;

/* One connection to Redis and its life: connect, handshake (AUTH, SELECT,
 * SCRIPT LOAD or PSUBSCRIBE), ready, dropped, a backoff, again. */
typedef struct rd_link {
    rd_worker *wk;
    rd_role role;
    struct redisAsyncContext *ac;
    rd_state state;
    uint64_t deadline_us; /* connecting/handshake: give up then; down: next attempt then */
    uint64_t backoff_ms;
    unsigned failures;    /* attempts failed since the link was last ready */
    int handshake_left;
    int timed_out;        /* the drop was ours (an op past op_timeout_ms) */
    char sha[RD_S_COUNT][41];
} rd_link;

typedef struct rd_op rd_op;

struct rd_worker {
    coordredis *cr;
    mcpg_worker *w;
    uint32_t index;
    rd_link data;
    rd_link pubsub; /* worker 0 only */
    mcpg_timer *tick;
    rd_op *head, *tail; /* ops in the order they were made, until answered */
    rd_op *scans;       /* scans in flight (answered when their last step is) */
    size_t sent;        /* ops whose command is at Redis */
    mcpg_post drain;
    int drain_posted;
    int stopping;
    rd_op *free;
    size_t nfree;
};

struct coordredis {
    const mcpg_host *h;
    mcpg_instance *self;
    const rd_cfg *cfg;
    rd_url url;
    char password[RD_SECRET_MAX];
    char *rev_key, *key_head, *msg_head, *msg_pattern; /* <prefix>rev, <prefix>k:, <prefix>m: */
    size_t rev_len, key_head_len, msg_head_len;
    struct cm_pubsub *ps;
    rd_worker *workers;
    uint32_t nworkers;
    atomic_ulong drops, noscript, messages_in;
};

/* ---- rd_link.c ---- */
void rd_link_init(rd_link *l, rd_worker *wk, rd_role role);
void rd_link_connect(rd_link *l);
/* The timer's look at a link: deadlines passed, a reconnect due. */
void rd_link_tick(rd_link *l, uint64_t now_us);
/* Drop the connection now: commands waiting get a NULL reply (their ops
 * answer MCPG_ETIMEDOUT when timed_out, else MCPG_EUNAVAIL); unless the
 * worker stops, a reconnect follows after the backoff. */
void rd_link_drop(rd_link *l, int timed_out);
/* 0 when the command is queued on a ready link; its callback then runs
 * exactly once, later, on the loop (a NULL reply when the link drops). */
int rd_link_send(rd_link *l, void (*fn)(struct redisAsyncContext *, void *, void *),
                 void *priv, int argc, const char **argv, const size_t *lens);
uint64_t rd_tick_ms(const rd_cfg *cfg);

/* ---- coordinator_redis.c: what the pub/sub link hands over ---- */
void rd_message_in(coordredis *cr, const char *channel, size_t clen, const char *data,
                   size_t dlen);

#endif
