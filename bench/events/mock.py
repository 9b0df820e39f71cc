#!/usr/bin/env python3
"""A tiny stand-in for the gateway's MCP Events side (docs/events.md), for
bench/events/test-mock.sh: POST /webhooks/events/{source} checks the
Standard Webhooks signature and answers 202 {"status":"accepted"} (or
"duplicate"), POST /mcp events/stream answers a chunked SSE stream that
says notifications/events/active and then every accepted event. Not a
baseline: only the load generator's sockets, framing and judging are tested.

  mock.py PORT SECRET [--fault FAULT]

Faults (one at a time): refuse-every-10th (every 10th post 503), dup-every-50th
(every 50th event told twice to every stream), drop-stream-once (the first
stream is closed after 20 events; its reopening from the cursor must replay
what came after), swap-every-30th (two consecutive events told in the other
order).
"""

import asyncio
import base64
import hashlib
import hmac
import json
import sys

PORT = int(sys.argv[1])
SECRET = sys.argv[2]
FAULT = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--fault" else ""
KEY = base64.b64decode(SECRET[len("whsec_"):])

log = []        # accepted events: (cursor, occurrence)
seen = set()
streams = []    # asyncio.Queue per open stream
posts = [0]
dropped = [False]


def sign(wid, ts, body):
    return "v1," + base64.b64encode(hmac.new(KEY, ("%s.%s." % (wid, ts)).encode() + body,
                                             hashlib.sha256).digest()).decode()


async def read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return method, path, headers, body


def answer(status, obj, reason="OK"):
    body = json.dumps(obj).encode()
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (status, reason.encode(), len(body))) + body


def chunk(text):
    data = text.encode()
    return b"%x\r\n" % len(data) + data + b"\r\n"


def note(method, params):
    return "data: " + json.dumps({"jsonrpc": "2.0", "method": method, "params": params}) + "\n\n"


async def stream(writer, req_id, cursor):
    q = asyncio.Queue()
    start = len(log) if cursor is None else int(cursor)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    writer.write(chunk(": priming\n\n"))
    writer.write(chunk(note("notifications/events/active", {"cursor": str(start), "truncated": False})))
    for c, occ in log[start:]:  # the replay from the cursor
        writer.write(chunk(note("notifications/events/event", occ)))
    streams.append(q)
    told = 0
    first = len(streams) == 1 and not dropped[0]
    try:
        while True:
            texts = [await q.get()]
            while not q.empty():
                texts.append(q.get_nowait())
            # a chunk may carry several events, and an event may be cut over two chunks
            joined = "".join(texts)
            mid = len(joined) // 2
            writer.write(chunk(joined[:mid]) + chunk(joined[mid:]))
            await writer.drain()
            told += len(texts)
            if FAULT == "drop-stream-once" and first and told >= 20:
                dropped[0] = True
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                return
    finally:
        streams.remove(q)


def publish(text):
    for q in streams:
        q.put_nowait(text)


async def handle(reader, writer):
    try:
        while True:
            try:
                method, path, headers, body = await read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if path.startswith("/webhooks/events/"):
                posts[0] += 1
                wid, ts = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
                if headers.get("webhook-signature") != sign(wid, ts, body):
                    writer.write(answer(401, {"error": "webhook-signature: no match"}, "Unauthorized"))
                    continue
                if FAULT == "refuse-every-10th" and posts[0] % 10 == 0:
                    writer.write(answer(503, {"error": "inbox full"}, "Unavailable"))
                    continue
                ev = json.loads(body)
                eid = ev.get("id") or wid
                if eid in seen:
                    writer.write(answer(202, {"status": "duplicate", "eventId": eid}, "Accepted"))
                    continue
                seen.add(eid)
                occ = {"eventId": eid, "name": ev["name"], "timestamp": "2026-12-02T10:00:00.000Z",
                       "data": ev["data"], "cursor": str(len(log) + 1)}
                log.append((len(log) + 1, occ))
                writer.write(answer(202, {"status": "accepted", "eventId": eid}, "Accepted"))
                text = note("notifications/events/event", occ)
                held = getattr(publish, "held", None)
                if FAULT == "swap-every-30th" and len(log) % 30 == 0 and not held:
                    publish.held = (ev["data"]["p"], text)  # told after the same producer's next
                    continue
                publish(text)
                if held and held[0] == ev["data"]["p"]:
                    publish(held[1])
                    publish.held = None
                if FAULT == "dup-every-50th" and len(log) % 50 == 0:
                    publish(text)
            elif path == "/mcp" and method == "POST":
                rpc = json.loads(body)
                if rpc.get("method") != "events/stream" or headers.get("mcp-method") != "events/stream":
                    writer.write(answer(200, {"jsonrpc": "2.0", "id": rpc.get("id"),
                                              "error": {"code": -32601, "message": "no"}}))
                    continue
                await stream(writer, rpc["id"], rpc["params"].get("cursor"))
                return
            else:
                writer.write(answer(404, {"error": "no"}, "Not Found"))
            await writer.drain()
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", PORT)
    async with server:
        await server.serve_forever()


asyncio.run(main())
