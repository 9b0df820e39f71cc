/* upcred: the credentials a backend presents to its upstream, brokered per
 * caller (backend_http, backend_mcp). A static library linked into each
 * module that needs it, like upclient.
 *
 * An instance's "credentials" object picks a mode:
 *   static              the backend's configured headers only (the default)
 *   passthrough         the caller's bearer token, when the identity stage
 *                       verified it (host->call_bearer) and its `aud` names
 *                       this upstream's `audience`
 *   exchange            the caller's verified token exchanged at token_url
 *                       for one scoped to the upstream (RFC 8693)
 *   client_credentials  the gateway's own token for the upstream (RFC 6749
 *                       section 4.4), one for every caller
 *
 * Tokens from the token endpoint are cached (exchange: per caller and
 * subject token; client_credentials: one) until expires_in less a margin,
 * in a bounded cache (least recently used out first). Calls that need the
 * same missing token wait for one request to the endpoint; after a request
 * that failed, that key's calls fail at once for a while (backoff_min_ms,
 * doubling to backoff_max_ms) without asking it. The endpoint is reached
 * with upclient on the loop of the call that missed, never blocking it. No
 * token is ever logged or put in an error message, and every copy of one
 * is wiped when let go of. */
#ifndef MCPG_UPCRED_H
#define MCPG_UPCRED_H

#include <mcpg/sdk.h>
#include <stddef.h>
#include <stdint.h>

typedef enum upcred_mode {
    UPCRED_STATIC = 0,
    UPCRED_PASSTHROUGH,
    UPCRED_EXCHANGE,
    UPCRED_CLIENT_CREDENTIALS
} upcred_mode;

typedef struct upcred upcred;

/* One call's wait for its credentials. The caller owns it (zeroed, then
 * worker and notify set) and keeps it alive until notify has run or
 * upcred_cancel took it back. The results are the caller's to read after
 * upcred_begin answered UPCRED_READY or UPCRED_FAILED, or in notify. */
typedef struct upcred_wait upcred_wait;
struct upcred_wait {
    /* set by the caller */
    void (*notify)(upcred_wait *w); /* from the thread that got the token: hop
                                       to your own loop before using the call */
    void *arg;
    /* results */
    char *auth_line; /* "Authorization: Bearer ...\r\n" (free with
                            upcred_wait_clear), or NULL: no credential to add */
    int failed;
    char error[400];  /* why, naming the instance; never a token */
    char *error_data; /* JSON object for the JSON-RPC error's data, or NULL */
    /* the library's */
    upcred_wait *next;
    struct upcred_entry *entry; /* the token it waits for */
    unsigned char key[32];      /* that token's cache key */
    int keyed;                  /* key is set: the token came from the cache */
};

enum { UPCRED_READY = 0, UPCRED_PENDING = 1, UPCRED_FAILED = -1 };

/* validate() and create(): check the "credentials" JSON text (NULL: static),
 * problems under "credentials.<key>"; its mode into *mode. 0 or the number
 * of problems. */
int upcred_check(mcpg_config_problems *p, const char *json, upcred_mode *mode);
/* create() (off the loops: it resolves token_url): NULL for static (or with
 * problems counted in p: check p->errors). */
upcred *upcred_new(mcpg_config_problems *p, const mcpg_host *h, mcpg_instance *self,
                   const char *json);
upcred_mode upcred_mode_of(const upcred *u); /* UPCRED_STATIC for NULL */
/* The credentials differ from caller to caller (passthrough, exchange). */
int upcred_per_caller(const upcred *u);
/* On a loop thread (loop: its uv_loop_t, where a token request may run):
 * the credential for call. UPCRED_READY or UPCRED_FAILED with w's results
 * set at once, or UPCRED_PENDING: w->notify runs later, once. */
int upcred_begin(upcred *u, mcpg_call *call, void *loop, upcred_wait *w);
/* The call went away while pending: 1 when w was taken back (notify will
 * not run), 0 when notify has run or is about to. */
int upcred_cancel(upcred *u, upcred_wait *w);
/* The upstream refused the credential w carried (HTTP 401): the cached
 * token goes, so that the next call asks for a new one. */
void upcred_refused(upcred *u, const upcred_wait *w);
/* The same, by the cache key a wait had (w->key, when w->keyed). */
void upcred_refused_key(upcred *u, const unsigned char key[32]);
/* The caller's key for what depends on its credentials (an upstream
 * session): into out (cap >= 65), "" for one shared by every caller. */
void upcred_caller_key(const upcred *u, mcpg_call *call, char *out, size_t cap);
void upcred_wait_clear(upcred_wait *w);
/* On loop's thread: its token requests end, its connections close. */
void upcred_loop_stop(upcred *u, void *loop);
void upcred_free(upcred *u); /* once no loop runs */

/* The JSON-RPC error's data for an upstream's 401 (its WWW-Authenticate
 * challenge, and the gateway's own resource metadata when an identity
 * stage set one on the call): appended to out as an object. */
int upcred_challenge_data(const mcpg_host *h, mcpg_call *call, const char *instance, int status,
                          const char *www_authenticate, size_t len, mcpg_buf *out);

#endif
