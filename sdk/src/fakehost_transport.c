/* The fake host's transport side: host->call_submit (routed to a backend,
 * or answered as the test's submit hook decides), call_cancel,
 * call_outcome and call_release; the listener that hands accepted sockets
 * to a transport's conn_adopt; drain; and the counts tests read. */
#define _GNU_SOURCE /* accept4 */
#include "fakehost_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LISTEN_BACKLOG 512
#define ACCEPT_BATCH 64 /* per wake-up, as the kernel: other handles get their turn */

/* A completion the submit hook put off (MCPG_FAKEHOST_LATER). */
struct fh_later {
    uv_timer_t t;
    fh_call *c;
    uint16_t serial; /* the life it completes: a call released early is left alone */
    fh_later *next, **pprev;
};

struct fh_listener {
    uv_poll_t poll;
    int fd;
    mcpg_instance *inst;
};

/* ---- completing a submitted call ------------------------------------------- */

/* On the loop. The transport usually releases the call inside complete():
 * c may be gone when this returns. */
void fh_complete_submitted(fh_call *c) {
    if (!c->submitted || c->completed) return;
    mcpg_fakehost *fh = c->fh;
    c->completed = 1;
    fh_stat_add(&fh->st.completed, 1);
    if (c->in_submit) fh_stat_add(&fh->st.completed_in_submit, 1);
    c->d.complete(c->d.transport_ctx, fh_handle(c, CALL_STAGE_TRANSPORT));
}

static void later_closed(uv_handle_t *h) { free(h->data); }

static void later_drop(fh_later *l) {
    *l->pprev = l->next;
    if (l->next) l->next->pprev = l->pprev;
    uv_close((uv_handle_t *)&l->t, later_closed);
}

static void later_fire(uv_timer_t *t) {
    fh_later *l = t->data;
    fh_call *c = l->c;
    int same_life = atomic_load(&c->alive) == l->serial;
    later_drop(l);
    if (same_life) fh_complete_submitted(c);
}

static int later_start(mcpg_fakehost *fh, fh_call *c, uint64_t delay_ms) {
    fh_later *l = calloc(1, sizeof *l);
    if (!l) return MCPG_ENOMEM;
    l->c = c;
    l->serial = c->serial;
    uv_timer_init(&fh->loop, &l->t);
    l->t.data = l;
    l->next = fh->laters;
    if (fh->laters) fh->laters->pprev = &l->next;
    l->pprev = &fh->laters;
    fh->laters = l;
    uv_update_time(&fh->loop); /* the loop may have been idle: count from now */
    uv_timer_start(&l->t, later_fire, delay_ms, 0);
    return 0;
}

void fh_laters_cancel(mcpg_fakehost *fh) {
    while (fh->laters) later_drop(fh->laters);
}

/* ---- call_submit ------------------------------------------------------------ */

/* tools/list from the routed backend's list_tools, as {"tools":[...]}. */
static void answer_tools_list(mcpg_fakehost *fh, fh_call *c) {
    mcpg_buf list = {0};
    int rc = fh->route ? mcpg_fakehost_list(fh, fh->route, MCPG_METHOD_TOOLS_LIST, &list) : 0;
    if (rc)
        fh_call_error(c, MCPG_RPC_INTERNAL_ERROR, "list_tools failed", NULL);
    else if (mcpg_buf_printf(&c->result, "{\"tools\":%s}", list.len ? list.data : "[]"))
        fh_call_error(c, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    mcpg_buf_free(&list);
    c->dispatched = 1;
    fh_call_finish(c, rc ? MCPG_DENY : MCPG_CONTINUE);
}

static void route_submitted(mcpg_fakehost *fh, fh_call *c) {
    if (c->method_id == MCPG_METHOD_TOOLS_LIST) {
        answer_tools_list(fh, c);
        return;
    }
    int st = fh->route ? fh_call_dispatch(fh, fh->route, c) : MCPG_ENOTSUP;
    if (st >= 0) return; /* fh_call_finish completes it, now or later */
    char msg[160];
    snprintf(msg, sizeof msg, "Method not found: %s", c->method);
    fh_call_error(c, MCPG_RPC_METHOD_NOT_FOUND, msg, NULL);
    c->dispatched = 1;
    fh_call_finish(c, MCPG_DENY);
}

static void answer(mcpg_fakehost *fh, fh_call *c, const mcpg_fakehost_plan *plan) {
    switch (plan->answer) {
    case MCPG_FAKEHOST_NOW: fh_complete_submitted(c); return;
    case MCPG_FAKEHOST_LATER:
        if (later_start(fh, c, plan->delay_ms) != 0) fh_complete_submitted(c);
        return;
    case MCPG_FAKEHOST_ROUTE: route_submitted(fh, c); return;
    default:
        fh_fail(fh, "the submit hook chose answer %d, which is none of MCPG_FAKEHOST_*: routed",
                (int)plan->answer);
        route_submitted(fh, c);
    }
}

/* The v1.0 desc ends with complete(), which is always called. */
static int desc_valid(const mcpg_call_desc *d) {
    return d->size >= offsetof(mcpg_call_desc, complete) + sizeof d->complete && d->complete &&
           d->method;
}

static int refused(mcpg_fakehost *fh, int rc) {
    fh_stat_add(&fh->st.refused, 1);
    return rc;
}

/* The call the desc describes, holding what it points to (the desc is read
 * up to its size: a transport built on older headers has a shorter one). */
static fh_call *submit_make(mcpg_fakehost *fh, const mcpg_call_desc *d) {
    fh_call *c = fh_call_make(fh, d->method, d->method_len, d->name, d->name_len, d->args_json,
                              d->args_len, d->id_json, d->id_len);
    if (!c) return NULL;
    size_t n = d->size < sizeof c->d ? d->size : sizeof c->d;
    memcpy(&c->d, d, n); /* c->d was zeroed with the object */
    c->wire = d->wire;
    c->submitted = 1;
    if (d->params_json) { /* the transport's own text, as the kernel hands it on */
        char *p = fh_dup_n(d->params_json, d->params_len);
        if (!p) {
            fh_call_retire(c);
            return NULL;
        }
        free(c->params);
        c->params = p;
        c->params_len = d->params_len;
    }
    return c;
}

static int table_full(mcpg_fakehost *fh) {
    return !fh->free_calls && atomic_load(&fh->n_slabs) >= FH_MAX_SLABS;
}

static int host_call_submit(mcpg_worker *w, const mcpg_call_desc *d, mcpg_call **call_out) {
    mcpg_fakehost *fh = fh_the;
    int rc = fh_loop_only(fh, w, "host->call_submit");
    if (rc) return rc;
    if (!d || !call_out || !desc_valid(d)) return MCPG_EINVAL;
    if (fh->draining) return refused(fh, MCPG_EUNAVAIL);
    if (table_full(fh)) return refused(fh, MCPG_EAGAIN);
    fh_call *c = submit_make(fh, d);
    if (!c) return MCPG_ENOMEM;
    mcpg_call *h = fh_handle(c, CALL_STAGE_TRANSPORT);
    mcpg_fakehost_plan plan = {.answer = MCPG_FAKEHOST_ROUTE};
    if (fh->submit_fn) fh->submit_fn(fh->submit_arg, h, d, &plan);
    if (plan.answer == MCPG_FAKEHOST_REFUSE) {
        fh_call_retire(c);
        return refused(fh, plan.refuse_with < 0 ? plan.refuse_with : MCPG_EAGAIN);
    }
    fh_stat_add(&fh->st.submitted, 1);
    *call_out = h; /* before the answer, which may complete it at once */
    uint16_t serial = c->serial;
    c->in_submit = 1;
    answer(fh, c, &plan);
    if (atomic_load(&c->alive) == serial) c->in_submit = 0; /* else released inside */
    return 0;
}

void mcpg_fakehost_on_submit(mcpg_fakehost *fh, mcpg_fakehost_submit_fn fn, void *arg) {
    fh->submit_fn = fn;
    fh->submit_arg = arg;
}

void mcpg_fakehost_route(mcpg_fakehost *fh, mcpg_instance *backend) { fh->route = backend; }

/* ---- the transport's other call slots ----------------------------------------- */

static void host_call_cancel(mcpg_call *h) {
    fh_call *c = fh_call_of(h, "host->call_cancel");
    if (!c || fh_loop_only(c->fh, &c->fh->worker, "host->call_cancel")) return;
    fh_stat_add(&c->fh->st.cancelled, 1);
    fh_call_cancel_op(c);
}

/* The outcome as ABI 1.0 has it: a caller's smaller one cannot be filled. */
#define OUTCOME_V1_0_SIZE (offsetof(mcpg_call_outcome, retry_after_s) + sizeof(uint32_t))

/* Only the fields the caller's out->size says it has: a transport built on
 * older headers passes a shorter struct, and one on newer headers keeps
 * what it set in fields this host does not know. */
static void outcome_put(mcpg_call_outcome *out, const mcpg_call_outcome *in) {
#define PUT(f) \
    if (MCPG_HAS_FIELD(out, f)) out->f = in->f
    PUT(is_error);
    PUT(result);
    PUT(result_len);
    PUT(error_code);
    PUT(error_message);
    PUT(error_data);
    PUT(error_data_len);
    PUT(http_status);
    PUT(retry_after_s);
#undef PUT
}

static void host_call_outcome(mcpg_call *h, mcpg_call_outcome *out) {
    fh_call *c = fh_call_of(h, "host->call_outcome");
    if (!c) return;
    if (!out || out->size < OUTCOME_V1_0_SIZE) {
        fh_fail(c->fh, "host->call_outcome: out->size %u is smaller than the ABI 1.0 outcome "
                       "(%zu bytes): refused (module bug)",
                out ? out->size : 0, OUTCOME_V1_0_SIZE);
        return;
    }
    mcpg_call_outcome full;
    fh_call_outcome(c, &full);
    outcome_put(out, &full);
}

static void host_call_release(mcpg_call *h) {
    fh_call *c = fh_call_of(h, "host->call_release");
    if (!c) return;
    if (!c->completed) fh_fail(c->fh, "call_release before complete() (module bug)");
    fh_stat_add(&c->fh->st.released, 1);
    mcpg_fakehost_call_free(c->fh, h);
}

void fh_transport_slots(mcpg_host *h) {
    h->call_submit = host_call_submit;
    h->call_cancel = host_call_cancel;
    h->call_outcome = host_call_outcome;
    h->call_release = host_call_release;
}

/* ---- the listener --------------------------------------------------------------- */

/* A non-blocking listening socket on 127.0.0.1, any free port: the fd, or
 * -errno. */
static int listen_socket(uint16_t *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, LISTEN_BACKLOG) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* As the kernel: TCP_NODELAY, then the transport owns the fd, or refuses it
 * and the host closes it. */
static void adopt(fh_listener *l, int fd) {
    mcpg_fakehost *fh = l->inst->fh;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fh_stat_add(&fh->st.accepted, 1);
    const mcpg_transport_ops *ops = l->inst->m->ops;
    if (ops->conn_adopt(l->inst->state, &fh->worker, fd) == 0) return;
    fh_stat_add(&fh->st.adopt_refused, 1);
    close(fd);
}

static void on_accept(uv_poll_t *p, int status, int events) {
    fh_listener *l = p->data;
    (void)events;
    if (status < 0) return;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        adopt(l, fd);
    }
}

int mcpg_fakehost_listen(mcpg_fakehost *fh, mcpg_instance *transport, uint16_t *port_out) {
    if (!fh || !transport || transport->m->kind != MCPG_KIND_TRANSPORT || transport->listener)
        return MCPG_EINVAL;
    if (fh_loop_only(fh, &fh->worker, "mcpg_fakehost_listen")) return MCPG_ESTATE;
    uint16_t port = 0;
    int fd = listen_socket(&port);
    if (fd < 0) {
        fh_note(fh, "listen on 127.0.0.1: %s", strerror(-fd));
        return MCPG_EIO;
    }
    fh_listener *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return MCPG_ENOMEM;
    }
    l->fd = fd;
    l->inst = transport;
    uv_poll_init_socket(&fh->loop, &l->poll, fd);
    l->poll.data = l;
    uv_poll_start(&l->poll, UV_READABLE, on_accept);
    transport->listener = l;
    if (port_out) *port_out = port;
    return 0;
}

static void listener_closed(uv_handle_t *h) { free(h->data); }

void fh_listener_close(mcpg_instance *inst) {
    fh_listener *l = inst->listener;
    if (!l) return;
    inst->listener = NULL;
    uv_poll_stop(&l->poll);
    close(l->fd);
    uv_close((uv_handle_t *)&l->poll, listener_closed);
}

/* ---- drain, connections ------------------------------------------------------- */

typedef struct transport_op {
    mcpg_instance *inst;
    uint32_t count;
} transport_op;

static int is_transport(const mcpg_instance *inst) {
    return inst && inst->m->kind == MCPG_KIND_TRANSPORT;
}

/* As the kernel's draining worker: the transport drains, and call_submit
 * answers MCPG_EUNAVAIL from then on. The listener stays, so a test sees
 * the transport refuse what comes after. */
static void drain_on_loop(void *arg) {
    transport_op *t = arg;
    mcpg_fakehost *fh = t->inst->fh;
    const mcpg_transport_ops *ops = t->inst->m->ops;
    fh->draining = 1;
    ops->drain(t->inst->state, &fh->worker);
}

void mcpg_fakehost_drain(mcpg_fakehost *fh, mcpg_instance *transport) {
    if (!is_transport(transport)) return;
    transport_op t = {transport, 0};
    mcpg_fakehost_run_on_loop(fh, drain_on_loop, &t);
}

static void count_on_loop(void *arg) {
    transport_op *t = arg;
    const mcpg_transport_ops *ops = t->inst->m->ops;
    t->count = ops->conn_count(t->inst->state, &t->inst->fh->worker);
}

uint32_t mcpg_fakehost_conn_count(mcpg_fakehost *fh, mcpg_instance *transport) {
    if (!is_transport(transport)) return 0;
    transport_op t = {transport, 0};
    mcpg_fakehost_run_on_loop(fh, count_on_loop, &t);
    return t.count;
}

/* ---- stats ---------------------------------------------------------------------- */

void mcpg_fakehost_get_stats(mcpg_fakehost *fh, mcpg_fakehost_stats *out) {
    fh_stats *s = &fh->st;
    *out = (mcpg_fakehost_stats){
        .submitted = atomic_load(&s->submitted),
        .refused = atomic_load(&s->refused),
        .completed = atomic_load(&s->completed),
        .completed_in_submit = atomic_load(&s->completed_in_submit),
        .released = atomic_load(&s->released),
        .cancelled = atomic_load(&s->cancelled),
        .accepted = atomic_load(&s->accepted),
        .adopt_refused = atomic_load(&s->adopt_refused),
        .host_allocs = atomic_load(&s->host_allocs),
        .buf_bytes = atomic_load(&s->buf_bytes),
    };
}
