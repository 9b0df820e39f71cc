/* transport_http: TLS and mTLS (OpenSSL 3), server side.
 *
 *   the context  one SSL_CTX per instance, built from gateway.server's tls_*
 *                keys (certificate chain, key, client CA, client auth, minimum
 *                version, ALPN http/1.1). Loop threads take it under a mutex
 *                once per accepted connection (SSL_new holds a reference of
 *                its own); `reloaded` builds a new one on the main thread and
 *                swaps it in: connections open keep the one they began with.
 *   a connection its SSL over memory BIOs (lib/tlsmem): the loop feeds what
 *                it read and writes what OpenSSL made, so a handshake never
 *                blocks; the facts (version, cipher, ALPN, SNI, the verified
 *                client certificate) computed once after the handshake.
 *   the facts    refcounted (atomically: a connection moved to another loop
 *                takes them along while calls of the old loop still point at
 *                them): the connection holds one reference, each call it
 *                submitted another until the call is released, so desc.tls
 *                stays valid as long as the kernel may read it. */
#ifndef TH_TLS_H
#define TH_TLS_H

#include <mcpg/sdk.h>
#include <openssl/ssl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/socket.h>

typedef struct th_config th_config;
typedef struct th_mod th_mod;

/* Whether cfg turns TLS on (a certificate is named). */
int th_tls_enabled(const th_config *cfg);

/* The server context cfg asks for, its files read now. NULL with the
 * config key at fault in *bad_key ("tls_cert_file", "tls_key_file",
 * "tls_client_ca_file") and a sentence naming the file in why. */
SSL_CTX *th_tls_ctx_new(const th_config *cfg, const char **bad_key, char *why, size_t cap);

/* Config checks that need no file: keys that go together. Reports through
 * rep; returns the number of problems. */
int th_tls_check_keys(const mcpg_host *host, const th_config *cfg, mcpg_report *rep);

/* The instance's context (m->tls_ctx, under m->tls_lock): built at create
 * (0, or MCPG_ECONFIG logged with the file at fault, or MCPG_ENOMEM),
 * an SSL for one accepted connection (NULL when out of memory), re-read by
 * `reloaded` (a bad file is logged and the old context kept), freed at
 * destroy. */
int th_tls_init(th_mod *m);
SSL *th_tls_accept(th_mod *m);
void th_tls_reload(th_mod *m);
void th_tls_fini(th_mod *m);

/* One connection's facts, shared by the calls that point at them. */
typedef struct th_tls_facts {
    atomic_uint refs;
    mcpg_tls_info info;
    /* the strings info points at follow */
} th_tls_facts;

/* After a completed handshake: the facts of ssl, one reference for the
 * caller. NULL when out of memory. */
th_tls_facts *th_tls_facts_new(const mcpg_host *h, SSL *ssl);
th_tls_facts *th_tls_facts_ref(th_tls_facts *f); /* NULL stays NULL */
void th_tls_facts_unref(const mcpg_host *h, th_tls_facts *f);

/* What a connection keeps of TLS; moved whole when the connection moves
 * to another loop (resume.c). All zero on clear text. */
typedef struct th_tls_conn {
    SSL *ssl;
    th_tls_facts *facts; /* set once the handshake is done */
    uint8_t ready;       /* handshake done: records flow */
    uint8_t failed;      /* the handshake failed: its alert goes out, then close */
    uint8_t bye;         /* close_notify queued */
} th_tls_conn;

void th_tls_conn_free(const mcpg_host *h, th_tls_conn *t);

/* The client's address as "1.2.3.4:5" or "[::1]:5" (an IPv4-mapped IPv6
 * address as IPv4) into out (TH_PEER_MAX); its length, 0 when unknown. */
#define TH_PEER_MAX 56
size_t th_peer_format(const struct sockaddr *sa, char *out, size_t cap);

#endif
