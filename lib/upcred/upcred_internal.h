/* upcred's parts: the config (upcred_config.c), the token cache
 * (upcred_cache.c), the token endpoint's requests (upcred_fetch.c) and the
 * modes (upcred.c). */
#ifndef MCPG_UPCRED_INTERNAL_H
#define MCPG_UPCRED_INTERNAL_H

#include <pthread.h>
#include <upclient.h>

#include "upcred.h"

#define UPCRED_CACHE_DEFAULT 1024
#define UPCRED_CACHE_MAX 1000000
#define UPCRED_WAITERS_MAX 1024 /* calls waiting for one token */
#define UPCRED_MARGIN_DEFAULT_S 30
#define UPCRED_TIMEOUT_DEFAULT_MS 10000
#define UPCRED_EXPIRES_DEFAULT_S 300 /* a token answered without expires_in */
#define UPCRED_ANSWER_MAX 65536      /* bytes of a token endpoint's answer read */
#define UPCRED_BACKOFF_MIN_DEFAULT_MS 1000  /* after a failed token request ... */
#define UPCRED_BACKOFF_MAX_DEFAULT_MS 30000 /* ... doubling up to this */
#define UPCRED_BACKOFF_LIMIT_MS 3600000     /* the largest either may be */

typedef struct upcred_cfg {
    upcred_mode mode;
    char *audience, *scope, *resource;
    char *token_url;
    char *client_id;
    char *client_secret_env;
    char *subject_token_type;   /* urn:...:access_token (default) or urn:...:jwt */
    char *requested_token_type; /* or NULL: not sent */
    char *private_key_file;     /* private_key_jwt (RFC 7523), or NULL */
    char *key_id;               /* its JWT header's kid, or NULL */
    char *ca_file;
    int tls_insecure;
    int64_t refresh_margin_s, timeout_ms, cache_entries;
    int64_t backoff_min_ms, backoff_max_ms;
} upcred_cfg;

/* Parse json (NULL: static) into c; problems through p. 0 or how many. */
int upcred_cfg_parse(mcpg_config_problems *p, const char *json, upcred_cfg *c);
void upcred_cfg_free(upcred_cfg *c);

typedef struct upcred_entry upcred_entry;
struct upcred_entry {
    unsigned char key[32];
    int used;     /* holds a key */
    int fetching; /* a request to the endpoint is out for it */
    char *line;   /* "Authorization: Bearer ...\r\n", or NULL */
    size_t line_len;
    int64_t expires_us; /* the line is good until then */
    uint64_t last_use;  /* for least-recently-used eviction */
    upcred_wait *waiters;
    size_t n_waiters;
    upcred_entry *hnext; /* its hash bucket's chain */
    /* a failed request: no new one for this key before retry_us */
    uint32_t failures; /* in a row, since the last token */
    int64_t retry_us;
    char *error; /* the last failure's message (never a token) */
};

typedef struct upcred_cache {
    upcred_entry *entries;
    size_t cap, used;
    upcred_entry **buckets;
    size_t nbuckets; /* a power of two */
    uint64_t clock;
} upcred_cache;

int upcred_cache_init(upcred_cache *c, size_t cap);
void upcred_cache_free(upcred_cache *c);
upcred_entry *upcred_cache_find(upcred_cache *c, const unsigned char key[32]);
/* A new entry for key: a free one, else the least recently used one not
 * fetching (its token dropped). NULL when every entry is fetching. */
upcred_entry *upcred_cache_add(upcred_cache *c, const unsigned char key[32]);
void upcred_cache_drop(upcred_cache *c, upcred_entry *e);
/* e's token (line taken): its failures are forgotten. */
void upcred_entry_set_line(upcred_entry *e, char *line, size_t len, int64_t expires_us);
/* e's request failed at now_us (why: its message): e holds no token and
 * backs off, no new request before a window that doubles from min_ms with
 * each failure in a row, at most max_ms (0: no window). */
void upcred_entry_failed(upcred_entry *e, const char *why, int64_t now_us, int64_t min_ms,
                         int64_t max_ms);
/* e is backing off at now_us: the microseconds left, else 0. */
int64_t upcred_entry_backoff_left(const upcred_entry *e, int64_t now_us);

/* private_key_jwt (upcred_assert.c) */
typedef struct upcred_signer upcred_signer;
/* Off the loops: the PEM key (P-256: ES256; RSA >= 2048 bits: RS256), or
 * NULL with why in err. */
upcred_signer *upcred_signer_load(const char *path, char *err, size_t cap);
void upcred_signer_free(upcred_signer *s);

struct upcred {
    const mcpg_host *h;
    mcpg_instance *self;
    const char *name; /* the instance's */
    upcred_cfg cfg;
    char *basic;           /* "Authorization: Basic ...\r\n" (client_secret_basic), or NULL */
    upcred_signer *signer; /* private_key_jwt, or NULL */
    up_target *endpoint;   /* token_url's */
    pthread_mutex_t lock;  /* the cache */
    upcred_cache cache;
    up_loops *pools;          /* the token endpoint's connections, per loop */
    mcpg_metric *cache_total; /* {instance, result=hit|miss|wait|backoff} */
    mcpg_metric *errors_total;
};

/* What a token request is for. */
typedef struct upcred_grant {
    const char *subject_token; /* exchange: the caller's verified token */
    size_t subject_len;
    int64_t subject_exp_s; /* its exp claim, or 0 */
} upcred_grant;

/* A fresh client assertion, appended to a token request's form. 0 or -1. */
int upcred_assertion(const upcred *u, mcpg_buf *form);
/* "Authorization: Bearer <tok>\r\n", in one allocation: wipe it when done. */
char *upcred_bearer_line(const char *tok, size_t n);
/* s[0..n) may go in a header line: visible ASCII, no blank, not empty. */
int upcred_header_safe(const char *s, size_t n);
/* Append v[0..n) form-encoded (RFC 6749 appendix B). */
void upcred_form_encode(mcpg_buf *b, const char *v, size_t n);

/* On loop's thread: ask the endpoint for e's token; every waiter of e is
 * told (upcred_finish). 0, or -1 (nothing started, e's waiters told). */
int upcred_fetch(upcred *u, void *loop, upcred_entry *e, const upcred_grant *g);
/* The request for e ended: line (taken) and its expiry, or why not. Every
 * waiter gets a copy or the error; on failure e backs off (its key's next
 * calls fail at once for a while, upcred_entry_failed). */
void upcred_finish(upcred *u, upcred_entry *e, char *line, size_t len, int64_t expires_us,
                   const char *error);

#endif
