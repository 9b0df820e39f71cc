/* transport_http: POST /webhooks/resources/{source} (webhook_resources.c)
 * and the fleet's resource news (wire/news_sub.c hears them).
 *
 * A source is configured in gateway.server.resource_webhooks:
 *   {"<source>": {"secret_env": "VAR", "uri_prefixes": ["mock://fleet/"],
 *                 "list_changed": false}}
 * Its secret is the Standard Webhooks one ("whsec_" + base64 of the HMAC
 * key), read from the environment variable secret_env names, never from the
 * manifest. A variable unset or empty turns the source off (404, logged at
 * start), as an unset admin_token_env turns the admin route off: a shipped
 * manifest checks and starts without it. A variable that holds something
 * else is a configuration error naming the key.
 *
 * A request is verified as Standard Webhooks signs it (mcpg/whsig.h, the
 * SDK's one implementation of the scheme): webhook-id,
 * webhook-timestamp (seconds, at most TH_WH_TOLERANCE_S from this
 * gateway's clock), webhook-signature ("v1,<base64 HMAC-SHA256 of
 * id.timestamp.body>", several space-separated allowed). Its body is
 * {"uri": "..."} or {"uris": [...]} and/or {"list_changed": true}.
 *
 * Its webhook-id is claimed in the coordinator first (a copy or a retry is
 * answered 202 "duplicate" and announced to nobody), then the news go to
 * the coordinator as one message on TH_NEWS_SUBJECT, and the request is
 * answered 202 once the store has taken it. Every loop of
 * every replica subscribes once and tells its listening clients what it
 * hears: the origin too, only from what it hears back, so each subscriber
 * is told once per webhook, wherever it is connected. */
#ifndef TH_WEBHOOK_H
#define TH_WEBHOOK_H

#include <mcpg/abi.h>
#include <mcpg/whsig.h>
#include <stddef.h>

#define TH_WH_MAX_BODY 65536   /* a larger webhook body is answered 413 */
#define TH_WH_MAX_URIS 64      /* uris one webhook may announce */
#define TH_WH_URI_MAX 1023     /* the longest uri a subscription list holds */
/* webhook-timestamp this far off the clock is refused: the specification's */
#define TH_WH_TOLERANCE_S MCPG_WHSIG_TOLERANCE_S
#define TH_WH_KEY_MIN MCPG_WHSIG_KEY_MIN /* a secret's key length, decoded, in bytes */
#define TH_WH_KEY_MAX MCPG_WHSIG_KEY_MAX
/* How long a webhook-id is remembered: a signed request is accepted for
 * TH_WH_TOLERANCE_S either side of its timestamp, so a copy can come up to
 * twice that after the first; a minute more for clocks apart. */
#define TH_WH_CLAIM_MS ((2 * TH_WH_TOLERANCE_S + 60) * 1000ull)

typedef struct th_whsrc {
    char name[65];
    unsigned char key[TH_WH_KEY_MAX];
    size_t key_len;      /* 0: off (its variable unset or empty) */
    int list_changed;    /* may announce notifications/resources/list_changed */
    char **prefixes;     /* decoded, host-allocated */
    size_t nprefixes;
} th_whsrc;

/* The sources, th_whset (http/http.h: the instance holds it). */
typedef struct th_whset th_whset;

typedef struct th_conn th_conn;
typedef struct th_req th_req;
typedef struct th_worker_state th_worker_state;

/* Parse resource_webhooks (JSON object text, or NULL: none) into *out (free
 * it with th_wh_free even on error). Problems go to rep (validate) or the
 * log of self (create) at paths like resource_webhooks.x.secret_env;
 * returns how many. */
int th_wh_parse(const mcpg_host *h, const char *json, mcpg_report *rep, mcpg_instance *self,
                th_whset *out);
void th_wh_free(const mcpg_host *h, th_whset *s);
/* What the sources that are on add to the capabilities (MCPG_OFFER_*):
 * updates worth subscribing to, and list changes when one may say so. */
uint32_t th_wh_offers(const th_whset *s);
/* The route: source is the path's last segment (not NUL-terminated). */
void th_wh_route(th_conn *c, th_req *r, const char *source, size_t n);


/* POST /webhooks/events/{source} (webhook_events.c): handed to the
 * gateway's events pipeline as a call (host->webhook_submit), answered
 * with the status and JSON the events module gives. */
void th_wh_events_route(th_conn *c, th_req *r, const char *source, size_t n);

#endif
