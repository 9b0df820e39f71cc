/* upclient: the HTTP/1.1 client modules use to reach upstreams (backend_http,
 * backend_mcp), plain or over TLS (OpenSSL 3), on a libuv loop, never
 * blocking it. A static library linked into each module that needs it (a
 * module must not depend on kernel symbols).
 *
 *   up_target  where to go: a parsed http:// or https:// URL, its resolved
 *              address and, for https, its TLS context. Built once (it may
 *              resolve the host, so not on a loop thread), then immutable and
 *              shared by every loop.
 *   up_pool    one loop's connections to one target: at most max_conns open,
 *              up to idle_max of them kept alive between requests; requests
 *              beyond max_conns wait in a bounded queue (queue_max) and are
 *              refused with UP_EFULL beyond it. A pool belongs to one loop:
 *              every call below except up_target_* runs on that loop's thread.
 *   up_req     one request and its streamed response.
 *
 * Errors are negative: libuv codes (UV_ECONNREFUSED, UV_ETIMEDOUT...) or the
 * UP_E* codes below; up_strerror names both. */
#ifndef MCPG_UPCLIENT_H
#define MCPG_UPCLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define UP_EFULL    (-30001) /* the pool's queue is full */
#define UP_ETLS     (-30002) /* TLS handshake or certificate verification failed */
#define UP_EPROTO   (-30003) /* the upstream's answer is not valid HTTP/1.1 */
#define UP_ECLOSED  (-30004) /* the upstream closed the connection before the answer ended */
#define UP_ECANCEL  (-30005) /* up_req_abort or up_pool_close ended the request */

typedef struct up_tls_opts {
    int insecure;            /* 1: do not verify the certificate (default: verify) */
    const char *ca_file;     /* PEM bundle to verify against; NULL: the system's */
    const char *cert_file;   /* client certificate (mTLS), PEM; NULL: none */
    const char *key_file;    /* its private key, PEM */
    const char *server_name; /* SNI and the name verified; NULL: the URL's host */
} up_tls_opts;

typedef struct up_target up_target;

/* Parse url (http://host[:port][/path][?query] or https://...), resolve the
 * host and, for https, build the TLS context (files read now). NULL with a
 * message naming what is wrong in err (e.g. "https://x: cannot read
 * ca_file /etc/x.pem: No such file or directory"). Any thread; may block. */
up_target *up_target_new(const char *url, const up_tls_opts *tls, uint64_t connect_timeout_ms,
                         char *err, size_t errcap);
void up_target_free(up_target *t); /* once no pool uses it */
const char *up_target_path(const up_target *t);      /* "/mcp?x=1"; "/" when none */
const char *up_target_authority(const up_target *t); /* "host:port" as the Host header */
int up_target_is_tls(const up_target *t);
/* Check url's form only (no resolving, no files): 0, or -1 with a message
 * in err as up_target_new would give it. For validating a config. */
int up_url_check(const char *url, char *err, size_t errcap);

/* ---- where a request made for a client may go (up_dest.c) ---- */
struct sockaddr;
/* The address a target connects to: the one it resolved, once. */
const struct sockaddr *up_target_addr(const up_target *t);
/* NULL when sa is a public unicast address; else why not, as a phrase
 * ("a loopback address", "a private address", "an address of this
 * machine", ...). An IPv4 address inside IPv6 (mapped, NAT64) is judged as
 * that address. */
const char *up_addr_not_public(const struct sockaddr *sa);
/* sa inside the CIDR block ("10.0.0.0/8", "::1", "fd00::/8"): 1 yes, 0 no,
 * -1 when cidr is not one. */
int up_addr_in_cidr(const struct sockaddr *sa, const char *cidr);
void up_addr_text(const struct sockaddr *sa, char *out, size_t cap);
/* Destinations a client chose (a webhook callback): refused when not
 * public, unless an allow entry names the URL's host (a name, without case)
 * or holds its address (a CIDR block). 0, or -1 with a sentence naming the
 * URL, the address and why in err. up_dest_check_url judges what the URL
 * says without resolving (an IP literal, "localhost"; a name passes until
 * resolved); up_dest_check_target judges the address a target resolved,
 * which is the one it connects to (redirects are never followed). */
int up_dest_check_url(const char *url, const char *const *allow, size_t n_allow, char *err,
                      size_t errcap);
int up_dest_check_addr(const char *url, const struct sockaddr *sa, const char *const *allow,
                       size_t n_allow, char *err, size_t errcap);
int up_dest_check_target(const up_target *t, const char *url, const char *const *allow,
                         size_t n_allow, char *err, size_t errcap);

typedef struct up_pool up_pool;

up_pool *up_pool_new(uv_loop_t *loop, const up_target *t, unsigned max_conns, unsigned idle_max,
                     unsigned queue_max);
/* Abort every request (their on_done gets UP_ECANCEL), close every
 * connection; the pool's memory goes once the last handle has closed. */
void up_pool_close(up_pool *p);
/* What p reads (a token endpoint's answers) is wiped from its buffers once
 * handed to on_body: answers that hold secrets leave no copy behind. */
void up_pool_wipe_reads(up_pool *p);

/* ---- pools per loop (up_loops.c) ----
 * A module's pools, one per loop and upstream (key: the module's number
 * for the upstream), made on first use on the loop's thread. */
typedef struct up_loops up_loops;
up_loops *up_loops_new(void); /* NULL when out of memory */
/* On loop's thread: its pool for key (made with t and the bounds given the
 * first time); NULL when out of memory. */
up_pool *up_loops_pool(up_loops *s, void *loop, size_t key, const up_target *t, unsigned max_conns,
                       unsigned idle_max, unsigned queue_max);
/* On loop's thread: close its pools (requests in flight end). */
void up_loops_stop(up_loops *s, void *loop);
void up_loops_free(up_loops *s); /* once no loop runs */

typedef struct up_header {
    const char *name; size_t name_len;   /* as received; compare case-insensitively */
    const char *value; size_t value_len;
} up_header;

typedef struct up_callbacks {
    /* The status line and headers arrived. Return non-zero to abort. */
    int (*on_head)(void *arg, int status, const up_header *headers, size_t n);
    /* A piece of the body (chunked encoding already removed). Return
     * non-zero to abort (e.g. over the caller's size cap). May be NULL. */
    int (*on_body)(void *arg, const char *p, size_t n);
    /* Exactly once, last: 0 when the whole answer arrived, else an error
     * (also after an abort from a callback: UP_ECANCEL). The up_req is
     * gone after this returns. */
    void (*on_done)(void *arg, int err);
} up_callbacks;

typedef struct up_req up_req;

/* up_send's flags. UP_RETRY_STALE: the request may be sent again, once, on
 * a fresh connection when a kept-alive one turns out closed before any byte
 * of the answer came (safe for idempotent requests). UP_SECRET_BODY: the
 * body holds a secret (a token request's form): the library's copy of it
 * is wiped when let go of, as the head's always is. */
#define UP_RETRY_STALE 1
#define UP_SECRET_BODY 2

/* Send method path with the target's Host, the given extra header lines
 * (each "Name: value\r\n", may be NULL), Content-Length and the body. The
 * library copies what it needs, in one allocation wiped (its head, where a
 * credential goes; all of it with UP_SECRET_BODY) when the request ends.
 * flags: UP_RETRY_STALE, UP_SECRET_BODY (1 is UP_RETRY_STALE alone).
 * NULL only when out of memory (or the pool is closing: up_pool_close
 * was called); every other failure comes through on_done, never from
 * inside this call. */
up_req *up_send(up_pool *p, const char *method, const char *path, const char *headers,
                const char *body, size_t body_len, int flags, const up_callbacks *cb, void *arg);
/* Stop a request: its connection is closed (never reused mid-answer) and
 * on_done runs with UP_ECANCEL, before this returns. */
void up_req_abort(up_req *r);
/* Inside r's on_done only: what went wrong, as a sentence naming the cause
 * (e.g. "certificate verify failed: self-signed certificate", "connecting
 * to host:443 timed out after 5000 ms"), else up_strerror of the error. */
const char *up_req_error_detail(const up_req *r);

const char *up_strerror(int err);

/* Find a header (case-insensitive name) among those on_head got. */
const up_header *up_header_find(const up_header *h, size_t n, const char *name);

#endif
