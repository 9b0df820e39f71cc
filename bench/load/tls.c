/* mcpg-load over https: one client context for the run (the server's
 * certificate verified against --ca-file, or the system's CAs, and its IP
 * address checked), and per connection an SSL over memory BIOs
 * (lib/tlsmem): the loop feeds what it reads and writes what OpenSSL made,
 * so the load generator stays one non-blocking loop. */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"
#include "tlsmem.h"

int load_tls_init(load_run *run, char *err, size_t errlen) {
    const load_opts *o = run->opts;
    if (!o->tls) return 0;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) return snprintf(err, errlen, "cannot create a TLS context"), -1;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x08http/1.1", 9);
    int ok = o->ca_file ? SSL_CTX_load_verify_locations(ctx, o->ca_file, NULL) == 1
                        : SSL_CTX_set_default_verify_paths(ctx) == 1;
    if (!ok) {
        char why[160];
        tlsmem_reason(why, sizeof why);
        snprintf(err, errlen, "--ca-file %s: %s", o->ca_file ? o->ca_file : "(the system's)", why);
        SSL_CTX_free(ctx);
        return -1;
    }
    run->tls_ctx = ctx;
    return 0;
}

void load_tls_free(load_run *run) {
    SSL_CTX_free(run->tls_ctx);
    run->tls_ctx = NULL;
}

void load_tls_end(load_conn *c) {
    SSL_free(c->ssl);
    c->ssl = NULL;
    c->tls_ready = false;
}

int load_tls_flush(load_conn *c) {
    size_t n = tlsmem_pending(c->ssl);
    if (n == 0 || c->writing) return 0; /* on_write flushes the rest */
    if (n > c->tcap) {
        char *p = realloc(c->tbuf, n);
        if (!p) return UV_ENOMEM;
        c->tbuf = p;
        c->tcap = n;
    }
    if (tlsmem_take(c->ssl, c->tbuf, n)) return UV_EIO;
    return load_conn_write(c, c->tbuf, n);
}

static void handshake(load_conn *c) {
    ERR_clear_error();
    int rc = SSL_do_handshake(c->ssl);
    int frc = load_tls_flush(c);
    if (frc) return load_conn_fail(c, "TLS write");
    if (rc == 1) {
        c->tls_ready = true;
        return load_conn_ready(c);
    }
    if (SSL_get_error(c->ssl, rc) == SSL_ERROR_WANT_READ) return;
    char why[200];
    long v = SSL_get_verify_result(c->ssl);
    tlsmem_reason(why, sizeof why);
    char what[260];
    snprintf(what, sizeof what, "TLS handshake: %s", v != X509_V_OK ? X509_verify_cert_error_string(v) : why);
    load_conn_fail(c, what);
}

int load_tls_begin(load_conn *c) {
    const load_opts *o = c->run->opts;
    c->ssl = tlsmem_new(c->run->tls_ctx, 0);
    if (!c->ssl) return -1;
    char ip[INET_ADDRSTRLEN];
    uv_ip4_name(&o->addr, ip, sizeof ip);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), ip); /* the URL names an IPv4 literal */
    handshake(c);
    return 0;
}

void load_tls_read(load_conn *c, const char *p, size_t n) {
    if (tlsmem_feed(c->ssl, p, n)) return load_conn_fail(c, "TLS: out of memory");
    if (!c->tls_ready) {
        handshake(c);
        if (c->state != CONN_OPEN || !c->tls_ready) return;
    }
    while (c->state == CONN_OPEN && c->ssl) {
        char *at;
        size_t room = load_conn_room(c, &at);
        if (room == 0) return load_conn_fail(c, "answer over --max-response");
        ERR_clear_error();
        int k = SSL_read(c->ssl, at, room > INT32_MAX ? INT32_MAX : (int)room);
        if (k > 0) {
            load_conn_plain(c, (size_t)k);
            continue;
        }
        int e = SSL_get_error(c->ssl, k);
        if (e == SSL_ERROR_WANT_READ) break;
        if (e == SSL_ERROR_ZERO_RETURN) return load_conn_eof(c);
        return load_conn_fail(c, "TLS read");
    }
    if (c->state == CONN_OPEN && c->ssl && load_tls_flush(c)) load_conn_fail(c, "TLS write");
}

int load_tls_send(load_conn *c, const char *p, size_t n) {
    ERR_clear_error();
    if (SSL_write(c->ssl, p, (int)n) != (int)n) return UV_EIO;
    return load_tls_flush(c);
}
