/* The fake host's call object: where it lives, the handles modules hold,
 * what stages and backends read and write on it (the host table's call_*
 * slots for them), and running their ops (the resume handshake of
 * handshake.h, backends on the pool or inline, cancel).
 *
 * Call objects live in slabs that are freed only with the fake host, and
 * are reused newest-first, as the kernel recycles its calls: a handle kept
 * past its call's life then names an object whose serial has moved on, and
 * every slot refuses it as the kernel does, instead of reading freed memory
 * or acting on another call. */
#include "fakehost_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FH_DEFAULT_ID "1"

/* ---- slabs --------------------------------------------------------------- */

#define SLAB_BYTES (FH_SLAB_CALLS * sizeof(fh_call))

static int slab_add(mcpg_fakehost *fh) {
    int n = atomic_load(&fh->n_slabs);
    if (n >= FH_MAX_SLABS) return MCPG_EAGAIN;
    fh_call *slab = aligned_alloc(CALL_OBJECT_ALIGN, FH_SLAB_CALLS * sizeof *slab);
    if (!slab) return MCPG_ENOMEM;
    memset(slab, 0, FH_SLAB_CALLS * sizeof *slab);
    for (size_t i = FH_SLAB_CALLS; i-- > 0;) {
        slab[i].next = fh->free_calls;
        fh->free_calls = &slab[i];
    }
    fh->slabs[n] = slab;
    atomic_store(&fh->n_slabs, n + 1); /* after the slab: readers on other threads */
    return 0;
}

/* The slab that holds address p, or NULL. Any thread. */
static const fh_call *slab_of(mcpg_fakehost *fh, const void *p) {
    uintptr_t a = (uintptr_t)p;
    int n = atomic_load(&fh->n_slabs);
    for (int i = 0; i < n; i++) {
        uintptr_t lo = (uintptr_t)fh->slabs[i];
        if (a >= lo && a < lo + SLAB_BYTES) return fh->slabs[i];
    }
    return NULL;
}

int fh_host_owned(mcpg_fakehost *fh, const mcpg_buf *b) { return slab_of(fh, b) != NULL; }

/* A call object of ours, at its start: not some other pointer. */
static int is_call_object(mcpg_fakehost *fh, const fh_call *c) {
    const fh_call *slab = slab_of(fh, c);
    return slab && ((uintptr_t)c - (uintptr_t)slab) % sizeof(fh_call) == 0;
}

static void fh_slabs_free(mcpg_fakehost *fh) {
    int n = atomic_load(&fh->n_slabs);
    for (int i = 0; i < n; i++) free(fh->slabs[i]);
    atomic_store(&fh->n_slabs, 0);
    fh->free_calls = NULL;
}

/* ---- handles --------------------------------------------------------------- */

mcpg_call *fh_handle(const fh_call *c, unsigned stage) {
    return call_handle_make(c, stage, c->serial);
}

/* Which handle an instance's op is given: the stage its kind runs at, by
 * the rule the kernel applies (call_rules.c). */
static unsigned stage_of(uint32_t kind) { return call_stage_of_kind(kind); }

fh_call *fh_call_of(mcpg_call *h, const char *slot) {
    mcpg_fakehost *fh = fh_the;
    fh_call *c = call_handle_object(h);
    if (!fh) return NULL;
    if (!c || !is_call_object(fh, c)) {
        fh_fail(fh, "%s: %p is not a call handle (%s)", slot, (void *)h, fh_whose_bug(slot));
        return NULL;
    }
    unsigned alive = atomic_load(&c->alive);
    if (alive == call_handle_serial(h)) return c;
    fh_fail(fh, "%s: stale call handle (%s): its serial is %u, the call object's %u%s", slot,
            fh_whose_bug(slot), (unsigned)call_handle_serial(h), alive,
            alive ? " (reused)" : " (ended)");
    return NULL;
}

/* ---- life ------------------------------------------------------------------ */

/* A free object for a new life: its serial moves on, never back to 0. */
static fh_call *call_take(mcpg_fakehost *fh) {
    if (!fh->free_calls && slab_add(fh) != 0) return NULL;
    fh_call *c = fh->free_calls;
    if (!call_handle_fits(c)) {
        fh_fail(fh, "a call object at %p lies above the %d bits a call handle holds, or off its boundary", (void *)c,
                CALL_HANDLE_ADDR_BITS + CALL_HANDLE_LOW_BITS);
        return NULL;
    }
    fh->free_calls = c->next;
    uint32_t serial = call_serial_next(c->serial);
    memset(c, 0, sizeof *c);
    c->fh = fh;
    c->serial = serial;
    atomic_store(&c->alive, serial);
    c->next = fh->calls;
    if (fh->calls) fh->calls->pprev = &c->next;
    c->pprev = &fh->calls;
    fh->calls = c;
    return c;
}

static void free_headers(fh_call *c) {
    for (fh_header *h = c->headers, *n; h; h = n) {
        n = h->next;
        free(h->name);
        free(h->value);
        free(h);
    }
    c->headers = NULL;
}

void fh_call_retire(fh_call *c) {
    mcpg_fakehost *fh = c->fh;
    atomic_store(&c->alive, 0);
    *c->pprev = c->next;
    if (c->next) c->next->pprev = c->pprev;
    free_headers(c);
    free(c->method);
    free(c->target);
    free(c->args);
    free(c->params);
    free(c->id);
    mcpg_ident_free(c->ident);
    free(c->peer);
    free(c->client_name);
    free(c->challenge);
    c->tls = NULL;
    free(c->err_msg);
    free(c->session);
    free(c->caps);
    free(c->version);
    free(c->server);
    fh_call_free_messages(c);
    mcpg_buf_free(&c->result);
    mcpg_buf_free(&c->err_data);
    c->next = fh->free_calls;
    fh->free_calls = c;
}

/* params as the kernel's transports pass it (see the header). */
static int build_params(fh_call *c) {
    mcpg_buf b = {0};
    int rc = 0;
    uint32_t m = c->method_id;
    if (m == MCPG_METHOD_TOOLS_CALL || m == MCPG_METHOD_PROMPTS_GET) {
        rc |= mcpg_buf_puts(&b, "{\"name\":");
        const char *t = c->target ? c->target : "";
        rc |= mcpg_buf_append_json_string(&b, t, strlen(t));
        rc |= mcpg_buf_printf(&b, ",\"arguments\":%s}", c->args);
    } else if (m >= MCPG_METHOD_RESOURCES_LIST && m <= MCPG_METHOD_RESOURCES_UNSUBSCRIBE &&
               c->target) {
        rc |= mcpg_buf_puts(&b, "{\"uri\":");
        rc |= mcpg_buf_append_json_string(&b, c->target, strlen(c->target));
        rc |= mcpg_buf_puts(&b, "}");
    } else {
        rc |= mcpg_buf_puts(&b, c->args);
    }
    if (rc) {
        mcpg_buf_free(&b);
        return MCPG_ENOMEM;
    }
    c->params = b.data;
    c->params_len = b.len;
    return 0;
}

static char *dup_or(const char *s, size_t n, const char *dflt) {
    return s ? fh_dup_n(s, n) : fh_dup_n(dflt, strlen(dflt));
}

fh_call *fh_call_make(mcpg_fakehost *fh, const char *method, size_t method_len,
                      const char *target, size_t target_len, const char *args,
                      size_t args_len, const char *id, size_t id_len) {
    fh_call *c = call_take(fh);
    if (!c) return NULL;
    c->wire = MCPG_WIRE_STATELESS;
    c->method = dup_or(method, method_len, "");
    c->method_id = mcpg_method_of(method, method_len);
    c->target = target ? fh_dup_n(target, target_len) : NULL;
    c->args = dup_or(args, args_len, "{}");
    c->id = dup_or(id, id_len, FH_DEFAULT_ID);
    if (!c->method || (target && !c->target) || !c->args || !c->id || build_params(c)) {
        fh_call_retire(c);
        return NULL;
    }
    c->args_len = args ? args_len : 2;
    c->id_len = strlen(c->id);
    return c;
}

/* An op (or a pool thread) may still touch it. */
static int op_holds(const fh_call *c) { return c->on_pool || (c->dispatched && !c->answered); }

/* ---- the test's calls ------------------------------------------------------ */

static int json_text_ok(const char *s) { return mcpg_json_validate(s, strlen(s)) == 0; }

mcpg_call *mcpg_fakehost_call_new(mcpg_fakehost *fh, const char *method, const char *target,
                                  const char *args_json, const char *id_json) {
    if (args_json && !json_text_ok(args_json))
        fh_fail(fh, "call_new: args_json is not valid JSON (a bug in the test): %s", args_json);
    if (id_json && !json_text_ok(id_json))
        fh_fail(fh, "call_new: id_json is not valid JSON (a bug in the test): %s", id_json);
    fh_call *c = fh_call_make(fh, method, method ? strlen(method) : 0, target,
                              target ? strlen(target) : 0, args_json,
                              args_json ? strlen(args_json) : 0, id_json,
                              id_json ? strlen(id_json) : 0);
    return c ? fh_handle(c, CALL_STAGE_TRANSPORT) : NULL;
}

int mcpg_fakehost_call_set_header(mcpg_call *call, const char *lname, const char *value) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_set_header");
    if (!c) return MCPG_ESTATE;
    fh_header *h = calloc(1, sizeof *h);
    if (!h) return MCPG_ENOMEM;
    h->name = fh_dup_or_null(lname);
    h->value = fh_dup_or_null(value);
    if (!h->name || !h->value) {
        free(h->name);
        free(h->value);
        free(h);
        return MCPG_ENOMEM;
    }
    h->next = c->headers;
    c->headers = h;
    return 0;
}

int mcpg_fakehost_call_set_params(mcpg_call *call, const char *params_json) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_set_params");
    if (!c) return MCPG_ESTATE;
    size_t n = params_json ? strlen(params_json) : 0, pos = 0;
    mcpg_json_span v;
    if (!params_json || mcpg_json_value(params_json, n, &pos, &v) != 1 ||
        v.type != MCPG_JSON_OBJECT || mcpg_json_validate(params_json, n) != 0)
        return MCPG_EINVAL;
    char *p = fh_dup_n(params_json, n);
    if (!p) return MCPG_ENOMEM;
    free(c->params);
    c->params = p;
    c->params_len = n;
    return 0;
}

static int set_string(char **dst, const char *value) {
    char *v = fh_dup_or_null(value);
    if (value && !v) return MCPG_ENOMEM;
    free(*dst);
    *dst = v;
    return 0;
}

int mcpg_fakehost_call_set_peer(mcpg_call *call, const char *peer) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_set_peer");
    return c ? set_string(&c->peer, peer) : MCPG_ESTATE;
}

int mcpg_fakehost_call_set_client_name(mcpg_call *call, const char *name) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_set_client_name");
    return c ? set_string(&c->client_name, name) : MCPG_ESTATE;
}

void mcpg_fakehost_call_set_tls(mcpg_call *call, const mcpg_tls_info *tls) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_set_tls");
    if (c) c->tls = tls;
}

void mcpg_fakehost_call_set_wire(mcpg_call *call, mcpg_wire wire) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_set_wire");
    if (c) c->wire = wire;
}

void mcpg_fakehost_call_free(mcpg_fakehost *fh, mcpg_call *call) {
    if (!call) return;
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_free");
    if (!c) return;
    if (op_holds(c)) {
        fh_fail(fh, "a call was freed while its op is still running or pending: leaked");
        return;
    }
    fh_call_retire(c);
}

/* The whole outcome, for a caller built with these headers. */
void fh_call_outcome(fh_call *c, mcpg_call_outcome *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->http_status = c->http_status;
    o->retry_after_s = c->retry_after;
    if (c->is_error) {
        o->is_error = 1;
        o->error_code = c->err_code;
        o->error_message = c->err_msg ? c->err_msg : "";
        o->error_data = c->err_data.len ? c->err_data.data : NULL;
        o->error_data_len = c->err_data.len;
        if (c->http_status == 401) o->www_authenticate = c->challenge;
        return;
    }
    o->result = c->result.len ? c->result.data : "{}";
    o->result_len = c->result.len ? c->result.len : 2;
    o->result_type = c->result_type;
}

void mcpg_fakehost_outcome(mcpg_call *call, mcpg_call_outcome *o) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_outcome");
    if (c) {
        fh_call_outcome(c, o);
        return;
    }
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
}

const char *mcpg_fakehost_result(mcpg_call *call) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_result");
    if (!c || c->is_error) return NULL;
    return c->result.len ? c->result.data : "{}";
}

int64_t mcpg_fakehost_error_code(mcpg_call *call) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_error_code");
    return c && c->is_error ? c->err_code : 0;
}

const char *mcpg_fakehost_error_message(mcpg_call *call) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_error_message");
    if (!c || !c->is_error) return NULL;
    return c->err_msg ? c->err_msg : "";
}

/* ---- host slots: a call seen from a stage or a backend --------------------- */

/* Declares c, the call handle h names; a slot given a stale handle returns
 * dflt, as the kernel's does (fh_call_of has logged and counted it). */
#define CALL_OR(h, slot, dflt)                       \
    fh_call *c = fh_call_of((h), "host->" slot);     \
    if (!c) return dflt

static mcpg_worker *host_call_worker(mcpg_call *h) {
    CALL_OR(h, "call_worker", NULL);
    return &c->fh->worker;
}

static uint32_t host_call_method(mcpg_call *h) {
    CALL_OR(h, "call_method", 0);
    return c->method_id;
}

static uint32_t host_call_wire(mcpg_call *h) {
    CALL_OR(h, "call_wire", 0);
    return c->wire;
}

static const char *host_call_target(mcpg_call *h) {
    CALL_OR(h, "call_target", NULL);
    return c->target;
}

static const char *text_out(const char *s, size_t n, size_t *len) {
    if (len) *len = s ? n : 0;
    return s;
}

static const char *host_call_args(mcpg_call *h, size_t *len) {
    fh_call *c = fh_call_of(h, "host->call_args");
    return c ? text_out(c->args, c->args_len, len) : text_out(NULL, 0, len);
}

static const char *host_call_params(mcpg_call *h, size_t *len) {
    fh_call *c = fh_call_of(h, "host->call_params");
    return c ? text_out(c->params, c->params_len, len) : text_out(NULL, 0, len);
}

static const char *host_call_id(mcpg_call *h, size_t *len) {
    fh_call *c = fh_call_of(h, "host->call_id");
    return c ? text_out(c->id, c->id_len, len) : text_out(NULL, 0, len);
}

/* A submitted call asks its transport (the ABI lets a pool thread do so
 * while the call is in flight); the test's own calls have their list. */
static const char *host_call_header(mcpg_call *h, const char *lname, size_t *len) {
    CALL_OR(h, "call_header", NULL);
    if (c->submitted) return c->d.header ? c->d.header(c->d.transport_ctx, lname, len) : NULL;
    for (fh_header *hd = c->headers; hd; hd = hd->next)
        if (strcmp(hd->name, lname) == 0) return text_out(hd->value, strlen(hd->value), len);
    return NULL;
}

/* The fake host samples no request: a backend under test forwards the
 * client's traceparent as it does without a telemetry module. */
static uint32_t host_call_trace_upstream(mcpg_call *h, const char *name, char *tp, size_t cap) {
    (void)name;
    CALL_OR(h, "call_trace_upstream", 0);
    (void)c;
    if (tp && cap) tp[0] = '\0';
    return 0;
}

static void host_call_trace_upstream_end(mcpg_call *h, uint32_t span, int status, const char *error) {
    (void)span, (void)status, (void)error;
    CALL_OR(h, "call_trace_upstream_end", );
    (void)c;
}

static void **host_call_slot(mcpg_call *h, mcpg_instance *self) {
    CALL_OR(h, "call_slot", NULL);
    if (!self || self->fh != c->fh || self->slot >= FH_MAX_SLOTS) return NULL;
    return &c->slots[self->slot];
}

static void set_ident(fh_call *c, mcpg_ident *id) {
    mcpg_ident_free(c->ident);
    c->ident = id;
}

static int host_call_set_identity(mcpg_call *h, const char *principal, const char *tenant,
                                  const char *roles) {
    CALL_OR(h, "call_set_identity", MCPG_ESTATE);
    mcpg_ident *id = NULL;
    int rc = principal ? mcpg_ident_make_csv(principal, tenant, roles, &id) : 0;
    if (rc == 0) set_ident(c, id);
    return rc;
}

static int host_call_identify(mcpg_call *h, const mcpg_identity *in) {
    CALL_OR(h, "call_identify", MCPG_ESTATE);
    if (!in || in->size < offsetof(mcpg_identity, method) + sizeof in->method) return MCPG_EINVAL;
    mcpg_ident *id = NULL;
    int rc = mcpg_ident_make(in, &id);
    if (rc == 0) set_ident(c, id);
    return rc;
}

static int host_call_bearer(mcpg_call *h, const char **token, size_t *token_len,
                            const char **claims, size_t *claims_len) {
    CALL_OR(h, "call_bearer", MCPG_ENOENT);
    return mcpg_ident_bearer(c->ident, token, token_len, claims, claims_len);
}

static const char *host_call_principal(mcpg_call *h) {
    CALL_OR(h, "call_principal", NULL);
    return c->ident ? c->ident->principal : NULL;
}

static const char *host_call_tenant(mcpg_call *h) {
    CALL_OR(h, "call_tenant", NULL);
    return c->ident ? c->ident->tenant : NULL;
}

static const char *host_call_roles(mcpg_call *h) {
    CALL_OR(h, "call_roles", NULL);
    return c->ident ? c->ident->roles_csv : NULL;
}

static uint32_t host_call_role_count(mcpg_call *h) {
    CALL_OR(h, "call_role_count", 0);
    return c->ident ? c->ident->n_roles : 0;
}

static const char *host_call_role(mcpg_call *h, uint32_t i) {
    CALL_OR(h, "call_role", NULL);
    return c->ident && i < c->ident->n_roles ? c->ident->roles[i] : NULL;
}

static int host_call_has_role(mcpg_call *h, const char *role) {
    CALL_OR(h, "call_has_role", 0);
    return mcpg_ident_has_role(c->ident, role);
}

static const char *host_call_claims(mcpg_call *h, size_t *len) {
    CALL_OR(h, "call_claims", NULL);
    const char *claims = c->ident ? c->ident->claims : NULL;
    if (len) *len = claims ? c->ident->claims_len : 0;
    return claims;
}

static const char *host_call_auth_method(mcpg_call *h) {
    CALL_OR(h, "call_auth_method", NULL);
    return c->ident ? c->ident->method : NULL;
}

static const char *host_call_peer(mcpg_call *h, size_t *len) {
    CALL_OR(h, "call_peer", NULL);
    if (len) *len = c->peer ? strlen(c->peer) : 0;
    return c->peer;
}

static const mcpg_tls_info *host_call_tls(mcpg_call *h) {
    CALL_OR(h, "call_tls", NULL);
    return c->tls;
}

static const char *host_call_client_name(mcpg_call *h) {
    CALL_OR(h, "call_client_name", NULL);
    return c->client_name ? c->client_name : c->target;
}

static int host_call_set_challenge(mcpg_call *h, const char *value) {
    CALL_OR(h, "call_set_challenge", MCPG_ESTATE);
    if (!value || strpbrk(value, "\r\n")) return MCPG_EINVAL;
    char *v = fh_dup_or_null(value);
    if (!v) return MCPG_ENOMEM;
    free(c->challenge);
    c->challenge = v;
    return 0;
}

static int host_call_result(mcpg_call *h, const char *json, size_t len) {
    CALL_OR(h, "call_result", MCPG_ESTATE);
    c->result.len = 0;
    return mcpg_buf_append(&c->result, json, len);
}

static mcpg_buf *host_call_result_buf(mcpg_call *h) {
    CALL_OR(h, "call_result_buf", NULL);
    return &c->result;
}

int fh_call_error(fh_call *c, int64_t code, const char *message, const char *data_json) {
    char *msg = fh_dup_or_null(message ? message : "");
    if (!msg) return MCPG_ENOMEM;
    free(c->err_msg);
    c->err_msg = msg;
    c->is_error = 1;
    c->err_code = code;
    c->err_data.len = 0;
    if (data_json && mcpg_buf_puts(&c->err_data, data_json)) return MCPG_ENOMEM;
    return 0;
}

static int host_call_error(mcpg_call *h, int64_t code, const char *message,
                           const char *data_json) {
    CALL_OR(h, "call_error", MCPG_ESTATE);
    return fh_call_error(c, code, message, data_json);
}

static void host_call_set_http(mcpg_call *h, int http_status, uint32_t retry_after_s) {
    fh_call *c = fh_call_of(h, "host->call_set_http");
    if (!c) return;
    c->http_status = http_status;
    c->retry_after = retry_after_s;
}

static int host_call_cancelled(mcpg_call *h) {
    CALL_OR(h, "call_cancelled", 0);
    return atomic_load(&c->cancelled);
}

/* ---- ops: answers ------------------------------------------------------------ */

static const char *op_stamp(const fh_call *c) {
    return c->op_inst ? c->op_inst->stamp : "an op";
}

/* What the kernel calls an instance of each kind in a call's error. */
static const char *role_of(const mcpg_instance *inst) {
    switch (inst ? inst->m->kind : 0) {
    case MCPG_KIND_IDENTITY: return "identity";
    case MCPG_KIND_POLICY: return "policy";
    case MCPG_KIND_LIMITS: return "limits";
    case MCPG_KIND_AUDIT: return "audit sink";
    case MCPG_KIND_BACKEND: return "backend";
    case MCPG_KIND_EVENTS: return "events";
    default: return "module";
    }
}

/* A module bug decided the call: it fails as the server's fault, naming the
 * instance, so the client is not told its request was wrong. */
static void blame(fh_call *c, const char *what) {
    const mcpg_instance *inst = c->op_inst;
    char msg[256];
    snprintf(msg, sizeof msg, "%s \"%s\" %s (module bug)", role_of(inst),
             inst ? inst->name : "?", what);
    fh_call_error(c, MCPG_RPC_SERVER_ERROR, msg, NULL);
    c->http_status = 503;
}

/* A DENY must say why (call_error); the kernel does not paper over one that
 * does not. */
static void deny_without_error(fh_call *c) {
    fh_fail(c->fh, "%s answered DENY without host->call_error (module bug)", op_stamp(c));
    blame(c, "refused without an error");
}

/* The op's answer is final. On the loop thread. */
void fh_call_finish(fh_call *c, int st) {
    c->answered = 1;
    c->final_status = st;
    if (st == MCPG_DENY && !c->is_error) deny_without_error(c);
    fh_call_end_requests(c); /* its messages first, then its outcome */
    if (!c->on_pool) fh_complete_submitted(c); /* else once the pool has let go of it */
}

/* What the op returned, against a resume that may have come first. Any
 * thread: the op has returned, the call is the host's again. */
static int settle(fh_call *c, int st) {
    if (st != MCPG_CONTINUE && st != MCPG_DENY && st != MCPG_PENDING) {
        fh_fail(c->fh, "%s answered %d, which is not an mcpg_status (module bug)", op_stamp(c),
                st);
        if (!c->is_error) blame(c, "answered something that is not an mcpg_status");
        st = MCPG_DENY;
    }
    return op_settle(&c->op, (mcpg_status)st);
}

static void resumed_on_loop(void *arg) {
    fh_call *c = arg;
    fh_call_finish(c, atomic_load(&c->op.status));
}

/* A resume finishes the op of its handle's stage, and only while that op is
 * outstanding. */
static void host_call_resume(mcpg_call *h, mcpg_status st) {
    fh_call *c = fh_call_of(h, "host->call_resume");
    if (!c) return;
    mcpg_fakehost *fh = c->fh;
    if (st != MCPG_CONTINUE && st != MCPG_DENY) {
        fh_fail(fh, "call_resume with status %d: only CONTINUE or DENY finish an op (module bug)",
                (int)st);
        st = MCPG_DENY;
    }
    int mine = c->dispatched && c->op_stage == call_handle_stage(h);
    int r = mine ? op_resume(&c->op, st) : RESUME_NOT_WAITING;
    if (r == RESUME_TAKEN) return;
    if (r == RESUME_NOT_WAITING) {
        fh_fail(fh, "call_resume on a call that is not pending (module bug)");
        return;
    }
    c->post.fn = resumed_on_loop;
    c->post.arg = c;
    if (fh_post(&fh->worker, &c->post) != 0)
        fh_fail(fh, "call_resume after the fake host stopped (module bug)");
}

static int op_start(fh_call *c, mcpg_instance *inst) {
    if (c->dispatched && !c->answered) return MCPG_ESTATE;
    c->op_inst = inst;
    c->op_stage = stage_of(inst->m->kind);
    c->dispatched = 1;
    c->answered = 0;
    c->cancel_sent = 0;
    op_begin(&c->op);
    return 0;
}

static int op_end(fh_call *c, int status) {
    int st = settle(c, status);
    if (st != MCPG_PENDING) fh_call_finish(c, st);
    return st;
}

int mcpg_fakehost_op_begin(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call) {
    (void)fh;
    if (!inst || !call) return MCPG_EINVAL;
    fh_call *c = fh_call_of(call, "mcpg_fakehost_op_begin");
    return c ? op_start(c, inst) : MCPG_EINVAL;
}

int mcpg_fakehost_op_end(mcpg_fakehost *fh, mcpg_call *call, int status) {
    (void)fh;
    fh_call *c = fh_call_of(call, "mcpg_fakehost_op_end");
    return c ? op_end(c, status) : MCPG_EINVAL;
}

mcpg_call *mcpg_fakehost_op_call(mcpg_instance *inst, mcpg_call *call) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_op_call");
    return c && inst ? fh_handle(c, stage_of(inst->m->kind)) : NULL;
}

int mcpg_fakehost_pending(mcpg_call *call) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_pending");
    return c && atomic_load(&c->op.state) == OP_PENDING;
}

/* ---- ops: dispatch ----------------------------------------------------------- */

/* The backend op for the call's method, by the rule the kernel applies
 * (call_rules.c): kept in c->op_fn. */
static int backend_op(const mcpg_backend_ops *o, fh_call *c) {
    c->op_fn = call_backend_op_for(o, c->method_id);
    return c->op_fn ? OPK_BACKEND : MCPG_ENOTSUP;
}

/* Which op of inst serves this call, or MCPG_ENOTSUP. Mandatory ops were
 * checked at load. */
static int pick_op(const mcpg_instance *inst, fh_call *c) {
    switch (inst->m->kind) {
    case MCPG_KIND_BACKEND: return backend_op(inst->m->ops, c);
    case MCPG_KIND_IDENTITY: return OPK_AUTHENTICATE;
    case MCPG_KIND_POLICY: return OPK_CHECK;
    case MCPG_KIND_LIMITS: return OPK_ACQUIRE;
    case MCPG_KIND_AUDIT: return OPK_EMIT;
    case MCPG_KIND_EVENTS: return OPK_EVENTS;
    default: return MCPG_ENOTSUP;
    }
}

static int invoke(fh_call *c) {
    void *s = c->op_inst->state;
    const void *ops = c->op_inst->m->ops;
    mcpg_call *h = fh_handle(c, c->op_stage);
    switch (c->op_kind) {
    case OPK_BACKEND: return c->op_fn(s, h);
    case OPK_AUTHENTICATE: return ((const mcpg_identity_ops *)ops)->authenticate(s, h);
    case OPK_CHECK: return ((const mcpg_policy_ops *)ops)->check(s, h);
    case OPK_ACQUIRE: return ((const mcpg_limits_ops *)ops)->acquire(s, h);
    case OPK_EMIT: return ((const mcpg_audit_ops *)ops)->emit(s, h, c->op_event);
    default: return ((const mcpg_events_ops *)ops)->request(s, h);
    }
}

/* A backend op on the pool, as the kernel runs one not dispatched inline. */
static void pool_op_run(uv_work_t *req) {
    fh_call *c = req->data;
    c->pool_status = settle(c, invoke(c));
}

static void pool_op_after(uv_work_t *req, int uv_status) {
    fh_call *c = req->data;
    (void)uv_status; /* never cancelled: nothing calls uv_cancel on it */
    c->on_pool = 0;
    if (c->pool_status != MCPG_PENDING) fh_call_finish(c, c->pool_status);
    else if (c->answered) fh_complete_submitted(c); /* the resume overtook us */
}

static int dispatch_kind(mcpg_fakehost *fh, mcpg_instance *inst, fh_call *c, int kind) {
    int rc = op_start(c, inst);
    if (rc) return rc;
    c->op_kind = kind;
    if (inst->m->kind == MCPG_KIND_BACKEND && !inst->inline_dispatch) {
        c->on_pool = 1;
        c->pool_req.data = c;
        if (uv_queue_work(&fh->loop, &c->pool_req, pool_op_run, pool_op_after) == 0)
            return MCPG_PENDING;
        c->on_pool = 0; /* cannot happen with valid arguments; run it here */
    }
    return op_end(c, invoke(c));
}

static void default_event(const fh_call *c, mcpg_audit_event *ev) {
    memset(ev, 0, sizeof *ev);
    ev->size = sizeof *ev;
    ev->name = "mcpg.tool.call.completed";
    ev->seq = 1;
    ev->time_us = fh_wall_us();
    ev->id_json = c->id;
    ev->id_len = c->id_len;
    ev->method = c->method;
    ev->tool = c->method_id == MCPG_METHOD_TOOLS_CALL ? c->target : NULL;
    ev->principal = c->ident ? c->ident->principal : NULL;
    ev->tenant = c->ident ? c->ident->tenant : NULL;
    ev->roles_json = c->ident ? c->ident->roles_json : NULL;
    ev->auth_method = c->ident ? c->ident->method : NULL;
    ev->peer = c->peer;
    ev->args_json = c->args;
    ev->args_len = c->args_len;
    ev->wire = c->wire;
    ev->generation = 1;
    ev->server = c->server;
    ev->error_code = c->is_error ? c->err_code : 0;
    ev->error_message = c->is_error ? c->err_msg : NULL;
}

static int emit(mcpg_fakehost *fh, mcpg_instance *inst, fh_call *c,
                const mcpg_audit_event *event) {
    c->op_event = event; /* borrowed for the emit() call only */
    int st = dispatch_kind(fh, inst, c, OPK_EMIT);
    c->op_event = NULL;
    return st;
}

int mcpg_fakehost_emit(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call,
                       const mcpg_audit_event *event) {
    if (!inst || inst->m->kind != MCPG_KIND_AUDIT || !event) return MCPG_ENOTSUP;
    fh_call *c = fh_call_of(call, "mcpg_fakehost_emit");
    return c ? emit(fh, inst, c, event) : MCPG_EINVAL;
}

int fh_call_dispatch(mcpg_fakehost *fh, mcpg_instance *inst, fh_call *c) {
    if (inst->m->kind == MCPG_KIND_AUDIT) {
        mcpg_audit_event ev;
        default_event(c, &ev);
        return emit(fh, inst, c, &ev);
    }
    int kind = pick_op(inst, c);
    return kind < 0 ? kind : dispatch_kind(fh, inst, c, kind);
}

int mcpg_fakehost_dispatch(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call) {
    if (!fh || !inst || !call) return MCPG_EINVAL;
    fh_call *c = fh_call_of(call, "mcpg_fakehost_dispatch");
    return c ? fh_call_dispatch(fh, inst, c) : MCPG_EINVAL;
}

void mcpg_fakehost_release(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call) {
    (void)fh;
    if (!inst || inst->m->kind != MCPG_KIND_LIMITS) return;
    const mcpg_limits_ops *o = inst->m->ops;
    fh_call *c = fh_call_of(call, "mcpg_fakehost_release");
    if (c && MCPG_HAS(o, release)) o->release(inst->state, fh_handle(c, CALL_STAGE_LIMITS));
}

/* As the kernel (call_cancel): the call is flagged for every op to see, and
 * a backend whose op is pending (it returned PENDING, its resume not yet
 * taken) is told once, on the loop, whether it runs inline or on the pool.
 * A backend op still running can ask call_cancelled itself. */
void fh_call_cancel_op(fh_call *c) {
    atomic_store(&c->cancelled, 1);
    mcpg_instance *be = c->op_inst;
    if (!be || be->m->kind != MCPG_KIND_BACKEND || c->cancel_sent) return;
    if (atomic_load(&c->op.state) != OP_PENDING) return;
    const mcpg_backend_ops *o = be->m->ops;
    if (!MCPG_HAS(o, cancel)) return;
    c->cancel_sent = 1;
    o->cancel(be->state, fh_handle(c, CALL_STAGE_BACKEND));
}

/* ---- waiting ---------------------------------------------------------------- */

/* Answered, and no pool thread still holds it: the test may free it. */
static int call_settled(void *arg) {
    const fh_call *c = arg;
    return c->answered && !c->on_pool;
}

int mcpg_fakehost_wait(mcpg_fakehost *fh, mcpg_call *call, uint64_t timeout_ms) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_wait");
    if (!c || !c->dispatched) return MCPG_ESTATE;
    if (mcpg_fakehost_run_until(fh, call_settled, c, timeout_ms)) return MCPG_ETIMEDOUT;
    return c->final_status;
}

int mcpg_fakehost_run(mcpg_fakehost *fh, mcpg_instance *inst, mcpg_call *call,
                      uint64_t timeout_ms) {
    int st = mcpg_fakehost_dispatch(fh, inst, call);
    if (st < 0) return st;
    return mcpg_fakehost_wait(fh, call, timeout_ms);
}

/* ---- the end of an instance, of the fake host ------------------------------ */

/* The kernel stops an instance only once no call is inside it; here the test
 * decides, so say when it got that wrong, and make sure no call keeps a
 * pointer to the instance about to be freed. */
void fh_calls_forget(mcpg_fakehost *fh, mcpg_instance *inst) {
    for (fh_call *c = fh->calls; c; c = c->next) {
        if (c->op_inst != inst) continue;
        if (op_holds(c)) fh_fail(fh, "%s unloaded while a call's op is still in it", inst->stamp);
        c->op_inst = NULL;
    }
}

static const char *leftover_why(const fh_call *c) {
    if (c->submitted && !c->completed) return "a submitted call never completed";
    if (c->submitted) return "a call was not released (host->call_release)";
    return "a call was not freed (mcpg_fakehost_call_free)";
}

/* Returns 1 when an op may still touch a call: the slabs are then left
 * allocated (leaked on purpose), as memory someone still uses. */
int fh_calls_free(mcpg_fakehost *fh) {
    int held = 0;
    for (fh_call *c = fh->calls, *next; c; c = next) {
        next = c->next;
        if (op_holds(c)) {
            fh_fail(fh, "a call was still running at free: leaked");
            held = 1;
            continue;
        }
        fh_fail(fh, "%s", leftover_why(c));
        fh_call_retire(c);
    }
    if (!held) fh_slabs_free(fh);
    return held;
}

/* ---- the slots ----------------------------------------------------------------- */

void fh_call_slots(mcpg_host *h) {
    h->call_worker = host_call_worker;
    h->call_method = host_call_method;
    h->call_wire = host_call_wire;
    h->call_target = host_call_target;
    h->call_args = host_call_args;
    h->call_params = host_call_params;
    h->call_id = host_call_id;
    h->call_header = host_call_header;
    h->call_trace_upstream = host_call_trace_upstream;
    h->call_trace_upstream_end = host_call_trace_upstream_end;
    h->call_bearer = host_call_bearer;
    h->call_slot = host_call_slot;
    h->call_set_identity = host_call_set_identity;
    h->call_principal = host_call_principal;
    h->call_tenant = host_call_tenant;
    h->call_roles = host_call_roles;
    h->call_result = host_call_result;
    h->call_result_buf = host_call_result_buf;
    h->call_error = host_call_error;
    h->call_set_http = host_call_set_http;
    h->call_resume = host_call_resume;
    h->call_cancelled = host_call_cancelled;
    fh_message_slots(h);
    h->call_peer = host_call_peer;
    h->call_tls = host_call_tls;
    h->call_identify = host_call_identify;
    h->call_role_count = host_call_role_count;
    h->call_role = host_call_role;
    h->call_has_role = host_call_has_role;
    h->call_claims = host_call_claims;
    h->call_auth_method = host_call_auth_method;
    h->call_client_name = host_call_client_name;
    h->call_set_challenge = host_call_set_challenge;
}

/* ======== ABI 1.1: a call's messages before its outcome ====================
 *
 * As the kernel: a backend (any thread, while its op runs or is pending)
 * sends notifications and requests; each is framed as JSON-RPC, kept in the
 * call's list in order (tests read it) and handed to the call's transport on
 * the loop (desc->message), all of them before complete(). A request gets an
 * id minted here, a timer once sent, and exactly one reply on the loop: the
 * client's answer, MCPG_ETIMEDOUT, or MCPG_ECANCELED when the call ends
 * first. The list is guarded by fh->lock; delivery and replies are the
 * loop's. */

struct fh_request {
    fh_call *c;
    int index;        /* the call's n-th request, from 0 */
    char id[48];      /* minted: "mcpg-<worker>-<n>" */
    mcpg_reply_fn fn;
    void *arg;
    uint64_t timeout_ms;
    uv_timer_t timer;
    int armed;        /* the timer is initialised (closed before the free) */
};

/* Unique in the process, as the kernel's are across its loops. */
static atomic_ulong request_serial;

/* A flush asked from off the loop: carried to it by a node of its own, so
 * any number may be queued; it checks the call's life when it runs. */
typedef struct flush_post {
    mcpg_post node;
    fh_call *c;
    uint32_t serial;
} flush_post;

static void flush_posted(void *arg) {
    flush_post *p = arg;
    if (atomic_load(&p->c->alive) == p->serial) fh_call_flush(p->c);
    free(p);
}

static void flush_soon(fh_call *c) {
    flush_post *p = calloc(1, sizeof *p);
    if (!p) return; /* delivered at the call's end all the same */
    *p = (flush_post){.node = {.fn = flush_posted, .arg = p}, .c = c, .serial = c->serial};
    if (fh_post(&c->fh->worker, &p->node) != 0) free(p);
}

/* The messages may go out: its op is running or pending. */
static int op_live(fh_call *c) { return op_outstanding(&c->op); }

/* Whether the call's answer can carry messages at all. */
static int can_carry(const fh_call *c) {
    if (c->submitted) return c->d.message != NULL; /* zero unless the desc is 1.1 */
    return !c->no_messages;
}

/* Append one framed message (taking b's text) under the lock. */
static int msg_add(fh_call *c, mcpg_buf *b, fh_request *req) {
    mcpg_fakehost *fh = c->fh;
    int rc = 0;
    pthread_mutex_lock(&fh->lock);
    if (c->n_msgs >= FH_MSG_MAX || (req && c->outstanding >= FH_REQ_MAX)) {
        rc = MCPG_EAGAIN;
    } else if (c->n_msgs == c->cap_msgs) {
        int cap = c->cap_msgs ? 2 * c->cap_msgs : 8;
        fh_msg *m = realloc(c->msgs, (size_t)cap * sizeof *m);
        if (!m) rc = MCPG_ENOMEM;
        else {
            c->msgs = m;
            c->cap_msgs = cap;
        }
    }
    if (rc == 0) {
        c->msgs[c->n_msgs++] = (fh_msg){.json = b->data, .len = b->len, .req = req};
        if (req) {
            req->index = c->n_requests++;
            c->outstanding++;
        }
        *b = (mcpg_buf){0};
    }
    pthread_mutex_unlock(&fh->lock);
    return rc;
}

/* What both slots check first: 0, or why the message cannot go. */
static int send_check(fh_call *c, const char *slot, const char *method, const char *params,
                      size_t plen) {
    if (!method || (params && mcpg_json_validate(params, plen) != 0)) {
        fh_fail(c->fh, "host->%s: %s (module bug)", slot,
                method ? "params_json is not valid JSON" : "no method");
        return MCPG_EINVAL;
    }
    if (!op_live(c)) {
        fh_fail(c->fh, "host->%s on a call whose op is neither running nor pending (module bug)",
                slot);
        return MCPG_ESTATE;
    }
    return can_carry(c) ? 0 : MCPG_ENOTSUP;
}

static int host_call_notify(mcpg_call *h, const char *method, const char *params,
                            size_t plen) {
    CALL_OR(h, "call_notify", MCPG_ESTATE);
    int rc = send_check(c, "call_notify", method, params, plen);
    if (rc) return rc;
    mcpg_buf b = {0};
    if (mcpg__rpc_frame(&b, NULL, method, params, plen)) rc = MCPG_ENOMEM;
    if (rc == 0) rc = msg_add(c, &b, NULL);
    mcpg_buf_free(&b);
    if (rc == 0) flush_soon(c);
    return rc;
}

static int host_call_request(mcpg_call *h, const char *method, const char *params,
                             size_t plen, uint64_t timeout_ms, mcpg_reply_fn fn, void *arg) {
    CALL_OR(h, "call_request", MCPG_ESTATE);
    if (!fn) return MCPG_EINVAL;
    int rc = send_check(c, "call_request", method, params, plen);
    if (rc) return rc;
    if (c->wire == MCPG_WIRE_STATELESS) return MCPG_ENOTSUP; /* input_required instead */
    fh_request *r = calloc(1, sizeof *r);
    if (!r) return MCPG_ENOMEM;
    *r = (fh_request){.c = c, .fn = fn, .arg = arg,
                      .timeout_ms = timeout_ms ? timeout_ms : FH_REQUEST_MS};
    snprintf(r->id, sizeof r->id, "mcpg-0-%lu", atomic_fetch_add(&request_serial, 1) + 1);
    mcpg_buf b = {0};
    if (mcpg__rpc_frame(&b, r->id, method, params, plen)) rc = MCPG_ENOMEM;
    if (rc == 0) rc = msg_add(c, &b, r);
    mcpg_buf_free(&b);
    if (rc) {
        free(r); /* fn is never called */
        return rc;
    }
    flush_soon(c);
    return 0;
}

/* ---- replies (loop thread) ---- */

static void request_closed(uv_handle_t *t) { free(t->data); }

/* Unlink r from its call's list: its reply is being given. */
static void request_unlink(fh_request *r) {
    fh_call *c = r->c;
    pthread_mutex_lock(&c->fh->lock);
    for (int i = 0; i < c->n_msgs; i++)
        if (c->msgs[i].req == r) c->msgs[i].req = NULL;
    c->outstanding--;
    pthread_mutex_unlock(&c->fh->lock);
}

void fh_request_answer(fh_request *r, const mcpg_reply *reply) {
    request_unlink(r);
    if (r->armed) uv_timer_stop(&r->timer);
    r->fn(r->arg, reply); /* after the unlink: fn may ask again */
    if (!r->armed) {
        free(r);
        return;
    }
    r->timer.data = r;
    uv_close((uv_handle_t *)&r->timer, request_closed);
}

static void request_status(fh_request *r, int status) {
    mcpg_reply reply = {.size = sizeof reply, .status = status};
    fh_request_answer(r, &reply);
}

static void request_timed_out(uv_timer_t *t) { request_status(t->data, MCPG_ETIMEDOUT); }

/* Sent: its time runs from now. */
static void request_arm(fh_request *r) {
    mcpg_fakehost *fh = r->c->fh;
    uv_timer_init(&fh->loop, &r->timer);
    r->timer.data = r;
    r->armed = 1;
    uv_update_time(&fh->loop);
    uv_timer_start(&r->timer, request_timed_out, r->timeout_ms, 0);
}

/* The next message not handed on yet (its index in *at), or 0. */
static int next_undelivered(fh_call *c, fh_msg *out, int *at) {
    pthread_mutex_lock(&c->fh->lock);
    int more = c->delivered < c->n_msgs;
    if (more) {
        *at = c->delivered++;
        *out = c->msgs[*at];
    }
    pthread_mutex_unlock(&c->fh->lock);
    return more;
}

/* Still waiting: a transport may have had its answer inside message(). */
static int still_waiting(fh_call *c, int at, const fh_request *r) {
    pthread_mutex_lock(&c->fh->lock);
    int yes = c->msgs[at].req == r;
    pthread_mutex_unlock(&c->fh->lock);
    return yes;
}

void fh_call_flush(fh_call *c) {
    fh_msg m;
    int at;
    while (next_undelivered(c, &m, &at)) {
        int rc = 0;
        if (c->submitted && c->d.message)
            rc = c->d.message(c->d.transport_ctx, fh_handle(c, CALL_STAGE_TRANSPORT), m.json,
                              m.len);
        if (rc && !m.req) fh_note(c->fh, "the transport refused a notification: %s", m.json);
        if (!m.req || !still_waiting(c, at, m.req)) continue;
        if (rc) request_status(m.req, MCPG_ENOTSUP); /* its answer cannot carry it after all */
        else request_arm(m.req);
    }
}

/* The first request of c still waiting, or NULL. */
static fh_request *first_waiting(fh_call *c) {
    fh_request *r = NULL;
    pthread_mutex_lock(&c->fh->lock);
    for (int i = 0; i < c->n_msgs && !r; i++) r = c->msgs[i].req;
    pthread_mutex_unlock(&c->fh->lock);
    return r;
}

void fh_call_end_requests(fh_call *c) {
    fh_call_flush(c);
    for (fh_request *r; (r = first_waiting(c));) request_status(r, MCPG_ECANCELED);
}

void fh_call_free_messages(fh_call *c) {
    for (fh_request *r; (r = first_waiting(c));) {
        fh_fail(c->fh, "a request of a call was still waiting when the call was freed");
        request_status(r, MCPG_ECANCELED);
    }
    for (int i = 0; i < c->n_msgs; i++) free(c->msgs[i].json);
    free(c->msgs);
    c->msgs = NULL;
    c->n_msgs = c->cap_msgs = c->n_requests = c->outstanding = c->delivered = 0;
    mcpg_buf_free(&c->msgs_text);
}

fh_request *fh_request_find(mcpg_fakehost *fh, const char *id, fh_call **call_out) {
    for (fh_call *c = fh->calls; c; c = c->next) {
        fh_request *found = NULL;
        pthread_mutex_lock(&fh->lock);
        for (int i = 0; i < c->n_msgs && !found; i++)
            if (c->msgs[i].req && strcmp(c->msgs[i].req->id, id) == 0) found = c->msgs[i].req;
        pthread_mutex_unlock(&fh->lock);
        if (found) {
            *call_out = c;
            return found;
        }
    }
    return NULL;
}

/* ---- what the call says about its client ---- */

static void host_call_set_result_type(mcpg_call *h, uint32_t type) {
    fh_call *c = fh_call_of(h, "host->call_set_result_type");
    if (c) c->result_type = type;
}

static const char *host_call_session(mcpg_call *h, size_t *len) {
    fh_call *c = fh_call_of(h, "host->call_session");
    const char *s = c ? c->session : NULL;
    return text_out(s, s ? strlen(s) : 0, len);
}

static const char *host_call_client_capabilities(mcpg_call *h, size_t *len) {
    fh_call *c = fh_call_of(h, "host->call_client_capabilities");
    const char *s = c ? c->caps : NULL;
    return text_out(s, s ? strlen(s) : 0, len);
}

static const char *host_call_protocol_version(mcpg_call *h, size_t *len) {
    fh_call *c = fh_call_of(h, "host->call_protocol_version");
    const char *s = c ? c->version : NULL;
    return text_out(s, s ? strlen(s) : 0, len);
}

/* ---- the test's side ---- */

static int set_text(char **dst, const char *s) {
    char *p = s ? fh_dup_or_null(s) : NULL;
    if (s && !p) return MCPG_ENOMEM;
    free(*dst);
    *dst = p;
    return 0;
}

int mcpg_fakehost_call_set_session(mcpg_call *call, const char *session_id) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_set_session");
    return c ? set_text(&c->session, session_id) : MCPG_ESTATE;
}

int mcpg_fakehost_call_set_caps(mcpg_call *call, const char *caps_json) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_set_caps");
    if (!c) return MCPG_ESTATE;
    if (caps_json && mcpg_json_validate(caps_json, strlen(caps_json)) != 0) return MCPG_EINVAL;
    return set_text(&c->caps, caps_json);
}

int mcpg_fakehost_call_set_version(mcpg_call *call, const char *protocol_version) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_set_version");
    return c ? set_text(&c->version, protocol_version) : MCPG_ESTATE;
}

void mcpg_fakehost_call_set_streaming(mcpg_call *call, int can_carry_messages) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_set_streaming");
    if (c) c->no_messages = !can_carry_messages;
}

int mcpg_fakehost_message_count(mcpg_call *call) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_message_count");
    if (!c) return 0;
    pthread_mutex_lock(&c->fh->lock);
    int n = c->n_msgs;
    pthread_mutex_unlock(&c->fh->lock);
    return n;
}

const char *mcpg_fakehost_message(mcpg_call *call, int i) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_message");
    if (!c) return NULL;
    pthread_mutex_lock(&c->fh->lock);
    const char *m = i >= 0 && i < c->n_msgs ? c->msgs[i].json : NULL;
    pthread_mutex_unlock(&c->fh->lock);
    return m;
}

const char *mcpg_fakehost_messages(mcpg_call *call) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_messages");
    if (!c) return "";
    pthread_mutex_lock(&c->fh->lock);
    c->msgs_text.len = 0;
    int rc = mcpg_buf_puts(&c->msgs_text, "");
    for (int i = 0; i < c->n_msgs && !rc; i++)
        rc = mcpg_buf_printf(&c->msgs_text, "%s%s", i ? "\n" : "", c->msgs[i].json);
    pthread_mutex_unlock(&c->fh->lock);
    return c->msgs_text.data ? c->msgs_text.data : "";
}

/* The call's request number `index`, still waiting; NULL if none. */
static fh_request *request_at(fh_call *c, int index) {
    fh_request *r = NULL;
    pthread_mutex_lock(&c->fh->lock);
    for (int i = 0; i < c->n_msgs && !r; i++)
        if (c->msgs[i].req && c->msgs[i].req->index == index) r = c->msgs[i].req;
    pthread_mutex_unlock(&c->fh->lock);
    return r;
}

const char *mcpg_fakehost_request_id(mcpg_call *call, int index) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_request_id");
    fh_request *r = c ? request_at(c, index) : NULL;
    return r ? r->id : NULL;
}

typedef struct test_reply {
    fh_call *c;
    int index, rc;
    mcpg_reply reply;
} test_reply;

static void reply_on_loop(void *arg) {
    test_reply *t = arg;
    fh_call_flush(t->c); /* a request not handed on yet is sent first */
    fh_request *r = request_at(t->c, t->index);
    if (!r) {
        t->rc = MCPG_ENOENT;
        return;
    }
    fh_request_answer(r, &t->reply);
}

static int test_answer(mcpg_fakehost *fh, mcpg_call *call, int index, const mcpg_reply *reply) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_reply");
    if (!c) return MCPG_ESTATE;
    test_reply t = {.c = c, .index = index, .reply = *reply};
    int rc = mcpg_fakehost_run_on_loop(fh, reply_on_loop, &t);
    return rc ? rc : t.rc;
}

int mcpg_fakehost_reply(mcpg_fakehost *fh, mcpg_call *call, int request_index,
                        const char *result_json) {
    if (!result_json || mcpg_json_validate(result_json, strlen(result_json)) != 0)
        return MCPG_EINVAL;
    mcpg_reply reply = {.size = sizeof reply, .result_json = result_json,
                        .result_len = strlen(result_json)};
    return test_answer(fh, call, request_index, &reply);
}

int mcpg_fakehost_reply_error(mcpg_fakehost *fh, mcpg_call *call, int request_index,
                              int64_t code, const char *message, const char *data_json) {
    mcpg_reply reply = {.size = sizeof reply, .is_error = 1, .error_code = code,
                        .error_message = message ? message : "",
                        .error_data = data_json, .error_data_len = data_json ? strlen(data_json) : 0};
    return test_answer(fh, call, request_index, &reply);
}

int mcpg_fakehost_reply_status(mcpg_fakehost *fh, mcpg_call *call, int request_index,
                               int status) {
    mcpg_reply reply = {.size = sizeof reply, .status = status};
    return test_answer(fh, call, request_index, &reply);
}

void fh_message_slots(mcpg_host *h) {
    h->call_notify = host_call_notify;
    h->call_request = host_call_request;
    h->call_set_result_type = host_call_set_result_type;
    h->call_session = host_call_session;
    h->call_client_capabilities = host_call_client_capabilities;
    h->call_protocol_version = host_call_protocol_version;
}
