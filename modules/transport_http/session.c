/* transport_http: the single-node session table (see session.h). */
#include "session.h"

#include <mcpg/sdk.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>


int th_sess_init(th_sess_store *s, const mcpg_host *h, uint32_t max, uint64_t ttl_ms) {
    memset(s, 0, sizeof *s);
    s->host = h;
    s->max = max;
    s->ttl_ms = ttl_ms;
    return pthread_mutex_init(&s->mu, NULL) ? MCPG_ENOMEM : 0;
}

static void row_free(const mcpg_host *h, th_sess_row *r) {
    for (uint32_t i = 0; i < r->nsubs; i++) h->free(r->subs[i]);
    h->free(r->caps);
    h->free(r);
}

void th_sess_fini(th_sess_store *s) {
    for (uint32_t i = 0; i < s->n; i++) row_free(s->host, s->rows[i]);
    s->host->free(s->rows);
    pthread_mutex_destroy(&s->mu);
}

/* Under the lock. */
static th_sess_row *find(th_sess_store *s, const char *id, size_t n, uint32_t *at) {
    if (n != TH_SID_LEN) return NULL;
    for (uint32_t i = 0; i < s->n; i++)
        if (!memcmp(s->rows[i]->id, id, TH_SID_LEN)) {
            if (at) *at = i;
            return s->rows[i];
        }
    return NULL;
}

static int new_id(char out[TH_SID_LEN + 1]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char b[TH_SID_LEN / 2];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t k = getrandom(b + got, sizeof b - got, 0);
        if (k <= 0) return MCPG_EIO;
        got += (size_t)k;
    }
    for (size_t i = 0; i < sizeof b; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[TH_SID_LEN] = '\0';
    return 0;
}

int th_sess_create(th_sess_store *s, const char *version, const char *caps, size_t caps_len,
                   char id_out[TH_SID_LEN + 1]) {
    const mcpg_host *h = s->host;
    if (caps_len > TH_SESS_CAPS_MAX) caps_len = 0, caps = NULL; /* kept bounded; "{}" then */
    th_sess_row *r = h->calloc(1, sizeof *r);
    if (!r) return MCPG_ENOMEM;
    if (new_id(r->id)) {
        h->free(r);
        return MCPG_EIO;
    }
    snprintf(r->version, sizeof r->version, "%s", version);
    r->level = -1;
    if (caps && caps_len && (r->caps = h->alloc(caps_len + 1))) {
        memcpy(r->caps, caps, caps_len);
        r->caps[caps_len] = '\0';
        r->caps_len = caps_len;
    }
    r->created_ms = r->used_ms = h->mono_us() / 1000;
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    if (s->n >= s->max) {
        rc = MCPG_EAGAIN;
    } else {
        th_sess_row **rows = h->realloc(s->rows, (s->n + 1) * sizeof *rows);
        if (!rows) rc = MCPG_ENOMEM;
        else (s->rows = rows)[s->n++] = r;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc) row_free(h, r);
    else memcpy(id_out, r->id, TH_SID_LEN + 1);
    return rc;
}

int th_sess_touch(th_sess_store *s, const char *id, size_t n, th_sess_view *view) {
    pthread_mutex_lock(&s->mu);
    th_sess_row *r = find(s, id, n, NULL);
    if (r) {
        r->used_ms = s->host->mono_us() / 1000;
        memcpy(view->id, r->id, sizeof view->id);
        memcpy(view->version, r->version, sizeof view->version);
        view->level = r->level;
    }
    pthread_mutex_unlock(&s->mu);
    return r ? 0 : MCPG_ENOENT;
}

int th_sess_caps(th_sess_store *s, const char *id, size_t n, mcpg_buf *b) {
    pthread_mutex_lock(&s->mu);
    th_sess_row *r = find(s, id, n, NULL);
    int rc = r ? 0 : MCPG_ENOENT;
    b->len = 0;
    if (r && s->host->buf_append(b, r->caps ? r->caps : "{}", r->caps ? r->caps_len : 2))
        rc = MCPG_ENOMEM;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int th_sess_end(th_sess_store *s, const char *id, size_t n) {
    pthread_mutex_lock(&s->mu);
    uint32_t at = 0;
    th_sess_row *r = find(s, id, n, &at);
    if (r) s->rows[at] = s->rows[--s->n];
    pthread_mutex_unlock(&s->mu);
    if (r) row_free(s->host, r);
    return r ? 0 : MCPG_ENOENT;
}

int th_sess_set_level(th_sess_store *s, const char *id, size_t n, int level) {
    pthread_mutex_lock(&s->mu);
    th_sess_row *r = find(s, id, n, NULL);
    if (r) r->level = level;
    pthread_mutex_unlock(&s->mu);
    return r ? 0 : MCPG_ENOENT;
}

static int sub_index(const th_sess_row *r, const char *uri, size_t un) {
    for (uint32_t i = 0; i < r->nsubs; i++)
        if (strlen(r->subs[i]) == un && !memcmp(r->subs[i], uri, un)) return (int)i;
    return -1;
}

int th_sess_subscribe(th_sess_store *s, const char *id, size_t n, const char *uri, size_t un, int on) {
    const mcpg_host *h = s->host;
    char *copy = on ? h->alloc(un + 1) : NULL;
    if (on && !copy) return MCPG_ENOMEM;
    if (copy) memcpy(copy, uri, un), copy[un] = '\0';
    pthread_mutex_lock(&s->mu);
    th_sess_row *r = find(s, id, n, NULL);
    int rc = MCPG_ENOENT, at = r ? sub_index(r, uri, un) : -1;
    char *drop = copy;
    if (r && on) {
        rc = at >= 0 ? 0 : r->nsubs >= TH_SESS_MAX_SUBS ? MCPG_EAGAIN : 1;
        if (rc == 1) r->subs[r->nsubs++] = copy, drop = NULL;
    } else if (r) {
        rc = at >= 0;
        if (at >= 0) drop = r->subs[at], r->subs[at] = r->subs[--r->nsubs];
    }
    pthread_mutex_unlock(&s->mu);
    h->free(drop);
    return rc;
}

int th_sess_subscribed(th_sess_store *s, const char *id, size_t n, const char *uri, size_t un) {
    pthread_mutex_lock(&s->mu);
    th_sess_row *r = find(s, id, n, NULL);
    int yes = r && sub_index(r, uri, un) >= 0;
    pthread_mutex_unlock(&s->mu);
    return yes;
}

int th_sess_get_open(th_sess_store *s, const char *id, size_t n, int open) {
    pthread_mutex_lock(&s->mu);
    th_sess_row *r = find(s, id, n, NULL);
    int rc = r ? 0 : MCPG_ENOENT;
    if (r && open && r->get_open) rc = MCPG_EEXIST;
    else if (r) r->get_open = open;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void th_sess_sweep(th_sess_store *s, uint64_t now_ms) {
    th_sess_row *gone[64];
    uint32_t ng = 0;
    pthread_mutex_lock(&s->mu);
    for (uint32_t i = 0; i < s->n && ng < 64;) {
        th_sess_row *r = s->rows[i];
        if (!r->get_open && now_ms - r->used_ms >= s->ttl_ms) {
            gone[ng++] = r;
            s->rows[i] = s->rows[--s->n];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    for (uint32_t i = 0; i < ng; i++) row_free(s->host, gone[i]); /* freed outside the lock */
}
