/* transport_http: GET /mcp with Last-Event-ID, the legacy wire's
 * resumption of a dropped POST stream (replay.h).
 *
 * An event id is "<replica>_<worker>_<stream>_<seq>": the gateway process
 * and the loop that run the stream, its number there, the event's place in
 * it. A stream of another replica is relayed from there (relay.h). A GET
 * naming a stream on this
 * loop is answered here: the events after that id, then the live ones. A
 * GET naming another loop's stream moves its connection to that loop (its
 * calls and buffers never leave their loop): once every answer before it on
 * the connection is written, the socket is duplicated, the connection closed
 * here, and the duplicate and the request posted to that loop
 * (host->worker_post), which adopts the socket as a new connection and
 * answers the request there. Input the client pipelined after that GET and
 * this loop had already read is dropped.
 *
 * 400 for a malformed id or one naming no stream of this session (or one
 * not yet sent), 409 when the stream is being shown to a client already. */
#include "wire/wire.h"
#include "wire/legacy_parse.h"
#include "wire/relay.h"
#include "wire/replay.h"
#include "wire/stream.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define MSG(s) TH_LIT("\"" s "\"")

void th_resume_refuse(th_conn *c, th_req *r, int status) {
    if (status == 409)
        th_respond_rpc_error(c, r, 409, 0, TH_LIT("null"), MCPG_RPC_SERVER_ERROR,
                             MSG("Conflict: that stream is connected already"), NULL, 0);
    else
        th_respond_rpc_error(c, r, 400, 0, TH_LIT("null"), MCPG_RPC_SERVER_ERROR,
                             MSG("Bad Request: Last-Event-ID names no stream of this session that can be resumed"),
                             NULL, 0);
}

static void unknown(th_conn *c, th_req *r) { th_resume_refuse(c, r, 400); }

void th_resume(th_conn *c, th_req *r, const char *id, size_t n) {
    th_worker_state *ws = c->ws;
    th_event_ref ref;
    if (!th_event_id_parse(id, n, &ref) || !ref.replica) {
        unknown(c, r);
        return;
    }
    if (ref.replica != ws->mod->replica) { /* another gateway of the fleet runs it */
        th_relay_open(c, r, &ref);
        return;
    }
    uint32_t w = ref.worker, no = ref.no, seq = ref.seq;
    if (w >= ws->mod->nworkers) {
        unknown(c, r);
        return;
    }
    if (w != ws->index) { /* the stream lives on another loop: go there */
        r->move_to = w;
        r->state = TH_REQ_INFLIGHT;
        c->handover = r;
        c->close_after = 1; /* read nothing more here */
        th_mark_dirty(c);
        return;
    }
    th_rstream *rs = th_replay_find(ws, no);
    int refused = th_replay_showable(rs, r->sid, strlen(r->sid), seq);
    if (refused) {
        th_resume_refuse(c, r, refused);
        return;
    }
    th_replay_attach(ws, rs, r, seq);
}

/* ---- moving a connection to another loop ------------------------------------------ */

typedef struct move {
    mcpg_post node;
    th_worker_state *to;
    th_req *r;
    int fd;
    th_tls_conn tls; /* a TLS connection's session goes along (one loop at a time) */
} move;

/* On the stream's loop: adopt the socket, answer the request here. */
static void on_move(void *arg) {
    move *mv = arg;
    th_worker_state *ws = mv->to;
    th_req *r = mv->r;
    int fd = mv->fd;
    th_tls_conn tls = mv->tls;
    ws->mod->host->free(mv);
    th_conn *c = NULL;
    if (ws->draining || ws->stopped || th_worker_start(ws) || th_conn_adopt(ws, fd, &tls, &c)) {
        if (!c) close(fd);
        th_tls_conn_free(ws->mod->host, &tls); /* not taken: the client sees its connection close */
        r->ws = ws;
        th_req_put(ws, r);
        return;
    }
    r->conn = c;
    r->ws = ws;
    r->state = TH_REQ_PARSING;
    r->loaded = r->changed = 0; /* this loop looks the session up for itself */
    r->session_op_status = 0;
    th_conn_enqueue(c, r);
    th_legacy_get(c, r);
    th_conn_advance(c);
}

void th_handover(th_conn *c) {
    th_worker_state *ws = c->ws;
    const mcpg_host *h = ws->mod->host;
    th_req *r = c->handover;
    c->handover = NULL;
    uv_os_fd_t fd;
    int nfd = uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    c->qhead = r->next;
    if (!c->qhead) c->qtail = NULL;
    c->qlen--;
    r->next = NULL;
    r->conn = NULL;
    move *mv = nfd >= 0 ? h->calloc(1, sizeof *mv) : NULL;
    if (mv) { /* the session leaves with the socket: closing here frees nothing of it */
        mv->tls = c->tls;
        memset(&c->tls, 0, sizeof c->tls);
    }
    th_conn_close(c); /* the duplicate keeps the socket open: no FIN, no RST */
    if (mv) {
        mv->to = ws->mod->slots[r->move_to];
        mv->r = r;
        mv->fd = nfd;
        mv->node.fn = on_move;
        mv->node.arg = mv;
        if (h->worker_post(mv->to->w, &mv->node) == 0) return;
        th_tls_conn_free(h, &mv->tls);
        h->free(mv);
    }
    if (nfd >= 0) close(nfd); /* the client sees its connection close and may try again */
    th_req_put(ws, r);
}
