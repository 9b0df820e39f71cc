#!/usr/bin/python3
"""Modules built out of the mcpg tree, against nothing but an installed SDK.

`cmake --install` of this build goes to a temp prefix, which is then moved (so
nothing in it may name where it was installed). From a temp copy of
examples/backend_hello (so nothing can reach the source tree by a relative
path), the module is built twice: with CMake (find_package(mcpg),
mcpg_add_module) and with the plain cc command line printed in
docs/writing-a-module.md (pkg-config). Each .so then serves its tool in the
real gateway under the manifest printed in the docs, and `mcpg --check`
refuses a misspelt key of its config by name.
sdk/template is built the same way with its fake-host unit test, for
mcpg::fakehost. A program signing with <mcpg/whsig.h> is built both ways too
(mcpg::whsig, pkg-config's whsig_libs) and its signature checked against
Python's hmac. No compile or link command may name the source or build tree.
"""
import base64
import hashlib
import hmac
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from gateway import (Context, Gateway, call_tool, check, check_eq, expect_result,  # noqa: E402
                     fail, parse_args, run_cli, run_tests)

# What the gateway needs beside the module under test (single_node cluster, HTTP).
KERNEL_MODULES = ("transport_http", "coordinator_memory")
STEP_TIMEOUT = 120


def extra_args(ap):
    ap.add_argument("--build", required=True, help="the mcpg build tree to install from")
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--ctest", default="ctest")
    ap.add_argument("--cc", default="cc", help="the C compiler the build used")
    ap.add_argument("--generator", default=None)


def run(argv, what, cwd=None, env=None, shell=False):
    """Run a step; on failure fail with the command and everything it printed."""
    e = dict(os.environ)
    e.update(env or {})
    shown = argv if shell else " ".join(argv)
    try:
        p = subprocess.run(argv, cwd=cwd, env=e, shell=shell, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=STEP_TIMEOUT,
                           executable="/bin/bash" if shell else None)
    except subprocess.TimeoutExpired:
        fail("%s: timed out after %ss\n$ %s" % (what, STEP_TIMEOUT, shown))
    out = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        fail("%s failed (exit %d)\n$ %s\n%s" % (what, p.returncode, shown, out))
    return out


def no_tree_paths(text, trees, what):
    """No path into a tree: the tree's folder as a whole path component (a tree at
    /tmp/cc must not match the compiler's own /tmp/ccXXXX.s temporaries)."""
    for t in trees:
        hit = re.search(re.escape(t.rstrip("/")) + r"(?=$|[/\s'\";:=])", text, re.M)
        check(hit is None, "%s names %s (must use only the prefix):\n%s" % (what, t, text))


def main():
    args = parse_args(extra_args)
    ctx = Context(args)
    build = os.path.abspath(args.build)
    trees = (os.path.realpath(ctx.source), os.path.realpath(build))
    prefix = ctx.path("prefix")
    pc_env = {"PKG_CONFIG_PATH": os.path.join(prefix, "lib", "pkgconfig"), "CC": args.cc}
    gen = ["-G", args.generator] if args.generator else []
    built = {}
    with open(os.path.join(ctx.source, "docs", "writing-a-module.md")) as f:
        doc = f.read()

    def docs_manifest():
        found = [b for b in re.findall(r"```json\n(.*?)```", doc, re.S) if "backend_hello" in b]
        check_eq(len(found), 1, "json blocks with a backend_hello manifest in the docs")
        return found[0]

    def t_install():
        staging = ctx.path("staging")
        run([args.cmake, "--install", build, "--prefix", staging], "cmake --install")
        os.rename(staging, prefix)  # relocated: nothing may point at where it went first
        for f in ("include/mcpg/sdk.h", "include/mcpg/abi.h", "include/mcpg/fakehost.h",
                  "include/mcpg/whsig.h", "include/mcpg/errors.h", "lib/libmcpg_whsig.a",
                  "lib/libmcpg_sdk.a", "lib/libmcpg_fakehost.a", "lib/pkgconfig/mcpg.pc",
                  "lib/cmake/mcpg/mcpgConfig.cmake", "lib/cmake/mcpg/module.map"):
            check(os.path.isfile(os.path.join(prefix, f)), "not installed: <prefix>/" + f)
        for d in ("lib/cmake/mcpg", "lib/pkgconfig"):
            for name in os.listdir(os.path.join(prefix, d)):
                with open(os.path.join(prefix, d, name)) as fh:
                    no_tree_paths(fh.read(), trees + (ctx.path("staging"),), "<prefix>/%s/%s"
                                  % (d, name))

    def copy_of(rel):
        dst = ctx.path(ctx.unique(os.path.basename(rel)))
        shutil.copytree(os.path.join(ctx.source, rel), dst)
        return dst

    def t_cmake_build():
        src = copy_of("examples/backend_hello")
        b = os.path.join(src, "build")
        run([args.cmake, "-S", src, "-B", b, "-DCMAKE_PREFIX_PATH=" + prefix] + gen,
            "configure examples/backend_hello", env={"CC": args.cc})
        out = run([args.cmake, "--build", b, "-v"], "build examples/backend_hello")
        no_tree_paths(out, trees, "the CMake build's commands")
        built["cmake"] = os.path.join(b, "modules", "backend_hello.so")

    def t_pkgconfig_build():
        cmds = re.findall(r"(?m)^cc (?:.*\\\n)*.*$", doc)
        cmds = [c for c in cmds if "-o backend_hello.so hello.c" in c]
        check_eq(len(cmds), 1, "cc command lines building backend_hello.so in the docs")
        src = copy_of("examples/backend_hello")
        cmd = '"$CC"' + cmds[0][2:]
        out = run(cmd + " -v", "the docs' cc command", cwd=src, env=pc_env, shell=True)
        no_tree_paths(out, trees, "the cc command")
        built["pkg-config"] = os.path.join(src, "backend_hello.so")

    def t_template_with_fakehost():
        src = copy_of("sdk/template")
        b = os.path.join(src, "build")
        run([args.cmake, "-S", src, "-B", b, "-DCMAKE_PREFIX_PATH=" + prefix] + gen,
            "configure sdk/template", env={"CC": args.cc})
        out = run([args.cmake, "--build", b, "-v"], "build sdk/template")
        no_tree_paths(out, trees, "the template's build commands")
        run([args.ctest, "--test-dir", b, "--output-on-failure"], "sdk/template's fake-host test")

    # A program that signs a message it is given with <mcpg/whsig.h>, as a
    # module sending webhooks would; the signature must be hmac's.
    whsig_c = r"""#include <mcpg/whsig.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    unsigned char key[MCPG_WHSIG_KEY_MAX];
    size_t kn;
    char sig[MCPG_WHSIG_SIG_MAX];
    if (argc != 5 || mcpg_whsig_secret_decode(argv[1], strlen(argv[1]), key, sizeof key, &kn) ||
        mcpg_whsig_sign(key, kn, argv[2], strlen(argv[2]), argv[3], strlen(argv[3]), argv[4],
                        strlen(argv[4]), sig))
        return 1;
    puts(sig);
    return 0;
}
"""
    whsig_cmake = """cmake_minimum_required(VERSION 3.20)
project(whsig_user LANGUAGES C)
find_package(mcpg 0.1 REQUIRED COMPONENTS sdk whsig)
add_executable(whsig_sign sign.c)
target_link_libraries(whsig_sign PRIVATE mcpg::whsig)
"""
    whsig_in = ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_outoftree", "1700000000",
                '{"uri": "mock://fleet/x"}')

    def whsig_expect():
        key = base64.b64decode(whsig_in[0][len("whsec_"):])
        mac = hmac.new(key, ".".join(whsig_in[1:]).encode(), hashlib.sha256).digest()
        return "v1," + base64.b64encode(mac).decode()

    def whsig_src():
        src = ctx.path(ctx.unique("whsig_user"))
        os.mkdir(src)
        for name, text in (("sign.c", whsig_c), ("CMakeLists.txt", whsig_cmake)):
            with open(os.path.join(src, name), "w") as fh:
                fh.write(text)
        return src

    def t_whsig_cmake():
        src = whsig_src()
        b = os.path.join(src, "build")
        run([args.cmake, "-S", src, "-B", b, "-DCMAKE_PREFIX_PATH=" + prefix] + gen,
            "configure the mcpg::whsig program", env={"CC": args.cc})
        out = run([args.cmake, "--build", b, "-v"], "build the mcpg::whsig program")
        no_tree_paths(out, trees, "the mcpg::whsig build's commands")
        got = run([os.path.join(b, "whsig_sign"), *whsig_in], "run the mcpg::whsig program")
        check_eq(got.strip(), whsig_expect(), "the mcpg::whsig program's signature")

    def t_whsig_pkgconfig():
        src = whsig_src()
        cmd = ('"$CC" -std=gnu11 $(pkg-config --cflags mcpg) -o whsig_sign sign.c '
               '$(pkg-config --variable=whsig_libs mcpg) -v')
        out = run(cmd, "cc + pkg-config whsig_libs", cwd=src, env=pc_env, shell=True)
        no_tree_paths(out, trees, "the whsig cc command")
        got = run([os.path.join(src, "whsig_sign"), *whsig_in], "run the pkg-config whsig program")
        check_eq(got.strip(), whsig_expect(), "the pkg-config whsig program's signature")

    def serve(how):
        so = built.get(how)
        check(so and os.path.isfile(so), "no backend_hello.so from the %s build" % how)
        nm = run(["nm", "-D", "--defined-only", so], "nm " + so)
        check_eq([ln.split()[-1] for ln in nm.splitlines() if ln.strip()],
                 ["mcpg_module_entry"], "symbols exported by the %s build" % how)
        mods = ctx.path(ctx.unique("modules"))
        os.mkdir(mods)
        shutil.copy(so, mods)
        for m in KERNEL_MODULES:
            os.symlink(os.path.join(ctx.modules, m + ".so"), os.path.join(mods, m + ".so"))

        def manifest(config):
            m = json.loads(docs_manifest())
            m["gateway"]["module_dir"] = mods
            m["modules"][0]["config"] = config
            return m

        bad = ctx.write_manifest(manifest({"greetng": "Hi"}))
        rc, out, err = run_cli(ctx, ["--check", "--config", bad])
        check(rc != 0, "mcpg --check accepted the key \"greetng\":\n" + out + err)
        check("modules[0].config.greetng" in err and "did you mean \"greeting\"" in err,
              "mcpg --check must name the key and suggest \"greeting\":\n" + err)

        with Gateway(ctx, manifest=manifest({"greeting": "Hi"}), name="hello-" + how) as gw:
            r, rpc = call_tool(gw.port, "hello", {"name": "Ann"})
            res = expect_result(r, rpc, 1, "tools/call hello")
            check_eq(res.get("content"), [{"type": "text", "text": "Hi, Ann!"}],
                     "the %s build's answer" % how)
            r, rpc = call_tool(gw.port, "hello", {"name": 7}, id=2)
            check_eq(rpc.get("error", {}).get("code"), -32602,
                     "a non-string name is invalid params: %s" % json.dumps(rpc))

    tests = [("install to a prefix, then move it", t_install),
             ("CMake build of examples/backend_hello", t_cmake_build),
             ("the docs' cc + pkg-config build of examples/backend_hello", t_pkgconfig_build),
             ("the CMake-built module serves in the gateway", lambda: serve("cmake")),
             ("the pkg-config-built module serves in the gateway", lambda: serve("pkg-config")),
             ("sdk/template and its fake-host test, out of tree", t_template_with_fakehost),
             ("a program on mcpg::whsig signs as Python's hmac does", t_whsig_cmake),
             ("the same with cc + pkg-config's whsig_libs", t_whsig_pkgconfig)]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
