#!/usr/bin/python3
"""Webhook delivery across a fleet on Redis (redis-server started here on a free port,
stopped by pid): gateways A and B share the store; a subscription made on one replica
is delivered by the one holding the owner's lease, whichever took the call. The owner
killed (SIGKILL: no lease given back), the other takes the lease over, learns the
subscription from the store and resumes from the cursor it wrote: every event, those
posted before and after the kill, reaches the receiver, in order once the copies of
an id are set aside (delivery is at least once across a failover: a copy is allowed,
a gap is not). Skipped when the build or machine lacks Redis."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import Context, Gateway, Skip, check, check_eq, parse_args, run_tests  # noqa: E402
from test_events_subscribe import (TYPE, VAR, Receiver, manifest, post_event,  # noqa: E402
                                   result, rpc, sub_params)
from webhooklib import new_secret  # noqa: E402


def main():
    args = parse_args()
    ctx = Context(args)
    if not os.path.exists(os.path.join(args.modules, "coordinator_redis.so")):
        return run_tests([("a fleet on Redis", lambda: (_ for _ in ()).throw(
            Skip("no coordinator_redis in this build")))], ctx)
    from fleet_stores import start_store
    srv, coord, _ = start_store(ctx, "redis", "evsub")
    src = new_secret()
    rx = Receiver()
    gws = []
    for name in ("A", "B"):
        m = manifest(lease_ms=1000)
        m["cluster"] = {"kind": "redis"}
        m["modules"].append(coord)
        gws.append(Gateway(ctx, manifest=m, env={VAR: src}, name="evfleet-" + name).start())

    def owner():
        for g in gws:
            if g.proc.poll() is None and "this replica delivers the webhook subscriptions" in g.stderr():
                return g
        return None

    state = {}

    def t_any_replica():
        # a replica's reader serves the log from where it found it at its start: one
        # event logged and seen by both before the test's own
        post_event(gws[0].port, src, TYPE, {"warm": 1})
        deadline = time.time() + 10
        while time.time() < deadline:
            polls = [rpc(g.port, "events/poll", {"name": TYPE, "cursor": None})[1] for g in gws]
            if all(int(m.get("result", {}).get("cursor", "0")) >= 1 for m in polls):  # 503 first
                break
            time.sleep(0.1)
        deadline = time.time() + 10
        while not owner() and time.time() < deadline:
            time.sleep(0.05)
        own = owner()
        check(own is not None, "one replica delivers")
        other = gws[1] if own is gws[0] else gws[0]
        sec = new_secret()
        rx.secrets["/f"] = sec
        res = result(other.port, "events/subscribe", sub_params(rx.url("/f"), sec), "subscribe "
                     "on the replica that does not deliver")
        time.sleep(0.3)
        ids = [post_event(gws[i % 2].port, src, TYPE, {"n": i}) for i in range(4)]
        got = rx.wait("/f", 4)
        check_eq([g[3] and json.loads(g[3])["eventId"] for g in got], ids,
                 "delivered by the owner, in order")
        check(all(g[4] for g in got), "signed")
        check(all(g[2].get("x-mcp-subscription-id") == res["id"] for g in got), "the id")
        state.update(own=own, other=other, ids=ids)

    def t_failover():
        own, other, ids = state["own"], state["other"], state["ids"]
        time.sleep(1.3)  # the cursor written
        own.kill()
        more = [post_event(other.port, src, TYPE, {"n": 10 + i}) for i in range(4)]
        want = ids + more
        deadline = time.time() + 20
        seen = []
        while time.time() < deadline:
            seen = [json.loads(g[3])["eventId"] for g in rx.deliveries("/f")]
            if set(want) <= set(seen):
                break
            time.sleep(0.05)
        check(set(want) <= set(seen), "every event reached the receiver after the failover "
              "(%r of %r)" % (seen, want))
        first = []
        for e in seen:
            if e not in first:
                first.append(e)
        check_eq(first, want, "in order, copies aside")
        extra = len(seen) - len(set(seen))
        check(extra <= 4, "copies only of what was delivered before the kill (%d)" % extra)
        check(owner() is other, "the other replica delivers now")

    def t_stop():
        for g in gws:
            if g.proc.poll() is None:
                g.stop()
        rx.close()
        srv.stop()

    return run_tests([
        ("a subscription taken by any replica, delivered by the owner", t_any_replica),
        ("the owner killed: the other resumes from the written cursor, nothing lost", t_failover),
        ("the fleet stops cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
