/* transport_http: legacy-wire sessions (2025-11-25: Mcp-Session-Id).
 *
 * The store is a small interface so that a fleet store (the gateway's
 * coordinator, host->coordinator) can replace the in-process table without
 * touching the wire code. This file is the single-node table: one per
 * instance, shared by the loops under a mutex (every operation is a few
 * comparisons and copies; nothing blocks while it is held).
 *
 * A session row: id (128 random bits from getrandom, hex), the negotiated
 * protocol version, the client's capabilities (JSON), the logging level,
 * its resource subscriptions, whether a GET stream is open, created and
 * last-used times. A row unused for ttl_ms is swept; the table holds at
 * most max rows (a new session beyond that: 503). */
#ifndef TH_SESSION_H
#define TH_SESSION_H

#include <mcpg/abi.h>

#include "mcp_stateless.h"
#include <pthread.h>
#include <stdint.h>

#define TH_SID_LEN 32        /* hex characters */
#define TH_SESS_MAX_SUBS 64  /* resource subscriptions per session */
#define TH_SESS_CAPS_MAX 8192

typedef struct th_sess_row {
    char id[TH_SID_LEN + 1];
    char version[16];
    char *caps;              /* JSON object text, or NULL */
    size_t caps_len;
    int level;               /* logging/setLevel: index in th_log_levels, -1 = not set */
    int get_open;            /* a standalone GET stream is open */
    uint32_t nsubs;
    char *subs[TH_SESS_MAX_SUBS];
    uint64_t created_ms, used_ms;
} th_sess_row;

typedef struct th_sess_store {
    const mcpg_host *host;
    pthread_mutex_t mu;
    th_sess_row **rows;
    uint32_t n, max;
    uint64_t ttl_ms;
} th_sess_store;

/* What a request needs of its session, copied out under the lock. */
typedef struct th_sess_view {
    char id[TH_SID_LEN + 1];
    char version[16];
    int level;
} th_sess_view;

int th_sess_init(th_sess_store *s, const mcpg_host *h, uint32_t max, uint64_t ttl_ms);
void th_sess_fini(th_sess_store *s);

/* A new session: 0 (id_out filled), MCPG_EAGAIN (the table is full),
 * MCPG_EIO (no randomness), MCPG_ENOMEM. */
int th_sess_create(th_sess_store *s, const char *version, const char *caps, size_t caps_len,
                   char id_out[TH_SID_LEN + 1]);
/* Look up and refresh its TTL: 0 (view filled), MCPG_ENOENT. */
int th_sess_touch(th_sess_store *s, const char *id, size_t n, th_sess_view *view);
/* The client's capabilities, copied into b: 0, MCPG_ENOENT. */
int th_sess_caps(th_sess_store *s, const char *id, size_t n, mcpg_buf *b);
int th_sess_end(th_sess_store *s, const char *id, size_t n);
int th_sess_set_level(th_sess_store *s, const char *id, size_t n, int level);
/* 1 subscribed now / 0 already / MCPG_ENOENT / MCPG_EAGAIN (too many). */
int th_sess_subscribe(th_sess_store *s, const char *id, size_t n, const char *uri, size_t un, int on);
int th_sess_subscribed(th_sess_store *s, const char *id, size_t n, const char *uri, size_t un);
/* The GET stream slot: 0 taken, MCPG_EEXIST (one is open), MCPG_ENOENT. */
int th_sess_get_open(th_sess_store *s, const char *id, size_t n, int open);
/* Drop rows unused for ttl_ms. */
void th_sess_sweep(th_sess_store *s, uint64_t now_ms);


#endif
