#!/usr/bin/env python3
"""A tiny stateless-wire MCP mock for testing mcpg-load itself (not a baseline).

Answers POST tools/call with an echo result carrying the request's id, and
can inject one fault every N calls so each of mcpg-load's error kinds can be
provoked on purpose:

  bad-id      the answer's id is off by one          -> mismatch
  rpc-error   a JSON-RPC error object                 -> rpc_error
  tool-error  a result with isError: true             -> tool_error
  status-500  HTTP 500                                -> http_status
  chunked     Transfer-Encoding: chunked              -> protocol
  drop        close the socket without answering      -> socket
  close       a good answer with Connection: close    -> (reconnect, no error)
  stall       never answer                            -> timeout
  delay       answer after --delay seconds            -> (slow, no error)
  forget      (legacy) forget the session: 404        -> http_status, then a new session

--wire legacy serves the session wire as mcpg-load --wire legacy speaks it:
initialize mints an Mcp-Session-Id, notifications/initialized gets 202, calls
need the session (400 without, 404 unknown) and are answered as chunked SSE (a
priming event, a progress notification, the response); --wire legacy-json
answers calls with one JSON body instead.

usage: mock_mcp.py --port P [--wire W] [--fault KIND --every N [--delay S]]   (P 0: a free port, printed on stdout)
"""
import argparse
import asyncio
import itertools
import json

SESSION_NUMBERS = itertools.count(1)


def answer(rid, text, fault):
    if fault == "bad-id":
        rid = rid + 1 if isinstance(rid, int) else rid
    if fault == "rpc-error":
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "injected"}}
    result = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
    if fault == "tool-error":
        result["isError"] = True
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def http_bytes(status, body, fault):
    reason = "OK" if status == 200 else "Internal Server Error"
    head = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json"]
    if fault == "chunked":
        head.append("Transfer-Encoding: chunked")
        payload = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    else:
        head.append(f"Content-Length: {len(body)}")
        payload = body
    if fault == "close":
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


async def read_request(reader):
    """(headers with lower-case names, body)."""
    head = await reader.readuntil(b"\r\n\r\n")
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip():
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    return headers, (await reader.readexactly(length) if length else b"")


def sse_bytes(rid, answer_obj, session):
    events = ["id: %d-0\nretry: 1000\ndata: \n\n" % rid,
              "event: message\ndata: " + json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                                                     "params": {"progressToken": rid, "progress": 1}}) + "\n\n",
              "id: %d-1\nevent: message\ndata: %s\n\n" % (rid, json.dumps(answer_obj, separators=(",", ":")))]
    body = b"".join(b"%x\r\n%s\r\n" % (len(e.encode()), e.encode()) for e in events) + b"0\r\n\r\n"
    head = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Cache-Control: no-cache",
            "Transfer-Encoding: chunked", "Mcp-Session-Id: " + session]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def legacy_answer(headers, req, args, fault, sessions):
    """The session wire: bytes to send for one request."""
    sid = headers.get("mcp-session-id")
    if req.get("method") == "initialize":
        sid = "mock-%d" % next(SESSION_NUMBERS)  # never reused, even after a forget
        sessions.add(sid)
        out = json.dumps({"jsonrpc": "2.0", "id": req.get("id"),
                          "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                     "serverInfo": {"name": "mock", "version": "0"}}}).encode()
        return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: %s\r\n"
                b"Content-Length: %d\r\n\r\n" % (sid.encode(), len(out))) + out
    if not sid or sid not in sessions:
        status = b"400 Bad Request" if not sid else b"404 Not Found"
        return b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n"
    if "id" not in req:
        return b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
    if fault == "forget":
        sessions.discard(sid)
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
    msg = req.get("params", {}).get("arguments", {}).get("message", "")
    obj = answer(req.get("id"), msg, fault)
    if args.wire == "legacy":
        return sse_bytes(req.get("id"), obj, sid)
    return http_bytes(200, json.dumps(obj, separators=(",", ":")).encode(), fault)


async def serve(reader, writer, args, counter, sessions):
    try:
        while True:
            headers, body = await read_request(reader)
            req = json.loads(body)
            if args.wire != "stateless":
                calls = req.get("method") == "tools/call"
                counter[0] += 1 if calls else 0
                fault = args.fault if calls and args.every and counter[0] % args.every == 0 else None
                writer.write(legacy_answer(headers, req, args, fault, sessions))
                await writer.drain()
                continue
            counter[0] += 1
            fault = args.fault if args.every and counter[0] % args.every == 0 else None
            if fault == "drop":
                break
            if fault == "stall":
                await asyncio.sleep(3600)
            if fault == "delay":
                await asyncio.sleep(args.delay)
            msg = req.get("params", {}).get("arguments", {}).get("message", "")
            status = 500 if fault == "status-500" else 200
            out = json.dumps(answer(req.get("id"), msg, fault), separators=(",", ":")).encode()
            writer.write(http_bytes(status, out, fault))
            await writer.drain()
            if fault == "close":
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--fault", default=None)
    p.add_argument("--every", type=int, default=0)
    p.add_argument("--delay", type=float, default=0.1)
    p.add_argument("--wire", choices=("stateless", "legacy", "legacy-json"), default="stateless")
    args = p.parse_args()
    counter = [0]
    sessions = set()
    server = await asyncio.start_server(lambda r, w: serve(r, w, args, counter, sessions), "127.0.0.1",
                                        args.port)
    # --port 0 takes a free port; say which, for test scripts.
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
