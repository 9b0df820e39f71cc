#!/usr/bin/python3
"""End to end over the stateless (2026-07-28) wire, with the audit trail.

One gateway (backend_mock "echo", audit_file to a temp file):
  * tools/call echo with an integer id and with a string id -> the exact result;
  * the audit file holds exactly one mcpg.tool.call.allowed and one
    mcpg.tool.call.completed line for each call, carrying its JSON-RPC id (same
    JSON type), allowed before completed, both on disk when the answer arrives;
  * a resources/read is audited the same way (every method that reaches a
    backend is), with the method and the uri;
  * tools/list lists echo; server/discover answers;
  * SIGTERM -> exit 0, no sanitizer report.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, call_tool, check, check_eq,  # noqa: E402
                     expect_result, fail, parse_args, read_audit, audit_name, audit_id,
                     run_tests, send_one, stateless_request, PROTOCOL_VERSION, wait_for)

ALLOWED = "mcpg.tool.call.allowed"
COMPLETED = "mcpg.tool.call.completed"
EXPECTED_ECHO = {"content": [{"type": "text", "text": "Echo: hi"}], "resultType": "complete"}


def tool_events(path):
    return [(i, r) for i, r in enumerate(read_audit(path))
            if (audit_name(r) or "").startswith("mcpg.tool.call.")]


def events_for(path, rpc_id):
    # Compare id and its JSON type: 7 and "7" are different ids.
    return [(i, audit_name(r), r) for i, r in tool_events(path)
            if audit_id(r) == rpc_id and type(audit_id(r)) is type(rpc_id)]


def main():
    args = parse_args()
    ctx = Context(args)
    audit = ctx.path("audit.jsonl")
    gw = Gateway(ctx, manifest=base_manifest(
        audit_path=audit, gateway={"name": "e2e-gateway"},
        mock_config={"resources": [{"uri": "mock://secret", "text": "s3cret"}]}), name="e2e")
    gw.start()
    port = gw.port
    ids_called = []

    def echo_call(rpc_id):
        def t():
            r, rpc = call_tool(port, "echo", {"message": "hi"}, id=rpc_id)
            result = expect_result(r, rpc, rpc_id, "tools/call echo id=%r" % (rpc_id,))
            check_eq(result, EXPECTED_ECHO, "tools/call echo result")
            ids_called.append(rpc_id)
            # The completed event is durable before the answer is sent.
            ev = events_for(audit, rpc_id)
            names = [n for _, n, _ in ev]
            if names != [ALLOWED, COMPLETED]:
                late = None
                try:
                    wait_for(lambda: [n for _, n, _ in events_for(audit, rpc_id)]
                             == [ALLOWED, COMPLETED], 5, "audit lines")
                    late = "they appeared later"
                except AssertionError:
                    late = "still wrong after 5 s: %r" % (
                        [n for _, n, _ in events_for(audit, rpc_id)],)
                fail("audit for id %r when the answer arrived: %r, expected [%s, %s] (%s)\n"
                     "audit file:\n%s" % (rpc_id, names, ALLOWED, COMPLETED, late,
                                          open(audit).read() if os.path.exists(audit) else "(missing)"))
            (i_allowed, _, rec_a), (i_completed, _, rec_c) = ev
            check(i_allowed < i_completed, "allowed must come before completed")
            for rec in (rec_a, rec_c):
                check_eq(rec.get("method"), "tools/call", "audit method")
                check_eq(rec.get("tool"), "echo", "audit tool")
                check_eq(rec.get("backend"), "mock", "audit backend")
                check(isinstance(rec.get("seq"), int), "seq must be an integer: %r" % rec)
            check(rec_a["seq"] < rec_c["seq"], "seq must increase: %r %r" % (rec_a, rec_c))
            check("error_code" not in rec_c, "completed event carries an error: %r" % rec_c)
        return t

    def t_resource_read():
        r = send_one(port, stateless_request(port, "resources/read", {"uri": "mock://secret"},
                                             id=102, name="mock://secret"))
        result = expect_result(r, r.rpc(), 102, "resources/read")
        check_eq(result["contents"][0]["text"], "s3cret", "resources/read text")
        ev = events_for(audit, 102)
        check_eq([n for _, n, _ in ev], [ALLOWED, COMPLETED],
                 "a resources/read's audit lines when the answer arrived")
        for _, _, rec in ev:
            check_eq(rec.get("method"), "resources/read", "audit method")
            check_eq(rec.get("tool"), "mock://secret", "audit names the uri")
            check_eq(rec.get("backend"), "mock", "audit backend")

    def t_tools_list():
        r = send_one(port, stateless_request(port, "tools/list", {}, id=100))
        result = expect_result(r, r.rpc(), 100, "tools/list")
        tools = result.get("tools")
        check(isinstance(tools, list), "tools/list: tools must be a list: %r" % result)
        echo = [t for t in tools if isinstance(t, dict) and t.get("name") == "echo"]
        check_eq(len(echo), 1, "tools/list: number of tools named echo in %r" % tools)
        check(isinstance(echo[0].get("inputSchema"), dict),
              "tools/list: echo needs an inputSchema object: %r" % echo[0])

    def t_discover():
        r = send_one(port, stateless_request(port, "server/discover", {}, id=101))
        result = expect_result(r, r.rpc(), 101, "server/discover")
        versions = result.get("supportedVersions")
        check(isinstance(versions, list) and PROTOCOL_VERSION in versions,
              "server/discover: supportedVersions must list %s: %r" % (PROTOCOL_VERSION, result))
        caps = result.get("capabilities")
        check(isinstance(caps, dict) and "tools" in caps,
              "server/discover: capabilities must include tools: %r" % result)
        whole = r.rpc()["result"]  # expect_result leaves the serverInfo out
        info = whole.get("_meta", {}).get("io.modelcontextprotocol/serverInfo", {})
        check_eq(info.get("name"), "e2e-gateway", "server/discover: serverInfo.name is gateway.name")

    def t_audit_totals():
        check(ids_called == [7, "req-7"], "both tool calls must have succeeded first")
        ev = tool_events(audit)
        names = sorted(audit_name(r) for _, r in ev)
        check_eq(names, sorted([ALLOWED, COMPLETED] * 3),
                 "audit events in the file: two tool calls and a read (tools/list and "
                 "server/discover reach no backend)")
        for other in (100, 101):
            check_eq(events_for(audit, other), [], "audit events for id %r" % other)

    def t_stop():
        gw.stop()
        # Nothing duplicated or lost at shutdown.
        check_eq(len(tool_events(audit)), 6, "audit lines after shutdown")

    tests = [
        ("tools/call echo, integer id, audited", echo_call(7)),
        ("tools/call echo, string id, audited", echo_call("req-7")),
        ("resources/read, audited", t_resource_read),
        ("tools/list lists echo", t_tools_list),
        ("server/discover", t_discover),
        ("audit holds exactly the tool-call events", t_audit_totals),
        ("SIGTERM -> exit 0, no sanitizer report", t_stop),
    ]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
