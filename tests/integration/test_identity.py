#!/usr/bin/python3
"""Identity end to end: identity_apikey (and identity_mtls when the transport
serves TLS) in the real gateway.

Keys are made by scripts/mcpg-apikey (--json --add), so the script is tested too.
  * a good key in X-API-Key and in Authorization: Bearer -> 200, the audit file
    names the principal and tenant; tools/list too;
  * a wrong key -> 401, JSON-RPC -32600 (REFUSED_2026), WWW-Authenticate 'Bearer realm="mcpg",
    error="invalid_token"'; the key is in no answer, no log line, no audit line;
  * no key -> the kernel refuses the anonymous call (401 -32600, with the
    challenge identity_apikey set), unless gateway.anonymous is true;
  * the keys file edited + SIGHUP -> the removed key is refused, the new one
    accepted; a broken file + SIGHUP -> logged with the file, old keys kept;
  * mcpg --check names the keys file, the entry and the field;
  * a chain: a JWT-shaped Bearer token is passed on by the first instance and
    taken by the next (a second identity_apikey with skip_jwt_shaped off), and
    with identity_jwt after it: a signed token is verified there, an API key in
    the same header is taken first, a wrong key is refused before it;
  * mTLS (when transport_http has tls_cert_file): a client certificate signed
    by the test's CA -> its URI SAN is the principal, mapped to a tenant; none
    -> the anonymous 401; another CA's -> refused in the handshake.
"""
import hashlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (REFUSED_2026, Context, Gateway, Skip, base_manifest, build_request, check,  # noqa: E402
                     check_eq, expect_error, expect_result, fail, parse_args, read_audit,
                     rpc_body, run_cli, run_tests, send_one, stateless_headers,
                     stateless_request, wait_for)

CHALLENGE_INVALID = 'Bearer realm="mcpg", error="invalid_token"'
CHALLENGE_ANONYMOUS = 'Bearer realm="mcpg"'
JWT = "eyJhbGciOiJFUzI1NiIsImtpZCI6InQxIn0.eyJzdWIiOiJ0b2tlbi11c2VyIn0.c2lnbmF0dXJlLW5vdC1jaGVja2Vk"
WRONG_KEY = "mcpg_wrong-key-that-must-never-be-echoed-anywhere-0"


def main():
    args = parse_args()
    ctx = Context(args)
    script = os.path.join(ctx.source, "scripts", "mcpg-apikey")
    keys_file = ctx.path("keys.json")
    audit = ctx.path("audit.jsonl")
    used_keys = [WRONG_KEY]

    def new_key(principal, *extra, path=keys_file):
        out = subprocess.run([sys.executable, script, principal, "--json", "--add", path]
                             + list(extra), check=True, capture_output=True, text=True).stdout
        made = json.loads(out)
        check(made["key"].startswith("mcpg_") and len(made["key"]) == 48,
              "a new key is mcpg_ and 43 characters: %r" % made["key"])
        used_keys.append(made["key"])
        return made["key"], made["entry"]

    alice, _ = new_key("alice", "--tenant", "acme", "--role", "reader", "--role", "writer")
    bob, _ = new_key("bob")
    with open(keys_file) as f:
        text = f.read()
    check(alice not in text and bob not in text, "the keys file holds no key")
    check_eq(os.stat(keys_file).st_mode & 0o777, 0o600, "keys file mode")

    def manifest(anonymous=False, identity=None, extra_modules=()):
        m = base_manifest(audit_path=audit, gateway={"anonymous": anonymous} if anonymous else None)
        m["modules"].append({"name": "keys", "module": "identity_apikey",
                             "config": {"keys_file": keys_file}})
        m["modules"].extend(extra_modules)
        m["pipeline"]["identity"] = identity or ["keys"]
        return m

    def call(port, headers=(), tool="echo", id=1, method="tools/call"):
        if method == "tools/call":
            body = rpc_body("tools/call", {"name": tool, "arguments": {"message": "hi"}}, id=id)
            h = stateless_headers("tools/call", tool)
        else:
            body = rpc_body(method, {}, id=id)
            h = stateless_headers(method)
        return send_one(port, build_request(port, headers=h + list(headers), body=body))

    def completed_for(rpc_id):
        return [r for r in read_audit(audit)
                if r.get("event") == "mcpg.tool.call.completed" and r.get("id") == rpc_id]

    def expect_principal(r, rpc_id, principal, tenant, what):
        expect_result(r, r.rpc(), rpc_id, what)
        rec = wait_for(lambda: completed_for(rpc_id), 5, "the completed audit line of %s" % what)[0]
        check_eq(rec.get("principal"), principal, what + ": audited principal")
        check_eq(rec.get("tenant"), tenant, what + ": audited tenant")

    def transport_has_tls():
        rc, out, err = run_cli(ctx, ["--help-module", "transport_http"])
        return rc == 0 and "tls_cert_file" in out

    def expect_challenge(r, expected, what):
        got = r.header("www-authenticate")
        if got is None and not transport_has_tls():
            # transport_http passes the outcome's challenge on with the TLS work.
            raise Skip("%s: this transport_http sends no WWW-Authenticate yet" % what)
        check_eq(got, expected, what + ": WWW-Authenticate")

    def expect_refused(r, what, key):
        err = expect_error(r, 401, REFUSED_2026, what, id=r.rpc().get("id"))
        check(key.encode() not in r.body, "%s: the answer echoes the key: %r" % (what, r.body))
        check("invalid API key" in err["message"], "%s: message %r" % (what, err["message"]))
        return err

    gw = Gateway(ctx, manifest=manifest(), name="keys").start()
    p = gw.port

    def t_x_api_key():
        expect_principal(call(p, [("X-API-Key", alice)], id=11), 11, "alice", "acme",
                         "X-API-Key alice")

    def t_bearer():
        expect_principal(call(p, [("Authorization", "Bearer " + bob)], id=12), 12, "bob", None,
                         "Bearer bob")

    def t_list():
        r = call(p, [("X-API-Key", bob)], id=13, method="tools/list")
        check("echo" in json.dumps(expect_result(r, r.rpc(), 13, "tools/list with a key")),
              "tools/list lists echo")
        r = call(p, id=14, method="tools/list")
        expect_error(r, 401, REFUSED_2026, "tools/list without a key", id=14)

    def t_wrong_key():
        r = call(p, [("X-API-Key", WRONG_KEY)], id=21)
        expect_refused(r, "wrong X-API-Key", WRONG_KEY)
        r = call(p, [("Authorization", "Bearer " + WRONG_KEY)], id=22)
        expect_refused(r, "wrong Bearer", WRONG_KEY)
        # a wrong X-API-Key is not rescued by a good Bearer
        r = call(p, [("X-API-Key", WRONG_KEY), ("Authorization", "Bearer " + alice)], id=23)
        expect_refused(r, "wrong X-API-Key beside a good Bearer", WRONG_KEY)
        denied = wait_for(lambda: [x for x in read_audit(audit) if x.get("id") == 21
                                   and x.get("event") == "mcpg.tool.call.denied"], 5,
                          "the denied audit line")
        check(not denied[0].get("principal"), "no principal on the denial: %r" % denied[0])
        expect_challenge(r, CHALLENGE_INVALID, "wrong key")

    def t_no_key():
        r = call(p, id=31)
        err = expect_error(r, 401, REFUSED_2026, "no key: anonymous refused", id=31)
        check("invalid API key" not in err["message"], "the kernel's refusal, not the "
              "module's: %r" % err["message"])
        r = call(p, [("Authorization", "Basic YWxpY2U6cHc=")], id=32)
        expect_error(r, 401, REFUSED_2026, "Basic credentials: not a key, anonymous refused", id=32)
        expect_challenge(r, CHALLENGE_ANONYMOUS, "anonymous refusal")

    def rewrite_keys(entries):
        tmp = keys_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(entries, f)
        os.chmod(tmp, 0o600)
        os.replace(tmp, keys_file)

    def reloads_done():
        """Reloads that have ended: published and the old generation retired, or refused."""
        err = gw.stderr()
        return err.count(" retired ") + err.count("reload refused (")

    def sighup():
        """SIGHUP once the previous reload has ended (one sent while another runs is
        skipped); returns when this one has ended too."""
        err = gw.stderr()
        started = err.count("SIGHUP: reloading")
        wait_for(lambda: reloads_done() >= started, 10, "the previous reload to end")
        gw.signal(signal.SIGHUP)
        wait_for(lambda: reloads_done() > started, 10, "the reload to end")

    def accepted(key, rpc_id):
        r = call(p, [("X-API-Key", key)], id=rpc_id)
        return r.status == 200 and "result" in r.rpc()

    def t_reload():
        with open(keys_file) as f:
            entries = json.load(f)
        carol, carol_entry = new_key("carol", "--tenant", "beta", path=ctx.path("scratch.json"))
        rotated = [e for e in entries if e["principal"] != "alice"] + [carol_entry]
        rewrite_keys(rotated)
        check(accepted(alice, 41), "alice is accepted until the reload")
        check(not accepted(carol, 42), "carol is refused until the reload")
        sighup()
        check("keys.json reloaded: 2 key(s) (was 2)" in gw.stderr(),
              "the carried instance re-read its file:\n%s" % gw.stderr_tail())
        expect_refused(call(p, [("X-API-Key", alice)], id=44), "alice after the reload", alice)
        expect_principal(call(p, [("X-API-Key", carol)], id=45), 45, "carol", "beta",
                         "carol after the reload")
        # A broken file: validate() reads it too, so the reload is refused naming
        # the file, entry and field, and the generation serves on with its keys.
        try:
            with open(keys_file, "w") as f:
                f.write('[{"sha256": "00", "principal": "x"}]')
            sighup()
            want = "%s: [0].sha256: must be the key's SHA-256" % keys_file
            check(want in gw.stderr(), "the refusal names the file, entry and field: %r\n%s"
                  % (want, gw.stderr_tail()))
            check(accepted(carol, 46) and accepted(bob, 47), "the old table serves on")
        finally:
            rewrite_keys(rotated)
        sighup()
        check(accepted(carol, 48), "a good file again")

    def t_check():
        bad = ctx.path("bad-keys.json")
        with open(bad, "w") as f:
            f.write('[{"sha256": "%s", "principal": "a", "roles": ["x,y"]}]' % ("ab" * 32))
        m = manifest()
        m["modules"][2]["config"]["keys_file"] = bad
        path = ctx.write_manifest(m, "bad-keys-manifest.json")
        rc, out, err = run_cli(ctx, ["--check", "--config", path])
        check_eq(rc, 2, "--check with a bad keys file: exit code (%s)" % err)
        want = "modules[2].config.keys_file: %s: [0].roles[0]: must not hold a comma" % bad
        check(want in err, "--check names key, file, entry and field: want %r in %r" % (want, err))
        m["modules"][2]["config"]["keys_file"] = ctx.path("missing.json")
        path = ctx.write_manifest(m, "missing-keys-manifest.json")
        rc, out, err = run_cli(ctx, ["--check", "--config", path])
        check(rc == 2 and "missing.json: cannot open" in err, "--check of a missing file: %r" % err)

    def t_anonymous_allowed():
        with Gateway(ctx, manifest=manifest(anonymous=True), name="anon") as ag:
            expect_principal(call(ag.port, id=51), 51, None, None, "anonymous allowed")
            expect_refused(call(ag.port, [("X-API-Key", WRONG_KEY)], id=52),
                           "a wrong key with anonymous allowed", WRONG_KEY)
            expect_principal(call(ag.port, [("X-API-Key", bob)], id=53), 53, "bob", None,
                             "a key with anonymous allowed")

    def t_chain_jwt_passed_on():
        token_keys = ctx.path("token-keys.json")
        with open(token_keys, "w") as f:
            json.dump([{"sha256": hashlib.sha256(JWT.encode()).hexdigest(),
                        "principal": "token-user", "tenant": "tokens"}], f)
        second = {"name": "tokens", "module": "identity_apikey",
                  "config": {"keys_file": token_keys, "headers": "authorization",
                             "skip_jwt_shaped": False}}
        with Gateway(ctx, manifest=manifest(identity=["keys", "tokens"],
                                            extra_modules=[second]), name="chain") as cg:
            expect_principal(call(cg.port, [("Authorization", "Bearer " + JWT)], id=61), 61,
                             "token-user", "tokens", "a JWT-shaped token passed on")
            expect_principal(call(cg.port, [("X-API-Key", bob)], id=62), 62, "bob", None,
                             "the first instance still takes its keys")
            expect_refused(call(cg.port, [("Authorization", "Bearer " + WRONG_KEY)], id=63),
                           "a wrong key stops the chain", WRONG_KEY)

    def t_chain_identity_jwt():
        mint = os.path.join(os.path.dirname(ctx.bin), "jwt_mint")
        pem = ctx.path("issuer-es256.pem")
        jwk = json.loads(subprocess.run([mint, "keygen", "ES256", pem, "k1"], check=True,
                                        capture_output=True, text=True).stdout)
        jwks = ctx.path("jwks.json")
        with open(jwks, "w") as f:
            json.dump({"keys": [jwk]}, f)
        iss, aud, now = "https://issuer.example", "https://gw.example/mcp", int(time.time())
        claims = {"iss": iss, "aud": aud, "sub": "jwt-alice", "org": "jwt-tenant",
                  "iat": now, "exp": now + 600}
        token = subprocess.run([mint, "token", "ES256", pem,
                                json.dumps({"alg": "ES256", "kid": "k1", "typ": "JWT"}),
                                json.dumps(claims)],
                               check=True, capture_output=True, text=True).stdout.strip()
        used_keys.append(token)
        jwt = {"name": "jwt", "module": "identity_jwt",
               "config": {"issuer": iss, "audience": aud, "jwks_file": jwks,
                          "tenant_claim": "org"}}
        with Gateway(ctx, manifest=manifest(identity=["keys", "jwt"], extra_modules=[jwt]),
                     name="apikey-jwt") as jg:
            expect_principal(call(jg.port, [("Authorization", "Bearer " + token)], id=65), 65,
                             "jwt-alice", "jwt-tenant", "a JWT passed on to identity_jwt")
            expect_principal(call(jg.port, [("Authorization", "Bearer " + bob)], id=66), 66,
                             "bob", None, "an API key in the same header, taken first")
            expect_refused(call(jg.port, [("Authorization", "Bearer " + WRONG_KEY)], id=67),
                           "a wrong key, refused before identity_jwt", WRONG_KEY)
            r = call(jg.port, id=68)
            expect_error(r, 401, REFUSED_2026, "no credentials: anonymous refused", id=68)
        check(token not in jg.stderr(), "the token in the gateway's log")

    def t_nothing_leaked():
        gw.stop()
        logs = gw.stderr()
        with open(audit, "rb") as f:
            trail = f.read().decode("utf-8", "replace")
        for k in used_keys:
            check(k not in logs, "a key in the gateway's log: %s" % k)
            check(k not in trail, "a key in the audit file: %s" % k)
        check("refused an API key in X-API-Key" in logs, "refusals are logged (rate-limited)")

    tests = [
        ("X-API-Key accepted, principal audited", t_x_api_key),
        ("Authorization: Bearer accepted", t_bearer),
        ("tools/list needs a key too", t_list),
        ("a wrong key: 401, challenge, no echo", t_wrong_key),
        ("no key: the kernel refuses the anonymous call", t_no_key),
        ("keys file edited + SIGHUP; a broken file keeps the old keys", t_reload),
        ("mcpg --check names the keys file's faults", t_check),
        ("gateway.anonymous: true serves a call without a key", t_anonymous_allowed),
        ("chain: a JWT-shaped Bearer token is passed on", t_chain_jwt_passed_on),
        ("chain: identity_apikey then identity_jwt", t_chain_identity_jwt),
        ("no key in any log or audit line", t_nothing_leaked),
        ("mTLS: the client certificate's URI SAN is the principal", lambda: t_mtls(ctx, audit)),
        ("mTLS: a certificate naming two principals, or a name with a NUL, is refused",
         lambda: t_mtls_one_name(ctx)),
    ]
    return run_tests(tests, ctx)


# ---------------------------------------------------------------------------
# mTLS, when transport_http serves TLS


def need_tls(ctx):
    rc, out, err = run_cli(ctx, ["--help-module", "transport_http"])
    if "tls_cert_file" not in out:
        raise Skip("transport_http has no tls_cert_file in its schema (no TLS yet)")


def tls_server(pki):
    """gateway.server: TLS with the pki's server certificate, client certificates optional."""
    return {"tls_cert_file": pki.path("server", "pem"), "tls_key_file": pki.path("server", "key"),
            "tls_client_ca_file": pki.path("ca", "pem"), "tls_client_auth": "optional"}


def tls_echo(pki, port, cert, rpc_id):
    """One echo call over TLS with the pki's client certificate `cert` (None: none)."""
    from tlskit import TlsConn
    with TlsConn(port, pki.client_context(cert)) as c:
        c.send(stateless_request(port, "tools/call", {"name": "echo",
                                                      "arguments": {"message": "hi"}},
                                 id=rpc_id, name="echo"))
        return c.read_response()


def t_mtls(ctx, audit):
    need_tls(ctx)
    from tlskit import Pki, TlsGateway  # comes with transport_http's TLS
    pki = Pki(ctx.path("pki"))  # alice: CN=alice/O=Acme, URI:spiffe://test/alice, ...
    m = base_manifest(audit_path=audit, server=tls_server(pki))
    m["modules"].append({"name": "mtls", "module": "identity_mtls", "config": {
        "principal_from": ["san_uri", "subject_cn"], "roles": ["guest"],
        "map": {"spiffe://test/alice": {"tenant": "acme", "roles": ["ops"]}}}})
    m["pipeline"]["identity"] = ["mtls"]

    with TlsGateway(ctx, pki.client_context("alice"), manifest=m, name="mtls") as g:
        r = tls_echo(pki, g.port, "alice", 71)
        expect_result(r, r.rpc(), 71, "mTLS alice")
        rec = wait_for(lambda: [x for x in read_audit(audit) if x.get("id") == 71
                                and x.get("event") == "mcpg.tool.call.completed"], 5,
                       "alice's completed line")[0]
        check_eq((rec.get("principal"), rec.get("tenant")), ("spiffe://test/alice", "acme"),
                 "mTLS principal (the URI SAN) and tenant from the map")
        r = tls_echo(pki, g.port, None, 72)
        expect_error(r, 401, REFUSED_2026, "TLS without a client certificate: anonymous refused",
                     id=72)
        try:
            r = tls_echo(pki, g.port, "mallory", 73)
            fail("a certificate of another CA was served: %r" % r)
        except (OSError, ssl.SSLError, ConnectionError):
            pass  # refused in the handshake



def t_mtls_one_name(ctx):
    """Certificates of the gateway's own CA whose names are not one principal: two CNs
    (in both orders), two URI SANs, a CN or a URI SAN with a NUL inside (made by
    patching a signed certificate and signing it again). Each is refused 401 by
    identity_mtls (not passed on to the anonymous check, not mapped by a later
    source), the log says why at most once a second, and the gateway goes on
    serving: alice's URI and bob's lone CN still map."""
    need_tls(ctx)
    from tlskit import Pki, TlsGateway
    pki = Pki(ctx.path("pki-names"))
    client = "extendedKeyUsage=clientAuth\n"
    pki.leaf("bob", "ca", "/CN=bob/O=Acme", 5001, client)
    pki.leaf("alice_admin", "ca", "/CN=alice/CN=admin", 5002, client)
    pki.leaf("admin_alice", "ca", "/CN=admin/CN=alice", 5003, client)
    pki.leaf("two_uris", "ca", "/CN=carol", 5004,
             "subjectAltName=URI:spiffe://test/alice,URI:spiffe://test/admin\n" + client)
    # "alice\0.evil": cut at its NUL, either name would be alice's
    pki.leaf_patched("nul_cn", "ca", "/CN=aliceZ.evil/O=Acme", 5005, client,
                     b"aliceZ.evil", b"alice\x00.evil")
    pki.leaf_patched("nul_uri", "ca", "/CN=carol", 5006,
                     "subjectAltName=URI:spiffe://test/aliceZ\n" + client,
                     b"spiffe://test/aliceZ", b"spiffe://test/alice\x00")
    audit = ctx.path("audit-names.jsonl")
    m = base_manifest(audit_path=audit, server=tls_server(pki))
    m["modules"].append({"name": "mtls", "module": "identity_mtls", "config": {
        "principal_from": ["san_uri", "subject_cn"],
        "map": {"spiffe://test/alice": {"tenant": "acme"}, "alice": {"tenant": "acme"},
                "admin": {"tenant": "acme", "roles": ["admin"]}, "bob": {"tenant": "acme"}}}})
    m["pipeline"]["identity"] = ["mtls"]

    def principal_of(rpc_id):
        rec = wait_for(lambda: [x for x in read_audit(audit) if x.get("id") == rpc_id
                                and x.get("event") == "mcpg.tool.call.completed"], 5,
                       "the completed line of call %d" % rpc_id)[0]
        return rec.get("principal"), rec.get("tenant")

    with TlsGateway(ctx, pki.client_context("alice"), manifest=m, name="mtls-names") as g:
        refused = [("alice_admin", "more than one CN in its subject"),
                   ("admin_alice", "more than one CN in its subject"),
                   ("two_uris", "more than one URI subjectAltName"),
                   ("nul_cn", "a malformed CN in its subject"),
                   ("nul_uri", "a malformed URI subjectAltName")]
        for i, (cert, why) in enumerate(refused):
            before = g.stderr().count("refused a client certificate")
            r = tls_echo(pki, g.port, cert, 80 + i)
            e = expect_error(r, 401, REFUSED_2026, "mTLS %s" % cert, id=80 + i)
            check("does not name one principal" in e["message"],
                  "%s: refused by identity_mtls, not as anonymous: %r" % (cert, e))
            text = g.stderr()
            # one line a second at most: a refusal within the second of the last is
            # counted in the next line instead
            check(why in text or text.count("refused a client certificate") == before,
                  "%s: the log says %r (or the line was held back):\n%s"
                  % (cert, why, g.stderr_tail()))
        check("more than one CN in its subject" in g.stderr(), "the first refusal is logged")
        check("CN=alice" not in g.stderr() and "evil" not in g.stderr(),
              "the certificates' names stay out of the log")
        r = tls_echo(pki, g.port, "alice", 90)
        expect_result(r, r.rpc(), 90, "mTLS alice after the refusals")
        check_eq(principal_of(90), ("spiffe://test/alice", "acme"), "alice's one URI SAN")
        r = tls_echo(pki, g.port, "bob", 91)
        expect_result(r, r.rpc(), 91, "mTLS bob")
        check_eq(principal_of(91), ("bob", "acme"), "bob's one CN")
        check(not [x for x in read_audit(audit) if 80 <= (x.get("id") or 0) < 90
                   and x.get("principal")], "no refused certificate reached a principal")

if __name__ == "__main__":
    sys.exit(main())
