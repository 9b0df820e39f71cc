/* events: the MCP Events pipeline (docs/events.md).
 *
 * The parts, one file each:
 *   inbound.c   POST /webhooks/events/{source}: verify, then an inbox row in
 *               the coordinator (the posts a loop holds share one counter
 *               step), 202 once the store has it; the rows go to the owner
 *               in one message per step;
 *   owner.c     one replica under a lease admits inbox rows into the log, in
 *               order, emptying copies of an event id: the log is the
 *               inbox's admitted rows, nothing is copied;
 *   reader.c    each replica takes each new log row once (from the owner's
 *               message, else from the store) into a cache its loops share;
 *   readers.c   events/list, events/poll, events/stream from that cache;
 *   subscribe.c events/subscribe, events/unsubscribe (a subscription is a key
 *               in the coordinator), and the webhook POSTs, by the lease
 *               holder from its cache.
 *
 * Store layout (keys under the coordinator's own prefix):
 *   mcpg.ev.in.seq        the inbox's last reserved slot (incr)
 *   mcpg.ev.in.<n>        slot n: "<id key>\n<occurrence>" ({"eventId","name",
 *                         "timestamp","data"}); "" a hole (a copy, a slot given up);
 *                         log row n once the head has passed it; TTL retention_ms
 *   mcpg.ev.head          "<last admitted slot> <the same>" (compare-and-set)
 *   mcpg.ev.id.<source>.<sha256 of the id>  the slot that first carried it (TTL dedup_ms)
 *   mcpg.ev.lease         the owner's replica id (put_if_absent + TTL, renewed by CAS)
 *   mcpg.ev.sub.<id>      a webhook subscription (subscribe.c), TTL its grant
 *   mcpg.ev.subpos.<id>   the log row its delivery has reached (the lease holder writes it)
 * Subjects: mcpg.ev.inbox (a step's stored rows, for the owner),
 * mcpg.ev.head (the head and the batch's events, for every replica),
 * mcpg.ev.subs (a subscription added, refreshed or removed: the delivering
 * replica looks). */
#ifndef EVENTS_H
#define EVENTS_H

#include <mcpg/sdk.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define EV_KEY_IN_SEQ "mcpg.ev.in.seq"
#define EV_KEY_IN "mcpg.ev.in."
#define EV_KEY_HEAD "mcpg.ev.head"
#define EV_KEY_ID "mcpg.ev.id."
#define EV_KEY_LEASE "mcpg.ev.lease"
#define EV_SUBJ_INBOX "mcpg.ev.inbox"
#define EV_SUBJ_HEAD "mcpg.ev.head"
#define EV_KEY_SUB "mcpg.ev.sub."
#define EV_KEY_SUBPOS "mcpg.ev.subpos."
#define EV_SUBJ_SUBS "mcpg.ev.subs"

#define EV_MAX_BODY 65536   /* a larger post is 413 */
#define EV_NAME_MAX 128     /* an event type's name */
#define EV_ID_MAX 256       /* an event id */
#define EV_MAX_LOOPS 64
#define EV_SUB_ID "io.modelcontextprotocol/subscriptionId"

typedef struct ev_cfg {
    const char *types;   /* JSON */
    const char *sources; /* JSON */
    int64_t inbox_max_rows, retention_ms, dedup_ms, heartbeat_ms, poll_interval_ms;
    int64_t lease_ms, cache_rows, max_streams, batch_rows;
    int allow_http_callbacks;                 /* subscribe.c */
    int allow_anonymous_subscriptions;        /* subscribe.c */
    int64_t subscription_max_ttl_ms, subscriptions_max;
    int64_t subscriptions_per_principal;      /* subscribe.c */
    const char *callback_ca_file;             /* NULL: the system's authorities */
    const char *callback_allow;               /* JSON array (events.c parses it) */
} ev_cfg;

typedef struct ev_type {
    char *name;
    char *entry; /* its events/list entry, JSON */
} ev_type;

typedef struct ev_source {
    char *name;
    unsigned char key[64];
    size_t key_len;      /* 0: its secret is unset, the source is off */
    uint32_t *types;     /* indexes into types it may post */
    size_t n_types;
} ev_source;

/* One log row as every reader of the replica sees it: immutable once in the
 * cache, freed by its last reference. */
typedef struct ev_row {
    atomic_int refs;
    uint32_t type;        /* index into types */
    uint64_t seq;         /* its place in the log: the cursor after it */
    size_t len;
    char json[];          /* {"eventId",...,"data":{...},"cursor":"<seq>" (no closing brace) */
} ev_row;

/* The log rows this replica keeps, [first, next): loop 0 appends, every
 * loop reads (pointers copied under the lock, rows referenced). */
typedef struct ev_cache {
    pthread_mutex_t lock;
    ev_row **ring;
    size_t cap;
    uint64_t first, next; /* next - 1: the last row read; 0 rows at start: first == next */
} ev_cache;

typedef struct ev_post ev_post;   /* inbound.c */
typedef struct ev_stream ev_stream; /* readers.c */

/* What the module keeps per loop. */
typedef struct ev_loop {
    struct events *ev;
    mcpg_worker *w;
    uint32_t index;
    /* inbound: posts waiting for an inbox slot, and whether a counter step is out */
    ev_post *waiting_head, *waiting_tail;
    size_t n_waiting;
    bool reserving;
    /* readers: this loop's open streams */
    ev_stream *streams;
    size_t n_streams;
    mcpg_timer *heartbeat;
    mcpg_buf scratch;         /* one notification's params, built on this loop */
    size_t n_lagging;         /* streams whose client reads slower than it is told */
    mcpg_post advance;        /* "the cache grew": posted by loop 0 */
    atomic_bool advance_posted;
    bool stopped;
} ev_loop;

typedef struct events {
    const mcpg_host *host;
    mcpg_instance *self;
    const ev_cfg *cfg;
    ev_type *types;
    size_t n_types;
    char **cb_allow;     /* callback_allow: names and CIDR blocks callbacks may reach */
    size_t n_cb_allow;
    ev_source *sources;
    size_t n_sources;
    char *list_json;          /* events/list's result */
    const mcpg_coordinator_ops *co;
    void *co_inst;
    char replica[24];         /* this process, as its lease says */
    uint32_t n_loops;
    ev_loop loops[EV_MAX_LOOPS];
    ev_cache cache;
    atomic_uint_fast64_t inbox_done; /* the last inbox slot moved, as last heard */
    atomic_uint_fast64_t inbox_tail; /* the last inbox slot reserved, as last heard */
    atomic_uint open_streams;
    atomic_uint_fast64_t head_seen; /* the newest log head the reader heard: "now" */
    atomic_bool reader_ready;      /* it has: readers may be served */
    struct ev_owner *owner;   /* owner.c, on loop 0 */
    struct ev_reader *reader; /* reader.c, on loop 0 */
    struct ev_subs *subs;     /* subscribe.c, on loop 0 */
    mcpg_metric *m_accepted, *m_refused, *m_moved, *m_delivered;
    mcpg_metric *m_hook_ok, *m_hook_failed; /* subscribe.c: webhook POSTs answered 2xx, not */
} events;

/* inbound.c */
mcpg_status ev_webhook(events *ev, mcpg_call *call, const char *source);
void ev_inbound_stop(ev_loop *l);

/* owner.c: on loop 0 */
int ev_owner_start(events *ev, ev_loop *l0);
void ev_owner_stop(events *ev);
void ev_owner_free(events *ev);
void ev_owner_nudge(events *ev); /* posts landed (any loop) */
bool ev_owner_holds(events *ev); /* this replica holds the lease (loop 0) */

/* reader.c: on loop 0 */
int ev_reader_start(events *ev, ev_loop *l0);
void ev_reader_stop(events *ev);
void ev_reader_free(events *ev);
/* Rows of the cache after `after`, at most max, referenced into out (the
 * caller drops them with ev_row_unref); *first_out the oldest kept row;
 * returns how many. */
size_t ev_cache_take(events *ev, uint64_t after, ev_row **out, size_t max, uint64_t *first_out,
                     uint64_t *next_out);
void ev_row_unref(const mcpg_host *h, ev_row *r);

/* readers.c */
mcpg_status ev_request(events *ev, mcpg_call *call);
void ev_cancel(events *ev, mcpg_call *call);
void ev_readers_loop_start(ev_loop *l);
void ev_readers_loop_stop(ev_loop *l);
void ev_readers_advance_all(events *ev); /* loop 0: the cache grew */

/* subscribe.c: events/subscribe, events/unsubscribe (any loop); webhook
 * deliveries by the lease holder (loop 0) */
mcpg_status ev_subscribe_request(events *ev, mcpg_call *call);
int ev_subs_start(events *ev, ev_loop *l0);
void ev_subs_stop(events *ev);
void ev_subs_free(events *ev);
void ev_subs_advance(events *ev); /* loop 0: the cache grew */

/* shared helpers (events.c) */
int ev_type_index(const events *ev, const char *name, size_t n); /* -1: none */
size_t ev_key_u64(char *out, size_t cap, const char *prefix, uint64_t n);
int ev_parse_u64(const char *p, size_t n, uint64_t *out);
/* mcpg.ev.head's value, "<last log row> <last inbox slot>": 0, or -1 when it is not two numbers */
int ev_parse_head(const char *p, size_t n, uint64_t *log, uint64_t *slot);
void ev_timestamp_now(const mcpg_host *h, char out[48]);
void ev_noop_cb(void *arg, int status, const mcpg_coord_value *v);

#endif
