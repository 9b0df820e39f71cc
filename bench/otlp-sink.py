#!/usr/bin/env python3
"""An OTLP/HTTP sink for bench/otlp.sh: answers every POST 200 at once, after reading
its body, and counts the POSTs and their bytes (printed at SIGTERM). It decodes
nothing: the benchmark measures the gateway, not the collector.

    bench/otlp-sink.py PORT"""
import http.server
import signal
import sys

posts = 0
body_bytes = 0


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        global posts, body_bytes
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        posts += 1
        body_bytes += n
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def on_term(signum, frame):
    print("otlp-sink: %d POSTs, %d bytes" % (posts, body_bytes), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_term)
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
