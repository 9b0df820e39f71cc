#!/usr/bin/python3
"""Long-lived calls over a reload: gateway.reload_drain_ms after a publish, what still
runs on the replaced generation is ended the way the drain ends it, and the generation
retires by then. An events/stream gets its end (its result), a subscriptions/listen its
final result, a legacy session's GET stream its end; each client reconnects and is
served by the new generation. A reload while older generations still retire is answered
200 (several retire at once, each ending its streams at its own deadline). A tool call
whose backend would outlive the deadline is answered with an error then, the backend's
cancel op runs and its concurrency slot is given back."""
import json
import os
import re
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from gateway import (Conn, Context, Gateway, base_manifest, build_request, call_tool, check,  # noqa: E402
                     check_eq, parse_args, replace_file, rpc_body, run_tests, stateless_headers,
                     wait_for)
from eventslib import events_manifest, stream_raw  # noqa: E402
from test_legacy_wire import head_of, initialize, read_stream, request, request_bytes, rpc  # noqa: E402
from test_reload import TOKEN, post_reload  # noqa: E402

DRAIN_MS = 2000      # gateway.reload_drain_ms
MARGIN_S = 1.5       # how late after its deadline a stream may end on a busy machine
EARLY_S = 0.05       # clock skew between this process and the gateway's loops
SECRET_VAR = "MCPG_TEST_RETIRE_EVENTS"


def manifest(tools=("echo",)):
    m = base_manifest(tools=[{"name": t} for t in tools] + [{"name": "slow", "latency_ms": 60000}],
                      mock_config={"stats_tool": True},
                      server={"admin_token_env": "MCPG_TEST_ADMIN", "access_log": False},
                      gateway={"workers": 2, "reload_drain_ms": DRAIN_MS, "log_level": "info"})
    m["modules"][0]["inline_dispatch"] = True  # the latency waits on a timer its cancel op ends
    m["modules"].append({"name": "limits", "module": "limits", "config": {"limits": [
        {"name": "one-slow", "match": {"tools": "slow"}, "key": ["tool"], "scope": "local",
         "concurrency": 1}]}})
    m["pipeline"]["limits"] = ["limits"]
    m["events"] = events_manifest(SECRET_VAR)
    return m


def reload_now(port):
    """One POST /admin/reload, answered at once: (seconds before it was sent, after the
    answer, the answer's JSON). A 409 fails: no reload is being built meanwhile."""
    t0 = time.monotonic()
    r = post_reload(port)
    t1 = time.monotonic()
    check_eq(r.status, 200, "reload answered (%r)" % r.body[:300])
    return t0, t1, json.loads(r.body)


class Stream(threading.Thread):
    """One streamed answer read to its end: its text, whether it ended, and when."""

    def __init__(self, port, raw, label):
        super().__init__(daemon=True, name=label)
        self.label, self.raw = label, raw
        self.conn = Conn(port, timeout=DRAIN_MS / 1000.0 * 4 + 10)
        self.opened = threading.Event()
        self.text, self.ended, self.t_end, self.error = "", False, None, None

    def run(self):
        try:
            self.conn.send(self.raw)
            status, head = head_of(self.conn)
            if status != 200 or "text/event-stream" not in head:
                raise AssertionError("%s: not a stream: %r" % (self.label, head[:200]))
            self.opened.set()
            self.text, self.ended = read_stream(self.conn, timeout=DRAIN_MS / 1000.0 * 4 + 10)
            self.t_end = time.monotonic()
        except Exception as e:  # reported through .error
            self.error = e
        self.opened.set()

    def open(self):
        self.start()
        check(self.opened.wait(10) and self.error is None, "%s opened: %r" % (self.label, self.error))
        return self

    def done(self, timeout):
        self.join(timeout)
        check(not self.is_alive(), "%s: still open %.1f s later" % (self.label, timeout))
        check(self.error is None, "%s: %r" % (self.label, self.error))
        check(self.ended, "%s: ended with its last chunk" % self.label)
        return self

    def close(self):
        self.conn.close()


def listen_raw(port, lid):
    body = rpc_body("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=lid)
    return build_request(port, headers=stateless_headers("subscriptions/listen"), body=body)


def legacy_get(port):
    _, sid = initialize(port)
    request(port, body={"jsonrpc": "2.0", "method": "notifications/initialized"}, session=sid)
    return request_bytes(port, "GET", session=sid, accept="text/event-stream")


def ended_within(s, t_before, t_after, what):
    """s ended at its generation's deadline: not before the reload was asked plus
    reload_drain_ms, not later than its answer plus the drain and a margin."""
    lo, hi = t_before + DRAIN_MS / 1000.0 - EARLY_S, t_after + DRAIN_MS / 1000.0 + MARGIN_S
    check(lo <= s.t_end <= hi, "%s ended %.2f s after its reload was asked (want %.2f .. %.2f)"
          % (what, s.t_end - t_before, lo - t_before, hi - t_before))


def main():
    args = parse_args()
    ctx = Context(args)
    env = {"MCPG_TEST_ADMIN": TOKEN, SECRET_VAR: "whsec_" + "A" * 32}
    gw = Gateway(ctx, manifest=manifest(), env=env, name="retire").start()
    p = gw.port
    # the slow call's own gateway: no generation of the other test retires there
    sgw = Gateway(ctx, manifest=manifest(), env=env, name="retire-slow").start()
    sp = sgw.port

    def t_streams_end_at_each_deadline():
        get = Stream(p, legacy_get(p), "legacy GET").open()
        listen = Stream(p, listen_raw(p, "listen-1"), "listen").open()
        ev1 = Stream(p, stream_raw(p, "order.created", id="ev-1"), "events/stream 1").open()
        # three reloads in a row, each while the ones before still retire; a stream
        # opened on each generation in between
        replace_file(gw.config, manifest(tools=("echo", "echo2")))
        a0, a1, ans_a = reload_now(p)
        ev2 = Stream(p, stream_raw(p, "order.created", id="ev-2"), "events/stream 2").open()
        time.sleep(0.3)  # the three deadlines apart: each stream is judged by its own
        b0, b1, ans_b = reload_now(p)
        ev3 = Stream(p, stream_raw(p, "order.created", id="ev-3"), "events/stream 3").open()
        time.sleep(0.3)
        c0, c1, ans_c = reload_now(p)
        check_eq([ans_a["retiring"], ans_b["retiring"], ans_c["retiring"]], [1, 2, 3],
                 "generations retiring, as each reload answered")
        check(a1 - a0 < DRAIN_MS / 1000.0 and c1 - a0 < DRAIN_MS / 1000.0,
              "the three reloads answered before the first deadline (%.2f s)" % (c1 - a0))
        for s in (get, listen, ev1):
            s.done(DRAIN_MS / 1000.0 + MARGIN_S + 10)
            ended_within(s, a0, a1, s.label)
        ev2.done(DRAIN_MS / 1000.0 + MARGIN_S + 10)
        ended_within(ev2, b0, b1, ev2.label)
        ev3.done(DRAIN_MS / 1000.0 + MARGIN_S + 10)
        ended_within(ev3, c0, c1, ev3.label)
        check('"id":"listen-1","result"' in listen.text,
              "the listen got its final result: %r" % listen.text[-300:])
        for s, sid in ((ev1, "ev-1"), (ev2, "ev-2"), (ev3, "ev-3")):
            check('"id":"%s","result"' % sid in s.text, "%s got its result: %r" % (s.label, s.text[-300:]))
        # every generation replaced retired, each by its own deadline
        for ans, t_after in ((ans_a, a1), (ans_b, b1), (ans_c, c1)):
            gen = ans["previous"]
            line = "generation %d retired" % gen
            wait_for(lambda: line in gw.stderr(), max(0.5, t_after + DRAIN_MS / 1000.0 + MARGIN_S
                                                          - time.monotonic()), line)
        log = gw.stderr()
        check(re.search(r"generation %d, gateway.reload_drain_ms \(%d ms\) after its publish: 1 "
                        r"call\(s\) still on it ended, 2 stream\(s\)" % (ans_a["previous"], DRAIN_MS),
                        log), "the first deadline's line counts the events stream and two "
              "streams: %r" % [ln for ln in log.splitlines() if "reload_drain_ms" in ln])
        check("generations retiring: 3" in log, "the publish line counts three retiring")
        # the clients come back, to the generation serving now
        again = Stream(p, listen_raw(p, "listen-2"), "listen again").open()
        ev = Stream(p, stream_raw(p, "order.created", id="ev-4"), "events/stream again").open()
        r, rpc_ = call_tool(p, "echo2", {"message": "x"}, id=3)
        check("result" in rpc_, "the new generation's tool answers: %r" % rpc_)
        again.close()
        ev.close()

    def stats():
        _, rpc_ = call_tool(sp, "mock_stats", {}, id=90)
        return json.loads(rpc_["result"]["content"][0]["text"])

    def t_slow_call_ended_at_deadline():
        box = {}

        def slow(key, rid):
            r, rpc_ = call_tool(sp, "slow", {"message": "m"}, id=rid)
            box[key] = (time.monotonic(), r.status, rpc_)

        t = threading.Thread(target=slow, args=("first", 11), daemon=True)
        t.start()
        wait_for(lambda: stats()["tools"]["slow"]["in_flight"] == 1, 10, "the slow call at the mock")
        r, rpc_ = call_tool(sp, "slow", {"message": "m"}, id=12)
        check_eq(r.status, 429, "a second slow call is over the concurrency of 1 (%r)" % rpc_)
        t0, t1, ans = reload_now(sp)
        check_eq(ans["started"], [], "nothing started: the mock serves on, carried")
        t.join(DRAIN_MS / 1000.0 + MARGIN_S + 10)
        check("first" in box, "the slow call answered by its generation's deadline")
        t_end, status, rpc_ = box["first"]
        check("error" in rpc_ and "reload_drain_ms" in rpc_["error"]["message"],
              "answered with an error naming the drain: %r" % rpc_)
        lo, hi = t0 + DRAIN_MS / 1000.0 - EARLY_S, t1 + DRAIN_MS / 1000.0 + MARGIN_S
        check(lo <= t_end <= hi, "answered %.2f s after the reload was asked" % (t_end - t0))
        wait_for(lambda: stats()["tools"]["slow"]["in_flight"] == 0, 5,
                 "the mock's cancel op to end its wait (60 s otherwise)")
        line = "generation %d retired" % ans["previous"]
        wait_for(lambda: line in sgw.stderr(), 5, line)
        # its concurrency slot was given back: the next slow call reaches the mock
        t2 = threading.Thread(target=slow, args=("second", 13), daemon=True)
        t2.start()
        wait_for(lambda: stats()["tools"]["slow"]["in_flight"] == 1 or "second" in box, 10,
                 "the next slow call admitted")
        check("second" not in box, "the next slow call was admitted: %r" % (box.get("second"),))
        reload_now(sp)  # ends that one too, at its deadline
        t2.join(DRAIN_MS / 1000.0 + MARGIN_S + 10)
        check("second" in box, "the next slow call answered by its deadline")

    def t_stop():
        gw.stop()
        sgw.stop()

    return run_tests([
        ("streams of three generations end, each at its generation's deadline; 200 to each "
         "reload", t_streams_end_at_each_deadline),
        ("a slow tool call answered at the deadline, its backend cancelled, its slot given back",
         t_slow_call_ended_at_deadline),
        ("the gateway stops cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
