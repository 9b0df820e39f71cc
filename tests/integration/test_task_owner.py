#!/usr/bin/env python3
"""A task is its maker's: nobody else can get, read or cancel it.

backend_everything's slow_compute as a task (legacy wire: params.task), on a
gateway with identity_apikey (alice, bob):
  * the task id alice is shown is sealed for her (<instance>.<id>~<seal>);
  * bob naming it, on his own session, gets exactly what an id nobody made
    gets (tasks/get, tasks/result, tasks/cancel), and the task lives on;
  * alice's id without its seal, or with another seal, is unknown to her too;
  * alice gets and cancels her task.
gateway.secret_env (the fleet's shared task key) must name a variable holding
at least 16 bytes: --check names the key and the variable otherwise.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (new_apikey, Context, Gateway, base_manifest, check, check_eq, parse_args,  # noqa: E402
                     run_cli, run_tests)
from test_legacy_wire import answer, rpc  # noqa: E402
from test_session_owner import legacy  # noqa: E402


def main():
    args = parse_args()
    ctx = Context(args)
    keys_file = ctx.path("keys.json")  # new_apikey's

    alice, bob = new_apikey(ctx, "alice"), new_apikey(ctx, "bob")
    secret_var = "MCPG_TEST_GATEWAY_SECRET"

    def manifest(secret=False):
        m = base_manifest()
        m["modules"] = [{"name": "everything", "module": "backend_everything", "config": {}},
                        {"name": "keys", "module": "identity_apikey",
                         "config": {"keys_file": keys_file}}]
        m["bindings"] = [{"backend": "everything"}]
        m["pipeline"]["identity"] = ["keys"]
        if secret:
            m["gateway"]["secret_env"] = secret_var
        return m

    env = {secret_var: "a fleet's shared secret, 32 bytes!"}
    gw = Gateway(ctx, manifest=manifest(), name="gateway-tasks")
    st = {}

    def session(port, key):
        r = legacy(port, body=rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                 "clientInfo": {"name": "t", "version": "1"}}),
                   key=key)
        check_eq(r.status, 200, "initialize (%r)" % r.body[:200])
        return r.header("mcp-session-id")

    def make_task(port, sid, key):
        r = legacy(port, body=rpc("tools/call", {"name": "slow_compute",
                                                 "arguments": {"seconds": 60, "label": "x"},
                                                 "task": {"ttl": 60000}}, id=2), sid=sid, key=key)
        out = answer(r)
        check("result" in out, "a task made (%r)" % out)
        return out["result"]["task"]["taskId"]

    def task_call(port, sid, key, method, task_id, id=3):
        return answer(legacy(port, body=rpc(method, {"taskId": task_id}, id=id), sid=sid, key=key))

    def t_start():
        gw.start()
        st["alice"], st["bob"] = session(gw.port, alice), session(gw.port, bob)
        st["task"] = make_task(gw.port, st["alice"], alice)
        check(re.fullmatch(r"everything\.[^~]+~[0-9a-f]{32}", st["task"]),
              "the task id is sealed: %r" % st["task"])

    def t_bob_sees_nothing():
        tid = st["task"]
        unknown = tid.split(".")[0] + ".task-999999-00~" + "0" * 32
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            got = task_call(gw.port, st["bob"], bob, method, tid)
            want = task_call(gw.port, st["bob"], bob, method, unknown)
            check("error" in want, "%s of an id nobody made: an error (%r)" % (method, want))
            got.pop("id", None), want.pop("id", None)
            want["error"]["message"] = want["error"]["message"].replace(unknown, tid)
            check_eq(got, want, "%s of alice's task by bob = of an unknown task" % method)
        out = task_call(gw.port, st["alice"], alice, "tasks/get", tid)
        check_eq(out.get("result", {}).get("status"), "working", "her task lives on (%r)" % out)

    def t_seal_required():
        tid = st["task"]
        bare = tid.split("~")[0]
        other = bare + "~" + ("0" * 32)
        for t in (bare, other):
            out = task_call(gw.port, st["alice"], alice, "tasks/get", t)
            check("error" in out, "alice naming %r: unknown (%r)" % (t, out))

    def t_alice_cancels():
        out = task_call(gw.port, st["alice"], alice, "tasks/cancel", st["task"])
        check("result" in out, "alice cancels her task (%r)" % out)

    def t_secret_env_checked():
        m = manifest(True)
        path = ctx.path("secret.json")
        with open(path, "w") as f:
            json.dump(m, f)
        rc, out, err = run_cli(ctx, ["--check", "--config", path], env={})
        check(rc == 2 and "gateway.secret_env" in err and secret_var in err,
              "a missing secret named by its key and variable: %d %s" % (rc, err))
        rc, out, err = run_cli(ctx, ["--check", "--config", path], env={secret_var: "short"})
        check(rc == 2 and "16 bytes" in err, "a short secret refused: %d %s" % (rc, err))
        rc, out, err = run_cli(ctx, ["--check", "--config", path], env=env)
        check_eq(rc, 0, "a good secret passes (%s)" % err)

    def t_stop():
        gw.stop()

    try:
        return run_tests([("the gateways start; alice makes a task", t_start),
                          ("bob gets what an unknown task gets, for every task method",
                           t_bob_sees_nothing),
                          ("an id without its seal, or with another, is unknown", t_seal_required),
                          ("alice cancels her task", t_alice_cancels),
                          ("gateway.secret_env: the variable must hold a secret", t_secret_env_checked),
                          ("the gateways stop", t_stop)], ctx)
    finally:
        if gw.proc is not None and gw.proc.poll() is None:
            gw.stop()


if __name__ == "__main__":
    sys.exit(main())
