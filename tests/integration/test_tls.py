#!/usr/bin/python3
"""TLS and mTLS in transport_http, on the real gateway, with certificates this test
makes with the openssl command (a CA, a second CA, a server certificate, client
certificates from each CA) in its temp folder:
  * https on both wires (a raw Python ssl client): a stateless tools/call, a legacy
    initialize and call; ALPN http/1.1 chosen; a client offering only h2 gets no
    ALPN and is served HTTP/1.1; TLS 1.3 only with tls_min_version 1.3;
  * mcpg --check names a missing, unreadable or mismatched certificate or key by
    its key path and file, and a start with one is refused;
  * mTLS optional (no certificate: served; one from the CA: served; one from
    another CA: refused) and required (no certificate: refused);
  * 50 connections stalled in their handshake (silent, or half a ClientHello) on
    a one-loop gateway do not delay a normal https call; none of them is logged
    as a request;
  * tls_handshake_timeout_ms closes a stalled handshake (and not before);
  * GET /.well-known/oauth-protected-resource (and .../mcp) from
    oauth_protected_resource; 404 when unset;
  * an anonymous call refused by the kernel (fx_identity in the identity stage)
    is an HTTP 401 on both wires, the legacy one included (not a 200 stream);
    the WWW-Authenticate passthrough itself is in test_th_tls and the identity
    modules' tests (no module here sets a challenge);
  * mcpg-load (the benchmarks' client) over https on both wires, and refusing a
    certificate from another CA;
  * the certificate files replaced, then SIGHUP: new connections get the new
    certificate (its serial), a connection opened before keeps working; a bad
    file then is logged with its name and the certificate before is kept."""
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, ConnectionClosed, Context, Gateway, Skip, with_fixtures,  # noqa: E402
                     base_manifest, build_request, check, check_eq, expect_result, fail,
                     parse_args, rpc_body, run_cli, run_tests, stateless_headers, wait_for)
from tlskit import Pki, TlsConn, TlsGateway  # noqa: E402

def tls_server(pki, **extra):
    s = {"tls_cert_file": pki.path("server", "pem"), "tls_key_file": pki.path("server", "key")}
    s.update(extra)
    return s


def https_call(port, ctx, message="hi", id=1):
    with TlsConn(port, ctx) as c:
        c.send(build_request(port, headers=stateless_headers("tools/call", "echo"),
                             body=rpc_body("tools/call", {"name": "echo",
                                                         "arguments": {"message": message}},
                                           id=id)))
        r = c.read_response()
    return expect_result(r, r.rpc(), id, "https tools/call")


ECHO_HI = {"content": [{"type": "text", "text": "Echo: hi"}], "resultType": "complete"}


def refused(port, ctx):
    """A handshake the server refuses: the error the client sees (with TLS 1.3 the
    refusal of a client certificate arrives after the client's side is done, at
    the first read), or None when the server answered."""
    try:
        with TlsConn(port, ctx) as c:
            c.send(build_request(port, "GET", "/healthz", headers=[("Connection", "close")]))
            c.read_response()
            return None
    except (ssl.SSLError, ConnectionClosed, ConnectionResetError, BrokenPipeError) as e:
        return e


def client_hello_half():
    """The first half of a real ClientHello, made through a MemoryBIO."""
    ctx = ssl.create_default_context()
    out = ssl.MemoryBIO()
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    check(len(hello) > 40, "a ClientHello was made (%d bytes)" % len(hello))
    return hello[:len(hello) // 2]


def access_lines(gw):
    """Access log lines of anything but the health probes."""
    return [ln for ln in gw.stderr().splitlines()
            if '"msg":"access"' in ln and '"path":"/healthz"' not in ln]


def serial_of(port, ctx):
    with TlsConn(port, ctx) as c:
        return int(c.sock.getpeercert()["serialNumber"], 16)


def reload(gw, refused=False):
    """SIGHUP, and wait until that reload is over: published and its old generation
    retired, or refused."""
    text = gw.stderr()
    done = "reload refused" if refused else "retired"
    n = text.count(done)
    gw.signal(signal.SIGHUP)
    wait_for(lambda: gw.stderr().count(done) > n, 20, "the reload (%r in the log)" % done)


def main():
    args = parse_args()
    ctx = Context(args)
    pki = Pki(ctx.path("pki"))
    anon = pki.client_context()

    def gateway(server, probe=anon, name="tls", gateway_keys=None):
        m = base_manifest(server=server, gateway=gateway_keys)
        return TlsGateway(ctx, probe, manifest=m, name=name)

    def t_https_both_wires():
        with gateway(tls_server(pki)) as gw:
            check_eq(https_call(gw.port, anon), ECHO_HI, "stateless call over https")
            with TlsConn(gw.port, anon) as c:
                check_eq(c.sock.selected_alpn_protocol(), "http/1.1", "ALPN")
                check(c.sock.version() in ("TLSv1.2", "TLSv1.3"), "version %s" % c.sock.version())
                # the legacy wire, on one kept-alive connection
                init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                   "clientInfo": {"name": "t", "version": "1"}}}
                hdr = [("Content-Type", "application/json"),
                       ("Accept", "application/json, text/event-stream")]
                c.send(build_request(gw.port, headers=hdr, body=json.dumps(init)))
                r = c.read_response()
                check_eq(r.status, 200, "legacy initialize over https")
                sid = r.header("mcp-session-id")
                check(sid, "a session id")
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"message": "hi"}}}
                c.send(build_request(gw.port, headers=hdr + [("Mcp-Session-Id", sid),
                                                            ("MCP-Protocol-Version", "2025-11-25")],
                                     body=json.dumps(call)))
                r = c.read_response()
                check_eq(r.status, 200, "legacy call over https")
                check_eq(r.rpc()["result"]["content"][0]["text"], "Echo: hi", "legacy answer")
            # a client that asks only for h2: no ALPN, and HTTP/1.1 still serves it
            h2_only = pki.client_context(alpn=("h2",))
            with TlsConn(gw.port, h2_only) as c:
                check_eq(c.sock.selected_alpn_protocol(), None, "no ALPN for an h2-only client")
                c.send(build_request(gw.port, "GET", "/healthz"))
                check_eq(c.read_response().status, 200, "HTTP/1.1 after no ALPN")
            # one that speaks HTTP/2 anyway is refused cleanly: an HTTP/1.1 error
            # (as on clear text), then close
            with TlsConn(gw.port, h2_only) as c:
                c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                st = c.read_response().status
                check(st in (400, 505), "an HTTP/2 preface is refused (%d)" % st)
                check(c.closed_by_peer(), "closed after the refusal")
            # plain HTTP on the TLS port is not served
            with Conn(gw.port) as c:
                c.send(build_request(gw.port, "GET", "/healthz"))
                try:
                    c.read_response()
                    fail("clear text was answered on a TLS listener")
                except (ConnectionClosed, ConnectionResetError):
                    pass

    def t_min_version_13():
        with gateway(tls_server(pki, tls_min_version="1.3")) as gw:
            with TlsConn(gw.port, anon) as c:
                check_eq(c.sock.version(), "TLSv1.3", "negotiated version")
            v12 = pki.client_context()
            v12.maximum_version = ssl.TLSVersion.TLSv1_2
            check(refused(gw.port, v12) is not None, "a TLS 1.2-only client is refused")

    def t_check_and_start_refuse_bad_files():
        missing = ctx.path("nowhere.pem")
        garbage = ctx.path("garbage.pem")
        with open(garbage, "w") as f:
            f.write("not PEM\n")
        cases = [
            (tls_server(pki, tls_cert_file=missing), "tls_cert_file", missing),
            (tls_server(pki, tls_key_file=missing), "tls_key_file", missing),
            (tls_server(pki, tls_cert_file=garbage), "tls_cert_file", garbage),
            (tls_server(pki, tls_key_file=pki.path("alice", "key")), "tls_key_file",
             pki.path("alice", "key")),
            (tls_server(pki, tls_client_ca_file=garbage, tls_client_auth="required"),
             "tls_client_ca_file", garbage),
        ]
        for server, key, path in cases:
            mpath = ctx.write_manifest(base_manifest(server=server))
            rc, out, err = run_cli(ctx, ["--check", "--config", mpath])
            check_eq(rc, 2, "--check exit for a bad %s" % key)
            want = "gateway.server.%s" % key
            check(want in err and path in err, "--check names %s and %s:\n%s" % (want, path, err))
            rc, out, err = run_cli(ctx, ["--config", mpath, "--listen", "127.0.0.1:0"])
            check(rc != 0 and path in err, "a start with a bad %s is refused naming %s (rc %d):\n%s"
                  % (key, path, rc, err))
        for server, key in [({"tls_cert_file": pki.path("server", "pem")}, "tls_key_file"),
                            (tls_server(pki, tls_client_auth="optional"), "tls_client_auth"),
                            ({"tls_client_ca_file": pki.path("ca", "pem")}, "tls_client_ca_file"),
                            ({"oauth_protected_resource": {"authorization_servers": []}},
                             "oauth_protected_resource"),
                            ({"oauth_protected_resource": {"resource": "https://localhost/mcp"}},
                             "oauth_protected_resource.authorization_servers"),
                            ({"oauth_protected_resource": {"resource": "https://localhost/mcp",
                                                           "authorization_servers": []}},
                             "oauth_protected_resource.authorization_servers")]:
            mpath = ctx.write_manifest(base_manifest(server=server))
            rc, out, err = run_cli(ctx, ["--check", "--config", mpath])
            check(rc == 2 and "gateway.server.%s" % key in err,
                  "--check names gateway.server.%s (rc %d):\n%s" % (key, rc, err))

    def t_mtls_optional():
        server = tls_server(pki, tls_client_ca_file=pki.path("ca", "pem"),
                            tls_client_auth="optional")
        with gateway(server) as gw:
            check_eq(https_call(gw.port, anon), ECHO_HI, "no client certificate: served")
            check_eq(https_call(gw.port, pki.client_context("alice")), ECHO_HI,
                     "a certificate from the CA: served")
            e = refused(gw.port, pki.client_context("mallory"))
            check(e is not None, "a certificate from another CA is refused")
            check_eq(https_call(gw.port, anon), ECHO_HI, "still serving after a refusal")

    def t_mtls_required():
        server = tls_server(pki, tls_client_ca_file=pki.path("ca", "pem"),
                            tls_client_auth="required")
        alice = pki.client_context("alice")
        with gateway(server, probe=alice) as gw:
            check_eq(https_call(gw.port, alice), ECHO_HI, "a certificate from the CA: served")
            check(refused(gw.port, anon) is not None, "no certificate: refused")
            check(refused(gw.port, pki.client_context("mallory")) is not None,
                  "a certificate from another CA: refused")
            check_eq(https_call(gw.port, alice), ECHO_HI, "still serving after refusals")

    def t_stalled_handshakes_do_not_delay_others():
        half = client_hello_half()
        # metrics_prometheus: mcpg_http_connections says what the loop has accepted
        # and closed, so the test waits on it instead of sleeping
        m = base_manifest(server=tls_server(pki), gateway={"workers": 1})
        m["modules"].append({"name": "prom", "module": "metrics_prometheus"})
        scrapes = [0]

        def connections(port):
            """mcpg_http_connections, the scrape's own connection included."""
            scrapes[0] += 1
            with TlsConn(port, anon) as c:
                c.send(build_request(port, "GET", "/metrics", headers=[("Connection", "close")]))
                r = c.read_response()
            check_eq(r.status, 200, "GET /metrics (%r)" % r.body[:200])
            mt = re.search(r"(?m)^mcpg_http_connections (\S+)$", r.body.decode())
            check(mt, "mcpg_http_connections in /metrics")
            return float(mt.group(1))

        def lines(gw, path=None):
            """Access lines but the health probes' and the scrapes' (or only path's)."""
            if path:
                return [ln for ln in access_lines(gw) if '"path":"%s"' % path in ln]
            return [ln for ln in access_lines(gw) if '"path":"/metrics"' not in ln]

        with TlsGateway(ctx, anon, manifest=m, name="tls-stalled") as gw:
            n_before = len(lines(gw))
            stalled = []
            try:
                for i in range(50):
                    s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
                    if i % 2:
                        s.sendall(half)  # half a ClientHello, then silence
                    stalled.append(s)
                # the loop has accepted them all (and the scrape's own connection)
                wait_for(lambda: connections(gw.port) >= 51, 20,
                         "the loop to accept the 50 stalled connections")
                t0 = time.monotonic()
                check_eq(https_call(gw.port, anon), ECHO_HI, "a call beside 50 stalled handshakes")
                took = time.monotonic() - t0
                sys.stdout.write("    https call beside 50 stalled handshakes: %.1f ms\n"
                                 % (took * 1000))
                # held behind them, it would wait for their handshake timeout (10 s by
                # default): milliseconds and 10 s are what this tells apart
                check(took < 8.0, "the call took %.2f s beside stalled handshakes" % took)
            finally:
                for s in stalled:
                    s.close()
            # one access line (besides health probes and scrapes): the call's; a
            # handshake is not a request. Once the loop has closed them all (only the
            # scrape's connection open), a line it wrote for them precedes that
            # scrape's own line (one loop, lines written in order).
            wait_for(lambda: connections(gw.port) <= 1, 20, "the loop to close the stalled connections")
            wait_for(lambda: len(lines(gw, "/metrics")) >= scrapes[0], 10, "the last scrape's access line")
            check_eq(len(lines(gw)) - n_before, 1, "access lines (handshakes are no requests)")

    def t_handshake_timeout():
        half = client_hello_half()
        with gateway(tls_server(pki, tls_handshake_timeout_ms=400)) as gw:
            for what, first in (("silent", b""), ("half a ClientHello", half)):
                # the deadline counts from the server's accept: the clock starts before
                # the connect, so what is measured is never shorter than the timeout
                t0 = time.monotonic()
                s = socket.create_connection(("127.0.0.1", gw.port), timeout=20)
                try:
                    if first:
                        s.sendall(first)
                    try:
                        data = s.recv(4096)
                    except ConnectionResetError:
                        data = b""
                    took = time.monotonic() - t0
                finally:
                    s.close()
                check_eq(data, b"", "%s: closed without an answer" % what)
                # not before the 0.4 s (0.1 s for the loop's cached clock); and by it,
                # not by the default 10 s
                check(0.3 <= took < 8.0, "%s: closed after %.2f s (timeout 0.4 s)" % (what, took))
            # a handshake done in time is not cut by the timeout: a kept connection
            # idle past it is still served
            with TlsConn(gw.port, anon) as c:
                time.sleep(0.8)
                c.send(build_request(gw.port, "GET", "/healthz"))
                check_eq(c.read_response().status, 200, "served after the handshake timeout")

    def t_well_known():
        doc = {"resource": "https://localhost/mcp",
               "authorization_servers": ["https://auth.example"],
               "bearer_methods_supported": ["header"]}
        with gateway(tls_server(pki, oauth_protected_resource=doc)) as gw:
            for path in ("/.well-known/oauth-protected-resource",
                         "/.well-known/oauth-protected-resource/mcp"):
                with TlsConn(gw.port, anon) as c:
                    c.send(build_request(gw.port, "GET", path))
                    r = c.read_response()
                    check_eq(r.status, 200, path)
                    check_eq(r.content_type(), "application/json", path + " content type")
                    check_eq(json.loads(r.body), doc, path + " body")
                    c.send(build_request(gw.port, "POST", path, body=b"{}"))
                    check_eq(c.read_response().status, 405, "POST " + path)
        m = base_manifest()
        with Gateway(ctx, manifest=m, name="plain") as gw:
            with Conn(gw.port) as c:
                c.send(build_request(gw.port, "GET", "/.well-known/oauth-protected-resource"))
                check_eq(c.read_response().status, 404, "unset: 404")

    def t_unauthenticated_is_http_401_on_both_wires():
        # fx_identity (a kernel test fixture) takes x-test-user and passes a call
        # without it: the kernel refuses that anonymous call with 401. The answer
        # is an HTTP 401 on both wires, the legacy one included (not a 200 stream).
        m = base_manifest(server=tls_server(pki))
        m["modules"].append({"name": "who", "module": "fx_identity"})
        m["pipeline"]["identity"] = ["who"]
        with_fixtures(ctx, m)
        with TlsGateway(ctx, anon, manifest=m, name="ident") as gw:
            with TlsConn(gw.port, anon) as c:
                c.send(build_request(gw.port, headers=stateless_headers("tools/call", "echo"),
                                     body=rpc_body("tools/call", {"name": "echo",
                                                                 "arguments": {"message": "hi"}})))
                r = c.read_response()
                check_eq(r.status, 401, "stateless anonymous call")
                check_eq(r.content_type(), "application/json", "stateless 401 body")
                hdr = [("Content-Type", "application/json"),
                       ("Accept", "application/json, text/event-stream")]
                init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                   "clientInfo": {"name": "t", "version": "1"}}}
                c.send(build_request(gw.port, headers=hdr, body=json.dumps(init)))
                r = c.read_response()
                check_eq(r.status, 401, "legacy anonymous initialize: an HTTP 401 (%r)" % r.body[:200])
                check(not r.header("mcp-session-id"), "no session for an anonymous caller")
                c.send(build_request(gw.port, headers=hdr + [("x-test-user", "alice")],
                                     body=json.dumps(init)))
                r = c.read_response()
                sid = r.header("mcp-session-id")
                check(sid, "alice's session: %r" % r)
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"message": "hi"}}}
                legacy_hdr = hdr + [("Mcp-Session-Id", sid), ("MCP-Protocol-Version", "2025-11-25")]
                c.send(build_request(gw.port, headers=legacy_hdr, body=json.dumps(call)))
                r = c.read_response()
                check_eq(r.status, 401, "legacy anonymous call: an HTTP 401 (%r)" % r.body[:200])
                check_eq(r.content_type(), "application/json", "legacy 401 body")
                check_eq(r.rpc()["id"], 2, "legacy 401 id")
                c.send(build_request(gw.port, headers=legacy_hdr + [("x-test-user", "alice")],
                                     body=json.dumps(call)))
                r = c.read_response()
                check_eq(r.status, 200, "legacy call with an identity")

    def t_mcpg_load_over_https():
        # the benchmarks' load generator speaks TLS too (bench/tls.sh, security.sh)
        load = os.path.join(os.path.dirname(args.bin), "mcpg-load")
        if not os.access(load, os.X_OK):
            raise Skip("no %s" % load)
        with gateway(tls_server(pki)) as gw:
            for wire in ("stateless", "legacy"):
                p = subprocess.run([load, "--url", "https://127.0.0.1:%d/mcp" % gw.port,
                                    "--ca-file", pki.path("ca", "pem"), "--wire", wire, "-c", "4",
                                    "-w", "0", "--max-calls", "200", "--expect", "Echo: hello", "-q"],
                                   capture_output=True, text=True, timeout=60)
                check(p.returncode == 0, "mcpg-load over https (%s): rc %d\n%s"
                      % (wire, p.returncode, p.stderr))
            p = subprocess.run([load, "--url", "https://127.0.0.1:%d/mcp" % gw.port,
                                "--ca-file", pki.path("other", "pem"), "-c", "1", "-w", "0",
                                "--max-calls", "1", "-q"], capture_output=True, text=True,
                               timeout=60)
            check(p.returncode == 1 and "certificate" in p.stderr,
                  "mcpg-load refuses a certificate from another CA: rc %d\n%s"
                  % (p.returncode, p.stderr))

    def t_reload_certificates():
        d = ctx.path("reload")
        os.makedirs(d)
        cert, key = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
        shutil.copy(pki.path("server", "pem"), cert)
        shutil.copy(pki.path("server", "key"), key)
        with gateway({"tls_cert_file": cert, "tls_key_file": key}) as gw:
            check_eq(serial_of(gw.port, anon), 1001, "the first certificate's serial")
            kept = TlsConn(gw.port, anon)
            try:
                # a new key and certificate replace the files
                pki.leaf("server", "ca", "/CN=localhost", 2002,
                         "subjectAltName=DNS:localhost,IP:127.0.0.1\n", out="server2")
                shutil.copy(pki.path("server2", "pem"), cert)
                shutil.copy(pki.path("server2", "key"), key)
                reload(gw)
                check_eq(serial_of(gw.port, anon), 2002, "new connections' serial after SIGHUP")
                kept.send(build_request(gw.port, "GET", "/healthz"))
                check_eq(kept.read_response().status, 200, "a connection from before still served")
                check_eq(int(kept.sock.getpeercert()["serialNumber"], 16), 1001,
                         "it keeps the certificate it began with")
            finally:
                kept.close()
            # a bad file: logged with its name, the certificate before kept
            with open(cert, "w") as f:
                f.write("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n")
            n = gw.stderr().count(cert)
            reload(gw, refused=True)
            check(gw.stderr().count(cert) > n, "the bad file named in the log:\n" + gw.stderr_tail())
            check_eq(serial_of(gw.port, anon), 2002, "after a bad file the certificate before")
            check_eq(https_call(gw.port, anon), ECHO_HI, "serving on")

    tests = [
        ("https_both_wires", t_https_both_wires),
        ("min_version_13", t_min_version_13),
        ("check_and_start_refuse_bad_files", t_check_and_start_refuse_bad_files),
        ("mtls_optional", t_mtls_optional),
        ("mtls_required", t_mtls_required),
        ("stalled_handshakes_do_not_delay_others", t_stalled_handshakes_do_not_delay_others),
        ("handshake_timeout", t_handshake_timeout),
        ("well_known", t_well_known),
        ("unauthenticated_is_http_401_on_both_wires", t_unauthenticated_is_http_401_on_both_wires),
        ("mcpg_load_over_https", t_mcpg_load_over_https),
        ("reload_certificates", t_reload_certificates),
    ]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
