#!/usr/bin/python3
"""The connection cap per worker (gateway.server.max_connections_per_worker), with one
loop so every connection counts against the same cap:
  * with CAP connections open, each further one gets one fixed answer, 503 with
    Retry-After and Connection: close (JSON-RPC -32000), then the close; whether the
    client sent its request first, sent nothing, or sent it only after the answer was
    written;
  * the CAP connections open meanwhile are served on (a call on each, before and
    after the refusals);
  * once one of them closes, a new connection is served again, and the one after it
    is refused again (the cap holds, not a count that drifted);
  * the refusals are logged once, not once each (a flood must not fill the log);
  * over TLS a connection beyond the cap is closed without a byte (nothing can be said
    before a handshake), and the ones open are served on.
"""
import os
import select
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (IO_TIMEOUT, Conn, Context, Gateway, base_manifest, check,  # noqa: E402
                     check_eq, expect_result, parse_args, run_tests, tool_call_request,
                     wait_for)
from tlskit import Pki, TlsConn, TlsGateway  # noqa: E402

CAP = 8
TLS_CAP = 2
REFUSED_TRIES = 12
REFUSED_LOG_S = 10  # TH_REFUSED_LOG_MS: at most one "cap reached" warning this often


def main():
    args = parse_args()
    ctx = Context(args)

    def call_on(c, rpc_id):
        c.send(tool_call_request(c.port, "echo", {"message": "hi"}, id=rpc_id))
        r = c.read_response()
        res = expect_result(r, r.rpc(), rpc_id, "call %r" % rpc_id)
        check_eq(res["content"][0]["text"], "Echo: hi", "answer to %r" % rpc_id)

    def served(port, rpc_id, connect=Conn):
        """A new connection with one call served on it, or None if it was refused
        (a connection still closing counts against the cap until it is gone)."""
        try:
            c = connect(port)
        except OSError:  # a TLS handshake refused at the cap
            return None
        try:
            c.send(tool_call_request(port, "echo", {"message": "hi"}, id=rpc_id))
            r = c.read_response()
        except OSError:
            c.close()
            return None
        if r.status != 200:
            c.close()
            check_eq(r.status, 503, "a new connection near the cap")
            return None
        expect_result(r, r.rpc(), rpc_id, "a call below the cap")
        return c

    def refused(port, how, rpc_id):
        """One connection beyond the cap: its answer (a Response), having checked the
        server closes it after."""
        c = Conn(port)
        try:
            if how == "request first":
                c.send(tool_call_request(port, "echo", {"message": "hi"}, id=rpc_id),
                       ignore_reset=True)
            elif how == "request after":
                # the answer is written at the accept: send once it has arrived
                ready, _, _ = select.select([c.sock], [], [], IO_TIMEOUT)
                check(ready, "%s: the 503 arrives before any request" % how)
                c.send(tool_call_request(port, "echo", {"message": "hi"}, id=rpc_id),
                       ignore_reset=True)
            r = c.read_response()
            check(c.closed_by_peer(10), "%s: the connection is closed after the 503" % how)
            return r
        finally:
            c.close()

    def t_cap():
        m = base_manifest(gateway={"workers": 1},
                          server={"max_connections_per_worker": CAP, "access_log": False})
        gw = Gateway(ctx, manifest=m, name="cap")
        with gw:
            held = []
            t_first = time.monotonic()  # before any connection could be refused
            try:
                # the health check's connection may still be closing: it counts too
                for i in range(CAP):
                    held.append(wait_for(lambda: served(gw.port, "held-%d" % i), 15,
                                         "connection %d to be served" % i))
                shapes = ("request first", "nothing sent", "request after")
                for k in range(REFUSED_TRIES):
                    how = shapes[k % len(shapes)]
                    r = refused(gw.port, how, "over-%d" % k)
                    check_eq(r.status, 503, "%s: connection %d beyond the cap" % (how, CAP + 1))
                    check_eq(r.header("retry-after"), "1", "%s: Retry-After" % how)
                    check_eq((r.header("connection") or "").lower(), "close",
                             "%s: Connection" % how)
                    err = r.rpc()
                    check_eq(err.get("id"), None, "%s: id (the request is never read)" % how)
                    check_eq(err["error"]["code"], -32000, "%s: JSON-RPC code" % how)
                    check("max_connections_per_worker" in err["error"]["message"],
                          "%s: the message names the setting: %r" % (how, err))
                # the ones open are served on, on the same keep-alive connections
                for i, c in enumerate(held):
                    call_on(c, "held-again-%d" % i)
                # one leaves: a new connection is served (once the close is seen)
                held.pop().close()
                newc = wait_for(lambda: served(gw.port, "new"), 15,
                                "a new connection to be served below the cap")
                held.append(newc)
                r = refused(gw.port, "request first", "over-again")
                t_last = time.monotonic()  # after the last refusal
                check_eq(r.status, 503, "at the cap again: the next connection")
                for i, c in enumerate(held):
                    call_on(c, "held-last-%d" % i)
            finally:
                for c in held:
                    c.close()
            # the first refusal is logged, then at most one line per REFUSED_LOG_S: as
            # many as the refusals' span (observed here, not assumed) allows
            span = t_last - t_first
            warned = gw.stderr().count("max_connections_per_worker (%d) reached" % CAP)
            most = 1 + int(span // REFUSED_LOG_S)
            check(1 <= warned <= most, "%d warnings for %d refusals in %.1f s (at most %d)"
                  % (warned, REFUSED_TRIES + 1, span, most))
            print("cap %d: %d connections beyond it refused with 503 (%d warning(s) in %.1f s), "
                  "the %d open served on" % (CAP, REFUSED_TRIES + 1, warned, span, CAP))

    def t_cap_tls():
        pki = Pki(ctx.path("pki"), clients=False)
        client = pki.client_context()
        m = base_manifest(gateway={"workers": 1},
                          server={"max_connections_per_worker": TLS_CAP, "access_log": False,
                                  "tls_cert_file": pki.path("server", "pem"),
                                  "tls_key_file": pki.path("server", "key")})
        gw = TlsGateway(ctx, client, manifest=m, name="captls")
        with gw:
            def tls(port):
                return TlsConn(port, client)
            held = []
            try:
                for i in range(TLS_CAP):
                    held.append(wait_for(lambda: served(gw.port, "tls-%d" % i, tls), 15,
                                         "TLS connection %d to be served" % i))
                for k in range(3):
                    with Conn(gw.port) as raw:  # no byte can be said before a handshake
                        check(raw.closed_by_peer(10), "a connection beyond the cap over TLS "
                              "is closed without a byte")
                for i, c in enumerate(held):
                    call_on(c, "tls-again-%d" % i)
            finally:
                for c in held:
                    c.close()

    return run_tests([("max_connections_per_worker: 503 beyond, served below", t_cap),
                      ("over TLS: closed without a byte beyond, served below", t_cap_tls)], ctx)


if __name__ == "__main__":
    sys.exit(main())
