/* identity_jwt: a JWS compact token (RFC 7515, RFC 7519) taken apart and its
 * signature checked. Nothing here allocates but jwt_token_open's one buffer,
 * and nothing keeps a pointer to the token past the call. */
#ifndef JWT_TOKEN_H
#define JWT_TOKEN_H

#include <stddef.h>

#include "jwt_keys.h"
#include "jwt_verdict.h"

/* What a credential looks like, before anything is decoded. */
typedef enum jwt_shape {
    JWT_SHAPE_OTHER = 0, /* not a JWT: an API key or some other credential */
    JWT_SHAPE_JWS = 1,   /* header.payload.signature, base64url */
    JWT_SHAPE_JWE = 2    /* five base64url parts: an encrypted token */
} jwt_shape;

jwt_shape jwt_shape_of(const char *s, size_t n);

typedef struct jwt_token {
    const char *text;      /* borrowed: the whole token */
    size_t signed_len;     /* header.payload: what the signature covers */
    unsigned char *buf;    /* owned: the decoded header, payload and signature */
    const char *header;    /* JSON object text, inside buf */
    size_t header_len;
    const char *payload;   /* JSON object text, inside buf */
    size_t payload_len;
    const unsigned char *sig;
    size_t sig_len;
    unsigned alg;          /* JWT_RS256...: one of ours (0 until the header is read) */
    char kid[JWT_KID_MAX + 1];
    size_t kid_len;
    int has_kid;
} jwt_token;

/* Decode a JWS-shaped token and read its header: the algorithm must be one
 * of `algs` (none, HMAC and every other algorithm refused by name), no
 * "crit" extension, a "typ" of JWT or at+jwt when present, both parts JSON
 * objects without duplicate members. JWT_OK, or the verdict; the token is to
 * be closed either way. */
jwt_verdict jwt_token_open(jwt_token *t, const char *text, size_t n, unsigned algs);
void jwt_token_close(jwt_token *t);

/* The signature checked with one key of the token's algorithm: 1 valid,
 * 0 not (or the signature is not of that algorithm's form). Any thread. */
int jwt_token_verify(const jwt_token *t, const jwt_key *k);

/* 0 when obj[0..n) (a JSON object already validated) names no member
 * twice; -1 when it does, or has more members or longer names than a token
 * needs. */
int jwt_json_unique_members(const char *obj, size_t n);

#endif
