/* upclient: OpenSSL contexts and per-connection TLS over memory BIOs, so
 * the handshake runs on the loop without ever blocking it. */
#define _GNU_SOURCE
#include "up_internal.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

static const unsigned char ALPN[] = "\x08http/1.1";

static void ssl_reason(char *out, size_t cap) {
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(out, cap, "%s", r ? r : "unknown error");
    ERR_clear_error();
}

/* A file the context needs: readable now, then loaded by OpenSSL. */
static int readable(const char *url, const char *key, const char *path, char *err, size_t cap) {
    FILE *f = fopen(path, "r");
    if (f) return fclose(f), 0;
    snprintf(err, cap, "%.200s: cannot read %s %.200s: %s", url, key, path, strerror(errno));
    return -1;
}

static int load_files(SSL_CTX *ctx, const char *url, const up_tls_opts *o, char *err,
                      size_t cap) {
    char why[160];
    if (o && o->ca_file) {
        if (readable(url, "ca_file", o->ca_file, err, cap)) return -1;
        if (SSL_CTX_load_verify_locations(ctx, o->ca_file, NULL) != 1) {
            ssl_reason(why, sizeof why);
            snprintf(err, cap, "%.200s: ca_file %.200s: %s", url, o->ca_file, why);
            return -1;
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        ssl_reason(why, sizeof why);
        snprintf(err, cap, "%.200s: the system's certificates: %s", url, why);
        return -1;
    }
    if (o && (o->cert_file || o->key_file)) {
        if (!o->cert_file || !o->key_file) {
            snprintf(err, cap, "%.200s: cert_file and key_file go together", url);
            return -1;
        }
        if (readable(url, "cert_file", o->cert_file, err, cap) ||
            readable(url, "key_file", o->key_file, err, cap))
            return -1;
        if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1) {
            ssl_reason(why, sizeof why);
            snprintf(err, cap, "%.200s: cert_file %.200s / key_file %.200s: %s", url,
                     o->cert_file, o->key_file, why);
            return -1;
        }
    }
    return 0;
}

SSL_CTX *up__tls_ctx_new(const char *url, const up_tls_opts *o, char *err, size_t cap) {
    ERR_clear_error();
    if (cap) err[0] = '\0';
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        snprintf(err, cap, "%.200s: cannot create a TLS context", url);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, o && o->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_set_alpn_protos(ctx, ALPN, sizeof ALPN - 1) != 0 || load_files(ctx, url, o, err, cap)) {
        if (!*err) snprintf(err, cap, "%.200s: cannot set ALPN", url);
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

SSL *up__tls_new(const up_target *t) {
    SSL *ssl = SSL_new(t->ctx);
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    if (!ssl || !rb || !wb) {
        SSL_free(ssl);
        BIO_free(rb);
        BIO_free(wb);
        return NULL;
    }
    SSL_set_bio(ssl, rb, wb); /* the SSL owns both now */
    SSL_set_connect_state(ssl);
    int ok = t->name_is_ip || SSL_set_tlsext_host_name(ssl, t->name) == 1; /* no SNI for IPs */
    if (ok && !t->insecure) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
        X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        ok = t->name_is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, t->name) == 1
                           : X509_VERIFY_PARAM_set1_host(vp, t->name, 0) == 1;
    }
    if (!ok) {
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

void up__tls_describe(SSL *ssl, int ret, char *out, size_t cap) {
    long v = SSL_get_verify_result(ssl);
    int e = SSL_get_error(ssl, ret);
    if (v != X509_V_OK) {
        snprintf(out, cap, "certificate verify failed: %s", X509_verify_cert_error_string(v));
    } else if (e == SSL_ERROR_SSL) {
        char why[160];
        ssl_reason(why, sizeof why);
        snprintf(out, cap, "TLS handshake failed: %s", why);
    } else {
        snprintf(out, cap, "TLS handshake failed (the upstream closed the connection)");
    }
    ERR_clear_error();
}
