"""What the proxy tests share (Python 3 standard library only).

  * Upstream       -- @modelcontextprotocol/server-everything over Streamable HTTP
                      on a free loopback port, started and stopped by pid,
                      restartable on the same port.
  * stdio_wrapper  -- writes the one-path program conf/proxy-stdio.json runs:
                      server-everything over stdio with an empty environment, so
                      its get-env tool answers the same whoever starts it.
  * sweep()        -- runs sweep.mjs (one client's sweep of every tool, resource
                      and prompt) and returns its record.
  * normalise() / compare() -- what may differ between two records, and the
                      differences that remain.
  * need_module()  -- a clear failure when a module is not built.

The gateway itself is started with tests/integration/gateway.py's Gateway.
"""

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import gateway as g  # noqa: E402

CLIENTS = os.path.join(HERE, "..", "clients")
EVERYTHING = os.path.join(CLIENTS, "node_modules", "@modelcontextprotocol",
                          "server-everything", "dist", "index.js")
SWEEP = os.path.join(HERE, "sweep.mjs")
SWEEP_TIMEOUT = float(os.environ.get("MCPG_SWEEP_TIMEOUT", "120"))
# How long a gateway may take to reach its upstreams and list their tools.
LISTS_TIMEOUT = float(os.environ.get("MCPG_LISTS_TIMEOUT", "30"))  # a wait, not a speed test: room for ASan beside other tests


def node_binary():
    node = shutil.which("node")
    g.check(node, "node is not on PATH (Node.js 20 or later is needed)")
    out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"^v(\d+)\.", out)
    g.check(m and int(m.group(1)) >= 20, "node %s is too old: the SDK clients need 20 or later" % out)
    g.check(os.path.exists(EVERYTHING),
            "%s is missing: run scripts/install-deps.sh (tests/clients/package.json)" % EVERYTHING)
    return node


def need_module(ctx, name):
    path = os.path.join(ctx.modules, name + ".so")
    g.check(os.path.exists(path), "module %s not found: no %s (is it built?)" % (name, path))


def list_tools_raw(port, id=1):
    """tools/list through the gateway on the stateless wire, every page, as
    the JSON the gateway sent (no SDK client in between)."""
    tools, cursor = [], None
    for page in range(50):
        params = {"cursor": cursor} if cursor else {}
        r = g.send_one(port, g.stateless_request(port, "tools/list", params, id=id + page))
        res = g.expect_result(r, r.rpc(), id + page, "raw tools/list")
        tools += res.get("tools", [])
        cursor = res.get("nextCursor")
        if not cursor:
            return tools
    g.fail("raw tools/list never stopped paging")


def wait_listed(port, want, what, timeout=LISTS_TIMEOUT):
    """The gateway listens before its upstreams are reached: backend_mcp's
    lists arrive asynchronously and the kernel rebuilds the merged lists when
    they do. Polls tools/list until every name in want is there; returns that
    listing. Bounded: a list that never arrives fails, naming what is missing."""
    deadline = time.monotonic() + timeout
    while True:
        tools = list_tools_raw(port)
        missing = sorted(set(want) - {t["name"] for t in tools})
        if not missing:
            return tools
        if time.monotonic() >= deadline:
            g.fail("%s: after %ss tools/list still lacks %s; it lists %s"
                   % (what, timeout, missing, [t["name"] for t in tools]))
        time.sleep(0.1)


def gateway_env(extra):
    """MCPG_* for a gateway; Gateway's --listen overrides MCPG_LISTEN's default."""
    env = {"MCPG_AUDIT_FILE": "proxy-audit.jsonl"}
    env.update(extra)
    return env


# What server-everything prints when its session-start roots/list is refused.
ROOTS_REFUSED = "Failed to request roots from client"


class Upstream:
    """server-everything over Streamable HTTP on 127.0.0.1:port."""

    def __init__(self, ctx, node, name="upstream", port=None):
        self.ctx, self.node, self.name = ctx, node, ctx.unique(name)
        self.port = port or g.free_port()
        self.proc = None

    @property
    def url(self):
        return "http://127.0.0.1:%d/mcp" % self.port

    def start(self, timeout=20):
        log = open(self.ctx.path(self.name + ".log"), "ab")
        env = dict(os.environ)
        env["PORT"] = str(self.port)
        self.proc = subprocess.Popen([self.node, EVERYTHING, "streamableHttp"], stdout=log,
                                     stderr=subprocess.STDOUT, env=env, cwd=self.ctx.tmp,
                                     preexec_fn=g._child_setup)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            g.check(self.proc.poll() is None, "%s exited with %s before listening on %d:\n%s"
                    % (self.name, self.proc.returncode, self.port, self.log_tail()))
            if g.port_is_listening(self.port):
                return self
            time.sleep(0.05)
        self.kill()
        g.fail("%s did not listen on %d within %ss" % (self.name, self.port, timeout))

    def kill(self):
        """SIGKILL by pid, the way a crash would end it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def log_lines(self):
        """The upstream's output so far (kept across restarts)."""
        try:
            with open(self.ctx.path(self.name + ".log"), "rb") as f:
                return f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []

    def log_count(self, text):
        return sum(text in line for line in self.log_lines())

    def wait_roots_settled(self, sessions, timeout=LISTS_TIMEOUT):
        """server-everything asks its client for roots 350 ms after each
        initialize, on a timer tied to no call. Through mcpg no client call is
        waiting for it, so backend_mcp refuses it and the upstream prints
        ROOTS_REFUSED. Waits until that has happened for the upstream's
        first `sessions` sessions, so that no call of the test is in flight
        when the question comes (over stdio nothing tells an unattributed
        question from a call's, and backend_mcp hands it to the call in
        flight)."""
        deadline = time.monotonic() + timeout
        while self.log_count(ROOTS_REFUSED) < sessions:
            if time.monotonic() >= deadline:
                g.fail("%s: the session-start roots/list of session %d was not refused within %ss "
                       "(was it handed to a call in flight?):\n%s"
                       % (self.name, sessions, timeout, self.log_tail()))
            time.sleep(0.05)

    def log_tail(self, n=30):
        return "\n".join(self.log_lines()[-n:])

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.kill()
        return False


def stdio_wrapper(ctx, node):
    """An executable that runs server-everything over stdio with an empty
    environment. Returns its path."""
    path = ctx.path("everything-stdio.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n# server-everything over stdio, nothing inherited.\n"
                "exec env -i %s %s stdio\n" % (shlex_quote(node), shlex_quote(EVERYTHING)))
    os.chmod(path, 0o755)
    return path


def shlex_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def sweep(ctx, node, client, label, url=None, stdio=None, prefix="", task_tools=None):
    """Runs sweep.mjs; returns its record. A sweep that stopped early fails.
    task_tools: the task-augmented tools' names, for a client that cannot see
    the tools' execution member (see task_tools())."""
    out = ctx.path("sweep-%s.json" % label)
    argv = [node, SWEEP, "--client", client, "--out", out, "--prefix", prefix]
    if task_tools is not None:
        argv += ["--task-tools", json.dumps(sorted(task_tools))]
    argv += ["--url", url] if url else ["--stdio", stdio]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=SWEEP_TIMEOUT,
                           cwd=ctx.tmp, preexec_fn=g._child_setup)
    except subprocess.TimeoutExpired:
        g.fail("the %s sweep did not finish within %ss" % (label, SWEEP_TIMEOUT))
    sys.stdout.write("  %s: %s" % (label, p.stdout))
    g.check(os.path.exists(out), "the %s sweep wrote no record (exit %d):\n%s"
            % (label, p.returncode, p.stderr[-3000:]))
    with open(out) as f:
        rec = json.load(f)
    g.check(not rec.get("fatal"), "the %s sweep stopped: %s\n%s"
            % (label, rec.get("fatal"), p.stderr[-2000:]))
    return rec


# ---------------------------------------------------------------------------
# what may differ, and nothing else
#
# Each rule names the field it rewrites and why the value cannot be equal
# between two runs; whole results are never dropped.

# dynamic text/blob resources stamp the read time: "created at 4:31:26 AM".
CLOCK = re.compile(r"(created at )\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?")
# toggle-* tools and the subscribe log name the upstream session (a UUID the
# upstream mints per session; "undefined" over stdio).
SESSION = re.compile(r"(session )[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# task ids and task timestamps are minted by the upstream's task store.
TASK_KEYS = {"taskId": "<task id>", "createdAt": "<time>", "lastUpdatedAt": "<time>"}


def _text(s):
    return SESSION.sub(r"\1<session id>", CLOCK.sub(r"\1<time>", s))


def _blob(s):
    """A base64 blob whose text is a dynamic resource's: compared decoded,
    with its clock masked like a text resource's."""
    try:
        text = base64.b64decode(s, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return s
    if "This is a base64 blob created at" not in text:
        return s
    return "base64 of " + _text(text)


def _walk(v, key=None):
    if isinstance(v, dict):
        return {k: _walk(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [_walk(x) for x in v]
    if isinstance(v, str):
        if key in TASK_KEYS:
            return TASK_KEYS[key]
        if key == "blob":
            return _blob(v)
        return _text(v)
    return v


def _task_stream(step):
    """A task-augmented call's messages: the created task and the outcome. The
    status polls in between depend on timing (how many fall in each stage)."""
    msgs = step.get("result")
    if isinstance(msgs, list):
        step = dict(step)
        step["result"] = [m for m in msgs if m.get("type") != "taskStatus"]
    return step


def normalise(rec):
    """{step: normalised step} of a sweep record.

    The record's rootsRequests (the roots/list requests that came outside any
    step) is deliberately not compared: server-everything asks for roots on a
    350 ms timer after initialize, tied to no call. Directly the client
    answers it; through mcpg no client call is waiting, so backend_mcp refuses
    it (the upstream prints "Failed to request roots ...") and the upstream
    asks again inside get-roots-list's call, which reaches the client. What
    the roots are for is checked by expect_exchanges: get-roots-list shows the
    client's roots on every path."""
    out = {}
    for key, step in rec["steps"].items():
        out[key] = _walk(_task_stream(step))
    return out


# Steps a stateless (2026-07-28) client has no way to take: that wire has no
# logging/setLevel and no resources/subscribe (subscriptions/listen replaces
# both), and tasks are an extension with no tasks/result.
STATELESS_ABSENT = {
    "logging/setLevel": "no logging/setLevel on 2026-07-28",
    "resources/subscribe": "subscriptions/listen replaces resources/subscribe on 2026-07-28",
    "resources/unsubscribe": "subscriptions/listen replaces resources/unsubscribe on 2026-07-28",
}


def task_tools(norm):
    """The tools a v1 record lists with execution.taskSupport "required": they
    can only be called task-augmented, and tasks/result is not on 2026-07-28,
    so the stateless sweep skips them. Decided from the v1 record because the
    v2 client drops execution when it parses tools/list (see for_v2_client)."""
    return {t["name"] for t in norm["list/tools"].get("result", [])
            if (t.get("execution") or {}).get("taskSupport") == "required"}


def for_stateless(norm):
    """A session-wire record cut to what a stateless client can see: the steps
    above left out, the task-augmented tools (task_tools) skipped, the
    toggles' notifications (they go to the session's GET stream) left out, url
    elicitations without elicitationId (2026-07-28 dropped the field) and form
    elicitations with their default mode spelt."""
    skipped = task_tools(norm)
    out = {}
    for key, step in norm.items():
        if key in STATELESS_ABSENT:
            continue
        tool = key[len("tool/"):].split("#")[0] if key.startswith("tool/") else None
        if tool in skipped:
            out[key] = {"skipped": "task-augmented calls are not swept on this wire"}
            continue
        step = dict(step)
        step.pop("notified", None)
        out[key] = step
    return _elicitations(out)


def _elicitations(norm):
    for step in norm.values():
        for r in step.get("serverRequests", []):
            if r["method"] != "elicitation/create" or not isinstance(r.get("params"), dict):
                continue
            p = r["params"] = dict(r["params"])
            p.setdefault("mode", "form")
            p.pop("elicitationId", None)
    return norm


def for_v2_client(norm):
    """The v2 SDK client (@modelcontextprotocol/client) parses tools/list with
    its 2026-07-28 Tool schema, which has no execution member, so a v2 record
    never shows it. That the gateway does pass execution on that wire is
    checked on the raw listing (expect_raw_execution); here the member is
    left out of the baseline's list/tools and nowhere else."""
    out = dict(norm)
    step = out.get("list/tools")
    if step and isinstance(step.get("result"), list):
        step = dict(step)
        step["result"] = [{k: v for k, v in t.items() if k != "execution"} for t in step["result"]]
        out["list/tools"] = step
    return out


def expect_raw_execution(norm, raw, what):
    """Every tool the baseline lists carries the same execution member in the
    gateway's raw listing (raw: list_tools_raw)."""
    got = {t["name"]: t.get("execution") for t in raw}
    for t in norm["list/tools"].get("result", []):
        g.check(t["name"] in got, "%s: %s is not in the raw listing" % (what, t["name"]))
        g.check_eq(got[t["name"]], t.get("execution"), "%s: %s's execution" % (what, t["name"]))


# Through mcpg on the session wire, the upstream's log message answering a
# resources/subscribe ("Received Subscribe Resource request for URI ...") never
# reaches the client: the gateway sends its own resources/subscribe upstream,
# once for all its clients, and the message the upstream sends about it
# answers no client's call, so backend_mcp cannot attribute it and logs it in
# the gateway log instead of relaying it. The baseline's notice is expected to
# be absent (null) through mcpg; that field and nothing else.
def for_gateway_session(norm):
    out = dict(norm)
    step = out.get("resources/subscribe")
    if step and "notice" in step:
        step = dict(step)
        step["notice"] = None
        out["resources/subscribe"] = step
    return out


# 2026-07-28 result fields with no 2025-11-25 counterpart (SEP-2549 caching,
# resultType, the server's identity in _meta): left out of a stateless
# record's results before they are compared with a session-wire record's.
STATELESS_RESULT_KEYS = ("resultType", "ttlMs", "cacheScope")
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


def stateless_record(norm):
    out = {}
    for key, step in norm.items():
        step = dict(step)
        for field in ("result", "off"):
            res = step.get(field)
            if isinstance(res, dict):
                res = {k: v for k, v in res.items() if k not in STATELESS_RESULT_KEYS}
                meta = res.get("_meta")
                if isinstance(meta, dict) and SERVER_INFO_META in meta:
                    meta = {k: v for k, v in meta.items() if k != SERVER_INFO_META}
                    if meta:
                        res["_meta"] = meta
                    else:
                        del res["_meta"]
                step[field] = res
        out[key] = step
    return _elicitations(out)


def _short(v, n=400):
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= n else s[:n] + "..."


def _diff(a, b, path, out):
    if len(out) >= 40:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append("%s.%s: only through mcpg: %s" % (path, k, _short(b[k])))
            elif k not in b:
                out.append("%s.%s: missing through mcpg (directly: %s)" % (path, k, _short(a[k])))
            else:
                _diff(a[k], b[k], "%s.%s" % (path, k), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, "%s[%d]" % (path, i), out)
    elif a != b:
        out.append("%s: directly %s, through mcpg %s" % (path, _short(a), _short(b)))


def compare(direct, proxied):
    """The differences between two normalised records, as lines."""
    out = []
    for key in sorted(set(direct) | set(proxied)):
        if key not in proxied:
            out.append("%s: not taken through mcpg (directly: %s)" % (key, _short(direct[key])))
        elif key not in direct:
            out.append("%s: only taken through mcpg: %s" % (key, _short(proxied[key])))
        else:
            _diff(direct[key], proxied[key], key, out)
    return out


def expect_same(direct, proxied, what):
    diffs = compare(direct, proxied)
    g.check(not diffs, "%s: %d difference(s) between the direct and the proxied sweep:\n  %s"
            % (what, len(diffs), "\n  ".join(diffs)))


def expect_complete(norm, what):
    """The sweep did what it is for: every listed tool was called and answered,
    the server's requests and notifications were seen."""
    tools = [t["name"] for t in norm["list/tools"].get("result", [])]
    g.check(tools, "%s: tools/list gave no tools: %s" % (what, _short(norm["list/tools"])))
    for t in tools:
        g.check(any(k.startswith("tool/%s#" % t) for k in norm), "%s: %s was never called" % (what, t))
    for key in ("list/resources", "list/resource-templates", "list/prompts"):
        g.check(norm[key].get("result"), "%s: %s is empty or failed: %s" % (what, key, _short(norm[key])))
    reads = [k for k, s in norm.items() if k.startswith("read/") and "result" in s]
    g.check(len(reads) >= len(norm["list/resources"]["result"]),
            "%s: only %d resource reads succeeded" % (what, len(reads)))
    prompts = [k for k, s in norm.items() if k.startswith("prompt/") and "result" in s]
    g.check(len(prompts) >= len(norm["list/prompts"]["result"]),
            "%s: only %d prompts were got" % (what, len(prompts)))


def expect_exchanges(norm, what, session=True):
    """The server-to-client traffic the sweep exists to carry was there."""
    def step(tool):
        s = norm.get("tool/%s#0" % tool)
        g.check(s is not None, "%s: %s was not offered or not called" % (what, tool))
        g.check("error" not in s, "%s: %s failed: %s" % (what, tool, _short(s)))
        return s
    for tool, method in (("trigger-sampling-request", "sampling/createMessage"),
                         ("trigger-elicitation-request", "elicitation/create"),
                         ("trigger-url-elicitation", "elicitation/create")):
        got = [r["method"] for r in step(tool).get("serverRequests", [])]
        g.check(got == [method], "%s: %s: the client was asked %s, expected [%s]"
                % (what, tool, got, method))
    text = json.dumps(step("get-roots-list")["result"])
    g.check("file:///srv/mcpg-sweep" in text, "%s: get-roots-list does not show the client's roots: %s"
            % (what, text[:300]))
    prog = step("trigger-long-running-operation").get("progress")
    g.check(prog and len(prog) == 3, "%s: trigger-long-running-operation: progress %r, expected 3"
            % (what, prog))
    if session:
        for tool in ("toggle-simulated-logging", "toggle-subscriber-updates"):
            g.check(step(tool).get("notified"), "%s: %s: no notification reached the client" % (what, tool))
        g.check(norm["resources/subscribe"].get("notice"),
                "%s: the upstream's log message about the subscription never arrived" % what)
        res = step("simulate-research-query")["result"]
        g.check(res[-1].get("type") == "result", "%s: the research task ended %s" % (what, _short(res[-1])))
