/* transport_http: replay buffers for the legacy wire's POST streams
 * (2025-11-25 resumability: Last-Event-ID).
 *
 * A legacy call answered as a stream gets a number on its loop; its events
 * carry ids "<worker>_<stream>_<seq>" (seq 0 is the priming event) and every
 * event after the priming one is kept in the stream's buffer, in memory on
 * the loop that runs the call. A client that drops the stream does not
 * cancel the call while its session lives: the request is kept without a
 * connection ("orphan"), the call's remaining messages and its result go to
 * the buffer, and a GET with Last-Event-ID (on this loop, or moved here by
 * resume.c) replays what followed that id and then continues live.
 *
 * Bounds, and what happens at each: a stream keeps at most TH_REPLAY_EVENTS
 * events and TH_REPLAY_STREAM_BYTES bytes (past either, its oldest events
 * are dropped: a client resuming from before them gets the oldest kept
 * first); a session keeps at most TH_REPLAY_DONE_PER_SESSION finished
 * streams on a loop (the oldest finished one goes); a loop keeps at most
 * TH_REPLAY_LOOP_BYTES in all (the oldest finished streams go first, then
 * the oldest events of the stream being written). Buffers go with their
 * session (DELETE, expiry). */
#ifndef TH_REPLAY_H
#define TH_REPLAY_H

#include "wire/wire.h"

#define TH_REPLAY_EVENTS 256
#define TH_REPLAY_STREAM_BYTES (1024 * 1024)
#define TH_REPLAY_DONE_PER_SESSION 16
#define TH_REPLAY_LOOP_BYTES (64 * 1024 * 1024)

typedef struct th_revent {
    struct th_revent *next;
    uint32_t seq;
    uint32_t len;
    char text[]; /* the SSE event, as sent */
} th_revent;

struct th_rstream {
    th_rstream *hnext;          /* the loop's table, by number */
    th_rstream *snext;          /* its session's list on this loop */
    th_rstream *aprev, *anext;  /* the loop's list, oldest first */
    th_cached_session *sess;
    uint32_t no;
    uint32_t seq;               /* the next event's number */
    th_revent *head, *tail;
    uint32_t nev;
    size_t bytes;
    th_req *caller;             /* the request whose call feeds it, until the call ends */
    th_req *client;             /* the request showing it to a client now, or NULL */
    uint8_t done;               /* the result is in */
    uint8_t standalone;         /* a session's GET stream: news, never done */
    th_req *live;               /* standalone: the GET that opened it, while it is open */
    th_rstream *nprev, *nnext;  /* standalone: the loop's list of them */
    uint8_t remote;             /* shown by another replica now (relay.h): */
    uint32_t r_replica, r_worker; /* ... the loop asking ... */
    uint64_t r_ticket;          /* ... its name for this showing ... */
    uint32_t r_sent;            /* ... events sent to it ... */
    uint64_t r_last_ms;         /* ... and when the last message went (heartbeats) */
};

/* A stream for r's call (r->rs), registered under a new number; its
 * session is e. NULL when out of memory (the answer is then not resumable). */
th_rstream *th_replay_open(th_worker_state *ws, th_req *r, th_cached_session *e);
th_rstream *th_replay_find(th_worker_state *ws, uint32_t no);
/* The standalone stream of e on this loop, opened by the GET r (it stays
 * r's listener, and is rs->live while open): news for the session are kept
 * in it, also while no GET shows it, until the session ends, so a GET with
 * Last-Event-ID (on any replica) gets what it missed. A previous one of e
 * here goes: a GET without Last-Event-ID starts over. NULL when out of memory. */
th_rstream *th_replay_open_news(th_worker_state *ws, th_req *r, th_cached_session *e);
/* The GET r showing its session's standalone stream live went. */
void th_replay_news_closed(th_worker_state *ws, th_req *r);
/* Format one event of rs (the next id), keep it, and send it to the client
 * if one is attached. 0, or MCPG_ENOMEM. */
int th_replay_event(th_worker_state *ws, th_rstream *rs, const char *json, size_t n);
/* The call's result: the last event; the client's stream (if any) ends. */
void th_replay_finish(th_worker_state *ws, th_rstream *rs, const char *json, size_t n);
/* May rs (NULL: no such stream) be shown to a GET of session sid resuming
 * after event `after`? 0; 400 when it names no stream of that session that
 * can be resumed (or an event not yet sent); 409 when it is shown already,
 * here or by another replica. For a local GET (resume.c) and a relayed one
 * (relay.c) alike. */
int th_replay_showable(const th_rstream *rs, const char *sid, size_t sn, uint32_t after);
/* Show rs to r (a GET with Last-Event-ID `after`): its head, the events
 * after that id, then live ones. */
void th_replay_attach(th_worker_state *ws, th_rstream *rs, th_req *r, uint32_t after);
/* c is closing: its streams' calls carry on without it (see above). */
void th_replay_conn_closing(th_conn *c);
/* r's call completed without a connection: off the loop's orphan list. */
void th_replay_orphan_remove(th_worker_state *ws, th_req *r);
/* The session ended: its streams go (a call still running is cancelled). */
void th_replay_session_end(th_worker_state *ws, th_cached_session *e);
/* Does e have a stream here with a call running or a client attached? */
int th_replay_session_live(const th_cached_session *e);
/* At destroy: memory only. */
void th_replay_free_all(th_worker_state *ws);

#endif
