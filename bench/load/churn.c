/* --churn: legacy (2025-11-25) sessions opened and ended across replicas.
 *
 * Each of -c clients loops, one session at a time:
 *   1. on its own connection A (URL j % n): initialize (200 with Mcp-Session-Id),
 *      then notifications/initialized (202);
 *   2. on connection B (URL (j+1) % n, the next replica; with one URL the same
 *      gateway): GET /mcp with the session, Accept: text/event-stream; once
 *      its head is in (200), the stream is open;
 *   3. on A: DELETE /mcp with the session (200);
 *   4. the stream must end: its last chunk, or the connection closed.
 * The figure is the time from the DELETE's answer to the stream's end as
 * this client sees it (0 when the stream ended first: counted apart), and
 * sessions ended a second. A stream not ended --stuck-after seconds after
 * the DELETE's answer is stuck: counted, its connection dropped, the client
 * goes on with a new session.
 *
 * Both connections are keep-alive and reused; A carries one request at a
 * time, B one stream. Framing is resp.c's (chunked decoded), the handshake
 * text rpc.c's. Nothing is allocated per session. Any unexpected answer is
 * an error: described (the first five), counted, both connections closed
 * and the client starts again after 100 ms. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"

#define CH_BUF 65536u
#define CH_BACKOFF_NS 100000000ull
#define CH_TICK_MS 20u
#define CH_ERROR_SAMPLES 5u

typedef struct churn_client churn_client;
typedef struct churn_run churn_run;

typedef enum { CC_CLOSED, CC_CONNECTING, CC_OPEN, CC_CLOSING } cc_state;

typedef struct {
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    churn_client *cl;
    unsigned target;
    cc_state state;
    bool pending;  /* wbuf waits for the connection to open */
    bool writing;  /* wreq pending */
    bool waiting;  /* a request sent, its answer (or stream) not complete */
    bool head_seen; /* the stream's head is in */
    char wbuf[LOAD_HANDSHAKE_MAX];
    size_t wlen;
    char *rbuf;
    size_t rlen;
    load_resp resp;
} churn_conn;

typedef enum { ST_IDLE, ST_INITIALIZE, ST_INITIALIZED, ST_GET, ST_DELETE, ST_BACKOFF } churn_step;

struct churn_client {
    churn_run *run;
    churn_conn a, b;
    churn_step step;
    char session[LOAD_SESSION_MAX];
    size_t session_len;
    bool del_answered, stream_ended;
    uint64_t t_open_ns, t_del_ns, t_end_ns, retry_at_ns;
    uint64_t id;
};

typedef struct {
    uint64_t ended, stuck, errors, ended_first;
    load_hist end_hist;   /* DELETE's answer -> the stream's end */
    load_hist cycle_hist; /* initialize sent -> the stream's end */
} churn_stats;

struct churn_run {
    uv_loop_t *loop;
    const load_opts *o;
    churn_client *clients;
    unsigned n;
    load_phase phase;
    uv_timer_t phase_timer, tick;
    uint64_t t_measure_ns, t_end_ns, next_progress_ns;
    double cpu0, cpu_s;
    churn_stats warm, meas, iv;
    unsigned samples, seconds;
};

static churn_stats *stats_of(churn_run *r) {
    return r->phase == LOAD_PHASE_WARMUP ? &r->warm : r->phase == LOAD_PHASE_MEASURE ? &r->meas : NULL;
}

static void cl_start(churn_client *cl);
static void cc_send(churn_conn *c);

static void cc_closed(uv_handle_t *h) {
    churn_conn *c = h->data;
    c->state = CC_CLOSED;
    if (c->pending && c->cl->run->phase != LOAD_PHASE_DONE) cc_send(c); /* reconnect for it */
}

static void cc_close(churn_conn *c) {
    c->waiting = c->head_seen = c->writing = false;
    c->rlen = 0;
    if (c->state == CC_CLOSED || c->state == CC_CLOSING) return;
    c->state = CC_CLOSING;
    uv_close((uv_handle_t *)&c->tcp, cc_closed);
}

static void cl_error(churn_client *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void on_cc_write(uv_write_t *req, int status) {
    churn_conn *c = req->data;
    c->writing = false;
    if (status < 0 && status != UV_ECANCELED) cl_error(c->cl, "write: %s", uv_strerror(status));
}

static void cc_write_now(churn_conn *c) {
    c->pending = false;
    c->waiting = true;
    c->head_seen = false;
    c->rlen = 0;
    load_resp_reset(&c->resp, CH_BUF / 2, true);
    uv_buf_t b = uv_buf_init(c->wbuf, (unsigned)c->wlen);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == (int)c->wlen) return;
    if (n < 0 && n != UV_EAGAIN) {
        cl_error(c->cl, "write: %s", uv_strerror(n));
        return;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    b = uv_buf_init(c->wbuf + done, (unsigned)(c->wlen - done));
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_cc_write) == 0) c->writing = true;
    else cl_error(c->cl, "write failed");
}

static void on_cc_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    churn_conn *c = h->data;
    (void)suggested;
    *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)(CH_BUF - c->rlen));
}

static void cl_on_answer(churn_client *cl, churn_conn *c);
static void cl_on_stream_head(churn_client *cl);
static void cl_on_stream_end(churn_client *cl);

static void on_cc_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    churn_conn *c = s->data;
    churn_client *cl = c->cl;
    (void)buf;
    if (nread == 0) return;
    if (nread < 0) {
        bool stream = c == &cl->b && c->waiting && c->head_seen;
        cc_close(c);
        if (stream) cl_on_stream_end(cl); /* the stream ended by closing */
        else if (c->waiting) cl_error(cl, "%s: connection closed with a request in flight",
                                      c == &cl->a ? "A" : "the GET stream");
        return;
    }
    c->rlen += (size_t)nread;
    if (!c->waiting) {
        cl_error(cl, "bytes with no request in flight");
        return;
    }
    int rc = load_resp_feed(&c->resp, c->rbuf, c->rlen);
    if (rc < 0) {
        cl_error(cl, "%s", load_resp_strerror(rc));
        return;
    }
    if (rc == LOAD_RESP_MORE) {
        if (c == &cl->b && c->resp.head_len && !c->head_seen) {
            c->head_seen = true;
            cl_on_stream_head(cl);
        } else if (c->rlen == CH_BUF) {
            cl_error(cl, "answer over %u bytes", CH_BUF);
        }
        return;
    }
    c->waiting = false;
    bool head_seen = c->head_seen;
    /* the server asked to close: closed first, so a request sent from the
     * handlers below waits for the new connection (cc_closed) */
    if (c->resp.flags & LOAD_RESP_CLOSE) cc_close(c);
    c->rlen = 0;
    if (c == &cl->b) {
        if (c->resp.status != 200) cl_error(cl, "GET stream answered HTTP %d", c->resp.status);
        else if (!head_seen) cl_error(cl, "the GET stream ended in the read that opened it");
        else cl_on_stream_end(cl);
    } else {
        cl_on_answer(cl, c);
    }
}

static void on_cc_connect(uv_connect_t *req, int status) {
    churn_conn *c = req->data;
    if (c->state != CC_CONNECTING) return;
    if (status < 0) {
        c->pending = false;
        cl_error(c->cl, "connect: %s", uv_strerror(status));
        return;
    }
    c->state = CC_OPEN;
    uv_read_start((uv_stream_t *)&c->tcp, on_cc_alloc, on_cc_read);
    if (c->pending) cc_write_now(c);
}

/* Send wbuf: now when open, else once connected. */
static void cc_send(churn_conn *c) {
    churn_run *run = c->cl->run;
    c->pending = true;
    if (c->state == CC_OPEN) {
        cc_write_now(c);
        return;
    }
    if (c->state != CC_CLOSED) return; /* connecting, or closing: cc_closed comes back here */
    uv_tcp_init(run->loop, &c->tcp);
    c->tcp.data = c;
    c->creq.data = c->wreq.data = c;
    uv_tcp_nodelay(&c->tcp, 1);
    c->state = CC_CONNECTING;
    if (uv_tcp_connect(&c->creq, &c->tcp, (const struct sockaddr *)&run->o->addrs[c->target], on_cc_connect) < 0) {
        c->pending = false;
        cc_close(c);
        cl_error(c->cl, "connect failed");
    }
}

static void cl_error(churn_client *cl, const char *fmt, ...) {
    churn_run *run = cl->run;
    if (run->phase == LOAD_PHASE_DONE) return;
    churn_stats *st = stats_of(run);
    if (st) st->errors++;
    run->iv.errors++;
    if (run->samples < CH_ERROR_SAMPLES) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fprintf(stderr, "mcpg-load: churn client %u (step %d): %s\n", (unsigned)(cl - run->clients), cl->step, msg);
        if (++run->samples == CH_ERROR_SAMPLES) fprintf(stderr, "mcpg-load: (further errors are only counted)\n");
    }
    cl->a.pending = cl->b.pending = false;
    cc_close(&cl->a);
    cc_close(&cl->b);
    cl->step = ST_BACKOFF;
    cl->retry_at_ns = uv_hrtime() + CH_BACKOFF_NS;
}

/* ---- one client's cycle ---- */

static void cl_start(churn_client *cl) {
    const load_opts *o = cl->run->o;
    cl->step = ST_INITIALIZE;
    cl->session_len = 0;
    cl->del_answered = cl->stream_ended = false;
    cl->t_open_ns = uv_hrtime();
    cl->a.wlen = load_initialize_format(o->host_port, o->path, ++cl->id, cl->a.wbuf);
    cc_send(&cl->a);
}

static size_t session_request(churn_client *cl, char *dst, const char *method, const char *accept) {
    const load_opts *o = cl->run->o;
    int n = snprintf(dst, LOAD_HANDSHAKE_MAX,
                     "%s %s HTTP/1.1\r\nHost: %s\r\nAccept: %s\r\nMcp-Session-Id: %.*s\r\n"
                     "MCP-Protocol-Version: 2025-11-25\r\n\r\n",
                     method, o->path, o->host_port, accept, (int)cl->session_len, cl->session);
    return n < 0 || (size_t)n >= LOAD_HANDSHAKE_MAX ? 0 : (size_t)n;
}

static void cl_done_if_both(churn_client *cl) {
    if (!cl->del_answered || !cl->stream_ended) return;
    churn_run *run = cl->run;
    churn_stats *st = stats_of(run);
    uint64_t end = cl->t_end_ns > cl->t_del_ns ? cl->t_end_ns - cl->t_del_ns : 0;
    if (st) {
        st->ended++;
        if (cl->t_end_ns <= cl->t_del_ns) st->ended_first++;
        load_hist_record(&st->end_hist, end);
        load_hist_record(&st->cycle_hist, cl->t_end_ns - cl->t_open_ns);
    }
    run->iv.ended++;
    load_hist_record(&run->iv.end_hist, end);
    if (run->phase != LOAD_PHASE_DONE) cl_start(cl);
}

static void cl_on_answer(churn_client *cl, churn_conn *c) {
    load_resp *r = &c->resp;
    switch (cl->step) {
    case ST_INITIALIZE:
        if (r->status != 200 || r->session_len == 0 || r->session_len > LOAD_SESSION_MAX) {
            cl_error(cl, "initialize answered HTTP %d %s", r->status, r->session_len ? "" : "without a session");
            return;
        }
        memcpy(cl->session, c->rbuf + r->session_off, r->session_len);
        cl->session_len = r->session_len;
        cl->step = ST_INITIALIZED;
        cl->a.wlen = load_initialized_format(cl->run->o->host_port, cl->run->o->path, cl->session,
                                             cl->session_len, cl->a.wbuf);
        cc_send(&cl->a);
        return;
    case ST_INITIALIZED:
        if (r->status != 202) {
            cl_error(cl, "notifications/initialized answered HTTP %d, not 202", r->status);
            return;
        }
        cl->step = ST_GET;
        cl->b.wlen = session_request(cl, cl->b.wbuf, "GET", "text/event-stream");
        cc_send(&cl->b);
        return;
    case ST_DELETE:
        if (r->status != 200 && r->status != 204) {
            cl_error(cl, "DELETE answered HTTP %d", r->status);
            return;
        }
        cl->t_del_ns = uv_hrtime();
        cl->del_answered = true;
        cl_done_if_both(cl);
        return;
    default: cl_error(cl, "an answer at step %d", cl->step); return;
    }
}

static void cl_on_stream_head(churn_client *cl) {
    if (cl->step != ST_GET) return;
    if (cl->b.resp.status != 200) return; /* judged when complete */
    cl->step = ST_DELETE;
    cl->a.wlen = session_request(cl, cl->a.wbuf, "DELETE", "application/json, text/event-stream");
    cc_send(&cl->a);
}

static void cl_on_stream_end(churn_client *cl) {
    if (cl->step != ST_DELETE) {
        cl_error(cl, "the GET stream ended before the DELETE was sent");
        return;
    }
    cl->t_end_ns = uv_hrtime();
    cl->stream_ended = true;
    cl_done_if_both(cl);
}

/* ---- the run ---- */

static void ch_stop(churn_run *run) {
    if (run->phase == LOAD_PHASE_DONE) return;
    run->t_end_ns = uv_hrtime();
    run->cpu_s = load_cpu_seconds() - run->cpu0;
    run->phase = LOAD_PHASE_DONE;
    uv_close((uv_handle_t *)&run->phase_timer, NULL);
    uv_close((uv_handle_t *)&run->tick, NULL);
    for (unsigned i = 0; i < run->n; i++) {
        run->clients[i].a.pending = run->clients[i].b.pending = false;
        cc_close(&run->clients[i].a);
        cc_close(&run->clients[i].b);
    }
}

static void on_ch_phase(uv_timer_t *t) {
    churn_run *run = t->data;
    if (run->phase != LOAD_PHASE_WARMUP) {
        ch_stop(run);
        return;
    }
    run->phase = LOAD_PHASE_MEASURE;
    run->t_measure_ns = uv_hrtime();
    run->cpu0 = load_cpu_seconds();
    uv_timer_start(&run->phase_timer, on_ch_phase, (uint64_t)(run->o->duration_s * 1000 + 0.5), 0);
}

static void on_ch_tick(uv_timer_t *t) {
    churn_run *run = t->data;
    uint64_t now = uv_hrtime(), stuck = (uint64_t)(run->o->stuck_s * 1e9), tmo = (uint64_t)(run->o->timeout_s * 1e9);
    for (unsigned i = 0; i < run->n && run->phase != LOAD_PHASE_DONE; i++) {
        churn_client *cl = &run->clients[i];
        if (cl->step == ST_BACKOFF && now >= cl->retry_at_ns) {
            cl_start(cl);
        } else if (cl->step == ST_DELETE && cl->del_answered && !cl->stream_ended && now - cl->t_del_ns > stuck) {
            churn_stats *st = stats_of(run);
            if (st) st->stuck++;
            run->iv.stuck++;
            fprintf(stderr, "mcpg-load: churn client %u: stream of session %.*s not ended %.1f s after its DELETE\n",
                    i, (int)cl->session_len, cl->session, run->o->stuck_s);
            cl->b.pending = false;
            cc_close(&cl->b);
            cl_start(cl);
        } else if (cl->step != ST_BACKOFF && !(cl->step == ST_DELETE && cl->del_answered) &&
                   now - cl->t_open_ns > tmo) {
            cl_error(cl, "no progress within --timeout");
        }
    }
    if (run->phase == LOAD_PHASE_DONE || now < run->next_progress_ns) return;
    run->next_progress_ns += 1000000000ull;
    if (!run->o->quiet)
        fprintf(stderr, "mcpg-load: [%3us %-7s] %8llu sessions ended/s  end p50 %7.0f us  p99 %7.0f us  stuck %llu  errors %llu\n",
                ++run->seconds, run->phase == LOAD_PHASE_WARMUP ? "warm-up" : "measure",
                (unsigned long long)run->iv.ended, load_hist_percentile(&run->iv.end_hist, 50) / 1e3,
                load_hist_percentile(&run->iv.end_hist, 99) / 1e3, (unsigned long long)run->iv.stuck,
                (unsigned long long)run->iv.errors);
    run->iv.ended = run->iv.stuck = run->iv.errors = 0;
    load_hist_reset(&run->iv.end_hist);
}

static void report(const churn_run *run, bool json) {
    const churn_stats *m = &run->meas;
    double secs = run->t_end_ns > run->t_measure_ns ? (double)(run->t_end_ns - run->t_measure_ns) / 1e9 : 0;
    double per_s = secs > 0 ? (double)m->ended / secs : 0;
#define P(h, p) (load_hist_percentile(h, p) / 1e3)
    fprintf(stderr,
            "mcpg-load churn: %u clients over %u URL(s), measured %.2f s: %.1f sessions ended/s (%llu)\n"
            "  stream end after the DELETE's answer: p50 %.0f us  p99 %.0f us  max %.0f us (%llu ended before it)\n"
            "  whole session (initialize to stream end): p50 %.0f us  p99 %.0f us\n"
            "  stuck streams %llu, errors %llu; warm-up: %llu ended, %llu stuck, %llu errors; "
            "load generator CPU %.0f %% of one core\n",
            run->n, run->o->ntargets, secs, per_s, (unsigned long long)m->ended, P(&m->end_hist, 50),
            P(&m->end_hist, 99), m->end_hist.max_ns / 1e3, (unsigned long long)m->ended_first,
            P(&m->cycle_hist, 50), P(&m->cycle_hist, 99), (unsigned long long)m->stuck,
            (unsigned long long)m->errors, (unsigned long long)run->warm.ended, (unsigned long long)run->warm.stuck,
            (unsigned long long)run->warm.errors, secs > 0 ? 100 * run->cpu_s / secs : 0);
    if (json)
        printf("{\"bench\":\"mcpg-load-churn\",\"clients\":%u,\"targets\":%u,\"duration_s\":%.6f,"
               "\"sessions_ended\":%llu,\"sessions_per_s\":%.1f,\"end_p50_us\":%.1f,\"end_p90_us\":%.1f,"
               "\"end_p99_us\":%.1f,\"end_max_us\":%.1f,\"ended_before_answer\":%llu,\"cycle_p50_us\":%.1f,"
               "\"cycle_p99_us\":%.1f,\"stuck\":%llu,\"stuck_after_s\":%.3f,\"errors\":%llu,\"warmup_ended\":%llu,"
               "\"warmup_stuck\":%llu,\"warmup_errors\":%llu,\"loadgen_cpu_pct\":%.1f}\n",
               run->n, run->o->ntargets, secs, (unsigned long long)m->ended, per_s, P(&m->end_hist, 50),
               P(&m->end_hist, 90), P(&m->end_hist, 99), m->end_hist.max_ns / 1e3,
               (unsigned long long)m->ended_first, P(&m->cycle_hist, 50), P(&m->cycle_hist, 99),
               (unsigned long long)m->stuck, run->o->stuck_s, (unsigned long long)m->errors,
               (unsigned long long)run->warm.ended, (unsigned long long)run->warm.stuck,
               (unsigned long long)run->warm.errors, secs > 0 ? 100 * run->cpu_s / secs : 0);
#undef P
}

int load_churn_main(const load_opts *o) {
    if (o->wire != LOAD_WIRE_LEGACY) {
        fprintf(stderr, "mcpg-load: --churn needs --wire legacy (sessions)\n");
        return 2;
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    churn_run *run = calloc(1, sizeof *run);
    if (!run) return 2;
    run->loop = &loop;
    run->o = o;
    run->n = o->connections;
    run->clients = calloc(run->n, sizeof *run->clients);
    if (!run->clients) return 2;
    load_hist_reset(&run->warm.end_hist), load_hist_reset(&run->warm.cycle_hist);
    load_hist_reset(&run->meas.end_hist), load_hist_reset(&run->meas.cycle_hist);
    load_hist_reset(&run->iv.end_hist);
    for (unsigned j = 0; j < run->n; j++) {
        churn_client *cl = &run->clients[j];
        cl->run = run;
        cl->id = (uint64_t)j << 32;
        cl->a.cl = cl->b.cl = cl;
        cl->a.target = load_spread_target(j, o->ntargets);
        cl->b.target = load_spread_target(j + 1, o->ntargets);
        cl->a.rbuf = malloc(CH_BUF);
        cl->b.rbuf = malloc(CH_BUF);
        if (!cl->a.rbuf || !cl->b.rbuf) return 2;
    }
    uv_timer_init(&loop, &run->phase_timer);
    uv_timer_init(&loop, &run->tick);
    run->phase_timer.data = run->tick.data = run;
    uint64_t now = uv_hrtime();
    run->next_progress_ns = now + 1000000000ull;
    if (o->warmup_s > 0) {
        run->phase = LOAD_PHASE_WARMUP;
        uv_timer_start(&run->phase_timer, on_ch_phase, (uint64_t)(o->warmup_s * 1000 + 0.5), 0);
    } else {
        run->phase = LOAD_PHASE_MEASURE;
        run->t_measure_ns = now;
        run->cpu0 = load_cpu_seconds();
        uv_timer_start(&run->phase_timer, on_ch_phase, (uint64_t)(o->duration_s * 1000 + 0.5), 0);
    }
    uv_timer_start(&run->tick, on_ch_tick, CH_TICK_MS, CH_TICK_MS);
    for (unsigned j = 0; j < run->n; j++) cl_start(&run->clients[j]);
    uv_run(&loop, UV_RUN_DEFAULT);
    report(run, o->json);
    const churn_stats *m = &run->meas;
    int rc = m->ended == 0 || m->stuck || m->errors || run->warm.stuck || run->warm.errors ? 1 : 0;
    for (unsigned j = 0; j < run->n; j++) free(run->clients[j].a.rbuf), free(run->clients[j].b.rbuf);
    free(run->clients);
    free(run);
    if (uv_loop_close(&loop) != 0) {
        fprintf(stderr, "mcpg-load: churn: handles left open at exit\n");
        rc = 1;
    }
    return rc;
}
