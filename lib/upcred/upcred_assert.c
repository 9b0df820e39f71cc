/* upcred: private_key_jwt client authentication (RFC 7523 section 2.2, as
 * OpenID Connect names it): each token request carries a JWT the gateway
 * signs with its key (ES256 for a P-256 key, RS256 for RSA), whose iss and
 * sub are the client_id, aud the token_url, with a jti of its own and a
 * short life. The key is read at create; a request signs a new assertion. */
#define _GNU_SOURCE
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "upcred_internal.h"

#define ASSERTION_LIFE_S 60

struct upcred_signer {
    EVP_PKEY *key;
    int es256; /* else RS256 */
};

static void b64url(mcpg_buf *out, const unsigned char *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        char c[4] = {tab[v >> 18 & 63], tab[v >> 12 & 63], tab[v >> 6 & 63], tab[v & 63]};
        mcpg_buf_append(out, c, i + 2 < n ? 4 : i + 1 < n ? 3 : 2);
    }
}

upcred_signer *upcred_signer_load(const char *path, char *err, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, cap, "cannot read %s", path);
        return NULL;
    }
    EVP_PKEY *key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    int id = key ? EVP_PKEY_get_base_id(key) : 0;
    int p256 = id == EVP_PKEY_EC && EVP_PKEY_get_bits(key) == 256;
    if (!key || (!p256 && id != EVP_PKEY_RSA) ||
        (id == EVP_PKEY_RSA && EVP_PKEY_get_bits(key) < 2048)) {
        snprintf(err, cap,
                 "%s: not a PEM private key of P-256 (ES256) or RSA of 2048 bits or "
                 "more (RS256)",
                 path);
        EVP_PKEY_free(key);
        return NULL;
    }
    upcred_signer *s = calloc(1, sizeof *s);
    if (!s) {
        EVP_PKEY_free(key);
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    s->key = key;
    s->es256 = p256;
    return s;
}

void upcred_signer_free(upcred_signer *s) {
    if (!s) return;
    EVP_PKEY_free(s->key);
    free(s);
}

/* ES256's signature is r and s, 32 bytes each (RFC 7518 section 3.4), not DER. */
static int der_to_raw(const unsigned char *der, size_t n, unsigned char raw[64]) {
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &der, (long)n);
    if (!sig) return -1;
    const BIGNUM *r, *s;
    ECDSA_SIG_get0(sig, &r, &s);
    int ok = BN_bn2binpad(r, raw, 32) == 32 && BN_bn2binpad(s, raw + 32, 32) == 32;
    ECDSA_SIG_free(sig);
    return ok ? 0 : -1;
}

static int sign(const upcred_signer *s, const mcpg_buf *input, mcpg_buf *out) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char sig[512], raw[64];
    size_t n = sizeof sig;
    int ok = ctx && EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, s->key) == 1 &&
             EVP_DigestSign(ctx, sig, &n, (const unsigned char *)input->data, input->len) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok || (s->es256 && der_to_raw(sig, n, raw) != 0)) return -1;
    if (s->es256) b64url(out, raw, 64);
    else b64url(out, sig, n);
    return 0;
}

/* Appends "client_assertion_type=...&client_assertion=<jwt>" to the form. */
int upcred_assertion(const upcred *u, mcpg_buf *form) {
    const upcred_cfg *c = &u->cfg;
    unsigned char rnd[16];
    char jti[33];
    if (RAND_bytes(rnd, sizeof rnd) != 1) return -1;
    mcpg_hex(rnd, sizeof rnd, jti);
    jti[32] = '\0';
    int64_t now = u->h->wall_us() / 1000000;
    mcpg_buf head = {0}, claims = {0}, jwt = {0};
    mcpg_buf_printf(&head, "{\"alg\":\"%s\",\"typ\":\"JWT\"", u->signer->es256 ? "ES256" : "RS256");
    if (c->key_id) {
        mcpg_buf_puts(&head, ",\"kid\":");
        mcpg_buf_append_json_string(&head, c->key_id, strlen(c->key_id));
    }
    mcpg_buf_puts(&head, "}");
    mcpg_buf_puts(&claims, "{\"iss\":");
    mcpg_buf_append_json_string(&claims, c->client_id, strlen(c->client_id));
    mcpg_buf_puts(&claims, ",\"sub\":");
    mcpg_buf_append_json_string(&claims, c->client_id, strlen(c->client_id));
    mcpg_buf_puts(&claims, ",\"aud\":");
    mcpg_buf_append_json_string(&claims, c->token_url, strlen(c->token_url));
    mcpg_buf_printf(&claims, ",\"jti\":\"%s\",\"iat\":%lld,\"exp\":%lld}", jti, (long long)now,
                    (long long)(now + ASSERTION_LIFE_S));
    b64url(&jwt, (const unsigned char *)head.data, head.len);
    mcpg_buf_puts(&jwt, ".");
    b64url(&jwt, (const unsigned char *)claims.data, claims.len);
    int rc = jwt.data ? 0 : -1;
    if (!rc) {
        mcpg_buf_puts(&jwt, ".");
        size_t signed_len = jwt.len - 1;
        mcpg_buf input = {jwt.data, signed_len, signed_len};
        mcpg_buf sig = {0};
        rc = sign(u->signer, &input, &sig);
        if (!rc) mcpg_buf_append(&jwt, sig.data, sig.len);
        if (sig.data) explicit_bzero(sig.data, sig.cap);
        mcpg_buf_free(&sig);
    }
    if (!rc) {
        mcpg_buf_printf(form, "%sclient_assertion_type=%s&client_assertion=", form->len ? "&" : "",
                        "urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer");
        mcpg_buf_append(form, jwt.data, jwt.len); /* base64url and dots: form-safe */
    }
    mcpg_buf_free(&head);
    mcpg_buf_free(&claims);
    if (jwt.data) explicit_bzero(jwt.data, jwt.cap); /* a credential until its exp */
    mcpg_buf_free(&jwt);
    return rc;
}
