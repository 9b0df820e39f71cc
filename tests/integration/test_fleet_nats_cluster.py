#!/usr/bin/env python3
"""A fleet on a 3-node NATS JetStream cluster: its faults.

Three nats-server processes (JetStream, each its own store in the test's temp
folder, server names n1..n3, routes to each other, free ports; stopped by pid,
also on failure) and two gateways A and B on conf/fleet-nats.json whose
MCPG_NATS_URL lists all three servers.

  * replicas 3 on nats-server older than 2.9.21: the gateway refuses to start,
    naming the server's version (compare-and-set on a replicated stream loses
    updates there); so the fleet's bucket is R1, and one node holds it;
  * a node that does not hold the bucket, one a gateway is connected to,
    killed (SIGKILL): the gateways fail over to the other nodes; stateless
    calls, a legacy session opened before (on both gateways), new sessions and
    the global limits work again within a short reconnect window (measured);
  * the node that holds the bucket killed: stateless calls are served on; a
    new legacy session is 503 with Retry-After; a global limit fails closed
    (503); once one op found the bucket unanswered (op_timeout_ms, 10 s here),
    the others are refused at once, not after op_timeout_ms each; /readyz stays 200 and
    says "coordinator":"unavailable"; a gateway started meanwhile starts and
    answers the same. The node started again on its port and store:
    everything works again on all three and what was written before is there
    (a session from before served by a gateway that never saw it, the budget
    spent before still spent).

Timings are printed; the asserts are on behaviour, not speed.
Skipped without /usr/sbin/nats-server or coordinator_nats.so.
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Gateway, _child_setup, call_tool, check, check_coordinator_down,  # noqa: E402
                     check_eq, free_port, readyz_coordinator, run_tests, wait_for)
from test_fleet_nats import NATS, fleet_context, fleet_manifest  # noqa: E402
from test_legacy_wire import initialize, request, rpc  # noqa: E402

BUCKET = "fleet"
STREAM = "KV_" + BUCKET
# The coordinator's op_timeout_ms here: far above what a loaded machine adds to
# an answer, so "refused at once, the bucket known down" (well under half of
# it) cannot be told from "waited op_timeout_ms" by chance.
OP_TIMEOUT_MS = 10000
AT_ONCE_S = OP_TIMEOUT_MS / 1000.0 / 2


class Node:
    """One cluster member: its ports are fixed for the whole test, so a node
    started again comes back where the clients and routes expect it."""

    def __init__(self, ctx, i):
        self.name = "n%d" % i
        self.dir = ctx.path(self.name)
        os.makedirs(self.dir, exist_ok=True)
        self.port, self.route, self.http = free_port(), free_port(), free_port()
        self.url = "nats://127.0.0.1:%d" % self.port
        self.proc = None

    def write_config(self, nodes):
        routes = ", ".join("nats-route://127.0.0.1:%d" % n.route for n in nodes)
        with open(os.path.join(self.dir, "nats.conf"), "w") as f:
            f.write('server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\n'
                    'jetstream { store_dir: "%s" }\n'
                    'cluster { name: c3, listen: 127.0.0.1:%d, routes: [%s] }\n'
                    % (self.name, self.port, self.http, os.path.join(self.dir, "store"),
                       self.route, routes))

    def start(self):
        log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen([NATS, "-c", os.path.join(self.dir, "nats.conf")],
                                     stdout=log, stderr=log, preexec_fn=_child_setup)
        log.close()

    def kill(self):
        """SIGKILL by pid: a crash, no goodbye to the clients or the routes."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def get(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.http, path),
                                        timeout=2) as r:
                return json.load(r)
        except (OSError, ValueError):
            return None

    def meta_leader(self):
        j = self.get("/jsz")
        return ((j or {}).get("meta_cluster") or {}).get("leader")

    def streams(self):
        """The names of the streams this node holds (a replica of)."""
        j = self.get("/jsz?accounts=true&streams=true") or {}
        return [s.get("name") for a in j.get("account_details") or []
                for s in a.get("stream_detail") or []]


def established_remote_ports(pid):
    """Remote ports of pid's established TCP connections (/proc: its socket
    inodes, matched in its network namespace's table)."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    with open("/proc/%d/net/tcp" % pid) as f:
        for line in f.readlines()[1:]:
            p = line.split()
            if p[3] == "01" and p[9] in inodes:
                ports.add(int(p[2].split(":")[1], 16))
    return ports


def connected_node(gw, nodes):
    """The node the gateway's coordinator is connected to, or None."""
    ports = established_remote_ports(gw.proc.pid)
    on = [n for n in nodes if n.alive() and n.port in ports]
    return on[0] if len(on) == 1 else None


def cluster_manifest(ctx, name):
    """conf/fleet-nats.json for this test: op_timeout_ms OP_TIMEOUT_MS."""
    m = fleet_manifest(ctx, name)
    for mod in m["modules"]:
        if mod["module"] == "coordinator_nats":
            mod["config"]["op_timeout_ms"] = OP_TIMEOUT_MS
    return m


def init_status(port):
    r = request(port, body=rpc("initialize", {"protocolVersion": "2025-11-25",
                                              "capabilities": {},
                                              "clientInfo": {"name": "t", "version": "1"}}),
                version=None)
    return r


def session_call(port, sid, msg, id=2):
    return request(port, body=rpc("tools/call", {"name": "echo", "arguments": {"message": msg}},
                                  id=id), session=sid)


def kill_serving_stateless(node, gws, what):
    """SIGKILL node; a stateless call touches no coordinator, so every gateway
    serves one right after. The kill's monotonic time."""
    t0 = time.monotonic()
    node.kill()
    print("killed %s (%s)" % (node.name, what))
    for gw in gws:
        r, out = call_tool(gw.port, "echo", {"message": "during"})
        check_eq(r.status, 200, "a stateless call right after the kill on %s (%r)"
                 % (gw.name, out))
    return t0


def wait_each(gws, ok, timeout, what, since):
    """Wait until ok(gw) on every gateway in turn: {name: seconds since `since`
    when it first was} (in turn: a later gateway's figure includes the wait
    for the earlier ones)."""
    took = {}
    for gw in gws:
        wait_for(lambda: ok(gw), timeout, "%s on %s" % (what, gw.name), interval=0.05)
        took[gw.name] = time.monotonic() - since
    return ", ".join("%s %.0f ms" % (k, v * 1000) for k, v in sorted(took.items()))


def main():
    ctx = fleet_context()
    if ctx is None:
        return 0
    nodes = [Node(ctx, i) for i in (1, 2, 3)]
    for n in nodes:
        n.write_config(nodes)
    urls = ",".join(n.url for n in nodes)
    env = {"MCPG_NATS_URL": urls, "MCPG_NATS_BUCKET": BUCKET}
    gws = {}
    state = {}

    def gateway(name):
        gw = Gateway(ctx, manifest=cluster_manifest(ctx, name), env=env, name="gw-" + name)
        gws[name] = gw
        return gw.start()

    def t_cluster():
        t0 = time.monotonic()
        for n in nodes:
            n.start()
        leader = wait_for(lambda: all(n.meta_leader() for n in nodes) and nodes[0].meta_leader(),
                          30, "a JetStream meta leader on every node", interval=0.05)
        print("cluster up, meta leader %s, in %.0f ms" % (leader, (time.monotonic() - t0) * 1000))

    def t_replicas3_refused():
        m = cluster_manifest(ctx, "r3")
        for mod in m["modules"]:
            if mod["module"] == "coordinator_nats":
                mod["config"]["replicas"] = 3
                mod["config"]["bucket"] = "r3"
        gw = Gateway(ctx, manifest=m, env=env, name="gw-r3")
        gw._spawn()
        rc = gw.wait_exit(30)
        err = gw.stderr()
        check(rc != 0, "a gateway with replicas 3 on nats-server 2.9.10 started (rc %r)" % rc)
        check("replicas 3 refused: nats-server 2.9.10" in err and "2.9.21" in err,
              "the refusal names the server's version and the fixed one:\n%s" % err[-1500:])
        check(not any("KV_r3" in n.streams() for n in nodes), "the refused bucket was created")

    def t_start():
        gateway("a")
        gateway("b")
        # the bucket: created by A at its start, R1, on one node
        holder = wait_for(lambda: [n for n in nodes if STREAM in n.streams()], 10,
                          "the bucket's stream on a node")
        check_eq(len(holder), 1, "nodes holding the R1 bucket")
        state["holder"] = holder[0]
        print("the bucket's stream %s is on %s" % (STREAM, holder[0].name))
        # a node to kill that a gateway is connected to and that does not hold the
        # bucket; nats.c picks a server at random, so restart B until one is
        for _ in range(12):
            on = {k: connected_node(g, nodes) for k, g in gws.items()}
            victim = [(k, n) for k, n in on.items() if n is not None and n is not state["holder"]]
            if victim:
                break
            gws["b"].stop()
            gateway("b")
        print("connected: %s" % ", ".join("%s -> %s" % (k, n.name if n else "?")
                                          for k, n in sorted(on.items())))
        check(victim, "no gateway connected to a node without the bucket after 12 restarts")
        state["victim_gw"], state["victim"] = victim[0]

    def t_before():
        a, b = gws["a"], gws["b"]
        _, sid = initialize(a.port)
        request(a.port, body={"jsonrpc": "2.0", "method": "notifications/initialized"},
                session=sid)
        for gw in (a, b):
            check_eq(session_call(gw.port, sid, "before").status, 200,
                     "the session's call on %s before any fault" % gw.name)
        state["sid"] = sid
        spent = 0
        for gw in (a, b):
            for _ in range(5):
                r, out = call_tool(gw.port, "budgeted", {"message": "x"})
                check_eq(r.status, 200, "budgeted before any fault (%r)" % out)
                spent += 1
        state["spent"] = spent

    def t_kill_non_holder():
        victim, gname = state["victim"], state["victim_gw"]
        a, b = gws["a"], gws["b"]
        t0 = kill_serving_stateless(victim, (a, b), "gateway %s's node, not the bucket's" % gname)
        # capped, not rated: a rate refusal (429) would read as "not back"
        took = wait_each((a, b), lambda gw: call_tool(gw.port, "capped", {"message": "x"})[0]
                         .status == 200, 30, "a global limit judged again", t0)
        new_node = connected_node(gws[gname], nodes)
        print("failover: the limits judged again after %s; gateway %s now on %s"
              % (took, gname, new_node.name if new_node else "?"))
        check(new_node is not None and new_node is not victim,
              "gateway %s is connected to a live node" % gname)
        sid = state["sid"]
        for gw in (a, b):
            check_eq(session_call(gw.port, sid, "after").status, 200,
                     "the session from before, on %s after the failover" % gw.name)
            r = init_status(gw.port)
            check_eq(r.status, 200, "a new session on %s after the failover (%r)"
                     % (gw.name, r.body[:200]))
            for _ in range(5):
                r, out = call_tool(gw.port, "budgeted", {"message": "x"})
                check_eq(r.status, 200, "budgeted after the failover (%r)" % out)
                state["spent"] += 1
            r, out = call_tool(gw.port, "capped", {"message": "x"})
            check_eq(r.status, 200, "capped after the failover on %s (%r)" % (gw.name, out))
        victim.start()
        wait_for(lambda: victim.meta_leader(), 30, "%s back in the cluster" % victim.name)

    def on_holder():
        """Restart B until a gateway is connected to the bucket's node: its
        connection then fails over when that node dies, the case where a
        reconnected gateway must not trust the bucket unlooked."""
        holder = state["holder"]
        for _ in range(24):
            on = [k for k, g in gws.items() if connected_node(g, nodes) is holder]
            if on:
                return on[0]
            gws["b"].stop()
            gateway("b")
        check(False, "no gateway connected to the bucket's node %s after 24 restarts"
              % holder.name)

    def t_kill_holder():
        holder = state["holder"]
        moved = gws[on_holder()]
        a, b = gws["a"], gws["b"]
        t0 = kill_serving_stateless(holder, (a, b), "the bucket's node")
        # the gateway that was on the holder reconnects to a live node; a KV op
        # there would wait op_timeout_ms for a stream leader that does not exist,
        # so the reconnect itself makes the bucket one to look at first
        node = wait_for(lambda: connected_node(moved, nodes), 30,
                        "%s reconnected to a live node" % moved.name, interval=0.05)
        t1 = time.monotonic()
        r = init_status(moved.port)
        first = time.monotonic() - t1
        print("%s reconnected to %s %.0f ms after the kill; its first initialize: %d in %.0f ms"
              % (moved.name, node.name, (t1 - t0) * 1000, r.status, first * 1000))
        check_eq(r.status, 503, "initialize on %s, reconnected, the bucket's node down"
                 % moved.name)
        check(first < AT_ONCE_S, "the first initialize on %s after its reconnect waited %.1f s "
              "(op_timeout_ms %d): a reconnect must not trust the bucket unlooked"
              % (moved.name, first, OP_TIMEOUT_MS))
        # what answers and how fast on each: a gateway that was not on the holder
        # learns the bucket is down from its first op, which may wait op_timeout_ms
        seen = {}

        def closed(gw):
            def ok():
                t1 = time.monotonic()
                r = init_status(gw.port)
                seen[gw.name] = (r, time.monotonic() - t1)
                return r.status == 503
            return ok
        for gw in (a, b):
            # the first may wait op_timeout_ms (a read waits for the stream's leader)
            wait_for(closed(gw), 3 * OP_TIMEOUT_MS / 1000.0, "initialize 503 on %s with the bucket's "
                     "node down" % gw.name, interval=0.1)
            r, first = seen[gw.name]
            check(r.header("retry-after"), "initialize's 503 has Retry-After on %s" % gw.name)
            # once the bucket is known down, nothing waits for op_timeout_ms
            t1 = time.monotonic()
            r = init_status(gw.port)
            again = time.monotonic() - t1
            check_eq(r.status, 503, "initialize again on %s" % gw.name)
            check(r.header("retry-after"), "the second 503 has Retry-After on %s" % gw.name)
            print("bucket down: initialize on %s refused 503 in %.0f ms (%.0f ms after the "
                  "kill), then in %.0f ms" % (gw.name, first * 1000,
                                               (time.monotonic() - t0) * 1000, again * 1000))
            check(again < AT_ONCE_S, "initialize on %s waited %.1f s with the bucket known down "
                  "(op_timeout_ms %d)" % (gw.name, again, OP_TIMEOUT_MS))
            t1 = time.monotonic()
            r, out = call_tool(gw.port, "rated", {"message": "x"})
            took = time.monotonic() - t1
            check_eq(r.status, 503, "a global limit with the bucket's node down fails closed "
                     "on %s (%r)" % (gw.name, out))
            print("bucket down: a limited call on %s refused 503 in %.0f ms" % (gw.name,
                                                                              took * 1000))
            check(took < AT_ONCE_S, "the limited call on %s waited %.1f s with the bucket known down "
                  "(op_timeout_ms %d)" % (gw.name, took, OP_TIMEOUT_MS))
            r, _ = call_tool(gw.port, "echo", {"message": "still"})
            check_eq(r.status, 200, "stateless calls still served on %s" % gw.name)
            check_eq(readyz_coordinator(gw.port), "unavailable",
                     "/readyz on %s with the bucket's node down" % gw.name)
            # a session from before: served by a loop that holds its row in its cache
            # (trusted for session_ttl_ms/8 after a read), else refused like a new one
            r = session_call(gw.port, state["sid"], "bucket down")
            print("bucket down: the session from before, on %s: %d" % (gw.name, r.status))
            check(r.status == 200 or (r.status == 503 and r.header("retry-after")),
                  "the session from before on %s: %d %r" % (gw.name, r.status, r.body[:200]))
        # a gateway started now: its bind waits op_timeout_ms once, then it serves
        t1 = time.monotonic()
        d = gateway("d")
        print("a gateway started with the bucket's node down: healthy in %.0f ms"
              % ((time.monotonic() - t1) * 1000))
        check_coordinator_down(d.port, "rated", "started with the bucket's node down")
        # a session D never saw: its store does not answer, which is not "gone"
        r = session_call(d.port, state["sid"], "unknown here")
        check_eq(r.status, 503, "the session from before on D, its row unreadable (%r)"
                 % r.body[:200])
        check(r.header("retry-after"), "that 503 has Retry-After")
        t1 = time.monotonic()
        holder.start()
        took = wait_each((a, b, d), lambda gw: init_status(gw.port).status == 200, 40,
                         "initialize 200 again", t1)
        for gw in (a, b, d):
            check_eq(readyz_coordinator(gw.port), "ok", "/readyz on %s once the node is back"
                     % gw.name)
        print("bucket's node back: sessions open again after %s" % took)
        # rows written before are there (file storage): a gateway that never saw
        # the session serves it, and the budget spent before stays spent
        c = gateway("c")
        check_eq(session_call(c.port, state["sid"], "after restart").status, 200,
                 "the session from before the kills, on a new gateway")
        for gw in (a, b):
            r, out = call_tool(gw.port, "rated", {"message": "x"})
            check(r.status in (200, 429), "rated judged again on %s (%r)" % (gw.name, out))
        r, out = call_tool(c.port, "mock_stats", {})
        check_eq(r.status, 200, "mock_stats on C")
        # the budget: 1000 in all; spend the rest through C and count it
        left = 0
        while True:
            r, out = call_tool(c.port, "budgeted", {"message": "x"})
            if r.status != 200:
                break
            left += 1
            check(left <= 1000, "the budget never ends")
        check_eq(r.status, 429, "budgeted past the budget (%r)" % out)
        print("budget: %d spent before and during the faults, %d left after" % (state["spent"],
                                                                               left))
        check_eq(left + state["spent"], 1000, "the budget spent before the bucket's restart")

    def t_stop():
        for gw in gws.values():
            gw.stop()
        for n in nodes:
            n.kill()

    tests = [
        ("a 3-node JetStream cluster starts with a meta leader", t_cluster),
        ("replicas 3 on nats-server 2.9.10: the gateway refuses to start, naming the version",
         t_replicas3_refused),
        ("two gateways on the cluster, the R1 bucket on one node", t_start),
        ("a session and budget spent before the faults", t_before),
        ("a node without the bucket killed: the gateways fail over", t_kill_non_holder),
        ("the bucket's node killed: stateless on, sessions 503, limits closed; back: all there",
         t_kill_holder),
        ("the gateways and the cluster stop", t_stop),
    ]
    try:
        return run_tests(tests, ctx)
    finally:
        for n in nodes:
            n.kill()


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
