/* identity_jwt tests: keys made on the spot and tokens signed with them
 * (OpenSSL 3), for the unit tests, the benchmark and the `jwt_mint` tool the
 * integration test drives. Nothing here is used by the module itself. */
#ifndef JWT_TESTKEYS_H
#define JWT_TESTKEYS_H

#include <stddef.h>

#include <openssl/evp.h>

/* "RS256" (2048-bit RSA), "ES256" (P-256), "EdDSA" (Ed25519); NULL for another name. */
EVP_PKEY *tk_keygen(const char *alg);
/* The public JWK of key as JSON text (malloc'd): kty, crv, n/e or x/y, "use":"sig",
 * "alg" and "kid" when given (non-NULL). */
char *tk_jwk(EVP_PKEY *key, const char *alg, const char *kid);
/* base64url without padding of p[0..n) (malloc'd). */
char *tk_b64url(const void *p, size_t n);
/* The JOSE signature of input with key (RS256 PKCS#1 v1.5, ES256 r||s, EdDSA),
 * base64url (malloc'd); NULL on failure. */
char *tk_sign(EVP_PKEY *key, const char *alg, const char *input, size_t n);
/* header.payload.signature of these JSON texts (malloc'd). */
char *tk_token(EVP_PKEY *key, const char *alg, const char *header_json, const char *claims_json);

#endif
