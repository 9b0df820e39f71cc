#!/usr/bin/python3
"""The README's curl example works as printed against the embedded default
manifest (conf/mcpg.json, what `make run` serves): the command is taken from
README.md verbatim, only its port is replaced by the test's free port."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, audit_id, audit_name, check, check_eq,  # noqa: E402
                     parse_args, read_audit, run_tests, strip_server_info)

README_ADDR = "127.0.0.1:8787"


def read_readme(source):
    """README.md's text and its fenced blocks as (language, body) pairs."""
    with open(os.path.join(source, "README.md")) as f:
        readme = f.read()
    return readme, re.findall(r"```(\w*)\n(.*?)```", readme, re.S)


def curl_example(readme, blocks):
    """The "Try it" curl command, as printed, and the result it promises (a dict)."""
    curls = [b for lang, b in blocks
             if lang == "sh" and "curl " in b and "/mcp" in b and "tools/call" in b]
    check_eq(len(curls), 1, "README sh blocks with the curl example")
    cmd = curls[0]
    check(README_ADDR in cmd, "the README example must use %s" % README_ADDR)
    i = readme.index(cmd)
    expected = [b for lang, b in blocks if lang == "json" and readme.index(b) > i]
    check(expected, "README: no json block with the expected answer after the curl example")
    return cmd, json.loads(expected[0])


def run_curl_example(cmd, port):
    """Runs the README's curl command against 127.0.0.1:port; returns the JSON-RPC
    response after checking it is the one for id 1."""
    run = cmd.replace(README_ADDR, "127.0.0.1:%d" % port)
    p = subprocess.run(["bash", "-c", run], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    out = p.stdout.decode()
    check_eq(p.returncode, 0, "curl exit code (stderr %r)" % p.stderr.decode())
    try:
        resp = json.loads(out)
    except ValueError:
        raise AssertionError("curl printed no JSON: %r" % out)
    check_eq(resp.get("jsonrpc"), "2.0", "jsonrpc")
    check_eq(resp.get("id"), 1, "id")
    return resp


def main():
    args = parse_args()
    ctx = Context(args)
    readme, blocks = read_readme(ctx.source)

    def t_curl_example():
        cmd, expected = curl_example(readme, blocks)
        audit = ctx.path("readme-audit.jsonl")
        conf = os.path.join(ctx.source, "conf", "mcpg.json")
        gw = Gateway(ctx, config=conf, env={"MCPG_AUDIT_FILE": audit}, name="readme")
        with gw:
            resp = run_curl_example(cmd, gw.port)
            check_eq(strip_server_info(resp.get("result")), expected, "result (as README.md says)")
            events = [(audit_name(r), audit_id(r)) for r in read_audit(audit)]
            check_eq(events, [("mcpg.tool.call.allowed", 1), ("mcpg.tool.call.completed", 1)],
                     "audit events for the README call")

    def t_legacy_example():
        curls = [b for lang, b in blocks
                 if lang == "sh" and "curl " in b and "/mcp" in b and '"initialize"' in b]
        check_eq(len(curls), 1, "README sh blocks with the legacy initialize example")
        conf = os.path.join(ctx.source, "conf", "mcpg.json")
        with Gateway(ctx, config=conf, env={"MCPG_AUDIT_FILE": ctx.path("legacy-audit.jsonl")},
                     name="readme-legacy") as gw:
            run = curls[0].replace(README_ADDR, "127.0.0.1:%d" % gw.port)
            p = subprocess.run(["bash", "-c", run], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=30)
            out = p.stdout.decode()
            check_eq(p.returncode, 0, "curl exit code (stderr %r)" % p.stderr.decode())
            check(re.search(r"(?im)^mcp-session-id: [0-9a-f]{32}\r?$", out),
                  "the answer carries a session id: %r" % out[:400])
            check('"protocolVersion":"2025-11-25"' in out and "text/event-stream" in out,
                  "the initialize result as an SSE event: %r" % out[-400:])

    return run_tests([("README curl example against conf/mcpg.json", t_curl_example),
                      ("README legacy initialize example", t_legacy_example)], ctx)


if __name__ == "__main__":
    sys.exit(main())
