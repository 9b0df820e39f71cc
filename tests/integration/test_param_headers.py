#!/usr/bin/python3
"""Custom headers (2026-07-28 wire): a tool's x-mcp-header arguments travel in
Mcp-Param-* headers as well as in the body, and the two must agree.

Against a stateless HTTP upstream (fake_mcp_upstream.py --param-tools) that lists
tools with valid and invalid annotations and itself refuses a call whose Mcp-Param
headers are wrong: the gateway lists only the valid ones (a warning names each other
tool, its backend and why); a client's headers are checked against its arguments
(plain, base64, numbers by value, booleans; a mismatch, a missing header, invalid
base64 or a header without its value is HTTP 400 and -32020 naming the header; a null
or absent value needs none; an unknown Mcp-Param header is ignored); the legacy wire
is not checked; toward the upstream the gateway sends the headers a conforming client
sends (on the loops' direct path and on the I/O thread's), and an upstream's own 400
and -32020 reaches the client as HTTP 400."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, _child_setup, build_request, check,  # noqa: E402
                     check_eq, expect_error, expect_result, parse_args, rpc_body, run_tests,
                     send_one, stateless_headers, stop_process)
from test_backend_mcp import Fake, fake_port, mcp_manifest, session, tool_names, wait_tool  # noqa: E402
from test_legacy_wire import answer, request  # noqa: E402


def call(port, tool, arguments, params=(), id=1):
    """A stateless tools/call with extra (name, value) headers."""
    body = rpc_body("tools/call", {"name": tool, "arguments": arguments}, id=id)
    headers = stateless_headers("tools/call", tool) + list(params)
    return send_one(port, build_request(port, headers=headers, body=body))


def text_of(r, id, what):
    return expect_result(r, r.rpc(), id, what)["content"][0]["text"]


def seen_headers(r, id, what):
    """The Mcp-Param headers the upstream's route tool says it got."""
    t = text_of(r, id, what)
    check(t.startswith("route: "), "%s: %r" % (what, t))
    return json.loads(t[len("route: "):])


def refused(r, header, what):
    err = expect_error(r, 400, -32020, what, check_id=False)
    check(header in err["message"], "%s: the message names %s: %r" % (what, header, err))


def main():
    args = parse_args()
    ctx = Context(args)
    gws, procs = [], []
    fake = Fake(ctx, "params")
    pf = ctx.path("params.port")
    proc = subprocess.Popen([sys.executable] + fake.argv(
        "--http", "0", "--port-file", pf, "--wire", "stateless", "--param-tools"),
        preexec_fn=_child_setup)
    procs.append(proc)
    url = "http://127.0.0.1:%d/mcp" % fake_port(pf)

    def start(name, inline):
        g = Gateway(ctx, manifest=mcp_manifest({"url": url}, timeout_ms=5000, inline=inline),
                    name=name).start()
        gws.append(g)
        wait_tool(g.port, "up_route")
        return g

    g = start("direct", True)      # the loops' direct path to the upstream
    pooled = start("pooled", False)  # the I/O thread's path

    def t_listed():
        names = tool_names(g.port)
        check("up_route" in names and "up_refuse" in names, "valid tools listed: %r" % names)
        for bad in ("bad_number", "bad_dup", "bad_items", "bad_empty"):
            check("up_" + bad not in names, "%s left out of tools/list: %r" % (bad, names))
            r = call(g.port, "up_" + bad, {})
            err = r.rpc().get("error") or {}
            check("Unknown tool" in err.get("message", ""), "%s not callable: %r" % (bad, err))
        msgs = [json.loads(ln).get("msg", "") for ln in g.stderr().splitlines()
                if ln.startswith("{")]
        for bad, why in (("bad_number", "not integer, string or boolean"),
                         ("bad_dup", "declared twice"), ("bad_items", "not on a property"),
                         ("bad_empty", "empty")):
            line = [m for m in msgs if 'tool "%s"' % bad in m and "x-mcp-header" in m]
            check(line and 'backend "up"' in line[0] and why in line[0],
                  "a warning names %s, its backend and why (%s): %r" % (bad, why, line))

    def t_accepted():
        r = call(g.port, "up_route", {"region": "us-west", "count": 42, "flag": True},
                 [("Mcp-Param-Region", "us-west"), ("Mcp-Param-Count", "42.0"),
                  ("mcp-param-flag", " true ")], id=2)
        check_eq(seen_headers(r, 2, "plain headers"),
                 {"mcp-param-region": "us-west", "mcp-param-count": "42",
                  "mcp-param-flag": "true"}, "the upstream got the headers a client sends")
        r = call(g.port, "up_route", {"region": "café", "note": "n"},
                 [("Mcp-Param-Region", "=?base64?Y2Fmw6k=?=")], id=3)
        check_eq(seen_headers(r, 3, "a base64 header"),
                 {"mcp-param-region": "=?base64?Y2Fmw6k=?="}, "non-ASCII sent as base64")
        r = call(g.port, "up_route", {"region": " padded"},
                 [("Mcp-Param-Region", "=?base64?IHBhZGRlZA==?=")], id=4)
        check_eq(seen_headers(r, 4, "leading space"),
                 {"mcp-param-region": "=?base64?IHBhZGRlZA==?="}, "leading space as base64")
        # a null or absent value needs no header; an unknown Mcp-Param header is ignored
        r = call(g.port, "up_route", {"region": None, "note": "x"},
                 [("Mcp-Param-Unknown", "whatever")], id=5)
        check_eq(seen_headers(r, 5, "null value, unknown header"), {}, "nothing to mirror")

    def t_refused():
        before = len(fake.calls("route"))
        cases = [
            ({"region": "us-west"}, [("Mcp-Param-Region", "eu-west")], "Mcp-Param-Region",
             "a different value"),
            ({"region": "us-west"}, [], "Mcp-Param-Region", "the header missing"),
            ({"region": "Hello"}, [("Mcp-Param-Region", "=?base64?SGVsbG8?=")],
             "Mcp-Param-Region", "bad base64 padding"),
            ({"region": "Hello"}, [("Mcp-Param-Region", "=?base64?SGVs!!!bG8=?=")],
             "Mcp-Param-Region", "not the base64 alphabet"),
            ({"region": "a", "count": 7}, [("Mcp-Param-Region", "a"), ("Mcp-Param-Count", "8")],
             "Mcp-Param-Count", "another number"),
            ({"region": "a", "flag": False},
             [("Mcp-Param-Region", "a"), ("Mcp-Param-Flag", "true")], "Mcp-Param-Flag",
             "another boolean"),
            ({"note": "no region"}, [("Mcp-Param-Region", "a")], "Mcp-Param-Region",
             "a header whose value the body lacks"),
        ]
        for i, (a, hdrs, header, what) in enumerate(cases):
            refused(call(g.port, "up_route", a, hdrs, id=10 + i), header, what)
        # the same header twice, the first one right: an intermediary keeping the
        # last would act on a value nobody checked
        refused(call(g.port, "up_route", {"region": "us-west"},
                     [("Mcp-Param-Region", "us-west"), ("mcp-param-region", "eu-west")], id=19),
                "Mcp-Param", "a header sent twice")
        check_eq(len(fake.calls("route")), before, "no refused call reached the upstream")

    def t_legacy():
        sid = session(g.port)
        r = request(g.port, body={"jsonrpc": "2.0", "id": 20, "method": "tools/call",
                                  "params": {"name": "up_route",
                                             "arguments": {"region": "legacy", "count": 3}}},
                    session=sid, extra=[("Mcp-Param-Region", "not-checked")])
        check_eq(r.status, 200, "the legacy wire is not checked (%r)" % r.body[:300])
        res = answer(r)
        check("result" in res, "a result: %r" % res)
        got = json.loads(res["result"]["content"][0]["text"][len("route: "):])
        check_eq(got, {"mcp-param-region": "legacy", "mcp-param-count": "3"},
                 "the gateway built the upstream's headers from the body")

    def t_io_thread_path():
        r = call(pooled.port, "up_route", {"region": "pooled", "flag": False},
                 [("Mcp-Param-Region", "pooled"), ("Mcp-Param-Flag", "false")], id=30)
        check_eq(seen_headers(r, 30, "through the I/O thread"),
                 {"mcp-param-region": "pooled", "mcp-param-flag": "false"},
                 "the I/O thread's POST carries the headers too")

    def t_upstream_400():
        for gw, what in ((g, "direct path"), (pooled, "I/O thread")):
            r = call(gw.port, "up_refuse", {}, id=40)
            refused(r, "Mcp-Param-Secret", "the upstream's 400 and -32020 (%s)" % what)

    def t_no_passthrough():
        # a client's credentials end at the gateway: none of its headers reach the upstream
        secret = [("Authorization", "Bearer client-token"), ("X-API-Key", "client-key"),
                  ("Cookie", "session=client"), ("Proxy-Authorization", "Basic Y2xpZW50")]
        for gw, what in ((g, "direct path"), (pooled, "I/O thread")):
            r = call(gw.port, "up_headers", {}, secret, id=60)
            names = json.loads(text_of(r, 60, "the upstream's headers (%s)" % what)[len("headers: "):])
            leaked = [n for n in names if n in ("authorization", "x-api-key", "cookie",
                                                "proxy-authorization")]
            check(not leaked, "the client's %r reached the upstream (%s): %r" % (leaked, what, names))
            check("mcp-method" in names, "the upstream's headers were read (%s): %r" % (what, names))

    def t_stop():
        for gw in gws:
            gw.stop()
        for p in procs:
            stop_process(p)

    try:
        return run_tests([
            ("invalid annotations: left out of tools/list, not callable, a warning each",
             t_listed),
            ("valid headers accepted: plain, base64, numbers by value, booleans", t_accepted),
            ("mismatched, missing, bad base64 or unexpected headers: HTTP 400, -32020",
             t_refused),
            ("the legacy wire is not checked; the upstream still gets its headers", t_legacy),
            ("the I/O thread's path sends the headers too", t_io_thread_path),
            ("an upstream's HTTP 400 and -32020 reaches the client as HTTP 400", t_upstream_400),
            ("a client's credentials never reach the upstream", t_no_passthrough),
            ("everything stops cleanly", t_stop),
        ], ctx)
    finally:
        for p in procs:
            if p.poll() is None:
                stop_process(p)


if __name__ == "__main__":
    sys.exit(main())
