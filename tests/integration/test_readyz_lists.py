#!/usr/bin/python3
"""GET /readyz waits for every backend's first lists (docs/faults.md, the transport's
README), against upstream MCP servers whose tools/list the test holds back
(fake_mcp_upstream.py --list-gate: answered once the gate file exists):

  * while an upstream has not listed its tools, /readyz is 503 with Retry-After and
    {"status":"starting","waiting":["up"]}, and the gateway logs that it waits for it;
    once its tools are listed /readyz is 200 and the first tools/call of one of them
    is served (not "Unknown tool");
  * "wait_for_lists": false in its module entry: /readyz is 200 at once, the backend's
    tools come when they come;
  * a reload that brings a new upstream: the new generation is "starting", naming it,
    until its tools are listed;
  * mcpg --check names the key of a wait_for_lists that is not a boolean, or that is
    set on a module that is not a backend.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, build_request, call_tool,  # noqa: E402
                     check, check_eq, parse_args, readyz, replace_file, run_cli, run_tests,
                     send_one, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_mcp_upstream.py")
TOKEN = "readyz-lists-token"


def upstream(ctx, name, wait_for_lists=None):
    """A backend_mcp instance on a stdio fake whose tools/list waits for a gate file;
    the instance and the gate's path."""
    gate = ctx.path(name + ".gate")
    inst = {"name": name, "module": "backend_mcp", "inline_dispatch": True,
            "config": {"command": sys.executable, "args": [FAKE, "--list-gate", gate],
                       "restart_min_ms": 100, "restart_max_ms": 400}}
    if wait_for_lists is not None:
        inst["wait_for_lists"] = wait_for_lists
    return inst, gate


def open_gate(gate):
    with open(gate, "w"):
        pass


def manifest(*instances):
    m = base_manifest(server={"admin_token_env": "MCPG_ADMIN_TOKEN"})
    m["modules"] += list(instances)
    m["bindings"] = [{"backend": "mock"}] + [{"backend": i["name"], "prefix": i["name"]}
                                             for i in instances]
    return m


def check_starting(port, waiting, what):
    r = readyz(port)
    check_eq(r.status, 503, "%s: /readyz (%r)" % (what, r.body[:200]))
    check_eq(r.header("retry-after"), "1", "%s: its Retry-After" % what)
    check_eq(json.loads(r.body), {"status": "starting", "waiting": waiting},
             "%s: what it waits for" % what)


def is_ready(port):
    return readyz(port).status == 200


def check_echo(port, tool, what, text="echo: hi"):
    """tool answers "hi" with text (the fake upstream's echo; backend_mock's says "Echo: hi")."""
    r, out = call_tool(port, tool, {"message": "hi"})
    check_eq(r.status, 200, "%s: %s (%r)" % (what, tool, out))
    check("result" in out and out["result"]["content"][0]["text"] == text,
          "%s: %s served: %r" % (what, tool, out))


def check_unknown(port, tool, what):
    _, out = call_tool(port, tool, {"message": "hi"})
    check("error" in out and "Unknown tool" in out["error"]["message"],
          "%s: %s not listed yet: %r" % (what, tool, out))


def main():
    args = parse_args()
    ctx = Context(args)
    env = {"MCPG_ADMIN_TOKEN": TOKEN}

    def t_waits_for_first_lists():
        inst, gate = upstream(ctx, "up")
        with Gateway(ctx, manifest=manifest(inst), name="strict", env=env) as gw:
            check_starting(gw.port, ["up"], "the upstream's tools/list held back")
            check_unknown(gw.port, "up_echo", "while /readyz says starting")
            check_echo(gw.port, "echo", "a static backend meanwhile", "Echo: hi")
            # never answering keeps it unready, but not silently
            wait_for(lambda: "no first lists after" in gw.stderr(), 20,
                     "the gateway to log that up has no first lists")
            check_starting(gw.port, ["up"], "still held back, logged")
            open_gate(gate)
            wait_for(lambda: is_ready(gw.port), 20, "/readyz 200 once up's tools are listed")
            check_echo(gw.port, "up_echo", "the first call after /readyz said ready")
            wait_for(lambda: "its first lists are in" in gw.stderr(), 20,
                     "the gateway to log that up's lists came")

    def t_wait_for_lists_false():
        inst, gate = upstream(ctx, "late", wait_for_lists=False)
        with Gateway(ctx, manifest=manifest(inst), name="relaxed", env=env) as gw:
            r = readyz(gw.port)
            check_eq(r.status, 200, "/readyz with wait_for_lists false (%r)" % r.body[:200])
            check_eq(json.loads(r.body)["status"], "ready", "its status")
            check_unknown(gw.port, "late_echo", "ready, its tools still held back")
            open_gate(gate)
            wait_for(lambda: "result" in call_tool(gw.port, "late_echo", {"message": "hi"})[1],
                     20, "late_echo once its tools are listed")

    def t_reload_new_upstream():
        first, first_gate = upstream(ctx, "one")
        open_gate(first_gate)
        with Gateway(ctx, manifest=manifest(first), name="reloaded", env=env) as gw:
            wait_for(lambda: is_ready(gw.port), 20, "/readyz 200 with one upstream listed")
            second, gate = upstream(ctx, "two")
            replace_file(gw.config, manifest(first, second))
            r = send_one(gw.port, build_request(gw.port, "POST", "/admin/reload", headers=[
                ("Authorization", "Bearer " + TOKEN)]))
            check_eq(r.status, 200, "the reload (%r)" % r.body[:300])
            check_starting(gw.port, ["two"], "after a reload bringing a new upstream")
            check_echo(gw.port, "one_echo", "the carried-over upstream meanwhile")
            open_gate(gate)
            wait_for(lambda: is_ready(gw.port), 20, "/readyz 200 once two's tools are listed")
            check_echo(gw.port, "two_echo", "the first call after /readyz said ready")

    def t_check_names_the_key():
        inst, _ = upstream(ctx, "up", wait_for_lists="no")
        path = ctx.write_manifest(manifest(inst), "bad-wait.json")
        rc, _, err = run_cli(ctx, ["--check", "--config", path])
        check(rc == 2 and "modules[1].wait_for_lists: expected a boolean" in err,
              "a wait_for_lists that is not a boolean: rc %d, %s" % (rc, err))
        m = manifest()
        m["modules"].append({"name": "audit", "module": "audit_stdout", "wait_for_lists": False})
        path = ctx.write_manifest(m, "bad-wait-kind.json")
        rc, _, err = run_cli(ctx, ["--check", "--config", path])
        check(rc == 2 and "modules[1].wait_for_lists: only a backend has lists to wait for" in err,
              "wait_for_lists on an audit module: rc %d, %s" % (rc, err))

    return run_tests([
        ("an upstream not listed yet: /readyz 503 naming it, then 200 and its tool served",
         t_waits_for_first_lists),
        ("wait_for_lists false: /readyz 200 at once", t_wait_for_lists_false),
        ("a reload bringing a new upstream: starting until it lists", t_reload_new_upstream),
        ("mcpg --check names wait_for_lists", t_check_names_the_key),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
