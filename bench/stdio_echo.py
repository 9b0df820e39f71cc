#!/usr/bin/env python3
"""A minimal MCP server on stdin/stdout (one JSON-RPC message per line) with
one tool, `echo`, which answers its `message` argument as text. bench/proxy.sh
puts it behind mcpg (backend_mcp with `command`) and behind mcp-proxy, so both
front the same stdio server.

It reads whatever stdin holds, answers every complete line, and writes all the
answers of one read with one write, so a front that sends many calls at once
is not slowed by a write per line. With --count-file PATH it keeps
"<pid> <tools/call answered>" in that file (rewritten at most every 50 ms
while calls come, within 50 ms of the last one, and at the end): how the script checks that the calls reached it and whose
CPU it reads.

    python3 bench/stdio_echo.py [--count-file PATH]
"""

import json
import os
import select
import sys
import time

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
TOOLS = {"tools": [{
    "name": "echo",
    "description": "Answers its message",
    "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}},
                    "required": ["message"]},
}]}


def dump(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def answer(msg):
    """The reply line to one message (None for a notification or a reply), and whether it was a call."""
    if not isinstance(msg, dict) or "method" not in msg:
        return None, False
    if "id" not in msg:
        return None, False  # notifications/initialized, cancelled: nothing to say
    rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "tools/call":
        args = params.get("arguments") or {}
        if params.get("name") != "echo":
            return dump({"jsonrpc": "2.0", "id": rid,
                         "error": {"code": -32602, "message": "unknown tool"}}), False
        text = args.get("message", "")
        return dump({"jsonrpc": "2.0", "id": rid,
                     "result": {"content": [{"type": "text", "text": str(text)}]}}), True
    if method == "initialize":
        asked = params.get("protocolVersion")
        return dump({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stdio-echo", "version": "1.0"}}}), False
    if method == "tools/list":
        return dump({"jsonrpc": "2.0", "id": rid, "result": TOOLS}), False
    if method == "ping":
        return dump({"jsonrpc": "2.0", "id": rid, "result": {}}), False
    return dump({"jsonrpc": "2.0", "id": rid,
                 "error": {"code": -32601, "message": "method not found: %s" % method}}), False


def main():
    count_path = None
    argv = sys.argv[1:]
    if argv[:1] == ["--count-file"] and len(argv) == 2:
        count_path = argv[1]
    elif argv:
        sys.exit("usage: stdio_echo.py [--count-file PATH]")
    count_fd = os.open(count_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if count_path else None
    pid, calls, last = os.getpid(), 0, 0.0

    def record():
        if count_fd is not None:  # fixed width: rewriting in place needs no truncation
            os.pwrite(count_fd, b"%d %020d\n" % (pid, calls), 0)

    record()
    pending, dirty = b"", False
    while True:
        if dirty and not select.select([0], [], [], 0.05)[0]:
            record()  # quiet for 50 ms: the count is exact before the next read
            dirty = False
            continue
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        out = []
        for line in lines:
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                out.append(dump({"jsonrpc": "2.0", "id": None,
                                 "error": {"code": -32700, "message": "parse error"}}))
                continue
            reply, was_call = answer(msg)
            calls += was_call
            dirty = dirty or was_call
            if reply:
                out.append(reply)
        data = b"".join(out)
        while data:
            data = data[os.write(1, data):]
        now = time.monotonic()
        if dirty and now - last >= 0.05:
            record()
            last, dirty = now, False
    record()


if __name__ == "__main__":
    main()
