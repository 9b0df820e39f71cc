/* transport_http's http layer: connections, their requests and the
 * per-worker state that holds them, and the calls the layers above make
 * into it.
 *
 * The layers call only down: routes/ -> wire/ -> http/. This layer calls up
 * through two doors alone: th_route (a complete request, routes/router.c)
 * and the instance's th_wire_hooks (the wires letting go of what they hold
 * when a connection, a request or a loop goes). The worker state and the
 * instance carry the upper layers' state too (one allocation per loop); the
 * few tables they embed by value are declared here, their code is above.
 *
 * Ownership and threads: an instance (th_mod) has one th_worker_state per
 * worker (its m->slots); that state, its connections (th_conn) and their
 * requests (th_req) are only ever touched on that worker's loop thread.
 * Nothing here is shared between loops, so nothing is locked.
 *
 * Lifetimes:
 *   - a request (th_req) lives from the first byte of its message until its
 *     response is in the connection's output buffer; it holds a copy of the
 *     request's URL, headers and body, because the kernel borrows them until
 *     the call completes and the read buffer is shared by the whole worker.
 *     Requests are recycled through a per-worker free list, with their
 *     buffers, so a warm worker allocates nothing per request.
 *   - a connection lives until its handle is closed AND every call it
 *     submitted has completed (a closed client cancels, the call still
 *     completes, and complete() needs the struct).
 */
#ifndef TH_HTTP_H
#define TH_HTTP_H

#include <llhttp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <mcpg/sdk.h>
#include <uv.h>

#include "http/header.h"
#include "http/hygiene.h"
#include "http/response.h"
#include "http/tls.h"

#define TH_READ_BUF (64 * 1024)          /* per worker, shared by its connections */
#define TH_MAX_PIPELINE 32               /* queued requests per connection before we stop reading */
#define TH_MAX_HEADERS 64                /* more header fields than this: 431 */
#define TH_OUT_HIGH_WATER (1024 * 1024)  /* unwritten response bytes before we stop reading */
#define TH_REQ_CACHE 256                 /* idle requests a worker keeps for reuse */
#define TH_REQ_KEEP_CAP (64 * 1024)      /* larger request buffers are freed, not cached */
#define TH_REQ_CACHE_FLOOR 16            /* idle requests kept beyond one per open connection */
#define TH_GIVE_BACK_MIN 64              /* connections gone (or requests freed) worth a trim */
#define TH_CONN_KEEP_CAP (256 * 1024)    /* larger output buffers are trimmed when idle */
#define TH_ALOG_FLUSH (64 * 1024)        /* access log bytes that force an early flush */
#define TH_LINGER_MS 2000                /* how long a closing connection drains unread input */
#define TH_REFUSED_LOG_MS 10000          /* at most one "cap reached" warning per loop this often */

/* The transport's config: the manifest's gateway.server object. */
typedef struct th_config {
    int unary_json_fast_path;
    const char *access_log;   /* JSON text: true, false or "auto" (th_alog_mode_parse) */
    int64_t max_body_bytes;
    int64_t max_header_bytes;
    int64_t idle_timeout_ms;
    int64_t header_timeout_ms;
    int64_t max_connections_per_worker;
    int64_t max_sessions;
    int64_t max_sessions_per_principal;
    int64_t session_ttl_ms;
    const char *allowed_hosts;   /* JSON array text, or NULL: the loopback default */
    const char *allowed_origins; /* JSON array text, or NULL: the loopback default */
    const char *admin_token_env; /* names the variable holding the admin token, or NULL */
    /* TLS (tls.h): on when tls_cert_file is set */
    const char *tls_cert_file;      /* PEM chain, the leaf first */
    const char *tls_key_file;       /* PEM private key */
    const char *tls_client_ca_file; /* PEM CA(s) client certificates must chain to */
    const char *tls_client_auth;    /* "none" | "optional" | "required" */
    const char *tls_min_version;    /* "1.2" | "1.3" */
    int64_t tls_handshake_timeout_ms;
    const char *oauth_protected_resource; /* JSON object text (RFC 9728), or NULL */
    const char *resource_webhooks; /* JSON object text (webhook.h), or NULL */
} th_config;

/* The headers the transport itself reads, found once while parsing. */
enum {
    TH_H_CONTENT_TYPE,
    TH_H_ACCEPT,
    TH_H_PROTOCOL_VERSION,
    TH_H_MCP_METHOD,
    TH_H_MCP_NAME,
    TH_H_EXPECT,
    TH_H_HOST,
    TH_H_ORIGIN,
    TH_H_SESSION_ID,
    TH_H_LAST_EVENT_ID,
    TH_H_AUTHORIZATION,
    TH_H_TRANSFER_ENCODING, /* only its presence is used (http_parse.c) */
    TH_H_COUNT
};

/* A header as offsets into th_req.data (names are stored lower-cased). */
typedef struct th_hdr {
    uint32_t name_off, name_len, value_off, value_len;
} th_hdr;

typedef enum th_req_state {
    TH_REQ_PARSING = 0,
    TH_REQ_INFLIGHT = 1, /* submitted to the kernel, complete() pending */
    TH_REQ_DONE = 2      /* response written (to conn->out or to resp) */
} th_req_state;

typedef struct th_conn th_conn;
typedef struct th_worker_state th_worker_state;
typedef struct th_mod th_mod;
typedef struct th_info th_info;       /* the gateway's serverInfo (wire/wire.h) */
typedef struct th_rstream th_rstream; /* a replay buffer (wire/replay.h) */
typedef struct th_relay th_relay;     /* another replica's stream (wire/relay.h) */
typedef struct th_cached_session th_cached_session; /* a session as a loop knows it (wire/session.h) */
typedef struct th_whsrc th_whsrc;     /* a resource webhook source (routes/webhook.h) */

/* The tables the worker state and the instance hold by value for the layers above. */
/* The loop's replay streams, by number (wire/replay.h). */
typedef struct th_rtable {
    th_rstream **b;
    uint32_t nb, n;
    th_rstream *oldest, *newest;
    size_t bytes;
    uint32_t nremote;   /* streams shown by another replica (relay.h) */
    th_rstream *news;   /* the sessions' standalone streams (wire/replay.h), a list */
} th_rtable;

/* The sessions a loop has seen (wire/session.h). */
typedef struct th_scache {
    th_cached_session **b;
    uint32_t nb, n;
} th_scache;

/* The resource webhook sources (routes/webhook.h). */
typedef struct th_whset {
    th_whsrc *src;
    size_t n;
} th_whset;

typedef struct th_req {
    struct th_req *next; /* the connection's queue, or the free list */
    th_conn *conn;       /* NULL: an orphan (replay.h) or moving to another loop */
    th_worker_state *ws; /* the loop it was taken on (or moved to) */
    mcpg_buf data;       /* URL, header names and values, then the body */
    mcpg_buf resp;       /* the response, while an earlier one is pending */
    mcpg_buf extra;      /* the legacy wire: the session's capabilities for the call */
    th_hdr hdrs[TH_MAX_HEADERS];
    uint32_t nhdrs;
    uint8_t known[TH_H_COUNT]; /* index + 1 into hdrs, 0 = absent */
    uint16_t dup_mask;         /* bit per TH_H_*: seen twice */
    uint8_t hstate;            /* 0 start, 1 in a field name, 2 in a value */
    uint8_t state;             /* th_req_state */
    uint8_t http_method;       /* llhttp_method_t */
    uint8_t http_10;           /* HTTP/1.0 */
    uint8_t keep_alive;
    uint8_t in_submit;         /* inside host->call_submit (complete() may re-enter) */
    uint8_t headers_done;      /* http_method is known */
    uint8_t audit_held;        /* TH_AUDIT_*: whether the audit trail holds its calls */
    uint32_t url_off, url_len, body_off, body_len, header_bytes;
    /* exact header-section counting (http_parse.c count_span) */
    const char *hmark;         /* end of the last span counted ... */
    uint32_t hmark_seq;        /* ... valid only within read number hmark_seq */
    uint32_t htail;            /* bytes counted after the last span */
    uint8_t hstarted;          /* the request line's first span was seen */
    uint8_t hlast_name;        /* the last span was a field name (an empty value follows) */
    unsigned stamp;            /* TH_STAMP_* for the result */
    int status;                /* for the access log */
    size_t resp_bytes;
    uint64_t start_us;
    mcpg_call *call;
    /* streams (stream.h) */
    uint8_t sse;               /* the stream's head is written: the answer is a stream */
    uint8_t sse_ok;            /* the client's Accept allows text/event-stream */
    uint8_t listening;         /* on the worker's listener list */
    uint8_t lfilter;           /* TH_LISTEN_* the stream was acknowledged for */
    uint32_t luris_off, luris_len; /* resourceSubscriptions (raw JSON array) in data */
    struct th_req *lprev, *lnext;  /* the worker's listeners */
    uint64_t last_write_ms;    /* loop time of the stream's last bytes (keep-alive) */
    uint64_t listen_us;        /* host->mono_us() when it became a listening stream */
    /* the legacy wire */
    uint8_t legacy;            /* a 2025-era request: event ids, session header */
    int8_t level;              /* notifications/message below it are dropped (-1: none) */
    uint32_t stream_no;        /* event ids: <worker>_<stream>_<seq> */
    uint32_t ev_seq;
    char sid[40];              /* Mcp-Session-Id to send back, "" none */
    th_rstream *rs;            /* its replay buffer: as the call feeding it, or as its client */
    th_relay *relay;           /* a stream of another replica shown to it (relay.h) */
    struct th_req *oprev, *onext; /* the loop's orphans (replay.h) */
    int session_op_status;     /* the answer of the last coordinator step (session.h) */
    uint8_t loaded;            /* its session was looked up (session_of) */
    uint8_t readyz_required;   /* GET /readyz?coordinator=required, its store being asked */
    uint8_t changed;           /* its session change is answered (session_op_status) */
    uint8_t resumable;         /* TH_RESUMABLE_*: its stream gets a replay buffer (replay.h) */
    uint8_t event_webhook;     /* POST /webhooks/events/{source}: host->webhook_submit, and
                                  the outcome answered as plain JSON (webhook_events.c) */
    uint8_t authz;             /* resources/subscribe, a listen's resourceSubscriptions:
                                  1 asking the pipeline, 2 allowed */
    uint32_t authz_off, authz_len; /* a listen's allowed uris (a JSON array) after the body in data */
    uint8_t authz_again;       /* allowed inside call_submit: its submitter re-dispatches */
    uint32_t move_to;          /* the loop its connection moves to (resume.c) */
    th_tls_facts *facts;       /* its connection's TLS facts while its call runs (desc.tls) */
    char peer[TH_PEER_MAX];    /* desc.peer: the call may outlive its connection */
    char version[16];          /* the session's protocol version */
    /* the virtual server it came in on (routes/router.c), "" for /mcp: a
     * copy, since host->server_find's strings last one loop callback and
     * desc.server must last as long as the call */
    char server[TH_SERVER_NAME_MAX + 1];
    uint8_t server_len;
    uint32_t server_info_len;  /* its serverInfo JSON at server_text's start; 0: ours */
    uint32_t server_instr_len; /* its instructions after that and a NUL; 0: none */
    mcpg_buf server_text;      /* a virtual server's serverInfo and instructions */
    mcpg_call_desc desc;       /* lives as long as the call */
    char name_buf[TH_NAME_MAX];
} th_req;

struct th_conn {
    uv_tcp_t tcp;
    th_worker_state *ws;
    th_conn *prev, *next;  /* the worker's connections */
    th_conn *dirty_next;   /* the worker's flush list */
    llhttp_t parser;
    th_req *cur;           /* the message being parsed */
    th_req *qhead, *qtail; /* parsed requests awaiting their turn to answer, in order */
    uint32_t qlen, inflight;
    mcpg_buf out;          /* responses ready to write, in order */
    mcpg_buf wbuf;         /* bytes handed to uv_write */
    mcpg_buf saved;        /* input read but not yet parsed (parser paused) */
    uv_write_t wreq;
    uv_shutdown_t shut;
    uint64_t last_ms;      /* loop time of the last read or write progress */
    size_t wq_seen;        /* unsent answer bytes at the last look (th_conn_sweep) */
    uint64_t cur_start_ms; /* loop time the current message began */
    uint16_t err_status;   /* the HTTP status a parser callback failed with */
    uint8_t closing;       /* uv_close issued */
    uint8_t handle_closed; /* its close callback has run */
    uint8_t close_after;   /* answer what is queued, then close */
    uint8_t paused;        /* llhttp paused; `saved` holds the rest */
    uint8_t lingering;     /* FIN sent; reading and discarding until the peer closes */
    uint8_t reading, writing, dirty, in_execute;
    uint8_t again;         /* stopped after its share of this turn: service it next turn */
    uint8_t in_lf_ws;      /* the input so far ends in LF + only SP/HT (obs-fold check) */
    uint8_t loopback;      /* accepted on a loopback address (hygiene.h defaults) */
    uint32_t nstreams;     /* listening or resumed streams open: not idle */
    th_req *handover;      /* moves to another loop once everything before it is written (resume.c) */
    const char *in_start;  /* the buffer llhttp_execute is parsing ... */
    uint32_t in_seq;       /* ... and its number, counted per connection */
    th_tls_conn tls;       /* all zero on clear text (tls.h) */
    uint64_t accepted_ms;  /* loop time of the adopt: the handshake timeout counts from it */
    uint8_t peer_len;
    char peer[TH_PEER_MAX];/* the client's address as text */
};

/* One worker's share of the transport: everything its loop thread touches. */
struct th_worker_state {
    th_mod *mod;
    mcpg_worker *w;
    uv_loop_t *loop;
    uint32_t index;
    uint8_t started, draining, handles_open;
    uint8_t stopped;         /* worker_stop ran: no coordinator op any more */
    uint32_t nconns;         /* connection structs alive (closing ones too) */
    uint32_t nconns_peak;    /* the most since memory was last given back */
    uint64_t refused;        /* connections refused at the cap since the last warning */
    uint64_t refused_log_ms; /* loop time of that warning */
    uint32_t handles_closing;/* worker handles whose close callback is pending */
    th_conn *conns;
    th_conn *dirty;
    th_req *free_reqs;
    uint32_t nfree;
    char *rbuf;
    uv_prepare_t prepare;    /* once per loop turn: write, resume, log */
    uv_timer_t sweep;        /* idle and slow-request timeouts */
    uv_timer_t prime;        /* legacy SSE answers still silent after TH_PRIME_MS begin */
    uv_idle_t kick;          /* active while connections wait for next turn's service:
                              * an active idle handle keeps the loop from blocking */
    mcpg_buf scratch;        /* escaping a kernel error message */
    mcpg_buf sse_body;       /* one SSE event's text */
    mcpg_buf msg_body;       /* one JSON-RPC message assembled from pieces for an event */
    th_req *listeners;       /* open listening streams (stream.h) */
    th_scache scache;        /* the sessions this loop has seen (session.h) */
    struct th_session_op *session_ops; /* session ops the store has not answered (session.c) */
    th_rtable rtable;        /* replay buffers of this loop's streams (replay.h) */
    th_req *orphans;         /* requests whose call runs on without a connection */
    mcpg_coord_sub *sub;     /* mcpg.session.* */
    mcpg_coord_sub *relay_sub; /* mcpg.relay.<replica>.<index> (relay.h) */
    th_relay *relays;        /* GETs shown streams of other replicas */
    uint64_t relays_made;    /* their tickets */
    mcpg_buf relay_msg;      /* one relayed event being sent */
    mcpg_coord_sub *news_sub;/* TH_NEWS_SUBJECT (webhook.h) */
    mcpg_buf scratch2;       /* a session row being changed */
    uint64_t keepalive_ms;   /* loop time of the last keep-alive pass */
    uint32_t streams_made;   /* legacy stream numbers on this worker */
    mcpg_buf alog;           /* access log lines waiting for the flush */
    uint64_t alog_dropped;
    char date[40];           /* cached Date header value */
    int64_t date_sec;        /* the second `date` was formatted for */
    char iso[32];            /* cached "YYYY-MM-DDTHH:MM:SS" for the access log */
    int64_t iso_sec;
    char pad[64];            /* keep neighbouring workers' slots off this cache line */
};

/* What the wires do when the http layer lets go of a connection, a request
 * or a loop (wire_hooks.c fills them at create): the http layer calls up
 * only through these and th_route. */
typedef struct th_wire_hooks {
    void (*conn_closing)(th_conn *c);   /* resumable calls carry on, listeners end */
    void (*conn_draining)(th_conn *c);  /* its listening streams end with their result */
    void (*conn_handover)(th_conn *c);  /* c->handover is first in line: move to its loop */
    void (*request_dropped)(th_worker_state *ws, th_req *r); /* queued on a connection being freed */
    void (*request_freed)(th_worker_state *ws, th_req *r);   /* back to the free list */
    void (*sweep)(th_worker_state *ws, uint64_t now_ms);     /* once a second on each loop */
    void (*worker_freeing)(th_worker_state *ws);             /* destroy(): what the wires keep per loop */
} th_wire_hooks;

struct th_mod {
    const mcpg_host *host;
    const th_wire_hooks *wire; /* th_wire_install */
    mcpg_instance *self;
    const th_config *cfg;
    uint32_t nworkers;
    uint32_t replica;    /* this process in a fleet: drawn at create, never 0 (event ids, relay.h) */
    th_worker_state **slots;
    _Atomic(th_info *) info; /* the newest serverInfo (th_server_info) */
    mcpg_buf alog_src;   /* "src":"..." stamp for access log lines */
    int alog_mode;       /* TH_ALOG_*: gateway.server.access_log */
    th_names hosts;      /* gateway.server.allowed_hosts, parsed */
    th_names origins;    /* gateway.server.allowed_origins, parsed */
    const mcpg_coordinator_ops *co_ops; /* host->coordinator(): sessions, or NULL */
    void *co;
    char *admin_token;   /* from the variable admin_token_env names; NULL: no admin routes */
    th_whset wh;         /* resource webhook sources (webhook.h) */
    uint32_t wh_offers;  /* th_wh_offers(&wh): what they add to the capabilities */
    size_t admin_token_len;
    pthread_mutex_t tls_lock; /* guards tls_ctx: loops take it per connection, reloaded swaps it */
    int tls_lock_ok;
    SSL_CTX *tls_ctx;    /* NULL: clear text */
    mcpg_metric *m_conns, *m_streams, *m_sessions; /* metrics.c; NULL without a registry */
};

/* worker.c */
th_worker_state *th_slot(th_mod *m, mcpg_worker *w);
int th_worker_start(th_worker_state *ws);
void th_worker_maybe_stop(th_worker_state *ws);
void th_worker_free(th_worker_state *ws);
th_req *th_req_get(th_worker_state *ws);
void th_req_put(th_worker_state *ws, th_req *r);
void th_mark_dirty(th_conn *c);
void th_conn_free_abandoned(th_conn *c);
const char *th_date(th_worker_state *ws);
void th_metric_add(th_worker_state *ws, mcpg_metric *g, int64_t delta); /* on ws's loop */

/* respond.c: a request's reply, in pipelining order */
void th_respond(th_conn *c, th_req *r, th_resp_head *hd, const th_piece *body, size_t nbody);
void th_respond_rpc_error(th_conn *c, th_req *r, int status, uint32_t retry_after, th_piece id,
                          int64_t code, th_piece msg, const th_piece *data, size_t ndata);
void th_respond_status_error(th_conn *c, th_req *r, int status);
/* Any request header by its lower-case name (the first one), or NULL. */
const char *th_req_header(const th_req *r, const char *lname, size_t *len_out);

/* http_conn.c */
/* c_out (may be NULL): the new connection. On failure fd is not taken.
 * carry (may be NULL): the TLS state of a connection moved from another
 * loop, taken (zeroed) on success; else a TLS transport starts a handshake. */
int th_conn_adopt(th_worker_state *ws, int fd, th_tls_conn *carry, th_conn **c_out);
void th_conn_service(th_conn *c);
/* A socket this worker will not serve: one fixed 503 written to it if it
 * goes at once (never on TLS), the FIN sent. The caller closes fd. */
typedef enum { TH_REFUSE_FULL, TH_REFUSE_DRAINING } th_refusal;
void th_conn_refuse(th_worker_state *ws, int fd, th_refusal why);
void th_conn_close(th_conn *c);
void th_conn_maybe_free(th_conn *c);
/* An answer the connection waited for (c->inflight held it open) is back:
 * the hold ends. 1: write the answer. 0: the connection closed meanwhile,
 * so r is done and c may be freed now: touch neither again. */
int th_conn_answer_back(th_conn *c, th_req *r);
void th_conn_sweep(th_worker_state *ws, uint64_t now_ms);
void th_worker_give_back_memory(th_worker_state *ws);
void th_conn_drain(th_conn *c, int force);
void th_conn_advance(th_conn *c);
int th_conn_can_take_more(const th_conn *c);
/* The client closed (EOF, error, close_notify): what is ready goes out if
 * it can at once, calls in flight are cancelled, the connection closes. */
void th_conn_peer_closed(th_conn *c);

/* tls_conn.c: the record layer of a TLS connection (c->tls.ssl set) */
void th_tls_input(th_conn *c, const char *p, size_t n); /* what the socket read */
void th_tls_pump(th_conn *c);  /* decrypt and parse while the parser takes more */
int th_tls_seal(th_conn *c);   /* c->out plaintext -> ciphertext; -1: close */
int th_tls_bye(th_conn *c);    /* close_notify queued: 1 while bytes wait to go */

/* http_feed.c: the connection's parser, fed (no socket I/O: the fuzzers
 * drive it with what http_conn.c and worker.c would provide) */
void th_conn_parser_init(th_conn *c);
void th_conn_enqueue(th_conn *c, th_req *r);
/* Parse n bytes of the client's plaintext (tls_conn.c decrypts into them).
 * Complete requests go to th_route; a framing error is answered after the
 * requests before it (close_after set); at a message boundary where the
 * connection can take no more the parser pauses and keeps the rest. */
void th_conn_feed(th_conn *c, const char *data, size_t n);
/* Unpause and parse the kept rest (never from inside llhttp_execute). */
void th_conn_parse_saved(th_conn *c);

/* http_parse.c */
extern const llhttp_settings_t th_parser_settings;
/* A known header (TH_H_*) as the parser kept it: the first occurrence. */
void th_fill_header(const th_req *r, int k, th_hval *out);
void th_req_reset(th_req *r);
void th_parse_read_begin(th_conn *c, const char *data);
int th_parse_read_end(th_conn *c, const char *data, size_t n);

/* access_log.c */
/* th_req.audit_held */
enum {
    TH_AUDIT_NO_CALL, /* no call's outcome written for it (yet) */
    TH_AUDIT_HELD,    /* every call's outcome is in the audit trail */
    TH_AUDIT_MISSED   /* a call's outcome is not */
};
enum {
    TH_ALOG_NONE,  /* false: no line */
    TH_ALOG_ALL,   /* true: a line for every request */
    TH_ALOG_AUTO   /* "auto": a line for every request the audit trail does not hold */
};
/* TH_ALOG_* of gateway.server.access_log's JSON text (NULL: the default,
 * auto), or -1 for any other value. */
int th_alog_mode_parse(const char *json);
/* After a call's outcome is written for r: what the audit trail holds of it. */
void th_alog_note_call(th_worker_state *ws, th_req *r, mcpg_call *call);
/* The line for r, unless the access log's mode leaves it out. */
void th_alog_request(th_worker_state *ws, const th_req *r);
void th_alog_line(th_worker_state *ws, const th_req *r);
void th_alog_flush(th_worker_state *ws);

/* routes/router.c: a complete request, to be answered (the route entry). */
void th_route(th_conn *c, th_req *r);

#endif
