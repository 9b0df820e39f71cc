#!/usr/bin/python3
"""Pinned module images: a module entry's "sha256" is the SHA-256 of its file.

  * the right pin starts and serves
  * a wrong pin is refused by --check and at start, with the line naming the
    key, the module, the file, the hash found and the one pinned; a second
    instance of the same file with a wrong pin is checked too
  * gateway.transport_sha256 pins the transport's file the same way
  * a pin that is no SHA-256 is a manifest error at its key
  * a reload after the file was replaced (another module's bytes) is refused
    naming the key (400), and so is a reload that changes the pin to another
    value; the running generation serves on
  * `mcpg modules --hash` and --json print the hash Python's hashlib computes"""
import hashlib
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, build_request, call_tool,  # noqa: E402
                     check, check_eq, expect_result, parse_args, replace_file, run_cli,
                     run_tests, send_one)

TOKEN = "pins-admin-token"


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def private_module_dir(ctx, name):
    """A copy of the built modules (real files, not links) that a test may change."""
    folder = ctx.path(name)
    os.makedirs(folder)
    for f in os.listdir(ctx.modules):
        if f.endswith(".so"):
            shutil.copyfile(os.path.join(ctx.modules, f), os.path.join(folder, f))
    return folder


def pinned_manifest(folder, pin, admin=False):
    m = base_manifest(server={"admin_token_env": "MCPG_TEST_PINS_ADMIN"} if admin else None)
    m["gateway"]["module_dir"] = folder
    m["modules"][0]["sha256"] = pin
    return m


def refusal(folder, key, pin, module="backend_mock"):
    path = os.path.realpath(os.path.join(folder, module + ".so"))
    return "%s: module \"%s\" file %s has sha256 %s, the manifest pins %s" % (
        key, module, path, sha256_of(path), pin)


def reload(gw):
    return send_one(gw.port, build_request(gw.port, "POST", "/admin/reload", headers=[
        ("Authorization", "Bearer " + TOKEN)]))


def check_refused(r, want):
    errors = json.loads(r.body).get("errors", [])
    check(any(want in e for e in errors), "the 400 names the key (%r): %r" % (want, errors))


def main():
    args = parse_args()
    ctx = Context(args)
    wrong = "0" * 64

    def t_right_pin_serves():
        folder = private_module_dir(ctx, "right")
        pin = sha256_of(os.path.join(folder, "backend_mock.so")).upper()  # either case
        with Gateway(ctx, manifest=pinned_manifest(folder, pin), name="right") as gw:
            r, rpc = call_tool(gw.port, "echo", {"message": "pinned"}, id=1)
            expect_result(r, rpc, 1, "a call to the pinned backend")

    def t_wrong_pin_refused():
        folder = private_module_dir(ctx, "wrong")
        path = ctx.write_manifest(pinned_manifest(folder, wrong), "wrong.json")
        line = "%s: %s" % (path, refusal(folder, "modules[0].sha256", wrong))
        rc, _, err = run_cli(ctx, ["--check", "--config", path])
        check(rc == 2 and line in err, "--check: rc %d, want the line %r in %s" % (rc, line, err))
        rc, _, err = run_cli(ctx, ["--config", path, "--listen", "127.0.0.1:0"], timeout=30)
        check(rc != 0 and line in err, "start: rc %d, want the line %r in %s" % (rc, line, err))

    def t_second_instance_checked():
        folder = private_module_dir(ctx, "second")
        m = pinned_manifest(folder, sha256_of(os.path.join(folder, "backend_mock.so")))
        m["modules"].append({"name": "mock2", "module": "backend_mock", "sha256": wrong,
                             "config": {"tools": [{"name": "echo2"}]}})
        path = ctx.write_manifest(m, "second.json")
        rc, _, err = run_cli(ctx, ["--check", "--config", path])
        line = "%s: %s" % (path, refusal(folder, "modules[1].sha256", wrong))
        check(rc == 2 and line in err, "two pins of one file: rc %d, want %r in %s" % (
            rc, line, err))
        check("modules[0].sha256" not in err, "the right pin is not reported: %s" % err)

    def t_transport_pin():
        folder = private_module_dir(ctx, "transport")
        m = pinned_manifest(folder, sha256_of(os.path.join(folder, "backend_mock.so")))
        m["gateway"]["transport_sha256"] = wrong
        path = ctx.write_manifest(m, "transport.json")
        rc, _, err = run_cli(ctx, ["--check", "--config", path])
        line = "%s: %s" % (path, refusal(folder, "gateway.transport_sha256", wrong,
                                         module="transport_http"))
        check(rc == 2 and line in err, "a wrong transport pin: rc %d, want %r in %s" % (
            rc, line, err))

    def t_malformed_pin():
        for bad in ("abc", "g" * 64, "a" * 65):
            m = base_manifest()
            m["modules"][0]["sha256"] = bad
            path = ctx.write_manifest(m)
            rc, _, err = run_cli(ctx, ["--check", "--config", path])
            want = "%s: modules[0].sha256: expected the module file's SHA-256" % path
            check(rc == 2 and want in err, "pin %r: rc %d, %s" % (bad, rc, err))

    def t_reload_refuses_swapped_file():
        folder = private_module_dir(ctx, "swap")
        module = os.path.join(folder, "backend_mock.so")
        pin = sha256_of(module)
        env = {"MCPG_TEST_PINS_ADMIN": TOKEN}
        with Gateway(ctx, manifest=pinned_manifest(folder, pin, admin=True), name="swap",
                     env=env) as gw:
            replace_file(gw.config, pinned_manifest(folder, wrong, admin=True))
            r = reload(gw)
            check_eq(r.status, 400, "a reload changing the pin to another value (%r)" % r.body)
            want = refusal(folder, "modules[0].sha256", wrong)
            check_refused(r, want)
            replace_file(gw.config, pinned_manifest(folder, pin, admin=True))
            shutil.copyfile(os.path.join(ctx.modules, "backend_everything.so"), module + ".new")
            os.replace(module + ".new", module)
            r = reload(gw)
            check_eq(r.status, 400, "a reload of a swapped file with the old pin (%r)" % r.body)
            want = refusal(folder, "modules[0].sha256", pin)
            check_refused(r, want)
            r, rpc = call_tool(gw.port, "echo", {"message": "still here"}, id=2)
            expect_result(r, rpc, 2, "the running generation serves on")

    def t_modules_prints_hashlib_hash():
        want = sha256_of(os.path.join(ctx.modules, "backend_mock.so"))
        rc, out, err = run_cli(ctx, ["modules", "--module-dir", ctx.modules, "--hash"])
        check_eq(rc, 0, "mcpg modules --hash (%s)" % err)
        header = out.splitlines()[0].split()
        check_eq(header[:2], ["NAME", "SHA256"], "the --hash header")
        rows = {ln.split()[0]: ln.split()[1] for ln in out.splitlines()[1:] if ln.strip()}
        check_eq(rows.get("backend_mock"), want, "backend_mock's hash in the listing")
        rc, out, err = run_cli(ctx, ["modules", "--module-dir", ctx.modules, "--json"])
        rows = {r["name"]: r for r in map(json.loads, out.splitlines())}
        check_eq(rows["backend_mock"].get("sha256"), want, "backend_mock's hash in --json")

    return run_tests([
        ("the right pin starts and serves", t_right_pin_serves),
        ("a wrong pin is refused at --check and at start", t_wrong_pin_refused),
        ("a second instance of the same file is checked against its own pin",
         t_second_instance_checked),
        ("gateway.transport_sha256 pins the transport's file", t_transport_pin),
        ("a pin that is no SHA-256 is an error at its key", t_malformed_pin),
        ("a reload of a changed pin or a swapped file is refused; the old generation serves",
         t_reload_refuses_swapped_file),
        ("mcpg modules prints the file's SHA-256 as hashlib does", t_modules_prints_hashlib_hash),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
