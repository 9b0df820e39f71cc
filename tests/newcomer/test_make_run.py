#!/usr/bin/python3
"""A newcomer's first run: `make run` on a machine without Node.js installs and
builds only what the gateway needs, and serves the README's "Try it" example.

The PATH the test gives make is the caller's, with node, npm and npx left out
(a folder of links to every other program on it). `make run` builds into a
fresh BUILD_DIR (a whole Release build of the gateway: minutes on a busy
machine) and execs the gateway; the test stops it by pid with SIGTERM, then
checks that make and everything it started are gone (make runs in a process
group of its own, so nothing it started can hide)."""
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from gateway import (Context, check, check_eq, fail, free_port, http_get,  # noqa: E402
                     parse_args, run_tests, strip_server_info)
from test_readme import curl_example, read_readme, run_curl_example  # noqa: E402
from procgroup import group_members, kill_group, program_of, wait_group_gone  # noqa: E402

NODE_PROGRAMS = ("node", "npm", "npx", "corepack")
# A whole gateway build on a shared, busy machine: generous, but bounded.
BUILD_TIMEOUT = float(os.environ.get("MCPG_TEST_BUILD_TIMEOUT", "1500"))
STOP_TIMEOUT = 30


def path_without_node(bin_dir):
    """Fills bin_dir with links to every program on PATH except Node.js's
    (the first of a name wins, as on PATH); returns bin_dir as a PATH."""
    os.makedirs(bin_dir)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target = os.path.join(d, name)
            link = os.path.join(bin_dir, name)
            if name in NODE_PROGRAMS or os.path.lexists(link) or not os.access(target, os.X_OK):
                continue
            os.symlink(target, link)
    return bin_dir


def no_node_env(path, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MCPG_CONFIG")}
    env["PATH"] = path
    env.update(extra)
    return env


class MakeRun:
    """`make run` in its own process group; output to a log file."""

    def __init__(self, ctx, path, port):
        self.log_path = ctx.path("make-run.log")
        self.build_dir = ctx.path("build")
        env = no_node_env(path, MCPG_LISTEN="127.0.0.1:%d" % port,
                          MCPG_AUDIT_FILE=ctx.path("audit.jsonl"))
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            ["make", "--no-print-directory", "-C", ctx.source, "run",
             "BUILD_DIR=" + self.build_dir],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            env=env, start_new_session=True)
        self.port = port

    def log_tail(self, n=40):
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def wait_serving(self):
        deadline = time.monotonic() + BUILD_TIMEOUT
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                fail("make run exited with %d before the gateway served:\n%s"
                     % (rc, self.log_tail()))
            try:
                if http_get(self.port, "/healthz", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        fail("make run: no gateway on port %d within %ss:\n%s"
             % (self.port, BUILD_TIMEOUT, self.log_tail()))

    def gateway_pid(self):
        """The gateway make's recipe exec'd: the one mcpg in make's group."""
        pids = [p for p in group_members(self.proc.pid) if program_of(p) == "mcpg"]
        check_eq(len(pids), 1, "mcpg processes in make's process group")
        return pids[0]

    def stop(self):
        """SIGTERM to the gateway by pid: it drains and exits 0, and so does make."""
        os.kill(self.gateway_pid(), signal.SIGTERM)
        try:
            rc = self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            fail("make run still running %ss after SIGTERM to the gateway:\n%s"
                 % (STOP_TIMEOUT, self.log_tail()))
        check_eq(rc, 0, "make run's exit code after the gateway's clean stop")
        check(wait_group_gone(self.proc.pid, STOP_TIMEOUT),
              "processes left in make's group: %r" % group_members(self.proc.pid))

    def kill_group(self):
        """Nothing make started outlives the test."""
        kill_group(self.proc)
        self.log.close()


def main():
    args = parse_args()
    ctx = Context(args)
    path = path_without_node(ctx.path("bin"))
    readme, blocks = read_readme(ctx.source)
    installer = os.path.join(ctx.source, "scripts", "install-deps.sh")
    running = []

    def on_term(signum, frame):
        for run in running:
            run.kill_group()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)

    def installer_in(mode):
        return subprocess.run(["bash", installer, mode], env=no_node_env(path),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=120)

    def t_installer_run_needs_no_npm():
        p = installer_in("--run")
        out = p.stdout.decode()
        check_eq(p.returncode, 0, "install-deps.sh --run without npm (output %r)" % out)
        check("npm" not in out, "install-deps.sh --run spoke of npm: %r" % out)

    def t_installer_test_needs_npm():
        # the PATH really has no npm: the test part stops on it
        p = installer_in("--test")
        out = p.stdout.decode()
        check(p.returncode != 0 and "npm is missing" in out,
              "install-deps.sh --test without npm: exit %d, %r" % (p.returncode, out))

    def t_make_run_serves_readme_example():
        cmd, expected = curl_example(readme, blocks)
        run = MakeRun(ctx, path, free_port())
        running.append(run)
        try:
            run.wait_serving()
            resp = run_curl_example(cmd, run.port)
            check_eq(strip_server_info(resp.get("result")), expected, "result (as README.md says)")
            run.stop()
        finally:
            run.kill_group()
        built = sorted(os.listdir(os.path.join(run.build_dir, "bin")))
        check_eq(built, ["mcpg"], "programs make run built (no tests, no benchmarks)")

    return run_tests([
        ("install-deps.sh --run needs no npm", t_installer_run_needs_no_npm),
        ("install-deps.sh --test stops without npm", t_installer_test_needs_npm),
        ("make run without Node.js serves the README example", t_make_run_serves_readme_example),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
