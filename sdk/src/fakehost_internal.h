/* What the fake host's three files share, and nothing else:
 *   fakehost.c            the host: its life, logs, the worker and its loop
 *                         (in the test's thread or its own), timers, the pool,
 *                         memory and buffer slots, instances, list ops
 *   fakehost_call.c       the call object: slabs, handles, what stages and
 *                         backends read and write on it, running their ops,
 *                         the messages it sends its client before its outcome
 *                         (notifications, requests and their replies)
 *   fakehost_transport.c  the transport's side: call_submit and its hook,
 *                         the listener, drain, stats; replies and
 *                         subscriptions from clients, backends' news
 *   fakehost_metrics.c    the metrics registry's slots (the kernel's registry)
 *   fakehost_servers.c    virtual servers (server_find) and the server calls named
 * Internal to the SDK: not installed. */
#ifndef MCPG_FAKEHOST_INTERNAL_H
#define MCPG_FAKEHOST_INTERNAL_H

#include <mcpg/fakehost.h>

#include <pthread.h>
#include <stdatomic.h>
#include <uv.h>

#include "handshake.h"
#include "ident.h"

#define FH_MAX_SLOTS 64      /* instances with a per-call slot */
#define FH_WORK_MAX 256      /* queued or running work_submit items: then MCPG_EAGAIN */
#define FH_DRAIN_MS 10000    /* how long unload waits for an instance's running work */
#define FH_SLAB_CALLS 256    /* call objects per slab */
#define FH_MAX_SLABS 64      /* then call_submit answers MCPG_EAGAIN, call_new NULL */
#define FH_MSG_MAX 256       /* messages one call may send before its outcome: then MCPG_EAGAIN */
#define FH_REQ_MAX 16        /* requests one call may have outstanding: then MCPG_EAGAIN */
#define FH_REQUEST_MS 30000  /* a request's timeout when it gives none (the call's deadline) */

typedef struct fh_work fh_work;
typedef struct fh_header fh_header;
typedef struct fh_call fh_call;
typedef struct fh_later fh_later;
typedef struct fh_listener fh_listener;
typedef struct fh_request fh_request;
typedef struct fh_sub fh_sub;
typedef struct fh_server fh_server;
typedef struct fh_view_copy fh_view_copy;

/* One message a call sent its client before its outcome, framed as the
 * kernel frames it; req is set while it is a request still waiting. */
typedef struct fh_msg {
    char *json;
    size_t len;
    fh_request *req;
} fh_msg;

struct mcpg_worker {
    mcpg_fakehost *fh;
};

struct mcpg_report {
    mcpg_fakehost *fh;
};

struct mcpg_timer {
    uv_timer_t h;
    void (*cb)(void *arg);
    void *arg;
    mcpg_timer *next, **pprev; /* the owner's live list */
};

struct fh_work {
    uv_work_t req;
    mcpg_fakehost *fh;
    void (*work)(void *arg);
    void (*done)(void *arg, int status);
    void *arg;
    uint64_t deadline_us; /* 0: none */
    int status;
    fh_work *next, **pprev;
};

struct mcpg_instance {
    mcpg_fakehost *fh;
    const mcpg_module *m;
    char *name;
    char stamp[192]; /* "[kind:module:instance]" */
    void *config;
    void *state;
    void *dl;        /* from load_file, closed at unload */
    uint32_t slot;
    int inline_dispatch;
    int created, started;
    mcpg_timer *timers;
    fh_work *work;
    fh_listener *listener; /* a transport's, from mcpg_fakehost_listen */
    mcpg_instance *next, **pprev;
};

struct fh_header {
    fh_header *next;
    char *name, *value;
};

enum op_kind { OPK_BACKEND, OPK_AUTHENTICATE, OPK_CHECK, OPK_ACQUIRE, OPK_EMIT, OPK_EVENTS };

/* One call object. Modules and tests hold handles to it (handshake.h), never
 * its address. Objects live in slabs until the fake host is freed, and are
 * reused; each life has its own serial. */
struct fh_call {
    _Alignas(CALL_OBJECT_ALIGN) mcpg_fakehost *fh; /* each one in a slab on the handle's boundary */
    fh_call *next, **pprev; /* fh->calls while alive; next links the free list */
    uint32_t serial;        /* of the current (or last) life; loop thread only */
    atomic_uint alive;      /* the serial while alive, 0 once freed: read by any thread */
    mcpg_post post;         /* resume delivery to the loop */
    uv_work_t pool_req;     /* pool dispatch of a backend op */
    uint32_t method_id, wire;
    char *method, *target, *args, *params, *id;
    size_t args_len, params_len, id_len;
    fh_header *headers;
    mcpg_ident *ident;      /* ABI 1.2: who the call is (ident.h), or NULL */
    char *peer;             /* mcpg_fakehost_call_set_peer */
    char *client_name;      /* mcpg_fakehost_call_set_client_name; else the target */
    char *challenge;        /* call_set_challenge */
    const mcpg_tls_info *tls; /* mcpg_fakehost_call_set_tls (borrowed) */
    /* the outcome */
    mcpg_buf result;
    int is_error;
    int64_t err_code;
    char *err_msg;
    mcpg_buf err_data;
    int http_status;
    uint32_t retry_after;
    atomic_int cancelled;
    int cancel_sent; /* the backend's cancel op has run (at most once) */
    /* the op in progress */
    mcpg_instance *op_inst;
    unsigned op_stage; /* enum call_stage of op_inst */
    int op_kind;
    call_backend_op op_fn;  /* OPK_BACKEND: the backend's op for the method */
    const mcpg_audit_event *op_event;
    op_sync op;
    int dispatched, answered, final_status, on_pool, pool_status;
    /* from host->call_submit */
    int submitted, completed, in_submit;
    mcpg_call_desc d;
    void *slots[FH_MAX_SLOTS];
    /* ABI 1.1: what the call says about its client, and what it sent it */
    uint32_t result_type;
    char *session, *caps, *version;
    char *server;     /* ABI 1.12: desc.server, copied; NULL: none */
    int no_messages;  /* the test says its answer cannot carry messages */
    fh_msg *msgs;     /* msgs, n_msgs, cap_msgs, n_requests, outstanding: under fh->lock */
    int n_msgs, cap_msgs, n_requests, outstanding;
    int delivered;    /* loop thread: messages handed on so far */
    mcpg_buf msgs_text;
};

/* What the transport's side counts (mcpg_fakehost_stats), any thread. */
typedef struct fh_stats {
    atomic_long submitted, refused, completed, completed_in_submit, released, cancelled,
        accepted, adopt_refused, host_allocs, buf_bytes;
} fh_stats;

struct mcpg_fakehost {
    mcpg_host host;
    mcpg_worker worker;
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t deadline;
    int deadline_hit, in_loop;
    pthread_mutex_t lock;           /* posts, logs, reports, run_on_loop */
    pthread_cond_t cond;            /* run_on_loop: its fn has run */
    mcpg_post *post_head, *post_tail;
    int posts_closed;
    mcpg_buf log, report;
    int report_count;
    atomic_int log_level, quiet, failures;
    mcpg_instance *instances;
    fh_call *calls;                 /* alive */
    fh_call *free_calls;
    fh_call *slabs[FH_MAX_SLABS];
    atomic_int n_slabs;             /* published after the slab: any thread reads slabs */
    mcpg_timer *orphan_timers;      /* started with self == NULL */
    fh_work *orphan_work;
    int work_count;
    uint32_t next_slot;
    mcpg_instance *route;
    /* the loop on its own thread */
    pthread_t thread;
    atomic_int threaded, thread_stop;
    /* the transport's side */
    mcpg_fakehost_submit_fn submit_fn;
    void *submit_arg;
    fh_later *laters;
    int draining;
    char *gateway_name, *gateway_version;
    fh_stats st;
    /* ABI 1.1: backends' news, subscriptions, the coordinator */
    mcpg_buf news;                  /* one line per piece of news, under lock */
    fh_sub *subs;                   /* resource subscriptions by uri, loop thread */
    mcpg_instance *coordinator;
    struct mreg *metrics;           /* ABI 1.4: the registry (fakehost_metrics.c) */
    /* ABI 1.12: virtual servers (fakehost_servers.c); the list under lock */
    fh_server *servers;
    fh_view_copy *view_copies;      /* what server_find gave out, freed by view_post */
    mcpg_post view_post;
    int view_post_pending;
    int last_server_set;            /* under lock: a desc was handed to call_submit */
    char last_server[65];           /* under lock: its server, "" for none */
};

extern mcpg_fakehost *_Atomic fh_the;

/* ---- fakehost.c ---- */
void fh_fail(mcpg_fakehost *fh, const char *fmt, ...) MCPG_PRINTF(2, 3);
void fh_note(mcpg_fakehost *fh, const char *fmt, ...) MCPG_PRINTF(2, 3);
char *fh_dup_n(const char *s, size_t n);
char *fh_dup_or_null(const char *s);
int fh_on_loop(const mcpg_fakehost *fh);
/* Whose bug a misuse of `what` is: a host slot's ("host->...") is the
 * module's, the fake host's own API's is the test's. */
const char *fh_whose_bug(const char *what);
/* 0 on the worker's loop thread; else a failure naming `what` and MCPG_ESTATE. */
int fh_loop_only(mcpg_fakehost *fh, mcpg_worker *w, const char *what);
int fh_post(mcpg_worker *w, mcpg_post *node);
int64_t fh_wall_us(void);
void fh_stat_add(atomic_long *counter, long n);

/* ---- fakehost_call.c ---- */
void fh_call_slots(mcpg_host *h);
void fh_message_slots(mcpg_host *h);
/* The object a handle names while its life lasts; else NULL, and a stale
 * or NULL handle is logged and counted as the module bug it is. */
fh_call *fh_call_of(mcpg_call *h, const char *slot);
mcpg_call *fh_handle(const fh_call *c, unsigned stage);
fh_call *fh_call_make(mcpg_fakehost *fh, const char *method, size_t method_len,
                      const char *target, size_t target_len, const char *args,
                      size_t args_len, const char *id, size_t id_len);
void fh_call_retire(fh_call *c);
int fh_call_error(fh_call *c, int64_t code, const char *message, const char *data_json);
void fh_call_finish(fh_call *c, int st);
void fh_call_outcome(fh_call *c, mcpg_call_outcome *o);
void fh_call_cancel_op(fh_call *c);
int fh_call_dispatch(mcpg_fakehost *fh, mcpg_instance *inst, fh_call *c);
void fh_calls_forget(mcpg_fakehost *fh, mcpg_instance *inst);
int fh_calls_free(mcpg_fakehost *fh);
int fh_host_owned(mcpg_fakehost *fh, const mcpg_buf *b);
/* The call's messages: handed to its transport, its requests armed, then
 * (at its end) those still waiting answered MCPG_ECANCELED. Loop thread. */
void fh_call_flush(fh_call *c);
void fh_call_end_requests(fh_call *c);
void fh_call_free_messages(fh_call *c);
/* The waiting request with this minted id, with its call; NULL if none. */
fh_request *fh_request_find(mcpg_fakehost *fh, const char *id, fh_call **call_out);
/* Answer a waiting request (loop thread): what the client said. */
void fh_request_answer(fh_request *r, const mcpg_reply *reply);

/* ---- fakehost_transport.c ---- */
void fh_transport_slots(mcpg_host *h);
void fh_complete_submitted(fh_call *c);
void fh_listener_close(mcpg_instance *inst);
void fh_laters_cancel(mcpg_fakehost *fh);
void fh_news_slots(mcpg_host *h);
void fh_subs_free(mcpg_fakehost *fh);
/* Run what was posted to the loop so far (before the calls are freed). */
void fh_run_posts(mcpg_fakehost *fh);

/* ---- fakehost_servers.c ---- */
void fh_server_slots(mcpg_host *h);
void fh_servers_free(mcpg_fakehost *fh);
/* A desc naming server (NULL: none) was handed to call_submit. */
void fh_server_note(mcpg_fakehost *fh, const char *server);

/* ---- fakehost_metrics.c ---- */
int fh_metrics_open(mcpg_fakehost *fh);
void fh_metrics_forget(mcpg_fakehost *fh, mcpg_instance *inst);
void fh_metrics_close(mcpg_fakehost *fh);
void fh_metrics_slots(mcpg_host *h);

#endif
