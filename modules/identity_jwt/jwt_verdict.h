/* identity_jwt: why a token was refused, in words a client may read (they
 * go into the 401's error_description: printable ASCII, no quotes, and
 * never anything taken from the token itself). */
#ifndef JWT_VERDICT_H
#define JWT_VERDICT_H

typedef enum jwt_verdict {
    JWT_OK = 0,
    /* the token (401) */
    JWT_TOO_LARGE,
    JWT_JWE,
    JWT_MALFORMED,
    JWT_BAD_HEADER,
    JWT_DUPLICATE,
    JWT_ALG_NONE,
    JWT_ALG_HMAC,
    JWT_ALG_UNSUPPORTED,
    JWT_ALG_NOT_ALLOWED,
    JWT_CRIT,
    JWT_TYP,
    JWT_UNKNOWN_KID,
    JWT_KEY_MISMATCH,
    JWT_NO_KEY,
    JWT_BAD_SIGNATURE,
    JWT_NO_EXP,
    JWT_BAD_TIME,
    JWT_EXPIRED,
    JWT_NOT_YET_VALID,
    JWT_ISSUED_IN_FUTURE,
    JWT_ISSUER,
    JWT_AUDIENCE,
    JWT_PRINCIPAL,
    JWT_TENANT,
    JWT_ROLES,
    /* the gateway (503) */
    JWT_NO_KEYS,
    JWT_BUSY,
    JWT_NOMEM
} jwt_verdict;

const char *jwt_verdict_text(jwt_verdict v);
/* 401 for a token at fault, 503 when the gateway cannot judge it now. */
int jwt_verdict_http(jwt_verdict v);

#endif
