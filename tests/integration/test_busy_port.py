#!/usr/bin/python3
"""A start on a port that is already in use fails with a clear error naming the
address, whoever holds it: another gateway (whose loops listen with SO_REUSEPORT,
which would otherwise let a second gateway join the port and take part of its
traffic), a program listening with SO_REUSEPORT, or one listening without it.
The gateway that was there first keeps serving."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, call_tool, check, expect_result,  # noqa: E402
                     parse_args, run_cli, run_tests)


def main():
    args = parse_args()
    ctx = Context(args)
    manifest = ctx.write_manifest(base_manifest(gateway={"workers": 2}), "busy.json")

    def refused_on(port):
        addr = "127.0.0.1:%d" % port
        rc, out, err = run_cli(ctx, ["--config", manifest, "--listen", addr], timeout=60)
        text = out + err
        check(rc != 0, "a start on busy %s exited %d:\n%s" % (addr, rc, text))
        check(addr in text and "in use" in text,
              "the error names neither %s nor 'in use':\n%s" % (addr, text))

    def t_second_gateway():
        with Gateway(ctx, manifest=base_manifest(gateway={"workers": 2}), name="first") as gw:
            refused_on(gw.port)
            r, rpc = call_tool(gw.port, "echo", {"message": "still here"}, id=1)
            text = expect_result(r, rpc, 1, "the first gateway")["content"][0]["text"]
            check(text == "Echo: still here", "the first gateway answered %r" % text)

    def listener(reuseport):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if reuseport:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.1", 0))  # the system picks the port (getsockname() tells it)
        s.listen(8)
        return s

    def t_reuseport_program():
        s = listener(True)
        try:
            refused_on(s.getsockname()[1])
        finally:
            s.close()

    def t_plain_program():
        s = listener(False)
        try:
            refused_on(s.getsockname()[1])
        finally:
            s.close()

    return run_tests([
        ("a second gateway on the same port is refused, the first serves on", t_second_gateway),
        ("a port held by an SO_REUSEPORT listener is refused", t_reuseport_program),
        ("a port held by a plain listener is refused", t_plain_program),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
