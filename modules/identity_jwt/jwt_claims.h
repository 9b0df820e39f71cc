/* identity_jwt: a token's claims judged (RFC 7519 §4.1: iss, aud, exp, nbf,
 * iat) and mapped to who the call is (principal, tenant, roles). */
#ifndef JWT_CLAIMS_H
#define JWT_CLAIMS_H

#include <stddef.h>
#include <stdint.h>

#include <mcpg/json.h>

#include "jwt_verdict.h"

#define JWT_ROLES_MAX 64
#define JWT_MAPPED_TEXT 4096 /* bytes of principal, tenant and roles together */

typedef struct jwt_rules {
    const char *issuer;          /* iss must equal it */
    const char *audience;        /* aud (a string or an array) must contain it */
    int64_t skew_s;              /* leeway for exp, nbf and iat */
    const char *principal_claim; /* a string claim */
    const char *tenant_claim;    /* a string claim, or NULL */
    const char *roles_claim;     /* an array of strings or a space-separated string, or NULL */
} jwt_rules;

typedef struct jwt_mapped {
    const char *principal;       /* into text */
    const char *tenant;          /* into text, or NULL */
    const char *roles[JWT_ROLES_MAX];
    uint32_t n_roles;
    int64_t exp;                 /* seconds since the epoch */
    char text[JWT_MAPPED_TEXT];
} jwt_mapped;

/* A claim by name: the top-level member of that exact name or, when there
 * is none and the name has dots, the path through nested objects
 * ("realm_access.roles"). 1 found, 0 not. */
int jwt_claim_find(const char *claims, size_t n, const char *name, mcpg_json_span *out);

/* Judge the claims (a valid JSON object's text) at now_s: JWT_OK with *out
 * filled, or what is wrong. */
jwt_verdict jwt_claims_check(const jwt_rules *r, const char *claims, size_t n, int64_t now_s,
                             jwt_mapped *out);

#endif
