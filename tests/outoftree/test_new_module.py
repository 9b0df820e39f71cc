#!/usr/bin/python3
"""`mcpg new-module KIND NAME DIR`, from nothing to a loaded module answering.

`cmake --install` of this build goes to a temp prefix; its mcpg (the
installed binary, whose templates are compiled in) writes a folder for each
kind it generates. Each folder is configured, built and unit-tested (its
fake-host test) out of tree against the prefix, installed into the prefix's
module folder, `mcpg --check`ed with the manifest it holds, and served: one
call goes through the module (a backend's tool answers; an identity takes
its header and a call without it is refused 401; a policy denies the tool
its config names and lets another through; limits admit, and refuse with
429 when told; an audit sink prints each event; a metrics exporter answers
GET /metrics). The time from `new-module` to that answer is printed per kind.
Also the refusals: an unknown kind, a kind with no template, a bad name, a
folder that already holds files.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from gateway import (Context, Gateway, build_request, call_tool, check, check_eq,  # noqa: E402
                     expect_result, http_get, parse_args, rpc_body, run_cli, run_tests,
                     send_one, stateless_headers)
from test_outoftree import extra_args, run  # noqa: E402

KINDS = ("backend", "identity", "policy", "limits", "audit", "metrics")
REFUSED_KINDS = ("transport", "coordinator", "events")
WAIT_S = 10


def echo_call(port, headers=()):
    body = rpc_body("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
    r = send_one(port, build_request(port, headers=stateless_headers("tools/call", "echo")
                                     + list(headers), body=body))
    return r, r.rpc()


def wait_for(cond, what):
    deadline = time.monotonic() + WAIT_S
    while not cond():
        check(time.monotonic() < deadline, "not within %ss: %s" % (WAIT_S, what))
        time.sleep(0.02)


def serve_backend(ctx, manifest, name):
    with Gateway(ctx, manifest=manifest, name=name) as gw:
        r, rpc = call_tool(gw.port, "hello", {"name": "Ann"})
        res = expect_result(r, rpc, 1, "tools/call hello")
        check_eq(res.get("content"), [{"type": "text", "text": "Hello, Ann"}], "hello's answer")


def serve_identity(ctx, manifest, name):
    with Gateway(ctx, manifest=manifest, name=name) as gw:
        r, rpc = echo_call(gw.port, [("x-user", "ann")])
        expect_result(r, rpc, 1, "tools/call with x-user")
        r, rpc = echo_call(gw.port)
        check_eq(r.status, 401, "a call without x-user (%s)" % json.dumps(rpc))


def serve_policy(ctx, manifest, name):
    manifest["modules"][0]["config"]["tools"].append({"name": "rm"})
    manifest["modules"][1]["config"] = {"deny_tool": "rm"}
    with Gateway(ctx, manifest=manifest, name=name) as gw:
        r, rpc = echo_call(gw.port)
        expect_result(r, rpc, 1, "tools/call echo, allowed")
        r, rpc = call_tool(gw.port, "rm", {"message": "hi"}, id=2)
        check_eq(rpc.get("error", {}).get("message"), "tool rm is not allowed",
                 "rm denied by the policy: %s" % json.dumps(rpc))


def serve_limits(ctx, manifest, name):
    with Gateway(ctx, manifest=manifest, name=name) as gw:
        r, rpc = echo_call(gw.port)
        expect_result(r, rpc, 1, "tools/call echo, admitted")
    manifest["modules"][1]["config"] = {"admit": False}
    with Gateway(ctx, manifest=manifest, name=name + "-closed") as gw:
        r, rpc = echo_call(gw.port)
        check_eq(r.status, 429, "admit false refuses (%s)" % json.dumps(rpc))


def serve_audit(ctx, manifest, name):
    with Gateway(ctx, manifest=manifest, name=name) as gw:
        r, rpc = echo_call(gw.port)
        expect_result(r, rpc, 1, "tools/call echo, audited")
        line = "%s 1 mcpg.tool.call." % name
        wait_for(lambda: line in gw.stderr(), "%r on the gateway's stderr" % line)
        check("echo" in gw.stderr().split(line, 1)[1].splitlines()[0],
              "the line names the tool:\n" + gw.stderr_tail())


def serve_metrics(ctx, manifest, name):
    manifest["modules"][1]["config"] = {"comment": "from " + name}
    with Gateway(ctx, manifest=manifest, name=name) as gw:
        st, _, body = http_get(gw.port, "/metrics")
        check_eq((st, body), (200, ("# from %s\n" % name).encode()), "GET /metrics")


SERVE = {"backend": serve_backend, "identity": serve_identity, "policy": serve_policy,
         "limits": serve_limits, "audit": serve_audit, "metrics": serve_metrics}


def main():
    args = parse_args(extra_args)
    ctx = Context(args)
    prefix = ctx.path("prefix")
    gen = ["-G", args.generator] if args.generator else []
    timings = {}

    def new_module(*argv):
        return run_cli(ctx, ["new-module"] + list(argv))

    def t_install():
        run([args.cmake, "--install", os.path.abspath(args.build), "--prefix", prefix],
            "cmake --install")
        ctx.bin = os.path.join(prefix, "bin", "mcpg")  # the installed binary from here on
        check(os.access(ctx.bin, os.X_OK), "not installed: <prefix>/bin/mcpg")

    def t_refusals():
        rc, _, err = new_module("frontend", "frontend_x", ctx.path("no1"))
        check(rc == 2 and 'unknown kind "frontend"' in err, "unknown kind: %d %s" % (rc, err))
        for kind in REFUSED_KINDS:
            rc, _, err = new_module(kind, kind + "_x", ctx.path("no-" + kind))
            check(rc == 2 and "no %s template: " % kind in err, "%s: %d %s" % (kind, rc, err))
        for bad in ("Backend_x", "1backend", "backend-x", "b" * 65, ""):
            rc, _, err = new_module("backend", bad, ctx.path("no2"))
            check(rc == 2 and "bad module name" in err, "name %r: %d %s" % (bad, rc, err))
        full = ctx.path("full")
        os.mkdir(full)
        with open(os.path.join(full, "keep.txt"), "w") as f:
            f.write("mine\n")
        rc, _, err = new_module("backend", "backend_x", full)
        check(rc == 2 and "refusing to overwrite" in err, "a folder with files: %d %s" % (rc, err))
        check_eq(os.listdir(full), ["keep.txt"], "the folder's files, untouched")
        for d in ("no1", "no2") + tuple("no-" + k for k in REFUSED_KINDS):
            check(not os.path.exists(ctx.path(d)), "a refusal created " + d)
        rc, _, err = new_module("backend", "hello", ctx.path("named"))
        check(rc == 0 and "backend_<what>" in err, "a name without its kind: a note: %s" % err)

    def generate_and_serve(kind):
        name = kind + "_t"
        src = ctx.path(name)
        t0 = time.monotonic()
        rc, out, err = new_module(kind, name, src)
        check_eq(rc, 0, "mcpg new-module %s %s (%s)" % (kind, name, err))
        check_eq(sorted(os.listdir(src)), sorted(["%s.c" % name, "test_%s.c" % name, "%s.json" % name,
                                                  "CMakeLists.txt", "README.md"]), "files written")
        b = os.path.join(src, "build")
        run([args.cmake, "-S", src, "-B", b, "-DCMAKE_PREFIX_PATH=" + prefix] + gen,
            "configure " + name, env={"CC": args.cc})
        run([args.cmake, "--build", b], "build " + name)
        run([args.ctest, "--test-dir", b, "--output-on-failure"], name + "'s fake-host test")
        run([args.cmake, "--install", b, "--prefix", prefix], "install " + name)
        check(os.path.isfile(os.path.join(prefix, "lib", "mcpg", "modules", name + ".so")),
              "installed into <prefix>/lib/mcpg/modules")
        config = os.path.join(src, name + ".json")
        rc, out, err = run_cli(ctx, ["--check", "--config", config])
        check_eq(rc, 0, "mcpg --check --config %s.json (%s)" % (name, err))
        with open(config) as f:
            manifest = json.load(f)
        SERVE[kind](ctx, manifest, name)
        timings[kind] = time.monotonic() - t0
        print("%s: %.1f s from new-module to the loaded module answering" % (kind, timings[kind]))

    tests = [("install to a prefix", t_install),
             ("refusals: kind, name, a folder with files", t_refusals)]
    tests += [("new-module %s: build, test, install, check, serve" % k,
               (lambda k=k: generate_and_serve(k))) for k in KINDS]
    rc = run_tests(tests)
    for k in KINDS:
        print("time from new-module to a loaded %s answering: %s" % (
            k, "%.1f s" % timings[k] if k in timings else "(failed)"))
    if rc == 0:
        ctx.cleanup()
    return rc


if __name__ == "__main__":
    sys.exit(main())
