"""What the install and Debian package tests both check of an installed tree
(a DESTDIR, or a package unpacked with dpkg-deb -x): its files, and its
gateway serving with no gateway.module_dir from where it was installed."""
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from gateway import (Context, Gateway, call_tool, check, check_eq, expect_result,  # noqa: E402
                     parse_args, run_cli)

# Step timeout for the builds and installs the tests run.
STEP_TIMEOUT = 900


def run(argv, what, cwd=None, env=None, shell=False):
    """Run a step; on failure fail with the command and everything it printed."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(argv, cwd=cwd, env=e, shell=shell, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=STEP_TIMEOUT,
                       executable="/bin/bash" if shell else None)
    out = p.stdout.decode("utf-8", "replace")
    check(p.returncode == 0, "%s failed (exit %d)\n$ %s\n%s"
          % (what, p.returncode, argv if shell else " ".join(argv), out))
    return out


def start(extra_args):
    """The test's arguments, its context, and the temp root it installs or
    unpacks into, with that root's usr/."""
    args = parse_args(extra_args)
    ctx = Context(args)
    root = ctx.path("root")
    return args, ctx, root, os.path.join(root, "usr")


def product_modules(source, build_modules):
    """The modules a build made from modules/<name>/: what an install holds
    (the build's folder also holds the tests' fixture modules)."""
    built = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(build_modules, "*.so"))}
    real = {d for d in os.listdir(os.path.join(source, "modules"))
            if os.path.isfile(os.path.join(source, "modules", d, "CMakeLists.txt"))}
    return built & real


def check_gateway_files(usr, modules):
    """usr: the installed /usr (or PREFIX); modules: the names expected."""
    for f in ("bin/mcpg", "bin/mcpg-load", "bin/mcpg-apikey", "bin/mcpg-bench-module"):
        check(os.access(os.path.join(usr, f), os.X_OK), "not installed executable: " + f)
    got = sorted(os.listdir(os.path.join(usr, "lib", "mcpg", "modules")))
    check_eq(got, sorted(m + ".so" for m in modules), "lib/mcpg/modules")
    check(os.path.isfile(os.path.join(usr, "share", "mcpg", "conf", "mcpg.json")),
          "not installed: share/mcpg/conf/mcpg.json")


def sdk_libdir(usr):
    """The folder holding libmcpg_sdk.a and pkgconfig/: lib/ or lib/<multiarch>/."""
    found = glob.glob(os.path.join(usr, "lib", "libmcpg_sdk.a")) + \
        glob.glob(os.path.join(usr, "lib", "*", "libmcpg_sdk.a"))
    check_eq(len(found), 1, "libmcpg_sdk.a installed under lib/ or lib/<multiarch>/ (%s)"
             % found)
    return os.path.dirname(found[0])


def check_sdk_files(usr):
    for h in ("abi.h", "module.h", "host.h", "sdk.h", "check.h", "fakehost.h", "whsig.h"):
        check(os.path.isfile(os.path.join(usr, "include", "mcpg", h)),
              "not installed: include/mcpg/" + h)
    lib = sdk_libdir(usr)
    for f in ("libmcpg_whsig.a", "libmcpg_fakehost.a", "cmake/mcpg/mcpgConfig.cmake",
              "cmake/mcpg/mcpg_module.cmake", "pkgconfig/mcpg.pc"):
        check(os.path.isfile(os.path.join(lib, f)), "not installed: %s/%s"
              % (os.path.relpath(lib, usr), f))
    pc = {"PKG_CONFIG_PATH": os.path.join(lib, "pkgconfig")}
    prefix = run(["pkg-config", "--variable=prefix", "mcpg"], "pkg-config prefix", env=pc)
    check_eq(os.path.realpath(prefix.strip()), os.path.realpath(usr), "mcpg.pc's prefix")
    cflags = run(["pkg-config", "--cflags", "mcpg"], "pkg-config --cflags", env=pc).split()
    incs = [os.path.realpath(f[2:]) for f in cflags if f.startswith("-I")]
    check(os.path.realpath(os.path.join(usr, "include")) in incs,
          "mcpg.pc's Cflags name <prefix>/include: %s" % cflags)
    return lib


def serve_example_manifest(ctx, usr):
    """The installed gateway on the installed conf/mcpg.json, which sets no
    module_dir: its modules must come from <usr>/lib/mcpg/modules."""
    ctx.bin = os.path.join(usr, "bin", "mcpg")
    rc, out, err = run_cli(ctx, ["--help-module", "backend_mock"])
    check(rc == 0 and "backend_mock" in out, "mcpg --help-module backend_mock from the "
          "installed binary (exit %d):\n%s%s" % (rc, out, err))
    conf = os.path.join(usr, "share", "mcpg", "conf", "mcpg.json")
    env = {"MCPG_AUDIT_FILE": ctx.path(ctx.unique("audit") + ".jsonl")}
    with Gateway(ctx, config=conf, env=env, name="installed") as gw:
        r, rpc = call_tool(gw.port, "echo", {"message": "hi"})
        res = expect_result(r, rpc, 1, "tools/call echo")
        check_eq(res.get("content"), [{"type": "text", "text": "Echo: hi"}],
                 "the installed gateway's echo")
