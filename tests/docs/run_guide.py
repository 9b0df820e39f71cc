#!/usr/bin/python3
"""docs/writing-a-module.md's out-of-tree walk-through works as printed.

Each fenced block that follows an `<!-- guide-test -->` line runs as printed,
in the page's order, in one bash shell (so `cd` and variables carry on), from
a temp folder that holds the source tree as mcpg/. A block that follows
`<!-- guide-test: NAME -->` is saved as NAME in the shell's folder at that
point, as the page tells the reader to do. The shell is given only what the
page tells the reader to choose: PREFIX (a fresh folder) and PORT (a free
loopback port). It passes when every block succeeds, the tool's answer is
printed, and the gateway the page starts (its pid in $gateway) exits 0 after
the page's `kill`. Run by ctest as docs_writing_a_module.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

MARK = re.compile(r"^<!-- guide-test(?::\s*(\S+))? -->\n```[a-z]*\n(.*?)^```\n", re.M | re.S)
# The tool's answer for the manifest the page prints: greeting "Hi", name "Ann".
ANSWER = '"content":[{"type":"text","text":"Hi, Ann!"}]'
GATEWAY_EXIT = "guide-test: the gateway exited "
RUN_TIMEOUT = 1200

# Whatever a failed block leaves running (the page's gateway) is stopped by pid.
PROLOGUE = """set -euo pipefail
stop_gateway() { [ -z "${gateway:-}" ] || { kill "$gateway" 2>/dev/null || true; wait "$gateway" || true; }; }
trap stop_gateway EXIT
"""
EPILOGUE = """rc=0; wait "$gateway" || rc=$?; gateway=
echo "%s$rc"
""" % GATEWAY_EXIT


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def heredoc(name, text):
    """The shell lines that save text as name, byte for byte."""
    end = "GUIDE_TEST_EOF"
    if ("\n" + end + "\n") in ("\n" + text):
        fail("a saved block holds the line " + end)
    return "cat > %s <<'%s'\n%s%s\n" % (name, end, text, end)


def script_of(page):
    with open(page) as f:
        doc = f.read()
    steps = []
    for n, m in enumerate(MARK.finditer(doc), 1):
        name, body = m.group(1), m.group(2)
        steps.append("echo '### %s block %d' >&2\n" % (os.path.basename(page), n))
        steps.append(heredoc(name, body) if name else body)
    if not steps:
        fail("%s: no block marked <!-- guide-test --> to run" % page)
    text = "".join(steps)
    if "gateway=$!" not in text:
        fail("%s: the marked blocks must start the gateway with `& gateway=$!` (its pid, for "
             "stopping it)" % page)
    return PROLOGUE + text + EPILOGUE


def run(script, cwd, env):
    """bash in a session of its own: a run that hangs, or this test stopped
    (ctest's timeout), stops it and what it started as a group."""
    p = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)

    def on_stop(signum, frame):
        os.killpg(p.pid, signal.SIGTERM)
        sys.exit(1)
    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    try:
        out, _ = p.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        out, _ = p.communicate()
        fail("the guide's commands did not end in %d s:\n%s" % (RUN_TIMEOUT, out.decode()))
    return p.returncode, out.decode("utf-8", "replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True, help="the mcpg source tree")
    ap.add_argument("--page", help="the page (default docs/writing-a-module.md)")
    args = ap.parse_args()
    source = os.path.abspath(args.source)
    page = args.page or os.path.join(source, "docs", "writing-a-module.md")
    script = script_of(page)
    tmp = tempfile.mkdtemp(prefix="mcpg-guide-")
    try:
        os.symlink(source, os.path.join(tmp, "mcpg"))
        env = dict(os.environ, PREFIX=os.path.join(tmp, "prefix"), PORT=str(free_port()),
                   CMAKE_BUILD_PARALLEL_LEVEL="2")
        env.pop("MCPG_CONFIG", None)
        rc, out = run(script, tmp, env)
        if rc != 0:
            fail("the guide's commands failed (exit %d):\n%s" % (rc, out))
        if ANSWER not in out:
            fail("no tools/call answer holding %s:\n%s" % (ANSWER, out))
        if GATEWAY_EXIT + "0" not in out:
            fail("the gateway did not stop cleanly on the guide's kill:\n%s" % out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("docs_writing_a_module: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
