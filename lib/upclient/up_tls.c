/* upclient: OpenSSL contexts and per-connection TLS over memory BIOs, so
 * the handshake runs on the loop without ever blocking it. */
#define _GNU_SOURCE
#include "up_internal.h"
#include "tlsmem.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>

static const unsigned char ALPN[] = "\x08http/1.1";

static int load_files(SSL_CTX *ctx, const char *url, const up_tls_opts *o, char *err,
                      size_t cap) {
    char why[400];
    if (o && o->ca_file) {
        if (tlsmem_readable(o->ca_file, why, sizeof why)) {
            snprintf(err, cap, "%.200s: ca_file: %s", url, why);
            return -1;
        }
        if (SSL_CTX_load_verify_locations(ctx, o->ca_file, NULL) != 1) {
            tlsmem_reason(why, sizeof why);
            snprintf(err, cap, "%.200s: ca_file %.200s: %s", url, o->ca_file, why);
            return -1;
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        tlsmem_reason(why, sizeof why);
        snprintf(err, cap, "%.200s: the system's certificates: %s", url, why);
        return -1;
    }
    if (o && (o->cert_file || o->key_file)) {
        if (!o->cert_file || !o->key_file) {
            snprintf(err, cap, "%.200s: cert_file and key_file go together", url);
            return -1;
        }
        int bad = tlsmem_use_pair(ctx, o->cert_file, o->key_file, why, sizeof why);
        if (bad) {
            snprintf(err, cap, "%.200s: %s: %s", url,
                     bad == TLSMEM_PAIR_BAD_CERT ? "cert_file" : "key_file", why);
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
    SSL *ssl = tlsmem_new(t->ctx, 0);
    if (!ssl) return NULL;
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
        tlsmem_reason(why, sizeof why);
        snprintf(out, cap, "TLS handshake failed: %s", why);
    } else {
        snprintf(out, cap, "TLS handshake failed (the upstream closed the connection)");
    }
    ERR_clear_error();
}
