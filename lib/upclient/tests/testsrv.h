/* A small HTTP/1.1 server for upclient's and its users' tests: on
 * 127.0.0.1, a free port, a thread per connection, plain or TLS, canned
 * answers chosen by the request path:
 *   /stream   chunked: "part1", then (after tsrv_release or 3 s) "part2"
 *   /chunked  chunked: "hello world" in three chunks
 *   /close    no length: "until-close", then the connection closes
 *   /slow     never answers
 *   /hold     answers "held" after 150 ms
 *   /garbage  not HTTP
 *   else      200, Content-Length, X-Test: yes, {"ok":true}
 * And a certificate authority made with the openssl command for TLS tests. */
#ifndef UPC_TESTSRV_H
#define UPC_TESTSRV_H

#include <openssl/ssl.h>

typedef struct tsrv tsrv;

tsrv *tsrv_start(SSL_CTX *tls); /* NULL: plain HTTP; tls is borrowed */
int tsrv_port(const tsrv *s);
int tsrv_accepted(const tsrv *s);
int tsrv_requests(const tsrv *s);
/* Connections ended by both sides: when the server ends one (close_after,
 * /close...) it shuts its side and counts it once the client closed too. */
int tsrv_closed(const tsrv *s);
void tsrv_close_after(tsrv *s, int on); /* close each connection after its answer */
void tsrv_release(tsrv *s);             /* let a /stream send its second part */
void tsrv_stop(tsrv *s);                /* joins every thread */
/* A port of 127.0.0.1 nobody listens on (bound, never listening, closed). */
int tsrv_dead_port(void);

/* A CA and a server certificate for localhost and 127.0.0.1 in a fresh
 * temporary directory (openssl CLI). 0 or -1. */
typedef struct tcerts {
    char dir[64], ca[96], cert[96], key[96];
} tcerts;
int tcerts_make(tcerts *c);
void tcerts_remove(const tcerts *c);
SSL_CTX *tcerts_server_ctx(const tcerts *c);

#endif
