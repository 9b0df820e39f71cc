#!/usr/bin/env python3
"""The watch scenario (bench/run watch): sessions on every replica subscribe
to resources that the gateways poll (bindings[].watch, kernel/watch.c) from a
backend whose versions move on the clock and never says so (the fixture
fx_versions); halfway one gateway is killed with SIGKILL. The reference's
shape by default: 32 sessions, 50 resources polled every 10 s, versions
moving every 25 s, 60 s, the default lease (gateway.watch.lease_ms 6000).

Printed per fleet: changes that were due to every subscriber, told once,
told twice, missed, the delay from a change to its notification (p50 / p99),
reads per poll interval fleet-wide (one per resource when the shards split
the work), and the hand-over: how long after the kill the survivors held
every shard the dead replica had.

  bench/watch.py                        one gateway, four on Redis, four on NATS
  bench/watch.py --stores redis --seconds 30 --json out.jsonl
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import gateway  # noqa: E402
import test_watch as tw  # noqa: E402
from fleet_stores import start_store, stop_all  # noqa: E402
from webhooklib import percentile  # noqa: E402


def run_fleet(ctx, args, store):
    servers, gws = [], []
    try:
        coord, kind = None, None
        if store != "memory":
            srv, coord, _ = start_store(ctx, store, "watch")
            servers.append(srv)
            kind = store
        n_gw = 1 if store == "memory" else args.gateways
        for k in range(n_gw):
            m = tw.manifest(ctx, "g%d" % k, coord, lease_ms=args.lease_ms, kind=kind)
            m["gateway"]["watch"]["shards"] = args.shards
            m["gateway"]["log_level"] = "info"
            gws.append(gateway.Gateway(ctx, manifest=m, name="watch-%s-%d" % (store, k)).start())
        uris = ["ver://r/%d" % i for i in range(tw.COUNT)]
        ls = [tw.Listener(gws[s % n_gw].port, uris) for s in range(args.sessions)]
        print("  %s: %d gateways, %d sessions each subscribed to %d resources; waiting for the first polls"
              % (store, n_gw, len(ls), tw.COUNT), flush=True)
        tw.settled([g.port for g in gws], timeout=tw.INTERVAL_MS / 1000.0 * 3 + 30)
        reads0 = sum(tw.reads_of(g.port) for g in gws)
        t0 = time.time()
        half = args.seconds / 2.0
        dead_shards, t_kill, victim = set(), None, None
        while time.time() - t0 < args.seconds:
            time.sleep(1)
            el = time.time() - t0
            print("\r  %s: %3.0f/%d s, %d notifications so far" % (store, el, args.seconds,
                                                                  sum(len(x.got) for x in ls)),
                  end="", flush=True)
            if n_gw > 1 and t_kill is None and el >= half:
                victim = gws[-1]
                dead_shards = tw.shards_of(victim)
                reads_mid = sum(tw.reads_of(g.port) for g in gws)
                span = time.time() - t0
                victim.kill()
                t_kill = time.time()
                for x in ls:
                    if x.conn.port == victim.port:
                        x.close()
        print()
        live = [g for g in gws if g is not victim]
        if t_kill is None:
            reads_mid, span = sum(tw.reads_of(g.port) for g in gws), time.time() - t0
        t_end = time.time()
        margin = tw.INTERVAL_MS / 1000.0 + (args.lease_ms + 4000) / 1000.0
        judged = [x for x in ls if victim is None or x.conn.port != victim.port]
        time.sleep(1)
        for x in ls:
            x.close()
        due, once, twice, missed, delays, _ = tw.tally(judged, t0, t_end - margin)
        handover = None
        if t_kill is not None:
            taken = sorted(t for g in live for t, sh in tw.taken_after(g, t_kill) if sh in dead_shards)
            handover = (taken[len(dead_shards) - 1] - t_kill) if len(taken) >= len(dead_shards) else None
        reads_per_interval = (reads_mid - reads0) / (span * 1000.0 / tw.INTERVAL_MS)
        row = {"bench": "watch", "scenario": "watch", "store": store, "gateways": n_gw, "sessions": len(ls),
               "resources": tw.COUNT, "interval_ms": tw.INTERVAL_MS, "period_ms": tw.PERIOD_MS,
               "lease_ms": args.lease_ms, "seconds": args.seconds, "due": due, "told_once": once,
               "told_twice": twice, "missed": missed,
               "delay_p50_ms": round(percentile(delays, 50) * 1000) if delays else None,
               "delay_p99_ms": round(percentile(delays, 99) * 1000) if delays else None,
               "reads_per_interval": round(reads_per_interval, 1),
               "killed": t_kill is not None, "dead_shards": len(dead_shards),
               "handover_s": round(handover, 2) if handover is not None else None}
        for g in live:
            g.stop()
        return row
    finally:
        stop_all(gws, servers)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", default="memory redis nats")
    ap.add_argument("--gateways", type=int, default=4)
    ap.add_argument("--sessions", type=int, default=32)
    ap.add_argument("--resources", type=int, default=50)
    ap.add_argument("--interval-ms", type=int, default=10000)
    ap.add_argument("--period-ms", type=int, default=25000)
    ap.add_argument("--lease-ms", type=int, default=6000)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--json", default="")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "mcpg"))
    ap.add_argument("--modules", default=os.path.join(ROOT, "build", "modules"))
    a = ap.parse_args()
    tw.COUNT, tw.INTERVAL_MS, tw.PERIOD_MS = a.resources, a.interval_ms, a.period_ms
    ctx = gateway.Context(argparse.Namespace(bin=a.bin, modules=a.modules, source=ROOT))
    if not os.path.exists(os.path.join(ctx.test_modules, "fx_versions.so")):
        sys.exit("no %s/fx_versions.so: build the tests (make build)" % ctx.test_modules)
    rows = []
    print("watch: %d sessions, %d resources polled every %d ms, versions moving every %d ms, %d s, "
          "one gateway of a fleet killed halfway" % (a.sessions, a.resources, a.interval_ms, a.period_ms,
                                                    a.seconds))
    try:
        for store in a.stores.split():
            if store == "nats" and not os.path.exists(tw.NATS):
                print("  nats: skipped (no %s)" % tw.NATS)
                continue
            rows.append(run_fleet(ctx, a, store))
    finally:
        ctx.cleanup()
    print("| fleet | changes due | told once | twice | missed | delay p50 / p99 | reads per interval "
          "(resources) | hand-over after SIGKILL |")
    print("|---|---:|---:|---:|---:|---|---|---|")
    for r in rows:
        fleet = "one gateway alone" if r["store"] == "memory" else "%d gateways, %s" % (r["gateways"], r["store"])
        print("| %s | %d | %d | %d | %d | %s / %s ms | %.1f (%d) | %s |"
              % (fleet, r["due"], r["told_once"], r["told_twice"], r["missed"], r["delay_p50_ms"],
                 r["delay_p99_ms"], r["reads_per_interval"], r["resources"],
                 "%.1f s (%d shards)" % (r["handover_s"], r["dead_shards"]) if r["handover_s"] is not None
                 else "—"))
    if a.json:
        with open(a.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
