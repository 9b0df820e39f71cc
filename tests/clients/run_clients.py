"""Drive the official TypeScript SDK clients against mcpg (Python 3 standard library).

    run_clients.py --bin build/bin/mcpg --modules build/modules --source . --client v1|v2

Starts the gateway (tests/integration/gateway.py) on a free loopback port with
conf/everything.json and runs the client script(s) with the system Node (20 or
later): v1.mjs for the v1 SDK on the session wire; v2.mjs twice for the v2 client,
negotiating `auto` and pinned to 2026-07-28; v1-fleet runs v1.mjs across two
gateways on one redis-server (tests/integration/test_fleet_redis.py's Redis):
the session opened and streamed on A, its other POSTs and DELETE on B. Each script prints one PASS/FAIL line
a check. With --tls the gateway serves https (transport_http's TLS, a certificate
for localhost from a CA this run makes with the openssl command) and the clients
reach https://127.0.0.1:PORT/mcp (an IP SAN of the certificate) trusting that CA through NODE_EXTRA_CA_CERTS. Exit 1 when a check fails that expected-failures.txt does not list, when
a listed check passes (so the list only shrinks), or when a check printed nothing.
"""

import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import gateway as g  # noqa: E402
import tlskit  # noqa: E402

EXPECTED = os.path.join(HERE, "expected-failures.txt")
SCRIPT_TIMEOUT = float(os.environ.get("MCPG_CLIENT_TIMEOUT", "300"))

# Every check each run must report, in order: a check that printed no line
# (the script died) is a failure too.
V1_CHECKS = ["initialize", "get-stream", "tools-list", "tools-call", "resume-after-drop",
             "sampling", "elicitation", "delete-then-404"]
V2_CHECKS = ["connect", "discover", "tools-list", "tools-call", "input-required"]
RUNS = {
    "v1": [("v1", "v1.mjs", [], V1_CHECKS)],
    # two gateways on one redis-server: opened on A, used and ended on B
    "v1-fleet": [("v1-fleet", "v1.mjs", [], V1_CHECKS)],
    "v2": [("v2-auto", "v2.mjs", ["--mode", "auto"], V2_CHECKS),
           ("v2-pin", "v2.mjs", ["--mode", "pin"], V2_CHECKS)],
}

# What tools/call calls: the conformance fixture when conf/everything.json
# serves, else conf/mcpg.json's echo tool.
EVERYTHING_CALL = ("test_simple_text", {}, "This is a simple text response for testing.")
ECHO_CALL = ("echo", {"message": "hello from the SDK"}, "hello from the SDK")

LINE = re.compile(r"^(PASS|FAIL) (\S+)(?:: (.*))?$")


def parse_cli():
    def extra(ap):
        ap.add_argument("--client", required=True, choices=sorted(RUNS))
        ap.add_argument("--expected", default=EXPECTED)
        ap.add_argument("--tls", action="store_true",
                        help="serve https and run the clients over it")
    return g.parse_args(extra)


def read_expected(path):
    """{check: reason}; one `check-name: reason` a line, # comments."""
    out = {}
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            ln = raw.strip()
            if not ln or ln.startswith("#"):
                continue
            name, sep, reason = ln.partition(":")
            g.check(sep and name.strip() and reason.strip() and " " not in name.strip(),
                    "%s:%d: expected 'check-name: reason', got %r"
                    % (os.path.basename(path), n, ln))
            g.check(name.strip() not in out, "%s:%d: %s listed twice"
                    % (os.path.basename(path), n, name.strip()))
            out[name.strip()] = reason.strip()
    return out


def node_binary():
    node = shutil.which("node")
    g.check(node, "node is not on PATH (Node.js 20 or later is needed)")
    out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"^v(\d+)\.", out)
    g.check(m and int(m.group(1)) >= 20, "node %s is too old: the SDK clients need 20 or later" % out)
    return node


def run_script(node, script, extra, url, call, env=None):
    tool, args, expect = call
    argv = [node, os.path.join(HERE, script), "--url", url, "--tool", tool,
            "--args", json.dumps(args), "--expect", expect] + extra
    try:
        p = subprocess.run(argv, cwd=HERE, capture_output=True, text=True,
                           timeout=SCRIPT_TIMEOUT, preexec_fn=g._child_setup,
                           env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        if isinstance(out, bytes):
            out = out.decode("utf-8", "replace")
        return out, "timed out after %ss" % SCRIPT_TIMEOUT, None
    return p.stdout, p.stderr, p.returncode


def judge(run, checks, out, err, expected, problems):
    seen = {}
    for ln in out.splitlines():
        m = LINE.match(ln.strip())
        if m:
            seen[m.group(2)] = (m.group(1), m.group(3) or "")
    counts = {"pass": 0, "fail": 0, "xfail": 0}
    for c in ("%s-%s" % (run, c) for c in checks):
        verdict, why = seen.get(c, ("FAIL", "printed no result"))
        if verdict == "PASS":
            counts["pass"] += 1
            if c in expected:
                print("XPASS %s: passes now; remove it from expected-failures.txt" % c)
                problems.append("%s passes but is listed as an expected failure" % c)
            else:
                print("PASS  %s" % c)
            continue
        counts["fail"] += 1
        if c in expected:
            counts["xfail"] += 1
            print("XFAIL %s: %s (%s)" % (c, why, expected[c]))
        else:
            print("FAIL  %s: %s" % (c, why))
            problems.append("%s failed" % c)
    if counts["fail"] > counts["xfail"] and err.strip():
        print("--- %s stderr ---\n%s" % (run, err.strip()[-3000:]))
    return counts


def https_gateway(ctx, manifest_path):
    """The manifest with transport_http's TLS on (a CA and a localhost certificate
    made now), a gateway probed over https, and the clients' environment."""
    pki = tlskit.Pki(ctx.path("pki"), clients=False)
    with open(manifest_path) as f:
        m = json.load(f)
    server = m.setdefault("gateway", {}).setdefault("server", {})
    server.update({"tls_cert_file": pki.path("server", "pem"),
                   "tls_key_file": pki.path("server", "key")})
    gw = tlskit.TlsGateway(ctx, pki.client_context(), manifest=m, name="clients-https")
    return gw, {"NODE_EXTRA_CA_CERTS": pki.path("ca", "pem")}


def fleet_manifest(ctx, manifest_path, redis):
    """The manifest on Redis (cluster.kind redis, a coordinator_redis instance)."""
    with open(manifest_path) as f:
        m = json.load(f)
    m["cluster"] = {"kind": "redis"}
    m.setdefault("modules", []).insert(0, {
        "name": "cluster", "module": "coordinator_redis",
        "config": {"url": "redis://127.0.0.1:%d" % redis.port, "key_prefix": "clients:"}})
    return m


def main():
    args = parse_cli()
    expected = read_expected(args.expected)
    known = {"%s-%s" % (run, c) for runs in RUNS.values() for run, _, _, cs in runs for c in cs}
    for name in sorted(set(expected) - known):
        g.fail("expected-failures.txt lists %s, which no client script checks" % name)
    node = node_binary()
    g.check(os.path.isdir(os.path.join(HERE, "node_modules", "@modelcontextprotocol")),
            "tests/clients/node_modules is missing: run scripts/install-deps.sh")
    manifest = os.path.join(args.source, "conf", "everything.json")
    call = EVERYTHING_CALL
    if not os.path.exists(manifest):
        print("NOTE  conf/everything.json does not exist yet: conf/mcpg.json's echo tool instead")
        manifest, call = os.path.join(args.source, "conf", "mcpg.json"), ECHO_CALL

    ctx = g.Context(args)
    problems, total = [], {"pass": 0, "fail": 0, "xfail": 0}
    gw, scheme, env = g.Gateway(ctx, config=manifest, name="clients"), "http", {}
    if args.tls:
        gw, env = https_gateway(ctx, manifest)
        scheme = "https"
    redis, gw_b, url_b = None, None, []
    if args.client == "v1-fleet":
        from test_fleet_redis import Redis
        redis = Redis(ctx)
        redis.start()
        m = fleet_manifest(ctx, manifest, redis)
        gw = g.Gateway(ctx, manifest=m, name="clients-a")
        gw_b = g.Gateway(ctx, manifest=m, name="clients-b").start()
        url_b = ["--url-b", "http://127.0.0.1:%d/mcp" % gw_b.port]
    with gw:
        url = "%s://127.0.0.1:%d/mcp" % (scheme, gw.port)
        for run, script, extra, checks in RUNS[args.client]:
            extra = extra + url_b
            out, err, rc = run_script(node, script, extra, url, call, env)
            c = judge(run, checks, out, err, expected, problems)
            for k in total:
                total[k] += c[k]
            if rc is None:
                problems.append("%s: %s" % (run, err))
    if gw_b:
        gw_b.stop()
        redis.stop()
    print("%s clients%s: checks %d passed, %d failed (%d of them expected failures)"
          % (args.client, " over https" if args.tls else "", total["pass"], total["fail"],
             total["xfail"]))
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        print("(gateway logs kept in %s)" % ctx.tmp)
        return 1
    ctx.cleanup()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except g.TestFailure as e:
        print("FAIL %s" % e)
        sys.exit(1)
