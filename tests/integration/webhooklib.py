"""Helpers for the resource webhook tests (test_webhooks.py, test_fleet_news.py):
Standard Webhooks signing, the POST itself, and listeners that count what each
subscriber hears (a legacy session's GET stream, a stateless subscriptions/listen).

A Listener reads its stream on a thread of its own and keeps every message with the
monotonic time it arrived, so a test can count notifications per uri and measure the
time from a webhook's POST to the notification."""
import base64
import hashlib
import hmac
import json
import os
import socket
import threading
import time

from gateway import (Conn, build_request, check, check_eq, fail, rpc_body,  # noqa: F401
                     send_one, stateless_headers)
from test_legacy_wire import initialize, request, request_bytes

UPDATED = "notifications/resources/updated"
LIST_CHANGED = "notifications/resources/list_changed"


def new_secret(nbytes=24):
    return "whsec_" + base64.b64encode(os.urandom(nbytes)).decode()


def signature(secret, wid, ts, body):
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, ("%s.%s." % (wid, ts)).encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


_ids = [0]


def webhook_raw(port, source, body, secret=None, wid=None, ts=None, sig=None, drop=(),
                method="POST", route="resources"):
    """The bytes of one webhook request to /webhooks/<route>/<source>; body is an
    object (JSON-encoded) or bytes. secret signs it unless sig is given; drop
    leaves headers out."""
    if not isinstance(body, (bytes, bytearray)):
        body = json.dumps(body, separators=(",", ":")).encode()
    _ids[0] += 1
    wid = wid or "msg_%d_%d" % (os.getpid(), _ids[0])
    ts = str(int(time.time())) if ts is None else str(ts)
    if sig is None and secret:
        sig = signature(secret, wid, ts, body)
    hdrs = [("Content-Type", "application/json"), ("webhook-id", wid),
            ("webhook-timestamp", ts), ("webhook-signature", sig or "")]
    hdrs = [(k, v) for k, v in hdrs if k not in drop]
    return build_request(port, method, "/webhooks/%s/%s" % (route, source), hdrs, body)


def post_webhook(port, source, body, secret=None, **kw):
    r = send_one(port, webhook_raw(port, source, body, secret, **kw))
    return r, (json.loads(r.body) if r.body else None)


class Listener(threading.Thread):
    """One open stream; every JSON-RPC message it carries, with its arrival time."""

    def __init__(self, port, raw, name):
        super().__init__(daemon=True, name=name)
        self.port, self.raw, self.label = port, raw, name
        self.msgs = []  # (monotonic time, message)
        self.lock = threading.Lock()
        self.opened = threading.Event()
        self.closed = False
        self.error = None
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=0.5)

    def run(self):
        buf = b""
        try:
            self.sock.sendall(self.raw)
            while b"\r\n\r\n" not in buf:
                buf += self._recv()
            head, _, buf = buf.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise AssertionError("%s: the stream did not open: %r" % (self.label, head[:200]))
            self.opened.set()
            self._events(buf)
        except Exception as e:  # reported by the test through .error
            if not self.closed:
                self.error = e
            self.opened.set()

    def _recv(self):
        while not self.closed:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                raise ConnectionError("%s: closed by the server" % self.label)
            return chunk
        raise ConnectionError("closed")

    def _events(self, buf):
        """De-chunk, split into SSE events, keep each data line's message."""
        text = b""
        while True:
            while b"\r\n" not in buf:
                buf += self._recv()
            line, _, buf = buf.partition(b"\r\n")
            size = int(line.split(b";")[0], 16)
            while len(buf) < size + 2:
                buf += self._recv()
            text += buf[:size]
            buf = buf[size + 2:]
            now = time.monotonic()
            while b"\n\n" in text:
                ev, _, text = text.partition(b"\n\n")
                for ln in ev.split(b"\n"):
                    if ln.startswith(b"data:") and ln[5:].strip():  # the priming event has none
                        with self.lock:
                            self.msgs.append((now, json.loads(ln[5:].strip())))

    def notes(self, method=UPDATED, uri=None):
        """Arrival times of the messages of method (and params.uri)."""
        with self.lock:
            return [t for t, m in self.msgs if m.get("method") == method and
                    (uri is None or m.get("params", {}).get("uri") == uri)]

    def uris(self):
        with self.lock:
            return sorted({m["params"]["uri"] for _, m in self.msgs if m.get("method") == UPDATED})

    def wait_open(self, timeout=10):
        self.start()
        check(self.opened.wait(timeout), "%s: the stream opened" % self.label)
        check(self.error is None, "%s: %r" % (self.label, self.error))
        return self

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
        self.join(5)


def legacy_listener(port, uris, name="legacy"):
    """A legacy session subscribed to uris (resources/subscribe), its GET stream open."""
    _, sid = initialize(port)
    for i, uri in enumerate(uris):
        r = request(port, body={"jsonrpc": "2.0", "id": 10 + i, "method": "resources/subscribe",
                                "params": {"uri": uri}}, session=sid)
        check_eq(r.status, 200, "%s: resources/subscribe %s (%r)" % (name, uri, r.body[:200]))
        check('"result":{}' in r.body.decode(), "%s: subscribed to %s: %r" % (name, uri, r.body[:200]))
    raw = request_bytes(port, "GET", session=sid, accept="text/event-stream")
    return Listener(port, raw, name).wait_open()


def stateless_listener(port, uris, list_changed=False, name="listen"):
    """A stateless subscriptions/listen for uris; open once acknowledged."""
    body = rpc_body("subscriptions/listen",
                    {"notifications": {"resourceSubscriptions": uris,
                                       "resourcesListChanged": list_changed}}, id=name)
    raw = build_request(port, headers=stateless_headers("subscriptions/listen"), body=body)
    lst = Listener(port, raw, name).wait_open()
    deadline = time.time() + 10
    while time.time() < deadline:
        if lst.notes("notifications/subscriptions/acknowledged"):
            return lst
        time.sleep(0.01)
    fail("%s: no acknowledgement" % name)


def wait_counts(want, timeout=10.0):
    """Until each listener's count of UPDATED for uri reaches want[(listener, uri)]."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all(len(lst.notes(UPDATED, uri)) >= n for (lst, uri), n in want.items()):
            return
        time.sleep(0.01)


def percentile(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]
