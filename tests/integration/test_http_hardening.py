#!/usr/bin/python3
"""transport_http against the real gateway: framing that must be refused, limits that
hold exactly at their boundary, and connections that must neither stall nor be cut off.

Each case is a regression test for a bug found in review:
  * obs-fold (a header line continued on the next) was joined silently: the classic
    "\\r\\n Content-Length: N" shape let a front end and mcpg disagree on framing;
  * Transfer-Encoding in an HTTP/1.0 request was parsed as chunked;
  * max_header_bytes counted only URL, names and values: the request line's other bytes,
    the separators and any amount of whitespace before a value went uncounted;
  * a duplicated _meta protocolVersion was resolved (the first one checked) instead of
    refused;
  * pipelined large answers to a fast reader stalled the connection for good once the
    paused parser had been resumed its few rounds in one loop turn;
  * a slow but steady reader of a large answer was closed as idle mid-answer;
  * a client that kept sending after a refused body held the lingering close open.
"""
import json
import os
import re
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (IO_TIMEOUT, Conn, Context, Gateway, base_manifest,  # noqa: E402
                     build_request, check, check_eq, expect_error, parse_args, rpc_body,
                     run_tests, send_one, stateless_headers, tool_call_request, wait_for)

MAX_HEADER = 1024
MAX_BODY = 4096
# the slow reader's gateway: a reader that pauses this long is idle; the steady one
# reads at a pace that spreads the answer over READ_IDLES of these
SLOW_IDLE_MS = 3000
READ_IDLES = 3.5


def refused(port, raw, status, what, then=b""):
    """raw (+ then, a request that must not be answered) gets `status`, then a close."""
    with Conn(port) as c:
        c.send(raw + then, ignore_reset=True)
        r = c.read_response()
        check_eq(r.status, status, what + ": status (body %r)" % r.body[:200])
        json.loads(r.body)  # the error body is JSON
        # closed at once or after the lingering drain (TH_LINGER_MS 2 s); kept open it
        # would wait for idle_timeout_ms (60 s)
        check(c.closed_by_peer(IO_TIMEOUT), what + ": the connection must be closed, nothing more answered")


def status_of(port, parts, pause=0.01):
    """Send parts (separate writes), return the status of the one answer."""
    with Conn(port, nodelay=True) as c:
        for p in parts:
            c.send(p, ignore_reset=True)
            time.sleep(pause)
        return c.read_response().status


def section(total, pad_char=b"p"):
    """A GET /healthz whose header section (request line .. final CRLF) is `total` bytes."""
    head = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nAccept:  */*  \r\nE:\r\nX-Pad: "
    tail = b"\r\n\r\n"
    return head + pad_char * (total - len(head) - len(tail)) + tail


def main():
    args = parse_args()
    ctx = Context(args)
    limits = Gateway(ctx, manifest=base_manifest(server={"max_header_bytes": MAX_HEADER,
                                                         "max_body_bytes": MAX_BODY}),
                     name="limits")
    limits.start()
    port = limits.port
    body = rpc_body("tools/list", {}, id=1).encode()
    head = ("POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n")
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"

    # ---- framing ----

    def t_obs_fold():
        # the continuation line reads as a header to a front end that ignores folding
        refused(port, (head + "X-A: a\r\n Content-Length: %d\r\n\r\n" % len(body)).encode() + body,
                400, "a Content-Length folded into the previous header")
        refused(port, ("POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                       "Mcp-Method: tools/\r\n list\r\nContent-Length: %d\r\n\r\n" % len(body)).encode()
                + body, 400, "a folded Mcp-Method")
        refused(port, (head + "Content-Length:\r\n %d\r\n\r\n" % len(body)).encode() + body,
                400, "a folded Content-Length value")
        refused(port, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-A: a\r\n\tb\r\n\r\n", 400,
                "a fold with a tab", then=smuggled)
        # split so that the fold starts a read
        check_eq(status_of(port, [b"GET /healthz HTTP/1.1\r\nX-A: a\r\n", b" b\r\n\r\n"]), 400,
                 "a fold at the start of a read")
        check_eq(status_of(port, [b"GET /healthz HTTP/1.1\r\nX-A: a\r\n ", b"b\r\n\r\n"]), 400,
                 "a fold split after its whitespace")
        # values that are not folds still pass, however they are split
        ok = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nE:\r\nA: a b  \r\n\r\n"
        for i in range(1, len(ok)):
            check_eq(status_of(port, [ok[:i], ok[i:]], pause=0.003), 200, "a plain request split at %d" % i)

    def t_http10_transfer_encoding():
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        refused(port, (head.replace("HTTP/1.1", "HTTP/1.0") + "Connection: keep-alive\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n").encode() + chunked,
                400, "HTTP/1.0 with Transfer-Encoding", then=smuggled)

    def t_refused_shapes():
        refused(port, (head + "Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n"
                       % len(body)).encode() + body, 400, "Content-Length + Transfer-Encoding")
        refused(port, (head + "Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
                       % (len(body), len(body))).encode() + body, 400, "Content-Length twice")
        refused(port, (head + "Content-Length: %d, %d\r\n\r\n" % (len(body), len(body))).encode()
                + body, 400, "a Content-Length list")

    # ---- limits, exactly ----

    def t_header_limit_exact():
        check_eq(status_of(port, [section(MAX_HEADER)]), 200,
                 "a header section of exactly max_header_bytes")
        check_eq(status_of(port, [section(MAX_HEADER + 1)]), 431,
                 "a header section one byte over max_header_bytes")
        for i in (1, 20, 40, 60, MAX_HEADER - 3, MAX_HEADER - 1):
            check_eq(status_of(port, [section(MAX_HEADER)[:i], section(MAX_HEADER)[i:]]), 200,
                     "max_header_bytes exactly, split at %d" % i)
            check_eq(status_of(port, [section(MAX_HEADER + 1)[:i], section(MAX_HEADER + 1)[i:]]),
                     431, "one byte over, split at %d" % i)
        # whitespace before a value is bytes of the section too (llhttp drops it unseen)
        with Conn(port) as c:
            c.send(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Pad:" + b" " * 100000 + b"v\r\n\r\n",
                   ignore_reset=True)
            check_eq(c.read_response().status, 431, "100 kB of whitespace before a value")

    def t_body_limit_exact():
        for n, want in ((MAX_BODY, 200), (MAX_BODY + 1, 413)):
            b = body + b" " * (n - len(body))
            check_eq(status_of(port, [(head + "Content-Length: %d\r\n\r\n" % n).encode() + b]), want,
                     "a %d-byte body (Content-Length)" % n)
            chunked = b"".join(b"%x\r\n%s\r\n" % (len(b[i:i + 1000]), b[i:i + 1000])
                               for i in range(0, n, 1000)) + b"0\r\n\r\n"
            check_eq(status_of(port, [(head + "Transfer-Encoding: chunked\r\n\r\n").encode() + chunked]),
                     want, "a %d-byte body (chunked)" % n)

    def t_linger_bounded():
        # refused at once from Content-Length; the client keeps sending the body anyway
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(0.05)
        s.sendall((head + "Content-Length: 100000000\r\n\r\n").encode())
        t0 = time.monotonic()
        got = b""
        cut = None
        # TH_LINGER_MS (2 s) and a sweep; unbounded, the close would never come
        while time.monotonic() - t0 < 12:
            try:
                s.sendall(b"x" * 8192)
                got += s.recv(65536)
            except socket.timeout:
                pass
            except (BrokenPipeError, ConnectionResetError):
                cut = time.monotonic() - t0
                break
            time.sleep(0.02)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        check(b" 413 " in got, "413 first: %r" % got[:100])
        check(cut is not None, "the lingering close must end within ~2 s although the client "
              "keeps sending (still open after %.1f s)" % (time.monotonic() - t0))
        print("    lingering close cut after %.2f s" % cut)

    # ---- the wire ----

    def t_duplicate_meta_version():
        raw = ('{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{'
               '"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
               '"io.modelcontextprotocol/clientCapabilities":{},'
               '"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}')
        with Conn(port) as c:
            c.send(build_request(port, headers=stateless_headers("tools/list"), body=raw))
            expect_error(c.read_response(), 400, -32602, "a duplicated _meta protocolVersion", id=5)

    # ---- connections that must not stall or be cut off ----

    def t_pipelined_large_answers_fast_reader():
        m = base_manifest(gateway={"workers": 1}, server={"access_log": False},
                          tools=[{"name": "echo", "payload_bytes": 300000}])
        m["modules"][0]["inline_dispatch"] = True
        n = 80
        with Gateway(ctx, manifest=m, name="fastreader") as gw:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            s.connect(("127.0.0.1", gw.port))
            s.sendall(b"".join(tool_call_request(gw.port, "echo", {"message": "m"}, id=i)
                               for i in range(n)))
            s.settimeout(IO_TIMEOUT)  # a stall is a timeout; a slow moment is not
            buf = bytearray(8 << 20)
            data = bytearray()
            answers = 0
            pos = 0
            try:
                while answers < n:
                    k = s.recv_into(buf)
                    if not k:
                        break
                    data += buf[:k]
                    while True:  # count complete answers, checking their order
                        j = data.find(b"\r\n\r\n", pos)
                        if j < 0:
                            break
                        hdr = bytes(data[pos:j]).lower()
                        cl = int(hdr.split(b"content-length:")[1].split(b"\r\n")[0])
                        if j + 4 + cl > len(data):
                            break
                        rpc = json.loads(bytes(data[j + 4:j + 4 + cl]))
                        check_eq(rpc.get("id"), answers, "answer %d in order" % answers)
                        answers += 1
                        pos = j + 4 + cl
                    if pos > (1 << 20):
                        del data[:pos]
                        pos = 0
            except socket.timeout:
                pass
            s.close()
            check_eq(answers, n, "pipelined 300 kB answers read at full speed (the connection "
                     "must not stall)")

    def t_slow_reader_large_answer():
        payload = 12000000
        m = base_manifest(gateway={"workers": 1}, server={"idle_timeout_ms": SLOW_IDLE_MS},
                          tools=[{"name": "echo", "payload_bytes": payload}])
        # what the stalled case waits on: the connections the gateway holds
        m["modules"].append({"name": "prom", "module": "metrics_prometheus"})
        with Gateway(ctx, manifest=m, name="slowreader") as gw:
            def client():
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
                s.connect(("127.0.0.1", gw.port))
                s.sendall(tool_call_request(gw.port, "echo", {"message": "m"}, id=1))
                return s

            def connections():
                """mcpg_http_connections, the scrape's own connection included."""
                r = send_one(gw.port, build_request(gw.port, "GET", "/metrics",
                                                    headers=[("Connection", "close")]))
                check_eq(r.status, 200, "GET /metrics (%r)" % r.body[:200])
                mt = re.search(r"(?m)^mcpg_http_connections (\S+)$", r.body.decode())
                check(mt, "mcpg_http_connections in /metrics")
                return float(mt.group(1))

            # steady: reads paced to a rate at which the answer takes READ_IDLES idle
            # timeouts to read (the socket buffers hold at most a third of it)
            rate = payload / (READ_IDLES * SLOW_IDLE_MS / 1000.0)  # bytes a second
            s = client()
            s.settimeout(IO_TIMEOUT)
            data = b""
            total = None
            t0 = time.monotonic()
            while total is None or len(data) < total:
                d = s.recv(65536)
                if not d:
                    break
                data += d
                if total is None and b"\r\n\r\n" in data:
                    hl = data.index(b"\r\n\r\n") + 4
                    cl = int(data[:hl].lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    total = hl + cl
                time.sleep(max(0.0, t0 + len(data) / rate - time.monotonic()))
            print("    a steady reader took %.1f s for the answer (idle_timeout_ms %d)"
                  % (time.monotonic() - t0, SLOW_IDLE_MS))
            check(total is not None and len(data) == total and total > payload,
                  "a slow but steady reader got %d of %s bytes before the server closed"
                  % (len(data), total))
            # and the connection is still usable
            s.sendall(tool_call_request(gw.port, "echo", {"message": "again"}, id=2))
            more = s.recv(100)
            check(more.startswith(b"HTTP/1.1 200"), "a second call after the large answer: %r"
                  % more[:60])
            s.close()
            wait_for(lambda: connections() <= 1, IO_TIMEOUT, "the steady reader's connection closed")

            # stalled: never reads; the server must still close it (within two looks
            # once its buffers are full; the wait allows for a loaded machine)
            s = client()
            wait_for(lambda: connections() <= 1, 5 * SLOW_IDLE_MS / 1000.0 + IO_TIMEOUT,
                     "the gateway to close a reader that stopped")
            s.settimeout(IO_TIMEOUT)
            got = 0
            try:
                while True:
                    d = s.recv(1 << 20)
                    if not d:
                        break
                    got += len(d)
            except ConnectionResetError:
                pass
            check(got < payload, "a reader that stopped must be closed as idle (got %d bytes)" % got)
            s.close()

    tests = [
        ("obs-fold is refused (400, close), plain values pass at any split", t_obs_fold),
        ("HTTP/1.0 with Transfer-Encoding is refused", t_http10_transfer_encoding),
        ("CL+TE, duplicate CL, CL list are refused", t_refused_shapes),
        ("max_header_bytes holds exactly, at any split, whitespace counted", t_header_limit_exact),
        ("max_body_bytes holds exactly (Content-Length and chunked)", t_body_limit_exact),
        ("a lingering close ends although the client keeps sending", t_linger_bounded),
        ("a duplicated _meta protocolVersion -> 400/-32602", t_duplicate_meta_version),
        ("pipelined large answers to a fast reader do not stall", t_pipelined_large_answers_fast_reader),
        ("a slow but steady reader gets a large answer; a stalled one is closed",
         t_slow_reader_large_answer),
        ("SIGTERM -> exit 0, no sanitizer report", limits.stop),
    ]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
