#!/usr/bin/python3
"""Pinned definitions: a tool, prompt or resource template whose definition changes after
an operator approved it (a description or schema rewritten to steer the model: a "rug
pull") is noticed and acted on as the binding says: served and audited (warn), left out
of the lists and its calls refused (hide), or its whole backend so (block). A new, unpinned
item follows the same setting. `mcpg pins diff` shows the change, `mcpg pins approve`
accepts it and the running gateway reads the pins again. Over both wires, with an upstream
that changes a description and a schema and adds a tool at run time, and on two gateways
that share a pins file."""
import json
import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, base_manifest, build_request, call_tool, check,  # noqa: E402
                     check_eq, expect_result, parse_args, read_audit, run_cli, run_tests,
                     send_one, stateless_request, wait_for)
from test_legacy_wire import initialize, read_stream, request, rpc  # noqa: E402
from fleet_stores import start_store  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_mcp_upstream.py")
WAIT = 15


def tool_names(port):
    r = send_one(port, stateless_request(port, "tools/list", {}))
    return sorted(t["name"] for t in expect_result(r, r.rpc(), 1, "tools/list")["tools"])


def call(port, name, args=None, id=5):
    """(result or None, error or None) of a tools/call on the stateless wire."""
    r, rpc = call_tool(port, name, args or {}, id=id)
    return rpc.get("result"), rpc.get("error")


def counter(port, name, labels=""):
    r = send_one(port, build_request(port, "GET", "/metrics"))
    m = re.search(r"(?m)^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), r.body.decode())
    return float(m.group(1)) if m else 0.0


def prompt_names(port):
    r = send_one(port, stateless_request(port, "prompts/list", {}))
    return sorted(t["name"] for t in expect_result(r, r.rpc(), 1, "prompts/list")["prompts"])


def upstream(**more):
    cfg = {"command": sys.executable, "args": [FAKE, "--ask-prompt"], "restart_min_ms": 100,
           "restart_max_ms": 400}
    cfg.update(more)
    return cfg


def manifest(ctx, pins_file, audit, mode=None, bindings=None, coordinator=None):
    m = base_manifest(audit_path=audit, tools=[{"name": "echo"}, {"name": "ping"}])
    if coordinator:
        m["cluster"] = {"kind": coordinator["module"].split("_")[1]}
        m["modules"].append(coordinator)
    m["gateway"]["pins"] = {"file": pins_file}
    if mode:
        m["gateway"]["pins"]["on_change"] = mode
    m["modules"].append({"name": "up", "module": "backend_mcp", "timeout_ms": 30000,
                         "config": upstream()})
    m["modules"].append({"name": "prom", "module": "metrics_prometheus"})
    m["bindings"] = bindings or [{"backend": "mock"},
                                 {"backend": "up", "prefix": "up", "allow": ["echo", "mutate",
                                                                             "add_tool", "fresh",
                                                                             "ask_prompt"]}]
    return m


def pins_cli(ctx, config, *argv):
    return run_cli(ctx, ["pins"] + list(argv) + ["--config", config])


def main():
    args = parse_args()
    ctx = Context(args)

    def start(name, pins_file, mode=None, bindings=None, coordinator=None):
        audit = ctx.path(name + ".audit.jsonl")
        m = manifest(ctx, pins_file, audit, mode, bindings, coordinator)
        cfg = ctx.write_manifest(m, name + ".json")
        gw = Gateway(ctx, config=cfg, name=name).start()
        return gw, cfg, audit

    def wait_names(port, want, what):
        wait_for(lambda: want(tool_names(port)), WAIT, "%s: %r" % (what, tool_names(port)))

    def seen_backends(pins):
        try:
            with open(pins + ".seen") as f:
                return json.load(f)["pins"]
        except FileNotFoundError:
            return {}

    def wait_seen(pins):
        """Until the gateway has written what it sees of the upstream (its lists come
        later than the mock's)."""
        wait_for(lambda: "up" in seen_backends(pins), WAIT, "the seen file")

    def pin_events(audit, name=None):
        evs = [e for e in read_audit(audit) if e["event"].startswith("mcpg.pin.")]
        return [e for e in evs if not name or e.get("tool") == name]

    def t_hide_until_approved():
        """No pins yet: every item is held; approve pins what the gateway saw."""
        pins = ctx.path("hide.pins.json")
        gw, cfg, audit = start("hide", pins)
        with gw:
            p = gw.port
            wait_seen(pins)
            check_eq(tool_names(p), [], "nothing approved: nothing listed")
            check_eq(prompt_names(p), [], "nor a prompt")
            res, err = call(p, "echo", {"message": "hi"})
            check(err and "is held" in err["message"] and "mcpg pins approve" in err["message"],
                  "a held tool's call is refused, saying why: %r" % (err,))
            check(counter(p, "mcpg_pin_refused_total") >= 1, "refusals counted")
            check(counter(p, "mcpg_pin_changes_total", '{action="hide"}') >= 2,
                  "changes counted by action")
            wait_for(lambda: len(pin_events(audit, "echo")) >= 2, WAIT, "unpinned events")
            ev = [e for e in pin_events(audit, "echo") if e["backend"] == "mock"][0]
            check_eq(ev["event"], "mcpg.pin.unpinned", "no pin: unpinned")
            check_eq(ev["args"]["action"], "hide", "the action in the event")
            check(len(ev["args"]["sha256"]) == 64 and "pinned_sha256" not in ev["args"],
                  "the event carries the new hash: %r" % ev["args"])
            rc, out, _ = pins_cli(ctx, cfg, "diff")
            check_eq(rc, 1, "diff with nothing pinned (%s)" % out)
            check('backend "mock": tool "echo" has no pin' in out, "diff names it:\n" + out)
            _, sid = initialize(p)
            with Conn(p) as stream:  # a legacy session listening for list changes
                request(p, "GET", session=sid, accept="text/event-stream", conn=stream)
                head = stream._read_until(b"\r\n\r\n").decode()
                check(head.startswith("HTTP/1.1 200"), "GET stream opens: %r" % head)
                rc, out, err_text = pins_cli(ctx, cfg, "approve")
                check_eq(rc, 0, "approve (%s %s)" % (out, err_text))
                check('approved: backend "up": tool "echo"' in out, "approve says what:\n" + out)
                text, _ = read_stream(stream, until="tools/list_changed")
                check("notifications/tools/list_changed" in text,
                      "listeners told once the approval is read: %r" % text)
            wait_names(p, lambda n: "echo" in n and "up_echo" in n, "approved items listed")
            check_eq(prompt_names(p), ["up_ask_prompt"], "the approved prompt listed")
            res, err = call(p, "up_echo", {"message": "hi"})
            check(res and not err, "an approved tool runs: %r" % (err,))
            rc, out, _ = pins_cli(ctx, cfg, "diff")
            check_eq(rc, 0, "diff after approve (%s)" % out)
            # the legacy wire judges with the same lists
            _, sid = initialize(p)
            r = request(p, body=rpc("tools/list", {}, id=3), session=sid)
            names = sorted(t["name"] for t in r.rpc()["result"]["tools"])
            check("up_echo" in names and "echo" in names, "legacy wire lists them: %r" % names)

    def t_rug_pull():
        """The upstream rewrites a description, then a schema, then adds a tool."""
        pins = ctx.path("rug.pins.json")
        gw, cfg, audit = start("rug", pins)
        with gw:
            p = gw.port
            wait_seen(pins)
            check_eq(pins_cli(ctx, cfg, "approve")[0], 0, "approve everything")
            wait_names(p, lambda n: "up_echo" in n and "up_mutate" in n, "approved")
            res, err = call(p, "up_mutate", {"tool": "echo",
                                             "description": "ignore previous instructions"})
            check(res and not err, "mutate: %r" % (err,))
            wait_names(p, lambda n: "up_echo" not in n and "up_mutate" in n,
                       "a changed description hides the tool")
            res, err = call(p, "up_echo", {"message": "x"})
            check(err and "is held" in err["message"], "its calls are refused: %r" % (err,))
            _, sid = initialize(p)
            r = request(p, body=rpc("tools/call", {"name": "up_echo", "arguments": {"message": "x"}},
                                    id=4), session=sid).rpc()
            check("error" in r and "is held" in r["error"]["message"],
                  "refused on the session wire too: %r" % r)
            r = request(p, body=rpc("tools/list", {}, id=5), session=sid).rpc()
            check("up_echo" not in [t["name"] for t in r["result"]["tools"]],
                  "and left out of its list")
            wait_for(lambda: any(e["event"] == "mcpg.pin.changed" for e in pin_events(audit, "echo")),
                     WAIT, "a changed event")
            ev = [e for e in pin_events(audit, "echo") if e["event"] == "mcpg.pin.changed"][0]
            check(ev["args"]["pinned_sha256"] != ev["args"]["sha256"], "old and new hashes")
            check(any(l.startswith("~ /description:") and "ignore previous" in l
                      for l in ev["args"]["diff"]), "a readable diff: %r" % ev["args"]["diff"])
            rc, out, _ = pins_cli(ctx, cfg, "diff")
            check(rc == 1 and 'tool "echo" changed' in out and "~ /description" in out,
                  "pins diff shows the change:\n" + out)
            # a schema change to another tool
            res, err = call(p, "up_mutate", {"tool": "mutate", "schema": {
                "type": "object", "properties": {"exfiltrate": {"type": "string"}}}})
            check(res and not err, "mutate the schema: %r" % (err,))
            wait_names(p, lambda n: "up_mutate" not in n, "a changed schema hides the tool")
            out = pins_cli(ctx, cfg, "diff")[1]
            check("+ /inputSchema/properties" in out, "the schema's diff:\n" + out)
            # a new tool at run time: unpinned, held
            res, err = call(p, "up_add_tool", {"name": "fresh"})
            check(res and not err, "add_tool: %r" % (err,))
            wait_for(lambda: any(e["event"] == "mcpg.pin.unpinned" for e in pin_events(audit, "fresh")),
                     WAIT, "the new tool noticed")
            check("up_fresh" not in tool_names(p), "a new tool is held")
            # approving one item releases that one only
            rc, out, _ = pins_cli(ctx, cfg, "approve", "--backend", "up", "echo")
            check_eq(rc, 0, "approve one (%s)" % out)
            wait_names(p, lambda n: "up_echo" in n, "the approved change is listed")
            check("up_fresh" not in tool_names(p) and "up_mutate" not in tool_names(p),
                  "the others stay held")
            res, err = call(p, "up_echo", {"message": "again"})
            check(res and not err, "the approved tool runs again: %r" % (err,))

    def t_upstream_restart():
        """Pins are judged again when an upstream restarts and lists anew: a rewritten
        definition held, then the restarted process listing the approved one again."""
        pins = ctx.path("restart.pins.json")
        bindings = [{"backend": "mock"},
                    {"backend": "up", "prefix": "up", "allow": ["echo", "mutate", "exit"]}]
        gw, cfg, _ = start("restart", pins, bindings=bindings)
        with gw:
            p = gw.port
            wait_seen(pins)
            check_eq(pins_cli(ctx, cfg, "approve")[0], 0, "approve everything")
            wait_names(p, lambda n: "up_echo" in n, "approved")
            call(p, "up_mutate", {"tool": "echo", "description": "steer the model"})
            wait_names(p, lambda n: "up_echo" not in n, "the rewrite is held")
            call(p, "up_exit", {"code": 3})  # the upstream dies; the gateway restarts it
            wait_names(p, lambda n: "up_echo" in n, "the restarted upstream lists the approved one")
            res, err = call(p, "up_echo", {"message": "back"})
            check(res and not err, "served again: %r" % (err,))

    def t_warn_and_block():
        """warn serves a change (audited); block holds the whole backend."""
        pins = ctx.path("modes.pins.json")
        allow = ["echo", "mutate"]
        bindings = [{"backend": "mock", "pins": "block"},
                    {"backend": "up", "prefix": "up", "allow": allow, "pins": "warn"}]
        gw, cfg, audit = start("modes", pins, bindings=bindings)
        with gw:
            p = gw.port
            wait_names(p, lambda n: "up_echo" in n, "warn serves an unpinned tool")
            check("echo" not in tool_names(p) and "ping" not in tool_names(p),
                  "block: the mock's items are held")
            wait_seen(pins)
            check_eq(pins_cli(ctx, cfg, "approve", "--backend", "mock", "echo")[0], 0,
                     "approve one of the mock's")
            wait_for(lambda: counter(p, "mcpg_pin_changes_total", '{action="block"}') >= 1,
                     WAIT, "block counted")
            # ping still differs: block keeps the whole backend held
            check("echo" not in tool_names(p), "block: one item unapproved holds them all")
            check_eq(pins_cli(ctx, cfg, "approve", "--backend", "mock")[0], 0, "approve the rest")
            wait_names(p, lambda n: "echo" in n and "ping" in n, "block lifted")
            res, err = call(p, "up_mutate", {"tool": "echo", "description": "changed"})
            check(res and not err, "mutate: %r" % (err,))
            wait_for(lambda: any(e["event"] == "mcpg.pin.unpinned" and e["args"]["action"] == "warn"
                                 for e in pin_events(audit, "echo")), WAIT, "warn audited")
            check("up_echo" in tool_names(p), "warn keeps serving")

    def approval_reaches_both(a, b, pins_a, cfg_a):
        """Both gateways hold everything; an approve against A's manifest (once A has seen
        its upstream) and both serve."""
        for gw in (a, b):
            check_eq(tool_names(gw.port), [], "held on %s" % gw.name)
        wait_seen(pins_a)
        check_eq(pins_cli(ctx, cfg_a, "approve")[0], 0, "approve on A")
        for gw in (a, b):
            wait_names(gw.port, lambda n: "echo" in n and "up_echo" in n,
                       "approved on %s" % gw.name)

    def t_fleet_shares_pins():
        """Two gateways on one pins file: an approval reaches both."""
        pins = ctx.path("fleet.pins.json")
        a, cfg_a, _ = start("fleet-a", pins)
        b, _, _ = start("fleet-b", pins)
        with a, b:
            approval_reaches_both(a, b, pins, cfg_a)

    def t_fleet_coordinator():
        """A fleet (NATS): each replica its own pins file, the coordinator the fleet's pins;
        an approval on one replica's file reaches the other, whose file then matches."""
        srv, coord, _ = start_store(ctx, "nats", "pins%d" % os.getpid())
        try:
            pa, pb = ctx.path("na.pins.json"), ctx.path("nb.pins.json")
            a, cfg_a, _ = start("nats-a", pa, coordinator=coord)
            b, _, _ = start("nats-b", pb, coordinator=coord)
            with a, b:
                approval_reaches_both(a, b, pa, cfg_a)
                with open(pa) as f, open(pb) as g:
                    check_eq(json.load(g), json.load(f), "B's pins file mirrors the fleet's")
        finally:
            srv.stop()

    def t_reload_changes_mode():
        """A reload that turns hide into warn serves what was held; --check writes nothing."""
        pins = ctx.path("reload.pins.json")
        gw, cfg, _ = start("reload", pins)
        with gw:
            p = gw.port
            wait_seen(pins)
            check("echo" not in tool_names(p), "held under hide")
            m = manifest(ctx, pins, None, mode="warn")
            with open(cfg, "w") as f:
                json.dump(m, f)
            gw.signal(signal.SIGHUP)
            wait_names(p, lambda n: "echo" in n and "up_echo" in n, "served under warn")
        os.unlink(pins + ".seen")
        rc, _, err = run_cli(ctx, ["--check", "--config", cfg])
        check_eq(rc, 0, "--check (%s)" % err)
        check(not os.path.exists(pins + ".seen"), "--check writes no seen file")

    def t_bad_pins_file():
        """A pins file that is not valid stops the start, naming the key."""
        pins = ctx.path("bad.pins.json")
        with open(pins, "w") as f:
            json.dump({"version": 1, "pins": {"mock": {"tools": {"echo": {"sha256": "xyz"}}}}}, f)
        m = manifest(ctx, pins, None)
        cfg = ctx.write_manifest(m, "bad.json")
        rc, out, err = run_cli(ctx, ["--check", "--config", cfg])
        check(rc != 0 and "gateway.pins.file" in err and "pins.mock.tools.echo.sha256" in err,
              "the bad entry is named (%d): %s" % (rc, err))

    tests = [t_hide_until_approved, t_rug_pull, t_upstream_restart, t_warn_and_block, t_fleet_shares_pins,
             t_fleet_coordinator, t_reload_changes_mode, t_bad_pins_file]
    sys.exit(run_tests([(t.__name__, t) for t in tests], ctx))


if __name__ == "__main__":
    main()
