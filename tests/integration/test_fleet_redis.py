#!/usr/bin/env python3
"""A fleet on Redis: one redis-server (started here on a free port in the test's
temp folder, stopped by pid) and two gateways A and B on conf/fleet-redis.json.

  * a gateway started before redis-server: it starts and serves stateless
    calls, initialize is 503 with Retry-After, a global limit 503, /readyz 200
    saying "coordinator":"unavailable" (503 with ?coordinator=required); once
    redis-server is there it connects by itself and sessions open: once /readyz says
    "coordinator":"ok", initialize succeeds on every loop (a connection held on each);
    a store that answers reads but refuses writes (maxmemory reached) is "unavailable"
    to /readyz, as it is to initialize, and "ok" again once it takes writes;
  * mcpg --check accepts the manifest, and names the url key of a host name;
  * a stateless echo call sends Redis nothing (INFO commandstats around the
    calls); the commands a legacy call and a limited call cost are printed;
  * the governed scenario with every limit global, the callers split between
    A and B: capped never more than 8 in flight on either mock and at most
    80 calls/s admitted fleet-wide (8 slots of 100 ms), rated within the edge
    bounds of test_limits.py, budgeted exactly 1000 across both;
  * a legacy session opened on A takes its notification and calls on B, its
    GET stream on A, and a DELETE on B ends A's stream promptly;
  * a session opened on B is served by A once B is killed (SIGKILL);
  * Redis killed mid-run: stateless calls keep working on both, a new
    session is 503 with Retry-After, a global limit fails closed (503) (/readyz
    says the coordinator is unavailable), or
    is admitted on a third replica whose limits say on_coordinator_error admit;
    Redis started again (empty, no persistence): sessions open again, the
    limits judge again, and a session from before is gone (404) on a
    replica that had not cached it.
"""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, _child_setup, call_tool, check,  # noqa: E402
                     check_coordinator_down, check_eq, conns_on_every_loop, free_port, parse_args,
                     readyz_coordinator, run_cli, run_tests, wait_for)
from test_legacy_wire import (head_of, initialize, read_stream, request, rpc,  # noqa: E402
                              answer)
from test_limits import drive, rated_bounds, split  # noqa: E402
from gateway import Conn  # noqa: E402
from fleet_relay import add_slow_tool, relay_checks  # noqa: E402

REDIS_SERVER = os.environ.get("MCPG_REDIS_SERVER", "redis-server")
REDIS_CLI = os.environ.get("MCPG_REDIS_CLI", "redis-cli")
SECONDS = float(os.environ.get("MCPG_FLEET_SECONDS", "3"))
LOOPS = 2  # the early gateway's gateway.workers: a connection held on each
INIT = rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "t", "version": "1"}})


class Redis:
    """redis-server without persistence, in the foreground, stopped by pid."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.port = free_port()
        self.proc = None

    def start(self):
        log = open(self.ctx.path("redis-%d.log" % self.port), "ab")
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", self.ctx.tmp, "--logfile", ""],
            stdout=log, stderr=log, preexec_fn=_child_setup)
        log.close()
        wait_for(lambda: self.cli("PING") == "PONG", 10, "redis-server to answer")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def cli(self, *args):
        r = subprocess.run([REDIS_CLI, "-p", str(self.port)] + list(args),
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip()

    def commands(self):
        """{command: calls} since the last CONFIG RESETSTAT, the admin ones left out."""
        out = {}
        for line in self.cli("INFO", "commandstats").splitlines():
            if line.startswith("cmdstat_"):
                name, rest = line[8:].split(":", 1)
                calls = int(rest.split("calls=")[1].split(",")[0])
                if name not in ("info", "config|resetstat", "config"):
                    out[name] = calls
        return out

    def reset_stats(self):
        self.cli("CONFIG", "RESETSTAT")


def gateway_env(ctx, redis, prefix, name):
    return {"MCPG_REDIS_URL": "redis://127.0.0.1:%d" % redis.port, "MCPG_REDIS_PREFIX": prefix,
            "MCPG_AUDIT_FILE": ctx.path("audit-%s.jsonl" % name)}


def mock_stats(port):
    r, rpc_ = call_tool(port, "mock_stats", {})
    return json.loads(rpc_["result"]["content"][0]["text"])


def echo_ok(port, message="hi"):
    r, rpc_ = call_tool(port, "echo", {"message": message})
    return r.status == 200 and rpc_["result"]["content"][0]["text"] == "Echo: " + message


def legacy_call(port, sid, tool, message, id):
    r = request(port, body=rpc("tools/call", {"name": tool, "arguments": {"message": message}},
                               id=id), session=sid)
    return r


def main():
    args = parse_args()
    ctx = Context(args)
    conf = os.path.join(ctx.source, "conf", "fleet-redis.json")
    redis = Redis(ctx)
    gws = {}

    with open(conf) as f:  # the shipped manifest and a slow tool for the relayed streams
        fleet = add_slow_tool(json.load(f))

    def initialize_on_every_loop(port, conns, what):
        for w, c in sorted(conns.items()):
            request(port, body=INIT, version=None, conn=c)
            r = c.read_response()
            check_eq(r.status, 200, "%s: initialize on loop %d (%r)" % (what, w, r.body[:200]))

    def t_start_before_redis():
        # no redis-server yet: the gateway starts, serves, and connects later
        with open(conf) as f:
            m = json.load(f)
        m["gateway"]["workers"] = LOOPS
        early = Gateway(ctx, manifest=m, name="gateway-early",
                        env=gateway_env(ctx, redis, "early:", "early")).start()
        conns = conns_on_every_loop(early, LOOPS)  # each loop's links reconnect on their own
        try:
            check_coordinator_down(early.port, "capped", "no redis-server yet")
            t0 = time.monotonic()
            redis.start()
            wait_for(lambda: readyz_coordinator(early.port) == "ok", 20,
                     "/readyz to say the coordinator is ok once redis-server is there",
                     interval=0.1)
            # ok means every loop can open a session now, not only the one that took /readyz
            initialize_on_every_loop(early.port, conns, "right after /readyz said ok")
            print("started before redis-server: connected and sessions open on every loop "
                  "%.0f ms after redis-server started" % ((time.monotonic() - t0) * 1000))
            # reads answered, writes refused: a session cannot be made, and /readyz says so
            redis.cli("CONFIG", "SET", "maxmemory", "1")
            r = request(early.port, body=INIT, version=None)
            check_eq(r.status, 503, "initialize while Redis refuses writes (%r)" % r.body[:200])
            check_eq(readyz_coordinator(early.port), "unavailable",
                     "/readyz while Redis answers reads but refuses writes")
            redis.cli("CONFIG", "SET", "maxmemory", "0")
            wait_for(lambda: readyz_coordinator(early.port) == "ok", 20,
                     "/readyz ok once Redis takes writes again", interval=0.1)
            initialize_on_every_loop(early.port, conns, "Redis taking writes again")
        finally:
            for c in conns.values():
                c.close()
        early.stop()

    def start_fleet():
        for name in ("A", "B"):
            gws[name] = Gateway(ctx, manifest=fleet, name="gateway-" + name,
                                env=gateway_env(ctx, redis, "fleet:", name)).start()
        # a third replica whose limits fail open (on_coordinator_error admit)
        with open(conf) as f:
            m = json.load(f)
        limits = next(x for x in m["modules"] if x["module"] == "limits")
        limits["config"]["on_coordinator_error"] = "admit"
        gws["open"] = Gateway(ctx, manifest=m, name="gateway-open",
                              env=gateway_env(ctx, redis, "fleet:", "open")).start()

    def t_check():
        env = gateway_env(ctx, redis, "fleet:", "check")
        rc, out, err = run_cli(ctx, ["--check", "--config", conf], env=env)
        check_eq(rc, 0, "mcpg --check %s (stderr %s)" % (conf, err))
        env["MCPG_REDIS_URL"] = "redis://localhost:6379"
        rc, out, err = run_cli(ctx, ["--check", "--config", conf], env=env)
        check(rc == 2 and "modules[0].config.url: host \"localhost\" is not an IP address" in err,
              "a host name refused: %d %s" % (rc, err))

    def t_stateless_costs_nothing():
        a, b = gws["A"].port, gws["B"].port
        check(echo_ok(a) and echo_ok(b), "echo on both")
        redis.reset_stats()
        for i in range(20):
            check(echo_ok(a if i % 2 else b, "s%d" % i), "stateless echo %d" % i)
        used = redis.commands()
        check_eq(used, {}, "Redis commands for 20 stateless echo calls")
        # what the other kinds of call cost, printed (not asserted)
        _, sid = initialize(a)
        redis.reset_stats()
        for i in range(10):
            check_eq(legacy_call(a, sid, "echo", "l%d" % i, 10 + i).status, 200, "legacy call")
        legacy = redis.commands()
        redis.reset_stats()
        for i in range(10):
            call_tool(b, "budgeted", {"message": "b%d" % i})
        limited = redis.commands()
        print("Redis commands: 10 legacy calls on one session: %r; 10 calls under a global "
              "budget: %r" % (legacy, limited))
        request(a, "DELETE", session=sid)

    def t_capped():
        rows = drive([gws["A"].port, gws["B"].port], "capped", seconds=SECONDS)
        ok, refused = split(rows, "capped")
        first = min(r[0] for r in rows)
        last = max(r[1] for r in rows)
        stats = [mock_stats(gws[n].port)["tools"]["capped"] for n in ("A", "B")]
        print("capped: %d admitted over %.2f s (%.1f/s), %d refused, mock max_in_flight %s"
              % (len(ok), last - first, len(ok) / (last - first), len(refused),
                 [s["max_in_flight"] for s in stats]))
        for n, s in zip("AB", stats):
            check(s["max_in_flight"] <= 8, "capped on %s: %d in flight" % (n, s["max_in_flight"]))
        check_eq(sum(s["calls"] for s in stats), len(ok), "calls the two mocks saw")
        # each admitted call holds one of 8 slot keys for at least its 100 ms
        check(len(ok) <= 8 + 80 * (last - first), "capped: %d admitted in %.2f s is more than "
              "8 slots of 100 ms allow" % (len(ok), last - first))
        check(stats[0]["calls"] > 0 and stats[1]["calls"] > 0, "both replicas admitted calls")

    def t_rated():
        rows = drive([gws["A"].port, gws["B"].port], "rated", seconds=SECONDS)
        ok, refused = split(rows, "rated")
        check(refused, "rated: nothing refused")
        lower, upper = rated_bounds(rows, ok, refused)
        print("rated: %d admitted, %d refused; bounds from the edges [%d, %d]"
              % (len(ok), len(refused), lower, upper))
        check(lower <= len(ok) <= upper, "rated: %d admitted, outside [%d, %d]"
              % (len(ok), lower, upper))

    def t_budgeted():
        spent = 10  # by t_stateless_costs_nothing
        rows = drive([gws["A"].port, gws["B"].port], "budgeted", until=lambda r: r.status == 429)
        ok, refused = split(rows, "budgeted")
        print("budgeted: %d admitted, %d refused" % (len(ok), len(refused)))
        check_eq(len(ok) + spent, 1000, "budgeted: admitted across both replicas")
        for n in ("A", "B"):
            r, _ = call_tool(gws[n].port, "budgeted", {"message": "late"})
            check_eq(r.status, 429, "budgeted on %s after the budget" % n)

    def t_session_across():
        a, b = gws["A"].port, gws["B"].port
        _, sid = initialize(a)
        r = request(b, body={"jsonrpc": "2.0", "method": "notifications/initialized"}, session=sid)
        check_eq(r.status, 202, "notifications/initialized on B")
        r = legacy_call(b, sid, "echo", "on B", 2)
        check_eq(r.status, 200, "tools/call on B (%r)" % r.body[:200])
        check_eq(answer(r)["result"]["content"][0]["text"], "Echo: on B", "B's answer")
        stream = Conn(a)
        request(a, "GET", session=sid, accept="text/event-stream", conn=stream)
        status, head = head_of(stream)
        check_eq(status, 200, "the GET stream on A (%r)" % head)
        time.sleep(0.2)  # the stream is open on A before the DELETE
        t0 = time.monotonic()
        r = request(b, "DELETE", session=sid)
        check(r.status in (200, 204), "DELETE on B: %d" % r.status)
        text, ended = read_stream(stream, timeout=10)
        took = time.monotonic() - t0
        print("A's GET stream ended %.1f ms after the DELETE on B" % (took * 1000))
        check(ended, "A's stream ended")
        stream.close()
        check_eq(legacy_call(a, sid, "echo", "after", 3).status, 404, "the session on A after it")

    def t_replica_killed():
        a, b = gws["A"].port, gws["B"].port
        _, sid = initialize(b)
        check_eq(legacy_call(b, sid, "echo", "before", 2).status, 200, "a call on B")
        gws["B"].kill()
        r = legacy_call(a, sid, "echo", "after B died", 3)
        check_eq(r.status, 200, "B's session served by A (%r)" % r.body[:200])
        check_eq(answer(r)["result"]["content"][0]["text"], "Echo: after B died", "A's answer")
        gws["B"] = Gateway(ctx, manifest=fleet, name="gateway-B",
                           env=gateway_env(ctx, redis, "fleet:", "B2")).start()

    def t_redis_down():
        a, b = gws["A"].port, gws["B"].port
        _, old = initialize(a)
        redis.stop()
        for port in (a, b):
            for i in range(5):
                check(echo_ok(port, "down%d" % i), "stateless echo with Redis down")
        r = request(a, body=rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                               "clientInfo": {"name": "t", "version": "1"}}),
                    version=None)
        check_eq(r.status, 503, "initialize with Redis down (%r)" % r.body[:200])
        check(r.header("retry-after") is not None, "with Retry-After")
        r, rpc_ = call_tool(b, "capped", {"message": "down"})
        check_eq(r.status, 503, "a global limit with Redis down fails closed (%r)" % rpc_)
        check("cannot be judged" in rpc_["error"]["message"], "says why: %r" % rpc_)
        check_eq(readyz_coordinator(a), "unavailable", "/readyz with Redis down")
        # the session from before, on B, which never read it: its store does not
        # answer, which is not "gone" (a 404 would make the client drop it)
        r = legacy_call(b, old, "echo", "unreadable", 8)
        check_eq(r.status, 503, "a session B never saw, with Redis down (%r)" % r.body[:200])
        check(r.header("retry-after") is not None, "that 503 has Retry-After")
        r, rpc_ = call_tool(gws["open"].port, "capped", {"message": "open"})
        check_eq(r.status, 200, "on_coordinator_error admit: served unlimited (%r)" % rpc_)
        redis.start()  # the same port, empty

        def sessions_again():
            try:
                initialize(a)
                return True
            except AssertionError:
                return False
        wait_for(sessions_again, 15, "sessions to open again on A")
        wait_for(lambda: call_tool(b, "capped", {"message": "back"})[0].status == 200, 15,
                 "the cap to judge again on B")
        # every loop of B reconnected (the call above reached one of them): only
        # then does the store answer for the old session, wherever it lands
        wait_for(lambda: readyz_coordinator(b) == "ok", 15, "B's /readyz to say every loop is back")
        check_eq(legacy_call(b, old, "echo", "lost", 9).status, 404,
                 "a session from before the restart, on B (Redis held it alone)")

    def t_stop():
        for n in ("A", "B", "open"):
            gws[n].stop()
        check("admitted unlimited (on_coordinator_error admit; 1 so far)" in gws["open"].stderr(),
              "the fail-open replica logged it")
        redis.stop()

    try:
        return run_tests([
            ("a gateway started before redis-server: serves, 503 sessions, connects later",
             t_start_before_redis),
            ("gateways A and B on conf/fleet-redis.json", start_fleet),
            ("mcpg --check: the manifest, and a host name refused", t_check),
            ("a stateless call sends Redis nothing", t_stateless_costs_nothing),
            ("capped (global): <= 8 in flight on each, <= 80/s across the fleet", t_capped),
            ("rated (global): within the edge bounds across the fleet", t_rated),
            ("budgeted (global): exactly 1000 across the fleet", t_budgeted),
            ("a session on A: calls on B, stream on A, DELETE on B ends it", t_session_across),
        ] + relay_checks(lambda n: gws[n].port) + [
            ("a replica killed: its session served by the other", t_replica_killed),
            ("Redis down mid-run and back", t_redis_down),
            ("the gateways stop cleanly", t_stop),
        ], ctx)
    finally:
        for gw in gws.values():
            if gw.proc is not None and gw.proc.poll() is None:
                gw.stop()
        redis.stop()


if __name__ == "__main__":
    sys.exit(main())
