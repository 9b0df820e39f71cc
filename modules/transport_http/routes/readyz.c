/* transport_http: GET /readyz.
 *
 * Ready is "send me calls". First, every backend has its first lists: a
 * backend whose lists come from an upstream MCP server has none until the
 * upstream answers, and a tools/call for one of its tools would be "Unknown
 * tool" until then. While the kernel names such backends
 * (host->backends_waiting) the answer is 503 with Retry-After,
 * {"status":"starting","waiting":["github"]}; the same after a reload whose
 * new generation brings a new upstream. A module entry's "wait_for_lists":
 * false leaves its backend out of this.
 *
 * Then the coordinator: a gateway whose coordinator is unreachable still
 * serves every stateless call without a global limit (they touch no
 * coordinator), so it stays 200, and the body says what it cannot do: with
 * "coordinator":"unavailable" new legacy sessions and global limits answer
 * 503 until the store is back (the module connects in the background). Taking
 * the whole fleet out of a load balancer because the store they share is
 * down would refuse the stateless calls too. A deployment that would rather
 * route away asks /readyz?coordinator=required: 503 with Retry-After then.
 *
 * "ok" means every loop can serve a session, not only the loop that took the
 * probe: a coordinator may hold one connection per loop, each with its own
 * reconnect backoff, so after the store comes back one loop can answer while
 * another still refuses (a session's next request may land on either). The
 * store is asked once on every loop, each on its own loop like any op; never
 * a blocking call. It is asked what a session's creation asks first: a
 * counted write (incr, by 0, of a key of its own that expires), not a read:
 * a store can answer reads while it refuses writes or scripts (out of
 * memory, a replica after a failover, a script path a read never takes), and
 * then every initialize is 503 while a read says "ok". The answers come home
 * to the probing loop, which replies once the last one is in. */
#include "routes/routes.h"

#include <stdio.h>
#include <string.h>

#define READYZ_KEY "mcpg.readyz"
#define READYZ_KEY_TTL_MS 60000 /* the probe's key does not outlive its probes */

typedef struct readyz_probe readyz_probe;

/* One loop's part: posted there to ask, posted home with the answer. */
typedef struct readyz_leg {
    mcpg_post node;
    readyz_probe *probe;
    th_worker_state *ws; /* the loop asked */
    int answered_ok;
} readyz_leg;

struct readyz_probe {
    th_req *r;
    th_worker_state *home; /* the loop that took the request */
    uint32_t legs, in; /* read and written on the home loop only */
    int down;
    readyz_leg leg[];
};

static int query_has(const char *url, size_t n, const char *param) {
    const char *q = memchr(url, '?', n);
    size_t pn = strlen(param);
    for (const char *p = q; p && p < url + n; p = memchr(p + 1, '&', (size_t)(url + n - p - 1))) {
        size_t left = (size_t)(url + n - p - 1);
        if (left >= pn && !memcmp(p + 1, param, pn) && (left == pn || p[1 + pn] == '&')) return 1;
    }
    return 0;
}

static void readyz_answer(th_conn *c, th_req *r, const char *coordinator, int required) {
    int down = !strcmp(coordinator, "unavailable");
    char body[96];
    int n = snprintf(body, sizeof body, "{\"status\":\"%s\",\"coordinator\":\"%s\"}",
                     down && required ? "not ready" : "ready", coordinator);
    th_resp_head hd = {.status = down && required ? 503 : 200, .json = 1,
                       .retry_after_s = down && required ? 1 : 0};
    th_piece p = {body, (size_t)n};
    th_respond(c, r, &hd, &p, 1);
}

/* 503 "starting" while backends have no first lists yet; 1 when answered. */
static int answered_starting(th_conn *c, th_req *r, th_worker_state *home) {
    const mcpg_host *h = home->mod->host;
    if (!MCPG_HOST_HAS(h, backends_waiting) || !home->w) return 0;
    mcpg_buf waiting = {0}, body = {0};
    int n = h->backends_waiting(home->w, &waiting);
    if (n < 0 || (n > 0 && h->buf_printf(&body, "{\"status\":\"starting\",\"waiting\":%.*s}",
                                        (int)waiting.len, waiting.data) != 0)) {
        th_respond_status_error(c, r, 503);
    } else if (n > 0) {
        th_resp_head hd = {.status = 503, .json = 1, .retry_after_s = 1};
        th_piece p = {body.data, body.len};
        th_respond(c, r, &hd, &p, 1);
    }
    h->buf_free(&waiting);
    h->buf_free(&body);
    return n != 0;
}

/* On the home loop: every loop has answered. */
static void probe_finish(readyz_probe *p) {
    th_req *r = p->r;
    th_conn *c = r->conn;
    int down = p->down;
    p->home->mod->host->free(p);
    if (!th_conn_answer_back(c, r)) return;
    readyz_answer(c, r, down ? "unavailable" : "ok", r->readyz_required);
    th_conn_advance(c);
}

/* On the home loop: one loop's answer is in. */
static void leg_home(void *arg) {
    readyz_leg *l = arg;
    readyz_probe *p = l->probe;
    if (!l->answered_ok) p->down = 1;
    if (++p->in == p->legs) probe_finish(p);
}

/* Back to the home loop; run here when this is the home loop. */
static void leg_send_home(readyz_leg *l) {
    readyz_probe *p = l->probe;
    if (l->ws == p->home) {
        leg_home(l);
        return;
    }
    l->node.fn = leg_home;
    /* The home loop stops only after its connections are gone, and this
     * probe holds one open (inflight): the post is taken. */
    (void)p->home->mod->host->worker_post(p->home->w, &l->node);
}

static void on_leg_answer(void *arg, int status, const mcpg_coord_value *v) {
    readyz_leg *l = arg;
    (void)v;
    l->answered_ok = status == 0;
    leg_send_home(l);
}

/* On the loop asked. */
static void leg_ask(void *arg) {
    readyz_leg *l = arg;
    th_worker_state *ws = l->ws;
    const th_mod *m = ws->mod;
    if (ws->stopped || !ws->w ||
        m->co_ops->incr(m->co, ws->w, READYZ_KEY, sizeof READYZ_KEY - 1, 0, READYZ_KEY_TTL_MS,
                        on_leg_answer, l) != 0)
        leg_send_home(l); /* refused at once (stopping, queue full): unavailable here */
}

void th_readyz(th_conn *c, th_req *r, const char *url, size_t n) {
    th_worker_state *home = c->ws;
    const th_mod *m = home->mod;
    const mcpg_host *h = m->host;
    int required = query_has(url, n, "coordinator=required");
    if (answered_starting(c, r, home)) return;
    if (!m->co_ops || !home->w || home->stopped) {
        readyz_answer(c, r, "none", required);
        return;
    }
    readyz_probe *p = h->alloc(sizeof *p + m->nworkers * sizeof p->leg[0]);
    if (!p) {
        th_respond_status_error(c, r, 503);
        return;
    }
    *p = (readyz_probe){.r = r, .home = home, .legs = m->nworkers};
    r->readyz_required = (uint8_t)required;
    r->state = TH_REQ_INFLIGHT;
    c->inflight++;
    for (uint32_t i = 0; i < m->nworkers; i++) {
        readyz_leg *l = &p->leg[i];
        *l = (readyz_leg){.node = {.fn = leg_ask, .arg = l}, .probe = p, .ws = m->slots[i]};
        if (l->ws == home) leg_ask(l);
        else if (!l->ws || !l->ws->w || h->worker_post(l->ws->w, &l->node) != 0)
            leg_home(l); /* that loop has not started or has stopped: no session there */
    }
}
