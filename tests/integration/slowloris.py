#!/usr/bin/python3
"""Slow clients for test_slowloris.py (standard library only), in a process of its own
so their sending does not share the measuring client's interpreter.

--header N connections trickle a request's header section one byte at a time and never
finish it; --body M connections send a whole header section (Content-Length: 1000000)
and then trickle the body a byte at a time. Each connection sends one byte every
--interval-ms, the connections spread over that interval. Prints "ready" once every
connection is open and has sent its first byte, then runs until each is closed by the
server or --max-s passes, and prints one JSON line: a list of
{"kind", "first", "closed", "got"} per connection (first byte and close as
time.monotonic(), which is the system's CLOCK_MONOTONIC, so comparable with the test's
clock; closed null if still open; got: bytes the server sent).
"""
import argparse
import json
import selectors
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--header", type=int, default=300)
    ap.add_argument("--body", type=int, default=0)
    ap.add_argument("--interval-ms", type=int, default=100)
    ap.add_argument("--max-s", type=float, default=20)
    a = ap.parse_args()

    head = ("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            % a.port).encode()
    conns = []
    sel = selectors.DefaultSelector()
    for i in range(a.header + a.body):
        s = socket.create_connection(("127.0.0.1", a.port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        kind = "header" if i < a.header else "body"
        if kind == "header":
            data, pos = head + b"X-Slow: ", 0
        else:
            s.sendall(head + b"Content-Length: 1000000\r\n\r\n")
            data, pos = b"", 0
        s.setblocking(False)
        c = {"sock": s, "kind": kind, "data": data, "pos": pos, "first": None,
             "closed": None, "got": 0}
        conns.append(c)
        sel.register(s, selectors.EVENT_READ, c)

    def close(c):
        if c["closed"] is None:
            c["closed"] = time.monotonic()
            sel.unregister(c["sock"])
            c["sock"].close()

    def send_byte(c):
        if c["pos"] < len(c["data"]):
            b = c["data"][c["pos"]:c["pos"] + 1]
        else:
            b = b"a" if c["kind"] == "header" else b"x"
        try:
            if c["sock"].send(b) == 1:
                c["pos"] += 1
                if c["first"] is None:
                    c["first"] = time.monotonic()
        except BlockingIOError:
            pass
        except OSError:
            close(c)

    for c in conns:  # every connection's first byte, then "ready"
        send_byte(c)
    sys.stdout.write("ready\n")
    sys.stdout.flush()

    slots = 10
    tick = a.interval_ms / 1000.0 / slots
    t_end = time.monotonic() + a.max_s
    k = 0
    next_tick = time.monotonic()
    while time.monotonic() < t_end and any(c["closed"] is None for c in conns):
        now = time.monotonic()
        if now >= next_tick:
            for i in range(k % slots, len(conns), slots):
                if conns[i]["closed"] is None:
                    send_byte(conns[i])
            k += 1
            next_tick += tick
        for key, _ in sel.select(max(0.0, next_tick - time.monotonic())):
            c = key.data
            try:
                chunk = c["sock"].recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if chunk:
                c["got"] += len(chunk)
            else:
                close(c)
    out = [{"kind": c["kind"], "first": c["first"], "closed": c["closed"], "got": c["got"]}
           for c in conns]
    for c in conns:
        if c["closed"] is None:
            c["sock"].close()
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
