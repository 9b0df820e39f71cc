#!/usr/bin/env python3
"""Raw-socket probe of transport_http in the real gateway (stdlib only).

    wire_probe.py --url 127.0.0.1:8787              probe a running gateway
    wire_probe.py --mcpg build/bin/mcpg --config conf/bench.json
                                                    start one on a free port, probe, stop it
    wire_probe.py --serve build/bin/test_th_http    the transport alone in the SDK's fake
                                                    host (`test_th_http --serve` prints its
                                                    port), probed and stopped the same way

Sends what curl cannot: pipelined batches, requests split at every byte,
malformed framing, oversized headers and bodies, a client that leaves with
a call in flight. Expects an `echo` tool answering like backend_mock's.
Exits 1 on the first failed check (after stopping what it started).
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, file=sys.stderr)


def call_request(rid, tool="echo", extra=b"", args=None):
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": tool, "arguments": args or {"message": "m%s" % rid},
                                  "_meta": META}}, separators=(",", ":")).encode()
    head = (b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            b"Mcp-Method: tools/call\r\nMcp-Name: " + tool.encode() + b"\r\n" + extra +
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    return head + body


class Conn:
    def __init__(self, addr):
        self.s = socket.create_connection(addr, timeout=5)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False

    def send(self, data):
        self.s.sendall(data)

    def _fill(self, timeout):
        self.s.settimeout(timeout)
        try:
            d = self.s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            d = b"" if not isinstance(sys.exc_info()[1], socket.timeout) else None
        if d is None:
            return False
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def response(self, timeout=5):
        """(status, headers dict lower-cased, body bytes) or None."""
        while b"\r\n\r\n" not in self.buf:
            if self.eof or not self._fill(timeout):
                return None
        head, rest = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for ln in lines[1:]:
            k, v = ln.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
        n = int(hdrs.get("content-length", "0"))
        while len(rest) < n:
            if self.eof or not self._fill(timeout):
                return None
            rest = self.buf.split(b"\r\n\r\n", 1)[1]
        self.buf = rest[n:]
        return status, hdrs, rest[:n]

    def closed_by_peer(self, timeout=3):
        end = time.time() + timeout
        while not self.eof and time.time() < end:
            self._fill(max(0.01, end - time.time()))
        return self.eof

    def close(self):
        self.s.close()


def rpc(body):
    return json.loads(body.decode())


def probe(addr):
    # curl-like basics
    c = Conn(addr)
    c.send(call_request(1))
    st, h, b = c.response()
    check(st == 200 and rpc(b)["result"]["resultType"] == "complete", "echo call")
    check("Echo: m1" in b.decode(), "echo text")
    c.send(b"GET /healthz HTTP/1.1\r\n\r\n")
    st, h, b = c.response()
    check(st == 200 and json.loads(b) == {"status": "ok"}, "healthz on the same connection")

    # pipelining: 100 calls in one write, answered in order
    c.send(b"".join(call_request(1000 + i) for i in range(100)))
    ids = []
    for _ in range(100):
        r = c.response()
        if not r:
            break
        ids.append(rpc(r[2]).get("id"))
    check(ids == list(range(1000, 1100)), "100 pipelined calls answered in order (%d answers)" % len(ids))
    c.close()

    # split at every byte
    c = Conn(addr)
    data = call_request(7) + b"GET /readyz HTTP/1.1\r\n\r\n"
    for i in range(len(data)):
        c.send(data[i:i + 1])
        if i % 50 == 0:
            time.sleep(0.001)
    r1, r2 = c.response(), c.response()
    check(r1 and rpc(r1[2])["id"] == 7 and r2 and r2[0] == 200, "request split at every byte")
    c.close()

    # wire errors
    def one(req, timeout=5):
        c = Conn(addr)
        c.send(req)
        r = c.response(timeout)
        closed = c.closed_by_peer(1) if r and r[1].get("connection") == "close" else None
        c.close()
        return r, closed

    r, _ = one(b"POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 3\r\n\r\n{x}")
    check(r[0] == 400 and rpc(r[2])["error"]["code"] == -32700, "invalid JSON -> 400/-32700")
    r, _ = one(call_request(2, tool="echo").replace(b"Mcp-Name: echo", b"Mcp-Name: other"))
    check(r[0] == 400 and rpc(r[2])["error"]["code"] == -32020, "Mcp-Name mismatch -> -32020")
    r, _ = one(call_request(3, tool="nosuch"))
    check(r[0] == 200 and rpc(r[2])["error"]["code"] == -32602, "unknown tool -> 200/-32602")
    r, _ = one(b"PUT /mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    check(r[0] == 405 and r[1].get("allow") == "GET, POST, DELETE", "PUT /mcp -> 405 Allow: GET, POST, DELETE")
    r, _ = one(b"GET /mcp HTTP/1.1\r\nAccept: text/event-stream\r\n\r\n")
    check(r[0] == 400 and rpc(r[2])["error"]["code"] == -32000, "GET /mcp without a session -> 400")
    r, closed = one(b"BLAH\x00 / HTTP/1.1\r\n\r\n")
    check(r and r[0] == 400 and closed, "malformed HTTP -> 400 then close")
    r, closed = one(b"GET /healthz HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n")
    check(r and r[0] == 431 and closed, "20 kB header -> 431 then close")
    r, closed = one(b"POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n")
    check(r and r[0] == 413 and closed, "5 MB Content-Length -> 413 then close")
    c = Conn(addr)
    c.send(b"POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    try:
        for _ in range(80):
            c.send(b"10000\r\n" + b" " * 65536 + b"\r\n")
    except OSError:
        pass
    r = c.response()
    check(r and r[0] == 413, "chunked body over 4 MiB -> 413")
    c.close()
    r, closed = one(call_request(4, extra=b"Connection: close\r\n"))
    check(r[0] == 200 and closed, "Connection: close honoured")
    r, closed = one(b"GET /healthz HTTP/1.0\r\n\r\n")
    c = Conn(addr)
    c.send(b"GET /healthz HTTP/1.0\r\n\r\n")
    check(c.response()[0] == 200 and c.closed_by_peer(), "HTTP/1.0 answered and closed")
    c.close()

    # a client that leaves right after sending: nothing breaks
    for i in range(20):
        c = Conn(addr)
        c.send(b"".join(call_request(5000 + i * 10 + k) for k in range(5)))
        c.close()
    c = Conn(addr)
    c.send(call_request(9))
    r = c.response()
    check(r and r[0] == 200, "still serving after clients left mid-call")
    c.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_gateway(a):
    """The real gateway on a free port: (process, address)."""
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="th-probe.")
    env = dict(os.environ, MCPG_AUDIT_FILE=os.path.join(tmp, "audit.jsonl"))
    err = open(os.path.join(tmp, "stderr"), "wb")
    proc = subprocess.Popen([a.mcpg, "--config", a.config, "--listen", "127.0.0.1:%d" % port],
                            env=env, stdout=err, stderr=err)
    addr = ("127.0.0.1", port)
    for _ in range(100):
        try:
            socket.create_connection(addr, timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, addr


def start_served(a):
    """`PROGRAM --serve`, which prints the port it listens on: (process, address)."""
    proc = subprocess.Popen([a.serve, "--serve"], stdout=subprocess.PIPE)
    line = proc.stdout.readline().decode().strip()
    if not line.isdigit():
        proc.kill()
        proc.wait()
        raise SystemExit("%s --serve printed no port: %r" % (a.serve, line))
    return proc, ("127.0.0.1", int(line))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", help="HOST:PORT of a running gateway")
    ap.add_argument("--mcpg")
    ap.add_argument("--config")
    ap.add_argument("--serve", help="a program that serves with --serve and prints its port")
    a = ap.parse_args()
    proc = None
    try:
        if a.url:
            host, port = a.url.rsplit(":", 1)
            addr = (host, int(port))
        elif a.serve:
            proc, addr = start_served(a)
        else:
            proc, addr = start_gateway(a)
        probe(addr)
        if proc:
            check(proc.poll() is None, "gateway still running")
    finally:
        if proc and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(15)
                check(rc == 0, "exited 0 on SIGTERM (rc %s)" % rc)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                check(False, "did not exit on SIGTERM")
    print("wire_probe: %s" % ("ok" if not FAILS else "%d failure(s)" % len(FAILS)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
