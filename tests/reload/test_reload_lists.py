#!/usr/bin/python3
"""List changes around a reload, and what the gateway advertises after one.

A reload that adds a backend tells the clients that listen (a subscriptions/listen
stream and a legacy session's GET stream) notifications/tools/list_changed, and
tools/list shows the new tools. A list change a backend tells while a reload is being
built (a carried backend whose list flips; a backend the reload adds, which lists
once it has started, before it serves) is in the serving generation's tools/list
after the reload, and the listeners are told. A reload that renames the gateway,
adds a tasks-capable backend and an events pipeline: server/discover and initialize
show the new serverInfo and capabilities on the next request."""
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from gateway import (Context, Gateway, check, check_eq, expect_result, parse_args,  # noqa: E402
                     replace_file, rpc_body, run_tests, send_one, stateless_headers,
                     stateless_request, build_request, call_tool, wait_for)
from eventslib import events_manifest  # noqa: E402
from test_legacy_wire import answer, initialize  # noqa: E402
from test_reload import TOKEN, reload_ok  # noqa: E402
from webhooklib import Listener, legacy_listener, new_secret  # noqa: E402

EVENTS_VAR = "MCPG_TEST_RELOAD_EVENTS_SECRET"
TOOLS_CHANGED = "notifications/tools/list_changed"


def tool_names(port):
    r = send_one(port, stateless_request(port, "tools/list", {}))
    return sorted(t["name"] for t in expect_result(r, r.rpc(), 1, "tools/list")["tools"])


def tools_listener(port, name):
    """A stateless subscriptions/listen for tool list changes, open once acknowledged."""
    body = rpc_body("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id=name)
    raw = build_request(port, headers=stateless_headers("subscriptions/listen"), body=body)
    lst = Listener(port, raw, name).wait_open()
    wait_for(lambda: lst.notes("notifications/subscriptions/acknowledged"), 10,
             "%s: the listen acknowledged" % name)
    return lst


def discover(port):
    """server/discover's result, its _meta serverInfo kept."""
    r = send_one(port, stateless_request(port, "server/discover", {}))
    expect_result(r, r.rpc(), 1, "server/discover")
    return r.rpc()["result"]


def main():
    args = parse_args()
    ctx = Context(args)
    secret = new_secret()

    def manifest(name="before", more=False, dyns=(), everything=False, events=False):
        """dyns: (name, config) of more fx_dyn instances, each prefixed by its name."""
        mods = [{"name": "mock", "module": "backend_mock", "config": {"tools": [{"name": "echo"}]}},
                {"name": "dyn", "module": "fx_dyn"}]
        binds = [{"backend": "mock"}, {"backend": "dyn"}]
        if more:
            mods.append({"name": "more", "module": "backend_mock",
                         "config": {"tools": [{"name": "extra"}, {"name": "extra2"}]}})
            binds.append({"backend": "more"})
        for dname, config in dyns:
            mods.append({"name": dname, "module": "fx_dyn", "config": config})
            binds.append({"backend": dname, "prefix": dname})
        if everything:
            mods.append({"name": "everything", "module": "backend_everything"})
            binds.append({"backend": "everything"})
        m = {"gateway": {"name": name, "module_dir": ctx.test_modules, "workers": 2,
                         "server": {"admin_token_env": "MCPG_TEST_ADMIN"}},
             "cluster": {"kind": "single_node"},
             "modules": mods, "bindings": binds}
        if events:
            m["events"] = events_manifest(EVENTS_VAR)
        return m

    path = ctx.write_manifest(manifest(), "lists.json")
    gw = Gateway(ctx, config=path, env={"MCPG_TEST_ADMIN": TOKEN, EVENTS_VAR: secret},
                 name="reload-lists").start()
    p = gw.port
    base = ["dyn_flip", "dyn_one", "dyn_slow", "echo"]

    def told(listeners, before, what):
        """Until each listener has heard one more tools/list_changed than `before`."""
        for lst, n in zip(listeners, before):
            wait_for(lambda: len(lst.notes(TOOLS_CHANGED)) > n, 10,
                     "%s: %s told to %s (heard %d)" % (what, TOOLS_CHANGED, lst.label,
                                                      len(lst.notes(TOOLS_CHANGED))))

    def t_added_backend_told():
        check_eq(tool_names(p), base, "the first lists")
        listeners = [tools_listener(p, "listen-a"), legacy_listener(p, [], name="legacy-a")]
        try:
            before = [len(lst.notes(TOOLS_CHANGED)) for lst in listeners]
            replace_file(path, manifest(more=True))
            ans = reload_ok(p)
            check_eq(ans["started"], ["more"], "the reload starts the added backend: %r" % ans)
            check_eq(tool_names(p), sorted(base + ["extra", "extra2"]),
                     "tools/list after the reload shows the added backend's tools")
            told(listeners, before, "a reload that adds tools")
            for lst in listeners:
                check(lst.error is None, "%s: %r" % (lst.label, lst.error))
        finally:
            for lst in listeners:
                lst.close()

    def t_new_backend_tells_before_serving():
        """A backend the reload adds tells its list changed in its start(), before the
        generation holding it serves (an upstream that lists once connected)."""
        listeners = [tools_listener(p, "listen-b"), legacy_listener(p, [], name="legacy-b")]
        try:
            before = [len(lst.notes(TOOLS_CHANGED)) for lst in listeners]
            replace_file(path, manifest(more=True, dyns=[("late", {"flip_at_start": True})]))
            check_eq(reload_ok(p)["started"], ["late"], "the reload starts the added backend")
            # served from the reload's answer on: no rebuild left to wait for
            names = tool_names(p)
            check("late_dyn_two" in names and "late_dyn_one" not in names,
                  "the added backend's change, told before it served, is served: %r" % names)
            told(listeners, before, "a reload whose new backend told a change")
        finally:
            for lst in listeners:
                lst.close()

    def t_carried_backend_tells_during_reload():
        """The reload is held at a gate in the start of a backend it adds (its lists
        built, not yet published) while a call flips the carried backend's list."""
        fifo = ctx.path("gate.fifo")
        os.mkfifo(fifo)
        listeners = [tools_listener(p, "listen-c"), legacy_listener(p, [], name="legacy-c")]
        result = {}
        try:
            before = [len(lst.notes(TOOLS_CHANGED)) for lst in listeners]
            replace_file(path, manifest(more=True, dyns=[("late", {"flip_at_start": True}),
                                                         ("gate", {"gate_fifo": fifo})]))
            reloader = threading.Thread(target=lambda: result.update(ans=reload_ok(p)))
            reloader.start()
            wait_for(lambda: "waiting at the gate" in gw.stderr(), 20, "the reload at the gate")
            r, rpc = call_tool(p, "dyn_flip", {}, id=21)
            check_eq(expect_result(r, rpc, 21, "dyn_flip")["content"][0]["text"], "flipped",
                     "the carried backend flips its list while the reload is held")
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"g")
            os.close(fd)
            reloader.join(30)
            check(not reloader.is_alive() and "ans" in result, "the reload answered: %r" % result)
            check_eq(result["ans"]["started"], ["gate"], "the reload started the gated backend")
            names = tool_names(p)
            check("dyn_two" in names and "dyn_one" not in names,
                  "the carried backend's change told during the reload is served: %r" % names)
            check("gate_dyn_one" in names, "the gated backend's own list: %r" % names)
            told(listeners, before, "a reload around a carried backend's change")
        finally:
            for lst in listeners:
                lst.close()

    def t_caps_follow_generation():
        d = discover(p)
        check_eq(d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "before",
                 "server/discover's serverInfo before")
        ext = d["capabilities"].get("extensions", {})
        check("io.modelcontextprotocol/tasks" not in ext and
              "io.modelcontextprotocol/events" not in ext, "no tasks, no events yet: %r" % ext)
        replace_file(path, manifest(name="after", everything=True, events=True))
        reload_ok(p)
        d = discover(p)
        check_eq(d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "after",
                 "server/discover's serverInfo names the gateway as the reload does")
        ext = d["capabilities"].get("extensions", {})
        check("io.modelcontextprotocol/tasks" in ext, "tasks advertised: %r" % d["capabilities"])
        check("io.modelcontextprotocol/events" in ext, "events advertised: %r" % d["capabilities"])
        r, _ = initialize(p)
        res = answer(r)["result"]
        check_eq(res["serverInfo"]["name"], "after", "initialize's serverInfo after the reload")
        check("tasks" in res["capabilities"] and "events" in res["capabilities"],
              "initialize advertises tasks and events: %r" % res["capabilities"])
        r, rpc = call_tool(p, "echo", {"message": "x"}, id=31)
        expect_result(r, rpc, 31, "echo")
        meta = rpc["result"].get("_meta", {})
        check_eq(meta.get("io.modelcontextprotocol/serverInfo", {}).get("name"), "after",
                 "a tools/call result's serverInfo after the reload")

    def t_stop():
        gw.stop()

    return run_tests([
        ("a reload that adds tools tells both wires' listeners", t_added_backend_told),
        ("a backend a reload adds tells a change before it serves: served and told",
         t_new_backend_tells_before_serving),
        ("a carried backend's change told while a reload is built: served and told",
         t_carried_backend_tells_during_reload),
        ("serverInfo and capabilities follow the generation", t_caps_follow_generation),
        ("the gateway stops cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
