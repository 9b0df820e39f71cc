/* events: POST /webhooks/events/{source}.
 *
 * The checks, each with its own answer: a source that is configured and on
 * (404), the body's size (413), the signature (401, naming the header at
 * fault), the body (400, naming the field), the type the source may post
 * (403), the inbox's room (503 + Retry-After). Then the post waits on its
 * loop for an inbox slot: the posts a loop holds when its last counter step
 * came back share the next one (incr by their number), so under load a
 * slot costs a fraction of a store operation. Each row is one put; the
 * post is answered 202 once the store has it, and the owner is told once
 * per step ("the inbox has rows"). A slot whose row cannot be written is
 * given up (an empty row), so the owner does not wait for it. */
#include "events.h"

#include <mcpg/whsig.h>
#include <openssl/sha.h>

#include <stdio.h>
#include <string.h>

struct ev_post {
    ev_post *next;
    ev_loop *l;
    mcpg_call *call;
    uint64_t slot;
    mcpg_buf row; /* "<id key>\n<occurrence>" */
    char event_id[EV_ID_MAX + 2]; /* the eventId as a JSON string, for the 202 */
};

/* ---- answers ---------------------------------------------------------------- */

static mcpg_status refuse(events *ev, mcpg_call *call, int http, int64_t code, const char *msg) {
    ev->host->call_error(call, code, msg, NULL);
    ev->host->call_set_http(call, http, http == 503 ? 1 : 0);
    if (ev->m_refused) ev->host->metric_add(ev->m_refused, 0, 1);
    return MCPG_DENY;
}

static void post_free(events *ev, ev_post *p) {
    ev->host->buf_free(&p->row);
    ev->host->free(p);
}

static void post_answer(events *ev, ev_post *p, int ok, const char *why) {
    const mcpg_host *h = ev->host;
    if (ok) {
        mcpg_buf *b = h->call_result_buf(p->call);
        int rc = b ? h->buf_printf(b, "{\"status\":\"accepted\",\"eventId\":%s}", p->event_id) : -1;
        h->call_set_http(p->call, 202, 0);
        if (ev->m_accepted) h->metric_add(ev->m_accepted, 0, 1);
        h->call_resume(p->call, rc ? (refuse(ev, p->call, 503, MCPG_RPC_SERVER_ERROR, "out of memory"),
                                      MCPG_DENY)
                                   : MCPG_CONTINUE);
    } else {
        refuse(ev, p->call, 503, MCPG_RPC_SERVER_ERROR, why);
        h->call_resume(p->call, MCPG_DENY);
    }
    post_free(ev, p);
}

/* ---- checks ------------------------------------------------------------------- */

static const ev_source *find_source(const events *ev, const char *name) {
    for (size_t i = 0; i < ev->n_sources; i++)
        if (ev->sources[i].name && !strcmp(ev->sources[i].name, name))
            return ev->sources[i].key_len ? &ev->sources[i] : NULL;
    return NULL;
}

static const char *verify(events *ev, mcpg_call *call, const ev_source *s, const char *body,
                          size_t bn) {
    const mcpg_host *h = ev->host;
    size_t idn = 0, tsn = 0, sn = 0;
    const char *id = h->call_header(call, "webhook-id", &idn);
    const char *ts = h->call_header(call, "webhook-timestamp", &tsn);
    const char *sig = h->call_header(call, "webhook-signature", &sn);
    return mcpg_whsig_verify(s->key, s->key_len, id, idn, ts, tsn, sig, sn, body, bn,
                             h->wall_us() / 1000000, MCPG_WHSIG_TOLERANCE_S);
}

static int may_post(const ev_source *s, int type) {
    for (size_t i = 0; i < s->n_types; i++)
        if ((int)s->types[i] == type) return 1;
    return 0;
}

/* "mcpg.ev.id.<source>.<first 128 bits of sha256(id), hex>". */
static int id_key(const mcpg_host *h, mcpg_buf *b, const char *source, const char *id, size_t n) {
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)id, n, d);
    char x[33];
    mcpg_hex(d, 16, x);
    x[32] = '\0';
    return h->buf_printf(b, EV_KEY_ID "%s.%s\n", source, x);
}

/* The body's event as an inbox row, or the status and why it is refused. */
static int build_row(events *ev, mcpg_call *call, const ev_source *s, const char *body, size_t bn,
                     ev_post *p, const char **why) {
    const mcpg_host *h = ev->host;
    mcpg_json_span name, data, id, ts;
    if (h->json_validate(body, bn) < 0 || !bn || body[0] != '{')
        return *why = "body: expected a JSON object", 400;
    /* one reading, as for every request: a member named twice (or a name
     * with a NUL) is refused, since a reader downstream may take the other */
    int u = mcpg_json_unique(body, bn, NULL);
    if (u == 1) return *why = "body: a member is named twice", 400;
    if (u != 0) return *why = "body: a member name holds a NUL character", 400;
    if (h->json_object_get(body, bn, "name", &name) != 1 || name.type != MCPG_JSON_STRING)
        return *why = "body: name (the event type, a string) is required", 400;
    int type = name.escaped ? -1 : ev_type_index(ev, name.p, name.n);
    if (type < 0) return *why = "body: name is not an event type of this gateway", 400;
    if (!may_post(s, type)) return *why = "this source may not post that event type", 403;
    if (h->json_object_get(body, bn, "data", &data) != 1 || data.type != MCPG_JSON_OBJECT)
        return *why = "body: data (an object) is required", 400;
    int has_id = h->json_object_get(body, bn, "id", &id) == 1;
    if (has_id && (id.type != MCPG_JSON_STRING || !id.n || id.n > EV_ID_MAX))
        return *why = "body: id must be a non-empty string of at most 256 bytes", 400;
    int has_ts = h->json_object_get(body, bn, "timestamp", &ts) == 1;
    if (has_ts && (ts.type != MCPG_JSON_STRING || ts.n > 64))
        return *why = "body: timestamp must be an ISO 8601 string", 400;
    const char *idp;
    size_t idn = 0;
    mcpg_buf idtext = {0};
    if (has_id) {
        idp = id.p;
        idn = id.n;
    } else { /* the webhook-id, checked present by the signature */
        idp = h->call_header(call, "webhook-id", &idn);
        if (!idp || idn > EV_ID_MAX) return *why = "webhook-id: longer than 256 bytes", 400;
    }
    if (h->buf_append_json_string(&idtext, idp, idn) || idtext.len > sizeof p->event_id - 1) {
        h->buf_free(&idtext);
        return *why = "body: id is too long once escaped", 400;
    }
    memcpy(p->event_id, idtext.data, idtext.len + 1);
    char now[48];
    if (!has_ts) ev_timestamp_now(h, now);
    mcpg_buf *b = &p->row;
    int rc = id_key(h, b, s->name, idp, idn);
    rc |= h->buf_append(b, "{\"eventId\":", 11) || h->buf_append(b, idtext.data, idtext.len);
    rc |= h->buf_append(b, ",\"name\":", 8) || h->buf_append(b, name.p - 1, name.n + 2);
    rc |= h->buf_append(b, ",\"timestamp\":", 13);
    rc |= has_ts ? h->buf_append(b, ts.p - 1, ts.n + 2) : h->buf_printf(b, "\"%s\"", now);
    rc |= h->buf_append(b, ",\"data\":", 8) || h->buf_append(b, data.p, data.n);
    rc |= h->buf_append(b, "}", 1);
    h->buf_free(&idtext);
    if (rc) return *why = "out of memory", 503;
    return 0;
}

/* The inbox is full as far as this replica has heard. */
static int inbox_full(const events *ev) {
    uint64_t tail = atomic_load(&ev->inbox_tail), done = atomic_load(&ev->inbox_done);
    return tail > done && tail - done >= (uint64_t)ev->cfg->inbox_max_rows;
}

/* ---- slots and rows -------------------------------------------------------------- */

static void reserve(ev_loop *l);

/* The owner's word from a counter step: "I\n" then "<slot> <len> <row>\n"
 * for each stored row (length 0: a slot given up), while it fits; the
 * owner reads the others from the store. */
#define INBOX_WORD_MAX (256u << 10)

typedef struct ev_batch {
    ev_loop *l;
    ev_post *posts;   /* taken from the loop's waiting list */
    size_t n, left;   /* posts, and rows not yet answered */
    mcpg_buf word;
} ev_batch;

static void word_add(const mcpg_host *h, ev_batch *b, uint64_t slot, const mcpg_buf *row) {
    size_t n = row ? row->len : 0;
    if (b->word.len + n + 48 > INBOX_WORD_MAX) return;
    if (h->buf_printf(&b->word, "%llu %zu ", (unsigned long long)slot, n) ||
        (n && h->buf_append(&b->word, row->data, n)) || h->buf_append(&b->word, "\n", 1))
        b->word.len = 0; /* out of memory: no word, the owner reads the store */
}

typedef struct ev_put {
    ev_batch *b;
    ev_post *p;
} ev_put;

static void batch_done(ev_batch *b) {
    ev_loop *l = b->l;
    events *ev = l->ev;
    if (!l->stopped) {
        const char *w = b->word.len ? b->word.data : "I\n";
        (void)ev->co->publish(ev->co_inst, l->w, EV_SUBJ_INBOX, w, b->word.len ? b->word.len : 2,
                              ev_noop_cb, NULL);
    }
    ev->host->buf_free(&b->word);
    ev->host->free(b);
    l->reserving = false;
    if (l->n_waiting && !l->stopped) reserve(l);
}

static void give_up_slot(events *ev, ev_loop *l, uint64_t slot) {
    char key[48];
    size_t kn = ev_key_u64(key, sizeof key, EV_KEY_IN, slot);
    (void)ev->co->put(ev->co_inst, l->w, key, kn, "", 0, (uint64_t)ev->cfg->retention_ms,
                      ev_noop_cb, NULL);
}

static void on_row_put(void *arg, int status, const mcpg_coord_value *v) {
    ev_put *u = arg;
    ev_batch *b = u->b;
    events *ev = b->l->ev;
    (void)v;
    if (status) give_up_slot(ev, b->l, u->p->slot);
    word_add(ev->host, b, u->p->slot, status ? NULL : &u->p->row);
    post_answer(ev, u->p, status == 0, "the coordinator cannot take the event now");
    ev->host->free(u);
    if (--b->left == 0) batch_done(b);
}

static void put_row(ev_batch *b, ev_post *p) {
    events *ev = b->l->ev;
    const mcpg_host *h = ev->host;
    uint64_t done = atomic_load(&ev->inbox_done);
    ev_put *u = h->alloc(sizeof *u);
    if (!u || (p->slot > done && p->slot - done > (uint64_t)ev->cfg->inbox_max_rows)) {
        h->free(u);
        give_up_slot(ev, b->l, p->slot);
        word_add(h, b, p->slot, NULL);
        post_answer(ev, p, 0, "the events inbox is full, retry later");
        if (--b->left == 0) batch_done(b);
        return;
    }
    u->b = b;
    u->p = p;
    char key[48];
    size_t kn = ev_key_u64(key, sizeof key, EV_KEY_IN, p->slot);
    int rc = ev->co->put(ev->co_inst, b->l->w, key, kn, p->row.data, p->row.len,
                         (uint64_t)ev->cfg->retention_ms, on_row_put, u);
    if (rc < 0) on_row_put(u, rc, NULL);
}

static void on_reserved(void *arg, int status, const mcpg_coord_value *v) {
    ev_batch *b = arg;
    events *ev = b->l->ev;
    if (status) {
        for (ev_post *p = b->posts, *next; p; p = next) {
            next = p->next;
            post_answer(ev, p, 0, "the coordinator cannot take the event now");
        }
        ev_loop *l = b->l;
        ev->host->buf_free(&b->word);
        ev->host->free(b);
        l->reserving = false;
        if (l->n_waiting && !l->stopped) reserve(l);
        return;
    }
    uint64_t last = (uint64_t)v->number, slot = last - b->n + 1;
    uint64_t seen = atomic_load(&ev->inbox_tail);
    while (last > seen && !atomic_compare_exchange_weak(&ev->inbox_tail, &seen, last)) {
    }
    ev_post *p = b->posts;
    b->posts = NULL;
    for (ev_post *next; p; p = next, slot++) {
        next = p->next;
        p->slot = slot;
        put_row(b, p);
    }
}

/* Take every waiting post into one counter step. */
static void reserve(ev_loop *l) {
    events *ev = l->ev;
    ev_batch *b = ev->host->calloc(1, sizeof *b);
    if (!b) return; /* tried again when the next post arrives */
    b->l = l;
    if (ev->host->buf_append(&b->word, "I\n", 2)) b->word.len = 0;
    b->posts = l->waiting_head;
    b->n = b->left = l->n_waiting;
    l->waiting_head = l->waiting_tail = NULL;
    l->n_waiting = 0;
    l->reserving = true;
    int rc = ev->co->incr(ev->co_inst, l->w, EV_KEY_IN_SEQ, sizeof EV_KEY_IN_SEQ - 1,
                          (int64_t)b->n, 0, on_reserved, b);
    if (rc < 0) on_reserved(b, rc, NULL);
}

mcpg_status ev_webhook(events *ev, mcpg_call *call, const char *source) {
    const mcpg_host *h = ev->host;
    const ev_source *s = find_source(ev, source);
    if (!s) return refuse(ev, call, 404, MCPG_RPC_NOT_FOUND, "no such event source");
    size_t bn = 0;
    const char *body = h->call_params(call, &bn);
    if (bn > EV_MAX_BODY) return refuse(ev, call, 413, MCPG_RPC_INVALID_PARAMS, "body: larger than 65536 bytes");
    const char *bad = verify(ev, call, s, body, bn);
    if (bad) return refuse(ev, call, 401, MCPG_RPC_UNAUTHENTICATED, bad);
    ev_loop *l = &ev->loops[h->worker_index(h->call_worker(call))];
    if (inbox_full(ev) || l->stopped)
        return refuse(ev, call, 503, MCPG_RPC_SERVER_ERROR, "the events inbox is full, retry later");
    ev_post *p = h->calloc(1, sizeof *p);
    if (!p) return refuse(ev, call, 503, MCPG_RPC_SERVER_ERROR, "out of memory");
    const char *why = NULL;
    int status = build_row(ev, call, s, body, bn, p, &why);
    if (status) {
        post_free(ev, p);
        return refuse(ev, call, status, status == 403 ? MCPG_RPC_FORBIDDEN : MCPG_RPC_INVALID_PARAMS, why);
    }
    p->l = l;
    p->call = call;
    if (l->waiting_tail) l->waiting_tail->next = p;
    else l->waiting_head = p;
    l->waiting_tail = p;
    l->n_waiting++;
    if (!l->reserving) reserve(l);
    return MCPG_PENDING;
}

/* The loop stops: posts still waiting for a slot are refused (their
 * producers retry elsewhere). */
void ev_inbound_stop(ev_loop *l) {
    for (ev_post *p = l->waiting_head, *next; p; p = next) {
        next = p->next;
        post_answer(l->ev, p, 0, "the gateway is stopping, retry later");
    }
    l->waiting_head = l->waiting_tail = NULL;
    l->n_waiting = 0;
}
