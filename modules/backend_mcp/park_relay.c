/* backend_mcp: a parked question answered through any replica of a fleet.
 *
 * A legacy upstream's question to a stateless client is parked in the
 * memory of the replica whose connection the upstream's request waits on
 * (calls.c). Its token names that replica: PARK_PREFIX <tag> "-" <random>,
 * the tag drawn at random for this instance in this process (gateway.id
 * defaults to the host name, which two processes on one host share, so it
 * cannot tell them apart). The kernel's seal covers the whole token.
 *
 * A retry that reaches another replica ("the asker") is published on the
 * coordinator to "mcpg.park.<tag>"; the holder, subscribed there, resumes the
 * park exactly as a local retry (the owner the asker's identity stage set is
 * checked against the park's), and publishes back on the asker's subject:
 * an ack once the upstream has the answer, then the outcome (the upstream's
 * answer, an error, or the next question with its new token). The asker
 * answers its call from those.
 *
 * Decided answers: no ack within RELAY_ACK_MS (or input_wait_ms, if
 * shorter) means the holder is gone or no longer has the park: -32602
 * "requestState is unknown or expired", as on the holder itself. A publish
 * the coordinator refuses or does not confirm: -32000 with HTTP 503 and
 * Retry-After. After the ack the call's own deadline (modules[].timeout_ms)
 * bounds the wait: the kernel cancels the call, and the waiter goes. At
 * most RELAY_WAIT_MAX retries wait per instance, and RELAY_HELD_MAX relayed
 * retries run on a holder; beyond, 503. A message is at most RELAY_MSG_MAX
 * bytes (and the store's own limit): a larger retry is -32602, a larger
 * outcome an error.
 *
 * Threads: one subscription and one sweep timer on worker 0. The asker
 * publishes on the call's loop; replies arrive on worker 0, which answers
 * the call (any one thread may, while it is pending). Waiters are listed
 * under up->lock, which mb_cancel also holds while it reads the call's slot:
 * whoever unlinks a waiter answers its call. The holder's I/O thread hands
 * what it publishes to worker 0. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "upstream.h"

#define RELAY_SUBJECT "mcpg.park."
#define RELAY_ACK_MS 2000
#define RELAY_SWEEP_MS 50
#define RELAY_WAIT_MAX 256
#define RELAY_HELD_MAX 256
#define RELAY_MSG_MAX (512 * 1024)
#define WAITER_TAG 0x59414c52u /* "RLAY" */

typedef struct waiter waiter;
struct waiter {
    uint32_t tag;           /* tells it from a client_call in the call's slot */
    mcpg_post post;         /* the publish, on the call's loop */
    upstream *up;
    mcpg_call *call;
    uint64_t seq;
    uint32_t method;
    char *caps;             /* the client's capabilities: calls_answer reads them */
    char subject[sizeof RELAY_SUBJECT + 16]; /* the holder's */
    char *msg;              /* the retry, as published */
    size_t len;
    uint64_t ack_by_us;     /* mono: no ack by then is "unknown or expired" */
    bool acked, listed;
    int refs;               /* under up->lock: the list, the publish */
    waiter *next;
};

typedef struct park_relay park_relay;
struct park_relay {
    const mcpg_coordinator_ops *ops;
    void *inst;
    char subject[sizeof RELAY_SUBJECT + 16];
    mcpg_coord_sub *sub;    /* worker 0 */
    mcpg_timer *sweep;      /* worker 0 */
    waiter *waiting;        /* under up->lock */
    size_t n_waiting;
    uint64_t next_seq;
    _Atomic int held;       /* relayed retries running here */
};

/* ---- setup ---- */

int relay_init(upstream *up) {
    unsigned char rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) return MCPG_EIO;
    mcpg_hex(rnd, sizeof rnd, up->park_tag);
    up->park_tag[16] = '\0';
    void *inst = NULL;
    const mcpg_coordinator_ops *ops =
        MCPG_HOST_HAS(up->h, coordinator) ? up->h->coordinator(&inst) : NULL;
    if (!ops || !MCPG_HAS(ops, subscribe)) return 0; /* one replica: nothing to relay */
    park_relay *rl = calloc(1, sizeof *rl);
    if (!rl) return MCPG_ENOMEM;
    rl->ops = ops;
    rl->inst = inst;
    snprintf(rl->subject, sizeof rl->subject, RELAY_SUBJECT "%s", up->park_tag);
    up->relay = rl;
    return 0;
}

void relay_free(upstream *up) {
    free(up->relay);
    up->relay = NULL;
}

static void waiter_unref(upstream *up, waiter *w) {
    pthread_mutex_lock(&up->lock);
    bool last = --w->refs == 0;
    pthread_mutex_unlock(&up->lock);
    if (!last) return;
    free(w->caps);
    free(w->msg);
    free(w);
}

/* Under up->lock: unlink w (and clear the call's slot); true when this
 * caller is the one to answer it. */
static bool take_locked(upstream *up, waiter *w) {
    if (!w->listed) return false;
    park_relay *rl = up->relay;
    for (waiter **pp = &rl->waiting; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    rl->n_waiting--;
    w->listed = false;
    void **slot = up->h->call_slot(w->call, up->self);
    if (slot && *slot == w) *slot = NULL;
    return true;
}

static bool take(upstream *up, waiter *w) {
    pthread_mutex_lock(&up->lock);
    bool mine = take_locked(up, w);
    pthread_mutex_unlock(&up->lock);
    return mine;
}

/* Answer a taken waiter's call with an error, then let go of the list's ref. */
static void fail_taken(upstream *up, waiter *w, int64_t code, int http, uint32_t retry_s,
                       const char *message) {
    char full[700];
    snprintf(full, sizeof full, "backend \"%s\": %s", up->name, message);
    up->h->call_error(w->call, code, full, NULL);
    if (http) up->h->call_set_http(w->call, http, retry_s);
    up->h->call_resume(w->call, MCPG_DENY);
    waiter_unref(up, w);
}

static void fail_unknown(upstream *up, waiter *w, const char *why) {
    char msg[300];
    snprintf(msg, sizeof msg, "requestState is unknown or expired (questions wait %lld ms; %s)",
             (long long)up->cfg.c->input_wait_ms, why);
    fail_taken(up, w, MCPG_RPC_INVALID_PARAMS, 0, 0, msg);
}

/* ---- the asker: a retry for another replica's park ---- */

/* The tag a token names, or NULL when it is not a park token of this form. */
static const char *tag_of(const char *token) {
    size_t pl = sizeof PARK_PREFIX - 1;
    if (strncmp(token, PARK_PREFIX, pl) != 0 || strlen(token) < pl + 17 || token[pl + 16] != '-')
        return NULL;
    for (size_t i = 0; i < 16; i++)
        if (!strchr("0123456789abcdef", token[pl + i])) return NULL;
    return token + pl;
}

static void published(void *arg, int status, const mcpg_coord_value *v) {
    (void)v;
    waiter *w = arg;
    upstream *up = w->up;
    if (status != 0 && take(up, w)) {
        char msg[300];
        snprintf(msg, sizeof msg, "the fleet's coordinator did not take the retry for the "
                 "replica holding its question (%s)", mcpg_strerror(status));
        fail_taken(up, w, MCPG_RPC_SERVER_ERROR, 503, 1, msg);
    }
    waiter_unref(up, w);
}

/* On the call's loop. */
static void publish_on_loop(void *arg) {
    waiter *w = arg;
    upstream *up = w->up;
    park_relay *rl = up->relay;
    pthread_mutex_lock(&up->lock);
    bool live = w->listed;
    pthread_mutex_unlock(&up->lock);
    if (!live) { /* cancelled before its turn */
        waiter_unref(up, w);
        return;
    }
    int rc = rl->ops->publish(rl->inst, up->h->worker_current(), w->subject, w->msg, w->len,
                              published, w);
    if (rc == 0) return; /* published() has the ref */
    if (take(up, w)) {
        if (rc == MCPG_ERANGE)
            fail_taken(up, w, MCPG_RPC_INVALID_PARAMS, 0, 0,
                       "inputResponses too large to relay to the replica holding the question");
        else
            fail_taken(up, w, MCPG_RPC_SERVER_ERROR, 503, 1,
                       "the fleet's coordinator cannot relay the retry now");
    }
    waiter_unref(up, w);
}

static int build_question(upstream *up, const client_call *pc, uint64_t seq, mcpg_buf *b) {
    mcpg_buf_printf(b, "{\"k\":\"q\",\"to\":\"%s\",\"seq\":%llu,\"m\":%u,\"from\":",
                    up->relay->subject, (unsigned long long)seq, pc->method);
    const char *gid = MCPG_HOST_HAS(up->h, gateway_id) ? up->h->gateway_id() : "";
    mcpg_buf_append_json_string(b, gid, strlen(gid));
    mcpg_buf_puts(b, ",\"token\":");
    mcpg_buf_append_json_string(b, pc->request_state, strlen(pc->request_state));
    mcpg_buf_puts(b, ",\"owner\":");
    if (pc->owner) mcpg_buf_append_json_string(b, pc->owner, strlen(pc->owner));
    else mcpg_buf_puts(b, "null");
    mcpg_buf_printf(b, ",\"caps\":%s,\"input\":%s}", pc->caps ? pc->caps : "null",
                    pc->input_responses ? pc->input_responses : "null");
    return b->data ? 0 : MCPG_ENOMEM;
}

static waiter *waiter_new(upstream *up, const client_call *pc, mcpg_call *call) {
    waiter *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->tag = WAITER_TAG;
    w->up = up;
    w->call = call;
    w->method = pc->method;
    w->caps = pc->caps ? strdup(pc->caps) : NULL;
    uint64_t window = RELAY_ACK_MS;
    if ((uint64_t)up->cfg.c->input_wait_ms < window) window = (uint64_t)up->cfg.c->input_wait_ms;
    w->ack_by_us = up->h->mono_us() + window * 1000;
    return w;
}

/* List w (and put it in the call's slot); 0, or 503 when too many wait. */
static int enlist(upstream *up, waiter *w) {
    park_relay *rl = up->relay;
    pthread_mutex_lock(&up->lock);
    if (rl->n_waiting >= RELAY_WAIT_MAX) {
        pthread_mutex_unlock(&up->lock);
        return MCPG_EAGAIN;
    }
    w->seq = ++rl->next_seq;
    w->listed = true;
    w->refs = 2; /* the list, the publish */
    w->next = rl->waiting;
    rl->waiting = w;
    rl->n_waiting++;
    void **slot = up->h->call_slot(w->call, up->self);
    if (slot) *slot = w;
    pthread_mutex_unlock(&up->lock);
    return 0;
}

/* The call's answer when the retry cannot be relayed. */
static bool refuse(upstream *up, mcpg_call *call, int rc, mcpg_status *st) {
    const mcpg_host *h = up->h;
    if (rc == MCPG_ERANGE) {
        *st = mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS, "backend \"%s\": "
                                 "inputResponses too large to relay to the replica holding the "
                                 "question", up->name);
        return true;
    }
    h->call_set_http(call, 503, 1);
    *st = mcpg_result_errorf(h, call, MCPG_RPC_SERVER_ERROR, "backend \"%s\": %s", up->name,
                             rc == MCPG_EAGAIN ? "too many retries waiting for other replicas"
                                               : "cannot relay the retry now");
    return true;
}

bool relay_try(upstream *up, client_call *pc, mcpg_call *call, mcpg_status *st) {
    const char *tag = pc->request_state ? tag_of(pc->request_state) : NULL;
    if (!up->relay || !tag || strncmp(tag, up->park_tag, 16) == 0) return false;
    const mcpg_host *h = up->h;
    waiter *w = waiter_new(up, pc, call);
    mcpg_buf b = {0};
    int rc = w ? build_question(up, pc, 0, &b) : MCPG_ENOMEM; /* sized before listing */
    if (!rc && b.len > RELAY_MSG_MAX) rc = MCPG_ERANGE;
    if (!rc) {
        snprintf(w->subject, sizeof w->subject, RELAY_SUBJECT "%.16s", tag);
        rc = enlist(up, w);
    }
    mcpg_buf_free(&b);
    if (!rc) rc = build_question(up, pc, w->seq, &b); /* the list holds it: answered later */
    calls_free(pc);
    if (rc) {
        if (w && w->listed) {
            if (!take(up, w)) return *st = MCPG_PENDING, true; /* cancelled: answered */
            w->refs = 1;
        }
        if (w) free(w->caps), free(w);
        mcpg_buf_free(&b);
        return refuse(up, call, rc, st);
    }
    w->msg = b.data;
    w->len = b.len;
    w->post.fn = publish_on_loop;
    w->post.arg = w;
    if (h->worker_post(h->call_worker(call), &w->post) != 0) {
        if (take(up, w)) fail_taken(up, w, MCPG_RPC_SERVER_ERROR, 503, 1, "the gateway is stopping");
        waiter_unref(up, w); /* the publish's */
    }
    *st = MCPG_PENDING;
    return true;
}

bool relay_is(const void *slot_value) {
    return slot_value && *(const uint32_t *)slot_value == WAITER_TAG;
}

bool relay_cancel_locked(upstream *up, void *waiter_ptr) {
    return take_locked(up, waiter_ptr);
}

void relay_cancelled(upstream *up, void *waiter_ptr) {
    fail_taken(up, waiter_ptr, MCPG_RPC_SERVER_ERROR, 0, 0, "request cancelled");
}

/* ---- the asker: replies, on worker 0 ---- */

static waiter *find_locked(park_relay *rl, uint64_t seq) {
    for (waiter *w = rl->waiting; w; w = w->next)
        if (w->seq == seq) return w;
    return NULL;
}

/* The outcome for a taken waiter's call. */
static void apply_outcome(upstream *up, waiter *w, const char *kind, const char *data, size_t n) {
    const mcpg_host *h = up->h;
    mcpg_json_span v, s;
    if (kind[0] == 'r' && mcpg_json_object_get(data, n, "answer", &v) == 1) {
        up_answer a;
        client_call stub = {.tag = PCALL_TAG, .up = up, .method = w->method, .caps = w->caps};
        if (calls_read_answer(v.p, v.n, &a) == 0) {
            calls_answer(up, &stub, w->call, &a);
            waiter_unref(up, w);
            return;
        }
    } else if (kind[0] == 'i' && mcpg_json_object_get(data, n, "req", &v) == 1 &&
               mcpg_json_object_get(data, n, "state", &s) == 1 && s.type == MCPG_JSON_STRING) {
        mcpg_status st = mcpg_result_input_required(h, w->call, v.p, v.n, s.p, s.n);
        h->call_resume(w->call, st);
        waiter_unref(up, w);
        return;
    } else if (kind[0] == 'e' && mcpg_json_object_get(data, n, "message", &v) == 1) {
        char text[700] = "";
        size_t tl = 0;
        int64_t code = MCPG_RPC_SERVER_ERROR, http = 0;
        mcpg_json_string_decode(&v, text, sizeof text, &tl);
        if (mcpg_json_object_get(data, n, "code", &s) == 1) mcpg_json_int64(&s, &code);
        if (mcpg_json_object_get(data, n, "http", &s) == 1) mcpg_json_int64(&s, &http);
        h->call_error(w->call, code, text, NULL);
        if (http) h->call_set_http(w->call, (int)http, 1);
        h->call_resume(w->call, MCPG_DENY);
        waiter_unref(up, w);
        return;
    }
    fail_taken(up, w, MCPG_RPC_SERVER_ERROR, 0, 0,
               "the replica holding the question answered what the gateway does not read");
}

static void on_reply(upstream *up, const char *data, size_t n, const char *kind) {
    mcpg_json_span v;
    int64_t seq = 0;
    if (mcpg_json_object_get(data, n, "seq", &v) != 1 || mcpg_json_int64(&v, &seq) != 0) return;
    park_relay *rl = up->relay;
    pthread_mutex_lock(&up->lock);
    waiter *w = find_locked(rl, (uint64_t)seq);
    if (w && kind[0] == 'a') w->acked = true;
    bool mine = w && kind[0] != 'a' && take_locked(up, w);
    pthread_mutex_unlock(&up->lock);
    if (mine) apply_outcome(up, w, kind, data, n);
}

/* Worker 0: retries whose holder has not acked in time. */
static void on_sweep(void *arg) {
    upstream *up = arg;
    park_relay *rl = up->relay;
    uint64_t now = up->h->mono_us();
    for (;;) {
        waiter *late = NULL;
        pthread_mutex_lock(&up->lock);
        for (waiter *w = rl->waiting; w && !late; w = w->next)
            if (!w->acked && now >= w->ack_by_us) late = w;
        if (late) take_locked(up, late);
        pthread_mutex_unlock(&up->lock);
        if (!late) return;
        fail_unknown(up, late, "the replica holding it did not answer");
    }
}

/* ---- the holder: publishing from the I/O thread ---- */

typedef struct outbox {
    mcpg_post post;
    const mcpg_host *h;
    const mcpg_coordinator_ops *ops;
    void *inst;
    char *subject;
    mcpg_buf msg;
} outbox;

static void sent(void *arg, int status, const mcpg_coord_value *v) {
    (void)arg, (void)status, (void)v; /* a lost reply: the asker's ack window or deadline */
}

/* Worker 0; the node carries all it needs, not the instance. */
static void outbox_run(void *arg) {
    outbox *o = arg;
    o->ops->publish(o->inst, o->h->worker_current(), o->subject, o->msg.data, o->msg.len, sent,
                    NULL);
    free(o->subject);
    mcpg_buf_free(&o->msg);
    free(o);
}

/* Any thread: msg (taken) to the asker's subject, from worker 0. */
static void outbox_send(upstream *up, const char *subject, mcpg_buf *msg) {
    park_relay *rl = up->relay;
    outbox *o = rl && msg->data ? calloc(1, sizeof *o) : NULL;
    if (!o || !(o->subject = strdup(subject))) {
        free(o);
        mcpg_buf_free(msg);
        return;
    }
    o->h = up->h;
    o->ops = rl->ops;
    o->inst = rl->inst;
    o->msg = *msg;
    *msg = (mcpg_buf){0};
    o->post.fn = outbox_run;
    o->post.arg = o;
    if (up->h->worker_post(up->h->worker_at(0), &o->post) != 0) { /* stopping */
        free(o->subject);
        mcpg_buf_free(&o->msg);
        free(o);
    }
}

static void send_error_to(upstream *up, const char *to, uint64_t seq, int64_t code, int http,
                          const char *message) {
    mcpg_buf b = {0};
    mcpg_buf_printf(&b, "{\"k\":\"e\",\"seq\":%llu,\"code\":%lld,\"http\":%d,\"message\":",
                    (unsigned long long)seq, (long long)code, http);
    mcpg_buf_append_json_string(&b, message, strlen(message));
    mcpg_buf_puts(&b, "}");
    outbox_send(up, to, &b);
}

/* ---- the holder: the outcome of a relayed retry (I/O thread) ---- */

void relay_ack(upstream *up, const client_call *pc) {
    mcpg_buf b = {0};
    mcpg_buf_printf(&b, "{\"k\":\"a\",\"seq\":%llu}", (unsigned long long)pc->relay_seq);
    outbox_send(up, pc->relay_to, &b);
}

void relay_error(upstream *up, const client_call *pc, int64_t code, const char *message) {
    send_error_to(up, pc->relay_to, pc->relay_seq, code, 0, message);
}

static void too_large(upstream *up, const client_call *pc, mcpg_buf *b) {
    mcpg_buf_free(b);
    char msg[300];
    snprintf(msg, sizeof msg, "backend \"%s\": the outcome is larger than a relay carries "
             "(%d bytes); the upstream had the answer", up->name, RELAY_MSG_MAX);
    relay_error(up, pc, MCPG_RPC_SERVER_ERROR, msg);
}

void relay_answer(upstream *up, const client_call *pc, const char *msg, size_t n) {
    mcpg_buf b = {0};
    mcpg_buf_printf(&b, "{\"k\":\"r\",\"seq\":%llu,\"answer\":", (unsigned long long)pc->relay_seq);
    mcpg_buf_append(&b, msg, n);
    mcpg_buf_puts(&b, "}");
    if (b.len > RELAY_MSG_MAX) too_large(up, pc, &b);
    else outbox_send(up, pc->relay_to, &b);
}

void relay_round(upstream *up, const client_call *pc, const char *req, size_t rn, const char *token) {
    mcpg_buf b = {0};
    mcpg_buf_printf(&b, "{\"k\":\"i\",\"seq\":%llu,\"req\":", (unsigned long long)pc->relay_seq);
    mcpg_buf_append(&b, req, rn);
    mcpg_buf_puts(&b, ",\"state\":");
    mcpg_buf_append_json_string(&b, token, strlen(token));
    mcpg_buf_puts(&b, "}");
    if (b.len > RELAY_MSG_MAX) too_large(up, pc, &b);
    else outbox_send(up, pc->relay_to, &b);
}

void relay_client_call_gone(upstream *up) {
    if (up->relay) up->relay->held--;
}

/* ---- the holder: a retry from another replica, on worker 0 ---- */

static char *dup_json(const mcpg_json_span *v) {
    if (v->type == MCPG_JSON_NULL) return NULL;
    const char *p = v->type == MCPG_JSON_STRING ? v->p - 1 : v->p;
    size_t n = v->type == MCPG_JSON_STRING ? v->n + 2 : v->n;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

static char *dup_string(const mcpg_json_span *v) {
    if (v->type != MCPG_JSON_STRING) return NULL;
    char *s = malloc(v->n + 1);
    size_t len = 0;
    if (s && mcpg_json_string_decode(v, s, v->n + 1, &len) != 0) {
        free(s);
        s = NULL;
    }
    return s;
}

/* The client_call a relayed retry becomes: as calls_prepare makes one for a
 * local retry, without a call (its outcome is published instead). */
static client_call *client_call_of(upstream *up, const char *data, size_t n, const char *to, int64_t seq) {
    mcpg_json_span m, token, owner, caps, input;
    int64_t method = 0;
    if (mcpg_json_object_get(data, n, "m", &m) != 1 || mcpg_json_int64(&m, &method) != 0 ||
        mcpg_json_object_get(data, n, "token", &token) != 1 ||
        mcpg_json_object_get(data, n, "owner", &owner) != 1 ||
        mcpg_json_object_get(data, n, "caps", &caps) != 1 ||
        mcpg_json_object_get(data, n, "input", &input) != 1)
        return NULL;
    client_call *pc = calloc(1, sizeof *pc);
    if (!pc) return NULL;
    pc->tag = PCALL_TAG;
    pc->up = up;
    pc->method = (uint32_t)method;
    pc->method_name = strdup(mcpg_method_name((uint32_t)method));
    pc->params = strdup("{}");
    pc->request_state = dup_string(&token);
    pc->owner = dup_string(&owner);
    pc->caps = caps.type == MCPG_JSON_OBJECT ? dup_json(&caps) : NULL;
    pc->input_responses = input.type == MCPG_JSON_OBJECT ? dup_json(&input) : NULL;
    pc->relay_to = strdup(to);
    pc->relay_seq = (uint64_t)seq;
    up->relay->held++;
    if (!pc->method_name || !pc->params || !pc->request_state || !pc->relay_to ||
        (owner.type == MCPG_JSON_STRING && !pc->owner)) {
        calls_free(pc);
        return NULL;
    }
    return pc;
}

static void on_question(upstream *up, const char *data, size_t n) {
    mcpg_json_span v;
    char to[128];
    size_t tl = 0;
    int64_t seq = 0;
    if (mcpg_json_object_get(data, n, "to", &v) != 1 ||
        mcpg_json_string_decode(&v, to, sizeof to, &tl) != 0 ||
        strncmp(to, RELAY_SUBJECT, sizeof RELAY_SUBJECT - 1) != 0 ||
        mcpg_json_object_get(data, n, "seq", &v) != 1 || mcpg_json_int64(&v, &seq) != 0)
        return; /* nobody to answer */
    if (up->relay->held >= RELAY_HELD_MAX) {
        send_error_to(up, to, (uint64_t)seq, MCPG_RPC_SERVER_ERROR, 503,
                      "too many retries relayed to the replica holding the question");
        return;
    }
    client_call *pc = client_call_of(up, data, n, to, seq);
    job *j = pc ? calloc(1, sizeof *j) : NULL;
    if (j) {
        j->kind = JOB_CALL;
        j->pc = pc;
        if (up_post(up, j) == 0) return;
        free(j);
    }
    if (pc) calls_free(pc);
    send_error_to(up, to, (uint64_t)seq, MCPG_RPC_SERVER_ERROR, 503,
                  "the replica holding the question cannot take the retry now");
}

static void on_message(void *arg, const char *subject, const char *data, size_t n) {
    (void)subject;
    upstream *up = arg;
    mcpg_json_span k;
    char kind[4];
    size_t kl = 0;
    if (n > RELAY_MSG_MAX || mcpg_json_validate(data, n) != 0 ||
        mcpg_json_object_get(data, n, "k", &k) != 1 ||
        mcpg_json_string_decode(&k, kind, sizeof kind, &kl) != 0 || kl != 1)
        return;
    if (kind[0] == 'q') on_question(up, data, n);
    else on_reply(up, data, n, kind);
}

/* ---- worker 0's subscription and sweep ---- */

void relay_worker_start(upstream *up, mcpg_worker *w) {
    park_relay *rl = up->relay;
    if (!rl || up->h->worker_index(w) != 0) return;
    int rc = rl->ops->subscribe(rl->inst, w, rl->subject, on_message, up, &rl->sub);
    if (rc != 0) {
        rl->sub = NULL;
        up->h->log(up->self, MCPG_LOG_WARN, "cannot subscribe to %s (%s): questions parked here "
                   "are answered only through this replica", rl->subject, mcpg_strerror(rc));
    }
    if (up->h->timer_start(up->self, w, RELAY_SWEEP_MS, RELAY_SWEEP_MS, on_sweep, up,
                           &rl->sweep) != 0)
        rl->sweep = NULL;
}

/* Worker 0 stops: no reply will come; the retries still waiting fail. */
void relay_worker_stop(upstream *up, mcpg_worker *w) {
    park_relay *rl = up->relay;
    if (!rl || up->h->worker_index(w) != 0) return;
    if (rl->sub) rl->ops->unsubscribe(rl->inst, rl->sub);
    rl->sub = NULL;
    if (rl->sweep) up->h->timer_stop(rl->sweep);
    rl->sweep = NULL;
    for (;;) {
        pthread_mutex_lock(&up->lock);
        waiter *w0 = rl->waiting;
        if (w0) take_locked(up, w0);
        pthread_mutex_unlock(&up->lock);
        if (!w0) return;
        fail_taken(up, w0, MCPG_RPC_SERVER_ERROR, 503, 1, "the gateway is stopping");
    }
}
