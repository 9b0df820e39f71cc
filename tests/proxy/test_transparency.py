"""Proxy transparency: the same client sweep (sweep.mjs: every tool called,
every resource read, every prompt got, sampling, elicitation and roots
answered, progress and notifications watched) run directly against
@modelcontextprotocol/server-everything and through mcpg must give the same
record, once the narrow normalisation in proxylib.py is applied.

    test_transparency.py --bin B --modules M --source S --case http|stdio|v2-http|v2-stdio

http      the v1 SDK client on the session wire; upstream over Streamable HTTP,
          conf/proxy.json. The direct and the proxied sweep hit the same
          upstream process (each in its own session).
stdio     the same with conf/proxy-stdio.json: the upstream is a program mcpg
          runs; the direct sweep runs the same program itself.
v2-http   the v2 client pinned to the stateless wire (2026-07-28) through mcpg
v2-stdio  (the cross-wire path: sampling and elicitation come back as
          input_required results), compared with the v1 client's direct sweep
          cut to what that wire can express (proxylib.for_stateless).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import proxylib as p  # noqa: E402
from proxylib import g  # noqa: E402

CASES = ("http", "stdio", "v2-http", "v2-stdio")


def parse_cli():
    def extra(ap):
        ap.add_argument("--case", required=True, choices=CASES)
    return g.parse_args(extra)


def proxied(ctx, conf, env, client, label, check_listing=None, task_tools=None):
    """Starts mcpg with conf/<conf>, waits until it lists every tool the
    direct sweep saw (the upstream is reached after the gateway listens),
    hands that raw listing to check_listing, and runs the sweep through it."""
    p.need_module(ctx, "backend_mcp")
    config = os.path.join(ctx.source, "conf", conf)
    want = [t["name"] for t in STATE["direct"]["list/tools"]["result"]]
    with g.Gateway(ctx, config=config, env=p.gateway_env(env), name="proxy") as gw:
        raw = p.wait_listed(gw.port, want, "mcpg with %s" % conf)
        if check_listing:
            check_listing(raw)
        return p.sweep(ctx, NODE, client, label, url="http://127.0.0.1:%d/mcp" % gw.port,
                       task_tools=task_tools)


def t_http_direct():
    STATE["up"] = p.Upstream(CTX, NODE).start()
    rec = p.sweep(CTX, NODE, "v1", "http-direct", url=STATE["up"].url)
    STATE["direct"] = p.normalise(rec)
    p.expect_complete(STATE["direct"], "direct")
    p.expect_exchanges(STATE["direct"], "direct")


def t_stdio_direct():
    STATE["cmd"] = p.stdio_wrapper(CTX, NODE)
    rec = p.sweep(CTX, NODE, "v1", "stdio-direct", stdio=STATE["cmd"])
    STATE["direct"] = p.normalise(rec)
    p.expect_complete(STATE["direct"], "direct")
    p.expect_exchanges(STATE["direct"], "direct")


def upstream_env():
    if "up" in STATE:
        return "proxy.json", {"MCPG_UPSTREAM_URL": STATE["up"].url}
    return "proxy-stdio.json", {"MCPG_UPSTREAM_CMD": STATE["cmd"]}


def t_v1_through_mcpg():
    g.check("direct" in STATE, "the direct sweep failed; nothing to compare with")
    conf, env = upstream_env()
    rec = p.normalise(proxied(CTX, conf, env, "v1", "v1-proxied"))
    p.expect_same(p.for_gateway_session(STATE["direct"]), rec, "v1 client, %s" % conf)


def t_v2_through_mcpg():
    g.check("direct" in STATE, "the direct sweep failed; nothing to compare with")
    conf, env = upstream_env()
    direct = STATE["direct"]
    tasks = p.task_tools(direct)
    g.check(tasks, "the direct listing shows no task-augmented tool: nothing for the skip rule to do")

    def listing(raw):
        p.expect_raw_execution(direct, raw, "raw stateless tools/list through mcpg")
    rec = p.stateless_record(p.normalise(proxied(CTX, conf, env, "v2", "v2-proxied",
                                                 check_listing=listing, task_tools=tasks)))
    p.expect_exchanges(rec, "v2 through mcpg", session=False)
    p.expect_same(p.for_v2_client(p.for_stateless(direct)), rec, "v2 stateless client, %s" % conf)


def main():
    global CTX, NODE
    args = parse_cli()
    CTX = g.Context(args)
    NODE = p.node_binary()
    direct = t_http_direct if args.case.endswith("http") else t_stdio_direct
    through = t_v2_through_mcpg if args.case.startswith("v2") else t_v1_through_mcpg
    tests = [("%s: the v1 client directly against server-everything" % args.case, direct),
             ("%s: the same sweep through mcpg" % args.case, through)]
    try:
        rc = g.run_tests(tests)
    finally:
        if "up" in STATE:
            STATE["up"].kill()
    if rc == 0:
        CTX.cleanup()
    else:
        print("(sweep records and logs kept in %s)" % CTX.tmp)
    return rc


STATE = {}
CTX = NODE = None

if __name__ == "__main__":
    try:
        sys.exit(main())
    except g.TestFailure as e:
        print("FAIL %s" % e)
        sys.exit(1)
