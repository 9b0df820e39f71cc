"""Checks shared by the fleet tests: a legacy POST stream that runs on one
replica, dropped, and resumed (GET with Last-Event-ID) on another, which
relays it over the coordinator's pub/sub (modules/transport_http/wire/relay.h).

The gateways must serve backend_mock's `echo` and a tool `slow` that answers
after SLOW_MS (the fleet tests add it to the shipped manifests). SLOW_MS is long
enough that what a check does while the call runs (a resumption, two more GETs,
a DELETE) fits in it on a loaded machine; the bounds that tell "while the call
ran" from "after it ended" are SLOW_MS itself."""

import json
import time

from gateway import Conn, check, check_eq, expect_error  # noqa: E402
from test_legacy_wire import (drop_after_priming, events, head_of,  # noqa: E402
                              initialize, read_stream, request, resume_when_free, rpc)

SLOW_MS = 8000
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
        # the call on B, its connection closed once its result has come: the call is
        # over on B and its result is in B's buffer
        with Conn(b) as p:
            request(b, body=rpc("tools/call", {"name": "echo", "arguments": {"message": "relayed"}},
                                id=31), session=sid, conn=p)
            status, head = head_of(p)
            check_eq(status, 200, "the call's stream on B (%r)" % head)
            text, _ = read_stream(p, until="Echo: relayed")
        last = events(text)[0][0]
        check(last and not events(text)[0][1].strip(), "the priming event first: %r" % text)
        c, status, head = resume_when_free(a, sid, last)
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
        first, status, head = resume_when_free(a, sid, last, timeout=SLOW_MS / 2000.0)
        check_eq(status, 200, "resumed on A while the call runs on B (%r)" % head)
        for port, where in ((a, "A"), (b, "B")):
            r = request(port, "GET", session=sid, accept="text/event-stream",
                        extra=(("Last-Event-ID", last),))
            expect_error(r, 409, -32000, "a second GET on that stream, on %s" % where, check_id=False)
        # the head and both 409s came while the call still ran: a relayed live stream
        live = time.monotonic() - t0
        check(live < SLOW_MS / 1000.0, "the head and the 409s %.2fs after the %d ms call began"
              % (live, SLOW_MS))
        text, ended = read_stream(first, timeout=SLOW_MS / 1000.0 + 10)
        took = time.monotonic() - t0
        first.close()
        check(ended and result_text(text) == "Echo: live", "the live result through A: %r" % text)
        print("a %d ms call on B, dropped and resumed on A: its result %.0f ms after the call"
              % (SLOW_MS, took * 1000))
        request(a, "DELETE", session=sid)

    def t_client_leaves():
        a, b = port_of("A"), port_of("B")
        _, sid = initialize(a)
        t0 = time.monotonic()
        last = drop_after_priming(b, sid, "slow", 33, message="again")
        first, status, head = resume_when_free(a, sid, last, timeout=SLOW_MS / 2000.0)
        check_eq(status, 200, "resumed on A (%r)" % head)
        first.close()  # A tells B: the stream waits for a client again
        # 409 until B hears it; the call's own end (SLOW_MS) would free the stream too,
        # so only a resumption before then shows A's word reached B
        c, status, head = resume_when_free(b, sid, last,
                                           timeout=max(0.0, SLOW_MS / 1000.0 - (time.monotonic() - t0)))
        freed = time.monotonic() - t0
        check_eq(status, 200, "resumed on B itself once A's client left (%r)" % head)
        check(freed < SLOW_MS / 1000.0, "resumed on B %.2fs after the %d ms call began: freed by "
              "the call's end, not by A's client leaving" % (freed, SLOW_MS))
        text, ended = read_stream(c, timeout=SLOW_MS / 1000.0 + 10)
        c.close()
        check(ended and result_text(text) == "Echo: again", "the result on B: %r" % text)
        request(a, "DELETE", session=sid)

    def t_session_end():
        a, b = port_of("A"), port_of("B")
        _, sid = initialize(a)
        last = drop_after_priming(b, sid, "slow", 34, message="cut")
        first, status, head = resume_when_free(a, sid, last, timeout=SLOW_MS / 2000.0)
        check_eq(status, 200, "resumed on A (%r)" % head)
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
