#!/usr/bin/env python3
"""A fleet on NATS: nats-server and two gateways on conf/fleet-nats.json.

The test starts a real nats-server (JetStream, a temp folder, free ports; stopped
by pid) and two gateways A and B on the shipped manifest, sharing its bucket:
  * the governed scenario across both gateways, every limit global: capped never
    more than 8 in flight on either mock and at most 8 per 100 ms admitted in all;
    rated within the bounds its edges allow (test_limits.py's method, over the
    rows of both gateways); budgeted exactly 1000 over both;
  * a legacy session: initialize on A, tools/call on B, the GET stream on A,
    DELETE on B: A's stream ends;
  * NATS messages per legacy call, from the server's /varz (in_msgs + out_msgs
    over 200 calls on one session, less what the fleet moves idle over as long
    right after), with the default settings and with unary_json_fast_path:
    printed, and both held to at most 1 a call;
  * a gateway started before nats-server: it starts and serves stateless
    calls, initialize is 503 with Retry-After, a global limit 503, /readyz 200
    saying "coordinator":"unavailable" (503 with ?coordinator=required); once
    nats-server is there it connects by itself and sessions open;
  * nats-server down mid-run: stateless calls keep working, initialize is 503
    with Retry-After, a global limit fails closed (503), /readyz says so;
    nats-server back on its port and store: initialize and the limits work again.
Skipped without /usr/sbin/nats-server or coordinator_nats.so.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, _child_setup, call_tool, check, check_coordinator_down,  # noqa: E402
                     check_eq, free_port, parse_args, readyz, readyz_coordinator, run_tests,
                     stop_process, wait_for)
import test_limits  # noqa: E402
from test_legacy_wire import head_of, initialize, read_stream, request, rpc  # noqa: E402
from fleet_relay import add_slow_tool, relay_checks  # noqa: E402

NATS = os.environ.get("NATS_SERVER", "/usr/sbin/nats-server")


class NatsServer:
    """One JetStream node in ctx's temp folder, stopped by pid."""

    def __init__(self, ctx):
        self.dir = ctx.path("nats")
        os.makedirs(self.dir, exist_ok=True)
        self.port, self.http = free_port(), free_port()
        self.url = "nats://127.0.0.1:%d" % self.port
        self.proc = None

    def start(self):
        log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen(
            [NATS, "-js", "-sd", os.path.join(self.dir, "store"), "-a", "127.0.0.1",
             "-p", str(self.port), "-m", str(self.http), "-n", "fleet"],
            stdout=log, stderr=log, preexec_fn=_child_setup)
        log.close()
        wait_for(self.healthy, 20, "nats-server's /healthz")

    def healthy(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.http, timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def varz(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/varz" % self.http, timeout=2) as r:
            return json.load(r)

    def msgs(self):
        v = self.varz()
        return v["in_msgs"] + v["out_msgs"]

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


def fleet_context():
    """The test's Context; None (SKIP printed) when this machine or build cannot
    run a fleet on NATS."""
    ctx = Context(parse_args())
    why = None
    if not os.access(NATS, os.X_OK):
        why = "no nats-server at %s" % NATS
    elif not os.path.exists(os.path.join(ctx.modules, "coordinator_nats.so")):
        why = "this build has no coordinator_nats.so"
    if why:
        print("SKIP: %s\n0 passed, 0 failed" % why)
        return None
    return ctx


def fleet_manifest(ctx, name, fast_path=False):
    with open(os.path.join(ctx.source, "conf", "fleet-nats.json")) as f:
        m = json.load(f)
    m["gateway"]["log_level"] = "info"
    m["gateway"]["server"] = {"access_log": False, "unary_json_fast_path": fast_path}
    for mod in m["modules"]:
        if mod["module"] == "audit_file":
            mod["config"]["path"] = ctx.path("audit-%s.jsonl" % name)
    return add_slow_tool(m)


def drive_both(a, b, tool, seconds=None, until=None):
    """test_limits.drive on both gateways at once (16 callers each): all rows."""
    rows = [[], []]
    test_limits.CALLERS = 16

    def run(i, port):
        rows[i] = test_limits.drive(port, tool, seconds=seconds, until=until)
    ts = [threading.Thread(target=run, args=(i, gw.port)) for i, gw in enumerate((a, b))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return rows[0] + rows[1], rows


def stats(gw):
    r, out = call_tool(gw.port, "mock_stats", {})
    return json.loads(out["result"]["content"][0]["text"])


def main():
    ctx = fleet_context()
    if ctx is None:
        return 0
    nats = NatsServer(ctx)
    env = {"MCPG_NATS_URL": nats.url, "MCPG_NATS_BUCKET": "fleet"}
    a = Gateway(ctx, manifest=fleet_manifest(ctx, "a"), env=env, name="gw-a")
    b = Gateway(ctx, manifest=fleet_manifest(ctx, "b"), env=env, name="gw-b")
    fast = Gateway(ctx, manifest=fleet_manifest(ctx, "fast", fast_path=True), env=env,
                   name="gw-fast")
    early = Gateway(ctx, manifest=fleet_manifest(ctx, "early"), env=env, name="gw-early")
    figures = {}

    def t_start_before_nats():
        # no nats-server yet: the gateway starts, serves, and connects later
        early.start()
        check_coordinator_down(early.port, "rated", "no nats-server yet")
        t0 = time.monotonic()
        nats.start()
        wait_for(lambda: readyz_coordinator(early.port) == "ok", 20,
                 "/readyz to say the coordinator is ok once nats-server is there", interval=0.1)
        r = request(early.port, body=rpc("initialize", {"protocolVersion": "2025-11-25",
                                                        "capabilities": {},
                                                        "clientInfo": {"name": "t",
                                                                       "version": "1"}}),
                    version=None)
        check_eq(r.status, 200, "initialize once nats-server is there (%r)" % r.body[:200])
        check_eq(readyz(early.port, "coordinator=required").status, 200,
                 "/readyz?coordinator=required once nats-server is there")
        print("started before nats-server: connected, bucket bound and sessions open %.0f ms "
              "after nats-server started" % ((time.monotonic() - t0) * 1000))
        early.stop()

    def t_start():
        a.start()
        b.start()
        fast.start()

    def t_check():
        rc = subprocess.run([ctx.bin, "--check", "--config",
                             os.path.join(ctx.source, "conf", "fleet-nats.json")],
                            env=dict(os.environ, **env), capture_output=True, text=True)
        check_eq(rc.returncode, 0, "--check conf/fleet-nats.json (%s)" % rc.stderr)

    def t_capped():
        secs = 3.0
        rows, per = drive_both(a, b, "capped", seconds=secs)
        ok, refused = test_limits.split(rows, "capped")
        sa, sb = stats(a)["tools"]["capped"], stats(b)["tools"]["capped"]
        total = len(ok)
        span = max(r[1] for r in ok) - min(r[0] for r in ok)
        print("capped: %d admitted in %.2f s (%.1f/s) over both, mock max_in_flight %d and %d, "
              "%d refused" % (total, span, total / span, sa["max_in_flight"], sb["max_in_flight"],
                              len(refused)))
        check(sa["max_in_flight"] <= 8 and sb["max_in_flight"] <= 8,
              "capped: a mock saw more than 8 in flight: %d, %d"
              % (sa["max_in_flight"], sb["max_in_flight"]))
        check_eq(sa["calls"] + sb["calls"], total, "capped: calls the mocks saw")
        # 8 slots, each call holding one for 100 ms: 8 per 100 ms, plus the first 8
        check(total <= 8 * (span / 0.1) + 8, "capped: %d admitted in %.2f s is over 80/s"
              % (total, span))
        check(total >= 8, "capped admitted almost nothing: %d" % total)
        figures["capped"] = total / span

    def t_rated():
        rows, _ = drive_both(a, b, "rated", seconds=4.0)
        ok, refused = test_limits.split(rows, "rated")
        check(refused, "rated: nothing refused")
        first_send = min(r[0] for r in rows)
        first_ok_recv = min(r[1] for r in ok)
        last_ok_recv = max(r[1] for r in ok)
        last_refused_send = max(r[0] for r in refused)
        upper = 10 + int((last_ok_recv - first_send) * 10)
        lower = 10 + int((last_refused_send - first_ok_recv) * 10)
        print("rated: %d admitted over both, %d refused; bounds from the edges [%d, %d]"
              % (len(ok), len(refused), lower, upper))
        check(lower <= len(ok) <= upper, "rated: %d admitted, outside [%d, %d]"
              % (len(ok), lower, upper))

    def t_budgeted():
        rows, _ = drive_both(a, b, "budgeted", until=lambda r: r.status == 429)
        ok, refused = test_limits.split(rows, "budgeted")
        print("budgeted: %d admitted over both, %d refused" % (len(ok), len(refused)))
        check_eq(len(ok), 1000, "budgeted: admitted over both gateways")
        for gw in (a, b):
            r, _ = call_tool(gw.port, "budgeted", {"message": "late"})
            check_eq(r.status, 429, "budgeted after the budget, on %s" % gw.name)

    def t_session_across():
        _, sid = initialize(a.port)
        r = request(b.port, body=rpc("tools/call", {"name": "echo",
                                                    "arguments": {"message": "on b"}}, id=2),
                    session=sid)
        check_eq(r.status, 200, "tools/call on B for A's session (%r)" % r.body[:200])
        check(b"Echo: on b" in r.body, "B answered the call: %r" % r.body[:200])
        with Conn(a.port) as g, Conn(b.port) as d:
            request(a.port, "GET", session=sid, accept="text/event-stream", conn=g)
            check_eq(head_of(g)[0], 200, "the GET stream on A")
            request(b.port, "DELETE", session=sid, conn=d)
            check_eq(d.read_response().status, 200, "DELETE on B")
            t0 = time.monotonic()
            _, ended = read_stream(g, timeout=10)
            check(ended, "A's GET stream ended after the DELETE on B")
            print("A's stream ended %.0f ms after B's DELETE answered" % ((time.monotonic() - t0) * 1000))
        r = request(a.port, body=rpc("tools/list", id=3), session=sid)
        check_eq(r.status, 404, "the session is gone on A too")

    def per_call(gw, n=200):
        """(NATS messages per call, of them the fleet's own idle traffic per
        call): the messages over n calls, less those moved over as long with
        the session open and no call (the fleet's own traffic grows with the
        wall time, which a loaded machine stretches)."""
        at_start = nats.msgs()
        _, sid = initialize(gw.port)
        # the count is live: a session's creation is coordinator round trips
        check(nats.msgs() - at_start >= 2, "initialize moved no NATS messages")
        request(gw.port, body={"jsonrpc": "2.0", "method": "notifications/initialized"},
                session=sid)
        with Conn(gw.port) as c:
            for i in range(5):  # the session is known to this gateway's loop from here on
                request(gw.port, body=rpc("tools/call", {"name": "echo",
                                                         "arguments": {"message": "w"}}, id=i),
                        session=sid, conn=c)
                check_eq(c.read_response().status, 200, "warm-up call")
            before, t0 = nats.msgs(), time.monotonic()
            for i in range(n):
                request(gw.port, body=rpc("tools/call", {"name": "echo",
                                                         "arguments": {"message": "m"}},
                                          id=10 + i), session=sid, conn=c)
                r = c.read_response()
                check_eq(r.status, 200, "legacy call")
            after, took = nats.msgs(), time.monotonic() - t0
            time.sleep(took)  # the idle baseline's window: as long again, the session open, no call
            idle = nats.msgs() - after
        return (after - before - idle) / n, idle / n

    def t_messages_per_call():
        default, idle_a = per_call(a)
        tuned, idle_fast = per_call(fast)
        print("NATS messages per legacy call (in + out, /varz, less the idle fleet's): default %.2f, "
              "unary_json_fast_path %.2f (idle traffic subtracted: %.2f and %.2f a call)"
              % (default, tuned, idle_a, idle_fast))
        figures["msgs_default"], figures["msgs_fast"] = default, tuned
        check(default <= 1.0, "default: %.2f NATS messages per legacy call" % default)
        check(tuned <= 1.0, "fast path: %.2f NATS messages per legacy call" % tuned)

    def t_server_down():
        _, before = initialize(a.port)
        nats.stop()
        # B never read that session: its store does not answer, which is not "gone"
        r = request(b.port, body=rpc("tools/call", {"name": "echo", "arguments": {"message": "x"}},
                                     id=2), session=before)
        check_eq(r.status, 503, "a session B never saw, with NATS down (%r)" % r.body[:200])
        check(r.header("retry-after"), "that 503 has Retry-After")
        r, out = call_tool(a.port, "echo", {"message": "still"})
        check_eq(r.status, 200, "a stateless call with NATS down")
        r = request(a.port, body=rpc("initialize", {"protocolVersion": "2025-11-25",
                                                    "capabilities": {},
                                                    "clientInfo": {"name": "t", "version": "1"}}),
                    version=None)
        check_eq(r.status, 503, "initialize with NATS down (%r)" % r.body[:200])
        check(r.header("retry-after"), "initialize's 503 has Retry-After")
        t0 = time.monotonic()
        r, out = call_tool(b.port, "rated", {"message": "x"})
        took = time.monotonic() - t0
        check_eq(r.status, 503, "a global limit with NATS down fails closed (%r)" % out)
        print("with NATS down: a limited call refused 503 in %.0f ms" % (took * 1000))
        check_eq(readyz_coordinator(a.port), "unavailable", "/readyz with NATS down")
        nats.start()

        def back():
            r = request(a.port, body=rpc("initialize", {"protocolVersion": "2025-11-25",
                                                        "capabilities": {},
                                                        "clientInfo": {"name": "t",
                                                                       "version": "1"}}),
                        version=None)
            return r.status == 200
        wait_for(back, 20, "initialize to work again after NATS came back", interval=0.2)
        # each gateway reconnects on its own backoff: B may still be down when A is back
        seen = {}

        def b_back():
            seen["r"], seen["out"] = call_tool(b.port, "budgeted", {"message": "x"})
            return seen["r"].status != 503
        wait_for(b_back, 20, "gateway B to reach NATS again", interval=0.2)
        check_eq(seen["r"].status, 429, "the spent budget survives the restart (file storage) (%r)"
                 % seen["out"])

    def t_stop():
        for gw in (a, b, fast):
            gw.stop()
        nats.stop()

    tests = [
        ("a gateway started before nats-server: serves, 503 sessions, connects later",
         t_start_before_nats),
        ("three gateways start on conf/fleet-nats.json", t_start),
        ("mcpg --check accepts conf/fleet-nats.json", t_check),
        ("capped across two gateways: at most 8 in flight, at most 80/s", t_capped),
        ("rated across two gateways: within the bounds of its edges", t_rated),
        ("budgeted across two gateways: exactly 1000", t_budgeted),
        ("a legacy session across gateways: DELETE on B ends A's stream", t_session_across),
    ] + relay_checks(lambda n: {"A": a, "B": b}[n].port) + [
        ("NATS messages per legacy call: default and unary_json_fast_path", t_messages_per_call),
        ("nats-server down and back: stateless on, initialize 503, limits closed",
         t_server_down),
        ("the gateways and nats-server stop", t_stop),
    ]
    try:
        return run_tests(tests, ctx)
    finally:
        nats.stop()


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
