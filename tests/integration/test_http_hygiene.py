#!/usr/bin/python3
"""HTTP hygiene on the real gateway (the MCP spec's security rules): Host and Origin
checked against gateway.server.allowed_hosts/allowed_origins (403, -32000; by default
only loopback names on a loopback connection, so a DNS-rebinding page cannot reach a
local gateway), absolute-form targets refused (400), request lines that are not
HTTP/1.x refused (505), Accept checked (406). A listener beyond loopback without
allowed_origins refuses every request that carries an Origin (and says so at start);
one without Origin is served."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Conn, Gateway, Skip, base_manifest, check, check_eq,  # noqa: E402
                     expect_error, expect_result, free_port, parse_args, rpc_body, run_tests,
                     stateless_headers)


def outward_address():
    """This machine's address on its default route (no packet is sent), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("198.51.100.1", 9))
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def post(port, headers_extra=(), host=None, path="/mcp", method="tools/list", raw_line=None,
         accept=None, to="127.0.0.1"):
    body = rpc_body(method, {}, id=5).encode()
    hs = [h for h in stateless_headers(method) if accept is None or h[0] != "Accept"]
    if accept is not None:
        hs.append(("Accept", accept))
    lines = [raw_line or "POST %s HTTP/1.1" % path, "Host: %s" % (host or "127.0.0.1:%d" % port)]
    lines += ["%s: %s" % kv for kv in list(hs) + list(headers_extra)]
    lines.append("Content-Length: %d" % len(body))
    with Conn(port, host=to) as c:
        c.send(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        return c.read_response()


def forbidden(r, what):
    err = expect_error(r, 403, -32000, what, check_id=False)
    check("allowed_" in err["message"], "%s: the message names the setting: %r" % (what, err))


def main():
    args = parse_args()
    ctx = Context(args)
    gw = Gateway(ctx, manifest=base_manifest(), name="hygiene").start()
    port = gw.port
    conf = Gateway(ctx, manifest=base_manifest(server={
        "allowed_hosts": ["mcp.example.com", "127.0.0.1"],
        "allowed_origins": ["https://app.example.com"]}), name="configured").start()

    def t_host_default():
        for h in ("localhost", "localhost:%d" % port, "127.0.0.1:%d" % port, "[::1]:%d" % port,
                  "LocalHost"):
            r = post(port, host=h)
            expect_result(r, r.rpc(), 5, "Host %s" % h)
        for h in ("evil.example.com", "evil.example.com:%d" % port, "localhost.evil.com",
                  "127.0.0.1.nip.io:%d" % port):
            forbidden(post(port, host=h), "Host %s" % h)

    def t_dns_rebinding_scenario():
        # what the conformance suite's dns-rebinding-protection sends
        forbidden(post(port, host="evil.example.com",
                       headers_extra=[("Origin", "http://evil.example.com")]), "rebinding")

    def t_origin_default():
        forbidden(post(port, headers_extra=[("Origin", "http://evil.example.com")]), "evil Origin")
        forbidden(post(port, headers_extra=[("Origin", "null")]), "Origin null")
        r = post(port, headers_extra=[("Origin", "http://localhost:5173")])
        expect_result(r, r.rpc(), 5, "loopback Origin")
        r = post(port)
        expect_result(r, r.rpc(), 5, "no Origin")

    def t_configured():
        p = conf.port
        r = post(p, host="mcp.example.com:443")
        expect_result(r, r.rpc(), 5, "configured host, any port")
        forbidden(post(p, host="localhost:%d" % p), "localhost is not in the configured list")
        r = post(p, headers_extra=[("Origin", "https://app.example.com")])
        expect_result(r, r.rpc(), 5, "configured origin")
        forbidden(post(p, headers_extra=[("Origin", "http://localhost")]), "origin not listed")

    def t_public_listener():
        addr = outward_address()
        if not addr:
            raise Skip("no non-loopback address to reach a listener on")

        def public(server, name):
            p = free_port()
            return Gateway(ctx, manifest=base_manifest(server=server), listen=False,
                           health_port=p, extra_args=["--listen", "0.0.0.0:%d" % p],
                           name=name)

        warning = "is beyond loopback and gateway.server.allowed_origins is unset"
        with public(None, "public") as pg:
            p = pg.port
            check("listener 0.0.0.0:%d %s" % (p, warning) in pg.stderr(),
                  "the start names the listener and the setting:\n%s" % pg.stderr_tail())
            for origin in ("http://evil.example.com", "https://app.example.com",
                           "http://localhost:5173"):
                forbidden(post(p, host="%s:%d" % (addr, p), to=addr,
                               headers_extra=[("Origin", origin)]), "public, Origin %s" % origin)
            r = post(p, host="%s:%d" % (addr, p), to=addr)
            expect_result(r, r.rpc(), 5, "public, no Origin (not a browser)")
            # the same listener reached on loopback keeps the loopback rules
            r = post(p, headers_extra=[("Origin", "http://localhost:5173")])
            expect_result(r, r.rpc(), 5, "public listener, loopback connection, loopback Origin")
        with public({"allowed_origins": ["https://app.example.com"]}, "public-set") as pg:
            p = pg.port
            check(warning not in pg.stderr(), "no warning once allowed_origins is set")
            r = post(p, host="%s:%d" % (addr, p), to=addr,
                     headers_extra=[("Origin", "https://app.example.com")])
            expect_result(r, r.rpc(), 5, "public, a listed Origin")
            forbidden(post(p, host="%s:%d" % (addr, p), to=addr,
                           headers_extra=[("Origin", "http://evil.example.com")]),
                      "public, an Origin not listed")
        check(warning not in gw.stderr(), "a loopback listener says nothing of it")

    def t_health_not_checked():
        # probes from a load balancer use the pod address as Host: health routes answer
        with Conn(port) as c:
            c.send(b"GET /healthz HTTP/1.1\r\nHost: 10.1.2.3:8787\r\n\r\n")
            check_eq(c.read_response().status, 200, "healthz with a foreign Host")

    def t_duplicate_host():
        r = post(port, headers_extra=[("Host", "evil.example.com")])
        expect_error(r, 400, -32000, "two Host headers", check_id=False)

    def t_absolute_form():
        r = post(port, raw_line="POST http://evil.example.com/mcp HTTP/1.1")
        expect_error(r, 400, -32600, "absolute-form target", check_id=False)
        with Conn(port) as c:
            c.send(b"GET http://127.0.0.1/healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            check_eq(c.read_response().status, 400, "absolute-form GET")

    def t_versions():
        for line in ("POST /mcp HTTP/2.0", "POST /mcp HTTP/0.9"):
            r = post(port, raw_line=line)
            check_eq(r.status, 505, line)
            check_eq(r.header("connection"), "close", line + ": closes")
        with Conn(port) as c:
            c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            check(c.read_response().status in (400, 505), "an h2 preface is refused")

    def t_accept():
        r = post(port, accept="text/html")
        expect_error(r, 406, -32600, "Accept: text/html", check_id=False)
        r = post(port, accept="application/json;q=0, text/event-stream")
        expect_error(r, 406, -32600, "application/json q=0", check_id=False)

    def t_stop():
        gw.stop()
        conf.stop()

    return run_tests([
        ("Host: loopback names allowed, others 403 (default)", t_host_default),
        ("the conformance dns-rebinding request is refused", t_dns_rebinding_scenario),
        ("Origin: loopback pages and none allowed, others 403", t_origin_default),
        ("a listener beyond loopback refuses Origins until allowed_origins is set",
         t_public_listener),
        ("allowed_hosts / allowed_origins replace the defaults", t_configured),
        ("health routes do not check Host", t_health_not_checked),
        ("two Host headers: 400", t_duplicate_host),
        ("absolute-form request targets: 400", t_absolute_form),
        ("HTTP/2.0 and HTTP/0.9 request lines: 505", t_versions),
        ("Accept without application/json: 406", t_accept),
        ("both gateways stop cleanly", t_stop),
        ], ctx)


if __name__ == "__main__":
    sys.exit(main())
