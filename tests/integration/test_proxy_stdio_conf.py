#!/usr/bin/python3
"""conf/proxy-stdio.json as shipped, its upstream a command with arguments:
MCPG_UPSTREAM_CMD holds the program and its arguments in one string
(backend_mcp's command_line), as `npx -y pkg` or `uvx pkg` are written.

  * a command whose arguments include a quoted path with a space: the upstream
    gets them word for word (it records what it receives in that file) and a
    tools/call goes through it; the upstream ends with the gateway
  * a command line a shell would be needed for (a pipe) is refused by --check,
    naming the key"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, call_tool, check, check_eq, expect_result,  # noqa: E402
                     parse_args, readyz, run_cli, run_tests, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_mcp_upstream.py")


def process_gone(pid):
    """True once pid is no process, or only a zombie left for init to reap."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def main():
    args = parse_args()
    ctx = Context(args)
    conf = os.path.join(args.source, "conf", "proxy-stdio.json")

    def t_command_with_arguments():
        folder = ctx.path("upstream files")  # the space must survive the splitting
        os.makedirs(folder)
        record = os.path.join(folder, "received.jsonl")
        pid_file = os.path.join(folder, "upstream.pid")
        cmd = "/usr/bin/python3 \"%s\" --wire legacy --record '%s' --pid-file %s" % (
            FAKE, record, pid_file.replace(" ", "\\ "))
        env = {"MCPG_UPSTREAM_CMD": cmd, "MCPG_AUDIT_FILE": ctx.path("audit.jsonl")}
        with Gateway(ctx, config=conf, env=env, name="proxy-stdio") as gw:
            wait_for(lambda: readyz(gw.port).status == 200, 30, "the upstream's first lists")
            r, rpc = call_tool(gw.port, "echo", {"message": "through a command line"}, id=7)
            res = expect_result(r, rpc, 7, "tools/call echo")
            check_eq(res["content"][0]["text"], "echo: through a command line", "the answer")
            with open(record) as f:
                got = [json.loads(ln)["msg"] for ln in f if ln.strip()]
            calls = [m for m in got if m.get("method") == "tools/call"]
            check(calls and calls[-1]["params"]["name"] == "echo",
                  "the upstream recorded the call in %s: %r" % (record, got))
            with open(pid_file) as f:
                upstream_pid = int(f.read())
        wait_for(lambda: process_gone(upstream_pid), 15, "the upstream to end with the gateway")

    def t_shell_syntax_refused():
        env = {"MCPG_UPSTREAM_CMD": "/usr/bin/python3 server.py | tee log"}
        rc, out, err = run_cli(ctx, ["--check", "--config", conf], env=env)
        check_eq(rc, 2, "--check exit code (stderr: %s)" % err)
        check("modules[0].config.command_line: " in err and "'|'" in err,
              "the error names command_line and the pipe: %r" % err)

    return run_tests([
        ("proxy-stdio.json: a command with arguments, a call through it", t_command_with_arguments),
        ("proxy-stdio.json: shell syntax in the command is refused", t_shell_syntax_refused),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
