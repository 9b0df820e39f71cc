"""A REST endpoint for the tests of REST backends: it records every request it
receives (standard library only)."""
import http.server
import json
import threading


class RecordingUpstream:
    """A REST endpoint that records every request it receives and answers
    200 {"ok":true}. The record is kept before the answer goes out, so once
    the gateway has answered a call, its request (if any) is recorded."""

    def __init__(self):
        self.requests = []
        self.lock = threading.Lock()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _record_and_answer(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n) if n else b""
                with rec.lock:
                    rec.requests.append({
                        "line": self.raw_requestline.decode("latin-1").rstrip("\r\n"),
                        "target": self.path,
                        "headers": list(self.headers.items()),
                        "body": body,
                    })
                out = b'{"ok":true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = _record_and_answer
            do_POST = _record_and_answer

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def count(self):
        with self.lock:
            return len(self.requests)

    def since(self, n):
        with self.lock:
            return self.requests[n:]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def bodies(self):
        """Each recorded request's body as JSON ({"unparsed": text} when it is not)."""
        out = []
        for r in self.since(0):
            try:
                out.append(json.loads(r["body"]))
            except ValueError:
                out.append({"unparsed": r["body"].decode("utf-8", "replace")})
        return out
