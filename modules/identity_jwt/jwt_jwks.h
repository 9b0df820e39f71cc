/* identity_jwt: where the signing keys come from, a file or a URL, and the
 * current key set every loop verifies with.
 *
 * A file is read at create and again at each reload that carries the
 * instance over (lifecycle `reloaded`); a bad file then keeps the keys read
 * before. A URL is fetched with upclient on the home loop (the first
 * worker's) without blocking it: once that loop starts, then every
 * refresh_ms, and sooner after a failure (min_refresh_ms, doubling up to
 * refresh_ms). A loop that meets an unknown kid, or no keys at all, asks
 * for a fetch and its call waits for it (jwt_jwks_wait): at most one fetch
 * runs at a time, and calls waiting join the one running. A fetch is asked
 * at most once per min_refresh_ms; the periodic one and a reload's are not
 * counted. While fetches fail, the keys fetched before stay in use. */
#ifndef JWT_JWKS_H
#define JWT_JWKS_H

#include <mcpg/sdk.h>

#include "jwt_keys.h"

typedef struct jwt_jwks_cfg {
    const char *file;        /* one of file and url */
    const char *url;
    const char *ca_file;     /* https: the CA bundle (NULL: the system's) */
    int tls_insecure;
    uint64_t refresh_ms, min_refresh_ms, timeout_ms;
    uint32_t max_waiters;
} jwt_jwks_cfg;

typedef struct jwt_jwks jwt_jwks;

/* A call waiting for a fetch. The caller sets post.fn/arg and worker (the
 * call's loop); once the fetch ends (or the source stops) the waiter is
 * posted there, or run at once if that loop has stopped. */
typedef struct jwt_waiter {
    mcpg_post post;
    mcpg_worker *worker;
    struct jwt_waiter *next; /* the source's */
} jwt_waiter;

typedef enum jwt_wait {
    JWT_WAIT_QUEUED = 0, /* the waiter will be posted when the fetch ends */
    JWT_WAIT_TOO_SOON,   /* the last fetch began less than min_refresh_ms ago */
    JWT_WAIT_FULL,       /* max_waiters are waiting already */
    JWT_WAIT_NONE        /* nothing to wait for: a file, or the source stopping */
} jwt_wait;

/* Read and parse a JWKS file: the set (one reference), or NULL with err
 * ("path: why"); skipped keys are described in notes. Any thread. */
jwt_keyset *jwt_jwks_read_file(const char *path, char *err, size_t errcap, char *notes,
                               size_t notescap);

/* create(): a file is read and parsed now, a URL checked and its host
 * resolved (nothing fetched yet). NULL with err saying why (the file or URL
 * named). */
jwt_jwks *jwt_jwks_new(const mcpg_host *h, mcpg_instance *self, const jwt_jwks_cfg *c,
                       char *err, size_t errcap);
void jwt_jwks_free(jwt_jwks *j); /* after worker_stop on every loop */

/* Any thread: the current key set (a reference: jwt_keyset_unref it) and its
 * generation, which changes whenever the set does; NULL before any key. */
jwt_keyset *jwt_jwks_keys(jwt_jwks *j, uint64_t *gen);
int jwt_jwks_is_url(const jwt_jwks *j);

/* On a loop thread: queue w for the next fetch's end (see jwt_wait). For
 * TOO_SOON and FULL, *retry_after_ms says when asking again makes sense. */
jwt_wait jwt_jwks_wait(jwt_jwks *j, jwt_waiter *w, uint64_t *retry_after_ms);

void jwt_jwks_worker_start(jwt_jwks *j, mcpg_worker *w);
void jwt_jwks_worker_stop(jwt_jwks *j, mcpg_worker *w);
/* Main thread, at a reload that carried the instance over: a file is read
 * again (kept as it was when bad), a URL fetched again. */
void jwt_jwks_reloaded(jwt_jwks *j);

#endif
