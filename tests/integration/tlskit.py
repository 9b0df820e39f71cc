"""TLS helpers for the integration tests (Python 3 standard library and the openssl
command): Pki makes a CA, a second CA, a server certificate and client certificates
in a folder; TlsConn is gateway.Conn over TLS; TlsGateway probes its health over
https. Used by test_tls.py and tests/clients/run_clients.py --tls."""
import os
import socket
import ssl
import subprocess

from gateway import (IO_TIMEOUT, Conn, ConnectionClosed, Gateway, build_request,
                     check)

# ---------------------------------------------------------------------------
# certificates, made by the openssl command


def openssl(*args):
    p = subprocess.run(["openssl"] + list(args), capture_output=True, text=True)
    check(p.returncode == 0, "openssl %s failed: %s" % (" ".join(args), p.stderr))


def _der_header(der, i):
    """(header bytes, content bytes) of the DER element at i."""
    first = der[i + 1]
    if first < 0x80:
        return 2, first
    k = first & 0x7F
    return 2 + k, int.from_bytes(der[i + 2:i + 2 + k], "big")


def _der_length(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


class Pki:
    """Keys and certificates in d (made): ca, server (localhost, 127.0.0.1, ::1),
    and unless clients=False: other (a second CA), alice (a client of ca, with every
    SAN type), mallory (a client of other)."""

    def __init__(self, d, clients=True):
        self.d = d
        os.makedirs(d, exist_ok=True)
        self.ca("ca", "/CN=mcpg test CA")
        self.leaf("server", "ca", "/CN=localhost", 1001,
                  "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n"
                  "extendedKeyUsage=serverAuth\n")
        if not clients:
            return
        self.ca("other", "/CN=another CA")
        self.leaf("alice", "ca", "/CN=alice/O=Acme", 3001,
                  "subjectAltName=DNS:alice.example,URI:spiffe://test/alice,"
                  "email:alice@example.com,IP:10.0.0.1\nextendedKeyUsage=clientAuth\n")
        self.leaf("mallory", "other", "/CN=mallory", 4001, "extendedKeyUsage=clientAuth\n")

    def path(self, name, ext):
        return os.path.join(self.d, "%s.%s" % (name, ext))

    def ca(self, name, subject):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", self.path(name, "key"), "-out", self.path(name, "pem"),
                "-days", "2", "-subj", subject)

    def leaf(self, name, ca, subject, serial, ext, out=None):
        """A key and a certificate signed by ca; out: a file stem other than name."""
        stem = out or name
        ext_file = self.path(stem, "ext")
        with open(ext_file, "w") as f:
            f.write(ext)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", self.path(stem, "key"), "-out", self.path(stem, "csr"),
                "-subj", subject)
        openssl("x509", "-req", "-in", self.path(stem, "csr"), "-CA", self.path(ca, "pem"),
                "-CAkey", self.path(ca, "key"), "-set_serial", str(serial), "-days", "2",
                "-extfile", ext_file, "-out", self.path(stem, "pem"))

    def leaf_patched(self, name, ca, subject, serial, ext, old, new):
        """leaf(), then the bytes old replaced by new (as long) in the signed part and
        the certificate signed again by ca: a certificate no openssl command would
        make, such as one whose CN or SAN holds a NUL ("alice\\0.evil")."""
        check(len(old) == len(new), "a patch keeps every DER length: %r, %r" % (old, new))
        self.leaf(name, ca, subject, serial, ext)
        with open(self.path(name, "pem")) as f:
            der = ssl.PEM_cert_to_DER_cert(f.read())
        at, _ = _der_header(der, 0)  # Certificate ::= SEQUENCE { tbs, sigAlg, sig }
        h, n = _der_header(der, at)
        tbs = der[at:at + h + n]
        h2, n2 = _der_header(der, at + h + n)
        sig_alg = der[at + h + n:at + h + n + h2 + n2]
        check(tbs.count(old) >= 1, "%r is in the certificate %s" % (old, name))
        tbs = tbs.replace(old, new)
        tbs_file, sig_file = self.path(name, "tbs"), self.path(name, "sig")
        with open(tbs_file, "wb") as f:
            f.write(tbs)
        openssl("dgst", "-sha256", "-sign", self.path(ca, "key"), "-out", sig_file, tbs_file)
        with open(sig_file, "rb") as f:
            sig = f.read()
        body = tbs + sig_alg + b"\x03" + _der_length(len(sig) + 1) + b"\x00" + sig
        with open(self.path(name, "pem"), "w") as f:
            f.write(ssl.DER_cert_to_PEM_cert(b"\x30" + _der_length(len(body)) + body))
        openssl("verify", "-CAfile", self.path(ca, "pem"), self.path(name, "pem"))

    def client_context(self, cert=None, alpn=("http/1.1",), min13=False):
        ctx = ssl.create_default_context(cafile=self.path("ca", "pem"))
        if cert:
            ctx.load_cert_chain(self.path(cert, "pem"), self.path(cert, "key"))
        if alpn:
            ctx.set_alpn_protocols(list(alpn))
        if min13:
            ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        return ctx


# ---------------------------------------------------------------------------
# https clients and a gateway that is probed over https


class TlsConn(Conn):
    """Conn over TLS: the handshake done on connect (server name localhost)."""

    def __init__(self, port, ctx, timeout=IO_TIMEOUT):
        self.port = port
        self.buf = b""
        self.eof = False
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        try:
            self.sock = ctx.wrap_socket(raw, server_hostname="localhost")
        except Exception:
            raw.close()
            raise

    def _fill(self):
        try:
            Conn._fill(self)
        except ssl.SSLZeroReturnError:
            self.eof = True
            raise ConnectionClosed("close_notify from the server")


class TlsGateway(Gateway):
    """A gateway whose listener speaks TLS: health is asked over https."""

    def __init__(self, ctx, probe_ctx, **kw):
        Gateway.__init__(self, ctx, **kw)
        self.probe_ctx = probe_ctx

    def health_status(self):
        with TlsConn(self.port, self.probe_ctx, timeout=2) as c:
            c.send(build_request(self.port, "GET", "/healthz", headers=[("Connection", "close")]))
            return c.read_response().status
