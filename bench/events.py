#!/usr/bin/env python3
"""The events scenario (bench/run events): MCP Events (docs/events.md) into
64 push streams. For each fleet -- one gateway alone (single_node), one and
four gateways on Redis, one and four on NATS (R1) -- the store and the
gateways are started on free ports from conf/events.json,
conf/events-durable.json (single-durable: the single node's coordinator
journaled to a file in the run's temporary directory, every 202 after an
fdatasync) or conf/events-fleet-<store>.json, then each rate (100, 400, 1000, 1600 events
a second offered, one after the other on the same fleet) is one run of
build/bin/mcpg-events-load: 64 events/stream readers spread over the
gateways, one producer per 100 events/s posting POST /webhooks/events/bench
through the gateways in turn, each posting its next event when the last is
answered and its pace allows. The reference's shape (30 s after a 3 s
warm-up); a delivery counts when its stream heard it within 3 s after the
last post.

Measured around the load's window (its @measure and @drained markers): the
gateways' CPU (user + system from /proc/<pid>/stat, all gateways) per
delivery, the store's cores, and coordinator messages per accepted event
(NATS: /varz in_msgs; Redis: INFO commandstats calls), the machine's steal.

--kill-owner: halfway through each run one gateway is killed with SIGKILL:
the events owner (the replica that logged it moves the inbox, checked
against the value of mcpg.ev.lease on Redis), else gateway 1; its streams
reopen on the next gateway from their cursor and its producers move on, and
the run must still show nothing lost, told twice or out of order. A killed
gateway is started again before the next rate.

  bench/events.py
  bench/events.py --fleets "single redis4" --rates "100 400" --seconds 10 --json out.jsonl
  bench/events.py --fleets nats4 --rates 100 --seconds 10 --kill-owner
  bench/events.py --fleets "single single-durable" --rates "100 400 1000 1600" --seconds 15
"""

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import gateway  # noqa: E402
from fleet_stores import start_store, stop_all  # noqa: E402
from webhooklib import new_secret  # noqa: E402

NATS = os.environ.get("NATS_SERVER", "/usr/sbin/nats-server")
CLK_TCK = os.sysconf("SC_CLK_TCK")
FLEETS = {  # name: (store, gateways, label)
    "single": ("memory", 1, "one gateway alone"),
    "single-durable": ("file", 1, "one gateway alone, journal on disk"),
    "redis1": ("redis", 1, "one gateway, Redis"),
    "redis4": ("redis", 4, "four gateways, Redis"),
    "nats1": ("nats", 1, "one gateway, NATS R1"),
    "nats4": ("nats", 4, "four gateways, NATS R1"),
}
OWNER_LINE = "now moves the events inbox"


def ticks(pid):
    """utime + stime of a whole process, in clock ticks (None once it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    f = s[s.rindex(")") + 2:].split()
    return int(f[11]) + int(f[12])


def steal_ticks():
    with open("/proc/stat") as f:
        cpu = f.readline().split()
    return int(cpu[8]), sum(int(x) for x in cpu[1:9])


def pin(pid, cpus):
    if cpus:
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)


def events_ready(port):
    r = gateway.send_one(port, gateway.stateless_request(port, "events/poll",
                                                         {"name": "bench.tick", "cursor": None}))
    return r.status == 200


def manifest(store, info_logs, ctx=None):
    name = {"memory": "events.json", "file": "events-durable.json"}.get(
        store, "events-fleet-%s.json" % store)
    with open(os.path.join(ROOT, "conf", name)) as f:
        m = json.load(f)
    if store == "file":  # a fresh journal in the run's temporary directory
        m["cluster"]["path"] = ctx.path("coord-%d.journal" % time.time_ns())
    for x in m["modules"]:
        if x["module"] == "audit_file":
            x["config"]["path"] = "/dev/null"
    # the owner says so at info level: --kill-owner finds it that way
    m["gateway"]["log_level"] = "info" if info_logs else "warn"
    return m


class Fleet:
    """A store (or none) and n gateways on it, each started and stopped by pid."""

    def __init__(self, ctx, a, key):
        self.ctx, self.a, self.key = ctx, a, key
        self.store, self.n, self.label = FLEETS[key]
        self.srv, self.gws, self.env = None, [], {"MCPG_EVENTS_SECRET": a.secret}
        self.redis_prefix = None

    def start(self):
        if self.store not in ("memory", "file"):
            self.srv, _, store_env = start_store(self.ctx, self.store, "events-" + self.key)
            self.env.update(store_env)
            self.redis_prefix = store_env.get("MCPG_REDIS_PREFIX")
            pin(self.srv.proc.pid, self.a.gw_cpus)
        self.m = manifest(self.store, self.a.kill_owner, self.ctx)
        for k in range(self.n):
            self.gws.append(self.start_gateway(k))
        return self

    def start_gateway(self, k):
        g = gateway.Gateway(self.ctx, manifest=self.m, env=self.env, name="events-%s-%d" % (self.key, k)).start()
        gateway.wait_for(lambda: gateway.readyz_coordinator(g.port) in ("ok", "none"), 20,
                         "the store to answer on %s" % g.name, interval=0.1)
        # a replica answers readers 503 until it has read where the log is
        gateway.wait_for(lambda: events_ready(g.port), 20, "the events log's head on %s" % g.name,
                         interval=0.1)
        pin(g.proc.pid, self.a.gw_cpus)
        return g

    def restart_dead(self):
        for k, g in enumerate(self.gws):
            if g.proc.poll() is not None:
                self.gws[k] = self.start_gateway(k)

    def live(self):
        return [g for g in self.gws if g.proc.poll() is None]

    def cpu_ticks(self):
        """{pid: ticks} of the gateways alive."""
        return {g.proc.pid: t for g in self.live() for t in [ticks(g.proc.pid)] if t is not None}

    def store_ticks(self):
        return ticks(self.srv.proc.pid) if self.srv else None

    def store_msgs(self):
        """Messages the coordinator received so far (NATS in_msgs; Redis commands), or None."""
        if self.store == "nats":
            return self.srv.varz()["in_msgs"]
        if self.store == "redis":
            return sum(self.srv.commands().values())
        return None

    def lease(self):
        if self.store == "redis":
            # coordinator_redis: <prefix>k:<key>, a hash whose v is the value
            return self.srv.cli("HGET", (self.redis_prefix or "") + "k:mcpg.ev.lease", "v") or None
        return None

    def owner(self):
        """(index, how) of the gateway that holds the events owner's lease, as its log says."""
        last = None
        for k, g in enumerate(self.gws):
            if g.proc.poll() is not None:
                continue
            lines = [ln for ln in g.stderr().splitlines() if OWNER_LINE in ln]
            if lines:
                last = k  # a later owner's line wins: the one who took it over
        lease = self.lease()
        if last is not None and (lease is None or lease in self.gws[last].stderr()):
            return last, "its log" + (" and mcpg.ev.lease" if lease else "")
        return min(1, self.n - 1), "gateway 1 (the owner was not found%s)" % (
            ", mcpg.ev.lease is %s" % lease if lease else "")

    def stop(self):
        for g in self.live():
            g.stop()

    def urls(self):
        return ["http://127.0.0.1:%d" % g.port for g in self.live()]


def run_rate(fleet, a, rate):
    """One run of mcpg-events-load at `rate`, measured around its window."""
    producers = int(math.ceil(rate / 100.0))
    argv = ["taskset", "-c", a.load_cpu] if a.load_cpu else []
    argv += [a.load, "--streams", str(a.streams), "--rate", str(rate), "--duration", str(a.seconds),
             "--warmup", str(a.warmup), "--source", "bench", "--name", "bench.tick"]
    for u in fleet.urls():
        argv += ["--url", u]
    env = dict(os.environ, MCPG_EVENTS_SECRET=a.secret)
    marks, errlines = {}, []
    killed = {}
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)

    def snapshot():
        return {"t": time.monotonic(), "gw": fleet.cpu_ticks(), "store": fleet.store_ticks(),
                "msgs": fleet.store_msgs(), "steal": steal_ticks()}

    def kill_later():
        time.sleep(a.seconds / 2.0)
        if p.poll() is not None:
            return
        k, how = fleet.owner()
        g = fleet.gws[k]
        last = ticks(g.proc.pid)
        killed.update({"index": k, "how": how, "pid": g.proc.pid, "ticks": last, "t": time.monotonic()})
        g.kill()
        print("    killed gateway %d (pid %d, found by %s)" % (k, killed["pid"], how), flush=True)

    def read_err():
        for line in p.stderr:
            line = line.rstrip("\n")
            if line.endswith("@measure"):
                marks["measure"] = snapshot()
                if a.kill_owner and fleet.n > 1:
                    threading.Thread(target=kill_later, daemon=True).start()
            elif line.endswith("@drained"):
                marks["drained"] = snapshot()
            else:
                if "] posted" not in line:
                    errlines.append(line)
                print("    " + line.split("mcpg-events-load: ", 1)[-1], flush=True)

    outs = []
    readers = [threading.Thread(target=read_err, daemon=True),
               threading.Thread(target=lambda: outs.append(p.stdout.read()), daemon=True)]
    for t in readers:
        t.start()
    try:
        p.wait(timeout=a.warmup + a.seconds + 60)
    except subprocess.TimeoutExpired:
        p.kill()  # by pid: the one this run started
        p.wait()
    for t in readers:
        t.join(5)
    lines = [ln for ln in "".join(outs).splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError("mcpg-events-load printed no result (exit %s):\n%s" % (p.returncode, "\n".join(errlines)))
    r = json.loads(lines[-1])
    row = dict(r)
    row.update({"bench": "events", "scenario": "events", "fleet": fleet.key, "fleet_label": fleet.label,
                "store": fleet.store, "gateways": fleet.n, "rate": rate, "load_rc": p.returncode})
    m0, m1 = marks.get("measure"), marks.get("drained")
    if m0 and m1:
        secs = m1["t"] - m0["t"]
        gw = 0
        for pid, t0 in m0["gw"].items():
            t1 = m1["gw"].get(pid)
            if t1 is None and killed.get("pid") == pid:
                t1 = killed["ticks"]  # its CPU up to the kill
            gw += (t1 or t0) - t0
        gw_s = gw / float(CLK_TCK)
        deliveries = r["deliveries_within_3s"]
        row["window_s"] = round(secs, 3)
        row["gw_cpu_s"] = round(gw_s, 3)
        row["gw_cores"] = round(gw_s / secs, 2) if secs > 0 else None
        row["gw_cpu_us_per_delivery"] = round(gw_s * 1e6 / deliveries, 1) if deliveries else None
        if m0["store"] is not None and m1["store"] is not None:
            row["store_cores"] = round((m1["store"] - m0["store"]) / float(CLK_TCK) / secs, 2)
        if m0["msgs"] is not None:
            msgs = m1["msgs"] - m0["msgs"]
            row["coord_msgs"] = msgs
            row["coord_msgs_kind"] = "nats_in_msgs" if fleet.store == "nats" else "redis_cmds"
            row["coord_msgs_per_event"] = round(msgs / float(r["accepted"]), 1) if r["accepted"] else None
        ds, dt = m1["steal"][0] - m0["steal"][0], m1["steal"][1] - m0["steal"][1]
        row["steal_pct"] = round(100.0 * ds / dt, 1) if dt else 0.0
    if killed:
        row["killed"] = {"index": killed["index"], "how": killed["how"],
                         "at_s": round(killed["t"] - m0["t"], 1) if m0 else None}
    row["gw_cpus"], row["load_cpu"] = a.gw_cpus, a.load_cpu
    return row


def fmt_refused(r):
    if not r["refused"]:
        return "none refused"
    return "%d refused (%s)" % (r["refused"], ", ".join("%s %d" % kv for kv in sorted(r["refused_by"].items())))


def table(rows):
    print("| fleet | events offered/s | accepted/s | deliveries within 3 s | p50 / p99 | gateway CPU per delivery "
          "| coordinator cores | coordinator messages per event | lost / twice / out of order | post → 202 p50 / p99 |")
    print("|---|---:|---|---|---|---:|---:|---:|---|---|")
    for r in rows:
        acc = "%.0f" % r["accepted_per_s"]
        if r["refused"]:
            acc += ", " + fmt_refused(r)
        got, due = r["deliveries_within_3s"], r["deliveries_expected"]
        share = "%d of %d" % (got, due) if got == due or not due else "%d of %d (%.1f %%)" % (got, due, (1000 * got // due) / 10.0)
        cpu = r.get("gw_cpu_us_per_delivery")
        lab = r["fleet_label"] + (" (gateway %d killed)" % r["killed"]["index"] if r.get("killed") else "")
        print("| %s | %d | %s | %s | %.0f / %.0f ms | %s | %s | %s | %d / %d / %d | %.1f / %.1f ms |" % (
            lab, r["rate"], acc, share, r["p50_ms"], r["p99_ms"], "%.0f µs" % cpu if cpu else "—",
            r.get("store_cores", "—"), r.get("coord_msgs_per_event", "—"), r["lost"], r["duplicated"],
            r["reordered"], r.get("post_p50_ms", 0), r.get("post_p99_ms", 0)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fleets", default="single redis1 redis4 nats1 nats4", help="of: " + " ".join(FLEETS))
    ap.add_argument("--rates", default="100 400 1000 1600", help="events a second offered, in turn")
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--kill-owner", action="store_true", help="SIGKILL the events owner halfway (fleets of 2+)")
    ap.add_argument("--gw-cpus", default="0" if os.cpu_count() >= 2 else "",
                    help="cores for the gateways and the store (taskset list; empty: not pinned)")
    ap.add_argument("--load-cpu", default=str(os.cpu_count() - 1) if os.cpu_count() >= 2 else "",
                    help="the core of mcpg-events-load (empty: not pinned)")
    ap.add_argument("--json", default="")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "mcpg"))
    ap.add_argument("--modules", default=os.path.join(ROOT, "build", "modules"))
    ap.add_argument("--load", default=os.path.join(ROOT, "build", "bin", "mcpg-events-load"))
    a = ap.parse_args()
    for f in a.fleets.split():
        if f not in FLEETS:
            ap.error("no fleet %r (one of: %s)" % (f, " ".join(FLEETS)))
    if not os.path.exists(a.load):
        ap.error("no %s: cmake --build build --target mcpg-events-load" % a.load)
    if not os.path.exists(os.path.join(a.modules, "events.so")):
        ap.error("no %s: the build has no events module" % os.path.join(a.modules, "events.so"))
    a.secret = new_secret()
    rates = [int(x) for x in a.rates.split()]
    ctx = gateway.Context(argparse.Namespace(bin=a.bin, modules=a.modules, source=ROOT))
    rows, failed = [], False
    print("events: %d events/stream readers, one producer per 100 events/s, %s events/s offered, %g s after %g s "
          "of warm-up%s" % (a.streams, "/".join(map(str, rates)), a.seconds, a.warmup,
                             ", the events owner killed halfway" if a.kill_owner else ""))
    try:
        for key in a.fleets.split():
            store = FLEETS[key][0]
            if store == "nats" and not os.path.exists(NATS):
                print("  %s: skipped (no %s)" % (key, NATS))
                continue
            fleet = Fleet(ctx, a, key)
            try:
                fleet.start()
                for rate in rates:
                    fleet.restart_dead()
                    print("  %s, %d events/s:" % (fleet.label, rate), flush=True)
                    row = run_rate(fleet, a, rate)
                    rows.append(row)
                    failed |= row["load_rc"] not in (0, 1)
                    if a.json:
                        with open(a.json, "a") as f:
                            f.write(json.dumps(row) + "\n")
                fleet.stop()
            finally:
                stop_all(fleet.gws, [fleet.srv] if fleet.srv else [])
    finally:
        ctx.cleanup()
    table(rows)
    sys.exit(1 if failed or not rows else 0)


if __name__ == "__main__":
    main()
