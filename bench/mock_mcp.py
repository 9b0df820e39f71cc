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

usage: mock_mcp.py --port P [--fault KIND --every N]   (P 0: a free port, printed on stdout)
"""
import argparse
import asyncio
import json


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
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return await reader.readexactly(length) if length else b""


async def serve(reader, writer, args, counter):
    try:
        while True:
            body = await read_request(reader)
            counter[0] += 1
            fault = args.fault if args.every and counter[0] % args.every == 0 else None
            if fault == "drop":
                break
            if fault == "stall":
                await asyncio.sleep(3600)
            req = json.loads(body)
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
    args = p.parse_args()
    counter = [0]
    server = await asyncio.start_server(lambda r, w: serve(r, w, args, counter), "127.0.0.1", args.port)
    # --port 0 takes a free port; say which, for test scripts.
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
