/* upclient: OpenSSL contexts and per-connection TLS over memory BIOs, so
 * the handshake runs on the loop without ever blocking it. */
#define _GNU_SOURCE
#include "up_internal.h"
#include "tlsmem.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* ---- contexts shared by targets with the same options ----
 * A context holds its trust store (the system's is a few hundred
 * certificates, about a megabyte) and a gateway may hold a target per
 * webhook subscription: targets whose TLS options are the same share one
 * context (the name each verifies is set per connection, up__tls_new). The
 * files are told apart by path, size and change time, so a rotated file
 * gets a context of its own. At most CTX_SHARED_MAX contexts are kept; past
 * that each target gets its own. The image that holds this cache frees it
 * when it is unloaded (a module's copy goes at a reload). */
#define CTX_SHARED_MAX 64

typedef struct shared_ctx {
    struct shared_ctx *next;
    SSL_CTX *ctx;
    char key[];
} shared_ctx;

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_ctx *g_ctx_head;
static size_t g_ctx_n;

static void file_key(char *out, size_t cap, const char *path) {
    struct stat st;
    if (!path) snprintf(out, cap, "-");
    else if (stat(path, &st) != 0) snprintf(out, cap, "%s:?", path);
    else snprintf(out, cap, "%s:%lld:%lld.%09ld", path, (long long)st.st_size,
                  (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
}

static char *options_key(const up_tls_opts *o) {
    char ca[600], cert[600], key[600];
    file_key(ca, sizeof ca, o ? o->ca_file : NULL);
    file_key(cert, sizeof cert, o ? o->cert_file : NULL);
    file_key(key, sizeof key, o ? o->key_file : NULL);
    char *k = NULL;
    if (asprintf(&k, "%d|%s|%s|%s", o && o->insecure, ca, cert, key) < 0) return NULL;
    return k;
}

/* A context with these options, shared (a reference taken), or NULL. */
static SSL_CTX *shared_find(const char *key) {
    SSL_CTX *ctx = NULL;
    pthread_mutex_lock(&g_ctx_lock);
    for (shared_ctx *e = g_ctx_head; e && !ctx; e = e->next)
        if (!strcmp(e->key, key) && SSL_CTX_up_ref(e->ctx) == 1) ctx = e->ctx;
    pthread_mutex_unlock(&g_ctx_lock);
    return ctx;
}

static void shared_add(const char *key, SSL_CTX *ctx) {
    size_t kn = strlen(key) + 1;
    shared_ctx *e = malloc(sizeof *e + kn);
    if (!e) return;
    memcpy(e->key, key, kn);
    pthread_mutex_lock(&g_ctx_lock);
    if (g_ctx_n < CTX_SHARED_MAX && SSL_CTX_up_ref(ctx) == 1) {
        e->ctx = ctx;
        e->next = g_ctx_head;
        g_ctx_head = e;
        g_ctx_n++;
        e = NULL;
    }
    pthread_mutex_unlock(&g_ctx_lock);
    free(e);
}

__attribute__((destructor)) static void shared_free_all(void) {
    for (shared_ctx *e = g_ctx_head, *next; e; e = next) {
        next = e->next;
        SSL_CTX_free(e->ctx);
        free(e);
    }
    g_ctx_head = NULL;
    g_ctx_n = 0;
}

static SSL_CTX *ctx_build(const char *url, const up_tls_opts *o, char *err, size_t cap);

SSL_CTX *up__tls_ctx_new(const char *url, const up_tls_opts *o, char *err, size_t cap) {
    char *key = options_key(o);
    SSL_CTX *ctx = key ? shared_find(key) : NULL;
    if (!ctx && (ctx = ctx_build(url, o, err, cap)) && key) shared_add(key, ctx);
    free(key);
    return ctx;
}

static SSL_CTX *ctx_build(const char *url, const up_tls_opts *o, char *err, size_t cap) {
    ERR_clear_error();
    if (cap) err[0] = '\0';
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        snprintf(err, cap, "%.200s: cannot create a TLS context", url);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* an upstream asking for a new handshake (TLS 1.2's HelloRequest) gets a
     * no_renegotiation alert: it would make the gateway pay a handshake's
     * public-key work whenever it likes, and no HTTP/1.1 exchange needs one */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
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
