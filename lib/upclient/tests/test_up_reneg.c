/* upclient's TLS refuses renegotiation: an upstream (a server) that sends a
 * HelloRequest on an established TLS 1.2 connection is answered with a
 * no_renegotiation alert, never with a new handshake. A hostile upstream
 * would otherwise make the gateway pay a full handshake's public-key work
 * whenever it likes, on a connection it already holds.
 *
 * The client side is upclient's own: the SSL an https target makes
 * (up__tls_ctx_new, up__tls_new), talking over memory BIOs to a TLS 1.2
 * server SSL in the same thread, so each step is driven by hand and seen. */
#define _GNU_SOURCE
#include <mcpg/check.h>

#include <openssl/err.h>
#include <stdio.h>
#include <string.h>

#include "testsrv.h"
#include "tlsmem.h"
#include "up_internal.h"

/* What one side's steps ended with: SSL_get_error's last answer and the
 * reason of its first SSL_ERROR_SSL (the error queue is the thread's, shared
 * by both sides: it is read and cleared after each step). */
typedef struct side {
    SSL *ssl;
    int err, reason;
} side;

/* One step of a side: its handshake while it has one, else a read. */
static void drive(side *x) {
    char scratch[256];
    SSL *s = x->ssl;
    int rc = SSL_is_init_finished(s) ? SSL_read(s, scratch, sizeof scratch) : SSL_do_handshake(s);
    x->err = rc > 0 ? SSL_ERROR_NONE : SSL_get_error(s, rc);
    if (x->err == SSL_ERROR_SSL && !x->reason) x->reason = ERR_GET_REASON(ERR_peek_last_error());
    ERR_clear_error();
}

/* Bytes one side has to send, handed to the other: 1 when any moved. */
static int carry(SSL *from, SSL *to) {
    char buf[16384];
    int moved = 0;
    for (size_t n; (n = tlsmem_pending(from)) > 0; moved = 1) {
        if (n > sizeof buf) n = sizeof buf;
        MCPG_REQUIRE(tlsmem_take(from, buf, n) == 0 && tlsmem_feed(to, buf, n) == 0, "carry");
    }
    return moved;
}

/* Both sides driven until nothing moves. */
static void settle(side *client, side *server) {
    for (int round = 0; round < 64; round++) {
        drive(client);
        int moved = carry(client->ssl, server->ssl);
        drive(server);
        moved |= carry(server->ssl, client->ssl);
        if (!moved) break;
    }
}

int main(void) {
    tcerts certs;
    MCPG_REQUIRE(tcerts_make(&certs) == 0, "certificates (openssl command) in %s", certs.dir);
    SSL_CTX *sctx = tcerts_server_ctx(&certs);
    MCPG_REQUIRE(sctx, "server TLS context");
    /* TLS 1.3 has no renegotiation: the upstream offers only 1.2 */
    SSL_CTX_set_max_proto_version(sctx, TLS1_2_VERSION);

    char err[256];
    up_tls_opts o = {.ca_file = certs.ca};
    up_target *t = up_target_new("https://127.0.0.1:8443/mcp", &o, 1000, err, sizeof err);
    MCPG_REQUIRE(t, "target: %s", err);
    MCPG_CHECK(SSL_CTX_get_options(t->ctx) & SSL_OP_NO_RENEGOTIATION,
               "the upstream context has SSL_OP_NO_RENEGOTIATION");
    side client = {up__tls_new(t), 0, 0}, server = {tlsmem_new(sctx, 1), 0, 0};
    MCPG_REQUIRE(client.ssl && server.ssl, "SSLs");

    settle(&client, &server);
    MCPG_REQUIRE(SSL_is_init_finished(client.ssl) && SSL_is_init_finished(server.ssl),
                 "the first handshake (verify result %ld)", SSL_get_verify_result(client.ssl));
    MCPG_CHECK(SSL_version(client.ssl) == TLS1_2_VERSION, "TLS 1.2: %s",
               SSL_get_version(client.ssl));

    /* the upstream asks for a new handshake: a HelloRequest */
    MCPG_REQUIRE(SSL_renegotiate(server.ssl) == 1, "SSL_renegotiate on the server");
    drive(&server);
    settle(&client, &server);
    MCPG_CHECK(server.reason == SSL_R_NO_RENEGOTIATION,
               "the client answered no_renegotiation (the server's first error: reason %d, %s)",
               server.reason,
               ERR_reason_error_string(ERR_PACK(ERR_LIB_SSL, 0, server.reason)));
    MCPG_CHECK(SSL_renegotiate_pending(server.ssl), "no second handshake completed");

    SSL_free(client.ssl);
    SSL_free(server.ssl);
    up_target_free(t);
    SSL_CTX_free(sctx);
    tcerts_remove(&certs);
    return MCPG_CHECK_EXIT("test_up_reneg");
}
