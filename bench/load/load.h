/* mcpg-load: a closed- or open-loop load generator for both MCP wires.
 *
 * One libuv loop drives N keep-alive connections; each sends its next call
 * when the last answer is complete. Every answer is checked (status, JSON-RPC
 * id, result) so a fast wrong gateway cannot look like a fast gateway.
 *
 * Pieces, each in its own file so later work (open loop, the legacy wire,
 * threads, tool mixes; see roadmap 07) can replace one without the others:
 *   hist.c     log-linear latency histogram
 *   resp.c     incremental HTTP/1.1 response framing (chunked on the legacy wire)
 *   rpc.c      request text and JSON-RPC answer checks
 *   sse.c      finding the JSON-RPC response among an SSE answer's events
 *   mix.c      the tool mix (--tool a:3,b:1): which tool each call names
 *   sched.c    the open loop's schedule (--rate): when each call is due
 *   spread.c   several --url targets: which one each connection (or call) uses
 *   churn.c    --churn: the legacy session life across replicas (open, stream, end)
 *   conn.c     one connection's life: connect, send, read, reconnect
 *   report.c   the human table and the JSON line
 *   main.c     options, phases, progress
 */
#ifndef MCPG_LOAD_H
#define MCPG_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

/* ---- histogram ----
 * HDR-style: exact below 2^(SUB_BITS+1) ns, then each power of two split into
 * 2^SUB_BITS linear buckets, so a recorded value is off by at most
 * 1/2^SUB_BITS (0.78 %). Values above LOAD_HIST_MAX_NS (60 s) are clamped;
 * the exact max is kept beside the buckets. */
#define LOAD_HIST_SUB_BITS 7
#define LOAD_HIST_MAX_NS 60000000000ull
#define LOAD_HIST_TOP_EXP 35 /* floor(log2(LOAD_HIST_MAX_NS)) */
#define LOAD_HIST_BUCKETS \
    ((2u << LOAD_HIST_SUB_BITS) + (LOAD_HIST_TOP_EXP - LOAD_HIST_SUB_BITS) * (1u << LOAD_HIST_SUB_BITS))

typedef struct {
    uint64_t counts[LOAD_HIST_BUCKETS];
    uint64_t total;
    uint64_t min_ns, max_ns;
    double sum_ns;
} load_hist;

void load_hist_reset(load_hist *h);
void load_hist_record(load_hist *h, uint64_t ns);
/* The value at percentile p (0..100], reported as the highest value its
 * bucket stands for (never above the exact max); 0 when empty. */
uint64_t load_hist_percentile(const load_hist *h, double p);
void load_hist_merge(load_hist *dst, const load_hist *src);
/* Bucket index and the bucket's bounds, exposed for the unit test. */
unsigned load_hist_index(uint64_t ns);
uint64_t load_hist_bucket_high(unsigned idx);

/* ---- open loop (sched.c) ----
 * --rate R: call k is due at t0 + k / R; latency counts from the due time. */
typedef struct {
    double rate;          /* calls per second */
    uint64_t t0_ns;       /* when call 0 was due */
    uint64_t issued;      /* calls handed to a connection so far */
    uint64_t max_backlog; /* most calls due and not yet sent, at any take */
} load_sched;

void load_sched_init(load_sched *s, double rate, uint64_t t0_ns);
uint64_t load_sched_due(const load_sched *s, uint64_t now_ns);   /* calls due by now */
uint64_t load_sched_time_of(const load_sched *s, uint64_t k);    /* when call k is due */
bool load_sched_take(load_sched *s, uint64_t now_ns, uint64_t *due_ns);
uint64_t load_sched_backlog(const load_sched *s, uint64_t now_ns); /* due, not yet sent */

/* ---- a tool mix (mix.c): --tool a:3,b:1 ----
 * Each call's tool is a function of its id: every tool gets exactly its
 * share, interleaved. */
#define LOAD_MIX_MAX 16
typedef struct {
    char names[LOAD_MIX_MAX][65];
    unsigned weights[LOAD_MIX_MAX];
    unsigned n;
    uint8_t *cycle; /* cycle_len slots, each a tool's index */
    unsigned cycle_len;
} load_mix;

int load_mix_parse(load_mix *m, const char *spec, char *err, size_t errlen);
unsigned load_mix_pick(const load_mix *m, uint64_t id);
void load_mix_free(load_mix *m);

/* ---- several targets (spread.c): --url given up to LOAD_TARGETS_MAX times ----
 * By connection (the default): connection i talks to target i % n all run.
 * By call (--spread call, legacy wire): each of the -c slots is a group of n
 * connections, one per target, sharing one session; the slot's calls go to
 * the targets in turn, so every call lands on the replica after the last
 * one's. Group g's first call goes to target g % n (the load starts even). */
#define LOAD_TARGETS_MAX 8u
unsigned load_spread_target(unsigned conn, unsigned ntargets);           /* the target of connection conn */
unsigned load_spread_first(unsigned group, unsigned ntargets);           /* group's first holder */
unsigned load_spread_next(unsigned conn, unsigned ntargets);             /* the holder after conn */

/* ---- which MCP wire ----
 * stateless: 2026-07-28, every request self-contained (_meta, Mcp-Method).
 * legacy: 2025-11-25, a session per connection slot (initialize, then
 * notifications/initialized, then calls carrying Mcp-Session-Id); answers
 * may be SSE, framed by chunked transfer coding. */
typedef enum { LOAD_WIRE_STATELESS, LOAD_WIRE_LEGACY } load_wire;

/* ---- HTTP/1.1 response framing ---- */
enum {
    LOAD_RESP_MORE = 0,      /* need more bytes */
    LOAD_RESP_DONE = 1,      /* head_len + body_len bytes form one response */
    LOAD_RESP_EBAD = -1,     /* malformed status line or header */
    LOAD_RESP_ECHUNKED = -2, /* Transfer-Encoding: the closed loop needs Content-Length */
    LOAD_RESP_ENOLEN = -3,   /* no Content-Length on a response that has a body */
    LOAD_RESP_ETOOBIG = -4,  /* head or body over the configured bound */
};

#define LOAD_RESP_HEAD_MAX 16384u
#define LOAD_RESP_CLOSE 0x1u   /* "Connection: close" */
#define LOAD_RESP_CHUNKED 0x2u /* Transfer-Encoding: chunked (only when allowed) */
#define LOAD_RESP_SSE 0x4u     /* Content-Type: text/event-stream */
#define LOAD_SESSION_MAX 128u  /* longest Mcp-Session-Id kept */

typedef struct {
    size_t scan;     /* where the search for the end of the head resumes */
    size_t head_len; /* 0 until the head is complete */
    size_t body_len; /* chunked: the decoded bytes so far */
    size_t body_max;
    size_t wire_len; /* the whole message's bytes in the buffer, once DONE */
    size_t chunk_at; /* chunked: offset of the next chunk-size line */
    size_t session_off, session_len; /* Mcp-Session-Id value in the buffer (len 0: none) */
    int status;
    unsigned flags;
    bool allow_chunked;
} load_resp;

/* allow_chunked: decode chunked answers (the legacy wire's SSE) instead of
 * refusing them with LOAD_RESP_ECHUNKED. */
void load_resp_reset(load_resp *r, size_t body_max, bool allow_chunked);
int load_resp_feed(load_resp *r, const char *buf, size_t len);
/* After DONE on a chunked answer: move the chunks' data together in place,
 * so the body is buf[head_len .. head_len + body_len). */
void load_resp_dechunk(load_resp *r, char *buf);
const char *load_resp_strerror(int rc);
/* A chunked body that stays open (an SSE stream): the data of the complete
 * chunks at the front of in[0..len) is appended to out[*out_len..out_cap);
 * *used is what of in was consumed. 0: more to come; 1: the last chunk came
 * (the stream ended); < 0: a LOAD_RESP_E* error (ETOOBIG: out is full). */
int load_chunks_take(const char *in, size_t len, size_t *used, char *out, size_t out_cap, size_t *out_len);

/* ---- SSE answers ----
 * The data of the one event that is a JSON-RPC response (has "result" or
 * "error"); events without data (priming, keep-alive) and notifications are
 * passed over. Multi-line data is joined in place, so body is modified.
 * Returns 1 with *json and *json_len set, 0 when no event is a response, -1 when
 * more than one is or an event's data is not a JSON object. */
int load_sse_response(char *body, size_t len, const char **json, size_t *json_len);
/* A stream read as it comes: the first complete event of buf[0..len) (ended
 * by its blank line). 1 with *used (its bytes, blank lines before it too) and
 * its joined data (written in place; *data_len 0 for an event without data),
 * 0 when no event is complete yet. */
int load_sse_next(char *buf, size_t len, size_t *used, char **data, size_t *data_len);

/* ---- JSON-RPC request and answer ---- */
typedef struct {
    char *head_prefix; /* request line and headers up to "Content-Length: " */
    size_t head_prefix_len;
    char *body_prefix; /* {"jsonrpc":"2.0","id": */
    size_t body_prefix_len;
    char *body_suffix; /* ,"method":...}} */
    size_t body_suffix_len;
    size_t max_len; /* a whole request with the longest id fits in this */
} load_request_tmpl;

/* 0, or -1 with a message in err[errlen] (tool name not header-safe, ...). */
/* Extra header lines ("Name: value\r\n"...) for every tools/call request. */
int load_request_tmpl_add_headers(load_request_tmpl *t, const char *lines, size_t n);
int load_request_tmpl_init(load_request_tmpl *t, load_wire wire, const char *host_port, const char *path,
                           const char *tool, const char *message, char *err, size_t errlen);
void load_request_tmpl_free(load_request_tmpl *t);
/* Write the tools/call for `id` into dst (at least t->max_len bytes); returns
 * its length. session (legacy wire; at most LOAD_SESSION_MAX bytes) adds an
 * Mcp-Session-Id header; NULL adds none. */
size_t load_request_format(const load_request_tmpl *t, uint64_t id, const char *session, size_t session_len,
                           char *dst);
/* The legacy handshake: initialize (no session yet), then
 * notifications/initialized on the session. Each fits in LOAD_HANDSHAKE_MAX. */
#define LOAD_HANDSHAKE_MAX 1024u
size_t load_initialize_format(const char *host_port, const char *path, uint64_t id, char *dst);
size_t load_initialized_format(const char *host_port, const char *path, const char *session, size_t session_len,
                               char *dst);

typedef struct {
    bool has_id;
    bool id_is_int;
    int64_t id;
    bool has_result;
    bool has_error;
    bool tool_error; /* result.isError == true */
} load_rpc_reply;

/* Scan a JSON-RPC response object's top level (and result's top level).
 * Checks structure, not full JSON validity: 0, or -1 when malformed. */
int load_rpc_scan(const char *s, size_t n, load_rpc_reply *out);
/* JSON-escape s into dst (room for 6*n bytes); returns the bytes written. */
size_t load_json_escape(char *dst, const char *s, size_t n);
/* The value of member key of the JSON object s[0..n) (its text; a string
 * keeps its quotes): 1 with *v and *vlen, 0 when the object has no such
 * member, -1 when s is not an object. Structure only, like load_rpc_scan. */
int load_json_member(const char *s, size_t n, const char *key, const char **v, size_t *vlen);
/* The same for several keys in one pass: out[j] is keys[j]'s value (v NULL
 * when absent); returns how many were found, -1 when s is not an object. */
typedef struct {
    const char *v;
    size_t len;
} load_json_value;
int load_json_members(const char *s, size_t n, const char *const *keys, size_t nkeys, load_json_value *out);
size_t load_u64_to_dec(uint64_t v, char *dst); /* no NUL; at most 20 bytes */

/* ---- errors: append-only, one X-macro list, names used in the JSON ---- */
#define LOAD_ERR_KINDS(X)                                                     \
    X(HTTP_STATUS, "http_status") /* a framed response that was not 200 */    \
    X(RPC_ERROR, "rpc_error")     /* a JSON-RPC "error" answer */             \
    X(TOOL_ERROR, "tool_error")   /* a result with isError: true */           \
    X(MISMATCH, "mismatch")       /* wrong id, no result, --expect missing */ \
    X(PROTOCOL, "protocol")       /* bad HTTP framing, chunked, oversize */   \
    X(SOCKET, "socket")           /* connect/read/write failure, early EOF */ \
    X(TIMEOUT, "timeout")         /* no answer within --timeout */

typedef enum {
#define LOAD_ERR_ENUM(e, s) LOAD_ERR_##e,
    LOAD_ERR_KINDS(LOAD_ERR_ENUM)
#undef LOAD_ERR_ENUM
        LOAD_ERR_COUNT
} load_err_kind;

const char *load_err_name(load_err_kind k);

/* ---- the run ---- */
typedef struct {
    const char *url;
    bool tls;            /* https:// */
    const char *ca_file; /* --ca-file: the CA the server's certificate must chain to; NULL: the system's */
    load_wire wire;
    char host_port[64];
    char path[256];
    struct sockaddr_in addr;
    struct sockaddr_in addrs[LOAD_TARGETS_MAX]; /* --url, in order (addrs[0] == addr) */
    unsigned ntargets;
    bool spread_call; /* --spread call: each slot's calls on the targets in turn */
    bool churn;       /* --churn: the session-churn driver (churn.c) instead of calls */
    double stuck_s;   /* --churn: a stream not ended this long after its DELETE's answer is stuck */
    unsigned connections;
    double duration_s, warmup_s, timeout_s;
    uint64_t max_calls; /* 0: no limit */
    const char *tool;
    const char *message;
    size_t message_size; /* --message-size: a generated message instead of --message */
    const char *expect;
    char headers[1024];  /* --header lines, each ending "\r\n" */
    size_t headers_len;
    bool check_id; /* off only for static baselines that cannot echo the id */
    bool json;
    bool print_answer; /* print the first good answer's body on stdout */
    bool quiet;
    size_t max_response;
    double rate; /* --rate: open loop at this many calls per second; 0: closed loop */
} load_opts;

typedef enum { LOAD_PHASE_WARMUP, LOAD_PHASE_MEASURE, LOAD_PHASE_DONE } load_phase;

typedef struct {
    uint64_t calls; /* answers completed, good or bad */
    uint64_t ok;
    uint64_t ok_sse; /* good answers that came as an SSE stream, not one JSON body */
    uint64_t err[LOAD_ERR_COUNT];
    uint64_t connects;   /* successful TCP connects */
    uint64_t reconnects; /* connects after the first one of a slot */
    load_hist hist;      /* latency of good calls */
} load_stats;

typedef struct load_run load_run;

typedef enum { CONN_CLOSED, CONN_CONNECTING, CONN_OPEN, CONN_CLOSING, CONN_BACKOFF } load_conn_state;

/* Where a legacy-wire slot is in its session's life. */
typedef enum { STAGE_NONE, STAGE_INITIALIZE, STAGE_INITIALIZED, STAGE_CALLS } load_stage;

/* A legacy session: a slot's own, or shared by a --spread call group. */
typedef struct {
    load_stage stage;
    char id[LOAD_SESSION_MAX];
    size_t len;
} load_session;

typedef struct {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    uv_write_t write_req;
    load_run *run;
    load_conn_state state;
    bool in_flight;     /* a request was sent and its answer is not complete */
    bool writing;       /* write_req is pending */
    bool send_deferred; /* the answer came before the write completed */
    bool ever_connected;
    bool backoff; /* reconnect after a delay (connect failed) */
    bool idle;    /* open loop: open, waiting for a call to be due */
    bool queued;  /* open loop: on the run's idle stack (maybe no longer idle) */
    uint64_t retry_at_ns;
    uint64_t id;
    uint64_t sent_ns;
    uint64_t due_ns; /* what latency counts from: sent_ns, or the open loop's due time */
    char *wbuf;
    size_t wlen;
    char *rbuf;
    size_t rlen, rcap;
    load_resp resp;
    load_session own_session; /* legacy wire; kept across reconnects */
    load_session *session;    /* &own_session, or the group's first connection's */
    unsigned target;          /* which --url */
    bool holder;              /* --spread call: this connection of the group sends the next call */
    struct ssl_st *ssl; /* https: this connection's TLS (tls.c), NULL until connected */
    bool tls_ready;     /* its handshake is done */
    char *tbuf;         /* ciphertext being written (kept while write_req is pending) */
    size_t tcap;
} load_conn;

struct load_run {
    uv_loop_t *loop;
    const load_opts *opts;
    load_mix mix;                          /* the tools, from --tool */
    load_request_tmpl tmpls[LOAD_MIX_MAX]; /* one request template per tool */
    size_t max_request;                    /* the longest any template makes */
    load_conn *conns;
    unsigned nconns;
    unsigned open_conns;
    load_phase phase;
    uint64_t next_id;
    uint64_t t_start_ns, t_measure_ns, t_end_ns;
    double cpu_measure_start_s, loadgen_cpu_s;
    load_stats warmup, measure;
    load_stats interval; /* reset every progress line */
    uv_timer_t phase_timer, tick_timer;
    uv_signal_t sigint, sigterm;
    uint64_t next_progress_ns;
    unsigned error_samples; /* errors described on stderr so far (bounded) */
    unsigned progress_seconds;
    load_phase interval_phase; /* the phase the current progress interval began in */
    unsigned open_at_stop;
    bool answer_printed;
    struct ssl_ctx_st *tls_ctx; /* https: the client context (tls.c) */
    /* open loop (opts->rate > 0) */
    load_sched sched;
    uv_idle_t spin;         /* runs every loop turn: due times are met to the µs */
    load_conn **idle_stack; /* connections waiting for a due call (nconns at most) */
    unsigned n_idle;
    uint64_t backlog_at_end; /* calls due when the window ended and never sent */
};

/* conn.c */
int load_conn_init(load_run *run, load_conn *c);
void load_open_loop_spin(load_run *run); /* open loop: send what is due on idle connections */
void load_conn_start(load_conn *c);
void load_conn_close(load_conn *c);
void load_conn_free(load_conn *c);
void load_conn_check_timeout(load_conn *c, uint64_t now_ns);
void load_conn_retry_if_due(load_conn *c, uint64_t now_ns);
void load_run_stop(load_run *run); /* main.c: end the measured window now */
double load_cpu_seconds(void);     /* main.c: this process's user+system CPU so far */

/* churn.c: the whole --churn run; returns the exit status (0, 1 errors or stuck, 2 setup) */
int load_churn_main(const load_opts *o);

/* tls.c: https through OpenSSL over memory BIOs (lib/tlsmem) */
int load_tls_init(load_run *run, char *err, size_t errlen); /* the context, when opts->tls */
void load_tls_free(load_run *run);
int load_tls_begin(load_conn *c);   /* a connected socket: start the handshake; 0 or -1 */
void load_tls_end(load_conn *c);    /* closing: free the connection's TLS */
/* Ciphertext that arrived: fed in, the handshake stepped; plaintext is handed
 * to load_conn_plain. */
void load_tls_read(load_conn *c, const char *p, size_t n);
/* Send n bytes of a request: encrypted, written. 0, or a uv error. */
int load_tls_send(load_conn *c, const char *p, size_t n);
int load_tls_flush(load_conn *c); /* what OpenSSL queued goes out (0 or a uv error) */

/* conn.c, for tls.c */
size_t load_conn_room(load_conn *c, char **at); /* where the next plaintext goes */
void load_conn_plain(load_conn *c, size_t n);   /* n bytes were put there */
void load_conn_ready(load_conn *c);             /* the handshake is done: send */
void load_conn_fail(load_conn *c, const char *what); /* a socket-level failure */
void load_conn_eof(load_conn *c);               /* the server closed */
int load_conn_write(load_conn *c, const char *p, size_t n); /* try, then queue (p kept until written) */

/* write.c: p[0..len) onto s, tried inline first; 0 written, 1 queued on req (p
 * kept until cb), or a uv error. */
int load_write(uv_stream_t *s, uv_write_t *req, const char *p, size_t len, uv_write_cb cb);

/* report.c */
void load_report_human(const load_run *run, FILE *out);
void load_report_json(const load_run *run, FILE *out);
/* Print (unless out is NULL) and start the next one-second interval. */
void load_report_progress(load_run *run, FILE *out);
uint64_t load_total_errors(const load_stats *s);

#endif
