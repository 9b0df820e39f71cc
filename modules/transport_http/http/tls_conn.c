/* transport_http: a TLS connection's record layer on the loop. What the
 * socket gives is fed to OpenSSL's memory BIO; the handshake advances as
 * its flights arrive and its answers go out with the next write pass;
 * then records are decrypted into the worker's read buffer and parsed as
 * if read in clear. Answers are sealed right before they are written
 * (http_conn.c flush), so every byte OpenSSL makes leaves in the order it
 * was made: handshake flights, alerts, records, close_notify.
 *
 * A handshake is not a request: it holds no request object, the parser
 * sees nothing before it is done, and the sweep closes one that takes
 * longer than tls_handshake_timeout_ms from the accept. */
#include "http/http.h"
#include "tlsmem.h"

#include <openssl/err.h>
#include <string.h>

/* The handshake moved on: done, still waiting (0), or failed (-1: its
 * alert is queued and the connection will close once it is written). */
static int handshake(th_conn *c) {
    th_tls_conn *t = &c->tls;
    ERR_clear_error();
    int rc = SSL_do_handshake(t->ssl);
    if (tlsmem_pending(t->ssl)) th_mark_dirty(c);
    if (rc == 1) {
        t->ready = 1;
        t->facts = th_tls_facts_new(c->ws->mod->host, t->ssl);
        if (!t->facts) { /* out of memory: refuse rather than serve calls without their facts */
            c->close_after = 1;
            return -1;
        }
        return 1;
    }
    int e = SSL_get_error(t->ssl, rc);
    if (e == SSL_ERROR_WANT_READ) return 0;
    /* a refused client certificate, no shared version: the alert tells the
     * client; the operator sees why at debug level */
    th_mod *m = c->ws->mod;
    if (m->host->log_enabled(m->self, MCPG_LOG_DEBUG)) {
        char why[160];
        long v = SSL_get_verify_result(t->ssl);
        tlsmem_reason(why, sizeof why);
        m->host->log(m->self, MCPG_LOG_DEBUG, "TLS handshake with %s failed: %s", c->peer_len ? c->peer : "?",
                     v != X509_V_OK ? X509_verify_cert_error_string(v) : why);
    }
    ERR_clear_error();
    t->failed = 1;
    c->close_after = 1;
    th_mark_dirty(c);
    return -1;
}

/* Decrypt and parse what has arrived, as long as the parser takes more. */
void th_tls_pump(th_conn *c) {
    th_tls_conn *t = &c->tls;
    th_worker_state *ws = c->ws;
    if (!t->ready) return;
    while (!c->closing && !c->paused && !c->close_after && !c->lingering) {
        ERR_clear_error();
        int k = SSL_read(t->ssl, ws->rbuf, TH_READ_BUF);
        if (k > 0) {
            th_conn_feed(c, ws->rbuf, (size_t)k);
            continue;
        }
        int e = SSL_get_error(t->ssl, k);
        if (e == SSL_ERROR_WANT_READ) break;
        ERR_clear_error();
        if (e == SSL_ERROR_ZERO_RETURN) { /* close_notify: the client is done sending */
            th_conn_peer_closed(c);
            return;
        }
        t->failed = 1; /* a bad record: nothing after it can be trusted */
        th_conn_close(c);
        return;
    }
    if (!c->closing && tlsmem_pending(t->ssl)) th_mark_dirty(c); /* e.g. a key update's answer */
}

void th_tls_input(th_conn *c, const char *p, size_t n) {
    th_tls_conn *t = &c->tls;
    if (tlsmem_feed(t->ssl, p, n)) {
        th_conn_close(c);
        return;
    }
    if (!t->ready && handshake(c) <= 0) return;
    th_tls_pump(c);
}

/* Seal the answers in c->out (plaintext) and whatever else OpenSSL has
 * queued, into c->out as ciphertext, a chunk at a time so the memory BIO
 * never holds more than one chunk's records (c->wbuf, idle while nothing
 * is being written, collects them). 0, or -1: close. */
int th_tls_seal(th_conn *c) {
    enum { CHUNK = 64 * 1024 };
    th_tls_conn *t = &c->tls;
    const mcpg_host *h = c->ws->mod->host;
    mcpg_buf *dst = &c->wbuf;
    if (c->out.len && (!t->ready || t->failed)) return -1; /* nothing is answered before the handshake */
    dst->len = 0;
    size_t off = 0;
    do {
        size_t k = c->out.len - off < CHUNK ? c->out.len - off : CHUNK;
        ERR_clear_error();
        if (k && SSL_write(t->ssl, c->out.data + off, (int)k) != (int)k) return -1;
        off += k;
        size_t n = tlsmem_pending(t->ssl);
        if (n && (h->buf_reserve(dst, n) || tlsmem_take(t->ssl, dst->data + dst->len, n))) return -1;
        dst->len += n;
    } while (off < c->out.len);
    mcpg_buf plain = c->out;
    c->out = *dst;
    *dst = plain;
    dst->len = 0;
    return 0;
}

/* Before the FIN of a graceful close: close_notify, once, after a
 * handshake that succeeded. 1 while it (or anything else OpenSSL queued)
 * is still to be written, 0 when the FIN may go. */
int th_tls_bye(th_conn *c) {
    th_tls_conn *t = &c->tls;
    if (!t->bye) {
        t->bye = 1;
        ERR_clear_error();
        if (t->ready && !t->failed) (void)SSL_shutdown(t->ssl);
        ERR_clear_error();
    }
    return tlsmem_pending(t->ssl) > 0;
}
