#!/usr/bin/python3
"""A hostile MCP server over Streamable HTTP, for test_hostile_upstream.py (standard
library only). It speaks the wire well enough to be federated (server/discover on the
stateless wire, or initialize and a session on the legacy one; tools/list; echo), and
answers each hostile tool's tools/call badly, one mode per tool:

  endless_sse      200 text/event-stream: notifications/message events (16 KiB each)
                   and comments, as fast as every 5 ms, forever; never the response
  huge_json        200 application/json announcing 64 MiB and sending it, one string
  huge_sse         200 text/event-stream: one data line that never ends
  endless_headers  a status line, then header lines forever (the section never ends)
  stalled_headers  a status line and one header, then nothing (the section never ends)
  slow_drip        a valid answer (Content-Length set), one byte every 50 ms (~10 s)

--hostile-lists N: the first N tools/list requests get the same treatment (mode
endless_list: an SSE stream of comments that never brings the list). --get-flood: on the
legacy wire the GET stream (what belongs to no request) is a flood of log messages,
two thousand a second, until the gateway closes it.

A hostile answer goes on until the gateway closes the connection (or 60 s pass). For
each one --record FILE gets a JSON line {"mode", "id", "bytes", "ended", "after_s"}:
ended is "closed" when the gateway closed the connection, "finished" when the answer
was sent whole, "gave_up" after 60 s. --port-file FILE gets the port; --wire
stateless|legacy (default legacy)."""
import argparse
import json
import os
import select
import signal
import socket
import threading
import time
import uuid

HOSTILE = ["endless_sse", "huge_json", "huge_sse", "endless_headers", "stalled_headers",
           "slow_drip"]
GIVE_UP_S = 60.0


class Closed(Exception):
    """The gateway closed the connection."""


class GaveUp(Exception):
    """GIVE_UP_S passed (or a write blocked that long): the gateway neither read nor closed."""


class Answer:
    """One connection's hostile answer: writes that notice a peer gone."""

    def __init__(self, sock, mode, id):
        self.sock = sock
        self.mode = mode
        self.id = id
        self.bytes = 0
        self.t0 = time.monotonic()

    def peer_gone(self):
        r, _, _ = select.select([self.sock], [], [], 0)
        if not r:
            return False
        try:
            return self.sock.recv(4096) == b""
        except OSError:
            return True

    def send(self, data):
        if self.peer_gone():
            raise Closed()
        try:
            self.sock.sendall(data)
        except socket.timeout:
            raise GaveUp()
        except OSError:
            raise Closed()
        self.bytes += len(data)

    def chunk(self, data):
        self.send(b"%x\r\n%s\r\n" % (len(data), data))

    def wait(self, seconds):
        """Sleep, but notice the peer closing meanwhile."""
        r, _, _ = select.select([self.sock], [], [], seconds)
        if r and self.peer_gone():
            raise Closed()

    def expired(self):
        return time.monotonic() - self.t0 > GIVE_UP_S


def json_body(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


class Server:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.rec = open(args.record, "a", buffering=1) if args.record else None
        self.lists_left = args.hostile_lists

    def record(self, obj):
        """One line a hostile answer, whole (line-buffered, one write under the lock)."""
        if self.rec:
            line = json.dumps(obj) + "\n"
            with self.lock:
                self.rec.write(line)

    def result(self, id, res):
        if self.args.wire == "stateless":
            res = dict(res, resultType="complete")
        return {"jsonrpc": "2.0", "id": id, "result": res}

    def tools(self):
        return [{"name": n, "description": "hostile " + n, "inputSchema": {"type": "object"}}
                for n in ["echo"] + HOSTILE]

    # -- the hostile answers: each runs until the gateway closes or it gives up --

    def endless_sse(self, a):
        a.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        note = json_body({"jsonrpc": "2.0", "method": "notifications/message",
                          "params": {"level": "info", "data": "x" * 16384}})
        while not a.expired():
            a.chunk(b"data: " + note + b"\n\n: still going\n\n")
            a.wait(0.005)

    def huge_json(self, a):
        total = 64 << 20
        a.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % total)
        head = b'{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"' % (
            json.dumps(a.id).encode())
        a.send(head)
        piece = b"x" * 65536
        left = total - len(head)
        while left > 0 and not a.expired():
            a.send(piece[:left])
            left -= min(left, len(piece))
        return "finished"

    def huge_sse(self, a):
        a.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        a.chunk(b'data: {"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text",'
                b'"text":"' % json.dumps(a.id).encode())
        piece = b"x" * 65536
        while not a.expired():
            a.chunk(piece)

    def endless_list(self, a):
        a.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        while not a.expired():
            a.chunk(b": the list is coming\n\n")
            a.wait(0.005)

    def endless_headers(self, a):
        a.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        n = 0
        while not a.expired():
            a.send(b"".join(b"X-Pad-%d: %s\r\n" % (n + i, b"y" * 100) for i in range(10)))
            n += 10
            a.wait(0.001)

    def stalled_headers(self, a):
        a.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        while not a.expired():
            a.wait(0.1)

    def slow_drip(self, a):
        body = json_body(self.result(a.id, {"content": [{"type": "text",
                                                          "text": "dripped " + "z" * 150}]}))
        a.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body))
        for i in range(len(body)):
            if a.expired():
                return None
            a.send(body[i:i + 1])
            a.wait(0.05)
        return "finished"

    def hostile(self, sock, mode, id):
        a = Answer(sock, mode, id)
        sock.settimeout(GIVE_UP_S)
        try:
            ended = getattr(self, mode)(a) or "gave_up"
        except Closed:
            ended = "closed"
        except GaveUp:
            ended = "gave_up"
        self.record({"mode": mode, "id": id, "bytes": a.bytes, "ended": ended,
                     "after_s": round(time.monotonic() - a.t0, 3)})

    # -- the well-behaved part --

    def answer(self, msg, hdrs):
        """(status, extra headers, body object or None, hostile mode or None)."""
        id, method = msg.get("id"), msg.get("method")
        params = msg.get("params") or {}
        stateless = self.args.wire == "stateless"
        if "id" not in msg or method is None:
            return 202, [], None, None
        if method == "server/discover":
            if not stateless:
                return 400, [], {"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32000, "message": "Bad Request: Server not initialized"}}, None
            return 200, [], self.result(id, {"supportedVersions": ["2026-07-28"],
                                             "capabilities": {"tools": {}},
                                             "ttlMs": 0, "cacheScope": "private"}), None
        if method == "initialize":
            return 200, [("Mcp-Session-Id", uuid.uuid4().hex)], self.result(id, {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"}}), None
        if method == "subscriptions/listen":
            return 200, [], None, "listen"
        if method == "tools/list":
            with self.lock:
                hostile = self.lists_left > 0
                self.lists_left -= hostile
            if hostile:
                return 200, [], None, "endless_list"
            return 200, [], self.result(id, {"tools": self.tools()}), None
        if method == "tools/call":
            name = params.get("name")
            if name == "echo":
                text = "echo: %s" % (params.get("arguments") or {}).get("message", "")
                return 200, [], self.result(id, {"content": [{"type": "text", "text": text}]}), None
            if name in HOSTILE:
                return 200, [], None, name
        return 200, [], {"jsonrpc": "2.0", "id": id,
                         "error": {"code": -32601, "message": "no %s here" % method}}, None

    def listen(self, sock):
        """The stateless wire's subscriptions/listen: held open with comments."""
        a = Answer(sock, "listen", None)
        try:
            a.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n")
            while True:
                a.chunk(b": idle\n\n")
                a.wait(1.0)
        except Closed:
            pass

    def get_flood(self, sock):
        """The session wire's GET stream: log messages outside any call, for ever."""
        a = Answer(sock, "get_flood", None)
        note = json_body({"jsonrpc": "2.0", "method": "notifications/message",
                          "params": {"level": "info", "data": "flood"}})
        try:
            a.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n")
            while not a.expired():
                a.chunk(b"".join(b"data: " + note + b"\n\n" for _ in range(20)))
                a.wait(0.01)
        except (Closed, GaveUp):
            pass

    def connection(self, sock):
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                verb = lines[0].split(" ")[0]
                hdrs = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    hdrs[k.strip().lower()] = v.strip()
                n = int(hdrs.get("content-length") or 0)
                while len(buf) < n:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buf += data
                raw, buf = buf[:n], buf[n:]
                if verb == "GET" and self.args.get_flood and self.args.wire == "legacy":
                    return self.get_flood(sock)
                if verb != "POST":
                    sock.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\n"
                                 b"Content-Length: 0\r\n\r\n")
                    continue
                try:
                    msg = json.loads(raw)
                except ValueError:
                    sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    continue
                status, extra, body, mode = self.answer(msg, hdrs)
                if mode == "listen":
                    return self.listen(sock)
                if mode:
                    return self.hostile(sock, mode, msg.get("id"))
                data = json_body(body) if body is not None else b""
                out = "HTTP/1.1 %d X\r\nContent-Length: %d\r\n" % (status, len(data))
                if body is not None:
                    out += "Content-Type: application/json\r\n"
                for k, v in extra:
                    out += "%s: %s\r\n" % (k, v)
                sock.sendall(out.encode() + b"\r\n" + data)
        except OSError:
            return
        finally:
            sock.close()

    def serve(self):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", self.args.port))
        ls.listen(128)
        if self.args.port_file:
            with open(self.args.port_file + ".tmp", "w") as f:
                f.write(str(ls.getsockname()[1]))
            os.rename(self.args.port_file + ".tmp", self.args.port_file)
        while True:
            s, _ = ls.accept()
            threading.Thread(target=self.connection, args=(s,), daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--wire", choices=("legacy", "stateless"), default="legacy")
    ap.add_argument("--record")
    ap.add_argument("--hostile-lists", type=int, default=0)
    ap.add_argument("--get-flood", action="store_true")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    Server(args).serve()


if __name__ == "__main__":
    main()
