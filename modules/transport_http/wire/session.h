/* transport_http: legacy-wire sessions (2025-11-25: Mcp-Session-Id) on the
 * gateway's coordinator (host->coordinator, kinds.h).
 *
 * The row of a session lives in the coordinator under
 * "mcpg.session.<id>" with the session TTL: JSON text
 * {"v":version,"l":level,"g":0|1,"s":[uris],"c":{capabilities},"o":owner,
 * "sv":server} ("g": a standalone GET stream is open somewhere; "sv": the
 * virtual server it was initialized on, left out for the gateway's own /mcp,
 * so a row written before virtual servers is a session of /mcp). Every write replaces the whole
 * row with compare-and-set on the revision the writer read, so two loops
 * changing one session never lose a change (a conflict re-reads and
 * re-applies). "mcpg.session.count" counts open sessions (incr; the cap).
 *
 * Each loop keeps a cache of the sessions it has seen (a hash table by id),
 * so a request on a known session costs no coordinator round trip. A cached
 * row is trusted until `valid_ms`: a row this loop wrote is valid for the
 * TTL it set, a row it read for TTL/8 (its remaining TTL is unknown). A
 * request on a session past that waits for one renewal (compare-and-set of
 * the same row, which also renews the TTL); a request more than TTL/8 after
 * the last renewal renews it without waiting.
 *
 * Subjects (every loop subscribes in worker_start):
 *   mcpg.session.end     <id>            the session ended: drop it, end its streams
 *   mcpg.session.changed <id>            its row changed: re-read before trusting it
 *   mcpg.session.cancel  <id> <req id>   notifications/cancelled for a call on any loop
 *
 * The loop that created a session ("owner") counts its end exactly once:
 * at the end message, or when its sweep finds the row gone (expired). A
 * session created by an instance that has since gone (a reload) is not
 * uncounted when it expires: the coordinator_memory of a reload is new too.
 *
 * Every coordinator answer comes later on the calling loop (never inside
 * the op): a request that needs one is parked (state INFLIGHT, counted in
 * its connection's inflight so the connection outlives the answer) and
 * resumed by th_legacy_again. */
#ifndef TH_SESSION_H
#define TH_SESSION_H

#include <mcpg/abi.h>
#include <stdint.h>

#include "http/header.h"
#include "wire/mcp_stateless.h"

#define TH_SID_LEN 32        /* hex characters */
#define TH_SESS_MAX_SUBS 64  /* resource subscriptions per session */
#define TH_SESS_CAPS_MAX 8192
#define TH_SESS_ROW_MAX (TH_SESS_CAPS_MAX + TH_SESS_MAX_SUBS * 1100 + 256)

typedef struct th_worker_state th_worker_state;
typedef struct th_req th_req;
typedef struct th_rstream th_rstream;

/* A session as this loop knows it. */
typedef struct th_cached_session {
    struct th_cached_session *hnext; /* the loop's table */
    char sid[TH_SID_LEN + 1];
    char version[16];
    char server[TH_SERVER_NAME_MAX + 1]; /* "sv": its virtual server, "" for /mcp */
    int8_t level;            /* logging/setLevel, -1 = not set */
    uint8_t get_open;        /* "g" of the row */
    uint8_t owned;           /* created on this loop: it counts the end */
    uint8_t renewing;        /* a renewal is in flight */
    uint8_t checking;        /* the sweep's existence check is in flight */
    uint32_t nget;           /* standalone GET streams of it on this loop */
    mcpg_buf row;            /* the row as stored */
    uint32_t caps_off, caps_len, subs_off, subs_len; /* spans in row */
    uint32_t owner_off, owner_len; /* the owner's JSON string, quotes included, in row; 0: none */
    uint64_t revision;
    uint64_t valid_ms;       /* loop time until which the cached row is trusted */
    uint64_t renewed_ms;     /* loop time of the last write or renewal seen */
    uint64_t used_ms;        /* loop time of the last request on this loop */
    th_rstream *streams;     /* its replay buffers on this loop (replay.h) */
    th_rstream *news;        /* ... of which its standalone stream's, or NULL */
} th_cached_session;

/* The loop's cache of these is th_scache (http/http.h: the worker state holds it). */

/* Subscribe the loop to the subjects; MCPG_EUNAVAIL without a coordinator. */
int th_sess_worker_start(th_worker_state *ws);
void th_sess_worker_stop(th_worker_state *ws);
void th_sess_cache_free(th_worker_state *ws);

/* The cached session if it may be used now without asking (renewing it in
 * the background when due); NULL: unknown here or stale. */
th_cached_session *th_sess_cached(th_worker_state *ws, const char *sid, size_t n);
/* The cached entry whatever its age (streams, news), or NULL. */
th_cached_session *th_sess_peek(th_worker_state *ws, const char *sid, size_t n);

/* The asynchronous steps. Each parks r (th_legacy_park) and later resumes it
 * through th_legacy_again with r->session_op_status set (0 or an MCPG_E*), unless it
 * returns < 0 (nothing parked; the status is the answer). */
/* A new session (r->version, r->server, caps), bound to owner (host->call_owner's
 * text of the caller who opened it): r->sid is set on success; MCPG_EAGAIN:
 * max_sessions reached. */
int th_sess_create(th_worker_state *ws, th_req *r, const char *caps, size_t caps_len, const char *owner,
                   size_t owner_len);
/* The owner a session was bound to, decoded into out: 0, or MCPG_ENOENT for
 * a row that names none. */
int th_sess_owner(th_worker_state *ws, const th_cached_session *e, mcpg_buf *out);
/* Make the session known or fresh here; MCPG_ENOENT when it is gone. */
int th_sess_load(th_worker_state *ws, th_req *r, const char *sid, size_t n);

typedef enum th_sess_change_kind {
    TH_SC_LEVEL,        /* arg: the level */
    TH_SC_SUBSCRIBE,    /* uri; status 1 when it was not subscribed before */
    TH_SC_UNSUBSCRIBE,  /* uri; status 1 when it was */
    TH_SC_GET_OPEN,     /* MCPG_EEXIST when one is open */
    TH_SC_GET_CLOSED
} th_sess_change_kind;
/* Change the row (compare-and-set; re-read and re-applied on a conflict),
 * then tell the other loops. r may be NULL (nobody waits: a GET stream's
 * end). Returns 1 parked (r->session_op_status: 1 changed, 0 already so, < 0
 * refused: MCPG_EEXIST a GET stream is open, MCPG_EAGAIN too many
 * subscriptions, MCPG_ENOENT gone), 0 already so (nothing parked), < 0
 * refused at once (nothing parked). */
int th_sess_change(th_worker_state *ws, th_req *r, const char *sid, th_sess_change_kind k, int level,
                   const char *uri, size_t un);
/* DELETE: remove the row and tell every loop (0, MCPG_ENOENT). */
int th_sess_delete(th_worker_state *ws, th_req *r, const char *sid);
/* notifications/cancelled on a session: every loop cancels its call with that id. */
void th_sess_cancel(th_worker_state *ws, const char *sid, const char *id, size_t idn);

/* Is uri among the session's subscriptions (the cached row)? */
int th_sess_subscribed(th_worker_state *ws, const th_cached_session *e, const char *uri, size_t un);

/* The sweep: renew sessions with streams here, check idle owned ones,
 * forget idle others. */
void th_sess_sweep(th_worker_state *ws, uint64_t now_ms);

#endif
