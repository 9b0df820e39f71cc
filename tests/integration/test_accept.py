#!/usr/bin/python3
"""Accepting connections at the file-descriptor limit: a gateway whose RLIMIT_NOFILE is
reached by idle client connections must not spin on its readable listener (CPU) nor
write a log line per attempt; once the clients leave it accepts again."""
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, call_tool, check, check_eq,  # noqa: E402
                     expect_result, parse_args, run_tests)

NOFILE = 64   # the gateway's limit (inherited from this process at spawn)
CLIENTS = 80  # more connections than it can hold


def cpu_seconds(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def main():
    args = parse_args()
    ctx = Context(args)

    class LimitedGateway(Gateway):
        """Spawned with a soft RLIMIT_NOFILE of NOFILE (children inherit it)."""

        def _spawn(self):
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, hard))
            try:
                super()._spawn()
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    def t_emfile():
        gw = LimitedGateway(ctx, manifest=base_manifest(gateway={"workers": 1}), name="emfile")
        with gw:
            socks = [socket.create_connection(("127.0.0.1", gw.port)) for _ in range(CLIENTS)]
            time.sleep(0.3)
            c0, t0 = cpu_seconds(gw.proc.pid), time.monotonic()
            time.sleep(1.0)
            used = (cpu_seconds(gw.proc.pid) - c0) / (time.monotonic() - t0)
            lines = gw.stderr().count("accept:")
            for s in socks:
                s.close()
            check(used < 0.3, "the gateway used %.0f%% of a CPU while out of descriptors"
                  % (used * 100))
            check(lines < 50, "%d accept warnings in ~1.3s" % lines)
            time.sleep(0.3)
            r, rpc = call_tool(gw.port, "echo", {"message": "hi"}, id=1)
            check_eq(expect_result(r, rpc, 1, "call once the clients left")["content"][0]["text"],
                     "Echo: hi", "answer")
            print("CPU %.0f%%, %d accept warnings" % (used * 100, lines))

    return run_tests([("out of file descriptors: no spin, no log flood, recovers", t_emfile)], ctx)


if __name__ == "__main__":
    sys.exit(main())
