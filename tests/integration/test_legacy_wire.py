#!/usr/bin/python3
"""The legacy (2025-11-25) wire on the real gateway: initialize mints an unguessable
Mcp-Session-Id, notifications/initialized gets 202, requests answered as SSE (event ids,
a priming event with retry:) or, with unary_json_fast_path, as one JSON body; 400 for a
missing session header, 404/-32001 for an unknown or ended one; ping, logging/setLevel,
resources/subscribe; the standalone GET stream (409 for a second); DELETE (200, then 404);
client responses and notifications 202; unsupported versions 400; Accept 406."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Conn, Gateway, base_manifest, check, check_eq,  # noqa: E402
                     expect_error, parse_args, run_tests)

ACCEPT = "application/json, text/event-stream"


def request(port, method="POST", body=None, session=None, version="2025-11-25", accept=ACCEPT,
            extra=(), conn=None):
    data = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
    lines = ["%s /mcp HTTP/1.1" % method, "Host: localhost:%d" % port]
    if accept is not None:
        lines.append("Accept: %s" % accept)
    if body is not None:
        lines += ["Content-Type: application/json", "Content-Length: %d" % len(data)]
    if session:
        lines.append("Mcp-Session-Id: %s" % session)
    if version:
        lines.append("MCP-Protocol-Version: %s" % version)
    lines += ["%s: %s" % kv for kv in extra]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + data
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


def main():
    args = parse_args()
    ctx = Context(args)
    sse = Gateway(ctx, manifest=base_manifest(), name="legacy-sse").start()
    fast = Gateway(ctx, manifest=base_manifest(server={"unary_json_fast_path": True,
                                                       "max_sessions": 3}),
                   name="legacy-fast").start()
    p, fp = sse.port, fast.port

    def t_initialize_sse():
        r, sid = initialize(p)
        check_eq(r.content_type(), "text/event-stream", "initialize answered as SSE")
        text = r.body.decode()
        check(re.search(r"^id: \d+_\d+_0\nretry: \d+\ndata: \n\n", text, re.M),
              "a priming event with id and retry first: %r" % text[:200])
        res = answer(r)["result"]
        check_eq(res["protocolVersion"], "2025-11-25", "negotiated version")
        check(res["capabilities"]["resources"]["subscribe"] is True, "resources.subscribe")
        for k in ("tools", "prompts", "logging", "completions"):
            check(k in res["capabilities"], "capability %s" % k)
        check(isinstance(res["serverInfo"]["name"], str), "serverInfo")
        _, sid2 = initialize(p)
        check(sid != sid2, "every session id is new")

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

    def t_stop():
        sse.stop()
        fast.stop()

    return run_tests([
        ("initialize: session id, SSE with a priming event, capabilities", t_initialize_sse),
        ("version negotiation", t_version_negotiation),
        ("400 without a session, 404 unknown, bad version 400, Accept 406, re-initialize 400",
         t_session_errors),
        ("notifications 202; calls answered as SSE with event ids", t_calls_sse),
        ("unary_json_fast_path: one JSON body", t_fast_path),
        ("ping, logging/setLevel, subscribe, client responses, cancelled", t_utilities),
        ("GET stream (409 for a second), DELETE ends it, then 404", t_get_stream_and_delete),
        ("max_sessions: 503 with Retry-After", t_session_cap),
        ("both gateways stop cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
