#!/usr/bin/python3
"""`make install`'s install step, as a packager runs it: `cmake --install` of
this build with prefix /usr into a temp DESTDIR.

The tree must hold the gateway and its tools in usr/bin, exactly the modules
under modules/ (no test fixture) in usr/lib/mcpg/modules, the SDK (headers,
static libraries, a mcpg.pc whose prefix is the installed usr, the CMake
package) and the example manifests. The installed gateway then serves the
installed conf/mcpg.json, which sets no gateway.module_dir, so it must find
its modules beside itself. Last, examples/backend_hello is built against that
prefix (CMake, and cc with pkg-config), installed into it by its own
`cmake --install`, and served by the installed gateway, again with no
module_dir.
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from installed import (check_gateway_files, check_sdk_files, product_modules,  # noqa: E402
                       run, serve_example_manifest, start)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from gateway import (Gateway, call_tool, check, check_eq, expect_result,  # noqa: E402
                     run_tests)


def extra_args(ap):
    ap.add_argument("--build", required=True, help="the mcpg build tree to install from")
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--cc", default="cc")


def main():
    args, ctx, destdir, usr = start(extra_args)
    found = {}

    def t_install():
        run([args.cmake, "--install", args.build, "--prefix", "/usr"], "cmake --install",
            env={"DESTDIR": destdir})
        check_gateway_files(usr, product_modules(ctx.source, ctx.modules))
        check(not [m for m in os.listdir(os.path.join(usr, "lib", "mcpg", "modules"))
                   if m.startswith("fx_")], "a test fixture was installed")
        found["lib"] = check_sdk_files(usr)

    def t_serve():
        serve_example_manifest(ctx, usr)

    def t_example():
        src = ctx.path("backend_hello")
        shutil.copytree(os.path.join(ctx.source, "examples", "backend_hello"), src)
        b = os.path.join(src, "build")
        run([args.cmake, "-S", src, "-B", b, "-DCMAKE_PREFIX_PATH=" + usr],
            "configure examples/backend_hello against the installed prefix", env={"CC": args.cc})
        run([args.cmake, "--build", b], "build examples/backend_hello")
        pc = {"PKG_CONFIG_PATH": os.path.join(found["lib"], "pkgconfig"), "CC": args.cc}
        run('"$CC" -std=gnu11 -fPIC -fvisibility=hidden -shared -o pc_hello.so hello.c '
            '$(pkg-config --cflags --libs mcpg) -Wl,-z,defs', "cc with pkg-config's mcpg",
            cwd=src, env=pc, shell=True)
        run([args.cmake, "--install", b, "--prefix", "/usr"], "cmake --install the example",
            env={"DESTDIR": destdir})
        check(os.path.isfile(os.path.join(usr, "lib", "mcpg", "modules", "backend_hello.so")),
              "the example's install rule did not put it in lib/mcpg/modules")
        ctx.bin = os.path.join(usr, "bin", "mcpg")
        manifest = {"gateway": {}, "cluster": {"kind": "single_node"},
                    "modules": [{"name": "hello", "module": "backend_hello",
                                 "config": {"greeting": "Hi"}}],
                    "bindings": [{"backend": "hello"}]}
        with Gateway(ctx, manifest=manifest, name="hello") as gw:
            r, rpc = call_tool(gw.port, "hello", {"name": "Ann"})
            res = expect_result(r, rpc, 1, "tools/call hello")
            check_eq(res.get("content"), [{"type": "text", "text": "Hi, Ann!"}],
                     "the installed example's answer")

    tests = [("cmake --install with prefix /usr into a DESTDIR", t_install),
             ("the installed gateway finds its modules beside itself", t_serve),
             ("examples/backend_hello against the installed prefix", t_example)]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
