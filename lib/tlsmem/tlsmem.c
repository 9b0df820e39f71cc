/* tlsmem: see tlsmem.h. */
#include "tlsmem.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

SSL *tlsmem_new(SSL_CTX *ctx, int server) {
    SSL *ssl = SSL_new(ctx);
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    if (!ssl || !rb || !wb) {
        SSL_free(ssl);
        BIO_free(rb);
        BIO_free(wb);
        return NULL;
    }
    /* an empty read BIO means "want more", not end of file */
    BIO_set_mem_eof_return(rb, -1);
    SSL_set_bio(ssl, rb, wb); /* the SSL owns both now */
    if (server) SSL_set_accept_state(ssl);
    else SSL_set_connect_state(ssl);
    return ssl;
}

int tlsmem_feed(SSL *ssl, const void *p, size_t n) {
    while (n) { /* BIO_write takes an int */
        int k = n > (1u << 30) ? 1 << 30 : (int)n;
        if (BIO_write(SSL_get_rbio(ssl), p, k) != k) return -1;
        p = (const char *)p + k;
        n -= (size_t)k;
    }
    return 0;
}

size_t tlsmem_pending(SSL *ssl) { return BIO_ctrl_pending(SSL_get_wbio(ssl)); }

int tlsmem_take(SSL *ssl, void *dst, size_t n) {
    BIO *wb = SSL_get_wbio(ssl);
    while (n) {
        int k = n > (1u << 30) ? 1 << 30 : (int)n;
        if (BIO_read(wb, dst, k) != k) return -1;
        dst = (char *)dst + k;
        n -= (size_t)k;
    }
    return 0;
}

void tlsmem_reason(char *out, size_t cap) {
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(out, cap, "%s", r ? r : "unknown error");
    ERR_clear_error();
}

int tlsmem_readable(const char *path, char *why, size_t cap) {
    FILE *f = fopen(path, "r");
    if (f) return fclose(f), 0;
    snprintf(why, cap, "cannot read %.300s: %s", path, strerror(errno));
    return -1;
}

int tlsmem_use_pair(SSL_CTX *ctx, const char *cert_file, const char *key_file, char *why,
                    size_t cap) {
    char r[160];
    ERR_clear_error();
    if (tlsmem_readable(cert_file, why, cap)) return TLSMEM_PAIR_BAD_CERT;
    if (tlsmem_readable(key_file, why, cap)) return TLSMEM_PAIR_BAD_KEY;
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
        tlsmem_reason(r, sizeof r);
        snprintf(why, cap, "%.300s: not a PEM certificate chain (%s)", cert_file, r);
        return TLSMEM_PAIR_BAD_CERT;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        /* OpenSSL checks the pair as it loads the key */
        int mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
        tlsmem_reason(r, sizeof r);
        if (mismatch)
            snprintf(why, cap, "%.300s does not match the certificate in %.300s", key_file, cert_file);
        else
            snprintf(why, cap, "%.300s: not a PEM private key (%s)", key_file, r);
        return TLSMEM_PAIR_BAD_KEY;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        snprintf(why, cap, "%.300s does not match the certificate in %.300s", key_file, cert_file);
        return TLSMEM_PAIR_BAD_KEY;
    }
    return TLSMEM_PAIR_OK;
}
