"""Shared helpers for the mcpg integration tests (Python 3 standard library only).

What is here:
  * parse_args()      -- the common command line (--bin, --modules, --source,
                         --test-modules)
  * with_fixtures()   -- a manifest that loads its modules from the test fixtures'
                         folder (build/test-modules: the fixtures and links to
                         every real module), never shipped in build/modules
  * Gateway           -- starts build/bin/mcpg on a free loopback port, waits for
                         GET /healthz, and always stops it by pid: SIGTERM, wait,
                         exit code must be 0, stderr must hold no sanitizer report.
                         SIGKILL only as a last resort, and that is a failure,
                         unless a test kills it on purpose (Gateway.kill).
  * Conn / Response   -- a raw-socket HTTP/1.1 client, so tests control every byte
                         (pipelining, 1-byte writes, malformed requests) and can see
                         whether the server closed the connection.
  * stateless helpers -- build 2026-07-28 requests (headers + params._meta).
  * audit helpers     -- read_audit, audit_files (a rotated set), audit_verify
                         (mcpg audit verify), echo_load (calls from several threads).
  * run_tests()       -- run test functions in order, report each, exit 1 on failure.

Every gateway is started from the main thread with PR_SET_PDEATHSIG=SIGKILL, so a
test runner that is itself killed (ctest timeout) leaves no gateway behind.
"""

import argparse
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

PROTOCOL_VERSION = "2026-07-28"
# The code of a refusal by identity or policy (HTTP 401, 403) on the 2026-07-28 wire:
# that revision lets no implementation send the legacy -32000..-32019 range, where the
# legacy wire's -32001 (unauthenticated) and -32003 (forbidden) stay.
REFUSED_2026 = -32600
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}

# Lines that mean a sanitizer found something.
SANITIZER_MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
    "ERROR: UndefinedBehaviorSanitizer",
    "WARNING: ThreadSanitizer",
)

# Sanitized builds start and stop slower: generous, but bounded, waits.
START_TIMEOUT = float(os.environ.get("MCPG_TEST_START_TIMEOUT", "30"))
STOP_TIMEOUT = float(os.environ.get("MCPG_TEST_STOP_TIMEOUT", "30"))
IO_TIMEOUT = float(os.environ.get("MCPG_TEST_IO_TIMEOUT", "15"))


def abi_version(source):
    """(major, minor) of the ABI headers in the source tree."""
    with open(os.path.join(source, "abi", "mcpg", "module.h")) as f:
        text = f.read()
    major = re.search(r"(?m)^#define MCPG_ABI_MAJOR (\d+)$", text)
    minor = re.search(r"(?m)^#define MCPG_ABI_MINOR (\d+)$", text)
    if not (major and minor):
        raise AssertionError("no MCPG_ABI_MAJOR/MINOR in abi/mcpg/module.h")
    return int(major.group(1)), int(minor.group(1))


class TestFailure(AssertionError):
    pass


class Skip(Exception):
    """A case that does not apply to this build; reported as SKIP, never as PASS."""


def fail(msg):
    raise TestFailure(msg)


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def check_eq(got, expected, what):
    if got != expected:
        raise TestFailure("%s: expected %r, got %r" % (what, expected, got))


# ---------------------------------------------------------------------------
# command line and context


def parse_args(extra=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="path to build/bin/mcpg")
    ap.add_argument("--modules", required=True, help="path to build/modules")
    ap.add_argument("--source", required=True, help="the source tree (for conf/)")
    ap.add_argument("--test-modules", default=None,
                    help="the test fixture modules (default: test-modules beside --modules)")
    if extra:
        extra(ap)
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    args.modules = os.path.abspath(args.modules)
    args.source = os.path.abspath(args.source)
    check(os.access(args.bin, os.X_OK), "not an executable: %s" % args.bin)
    return args


def replace_file(path, content):
    """Write content (a dict or list as JSON, a str as is) to path in one
    step, through a rename, so a reader (a reload, a key file watcher) never
    sees half a file."""
    with open(path + ".tmp", "w") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))
    os.replace(path + ".tmp", path)


def test_module_dir(args):
    """The folder of the test fixture modules (fx_*), which also links every
    real module: --test-modules, else test-modules beside the modules."""
    given = getattr(args, "test_modules", None)
    return os.path.abspath(given or os.path.join(os.path.dirname(args.modules), "test-modules"))


def with_fixtures(ctx, manifest):
    """manifest, loading its modules from the fixtures' folder; a Skip when
    that folder was not built (the kernel tests build it)."""
    if not os.path.isdir(ctx.test_modules):
        raise Skip("no %s (the test fixture modules: build the tests)" % ctx.test_modules)
    manifest.setdefault("gateway", {})["module_dir"] = ctx.test_modules
    return manifest


class Context:
    """Holds the arguments and one temp folder for the whole test script."""

    def __init__(self, args):
        self.args = args
        self.bin = args.bin
        self.modules = args.modules
        self.test_modules = test_module_dir(args)
        self.source = args.source
        self.tmp = tempfile.mkdtemp(prefix="mcpg-test-")
        self._n = 0

    def path(self, name):
        return os.path.join(self.tmp, name)

    def unique(self, stem):
        self._n += 1
        return "%s-%d" % (stem, self._n)

    def write_manifest(self, manifest, name=None):
        """manifest: a dict (written as JSON) or str (written as is). Returns the path."""
        name = name or self.unique("manifest") + ".json"
        p = self.path(name)
        with open(p, "w") as f:
            if isinstance(manifest, str):
                f.write(manifest)
            else:
                json.dump(manifest, f, indent=2)
        return p

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def base_manifest(audit_path=None, tools=None, mock_config=None, server=None,
                  gateway=None):
    """A small valid manifest: backend_mock "mock" serving echo, audit_file to
    audit_path (when given), everything else default."""
    mock_cfg = {"tools": tools if tools is not None else [{"name": "echo"}]}
    if mock_config:
        mock_cfg.update(mock_config)
    modules = [{"name": "mock", "module": "backend_mock", "config": mock_cfg}]
    audit = []
    if audit_path:
        modules.append({"name": "audit", "module": "audit_file",
                        "config": {"path": audit_path}})
        audit = ["audit"]
    gw = {}
    if server:
        gw["server"] = server
    if gateway:
        gw.update(gateway)
    m = {
        "gateway": gw,
        "cluster": {"kind": "single_node"},
        "modules": modules,
        "pipeline": {"identity": [], "policy": [], "limits": [], "audit": audit},
        "bindings": [{"backend": "mock"}],
    }
    return m


# ---------------------------------------------------------------------------
# processes

_PR_SET_PDEATHSIG = 1
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _libc = None


def _child_setup():
    # Die with the test runner. Runs in the child between fork and exec.
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


_live = set()


def _kill_leftovers():
    for g in list(_live):
        g._last_resort_kill()


def _on_term(signum, frame):
    # ctest (or a user) stops the runner: stop our gateways first.
    _kill_leftovers()
    sys.exit(128 + signum)


signal.signal(signal.SIGTERM, _on_term)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def port_is_listening(port, timeout=0.5):
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return False
    c.close()
    return True


def stop_process(proc, timeout=5):
    """Stop a helper process the test started (an upstream): SIGTERM by pid, then
    SIGKILL by pid if it has not exited within timeout."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def sanitizer_lines(text):
    return [ln for ln in text.splitlines() if any(m in ln for m in SANITIZER_MARKERS)]


def run_cli(ctx, argv, env=None, unset=(), timeout=60):
    """Run mcpg to completion (e.g. --check, --version). Returns (rc, stdout, stderr).
    env adds variables, unset removes them. Fails on a sanitizer report."""
    e = dict(os.environ)
    e.pop("MCPG_CONFIG", None)
    for k in unset:
        e.pop(k, None)
    if env:
        e.update(env)
    p = subprocess.Popen([ctx.bin] + list(argv), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=e, preexec_fn=_child_setup,
                         cwd=ctx.tmp)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        fail("mcpg %s did not finish within %ss" % (" ".join(argv), timeout))
    out = out.decode("utf-8", "replace")
    err = err.decode("utf-8", "replace")
    bad = sanitizer_lines(out + "\n" + err)
    check(not bad, "sanitizer report from mcpg %s:\n%s" % (" ".join(argv), err))
    return p.returncode, out, err


class Gateway:
    """One mcpg process.

        with Gateway(ctx, manifest=dict_or_str_or_None, config=path) as gw:
            ... gw.port ...
        # leaving the block stops it (SIGTERM) and asserts exit 0 + clean stderr

    listen=True passes --listen 127.0.0.1:<free port>; listen=False leaves the
    manifest's listeners alone (then pass health_port). use_env_config=True names
    the manifest through MCPG_CONFIG instead of --config.
    """

    def __init__(self, ctx, manifest=None, config=None, listen=True, health_port=None,
                 env=None, extra_args=(), use_env_config=False, name="gateway"):
        self.ctx = ctx
        self.name = ctx.unique(name)
        if manifest is not None:
            config = ctx.write_manifest(manifest, self.name + ".json")
        check(config is not None, "Gateway needs a manifest or a config path")
        self.config = config
        self.listen = listen
        self.port = health_port
        self.env = env or {}
        self.extra_args = list(extra_args)
        self.use_env_config = use_env_config
        self.proc = None
        self.stderr_path = ctx.path(self.name + ".stderr")
        self.stdout_path = ctx.path(self.name + ".stdout")
        self.returncode = None

    # -- lifecycle --

    def _spawn(self):
        argv = [self.ctx.bin]
        env = dict(os.environ)
        env.update(self.env)
        if self.use_env_config:
            env["MCPG_CONFIG"] = self.config
        else:
            env.pop("MCPG_CONFIG", None)
            argv += ["--config", self.config]
        if self.listen:
            self.port = free_port()
            argv += ["--listen", "127.0.0.1:%d" % self.port]
        argv += self.extra_args
        self.argv = argv
        self._err = open(self.stderr_path, "wb")
        self._out = open(self.stdout_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=self._err, env=env,
                                     preexec_fn=_child_setup, cwd=self.ctx.tmp)
        _live.add(self)

    def start(self):
        for attempt in range(3):
            self._spawn()
            try:
                self._wait_healthy()
                return self
            except TestFailure:
                rc = self.proc.poll()
                text = self.stderr()
                if (rc is not None and self.listen and attempt < 2
                        and "in use" in text.lower()):
                    # Lost a race for the free port with another test: try another.
                    self._reap()
                    continue
                self._last_resort_kill()
                raise
        fail("unreachable")

    def health_status(self):
        """GET /healthz's status (a subclass may ask otherwise, e.g. over TLS)."""
        st, _, _ = http_get(self.port, "/healthz", timeout=2)
        return st

    def _wait_healthy(self):
        check(self.port is not None, "no port to check health on")
        deadline = time.monotonic() + START_TIMEOUT
        last = None
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                fail("%s exited with %d before it was healthy:\n%s"
                     % (self.name, rc, self.stderr_tail()))
            try:
                st = self.health_status()
                if st == 200:
                    return
                last = "status %d" % st
            except OSError as e:
                last = repr(e)
            time.sleep(0.05)
        fail("%s: GET /healthz not 200 within %ss (last: %s)\n%s"
             % (self.name, START_TIMEOUT, last, self.stderr_tail()))

    def _reap(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
            self.returncode = self.proc.returncode
        self._close_files()
        _live.discard(self)

    def _close_files(self):
        for f in (getattr(self, "_err", None), getattr(self, "_out", None)):
            if f and not f.closed:
                f.close()

    def _last_resort_kill(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc is not None:
            self.returncode = self.proc.returncode
        self._close_files()
        _live.discard(self)

    def signal(self, sig):
        check(self.proc is not None and self.proc.poll() is None,
              "%s is not running" % self.name)
        os.kill(self.proc.pid, sig)

    def wait_exit(self, timeout=STOP_TIMEOUT):
        """Wait for the process to exit by itself; SIGKILL (and fail) after timeout."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._last_resort_kill()
            fail("%s (pid %d) did not exit within %ss; killed with SIGKILL\n%s"
                 % (self.name, self.proc.pid, timeout, self.stderr_tail()))
        self.returncode = self.proc.returncode
        self._close_files()
        _live.discard(self)
        return self.returncode

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM by pid, wait, assert exit 0 and no sanitizer report."""
        check(self.proc is not None, "%s was never started" % self.name)
        rc = self.proc.poll()
        if rc is not None:
            self.wait_exit()
            fail("%s (pid %d) had already exited with %d before SIGTERM\n%s"
                 % (self.name, self.proc.pid, rc, self.stderr_tail()))
        os.kill(self.proc.pid, signal.SIGTERM)
        rc = self.wait_exit(timeout)
        self.check_sanitizers()
        check(rc == 0, "%s exited with %d after SIGTERM (expected 0)\n%s"
              % (self.name, rc, self.stderr_tail()))

    def kill(self):
        """SIGKILL by pid on purpose: the crash a test wants to see survived
        (unlike a stop that has to fall back to SIGKILL, not a failure).
        Waits for the process and returns its exit status (-9)."""
        check(self.proc is not None and self.proc.poll() is None,
              "%s is not running" % self.name)
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.returncode = self.proc.returncode
        self._close_files()
        _live.discard(self)
        return self.returncode

    def check_sanitizers(self):
        bad = sanitizer_lines(self.stderr())
        check(not bad, "%s: sanitizer report on stderr:\n%s"
              % (self.name, self.stderr_tail(80)))

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stdout(self):
        try:
            with open(self.stdout_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stderr_tail(self, n=40):
        lines = self.stderr().splitlines()
        return "--- %s stderr (last %d of %d lines) ---\n%s" % (
            self.name, min(n, len(lines)), len(lines), "\n".join(lines[-n:]))

    def __enter__(self):
        return self.start()

    def __exit__(self, et, ev, tb):
        if self.proc is None or self.returncode is not None and self not in _live:
            return False
        if et is None:
            self.stop()
            return False
        # The test already failed: still stop by pid, report a second problem
        # without hiding the first.
        try:
            self.stop()
        except TestFailure as e:
            sys.stderr.write("(while cleaning up after a failure) %s\n" % e)
        return False


# ---------------------------------------------------------------------------
# raw HTTP/1.1 client


class Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (lower-case name, value)
        self.body = body

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def content_type(self):
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    def messages(self):
        """The JSON-RPC messages in the body: one for application/json, every data
        event for text/event-stream."""
        ct = self.content_type()
        text = self.body.decode("utf-8", "replace")
        if ct == "text/event-stream":
            out = []
            for event in text.replace("\r\n", "\n").split("\n\n"):
                data = [ln[5:].lstrip(" ") if ln.startswith("data:") else None
                        for ln in event.split("\n")]
                data = "\n".join(d for d in data if d is not None)
                if data.strip():  # a priming event or keep-alive carries no message
                    out.append(json.loads(data))
            return out
        check(ct == "application/json",
              "unexpected Content-Type %r (status %d, body %r)"
              % (self.header("content-type"), self.status, self.body[:300]))
        return [json.loads(text)]

    def rpc(self):
        """The JSON-RPC response (the message with result or error)."""
        try:
            msgs = self.messages()
        except ValueError as e:
            fail("body is not JSON (%s): status %d, body %r" % (e, self.status, self.body[:300]))
        resp = [m for m in msgs if isinstance(m, dict) and ("result" in m or "error" in m)]
        check(len(resp) == 1, "expected exactly one JSON-RPC response in %r" % (msgs,))
        return resp[0]

    def __repr__(self):
        return "<Response %d %r %r>" % (self.status, self.headers, self.body[:200])


class ConnectionClosed(ConnectionError):
    pass


class Conn:
    """One TCP connection to 127.0.0.1:port (or host:port)."""

    def __init__(self, port, timeout=IO_TIMEOUT, nodelay=False, host="127.0.0.1"):
        self.port = port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if nodelay:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
        return False

    def send(self, data, ignore_reset=False):
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            if not ignore_reset:
                raise

    def send_bytewise(self, data, pause=0.001):
        for i in range(len(data)):
            self.sock.sendall(data[i:i + 1])
            if pause:
                time.sleep(pause)

    def _fill(self):
        if self.eof:
            raise ConnectionClosed("connection closed by the server")
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
            raise ConnectionClosed("connection closed by the server (%d bytes unread: %r)"
                                   % (len(self.buf), self.buf[:200]))
        self.buf += chunk

    def _read_until(self, sep):
        while sep not in self.buf:
            self._fill()
        i = self.buf.index(sep)
        out = self.buf[:i]
        self.buf = self.buf[i + len(sep):]
        return out

    def _read_n(self, n):
        while len(self.buf) < n:
            self._fill()
        out = self.buf[:n]
        self.buf = self.buf[n:]
        return out

    def read_response(self, head_request=False):
        head = self._read_until(b"\r\n\r\n").decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        check(len(parts) >= 2 and parts[0].startswith("HTTP/1."),
              "bad status line %r" % lines[0])
        status = int(parts[1])
        reason = parts[2] if len(parts) > 2 else ""
        headers = []
        for ln in lines[1:]:
            k, sep, v = ln.partition(":")
            check(sep == ":", "bad header line %r" % ln)
            headers.append((k.strip().lower(), v.strip()))
        r = Response(status, reason, headers, b"")
        te = (r.header("transfer-encoding") or "").lower()
        cl = r.header("content-length")
        if head_request or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in te:
            body = b""
            while True:
                size_line = self._read_until(b"\r\n").decode("latin-1")
                size = int(size_line.split(";")[0].strip(), 16)
                if size == 0:
                    # trailers until an empty line
                    while self._read_until(b"\r\n"):
                        pass
                    break
                body += self._read_n(size)
                check(self._read_n(2) == b"\r\n", "bad chunk terminator")
        elif cl is not None:
            body = self._read_n(int(cl))
        else:
            # delimited by close
            try:
                while True:
                    self._fill()
            except ConnectionClosed:
                pass
            body, self.buf = self.buf, b""
        r.body = body
        return r

    def closed_by_peer(self, timeout=5.0):
        """True when the server closes (FIN or RST) within timeout with no more
        bytes; False if it stays open. Extra bytes are a failure."""
        if self.eof:
            return True
        check(self.buf == b"", "unexpected extra bytes from the server: %r" % self.buf[:200])
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(4096)
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True
        finally:
            self.sock.settimeout(IO_TIMEOUT)
        if chunk:
            fail("unexpected extra bytes from the server: %r" % chunk[:200])
        self.eof = True
        return True


def build_request(port, method="POST", path="/mcp", headers=(), body=b"",
                  content_length=True):
    if isinstance(body, str):
        body = body.encode()
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1:%d" % port]
    for k, v in headers:
        lines.append("%s: %s" % (k, v))
    if content_length and (body or method in ("POST", "PUT")):
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def http_get(port, path, timeout=IO_TIMEOUT):
    with Conn(port, timeout=timeout) as c:
        c.send(build_request(port, "GET", path, headers=[("Connection", "close")]))
        r = c.read_response()
        return r.status, r.headers, r.body


def pool_metrics(port):
    """From GET /metrics: {"queued": n, "running": n, "refused": n} (mcpg_pool_jobs by
    state, mcpg_pool_refused_total)."""
    st, _, body = http_get(port, "/metrics")
    check_eq(st, 200, "GET /metrics")
    out = {}
    for ln in body.decode().splitlines():
        mt = re.match(r'^mcpg_pool_jobs\{state="(\w+)"\} (\d+)$', ln)
        if mt:
            out[mt.group(1)] = int(mt.group(2))
        mt = re.match(r"^mcpg_pool_refused_total (\d+)$", ln)
        if mt:
            out["refused"] = int(mt.group(1))
    check(set(out) == {"queued", "running", "refused"}, "pool series in /metrics: %r" % out)
    return out


# ---------------------------------------------------------------------------
# the stateless (2026-07-28) wire


def rpc_body(method, params=None, id=1, meta=True):
    msg = {"jsonrpc": "2.0", "id": id, "method": method}
    p = dict(params or {})
    if meta:
        m = dict(p.get("_meta") or {})
        for k, v in META.items():  # the caller's own clientCapabilities stand
            m.setdefault(k, v)
        p["_meta"] = m
    msg["params"] = p
    return json.dumps(msg, separators=(",", ":"))


def stateless_headers(method, name=None, version=PROTOCOL_VERSION,
                      content_type="application/json"):
    h = [("Content-Type", content_type),
         ("Accept", "application/json, text/event-stream")]
    if version is not None:
        h.append(("MCP-Protocol-Version", version))
    if method is not None:
        h.append(("Mcp-Method", method))
    if name is not None:
        h.append(("Mcp-Name", name))
    return h


def tool_call_request(port, tool, arguments, id=1):
    body = rpc_body("tools/call", {"name": tool, "arguments": arguments}, id=id)
    return build_request(port, headers=stateless_headers("tools/call", tool), body=body)


def stateless_request(port, method, params=None, id=1, name=None):
    body = rpc_body(method, params, id=id)
    return build_request(port, headers=stateless_headers(method, name), body=body)


def send_one(port, raw, timeout=IO_TIMEOUT):
    """Send raw bytes on a fresh connection and read one response."""
    with Conn(port, timeout=timeout) as c:
        c.send(raw)
        return c.read_response()


def call_tool(port, tool, arguments, id=1):
    r = send_one(port, tool_call_request(port, tool, arguments, id=id))
    return r, r.rpc()


def readyz(port, query=""):
    """GET /readyz[?query]: the Response (status, its JSON body, Retry-After)."""
    return send_one(port, build_request(port, "GET", "/readyz" + (("?" + query) if query else ""),
                                        headers=[("Connection", "close")]))


def readyz_coordinator(port):
    """What /readyz says of the fleet store: "ok", "unavailable" or "none"."""
    r = readyz(port)
    check_eq(r.status, 200, "/readyz (%r)" % r.body[:200])
    return json.loads(r.body)["coordinator"]


def check_coordinator_down(port, limited_tool, what):
    """What a gateway answers while its fleet store is unreachable (docs/faults.md):
    stateless calls are served (they touch no store); a new legacy session is
    503 with Retry-After; a call under a global limit is 503 (limits fail
    closed); /readyz stays 200 (the gateway serves) and says
    "coordinator":"unavailable", or 503 with Retry-After when asked
    ?coordinator=required."""
    r, out = call_tool(port, "echo", {"message": "store down"})
    check_eq(r.status, 200, "%s: a stateless call (%r)" % (what, out))
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}}})
    r = send_one(port, build_request(port, body=init, headers=[
        ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")]))
    check_eq(r.status, 503, "%s: initialize (%r)" % (what, r.body[:200]))
    check(r.header("retry-after"), "%s: initialize's 503 has Retry-After" % what)
    r, out = call_tool(port, limited_tool, {"message": "store down"})
    check_eq(r.status, 503, "%s: a call under a global limit fails closed (%r)" % (what, out))
    check_eq(readyz_coordinator(port), "unavailable", "%s: /readyz's coordinator" % what)
    r = readyz(port, "coordinator=required")
    check_eq(r.status, 503, "%s: /readyz?coordinator=required (%r)" % (what, r.body[:200]))
    check(r.header("retry-after"), "%s: its 503 has Retry-After" % what)


SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def strip_server_info(result, what="result"):
    """result without the gateway's _meta serverInfo, which every 2026-07-28 result
    carries (checked here to name the gateway: a name and a version), so a test can
    compare the rest whole. A result without one (the legacy wire's) is returned as is."""
    if not isinstance(result, dict) or SERVER_INFO not in (result.get("_meta") or {}):
        return result
    info = result["_meta"][SERVER_INFO]
    check(isinstance(info, dict) and isinstance(info.get("name"), str)
          and isinstance(info.get("version"), str), "%s: serverInfo %r" % (what, info))
    out = dict(result)
    out["_meta"] = {k: v for k, v in result["_meta"].items() if k != SERVER_INFO}
    if not out["_meta"]:
        del out["_meta"]
    return out


def expect_result(r, rpc, id, what):
    """The result of a successful response, without the gateway's serverInfo
    (strip_server_info; read r.rpc() for it)."""
    check_eq(r.status, 200, what + ": HTTP status")
    check("error" not in rpc, "%s: JSON-RPC error %r" % (what, rpc.get("error")))
    check_eq(rpc.get("jsonrpc"), "2.0", what + ": jsonrpc")
    check_eq(rpc.get("id"), id, what + ": id")
    return strip_server_info(rpc["result"], what)


def expect_error(r, status, code, what, id=None, check_id=True):
    check_eq(r.status, status, what + ": HTTP status (body %r)" % r.body[:300])
    rpc = r.rpc()
    check("error" in rpc, "%s: expected a JSON-RPC error, got %r" % (what, rpc))
    check_eq(rpc["error"].get("code"), code, what + ": JSON-RPC error code")
    check(isinstance(rpc["error"].get("message"), str),
          "%s: error.message must be a string: %r" % (what, rpc["error"]))
    if check_id:
        check_eq(rpc.get("id"), id, what + ": id")
    return rpc["error"]


# ---------------------------------------------------------------------------
# audit files


def new_apikey(ctx, principal, *extra):
    """A key for principal, added by scripts/mcpg-apikey to the test's keys
    file, ctx.path("keys.json") (extra: its options, e.g. "--tenant", "acme")."""
    script = os.path.join(ctx.source, "scripts", "mcpg-apikey")
    out = subprocess.run([sys.executable, script, principal, "--json", "--add",
                          ctx.path("keys.json")] + list(extra),
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["key"]


def read_audit(path):
    """The audit file as a list of JSON objects, one a line."""
    out = []
    try:
        with open(path, "rb") as f:
            data = f.read().decode("utf-8")
    except FileNotFoundError:
        return out
    for i, ln in enumerate(data.split("\n")):
        if not ln.strip():
            continue
        try:
            rec = json.loads(ln)
        except ValueError as e:
            if i == len(data.split("\n")) - 1:
                continue  # a line still being written
            if ln.startswith(" "):
                # a batch caught while it was written over the room audit_file
                # keeps ahead of its lines: this read saw the room where the
                # line starts and the batch after it (a live file only; read
                # again, it is whole). A line of the gateway's starts with "{".
                continue
            fail("%s line %d is not JSON (%s): %r" % (path, i + 1, e, ln))
        check(isinstance(rec, dict), "%s line %d is not an object" % (path, i + 1))
        out.append(rec)
    return out


def audit_name(rec):
    """The event name of an audit_file line ({"ts":..,"event":..,"seq":..,"id":..,...})."""
    return rec.get("event")


def audit_id(rec):
    """The JSON-RPC id recorded in an audit line, as a Python value (None if absent)."""
    return rec.get("id")


def audit_files(path):
    """The rotated set of an audit file that exists, oldest first:
    path.N .. path.1, path."""
    rotated = []
    k = 1
    while os.path.exists("%s.%d" % (path, k)):
        rotated.append("%s.%d" % (path, k))
        k += 1
    return list(reversed(rotated)) + ([path] if os.path.exists(path) else [])


def audit_verify(ctx, files):
    """mcpg audit verify FILE...: (exit code, stdout + stderr)."""
    rc, out, err = run_cli(ctx, ["audit", "verify"] + list(files))
    return rc, out + err


def echo_load(port, ids_per_thread, stop=None, message="hi"):
    """Calls to echo from one thread per list in ids_per_thread, each on its
    own keep-alive connection, one call at a time with the list's ids.
    Returns (acked, failed): the ids whose successful answer arrived, and
    (id, status, body) of answers that were not a success. A connection
    the server closes ends its thread quietly (a gateway killed mid-run);
    `stop` (a threading.Event) ends every thread."""
    acked, failed = [], []
    lock = threading.Lock()

    def run(ids):
        try:
            with Conn(port) as c:
                for i in ids:
                    if stop is not None and stop.is_set():
                        return
                    c.send(tool_call_request(port, "echo", {"message": message}, id=i))
                    r = c.read_response()
                    ok = False
                    if r.status == 200:
                        rpc = r.rpc()
                        ok = "result" in rpc and rpc.get("id") == i
                    with lock:
                        (acked if ok else failed).append(i if ok else (i, r.status, r.body[:200]))
        except OSError:
            return

    threads = [threading.Thread(target=run, args=(ids,)) for ids in ids_per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return acked, failed


def wait_for(pred, timeout, what, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    fail("timed out after %ss waiting for %s" % (timeout, what))


# ---------------------------------------------------------------------------
# test runner


def run_tests(tests, ctx=None):
    """Run (name, fn) pairs in order; print PASS/FAIL; return the exit code."""
    failed = []
    for name, fn in tests:
        t0 = time.monotonic()
        sys.stdout.write("--- %s\n" % name)
        sys.stdout.flush()
        try:
            fn()
            sys.stdout.write("PASS %s (%.2fs)\n" % (name, time.monotonic() - t0))
        except Skip as e:
            sys.stdout.write("SKIP %s: %s\n" % (name, e))
        except Exception:
            failed.append(name)
            sys.stdout.write("FAIL %s (%.2fs)\n%s\n" % (name, time.monotonic() - t0,
                                                       traceback.format_exc()))
        sys.stdout.flush()
    _kill_leftovers()
    if ctx is not None:
        if failed:
            sys.stdout.write("(temp files kept in %s)\n" % ctx.tmp)
        else:
            ctx.cleanup()
    sys.stdout.write("%d passed, %d failed%s\n" % (len(tests) - len(failed), len(failed),
                     (": " + ", ".join(failed)) if failed else ""))
    return 1 if failed else 0


def asan_build(pid):
    """True when the process at pid runs a sanitizer build (libasan mapped): its
    memory and speed figures are the sanitizer's, not the product's."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def conns_on_every_loop(gw, workers, tries=64):
    """One open keep-alive connection on each of the gateway's `workers` loops:
    {worker: Conn}. Connections spread over the loops' SO_REUSEPORT listeners
    by the kernel's hash, so each new one asks a path of its own (a 404) and
    the access log's "worker" of that path says which loop took it; extra ones
    on a loop already held are closed. Needs gateway.server.access_log (on by
    default)."""
    found = {}
    for i in range(tries):
        c = Conn(gw.port)
        path = "/which-loop-%d-%d" % (os.getpid(), i)
        c.send(build_request(gw.port, "GET", path))
        check_eq(c.read_response().status, 404, "GET %s" % path)
        line = wait_for(lambda: next((ln for ln in gw.stderr().splitlines()
                                      if '"path":"%s"' % path in ln), None), 10,
                        "the access log line of GET %s" % path, interval=0.01)
        w = json.loads(line)["worker"]
        if w in found:
            c.close()
        else:
            found[w] = c
        if len(found) == workers:
            return found
    for c in found.values():
        c.close()
    fail("%d connections all landed on loops %r of %d" % (tries, sorted(found), workers))
