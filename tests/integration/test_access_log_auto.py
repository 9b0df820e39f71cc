#!/usr/bin/python3
"""gateway.server.access_log: "auto" (the default) writes a line for every request
whose outcome the audit trail does not hold. With an audit sink, a tools/call it
recorded gets no access line, while a 404, GET /healthz and a body refused at the
HTTP layer (400) do; with access_log true every request gets one; with no audit sink
a tools/call does. A value other than true, false and "auto" is refused by --check,
naming gateway.server.access_log."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, audit_id, audit_name, base_manifest,  # noqa: E402
                     build_request, call_tool, check, check_eq, expect_result, http_get,
                     parse_args, read_audit, run_cli, run_tests, send_one, wait_for)

ECHO_ID = "logged-or-not"


def access_lines(gw):
    """The access log's lines on the gateway's stderr, as JSON objects."""
    out = []
    for ln in gw.stderr().splitlines():
        if '"msg":"access"' in ln:
            out.append(json.loads(ln))
    return out


def traffic(gw, audit=None):
    """A tools/call, a bad body, GET /healthz and a 404 on one loop, in that order;
    the access lines once the 404's is written (one loop writes its lines in order,
    so any line of the earlier requests is there by then)."""
    r, rpc = call_tool(gw.port, "echo", {"message": "hi"}, id=ECHO_ID)
    expect_result(r, rpc, ECHO_ID, "echo")
    if audit:
        wait_for(lambda: [e for e in read_audit(audit) if audit_id(e) == ECHO_ID and
                          audit_name(e) == "mcpg.tool.call.completed"], 15,
                 "the call's completed event in the audit trail")
    bad = send_one(gw.port, build_request(gw.port, headers=[
        ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")],
        body="{not json"))
    check_eq(bad.status, 400, "POST /mcp with a body that is not JSON")
    check_eq(http_get(gw.port, "/healthz")[0], 200, "GET /healthz")
    check_eq(http_get(gw.port, "/no-such-path")[0], 404, "GET /no-such-path")
    wait_for(lambda: any(ln["path"] == "/no-such-path" for ln in access_lines(gw)), 15,
             "the 404's access line")
    return access_lines(gw)


def calls_logged(lines):
    return [ln for ln in lines if ln["method"] == "POST" and ln["path"] == "/mcp" and
            ln["status"] == 200]


def logged(lines, path, status):
    return any(ln["path"] == path and ln["status"] == status for ln in lines)


def manifest(ctx, name, audited, access_log=None):
    server = {} if access_log is None else {"access_log": access_log}
    return base_manifest(audit_path=ctx.path(name + ".jsonl") if audited else None,
                         server=server, gateway={"workers": 1})


def main():
    args = parse_args()
    ctx = Context(args)

    def t_auto_with_audit():
        m = manifest(ctx, "auto", True)
        with Gateway(ctx, manifest=m, name="auto") as gw:
            lines = traffic(gw, audit=ctx.path("auto.jsonl"))
        check_eq(calls_logged(lines), [], "access lines of the audited tools/call")
        check(logged(lines, "/mcp", 400), "the 400's access line: %r" % lines)
        check(logged(lines, "/healthz", 200), "GET /healthz's access line: %r" % lines)

    def t_true_with_audit():
        m = manifest(ctx, "true", True, access_log=True)
        with Gateway(ctx, manifest=m, name="true") as gw:
            lines = traffic(gw, audit=ctx.path("true.jsonl"))
        check_eq(len(calls_logged(lines)), 1, "access lines of the tools/call with true")
        check(logged(lines, "/no-such-path", 404), "the 404's line")

    def t_auto_without_audit():
        with Gateway(ctx, manifest=manifest(ctx, "noaudit", False), name="noaudit") as gw:
            lines = traffic(gw)
        check_eq(len(calls_logged(lines)), 1, "access lines of the tools/call, no audit sink")

    def t_false():
        m = manifest(ctx, "off", True, access_log=False)
        with Gateway(ctx, manifest=m, name="off") as gw:
            call_tool(gw.port, "echo", {"message": "hi"}, id=1)
            check_eq(http_get(gw.port, "/no-such-path")[0], 404, "GET /no-such-path")
            r, rpc = call_tool(gw.port, "echo", {"message": "hi"}, id=2)
            expect_result(r, rpc, 2, "echo after the 404")
            check_eq(access_lines(gw), [], "access lines with false")

    def t_check_refuses_other_values():
        for bad in ["yes", 1, "AUTO"]:
            m = manifest(ctx, "bad", True, access_log=bad)
            path = ctx.path("bad.json")
            with open(path, "w") as f:
                json.dump(m, f)
            rc, out, err = run_cli(ctx, ["--check", "--config", path])
            check(rc != 0, "--check with access_log %r exits non-zero" % (bad,))
            check('gateway.server.access_log: must be true, false or "auto"' in out + err,
                  "--check names the key for %r: %r" % (bad, out + err))

    return run_tests([
        ("auto with an audit sink: the audited call has no line, the rest do",
         t_auto_with_audit),
        ("true: every request has a line", t_true_with_audit),
        ("auto without an audit sink: the call has a line", t_auto_without_audit),
        ("false: no line", t_false),
        ("--check refuses a value that is not true, false or \"auto\"",
         t_check_refuses_other_values),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
