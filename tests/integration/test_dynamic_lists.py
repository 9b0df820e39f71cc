#!/usr/bin/python3
"""Lists that change while the gateway serves: a backend whose lists change
(MCPG_MOD_DYNAMIC_LISTS, fixture fx_dyn) says so; the merged lists are rebuilt and
swapped without stopping a call in flight, clients listening on a legacy session's
stream are told, a name that is not valid or that a static backend already offers is
logged and left out, and a rename for a name the backend does not offer yet is no
error."""
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (IO_TIMEOUT, Context, Conn, Gateway, base_manifest, with_fixtures,  # noqa: E402
                     build_request, call_tool, check, check_eq, expect_error, expect_result,
                     parse_args, run_tests, send_one, stateless_request)
from test_legacy_wire import (events, head_of, initialize, read_stream, request,  # noqa: E402
                              resume, resume_when_free)

SLOW_MS = 4000  # dyn_slow: long enough to be in flight across the flip and the rebuild


def tool_names(port):
    r = send_one(port, stateless_request(port, "tools/list", {}))
    return sorted(t["name"] for t in expect_result(r, r.rpc(), 1, "tools/list")["tools"])


def gauge(port, name):
    """One unlabelled sample of GET /metrics (metrics_prometheus)."""
    r = send_one(port, build_request(port, "GET", "/metrics"))
    check_eq(r.status, 200, "GET /metrics (%r)" % r.body[:200])
    mt = re.search(r"(?m)^%s (\S+)$" % re.escape(name), r.body.decode())
    check(mt, "no sample %s in /metrics" % name)
    return float(mt.group(1))


def text_of(port, name, id, arguments=None):
    r, rpc = call_tool(port, name, arguments or {}, id=id)
    return expect_result(r, rpc, id, name)["content"][0]["text"]


def main():
    args = parse_args()
    ctx = Context(args)
    m = base_manifest()
    m["modules"].append({"name": "dyn", "module": "fx_dyn", "config": {"slow_ms": SLOW_MS}})
    # what the tests wait on: calls in flight, the streams the gateway holds open
    m["modules"].append({"name": "prom", "module": "metrics_prometheus"})
    m["bindings"] = [{"backend": "mock"}, {"backend": "dyn", "rename": {"dyn_two": "two"}}]
    gw = Gateway(ctx, manifest=with_fixtures(ctx, m), name="dynamic").start()
    p = gw.port

    def wait_for(want, what, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            names = tool_names(p)
            if want(names):
                return names
            time.sleep(0.05)
        check(False, "%s: %r" % (what, tool_names(p)))

    def wait_until(pred, what, timeout=IO_TIMEOUT):
        deadline = time.monotonic() + timeout
        while not pred():
            check(time.monotonic() < deadline, "timed out after %ss waiting for %s" % (timeout, what))
            time.sleep(0.02)

    def streams_closed():
        """Until the gateway has seen every stream's client go (its GET slots free)."""
        wait_until(lambda: gauge(p, "mcpg_http_streams") == 0, "mcpg_http_streams 0")

    def t_swap_under_a_call():
        check_eq(tool_names(p), ["dyn_flip", "dyn_one", "dyn_slow", "echo"], "the first lists")
        slow = {}
        th = threading.Thread(target=lambda: slow.update(text=text_of(p, "dyn_slow", 7)))
        th.start()
        # dyn_slow submitted (routed by the first lists at once) and running on the pool
        wait_until(lambda: gauge(p, "mcpg_calls_in_flight") >= 1, "dyn_slow in flight")
        check_eq(text_of(p, "dyn_flip", 8), "flipped", "flip")
        names = wait_for(lambda n: "two" in n, "the rebuilt lists show the renamed dyn_two")
        check_eq(names, ["dyn_flip", "dyn_slow", "echo", "two"],
                 "dyn_one gone; the invalid name and the duplicate echo left out")
        check("text" not in slow, "dyn_slow (%d ms) still in flight once the lists were "
              "rebuilt" % SLOW_MS)
        th.join(SLOW_MS / 1000.0 + IO_TIMEOUT)
        check_eq(slow.get("text"), "dyn_slow", "the call in flight kept its route")
        check_eq(text_of(p, "two", 9), "dyn_two", "the renamed new tool is routed")
        check_eq(text_of(p, "echo", 10, {"message": "hi"}), "Echo: hi", "echo stays with the static backend")
        r, rpc = call_tool(p, "dyn_one", {}, id=11)
        expect_error(r, 200, -32602, "a tool that left the lists", id=11)
        err = gw.stderr()
        check("not valid!" in err and "left out" in err, "the bad name is logged")
        check("offered twice" in err, "the duplicate is logged")

    def t_listeners_told():
        _, sid = initialize(p)
        with Conn(p) as g:
            request(p, "GET", session=sid, accept="text/event-stream", conn=g)
            head = g._read_until(b"\r\n\r\n").decode()
            check(head.startswith("HTTP/1.1 200"), "GET stream opens: %r" % head)
            r = request(p, body={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                 "params": {"name": "dyn_flip", "arguments": {}}}, session=sid)
            check_eq(r.status, 200, "flip on the session")
            text, _ = read_stream(g, until="list_changed")
            check("notifications/tools/list_changed" in text, "told on the GET stream: %r" % text)
            # told after the swap: listing now shows the new lists
            check("dyn_one" in tool_names(p), "back to the first lists once told")

    def t_missed_news_replayed():
        """The GET stream drops; a list change while it is away is kept in the
        session's buffer and replayed to the GET that resumes with its id."""
        _, sid = initialize(p)
        g = Conn(p)
        request(p, "GET", session=sid, accept="text/event-stream", conn=g)
        check_eq(head_of(g)[0], 200, "GET stream opens")
        text, _ = read_stream(g, until="\n\n")
        prime = events(text)[0][0]
        check(prime, "the GET stream's priming event has an id: %r" % text)
        g.close()
        streams_closed()  # the gateway saw the drop: the session's GET slot is free
        r = request(p, body={"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                             "params": {"name": "dyn_flip", "arguments": {}}}, session=sid)
        check_eq(r.status, 200, "flip while no GET is open")
        wait_for(lambda n: "two" in n, "the lists rebuilt")
        # The news is kept once the stream has an event after the priming one: a GET
        # resuming after that event is 400 until it exists (then it shows the stream:
        # closed at once, and waited out like the drop).
        after_news = prime.rsplit("_", 1)[0] + "_1"

        def news_kept():
            with resume(p, sid, after_news) as probe:
                st = head_of(probe)[0]
            check(st in (200, 400), "a GET resuming after the news: %d" % st)
            return st == 200
        wait_until(news_kept, "the list change kept in the stream's buffer")
        streams_closed()
        c, status, head = resume_when_free(p, sid, prime)
        with c:
            check_eq(status, 200, "GET with the priming id resumes the standalone stream (%r)" % head)
            text, _ = read_stream(c, until="list_changed")
            evs = [e for e in events(text) if "list_changed" in e[1]]
            check(len(evs) == 1, "the missed list change, once: %r" % text)
            check(evs[0][0].rsplit("_", 1)[0] == prime.rsplit("_", 1)[0],
                  "an event of the same stream: %r after %r" % (evs[0][0], prime))
            second = resume(p, sid, prime)
            expect_error(second.read_response(), 409, -32000, "a second GET on that stream",
                         check_id=False)
            second.close()
        streams_closed()
        with Conn(p) as fresh:  # without Last-Event-ID: a new stream, the old buffer goes
            request(p, "GET", session=sid, accept="text/event-stream", conn=fresh)
            check_eq(head_of(fresh)[0], 200, "a plain GET after the resumed one closed")
        request(p, "DELETE", session=sid)

    def t_stop():
        gw.stop()

    return run_tests([
        ("lists swapped under a call in flight; bad names left out", t_swap_under_a_call),
        ("a legacy session's stream is told after the rebuild", t_listeners_told),
        ("news missed while the GET stream was away: replayed on resumption", t_missed_news_replayed),
        ("the gateway stops cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
