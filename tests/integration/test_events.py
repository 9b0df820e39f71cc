#!/usr/bin/python3
"""The MCP Events pipeline on one node (docs/events.md): every answer of
POST /webhooks/events/{source} (202, 400 naming the field, 401 naming the header, 403,
404, 405, 413); events/list; events/poll from null, from a cursor, in pages (hasMore),
and past what the replica keeps (truncated); events/stream: each stream hears the events
of its type once, in the order they were accepted, a copy of an id is dropped, a quiet
stream gets heartbeats whose cursor moves, a stream opened with a cursor gets what it
missed first; the same over a legacy session; policy_rules' "events" globs; a gateway
without an events section; the manifest's errors; SIGTERM ends open streams at once."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (REFUSED_2026, Context, Gateway, base_manifest, check, check_eq, expect_error,  # noqa: E402
                     parse_args, run_cli, run_tests, send_one, stateless_request, wait_for)
from eventslib import (ACTIVE, HEARTBEAT, SUB_ID, EventStream, events_manifest,  # noqa: E402
                       judge_once_in_order, open_stream, poll, post_event, post_ok, wait_events)
from test_legacy_wire import initialize, request_bytes  # noqa: E402
from test_metrics import scrape, value  # noqa: E402
from webhooklib import new_secret, webhook_raw  # noqa: E402

VAR = "MCPG_TEST_EVENTS_SECRET"
OFF_VAR = "MCPG_TEST_EVENTS_UNSET"
DRAIN_S = 20  # t_sigterm's gateway.drain_timeout_ms, in seconds


def heartbeat_past(stream, cursor):
    """The stream heard a heartbeat whose cursor is at or past cursor."""
    return any(int(h["cursor"]) >= cursor for h in stream.of(HEARTBEAT))


def manifest(metrics=False, **settings):
    m = base_manifest()
    if metrics:
        m["modules"].append({"name": "prom", "module": "metrics_prometheus"})
    m["events"] = events_manifest(VAR, sources={
        "shop": {"secret_env": VAR, "types": ["order.created", "order.paid"]},
        "off": {"secret_env": OFF_VAR, "types": ["order.created"]}}, **settings)
    return m


def main():
    args = parse_args()
    ctx = Context(args)
    secret = new_secret()
    env = {VAR: secret}
    os.environ.pop(OFF_VAR, None)
    gw = Gateway(ctx, manifest=manifest(metrics=True, heartbeat_ms=400, cache_rows=64), env=env,
                 name="events").start()
    p = gw.port
    seq = [0]

    def event(name="order.created", **data):
        seq[0] += 1
        return {"name": name, "id": "evt-%d" % seq[0], "data": dict(data, n=seq[0])}

    def expect(body, status, needle, what, **kw):
        r, b = post_event(p, "shop", body, secret, **kw)
        check_eq(r.status, status, "%s: status (%r)" % (what, r.body[:200]))
        if needle:
            check(b and needle in b.get("error", ""), "%s: says %r: %r" % (what, needle, b))
        return r

    def t_post_answers():
        b = post_ok(p, "shop", event(), secret, "a signed post")
        check(b["eventId"].startswith("evt-"), "the 202 names the event id: %r" % b)
        r, b = post_event(p, "shop", {"name": "order.created", "data": {}}, secret, wid="wh-1")
        check_eq((r.status, b.get("eventId")), (202, "wh-1"), "no id: the webhook-id is the event's")
        expect(event(), 401, "webhook-signature", "a wrong signature", sig="v1,AAAA")
        expect(event(), 401, "webhook-timestamp", "a stale timestamp", ts=int(time.time()) - 900)
        expect(event(), 401, "webhook-id", "no webhook-id", drop=("webhook-id",))
        expect(event(), 401, "webhook-signature", "no signature", drop=("webhook-signature",))
        expect(b"{not json", 400, "JSON object", "a body that is not JSON")
        # one reading: a member named twice would be judged one way and stored another
        expect(b'{"name":"order.created","name":"order.paid","data":{}}', 400, "named twice",
               "a duplicate name")
        expect(b'{"name":"order.created","data":{"a":1,"a":2}}', 400, "named twice",
               "a duplicate inside data")
        expect({"data": {}}, 400, "name", "no name")
        expect({"name": "nope", "data": {}}, 400, "name", "an unknown type")
        expect({"name": "order.created"}, 400, "data", "no data")
        expect({"name": "order.created", "data": [1]}, 400, "data", "data not an object")
        expect({"name": "order.created", "data": {}, "id": 7}, 400, "id", "an id not a string")
        expect({"name": "audit.note", "data": {}}, 403, "may not post", "a type the source may not post")
        big = {"name": "order.created", "data": {"x": "y" * 70000}}
        expect(big, 413, "65536", "a body over 64 KiB")
        r, _ = post_event(p, "nobody", event(), secret)
        check_eq(r.status, 404, "an unknown source")
        r, _ = post_event(p, "off", event(), secret)
        check_eq(r.status, 404, "a source whose secret is unset is off")
        r = send_one(p, webhook_raw(p, "shop", event(), secret, route="events", method="GET"))
        check_eq(r.status, 405, "GET")
        check_eq(r.header("allow"), "POST", "405 says Allow: POST")

    def t_list():
        r = send_one(p, stateless_request(p, "events/list", {}))
        res = r.rpc()["result"]
        names = [e["name"] for e in res["events"]]
        check_eq(names, ["order.created", "order.paid", "audit.note"], "events/list names every type")
        check("poll" in res["events"][0]["delivery"] and "push" in res["events"][0]["delivery"],
              "each type offers poll and push: %r" % res["events"][0])
        d = send_one(p, stateless_request(p, "server/discover", {})).rpc()["result"]
        check("io.modelcontextprotocol/events" in d["capabilities"].get("extensions", {}),
              "server/discover advertises the extension: %r" % d["capabilities"])

    def t_poll():
        _, rpc = poll(p, "order.paid")
        start = rpc["result"]["cursor"]
        check_eq(rpc["result"]["events"], [], "a poll from null: no events")
        check_eq(rpc["result"]["nextPollMs"], 1000, "nextPollMs is poll_interval_ms")
        ids = [post_ok(p, "shop", event("order.paid"), secret, "poll")["eventId"] for _ in range(5)]
        post_ok(p, "shop", event("order.created"), secret, "another type between")
        # a 202 is an inbox row: the owner moves it into the log in a batch (100 ms tick)
        wait_for(lambda: len(poll(p, "order.paid", start)[1]["result"]["events"]) >= 5, 10,
                 "the 5 order.paid events in the log")
        _, rpc = poll(p, "order.paid", start, max_events=3)
        res = rpc["result"]
        check_eq([e["eventId"] for e in res["events"]], ids[:3], "a page of 3, in order")
        check(res["hasMore"], "hasMore after a full page")
        _, rpc = poll(p, "order.paid", res["cursor"])
        res = rpc["result"]
        check_eq([e["eventId"] for e in res["events"]], ids[3:], "the rest from its cursor")
        check(not res["hasMore"] and not res["truncated"], "then nothing more: %r" % res)
        _, rpc = poll(p, "order.paid", res["cursor"])
        check_eq(rpc["result"]["events"], [], "polled again: nothing new")
        _, rpc = poll(p, "nope")
        check_eq(rpc["error"]["code"], -32011, "an unknown type is -32011")
        check_eq(rpc["error"]["data"], {"kind": "event"}, "... data.kind event")
        _, rpc = poll(p, "order.paid", "not-a-cursor")
        check_eq(rpc["error"]["code"], -32602, "a cursor not given by the gateway")

    def t_stream():
        a = open_stream(p, "order.created", id="a")
        b = open_stream(p, "order.paid", id=7)
        act = a.of(ACTIVE)[0]
        check_eq(act["_meta"][SUB_ID], "a", "active carries the request id as subscriptionId")
        check(act["truncated"] is False, "from now: not truncated")
        want_a, want_b = [], []
        for i in range(30):
            e = event("order.paid" if i % 3 == 0 else "order.created")
            (want_b if i % 3 == 0 else want_a).append(post_ok(p, "shop", e, secret, "stream")["eventId"])
            if i == 10:  # a copy of the last one: taken, then dropped
                post_ok(p, "shop", e, secret, "a copy")
        wait_events([a], len(want_a))
        wait_events([b], len(want_b))
        last = max([int(e["cursor"]) for e in a.events() + b.events()] or [0])
        # heartbeats: quiet now; b's cursor moves past a's events too. A heartbeat comes
        # after every event the stream was owed up to its cursor, so once each stream has
        # one at or past the last event heard, anything extra (a copy) would be in already.
        for s in (a, b):
            wait_for(lambda s=s: heartbeat_past(s, last), 10,
                     "%s: a heartbeat (a quiet stream gets them) whose cursor is where it has "
                     "looked, at or past the last event's %d" % (s.label, last))
        judge_once_in_order(a, want_a, "stream a")
        judge_once_in_order(b, want_b, "stream b")
        check_eq(b.events()[0]["_meta"][SUB_ID], 7, "an event carries its stream's id")
        check(all(set(e) >= {"eventId", "name", "timestamp", "data", "cursor"} for e in a.events()),
              "each event is a whole occurrence: %r" % a.events()[:1])
        check_eq(int(a.events()[-1]["cursor"]), last, "the last event is a's (order.created)")
        # resumed from a cursor: what it missed, from the cache
        c = open_stream(p, "order.created", cursor=a.events()[4]["cursor"], id="c")
        wait_events([c], len(want_a) - 5)
        wait_for(lambda: heartbeat_past(c, last), 10, "stream c: a heartbeat past %d" % last)
        judge_once_in_order(c, want_a[5:], "a stream resumed from a cursor")
        for s in (a, b, c):
            s.close()
        samples, _, _ = scrape(p)
        heard = len(a.events()) + len(b.events()) + len(c.events())
        check(value(samples, "mcpg_events_delivered_total") >= heard,
              "/metrics counts the deliveries (%d heard)" % heard)
        check(value(samples, "mcpg_events_accepted_total") >= seq[0] - 20,
              "/metrics counts the accepted posts")
        check(value(samples, "mcpg_events_refused_total") >= 10, "... and the refused ones")
        # the gateway hears of each client's close on its own loop
        wait_for(lambda: value(scrape(p)[0], "mcpg_events_streams") == 0, 10,
                 "mcpg_events_streams 0: no stream open once they closed")
        r = send_one(p, stateless_request(p, "events/stream", {"name": "nope"}, id=9))
        check_eq(r.rpc()["error"]["code"], -32011, "a stream of an unknown type: -32011 at once")

    def t_truncated():
        for _ in range(80):  # more than cache_rows (64)
            newest = post_ok(p, "shop", event(), secret, "fill")["eventId"]
        # until the last of them is in the log (the owner moves rows in batches): then the
        # cache has moved 80 rows on, past row 1
        wait_for(lambda: newest in [e["eventId"] for e in
                                    poll(p, "order.created", "1", max_events=1000)[1]["result"]["events"]],
                 10, "the last posted event in the log")
        _, rpc = poll(p, "order.created", "1")
        check(rpc["result"]["truncated"], "a cursor older than the cache: truncated: %r"
              % {k: v for k, v in rpc["result"].items() if k != "events"})
        check(rpc["result"]["events"], "... and what it keeps follows")

    def t_legacy():
        _, sid = initialize(p)
        body = {"jsonrpc": "2.0", "id": 5, "method": "events/stream",
                "params": {"name": "order.created", "cursor": None}}
        raw = request_bytes(p, "POST", session=sid, body=body)
        s = EventStream(p, raw, "legacy").wait_open()
        wait_for(lambda: s.of(ACTIVE) or s.error, 10, "notifications/events/active on a legacy session")
        check(s.error is None and s.of(ACTIVE), "a legacy session's stream is active: %r" % s.error)
        ids = [post_ok(p, "shop", event(), secret, "legacy")["eventId"] for _ in range(5)]
        wait_events([s], 5)
        judge_once_in_order(s, ids, "a legacy session's stream")
        s.close()

    def t_policy():
        m = manifest()
        m["modules"].append({"name": "rules", "module": "policy_rules", "config": {"rules": [
            {"id": "orders", "anonymous": True, "tools": "echo", "events": ["order.*"]}]}})
        m["pipeline"]["policy"] = ["rules"]
        with Gateway(ctx, manifest=m, env=env, name="events-policy").start() as g:
            s = open_stream(g.port, "order.paid", id="ok")
            s.close()
            r = send_one(g.port, stateless_request(g.port, "events/stream", {"name": "audit.note"}, id=2))
            expect_error(r, 403, REFUSED_2026, "a type no rule allows", id=2)
            _, rpc = poll(g.port, "audit.note")
            check_eq(rpc["error"]["code"], REFUSED_2026, "events/poll is judged the same")
            r = send_one(g.port, stateless_request(g.port, "events/list", {}, id=3))
            check_eq([e["name"] for e in r.rpc()["result"]["events"]], ["order.created", "order.paid"],
                     "events/list shows the caller the types its rules allow")

    def t_no_events():
        with Gateway(ctx, manifest=base_manifest(), name="events-none").start() as g:
            _, rpc = poll(g.port, "order.created")
            check_eq(rpc["error"]["code"], -32601, "no events section: events/poll not found")
            check("no events pipeline" in rpc["error"]["message"], "... saying why: %r" % rpc["error"])
            r, b = post_event(g.port, "shop", event(), secret)
            check_eq(r.status, 404, "no events section: the webhook route is 404")

    def t_manifest_errors():
        cases = [
            ({"types": [{"name": "a"}], "sources": {"s": {"secret_env": VAR, "types": ["b"]}}},
             "events.sources.s.types[0]"),
            ({"sources": {}}, "events.types"),
            ({"types": [{"name": "a"}, {"name": "a"}], "sources": {}}, "events.types[1].name"),
            ({"types": [{"name": "a"}], "sources": {}, "inbox_max_rows": 0}, "events.inbox_max_rows"),
            ({"types": [{"name": "a"}], "sources": {}, "colour": 1}, "events.colour"),
        ]
        for sec, key in cases:
            m = base_manifest()
            m["events"] = sec
            path = ctx.write_manifest(m)
            rc, out, err = run_cli(ctx, ["--check", "--config", path], env=env)
            check_eq(rc, 2, "--check refuses %r" % sec)
            check(key in err, "the error names %s: %r" % (key, err))
        m = base_manifest()
        m["modules"].append({"name": "ev", "module": "events", "config": {}})
        rc, out, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(m)], env=env)
        check(rc == 2 and "top-level" in err, "events in modules[] points to the section: %r" % err)
        m = base_manifest()
        m["events"] = events_manifest("MCPG_TEST_EVENTS_BAD")
        rc, out, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(m)],
                               env={"MCPG_TEST_EVENTS_BAD": "not-a-secret"})
        check(rc == 2 and "events.sources.shop.secret_env" in err and "whsec_" in err,
              "a secret of the wrong form names the key: %r" % err)

    def t_sigterm():
        m = manifest()
        m["gateway"]["drain_timeout_ms"] = int(DRAIN_S * 1000)
        with Gateway(ctx, manifest=m, env=env, name="events-term").start() as g:
            s = open_stream(g.port, "order.created", id="t")
            t0 = time.monotonic()
            g.signal(signal.SIGTERM)
            s.join(DRAIN_S + 5)  # the stream's reader ends when the gateway ends the stream
            took = time.monotonic() - t0
            check(not s.is_alive(), "SIGTERM ends an open events/stream")
            # a stream left to the drain would end at DRAIN_S; half of it is "at once"
            # with room for a loaded machine
            check(took < DRAIN_S / 2, "at once, not at the drain deadline of %d s (%.1f s)"
                  % (DRAIN_S, took))
            s.close()  # as a client does: the gateway waits a moment for it
            rc = g.wait_exit(DRAIN_S / 2)
            check_eq(rc, 0, "SIGTERM with a stream open: exit 0")

    def t_stop():
        gw.stop()
        gw.check_sanitizers()

    tests = [t_post_answers, t_list, t_poll, t_stream, t_truncated, t_legacy, t_policy,
             t_no_events, t_manifest_errors, t_sigterm, t_stop]
    return run_tests([(t.__name__[2:], t) for t in tests], ctx)


if __name__ == "__main__":
    sys.exit(main())
