#!/usr/bin/python3
"""Virtual servers: one gateway serving several MCP endpoints, each with its own bindings
(so its own lists and names), its own pipeline (here: its own policy), its own server info
and instructions, while the gateway's own /mcp stays as it is.

One backend_mock instance "mock" (echo, ping) is bound by three servers: /mcp as the top
level binds it without a prefix; /mcp/eng with the prefix "eng" and a policy that lets
alice call anything; /mcp/ops with the prefix "ops", ping only, and a policy that lets bob
call anything. Checked on both wires:
  * each server lists its own names; a name of another server is not found there;
  * alice is served on eng and refused on ops by ops' policy, bob the other way round;
  * a legacy session opened on /mcp/eng answers there, and is an unknown session
    (404, -32001) on /mcp/ops and on /mcp, for a call, its GET stream and its DELETE;
  * initialize on /mcp/eng answers eng's serverInfo and instructions;
  * every audit record names its server (none for /mcp); mcpg_server_calls_total counts
    per server and outcome;
  * a session subscribes only to resources its server serves;
  * a task made on one server is unknown on another that binds the same backend;
  * a reload that removes ops and adds "new" leaves alice's eng session working;
    /mcp/ops is then unknown;
  * two gateways sharing a Redis coordinator: a session opened on A's /mcp/eng is served
    on B's /mcp/eng and unknown on B's /mcp/ops;
  * --check names a bad server key.
"""
import json
import os
import re
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, base_manifest, build_request, check, check_eq,  # noqa: E402
                     new_apikey, parse_args, read_audit, readyz_coordinator, rpc_body, run_cli,
                     run_tests, send_one, stateless_headers, wait_for)
from test_legacy_wire import answer, request_bytes, rpc  # noqa: E402
from fleet_stores import start_store  # noqa: E402

WAIT = 15
REFUSED_2026 = -32600  # a refusal on the stateless wire


def stateless(port, path, method, params=None, key=None, name=None, id=1):
    """(Response, its JSON-RPC object) of one stateless request on path."""
    headers = stateless_headers(method, name)
    if key:
        headers.append(("X-API-Key", key))
    r = send_one(port, build_request(port, path=path, headers=headers,
                                     body=rpc_body(method, params, id=id)))
    return r, r.rpc()


def legacy(port, path, method="POST", body=None, sid=None, key=None):
    with Conn(port) as c:
        c.send(request_bytes(port, method, body, session=sid, path=path,
                             extra=[("X-API-Key", key)] if key else ()))
        return c.read_response()


def init_body():
    return rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}})


def open_session(port, path, key):
    r = legacy(port, path, body=init_body(), key=key)
    check_eq(r.status, 200, "initialize on %s (%r)" % (path, r.body[:300]))
    sid = r.header("mcp-session-id")
    check(sid and re.fullmatch(r"[0-9a-f]{32}", sid), "a session id: %r" % sid)
    return sid, answer(r)


def tool_names(port, path, key):
    r, msg = stateless(port, path, "tools/list", {}, key=key)
    check_eq(r.status, 200, "tools/list on %s (%r)" % (path, r.body[:300]))
    return sorted(t["name"] for t in msg["result"]["tools"])


def call(port, path, tool, key, id=5):
    """The JSON-RPC object of a stateless tools/call."""
    return stateless(port, path, "tools/call", {"name": tool, "arguments": {"message": "hi"}},
                     key=key, name=tool, id=id)[1]


def policy(principal):
    return {"rules": [{"id": "only-" + principal, "principal": principal, "tools": "*",
                       "prompts": "*", "resources": "*"}]}


def manifest(ctx, audit, servers=("eng", "ops"), coordinator=None):
    m = base_manifest(audit_path=audit, tools=[{"name": "echo"}, {"name": "ping"}],
                      mock_config={"resources": [{"uri": "mock://r", "text": "r"}]})
    m["modules"] += [
        {"name": "keys", "module": "identity_apikey", "config": {"keys_file": ctx.path("keys.json")}},
        {"name": "eng_rules", "module": "policy_rules", "config": policy("alice")},
        {"name": "ops_rules", "module": "policy_rules", "config": policy("bob")},
        {"name": "prom", "module": "metrics_prometheus"},
    ]
    if coordinator:
        m["cluster"] = {"kind": coordinator["module"].split("_")[1]}
        m["modules"].append(coordinator)
        m["gateway"]["secret_env"] = "MCPG_TEST_SERVERS_SECRET"
    m["pipeline"]["identity"] = ["keys"]
    every = {
        "eng": {"name": "eng", "bindings": [{"backend": "mock", "prefix": "eng"}],
                "pipeline": {"identity": ["keys"], "policy": ["eng_rules"], "audit": ["audit"]},
                "instructions": "Engineering tools: eng_echo repeats what it is given.",
                "server_info": {"name": "eng-tools", "version": "2.1.0", "title": "Eng"}},
        "ops": {"name": "ops", "bindings": [{"backend": "mock", "prefix": "ops",
                                             "allow": ["ping"], "deny_resources": ["mock://r"]}],
                "pipeline": {"identity": ["keys"], "policy": ["ops_rules"], "audit": ["audit"]}},
        "new": {"name": "new", "path": "/teams/new", "bindings": [{"backend": "mock",
                                                                   "prefix": "n"}]},
    }
    m["servers"] = [every[s] for s in servers]
    return m


def counter(port, name, **labels):
    r = send_one(port, build_request(port, "GET", "/metrics"))
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for ln in r.body.decode().splitlines():
        mt = re.match(r"^%s\{(.*)\} (\S+)$" % re.escape(name), ln)
        if mt and ",".join(sorted(mt.group(1).split(","))) == want:
            return float(mt.group(2))
    return 0.0


def expect_unknown_session(r, what):
    check_eq(r.status, 404, "%s: status (%r)" % (what, r.body[:200]))
    check_eq(answer(r).get("error", {}).get("code"), -32001, what + ": -32001")
    check(not r.header("mcp-session-id"), what + ": no session id in the answer")


def main():
    args = parse_args()
    ctx = Context(args)
    alice = new_apikey(ctx, "alice")
    bob = new_apikey(ctx, "bob")
    audit = ctx.path("audit.jsonl")
    cfg = {}
    gw = Gateway(ctx, manifest=manifest(ctx, audit), name="gateway-servers")
    state = {}

    def t_start():
        gw.start()
        cfg["path"] = gw.config

    def t_each_lists_its_own():
        p = gw.port
        check_eq(tool_names(p, "/mcp", alice), ["echo", "ping"], "/mcp as before")
        check_eq(tool_names(p, "/mcp/eng", alice), ["eng_echo", "eng_ping"], "eng's names")
        check_eq(tool_names(p, "/mcp/ops", bob), ["ops_ping"], "ops' names (ping only)")
        r, msg = stateless(p, "/mcp/nope", "tools/list", {}, key=alice)
        check_eq(r.status, 404, "a path no server has (%r)" % r.body[:200])

    def t_policy_per_server():
        p = gw.port
        ok = call(p, "/mcp/eng", "eng_echo", alice)
        check("result" in ok, "alice on eng: served (%r)" % ok)
        refused = call(p, "/mcp/ops", "ops_ping", alice)
        check_eq(refused.get("error", {}).get("code"), REFUSED_2026, "alice on ops: refused")
        check("result" in call(p, "/mcp/ops", "ops_ping", bob), "bob on ops: served")
        refused = call(p, "/mcp/eng", "eng_echo", bob)
        check_eq(refused.get("error", {}).get("code"), REFUSED_2026, "bob on eng: refused")
        other = call(p, "/mcp/ops", "eng_echo", bob)
        check("error" in other and "result" not in other,
              "eng's name on ops is not found there (%r)" % other)
        check("result" in call(p, "/mcp", "echo", bob), "/mcp has no policy: served")

    def t_legacy_sessions_belong_to_their_server():
        p = gw.port
        sid, init = open_session(p, "/mcp/eng", alice)
        state["sid"] = sid
        res = init.get("result", {})
        check_eq(res.get("serverInfo", {}).get("name"), "eng-tools", "eng's serverInfo")
        check_eq(res.get("serverInfo", {}).get("version"), "2.1.0", "eng's version")
        check(res.get("instructions", "").startswith("Engineering tools"),
              "eng's instructions (%r)" % res.get("instructions"))
        body = rpc("tools/call", {"name": "eng_echo", "arguments": {"message": "x"}}, id=9)
        r = legacy(p, "/mcp/eng", body=body, sid=sid, key=alice)
        check_eq(r.status, 200, "a call on the session's own server")
        check("result" in answer(r), "served on eng (%r)" % answer(r))
        for path in ("/mcp/ops", "/mcp"):
            expect_unknown_session(legacy(p, path, body=body, sid=sid, key=alice),
                                   "eng's session named on %s" % path)
            expect_unknown_session(legacy(p, path, "GET", sid=sid, key=alice),
                                   "eng's session's GET stream on %s" % path)
            expect_unknown_session(legacy(p, path, "DELETE", sid=sid, key=alice),
                                   "eng's session's DELETE on %s" % path)
        r = legacy(p, "/mcp/eng", body=rpc("ping", id=10), sid=sid, key=alice)
        check_eq(r.status, 200, "the session survived its name on other servers")
        _, top = open_session(p, "/mcp", alice)
        check(top["result"]["serverInfo"]["name"] != "eng-tools", "/mcp keeps its own info")
        check("instructions" not in top["result"], "/mcp sets no instructions")

    def t_subscriptions_stay_on_their_server():
        """A session subscribes only to what its server serves: ops does not serve
        mock://r (eng does), so bob's subscription on ops is refused."""
        p = gw.port
        body = rpc("resources/subscribe", {"uri": "mock://r"}, id=20)
        bob_ops, init = open_session(p, "/mcp/ops", bob)
        caps = init["result"]["capabilities"]
        check("tools" in caps and "resources" not in caps,
              "ops advertises what it serves: tools, no resources (%r)" % caps)
        _, init = open_session(p, "/mcp/eng", alice)
        check("resources" in init["result"]["capabilities"], "eng serves resources")
        out = answer(legacy(p, "/mcp/ops", body=body, sid=bob_ops, key=bob))
        check_eq(out.get("error", {}).get("code"), -32602, "ops' session on eng's uri (%r)" % out)
        out = answer(legacy(p, "/mcp/eng", body=body, sid=state["sid"], key=alice))
        check_eq(out.get("result"), {}, "eng's session on eng's uri (%r)" % out)

    def t_audit_and_metrics_name_the_server():
        recs = wait_for(lambda: [r for r in read_audit(audit) if r.get("tool") == "ops_ping"],
                        WAIT, "ops' records")
        check(all(r.get("server") == "ops" for r in recs), "ops' records name ops: %r" % recs)
        eng = [r for r in read_audit(audit) if r.get("tool") == "eng_echo"]
        check(eng and all(r.get("server") == "eng" for r in eng), "eng's records name eng")
        check(any(r.get("event", "").endswith(".denied") for r in eng), "bob's refusal audited")
        top = [r for r in read_audit(audit) if r.get("tool") == "echo"]
        check(top and all("server" not in r for r in top), "/mcp's records name no server")
        p = gw.port
        check(counter(p, "mcpg_server_calls_total", server="eng", outcome="ok") >= 2,
              "eng's calls counted")
        check(counter(p, "mcpg_server_calls_total", server="ops", outcome="denied") >= 1,
              "ops' refusals counted")

    def t_reload_keeps_other_servers_sessions():
        """Under load on eng (its session and stateless calls), a reload removes ops and
        adds new: every eng call is answered, before, during and after."""
        p = gw.port
        stop, results = threading.Event(), []

        def load():
            n = 100
            while not stop.is_set():
                n += 1
                body = rpc("tools/call", {"name": "eng_echo", "arguments": {"message": "l"}},
                           id=n)
                try:  # a failure is recorded, so it is reported as one (not as a stall)
                    r = legacy(p, "/mcp/eng", body=body, sid=state["sid"], key=alice)
                    results.append(("session", r.status, "result" in answer(r), r.body[:200]))
                    msg = call(p, "/mcp/eng", "eng_echo", alice, id=n)
                    results.append(("stateless", 200, "result" in msg, msg))
                except Exception as e:  # noqa: BLE001
                    results.append(("raised", 0, False, repr(e)))

        th = threading.Thread(target=load)
        th.start()
        try:
            wait_for(lambda: len(results) >= 20, WAIT, "load on eng before the reload")
            with open(cfg["path"], "w") as f:
                json.dump(manifest(ctx, audit, servers=("eng", "new")), f)
            gw.signal(signal.SIGHUP)
            wait_for(lambda: legacy(p, "/teams/new", body=init_body(), key=alice).status == 200,
                     WAIT, "the new server served after the reload")
            seen = len(results)
            wait_for(lambda: len(results) >= seen + 20, WAIT, "load on eng after the reload")
        finally:
            stop.set()
            th.join()
        bad = [x for x in results if x[1] != 200 or not x[2]]
        check(not bad, "%d of %d eng calls under the reload failed: %r"
              % (len(bad), len(results), bad[:5]))
        check_eq(tool_names(p, "/teams/new", alice), ["n_echo", "n_ping"], "new's names")
        r = legacy(p, "/mcp/eng", body=rpc("tools/call", {"name": "eng_echo",
                                                          "arguments": {"message": "y"}}, id=11),
                   sid=state["sid"], key=alice)
        check_eq(r.status, 200, "alice's eng session after the reload (%r)" % r.body[:200])
        check("result" in answer(r), "served (%r)" % answer(r))
        r, _ = stateless(p, "/mcp/ops", "tools/list", {}, key=bob)
        check_eq(r.status, 404, "a removed server is not found")

    def t_fleet():
        srv, coord, _ = start_store(ctx, "redis", "servers%d" % os.getpid())
        env = {"MCPG_TEST_SERVERS_SECRET": "x" * 32}
        a = Gateway(ctx, manifest=manifest(ctx, ctx.path("a.jsonl"), coordinator=coord),
                    env=env, name="servers-a")
        b = Gateway(ctx, manifest=manifest(ctx, ctx.path("b.jsonl"), coordinator=coord),
                    env=env, name="servers-b")
        try:
            with a, b:
                for g in (a, b):  # a replica serves before its store connection is up
                    wait_for(lambda: readyz_coordinator(g.port) == "ok", WAIT,
                             "%s's coordinator connected" % g.name)
                sid, _ = open_session(a.port, "/mcp/eng", alice)
                body = rpc("tools/call", {"name": "eng_echo", "arguments": {"message": "z"}},
                           id=12)
                r = legacy(b.port, "/mcp/eng", body=body, sid=sid, key=alice)
                check_eq(r.status, 200, "A's eng session on B's eng (%r)" % r.body[:200])
                check("result" in answer(r), "served on B (%r)" % answer(r))
                expect_unknown_session(legacy(b.port, "/mcp/ops", body=body, sid=sid, key=alice),
                                       "A's eng session on B's ops")
                expect_unknown_session(legacy(b.port, "/mcp", body=body, sid=sid, key=alice),
                                       "A's eng session on B's /mcp")
        finally:
            srv.stop()

    def t_check_names_the_key():
        m = manifest(ctx, audit)
        m["servers"][1]["path"] = "/metrics"
        m["servers"][0]["bindings"][0]["watch"] = {"interval_ms": 1000}
        m["servers"].append({"name": "Bad Name"})
        bad = ctx.write_manifest(m, "bad-servers.json")
        rc, _, err = run_cli(ctx, ["--check", "--config", bad])
        check_eq(rc, 2, "--check refuses it (%s)" % err)
        for want in ("servers[1].path", "servers[0].bindings[0].watch", "servers[2].name"):
            check(want in err, "--check names %s: %s" % (want, err))
        m = manifest(ctx, audit)  # valid keys; one server's lists offer a name twice
        m["servers"].append({"name": "twice", "bindings": [{"backend": "mock"},
                                                           {"backend": "mock"}]})
        rc, _, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(m, "twice.json")])
        check(rc == 2 and 'servers[2].bindings[1]: tool "echo" is offered twice' in err,
              "a name offered twice within one server (%d): %s" % (rc, err))

    def t_task_stays_on_its_server():
        """A task made on one server is unknown on another that binds the same backend
        (its id is sealed for its server too), and answered on its own."""
        m = base_manifest()
        m["modules"] = [{"name": "everything", "module": "backend_everything", "config": {}},
                        {"name": "keys", "module": "identity_apikey",
                         "config": {"keys_file": ctx.path("keys.json")}}]
        m["bindings"] = [{"backend": "everything"}]
        m["pipeline"]["identity"] = ["keys"]
        m["servers"] = [{"name": "one"}, {"name": "two"}]
        with Gateway(ctx, manifest=m, name="servers-tasks") as g:
            one, _ = open_session(g.port, "/mcp/one", alice)
            two, _ = open_session(g.port, "/mcp/two", alice)
            r = legacy(g.port, "/mcp/one", body=rpc("tools/call", {
                "name": "slow_compute", "arguments": {"seconds": 60, "label": "x"},
                "task": {"ttl": 60000}}, id=2), sid=one, key=alice)
            tid = answer(r)["result"]["task"]["taskId"]

            def get(path, sid, task_id):
                return answer(legacy(g.port, path, body=rpc("tasks/get", {"taskId": task_id},
                                                            id=3), sid=sid, key=alice))
            unknown = tid.split(".")[0] + ".task-999999-00~" + "0" * 32
            got, want = get("/mcp/two", two, tid), get("/mcp/two", two, unknown)
            check("error" in want, "an id nobody made: an error (%r)" % want)
            want["error"]["message"] = want["error"]["message"].replace(unknown, tid)
            check_eq(got, want, "one's task on two = an unknown task")
            got = get("/mcp/one", one, tid)
            check_eq(got.get("result", {}).get("status"), "working", "on one (%r)" % got)
            r = legacy(g.port, "/mcp/one", body=rpc("tasks/cancel", {"taskId": tid}, id=4),
                       sid=one, key=alice)
            check("result" in answer(r), "cancelled on one (%r)" % answer(r))

    def t_stop():
        gw.stop()  # exit 0, no sanitizer report

    tests = [t_start, t_each_lists_its_own, t_policy_per_server,
             t_legacy_sessions_belong_to_their_server, t_subscriptions_stay_on_their_server,
             t_audit_and_metrics_name_the_server,
             t_reload_keeps_other_servers_sessions, t_check_names_the_key, t_stop,
             t_task_stays_on_its_server, t_fleet]
    sys.exit(run_tests([(t.__name__, t) for t in tests], ctx))


if __name__ == "__main__":
    main()
