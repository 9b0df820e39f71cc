#!/usr/bin/python3
"""SIGTERM under load, on both wires, with two loops.

In flight when the signal comes: N_STATELESS slow calls (backend_mock "slow",
latency_ms SLOW_MS, inline: a timer each) on the 2026-07-28 wire and N_LEGACY slow calls
on 2025-11-25 sessions (SSE answers, whose head and priming event are already written),
each on a connection of its own; and LOOPERS clients calling echo back to back on
keep-alive connections of both wires, reconnecting when closed. The signal goes once
every slow call is audited as allowed (or, on a machine so slow that the first one ends
before the last is admitted, at once); what was in flight is what the audit said then.
Then:
  * every slow call in flight at the signal (audited as allowed, not yet completed)
    gets its complete answer and is audited completed; any other one was answered
    before, or is refused cleanly, never cut;
  * every looper call either completes with its full answer, or is refused cleanly: a
    503, or its connection closed before any byte of the answer; none is cut mid-answer;
  * the open streams (STREAMS subscriptions/listen, STREAMS legacy GET streams) end
    cleanly: the chunked stream's last chunk, a listen's with its result;
  * once the drain has reached every loop (the gateway logged that it drains, and a new
    connection is refused: every loop's listener is closed), new connections are
    refused (connect refused, or closed before any byte) or answered 503, never served,
    while the slow calls still hold the drain open;
  * the gateway exits 0 within the drain bound (gateway.drain_timeout_ms) and without
    reaching it.
"""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, ConnectionClosed, Context, Gateway, audit_id, audit_name,  # noqa: E402
                     base_manifest, build_request, check, check_eq, fail, parse_args, read_audit,
                     rpc_body, run_tests, stateless_headers, tool_call_request, wait_for)
from test_legacy_wire import head_of, read_stream, request_bytes  # noqa: E402

SLOW_MS = 8000       # long next to admitting the slow calls and probing the drain
DRAIN_MS = 4 * SLOW_MS
N_STATELESS = 40
N_LEGACY = 20
LOOPERS = 6  # half on each wire
STREAMS = 2  # of each: stateless subscriptions/listen, legacy GET
PROBES = 20
DRAINING = "draining in-flight calls"  # kernel/main.c, when SIGTERM arrives


class CountingConn(Conn):
    """A Conn that counts the bytes it received, so a close can be told apart:
    before any byte of an answer, or in the middle of one."""

    def __init__(self, port):
        super().__init__(port)
        self.got = 0

    def _fill(self):
        n = len(self.buf)
        super()._fill()
        self.got += len(self.buf) - n


def legacy_raw(port, body, session=None):
    return request_bytes(port, body=body, session=session, version="2025-11-25" if session else None)


def legacy_call(port, tool, rpc_id, session):
    return legacy_raw(port, {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
                             "params": {"name": tool, "arguments": {"message": "hi"}}},
                      session)


def outcome(c, raw, rpc_id):
    """Send one request on c and judge what came back: "complete", "503",
    "closed-before" or "cut" (with what was seen)."""
    before = c.got + len(c.buf)
    try:
        c.send(raw)
        r = c.read_response()
    except (ConnectionClosed, ConnectionResetError, BrokenPipeError):
        if c.got + len(c.buf) == before:
            return "closed-before", None
        return "cut", "closed after %d bytes of the answer" % (c.got + len(c.buf) - before)
    if r.status == 503:
        return "503", None
    if r.status != 200:
        return "cut", "status %d: %r" % (r.status, r.body[:200])
    try:
        msgs = [m for m in r.messages() if "result" in m or "error" in m]
    except ValueError as e:
        return "cut", "not JSON (%s): %r" % (e, r.body[-200:])
    if (len(msgs) == 1 and msgs[0].get("id") == rpc_id and "result" in msgs[0]
            and msgs[0]["result"]["content"][0]["text"] == "Echo: hi"):
        return "complete", None
    return "cut", "answer %r" % (msgs,)


def main():
    args = parse_args()
    ctx = Context(args)

    def t_drain_load():
        audit = ctx.path("drain-load.jsonl")
        m = base_manifest(audit_path=audit,
                          tools=[{"name": "echo"}, {"name": "slow", "latency_ms": SLOW_MS}],
                          server={"access_log": False},
                          gateway={"workers": 2, "drain_timeout_ms": DRAIN_MS})
        m["modules"][0]["inline_dispatch"] = True
        m["modules"][1]["config"]["fsync"] = False
        gw = Gateway(ctx, manifest=m, name="drainload")
        with gw:
            port = gw.port
            sessions = []
            with CountingConn(port) as c:
                for _ in range(N_LEGACY + LOOPERS // 2):
                    c.send(legacy_raw(port, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                             "params": {"protocolVersion": "2025-11-25",
                                                        "capabilities": {},
                                                        "clientInfo": {"name": "t",
                                                                       "version": "1"}}}))
                    r = c.read_response()
                    check_eq(r.status, 200, "initialize")
                    sid = r.header("mcp-session-id")
                    c.send(legacy_raw(port, {"jsonrpc": "2.0",
                                             "method": "notifications/initialized"}, sid))
                    check_eq(c.read_response().status, 202, "notifications/initialized")
                    sessions.append(sid)

            lock = threading.Lock()
            results = {}       # slow call id -> (outcome, detail)
            looped = []        # (outcome, detail) of every looper call
            stop = threading.Event()

            def slow_client(rpc_id, raw):
                try:
                    c = CountingConn(port)
                except (ConnectionRefusedError, ConnectionResetError):
                    # after the listeners closed (reset: it waited in a listener's
                    # backlog when that closed; no request was sent)
                    res = ("connect-refused", None)
                except OSError as e:
                    res = ("cut", "connect: %r" % e)
                else:
                    try:
                        with c:
                            res = outcome(c, raw, rpc_id)
                    except OSError as e:
                        res = ("cut", "%r" % e)
                with lock:
                    results[rpc_id] = res

            def looper(k):
                legacy = k % 2 == 1
                sid = sessions[N_LEGACY + k // 2] if legacy else None
                c, n = None, 0
                while not stop.is_set():
                    if c is None:
                        try:
                            c = CountingConn(port)
                        except OSError:  # refused: the listeners are closed
                            with lock:
                                looped.append(("connect-refused", None))
                            time.sleep(0.05)
                            continue
                    n += 1
                    rid = "loop-%d-%d" % (k, n)
                    raw = (legacy_call(port, "echo", rid, sid) if legacy
                           else tool_call_request(port, "echo", {"message": "hi"}, id=rid))
                    res = outcome(c, raw, rid)
                    with lock:
                        looped.append(res)
                    if res[0] != "complete":
                        c.close()
                        c = None
                if c is not None:
                    c.close()

            streams = {}       # stream name -> "open", then (outcome, detail)

            def stream_client(name, raw, listen_id):
                try:
                    with CountingConn(port) as c:
                        c.send(raw)
                        status, head = head_of(c)
                        check(status == 200 and "text/event-stream" in head,
                              "%s: a stream (%r)" % (name, head))
                        with lock:
                            streams[name] = "open"
                        text, ended = read_stream(c, timeout=DRAIN_MS / 1000.0 + 10)
                        res = ("ended", None) if ended else ("cut", "did not end")
                        if listen_id and '"id":"%s","result"' % listen_id not in text:
                            res = ("cut", "no result for the listen: %r" % text[-300:])
                except Exception as e:  # a close without the last chunk, a timeout
                    res = ("cut", repr(e))
                with lock:
                    streams[name] = res

            stream_threads = []
            for i in range(STREAMS):
                lid = "listen-%d" % i
                body = rpc_body("subscriptions/listen",
                                {"notifications": {"toolsListChanged": True}}, id=lid)
                raw = build_request(port, headers=stateless_headers("subscriptions/listen"),
                                    body=body)
                stream_threads.append(threading.Thread(target=stream_client,
                                                       args=(lid, raw, lid)))
                raw = request_bytes(port, "GET", session=sessions[i],
                                    accept="text/event-stream")
                stream_threads.append(threading.Thread(target=stream_client,
                                                       args=("get-%d" % i, raw, None)))
            for t in stream_threads:
                t.start()
            wait_for(lambda: len(streams) == 2 * STREAMS, 10, "the streams to open")
            check(all(v == "open" for v in streams.values()), "streams: %r" % streams)

            loopers = [threading.Thread(target=looper, args=(k,)) for k in range(LOOPERS)]
            slow_ids = []
            slows = []
            for i in range(N_STATELESS):
                rid = "slow-s-%d" % i
                slow_ids.append(rid)
                slows.append(threading.Thread(target=slow_client, args=(
                    rid, tool_call_request(port, "slow", {"message": "hi"}, id=rid))))
            for i in range(N_LEGACY):
                rid = "slow-l-%d" % i
                slow_ids.append(rid)
                slows.append(threading.Thread(target=slow_client, args=(
                    rid, legacy_call(port, "slow", rid, sessions[i]))))

            def probe(i):
                try:
                    c = CountingConn(port)
                except (ConnectionRefusedError, ConnectionResetError):
                    # reset: it waited in the listener's backlog when the listener
                    # closed, and the kernel reset it; no request was sent
                    return "connect-refused"
                with c:
                    return outcome(c, tool_call_request(port, "echo", {"message": "hi"},
                                                        id="probe-%d" % i), "probe-%d" % i)

            def served(p):
                return not isinstance(p, str) and p[0] not in ("closed-before", "503")

            early, probes = [], []
            in_flight = set()
            try:
                for t in loopers + slows:
                    t.start()

                def admitted():
                    """Every slow call allowed, or the first one already over: the
                    ids in flight now (allowed, not completed). Else None."""
                    with lock:
                        answered = set(results)
                    evs = [(audit_name(r), audit_id(r)) for r in read_audit(audit)]
                    allowed = set(i for n, i in evs if n == "mcpg.tool.call.allowed")
                    done = set(i for n, i in evs if n == "mcpg.tool.call.completed")
                    done |= answered
                    if set(slow_ids) <= allowed or done & set(slow_ids):
                        return allowed & set(slow_ids) - done
                    return None
                seen = []
                wait_for(lambda: seen.append(admitted()) or seen[-1] is not None, 60,
                         "the %d slow calls to be in flight" % len(slow_ids))
                in_flight = seen[-1]
                gw.signal(signal.SIGTERM)
                t_sig = time.monotonic()
                check(in_flight, "no slow call in flight at SIGTERM")

                # The drain is posted to each loop, which then closes its listener:
                # until then a new connection may still be served. Once one is refused
                # at connect, no loop listens any more.
                wait_for(lambda: DRAINING in gw.stderr(), 10, "the drain to begin (%r)" % DRAINING)
                t_end = time.monotonic() + 10
                while not early or early[-1] != "connect-refused":
                    check(time.monotonic() < t_end, "new connections still accepted 10 s "
                          "after the drain began: %r" % early[-10:])
                    early.append(probe(len(early)))
                    check(early[-1] == "connect-refused" or early[-1][0] != "cut",
                          "a probe while the drain reaches the loops: %r" % (early[-1],))
                for i in range(PROBES):
                    probes.append(probe(len(early) + i))
                # judged during the drain: a slow call in flight was still unanswered
                with lock:
                    pending = [i for i in in_flight if i not in results]
                check(pending, "the slow calls ended before the probes did: the probes "
                      "did not see the drain")
                for t in slows:
                    t.join(DRAIN_MS / 1000.0 + 10)
            finally:
                stop.set()
                for t in loopers + slows + stream_threads:
                    t.join(DRAIN_MS / 1000.0 + 10)
            rc = gw.wait_exit(DRAIN_MS / 1000.0 + 10)
            waited = time.monotonic() - t_sig
            gw.check_sanitizers()
            stderr = gw.stderr()

        check_eq(rc, 0, "exit status after SIGTERM under load")
        check(waited < DRAIN_MS / 1000.0, "exited %.2fs after SIGTERM (drain_timeout_ms %d)"
              % (waited, DRAIN_MS))
        check("drain deadline passed" not in stderr, "the drain reached its deadline")
        check_eq(len(results), len(slow_ids), "slow calls that ended")
        bad = {i: results[i] for i in in_flight if results[i][0] != "complete"}
        check(not bad, "slow calls in flight at SIGTERM not answered in full: %r" % bad)
        bad = {i: r for i, r in results.items()
               if r[0] not in ("complete", "503", "closed-before", "connect-refused")}
        check(not bad, "slow calls not in flight at SIGTERM cut: %r" % bad)
        completed = [audit_id(r) for r in read_audit(audit)
                     if audit_name(r) == "mcpg.tool.call.completed"]
        for i in slow_ids:
            check_eq(completed.count(i), 1 if results[i][0] == "complete" else 0,
                     "completed events for %s (%s)" % (i, results[i][0]))
        check(all(v == ("ended", None) for v in streams.values()),
              "streams open at SIGTERM: %r" % streams)
        counts = {}
        for o, _ in looped:
            counts[o] = counts.get(o, 0) + 1
        cut = [d for o, d in looped if o == "cut"]
        check(not cut, "looper calls cut mid-answer: %r" % cut[:5])
        check(counts.get("complete", 0) > 0, "looper calls served before SIGTERM: %r" % counts)
        pcounts = {}
        for p in probes:
            o = p if isinstance(p, str) else p[0]
            pcounts[o] = pcounts.get(o, 0) + 1
            if served(p):
                fail("a new connection after the drain reached every loop: %r" % (p,))
        ecounts = {}
        for p in early:
            o = p if isinstance(p, str) else p[0]
            ecounts[o] = ecounts.get(o, 0) + 1
        print("SIGTERM with %d of %d slow calls in flight: all complete, %d streams ended "
              "cleanly, exit 0 after %.2fs; looper calls %r; new connections while the drain "
              "reached the loops %r, then %r"
              % (len(in_flight), len(slow_ids), len(streams), waited, counts, ecounts, pcounts))

    return run_tests([("SIGTERM under load: complete or refused, never cut; exit 0",
                       t_drain_load)], ctx)


if __name__ == "__main__":
    sys.exit(main())
