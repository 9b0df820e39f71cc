/* Who a call is and where it came from: the identity the identity stage
 * set, the client's address and TLS facts the transport gave, the name the
 * client used, and the challenge a 401 answers with (the host table's
 * call_identify ... call_set_challenge slots). */
#include "call_internal.h"

#include <stdlib.h>
#include <string.h>

void call_identity_clear(mcpg_call *c) {
    mcpg_ident_free(c->ident);
    free(c->challenge);
    c->ident = NULL;
    c->challenge = NULL;
}

static void identify(mcpg_call *c, mcpg_ident *id) {
    mcpg_ident_free(c->ident);
    c->ident = id;
}

int host_call_identify(mcpg_call *h, const mcpg_identity *id) {
    mcpg_call *c = call_of(h, "call_identify");
    if (!c) return MCPG_ESTATE;
    if (!id || id->size < offsetof(mcpg_identity, method) + sizeof id->method)
        return MCPG_EINVAL;
    mcpg_ident *made = NULL;
    int rc = mcpg_ident_make(id, &made);
    if (rc == 0) identify(c, made);
    return rc;
}

/* ABI 1.0: a NULL principal clears the identity (the call is anonymous). */
int host_call_set_identity(mcpg_call *h, const char *principal, const char *tenant,
                           const char *roles) {
    mcpg_call *c = call_of(h, "call_set_identity");
    if (!c) return MCPG_ESTATE;
    mcpg_ident *made = NULL;
    int rc = principal ? mcpg_ident_make_csv(principal, tenant, roles, &made) : 0;
    if (rc == 0) identify(c, made);
    return rc;
}

const char *host_call_principal(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_principal");
    return c && c->ident ? c->ident->principal : NULL;
}

/* NULL (out of memory) matches no session: never "", which is anonymous. */
const char *call_owner_of(mcpg_call *c, size_t *len) {
    if (len) *len = 0;
    if (!c->ident) return "";
    if (!c->owner.len) {
        const char *t = c->ident->tenant ? c->ident->tenant : "";
        if (mcpg_buf_printf(&c->owner, "%s\x1f%s", c->ident->principal, t) != 0) {
            c->owner.len = 0;
            return NULL;
        }
    }
    if (len) *len = c->owner.len;
    return c->owner.data;
}

const char *host_call_owner(mcpg_call *h, size_t *len) {
    mcpg_call *c = call_of(h, "call_owner");
    if (!c || !c->identity_ran) {
        if (len) *len = 0;
        return NULL;
    }
    return call_owner_of(c, len);
}

const char *host_call_tenant(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_tenant");
    return c && c->ident ? c->ident->tenant : NULL;
}

const char *host_call_roles(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_roles");
    return c && c->ident ? c->ident->roles_csv : NULL;
}

uint32_t host_call_role_count(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_role_count");
    return c && c->ident ? c->ident->n_roles : 0;
}

const char *host_call_role(mcpg_call *h, uint32_t i) {
    mcpg_call *c = call_of(h, "call_role");
    return c && c->ident && i < c->ident->n_roles ? c->ident->roles[i] : NULL;
}

int host_call_has_role(mcpg_call *h, const char *role) {
    mcpg_call *c = call_of(h, "call_has_role");
    return c ? mcpg_ident_has_role(c->ident, role) : 0;
}

const char *host_call_claims(mcpg_call *h, size_t *len) {
    mcpg_call *c = call_of(h, "call_claims");
    const char *claims = c && c->ident ? c->ident->claims : NULL;
    if (len) *len = claims ? c->ident->claims_len : 0;
    return claims;
}

int host_call_bearer(mcpg_call *h, const char **token, size_t *token_len, const char **claims,
                     size_t *claims_len) {
    mcpg_call *c = call_of(h, "call_bearer");
    return mcpg_ident_bearer(c ? c->ident : NULL, token, token_len, claims, claims_len);
}

const char *host_call_auth_method(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_auth_method");
    return c && c->ident ? c->ident->method : NULL;
}

/* The transport's text is copied at submit (call.c): a backend on the pool
 * may ask after the transport's request is gone. */
const char *host_call_peer(mcpg_call *h, size_t *len) {
    mcpg_call *c = call_of(h, "call_peer");
    const char *p = c && c->peer[0] ? c->peer : NULL;
    if (len) *len = p ? strlen(p) : 0;
    return p;
}

/* Borrowed from the transport: only on the call's loop, before its answer. */
const mcpg_tls_info *host_call_tls(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_tls");
    if (!c || call_answered(c) || worker_self() != c->w) return NULL;
    const mcpg_tls_info *t = c->d.tls;
    return t && t->size >= offsetof(mcpg_tls_info, cert_sha256) + sizeof t->cert_sha256 ? t
                                                                                         : NULL;
}

const char *call_client_name_of(mcpg_call *c) {
    if (c->route && c->method != MCPG_METHOD_RESOURCES_READ &&
        c->list_kind < 0 && c->method != MCPG_METHOD_COMPLETION_COMPLETE &&
        c->method < MCPG_METHOD_TASKS_GET)
        return c->route->client_name;
    if (c->name_copy.len) return c->name_copy.data; /* kept: a pool call's desc has no name */
    if (!c->d.name) return NULL;
    if (mcpg_buf_append(&c->name_copy, c->d.name, c->d.name_len) != 0) return NULL;
    return c->name_copy.data ? c->name_copy.data : "";
}

const char *host_call_client_name(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_client_name");
    return c ? call_client_name_of(c) : NULL;
}

const char *host_call_challenge(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_challenge");
    return c ? c->challenge : NULL;
}

int host_call_audited(mcpg_call *h) {
    mcpg_call *c = call_of(h, "call_audited");
    return c && c->outcome_audited;
}

int host_call_set_challenge(mcpg_call *h, const char *value) {
    mcpg_call *c = call_of(h, "call_set_challenge");
    if (!c) return MCPG_ESTATE;
    if (!value || strpbrk(value, "\r\n")) return MCPG_EINVAL; /* one header line */
    char *copy = strdup(value);
    if (!copy) return MCPG_ENOMEM;
    free(c->challenge);
    c->challenge = copy;
    return 0;
}
