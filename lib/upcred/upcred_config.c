/* upcred: the "credentials" object, parsed and checked once; every problem
 * named by its key under "credentials". */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "upcred_internal.h"

#define TT_ACCESS "urn:ietf:params:oauth:token-type:access_token"
#define TT_JWT "urn:ietf:params:oauth:token-type:jwt"

static const char *const MODES[] = {"static", "passthrough", "exchange", "client_credentials"};
static const char *const KEYS[] = {"mode",
                                   "audience",
                                   "scope",
                                   "resource",
                                   "token_url",
                                   "client_id",
                                   "client_secret_env",
                                   "subject_token_type",
                                   "requested_token_type",
                                   "private_key_file",
                                   "key_id",
                                   "ca_file",
                                   "tls_insecure",
                                   "refresh_margin_s",
                                   "timeout_ms",
                                   "cache_entries",
                                   "backoff_min_ms",
                                   "backoff_max_ms"};
#define NKEYS (sizeof KEYS / sizeof *KEYS)

static void problem_at(mcpg_config_problems *p, const char *key, const char *what) {
    char path[64];
    snprintf(path, sizeof path, "credentials.%s", key);
    mcpg_config_problem(p, path, "%s", what);
}

/* A string member, copied (NULL when absent); a wrong type is a problem. */
static char *string_of(mcpg_config_problems *p, json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    if (!v) return NULL;
    if (!json_is_string(v) || !json_string_length(v)) {
        problem_at(p, key, "must be a non-empty string");
        return NULL;
    }
    return strdup(json_string_value(v));
}

static int64_t int_of(mcpg_config_problems *p, json_t *o, const char *key, int64_t dflt,
                      int64_t min, int64_t max) {
    json_t *v = json_object_get(o, key);
    if (!v) return dflt;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        char what[96];
        snprintf(what, sizeof what, "must be an integer from %lld to %lld", (long long)min,
                 (long long)max);
        problem_at(p, key, what);
        return dflt;
    }
    return json_integer_value(v);
}

static void unknown_keys(mcpg_config_problems *p, json_t *o) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        size_t i = 0;
        while (i < NKEYS && strcmp(KEYS[i], k) != 0) i++;
        if (i == NKEYS) mcpg_config_unknown_key(p, "credentials", k, KEYS, NKEYS);
    }
}

static void parse_mode(mcpg_config_problems *p, json_t *o, upcred_cfg *c) {
    char *m = string_of(p, o, "mode");
    c->mode = UPCRED_STATIC;
    if (m) {
        size_t i = 0;
        while (i < 4 && strcmp(MODES[i], m) != 0) i++;
        if (i == 4)
            problem_at(p, "mode", "must be static, passthrough, exchange or client_credentials");
        else c->mode = (upcred_mode)i;
    }
    free(m);
}

static void parse_token_type(mcpg_config_problems *p, json_t *o, upcred_cfg *c) {
    char *t = string_of(p, o, "subject_token_type");
    if (!t || strcmp(t, "access_token") == 0 || strcmp(t, TT_ACCESS) == 0)
        c->subject_token_type = strdup(TT_ACCESS);
    else if (strcmp(t, "jwt") == 0 || strcmp(t, TT_JWT) == 0)
        c->subject_token_type = strdup(TT_JWT);
    else problem_at(p, "subject_token_type", "must be access_token or jwt");
    free(t);
    c->requested_token_type = string_of(p, o, "requested_token_type");
    if (!c->requested_token_type && c->mode == UPCRED_EXCHANGE)
        c->requested_token_type = strdup(TT_ACCESS);
}

/* The wait after a failed token request: from min, doubling up to max. */
static void parse_backoff(mcpg_config_problems *p, json_t *o, upcred_cfg *c) {
    c->backoff_min_ms =
        int_of(p, o, "backoff_min_ms", c->backoff_min_ms, 0, UPCRED_BACKOFF_LIMIT_MS);
    c->backoff_max_ms =
        int_of(p, o, "backoff_max_ms", c->backoff_max_ms, 0, UPCRED_BACKOFF_LIMIT_MS);
    if (c->backoff_max_ms < c->backoff_min_ms)
        problem_at(p, "backoff_max_ms", "must not be less than backoff_min_ms");
}

static void require(mcpg_config_problems *p, const char *key, const char *v, const char *mode) {
    char what[96];
    snprintf(what, sizeof what, "is required with mode %s", mode);
    if (!v) problem_at(p, key, what);
}

/* One way for the client to authenticate; a key the gateway can sign with. */
static void check_private_key(mcpg_config_problems *p, const upcred_cfg *c) {
    if (!c->private_key_file) return;
    if (c->client_secret_env)
        problem_at(p, "private_key_file", "give private_key_file or client_secret_env, not both");
    char err[300];
    upcred_signer *s = upcred_signer_load(c->private_key_file, err, sizeof err);
    if (!s) problem_at(p, "private_key_file", err);
    upcred_signer_free(s);
}

/* What each mode needs, and what it would leave unused. */
static void check_mode(mcpg_config_problems *p, const upcred_cfg *c) {
    const char *mode = MODES[c->mode];
    if (c->mode == UPCRED_STATIC) return;
    if (c->mode == UPCRED_PASSTHROUGH || c->mode == UPCRED_EXCHANGE)
        require(p, "audience", c->audience, mode);
    if (c->mode == UPCRED_PASSTHROUGH) {
        if (c->token_url) problem_at(p, "token_url", "is not used with mode passthrough");
        return;
    }
    require(p, "token_url", c->token_url, mode);
    require(p, "client_id", c->client_id, mode);
    char err[256];
    if (c->token_url && up_url_check(c->token_url, err, sizeof err) != 0)
        problem_at(p, "token_url", err);
    check_private_key(p, c);
    const char *secret = c->client_secret_env ? getenv(c->client_secret_env) : NULL;
    if (c->client_secret_env && (!secret || !*secret)) {
        char what[160];
        snprintf(what, sizeof what, "names %.100s, which is not set in the gateway's environment",
                 c->client_secret_env);
        problem_at(p, "client_secret_env", what);
    }
}

int upcred_cfg_parse(mcpg_config_problems *p, const char *json, upcred_cfg *c) {
    *c = (upcred_cfg){.refresh_margin_s = UPCRED_MARGIN_DEFAULT_S,
                      .timeout_ms = UPCRED_TIMEOUT_DEFAULT_MS,
                      .cache_entries = UPCRED_CACHE_DEFAULT,
                      .backoff_min_ms = UPCRED_BACKOFF_MIN_DEFAULT_MS,
                      .backoff_max_ms = UPCRED_BACKOFF_MAX_DEFAULT_MS};
    int before = p->errors;
    if (!json) return 0;
    json_error_t e;
    json_t *o = json_loads(json, 0, &e);
    if (!json_is_object(o)) {
        mcpg_config_problem(p, "credentials", "must be an object");
        json_decref(o);
        return p->errors - before;
    }
    unknown_keys(p, o);
    parse_mode(p, o, c);
    c->audience = string_of(p, o, "audience");
    c->scope = string_of(p, o, "scope");
    c->resource = string_of(p, o, "resource");
    c->token_url = string_of(p, o, "token_url");
    c->client_id = string_of(p, o, "client_id");
    c->client_secret_env = string_of(p, o, "client_secret_env");
    c->ca_file = string_of(p, o, "ca_file");
    c->private_key_file = string_of(p, o, "private_key_file");
    c->key_id = string_of(p, o, "key_id");
    json_t *ins = json_object_get(o, "tls_insecure");
    if (ins && !json_is_boolean(ins)) problem_at(p, "tls_insecure", "must be true or false");
    c->tls_insecure = json_is_true(ins);
    parse_token_type(p, o, c);
    c->refresh_margin_s = int_of(p, o, "refresh_margin_s", c->refresh_margin_s, 0, 3600);
    c->timeout_ms = int_of(p, o, "timeout_ms", c->timeout_ms, 100, 120000);
    c->cache_entries = int_of(p, o, "cache_entries", c->cache_entries, 1, UPCRED_CACHE_MAX);
    parse_backoff(p, o, c);
    check_mode(p, c);
    json_decref(o);
    return p->errors - before;
}

void upcred_cfg_free(upcred_cfg *c) {
    free(c->audience);
    free(c->scope);
    free(c->resource);
    free(c->token_url);
    free(c->client_id);
    free(c->client_secret_env);
    free(c->subject_token_type);
    free(c->requested_token_type);
    free(c->ca_file);
    free(c->private_key_file);
    free(c->key_id);
    *c = (upcred_cfg){0};
}

int upcred_check(mcpg_config_problems *p, const char *json, upcred_mode *mode) {
    upcred_cfg c;
    int n = upcred_cfg_parse(p, json, &c);
    *mode = c.mode;
    upcred_cfg_free(&c);
    return n;
}
