/* An identity as a call keeps it: what host->call_identify (or 1.0's
 * call_set_identity) was given, copied into one allocation. Shared by the
 * kernel and the SDK's fake host so both answer the call_role* slots alike. */
#ifndef MCPG_HOSTCORE_IDENT_H
#define MCPG_HOSTCORE_IDENT_H

#include "mcpg/abi.h"

typedef struct mcpg_ident {
    const char *principal;
    const char *tenant;       /* or NULL */
    const char *method;       /* or NULL */
    const char *claims;       /* a JSON object's text, or NULL */
    size_t claims_len;
    uint32_t n_roles;
    const char *const *roles;
    const char *roles_csv;    /* "a,b" (1.0's call_roles), or NULL without roles */
    const char *roles_json;   /* ["a","b"] (audit), or NULL without roles */
    const char *bearer;       /* the verified bearer token (ABI 1.11), or NULL */
    size_t bearer_len;
} mcpg_ident;

/* 0 with *out (free with free()), MCPG_EINVAL (no principal, a NULL role,
 * claims that are not a JSON object), MCPG_ENOMEM. */
int mcpg_ident_make(const mcpg_identity *id, mcpg_ident **out);
/* 1.0's form: roles_csv split at commas, blanks around each trimmed, empty
 * ones dropped. */
int mcpg_ident_make_csv(const char *principal, const char *tenant, const char *roles_csv,
                        mcpg_ident **out);
/* Free an identity, its bearer token wiped first (a freed block may be
 * read back by the next allocation's owner). NULL is fine. */
void mcpg_ident_free(mcpg_ident *id);
/* host->call_bearer's answer for id (may be NULL): 0 with the outs set,
 * MCPG_ENOENT (outs zeroed) without a verified bearer token. */
int mcpg_ident_bearer(const mcpg_ident *id, const char **token, size_t *token_len,
                      const char **claims, size_t *claims_len);
int mcpg_ident_has_role(const mcpg_ident *id, const char *role);

#endif
