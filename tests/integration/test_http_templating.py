#!/usr/bin/python3
"""backend_http: a tool's arguments cannot change where its request goes.

The real gateway in front of a recording REST upstream (an http.server on a
free loopback port, started and stopped here) that keeps, for each request,
the raw request line, the target, the headers and the body. Each call either
reaches the upstream with exactly the request target (and headers, body)
the test expects, or is refused -32602 naming the argument, and then the
upstream received nothing for it:

  * path: every byte outside RFC 3986's unreserved characters is %XX ('/',
    '?', '#', '%', ';', CR, LF ...), so a value stays one segment; "." and
    ".." (alone or between slashes) and a segment an argument leaves empty
    are refused; "%2e%2e" arrives as text (%252e%252e).
  * query: a value is encoded whole ('&', '=', '+', '#'); keys are fixed.
  * headers: the config's only; an argument never becomes a header line.
  * body: JSON written by the gateway; a value cannot add a member.
  * the encoded URL is at most 8192 bytes.
  * a placeholder in the scheme, host or port is a config error (--check).
"""

import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restlib import RecordingUpstream  # noqa: E402
from gateway import (META, Context, Gateway, base_manifest, build_request, call_tool, check,  # noqa: E402
                     check_eq, parse_args, run_cli, run_tests, send_one, stateless_headers)


def tools(port):
    base = "http://127.0.0.1:%d" % port
    return [
        {"name": "user", "method": "GET", "url": base + "/api/v1/users/{id}/profile",
         "input_schema": {"type": "object"}},
        {"name": "file", "method": "GET", "url": base + "/files/{name}.json"},
        {"name": "pair", "method": "GET", "url": base + "/a/{x}{y}/z"},
        {"name": "search", "method": "GET", "url": base + "/search",
         "query": {"q": "{q}", "role": "user"}},
        {"name": "tenant", "method": "GET", "url": base + "/t",
         "headers": {"X-Tenant": "{tenant}", "X-Static": "s1"}},
        {"name": "create", "method": "POST", "url": base + "/items",
         "body": {"title": "{title}", "note": "by {title}"}},
        {"name": "long", "method": "GET", "url": base + "/l/{id}"},
    ]


def manifest(port):
    m = base_manifest()
    m["modules"].append({"name": "rest", "module": "backend_http", "config": {"tools": tools(port)}})
    m["bindings"] = [{"backend": "mock"}, {"backend": "rest"}]
    return m


def main():
    args = parse_args()
    ctx = Context(args)
    up = RecordingUpstream()
    gw = Gateway(ctx, manifest=manifest(up.port))

    def sent(tool, arguments, what):
        """The call succeeds and exactly one request reached the upstream."""
        before = up.count()
        r, rpc = call_tool(gw.port, tool, arguments)
        check_eq(r.status, 200, what + ": HTTP status")
        check("result" in rpc and not rpc["result"].get("isError"), "%s: a result: %r" % (what, rpc))
        got = up.since(before)
        check_eq(len(got), 1, what + ": requests the upstream received")
        return got[0]

    def expect_target(tool, arguments, target, method="GET"):
        what = "%s %s" % (tool, json.dumps(arguments))
        req = sent(tool, arguments, what)
        check_eq(req["line"], "%s %s HTTP/1.1" % (method, target), what + ": the raw request line")
        check_eq(req["target"], target, what + ": the request target")
        return req

    def expect_refused(tool, arguments, names, what_else=""):
        """-32602 naming each argument in names; the upstream got nothing."""
        what = "%s %s" % (tool, json.dumps(arguments)[:120])
        before = up.count()
        r, rpc = call_tool(gw.port, tool, arguments)
        check_eq(r.status, 200, what + ": HTTP status")
        err = rpc.get("error") or {}
        check_eq(err.get("code"), -32602, "%s: error code (%r)" % (what, rpc))
        for n in names:
            check("'%s'" % n in err.get("message", ""), "%s: the message names %r: %r"
                  % (what, n, err.get("message")))
        check(what_else in err.get("message", ""), "%s: %r in %r" % (what, what_else, err.get("message")))
        check_eq(up.since(before), [], what + ": requests the upstream received")
        return err["message"]

    def t_path_values_encoded():
        p = "/api/v1/users/%s/profile"
        for value, seg in [("a/b", "a%2Fb"), ("a?b=c", "a%3Fb%3Dc"), ("a#b", "a%23b"),
                           ("%2e%2e", "%252e%252e"), ("%2E.", "%252E."), ("a;b\\c", "a%3Bb%5Cc"),
                           ("...", "..."), ("a..b", "a..b"), ("\u00e9", "%C3%A9"),
                           ("x\r\nX-Evil: 1", "x%0D%0AX-Evil%3A%201"), (" \t", "%20%09"), (42, "42")]:
            expect_target("user", {"id": value}, p % seg)

    def t_path_dot_and_empty_refused():
        for value in ["..", ".", "../admin", "a/../../admin", "a/./b", "x/..", "..\\admin"]:
            expect_refused("user", {"id": value}, ["id"], "may not be \".\" or \"..\"")
        expect_refused("user", {"id": ""}, ["id"], "would leave an empty URL path segment")
        expect_refused("user", {"id": "a\u0000b"}, ["id"], "holds a NUL byte")
        expect_refused("user", {"id": {"a": 1}}, ["id"], "must be a string, number or boolean")
        expect_refused("user", {}, ["id"], "missing argument")

    def t_partial_segments():
        expect_target("file", {"name": ""}, "/files/.json")
        expect_target("file", {"name": "report"}, "/files/report.json")
        expect_target("pair", {"x": "a", "y": ""}, "/a/a/z")
        expect_refused("pair", {"x": "", "y": ""}, ["x", "y"], "empty URL path segment")
        expect_refused("file", {"name": ".."}, ["name"])

    def t_query_values_encoded():
        for value, enc in [("&admin=1", "%26admin%3D1"), ("a+b c#d", "a%2Bb%20c%23d"),
                           ("%26", "%2526"), ("..", "..")]:
            req = sent("search", {"q": value}, "search %r" % value)
            target = req["target"]
            path, _, query = target.partition("?")
            check_eq(path, "/search", "search %r: path" % value)
            check_eq(sorted(query.split("&")), sorted(["q=" + enc, "role=user"]),
                     "search %r: the raw query" % value)
            check_eq(urllib.parse.parse_qs(query, keep_blank_values=True),
                     {"q": [value], "role": ["user"]}, "search %r: the query as parsed" % value)
        expect_refused("search", {"q": ["a", "b"]}, ["q"], "goes in the URL")

    def t_headers_not_arguments():
        req = sent("tenant", {"tenant": "t1\r\nX-Evil: 1"}, "tenant with CRLF")
        heads = dict(req["headers"])
        check_eq(heads.get("X-Tenant"), "{tenant}", "the configured header, as written")
        check_eq(heads.get("X-Static"), "s1", "a static header")
        check("X-Evil" not in heads and not any("Evil" in v or "t1" in v for _, v in req["headers"]),
              "no argument in any header: %r" % req["headers"])
        check_eq(req["line"], "GET /t HTTP/1.1", "the request line")

    def t_body_values_stay_values():
        evil = '"},"admin":true,"x":{"\n\u0001'
        req = sent("create", {"title": evil}, "create")
        check_eq(req["line"], "POST /items HTTP/1.1", "the request line")
        body = json.loads(req["body"])
        check_eq(body, {"title": evil, "note": "by " + evil}, "the body as JSON")
        expect_refused("create", {"title": "a\u0000"}, ["title"], "holds a NUL byte")

    def t_url_length():
        # "/l/" + id: 8192 bytes is the most the encoded URL may be
        expect_target("long", {"id": "a" * 8189}, "/l/" + "a" * 8189)
        msg = expect_refused("long", {"id": "a" * 8190}, ["id"], "over 8192")
        check("8193 bytes" in msg, "the length in %r" % msg)
        expect_refused("long", {"id": "/" * 3000}, ["id"], "over 8192")

    def t_not_json_never_sent():
        """Bytes that are not JSON text (a lone surrogate, a byte that is not
        UTF-8) are refused by the gateway before any backend sees them."""
        for raw in [b'"\\ud800"', b'"a\xffb"']:
            body = (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"user",'
                    b'"arguments":{"id":' + raw + b'},"_meta":' + json.dumps(META).encode() + b'}}')
            before = up.count()
            r = send_one(gw.port, build_request(gw.port, headers=stateless_headers("tools/call", "user"),
                                                body=body))
            err = r.rpc().get("error") or {}
            check(err.get("code") in (-32700, -32602), "%r: refused (%r)" % (raw, r.body[:200]))
            check_eq(up.since(before), [], "%r: requests the upstream received" % raw)

    def t_authority_placeholder_is_config_error():
        cases = [("http://{host}/items/{id}", "http://{host}"),
                 ("http://127.0.0.1:{port}/items", "http://127.0.0.1:{port}"),
                 ("{scheme}://127.0.0.1/items", "{scheme}://127.0.0.1")]
        for url, origin in cases:
            m = manifest(up.port)
            m["modules"][1]["config"]["tools"][2]["url"] = url
            path = ctx.write_manifest(m)
            rc, out, err = run_cli(ctx, ["--check", "--config", path])
            want = ('%s: modules[1].config.tools[2].url: no placeholder may choose the scheme, host '
                    'or port (in "%s"): arguments fill only the path, "query" and "body"' % (path, origin))
            check_eq(rc, 2, "--check on %s (output %s)" % (url, out + err))
            check(want in (out + err).splitlines(), "expected line %r in:\n%s" % (want, out + err))

    try:
        gw.start()
        rc = run_tests([
            ("path values are percent-encoded, one segment each", t_path_values_encoded),
            ("'.', '..', dot pieces, empty segments, NUL, objects: -32602, nothing sent",
             t_path_dot_and_empty_refused),
            ("a placeholder that is part of a segment: the filled segment is judged",
             t_partial_segments),
            ("query values are encoded whole; keys fixed", t_query_values_encoded),
            ("headers are the config's: no argument reaches one", t_headers_not_arguments),
            ("body values are JSON values, escaped", t_body_values_stay_values),
            ("the encoded URL is at most 8192 bytes", t_url_length),
            ("arguments that are not JSON text never reach the upstream", t_not_json_never_sent),
            ("a placeholder in the scheme, host or port is a config error",
             t_authority_placeholder_is_config_error),
            ("the gateway stops cleanly", gw.stop),
        ], ctx)
    finally:
        if gw.proc is not None and gw.proc.poll() is None:
            gw.stop()
        up.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
