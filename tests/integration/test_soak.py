#!/usr/bin/env python3
"""Soak: nothing grows while everything churns.

One gateway serving backend_mock (echo, inline) and a stdio backend_mcp upstream
(fake_mcp_upstream.py, prefix "up"), for MCPG_SOAK_SECONDS (default 20; bench/soak.sh
runs minutes), under all of this at once:
  * stateless (2026-07-28) calls on keep-alive connections, each connection closed
    after a few calls and a new one opened;
  * legacy (2025-11-25) sessions opened (initialize, notifications/initialized),
    called, and ended with DELETE;
  * calls through the upstream, whose process is SIGKILLed every few seconds (the
    gateway restarts it);
  * a reload (SIGHUP) every second, the manifest alternating between two mock
    configurations so the mock's instance is replaced each time.
The gateway's resident memory, open file descriptors and threads are sampled before
the churn, once it is warm, and when it has stopped and settled: file descriptors and
threads must be back to the figures before, memory within a bound of the warm one (a leak of a few
hundred bytes per call, session or reload exceeds it). Every call must succeed,
except those through the upstream while it is down, which must fail cleanly (a
JSON-RPC error, never a hang or a cut answer). Under ASan the memory figure is only
printed (the allocator's quarantine holds freed memory) and LeakSanitizer checks
the exit instead.
"""
import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gateway import (asan_build, Conn, Context, Gateway, base_manifest, call_tool, check,  # noqa: E402
                     parse_args, run_tests, tool_call_request, wait_for)
from test_legacy_wire import answer, initialize, request, rpc  # noqa: E402

SECONDS = float(os.environ.get("MCPG_SOAK_SECONDS", "20"))
FAKE = os.path.join(HERE, "fake_mcp_upstream.py")
CALLS_PER_CONNECTION = 20


def manifest(ctx, variant):
    tools = [{"name": "echo"}] + ([{"name": "extra"}] if variant else [])
    m = base_manifest(tools=tools)
    m["gateway"]["server"] = {"access_log": False}
    up = {"command": sys.executable, "args": [FAKE, "--pid-file", ctx.path("up.pid")],
          "restart_min_ms": 100, "restart_max_ms": 400}
    m["modules"].append({"name": "up", "module": "backend_mcp", "inline_dispatch": True,
                         "timeout_ms": 5000, "config": up})
    m["bindings"] = [{"backend": "mock"}, {"backend": "up", "prefix": "up"}]
    return m


def proc_figures(pid):
    """(resident KiB, open fds, threads) of a live process."""
    status = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            status[k] = v.split()
    return (int(status["VmRSS"][0]), len(os.listdir("/proc/%d/fd" % pid)),
            int(status["Threads"][0]))


def connections_held(pid, port):
    """How many of a live process's open fds are TCP connections on its listening
    port (accepted, not yet closed by it): /proc/net/tcp{,6} rows with local port
    `port` that are not listeners, matched by socket inode."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            col = row.split()
            if len(col) > 9 and int(col[1].rsplit(":", 1)[1], 16) == port and col[3] != "0A":
                inodes.add("socket:[%s]" % col[9])
    return sum(1 for t in fd_targets(pid).values() if t in inodes)


def fd_targets(pid):
    """What each open fd of a live process points at (socket:[inode], a path...)."""
    out = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            pass
    return out



class Churn:
    """The load threads, their counts and the failures they saw."""

    def __init__(self, port):
        self.port = port
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.counts = {"stateless": 0, "sessions": 0, "upstream_ok": 0, "upstream_refused": 0}
        self.failures = []

    def count(self, what):
        with self.lock:
            self.counts[what] += 1

    def failed(self, what):
        with self.lock:
            if len(self.failures) < 10:
                self.failures.append(what)
        self.stop.set()

    def stateless(self, k):
        n = 0
        while not self.stop.is_set():
            with Conn(self.port) as c:
                for _ in range(CALLS_PER_CONNECTION):
                    n += 1
                    msg = "s%d-%d" % (k, n)
                    c.send(tool_call_request(self.port, "echo", {"message": msg}, id=n))
                    r = c.read_response()
                    text = (r.rpc().get("result") or {}).get("content", [{}])[0].get("text")
                    if r.status != 200 or text != "Echo: " + msg:
                        return self.failed("stateless call: %d %r" % (r.status, r.body[:200]))
                    self.count("stateless")

    def sessions(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            _, sid = initialize(self.port)
            r = request(self.port, body={"jsonrpc": "2.0", "method": "notifications/initialized"},
                        session=sid)
            if r.status != 202:
                return self.failed("notifications/initialized: %d" % r.status)
            r = request(self.port, body=rpc("tools/call", {"name": "echo",
                                                           "arguments": {"message": "l%d" % n}},
                                            id=2), session=sid)
            text = (answer(r).get("result") or {}).get("content", [{}])[0].get("text")
            if r.status != 200 or text != "Echo: l%d" % n:
                return self.failed("session call: %d %r" % (r.status, r.body[:200]))
            r = request(self.port, method="DELETE", session=sid)
            if r.status not in (200, 204):
                return self.failed("DELETE: %d" % r.status)
            self.count("sessions")

    def upstream(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            r, body = call_tool(self.port, "up_echo", {"message": "u%d" % n}, id=n)
            if "result" in body and body["result"]["content"][0]["text"] == "echo: u%d" % n:
                self.count("upstream_ok")
            elif "error" in body:  # the upstream is restarting: refused, not hung
                self.count("upstream_refused")
                time.sleep(0.02)
            else:
                return self.failed("upstream call: %d %r" % (r.status, r.body[:200]))

    def run(self, seconds, on_tick):
        jobs = [(lambda k=k: self.stateless(k)) for k in range(3)]
        jobs += [self.sessions, self.sessions, self.upstream]

        def guarded(job):
            try:
                job()
            except Exception as e:  # a socket error is a failure too, with its reason
                self.failed("%r" % e)

        threads = [threading.Thread(target=guarded, args=(j,)) for j in jobs]
        for t in threads:
            t.start()
        start = time.monotonic()
        tick = 0
        while not self.stop.is_set() and time.monotonic() - start < seconds:
            time.sleep(0.1)
            now = int((time.monotonic() - start) * 10)
            if now // 10 > tick:
                tick = now // 10
                on_tick(tick)
        self.stop.set()
        for t in threads:
            t.join(30)
            check(not t.is_alive(), "a load thread did not finish")


def main():
    ctx = Context(parse_args())
    variants = [manifest(ctx, 0), manifest(ctx, 1)]
    config = ctx.write_manifest(variants[0], "soak.json")
    gw = Gateway(ctx, config=config, name="soak")
    state = {}

    def t_soak():
        gw.start()
        wait_for(lambda: "result" in call_tool(gw.port, "up_echo", {"message": "x"})[1], 20,
                 "the upstream serves")
        # Before the churn: what it must come back to, once the gateway has closed
        # the probes' connections (a client's close reaches it a moment later).
        wait_for(lambda: connections_held(gw.proc.pid, gw.port) == 0, 10,
                 "the gateway to close the probes' connections", interval=0.05)
        idle, idle_fds = proc_figures(gw.proc.pid), fd_targets(gw.proc.pid)
        churn = Churn(gw.port)
        reloads = [0]

        def on_tick(sec):
            if sec % 4 == 2:  # an upstream restart every 4 s
                try:
                    with open(ctx.path("up.pid")) as f:
                        os.kill(int(f.read()), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            reloads[0] += 1
            ctx.write_manifest(variants[reloads[0] % 2], "soak.json")
            gw.signal(signal.SIGHUP)
            if sec == max(3, int(SECONDS / 4)):
                state["warm"] = proc_figures(gw.proc.pid)
            rss, fds, threads = proc_figures(gw.proc.pid)
            print("soak: %3d s  rss %6d KiB  fds %4d  threads %3d  %s" % (
                sec, rss, fds, threads, json.dumps(churn.counts)), flush=True)

        churn.run(SECONDS, on_tick)
        check(not churn.failures, "failures under churn: %r" % churn.failures)
        check("warm" in state, "the run ended before the warm sample")
        if reloads[0] % 2:  # end on the first variant, as the warm sample may have
            ctx.write_manifest(variants[0], "soak.json")
            gw.signal(signal.SIGHUP)
        # settle: the upstream back, reloads retired, closed connections reaped
        # (waited for below: fds and threads back to the idle figures)
        wait_for(lambda: "result" in call_tool(gw.port, "up_echo", {"message": "x"})[1], 20,
                 "the upstream serves again")
        c = churn.counts
        check(c["stateless"] > 0 and c["sessions"] > 0 and c["upstream_ok"] > 0,
              "every kind of load ran: %r" % c)
        warm = state["warm"]
        settled = []

        def back_to_idle():
            fig = proc_figures(gw.proc.pid)
            settled[:] = [fig]
            return fig[1:] == idle[1:]
        try:
            wait_for(back_to_idle, 10, "open fds and threads back to the idle figures (%d fds, "
                     "%d threads)" % idle[1:], interval=0.2)
        except Exception:
            now = fd_targets(gw.proc.pid)
            print("soak: fds and threads at idle %r, last seen %r" % (idle[1:], settled[0][1:]))
            print("soak: fds at idle %r" % sorted(idle_fds.items()))
            print("soak: fds now     %r" % sorted(now.items()))
            raise
        end = settled[0]
        print("soak: idle rss %d KiB fds %d threads %d; warm rss %d KiB fds %d threads %d; "
              "end rss %d KiB fds %d threads %d; %d reloads; %r"
              % (idle + warm + end + (reloads[0], c)), flush=True)
        if asan_build(gw.proc.pid):
            print("soak: ASan build: resident memory not judged (quarantine); LSan at exit")
            return
        bound = max(8 * 1024, warm[0] // 4)
        check(end[0] - warm[0] <= bound,
              "resident memory grew %d KiB (bound %d KiB) over %d calls, %d sessions, %d "
              "reloads" % (end[0] - warm[0], bound, c["stateless"], c["sessions"], reloads[0]))

    def t_stop():
        gw.stop()  # SIGTERM, exit 0, and no sanitizer report (LSan included)

    sys.exit(run_tests([("churn: calls, sessions, upstream restarts, reloads; nothing grows", t_soak),
                        ("SIGTERM: exit 0, no leak reported", t_stop)], ctx))


if __name__ == "__main__":
    main()
