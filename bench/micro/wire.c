/* bench/micro: the transport's request parsers on one body each, the real
 * functions of modules/transport_http (compiled in, on the kernel's own host
 * table, so the JSON scanner is the SDK's mcpg_json_* the gateway runs).
 *
 *   st-*  the 2026-07-28 stateless wire: th_mcp_check, everything the
 *         transport reads of a POST /mcp before it submits or answers
 *         (headers against the body, the envelope, _meta, params, the name)
 *   lg-*  the 2025-11-25 legacy wire: the header checks, th_lmsg_parse and,
 *         for what goes to the kernel, th_lmsg_target (params only: the kernel
 *         reads the target and arguments itself). An initialize comes without a session, so the router
 *         tries th_mcp_check first (it says "legacy"): counted too. Not
 *         counted: the handler's method compares, the session lookup and
 *         initialize's own reading of its params (static, behind a
 *         connection).
 * Batches: neither wire has them; the rows count the refusal (the body
 * validated, then "not supported" / "one message object"). */
#include <string.h>

#include "kernel.h"
#include "wire/legacy_parse.h"
#include "wire/mcp_stateless.h"
#include "micro.h"

#define META                                                               \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"
#define RPC "{\"jsonrpc\":\"2.0\","

typedef struct wire_req {
    const char *method, *name; /* the Mcp-Method and Mcp-Name headers (stateless) */
    const char *version;       /* the MCP-Protocol-Version header (none on an initialize) */
    const char *body;
    int expect;                /* th_mcp_action (st), or 1 submit / 2 notification / 0 refused (lg) */
    int initialize;            /* lg: no session yet, th_mcp_check runs first */
} wire_req;

static const char ACCEPT[] = "application/json, text/event-stream", CTYPE[] = "application/json";

static th_hval hval(const char *s) {
    th_hval v = {0};
    if (s) v = (th_hval){.p = s, .n = strlen(s), .present = 1};
    return v;
}

static th_mcp_headers headers_of(const wire_req *q) {
    th_mcp_headers hd = {.content_type = hval(CTYPE), .accept = hval(ACCEPT),
                         .protocol_version = hval(q->version),
                         .method = hval(q->method), .name = hval(q->name)};
    return hd;
}

static char name_buf[TH_NAME_MAX];

/* The stateless check; the headers are built once (the router fills them
 * from the parsed request, not counted here either way). */
typedef struct st_ctx {
    wire_req q;
    th_mcp_headers hd;
    size_t n;
} st_ctx;

static int st_setup(void *arg) {
    st_ctx *c = arg;
    c->hd = headers_of(&c->q);
    c->n = strlen(c->q.body);
    return 0;
}

static int st_op(void *arg) {
    st_ctx *c = arg;
    th_mcp_verdict v;
    th_mcp_check(&HOST, &c->hd, c->q.body, c->n, name_buf, &v);
    return (int)v.action != c->q.expect;
}

/* The legacy POST's parsing, in the order th_legacy_post does it. */
static int lg_op(void *arg) {
    st_ctx *c = arg;
    if (c->q.initialize) {
        th_mcp_verdict v;
        th_mcp_check(&HOST, &c->hd, c->q.body, c->n, name_buf, &v);
        if (!v.legacy) return 1;
    }
    const th_hval *acc = &c->hd.accept, *ct = &c->hd.content_type;
    if (!th_accept_allows_json(acc->p, acc->n) || !th_accept_allows_sse(acc->p, acc->n) ||
        !th_content_type_is_json(ct->p, ct->n))
        return 1;
    th_lmsg m;
    int pr = th_lmsg_parse(&HOST, c->q.body, c->n, &m);
    if (pr != 1 || !(m.has & 32)) return c->q.expect != 0;
    if (!(m.has & 1)) return c->q.expect != 2;
    mcpg_call_desc d = {0};
    if (!c->q.initialize) th_lmsg_target(&HOST, &m, name_buf, sizeof name_buf, &d);
    /* the kernel reads the target from params (kernel/judge.c: the inline
     * and audit rows count it): this wire hands params only */
    return c->q.expect != 1 || (c->q.name && !d.params_json);
}

#define ST(m, nm, body, act) {.q = {m, nm, "2026-07-28", body, act, 0}}
static st_ctx ST_REQS[] = {
    ST("server/discover", NULL, RPC "\"id\":1,\"method\":\"server/discover\",\"params\":{" META "}}",
       TH_MCP_DISCOVER),
    ST("tools/list", NULL, RPC "\"id\":2,\"method\":\"tools/list\",\"params\":{" META "}}", TH_MCP_SUBMIT),
    ST("tools/call", "echo",
       RPC "\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
           "\"arguments\":{\"message\":\"hello\"}," META "}}",
       TH_MCP_SUBMIT),
    ST("resources/read", "test://static/resource/1",
       RPC "\"id\":8,\"method\":\"resources/read\",\"params\":{\"uri\":\"test://static/resource/1\"," META "}}",
       TH_MCP_SUBMIT),
    ST("prompts/get", "simple_prompt",
       RPC "\"id\":9,\"method\":\"prompts/get\",\"params\":{\"name\":\"simple_prompt\","
           "\"arguments\":{\"topic\":\"tests\"}," META "}}",
       TH_MCP_SUBMIT),
    ST("notifications/cancelled", NULL,
       RPC "\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7,\"reason\":\"user\"," META "}}",
       TH_MCP_ACCEPTED),
    ST(NULL, NULL,
       "[" RPC "\"id\":2,\"method\":\"tools/list\",\"params\":{" META "}}," RPC
       "\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
       "\"arguments\":{\"message\":\"hello\"}," META "}}]",
       TH_MCP_ERROR),
};

#define LG(nm, body, expect, init) {.q = {NULL, nm, (init) ? NULL : "2025-11-25", body, expect, init}}
static st_ctx LG_REQS[] = {
    LG(NULL,
       RPC "\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\","
           "\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1.0\"}}}",
       1, 1),
    LG(NULL, RPC "\"id\":2,\"method\":\"tools/list\",\"params\":{}}", 1, 0),
    LG("echo", RPC "\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
                   "\"arguments\":{\"message\":\"hello\"}}}", 1, 0),
    LG("test://static/resource/1",
       RPC "\"id\":8,\"method\":\"resources/read\",\"params\":{\"uri\":\"test://static/resource/1\"}}", 1, 0),
    LG("simple_prompt", RPC "\"id\":9,\"method\":\"prompts/get\",\"params\":{\"name\":\"simple_prompt\","
                            "\"arguments\":{\"topic\":\"tests\"}}}", 1, 0),
    LG(NULL, RPC "\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7,\"reason\":\"user\"}}", 2, 0),
    LG(NULL, "[" RPC "\"id\":2,\"method\":\"tools/list\",\"params\":{}}," RPC
             "\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
             "\"arguments\":{\"message\":\"hello\"}}}]", 0, 0),
};

#define V(name, op, ctx) {name, op, ctx, st_setup, NULL, NULL}
const micro_variant MICRO_WIRE[] = {
    V("st-discover", st_op, &ST_REQS[0]), V("st-list", st_op, &ST_REQS[1]),
    V("st-call", st_op, &ST_REQS[2]),     V("st-read", st_op, &ST_REQS[3]),
    V("st-prompt", st_op, &ST_REQS[4]),   V("st-notify", st_op, &ST_REQS[5]),
    V("st-batch", st_op, &ST_REQS[6]),
    V("lg-initialize", lg_op, &LG_REQS[0]), V("lg-list", lg_op, &LG_REQS[1]),
    V("lg-call", lg_op, &LG_REQS[2]),       V("lg-read", lg_op, &LG_REQS[3]),
    V("lg-prompt", lg_op, &LG_REQS[4]),     V("lg-notify", lg_op, &LG_REQS[5]),
    V("lg-batch", lg_op, &LG_REQS[6]),
    {NULL, NULL, NULL, NULL, NULL, NULL},
};
