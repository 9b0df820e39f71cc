/* identity_jwt: verdicts in words (see jwt_verdict.h). */
#include "jwt_verdict.h"

const char *jwt_verdict_text(jwt_verdict v) {
    switch (v) {
    case JWT_OK: return "valid";
    case JWT_TOO_LARGE: return "the token is larger than max_token_bytes";
    case JWT_JWE: return "encrypted tokens (JWE) are not accepted";
    case JWT_MALFORMED: return "the token is not three base64url parts of JSON objects";
    case JWT_BAD_HEADER: return "the token header has no alg string";
    case JWT_DUPLICATE: return "the token names a header member or claim twice";
    case JWT_ALG_NONE: return "unsigned tokens (alg none) are not accepted";
    case JWT_ALG_HMAC: return "HMAC-signed tokens (HS256, HS384, HS512) are not accepted";
    case JWT_ALG_UNSUPPORTED: return "the token alg is not supported (RS256, ES256, EdDSA only)";
    case JWT_ALG_NOT_ALLOWED: return "the token alg is not among the accepted algorithms";
    case JWT_CRIT: return "the token header has critical extensions (crit) that are not understood";
    case JWT_TYP: return "the token typ is not JWT or at+jwt";
    case JWT_UNKNOWN_KID: return "unknown key id: the token kid is not among the issuer keys";
    case JWT_KEY_MISMATCH: return "the key named by the token kid is not a key for the token alg";
    case JWT_NO_KEY: return "no issuer key for the token alg";
    case JWT_BAD_SIGNATURE: return "the token signature does not verify";
    case JWT_NO_EXP: return "the token has no exp claim";
    case JWT_BAD_TIME: return "the token exp, nbf or iat claim is not a number";
    case JWT_EXPIRED: return "the token expired";
    case JWT_NOT_YET_VALID: return "the token is not valid yet (nbf)";
    case JWT_ISSUED_IN_FUTURE: return "the token was issued in the future (iat)";
    case JWT_ISSUER: return "wrong issuer: the token iss is not the expected issuer";
    case JWT_AUDIENCE: return "wrong audience: the token aud does not name this resource";
    case JWT_PRINCIPAL: return "the token has no string claim naming the principal";
    case JWT_TENANT: return "the token tenant claim is not a string";
    case JWT_ROLES:
        return "the token roles claim is not an array of strings or a space-separated string";
    case JWT_NO_KEYS: return "the issuer signing keys (JWKS) are not available";
    case JWT_BUSY: return "too many calls are waiting for the issuer signing keys";
    case JWT_NOMEM: return "out of memory";
    }
    return "invalid token";
}

int jwt_verdict_http(jwt_verdict v) {
    return v >= JWT_NO_KEYS ? 503 : 401;
}
