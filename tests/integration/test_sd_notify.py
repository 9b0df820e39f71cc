#!/usr/bin/python3
"""The gateway tells a service manager how it is doing (systemd's notify protocol, for a
Type=notify unit: docs/systemd.md), to the datagram socket NOTIFY_SOCKET names. Here the
test is the service manager: it binds that socket and reads what comes.

  * READY=1 (with MAINPID= and STATUS=) comes the first time GET /readyz would answer
    200: not while an upstream's tools/list is held back (/readyz 503 "starting", and a
    STATUS= line naming what it waits for), and once it has come /readyz is 200;
  * SIGHUP: RELOADING=1 with MONOTONIC_USEC= (the monotonic clock as the reload starts),
    then READY=1 once the new generation serves; a reload refused ends the same way,
    its STATUS= saying so;
  * SIGTERM: STOPPING=1 as the drain begins, and nothing after it;
  * an abstract socket, NOTIFY_SOCKET=@name, is told the same; WATCHDOG_USEC set: WATCHDOG=1
    keeps coming;
  * a NOTIFY_SOCKET that is not an absolute path or @name is named in a warning, and the
    gateway serves and stops as without one.
"""
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, check, check_eq,  # noqa: E402
                     parse_args, readyz, replace_file, run_tests, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_mcp_upstream.py")


class ServiceManager:
    """The receiving end of NOTIFY_SOCKET: every datagram as a dict of its KEY=VALUE lines,
    in the order they came."""

    def __init__(self, address):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.setblocking(False)
        self.messages = []

    def close(self):
        self.sock.close()

    def read(self):
        while True:
            try:
                data = self.sock.recv(4096)
            except BlockingIOError:
                return self.messages
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
            self.messages.append(fields)

    def wait(self, key, value, after, what, timeout=20):
        """The first message at index >= after with key=value; its index."""
        def found():
            for i, m in enumerate(self.read()[after:], after):
                if m.get(key) == value:
                    return i + 1  # 0 would read as "not yet"
            return 0
        return wait_for(found, timeout, what) - 1

    def said(self, key, value):
        return [m for m in self.read() if m.get(key) == value]


def upstream(ctx):
    """A backend_mcp instance on a stdio fake whose tools/list waits for a gate file."""
    gate = ctx.path("up.gate")
    inst = {"name": "up", "module": "backend_mcp", "inline_dispatch": True,
            "config": {"command": sys.executable, "args": [FAKE, "--list-gate", gate],
                       "restart_min_ms": 100, "restart_max_ms": 400}}
    m = base_manifest()
    m["modules"].append(inst)
    m["bindings"] = [{"backend": "mock"}, {"backend": "up", "prefix": "up"}]
    return m, gate


def check_ready_message(m, gw, what):
    check_eq(m.get("MAINPID"), str(gw.proc.pid), "%s: MAINPID" % what)
    check(m.get("STATUS", "").startswith("serving"), "%s: its STATUS: %r" % (what, m))


def main():
    args = parse_args()
    ctx = Context(args)

    def t_ready_reload_stop():
        path = ctx.path("notify.sock")
        manager = ServiceManager(path)
        manifest, gate = upstream(ctx)
        try:
            with Gateway(ctx, manifest=manifest, name="notified",
                         env={"NOTIFY_SOCKET": path}) as gw:
                check_eq(readyz(gw.port).status, 503, "/readyz while up's tools/list is held")
                manager.wait("STATUS", 'starting: waiting for the first lists of ["up"]', 0,
                             "a STATUS= naming the backend waited for")
                check_eq(manager.said("READY", "1"), [], "READY=1 while /readyz says starting")
                check_eq(readyz(gw.port).status, 503, "/readyz, still held")

                with open(gate, "w"):
                    pass
                i = manager.wait("READY", "1", 0, "READY=1 once up's tools are listed")
                check_eq(readyz(gw.port).status, 200, "/readyz as READY=1 has come")
                check_ready_message(manager.messages[i], gw, "the first READY=1")
                check_eq(manager.messages[i]["STATUS"],
                         "serving on http://127.0.0.1:%d/mcp (generation 1)" % gw.port,
                         "the first READY=1's STATUS")

                before = time.monotonic_ns() // 1000
                gw.signal(signal.SIGHUP)
                r = manager.wait("RELOADING", "1", i + 1, "RELOADING=1 after SIGHUP")
                after = time.monotonic_ns() // 1000
                started = int(manager.messages[r].get("MONOTONIC_USEC", "0"))
                check(before <= started <= after,
                      "MONOTONIC_USEC %d between %d and %d" % (started, before, after))
                d = manager.wait("READY", "1", r + 1, "READY=1 once the reload is published")
                check_ready_message(manager.messages[d], gw, "READY=1 after the reload")
                check("generation 2" in manager.messages[d]["STATUS"],
                      "its STATUS names the new generation: %r" % manager.messages[d])

                replace_file(gw.config, "{ not a manifest")
                gw.signal(signal.SIGHUP)
                r = manager.wait("RELOADING", "1", d + 1, "RELOADING=1 for a bad manifest")
                d = manager.wait("READY", "1", r + 1, "READY=1 once the reload is refused")
                check(manager.messages[d]["STATUS"].startswith("reload refused"),
                      "its STATUS says it was refused: %r" % manager.messages[d])
                replace_file(gw.config, manifest)
                seen = len(manager.read())
            s = manager.wait("STOPPING", "1", seen, "STOPPING=1 after SIGTERM")
            check_eq(manager.read()[s + 1:], [], "what came after STOPPING=1")
        finally:
            manager.close()

    def t_abstract_socket_and_watchdog():
        name = "mcpg-test-notify-%d-%s" % (os.getpid(), os.urandom(4).hex())
        manager = ServiceManager("\0" + name)
        try:
            with Gateway(ctx, manifest=base_manifest(), name="abstract",
                         env={"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "2000000"}) as gw:
                i = manager.wait("READY", "1", 0, "READY=1 on the abstract socket")
                check_ready_message(manager.messages[i], gw, "READY=1")
                w = manager.wait("WATCHDOG", "1", 0, "a first WATCHDOG=1")
                manager.wait("WATCHDOG", "1", w + 1, "a second WATCHDOG=1", timeout=5)
                seen = len(manager.read())
            manager.wait("STOPPING", "1", seen, "STOPPING=1 after SIGTERM")
        finally:
            manager.close()

    def t_not_a_socket_name():
        with Gateway(ctx, manifest=base_manifest(), name="unusable",
                     env={"NOTIFY_SOCKET": "relative.sock"}) as gw:
            wait_for(lambda: 'NOTIFY_SOCKET \\"relative.sock\\" is not an absolute path' in
                     gw.stderr(), 20, "the warning naming NOTIFY_SOCKET")
            check_eq(readyz(gw.port).status, 200, "/readyz without a service manager")

    return run_tests([
        ("READY=1 as /readyz turns 200, RELOADING=1/READY=1 on SIGHUP, STOPPING=1 on SIGTERM",
         t_ready_reload_stop),
        ("an abstract NOTIFY_SOCKET, and WATCHDOG=1 when WATCHDOG_USEC asks",
         t_abstract_socket_and_watchdog),
        ("a NOTIFY_SOCKET that names no socket: a warning, and the gateway serves",
         t_not_a_socket_name),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
