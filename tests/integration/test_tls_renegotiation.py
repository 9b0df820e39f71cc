#!/usr/bin/python3
"""TLS 1.2 renegotiation asked for by a client is refused by transport_http
(SSL_OP_NO_RENEGOTIATION): `openssl s_client -tls1_2` completes its handshake, is
served a request, then sends its `R` command (SSL_renegotiate: a new ClientHello on
the open connection). The gateway answers with a no_renegotiation alert, which
s_client takes as fatal: it reports the failure and exits while its stdin is still
open (had the renegotiation gone through, it would wait on its stdin). Meanwhile a
kept-alive https connection opened before goes on being served, and so does a new one.

A renegotiation is a full handshake's public-key work paid by the server for a few
bytes from the client, on a connection already past the listener's limits: a CPU
lever, and no HTTP/1.1 client needs it. Upstream connections refuse the server-side
form (a HelloRequest from an upstream) in lib/upclient (test lib.upclient.reneg)."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Skip, base_manifest, build_request, check, check_eq,  # noqa: E402
                     fail, parse_args, run_tests, wait_for)
from tlskit import Pki, TlsConn, TlsGateway  # noqa: E402

GUARD_S = 20  # only a broken run waits this long: each wait ends on its condition


def main():
    ctx = Context(parse_args())
    pki = Pki(ctx.path("pki"), clients=False)
    server = {"tls_cert_file": pki.path("server", "pem"),
              "tls_key_file": pki.path("server", "key")}
    probe = pki.client_context()

    def healthz(c, what):
        c.send(build_request(c.port, "GET", "/healthz"))
        check_eq(c.read_response().status, 200, what)

    def read(path):
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def t_client_renegotiation_refused():
        openssl = shutil.which("openssl")
        if not openssl:
            raise Skip("no openssl command (scripts/install-deps.sh installs it)")
        with TlsGateway(ctx, probe, manifest=base_manifest(server=server), name="reneg") as gw:
            with TlsConn(gw.port, probe) as before:
                healthz(before, "a connection opened before")
                out_path, err_path = ctx.path("s_client.out"), ctx.path("s_client.err")
                with open(out_path, "wb") as out, open(err_path, "wb") as err:
                    p = subprocess.Popen(
                        [openssl, "s_client", "-tls1_2", "-connect", "127.0.0.1:%d" % gw.port,
                         "-servername", "localhost", "-CAfile", pki.path("ca", "pem")],
                        stdin=subprocess.PIPE, stdout=out, stderr=err)
                try:
                    wait_for(lambda: "Verify return code: 0" in read(out_path) or
                             p.poll() is not None, GUARD_S, "s_client's TLS 1.2 handshake")
                    check("Protocol  : TLSv1.2" in read(out_path) or
                          "TLSv1.2" in read(out_path),
                          "TLS 1.2 was negotiated:\n%s" % read(out_path)[-2000:])
                    check(p.poll() is None, "s_client is connected: %s" % read(err_path))
                    # a request on it first: the connection is a served one
                    p.stdin.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    p.stdin.flush()
                    wait_for(lambda: "HTTP/1.1 200" in read(out_path), GUARD_S,
                             "the answer on s_client's connection")
                    p.stdin.write(b"R\n")  # s_client: renegotiate (SSL_renegotiate)
                    p.stdin.flush()
                    # stdin stays open: only the connection's end makes s_client exit
                    try:
                        p.wait(timeout=GUARD_S)
                    except subprocess.TimeoutExpired:
                        fail("s_client still connected %d s after its renegotiation (was it "
                             "accepted?)\nstderr: %s" % (GUARD_S, read(err_path)[-1500:]))
                finally:
                    if p.poll() is None:
                        p.kill()
                    p.wait()
                    p.stdin.close()
                text = read(err_path) + read(out_path)
                print("s_client said:\n" + read(err_path)[-600:])
                check("RENEGOTIATING" in text, "s_client asked to renegotiate:\n%s" % text)
                check("no renegotiation" in text,
                      "the gateway refused it (a no_renegotiation alert):\n%s" % text)
                check("Verify return code" in text and text.count("SSL handshake has read") == 1,
                      "one handshake only:\n%s" % text)
                healthz(before, "the connection opened before, after the refused renegotiation")
            with TlsConn(gw.port, probe) as after:
                healthz(after, "a new connection after the refused renegotiation")
            check(gw.proc.poll() is None, "the gateway is still up")

    return run_tests([("TLS 1.2 client-initiated renegotiation is refused",
                       t_client_renegotiation_refused)], ctx)


if __name__ == "__main__":
    sys.exit(main())
