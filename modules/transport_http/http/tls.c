/* transport_http: the server's TLS context, a connection's facts, the
 * peer's address as text (see tls.h). */
#include "http/http.h"
#include "tlsmem.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

int th_tls_enabled(const th_config *cfg) { return cfg->tls_cert_file && *cfg->tls_cert_file; }

static int set_nonempty(const char *s) { return s && *s; }

int th_tls_check_keys(const mcpg_host *host, const th_config *cfg, mcpg_report *rep) {
    int n = 0, tls = th_tls_enabled(cfg);
    int auth = cfg->tls_client_auth && strcmp(cfg->tls_client_auth, "none");
    if (tls && !set_nonempty(cfg->tls_key_file)) {
        host->report_error(rep, "tls_key_file", "is required with tls_cert_file");
        n++;
    }
    if (!tls && set_nonempty(cfg->tls_key_file)) {
        host->report_error(rep, "tls_cert_file", "is required with tls_key_file");
        n++;
    }
    if (!tls && (set_nonempty(cfg->tls_client_ca_file) || auth)) {
        host->report_error(rep, set_nonempty(cfg->tls_client_ca_file) ? "tls_client_ca_file" : "tls_client_auth",
                           "needs tls_cert_file and tls_key_file (TLS is off without them)");
        n++;
    }
    if (tls && auth && !set_nonempty(cfg->tls_client_ca_file)) {
        host->report_error(rep, "tls_client_auth", "\"%s\" needs tls_client_ca_file (the CA that "
                           "signs the client certificates)", cfg->tls_client_auth);
        n++;
    }
    return n;
}

/* ALPN: http/1.1 when the client offers it; a client that offers only
 * other protocols (h2) gets no ALPN and is served HTTP/1.1 (its HTTP/2
 * preface is answered 505 and the connection closed). */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg) {
    static const unsigned char ours[] = "\x08http/1.1";
    unsigned char *sel = NULL;
    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static int client_ca(SSL_CTX *ctx, const th_config *cfg, const char **bad_key, char *why,
                     size_t cap) {
    const char *ca = cfg->tls_client_ca_file;
    if (!set_nonempty(ca)) return 0;
    *bad_key = "tls_client_ca_file";
    if (tlsmem_readable(ca, why, cap)) return -1;
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca);
    if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1 || !names) {
        char r[160];
        tlsmem_reason(r, sizeof r);
        snprintf(why, cap, "%.300s: no PEM CA certificate in it (%s)", ca, r);
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        return -1;
    }
    SSL_CTX_set_client_CA_list(ctx, names); /* the names sent in CertificateRequest */
    int mode = SSL_VERIFY_PEER;
    if (!strcmp(cfg->tls_client_auth, "required")) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    if (!strcmp(cfg->tls_client_auth, "none")) mode = SSL_VERIFY_NONE;
    SSL_CTX_set_verify(ctx, mode, NULL);
    *bad_key = NULL;
    return 0;
}

SSL_CTX *th_tls_ctx_new(const th_config *cfg, const char **bad_key, char *why, size_t cap) {
    static const unsigned char sid_ctx[] = "mcpg-transport_http";
    *bad_key = "tls_cert_file";
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(why, cap, "cannot create a TLS context (out of memory)");
        return NULL;
    }
    int v13 = cfg->tls_min_version && !strcmp(cfg->tls_min_version, "1.3");
    SSL_CTX_set_min_proto_version(ctx, v13 ? TLS1_3_VERSION : TLS1_2_VERSION);
    /* client-initiated renegotiation is a CPU lever for a client, and no
     * HTTP/1.1 client needs it */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* an idle keep-alive connection gives back its record buffers */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    /* resumed sessions carry the verified client certificate: they must
     * belong to this server's context */
    SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof sid_ctx - 1);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    int bad = tlsmem_use_pair(ctx, cfg->tls_cert_file, cfg->tls_key_file, why, cap);
    if (bad) {
        *bad_key = bad == TLSMEM_PAIR_BAD_CERT ? "tls_cert_file" : "tls_key_file";
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (client_ca(ctx, cfg, bad_key, why, cap)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    *bad_key = NULL;
    return ctx;
}

/* ---- the instance's context ------------------------------------------------ */

int th_tls_init(th_mod *m) {
    if (pthread_mutex_init(&m->tls_lock, NULL)) return MCPG_ENOMEM;
    m->tls_lock_ok = 1;
    if (!th_tls_enabled(m->cfg)) return 0;
    const char *key;
    char why[512];
    m->tls_ctx = th_tls_ctx_new(m->cfg, &key, why, sizeof why);
    if (m->tls_ctx) return 0;
    m->host->log(m->self, MCPG_LOG_ERROR, "gateway.server.%s: %s", key, why);
    return MCPG_ECONFIG;
}

SSL *th_tls_accept(th_mod *m) {
    pthread_mutex_lock(&m->tls_lock);
    SSL *ssl = tlsmem_new(m->tls_ctx, 1); /* holds its own reference to the context */
    pthread_mutex_unlock(&m->tls_lock);
    return ssl;
}

void th_tls_reload(th_mod *m) {
    if (!m->tls_ctx) return;
    const char *key;
    char why[512];
    SSL_CTX *fresh = th_tls_ctx_new(m->cfg, &key, why, sizeof why);
    if (!fresh) {
        m->host->log(m->self, MCPG_LOG_ERROR,
                     "reload: gateway.server.%s: %s; new connections keep the certificates read before",
                     key, why);
        return;
    }
    pthread_mutex_lock(&m->tls_lock);
    SSL_CTX *old = m->tls_ctx;
    m->tls_ctx = fresh;
    pthread_mutex_unlock(&m->tls_lock);
    SSL_CTX_free(old); /* connections on it hold their own references */
    m->host->log(m->self, MCPG_LOG_INFO, "reload: %s and %s read again; new connections use them",
                 m->cfg->tls_cert_file, m->cfg->tls_key_file);
}

void th_tls_fini(th_mod *m) {
    SSL_CTX_free(m->tls_ctx);
    m->tls_ctx = NULL;
    if (m->tls_lock_ok) pthread_mutex_destroy(&m->tls_lock);
    m->tls_lock_ok = 0;
}

void th_tls_conn_free(const mcpg_host *h, th_tls_conn *t) {
    SSL_free(t->ssl);
    th_tls_facts_unref(h, t->facts);
    memset(t, 0, sizeof *t);
}

/* ---- facts ------------------------------------------------------------------- */

/* A name in RFC 2253's one-line form. */
static int append_name(const mcpg_host *h, mcpg_buf *b, const X509_NAME *name) {
    BIO *mem = BIO_new(BIO_s_mem());
    if (!mem) return -1;
    char *p;
    int rc = X509_NAME_print_ex(mem, name, 0, XN_FLAG_RFC2253) < 0;
    long n = BIO_get_mem_data(mem, &p);
    if (!rc) rc = h->buf_append(b, p, n > 0 ? (size_t)n : 0);
    BIO_free(mem);
    return rc ? -1 : 0;
}

/* One subjectAltName as a JSON string "TYPE:value"; other types are left
 * out. The value goes whole, whatever its bytes and length: cut at a NUL
 * ("admin\0.evil.example") or at the end of a buffer it would be another,
 * shorter name, and that one could be a principal. The JSON writer escapes
 * its control characters, so whoever reads it sees them. *first says
 * whether a comma is due. */
static int append_san(const mcpg_host *h, mcpg_buf *b, const GENERAL_NAME *g, int *first) {
    char ip_text[3 + INET6_ADDRSTRLEN] = "IP:";
    const char *type = NULL;
    const ASN1_STRING *s = NULL;
    switch (g->type) {
    case GEN_DNS: type = "DNS:"; s = g->d.dNSName; break;
    case GEN_URI: type = "URI:"; s = g->d.uniformResourceIdentifier; break;
    case GEN_EMAIL: type = "email:"; s = g->d.rfc822Name; break;
    case GEN_IPADD: {
        const ASN1_OCTET_STRING *ip = g->d.iPAddress;
        int af = ip->length == 4 ? AF_INET : ip->length == 16 ? AF_INET6 : 0;
        if (!af || !inet_ntop(af, ip->data, ip_text + 3, sizeof ip_text - 3)) return 0;
        break;
    }
    default: return 0;
    }
    if (type && !s) return 0;
    mcpg_buf one = {0};
    int rc = s ? h->buf_append(&one, type, strlen(type)) ||
                     h->buf_append(&one, ASN1_STRING_get0_data(s), (size_t)ASN1_STRING_length(s))
               : h->buf_append(&one, ip_text, strlen(ip_text));
    if (!rc && !*first) rc = h->buf_append(b, ",", 1);
    if (!rc) rc = h->buf_append_json_string(b, one.data, one.len);
    *first = 0;
    h->buf_free(&one);
    return rc;
}

static int append_sans(const mcpg_host *h, mcpg_buf *b, X509 *cert) {
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    int rc = h->buf_append(b, "[", 1), first = 1;
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names); i++)
        rc |= append_san(h, b, sk_GENERAL_NAME_value(names, i), &first);
    GENERAL_NAMES_free(names);
    rc |= h->buf_append(b, "]", 1);
    return rc ? -1 : 0;
}

static int append_sha256(const mcpg_host *h, mcpg_buf *b, X509 *cert) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    char hex[2 * EVP_MAX_MD_SIZE];
    if (X509_digest(cert, EVP_sha256(), md, &n) != 1) return -1;
    mcpg_hex(md, n, hex);
    return h->buf_append(b, hex, 2 * n) ? -1 : 0;
}

/* The strings, each NUL-terminated, at offsets into b (0: none). */
enum { F_ALPN, F_SNI, F_SUBJECT, F_ISSUER, F_SANS, F_SHA, F_COUNT };

static int append_str(const mcpg_host *h, mcpg_buf *b, size_t *off, const char *p, size_t n) {
    *off = b->len;
    return h->buf_append(b, p, n) || h->buf_append(b, "", 1) ? -1 : 0;
}

static int collect(const mcpg_host *h, SSL *ssl, mcpg_buf *b, size_t off[F_COUNT], int *verified) {
    int rc = h->buf_append(b, "", 1); /* offset 0 means "none" */
    const unsigned char *alpn;
    unsigned alpn_len = 0;
    SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
    if (alpn_len) rc |= append_str(h, b, &off[F_ALPN], (const char *)alpn, alpn_len);
    const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (sni) rc |= append_str(h, b, &off[F_SNI], sni, strlen(sni));
    X509 *cert = SSL_get0_peer_certificate(ssl);
    *verified = cert && SSL_get_verify_result(ssl) == X509_V_OK;
    if (!*verified) return rc;
    off[F_SUBJECT] = b->len;
    rc |= append_name(h, b, X509_get_subject_name(cert)) | h->buf_append(b, "", 1);
    off[F_ISSUER] = b->len;
    rc |= append_name(h, b, X509_get_issuer_name(cert)) | h->buf_append(b, "", 1);
    off[F_SANS] = b->len;
    rc |= append_sans(h, b, cert) | h->buf_append(b, "", 1);
    off[F_SHA] = b->len;
    rc |= append_sha256(h, b, cert) | h->buf_append(b, "", 1);
    return rc;
}

th_tls_facts *th_tls_facts_new(const mcpg_host *h, SSL *ssl) {
    mcpg_buf b = {0};
    size_t off[F_COUNT] = {0};
    int verified = 0;
    th_tls_facts *f = NULL;
    if (!collect(h, ssl, &b, off, &verified)) f = h->alloc(sizeof *f + b.len);
    if (f) {
        char *s = (char *)(f + 1);
        memcpy(s, b.data, b.len);
        memset(&f->info, 0, sizeof f->info);
        atomic_init(&f->refs, 1);
        f->info.size = (uint32_t)sizeof f->info;
        f->info.client_verified = (uint32_t)verified;
        /* both name static strings of the library's tables */
        f->info.version = SSL_get_version(ssl);
        f->info.cipher = SSL_get_cipher_name(ssl);
        const char **dst[F_COUNT] = {&f->info.alpn, &f->info.server_name, &f->info.cert_subject,
                                     &f->info.cert_issuer, &f->info.cert_sans_json, &f->info.cert_sha256};
        for (int i = 0; i < F_COUNT; i++) *dst[i] = off[i] ? s + off[i] : NULL;
    }
    h->buf_free(&b);
    ERR_clear_error();
    return f;
}

th_tls_facts *th_tls_facts_ref(th_tls_facts *f) {
    if (f) atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    return f;
}

void th_tls_facts_unref(const mcpg_host *h, th_tls_facts *f) {
    if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1) h->free(f);
}

/* ---- the peer's address --------------------------------------------------------- */

size_t th_peer_format(const struct sockaddr *sa, char *out, size_t cap) {
    char ip[INET6_ADDRSTRLEN];
    int n = -1;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        if (inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip))
            n = snprintf(out, cap, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        unsigned port = ntohs(a->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) { /* a dual-stack listener's IPv4 client */
            if (inet_ntop(AF_INET, a->sin6_addr.s6_addr + 12, ip, sizeof ip))
                n = snprintf(out, cap, "%s:%u", ip, port);
        } else if (inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip)) {
            n = snprintf(out, cap, "[%s]:%u", ip, port);
        }
    }
    if (n < 0 || (size_t)n >= cap) {
        if (cap) out[0] = '\0';
        return 0;
    }
    return (size_t)n;
}
