#!/usr/bin/env python3
"""A client is asked only what it declared (fake_mcp_upstream.py's `ask` tool).

One gateway, identity_apikey with alice and bob, two stdio upstreams:
  lg  a 2025-11-25 (session wire) upstream: its questions are server-to-client requests
  st  a 2026-07-28 upstream: its questions come as input_required (recorded, so the
      capabilities it is told can be read)

* legacy upstream, undeclared: a stateless client with clientCapabilities {} and a
  session client whose initialize declared {} are never shown the upstream's
  sampling/elicitation/roots request; the upstream gets -32601 at once and its call
  goes on. Elicitation declared without url mode: url questions get -32602. A client
  that declares the capability is asked (input_required; a question on the session's
  stream).
* 2026 upstream, undeclared: -32021 with data.requiredCapabilities (HTTP 400 on the
  stateless wire), on both wires; declared: the round passes. The upstream is told the
  calling client's capabilities and no more.
* requestState, the gateway's (a parked question) or the upstream's, is sealed for its
  caller and request: bob's retry with alice's token, alice's with other arguments, a
  changed or unsealed token are refused as unknown (-32602); alice's own retry works,
  and the upstream gets its own state back unsealed.
* a parked question is answered through any replica: two gateways on one redis-server
  share the secret; a question asked through A is answered by a retry through B (the
  retry is relayed to A, which holds the upstream's request), the upstream gets the
  answer and the client its result; bob's retry with alice's token is refused; once A
  is stopped a retry through B is refused as unknown at once, not left hanging.
"""
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (new_apikey, Conn, Context, Gateway, base_manifest, build_request,  # noqa: E402
                     check, check_eq, parse_args, rpc_body, run_tests, stateless_headers,
                     wait_for)
from test_legacy_wire import answer, head_of, read_stream, request, request_bytes, rpc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_mcp_upstream.py")
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
QUESTIONS = ("elicitation/create", "sampling/createMessage", "roots/list")
SECRET_VAR = "MCPG_CAPS_FLEET_SECRET"
FLEET_SECRET = {SECRET_VAR: "fleet-secret-0123456789abcdef"}
DECLARES = {"elicitation/create": {"elicitation": {}}, "sampling/createMessage": {"sampling": {}},
            "roots/list": {"roots": {}}}


def main():
    args = parse_args()
    ctx = Context(args)
    keys = {"alice": new_apikey(ctx, "alice"), "bob": new_apikey(ctx, "bob")}
    record = ctx.path("st.record")
    gw = None

    def manifest():
        m = base_manifest()
        m["gateway"]["log_level"] = "info"
        # stdio ties no message to a call: "sole_call" lets the one call in flight
        # (these tests make one at a time) be asked
        for name, more in (("lg", ["--ask-prompt"]),
                           ("st", ["--wire", "stateless", "--record", record])):
            m["modules"].append({"name": name, "module": "backend_mcp", "timeout_ms": 30000,
                                 "config": {"command": sys.executable, "args": [FAKE] + more,
                                            "untied_messages": "sole_call"}})
        m["modules"].append({"name": "keys", "module": "identity_apikey",
                             "config": {"keys_file": ctx.path("keys.json")}})
        m["pipeline"]["identity"] = ["keys"]
        m["bindings"] = [{"backend": "lg", "prefix": "lg"}, {"backend": "st", "prefix": "st"}]
        m["gateway"]["secret_env"] = SECRET_VAR
        return m

    def call(tool, arguments, caps, who="alice", more=None, via=None):
        """A stateless tools/call declaring caps, through via (default: the
        first gateway): (response, its JSON-RPC object)."""
        g = via or gw
        params = {"name": tool, "arguments": arguments, "_meta": {CAPS_KEY: caps}}
        params.update(more or {})
        raw = build_request(g.port, headers=stateless_headers("tools/call", tool) +
                            [("X-API-Key", keys[who])], body=rpc_body("tools/call", params))
        with Conn(g.port, timeout=60) as c:
            c.send(raw)
            r = c.read_response()
        return r, r.rpc()

    def session(caps, who="alice"):
        r = request(gw.port, body=rpc("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": caps,
            "clientInfo": {"name": "t", "version": "1"}}), extra=[("X-API-Key", keys[who])])
        check_eq(r.status, 200, "initialize (%r)" % r.body[:200])
        return r.header("mcp-session-id")

    def session_call(sid, tool, arguments, who="alice"):
        r = request(gw.port, body=rpc("tools/call", {"name": tool, "arguments": arguments}, id=7),
                    session=sid, extra=[("X-API-Key", keys[who])])
        return r, r.body.decode("utf-8", "replace")

    def upstream_got(rpc_obj):
        """What the legacy fake's ask got back for its question (its result text)."""
        return json.loads(rpc_obj["result"]["content"][0]["text"])

    def t_start():
        nonlocal gw
        gw = Gateway(ctx, manifest=manifest(), name="gateway-caps", env=FLEET_SECRET)
        gw.start()

        def listed():
            raw = build_request(gw.port, headers=stateless_headers("tools/list") +
                                [("X-API-Key", keys["alice"])], body=rpc_body("tools/list", {}))
            with Conn(gw.port) as c:
                c.send(raw)
                names = {t["name"] for t in c.read_response().rpc()["result"]["tools"]}
            return {"lg_ask", "st_ask"} <= names
        wait_for(listed, 30, "both upstreams' tools listed")

    def t_legacy_stateless_undeclared():
        for method in QUESTIONS:
            r, res = call("lg_ask", {"method": method}, {})
            check_eq(r.status, 200, "%s: the call goes on (%r)" % (method, res))
            result = res.get("result", {})
            check(result.get("resultType") != "input_required",
                  "%s: a client that declared nothing was asked: %r" % (method, res))
            got = upstream_got(res)
            check_eq(got.get("error", {}).get("code"), -32601,
                     "%s: the upstream is answered Method not found (%r)" % (method, got))
        wait_for(lambda: "did not declare the capability it needs" in gw.stderr(), 10,
                 "the refusal logged")

    def t_legacy_unknown_request():
        """A request no client role answers is never passed on, whatever the
        client declared, on either wire: the upstream gets -32601."""
        everything = {"sampling": {"tools": {}}, "elicitation": {"form": {}, "url": {}},
                      "roots": {}}
        for method in ("tasks/list", "tools/call", "x-vendor/ask"):
            r, res = call("lg_ask", {"method": method}, everything)
            result = res.get("result", {})
            check(result.get("resultType") != "input_required",
                  "%s: passed to the client as a question: %r" % (method, res))
            got = upstream_got(res)
            check_eq(got.get("error", {}).get("code"), -32601,
                     "%s: the upstream is answered Method not found (%r)" % (method, got))
            check("not a request a client answers" in got.get("error", {}).get("message", ""),
                  "%s: the message says why: %r" % (method, got))

    def t_no_question_on_completion():
        """Only tools/call, prompts/get and resources/read may answer a stateless
        client input_required: an upstream's question during completion/complete
        is refused to the upstream, and the client gets a plain completion."""
        params = {"ref": {"type": "ref/prompt", "name": "lg_ask_prompt"},
                  "argument": {"name": "who", "value": "a"},
                  "_meta": {CAPS_KEY: {"elicitation": {}}}}
        raw = build_request(gw.port, headers=stateless_headers("completion/complete") +
                            [("X-API-Key", keys["alice"])],
                            body=rpc_body("completion/complete", params))
        with Conn(gw.port, timeout=60) as c:
            c.send(raw)
            res = c.read_response().rpc()
        result = res.get("result", {})
        check(result.get("resultType") != "input_required" and "completion" in result,
              "completion/complete answered with a completion, not a question: %r" % res)
        got = json.loads(result["completion"]["values"][0])
        check("only tools/call, prompts/get and resources/read" in
              got.get("error", {}).get("message", ""),
              "the upstream's question refused, saying why: %r" % got)

    def t_legacy_stateless_mode():
        r, res = call("lg_ask", {"method": "elicitation/create", "mode": "url"},
                      {"elicitation": {}})
        got = upstream_got(res)
        check_eq(got.get("error", {}).get("code"), -32602,
                 "url mode, only form declared: -32602 (%r)" % got)
        check("URL-mode" in got.get("error", {}).get("message", ""), "names the mode: %r" % got)
        r, res = call("lg_ask", {"method": "sampling/createMessage", "mode": "tools"},
                      {"sampling": {}})
        check_eq(upstream_got(res).get("error", {}).get("code"), -32602,
                 "sampling with tools, sampling.tools undeclared: -32602 (%r)" % res)

    def asked_and_answered(arguments, caps):
        """A stateless client declaring caps is asked the question; its retry
        answers the upstream (which leaves no question parked)."""
        r, res = call("lg_ask", arguments, caps)
        result = res.get("result", {})
        check_eq(result.get("resultType"), "input_required",
                 "%r: a client that declared it is asked (%r)" % (arguments, res))
        check_eq(result["inputRequests"]["upstream"]["method"],
                 arguments["method"], "the question")
        reply = {"action": "decline"}
        r, res = call("lg_ask", arguments, caps, more={
            "inputResponses": {"upstream": reply}, "requestState": result["requestState"]})
        check("result" in res, "the retry: %r" % res)
        check_eq(upstream_got(res), reply, "the retry answers the upstream (%r)" % res)

    def t_legacy_stateless_declared():
        for method in QUESTIONS:
            asked_and_answered({"method": method}, DECLARES[method])
        asked_and_answered({"method": "elicitation/create", "mode": "url"},
                           {"elicitation": {"url": {}}})

    def t_legacy_session_undeclared():
        sid = session({})
        for method in QUESTIONS:
            r, text = session_call(sid, "lg_ask", {"method": method})
            check_eq(r.status, 200, "%s: the call (%s)" % (method, text[:300]))
            check('"method":"%s"' % method not in text.replace(" ", ""),
                  "%s: the session client was asked: %s" % (method, text[:500]))
            got = upstream_got(answer(r))
            check_eq(got.get("error", {}).get("code"), -32601,
                     "%s: the upstream is answered Method not found (%r)" % (method, got))

    def t_legacy_session_declared():
        sid = session({"sampling": {}})
        with Conn(gw.port, timeout=30) as c:
            c.send(request_bytes(gw.port, body=rpc("tools/call", {
                "name": "lg_ask", "arguments": {"method": "sampling/createMessage"}}, id=8),
                session=sid, extra=[("X-API-Key", keys["alice"])]))
            status, head = head_of(c)
            check_eq(status, 200, "the call's stream (%s)" % head[:200])
            text, _ = read_stream(c, until="sampling/createMessage")
            ask = [json.loads(ln[5:]) for ln in text.split("\n") if ln.startswith("data:")
                   and "sampling/createMessage" in ln][0]
            reply = {"role": "assistant", "content": {"type": "text", "text": "ok"},
                     "model": "m"}
            r = request(gw.port, body={"jsonrpc": "2.0", "id": ask["id"], "result": reply},
                        session=sid, extra=[("X-API-Key", keys["alice"])])
            check_eq(r.status, 202, "the client's answer (%r)" % r.body[:200])
            rest, _ = read_stream(c)
        check('"got": {"role": "assistant"' in (text + rest).replace('\\"', '"'),
              "the upstream got the declaring client's answer: %s" % (text + rest)[-400:])

    def st_envelopes():
        with open(record) as f:
            msgs = [json.loads(ln)["msg"] for ln in f if '"msg"' in ln]
        return [m["params"]["_meta"].get(CAPS_KEY) for m in msgs
                if m.get("method") == "tools/call"]

    def t_modern_stateless():
        r, res = call("st_ask", {"method": "sampling/createMessage"}, {"roots": {}})
        check_eq(r.status, 400, "HTTP 400 (%r)" % res)
        err = res.get("error", {})
        check_eq(err.get("code"), -32021, "MissingRequiredClientCapability (%r)" % res)
        check_eq(err.get("data", {}).get("requiredCapabilities"), {"sampling": {}},
                 "data.requiredCapabilities names sampling (%r)" % res)
        check_eq(st_envelopes()[-1], {"roots": {}}, "the upstream is told the client's own")
        r, res = call("st_ask", {"method": "elicitation/create", "mode": "url"},
                      {"elicitation": {}})
        check_eq(res.get("error", {}).get("data", {}).get("requiredCapabilities"),
                 {"elicitation": {"url": {}}}, "url mode named (%r)" % res)
        r, res = call("st_ask", {"method": "sampling/createMessage"}, {"sampling": {}})
        result = res.get("result", {})
        check_eq(result.get("resultType"), "input_required", "declared: the round (%r)" % res)
        check_eq(result["inputRequests"]["q"]["method"], "sampling/createMessage", "the question")

    def t_modern_session():
        sid = session({})
        r, text = session_call(sid, "st_ask", {"method": "roots/list"})
        res = answer(r)
        check_eq(res.get("error", {}).get("code"), -32021, "legacy client: -32021 (%s)" % text[:300])
        check_eq(res["error"].get("data", {}).get("requiredCapabilities"), {"roots": {}},
                 "names roots (%r)" % res)
        check("roots/list" not in text.replace(res["error"]["message"], ""),
              "the question did not reach the client: %s" % text[:400])
        check_eq(st_envelopes()[-1], {}, "a session that declared nothing: the upstream is told {}")

    def refused(res, what):
        err = res.get("error", {})
        check(err.get("code") == -32602 and "requestState is unknown" in err.get("message", ""),
              "%s: refused as an unknown requestState (%r)" % (what, res))

    def t_state_bound_parked():
        """A parked question's requestState answers only alice's same request."""
        ask = {"method": "elicitation/create"}
        caps = {"elicitation": {}}
        r, res = call("lg_ask", ask, caps)
        state = res["result"]["requestState"]
        check(state.startswith("mcpg-park-") and "~" in state, "sealed: %r" % state)
        reply = {"action": "accept", "content": {"name": "Ada"}}
        answer_with = {"inputResponses": {"upstream": reply}}

        def retry(who, arguments, token):
            more = dict(answer_with, requestState=token)
            return call("lg_ask", arguments, caps, who=who, more=more)[1]
        refused(retry("bob", ask, state), "bob with alice's token")
        refused(retry("alice", dict(ask, extra="changed"), state), "alice with other arguments")
        flipped = state[:-1] + ("0" if state[-1] != "0" else "1")
        refused(retry("alice", ask, flipped), "a changed seal")
        inner, expiry, seal = state.rsplit("~", 2)
        other = inner[:-1] + ("0" if inner[-1] != "0" else "1") + "~" + expiry + "~" + seal
        refused(retry("alice", ask, other), "a changed state under the seal")
        later = "%s~%d~%s" % (inner, int(expiry) + 3600, seal)
        refused(retry("alice", ask, later), "an expiry moved later under the seal")
        refused(retry("alice", ask, inner), "the state without its seal")
        # a retry without the answer is asked the same question again, under the
        # same parked token (newly sealed), rather than failed
        again = call("lg_ask", ask, caps, more={"requestState": state})[1].get("result", {})
        check_eq(again.get("resultType"), "input_required", "asked again: %r" % again)
        check_eq(again.get("inputRequests", {}).get("upstream", {}).get("method"),
                 "elicitation/create", "the same question: %r" % again)
        check_eq(again.get("requestState", "").rsplit("~", 2)[0], inner,
                 "the same parked token: %r" % again)
        res = retry("alice", ask, state)
        check("result" in res, "alice's own retry: %r" % res)
        check_eq(upstream_got(res), reply, "alice's own retry answers the upstream")

    def t_state_bound_upstream():
        """A 2026 upstream's own requestState is sealed too, and reaches it unsealed."""
        ask = {"method": "sampling/createMessage", "state": "st-1"}
        caps = {"sampling": {}}
        r, res = call("st_ask", ask, caps)
        state = res["result"]["requestState"]
        st, expiry, seal = state.rsplit("~", 2)
        check(st == "st-1" and len(seal) == 32, "sealed: %r" % state)
        ttl = int(expiry) - time.time()
        check(590 <= ttl <= 601, "the default expiry is 10 minutes away: %.0f s" % ttl)
        more = {"inputResponses": {"q": {"model": "m"}}, "requestState": state}
        refused(call("st_ask", ask, caps, who="bob", more=more)[1], "bob with alice's token")
        refused(call("st_ask", dict(ask, state="st-2"), caps, more=more)[1],
                "alice with other arguments")
        res = call("st_ask", ask, caps, more=more)[1]
        check_eq(res.get("result", {}).get("structuredContent", {}).get("state"), "st-1",
                 "the upstream gets its own state back, unsealed (%r)" % res)

    def t_state_expires():
        """A requestState lapses at gateway.request_state_ttl_ms: the same
        token, refused once its expiry (in the sealed token) has passed."""
        m = manifest()
        m["gateway"]["request_state_ttl_ms"] = 1000
        g = Gateway(ctx, manifest=m, name="gateway-caps-ttl", env=FLEET_SECRET)
        g.start()
        try:
            ask = {"method": "sampling/createMessage", "state": "ttl-1"}
            caps = {"sampling": {}}
            wait_for(lambda: "result" in call("st_ask", ask, caps, via=g)[1], 30,
                     "gateway-caps-ttl serving st_ask")
            state = call("st_ask", ask, caps, via=g)[1]["result"]["requestState"]
            expiry = int(state.rsplit("~", 2)[1])
            check(expiry - time.time() <= 2, "expiry 1 s away: %r" % state)
            more = {"inputResponses": {"q": {"model": "m"}}, "requestState": state}
            # the wall clock passing the sealed expiry is the condition waited on; the
            # expiry is wall time (every replica must judge it alike), so a step of this
            # machine's clock back during the retry can make it good again: such a try
            # is repeated, a refusal-free try without a step fails the test
            for attempt in range(3):
                wait_for(lambda: time.time() > expiry + 1, 10, "the token's expiry to pass",
                         interval=0.1)
                off0 = time.time() - time.monotonic()
                res = call("st_ask", ask, caps, more=more, via=g)[1]
                stepped = (time.time() - time.monotonic()) - off0
                if "error" in res or stepped > -0.5:
                    break
                print("the wall clock stepped %.1f s back during the retry: again" % stepped)
            refused(res, "a lapsed requestState (%r, now %.3f)" % (state, time.time()))
        finally:
            g.stop()

    def t_state_fleet():
        """A 2026 upstream's round asked through one replica is answered through
        another that shares gateway.secret_env; a gateway with another secret
        refuses the token."""
        def replica(name, secret):
            g = Gateway(ctx, manifest=manifest(), name=name, env={SECRET_VAR: secret})
            g.start()
            # its upstream answers (here: a round this client may not be sent)
            wait_for(lambda: call("st_ask", {"method": "roots/list"}, {}, via=g)[1]
                     .get("error", {}).get("code") == -32021, 30, "%s serving st_ask" % name)
            return g
        b = replica("gateway-caps-b", FLEET_SECRET[SECRET_VAR])
        other = replica("gateway-caps-other", "another-secret-0123456789ab")
        try:
            ask = {"method": "sampling/createMessage", "state": "fleet-1"}
            caps = {"sampling": {}}
            state = call("st_ask", ask, caps)[1]["result"]["requestState"]
            more = {"inputResponses": {"q": {"model": "m"}}, "requestState": state}
            refused(call("st_ask", ask, caps, more=more, via=other)[1], "another fleet's gateway")
            res = call("st_ask", ask, caps, more=more, via=b)[1]
            check_eq(res.get("result", {}).get("structuredContent", {}).get("state"), "fleet-1",
                     "the retry through the other replica reaches the upstream (%r)" % res)
        finally:
            b.stop()
            other.stop()

    def t_park_fleet():
        """A legacy upstream's question parked on A is answered through B."""
        if not shutil.which("redis-server"):
            print("skipped: no redis-server")
            return
        from fleet_stores import start_store
        srv, coord, _ = start_store(ctx, "redis", "caps%d" % os.getpid())
        fleet = []

        def replica(name):
            m = manifest()
            m["cluster"] = {"kind": "redis"}
            m["modules"].append(coord)
            g = Gateway(ctx, manifest=m, name=name, env=FLEET_SECRET)
            g.start()
            fleet.append(g)
            # its upstream answers (here: a question this client may not be asked)
            wait_for(lambda: "result" in call("lg_ask", {"method": "roots/list"}, {}, via=g)[1],
                     30, "%s serving lg_ask" % name)
            return g
        try:
            a, b = replica("gateway-caps-ra"), replica("gateway-caps-rb")
            ask = {"method": "elicitation/create"}
            caps = {"elicitation": {}}
            reply = {"action": "accept", "content": {"name": "Grace"}}

            def asked_on_a():
                state = call("lg_ask", ask, caps, via=a)[1]["result"]["requestState"]
                check(state.startswith("mcpg-park-"), "a parked question: %r" % state)
                return state

            def retry(state, who="alice", via=None):
                more = {"inputResponses": {"upstream": reply}, "requestState": state}
                return call("lg_ask", ask, caps, who=who, more=more, via=via or b)[1]
            state = asked_on_a()
            refused(retry(state, who="bob"), "bob's retry through B with alice's token")
            res = retry(state)
            check("result" in res, "alice's retry through B gets the upstream's result: %r" % res)
            check_eq(upstream_got(res), reply, "the upstream behind A got B's client's answer")
            refused(retry(state), "the same token again (its question was answered)")
            state = asked_on_a()
            a.stop()
            t0 = time.monotonic()
            refused(retry(state), "a retry through B once A is gone")
            took = time.monotonic() - t0
            check(took < 10, "refused promptly once the holder is gone (%.1f s)" % took)
        finally:
            for g in fleet:
                if g.proc is not None and g.proc.poll() is None:
                    g.stop()
            srv.stop()

    try:
        return run_tests([
            ("the gateway starts with a legacy and a 2026 upstream", t_start),
            ("legacy upstream, stateless client declaring nothing: never asked", t_legacy_stateless_undeclared),
            ("legacy upstream: an undeclared elicitation mode or sampling tools: -32602", t_legacy_stateless_mode),
            ("legacy upstream: a request no client answers is never passed on", t_legacy_unknown_request),
            ("legacy upstream: no question during completion/complete", t_no_question_on_completion),
            ("legacy upstream, stateless client declaring: asked", t_legacy_stateless_declared),
            ("legacy upstream, session declaring nothing: never asked", t_legacy_session_undeclared),
            ("legacy upstream, session declaring sampling: asked and answered", t_legacy_session_declared),
            ("2026 upstream, stateless client: -32021 unless declared", t_modern_stateless),
            ("2026 upstream, session declaring nothing: -32021", t_modern_session),
            ("a parked question's requestState: alice's same request only", t_state_bound_parked),
            ("a 2026 upstream's requestState: sealed the same way", t_state_bound_upstream),
            ("a requestState lapses at gateway.request_state_ttl_ms", t_state_expires),
            ("a 2026 upstream's round: answered through another replica", t_state_fleet),
            ("a parked question: answered through another replica", t_park_fleet),
        ], ctx)
    finally:
        if gw is not None and gw.proc is not None and gw.proc.poll() is None:
            gw.stop()


if __name__ == "__main__":
    sys.exit(main())
