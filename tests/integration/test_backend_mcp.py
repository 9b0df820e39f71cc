#!/usr/bin/python3
"""backend_mcp's own promises, against an upstream the test scripts exactly
(fake_mcp_upstream.py, which records every message the gateway sends it):
--check errors naming the key; calls through a prefix (the upstream sees its own name),
structuredContent, _meta, isError and JSON-RPC errors unchanged; progress with the
client's own token; elicitation on the session wire and bridged for stateless clients
(input_required, then the retry completes); the instance's timeout_ms (the upstream is
told notifications/cancelled) and a client's cancel; a stdio upstream that dies or
misbehaves (errors naming the instance, restarted with a new pid, stderr in the log);
list changes (the new tool listed, sessions told, invalid names left out); the HTTP
session wire (session id, configured headers, a restarted upstream)."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (IO_TIMEOUT, Context, Conn, Gateway, _child_setup,  # noqa: E402
                     base_manifest, build_request, call_tool, check, check_eq, expect_result,
                     parse_args, run_cli, rpc_body, run_tests, send_one, stateless_headers,
                     stateless_request, stop_process, wait_for)
from test_legacy_wire import answer, events, head_of, read_stream, request  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_mcp_upstream.py")
INST = 'backend "up"'
ELICITING = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


class Fake:
    """The files one fake upstream writes: what it received, its pid."""

    def __init__(self, ctx, tag):
        self.rec = ctx.path(tag + ".rec.jsonl")
        self.pidf = ctx.path(tag + ".pid")

    def argv(self, *extra):
        return [FAKE, "--record", self.rec, "--pid-file", self.pidf] + list(extra)

    def records(self):
        try:
            with open(self.rec) as f:
                return [json.loads(ln) for ln in f if ln.strip()]
        except FileNotFoundError:
            return []

    def msgs(self):
        return [r["msg"] for r in self.records() if "msg" in r]

    def calls(self, tool):
        return [m for m in self.msgs()
                if m.get("method") == "tools/call" and m["params"].get("name") == tool]

    def call_with(self, tool, key, value):
        """The upstream's tools/call of `tool` whose arguments[key] == value, or None."""
        for m in self.calls(tool):
            if (m["params"].get("arguments") or {}).get(key) == value:
                return m
        return None

    def cancelled(self, request_id):
        return [m for m in self.msgs() if m.get("method") == "notifications/cancelled"
                and (m.get("params") or {}).get("requestId") == request_id]

    def pid(self):
        try:
            with open(self.pidf) as f:
                return int(f.read())
        except (FileNotFoundError, ValueError):
            return None


def mcp_manifest(cfg, timeout_ms=None, prefix="up", inline=True):
    m = base_manifest()
    inst = {"name": "up", "module": "backend_mcp", "inline_dispatch": inline, "config": cfg}
    if timeout_ms:
        inst["timeout_ms"] = timeout_ms
    m["modules"].append(inst)
    m["bindings"] = [{"backend": "mock"}, {"backend": "up", "prefix": prefix}]
    return m


def stdio_cfg(fake, *extra, **more):
    # one call at a time here: a question or log line over stdio names no
    # call, and reaches the one in flight only when the operator allows it
    # (two callers at once: test_upstream_routing.py)
    cfg = {"command": sys.executable, "args": fake.argv(*extra), "restart_min_ms": 100,
           "restart_max_ms": 400, "untied_messages": "sole_call"}
    cfg.update(more)
    return cfg


def tool_names(port):
    r = send_one(port, stateless_request(port, "tools/list", {}))
    return sorted(t["name"] for t in expect_result(r, r.rpc(), 1, "tools/list")["tools"])


def fake_port(pf):
    """The port an HTTP fake started with --http 0 wrote to its --port-file."""
    wait_for(lambda: os.path.exists(pf), IO_TIMEOUT, "the HTTP fake listening (%s)" % pf)
    with open(pf) as f:
        return int(f.read())


def wait_tool(port, name, timeout=15):
    return wait_for(lambda: name in tool_names(port), timeout, "%s in tools/list" % name,
                    interval=0.05)


def result_of(port, tool, arguments, id=1):
    r, rpc = call_tool(port, tool, arguments, id=id)
    return expect_result(r, rpc, id, tool)


def error_of(port, tool, arguments, id=1):
    r, rpc = call_tool(port, tool, arguments, id=id)
    check("error" in rpc, "%s: expected an error, got %r" % (tool, rpc))
    return rpc["error"]


def echo_works(port, id=900):
    try:
        r, rpc = call_tool(port, "up_echo", {"message": "back"}, id=id)
    except (OSError, AssertionError):
        return False
    return rpc.get("result", {}).get("content", [{}])[0].get("text") == "echo: back"


def session(port, caps=None):
    r = request(port, body={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"protocolVersion": "2025-11-25",
                                       "capabilities": caps or {},
                                       "clientInfo": {"name": "t", "version": "1"}}},
                version=None)
    check_eq(r.status, 200, "initialize (%r)" % r.body[:200])
    sid = r.header("mcp-session-id")
    request(port, body={"jsonrpc": "2.0", "method": "notifications/initialized"}, session=sid)
    return sid


def stream_messages(text):
    return [json.loads(d) for _, d in events(text) if d.strip()]


def main():
    args = parse_args()
    ctx = Context(args)
    gws = []

    def start(manifest, name, env=None):
        g = Gateway(ctx, manifest=manifest, name=name, env=env).start()
        gws.append(g)
        return g

    # ---- --check: errors name the key ----

    def check_errors(cfg, key, words=()):
        m = mcp_manifest(cfg)
        path = ctx.write_manifest(m)
        rc, out, err = run_cli(ctx, ["--check", "--config", path])
        text = out + err
        check_eq(rc, 2, "--check exit code for %r (%s)" % (cfg, text))
        lines = [ln for ln in text.splitlines() if key in ln]
        check(lines, "no error names %r: %s" % (key, text))
        for w in words:
            check(any(w in ln for ln in lines), "%r not said about %s: %s" % (w, key, text))
        return text

    def t_check():
        check_errors({"url": "http://127.0.0.1:1/mcp", "command": sys.executable}, "command",
                     ["not both"])
        check_errors({}, "url", ["command"])
        check_errors({"url": "ftp://example.com/"}, "config.url")
        check_errors({"command": "/nonexistent/fake-mcp"}, "config.command",
                     ["not an executable"])
        check_errors({"command": sys.executable, "args": "x"}, "config.args", ["array"])
        check_errors({"command": sys.executable, "args": ["a", 3]}, "args[1]", ["string"])
        check_errors({"command": sys.executable, "env": {"A": 1}}, "env.A", ["string"])
        check_errors({"url": "http://127.0.0.1:1/mcp", "headers": {"X-A": "a\nb"}},
                     "headers.X-A")
        check_errors({"command": sys.executable, "restart_min_ms": 500, "restart_max_ms": 100},
                     "restart_max_ms", ["restart_min_ms"])
        check_errors({"command": sys.executable, "comand": "x"}, "comand", ["command"])
        ok = ctx.write_manifest(mcp_manifest({"command": sys.executable, "args": ["-c", "1"]}))
        rc, out, err = run_cli(ctx, ["--check", "--config", ok])
        check_eq(rc, 0, "a good config passes --check (%s)" % (out + err))

    # ---- the main stdio gateway (session wire upstream) ----

    main_fake = Fake(ctx, "main")
    gw = start(mcp_manifest(stdio_cfg(main_fake, "--bad-tools", "--stderr", "fake says hello"),
                            timeout_ms=2000), "main")
    p = gw.port

    def t_prefix_and_unchanged():
        wait_tool(p, "up_echo")
        names = tool_names(p)
        check("up_rich" in names and "echo" in names, "prefixed tools beside mock's: %r" % names)
        check_eq(result_of(p, "up_echo", {"message": "hi"}, id=2)["content"][0]["text"],
                 "echo: hi", "up_echo")
        seen = main_fake.call_with("echo", "message", "hi")
        check(seen is not None, "the upstream saw tools/call named \"echo\": %r"
              % main_fake.calls("up_echo"))
        res = result_of(p, "up_rich", {"is_error": True}, id=3)
        check_eq(res.get("structuredContent"), {"answer": 42, "nested": {"a": [1, None]}},
                 "structuredContent")
        check_eq(res.get("_meta", {}).get("example.com/trace"), "t-1", "_meta")
        # the client talks to the gateway: its serverInfo, not the upstream's
        disc = send_one(p, stateless_request(p, "server/discover", {}, id=30)).rpc()["result"]
        res = call_tool(p, "up_rich", {"is_error": True}, id=31)[1]["result"]
        check_eq(res["_meta"].get("io.modelcontextprotocol/serverInfo"),
                 disc["_meta"]["io.modelcontextprotocol/serverInfo"],
                 "the proxied result names the gateway, not the upstream")
        check_eq(res.get("isError"), True, "isError")
        res = result_of(p, "up_rich", {"is_error": False}, id=4)
        check_eq(res.get("isError"), False, "isError false")
        err = error_of(p, "up_fail", {}, id=5)
        check_eq(err, {"code": -32050, "message": "the fake failed on purpose",
                       "data": {"why": "asked to", "list": [1, 2, 3]}}, "the upstream's error")

    def t_initialize_caps():
        inits = [m for m in main_fake.msgs() if m.get("method") == "initialize"]
        check(inits, "the upstream got initialize")
        caps = inits[0]["params"]["capabilities"]
        for k in ("sampling", "elicitation", "roots"):
            check(k in caps, "initialize declares %s: %r" % (k, caps))
        check(any(m.get("method") == "notifications/initialized" for m in main_fake.msgs()),
              "notifications/initialized sent")
        check("upstream stderr: fake says hello" in gw.stderr(),
              "the upstream's stderr in the log:\n%s" % gw.stderr_tail())
        stamped = [json.loads(ln) for ln in gw.stderr().splitlines()
                   if "upstream stderr: fake says hello" in ln]
        check_eq(stamped[0]["src"], "[backend:backend_mcp:up]", "stamped with the instance")

    def t_progress():
        sid = session(p)
        r = request(p, body={"jsonrpc": "2.0", "id": 11, "method": "tools/call",
                             "params": {"name": "up_progress", "arguments": {"steps": 3},
                                        "_meta": {"progressToken": "client-tok"}}}, session=sid)
        check_eq(r.status, 200, "the call (%r)" % r.body[:200])
        msgs = stream_messages(r.body.decode())
        prog = [m for m in msgs if m.get("method") == "notifications/progress"]
        check_eq(len(prog), 3, "three progress notifications on the call's stream: %r" % msgs)
        check(all(m["params"]["progressToken"] == "client-tok" for m in prog),
              "the client's own token: %r" % prog)
        check_eq([m["params"]["progress"] for m in prog], [1, 2, 3], "in order")
        check_eq(prog[0]["params"].get("message"), "step 1", "the rest of params kept")
        check_eq(answer(r)["result"]["content"][0]["text"], "progressed", "the result")
        up_tok = main_fake.call_with("progress", "steps", 3)["params"]["_meta"]["progressToken"]
        check(up_tok != "client-tok", "the upstream saw the gateway's token, not the client's")

    def t_log_message():
        sid = session(p)
        r = request(p, body={"jsonrpc": "2.0", "id": 12, "method": "tools/call",
                             "params": {"name": "up_log", "arguments": {"text": "note"}}},
                    session=sid)
        msgs = stream_messages(r.body.decode())
        logs = [m for m in msgs if m.get("method") == "notifications/message"]
        check(logs and logs[0]["params"]["data"] == "note" and logs[0]["params"]["level"] == "warning",
              "notifications/message on the call's stream: %r" % msgs)
        check_eq(answer(r)["result"]["content"][0]["text"], "logged", "the result")
        # what an upstream logs reaches its caller through gateway.redact
        secret = "sk-live-5f2e9c1d7a"
        r = request(p, body={"jsonrpc": "2.0", "id": 13, "method": "tools/call",
                             "params": {"name": "up_log", "arguments": {
                                 "text": "retrying with Authorization: Bearer %s now" % secret}}},
                    session=sid)
        logs = [m for m in stream_messages(r.body.decode()) if m.get("method") == "notifications/message"]
        data = logs[0]["params"]["data"] if logs else ""
        check(logs and secret not in r.body.decode() and data.startswith("retrying with Authorization: ")
              and data.endswith(" now"), "the credential in an upstream log line is hidden: %r" % data)

    def t_elicitation_legacy():
        sid = session(p, {"elicitation": {}})
        with Conn(p) as c:
            request(p, body={"jsonrpc": "2.0", "id": 21, "method": "tools/call",
                             "params": {"name": "up_ask", "arguments": {}}}, session=sid, conn=c)
            status, head = head_of(c)
            check_eq(status, 200, "the call's stream (%r)" % head)
            text, _ = read_stream(c, until="elicitation/create")
            asks = [m for m in stream_messages(text) if m.get("method") == "elicitation/create"]
            check_eq(len(asks), 1, "one elicitation/create on the stream: %r" % text)
            check_eq(asks[0]["params"]["message"], "Your name?", "its params unchanged")
            reply = {"action": "accept", "content": {"name": "Ada"}}
            r = request(p, body={"jsonrpc": "2.0", "id": asks[0]["id"], "result": reply},
                        session=sid)
            check_eq(r.status, 202, "the client's answer (%r)" % r.body[:200])
            rest, ended = read_stream(c)
            text += rest
        final = [m for m in stream_messages(text) if m.get("id") == 21]
        check(final and "result" in final[0], "the call's result: %r" % text)
        check_eq(final[0]["result"]["structuredContent"], {"got": reply},
                 "the upstream got the client's answer")

    def t_elicitation_bridge():
        r = send_one(p, stateless_request(p, "tools/call", {
            "name": "up_ask", "arguments": {}, "_meta": ELICITING}, id=31, name="up_ask"))
        res = expect_result(r, r.rpc(), 31, "the first round")
        check_eq(res.get("resultType"), "input_required", "resultType (%r)" % res)
        ir = res.get("inputRequests", {})
        check_eq(list(ir), ["upstream"], "inputRequests keys")
        check_eq(ir["upstream"]["method"], "elicitation/create", "the upstream's question")
        check_eq(ir["upstream"]["params"]["message"], "Your name?", "its params")
        state = res.get("requestState")
        check(isinstance(state, str) and state, "a requestState: %r" % res)
        reply = {"action": "accept", "content": {"name": "Grace"}}
        r = send_one(p, stateless_request(p, "tools/call", {
            "name": "up_ask", "arguments": {}, "inputResponses": {"upstream": reply},
            "requestState": state, "_meta": ELICITING}, id=32, name="up_ask"))
        res = expect_result(r, r.rpc(), 32, "the retry")
        check(res.get("resultType") in (None, "complete"), "complete: %r" % res)
        check_eq(res.get("structuredContent"), {"got": reply}, "the upstream got the answer")
        # the same state again, and one never minted
        for bad in (state, "mcpg-park-00000000000000000000dead"):
            r = send_one(p, stateless_request(p, "tools/call", {
                "name": "up_ask", "arguments": {}, "inputResponses": {"upstream": reply},
                "requestState": bad, "_meta": ELICITING}, id=33, name="up_ask"))
            rpc = r.rpc()
            check("error" in rpc and rpc["error"]["code"] == -32602,
                  "a bad requestState is -32602: %r" % rpc)
            check("requestState" in rpc["error"]["message"], "it names requestState: %r" % rpc)

    def t_timeout():
        done = {}
        sleep_s = 10  # the upstream's call; timeout_ms (2 s) ends it long before

        def slow():
            t0 = time.monotonic()
            done["err"] = error_of(p, "up_sleep", {"seconds": sleep_s, "tag": "timeout"}, id=41)
            done["took"] = time.monotonic() - t0
        th = threading.Thread(target=slow)
        th.start()
        # the slow call is at the upstream (so in flight) before another is made
        up_call = wait_for(lambda: main_fake.call_with("sleep", "tag", "timeout"), IO_TIMEOUT,
                           "the upstream got the slow call")
        check_eq(result_of(p, "up_echo", {"message": "meanwhile"}, id=42)["content"][0]["text"],
                 "echo: meanwhile", "another tool answers while one is slow")
        th.join(sleep_s + IO_TIMEOUT)
        check("err" in done, "the slow call was answered")
        check_eq(done["err"]["code"], -32000, "the timeout's code")
        check(INST in done["err"]["message"], "the error names the instance: %r" % done["err"])
        # by timeout_ms (2 s), not by the upstream's answer (sleep_s)
        check(done["took"] < sleep_s - 2, "answered near timeout_ms (%.1fs)" % done["took"])
        wait_for(lambda: main_fake.cancelled(up_call["id"]), 10,
                 "notifications/cancelled for upstream id %r" % up_call["id"])
        check_eq(result_of(p, "up_echo", {"message": "after"}, id=43)["content"][0]["text"],
                 "echo: after", "still serving after a timeout")

    pool_fake = Fake(ctx, "pool")
    pool = start(mcp_manifest(stdio_cfg(pool_fake), timeout_ms=1000, inline=False), "pool")

    def t_timeout_on_pool():
        wait_tool(pool.port, "up_echo")
        err = error_of(pool.port, "up_sleep", {"seconds": 5, "tag": "pool"}, id=44)
        check(INST in err["message"], "the error names the instance: %r" % err)
        up_id = pool_fake.call_with("sleep", "tag", "pool")["id"]
        wait_for(lambda: pool_fake.cancelled(up_id), 10,
                 "notifications/cancelled for upstream id %r with inline_dispatch false" % up_id)

    def t_client_cancel():
        sid = session(p)
        with Conn(p) as a:
            request(p, body={"jsonrpc": "2.0", "id": 51, "method": "tools/call",
                             "params": {"name": "up_sleep",
                                        "arguments": {"seconds": 5, "tag": "cancel"}}},
                    session=sid, conn=a)
            check_eq(head_of(a)[0], 200, "the call's stream")
            read_stream(a, until="\n\n")
            wait_for(lambda: main_fake.call_with("sleep", "tag", "cancel"), 10,
                     "the upstream got the call")
            r = request(p, body={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                 "params": {"requestId": 51, "reason": "changed my mind"}},
                        session=sid)
            check_eq(r.status, 202, "the client's cancel")
            text, ended = read_stream(a)
        got = [m for m in stream_messages(text) if m.get("id") == 51]
        check(ended and got and "error" in got[0], "the call ends with an error: %r" % text)
        up_id = main_fake.call_with("sleep", "tag", "cancel")["id"]
        wait_for(lambda: main_fake.cancelled(up_id), 10,
                 "notifications/cancelled for upstream id %r" % up_id)

    def t_list_changed():
        wait_tool(p, "up_echo")
        err = gw.stderr()
        check("bad name!" in err, "the invalid name is logged:\n%s" % gw.stderr_tail())
        check("x" * 70 in err, "the too long name is logged")
        names = tool_names(p)
        check(not any("bad" in n or "xxxx" in n for n in names), "left out: %r" % names)
        sid = session(p)
        with Conn(p) as g:
            request(p, "GET", session=sid, accept="text/event-stream", conn=g)
            check_eq(head_of(g)[0], 200, "the GET stream")
            res = result_of(p, "up_add_tool", {"name": "fresh"}, id=61)
            check_eq(res["content"][0]["text"], "added", "add_tool")
            text, _ = read_stream(g, until="notifications/tools/list_changed", timeout=15)
        wait_tool(p, "up_fresh", timeout=15)
        err = error_of(p, "up_fresh", {}, id=62)
        check_eq(err["message"], "Unknown tool: fresh", "the new tool is routed to the upstream")
        check("up_echo" in tool_names(p), "the others still served")

    # ---- supervision and a hostile stdio upstream ----

    sup_fake = Fake(ctx, "sup")
    sup = start(mcp_manifest(stdio_cfg(sup_fake, "--garbage", "--stderr", "sup is up",
                                       max_message_bytes=4096), timeout_ms=15000), "sup")
    sp = sup.port

    def t_exit_restart():
        wait_tool(sp, "up_echo")
        pid1 = sup_fake.pid()
        check(pid1, "the fake wrote its pid")
        slow = {}
        th = threading.Thread(target=lambda: slow.update(
            err=error_of(sp, "up_sleep", {"seconds": 10, "tag": "inflight"}, id=71)))
        th.start()
        wait_for(lambda: sup_fake.call_with("sleep", "tag", "inflight"), 10, "the slow call sent")
        err = error_of(sp, "up_exit", {"code": 3}, id=72)
        check(INST in err["message"], "the exit call's error names the instance: %r" % err)
        th.join(IO_TIMEOUT)
        check("err" in slow, "the call in flight was answered")
        check(INST in slow["err"]["message"], "in-flight error names the instance: %r" % slow)
        # the log lines come from the upstream's reader, apart from the answers
        wait_for(lambda: "upstream unavailable" in sup.stderr(), 10,
                 "\"upstream unavailable\" logged:\n%s" % sup.stderr_tail())
        wait_for(lambda: "upstream stderr: fake: exiting on request" in sup.stderr(), 10,
                 "its last stderr line logged")
        wait_for(lambda: sup_fake.pid() not in (None, pid1), 15, "a new upstream process")
        wait_for(lambda: echo_works(sp), 15, "calls work again after the restart")
        check(not os.path.exists("/proc/%d" % pid1), "the old process is gone (reaped)")

    def t_garbage():
        check("not JSON" in sup.stderr(), "the garbage at start is logged:\n%s"
              % sup.stderr_tail())
        check_eq(result_of(sp, "up_garbage", {}, id=81)["content"][0]["text"], "after garbage",
                 "garbage lines ignored, the answer taken")

    def t_oversize():
        pid1 = sup_fake.pid()
        err = error_of(sp, "up_huge", {"bytes": 10000}, id=91)
        check(INST in err["message"], "the call fails naming the instance: %r" % err)
        wait_for(lambda: "max_message_bytes" in sup.stderr(), 10,
                 "the log names max_message_bytes:\n%s" % sup.stderr_tail())
        wait_for(lambda: sup_fake.pid() not in (None, pid1), 15, "restarted")
        wait_for(lambda: echo_works(sp), 15, "calls work again")

    def t_spawn_fails_retried():
        cfg = {"command": "no-such-mcp-server-for-the-test", "restart_min_ms": 50,
               "restart_max_ms": 100}
        g = start(mcp_manifest(cfg), "nospawn")
        wait_for(lambda: g.stderr().count("could not start") >= 3, 15,
                 "every retry tries to start the command again:\n%s" % g.stderr_tail(8))
        check_eq(result_of(g.port, "echo", {"message": "x"})["content"][0]["text"], "Echo: x",
                 "the other backend keeps serving")

    # ---- the stateless wire over stdio ----

    sl_fake = Fake(ctx, "stateless")
    sl = start(mcp_manifest(stdio_cfg(sl_fake, "--wire", "stateless"), timeout_ms=3000),
               "stateless")
    slp = sl.port

    def t_stateless_caps():
        wait_tool(slp, "up_echo")
        check("stateless wire" in sl.stderr(), "negotiated the stateless wire:\n%s"
              % sl.stderr_tail())
        caps = {"elicitation": {"form": {}}, "roots": {}}
        body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "up_echo", "arguments": {"message": "caps"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": caps}}})
        raw = build_request(slp, headers=stateless_headers("tools/call", "up_echo"), body=body)
        r = send_one(slp, raw)
        expect_result(r, r.rpc(), 5, "echo")
        m = sl_fake.call_with("echo", "message", "caps")
        meta = m["params"]["_meta"]
        check_eq(meta.get("io.modelcontextprotocol/protocolVersion"), "2026-07-28", "version")
        check_eq(meta.get("io.modelcontextprotocol/clientCapabilities"), caps,
                 "the client's capabilities reach the upstream")

    def t_stateless_timeout_cancels():
        err = error_of(slp, "up_sleep", {"seconds": 8, "tag": "sl"}, id=6)
        check(INST in err["message"], "names the instance: %r" % err)
        up_id = sl_fake.call_with("sleep", "tag", "sl")["id"]
        wait_for(lambda: sl_fake.cancelled(up_id), 10,
                 "notifications/cancelled on stdio (the stateless wire keeps it there)")

    # ---- HTTP ----

    http_fake = Fake(ctx, "http")
    procs = []

    def start_http(port=0):
        """The HTTP fake on port (0: one the system picks, bound by the fake itself);
        the port it listens on."""
        pf = ctx.path("http.port")
        if os.path.exists(pf):
            os.unlink(pf)
        proc = subprocess.Popen([sys.executable] + http_fake.argv(
            "--http", str(port), "--port-file", pf, "--get", "sse",
            "--require-auth", "Bearer s3cret"), preexec_fn=_child_setup)
        procs.append(proc)
        return fake_port(pf)

    def t_http():
        hport = start_http()
        hm = mcp_manifest({"url": "http://127.0.0.1:%d/mcp" % hport,
                           "headers": {"Authorization": "Bearer ${FAKE_TOKEN}"},
                           "restart_min_ms": 100, "restart_max_ms": 400}, timeout_ms=5000)
        hg = start(hm, "http", env={"FAKE_TOKEN": "s3cret"})
        hp = hg.port
        wait_tool(hp, "up_echo")
        check_eq(result_of(hp, "up_echo", {"message": "over http"}, id=2)["content"][0]["text"],
                 "echo: over http", "a call over HTTP")
        recs = http_fake.records()
        minted = [r["minted"] for r in recs if "minted" in r]
        check_eq(len(minted), 1, "one session")
        call = [r for r in recs if r.get("msg", {}).get("method") == "tools/call"][-1]
        check_eq(call["msg"]["params"]["name"], "echo", "the upstream's own name")
        check_eq(call["headers"].get("mcp-session-id"), minted[0], "the session id on the call")
        check_eq(call["headers"].get("authorization"), "Bearer s3cret",
                 "the configured header (from ${FAKE_TOKEN})")
        check("traceparent" not in call["headers"], "no trace given, none sent")
        # W3C Trace Context: the client's traceparent (and tracestate) go on to the upstream
        # unchanged; an invalid one (zero trace-id) is dropped, tracestate with it
        tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        for n, (given, want) in enumerate([(tp, tp),
                                           ("00-" + "0" * 32 + "-00f067aa0ba902b7-01", None)]):
            body = rpc_body("tools/call", {"name": "up_echo", "arguments": {"message": "t%d" % n}},
                            id=40 + n)
            hdrs = stateless_headers("tools/call", "up_echo") + [("traceparent", given),
                                                                  ("tracestate", "v=1")]
            r = send_one(hp, build_request(hp, headers=hdrs, body=body))
            check_eq(r.status, 200, "a traced call")
            traced = [x for x in http_fake.records()
                      if x.get("msg", {}).get("params", {}).get("arguments", {}).get("message")
                      == "t%d" % n][-1]
            check_eq(traced["headers"].get("traceparent"), want, "traceparent upstream (%s)" % given)
            check_eq(traced["headers"].get("tracestate"), "v=1" if want else None,
                     "tracestate upstream (%s)" % given)
        sid = session(hp)
        r = request(hp, body={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                              "params": {"name": "up_progress", "arguments": {"steps": 2},
                                         "_meta": {"progressToken": 99}}}, session=sid)
        prog = [m for m in stream_messages(r.body.decode())
                if m.get("method") == "notifications/progress"]
        check(len(prog) == 2 and all(m["params"]["progressToken"] == 99 for m in prog),
              "progress over the upstream's SSE answer: %r" % r.body[:500])
        # a call whose client goes away (its deadline) closes its upstream stream only
        short = start(mcp_manifest({"url": "http://127.0.0.1:%d/mcp" % hport,
                                    "headers": {"Authorization": "Bearer ${FAKE_TOKEN}"}},
                                   timeout_ms=2000), "http-short", env={"FAKE_TOKEN": "s3cret"})
        wait_tool(short.port, "up_echo")
        for i in range(3):  # deadlines of 2 s against 6 s calls; an echo fits in 2 s
            err = error_of(short.port, "up_sleep", {"seconds": 6}, id=60 + i)
            check(INST in err["message"] and "timed out" in err["message"],
                  "the deadline names the instance: %r" % err)
        check_eq(result_of(short.port, "up_echo", {"message": "still"}, id=70)["content"][0]["text"],
                 "echo: still", "the link is still up after abandoned calls")
        check("upstream unavailable" not in short.stderr(),
              "an abandoned call does not bring the link down")
        # the upstream restarts: new sessions (one for each gateway on it, hg's and
        # short's, minted in whichever order they reconnect)
        before = [r["minted"] for r in http_fake.records() if "minted" in r]
        stop_process(procs[-1])
        start_http(hport)  # the same port: the gateways' url names it
        wait_for(lambda: echo_works(hp), 15, "calls work again after the upstream restarted")
        recs = http_fake.records()
        minted = [r["minted"] for r in recs if "minted" in r][len(before):]
        check(minted, "a new session after the restart: %r" % minted)
        call = [r for r in recs if r.get("msg", {}).get("method") == "tools/call"
                and (r["msg"].get("params", {}).get("arguments") or {}).get("message") == "back"][-1]
        check(call["headers"].get("mcp-session-id") in minted,
              "the call after the restart used a new session: %r, minted since %r"
              % (call["headers"].get("mcp-session-id"), minted))

    def make_certs():
        """A CA and a server certificate for 127.0.0.1 (openssl, as the deps install)."""
        d = ctx.path("tls")
        os.makedirs(d, exist_ok=True)
        def run(*argv):
            r = subprocess.run(argv, cwd=d, capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, "%s: %s" % (" ".join(argv), r.stderr[-400:]))
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test ca")
        run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1")
        with open(os.path.join(d, "ext.cnf"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        run("openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "ext.cnf")
        return [os.path.join(d, n) for n in ("ca.pem", "srv.pem", "srv.key")]

    def t_https():
        ca, cert, key = make_certs()
        tls_fake = Fake(ctx, "https")
        pf = ctx.path("https.port")
        proc = subprocess.Popen([sys.executable] + tls_fake.argv(
            "--http", "0", "--port-file", pf, "--tls-cert", cert, "--tls-key", key),
            preexec_fn=_child_setup)
        procs.append(proc)
        port = fake_port(pf)
        url = "https://127.0.0.1:%d/mcp" % port
        verified = start(mcp_manifest({"url": url, "ca_file": ca}, timeout_ms=5000), "https-ok")
        wait_tool(verified.port, "up_echo")
        check_eq(result_of(verified.port, "up_echo", {"message": "tls"}, id=2)["content"][0]["text"],
                 "echo: tls", "a call over HTTPS, the certificate verified against ca_file")
        refused = start(mcp_manifest({"url": url, "restart_min_ms": 100, "restart_max_ms": 200},
                                     timeout_ms=5000), "https-refused")
        wait_for(lambda: "certificate verify failed" in refused.stderr(), 10,
                 "the verification failure logged")
        err = error_of(refused.port, "up_echo", {"message": "x"}, id=3)
        check(err is not None, "no tool is offered by an upstream that cannot be verified")
        insecure = start(mcp_manifest({"url": url, "tls_insecure": True}, timeout_ms=5000),
                         "https-insecure")
        wait_tool(insecure.port, "up_echo")

    def t_forced_stateless_refused():
        legacy_fake = Fake(ctx, "forced")
        g = start(mcp_manifest(stdio_cfg(legacy_fake, wire="stateless", restart_min_ms=50,
                                         restart_max_ms=100)), "forced")
        wait_for(lambda: g.stderr().count("does not speak the stateless wire") >= 2, 10,
                 "the refusal logged, and tried again")
        err = error_of(g.port, "up_echo", {"message": "x"}, id=80)
        check(INST in err["message"] or err["code"] == -32602, "an error, not a hang: %r" % err)
        check(g.proc.poll() is None, "the gateway is still running")

    def t_http_stateless_direct():
        """A stateless upstream over HTTP: calls go out on the gateway's own loops (the
        direct path: request ids from 2^40), with the same faithfulness."""
        sfake = Fake(ctx, "direct")
        pf = ctx.path("direct.port")
        proc = subprocess.Popen([sys.executable] + sfake.argv(
            "--http", "0", "--port-file", pf, "--wire", "stateless"),
            preexec_fn=_child_setup)
        procs.append(proc)
        port = fake_port(pf)
        g = start(mcp_manifest({"url": "http://127.0.0.1:%d/mcp" % port}, timeout_ms=2000),
                  "direct")
        wait_tool(g.port, "up_echo")
        check_eq(result_of(g.port, "up_echo", {"message": "d"}, id=2)["content"][0]["text"],
                 "echo: d", "a call on the direct path")
        rec = [r for r in sfake.records() if r.get("msg", {}).get("method") == "tools/call"][-1]
        check(rec["msg"]["id"] >= 1 << 40, "sent from the loop (direct path id): %r" % rec["msg"])
        check_eq(rec["headers"].get("mcp-method"), "tools/call", "Mcp-Method")
        check_eq(rec["headers"].get("mcp-name"), "echo", "Mcp-Name: the upstream's own name")
        meta = rec["msg"]["params"].get("_meta", {})
        check("io.modelcontextprotocol/clientCapabilities" in meta, "the envelope: %r" % meta)
        res = result_of(g.port, "up_rich", {"is_error": True}, id=3)
        check_eq(res.get("structuredContent"), {"answer": 42, "nested": {"a": [1, None]}},
                 "structuredContent unchanged")
        err = error_of(g.port, "up_fail", {}, id=4)
        check_eq(err, {"code": -32050, "message": "the fake failed on purpose",
                       "data": {"why": "asked to", "list": [1, 2, 3]}}, "the error unchanged")
        sid = session(g.port)
        r = request(g.port, body={"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                                  "params": {"name": "up_progress", "arguments": {"steps": 2},
                                             "_meta": {"progressToken": "tok"}}}, session=sid)
        prog = [m for m in stream_messages(r.body.decode())
                if m.get("method") == "notifications/progress"]
        check(len(prog) == 2 and all(m["params"]["progressToken"] == "tok" for m in prog),
              "progress with the client's token on the direct path: %r" % r.body[:400])
        for i in range(3):  # deadlines of 2 s against 6 s calls
            err = error_of(g.port, "up_sleep", {"seconds": 6}, id=10 + i)
            check(INST in err["message"] and "timed out" in err["message"],
                  "the deadline names the instance: %r" % err)
        check_eq(result_of(g.port, "up_echo", {"message": "e"}, id=20)["content"][0]["text"],
                 "echo: e", "serving after abandoned direct calls")
        check("upstream unavailable" not in g.stderr(), "the link stayed up")

    def t_stop():
        for g in gws:
            g.stop()
        for proc in procs:
            stop_process(proc)

    try:
        return run_tests([
            ("https: verified with ca_file, refused without it, accepted with tls_insecure",
             t_https),
            ("--check names the key at fault", t_check),
            ("a stateless HTTP upstream: the direct path from the loops, as faithful",
             t_http_stateless_direct),
            ("wire stateless against a session-wire upstream: refused, retried, no crash",
             t_forced_stateless_refused),
            ("a prefixed call: the upstream's own name; results and errors unchanged",
             t_prefix_and_unchanged),
            ("initialize declares the capabilities; the upstream's stderr is logged",
             t_initialize_caps),
            ("progress reaches the client with its own token", t_progress),
            ("notifications/message reaches the call's stream", t_log_message),
            ("elicitation on the session wire: the client's answer reaches the upstream",
             t_elicitation_legacy),
            ("elicitation bridged for a stateless client: input_required, then the retry",
             t_elicitation_bridge),
            ("timeout_ms: an error naming the instance, the upstream told cancelled",
             t_timeout),
            ("timeout_ms on the pool (inline_dispatch false): the upstream told cancelled",
             t_timeout_on_pool),
            ("a client's cancel reaches the upstream", t_client_cancel),
            ("list changes: the new tool served, sessions told, bad names left out",
             t_list_changed),
            ("the stdio upstream exits: errors, logged, restarted", t_exit_restart),
            ("garbage lines are logged and ignored", t_garbage),
            ("a line over max_message_bytes brings the link down; it recovers", t_oversize),
            ("a command that cannot start is tried again", t_spawn_fails_retried),
            ("stateless stdio upstream: the client's capabilities per request", t_stateless_caps),
            ("stateless stdio upstream: a timeout sends notifications/cancelled",
             t_stateless_timeout_cancels),
            ("HTTP: session id, configured headers, progress, a restarted upstream", t_http),
            ("everything stops cleanly", t_stop),
        ], ctx)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


if __name__ == "__main__":
    sys.exit(main())
