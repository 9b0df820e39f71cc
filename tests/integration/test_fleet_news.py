#!/usr/bin/env python3
"""Resource news across a fleet, on both stores: for Redis (redis-server) and for NATS
(nats-server with JetStream), each started here on free ports and stopped by pid, two
gateways A and B on the shipped manifest (conf/fleet-redis.json, conf/fleet-nats.json)
with the webhook source "notes" on (MCPG_WEBHOOK_SECRET set):

  * on each of A and B: a legacy session subscribed to mock://fleet/notes, another to
    mock://fleet/todo (resources/subscribe, GET stream open), and a stateless
    subscriptions/listen for each uri: eight subscribers;
  * N webhooks posted alternately to A and B, two in three for notes, one in three
    for todo: every subscriber hears every change of its uri exactly once (counted)
    and nothing of the other uri, wherever the webhook was posted;
  * a webhook posted to A and its copy (the same webhook-id) to B: B answers 202
    "duplicate", and every subscriber is told once;
  * a list change posted to B reaches every stream on A and on B once (the listens
    asked for list changes; a legacy GET stream hears every one);
  * the store down: a webhook is answered 503 with Retry-After, and nobody is told;
    the store back (same port), webhooks reach the listen streams on A and B again, and
    the refused webhook's retry is taken (no claim was left behind).

The time from a webhook's POST to each notification is printed (p50/p99 over every
subscriber), not asserted. Skipped for a store this machine or build lacks."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import Context, Gateway, check, check_eq, parse_args, run_tests, wait_for  # noqa: E402
from test_fleet_nats import NATS, NatsServer  # noqa: E402
from test_fleet_redis import REDIS_SERVER, Redis  # noqa: E402
from webhooklib import (LIST_CHANGED, UPDATED, legacy_listener, new_secret,  # noqa: E402
                        percentile, post_webhook, stateless_listener, wait_counts)

NOTES = "mock://fleet/notes"
TODO = "mock://fleet/todo"
N = int(os.environ.get("MCPG_FLEET_NEWS_N", "60"))


def have(path_or_name):
    if os.path.isabs(path_or_name):
        return os.access(path_or_name, os.X_OK)
    return any(os.access(os.path.join(d, path_or_name), os.X_OK)
               for d in os.environ.get("PATH", "/usr/bin").split(":") + ["/usr/sbin", "/usr/bin"])


def fleet_manifest(ctx, conf, name):
    """The shipped manifest as is, but quieter and its audit in the test's folder."""
    with open(conf) as f:
        m = json.load(f)
    m["gateway"]["server"]["access_log"] = False
    for mod in m["modules"]:
        if mod["module"] == "audit_file":
            mod["config"]["path"] = ctx.path("audit-%s.jsonl" % name)
    return m


class Fleet:
    """A store and gateways A and B on it."""

    def __init__(self, ctx, kind, secret):
        self.ctx, self.kind, self.secret = ctx, kind, secret
        self.store = Redis(ctx) if kind == "redis" else NatsServer(ctx)
        self.conf = os.path.join(ctx.source, "conf", "fleet-%s.json" % kind)
        self.gws = []

    def env(self):
        e = {"MCPG_WEBHOOK_SECRET": self.secret}
        if self.kind == "redis":
            e.update(MCPG_REDIS_URL="redis://127.0.0.1:%d" % self.store.port,
                     MCPG_REDIS_PREFIX="news:")
        else:
            e.update(MCPG_NATS_URL=self.store.url, MCPG_NATS_BUCKET="news")
        return e

    def start(self):
        self.store.start()
        for name in ("A", "B"):
            m = fleet_manifest(self.ctx, self.conf, self.kind + name)
            self.gws.append(Gateway(self.ctx, manifest=m, env=self.env(),
                                    name="%s-%s" % (self.kind, name)).start())
        return self

    def stop(self):
        for gw in self.gws:
            gw.stop()
        self.store.stop()


def run_fleet(fleet, figures):
    a, b = (gw.port for gw in fleet.gws)
    secret = fleet.secret
    subs = {}
    for gname, port in (("A", a), ("B", b)):
        for uri, short in ((NOTES, "notes"), (TODO, "todo")):
            subs["%s-legacy-%s" % (gname, short)] = (legacy_listener(port, [uri], "%s legacy %s"
                                                                     % (gname, short)), uri)
            subs["%s-listen-%s" % (gname, short)] = (stateless_listener(
                port, [uri], list_changed=True, name="%s-listen-%s" % (gname, short)), uri)
    try:
        # each loop subscribes as it starts, and the store confirms later: list changes
        # (every stream here hears them) are posted to both until every stream has heard
        # one, so nothing counted below is published before a subscription is in place
        warm_up((a, b), [lst for lst, _ in subs.values()], secret)
        base = {k: len(lst.notes(UPDATED, uri)) for k, (lst, uri) in subs.items()}
        posted = {NOTES: [], TODO: []}
        for i in range(N):
            port = a if i % 2 == 0 else b
            uri = TODO if i % 3 == 2 else NOTES
            t0 = time.monotonic()
            r, body = post_webhook(port, "notes", {"uri": uri}, secret)
            check_eq(r.status, 202, "webhook %d to %s (%r)" % (i, "AB"[i % 2], body))
            posted[uri].append(t0)
        want = {(lst, uri): base[k] + len(posted[uri]) for k, (lst, uri) in subs.items()}
        wait_counts(want, 20)
        time.sleep(0.5)  # a duplicate would have arrived by now
        lat = []
        for k, (lst, uri) in subs.items():
            other = TODO if uri == NOTES else NOTES
            got = lst.notes(UPDATED, uri)
            check_eq(len(got) - base[k], len(posted[uri]),
                     "%s %s: every change of %s exactly once" % (fleet.kind, k, uri))
            check_eq(len(lst.notes(UPDATED, other)), 0, "%s %s: nothing of %s" % (fleet.kind, k, other))
            check(lst.error is None, "%s: %r" % (k, lst.error))
            lat += [(t - t0) * 1000 for t, t0 in zip(got[base[k]:], posted[uri])]
        figures[fleet.kind] = (percentile(lat, 50), percentile(lat, 99), len(lat))
        print("%s: %d webhooks alternately to A and B, %d subscribers, %d notifications: "
              "webhook -> notification p50 %.2f ms, p99 %.2f ms"
              % (fleet.kind, N, len(subs), len(lat), percentile(lat, 50), percentile(lat, 99)))
        # one webhook delivered to A, then its copy (same webhook-id) to B: told once
        dup = "dup-%s" % fleet.kind
        r, body = post_webhook(a, "notes", {"uri": NOTES}, secret, wid=dup)
        check_eq((r.status, body), (202, {"status": "accepted"}), "the first copy, to A")
        r, body = post_webhook(b, "notes", {"uri": NOTES}, secret, wid=dup)
        check_eq((r.status, body), (202, {"status": "duplicate"}), "the second copy, to B")
        notes = {k: (lst, len(posted[NOTES]) + base[k] + 1) for k, (lst, uri) in subs.items()
                 if uri == NOTES}
        wait_counts({(lst, NOTES): n for lst, n in notes.values()}, 10)
        time.sleep(0.3)
        for k, (lst, n) in notes.items():
            check_eq(len(lst.notes(UPDATED, NOTES)), n, "%s: a webhook posted to A and B, once" % k)
        # a list change, posted to B: every stream on both, once (a listen asked for
        # them, a legacy GET stream hears every list change)
        lists = {k: len(lst.notes(LIST_CHANGED)) for k, (lst, _) in subs.items()}
        r, body = post_webhook(b, "notes", {"list_changed": True}, secret)
        check_eq(r.status, 202, "list change (%r)" % body)
        wait_for(lambda: all(len(lst.notes(LIST_CHANGED)) > lists[k]
                             for k, (lst, _) in subs.items()), 10, "the list change on every stream")
        time.sleep(0.3)
        for k, (lst, _) in subs.items():
            check_eq(len(lst.notes(LIST_CHANGED)), lists[k] + 1, "%s: the list change once" % k)
        store_down(fleet, subs)
    finally:
        for lst, _ in subs.values():
            lst.close()


def warm_up(ports, listeners, secret, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for port in ports:
            r, body = post_webhook(port, "notes", {"list_changed": True}, secret)
            check_eq(r.status, 202, "a warm-up list change (%r)" % body)
        time.sleep(0.2)
        if all(lst.notes(LIST_CHANGED) for lst in listeners):
            time.sleep(0.3)  # the last ones posted arrive before anything is counted
            return
    check(False, "the warm-up list changes never reached %r"
          % [lst.label for lst in listeners if not lst.notes(LIST_CHANGED)])


def store_down(fleet, subs):
    """The store gone: the webhook is refused 503 + Retry-After and nobody hears of it;
    the store back: webhooks reach the listen streams on A and B again."""
    a, b = (gw.port for gw in fleet.gws)
    before = {k: len(lst.notes(UPDATED)) for k, (lst, _) in subs.items()}
    fleet.store.stop()
    r, body = post_webhook(a, "notes", {"uri": NOTES}, fleet.secret, wid="while-down")
    check_eq(r.status, 503, "a webhook with %s down (%r)" % (fleet.kind, body))
    check_eq(r.header("retry-after"), "1", "Retry-After")
    check("coordinator" in body["error"], "says why: %r" % body)
    time.sleep(0.3)
    check_eq({k: len(lst.notes(UPDATED)) for k, (lst, _) in subs.items()}, before,
             "nobody told of a refused webhook")
    fleet.store.start()  # the same port: the gateways reconnect and subscribe again
    listens = [lst for k, (lst, uri) in subs.items() if "listen" in k and uri == NOTES]
    seen = {id(lst): len(lst.notes(UPDATED, NOTES)) for lst in listens}

    def delivered_again():
        post_webhook(a, "notes", {"uri": NOTES}, fleet.secret)
        time.sleep(0.2)
        return all(len(lst.notes(UPDATED, NOTES)) > seen[id(lst)] for lst in listens)
    wait_for(delivered_again, 30, "webhooks delivered on A and B again once %s is back" % fleet.kind)
    # the webhook refused while the store was down left no claim: its retry is taken
    # (retried while B's own link to the store may still be coming back: 503 claims nothing)
    got = []

    def retried():
        r, body = post_webhook(b, "notes", {"uri": NOTES}, fleet.secret, wid="while-down")
        got[:] = [r.status, body]
        return r.status != 503
    wait_for(retried, 15, "the retry of the refused webhook taken on B")
    check_eq(got, [202, {"status": "accepted"}], "the retry of the refused webhook")


def main():
    args = parse_args()
    ctx = Context(args)
    secret = new_secret()
    figures = {}
    kinds = []
    if have(REDIS_SERVER) and os.path.exists(os.path.join(ctx.modules, "coordinator_redis.so")):
        kinds.append("redis")
    if have(NATS) and os.path.exists(os.path.join(ctx.modules, "coordinator_nats.so")):
        kinds.append("nats")
    if not kinds:
        print("SKIP: neither redis-server nor nats-server (or their coordinators)\n"
              "0 passed, 0 failed")
        return 0
    fleets = {k: Fleet(ctx, k, secret) for k in kinds}

    def case(kind):
        def run():
            fleet = fleets[kind].start()
            try:
                run_fleet(fleet, figures)
            finally:
                fleet.stop()
        return run

    tests = [("%s: every subscriber on A and B hears every webhook once" % k, case(k))
             for k in kinds]
    rc = run_tests(tests, ctx)
    for k, (p50, p99, n) in figures.items():
        print("figure: %s webhook->notification p50 %.2f ms p99 %.2f ms (%d notifications)"
              % (k, p50, p99, n))
    return rc


if __name__ == "__main__":
    sys.exit(main())
