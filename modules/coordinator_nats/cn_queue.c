/* coordinator_nats: from the loops to the KV threads and back, in order.
 *
 * kv_threads threads each run one KV round trip at a time. A key's ops all
 * go to one thread (by a hash of the key), so one key's ops take effect in
 * the order they were made; ops on different keys run side by side.
 *
 * Answers come back to their loop in the order that loop made the ops: each
 * op takes the loop's next sequence number, and an answer that arrives early
 * waits in the loop's ring (queue_max slots: no more ops are in flight) until
 * the ones before it have been answered. A scan or a publish is a barrier:
 * it is handed to a thread only when every earlier op of its loop has been
 * answered, so a publish is sent after the writes before it took effect (a
 * "changed" message never overtakes its change) and a scan sees the loop's
 * own earlier writes. */
#include "cn.h"

#include <string.h>

typedef struct cn_thread {
    cn *c;
    pthread_t t;
    pthread_cond_t cv;
    cn_op *head, *tail;
    int started;
} cn_thread;

struct cn_worker {
    uint64_t next_seq, deliver_seq; /* on the loop's thread only */
    cn_op **ring;
    atomic_int stopped;
};

static void op_free(cn *c, cn_op *op) {
    c->h->free(op->data);
    c->h->free(op->items);
    c->h->free(op);
}

static void live_unlink(cn *c, cn_op *op) {
    if (op->live_prev) op->live_prev->live_next = op->live_next;
    else c->live = op->live_next;
    if (op->live_next) op->live_next->live_prev = op->live_prev;
}

static uint32_t key_hash(const char *k, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h;
}

/* Under c->mu. */
static void thread_push(cn *c, cn_op *op) {
    cn_thread *t = &c->threads[key_hash(op->key, op->klen) % c->nthreads];
    op->next = NULL;
    if (t->tail) t->tail->next = op;
    else t->head = op;
    t->tail = op;
    pthread_cond_signal(&t->cv);
}

static void *kv_thread(void *arg) {
    cn_thread *t = arg;
    cn *c = t->c;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!t->head && !c->stopping) pthread_cond_wait(&t->cv, &c->mu);
        cn_op *op = t->head;
        if (!op) break;
        t->head = op->next;
        if (!t->head) t->tail = NULL;
        pthread_mutex_unlock(&c->mu);
        cn_kv_run(c, op);
        op->state = CN_OP_DONE;
        int posted = c->h->worker_post(op->w, &op->post) == 0;
        pthread_mutex_lock(&c->mu);
        if (!posted) { /* its loop has stopped: nobody to answer */
            live_unlink(c, op);
            c->inflight--;
            op_free(c, op);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- on the loop ---------------------------------------------------------------- */

static void answer(cn *c, cn_op *op) {
    pthread_mutex_lock(&c->mu);
    live_unlink(c, op);
    c->inflight--;
    pthread_mutex_unlock(&c->mu);
    if (op->kind == CN_SCAN) {
        for (size_t i = 0; i < op->nitems && op->status == 0; i++) {
            const cn_scan_item *it = &op->items[i];
            mcpg_coord_value v = {.size = sizeof v, .data = op->data + it->off, .len = it->len,
                                  .revision = it->revision};
            op->each_cb(op->arg, 0, &v);
        }
    }
    mcpg_coord_value v = {.size = sizeof v, .data = op->kind == CN_SCAN ? NULL : op->data,
                          .len = op->kind == CN_SCAN ? 0 : op->len, .revision = op->revision,
                          .number = op->number};
    op->cb(op->arg, op->status, &v);
    op_free(c, op);
}

/* Answer what is next in order; a barrier whose turn came goes to its thread. */
static void drain(cn *c, cn_worker *wk) {
    size_t cap = (size_t)c->cfg->queue_max;
    cn_op *op;
    while ((op = wk->ring[wk->deliver_seq % cap]) != NULL) {
        if (op->state == CN_OP_WAITING) { /* a barrier: everything before it is answered */
            op->state = CN_OP_QUEUED;
            pthread_mutex_lock(&c->mu);
            thread_push(c, op);
            pthread_mutex_unlock(&c->mu);
            return;
        }
        if (op->state != CN_OP_DONE) return;
        wk->ring[wk->deliver_seq % cap] = NULL;
        wk->deliver_seq++;
        answer(c, op);
    }
}

/* The post: an op done (or a barrier) reached its loop. */
static void arrive(void *arg) {
    cn_op *op = arg;
    cn *c = op->cn;
    cn_worker *wk = &c->workers[c->h->worker_index(op->w)];
    wk->ring[op->seq % (size_t)c->cfg->queue_max] = op;
    if (op->seq == wk->deliver_seq) drain(c, wk);
}

/* On w's loop: 0, MCPG_EAGAIN (queue_max in flight), MCPG_ESTATE (stopping).
 * The op is freed on failure. */
int cn_queue_submit(cn *c, cn_op *op) {
    uint32_t wi = c->h->worker_index(op->w);
    cn_worker *wk = &c->workers[wi];
    int barrier = op->kind == CN_SCAN || op->kind == CN_PUBLISH;
    op->post = (mcpg_post){.fn = arrive, .arg = op};
    pthread_mutex_lock(&c->mu);
    int rc = !c->running || c->stopping ? MCPG_ESTATE
           : c->inflight >= (size_t)c->cfg->queue_max ? MCPG_EAGAIN : 0;
    if (rc) {
        pthread_mutex_unlock(&c->mu);
        op_free(c, op);
        return rc;
    }
    op->seq = wk->next_seq++;
    op->state = barrier ? CN_OP_WAITING : CN_OP_QUEUED;
    c->inflight++;
    op->live_prev = NULL;
    op->live_next = c->live;
    if (c->live) c->live->live_prev = op;
    c->live = op;
    if (!barrier) thread_push(c, op);
    pthread_mutex_unlock(&c->mu);
    /* a barrier first comes back to the loop (never answered inside the op) */
    if (barrier && c->h->worker_post(op->w, &op->post) != 0) {
        pthread_mutex_lock(&c->mu);
        live_unlink(c, op);
        c->inflight--;
        wk->next_seq--;
        pthread_mutex_unlock(&c->mu);
        op_free(c, op);
        return MCPG_ESTATE;
    }
    return 0;
}

int cn_worker_ok(cn *c, mcpg_worker *w) {
    if (!w || c->h->worker_current() != w) return 0;
    uint32_t i = c->h->worker_index(w);
    return i < c->nworkers && !atomic_load(&c->workers[i].stopped);
}

void cn_worker_stopped(cn *c, mcpg_worker *w) {
    uint32_t i = c->h->worker_index(w);
    if (i < c->nworkers) atomic_store(&c->workers[i].stopped, 1);
}

/* ---- lifecycle --------------------------------------------------------------------- */

int cn_queue_new(cn *c) {
    size_t nw = c->nworkers ? c->nworkers : 1;
    c->workers = c->h->calloc(nw, sizeof *c->workers);
    c->nthreads = (uint32_t)c->cfg->kv_threads;
    c->threads = c->h->calloc(c->nthreads, sizeof *c->threads);
    if (!c->workers || !c->threads) return MCPG_ENOMEM;
    for (size_t i = 0; i < c->nworkers; i++) {
        c->workers[i].ring = c->h->calloc((size_t)c->cfg->queue_max, sizeof(cn_op *));
        if (!c->workers[i].ring) return MCPG_ENOMEM;
    }
    for (uint32_t i = 0; i < c->nthreads; i++) {
        c->threads[i].c = c;
        pthread_cond_init(&c->threads[i].cv, NULL);
    }
    return 0;
}

int cn_queue_start(cn *c) {
    for (uint32_t i = 0; i < c->nthreads; i++) {
        if (pthread_create(&c->threads[i].t, NULL, kv_thread, &c->threads[i]) != 0)
            return MCPG_ENOMEM;
        c->threads[i].started = 1;
    }
    pthread_mutex_lock(&c->mu);
    c->running = 1;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* Join the threads; what they had not started is dropped (no loop is left
 * to answer it). */
void cn_queue_stop(cn *c) {
    if (!c->threads) return;
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    c->running = 0;
    for (uint32_t i = 0; i < c->nthreads; i++) pthread_cond_broadcast(&c->threads[i].cv);
    pthread_mutex_unlock(&c->mu);
    for (uint32_t i = 0; i < c->nthreads; i++)
        if (c->threads[i].started) pthread_join(c->threads[i].t, NULL), c->threads[i].started = 0;
}

/* At destroy: every op not answered (queued, or posted to loops that ended). */
void cn_queue_free(cn *c) {
    while (c->live) {
        cn_op *op = c->live;
        live_unlink(c, op);
        op_free(c, op);
    }
    for (size_t i = 0; c->workers && i < c->nworkers; i++) c->h->free(c->workers[i].ring);
    for (uint32_t i = 0; c->threads && i < c->nthreads; i++) pthread_cond_destroy(&c->threads[i].cv);
    c->h->free(c->workers);
    c->h->free(c->threads);
}

void cn_op_free(cn *c, cn_op *op) { op_free(c, op); }
