/* The exporter's thread: it takes up to batch_spans spans from the queue
 * when that many wait or flush_ms has passed, and POSTs them to the
 * collector. A connection error, a 5xx or a 429 is tried again after a
 * backoff that doubles (backoff_ms, then twice that, ...), max_attempts in
 * all; then the batch is dropped and counted. Any other answer ends the
 * batch (a 4xx will not get better by sending it again). Blocking sockets
 * with timeouts: only this thread ever waits on the collector. One
 * connection is kept open from POST to POST while the collector allows it.
 * http only. */
#define _GNU_SOURCE /* strcasestr */
#include "otlp.h"

#include <errno.h>
#include <stdint.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int otlp_url_parse(const char *s, otlp_url *u, char *err, size_t errcap) {
    static const char scheme[] = "http://";
    if (strncmp(s, scheme, sizeof scheme - 1) != 0) {
        snprintf(err, errcap, "\"%s\" is not an http:// URL (https is not supported yet)", s);
        return -1;
    }
    const char *host = s + sizeof scheme - 1, *slash = strchr(host, '/');
    const char *end = slash ? slash : host + strlen(host), *colon = memchr(host, ':', (size_t)(end - host));
    const char *host_end = colon ? colon : end;
    if (host_end == host || (size_t)(host_end - host) >= sizeof u->host ||
        (colon && ((size_t)(end - colon - 1) >= sizeof u->port || end == colon + 1)) ||
        (slash && strlen(slash) >= sizeof u->path)) {
        snprintf(err, errcap, "\"%s\" has no usable host, port or path", s);
        return -1;
    }
    snprintf(u->host, sizeof u->host, "%.*s", (int)(host_end - host), host);
    snprintf(u->port, sizeof u->port, "%.*s", colon ? (int)(end - colon - 1) : 2, colon ? colon + 1 : "80");
    snprintf(u->path, sizeof u->path, "%s", slash ? slash : "/v1/traces");
    return 0;
}

void otlp_count_dropped(otlp *o, int reason, size_t n) {
    if (o->dropped) o->host->metric_add(o->dropped, (uint32_t)reason, (int64_t)n);
}

/* ---- one POST ---- */

static int connect_to(const otlp *o) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(o->url.host, o->url.port, &hints, &res) != 0) return -1;
    int fd = -1;
    struct timeval tv = {.tv_sec = o->cfg->timeout_ms / 1000,
                         .tv_usec = (o->cfg->timeout_ms % 1000) * 1000};
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* What the head of an answer says about reading its body and keeping the
 * connection. */
typedef struct answer_head {
    long length;  /* Content-Length, or -1 */
    bool chunked; /* Transfer-Encoding: chunked (read to its last chunk) */
    bool closes;  /* Connection: close, or neither length nor chunks: read to the close */
} answer_head;

static answer_head head_of(const char *head) {
    const char *cl = strcasestr(head, "\r\ncontent-length:");
    answer_head a = {.length = cl ? strtol(cl + 17, NULL, 10) : -1,
                     .chunked = strcasestr(head, "\r\ntransfer-encoding: chunked") != NULL};
    bool http10 = strncmp(head, "HTTP/1.0", 8) == 0; /* closes unless it says keep-alive */
    a.closes = strcasestr(head, "\r\nconnection: close") != NULL || (a.length < 0 && !a.chunked) ||
               (http10 && !strcasestr(head, "\r\nconnection: keep-alive"));
    return a;
}

/* A chunked body ends with the zero-size chunk and its blank line. */
static bool chunks_ended(const char *tail, size_t n) {
    static const char end[] = "0\r\n\r\n";
    return n >= sizeof end - 1 && memcmp(tail + n - (sizeof end - 1), end, sizeof end - 1) == 0;
}

/* The status line's code (0: no answer). The answer is read to the end of
 * its body (by Content-Length, to its last chunk, else to the close), so
 * the collector is never cut off mid-answer and the connection can carry
 * the next POST; only its head is kept. *reusable: the connection may. */
static int read_status(int fd, bool *reusable) {
    char buf[4096], tail[8];
    size_t got = 0, body_seen = 0, tail_n = 0;
    const char *end = NULL;
    answer_head a = {.length = -1, .closes = true};
    bool whole = false;
    for (;;) {
        if (end && ((a.length >= 0 && body_seen >= (size_t)a.length) ||
                    (a.chunked && chunks_ended(tail, tail_n)))) {
            whole = true;
            break;
        }
        char *at = end ? buf + sizeof buf / 2 : buf + got; /* past the head: scratch */
        size_t room = end ? sizeof buf / 2 : sizeof buf - 1 - got;
        if (!room) break; /* a head this long is no answer we read */
        ssize_t r = recv(fd, at, room, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (!end) {
            got += (size_t)r;
            buf[got] = '\0';
            if ((end = strstr(buf, "\r\n\r\n")) == NULL) continue;
            a = head_of(buf);
            at = (char *)end + 4;
            r = (ssize_t)(got - (size_t)(end + 4 - buf));
        }
        body_seen += (size_t)r;
        /* the last bytes seen, for the chunked body's end */
        size_t keep = (size_t)r >= sizeof tail ? sizeof tail : (size_t)r;
        if (tail_n + keep > sizeof tail) {
            size_t drop = tail_n + keep - sizeof tail;
            memmove(tail, tail + drop, tail_n - drop);
            tail_n -= drop;
        }
        memcpy(tail + tail_n, at + r - keep, keep);
        tail_n += keep;
    }
    *reusable = whole && !a.closes;
    buf[end ? (size_t)(end - buf) : got] = '\0';
    int status = 0;
    return sscanf(buf, "HTTP/1.%*d %d", &status) == 1 ? status : 0;
}

static void drop_connection(otlp *o) {
    if (o->conn >= 0) close(o->conn);
    o->conn = -1;
}

static bool send_request(const otlp *o, int fd, const mcpg_buf *body) {
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     o->url.path, o->url.host, o->url.port,
                     o->json ? "application/json" : "application/x-protobuf", body->len);
    return send_all(fd, head, (size_t)n) == 0 && send_all(fd, body->data, body->len) == 0;
}

/* One attempt: the HTTP status, or 0 when no answer came. The connection
 * stays open for the next POST while the collector keeps it; one it closed
 * while idle is opened again at once, not counted as an attempt. */
static int post_once(otlp *o, const mcpg_buf *body) {
    for (int fresh = 0; fresh < 2; fresh++) {
        bool reused = o->conn >= 0;
        if (!reused && (o->conn = connect_to(o)) < 0) return 0;
        bool reusable = false;
        int status = send_request(o, o->conn, body) ? read_status(o->conn, &reusable) : 0;
        if (!reusable) drop_connection(o);
        if (status || !reused) return status;
    }
    return 0;
}

static bool worth_retrying(int status) { return status == 0 || status == 429 || status >= 500; }

/* Wait up to ms, or until stop, or until `enough` spans are queued: false
 * once stopping. Under mu. */
static bool wait_ms(otlp *o, int64_t ms, size_t enough) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    while (!o->stopping && o->count < enough &&
           pthread_cond_timedwait(&o->wake, &o->mu, &until) != ETIMEDOUT) {
    }
    return !o->stopping;
}

/* POST with retries: true when the collector took it (2xx). */
static bool post(otlp *o, const mcpg_buf *body) {
    int64_t backoff = o->cfg->backoff_ms;
    for (int64_t attempt = 1;; attempt++) {
        int status = post_once(o, body);
        if (status >= 200 && status < 300) return true;
        if (!worth_retrying(status) || attempt >= o->cfg->max_attempts) {
            o->host->log(o->self, MCPG_LOG_WARN, "%s:%s%s: %s after %lld attempt(s): spans dropped",
                         o->url.host, o->url.port, o->url.path,
                         status ? "answered an error" : "no answer", (long long)attempt);
            return false;
        }
        pthread_mutex_lock(&o->mu);
        bool go_on = wait_ms(o, backoff, SIZE_MAX);
        pthread_mutex_unlock(&o->mu);
        if (!go_on) return false;
        backoff *= 2;
    }
}

/* ---- the batches ---- */

/* Up to batch_spans spans out of the queue into batch. Under mu. */
static size_t take_batch(otlp *o, otlp_blob **batch) {
    size_t cap = (size_t)o->cfg->queue_spans, n = 0;
    while (o->count && n < (size_t)o->cfg->batch_spans) {
        batch[n++] = o->ring[o->head];
        o->head = (o->head + 1) % cap;
        o->count--;
    }
    return n;
}

/* False when the batch was dropped. */
static bool send_batch(otlp *o, otlp_blob **batch, size_t n) {
    mcpg_buf body = {0};
    bool ok = otlp_encode_request(o, batch, n, &body) == 0 && post(o, &body);
    mcpg_buf_free(&body);
    if (ok && o->exported) o->host->metric_add(o->exported, 0, (int64_t)n);
    if (!ok) otlp_count_dropped(o, OTLP_DROP_EXPORT_FAILED, n);
    for (size_t i = 0; i < n; i++) free(batch[i]);
    return ok;
}

size_t otlp_queue_clear(otlp *o) {
    size_t cap = (size_t)o->cfg->queue_spans, n = o->count;
    for (; o->count; o->count--, o->head = (o->head + 1) % cap) free(o->ring[o->head]);
    return n;
}

void *otlp_thread(void *arg) {
    otlp *o = arg;
    size_t per_batch = (size_t)o->cfg->batch_spans;
    otlp_blob **batch = calloc(per_batch, sizeof *batch);
    if (!batch) return NULL;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        wait_ms(o, o->cfg->flush_ms, per_batch);
        size_t n = take_batch(o, batch);
        bool last = o->stopping;
        pthread_mutex_unlock(&o->mu);
        bool sent = !n || send_batch(o, batch, n); /* at stop: one try per batch */
        pthread_mutex_lock(&o->mu);
        if (last && !sent) /* the rest would wait as long: dropped */
            otlp_count_dropped(o, OTLP_DROP_EXPORT_FAILED, otlp_queue_clear(o));
        if (last && !o->count) break;
    }
    pthread_mutex_unlock(&o->mu);
    drop_connection(o);
    free(batch);
    return NULL;
}
