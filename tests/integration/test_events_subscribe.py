#!/usr/bin/python3
"""events/subscribe on one node, webhook delivery to a receiver of the test's own (a
Python HTTP server on a free loopback port) that checks every delivery's Standard
Webhooks signature: events posted to POST /webhooks/events/{source} reach a
subscription in order, each once, with webhook-id = the eventId and
X-MCP-Subscription-Id = the subscription's id; a receiver answering 500 twice gets the
event again (with backoff) and accepts it once; a refresh keeps the id; unsubscribe
stops deliveries (and a second one is -32011); a subscription not refreshed stops at
its TTL; https:// callbacks are verified (callback_ca_file, else the system's
authorities); a bad secret or url is -32602, an unknown type -32011, a plain http://
callback on a gateway without allow_http_callbacks -32014, one past subscriptions_max
-32013; a refresh answers the cursor delivery has reached; events/list offers "webhook"."""
import http.server
import json
import os
import re
import socket
import ssl
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eventslib import events_manifest, post_ok  # noqa: E402
from gateway import (Context, Gateway, base_manifest, check, check_eq, fail, parse_args,  # noqa: E402
                     run_tests, send_one, stateless_request, strip_server_info, wait_for)
from tlskit import Pki  # noqa: E402
from webhooklib import new_secret, signature  # noqa: E402

VAR = "MCPG_TEST_EVENTS_SECRET"
TYPE = "order.created"
OTHER = "order.other"


class Receiver:
    """Every POST kept as (path, headers, body, signature ok); fail[path] answers 500
    that many times first."""

    def __init__(self, tls=None):
        self.tls = tls
        self.secrets = {}  # path -> whsec
        self.fail = {}
        self.got = []
        self.lock = threading.Lock()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                hd = {k.lower(): v for k, v in self.headers.items()}
                secret = outer.secrets.get(self.path)
                ok = bool(secret) and hd.get("webhook-signature") == signature(
                    secret, hd.get("webhook-id", ""), hd.get("webhook-timestamp", ""), body)
                with outer.lock:
                    left = outer.fail.get(self.path, 0)
                    if left:
                        outer.fail[self.path] = left - 1
                    outer.got.append((time.monotonic(), self.path, hd, body, ok, not left))
                self.send_response(500 if left else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.handle_error = lambda request, addr: None  # a refused handshake is expected
        if tls:  # the handshake on the handler's first read, on its thread
            self.srv.socket = tls.wrap_socket(self.srv.socket, server_side=True,
                                              do_handshake_on_connect=False)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def url(self, path):
        return "%s://127.0.0.1:%d%s" % ("https" if self.tls else "http", self.port, path)

    def deliveries(self, path, accepted_only=True):
        with self.lock:
            return [g for g in self.got if g[1] == path and (g[5] or not accepted_only)]

    def wait(self, path, n, timeout=10, accepted_only=True):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(self.deliveries(path, accepted_only)) >= n:
                break
            time.sleep(0.02)
        return self.deliveries(path, accepted_only)

    def close(self):
        self.srv.shutdown()


def manifest(allow_http=True, ca_file=None, anonymous=True, callback_allow=("127.0.0.0/8",),
             **settings):
    """The receivers listen on loopback, which callbacks may reach only when
    the operator's callback_allow says so."""
    m = base_manifest()
    m["events"] = events_manifest(VAR, types=(TYPE, OTHER), allow_http_callbacks=allow_http,
                                  allow_anonymous_subscriptions=anonymous,
                                  callback_allow=list(callback_allow), **settings)
    if ca_file:
        m["events"]["callback_ca_file"] = ca_file
    return m


_n = [0]


def post_event(port, secret, name, data):
    """One signed post of a new event; its id."""
    _n[0] += 1
    eid = "evt_%d_%d" % (os.getpid(), _n[0])
    post_ok(port, "shop", {"name": name, "data": data, "id": eid}, secret, "post " + eid)
    return eid


def rpc(port, method, params, id=1):
    r = send_one(port, stateless_request(port, method, params, id=id))
    return r, r.rpc()


def result(port, method, params, what):
    r, m = rpc(port, method, params)
    check("result" in m, "%s: a result (%r)" % (what, m))
    return m["result"]


def error(port, method, params, code, what):
    r, m = rpc(port, method, params)
    check("error" in m, "%s: an error (%r)" % (what, m))
    check_eq(m["error"]["code"], code, what + ": the code (%r)" % m["error"])
    return m["error"]


def sub_params(url, secret, name=TYPE, **kw):
    p = {"name": name, "delivery": {"mode": "webhook", "url": url, "secret": secret}}
    p.update(kw)
    return p


def event_ids(rcv, path):
    """The eventIds rcv was sent at path, in arrival order (every attempt)."""
    return [json.loads(g[3])["eventId"] for g in rcv.deliveries(path, accepted_only=False)]


def logged(g, sub_id, *whys):
    """g's log has "webhook subscription <sub_id>: <why>" for one of whys (subscribe.c's
    drop(): the delivering replica let the subscription go)."""
    err = g.stderr()
    return any("webhook subscription %s: %s" % (sub_id, why) in err for why in whys)


def gone(g, sub_id):
    """The delivering replica dropped sub_id after its unsubscribe: from the announcement,
    or (when a rescan ran between the two) as gone from the store."""
    return logged(g, sub_id, "unsubscribed", "gone from the store")


def main():
    args = parse_args()
    ctx = Context(args)
    src = new_secret()
    rx = Receiver()
    pki = Pki(ctx.path("pki"), clients=False)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(pki.path("server", "pem"), pki.path("server", "key"))
    rxs = Receiver(tls)
    gw = Gateway(ctx, manifest=manifest(ca_file=pki.path("ca", "pem")), env={VAR: src},
                 name="events-sub").start()
    p = gw.port

    def check_delivery(g, sub_id, what):
        _, path, hd, body, ok, _ = g
        check(ok, "%s: the signature verifies (%r)" % (what, hd))
        occ = json.loads(body)
        check_eq(hd.get("webhook-id"), occ["eventId"], what + ": webhook-id is the eventId")
        check_eq(hd.get("x-mcp-subscription-id"), sub_id, what + ": X-MCP-Subscription-Id")
        check(hd.get("content-type", "").startswith("application/json"), what + ": content-type")
        check(abs(int(hd["webhook-timestamp"]) - time.time()) < 60, what + ": webhook-timestamp")
        check(isinstance(occ.get("cursor"), str), what + ": a cursor (%r)" % occ)
        return occ

    def wait_ready(port):
        deadline = time.time() + 10
        while time.time() < deadline:  # 503 until the replica has read where the log is
            if "result" in rpc(port, "events/poll", {"name": TYPE, "cursor": None})[1]:
                return
            time.sleep(0.05)
        check(False, "the replica reads where the log is")

    def t_ready():
        wait_ready(p)
        # the replica holds the owner's lease and delivers: from now on it hears every
        # subscription's announcement (so each unsubscribe below shows in its log)
        wait_for(lambda: "this replica delivers the webhook subscriptions" in gw.stderr(), 15,
                 "the replica delivers the webhook subscriptions")

    def t_list():
        res = result(p, "events/list", {}, "events/list")
        for e in res["events"]:
            check_eq(e["delivery"], ["poll", "push", "webhook"], "events/list offers webhook")

    def t_refused():
        sec = new_secret()
        url = rx.url("/a")
        error(p, "events/subscribe", sub_params(url, "whsec_!!notbase64"), -32602, "a bad secret")
        error(p, "events/subscribe", sub_params(url, "nope"), -32602, "a secret without whsec_")
        error(p, "events/subscribe", sub_params(url, "whsec_" + "QUJD"), -32602, "a 3-byte key")
        error(p, "events/subscribe", sub_params("ftp://127.0.0.1/x", sec), -32602, "an ftp url")
        error(p, "events/subscribe", sub_params("not a url", sec), -32602, "not a url")
        error(p, "events/subscribe", {"name": TYPE}, -32602, "no delivery")
        e = error(p, "events/subscribe", sub_params(url, sec, name="nope.nope"), -32011, "unknown type")
        check_eq(e.get("data"), {"kind": "event"}, "unknown type: data")
        e = error(p, "events/unsubscribe", {"name": TYPE, "delivery": {"url": rx.url("/none")}},
                  -32011, "unsubscribe of none")
        check_eq(e.get("data"), {"kind": "subscription"}, "unsubscribe of none: data")

    state = {}

    def t_delivered_in_order_once():
        sec = new_secret()
        rx.secrets["/a"] = sec
        res = result(p, "events/subscribe", sub_params(rx.url("/a"), sec, ttlMs=60000), "subscribe")
        check(re.match(r"^sub_[0-9a-f]{16}$", res["id"]), "the id's form: %r" % res)
        check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$", res["refreshBefore"]),
              "refreshBefore is ISO 8601: %r" % res)
        check_eq(res["truncated"], False, "truncated")
        check(isinstance(res["cursor"], str), "a cursor")
        again = result(p, "events/subscribe", sub_params(rx.url("/a"), sec, ttlMs=60000), "refresh")
        check_eq(again["id"], res["id"], "a refresh keeps the id")
        other = result(p, "events/subscribe", sub_params(rx.url("/a"), sec, arguments={"x": 1}),
                       "other arguments")
        check(other["id"] != res["id"], "other arguments: another subscription")
        result(p, "events/unsubscribe", {"name": TYPE, "arguments": {"x": 1},
                                         "delivery": {"url": rx.url("/a")}}, "unsubscribe it")
        state["a"] = res["id"]
        # the deliverer learns of an unsubscribe from its announcement: until it has, the
        # other subscription (its cursor "now") would be owed the events below as well
        wait_for(lambda: gone(gw, other["id"]), 10, "the deliverer dropped the other subscription")
        # no wait for the deliverer to learn of the subscription itself: its cursor is "now"
        # (the answer's), so every event posted after the answer is owed to it
        ids = []
        for i in range(5):
            ids.append(post_event(p, src, TYPE, {"order": i}))
            if i == 2:
                post_event(p, src, OTHER, {"skip": True})
        rx.wait("/a", 5)
        # nothing more comes: one POST at a time, in log order, so a copy or an event of
        # the other type would come before the next event posted
        ids.append(post_event(p, src, TYPE, {"order": 5}))
        rx.wait("/a", 6)
        got = rx.deliveries("/a", accepted_only=False)
        check_eq(len(got), 6, "five deliveries, each once, then the next one (%r)" % [g[3] for g in got])
        occs = [check_delivery(g, res["id"], "delivery %d" % i) for i, g in enumerate(got)]
        check_eq([o["eventId"] for o in occs], ids, "in the order posted, the other type left out")
        check_eq([o["data"]["order"] for o in occs], list(range(6)), "the data")
        cursors = [int(o["cursor"]) for o in occs]
        check(cursors == sorted(cursors) and len(set(cursors)) == 6, "cursors grow: %r" % cursors)
        state["a_last"], state["a_secret"] = cursors[-1], sec

    def t_retried():
        sec = new_secret()
        rx.secrets["/flaky"] = sec
        rx.fail["/flaky"] = 2
        res = result(p, "events/subscribe", sub_params(rx.url("/flaky"), sec), "subscribe flaky")
        eid = post_event(p, src, TYPE, {"flaky": 1})
        got = rx.wait("/flaky", 1, timeout=15)
        check_eq(len(got), 1, "accepted once")
        # not tried again once accepted: the next event posted comes right after it
        nxt = post_event(p, src, TYPE, {"flaky": 2})
        check_eq(len(rx.wait("/flaky", 2)), 2, "the next event accepted")
        every = rx.deliveries("/flaky", accepted_only=False)
        check_eq(len(every), 4, "two refusals, then the one accepted (then the next event)")
        for i, g in enumerate(every):
            o = check_delivery(g, res["id"], "attempt %d" % i)
            check_eq(o["eventId"], eid if i < 3 else nxt, "attempt %d: the same event" % i)
        gap1, gap2 = every[1][0] - every[0][0], every[2][0] - every[1][0]
        check(gap1 >= 0.4 and gap2 >= 0.8, "backoff between attempts: %.2f s, %.2f s" % (gap1, gap2))
        result(p, "events/unsubscribe", {"name": TYPE, "delivery": {"url": rx.url("/flaky")}}, "unsub")
        # /a, still subscribed, is owed both events too: none left on its way to it (what
        # t_unsubscribe counts as delivered before its unsubscribe)
        wait_for(lambda: event_ids(rx, "/a")[-2:] == [eid, nxt], 10,
                 "/a has the events posted here too")

    def t_refresh_cursor():
        # the delivering replica writes a subscription's position at most once a second, and
        # a refresh answers the position as written: asked again until it has caught up
        deadline = time.monotonic() + 10
        while True:
            res = result(p, "events/subscribe", sub_params(rx.url("/a"), state["a_secret"],
                                                           ttlMs=60000), "refresh after deliveries")
            check_eq(res["id"], state["a"], "the same subscription")
            if int(res["cursor"]) >= state["a_last"]:
                break
            if time.monotonic() > deadline:
                fail("a refresh answers where delivery stands (%r, the last delivered %d)"
                     % (res, state["a_last"]))
            time.sleep(0.1)

    def t_unsubscribe():
        # a second subscription of the type: once it has the event posted after the
        # unsubscribe, the deliverer has handed that event to every subscription it holds
        wsec = new_secret()
        rx.secrets["/watch"] = wsec
        result(p, "events/subscribe", sub_params(rx.url("/watch"), wsec), "subscribe /watch")
        before = len(rx.deliveries("/a", accepted_only=False))
        res = result(p, "events/unsubscribe", {"name": TYPE, "delivery": {"url": rx.url("/a")}},
                     "unsubscribe")
        res = strip_server_info(res, "unsubscribe")
        res.pop("resultType", None)  # the stateless wire's
        check_eq(res, {}, "unsubscribe answers {}")
        wait_for(lambda: gone(gw, state["a"]), 10, "the deliverer dropped %s" % state["a"])
        eid = post_event(p, src, TYPE, {"after": "unsubscribe"})
        rx.wait("/watch", 1)
        check_eq(event_ids(rx, "/watch"), [eid],
                 "the event after the unsubscribe reaches the subscription still there")
        check_eq(len(rx.deliveries("/a", accepted_only=False)), before, "nothing after unsubscribe")
        result(p, "events/unsubscribe", {"name": TYPE, "delivery": {"url": rx.url("/watch")}},
               "unsubscribe /watch")
        error(p, "events/unsubscribe", {"name": TYPE, "delivery": {"url": rx.url("/a")}}, -32011,
              "unsubscribe again")

    def t_ttl():
        sec = new_secret()
        rx.secrets["/ttl"] = sec
        from datetime import datetime, timezone

        def granted(res, t0, t1, secs, what):
            # refreshBefore is the gateway's clock at its answer plus the grant: between the
            # call's start and its end (plus the grant), to the millisecond it is written in
            rb = datetime.strptime(res["refreshBefore"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                tzinfo=timezone.utc).timestamp()
            check(t0 + secs - 0.002 <= rb <= t1 + secs + 0.002, "%s: refreshBefore %r is %d s after "
                  "the call (made between %.3f and %.3f)" % (what, res["refreshBefore"], secs, t0, t1))
            return rb

        t0 = time.time()
        res = result(p, "events/subscribe", sub_params(rx.url("/ttl"), sec, ttlMs=1), "subscribe ttl")
        rb = granted(res, t0, time.time(), 10, "ttlMs 1 is raised to 10 s")
        t0 = time.time()
        nul = result(p, "events/subscribe", sub_params(rx.url("/ttl-null"), sec, ttlMs=None), "null")
        granted(nul, t0, time.time(), 3600, "ttlMs null: the longest grant (an hour)")
        post_event(p, src, TYPE, {"ttl": 1})
        check_eq(len(rx.wait("/ttl", 1)), 1, "delivered while live")
        wait_for(lambda: logged(gw, res["id"], "expired"), max(0, rb - time.time()) + 10,
                 "the deliverer dropped %s at its refreshBefore" % res["id"])
        # the store's key for it expired too: its TTL ran from the write, done before the answer
        wait_for(lambda: time.time() > rb, max(0, rb - time.time()) + 1, "refreshBefore passed")
        # /ttl-null (live for an hour) is the witness: once it has the event, the
        # deliverer has handed it to every subscription it holds
        eid = post_event(p, src, TYPE, {"ttl": 2})
        wait_for(lambda: eid in event_ids(rx, "/ttl-null"), 10,
                 "the event after the TTL reaches the subscription still live")
        check_eq(len(rx.deliveries("/ttl", accepted_only=False)), 1, "nothing after the TTL")
        error(p, "events/unsubscribe", {"name": TYPE, "delivery": {"url": rx.url("/ttl")}}, -32011,
              "an expired subscription is gone")
        result(p, "events/unsubscribe", {"name": TYPE, "delivery": {"url": rx.url("/ttl-null")}},
               "unsubscribe /ttl-null")

    def t_https():
        sec = new_secret()
        rxs.secrets["/s"] = sec
        res = result(p, "events/subscribe", sub_params(rxs.url("/s"), sec), "subscribe https")
        eid = post_event(p, src, TYPE, {"tls": 1})
        got = rxs.wait("/s", 1)
        check_eq(len(got), 1, "delivered over https (callback_ca_file trusts the receiver)")
        check_eq(check_delivery(got[0], res["id"], "https")["eventId"], eid, "the event")

    def t_https_only():
        with Gateway(ctx, manifest=manifest(allow_http=False, subscriptions_max=1), env={VAR: src},
                     name="events-https-only") as g2:
            wait_ready(g2.port)  # a subscribe is 503 until the new replica knows the log's head
            e = error(g2.port, "events/subscribe", sub_params(rx.url("/x"), new_secret()), -32014,
                      "http:// without allow_http_callbacks")
            check_eq(e.get("data"), {"feature": "callbackScheme", "value": "http"}, "data")
            sec = new_secret()
            rxs.secrets["/untrusted"] = sec
            sid = result(g2.port, "events/subscribe", sub_params(rxs.url("/untrusted"), sec),
                         "https")["id"]
            e = error(g2.port, "events/subscribe", sub_params(rxs.url("/second"), sec), -32013,
                      "past subscriptions_max")
            check_eq(e.get("data"), {"limit": "subscriptions"}, "past subscriptions_max: data")
            result(g2.port, "events/subscribe", sub_params(rxs.url("/untrusted"), sec),
                   "a refresh is no new subscription")
            post_event(g2.port, src, TYPE, {"untrusted": 1})

            def why_logged():
                return [ln for ln in g2.stderr().splitlines()
                        if "webhook subscription %s:" % sid in ln and "certificate" in ln]
            # the attempt failed in the TLS handshake (logged, to be tried again)
            wait_for(why_logged, 15, "the log says why (certificate)")
            check_eq(len(rxs.deliveries("/untrusted", accepted_only=False)), 0,
                     "a receiver whose certificate the system does not trust gets nothing")

    def t_anonymous():
        with Gateway(ctx, manifest=manifest(anonymous=False), env={VAR: src},
                     name="events-no-anonymous") as g3:
            wait_ready(g3.port)
            e = error(g3.port, "events/subscribe", sub_params(rx.url("/anon"), new_secret()), -32012,
                      "an anonymous caller, allow_anonymous_subscriptions off")
            check("authenticated" in e.get("message", ""), "says why: %r" % e)

    def t_destinations():
        """Nothing is fetched for a client unchecked: without callback_allow, a
        callback to loopback, this machine, a private or link-local address is
        refused at subscribe (-32602 naming why); a name that resolves to
        loopback is refused when resolved, and nothing is posted to it."""
        with Gateway(ctx, manifest=manifest(callback_allow=()), env={VAR: src},
                     name="events-destinations") as g4:
            wait_ready(g4.port)
            port = rx.url("/").split(":")[2].split("/")[0]
            for url, why in (("http://127.0.0.1:%s/admin/reload" % port, "loopback"),
                             ("http://localhost:%s/x" % port, "this machine"),
                             ("http://[::1]:%s/x" % port, "loopback"),
                             ("http://[::ffff:127.0.0.1]:%s/x" % port, "loopback"),
                             ("http://10.1.2.3/x", "private"),
                             ("http://192.168.0.10/x", "private"),
                             ("http://169.254.169.254/latest/meta-data", "link-local"),
                             ("http://0.0.0.0:%s/x" % port, "unspecified")):
                e = error(g4.port, "events/subscribe", sub_params(url, new_secret()), -32602,
                          "a callback to %s" % url)
                check(why in e.get("message", "") and "callback_allow" in e.get("message", ""),
                      "%s: the refusal says why and what allows it: %r" % (url, e))
            # a name: judged on the address it resolves to, the one connected to
            # (the machine's own name resolves to loopback or to one of its
            # addresses: refused either way)
            name = socket.gethostname()
            check(socket.getaddrinfo(name, None), "this machine's name resolves")
            sec = new_secret()
            rx.secrets["/by-name"] = sec
            sid = result(g4.port, "events/subscribe",
                         sub_params("http://%s:%s/by-name" % (name, port), sec), "a name")["id"]
            post_event(g4.port, src, TYPE, {"by": "name"})
            wait_for(lambda: logged(g4, sid, "delivery refused"), 60,
                     "the delivery refused once the name resolved to loopback")
            check("loopback" in g4.stderr() or "this machine" in g4.stderr(), "the log says why")
            check_eq(len(rx.deliveries("/by-name", accepted_only=False)), 0,
                     "nothing posted to a name that resolves to loopback")

    def t_quota():
        """One caller cannot fill the table for everyone: subscriptions_per_principal."""
        with Gateway(ctx, manifest=manifest(subscriptions_per_principal=2), env={VAR: src},
                     name="events-quota") as g5:
            wait_ready(g5.port)
            for k in range(2):
                result(g5.port, "events/subscribe", sub_params(rx.url("/q%d" % k), new_secret()),
                       "subscription %d" % k)
            e = error(g5.port, "events/subscribe", sub_params(rx.url("/q2"), new_secret()), -32013,
                      "a third of one caller")
            check_eq(e.get("data"), {"limit": "subscriptions_per_principal"}, "its data")
            result(g5.port, "events/subscribe", sub_params(rx.url("/q0"), new_secret()),
                   "a refresh of one of them is no new subscription")

    def t_stop():
        gw.stop()
        rx.close()
        rxs.close()

    return run_tests([
        ("the replica is ready (events/poll answers)", t_ready),
        ("events/list offers webhook delivery", t_list),
        ("a bad secret or url -32602, an unknown type or subscription -32011", t_refused),
        ("a subscription gets each event of its type once, in order, signed", t_delivered_in_order_once),
        ("a receiver answering 500 twice gets the event again and accepts it once", t_retried),
        ("a refresh answers the cursor delivery has reached", t_refresh_cursor),
        ("unsubscribe stops deliveries", t_unsubscribe),
        ("a subscription not refreshed stops at its TTL", t_ttl),
        ("https:// callbacks, verified against callback_ca_file", t_https),
        ("plain http:// needs allow_http_callbacks (else -32014), https is verified, "
         "subscriptions_max (-32013)", t_https_only),
        ("an anonymous caller may not subscribe unless allowed (-32012)", t_anonymous),
        ("callbacks to loopback, private, link-local, this machine: refused unless allowed",
         t_destinations),
        ("a quota of subscriptions per caller", t_quota),
        ("the gateway stops cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
