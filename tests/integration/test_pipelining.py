#!/usr/bin/python3
"""Pipelined calls whose answers are large: every answer arrives, in order, even when the
connection's output passes the transport's per-connection limit (the parser pauses, the
answers are written, and the parser must resume on its own)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, base_manifest, check_eq, parse_args,  # noqa: E402
                     run_tests, tool_call_request)


def main():
    args = parse_args()
    ctx = Context(args)

    def pipelined(count, payload, inline):
        def t():
            m = base_manifest(gateway={"workers": 1},
                              tools=[{"name": "echo", "payload_bytes": payload}])
            m["modules"][0]["inline_dispatch"] = inline
            with Gateway(ctx, manifest=m, name="pipe") as gw:
                raw = b"".join(tool_call_request(gw.port, "echo", {"message": "hi"}, id=i)
                               for i in range(count))
                c = Conn(gw.port, timeout=10)
                c.send(raw)
                for i in range(count):
                    r = c.read_response()
                    rpc = r.rpc()
                    check_eq(rpc.get("id"), i, "answer %d of %d in order" % (i + 1, count))
                    text = rpc["result"]["content"][0]["text"]
                    check_eq(len(text), payload, "answer %d's text length" % i)
                c.close()
        return t

    return run_tests([
        ("3 pipelined 600 kB answers, inline", pipelined(3, 600000, True)),
        ("20 pipelined 200 kB answers, inline", pipelined(20, 200000, True)),
        ("20 pipelined 200 kB answers, on the pool", pipelined(20, 200000, False)),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
