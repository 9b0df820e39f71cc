#!/usr/bin/python3
"""README.md's "Connecting a client" works as printed against the embedded
default manifest (conf/mcpg.json, what `make run` serves).

Each snippet is the fenced block after a `<!-- client: NAME -->` line, taken
verbatim; only the port changes (the test's free port for 8787). The Inspector
and mcp-remote run from tests/newcomer, where `npx --no-install` finds them in
node_modules and fetches nothing (that folder's .bin first on PATH too, for the
Node.js 22 the Inspector needs); the SDK programs run with the
SDKs tests/clients/node_modules holds. Node.js programs get a HOME of their own
(the Inspector and mcp-remote keep state there) and no npm update check."""
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from gateway import (Context, Gateway, check, check_eq, fail, parse_args,  # noqa: E402
                     read_audit, run_tests)
from procgroup import group_members, kill_group, wait_group_gone  # noqa: E402

README_ADDR = "127.0.0.1:8787"
README_URL = "http://%s/mcp" % README_ADDR
NEWCOMER_BIN = os.path.join(HERE, "node_modules", ".bin")
SDK_MODULES = os.path.join(HERE, "..", "clients", "node_modules")
# What conf/mcpg.json serves, and what its echo tool answers to message "hi".
DEFAULT_TOOLS = ["echo", "sqrt", "pow", "cos"]
ECHO_HI = {"content": [{"type": "text", "text": "Echo: hi"}]}
# The wire each SDK snippet speaks, as README.md says.
SDK_WIRES = {"sdk-v1": "2025-11-25", "sdk-v2": "2026-07-28"}
RUN_TIMEOUT = 120
STOP_TIMEOUT = 30


def readme_snippets(source):
    """{name: fenced block body} for every `<!-- client: name -->` in README.md."""
    with open(os.path.join(source, "README.md")) as f:
        readme = f.read()
    found = re.findall(r"<!-- client: (\S+) -->\s*```\w*\n(.*?)```", readme, re.S)
    names = [n for n, _ in found]
    check_eq(len(names), len(set(names)), "README client snippet names are unique")
    return dict(found)


def shell_commands(block):
    """The commands of an sh block: continuation lines joined, comments dropped."""
    joined = block.replace("\\\n", " ")
    return [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.startswith("#")]


def local_npx(command):
    """The README's `npx PACKAGE ...` run from the installed packages only."""
    check(command.startswith("npx "), "not an npx command: %r" % command)
    return "npx --no-install " + command[len("npx "):]


def node_env(ctx):
    check(os.path.isdir(NEWCOMER_BIN),
          "%s is missing: run scripts/install-deps.sh (npm ci in tests/newcomer)" % NEWCOMER_BIN)
    env = dict(os.environ)
    env["PATH"] = NEWCOMER_BIN + os.pathsep + env.get("PATH", "")
    home = ctx.path("home")
    os.makedirs(home, exist_ok=True)
    env["HOME"] = home
    env["npm_config_update_notifier"] = "false"
    return env


def run_in_group(argv, env, timeout=RUN_TIMEOUT, **kw):
    """Runs argv to its end in a process group of its own; returns (rc, stdout,
    stderr). Whatever it started and left behind is killed, and that fails."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        fail("%r did not end within %ss" % (argv, timeout))
    left = group_members(p.pid)
    kill_group(p)
    check_eq(left, [], "processes %r left behind" % (argv,))
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


class LineReader:
    """The lines a child writes to stdout, read on a thread, so the test can wait
    for one with a deadline."""

    def __init__(self, stream):
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream):
        for line in stream:
            self.lines.put(line.decode(errors="replace"))
        self.lines.put(None)

    def message_with_id(self, msg_id, timeout=RUN_TIMEOUT):
        """The next JSON-RPC message with this id (other lines are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            check(left > 0, "no answer with id %r within %ss" % (msg_id, timeout))
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            check(line is not None, "stdout ended before the answer with id %r" % msg_id)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("id") == msg_id:
                return msg


def send_lines(proc, *messages):
    for m in messages:
        proc.stdin.write((json.dumps(m) + "\n").encode())
    proc.stdin.flush()


def main():
    args = parse_args()
    ctx = Context(args)
    snippets = readme_snippets(ctx.source)
    conf = os.path.join(ctx.source, "conf", "mcpg.json")

    def gateway(audit=None):
        audit = audit or ctx.path(ctx.unique("audit") + ".jsonl")
        return Gateway(ctx, config=conf, env={"MCPG_AUDIT_FILE": audit}, name="clients")

    def here(text, gw):
        """text with the README's address replaced by the running gateway's."""
        return text.replace(README_ADDR, "127.0.0.1:%d" % gw.port)

    def snippet(name):
        check(name in snippets, "README.md has no `<!-- client: %s -->` block" % name)
        check(README_URL in snippets[name], "the %s snippet must use %s" % (name, README_URL))
        return snippets[name]

    def t_inspector_cli():
        commands = shell_commands(snippet("inspector"))
        check_eq(len(commands), 2, "Inspector commands (tools/list, then tools/call)")
        results = []
        with gateway() as gw:
            for command in commands:
                rc, out, err = run_in_group(["bash", "-c", here(local_npx(command), gw)],
                                            node_env(ctx), cwd=HERE)
                check_eq(rc, 0, "exit code of %r (stderr %r)" % (command, err[-2000:]))
                try:
                    results.append(json.loads(out))
                except ValueError:
                    fail("%r printed no JSON: %r" % (command, out[-2000:]))
        check_eq([t["name"] for t in results[0]["tools"]], DEFAULT_TOOLS, "tools/list")
        check_eq(results[1], ECHO_HI, "tools/call echo")

    def t_mcp_remote():
        server = json.loads(snippet("mcp-remote"))["mcpServers"]["mcpg"]
        check_eq(server["command"], "npx", "the desktop entry's command")
        with gateway() as gw:
            argv = ["npx", "--no-install"] + [here(a, gw) for a in server["args"]]
            desktop_client_session(argv)

    def desktop_client_session(argv):
        """What a desktop client does with a stdio server: start it, initialize,
        call echo, then close its stdin."""
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=node_env(ctx), cwd=HERE,
                             start_new_session=True)
        try:
            out = LineReader(p.stdout)
            send_lines(p, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                      "clientInfo": {"name": "desktop", "version": "1"}}})
            init = out.message_with_id(1)
            check_eq(init.get("result", {}).get("serverInfo", {}).get("name"), "mcpg",
                     "initialize through mcp-remote: %r" % init)
            send_lines(p, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                       {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"message": "hi"}}})
            check_eq(out.message_with_id(2).get("result"), ECHO_HI, "tools/call through mcp-remote")
            p.stdin.close()  # the desktop client quits: mcp-remote ends with it
            check(wait_group_gone(p.pid, STOP_TIMEOUT),
                  "mcp-remote still running %ss after its stdin closed" % STOP_TIMEOUT)
        finally:
            kill_group(p)

    def t_ide_entries():
        vscode = json.loads(snippet("vscode"))["servers"]["mcpg"]
        check_eq(vscode, {"type": "http", "url": README_URL}, "VS Code entry")
        cursor = json.loads(snippet("cursor"))["mcpServers"]["mcpg"]
        check_eq(cursor, {"url": README_URL}, "Cursor entry")

    def sdk_program(name, gw):
        """The snippet as a program beside the SDKs; what its comments say it prints."""
        check(os.path.isdir(SDK_MODULES),
              "%s is missing: run scripts/install-deps.sh" % os.path.abspath(SDK_MODULES))
        code = snippet(name)
        folder = ctx.path(name)
        os.makedirs(folder)
        os.symlink(os.path.abspath(SDK_MODULES), os.path.join(folder, "node_modules"))
        program = os.path.join(folder, "client.mjs")
        with open(program, "w") as f:
            f.write(here(code, gw))
        promised = re.findall(r"console\.log\(.*\);\s*// (.*)", code)
        check(promised, "the %s snippet says nothing of what it prints" % name)
        return program, promised

    def sdk_test(name):
        def t():
            audit = ctx.path(name + "-audit.jsonl")
            with gateway(audit) as gw:
                program, promised = sdk_program(name, gw)
                rc, out, err = run_in_group(["node", program], node_env(ctx))
            check_eq(rc, 0, "exit code of the %s snippet (stderr %r)" % (name, err[-2000:]))
            check_eq(out.splitlines(), promised, "what the %s snippet prints" % name)
            wires = [r.get("wire") for r in read_audit(audit) if r.get("method") == "tools/call"]
            check(wires and set(wires) == {SDK_WIRES[name]},
                  "the %s snippet's calls came on wires %r" % (name, wires))
        return t

    return run_tests([
        ("README: MCP Inspector CLI", t_inspector_cli),
        ("README: a desktop client through mcp-remote", t_mcp_remote),
        ("README: IDE entries", t_ide_entries),
        ("README: TypeScript SDK v1", sdk_test("sdk-v1")),
        ("README: TypeScript SDK v2", sdk_test("sdk-v2")),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
