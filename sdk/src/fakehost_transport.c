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
    uint32_t serial; /* the life it completes: a call released early is left alone */
    fh_later *next, **pprev;
};

struct fh_listener {
    uv_poll_t poll;
    int fd;
    mcpg_instance *inst;
};

static int is_transport(const mcpg_instance *inst);

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

/* The list methods, from the routed backend's list ops, as the kernel
 * answers them: {"tools":[...]}, {"resources":[...]}, ... */
static const char *list_key(uint32_t method) {
    switch (method) {
    case MCPG_METHOD_TOOLS_LIST: return "tools";
    case MCPG_METHOD_RESOURCES_LIST: return "resources";
    case MCPG_METHOD_RESOURCES_TEMPLATES_LIST: return "resourceTemplates";
    case MCPG_METHOD_PROMPTS_LIST: return "prompts";
    default: return NULL;
    }
}

static void answer_list(mcpg_fakehost *fh, fh_call *c, const char *key) {
    mcpg_buf list = {0};
    int rc = fh->route ? mcpg_fakehost_list(fh, fh->route, c->method_id, &list) : 0;
    if (rc == MCPG_ENOTSUP) rc = 0; /* a backend without the op lists nothing */
    if (rc)
        fh_call_error(c, MCPG_RPC_INTERNAL_ERROR, "a list op failed", NULL);
    else if (mcpg_buf_printf(&c->result, "{\"%s\":%s}", key, list.len ? list.data : "[]"))
        fh_call_error(c, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    mcpg_buf_free(&list);
    c->dispatched = 1;
    fh_call_finish(c, rc ? MCPG_DENY : MCPG_CONTINUE);
}

/* What the kernel answers itself once identity and policy let a
 * subscription through (a fake host has neither: everything passes):
 * resources/subscribe and /unsubscribe {}, a transport's question about a
 * subscriptions/listen the uris it asked for. 1 when answered. */
static int answer_subscription(fh_call *c) {
    mcpg_json_span n, uris;
    int listen = strcmp(c->method, "subscriptions/listen") == 0;
    if (!listen && c->method_id != MCPG_METHOD_RESOURCES_SUBSCRIBE &&
        c->method_id != MCPG_METHOD_RESOURCES_UNSUBSCRIBE)
        return 0;
    int rc = 0;
    if (!listen) {
        rc = mcpg_buf_puts(&c->result, "{}");
    } else if (c->params &&
               mcpg_json_object_get(c->params, c->params_len, "notifications", &n) == 1 &&
               n.type == MCPG_JSON_OBJECT &&
               mcpg_json_object_get(n.p, n.n, "resourceSubscriptions", &uris) == 1 &&
               uris.type == MCPG_JSON_ARRAY) {
        rc = mcpg_buf_printf(&c->result, "{\"resourceSubscriptions\":%.*s}", (int)uris.n, uris.p);
    } else {
        rc = mcpg_buf_puts(&c->result, "{\"resourceSubscriptions\":[]}");
    }
    if (rc) fh_call_error(c, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    c->dispatched = 1;
    fh_call_finish(c, rc ? MCPG_DENY : MCPG_CONTINUE);
    return 1;
}

static void route_submitted(mcpg_fakehost *fh, fh_call *c) {
    const char *key = list_key(c->method_id);
    if (key) {
        answer_list(fh, c, key);
        return;
    }
    if (answer_subscription(c)) return;
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
    /* what the call says about its client, copied (the desc's are the transport's) */
    if ((d->session_id && !(c->session = fh_dup_n(d->session_id, d->session_id_len))) ||
        (c->d.client_caps_json &&
         !(c->caps = fh_dup_n(c->d.client_caps_json, c->d.client_caps_len))) ||
        (c->d.protocol_version &&
         !(c->version = fh_dup_n(c->d.protocol_version, c->d.protocol_version_len))) ||
        (c->d.server && c->d.server_len && !(c->server = fh_dup_n(c->d.server, c->d.server_len)))) {
        fh_call_retire(c);
        return NULL;
    }
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
    fh_server_note(fh, c->server); /* ABI 1.12 (c->d is zero past an older desc's size) */
    mcpg_call *h = fh_handle(c, CALL_STAGE_TRANSPORT);
    mcpg_fakehost_plan plan = {.answer = MCPG_FAKEHOST_ROUTE};
    if (fh->submit_fn) fh->submit_fn(fh->submit_arg, h, d, &plan);
    if (plan.answer == MCPG_FAKEHOST_REFUSE) {
        fh_call_retire(c);
        return refused(fh, plan.refuse_with < 0 ? plan.refuse_with : MCPG_EAGAIN);
    }
    fh_stat_add(&fh->st.submitted, 1);
    *call_out = h; /* before the answer, which may complete it at once */
    uint32_t serial = c->serial;
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

/* call_cancel, call_outcome and call_release are the transport's: a stage's
 * or backend's handle is refused, as the kernel refuses it. */
static fh_call *transport_call_of(mcpg_call *h, const char *slot) {
    unsigned stage = call_handle_stage(h);
    fh_call *c = fh_call_of(h, slot);
    if (!c || stage == CALL_STAGE_TRANSPORT) return c;
    fh_fail(c->fh, "%s is the transport's; called with the handle of the call's %s stage "
            "(module bug): refused", slot, call_stage_name(stage));
    return NULL;
}

static void host_call_cancel(mcpg_call *h) {
    fh_call *c = transport_call_of(h, "host->call_cancel");
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
    PUT(result_type);
    PUT(www_authenticate);
#undef PUT
}

static void host_call_outcome(mcpg_call *h, mcpg_call_outcome *out) {
    fh_call *c = transport_call_of(h, "host->call_outcome");
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
    fh_call *c = transport_call_of(h, "host->call_release");
    if (!c) return;
    if (!c->completed) { /* the kernel refuses it too: the call runs on */
        fh_fail(c->fh, "call_release before complete() (module bug): refused");
        return;
    }
    fh_stat_add(&c->fh->st.released, 1);
    mcpg_fakehost_call_free(c->fh, h);
}

/* The fake host runs no audit stage: no outcome is ever in an audit trail. */
static int host_call_audited(mcpg_call *h) {
    transport_call_of(h, "host->call_audited");
    return 0;
}

/* ---- replies from clients (ABI 1.1) ------------------------------------------ */

/* The string id of a response body, decoded into id (cap bytes): 1, or 0
 * when it has none; MCPG_EPROTO when the body is not a response. */
static int response_id(const char *body, size_t len, char *id, size_t cap) {
    mcpg_json_span v, idv;
    size_t pos = 0;
    if (mcpg_json_value(body, len, &pos, &v) != 1 || v.type != MCPG_JSON_OBJECT ||
        mcpg_json_validate(body, len) != 0)
        return MCPG_EPROTO;
    if (mcpg_json_object_get(body, len, "method", &v) == 1) return MCPG_EPROTO;
    if (mcpg_json_object_get(body, len, "result", &v) != 1 &&
        mcpg_json_object_get(body, len, "error", &v) != 1)
        return MCPG_EPROTO;
    if (mcpg_json_object_get(body, len, "id", &idv) != 1) return MCPG_EPROTO;
    if (idv.type != MCPG_JSON_STRING || mcpg_json_string_decode(&idv, id, cap, NULL) < 0)
        return 0; /* not an id this host minted */
    return 1;
}


static int same_session(const fh_call *c, const char *s, size_t n) {
    size_t have = c->session ? strlen(c->session) : 0;
    return have == (s ? n : 0) && (have == 0 || memcmp(c->session, s, n) == 0);
}

/* As the kernel: the response reaches the call that asked when it comes
 * from the asking call's session; the reply runs on the loop (here, at
 * once: this host has one). */
static int host_reply_submit(mcpg_worker *w, const char *session, size_t session_len,
                             const char *body, size_t len) {
    mcpg_fakehost *fh = fh_the;
    int rc = fh_loop_only(fh, w, "host->reply_submit");
    if (rc) return rc;
    char id[64], msg[512];
    if (!body) return MCPG_EPROTO;
    rc = response_id(body, len, id, sizeof id);
    if (rc <= 0) return rc ? rc : MCPG_ENOENT;
    fh_call *c = NULL;
    fh_request *r = fh_request_find(fh, id, &c);
    if (!r || !same_session(c, session, session_len)) return MCPG_ENOENT;
    mcpg_reply reply;
    mcpg__rpc_reply(body, len, &reply, msg, sizeof msg);
    fh_request_answer(r, &reply);
    return 0;
}

/* ---- resource subscriptions (ABI 1.1) ------------------------------------------ */

/* One uri some client subscribed to, and how many did. */
struct fh_sub {
    fh_sub *next;
    int count;
    char uri[];
};

/* A uri matches a template when each {var} stands for a non-empty run
 * without '/' and the rest is equal (the simple expansions MCP uses). */
static int template_match(const char *t, size_t tn, const char *u, size_t un) {
    size_t i = 0, j = 0;
    while (i < tn) {
        if (t[i] != '{') {
            if (j >= un || t[i] != u[j]) return 0;
            i++, j++;
            continue;
        }
        while (i < tn && t[i] != '}') i++;
        i++;
        size_t start = j;
        char stop = i < tn ? t[i] : '\0';
        while (j < un && u[j] != '/' && (stop == '\0' || u[j] != stop)) j++;
        if (j == start) return 0;
    }
    return j == un;
}

/* Whether a listed array (of resources or templates) names uri under key. */
static int list_names(const mcpg_buf *list, const char *key, int templ, const char *uri,
                      size_t n) {
    size_t it = 0;
    mcpg_json_span item, v;
    while (list->data && mcpg_json_array_next(list->data, list->len, &it, &item) == 1) {
        if (mcpg_json_object_get(item.p, item.n, key, &v) != 1 || v.type != MCPG_JSON_STRING)
            continue;
        char text[1024];
        size_t tn;
        if (mcpg_json_string_decode(&v, text, sizeof text, &tn) < 0) continue;
        if (templ ? template_match(text, tn, uri, n) : (tn == n && memcmp(text, uri, n) == 0))
            return 1;
    }
    return 0;
}

static int backend_owns(mcpg_fakehost *fh, const char *uri, size_t n) {
    mcpg_buf list = {0};
    int owns = 0;
    if (mcpg_fakehost_list(fh, fh->route, MCPG_METHOD_RESOURCES_LIST, &list) == 0)
        owns = list_names(&list, "uri", 0, uri, n);
    list.len = 0;
    if (!owns && mcpg_fakehost_list(fh, fh->route, MCPG_METHOD_RESOURCES_TEMPLATES_LIST,
                                    &list) == 0)
        owns = list_names(&list, "uriTemplate", 1, uri, n);
    mcpg_buf_free(&list);
    return owns;
}

static fh_sub **sub_find(mcpg_fakehost *fh, const char *uri, size_t n) {
    fh_sub **pp = &fh->subs;
    while (*pp && !(strlen((*pp)->uri) == n && memcmp((*pp)->uri, uri, n) == 0))
        pp = &(*pp)->next;
    return pp;
}

static void tell_backend(mcpg_fakehost *fh, const char *uri, int on) {
    const mcpg_backend_ops *o = fh->route->m->ops;
    if (MCPG_HAS(o, subscribe)) o->subscribe(fh->route->state, uri, on);
}

/* As the kernel: the routed backend hears of the first subscriber and of
 * the last one leaving, not of each. */
static int host_resource_subscribe(mcpg_worker *w, const char *uri, size_t n, int on) {
    mcpg_fakehost *fh = fh_the;
    int rc = fh_loop_only(fh, w, "host->resource_subscribe");
    if (rc) return rc;
    if (!uri || !fh->route || !backend_owns(fh, uri, n)) return MCPG_ENOENT;
    fh_sub **pp = sub_find(fh, uri, n), *s = *pp;
    if (on) {
        if (!s) {
            if (!(s = calloc(1, sizeof *s + n + 1))) return MCPG_ENOMEM;
            memcpy(s->uri, uri, n);
            *pp = s;
        }
        if (s->count++ == 0) tell_backend(fh, s->uri, 1);
        return 0;
    }
    if (!s) return 0; /* nobody was subscribed: nothing to tell */
    if (--s->count == 0) {
        *pp = s->next;
        tell_backend(fh, s->uri, 0);
        free(s);
    }
    return 0;
}

void fh_subs_free(mcpg_fakehost *fh) {
    while (fh->subs) {
        fh_sub *s = fh->subs;
        fh->subs = s->next;
        free(s);
    }
}

/* ---- backends' news (ABI 1.1) --------------------------------------------------- */

/* A piece of news carried to the loop, where every transport hears it. */
typedef struct news_post {
    mcpg_post node;
    mcpg_fakehost *fh;
    const char *method;
    char uri[]; /* "" when none */
} news_post;

static void news_to(mcpg_instance *t, const char *method, const char *uri) {
    const mcpg_transport_ops *o = t->m->ops;
    if (t->m->kind != MCPG_KIND_TRANSPORT || !MCPG_HAS(o, news)) return;
    o->news(t->state, &t->fh->worker, method, *uri ? uri : NULL, strlen(uri));
}

static void news_posted(void *arg) {
    news_post *p = arg;
    for (mcpg_instance *t = p->fh->instances; t; t = t->next) news_to(t, p->method, p->uri);
    free(p);
}

/* Record it (tests count it), then tell the transports on the loop. */
static void news_add(mcpg_fakehost *fh, const char *method, const char *uri, size_t n) {
    pthread_mutex_lock(&fh->lock);
    mcpg_buf_printf(&fh->news, "%s %.*s\n", method, (int)n, uri ? uri : "");
    pthread_mutex_unlock(&fh->lock);
    news_post *p = calloc(1, sizeof *p + n + 1);
    if (!p) return;
    *p = (news_post){.node = {.fn = news_posted}, .fh = fh, .method = method};
    p->node.arg = p;
    if (n) memcpy(p->uri, uri, n);
    if (fh_post(&fh->worker, &p->node) != 0) free(p);
}

static void host_lists_changed(mcpg_instance *self, uint32_t lists) {
    mcpg_fakehost *fh = self ? self->fh : fh_the;
    if (!fh) return;
    if (lists & MCPG_LIST_TOOLS) news_add(fh, "notifications/tools/list_changed", NULL, 0);
    if (lists & MCPG_LIST_RESOURCES)
        news_add(fh, "notifications/resources/list_changed", NULL, 0);
    if (lists & MCPG_LIST_PROMPTS) news_add(fh, "notifications/prompts/list_changed", NULL, 0);
}

static void host_resource_updated(mcpg_instance *self, const char *uri, size_t n) {
    mcpg_fakehost *fh = self ? self->fh : fh_the;
    if (!fh || !uri) return;
    news_add(fh, "notifications/resources/updated", uri, n);
}

int mcpg_fakehost_news_count(mcpg_fakehost *fh, const char *method, const char *uri) {
    int count = 0;
    pthread_mutex_lock(&fh->lock);
    for (const char *line = fh->news.data; line && *line;) {
        const char *end = strchr(line, '\n'), *sp = strchr(line, ' ');
        size_t ml = (size_t)(sp - line), ul = (size_t)(end - sp - 1);
        if ((!method || (strlen(method) == ml && !strncmp(line, method, ml))) &&
            (!uri || (strlen(uri) == ul && !strncmp(sp + 1, uri, ul))))
            count++;
        line = end + 1;
    }
    pthread_mutex_unlock(&fh->lock);
    return count;
}

typedef struct news_call {
    mcpg_instance *t;
    const char *method, *uri;
} news_call;

static void news_on_loop(void *arg) {
    news_call *n = arg;
    news_to(n->t, n->method, n->uri ? n->uri : "");
}

int mcpg_fakehost_news(mcpg_fakehost *fh, mcpg_instance *transport, const char *method,
                       const char *uri) {
    if (!is_transport(transport) || !method) return MCPG_EINVAL;
    const mcpg_transport_ops *o = transport->m->ops;
    if (!MCPG_HAS(o, news)) return MCPG_ENOTSUP;
    news_call n = {transport, method, uri};
    return mcpg_fakehost_run_on_loop(fh, news_on_loop, &n);
}

/* ---- the coordinator (ABI 1.1) ----------------------------------------------------- */

static const mcpg_coordinator_ops *host_coordinator(void **instance_out) {
    mcpg_fakehost *fh = fh_the;
    mcpg_instance *co = fh ? fh->coordinator : NULL;
    if (instance_out) *instance_out = co ? co->state : NULL;
    return co ? co->m->ops : NULL;
}

int mcpg_fakehost_set_coordinator(mcpg_fakehost *fh, mcpg_instance *coordinator) {
    if (coordinator && coordinator->m->kind != MCPG_KIND_COORDINATOR) return MCPG_EINVAL;
    fh->coordinator = coordinator;
    return 0;
}

void fh_news_slots(mcpg_host *h) {
    h->reply_submit = host_reply_submit;
    h->resource_subscribe = host_resource_subscribe;
    h->lists_changed = host_lists_changed;
    h->resource_updated = host_resource_updated;
    h->coordinator = host_coordinator;
}

void fh_transport_slots(mcpg_host *h) {
    h->call_submit = host_call_submit;
    h->call_cancel = host_call_cancel;
    h->call_outcome = host_call_outcome;
    h->call_release = host_call_release;
    h->call_audited = host_call_audited;
    fh_news_slots(h);
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
