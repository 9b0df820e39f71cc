/* tlsmem: OpenSSL over two memory BIOs, the way mcpg runs TLS on a libuv
 * loop. Ciphertext read from the socket is fed in, ciphertext to send is
 * taken out; OpenSSL never touches a socket, so a handshake or a record
 * never blocks the loop. Shared by upclient (the client side) and
 * transport_http (the server side), with the checks a context's
 * certificate and key go through, so both name the file at fault alike.
 *
 * A static library linked into each user (a module links no kernel
 * symbol). Every function runs on any thread, on one SSL at a time. */
#ifndef MCPG_TLSMEM_H
#define MCPG_TLSMEM_H

#include <openssl/ssl.h>
#include <stddef.h>

/* An SSL on ctx reading from and writing to memory (it owns both BIOs),
 * in the server or the client role. NULL when out of memory. */
SSL *tlsmem_new(SSL_CTX *ctx, int server);

/* n bytes of ciphertext from the peer: 0, or -1 when out of memory. */
int tlsmem_feed(SSL *ssl, const void *p, size_t n);

/* Ciphertext waiting to go to the peer (handshake flights, records,
 * alerts, close_notify), in the order OpenSSL made it. */
size_t tlsmem_pending(SSL *ssl);

/* Take n (<= tlsmem_pending) bytes of it into dst: 0 or -1. */
int tlsmem_take(SSL *ssl, void *dst, size_t n);

/* The reason of OpenSSL's last error as a phrase ("unknown error" when
 * none); the thread's error queue is cleared. */
void tlsmem_reason(char *out, size_t cap);

/* 0 when path can be opened for reading now, else -1 with
 * "cannot read PATH: <strerror>" in why. */
int tlsmem_readable(const char *path, char *why, size_t cap);

/* Which file tlsmem_use_pair found at fault. */
enum { TLSMEM_PAIR_OK = 0, TLSMEM_PAIR_BAD_CERT = 1, TLSMEM_PAIR_BAD_KEY = 2 };

/* The certificate chain (PEM: the leaf first) and its private key (PEM)
 * into ctx. TLSMEM_PAIR_OK, or which file is at fault with a sentence in
 * why naming it: unreadable, not PEM of the right kind, or a key that does
 * not match the certificate (blamed on the key). */
int tlsmem_use_pair(SSL_CTX *ctx, const char *cert_file, const char *key_file, char *why,
                    size_t cap);

#endif
