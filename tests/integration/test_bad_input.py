#!/usr/bin/python3
"""Bad input over raw sockets, against one gateway, which must survive all of it.

Each case sends raw bytes on a fresh connection and checks the HTTP status, the
JSON-RPC error code where there is one, and that the connection is closed where
that is part of the answer. Then: pipelining (10 requests in one write, answered
in order), a request split into 1-byte writes, and finally a good call, SIGTERM,
exit 0 and no sanitizer report.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, PROTOCOL_VERSION, base_manifest,  # noqa: E402
                     build_request, call_tool, check, check_eq, expect_error, expect_result,
                     parse_args, rpc_body, run_tests, send_one, stateless_headers,
                     tool_call_request)

MAX_BODY = 4096


def main():
    args = parse_args()
    ctx = Context(args)
    manifest = base_manifest(server={"max_body_bytes": MAX_BODY})
    gw = Gateway(ctx, manifest=manifest, name="badinput")
    gw.start()
    port = gw.port

    def echo_body(id=1, message="hi"):
        return rpc_body("tools/call", {"name": "echo", "arguments": {"message": message}}, id=id)

    def post(headers, body):
        return send_one(port, build_request(port, headers=headers, body=body))

    # ---- HTTP level ----

    def t_malformed_request_line():
        with Conn(port) as c:
            c.send(b"THIS IS NOT HTTP AT ALL\r\n\r\n")
            r = c.read_response()
            check_eq(r.status, 400, "garbage request line: status")
            check(c.closed_by_peer(), "garbage request line: connection must be closed")

    def t_malformed_header_line():
        with Conn(port) as c:
            c.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nThis line has no colon\r\n"
                   b"Content-Length: 2\r\n\r\n{}")
            r = c.read_response()
            check_eq(r.status, 400, "header line without a colon: status")
            check(c.closed_by_peer(), "header line without a colon: connection must be closed")

    def t_oversized_headers():
        with Conn(port) as c:
            big = "a" * (64 * 1024)
            raw = build_request(port, headers=stateless_headers("tools/call", "echo")
                                + [("X-Big", big)], body=echo_body())
            c.send(raw, ignore_reset=True)
            r = c.read_response()
            check_eq(r.status, 431, "64 KiB header: status")

    def t_oversized_body_declared():
        # Only the head is sent: the answer must not wait for a body it refuses.
        with Conn(port) as c:
            head = build_request(port, headers=stateless_headers("tools/call", "echo")
                                 + [("Content-Length", "1000000")], body=b"",
                                 content_length=False)
            c.send(head)
            r = c.read_response()
            check_eq(r.status, 413, "Content-Length 1000000 > max_body_bytes %d: status" % MAX_BODY)

    def t_oversized_body_sent():
        body = echo_body(message="x" * (MAX_BODY + 100))
        check(len(body) > MAX_BODY, "test body must exceed the limit")
        with Conn(port) as c:
            c.send(build_request(port, headers=stateless_headers("tools/call", "echo"),
                                 body=body), ignore_reset=True)
            r = c.read_response()
            check_eq(r.status, 413, "%d-byte body > max_body_bytes %d: status"
                     % (len(body), MAX_BODY))

    def t_wrong_content_type():
        r = post(stateless_headers("tools/call", "echo", content_type="text/plain"), echo_body())
        check_eq(r.status, 415, "Content-Type text/plain: status")

    # ---- JSON / JSON-RPC level ----

    def t_invalid_json():
        r = post(stateless_headers("tools/call", "echo"), '{"jsonrpc":"2.0","id":1,"method":')
        expect_error(r, 400, -32700, "invalid JSON", id=None)

    def not_jsonrpc(body, what):
        def t():
            r = post(stateless_headers("tools/list"), body)
            expect_error(r, 400, -32600, what, check_id=False)
        return t

    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                      "io.modelcontextprotocol/clientCapabilities": {}}}
    array_body = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": meta}])
    no_jsonrpc = json.dumps({"id": 1, "method": "tools/list", "params": meta})
    wrong_version = json.dumps({"jsonrpc": "1.0", "id": 1, "method": "tools/list", "params": meta})
    no_method = json.dumps({"jsonrpc": "2.0", "id": 1, "params": meta})

    def t_unknown_tool():
        body = rpc_body("tools/call", {"name": "nope", "arguments": {}}, id=41)
        r = post(stateless_headers("tools/call", "nope"), body)
        expect_error(r, 200, -32602, "unknown tool", id=41)

    def t_unknown_method():
        body = rpc_body("nope/nothing", {}, id=42)
        r = post(stateless_headers("nope/nothing"), body)
        expect_error(r, 404, -32601, "unknown method", id=42)

    # ---- stateless headers ----

    def header_case(headers, what, id):
        def t():
            r = post(headers, echo_body(id=id))
            expect_error(r, 400, -32020, what, check_id=False)
        return t

    base = [("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", PROTOCOL_VERSION)]
    no_method_hdr = base + [("Mcp-Name", "echo")]
    wrong_method_hdr = base + [("Mcp-Method", "tools/list"), ("Mcp-Name", "echo")]
    no_name_hdr = base + [("Mcp-Method", "tools/call")]
    wrong_name_hdr = base + [("Mcp-Method", "tools/call"), ("Mcp-Name", "other")]

    def t_unsupported_version():
        v = "2099-01-01"
        msg = {"jsonrpc": "2.0", "id": 43, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"message": "hi"},
                          "_meta": {"io.modelcontextprotocol/protocolVersion": v,
                                    "io.modelcontextprotocol/clientCapabilities": {}}}}
        r = post(stateless_headers("tools/call", "echo", version=v), json.dumps(msg))
        err = expect_error(r, 400, -32022, "unsupported MCP-Protocol-Version", check_id=False)
        data = err.get("data")
        check(isinstance(data, dict) and PROTOCOL_VERSION in (data.get("supported") or []),
              "-32022 error.data.supported must list %s: %r" % (PROTOCOL_VERSION, err))

    # ---- framing ----

    def t_pipelining():
        n = 10
        raw = b"".join(tool_call_request(port, "echo", {"message": "m%d" % i}, id=i)
                       for i in range(1, n + 1))
        with Conn(port) as c:
            c.send(raw)
            for i in range(1, n + 1):
                r = c.read_response()
                result = expect_result(r, r.rpc(), i, "pipelined request %d" % i)
                check_eq(result.get("content"), [{"type": "text", "text": "Echo: m%d" % i}],
                         "pipelined request %d: content" % i)

    def t_one_byte_writes():
        raw = tool_call_request(port, "echo", {"message": "slow"}, id=77)
        with Conn(port, nodelay=True) as c:
            c.send_bytewise(raw)
            r = c.read_response()
            result = expect_result(r, r.rpc(), 77, "request in 1-byte writes")
            check_eq(result.get("content"), [{"type": "text", "text": "Echo: slow"}],
                     "request in 1-byte writes: content")

    def t_still_serving():
        r, rpc = call_tool(port, "echo", {"message": "hi"}, id=99)
        result = expect_result(r, rpc, 99, "good call after the bad input")
        check_eq(result, {"content": [{"type": "text", "text": "Echo: hi"}],
                          "resultType": "complete"}, "good call after the bad input: result")
        gw.check_sanitizers()

    tests = [
        ("malformed HTTP (request line) -> 400 + close", t_malformed_request_line),
        ("malformed HTTP (header line) -> 400 + close", t_malformed_header_line),
        ("oversized headers -> 431", t_oversized_headers),
        ("oversized body (declared) -> 413", t_oversized_body_declared),
        ("oversized body (sent) -> 413", t_oversized_body_sent),
        ("wrong Content-Type -> 415", t_wrong_content_type),
        ("invalid JSON -> 400/-32700", t_invalid_json),
        ("JSON array -> 400/-32600", not_jsonrpc(array_body, "JSON array")),
        ("missing jsonrpc -> 400/-32600", not_jsonrpc(no_jsonrpc, "missing jsonrpc")),
        ("jsonrpc 1.0 -> 400/-32600", not_jsonrpc(wrong_version, "jsonrpc 1.0")),
        ("missing method -> 400/-32600", not_jsonrpc(no_method, "missing method")),
        ("unknown tool -> 200/-32602", t_unknown_tool),
        ("unknown method -> 404/-32601", t_unknown_method),
        ("missing Mcp-Method -> 400/-32020", header_case(no_method_hdr, "missing Mcp-Method", 51)),
        ("mismatched Mcp-Method -> 400/-32020",
         header_case(wrong_method_hdr, "mismatched Mcp-Method", 52)),
        ("missing Mcp-Name -> 400/-32020", header_case(no_name_hdr, "missing Mcp-Name", 53)),
        ("mismatched Mcp-Name -> 400/-32020",
         header_case(wrong_name_hdr, "mismatched Mcp-Name", 54)),
        ("unsupported MCP-Protocol-Version -> 400/-32022", t_unsupported_version),
        ("pipelining: 10 requests in one write, in order", t_pipelining),
        ("a request in 1-byte writes", t_one_byte_writes),
        ("still serving after all of that", t_still_serving),
        ("SIGTERM -> exit 0, no sanitizer report", gw.stop),
    ]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
