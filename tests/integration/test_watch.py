#!/usr/bin/env python3
"""Resource watches (kernel/watch.c): resources of a backend that never says
they changed (the fixture fx_versions, whose versions move on the wall clock
so every replica and this test agree on when) are polled at the binding's
interval, and every change reaches every subscribed session once.

  * one gateway (coordinator_memory): sessions subscribed to some resources
    hear each change of those once, within the poll interval, and nothing of
    the others;
  * a fleet of three gateways on one redis-server (started here, stopped by
    pid): sessions on each; the shards spread (each resource read about once
    per interval fleet-wide, not once per replica); one gateway is killed
    (SIGKILL) halfway: its shards move to the others once its lease and its
    hellos run out, and still every change is told to every subscriber on
    the survivors, none twice, none missed. The hand-over delay is printed.
  * the same with three gateways on one nats-server (JetStream).
Each fleet part is skipped without its server.
"""

import datetime
import json
import os
import shutil
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, base_manifest, with_fixtures, call_tool, check, check_eq,  # noqa: E402
                     parse_args, run_tests)
from test_legacy_wire import events, head_of, request, rpc  # noqa: E402
from fleet_stores import start_store  # noqa: E402
from webhooklib import percentile  # noqa: E402

NATS = os.environ.get("NATS_SERVER", "/usr/sbin/nats-server")
COUNT = 12          # resources
PERIOD_MS = 6000    # each one's version moves this often, the moves spread over the period
INTERVAL_MS = 250   # the binding's poll interval
SHARDS = 8          # gateway.watch.shards
LEASE_MS = 1500     # gateway.watch.lease_ms of the fleet tests
# A change must be told once before the resource's next change (a loaded CI
# machine may delay a poll well past its interval; the delays are printed).


def manifest(ctx, name, coordinator=None, lease_ms=LEASE_MS, kind=None):
    m = base_manifest()
    m["modules"].append({"name": "ver", "module": "fx_versions",
                         "config": {"count": COUNT, "period_ms": PERIOD_MS}})
    m["bindings"] = [{"backend": "mock"},
                     {"backend": "ver", "watch": {"interval_ms": INTERVAL_MS}}]
    m["gateway"]["watch"] = {"shards": SHARDS, "lease_ms": lease_ms}
    m["gateway"]["log_level"] = os.environ.get("WATCH_LOG", "info")
    with_fixtures(ctx, m)
    if coordinator:
        m["cluster"] = {"kind": kind}
        m["modules"].insert(0, coordinator)
    return m


def change_times(i, t0, t1):
    """Wall-clock seconds at which resource i's version moves in [t0, t1]."""
    p, off = PERIOD_MS / 1000.0, (i * PERIOD_MS // COUNT) / 1000.0
    k = int((t0 + off) // p) + 1
    out = []
    while k * p - off <= t1:
        out.append(k * p - off)
        k += 1
    return out


class Listener:
    """A legacy session subscribed to some resources, its GET stream read on a
    thread: [(arrival wall time, uri)] of every resources/updated."""

    def __init__(self, port, uris, subscribe_port=None):
        self.uris = set(uris)
        deadline = time.time() + 10
        while True:  # a replica answers 503 until its coordinator connection is up
            r = request(port, body=rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                      "clientInfo": {"name": "t", "version": "1"}}),
                        version=None)
            if r.status != 503 or time.time() > deadline:
                break
            time.sleep(0.1)
        check_eq(r.status, 200, "initialize (%r)" % r.body[:200])
        self.sid = r.header("mcp-session-id")
        for n, uri in enumerate(sorted(uris)):
            r = request(subscribe_port or port, body=rpc("resources/subscribe", {"uri": uri}, id=100 + n),
                        session=self.sid)
            check_eq(r.status, 200, "resources/subscribe %s (%r)" % (uri, r.body[:200]))
        self.conn = Conn(port, timeout=60)
        request(port, "GET", session=self.sid, accept="text/event-stream", conn=self.conn)
        check_eq(head_of(self.conn)[0], 200, "the session's GET stream")
        self.got, self.stop, self.ended = [], False, False
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        text = ""
        try:
            while not self.stop:
                line = self.conn._read_until(b"\r\n").decode()
                size = int(line.split(";")[0], 16)
                if size == 0:
                    break
                text += self.conn._read_n(size).decode()
                self.conn._read_n(2)
                while "\n\n" in text:
                    ev, text = text.split("\n\n", 1)
                    for _, data in events(ev + "\n\n"):
                        msg = json.loads(data) if data.strip() else {}
                        if msg.get("method") == "notifications/resources/updated":
                            self.got.append((time.time(), msg["params"]["uri"]))
        except (OSError, ValueError, socket.timeout):
            pass
        self.ended = True

    def close(self):
        self.stop = True
        self.conn.close()


def tally(listeners, t0, t1):
    """Each change in [t0, t1] of a uri a listener subscribed to, judged per
    listener: told once before the resource's next change, twice, or missed.
    (due, once, twice, missed, delays in s, problems as text)."""
    due = once = twice = missed = 0
    delays, problems = [], []
    period = PERIOD_MS / 1000.0
    for n, ls in enumerate(listeners):
        for uri in sorted(ls.uris):
            i = int(uri.rsplit("/", 1)[1])
            told = sorted(t for t, u in ls.got if u == uri)
            for tc in change_times(i, t0, t1):
                due += 1
                hits = [t for t in told if tc - 0.05 <= t < tc + period - 0.05]
                if len(hits) == 1:
                    once += 1
                    delays.append(hits[0] - tc)
                    continue
                if hits:
                    twice += 1
                else:
                    missed += 1
                problems.append("listener %d %s: change at %.2f told %d times (told at %s)"
                                % (n, uri, tc, len(hits), ["%.2f" % t for t in told]))
        others = [u for _, u in ls.got if u not in ls.uris]
        if others:
            problems.append("listener %d: told of uris it did not subscribe to: %r" % (n, others[:5]))
    return due, once, twice, missed, delays, problems


def judge(listeners, t0, t1, what):
    """Every change in [t0, t1] of a subscribed uri told once to each listener
    before its next change (so none missed, none twice); nothing told of
    another uri. Returns the delays (s)."""
    _, _, _, _, delays, problems = tally(listeners, t0, t1)
    check(not problems, what + ": " + "; ".join(problems[:6]))
    return delays


def log_lines(gw):
    """(wall time, msg) of a gateway's log lines."""
    out = []
    with open(gw.stderr_path) as f:
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            t = datetime.datetime.strptime(j["ts"][:26], "%Y-%m-%dT%H:%M:%S.%f")
            out.append((t.replace(tzinfo=datetime.timezone.utc).timestamp(), j.get("msg", "")))
    return out


def shards_of(gw):
    """The shards gw holds now, from its log."""
    held = set()
    for _, m in log_lines(gw):
        w = m.split()
        if len(w) >= 3 and w[0] == "shard" and w[2] in ("taken:", "let"):
            (held.add if w[2] == "taken:" else held.discard)(int(w[1]))
    return held


def taken_after(gw, t0):
    return [(t, int(m.split()[1])) for t, m in log_lines(gw)
            if t >= t0 and m.startswith("shard ") and " taken:" in m]


def spread(gateways, steady_s=LEASE_MS / 1000.0, timeout=45):
    """Until every replica has heard the others and the shards are held once
    each, none by more than its fair share (read from their logs), and that
    has held for a whole lease: a handover while the changes are judged
    would lose the change its new owner's first poll only records."""
    gateways = list(gateways)
    fair = -(-SHARDS // len(gateways))
    heard = "%d replicas share the watches" % len(gateways)
    deadline = time.time() + timeout
    since, last = None, None
    while True:
        held = [shards_of(gw) for gw in gateways]
        told = all(any(heard in m for _, m in log_lines(gw)) for gw in gateways)
        once = sum(len(h) for h in held) == SHARDS and len(set().union(*held)) == SHARDS
        if told and once and all(len(h) <= fair for h in held):
            if held != last:
                since, last = time.time(), held
            elif time.time() - since >= steady_s:
                return
        else:
            since, last = None, None
        check(time.time() < deadline, "the shards did not settle within %d s: held %r" % (timeout, held))
        time.sleep(0.1)


def settled(ports, timeout=30):
    """Until every resource was read twice (the first poll only records its
    version: a change before it is not one)."""
    deadline = time.time() + timeout
    while sum(reads_of(p) for p in ports) < 2 * COUNT:
        check(time.time() < deadline, "the resources were not polled within %d s" % timeout)
        time.sleep(0.1)


def reads_of(port):
    r, rpc_ = call_tool(port, "fx_versions_reads", {})
    return int(rpc_["result"]["content"][0]["text"])


def main():
    args = parse_args()
    ctx = Context(args)
    alone = Gateway(ctx, manifest=manifest(ctx, "alone"), name="watch-alone")
    redis_bin = shutil.which(os.environ.get("MCPG_REDIS_SERVER", "redis-server"))
    servers = []
    gws = {}

    def t_alone():
        alone.start()
        p = alone.port
        mine = ["ver://r/%d" % i for i in range(0, COUNT, 2)]
        ls = [Listener(p, mine), Listener(p, mine[:2])]
        settled([p])
        t0 = time.time()
        time.sleep(PERIOD_MS / 1000.0 * 1.5)
        t1 = time.time() - PERIOD_MS / 1000.0 / 2
        time.sleep(0.3)
        for x in ls:
            x.close()
        d = judge(ls, t0, t1, "alone")
        check(d, "changes were told")
        print("one gateway: %d changes told, delay p50 %.0f ms, p99 %.0f ms"
              % (len(d), percentile(d, 50) * 1000, percentile(d, 99) * 1000))
        alone.stop()

    def fleet(store):
        """Three gateways on `store` ("redis" or "nats"), one killed halfway."""
        nonlocal servers
        if store == "redis" and not redis_bin:
            print("SKIP: no redis-server")
            return
        if store == "nats" and (not os.path.exists(NATS) or
                                not os.path.exists(os.path.join(args.modules, "coordinator_nats.so"))):
            print("SKIP: no nats-server or coordinator_nats.so")
            return
        srv, coord, _ = start_store(ctx, store, "watch")
        servers.append(srv)
        gws.clear()
        for n in ("A", "B", "C"):
            gws[n] = Gateway(ctx, manifest=manifest(ctx, n, coord, kind=store),
                             name="watch-%s-%s" % (store, n)).start()
        everything = ["ver://r/%d" % i for i in range(COUNT)]
        ls = {n: [Listener(gws[n].port, everything), Listener(gws[n].port, everything[:COUNT // 2])]
              for n in ("A", "B", "C")}
        spread(gws.values())
        settled([gws[n].port for n in gws])
        reads0 = {n: reads_of(gws[n].port) for n in gws}
        t0 = time.time()
        time.sleep(PERIOD_MS / 1000.0 * 1.2)
        reads1 = {n: reads_of(gws[n].port) for n in gws}
        spent = time.time() - t0
        per_interval = sum(reads1[n] - reads0[n] for n in gws) / (spent * 1000.0 / INTERVAL_MS)
        print("%s: reads per poll interval, fleet-wide: %.1f for %d resources (per replica %r)"
              % (store, per_interval, COUNT, {n: reads1[n] - reads0[n] for n in gws}))
        check(per_interval < COUNT * 1.5, "each resource polled by one replica, not three: %.1f reads "
              "per interval for %d resources" % (per_interval, COUNT))
        check(sum(1 for n in gws if reads1[n] > reads0[n]) >= 2, "the shards spread over the replicas: %r"
              % {n: reads1[n] - reads0[n] for n in gws})
        dead = shards_of(gws["C"])
        gws["C"].kill()
        t_kill = time.time()
        for x in ls["C"]:
            x.close()
        time.sleep(PERIOD_MS / 1000.0 * 2)
        t1 = time.time() - PERIOD_MS / 1000.0 / 2
        time.sleep(0.3)
        survivors = ls["A"] + ls["B"]
        for x in survivors:
            x.close()
        d_before = judge(survivors, t0, t_kill - 0.1, "before the kill")
        d_after = judge(survivors, t_kill, t1, "after the kill")
        taken = [t for n in ("A", "B") for t, sh in taken_after(gws[n], t_kill) if sh in dead]
        check(len(taken) >= len(dead), "the dead replica's shards %r taken by the others: %r" % (dead, taken))
        handover = max(taken[:len(dead)] if taken else [0]) - t_kill
        print("%s: before the kill %d changes told, delay p50 %.0f ms p99 %.0f ms; after it %d, p50 %.0f ms "
              "p99 %.0f ms; the dead replica's %d shards all taken %.2f s after the SIGKILL"
              % (store, len(d_before), percentile(d_before, 50) * 1000, percentile(d_before, 99) * 1000, len(d_after),
                 percentile(d_after, 50) * 1000, percentile(d_after, 99) * 1000, len(dead), handover))
        for n in ("A", "B"):
            gws[n].stop()
        srv.stop()

    def t_stop():
        for gw in gws.values():
            if gw.proc is not None and gw.proc.poll() is None:
                gw.stop()
        for srv in servers:
            srv.stop()

    try:
        return run_tests([
            ("one gateway: each change of a subscribed resource told once", t_alone),
            ("three gateways on Redis: shards spread, one killed, every change told once",
             lambda: fleet("redis")),
            ("three gateways on NATS: shards spread, one killed, every change told once",
             lambda: fleet("nats")),
            ("the gateways and redis-server stop", t_stop),
        ], ctx)
    finally:
        for gw in list(gws.values()) + [alone]:
            if gw.proc is not None and gw.proc.poll() is None:
                gw.kill()
        for srv in servers:
            srv.stop()


if __name__ == "__main__":
    sys.exit(main())
