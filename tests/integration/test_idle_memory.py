#!/usr/bin/python3
"""What an idle connection and an idle legacy session cost, and the session cap.

Resident memory (VmRSS) of a one-loop gateway is read before and after:
  * N_CONNS keep-alive connections, each having made one call and then left idle: the
    growth per connection must stay under CONN_BOUND_KIB;
  * N_SESSIONS legacy (2025-11-25) sessions, each initialize + notifications/initialized
    on one keep-alive connection, then left idle: the growth per session must stay under
    SESSION_BOUND_KIB.
The bounds are about 2-3x what was measured (docs/faults.md has the figures). Under ASan
the figures are only printed (its allocator's redzones and quarantine are not the
product's memory). Then, with max_sessions open, an initialize gets 503 (-32000) with
Retry-After; a DELETE frees a place and the next initialize is served.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (asan_build, Conn, Context, Gateway, base_manifest, check, check_eq,  # noqa: E402
                     expect_result, parse_args, run_tests, tool_call_request)
from test_legacy_wire import request_bytes  # noqa: E402

N_CONNS = 500
N_SESSIONS = 500
WARM_SESSIONS = 5
SPARE_SESSIONS = 5  # max_sessions = WARM + N + SPARE
CONN_BOUND_KIB = 4.0
SESSION_BOUND_KIB = 1.5


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def settled_rss(pid):
    """The smallest of a few readings a moment apart (a call's buffers may still be
    on their way back when the first is taken)."""
    time.sleep(0.2)
    vals = []
    for _ in range(3):
        vals.append(rss_kib(pid))
        time.sleep(0.1)
    return min(vals)



def legacy(port, conn, body, session=None):
    conn.send(request_bytes(port, body=body, session=session,
                            version="2025-11-25" if session else None))
    return conn.read_response()


def judge(what, n, before, after, bound, asan):
    """Print the growth per item; fail over the bound (not under ASan)."""
    per = (after - before) / float(n)
    print("%d %s: VmRSS %d -> %d KiB, %.2f KiB each (bound %.1f%s)"
          % (n, what, before, after, per, bound, ", not checked under ASan" if asan else ""))
    if not asan:
        check(per < bound, "%.2f KiB per %s (bound %.1f)" % (per, what, bound))


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "idle", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def open_session(port, conn):
    r = legacy(port, conn, INIT)
    check_eq(r.status, 200, "initialize (%r)" % r.body[:200])
    sid = r.header("mcp-session-id")
    check(sid, "initialize gave a session id")
    r = legacy(port, conn, INITIALIZED, session=sid)
    check_eq(r.status, 202, "notifications/initialized")
    return sid


def main():
    args = parse_args()
    ctx = Context(args)

    def t_idle_connections():
        m = base_manifest(gateway={"workers": 1}, server={"access_log": False})
        gw = Gateway(ctx, manifest=m, name="idleconns")
        with gw:
            with Conn(gw.port) as c:
                for i in range(50):
                    c.send(tool_call_request(gw.port, "echo", {"message": "hi"}, id=i))
                    r = c.read_response()
                    expect_result(r, r.rpc(), i, "warm-up call")
            before = settled_rss(gw.proc.pid)
            conns = []
            try:
                for i in range(N_CONNS):
                    c = Conn(gw.port)
                    conns.append(c)
                    c.send(tool_call_request(gw.port, "echo", {"message": "hi"}, id=i))
                    r = c.read_response()
                    expect_result(r, r.rpc(), i, "call on connection %d" % i)
                after = settled_rss(gw.proc.pid)
                nfd = len(os.listdir("/proc/%d/fd" % gw.proc.pid))
                check(nfd >= N_CONNS, "the gateway holds %d descriptors with %d connections "
                      "open" % (nfd, N_CONNS))
            finally:
                for c in conns:
                    c.close()
            asan = asan_build(gw.proc.pid)
        judge("idle connections", N_CONNS, before, after, CONN_BOUND_KIB, asan)

    def t_idle_sessions():
        cap = WARM_SESSIONS + N_SESSIONS + SPARE_SESSIONS
        m = base_manifest(gateway={"workers": 1},
                          server={"access_log": False, "max_sessions": cap})
        gw = Gateway(ctx, manifest=m, name="idlesessions")
        with gw:
            with Conn(gw.port) as c:
                sids = [open_session(gw.port, c) for _ in range(WARM_SESSIONS)]
                before = settled_rss(gw.proc.pid)
                sids += [open_session(gw.port, c) for _ in range(N_SESSIONS)]
                after = settled_rss(gw.proc.pid)
                sids += [open_session(gw.port, c) for _ in range(SPARE_SESSIONS)]
                check_eq(len(set(sids)), cap, "distinct session ids")
                # full: the decided answer
                r = legacy(gw.port, c, INIT)
                check_eq(r.status, 503, "initialize with max_sessions (%d) open" % cap)
                check(r.header("retry-after"), "the 503 says when to retry")
                check(r.header("mcp-session-id") is None, "no session id on a refusal")
                err = r.messages()[-1]["error"]
                check_eq(err["code"], -32000, "JSON-RPC code of the refusal")
                # the sessions open still serve
                r = legacy(gw.port, c, {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                           session=sids[0])
                check_eq(r.status, 200, "ping on an open session while full")
                # one ends: a place for the next
                data = ("DELETE /mcp HTTP/1.1\r\nHost: localhost:%d\r\nMcp-Session-Id: %s\r\n"
                        "MCP-Protocol-Version: 2025-11-25\r\n\r\n" % (gw.port, sids[1]))
                c.send(data.encode())
                check_eq(c.read_response().status, 200, "DELETE of a session")
                open_session(gw.port, c)
            asan = asan_build(gw.proc.pid)
        judge("idle sessions", N_SESSIONS, before, after, SESSION_BOUND_KIB, asan)

    return run_tests([("memory per idle connection", t_idle_connections),
                      ("memory per idle session; max_sessions full: 503", t_idle_sessions)],
                     ctx)


if __name__ == "__main__":
    sys.exit(main())
