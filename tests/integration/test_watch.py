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
    the survivors, none twice, none missed (but one whose shard was taken
    again too late to tell it before the resource's next change: TAKEOVER_SLACK_S).
    The hand-over delay is printed.
  * the same with three gateways on one nats-server (JetStream).
Each fleet part is skipped without its server.
"""

import datetime
import json
import math
import os
import shutil
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, base_manifest, call_tool, check, check_eq,  # noqa: E402
                     parse_args, run_tests)
from test_legacy_wire import events, head_of, request, rpc  # noqa: E402
from fleet_stores import start_store  # noqa: E402
from webhooklib import percentile  # noqa: E402

NATS = os.environ.get("NATS_SERVER", "/usr/sbin/nats-server")
COUNT = 12          # resources
PERIOD_MS = 6000    # each one's version moves this often, the moves spread over the period
INTERVAL_MS = 250   # the binding's poll interval
SHARDS = 8
LEASE_MS = 1500
# A change must be told once before the resource's next change (a loaded CI
# machine may delay a poll well past its interval; the delays are printed).
# While no replica holds a shard (one killed, a lease lost) a change of its
# resources is told when another takes the shard: late, or merged into the
# next change when that comes first. Such a change must still be told if the
# shard was taken again at least this long before the next change (the new
# holder's first poll, which tells what moved meanwhile, has that long).
TAKEOVER_SLACK_S = PERIOD_MS / 1000.0 / 2


def manifest(ctx, name, coordinator=None, lease_ms=LEASE_MS, kind=None):
    m = base_manifest()
    m["modules"].append({"name": "ver", "module": "fx_versions",
                         "config": {"count": COUNT, "period_ms": PERIOD_MS}})
    m["bindings"] = [{"backend": "mock"},
                     {"backend": "ver", "watch": {"interval_ms": INTERVAL_MS}}]
    m["gateway"]["watch"] = {"shards": SHARDS, "lease_ms": lease_ms}
    m["gateway"]["log_level"] = os.environ.get("WATCH_LOG", "info")
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


def shard_of(uri):
    """The uri's shard, as kernel/watch.c's item_add computes it: its fnv64
    of the uri (FNV-1a's step from that offset), modulo the shards."""
    h = 1469598103934665603
    for b in uri.encode():
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h % SHARDS


def tally(listeners, t0, t1, gaps=None):
    """Each change in [t0, t1] of a uri a listener subscribed to, judged per
    listener: told once before the resource's next change, twice, or missed.
    gaps {shard: [(from, to)]}: times no replica held the shard; a change
    whose window (until the next change) such a gap overlaps is held to at
    most once, and to once only if the shard was taken again at least
    TAKEOVER_SLACK_S before its window ended.
    (due, once, twice, missed, excused, delays in s, problems as text)."""
    due = once = twice = missed = excused = 0
    delays, problems = [], []
    period = PERIOD_MS / 1000.0
    for n, ls in enumerate(listeners):
        for uri in sorted(ls.uris):
            i = int(uri.rsplit("/", 1)[1])
            told = sorted(t for t, u in ls.got if u == uri)
            shard_gaps = (gaps or {}).get(shard_of(uri), ())
            for tc in change_times(i, t0, t1):
                due += 1
                hits = [t for t in told if tc - 0.05 <= t < tc + period - 0.05]
                if len(hits) == 1:
                    once += 1
                    delays.append(hits[0] - tc)
                    continue
                overlap = [(a, b) for a, b in shard_gaps if a < tc + period and b > tc]
                if hits:
                    twice += 1
                elif overlap and max(b for _, b in overlap) + TAKEOVER_SLACK_S > tc + period:
                    excused += 1
                    continue
                else:
                    missed += 1
                problems.append("listener %d %s (shard %d): change at %.2f told %d times (told at %s)%s"
                                % (n, uri, shard_of(uri), tc, len(hits), ["%.2f" % t for t in told],
                                   "; its shard unheld %s" % ["%.2f-%.2f" % g for g in overlap]
                                   if overlap else ""))
        others = [u for _, u in ls.got if u not in ls.uris]
        if others:
            problems.append("listener %d: told of uris it did not subscribe to: %r" % (n, others[:5]))
    return due, once, twice, missed, excused, delays, problems


def judge(listeners, t0, t1, what, gaps=None):
    """Every change in [t0, t1] of a subscribed uri told once to each listener
    before its next change (so none missed, none twice), but for those a gap
    in their shard's holders excuses (tally); nothing told of another uri.
    Returns (the delays in s, how many changes were excused)."""
    _, _, _, _, excused, delays, problems = tally(listeners, t0, t1, gaps)
    check(not problems, what + ": " + "; ".join(problems[:6]))
    return delays, excused


def observe(listeners, until):
    """The listeners hear on until wall time `until` (the end of the window of
    the last change judged): a stream that ends early fails."""
    while time.time() < until:
        ended = [n for n, x in enumerate(listeners) if x.ended]
        check(not ended, "listener streams ended early: %r" % ended)
        time.sleep(0.1)


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


def held_intervals(gw, end=math.inf):
    """[(shard, taken at, let go at)] from gw's log; one still held is let go
    at `end` (the SIGKILL of a killed gateway, else never)."""
    taken, out = {}, []
    for t, m in log_lines(gw):
        w = m.split()
        if len(w) >= 3 and w[0] == "shard" and w[2] in ("taken:", "let"):
            s = int(w[1])
            if w[2] == "taken:":
                taken.setdefault(s, t)
            elif s in taken:
                out.append((s, taken.pop(s), t))
    return out + [(s, t, end) for s, t in taken.items()]


def holder_gaps(held, since):
    """{shard: [(from, to)]}: when, from `since` on, no replica held the
    shard (to is inf if none holds it at the end); held: held_intervals of
    every replica, together."""
    gaps = {}
    for s in range(SHARDS):
        at = since
        for a, b in sorted((a, b) for sh, a, b in held if sh == s):
            if a > at:
                gaps.setdefault(s, []).append((at, a))
            at = max(at, b)
        if at < math.inf:
            gaps.setdefault(s, []).append((at, math.inf))
    return gaps


def spread(gws):
    """The shards each gateway holds now, and whether they are spread: every
    shard held by exactly one, none holding more than its fair share (so,
    with 3 gateways and 8 shards, each holds some)."""
    held = {n: shards_of(gw) for n, gw in gws.items()}
    fair = -(-SHARDS // len(gws))
    every = sorted(s for h in held.values() for s in h)
    return every == list(range(SHARDS)) and all(len(h) <= fair for h in held.values()), held


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
        t1 = t0 + PERIOD_MS / 1000.0  # each resource's change in [t0, t1] judged
        observe(ls, t1 + PERIOD_MS / 1000.0)  # over its whole window
        for x in ls:
            x.close()
        d, _ = judge(ls, t0, t1, "alone")
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
        # hellos heard, shards spread: each gateway took its share
        deadline = time.time() + 30
        while True:
            ok, held = spread(gws)
            if ok:
                break
            check(time.time() < deadline, "%s: the shards did not spread within 30 s: %r" % (store, held))
            time.sleep(0.1)
        print("%s: shards spread %r" % (store, {n: sorted(h) for n, h in held.items()}))
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
        gws["C"].kill()
        t_kill = time.time()
        for x in ls["C"]:
            x.close()
        survivors = ls["A"] + ls["B"]
        # what C held when it died: its log is complete now
        dead = {s for s, _, b in held_intervals(gws["C"], t_kill) if b == t_kill}
        check(dead, "%s: the replica killed held no shard" % store)
        # the hand-over: C's leases run out (lease_ms), its hellos stop being heard
        # (3 s), then A and B take its shards: wait for that
        deadline = time.time() + 30
        while True:
            taken = {}
            for n in ("A", "B"):
                for t, sh in taken_after(gws[n], t_kill):
                    if sh in dead:
                        taken[sh] = min(t, taken.get(sh, t))
            if set(taken) == dead:
                break
            check(time.time() < deadline, "%s: the dead replica's shards %r not taken by the others within 30 s: "
                  "%r" % (store, sorted(dead), taken))
            check(not any(x.ended for x in survivors), "%s: a survivor's stream ended" % store)
            time.sleep(0.1)
        handover = max(taken.values()) - t_kill
        # judged: the changes until a whole period after the hand-over (and at
        # least 1.5 periods after the kill), each over its whole window
        t1 = max(t_kill + PERIOD_MS / 1000.0 * 1.5, t_kill + handover + PERIOD_MS / 1000.0)
        observe(survivors, t1 + PERIOD_MS / 1000.0)
        for x in survivors:
            x.close()
        gaps = holder_gaps(held_intervals(gws["A"]) + held_intervals(gws["B"]) +
                           held_intervals(gws["C"], t_kill), t0)
        d_before, x_before = judge(survivors, t0, t_kill, "before the kill", gaps)
        d_after, x_after = judge(survivors, t_kill, t1, "after the kill", gaps)
        print("%s: before the kill %d changes told, delay p50 %.0f ms p99 %.0f ms; after it %d, p50 %.0f ms "
              "p99 %.0f ms; %d + %d changes excused (their shard unheld, taken again too late to tell them); "
              "the dead replica's %d shards all taken %.2f s after the SIGKILL (%s)"
              % (store, len(d_before), percentile(d_before, 50) * 1000, percentile(d_before, 99) * 1000, len(d_after),
                 percentile(d_after, 50) * 1000, percentile(d_after, 99) * 1000, x_before, x_after, len(dead),
                 handover, ", ".join("%d at %.2f s" % (s, t - t_kill) for s, t in sorted(taken.items()))))
        check(len(d_after) > x_after, "%s: after the kill, changes were told (%d) more than excused (%d)"
              % (store, len(d_after), x_after))
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
