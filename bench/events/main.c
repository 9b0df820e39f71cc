/* mcpg-events-load: --streams events/stream readers and ceil(--rate / 100)
 * producers posting signed events, every delivery judged (bench/README.md).
 *
 * One libuv loop. The streams connect first (stream i to URL i % n) and the
 * producers start once every stream has said notifications/events/active.
 * Producer i (on URL i % n) posts event n = 0, 1, 2 ... (id "p<i>-<n>-<run>",
 * run: the run's start time in hex, so no run's ids are an earlier one's) each when the last
 * was answered and its pace (rate / producers a second, producer i offset by
 * i / rate) allows; a post not answered 202 {"status":"accepted"} (or
 * "duplicate") is refused, counted by status, and the same event is posted
 * again at the next due time, so each producer's accepted events are 0..k
 * without holes. Each stream judges, per producer, that n goes up by one
 * (ev_seq_judge) and records now - data.t. Events posted during the warm-up
 * are judged but not counted. After the measured window no post is sent;
 * once the last is answered the streams have 3 s (--drain) to hear the rest.
 *
 * A stream that ends or fails while the run goes on reconnects to the next
 * URL with the cursor of the last message it heard (a replica killed:
 * bench/events.py --kill-owner); a producer whose connection fails goes to
 * the next URL too.
 *
 * stderr: a progress line a second, and two markers for scripts that
 * measure around the window: "mcpg-events-load: @measure" when it starts and
 * "mcpg-events-load: @drained" when the drain ends. stdout: one JSON line. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "events.h"

#define EV_MAX_URLS 8u
#define EV_MAX_STREAMS 4096u
#define EV_MAX_PRODUCERS 1024u
#define EV_PER_PRODUCER 100.0
#define EV_RBUF_INITIAL 65536u
#define EV_RBUF_MAX (16u << 20)
#define EV_TICK_MS 50u
#define EV_RETRY_NS 200000000ull
#define EV_SAMPLES 8u

typedef struct ev_run ev_run;
typedef enum { C_CLOSED, C_CONNECTING, C_OPEN, C_CLOSING } conn_state;

/* What both kinds of connection share: a socket, a read buffer, framing. */
typedef struct {
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    conn_state state;
    unsigned target;
    bool writing;
    char *rbuf;
    size_t rlen, rcap;
    load_resp resp;
    uint64_t retry_at_ns; /* closed, waiting to reconnect (0: not waiting) */
} ev_conn;

typedef struct {
    ev_conn c;
    ev_run *run;
    unsigned idx;
    bool head;       /* the answer's head is in */
    bool chunked;
    bool active;     /* notifications/events/active heard on this connection */
    bool failed;     /* an answer that is not a stream: given up */
    char *sbuf;      /* SSE text not yet split into events */
    size_t slen, scap;
    char cursor[128]; /* the last cursor heard, raw JSON */
    size_t cursor_len;
    ev_seq *seq;     /* one per producer */
    char wbuf[EV_STREAM_REQ_MAX];
    size_t wlen;
    uint64_t opens;
} ev_stream;

typedef struct {
    ev_conn c;
    ev_run *run;
    unsigned idx;
    uv_timer_t pace;
    bool in_flight;
    bool stopped;      /* the window ended: no more posts */
    uint64_t n;        /* the next event to post (all before it were accepted) */
    uint64_t k;        /* posts due so far: the pace */
    uint64_t t0_ns;    /* when post 0 was due */
    uint64_t sent_ns;
    bool sent_measured;
    int64_t first_measured; /* the first n posted in the window; -1 until then */
    char wbuf[EV_POST_MAX];
    size_t wlen;
} ev_producer;

typedef enum { PH_STREAMS, PH_WARMUP, PH_MEASURE, PH_DRAIN, PH_DONE } ev_phase;

typedef struct {
    const char *urls[EV_MAX_URLS];
    struct sockaddr_in addrs[EV_MAX_URLS];
    char host_port[64];
    unsigned nurls;
    unsigned streams;
    double rate, duration_s, warmup_s, drain_s, timeout_s, active_timeout_s;
    const char *source, *type, *secret;
    bool quiet;
} ev_opts;

/* Refusals by status: HTTP status, or one of these. */
enum { RF_SOCKET = 0, RF_TIMEOUT = 1, RF_BODY = 2, RF_STATUS_MAX = 600 };

struct ev_run {
    uv_loop_t *loop;
    const ev_opts *o;
    unsigned char key[EV_KEY_MAX];
    size_t keylen;
    char tag[24]; /* in every event id: this run's, not a copy of an earlier run's */
    ev_stream *streams;
    ev_producer *producers;
    unsigned nproducers;
    ev_phase phase;
    uint64_t t_start_ns, t_measure_ns, t_measure_end_ns, t_drain_end_ns, deadline_ns;
    double cpu0, cpu_s;
    uv_timer_t tick;
    uv_signal_t sigint, sigterm;
    /* posts */
    uint64_t posted, accepted, accepted_dup, refused_total, posted_measured, accepted_measured;
    uint64_t refused[RF_STATUS_MAX];
    /* deliveries (measured events only, except seen_all) */
    uint64_t delivered, lost, duplicated, reordered, foreign, other_type, seen_all;
    load_hist hist, iv_hist;
    load_hist post_hist; /* measured posts: sent -> answered 202 accepted */
    uint64_t iv_posted, iv_accepted, iv_delivered;
    uint64_t stream_errors, stream_reopens, bad_messages;
    unsigned active_streams, samples, seconds;
    bool interrupted, setup_failed;
};

static uint64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void sample(ev_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sample(ev_run *run, const char *fmt, ...) {
    if (run->samples >= EV_SAMPLES) return;
    run->samples++;
    va_list ap;
    va_start(ap, fmt);
    fputs("mcpg-events-load: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int shown(size_t n) { return n < 300 ? (int)n : 300; }

/* ---- the connection both kinds share ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    ev_conn *c = h->data;
    if (c->rlen == c->rcap && c->rcap < EV_RBUF_MAX) {
        char *p = realloc(c->rbuf, c->rcap * 2);
        if (p) c->rbuf = p, c->rcap *= 2;
    }
    *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

static void on_write(uv_write_t *req, int status) {
    ev_conn *c = req->data;
    c->writing = false;
    (void)status; /* a failed write shows as a failed read */
}

static int conn_write(ev_conn *c, const char *p, size_t len) {
    int rc = load_write((uv_stream_t *)&c->tcp, &c->wreq, p, len, on_write);
    if (rc > 0) c->writing = true;
    return rc < 0 ? rc : 0;
}

static void on_conn_closed(uv_handle_t *h) {
    ev_conn *c = h->data;
    c->state = C_CLOSED;
}

/* Close; reconnect (to the next URL when `next`) after retry_ns unless the run ends. */
static void conn_close(ev_conn *c, ev_run *run, uint64_t retry_ns, bool next) {
    c->rlen = 0;
    if (c->state == C_CLOSED || c->state == C_CLOSING) return;
    c->state = C_CLOSING;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    if (next) c->target = (c->target + 1) % run->o->nurls;
    c->retry_at_ns = run->phase == PH_DONE ? 0 : uv_hrtime() + retry_ns;
}

static int conn_connect(ev_conn *c, ev_run *run, void *owner, uv_connect_cb cb, uv_read_cb rd) {
    (void)rd;
    uv_tcp_init(run->loop, &c->tcp);
    c->tcp.data = c;
    c->creq.data = owner;
    c->wreq.data = c;
    c->state = C_CONNECTING;
    c->retry_at_ns = 0;
    c->rlen = 0;
    uv_tcp_nodelay(&c->tcp, 1);
    return uv_tcp_connect(&c->creq, &c->tcp, (const struct sockaddr *)&run->o->addrs[c->target], cb);
}

/* ---- streams ---- */

static void stream_open(ev_stream *s);
static void run_check_active(ev_run *run);
static void run_check_drained(ev_run *run);

static void stream_drop(ev_stream *s, const char *why, bool error) {
    ev_run *run = s->run;
    if (s->c.state == C_CLOSED || s->c.state == C_CLOSING) return;
    if (s->active && run->active_streams) run->active_streams--;
    s->active = false;
    if (run->phase != PH_DONE) {
        if (error) run->stream_errors++;
        sample(run, "stream %u (URL %u): %s; reopening on the next URL from cursor %.*s", s->idx, s->c.target, why,
               s->cursor_len ? (int)s->cursor_len : 4, s->cursor_len ? s->cursor : "null");
    }
    conn_close(&s->c, run, EV_RETRY_NS, true);
}

static void on_event(ev_stream *s, const ev_msg *m) {
    ev_run *run = s->run;
    const ev_opts *o = run->o;
    if (m->cursor && m->cursor_len < sizeof s->cursor) {
        memcpy(s->cursor, m->cursor, m->cursor_len);
        s->cursor_len = m->cursor_len;
    }
    if (m->kind == EV_MSG_ACTIVE) {
        if (!s->active) {
            s->active = true;
            run->active_streams++;
            run_check_active(run);
        }
        return;
    }
    if (m->kind == EV_MSG_ERROR || m->kind == EV_MSG_BAD) {
        run->bad_messages++;
        return;
    }
    if (m->kind != EV_MSG_EVENT) return;
    if (m->name && (m->name_len != strlen(o->type) || memcmp(m->name, o->type, m->name_len) != 0)) {
        run->other_type++;
        return;
    }
    if (!m->has_pn || m->p < 0 || (uint64_t)m->p >= run->nproducers || m->n < 0) {
        run->foreign++;
        return;
    }
    run->seen_all++;
    run->iv_delivered++;
    ev_producer *pr = &run->producers[m->p];
    bool measured = pr->first_measured >= 0 && m->n >= pr->first_measured;
    uint64_t lost = 0;
    ev_seq_verdict v = ev_seq_judge(&s->seq[m->p], m->n, &lost);
    if (!measured) return; /* a warm-up event: judged above, not counted */
    run->lost += lost;
    if (v == EV_SEQ_DUP) {
        run->duplicated++;
        return;
    }
    if (v == EV_SEQ_BACK) {
        run->reordered++;
        return;
    }
    uint64_t now = wall_us();
    uint64_t ns = now > (uint64_t)m->t ? (now - (uint64_t)m->t) * 1000u : 0;
    load_hist_record(&run->hist, ns);
    load_hist_record(&run->iv_hist, ns);
    run->delivered++;
    if (run->phase == PH_DRAIN) run_check_drained(run);
}

/* Split the SSE text into events. false when the stream was dropped. */
static bool stream_events(ev_stream *s) {
    size_t at = 0;
    for (;;) {
        size_t used, dlen;
        char *data;
        if (!load_sse_next(s->sbuf + at, s->slen - at, &used, &data, &dlen)) break;
        at += used;
        if (dlen == 0) continue; /* priming event, retry:, comment */
        ev_msg m;
        ev_msg_read(data, dlen, &m);
        if (m.kind == EV_MSG_BAD || m.kind == EV_MSG_ERROR)
            sample(s->run, "stream %u: %s: %.*s", s->idx, m.kind == EV_MSG_BAD ? "bad message" : "JSON-RPC error",
                   shown(dlen), data);
        on_event(s, &m);
        if (s->c.state != C_OPEN) return false;
    }
    if (at) { /* sbuf is NULL until the stream's first bytes */
        memmove(s->sbuf, s->sbuf + at, s->slen - at);
        s->slen -= at;
    }
    return true;
}

static void stream_body(ev_stream *s) {
    ev_conn *c = &s->c;
    size_t at = c->resp.head_len, used = 0;
    int rc = 0;
    if (s->scap - s->slen < c->rlen - at) { /* the SSE text is never longer than what carried it */
        size_t want = s->slen + (c->rlen - at);
        char *p = realloc(s->sbuf, want);
        if (!p) return stream_drop(s, "out of memory", true);
        s->sbuf = p, s->scap = want;
    }
    if (s->chunked) {
        rc = load_chunks_take(c->rbuf + at, c->rlen - at, &used, s->sbuf, s->scap, &s->slen);
        if (rc < 0) return stream_drop(s, load_resp_strerror(rc), true);
    } else {
        memcpy(s->sbuf + s->slen, c->rbuf + at, c->rlen - at);
        s->slen += c->rlen - at;
        used = c->rlen - at;
    }
    memmove(c->rbuf, c->rbuf + at + used, c->rlen - at - used);
    c->rlen -= at + used;
    c->resp.head_len = 0; /* from now on rbuf holds body bytes only */
    if (!stream_events(s)) return;
    if (rc == 1) stream_drop(s, "the stream ended (last chunk)", true);
}

static void stream_read(uv_stream_t *h, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    ev_conn *c = h->data;
    ev_stream *s = (ev_stream *)c; /* c is the first member */
    if (nread == 0) return;
    if (nread < 0) {
        if (s->head && !s->chunked && s->slen) stream_events(s);
        return stream_drop(s, nread == UV_EOF ? "the gateway closed the stream" : uv_strerror((int)nread), true);
    }
    c->rlen += (size_t)nread;
    if (!s->head) {
        int rc = load_resp_feed(&c->resp, c->rbuf, c->rlen);
        if (rc < 0) return stream_drop(s, load_resp_strerror(rc), true);
        if (!c->resp.head_len) return;
        if (c->resp.status != 200 || !(c->resp.flags & LOAD_RESP_SSE)) {
            if (rc != LOAD_RESP_DONE) return; /* the whole answer first, to show it */
            sample(s->run, "stream %u: events/stream answered HTTP %d, not an SSE stream: %.*s", s->idx,
                   c->resp.status, shown(c->resp.body_len), c->rbuf + c->resp.head_len);
            s->failed = true;
            s->run->stream_errors++;
            s->c.retry_at_ns = 0;
            conn_close(c, s->run, 0, false);
            c->retry_at_ns = 0; /* not reopened */
            if (s->run->phase == PH_STREAMS) s->run->setup_failed = true;
            return;
        }
        s->head = true;
        s->chunked = (c->resp.flags & LOAD_RESP_CHUNKED) != 0;
    } else {
        c->resp.head_len = 0;
    }
    stream_body(s);
}

static void stream_connected(uv_connect_t *req, int status) {
    ev_stream *s = req->data;
    if (s->c.state != C_CONNECTING) return;
    if (status < 0) {
        s->c.state = C_OPEN; /* so the drop closes it */
        return stream_drop(s, uv_strerror(status), true);
    }
    s->c.state = C_OPEN;
    uv_read_start((uv_stream_t *)&s->c.tcp, on_alloc, stream_read);
    int rc = conn_write(&s->c, s->wbuf, s->wlen);
    if (rc < 0) stream_drop(s, uv_strerror(rc), true);
}

static void stream_open(ev_stream *s) {
    ev_run *run = s->run;
    s->head = s->chunked = s->active = false;
    s->slen = 0;
    load_resp_reset(&s->c.resp, (size_t)1 << 40, true);
    s->wlen = ev_stream_format(s->wbuf, run->o->host_port, run->o->type, s->idx + 1, s->cursor_len ? s->cursor : NULL,
                               s->cursor_len);
    if (s->opens++) run->stream_reopens++;
    if (conn_connect(&s->c, run, s, stream_connected, stream_read) < 0) {
        s->c.state = C_OPEN;
        stream_drop(s, "connect", true);
    }
}

/* ---- producers ---- */

static void producer_send(ev_producer *p);

static uint64_t due_of(const ev_producer *p, uint64_t k) {
    const ev_run *run = p->run;
    return p->t0_ns + (uint64_t)((double)k * 1e9 * run->nproducers / run->o->rate);
}

static void on_pace(uv_timer_t *t) { producer_send(t->data); }

/* The next post when its due time has come (now, or by the pace timer). */
static void producer_next(ev_producer *p) {
    ev_run *run = p->run;
    if (p->stopped || run->phase == PH_DONE || p->in_flight) return;
    if (run->phase == PH_DRAIN) {
        p->stopped = true;
        run_check_drained(run);
        return;
    }
    uint64_t now = uv_hrtime(), due = due_of(p, p->k);
    if (due > now) {
        uv_timer_start(&p->pace, on_pace, (due - now + 999999) / 1000000, 0);
        return;
    }
    producer_send(p);
}

static void refuse(ev_producer *p, unsigned why) {
    ev_run *run = p->run;
    if (why < RF_STATUS_MAX && p->sent_measured) run->refused[why]++;
    run->refused_total++;
}

/* The connection failed or timed out with a post in flight: refused, the
 * next attempt goes to the next URL. */
static void producer_fail(ev_producer *p, unsigned why, const char *what) {
    ev_run *run = p->run;
    bool was_idle = !p->in_flight;
    if (p->in_flight) {
        refuse(p, why);
        p->in_flight = false;
        sample(run, "producer %u (URL %u): %s", p->idx, p->c.target, what);
    }
    /* a failed post tries the next URL; an idle connection closed reconnects to its own */
    conn_close(&p->c, run, 100000000ull, !was_idle);
    if (!was_idle) p->k++; /* that post's turn is spent */
    if (run->phase == PH_DRAIN) run_check_drained(run);
    else if (!was_idle) producer_next(p);
}

static void producer_answer(ev_producer *p) {
    ev_run *run = p->run;
    ev_conn *c = &p->c;
    const char *body = c->rbuf + c->resp.head_len, *v;
    size_t blen = c->resp.body_len, vn;
    p->in_flight = false;
    p->k++;
    bool ok = false, dup = false;
    if (c->resp.status == 202 && load_json_member(body, blen, "status", &v, &vn) == 1) {
        ok = vn == 10 && memcmp(v, "\"accepted\"", 10) == 0;
        dup = vn == 11 && memcmp(v, "\"duplicate\"", 11) == 0;
    }
    if (ok || dup) {
        run->accepted++;
        run->iv_accepted++;
        if (dup) run->accepted_dup++;
        if (p->sent_measured) {
            run->accepted_measured++;
            load_hist_record(&run->post_hist, uv_hrtime() - p->sent_ns);
        }
        p->n++;
    } else {
        if (c->resp.status == 202) sample(run, "producer %u: 202 without status accepted: %.*s", p->idx, shown(blen), body);
        else sample(run, "producer %u: post refused: HTTP %d: %.*s", p->idx, c->resp.status, shown(blen), body);
        refuse(p, c->resp.status == 202 ? RF_BODY : (unsigned)c->resp.status);
    }
    size_t total = c->resp.wire_len;
    memmove(c->rbuf, c->rbuf + total, c->rlen - total);
    c->rlen -= total;
    if (c->rlen) {
        producer_fail(p, RF_SOCKET, "bytes after the answer");
        return;
    }
    if (c->resp.flags & LOAD_RESP_CLOSE) conn_close(c, run, 0, false);
    if (run->phase == PH_DRAIN) run_check_drained(run);
    producer_next(p);
}

static void producer_read(uv_stream_t *h, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    ev_conn *c = h->data;
    ev_producer *p = (ev_producer *)c;
    if (nread == 0) return;
    if (nread < 0) return producer_fail(p, RF_SOCKET, nread == UV_EOF ? "closed by the gateway" : uv_strerror((int)nread));
    c->rlen += (size_t)nread;
    if (!p->in_flight) return producer_fail(p, RF_SOCKET, "bytes with no post in flight");
    int rc = load_resp_feed(&c->resp, c->rbuf, c->rlen);
    if (rc == LOAD_RESP_MORE) return;
    if (rc < 0) return producer_fail(p, RF_SOCKET, load_resp_strerror(rc));
    producer_answer(p);
}

static void producer_connected(uv_connect_t *req, int status) {
    ev_producer *p = req->data;
    if (p->c.state != C_CONNECTING) return;
    p->c.state = C_OPEN;
    if (status < 0) return producer_fail(p, RF_SOCKET, uv_strerror(status));
    uv_read_start((uv_stream_t *)&p->c.tcp, on_alloc, producer_read);
    if (p->in_flight) {
        int rc = conn_write(&p->c, p->wbuf, p->wlen);
        if (rc < 0) producer_fail(p, RF_SOCKET, uv_strerror(rc));
    }
}

static void producer_send(ev_producer *p) {
    ev_run *run = p->run;
    if (p->in_flight || p->stopped || run->phase == PH_DONE || run->phase == PH_STREAMS) return;
    if (run->phase == PH_DRAIN) return producer_next(p);
    if (p->c.state == C_CLOSING || (p->c.state == C_CLOSED && p->c.retry_at_ns)) {
        uv_timer_start(&p->pace, on_pace, 20, 0); /* reconnecting: try again soon */
        return;
    }
    uint64_t t_us = wall_us();
    p->wlen = ev_post_format(p->wbuf, run->o->host_port, run->o->source, run->o->type, run->tag, run->key,
                             run->keylen, p->idx, p->n, t_us, t_us / 1000000u);
    p->sent_ns = uv_hrtime();
    p->sent_measured = run->phase == PH_MEASURE;
    if (p->sent_measured && p->first_measured < 0) p->first_measured = (int64_t)p->n;
    if (p->sent_measured) run->posted_measured++;
    run->posted++;
    run->iv_posted++;
    p->in_flight = true;
    load_resp_reset(&p->c.resp, 1 << 20, false);
    p->c.rlen = 0;
    if (p->c.state == C_CLOSED) {
        if (conn_connect(&p->c, run, p, producer_connected, producer_read) < 0) {
            p->c.state = C_OPEN;
            producer_fail(p, RF_SOCKET, "connect");
        }
        return;
    }
    if (p->c.state == C_CONNECTING) return; /* sent once connected */
    int rc = conn_write(&p->c, p->wbuf, p->wlen);
    if (rc < 0) producer_fail(p, RF_SOCKET, uv_strerror(rc));
}

/* ---- phases ---- */

static void run_finish(ev_run *run);

static void run_check_active(ev_run *run) {
    if (run->phase != PH_STREAMS || run->active_streams < run->o->streams) return;
    run->phase = run->o->warmup_s > 0 ? PH_WARMUP : PH_MEASURE;
    uint64_t now = uv_hrtime();
    run->t_start_ns = now;
    if (run->phase == PH_MEASURE) {
        run->t_measure_ns = now;
        run->cpu0 = cpu_seconds();
        fputs("mcpg-events-load: @measure\n", stderr);
    }
    if (!run->o->quiet)
        fprintf(stderr, "mcpg-events-load: %u streams active; %u producers posting %.0f events/s\n", run->o->streams,
                run->nproducers, run->o->rate);
    for (unsigned i = 0; i < run->nproducers; i++) {
        ev_producer *p = &run->producers[i];
        p->t0_ns = now + (uint64_t)(i * 1e9 / run->o->rate);
        producer_next(p);
    }
}

static bool producers_idle(const ev_run *run) {
    for (unsigned i = 0; i < run->nproducers; i++)
        if (run->producers[i].in_flight) return false;
    return true;
}

/* In the drain: the deadline is 3 s after the last post's answer; done
 * early when every measured delivery is in. */
static void run_check_drained(ev_run *run) {
    if (run->phase != PH_DRAIN) return;
    if (!run->deadline_ns && producers_idle(run))
        run->deadline_ns = uv_hrtime() + (uint64_t)(run->o->drain_s * 1e9);
    if (run->deadline_ns && run->delivered >= run->accepted_measured * run->o->streams) run_finish(run);
}

static void close_handle(uv_handle_t *h) {
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void run_finish(ev_run *run) {
    if (run->phase == PH_DONE) return;
    run->phase = PH_DONE;
    run->t_drain_end_ns = uv_hrtime();
    fputs("mcpg-events-load: @drained\n", stderr);
    for (unsigned i = 0; i < run->o->streams; i++) {
        ev_conn *c = &run->streams[i].c;
        if (c->state == C_OPEN || c->state == C_CONNECTING) uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
        c->state = C_CLOSING;
    }
    for (unsigned i = 0; i < run->nproducers; i++) {
        ev_producer *p = &run->producers[i];
        if (p->c.state == C_OPEN || p->c.state == C_CONNECTING) uv_close((uv_handle_t *)&p->c.tcp, on_conn_closed);
        p->c.state = C_CLOSING;
        close_handle((uv_handle_t *)&p->pace);
    }
    close_handle((uv_handle_t *)&run->tick);
    close_handle((uv_handle_t *)&run->sigint);
    close_handle((uv_handle_t *)&run->sigterm);
}

static void progress(ev_run *run) {
    const char *ph = run->phase == PH_WARMUP ? "warm-up" : run->phase == PH_MEASURE ? "measure" : "drain";
    if (!run->o->quiet)
        fprintf(stderr,
                "mcpg-events-load: [%3us %-7s] posted %5llu/s accepted %5llu/s refused %llu  heard %7llu/s  "
                "p50/p99 %.1f/%.1f ms  lost/dup/reordered %llu/%llu/%llu  streams %u/%u\n",
                ++run->seconds, ph, (unsigned long long)run->iv_posted, (unsigned long long)run->iv_accepted,
                (unsigned long long)run->refused_total, (unsigned long long)run->iv_delivered,
                load_hist_percentile(&run->iv_hist, 50) / 1e6, load_hist_percentile(&run->iv_hist, 99) / 1e6,
                (unsigned long long)run->lost, (unsigned long long)run->duplicated,
                (unsigned long long)run->reordered, run->active_streams, run->o->streams);
    run->iv_posted = run->iv_accepted = run->iv_delivered = 0;
    load_hist_reset(&run->iv_hist);
}

static uint64_t next_progress_ns;

static void on_tick(uv_timer_t *t) {
    ev_run *run = t->data;
    const ev_opts *o = run->o;
    uint64_t now = uv_hrtime();
    if (run->phase == PH_DONE) return;
    for (unsigned i = 0; i < o->streams; i++) { /* reopen dropped streams */
        ev_stream *s = &run->streams[i];
        if (s->c.state == C_CLOSED && s->c.retry_at_ns && now >= s->c.retry_at_ns && !s->failed) stream_open(s);
    }
    for (unsigned i = 0; i < run->nproducers; i++) {
        ev_producer *p = &run->producers[i];
        if (p->c.state == C_CLOSED && p->c.retry_at_ns && now >= p->c.retry_at_ns) p->c.retry_at_ns = 0;
        if (p->in_flight && now - p->sent_ns > (uint64_t)(o->timeout_s * 1e9))
            producer_fail(p, RF_TIMEOUT, "no answer within --timeout");
    }
    if (run->setup_failed) {
        fprintf(stderr, "mcpg-events-load: a stream could not be opened\n");
        run->interrupted = true;
        return run_finish(run);
    }
    switch (run->phase) {
    case PH_STREAMS:
        if (now - run->t_start_ns > (uint64_t)(o->active_timeout_s * 1e9)) {
            fprintf(stderr, "mcpg-events-load: %u of %u streams active after %.0f s\n", run->active_streams,
                    o->streams, o->active_timeout_s);
            run->setup_failed = run->interrupted = true;
            return run_finish(run);
        }
        return;
    case PH_WARMUP:
        if (now - run->t_start_ns >= (uint64_t)(o->warmup_s * 1e9)) {
            run->phase = PH_MEASURE;
            run->t_measure_ns = now;
            run->cpu0 = cpu_seconds();
            fputs("mcpg-events-load: @measure\n", stderr);
        }
        break;
    case PH_MEASURE:
        if (now - run->t_measure_ns >= (uint64_t)(o->duration_s * 1e9)) {
            run->phase = PH_DRAIN;
            run->t_measure_end_ns = now;
            run->cpu_s = cpu_seconds() - run->cpu0;
            for (unsigned i = 0; i < run->nproducers; i++) {
                ev_producer *p = &run->producers[i];
                if (!p->in_flight) p->stopped = true, uv_timer_stop(&p->pace);
            }
            run_check_drained(run);
            if (run->phase == PH_DONE) return;
        }
        break;
    case PH_DRAIN:
        run_check_drained(run);
        if (run->phase == PH_DONE) return;
        if (run->deadline_ns && now >= run->deadline_ns) return run_finish(run);
        break;
    default: break;
    }
    if (now >= next_progress_ns) {
        if (next_progress_ns) progress(run);
        next_progress_ns = now + 1000000000ull;
    }
}

static void on_signal(uv_signal_t *h, int signum) {
    (void)signum;
    ev_run *run = h->data;
    run->interrupted = true;
    if (!run->t_measure_end_ns) run->t_measure_end_ns = uv_hrtime();
    run_finish(run);
}

/* ---- the report ---- */

static void report(const ev_run *run) {
    const ev_opts *o = run->o;
    double secs = run->t_measure_end_ns > run->t_measure_ns && run->t_measure_ns
                      ? (double)(run->t_measure_end_ns - run->t_measure_ns) / 1e9
                      : 0;
    uint64_t expected = run->accepted_measured * o->streams;
    uint64_t missing = expected > run->delivered ? expected - run->delivered : 0;
    printf("{\"bench\":\"mcpg-events-load\",\"urls\":%u,\"streams\":%u,\"producers\":%u,\"offered_per_s\":%.1f,"
           "\"duration_s\":%.3f,\"warmup_s\":%.1f,\"drain_s\":%.1f,",
           o->nurls, o->streams, run->nproducers, o->rate, secs, o->warmup_s, o->drain_s);
    printf("\"posted\":%llu,\"accepted\":%llu,\"accepted_duplicate\":%llu,\"refused\":%llu,\"refused_by\":{",
           (unsigned long long)run->posted_measured, (unsigned long long)run->accepted_measured,
           (unsigned long long)run->accepted_dup, (unsigned long long)(run->posted_measured - run->accepted_measured));
    const char *sep = "";
    for (unsigned i = 0; i < RF_STATUS_MAX; i++) {
        if (!run->refused[i]) continue;
        const char *name = i == RF_SOCKET ? "socket" : i == RF_TIMEOUT ? "timeout" : i == RF_BODY ? "202_body" : NULL;
        if (name) printf("%s\"%s\":%llu", sep, name, (unsigned long long)run->refused[i]);
        else printf("%s\"%u\":%llu", sep, i, (unsigned long long)run->refused[i]);
        sep = ",";
    }
    printf("},\"refused_all_phases\":%llu,\"accepted_per_s\":%.1f,\"deliveries_expected\":%llu,"
           "\"deliveries_within_3s\":%llu,\"missing\":%llu,\"lost\":%llu,\"duplicated\":%llu,\"reordered\":%llu,",
           (unsigned long long)run->refused_total, secs > 0 ? (double)run->accepted_measured / secs : 0.0,
           (unsigned long long)expected, (unsigned long long)run->delivered, (unsigned long long)missing,
           (unsigned long long)run->lost, (unsigned long long)run->duplicated, (unsigned long long)run->reordered);
    printf("\"deliveries_per_s\":%.1f,\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"p999_ms\":%.2f,\"max_ms\":%.2f,",
           secs > 0 ? (double)run->delivered / secs : 0.0, load_hist_percentile(&run->hist, 50) / 1e6,
           load_hist_percentile(&run->hist, 99) / 1e6, load_hist_percentile(&run->hist, 99.9) / 1e6,
           run->hist.total ? run->hist.max_ns / 1e6 : 0.0);
    printf("\"post_p50_ms\":%.2f,\"post_p99_ms\":%.2f,", load_hist_percentile(&run->post_hist, 50) / 1e6,
           load_hist_percentile(&run->post_hist, 99) / 1e6);
    printf("\"stream_errors\":%llu,\"stream_reopens\":%llu,\"bad_messages\":%llu,\"foreign_events\":%llu,"
           "\"other_type_events\":%llu,\"loadgen_cpu_pct\":%.1f,\"interrupted\":%s}\n",
           (unsigned long long)run->stream_errors, (unsigned long long)run->stream_reopens,
           (unsigned long long)run->bad_messages, (unsigned long long)run->foreign,
           (unsigned long long)run->other_type, secs > 0 ? 100.0 * run->cpu_s / secs : 0.0,
           run->interrupted ? "true" : "false");
    fflush(stdout);
}

/* ---- options ---- */

static void usage(FILE *out) {
    fputs("usage: mcpg-events-load --url http://127.0.0.1:8787 [--url ...] [options]\n"
          "  --url URL          a gateway's base URL (up to 8: streams and producers round robin)\n"
          "  --streams N        events/stream readers (default 64)\n"
          "  --rate R           events/s offered (default 100); producers = ceil(R / 100)\n"
          "  --duration S       the measured window (default 10)\n"
          "  --warmup S         posting before it, not counted (default 2)\n"
          "  --drain S          after the last post's answer, how long deliveries may take (default 3)\n"
          "  --source NAME      POST /webhooks/events/NAME (default bench)\n"
          "  --name TYPE        the event type (default bench.tick)\n"
          "  --secret whsec_..  the source's secret (default $MCPG_EVENTS_SECRET)\n"
          "  --timeout S        a post unanswered this long is refused (default 10)\n"
          "  --active-timeout S every stream must be active within this (default 15)\n"
          "  -q, --quiet        no progress lines\n",
          out);
}

static int parse_base_url(ev_opts *o, const char *url, unsigned i) {
    if (strncmp(url, "http://", 7) != 0) return -1;
    const char *hp = url + 7;
    size_t n = strcspn(hp, "/");
    if (hp[n] && strcmp(hp + n, "/") != 0) return -1; /* a base URL: no path */
    char buf[64], host[64];
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, hp, n);
    buf[n] = '\0';
    char *colon = strrchr(buf, ':');
    if (!colon) return -1;
    memcpy(host, buf, (size_t)(colon - buf));
    host[colon - buf] = '\0';
    if (strcmp(host, "localhost") == 0) strcpy(host, "127.0.0.1");
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535) return -1;
    if (uv_ip4_addr(host, (int)port, &o->addrs[i]) != 0) return -1;
    if (i == 0) snprintf(o->host_port, sizeof o->host_port, "%s", buf);
    return 0;
}

static bool name_ok(const char *s) {
    if (!*s || strlen(s) > 128) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("._-", *s)))
            return false;
    return true;
}

static int num(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    ev_opts o = {.streams = 64, .rate = 100, .duration_s = 10, .warmup_s = 2, .drain_s = 3, .timeout_s = 10,
                 .active_timeout_s = 15, .source = "bench", .type = "bench.tick"};
    o.secret = getenv("MCPG_EVENTS_SECRET");
    enum { O_URL = 256, O_STREAMS, O_RATE, O_DURATION, O_WARMUP, O_DRAIN, O_SOURCE, O_NAME, O_SECRET, O_TIMEOUT, O_ACT };
    static const struct option longs[] = {
        {"url", required_argument, NULL, O_URL},         {"streams", required_argument, NULL, O_STREAMS},
        {"rate", required_argument, NULL, O_RATE},       {"duration", required_argument, NULL, O_DURATION},
        {"warmup", required_argument, NULL, O_WARMUP},   {"drain", required_argument, NULL, O_DRAIN},
        {"source", required_argument, NULL, O_SOURCE},   {"name", required_argument, NULL, O_NAME},
        {"secret", required_argument, NULL, O_SECRET},   {"timeout", required_argument, NULL, O_TIMEOUT},
        {"active-timeout", required_argument, NULL, O_ACT}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};
    int ch;
    double v;
    while ((ch = getopt_long(argc, argv, "qh", longs, NULL)) != -1) {
        int bad = 0;
        switch (ch) {
        case O_URL:
            if (o.nurls >= EV_MAX_URLS || parse_base_url(&o, optarg, o.nurls) < 0) bad = 1;
            else o.urls[o.nurls++] = optarg;
            break;
        case O_STREAMS: bad = num(optarg, 1, EV_MAX_STREAMS, &v); o.streams = (unsigned)v; break;
        case O_RATE: bad = num(optarg, 0.1, EV_PER_PRODUCER * EV_MAX_PRODUCERS, &o.rate); break;
        case O_DURATION: bad = num(optarg, 0.1, 86400, &o.duration_s); break;
        case O_WARMUP: bad = num(optarg, 0, 3600, &o.warmup_s); break;
        case O_DRAIN: bad = num(optarg, 0, 600, &o.drain_s); break;
        case O_SOURCE: o.source = optarg; bad = !name_ok(optarg); break;
        case O_NAME: o.type = optarg; bad = !name_ok(optarg); break;
        case O_SECRET: o.secret = optarg; break;
        case O_TIMEOUT: bad = num(optarg, 0.1, 600, &o.timeout_s); break;
        case O_ACT: bad = num(optarg, 0.1, 600, &o.active_timeout_s); break;
        case 'q': o.quiet = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (bad) {
            fprintf(stderr, "mcpg-events-load: bad value for --%s: %s\n", longs[ch - O_URL].name, optarg);
            return 2;
        }
    }
    if (optind < argc || !o.nurls) {
        usage(stderr);
        return 2;
    }
    static ev_run run;
    run.o = &o;
    int kl = o.secret ? ev_secret_key(o.secret, run.key) : -1;
    if (kl < 0) {
        fprintf(stderr, "mcpg-events-load: --secret (or MCPG_EVENTS_SECRET) must be whsec_<base64 of 1-64 bytes>\n");
        return 2;
    }
    run.keylen = (size_t)kl;
    snprintf(run.tag, sizeof run.tag, "%llx", (unsigned long long)wall_us()); /* the run's start, µs */
    run.nproducers = (unsigned)ceil(o.rate / EV_PER_PRODUCER);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    run.loop = uv_default_loop();
    load_hist_reset(&run.hist);
    load_hist_reset(&run.iv_hist);
    load_hist_reset(&run.post_hist);
    run.streams = calloc(o.streams, sizeof *run.streams);
    run.producers = calloc(run.nproducers, sizeof *run.producers);
    if (!run.streams || !run.producers) return 2;
    for (unsigned i = 0; i < run.nproducers; i++) {
        ev_producer *p = &run.producers[i];
        p->run = &run;
        p->idx = i;
        p->c.target = i % o.nurls;
        p->first_measured = -1;
        p->c.rcap = 4096;
        p->c.rbuf = malloc(p->c.rcap);
        uv_timer_init(run.loop, &p->pace);
        p->pace.data = p;
    }
    for (unsigned i = 0; i < o.streams; i++) {
        ev_stream *s = &run.streams[i];
        s->run = &run;
        s->idx = i;
        s->c.target = i % o.nurls;
        s->c.rcap = EV_RBUF_INITIAL;
        s->c.rbuf = malloc(s->c.rcap);
        s->seq = malloc(run.nproducers * sizeof *s->seq);
        if (!s->c.rbuf || !s->seq) return 2;
        for (unsigned j = 0; j < run.nproducers; j++) ev_seq_init(&s->seq[j]);
    }
    uv_timer_init(run.loop, &run.tick);
    run.tick.data = &run;
    uv_signal_init(run.loop, &run.sigint);
    uv_signal_init(run.loop, &run.sigterm);
    run.sigint.data = run.sigterm.data = &run;
    uv_signal_start(&run.sigint, on_signal, SIGINT);
    uv_signal_start(&run.sigterm, on_signal, SIGTERM);
    run.t_start_ns = uv_hrtime();
    for (unsigned i = 0; i < o.streams; i++) stream_open(&run.streams[i]);
    uv_timer_start(&run.tick, on_tick, EV_TICK_MS, EV_TICK_MS);
    uv_run(run.loop, UV_RUN_DEFAULT);
    if (!run.t_measure_end_ns && run.t_measure_ns) run.t_measure_end_ns = run.t_drain_end_ns;
    if (!run.cpu_s && run.t_measure_ns) run.cpu_s = cpu_seconds() - run.cpu0;
    report(&run);
    for (unsigned i = 0; i < o.streams; i++) free(run.streams[i].c.rbuf), free(run.streams[i].sbuf), free(run.streams[i].seq);
    for (unsigned i = 0; i < run.nproducers; i++) free(run.producers[i].c.rbuf);
    free(run.streams);
    free(run.producers);
    uv_loop_close(run.loop);
    if (run.setup_failed) return 2;
    bool clean = !run.interrupted && run.accepted_measured > 0 && !run.lost && !run.duplicated && !run.reordered &&
                 run.delivered == run.accepted_measured * o.streams && !run.bad_messages;
    return clean ? 0 : 1;
}
