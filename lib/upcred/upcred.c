/* upcred: the modes (see upcred.h), the cache's single flight (the first
 * call that misses asks the endpoint, the others wait for its answer), the
 * back-off after a failed request (the key's calls fail at once for a
 * while, without asking the endpoint) and the metrics. */
#define _GNU_SOURCE
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "upcred_internal.h"

enum { SERIES_HIT, SERIES_MISS, SERIES_WAIT, SERIES_BACKOFF };

/* ---- results --------------------------------------------------------------- */

static int failed(upcred_wait *w, const char *fmt, ...) MCPG_PRINTF(2, 3);
static int failed(upcred_wait *w, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->error, sizeof w->error, fmt, ap);
    va_end(ap);
    w->failed = 1;
    return UPCRED_FAILED;
}

void upcred_wait_clear(upcred_wait *w) {
    if (w->auth_line) explicit_bzero(w->auth_line, strlen(w->auth_line));
    free(w->auth_line);
    free(w->error_data);
    w->auth_line = w->error_data = NULL;
}

/* One allocation of the exact size, never asprintf's: a buffer printf grows
 * on its way is freed with a part of the token in it, unwiped. */
char *upcred_bearer_line(const char *tok, size_t n) {
    static const char head[] = "Authorization: Bearer ";
    size_t hn = sizeof head - 1;
    char *line = malloc(hn + n + 3);
    if (!line) return NULL;
    memcpy(line, head, hn);
    memcpy(line + hn, tok, n);
    memcpy(line + hn + n, "\r\n", 3);
    return line;
}

/* ---- the caller's verified token --------------------------------------------- */

/* The gateway's own challenge (the identity stage's resource_metadata), so
 * that a client learns where to get a token this upstream takes. */
static void gateway_challenge(const mcpg_host *h, mcpg_call *call, upcred_wait *w,
                              const char *reason) {
    const char *ch = MCPG_HOST_HAS(h, call_challenge) ? h->call_challenge(call) : NULL;
    mcpg_buf b = {0};
    mcpg_buf_printf(&b, "{\"reason\":\"%s\"", reason);
    if (ch) {
        mcpg_buf_puts(&b, ",\"www_authenticate\":");
        mcpg_buf_append_json_string(&b, ch, strlen(ch));
    }
    mcpg_buf_puts(&b, "}");
    w->error_data = b.data;
}

static int no_verified_token(upcred *u, mcpg_call *call, upcred_wait *w) {
    gateway_challenge(u->h, call, w, "no_verified_token");
    return failed(w,
                  "%s: this upstream needs the caller's own token, and the call's identity "
                  "was not established from a verified bearer token",
                  u->name);
}

static int verified_token(upcred *u, mcpg_call *call, upcred_wait *w, const char **tok, size_t *n,
                          const char **claims, size_t *claims_len) {
    const mcpg_host *h = u->h;
    if (!MCPG_HOST_HAS(h, call_bearer) || h->call_bearer(call, tok, n, claims, claims_len) != 0)
        return no_verified_token(u, call, w);
    return UPCRED_READY;
}

/* The claims' aud (a string or an array of them) names want. */
static int audience_named(const char *claims, size_t n, const char *want) {
    mcpg_json_span aud, v;
    size_t wl = strlen(want), it = 0;
    if (!claims || mcpg_json_object_get_trusted(claims, n, "aud", &aud) != 1) return 0;
    if (aud.type == MCPG_JSON_STRING) return mcpg_json_string_eq(&aud, want, wl);
    if (aud.type != MCPG_JSON_ARRAY) return 0;
    while (mcpg_json_array_next_trusted(aud.p, aud.n, &it, &v) == 1)
        if (v.type == MCPG_JSON_STRING && mcpg_json_string_eq(&v, want, wl)) return 1;
    return 0;
}

static int64_t exp_claim(const char *claims, size_t n) {
    mcpg_json_span v;
    int64_t exp = 0;
    if (claims && mcpg_json_object_get_trusted(claims, n, "exp", &v) == 1 &&
        v.type == MCPG_JSON_NUMBER && mcpg_json_int64(&v, &exp) == 0)
        return exp;
    return 0;
}

static int passthrough(upcred *u, mcpg_call *call, upcred_wait *w) {
    const char *tok, *claims;
    size_t n, cl;
    if (verified_token(u, call, w, &tok, &n, &claims, &cl) != UPCRED_READY) return UPCRED_FAILED;
    if (!audience_named(claims, cl, u->cfg.audience)) {
        gateway_challenge(u->h, call, w, "audience");
        return failed(w,
                      "%s: the caller's token is not meant for this upstream (its aud does not "
                      "name %.200s)",
                      u->name, u->cfg.audience);
    }
    if (!upcred_header_safe(tok, n))
        return failed(w, "%s: the caller's token cannot go in a header", u->name);
    if (!(w->auth_line = upcred_bearer_line(tok, n)))
        return failed(w, "%s: out of memory", u->name);
    return UPCRED_READY;
}

/* ---- the cache's single flight ------------------------------------------------ */

static void count(upcred *u, uint32_t series) {
    if (u->cache_total) u->h->metric_add(u->cache_total, series, 1);
}

static void push_waiter(upcred_entry *e, upcred_wait *w) {
    w->next = e->waiters;
    e->waiters = w;
    e->n_waiters++;
    w->entry = e;
}

/* The back-off's clock: the wall's may jump. */
static int64_t mono_now(const upcred *u) { return (int64_t)u->h->mono_us(); }

/* A call for a key whose last request failed a moment ago fails the same
 * way at once: an endpoint that is down, or refuses, is not asked again by
 * every call (a connection each) while it is. */
static void backing_off(const upcred *u, const upcred_entry *e, int64_t left_us, upcred_wait *w) {
    failed(w, "%.300s (a recent failure, %u in a row: the token endpoint is asked again in %.1f s)",
           e->error ? e->error : u->name, e->failures, (double)left_us / 1e6);
}

static int cached(upcred *u, void *loop, upcred_wait *w, const upcred_grant *g) {
    int64_t now = u->h->wall_us();
    w->keyed = 1;
    pthread_mutex_lock(&u->lock);
    upcred_entry *e = upcred_cache_find(&u->cache, w->key);
    if (e && e->line && !e->fetching && e->expires_us > now) {
        w->auth_line = strndup(e->line, e->line_len);
        pthread_mutex_unlock(&u->lock);
        count(u, SERIES_HIT);
        return w->auth_line ? UPCRED_READY : failed(w, "%s: out of memory", u->name);
    }
    int64_t left = e ? upcred_entry_backoff_left(e, mono_now(u)) : 0;
    if (left) {
        backing_off(u, e, left, w);
        pthread_mutex_unlock(&u->lock);
        count(u, SERIES_BACKOFF);
        return UPCRED_FAILED;
    }
    if (e && e->fetching) {
        int full = e->n_waiters >= UPCRED_WAITERS_MAX;
        if (!full) push_waiter(e, w);
        pthread_mutex_unlock(&u->lock);
        if (full) return failed(w, "%s: too many calls waiting for a token", u->name);
        count(u, SERIES_WAIT);
        return UPCRED_PENDING;
    }
    if (!e) e = upcred_cache_add(&u->cache, w->key);
    if (e) {
        e->fetching = 1;
        push_waiter(e, w);
    }
    pthread_mutex_unlock(&u->lock);
    if (!e) return failed(w, "%s: every token cache entry is being fetched", u->name);
    count(u, SERIES_MISS);
    upcred_fetch(u, loop, e, g); /* a failure told the waiters already */
    return UPCRED_PENDING;
}

/* Copy the answer to each waiter under the lock (the entry may be reused
 * once it is released), tell them outside it. */
void upcred_finish(upcred *u, upcred_entry *e, char *line, size_t len, int64_t expires_us,
                   const char *error) {
    pthread_mutex_lock(&u->lock);
    upcred_wait *w = e->waiters;
    e->waiters = NULL;
    e->n_waiters = 0;
    e->fetching = 0;
    if (line) upcred_entry_set_line(e, line, len, expires_us);
    else upcred_entry_failed(e, error, mono_now(u), u->cfg.backoff_min_ms, u->cfg.backoff_max_ms);
    for (upcred_wait *x = w; x; x = x->next) {
        x->entry = NULL;
        if (line && !(x->auth_line = strndup(line, len))) failed(x, "%s: out of memory", u->name);
        else if (!line) failed(x, "%s", error);
    }
    pthread_mutex_unlock(&u->lock);
    if (!line && u->errors_total) u->h->metric_add(u->errors_total, 0, 1);
    while (w) {
        upcred_wait *next = w->next;
        w->notify(w);
        w = next;
    }
}

int upcred_cancel(upcred *u, upcred_wait *w) {
    int taken = 0;
    pthread_mutex_lock(&u->lock);
    upcred_entry *e = w->entry;
    for (upcred_wait **pp = e ? &e->waiters : NULL; pp && *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            e->n_waiters--;
            w->entry = NULL;
            taken = 1;
            break;
        }
    pthread_mutex_unlock(&u->lock);
    return taken;
}

void upcred_refused_key(upcred *u, const unsigned char key[32]) {
    if (!u) return;
    pthread_mutex_lock(&u->lock);
    upcred_entry *e = upcred_cache_find(&u->cache, key);
    if (e && !e->fetching && e->line) upcred_cache_drop(&u->cache, e); /* a failure stays */
    pthread_mutex_unlock(&u->lock);
}

void upcred_refused(upcred *u, const upcred_wait *w) {
    if (w->keyed) upcred_refused_key(u, w->key);
}

/* ---- keys ------------------------------------------------------------------------ */

/* SHA-256 over the parts, each followed by a 0 byte: no two lists of parts
 * give the same bytes. */
static void key_of(unsigned char out[32], const char *a, size_t an, const char *b, size_t bn) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int len = 32;
    static const unsigned char zero = 0;
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        memset(out, 0xff, 32); /* never a valid caller's key: one shared failure slot */
        EVP_MD_CTX_free(ctx);
        return;
    }
    EVP_DigestUpdate(ctx, a, an);
    EVP_DigestUpdate(ctx, &zero, 1);
    EVP_DigestUpdate(ctx, b, bn);
    EVP_DigestUpdate(ctx, &zero, 1);
    EVP_DigestFinal_ex(ctx, out, &len);
    EVP_MD_CTX_free(ctx);
}

static const char *owner_of(const mcpg_host *h, mcpg_call *call, size_t *n) {
    const char *o = MCPG_HOST_HAS(h, call_owner) ? h->call_owner(call, n) : NULL;
    if (!o) *n = 0;
    return o ? o : "";
}

void upcred_caller_key(const upcred *u, mcpg_call *call, char *out, size_t cap) {
    if (!upcred_per_caller(u) || cap < 65) {
        if (cap) out[0] = '\0';
        return;
    }
    size_t n;
    const char *owner = owner_of(u->h, call, &n);
    unsigned char k[32];
    key_of(k, owner, n, "", 0);
    mcpg_hex(k, 32, out);
    out[64] = '\0';
}

/* ---- the modes --------------------------------------------------------------------- */

/* The caller's token, exchanged: cached per caller and subject token, so a
 * caller who signs in again gets a token exchanged from the new one. */
static int exchange(upcred *u, mcpg_call *call, void *loop, upcred_wait *w) {
    const char *tok, *claims;
    size_t n, cl, on;
    if (verified_token(u, call, w, &tok, &n, &claims, &cl) != UPCRED_READY) return UPCRED_FAILED;
    const char *owner = owner_of(u->h, call, &on);
    key_of(w->key, owner, on, tok, n);
    upcred_grant g = {
        .subject_token = tok, .subject_len = n, .subject_exp_s = exp_claim(claims, cl)};
    return cached(u, loop, w, &g);
}

int upcred_begin(upcred *u, mcpg_call *call, void *loop, upcred_wait *w) {
    w->auth_line = w->error_data = NULL;
    w->failed = w->keyed = 0;
    w->entry = NULL;
    if (!call && upcred_per_caller(u))
        return failed(w, "%s: no caller to take a token from", u->name);
    switch (upcred_mode_of(u)) {
    case UPCRED_PASSTHROUGH:
        return passthrough(u, call, w);
    case UPCRED_EXCHANGE:
        return exchange(u, call, loop, w);
    case UPCRED_CLIENT_CREDENTIALS:
        key_of(w->key, "client_credentials", 18, "", 0);
        return cached(u, loop, w, &(upcred_grant){0});
    default:
        return UPCRED_READY;
    }
}

upcred_mode upcred_mode_of(const upcred *u) { return u ? u->cfg.mode : UPCRED_STATIC; }

int upcred_per_caller(const upcred *u) {
    upcred_mode m = upcred_mode_of(u);
    return m == UPCRED_PASSTHROUGH || m == UPCRED_EXCHANGE;
}

int upcred_challenge_data(const mcpg_host *h, mcpg_call *call, const char *instance, int status,
                          const char *www, size_t len, mcpg_buf *out) {
    const char *own = MCPG_HOST_HAS(h, call_challenge) ? h->call_challenge(call) : NULL;
    int rc = mcpg_buf_printf(out, "{\"reason\":\"upstream_refused\",\"upstream\":");
    if (!rc) rc = mcpg_buf_append_json_string(out, instance, strlen(instance));
    if (!rc) rc = mcpg_buf_printf(out, ",\"status\":%d", status);
    if (!rc && www) rc = mcpg_buf_puts(out, ",\"upstream_www_authenticate\":");
    if (!rc && www) rc = mcpg_buf_append_json_string(out, www, len);
    if (!rc && own) rc = mcpg_buf_puts(out, ",\"www_authenticate\":");
    if (!rc && own) rc = mcpg_buf_append_json_string(out, own, strlen(own));
    return rc ? rc : mcpg_buf_puts(out, "}");
}

/* ---- life ----------------------------------------------------------------------- */

/* RFC 6749 section 2.3.1: id and secret form-encoded, then Basic. Every
 * buffer is sized before the secret goes in (a buffer that grows leaves a
 * copy behind, unwiped) and wiped when let go of. */
static char *basic_line(const char *id, const char *secret) {
    static const char head[] = "Authorization: Basic ";
    size_t in = strlen(id), sn = strlen(secret), hn = sizeof head - 1;
    mcpg_buf raw = {0};
    char *line = NULL;
    if (!mcpg_buf_reserve(&raw, 3 * (in + sn) + 2)) {
        upcred_form_encode(&raw, id, in);
        mcpg_buf_puts(&raw, ":");
        upcred_form_encode(&raw, secret, sn);
        line = malloc(hn + 4 * (raw.len / 3 + 1) + 3);
    }
    if (line) {
        memcpy(line, head, hn);
        int n = EVP_EncodeBlock((unsigned char *)line + hn, (const unsigned char *)raw.data,
                                (int)raw.len);
        memcpy(line + hn + (size_t)n, "\r\n", 3);
    }
    if (raw.data) explicit_bzero(raw.data, raw.cap);
    mcpg_buf_free(&raw);
    return line;
}

static void add_metrics(upcred *u) {
    if (!MCPG_HOST_HAS(u->h, metric_new)) return;
    static const char *const labels[] = {"instance", "result"};
    const char *vals[] = {u->name, "hit", u->name, "miss", u->name, "wait", u->name, "backoff"};
    mcpg_metric_desc d = {.size = sizeof d,
                          .type = MCPG_METRIC_COUNTER,
                          .name = "mcpg_upstream_token_cache_total",
                          .help = "Upstream tokens found in the cache (hit), asked for (miss), "
                                  "waited for while another call asked (wait), or refused at "
                                  "once while a failed request backs off (backoff)",
                          .label_names = labels,
                          .n_labels = 2,
                          .n_series = 4,
                          .label_values = vals};
    if (u->h->metric_new(u->self, &d, &u->cache_total) != 0) u->cache_total = NULL;
    mcpg_metric_desc e = {.size = sizeof e,
                          .type = MCPG_METRIC_COUNTER,
                          .name = "mcpg_upstream_token_errors_total",
                          .help = "Token endpoint requests that brought no token",
                          .label_names = labels,
                          .n_labels = 1,
                          .n_series = 1,
                          .label_values = vals};
    if (u->h->metric_new(u->self, &e, &u->errors_total) != 0) u->errors_total = NULL;
}

static int endpoint_of(mcpg_config_problems *p, upcred *u) {
    char err[512];
    const char *secret = u->cfg.client_secret_env ? getenv(u->cfg.client_secret_env) : NULL;
    if (secret && !(u->basic = basic_line(u->cfg.client_id, secret))) {
        mcpg_config_problem(p, "credentials.client_secret_env", "out of memory");
        return -1;
    }
    if (u->cfg.private_key_file &&
        !(u->signer = upcred_signer_load(u->cfg.private_key_file, err, sizeof err))) {
        mcpg_config_problem(p, "credentials.private_key_file", "%s", err);
        return -1;
    }
    if (!(u->pools = up_loops_new())) {
        mcpg_config_problem(p, "credentials", "out of memory");
        return -1;
    }
    up_tls_opts tls = {.insecure = u->cfg.tls_insecure, .ca_file = u->cfg.ca_file};
    u->endpoint =
        up_target_new(u->cfg.token_url, &tls, (uint64_t)u->cfg.timeout_ms, err, sizeof err);
    if (!u->endpoint) mcpg_config_problem(p, "credentials.token_url", "%s", err);
    return u->endpoint ? 0 : -1;
}

upcred *upcred_new(mcpg_config_problems *p, const mcpg_host *h, mcpg_instance *self,
                   const char *json) {
    upcred_cfg c;
    if (upcred_cfg_parse(p, json, &c) || c.mode == UPCRED_STATIC) {
        upcred_cfg_free(&c);
        return NULL;
    }
    upcred *u = calloc(1, sizeof *u);
    if (!u || upcred_cache_init(&u->cache, (size_t)c.cache_entries) != 0) {
        if (u) upcred_cache_free(&u->cache);
        free(u);
        upcred_cfg_free(&c);
        mcpg_config_problem(p, "credentials", "out of memory");
        return NULL;
    }
    *u =
        (upcred){.h = h, .self = self, .name = h->instance_name(self), .cfg = c, .cache = u->cache};
    pthread_mutex_init(&u->lock, NULL);
    if (c.mode != UPCRED_PASSTHROUGH && endpoint_of(p, u) != 0) {
        upcred_free(u);
        return NULL;
    }
    add_metrics(u);
    return u;
}

void upcred_free(upcred *u) {
    if (!u) return;
    up_loops_free(u->pools);
    upcred_cache_free(&u->cache);
    up_target_free(u->endpoint);
    upcred_signer_free(u->signer);
    if (u->basic) explicit_bzero(u->basic, strlen(u->basic));
    free(u->basic);
    upcred_cfg_free(&u->cfg);
    pthread_mutex_destroy(&u->lock);
    free(u);
}
