#!/usr/bin/env python3
"""Every legacy session has an owner, and only its owner can use it.

A gateway with identity_apikey (alice, bob: two principals; carol: alice's
principal in another tenant) and gateway.anonymous off, audit on:

  * initialize without credentials is 401 and opens no session;
  * alice's session, named by bob (or by carol, same principal name, another
    tenant), is answered exactly as an unknown session id: 404, -32001
    "Session not found", no Mcp-Session-Id, for tools/call, ping,
    logging/setLevel, resources/subscribe and unsubscribe, a notification, a
    response, its GET stream and its DELETE; each attempt is audited as
    denied at identity;
  * the same requests without credentials are 401;
  * afterwards alice's session is whole: her calls, her GET stream and her
    DELETE work.
A second gateway with gateway.anonymous on: an anonymous session is refused
to an identified caller and usable anonymously; with
max_sessions_per_principal 3, anonymous callers (one count) get 3 sessions
and then 429 while alice still gets hers, and an ended session gives its
place back.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (new_apikey, Context, Gateway, base_manifest, check, check_eq, parse_args,  # noqa: E402
                     read_audit, run_tests, wait_for)
from test_legacy_wire import answer, request, rpc  # noqa: E402



def legacy(port, method="POST", body=None, sid=None, key=None):
    """One legacy-wire request as key's holder (no key: no credentials)."""
    return request(port, method, body, session=sid, extra=[("X-API-Key", key)] if key else ())


def init_body():
    return rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}})


def main():
    args = parse_args()
    ctx = Context(args)
    keys_file = ctx.path("keys.json")  # new_apikey's

    alice = new_apikey(ctx, "alice", "--tenant", "acme")
    bob = new_apikey(ctx, "bob", "--tenant", "acme")
    carol = new_apikey(ctx, "alice", "--tenant", "other")  # alice's name, another tenant
    audit_path = ctx.path("audit.jsonl")

    def manifest(anonymous):
        m = base_manifest(audit_path=audit_path,
                          mock_config={"resources": [{"uri": "mock://r", "text": "r"}]},
                          server={"max_sessions_per_principal": 3} if anonymous else None)
        m["modules"].append({"name": "keys", "module": "identity_apikey",
                             "config": {"keys_file": keys_file}})
        m["pipeline"]["identity"] = ["keys"]
        m["gateway"]["anonymous"] = anonymous
        return m

    gw = Gateway(ctx, manifest=manifest(False), name="gateway-owner")
    gw_anon = Gateway(ctx, manifest=manifest(True), name="gateway-owner-anon")
    state = {}

    def open_session(port, key):
        r = legacy(port, body=init_body(), key=key)
        check_eq(r.status, 200, "initialize (%r)" % r.body[:200])
        sid = r.header("mcp-session-id")
        check(sid and re.fullmatch(r"[0-9a-f]{32}", sid), "a session id: %r" % sid)
        return sid

    # every request that touches a session, as (label, method, body)
    def session_requests():
        return [
            ("tools/call", "POST", rpc("tools/call", {"name": "echo", "arguments": {"message": "x"}}, id=5)),
            ("ping", "POST", rpc("ping", id=6)),
            ("logging/setLevel", "POST", rpc("logging/setLevel", {"level": "debug"}, id=7)),
            ("resources/subscribe", "POST", rpc("resources/subscribe", {"uri": "mock://r"}, id=8)),
            ("resources/unsubscribe", "POST", rpc("resources/unsubscribe", {"uri": "mock://r"}, id=9)),
            ("a notification", "POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
            ("a response", "POST", {"jsonrpc": "2.0", "id": 77, "result": {}}),
            ("GET stream", "GET", None),
            ("DELETE", "DELETE", None),
        ]

    def shape(r):
        """What a refusal looks like: status, body, whether it names a session."""
        body = r.body.decode("utf-8", "replace")
        return r.status, re.sub(r'"id":\s*[^,}]+', '"id":_', body), r.header("mcp-session-id")

    def t_start():
        gw.start()
        gw_anon.start()

    def t_initialize_needs_identity():
        r = legacy(gw.port, body=init_body())
        check_eq(r.status, 401, "initialize without credentials (%r)" % r.body[:200])
        check(not r.header("mcp-session-id"), "no session for a caller without identity")
        state["alice"] = open_session(gw.port, alice)

    def t_others_see_unknown():
        sid = state["alice"]
        unknown = "0" * 32
        for label, method, body in session_requests():
            for who, key in (("bob", bob), ("carol (alice, another tenant)", carol)):
                got = legacy(gw.port, method, body, sid=sid, key=key)
                want = legacy(gw.port, method, body, sid=unknown, key=key)
                check_eq(want.status, 404, "%s with an unknown session id" % label)
                check_eq(shape(got), shape(want),
                         "%s by %s on alice's session = an unknown session's answer" % (label, who))

    def t_no_credentials():
        for label, method, body in session_requests():
            r = legacy(gw.port, method, body, sid=state["alice"])
            check_eq(r.status, 401, "%s on alice's session without credentials (%r)"
                     % (label, r.body[:200]))

    def t_audited():
        def denied():
            return [e for e in read_audit(audit_path) if e.get("event") == "mcpg.tool.call.denied"
                    and e.get("session") == state["alice"] and e.get("principal") in ("bob", "alice")]
        # bob's and carol's attempts, each request kind once per caller
        want = 2 * len(session_requests())
        wait_for(lambda: len(denied()) >= want, 20, "%d denials on alice's session" % want)
        for e in denied():
            check_eq(e.get("denied_stage"), "identity", "the stage that refused (%r)" % e)

    def t_owner_unharmed():
        sid = state["alice"]
        r = legacy(gw.port, body=rpc("tools/call", {"name": "echo", "arguments": {"message": "mine"}},
                                      id=11), sid=sid, key=alice)
        check_eq(r.status, 200, "alice's call on her session (%r)" % r.body[:200])
        check_eq(answer(r)["result"]["content"][0]["text"], "Echo: mine", "alice's answer")
        r = legacy(gw.port, body=rpc("ping", id=12), sid=sid, key=alice)
        check_eq(r.status, 200, "alice's ping")
        r = legacy(gw.port, "DELETE", sid=sid, key=alice)
        check_eq(r.status, 200, "alice's DELETE (%r)" % r.body[:200])
        r = legacy(gw.port, body=rpc("ping", id=13), sid=sid, key=alice)
        check_eq(r.status, 404, "her session is gone after her DELETE")

    def t_anonymous_session():
        state["anon"] = sid = open_session(gw_anon.port, None)
        r = legacy(gw_anon.port, body=rpc("ping", id=1), sid=sid)
        check_eq(r.status, 200, "the anonymous session, anonymously (%r)" % r.body[:200])
        r = legacy(gw_anon.port, body=rpc("ping", id=2), sid=sid, key=alice)
        check_eq(r.status, 404, "an anonymous session is not alice's (%r)" % r.body[:200])
        mine = open_session(gw_anon.port, alice)
        r = legacy(gw_anon.port, body=rpc("ping", id=3), sid=mine)
        check_eq(r.status, 404, "alice's session, anonymously (%r)" % r.body[:200])

    def t_quota():
        more = [open_session(gw_anon.port, None) for _ in range(2)]  # 3 anonymous in all
        r = legacy(gw_anon.port, body=init_body())
        check_eq(r.status, 429, "a 4th anonymous session (%r)" % r.body[:200])
        check("max_sessions_per_principal" in r.body.decode(), "the refusal names the setting")
        check(r.header("retry-after"), "429 with Retry-After")
        open_session(gw_anon.port, alice)  # alice's own count: her second
        r = legacy(gw_anon.port, "DELETE", sid=more[0])
        check_eq(r.status, 200, "an anonymous session ended")
        wait_for(lambda: legacy(gw_anon.port, body=init_body()).status == 200, 10,
                 "the ended session's place given back")

    def t_stop():
        gw.stop()
        gw_anon.stop()

    try:
        return run_tests([("the gateways start", t_start),
                          ("initialize passes identity; alice opens a session", t_initialize_needs_identity),
                          ("bob and carol get the unknown-session answer for everything",
                           t_others_see_unknown),
                          ("no credentials: 401 for everything", t_no_credentials),
                          ("each attempt audited as denied at identity", t_audited),
                          ("alice's session unharmed", t_owner_unharmed),
                          ("anonymous sessions belong to anonymous callers", t_anonymous_session),
                          ("a quota per caller: anonymous callers share one", t_quota),
                          ("the gateways stop", t_stop)], ctx)
    finally:
        for g in (gw, gw_anon):
            if g.proc is not None and g.proc.poll() is None:
                g.stop()


if __name__ == "__main__":
    sys.exit(main())
