#!/usr/bin/python3
"""identity_jwt in the real gateway, with keys and tokens this test makes (jwt_mint, built
beside mcpg, signs with OpenSSL) and the issuer's JWKS served by a Python http.server thread:
good tokens of each algorithm identify the call (the audit line names the principal); expired,
not yet valid, wrong issuer, wrong audience, alg none and HS256 signed with the RSA public key
as secret are refused with 401 and -32600 saying what failed, never echoing the token; no
token and an API key are anonymous (the kernel's 401). An unknown kid fetches the JWKS once
(then not again within jwks_min_refresh_ms), key rotation is picked up, calls arriving while
a slow fetch runs share it; the JWKS URL down: cached keys serve on; a gateway started with it
down refuses tokens with 503 and Retry-After and recovers when it comes up. A jwks_file is
read again at reload (SIGHUP); a bad one refuses the reload. mcpg --check names bad keys. Each 401 is checked for the
WWW-Authenticate challenge when the transport passes it on."""
import base64
import hashlib
import hmac
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (REFUSED_2026, replace_file, Context, Gateway, base_manifest, build_request, check, check_eq,  # noqa: E402
                     expect_result, fail, parse_args, read_audit, run_cli, run_tests,
                     send_one, stateless_headers, rpc_body, wait_for)

ISS = "https://issuer.example"
AUD = "https://gw.example/mcp"
META = "https://gw.example/.well-known/oauth-protected-resource"
MIN_REFRESH_MS = 500

args = parse_args()
ctx = Context(args)
MINT = os.path.join(os.path.dirname(args.bin), "jwt_mint")
challenges_seen = []  # WWW-Authenticate values of 401s (empty while the transport drops them)


def b64url(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Key:
    """A private key in a PEM file and its public JWK, made by jwt_mint."""

    def __init__(self, alg, kid):
        self.alg, self.kid = alg, kid
        self.pem = ctx.path("%s.pem" % kid)
        out = subprocess.run([MINT, "keygen", alg, self.pem, kid], check=True,
                             capture_output=True, text=True, timeout=60).stdout
        self.jwk = json.loads(out)

    def token(self, claims=None, header=None, **overrides):
        c = good_claims()
        c.update(claims or {})
        for k, v in overrides.items():
            if v is None:
                c.pop(k, None)
            else:
                c[k] = v
        h = {"alg": self.alg, "kid": self.kid, "typ": "JWT"}
        h.update(header or {})
        return subprocess.run([MINT, "token", self.alg, self.pem, json.dumps(h), json.dumps(c)],
                              check=True, capture_output=True, text=True,
                              timeout=30).stdout.strip()

    def public_pem(self):
        return subprocess.run(["openssl", "pkey", "-in", self.pem, "-pubout"], check=True,
                              capture_output=True, timeout=30).stdout


def good_claims():
    now = int(time.time())
    return {"iss": ISS, "aud": [AUD, "other"], "sub": "alice", "iat": now, "exp": now + 600,
            "scope": "tools:read tools:call", "org": "acme"}


KEYS = {}


def key(kid):
    return KEYS[kid]


# ---------------------------------------------------------------------------
# the issuer's JWKS, served by this test


class Issuer:
    """A JWKS at http://127.0.0.1:<port>/jwks.json: which keys, how slow, how many GETs.

    Its port is bound at once (the system picks it) and held for the whole test:
    before start() and after stop() it is bound but not listening, so connections
    to it are refused and no other process can take it meanwhile."""

    def __init__(self):
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with issuer.lock:
                    issuer.requests += 1
                    body = json.dumps({"keys": [KEYS[k].jwk for k in issuer.kids]}).encode()
                    delay = issuer.delay
                if delay:
                    time.sleep(delay)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.kids = []
        self.delay = 0.0
        self.requests = 0
        self.lock = threading.Lock()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler,
                                                     bind_and_activate=False)
        self.httpd.daemon_threads = True
        self.httpd.server_bind()  # bound, not listening: refused until start()
        self.port = self.httpd.server_address[1]
        self.thread = None
        self.hold = None

    def url(self):
        return "http://127.0.0.1:%d/jwks.json" % self.port

    def serve(self, *kids):
        with self.lock:
            self.kids = list(kids)

    def count(self):
        with self.lock:
            return self.requests

    def start(self):
        self.httpd.server_activate()
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        """Down: the port refuses connections from now on (still held)."""
        if self.thread:
            self.httpd.shutdown()
            self.thread.join(10)
            self.thread = None
        if self.httpd:
            self.httpd.server_close()
            self.httpd = None
            self.hold = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.hold.bind(("127.0.0.1", self.port))

    def close(self):
        self.stop()
        if self.hold:
            self.hold.close()
            self.hold = None


# ---------------------------------------------------------------------------
# the gateway


def jwt_config(**over):
    c = {"issuer": ISS, "audience": AUD, "tenant_claim": "org", "roles_claim": "scope",
         "resource_metadata_url": META, "jwks_min_refresh_ms": MIN_REFRESH_MS,
         "jwks_timeout_ms": 3000}
    c.update(over)
    return c


def manifest(cfg, audit=None):
    m = base_manifest(audit_path=audit, gateway={"workers": 2})
    m["modules"].append({"name": "jwt", "module": "identity_jwt", "config": cfg})
    m["pipeline"]["identity"] = ["jwt"]
    return m


def call(gw, token=None, auth=None, id=1):
    headers = stateless_headers("tools/call", "echo")
    if token is not None:
        headers.append(("Authorization", "Bearer " + token))
    elif auth is not None:
        headers.append(("Authorization", auth))
    body = rpc_body("tools/call", {"name": "echo", "arguments": {"message": "hi"}}, id=id)
    return send_one(gw.port, build_request(gw.port, headers=headers, body=body))


def accepted(gw, token, what):
    r = call(gw, token)
    res = expect_result(r, r.rpc(), 1, what)
    check_eq(res["content"][0]["text"], "Echo: hi", what + ": answer")


def refused(gw, token, why, what, status=401, auth=None):
    r = call(gw, token, auth=auth)
    check_eq(r.status, status, "%s: HTTP status (body %r)" % (what, r.body[:300]))
    err = r.rpc().get("error") or {}
    check_eq(err.get("code"), REFUSED_2026 if status == 401 else -32000, what + ": code")
    msg = err.get("message", "")
    check(why in msg, "%s: %r does not say %r" % (what, msg, why))
    if token:
        check(token not in r.body.decode("utf-8", "replace"), what + ": the token is echoed")
    wa = r.header("www-authenticate")
    if status == 401 and wa is not None:
        challenges_seen.append(wa)
        check(wa.startswith('Bearer resource_metadata="%s"' % META),
              "%s: challenge %r" % (what, wa))
        if why.startswith("Unauthenticated"):
            check("error=" not in wa, "%s: anonymous challenge carries an error: %r" % (what, wa))
        else:
            check('error="invalid_token"' in wa and ('error_description="' in wa),
                  "%s: challenge %r" % (what, wa))
        if token:
            check(token not in wa, what + ": the token is echoed in the challenge")
    return r


ANON = "Unauthenticated"


# ---------------------------------------------------------------------------
# tests


def test_check_errors():
    cases = [
        ({"issuer": ISS, "audience": AUD}, "modules[1].config.jwks_file: is required"),
        (jwt_config(jwks_url="http://127.0.0.1:1/j", algorithms=["RS256", "HS256"]),
         "modules[1].config.algorithms[1]: must be"),
        (jwt_config(jwks_file=ctx.path("nope.json")),
         "modules[1].config.jwks_file: cannot read"),
        ({"audience": AUD, "jwks_url": "http://127.0.0.1:1/j"}, "modules[1].config.issuer"),
    ]
    for cfg, want in cases:
        path = ctx.write_manifest(manifest(cfg))
        rc, out, err = run_cli(ctx, ["--check", "--config", path])
        check_eq(rc, 2, "--check exit for %s" % want)
        check(want in out + err, "--check should say %r:\n%s%s" % (want, out, err))
    path = ctx.write_manifest(manifest(jwt_config(jwks_url="http://127.0.0.1:1/jwks.json")))
    rc, out, err = run_cli(ctx, ["--check", "--config", path])
    check_eq(rc, 0, "--check of a good manifest (%s%s)" % (out, err))


def test_tokens_and_rotation():
    issuer = Issuer().start()
    audit = ctx.path("jwt-audit.jsonl")
    try:
        issuer.serve("rsa-1", "ec-1", "ed-1")
        with Gateway(ctx, manifest(jwt_config(jwks_url=issuer.url()), audit=audit)) as gw:
            wait_for(lambda: issuer.count() >= 1, 10, "the first JWKS fetch")
            for kid in ("rsa-1", "ec-1", "ed-1"):
                accepted(gw, key(kid).token(), "good " + key(kid).alg)
            fetches = issuer.count()
            check_eq(fetches, 1, "JWKS fetches for known keys")
            recs = [r for r in read_audit(audit) if r.get("event") == "mcpg.tool.call.completed"]
            check(recs and all(r.get("principal") == "alice" for r in recs),
                  "audit names the principal: %r" % recs[-1:])

            refused(gw, None, ANON, "no token")
            refused(gw, None, ANON, "an API key", auth="Bearer sk_live_0123456789abcdef")
            ec = key("ec-1")
            now = int(time.time())
            refused(gw, ec.token(exp=now - 3600), "the token expired", "expired")
            refused(gw, ec.token(nbf=now + 3600), "not valid yet", "not yet valid")
            refused(gw, ec.token(iss="https://evil.example"), "wrong issuer", "wrong issuer")
            refused(gw, ec.token(aud="https://other.example"), "wrong audience",
                    "wrong audience")
            refused(gw, ec.token(exp=None), "no exp claim", "no exp")
            none = "%s.%s." % (b64url(json.dumps({"alg": "none", "typ": "JWT"})),
                               b64url(json.dumps(good_claims())))
            refused(gw, none, "alg none", "alg none")
            rsa = key("rsa-1")
            signing = "%s.%s" % (b64url(json.dumps({"alg": "HS256", "kid": "rsa-1"})),
                                 b64url(json.dumps(good_claims())))
            mac = hmac.new(rsa.public_pem(), signing.encode(), hashlib.sha256).digest()
            refused(gw, signing + "." + b64url(mac), "HMAC-signed tokens",
                    "HS256 with the RSA public key as secret")
            refused(gw, ec.token(header={"kid": "rsa-1"}), "not a key for the token alg",
                    "ES256 naming the RSA key (algorithm confusion)")
            forged = rsa.token()[:-4] + ("AAAA" if not rsa.token().endswith("AAAA") else "BBBB")
            refused(gw, forged, "signature does not verify", "a bad signature")
            check_eq(issuer.count(), fetches, "JWKS fetches after refusals that need no key")

            # an unknown kid: one fetch, still unknown; a second at once fetches nothing.
            # "At once" is judged by the clock: only a second call answered within
            # jwks_min_refresh_ms of the first call's start (so of the fetch) must not
            # fetch; one later tells nothing, and the pair is tried again.
            ec2 = key("ec-2")
            unknown = ec2.token()  # minted before the clock starts (jwt_mint is a process)
            for attempt in range(5):
                time.sleep(MIN_REFRESH_MS / 1000 + 0.1)  # past the last fetch's window
                n0 = issuer.count()
                t0 = time.monotonic()
                refused(gw, unknown, "unknown key id", "unknown kid")
                check_eq(issuer.count(), n0 + 1, "one fetch for an unknown kid")
                refused(gw, unknown, "unknown key id", "unknown kid again, too soon")
                elapsed = time.monotonic() - t0
                if elapsed < MIN_REFRESH_MS / 1000:
                    check_eq(issuer.count(), n0 + 1, "no second fetch within jwks_min_refresh_ms")
                    break
                print("    two refused calls took %.2f s, not within jwks_min_refresh_ms %d: "
                      "again" % (elapsed, MIN_REFRESH_MS))
            else:
                fail("no two calls within jwks_min_refresh_ms (%d ms) in 5 tries"
                     % MIN_REFRESH_MS)
            fetches = issuer.count() - 1  # below, fetches + 1 is the count after the unknown kid

            # rotation: the issuer adds ec-2
            issuer.serve("rsa-1", "ec-1", "ed-1", "ec-2")
            time.sleep(MIN_REFRESH_MS / 1000 + 0.1)
            accepted(gw, ec2.token(), "the rotated-in key")
            check_eq(issuer.count(), fetches + 2, "the new kid fetched once")
            accepted(gw, ec2.token(), "the rotated-in key again")
            check_eq(issuer.count(), fetches + 2, "no fetch for a key now known")

            # calls arriving while a slow fetch runs share it
            issuer.serve("rsa-1", "ec-1", "ed-1", "ec-2", "ed-2")
            issuer.delay = 0.5
            time.sleep(MIN_REFRESH_MS / 1000 + 0.1)
            tok = key("ed-2").token()
            results = [None] * 4

            def one(i):
                try:
                    r = call(gw, tok, id=i + 1)
                    results[i] = (r.status, r.rpc().get("result"))
                except Exception as e:  # reported below
                    results[i] = e

            threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(20)
            issuer.delay = 0.0
            check(all(isinstance(x, tuple) and x[0] == 200 and x[1] for x in results),
                  "calls during a slow fetch: %r" % (results,))
            check_eq(issuer.count(), fetches + 3, "the waiting calls shared one fetch")

            # the JWKS URL down: the keys fetched before serve on
            issuer.stop()
            accepted(gw, key("rsa-1").token(), "cached keys while the JWKS URL is down")
            time.sleep(MIN_REFRESH_MS / 1000 + 0.1)
            refused(gw, key("ec-3").token(), "unknown key id", "unknown kid, JWKS URL down")
            accepted(gw, ec2.token(), "still serving after a failed fetch")
            wait_for(lambda: "JWKS %s: unreachable" % issuer.url() in gw.stderr(), 10,
                     "the failed fetch logged")
    finally:
        issuer.close()


def test_started_down():
    issuer = Issuer()  # not started: its port (held) refuses connections
    cfg = jwt_config(jwks_url=issuer.url())
    try:
        with Gateway(ctx, manifest(cfg)) as gw:
            tok = key("ed-1").token()
            r = refused(gw, tok, "signing keys (JWKS) are not available", "no keys ever",
                        status=503)
            check(r.header("retry-after") is not None, "503 without Retry-After")
            wait_for(lambda: "no keys yet: tokens are refused (503)" in gw.stderr(), 10,
                     "the reason logged")
            issuer.serve("ed-1")
            issuer.start()
            # the next fetch (a call's, or the retry after a failure) finds the keys
            deadline = time.monotonic() + 15
            while True:
                time.sleep(MIN_REFRESH_MS / 1000 + 0.1)
                r = call(gw, tok)
                if r.status == 200 or time.monotonic() > deadline:
                    break
            expect_result(r, r.rpc(), 1, "the JWKS URL came up")
    finally:
        issuer.close()


def reload(gw, generation):
    """SIGHUP, then wait until the new generation serves and the old one retired (a
    SIGHUP while one retires is skipped)."""
    gw.signal(signal.SIGHUP)
    wait_for(lambda: "generation %d retired" % (generation - 1) in gw.stderr(), 15,
             "generation %d serving, %d retired" % (generation, generation - 1))


def test_file_reload():
    path = ctx.path("jwks.json")

    def write(*kids):
        replace_file(path, {"keys": [key(k).jwk for k in kids]})

    write("rsa-1")
    with Gateway(ctx, manifest(jwt_config(jwks_file=path))) as gw:
        accepted(gw, key("rsa-1").token(), "a key from the file")
        refused(gw, key("ec-1").token(), "unknown key id", "a key not in the file")
        write("rsa-1", "ec-1")
        reload(gw, 2)
        accepted(gw, key("ec-1").token(), "the key added to the file, after SIGHUP")
        # a bad file refuses the reload (validate reads it): the generation and its keys
        # serve on
        with open(path, "w") as f:
            f.write('{"keys":')
        gw.signal(signal.SIGHUP)
        wait_for(lambda: "generation 2 serves on" in gw.stderr(), 15, "the reload refused")
        check("modules[1].config.jwks_file: %s: the JWKS is not valid JSON" % path
              in gw.stderr(), "the refusal names the key and the file")
        accepted(gw, key("ec-1").token(), "the keys before a bad file serve on")


def test_protected_resource():
    """With identity_jwt, RFC 9728 metadata is served by default from its audience and
    issuer; false turns it off; metadata without authorization_servers is refused at
    --check and at start, naming the key."""
    path = ctx.path("jwks-prm.json")
    with open(path, "w") as f:
        json.dump({"keys": [key("rsa-1").jwk]}, f)
    with Gateway(ctx, manifest(jwt_config(jwks_file=path)), name="prm") as gw:
        for p in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
            r = send_one(gw.port, build_request(gw.port, "GET", p))
            check_eq(r.status, 200, "GET %s (%r)" % (p, r.body[:200]))
            check_eq(json.loads(r.body), {"resource": AUD, "authorization_servers": [ISS],
                                          "bearer_methods_supported": ["header"]}, p)
    m = manifest(jwt_config(jwks_file=path))
    m["gateway"]["server"] = {"oauth_protected_resource": False}
    with Gateway(ctx, m, name="prm-off") as gw:
        r = send_one(gw.port, build_request(gw.port, "GET", "/.well-known/oauth-protected-resource"))
        check_eq(r.status, 404, "oauth_protected_resource: false")
    with Gateway(ctx, base_manifest(), name="prm-none") as gw:
        r = send_one(gw.port, build_request(gw.port, "GET", "/.well-known/oauth-protected-resource"))
        check_eq(r.status, 404, "no OAuth identity stage: nothing to describe")
    m["gateway"]["server"] = {"oauth_protected_resource": {"resource": AUD}}
    mpath = ctx.write_manifest(m, "prm-no-as.json")
    want = "gateway.server.oauth_protected_resource.authorization_servers"
    rc, out, err = run_cli(ctx, ["--check", "--config", mpath])
    check(rc == 2 and want in err, "--check names %s (rc %d):\n%s" % (want, rc, err))
    rc, out, err = run_cli(ctx, ["--config", mpath, "--listen", "127.0.0.1:0"])
    check(rc != 0 and want in err, "a start is refused naming %s (rc %d):\n%s" % (want, rc, err))


def test_insufficient_scope():
    """A token whose scopes (roles_claim "scope") no rule for the tool admits: 403 with the
    step-up challenge naming the scopes those rules need and the resource metadata;
    -32600 on the 2026-07-28 wire, -32003 on the legacy one."""
    path = ctx.path("jwks-scope.json")
    with open(path, "w") as f:
        json.dump({"keys": [key("rsa-1").jwk]}, f)
    m = manifest(jwt_config(jwks_file=path))
    m["modules"].append({"name": "rules", "module": "policy_rules", "config": {"rules": [
        {"id": "writers", "roles": ["files:write", "admin-*"], "tools": "echo"},
        {"id": "acme-only", "tenant": "acme", "roles": "echo:run", "tools": "echo"}]}})
    m["pipeline"]["policy"] = ["rules"]
    want = ('Bearer error="insufficient_scope", scope="files:write echo:run", '
            'resource_metadata="%s"' % META)
    with Gateway(ctx, m, name="scope") as gw:
        r = call(gw, key("rsa-1").token())  # scope "tools:read tools:call", org acme
        check_eq(r.status, 403, "a token without the scope (body %r)" % r.body[:300])
        check_eq(r.rpc()["error"]["code"], REFUSED_2026, "the 2026-07-28 wire's code")
        check_eq(r.header("www-authenticate"), want, "the step-up challenge")
        claims = good_claims()
        claims["org"] = "globex"  # the acme rule cannot admit it, whatever its scopes
        r = call(gw, key("rsa-1").token(claims))
        check_eq(r.header("www-authenticate"), want.replace(" echo:run", ""),
                 "only the scopes of rules that would admit the caller")
        claims["scope"] = "files:write"
        accepted(gw, key("rsa-1").token(claims), "the token with the scope")


def test_challenges_report():
    """Says whether the 401s above carried WWW-Authenticate (checked as they came)."""
    print("WWW-Authenticate on 401s: %s" % (
        "%d checked" % len(challenges_seen) if challenges_seen
        else "not passed on by this transport yet (not checked)"))


def main():
    check(os.access(MINT, os.X_OK), "jwt_mint not built beside mcpg: %s" % MINT)
    for alg, kid in (("RS256", "rsa-1"), ("ES256", "ec-1"), ("EdDSA", "ed-1"),
                     ("ES256", "ec-2"), ("EdDSA", "ed-2"), ("ES256", "ec-3")):
        KEYS[kid] = Key(alg, kid)
    code = run_tests([
        ("mcpg --check names bad identity_jwt keys", test_check_errors),
        ("tokens, refusals, unknown kid, rotation, JWKS down", test_tokens_and_rotation),
        ("a gateway started with the JWKS URL down", test_started_down),
        ("a jwks_file read again at reload", test_file_reload),
        ("RFC 9728 metadata: served from identity_jwt, off with false, checked",
         test_protected_resource),
        ("403 insufficient_scope names the scopes the rules need", test_insufficient_scope),
        ("WWW-Authenticate challenges", test_challenges_report),
    ], ctx)
    return code


if __name__ == "__main__":
    sys.exit(main())
