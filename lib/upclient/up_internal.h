/* upclient's private parts, shared by its files: the parsed URL, the
 * target, and the TLS helpers the connections use. */
#ifndef MCPG_UP_INTERNAL_H
#define MCPG_UP_INTERNAL_H

#include "upclient.h"

#include <openssl/ssl.h>
#include <sys/socket.h>

#define UP_HOST_MAX 255

typedef struct up_url {
    int tls;
    char host[UP_HOST_MAX + 1]; /* brackets of an IPv6 literal removed */
    char port[6];
    const char *authority;      /* into the URL: host[:port] as written */
    size_t authority_len;
    const char *path;           /* into the URL: "/..." or "" */
} up_url;

int up__url_parse(const char *url, up_url *u, char *err, size_t errcap);
int up__is_ip(const char *host);

struct up_target {
    char *authority;
    char *path;
    int tls;
    struct sockaddr_storage addr;
    uint64_t connect_timeout_ms;
    SSL_CTX *ctx;      /* https only */
    char *name;        /* SNI and the name verified */
    int name_is_ip;
    int insecure;
};

/* The TLS context of an https target, files read now. NULL with err. */
SSL_CTX *up__tls_ctx_new(const char *url, const up_tls_opts *o, char *err, size_t errcap);
/* One connection's TLS: memory BIOs, SNI, the name checked, ALPN. */
SSL *up__tls_new(const up_target *t);
/* Why the handshake (ret from SSL_do_handshake) failed, as a sentence. */
void up__tls_describe(SSL *ssl, int ret, char *out, size_t cap);

#endif
