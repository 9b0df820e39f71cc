#!/usr/bin/python3
"""A reload that changes only the coordinator's config (coordinator_memory's
bounds, or cluster.path for the default instance): the transport is carried over and keeps its legacy
sessions and subscriptions on the coordinator it started with, so the coordinator
cannot be replaced under it. The reload is refused naming the coordinator, the old
generation serves on, and a legacy initialize and a call on an open session answer
afterwards (before the fix the reload was published and the next initialize used the
destroyed coordinator: ASan heap-use-after-free, the gateway crashed)."""
import json
import os
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from gateway import (Context, replace_file, Gateway, check, check_eq, parse_args,  # noqa: E402
                     run_tests, wait_for)
from test_legacy_wire import answer, initialize, request, rpc  # noqa: E402
from test_reload import TOKEN, reload_answer, reload_ok  # noqa: E402


def manifest(ctx, max_keys, tools=("echo",)):
    return {
        "gateway": {"module_dir": ctx.modules,
                    "server": {"admin_token_env": "MCPG_TEST_ADMIN"}, "workers": 2},
        "cluster": {"kind": "single_node"},
        "modules": [{"name": "cluster", "module": "coordinator_memory",
                     "config": {"max_keys": max_keys}},
                    {"name": "mock", "module": "backend_mock",
                     "config": {"tools": [{"name": t} for t in tools]}}],
    }


def echo_on(port, sid, id, message):
    r = request(port, body=rpc("tools/call", {"name": "echo", "arguments": {"message": message}},
                               id=id), session=sid)
    check_eq(r.status, 200, "the call on the session answered (%r)" % r.body[:200])
    res = answer(r)
    check("result" in res, "a result: %r" % res)
    return res["result"]["content"][0]["text"]


def main():
    args = parse_args()
    ctx = Context(args)
    path = ctx.write_manifest(manifest(ctx, 1000), "coord.json")
    gw = Gateway(ctx, config=path, env={"MCPG_TEST_ADMIN": TOKEN}, name="coord").start()
    p = gw.port

    def rewrite(m):
        replace_file(path, m)

    def serves(sid, id, what):
        """The gateway is alive: a new legacy session opens, and one opened before
        (sid) still answers a call."""
        check(gw.proc.poll() is None, "the gateway runs %s\n%s" % (what, gw.stderr_tail()))
        _, sid2 = initialize(p)
        check_eq(echo_on(p, sid2, id, "new"), "Echo: new", "a new session answers %s" % what)
        check_eq(echo_on(p, sid, id + 1, "old"), "Echo: old",
                 "the session opened before answers %s" % what)

    def t_coordinator_config_change_by_post():
        _, sid = initialize(p)
        check_eq(echo_on(p, sid, 1, "old"), "Echo: old", "the session answers")
        rewrite(manifest(ctx, 2000))
        r = reload_answer(p)
        serves(sid, 10, "after the reload")
        check_eq(r.status, 400, "the reload that replaces the coordinator is refused (%r)"
                 % r.body[:400])
        errors = json.loads(r.body)["errors"]
        check(any("coordinator" in e for e in errors), "the error names the coordinator: %r"
              % errors)

    def t_coordinator_config_change_by_sighup():
        _, sid = initialize(p)
        n0 = gw.stderr().count("reload refused (")
        os.kill(gw.proc.pid, signal.SIGHUP)  # the manifest on disk still has max_keys 2000
        wait_for(lambda: gw.stderr().count("reload refused (") > n0, 20, "the SIGHUP refused")
        serves(sid, 20, "after the SIGHUP")

    def t_other_changes_still_reload():
        _, sid = initialize(p)
        rewrite(manifest(ctx, 1000, tools=("echo", "echo2")))
        ans = reload_ok(p)
        check_eq(ans["started"], ["mock"], "only the changed backend started: %r" % ans)
        check("cluster" in ans["carried"], "the coordinator carried over: %r" % ans)
        serves(sid, 30, "after a reload that kept the coordinator")

    def t_cluster_section_change():
        """The default coordinator (the instance `cluster`, made from the cluster
        section): giving it a journal (cluster.path) changes its config."""
        m = manifest(ctx, 1000)
        m["modules"] = m["modules"][1:]
        dpath = ctx.write_manifest(m, "default.json")
        with Gateway(ctx, config=dpath, env={"MCPG_TEST_ADMIN": TOKEN}, name="default") as dg:
            _, sid = initialize(dg.port)
            m["cluster"]["path"] = ctx.path("journal")
            ctx.write_manifest(m, "default.json")
            r = reload_answer(dg.port)
            check(dg.proc.poll() is None, "the gateway runs\n%s" % dg.stderr_tail())
            _, sid2 = initialize(dg.port)
            check_eq(echo_on(dg.port, sid2, 1, "new"), "Echo: new", "a new session answers")
            check_eq(echo_on(dg.port, sid, 2, "old"), "Echo: old", "the old session answers")
            check_eq(r.status, 400, "refused (%r)" % r.body[:400])
            check("coordinator" in r.body.decode(), "names the coordinator: %r" % r.body[:400])

    return run_tests([
        ("coordinator config change by POST is refused, sessions serve on",
         t_coordinator_config_change_by_post),
        ("coordinator config change by SIGHUP is refused", t_coordinator_config_change_by_sighup),
        ("a reload that keeps the coordinator publishes", t_other_changes_still_reload),
        ("the cluster section's change is refused", t_cluster_section_change),
        ("the gateway stops cleanly (exit 0, no sanitizer report)", gw.stop),
    ], ctx)

if __name__ == "__main__":
    sys.exit(main())
