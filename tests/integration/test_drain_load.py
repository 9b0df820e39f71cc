#!/usr/bin/python3
"""SIGTERM under load, on both wires, with two loops.

In flight when the signal comes: N_STATELESS slow calls (backend_mock "slow",
latency_ms SLOW_MS, inline: a timer each) on the 2026-07-28 wire and N_LEGACY slow calls
on 2025-11-25 sessions (SSE answers, whose head and priming event are already written),
each on a connection of its own; and LOOPERS clients calling echo back to back on
keep-alive connections of both wires, reconnecting when closed. Then:
  * every slow call gets its complete answer (they were all in flight: audited as
    allowed before the signal), and is audited completed;
  * every looper call either completes with its full answer, or is refused cleanly: a
    503, or its connection closed before any byte of the answer; none is cut mid-answer;
  * the open streams (STREAMS subscriptions/listen, STREAMS legacy GET streams) end
    cleanly: the chunked stream's last chunk, a listen's with its result;
  * new connections a moment after the signal are refused (connect refused, or closed
    before any byte) or answered 503, never served;
  * the gateway exits 0 within the drain bound (gateway.drain_timeout_ms) and without
    reaching it.
"""
import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, ConnectionClosed, Context, Gateway, audit_id, audit_name,  # noqa: E402
                     base_manifest, build_request, check, check_eq, fail, parse_args, read_audit,
                     rpc_body, run_tests, stateless_headers, tool_call_request, wait_for)
from test_legacy_wire import head_of, read_stream, request_bytes  # noqa: E402

SLOW_MS = 2500
DRAIN_MS = 10000
N_STATELESS = 40
N_LEGACY = 20
LOOPERS = 6  # half on each wire
STREAMS = 2  # of each: stateless subscriptions/listen, legacy GET
PROBES = 20


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
                    with CountingConn(port) as c:
                        res = outcome(c, raw, rpc_id)
                except OSError as e:
                    res = ("cut", "connect: %r" % e)
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
            try:
                for t in loopers + slows:
                    t.start()

                def allowed():
                    got = set(audit_id(r) for r in read_audit(audit)
                              if audit_name(r) == "mcpg.tool.call.allowed")
                    return all(i in got for i in slow_ids)
                wait_for(allowed, 15, "the %d slow calls to be in flight" % len(slow_ids))
                check(not results, "slow calls answered before SIGTERM: %r" % results)
                gw.signal(signal.SIGTERM)
                t_sig = time.monotonic()

                time.sleep(0.5)
                probes = []
                for i in range(PROBES):
                    try:
                        c = CountingConn(port)
                    except ConnectionRefusedError:
                        probes.append("connect-refused")
                        continue
                    with c:
                        probes.append(outcome(c, tool_call_request(
                            port, "echo", {"message": "hi"}, id="probe-%d" % i), "probe-%d" % i))
                for t in slows:
                    t.join(30)
            finally:
                stop.set()
                for t in loopers + slows + stream_threads:
                    t.join(30)
            rc = gw.wait_exit(DRAIN_MS / 1000.0 + 10)
            waited = time.monotonic() - t_sig
            gw.check_sanitizers()
            stderr = gw.stderr()

        check_eq(rc, 0, "exit status after SIGTERM under load")
        check(waited < DRAIN_MS / 1000.0, "exited %.2fs after SIGTERM (drain_timeout_ms %d)"
              % (waited, DRAIN_MS))
        check("drain deadline passed" not in stderr, "the drain reached its deadline")
        bad = {i: r for i, r in results.items() if r[0] != "complete"}
        check_eq(len(results), len(slow_ids), "slow calls that ended")
        check(not bad, "slow calls in flight at SIGTERM not answered in full: %r" % bad)
        completed = [audit_id(r) for r in read_audit(audit)
                     if audit_name(r) == "mcpg.tool.call.completed"]
        for i in slow_ids:
            check_eq(completed.count(i), 1, "completed events for %s" % i)
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
            if o not in ("connect-refused", "closed-before", "503"):
                fail("a new connection %.1fs after SIGTERM: %r" % (0.5, p))
        print("SIGTERM with %d slow calls in flight: all complete, %d streams ended cleanly, "
              "exit 0 after %.2fs; looper calls %r; new connections after it %r"
              % (len(slow_ids), len(streams), waited, counts, pcounts))

    return run_tests([("SIGTERM under load: complete or refused, never cut; exit 0",
                       t_drain_load)], ctx)


if __name__ == "__main__":
    sys.exit(main())
