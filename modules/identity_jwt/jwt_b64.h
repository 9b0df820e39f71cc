/* identity_jwt: strict base64url (RFC 7515 §2, RFC 4648 §5) as JWS compact
 * serialisation uses it: the URL-safe alphabet, no padding, no whitespace,
 * and unused bits of the last character zero, so every byte string has
 * exactly one encoding (a token cannot be altered without changing it). */
#ifndef JWT_B64_H
#define JWT_B64_H

#include <stddef.h>

/* Bytes a decode of n characters yields at most. */
#define JWT_B64_DECODED_MAX(n) ((n) / 4 * 3 + 2)

/* How many of s[0..n), from the start, are in the base64url alphabet. */
size_t jwt_b64url_span(const char *s, size_t n);

/* Decode s[0..n) into out (cap bytes): 0 with *out_len, or -1 when s is
 * not canonical base64url or out is too small. */
int jwt_b64url_decode(const char *s, size_t n, unsigned char *out, size_t cap, size_t *out_len);

#endif
