#!/usr/bin/env python3
"""The listen scenario (bench/run listen): 64 legacy sessions spread over the
gateways each subscribe to 20 resources of backend_mock and keep their GET
stream open; a producer changes them 20 times a second through
POST /webhooks/resources/{source}, posting to the gateways in turn (one
resource a post, round robin). Every subscriber must hear every change once,
wherever it was posted. The reference's shape by default (30 s).

Printed per fleet: notifications heard of those due (posts accepted x
subscribers), told twice, missed, and the time from a post to each of its
notifications (p50 / p99). One gateway alone (coordinator_memory), four on
Redis and four on NATS (R1), each from the shipped conf/fleet-*.json with 20
mock resources added.

  bench/listen.py
  bench/listen.py --stores redis --gateways 2 --seconds 10 --json out.jsonl
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import gateway  # noqa: E402
from fleet_stores import start_store, stop_all  # noqa: E402
from webhooklib import UPDATED, legacy_listener, new_secret, percentile, post_webhook  # noqa: E402

NATS = os.environ.get("NATS_SERVER", "/usr/sbin/nats-server")


def fleet_manifest(store, resources):
    conf = os.path.join(ROOT, "conf", "fleet-%s.json" % ("nats" if store == "nats" else "redis"))
    with open(conf) as f:
        m = json.load(f)
    if store == "memory":  # one gateway alone: the single node's own coordinator
        m["cluster"] = {"kind": "single_node"}
        m["modules"] = [x for x in m["modules"] if not x["module"].startswith("coordinator_")]
    mock = next(x for x in m["modules"] if x["module"] == "backend_mock")
    mock["config"]["resources"] = [{"uri": u, "name": u.rsplit("/", 1)[1], "text": "r"} for u in resources]
    for x in m["modules"]:
        if x["module"] == "audit_file":
            x["config"]["path"] = "/dev/null"
    m["gateway"]["log_level"] = "warn"
    return m


def run_fleet(ctx, a, store):
    servers, gws = [], []
    # the manifest's text names the store's variable (its description too): set for memory as well
    env = {"MCPG_WEBHOOK_SECRET": a.secret, "MCPG_REDIS_URL": "redis://127.0.0.1:1"}
    try:
        if store != "memory":
            srv, _, store_env = start_store(ctx, store, "listen")
            servers.append(srv)
            env.update(store_env)
        n_gw = 1 if store == "memory" else a.gateways
        uris = ["mock://fleet/r%d" % i for i in range(a.resources)]
        m = fleet_manifest(store, uris)
        for k in range(n_gw):
            gws.append(gateway.Gateway(ctx, manifest=m, env=env, name="listen-%s-%d" % (store, k)).start())
        for g in gws:  # each replica's sessions need its store connection up
            gateway.wait_for(lambda: gateway.readyz_coordinator(g.port) in ("ok", "none"), 20,
                             "the store to answer on %s" % g.name, interval=0.1)
        ls = [legacy_listener(gws[s % n_gw].port, uris, name="s%d" % s) for s in range(a.sessions)]
        time.sleep(1)
        print("  %s: %d gateways, %d sessions on %d resources; posting %d changes/s for %d s"
              % (store, n_gw, len(ls), len(uris), a.rate, a.seconds), flush=True)
        posts = {u: [] for u in uris}  # uri -> [monotonic post times] of accepted posts
        refused = 0
        t0 = time.monotonic()
        k = 0
        while time.monotonic() - t0 < a.seconds:
            due = t0 + k / float(a.rate)
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            uri = uris[k % len(uris)]
            sent = time.monotonic()
            r, _ = post_webhook(gws[k % n_gw].port, "notes", {"uri": uri}, a.secret)
            if r.status == 202:
                posts[uri].append(sent)
            else:
                refused += 1
            k += 1
            if k % a.rate == 0:
                print("\r  %s: %3d/%d s, %d posts, %d refused" % (store, k // a.rate, a.seconds, k, refused),
                      end="", flush=True)
        print()
        time.sleep(3)  # what is still on its way
        due = once = twice = missed = 0
        delays = []
        for lst in ls:
            for uri in uris:
                heard = sorted(lst.notes(UPDATED, uri))
                sent = posts[uri]
                due += len(sent)
                # each post is matched with the first notification after it and before the next post
                for i, t in enumerate(sent):
                    nxt = sent[i + 1] if i + 1 < len(sent) else float("inf")
                    hits = [h for h in heard if t <= h < nxt]
                    if not hits:
                        missed += 1
                    else:
                        once += 1
                        twice += len(hits) > 1
                        delays.append(hits[0] - t)
        for lst in ls:
            lst.close()
        row = {"bench": "listen", "scenario": "listen", "store": store, "gateways": n_gw, "sessions": len(ls),
               "resources": len(uris), "rate": a.rate, "seconds": a.seconds, "posts": k,
               "refused": refused, "due": due, "heard": once, "twice": twice, "missed": missed,
               "p50_ms": round(percentile(delays, 50) * 1000, 1) if delays else None,
               "p99_ms": round(percentile(delays, 99) * 1000, 1) if delays else None}
        for g in gws:
            g.stop()
        return row
    finally:
        stop_all(gws, servers)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", default="memory redis nats")
    ap.add_argument("--gateways", type=int, default=4)
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--resources", type=int, default=20)
    ap.add_argument("--rate", type=int, default=20, help="changes posted a second")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--json", default="")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "mcpg"))
    ap.add_argument("--modules", default=os.path.join(ROOT, "build", "modules"))
    a = ap.parse_args()
    a.secret = new_secret()
    ctx = gateway.Context(argparse.Namespace(bin=a.bin, modules=a.modules, source=ROOT))
    rows = []
    print("listen: %d sessions subscribed to %d resources, %d webhook changes a second through the "
          "gateways in turn, %d s" % (a.sessions, a.resources, a.rate, a.seconds))
    try:
        for store in a.stores.split():
            if store == "nats" and not os.path.exists(NATS):
                print("  nats: skipped (no %s)" % NATS)
                continue
            rows.append(run_fleet(ctx, a, store))
    finally:
        ctx.cleanup()
    print("| fleet | notifications heard of due | told twice | missed | post → notification p50 / p99 |")
    print("|---|---|---:|---:|---|")
    for r in rows:
        fleet = "one gateway alone" if r["store"] == "memory" else "%d gateways, %s" % (r["gateways"], r["store"])
        print("| %s | %d of %d | %d | %d | %s / %s ms |" % (fleet, r["heard"], r["due"], r["twice"], r["missed"],
                                                          r["p50_ms"], r["p99_ms"]))
    if a.json:
        with open(a.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
