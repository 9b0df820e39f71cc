/** @file
 * mcpg SDK: Standard Webhooks signatures (https://www.standardwebhooks.com).
 *
 * @code
 *   #include <mcpg/whsig.h>       link libmcpg_whsig.a and libcrypto
 * @endcode
 *
 * One implementation for every module that signs or checks webhooks
 * (transport_http's resource webhooks, the events module's deliveries), so
 * a sender and a receiver in the same gateway can never disagree about the
 * scheme. The functions are pure: no mcpg_host, no global state a caller
 * sees, safe from any thread.
 *
 * The scheme: a secret is "whsec_" + base64 of an HMAC key. A message is
 * signed over the three headers' worth of text
 *     webhook-id "." webhook-timestamp "." body
 * with HMAC-SHA256; webhook-signature carries "v1,<base64 of the MAC>",
 * several space-separated when a key is being rotated. webhook-timestamp is
 * the Unix time in seconds, checked against the receiver's clock. */
#ifndef MCPG_WHSIG_H
#define MCPG_WHSIG_H

#include <stddef.h>
#include <stdint.h>
#include <mcpg/errors.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A decoded key's length in bytes. 16 is the least the Standard Webhooks
 * libraries generate (24 is usual); 64 is SHA-256's block, past which HMAC
 * would hash the key first and a longer one adds nothing. */
#define MCPG_WHSIG_KEY_MIN 16
/** The longest decoded key, in bytes (see MCPG_WHSIG_KEY_MIN). */
#define MCPG_WHSIG_KEY_MAX 64
/** "v1," + 44 base64 characters of a 32-byte MAC + NUL. */
#define MCPG_WHSIG_SIG_MAX 48
/** The specification's (and transport_http's) timestamp tolerance. */
#define MCPG_WHSIG_TOLERANCE_S 300

/** Decode the secret whsec[0..n) (not necessarily NUL-terminated): "whsec_"
 * then the base64, padded or not, of MCPG_WHSIG_KEY_MIN..MAX bytes. The key
 * goes to key[0..*key_len). Returns 0; MCPG_EINVAL when it is not "whsec_"
 * + base64 (or an argument is NULL); MCPG_ERANGE when the key's length is
 * outside MIN..MAX or more than cap. key is left unspecified on error. */
int mcpg_whsig_secret_decode(const char *whsec, size_t n, unsigned char *key, size_t cap,
                             size_t *key_len);

/** out = "v1,<base64 HMAC-SHA256(key, id "." ts "." body)>", NUL-terminated:
 * the value of a webhook-signature header. id and ts are the exact header
 * texts (ts in decimal seconds). Allocates nothing sized by the body.
 * Returns 0; MCPG_EINVAL on a NULL argument (body may be NULL when bn is
 * 0); MCPG_ENOMEM / MCPG_EIO when libcrypto fails (out is then ""). */
int mcpg_whsig_sign(const unsigned char *key, size_t klen, const char *id, size_t idn,
                    const char *ts, size_t tsn, const char *body, size_t bn,
                    char out[MCPG_WHSIG_SIG_MAX]);

/** Check a received message: id, ts, sig are the webhook-id,
 * webhook-timestamp and webhook-signature header values (NULL: the header
 * is absent; an empty value counts as absent), now_s the receiver's clock
 * in Unix seconds, tolerance_s how far ts may be from it either way.
 *
 * Returns NULL when ts is a plain decimal integer within tolerance and any
 * space-separated "v1,..." in sig matches (compared in constant time).
 * Otherwise a static string, the first fault in this order, fit to show
 * the sender as it names the header at fault:
 *   "webhook-id: missing"
 *   "webhook-timestamp: missing or not an integer"
 *   "webhook-timestamp: more than 300 s from the gateway's clock"
 *       (that text when tolerance_s is 300; otherwise
 *        "webhook-timestamp: too far from the gateway's clock")
 *   "webhook-signature: missing"
 *   "webhook-signature: cannot be checked (out of memory)"
 *   "webhook-signature: cannot be checked (libcrypto failed)"
 *   "webhook-signature: no v1 signature matches" */
const char *mcpg_whsig_verify(const unsigned char *key, size_t klen, const char *id, size_t idn,
                              const char *ts, size_t tsn, const char *sig, size_t sign,
                              const char *body, size_t bn, int64_t now_s, int64_t tolerance_s);

#ifdef __cplusplus
}
#endif

#endif
