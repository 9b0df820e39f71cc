/* identity_jwt: its settings, and the checks the schema cannot express. */
#ifndef JWT_CONFIG_H
#define JWT_CONFIG_H

#include <mcpg/sdk.h>

typedef struct jwt_cfg {
    const char *issuer, *audience;
    const char *jwks_file, *jwks_url, *jwks_ca_file;
    int jwks_tls_insecure;
    int64_t jwks_refresh_ms, jwks_min_refresh_ms, jwks_timeout_ms, max_waiters;
    const char *algorithms; /* JSON array text */
    int64_t clock_skew_s;
    const char *principal_claim, *tenant_claim, *roles_claim;
    const char *resource_metadata_url;
    int64_t max_token_bytes, cache_tokens;
} jwt_cfg;

extern const mcpg_config_field jwt_config_fields[];

/* The `algorithms` setting as JWT_* bits; problems reported under its key
 * path. 0 when none is valid. */
unsigned jwt_config_algorithms(mcpg_config_problems *p, const char *json);

/* Every problem of the config, reported; the number of them. */
int jwt_config_check(mcpg_config_problems *p, const jwt_cfg *c);

#endif
