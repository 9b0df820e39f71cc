#!/usr/bin/env python3
"""The MCP Events pipeline on a fleet, for Redis and for NATS (each started here on free
ports and stopped by pid): two gateways A and B on one store, two events/stream readers on
each, one producer posting alternately to A and B.

  * every stream on A and on B hears every accepted event once, in the order accepted,
    wherever it was posted (one owner moves the inbox; each replica reads the log once);
  * the owner (found by its log line) is SIGKILLed halfway: posts go on to the survivor
    (a post whose answer was lost is sent again with the same ids: a copy, dropped); the
    survivor takes the lease, and its streams still hear every accepted event once, in
    order. The hand-over (the kill to the first event the survivor delivers after it) is
    printed, not asserted;
  * (Redis) the inbox is bounded: with the owner's lease held by nobody's replica, posts
    past inbox_max_rows are 503 with Retry-After; once the lease is free a gateway takes
    it and every accepted event arrives.

Skipped for a store this machine or build lacks."""
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import Context, Gateway, Skip, base_manifest, check, check_eq, parse_args, run_tests  # noqa: E402
from eventslib import events_manifest, judge_once_in_order, open_stream, post_event  # noqa: E402
from fleet_stores import start_store, stop_all  # noqa: E402
from test_fleet_nats import NATS  # noqa: E402
from test_fleet_redis import REDIS_SERVER  # noqa: E402
from webhooklib import new_secret  # noqa: E402

VAR = "MCPG_TEST_EVENTS_SECRET"
N = int(os.environ.get("MCPG_EVENTS_FLEET_N", "300"))
OWNER_RE = re.compile(r"this replica \(([0-9a-f]+)\) now moves the events inbox")


def have(path):
    return shutil.which(path) is not None


def manifest(coordinator, **settings):
    m = base_manifest(gateway={"log_level": "info", "server": {"access_log": False}})
    m["cluster"] = {"kind": coordinator["module"].split("_")[1]}
    m["modules"].append(coordinator)
    m["events"] = events_manifest(VAR, lease_ms=1500, heartbeat_ms=1000, **settings)
    return m


def owner_of(gateways, timeout=10.0):
    """The gateway whose last owner line is the newest (each logs when it takes the lease)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        owners = [g for g in gateways if g.proc.poll() is None and OWNER_RE.search(g.stderr())]
        if len(owners) == 1:
            return owners[0]
        time.sleep(0.05)
    raise AssertionError("no single owner of the events inbox among %s"
                         % [g.name for g in gateways])


class Producer:
    """Posts order.created events one after another, each to the next live gateway; a
    post that is not answered 202 is sent again (same ids) to another."""

    def __init__(self, secret):
        self.secret, self.n, self.accepted, self.retried = secret, 0, [], 0

    def post(self, gateways):
        self.n += 1
        body = {"name": "order.created", "id": "e-%d" % self.n, "data": {"n": self.n}}
        wid = "w-%d" % self.n
        for attempt in range(20):
            live = [g for g in gateways if g.proc.poll() is None]
            g = live[(self.n + attempt) % len(live)]
            try:
                r, b = post_event(g.port, "shop", body, self.secret, wid=wid)
            except (OSError, ConnectionError):
                r = None
            if r is not None and r.status == 202:
                self.accepted.append(b["eventId"])
                return
            self.retried += 1
            time.sleep(0.05 if r is None or r.status != 503 else 0.2)
        raise AssertionError("event %d was never accepted" % self.n)


def run_store(ctx, store, secret):
    srv, coord, _ = start_store(ctx, store, "ev%d" % os.getpid())
    gws = []
    try:
        env = {VAR: secret}
        for name in ("A", "B"):
            gws.append(Gateway(ctx, manifest=manifest(coord), env=env, name="%s-%s" % (store, name)).start())
        a, b = gws
        owner = owner_of(gws)
        streams = [open_stream(g.port, "order.created", id="%s%d" % (g.name, i), label="%s/%d" % (g.name, i))
                   for g in gws for i in range(2)]
        prod = Producer(secret)
        for _ in range(N // 2):
            prod.post(gws)
        deadline = time.time() + 15
        while time.time() < deadline and not all(len(s.events()) >= len(prod.accepted) for s in streams):
            time.sleep(0.05)
        for s in streams:
            judge_once_in_order(s, prod.accepted, "%s: %s before the kill" % (store, s.label))
        survivor = b if owner is a else a
        mine = [s for s in streams if s.label.startswith(survivor.name)]
        before = len(prod.accepted)
        t_kill = time.monotonic()
        owner.kill()
        for _ in range(N - N // 2):
            prod.post(gws)
        deadline = time.time() + 20
        while time.time() < deadline and not all(len(s.events()) >= len(prod.accepted) for s in mine):
            time.sleep(0.05)
        for s in mine:
            judge_once_in_order(s, prod.accepted, "%s: %s across the owner's death" % (store, s.label))
        first_after = min(t for t, e in mine[0].times() if int(e["data"]["n"]) > before)
        print("%s: %d events accepted, %d posts sent again; owner killed, the first event "
              "after it delivered %.2f s later" % (store, len(prod.accepted), prod.retried,
                                                   first_after - t_kill))
        check(OWNER_RE.search(survivor.stderr()), "%s: the survivor took the lease" % store)
        for s in streams:
            s.close()
        survivor.stop()
        survivor.check_sanitizers()
    finally:
        stop_all(gws, [srv])


def run_bounded(ctx, secret):
    srv, coord, _ = start_store(ctx, "redis", "evb%d" % os.getpid())
    gws = []
    try:
        # the lease as coordinator_redis keeps a key: a hash {v: value, r: revision}
        # under "<prefix>k:", expiring by PEXPIRE
        lease = coord["config"]["key_prefix"] + "k:mcpg.ev.lease"
        srv.cli("HSET", lease, "v", "nobody", "r", "1")
        srv.cli("PEXPIRE", lease, "60000")
        g = Gateway(ctx, manifest=manifest(coord, inbox_max_rows=5), env={VAR: secret},
                    name="bounded").start()
        gws.append(g)
        s = open_stream(g.port, "order.created", id="b")
        taken, refused = [], []
        for i in range(12):
            r, body = post_event(g.port, "shop", {"name": "order.created", "id": "b-%d" % i,
                                                  "data": {}}, secret)
            (taken if r.status == 202 else refused).append((i, r))
        check_eq(len(taken), 5, "with no owner, the inbox takes inbox_max_rows (5) posts")
        check(all(r.status == 503 and r.header("retry-after") for _, r in refused),
              "the rest are 503 with Retry-After: %r" % [(i, r.status) for i, r in refused])
        time.sleep(0.5)
        check_eq(s.events(), [], "nothing is delivered before it is in the log")
        srv.cli("DEL", lease)
        deadline = time.time() + 10
        while time.time() < deadline and len(s.events()) < 5:
            time.sleep(0.05)
        judge_once_in_order(s, ["b-%d" % i for i, _ in taken], "the bounded inbox, once owned")
        r, _ = post_event(g.port, "shop", {"name": "order.created", "id": "b-late", "data": {}}, secret)
        check_eq(r.status, 202, "moved: the inbox takes posts again")
        s.close()
        g.stop()
        g.check_sanitizers()
    finally:
        stop_all(gws, [srv])


def main():
    args = parse_args()
    ctx = Context(args)
    secret = new_secret()

    def t_redis():
        if not have(REDIS_SERVER):
            raise Skip("no redis-server")
        run_store(ctx, "redis", secret)

    def t_nats():
        if not have(NATS):
            raise Skip("no nats-server")
        run_store(ctx, "nats", secret)

    def t_bounded():
        if not have(REDIS_SERVER):
            raise Skip("no redis-server")
        run_bounded(ctx, secret)

    return run_tests([("redis: once, in order, across the owner's death", t_redis),
                      ("nats: once, in order, across the owner's death", t_nats),
                      ("redis: the inbox is bounded, 503 + Retry-After past it", t_bounded)], ctx)


if __name__ == "__main__":
    sys.exit(main())
