/* Standard Webhooks signatures (mcpg/whsig.h). */
#include <mcpg/whsig.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <string.h>

#define MAC_LEN 32   /* HMAC-SHA256 */
#define MAC_B64 44   /* its base64, padded */

_Static_assert(MCPG_WHSIG_SIG_MAX == 3 + MAC_B64 + 1, "\"v1,\" + the base64 + NUL");
_Static_assert(MCPG_WHSIG_TOLERANCE_S == 300, "mcpg_whsig_verify's text spells out 300 s");

/* ---- the secret ------------------------------------------------------------ */

int mcpg_whsig_secret_decode(const char *whsec, size_t n, unsigned char *key, size_t cap,
                             size_t *key_len) {
    static const char pre[] = "whsec_";
    const size_t pn = sizeof pre - 1;
    if (!whsec || !key || !key_len) return MCPG_EINVAL;
    if (n < pn || memcmp(whsec, pre, pn)) return MCPG_EINVAL;
    const char *b64 = whsec + pn;
    n -= pn;
    /* The base64 of MAX bytes is 88 characters; twice MAX leaves room for
     * the padding added below and tells "too long" from "not base64"
     * without decoding an arbitrary length. */
    char padded[MCPG_WHSIG_KEY_MAX * 2];
    if (n + 3 >= sizeof padded) return MCPG_ERANGE;
    if (n == 0 || n % 4 == 1) return MCPG_EINVAL; /* one character of a quantum is no byte */
    memcpy(padded, b64, n);
    while (n % 4) padded[n++] = '='; /* EVP_DecodeBlock wants whole quanta */
    /* EVP_DecodeBlock counts the bytes '=' stands for as zeros: take them off. */
    size_t pad = 0;
    while (pad < 2 && padded[n - 1 - pad] == '=') pad++;
    unsigned char out[MCPG_WHSIG_KEY_MAX * 2];
    int got = EVP_DecodeBlock(out, (const unsigned char *)padded, (int)n);
    if (got < 0 || (size_t)got < pad) return MCPG_EINVAL;
    size_t len = (size_t)got - pad;
    if (len < MCPG_WHSIG_KEY_MIN || len > MCPG_WHSIG_KEY_MAX || len > cap) {
        OPENSSL_cleanse(out, sizeof out);
        return MCPG_ERANGE;
    }
    memcpy(key, out, len);
    OPENSSL_cleanse(out, sizeof out); /* the key leaves no copy on the stack */
    *key_len = len;
    return 0;
}

/* ---- signing --------------------------------------------------------------- */

/* mac = HMAC-SHA256(key, id "." ts "." body), updated piece by piece so the
 * body is never copied next to the id and timestamp; the only allocation is
 * the MAC context itself, of a fixed size. */
static int mac_of(const unsigned char *key, size_t klen, const char *id, size_t idn,
                  const char *ts, size_t tsn, const char *body, size_t bn,
                  unsigned char mac[MAC_LEN]) {
    /* fetched each time: OpenSSL keeps its methods cached, and a reference
     * kept here for good would outlive libcrypto's own cleanup at exit */
    EVP_MAC *alg = EVP_MAC_fetch(NULL, OSSL_MAC_NAME_HMAC, NULL);
    if (!alg) return MCPG_EIO;
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(alg);
    EVP_MAC_free(alg); /* the context holds its own reference */
    if (!ctx) return MCPG_ENOMEM;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    size_t got = 0;
    int ok = EVP_MAC_init(ctx, key, klen, params) &&
             EVP_MAC_update(ctx, (const unsigned char *)id, idn) &&
             EVP_MAC_update(ctx, (const unsigned char *)".", 1) &&
             EVP_MAC_update(ctx, (const unsigned char *)ts, tsn) &&
             EVP_MAC_update(ctx, (const unsigned char *)".", 1) &&
             (!bn || EVP_MAC_update(ctx, (const unsigned char *)body, bn)) &&
             EVP_MAC_final(ctx, mac, &got, MAC_LEN) && got == MAC_LEN;
    EVP_MAC_CTX_free(ctx);
    return ok ? 0 : MCPG_EIO;
}

int mcpg_whsig_sign(const unsigned char *key, size_t klen, const char *id, size_t idn,
                    const char *ts, size_t tsn, const char *body, size_t bn,
                    char out[MCPG_WHSIG_SIG_MAX]) {
    if (!out) return MCPG_EINVAL;
    out[0] = '\0';
    if (!key || !id || !ts || (!body && bn)) return MCPG_EINVAL;
    unsigned char mac[MAC_LEN];
    int rc = mac_of(key, klen, id, idn, ts, tsn, body, bn, mac);
    if (rc) return rc;
    memcpy(out, "v1,", 3);
    EVP_EncodeBlock((unsigned char *)out + 3, mac, MAC_LEN); /* 44 chars and a NUL */
    return 0;
}

/* ---- verifying ------------------------------------------------------------- */

/* A plain decimal of at most 18 digits: no sign, no space, and never an
 * overflow of int64_t (nor of now +- any sane tolerance). */
static int parse_ts(const char *p, size_t n, int64_t *out) {
    int64_t v = 0;
    if (!n || n > 18) return -1;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

/* Any space-separated "v1,<base64>" equal to want. Every candidate of the
 * right length is compared in constant time and the loop does not stop at
 * a match, so the time taken tells nothing about how close a forgery came. */
static int sig_matches(const char *sig, size_t sn, const char *want, size_t wn) {
    size_t i = 0;
    int ok = 0;
    while (i < sn) {
        size_t j = i;
        while (j < sn && sig[j] != ' ') j++;
        const char *t = sig + i;
        size_t tn = j - i;
        if (tn == 3 + wn && !memcmp(t, "v1,", 3) && !CRYPTO_memcmp(t + 3, want, wn)) ok = 1;
        i = j + 1;
    }
    return ok;
}

const char *mcpg_whsig_verify(const unsigned char *key, size_t klen, const char *id, size_t idn,
                              const char *ts, size_t tsn, const char *sig, size_t sign,
                              const char *body, size_t bn, int64_t now_s, int64_t tolerance_s) {
    int64_t t;
    if (!id || !idn) return "webhook-id: missing";
    if (!ts || parse_ts(ts, tsn, &t)) return "webhook-timestamp: missing or not an integer";
    if (t < now_s - tolerance_s || t > now_s + tolerance_s)
        /* A static text (no buffer to format into, so safe from any thread):
         * the number is spelled out for the specification's tolerance. */
        return tolerance_s == MCPG_WHSIG_TOLERANCE_S
                   ? "webhook-timestamp: more than 300 s from the gateway's clock"
                   : "webhook-timestamp: too far from the gateway's clock";
    if (!sig || !sign) return "webhook-signature: missing";
    char want[MCPG_WHSIG_SIG_MAX];
    int rc = mcpg_whsig_sign(key, klen, id, idn, ts, tsn, body, bn, want);
    if (rc == MCPG_ENOMEM) return "webhook-signature: cannot be checked (out of memory)";
    if (rc == MCPG_EIO) return "webhook-signature: cannot be checked (libcrypto failed)";
    /* EINVAL (a NULL key) leaves want "": nothing matches it. */
    if (rc || !sig_matches(sig, sign, want + 3, MAC_B64)) return "webhook-signature: no v1 signature matches";
    return NULL;
}
