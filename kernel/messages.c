/* Messages a call's backend sends its client before the outcome (ABI 1.1):
 * notifications (progress, log lines) and requests (sampling, elicitation,
 * roots) whose answers come back in a later POST, maybe on another loop.
 *
 * Order is the contract: the client sees a call's messages in the order the
 * backend sent them, and all of them before the outcome. Sent on the call's
 * loop with nothing queued, a message goes to the transport at once; sent
 * from any other thread it is queued on the call and the loop is posted to;
 * the queue is flushed before the call moves on (pipeline_continue, a pool
 * answer) and when it is answered (msgs_close, just before the transport's
 * complete()), so a message sent before the outcome is never lost. One sent
 * once the call is answered is refused (MCPG_ESTATE). A post still queued
 * when the call's last reference goes keeps the object until it has run.
 *
 * A request's id is minted as "mcpg-<worker>-<seq>": the worker of the call
 * that asked, so a reply arriving on any loop is posted to the right one,
 * where the worker's list of outstanding requests finds the call. */
#include "call_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the queue ---- */

void msgs_init(mcpg_call *c) { pthread_mutex_init(&c->msgs.lock, NULL); }

void msgs_destroy(mcpg_call *c) {
    for (call_msg *m = c->msgs.head, *next; m; m = next) {
        next = m->next;
        free(m);
    }
    c->msgs.head = c->msgs.tail = NULL;
    pthread_mutex_destroy(&c->msgs.lock);
}

static bool can_carry(const mcpg_call *c) { return MCPG_HAS(&c->d, message); }

/* Register a request message's id in the worker's list (on the loop). */
static void asks_register(mcpg_call *c, const char *json, size_t len);

static void fail_ask_of(mcpg_call *c, const char *json, size_t len, int status);

/* A request the transport refuses to carry is answered at once with the
 * transport's reason; a notification it refuses is dropped (logged). */
/* What the transport answered: 0, or why it did not take the message
 * (MCPG_EAGAIN: its client is that far behind). */
static int deliver_one(mcpg_call *c, const char *json, size_t len) {
    asks_register(c, json, len);
    mcpg_buf sealed = {0}; /* a task's news names it as its client knows it */
    if (task_seal_json(c, json, len, &sealed) == 0) json = sealed.data, len = sealed.len;
    int rc = c->d.message(c->d.transport_ctx, call_handle(c, CALL_STAGE_TRANSPORT), json, len);
    mcpg_buf_free(&sealed);
    if (rc == 0) return 0;
    klog(MCPG_LOG_DEBUG, "kernel", "the transport did not take a message: %s", mcpg_strerror(rc));
    fail_ask_of(c, json, len, rc);
    return rc;
}

/* The queued messages, taken off the call (under its lock). */
static call_msg *queue_take(mcpg_call *c) {
    call_msg *m = c->msgs.head;
    c->msgs.head = c->msgs.tail = NULL;
    c->msgs.count = 0;
    return m;
}

/* Each message of m to the transport while it still holds the call's
 * request (else only freed), in the order they were queued. */
static void deliver_all(mcpg_call *c, call_msg *m, bool transport_holds) {
    while (m) {
        call_msg *next = m->next;
        if (transport_holds) deliver_one(c, m->json, m->len);
        free(m);
        m = next;
    }
}

void msgs_flush(mcpg_call *c) {
    pthread_mutex_lock(&c->msgs.lock);
    call_msg *m = queue_take(c);
    pthread_mutex_unlock(&c->msgs.lock);
    deliver_all(c, m, !call_answered(c));
}

static void flush_on_loop(void *arg) {
    mcpg_call *c = arg;
    pthread_mutex_lock(&c->msgs.lock);
    c->msgs.posted = false;
    bool recycle = c->msgs.recycle_deferred;
    bool cancel = c->msgs.cancel_due;
    c->msgs.cancel_due = false;
    pthread_mutex_unlock(&c->msgs.lock);
    if (recycle) {
        msgs_flush(c); /* answered long ago: only frees */
        call_recycle(c);
        return;
    }
    msgs_flush(c);
    if (cancel) backend_cancel_if_pending(c);
}

/* Post flush_on_loop unless it is queued already; the caller holds the lock
 * and has set what it is to do. */
static void post_flush_locked(mcpg_call *c) {
    if (c->msgs.posted) return;
    c->msgs.post.fn = flush_on_loop;
    c->msgs.post.arg = c;
    c->msgs.posted = worker_post(c->w, &c->msgs.post) == 0; /* else the loop has stopped */
}

void msgs_post_cancel(mcpg_call *c) {
    pthread_mutex_lock(&c->msgs.lock);
    c->msgs.cancel_due = true;
    post_flush_locked(c);
    pthread_mutex_unlock(&c->msgs.lock);
}

bool msgs_defer_recycle(mcpg_call *c) {
    pthread_mutex_lock(&c->msgs.lock);
    bool defer = c->msgs.posted;
    c->msgs.recycle_deferred = defer;
    pthread_mutex_unlock(&c->msgs.lock);
    return defer;
}

static void fail_asks(mcpg_call *c, int status);

/* The call is being answered (finish: `answered` is already set, the
 * transport's complete() not yet called): what is queued goes out now,
 * before the answer, nothing more is taken, and requests still waiting for
 * the client are told the call ended. One critical section, so no message
 * slips in between the last flush and the close; the asks' slots are
 * visited only when the call made any (a call's usual life makes none). */
void msgs_close(mcpg_call *c) {
    pthread_mutex_lock(&c->msgs.lock);
    call_msg *m = queue_take(c);
    c->msgs.closed = true;
    bool asked = c->msgs.asked;
    pthread_mutex_unlock(&c->msgs.lock);
    deliver_all(c, m, true);
    if (asked) fail_asks(c, MCPG_ECANCELED);
}

/* Send (on the loop with an empty queue) or queue one framed message.
 * A notification sent at once returns what the transport said (a request's
 * refusal reaches its asker through its reply instead). */
static int send_msg(mcpg_call *c, mcpg_buf *framed, bool is_request) {
    bool on_loop = worker_self() == c->w;
    pthread_mutex_lock(&c->msgs.lock);
    if (c->msgs.closed) {
        pthread_mutex_unlock(&c->msgs.lock);
        return MCPG_ESTATE;
    }
    if (on_loop && !c->msgs.head) {
        pthread_mutex_unlock(&c->msgs.lock);
        int rc = deliver_one(c, framed->data, framed->len);
        return is_request ? 0 : rc;
    }
    if (c->msgs.count >= CALL_MAX_MSGS) {
        pthread_mutex_unlock(&c->msgs.lock);
        return MCPG_EAGAIN;
    }
    call_msg *m = malloc(sizeof *m + framed->len + 1);
    if (!m) {
        pthread_mutex_unlock(&c->msgs.lock);
        return MCPG_ENOMEM;
    }
    memcpy(m->json, framed->data, framed->len + 1);
    m->len = framed->len;
    m->next = NULL;
    if (c->msgs.tail) c->msgs.tail->next = m;
    else c->msgs.head = m;
    c->msgs.tail = m;
    c->msgs.count++;
    post_flush_locked(c);
    pthread_mutex_unlock(&c->msgs.lock);
    return 0;
}

static bool params_ok(const char *params, size_t plen) {
    mcpg_json_span v;
    size_t pos = 0;
    if (!params || !plen) return true;
    return mcpg_json_value(params, plen, &pos, &v) == 1 && v.type == MCPG_JSON_OBJECT;
}

/* A backend's log message reaches its caller through gateway.redact, as
 * the gateway's own log and audit do: an upstream that logs a credential
 * (its own, or one it was handed) does not show it to the client. One that
 * cannot be redacted is not sent. */
static bool is_log_message(const char *method) {
    return strcmp(method, "notifications/message") == 0;
}

int host_call_notify(mcpg_call *h, const char *method, const char *params, size_t plen) {
    mcpg_call *c = call_of(h, "call_notify");
    if (!c) return MCPG_ESTATE;
    if (!method || !params_ok(params, plen)) return MCPG_EINVAL;
    if (!can_carry(c)) return MCPG_ENOTSUP;
    mcpg_buf shown = {0}, b = {0};
    int rc = 0;
    if (params && plen && is_log_message(method)) {
        rc = redact_json_valid(c->gen->m->redact, params, plen, &shown);
        params = shown.data, plen = shown.len;
    }
    if (rc == 0) rc = mcpg__rpc_frame(&b, NULL, method, params, plen);
    if (rc == 0) rc = send_msg(c, &b, false);
    mcpg_buf_free(&b);
    mcpg_buf_free(&shown);
    return rc;
}

/* ---- requests to the client, and their replies ---- */

static atomic_uint_fast64_t ask_seq;

/* The worker's requests awaiting a reply: (seq, call, serial, slot). */
typedef struct ask_entry {
    uint64_t seq;
    mcpg_call *call;
    uint32_t serial;
    unsigned slot;
} ask_entry;

typedef struct ask_table {
    ask_entry *v;
    size_t n, cap;
} ask_table;

static ask_table tables[MCPG_MAX_WORKERS]; /* by worker index, each touched by its loop only */

/* Register the ask (*seq_out) on a live call c. */
static int ask_open(mcpg_call *c, const char *method, const char *params, size_t plen,
                    uint64_t timeout_ms, mcpg_reply_fn fn, void *arg, uint64_t *seq_out) {
    if (!method || !fn || !params_ok(params, plen)) return MCPG_EINVAL;
    if (!can_carry(c) || c->d.wire == MCPG_WIRE_STATELESS) return MCPG_ENOTSUP;
    uint64_t seq = atomic_fetch_add(&ask_seq, 1) + 1;
    uint64_t wait_ms = timeout_ms ? timeout_ms
                                  : (c->route && c->route->backend->timeout_ms
                                         ? c->route->backend->timeout_ms : 60000);
    pthread_mutex_lock(&c->msgs.lock);
    call_ask *a = NULL;
    for (unsigned i = 0; i < CALL_MAX_ASKS && !a; i++)
        if (!c->msgs.asks[i].active) a = &c->msgs.asks[i];
    if (a) *a = (call_ask){seq, fn, arg, mono_us() + wait_ms * 1000, true};
    if (a) c->msgs.asked = true;
    pthread_mutex_unlock(&c->msgs.lock);
    if (!a) return MCPG_EAGAIN;
    *seq_out = seq;
    return 0;
}

/* The ask seq taken back before anyone answered it: true when it was still
 * waiting (its fn will never run), false when an answer has claimed it
 * (answer_ask runs, or has run, its fn). */
static bool ask_take_back(mcpg_call *c, uint64_t seq) {
    bool taken = false;
    pthread_mutex_lock(&c->msgs.lock);
    for (unsigned i = 0; i < CALL_MAX_ASKS && !taken; i++)
        if (c->msgs.asks[i].active && c->msgs.asks[i].seq == seq) {
            c->msgs.asks[i].active = false;
            taken = true;
        }
    pthread_mutex_unlock(&c->msgs.lock);
    return taken;
}

/* The call can be answered between the ask's opening and its sending (from
 * a pool thread): msgs_close then runs fn with MCPG_ECANCELED, and the send
 * finds the call closed. Only one of the two may tell the module, so a
 * failed send reports its error only when it takes the ask back first. */
static int ask_send(mcpg_call *c, uint64_t seq, const char *method, const char *params,
                    size_t plen) {
    char id[48];
    snprintf(id, sizeof id, "mcpg-%u-%llu", c->w->index, (unsigned long long)seq);
    mcpg_buf b = {0};
    int rc = mcpg__rpc_frame(&b, id, method, params, plen);
    if (rc == 0) rc = send_msg(c, &b, true);
    mcpg_buf_free(&b);
    if (rc != 0 && !ask_take_back(c, seq)) rc = 0; /* fn has its answer */
    return rc;
}

/* The handle is checked once: both halves act on the same life. */
int host_call_request(mcpg_call *h, const char *method, const char *params, size_t plen,
                      uint64_t timeout_ms, mcpg_reply_fn fn, void *arg) {
    mcpg_call *c = call_of(h, "call_request");
    if (!c) return MCPG_ESTATE;
    uint64_t seq;
    int rc = ask_open(c, method, params, plen, timeout_ms, fn, arg, &seq);
    return rc ? rc : ask_send(c, seq, method, params, plen);
}

int msgs_ask_open(mcpg_call *h, const char *method, const char *params, size_t plen,
                  uint64_t timeout_ms, mcpg_reply_fn fn, void *arg, uint64_t *seq_out) {
    mcpg_call *c = call_of(h, "call_request");
    return c ? ask_open(c, method, params, plen, timeout_ms, fn, arg, seq_out) : MCPG_ESTATE;
}

int msgs_ask_send(mcpg_call *h, uint64_t seq, const char *method, const char *params,
                  size_t plen) {
    mcpg_call *c = call_of(h, "call_request");
    return c ? ask_send(c, seq, method, params, plen) : MCPG_ESTATE;
}

/* "mcpg-W-N" → W and N; false when the text is not one of our ids. */
static bool parse_id(const char *s, size_t n, unsigned *w, uint64_t *seq) {
    if (n < 8 || memcmp(s, "mcpg-", 5) != 0) return false;
    size_t i = 5;
    unsigned long long a = 0, b = 0;
    if (i >= n || s[i] < '0' || s[i] > '9') return false;
    while (i < n && s[i] >= '0' && s[i] <= '9' && a < 100000) a = a * 10 + (unsigned)(s[i++] - '0');
    if (i >= n || s[i++] != '-' || i >= n) return false;
    while (i < n && s[i] >= '0' && s[i] <= '9' && b < (1ull << 60)) b = b * 10 + (unsigned)(s[i++] - '0');
    if (i != n) return false;
    *w = (unsigned)a;
    *seq = b;
    return true;
}

static void table_add(mcpg_worker *w, ask_entry e) {
    ask_table *t = &tables[w->index];
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        ask_entry *v = realloc(t->v, cap * sizeof *v);
        if (!v) return; /* the request then times out on its call */
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n++] = e;
}

static void table_remove(mcpg_worker *w, uint64_t seq) {
    ask_table *t = &tables[w->index];
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].seq == seq) {
            t->v[i] = t->v[--t->n];
            return;
        }
}

static void asks_register(mcpg_call *c, const char *json, size_t len) {
    mcpg_json_span id;
    unsigned wi;
    uint64_t seq;
    if (mcpg_json_object_get(json, len, "id", &id) != 1 || id.type != MCPG_JSON_STRING ||
        !parse_id(id.p, id.n, &wi, &seq))
        return; /* a notification */
    pthread_mutex_lock(&c->msgs.lock);
    for (unsigned i = 0; i < CALL_MAX_ASKS; i++)
        if (c->msgs.asks[i].active && c->msgs.asks[i].seq == seq)
            table_add(c->w, (ask_entry){seq, c, atomic_load(&c->serial), i});
    pthread_mutex_unlock(&c->msgs.lock);
}

/* Run the ask's fn once with `reply`, on the call's loop. */
static void answer_ask(mcpg_call *c, unsigned slot, const mcpg_reply *reply) {
    pthread_mutex_lock(&c->msgs.lock);
    call_ask a = c->msgs.asks[slot];
    c->msgs.asks[slot].active = false;
    pthread_mutex_unlock(&c->msgs.lock);
    if (!a.active) return;
    table_remove(c->w, a.seq);
    a.fn(a.arg, reply);
}

/* The ask whose request is json, if it is one, answered with status. */
static void fail_ask_of(mcpg_call *c, const char *json, size_t len, int status) {
    mcpg_json_span id;
    unsigned wi;
    uint64_t seq;
    if (mcpg_json_object_get(json, len, "id", &id) != 1 || id.type != MCPG_JSON_STRING ||
        !parse_id(id.p, id.n, &wi, &seq))
        return;
    unsigned slot = CALL_MAX_ASKS;
    pthread_mutex_lock(&c->msgs.lock);
    for (unsigned i = 0; i < CALL_MAX_ASKS; i++)
        if (c->msgs.asks[i].active && c->msgs.asks[i].seq == seq) slot = i;
    pthread_mutex_unlock(&c->msgs.lock);
    mcpg_reply r = {.size = sizeof r, .status = status};
    if (slot < CALL_MAX_ASKS) answer_ask(c, slot, &r);
}

static void fail_asks(mcpg_call *c, int status) {
    mcpg_reply r = {.size = sizeof r, .status = status};
    for (unsigned i = 0; i < CALL_MAX_ASKS; i++) answer_ask(c, i, &r);
}

/* An entry still waiting: its call alive in the same life, its ask active. */
static bool ask_waiting(const ask_entry *e, uint64_t *deadline) {
    mcpg_call *c = e->call;
    if (atomic_load(&c->serial) != e->serial) return false;
    pthread_mutex_lock(&c->msgs.lock);
    const call_ask *a = &c->msgs.asks[e->slot];
    bool waiting = a->active && a->seq == e->seq;
    *deadline = a->deadline_us;
    pthread_mutex_unlock(&c->msgs.lock);
    return waiting;
}

/* On a loop, periodically: requests whose client never answered. An entry
 * is taken off the list before its fn runs (which may ask again). */
void asks_expire(mcpg_worker *w) {
    ask_table *t = &tables[w->index];
    uint64_t now = mono_us();
    size_t i = 0;
    while (i < t->n) {
        ask_entry e = t->v[i];
        uint64_t deadline = 0;
        bool waiting = ask_waiting(&e, &deadline);
        if (waiting && now < deadline) {
            i++;
            continue;
        }
        t->v[i] = t->v[--t->n];
        if (!waiting) continue;
        mcpg_reply r = {.size = sizeof r, .status = MCPG_ETIMEDOUT};
        answer_ask(e.call, e.slot, &r);
    }
}

void asks_free(mcpg_worker *w) {
    free(tables[w->index].v);
    tables[w->index] = (ask_table){0};
}

/* A reply travelling to the loop of the call that asked. */
typedef struct reply_job {
    mcpg_post post;
    mcpg_worker *w;
    uint64_t seq;
    size_t session_len, body_len;
    char data[]; /* session, then body */
} reply_job;

/* On the asking call's loop. */
static void reply_arrived(void *arg) {
    reply_job *j = arg;
    ask_table *t = &tables[j->w->index];
    for (size_t i = 0; i < t->n; i++) {
        ask_entry e = t->v[i];
        if (e.seq != j->seq) continue;
        mcpg_call *c = e.call;
        const mcpg_buf *s = &c->session; /* whole: ids of any length, compared to the byte */
        bool same = atomic_load(&c->serial) == e.serial && s->len == j->session_len &&
                    (!s->len || memcmp(s->data, j->data, s->len) == 0);
        if (same) {
            char msg[256];
            mcpg_reply r;
            mcpg__rpc_reply(j->data + j->session_len, j->body_len, &r, msg, sizeof msg);
            answer_ask(c, e.slot, &r);
        }
        break;
    }
    free(j);
}

int host_reply_submit(mcpg_worker *w, const char *session, size_t slen, const char *body,
                      size_t len) {
    (void)w;
    mcpg_json_span id, v;
    unsigned wi;
    uint64_t seq;
    if (!body || mcpg_json_validate(body, len) != 0 ||
        mcpg_json_object_get(body, len, "id", &id) != 1 ||
        (mcpg_json_object_get(body, len, "result", &v) != 1 &&
         mcpg_json_object_get(body, len, "error", &v) != 1))
        return MCPG_EPROTO;
    if (id.type != MCPG_JSON_STRING || !parse_id(id.p, id.n, &wi, &seq) || wi >= kernel.n_workers)
        return MCPG_ENOENT;
    reply_job *j = malloc(sizeof *j + slen + len + 1);
    if (!j) return MCPG_ENOMEM;
    j->w = &kernel.workers[wi];
    j->seq = seq;
    j->session_len = session ? slen : 0;
    j->body_len = len;
    if (j->session_len) memcpy(j->data, session, slen);
    memcpy(j->data + j->session_len, body, len);
    j->data[j->session_len + len] = '\0';
    j->post.fn = reply_arrived;
    j->post.arg = j;
    if (worker_post(j->w, &j->post) != 0) {
        free(j);
        return MCPG_EUNAVAIL;
    }
    return 0;
}
