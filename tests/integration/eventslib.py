"""What the MCP Events tests share: posting an event to POST /webhooks/events/{source},
an events/stream reader (stateless or in a legacy session), events/poll, and the judge
of what a stream heard (each id once, in order)."""
import json
import time

from gateway import check, check_eq, send_one, stateless_request
from webhooklib import Listener, webhook_raw

EVENT = "notifications/events/event"
ACTIVE = "notifications/events/active"
HEARTBEAT = "notifications/events/heartbeat"
SUB_ID = "io.modelcontextprotocol/subscriptionId"


def events_manifest(secret_env, types=("order.created", "order.paid", "audit.note"),
                    sources=None, **settings):
    """The top-level "events" section: the types, and the source "shop" that may post
    the order types (sources overrides); settings are the section's other keys."""
    sec = {"types": [{"name": t, "description": "the %s events" % t} for t in types],
           "sources": sources if sources is not None else
           {"shop": {"secret_env": secret_env, "types": [t for t in types if t.startswith("order.")]}}}
    sec.update(settings)
    return sec


def post_event(port, source, body, secret, **kw):
    """(Response, parsed body) of one signed post."""
    r = send_one(port, webhook_raw(port, source, body, secret, route="events", **kw))
    try:
        parsed = json.loads(r.body) if r.body else None
    except ValueError:
        parsed = None
    return r, parsed


def post_ok(port, source, body, secret, what, **kw):
    r, b = post_event(port, source, body, secret, **kw)
    check_eq(r.status, 202, "%s: a post is taken (%r)" % (what, r.body[:200]))
    check_eq(b.get("status"), "accepted", "%s: 202 says accepted" % what)
    return b


def poll(port, name, cursor=None, max_events=None, id=1):
    params = {"name": name, "cursor": cursor}
    if max_events is not None:
        params["maxEvents"] = max_events
    r = send_one(port, stateless_request(port, "events/poll", params, id=id))
    return r, r.rpc()


def stream_raw(port, name, cursor=None, id="s1"):
    return stateless_request(port, "events/stream", {"name": name, "cursor": cursor}, id=id)


class EventStream(Listener):
    """An open events/stream: the events it heard, in arrival order."""

    def events(self):
        with self.lock:
            return [m["params"] for _, m in self.msgs if m.get("method") == EVENT]

    def times(self):
        with self.lock:
            return [(t, m["params"]) for t, m in self.msgs if m.get("method") == EVENT]

    def of(self, method):
        with self.lock:
            return [m["params"] for _, m in self.msgs if m.get("method") == method]

    def ids(self):
        return [e["eventId"] for e in self.events()]


def open_stream(port, name, cursor=None, id="s1", label=None):
    """Open once notifications/events/active came (a gateway that has just started
    answers 503 until it has read where the log is: asked again, as a client would)."""
    deadline = time.time() + 10
    while True:
        lst = EventStream(port, stream_raw(port, name, cursor, id), label or "stream-%s" % id)
        lst.start()
        check(lst.opened.wait(10), "%s: the stream opened" % lst.label)
        if lst.error is None or "503" not in str(lst.error) or time.time() > deadline:
            break
        lst.close()
        time.sleep(0.1)
    check(lst.error is None, "%s: %r" % (lst.label, lst.error))
    deadline = time.time() + 10
    while time.time() < deadline and not lst.of(ACTIVE):
        check(lst.error is None, "%s: %r" % (lst.label, lst.error))
        time.sleep(0.01)
    check(lst.of(ACTIVE), "%s: notifications/events/active came" % lst.label)
    return lst


def wait_events(streams, n, timeout=10.0):
    """Until every stream heard at least n events."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all(len(s.events()) >= n for s in streams):
            return
        time.sleep(0.02)


def judge_once_in_order(stream, want_ids, what):
    """The stream heard exactly want_ids, in that order, each once."""
    got = stream.ids()
    dup = len(got) - len(set(got))
    missing = [i for i in want_ids if i not in set(got)]
    extra = [i for i in got if i not in set(want_ids)]
    check(not dup, "%s: no event twice (%d twice)" % (what, dup))
    check(not missing, "%s: no event missed (%d missed, first %r)" % (what, len(missing), missing[:3]))
    check(not extra, "%s: nothing it was not owed (%r)" % (what, extra[:3]))
    check_eq(got, list(want_ids), "%s: in the order they were accepted" % what)
    cursors = [int(e["cursor"]) for e in stream.events()]
    check(cursors == sorted(cursors) and len(set(cursors)) == len(cursors),
          "%s: cursors increase" % what)
