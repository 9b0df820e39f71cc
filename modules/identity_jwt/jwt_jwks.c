/* identity_jwt: the key source, a file or a URL (see jwt_jwks.h). */
#define _GNU_SOURCE
#include "jwt_jwks.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <upclient.h>

#define NOTES_MAX 1024

struct jwt_jwks {
    const mcpg_host *h;
    mcpg_instance *self;
    jwt_jwks_cfg cfg;

    pthread_mutex_t lock;    /* guards what follows, up to `home` */
    jwt_keyset *keys;
    uint64_t gen;
    int in_flight;           /* a fetch is asked for or running */
    int stopping;            /* the home loop stopped: no more fetches */
    uint64_t last_start_us;  /* when the last counted fetch was asked for */
    jwt_waiter *waiters;
    uint32_t n_waiters;

    /* the home loop's alone */
    mcpg_worker *home;
    up_target *target;
    up_pool *pool;
    up_req *req;
    int status, over, timed_out;
    mcpg_buf body;
    mcpg_timer *deadline, *refresh;
    unsigned fails;          /* fetches failed in a row */
    mcpg_post kick;          /* a fetch asked from another thread */
};

/* ---- the key set -------------------------------------------------------- */

static void publish(jwt_jwks *j, jwt_keyset *ks) {
    pthread_mutex_lock(&j->lock);
    jwt_keyset *old = j->keys;
    j->keys = ks;
    j->gen++;
    pthread_mutex_unlock(&j->lock);
    jwt_keyset_unref(old);
}

jwt_keyset *jwt_jwks_keys(jwt_jwks *j, uint64_t *gen) {
    pthread_mutex_lock(&j->lock);
    jwt_keyset *ks = j->keys;
    if (ks) jwt_keyset_ref(ks);
    *gen = j->gen;
    pthread_mutex_unlock(&j->lock);
    return ks;
}

int jwt_jwks_is_url(const jwt_jwks *j) {
    return j->cfg.url != NULL;
}

/* Parse a JWKS text; skipped keys are logged. NULL with err. */
static jwt_keyset *parse_logged(jwt_jwks *j, const char *where, const char *text, size_t n,
                                char *err, size_t errcap) {
    jwt_keyset *ks = NULL;
    char notes[NOTES_MAX];
    if (jwt_keyset_parse(text, n, &ks, err, errcap, notes, sizeof notes) != 0) return NULL;
    if (notes[0])
        j->h->log(j->self, MCPG_LOG_WARN, "%s: keys skipped: %s", where, notes);
    return ks;
}

/* ---- a file ---------------------------------------------------------------- */

static int read_file(const char *path, mcpg_buf *out, char *err, size_t errcap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errcap, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char chunk[8192];
    size_t n;
    int rc = 0;
    while (!rc && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (out->len + n > JWT_JWKS_MAX_BYTES) {
            snprintf(err, errcap, "%s is larger than 1 MiB", path);
            rc = -1;
        } else if (mcpg_buf_append(out, chunk, n) != 0) {
            snprintf(err, errcap, "out of memory reading %s", path);
            rc = -1;
        }
    }
    if (!rc && ferror(f)) {
        snprintf(err, errcap, "cannot read %s: %s", path, strerror(errno));
        rc = -1;
    }
    fclose(f);
    return rc;
}

jwt_keyset *jwt_jwks_read_file(const char *path, char *err, size_t errcap, char *notes,
                               size_t notescap) {
    mcpg_buf text = {0};
    char why[512];
    jwt_keyset *ks = NULL;
    if (read_file(path, &text, err, errcap) == 0 &&
        jwt_keyset_parse(text.data ? text.data : "", text.len, &ks, why, sizeof why, notes,
                         notescap) != 0)
        snprintf(err, errcap, "%s: %s", path, why);
    mcpg_buf_free(&text);
    return ks;
}

static jwt_keyset *load_file(jwt_jwks *j, char *err, size_t errcap) {
    char notes[NOTES_MAX];
    jwt_keyset *ks = jwt_jwks_read_file(j->cfg.file, err, errcap, notes, sizeof notes);
    if (ks && notes[0])
        j->h->log(j->self, MCPG_LOG_WARN, "%s: keys skipped: %s", j->cfg.file, notes);
    return ks;
}

/* ---- waiters --------------------------------------------------------------- */

/* Hand every waiter back to its loop (the caller took them under the lock). */
static void release(jwt_jwks *j, jwt_waiter *list) {
    while (list) {
        jwt_waiter *w = list;
        list = w->next; /* w may be gone as soon as it is posted */
        if (j->h->worker_post(w->worker, &w->post) != 0) w->post.fn(w->post.arg);
    }
}

static jwt_waiter *take_waiters(jwt_jwks *j) {
    jwt_waiter *list = j->waiters;
    j->waiters = NULL;
    j->n_waiters = 0;
    return list;
}

/* Under the lock: may a fetch start now? Marks it started if so. */
static int claim_fetch(jwt_jwks *j, int counted) {
    if (j->stopping || j->in_flight) return 0;
    j->in_flight = 1;
    if (counted) j->last_start_us = j->h->mono_us();
    return 1;
}

/* ---- fetching (on the home loop) ------------------------------------------- */

static void start_fetch(jwt_jwks *j);

static void on_refresh(void *arg) {
    jwt_jwks *j = arg;
    j->h->timer_stop(j->refresh);
    j->refresh = NULL;
    pthread_mutex_lock(&j->lock);
    int go = claim_fetch(j, 0);
    pthread_mutex_unlock(&j->lock);
    if (go) start_fetch(j);
}

/* The next periodic fetch: refresh_ms after a success, sooner after a
 * failure so a source that was down is soon used again. */
static void schedule(jwt_jwks *j) {
    uint64_t ms = j->cfg.refresh_ms;
    if (j->fails) {
        unsigned shift = j->fails - 1 < 16 ? j->fails - 1 : 16;
        uint64_t backoff = j->cfg.min_refresh_ms << shift;
        if (backoff < ms) ms = backoff;
    }
    if (j->refresh) j->h->timer_stop(j->refresh);
    j->refresh = NULL;
    if (j->h->timer_start(j->self, j->home, ms, 0, on_refresh, j, &j->refresh) != 0)
        j->refresh = NULL;
}

static int is_stopping(jwt_jwks *j) {
    pthread_mutex_lock(&j->lock);
    int stopping = j->stopping;
    pthread_mutex_unlock(&j->lock);
    return stopping;
}

static void log_failure(jwt_jwks *j, const char *why) {
    uint64_t gen;
    jwt_keyset *cur = jwt_jwks_keys(j, &gen);
    j->h->log(j->self, MCPG_LOG_WARN, "JWKS %s: %s; %s", j->cfg.url, why,
              cur ? "the keys fetched before stay in use"
                  : "no keys yet: tokens are refused (503) until a fetch succeeds");
    jwt_keyset_unref(cur);
}

static void finish(jwt_jwks *j, jwt_keyset *ks, const char *why) {
    mcpg_buf_free(&j->body);
    int stopping = is_stopping(j); /* then the fetch was cut short on purpose */
    if (ks) {
        if (j->fails)
            j->h->log(j->self, MCPG_LOG_INFO, "JWKS %s: reachable again", j->cfg.url);
        j->h->log(j->self, MCPG_LOG_INFO, "JWKS %s: %zu signing key(s)", j->cfg.url, ks->n);
        j->fails = 0;
        publish(j, ks);
    } else if (!stopping) {
        j->fails++;
        log_failure(j, why);
    }
    pthread_mutex_lock(&j->lock);
    j->in_flight = 0;
    jwt_waiter *list = take_waiters(j);
    pthread_mutex_unlock(&j->lock);
    if (!stopping) schedule(j);
    release(j, list);
}

static int on_head(void *arg, int status, const up_header *hd, size_t n) {
    jwt_jwks *j = arg;
    j->status = status;
    return 0;
}

static int on_body(void *arg, const char *p, size_t n) {
    jwt_jwks *j = arg;
    if (j->body.len + n > JWT_JWKS_MAX_BYTES) return j->over = 1;
    return mcpg_buf_append(&j->body, p, n) != 0;
}

static void on_done(void *arg, int err) {
    jwt_jwks *j = arg;
    char why[600];
    jwt_keyset *ks = NULL;
    if (j->deadline) j->h->timer_stop(j->deadline);
    j->deadline = NULL;
    if (j->timed_out)
        snprintf(why, sizeof why, "no answer within %llu ms", (unsigned long long)j->cfg.timeout_ms);
    else if (j->over)
        snprintf(why, sizeof why, "the answer is larger than 1 MiB");
    else if (err)
        snprintf(why, sizeof why, "unreachable (%s)", up_req_error_detail(j->req));
    else if (j->status != 200)
        snprintf(why, sizeof why, "answered HTTP %d", j->status);
    else
        ks = parse_logged(j, j->cfg.url, j->body.data ? j->body.data : "", j->body.len, why,
                          sizeof why);
    j->req = NULL;
    finish(j, ks, why);
}

static const up_callbacks CALLBACKS = {on_head, on_body, on_done};

static void on_deadline(void *arg) {
    jwt_jwks *j = arg;
    j->h->timer_stop(j->deadline);
    j->deadline = NULL;
    j->timed_out = 1;
    if (j->req) up_req_abort(j->req); /* its on_done finishes the fetch */
}

static void start_fetch(jwt_jwks *j) {
    j->status = j->over = j->timed_out = 0;
    if (!j->pool) j->pool = up_pool_new(j->h->worker_uv_loop(j->home), j->target, 1, 1, 4);
    if (j->pool)
        j->req = up_send(j->pool, "GET", up_target_path(j->target),
                         "Accept: application/json\r\n", NULL, 0, 1, &CALLBACKS, j);
    if (!j->req) return finish(j, NULL, "out of memory");
    if (j->h->timer_start(j->self, j->home, j->cfg.timeout_ms, 0, on_deadline, j,
                          &j->deadline) != 0)
        j->deadline = NULL;
}

static void on_kick(void *arg) {
    jwt_jwks *j = arg;
    if (!is_stopping(j)) start_fetch(j); /* in_flight was set by whoever posted */
}

/* Any thread, the lock not held: a fetch was claimed; run it on the home loop. */
static void kick(jwt_jwks *j) {
    if (j->h->worker_post(j->home, &j->kick) == 0) return;
    pthread_mutex_lock(&j->lock);
    j->in_flight = 0;
    jwt_waiter *list = take_waiters(j);
    pthread_mutex_unlock(&j->lock);
    release(j, list);
}

jwt_wait jwt_jwks_wait(jwt_jwks *j, jwt_waiter *w, uint64_t *retry_after_ms) {
    if (!j->cfg.url) return JWT_WAIT_NONE;
    *retry_after_ms = j->cfg.min_refresh_ms;
    pthread_mutex_lock(&j->lock);
    jwt_wait r = JWT_WAIT_QUEUED;
    int started = 0;
    uint64_t since = (j->h->mono_us() - j->last_start_us) / 1000;
    if (j->stopping) {
        r = JWT_WAIT_NONE;
    } else if (j->n_waiters >= j->cfg.max_waiters) {
        r = JWT_WAIT_FULL;
    } else if (!j->in_flight && j->last_start_us && since < j->cfg.min_refresh_ms) {
        r = JWT_WAIT_TOO_SOON;
        *retry_after_ms = j->cfg.min_refresh_ms - since;
    } else {
        started = claim_fetch(j, 1);
        w->next = j->waiters;
        j->waiters = w;
        j->n_waiters++;
    }
    pthread_mutex_unlock(&j->lock);
    if (started) kick(j);
    return r;
}

/* ---- lifecycle -------------------------------------------------------------- */

jwt_jwks *jwt_jwks_new(const mcpg_host *h, mcpg_instance *self, const jwt_jwks_cfg *c,
                       char *err, size_t errcap) {
    jwt_jwks *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    j->h = h;
    j->self = self;
    j->cfg = *c;
    pthread_mutex_init(&j->lock, NULL);
    j->kick = (mcpg_post){NULL, on_kick, j};
    j->home = h->worker_at(0);
    if (c->file) {
        jwt_keyset *ks = load_file(j, err, errcap);
        if (!ks) {
            jwt_jwks_free(j);
            return NULL;
        }
        publish(j, ks);
        return j;
    }
    up_tls_opts tls = {.insecure = c->tls_insecure, .ca_file = c->ca_file};
    if (!(j->target = up_target_new(c->url, &tls, c->timeout_ms, err, errcap))) {
        jwt_jwks_free(j);
        return NULL;
    }
    return j;
}

void jwt_jwks_free(jwt_jwks *j) {
    if (!j) return;
    jwt_keyset_unref(j->keys);
    mcpg_buf_free(&j->body);
    if (j->target) up_target_free(j->target);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

void jwt_jwks_worker_start(jwt_jwks *j, mcpg_worker *w) {
    if (!j->cfg.url || w != j->home) return;
    pthread_mutex_lock(&j->lock);
    int go = claim_fetch(j, 0);
    pthread_mutex_unlock(&j->lock);
    if (go) start_fetch(j);
}

void jwt_jwks_worker_stop(jwt_jwks *j, mcpg_worker *w) {
    if (!j->cfg.url || w != j->home) return;
    pthread_mutex_lock(&j->lock);
    j->stopping = 1;
    pthread_mutex_unlock(&j->lock);
    if (j->refresh) j->h->timer_stop(j->refresh);
    j->refresh = NULL;
    if (j->pool) up_pool_close(j->pool); /* a fetch running ends: its waiters go home */
    j->pool = NULL;
    pthread_mutex_lock(&j->lock);
    jwt_waiter *list = take_waiters(j); /* those whose fetch never started */
    pthread_mutex_unlock(&j->lock);
    release(j, list);
}

void jwt_jwks_reloaded(jwt_jwks *j) {
    if (j->cfg.file) {
        char err[800];
        jwt_keyset *ks = load_file(j, err, sizeof err);
        if (!ks) {
            j->h->log(j->self, MCPG_LOG_ERROR, "reload: %s; the keys read before stay in use",
                      err);
            return;
        }
        j->h->log(j->self, MCPG_LOG_INFO, "reload: %s: %zu signing key(s)", j->cfg.file, ks->n);
        return publish(j, ks);
    }
    pthread_mutex_lock(&j->lock);
    int go = claim_fetch(j, 0);
    pthread_mutex_unlock(&j->lock);
    if (go) kick(j);
}
