#!/usr/bin/env python3
"""What upstreams may reach: one principal's call never meets another's, a backend
never speaks for another (fake_mcp_upstream.py, hostile where it counts).

One gateway, identity_apikey with two principals (alice, bob), and these backends:
  sd    stdio upstream, untied_messages default ("drop")
  hd    HTTP session-wire upstream with a GET stream, default ("drop")
  ss    stdio upstream, untied_messages "sole_call"
  evil  stdio upstream bound with no prefix, listed first in the manifest
  good  stdio upstream serving its echo as "transfer", listed after evil
  mock  backend_mock serving the resource mock://r

* pair: alice and bob call at once; the upstream, once both calls have started,
  sends a log line and an elicitation/create carrying the caller's secret on the
  channel that names no call (stdout; the HTTP GET stream). Neither the other
  caller's answer (stateless wire: an input_required would hold the question)
  nor their stream (legacy sessions, which declared elicitation) ever carries it;
  the upstream's question is answered with an error; the gateway counts it. With
  "sole_call" two callers at once still get nothing; one caller alone gets its own
  question (input_required), the positive control, and only that caller can answer
  it: bob's retry with alice's requestState is answered as for an unknown one.
* names: evil later lists "transfer" (no prefix, earlier in the manifest): the
  name stays with good, and the rebuild reports the newcomer left out.
* resources: evil says mock://r (the mock's) changed: a subscribed session's GET
  stream never hears it (the next list change it does hear), the gateway logs it.
* environment: a stdio upstream's program gets PATH, the locale, TZ, what
  inherit_env names and env; never the gateway's secrets.
* depth: an answer nested deeper than the parser reads fails the call at once,
  naming the backend, over stdio and HTTP, not at its timeout.
"""
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (new_apikey, Conn, Context, Gateway, _child_setup, base_manifest, build_request,  # noqa: E402
                     check, check_eq, parse_args, rpc_body, run_tests, stateless_headers,
                     stop_process, wait_for)
from test_legacy_wire import head_of, read_stream, request, request_bytes, rpc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_mcp_upstream.py")
SECRETS = {"alice": "alice-secret-7f3a", "bob": "bob-secret-9c1e"}
GATEWAY_SECRETS = {"MCPG_ROUTING_ADMIN_TOKEN": "admin-token-5e2b", "SHARED_VAR": "shared-31d0"}
ELICITING = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


def main():
    args = parse_args()
    ctx = Context(args)
    keys_file = ctx.path("keys.json")  # new_apikey's

    keys = {"alice": new_apikey(ctx, "alice"), "bob": new_apikey(ctx, "bob")}
    procs = {}

    def http_fake():
        pf = ctx.path("hd.port")
        procs["hd"] = subprocess.Popen([sys.executable, FAKE, "--http", "0", "--port-file", pf,
                                        "--get", "sse"], preexec_fn=_child_setup)
        wait_for(lambda: os.path.exists(pf) and os.path.getsize(pf) > 0, 15,
                 "the HTTP fake listening")
        with open(pf) as f:
            return int(f.read())

    def stdio(**more):
        cfg = {"command": sys.executable, "args": [FAKE], "restart_min_ms": 100,
               "restart_max_ms": 400}
        cfg.update(more)
        return cfg

    def manifest(hd_port):
        m = base_manifest(mock_config={"resources": [{"uri": "mock://r", "name": "r",
                                                      "text": "r"}]})
        m["gateway"]["log_level"] = "info"
        ups = [("evil", stdio()), ("good", stdio()),
               ("sd", stdio(inherit_env=["SHARED_VAR"], env={"SET": "1"})),
               ("hd", {"url": "http://127.0.0.1:%d/mcp" % hd_port, "wire": "legacy"}),
               ("ss", stdio(untied_messages="sole_call"))]
        for name, cfg in ups:
            m["modules"].append({"name": name, "module": "backend_mcp", "timeout_ms": 30000,
                                 "config": cfg})
        m["modules"].append({"name": "keys", "module": "identity_apikey",
                             "config": {"keys_file": keys_file}})
        m["pipeline"]["identity"] = ["keys"]
        m["bindings"] = [
            {"backend": "mock"},
            {"backend": "evil", "prefix": "", "allow": ["add_tool", "spoof", "deep", "transfer"]},
            {"backend": "good", "prefix": "", "allow": ["echo"], "rename": {"echo": "transfer"}},
            {"backend": "sd", "prefix": "sd"}, {"backend": "hd", "prefix": "hd"},
            {"backend": "ss", "prefix": "ss"}]
        return m

    gw = None
    paired = {"sd": 0, "hd": 0, "ss": 0}  # pair calls each upstream has seen

    def call(who, tool, arguments, id=1, more=None):
        """A stateless tools/call as who (a client that declares elicitation);
        more: other members of params (a retry's requestState)."""
        params = {"name": tool, "arguments": arguments, "_meta": ELICITING}
        params.update(more or {})
        body = rpc_body("tools/call", params, id=id)
        raw = build_request(gw.port, headers=stateless_headers("tools/call", tool) +
                            [("X-API-Key", keys[who])], body=body)
        with Conn(gw.port, timeout=60) as c:
            c.send(raw)
            r = c.read_response()
        return r, r.body.decode("utf-8", "replace")

    def at_once(fn, whos):
        """fn(who) for each at the same time; a failure in any is raised here."""
        out, errors = {}, []

        def run(w):
            try:
                out[w] = fn(w)
            except Exception as e:  # noqa: BLE001 - re-raised below, in the test's thread
                errors.append(e)
        threads = [threading.Thread(target=run, args=(w,)) for w in whos]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        check_eq(sorted(out), sorted(whos), "every caller answered")
        return out

    def other(who):
        return "bob" if who == "alice" else "alice"

    def check_apart(texts, what):
        for who, text in texts.items():
            check(SECRETS[other(who)] not in text,
                  "%s: %s's answer carries %s's secret: %s" % (what, who, other(who), text[:600]))

    def untied_count():
        return len(re.findall(r"tied to no call", gw.stderr()))

    def t_start():
        nonlocal gw
        gw = Gateway(ctx, manifest=manifest(http_fake()), name="gateway-routing",
                     env=GATEWAY_SECRETS)
        gw.start()
        want = {"transfer", "sd_pair", "hd_pair", "ss_pair", "spoof", "deep", "add_tool"}

        def listed():
            r, text = call("alice", "transfer", {"message": "warm"})
            body = build_request(gw.port, headers=stateless_headers("tools/list") +
                                 [("X-API-Key", keys["alice"])],
                                 body=rpc_body("tools/list", {}))
            with Conn(gw.port) as c:
                c.send(body)
                names = {t["name"] for t in c.read_response().rpc()["result"]["tools"]}
            return want <= names
        wait_for(listed, 30, "every upstream's tools listed")

    def stateless_pair(prefix, sole=False):
        def run(who):
            return call(who, prefix + "_pair", {"secret": SECRETS[who], "peers": paired[prefix] + 2})
        before = untied_count()
        out = at_once(run, ["alice", "bob"])
        paired[prefix] += 2
        texts = {who: text for who, (r, text) in out.items()}
        check_apart(texts, prefix)
        for who, (r, text) in out.items():
            check_eq(r.status, 200, "%s %s_pair (%s)" % (who, prefix, text[:300]))
            res = r.rpc().get("result", {})
            check(res.get("resultType") != "input_required",
                  "%s: %s was asked a question no call of theirs was tied to: %s"
                  % (prefix, who, text[:600]))
            check("pair %s:" % SECRETS[who] in text and "error" in text,
                  "%s: the upstream's untied question was refused (%s)" % (prefix, text[:600]))
        wait_for(lambda: untied_count() > before, 10, "the untied messages counted in the log")

    def t_pair_stdio():
        stateless_pair("sd")

    def t_pair_http():
        stateless_pair("hd")

    def t_pair_sole_two():
        stateless_pair("ss")

    def legacy_session(who):
        r = request(gw.port, body=rpc("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"}}), extra=[("X-API-Key", keys[who])])
        check_eq(r.status, 200, "initialize as %s (%r)" % (who, r.body[:200]))
        return r.header("mcp-session-id")

    def legacy_pair(prefix):
        sids = {who: legacy_session(who) for who in ("alice", "bob")}

        def run(who):
            with Conn(gw.port, timeout=60) as c:
                c.send(request_bytes(gw.port, body=rpc("tools/call", {
                    "name": prefix + "_pair", "arguments": {"secret": SECRETS[who],
                                                            "peers": paired[prefix] + 2}}, id=3),
                    session=sids[who], extra=[("X-API-Key", keys[who])]))
                return c.read_response().body.decode("utf-8", "replace")
        texts = at_once(run, ["alice", "bob"])
        paired[prefix] += 2
        check_apart(texts, "legacy " + prefix)
        for who, text in texts.items():
            check("pair %s:" % SECRETS[who] in text, "legacy %s: %s's answer (%s)"
                  % (prefix, who, text[:400]))
            check("log for" not in text and "question for" not in text,
                  "legacy %s: an untied message reached %s's stream: %s" % (prefix, who, text[:600]))

    def t_legacy_stdio():
        legacy_pair("sd")

    def t_legacy_http():
        legacy_pair("hd")

    def t_sole_alone():
        """Alice alone under sole_call is asked her own question; bob, given her
        requestState, is answered as for an unknown one; her own retry answers
        the upstream."""
        secret = SECRETS["alice"]
        first = {"secret": secret, "peers": paired["ss"] + 1}
        r, text = call("alice", "ss_pair", first)
        paired["ss"] += 1
        res = r.rpc().get("result", {})
        check_eq(res.get("resultType"), "input_required",
                 "sole_call, one caller: the question reaches it (%s)" % text[:400])
        check("question for " + secret in text, "its own question: %s" % text[:400])
        reply = {"upstream": {"action": "accept", "content": {}}}

        def retry(who, state):
            # a retry is the same request again: its arguments too
            return call(who, "ss_pair", first,
                        more={"inputResponses": reply, "requestState": state})
        r, text = retry("bob", res.get("requestState"))
        err = r.rpc().get("error", {})
        check(err.get("code") == -32602 and "requestState is unknown" in err.get("message", ""),
              "bob with alice's requestState: answered as an unknown one (%s)" % text[:300])
        r, text = retry("alice", res.get("requestState"))
        check("pair %s:" % secret in text and "accept" in text,
              "alice's own retry answers the upstream's question (%s)" % text[:300])

    def t_names():
        r, text = call("alice", "transfer", {"message": "before"})
        check("echo: before" in text, "transfer is good's echo: %s" % text[:300])
        r, text = call("alice", "add_tool", {"name": "transfer"})
        check("added" in text, "evil adds transfer: %s" % text[:300])
        wait_for(lambda: re.search(r'tool \\"?transfer\\"? is offered twice \(by \\"?good',
                                   gw.stderr()), 15,
                 "the rebuild reporting evil's transfer left out")
        r, text = call("bob", "transfer", {"message": "after", "secret": SECRETS["bob"]})
        check("echo: after" in text, "transfer still reaches good, not evil: %s" % text[:300])

    def t_spoofed_update():
        sid = legacy_session("alice")
        r = request(gw.port, body=rpc("resources/subscribe", {"uri": "mock://r"}, id=4),
                    session=sid, extra=[("X-API-Key", keys["alice"])])
        check_eq(r.status, 200, "subscribe to mock://r (%r)" % r.body[:200])
        with Conn(gw.port, timeout=30) as g:
            g.send(request_bytes(gw.port, "GET", session=sid, accept="text/event-stream",
                                 extra=[("X-API-Key", keys["alice"])]))
            status, head = head_of(g)
            check_eq(status, 200, "the GET stream (%s)" % head[:200])
            r, text = call("bob", "spoof", {"uri": "mock://r"})
            check("spoofed" in text, "evil spoofs: %s" % text[:300])
            wait_for(lambda: "which it does not serve" in gw.stderr(), 15,
                     "the spoofed update logged as dropped")
            # a list change after it, on the same path: the stream hears that, and
            # nothing before it
            call("bob", "add_tool", {"name": "marker"})
            text, ended = read_stream(g, until="list_changed", timeout=20)
            check("resources/updated" not in text,
                  "evil's word that mock://r changed reached alice: %s" % text[:400])

    def t_environment():
        def environ(tool):
            r, text = call("alice", tool, {})
            return json.loads(r.rpc()["result"]["content"][0]["text"])["environ"]
        baseline = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}  # LC_CTYPE: Python may set it
        for tool, extra in (("sd_whoami", {"SHARED_VAR": "shared-31d0", "SET": "1"}),
                            ("ss_whoami", {})):
            env = environ(tool)
            check("MCPG_ROUTING_ADMIN_TOKEN" not in env and "admin-token-5e2b" not in json.dumps(env),
                  "%s: the gateway's admin token reached the upstream's program" % tool)
            check(set(env) <= baseline | set(extra),
                  "%s: variables beyond the baseline: %s" % (tool, sorted(set(env) - baseline)))
            for k, v in extra.items():
                check_eq(env.get(k), v, "%s: %s" % (tool, k))
            check_eq(env.get("PATH"), os.environ.get("PATH"), "%s: the gateway's PATH" % tool)

    def t_deep():
        for tool, backend in (("deep", "evil"), ("hd_deep", "hd")):
            t0 = time.monotonic()
            r, text = call("alice", tool, {"depth": 200})
            took = time.monotonic() - t0
            err = r.rpc().get("error", {})
            check_eq(err.get("code"), -32000, "%s: the code (%s)" % (tool, text[:300]))
            check('backend \\"%s\\"' % backend in text or 'backend "%s"' % backend in err.get("message", ""),
                  "%s: the error names the backend: %s" % (tool, text[:300]))
            check("nested deeper" in err.get("message", ""), "%s: says why: %s" % (tool, text[:300]))
            check(took < 15, "%s: answered in %.1f s, not at its 30 s timeout" % (tool, took))

    def t_stop():
        gw.stop()
        for p in procs.values():
            stop_process(p)

    try:
        return run_tests([
            ("the gateway starts with five upstreams and two principals", t_start),
            ("stdio: two callers' untied question and log line reach neither", t_pair_stdio),
            ("HTTP GET stream: the same", t_pair_http),
            ("sole_call with two callers in flight: neither", t_pair_sole_two),
            ("legacy sessions over stdio: neither stream carries the other's", t_legacy_stdio),
            ("legacy sessions over HTTP: the same", t_legacy_http),
            ("sole_call, one caller alone: its own question, answered by it alone", t_sole_alone),
            ("a name stays with the backend that served it", t_names),
            ("a backend's word on another's resource is dropped", t_spoofed_update),
            ("an answer nested too deep fails at once, naming the backend", t_deep),
            ("a stdio upstream's program gets none of the gateway's secrets", t_environment),
            ("everything stops", t_stop),
        ], ctx)
    finally:
        if gw is not None and gw.proc is not None and gw.proc.poll() is None:
            gw.stop()
        for p in procs.values():
            if p.poll() is None:
                stop_process(p)


if __name__ == "__main__":
    sys.exit(main())
