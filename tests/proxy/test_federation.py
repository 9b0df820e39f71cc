"""Federation: two upstream MCP servers (server-everything over Streamable HTTP,
bound with prefixes "a" and "b" through backend_mcp), backend_ffi (libm sqrt)
and backend_everything behind one mcpg. One tools/list shows them all and each
is callable (once the upstreams' lists have arrived: the gateway listens
before it reaches them); an upstream killed in the middle of a call gives
errors naming its instance for its own tools only, which stay listed, while the
others keep answering; restarted on the same port, its tools answer again
within a bounded wait.

    test_federation.py --bin B --modules M --source S
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import proxylib as p  # noqa: E402
from proxylib import g  # noqa: E402

RECOVERY_TIMEOUT = float(os.environ.get("MCPG_FEDERATION_RECOVERY", "30"))  # a wait, not a speed test
# An upstream that is gone must be answered well within the client's patience.
DOWN_ANSWER_TIMEOUT = 10.0


def manifest(url_a, url_b):
    return {
        "gateway": {"name": "mcpg", "server": {"unary_json_fast_path": False}},
        "cluster": {"kind": "single_node"},
        "modules": [
            {"name": "alpha", "module": "backend_mcp", "inline_dispatch": True,
             "config": {"url": url_a}},
            {"name": "beta", "module": "backend_mcp", "inline_dispatch": True,
             "config": {"url": url_b}},
            {"name": "math", "module": "backend_ffi", "config": {"functions": [
                {"name": "sqrt", "library": "libm.so.6", "symbol": "sqrt", "returns": "double",
                 "description": "The square root of x.",
                 "params": [{"name": "x", "type": "double", "description": "a number"}]}]}},
            {"name": "everything", "module": "backend_everything", "config": {}},
        ],
        "bindings": [
            {"backend": "alpha", "prefix": "a"},
            {"backend": "beta", "prefix": "b"},
            {"backend": "math"},
            {"backend": "everything"},
        ],
    }


# One call per backend: (tool, arguments, text the answer must contain).
CALLS = {
    "alpha": ("a_echo", {"message": "to alpha"}, "Echo: to alpha"),
    "beta": ("b_echo", {"message": "to beta"}, "Echo: to beta"),
    "math": ("sqrt", {"x": 2.25}, "1.5"),
    "everything": ("test_simple_text", {}, "This is a simple text response for testing."),
}


def result_text(rpc):
    res = rpc.get("result") or {}
    return "\n".join(c.get("text", "") for c in res.get("content", []) if isinstance(c, dict))


def call(port, backend, id, timeout=g.IO_TIMEOUT):
    tool, args, _ = CALLS[backend]
    r = g.send_one(port, g.tool_call_request(port, tool, args, id=id), timeout=timeout)
    return r, r.rpc()


def expect_answers(port, backend, id):
    tool, _, want = CALLS[backend]
    r, rpc = call(port, backend, id)
    g.expect_result(r, rpc, id, "%s (%s)" % (tool, backend))
    text = result_text(rpc)
    g.check(want in text, "%s (%s): answer %r lacks %r" % (tool, backend, text[:300], want))


# backend_mcp names its instance this way in every error it answers with.
BETA = 'backend "beta"'
# beta's tools this test calls; they stay listed while beta is down
# (backend_mcp keeps an upstream's last-known lists).
BETA_TOOLS = ("b_echo", "b_get-sum", "b_trigger-long-running-operation")


def expect_down_error(rpc, tool, what):
    g.check("error" in rpc, "%s: %s answered %r, expected a JSON-RPC error" % (what, tool, rpc))
    msg = rpc["error"].get("message", "")
    g.check(BETA in msg, "%s: %s's error %r does not name the instance (%s)" % (what, tool, msg, BETA))
    print("  %s: %s: %s" % (what, tool, msg))


def t_all_listed_and_callable():
    port = STATE["gw"].port
    # The gateway listens before it reaches its upstreams; their tools join
    # the merged list when their lists arrive.
    want = ("a_echo", "a_get-sum", "sqrt", "test_simple_text") + BETA_TOOLS
    tools = [t["name"] for t in p.wait_listed(port, want, "both upstreams listed")]
    for up in (STATE["alpha"], STATE["beta"]):
        up.wait_roots_settled(1)
    g.check(not any(t in tools for t in ("echo", "get-sum")),
            "an upstream tool is listed without its prefix: %s" % tools)
    for i, backend in enumerate(CALLS):
        expect_answers(port, backend, 10 + i)


def t_killed_mid_call():
    port, beta = STATE["gw"].port, STATE["beta"]
    p.wait_listed(port, BETA_TOOLS, "beta listed before it is killed")
    box = {}

    def long_call():
        t0 = time.monotonic()
        try:
            r = g.send_one(port, g.tool_call_request(
                port, "b_trigger-long-running-operation", {"duration": 4, "steps": 4}, id=20),
                timeout=DOWN_ANSWER_TIMEOUT + 5)
            box["rpc"] = r.rpc()
        except Exception as e:  # reported below, in the main thread
            box["exc"] = e
        box["took"] = time.monotonic() - t0

    th = threading.Thread(target=long_call)
    th.start()
    time.sleep(1.0)
    beta.kill()
    th.join(DOWN_ANSWER_TIMEOUT + 10)
    g.check(not th.is_alive() and "exc" not in box,
            "the call in flight when beta died got no answer: %r" % box.get("exc"))
    expect_down_error(box["rpc"], "b_trigger-long-running-operation", "killed mid-call")

    t0 = time.monotonic()
    r, rpc = call(port, "beta", 21, timeout=DOWN_ANSWER_TIMEOUT)
    g.check(time.monotonic() - t0 < DOWN_ANSWER_TIMEOUT, "b_echo took too long to fail")
    expect_down_error(rpc, "b_echo", "upstream down")
    listed = {t["name"] for t in p.list_tools_raw(port, id=25)}
    g.check(set(BETA_TOOLS) <= listed, "while beta is down its last-known tools are not all listed: "
            "%s missing" % sorted(set(BETA_TOOLS) - listed))
    for i, backend in enumerate(("alpha", "math", "everything")):
        expect_answers(port, backend, 30 + i)


def t_recovers():
    STATE["beta"].start()
    expect_beta_back(40, sessions=2)


def t_idle_restart():
    """Killed and restarted while no call is in flight: the gateway's session
    with the old process is gone, and its tools must answer again all the
    same."""
    beta = STATE["beta"]
    beta.kill()
    beta.start()
    expect_beta_back(200, sessions=3)


def expect_beta_back(n, sessions):
    """Polls b_echo until it answers (bounded); once beta's session-start roots
    question (its sessions-th) is settled, calls every backend."""
    port = STATE["gw"].port
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    last = None
    while time.monotonic() < deadline:
        n += 1
        r, rpc = call(port, "beta", n)
        if "result" in rpc and CALLS["beta"][2] in result_text(rpc):
            break
        last = rpc
        time.sleep(0.25)
    else:
        g.fail("b_echo did not answer within %ss of beta's restart; last answer %r"
               % (RECOVERY_TIMEOUT, last))
    STATE["beta"].wait_roots_settled(sessions)
    for i, backend in enumerate(CALLS):
        expect_answers(port, backend, n + 100 + i)


def main():
    args = g.parse_args()
    ctx = g.Context(args)
    node = p.node_binary()
    p.need_module(ctx, "backend_mcp")
    alpha = STATE["alpha"] = p.Upstream(ctx, node, "alpha").start()
    STATE["beta"] = p.Upstream(ctx, node, "beta").start()
    try:
        with g.Gateway(ctx, manifest=manifest(alpha.url, STATE["beta"].url), name="federation") as gw:
            STATE["gw"] = gw
            rc = g.run_tests([
                ("one tools/list: two upstreams, backend_ffi, backend_everything; each callable",
                 t_all_listed_and_callable),
                ("beta killed mid-call: errors naming beta for its tools only", t_killed_mid_call),
                ("beta restarted on its port: its tools answer again", t_recovers),
                ("beta killed while idle and restarted on its port: its tools answer again",
                 t_idle_restart),
            ])
    finally:
        alpha.kill()
        STATE["beta"].kill()
    if rc == 0:
        ctx.cleanup()
    else:
        print("(temp files kept in %s)" % ctx.tmp)
    return rc


STATE = {}

if __name__ == "__main__":
    try:
        sys.exit(main())
    except g.TestFailure as e:
        print("FAIL %s" % e)
        sys.exit(1)
