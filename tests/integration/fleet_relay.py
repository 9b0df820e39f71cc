"""Checks shared by the fleet tests: a legacy POST stream that runs on one
replica, dropped, and resumed (GET with Last-Event-ID) on another, which
relays it over the coordinator's pub/sub (modules/transport_http/relay.h).

The gateways must serve backend_mock's `echo` and a tool `slow` that answers
after SLOW_MS (the fleet tests add it to the shipped manifests)."""

import json
import time

from gateway import check, check_eq, expect_error  # noqa: E402
from test_legacy_wire import (drop_after_priming, events, head_of,  # noqa: E402
                              initialize, read_stream, request, resume)

SLOW_MS = 1500
SLOW_TOOL = {"name": "slow", "latency_ms": SLOW_MS}


def add_slow_tool(manifest):
    """The manifest with the mock's `slow` tool added (returned for chaining)."""
    mock = next(m for m in manifest["modules"] if m["module"] == "backend_mock")
    mock["config"]["tools"].append(dict(SLOW_TOOL))
    return manifest


def result_text(stream_text):
    """The tool result's text in a stream's events, or None."""
    for _, data in events(stream_text):
        msg = json.loads(data) if data.strip() else {}
        if "result" in msg:
            return msg["result"]["content"][0]["text"]
    return None


def relay_checks(port_of):
    """[(name, fn)]; port_of("A") / port_of("B") give the replicas' ports now
    (a test may restart one)."""

    def t_after_the_end():
        a, b = port_of("A"), port_of("B")
        _, sid = initialize(a)
        last = drop_after_priming(b, sid, "echo", 31, message="relayed")
        time.sleep(0.2)  # the call is over on B: its result is in B's buffer
        c = resume(a, sid, last)
        status, head = head_of(c)
        check_eq(status, 200, "resumed on A from B's buffer (%r)" % head)
        text, ended = read_stream(c, timeout=10)
        c.close()
        check(ended, "the relayed stream ended after the result: %r" % text)
        check_eq(result_text(text), "Echo: relayed", "the result B kept, through A")
        ids = [i for i, _ in events(text) if i]
        check(ids and all(i.rsplit("_", 1)[0] == last.rsplit("_", 1)[0] for i in ids),
              "B's event ids, as B sent them: %r after %r" % (ids, last))
        request(a, "DELETE", session=sid)

    def t_live():
        a, b = port_of("A"), port_of("B")
        _, sid = initialize(a)
        t0 = time.monotonic()
        last = drop_after_priming(b, sid, "slow", 32, message="live")
        first = resume(a, sid, last)
        status, head = head_of(first)
        check_eq(status, 200, "resumed on A while the call runs on B (%r)" % head)
        check(time.monotonic() - t0 < SLOW_MS / 1000.0, "the head before the result")
        for port, where in ((a, "A"), (b, "B")):
            r = request(port, "GET", session=sid, accept="text/event-stream",
                        extra=(("Last-Event-ID", last),))
            expect_error(r, 409, -32000, "a second GET on that stream, on %s" % where, check_id=False)
        text, ended = read_stream(first, timeout=10)
        took = time.monotonic() - t0
        first.close()
        check(ended and result_text(text) == "Echo: live", "the live result through A: %r" % text)
        print("a %d ms call on B, dropped and resumed on A: its result %.0f ms after the call"
              % (SLOW_MS, took * 1000))
        request(a, "DELETE", session=sid)

    def t_client_leaves():
        a, b = port_of("A"), port_of("B")
        _, sid = initialize(a)
        last = drop_after_priming(b, sid, "slow", 33, message="again")
        first = resume(a, sid, last)
        check_eq(head_of(first)[0], 200, "resumed on A")
        first.close()  # A tells B: the stream waits for a client again
        deadline = time.monotonic() + 3
        while True:
            c = resume(b, sid, last)
            status, head = head_of(c)
            if status != 409 or time.monotonic() > deadline:
                break
            c.close()
            time.sleep(0.05)
        check_eq(status, 200, "resumed on B itself once A's client left (%r)" % head)
        text, ended = read_stream(c, timeout=10)
        c.close()
        check(ended and result_text(text) == "Echo: again", "the result on B: %r" % text)
        request(a, "DELETE", session=sid)

    def t_session_end():
        a, b = port_of("A"), port_of("B")
        _, sid = initialize(a)
        last = drop_after_priming(b, sid, "slow", 34, message="cut")
        first = resume(a, sid, last)
        check_eq(head_of(first)[0], 200, "resumed on A")
        t0 = time.monotonic()
        r = request(b, "DELETE", session=sid)
        check(r.status in (200, 204), "DELETE on B: %d" % r.status)
        text, ended = read_stream(first, timeout=10)
        took = time.monotonic() - t0
        first.close()
        check(ended, "A's relayed stream ended with the session")
        check(result_text(text) is None, "no result after the session ended: %r" % text)
        check(took < SLOW_MS / 1000.0, "ended by the DELETE, not by the call: %.0f ms" % (took * 1000))
        print("A's relayed stream ended %.1f ms after the DELETE on B" % (took * 1000))

    return [
        ("a stream of B resumed on A after its call ended (relayed)", t_after_the_end),
        ("a stream of B resumed on A while its call runs; 409 for a second GET on either", t_live),
        ("A's client leaves: the stream can be resumed on B itself", t_client_leaves),
        ("a DELETE on B ends A's relayed stream", t_session_end),
    ]
