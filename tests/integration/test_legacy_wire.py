#!/usr/bin/python3
"""The legacy (2025-11-25) wire on the real gateway: initialize mints an unguessable
Mcp-Session-Id, notifications/initialized gets 202, requests answered as SSE (event ids,
a priming event with retry:) or, with unary_json_fast_path, as one JSON body; 400 for a
missing session header, 404/-32001 for an unknown or ended one; ping, logging/setLevel,
resources/subscribe; the standalone GET stream (409 for a second); DELETE (200, then 404);
client responses and notifications 202; unsupported versions 400; Accept 406.
Resumption: a POST stream dropped after its priming event, resumed with GET +
Last-Event-ID (the result from the replay buffer; 409 for a second GET on that stream,
400 for a malformed or unknown id). With gateway.workers 2 (SO_REUSEPORT spreads the
connections): a session used on both loops, DELETE on one loop ending a GET stream on
the other, notifications/cancelled on one loop cancelling a call on the other, and a
stream resumed on the other loop."""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (IO_TIMEOUT, Context, Conn, Gateway, base_manifest, check,  # noqa: E402
                     check_eq, expect_error, fail, parse_args, run_tests)

ACCEPT = "application/json, text/event-stream"
SLOWER_MS = 6000  # a call still running while a test resumes it and asks again
LONG_MS = 20000  # a call that only a cancel ends within the test


def request_bytes(port, method="POST", body=None, session=None, version="2025-11-25",
                  accept=ACCEPT, extra=(), path="/mcp"):
    """The raw bytes of one legacy-wire request."""
    data = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: localhost:%d" % port]
    if accept is not None:
        lines.append("Accept: %s" % accept)
    if body is not None:
        lines += ["Content-Type: application/json", "Content-Length: %d" % len(data)]
    if session:
        lines.append("Mcp-Session-Id: %s" % session)
    if version:
        lines.append("MCP-Protocol-Version: %s" % version)
    lines += ["%s: %s" % kv for kv in extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def request(port, method="POST", body=None, session=None, version="2025-11-25", accept=ACCEPT,
            extra=(), conn=None):
    raw = request_bytes(port, method, body, session, version, accept, extra)
    if conn is not None:
        conn.send(raw)
        return None
    with Conn(port) as c:
        c.send(raw)
        return c.read_response()


def answer(r):
    """The JSON-RPC response in r: its JSON body, or its stream's data events (events
    without data, such as the priming one, are skipped as clients skip them)."""
    if r.content_type() != "text/event-stream":
        return r.rpc()
    msgs = []
    for event in r.body.decode().split("\n\n"):
        data = "\n".join(ln[5:].lstrip(" ") for ln in event.split("\n") if ln.startswith("data:"))
        if data.strip():
            msgs.append(json.loads(data))
    out = [m for m in msgs if "result" in m or "error" in m]
    check(len(out) == 1, "one response in the stream: %r" % msgs)
    return out[0]


def rpc(method, params=None, id=1):
    m = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        m["params"] = params
    return m


def initialize(port, version="2025-11-25"):
    r = request(port, body=rpc("initialize", {"protocolVersion": version,
                                              "capabilities": {"sampling": {}},
                                              "clientInfo": {"name": "t", "version": "1"}}),
                version=None)
    check_eq(r.status, 200, "initialize status (%r)" % r.body[:200])
    sid = r.header("mcp-session-id")
    check(sid and re.fullmatch(r"[0-9a-f]{32}", sid), "a 128-bit hex session id: %r" % sid)
    return r, sid


def read_stream(conn, until=None, timeout=10.0):
    """Chunks of an SSE answer on conn (its head already read) until `until` is in the
    text or the stream ends; returns (text, ended)."""
    text, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        size = int(conn._read_until(b"\r\n").decode().split(";")[0], 16)
        if size == 0:
            conn._read_until(b"\r\n")
            return text, True
        text += conn._read_n(size).decode()
        check(conn._read_n(2) == b"\r\n", "chunk terminator")
        if until and until in text:
            return text, False
    fail("the stream did not deliver %r in %.0f s: %r" % (until, timeout, text[-300:]))


def head_of(conn):
    head = conn._read_until(b"\r\n\r\n").decode("latin-1")
    return int(head.split(" ", 2)[1]), head


def events(text):
    """[(id or None, data)] of an SSE text."""
    out = []
    for ev in text.split("\n\n"):
        if not ev.strip():
            continue
        eid = re.search(r"^id: (\S+)$", ev, re.M)
        data = "\n".join(ln[5:].lstrip(" ") for ln in ev.split("\n") if ln.startswith("data:"))
        out.append((eid.group(1) if eid else None, data))
    return out


def drop_after_priming(port, sid, tool, id, message="resumed"):
    """POST a call, read the head and the priming event, drop the connection: the
    priming event's id."""
    c = Conn(port)
    request(port, body=rpc("tools/call", {"name": tool, "arguments": {"message": message}}, id=id),
            session=sid, conn=c)
    status, head = head_of(c)
    check_eq(status, 200, "the call's stream (%r)" % head)
    text, _ = read_stream(c, until="\n\n")
    prime = events(text)[0]
    check(prime[0] and not prime[1].strip(), "the priming event first: %r" % text)
    c.close()
    return prime[0]


def resume(port, sid, last_id, conn=None):
    c = conn or Conn(port)
    request(port, "GET", session=sid, accept="text/event-stream",
            extra=(("Last-Event-ID", last_id),), conn=c)
    return c


def resume_when_free(port, sid, last_id, timeout=IO_TIMEOUT, new_conn=None):
    """Resume a stream whose client has just gone: GET with Last-Event-ID, sent again
    on a new connection while the answer is 409 (the loop running the stream shows it
    to the dropped client until it reads that connection's end), for up to timeout
    seconds. new_conn() gives each attempt's connection (default: Conn(port)).
    Returns (conn, status, head), the answer's head read, the rest left on conn."""
    deadline = time.monotonic() + timeout
    while True:
        c = resume(port, sid, last_id, conn=new_conn() if new_conn else None)
        status, head = head_of(c)
        if status != 409 or time.monotonic() > deadline:
            return c, status, head
        c.close()
        time.sleep(0.02)


def main():
    args = parse_args()
    ctx = Context(args)
    sse = Gateway(ctx, manifest=base_manifest(tools=[{"name": "echo"},
                                                     {"name": "slow", "latency_ms": 500},
                                                     {"name": "slower", "latency_ms": SLOWER_MS}]),
                  name="legacy-sse").start()
    mm = base_manifest(tools=[{"name": "echo"}, {"name": "slow", "latency_ms": 500},
                              {"name": "long", "latency_ms": LONG_MS}],
                       gateway={"workers": 2})
    mm["modules"][0]["inline_dispatch"] = True  # so that a cancel answers at once
    multi = Gateway(ctx, manifest=mm, name="legacy-multi").start()
    fast = Gateway(ctx, manifest=base_manifest(server={"unary_json_fast_path": True,
                                                       "max_sessions": 3}),
                   name="legacy-fast").start()
    p, fp = sse.port, fast.port

    def t_initialize_sse():
        r, sid = initialize(p)
        check_eq(r.content_type(), "text/event-stream", "initialize answered as SSE")
        text = r.body.decode()
        check(re.search(r"^id: \d+_\d+_\d+_0\nretry: \d+\ndata: \n\n", text, re.M),
              "a priming event with id and retry first: %r" % text[:200])
        res = answer(r)["result"]
        check_eq(res["protocolVersion"], "2025-11-25", "negotiated version")
        # what the bindings serve (a mock with tools only), and logging (relayed)
        check_eq(sorted(res["capabilities"]), ["logging", "tools"], "capabilities")
        check(isinstance(res["serverInfo"]["name"], str), "serverInfo")
        _, sid2 = initialize(p)
        check(sid != sid2, "every session id is new")

    def t_body_errors():
        _, sid = initialize(p)
        raw = ("POST /mcp HTTP/1.1\r\nHost: localhost:%d\r\nAccept: %s\r\n"
               "Content-Type: text/plain\r\nMcp-Session-Id: %s\r\nContent-Length: 2\r\n\r\n{}"
               % (p, ACCEPT, sid)).encode()
        with Conn(p) as c:
            c.send(raw)
            expect_error(c.read_response(), 415, -32000, "a body that is not JSON by its type",
                         check_id=False)
        raw = ("POST /mcp HTTP/1.1\r\nHost: localhost:%d\r\nAccept: %s\r\n"
               "Content-Type: application/json\r\nMcp-Session-Id: %s\r\n"
               "MCP-Protocol-Version: 2025-11-25\r\nContent-Length: 9\r\n\r\n{not json"
               % (p, ACCEPT, sid)).encode()
        with Conn(p) as c:
            c.send(raw)
            expect_error(c.read_response(), 400, -32700, "a body that is not JSON", check_id=False)

    def t_listen_needs_sse():
        body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "subscriptions/listen",
                           "params": {"notifications": {"toolsListChanged": True},
                                      "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                                "io.modelcontextprotocol/clientCapabilities": {}}}})
        raw = ("POST /mcp HTTP/1.1\r\nHost: localhost:%d\r\nAccept: application/json\r\n"
               "Content-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n"
               "Mcp-Method: subscriptions/listen\r\nContent-Length: %d\r\n\r\n%s"
               % (p, len(body), body)).encode()
        with Conn(p) as c:
            c.send(raw)
            expect_error(c.read_response(), 406, -32600,
                         "subscriptions/listen without text/event-stream in Accept", id=5)

    def t_version_negotiation():
        r, _ = initialize(p, "2025-06-18")
        check_eq(answer(r)["result"]["protocolVersion"], "2025-06-18", "a supported older version")
        check(not re.search(r"retry:", r.body.decode()), "no priming event before 2025-11-25")
        r, _ = initialize(p, "2024-01-01")
        check_eq(answer(r)["result"]["protocolVersion"], "2025-11-25", "an unknown one: ours")

    def t_session_errors():
        r = request(p, body=rpc("tools/list"))
        expect_error(r, 400, -32000, "no session header", id=1)
        r = request(p, body=rpc("tools/list"), session="0" * 32)
        expect_error(r, 404, -32001, "unknown session", id=1)
        _, sid = initialize(p)
        r = request(p, body=rpc("tools/list"), session=sid, version="2099-01-01")
        expect_error(r, 400, -32000, "unsupported MCP-Protocol-Version", id=1)
        r = request(p, body=rpc("tools/list"), session=sid, accept="application/json")
        expect_error(r, 406, -32000, "Accept without text/event-stream", check_id=False)
        r = request(p, body=rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}),
                    session=sid)
        expect_error(r, 400, -32600, "initialize on a session", id=1)

    def t_calls_sse():
        _, sid = initialize(p)
        r = request(p, body={"jsonrpc": "2.0", "method": "notifications/initialized"}, session=sid)
        check_eq(r.status, 202, "notifications/initialized")
        check_eq(r.body, b"", "202 has no body")
        r = request(p, body=rpc("tools/call", {"name": "echo", "arguments": {"message": "hi"}}, id=7),
                    session=sid)
        check_eq(r.status, 200, "tools/call status")
        check_eq(r.content_type(), "text/event-stream", "an SSE answer by default")
        check_eq(r.header("mcp-session-id"), sid, "the session header on the answer")
        ids = re.findall(r"^id: (\S+)$", r.body.decode(), re.M)
        check(len(ids) == 2 and ids[0].rsplit("_", 1)[0] == ids[1].rsplit("_", 1)[0],
              "event ids name one stream: %r" % ids)
        rpc_ = answer(r)
        check_eq(rpc_["id"], 7, "id")
        check_eq(rpc_["result"]["content"][0]["text"], "Echo: hi", "echo")
        check("resultType" not in rpc_["result"], "no resultType on the 2025 wire")
        r = request(p, body=rpc("tools/list", id=8), session=sid)
        check_eq(answer(r)["result"]["tools"][0]["name"], "echo", "tools/list")

    def t_fast_path():
        r, sid = initialize(fp)
        check_eq(r.content_type(), "application/json", "initialize as JSON with the fast path")
        r = request(fp, body=rpc("tools/call", {"name": "echo", "arguments": {"message": "x"}}, id=3),
                    session=sid)
        check_eq(r.content_type(), "application/json", "a unary call as one JSON body")
        check_eq(answer(r)["result"]["content"][0]["text"], "Echo: x", "echo")

    def t_utilities():
        r, sid = initialize(fp)
        r = request(fp, body=rpc("ping", id=4), session=sid)
        check_eq(answer(r), {"jsonrpc": "2.0", "id": 4, "result": {}}, "ping")
        r = request(fp, body=rpc("logging/setLevel", {"level": "warning"}, id=5), session=sid)
        check_eq(answer(r)["result"], {}, "setLevel")
        r = request(fp, body=rpc("logging/setLevel", {"level": "loud"}, id=6), session=sid)
        check_eq(answer(r)["error"]["code"], -32602, "a bad level")
        r = request(fp, body=rpc("resources/subscribe", {"uri": "test://x"}, id=9), session=sid)
        check_eq(answer(r)["result"], {}, "subscribe")
        r = request(fp, body=rpc("resources/unsubscribe", {"uri": "test://x"}, id=10), session=sid)
        check_eq(answer(r)["result"], {}, "unsubscribe")
        r = request(fp, body={"jsonrpc": "2.0", "id": 99, "result": {}}, session=sid)
        check_eq(r.status, 202, "a client response")
        r = request(fp, body={"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": 123}}, session=sid)
        check_eq(r.status, 202, "notifications/cancelled")

    def t_get_stream_and_delete():
        _, sid = initialize(p)
        with Conn(p) as g:
            request(p, "GET", session=sid, accept="text/event-stream", conn=g)
            head = g._read_until(b"\r\n\r\n").decode()
            check(head.startswith("HTTP/1.1 200"), "GET stream opens: %r" % head)
            check("text/event-stream" in head, "as SSE")
            r = request(p, "GET", session=sid, accept="text/event-stream")
            expect_error(r, 409, -32000, "a second GET stream", check_id=False)
            r = request(p, "GET", session=sid, accept="application/json")
            check_eq(r.status, 406, "GET without text/event-stream")
            r = request(p, "DELETE", session=sid)
            check_eq(r.status, 200, "DELETE")
            # the GET stream ends with the session
            rest = b""
            try:
                while not rest.endswith(b"0\r\n\r\n"):
                    g._fill()
                    rest, g.buf = rest + g.buf, b""
            except Exception:
                pass
            check(rest.endswith(b"0\r\n\r\n"), "the GET stream ended: %r" % rest[-50:])
        r = request(p, body=rpc("tools/list"), session=sid)
        expect_error(r, 404, -32001, "after DELETE", id=1)
        r = request(p, "DELETE", session=sid)
        expect_error(r, 404, -32001, "DELETE again", check_id=False)
        r = request(p, "GET", session=None, accept="text/event-stream")
        expect_error(r, 400, -32000, "GET without a session", check_id=False)

    def t_session_cap():
        ids = [initialize(fp)[1] for _ in range(0)]
        # fp allows 3 sessions; earlier tests opened 2
        r = request(fp, body=rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}),
                    version=None)
        got = [r.status]
        r = request(fp, body=rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}),
                    version=None)
        got.append(r.status)
        check_eq(got[-1], 503, "initialize beyond max_sessions (statuses %r)" % got)
        check(r.header("retry-after"), "503 says when to retry")
        check_eq(answer(r)["error"]["code"], -32000, "-32000")
        del ids

    def t_resume():
        _, sid = initialize(p)
        last = drop_after_priming(p, sid, "slow", 21)
        check(re.fullmatch(r"[1-9]\d*_\d+_\d+_0", last), "a priming id names gateway, loop and stream: %r" % last)
        c, status, head = resume_when_free(p, sid, last)
        check_eq(status, 200, "the resumption GET (%r)" % head)
        check("text/event-stream" in head, "as SSE")
        text, ended = read_stream(c)
        c.close()
        check(ended, "the resumed stream ends after the result")
        got = [json.loads(d) for _, d in events(text) if d.strip()]
        check_eq(len(got), 1, "the result alone (%r)" % text)
        check_eq(got[0]["id"], 21, "the call's id")
        check_eq(got[0]["result"]["content"][0]["text"], "Echo: resumed", "not cancelled by the drop")
        ids = [i for i, _ in events(text)]
        check(ids[0] and ids[0].rsplit("_", 1)[0] == last.rsplit("_", 1)[0], "the same stream: %r" % ids)
        # once more from the same id: the result is kept for the session
        c = resume(p, sid, last)
        check_eq(head_of(c)[0], 200, "a second resumption after the end")
        text, ended = read_stream(c)
        c.close()
        check(ended and "Echo: resumed" in text, "replayed again: %r" % text)

    def t_resume_conflicts():
        _, sid = initialize(p)
        # slower: the stream must still be live when the second GET arrives
        t0 = time.monotonic()
        last = drop_after_priming(p, sid, "slower", 22)
        first, status, head = resume_when_free(p, sid, last, timeout=SLOWER_MS / 2000.0)
        check_eq(status, 200, "the first GET on the stream (%r)" % head)
        r = request(p, "GET", session=sid, accept="text/event-stream", extra=(("Last-Event-ID", last),))
        asked = time.monotonic() - t0
        check(asked < SLOWER_MS / 1000.0,
              "the second GET went %.2fs after the call, past its %d ms: not a live stream "
              "any more" % (asked, SLOWER_MS))
        expect_error(r, 409, -32000, "a second GET on the same stream", check_id=False)
        text, ended = read_stream(first, timeout=SLOWER_MS / 1000.0 + 10)
        first.close()
        check(ended and "Echo: resumed" in text, "the first still gets the result: %r" % text)
        replica, _, no, seq = last.split("_")
        for bad in ("abc", "0_x_1", "0_99999_0", "7_1_0", "", "0_1_0_0", "1_0_1_0_0",
                    "%s_7_%s_%s" % (replica, no, seq), "%s_0_99999_0" % replica):
            r = request(p, "GET", session=sid, accept="text/event-stream",
                        extra=(("Last-Event-ID", bad),))
            expect_error(r, 400, -32000, "Last-Event-ID %r" % bad, check_id=False)
        # another gateway's id: asked over the coordinator, nobody answers (relay.h)
        stale = "%d_0_%s_%s" % (int(replica) % 4000000000 + 1, no, seq)
        t0 = time.monotonic()
        r = request(p, "GET", session=sid, accept="text/event-stream", extra=(("Last-Event-ID", stale),))
        waited = time.monotonic() - t0
        expect_error(r, 400, -32000, "Last-Event-ID %r of a replica that does not answer" % stale,
                     check_id=False)
        # TH_RELAY_ANSWER_MS 2000, swept once a second: 2..3 s; a relay that never gave
        # up would leave the GET unanswered (the socket's IO_TIMEOUT)
        check(1.5 <= waited < 10, "answered after the relay's 2 s wait: %.2f s" % waited)
        _, other = initialize(p)
        r = request(p, "GET", session=other, accept="text/event-stream",
                    extra=(("Last-Event-ID", last),))
        expect_error(r, 400, -32000, "another session's stream", check_id=False)

    mp = multi.port

    def loops(sid, want=2, tries=40):
        """Keep-alive connections on each loop: {worker: Conn}, found by the priming
        event id of a ping's answer."""
        found = {}
        for i in range(tries):
            c = Conn(mp)
            request(mp, body=rpc("ping", id=900 + i), session=sid, conn=c)
            r = c.read_response()
            check_eq(r.status, 200, "ping on a new connection (%r)" % r.body[:200])
            w = int(re.search(r"^id: \d+_(\d+)_", r.body.decode(), re.M).group(1))
            if w in found:
                c.close()
            else:
                found[w] = c
            if len(found) == want:
                return found
        check(False, "%d connections all landed on loops %r" % (tries, sorted(found)))

    def t_multi_sessions():
        _, sid = initialize(mp)
        conns = loops(sid)  # the pings themselves used the session on both loops
        for w, c in sorted(conns.items()):
            request(mp, body=rpc("tools/call", {"name": "echo", "arguments": {"message": "w%d" % w}},
                                 id=30 + w), session=sid, conn=c)
            r = c.read_response()
            check_eq(answer(r)["result"]["content"][0]["text"], "Echo: w%d" % w, "a call on loop %d" % w)
            request(mp, body=rpc("logging/setLevel", {"level": "error"}, id=40 + w), session=sid, conn=c)
            check_eq(answer(c.read_response())["result"], {}, "setLevel on loop %d" % w)
        # several sessions, every one usable on every loop
        for k in range(4):
            _, s2 = initialize(mp)
            for w, c in sorted(conns.items()):
                request(mp, body=rpc("tools/list", id=50 + k), session=s2, conn=c)
                check_eq(c.read_response().status, 200, "session %d on loop %d" % (k, w))
        for c in conns.values():
            c.close()

    def t_multi_delete_ends_get():
        _, sid = initialize(mp)
        conns = loops(sid)
        g, d = conns[0], conns[1]
        request(mp, "GET", session=sid, accept="text/event-stream", conn=g)
        check_eq(head_of(g)[0], 200, "GET stream on loop 0")
        read_stream(g, until="\n\n")  # its priming event
        request(mp, "DELETE", session=sid, conn=d)
        check_eq(d.read_response().status, 200, "DELETE on loop 1")
        _, ended = read_stream(g)
        check(ended, "the GET stream on loop 0 ended")
        request(mp, body=rpc("tools/list", id=61), session=sid, conn=g)
        expect_error(g.read_response(), 404, -32001, "loop 0 knows it ended", id=61)
        for c in conns.values():
            c.close()

    def t_multi_cancel():
        _, sid = initialize(mp)
        conns = loops(sid)
        a, b = conns[0], conns[1]
        request(mp, body=rpc("tools/call", {"name": "long", "arguments": {"message": "x"}}, id=71),
                session=sid, conn=a)
        check_eq(head_of(a)[0], 200, "the long call's stream on loop 0")
        read_stream(a, until="\n\n")
        t0 = time.monotonic()
        request(mp, body={"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 71, "reason": "test"}}, session=sid, conn=b)
        check_eq(b.read_response().status, 202, "cancelled on loop 1")
        text, ended = read_stream(a)
        took = time.monotonic() - t0
        # ended by the cancel, not by the call's own LONG_MS
        check(ended and took < LONG_MS / 2000.0,
              "the call on loop 0 ended at once (%.2fs; the call takes %d ms)" % (took, LONG_MS))
        got = [json.loads(dd) for _, dd in events(text) if dd.strip()]
        check(got and got[-1]["id"] == 71 and "error" in got[-1], "answered as an error: %r" % got)
        for c in conns.values():
            c.close()

    def t_multi_resume_elsewhere():
        _, sid = initialize(mp)
        last = drop_after_priming(mp, sid, "slow", 80)
        w = int(last.split("_")[1])

        def on_the_other_loop():  # each attempt's GET on a connection of the other loop
            conns = loops(sid)
            c = conns.pop(1 - w)
            for other in conns.values():
                other.close()
            return c

        c, status, head = resume_when_free(mp, sid, last, new_conn=on_the_other_loop)
        check_eq(status, 200, "resumed from loop %d on loop %d (%r)" % (w, 1 - w, head))
        text, ended = read_stream(c)
        check(ended and "Echo: resumed" in text, "the result from the other loop: %r" % text)
        # the moved connection keeps serving
        request(mp, body=rpc("ping", id=99), session=sid, conn=c)
        check_eq(answer(c.read_response())["result"], {}, "the moved connection keeps serving")
        c.close()

    def t_stop():
        sse.stop()
        fast.stop()
        multi.stop()

    return run_tests([
        ("initialize: session id, SSE with a priming event, capabilities", t_initialize_sse),
        ("version negotiation", t_version_negotiation),
        ("415 for a non-JSON Content-Type, 400/-32700 for a body that is not JSON", t_body_errors),
        ("406 for subscriptions/listen without text/event-stream", t_listen_needs_sse),
        ("400 without a session, 404 unknown, bad version 400, Accept 406, re-initialize 400",
         t_session_errors),
        ("notifications 202; calls answered as SSE with event ids", t_calls_sse),
        ("unary_json_fast_path: one JSON body", t_fast_path),
        ("ping, logging/setLevel, subscribe, client responses, cancelled", t_utilities),
        ("GET stream (409 for a second), DELETE ends it, then 404", t_get_stream_and_delete),
        ("max_sessions: 503 with Retry-After", t_session_cap),
        ("a dropped POST stream resumed with Last-Event-ID", t_resume),
        ("resumption: 409 for a connected stream, 400 for bad ids", t_resume_conflicts),
        ("workers 2: sessions on every loop", t_multi_sessions),
        ("workers 2: DELETE on one loop ends a GET stream on the other", t_multi_delete_ends_get),
        ("workers 2: notifications/cancelled across loops", t_multi_cancel),
        ("workers 2: a stream resumed on the other loop", t_multi_resume_elsewhere),
        ("both gateways stop cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
