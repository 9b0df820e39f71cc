#!/usr/bin/python3
"""Upstream credentials brokered per caller (docs/upstream-credentials.md), end to end:
callers sign in with JWTs identity_jwt verifies (keys made by jwt_mint); a token endpoint
written here checks every RFC 8693 token exchange and RFC 6749 client_credentials request
field by field (grant type, subject token = the caller's verified token, token types,
audience, scope, HTTP Basic client authentication) and issues opaque tokens it remembers;
a REST upstream written here takes only tokens that endpoint issued for its audience and
scope, and records who it saw. backend_http's four modes:

- exchange: the upstream sees only the exchanged token, never the caller's; two callers get
  two tokens; N calls of one caller within the token's life cost one exchange (cache hits
  and misses in /metrics), a new one after it expires; calls that miss together share one
  request; a token endpoint that is down, or refuses the subject token (revoked), fails the
  call closed with -32000 naming the instance and the endpoint's error, and nothing reaches
  the upstream;
- client_credentials: one token for every caller;
- passthrough: the caller's verified token, only when its aud names the upstream; a caller
  identified by an API key, or whose token lacks the audience, is refused;
- an upstream's 401 reaches the client as -32000 with its WWW-Authenticate challenge;
- no token, nor the client secret, appears in the gateway's log or audit file.

backend_mcp against fake_mcp_upstream.py taking only the endpoint's tokens for its audience
(and the gateway's own static token for the gateway's own requests), on both wires: each
caller's calls carry that caller's exchanged token; on the session wire each caller has a
session of its own, opened with its own token, that no other caller's call uses (the fake
refuses a session used with another principal's token); client_credentials opens one
session with the gateway's token for everyone; passthrough sends the caller's verified
token (on the session wire, on a session it opened), and an upstream refusing it answers
-32000 with its WWW-Authenticate challenge. A question the upstream asks on a caller's
session is answered there, with that caller's token."""
import base64
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, build_request, check, check_eq,  # noqa: E402
                     expect_error, new_apikey, parse_args, read_audit, replace_file, rpc_body,
                     run_tests, send_one, stateless_headers, stop_process, wait_for, Conn,
                     _child_setup)

ISS = "https://issuer.example"
GW_AUD = "https://gw.example/mcp"
META = "https://gw.example/.well-known/oauth-protected-resource"
UP_AUD = "https://reports.example"
PT_AUD = "https://files.example"
SCOPE = "reports:read"
CLIENT_ID = "mcpg-gateway"
SECRET = "s3cr3t-Of-The-Gateway"
SECRET_ENV = "MCPG_TEST_TOKEN_SECRET"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS = "urn:ietf:params:oauth:token-type:access_token"

args = parse_args()
ctx = Context(args)
MINT = os.path.join(os.path.dirname(args.bin), "jwt_mint")


# ---------------------------------------------------------------------------
# callers' tokens

class Signer:
    def __init__(self):
        self.pem = ctx.path("issuer.pem")
        out = subprocess.run([MINT, "keygen", "ES256", self.pem, "k1"], check=True,
                             capture_output=True, text=True, timeout=60).stdout
        self.jwk = json.loads(out)
        self.n = 0

    def token(self, sub, aud=None, exp_in=600):
        now = int(time.time())
        self.n += 1  # jti: each token its own, even for one subject
        claims = {"iss": ISS, "aud": aud or [GW_AUD], "sub": sub, "iat": now,
                  "exp": now + exp_in, "jti": "t%d" % self.n}
        h = {"alg": "ES256", "kid": "k1", "typ": "JWT"}
        return subprocess.run([MINT, "token", "ES256", self.pem, json.dumps(h), json.dumps(claims)],
                              check=True, capture_output=True, text=True, timeout=30).stdout.strip()


# ---------------------------------------------------------------------------
# the token endpoint and the upstream, each a thread of this test

class Server:
    """A ThreadingHTTPServer on a free loopback port, handler(server, req) per request."""

    def __init__(self, handler):
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                handler(outer, self)

            def do_GET(self):
                handler(outer, self)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


def reply(req, status, obj, headers=()):
    body = json.dumps(obj).encode()
    req.send_response(status)
    req.send_header("Content-Type", "application/json")
    req.send_header("Content-Length", str(len(body)))
    for k, v in headers:
        req.send_header(k, v)
    req.end_headers()
    req.wfile.write(body)


class TokenEndpoint:
    """RFC 8693 and client_credentials, every field checked; opaque tokens remembered."""

    def __init__(self, verified_subjects, issued_file):
        self.issued_file = issued_file  # what an MCP upstream reads to take the tokens
        self.issued = {}        # token -> {"aud", "scope", "sub"}
        self.requests = []      # (grant, sub) per request that passed the checks
        self.problems = []      # what a request got wrong
        self.revoked = set()    # subject tokens refused with invalid_grant
        self.short = set()      # subs whose tokens live 1 s
        self.hold = {}          # sub -> Event the answer waits for
        self.down = False       # every request's connection closed unanswered
        self.tried = []         # the sub (or grant) of every request that came, down or not
        self.subjects = verified_subjects  # subject token -> sub, as the test minted them
        self.assertion_keys = {}  # client id -> (alg, public key PEM path)
        self.jtis = set()
        self.server = Server(self.handle)

    def url(self):
        return "http://127.0.0.1:%d/oauth/token" % self.server.port

    def count(self, grant=None, sub=None):
        with self.server.lock:
            return sum(1 for g, s in self.requests
                       if (grant is None or g == grant) and (sub is None or s == sub))

    def tries(self, sub):
        with self.server.lock:
            return self.tried.count(sub)

    def problem(self, req, what):
        with self.server.lock:
            self.problems.append(what)
        reply(req, 400, {"error": "invalid_request", "error_description": what})

    def handle(self, server, req):
        n = int(req.headers.get("Content-Length", "0"))
        form = urllib.parse.parse_qs(req.rfile.read(n).decode(), strict_parsing=True)
        f = {k: v[0] for k, v in form.items() if len(v) == 1}
        if len(f) != len(form):
            return self.problem(req, "a field twice")
        with self.server.lock:
            self.tried.append(self.subjects.get(f.get("subject_token"), f.get("grant_type")))
        if self.down:
            req.close_connection = True  # as an endpoint behind a proxy that lost it
            return
        if req.path != "/oauth/token" or req.command != "POST":
            return self.problem(req, "path %s %s" % (req.command, req.path))
        if req.headers.get("Content-Type") != "application/x-www-form-urlencoded":
            return self.problem(req, "content type %r" % req.headers.get("Content-Type"))
        want = "Basic " + base64.b64encode(("%s:%s" % (CLIENT_ID, SECRET)).encode()).decode()
        client = CLIENT_ID
        if "Authorization" not in req.headers and "client_assertion" in f:
            client = self.assertion_client(f, req)
            if not client:
                return reply(req, 401, {"error": "invalid_client"})
        elif req.headers.get("Authorization") != want:
            return reply(req, 401, {"error": "invalid_client"})
        if "client_secret" in f:
            return self.problem(req, "the secret in the body")
        if f.get("grant_type") == EXCHANGE:
            return self.exchange(req, f)
        if f.get("grant_type") == "client_credentials":
            return self.client_credentials(req, f, client)
        return self.problem(req, "grant_type %r" % f.get("grant_type"))

    def exchange(self, req, f):
        expected = {"grant_type", "subject_token", "subject_token_type", "requested_token_type",
                    "audience", "scope"}
        if set(f) != expected:
            return self.problem(req, "fields %r" % sorted(f))
        if f["subject_token_type"] != ACCESS or f["requested_token_type"] != ACCESS:
            return self.problem(req, "token types %r" % f)
        if f["audience"] != UP_AUD or f["scope"] != SCOPE:
            return self.problem(req, "audience/scope %r %r" % (f["audience"], f["scope"]))
        sub = self.subjects.get(f["subject_token"])
        if sub is None:
            return self.problem(req, "a subject token this test never minted")
        if f["subject_token"] in self.revoked:
            return reply(req, 400, {"error": "invalid_grant",
                                    "error_description": "subject token revoked"})
        self.wait_hold(sub)
        return self.issue(req, EXCHANGE, sub, UP_AUD, SCOPE)

    def client_credentials(self, req, f, client):
        if set(f) != {"grant_type", "audience", "scope"} or f["audience"] != UP_AUD:
            return self.problem(req, "client_credentials fields %r" % sorted(f))
        return self.issue(req, "client_credentials", client, UP_AUD, f["scope"])

    def assertion_client(self, f, req):
        """RFC 7523: the client assertion's type, header, claims and signature checked; its
        fields leave f. The client id, or None (a problem recorded)."""
        if f.pop("client_assertion_type", None) != ASSERTION_TYPE:
            return self.problem(req, "client_assertion_type") and None
        jwt = f.pop("client_assertion")
        head, claims, sig = jwt.split(".")
        h, c = json.loads(unb64(head)), json.loads(unb64(claims))
        key = self.assertion_keys.get(c.get("iss"))
        now = time.time()
        bad = [k for k, ok in (("alg", key and h.get("alg") == key[0]), ("sub", c.get("sub") == c.get("iss")),
                               ("aud", c.get("aud") == self.url()), ("exp", now < c.get("exp", 0) <= now + 300),
                               ("jti", c.get("jti") and c["jti"] not in self.jtis))
               if not ok]
        if bad or not verify(key[1], (head + "." + claims).encode(), unb64(sig), key[0]):
            with self.server.lock:
                self.problems.append("assertion: %r" % (bad or "signature"))
            return None
        self.jtis.add(c["jti"])
        return c["iss"]

    def wait_hold(self, sub):
        ev = self.hold.get(sub)
        if ev:
            ev.wait(30)

    def issue(self, req, grant, sub, aud, scope):
        with self.server.lock:
            tok = "at-%d-%s" % (len(self.issued) + 1, os.urandom(12).hex())
            self.issued[tok] = {"aud": aud, "scope": scope, "sub": sub}
            self.requests.append((grant, sub))
            replace_file(self.issued_file, self.issued)
            life = 1 if sub in self.short else 120
        reply(req, 200, {"access_token": tok, "token_type": "Bearer", "expires_in": life,
                         "issued_token_type": ACCESS})


ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def unb64(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def der_int(b):
    b = b.lstrip(b"\0") or b"\0"
    if b[0] & 0x80:
        b = b"\0" + b
    return b"\x02" + bytes([len(b)]) + b


def verify(pub, data, sig, alg):
    """The signature checked by the openssl command (ES256's r||s made DER first)."""
    if alg == "ES256":
        body = der_int(sig[:32]) + der_int(sig[32:])
        sig = b"\x30" + bytes([len(body)]) + body
    name = ctx.unique("sig")
    with open(ctx.path(name + ".sig"), "wb") as f:
        f.write(sig)
    with open(ctx.path(name + ".data"), "wb") as f:
        f.write(data)
    r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", pub, "-signature",
                        ctx.path(name + ".sig"), ctx.path(name + ".data")],
                       capture_output=True, timeout=30)
    return r.returncode == 0


def keypair(alg, name):
    """A private key (PEM) by jwt_mint and its public key (PEM) by openssl."""
    priv, pub = ctx.path(name + ".pem"), ctx.path(name + ".pub.pem")
    subprocess.run([MINT, "keygen", alg, priv, name], check=True, capture_output=True, timeout=60)
    subprocess.run(["openssl", "pkey", "-in", priv, "-pubout", "-out", pub], check=True,
                   capture_output=True, timeout=30)
    return priv, pub


class Upstream:
    """GET /whoami: answers who the token is for, when the token endpoint issued it for this
    upstream's audience and scope, or it is a caller's token naming PT_AUD (passthrough)."""

    def __init__(self, endpoint, subjects):
        self.endpoint = endpoint
        self.subjects = subjects
        self.seen = []  # (token, sub)
        self.refuse_subs = {"mallory"}
        self.server = Server(self.handle)

    def url(self):
        return "http://127.0.0.1:%d/whoami" % self.server.port

    def tokens(self):
        with self.server.lock:
            return list(self.seen)

    def handle(self, server, req):
        auth = req.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else ""
        with self.endpoint.server.lock:
            info = self.endpoint.issued.get(tok)
        sub = info["sub"] if info and info["aud"] == UP_AUD and info["scope"] == SCOPE else None
        if sub is None and tok in self.subjects and req.path == "/whoami/pt":
            sub = self.subjects[tok]
        with server.lock:
            self.seen.append((tok, sub))
        if sub is None or sub in self.refuse_subs:
            return reply(req, 401, {"error": "invalid_token"}, [
                ("WWW-Authenticate", 'Bearer error="invalid_token", '
                 'resource_metadata="http://127.0.0.1:%d/.well-known/oauth-protected-resource"'
                 % server.port)])
        reply(req, 200, {"sub": sub, "token_no": tok.split("-")[1] if tok.startswith("at-") else "caller"})


class Closed:
    """A loopback port bound and never listening: connections to it are refused."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def close(self):
        self.sock.close()


# ---------------------------------------------------------------------------
# the gateway

def tool(name, url):
    return {"name": name, "method": "GET", "url": url, "timeout_ms": 20000}


def creds(mode, token_url=None, **over):
    c = {"mode": mode, "audience": UP_AUD, "scope": SCOPE}
    if token_url:
        c.update({"token_url": token_url, "client_id": CLIENT_ID, "client_secret_env": SECRET_ENV,
                  "refresh_margin_s": 0})
    c.update(over)
    return c


def manifest(env, audit):
    m = base_manifest(audit_path=audit, gateway={"workers": 2, "log_level": "debug"})
    jwks = ctx.path("jwks.json")
    with open(jwks, "w") as f:
        json.dump({"keys": [env["signer"].jwk]}, f)
    up, ep, closed = env["upstream"], env["endpoint"], env["closed"]
    m["modules"] += [
        {"name": "jwt", "module": "identity_jwt",
         "config": {"issuer": ISS, "audience": GW_AUD, "jwks_file": jwks,
                    "resource_metadata_url": META}},
        {"name": "keys", "module": "identity_apikey", "config": {"keys_file": ctx.path("keys.json")}},
        {"name": "reports", "module": "backend_http",
         "config": {"tools": [tool("report", up.url())],
                    "credentials": creds("exchange", ep.url())}},
        {"name": "service", "module": "backend_http",
         "config": {"tools": [tool("service_report", up.url())],
                    "credentials": creds("client_credentials", ep.url())}},
        {"name": "files", "module": "backend_http",
         "config": {"tools": [tool("file", up.url() + "/pt")],
                    "credentials": {"mode": "passthrough", "audience": PT_AUD}}},
        {"name": "down", "module": "backend_http",
         "config": {"tools": [tool("down_report", up.url())],
                    "credentials": creds("exchange", "http://127.0.0.1:%d/token" % closed.port,
                                         timeout_ms=5000)}},
        {"name": "flaky", "module": "backend_http",
         "config": {"tools": [tool("flaky_report", up.url())],
                    "credentials": creds("exchange", ep.url(), backoff_min_ms=BACKOFF_MS,
                                         backoff_max_ms=2 * BACKOFF_MS)}},
        {"name": "prom", "module": "metrics_prometheus"},
    ]
    for alg in ("ES256", "RS256"):
        c = creds("client_credentials", ep.url(), client_id="mcpg-" + alg,
                  private_key_file=env["keys"][alg])
        del c["client_secret_env"]
        m["modules"].append({"name": "keyed_" + alg, "module": "backend_http",
                             "config": {"tools": [tool("keyed_" + alg, up.url())],
                                        "credentials": c}})
    m["pipeline"]["identity"] = ["jwt", "keys"]
    m["bindings"] += [{"backend": b} for b in ("reports", "service", "files", "down", "flaky",
                                               "keyed_ES256", "keyed_RS256")]
    return m


BACKOFF_MS = 2000  # flaky's first back-off window, doubling to twice that


def call(gw, name, token=None, apikey=None, id=1):
    headers = stateless_headers("tools/call", name)
    if token:
        headers.append(("Authorization", "Bearer " + token))
    if apikey:
        headers.append(("Authorization", "Bearer " + apikey))
    body = rpc_body("tools/call", {"name": name, "arguments": {}}, id=id)
    return send_one(gw.port, build_request(gw.port, headers=headers, body=body))


def ok(gw, name, token, what):
    r = call(gw, name, token)
    check_eq(r.status, 200, what + ": status (%r)" % r.body[:300])
    rpc = r.rpc()
    check("result" in rpc and not rpc["result"].get("isError"), "%s: %r" % (what, rpc))
    return rpc["result"]["structuredContent"]


def refused(gw, name, token, what, apikey=None):
    r = call(gw, name, token, apikey=apikey)
    return expect_error(r, 200, -32000, what, id=1)


def metric(gw, name, labels):
    with Conn(gw.port) as c:
        c.send(build_request(gw.port, "GET", "/metrics"))
        r = c.read_response()
    check_eq(r.status, 200, "GET /metrics")
    want = "%s{%s}" % (name, ",".join('%s="%s"' % kv for kv in labels))
    for ln in r.body.decode().splitlines():
        if ln.startswith(want + " "):
            return float(ln.split()[-1])
    return 0.0


def cache(gw, instance, result):
    return metric(gw, "mcpg_upstream_token_cache_total", (("instance", instance), ("result", result)))


# ---------------------------------------------------------------------------

class Env(dict):
    def __enter__(self):
        subjects = {}
        self["subjects"] = subjects
        self["signer"] = Signer()
        self["endpoint"] = TokenEndpoint(subjects, ctx.path(ctx.unique("issued") + ".json"))
        self["upstream"] = Upstream(self["endpoint"], subjects)
        self["closed"] = Closed()
        self["keys"] = {}
        for alg in ("ES256", "RS256"):
            priv, pub = keypair(alg, ctx.unique("client-" + alg))
            self["keys"][alg] = priv
            self["endpoint"].assertion_keys["mcpg-" + alg] = (alg, pub)
        return self

    def mint(self, sub, **kw):
        t = self["signer"].token(sub, **kw)
        self["subjects"][t] = sub
        return t

    def __exit__(self, *a):
        self["endpoint"].server.close()
        self["upstream"].server.close()
        self["closed"].close()
        return False


def test_modes():
    audit = ctx.path("audit.jsonl")
    key = new_apikey(ctx, "grace")
    with Env() as env, Gateway(ctx, manifest(env, audit), env={SECRET_ENV: SECRET}) as gw:
        ep, up = env["endpoint"], env["upstream"]
        alice, bob = env.mint("alice"), env.mint("bob")

        # exchange: the upstream sees the exchanged token only; one exchange per caller
        for i in range(5):
            check_eq(ok(gw, "report", alice, "alice's call %d" % i)["sub"], "alice", "who")
        check_eq(ep.count(EXCHANGE, "alice"), 1, "alice's exchanges for 5 calls")
        check_eq(cache(gw, "reports", "miss"), 1.0, "misses after alice's calls")
        check_eq(cache(gw, "reports", "hit"), 4.0, "hits after alice's calls")
        check_eq(ok(gw, "report", bob, "bob's call")["sub"], "bob", "who")
        seen = up.tokens()
        check(all(t not in env["subjects"] for t, _ in seen), "a caller's own token reached the upstream")
        by_sub = {s: t for t, s in seen}
        check(by_sub["alice"] != by_sub["bob"], "alice and bob share a token")

        # expiry: bob's next token lives 1 s; a new exchange once it is gone
        ep.short.add("carol")
        carol = env.mint("carol")
        ok(gw, "report", carol, "carol's call")
        wait_for(lambda: ok(gw, "report", carol, "carol again") and ep.count(EXCHANGE, "carol") == 2,
                 20, "a second exchange once carol's token expired", interval=0.2)

        # single flight: calls that miss together share one request
        ev = threading.Event()
        ep.hold["dave"] = ev
        dave = env.mint("dave")
        results = []
        waits0 = cache(gw, "reports", "wait")
        ts = [threading.Thread(target=lambda: results.append(call(gw, "report", dave)))
              for _ in range(6)]
        for t in ts:
            t.start()
        wait_for(lambda: cache(gw, "reports", "wait") - waits0 == 5, 20, "5 calls waiting")
        ev.set()
        for t in ts:
            t.join(30)
        check_eq([r.status for r in results], [200] * 6, "the six calls")
        check(all("result" in r.rpc() for r in results), "the six calls' results")
        check_eq(ep.count(EXCHANGE, "dave"), 1, "dave's exchanges for 6 calls at once")

        # revoked: the endpoint refuses the subject token; nothing reaches the upstream
        erin = env.mint("erin")
        ep.revoked.add(erin)
        n_up = len(up.tokens())
        errors0 = metric(gw, "mcpg_upstream_token_errors_total", (("instance", "reports"),))
        e = refused(gw, "report", erin, "a revoked subject token")
        check("reports" in e["message"] and "invalid_grant" in e["message"], "message: %r" % e)
        check_eq(len(up.tokens()), n_up, "upstream requests after a refused exchange")
        check_eq(metric(gw, "mcpg_upstream_token_errors_total", (("instance", "reports"),)),
                 errors0 + 1, "token errors counted")

        # the endpoint down: fails closed
        e = refused(gw, "down_report", alice, "the token endpoint down")
        check("down" in e["message"] and "cannot be reached" in e["message"], "message: %r" % e)
        check_eq(len(up.tokens()), n_up, "upstream requests with the endpoint down")

        # client_credentials: one token for every caller
        for t in (alice, bob, alice):
            check_eq(ok(gw, "service_report", t, "service call")["sub"], CLIENT_ID, "who")
        check_eq(ep.count("client_credentials"), 1, "client_credentials requests")

        # private_key_jwt: the gateway's signed assertion instead of a secret
        for alg in ("ES256", "RS256"):
            for t in (alice, bob):
                check_eq(ok(gw, "keyed_" + alg, t, alg + " call")["sub"], "mcpg-" + alg, "who")
            check_eq(ep.count("client_credentials", "mcpg-" + alg), 1, alg + " token requests")

        # passthrough: the verified token with the audience, nothing else
        frank = env.mint("frank", aud=[GW_AUD, PT_AUD])
        check_eq(ok(gw, "file", frank, "passthrough")["sub"], "frank", "who")
        check_eq(up.tokens()[-1][0], frank, "the caller's token forwarded as is")
        n_up = len(up.tokens())
        e = refused(gw, "file", alice, "a token without the upstream's audience")
        check("files" in e["message"] and PT_AUD in e["message"], "message: %r" % e)
        check_eq(e.get("data", {}).get("reason"), "audience", "data: %r" % e)
        e = refused(gw, "file", None, "an API key caller", apikey=key)
        check("verified bearer token" in e["message"], "message: %r" % e)
        check_eq(len(up.tokens()), n_up, "upstream requests for refused passthroughs")

        # the upstream refuses: its challenge reaches the client
        mallory = env.mint("mallory")
        e = refused(gw, "report", mallory, "the upstream refusing the token")
        check("HTTP 401" in e["message"], "message: %r" % e)
        check("resource_metadata=" in e["data"]["upstream_www_authenticate"], "data: %r" % e)
        check_eq(ep.problems, [], "requests the token endpoint found wrong")

        secrets = [t for t in env["subjects"]] + list(ep.issued) + [SECRET]
        stop_log_audit = (gw, audit, secrets)
    gw_, audit_, secrets = stop_log_audit
    text = gw_.stderr() + open(audit_).read()
    check(len(read_audit(audit_)) > 20, "the audit file has the calls")
    for s in secrets:
        check(s not in text, "a token or the secret is in the log or audit file")


def error_of(gw, name, token):
    """The call's JSON-RPC error, or None when it succeeded."""
    r = call(gw, name, token)
    check_eq(r.status, 200, "status (%r)" % r.body[:300])
    return r.rpc().get("error")


def backed_off(e, in_a_row):
    """e is the refusal of a call in a back-off window: the failure's own message, said to be a
    recent one, and when the endpoint is asked again (seconds)."""
    m = re.search(r"\(a recent failure, (\d+) in a row: the token endpoint is asked again in "
                  r"([0-9.]+) s\)$", e["message"])
    check(m is not None, "not a back-off's refusal: %r" % e)
    check_eq(int(m.group(1)), in_a_row, "failures in a row")
    return float(m.group(2))


def test_backoff():
    """A token endpoint down: the first call fails naming it; the calls of that key within the
    back-off window fail at once, the same way, and the endpoint sees no request; after the
    window one request, and a window twice as long; once it is back, one request and then the
    cache. Another caller's key has its own; a caller's own refusal backs off only that key."""
    with Env() as env, Gateway(ctx, manifest(env, ctx.path("audit-backoff.jsonl")),
                               env={SECRET_ENV: SECRET}, name="backoff") as gw:
        ep = env["endpoint"]
        ivan, judy = env.mint("ivan"), env.mint("judy")
        ep.down = True
        e = refused(gw, "flaky_report", ivan, "the token endpoint down")
        check("flaky: the token endpoint %s cannot be reached" % ep.url() in e["message"] and
              "recent failure" not in e["message"], "message: %r" % e)
        first = e["message"]
        check_eq(ep.tries("ivan"), 1, "requests for ivan's first call")
        for i in range(3):
            e = refused(gw, "flaky_report", ivan, "ivan's call %d in the window" % i)
            check(e["message"].startswith(first + " ("), "the same error: %r" % e)
            left = backed_off(e, 1)
            check(0 < left <= BACKOFF_MS / 1000, "time left in the first window: %r" % left)
        check_eq(ep.tries("ivan"), 1, "requests for ivan's calls within the window")
        check_eq(cache(gw, "flaky", "backoff"), 3.0, "calls refused during the back-off")
        # another caller's key: its own request, its own window
        e = refused(gw, "flaky_report", judy, "judy's call, the endpoint down")
        check("recent failure" not in e["message"], "judy refused for ivan's failure: %r" % e)
        check_eq(ep.tries("judy"), 1, "requests for judy's call")

        # the window over: one request (still down), then a window twice as long
        wait_for(lambda: error_of(gw, "flaky_report", ivan) and ep.tries("ivan") == 2,
                 4 * BACKOFF_MS / 1000, "ivan's second request, after the window", interval=0.1)
        left = backed_off(refused(gw, "flaky_report", ivan, "after the second failure"), 2)
        check(BACKOFF_MS / 1000 < left <= 2 * BACKOFF_MS / 1000,
              "the second window doubles the first: %r s left" % left)

        # back: one request once the window is over, then the cache
        ep.down = False
        hits0 = cache(gw, "flaky", "hit")
        wait_for(lambda: error_of(gw, "flaky_report", ivan) is None, 6 * BACKOFF_MS / 1000,
                 "ivan's call through, once the endpoint is back", interval=0.1)
        check_eq(ep.tries("ivan"), 3, "requests for ivan's calls: one per window")
        for i in range(3):
            check_eq(ok(gw, "flaky_report", ivan, "ivan's call %d from the cache" % i)["sub"],
                     "ivan", "who")
        check_eq(ep.tries("ivan"), 3, "requests for ivan's calls after the token came")
        check_eq(cache(gw, "flaky", "hit") - hits0, 3.0, "cache hits")

        # a caller's own refusal: only that caller's key backs off
        kim, leo = env.mint("kim"), env.mint("leo")
        ep.revoked.add(kim)
        e = refused(gw, "flaky_report", kim, "kim's revoked token")
        check("invalid_grant" in e["message"] and "recent failure" not in e["message"],
              "message: %r" % e)
        check("invalid_grant" in refused(gw, "flaky_report", kim, "kim again")["message"],
              "kim's second refusal names the endpoint's error")
        backed_off(refused(gw, "flaky_report", kim, "kim once more"), 1)
        check_eq(ep.tries("kim"), 1, "requests for kim's calls within the window")
        check_eq(ok(gw, "flaky_report", leo, "leo, right after kim")["sub"], "leo", "who")
        check_eq(ep.tries("leo"), 1, "requests for leo's call")
        check_eq(ok(gw, "flaky_report", ivan, "ivan, right after kim")["sub"], "ivan", "who")
        check_eq(ep.problems, [], "requests the token endpoint found wrong")


def test_config_errors():
    from gateway import run_cli
    m = base_manifest()
    m["modules"].append({"name": "h", "module": "backend_http", "config": {
        "tools": [{"name": "t", "method": "GET", "url": "http://127.0.0.1:1/x",
                   "headers": {"Authorization": "Bearer fixed"}}],
        "credentials": {"mode": "exchange", "token_url": "http://127.0.0.1:1/t",
                        "client_id": "c", "client_secret_env": "MCPG_TEST_UNSET_SECRET",
                        "scope": "x", "backoff_min_ms": 5000, "backoff_max_ms": 1000}}})
    m["bindings"].append({"backend": "h"})
    path = ctx.write_manifest(m)
    rc, out, err = run_cli(ctx, ["--check", "--config", path], unset=("MCPG_TEST_UNSET_SECRET",))
    check(rc != 0, "--check accepts a bad credentials object")
    for want in ("modules[1].config.credentials.audience: is required with mode exchange",
                 "modules[1].config.credentials.client_secret_env: names MCPG_TEST_UNSET_SECRET",
                 "modules[1].config.credentials.backoff_max_ms: must not be less than "
                 "backoff_min_ms"):
        check(want in err, "%r not in:\n%s" % (want, err))
    m["modules"][1]["config"]["credentials"] = {"mode": "passthrough", "audience": "a"}
    path = ctx.write_manifest(m)
    rc, out, err = run_cli(ctx, ["--check", "--config", path])
    check("modules[1].config.tools[0].headers.Authorization: is set by credentials.mode" in err,
          "a tool's own Authorization beside brokered credentials:\n%s" % err)


# ---------------------------------------------------------------------------
# backend_mcp

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_mcp_upstream.py")
OWN = "Bearer the-gateways-own-static-token"


class FakeMcp:
    def __init__(self, env, wire, tag, get="405"):
        self.rec = ctx.path(tag + ".rec.jsonl")
        pf = ctx.path(tag + ".port")
        issued = env["endpoint"].issued_file
        replace_file(issued, {})
        self.proc = subprocess.Popen(
            [sys.executable, FAKE, "--http", "0", "--port-file", pf, "--wire", wire,
             "--record", self.rec, "--token-file", issued, "--token-audience", UP_AUD,
             "--require-auth", OWN, "--get", get], preexec_fn=_child_setup)
        wait_for(lambda: os.path.exists(pf), 15, "the fake upstream listening")
        with open(pf) as f:
            self.port = int(f.read())

    def url(self):
        return "http://127.0.0.1:%d/mcp" % self.port

    def records(self):
        with open(self.rec) as f:
            return [json.loads(ln) for ln in f if ln.strip()]

    def calls(self):
        return [r for r in self.records()
                if r.get("msg", {}).get("method") == "tools/call"]

    def stop(self):
        stop_process(self.proc)


def mcp_manifest(env, fake, credentials, headers=True):
    m = base_manifest(gateway={"workers": 2, "log_level": "debug"})
    jwks = ctx.path("jwks.json")
    with open(jwks, "w") as f:
        json.dump({"keys": [env["signer"].jwk]}, f)
    cfg = {"url": fake.url(), "credentials": credentials, "restart_min_ms": 100,
           "restart_max_ms": 400, "max_caller_sessions": 2}
    if headers:
        cfg["headers"] = {"Authorization": OWN}
    m["modules"] += [
        {"name": "jwt", "module": "identity_jwt",
         "config": {"issuer": ISS, "audience": GW_AUD, "jwks_file": jwks,
                    "resource_metadata_url": META}},
        {"name": "mcp", "module": "backend_mcp", "config": cfg},
        {"name": "prom", "module": "metrics_prometheus"},
    ]
    m["pipeline"]["identity"] = ["jwt"]
    m["bindings"].append({"backend": "mcp", "prefix": "mcp"})
    return m


def whoami(gw, token, what):
    r = call(gw, "mcp_whoami", token)
    check_eq(r.status, 200, what + ": status (%r)" % r.body[:300])
    rpc = r.rpc()
    check("result" in rpc and not rpc["result"].get("isError"), "%s: %r" % (what, rpc))
    return json.loads(rpc["result"]["content"][0]["text"])["authorization"]


def wait_listed(gw, env):
    token = env.mint("lister")

    def listed():
        body = rpc_body("tools/list", {}, id=1)
        headers = stateless_headers("tools/list") + [("Authorization", "Bearer " + token)]
        r = send_one(gw.port, build_request(gw.port, headers=headers, body=body))
        return r.status == 200 and "mcp_whoami" in r.body.decode()
    wait_for(listed, 20, "the upstream's tools listed", interval=0.1)


def issued_to(ep, auth):
    check(auth.startswith("Bearer "), "not a bearer token: %r" % auth)
    with ep.server.lock:
        return ep.issued.get(auth[7:], {}).get("sub")


def mcp_exchange(wire):
    def run():
        with Env() as env:
            ep = env["endpoint"]
            fake = FakeMcp(env, wire, ctx.unique("mcp-" + wire))
            try:
                creds_ = creds("exchange", ep.url())
                with Gateway(ctx, mcp_manifest(env, fake, creds_), env={SECRET_ENV: SECRET},
                             name="mcp-" + wire) as gw:
                    wait_listed(gw, env)
                    alice, bob = env.mint("alice"), env.mint("bob")
                    for i, (who, tok) in enumerate([("alice", alice), ("bob", bob), ("alice", alice),
                                                    ("bob", bob), ("alice", alice)]):
                        check_eq(issued_to(ep, whoami(gw, tok, "%s's call %d" % (who, i))), who,
                                 "the token %s's call carried" % who)
                    check_eq((ep.count(EXCHANGE, "alice"), ep.count(EXCHANGE, "bob")), (1, 1),
                             "one exchange per caller")
                    calls = fake.calls()
                    check_eq(len(calls), 5, "calls the upstream saw")
                    for c in calls:
                        check(c["headers"]["authorization"] not in env["subjects"],
                              "a caller's own token reached the upstream")
                    if wire == "legacy":
                        check_sessions(fake, ep, calls)
                        check_question(gw, env, fake, ep)
                        check_eviction(gw, env, fake)
                    # the endpoint refuses carol's token: nothing reaches the upstream
                    n_calls = len(fake.calls())
                    carol = env.mint("carol")
                    ep.revoked.add(carol)
                    e = refused(gw, "mcp_whoami", carol, "a revoked subject token")
                    check("invalid_grant" in e["message"], "message: %r" % e)
                    check_eq(len(fake.calls()), n_calls, "nothing reached the upstream for carol")
                    check_eq(ep.problems, [], "requests the token endpoint found wrong")
                no_secrets(gw.stderr(), env)
            finally:
                fake.stop()
    return run


def no_secrets(text, env):
    for s in list(env["subjects"]) + list(env["endpoint"].issued) + [SECRET, OWN[7:]]:
        check(s not in text, "a token or the secret is in the gateway's log")


def check_sessions(fake, ep, calls):
    recs = fake.records()
    opened = {r["minted"]: r["principal"] for r in recs if "minted" in r}
    check_eq(sorted(opened.values()), ["alice", "bob", "gateway"],
             "sessions: the gateway's and one per caller")
    for c in calls:
        sid = c["headers"].get("mcp-session-id")
        check_eq(opened.get(sid), issued_to(ep, c["headers"]["authorization"]),
                 "the session a call went on is its caller's")
    check_eq([r for r in recs if "crossed" in r], [], "a session used by another principal")


def session_of(fake, principal):
    return [r["minted"] for r in fake.records() if r.get("principal") == principal
            and "minted" in r]


ELICITING = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


def ask(gw, token, params, id):
    headers = stateless_headers("tools/call", "mcp_ask") + [("Authorization", "Bearer " + token)]
    body = rpc_body("tools/call", dict(params, name="mcp_ask", arguments={}, _meta=ELICITING), id=id)
    r = send_one(gw.port, build_request(gw.port, headers=headers, body=body))
    check_eq(r.status, 200, "ask: status (%r)" % r.body[:300])
    rpc = r.rpc()
    check("result" in rpc, "ask: %r" % rpc)
    return rpc["result"]


def check_question(gw, env, fake, ep):
    """The upstream asks alice's call a question on alice's session; alice (a stateless
    client) answers with a retry, and the answer goes back on alice's session, with her
    token: the upstream takes it there."""
    alice = env.mint("alice")
    first = ask(gw, alice, {}, 60)
    check_eq(first.get("resultType"), "input_required", "the first round: %r" % first)
    reply = {"action": "accept", "content": {"name": "Grace"}}
    done = ask(gw, alice, {"inputResponses": {"upstream": reply},
                           "requestState": first["requestState"]}, 61)
    check_eq(done.get("structuredContent"), {"got": reply}, "the upstream got the answer")
    answers = [r for r in fake.records() if "msg" in r and "method" not in r["msg"]]
    check_eq(len(answers), 1, "answers the upstream got")
    h = answers[0]["headers"]
    check_eq(h.get("mcp-session-id"), session_of(fake, "alice")[0], "the answer's session")
    check_eq(issued_to(ep, h["authorization"]), "alice", "the answer's token")


def check_eviction(gw, env, fake):
    """max_caller_sessions 2: a third caller's session closes the least recently used one
    (bob's: alice called last), with DELETE; bob's next call opens a new one."""
    whoami(gw, env.mint("dave"), "dave's call")
    deleted = [r["deleted"] for r in fake.records() if "deleted" in r]
    check_eq(deleted, session_of(fake, "bob"), "the session closed for dave's")
    whoami(gw, env.mint("bob"), "bob again")
    check_eq(len(session_of(fake, "bob")), 2, "bob's sessions")
    check_eq([r for r in fake.records() if "crossed" in r], [], "a session used by another")


def mcp_idle_close():
    """caller_session_idle_ms: a caller's session unused that long is closed (DELETE)."""
    with Env() as env:
        ep = env["endpoint"]
        fake = FakeMcp(env, "legacy", ctx.unique("mcp-idle"))
        try:
            m = mcp_manifest(env, fake, creds("exchange", ep.url()))
            m["modules"][-2]["config"]["caller_session_idle_ms"] = 1000
            with Gateway(ctx, m, env={SECRET_ENV: SECRET}, name="mcp-idle") as gw:
                wait_listed(gw, env)
                whoami(gw, env.mint("alice"), "alice's call")
                sid = session_of(fake, "alice")
                wait_for(lambda: [r["deleted"] for r in fake.records() if "deleted" in r] == sid,
                         20, "alice's idle session closed", interval=0.1)
        finally:
            fake.stop()


def tool_call(gw, token, name, arguments, what):
    headers = stateless_headers("tools/call", name) + [("Authorization", "Bearer " + token)]
    body = rpc_body("tools/call", {"name": name, "arguments": arguments}, id=1)
    r = send_one(gw.port, build_request(gw.port, headers=headers, body=body))
    check_eq(r.status, 200, what + ": status (%r)" % r.body[:300])
    rpc = r.rpc()
    check("result" in rpc and not rpc["result"].get("isError"), "%s: %r" % (what, rpc))
    return json.loads(rpc["result"]["content"][0]["text"])


def get_streams(fake, principal):
    """The GET streams the fake saw opened with principal's token: their session ids."""
    return [r["get_open"] for r in fake.records() if r.get("principal") == principal
            and "get_open" in r]


def open_streams(fake):
    """The sessions whose GET stream the fake has open (it sees one close within a second)."""
    n = {}
    for r in fake.records():
        for k, d in (("get_open", 1), ("get_closed", -1)):
            if k in r:
                n[r[k]] = n.get(r[k], 0) + d
    return [sid for sid, k in n.items() if k > 0]


def tools_listed(gw, token):
    body = rpc_body("tools/list", {}, id=1)
    headers = stateless_headers("tools/list") + [("Authorization", "Bearer " + token)]
    r = send_one(gw.port, build_request(gw.port, headers=headers, body=body))
    return [t["name"] for t in r.rpc().get("result", {}).get("tools", [])]


def mcp_caller_get():
    """Each caller's session has its own GET stream, opened with the caller's token. On it a
    list's change is handled as on the gateway's (the lists are fetched again), a ping is
    answered on that session with that token, and anything else (a resource update, a log
    line, a question) is dropped, counted in the debug log, the question answered with an
    error. A session closed (least recently used) closes its stream; never more streams
    than sessions."""
    with Env() as env:
        ep = env["endpoint"]
        fake = FakeMcp(env, "legacy", ctx.unique("mcp-get"), get="sse")
        try:
            m = mcp_manifest(env, fake, creds("exchange", ep.url()))
            with Gateway(ctx, m, env={SECRET_ENV: SECRET}, name="mcp-get") as gw:
                wait_listed(gw, env)
                alice = env.mint("alice")
                whoami(gw, alice, "alice's call")
                sid = session_of(fake, "alice")
                wait_for(lambda: get_streams(fake, "alice") == sid, 20,
                         "alice's GET stream, on her session, with her token", interval=0.05)

                def mine(what, **a):
                    return tool_call(gw, alice, "mcp_notify_mine", a, what)
                got = mine("a list's change", method="notifications/tools/list_changed",
                           add_tool="added_on_alices")
                check_eq(got["streams"], 1, "streams the list change went on")
                wait_for(lambda: "mcp_added_on_alices" in tools_listed(gw, alice), 20,
                         "the tools fetched again after the change on alice's stream",
                         interval=0.1)
                got = mine("a ping", method="ping", request=True)
                check_eq(got["reply"].get("result"), {}, "the ping's answer: %r" % got)
                answers = [r for r in fake.records()
                           if "msg" in r and r["msg"].get("id") == got["reply"]["id"]]
                check_eq([a["headers"].get("mcp-session-id") for a in answers], sid,
                         "the ping answered on alice's session")
                check_eq(issued_to(ep, answers[0]["headers"]["authorization"]), "alice",
                         "... with her token")
                mine("a resource update", method="notifications/resources/updated",
                     params={"uri": "fake://alice/secret"})
                mine("a log line", method="notifications/message",
                     params={"level": "error", "data": "for alice only"})
                got = mine("a question", method="elicitation/create", request=True,
                           params={"mode": "form", "message": "?", "requestedSchema": {}})
                check_eq(got["reply"].get("error", {}).get("code"), -32603,
                         "the question refused at once: %r" % got)
                line = (" from the upstream on a caller's session outside any request: "
                        "dropped (%d so far)")
                wait_for(lambda: "notifications/resources/updated" + line % 1 in gw.stderr() and
                         "notifications/message" + line % 2 in gw.stderr(), 20,
                         "the dropped messages counted in the debug log", interval=0.1)
                check("for alice only" not in gw.stderr(), "alice's log line logged")

                # max_caller_sessions 2: carol's session closes alice's, and its stream
                whoami(gw, env.mint("bob"), "bob's call")
                wait_for(lambda: get_streams(fake, "bob"), 20, "bob's GET stream",
                         interval=0.05)
                whoami(gw, env.mint("carol"), "carol's call")
                wait_for(lambda: [r["get_closed"] for r in fake.records() if "get_closed" in r]
                         == sid, 20, "alice's GET stream closed with her session", interval=0.1)
                check_eq([r["deleted"] for r in fake.records() if "deleted" in r], sid,
                         "the session closed")
                wait_for(lambda: get_streams(fake, "carol"), 20, "carol's GET stream",
                         interval=0.05)
                check_eq(sorted(open_streams(fake)), sorted(session_of(fake, who)[-1] for who in
                                                            ("gateway", "bob", "carol")),
                         "the GET streams open: the gateway's, bob's and carol's")
            no_secrets(gw.stderr(), env)
        finally:
            fake.stop()


def mcp_client_credentials():
    with Env() as env:
        ep = env["endpoint"]
        fake = FakeMcp(env, "legacy", ctx.unique("mcp-cc"))
        try:
            m = mcp_manifest(env, fake, creds("client_credentials", ep.url()), headers=False)
            with Gateway(ctx, m, env={SECRET_ENV: SECRET}, name="mcp-cc") as gw:
                wait_listed(gw, env)
                for who in ("alice", "bob"):
                    check_eq(issued_to(ep, whoami(gw, env.mint(who), who)), CLIENT_ID,
                             "%s's call carries the gateway's token" % who)
                check_eq(ep.count("client_credentials"), 1, "client_credentials requests")
                opened = [r["principal"] for r in fake.records() if "minted" in r]
                check_eq(opened, [CLIENT_ID], "one session, opened with the gateway's token")
            no_secrets(gw.stderr(), env)
        finally:
            fake.stop()


def mcp_passthrough(wire):
    def run():
        with Env() as env:
            fake = FakeMcp(env, wire, ctx.unique("mcp-pt-" + wire))
            try:
                m = mcp_manifest(env, fake, {"mode": "passthrough", "audience": PT_AUD})
                with Gateway(ctx, m, name="mcp-pt-" + wire) as gw:
                    wait_listed(gw, env)
                    tok = env.mint("frank", aud=[GW_AUD, PT_AUD])
                    e = refused(gw, "mcp_whoami", tok, "the upstream refusing the caller's token")
                    check("HTTP 401" in e["message"], "message: %r" % e)
                    check("resource_metadata=" in e["data"]["upstream_www_authenticate"],
                          "data: %r" % e)
                    auths = [r["headers"].get("authorization") for r in fake.records()
                             if "headers" in r and r["headers"].get("authorization") != OWN]
                    check(auths and all(a == "Bearer " + tok for a in auths),
                          "the caller's verified token, and only it, was passed")
                    # an upstream that takes the caller's token: the call goes through with it
                    grace = env.mint("grace", aud=[GW_AUD, PT_AUD])
                    ep = env["endpoint"]
                    with ep.server.lock:
                        ep.issued[grace] = {"sub": "grace", "aud": UP_AUD, "scope": SCOPE}
                        replace_file(ep.issued_file, ep.issued)
                    check_eq(whoami(gw, grace, "grace's call"), "Bearer " + grace,
                             "the caller's own token, as the upstream got it")
                    if wire == "legacy":
                        check_eq(len(session_of(fake, "grace")), 1, "grace's own session")
            finally:
                fake.stop()
    return run


if __name__ == "__main__":
    sys.exit(run_tests([
        ("backend_http: exchange, client_credentials, passthrough, refusals", test_modes),
        ("backend_http: a failed token request backs its key off", test_backoff),
        ("credentials config errors", test_config_errors),
        ("backend_mcp, stateless wire: exchange per caller", mcp_exchange("stateless")),
        ("backend_mcp, session wire: exchange, a session per caller", mcp_exchange("legacy")),
        ("backend_mcp, session wire: an idle caller's session closed", mcp_idle_close),
        ("backend_mcp, session wire: a caller's session's GET stream", mcp_caller_get),
        ("backend_mcp: client_credentials, one session", mcp_client_credentials),
        ("backend_mcp, stateless wire: passthrough, refused and taken", mcp_passthrough("stateless")),
        ("backend_mcp, session wire: passthrough, refused and taken", mcp_passthrough("legacy")),
    ], ctx))
