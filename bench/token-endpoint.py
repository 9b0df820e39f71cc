#!/usr/bin/env python3
"""A token endpoint for bench/upstream-credentials.sh: every POST gets a new opaque access
token of type Bearer that lives an hour; the number of requests goes to stderr as they
come (a benchmark with a warm cache asks once). Standard library only.

    bench/token-endpoint.py PORT"""
import http.server
import json
import os
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    count = 0

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Handler.count += 1
        sys.stderr.write("token-endpoint: request %d\n" % Handler.count)
        body = json.dumps({"access_token": os.urandom(24).hex(), "token_type": "Bearer",
                           "expires_in": 3600}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


if __name__ == "__main__":
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
