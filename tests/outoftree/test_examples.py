#!/usr/bin/python3
"""Each example module under examples/, built out of tree and run for real.

`cmake --install` of this build goes to a temp prefix once. Each example is
copied out of the source tree, configured against that prefix alone
(find_package(mcpg)), built and its fake-host unit test run with ctest. Its
manifest (examples/<name>/<name>.json) is then checked with `mcpg --check` and
served by the real gateway, from a module folder holding the built modules,
and one exchange shows the module at work (on the 2026-07-28 wire, which this
test speaks, a refusal's code is -32600: the module's own code is the session
wire's and the audit's):
  identity_header  with X-User 200, without it 401 with WWW-Authenticate
  policy_claim     a reader's get_user allowed, its delete_user refused (403)
  limits_tenant    the (N+1)th call of a tenant refused with 429 and
                   Retry-After, another tenant's call still served
  audit_syslog     the call's event read from a datagram socket the test binds
                   (the sink's `socket`), with the gateway's pid and facility
  backend_zlib     crc32 equal to Python's zlib.crc32, compress_ratio's sizes
                   equal to zlib.compress's
"""
import json
import os
import re
import shutil
import socket
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from gateway import (REFUSED_2026, Context, Gateway, build_request, check, check_eq,  # noqa: E402
                     expect_error, expect_result, parse_args, rpc_body, run_cli, run_tests,
                     send_one, stateless_headers)
from test_outoftree import KERNEL_MODULES, extra_args, no_tree_paths, run  # noqa: E402

# Where each example's manifest finds its backend when it is not the example.
STOCK_MODULES = KERNEL_MODULES + ("backend_mock",)
SYSLOG_TIMEOUT = 10


def request(port, method, params, headers=(), id=1):
    """A stateless request with extra headers; the response and its JSON-RPC body."""
    name = params.get("name")
    body = rpc_body(method, params, id=id)
    r = send_one(port, build_request(port, headers=stateless_headers(method, name) +
                                     list(headers), body=body))
    return r, r.rpc()


def call(port, tool, arguments, headers=(), id=1):
    return request(port, "tools/call", {"name": tool, "arguments": arguments}, headers, id)


def text_of(result, what):
    content = result.get("content") or [{}]
    check(isinstance(content[0].get("text"), str), "%s: no text content in %r" % (what, result))
    return content[0]["text"]


def main():
    args = parse_args(extra_args)
    ctx = Context(args)
    build = os.path.abspath(args.build)
    trees = (os.path.realpath(ctx.source), os.path.realpath(build))
    prefix = ctx.path("prefix")
    gen = ["-G", args.generator] if args.generator else []
    built = {}  # example name -> its .so

    def t_install():
        run([args.cmake, "--install", build, "--prefix", prefix], "cmake --install")

    def build_example(name):
        src = ctx.path(ctx.unique(name))
        shutil.copytree(os.path.join(ctx.source, "examples", name), src)
        b = os.path.join(src, "build")
        run([args.cmake, "-S", src, "-B", b, "-DCMAKE_PREFIX_PATH=" + prefix] + gen,
            "configure examples/" + name, env={"CC": args.cc})
        out = run([args.cmake, "--build", b, "-v"], "build examples/" + name)
        no_tree_paths(out, trees, "examples/%s's build commands" % name)
        run([args.ctest, "--test-dir", b, "--output-on-failure"], name + "'s fake-host test")
        built[name] = os.path.join(b, "modules", name + ".so")
        check(os.path.isfile(built[name]), "no %s.so from the build" % name)

    def manifest_of(name, configs=None):
        """The example's manifest, served from a folder with the built modules;
        configs: {instance name: {key: value}} laid over its config."""
        with open(os.path.join(ctx.source, "examples", name, name + ".json")) as f:
            m = json.load(f)
        mods = ctx.path(ctx.unique("modules"))
        os.mkdir(mods)
        for so in built.values():
            os.symlink(so, os.path.join(mods, os.path.basename(so)))
        for stock in STOCK_MODULES:
            os.symlink(os.path.join(ctx.modules, stock + ".so"), os.path.join(mods, stock + ".so"))
        m["gateway"]["module_dir"] = mods
        for inst in m["modules"]:
            inst.setdefault("config", {}).update((configs or {}).get(inst["name"], {}))
        path = ctx.write_manifest(m, ctx.unique(name) + ".json")
        rc, out, err = run_cli(ctx, ["--check", "--config", path])
        check_eq(rc, 0, "mcpg --check of examples/%s/%s.json (%s%s)" % (name, name, out, err))
        return m

    def t_identity():
        with Gateway(ctx, manifest=manifest_of("identity_header"), name="identity") as gw:
            r, rpc = call(gw.port, "echo", {"message": "hi"}, [("X-User", "ann")])
            res = expect_result(r, rpc, 1, "a call through the proxy (X-User)")
            check_eq(text_of(res, "echo"), "Echo: hi", "the answer")
            r, rpc = call(gw.port, "echo", {"message": "hi"}, [("X-Tenant", "acme")], id=2)
            expect_error(r, 401, REFUSED_2026, "a call without X-User", id=2)
            check_eq(r.header("WWW-Authenticate"), 'Trusted-Proxy realm="mcpg"', "the challenge")

    def t_policy():
        reader = [("X-User", "ann"), ("X-Role", "reader")]
        with Gateway(ctx, manifest=manifest_of("policy_claim"), name="policy") as gw:
            r, rpc = call(gw.port, "get_user", {"message": "7"}, reader)
            check_eq(text_of(expect_result(r, rpc, 1, "a reader's get_user"), "get_user"),
                     "Echo: 7", "get_user's answer")
            r, rpc = call(gw.port, "delete_user", {"message": "7"}, reader, id=2)
            err = expect_error(r, 403, REFUSED_2026, "a reader's delete_user", id=2)
            check("role \"reader\" may not call tool \"delete_user\"" in err["message"],
                  "the refusal names claim and tool: %r" % err)
            r, rpc = request(gw.port, "tools/list", {}, reader, id=3)
            names = sorted(t["name"] for t in expect_result(r, rpc, 3, "tools/list")["tools"])
            check_eq(names, ["get_user", "list_users"], "the tools a reader sees")

    def t_limits():
        # A long window: no token comes back while the test runs, however slow.
        m = manifest_of("limits_tenant", {"per_tenant": {"window_s": 3600}})
        n = next(i for i in m["modules"] if i["name"] == "per_tenant")["config"]["calls"]
        with Gateway(ctx, manifest=m, name="limits") as gw:
            acme = [("X-User", "ann"), ("X-Tenant", "acme")]
            for i in range(1, n + 1):
                r, rpc = call(gw.port, "echo", {"message": str(i)}, acme, id=i)
                expect_result(r, rpc, i, "acme's call %d of %d" % (i, n))
            r, rpc = call(gw.port, "echo", {"message": "over"}, acme, id=n + 1)
            err = expect_error(r, 429, REFUSED_2026, "acme's call %d" % (n + 1), id=n + 1)
            check("tenant acme" in err["message"], "names the tenant: %r" % err)
            retry = r.header("Retry-After")
            check(retry is not None and int(retry) >= 1, "Retry-After: %r" % retry)
            globex = [("X-User", "bo"), ("X-Tenant", "globex")]
            r, rpc = call(gw.port, "echo", {"message": "x"}, globex, id=99)
            expect_result(r, rpc, 99, "globex's first call, after acme ran out")

    def t_audit():
        path = ctx.path("syslog.sock")
        log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            log.bind(path)
            log.settimeout(SYSLOG_TIMEOUT)
            m = manifest_of("audit_syslog", {"syslog": {"socket": path}})
            with Gateway(ctx, manifest=m, name="audit") as gw:
                r, rpc = call(gw.port, "echo", {"message": "hi"})
                expect_result(r, rpc, 1, "the audited call")
                lines = []
                while not any("mcpg.tool.call.completed" in ln for ln in lines):
                    try:
                        lines.append(log.recv(65536).decode())
                    except socket.timeout:
                        check(False, "no completed event on the syslog socket within %ds: %r"
                              % (SYSLOG_TIMEOUT, lines))
                line = next(ln for ln in lines if "mcpg.tool.call.completed" in ln)
                mt = re.match(r"^<(\d+)>\w{3} [ \d]\d \d\d:\d\d:\d\d mcpg\[(\d+)\]: (\{.*\})$",
                              line)
                check(mt is not None, "an RFC 3164 line: %r" % line)
                check_eq(int(mt.group(1)), 16 * 8 + 6, "priority: local0.info")
                check_eq(int(mt.group(2)), gw.proc.pid, "the pid in the line")
                ev = json.loads(mt.group(3))
                check_eq((ev.get("tool"), ev.get("code")), ("echo", 0), "the event: %r" % ev)
        finally:
            log.close()

    def t_zlib():
        text = "mcpg \u00e9t\u00e9 " * 40
        with Gateway(ctx, manifest=manifest_of("backend_zlib"), name="zlib") as gw:
            r, rpc = call(gw.port, "crc32", {"text": text})
            check_eq(text_of(expect_result(r, rpc, 1, "crc32"), "crc32"),
                     str(zlib.crc32(text.encode())), "crc32 against Python's zlib.crc32")
            r, rpc = call(gw.port, "compress_ratio", {"text": text}, id=2)
            got = text_of(expect_result(r, rpc, 2, "compress_ratio"), "compress_ratio")
            raw = text.encode()
            want = "%d -> %d bytes" % (len(raw), len(zlib.compress(raw, 6)))
            check(got.startswith(want), "compress_ratio: %r, expected it to start %r" % (got, want))

    tests = [("install to a prefix", t_install)]
    for name in ("identity_header", "policy_claim", "limits_tenant", "audit_syslog",
                 "backend_zlib"):
        tests.append(("examples/%s: build and fake-host test out of tree" % name,
                      lambda n=name: build_example(n)))
    tests += [("identity_header: X-User 200, none 401 with a challenge", t_identity),
              ("policy_claim: a reader's allowed and refused tools", t_policy),
              ("limits_tenant: the (N+1)th call of a tenant is 429", t_limits),
              ("audit_syslog: the event on a syslog socket", t_audit),
              ("backend_zlib: crc32 and compress_ratio against Python's zlib", t_zlib)]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
