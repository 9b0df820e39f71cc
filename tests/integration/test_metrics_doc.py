#!/usr/bin/python3
"""docs/metrics.md's "Turning it on" works as printed: its manifest passes
--check and starts, and its curl line (only the port replaced by the test's
free one) prints mcpg_build_info from GET /metrics, where a call made first
is counted."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, call_tool, check, check_eq, expect_result, http_get,  # noqa: E402
                     parse_args, run_cli, run_tests)

DOC_ADDR = "127.0.0.1:8787"


def section(text, heading):
    start = text.index("\n" + heading + "\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def main():
    args = parse_args()
    ctx = Context(args)
    with open(os.path.join(args.source, "docs", "metrics.md")) as f:
        part = section(f.read(), "## Turning it on")
    blocks = re.findall(r"```(\w*)\n(.*?)```", part, re.S)
    manifests = [b for lang, b in blocks if lang == "json"]
    commands = [b for lang, b in blocks if lang == "sh"]

    def t_manifest_checks():
        check_eq(len(manifests), 1, "json blocks in the section")
        rc, out, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(manifests[0])])
        check_eq(rc, 0, "--check of the documented manifest (stderr: %s)" % err)

    def t_metrics_answer():
        check_eq(len(commands), 1, "sh blocks in the section")
        check(DOC_ADDR in commands[0], "the curl line uses %s" % DOC_ADDR)
        with Gateway(ctx, manifest=manifests[0], name="metrics-doc") as gw:
            r, rpc = call_tool(gw.port, "echo", {"message": "counted"}, id=3)
            expect_result(r, rpc, 3, "tools/call echo")
            run = commands[0].replace(DOC_ADDR, "127.0.0.1:%d" % gw.port)
            p = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=30)
            check_eq(p.returncode, 0, "the curl line's exit code (stderr %r)" % p.stderr)
            check(re.match(r'^mcpg_build_info\{[^}]*\} 1$', p.stdout.strip()),
                  "mcpg_build_info printed: %r" % p.stdout)
            status, _, body = http_get(gw.port, "/metrics")
            check_eq(status, 200, "GET /metrics")
            want = 'mcpg_tool_calls_total{tool="echo",outcome="ok"} 1'
            check(want in body.decode(), "the call counted (%s) in:\n%s" % (want, body.decode()[:2000]))

    return run_tests([
        ("the documented manifest passes --check", t_manifest_checks),
        ("it serves /metrics, as the curl line shows", t_metrics_answer),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
